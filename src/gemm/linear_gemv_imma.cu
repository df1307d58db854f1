// IQ2_XXS M = 1 GEMV on integer MMA (kernels/linear_gemv_imma.cuh): instantiations and launcher.
#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_gemv_imma.cuh"
#include "gemm/linear_gemv_ggml.h"
#include "gemm/linear_params.h"

namespace b12x::gemm::lin {

namespace {

using ImmaFn = void (*)(const LinearParams);

/// The kernel for (format, activation dtype, warps per CTA, var): IQ2_XXS 8 or 16 warps, IQ2_XS
/// 16; var & 32 (IQ2_XXS, BF16, 16 warps) the weights two batches ahead (nullptr: none).
ImmaFn imma_kernel(WFmt f, bool fp16, int warps, int var) {
  constexpr WFmt kX = WFmt::kIq2Xxs, kS = WFmt::kIq2Xs;
  if (f == kS)
    return warps != 16 || (var & 32) != 0 ? nullptr
           : fp16                         ? &linear_gemv_imma_kernel<kS, Fp16Tag, 16>
                                          : &linear_gemv_imma_kernel<kS, Bf16Tag, 16>;
  if (f != kX) return nullptr;
  if ((var & 32) != 0)
    return !fp16 && warps == 16 ? &linear_gemv_imma_kernel<kX, Bf16Tag, 16, true> : nullptr;
  if (warps == 16)
    return fp16 ? &linear_gemv_imma_kernel<kX, Fp16Tag, 16>
                : &linear_gemv_imma_kernel<kX, Bf16Tag, 16>;
  if (warps == 8)
    return fp16 ? &linear_gemv_imma_kernel<kX, Fp16Tag, 8>
                : &linear_gemv_imma_kernel<kX, Bf16Tag, 8>;
  return nullptr;
}

int64_t imma_smem(WFmt f, int64_t K) {
  return f == WFmt::kIq2Xs ? imma::smem_bytes<WFmt::kIq2Xs>(K) : imma::smem_bytes<WFmt::kIq2Xxs>(K);
}

}  // namespace

bool ggml_imma_available(WFmt f, bool fp16, int64_t M, int64_t K, int warps, int var,
                         int64_t smem_optin) {
  return M == 1 && K % 256 == 0 && imma_kernel(f, fp16, warps, var) != nullptr &&
         imma_smem(f, K) + warps * (2 * 16 + 2) * 4 + 2048 <= smem_optin;
}

int prepare_ggml_imma(int device, WFmt f, bool fp16, int warps, int var, int64_t K) {
  const ImmaFn k = imma_kernel(f, fp16, warps, var);
  B12X_ASSERT(k != nullptr, "no IQ2 integer-MMA GEMV with ", warps, " warps");
  const ::b12x::detail::DeviceScope scope(device);
  int blocks = 0;
  B12X_CUDA_CHECK(::b12x::detail::resident_ctas(reinterpret_cast<const void*>(k), 32 * warps,
                                                static_cast<int>(imma_smem(f, K)), &blocks));
  return blocks;
}

void launch_ggml_imma(WFmt f, bool fp16, int warps, int var, int ctas, const LinearParams& p,
                      Stream stream) {
  const ImmaFn k = imma_kernel(f, fp16, warps, var);
  B12X_ASSERT(k != nullptr, "no IQ2 integer-MMA GEMV with ", warps, " warps");
  B12X_ASSERT(p.M == 1 && p.split == 1 && p.K % 256 == 0, "IQ2 integer-MMA GEMV: M=", p.M,
              " split=", p.split, " K=", p.K, " (supported: M = 1, no split, K % 256 == 0)");
  const int64_t gx = std::max<int64_t>(1, std::min<int64_t>(ctas > 0 ? ctas : p.n16, p.n16));
  const int smem = static_cast<int>(imma_smem(f, p.K));
  B12X_CUDA_CHECK(::b12x::detail::opt_in_smem(reinterpret_cast<const void*>(k), smem));
  B12X_CUDA_CHECK(b12x::detail::launch_ex(k, dim3(static_cast<unsigned>(gx)), dim3(32 * warps),
                                          static_cast<size_t>(smem), stream, p.pdl != 0,
                                          dim3(1, 1, 1), p));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
