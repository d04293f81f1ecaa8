#include "cuda/blaslt.hpp"

#include <cstdlib>
#include <string>

#include <dlfcn.h>
#include <fmt/format.h>

#include "cuda/driver.hpp"
#include "lossjit/errors.hpp"

namespace lossjit::cuda {
namespace {

struct Loaded {
    BlasLtApi api;
    std::string error;  // empty when usable
};

Loaded load_blaslt() {
    Loaded loaded;
    const char* override_path = std::getenv("LOSSJIT_LIBCUBLASLT");
    const char* path = override_path && *override_path ? override_path : "libcublasLt.so.13";
    void* library = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char* why = ::dlerror();
        loaded.error = fmt::format(
            "cuBLASLt could not be loaded ({}); linear_loss needs the CUDA toolkit's libcublasLt.so.13 on the "
            "library path, or its path in LOSSJIT_LIBCUBLASLT",
            why ? why : path);
        return loaded;
    }
#define LOSSJIT_RESOLVE(name)                                                                              \
    loaded.api.name = reinterpret_cast<decltype(loaded.api.name)>(::dlsym(library, #name));                \
    if (!loaded.api.name) {                                                                                 \
        loaded.error = fmt::format("{} lacks {}: linear_loss needs cuBLASLt of CUDA 12 or later", path, #name); \
        return loaded;                                                                                      \
    }
    LOSSJIT_BLASLT_FUNCTIONS(LOSSJIT_RESOLVE)
#undef LOSSJIT_RESOLVE
    return loaded;  // the library stays loaded for the life of the process
}

void check(cublasStatus_t status, const char* call) {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    const BlasLtApi& api = blaslt();
    throw CudaError(fmt::format("{} failed: {} ({})", call, api.cublasLtGetStatusName(status),
                                api.cublasLtGetStatusString(status)),
                    static_cast<int>(status));
}
#define LOSSJIT_BLAS(call) check(blaslt().call, #call)

// The largest power of two, up to 256 bytes, that the address is a multiple of: the alignment the
// chosen algorithm may assume (cuBLASLt's default preference assumes 256).
unsigned alignment_of(const void* pointer) {
    const auto address = reinterpret_cast<std::uintptr_t>(pointer);
    unsigned alignment = 256;
    while (alignment > 1 && address % alignment != 0) alignment /= 2;
    return alignment;
}

// Owners of cuBLASLt's descriptors for the length of one call.
struct Descriptors {
    cublasLtMatmulDesc_t operation = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulPreference_t preference = nullptr;
    ~Descriptors() {
        const BlasLtApi& api = blaslt();
        if (preference) api.cublasLtMatmulPreferenceDestroy(preference);
        if (d) api.cublasLtMatrixLayoutDestroy(d);
        if (b) api.cublasLtMatrixLayoutDestroy(b);
        if (a) api.cublasLtMatrixLayoutDestroy(a);
        if (operation) api.cublasLtMatmulDescDestroy(operation);
    }
};

}  // namespace

const BlasLtApi& blaslt() {
    static const Loaded instance = load_blaslt();
    if (!instance.error.empty()) throw CudaError(instance.error);
    return instance.api;
}

BlasLt::BlasLt(std::shared_ptr<Context> context) : context_(std::move(context)) {
    ScopedContext scope(*context_);
    LOSSJIT_BLAS(cublasLtCreate(&handle_));
}

BlasLt::~BlasLt() {
    if (!handle_) return;
    try {
        ScopedContext scope(*context_);
        blaslt().cublasLtDestroy(handle_);
    } catch (...) {  // destructors must not throw
    }
}

void BlasLt::run(const Gemm& g, void* workspace, std::size_t workspace_bytes, CUstream stream) {
    ScopedContext scope(*context_);
    Descriptors desc;
    LOSSJIT_BLAS(cublasLtMatmulDescCreate(&desc.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t op_a = g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    LOSSJIT_BLAS(cublasLtMatmulDescSetAttribute(desc.operation, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    LOSSJIT_BLAS(cublasLtMatmulDescSetAttribute(desc.operation, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    if (g.bias) {
        const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
        LOSSJIT_BLAS(cublasLtMatmulDescSetAttribute(desc.operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                    sizeof epilogue));
        LOSSJIT_BLAS(cublasLtMatmulDescSetAttribute(desc.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                                    sizeof g.bias));
    }
    // Stored shapes: A is m x k (k x m transposed), B k x n (n x k transposed), column-major.
    const auto rows_a = static_cast<std::uint64_t>(g.transpose_a ? g.k : g.m);
    const auto cols_a = static_cast<std::uint64_t>(g.transpose_a ? g.m : g.k);
    const auto rows_b = static_cast<std::uint64_t>(g.transpose_b ? g.n : g.k);
    const auto cols_b = static_cast<std::uint64_t>(g.transpose_b ? g.k : g.n);
    LOSSJIT_BLAS(cublasLtMatrixLayoutCreate(&desc.a, g.operand_type, rows_a, cols_a, g.lda));
    LOSSJIT_BLAS(cublasLtMatrixLayoutCreate(&desc.b, g.operand_type, rows_b, cols_b, g.ldb));
    LOSSJIT_BLAS(cublasLtMatrixLayoutCreate(&desc.d, g.output_type, static_cast<std::uint64_t>(g.m),
                                            static_cast<std::uint64_t>(g.n), g.ldd));

    const unsigned align_a = alignment_of(g.a), align_b = alignment_of(g.b), align_d = alignment_of(g.d);
    const unsigned align_bias = g.bias ? alignment_of(g.bias) : 256;
    const Key key{g.transpose_a, g.transpose_b, g.m, g.n, g.k, g.lda, g.ldb, g.ldd,
                  static_cast<int>(g.operand_type), static_cast<int>(g.output_type), g.bias != nullptr,
                  g.beta != 0.0f, workspace_bytes, align_a, align_b, align_d, align_bias};
    cublasLtMatmulAlgo_t algorithm;
    {
        std::lock_guard lock(mutex_);
        auto found = algorithms_.find(key);
        if (found == algorithms_.end()) {
            LOSSJIT_BLAS(cublasLtMatmulPreferenceCreate(&desc.preference));
            LOSSJIT_BLAS(cublasLtMatmulPreferenceSetAttribute(desc.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                              &workspace_bytes, sizeof workspace_bytes));
            const std::pair<cublasLtMatmulPreferenceAttributes_t, unsigned> alignments[] = {
                {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
                {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
                {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d},
                {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d}};
            for (const auto& [attribute, bytes] : alignments) {
                const std::uint32_t value = bytes;
                LOSSJIT_BLAS(cublasLtMatmulPreferenceSetAttribute(desc.preference, attribute, &value, sizeof value));
            }
            cublasLtMatmulHeuristicResult_t result{};
            int found_count = 0;
            LOSSJIT_BLAS(cublasLtMatmulAlgoGetHeuristic(handle_, desc.operation, desc.a, desc.b, desc.d, desc.d,
                                                        desc.preference, 1, &result, &found_count));
            if (found_count == 0)
                throw CudaError(fmt::format("cuBLASLt has no algorithm for a {}x{}x{} product of these types", g.m,
                                            g.n, g.k));
            found = algorithms_.emplace(key, result.algo).first;
        }
        algorithm = found->second;
    }
    LOSSJIT_BLAS(cublasLtMatmul(handle_, desc.operation, &g.alpha, g.a, desc.a, g.b, desc.b, &g.beta, g.d, desc.d,
                                g.d, desc.d, &algorithm, workspace, workspace_bytes, stream));
}

}  // namespace lossjit::cuda
