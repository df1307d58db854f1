// IQ2 M <= 2 GEMV on integer MMA (kernels/linear_gemv_imma.cuh): instantiations and launcher.
#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_gemv_imma.cuh"
#include "gemm/linear_gemv_ggml.h"
#include "gemm/linear_params.h"

namespace b12x::gemm::lin {

static_assert(kGgmlImmaP2 == imma::kP2 && kGgmlImmaPred == imma::kPred);

namespace {

using ImmaFn = void (*)(const LinearParams);

/// The kernel for (format, activation dtype, warps per CTA, var, M tokens): BF16 activations, two
/// activation pieces (nullptr: none). The defaults (ggml_imma_default): kP2 | kPred with 16 warps
/// (IQ2_XXS M = 1, 2; IQ2_XS M = 1), IQ2_XS kP2 with 24 warps (M = 2, and M = 1 for a 2-token
/// plan's 1-token runs). Dropped in rounds 93-95 (removed): 8 warps (two CTAs per SM), 20 / 32
/// warps, IQ2_XXS 24, the weights two batches ahead, two MMA chains per piece set; FP16
/// activations are unmeasured (no kernel). Session 26, rounds 97-98 (removed; us over 4096x4096 /
/// 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, M = 1): session 25's three pieces (8192:
/// IQ2_XXS 5.66 / 11.34 / 12.34 / 6.94 / 5.57 against kP2 | kPred's 4.94 / 9.31 / 10.09 / 6.00 /
/// 4.98), two units per loop iteration (8197: IQ2_XXS 5.19 / 10.56 / 11.42 / 6.60 / 4.99; IQ2_XS
/// 24 warps 5.85 / 11.87 / 12.84 / 7.60 / 6.08 against kP2 | kPred at 16 warps' 5.78 / 11.28 /
/// 12.06 / 7.00 / 5.44), the weights two batches ahead (8201: 5.45 / 10.52 / 11.35 / 6.39 / 5.20),
/// 20 warps (5.24 / 10.18 / 10.81 / 6.33 / 5.34), the entry's OR and shift as IMADs (8227: 5.43 /
/// 10.04 / 11.15 / 6.43 / 5.15), lane constants kept via shuffles (8209 / 8211 / 8213 / 8215 /
/// 8243: wrong sub-scales for s >= 8 in atom 7 (bit 31 shifted out), timings 9.63-10.65 us at
/// 14336x4096).
ImmaFn imma_kernel(WFmt f, bool fp16, int warps, int var, int64_t M) {
  using namespace imma;
  const bool xs = f == WFmt::kIq2Xs;
  // IQ2 weights only: a forced B12X_GGML_GEMV_VAR on a Q8_0 plan must find no kernel here.
  if (fp16 || M < 1 || M > 2 || (f != WFmt::kIq2Xs && f != WFmt::kIq2Xxs)) return nullptr;
  // Session 27 probes: kTile (the loop per tile) without / with kInPlace, M = 1, 2, 16 warps.
  const auto tile_kernel = [&]<int kV>() -> ImmaFn {
    if (xs)
      return M == 2 ? &linear_gemv_imma_kernel<WFmt::kIq2Xs, Bf16Tag, 16, 2, kV>
                    : &linear_gemv_imma_kernel<WFmt::kIq2Xs, Bf16Tag, 16, 1, kV>;
    return M == 2 ? &linear_gemv_imma_kernel<WFmt::kIq2Xxs, Bf16Tag, 16, 2, kV>
                  : &linear_gemv_imma_kernel<WFmt::kIq2Xxs, Bf16Tag, 16, 1, kV>;
  };
  if (var == (kGgmlImmaVar | kP2 | kPred | kTile) && warps == 16)
    return tile_kernel.template operator()<kP2 | kPred | kTile>();
  if (var == (kGgmlImmaVar | kP2 | kPred | kTile | kInPlace) && warps == 16)
    return tile_kernel.template operator()<kP2 | kPred | kTile | kInPlace>();
  // Tile pairs (kPair) and the peeled loop (kPeel), M = 1.
  constexpr int kIpv = kP2 | kPred | kTile | kInPlace;
  if (warps == 16 && M == 1 && (var & ~(kPair | kPeel)) == (kGgmlImmaVar | kIpv)) {
    switch (var & (kPair | kPeel)) {
      case kPair:
        return xs ? &linear_gemv_imma_kernel<WFmt::kIq2Xs, Bf16Tag, 16, 1, kIpv | kPair>
                  : &linear_gemv_imma_kernel<WFmt::kIq2Xxs, Bf16Tag, 16, 1, kIpv | kPair>;
      case kPeel:
        return xs ? &linear_gemv_imma_kernel<WFmt::kIq2Xs, Bf16Tag, 16, 1, kIpv | kPeel>
                  : &linear_gemv_imma_kernel<WFmt::kIq2Xxs, Bf16Tag, 16, 1, kIpv | kPeel>;
      case kPair | kPeel:
        return xs ? &linear_gemv_imma_kernel<WFmt::kIq2Xs, Bf16Tag, 16, 1, kIpv | kPair | kPeel>
                  : &linear_gemv_imma_kernel<WFmt::kIq2Xxs, Bf16Tag, 16, 1, kIpv | kPair | kPeel>;
      default:
        break;
    }
  }
  if (var == (kGgmlImmaVar | kP2 | kPred) && warps == 16) {
    if (xs)
      return M == 1 ? &linear_gemv_imma_kernel<WFmt::kIq2Xs, Bf16Tag, 16, 1, kP2 | kPred> : nullptr;
    return M == 2 ? &linear_gemv_imma_kernel<WFmt::kIq2Xxs, Bf16Tag, 16, 2, kP2 | kPred>
                  : &linear_gemv_imma_kernel<WFmt::kIq2Xxs, Bf16Tag, 16, 1, kP2 | kPred>;
  }
  if (var == (kGgmlImmaVar | kP2) && warps == 24 && xs)
    return M == 2 ? &linear_gemv_imma_kernel<WFmt::kIq2Xs, Bf16Tag, 24, 2, kP2>
                  : &linear_gemv_imma_kernel<WFmt::kIq2Xs, Bf16Tag, 24, 1, kP2>;
  return nullptr;
}

int64_t imma_smem(WFmt f, int64_t K, int64_t M) {
  return f == WFmt::kIq2Xs ? imma::smem_bytes<WFmt::kIq2Xs>(K, M)
                           : imma::smem_bytes<WFmt::kIq2Xxs>(K, M);
}

}  // namespace

bool ggml_imma_available(WFmt f, bool fp16, int64_t M, int64_t K, int warps, int var,
                         int64_t smem_optin) {
  // Every M up to the plan's (a run may bind fewer tokens).
  for (int64_t m = 1; m <= M; ++m)
    if (imma_kernel(f, fp16, warps, var, m) == nullptr) return false;
  return K % 256 == 0 && imma_smem(f, K, M) + warps * (2 * 2 * 16 + 2) * 4 + 2048 <= smem_optin;
}

int prepare_ggml_imma(int device, WFmt f, bool fp16, int warps, int var, int64_t M, int64_t K) {
  const ::b12x::detail::DeviceScope scope(device);
  int blocks = 0;
  for (int64_t m = M; m >= 1; --m) {  // the opt-in of each; the occupancy of M's
    const ImmaFn k = imma_kernel(f, fp16, warps, var, m);
    B12X_ASSERT(k != nullptr, "no IQ2 integer-MMA GEMV with ", warps, " warps at M=", m);
    int b = 0;
    B12X_CUDA_CHECK(::b12x::detail::resident_ctas(reinterpret_cast<const void*>(k), 32 * warps,
                                                  static_cast<int>(imma_smem(f, K, m)), &b));
    if (m == M) blocks = b;
  }
  return blocks;
}

void launch_ggml_imma(WFmt f, bool fp16, int warps, int var, int ctas, const LinearParams& p,
                      Stream stream) {
  const ImmaFn k = imma_kernel(f, fp16, warps, var, p.M);
  B12X_ASSERT(k != nullptr && p.split == 1 && p.K % 256 == 0, "IQ2 integer-MMA GEMV: M=", p.M,
              " warps=", warps, " var=", var, " split=", p.split, " K=", p.K,
              " (supported: M = 1, 2, no split, K % 256 == 0)");
  const int64_t gx = std::max<int64_t>(1, std::min<int64_t>(ctas > 0 ? ctas : p.n16, p.n16));
  const int smem = static_cast<int>(imma_smem(f, p.K, p.M));
  B12X_CUDA_CHECK(::b12x::detail::opt_in_smem(reinterpret_cast<const void*>(k), smem));
  note_ggml_gemv_launch(
      GgmlGemvLaunch{1, 0, warps, warps, static_cast<unsigned>(gx), 1u, 1u, false});
  B12X_CUDA_CHECK(b12x::detail::launch_ex(k, dim3(static_cast<unsigned>(gx)), dim3(32 * warps),
                                          static_cast<size_t>(smem), stream, p.pdl != 0,
                                          dim3(1, 1, 1), p));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
