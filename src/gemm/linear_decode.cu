// Weight-streaming (decode regime) kernel instantiations and launcher: the FP4 and GGML formats'
// instances (the FP8 weight formats' in linear_decode_fp8.cu, compiled in parallel).
#include <algorithm>
#include <type_traits>

#include "b12x/runtime.h"
#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_decode.cuh"
#include "gemm/linear_decode.h"
#include "gemm/linear_decode_inst.cuh"
#include "gemm/linear_launch.h"

namespace b12x::gemm::lin {

namespace {

using decode_inst::decode_fn;
using decode_inst::DecodeFn;
using decode_inst::pick_decode_fp8;
using decode_inst::pick_decode_fp8_xshare;

constexpr int64_t kDecodeRingMax = 4 * kDecodeStagesMax * 4096;
static_assert(kDecodeRingMax + std::max(kDecodeStageBudget, kDecodePipeBudget) + 15 * 1024 <=
                  101376,
              "decode kernel must fit SM12x's 99 KB of shared memory per block");

/// The FP4 weight ring of a CTA (4 warps x 2 slices of 4 KB, 32 KB), the ring that
/// kDecodeHalfStageBudget is sized beside.
constexpr int64_t kFp4RingBytes = decode_ring_bytes(WFmt::kNvfp4);
static_assert(kFp4RingBytes == decode_ring_bytes(WFmt::kMxfp4) && kFp4RingBytes == 4 * 2 * 4096,
              "the FP4 rings are the ones kDecodeHalfStageBudget leaves room for");

thread_local DecodeLaunch t_last;  // last_decode_launch()

DecodeFn pick_decode(WFmt f, bool fp16, int nt, int ws = 1, bool pipe = false, bool half = false,
                     int deep = 0, bool lean = false, int mma = 0) {
  switch (f) {
    case WFmt::kNvfp4:
      return fp16 ? decode_fn<WFmt::kNvfp4, Fp16Tag>(nt, ws, pipe, half, deep, lean)
                  : decode_fn<WFmt::kNvfp4, Bf16Tag>(nt, ws, pipe, half, deep, lean);
    case WFmt::kMxfp4:
      return fp16 ? decode_fn<WFmt::kMxfp4, Fp16Tag>(nt, ws, pipe, half, deep, lean)
                  : decode_fn<WFmt::kMxfp4, Bf16Tag>(nt, ws, pipe, half, deep, lean);
    case WFmt::kQ8_0:
      return fp16 ? decode_fn<WFmt::kQ8_0, Fp16Tag>(nt, ws, pipe, half, deep, lean)
                  : decode_fn<WFmt::kQ8_0, Bf16Tag>(nt, ws, pipe, half, deep, lean);
    case WFmt::kIq2Xxs:
      return fp16 ? decode_fn<WFmt::kIq2Xxs, Fp16Tag>(nt, ws, pipe, half, deep, lean)
                  : decode_fn<WFmt::kIq2Xxs, Bf16Tag>(nt, ws, pipe, half, deep, lean);
    case WFmt::kIq2Xs:
      return fp16 ? decode_fn<WFmt::kIq2Xs, Fp16Tag>(nt, ws, pipe, half, deep, lean)
                  : decode_fn<WFmt::kIq2Xs, Bf16Tag>(nt, ws, pipe, half, deep, lean);
    case WFmt::kFp8:
    case WFmt::kFp8Mx:
    case WFmt::kFp8Block:
      // BF16 MMAs only (their activations are dequantized or e4m3); linear_decode_fp8.cu.
      return fp16 ? nullptr : pick_decode_fp8(f, nt, ws, pipe, half, deep, lean, mma);
  }
  return nullptr;
}

}  // namespace

DecodeLaunch last_decode_launch() {
  return t_last;
}

bool decode_available(WFmt f, bool fp16, int nt, int ws, bool pipe, bool half, int deep, bool lean,
                      int mma) {
  return pick_decode(f, fp16, nt, ws, pipe, half, deep, lean, mma) != nullptr;
}

bool decode_pipe_available(WFmt f, bool fp16) {
  return pick_decode(f, fp16, 1, 1, true) != nullptr;
}

bool decode_kernel_available(WFmt f, bool fp16, int nt) {
  return (nt == 1 || nt == 2) && pick_decode(f, fp16, nt) != nullptr;
}

bool decode_half_available(WFmt f, bool fp16) {
  return pick_decode(f, fp16, 1, 1, false, true) != nullptr;
}

bool decode_ws_available(WFmt f, bool fp16, int ws) {
  return pick_decode(f, fp16, 1, ws) != nullptr ||
         pick_decode(f, fp16, 1, ws, false, false, 0, true) != nullptr;
}

bool decode_xshare_available(WFmt f, bool fp16, int deep, int mma, int nt) {
  return !fp16 && pick_decode_fp8_xshare(f, deep, mma, nt) != nullptr;
}

bool decode_var_available(WFmt f, bool fp16, int ws, int deep, int mma, int var) {
  return !fp16 && decode_inst::pick_decode_fp8_var(f, ws, deep, mma, var) != nullptr;
}

int decode_xshare_max_clusters(int device, WFmt f, int deep, int mma, int xshare, int64_t smem,
                               int nt) {
  const DecodeFn fn = pick_decode_fp8_xshare(f, deep, mma, nt);
  if (fn == nullptr || xshare < 2) return 0;
  const ::b12x::detail::DeviceScope scope(device);
  B12X_CUDA_CHECK(
      ::b12x::detail::opt_in_smem(reinterpret_cast<const void*>(fn), static_cast<int>(smem)));
  return ::b12x::detail::max_active_clusters(reinterpret_cast<const void*>(fn), 128,
                                             static_cast<int>(smem), xshare);
}

bool decode_deep_available(WFmt f, bool fp16, int deep) {
  return pick_decode(f, fp16, 1, 4, false, false, deep) != nullptr ||
         pick_decode(f, fp16, 1, 4, false, false, deep, true) != nullptr;
}

int64_t decode_ring_bytes_deep(WFmt f, int deep, int ws) {
  return int64_t{ws == 8 ? 8 : 4} * (decode_stages(f) + deep) * decode_chunk_bytes(f);
}

bool decode_lean_available(WFmt f, bool fp16, int nt, int ws, bool pipe, bool half, int deep) {
  return pick_decode(f, fp16, nt, ws, pipe, half, deep, true) != nullptr;
}

bool decode_ws8_available(WFmt f, bool fp16) {
  return decode_ws_available(f, fp16, 8);
}

void launch_linear_decode(WFmt f, bool fp16, int nt, const LinearParams& p, Stream stream) {
  const int ws = std::max(p.decode_ws, 1);
  // Warps splitting K inside the CTA: one CTA per 4 / ws row tiles over its whole K range, staged
  // at once (plan chooses it only then), reduced in a cluster if K is split over CTAs too.
  // (With the pipelined staging, the K parts interleave over chunks of a multiple of ws slices.)
  const bool pipe = p.decode_pipe != 0;
  // 8-warp CTAs, the two warps of a tile on the halves of each slice (one warp per tile
  // otherwise; no constraint on the staging or the split).
  const bool half = p.decode_half != 0;
  B12X_ASSERT(ws == 1 || (!half && (nt == 1 || pipe || p.decode_xshare > 1) &&
                          (p.split == 1 || p.cluster_split == p.split) && p.partial == nullptr &&
                          (pipe ? p.stage_slices % ws == 0 : p.stage_slices >= p.slices_per_cta)),
              "decode warp split ", ws, " with split ", p.split, " stage slices ", p.stage_slices);
  // Pipelined staging: plain 16-byte copies of BF16 / e4m3 activations without group scales,
  // chunks of at least kStages - 1 slices per K part.
  B12X_ASSERT(!pipe || (p.x_vec16 && p.xs_kind == kXsNone &&
                        (p.act_kind == kActRaw16 || wtraits(f).fp8mma) &&
                        p.stage_slices >= (decode_stages(f) - 1) * ws),
              "decode pipelined staging with ws ", ws, " act ", p.act_kind, " xs ", p.xs_kind);
  // Deeper rings: the plan takes them only where ring + staging fit kDecodeDeepBudget.
  const int deep = p.decode_deep;
  // FP8 weights: the MMA kind (LinearParams::decode_mma).
  const int mma = wtraits(f).fp8mma && p.decode_mma != 0 ? 1 : 0;
  // The shared staging (kXsh): clusters of S CTAs along x on the 4-warp grid, e4m3 rows whose
  // K range is one bulk copy per row and rank (16-byte aligned pieces); its staging within
  // kDecodeXshBudget (SM90 only).
  const int xsh = p.decode_xshare > 1 ? p.decode_xshare : 0;
  B12X_ASSERT(
      xsh == 0 || ((xsh == 2 || xsh == 4) && ws == 4 && nt <= 2 && !pipe && !half && !fp16 &&
                   p.cluster_split <= 1 && p.act_kind == kActFp8 &&
                   (p.xs_kind == kXsNone) == (f == WFmt::kFp8) && p.x_vec16 && p.K % 16 == 0 &&
                   p.ldx_bytes % 16 == 0 && p.stage_slices >= p.slices_per_cta),
      "decode shared staging ", xsh, " with ws ", ws, " nt ", nt, " K ", p.K);
  // kVar (session 28, M = 1): one token row, one token tile, no shared staging.
  const int var = p.decode_var;
  B12X_ASSERT(var == 0 || (p.M == 1 && nt == 1 && !xsh && !pipe && !half && !fp16),
              "decode variant ", var, " at M ", p.M, " nt ", nt);
  DecodeFn fn = xsh   ? pick_decode_fp8_xshare(f, deep, mma, nt)
                : var ? decode_inst::pick_decode_fp8_var(f, ws, deep, mma, var)
                      : pick_decode(f, fp16, nt, ws, pipe, half, deep, p.decode_lean != 0, mma);
  B12X_ASSERT(fn != nullptr, "no decode kernel for format ", static_cast<int>(f), " fp16=", fp16);
  B12X_ASSERT(p.stage_rows >= 1 && p.stage_rows <= 8 * nt && p.stage_slices >= 1,
              "decode staging rows=", p.stage_rows, " slices=", p.stage_slices);
  const int64_t stage_bytes = stage_geom(f, p.stage_rows, p.stage_slices).bytes * (pipe ? 2 : 1);
  const int64_t pipe_budget = std::max<int64_t>(kDecodePipeBudget, p.decode_pipe_budget);
  // The halves' one staging buffer: kDecodeHalfStageBudget beside the FP4 ring (32 KB); the FP8
  // ring (48 KB) leaves the default staging budget.
  const int64_t half_stage_budget =
      decode_ring_bytes(f) <= kFp4RingBytes ? kDecodeHalfStageBudget : kDecodeStageBudget;
  B12X_ASSERT(stage_bytes <= (xsh    ? kDecodeXshBudget
                              : pipe ? pipe_budget
                              : half ? half_stage_budget
                                     : kDecodeStageBudget),
              "decode staging needs ", stage_bytes, " B of shared memory");
  const int64_t smem = decode_ring_bytes_deep(f, deep, ws) + stage_bytes + (xsh ? 16 : 0);
  B12X_ASSERT(deep == 0 || xsh || smem <= kDecodeDeepBudget, "decode deep ring ", deep, " needs ",
              smem, " B of shared memory");
  // 8 warps per tile: within the device's shared memory per block (run checks it).
  const int64_t ws8_budget = ws == 8 ? p.decode_ws8_budget : 0;
  B12X_ASSERT(ws != 8 || smem <= ws8_budget, "decode with 8 warps per tile needs ", smem,
              " B of shared memory");
  {
    // The opt-in above 48 KB: once per device and kernel, to the whole budget (opt_in_smem raises
    // it once more where a launch needs more than an earlier one). The halves: their
    // ring plus the larger of their two staging budgets. The pipelined kernels: the largest ring
    // plus this launch's pipelined budget (LinearParams::decode_pipe_budget, the default's or the
    // B12X_GEMM_DECODE_PIPE_KB probe's, which the run bounds by the device's opt-in).
    // The shared staging (SM90 only): kDecodeXshBudget.
    const int64_t most = xsh        ? kDecodeXshBudget
                         : ws == 8  ? ws8_budget
                         : deep > 0 ? kDecodeDeepBudget
                         : half ? decode_ring_bytes(f) + std::max(half_stage_budget, pipe_budget)
                                : kDecodeRingMax + (pipe ? pipe_budget : kDecodeStageBudget);
    B12X_ASSERT(smem <= most, "decode launch needs ", smem, " B of shared memory, above ", most);
    B12X_CUDA_CHECK(
        ::b12x::detail::opt_in_smem(reinterpret_cast<const void*>(fn), static_cast<int>(most)));
  }
  const int64_t tok_tiles = (p.M + 8 * nt - 1) / (8 * nt);
  B12X_ASSERT(tok_tiles <= 65535, "too many token tiles: M=", p.M);
  const int tiles_per_cta = half ? 4 : ws == 8 ? 1 : 4 / ws;
  const int64_t ctas_x = (p.n16 + tiles_per_cta - 1) / tiles_per_cta;
  const dim3 grid(static_cast<unsigned>(xsh ? (ctas_x + xsh - 1) / xsh * xsh : ctas_x),
                  static_cast<unsigned>(p.split), static_cast<unsigned>(tok_tiles));
  // Programmatic dependent launch lets the weight stream start while the previous kernel
  // finishes; split-K CTAs of one row block form a cluster.
  B12X_ASSERT(p.cluster_split <= 1 || (p.cluster_split == p.split && p.split <= 8),
              "cluster split ", p.cluster_split);
  const dim3 cluster(xsh ? static_cast<unsigned>(xsh) : 1u,
                     p.cluster_split > 1 ? static_cast<unsigned>(p.split) : 1u, 1);
  t_last = DecodeLaunch{
      nt,   ws,  deep, p.split, static_cast<int>(cluster.y), pipe, half, p.decode_lean != 0,
      smem, mma, xsh};
  t_last.diag = (var & 1) != 0;
  t_last.sring = (var & 2) != 0;
  B12X_CUDA_CHECK(b12x::detail::launch_ex(fn, grid, dim3(half || ws == 8 ? 256 : 128),
                                          static_cast<size_t>(smem), stream, p.pdl != 0, cluster,
                                          p));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
