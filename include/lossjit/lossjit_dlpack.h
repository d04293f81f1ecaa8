/* lossjit's C ABI on DLPack tensors (dlpack/dlpack.h, v0.6 or later: Debian's libdlpack-dev), the
 * form frameworks exchange tensors in. Part of liblossjit_c.so, ABI LOSSJIT_C_API_VERSION. */
#ifndef LOSSJIT_LOSSJIT_DLPACK_H
#define LOSSJIT_LOSSJIT_DLPACK_H

#include <dlpack/dlpack.h>

#include "lossjit/lossjit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Describes `tensor` as a view: the dtype from (code, bits) with one lane (float 16/32/64, bfloat
 * 16, int 32/64, uint 8, bool 8), data + byte_offset, strides in elements (NULL: contiguous).
 * `view->shape` and `view->strides` point into the DLTensor. `*device` (if not NULL) is its CUDA
 * device ordinal, or -1 for host memory (kDLCPU, kDLCUDAHost); other devices are a usage error. */
LOSSJIT_C_EXPORT lossjit_status lossjit_view_from_dlpack(const DLTensor* tensor, lossjit_view* view, int32_t* device);

/* lossjit_evaluate and lossjit_map on DLTensors: the device is the tensors' (all on one CUDA
 * device), the stream `stream` (NULL: the legacy stream), with lossjit's own scratch. */
LOSSJIT_C_EXPORT lossjit_status lossjit_evaluate_dlpack(lossjit_loss* loss, const DLTensor* const* inputs,
                                                        size_t count, const DLTensor* result, void* stream);
LOSSJIT_C_EXPORT lossjit_status lossjit_map_dlpack(lossjit_loss* loss, const DLTensor* const* inputs, size_t count,
                                                   const DLTensor* output, void* stream);
/* lossjit_reference on host DLTensors (the CPU reference). */
LOSSJIT_C_EXPORT lossjit_status lossjit_reference_dlpack(const lossjit_loss* loss, const DLTensor* const* inputs,
                                                         size_t count, double* value);

#ifdef __cplusplus
}
#endif

#endif /* LOSSJIT_LOSSJIT_DLPACK_H */
