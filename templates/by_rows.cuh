// ---- programs that reduce along rows: teams and the finish of several totals -------------------
namespace lj {

// An index (x[y]'s y) exactly, as an integer.
__device__ __forceinline__ long long load_index(int dt, const void* p, long long i) {
    switch (dt) {
        case kInt32: return __ldg(static_cast<const int*>(p) + i);
        case kInt64: return __ldg(static_cast<const long long*>(p) + i);
        case kUInt8: return __ldg(static_cast<const unsigned char*>(p) + i);
        default: return __ldg(static_cast<const unsigned char*>(p) + i) != 0 ? 1 : 0;
    }
}

// Asks L2 for element i of an input of dtype dt (the row prefetch's next row's own values).
__device__ __forceinline__ void prefetch_l2(int dt, const void* p, long long i) {
    const char* at = static_cast<const char*>(p) + i * dtype_size(dt);
    asm volatile("prefetch.global.L2 [%0];" ::"l"(at));
}

__device__ __forceinline__ float shuffle_xor(float v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
__device__ __forceinline__ double shuffle_xor(double v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }

// Column j's offset along a row the walk writes (a map's output, gradients) or copies into the row
// cache. A kernel that walks vectors (VW > 1) stores VW neighbouring elements at once, so the launch
// gave those rows stride 1 (choose_by_rows): j itself, without the stride's load and the multiplies
// by it, every vector. Element walks keep the stride (strided rows side by side). (The walks' loads
// keep the multiply: with j alone ptxas spilled a warp's forward cross-entropy, kinds/by_rows_emit.cpp.)
template <int VW>
__device__ __forceinline__ long long along_row(long long j, long long stride) {
    if constexpr (VW > 1) return j;
    else return j * stride;
}

// Where index i lies among a tile's columns (j0 and the `span` after it) as an int, -1 outside: an
// element's "my column is the index" (a take's gradient) then compares its offset in the tile, a
// constant once unrolled, with one 32-bit compare, not its 64-bit column with two adds and two.
__device__ __forceinline__ int offset_in_tile(long long i, long long j0, long long span) {
    const long long d = i - j0;
    return (unsigned long long)d < (unsigned long long)span ? (int)d : -1;
}

// A shifted row (KernelSpec::row_shift) starting at element `start` of its operands: the columns
// before its first vector of 4 (at most the row's C).
__device__ __forceinline__ long long row_shift(long long start, long long C) {
    const long long shift = (4 - (start & 3)) & 3;
    return shift < C ? shift : C;
}

// The row accumulators (sum, amax, logsumexp, argmax, ...) are rows of the language table
// (src/lang/builtins.cpp, kRowReductions): a kernel carries those its program uses, after this file.

// A group of N neighbouring columns (j, j + 1, ...: one vector load's) into a row accumulator: at once
// where it has add_vec (LogSumExpAcc), else element by element in column order.
template <class Acc, class T, int N>
__device__ __forceinline__ auto add_group(Acc& a, const T (&v)[N], long long j, int) -> decltype(a.add_vec(v, j), void()) {
    a.add_vec(v, j);
}
template <class Acc, class T, int N>
__device__ __forceinline__ void add_group(Acc& a, const T (&v)[N], long long j, long) {
#pragma unroll
    for (int q = 0; q < N; ++q) a.add(v[q], j + q);
}

// A whole tile's U groups of N columns (group u at columns j0 + u * STEP, ...): an accumulator that
// adds whole tiles (kAddsTiles: LogSumExpAcc) takes the U x N at once after the tile (add_tile: one
// test of its reference a tile, U x N independent exps); any other takes each group as it is computed
// (add_tile_group), in column order, as add_group.
template <class Acc, class = void>
struct adds_tiles {
    static constexpr bool value = false;
};
template <class Acc>
struct adds_tiles<Acc, decltype((void)Acc::kAddsTiles)> {
    static constexpr bool value = Acc::kAddsTiles;
};
template <class Acc, class T, int N>
__device__ __forceinline__ void add_tile_group(Acc& a, const T (&v)[N], long long j) {
    if constexpr (!adds_tiles<Acc>::value) add_group(a, v, j, 0);
}
template <long long STEP, class Acc, class T, int U, int N>
__device__ __forceinline__ void add_tile(Acc& a, const T (&v)[U][N], long long j0) {
    if constexpr (adds_tiles<Acc>::value) a.template add_tile<STEP>(v, j0);
}

// An accumulator that a team merges in two phases (kTwoPhase: logsumexp): peak() its part the lanes
// agree on first, rebase(peak) the rest at it, set(rest) once the rest is merged.
template <class Acc, class = void>
struct merges_in_two_phases {
    static constexpr bool value = false;
};
template <class Acc>
struct merges_in_two_phases<Acc, decltype((void)Acc::kTwoPhase)> {
    static constexpr bool value = Acc::kTwoPhase;
};

// The row cache (KernelSpec::row_cache_columns): a program that walks each row more than once keeps
// the leading columns of the inputs its later walks read again in dynamic shared memory, each
// team its share. A launch sizes it for the row (or as much as fits); the kernel reads the size, so
// one source serves every row length. Each thread reads back only the columns it wrote (every walk
// maps column j to the same thread), so the walks need no barrier for it.
template <class T>
__device__ __forceinline__ T* row_cache() {
    extern __shared__ __align__(16) unsigned char lj_row_cache_bytes[];
    return reinterpret_cast<T*>(lj_row_cache_bytes);
}
// Columns each team keeps of each cached input: a multiple of 4, so that a vector of 4 columns is
// kept whole or not at all.
template <class T, int INPUTS, int TEAMS>
__device__ __forceinline__ long long row_cache_columns() {
    unsigned bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
    return (long long)(bytes / (sizeof(T) * INPUTS * TEAMS)) / 4 * 4;
}
template <int VW, class T>
__device__ __forceinline__ void cache_store(T* p, const T (&v)[VW]) {
    if constexpr (VW == 4 && sizeof(T) == 4) {
        *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    } else if constexpr (VW == 4 && sizeof(T) == 8) {
        reinterpret_cast<double2*>(p)[0] = make_double2(v[0], v[1]);
        reinterpret_cast<double2*>(p)[1] = make_double2(v[2], v[3]);
    } else {
#pragma unroll
        for (int q = 0; q < VW; ++q) p[q] = v[q];
    }
}
template <int VW, class T>
__device__ __forceinline__ void cache_load(const T* p, T (&v)[VW]) {
    if constexpr (VW == 4 && sizeof(T) == 4) {
        const float4 f = *reinterpret_cast<const float4*>(p);
        v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
    } else if constexpr (VW == 4 && sizeof(T) == 8) {
        const double2 a = reinterpret_cast<const double2*>(p)[0], b = reinterpret_cast<const double2*>(p)[1];
        v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
    } else {
#pragma unroll
        for (int q = 0; q < VW; ++q) v[q] = p[q];
    }
}

// The row prefetch (KernelSpec::row_prefetch, sm_80): the walk that reads the row cache last copies
// the team's next row into each slot once it has read it (cp.async: the copy runs while the walk
// writes its results, and holds no register), so that the next row's walks all read the cache and
// memory never waits on the row's merges. A slot is the thread's own, as in every walk: no barrier,
// and each thread waits for its own copies (cache_prefetch_wait, _wait_for) before it reads them.
// A copy into a slot is issued after the thread's read of that slot, in program order (a copy is
// performed as if by a new thread started there); the walk's use of the value, mostly its store,
// comes before it too.
// Only where the cache holds the input's own bits (an input of the compute type): 4 to 32 bytes a copy.
template <int VW, class T>
__device__ __forceinline__ void cache_prefetch(T* slot, const T* from) {
    constexpr int kBytes = VW * (int)sizeof(T);
    static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16 || kBytes == 32, "a copy of 4, 8, 16 or 2 x 16 bytes");
    const unsigned to = (unsigned)__cvta_generic_to_shared(slot);
    if constexpr (kBytes == 32) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(to), "l"(from) : "memory");
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(to + 16), "l"(from + 16 / sizeof(T)) : "memory");
    } else if constexpr (kBytes == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(to), "l"(from) : "memory");
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(to), "l"(from), "n"(kBytes) : "memory");
    }
}
__device__ __forceinline__ void cache_prefetch_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }
// The refill walk commits its copies a group per vector of a tile (VW columns at one u: U groups a
// tile, empty ones too, so that the count is the walk's); the next row's first walk waits, before
// each vector, until no more groups than come after it are under way, so that it starts on the first
// columns while the last ones still arrive. (The count is an immediate: past 7, 7, which waits longer.)
__device__ __forceinline__ void cache_prefetch_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cache_prefetch_wait_for(long long after) {
    switch (after < 7 ? (int)after : 7) {
        case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
        case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
        case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
        case 3: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
        case 4: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
        case 5: asm volatile("cp.async.wait_group 5;" ::: "memory"); break;
        case 6: asm volatile("cp.async.wait_group 6;" ::: "memory"); break;
        default: asm volatile("cp.async.wait_group 7;" ::: "memory"); break;
    }
}
// The team's first row, before its first walk: every cached column of one input, a copy each.
// `slot`: the input's part of the team's cache; `from`: the row's first element, `stride` apart.
template <class Team, int VW, class T>
__device__ __forceinline__ void prefetch_row(T* slot, long long cache_columns, const T* from, long long stride, long long C) {
    for (long long j = (long long)Team::lane() * VW; j < C; j += (long long)Team::kTeam * VW) {
        const long long jc = Team::template block_column<VW>(j);
        if (jc >= cache_columns) break;  // a thread's columns keep their order in the cache
        cache_prefetch<VW>(slot + jc, from + j * stride);
    }
}

