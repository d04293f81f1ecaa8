/* lossjit's C ABI: compile a loss written as a string, run it on the GPU (or the CPU reference) on
 * views of memory the caller owns, and read errors as codes plus a message.
 *
 *   lossjit_options options;
 *   lossjit_options_init(&options);
 *   lossjit_loss* loss = NULL;
 *   if (lossjit_compile("mean((p - t)^2)", &options, &loss) != LOSSJIT_OK)
 *       fprintf(stderr, "%s\n", lossjit_last_error());    // expr:1:9: error: ... with a caret
 *   int64_t shape[] = {4096};
 *   lossjit_view in[2] = {{p, LOSSJIT_FLOAT32, 1, shape, NULL}, {t, LOSSJIT_FLOAT32, 1, shape, NULL}};
 *   lossjit_view out = {result, LOSSJIT_FLOAT32, 0, NULL, NULL};
 *   lossjit_exec exec = {stream, 0, NULL, 0};             // stream, device, lent scratch
 *   lossjit_evaluate(loss, in, 2, &out, &exec);            // asynchronous on `stream`
 *   lossjit_free(loss);
 *
 * Link liblossjit_c.so (SONAME liblossjit_c.so.1). It needs no CUDA driver to load: the driver is
 * opened on the first GPU call, and the CPU reference works without one. Every function is safe to
 * call from several threads; a handle may be used by several threads at once (calls on one stream
 * run in call order). Strings are UTF-8 and copied; views are read during the call only.
 *
 * Versioning: the ABI is LOSSJIT_C_API_VERSION (major << 16 | minor). A minor version only adds
 * functions and enum values; lossjit_c_api_version() is the library's, to compare with the header
 * an application was built against (same major, library minor >= header minor). */
#ifndef LOSSJIT_LOSSJIT_H
#define LOSSJIT_LOSSJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define LOSSJIT_C_EXPORT __attribute__((visibility("default")))
#else
#define LOSSJIT_C_EXPORT
#endif

#define LOSSJIT_C_API_VERSION_MAJOR 1
#define LOSSJIT_C_API_VERSION_MINOR 4  /* 1.1: lossjit_compile_n; 1.2: several results (lossjit_result_*,
                                          lossjit_reference_values; result views of their count);
                                          1.3: lossjit_options.knobs; 1.4: lossjit_linear_* */
#define LOSSJIT_C_API_VERSION ((LOSSJIT_C_API_VERSION_MAJOR << 16) | LOSSJIT_C_API_VERSION_MINOR)

/* The library's ABI version (LOSSJIT_C_API_VERSION of the header it was built from) and lossjit's version ("0.1.0"). */
LOSSJIT_C_EXPORT uint32_t lossjit_c_api_version(void);
LOSSJIT_C_EXPORT const char* lossjit_version(void);

/* What every function returns. The message of the most recent failure on this thread is
 * lossjit_last_error(). */
typedef enum lossjit_status {
    LOSSJIT_OK = 0,
    LOSSJIT_ERROR_SOURCE = 1,             /* a mistake in the program text: line, column and caret in the message */
    LOSSJIT_ERROR_USAGE = 2,              /* wrong arguments: shapes, dtypes, counts, names, null pointers */
    LOSSJIT_ERROR_UNSUPPORTED = 3,        /* valid, but not on the GPU yet (the CPU reference computes it) */
    LOSSJIT_ERROR_COMPILE = 4,            /* NVRTC rejected generated code: a lossjit bug, the log is in the message */
    LOSSJIT_ERROR_CUDA = 5,               /* a CUDA driver call failed */
    LOSSJIT_ERROR_NO_DEVICE = 6,          /* no CUDA driver, or no such device */
    LOSSJIT_ERROR_CAPTURE = 7,            /* would compile, load or allocate while the stream is captured into a CUDA graph */
    LOSSJIT_ERROR_SCRATCH_TOO_SMALL = 8,  /* the lent scratch is too small: lossjit_last_error_scratch_bytes() suffices */
    LOSSJIT_ERROR_OUT_OF_MEMORY = 9,      /* host memory ran out */
    LOSSJIT_ERROR_INTERNAL = 10           /* a broken invariant inside lossjit (please report) */
} lossjit_status;

/* The element types, as torch names them; the values are lossjit::DType's. */
typedef enum lossjit_dtype {
    LOSSJIT_FLOAT32 = 0,
    LOSSJIT_FLOAT64 = 1,
    LOSSJIT_BFLOAT16 = 2,
    LOSSJIT_FLOAT16 = 3,
    LOSSJIT_INT32 = 4,
    LOSSJIT_INT64 = 5,
    LOSSJIT_UINT8 = 6,
    LOSSJIT_BOOL = 7
} lossjit_dtype;
#define LOSSJIT_DTYPE_COUNT 8
/* "float32", "bfloat16", "bool", ...; NULL for a value outside the enum. */
LOSSJIT_C_EXPORT const char* lossjit_dtype_name(int32_t dtype);

