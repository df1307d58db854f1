// Linear GEMM host side: validation, planning (regime, split-K, scratch carve-out), binding and
// launching; the one-shot helper with its plan/scratch cache.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

#include "b12x/gemm.h"
#include "b12x/runtime.h"
#include "core/cuda_check.h"
#include "formats/swizzle.h"
#include "gemm/linear_decode.h"
#include "gemm/linear_gemv_ggml.h"
#include "gemm/linear_internal.h"
#include "gemm/linear_launch.h"
#include "gemm/linear_params.h"
#include "gemm/linear_stream16_fp8.h"
#include "gemm/linear_wgmma_group.h"
#include "gemm/quantize_launch.h"

namespace b12x::gemm {

using lin::WFmt;

namespace {

constexpr int64_t kAlign = 1024;
int64_t align_up(int64_t x) {
  return (x + kAlign - 1) / kAlign * kAlign;
}

/// Activation dtypes accepted per format.
bool act_dtype_ok(LinearFormat f, DType t) {
  if (format_raw_activations(f) || format_quantizes_inside(f)) {
    if (t == DType::kBF16 || t == DType::kFP16) return true;
    return f == LinearFormat::kFp8Block && t == DType::kFP8E4M3;
  }
  if (f == LinearFormat::kFp8Tensor) return t == DType::kFP8E4M3 || t == DType::kUInt8;
  if (format_is_w4a4(f)) return t == DType::kFP4E2M1 || t == DType::kUInt8;
  return false;
}

const char* act_dtype_set(LinearFormat f) {
  if (f == LinearFormat::kFp8Block) return "bf16, fp16 (quantized inside) or fp8_e4m3 + x_scale";
  if (format_raw_activations(f) || format_quantizes_inside(f)) return "bf16, fp16";
  if (f == LinearFormat::kFp8Tensor) return "fp8_e4m3 (or uint8)";
  return "fp4_e2m1 / uint8 packed";
}

/// The MMA operand dtype: the caller's bf16/fp16 for raw activations, else bf16.
bool mma_fp16(LinearFormat f, DType act) {
  return format_raw_activations(f) && act == DType::kFP16;
}

/// Activation group of the fp32 act scales the engine consumes (0 = none).
int act_group(LinearFormat f, DType act) {
  switch (f) {
    case LinearFormat::kFp8Block:
      return 128;
    case LinearFormat::kMxfp8:
    case LinearFormat::kMxfp4:
    case LinearFormat::kMxfp4W4A8:
      return 32;
    default:
      return 0;
  }
}

int decode_nt(int64_t m) {
  return m <= 8 ? 1 : 2;
}

/// Up to this many tokens the weight-streaming kernel (token tiles of 16 re-reading the weights
/// from L2) beats 128-row tiles, whose MMAs would be mostly padding.
constexpr int64_t kDecodeMaxM = 32;

/// The stream kernel with token rows (M = 2..4): its grid capped so that each CTA streams at
/// least this many 16-row tiles over its one activation staging, by default where that grid still
/// has ~0.9 x SMs CTAs (rounds 45-46: 2+ tiles per CTA won, 1 lost, a cap of 4 lost).
constexpr int64_t kStreamRowsMinTiles = 2;

/// MXFP4 fold-free splats on the stream / block kernels (Plan::stream_mx_free) for weights whose
/// E8M0 codes take them, and MXFP4 W4A16 at M = 1 on the stream kernel for such weights
/// (Plan::decode_stream_free_only). Session 15 probes (round 56).
/// Round 56 (H200, us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096, stream kernel fold
/// -> fold-free): M = 1 W4A16 5.86 / 13.95 / 13.63 / - -> 5.48 / 12.30 / 12.28 / 7.29 (the
/// decode kernel, W4A16's old route, 6.01 / 14.59 / 12.73 / 8.04 in round 55), W4A4 6.64 / 14.44
/// / 14.44 / 9.29 -> 6.16 / 12.85 / 12.87 / 8.43; M = 16 (block kernel) W4A16 8.33 / 19.49 / - ->
/// 8.15 / 17.46 / 17.52 / 10.62 / 8.61 (round 55: 8.52 / 19.67 / 19.24 / 11.87 / 8.82).
/// B12X_GEMM_STREAM_MX_FREE=0 / B12X_GEMM_STREAM_MX=0 turn them off.
constexpr bool kStreamMxFree = true;
constexpr bool kStreamMxW4a16Free = true;
/// W4A4 at M = 1: the stream kernel converts the NVFP4 activations itself (no pre-pass) up to
/// this K (Plan::decode_stream_var bit 8; round 60: 4096x14336 6.3 % slower, every K <= 7168
/// 3-16 % faster).
constexpr int64_t kStreamQxMaxK = 8192;
/// The M = 1 stream kernel without the CTA's staging of the whole K: each warp loads its blocks'
/// activations one block ahead into its own buffer (lin::linear_stream_kernel's kJit,
/// Plan::decode_stream_var bit 128, signature `v128` / `v136` with W4A4's in-kernel conversion),
/// where each warp owns its K part (8 parts: no activation loaded twice in a CTA) at the 2-CTA
/// cap (the 3-CTA instances spilled). Round 73 (H200, M = 1, us over 4096x4096 / 14336x4096 /
/// 4096x14336 / 6144x4096 / 2048x7168, two interleaved runs, off -> on): NVFP4 W4A16 4.78 / 10.91
/// / 10.84 / 6.30 / 4.90 and 4.75 / 10.91 / 10.85 / 6.32 / 4.87 -> 4.24 / (2 parts: 11.01) /
/// 9.89 / (3-CTA) / 4.47 and 4.25 / (11.06) / 9.93 / - / 4.44; MXFP4 W4A16 4.92 / 11.50 / 11.53
/// -> 4.40 / (11.64) / 10.53, W4A4 6.14 / 12.82 / 12.85 -> 5.53 / (12.96) / 11.92; NVFP4 W4A4
/// 5.37 / 11.50 / 12.23 -> 5.12 (v136) / (14.20) / 11.63 (v128, the pre-pass; v136 12.63).
/// Session 21 removed B12X_GEMM_STREAM_JIT=0 / =1 (off; forced at the 2-CTA cap for any K parts)
/// with the instances only they reached.
constexpr bool kStreamJit = true;
/// Session 20: W4A4's FP4 activations converted in the per-warp blocks by BF16 pair arithmetic
/// (Plan::decode_stream_var bits 8 | 32, nvfp4x8_bf16_e7 / mxfp4x8_bf16) wherever the blocks run,
/// instead of the pre-pass (MXFP4, NVFP4 past kStreamQxMaxK) or the scalar conversion (v136);
/// MXFP4 W4A4 then takes the blocks at the 2-CTA cap for any K parts (no pre-pass launch). Round
/// 75 (H200, M = 1, us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, default
/// -> QCVT): NVFP4 W4A4 5.16 / - / 11.58 / - / 5.66 -> 4.71 / - / 10.88 / - / 5.14, MXFP4 W4A4
/// 5.56 / 13.07 / 11.99 / 8.48 / 5.83 -> 4.75 / 12.67 (2 parts) / 11.41 / 7.66 (4 parts) / 5.14.
/// Session 21 removed B12X_GEMM_STREAM_QCVT=0 with the instances only it reached (v136, MXFP4
/// W4A4's v128 / staging after the pre-pass).
constexpr bool kStreamQcvt = true;
/// Session 24: W4A4 at M = 1 where the 2-CTA grid has fewer than 8 K parts (NVFP4's CTA staging
/// with the scalar nvfp4x8_bf16, K <= kStreamQxMaxK; MXFP4's per-warp blocks) takes the CTA's
/// staging with the blocks' pair-arithmetic conversion (Plan::decode_stream_var 40 = 8 | 32:
/// nvfp4x8_bf16_e7 / mxfp4x8_bf16 from per-lane constant addresses, once per CTA). Round 89
/// (H200, 14336x4096, 2 parts, the one shape of the five with such a plan): NVFP4 W4A4 11.52 ->
/// 10.91 us, MXFP4 W4A4 12.50 -> 11.68; round 90 10.96 / 10.92 against 11.59 / 11.60, 11.71 /
/// 11.69 against 12.50 / 12.46). SM90 only (unmeasured elsewhere); B12X_GEMM_STREAM_QS=0|1.
constexpr bool kStreamQs = true;
/// Session 26: the M = 1 ring's requests after each slot's decode where round 98 measured them
/// faster (plan rule below; lin::kStreamVarLate).
constexpr bool kStreamLateRule = true;
/// Session 27: the M = 1 8-part 2-CTA blocks' K parts of an even number of vectors where the grid
/// has more CTAs than SMs (plan rule below; lin::kStreamVarHalf).
constexpr bool kStreamHalfRule = true;
/// Session 28: the M = 1 per-warp blocks' next ring requests before each block's activation
/// store, NVFP4 where round 106 measured it faster (plan rule below; lin::kStreamVarRf).
constexpr bool kStreamRfRule = true;
/// Session 20: MXFP4 W4A16 with fold-free weights takes NVFP4 W4A16's one-tile-per-SM rule (the
/// stream kernel at the 2-CTA cap with the early trigger where 0.9-1 row tiles per SM): round 75
/// 2048x7168 4.91 (decode kernel) -> 4.51 us (round 74 4.90 -> 4.52).
constexpr bool kStreamMxTilePerSm = true;
/// Session 20: the 3-CTA cap with 8 K parts and one group per CTA takes the per-warp blocks with
/// kLean's registers (one MMA chain, the lane's scale bytes only: 72-80 registers, no spills; var
/// bit 64) where that grid fills >= 80 % of the slots, and W4A4 takes that grid there.
/// Round 75 (6144x4096, 384 CTAs): W4A16 6.43 -> 5.70 us, W4A4 7.96 (4 parts, 2-CTA staging)
/// -> 6.28; the spilling 3-CTA instance without kLean 7.33 / 7.32; 14336x4096 (2.3 groups per
/// CTA) 11.04 -> 11.56, not taken. Round 76 (6144x4096): MXFP4 W4A16 6.60 -> 5.81, W4A4 7.83 (4
/// parts, the blocks) -> 6.39; 4096x4096 / 4096x14336 / 2048x7168 (65 / 65 / 32 % of the slots)
/// NVFP4 W4A16 4.24 / 9.93 / 4.45 -> 4.82 / 10.52 / 5.24, not taken. B12X_GEMM_STREAM_JIT=4 forces
/// it at the 3-CTA cap with 8 parts (the spilling instances without kLean were removed).
constexpr bool kStreamJitLean3 = true;
/// Plan::stream_trig's default mask: the 4-row kernel (M = 2..4), round 57 NVFP4 W4A16 M = 4
/// off -> on 8.72 / 14.83 / 18.14 / 10.67 us -> 6.95 / 14.25 / 18.13 / 10.21 (2048x7168 runs the
/// decode kernel; round 56 alike). The M = 1 kernel's (mask 1) where its grid fills >= 80 % of
/// the CTA slots (the next call's early CTAs then find few free slots and spread as this call's
/// drain; on a grid of 65 % fill they stack on the SMs with free slots): round 57 W4A16 M = 1
/// (two runs each) 5.27 / 11.59 / 11.60 / 6.87 -> 5.24 / 10.77 / 12.97 / 6.29 (fills 0.65 / 0.85 /
/// 0.65 / 0.97): on at 14336x4096 (-7 %) and 6144x4096 (-8 %), off at 4096x14336 (+11 % with it)
/// and 4096x4096 (flat); W4A4's grids (2 CTAs per SM) fill 0.97 / 0.85 / 0.97 / 0.73 / 0.48, so it
/// triggers on the first three, where round 56's trigger was within 1 % (12.28 -> 12.18 at
/// 14336x4096). The block kernel's (4) lost
/// (round 56: M = 16 W4A16 8.28 / 17.47 -> 8.54 / 17.97). B12X_GEMM_STREAM_TRIG=<mask> overrides.
constexpr int kStreamTrig = 2;
/// Session 24: the M = 1 kernel's early trigger also where its 2-CTA grid puts one CTA on >= 90 %
/// of the SMs (see stream_trig_m1; B12X_GEMM_STREAM_TRIG=2 turns the M = 1 trigger off).
constexpr bool kStreamTrigOnePerSm = true;
/// Session 22 (round 81, H200, NVFP4 W4A16, us over 4096x4096 / 14336x4096 / 4096x14336 /
/// 6144x4096 / 2048x7168; block grids of 128 / 224 / 224 / 192 / 112 CTAs on 264 slots): the
/// split's reduce kernel triggering the next call's launch right after its wait (Plan::reduce_trig
/// bit 1) and, where the block kernel's grid fills < 80 % of the CTA slots, the block kernel's
/// early trigger (stream_trig bit 4). M = 16 default 7.87 / 16.77 / 16.77 / 11.24 / 8.28; reduce
/// trigger 9.28 / 16.16 / 15.91 / 10.19 / 9.39 (on the two grids below 50 % the next call's CTAs,
/// launched during the reduce, stack two to an SM); both triggers 7.56 / 16.30 / 17.19 / 10.23 /
/// 8.03. The rule: 7.56 / 16.16 / 15.91 / 10.23 / 8.03. M = 8 reduce trigger 7.12 -> 7.57, 14.07
/// -> 13.48, 14.71 -> 14.22, 9.27 -> 8.51, 7.70 -> 8.39. The 4-row kernel (M = 2..4) splits only
/// at 4096x14336: 17.75 / 18.22 -> 17.18 / 17.65 (M = 2 / 4). B12X_GEMM_S16_TRIG=0 turns it off,
/// =1 forces it (W4A4 / W4A8 too). Round 82 (best of two interleaved passes, rule -> off): NVFP4
/// W4A16 M = 16 7.46 / 16.10 / 15.72 / 10.24 / 8.08 -> 8.31 / 16.56 / 16.45 / 10.89 / 8.27, M = 8
/// 6.53 / 13.51 / 14.20 / 8.17 / 7.06 -> 7.10 / 14.07 / 14.68 / 9.23 / 7.61, M = 4 4096x14336 17.56
/// -> 18.08 (elsewhere no split: the same launches); MXFP4 W4A16 M = 16 7.64 / 15.91 / 16.01 /
/// 10.08 / 8.13 -> 7.98 / 16.32 / 16.75 / 10.44 / 8.24, M = 2 6.82 / 14.18 / 14.87 / 8.44 / 7.31
/// -> 7.16 / 14.80 / 15.66 / 9.23 / 7.89 (M = 4 / 8 alike). W4A4: see s16_rule below.
constexpr bool kS16TrigRule = true;
/// Session 28 (reduce_trig bit 2, B12X_GEMM_S16_WARM=0|1; SM90): on the FP4 block kernel's runs
/// through partials + the reduce kernel, one thread per CTA of both reads the parameter lines
/// they use after griddep_wait before it (lin::warm_param_lines). Round 106 (H200, us, default ->
/// warm, M = 2 / 4 / 8 / 16 at 4096x4096 / 4096x14336 / 2048x7168): NVFP4 W4A4 6.62 / 6.60 / 6.55 /
/// 7.75 -> 6.38 / 6.40 / 6.40 / 7.64, 13.97 / 13.88 / 13.83 / 17.17 -> 13.85 / 13.83 / 13.75 /
/// 16.99, 6.73 / 6.74 / 6.83 / 7.78 -> 6.64 / 6.64 / 6.72 / 7.70; NVFP4 W4A16 6.64 / 6.62 / 6.63 /
/// 7.64 -> 6.55 / 6.52 / 6.53 / 7.50 (the others -0.02..-0.14); MXFP4 W4A4 -0.01..-0.15 (4096x4096
/// M = 4 / 8 level, a second pass -0.05 / -0.01). MXFP4 W4A16 level (+0.02..-0.11): not taken. The
/// cluster-sum runs (no reduce) measured -0.10..+0.07: not taken either.
constexpr bool kS16WarmRule = true;
/// Session 23: the W4A16 block kernel's K split summed in a thread-block cluster on SM90 where
/// the split is <= 8 and the grid has more CTAs than SMs (see plan()).
/// Round 87 (two interleaved passes, us at 14336x4096 / 6144x4096, the rule's two shapes of the
/// five; elsewhere it launches what the default did): MXFP4 W4A16 M = 2 14.05 / 8.42 -> 12.76 /
/// 7.63, M = 4 14.10 / 8.34 -> 12.94 / 7.74, M = 8 14.15 / 8.42 -> 13.14 / 8.10, M = 9 15.18 / 9.30
/// -> 14.68 / 9.09, M = 16 15.92 / 10.02 -> 15.10 / 9.31 (second pass alike); NVFP4 W4A16 M = 9
/// 15.13 / 9.22 -> 14.44 / 8.57, M = 16 16.09 / 10.03 -> 14.98 / 9.26, but M = 2 13.23 / 8.13 ->
/// 13.36 / 7.78, M = 8 13.50 / 8.20 -> 13.66 / 8.05 (14336x4096 +1 %, both passes): NVFP4 W4A16
/// takes the cluster from M = 9 (its two-token-tile instance).
constexpr bool kS16ClusterRule = true;
/// Session 24: W4A4 (NVFP4 / MXFP4) at M = 2..16 on SM90 on the staged-once block kernel with its
/// FP4 activations converted in the staging (Plan::stream16_qa; no pre-pass launch, no chunked qx
/// kernel), with the W4A16 formats' trigger rule (kS16TrigRule) and cluster rule (kS16ClusterRule;
/// every M since round 90, see kS16ClusterMinMNvfp4W4A16). Round 89 (H200, best of two interleaved
/// passes, us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, pre-pass default ->
/// this): NVFP4 W4A4 M = 2 8.33 / 14.88 / 15.81 / 10.24 / 8.90 -> 6.42 / 13.16 / 13.80 / 8.09
/// / 6.89, M = 8 8.82 / 15.19 / 15.96 / 10.23 / 8.96 -> 6.47 / 13.55 / 13.77 / 8.28 / 6.96, M =
/// 16 9.68 / 17.73 / 17.91 / 12.06 / 9.54 -> 7.53 / 15.27 / 17.05 / 9.42 / 7.98; MXFP4 W4A4 M =
/// 2 8.08 / 15.49 / 16.37 / 9.85 / 8.53 -> 6.56 / 12.16 / 14.06 / 7.14 / 6.94, M = 16 10.92 / 17.41
/// / 17.91 / 11.32 / 11.46 -> 7.56 / 15.27 / 16.91 / 9.41 / 7.91 (M = 4 alike; the conversion
/// alone, without the rules, 6-12 % of it). B12X_GEMM_S16_QA=0|1 overrides (any device).
constexpr bool kS16QaRule = true;
/// Session 26: the 16-warp block kernel (Plan::stream16_w16) on SM90 where the 8-warp plan's
/// split runs at most one CTA per SM through partials + reduce (MXFP4 W4A4 up to the SM count,
/// NVFP4 W4A16 / W4A4 up to 90 % of it), with the early trigger at <= 90 %. Round 97 (H200, us,
/// M = 2 / 4 / 8 / 16, default -> 16 warps): 2048x7168 (8 x 14 CTAs, with the trigger) NVFP4 W4A16
/// 7.11 / 7.10 / 7.08 / 7.96 -> 6.84 / 6.84 / 6.83 / 7.99, NVFP4 W4A4 6.93 / 6.92 / 6.95 / 7.94 ->
/// 6.67 / 6.70 / 6.77 / 7.85, MXFP4 W4A4 6.94 / 6.94 / 6.97 / 7.95 -> 6.76 / 6.76 / 6.84 / 7.81;
/// 4096x4096 (16 x 8, no trigger) MXFP4 W4A4 6.60 / 6.57 / 6.59 / 7.63 -> 6.53 / 6.51 / 6.33
/// / 7.45. Not taken: grids above the SM count (one CTA per SM halves their split: +0.3..+1.9 us;
/// with the split summed in a cluster +0.1..+1.1), NVFP4 at 4096x4096 (W4A16 M = 2 / 4 +0.2, W4A4 M
/// = 16 +0.2; session 29 takes NVFP4 W4A4 up to the SM count, round 111: -0.09..-0.19 us at
/// 4096x4096), MXFP4 W4A16 (+0.2..+0.3 against its lo split at M <= 8). B12X_GEMM_S16_W16=0|1.
constexpr bool kS16W16Rule = true;
/// The rule's first run M for NVFP4 W4A16 (Plan::stream16_cluster_min_m; below it the partials +
/// reduce); every other format of the rule takes the cluster at every M (NVFP4 W4A4 since round
/// 90: 14336x4096 / 6144x4096 at M = 2 / 4 / 8, from M = 9 -> every M, 12.87 / 13.21 / 13.53 ->
/// 12.65 / 12.94 / 13.23 and 8.13 / 8.21 / 8.28 -> 7.37 / 7.51 / 7.93, both passes alike).
/// B12X_GEMM_S16_CL_MINM=<m> overrides (any cluster plan).
constexpr int kS16ClusterMinMNvfp4W4A16 = 9;
/// Plan::stream_trig bit 8, the decode kernel's (FP8 weights; run takes it at M <= 8), where each
/// warp streams at most this many 256-K slices. Round 64 (H200, us over 4096x4096 / 14336x4096 /
/// 4096x14336 / 6144x4096 / 2048x7168, slices per warp 4 / 16 / 14 / 4 / 7 at M = 1, trigger off ->
/// on): per-tensor M = 1 6.45 / 15.99 / 16.44 / 8.24 / 6.13 -> 5.92 / 17.03 / 18.84 / 7.31 / 5.90,
/// block FP8 M = 1 7.25 / 17.17 / 20.11 / 9.13 / 7.94 -> 7.32 / 17.78 / 22.87 / 8.46 / 7.69, MXFP8
/// M = 1 11.06 / 25.70 / 30.06 / 13.22 / 11.10 -> 10.02 / 30.78 / 31.20 / 11.97 / 11.00; per-tensor
/// M = 2 / 3 (8 / 8 / 28 / 8 / 7 per warp) 7.25 / 16.97 / 18.06 / 10.38 / 6.81 -> 7.14 / 18.79
/// / 18.00 / 9.39 / 6.96, M = 8 at 2048x7168 8.40 -> 7.83.
constexpr int64_t kDecodeTrigMaxSlices = 8;
/// FP8 weights on the decode kernel's 4-warp grid at M >= 2: activations staged by plain loads up
/// to this many M x K values (one batch of 4 16-byte loads per thread of the 128; Plan::
/// decode_sync_stage, see plan()).
constexpr int64_t kDecodeSyncMaxMK = 8192;

/// The M <= 16 block kernel: the fewest 64-K vectors per CTA its K split goes down to (two staged
/// chunks; round 48: one chunk per CTA lost to two at 4096x4096 and 2048x7168).
constexpr int kS16MinVp = 8;
/// Plan::stream16_split_lo's fewest (one chunk of the staged-once kernel).
constexpr int kS16ChunkVLo = 4;
/// Session 24 (Plan::stream16_split_lo, B12X_GEMM_S16_LOSPLIT=0|1): MXFP4 W4A16 on SM90 runs M <= 8
/// on twice the plan's split where its grid fills under half the CTA slots (4096x4096: 8 -> 16,
/// 2048x7168: 14 -> 28 at 4 vectors per CTA), no early trigger. Round 91 (two interleaved passes,
/// us at M = 2 / 4 / 8): 4096x4096 6.88 / 6.86 / 6.78 -> 6.60 / 6.56 / 6.41, 2048x7168 7.23 / 7.21
/// / 7.18 -> 6.94 / 7.05 / 7.07 (-1.5..-5.5 %; round 90 alike). Not taken: NVFP4 W4A16 (4096x4096
/// +1.4..+2.6 %), MXFP4 W4A4 (2048x7168 M = 4 / 8 +0.4 / +0.6 %), NVFP4 W4A4 (+0.6..+1.9 %).
constexpr bool kS16LoSplitRule = true;
/// The M <= 16 block kernel's token range starts here (below: the M = 1 and 4-row stream kernels).
constexpr int64_t kS16MinM = 5;
/// The NVFP4 / MXFP4 block kernel's first run M (Plan::stream16_min_m): kS16MinM, 2 for W4A4 and
/// MXFP4 W4A16 (session 21), or B12X_GEMM_STREAM16_MINM=<2..5>.
int64_t s16_min_m(const Plan& p) {
  return p.stream16_depth == 0 && p.stream16_min_m > 0 ? p.stream16_min_m : kS16MinM;
}
/// The FP8 block kernel's first M, where the decode kernel ran before (kS16MinM): MXFP8 from 2,
/// block FP8 from 3, per-tensor from 4 (at one tile per warp on a small grid from 9). Rounds 56 /
/// 57 (H200, us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, decode kernel
/// -> block kernel, B12X_GEMM_STREAM16_F8_MINM): MXFP8 M = 2 13.01 / 26.04 / 42.69 / 16.89 /
/// 14.52 -> 10.94 / 25.70 / 26.12 / 14.94 / 10.84, M = 3 14.15 / 27.57 / 39.71 / 17.25 / 15.65 ->
/// 10.94 / 25.74 / 26.16 / 15.02 / 10.86, M = 4 14.29 / 30.41 / 39.13 / 17.52 / 14.98 -> 10.93 /
/// 25.97 / 26.23 / 15.00 / 10.87; block FP8 M = 3 9.13 / 19.32 / 23.75 / 11.47 / 9.73 -> 8.67 /
/// 19.69 / 20.90 / 11.40 / 9.20, M = 4 9.40 / 20.15 / 23.81 / 11.71 / 9.83 -> 8.65 / 20.06 /
/// 20.58 / 11.56 / 9.12 (M = 2 8.47 / 18.34 / 23.48 / 10.76 / 8.96 -> 8.64 / 19.58 / 20.63 /
/// 11.35 / 9.09: 3 of 5 slower); per-tensor M = 4 8.01 / 18.53 / 18.88 / 11.20 / 7.55 -> 7.97 /
/// 17.87 / 18.64 / 10.18 / 8.40 (the first and last at one tile per warp on a small grid: kept;
/// M = 2 / 3 17.17 / 18.28 / 10.56, 17.40 / 18.42 / 10.47 -> 17.88 / 18.08 / 10.02, 18.02 /
/// 18.21 / 10.08 at the other three: mixed).
/// Session 17: MXFP8 from M = 1 (round 64, us, M = 1, decode kernel -> block kernel: 4096x4096
/// 11.06 -> 9.37, 14336x4096 25.70 -> 21.97; the block kernel's M = 2 at 4096x14336 / 6144x4096 /
/// 2048x7168 22.91 / 13.13 / 9.57 against the decode kernel's M = 1 30.06 / 13.22 / 11.10).
/// Session 28: MXFP8's M = 1 on the decode kernel (kDiag + kSRing) where a CTA quantizes at most
/// this many 256-K slices of its row (Plan::decode_mx_diag).
constexpr int64_t kMxDiagMaxSlices = 16;
constexpr int f8_block_min_m(WFmt wf) {
  return wf == WFmt::kFp8Mx ? 1 : wf == WFmt::kFp8Block ? 3 : 4;
}
/// The FP8 block kernel: the fewest 32-K atoms per CTA its K split goes down to (two 256-K
/// chunks, as kS16MinVp).
constexpr int kS16F8MinVp = 16;
/// W4A4 NVFP4 on the block kernel: activations converted in the kernel (no pre-pass) up to this
/// many FP4 weight bytes (round 49: faster at 4096x4096 / 2048x7168, 8.4 / 7.3 MB; slower from
/// 6144x4096, 12.6 MB, at M = 8).
constexpr int64_t kS16QxMaxBytes = int64_t{10} << 20;

/// Mid M (the tiled regime up to a few hundred tokens), measured on the H200 (round 25, M = 64,
/// us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168): the mma.sync tiled
/// kernel split over K into fp32 partials (one wave of CTAs) with 64-token CTAs against session
/// 6's 128-token CTAs with a cluster split of at most 2: NVFP4 W4A16 63.8 / 64.6 / 192.6 / 63.7 /
/// 100.9 -> 21.4 / 51.0 / 45.8 / 28.4 / 20.2, FP8 per-tensor 40.3 / 70.3 / 120.9 / 40.3 / 64.0
/// -> 17.4 / 43.8 / 36.6 / 23.1 / 16.0, Q8_0 50.1 / 91.0 / 157.3 / 50.8 / 82.3 -> 22.3 / 63.4 /
/// 54.3 / 30.6 / 19.5. 64-token CTAs up to kTiledTok64MaxM tokens; for the FP4 fold formats up
/// to kTiledTok64MaxMFp4 (round 26, M = 128, 128 -> 64 tokens: NVFP4 W4A16 29.4 / 38.7 / 27.3 ->
/// 27.1 / 38.3 / 24.6 us at 4096x4096 / 6144x4096 / 2048x7168; Q8_0 32.4 / 55.9 / 28.9 -> 36.1
/// / 63.2 / 30.1).
constexpr int64_t kTiledTok64MaxM = 64;
constexpr int64_t kTiledTok64MaxMFp4 = 128;
/// BF16-operand formats (NVFP4, MXFP4 with BF16 MMAs, MXFP8) up to kMidMMaxM tokens take the
/// split mma.sync kernel instead of wgmma where wgmma's 128 x 128 tiles give fewer than
/// kMidMWgmmaFill / 10 x SMs CTAs (round 25, M = 256, wgmma -> split mma.sync, us: NVFP4 W4A16
/// 4096x4096 47.2 -> 43.3, 4096x14336 159.7 -> 109.3, 2048x7168 77.9 -> 37.6, MXFP8 4096x14336
/// 179.0 -> 145.4, 2048x7168 91.5 -> 50.2; 6144x4096 (96 CTAs) and 14336x4096 stay on wgmma).
constexpr int64_t kMidMMaxM = 512;
constexpr int64_t kMidMWgmmaFill = 6;

/// wgmma tiled kernel (SM90), measured on the H200 (rounds 8/9, 4096x4096 and 14336x4096): with
/// 128-token CTAs it is 1.3-2.6x the mma.sync tiled kernel at M >= 256 for every format, and
/// ahead from M = 64 (MXFP8 at N = 4096: from M = 128) with the one-group-in-flight schedule
/// since removed, which the drained one trails by 2-20%: hence M >= 128.
constexpr int64_t kWgmmaMinM = 128;
/// FP8 on the wgmma kernel: the schedule (lin::WgmmaCfg). 3 = promotion per 128 K (one block-FP8
/// scale group per promotion, as DeepGEMM / cuBLASLt) on the mbarrier pipeline: per-tensor FP8
/// 712 / 748 -> 725 / 766 TFLOP/s at M = 2048 (4096x4096 / 2048x7168, round 12); the 128-K
/// promotion itself is 15% (per-tensor) to 45% (block) faster than per 32 K (round 9). The FP8
/// wgmma accumulator keeps 13 fraction bits, so the GPU test checks this path against a derived
/// accumulation-error bound (fp8_wgmma_bound in tests/gpu/test_gemm.cu) rather than the generic
/// tolerance, which per 128 K missed by up to 2.2x on ~5 elements in 10^5 (round 8).
/// 5 = the same promotion, warp-specialized (a copy warpgroup feeds the ring, the two MMA
/// warpgroups only wait, issue, promote and release): round 16 (M = 2048, five shapes) per-tensor
/// 747-827 -> 847-1000 TFLOP/s (0.53-0.62x cuBLASLt FP8), block 450-516 -> 558-666. 6 = 5 with
/// the block scales loaded while the wgmmas run and the slot released before the promotion:
/// round 17 block FP8 +0-3% over 5 (559-672 TFLOP/s), per-tensor equal; its tests, memcheck and
/// racecheck passed there. B12X_GEMM_WGMMA_VAR=5, 7 (6 + next A fragments prefetched), 3 (mbarrier
/// ring shared by the MMA warps), 0 (CTA-barrier pipeline) and 1 / 2 (per 64 / 32 K) remain as
/// probes. 16 (session 9) = 6 with the weight runs bulk-copied by one producer thread (the
/// activations, caller-quantized, still cp.async): round 34 (M = 2048, us over 4096x4096 /
/// 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, same run) 77.3 / 264.6 / 247.2 / 114.8 /
/// 63.8 -> 74.4 / 259.3 / 236.1 / 110.9 / 60.2 (0.59-0.65x cuBLASLt FP8); its tests (the
/// warp-specialized schedules of TiledWgmmaTokenTiles), memcheck and racecheck passed there.
/// B12X_GEMM_WGMMA_VAR=6 restores 6. (18 / 20, session 10 probes = 16 with a persistent CTA loop,
/// 21-48% slower in round 38, cause not found: removed in session 11, docs/gemm.md.)
constexpr int kWgmmaF8Var = 16;
/// Block FP8: 8 = 6 with the stage's combined scales x_scale * w_scale built once per CTA by the
/// copy warpgroup instead of by each MMA warp (round 21 Nsight Compute, 4096x4096: L1/TEX
/// throughput 77% for block FP8 variant 6 against 47% for per-tensor FP8, the per-warp table
/// stores 3.8-way bank conflicted). Round 22 (50b8333, M = 2048, five shapes, both with the new
/// activation quantizer): 610 / 668 / 735 / 637 / 639 -> 662 / 733 / 807 / 695 / 683 TFLOP/s
/// (0.44-0.49x cuBLASLt FP8), M = 256 +7-12%; its tests, memcheck and racecheck passed there.
/// B12X_GEMM_WGMMA_VAR=6 restores 6.
/// Session 7 probes with the tokens on the wgmma M side (2 combined scales per thread and stage
/// instead of 32 shared-memory loads; the producer re-lays the weights through registers), all
/// correct and slower than 8 (M = 2048, 4096x4096 / 2048x7168, us against 8 in the same run):
/// 9 (non-swizzled weights, activations by descriptor) 125.4 / 114.0 vs 101.3 / 85.6 (round 25),
/// 10 (activations by ldmatrix) 129.0 / 118.8 vs 101.7 / 85.9 (round 26), 11 (weights swizzled)
/// 129.7 / 120.2 and 12 (11 loaded three steps ahead) 127.0 / 118.2 vs 101.3 / 86.3 (round 27).
/// 14 (session 9) = 8 with the ring filled by bulk copies from the quantizer's stage images (plan
/// keeps 8 with caller-quantized activations or K % 256 != 0, run where the vector quantizer
/// cannot run): round 33 (M = 2048, us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 /
/// 2048x7168, quantizer included) 100.6 / 323.1 / 295.6 / 147.6 / 86.0 -> 94.5 / 304.3 / 271.7 /
/// 136.4 / 79.2 (0.49-0.54x cuBLASLt FP8); its tests, memcheck and racecheck passed there.
/// B12X_GEMM_WGMMA_VAR=8 restores 8. (Variant 15, weights as images too and tokens on the M
/// side: 80.3 / 253.6 / 246.2 / 116.3 / 70.2, 0.56-0.61x, needed a second copy of the weights
/// built by bind; removed in session 10, docs/gemm.md. 17 / 19, 14 with the persistent CTA loop:
/// removed in session 11, as 18 / 20 above.)
/// 33 (session 18) = 14 without the MMA warps' fence.proxy.async per stage (the bulk-fed slots
/// need none) and with four stages instead of six (more L1 for the producer's scale loads): round
/// 70 (M = 2048, us over the five shapes, same run; cuBLASLt FP8 47.66 / 151.60 / 146.26 / 69.71 /
/// 38.94) 14 94.5 / 305.3 / 271.3 / 136.7 / 79.2, 14 without the fence (28) 92.7 / 299.8 / 265.4 /
/// 135.5 / 77.1, 33 90.0 / 290.5 / 263.9 / 130.8 / 76.4 (second run 89.9 / 290.1 / 264.0 / 131.6
/// / 75.8: 0.53 / 0.52 / 0.55 / 0.53 / 0.51x); M = 256 24.4 / 47.5 / 66.5 / 25.1 / 36.0 (14) ->
/// 23.3 / 45.7 / 64.7 / 24.1 / 34.5; memcheck / racecheck of GemmGpuSanitize.Fp8BlockBulk clean
/// in rounds 69 / 70. B12X_GEMM_WGMMA_VAR=14 restores 14. (Session 18's persistent probes 26 / 27 /
/// 30 ran 1.45-1.7x slower, as session 10's; the stmatrix epilogue (31 / 34) within 1%: removed,
/// docs/gemm.md.)
constexpr int kWgmmaF8BlockVar = 33;
/// Block FP8 variants reading the tiled FP8 1x128 quantizer's stage images (14, 33).
bool wgmma_act_images(int var) {
  return var == 14 || var == 33;
}
/// The wgmma kernel's variant at 128 tokens by default (the instance whose existence makes a
/// format wgmma's): FP8 kWgmmaF8Var / kWgmmaF8BlockVar, the BF16-operand formats 0.
int wgmma_default_var(WFmt wf) {
  return wf == WFmt::kFp8Block ? kWgmmaF8BlockVar : wf == WFmt::kFp8 ? kWgmmaF8Var : 0;
}
/// The GGML formats, which the group wgmma kernel runs (defaults: kWgmmaGroupVar*).
bool wgmma_group_format(WFmt wf) {
  return wf == WFmt::kQ8_0 || wf == WFmt::kIq2Xxs || wf == WFmt::kIq2Xs;
}
/// wgmma kernel CTA order (Plan::tiled_wgmma_raster): FP8 in raster bands sized to L2 (1): round
/// 17 (warp-specialized FP8, M = 2048) per-tensor 14336x4096 829 -> 921 TFLOP/s (its 58 MB of
/// weights exceed L2: each band reads them about once instead of once per token tile), other
/// shapes +1-3%, block FP8 0-3%; tests (bands of 1 and 5 token tiles, every format) passed in
/// rounds 16 / 17. The BF16-operand formats keep the 2-D grid (0; not measured banded).
constexpr int kWgmmaRasterF8 = 1;
constexpr int kWgmmaRaster = 0;
/// The GGML group kernel: the 2-D grid (0); B12X_GEMM_WGMMA_RASTER=1|n probes raster bands
/// (where the weights exceed L2: Q8_0 14336x4096 / 4096x14336, 62 MB).
constexpr int kWgmmaRasterGroup = 0;
/// BF16-operand formats at 256 tokens: 3 = warp-specialized (a copy warpgroup, MMA warpgroups at
/// 208 registers): round 17 (M = 2048, five shapes) against variant 1 +8-24% (MXFP8 466-584
/// TFLOP/s, 0.54-0.66x cuBLAS BF16; MXFP4 W4A8 488-615, 0.56-0.70x; NVFP4 543-617; NVFP4 W4A16
/// 612-696; MXFP4 566-659; MXFP4 W4A16 644-738); its tests passed in rounds 16 / 17, memcheck /
/// racecheck clean in round 17.
constexpr int kWgmmaBf256Var = 3;

/// GGML formats on the SM90 group wgmma kernel: the schedule variant (lin::WgmmaGroupCfg) per
/// token width (128 / 256). 1 = two partial sets, each promotion issued after the next partial's
/// wgmmas (m64n64 units at 256 tokens): round 12 (128 tokens) +3-10% and round 13 (256 tokens)
/// +8-13% over 0 (each partial drained before its promotion); 256-row CTAs (2) and an mbarrier
/// pipeline (removed) measured slower.
/// Since session 13 (round 49, us default 1 -> 21 = 13's warp-specialized chained-pair schedule
/// in two m64n64 units): Q8_0 M = 512 4096x4096 / 4096x14336 49.8 / 168.6 -> 43.8 / 145.9, M = 768
/// 98.3 / 335.3 -> 86.6 / 282.5, M = 256 14336x4096 / 6144x4096 101.2 / 49.5 -> 86.1 / 43.3
/// (+13-19%); IQ2_XXS 73.4 / 249.4, 150.2 / 509.2, 145.4 / 73.2 -> 62.1 / 205.1, 122.5 / 408.8,
/// 122.5 / 61.6 (+18-25%).
constexpr int kWgmmaGroupVar128 = 21;
/// IQ2_XXS at 128 tokens: 21 (its folded 22 behind the FP16 pre-pass: 69.8 / 231.1, 121.5 /
/// 401.6, 118.9 / 61.9, -12-+3% against 21); IQ2_XS: 22 (BF16 behind the pre-pass) 83.9 / 279.6,
/// 168.5 / 562.7, 165.5 / 83.0 -> 75.6 / 221.0, 128.2 / 409.9, 127.6 / 67.2 (+11-37%; 21: 74.5 /
/// 240.7, 146.2 / 475.2, 146.3 / 73.6).
/// Session 18 (round 69, 128 tokens, us; IQ2_XXS / IQ2_XS default -> 53 = the rescaled
/// accumulators of kWgmmaGroupVarIq2 below at 128 tokens, BF16 behind the FP16 pre-pass): M = 512
/// 4096x4096 62.53 -> 44.11 / 63.11 -> 48.37, 4096x14336 205.48 -> 137.98 / 200.31 -> 144.91; M =
/// 256 14336x4096 122.89 -> 83.99 / 121.77 -> 92.46, 6144x4096 62.30 -> 43.46 / 61.70 -> 46.95 (22
/// removed).
constexpr int kWgmmaGroupVar128Iq2 = 53;  // both IQ2 formats, BF16 and FP16
/// 256 tokens: 13 = warp-specialized (a producer warpgroup issues every copy into an mbarrier
/// ring, the two MMA warpgroups run desynchronized without a CTA barrier) with the unit chain
/// running on across pairs of stages (one drain per two 64-K stages). Session 12 round 46 (H200,
/// M = 2048, us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, 3 -> 13, bit-
/// identical outputs): Q8_0 159.5 / 556.1 / 535.7 / 238.8 / 133.9 -> 130.5 / 473.5 / 442.9 /
/// 196.4 / 110.2 (+17-22%), IQ2_XXS 201.5 / 707.0 / 705.6 / 301.0 / 174.5 -> 175.6 / 611.7 /
/// 611.4 / 262.0 / 148.9 (+15-17%), IQ2_XS 236.4 / 820.3 / 829.4 / 351.5 / 202.0 -> 223.6 / 771.8
/// / 784.2 / 333.2 / 189.9 (+5-6%); GemmGpu.TiledWgmmaGgmlFormats passed with it there. (3 = 1
/// with the stage's refill copies issued after the second unit's wgmmas, round 17: Q8_0 422-439
/// -> 432-450 TFLOP/s, IQ2_XXS 324-352 -> 344-355, IQ2_XS 264-279 -> 294-306 over 1.)
constexpr int kWgmmaGroupVar256 = 13;
/// Per format at 256 tokens since session 13 (round 48, M = 2048, us over the five shapes above,
/// 13 -> the new default, outputs bit-identical): Q8_0 16 (13 with the chain across four stages,
/// one drain per 256 K, each slot released one stage late) 131.1 / 459.4 / 435.0 / 196.9 / 110.5
/// -> 127.4 / 452.1 / 424.8 / 192.0 / 110.1 (+0.4-2.9%); IQ2_XXS 17 (16 with computed sign masks)
/// 176.3 / 619.7 / 618.4 / 264.5 / 151.2 -> 167.0 / 586.6 / 585.3 / 249.5 / 145.7 (+3.8-5.6%;
/// 16 alone +0-5%, 13 with the computed signs -3-+1%); IQ2_XS on FP16 activations 20 (13 with
/// the sub-scales folded into the FP16 weights, one promotion per 64 K instead of per 16 K)
/// 223.8 / 774.2 / 786.5 / 332.4 / 192.3 -> 179.7 / 619.8 / 654.7 / 267.7 / 152.1 (+20-26%;
/// folded per 32 K, 19: +16-22%; 16 / 17 / 18 on IQ2_XS: -2% / -57% / -52%, the computed signs
/// spill). IQ2_XXS folded (20): -5-+2%. Round 49: IQ2_XS 23 (20 with the computed signs), on
/// FP16 176.2 / 609.2 / 620.7 / 265.3 / 149.1 (20) -> 171.4 / 590.3 / 612.4 / 258.7 / 145.6, and
/// on BF16 behind the FP16 pre-pass (kWgmmaGroupF16x) 223.4 / 780.2 / 793.0 / 335.7 / 192.4 (13)
/// -> 194.1 / 622.6 / 664.8 / 282.9 / 181.5 (+6-25%; 20 behind it 200.4 / 635.6 / 679.5 / 290.2 /
/// 181.5; 20 removed); IQ2_XXS there: 23 on FP16 -2-+3% against 17, behind the pre-pass
/// -2-25%: 17 stays.
/// Session 16 (round 59, M = 2048, us over the five shapes, bit-identical outputs): the IQ2 sign
/// masks from one IMAD + LOP3 (decode_iq2_atom) and 23's (2s + 1) splats by IMAD + HFMA2 cut the
/// MMA warps' loop by 17 % (IQ2_XXS 17) / 21 % (IQ2_XS 23) of its instructions: IQ2_XXS BF16 17
/// 167.4 / 570.9 / 577.9 / 250.0 / 143.4 -> 149.2 / 512.4 / 537.1 / 224.3 / 126.9 (0.49-0.55x
/// cuBLAS BF16), IQ2_XS BF16 23 behind the pre-pass 186.5 / 615.6 / 643.7 / 272.1 / 162.9 ->
/// 163.2 / 539.3 / 579.9 / 237.7 / 143.5 (0.45-0.51x); on FP16 activations IQ2_XXS 23 (142.9 /
/// 499.2 / 546.8 / 213.1 / 127.4) now beats 17 (149.6 / 537.6 / 554.7 / 224.2 / 126.7): 23 there
/// (BF16 keeps 17: 23 behind the pre-pass 157.2 / 511.2 / 573.5 / 228.8 / 144.6). Round 61: 23
/// with unit 0 of each stage split around atom 1's decode (kGroupSplit, probe 46; fewer spills)
/// IQ2_XS BF16 157.98 / 523.73 / 578.55 / 233.25 / 140.54 -> 152.05 / 505.76 / 542.67 / 224.59 /
/// 136.78, FP16 145.80 / 504.97 / 548.39 / 219.70 / 124.63 -> 139.67 / 484.28 / 511.65 / 210.55
/// / 120.46, IQ2_XXS FP16 139.72 / 494.02 / 538.86 / 211.89 / 125.51 -> 135.99 / 476.74 /
/// 510.60 / 205.35 / 118.25: 23's schedule since (IQ2_XXS BF16 behind the pre-pass 147.89 /
/// 494.66 / 542.87 / 217.79 / 133.25 against 17's 148.66 / 519.29 / 534.84 / 223.74 / 126.73 in
/// round 61's bench_gemm: 17 stays).
/// Session 18 (round 68, M = 2048, us over the five shapes, x round 67's bench_gemm cuBLAS BF16):
/// 50 (since round 69 52, below; the folded weights accumulated straight into the accumulators,
/// kept in units of the row's super-block d and rescaled at each 256-K super-block: no partials, no
/// promotions; lin::kGroupRescale) on BF16 behind the FP16 pre-pass and on FP16. IQ2_XS BF16 23
/// 156.33 / 507.66 / 545.63 / 228.52 / 135.72 -> 134.37 / 430.93 / 444.47 / 192.58 / 114.77
/// (0.587-0.628x), IQ2_XXS BF16 17 150.44 / 513.35 / 537.37 / 224.29 / 127.52 -> 124.64 / 400.79 /
/// 416.05 / 178.79 / 107.07 (0.628-0.676x; 23 behind the pre-pass 149.33 / 486.26 / 539.40 / 216.78
/// / 133.73); on FP16 IQ2_XS 23 -> 50 143.81 / 482.98 / 522.62 / 211.67 / 120.28 -> 121.59 / 407.56
/// / 420.45 / 177.63 / 97.27, IQ2_XXS 138.18 / 467.32 / 525.09 / 203.76 / 117.67 -> 112.36 / 381.35
/// / 397.14 / 165.26 / 90.79. Round 69: 52 = 50 with the next super-block's first stage decoded
/// before the drain (bit-identical), BF16 IQ2_XS 132.35 / 433.85 / 446.75 / 192.68 / 115.38 ->
/// 127.55 / 420.15 / 424.75 / 185.44 / 110.99, IQ2_XXS 125.05 / 409.37 / 427.02 / 179.56 / 107.37
/// -> 123.43 / 404.50 / 410.53 / 177.58 / 107.01; 50, 17 and 23 removed.
constexpr int kWgmmaGroupVarQ8 = 16, kWgmmaGroupVarIq2 = 52;  // IQ2: both formats, BF16 and FP16
constexpr bool kWgmmaGroupF16x = true;
/// The FP16 pre-pass (lin::launch_ggml_act_f16) triggers the group kernel at its CTAs' start, not
/// their end: the group kernel launches once the pre-pass's last CTAs run, its prologue under
/// their work (griddepcontrol.wait still waits for the whole pre-pass). Round 60 (H200, IQ2_XS
/// 23 on BF16, M = 2048, us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168):
/// 159.52 / 525.39 / 587.01 / 232.44 / 142.63 -> 158.95 / 526.07 / 583.37 / 230.92 / 139.78.
constexpr bool kGgmlActF16Early = true;

/// Decode regime at capacity M = 1: warps per 16-row weight tile (lin::launch_linear_decode), the
/// CTA's K range split among them. Round 16 (H200, M = 1, five
/// shapes; 1 -> 4 warps): Q8_0 10.7 / 21.9 / 31.6 / 13.7 / 11.3 -> 7.6 / 18.9 / 22.9 / 10.0 / 9.4
/// us, NVFP4 W4A16 10.1 / 19.8 / 28.7 / 12.5 / 11.1 -> 6.5 / 16.1 / 15.9 / 8.4 / 6.1 us,
/// IQ2_XS 12.8 / 33.0 / 50.1 / 21.3 / 17.1 -> 10.3 / 29.2 / 32.7 / 14.1 / 13.1 us (2 warps:
/// between); round 17 (default): the same within noise. kDecodeWsMaxSlices: K slices per warp above
/// which a decoded format's K range is also split over a cluster.
constexpr int kDecodeWarpSplit = 4;
constexpr int kDecodeWsMaxSlices = 8;
/// Decode regime at M = 2..4 with the pipelined staging (Plan::decode_pipe): warps per tile (K
/// parts interleaved over the staged chunks) where the one-warp tiles alone give < 0.9 x SMs CTAs
/// and K has at least kDecodePipeWsMinSlices slices: 4 from 16 slices, else 2; FP4 and Q8_0
/// weights (the measured ones). B12X_GEMM_DECODE_PIPE_WS=1|2|4 overrides at M = 2..8. Round 22
/// (H200, us, default -> 2 / 4 warps): M = 2 NVFP4 W4A16 4096x14336 21.4 -> 23.0 / 18.3,
/// 2048x7168 10.5 -> 8.8 / 9.4, Q8_0 4096x4096 11.2 -> 10.4 / 9.5, 4096x14336 31.6 -> 27.4 / 22.2,
/// 2048x7168 11.7 -> 10.4 / 9.6; M = 4 Q8_0 4096x14336 28.4 -> 25.2 (4), NVFP4 W4A16 2048x7168 10.7
/// -> 9.2 (2); not taken: 4096x4096 FP4 (8 slices: 8.4 -> 9.3 / 9.0), 14336x4096 (224 CTAs: 18.4
/// -> 20.7 / 22.1), M = 8 (Q8_0 4096x4096 10.6 -> 12.6 / 14.2).
constexpr int64_t kDecodePipeWsMinSlices = 14;

/// GGML formats (IQ2_XXS, IQ2_XS, Q8_0) up to this many tokens: the GEMV kernel
/// (lin::launch_ggml_gemv) where Plan::ggml_gemv says so.
constexpr int64_t kGgmlGemvMaxM = 16;
/// The GEMV's IQ2 one-tile kernels with registers for 3 CTAs per SM (3) or uncapped (0): round 30,
/// M = 1, us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096, uncapped -> 3: IQ2_XXS 7.84 /
/// 23.07 / 17.95 / 12.98 -> 7.81 / 19.14 / 17.88 / 9.69 (IQ2_XS within 2 %).
constexpr int kGgmlGemvOcc = 3;
/// Where the GEMV runs by default (B12X_GGML_GEMV=0|1 overrides). Round 30 (H200, 3be2162-era
/// kernel with 3 CTAs per SM, us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 /
/// 2048x7168, the decode kernel -> the GEMV; decode at M = 4 / 16 from round 29): IQ2_XXS M = 1
/// 10.54 / 29.24 / 29.28 / 14.32 / 10.56 -> 7.81 / 19.14 / 17.88 / 9.69 / 9.56, M = 4 13.36 / 34.28
/// / 36.72 / 23.14 / 18.44 -> 8.59 / 19.84 / 20.09 / 9.78 / 9.78, M = 16 18.91 / 44.83 / 63.79 /
/// 29.15 / 25.29 -> 9.16 / 30.61 / 21.19 / 16.50 / 12.08; IQ2_XS M = 1 10.53 / 29.77 / 30.28 /
/// 14.42 / 13.16 -> 9.20 / 25.65 / 19.72 / 14.60 / 10.89, M = 4 14.05 / 36.84 / 48.15 / 22.63 /
/// 17.93 -> 9.49 / 27.12 / 20.39 / 15.15 / 11.12, M = 16 19.14 / 45.71 / 77.33 / 30.00 / 26.36 ->
/// 11.97 / 38.68 / 28.66 / 20.43 / 14.69. Q8_0 only where the 16-row tiles are at most 2 x SMs
/// (the GEMV's K-split tile walk loses on many tiles of short K): M = 1 7.84 / 20.37 / 9.39 ->
/// 7.58 / 18.11 / 9.18 at 4096x4096 / 4096x14336 / 2048x7168, M = 4 10.38 / 26.48 / 10.72 -> 8.30
/// / 19.59 / 10.13, M = 16 15.22 / 47.58 / 18.17 -> 14.06 / 41.33 / 16.95; not at 14336x4096 /
/// 6144x4096 (M = 1 19.06 / 9.88 -> 24.20 / 12.95).
/// The decode kernel's knobs do not change this route: B12X_GGML_GEMV=0 selects that kernel.
bool ggml_gemv_default(lin::WFmt wf, int64_t n16, int64_t sms) {
  return wf != lin::WFmt::kQ8_0 || n16 <= 2 * sms;
}

/// Warps per CTA of the GGML GEMV by default (B12X_GGML_GEMV_WARPS=8|16|24 overrides), at M <= 8
/// (one CTA per SM for 16 / 24): 24 for IQ2 with long K (>= 24 blocks of 256) on at most 2 x SMs
/// 16-row tiles, where the 8-warp grid leaves 16 warps per SM each walking many batches (the IQ2
/// tables filled once per SM). Round 37 (H200, us, 8 -> 24 warps): 4096x14336 IQ2_XXS M = 1 / 4
/// 15.96 / 17.40 -> 15.72 / 15.92, IQ2_XS 18.02 / 18.80 -> 17.28 / 17.87; not at K = 4096
/// (4096x4096 IQ2_XXS M = 1 6.93 -> 7.47, 14336x4096 17.49 -> 21.24). Q8_0: 16 (its kernel's 95
/// registers, uncapped) where the tiles fit one per SM, which the 8-warp grid runs with 8 warps
/// per SM (2048x7168: each warp 7 batches; 24 warps at 80 registers lost on every Q8_0 shape,
/// 4096x4096 7.50 -> 8.24). Round 38 (8 warps -> this rule, M = 1 / 4, us): 2048x7168 IQ2_XXS
/// 8.74 / 8.94 -> 7.39 / 7.52, IQ2_XS 9.36 / 9.56 -> 7.72 / 8.08, Q8_0 8.40 / 8.99 -> 7.37 / 8.09;
/// 4096x14336 IQ2_XXS 15.98 / 17.64 -> 15.70 / 15.93.
int ggml_gemv_warps_default(lin::WFmt wf, int64_t n16, int64_t K, int64_t M, int64_t sms) {
  if (M > 8) return 8;
  if (wf == lin::WFmt::kQ8_0) return n16 <= sms ? 16 : 8;
  return K >= 24 * 256 && n16 <= 2 * sms ? 24 : 8;
}

/// The GGML GEMV's kernel variant by default (B12X_GGML_GEMV_VAR overrides; kVar flags of
/// kernels/linear_gemv_ggml.cuh: 32 weight words two batches ahead, 64 weight words not allocated
/// in L1), for the kernel that runs (warps, occ 3: capped at 80 registers). BF16 activations only
/// (FP16 unmeasured). Round 53 (H200, M = 1, CUDA graphs, weights rotated past 3 x L2, us over
/// 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, default -> variant):
/// - the uncapped 8-warp kernels (two CTAs per SM), 96 at M <= 4: IQ2_XXS 5.88 / 15.04 -> 5.48 /
///   14.97, IQ2_XS 6.79 / 19.33 -> 6.05 / 16.55 (M = 4 at 4096x4096: 5.98 / 7.06 -> 5.71 / 6.38);
///   the 4096x14336 8-warp kernels that replace 24 warps at M = 1 (plan) 13.32 / 14.79;
/// - the 24-warp kernels, 64 at M = 1: 4096x14336 / 2048x7168 IQ2_XXS 14.12 / 6.39 -> 13.84 / 6.29,
///   IQ2_XS 15.12 / 6.86 -> 14.81 / 6.73;
/// - the capped kernels (6144x4096, 384 CTAs) keep 0: 96 spills there (IQ2_XXS 7.69 -> 8.59), 64
///   IQ2_XS 8.54 -> 8.67.
/// Dropped in round 53 (removed): 16 (no FFMAs for the odd MMA columns at M = 1: IQ2_XS
/// 14336x4096 19.33 -> 17.25 but IQ2_XXS 15.04 -> 15.94), 128 (an L2 bulk prefetch 4 batches
/// ahead by lane 0 of each warp: +0.1-1.7 us), 256 (the weight words through a per-warp
/// shared-memory ring, 80 registers and 3 CTAs per SM: IQ2_XXS 7.60 / 19.81 / 14.85 / 8.73 / 6.95).
/// Session 17: at M = 1 the atom columns (kVar 512: the MMA's 8 columns carry the batch's 8
/// atoms, the sub-scales multiply 4 accumulators per batch; + 64; IQ2_XXS + 1024, the table
/// addresses by PRMT) on the 8- / 16-warp kernels with registers capped at 128, where a CTA holds
/// one tile (kw = warps) and K >= 6144. Rounds 64 / 65 (us, default -> atom columns, same grid):
/// IQ2_XXS 4096x14336 13.12 / 13.20 -> 12.28 / 12.31, 2048x7168 (16 warps, 16 per tile) 5.52 /
/// 5.51 -> 5.34 (round 65; the 24-warp default 6.20); IQ2_XS 4096x14336 14.67 / 14.71 -> 14.51 /
/// 14.53, 2048x7168 6.29 -> 6.13 (24 warps 6.59). Not at K = 4096: 4096x4096 IQ2_XXS 5.46 / 5.40
/// -> 5.35 / 5.40, IQ2_XS 5.99 / 6.03 -> 6.07 / 6.09. 14336x4096 (the default's 224 CTAs of 4
/// tiles, kw 2, no split) is unmeasured: with _OCC=0 the probes ran the model's grid for two CTAs
/// per SM, 132 x 2 CTAs with a K split of 2 and the reduce kernel (kw 8: IQ2_XXS 14.78 -> 18.95;
/// _KW=2, 132 CTAs walking 224 groups per split: 14.85 -> 17.13; round 66's Nsight Compute: 264
/// CTAs). Lost (removed): the selector math on the FMA
/// pipe (round 65, IQ2_XXS 4096x14336 12.31 -> 13.32: IMAD / IMAD.HI for LOP3 / SHF), the
/// 16-warp CTAs at K = 4096 (4096x4096 IQ2_XXS 6.50, 6144x4096 8.76 against 5.40 / 7.56).
constexpr int kGgmlAcXxs = 1600, kGgmlAcXs = 576;
int ggml_gemv_var_default(lin::WFmt wf, bool fp16, int64_t M, int warps, int occ, int kw = 0,
                          int64_t K = 0) {
  if (wf == lin::WFmt::kQ8_0 || fp16 || M > 4) return 0;
  if (M == 1 && occ == 0 && (warps == 8 || warps == 16) && kw == warps && K >= 24 * 256)
    return wf == lin::WFmt::kIq2Xxs ? kGgmlAcXxs : kGgmlAcXs;
  // (64, the weight words not allocated in L1, the 24-warp kernels' variant at M = 1, is reached
  // only with B12X_GGML_GEMV_WARPS=24 at M = 1 with BF16 activations: removed in session 21.)
  return warps == 8 && occ == 0 ? 96 : 0;
}

/// Session 19: the balanced split (kernels/linear_gemv_ggml.cuh, kVar & 4096: one wave of
/// CTAs, each a contiguous share of the 16-row tiles, its (tile, batch) units one contiguous range
/// per warp; BF16 activations) on 16-warp CTAs (one per SM, the IQ2 tables filled once per SM):
/// - IQ2 on more than 2 x SMs tiles where the default grid's busiest SM holds more tiles than
///   ceil(n16 / SMs) (14336x4096:
///   224 CTAs of 4 tiles on 132 SMs, 8 tiles on 92 of them, against 7 / 6): IQ2_XXS at M = 1 with
///   the atom columns (5696), IQ2_XS at M <= 4 without (4160); IQ2_XS also where the default runs
///   the capped kernels (3 CTAs of 80 registers per SM, 6144x4096);
/// - Q8_0 at M = 1 where the 16-row tiles exceed 2 x SMs (instead of the decode kernel).
/// Round 73 (H200, CUDA graphs, weights rotated past 3 x L2, us, default -> balanced): M = 1
/// 14336x4096 IQ2_XXS 14.74 -> 13.41 (5696; 4160 14.85), IQ2_XS 16.59 -> 14.73 (4160; 4672 14.81),
/// Q8_0 19.37 -> 17.92; 6144x4096 IQ2_XS 8.83 -> 8.42, Q8_0 9.96 -> 9.53 (IQ2_XXS 7.62 -> 8.00:
/// not taken); M = 4 14336x4096 IQ2_XS 17.89 -> 15.69 (IQ2_XXS 15.65 -> 15.48: not taken). Lost
/// where the default's grid is even: 4096x4096 IQ2_XXS 5.43 -> 6.50, 4096x14336 12.46 -> 14.13
/// (5696), 2048x7168 5.39 -> 6.80.
constexpr int kGgmlBalXxs = 5696, kGgmlBalXs = 4160, kGgmlBalQ8 = 4096;
struct GgmlGemvGrid;
bool ggml_gemv_bal_default(const GgmlGemvGrid& gg, int warps, int64_t n16, int64_t sms);
/// No GEMV override is set (B12X_GGML_GEMV_VAR / _WARPS / _OCC / _KW / _SPLIT / _CTAS): they
/// time and test the grid-stride kernels, and the balanced split by default only without them.
bool ggml_gemv_env_free() {
  for (const char* k : {"B12X_GGML_GEMV_VAR", "B12X_GGML_GEMV_WARPS", "B12X_GGML_GEMV_OCC",
                        "B12X_GGML_GEMV_KW", "B12X_GGML_GEMV_SPLIT", "B12X_GGML_GEMV_CTAS"})
    if (std::getenv(k) != nullptr) return false;
  return true;
}
/// The balanced split counts a CTA's (tile, batch) units x warps in 32 bits: at most
/// ceil(n16 / SMs) tiles per CTA (its grid holds >= SMs CTAs where n16 >= SMs), of the GEMV's
/// batches (Q8_0: 4 blocks of 32, IQ2: 8).
bool ggml_bal_fits(lin::WFmt wf, int64_t n16, int64_t K, int64_t sms, int warps) {
  const bool q8 = wf == lin::WFmt::kQ8_0;
  const int64_t batches = (K / 32 + (q8 ? 3 : 7)) / (q8 ? 4 : 8);
  return (n16 + sms - 1) / sms * batches * warps < (int64_t{1} << 31);
}
/// Q8_0 takes the GEMV's balanced split at M = 1 (BF16) where ggml_gemv_default would not (only
/// where that split is then taken: no override, 32-bit unit counts for 16 warps).
bool ggml_q8_bal_default(lin::WFmt wf, int64_t M, bool fp16, int64_t n16, int64_t K, int64_t sms) {
  return wf == lin::WFmt::kQ8_0 && M == 1 && !fp16 && n16 > 2 * sms && ggml_gemv_env_free() &&
         ggml_bal_fits(wf, n16, K, sms, 16);
}

/// The GGML GEMV's grid for CTAs of `warps` warps: warps per 16-row tile (kw, a divisor of warps;
/// warps / kw tiles per CTA), K split over CTAs and the CTAs per split (at most the resident ones,
/// walking the tile groups), by a cost model: an SM's time ~ its CTAs x (a CTA's warp-batches +
/// the IQ2 table fill, ~3 batches), doubled below 16 resident warps per SM (latency), plus the
/// reduce kernel of a split (~8 batches; for
/// Q8_0's shorter batches at M <= 8 ~60: round 34, Q8_0 2048x7168 M = 1, kw 8 split 2 on 256 CTAs
/// 9.20 us, split 1 on 128 CTAs 8.43).
struct GgmlGemvGrid {
  int kw = 8, split = 1, ctas = 0;
};
GgmlGemvGrid ggml_gemv_grid(lin::WFmt wf, int64_t n16, int64_t K, int64_t M, int64_t sms, int occ,
                            int warps) {
  const int64_t u = wf == lin::WFmt::kQ8_0 ? 4 : 8;
  const double reduce = wf == lin::WFmt::kQ8_0 && M <= 8 ? 60.0 : 8.0;
  const int64_t batches = (K / 32 + u - 1) / u;
  const double fill = wf == lin::WFmt::kQ8_0 ? 0.5 : 3.0;
  const int64_t cap = std::max<int64_t>(1, occ) * sms;
  GgmlGemvGrid best;
  double best_cost = 1e30;
  for (int kw = warps; kw >= 1; --kw)
    for (int split = 1; split <= 16; split *= 2) {
      if (warps % kw != 0 || static_cast<int64_t>(kw) * split > std::max<int64_t>(batches, 1))
        continue;
      const int64_t tpc = warps / kw;
      const int64_t groups = (n16 + tpc - 1) / tpc;
      const int64_t gx = std::max<int64_t>(1, std::min(groups, cap / split));
      const int64_t per_sm = (gx * split + sms - 1) / sms;
      const int64_t bps = (batches + split - 1) / split;
      const double work =
          static_cast<double>((groups + gx - 1) / gx) * warps * ((bps + kw - 1) / kw);
      double cost = static_cast<double>(per_sm) * (work + fill);
      if (std::min<int64_t>(per_sm, occ) * warps < 16) cost *= 2.0;
      if (split > 1) cost += reduce;
      if (cost < best_cost) {
        best_cost = cost;
        best = {kw, split, static_cast<int>(gx)};
      }
    }
  return best;
}

/// Sessions 25-27: the integer-MMA GEMV (lin::kGgmlImmaVar, kernels/linear_gemv_imma.cuh) by
/// default, 16 warps, with its warps per CTA in *warps; 0: not. H200-measured (the plan takes it
/// on SM90 only), BF16 activations, no GEMV override (ggml_gemv_env_free; B12X_GGML_GEMV_IMMA=0
/// keeps the BF16 GEMV). Session 25 (round 95, BF16 GEMV -> integer MMA, us over 4096x4096 /
/// 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168): IQ2_XXS M = 1 13.38 / 12.39 / 7.61 -> 11.36
/// / 12.37 / 6.98 at the three big shapes. Session 26: two activation pieces, the loads by the
/// supplying lanes (8195), M = 1 on every shape; round 97: IQ2_XXS M = 1 5.46 / 11.35 / 12.29 /
/// 6.96 / 5.46 -> 4.94 / 9.31 / 10.09 / 6.00 / 4.98. Session 27 (round 101, two runs averaged):
/// IQ2_XS M = 1 8195 -> 8207 (the loop per tile, the next batch's loads in place) 5.73 / 11.26 /
/// 12.02 / 6.93 / 5.44 -> 5.55 / 10.20 / 10.81 / 6.46 / 5.31; M = 2 where the SMs get >= 40
/// (tile, 256-K) units (the three big shapes), both formats on 8207: IQ2_XXS 11.37 / 13.10 /
/// 7.08 -> 10.97 / 12.33 / 6.97, IQ2_XS (8193, 24 warps) 13.62 / 14.78 / 8.38 -> 11.71 / 13.10 /
/// 7.40. IQ2_XXS M = 1 keeps 8195 (8207: 5.06 / 9.32 / 10.04 / 5.97 / 5.04 against 5.02 / 9.30 /
/// 10.11 / 6.00 / 4.97). Round 102: IQ2_XS M = 1 8207 -> 8303 (+ the peeled loop and the
/// interleaved halves) 5.56 / 10.22 / 10.86 / 6.47 / 5.32 -> 5.47 / 9.88 / 10.44 / 6.36 / 5.18
/// (IQ2_XXS mixed: 5.07 / 9.27 / 10.09 / 6.04 / 4.96 -> 5.25 / 9.25 / 9.88 / 6.12 / 4.94, kept);
/// M = 2 on 8207 also where the tiles are at most the SMs and the SMs get >= 24 units (2048x7168,
/// 27 per SM: rounds 101 / 102 IQ2_XXS 6.60 / 6.56 -> 6.14 / 6.08, IQ2_XS 7.09 / 7.03 -> 6.40 /
/// 6.30; 4096x4096's 256 tiles keep the BF16 GEMV: 5.70 / 5.68 against 5.97 / 5.74). Round 103:
/// IQ2_XS M = 1 8303 -> 8431 (+ the table words loaded after the first activation load: the two
/// round trips no longer in series) 5.45 / 9.91 / 10.50 / 6.36 / 5.12 -> 5.39 / 9.93 / 10.46 /
/// 6.33 / 5.13 (the default's own rows 5.45 / 9.95 / 10.48 / 6.36 / 5.13). Session 29 (round
/// 111, two passes averaged): IQ2_XXS M = 1 8195 -> 8963 (+ every staging pass's activation load
/// at once, the table words as replicated quads) 5.17 / 9.86 / 10.77 / 6.35 / 5.15 -> 5.11 / 9.51 /
/// 10.49 / 6.20 / 5.12 (won all ten rows; IQ2_XS 8687 = 8431 + kXAll lost on every shape).
int ggml_imma_default(lin::WFmt wf, bool fp16, int64_t M, int64_t n16, int64_t K, int64_t sms,
                      int* warps) {
  const bool xs = wf == lin::WFmt::kIq2Xs;
  const char* off = std::getenv("B12X_GGML_GEMV_IMMA");
  if (fp16 || (wf != lin::WFmt::kIq2Xxs && !xs) || (off != nullptr && off[0] == '0')) return 0;
  constexpr int kPieces = lin::kGgmlImmaVar | lin::kGgmlImmaP2 | lin::kGgmlImmaPred;
  constexpr int kInPlace = kPieces | lin::kGgmlImmaTile | lin::kGgmlImmaInPlace;
  const int64_t units = n16 * (K / 256);
  const bool m2 = M == 2 && (units >= 40 * sms || (n16 <= sms && units >= 24 * sms));
  if (M != 1 && !m2) return 0;
  *warps = 16;
  if (m2) return kInPlace;
  return xs ? kInPlace | lin::kGgmlImmaPeel | lin::kGgmlImmaIlv | lin::kGgmlImmaXFirst
            : kPieces | lin::kGgmlImmaXAll | lin::kGgmlImmaTabQ;
}

bool ggml_gemv_bal_default(const GgmlGemvGrid& gg, int warps, int64_t n16, int64_t sms) {
  if (gg.split != 1) return false;
  const int64_t tpc = warps / gg.kw, groups = (n16 + tpc - 1) / tpc;
  const int64_t gx = gg.ctas > 0 ? std::min<int64_t>(gg.ctas, groups) : groups;
  const int64_t busiest = (gx + sms - 1) / sms * ((groups + gx - 1) / gx) * tpc;
  return (n16 + sms - 1) / sms < busiest;
}

/// The most K slices whose staged activations (`rows` token rows) fit the decode kernel's
/// shared-memory budget (at least one: a slice of 16 rows is at most 16 KB); pipe: per buffer of
/// the pipelined staging's two.
int64_t stage_fit_slices(lin::WFmt f, int64_t rows, int64_t budget, int buffers = 1) {
  int64_t s = 1;
  while (lin::stage_geom(f, rows, s + 1).bytes * buffers <= budget) ++s;
  return s;
}
int64_t stage_fit_slices(lin::WFmt f, int64_t rows, bool pipe = false) {
  return pipe ? stage_fit_slices(f, rows, lin::kDecodePipeBudget, 2)
              : stage_fit_slices(f, rows, lin::kDecodeStageBudget);
}

}  // namespace

namespace {

std::string stream_rows_describe(const Plan& p) {
  if (p.stream_rows_parts == 0) return std::string();
  return " stream4=" + std::to_string(p.stream_rows_parts) + (p.stream_rows_shfl ? "s" : "") + "x" +
         std::to_string(p.stream_rows_split) + "/" + std::to_string(p.stream_rows_ctas);
}

// The M <= 16 block kernel's variant tags, shared by describe() and the kernel signature (each
// tag names a different kernel instance or launch shape, so both must carry all of them).
std::string stream16_variant_tags(const Plan& p) {
  return std::string(p.stream16_qx ? " qx" : "") + (p.stream16_once ? " once" : "") +
         (p.stream16_qa ? " qa" : "") + (p.stream16_w16 ? " w16" : "") +
         (p.stream16_depth > 0 ? " f8d" + std::to_string(p.stream16_depth) : "") +
         (p.stream16_depth > 0 && p.stream16_occ == 3 ? " o3" : "") +
         (p.stream16_depth > 0 && p.stream16_var != 0 ? " v" + std::to_string(p.stream16_var) : "");
}

std::string stream16_describe(const Plan& p) {
  if (p.stream16_tw == 0) return std::string();
  return " stream16=" + std::to_string(p.stream16_tw) + "x" + std::to_string(p.stream16_split) +
         "/" + std::to_string(p.stream16_vp) +
         (p.stream16_split_lo > 0 ? ",lo" + std::to_string(p.stream16_split_lo) : "") +
         stream16_variant_tags(p) +
         (p.stream16_cluster > 0 ? " cl" + std::to_string(p.stream16_cluster) : "") +
         (p.stream16_cluster > 0 && p.stream16_cluster_min_m > 0
              ? "m" + std::to_string(p.stream16_cluster_min_m)
              : "") +
         (p.stream16_min_m > 0 && p.stream16_min_m != kS16MinM && p.stream16_depth == 0
              ? " m" + std::to_string(p.stream16_min_m)
              : "");
}

}  // namespace

std::string Plan::describe() const {
  std::ostringstream os;
  os << "linear[" << format_name(caps.format) << " N=" << caps.out_features
     << " K=" << caps.in_features << " max_tokens=" << caps.max_tokens << " regime="
     << (regime == Regime::kDecode  ? "decode"
         : regime == Regime::kTiled ? "tiled"
                                    : "auto")
     << " split_k=" << split_k << " decode_ws=" << decode_warp_split
     << (decode_deep ? " decode_deep=" + std::to_string(decode_deep) : std::string())
     << (decode_sync_stage ? " sync_stage" : "")
     << (decode_xshare ? " xshare=" + std::to_string(decode_xshare) : std::string())
     << (decode_xshare_qpdl ? " qpdl" : "")
     << (decode_stream_parts
             ? " stream=" + std::to_string(decode_stream_parts) + "o" +
                   std::to_string(decode_stream_occ) + (decode_stream_shfl ? "s" : "") +
                   (decode_stream_var ? "v" + std::to_string(decode_stream_var) : std::string()) +

                   "/" + std::to_string(decode_stream_ctas)
             : std::string())
     << stream_rows_describe(*this) << stream16_describe(*this)
     << (stream_mx_free ? " mx_free" : "")
     << (stream_trig ? " trig=" + std::to_string(stream_trig) : std::string())
     << (ggml_gemv
             ? " ggml_gemv=" + std::to_string(ggml_gemv) + "w" + std::to_string(ggml_gemv_warps) +
                   "v" + std::to_string(ggml_gemv_var) + "x" + std::to_string(ggml_gemv_split) +
                   "/" + std::to_string(ggml_gemv_ctas)
             : std::string())
     << " tiled_split=" << tiled_split << (tiled_split_reduce ? "(reduce)" : "")
     << " tiled_tok=" << tiled_tok << " scratch=" << scratch_bytes << "B]";
  return os.str();
}

Plan plan(const Caps& caps) {
  const char* op = "gemm::plan";
  const int fi = static_cast<int>(caps.format);
  B12X_CHECK_ARG(fi >= 0 && fi < kNumLinearFormats, op, ": format code ", fi,
                 " is not a linear format (supported 0..", kNumLinearFormats - 1, ")");
  const LinearFormat f = caps.format;
  B12X_CHECK_ARG(caps.max_tokens > 0, op, ": max_tokens=", caps.max_tokens, " must be > 0");
  B12X_CHECK_ARG(caps.max_tokens <= (int64_t{1} << 24), op, ": max_tokens=", caps.max_tokens,
                 " exceeds 2^24");
  B12X_CHECK_ARG(caps.out_features > 0, op, ": out_features=", caps.out_features, " must be > 0");
  B12X_CHECK_ARG(caps.in_features > 0 && caps.in_features % format_k_multiple(f) == 0, op,
                 ": in_features K=", caps.in_features, " is not a positive multiple of ",
                 format_k_multiple(f), " (", format_name(f), " needs K % ", format_k_multiple(f),
                 " == 0)");
  B12X_CHECK_ARG(act_dtype_ok(f, caps.act_dtype), op, ": act_dtype=", dtype_name(caps.act_dtype),
                 " is not supported by ", format_name(f), " (supported: ", act_dtype_set(f), ")");
  B12X_CHECK_ARG(caps.out_dtype == DType::kBF16 || caps.out_dtype == DType::kFP16, op,
                 ": out_dtype=", dtype_name(caps.out_dtype), " (supported: bf16, fp16)");
  B12X_CHECK_ARG(caps.expected_m >= 0, op, ": expected_m=", caps.expected_m, " must be >= 0");
  refuse_during_capture(nullptr, op);
  const DeviceInfo& dev = device_info(caps.device);
  // The H200's compute capability: the defaults measured only there are gated on it.
  const bool sm90 = dev.cc_major == 9 && dev.cc_minor == 0;
  require_compiled_arch(caps.device, op);
  // The kernels' attribute and occupancy calls below act on the current device: the plan's.
  const b12x::detail::DeviceScope device_scope(caps.device);

  Plan p;
  p.caps = caps;
  p.act_quant = act_quant_options(caps.device);  // the B12X_QUANT_* knobs, read here only
  const WFmt wf = weight_format(f);
  const lin::Geometry geo = lin::make_geometry(wf, caps.out_features, caps.in_features);
  const int64_t M = caps.max_tokens, K = caps.in_features;
  // Regime: the weight-streaming decode kernel for M <= 16, the tiled kernel above; with a
  // max_tokens above 16 and no hint the bound shape decides (host metadata, fixed per binding).
  const bool fp16 = mma_fp16(f, caps.act_dtype);
  if (caps.regime != Regime::kAuto) {
    p.regime = caps.regime;
  } else if (M <= kDecodeMaxM || (caps.expected_m > 0 && caps.expected_m <= kDecodeMaxM)) {
    p.regime = M <= kDecodeMaxM ? Regime::kDecode : Regime::kAuto;
  } else if (caps.expected_m > kDecodeMaxM) {
    p.regime = Regime::kTiled;
  } else {
    p.regime = Regime::kAuto;
  }
  // B12X_GEMM_MIDM=0: session 6's tiled choices at mid M (128-token CTAs, run's cluster split of
  // at most 2, wgmma from kWgmmaMinM tokens), for comparisons.
  const char* midm_env = std::getenv("B12X_GEMM_MIDM");
  const bool midm = !(midm_env != nullptr && midm_env[0] == '0');
  if (p.regime != Regime::kDecode) {
    lin::prepare_linear_tiled(caps.device, wf, fp16);
    // The mma.sync tiled kernel's 64-token variant up to kTiledTok64MaxM tokens (capacity, or the
    // expected M); B12X_GEMM_TILED_TOK=64|128 overrides.
    const int64_t m_tok = caps.expected_m > 0 ? caps.expected_m : M;
    const bool fold_fp4 = (wf == WFmt::kNvfp4 || wf == WFmt::kMxfp4) && !fp16;
    p.tiled_tok = midm && m_tok <= (fold_fp4 ? kTiledTok64MaxMFp4 : kTiledTok64MaxM) ? 64 : 128;
    if (const char* e = std::getenv("B12X_GEMM_TILED_TOK"); e != nullptr)
      p.tiled_tok = std::atoi(e) == 64 ? 64 : 128;
    if (p.tiled_tok == 64) lin::prepare_linear_tiled(caps.device, wf, fp16, 64);
  }
  // SM90 (exactly 9.0: wgmma and 227 KB of shared memory per block) runs the fold formats on the
  // wgmma kernel from kWgmmaMinM tokens (plan capacity, or the expected M when given);
  // B12X_GEMM_WGMMA=0 keeps the mma.sync kernel, 1 forces wgmma for any tiled run. Read per plan
  // (tests scope it).
  // The GGML formats (fp32 group scales) run on their own wgmma kernel (per-group partials
  // promoted in fp32) when its 128 x 128 tiles alone give >= 0.7 x SMs CTAs (round 12, M = 256:
  // 1.5-1.7x the mma.sync kernel at 96 / 224 CTAs, 0.8-0.9x at 32 / 64 CTAs, where that kernel's
  // split-K clusters fill the GPU). B12X_GEMM_WGMMA_GROUP=0 keeps them on the mma.sync kernel,
  // 1 takes the group kernel whenever the wgmma kernel is chosen.
  const char* ge = std::getenv("B12X_GEMM_WGMMA_GROUP");
  const int group_env = ge != nullptr ? std::atoi(ge) : -1;
  const int64_t m_grp = caps.expected_m > 0 ? caps.expected_m : M;
  const int64_t grp_row_ctas = (geo.NP + 127) / 128;
  const bool wgmma_group =
      wgmma_group_format(wf) && group_env != 0 &&
      (group_env == 1 || grp_row_ctas * ((m_grp + 127) / 128) * 10 >= 7 * dev.sm_count);
  if (p.regime != Regime::kDecode && sm90 &&
      (lin::wgmma_kernel_available(wf, fp16, 128, wgmma_default_var(wf)) || wgmma_group)) {
    const int64_t m_eff = caps.expected_m > 0 ? caps.expected_m : M;
    const char* e = std::getenv("B12X_GEMM_WGMMA");
    const int forced = e != nullptr ? std::atoi(e) : -1;
    const int tok = (forced == 1 || (forced < 0 && m_eff >= kWgmmaMinM)) ? 128 : 0;
    p.tiled_wgmma = tok;
    // Schedule variant (B12X_GEMM_WGMMA_VAR=<n> probes; an unknown one for the format keeps the
    // default).
    const bool f8 = wf == WFmt::kFp8 || wf == WFmt::kFp8Block;
    p.tiled_wgmma_var = wf == WFmt::kFp8Block ? kWgmmaF8BlockVar : f8 ? kWgmmaF8Var : 0;
    // BF16-operand formats (NVFP4, MXFP4, MXFP8): 256-token CTAs (one per SM; since session 5
    // warp-specialized, variant 3) when they still give ~0.9 x SMs CTAs (half the weight decode
    // and copy work per MAC). Round 13 (ac50acd, M = 2048, five shapes) against 128-token CTAs on
    // the CTA barrier: MXFP8 +6-9% (402-512 TFLOP/s), MXFP4 W4A8 +5-11%, NVFP4 +5-7%, NVFP4 W4A16
    // +5-8%, MXFP4 +6-12%, MXFP4 W4A16 +7-14%; every format's TOK=256 / VAR=1 test cases passed
    // there. B12X_GEMM_WGMMA_TOK / _VAR override.
    if (!f8 && tok > 0 && forced < 0 &&
        lin::wgmma_kernel_available(wf, fp16, 256, kWgmmaBf256Var) &&
        (geo.NP + 127) / 128 * ((m_eff + 255) / 256) * 10 >= 9 * dev.sm_count) {
      p.tiled_wgmma = 256;
      p.tiled_wgmma_var = kWgmmaBf256Var;  // the warp-specialized kernel (kWgmmaBf256Var above)
    }
    if (const char* v = std::getenv("B12X_GEMM_WGMMA_VAR"); v != nullptr && tok > 0) {
      const int want = std::atoi(v);
      if (lin::wgmma_kernel_available(wf, fp16, p.tiled_wgmma, want)) p.tiled_wgmma_var = want;
    }
    if (p.tiled_wgmma > 0 && wgmma_group) {
      // 256-token CTAs when they still give ~0.9 x SMs CTAs (round 12, M = 2048: 1.2-1.3x the
      // 128-token ones, half the decode work per MAC). Probes: B12X_GEMM_WGMMA_GROUP_TOK=128|256,
      // B12X_GEMM_WGMMA_GROUP_VAR=0 (each partial drained before its promotion), 2 (256-row
      // CTAs, 128 tokens) or 3 (256 tokens, the CTA-barrier pipeline: the default until session
      // 12).
      // IQ2 (the rescaled kernels 52 / 53) from 256 tokens on (session 18, round 70, BF16, us,
      // 128 -> 256 tokens: M = 768 4096x4096 IQ2_XS 92.41 -> 61.41, IQ2_XXS 83.16 -> 58.18; M =
      // 256 14336x4096 91.27 -> 59.59, 83.69 -> 57.27, though the 256-token grids hold 96 / 112
      // CTAs: 53 decodes each weight for half the tokens).
      p.tiled_wgmma = grp_row_ctas * ((m_grp + 255) / 256) * 10 >= 9 * dev.sm_count ||
                              (wf != WFmt::kQ8_0 && m_grp >= 256)
                          ? 256
                          : 128;
      const char* gt = std::getenv("B12X_GEMM_WGMMA_GROUP_TOK");
      if (gt != nullptr && (std::atoi(gt) == 128 || std::atoi(gt) == 256))
        p.tiled_wgmma = std::atoi(gt);
      const char* gv = std::getenv("B12X_GEMM_WGMMA_GROUP_VAR");
      // (IQ2 probe B12X_GEMM_WGMMA_GROUP_VAR=4, the sign masks computed instead of loaded from the
      // shared table: round 22, M = 2048, equal to 3 within 1-2% on all five shapes.)
      const bool t256 = p.tiled_wgmma == 256;
      const bool q8 = wf == WFmt::kQ8_0;
      int def = t256 ? (q8 ? kWgmmaGroupVarQ8 : kWgmmaGroupVarIq2)
                     : (q8 ? kWgmmaGroupVar128 : kWgmmaGroupVar128Iq2);
      if (!fp16 && lin::wgmma_group_fold_var(def) && !kWgmmaGroupF16x)
        def = t256 ? kWgmmaGroupVar256 : kWgmmaGroupVar128;
      p.tiled_wgmma_var = def;
      // The variants folding the IQ2 sub-scales into FP16 weights run BF16 activations behind
      // the FP16 pre-pass (Plan::tiled_wgmma_f16x).
      auto group_ok = [&](int v) {
        return lin::wgmma_group_kernel_available(wf, fp16, p.tiled_wgmma, v) ||
               (!fp16 && lin::wgmma_group_fold_var(v) &&
                lin::wgmma_group_kernel_available(wf, true, p.tiled_wgmma, v));
      };
      B12X_ASSERT(group_ok(p.tiled_wgmma_var), "no group wgmma kernel for format ",
                  static_cast<int>(wf), " tokens ", p.tiled_wgmma, " variant ", p.tiled_wgmma_var);
      if (gv != nullptr && group_ok(std::atoi(gv))) p.tiled_wgmma_var = std::atoi(gv);
      p.tiled_wgmma_f16x = !fp16 && lin::wgmma_group_fold_var(p.tiled_wgmma_var);
      // The pre-pass's PDL trigger at its CTAs' start (kGgmlActF16Early;
      // B12X_GGML_ACT_F16_EARLY=0|1 overrides).
      p.tiled_wgmma_f16x_early = p.tiled_wgmma_f16x && kGgmlActF16Early;
      if (const char* r = std::getenv("B12X_GGML_ACT_F16_EARLY"); r != nullptr)
        p.tiled_wgmma_f16x_early = p.tiled_wgmma_f16x && std::atoi(r) == 1;
      lin::prepare_linear_wgmma_group(wf, fp16 || p.tiled_wgmma_f16x, p.tiled_wgmma,
                                      p.tiled_wgmma_var);
      p.tiled_wgmma_raster = kWgmmaRasterGroup;
      if (const char* r = std::getenv("B12X_GEMM_WGMMA_RASTER"); r != nullptr)
        p.tiled_wgmma_raster = std::max(0, std::atoi(r));
    } else if (p.tiled_wgmma > 0) {
      // Probe: B12X_GEMM_WGMMA_TOK=128|192|256 (the token tile where the kernel has it).
      if (const char* t = std::getenv("B12X_GEMM_WGMMA_TOK"); t != nullptr) {
        const int want = std::atoi(t);
        if (lin::wgmma_kernel_available(wf, fp16, want, p.tiled_wgmma_var)) {
          p.tiled_wgmma = want;
        } else if (lin::wgmma_kernel_available(wf, fp16, want, f8 ? 3 : 0)) {
          // No warp-specialized kernel at this width (FP8 64 tokens, BF16 operands below 256):
          // the shared ring (FP8) / the CTA-barrier pipeline (BF16 operands).
          p.tiled_wgmma = want;
          p.tiled_wgmma_var = f8 ? 3 : 0;
        }
        // B12X_GEMM_WGMMA_VAR again at the new width (a variant only this width has, e.g. the
        // BF16 operands' 3 at 256 tokens, which the forced 128-token choice above lacks: TOK=256
        // VAR=3 ran variant 0 before session 11).
        if (const char* v = std::getenv("B12X_GEMM_WGMMA_VAR"); v != nullptr) {
          const int want_var = std::atoi(v);
          if (lin::wgmma_kernel_available(wf, fp16, p.tiled_wgmma, want_var))
            p.tiled_wgmma_var = want_var;
        }
      }
      // Block FP8 variants 14 / 33 (33 the default, kWgmmaF8BlockVar): bulk copies of the tiled
      // quantizer's stage images, so only where this plan quantizes inside and every stage is a
      // whole 128-K group of K (K % 256 == 0: KP == K); run() takes variant 8 where the tiled
      // quantizer cannot run (activation rows not 16-byte vectors).
      if (wgmma_act_images(p.tiled_wgmma_var)) {
        if (caps.act_dtype == DType::kFP8E4M3 || K % 256 != 0) p.tiled_wgmma_var = 8;
        lin::prepare_linear_wgmma(wf, fp16, p.tiled_wgmma, 8);
      }
      lin::prepare_linear_wgmma(wf, fp16, p.tiled_wgmma, p.tiled_wgmma_var);
      p.tiled_wgmma_raster = f8 ? kWgmmaRasterF8 : kWgmmaRaster;
      if (const char* r = std::getenv("B12X_GEMM_WGMMA_RASTER"); r != nullptr)
        p.tiled_wgmma_raster = std::max(0, std::atoi(r));
    }
  }
  // Mid M: the BF16-operand formats leave the wgmma kernel (no K split) for the mma.sync kernel
  // split over K where the wgmma grid is small (kMidMWgmmaFill; FP8 stays, its wgmma kernel is
  // 3x the split mma.sync one at M = 256). B12X_GEMM_WGMMA=1 keeps wgmma.
  const char* wgmma_env = std::getenv("B12X_GEMM_WGMMA");
  if (midm && p.tiled_wgmma > 0 && wgmma_env == nullptr && !wgmma_group && wf != WFmt::kFp8 &&
      wf != WFmt::kFp8Block) {
    const int64_t m_eff = caps.expected_m > 0 ? caps.expected_m : M;
    const int64_t ctas = (geo.NP + 127) / 128 * ((m_eff + 127) / 128);
    if (m_eff <= kMidMMaxM && ctas * 10 < kMidMWgmmaFill * dev.sm_count) p.tiled_wgmma = 0;
  }
  // mma.sync tiled kernel: K split over grid.z so that the grid fills the GPU at mid M (the
  // default: the largest split that keeps the grid within one wave of CTAs and >= 4 stages per
  // CTA, from the capacity or expected M; fp32 partials + the reduce kernel, in split order, or
  // for a split of 2 one cluster). B12X_GEMM_TILED_SPLITK=0 takes run's cluster split of at most
  // 2 instead, =<n> forces n; B12X_GEMM_TILED_SPLITK_MODE=cluster reduces any split that fits
  // one co-resident cluster (power of two <= 8) through DSMEM, =reduce none.
  if (p.regime != Regime::kDecode && p.tiled_wgmma == 0) {
    const char* se_env = std::getenv("B12X_GEMM_TILED_SPLITK");
    const char* sm = std::getenv("B12X_GEMM_TILED_SPLITK_MODE");
    const char* se = se_env != nullptr ? se_env : midm ? "auto" : "0";
    if (*se != 0 && std::string(se) != "0") {
      const int64_t m_eff = caps.expected_m > 0 ? caps.expected_m : M;
      const int tok = p.tiled_tok;
      const int64_t bn = lin::tiled_block_n(wf, fp16, tok);
      const int64_t tiles = (geo.NP + bn - 1) / bn * ((m_eff + tok - 1) / tok);
      const int64_t stages = geo.KP / 64;
      const int64_t per_sm =
          std::max(1, lin::tiled_max_active_clusters(caps.device, wf, fp16, 1, tok));
      const std::string mode = sm != nullptr ? sm : "";
      const bool cluster_ok = dev.cc_major >= 9 && mode != "reduce";
      auto cluster_fits = [&](int64_t s) {
        return cluster_ok && s <= 8 && (s & (s - 1)) == 0 &&
               tiles <=
                   lin::tiled_max_active_clusters(caps.device, wf, fp16, static_cast<int>(s), tok);
      };
      int64_t split = 1;
      if (std::string(se) == "auto") {
        const int64_t cap = std::max<int64_t>(1, per_sm * dev.sm_count / tiles);
        split = std::max<int64_t>(1, std::min(cap, stages / 4));
        if (mode == "cluster" && split > 1 && split <= 8) {
          int64_t c = 1;
          while (c * 2 <= split && cluster_fits(c * 2)) c *= 2;
          if (c * 2 > split || c == 8) split = c;  // a power-of-two cluster covers the split
        }
      } else {
        split = std::max<int64_t>(1, std::min<int64_t>(std::atoll(se), stages));
      }
      p.tiled_split = static_cast<int>(std::min<int64_t>(split, 65535));
      // A split of 2 as a cluster where it fits (rank 0 adds the other's accumulators over DSMEM;
      // round 26, against partials: Q8_0 M = 256 4096x4096 58.2 -> 53.7 us, M = 128 6144x4096
      // 55.9 -> 52.9), larger ones as partials unless the mode asks for clusters.
      p.tiled_split_reduce = p.tiled_split > 1 && !(cluster_fits(p.tiled_split) &&
                                                    (p.tiled_split == 2 || mode == "cluster"));
    }
  }
  // GGML formats at M <= kGgmlGemvMaxM: the GEMV kernel (lin::launch_ggml_gemv) where
  // ggml_gemv_default says so (B12X_GGML_GEMV=0|1 overrides); B12X_GGML_GEMV_KW / _SPLIT / _CTAS /
  // _OCC override its grid and options.
  if (M <= kGgmlGemvMaxM && p.regime == Regime::kDecode && lin::ggml_gemv_available(wf)) {
    const char* e = std::getenv("B12X_GGML_GEMV");
    if (e != nullptr ? e[0] == '1'
                     : ggml_gemv_default(wf, geo.n16, dev.sm_count) ||
                           ggml_q8_bal_default(wf, M, fp16, geo.n16, K, dev.sm_count)) {
      p.ggml_gemv_occ = kGgmlGemvOcc;
      const char* occ_env = std::getenv("B12X_GGML_GEMV_OCC");
      if (occ_env != nullptr) p.ggml_gemv_occ = std::atoi(occ_env) == 3 ? 3 : 0;
      // CTAs of 16 / 24 warps: one per SM, the one-tile kernels at M <= 8.
      p.ggml_gemv_warps = ggml_gemv_warps_default(wf, geo.n16, K, M, dev.sm_count);
      // The kernel variant (B12X_GGML_GEMV_VAR=<flags>, 0: session 13's kernels; by default
      // ggml_gemv_var_default, chosen with the final occupancy below).
      const char* var_env = std::getenv("B12X_GGML_GEMV_VAR");
      const char* warps_env = std::getenv("B12X_GGML_GEMV_WARPS");
      // Session 14 (round 53): at M = 1 with BF16 activations, 8 warps with the two-batch
      // look-ahead instead of 24-warp CTAs where the tiles exceed the SMs (4096x14336: IQ2_XXS
      // 14.12 -> 13.32 us, IQ2_XS 15.12 -> 14.79; 2048x7168, 128 tiles, keeps 24: 8 warps there
      // 8.10 / 8.96 against 6.29 / 6.73 with 24 and the L1 flag).
      // Session 17 (rounds 64-66): 16-warp CTAs (one per SM; the grid model gives 16 warps per
      // tile) instead of 24 where the tiles fit the SMs (the 24-warp rule needs K >= 6144, so the
      // atom columns' K rule holds here too): 2048x7168 IQ2_XXS 6.18 / 6.20 -> 5.52 / 5.51 us,
      // IQ2_XS 6.61 / 6.59 -> 6.35 / 6.29 with session 16's kernels; with the atom columns
      // (round 66, old default -> new) 6.18 -> 5.37 and 6.59 -> 6.10.
      if (var_env == nullptr && warps_env == nullptr && !fp16 && wf != lin::WFmt::kQ8_0 && M == 1 &&
          p.ggml_gemv_warps == 24)
        p.ggml_gemv_warps = geo.n16 > dev.sm_count ? 8 : 16;
      if (warps_env != nullptr && M <= 8) {
        const int want = std::atoi(warps_env);
        if (want == 8 || want == 16 || want == 24) p.ggml_gemv_warps = want;
      }
      if (p.ggml_gemv_warps != 8) p.ggml_gemv_occ = 0;
      const auto var_ok = [&](int v, int occ_try) {
        return lin::ggml_gemv_var_available(wf, fp16, M, occ_try, p.ggml_gemv_warps, v);
      };
      const int var = var_env != nullptr ? std::atoi(var_env) : 0;
      const auto bal_fits = [&](int warps) {
        return ggml_bal_fits(wf, geo.n16, K, dev.sm_count, warps);
      };
      // The integer-MMA GEMV's vars (kGgmlImmaVar) are not the BF16 GEMV's variant bits (a Q8_0
      // plan would otherwise keep 8195 and run() take it for the integer-MMA kernel).
      p.ggml_gemv_var = var != 0 && (var & lin::kGgmlImmaVar) == 0 &&
                                var_ok(var, p.ggml_gemv_occ) && var_ok(var, 0) &&
                                ((var & 4096) == 0 || bal_fits(p.ggml_gemv_warps))
                            ? var
                            : 0;
      const int occ = std::max(1, lin::prepare_ggml_gemv(caps.device, wf, fp16, M, p.ggml_gemv_occ,
                                                         p.ggml_gemv_warps, p.ggml_gemv_var));
      const GgmlGemvGrid gg =
          ggml_gemv_grid(wf, geo.n16, K, M, dev.sm_count, occ, p.ggml_gemv_warps);
      // Where that grid takes at most 2 CTAs per SM, the uncapped IQ2 kernels (no spills;
      // IQ2_XS: 16 grid copies, no bank conflicts) run it, every CTA still resident. Round 33,
      // IQ2_XS M = 1, capped (8 copies) -> uncapped, us: 4096x4096 7.93 -> 7.77, 4096x14336
      // 18.05 -> 17.24, 2048x7168 9.60 -> 9.56; on grids of 3 per SM the capped kernels win
      // (6144x4096 10.46 vs 12.88 uncapped on its own grid).
      int run_occ = occ;  // CTAs per SM of the kernel that runs the grid
      if (occ_env == nullptr && p.ggml_gemv_occ == 3 &&
          static_cast<int64_t>(gg.ctas) * gg.split <= 2 * dev.sm_count) {
        p.ggml_gemv_occ = 0;
        run_occ = std::max(1, lin::prepare_ggml_gemv(caps.device, wf, fp16, M, 0, p.ggml_gemv_warps,
                                                     p.ggml_gemv_var));
      }
      // The default variant for the kernel that runs, kept only where it is as resident as that
      // kernel, so that the grid above stands (H200: the same CTAs per SM; on SM12x the atom
      // columns' 64 KB tables and 128 registers may fit fewer CTAs than the grid counted).
      if (var_env == nullptr) {
        const int dv =
            ggml_gemv_var_default(wf, fp16, M, p.ggml_gemv_warps, p.ggml_gemv_occ, gg.kw, K);
        if (dv != 0 && var_ok(dv, p.ggml_gemv_occ) &&
            lin::prepare_ggml_gemv(caps.device, wf, fp16, M, p.ggml_gemv_occ, p.ggml_gemv_warps,
                                   dv) >= run_occ)
          p.ggml_gemv_var = dv;
        // The balanced split on 16-warp CTAs (kGgmlBalXxs above).
        const bool xs = wf == lin::WFmt::kIq2Xs;
        const int bv = wf == lin::WFmt::kIq2Xxs ? kGgmlBalXxs : xs ? kGgmlBalXs : kGgmlBalQ8;
        const bool bal =
            wf == lin::WFmt::kQ8_0
                ? ggml_q8_bal_default(wf, M, fp16, geo.n16, K, dev.sm_count)
                : !fp16 && M <= (xs ? 4 : 1) && geo.n16 > 2 * dev.sm_count &&
                      (ggml_gemv_bal_default(gg, p.ggml_gemv_warps, geo.n16, dev.sm_count) ||
                       (xs && p.ggml_gemv_occ == 3));
        if (ggml_gemv_env_free() && bal && bal_fits(16) &&
            lin::ggml_gemv_var_available(wf, fp16, M, 0, 16, bv)) {
          p.ggml_gemv_warps = 16;
          p.ggml_gemv_occ = 0;
          p.ggml_gemv_var = bv;
          run_occ = std::max(1, lin::prepare_ggml_gemv(caps.device, wf, fp16, M, 0, 16, bv));
        }
      }
      p.ggml_gemv = gg.kw;
      p.ggml_gemv_split = gg.split;
      p.ggml_gemv_ctas = gg.ctas;
      if ((p.ggml_gemv_var & 4096) != 0) {
        // The balanced split (kernels/linear_gemv_ggml.cuh, kBal): one wave of resident CTAs,
        // each a contiguous share of the tiles, all warps on one tile's K range at a time.
        p.ggml_gemv = p.ggml_gemv_warps;
        p.ggml_gemv_split = 1;
        p.ggml_gemv_ctas = static_cast<int>(
            std::min<int64_t>(geo.n16, static_cast<int64_t>(run_occ) * dev.sm_count));
      }
      // Sessions 25-27: the IQ2 GEMV on integer MMA (B12X_GGML_GEMV_VAR=8963 / 8207 or
      // ggml_imma_default; 16 warps, M <= 2): one wave of CTAs, each a contiguous share of the
      // tiles, no K split.
      int ivar = var, iw = 0;
      if ((var & lin::kGgmlImmaVar) != 0) {
        iw = 16;  // every integer-MMA kernel (session 27: IQ2_XS's 24-warp 8193 removed)
      } else if (sm90 && ggml_gemv_env_free()) {
        ivar = ggml_imma_default(wf, fp16, M, geo.n16, K, dev.sm_count, &iw);
      }
      if ((ivar & lin::kGgmlImmaVar) != 0) {
        const int var = ivar;
        if (lin::ggml_imma_available(wf, fp16, M, K, iw, var, dev.smem_per_block_optin)) {
          const int io = std::max(1, lin::prepare_ggml_imma(caps.device, wf, fp16, iw, var, M, K));
          p.ggml_gemv_var = var;
          p.ggml_gemv_warps = iw;
          p.ggml_gemv_occ = 0;
          p.ggml_gemv = iw;
          p.ggml_gemv_split = 1;
          p.ggml_gemv_ctas =
              static_cast<int>(std::min<int64_t>(geo.n16, static_cast<int64_t>(io) * dev.sm_count));
        }
      }
      if (const char* k = std::getenv("B12X_GGML_GEMV_KW"); k != nullptr) {
        const int want = std::atoi(k);
        if (want >= 1 && want <= p.ggml_gemv_warps && p.ggml_gemv_warps % want == 0)
          p.ggml_gemv = want;
      }
      // The balanced split runs one K range per CTA (its kernel ignores grid.y): no split.
      if (const char* sp = std::getenv("B12X_GGML_GEMV_SPLIT");
          sp != nullptr && (p.ggml_gemv_var & (4096 | lin::kGgmlImmaVar)) == 0)
        p.ggml_gemv_split = static_cast<int>(std::clamp<int64_t>(std::atoll(sp), 1, 64));
      if (const char* c = std::getenv("B12X_GGML_GEMV_CTAS"); c != nullptr)
        p.ggml_gemv_ctas = std::max(0, std::atoi(c));
    }
  }
  // Split-K (weight-streaming regime only).
  const int64_t slices = geo.KP / lin::slice_k(wf);
  const int64_t ctas_n = (geo.n16 + 3) / 4;
  int split = 1;
  int ws = 1;
  const char* split_env = std::getenv("B12X_GEMM_SPLIT");
  // Knobs several blocks below share, read once: B12X_GEMM_ACT_PREPASS=0 keeps quantized FP4
  // activations dequantized inside the decode kernel (no BF16 pre-pass); B12X_GEMM_STREAM_PARTS /
  // _CTAS force both stream kernels' parts per tile and CTAs per SM.
  const char* pre_env = std::getenv("B12X_GEMM_ACT_PREPASS");
  const bool prepass_off = pre_env != nullptr && pre_env[0] == '0';
  const char* parts_env = std::getenv("B12X_GEMM_STREAM_PARTS");
  const char* ctas_env = std::getenv("B12X_GEMM_STREAM_CTAS");
  const int stream_force_parts = parts_env != nullptr ? std::atoi(parts_env) : 0;
  const int stream_per_sm = ctas_env != nullptr ? std::atoi(ctas_env) : 0;
  // Both stream kernels take BF16 activations: raw (W4A16 with BF16 inputs) or the pre-pass's.
  const bool stream_bf16_act =
      format_raw_activations(f) ? caps.act_dtype == DType::kBF16 : !prepass_off;
  // A regime forced to tiled never runs the decode kernel: none of its choices (split_k stays 1,
  // so the partials region below is the tiled split's alone).
  const bool decode_plan = M <= kDecodeMaxM && p.regime != Regime::kTiled;
  bool half_reduce = false;  // the slice halves' split of 3..4 through partials, not a cluster
  if (decode_plan) {
    const int64_t sms = std::max(dev.sm_count, 1);
    const int nt = decode_nt(M);
    const int64_t tok_tiles = (M + 8 * nt - 1) / (8 * nt);
    // Warps per weight tile: capacity M = 1 (round 17: at M = 4, where the staging needs a cluster
    // split, 4 warps lost on 3 of 5 shapes for Q8_0 / NVFP4 W4A16 / MXFP4 W4A16 / NVFP4), no
    // forced split over CTAs, activations staged by plain copies (BF16 / FP16, or FP8 for the
    // FP8 weight formats: the W4A4 / W4A8 staging dequantizes in every CTA, NVFP4 W4A4 14336x4096
    // 24.7 -> 46.6 us with 4 warps), the CTA's K range fitting the staging (below). FP8 weights
    // (no decode, memory-bound) keep one warp per tile where their tiles alone give ~0.9 x SMs
    // CTAs (round 16: 14336x4096 16.2 -> 17.0 us with 4).
    // FP4 / FP8 activations of FP4 weights go through the BF16 pre-pass at M = 1 too, so the
    // warp split applies (B12X_GEMM_ACT_PREPASS=0: dequantized in every CTA, one warp per tile).
    const bool copy_staged = format_raw_activations(f) || lin::wtraits(wf).fp8mma || !prepass_off;
    // Session 17: FP8 weights at M = 2..3 take the M = 1 grid too (4 warps per tile, the whole K
    // staged at once, no pipelined staging) where it has 4 warps per tile, the pipelined K parts
    // below do not (64-row CTAs on more than a quarter of the SMs) and the staging holds the
    // whole K. Round 64 (H200, us, default -> this grid, with the early trigger below in both):
    // per-tensor M = 2 / 3 6144x4096 9.39 / 9.36 -> 8.51 / 8.52, 4096x4096 7.14 / 7.13 -> 6.97 /
    // 7.05; block FP8 M = 2 6144x4096 10.35 -> 9.59, 4096x4096 8.47 -> 8.30; 4096x14336 M = 2
    // 18.00 -> 17.90 (without the trigger). Not at M = 4 (4096x4096 7.54 -> 8.54) nor where the
    // staging cannot hold the whole K (4096x14336 M = 3: 18.16 -> 22.82 on a one-warp grid).
    // B12X_GEMM_DECODE_WS_M=<1..8> sets the largest M (1: the M = 1 rule only). This rule, the
    // deeper ring and the plain-load staging below are SM90's (measured there only).
    const bool f8_sm90 = lin::wtraits(wf).fp8mma && sm90;
    int64_t ws_max_m =
        f8_sm90 && ctas_n * 4 > sms && ctas_n * 10 < 9 * sms && stage_fit_slices(wf, M) >= slices
            ? 3
            : 1;
    if (const char* e = std::getenv("B12X_GEMM_DECODE_WS_M");
        e != nullptr && lin::wtraits(wf).fp8mma)
      ws_max_m = std::clamp<int64_t>(std::atoi(e), 1, 8);
    // Session 25: per-tensor FP8 on the 4-warp grid with the staged rows shared by clusters of S
    // CTAs along the weight rows (kXsh, Plan::decode_xshare: each CTA multicasts 1 / S of every
    // row into the S CTAs, so the grid reads the activations from L2 once per cluster), to M = 8
    // where the staging holds the whole K, where a CTA stages >= 12 KB (M x K) at M >= 2, or at
    // every M where the grid has at most one CTA per SM; S = 4 where the grid has more CTAs than
    // SMs and all its clusters are resident at once (with the deeper ring's rule, else without
    // it), else 2. Round 94 (default -> B12X_GEMM_DECODE_XSHARE=0 | forced 2 | forced 4):
    // 4096x4096 M = 3 5.99-6.52 -> 6.48 | 6.14 | 6.00, M = 4 6.58-6.62 -> 7.70 | 6.95 | 6.71, M = 5
    // (then M <= 4) 7.81 | 7.14 | 6.65, M = 6 8.08 | 6.86 | - (4 does not fit); 6144x4096 M = 3 /
    // 4 8.43-8.50 / 8.64-8.66 (2) -> 8.45-8.58 / 10.09, M = 5 10.18 | 8.88 | -; 2048x7168 M = 3 /
    // 4 6.18-6.21 / 6.18-6.20 (2) -> 7.24-7.27 / 7.56 | - | 5.92 / 6.60 (M >= 5: the staging does
    // not hold K = 7168); 4096x14336 M = 2 16.50 -> 17.89. Round 93 (H200, us, M = 1 /
    // 2 / 4, default -> shared: S, deeper ring): 4096x4096 M = 4 7.73 -> 6.65 (4, none; 2: 7.07),
    // M = 1 5.77 -> 5.62-5.68 (4, deep), M = 2 6.22 -> 6.21 (2, deep) / 6.51 (4, none);
    // 6144x4096 M = 4 10.09 -> 8.63 (2: 4 does not fit 384 CTAs), M = 1 / 2 7.34 / 8.01 -> 8.00 /
    // 8.35 (2); 2048x7168 M = 1 / 2 / 4 5.96 / 7.02 / 7.52 -> 5.57 / 5.82 / 6.22 (2; 4: 5.67-5.79
    // / 5.83-6.00 / 6.36-6.59); 4096x14336 M = 2 17.93 -> 16.55 (2, deep), M = 1 15.73 -> 16.03.
    // Nsight Compute (4096x4096 M = 4, the 4-warp grid alone): 8.99 -> 7.71 us, 1.37 -> 1.18 M
    // instructions, long scoreboard 2.98 -> 1.78 per issue. B12X_GEMM_DECODE_XSHARE=0 turns it
    // off, =2|4 forces S (at any M the grid takes, with B12X_GEMM_DECODE_WS_M).
    const char* xs_env = std::getenv("B12X_GEMM_DECODE_XSHARE");
    const int xs_force = xs_env != nullptr ? std::atoi(xs_env) : -1;
    // Session 26: the staging beyond kDecodeStageBudget (the kXsh instances are SM90's: ring +
    // staging within kDecodeXshBudget; the cluster query below decides), so M = 8 at K = 4096,
    // M = 5..8 at 7168 and M = 3..4 at 14336 take the grid too. Round 97 (H200, us, per-tensor,
    // the 32 KB rule -> this): 4096x4096 M = 8 7.65 -> 6.72 (S 2), 2048x7168 M = 5 / 6 / 8 7.66 /
    // 7.74 / 7.85 -> 6.43 / 6.48 / 6.23 (2), 4096x14336 M = 3 / 4 18.19 / 17.89 -> 16.60 (2, deep)
    // / 16.82 (2); 6144x4096 M = 8 and 4096x14336 M >= 5 take no resident clusters (level).
    // B12X_GEMM_DECODE_XSHARE_BIG=0 keeps session 25's 32 KB.
    const char* xbig_env = std::getenv("B12X_GEMM_DECODE_XSHARE_BIG");
    const bool xs_big = !(xbig_env != nullptr && xbig_env[0] == '0');
    // Session 26: two token tiles (M = 9..16) on the same grid (f16 MMAs, the default ring; its
    // runs at M <= 8 take one token tile from the same first M). Round 98 (H200, us, per-tensor,
    // default (block kernel, split + reduce) -> B12X_GEMM_DECODE_XSHARE16=1, S = 2): 2048x7168
    // M = 9 / 12 / 16 8.42 / 8.65 / 8.77 -> 6.82 / 7.31 / 7.63, 4096x4096 M = 9 / 12 8.41 / 8.53
    // -> 7.66 / 7.87 (M = 16: 16 rows + ring leave one CTA per SM, no resident clusters; likewise
    // 6144x4096, 4096x14336). B12X_GEMM_DECODE_XSHARE16=0 turns it off.
    const char* x16_env = std::getenv("B12X_GEMM_DECODE_XSHARE16");
    // (Its instance has f16 MMAs: not under B12X_GEMM_DECODE_F8MMA=0.)
    const char* xmma_env = std::getenv("B12X_GEMM_DECODE_F8MMA");
    const bool xs16 = nt == 2 && M <= 16 && !(x16_env != nullptr && x16_env[0] == '0') &&
                      !(xmma_env != nullptr && xmma_env[0] == '0');
    const int64_t xs_stage = lin::stage_geom(wf, std::min<int64_t>(M, 8 * nt), slices).bytes + 16;
    const bool xs_stage_ok = (xs_big || stage_fit_slices(wf, M) >= slices) &&
                             lin::decode_ring_bytes_deep(wf, 0) + xs_stage <= lin::kDecodeXshBudget;
    const int64_t xs_min_m = geo.n16 <= sms ? 1 : std::max<int64_t>(2, (12288 + geo.K - 1) / geo.K);
    // Every cluster of S CTAs resident at once, for each instance run may launch: the f16 MMAs
    // of runs at M >= 2 (SM90) and, where runs from M = 1 take it (m1) and it exists, the e4m3
    // one; the deeper ring's and none (run drops it where ring + staging exceed its budget).
    auto xs_fits = [&](int S, int deep, bool m1) {
      const int64_t clusters = (geo.n16 + S - 1) / S;
      int64_t fit = clusters;
      for (int d : {deep < 0 ? deep : 0, deep})
        for (int mma : {0, 1}) {
          if ((mma == 0 && !m1) || (mma == 1 && M < 2)) continue;
          // (Without an instance run falls back to the plain staging: no cluster.)
          if (!lin::decode_xshare_available(wf, fp16, d, mma, nt)) {
            if (mma == 0) continue;
            return false;
          }
          fit = std::min<int64_t>(fit, lin::decode_xshare_max_clusters(
                                           caps.device, wf, d, mma, S,
                                           lin::decode_ring_bytes_deep(wf, d) + xs_stage, nt));
        }
      return fit >= clusters;
    };
    // Session 27: S = 2 with a ring of 2 slices per warp (deep -1: 16 rows of K = 4096 and the
    // ring leave 2 CTAs per SM, where the default ring leaves one) as the two-tile grid's last
    // candidate. Round 101 (H200, us, per-tensor 4096x4096, the only one of the five shapes it
    // reaches): M = 16 8.54 (block kernel, split + reduce) -> 8.06, M = 13 level (the default
    // ring fits); a capacity-16 plan's runs (its M <= 8 on the one-tile grid from the same plan)
    // M = 1 / 4 / 8 6.75 / 7.38 / 8.00 -> 5.92 / 6.72 / 6.82. B12X_GEMM_DECODE_XSHARE_SHALLOW=0
    // turns it off, =2 forces that ring at two token tiles (tests).
    const char* xsh_env = std::getenv("B12X_GEMM_DECODE_XSHARE_SHALLOW");
    const int xs_shallow = nt == 2 && xs16 ? (xsh_env != nullptr ? std::atoi(xsh_env) : 1) : 0;
    // Session 29: block FP8 on the same grid (plans of capacity 2..8), the rows quantized before
    // the kernel by the quantizer launched as a programmatic dependent of the previous kernel that
    // lets the GEMM start at once (or the caller's e4m3 rows), so that the cluster shares codes;
    // each CTA loads its rows' group scales. Round 110 (H200, us, default -> this, two
    // interleaved runs): 4096x4096 M = 4 8.87, 8.89 -> 8.80, 8.84, M = 8 9.08, 9.05 -> 8.56, 8.54;
    // 6144x4096 M = 4 11.90, 11.89 -> 10.14, 10.17; 2048x7168 M = 2 9.30, 9.29 -> 8.20, 8.19, M = 4
    // 9.24, 9.21 -> 8.67, 8.68, M = 8 9.43, 9.44 -> 9.56, 9.55; 4096x14336 M = 4 19.25, 19.25 ->
    // 18.83, 18.77; caller e4m3 rows, M = 4: 7.88 / 10.74 / 8.40 / 17.74 -> 6.16 / 8.89 / 6.36 /
    // 18.00 (4096x4096 / 6144x4096 / 2048x7168 / 4096x14336). The quantizer as a plain launch
    // lost (10.58 / 12.60 / 10.07 / 21.58 at M = 4), as did MXFP8 (its per-atom fold: 9.32 ->
    // 11.55 at 4096x4096 M = 4) and two token tiles (M = 16 4096x4096 10.32 -> 10.57, 2048x7168
    // 10.16 -> 10.61): removed. B12X_GEMM_DECODE_XSHARE_Q=0 turns it off.
    const char* xq_env = std::getenv("B12X_GEMM_DECODE_XSHARE_Q");
    // (Grids of at least half a CTA per SM: on smaller N the block kernel keeps its runs.)
    const bool xs_q = wf == lin::WFmt::kFp8Block && M >= 2 &&
                      !(xq_env != nullptr && xq_env[0] == '0') &&
                      (xs_force > 0 || geo.n16 * 2 > sms);
    int xs_s = 0, xs_deep = 0;
    if (f8_sm90 && (wf == lin::WFmt::kFp8 || xs_q) && !fp16 && geo.K % 16 == 0 &&
        split_env == nullptr && ctas_n * 10 < 9 * sms && (M <= 8 || (xs16 && !xs_q)) &&
        xs_stage_ok && xs_force != 0) {
      // The deeper ring's rule below at the grid's split of 1.
      const int pd = M <= 3 && geo.n16 > sms && geo.n16 <= 2 * sms && !xs_q ? 1 : 0;
      if (xs_force == 2 || xs_force == 4) {
        for (int d : {xs_shallow == 2 ? -1 : pd, xs_shallow == 2 ? -1 : 0})
          if (xs_s == 0 && xs_fits(xs_force, d, true)) xs_s = xs_force, xs_deep = d;
      } else if (xs_force < 0 && M >= xs_min_m) {
        const int cand[4][2] = {{4, xs_shallow == 2 ? -1 : pd},
                                {4, xs_shallow == 2 ? -1 : 0},
                                {2, xs_shallow == 2 ? -1 : pd},
                                {2, xs_shallow == 1 ? -1 : pd}};
        for (const auto& c : cand)
          if (xs_s == 0 && (c[0] == 2 || geo.n16 > sms) && xs_fits(c[0], c[1], xs_min_m == 1))
            xs_s = c[0], xs_deep = c[1];
      }
      if (xs_s > 0) ws_max_m = std::max<int64_t>(ws_max_m, M);
    }
    if (M <= ws_max_m && copy_staged && split_env == nullptr) {
      ws = lin::wtraits(wf).fp8mma && ctas_n * 10 >= 9 * sms ? 1 : kDecodeWarpSplit;
      // (The IQ2 formats have no such kernel: the GGML GEMV takes their M <= 16.)
      if (!lin::decode_ws_available(wf, fp16, ws)) ws = 1;
      // 8 warps per tile (FP4 weights with BF16 MMAs) where the 16-row tiles give at most one CTA
      // per SM and ring + staging fit the device (run checks it again): round 30, H200, M = 1,
      // us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, 4 -> 8 warps: NVFP4
      // W4A16 6.53 / 16.72 / 16.14 / 8.60 / 6.18 -> 7.13 / 20.03 / 17.56 / 11.15 / 5.17, MXFP4
      // W4A16 6.22 / 15.04 / 13.66 / 8.42 / 5.78 -> 6.75 / 18.98 / 16.58 / 9.97 / 5.05, NVFP4
      // (W4A4) 7.59 / 17.87 / 20.05 / 9.58 / 7.56 -> 8.08 / 21.26 / 19.46 / 12.60 / 7.29: only the
      // 128-tile grid gains (Nsight Compute at 4096x4096: 3.7 instead of 1.9 warps per scheduler,
      // but 9.8 instead of 5.8 cycles between a warp's instructions). B12X_GEMM_DECODE_WSPLIT=8
      // forces it.
      if (ws == kDecodeWarpSplit && geo.n16 <= sms && lin::decode_ws8_available(wf, fp16) &&
          lin::decode_ring_bytes_deep(wf, 0, 8) + lin::stage_geom(wf, 1, slices).bytes <=
              lin::decode_ws8_budget(dev.smem_per_block_optin))
        ws = 8;
      if (const char* e = std::getenv("B12X_GEMM_DECODE_WSPLIT"); e != nullptr) {
        const int want = std::atoi(e);
        if (want == 1 ||
            ((want == 2 || want == 4 || want == 8) && lin::decode_ws_available(wf, fp16, want)))
          ws = want;
      }
    }
    // Pipelined staging (two staging buffers) at M = 2..8, and at M = 9..32 for Q8_0 and FP8
    // per-tensor; B12X_GEMM_DECODE_PIPE=0 / 1 keeps one buffer / forces two wherever available.
    // H200, us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, one buffer ->
    // two (round 22): M = 4 NVFP4 W4A16 8.6 / 19.8 / 25.3 / 12.4 / 10.7 -> 8.4 / 18.3 / 23.6 /
    // 12.0 / 10.7, MXFP4 W4A16 8.1 / 18.9 / 23.6 / 10.8 / 10.1 -> 8.1 / 16.7 / 21.8 / 10.7 / 10.1,
    // Q8_0 11.4 / 25.1 / 34.7 / 14.9 / 12.4 -> 11.3 / 21.2 / 28.4 / 14.7 / 12.4, IQ2_XS 13.9 /
    // 38.3 / 60.0 / 22.8 / 18.1 -> 15.3 / 36.6 / 48.0 / 22.3 / 17.9; M = 16 Q8_0 17.1 / 34.8 /
    // 48.3 / 21.7 / 19.5 -> 15.2 / 31.9 / 48.8 / 20.6 / 18.9, FP8 10.2 / 22.5 / 25.3 / 14.0 / 13.4
    // -> 10.0 / 21.5 / 26.0 / 12.9 / 13.4, but NVFP4 / MXFP4 W4A16 4096x14336 36.8 / 39.2 -> 40.6
    // / 42.5 and IQ2_XS 19.1 / 45.8 / 75.5 / 29.9 / 26.1 -> 22.8 / 53.2 / 84.5 / 29.3 / 27.7
    // (round 21 similar: M = 16 NVFP4 W4A16 4096x14336 36.3 -> 38.2, Q8_0 17.1 -> 13.8 at
    // 4096x4096). The CTA's K range in chunks also lets M = 2..8 take warps per tile (forced by
    // B12X_GEMM_DECODE_PIPE_WS=2|4, interleaved K parts; round 22: faster on the shapes with few
    // tiles, e.g. M = 2 NVFP4 W4A16 4096x14336 21.4 -> 18.3 us with 4, 2048x7168 10.5 -> 8.8 with
    // 2, slower on 14336x4096, 18.4 -> 20.7 / 22.1).
    {
      const char* e = std::getenv("B12X_GEMM_DECODE_PIPE");
      const bool want =
          e != nullptr ? e[0] == '1' : nt == 1 || wf == WFmt::kQ8_0 || wf == WFmt::kFp8;
      p.decode_pipe = want && M >= 2 && ws == 1 && lin::decode_pipe_available(wf, fp16);
    }
    bool pipe_ws = false;
    // Two token tiles: per-tensor FP8 only (session 13, below).
    const char* pipe_ws_env = std::getenv("B12X_GEMM_DECODE_PIPE_WS");
    if (p.decode_pipe && (nt == 1 || wf == WFmt::kFp8) && split_env == nullptr &&
        dev.cc_major >= 9) {
      int want = 1;
      // Per-tensor FP8 (session 12) where its 64-row CTAs fill at most a quarter of the SMs: round
      // 45 (H200, M = 4, us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, one
      // warp per tile -> 4): 7.74 / 18.45 / 18.72 / 10.73 / 8.46 -> 8.03 / 23.68 / 19.01 / 12.93 /
      // 7.59 (2 warps: 7.68 / 20.14 / 19.75 / 10.83), so only 2048x7168's 32 CTAs gain.
      const bool measured = wf == WFmt::kNvfp4 || wf == WFmt::kMxfp4 || wf == WFmt::kQ8_0 ||
                            (wf == WFmt::kFp8 && ctas_n * 4 <= sms);
      if (measured && nt == 1 && M <= 4 && ctas_n * 10 < 9 * sms &&
          slices >= kDecodePipeWsMinSlices) {
        // The chunks (a multiple of want slices, >= kStages - 1 per K part) must fit the staging.
        const int64_t fit = stage_fit_slices(wf, M, /*pipe=*/true);
        const int64_t need = lin::decode_stages(wf) - 1;
        want = slices >= 16 && fit / 4 * 4 >= 4 * need ? 4 : fit / 2 * 2 >= 2 * need ? 2 : 1;
      }
      // Per-tensor FP8 at M = 9..16 likewise with 2 warps per tile (round 48, H200, f16 MMAs, us
      // over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, M = 16, one warp per
      // tile (halves where the default takes them) -> 2 -> 4 warps per tile: 9.67 / 20.56 / 22.95
      // / 12.76 / 13.36 -> 12.45 / 28.54 / 33.78 / 14.51 / 11.14 -> 13.00 / 36.02 / 27.92 /
      // 19.45 / 12.65; M = 9 at 2048x7168 9.78 with 2, 9.77 with 4): only the 32-CTA grid gains.
      if (wf == WFmt::kFp8 && nt == 2 && M <= 16 && ctas_n * 4 <= sms &&
          slices >= kDecodePipeWsMinSlices &&
          stage_fit_slices(wf, M, /*pipe=*/true) / 2 * 2 >= 2 * (lin::decode_stages(wf) - 1))
        want = 2;
      if (pipe_ws_env != nullptr) want = std::atoi(pipe_ws_env);
      // (Two token tiles with 4 warps per tile, a probe, were removed in session 21.)
      if ((want == 2 || want == 4) &&
          lin::decode_available(wf, fp16, nt, want, true, false, 0, false))
        ws = want, pipe_ws = true;
    }
    // The smallest split over CTAs that brings the grid to `want` CTAs (with K ranges of at most
    // max_per slices; 0 if none up to max_split does).
    auto tiles_per_cta = [](int w) -> int64_t { return w >= 4 ? 1 : 4 / w; };
    auto pick_split = [&](int64_t ctas, int64_t want, int64_t max_split, int64_t max_per) {
      int sp = 0;
      for (int64_t s = 1; s <= std::min<int64_t>(slices, max_split); ++s) {
        const int64_t per = (slices + s - 1) / s;
        const int64_t eff = (slices + per - 1) / per;
        if (per > max_per) continue;
        sp = static_cast<int>(eff);
        if (ctas * eff * tok_tiles >= want) break;
      }
      return sp;
    };
    if (pipe_ws) {
      // CTAs of 4 / ws tiles, K split over a cluster only (<= 8), to ~0.9 x SMs CTAs.
      split = pick_split((geo.n16 + tiles_per_cta(ws) - 1) / tiles_per_cta(ws), (9 * sms + 9) / 10,
                         8, slices);
      if (split == 0) ws = 1;
    } else if (ws > 1) {
      // CTAs of 4 / ws tiles; a split over CTAs only as a cluster (SM90+), each CTA's K range
      // staged: for decoded formats, down to kDecodeWsMaxSlices slices per warp (round 17,
      // 4096x14336 with a cluster of 2: Q8_0 23.2 -> 20.5 us, IQ2_XS 32.5 -> 30.1; NVFP4 W4A16,
      // 7 slices per warp, 16.1 -> 19.4 and FP8 16.7 -> 21.0 with it); B12X_GEMM_DECODE_WS_CTAS=<n>
      // (probe) splits further, up to n CTAs per SM.
      // (The shared staging holds the whole K within kDecodeXshBudget: no split.)
      const int64_t max_per =
          xs_s > 0 ? slices
                   : std::min<int64_t>(
                         stage_fit_slices(wf, std::min<int64_t>(M, 8)),
                         lin::wtraits(wf).fp8mma ? slices : int64_t{kDecodeWsMaxSlices} * ws);
      // MXFP8 weights (per-atom fp32 fold: instruction-bound at M = 1) where the 64-row CTAs
      // fill at most a quarter of the SMs: 2 CTAs per SM (a cluster split; session 12). Round 45
      // (H200, M = 1, staging quantization, us, default -> 2 per SM): 2048x7168 13.94 -> 11.17
      // (4096x4096 / 6144x4096, not taken: 11.43 / 13.17 -> 11.28 / 12.92; block FP8 lost: 7.60 /
      // 9.16 / 7.93 -> 8.46 / 9.23 / 8.16).
      int64_t ws_ctas = wf == WFmt::kFp8Mx && M == 1 && ctas_n * 4 <= sms ? 2 : 0;
      if (const char* e = std::getenv("B12X_GEMM_DECODE_WS_CTAS"); e != nullptr)
        ws_ctas = std::max(0, std::atoi(e));
      split = pick_split((geo.n16 + tiles_per_cta(ws) - 1) / tiles_per_cta(ws), ws_ctas * sms,
                         dev.cc_major >= 9 ? 8 : 1, max_per);
      if (split == 0) ws = 1;
    }
    if (ws == 1) {
      // Measured on the H200 (tools/gemm-probe.sh: splits 1/2/4/8 forced over three shapes, M =
      // 1 and 16, and a "three CTAs per SM" rule): the fastest grids with one warp per tile have
      // about one CTA per SM — more CTAs add prologues and cluster barriers to an SM that is
      // already issue-bound. So: the smallest split that brings the CTA count to ~0.9 x SMs
      // (cluster splits up to 8; beyond, the reduce kernel).
      split = pick_split(ctas_n, (9 * sms + 9) / 10, 32, slices);
    }
    // Slice halves: where one warp per tile runs (FP4 weights with BF16 MMAs), CTAs of 8 warps,
    // two per 16-row tile on the halves of each K slice, sharing one activation staging (the same
    // grid and split); at two token tiles with the pipelined staging. Default for NVFP4 weights
    // at M = 5..8 where each CTA streams at least 8 slices, and for NVFP4 and MXFP4 weights at
    // M = 9..32 with a split of at most 2 (B12X_GEMM_DECODE_HALF=0 / 1 turns it off / forces it).
    // MXFP4 since session 9, round 33, M = 16, us, one warp per tile -> halves: 12.93 / 27.04 /
    // 33.85 / 18.06 -> 12.26 / 24.53 / 28.11 / 17.45 at 4096x4096 / 14336x4096 / 4096x14336 /
    // 6144x4096 (2048x7168, split 4: 17.36 -> 19.59). Clusters of 4 / 8 of these CTAs (round 33,
    // B12X_GEMM_SPLIT=4 / 8, NVFP4 W4A16 M = 16 over the five shapes: 23.1 / 57.8 / 41.3 / 30.7 /
    // 20.7 and 49.3 / 144 / 65.8 / 68.7 / 31.5 against 12.2 / 24.4 / 29.5 / 17.4 / 18.5 by
    // default) ran about one CTA per SM, so no deeper split either. H200, us over 4096x4096 /
    // 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, one warp per tile -> halves: NVFP4 W4A16
    // M = 8 9.7 / 22.1 / 27.2 / 13.5 / 11.9 -> 9.3 / 20.4 / 25.1 / 13.6 / 11.7 (round 26; round
    // 25: 28.0 -> 23.1 at 4096x14336), M = 6 8.8 / 21.4 / 27.1 / 12.6 / 10.9 -> 10.0 / 19.9 /
    // 22.0 / 12.8 / 12.4 (the three shapes with 4 slices per CTA lose), M = 16 13.4 / 28.7 /
    // 36.2 / 19.2 / 18.5 -> 13.3 / 26.4 / 34.5 / 18.7 / (split 4: not taken; 21.7 in round 25),
    // M = 24 22.0 / 56.2 / 75.4 / 25.7 / 22.1 -> 21.1 / 46.2 / 67.7 / 23.7 / 22.3, M = 32 22.7 /
    // 53.1 / 76.7 / 27.2 / 22.6 -> 21.9 / 49.0 / 70.0 / 24.7 / 19.1; NVFP4 W4A4 alike (M = 8
    // 4096x14336 28.7 -> 26.4); M = 4 mixed (round 25: 8.4 -> 9.7 at 4096x4096, 18.6 -> 17.1 at
    // 14336x4096); MXFP4 W4A16 within +-4 % at M = 8 and 16 then. With one staging buffer at M = 16
    // (one slice per chunk: a CTA barrier and drained rings per slice) halves were slower (28.3 ->
    // 30.9, 36.0 -> 43.9; one buffer of 3 slices per chunk, a dropped probe: 28.6 / 36.0).
    // Nsight Compute (14336x4096 M = 16): 3.4 warps per scheduler (one warp per tile: 1.7), 0.54
    // instructions per cycle (0.44), 11.8 M instructions (9.6 M), stalls per issue dominated by
    // fixed-latency dependencies (wait 1.68, short scoreboard 0.63, barrier 0.33).
    // Session 10: at M = 9..32 also with a split of 3..4, there through fp32 partials + the
    // reduce kernel instead of a cluster (clusters of 4 of these 8-warp CTAs ran about one CTA
    // per SM, round 33). Round 37 (H200, 2048x7168, split 4, one warp per tile in a cluster ->
    // halves + partials, us): NVFP4 W4A16 M = 9 / 16 17.18 / 18.69 -> 10.28 / 10.82, MXFP4 W4A16
    // 15.70 / 17.57 -> 10.16 / 10.84 (M = 32, split 2: 15.38 -> 15.52 with partials instead of
    // the cluster). B12X_GEMM_DECODE_HALF_REDUCE=0 keeps the session-9 rule (split <= 2).
    if (ws == 1 && lin::decode_half_available(wf, fp16)) {
      const char* e = std::getenv("B12X_GEMM_DECODE_HALF");
      const char* re = std::getenv("B12X_GEMM_DECODE_HALF_REDUCE");
      const bool reduce_ok = !(re != nullptr && re[0] == '0') && split_env == nullptr;
      const int64_t per_cta = (slices + split - 1) / split;
      // Per-tensor FP8 weights (session 10) at M = 9..32 with a split of at most 2 where each CTA
      // streams >= 16 slices: round 37's Nsight Compute of FP8 M = 16 4096x14336 had one warp per
      // scheduler issuing every 3 cycles at 37 % of the DRAM bandwidth, and more CTAs (splits of
      // 4 / 8) lost 5-50 % / 2-3x. Round 38 (H200, one warp per tile -> halves, us, M = 9 / 16):
      // 14336x4096 (16 slices per CTA) 21.28 / 22.13 -> 20.55 / 20.88, 4096x14336 (28) 23.29 /
      // 27.94 -> 21.73 / 23.27; with 8 slices per CTA slower: 4096x4096 9.28 / 9.99 -> 9.60 /
      // 10.68, 6144x4096 13.72 / 13.08 -> 13.40 / 14.32.
      const bool fp4 = wf == lin::WFmt::kNvfp4 || wf == lin::WFmt::kMxfp4;
      const bool rule = (wf == lin::WFmt::kNvfp4 && nt == 1 && M >= 5 && per_cta >= 8) ||
                        (fp4 && nt == 2 && (split <= 2 || (reduce_ok && split <= 4))) ||
                        (wf == lin::WFmt::kFp8 && nt == 2 && split <= 2 && per_cta >= 16);
      p.decode_half = e != nullptr ? e[0] == '1' : rule;
      half_reduce = p.decode_half && fp4 && nt == 2 && split > 2 && split <= 4 && reduce_ok;
      const char* pe = std::getenv("B12X_GEMM_DECODE_PIPE");
      if (p.decode_half && nt == 2 && pe == nullptr) p.decode_pipe = true;
    }
    // A deeper ring for the M = 1 warp split (3 slices per warp ring; run checks the shared
    // memory): a third slice for NVFP4 weights where each of a tile's 4 warps streams >= 6 slices
    // (rounds 29-30, 4096x14336, us: NVFP4 W4A16 16.01 / 16.14 -> 14.83, NVFP4 W4A4 19.92 / 20.05
    // -> 16.24; MXFP4 W4A16 13.62 -> 14.41 and the shapes with 2 slices per warp 8-26 % slower:
    // not taken; 4 slices per warp ring, a dropped probe: 6.59 / 16.67 / 16.01 / 8.58 / 6.13 ->
    // 7.38 / 23.08 / 16.15 / 12.57 / 6.20 over the five shapes). B12X_GEMM_DECODE_DEEP=0|1
    // overrides.
    if (M == 1 && ws == 4 && wf == lin::WFmt::kNvfp4 && (slices + split - 1) / split >= 24 &&
        lin::decode_deep_available(wf, fp16, 1))
      p.decode_deep = 1;
    // Session 17: FP8 weights on the 4-warp grid (M <= 3) where its CTAs need more than one and at
    // most two slots per SM (the deeper ring's 64 KB keep two per SM; run checks ring + staging
    // against kDecodeDeepBudget). Round 65 (H200, us, 3 -> 4 ring slices per warp, with the early
    // trigger): 4096x4096 per-tensor M = 1 / 2 / 3 5.95 / 7.10 / 7.12 -> 5.77 / 6.47 / 6.49, block
    // FP8 M = 1 / 2 6.99 / 8.25 -> 6.76 / 7.87; 4096x14336 per-tensor M = 1 16.47 -> 16.04, block
    // 20.13 -> 19.82. Where the grid needs a third slot per SM it lost (6144x4096 per-tensor M = 1
    // / 2 7.26 / 8.60 -> 7.77 / 10.58), and at one CTA per SM it did not gain (2048x7168
    // per-tensor 5.92 -> 5.91, block 7.35 -> 8.25).
    if (f8_sm90 && M <= 3 && ws == 4 && !p.decode_pipe && !p.decode_half && geo.n16 * split > sms &&
        geo.n16 * split <= 2 * sms && lin::decode_deep_available(wf, fp16, 1))
      p.decode_deep = 1;
    if (xs_s > 0 && xs_deep <= 0) p.decode_deep = xs_deep;  // the shared staging's clusters need it
    if (const char* e = std::getenv("B12X_GEMM_DECODE_DEEP"); e != nullptr) {
      const int want = std::atoi(e);
      p.decode_deep = ws == 4 && want == 1 && !p.decode_pipe && !p.decode_half &&
                              lin::decode_deep_available(wf, fp16, 1)
                          ? 1
                          : 0;
    }
    // Staging copies by segments: in the 8-warp slice halves by default (round 30, H200, us over
    // the five shapes, piece walk -> segments, NVFP4 W4A16 M = 16 13.29 / 25.83 / 34.06 / 19.04 /
    // 18.43 -> 12.50 / 24.56 / 29.72 / 18.33 / 18.51, M = 24 21.23 / 46.44 / 67.57 / 23.66 / 21.14
    // -> 18.78 / 44.46 / 54.96 / 22.31 / 17.45, M = 8 14336x4096 / 4096x14336 19.80 / 24.07 ->
    // 19.38 / 22.40); not in the 4-warp kernels (M = 8 at 4096x4096 NVFP4 / MXFP4 W4A16 9.69 /
    // 8.71 -> 10.70 / 10.43, M = 1 within 2 %). B12X_GEMM_DECODE_SEGSTAGE=0|1 overrides.
    p.decode_seg_stage = p.decode_half;
    if (const char* e = std::getenv("B12X_GEMM_DECODE_SEGSTAGE"); e != nullptr)
      p.decode_seg_stage = e[0] == '1';
    // Session 17: FP8 weights on the 4-warp grid at M >= 2 (the f16-MMA kernels on SM90; run
    // takes it at M >= 2 only) stage their activations by plain loads where that is one batch of
    // 16-byte loads per thread (M x K <= kDecodeSyncMaxMK), so that the staging's cp.async wait
    // does not also wait for the ring's first slices. Per-tensor M = 2, us, cp.async -> plain
    // loads: round 65 (with the trigger) 4096x4096 7.10-7.34 -> 6.52 (with the deep ring 6.47 ->
    // 6.15), 6144x4096 8.50-8.60 -> 8.00; round 66 (deep ring) 4096x4096 6.45 / 6.48 -> 6.15,
    // 6144x4096 8.46 / 8.51 -> 8.09. Two batches lost (M = 3, K = 4096: 6.48 -> 6.76, 8.56 ->
    // 8.78; M = 2, K = 14336: 17.9 -> 19.5), as did M = 1 (e4m3 kernels: 2048x7168 5.91 -> 6.48,
    // 6144x4096 7.31 -> 7.50). B12X_GEMM_DECODE_SYNCSTAGE=0|1 overrides.
    p.decode_sync_stage = f8_sm90 && ws == 4 && !p.decode_pipe && !p.decode_half && M >= 2 &&
                          M * geo.K <= kDecodeSyncMaxMK;
    if (const char* e = std::getenv("B12X_GEMM_DECODE_SYNCSTAGE"); e != nullptr)
      p.decode_sync_stage = e[0] == '1' && lin::wtraits(wf).fp8mma;
    // The shared staging (below, at the 4-warp grid's rule): where the grid is the one it was
    // chosen for and its clusters fit with the ring the plan took.
    if (xs_s > 0 && ws == 4 && (nt == 1 || xs16) && split == 1 && !p.decode_pipe &&
        !p.decode_half && xs_fits(xs_s, p.decode_deep, xs_force > 0 || xs_min_m == 1)) {
      p.decode_xshare = xs_s;
      p.decode_xshare_min_m = static_cast<int>(xs_force > 0 ? 1 : xs_min_m);
      // (Block FP8 / MXFP8: from M = 2, where run takes the quantizer launch instead of the
      // staging's quantization; M = 1 keeps the plan's own route.)
      if (xs_q) p.decode_xshare_min_m = std::max(p.decode_xshare_min_m, 2);
    }
    // (=2: in front of every decode-kernel run of the plan that takes the quantizer, M = 1 too.)
    p.decode_xshare_qpdl = xs_q && p.decode_xshare > 0;
    // The kernels with the per-slice bookkeeping by running pointers, the halves' staging walk set
    // up once per CTA and conflict-free splat rows (kLean; run takes them where they exist for the
    // launch's configuration): FP4 weights with BF16 MMAs at M = 1 (4 / 8 warps per tile) and in
    // the pipelined halves. Round 34 (H200, us over 4096x4096 / 14336x4096 / 4096x14336 /
    // 6144x4096 / 2048x7168, default -> lean, one run): NVFP4 W4A16 M = 1 6.55 / 16.72 / 14.74 /
    // 8.58 / 5.21 -> 6.30 / 15.68 / 13.93 / 8.20 / 5.19, M = 16 12.27 / 24.49 / 29.96 / 17.64 /
    // 18.68 -> 11.56 / 22.32 / 26.29 / 17.12 / 18.62; MXFP4 W4A16 M = 1 within 1 %, M = 16 12.07 /
    // 24.47 / 28.57 / 16.96 -> 12.21 / 22.88 / 26.71 / 16.96. B12X_GEMM_DECODE_LEAN=0|1 overrides.
    p.decode_lean = (wf == lin::WFmt::kNvfp4 || wf == lin::WFmt::kMxfp4) && !fp16 &&
                    ((M == 1 && (ws == 4 || ws == 8)) || (p.decode_half && p.decode_pipe));
    if (const char* e = std::getenv("B12X_GEMM_DECODE_LEAN"); e != nullptr)
      p.decode_lean = e[0] == '1';
    // The pipelined staging's two buffers at 68 KB where the device holds them (SM90; SM12x keeps
    // 36 KB, run bounds it by the opt-in): 2 slices of 16 rows per chunk, half the chunk barriers
    // and staging walks, 2 CTAs per SM still. Default in the NVFP4 halves at M = 9..32: round 37
    // (H200, us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, 36 -> 68 KB)
    // NVFP4 W4A16 M = 16 11.43 / 22.42 / 26.23 / 17.62 / 18.45 -> 10.60 / 21.18 / 22.84 / 16.05 /
    // 18.62, M = 32 17.38 / 40.52 / 49.45 / 20.19 / 15.24 -> 16.37 / 39.17 / 46.47 / 19.31 /
    // 14.17; MXFP4 W4A16 within +-1 % at M = 16, +5 % at M = 32 4096x14336 (not taken).
    // B12X_GEMM_DECODE_PIPE_KB=<n> overrides (0: the 36 KB of SM12x everywhere).
    if (wf == lin::WFmt::kNvfp4 && p.decode_half && p.decode_pipe && nt == 2) p.decode_pipe_kb = 68;
    // Per-tensor FP8 at M = 9..16 without the halves likewise (round 49, H200, us, M = 9 / 16,
    // 36 -> 68 KB): 4096x4096 9.10 / 9.85 -> 9.03 / 9.31, 6144x4096 13.32 / 12.78 -> 13.41 /
    // 12.40, 2048x7168 (2 warps per tile) 9.76 / 11.15 -> 8.80 / 10.53; with the halves it lost
    // (14336x4096 20.28 / 20.70 -> 22.97 / 23.60, 4096x14336 21.56 / 22.97 -> 22.35 / 23.05).
    if (wf == lin::WFmt::kFp8 && !p.decode_half && p.decode_pipe && nt == 2 && M <= 16)
      p.decode_pipe_kb = 68;
    if (const char* e = std::getenv("B12X_GEMM_DECODE_PIPE_KB"); e != nullptr)
      p.decode_pipe_kb = std::clamp(std::atoi(e), 0, 256);
    // The device's budgets for run (F5 of session 10's review: run reads no device info): the
    // pipelined staging at decode_pipe_kb where the opt-in holds it beside the largest ring and
    // 24 KB of static shared memory, and the 8-warp kernels' ring + staging.
    p.decode_pipe_budget = lin::kDecodePipeBudget;
    if (p.decode_pipe_kb > 0)
      p.decode_pipe_budget = std::max<int64_t>(
          p.decode_pipe_budget, std::min<int64_t>(int64_t{p.decode_pipe_kb} * 1024,
                                                  dev.smem_per_block_optin - 24 * 1024 -
                                                      4 * lin::kDecodeStagesMax * 4096));
    p.decode_ws8_budget = lin::decode_ws8_budget(dev.smem_per_block_optin);
    // FP8 weights on SM90 (no e4m3 mma.sync there: ptxas lowers each to conversions, two f16
    // HMMAs and 4 FADDs): f16 MMAs on fragments converted in the kernel. Round 48 (H200, us over
    // 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, e4m3 mma.sync -> f16):
    // per-tensor M = 1 6.61 / 16.17 / 16.38 / 8.24 / 6.10 -> 6.37 / 16.14 / 16.29 / 8.22 / 6.06,
    // M = 4 8.00 / 18.45 / 18.71 / 10.73 / 7.64 -> 7.67 / 18.40 / 18.59 / 11.09 / 7.53, M = 16
    // 10.00 / 20.98 / 23.27 / 13.05 / 13.44 -> 9.67 / 20.56 / 22.95 / 12.76 / 13.36; block FP8
    // M = 16 16.29 / 30.41 / 37.72 / 19.99 / 18.33 -> 15.08 / 28.22 / 33.73 / 18.91 / 17.70
    // (M = 1 / 4 within +-2 %); MXFP8 M = 1 / 4 / 16 1-3 % faster. wgmmas over the CTA's 64 rows
    // (a dropped probe, session 13) lost: M = 4 14336x4096 18.45 -> 23.08, M = 16 without the
    // halves 20.98 -> 30.54. SM89 / SM12x keep e4m3 mma.sync. Round 49 (same comparison, both
    // in one run): block FP8 M = 9 14.99 / 26.84 / 33.96 / 18.42 / 16.58 -> 13.88 / 25.48 / 30.22
    // / 17.11 / 15.12, M = 16 16.19 / 30.19 / 37.46 / 19.90 / 18.16 -> 15.06 / 28.50 / 33.70 /
    // 18.75 / 17.61; MXFP8 M = 4 / 9 / 16 1-3 % faster, but M = 1 (4 warps per tile, the whole K
    // quantized in every CTA's staging) 30.05 -> 34.18 at 4096x14336 and 11.14 -> 11.66 at
    // 2048x7168 (round 48 alike: 33.95); per-tensor M = 1 / 4 within +-2 % (6144x4096 M = 4
    // +2-3 % in both rounds). So f16 for runs at M >= 2 (run picks by the bound M; set below for
    // every plan, whatever its capacity); M = 1 keeps e4m3 mma.sync.
  }
  // FP8 weights: the decode kernel's MMA kind (see above) for runs at M >= 2 and at M = 1, set
  // for plans of any capacity (a capacity-8192 plan still decodes at M <= 32).
  // B12X_GEMM_DECODE_F8MMA=0|1 forces one kind for every M.
  if (lin::wtraits(wf).fp8mma) {
    // MXFP8 plans of capacity 1 too: their M = 1 runs take the block kernel (f8_block_min_m),
    // whose SM90 default is the f16 one (the decode kernel keeps decode_fp8_mma_m1, but for
    // session 28's kDiag below).
    p.decode_fp8_mma = sm90 && (M >= 2 || f8_block_min_m(wf) == 1) ? 1 : 0;
    p.decode_fp8_mma_m1 = 0;
    if (const char* e = std::getenv("B12X_GEMM_DECODE_F8MMA"); e != nullptr)
      p.decode_fp8_mma = p.decode_fp8_mma_m1 = e[0] == '1' ? 1 : 0;
    // Session 28: MXFP8 plans of capacity 1 (BF16 activations, SM90) run M = 1 on the decode
    // kernel with the slice's 8 E8M0 groups on the MMA's 8 columns (kDiag, f16 MMAs) and the
    // weight scales in the ring (kSRing) instead of the block kernel, where the decode grid has
    // no K split and a CTA quantizes at most kMxDiagMaxSlices slices of its row. H200, us over
    // 4096x4096 / 6144x4096 / 2048x7168 / 4096x14336 / 14336x4096, block kernel + reduce ->
    // kDiag (f16) -> kDiag + kSRing: round 105 9.11 / 11.63 / 9.07 / 20.74 / 18.83 -> 7.77 / 9.43
    // / 9.15 / 23.27 / 18.96 (kDiag on e4m3 MMAs 8.25 / 9.73 / 9.46 / 23.82 / 19.30); round 106
    // 8.99, 8.97 / 11.62, 11.70 / 9.11, 9.07 / 20.67, 20.78 / 18.77, 18.80 -> 7.29 / 9.22 / 8.91 /
    // 22.50 / 18.64 -> 6.80, 7.20 / 8.77, 8.76 / 12.13, 12.16 / 21.81, 21.79 / 17.74, 17.70 (the
    // rule takes the three K = 4096 shapes; 2048x7168 has a cluster split of 3, 4096x14336 56
    // slices quantized per CTA). B12X_GEMM_DECODE_MXDIAG=0 turns it off, =1 forces it on any
    // plan whose M = 1 runs take the decode kernel (B12X_GEMM_STREAM16_F8_MINM=2 for larger
    // capacities).
    const char* dg = std::getenv("B12X_GEMM_DECODE_MXDIAG");
    const bool mx_rule = sm90 && wf == lin::WFmt::kFp8Mx && M == 1 && decode_plan &&
                         caps.act_dtype == DType::kBF16 && split == 1 && slices <= kMxDiagMaxSlices;
    p.decode_mx_diag = wf == lin::WFmt::kFp8Mx && (dg != nullptr ? dg[0] == '1' : mx_rule);
    // (kDiag exists with f16 MMAs only: its M = 1 runs take them unless B12X_GEMM_DECODE_F8MMA=0.)
    if (p.decode_mx_diag && std::getenv("B12X_GEMM_DECODE_F8MMA") == nullptr)
      p.decode_fp8_mma_m1 = 1;
    // The weight scales of a slice in the ring with its values (kSRing): block FP8 plans of
    // capacity 1 on SM90 and MXFP8 with kDiag. Round 106 (block FP8, M = 1, default -> kSRing,
    // two interleaved runs each): 6.65, 6.54 / 8.55, 8.57 / 7.37, 7.55 / 19.76, 19.87 / 17.29,
    // 17.30 -> 6.60, 6.47 / 8.09, 8.04 / 6.71, 6.71 / 19.21, 19.18 / 16.65, 16.63.
    // B12X_GEMM_DECODE_SRING=0|1 overrides.
    const char* sr = std::getenv("B12X_GEMM_DECODE_SRING");
    p.decode_sring =
        wf != lin::WFmt::kFp8 &&
        (sr != nullptr ? sr[0] == '1'
                       : sm90 && M == 1 && (p.decode_mx_diag || wf == lin::WFmt::kFp8Block));
  }
  // The M = 1 stream kernel, for a run whose bound M is 1.
  bool stream_trig_m1 = false;  // the M = 1 stream kernel's grid fills >= 80 % of its slots
  bool s16_trig_early = false;  // the FP4 block kernel's grid fills < 80 % of its slots
  if (M >= 1 && p.regime != Regime::kTiled) {
    const int64_t sms = std::max(dev.sm_count, 1);
    // M = 1 streaming kernel (session 11, lin::launch_linear_stream): NVFP4 weights with BF16
    // MMAs whose activations reach the kernel as BF16 (raw, or the pre-pass of W4A4), the staged
    // K within the budget. Parts per tile: the fewest vectors per warp over the persistent grid
    // (SMs x CTAs per SM), ties to fewer parts. Default (round 42, H200, M = 1, us over 4096x4096
    // / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, decode kernel -> stream kernel with
    // registers for 2 / 3 CTAs per SM): W4A16 6.33 / 15.64 / 13.82 / 8.18 / 5.14 -> 6.08 / 13.53
    // / 12.94 / 8.42 / 5.95 (2) and 5.84 / 14.09 / 12.93 / 7.59 / 6.11 (3); W4A4 7.39 / 16.96 /
    // 15.20 / 9.19 / 7.37 -> 6.71 / 14.16 / 13.98 / 9.11 / 6.60 (2). So W4A16 where the 16-row
    // tiles outnumber the SMs (2048x7168 keeps the decode kernel's 8 warps per tile), with the
    // 3-CTA registers where that grid gives each CTA one tile group (else 2: 14336x4096), and
    // W4A4 everywhere with 2. Session 12: prepared by every plan whose runs can take the decode
    // regime at M = 1 (any capacity: vLLM sizes its plans for many tokens), and launched by run
    // when the bound M is 1 (host metadata, fixed per binding: graph-safe). Where the capacity
    // is above 1 the plan's decode choices (split, warps per tile) are the capacity's, which at
    // M = 1 would run one warp per tile: the stream kernel wins there on every shape, 2048x7168
    // included (W4A16 capacity 1 keeps the 8-warp decode kernel there).
    // B12X_GEMM_DECODE_STREAM=0|1, B12X_GEMM_STREAM_OCC=2|3, B12X_GEMM_STREAM_PARTS=1|2|4|8 and
    // B12X_GEMM_STREAM_CTAS=<per SM> override (session 21: a forced grid without a compiled
    // variant runs the variant-free kernel, see below).
    const char* se = std::getenv("B12X_GEMM_DECODE_STREAM");
    const bool w4a16 = format_raw_activations(f);
    // MXFP4 weights (session 14; E8M0 splats, shuffled): default for MXFP4 W4A4 (its pre-pass's
    // BF16), round 53 us over the five shapes, decode kernel -> stream kernel: 6.92 / 15.93 /
    // 18.39 / 9.28 / 7.08 -> 6.79 / 15.16 / 14.88 / 9.57 / 6.74 (6.75 / 15.15 / 14.97 / 9.65 /
    // 6.80 in a second run). W4A16 was a wash (6.69 / 14.87 / 13.57 / 8.40 / 5.09 -> 6.16 /
    // 14.63 / 14.27 / 8.20 / 5.10: the extra HFMA2 per register of the 2^119 fold costs where
    // the decode kernel is strong), so it stays on the decode kernel. B12X_GEMM_STREAM_MX=0
    // turns it off (session 21 removed =1, the stream kernel for every MXFP4 format and weight:
    // the fold's variant-free instances are gone).
    const char* emx = std::getenv("B12X_GEMM_STREAM_MX");
    // Session 15: MXFP4 W4A16 on the stream kernel where the bound weight takes the fold-free
    // splats (run checks it; the other weights keep the decode kernel).
    const bool mx_w4a16_free = f == LinearFormat::kMxfp4W4A16 && kStreamMxW4a16Free;
    const bool mx_ok = wf == lin::WFmt::kMxfp4 && !(emx != nullptr && emx[0] == '0') &&
                       (f == LinearFormat::kMxfp4 || mx_w4a16_free);
    const bool stream_ok =
        (wf == lin::WFmt::kNvfp4 || mx_ok) && !fp16 && stream_bf16_act && split_env == nullptr;
    // Session 16: NVFP4 W4A16 with 0.9-1 row tiles per SM (2048x7168: 128 tiles on 132 SMs) takes
    // the stream kernel at the 2-CTA cap with the early trigger (one CTA per SM; the next call's
    // CTAs take the second slots) instead of the decode kernel's 8 warps per tile: rounds 60 / 61
    // (three runs) 4.81 / 4.79 / 4.79 us vs 5.00 / 5.03 / 5.05; without the trigger 5.40.
    const bool tile_per_sm = w4a16 &&
                             (wf == lin::WFmt::kNvfp4 || (kStreamMxTilePerSm && mx_w4a16_free)) &&
                             geo.n16 <= sms && geo.n16 * 10 >= sms * 9;
    const bool stream_want =
        se != nullptr ? se[0] == '1' : (!w4a16 || geo.n16 > sms || M > 1 || tile_per_sm);
    if (stream_ok && stream_want) {
      // Session 29 probe (lin::kStreamVarClaim): B12X_GEMM_STREAM_CLAIM=1 runs the 8-part 2-CTA
      // blocks on every slot with the dynamic group claim, =<n> (> 1) on n CTAs, where the grid
      // has more than three groups per CTA and parts of at least 8 vectors.
      const char* ecl = std::getenv("B12X_GEMM_STREAM_CLAIM");
      const int claim_ctas = ecl != nullptr ? std::max(std::atoi(ecl), 0) : 0;
      const int force_parts = claim_ctas > 0 ? 8 : stream_force_parts, per_sm = stream_per_sm;
      int force_occ = claim_ctas > 0 ? 2 : 0;
      if (const char* e = std::getenv("B12X_GEMM_STREAM_OCC"); e != nullptr && claim_ctas == 0)
        force_occ = std::atoi(e);
      // Scale splats one k16 step per lane, exchanged by shuffles (session 14): round 52, us
      // over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168 (two runs each, the
      // second in brackets), W4A16 5.59 / 13.28 / 12.96 / 7.59 / 5.17 (5.59 / 13.21 / 12.99 /
      // 7.64 / 5.18) -> 5.47 / 12.23 / 12.16 / 7.24 / 5.15 (5.43 / 12.25 / 12.22 / 7.25 /
      // 5.15), W4A4 6.51 / 13.93 / 13.75 / 9.05 / 6.56 -> 6.18 / 12.87 / 12.82 / 8.47 / 6.53.
      // The only form since session 21 (the per-lane instances and B12X_GEMM_STREAM_SHFL removed).
      constexpr bool shfl = true;
      struct Choice {
        int parts = 0, ctas = 0;
        int64_t cost = -1, groups = 0, slots = 0;
      };
      auto choose = [&](int occ) {
        Choice c;
        for (int parts : {1, 2, 4, 8}) {
          if (force_parts > 0 && parts != force_parts) continue;
          if (!lin::stream_kernel_available(wf, fp16, parts, occ, 1)) continue;
          const int64_t smem = lin::stream_smem_bytes(geo.kvec, parts);
          if (smem > lin::kStreamSmemBudget) continue;
          const int fit = lin::prepare_linear_stream(caps.device, wf, parts, occ, smem, 1);
          if (fit <= 0) continue;
          const int64_t slots = sms * (per_sm > 0 ? std::min(per_sm, fit) : fit);
          const int64_t groups = (geo.n16 + 8 / parts - 1) / (8 / parts);
          const int64_t grid = std::min(groups, slots);
          const int64_t cost =
              (groups + grid - 1) / grid * lin::stream_vectors_per_part(geo.kvec, parts);
          if (c.cost < 0 || cost < c.cost)
            c = Choice{parts, static_cast<int>(grid), cost, groups, slots};
        }
        return c;
      };
      // The per-warp blocks' choices (session 19 / 20, below), read here: W4A4's occupancy rule
      // depends on them.
      const char* ej = std::getenv("B12X_GEMM_STREAM_JIT");
      const char* eqx = std::getenv("B12X_GEMM_STREAM_QX");
      constexpr bool qcvt = kStreamQcvt;
      const bool lean3 = ej != nullptr ? ej[0] == '4' : kStreamJitLean3;
      int occ = force_occ == 2 || force_occ == 3 ? force_occ : w4a16 && !tile_per_sm ? 3 : 2;
      Choice c = choose(occ);
      // W4A4 (session 20): the 3-CTA grid with the lean blocks where it gives every CTA one group
      // of 8 parts and fills >= 80 % of the slots (6144x4096).
      if (force_occ == 0 && occ == 2 && (f == LinearFormat::kNvfp4 || f == LinearFormat::kMxfp4) &&
          shfl && qcvt && lean3 && ej == nullptr) {
        const Choice c3 = choose(3);
        if (c3.cost >= 0 && c3.parts == 8 && c3.groups <= c3.ctas && c3.ctas * 10 >= c3.slots * 8)
          c = c3, occ = 3;
      }
      if (force_occ == 0 && occ == 3 && (c.cost < 0 || c.groups > c.ctas)) c = choose(occ = 2);
      // Session 16: where the 3-CTA grid fills < 80 % of its slots (no early trigger, below) and
      // the 2-CTA grid fills >= 80 % at no more vectors per warp, the 2-CTA registers with the
      // trigger. Round 59, W4A16 (B12X_GEMM_STREAM_OCC=2, two runs): 4096x4096 5.48 / 5.30 ->
      // 4.76 / 4.75 us, 4096x14336 11.81 / 11.60 -> 10.94 / 10.72 (256 tiles: 65 % of 396
      // slots, 97 % of 264); 6144x4096 (97 % at 3 CTAs) keeps them (7.57 with 2).
      // B12X_GEMM_STREAM_OCC=3 keeps the 3-CTA registers.
      if (force_occ == 0 && occ == 3 && c.cost >= 0 && c.ctas * 10 < c.slots * 8) {
        const Choice c2 = choose(2);
        if (c2.cost >= 0 && c2.cost <= c.cost && c2.ctas * 10 >= c2.slots * 8) c = c2, occ = 2;
      }
      if (claim_ctas > 1 && c.cost >= 0)
        c.ctas = static_cast<int>(std::min<int64_t>({claim_ctas, c.slots, c.groups}));
      if (c.cost >= 0) {
        p.decode_stream_parts = c.parts;
        p.decode_stream_occ = occ;
        p.decode_stream_shfl = shfl;
        p.decode_stream_ctas = c.ctas;
        p.decode_stream_vp = lin::stream_vectors_per_part(geo.kvec, c.parts);
        p.decode_stream_smem = lin::stream_smem_bytes(geo.kvec, c.parts);
        // W4A4 (session 16): the NVFP4 activations converted in the kernel's staging instead of
        // the pre-pass launch before it, where K <= 8192 (each CTA converts the whole K). Round
        // 60, M = 1 us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, pre-pass
        // -> in-kernel: 6.33 / 12.51 / 12.39 / 8.24 / 6.30 (8.24 / 6.30 from round 59) -> 5.32 /
        // 11.48 / 12.97 / 7.80 / 6.10. B12X_GEMM_STREAM_QX=0|1 overrides. At the 2-CTA cap with
        // fewer than 8 parts only (session 21: the 3-CTA staging's instances were reached by
        // B12X_GEMM_STREAM_OCC=3 alone; 8 parts take the blocks).
        if (f == LinearFormat::kNvfp4 && (eqx != nullptr ? eqx[0] == '1' : geo.KP <= kStreamQxMaxK))
          p.decode_stream_var = 8;
        // Session 19 (kStreamJit): per-warp activation blocks instead of the CTA's staging of
        // the whole K where each warp owns its K part, at the 2-CTA cap.
        // Session 20: at the 3-CTA cap with 8 parts and one group per CTA with kLean's
        // registers (bit 64; kStreamJitLean3), and for MXFP4 W4A4 at any parts with its
        // activations converted in the kernel (kStreamQcvt: bits 8 | 32, also NVFP4 W4A4's).
        // B12X_GEMM_STREAM_JIT=4 forces them at the 3-CTA cap with 8 parts. (Session 21
        // removed =0 / =1, the CTA's staging at 8 parts / the blocks at 1..4 parts: concluded
        // in rounds 73-76, their instances reached by the knobs alone.)
        const bool jit3 =
            occ == 3 && c.parts == 8 &&
            (ej != nullptr ? ej[0] == '4'
                           : kStreamJitLean3 && c.groups <= c.ctas && c.ctas * 10 >= c.slots * 8);
        const bool mx_qcvt = qcvt && f == LinearFormat::kMxfp4 && (occ == 2 || jit3);
        if (kStreamJit && ((occ == 2 && c.parts == 8) || jit3 || mx_qcvt)) {
          p.decode_stream_var |= 128;
          if (qcvt && (f == LinearFormat::kNvfp4 || mx_qcvt)) p.decode_stream_var |= 8 | 32;
          p.decode_stream_smem = lin::kStreamJitBytes;
          if (jit3 && lean3) p.decode_stream_var |= 64;  // kLean
        }
        // Session 24 (kStreamQs): W4A4 on the CTA's staging with kQf's conversion (var 40) where
        // the plan has NVFP4's scalar one (var 8) or MXFP4's blocks at fewer than 8 parts (168).
        // SM90 (cc 9.0) only: the evidence is the H200's (review s24; on SM12x MXFP4's K-sized
        // staging replaces 4 KB of blocks). B12X_GEMM_STREAM_QS=0|1 overrides on any device.
        if (const char* eqs = std::getenv("B12X_GEMM_STREAM_QS");
            (eqs != nullptr ? eqs[0] == '1' : kStreamQs && sm90) && occ == 2 && c.parts < 8 &&
            (p.decode_stream_var == 8 || p.decode_stream_var == 168) &&
            lin::stream_smem_bytes(geo.kvec, c.parts) <= lin::kStreamSmemBudget &&
            lin::stream_qs_available(c.parts, occ)) {
          p.decode_stream_var = 40;
          p.decode_stream_smem = lin::stream_smem_bytes(geo.kvec, c.parts);
        }
        if (occ == 3 && !jit3) {
          p.decode_stream_var = 0;  // the CTA's staging (W4A4: after the pre-pass)
          p.decode_stream_smem = lin::stream_smem_bytes(geo.kvec, c.parts);
        }
        // Session 26 (kStreamLateRule, SM90): the ring's requests after each slot's decode
        // (lin::kStreamVarLate: no register copy of the slot) where round 98 measured it faster
        // at M = 1 (two interleaved samples, us): the 8-part blocks with more CTAs than SMs for
        // NVFP4 W4A4 (4096x4096 4.63 / 4.62 -> 4.45 / 4.47, 4096x14336 10.75 / 10.84 -> 10.47 /
        // 10.45), MXFP4 W4A16 (4.25 / 4.23 -> 4.14 / 4.14, 9.99 / 10.01 -> 9.65 / 9.64) and NVFP4
        // W4A16 where each warp has >= 16 vectors (4096x14336 9.96 / 9.98 -> 9.74 / 9.80; 4096x4096
        // even); MXFP4's kLean 3-CTA blocks (6144x4096 W4A16 5.75 / 5.71 -> 5.52 / 5.50, W4A4 6.15
        // / 6.13 -> 6.05 / 6.04); MXFP4 W4A4's 2-part staging (14336x4096 11.19 / 11.16 -> 10.98 /
        // 11.02). It lost on one CTA per SM (2048x7168 +0.1-0.8 us), NVFP4's 2-part staging
        // (14336x4096 W4A16 +0.27) and MXFP4 W4A4's 8-part blocks (4096x14336 +0.06).
        // B12X_GEMM_STREAM_LATE=0|1 overrides (=1: wherever an instance exists).
        {
          const bool w4a4 = !w4a16;
          const bool mx = wf == lin::WFmt::kMxfp4;
          const bool blocks2 = occ == 2 && c.parts == 8 && c.ctas > sms;
          const bool rule = kStreamLateRule && sm90 &&
                            ((blocks2 && (mx ? w4a16 : (w4a4 || p.decode_stream_vp >= 16))) ||
                             (mx && occ == 3 && c.parts == 8) ||
                             (mx && w4a4 && occ == 2 && c.parts == 2 && p.decode_stream_var == 40));
          const char* e = std::getenv("B12X_GEMM_STREAM_LATE");
          if ((e != nullptr ? e[0] == '1' : rule) &&
              lin::stream_late_available(wf, c.parts, occ, p.decode_stream_var))
            p.decode_stream_var |= lin::kStreamVarLate;
        }
        // Session 27 (kStreamHalfRule, SM90; lin::kStreamVarHalf): on the 8-part 2-CTA blocks
        // (W4A16 128 / W4A4 168, not late) K parts of ceil(kvec / 8) rounded to 2 vectors instead
        // of 4, where that is fewer (ceil(kvec / 8) = 1 or 2 mod 4), by default where the grid has
        // more CTAs than SMs, one group each, and parts of at most 12 vectors. Rounds 101 / 102
        // (H200, M = 1, us, two interleaved samples, default -> HALF): 4096x3072 (256 CTAs, vp 8 ->
        // 6) NVFP4 W4A16 4.10 / 4.10 -> 3.93 / 3.94, MXFP4 W4A4 4.30 / 4.29 -> 4.21 / 4.18;
        // 2560x5120 (160 CTAs, 12 -> 10) MXFP4 W4A4 5.88 / 5.84 -> 5.81 / 5.80. Round 103 (the
        // rule -> HALF=0): 4096x3072 3.92 / 3.91 -> 4.09 / 4.08, 4.22 / 4.22 -> 4.31 / 4.30;
        // 4096x5120 (12 -> 10) NVFP4 W4A16 5.16 / 5.17 -> 5.31 / 5.29, MXFP4 W4A4 5.44 / 5.45 ->
        // 5.49 / 5.49; 2560x5120 5.79 / 5.78 -> 5.86 / 5.84; but 4096x7168 (16 -> 14) MXFP4 W4A4
        // 6.76 / 6.76 -> 6.72 / 6.69 (hence vp <= 12). One CTA per SM lost (2048x7168, 128 CTAs,
        // 7 parts of 16 vectors and an empty 8th -> 8 of 14: +1.5-5.5 % for all four formats;
        // Nsight Compute SM active cycles 7580 -> 8766 at 5 % fewer instructions).
        // B12X_GEMM_STREAM_HALF=0|1 overrides (=1: wherever an instance exists).
        if (const char* e = std::getenv("B12X_GEMM_STREAM_HALF");
            (e != nullptr ? e[0] == '1'
                          : kStreamHalfRule && sm90 && c.ctas > sms && c.groups <= c.ctas &&
                                p.decode_stream_vp <= 12) &&
            occ == 2 && c.parts == 8) {
          const int64_t per = (geo.kvec + 7) / 8;
          const int vp2 = static_cast<int>((per + 1) / 2 * 2);
          const int base = p.decode_stream_var;
          if (vp2 < p.decode_stream_vp && (base == 128 || base == 168) &&
              lin::stream_half_available(wf, c.parts, occ, base, true)) {
            p.decode_stream_var |= lin::kStreamVarHalf;
            p.decode_stream_vp = vp2;
          }
        }
        // Session 28 (kStreamRfRule, SM90; lin::kStreamVarRf): on the per-warp blocks without the
        // late requests or HALF, each block's next ring requests before its activation store,
        // where round 106 measured it faster (H200, M = 1, two interleaved samples, us): NVFP4
        // W4A16 on the 8-part 2-CTA blocks (var 128: 4096x4096 4.26 / 4.26 -> 4.22 / 4.21,
        // 2048x7168 4.52 / 4.52 -> 4.44 / 4.48) and kLean's 3-CTA blocks (192: 6144x4096 5.88 /
        // 5.91 -> 5.80 / 5.86), NVFP4 W4A4 on kLean's (232: 6144x4096 6.45 / 6.43 -> 6.31 / 6.36).
        // It lost for NVFP4 W4A4's 168 (2048x7168 4.57 / 4.56 -> 4.80 / 4.81) and MXFP4 W4A4's
        // 168 (4096x4096 +1.2 %, 4096x14336 +1.4 %, 2048x7168 4.38 / 4.39 -> 4.66 / 4.65) and tied
        // for MXFP4 W4A16 (2048x7168 4.48 / 4.46 -> 4.49 / 4.46). B12X_GEMM_STREAM_RF=0|1
        // overrides (=1: wherever an instance exists).
        if (const char* e = std::getenv("B12X_GEMM_STREAM_RF");
            (e != nullptr ? e[0] == '1'
                          : kStreamRfRule && sm90 &&
                                (p.decode_stream_var == (w4a16 ? 128 : 232) ||
                                 (w4a16 && p.decode_stream_var == 192))) &&
            c.parts == 8 && lin::stream_rf_available(wf, c.parts, occ, p.decode_stream_var))
          p.decode_stream_var |= lin::kStreamVarRf;
        // B12X_GEMM_STREAM_CLAIM_ST=1: W4A16 on the CTA's staging of the whole K (var 0).
        if (const char* e = std::getenv("B12X_GEMM_STREAM_CLAIM_ST");
            claim_ctas > 0 && w4a16 && e != nullptr && e[0] == '1' &&
            lin::stream_claim_available(wf, c.parts, occ, 0)) {
          p.decode_stream_var = 0;
          p.decode_stream_smem = lin::stream_smem_bytes(geo.kvec, c.parts);
        }
        if (claim_ctas > 0 && occ == 2 && c.parts == 8 && c.groups > 3 * int64_t{c.ctas} &&
            c.groups + c.ctas < (1 << 20) &&
            p.decode_stream_vp >= 8 &&  // two ring blocks per group (kClaim)
            lin::stream_claim_available(wf, c.parts, occ, p.decode_stream_var))
          p.decode_stream_var |= lin::kStreamVarClaim;
        // MXFP4's variant-free instances take fold-free weights only (session 21 removed the
        // fold's, reached by knobs alone): such a plan runs other weights on the decode kernel,
        // as MXFP4 W4A16 (whose variants are fold-free only) does every weight since session 15.
        p.decode_stream_free_only =
            mx_w4a16_free || (wf == lin::WFmt::kMxfp4 && !(p.decode_stream_var & (128 | 32)));
        // Session 24: also a 2-CTA grid of one CTA per SM on >= 90 % of the SMs (W4A4 at
        // 2048x7168: 128 CTAs of 8 parts, the grid of W4A16's tile_per_sm rule, which had the
        // trigger; the next call's early CTAs take the free second slots evenly). Round 90 (two
        // interleaved samples, off -> on): NVFP4 W4A4 4.92 / 4.92 -> 4.53 / 4.53 us, MXFP4 W4A4
        // 5.38 / 5.36 -> 4.84 / 4.83.
        const bool one_per_sm = occ == 2 && c.ctas <= sms && c.ctas * 10 >= sms * 9;
        stream_trig_m1 = c.ctas * 10 >= c.slots * 8 || (tile_per_sm && occ == 2) ||
                         (kStreamTrigOnePerSm && one_per_sm);
      }
    }
  }
  // The stream kernel with 4 token rows for runs at M = 2..4 (session 12; the decoded weight
  // fragments of a 16-row tile feed one n8 token tile, lanes g and g + 4 on the same token): K
  // parts and a K split over CTAs (each stages 4 rows x its K range of BF16 activations within
  // kStreamRowsSmemBudget) minimizing the vectors each warp streams over the persistent grid,
  // ties to the smaller split and fewer parts. Every CTA stages its rows once, so the kernel pays
  // where each CTA streams several tiles over that staging. Round 45 (H200, us over 4096x4096 /
  // 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, decode kernel -> stream kernel; tiles per
  // CTA 1 / 4 / 2 / 2 / 1): M = 4 NVFP4 W4A16 8.59 / 19.32 / 22.85 / 12.33 / 9.25 -> 9.05 / 16.41
  // / 19.46 / 11.39 / 9.90, W4A4 11.87 / 21.72 / 26.27 / 15.05 / 12.53 -> 10.01 / 17.42 / 20.77 /
  // 12.26 / 15.21 (its pre-pass with PDL). Dropped (round 45, removed): 8 staged rows at M = 4
  // (W4A16 12.24 / 19.40 / 22.27 / 14.43 / 13.30), 8 / 16 rows at M = 5..16 (M = 8 W4A16 9.74 /
  // 18.21 / 22.25 / 13.54 / 11.80 -> 12.54 / 19.67 / 22.55 / 14.69 / 13.74, M = 16 10.62 / 21.17
  // / 22.93 / 16.03 / 10.20 -> 14.81 / 26.02 / 27.82 / 17.54 / 14.35; 16-warp CTAs one per SM
  // with 200 KB staging 12.99 / 21.08 / 29.18 / 15.54 at M = 16). Default: the grid capped so that
  // every CTA streams at least kStreamRowsMinTiles tiles, taken where that grid still has ~0.9 x
  // SMs CTAs. Round 46 (M = 2 / 3 / 4, decode kernel -> stream kernel): W4A16 14336x4096 18.63 /
  // 19.18 / 19.14 -> 16.24 / 16.34 / 16.41, 4096x14336 18.53 / 22.09 / 22.81 -> 18.88 / 19.17 /
  // 19.33, 6144x4096 11.83 / 12.40 / 12.30 -> 11.19 / 11.26 / 11.34; W4A4 20.48 / 21.00 / 21.58
  // -> 17.13 / 17.22 / 17.52, 23.45 / 24.78 / 26.22 -> 20.10 / 20.33 / 20.56, 14.65 / 14.66 /
  // 15.04 -> 12.11 / 12.16 / 12.36; capped to 2 tiles per CTA (M = 2 / 4): 4096x4096 (128 CTAs)
  // W4A16 8.13 / 8.50 -> 7.73 / 7.87, W4A4 11.48 / 11.86 -> 8.67 / 11.90; 2048x7168 (64 CTAs:
  // not taken) W4A16 8.66 / 9.21 -> 11.23 / 11.32, W4A4 11.82 / 12.52 -> 12.17 / 12.36; a cap of
  // 4 tiles slower everywhere. B12X_GEMM_STREAM_ROWS=0|1 turns it off / forces it,
  // B12X_GEMM_STREAM_MIN_TILES=<n> sets the cap and the rule's tiles per CTA (0: none);
  // B12X_GEMM_STREAM_PARTS / _CTAS force this kernel's parts / CTAs per SM as they do the M = 1
  // stream kernel's (one knob for both: plans of capacity > 1 prepare both).
  if (M >= 2 && p.regime != Regime::kTiled) {
    const int64_t sms = std::max(dev.sm_count, 1);
    const char* re = std::getenv("B12X_GEMM_STREAM_ROWS");
    const bool ok = wf == lin::WFmt::kNvfp4 && !fp16 && stream_bf16_act && split_env == nullptr &&
                    !(re != nullptr && re[0] == '0');
    const bool by_rule = re == nullptr;
    const int force_parts = stream_force_parts, per_sm = stream_per_sm;
    int force_split = 0;
    int min_tiles = static_cast<int>(kStreamRowsMinTiles);
    if (const char* e = std::getenv("B12X_GEMM_STREAM_MIN_TILES"); e != nullptr)
      min_tiles = std::max(0, std::atoi(e));
    if (const char* e = std::getenv("B12X_GEMM_STREAM_SPLIT"); e != nullptr)
      force_split = std::atoi(e);
    const char* pe = std::getenv("B12X_GEMM_STREAM_PREPASS_PDL");
    p.stream_rows_pdl = !(pe != nullptr && pe[0] == '0');
    // The shuffled splats (default since round 53): W4A16 M = 2 / 4 9.10 / 9.27, 16.22 / 16.40,
    // 18.99 / 19.43, 11.15 / 11.37 -> 8.72 / 8.82, 15.12 / 15.27, 17.95 / 18.39, 10.66 / 10.84
    // us (4096x4096, 14336x4096, 4096x14336, 6144x4096; W4A4 17.09 -> 16.06 at 14336x4096 M = 2);
    // the only form since session 21 (the per-lane instances and B12X_GEMM_STREAM_ROWS_SHFL
    // removed).
    constexpr bool rshfl = true;
    constexpr int kRows = 4;
    constexpr int64_t kWarps = 8;
    int64_t best = -1;
    for (int parts : {1, 2, 4, 8}) {
      if (!ok) break;
      if (force_parts > 0 && parts != force_parts) continue;
      if (!lin::stream_kernel_available(wf, fp16, parts, 2, kRows)) continue;
      const int64_t groups = (geo.n16 + kWarps / parts - 1) / (kWarps / parts);
      for (int sp = 1; sp <= 64; ++sp) {
        if (force_split > 0 && sp != force_split) continue;
        const int vp = lin::stream_vectors_per_part(geo.kvec, parts, sp);
        if (force_split == 0 && sp > 1 && int64_t{sp - 1} * parts * vp >= geo.kvec)
          break;  // an idle K range
        const int64_t smem = lin::stream_smem_bytes(geo.kvec, parts, kRows, sp);
        if (smem > lin::kStreamRowsSmemBudget) continue;
        const int fit = lin::prepare_linear_stream(caps.device, wf, parts, 2, smem, kRows);
        if (fit <= 0) continue;
        const int64_t slots = sms * (per_sm > 0 ? std::min(per_sm, fit) : fit);
        int64_t gx = std::min(groups, std::max<int64_t>(1, slots / sp));
        if (min_tiles > 0)
          gx = std::min(gx, std::max<int64_t>(1, groups * (kWarps / parts) / min_tiles));
        const int64_t cost = (groups + gx - 1) / gx * vp;
        if (best < 0 || cost < best) {
          best = cost;
          p.stream_rows_parts = parts;
          p.stream_rows_split = sp;
          p.stream_rows_ctas = static_cast<int>(gx);
          p.stream_rows_vp = vp;
          p.stream_rows_smem = smem;
          p.stream_rows_shfl = rshfl;
        }
        break;  // the smallest split that fits
      }
    }
    if (by_rule && p.stream_rows_parts > 0) {
      const int64_t tiles = kWarps / p.stream_rows_parts;  // per group
      const int64_t groups = (geo.n16 + tiles - 1) / tiles;
      const int64_t gx = p.stream_rows_ctas;
      if ((groups + gx - 1) / gx * tiles < min_tiles || gx * p.stream_rows_split * 10 < 9 * sms)
        p.stream_rows_parts = 0;
    }
  }
  // The M = 5..16 block kernel (session 13, lin::launch_linear_stream16): CTAs of 8 warps x tw
  // 16-row tiles over one K range, activations staged in 256-K chunks behind the weight ring, so
  // a CTA reads 64 / (128 tw) of its weight bytes in activations from L2; the K split (fp32
  // partials + the reduce kernel) fills the SMs. Default for NVFP4 / MXFP4 weights on BF16
  // activations (raw, or the pre-pass's) at M = 5..16: 2 tiles per warp, scale splats built per
  // CTA, the largest split whose grid is one wave (<= SMs x CTAs per SM) with >= kS16MinVp
  // vectors per CTA. Round 48 (H200, us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 /
  // 2048x7168, M = 16, NVFP4 W4A16; decode kernel 10.63 / 21.23 / 22.84 / 16.10 / 10.22): tw 2
  // with splats per CTA 8.76 / 19.15 / 18.17 / 11.91 / 9.23 (per lane 9.08 / 19.08 / 18.96 /
  // 12.34 / 9.36), tw 1 8.67 / - / 19.11 / 11.18 / 8.92, tw 4 9.44 / 19.35 / 18.75 / 12.35 /
  // 9.66; 4096x4096 / 2048x7168 with 1 chunk per CTA (S 16 / 28) 8.76 / 9.23 against 2 (S 8 /
  // 14, 128 / 112 CTAs) 8.47 / 8.91; many waves of 1-chunk CTAs (S 16 at 14336x4096: 14.7 MB of
  // partials) 24.7. NVFP4 W4A4 M = 16 14.48 / 25.21 / 27.20 / 19.74 / 12.61 -> 10.40 / 20.42 /
  // 20.16 / 13.41 / 10.85, W4A16 M = 8 10.06 / 18.52 / 21.76 / 13.57 / 11.86 -> 7.54 / 16.25 /
  // 15.94 / 10.11 / 8.29, M = 5 8.75 / 17.05 / 19.83 / 12.62 / 11.11 -> 7.66 / 16.15 / 16.58 /
  // 9.90 / 8.14 (per lane splats), MXFP4 W4A16 M = 16 11.99 / 22.98 / 26.70 / 17.17 / 10.86 ->
  // 9.38 / 20.21 / 20.64 / 12.82 / 9.44 (per-lane splats and tw 4 since removed).
  // B12X_GEMM_STREAM16=0|1 turns it off / forces it,
  // B12X_GEMM_STREAM16_SPLIT=<n>, B12X_GEMM_STREAM16_CTAS=<per SM> (the slots the split fills)
  // and B12X_GEMM_STREAM16_QX=0|1 override. W4A4 NVFP4 converts its activations in the kernel
  // (no pre-pass launch at these M) where the FP4 weight is at most kS16QxMaxBytes: round 49, us
  // over the five shapes, pre-pass -> in the kernel, M = 16 12.27 / 19.96 / 19.81 / 13.51 / 12.36
  // -> 8.76 / 20.24 / 20.85 / 13.11 / 9.34, M = 8 10.81 / 17.73 / 17.77 / 11.75 / 11.21 -> 8.42 /
  // 18.40 / 19.04 / 12.22 / 9.12 (the pre-pass's fixed ~3 us against the conversion's ALU work).
  // Dropped (round 49, removed): fewer tiles per CTA to fill each split's share of the slots
  // (W4A16 M = 16 8.39 / 18.40 / 18.11 / 12.04 / 8.43 -> 10.89 / 18.91 / 18.34 / 11.79 / 11.13);
  // the block kernel at M = 1 (7.29 / 14.74 / 15.48 / 9.89 / 7.90 against the M = 1 stream
  // kernel's 5.61 / 13.23 / 13.02 / 7.60 / 5.16). 1 tile per warp (B12X_GEMM_STREAM16_TW=1)
  // measured 8.44 / 19.62 / 18.83 / 11.25 / 8.80 (faster at 6144x4096 only; its instances and
  // the knob's FP4 branch removed in session 21: B12X_GEMM_STREAM16_TW sets the FP8 kernel's only).
  // FP8 weights from M = f8_block_min_m (per-tensor at one tile per warp on a small grid from 9),
  // capacities below 5 included; probe B12X_GEMM_STREAM16_F8_MINM=<1..16> (session 15) sets the run
  // M it starts at.
  int f8_min_m = 0;
  if (const char* e = std::getenv("B12X_GEMM_STREAM16_F8_MINM"); e != nullptr)
    f8_min_m = std::clamp(std::atoi(e), 1, 16);
  // Session 17: block FP8 from M = 2 where K >= 3 N (the block kernel's deep K splits): round 56,
  // 4096x14336 M = 2, decode kernel -> block kernel 23.48 -> 20.63 us (round 65: the decode
  // kernel's M = 2 23.23 on 4 warps per tile, 23.47 on one; the block kernel's M = 3 19.55).
  const bool f8_block_deep_k = wf == lin::WFmt::kFp8Block && geo.K >= 3 * geo.N;
  // (Session 28: MXFP8 plans of capacity 1 with kDiag keep their M = 1 run on the decode kernel.)
  const int64_t f8_cap_min = f8_min_m > 0 ? f8_min_m
                             : p.decode_mx_diag && M == 1
                                 ? 2
                                 : f8_block_min_m(wf) - (f8_block_deep_k ? 1 : 0);
  // Session 21: NVFP4 W4A4, MXFP4 W4A4 and MXFP4 W4A16 from M = 2 (before: the 4-row stream
  // kernel, NVFP4 only, or the decode kernel, both on the pre-pass's BF16 for W4A4); NVFP4 W4A16
  // keeps the 4-row kernel (round 78, block kernel at M = 2: 7.56 / 15.01 / 15.61 / 9.38 / 8.41
  // against 6.85 / 14.34 / 17.70 / 10.07 / 8.54, +5-10 % at the two K = 4096 shapes with many row
  // groups). Round 79, us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168,
  // before -> block kernel: MXFP4 W4A4 M = 2 9.97 / 19.45 / 21.00 / 13.51 / 11.02 -> 7.89 / 15.43
  // / 16.30 / 9.83 / 8.56, M = 4 11.12 / 19.68 / 24.18 / 13.90 / 11.90 -> 9.45 / 15.40 / 16.27 /
  // 9.82 / 8.65; MXFP4 W4A16 M = 2 7.54 / 16.46 / 16.83 / 11.09 / 8.21 -> 7.15 / 14.74 / 15.64 /
  // 9.31 / 7.84, M = 4 7.90 / 16.71 / 21.15 / 11.59 / 8.88 -> 7.09 / 14.66 / 15.75 / 9.23 / 7.77;
  // NVFP4 W4A4 M = 2 8.22 / 15.73 / 19.06 / 11.43 / 11.80 -> 8.26 / 14.98 / 15.86 / 10.22 / 8.87,
  // M = 4 11.17 / 15.84 / 19.43 / 11.69 / 12.43 -> 8.58 / 15.19 / 16.03 / 10.31 / 8.89 (with its
  // in-kernel conversion where the plan takes it; through the pre-pass 7.88 / 15.21 / 15.84 /
  // 10.22 / 8.49 at M = 2). B12X_GEMM_STREAM_ROWS=1 (the 4-row kernel forced) keeps 5.
  // Session 23: NVFP4 W4A16 from M = 2 as well (with session 22's triggers the block kernel wins
  // on every shape). Round 86 (two interleaved passes, 4-row kernel -> block kernel): M = 2 6.85
  // / 14.41 / 17.24 / 10.09 / 8.55 -> 6.63 / 13.78 / 14.57 / 8.22 / 7.18 (again 6.89 / 14.37 /
  // 17.29 / 10.10 / 8.55 -> 6.56 / 13.75 / 14.56 / 8.39 / 7.15), M = 3 6.96 / 14.52 / 17.47 / 10.20
  // / 8.89 -> 6.54 / 13.61 / 14.61 / 8.44 / 7.14, M = 4 7.03 / 14.54 / 17.67 / 10.30 / 9.22 ->
  // 6.52 / 13.68 / 14.66 / 8.42 / 7.10 (the 4-row kernel split K only at 4096x14336: M = 4 was
  // slower there and at 2048x7168 than M = 16 on the block kernel).
  // (Measured on the H200 only: SM90 only; elsewhere NVFP4 W4A16 keeps the 4-row kernel.)
  const bool s16_low = f == LinearFormat::kMxfp4 || f == LinearFormat::kMxfp4W4A16 ||
                       f == LinearFormat::kNvfp4 || (f == LinearFormat::kNvfp4W4A16 && sm90);
  const char* erows = std::getenv("B12X_GEMM_STREAM_ROWS");
  int64_t s16_min = s16_low && !(erows != nullptr && erows[0] == '1') ? 2 : kS16MinM;
  if (const char* e = std::getenv("B12X_GEMM_STREAM16_MINM"); e != nullptr)
    s16_min = std::clamp<int64_t>(std::atoi(e), 2, kS16MinM);
  if ((M >= s16_min || (lin::wtraits(wf).fp8mma && M >= f8_cap_min)) &&
      p.regime != Regime::kTiled) {
    const char* e16 = std::getenv("B12X_GEMM_STREAM16");
    const bool want = !(e16 != nullptr && e16[0] == '0');
    const int tw = 2;
    const char* eqx = std::getenv("B12X_GEMM_STREAM16_QX");
    // Session 24 (kS16QaRule, Plan::stream16_qa; B12X_GEMM_S16_QA=0|1): W4A4 on the staged-once
    // kernel with its FP4 activations converted in the staging (no pre-pass, no chunked qx kernel).
    const char* eqa = std::getenv("B12X_GEMM_S16_QA");
    bool qa = (f == LinearFormat::kNvfp4 || f == LinearFormat::kMxfp4) &&
              (eqa != nullptr ? eqa[0] == '1' : kS16QaRule && sm90);
    const bool qx0 = f == LinearFormat::kNvfp4 &&
                     (eqx != nullptr ? eqx[0] == '1' : geo.n16 * geo.kvec * 512 <= kS16QxMaxBytes);
    bool qx =
        qx0 && !qa;  // qa: NVFP4's chunked qx kernel only where the staged-once one is refused
    int force_split = 0;
    if (const char* e = std::getenv("B12X_GEMM_STREAM16_SPLIT"); e != nullptr)
      force_split = std::max(0, std::atoi(e));
    if (want && !fp16 && stream_bf16_act && split_env == nullptr && M >= s16_min &&
        lin::stream16_available(wf, fp16, tw)) {
      const int64_t sms = std::max(dev.sm_count, 1);
      // Session 17 (default): the K range staged once (linear_stream16_once_kernel) at 2 tiles
      // per warp on BF16 activations where the split's vp <= lin::kS16OnceMaxVp and its shared
      // memory (vp-dependent) keeps the chunked kernel's CTAs per SM, the split chosen as for the
      // chunked kernel; B12X_GEMM_STREAM16_ONCE=0 keeps the chunked kernel. Round 65 (H200, NVFP4
      // W4A16, us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168): M = 16
      // chunked 8.33 / 17.40 / 17.38 / 10.90 / 8.64 (again 8.37 / 18.02 / 17.33 / 11.13 / 8.75)
      // -> once 7.70 / 16.33 / 16.56 / 10.37 / 8.30. Dropped probes (removed): its split summed
      // in a thread-block cluster through DSMEM (no partials / reduce kernel; 9.16 / 16.60 /
      // - / 9.77 / -: 4096x4096 +19 %, 6144x4096 -6 %), a ring of 8 vectors per warp (9.56 /
      // 16.99 / 16.83 / 10.41 / 8.49 with the cluster), the 3-CTA register cap (round 64 on a
      // grid for 3 CTAs per SM 8.12 / 19.47 / 19.74 / 11.45 / 8.58; round 65 on the 2-CTA grid
      // with the early trigger and the cluster 9.02 / 18.54 / 17.36 / 11.81 / 8.56).
      const char* eonce = std::getenv("B12X_GEMM_STREAM16_ONCE");
      int var = tw == 2 && !qx && !(eonce != nullptr && eonce[0] == '0') ? lin::kS16VarOnce : 0;
      // Session 23: the split summed in a thread-block cluster (lin::kS16VarCluster) through
      // DSMEM, no partials or reduce launch. B12X_GEMM_S16_CLUSTER=<max size 2..16> (probe; above
      // 8 non-portable) takes it wherever the split fits and its clusters can be resident; the
      // rule (kS16ClusterRule, B12X_GEMM_S16_CL_RULE=0|1) only on SM90, for the W4A16 formats,
      // where the split is <= 8 and the grid has more CTAs than SMs, with the block kernel's
      // early trigger (default since round 87, see kS16ClusterRule). Round 85 / 86 (H200, us over
      // 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, NVFP4 W4A16 M = 16, default ->
      // clusters): 7.64 / 16.13 / 15.87 / 10.09 / 8.07 -> 8.71 / 16.12 / 25.70 / 9.33 / 9.19 (cl8 /
      // cl4 / cl14 / cl8 / cl14): the grids below the SM count (128 / 112 CTAs) and the clusters of
      // 14 lose; the Spread scheduling policy changed nothing (8.72 / 9.21, removed); CL_MINVP=4
      // (4096x4096 split 16, cl16) 12.97 (removed). With the early trigger (round 86):
      // 14336x4096 16.02 -> 15.06, 6144x4096 10.17 -> 9.27; MXFP4 W4A16 M = 2 14.12 -> 12.74 / 8.48
      // -> 7.69, M = 8 14.20 -> 13.15 / 8.55 -> 8.18. W4A4 (pre-pass) at M = 8, 14336x4096: 15.02
      // -> 25.77 (NVFP4), 15.61
      // -> 24.42 (MXFP4), both rounds: not taken there.
      int cl_max = 0;
      bool cl_rule = false;
      if (const char* e = std::getenv("B12X_GEMM_S16_CLUSTER"); e != nullptr)
        cl_max = std::clamp(std::atoi(e), 0, 16);
      const bool w4a16 = f == LinearFormat::kNvfp4W4A16 || f == LinearFormat::kMxfp4W4A16;
      if (cl_max == 0 && sm90 && (w4a16 || qa)) {
        // W4A4 with qa too (session 24, kS16QaRule's numbers).
        const char* er = std::getenv("B12X_GEMM_S16_CL_RULE");
        cl_rule = er != nullptr ? er[0] == '1' : kS16ClusterRule;
        if (cl_rule) cl_max = 8;
      }
      if (dev.cc_major < 9 || cl_max < 2) cl_max = 0, cl_rule = false;
      const int fit_chunked = lin::prepare_linear_stream16(caps.device, wf, tw, qx);
      const int64_t gx = (geo.n16 + 8 * tw - 1) / (8 * tw);
      // The split for `fit` CTAs per SM: the largest whose grid is one wave with >= kS16MinVp
      // vectors per CTA (or the forced one); 0 if none.
      auto choose = [&](int fit, int& split, int& split_vp) {
        split = split_vp = 0;
        int per_sm = fit;
        if (const char* e = std::getenv("B12X_GEMM_STREAM16_CTAS");
            e != nullptr && std::atoi(e) > 0)
          per_sm = std::min(fit, std::atoi(e));
        const int64_t slots = sms * per_sm;
        for (int sp = 1; sp <= 256; ++sp) {
          const int vp = lin::stream16_vectors_per_cta(geo.kvec, sp);
          const int eff = static_cast<int>((geo.kvec + vp - 1) / vp);  // no idle K range
          if (force_split > 0) {
            if (sp == force_split) split = eff, split_vp = vp;
            continue;
          }
          if (eff != sp) continue;
          if (sp > 1 && (gx * eff > slots || vp < kS16MinVp)) break;
          split = eff, split_vp = vp;
        }
        return per_sm;
      };
      int split = 0, split_vp = 0;
      if (fit_chunked > 0) {
        int per_sm = choose(fit_chunked, split, split_vp);
        if (var != 0 &&
            (split == 0 || split_vp > lin::kS16OnceMaxVp ||
             lin::prepare_linear_stream16(caps.device, wf, tw, qx, var | (qa ? lin::kS16VarQa : 0),
                                          split_vp) < per_sm))
          var = 0;
        if (qa && var == 0) {
          // The staged-once kernel refused (vp > 16, its fit): W4A4 keeps session 23's choices,
          // NVFP4's chunked qx kernel where its rule takes it, else the pre-pass.
          qa = false;
          if (qx0) {
            qx = true;
            const int fit_qx = lin::prepare_linear_stream16(caps.device, wf, tw, true);
            split = split_vp = 0;
            if (fit_qx > 0) per_sm = choose(fit_qx, split, split_vp);
          }
        }
        if (qa) var |= lin::kS16VarQa;
        // Session 26 (kS16W16Rule, Plan::stream16_w16, lin::kS16VarW16; B12X_GEMM_S16_W16=0|1):
        // the staged-once kernel with 16 warps over two K halves of the same tiles, one CTA per
        // SM, the split chosen as above for one CTA per SM with vp a multiple of 8 (each half
        // whole chunks) up to lin::kS16OnceMaxVp; its early trigger where the grid fills <= 90 %
        // of the SMs. The rule (SM90) takes
        // it where the 8-warp grid's split (partials) already has at most one CTA per SM and the
        // 16-warp split is the same: MXFP4 W4A4 up to the SM count, NVFP4 W4A16 / W4A4 up to 90 %
        // of it, from more than half of it (see kS16W16Rule). =1 forces it, =0 never.
        const char* ew = std::getenv("B12X_GEMM_S16_W16");
        const int64_t ctas8 = gx * split;
        // (Session 29, round 111: NVFP4 W4A4 up to the SM count as MXFP4 W4A4; 4096x4096 M = 2 / 4
        // / 8 / 16 6.41 / 6.36 / 6.37 / 7.62 -> 6.25 / 6.25 / 6.28 / 7.43 us, round 98's
        // -0.1..-0.2.)
        const bool w16_fmt = (f == LinearFormat::kMxfp4 || f == LinearFormat::kNvfp4) && qa
                                 ? ctas8 <= sms
                                 : f == LinearFormat::kNvfp4W4A16 && ctas8 * 10 <= 9 * sms;
        // (Measured at 85 / 97 % of the SMs: smaller grids keep the 8-warp kernel, and so do
        // plans with the cluster or lo-split knobs set.)
        const bool w16_rule = ew == nullptr && kS16W16Rule && sm90 && force_split == 0 &&
                              split > 1 && w16_fmt && ctas8 * 2 > sms &&
                              std::getenv("B12X_GEMM_S16_CLUSTER") == nullptr &&
                              std::getenv("B12X_GEMM_S16_LOSPLIT") == nullptr;
        if ((w16_rule || (ew != nullptr && ew[0] == '1')) && (var & lin::kS16VarOnce) &&
            split > 0) {
          const int max_vp = lin::kS16OnceMaxVp;
          int ws = 0, wvp = 0;
          for (int sp = 1; sp <= 256; ++sp) {
            const int vp = lin::stream16_vectors_per_cta(geo.kvec, sp, 2 * kS16ChunkVLo);
            const int eff = static_cast<int>((geo.kvec + vp - 1) / vp);
            if (force_split > 0) {
              if (sp == force_split && vp <= max_vp) ws = eff, wvp = vp;
              continue;
            }
            if (eff != sp) continue;
            if (sp > 1 && (gx * eff > sms || vp < kS16MinVp)) break;
            if (vp <= max_vp) ws = eff, wvp = vp;
          }
          const int wvar = var | lin::kS16VarW16;
          if (ws > 0 && (!w16_rule || (ws == split && wvp == split_vp)) &&
              lin::stream16_w16_available(wf, qa) &&
              lin::prepare_linear_stream16(caps.device, wf, tw, qx, wvar, wvp) >= 1) {
            var = wvar;
            split = ws;
            split_vp = wvp;
            per_sm = 1;
          }
        }
        s16_trig_early = (var & lin::kS16VarW16) ? gx * split * 10 <= 9 * sms
                                                 : gx * split * 10 < 8 * sms * per_sm;
        // Session 24 (kS16LoSplitRule, Plan::stream16_split_lo; B12X_GEMM_S16_LOSPLIT=0|1): runs
        // of M <= 8 on twice the split where the grid fills under half the slots (4096x4096: 16,
        // 2048x7168: 28 at 4 vectors per CTA; session 22's (6)); not with a forced split.
        const char* elo = std::getenv("B12X_GEMM_S16_LOSPLIT");
        const bool lo_rule = elo != nullptr ? elo[0] == '1'
                                            : kS16LoSplitRule && sm90 && force_split == 0 &&
                                                  f == LinearFormat::kMxfp4W4A16;
        if (lo_rule && var != 0 && !(var & lin::kS16VarW16) && split > 0 &&
            gx * split * 2 <= sms * per_sm) {
          const int vp2 = lin::stream16_vectors_per_cta(geo.kvec, 2 * split);
          const int s2 = static_cast<int>((geo.kvec + vp2 - 1) / vp2);
          if (s2 > split && vp2 >= kS16ChunkVLo && gx * s2 <= sms * per_sm) {
            p.stream16_split_lo = s2;
            p.stream16_vp_lo = vp2;
            p.stream16_smem_lo = lin::stream16_smem_bytes(tw, qx, var, vp2);
          }
        }
      }
      if (split > 0) {
        p.stream16_tw = tw;
        p.stream16_split = split;
        p.stream16_vp = split_vp;
        p.stream16_qx = qx;
        p.stream16_once = var != 0;
        p.stream16_qa = qa;
        p.stream16_w16 = (var & lin::kS16VarW16) != 0;
        p.stream16_smem = lin::stream16_smem_bytes(tw, qx, var, split_vp);
        p.stream16_tiles = 8 * tw;
        p.stream16_min_m = static_cast<int>(s16_min);
        if (split > 1 && split <= cl_max && var != 0 && !p.stream16_w16 &&
            (!cl_rule || gx * split > sms) &&
            lin::stream16_max_active_clusters(caps.device, wf, tw, qx, var, split_vp, split) >=
                gx) {  // every cluster of the grid resident at once (one wave)
          p.stream16_cluster = split;
          p.stream16_cluster_min_m =
              cl_rule && f == LinearFormat::kNvfp4W4A16 ? kS16ClusterMinMNvfp4W4A16 : 0;
          if (const char* e = std::getenv("B12X_GEMM_S16_CL_MINM"); e != nullptr)
            p.stream16_cluster_min_m = std::clamp(std::atoi(e), 0, 17);
          // No cluster instance of one token tile (NVFP4 on BF16 activations, session 25): runs
          // of M <= 8 keep the partials.
          if (!lin::stream16_cluster_nt1(wf, var))
            p.stream16_cluster_min_m = std::max(p.stream16_cluster_min_m, 9);
        }
      }
    }
    // FP8 weights (session 14, lin::launch_linear_stream16_f8): the same block structure on
    // e4m3 activations (per-tensor: the caller's; block FP8 / MXFP8: BF16 ones quantized in the
    // kernel, Plan::stream16_qx, or the caller's e4m3 + scales), f16 MMAs on SM90
    // (decode_fp8_mma). Atoms (32 K) per CTA at least kS16F8MinVp (two 256-K chunks), the one-wave
    // split rule above. Default (round 51, H200, M = 16, us over 4096x4096 / 14336x4096 /
    // 4096x14336 / 6144x4096 / 2048x7168, decode kernel -> this kernel): per-tensor 9.43 / 20.57 /
    // 22.94 / 12.43 / 10.58 -> 8.64 (tw 1) / 19.20 / 19.93 (tw 2, ring depth 8) / 10.93 / 8.87
    // (the last two tw 2, depth 8, one-chunk splits: a probe; the default's tw 1 at 2048x7168
    // measured 8.71 in round 52, tw 2 8.98); block FP8 (quantized in the kernel) 15.15 / 28.40 /
    // 33.89 / 18.83 / 17.52 -> 10.66 / 21.23 / 22.63 / 12.64 / 11.16 (tw 2; tw 1 9.94 at
    // 4096x4096), M = 8 10.90 / 23.76 / 26.84 / 13.39 / 11.32 -> 10.05 / 20.03 / 20.58 / 11.79 /
    // 10.63; MXFP8 21.74 / 42.78 / 56.43 / 26.37 / 23.75 -> 16.06 / 34.16 / 34.28 / 19.55 / 16.68
    // (tw 1 13.16 at 4096x4096), M = 8 17.20 / 33.20 / 43.72 / 21.35 / 18.41 -> 13.77 / 27.77 /
    // 28.16 / 16.08 / 14.16; the quantizer launch before it instead of the in-kernel quantization
    // (M = 16): block 11.98 / 23.06 / 22.43 / 13.83, MXFP8 17.54 / 33.59 / 34.04. Hence: 1 tile
    // per warp where 2 give at most one CTA per SM (4096x4096, 2048x7168), ring depth 8 for
    // per-tensor at 2 tiles per warp (f16 MMAs; at 1 tile per warp depth 8 lost: 8.64 -> 9.66 at
    // 4096x4096). B12X_GEMM_STREAM16_F8=0|1, B12X_GEMM_STREAM16_TW, _DEPTH=4|8, _QX=0|1 override;
    // B12X_GEMM_STREAM16=0 turns it off too.
    const char* ef8 = std::getenv("B12X_GEMM_STREAM16_F8");
    // (The default on SM90, where it was measured; SM89 / SM12x run its e4m3 kernels when forced.)
    const bool want_f8 = want && (ef8 != nullptr ? ef8[0] == '1' : p.decode_fp8_mma == 1);
    const char* etw = std::getenv("B12X_GEMM_STREAM16_TW");
    const char* edepth = std::getenv("B12X_GEMM_STREAM16_DEPTH");
    // MXFP8: splits down to one chunk per CTA (round 52, M = 16: 4096x4096 13.54 -> 12.04 us,
    // 2048x7168 13.70 -> 11.85, 6144x4096 16.74 -> 16.76; per-tensor 8.68 -> 9.00 at 4096x4096
    // and block FP8 10.00 -> 10.19 lost, so they keep two). B12X_GEMM_STREAM16_MINVP=<atoms>.
    int min_vp = wf == lin::WFmt::kFp8Mx ? 8 : kS16F8MinVp;
    if (const char* e = std::getenv("B12X_GEMM_STREAM16_MINVP"); e != nullptr)
      min_vp = std::max(8, std::atoi(e));
    const bool f8_act = f == LinearFormat::kFp8Tensor
                            ? caps.act_dtype == DType::kFP8E4M3
                            : caps.act_dtype == DType::kBF16 || caps.act_dtype == DType::kFP8E4M3;
    const bool q8 = (wf == lin::WFmt::kFp8Block || wf == lin::WFmt::kFp8Mx) &&
                    caps.act_dtype == DType::kBF16 && (eqx == nullptr || eqx[0] == '1');
    const int mma8 = p.decode_fp8_mma;
    auto depth_for = [&](int tw8) {
      if (edepth != nullptr) return std::atoi(edepth);
      return wf == lin::WFmt::kFp8 && tw8 == 2 && mma8 == 1 ? 8 : 4;
    };
    struct F8Grid {
      int split = 0, vp = 0;
      bool cluster = false;  // the split summed in a cluster (session 23)
    };
    // Probe: B12X_GEMM_STREAM16_OCC=3 (per-tensor at one tile per warp: 3 CTAs per SM).
    const char* eocc = std::getenv("B12X_GEMM_STREAM16_OCC");
    auto occ_for = [&](int tw8, int depth) {
      return eocc != nullptr && eocc[0] == '3' &&
                     lin::stream16_f8_available(wf, tw8, mma8, depth, q8, 3)
                 ? 3
                 : 2;
    };
    // Kernel variants (kF8Var* flags, where compiled). Default (session 16): MXFP8's scales folded
    // into the f16 operands (kF8VarFold, f16 MMAs at depth 4; round 59, M = 4 / 8 / 16, us over
    // 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, per-atom fold -> folded: M = 16
    // 11.80 / 29.34 / 29.33 / 16.68 / 11.72 -> 11.07 / 24.47 / 24.96 / 14.68 / 10.77, M = 8 10.88 /
    // 25.60 / 25.68 / 14.74 / 10.70 -> 9.95 / 22.85 / 23.34 / 13.42 / 9.77, M = 4 10.92 / 25.85 /
    // 26.05 / 14.94 / 10.87 -> 9.73 / 22.36 / 23.09 / 13.33 / 9.81; the per-atom fold on fp32
    // scales converted once per CTA 11.20 / 25.36 / 25.98 / 14.83 / 10.87 at M = 16, removed),
    // with its in-kernel quantization on all 8 warps (kF8VarQ8; round 60, M = 16: 11.07 / 24.84 /
    // 24.96 / 14.65 / 10.71 -> 10.81 / 23.98 / 24.38 / 14.30 / 10.43, M = 8 10.15 / 22.77 / 23.12 /
    // 13.38 / 9.76 -> 9.69 / 22.41 / 22.81 / 13.22 / 9.66, M = 4 10.05 / 22.46 / 22.91 / 13.36 /
    // 9.77 -> 9.52 / 22.00 / 22.84 / 13.21 / 9.66; block FP8's 1x128 groups on 16 lanes lost 1-6 %
    // and ring loads issued after the MMAs lost on MXFP8 / block FP8 / per-tensor's 14336x4096:
    // removed). Session 20 (round 76, us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 /
    // 2048x7168): MXFP8 at one token tile on a warp per token (kF8VarQ32; M = 1 9.21 / 20.65 /
    // 21.28 / 12.25 / 9.30 -> 9.00 / 20.41 / 21.07 / 12.04 / 9.19, M = 4 9.41 / 21.24 / 21.66 /
    // 12.61 / 9.49 -> 9.21 / 21.04 / 21.55 / 12.37 / 9.35), block FP8's in-kernel quantization
    // after the MMAs at one token tile (kF8VarLate; M = 4 8.65 / 20.19 / 19.30 / 11.49 / 9.20 ->
    // 8.48 / 19.33 / 18.87 / 11.44 / 8.93). Session 25: MXFP8's splats by one conversion per
    // atom (kF8VarCheap, 14 -> 46, the same bits; round 93, us over the five shapes, M = 1: 9.03 /
    // 20.05 / 20.85 / 11.96 / 9.18 -> 8.95 / 19.93 / 20.72 / 11.85 / 9.07, M = 4: 9.31 / 20.44 /
    // 21.40 / 12.30 / 9.26 -> 9.22 / 20.51 / 21.28 / 12.18 / 9.21, M = 16: 11.04 / 23.44 / 24.84 /
    // 14.46 / 10.58 -> 10.91 / 23.16 / 24.50 / 14.28 / 10.45). B12X_GEMM_STREAM16_F8_VAR=<flags>
    // overrides (0: none).
    // Session 27: MXFP8's quantizing variant with kF8VarEarly (46 -> 110: the weight E8M0 bytes
    // of chunks 0 / 1 staged and chunk 0's splats built before griddepcontrol.wait, so that where
    // the previous launch triggers early, as the cluster sum does, they overlap it). Round 101
    // (H200, us over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, 46 -> 110): M = 1
    // 9.16 / 20.10 / 20.78 / 11.89 / 9.16 -> 9.15 / 19.08 / 20.88 / 11.82 / 9.08, M = 4 9.38 /
    // 20.58 / 21.64 / 12.24 / 9.25 -> 9.26 / 19.60 / 21.58 / 12.06 / 9.24, M = 16 10.83 / 23.41 /
    // 24.65 / 14.23 / 10.59 -> 10.71 / 22.04 / 24.42 / 13.94 / 10.43; with the reduce's early
    // trigger (B12X_GEMM_REDUCE_TRIG=1) no further gain; block FP8 with its weight scales staged
    // early (var 80, removed) level or slower (6144x4096 M = 16 12.78 -> 13.00, 4096x14336 M = 4
    // 19.25 -> 19.47). Round 102 (110 against 46): M = 1 8.96 / 18.96 / 20.69 / 11.73 / 9.00 vs
    // 8.95 / 19.86 / 20.58 / 11.85 / 9.03, M = 4 9.16 / 19.44 / 21.18 / 12.03 / 9.22 vs 9.37
    // / 20.49 / 21.14 / 12.17 / 9.22, M = 16 10.65 / 21.70 / 23.97 / 13.94 / 10.30 vs 10.84 / 23.20
    // / 24.18 / 14.19 / 10.48 (46's instances removed). With chunk 1's splats before the wait too
    // (kF8VarEarly2, 110 -> 238; round 102): M = 1 8.98 / 18.73 / 20.48 / 11.61 / 9.00, M = 4 9.25
    // / 19.16 / 20.98 / 11.89 / 9.23, M = 16 10.67 / 21.43 / 23.95 / 13.76 / 10.25.
    // Round 103 (238 against 110): M = 1 8.93 / 18.74 / 20.60 / 11.59 / 9.06 vs 8.94 / 18.95 /
    // 20.78 / 11.73 / 8.99, M = 4 9.18 / 19.23 / 21.08 / 11.87 / 9.19 vs 9.18 / 19.51 / 21.29 /
    // 12.04 / 9.19, M = 16 10.68 / 21.51 / 24.20 / 13.75 / 10.31 vs 10.68 / 21.73 / 24.25 / 13.88 /
    // 10.37 (110's instances removed with its knob).
    const char* evar = std::getenv("B12X_GEMM_STREAM16_F8_VAR");
    auto var_for = [&](int tw8, int depth) {
      const int v =
          evar != nullptr ? std::atoi(evar)
          : wf == lin::WFmt::kFp8Mx && mma8 == 1 && depth == 4
              ? lin::kF8VarFold | (q8 ? lin::kF8VarQ8 | lin::kF8VarQ32 | lin::kF8VarCheap |
                                            lin::kF8VarEarly | lin::kF8VarEarly2
                                      : 0)
          : wf == lin::WFmt::kFp8Block && mma8 == 1 && depth == 4 && q8 ? lin::kF8VarLate
                                                                        : 0;
      return v != 0 && lin::stream16_f8_available(wf, tw8, mma8, depth, q8, occ_for(tw8, depth), v)
                 ? v
                 : 0;
    };
    // Session 23 (default on SM90, where the FP8 block kernel is the default, for block FP8 and
    // MXFP8): the one-wave rule's split summed in a thread-block cluster of its CTAs
    // (kernels/cluster_sum.cuh: no partials, no reduce launch) where the split is <= 4 and all its
    // clusters fit at once (cudaOccupancyMaxActiveClusters >= the row groups), the dependent
    // launch before the sum (Plan::stream_trig bit 4). H200, us, split + reduce -> cluster:
    // 14336x4096 (cl4, 224 CTAs) round 86 per-tensor M = 4 / 8 / 16 17.71 / 18.64 / 19.54 ->
    // 17.32 / 17.93 / 18.53, block FP8 19.78 / 21.12 / 22.30 -> 19.42 / 19.90 / 20.95, MXFP8 M = 4
    // / 8 / 16 21.21 / 22.45 / 24.69 -> 20.93 / 21.93 / 23.88 (round 85: -0.3..-0.9 us alike);
    // round 87 block FP8 20.36 / 20.76 / 22.19 -> 19.72 / 20.04 / 21.31, MXFP8 M = 1 / 4 / 8 / 16
    // 20.49 / 21.12 / 22.14 / 24.37 -> 20.48 / 20.92 / 21.87 / 23.72, but per-tensor 17.98 /
    // 18.16 / 19.16 -> 18.15 / 18.27 / 19.21 (and 19.24 at M = 16 with the early trigger):
    // per-tensor keeps the reduce launch. Not with clusters of 8: 6144x4096 (cl8 on 192 CTAs)
    // within +-2 % both ways; 4096x4096 / 4096x14336 (cl8 on 256 CTAs: the two-token-tile
    // instances' clusters do not all fit at once) M = 16 8.71 / 19.37 -> 13.22 / 27.65, and splits
    // capped at 8 (2048x7168: 7 instead of 14) 7.55 -> 9.09 at M = 4; a non-portable cluster of 14
    // there 8.36 -> 8.03 at M = 4 but 8.65 -> 13.62 at M = 16; the split shrunk until its clusters
    // fit (4096x4096: 6 instead of 8) 8.14 -> 8.64 at M = 4; the scheduling policy Spread within
    // +-0.1 us of the default placement. B12X_GEMM_STREAM16_F8_CLUSTER=0 turns it off, =1 takes a
    // cluster for any split <= B12X_GEMM_STREAM16_F8_CLMAX (2..8, default 4) that fits once (forced
    // splits too; tests).
    const char* ecl = std::getenv("B12X_GEMM_STREAM16_F8_CLUSTER");
    const int f8_cluster = dev.cc_major < 9 || (ecl == nullptr && wf == lin::WFmt::kFp8) ? 0
                           : ecl != nullptr  ? std::atoi(ecl)
                           : force_split > 0 ? 0
                                             : 2;
    int f8_cl_max = 4;
    if (const char* e = std::getenv("B12X_GEMM_STREAM16_F8_CLMAX"); e != nullptr)
      f8_cl_max = std::clamp(std::atoi(e), 2, 8);
    auto f8_grid = [&](int tw8, int depth) {
      F8Grid r;
      const int fit = lin::prepare_linear_stream16_f8(caps.device, wf, tw8, mma8, depth, q8,
                                                      occ_for(tw8, depth), var_for(tw8, depth));
      if (fit <= 0) return r;
      const int64_t gx8 = (geo.n16 + 8 * tw8 - 1) / (8 * tw8);
      // A cluster of sp CTAs: at most f8_cl_max, and (the rule, 2) all gx8 of them at once. A
      // plan with the in-kernel quantization (q8) also launches the instance without it, as a
      // cluster of the same split, where a run's BF16 rows are not 16-byte vectors (the quantizer
      // launch before it): the fit is the smaller of both instances' (their registers differ).
      auto cluster_ok = [&](int sp) {
        if (sp > f8_cl_max) return false;
        int fit_cl = lin::stream16_f8_max_clusters(caps.device, wf, tw8, mma8, depth, q8,
                                                   occ_for(tw8, depth), var_for(tw8, depth), sp);
        if (q8)
          fit_cl = std::min(
              fit_cl, lin::stream16_f8_max_clusters(caps.device, wf, tw8, mma8, depth, false,
                                                    occ_for(tw8, depth), var_for(tw8, depth), sp));
        return fit_cl > 0 && (f8_cluster == 1 || gx8 <= fit_cl);
      };
      int per_sm = fit;
      if (const char* e = std::getenv("B12X_GEMM_STREAM16_CTAS"); e != nullptr && std::atoi(e) > 0)
        per_sm = std::min(fit, std::atoi(e));
      const int64_t slots = std::max(dev.sm_count, 1) * int64_t{per_sm};
      const int64_t gx = (geo.n16 + 8 * tw8 - 1) / (8 * tw8);
      for (int sp = 1; sp <= 256; ++sp) {
        const int vp = lin::stream16_f8_vectors_per_cta(geo.kvec, sp);
        const int eff = static_cast<int>((geo.kvec + vp - 1) / vp);  // no idle K range
        if (force_split > 0) {
          if (sp == force_split) r.split = eff, r.vp = vp;
          continue;
        }
        if (eff != sp) continue;
        if (sp > 1 && (gx * eff > slots || vp < min_vp)) break;
        r.split = eff, r.vp = vp;
      }
      r.cluster = f8_cluster > 0 && r.split > 1 && cluster_ok(r.split);
      return r;
    };
    // The kernel of tw8 tiles per warp exists with its default depth, occupancy and variant.
    auto f8_ok = [&](int tw8) {
      const int depth = depth_for(tw8);
      return lin::stream16_f8_available(wf, tw8, mma8, depth, q8, occ_for(tw8, depth),
                                        var_for(tw8, depth));
    };
    if (want_f8 && lin::wtraits(wf).fp8mma && f8_act && split_env == nullptr) {
      int tw8 = etw != nullptr ? std::atoi(etw) : 2;
      F8Grid gr;
      bool small_tw1 = false;
      if (f8_ok(tw8)) {
        gr = f8_grid(tw8, depth_for(tw8));
        // One tile per warp where two give at most one CTA per SM, and (session 15) for
        // per-tensor / block FP8 where K >= 3 N (deep K splits; round 57, 4096x14336, M = 4 / 8 /
        // 16, us, tw 2 -> 1: per-tensor 18.09 / 18.30 / 19.68 -> 17.78 / 17.96 / 18.92, block FP8
        // 19.98 / 20.44 / 22.01 -> 18.98 / 19.69 / 20.96; MXFP8 26.02 / 25.61 / 29.12 -> 29.90 /
        // 29.22 / 33.46 keeps 2).
        const int64_t gx2 = (geo.n16 + 15) / 16;
        small_tw1 = gr.split > 0 && gx2 * gr.split <= dev.sm_count;
        const bool deep_k = wf != lin::WFmt::kFp8Mx && geo.K >= 3 * geo.N;
        if (etw == nullptr && gr.split > 0 && (small_tw1 || deep_k) && f8_ok(1)) {
          tw8 = 1;
          gr = f8_grid(tw8, depth_for(tw8));
        }
      }
      if (gr.split > 0) {
        p.stream16_tw = tw8;
        p.stream16_split = gr.split;
        p.stream16_vp = gr.vp;
        p.stream16_qx = q8;
        p.stream16_tiles = 8 * tw8;
        p.stream16_depth = depth_for(tw8);
        p.stream16_occ = occ_for(tw8, p.stream16_depth);
        p.stream16_var = var_for(tw8, p.stream16_depth);
        p.stream16_smem = lin::stream16_f8_smem_bytes(wf, tw8, mma8, q8, p.stream16_var);
        p.stream16_cluster = gr.cluster ? gr.split : 0;
        // Per-tensor at one tile per warp (the small shapes) from M = 9: round 52, M = 5 / 8, us,
        // decode kernel -> this kernel, 4096x4096 7.87 / 7.95 -> 8.03 / 8.20, 2048x7168 8.28 /
        // 8.37 -> - / 8.46 (M = 9: 9.01 -> 8.25, 8.81 -> -; M = 16 9.26 -> 8.68, 10.54 -> 8.71).
        // Session 24: block FP8 on BF16 activations at two tiles per warp with the split summed by
        // the reduce launch (not a cluster; of the five shapes 6144x4096, 2x8): plans of capacity
        // <= 3 keep the decode kernel (its 4-warp grid, quantized while staged) at M = 3. H200, us,
        // block kernel -> decode kernel (B12X_GEMM_STREAM16_F8_MINM): M = 3 at capacity 3 11.83 ->
        // 10.59 (round 90), 11.89 -> 10.59 (round 91); not at larger capacities, whose decode plan
        // is one warp per tile (round 91: M = 4 at capacity 4 11.83 -> 11.81, M = 3 / 4 at
        // capacity 16 11.86 / 11.76 -> 13.62 / 13.72), nor at one tile per warp or with a cluster
        // (round 91, capacity M, M = 3 / 4: 4096x4096 8.60 / 8.76 -> 8.69 / 9.21, 2048x7168 9.26 /
        // 9.20 -> 9.38 / 9.39, 4096x14336 19.10 / 19.26 -> 23.70 / 23.76, 14336x4096 (cl4) 19.47 /
        // 19.42 -> 19.31 / 20.12).
        const bool blk_tw2_small =
            wf == lin::WFmt::kFp8Block && q8 && tw8 == 2 && !gr.cluster && M <= 3;
        p.stream16_min_m = f8_min_m > 0 ? f8_min_m
                           : wf == lin::WFmt::kFp8 && tw8 == 1 && small_tw1 && etw == nullptr ? 9
                           : blk_tw2_small && etw == nullptr ? std::max<int64_t>(f8_cap_min, 4)
                                                             : f8_cap_min;
        // Session 25: a plan with the shared staging keeps its runs on the decode kernel.
        if (p.decode_xshare > 0 && f8_min_m == 0)
          p.stream16_min_m = std::max<int64_t>(p.stream16_min_m, M + 1);
      }
    }
  }
  // Probe override (tools/gemm-probe.sh): B12X_GEMM_SPLIT=<n> forces the decode split count.
  if (decode_plan && split_env != nullptr && std::atoi(split_env) > 0)
    split = static_cast<int>(std::min<int64_t>(std::atoi(split_env), slices));
  // Block FP8 / MXFP8 weights with BF16 activations: quantized in the decode kernel's staging
  // (lin::kActBf16Quant: each CTA quantizes its K range of the staged rows, before its slice
  // loop) instead of by the quantizer launched before it, where a CTA stages at most 16 K values
  // (rows x its K range; 64 slice rows of 256). Round 45 (H200, us over 4096x4096 / 14336x4096 /
  // 4096x14336 / 6144x4096 / 2048x7168, quantizer -> staging; K values per CTA in brackets):
  // block FP8 M = 1 9.97 / 20.29 / 20.31 / 11.80 / 9.93 -> 7.60 / 17.29 / 20.17 / 9.16 / 7.93 (4K /
  // 4K / 14K / 4K / 7K), M = 4 11.62 / 22.46 / 23.97 / 13.91 / 12.75 -> 9.10 / 20.28 / 26.93 /
  // 11.88 / 9.90 (8K / 16K / 28K / 8K / 7K), M = 16 16.34 / 30.50 / 37.74 / 19.90 / 18.38 -> 15.98
  // / 34.61 / 54.03 / 19.43 / 18.92 (32K / 64K / 112K / 32K / 28K); MXFP8 M = 1 13.49 / 27.67 /
  // 29.84 / 15.67 / 15.63 -> 11.43 / 26.08 / 30.19 / 13.17 / 13.94, M = 4 16.14 / 30.52 / 39.49 /
  // 18.48 / 17.06 -> 14.26 / 30.81 / 44.73 / 17.71 / 15.13, M = 16 22.04 / 43.88 / 57.98 / 27.05 /
  // 24.50 -> 24.38 / 52.94 / 82.64 / 29.10 / 26.99. B12X_GEMM_DECODE_ACTQ=0|1 overrides.
  if (decode_plan && (wf == WFmt::kFp8Block || wf == WFmt::kFp8Mx) &&
      caps.act_dtype == DType::kBF16) {
    const char* e = std::getenv("B12X_GEMM_DECODE_ACTQ");
    const int64_t rows = std::min<int64_t>(M, 8 * decode_nt(M));
    p.decode_act_quant = e != nullptr ? e[0] == '1' : rows * ((slices + split - 1) / split) <= 64;
  }
  p.split_k = split;
  p.decode_warp_split = ws;
  // Session 17: the decode kernel's early PDL trigger (FP8 weights; Plan::stream_trig bit 8) where
  // each warp streams at most kDecodeTrigMaxSlices slices: the next call's CTAs take the free
  // slots (3 of the 4-warp CTAs fit an SM) and request their first weights during this call's
  // tail. Where a warp streams many slices its CTAs' early successors stack on the SMs that
  // freed first and the next call runs unbalanced.
  const bool decode_trig = decode_plan && lin::wtraits(wf).fp8mma &&
                           ((slices + split - 1) / split + ws - 1) / ws <= kDecodeTrigMaxSlices;
  p.sm_count = dev.sm_count;
  p.tiled_cluster_ok = dev.cc_major >= 9;
  const char* pdl_env = std::getenv("B12X_GEMM_PDL");
  p.pdl = dev.cc_major >= 9 && !(pdl_env != nullptr && pdl_env[0] == '0');
  p.split_cluster = split > 1 && split <= 8 && dev.cc_major >= 9 && !half_reduce &&
                    !(split_env != nullptr && std::string(split_env) == "reduce");
  // FP8 weight formats consume FP8 activations directly in both kernels (FP8 MMAs). Quantized
  // FP4 activations are dequantized to BF16 once by the pre-pass: dequantizing them inside the
  // weight-streaming kernel repeats the work in every CTA (measured on the H200: NVFP4 W4A4 at
  // 14336x4096 took 23 / 40 / 137 us at M = 1 / 4 / 16 against 18 / 22 / 42 us for W4A16).
  // At M = 1 the in-kernel path was as fast with one warp per tile; the pre-pass (launched with
  // PDL at M = 1) lets M = 1 take 4 warps per tile as W4A16 does: round 23 (H200, us over the
  // five shapes, in-kernel -> pre-pass) NVFP4 W4A4 11.8 / 22.2 / 29.1 / 14.9 / 13.7 -> 7.6 / 17.9
  // / 20.2 / 9.6 / 7.6, MXFP4 W4A4 10.6 / 21.6 / 28.1 / 12.8 / 12.3 -> 7.2 / 16.2 / 19.0 / 9.5 /
  // 7.1, MXFP4 W4A8 12.8 / 22.7 / 27.8 / 15.2 / 14.9 -> 8.8 / 17.6 / 16.9 / 10.8 / 9.6.
  // B12X_GEMM_ACT_PREPASS=0 keeps the in-kernel dequantization in the decode regime.
  // MXFP8 too in the tiled regime, whose kernel runs it on BF16 MMAs with folded E8M0 scales
  // (activations dequantized in the FP8 fragment's k order, see lin::ActParams::kperm).
  p.act_prepass =
      !format_raw_activations(f) &&
      (!lin::wtraits(wf).fp8mma || (wf == WFmt::kFp8Mx && p.regime != Regime::kDecode)) &&
      (p.regime != Regime::kDecode || !prepass_off);
  int64_t off = 0;
  if (format_quantizes_inside(f) && caps.act_dtype != DType::kFP8E4M3) {
    p.off_qvalues = off;
    // Block FP8 variant 14: the tiled quantizer's images cover whole 128-token tiles.
    const bool tiles = wgmma_act_images(p.tiled_wgmma_var) && p.tiled_wgmma > 0;
    off = align_up(off + (tiles ? fmt::pad_to(M, 128) : M) * K);
    p.off_qscales = off;
    off = align_up(off + (f == LinearFormat::kFp8Block ? M * (K / 128) * 4 : M * (K / 32)));
  }
  if (p.act_prepass) {
    p.off_act = off;
    off = align_up(off + M * geo.KP * 2);
    const int g = act_group(f, caps.act_dtype);
    if (g > 0) {
      p.off_act_scales = off;
      off = align_up(off + M * (geo.KP / g) * 4);
    }
  }
  if (p.tiled_wgmma_f16x) {
    p.off_f16x = off;
    off = align_up(off + M * K * 2 + M * 4);
  }
  // fp32 partials [split][M][NP] of a split reduced by a second kernel: the decode split's or the
  // tiled split's (an auto regime with max_tokens above kDecodeMaxM plans the tiled split only; a
  // forced tiled regime makes no decode choices), the larger of the two where both exist.
  // The stream kernels' partials hold only the token rows they run at (<= 4 / <= 16, whatever
  // the capacity: a capacity-8192 plan would otherwise reserve split x 8192 rows for them).
  int64_t partial_splits = 0;
  if (split > 1 && !p.split_cluster) partial_splits = split;
  if (p.ggml_gemv > 0 && p.ggml_gemv_split > 1)
    partial_splits = std::max<int64_t>(partial_splits, p.ggml_gemv_split);
  if (p.tiled_split_reduce) partial_splits = std::max<int64_t>(partial_splits, p.tiled_split);
  int64_t partial_rows = partial_splits * M;  // [split][M][NP] fp32
  if (p.stream_rows_parts > 0 && p.stream_rows_split > 1)
    partial_rows = std::max<int64_t>(partial_rows, p.stream_rows_split * std::min<int64_t>(M, 4));
  if (p.stream16_tw > 0 && p.stream16_split > 1 &&
      (p.stream16_cluster == 0 || p.stream16_cluster_min_m > s16_min_m(p)))
    partial_rows = std::max<int64_t>(partial_rows, p.stream16_split * std::min<int64_t>(M, 16));
  if (p.stream16_split_lo > 0)
    partial_rows = std::max<int64_t>(partial_rows, p.stream16_split_lo * std::min<int64_t>(M, 8));
  if (partial_rows > 0) {
    p.off_partial = off;
    off = align_up(off + partial_rows * geo.NP * 4);
  }
  // The M = 1 stream kernel's claim word (lin::kStreamVarClaim).
  if (p.decode_stream_var & lin::kStreamVarClaim) {
    p.off_stream_claim = off;
    off = align_up(off + 8);
  }
  p.scratch_bytes = off;
  // MXFP4 on the stream / block kernels: the fold-free splat instances for weights whose E8M0
  // codes are all <= 135 (run checks the bound weight; the others keep the fold).
  // B12X_GEMM_STREAM_MX_FREE=0|1 (session 15 probe).
  if (wf == lin::WFmt::kMxfp4 && (p.decode_stream_parts > 0 || p.stream16_tw > 0)) {
    const char* e = std::getenv("B12X_GEMM_STREAM_MX_FREE");
    p.stream_mx_free = e != nullptr ? e[0] == '1' : kStreamMxFree || p.decode_stream_free_only;
  }
  const char* es16t = std::getenv("B12X_GEMM_S16_TRIG");
  // The W4A16 formats, and W4A4 where the block kernel converts its activations: with the
  // pre-pass round 82 measured the W4A4 formats 1-2 % slower at some points (NVFP4 W4A4 M = 8
  // 14336x4096 15.16 against 14.99 us, MXFP4 W4A4 M = 2 4096x4096 8.16 against 7.99, M = 16
  // 14336x4096 17.60 against 17.29). Session 24: W4A4 with its activations converted in the block
  // kernel (Plan::stream16_qa, no pre-pass) takes it (round 89, see kS16QaRule).
  const bool s16_rule = es16t != nullptr
                            ? es16t[0] == '1'
                            : kS16TrigRule && (f == LinearFormat::kNvfp4W4A16 ||
                                               f == LinearFormat::kMxfp4W4A16 || p.stream16_qa);
  p.reduce_trig =
      s16_rule && ((p.stream16_tw > 0 && p.stream16_depth == 0) || p.stream_rows_parts > 0) ? 1 : 0;
  if (const char* e = std::getenv("B12X_GEMM_REDUCE_TRIG"); e != nullptr)
    p.reduce_trig = std::atoi(e) & 1;
  // Bit 2 (kS16WarmRule; run sets it on the runs through partials + reduce only): the FP4 block
  // kernel and its reduce fetch the parameter lines they read after griddep_wait before it.
  if (p.stream16_tw > 0 && p.stream16_depth == 0) {
    const char* e = std::getenv("B12X_GEMM_S16_WARM");
    if (e != nullptr ? e[0] == '1' : kS16WarmRule && sm90 && f != LinearFormat::kMxfp4W4A16)
      p.reduce_trig |= 2;
  }
  // Bit 4 on an FP8 block kernel plan whose split is summed in a cluster (session 23): the
  // dependent launch before the sum (round 87, 14336x4096 cl4, us, after -> before the sum: block
  // FP8 M = 4 / 8 / 16 19.81 / 20.37 / 21.79 -> 19.56 / 20.06 / 21.24, MXFP8 M = 1 / 4 / 8 / 16
  // 20.70 / 21.28 / 22.11 / 23.93 -> 20.24 / 20.65 / 21.74 / 23.57; round 86 alike).
  p.stream_trig =
      kStreamTrig | (stream_trig_m1 ? 1 : 0) | (decode_trig ? 8 : 0) |
      (s16_rule && p.stream16_tw > 0 && p.stream16_depth == 0 && s16_trig_early ? 4 : 0) |
      (p.stream16_depth > 0 && p.stream16_cluster > 1 ? 4 : 0);
  if (const char* e = std::getenv("B12X_GEMM_STREAM_TRIG"); e != nullptr)
    p.stream_trig = std::atoi(e) & 15;
  if (log_level() >= 3) log_message(3, p.describe());
  {
    // Kernel signature (warm-up / freeze, b12x/runtime.h): the kernels a run at max_tokens
    // launches (an auto regime above kDecodeMaxM runs tiled there), never N, K or M.
    std::ostringstream sig;
    sig << "gemm." << format_name(f) << " act=" << dtype_name(caps.act_dtype)
        << " out=" << dtype_name(caps.out_dtype);
    if (p.regime == Regime::kTiled || (p.regime == Regime::kAuto && M > kDecodeMaxM))
      sig << " tiled"
          << (p.tiled_wgmma > 0
                  ? " wgmma" + std::to_string(p.tiled_wgmma) +
                        (p.tiled_wgmma_var ? " v" + std::to_string(p.tiled_wgmma_var) : "") +
                        (wgmma_group ? " group" : "") + (p.tiled_wgmma_f16x ? " f16x" : "") +
                        (p.tiled_wgmma_f16x_early ? "e" : "")
                  : std::string(p.tiled_tok == 64 ? " tok64" : "") +
                        (p.tiled_split_reduce ? " split=reduce" : ""));
    else
      sig << " decode nt=" << (M > kDecodeMaxM ? 2 : decode_nt(M))
          << (ws > 1 && M <= kDecodeMaxM ? " ws=" + std::to_string(ws) : "")
          << (p.decode_pipe ? " pipe" : "") << (p.decode_half ? " half" : "")
          << (p.decode_lean ? " lean" : "") << (p.decode_act_quant ? " actq" : "")
          << (p.decode_fp8_mma == 1 ? " mma=f16" : "") << (p.decode_mx_diag ? " mxdiag" : "")
          << (p.decode_sring ? " sring" : "")
          << (p.ggml_gemv > 0 ? (p.ggml_gemv_split > 1 ? " ggml_gemv+reduce" : " ggml_gemv") : "")
          << (p.ggml_gemv > 0 && p.ggml_gemv_var ? " v" + std::to_string(p.ggml_gemv_var) : "")
          // The integer-MMA GEMV's kernel: its warps, and the M = 1 kernel a 2-token plan runs too.
          << ((p.ggml_gemv_var & lin::kGgmlImmaVar) != 0
                  ? " w" + std::to_string(p.ggml_gemv_warps) + (M == 2 ? " m1+2" : "")
                  : "")
          << (p.decode_deep ? " deep=" + std::to_string(p.decode_deep) : std::string())
          << (p.decode_xshare ? " xshare=" + std::to_string(p.decode_xshare) : std::string())
          << " split="
          << (M > kDecodeMaxM || split == 1 ? "none"
              : p.split_cluster             ? "cluster"
                                            : "reduce");
    // The M = 1 stream kernel, which run launches for a bound M of 1 whatever the capacity.
    if (p.decode_stream_parts > 0)
      sig << " stream=" << p.decode_stream_parts << "o" << p.decode_stream_occ
          << (p.decode_stream_shfl ? "s" : "")
          << (p.decode_stream_var ? "v" + std::to_string(p.decode_stream_var) : std::string());
    if (p.stream_rows_parts > 0)
      sig << " stream_r4=" << p.stream_rows_parts << (p.stream_rows_shfl ? "s" : "")
          << (p.stream_rows_split > 1 ? "+reduce" : "");
    if (p.stream16_tw > 0)
      sig << " stream16=" << p.stream16_tw
          << (p.stream16_cluster > 0 && p.stream16_cluster_min_m > s16_min_m(p) ? "+reduce" : "")
          << (p.stream16_cluster > 0 ? " cl" + std::to_string(p.stream16_cluster)
              : p.stream16_split > 1 ? "+reduce"
                                     : "")
          << stream16_variant_tags(p);
    // The pre-pass: every run of a quantized-activation format but the block kernel's with qx
    // (M = 5..16), which converts them itself.
    if (p.act_prepass) sig << " act_prepass";
    if (p.stream_mx_free) sig << " mx_free";
    if (p.reduce_trig) sig << " rtrig" << p.reduce_trig;
    b12x::detail::resolve_kernels(op, caps.device, sig.str(), p.describe());
  }
  return p;
}

Binding bind(const Plan& plan, const TensorRef& scratch, const TensorRef& x,
             const TensorRef& x_scale, const PackedWeight& weight, const TensorRef& out,
             const TensorRef& bias, const TensorRef& alpha) {
  const char* op = "gemm::bind";
  const Caps& c = plan.caps;
  const LinearFormat f = c.format;
  B12X_CHECK_ARG(weight.format() == f, op, ": weight format ", format_name(weight.format()),
                 " differs from the plan's ", format_name(f));
  B12X_CHECK_ARG(weight.out_features() == c.out_features && weight.in_features() == c.in_features,
                 op, ": weight is [", weight.out_features(), ", ", weight.in_features(),
                 "], the plan is for [", c.out_features, ", ", c.in_features, "]");
  const int dev = weight.device();
  B12X_CHECK_ARG(dev == c.device, op, ": weight is on device ", dev, ", the plan on device ",
                 c.device);
  const int64_t N = c.out_features, K = c.in_features;

  check_defined(x, op, "x");
  B12X_CHECK_ARG(x.data != nullptr, op, ": x is missing");
  check_ndim(x, op, "x", 2);
  check_device(x, op, "x", dev);
  check_inner_contiguous(x, op, "x");
  B12X_CHECK_ARG(
      x.dtype == c.act_dtype ||
          (format_is_w4a4(f) && (x.dtype == DType::kUInt8 || x.dtype == DType::kFP4E2M1)) ||
          (f == LinearFormat::kFp8Tensor &&
           (x.dtype == DType::kUInt8 || x.dtype == DType::kFP8E4M3)),
      op, ": x has dtype ", dtype_name(x.dtype), ", the plan expects ", dtype_name(c.act_dtype));
  const int64_t M = x.shape[0];
  const int64_t xk = x.dtype == DType::kUInt8 && format_is_w4a4(f) ? 2 * x.shape[1] : x.shape[1];
  B12X_CHECK_ARG(xk == K, op, ": x has K=", xk, " (", x.describe(), "), expected ", K);
  B12X_CHECK_ARG(M >= 0 && M <= c.max_tokens, op, ": x has M=", M, " rows, the plan allows ",
                 c.max_tokens, " (max_tokens)");
  if (x.dtype == DType::kBF16 || x.dtype == DType::kFP16) check_aligned(x, op, "x", 2);
  B12X_CHECK_ARG(M <= 1 || x.stride[0] >= x.shape[1], op, ": x row stride ", x.stride[0],
                 " is smaller than its row length ", x.shape[1], " (rows must not overlap)");

  if (format_is_w4a4(f)) {
    const int64_t cols = f == LinearFormat::kNvfp4 ? K / 16 : K / 32;
    B12X_CHECK_ARG(x_scale.data != nullptr, op, ": x_scale (128x4-swizzled ",
                   f == LinearFormat::kNvfp4 ? "UE4M3" : "E8M0", " scales of x, ",
                   fmt::swizzled_scale_bytes(M, cols), " bytes) is required");
    check_defined(x_scale, op, "x_scale");
    check_device(x_scale, op, "x_scale", dev);
    if (f == LinearFormat::kNvfp4)
      check_dtype(x_scale, op, "x_scale", {DType::kUInt8, DType::kFP8E4M3, DType::kUE4M3});
    else
      check_dtype(x_scale, op, "x_scale", {DType::kUInt8, DType::kUE8M0});
    B12X_CHECK_ARG(x_scale.is_contiguous(), op, ": x_scale must be contiguous, got ",
                   x_scale.describe());
    B12X_CHECK_ARG(x_scale.numel() >= fmt::swizzled_scale_bytes(M, cols), op, ": x_scale holds ",
                   x_scale.numel(), " bytes, expected pad128(M)*pad4(", cols,
                   ") = ", fmt::swizzled_scale_bytes(M, cols));
  } else if (f == LinearFormat::kFp8Block && x.dtype == DType::kFP8E4M3) {
    B12X_CHECK_ARG(x_scale.data != nullptr, op,
                   ": x_scale (fp32 [M, K/128]) is required with fp8_e4m3 activations");
    check_defined(x_scale, op, "x_scale");
    check_device(x_scale, op, "x_scale", dev);
    check_dtype(x_scale, op, "x_scale", {DType::kFP32});
    check_ndim(x_scale, op, "x_scale", 2);
    check_shape(x_scale, op, "x_scale", {M, K / 128});
    check_inner_contiguous(x_scale, op, "x_scale");
    B12X_CHECK_ARG(M <= 1 || x_scale.stride[0] >= K / 128, op, ": x_scale row stride ",
                   x_scale.stride[0], " is smaller than K/128=", K / 128);
  } else {
    B12X_CHECK_ARG(x_scale.data == nullptr, op, ": x_scale is not used by ", format_name(f),
                   " with ", dtype_name(x.dtype), " activations (pass none)");
  }

  check_defined(out, op, "out");
  B12X_CHECK_ARG(out.data != nullptr, op, ": out is missing");
  check_dtype(out, op, "out", {c.out_dtype});
  check_ndim(out, op, "out", 2);
  check_shape(out, op, "out", {M, N});
  check_inner_contiguous(out, op, "out");
  check_device(out, op, "out", dev);
  check_aligned(out, op, "out", 2);
  B12X_CHECK_ARG(M <= 1 || out.stride[0] >= N, op, ": out row stride ", out.stride[0],
                 " is smaller than N=", N, " (rows must not overlap)");
  if (bias.data != nullptr) {
    check_defined(bias, op, "bias");
    check_dtype(bias, op, "bias", {c.out_dtype});
    check_ndim(bias, op, "bias", 1);
    check_shape(bias, op, "bias", {N});
    check_contiguous(bias, op, "bias");
    check_device(bias, op, "bias", dev);
  }
  if (alpha.data != nullptr) {
    check_defined(alpha, op, "alpha");
    check_dtype(alpha, op, "alpha", {DType::kFP32});
    B12X_CHECK_ARG(alpha.numel() == 1, op, ": alpha must hold one fp32 value, got ",
                   alpha.describe());
    check_device(alpha, op, "alpha", dev);
    check_aligned(alpha, op, "alpha", 4);
  }
  if (plan.scratch_bytes > 0) {
    check_defined(scratch, op, "scratch");
    B12X_CHECK_ARG(scratch.data != nullptr, op, ": scratch of ", plan.scratch_bytes,
                   " bytes is required");
    check_device(scratch, op, "scratch", dev);
    B12X_CHECK_ARG(scratch.is_contiguous(), op, ": scratch must be contiguous");
    B12X_CHECK_ARG(dtype_block_bytes(scratch.dtype) == 1 || scratch.dtype == DType::kUInt8, op,
                   ": scratch must be a byte tensor, got ", scratch.describe());
    B12X_CHECK_ARG(scratch.span_bytes() >= plan.scratch_bytes, op, ": scratch has ",
                   scratch.span_bytes(), " bytes, the plan needs ", plan.scratch_bytes);
    check_aligned(scratch, op, "scratch", 256);
  }
  Binding b;
  b.plan = plan;
  b.regime = plan.regime == Regime::kAuto ? (M <= kDecodeMaxM ? Regime::kDecode : Regime::kTiled)
                                          : plan.regime;
  b.weight = &weight;
  // Runs of this binding (and graphs captured from them) may take the fold-free MXFP4 instances:
  // from now on refresh keeps the weight's E8M0 codes <= 135.
  if (plan.stream_mx_free && weight.impl().mx_fold_free) weight.impl().bound_mx_free = true;
  b.x = x;
  b.x_scale = x_scale;
  b.out = out;
  b.bias = bias;
  b.alpha = alpha;
  b.M = M;
  b.scratch = static_cast<uint8_t*>(scratch.data);
  return b;
}

void run(const Binding& b, Stream stream) {
  const Plan& plan = b.plan;
  const Caps& c = plan.caps;
  const LinearFormat f = c.format;
  const PackedWeight& w = *b.weight;
  const PackedWeight::Impl& im = w.impl();
  const lin::Geometry& geo = im.geo;
  const int64_t M = b.M, K = geo.K;
  if (M == 0) return;

  lin::LinearParams p{};
  p.wvals = w.values_device();
  p.wscale = im.scale;
  p.wscale2 = im.scale2;
  p.n16 = geo.n16;
  p.kvec = geo.kvec;
  p.KP = geo.KP;
  p.scale_ld = geo.scale_ld;
  p.scale2_ld = geo.scale2_ld;
  p.M = M;
  p.N = geo.N;
  p.K = K;
  p.NP = geo.NP;
  p.out = b.out.data;
  p.ldo = b.out.stride[0];
  p.out_fp16 = c.out_dtype == DType::kFP16;
  p.bias = b.bias.data;
  p.alpha = static_cast<const float*>(b.alpha.data);
  p.out_mult = (lin::wtraits(im.wfmt).shifted ? 128.f : 1.f) * w.global_scale();
  p.mx_free = plan.stream_mx_free && im.mx_fold_free ? 1 : 0;

  const bool fp16 = mma_fp16(f, b.x.dtype);
  const bool tiled = b.regime == Regime::kTiled;
  // The tiled kernel folds MXFP4's E8M0 scales into BF16 operands (weights in the kernel,
  // activations in the pre-pass), so its pre-pass emits no group scales.
  const bool tiled_mx_fold = tiled && im.wfmt == WFmt::kMxfp4 && !fp16;
  // MXFP8 weights: the tiled kernel decodes them to BF16 (E8M0 folded) and needs the activations
  // dequantized (E8M0 folded) in the FP8 fragment's k order; the decode kernel reads FP8.
  const bool tiled_f8_fold = tiled && im.wfmt == WFmt::kFp8Mx;
  // The decode kernel folds MXFP4's E8M0 scales the same way with BF16 MMAs (weights per atom,
  // activations in the pre-pass, or in its staging at M = 1 from the group scales below).
  const bool decode_mx_fold = !tiled && im.wfmt == WFmt::kMxfp4 && !fp16;
  const int g = (tiled_mx_fold || tiled_f8_fold || decode_mx_fold) ? 0 : act_group(f, b.x.dtype);
  p.pdl = plan.pdl ? 1 : 0;
  p.act_kind = lin::kActRaw16;
  p.xs_kind = lin::kXsNone;
  bool wgmma_bulk = false;  // block FP8 activations quantized as variant 14's stage images
  // Block FP8 / MXFP8 activations quantized in the decode kernel's staging (16-byte loads of
  // BF16 rows; other rows take the quantizer).
  // (Where the FP8 block kernel runs: its own in-kernel quantization, Plan::stream16_qx.)
  const bool f8_block16 = plan.stream16_depth > 0 && M >= plan.stream16_min_m && M <= 16 && !tiled;
  // (Block FP8 / MXFP8 on the shared staging, Plan::decode_xshare: the quantizer's rows, shared
  // by the cluster.)
  const bool xs_quant = plan.decode_xshare > 1 && M >= plan.decode_xshare_min_m && M <= 16 &&
                        im.wfmt != WFmt::kFp8 && !tiled && !f8_block16;
  const bool xs_qpdl = xs_quant && plan.decode_xshare_qpdl && plan.pdl;
  const bool staged_quant = (f8_block16 ? plan.stream16_qx : plan.decode_act_quant) && !tiled &&
                            !xs_quant && b.x.dtype == DType::kBF16 &&
                            reinterpret_cast<uintptr_t>(b.x.data) % 16 == 0 &&
                            b.x.stride[0] % 8 == 0;
  if (format_raw_activations(f)) {
    p.x = b.x.data;
    p.ldx = b.x.stride[0];
    p.x_vec16 = (reinterpret_cast<uintptr_t>(b.x.data) % 16 == 0) && (p.ldx % 8 == 0);
  } else if (staged_quant) {
    p.x = b.x.data;
    p.ldx = b.x.stride[0];
    p.x_vec16 = 1;
    p.act_kind = lin::kActBf16Quant;
    p.xs_kind = lin::kXsStaged;
  } else {
    // Quantized activations: caller-provided or produced here by the activation quantizer.
    const uint8_t* qx = static_cast<const uint8_t*>(b.x.data);
    int64_t qld = b.x.byte_stride(0);
    const uint8_t* qscale = static_cast<const uint8_t*>(b.x_scale.data);
    int64_t qscale_ld = 0;
    lin::ActKind kind = lin::ActKind::kFp8;
    // The M <= 16 block kernel converts NVFP4 activations itself (Plan::stream16_qx).
    const bool s16_qx =
        plan.stream16_qx && !tiled && M >= s16_min_m(plan) && M <= 16 && f == LinearFormat::kNvfp4;
    // The staged-once block kernel with the conversion in its staging (Plan::stream16_qa).
    const bool s16_qa =
        plan.stream16_qa && !tiled && M >= s16_min_m(plan) && M <= 16 && M <= plan.caps.max_tokens;
    // The M = 1 stream kernel with the conversion in its staging (Plan::decode_stream_var & 8).
    const bool m1_qx = (plan.decode_stream_var & 8) && plan.decode_stream_parts > 0 && !tiled &&
                       M == 1 && (f == LinearFormat::kNvfp4 || f == LinearFormat::kMxfp4);
    const bool prepass = plan.act_prepass && (!lin::wtraits(im.wfmt).fp8mma || tiled_f8_fold) &&
                         !s16_qx && !m1_qx && !s16_qa;
    // s16_qa's NVFP4 values come times 2^-7 (nvfp4x8_bf16_e7): the outputs and partials times 2^7.
    if (s16_qa && f == LinearFormat::kNvfp4) p.out_mult *= 128.f;
    uint16_t* const act_out = reinterpret_cast<uint16_t*>(b.scratch + plan.off_act);
    bool fused = false;  // the MXFP8 pre-pass done in one kernel (no E4M3 intermediate)
    switch (f) {
      case LinearFormat::kNvfp4:
        kind = lin::ActKind::kNvfp4;
        break;
      case LinearFormat::kMxfp4:
        kind = lin::ActKind::kMxfp4;
        break;
      case LinearFormat::kFp8Tensor:
        kind = lin::ActKind::kFp8;
        break;
      case LinearFormat::kFp8Block:
        kind = lin::ActKind::kFp8Group;
        if (b.x.dtype == DType::kFP8E4M3) {
          qscale_ld = b.x_scale.stride[0];
        } else {
          uint8_t* qv = b.scratch + plan.off_qvalues;
          float* qs = reinterpret_cast<float*>(b.scratch + plan.off_qscales);
          // Block FP8 variant 14 (the default): the values as the wgmma kernel's stage
          // images.
          wgmma_bulk = tiled && plan.tiled_wgmma > 0 && wgmma_act_images(plan.tiled_wgmma_var) &&
                       launch_quantize_fp8_group128_tiled(b.x.data, b.x.dtype, M, K, b.x.stride[0],
                                                          qv, qs, plan.act_quant, stream);
          if (!wgmma_bulk)
            launch_quantize_fp8_group128(b.x.data, b.x.dtype, M, K, b.x.stride[0], qv, qs,
                                         plan.act_quant, stream, true, xs_qpdl);
          qx = qv;
          qld = K;
          qscale = reinterpret_cast<const uint8_t*>(qs);
          qscale_ld = K / 128;
        }
        break;
      case LinearFormat::kMxfp8:
      case LinearFormat::kMxfp4W4A8: {
        kind = lin::ActKind::kMxfp8Rows;
        // One pass quantizes and dequantizes (below) in one kernel; B12X_QUANT_MXFP8_FUSED=0 or
        // rows it cannot take (unaligned, K % 32) fall back to the two passes.
        fused = prepass && g == 0 &&
                launch_mxfp8_dequant_bf16(b.x.data, b.x.dtype, M, K, b.x.stride[0], geo.KP,
                                          tiled_f8_fold, act_out, plan.act_quant, stream);
        if (fused) break;
        uint8_t* qv = b.scratch + plan.off_qvalues;
        uint8_t* qs = b.scratch + plan.off_qscales;
        launch_quantize_mxfp8(b.x.data, b.x.dtype, M, K, b.x.stride[0], qv, qs, nullptr,
                              plan.act_quant, stream, xs_qpdl);
        qx = qv;
        qld = K;
        qscale = qs;
        qscale_ld = K / 32;
        break;
      }
      default:
        B12X_ASSERT(false, "unhandled format ", format_name(f));
    }
    if (prepass) {
      lin::ActParams a{};
      a.kind = kind;
      a.kperm = tiled_f8_fold ? 1 : 0;
      a.M = M;
      a.K = K;
      a.KP = geo.KP;
      a.out = act_out;
      a.out_scale = g ? reinterpret_cast<float*>(b.scratch + plan.off_act_scales) : nullptr;
      a.group = g ? g : 128;
      a.x = qx;
      a.ldx_bytes = qld;
      a.xs = qscale;
      a.xs_ld = qscale_ld;
      // PDL at M = 1 only (round 23, H200: NVFP4 W4A4 M = 1 with it and 4 warps per tile 7.6 /
      // 17.9 / 20.2 / 9.6 / 7.6 us; at M = 4 / 8 it gained 1-2 us on four shapes but lost 3.5 /
      // 15 us at 4096x14336, where the GEMM is a cluster-split grid). Session 12: also before the
      // 4-row stream kernel (no cluster; Plan::stream_rows_pdl).
      const bool rows_stream = (M >= 2 && M <= 4 && plan.stream_rows_parts > 0) ||
                               (M >= s16_min_m(plan) && M <= 16 && plan.stream16_tw > 0);
      a.pdl = plan.pdl && (M == 1 || (rows_stream && plan.stream_rows_pdl)) && !tiled ? 1 : 0;
      if (!fused) lin::launch_act_dequant(a, stream);
      p.x = a.out;
      p.ldx = geo.KP;
      p.x_vec16 = 1;
      p.xscale = a.out_scale;
      p.xscale_ld = g ? geo.KP / g : 0;
      p.xs_kind = g ? lin::kXsF32Rows : lin::kXsNone;
    } else {
      B12X_ASSERT(!tiled || lin::wtraits(im.wfmt).fp8mma,
                  "tiled regime needs the activation pre-pass");
      p.x = qx;
      p.ldx_bytes = qld;
      p.xq_scale = qscale;
      p.x_vec16 = (reinterpret_cast<uintptr_t>(qx) % 16 == 0) && (qld % 16 == 0);
      switch (kind) {
        case lin::ActKind::kNvfp4:
          p.act_kind = lin::kActNvfp4;
          break;
        case lin::ActKind::kMxfp4:
          p.act_kind = lin::kActMxfp4;
          p.xs_kind = lin::kXsE8m0Swz;
          break;
        case lin::ActKind::kFp8:
          p.act_kind = lin::kActFp8;
          break;
        case lin::ActKind::kFp8Group:
          p.act_kind = lin::kActFp8;
          p.xs_kind = lin::kXsF32Rows;
          p.xscale = reinterpret_cast<const float*>(qscale);
          p.xscale_ld = qscale_ld;
          break;
        case lin::ActKind::kMxfp8Rows:
          p.act_kind = lin::kActFp8;
          p.xs_kind = lin::kXsE8m0Rows;
          p.xscale_ld = qscale_ld;
          break;
      }
    }
  }
  if (f == LinearFormat::kFp8Tensor) {
    // output_scale lives on the device; a caller alpha (rare) is not combinable with it here.
    B12X_CHECK_ARG(b.alpha.data == nullptr,
                   "gemm::run: fp8_tensor takes its scale from the "
                   "packed weight's output_scale; alpha must be empty");
    p.alpha = im.output_scale;
  }

  const int nt = decode_nt(M);
  if (tiled && p.x_vec16) {
    B12X_ASSERT(!(tiled_mx_fold || tiled_f8_fold) || p.xs_kind == lin::kXsNone,
                "tiled MXFP4 / MXFP8 expect folded activation scales");
    // Split K over a cluster when the 128 x bn tiles alone leave SMs idle (M up to a few
    // hundred): 2 when that keeps every CTA within one wave, every cluster co-resident (a
    // cluster takes `split` SMs of one GPC) and at least 4 K stages of 64 per CTA. Measured on
    // the H200 (round 6): splits of 4 and 8 were slower than 2 at M = 64 / 256 (e.g. NVFP4
    // W4A16 4096x4096 M=256: 85 us at 4, 67 us at 2, 115 us at 1).
    if (plan.tiled_wgmma > 0) {
      p.split = 1;
      p.cluster_split = 1;
      if (wgmma_group_format(im.wfmt)) {
        if (plan.tiled_wgmma_f16x) {
          uint8_t* const y = b.scratch + plan.off_f16x;
          float* const xs = reinterpret_cast<float*>(y + M * K * 2);
          lin::launch_ggml_act_f16(p.x, p.ldx, M, K, y, xs, plan.pdl, stream,
                                   plan.tiled_wgmma_f16x_early);
          p.x = y;
          p.ldx = K;
          p.xscale = xs;
        }
        lin::launch_linear_wgmma_group(im.wfmt, fp16 || plan.tiled_wgmma_f16x, plan.tiled_wgmma,
                                       plan.tiled_wgmma_var, plan.tiled_wgmma_raster, p, stream);
      } else {
        // Variant 14 reads the tiled quantizer's images; variant 8 where the quantizer
        // did not write them.
        const int var =
            wgmma_act_images(plan.tiled_wgmma_var) && !wgmma_bulk ? 8 : plan.tiled_wgmma_var;
        lin::launch_linear_wgmma(im.wfmt, fp16, plan.tiled_wgmma, var, plan.tiled_wgmma_raster, p,
                                 stream);
      }
      return;
    }
    constexpr int kMaxTiledSplit = 2;
    const int tok = plan.tiled_tok;
    const int bn = lin::tiled_block_n(im.wfmt, fp16, tok);
    const int64_t tiles = ((geo.NP + bn - 1) / bn) * ((M + tok - 1) / tok);
    if (plan.tiled_split > 0) {
      p.split = plan.tiled_split;
      p.cluster_split = plan.tiled_split_reduce ? 1 : plan.tiled_split;
      p.partial = plan.tiled_split_reduce ? reinterpret_cast<float*>(b.scratch + plan.off_partial)
                                          : nullptr;
      lin::launch_linear_tiled(im.wfmt, fp16, p, stream, plan.tiled_tok);
      if (p.partial != nullptr) lin::launch_linear_reduce(p, stream);
      return;
    }
    const int64_t stages = geo.KP / 64;
    int split = 1;
    if (plan.tiled_cluster_ok) {
      while (split < kMaxTiledSplit && tiles * split * 2 <= plan.sm_count &&
             stages >= 4 * split * 2 &&
             tiles <= lin::tiled_max_active_clusters(c.device, im.wfmt, fp16, split * 2, tok))
        split *= 2;
      // Probe override (B12X_GEMM_TILED_SPLIT=1|2|4|8), clamped to the stages available.
      const int forced = lin::tiled_split_override();
      if (forced > 0) {
        split = 1;
        while (split < forced && stages >= 2 * split * 2) split *= 2;
      }
    }
    p.split = split;
    p.cluster_split = split;
    lin::launch_linear_tiled(im.wfmt, fp16, p, stream, tok);
    return;
  }
  p.cluster_split = 1;
  if (plan.ggml_gemv > 0 && p.x_vec16 && M <= kGgmlGemvMaxM && M <= plan.caps.max_tokens) {
    p.split = plan.ggml_gemv_split;
    p.partial = p.split > 1 ? reinterpret_cast<float*>(b.scratch + plan.off_partial) : nullptr;
    if ((plan.ggml_gemv_var & lin::kGgmlImmaVar) != 0)
      lin::launch_ggml_imma(im.wfmt, fp16, plan.ggml_gemv_warps, plan.ggml_gemv_var,
                            plan.ggml_gemv_ctas, p, stream);
    else
      lin::launch_ggml_gemv(im.wfmt, fp16, plan.ggml_gemv, plan.ggml_gemv_ctas, plan.ggml_gemv_occ,
                            plan.ggml_gemv_warps, plan.ggml_gemv_var, p, stream);
    if (p.partial != nullptr) lin::launch_linear_reduce(p, stream);
    return;
  }
  if (M > kDecodeMaxM || M > plan.caps.max_tokens) {
    p.split = 1;
    p.slices_per_cta = static_cast<int>(geo.KP / lin::slice_k(im.wfmt));
    p.partial = nullptr;
    p.stage_rows = 16;
    p.stage_slices =
        static_cast<int>(std::min<int64_t>(p.slices_per_cta, stage_fit_slices(im.wfmt, 16)));
    lin::launch_linear_decode(im.wfmt, fp16, 2, p, stream);
    return;
  }
  if (f8_block16 && (p.act_kind == lin::kActFp8 || p.act_kind == lin::kActBf16Quant) &&
      M <= plan.caps.max_tokens) {
    p.split = plan.stream16_split;
    p.cluster_split = plan.stream16_cluster > 1 ? plan.stream16_cluster : 1;
    // Plan::stream_trig bit 4 on an FP8 cluster plan (its default): the trigger before the sum.
    p.stream_trig = (plan.stream_trig & 4) && p.cluster_split > 1 ? 1 : 0;
    p.partial = p.split > 1 && p.cluster_split == 1
                    ? reinterpret_cast<float*>(b.scratch + plan.off_partial)
                    : nullptr;
    p.stream_vp = plan.stream16_vp;
    p.stream_tiles = plan.stream16_tiles;
    // The plan's smem is the in-kernel quantization's where it planned it; rows it cannot take
    // (not 16-byte vectors) come quantized by the quantizer launch, to the kernel without it.
    const bool q = p.act_kind == lin::kActBf16Quant;
    const int64_t smem = q == plan.stream16_qx ? plan.stream16_smem
                                               : lin::stream16_f8_smem_bytes(
                                                     im.wfmt, plan.stream16_tw, plan.decode_fp8_mma,
                                                     q, plan.stream16_var);
    lin::launch_linear_stream16_f8(im.wfmt, plan.stream16_tw, plan.decode_fp8_mma,
                                   plan.stream16_depth, smem, p, stream, plan.stream16_occ,
                                   plan.stream16_var);
    if (p.partial != nullptr) lin::launch_linear_reduce(p, stream);
    return;
  }
  const bool s16_qa_run =
      plan.stream16_qa && (p.act_kind == lin::kActNvfp4 ||
                           (p.act_kind == lin::kActMxfp4 && p.xs_kind == lin::kXsE8m0Swz));
  if (M >= s16_min_m(plan) && M <= 16 && plan.stream16_tw > 0 &&
      (s16_qa_run ||
       ((p.act_kind == lin::kActRaw16 || (plan.stream16_qx && p.act_kind == lin::kActNvfp4)) &&
        p.xs_kind == lin::kXsNone))) {
    // Plan::stream16_split_lo (probe): runs of M <= 8 on twice the split, no early trigger.
    const bool lo = plan.stream16_split_lo > 0 && M <= 8;
    p.split = lo ? plan.stream16_split_lo : plan.stream16_split;
    p.partial = p.split > 1 ? reinterpret_cast<float*>(b.scratch + plan.off_partial) : nullptr;
    p.stream_vp = lo ? plan.stream16_vp_lo : plan.stream16_vp;
    p.stream_tiles = plan.stream16_tiles;
    // The cluster sum (no partials) with the early trigger (round 86: with it 14336x4096 NVFP4
    // W4A16 M = 16 15.06 us, without 16.01).
    const bool cl = plan.stream16_cluster > 0 && M >= plan.stream16_cluster_min_m && !lo;
    p.stream_trig = ((plan.stream_trig & 4) && !lo) || cl ? 1 : 0;
    if (cl) p.partial = nullptr;
    p.reduce_trig = ((plan.reduce_trig & 1) && plan.pdl ? 1 : 0) |
                    (p.partial != nullptr ? plan.reduce_trig & 2 : 0);
    lin::launch_linear_stream16(
        im.wfmt, plan.stream16_tw, lo ? plan.stream16_smem_lo : plan.stream16_smem, p, stream,
        (plan.stream16_once ? lin::kS16VarOnce : 0) | (cl ? lin::kS16VarCluster : 0) |
            (s16_qa_run ? lin::kS16VarQa : 0) | (plan.stream16_w16 ? lin::kS16VarW16 : 0));
    if (p.partial != nullptr) lin::launch_linear_reduce(p, stream);
    return;
  }
  const bool m1_mx_qx = (plan.decode_stream_var & 8) && im.wfmt == WFmt::kMxfp4;
  if (plan.decode_stream_parts > 0 && M == 1 &&
      p.act_kind == ((plan.decode_stream_var & 8) ? m1_mx_qx ? lin::kActMxfp4 : lin::kActNvfp4
                                                  : lin::kActRaw16) &&
      p.xs_kind == (m1_mx_qx ? lin::kXsE8m0Swz : lin::kXsNone) &&
      (!plan.decode_stream_free_only || p.mx_free)) {
    p.split = 1;
    p.partial = nullptr;
    p.stream_vp = plan.decode_stream_vp;
    p.stream_trig = (plan.stream_trig & 1) ? 1 : 0;
    p.stream_var = plan.decode_stream_var;
    // (The M = 1 kernel's claim word rides in s16_flags, the block kernel's flag words.)
    if (plan.decode_stream_var & lin::kStreamVarClaim)
      p.s16_flags = reinterpret_cast<unsigned long long*>(b.scratch + plan.off_stream_claim);
    lin::launch_linear_stream(im.wfmt, plan.decode_stream_parts, plan.decode_stream_occ,
                              plan.decode_stream_ctas, plan.decode_stream_smem, p, stream, 1);
    return;
  }
  if (M >= 2 && M <= 4 && plan.stream_rows_parts > 0 && p.act_kind == lin::kActRaw16 &&
      p.xs_kind == lin::kXsNone) {
    p.split = plan.stream_rows_split;
    p.partial = p.split > 1 ? reinterpret_cast<float*>(b.scratch + plan.off_partial) : nullptr;
    p.stream_vp = plan.stream_rows_vp;
    p.stream_trig = (plan.stream_trig & 2) ? 1 : 0;
    p.reduce_trig = (plan.reduce_trig & 1) && plan.pdl ? 1 : 0;
    lin::launch_linear_stream(im.wfmt, plan.stream_rows_parts, 2, plan.stream_rows_ctas,
                              plan.stream_rows_smem, p, stream, 4);
    if (p.partial != nullptr) lin::launch_linear_reduce(p, stream);
    return;
  }
  const int64_t slices = geo.KP / lin::slice_k(im.wfmt);
  p.split = plan.split_k;
  // Warps per tile at two token tiles: the pipelined FP8 probe only (plan's
  // B12X_GEMM_DECODE_PIPE_WS).
  // (Two token tiles on the shared staging: session 26's B12X_GEMM_DECODE_XSHARE16 plans.)
  p.decode_ws =
      nt == 1 || plan.decode_pipe || (plan.decode_xshare > 1 && M >= plan.decode_xshare_min_m)
          ? plan.decode_warp_split
          : 1;
  p.decode_ws8_budget = plan.decode_ws8_budget;
  p.decode_half = plan.decode_half && p.decode_ws <= 1;
  p.slices_per_cta = static_cast<int>((slices + p.split - 1) / p.split);
  p.cluster_split = plan.split_cluster ? p.split : 1;
  p.stage_rows = static_cast<int>(std::min<int64_t>(M, 8 * nt));
  p.stage_slices = static_cast<int>(
      std::min<int64_t>(p.slices_per_cta, stage_fit_slices(im.wfmt, p.stage_rows)));
  // The shared staging (kXsh, below) where the run's grid is the plan's: e4m3 rows of 16-byte
  // pieces, the CTA's whole K staged within kDecodeXshBudget (session 26: beyond
  // kDecodeStageBudget where the plan took it so).
  const bool xs_run =
      plan.decode_xshare > 1 && M >= plan.decode_xshare_min_m && nt <= 2 && p.decode_ws == 4 &&
      !plan.decode_pipe && !p.decode_half && p.split == 1 && p.act_kind == lin::kActFp8 &&
      (p.xs_kind == lin::kXsNone) == (im.wfmt == WFmt::kFp8) && p.x_vec16 && geo.K % 16 == 0 &&
      p.ldx_bytes % 16 == 0 &&
      lin::decode_xshare_available(im.wfmt, fp16, 0,
                                   M >= 2 ? plan.decode_fp8_mma : plan.decode_fp8_mma_m1, nt) &&
      lin::decode_ring_bytes_deep(im.wfmt, 0) +
              lin::stage_geom(im.wfmt, p.stage_rows, p.slices_per_cta).bytes + 16 <=
          lin::kDecodeXshBudget;
  if (xs_run) p.stage_slices = p.slices_per_cta;
  // Two token tiles take 4 warps per tile only on the shared staging (no other instance).
  if (nt == 2 && !plan.decode_pipe && !xs_run) p.decode_ws = 1;
  // Pipelined staging where the CTA's K range takes more than one chunk (or its warps split K
  // at M >= 2) and the staging is a plain copy without group scales (else the kernels with one
  // buffer); chunks of a multiple of ws slices and at least (kStages - 1) x ws, so the ring's
  // waits cover the next chunk's copies.
  const int ws = std::max(p.decode_ws, 1);
  // Plan::decode_pipe_kb (the NVFP4 halves' default on SM90, 68 KB): a larger pipelined staging
  // where the device's opt-in shared memory holds it beside the largest ring and 24 KB of static
  // shared memory.
  const int64_t pipe_budget = std::max<int64_t>(lin::kDecodePipeBudget, plan.decode_pipe_budget);
  const int64_t pipe_slices = stage_fit_slices(im.wfmt, p.stage_rows, pipe_budget, 2) / ws * ws;
  if (plan.decode_pipe && M >= 2 && (ws > 1 || p.stage_slices < p.slices_per_cta) && p.x_vec16 &&
      p.xs_kind == lin::kXsNone && pipe_slices >= (lin::decode_stages(im.wfmt) - 1) * ws &&
      (p.act_kind == lin::kActRaw16 || lin::wtraits(im.wfmt).fp8mma)) {
    p.decode_pipe = 1;
    p.decode_pipe_budget = static_cast<int>(pipe_budget);
    p.stage_slices = static_cast<int>(std::min<int64_t>(p.slices_per_cta, pipe_slices));
    if (p.stage_slices % ws != 0) p.stage_slices = static_cast<int>(pipe_slices);
  } else if (ws > 1 && p.stage_slices < p.slices_per_cta) {
    p.decode_ws = 1;  // K parts need the whole range staged without the pipelined staging
  } else if (p.decode_ws == 8 &&
             lin::decode_ring_bytes_deep(im.wfmt, 0, 8) +
                     lin::stage_geom(im.wfmt, p.stage_rows, p.stage_slices).bytes >
                 plan.decode_ws8_budget) {
    p.decode_ws = 4;  // 8 warps per tile (probe): their ring and the staging exceed the budget
  }
  // A deeper ring: the K parts' whole range staged at once, within kDecodeDeepBudget.
  if (plan.decode_deep > 0 && p.decode_ws == 4 && !p.decode_pipe && !p.decode_half &&
      lin::decode_ring_bytes_deep(im.wfmt, plan.decode_deep) +
              lin::stage_geom(im.wfmt, p.stage_rows, p.stage_slices).bytes <=
          lin::kDecodeDeepBudget)
    p.decode_deep = plan.decode_deep;
  // The shallow ring (SM90 default since session 27, where the default ring leaves one CTA per SM)
  // of a two-tile plan on the shared staging: its two-tile runs there.
  if (plan.decode_deep < 0 && nt == 2 && xs_run) p.decode_deep = plan.decode_deep;
  p.decode_seg_stage = plan.decode_seg_stage ? 1 : 0;
  p.decode_sync_stage = plan.decode_sync_stage && M >= 2 ? 1 : 0;
  p.decode_mma = M >= 2 ? plan.decode_fp8_mma : plan.decode_fp8_mma_m1;
  // The shared staging (kXsh) from the plan's first M where the run's grid is the plan's: 4 warps
  // per tile, one chunk, e4m3 rows of 16-byte pieces, and ring + staging within the budget.
  p.decode_xshare = 0;
  if (xs_run && p.decode_ws == 4 && !p.decode_pipe && p.stage_slices >= p.slices_per_cta &&
      lin::decode_xshare_available(im.wfmt, fp16, p.decode_deep, p.decode_mma, nt) &&
      lin::decode_ring_bytes_deep(im.wfmt, p.decode_deep) +
              lin::stage_geom(im.wfmt, p.stage_rows, p.stage_slices).bytes + 16 <=
          lin::kDecodeXshBudget)
    p.decode_xshare = plan.decode_xshare;
  // Session 28 at M = 1 where its instance exists (linear_decode_kernel's kVar): 1
  // MXFP8's groups on the MMA's columns, 2 the weight scales in the ring (the instances are
  // 2 and 3 only; elsewhere the run keeps kVar 0).
  p.decode_var = 0;
  if (M == 1 && nt == 1 && !p.decode_pipe && !p.decode_half && p.decode_xshare == 0) {
    const int var = (plan.decode_mx_diag ? 1 : 0) | (plan.decode_sring ? 2 : 0);
    if (var != 0 && lin::decode_var_available(im.wfmt, fp16, std::max(p.decode_ws, 1),
                                              p.decode_deep, p.decode_mma, var))
      p.decode_var = var;
  }
  // kLean where the plan asks for it and the instance exists, and where only it exists (8 warps
  // per tile, the FP4 weights' deeper ring and pipelined halves: B12X_GEMM_DECODE_LEAN=0 keeps
  // them).
  {
    const int lws = std::max(p.decode_ws, 1);
    const bool lean_ok = lin::decode_lean_available(im.wfmt, fp16, nt, lws, p.decode_pipe != 0,
                                                    p.decode_half != 0, p.decode_deep);
    const bool plain_ok = lin::decode_available(im.wfmt, fp16, nt, lws, p.decode_pipe != 0,
                                                p.decode_half != 0, p.decode_deep, false,
                                                lin::wtraits(im.wfmt).fp8mma ? p.decode_mma : 0);
    p.decode_lean = lean_ok && (plan.decode_lean || !plain_ok) ? 1 : 0;
  }
  p.partial = (p.split > 1 && !plan.split_cluster)
                  ? reinterpret_cast<float*>(b.scratch + plan.off_partial)
                  : nullptr;
  // The early trigger at one token tile (M <= 8), where round 64 measured it.
  p.stream_trig = (plan.stream_trig & 8) && nt == 1 ? 1 : 0;
  lin::launch_linear_decode(im.wfmt, fp16, nt, p, stream);
  if (p.partial != nullptr) lin::launch_linear_reduce(p, stream);
}

// ---------------------------------------------------------------- one-shot -------------------
namespace {

struct ScratchCache {
  std::mutex mu;
  std::map<std::tuple<int, int, int64_t, int64_t, int, int, int64_t>, Plan> plans;
  std::map<int, std::pair<void*, int64_t>> scratch;  // per device
};
ScratchCache& cache() {
  static ScratchCache* c = new ScratchCache();  // never destroyed (used at exit by other statics)
  return *c;
}

}  // namespace

void linear(const PackedWeight& weight, const TensorRef& x, const TensorRef& x_scale,
            const TensorRef& out, const TensorRef& bias, const TensorRef& alpha, Stream stream,
            int64_t expected_m) {
  const char* op = "gemm::linear";
  check_defined(x, op, "x");
  check_ndim(x, op, "x", 2);
  B12X_CHECK_ARG(x.data != nullptr, op, ": x is missing");
  const int64_t M = x.shape[0];
  if (M == 0) return;
  DType act = x.dtype;
  if (act == DType::kUInt8 && format_is_w4a4(weight.format())) act = DType::kFP4E2M1;
  if (act == DType::kUInt8 && weight.format() == LinearFormat::kFp8Tensor) act = DType::kFP8E4M3;
  Caps caps;
  caps.device = weight.device();
  caps.format = weight.format();
  caps.max_tokens = M;
  caps.in_features = weight.in_features();
  caps.out_features = weight.out_features();
  caps.act_dtype = act;
  caps.out_dtype = out.dtype;
  caps.expected_m = expected_m;
  auto& c = cache();
  Plan p;
  void* scratch_ptr = nullptr;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    const auto key =
        std::make_tuple(caps.device, static_cast<int>(caps.format), caps.in_features,
                        caps.out_features, static_cast<int>(act), static_cast<int>(out.dtype), M);
    auto it = c.plans.find(key);
    if (it == c.plans.end()) {
      refuse_during_capture(stream, op);
      it = c.plans.emplace(key, plan(caps)).first;
    }
    p = it->second;
    auto& s = c.scratch[caps.device];
    if (s.second < p.scratch_bytes) {
      refuse_during_capture(stream, op);
      int prev = 0;
      B12X_CUDA_CHECK(cudaGetDevice(&prev));
      B12X_CUDA_CHECK(cudaSetDevice(caps.device));
      // The old buffer may still be in use by queued work on any stream.
      B12X_CUDA_CHECK(cudaDeviceSynchronize());
      if (s.first) B12X_CUDA_CHECK(cudaFree(s.first));
      s.first = nullptr;
      s.second = 0;
      B12X_CUDA_CHECK(cudaMalloc(&s.first, p.scratch_bytes));
      s.second = p.scratch_bytes;
      B12X_CUDA_CHECK(cudaSetDevice(prev));
    }
    scratch_ptr = s.first;
  }
  TensorRef scratch;
  if (p.scratch_bytes > 0)
    scratch = TensorRef::contiguous(scratch_ptr, DType::kUInt8, {p.scratch_bytes}, caps.device);
  run(bind(p, scratch, x, x_scale, weight, out, bias, alpha), stream);
}

}  // namespace b12x::gemm