// A thread-block cluster's barrier (sm_90): every thread of every block of the cluster arrives, then
// waits until all have. Arrive releases this thread's writes to shared memory, wait acquires the
// others'; between them a thread may do other work.
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); }
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
// The same shared variable in block `rank` of the cluster (distributed shared memory), as a generic
// address.
template <class T>
__device__ __forceinline__ const T* cluster_peer(const T* p, unsigned rank) {
    unsigned long long remote;
    asm volatile("mapa.u64 %0, %1, %2;" : "=l"(remote) : "l"(reinterpret_cast<unsigned long long>(p)), "r"(rank));
    return reinterpret_cast<const T*>(remote);
}

// A team of TEAM threads (a warp, or the whole block) takes one row at a time; or, with CLUSTER > 1,
// the CLUSTER blocks of a thread-block cluster take one row together (KernelSpec::row_cluster), so
// that a long row cached in shared memory is split over several SMs' (or several blocks of one SM
// where they fit) and each SM keeps several rows under way. The team's lanes then number
// CLUSTER x BLOCK: block r of the cluster walks the columns of lanes r x BLOCK to (r + 1) x BLOCK - 1.
template <int BLOCK, int TEAM, int CLUSTER = 1>
struct Team {
    static_assert(TEAM == 32 || TEAM == BLOCK, "a team is a warp or the whole block");
    static_assert(CLUSTER == 1 || TEAM == BLOCK, "a cluster takes a row with whole blocks");
    static constexpr bool kSideBySide = false;
    static constexpr int kTeam = TEAM * CLUSTER;
    static constexpr int kPerBlock = BLOCK / TEAM;
    __device__ __forceinline__ static int lane() {
        if constexpr (CLUSTER > 1) return (int)(cluster_rank() * BLOCK + threadIdx.x);
        return TEAM == 32 ? (int)(threadIdx.x & 31) : (int)threadIdx.x;
    }
    __device__ __forceinline__ static int team_in_block() { return TEAM == 32 ? (int)(threadIdx.x >> 5) : 0; }
    __device__ __forceinline__ static long long first_row() {
        if constexpr (CLUSTER > 1) return (long long)(blockIdx.x / CLUSTER);
        return (long long)blockIdx.x * kPerBlock + (TEAM == 32 ? (long long)(threadIdx.x >> 5) : 0);
    }
    __device__ __forceinline__ static long long row_step() { return (long long)gridDim.x * kPerBlock / CLUSTER; }
    // Where column j (the first of a vector of VW this thread walks) lies among the columns this block
    // walks, in walking order: the row cache's index.
    template <int VW>
    __device__ __forceinline__ static long long block_column(long long j) {
        if constexpr (CLUSTER == 1) return j;
        constexpr long long kStride = (long long)kTeam * VW, kBlock = (long long)BLOCK * VW;
        return j / kStride * kBlock + j % kBlock;
    }
    // The row cache: this team's part of the block's (SLOTS inputs of `columns` columns each, one
    // after the other), and where column jc of input `slot` lies in it.
    template <int SLOTS, class T>
    __device__ __forceinline__ static T* team_cache(T* block_cache, long long columns) {
        return block_cache + (long long)team_in_block() * SLOTS * columns;
    }
    template <class T>
    __device__ __forceinline__ static T* cache_at(T* cache, int slot, long long columns, long long jc) {
        return cache + slot * columns + jc;
    }
    // The cluster's barrier is kept in step: arrive at the start, wait at the end (every block's
    // shared memory stays until the others have read it), each all_reduce in between.
    __device__ __forceinline__ static void begin() {
        if constexpr (CLUSTER > 1) cluster_arrive();
    }
    __device__ __forceinline__ static void end() {
        if constexpr (CLUSTER > 1) cluster_wait();
    }

