// ---- the rows loop --------------------------------------------------------------------------
namespace lj {

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
    // Divisions by a value known only at run time cost tens of instructions in 64 bits; a map takes
    // a tile or two per block, so none where the layout is one row (R == 1), and 32 bits per tile
    // where the tiles' count allows.
    const long long tiles = (R == 1 ? 1 : e.count / inner) * tiles_per_row;
    const bool narrow = tiles <= 0xffffffffLL;
    // Tiles in turn across the grid, or (sink.whole_rows(): a gradient summed along rows, many rows)
    // whole rows in turn, a block taking its row's tiles one after another.
    const bool whole_rows = sink.whole_rows();
    long long done_in_row = 0;  // whole rows: tiles of the current row done
    const auto next = [&](long long t) {
        if (!whole_rows) return t + gridDim.x;
        if (++done_in_row < tiles_per_row) return t + 1;
        done_in_row = 0;
        return t + 1 + (long long)(gridDim.x - 1) * tiles_per_row;  // the first tile gridDim.x rows on
    };
    for (long long t = whole_rows ? (long long)blockIdx.x * tiles_per_row : (long long)blockIdx.x; t < tiles;
         t = next(t)) {
        long long row = 0, col0 = t * kTile;
        if (R > 1) {
            row = narrow ? (long long)((unsigned)t / (unsigned)tiles_per_row) : t / tiles_per_row;
            col0 = (t - row * tiles_per_row) * kTile;
        }
        const long long row_index = row;
        long long c[kMaxRank];
#pragma unroll
        for (int d = R - 2; d > 0; --d) {
            c[d] = row % e.dims[d];
            row /= e.dims[d];
        }
        c[0] = row;
        long long base[S];  // in elements of input k's type
        T fixed[S];
#pragma unroll
        for (int k = 0; k < N; ++k) {
            base[k] = offset<R - 1>(c, in.strides[k]);
            fixed[k] = F::inner_stride(k) == 0 ? load1<T>(F::dtype(k), in.ptr[k], base[k]) : T(0);
        }
        sink.template begin_row<R>(c);

        // VW == 8 (operands of 16 bits or fewer, or asked for): the tile is held as loaded and each
        // element converted where it is used (dtype.cuh: Raw); else converted as loaded.
        constexpr bool kRaw = VW == 8;
        T v[kRaw ? 1 : UNROLL][S][VW];
        Raw<kRaw ? VW : 4> raw[kRaw ? UNROLL : 1][S];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long long col = col0 + ((long long)u * BLOCK + threadIdx.x) * VW;
            if (col < inner) {  // VW > 1 only when inner % VW == 0
#pragma unroll
                for (int k = 0; k < N; ++k) {
                    if constexpr (kRaw) {
                        if (F::inner_stride(k) != 0) load_raw<VW>(F::dtype(k), in.ptr[k], base[k] + col, raw[u][k]);
                    } else if (F::inner_stride(k) == 0) {
#pragma unroll
                        for (int j = 0; j < VW; ++j) v[u][k][j] = fixed[k];
                    } else {
                        load_row<VW>(F::dtype(k), in.ptr[k], base[k] + col, v[u][k]);
                    }
                }
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long long col = col0 + ((long long)u * BLOCK + threadIdx.x) * VW;
            if (col < inner) {
                typename F::Result r[VW];
#pragma unroll
                for (int j = 0; j < VW; ++j) {
                    T x[S];
#pragma unroll
                    for (int k = 0; k < N; ++k) {
                        if constexpr (!kRaw) x[k] = v[u][k][j];
                        else x[k] = F::inner_stride(k) == 0 ? fixed[k] : unpack<VW, T>(F::dtype(k), raw[u][k], j);
                    }
                    r[j] = f(x);
                }
                sink.template put<VW>(r, col);
            }
        }
        sink.template end_tile<BLOCK>(t, row_index, tiles_per_row, tiles);
    }
}

}  // namespace lj
