// b12x CPU reference of the activation quantisers (the oracle of the GPU quantisers; bit-exact).
//
// Host tensors only (device == -1). x is bf16 or fp16 [M, K], inner dim contiguous, any row
// stride. Outputs are contiguous host buffers laid out exactly like the GPU outputs (see
// b12x/quantize.h): values/packed row-major, row-major scale grids, and the 128x4-swizzled scale
// grids with their padding bytes (0 for NVFP4, 127 for MX). Scale rules: gemm/quantize_rules.h.
#pragma once

#include "b12x/types.h"

namespace b12x::reference {

/// MXFP8: values e4m3 [M, K]; scale_rows ue8m0/uint8 [M, K/32] and/or scale_swizzled
/// (pad128(M) * pad4(K/32) bytes); either scale output may be absent (data == nullptr).
void quantize_mxfp8(const TensorRef& x, const TensorRef& values, const TensorRef& scale_rows,
                    const TensorRef& scale_swizzled);
/// MXFP4 (ceil rule): packed uint8 [M, K/2] (or fp4 [M, K]); scale_swizzled pad128(M)*pad4(K/32).
void quantize_mxfp4(const TensorRef& x, const TensorRef& packed, const TensorRef& scale_swizzled);
/// NVFP4 with the multiply-convention global scale gs: packed [M, K/2]; scale_swizzled
/// pad128(M) * pad4(K/16) bytes of UE4M3.
void quantize_nvfp4(const TensorRef& x, float global_scale, const TensorRef& packed,
                    const TensorRef& scale_swizzled);
/// FP8 per tensor: values = e4m3_satfinite(x / scale).
void quantize_fp8_tensor(const TensorRef& x, float scale, const TensorRef& values);
/// FP8 1x128 groups: values e4m3 [M, K], scales fp32 [M, K/128] (= amax/448, multiplied back).
void quantize_fp8_group128(const TensorRef& x, const TensorRef& values, const TensorRef& scales);

}  // namespace b12x::reference