    // Every lane's stores before it are seen by every lane after it (x[k]'s gradient, written again
    // at the gathered columns after the element pass): the warp's or the block's barrier, or the
    // cluster's, kept in step (arrived, not yet waited, as between begin() and end()).
    __device__ __forceinline__ static void barrier() {
        if constexpr (CLUSTER > 1) {
            cluster_wait();
            cluster_arrive();
            cluster_wait();
            cluster_arrive();
        } else if constexpr (TEAM == 32) {
            __syncwarp();
        } else {
            __syncthreads();
        }
    }

    // After an all_reduce, every lane's shared-memory stores before it are seen by every lane (a take
    // left by the lane that read it, walked ahead): the block's all_reduce has its barriers; a warp's
    // shuffles order no memory, so the warp syncs.
    __device__ __forceinline__ static void after_all_reduce() {
        if constexpr (TEAM == 32) __syncwarp();
    }

    // The combination of the team's parts within the block: the warp's by shuffles, then the block's
    // warps' through shared memory, and again by shuffles (lane l takes warp l's part, W of them a
    // power of two: log2 W merges a thread, not W - 1 in a row; a centered accumulator's merge
    // divides, and 15 of them in a row at 512 threads kept a block a row waiting). A butterfly of a
    // symmetric merge leaves the same bits in every lane, and every warp does the same. FENCED: first
    // wait until the previous use of this type's shared memory is over.
    template <bool FENCED, class Part>
    __device__ __forceinline__ static Part in_block(Part a) {
        warp_merge(a);
        if constexpr (TEAM != 32) {
            __shared__ Part warps[BLOCK / 32];
            if constexpr (FENCED) __syncthreads();
            if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = a;
            __syncthreads();
            a = merge_warps(warps);
        }
        return a;
    }
    template <class Part>
    __device__ __forceinline__ static void warp_merge(Part& a) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) a.combine(a.shuffle_xor(o));
    }
    // The block's warps' parts, each written by its warp's lane 0 before a barrier, merged.
    template <class Part>
    __device__ __forceinline__ static Part merge_warps(const Part* warps) {
        constexpr int kWarps = BLOCK / 32;
        if constexpr ((kWarps & (kWarps - 1)) == 0) {
            Part a = warps[threadIdx.x & (kWarps - 1)];
#pragma unroll
            for (int o = kWarps / 2; o > 0; o >>= 1) a.combine(a.shuffle_xor(o));
            return a;
        } else {  // (a block size set by hand)
            Part a = warps[0];
#pragma unroll
            for (int w = 1; w < kWarps; ++w) a.combine(warps[w]);
            return a;
        }
    }

    // The accumulators of one walk merged together (the emitter prints Team::all_reduce_each where a
    // walk has several): a block's team exchanges them all between one pair of barriers, not a pair
    // each (cosine's three sums: two barriers a row, not six), with the combinations of all_reduce in
    // its order, so the same bits. Warps have no barriers to save; clusters and two-phase accumulators
    // merge one at a time; so do exchanges past kTogetherBytes of static shared memory (a slot array a
    // place, which the row cache's reserve for static shared memory, kStaticReserve, must cover).
    static constexpr int kTogetherBytes = 1024;
    template <class... Accs>
    __device__ __forceinline__ static void all_reduce_each(Accs&... accs) {
        constexpr bool kTogether = TEAM != 32 && CLUSTER == 1 && !(merges_in_two_phases<Accs>::value || ...) &&
                                   (BLOCK / 32) * (sizeof(Accs) + ...) <= kTogetherBytes;
        if constexpr (!kTogether) {
            ((accs = all_reduce(accs)), ...);
        } else {
            (warp_merge(accs), ...);
            __syncthreads();  // every lane has read the slots' previous parts
            publish_parts<0>(accs...);
            __syncthreads();
            gather_parts<0>(accs...);
        }
    }
    template <int I, class Part>
    __device__ __forceinline__ static Part* together_slots() {  // a static array for each place and type
        __shared__ Part warps[BLOCK / 32];
        return warps;
    }
    template <int I, class Part, class... Rest>
    __device__ __forceinline__ static void publish_parts(const Part& a, const Rest&... rest) {
        if ((threadIdx.x & 31) == 0) together_slots<I, Part>()[threadIdx.x >> 5] = a;
        if constexpr (sizeof...(Rest) > 0) publish_parts<I + 1>(rest...);
    }
    template <int I, class Part, class... Rest>
    __device__ __forceinline__ static void gather_parts(Part& a, Rest&... rest) {
        a = merge_warps(together_slots<I, Part>());
        if constexpr (sizeof...(Rest) > 0) gather_parts<I + 1>(rest...);
    }

    // Every thread of the team gets the combination of the team's accumulators, in a fixed order
    // (with a cluster, the blocks' combinations in rank order: the same in every block). A two-phase
    // accumulator merges its peak, then the rest at it: its two exchanges through shared memory
    // alternate, each after the other's barrier, so neither waits for its previous use to end.
    template <class Acc>
    __device__ __forceinline__ static Acc all_reduce(Acc a) {
        if constexpr (merges_in_two_phases<Acc>::value)
            a.set(in_block<false>(a.rebase(in_block<false>(a.peak()))));
        else
            a = in_block<true>(a);
        if constexpr (CLUSTER > 1) {
            __shared__ Acc block_total;
            cluster_wait();  // every block has read the previous block_total
            if (threadIdx.x == 0) block_total = a;
            cluster_arrive();
            cluster_wait();  // every block's block_total is written
            a = *cluster_peer(&block_total, 0);
#pragma unroll
            for (int r = 1; r < CLUSTER; ++r) a.combine(*cluster_peer(&block_total, (unsigned)r));
            cluster_arrive();  // this block has read them (the next all_reduce, or end(), waits on it)
        }
        return a;
    }
};

