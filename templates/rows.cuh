// ---- the rows loop --------------------------------------------------------------------------
namespace lj {

// F::kCommonPath: the element has a common_path (codegen/kinds/elementwise_emit.cpp) whose logs skip their rare inputs and flag them.
template <class F>
__device__ constexpr auto has_common_path(int) -> decltype(F::kCommonPath) { return F::kCommonPath; }
template <class F>
__device__ constexpr bool has_common_path(long) { return false; }

// Rows: every operand walks the innermost dimension with stride 1 (or 0: one value per row), so a
// tile of the row is read with VW-wide loads and index arithmetic happens once per tile, not per
// element. All UNROLL loads of a tile are issued before any arithmetic, to keep several in flight.
template <int BLOCK, int UNROLL, int VW, int R, class F, class Sink>
__device__ __forceinline__ void for_rows(const Extents& e, const Inputs<F::kInputs>& in, const F& f, Sink& sink) {
    using T = typename F::Value;
    constexpr int N = F::kInputs;
    constexpr int S = N > 0 ? N : 1;
    constexpr long long kTile = (long long)BLOCK * UNROLL * VW;
    const long long inner = e.dims[R - 1];
    if (inner == 0) return;
    const long long tiles_per_row = (inner + kTile - 1) / kTile;
    const long long rows = R == 1 ? 1 : e.count / inner;
    // Tiles in turn across the grid, or (sink.whole_rows(): a gradient summed along rows, many rows)
    // whole rows in turn, a block taking its row's tiles one after another. The tile's row and place
    // in the row are stepped, not divided out: a division by a value known only at run time costs
    // tens of instructions per tile, shared by only 16 elements per thread in a bfloat16 reduction.
    const bool whole_rows = R > 1 && sink.whole_rows();
    // Block and grid counts in tiles per row (32-bit divisions: both counts are below 2^32).
    const auto in_rows = [&](unsigned x) -> long long {
        return tiles_per_row > 0xffffffffLL ? 0 : x / (unsigned)tiles_per_row;
    };
    long long row = R == 1 ? 0 : whole_rows ? (long long)blockIdx.x : in_rows(blockIdx.x);
    long long in_row = whole_rows ? 0 : (long long)blockIdx.x - row * tiles_per_row;  // the tile's place in its row
    // After each tile: `row_step` rows on and `in_row_step` tiles along; where the place passes the
    // row's end, `wrap_step` rows more.
    const long long row_step = R == 1 || whole_rows ? 0 : in_rows(gridDim.x);
    const long long in_row_step = whole_rows ? 1 : (long long)gridDim.x - row_step * tiles_per_row;
    const long long wrap_step = whole_rows ? gridDim.x : 1;
    // The grid a multiple of the tiles per row (plan_grid makes it so where it helps): each block
    // keeps to the same columns in every row, so operands that repeat every row (F::same_every_row:
    // t [C] against p [N, C]) are loaded once, before the first tile, and kept in registers.
    const bool same_columns = !whole_rows && in_row_step == 0;
    bool held = false;  // same_columns: the repeating operands' tile is loaded

    // VW == 8 (operands of 16 bits or fewer, or asked for): the tile is held as loaded and each
    // element converted where it is used (dtype.cuh: Raw); else converted as loaded. Operands that
    // repeat every row go to `kept_*`, which live across tiles; the others' arrays are the tile's own.
    constexpr bool kRaw = VW == 8;
    T kept_v[kRaw ? 1 : UNROLL][S][VW];
    Raw<kRaw ? VW : 4> kept_raw[kRaw ? UNROLL : 1][S];
    while (row < rows) {
        const long long col0 = in_row * kTile;
        long long c[kMaxRank];
        long long rest = row;
#pragma unroll
        for (int d = R - 2; d > 0; --d) {
            c[d] = rest % e.dims[d];
            rest /= e.dims[d];
        }
        c[0] = rest;
        long long base[S];  // in elements of input k's type
        T fixed[S];
#pragma unroll
        for (int k = 0; k < N; ++k) {
            base[k] = offset<R - 1>(c, in.strides[k]);
            fixed[k] = F::inner_stride(k) == 0 ? load1<T>(F::dtype(k), in.ptr[k], base[k]) : T(0);
        }
        sink.template begin_row<R>(c);

        T tile_v[kRaw ? 1 : UNROLL][S][VW];
        Raw<kRaw ? VW : 4> tile_raw[kRaw ? UNROLL : 1][S];
        // Where operand k's values of unrolled step u live: kept across tiles if it repeats every row.
        const auto values = [&](int u, int k) -> T (&)[VW] {
            return F::same_every_row(k) ? kept_v[u][k] : tile_v[u][k];
        };
        const auto raw_values = [&](int u, int k) -> Raw<kRaw ? VW : 4>& {
            return F::same_every_row(k) ? kept_raw[u][k] : tile_raw[u][k];
        };
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long long col = col0 + ((long long)u * BLOCK + threadIdx.x) * VW;
            if (col < inner) {  // VW > 1 only when inner % VW == 0
#pragma unroll
                for (int k = 0; k < N; ++k) {
                    if (F::same_every_row(k) && held) continue;
                    if constexpr (kRaw) {
                        if (F::inner_stride(k) != 0) load_raw<VW>(F::dtype(k), in.ptr[k], base[k] + col, raw_values(u, k));
                    } else {
                        auto& v = values(u, k);
                        if (F::inner_stride(k) == 0) {
#pragma unroll
                            for (int j = 0; j < VW; ++j) v[j] = fixed[k];
                        } else {
                            load_row<VW>(F::dtype(k), in.ptr[k], base[k] + col, v);
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long long col = col0 + ((long long)u * BLOCK + threadIdx.x) * VW;
            if (col < inner) {
                T x[VW][S];
#pragma unroll
                for (int j = 0; j < VW; ++j) {
#pragma unroll
                    for (int k = 0; k < N; ++k) {
                        if constexpr (!kRaw) {
                            x[j][k] = values(u, k)[j];
                        } else if (F::inner_stride(k) == 0) {
                            x[j][k] = fixed[k];
                        } else {
                            x[j][k] = unpack<VW, T>(F::dtype(k), raw_values(u, k), j);
                        }
                    }
                }
                typename F::Result r[VW];
                if constexpr (has_common_path<F>(0)) {
                    // The vector on the common path, and again in full if an input was rare (a log of
                    // 0, of a negative, a subnormal, inf or nan): one flag test per vector rather than
                    // a branch per log.
                    bool rare = false;
#pragma unroll
                    for (int j = 0; j < VW; ++j) r[j] = f.common_path(x[j], rare);
                    if (rare) {
#pragma unroll
                        for (int j = 0; j < VW; ++j) r[j] = f(x[j]);
                    }
                } else {
#pragma unroll
                    for (int j = 0; j < VW; ++j) r[j] = f(x[j]);
                }
                sink.template put<VW>(r, col);
            }
        }
        sink.template end_tile<BLOCK>(row * tiles_per_row + in_row, row, tiles_per_row, rows * tiles_per_row);
        held = same_columns;
        row += row_step;
        in_row += in_row_step;
        if (in_row >= tiles_per_row) {
            in_row -= tiles_per_row;
            row += wrap_step;
        }
    }
}

}  // namespace lj
