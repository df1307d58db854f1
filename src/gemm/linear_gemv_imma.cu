// IQ2 M <= 2 GEMV on integer MMA (kernels/linear_gemv_imma.cuh): instantiations and launcher.
#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_gemv_imma.cuh"
#include "gemm/linear_gemv_ggml.h"
#include "gemm/linear_params.h"

namespace b12x::gemm::lin {

static_assert(kGgmlImmaP2 == imma::kP2 && kGgmlImmaPred == imma::kPred &&
              kGgmlImmaU2 == imma::kU2 && kGgmlImmaLean == imma::kLean);

namespace {

using ImmaFn = void (*)(const LinearParams);

/// The kernel for (format, activation dtype, warps per CTA, var, M tokens): BF16 activations;
/// IQ2_XXS 16 warps, IQ2_XS 24 (nullptr: none). Dropped in rounds 93-95 (removed): 8 warps (two
/// CTAs per SM), 20 / 32 warps, IQ2_XXS 24, the weights two batches ahead, two MMA chains per
/// piece set; FP16 activations are unmeasured (no kernel).
/// Session 26 (var kGgmlImmaVar | imma::kP2 | ...; two pieces in every kernel, session 25's three
/// removed: round 97 8192 5.66 / 11.34 / 12.34 / 6.94 / 5.57 us IQ2_XXS M = 1 against kP2's 5.20 /
/// 9.89 / 11.04 / 6.33 / 5.16): the defaults (round 97: M = 1 IQ2_XXS kP2 | kPred, IQ2_XS kP2 |
/// kU2; M = 2 kP2) and the round-98 probes. Dropped in round 97 (removed):
/// kD2 (the weights two batches ahead: IQ2_XXS 5.45 / 10.52 / 11.35 / 6.39 / 5.20 us against
/// kP2's 5.20 / 9.89 / 11.04 / 6.33 / 5.16), 20 warps (5.24 / 10.18 / 10.81 / 6.33 / 5.34),
/// kPred | kU2 (IQ2_XXS 5.40 / 10.39 / 11.25 / 6.47 / 5.27, IQ2_XS 6.04 / 12.54 / 13.20 / 7.60 /
/// 6.34).
template <WFmt F, int kW>
ImmaFn imma_probe(int v, int64_t M) {
  using namespace imma;
  constexpr bool kXxs = F == WFmt::kIq2Xxs;
  if (M == 2) {
    switch (v) {
      case kP2:
        return &linear_gemv_imma_kernel<F, Bf16Tag, kW, 2, kP2>;
      case kP2 | kU2:
        return &linear_gemv_imma_kernel<F, Bf16Tag, kW, 2, kP2 | kU2>;
      case kP2 | kU2 | kLean:
        return &linear_gemv_imma_kernel<F, Bf16Tag, kW, 2, kP2 | kU2 | kLean>;
      case kP2 | kPred:  // IQ2_XXS only (IQ2_XS's 24 warps: 80 registers)
        if constexpr (kXxs) return &linear_gemv_imma_kernel<F, Bf16Tag, kW, 2, kP2 | kPred>;
        return nullptr;
      case kP2 | kPred | kLean:
        if constexpr (kXxs) return &linear_gemv_imma_kernel<F, Bf16Tag, kW, 2, kP2 | kPred | kLean>;
        return nullptr;
      default:
        return nullptr;
    }
  }
  switch (v) {
    case kP2:
      return &linear_gemv_imma_kernel<F, Bf16Tag, kW, 1, kP2>;
    case kP2 | kPred:
      return &linear_gemv_imma_kernel<F, Bf16Tag, kW, 1, kP2 | kPred>;
    case kP2 | kU2:
      return &linear_gemv_imma_kernel<F, Bf16Tag, kW, 1, kP2 | kU2>;
    case kP2 | kLean:
      return &linear_gemv_imma_kernel<F, Bf16Tag, kW, 1, kP2 | kLean>;
    case kP2 | kPred | kLean:
      return &linear_gemv_imma_kernel<F, Bf16Tag, kW, 1, kP2 | kPred | kLean>;
    case kP2 | kU2 | kLean:
      return &linear_gemv_imma_kernel<F, Bf16Tag, kW, 1, kP2 | kU2 | kLean>;
    case kP2 | kPred | kU2 | kLean:
      return &linear_gemv_imma_kernel<F, Bf16Tag, kW, 1, kP2 | kPred | kU2 | kLean>;
    case kP2 | kPred | kAlu:
      return &linear_gemv_imma_kernel<F, Bf16Tag, kW, 1, kP2 | kPred | kAlu>;
    case kP2 | kPred | kLean | kAlu:
      return &linear_gemv_imma_kernel<F, Bf16Tag, kW, 1, kP2 | kPred | kLean | kAlu>;
    case kP2 | kU2 | kAlu:
      return &linear_gemv_imma_kernel<F, Bf16Tag, kW, 1, kP2 | kU2 | kAlu>;
    default:
      return nullptr;
  }
}

ImmaFn imma_kernel(WFmt f, bool fp16, int warps, int var, int64_t M) {
  constexpr int kBits = imma::kP2 | imma::kPred | imma::kU2 | imma::kLean | imma::kAlu;
  const int v = var & kBits;
  if (fp16 || (var & ~kBits) != kGgmlImmaVar || (v & imma::kP2) == 0) return nullptr;
  const bool xs = f == WFmt::kIq2Xs;
  if (xs && warps == 16 && M == 1 && v == (imma::kP2 | imma::kPred))  // probe: 128 registers
    return &linear_gemv_imma_kernel<WFmt::kIq2Xs, Bf16Tag, 16, 1, imma::kP2 | imma::kPred>;
  if (M < 1 || M > 2 || warps != (xs ? 24 : 16)) return nullptr;
  return xs ? imma_probe<WFmt::kIq2Xs, 24>(v, M) : imma_probe<WFmt::kIq2Xxs, 16>(v, M);
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