// Strided rows that lie side by side (a reduction over an outer dimension: sum(x, 0) of a
// contiguous [R, C], mean(x, 1) of [B, C, H, W]): the block takes BLOCK / TEAM neighbouring rows,
// thread t row t % (BLOCK / TEAM), and the TEAM threads of a row share its length, so that every
// load of a warp reads 32 neighbouring elements and the block's loads at one column are one run of
// BLOCK / TEAM elements. The block steps through its rows together (kSideBySide: the kernel's loop
// keeps lanes past the last row in step, inactive, for the barriers of all_reduce).
template <int BLOCK, int TEAM>
struct SideTeam {
    static_assert(BLOCK % TEAM == 0 && (BLOCK / TEAM) % 32 == 0, "whole warps of neighbouring rows");
    static constexpr bool kSideBySide = true;
    static constexpr int kTeam = TEAM;              // threads per row
    static constexpr int kPerBlock = BLOCK / TEAM;  // rows per block
    __device__ __forceinline__ static int lane() { return (int)(threadIdx.x / kPerBlock); }
    __device__ __forceinline__ static int row_in_block() { return (int)(threadIdx.x % kPerBlock); }
    __device__ __forceinline__ static int team_in_block() { return row_in_block(); }

    // The row cache, interleaved by row: column jc of input `slot` of every row of the block lies at
    // (slot x columns + jc) x kPerBlock + the row's place in the block, so that a warp's threads,
    // at one column of 32 neighbouring rows, store to and load from 32 neighbouring words (no bank
    // conflicts). A strided row is walked an element at a time (VW 1).
    template <int VW>
    __device__ __forceinline__ static long long block_column(long long j) {
        static_assert(VW == 1, "rows side by side are strided: one element an access");
        return j;
    }
    template <int SLOTS, class T>
    __device__ __forceinline__ static T* team_cache(T* block_cache, long long) {
        return block_cache + row_in_block();
    }
    template <class T>
    __device__ __forceinline__ static T* cache_at(T* cache, int slot, long long columns, long long jc) {
        return cache + (slot * columns + jc) * kPerBlock;
    }

