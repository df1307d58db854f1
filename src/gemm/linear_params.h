// Parameter blocks of the linear GEMM kernels (plain structs shared by host and device code).
#pragma once

#include <cstdint>

namespace b12x::gemm::lin {

/// Kernel parameters shared by the decode and tiled kernels.
struct LinearParams {
  const uint8_t* wvals;    // packed values
  const uint8_t* wscale;   // primary scale array (see linear_layout.h)
  const uint8_t* wscale2;  // IQ2 sub-scales
  int64_t n16, kvec, KP, scale_ld, scale2_ld;
  const void* x;  // activations [M][ldx] (bf16/fp16)
  int64_t ldx;
  int x_vec16;          // x and ldx allow 16-byte loads
  const float* xscale;  // act group scales [M][xscale_ld] fp32, or null
  int64_t xscale_ld;
  int64_t M, N, K;
  void* out;  // [M][ldo] bf16/fp16
  int64_t ldo;
  int out_fp16;
  const void* bias;    // [N] out dtype or null
  const float* alpha;  // device scalar or null
  float out_mult;      // host multiplier (2^7 compensation, global scale)
  float* partial;      // split-K partials [split][M][NP] or null
  int64_t NP;
  int slices_per_cta;
  int split;
  int cluster_split;  // 1: no cluster; >1: grid.y is one cluster, reduced through DSMEM
  int decode_ws;      // decode kernel: warps per weight tile (0 / 1: one; 2, 4: K split in the CTA)
  // Activation source of the weight-streaming kernel (dequantized while staging):
  int act_kind;             // ActSrc
  int decode_pipe;          // decode kernel: pipelined two-buffer activation staging (kPipe)
  int decode_half;          // decode kernel: 8 warps, two per tile on slice halves (kHalf)
  int decode_deep;          // decode kernel: extra ring stages (kDeep, the 4-warp grid)
  int decode_seg_stage;     // decode kernel: staging copies by 32-piece segments per warp
  int decode_sync_stage;    // decode kernel, FP8 weights, kWS > 1 without kPipe: plain loads
  int decode_lean;          // decode kernel: per-slice bookkeeping by running pointers (kLean)
  int decode_mma;           // decode kernel, FP8 weights: 0 e4m3 mma.sync, 1 f16 MMAs
  int decode_xshare;        // decode kernel (kXsh): CTAs per cluster sharing the staging, or 0
  int64_t ldx_bytes;        // row stride of quantized x in bytes
  const uint8_t* xq_scale;  // nvfp4/mxfp4 swizzled scale bytes, or e8m0 rows
  int xs_kind;              // XsSrc: where the fp32 group scales come from
  int pdl;                  // launch with programmatic stream serialization (SM90+)
  // Weight-streaming kernel: activation rows staged per CTA (min(M, 8*NT)) and K slices per
  // staged chunk (dynamic shared memory = stage_geom(format, stage_rows, stage_slices).bytes).
  int stage_rows;
  int stage_slices;
  // wgmma tiled kernel: 0 = 2-D grid (weight tiles on x, token tiles on y); g > 0 = 1-D grid in
  // bands of g token tiles, the token tile fastest within a band (lin::wgmma_tile).
  int raster_group;
  // Decode kernel with the pipelined staging: the two staging buffers' shared-memory budget in
  // bytes (0: kDecodePipeBudget, what SM12x's 99 KB leave; probe, Plan::decode_pipe_kb).
  int decode_pipe_budget;
  // M = 1 streaming kernel (linear_stream_kernel): 64-K vectors per K part of a tile.
  int stream_vp;
  // M <= 16 block kernel (linear_stream16_kernel): 16-row tiles per CTA (8 x tiles per warp).
  int stream_tiles;
  // MXFP4 on the stream / block kernels: the fold-free splat instances (kMxFree; host-side pick
  // by the launchers: the bound weight's E8M0 codes are all <= 135 and the plan took them).
  int mx_free;
  // Stream / block / decode kernels: trigger the dependent launch (PDL) once a warp has issued
  // its last weight loads (sessions 15 / 17, Plan::stream_trig), not only at the end.
  int stream_trig;
  // M = 1 stream kernel: variant (session 16, Plan::decode_stream_var; kVar of
  // linear_stream_kernel: 8 the NVFP4 activations converted while staging).
  int stream_var;
  // 8 warps per tile: the device's ring + staging budget (lin::decode_ws8_budget of the opt-in
  // shared memory, Plan::decode_ws8_budget; run reads no device info).
  int64_t decode_ws8_budget;
  // linear_reduce_kernel: trigger the dependent launch right after its wait (Plan::reduce_trig).
  int reduce_trig;
  // Decode kernel at M = 1 (session 28): linear_decode_kernel's kVar (1 MXFP8's groups on
  // the MMA's columns, 2 the weight scales in the ring).
  int decode_var;
  // A word of the scratch for kernels that count or flag within a launch (session 29: the M = 1
  // stream kernel's group claim, kStreamVarClaim; %gridid-tagged, so any bytes), or null.
  unsigned long long* s16_flags;
};

/// LinearParams::stream_var bit of the M = 1 stream kernel's late ring requests (session 26; SM90
/// default by kStreamLateRule, B12X_GEMM_STREAM_LATE=0|1; linear_stream_kernel's kLate).
inline constexpr int kStreamVarLate = 4096;
/// LinearParams::stream_var bit of the M = 1 stream kernel's K parts of an even number of vectors
/// (session 27; SM90 default by kStreamHalfRule, B12X_GEMM_STREAM_HALF=0|1; linear_stream_kernel's
/// kHalf): a part's last block may hold 2 of the ring's 4 vectors, so that vp = ceil(kvec / parts)
/// rounded to 2, not 4.
inline constexpr int kStreamVarHalf = 8192;
/// LinearParams::stream_var bit of the M = 1 blocks' requests first (session 28; SM90 default by
/// kStreamRfRule, B12X_GEMM_STREAM_RF=0|1; linear_stream_kernel's kRf): a block's 4 next ring
/// requests before its activations are stored.
inline constexpr int kStreamVarRf = 32768;
/// LinearParams::stream_var bit of the M = 1 stream kernel's dynamic group claim (session 29
/// probe, B12X_GEMM_STREAM_CLAIM=1|<ctas>; linear_stream_kernel's kClaim): each CTA's groups past
/// its first two are claimed from a per-instance counter, two groups ahead.
inline constexpr int kStreamVarClaim = 65536;

/// Activation source kinds of the weight-streaming kernel.
enum ActSrc : int32_t {
  kActRaw16 = 0,  ///< bf16/fp16 x [M][ldx]
  kActFp8 = 1,    ///< e4m3 bytes
  kActNvfp4 = 2,  ///< packed e2m1 + swizzled UE4M3 (folded into the staged values)
  kActMxfp4 = 3,  ///< packed e2m1 (+ swizzled E8M0 group scales)
  /// bf16 x [M][ldx] of block FP8 / MXFP8 weights, quantized to e4m3 + group scales (their
  /// quantizer's numerics) while staging, instead of a quantizer launch (xs_kind kXsStaged).
  kActBf16Quant = 4,
};
/// Group-scale sources.
enum XsSrc : int32_t {
  kXsNone = 0,
  kXsF32Rows = 1,   ///< xscale fp32 [M][xscale_ld]
  kXsE8m0Rows = 2,  ///< xq_scale bytes [M][xscale_ld]
  kXsE8m0Swz = 3,   ///< xq_scale 128x4-swizzled, K/32 columns
  kXsStaged = 4,    ///< written into the staged group scales by the staging (kActBf16Quant)
};

enum class ActKind : int32_t {
  kNvfp4 = 0,      ///< packed e2m1 + swizzled UE4M3 / 16: bf16 = v * s (exact), no group scale
  kMxfp4 = 1,      ///< packed e2m1 + swizzled E8M0 / 32: bf16 = v, scale 2^(e-127)
  kFp8 = 2,        ///< e4m3: bf16 = v
  kFp8Group = 3,   ///< e4m3 + fp32 [M][K/128]: bf16 = v, scale copied
  kMxfp8Rows = 4,  ///< e4m3 + E8M0 rows [M][K/32]: bf16 = v, scale 2^(e-127)
};

struct ActParams {
  ActKind kind;
  const uint8_t* x;  // values
  int64_t ldx_bytes;
  const uint8_t* xs;  // scales (swizzled bytes, fp32 rows or e8m0 rows)
  int64_t xs_ld;      // row stride of row-major scales, in elements
  int64_t M, K, KP;
  uint16_t* out;     // bf16 [M][KP]
  float* out_scale;  // [M][KP/group] or null
  int group;
  /// 1: write every 32-K block in the k order of the e4m3 m16n8k32 weight fragment (slot
  /// 16s + 8h + 2t + e holds k = 16s + 4t + 2h + e), so that BF16 m16n8k16 MMAs can consume FP8
  /// weight fragments decoded in place (the tiled kernel's MXFP8 fold mode).
  int kperm;
  /// 1: launched with PDL (lin::launch_act_dequant); the kernel waits on its predecessor and
  /// lets the GEMM after it launch at once.
  int pdl;
};

}  // namespace b12x::gemm::lin
