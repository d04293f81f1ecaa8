// blaslt: cuBLASLt, the CUDA toolkit's matrix multiply, resolved with dlopen/dlsym on first use as
// the driver is (driver.hpp): the library starts where it is missing, and only linear_loss needs it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include <cublasLt.h>
#include <cuda.h>

namespace lossjit::cuda {

class Context;

struct BlasLtApi {
#define LOSSJIT_BLASLT_FUNCTIONS(X)                                                                        \
    X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetStatusName) X(cublasLtGetStatusString)               \
    X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute)             \
    X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) X(cublasLtMatmulPreferenceCreate)         \
    X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)                             \
    X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)
#define LOSSJIT_DECLARE(name) decltype(&::name) name = nullptr;
    LOSSJIT_BLASLT_FUNCTIONS(LOSSJIT_DECLARE)
#undef LOSSJIT_DECLARE
};

// Loads cuBLASLt once (LOSSJIT_LIBCUBLASLT, else libcublasLt.so.13); throws CudaError saying what
// is missing when it cannot.
const BlasLtApi& blaslt();

// One matrix product D = alpha op(A) op(B) + beta C with C = D, in cuBLAS's column-major terms: op(A)
// is m x k, op(B) k x n, D m x n; lda/ldb/ldc are the distances between columns, in elements. A and B
// share a dtype; D may be wider (float32 beside bfloat16 operands). Accumulation is float32.
struct Gemm {
    bool transpose_a = false, transpose_b = false;
    std::int64_t m = 0, n = 0, k = 0;
    const void* a = nullptr;
    std::int64_t lda = 0;
    const void* b = nullptr;
    std::int64_t ldb = 0;
    void* d = nullptr;
    std::int64_t ldd = 0;
    cudaDataType_t operand_type = CUDA_R_32F;
    cudaDataType_t output_type = CUDA_R_32F;
    float alpha = 1.0f, beta = 0.0f;
    const void* bias = nullptr;  // m values of output_type added to every column of D (an epilogue)
};

// A cuBLASLt handle on one device's context, with the algorithm chosen for each shape of product
// remembered (cuBLASLt's heuristic costs tens of microseconds a query).
class BlasLt {
public:
    explicit BlasLt(std::shared_ptr<Context> context);
    ~BlasLt();
    BlasLt(const BlasLt&) = delete;
    BlasLt& operator=(const BlasLt&) = delete;

    // Enqueues the product on `stream`; `workspace` (of workspace_bytes) must stay untouched by
    // anything else until the stream passes it.
    void run(const Gemm& gemm, void* workspace, std::size_t workspace_bytes, CUstream stream);

    static constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;  // what cuBLAS asks on Hopper

private:
    std::shared_ptr<Context> context_;
    cublasLtHandle_t handle_ = nullptr;
    // The product's shape, types, epilogue and operands' alignments: what the algorithm depends on.
    using Key = std::tuple<bool, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                           std::int64_t, int, int, bool, bool, std::size_t, unsigned, unsigned, unsigned, unsigned>;
    std::mutex mutex_;
    std::map<Key, cublasLtMatmulAlgo_t> algorithms_;
};

}  // namespace lossjit::cuda
