// Launchers of the decode stream (kernels/moe_decode.cuh): FP4 weights, M * topk <= 1024.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <type_traits>

#include "core/cuda_check.h"
#include "moe/kernels/moe_decode.cuh"
#include "moe/moe_launch.h"
#include "moe/moe_launch_util.h"

namespace b12x::moe::detail {
namespace {

using dev::DecodeCfg;

// FC1 CTAs per SM the tile groups are sized for: 3 of 8 warps, 2 of the 12-warp variant.
constexpr int fc1_ctas_per_sm(int warps) {
  return warps == DecodeCfg::kFc1Warps ? 3 : 2;
}

// FC2 CTA shape {warps, ring stages per warp}: 8 warps while the per-warp combine rows fit
// (<= 32 tokens), else 4 x 4; 5 stages where the deep ring applies, else decode_fc2_stages
// (2 or 3). Measurement knobs (DecodeKnobs): fc2_warps = 4 forces 4 x 4 (6 shallow CTAs per SM
// instead of 3), = 8 takes 8 x 2 up to kFc2Wide2MaxTokens tokens (33..64 tokens: 2 CTAs of 8
// warps per SM instead of 3 of 4); fc2_stages = 2 / 3 forces the shallow 8-warp CTA's stages.
struct Fc2Shape {
  int warps, stages;
};
Fc2Shape fc2_shape(const DecodeArgs& a, const DecodeKnobs& k, bool deep, int row_blocks) {
  const int forced = k.fc2_warps, stages = k.fc2_stages;
  if (forced == 8 && !deep && a.num_tokens > DecodeCfg::kFc2WideMaxTokens &&
      a.num_tokens <= DecodeCfg::kFc2Wide2MaxTokens)
    return {8, 2};
  if (forced == 4 || a.num_tokens > DecodeCfg::kFc2WideMaxTokens) return {4, 4};
  if (deep) return {8, DecodeCfg::kFc2DeepStages};
  if (stages == 2 || stages == 3) return {8, stages};
  return {8, decode_fc2_stages(a.routes, row_blocks, a.fc2_split, a.sm_count)};
}

template <typename OpT, bool kFold, int kSK, int kRC, int kWM, int kG,
          int kNW = DecodeCfg::kFc1Warps, bool kBal = false, bool kLast = false, bool kTR = false,
          bool kSlotU = false>
void launch_fc1(const DecodeArgs& a, const DecodeKnobs& kn, Stream stream, bool pdl) {
  auto* k =
      dev::moe_decode_fc1_kernel<OpT, kFold, kSK, kWM, kG, kNW, kBal, kRC, kLast, kTR, kSlotU>;
  constexpr int kSmem = DecodeCfg::fc1_smem(kNW);
  // Above 48 KB of dynamic shared memory needs the opt-in (once per device and kernel); three
  // CTAs (3 x ~69 KB) per SM only with the whole unified L1 given to shared memory.
  B12X_CUDA_CHECK(::b12x::detail::opt_in_smem(reinterpret_cast<const void*>(k), kSmem, true));
  const int row_blocks = a.w1.rows_pad / (32 * kWM);
  int y = decode_fc1_tile_groups(kn, a.routes, row_blocks, a.sm_count, fc1_ctas_per_sm(kNW));
  if constexpr (kLast) y = decode_fc1_fine_groups(kn, a.routes, a.w1.K_pad / 128, y);
  const dim3 grid(static_cast<unsigned>(row_blocks), static_cast<unsigned>(y));
  launch_k(k, grid, dim3(32 * kNW), kSmem, stream, pdl, a);
  B12X_CUDA_CHECK_LAUNCH();
}

// The FC2 cluster size of the last launch (1: none); tests read it (decode_last_fc2_cluster).
std::atomic<int> g_last_fc2_cluster{1};
// Whether the last [Q] launch ran the lean NVFP4 instance (decode_last_q_lean, tests).
std::atomic<int> g_last_q_lean{0};
// Whether the last launch ran FC1 on the ready words (decode_last_fc1_rdy, tests).
std::atomic<int> g_last_fc1_rdy{0};
// The prepared layout WarpStage::issue<true> assumes: codes and UE4M3 scales in 32-row chunk
// tiles (always for FP4 weights: make_view in moe.cc).
bool refill_tiled(const WeightView& w) {
  return w.scale_kind == 0 && w.values_row_stride == 64 && w.values_k_stride == 2048 &&
         w.scales_row_stride == 8 && w.scales_k_stride == 256;
}

template <typename OpT, bool kFold, int kSK, int kRC, int kW, int kS, int kR = DecodeCfg::kFc2Rows,
          bool kKil = false, bool kTR = false, bool kSlotU = false>
void launch_fc2(const DecodeArgs& a, Stream stream, bool pdl) {
  auto* k = dev::moe_decode_fc2_kernel<OpT, kFold, kSK, kW, kS, kRC, kR, kKil, kTR, kSlotU>;
  {  // the largest shared memory this instance is launched with, once per device
    const bool deep = kS == DecodeCfg::kFc2DeepStages;
    const int max_tokens = kR == 32             ? DecodeCfg::kFc2Rows32MaxTokens
                           : deep               ? kFc2DeepMaxRoutes
                           : kW == 8 && kS == 2 ? DecodeCfg::kFc2Wide2MaxTokens
                           : kW == 8            ? DecodeCfg::kFc2WideMaxTokens
                                                : DecodeCfg::kMaxTokens;
    B12X_CUDA_CHECK(::b12x::detail::opt_in_smem(reinterpret_cast<const void*>(k),
                                                DecodeCfg::fc2_smem(kW, kS, max_tokens, kR), true));
  }
  const dim3 grid(static_cast<unsigned>(a.w2.rows_pad / kR), static_cast<unsigned>(a.fc2_split));
  const size_t smem = static_cast<size_t>(DecodeCfg::fc2_smem(kW, kS, a.num_tokens, kR));
  // decode_fc2_cluster (run's choice from the plan's fit, decode_fc2_cluster_fit): only where a
  // cluster of the split's CTAs can be resident on this device; else the fp32 partials (sized and
  // zeroed for any split).
  const bool cl = kR == 32 && a.fc2_cluster != 0 && a.fc2_split > 1 && a.fc2_split <= 4;
  g_last_fc2_cluster.store(cl ? a.fc2_split : 1, std::memory_order_relaxed);
  if (cl) {  // the row block's CTAs: one cluster
    B12X_CUDA_CHECK(::b12x::detail::launch_ex(k, grid, dim3(32 * kW), smem, stream, pdl,
                                              dim3(1, static_cast<unsigned>(a.fc2_split), 1), a));
  } else {
    DecodeArgs b = a;
    b.fc2_cluster = 0;
    launch_k(k, grid, dim3(32 * kW), smem, stream, pdl, b);
  }
  B12X_CUDA_CHECK_LAUNCH();
}

// pdl1: FC1's programmatic edge (off after a memset node). Launches with more than
// kMaxInlineRoutes routes (kRC = kMaxStreamRoutes, the wide routing) run a subset of the shapes:
// the 8-warp FC1 with one or two row warps, one or two groups (barrier tile ends), balanced or
// not, and the shallow or 4-warp FC2.
template <typename OpT, bool kFold, int kSK, int kRC>
void launch_gemms(const DecodeArgs& a, const DecodeKnobs& kn, Stream stream, bool pdl1, bool pdl) {
  const bool mx = a.aquant == num::kAMxfp8 || a.aquant == num::kAMxfp4;
  // Two FC1 row warps only for MX-quantised FC2 inputs (decode_fc1_row_warps), so only with BF16
  // operands: the FP16 instances have one row warp (the kBf16 ? 2 : 1 below names no new one).
  constexpr bool kBf16 = std::is_same_v<OpT, __nv_bfloat16>;
  if constexpr (!kBf16)
    B12X_ASSERT(!mx && a.fc1_wm == 1, "decode stream: FP16 operands are A16-only");
  constexpr bool kWide = kRC != kMaxInlineRoutes;
  // BF16 operands with UE4M3 scales, narrow routing (kTR): the ring refills take the chunk tiles'
  // constant strides (session 25, round 93: 0.980-0.996x on 29 of the 32 M <= 8 rows, DeepSeek-TP4
  // nvfp4 M = 4 1.009x; round 94: the stride-general refills 1.002-1.041x against them on 16 of
  // 19 rows, Qwen3-30B nvfp4 M = 8 0.999x, DeepSeek-TP4 M = 4 nvfp4 / w4a16 0.981 / 0.990x). The
  // other operand and scale kinds keep the stride-general refills.
  constexpr bool kTR = kBf16 && kSK == 0 && !kWide;
  if constexpr (kTR)
    B12X_ASSERT(refill_tiled(a.w1) && refill_tiled(a.w2),
                "decode stream: FP4 weights not in 32-row chunk tiles");
  if constexpr (kWide) {
    if (a.fc1_bal != 0)
      launch_fc1<OpT, kFold, kSK, kRC, 1, 1, DecodeCfg::kFc1Warps, true>(a, kn, stream, pdl1);
    else if (kBf16 && a.fc1_wm == 2)
      launch_fc1<OpT, kFold, kSK, kRC, kBf16 ? 2 : 1, 1>(a, kn, stream, pdl1);
    else if (a.fc1_groups == 2)
      launch_fc1<OpT, kFold, kSK, kRC, 1, 2>(a, kn, stream, pdl1);
    else
      launch_fc1<OpT, kFold, kSK, kRC, 1, 1>(a, kn, stream, pdl1);
  } else if (a.fc1_bal != 0 && a.fc1_warps == DecodeCfg::kFc1WideWarps) {
    launch_fc1<OpT, kFold, kSK, kRC, 1, 1, DecodeCfg::kFc1WideWarps, true>(a, kn, stream, pdl1);
  } else if (a.fc1_bal != 0) {
    launch_fc1<OpT, kFold, kSK, kRC, 1, 1, DecodeCfg::kFc1Warps, true>(a, kn, stream, pdl1);
  } else if (kBf16 && a.fc1_wm == 2) {
    launch_fc1<OpT, kFold, kSK, kRC, kBf16 ? 2 : 1, 1>(a, kn, stream, pdl1);
  } else if (a.fc1_warps == DecodeCfg::kFc1WideWarps) {
    launch_fc1<OpT, kFold, kSK, kRC, 1, 1, DecodeCfg::kFc1WideWarps, false, false, kTR>(
        a, kn, stream, pdl1);
  } else if (a.fc1_groups == 2) {  // decode_fc1_last: always the last-warp tile ends here
    bool slot_u = false;
    if constexpr (kTR) {  // probe B12X_MOE_FC1_SLOT: constant ring slots (kSlotU)
      slot_u = kn.fc1_slot == 1;
      if (slot_u)
        launch_fc1<OpT, kFold, kSK, kRC, 1, 2, DecodeCfg::kFc1Warps, false, true, kTR, true>(
            a, kn, stream, pdl1);
    }
    if (!slot_u)
      launch_fc1<OpT, kFold, kSK, kRC, 1, 2, DecodeCfg::kFc1Warps, false, true, kTR>(a, kn, stream,
                                                                                     pdl1);
  } else {
    launch_fc1<OpT, kFold, kSK, kRC, 1, 1, DecodeCfg::kFc1Warps, false, false, kTR>(a, kn, stream,
                                                                                    pdl1);
  }
  if constexpr (!kWide) {
    if (a.fc2_rows == 32) {  // decode_fc2_rows: <= kFc2Rows32MaxTokens tokens, narrow routing
      // 3 stages (2 CTAs per SM; H200 round 45, Qwen3.5-TP4 nvfp4 M = 8 210.6 -> 204.5 us
      // against 2 stages at 3 CTAs per SM, 80 registers); B12X_MOE_FC2_STAGES=2 the 2-stage CTA.
      // K-interleaved warps (decode_fc2_kil) in the 3-stage CTA only.
      // Probe B12X_MOE_FC2_SLOT: the 3-stage CTAs with constant ring slots (kSlotU; kTR only).
      const bool slot_u = kTR && kn.fc2_slot == 1;
      if (a.fc2_stages32 == 2)  // decode_fc2_stages32
        launch_fc2<OpT, kFold, kSK, kRC, 8, 2, 32, false, kTR>(a, stream, pdl);
      else if (a.fc2_kil != 0 && slot_u)
        launch_fc2<OpT, kFold, kSK, kRC, 8, 3, 32, true, kTR, kTR>(a, stream, pdl);
      else if (a.fc2_kil != 0)
        launch_fc2<OpT, kFold, kSK, kRC, 8, 3, 32, true, kTR>(a, stream, pdl);
      else if (slot_u)
        launch_fc2<OpT, kFold, kSK, kRC, 8, 3, 32, false, kTR, kTR>(a, stream, pdl);
      else
        launch_fc2<OpT, kFold, kSK, kRC, 8, 3, 32, false, kTR>(a, stream, pdl);
      return;
    }
  }
  const int fc2_row_blocks = a.w2.rows_pad / DecodeCfg::kFc2Rows;
  const bool deep =
      !kWide && decode_fc2_deep(kn, a.routes, a.fc2_split, fc2_row_blocks, a.sm_count);
  const Fc2Shape f2 = fc2_shape(a, kn, deep, fc2_row_blocks);
  if (f2.warps == 4)
    launch_fc2<OpT, kFold, kSK, kRC, 4, 4>(a, stream, pdl);
  else if constexpr (!kWide) {
    if (f2.stages == DecodeCfg::kFc2DeepStages)
      launch_fc2<OpT, kFold, kSK, kRC, 8, DecodeCfg::kFc2DeepStages>(a, stream, pdl);
    else if (f2.stages == 2)
      launch_fc2<OpT, kFold, kSK, kRC, 8, 2>(a, stream, pdl);
    else if (a.fc2_kil != 0)  // decode_fc2_kil: the 3-stage CTA only
      launch_fc2<OpT, kFold, kSK, kRC, 8, 3, DecodeCfg::kFc2Rows, true>(a, stream, pdl);
    else
      launch_fc2<OpT, kFold, kSK, kRC, 8, 3>(a, stream, pdl);
  } else if (f2.stages == 2) {
    launch_fc2<OpT, kFold, kSK, kRC, 8, 2>(a, stream, pdl);
  } else {
    launch_fc2<OpT, kFold, kSK, kRC, 8, 3>(a, stream, pdl);
  }
}

template <typename OpT, bool kFold, int kSK>
void launch_gemms_rc(const DecodeArgs& a, const DecodeKnobs& kn, Stream stream, bool pdl1,
                     bool pdl) {
  if (a.routes > kMaxInlineRoutes)
    launch_gemms<OpT, kFold, kSK, kMaxStreamRoutes>(a, kn, stream, pdl1, pdl);
  else
    launch_gemms<OpT, kFold, kSK, kMaxInlineRoutes>(a, kn, stream, pdl1, pdl);
}

// Whether a cluster of `split` CTAs fits for all 32-row FC2 instances of these operands (see
// decode_fc2_cluster_fit). The opt-in first: the occupancy query counts the shared memory asked.
template <typename OpT, bool kFold, int kSK>
bool fc2_cluster_fits(int split) {
  constexpr int kRC = kMaxInlineRoutes;
  constexpr bool kTR = std::is_same_v<OpT, __nv_bfloat16> && kSK == 0;  // launch_gemms' instances
  const void* fns[] = {reinterpret_cast<const void*>(
                           dev::moe_decode_fc2_kernel<OpT, kFold, kSK, 8, 2, kRC, 32, false, kTR>),
                       reinterpret_cast<const void*>(
                           dev::moe_decode_fc2_kernel<OpT, kFold, kSK, 8, 3, kRC, 32, false, kTR>),
                       reinterpret_cast<const void*>(
                           dev::moe_decode_fc2_kernel<OpT, kFold, kSK, 8, 3, kRC, 32, true, kTR>)};
  const int stages[] = {2, 3, 3};
  for (int i = 0; i < 3; ++i) {
    const int smem = DecodeCfg::fc2_smem(8, stages[i], DecodeCfg::kFc2Rows32MaxTokens, 32);
    B12X_CUDA_CHECK(::b12x::detail::opt_in_smem(fns[i], smem, true));
    if (::b12x::detail::max_active_clusters(fns[i], 32 * 8, smem, split) < 1) return false;
  }
  return true;
}

}  // namespace

int decode_fc2_cluster_fit(int device, int scale_kind, int max_split) {
  struct DeviceGuard {  // the occupancy queries ask the current device
    int prev = 0;
    explicit DeviceGuard(int dev) {
      B12X_CUDA_CHECK(cudaGetDevice(&prev));
      if (prev != dev) B12X_CUDA_CHECK(cudaSetDevice(dev));
    }
    ~DeviceGuard() {
      int cur = 0;
      if (cudaGetDevice(&cur) == cudaSuccess && cur != prev) (void)cudaSetDevice(prev);
    }
  } guard(device);
  int fit = 0;
  for (int s = 2; s <= std::min(max_split, 4); ++s) {
    // launch_decode_stream's operand / scale-folding instances: BF16 folded, FP16 folded for
    // UE4M3 scales, unfolded for E8M0.
    const bool ok =
        scale_kind == 0
            ? fc2_cluster_fits<__nv_bfloat16, true, 0>(s) && fc2_cluster_fits<__half, true, 0>(s)
            : fc2_cluster_fits<__nv_bfloat16, true, 1>(s) && fc2_cluster_fits<__half, false, 1>(s);
    if (ok) fit |= 1 << s;
  }
  return fit;
}

int decode_last_fc2_cluster() {
  return g_last_fc2_cluster.load(std::memory_order_relaxed);
}
int decode_last_q_lean() {
  return g_last_q_lean.load(std::memory_order_relaxed);
}
int decode_last_fc1_rdy() {
  return g_last_fc1_rdy.load(std::memory_order_relaxed);
}
int decode_fc1_smem_bytes() {
  return DecodeCfg::fc1_smem(DecodeCfg::kFc1WideWarps);  // the larger of the two variants
}
int decode_fc2_rows32_ctas(int device, int stages) {
  int per_sm = 0;
  B12X_CUDA_CHECK(
      cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  // 5120 B: the kernel's static shared memory beside the ring (the static_asserts' figure).
  const int cta = DecodeCfg::fc2_smem(8, stages, DecodeCfg::kFc2Rows32MaxTokens, 32) + 5120 + 1024;
  // The launch bounds' occupancy: 2 CTAs per SM with 3 stages, 3 with 2 (80 registers).
  return std::min(stages == 2 ? 3 : 2, per_sm / cta);
}
int decode_fc1_tile_groups(const DecodeKnobs& k, int routes, int row_blocks, int sm_count,
                           int ctas_per_sm) {
  // About one wave of FC1 CTAs: each CTA then walks ~ntiles / groups expert tiles.
  // At M = 1 (routes <= 3 * SMs / row blocks) this is one tile per CTA, as before.
  if (k.fc1_groups > 0) return std::min(k.fc1_groups, routes);
  const int slots = ctas_per_sm * std::max(sm_count, 1);
  return std::max(1, std::min(routes, slots / std::max(row_blocks, 1)));
}
bool decode_fc2_deep(const DecodeKnobs& k, int routes, int fc2_split, int row_blocks,
                     int sm_count) {
  // The deep ring (one CTA per SM) only where the grid needs at most ~2 waves of it (H200 round
  // 9, M = 1: Qwen3-30B / Qwen3.5-TP4 with 128 / 256 row blocks faster with it, DeepSeek-TP4 /
  // MiniMax with 448 / 384 faster with 3 shallow CTAs per SM).
  return k.fc2_deep != 0 && fc2_split == 1 && routes <= kFc2DeepMaxRoutes &&
         row_blocks <= 2 * std::max(sm_count, 1);
}

int decode_fc1_row_warps(int aquant, bool gated) {
  // Gated activations with MX-quantised FC2 inputs need 32 whole features per FC1 CTA. (Session
  // 21 removed the knob B12X_MOE_FC1_WM and its 4-row-warp instances: 2 / 4 row warps elsewhere
  // lost in H200 rounds 8 / 9 and 60, 64-row CTAs 0.941-0.960x against 0.920-0.948x for the two
  // warp groups that became the default.)
  const bool mx = aquant == num::kAMxfp8 || aquant == num::kAMxfp4;
  return mx && gated ? 2 : 1;
}

// Session 18: with last-warp tile ends (DecodeKnobs::fc1_last) also two unbalanced groups where a
// tile has > 32 sub-chunks and a CTA walks >= 2 tiles, up to kMaxInlineRoutes routes, instead of
// the balanced one group (DeepSeek-TP4 M = 4 / 8, MiniMax M = 1-8). H200 round 69, us, balanced
// one group -> two groups with last-warp ends: DeepSeek-TP4 nvfp4 M = 8 / 4 124.9 -> 118.4, 75.7
// -> 72.0, w4a16 M = 8 121.8 -> 115.8; MiniMax nvfp4 M = 8 / 4 / 2 277.6 -> 261.7, 156.1 ->
// 147.9, 88.9 -> 85.2, w4a16 M = 8 268.8 -> 256.8 (0.942-0.958x).
bool decode_fc1_long_groups(int routes, int per_cta, int k_chunks) {
  return k_chunks > 32 && per_cta >= 2 && routes <= kMaxInlineRoutes;
}

int decode_fc1_groups(const DecodeKnobs& k, int routes, int row_blocks, int sm_count, int wm,
                      int k_chunks) {
  // Two warp groups (4 K warps per tile) where a tile is short (<= 16 sub-chunks: 2 per warp
  // with 8 K warps) and a CTA walks >= 4 tiles (H200 round 12, Qwen3-30B nvfp4: M = 4 63.3 ->
  // 59.4 us, M = 8 96.1 -> 89.6; DeepSeek-TP4 / Qwen3.5-TP4 at M = 8 with 56 / 32 sub-chunks
  // per tile were slower with groups). Capped by the expected tiles per CTA (~routes / tile
  // groups): a group without a tile idles. Measurement knob DecodeKnobs::fc1_kg (1|2; session 21
  // removed 4 / 8 and their instances: 4 groups 1.004-1.038x on Qwen3.5-TP4 in round 61).
  // Session 16, on the chunk-tiled codes: also where a tile has 17-32 sub-chunks (<= 4 per warp
  // with 8 K warps, 8 with 4) and a CTA walks >= 3 tiles, up to kMaxInlineRoutes routes (the
  // balanced one group, decode_fc1_balanced, is then not taken). H200 round 60, Qwen3.5-TP4 (32
  // sub-chunks, 6 tile groups), us, balanced one group -> two groups: nvfp4 M = 2 / 4 / 8 66.3 ->
  // 61.0, 108.5 -> 101.9, 189.0 -> 179.1, w4a16 M = 8 182.3 -> 176.9 (0.920-0.970x; one
  // unbalanced group 0.935-0.983x, round 59 0.954-0.975x). MiniMax (48 sub-chunks) keeps the
  // balanced group (unbalanced 1.04-1.08x); DeepSeek-TP4 (56) too (two groups 0.99-1.01x).
  const int forced = k.fc1_kg;
  if (wm != 1) return 1;
  const int per_cta = routes / decode_fc1_tile_groups(k, routes, row_blocks, sm_count, 3);
  const bool short_tiles = k_chunks <= 16 && per_cta >= 4;
  const bool mid_tiles =
      k_chunks > 16 && k_chunks <= 32 && per_cta >= 3 && routes <= kMaxInlineRoutes;
  const bool long_tiles = decode_fc1_long_groups(routes, per_cta, k_chunks);
  int g = forced == 1 || forced == 2 ? forced : short_tiles || mid_tiles || long_tiles ? 2 : 1;
  while (g > 1 && g > per_cta) g /= 2;
  return g;
}

int decode_fc1_warps(const DecodeKnobs& k, int routes, int row_blocks, int sm_count, int wm,
                     int groups, int k_chunks) {
  // The 12-warp FC1 CTA (2 per SM) where its per-warp chain (expert tiles per CTA x sub-chunks
  // per warp, estimating ~routes tiles) is <= 0.85x the 8-warp one's: DeepSeek-TP4 at M = 1
  // (1 x 7 -> 1 x 5 sub-chunks; H200 round 13: 42.4 -> 37.3 us) and M = 2 (2 x 7 -> 2 x 5; round
  // 16: 65.5 -> 58.6 us). Measurement knob DecodeKnobs::fc1_wide 0: off; 1: the session-4 rule
  // (the 8-warp grid has <= 2 CTAs per SM); 3: wherever it can (one row warp, one group).
  const int knob = k.fc1_wide;
  if (knob == 0 || wm != 1 || groups != 1) return DecodeCfg::kFc1Warps;
  if (knob == 3) return DecodeCfg::kFc1WideWarps;
  if (knob == 1) {
    const int ctas = row_blocks * decode_fc1_tile_groups(k, routes, row_blocks, sm_count, 3);
    return ctas <= 2 * std::max(sm_count, 1) ? DecodeCfg::kFc1WideWarps : DecodeCfg::kFc1Warps;
  }
  auto chain = [&](int warps) {
    const int y = decode_fc1_tile_groups(k, routes, row_blocks, sm_count, fc1_ctas_per_sm(warps));
    return ((routes + y - 1) / y) * ((k_chunks + warps - 1) / warps);
  };
  return 100 * chain(DecodeCfg::kFc1WideWarps) <= 85 * chain(DecodeCfg::kFc1Warps)
             ? DecodeCfg::kFc1WideWarps
             : DecodeCfg::kFc1Warps;
}

int decode_fc1_last(bool wide, int wm, int warps, int groups, int bal) {
  // Last-warp tile ends: the 8-warp FC1 with two unbalanced groups, narrow routing (session 21
  // removed the knob B12X_MOE_FC1_LAST and the barrier-ended instances it reached). H200 round
  // 68, us, barrier tile ends -> last warp (bit-equal):
  // Qwen3.5-TP4 nvfp4 M = 2 / 4 / 8 58.5 -> 57.3, 97.5 -> 92.9, 174.3 -> 165.7 (FC1 113.7 ->
  // 107.9), w4a16 M = 8 171.7 -> 161.2; Qwen3-30B nvfp4 M = 4 / 8 0.998x. In the one balanced
  // group (its finisher also parks and sums the cut tiles' parts in global memory) 1.21-1.25x
  // slower (DeepSeek-TP4 M = 4 / 8, MiniMax M = 1 / 4 / 8), two balanced groups 1.02-1.27x: not
  // taken.
  return !wide && wm == 1 && warps == DecodeCfg::kFc1Warps && groups == 2 && bal == 0 ? 1 : 0;
}

int decode_fc1_fine_groups(const DecodeKnobs& k, int routes, int k_chunks, int y) {
  // Session 20 (default fc1_fine 1): the last-warp two-group FC1 on long tiles (> 32 sub-chunks:
  // DeepSeek-TP4 56, MiniMax 48) where the one-wave grid gives a CTA <= 6 tiles: ~2 tiles per CTA
  // (one per group), more waves of CTAs that the hardware deals to the SMs as they free up,
  // instead of whole tiles dealt once. H200, us, one wave -> routes / 2 tile groups: DeepSeek-TP4
  // nvfp4 M = 4 (Y 12 -> 16) 0.964 / 0.965 / 0.967x in rounds 74 / 75 / 76 (76: 72.7 -> 70.4),
  // M = 8 (12 -> 32) 0.989 / 0.986x in 75 / 76 (76: 119.3 -> 117.6), w4a16 M = 8 / 4 0.995 /
  // 0.997x, MiniMax nvfp4 M = 2 (2 -> 4) 0.998x (76). Not beyond 6 tiles per CTA (round 76, F1:
  // DeepSeek-TP4 M = 16 1.035x, MiniMax M = 16 1.058x, w4a16 M = 8 1.015x; M = 4 / 8 0.999 /
  // 1.001x). fc1_fine 2 (~2.7 tiles per CTA, no cap): DeepSeek-TP4 M = 8 0.978x, M = 4 = the one
  // wave, M = 16 1.010x, MiniMax M = 2 / 8 / 16 1.074 / 0.987 / 1.026x. 0: one wave.
  // Session 21: from 64 routes 7 routes / 16 (DeepSeek-TP4 M = 8: Y 28 instead of 32, ~2 tiles
  // per CTA for its ~57 tiles). H200, us, Y 32 -> 28 (bit-equal): nvfp4 M = 8 0.986x (round 76,
  // against the one wave 0.986 -> 0.972x), 116.6 -> 114.9 (0.985x, round 78), 115.3 -> 113.6
  // (0.985x, round 79); w4a16 M = 8 1.004 / 0.994x (rounds 78 / 79). Y 24 / 26 / 30 0.996 / 0.993 /
  // 1.016x, 36 / 40 1.118 / 1.137x; M = 4 keeps routes / 2 (Y 14 1.066x, round 78).
  if (k.fc1_groups > 0 || k.fc1_fine == 0 || k_chunks <= 32) return y;
  if (k.fc1_fine == 1 && routes > 6 * y) return y;
  const int fine = k.fc1_fine == 2 ? (3 * routes + 7) / 8
                   : routes >= 64  ? 7 * routes / 16
                                   : (routes + 1) / 2;
  return std::max(y, std::min(routes, fine));
}

bool decode_fc1_balanced(int routes, int tile_groups, int warps, int k_chunks) {
  // Balanced ranges where the unbalanced per-warp chain (tiles per CTA, estimating ~routes
  // tiles, x sub-chunks per warp) is > 10 sub-chunks (>= 10 before session 16). H200 round 22,
  // nvfp4, us (unbalanced -> balanced): MiniMax M = 1 / 2 / 4 / 8 (chains 12 / 24 / 48 / 96) 73.6
  // -> 66.6, 124.4 -> 111.8, 223.8 -> 198.2, 409.2 -> 362.9; DeepSeek-TP4 M = 2 / 4 / 8 (10 / 21 /
  // 42) 53.2 -> 52.3, 100.0
  // -> 93.9, 163.2 -> 152.2; Qwen3.5-TP4 M = 4 / 8 (28 / 56) 132.2 -> 125.4, 231.7 -> 212.1, M = 2
  // (16) 76.0 -> 76.8. Shorter chains lose the cut tiles' extra round trip: Qwen3.5-TP4 M = 1 (8)
  // 43.3 -> 47.7, DeepSeek-TP4 M = 1 (5) 33.0 -> 34.5, Qwen3-30B M = 1 / 2 (2 / 4) 24.1 -> 24.8,
  // 31.8 -> 35.5; Qwen3-30B M = 4 / 8 keep their two warp groups (47.0 -> 52.1, 74.5 -> 79.9 with
  // one balanced group).
  // Above 128 routes (the wide routing) only where a row block has <= 2 tile groups. H200 round
  // 26, nvfp4 M = 32, balanced vs not: MiniMax (2 groups) 1006 vs 1145 us; DeepSeek-TP4 (12)
  // 509 vs 432, Qwen3.5-TP4 (6) 820 vs 709; w4a16 Qwen3.5-TP4 M = 32 814 vs 700.
  // Session 16 (chunk-tiled codes): > 10, not >= 10. H200 rounds 59 / 60 / 61, DeepSeek-TP4
  // nvfp4 M = 2 (12 warps, chain 2 tiles x 5 sub-chunks), balanced -> unbalanced: 0.986 / 0.984 /
  // 0.969x (round 61: 45.5 -> 44.1 us); M = 4 (21) 1.011 / 0.990 / 0.995x, M = 8 (42) 1.007-1.022x
  // (kept balanced).
  const int y = std::max(tile_groups, 1);
  if (routes > kMaxInlineRoutes) return y <= 2;
  return ((routes + y - 1) / y) * ((k_chunks + warps - 1) / warps) > 10;
}

void launch_decode_stream(const DecodeArgs& args, const DecodeKnobs& kn, bool fp16_operands,
                          Stream stream, bool pdl) {
  DecodeArgs a = args;
  if (a.fc1_wm == 0) a.fc1_wm = decode_fc1_row_warps(a.aquant, a.gated != 0);
  const bool wide = a.routes > kMaxInlineRoutes;  // launch_gemms' subset of shapes
  const int fc1_row_blocks = a.w1.rows_pad / (32 * a.fc1_wm);
  // Balanced FC1 chunk ranges (DecodeArgs::fc1_bal) where they apply (quantised activations:
  // [Q] zeroes the counters; one row warp; one group): by decode_fc1_balanced, or
  // DecodeKnobs::fc1_bal 0 never / 1 wherever they apply. (Round 23: two warp groups as two
  // balanced units per CTA, Qwen3-30B nvfp4 M = 4 / 8, 47.8 / 73.7 -> 57.5 / 81.5 us: dropped.)
  const int bal_knob = kn.fc1_bal;
  // A16 launches have no [Q] to zero the counters: a memset node before FC1 does (FC1 then
  // launches without the programmatic edge; it waits for the caller anyway). H200 round 26,
  // w4a16 M = 8, unbalanced -> balanced: DeepSeek-TP4 163.5 -> 148.2 us, MiniMax 405.4 -> 344.7,
  // Qwen3.5-TP4 240.2 -> 207.5. DecodeKnobs::a16_bal 0: never in A16 modes.
  const int a16_bal = kn.a16_bal;
  const bool bal_ok = bal_knob != 0 && (a.aquant != num::kANone || a16_bal != 0) && a.fc1_wm == 1 &&
                      (a.fc1_groups == 0 || a.fc1_groups == 1) && a.fc1_cnt != nullptr &&
                      a.fc1_part != nullptr && fc1_row_blocks <= a.fc1_cnt_rows;
  if (bal_ok && bal_knob == 1) a.fc1_groups = 1;
  // FC2's split CTAs take equal chunk ranges of their row block (DecodeArgs::fc2_bal; knob
  // B12X_MOE_FC2_BAL=0: whole tiles split, split + P, ...). H200 round 23, the 16 rows with split
  // FC2s: 12 faster by 0.3-2.5 % (Qwen3.5-TP4 nvfp4 M = 2 79.3 -> 77.3 us, Qwen3-30B M = 8 71.4
  // -> 70.6, DeepSeek-TP4 M = 4 95.1 -> 94.0), 3 slower by 0.3-0.7 % (Qwen3.5-TP4 M = 4 / 8).
  a.fc2_bal = kn.fc2_bal != 0 ? 1 : 0;
  a.fc2_kil = decode_fc2_kil(kn, a.num_tokens, a.w2.K_pad / 128) ? 1 : 0;
  const int k_chunks = a.w1.K_pad / 128;
  // One balanced warp group where decode_fc1_balanced takes it for the 8-warp grid, before
  // decode_fc1_groups would split short tiles over two groups: in A16 launches up to 16 routes
  // (sessions 8-26: up to 64, H200 round 30, w4a16 Qwen3-30B M = 8 72.9 / 73.6 -> 72.0 / 71.7
  // us, before the two-group FC1 had last-warp tile ends), not where the epilogue quantises the
  // FC2 input (nvfp4 M = 8 72.5 / 73.7 -> 77.1 / 76.9, a CTA-wide tile end per 2 sub-chunks) nor
  // at 128 routes (nvfp4 M = 16 116.3 / 117.0 -> 120.6). H200 round 102 (session 27), w4a16, us,
  // the 64-route rule -> never (the two-group last-warp FC1 the nvfp4 rows run): Qwen3-30B M = 8
  // (64 routes) 66.9 -> 56.1 (0.838x), M = 4 (32) 0.995x, Qwen3.5-TP4 M = 4 / 2 (40 / 20) 98.4 ->
  // 87.2 (0.887x) / 61.1 -> 54.8 (0.897x); slower without it up to 16: Qwen3-30B M = 2 (16)
  // 1.014x, Qwen3.5-TP4 M = 1 (10) 1.008x. DecodeKnobs::fc1_bal1 0: never, 1: in every mode and
  // route count, 3: the A16 rule up to 64 routes (probe of session 27).
  const int bal1_routes = kn.fc1_bal1 == 2 ? 16 : kn.fc1_bal1 == 3 ? 64 : 0;
  const bool bal1 = kn.fc1_bal1 == 1 || (a.aquant == num::kANone && a.routes <= bal1_routes);
  // (Not where decode_fc1_long_groups takes two groups with last-warp tile ends: DeepSeek-TP4 /
  // MiniMax w4a16 M = 8 0.951 / 0.955x in round 69.)
  const int y3 = decode_fc1_tile_groups(kn, a.routes, fc1_row_blocks, a.sm_count, 3);
  const bool one_group = a.fc1_groups == 0 && bal1 && bal_ok && !wide &&
                         !decode_fc1_long_groups(a.routes, a.routes / y3, k_chunks) &&
                         decode_fc1_balanced(a.routes, y3, DecodeCfg::kFc1Warps, k_chunks);
  const int fc1_warps_in = a.fc1_warps;
  // FC1 warps and balanced ranges for the groups chosen (the balance check runs on the tile
  // groups of the warps chosen, 2 or 3 CTAs per SM).
  auto shape_fc1 = [&] {
    a.fc1_warps = fc1_warps_in;
    if (a.fc1_warps == 0 || wide)
      a.fc1_warps = wide ? DecodeCfg::kFc1Warps
                         : decode_fc1_warps(kn, a.routes, fc1_row_blocks, a.sm_count, a.fc1_wm,
                                            a.fc1_groups, k_chunks);
    a.fc1_bal = 0;
    if (bal_ok && a.fc1_groups == 1) {
      const int y = decode_fc1_tile_groups(kn, a.routes, fc1_row_blocks, a.sm_count,
                                           fc1_ctas_per_sm(a.fc1_warps));
      // Every unit's slot must fit the plan's partials (a forced B12X_MOE_FC1_GROUPS may not).
      a.fc1_bal =
          (bal_knob == 1 || decode_fc1_balanced(a.routes, y, a.fc1_warps, k_chunks)) &&
                  static_cast<int64_t>(fc1_row_blocks) * y * a.fc1_groups <= a.fc1_part_slots
              ? 1
              : 0;
    }
  };
  if (a.fc1_groups == 0)
    a.fc1_groups =
        one_group ? 1
                  : decode_fc1_groups(kn, a.routes, fc1_row_blocks, a.sm_count, a.fc1_wm, k_chunks);
  shape_fc1();
  if (one_group && a.fc1_bal == 0) {
    // The one group is only worth it with balanced ranges: where the check above fails (the
    // 12-warp grid's tile groups, or a grid beyond the plan's partial slots) keep the groups
    // decode_fc1_groups gives (review F7 of session 8).
    a.fc1_groups = decode_fc1_groups(kn, a.routes, fc1_row_blocks, a.sm_count, a.fc1_wm, k_chunks);
    shape_fc1();
  }
  a.fc1_last = decode_fc1_last(wide, a.fc1_wm, a.fc1_warps, a.fc1_groups, a.fc1_bal);
  // launch_gemms' narrow two-group FC1 is the last-warp instance only.
  B12X_ASSERT(wide || a.fc1_groups != 2 || a.fc1_last == 1,
              "decode stream: two FC1 groups without last-warp tile ends");
  a.q_early = kn.q_early == 1 || kn.q_early == 2 ? kn.q_early : 0;
  a.q_load = kn.q_load == 0 ? 0 : 1;  // [Q]'s load order
  a.q_fast = kn.q_fast != 0 ? 1 : 0;
  a.fc1_scal0 = kn.fc1_scal0 != 0 ? 1 : 0;
  B12X_ASSERT(a.fc2_rows == 16 ||
                  (a.fc2_rows == 32 && !wide && a.num_tokens <= DecodeCfg::kFc2Rows32MaxTokens),
              "decode stream: fc2_rows=", a.fc2_rows, " with ", a.num_tokens, " tokens, ", a.routes,
              " routes (supported: 16; 32 up to ", DecodeCfg::kFc2Rows32MaxTokens, " tokens and ",
              kMaxInlineRoutes, " routes)");
  B12X_ASSERT(
      a.routes >= 1 && a.routes <= kMaxStreamRoutes && a.num_tokens >= 1 &&
          a.num_tokens <= kMaxStreamTokens && a.num_experts <= kMaxExperts &&
          (a.fc1_bal == 0 || a.fc1_cnt_stride >= (wide ? kMaxStreamRoutes : kMaxInlineRoutes)),
      "decode stream: routes=", a.routes, " num_tokens=", a.num_tokens,
      " outside the decode regime");
  B12X_ASSERT(a.w1.rows_pad % 64 == 0 && a.w2.rows_pad % DecodeCfg::kFc2Rows == 0,
              "decode stream: prepared rows ", a.w1.rows_pad, "/", a.w2.rows_pad,
              " are not multiples of the CTA tiles");
  // A16 gate (DecodeArgs::a16_gate): the copy gate (a16_copy: per-route FC1 input rows; it also
  // zeroes the balanced FC1's counters, so FC1 keeps its programmatic edge) in A16 launches up to
  // kMaxInlineRoutes routes. H200 round 34, w4a16, us, no gate -> copy gate (two runs each):
  // Qwen3.5-TP4 M = 1 47.1 / 50.3 -> 41.5 / 42.3 (64 row blocks x 10 tiles read one 8 KB x row),
  // DeepSeek-TP4 M = 1 32.9 / 32.9 -> 31.1 / 31.6; within the spread at Qwen3-30B M = 1 / 8,
  // DeepSeek-TP4 M = 8 (150.1 / 150.7 -> 149.8 / 152.1), MiniMax M = 1 / 8, Qwen3.5-TP4 M = 8.
  // The zeroing-only gate was neutral (Qwen3.5-TP4 M = 1 48.1). B12X_MOE_A16_GATE=0: no gate
  // (the memset node zeroes the counters), =1 the zeroing-only gate where the balanced FC1 runs,
  // =2 in every A16 launch, =3 the copy gate in every A16 launch (also above 128 routes).
  const int gate_knob = kn.a16_gate;
  a.a16_copy = a.aquant == num::kANone && a.xq != nullptr &&
                       (gate_knob == 3 || (gate_knob == -1 && a.routes <= kMaxInlineRoutes))
                   ? 1
                   : 0;
  a.a16_gate = a.aquant == num::kANone &&
               (gate_knob == 2 || a.a16_copy != 0 || (gate_knob == 1 && a.fc1_bal != 0));
  bool fc1_pdl = pdl;
  // Measurement knob DecodeKnobs::a16_pdl 0: an A16 FC1 without a gate launches without the
  // programmatic edge (not resident early beside the previous call's FC2).
  if (a.aquant == num::kANone && a.a16_gate == 0 && kn.a16_pdl == 0) fc1_pdl = false;
  if (a.aquant == num::kANone && a.fc1_bal != 0 && a.a16_gate == 0) {
    B12X_CUDA_CHECK(cudaMemsetAsync(a.fc1_cnt, 0,
                                    static_cast<size_t>(a.fc1_cnt_rows) * a.fc1_cnt_stride * 4,
                                    static_cast<cudaStream_t>(stream)));
    fc1_pdl = false;
  }
  constexpr int qk = 8 * DecodeCfg::kQuantThreads;
  // FC1 on per-route ready words (DecodeArgs::fc1_rdy, probe B12X_MOE_FC1_RDY) where [Q] or the
  // copy gate writes FC1's input rows and FC1 would wait for that grid: not with q_early (FC1
  // then waits for the caller too), the balanced FC1 (its counters are zeroed by [Q]) or the
  // wide routing.
  if (!((a.aquant != num::kANone || a.a16_copy != 0) && a.q_early == 0 && a.fc1_bal == 0 && !wide))
    a.fc1_rdy = nullptr;
  a.q_ny = (a.w1.K + qk - 1) / qk;
  g_last_fc1_rdy.store(a.fc1_rdy != nullptr ? 1 : 0, std::memory_order_relaxed);
  if (a.aquant != num::kANone || a.a16_gate != 0) {
    // The lean NVFP4 [Q] (decode_q_lean) where the default launch's branches are the ones it folds.
    static_assert(dev::kQGsTable / 2 == kQLeanMaxExperts, "the lean [Q]'s 1 / a1gs table");
    const bool lean = decode_q_lean(kn, a.aquant, a.x_fp16 != 0, a.num_experts);
    const dim3 gq =
        a.a16_gate != 0 && a.a16_copy == 0
            ? dim3(8)  // the gate: zeroing only
            : dim3(static_cast<unsigned>(a.routes), static_cast<unsigned>((a.w1.K + qk - 1) / qk));
    auto* qkern = lean ? dev::moe_decode_quant_kernel<true> : dev::moe_decode_quant_kernel<false>;
    g_last_q_lean.store(lean ? 1 : 0, std::memory_order_relaxed);
    launch_k(qkern, gq, dim3(DecodeCfg::kQuantThreads), 0, stream, pdl, a);
    B12X_CUDA_CHECK_LAUNCH();
  }
  // Same operand/scale-folding choice as the other FP4 kernels (moe_gemm_unit.cuh); the scale
  // kind (UE4M3/16 for modelopt_nvfp4, E8M0/32 for fp4_e8m0_k32) is a template constant.
  B12X_ASSERT(a.w1.scale_kind == a.w2.scale_kind, "decode stream: FC1/FC2 scale kinds differ");
  if (!fp16_operands) {
    if (a.w1.scale_kind == 0)
      launch_gemms_rc<__nv_bfloat16, true, 0>(a, kn, stream, fc1_pdl, pdl);
    else
      launch_gemms_rc<__nv_bfloat16, true, 1>(a, kn, stream, fc1_pdl, pdl);
  } else if (a.w1.scale_kind == 0) {
    launch_gemms_rc<__half, true, 0>(a, kn, stream, fc1_pdl, pdl);
  } else {
    launch_gemms_rc<__half, false, 1>(a, kn, stream, fc1_pdl, pdl);
  }
}

}  // namespace b12x::moe::detail
