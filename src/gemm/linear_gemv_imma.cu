// IQ2 M <= 2 GEMV on integer MMA (kernels/linear_gemv_imma.cuh): instantiations and launcher.
#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_gemv_imma.cuh"
#include "gemm/linear_gemv_ggml.h"
#include "gemm/linear_params.h"

namespace b12x::gemm::lin {

namespace {

using ImmaFn = void (*)(const LinearParams);

/// The kernel for (format, activation dtype, warps per CTA, var, M tokens): 16 warps at M = 1, 2.
/// Round-94 probes (M = 1, BF16): IQ2_XXS 20 / 24 / 32 warps, IQ2_XS 24; var & 64 (IQ2_XXS, 16 /
/// 24 warps) two MMA chains per piece set (nullptr: none). Round 93 dropped 8 warps (two CTAs per
/// SM) and var & 32 (the weights two batches ahead).
ImmaFn imma_kernel(WFmt f, bool fp16, int warps, int var, int64_t M) {
  constexpr WFmt kX = WFmt::kIq2Xxs, kS = WFmt::kIq2Xs;
  if ((f != kX && f != kS) || M < 1 || M > 2 || (var & ~(64 | 8192)) != 0) return nullptr;
  const bool bf16_1 = !fp16 && M == 1;
  if ((var & 64) != 0) {
    if (f != kX || !bf16_1) return nullptr;
    return warps == 16   ? &linear_gemv_imma_kernel<kX, Bf16Tag, 16, 1, true>
           : warps == 24 ? &linear_gemv_imma_kernel<kX, Bf16Tag, 24, 1, true>
                         : nullptr;
  }
  if (warps != 16) {
    if (!bf16_1) return nullptr;
    if (f == kS) return warps == 24 ? &linear_gemv_imma_kernel<kS, Bf16Tag, 24> : nullptr;
    return warps == 20   ? &linear_gemv_imma_kernel<kX, Bf16Tag, 20>
           : warps == 24 ? &linear_gemv_imma_kernel<kX, Bf16Tag, 24>
           : warps == 32 ? &linear_gemv_imma_kernel<kX, Bf16Tag, 32>
                         : nullptr;
  }
  if (M == 2)
    return f == kS ? (fp16 ? &linear_gemv_imma_kernel<kS, Fp16Tag, 16, 2>
                           : &linear_gemv_imma_kernel<kS, Bf16Tag, 16, 2>)
                   : (fp16 ? &linear_gemv_imma_kernel<kX, Fp16Tag, 16, 2>
                           : &linear_gemv_imma_kernel<kX, Bf16Tag, 16, 2>);
  return f == kS ? (fp16 ? &linear_gemv_imma_kernel<kS, Fp16Tag, 16>
                         : &linear_gemv_imma_kernel<kS, Bf16Tag, 16>)
                 : (fp16 ? &linear_gemv_imma_kernel<kX, Fp16Tag, 16>
                         : &linear_gemv_imma_kernel<kX, Bf16Tag, 16>);
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
  B12X_CUDA_CHECK(b12x::detail::launch_ex(k, dim3(static_cast<unsigned>(gx)), dim3(32 * warps),
                                          static_cast<size_t>(smem), stream, p.pdl != 0,
                                          dim3(1, 1, 1), p));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
