// ---- the kernel ABI: every kernel parameter struct and the constants both sides share ----------
// The one definition: NVRTC compiles it first in every kernel, and the host compiles the same file
// (src/codegen/kernel_abi.hpp reads it too), so the host's arguments and the kernel's parameters
// cannot drift apart. Plain structs of pointers, 64-bit integers and doubles: the same layout on
// both sides.
#ifndef LOSSJIT_ABI_CUH
#define LOSSJIT_ABI_CUH
#ifdef __CUDACC_RTC__
#define LJ_ABI_FUNCTION __device__ __forceinline__
#else
#define LJ_ABI_FUNCTION inline
#endif
namespace lj {

constexpr int kMaxRank = 8;    // dimensions left after collapsing (the host's layouts keep within it)
constexpr int kMaxTotals = 8;  // whole-tensor reductions one program may combine (RowsOut::scale)
constexpr int kMaxStatistics = 8;  // whole-tensor statistics one program may use inside expressions
constexpr int kMaxResults = 8;     // results one program may list (`loss, z, acc`; RowsOut::result)
// Element types, as kernels take them at run time (dtype.cuh): lossjit::DType's numbers (kernel_abi.hpp
// checks).
enum : int { kFloat32 = 0, kFloat64 = 1, kBFloat16 = 2, kFloat16 = 3, kInt32 = 4, kInt64 = 5, kUInt8 = 6, kBool = 7 };

struct Extents {
    long long count;            // elements in the broadcast shape
    long long dims[kMaxRank];   // collapsed extents, outermost first
};
template <int N>
struct Inputs {                 // the inputs the program reads, in program order (Element::dtype(k) says of what)
    const void* ptr[N > 0 ? N : 1];
    long long strides[N > 0 ? N : 1][kMaxRank];
};
struct Output {                 // where a map writes (Element::kResultDType)
    void* ptr;
    long long strides[kMaxRank];
};
template <int G>
struct Grads {                  // where the gradients go (Element::grad_dtype(g)); full-shape ones all laid out alike
    void* ptr[G];
    long long strides[kMaxRank];
    const float* upstream;      // a device scalar the gradients are also multiplied by; may be null
    const double* factor;       // a Composite program's gradient factors, one per reduction differentiated
                                // (float64, its own kernel's results); may be null
    double scale[kMaxTotals];   // per reduction differentiated (Program::gradient_totals): upstream gradient /
                                // its divisor (N for mean, dim 0 for batchmean, 1 for sum)
    // What the elements of reduction j get (ir::NodeKind::Seed j).
    LJ_ABI_FUNCTION double total_scale(int j = 0) const {
        return (upstream ? scale[j] * (double)*upstream : scale[j]) * (factor ? factor[j] : 1.0);
    }
};
// Gradients summed over the dimensions their input is broadcast along (Element::summed(g)), without
// float atomics. The columns loop: each block sums its chunk of rows per column, the last block of a
// column strip adds the chunks in order. The rows loop: a gradient summed along rows stores one
// partial per tile where an element has several, the last tile of an element adds them in order; a gradient
// summed over everything keeps one partial per block, the last block adds them in block order.
// The host's KernelSpec::Summed takes these values.
enum Summed { kNotSummed = 0, kSummedOverRows = 1, kSummedAlongRows = 2, kSummedOverAll = 3 };
struct SumScratch {
    double* partials;           // columns: [summed gradient][chunk][column]; rows: [summed over all][block],
                                // then [summed along rows][tile] ([..][row] with whole_rows)
    unsigned int* arrivals;     // columns: per batch and strip; rows: [0] blocks, [1 + element] tiles (rows
                                // with whole_rows); the last resets it
    long long chunk_rows;       // columns: rows per chunk
    long long batch_rows;       // columns: rows per batch (the summed input holds one row per batch);
                                // rows: rows per element of a gradient summed along rows
    int chunks;                 // columns: chunks per batch
    int strip_blocks;           // columns: blocks sharing one chunk, each taking every strip_blocks-th strip
    int whole_rows;             // rows: 1 where each block takes whole rows in turn (rows.cuh), so a
                                // gradient summed along rows is added once per row, not per tile
};
struct ReduceOut {
    double* partials;           // one slot per block
    unsigned int* arrivals;     // blocks finished so far; the last block resets it to 0
    void* result;               // one element of Element::kResultDType
    double scale;               // 1 / (N for mean, size of dim 0 for batchmean, 1 for sum)
};
// Where the whole-tensor reductions of a program that reduces along rows go: per block and total a
// partial sum, then the last block adds them in block order, scales each total (1 / its divisor)
// and stores the final value. As ReduceOut, with one scale per total.
struct RowsOut {
    double* partials;           // [total][block]
    unsigned int* arrivals;     // blocks finished so far; the last block resets it to 0
    void* result;               // one element of the kernel's result dtype per result (Program::result_count)
    double scale[kMaxTotals];
};
// A scattered gradient (class weights w[y]; templates/scatter.cuh): the fused kernel leaves one of
// these per row, then the scatter kernels add them into the classes, a block kScatterClasses
// classes of one chunk of rows with kScatterThreads threads.
struct ScatteredRow {
    double value;               // the row's derivative
    long long index;            // the class it goes to
};
constexpr int kScatterThreads = 256;
constexpr int kScatterClasses = 2048;  // 16 KB of float64 sums in shared memory

}  // namespace lj
#undef LJ_ABI_FUNCTION
#endif  // LOSSJIT_ABI_CUH
