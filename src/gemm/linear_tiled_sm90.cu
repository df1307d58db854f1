// SM90 wgmma tiled kernel (gemm/kernels/linear_tiled_sm90.cuh): instantiations and launcher.
#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_tiled_sm90.cuh"
#include "gemm/linear_launch.h"

#include <algorithm>
#include <cstdint>

namespace b12x::gemm::lin {

namespace {

using WgmmaFn = void (*)(const LinearParams);

struct WgmmaPick {
  WgmmaFn fn = nullptr;
  int smem = 0;
  int threads = 256;
};

template <WFmt F, class T, int kTok, int kVar = 0>
WgmmaPick wgmma_pick() {
  using C = WgmmaCfg<F, T, kTok, kVar>;
  return {&linear_wgmma_kernel<F, T, kTok, kVar>, C::kSmemBytes, C::kThreads};
}

/// The instances (session 21: the defaults only; the schedule probes were concluded and removed
/// with their instances, docs/gemm.md and linear.cc's kWgmma* notes): FP8 at 128 tokens,
/// per-tensor 16 (bulk-copied weights), block 33 (the quantizer's stage images) and 8 (where
/// the images cannot be used: caller-quantized activations, K % 256 != 0); the BF16-operand
/// formats at 128 tokens 0 (CTA-barrier pipeline) and at 256 tokens 3 (warp-specialized).
template <WFmt F, class T, int kTok>
WgmmaPick pick_var(int var) {
  constexpr bool kF8 = F == WFmt::kFp8 || F == WFmt::kFp8Block;
  if constexpr (kF8) {
    if constexpr (kTok == 128) {
      if constexpr (F == WFmt::kFp8Block) {
        if (var == 33) return wgmma_pick<F, T, kTok, 33>();
        if (var == 8) return wgmma_pick<F, T, kTok, 8>();
      } else {
        if (var == 16) return wgmma_pick<F, T, kTok, 16>();
      }
    }
    return {};
  } else if constexpr (kTok == 256) {
    return var == 3 ? wgmma_pick<F, T, kTok, 3>() : WgmmaPick{};
  } else if constexpr (kTok == 128) {
    return var == 0 ? wgmma_pick<F, T, kTok, 0>() : WgmmaPick{};
  } else {
    return {};
  }
}

template <int kTok>
WgmmaPick pick_tok(WFmt f, bool fp16, int var) {
  switch (f) {
    case WFmt::kNvfp4:
      return fp16 ? pick_var<WFmt::kNvfp4, Fp16Tag, kTok>(var)
                  : pick_var<WFmt::kNvfp4, Bf16Tag, kTok>(var);
    case WFmt::kMxfp4:
      return fp16 ? WgmmaPick{} : pick_var<WFmt::kMxfp4, Bf16Tag, kTok>(var);
    case WFmt::kFp8Mx:
      return fp16 ? WgmmaPick{} : pick_var<WFmt::kFp8Mx, Bf16Tag, kTok>(var);
    case WFmt::kFp8:
      return fp16 ? WgmmaPick{} : pick_var<WFmt::kFp8, Bf16Tag, kTok>(var);
    case WFmt::kFp8Block:
      return fp16 ? WgmmaPick{} : pick_var<WFmt::kFp8Block, Bf16Tag, kTok>(var);
    default:
      return {};
  }
}

/// tok: 128 (default; MXFP8 256 where the grid fills), 64 / 192 (FP8 probes, variants 0 / 3),
/// 192 / 256 (BF16 operands). var (WgmmaCfg): FP8 0 = per-128-K promotion, 1 / 2 = per
/// 64 / 32 K, 3 = per 128 K on the mbarrier pipeline, 5 = 3 warp-specialized (a copy warpgroup),
/// 6 = 5 with the block scales loaded while the wgmmas run, 7 = 6 with the next
/// stage's A fragments loaded before the promotion (128 tokens), 8 = 6 with block FP8's combined
/// scales built by the producer warpgroup, 9 = 8 with the tokens on the wgmma M side (probe, also
/// per-tensor), 14 = 8 fed by bulk copies of the quantizer's stage images (block FP8's default
/// in sessions 9-17), 16 = 6 with bulk-copied weight runs (FP8 per-tensor's default since session
/// 9), 33 = 14 without the MMA warps' proxy fence and with four stages (block FP8's default since
/// session 18);
/// BF16-operand formats 0
/// = CTA-barrier pipeline, 1 = mbarrier pipeline, 3 = warp-specialized (256 tokens).
WgmmaPick pick(WFmt f, bool fp16, int tok, int var) {
  return tok == 64    ? pick_tok<64>(f, fp16, var)
         : tok == 128 ? pick_tok<128>(f, fp16, var)
         : tok == 192 ? pick_tok<192>(f, fp16, var)
         : tok == 256 ? pick_tok<256>(f, fp16, var)
                      : WgmmaPick{};
}

}  // namespace

bool wgmma_kernel_available(WFmt f, bool fp16, int tok, int var) {
  return pick(f, fp16, tok, var).fn != nullptr;
}

void prepare_linear_wgmma(WFmt f, bool fp16, int tok, int var) {
  const WgmmaPick k = pick(f, fp16, tok, var);
  B12X_ASSERT(k.fn != nullptr, "no wgmma kernel for format ", static_cast<int>(f), " tok ", tok);
  B12X_CUDA_CHECK(::b12x::detail::opt_in_smem(reinterpret_cast<const void*>(k.fn), k.smem));
}

void launch_linear_wgmma(WFmt f, bool fp16, int tok, int var, int raster, const LinearParams& p,
                         Stream stream) {
  const WgmmaPick k = pick(f, fp16, tok, var);
  B12X_ASSERT(k.fn != nullptr, "no wgmma kernel for format ", static_cast<int>(f), " tok ", tok);
  // Activations: FP8 (1 byte per element) for the FP8 formats, else BF16 / FP16.
  const bool f8 = f == WFmt::kFp8 || f == WFmt::kFp8Block;
  LinearParams q = p;
  const dim3 grid = wgmma_grid(p, 128, tok, raster, f8 ? 1 : 2, q);
  B12X_CUDA_CHECK(b12x::detail::launch_ex(k.fn, grid, dim3(k.threads), static_cast<size_t>(k.smem),
                                          stream, p.pdl != 0, dim3(1, 1, 1), q));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
