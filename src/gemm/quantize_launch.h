// Device launchers of the activation quantisers (BF16/FP16 -> FP8 / MXFP8 / NVFP4 / MXFP4).
//
// Called by the public quantiser ops (quantize.h) and from inside the GEMM and MoE ops.
// Contract for every launcher:
// - x is [M, K] bf16 or fp16 (x_dtype), row stride ldx in values; all outputs are row-major and
//   dense (no output strides).
// - EVERY byte of every output is written, including the padding of the swizzled scale grids
//   (pad rows/columns of the 128x4 layout get 0 for NVFP4 and 127 for MX, formats/swizzle.h), so
//   callers never pre-fill.
// - Capture-safe: launches only (no allocation, no host sync, no host read of device data, no
//   environment or device query: `q` holds what was decided at plan / setup time).
// - M == 0 is a no-op; any M >= 1 works. Nothing expensive is validated here (the public ops
//   validate); callers guarantee K is a multiple of the block (32 MX, 16 NVFP4, 128 group FP8,
//   1 per-tensor FP8 -- the per-tensor kernel handles any K), x is 2-byte aligned, and for the
//   vectorised fast path the kernels themselves check 16-byte alignment of x/ldx at launch.
// - Numerics are those of formats/block.h (bit-identical to the CPU reference in
//   src/reference/quantize.*).
#pragma once

#include <cstdint>

#include "b12x/gemm.h"
#include "b12x/types.h"

namespace b12x::gemm {

/// The quantizers' launch options for `device`: its SM count and compute capability and the
/// B12X_QUANT_* knobs as set now (plan / setup time, never inside a run).
ActQuant act_quant_options(int device);
/// act_quant_options of `device` as at the first call for it in this process (the public
/// quantize ops, which have no plan).
const ActQuant& act_quant_cached(int device);

/// MXFP8: E4M3 values, one E8M0 scale per 32 values (pow2-ceil of amax/448).
/// values: [M, K]; scale_rows: [M, K/32] row-major or nullptr; scale_swizzled: 128x4 layout of
/// pad128(M) * pad4(K/32) bytes, or nullptr. At least one scale output should be non-null.
/// pdl: launched as a programmatic dependent of the previous kernel (waiting for it before
/// reading x) that lets its own dependent start at once (the GEMM behind it, which waits with
/// griddepcontrol.wait).
void launch_quantize_mxfp8(const void* x, DType x_dtype, int64_t M, int64_t K, int64_t ldx,
                           uint8_t* values, uint8_t* scale_rows, uint8_t* scale_swizzled,
                           const ActQuant& q, Stream stream, bool pdl = false);

/// FP8 E4M3 with one fp32 scale per 1x128 group: scale = amax/448, q = e4m3(x / scale)
/// (formats/block.h; an all-zero group stores scale 0); values [M, K], scales [M, K/128].
/// early_dependents: a programmatic dependent launch (the GEMM after it, which waits with
/// griddepcontrol.wait before reading these outputs) may start once every CTA has started (on
/// SM90 at M >= 128, with q.pdl); the public op passes false (its caller's next kernel need not
/// wait). pdl: as launch_quantize_mxfp8's (and the trigger at every M).
void launch_quantize_fp8_group128(const void* x, DType x_dtype, int64_t M, int64_t K, int64_t ldx,
                                  uint8_t* values, float* scales, const ActQuant& q, Stream stream,
                                  bool early_dependents = true, bool pdl = false);

/// launch_quantize_fp8_group128 (same bits, early programmatic trigger as there) with the values
/// as the SM90 block FP8 wgmma kernel's activation stage images (its bulk-copy default): one 16 KB
/// block per (128-token tile, 128-K group), tile-major, token row r at r * 128 with 16-byte chunk c
/// at c ^ (r & 7); rows M..pad128(M) - 1 zero. values: pad128(M) * K bytes, 16-byte aligned;
/// scales [M, K/128] as there. Returns false (nothing launched) where the vector kernel cannot
/// take the rows (x 16-byte aligned, ldx % 8 == 0, K % 128 == 0).
bool launch_quantize_fp8_group128_tiled(const void* x, DType x_dtype, int64_t M, int64_t K,
                                        int64_t ldx, uint8_t* values, float* scales,
                                        const ActQuant& q, Stream stream);

/// MXFP8 quantization of x followed by its BF16 dequantization (E8M0 folded), in one pass: the
/// bits of launch_quantize_mxfp8 then lin::act_dequant_kernel (kind kMxfp8Rows, no scale output,
/// `kperm` as lin::ActParams::kperm) into out [M][KP] (zeros past K), for vector rows (x 16-byte
/// aligned, ldx % 8 == 0, K and KP multiples of 32, out 16-byte aligned); returns false (nothing
/// launched) otherwise or without q.mxfp8_fused (the caller then runs both passes).
/// Round 21 (M = 2048, five shapes): MXFP8 +3-17%, MXFP4 W4A8 +3-18% over the two passes.
bool launch_mxfp8_dequant_bf16(const void* x, DType x_dtype, int64_t M, int64_t K, int64_t ldx,
                               int64_t KP, bool kperm, uint16_t* out, const ActQuant& q,
                               Stream stream);

/// NVFP4: E2M1 pairs (element 2i in the low nibble), one UE4M3 scale per 16 values with the
/// fp32 global scale `global_scale` (device fp32[1], multiply convention: the block scale stored
/// is ue4m3((gs * amax) / 6), formats/block.h). packed: [M, K/2]; scale_swizzled:
/// pad128(M) * pad4(K/16) bytes.
void launch_quantize_nvfp4(const void* x, DType x_dtype, int64_t M, int64_t K, int64_t ldx,
                           const float* global_scale, uint8_t* packed, uint8_t* scale_swizzled,
                           const ActQuant& q, Stream stream);

/// MXFP4: E2M1 pairs, one E8M0 scale per 32 values with the ceil rule (2^ceil(log2(amax/6)),
/// never clips; all-zero block 127); packed [M, K/2]; scale_swizzled pad128(M) * pad4(K/32).
void launch_quantize_mxfp4(const void* x, DType x_dtype, int64_t M, int64_t K, int64_t ldx,
                           uint8_t* packed, uint8_t* scale_swizzled, const ActQuant& q,
                           Stream stream);

/// Per-tensor FP8 E4M3 with a caller-provided scale (device fp32[1]): q = e4m3(x / scale),
/// saturating. values: [M, K].
void launch_quantize_fp8_tensor(const void* x, DType x_dtype, int64_t M, int64_t K, int64_t ldx,
                                const float* scale, uint8_t* values, const ActQuant& q,
                                Stream stream);

}  // namespace b12x::gemm
