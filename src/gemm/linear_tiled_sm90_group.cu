// SM90 wgmma tiled kernel of the GGML formats (gemm/kernels/linear_tiled_sm90_group.cuh):
// instantiations and launcher.
#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_tiled_sm90_group.cuh"
#include "gemm/linear_wgmma_group.h"

namespace b12x::gemm::lin {

namespace {

using GroupFn = void (*)(const LinearParams);

struct GroupPick {
  GroupFn fn = nullptr;
  int smem = 0;
  int threads = 256;
};

template <WFmt F, class T, int kTok, int kRowSets, bool kOverlap, int kUnitN = 128,
          bool kLateCopy = false, bool kAluSign = false, int kMode = 0>
GroupPick group_pick() {
  return {
      &linear_wgmma_group_kernel<F, T, kTok, kRowSets, kOverlap, kUnitN, kLateCopy, kAluSign,
                                 kMode>,
      WgmmaGroupCfg<F, T, kTok, kRowSets, kOverlap, kUnitN, wgmma_group_fold_k(kMode)>::kSmemBytes,
      wgmma_group_threads(kMode)};
}

template <WFmt F, class T>
GroupPick pick_cfg(int tok, int var) {
  if (tok == 256 && var == 0) return group_pick<F, T, 256, 1, false>();
  if (tok == 256 && var == 1) return group_pick<F, T, 256, 1, true, 64>();
  if (tok == 256 && var == 3) return group_pick<F, T, 256, 1, true, 64, true>();
  if constexpr (F != WFmt::kQ8_0) {
    if (tok == 256 && var == 4) return group_pick<F, T, 256, 1, true, 64, true, true>();
  }
  constexpr int kWsChain = kGroupWs | kGroupPair | kGroupChain;
  if (tok == 256 && var == 13) return group_pick<F, T, 256, 1, true, 64, false, false, kWsChain>();
  if (tok == 256 && var == 16)
    return group_pick<F, T, 256, 1, true, 64, false, false, kGroupWs | kGroupQuad | kGroupChain>();
  if constexpr (F != WFmt::kQ8_0) {
    if (tok == 256 && var == 17)
      return group_pick<F, T, 256, 1, true, 64, false, true, kGroupWs | kGroupQuad | kGroupChain>();
    if (tok == 256 && var == 18) return group_pick<F, T, 256, 1, true, 64, false, true, kWsChain>();
    if constexpr (T::kFp16) {
      if (tok == 256 && var == 19 && F == WFmt::kIq2Xs)
        return group_pick<F, T, 256, 1, true, 64, false, false, kWsChain | kGroupFold>();
      if (tok == 256 && var == 20)
        return group_pick<F, T, 256, 1, true, 64, false, false, kWsChain | kGroupFold64>();
    }
  }
  if (tok == 128 && var == 0) return group_pick<F, T, 128, 1, false>();
  if (tok == 128 && var == 1) return group_pick<F, T, 128, 1, true>();
  if (tok == 128 && var == 2) return group_pick<F, T, 128, 2, false>();
  return {};
}

/// var: 0 = each partial's wgmmas drained before its promotion, 1 = promotion overlapping the
/// next partial's wgmmas (two partial sets; at 256 tokens in 64-token units), 2 = 256-row CTAs (two
/// 64-row sets per warpgroup, 128 tokens), 3 (256 tokens, the default there until session 12) = 1
/// with the stage's refill copies issued after the second unit's wgmmas, 4 (IQ2, 256 tokens,
/// probe) = 3 with the sign masks computed instead of loaded from the shared sign table, 13 (256
/// tokens, the default there since session 12's round 46) = 1 warp-specialized (a producer
/// warpgroup, an mbarrier ring) with the unit chain running on across pairs of stages. Session 12
/// measured and removed (round 46, M = 2048, against 3): two stages per CTA barrier (Q8_0 +2-3%,
/// IQ2 -2-+3%), that with the chain across the pair (Q8_0 -1-+3%, IQ2_XXS +1-5%), warp-
/// specialized without the pairs (Q8_0 +5-8%, IQ2_XXS +3-12%, IQ2_XS -5-+1%), that with drained
/// partials (-5-18%), with 4's computed signs (IQ2_XXS +7-15%, IQ2_XS -3-7%) or with the table
/// offsets built from the packed words (IQ2_XXS +6-13%, IQ2_XS -4-+3%). Session 13 probes: 16 =
/// 13 with the chain across four stages (one drain per 256 K), 17 (IQ2) = 16 with 4's
/// computed signs, 18 (IQ2) = 13 with them; 19 (IQ2_XS) / 20 (IQ2), FP16 MMAs: 13 with the
/// sub-scales folded into the decoded weights, one promotion per 32 / 64 K.
GroupPick pick(WFmt f, bool fp16, int tok, int var) {
  switch (f) {
    case WFmt::kQ8_0:
      return fp16 ? pick_cfg<WFmt::kQ8_0, Fp16Tag>(tok, var)
                  : pick_cfg<WFmt::kQ8_0, Bf16Tag>(tok, var);
    case WFmt::kIq2Xxs:
      return fp16 ? pick_cfg<WFmt::kIq2Xxs, Fp16Tag>(tok, var)
                  : pick_cfg<WFmt::kIq2Xxs, Bf16Tag>(tok, var);
    case WFmt::kIq2Xs:
      return fp16 ? pick_cfg<WFmt::kIq2Xs, Fp16Tag>(tok, var)
                  : pick_cfg<WFmt::kIq2Xs, Bf16Tag>(tok, var);
    default:
      return {};
  }
}

}  // namespace

bool wgmma_group_kernel_available(WFmt f, bool fp16, int tok, int var) {
  return pick(f, fp16, tok, var).fn != nullptr;
}

void prepare_linear_wgmma_group(WFmt f, bool fp16, int tok, int var) {
  const GroupPick k = pick(f, fp16, tok, var);
  B12X_ASSERT(k.fn != nullptr, "no group wgmma kernel for format ", static_cast<int>(f));
  B12X_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k.fn),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, k.smem));
}

void launch_linear_wgmma_group(WFmt f, bool fp16, int tok, int var, int raster,
                               const LinearParams& p, Stream stream) {
  const GroupPick k = pick(f, fp16, tok, var);
  B12X_ASSERT(k.fn != nullptr, "no group wgmma kernel for format ", static_cast<int>(f), " tok ",
              tok, " var ", var);
  LinearParams q = p;
  const dim3 grid = wgmma_grid(p, var == 2 ? 256 : 128, tok, raster, 2, q);  // BF16 / FP16 rows
  B12X_CUDA_CHECK(b12x::detail::launch_ex(k.fn, grid, dim3(k.threads), static_cast<size_t>(k.smem),
                                          stream, p.pdl != 0, dim3(1, 1, 1), q));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
