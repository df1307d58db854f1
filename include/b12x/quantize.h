// b12x activation quantisers: BF16/FP16 -> NVFP4, MXFP8, MXFP4, FP8 per-tensor, FP8 1x128 groups.
//
// Stateless one-shot ops: they validate (host metadata only), then launch on `stream`. They never
// allocate, synchronise or read device memory on the host, so they may be captured in a CUDA
// graph; replays read the current contents of x (and of the device-side scale scalars).
//
// Inputs: x is bf16 or fp16 [M, K] on a CUDA device, inner dim contiguous, any row stride >= K
// (16-byte aligned rows take the vectorised path). M may be 0 (no-op) or any positive number.
// Outputs are caller-provided, contiguous, on x's device, and are described by their byte size
// (any shape with the right number of bytes is accepted, e.g. [M, K/2] or [1, M, K/2] for packed
// FP4). Every byte of every output is written, including the padding of the 128x4-swizzled scale
// grids (0 for NVFP4, 127 = 1.0 for MX), so outputs need no pre-fill.
//
// Numerics (bit-identical to b12x/reference/quantize.h; rules in src/gemm/quantize_rules.h):
// - NVFP4: block of 16, SF = ue4m3_satfinite((gs * amax) / 6), q = e2m1(x * (1 / (SF * (1/gs)))),
//   correctly rounded divisions (formats/block.h), element 2i in the low nibble, -0 stored as +0;
//   gs (device fp32[1]) uses the multiply convention (gs = 448*6/amax_tensor; vLLM passes
//   1/input_scale). SF == 0 or gs == 0 gives zero values.
// - MXFP8: block of 32, E8M0 = pow2-ceil(amax/448) (all-zero block: 127), q = e4m3(x * 2^(127-e)).
// - MXFP4: block of 32, ceil rule E8M0 = ceil(log2(amax/6)) + 127 (never clips; all-zero: 127).
// - FP8 1x128: s = amax/448 (fp32, multiplied back on dequantisation), q = e4m3(x / s); an
//   all-zero group stores s = 0 and q = 0.
// - FP8 per tensor: q = e4m3_satfinite(x / scale), scale a device fp32[1].
#pragma once

#include <cstdint>

#include "b12x/types.h"

namespace b12x {

/// Bytes of a 128x4-swizzled scale grid for [rows, cols] logical scales: pad128(rows)*pad4(cols).
int64_t swizzled_scale_bytes(int64_t rows, int64_t cols);

/// NVFP4. global_scale: fp32 [1] (or [] scalar) on the device. packed: uint8 [M, K/2] or fp4
/// [M, K] (M*K/2 bytes). scale_swizzled: uint8 / ue4m3 / fp8_e4m3, pad128(M)*pad4(K/16) bytes.
/// K % 16 == 0.
void quantize_nvfp4(const TensorRef& x, const TensorRef& global_scale, const TensorRef& packed,
                    const TensorRef& scale_swizzled, Stream stream);

/// MXFP8 rows. values: fp8_e4m3/uint8 [M, K]. scale_rows: ue8m0/uint8 [M, K/32] (optional,
/// data == nullptr to skip); scale_swizzled: pad128(M)*pad4(K/32) bytes (optional); at least one
/// of the two. K % 32 == 0.
void quantize_mxfp8(const TensorRef& x, const TensorRef& values, const TensorRef& scale_rows,
                    const TensorRef& scale_swizzled, Stream stream);

/// MXFP4. packed: M*K/2 bytes; scale_swizzled: ue8m0/uint8, pad128(M)*pad4(K/32) bytes. K % 32 ==
/// 0.
void quantize_mxfp4(const TensorRef& x, const TensorRef& packed, const TensorRef& scale_swizzled,
                    Stream stream);

/// FP8 per tensor. scale: fp32 [1] (or []) on the device; values fp8_e4m3/uint8 [M, K]. Any K.
void quantize_fp8_tensor(const TensorRef& x, const TensorRef& scale, const TensorRef& values,
                         Stream stream);

/// FP8 with 1x128 groups (DeepSeek activations). values fp8_e4m3/uint8 [M, K]; scales fp32
/// [M, K/128]. K % 128 == 0.
void quantize_fp8_group128(const TensorRef& x, const TensorRef& values, const TensorRef& scales,
                           Stream stream);

}  // namespace b12x
