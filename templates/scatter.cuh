// ---- gradients scattered into classes (RowGradient::Scattered: class weights w[y]) -------------
// The fused kernel leaves each row's derivative and its index (store_scattered); two kernels of the
// same module then add the rows into the classes, grad[c] = the sum of the values of the rows whose
// index is c (rows whose index is outside [0, classes) add nowhere: their take is nan already).
// No float atomics: a block of lossjit_scatter_chunks adds one chunk of rows into one range of
// classes, each class by one thread in row order, and lossjit_scatter_finish adds the chunks' sums
// in chunk order, so every run gives the same bits. float64 throughout; the gradient's dtype last.
namespace lj {
__device__ __forceinline__ void store_scattered(void* p, long long row, long long index, double value) {
    static_cast<ScatteredRow*>(p)[row] = ScatteredRow{value, index};
}
}  // namespace lj

// Grid: (class ranges of kScatterClasses, chunks of chunk_rows rows). chunk_sums: [chunks][classes].
extern "C" __global__ void __launch_bounds__(lj::kScatterThreads)
lossjit_scatter_chunks(const lj::ScatteredRow* scattered, long long rows, long long classes, long long chunk_rows,
                       double* chunk_sums)
{
    __shared__ double sums[lj::kScatterClasses];
    __shared__ lj::ScatteredRow tile[lj::kScatterThreads];
    const long long first_class = (long long)blockIdx.x * lj::kScatterClasses;
    const long long chunk = blockIdx.y;
    // Class c of the range belongs to thread c % kScatterThreads alone: it clears, adds and stores it.
    for (int c = threadIdx.x; c < lj::kScatterClasses; c += lj::kScatterThreads) sums[c] = 0.0;
    const long long begin = chunk * chunk_rows;
    const long long end = begin + chunk_rows < rows ? begin + chunk_rows : rows;
    for (long long first = begin; first < end; first += lj::kScatterThreads) {
        __syncthreads();  // every thread is done with the previous tile
        if (first + threadIdx.x < end) tile[threadIdx.x] = scattered[first + threadIdx.x];
        __syncthreads();
        const int count = end - first < lj::kScatterThreads ? (int)(end - first) : lj::kScatterThreads;
        for (int k = 0; k < count; ++k) {
            const long long c = tile[k].index - first_class;
            if (c >= 0 && c < lj::kScatterClasses && (int)(c % lj::kScatterThreads) == (int)threadIdx.x)
                sums[c] += tile[k].value;
        }
    }
    for (int c = threadIdx.x; c < lj::kScatterClasses && first_class + c < classes; c += lj::kScatterThreads)
        chunk_sums[chunk * classes + first_class + c] = sums[c];
}

// grad[c] = the chunks' sums of class c, in chunk order, stored as `dtype`.
extern "C" __global__ void __launch_bounds__(lj::kScatterThreads)
lossjit_scatter_finish(const double* chunk_sums, long long chunks, long long classes, void* grad, int dtype)
{
    for (long long c = (long long)blockIdx.x * lj::kScatterThreads + threadIdx.x; c < classes;
         c += (long long)gridDim.x * lj::kScatterThreads) {
        double sum = 0.0;
        for (long long k = 0; k < chunks; ++k) sum += chunk_sums[k * classes + c];
        lj::store1<double>(dtype, grad, c, sum);
    }
}