    // Every thread of a row's team gets the combination of the team's accumulators, in lane order.
    template <class Acc>
    __device__ __forceinline__ static Acc all_reduce(Acc a) {
        if constexpr (TEAM > 1) {
            // choose_by_rows budgets the shared memory at 16 bytes per accumulator and thread.
            static_assert(sizeof(Acc) <= 16, "an accumulator larger than choose_by_rows' shared-memory budget assumes");
            __shared__ Acc parts[TEAM][kPerBlock];
            __syncthreads();  // the previous use of `parts` is over
            parts[lane()][row_in_block()] = a;
            __syncthreads();
            a = parts[0][row_in_block()];
#pragma unroll
            for (int w = 1; w < TEAM; ++w) a.combine(parts[w][row_in_block()]);
        }
        return a;
    }
    template <class... Accs>
    __device__ __forceinline__ static void all_reduce_each(Accs&... accs) {
        ((accs = all_reduce(accs)), ...);
    }
};

// Each row of the team's: body(row, C, active). A side-by-side block takes its rows together; a
// thread past the last row walks nothing (C = 0) at an address in range and stores nothing (active
// false), but stays for the barriers of all_reduce.
template <class Team, class Body>
__device__ __forceinline__ void for_each_row(long long rows, long long columns, const Body& body) {
    if constexpr (Team::kSideBySide && Team::kTeam == 1) {
        // One thread per row needs no barrier: each thread steps through its rows on its own. H200,
        // the loop below against this one: sum over dimension 1 of [128, 4096, 4095] 6.49 ms against
        // 5.73, RMS norm over dimension 1 of [112, 64, 512, 512] 8.78 against 6.93
        // (docs/results/issue-29/session4).
        for (long long row = (long long)blockIdx.x * Team::kPerBlock + Team::row_in_block(); row < rows;
             row += (long long)gridDim.x * Team::kPerBlock)
            body(row, columns, true);
    } else if constexpr (Team::kSideBySide) {
        for (long long first = (long long)blockIdx.x * Team::kPerBlock; first < rows;
             first += (long long)gridDim.x * Team::kPerBlock) {
            const long long row = first + Team::row_in_block();
            const bool active = row < rows;
            body(active ? row : rows - 1, active ? columns : 0, active);
        }
    } else {
        Team::begin();
        for (long long row = Team::first_row(); row < rows; row += Team::row_step()) body(row, columns, true);
        Team::end();
    }
}