/* The message of this thread's most recent failure ("" if none): for LOSSJIT_ERROR_SOURCE the full
 * diagnostic, `expr:1:13: error: unknown function 'lgo'`, the line and a caret under the column.
 * Valid until this thread's next lossjit call. */
LOSSJIT_C_EXPORT const char* lossjit_last_error(void);
LOSSJIT_C_EXPORT lossjit_status lossjit_last_error_status(void);
/* Where a LOSSJIT_ERROR_SOURCE is in the program (from 1; columns count bytes); 0 for other errors. */
LOSSJIT_C_EXPORT int32_t lossjit_last_error_line(void);
LOSSJIT_C_EXPORT int32_t lossjit_last_error_column(void);
/* The scratch bytes a call that failed with LOSSJIT_ERROR_SCRATCH_TOO_SMALL needs; 0 otherwise. */
LOSSJIT_C_EXPORT size_t lossjit_last_error_scratch_bytes(void);

/* 1 when a CUDA driver and device are usable; else 0, with the reason in lossjit_last_error(). */
LOSSJIT_C_EXPORT int32_t lossjit_cuda_available(void);

typedef struct lossjit_loss lossjit_loss;  /* a compiled program; lossjit_free releases it */

typedef struct lossjit_param {
    const char* name;
    double value;
} lossjit_param;

typedef enum lossjit_kind { LOSSJIT_KIND_ANY = 0, LOSSJIT_KIND_REDUCTION = 1, LOSSJIT_KIND_MAP = 2 } lossjit_kind;

typedef struct lossjit_options {
    uint32_t size;                   /* sizeof(lossjit_options): set by lossjit_options_init */
    const char* source_name;         /* in diagnostics: "expr" if NULL */
    const char* const* inputs;       /* call order of the inputs; NULL (or 0 of them): order of first appearance */
    size_t input_count;
    const lossjit_param* params;     /* parameters and defaults (override `param x = v;`); one the program
                                        never reads, or also in `inputs`, is LOSSJIT_ERROR_USAGE */
    size_t param_count;
    int32_t device;                  /* the default CUDA device of calls whose lossjit_exec is NULL */
    int32_t expect;                  /* lossjit_kind: the other kind is a LOSSJIT_ERROR_SOURCE at the body */
    const char* knobs;               /* since 1.3: kernel variant knobs, "KNOB=VALUE" separated by commas or
                                        spaces ("block=512,row_cache=on"; docs/tuning.md), checked here
                                        (LOSSJIT_ERROR_USAGE); NULL: all automatic. A caller built against
                                        1.2 (a smaller size) has none */
} lossjit_options;
LOSSJIT_C_EXPORT void lossjit_options_init(lossjit_options* options);

/* Parses and checks `program` (NUL-terminated). Needs no GPU. On failure *out is NULL. */
LOSSJIT_C_EXPORT lossjit_status lossjit_compile(const char* program, const lossjit_options* options,
                                                lossjit_loss** out);
/* The same for a program of `length` bytes (since 1.1): a NUL byte inside is refused with its line
 * and column like any other stray byte, where lossjit_compile would see the program end there. */
LOSSJIT_C_EXPORT lossjit_status lossjit_compile_n(const char* program, size_t length, const lossjit_options* options,
                                                  lossjit_loss** out);
LOSSJIT_C_EXPORT void lossjit_free(lossjit_loss* loss);  /* NULL is fine */

/* LOSSJIT_KIND_REDUCTION or LOSSJIT_KIND_MAP. */
LOSSJIT_C_EXPORT int32_t lossjit_kind_of(const lossjit_loss* loss);
/* "sum", "mean", "batchmean"; "" for a map. */
LOSSJIT_C_EXPORT const char* lossjit_reduction(const lossjit_loss* loss);
LOSSJIT_C_EXPORT size_t lossjit_input_count(const lossjit_loss* loss);
LOSSJIT_C_EXPORT const char* lossjit_input_name(const lossjit_loss* loss, size_t index);  /* NULL past the end */
/* A program's several results (`loss, z, acc`): how many (1 for a program of one result) and each
 * name (NULL for a program of one result, or past the end). */
