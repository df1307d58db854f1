/* b12x C ABI: activation quantisers (see b12x/quantize.h for layouts and numerics).
 *
 * GPU ops launch on `stream` (a cudaStream_t, NULL = legacy default stream), never allocate or
 * synchronise, and are capture-safe. Outputs are caller-provided and fully written (incl. the
 * 128x4 scale padding). Optional tensors are passed as NULL. The b12x_ref_* functions are the
 * CPU reference on host tensors (bit-identical to the GPU ops). */
#ifndef B12X_C_API_QUANTIZE_H_
#define B12X_C_API_QUANTIZE_H_

#include "b12x/c_api/core.h"

/* Bytes of a 128x4-swizzled scale grid of [rows, cols] logical scales. */
B12X_C_API b12x_status b12x_swizzled_scale_bytes(int64_t rows, int64_t cols, int64_t* bytes);

/* x bf16/fp16 [M, K] (K % 16); global_scale fp32[1] on the device (multiply convention);
 * packed M*K/2 bytes; scale_swizzled pad128(M)*pad4(K/16) bytes. */
B12X_C_API b12x_status b12x_quantize_nvfp4(const b12x_tensor* x, const b12x_tensor* global_scale,
                                           const b12x_tensor* packed,
                                           const b12x_tensor* scale_swizzled, void* stream);
/* x [M, K] (K % 32); values e4m3 [M, K]; scale_rows [M, K/32] and/or scale_swizzled (either may
 * be NULL, not both). */
B12X_C_API b12x_status b12x_quantize_mxfp8(const b12x_tensor* x, const b12x_tensor* values,
                                           const b12x_tensor* scale_rows,
                                           const b12x_tensor* scale_swizzled, void* stream);
/* x [M, K] (K % 32); packed M*K/2 bytes; scale_swizzled pad128(M)*pad4(K/32) bytes (ceil rule). */
B12X_C_API b12x_status b12x_quantize_mxfp4(const b12x_tensor* x, const b12x_tensor* packed,
                                           const b12x_tensor* scale_swizzled, void* stream);
/* x [M, K] (any K); scale fp32[1] on the device: values = e4m3_satfinite(x / scale). */
B12X_C_API b12x_status b12x_quantize_fp8_tensor(const b12x_tensor* x, const b12x_tensor* scale,
                                                const b12x_tensor* values, void* stream);
/* x [M, K] (K % 128); values e4m3 [M, K]; scales fp32 [M, K/128] (= amax/448). */
B12X_C_API b12x_status b12x_quantize_fp8_group128(const b12x_tensor* x, const b12x_tensor* values,
                                                  const b12x_tensor* scales, void* stream);

/* CPU reference (host tensors). */
B12X_C_API b12x_status b12x_ref_quantize_nvfp4(const b12x_tensor* x, float global_scale,
                                               const b12x_tensor* packed,
                                               const b12x_tensor* scale_swizzled);
B12X_C_API b12x_status b12x_ref_quantize_mxfp8(const b12x_tensor* x, const b12x_tensor* values,
                                               const b12x_tensor* scale_rows,
                                               const b12x_tensor* scale_swizzled);
B12X_C_API b12x_status b12x_ref_quantize_mxfp4(const b12x_tensor* x, const b12x_tensor* packed,
                                               const b12x_tensor* scale_swizzled);
B12X_C_API b12x_status b12x_ref_quantize_fp8_tensor(const b12x_tensor* x, float scale,
                                                    const b12x_tensor* values);
B12X_C_API b12x_status b12x_ref_quantize_fp8_group128(const b12x_tensor* x,
                                                      const b12x_tensor* values,
                                                      const b12x_tensor* scales);

#endif /* B12X_C_API_QUANTIZE_H_ */