template <int R, int kResultDType, int K, class Final>
__device__ __forceinline__ void store_results(const double (&t)[K], const RowsOut& out, const Final& final) {
    double r[R];
    final(t, r);
#pragma unroll
    for (int k = 0; k < R; ++k) store1<double>(kResultDType, out.result, k, r[k]);
}

// The end of a program's whole-tensor reductions: each block's partial sum of each total, then the
// last block adds them in block order, scales them, computes the R results (Final, from the
// totals) and stores them in order. Deterministic, as finish_reduction.
template <int BLOCK, int K, int R, bool kOneBlock, int kResultDType, class Final>
__device__ __forceinline__ void finish_totals(const double (&acc)[K], const RowsOut& out, const Final& final) {
    __shared__ double scratch[32];
    __shared__ bool is_last;
    double block_total[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        block_total[k] = block_sum<BLOCK>(acc[k], scratch);
        __syncthreads();  // scratch is reused by the next total
    }
    if (kOneBlock) {
        if (threadIdx.x == 0) {
            double t[K];
#pragma unroll
            for (int k = 0; k < K; ++k) t[k] = block_total[k] * out.scale[k];
            store_results<R, kResultDType>(t, out, final);
        }
        return;
    }
    if (threadIdx.x == 0) {
#pragma unroll
        for (int k = 0; k < K; ++k) out.partials[(long long)k * gridDim.x + blockIdx.x] = block_total[k];
        is_last = arrive_last(out.arrivals, gridDim.x);
    }
    __syncthreads();
    if (!is_last || threadIdx.x >= 32) return;
    see_partials();
    double t[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        double total = 0.0;
        for (unsigned int b = threadIdx.x; b < gridDim.x; b += 32) total += __ldcg(out.partials + (long long)k * gridDim.x + b);
        total = warp_sum(total);
        t[k] = total * out.scale[k];
    }
    if (threadIdx.x == 0) {
        store_results<R, kResultDType>(t, out, final);
        leave_arrivals_at_zero(out.arrivals);
    }
}

}  // namespace lj