LOSSJIT_C_EXPORT size_t lossjit_result_count(const lossjit_loss* loss);
LOSSJIT_C_EXPORT const char* lossjit_result_name(const lossjit_loss* loss, size_t index);
/* Whether that result has a gradient with respect to some input at all: 1 or 0 (0 past the end). */
LOSSJIT_C_EXPORT int32_t lossjit_result_differentiable(const lossjit_loss* loss, size_t index);
LOSSJIT_C_EXPORT size_t lossjit_param_count(const lossjit_loss* loss);
LOSSJIT_C_EXPORT lossjit_status lossjit_param_at(const lossjit_loss* loss, size_t index, const char** name, double* value);
/* Takes effect for calls that start after it returns, on every device; no recompile. */
LOSSJIT_C_EXPORT lossjit_status lossjit_set_param(lossjit_loss* loss, const char* name, double value);
/* Does the program read this input or parameter? 1 or 0. */
LOSSJIT_C_EXPORT int32_t lossjit_uses(const lossjit_loss* loss, const char* name);

/* A view of memory the caller owns: `ndim` extents and strides in ELEMENTS (as torch's stride());
 * `strides` NULL means row-major contiguous; stride 0 broadcasts (expanded tensors). At most 16
 * dimensions; rank 0 (ndim 0, shape NULL) is a scalar. */
typedef struct lossjit_view {
    void* data;
    int32_t dtype;  /* lossjit_dtype */
    int32_t ndim;
    const int64_t* shape;
    const int64_t* strides;
} lossjit_view;

/* Where and how a GPU call runs. NULL means the legacy default stream on the options' device, with
 * lossjit's own scratch. */
typedef struct lossjit_exec {
    void* stream;          /* a CUstream / cudaStream_t (torch.cuda.current_stream().cuda_stream); NULL: legacy stream */
    int32_t device;        /* the CUDA device of the views; each device gets its own kernels */
    void* scratch;         /* device scratch lent for this call (zero-filled before its first use, one stream at a
                              time: lossjit/scratch.hpp), or NULL: lossjit allocates its own once per stream */
    size_t scratch_bytes;
} lossjit_exec;

/* The device scratch a reduction or gradient call needs on `device` when lent (opens the device). A
 * gradient whose kernel sums a broadcast input may need more: LOSSJIT_ERROR_SCRATCH_TOO_SMALL says. */
LOSSJIT_C_EXPORT lossjit_status lossjit_scratch_bytes(lossjit_loss* loss, int32_t device, size_t* bytes);

/* The broadcast shape of these inputs (a map's output): writes `*ndim` (at most 16) extents into
 * `shape`, which has room for 16. Only shapes are read. */
LOSSJIT_C_EXPORT lossjit_status lossjit_output_shape(const lossjit_loss* loss, const lossjit_view* inputs, size_t count,
                                                     int64_t* shape, int32_t* ndim);
/* The dtype a map's output or a result gets by default: the promoted floating type of the inputs
 * the program reads (bfloat16 for bfloat16 inputs). Only dtypes are read. */
LOSSJIT_C_EXPORT lossjit_status lossjit_output_dtype(const lossjit_loss* loss, const lossjit_view* inputs, size_t count,
                                                     int32_t* dtype);

/* ---- on the GPU: inputs are device memory in input order; every call only queues work on the stream ---- */

/* A reduction's value into one element (`result`: rank 0 or one element, any floating dtype); a
 * program of several results into a contiguous vector of lossjit_result_count elements. */
LOSSJIT_C_EXPORT lossjit_status lossjit_evaluate(lossjit_loss* loss, const lossjit_view* inputs, size_t count,
                                                 const lossjit_view* result, const lossjit_exec* exec);
/* A map into `output` (the broadcast shape; any floating dtype; may be strided). */
LOSSJIT_C_EXPORT lossjit_status lossjit_map(lossjit_loss* loss, const lossjit_view* inputs, size_t count,
                                            const lossjit_view* output, const lossjit_exec* exec);
/* A reduction's value (into `value`, as lossjit_evaluate's `result`; NULL to drop it) and
 * d(upstream * loss)/d input (of the first result) for each input
 * named in `wrt`, into `grads[k]` (contiguous, that input's shape, any floating dtype), in one
 * kernel. The upstream gradient is `upstream`, times the float32 at `upstream_device` if not NULL. */
LOSSJIT_C_EXPORT lossjit_status lossjit_value_and_grad(lossjit_loss* loss, const lossjit_view* inputs, size_t count,
                                                       const char* const* wrt, size_t wrt_count,
                                                       const lossjit_view* grads, const lossjit_view* value,
                                                       float upstream, const float* upstream_device,
                                                       const lossjit_exec* exec);
/* A map's vector-Jacobian product with `upstream` (a device tensor of the output's shape). */
LOSSJIT_C_EXPORT lossjit_status lossjit_map_grad(lossjit_loss* loss, const lossjit_view* inputs, size_t count,
                                                 const char* const* wrt, size_t wrt_count, const lossjit_view* grads,
                                                 const lossjit_view* upstream, const lossjit_exec* exec);

/* ---- the CPU reference: host memory, float64 arithmetic; needs no GPU ---- */
LOSSJIT_C_EXPORT lossjit_status lossjit_reference(const lossjit_loss* loss, const lossjit_view* inputs, size_t count,
                                                  double* value);
/* Every result of a program that lists several (`loss, z, acc`), into values[0 .. n): n must be
 * lossjit_result_count. */
LOSSJIT_C_EXPORT lossjit_status lossjit_reference_values(const lossjit_loss* loss, const lossjit_view* inputs,
                                                         size_t count, double* values, size_t n);
LOSSJIT_C_EXPORT lossjit_status lossjit_reference_map(const lossjit_loss* loss, const lossjit_view* inputs,
                                                      size_t count, const lossjit_view* output);
/* Gradients of a reduction (`upstream_tensor` NULL; scaled by `upstream`) or a map's vector-Jacobian
 * product with `upstream_tensor`, into `grads[k]`: contiguous host memory of input wrt[k]'s shape
 * and any floating dtype. */
LOSSJIT_C_EXPORT lossjit_status lossjit_reference_grad(const lossjit_loss* loss, const lossjit_view* inputs,
                                                       size_t count, const char* const* wrt, size_t wrt_count,
                                                       const lossjit_view* grads, double upstream,
                                                       const lossjit_view* upstream_tensor);

/* ---- linear_loss (lossjit/linear_loss.hpp): a row program over logits = h W^T + bias, a chunk of
 * rows at a time, never holding all the logits ---- */
typedef struct lossjit_linear lossjit_linear;
/* A copy of `loss` on `device` whose input `logits` (NULL: "logits") receives the products (each
 * call takes `loss`'s current parameter values: `loss` must outlive the handle);
 * `chunk_rows` 0 and `chunk_bytes` 0 choose the chunk (a chunk buffer of 1 GiB). A program whose
 * results do not add up over parts of the rows is a LOSSJIT_ERROR_SOURCE with its column. */
LOSSJIT_C_EXPORT lossjit_status lossjit_linear_create(const lossjit_loss* loss, const char* logits, int64_t chunk_rows,
                                                      size_t chunk_bytes, int32_t device, lossjit_linear** out);
LOSSJIT_C_EXPORT void lossjit_linear_free(lossjit_linear* linear); /* NULL is fine */
/* The chunking of a call with h [N, H] and W [V, H], and the device workspace it needs (lent to
 * lossjit_linear_run, or NULL there for memory the handle keeps). Only shapes and dtypes are read. */
LOSSJIT_C_EXPORT lossjit_status lossjit_linear_plan(const lossjit_linear* linear, const lossjit_view* h,
                                                    const lossjit_view* W, int32_t bias_gradient, int64_t* chunk_rows,
                                                    int64_t* chunks, size_t* workspace_bytes);
/* Queues the call on exec's stream: `values` (lossjit_result_count elements, any floating dtype; a
 * map of one value per row: [N]) and, where dh, dW, dbias are not NULL, the first result's gradients
 * (a map: none; lossjit_linear_backward). `others`: the program's inputs but the logits, in input order. */
LOSSJIT_C_EXPORT lossjit_status lossjit_linear_run(lossjit_linear* linear, const lossjit_view* h, const lossjit_view* W,
                                                   const lossjit_view* bias, const lossjit_view* others, size_t count,
                                                   const lossjit_view* values, const lossjit_view* dh,
                                                   const lossjit_view* dW, const lossjit_view* dbias,
                                                   const lossjit_exec* exec, void* workspace);
/* A map of one value per row: the vector-Jacobian product with `upstream` [N] into dh, dW, dbias
 * (each may be NULL), computing each chunk's logits again. */
LOSSJIT_C_EXPORT lossjit_status lossjit_linear_backward(lossjit_linear* linear, const lossjit_view* h,
                                                        const lossjit_view* W, const lossjit_view* bias,
                                                        const lossjit_view* others, size_t count,
                                                        const lossjit_view* upstream, const lossjit_view* dh,
                                                        const lossjit_view* dW, const lossjit_view* dbias,
                                                        const lossjit_exec* exec, void* workspace);

/* DLPack tensors: lossjit/lossjit_dlpack.h (it includes dlpack/dlpack.h). */

#ifdef __cplusplus
}
#endif

#endif /* LOSSJIT_LOSSJIT_H */
