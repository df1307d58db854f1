// IQ2_XXS M = 1 GEMV on integer MMA (kernels/linear_gemv_imma.cuh): instantiations and launcher.
#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_gemv_imma.cuh"
#include "gemm/linear_gemv_ggml.h"
#include "gemm/linear_params.h"

namespace b12x::gemm::lin {

namespace {

using ImmaFn = void (*)(const LinearParams);

/// The kernel for (activation dtype, warps per CTA, var): 8 or 16 warps; var & 32 (BF16, 16 warps)
/// the weights two batches ahead (nullptr: none).
ImmaFn imma_kernel(bool fp16, int warps, int var) {
  if ((var & 32) != 0)
    return !fp16 && warps == 16 ? &linear_gemv_imma_kernel<Bf16Tag, 16, true> : nullptr;
  if (warps == 16)
    return fp16 ? &linear_gemv_imma_kernel<Fp16Tag, 16> : &linear_gemv_imma_kernel<Bf16Tag, 16>;
  if (warps == 8)
    return fp16 ? &linear_gemv_imma_kernel<Fp16Tag, 8> : &linear_gemv_imma_kernel<Bf16Tag, 8>;
  return nullptr;
}

}  // namespace

bool ggml_imma_available(WFmt f, bool fp16, int64_t M, int64_t K, int warps, int var,
                         int64_t smem_optin) {
  return f == WFmt::kIq2Xxs && M == 1 && K % 256 == 0 && imma_kernel(fp16, warps, var) != nullptr &&
         imma::smem_bytes(K) + warps * (2 * 16 + 2) * 4 + 2048 <= smem_optin;
}

int prepare_ggml_imma(int device, bool fp16, int warps, int var, int64_t K) {
  const ImmaFn k = imma_kernel(fp16, warps, var);
  B12X_ASSERT(k != nullptr, "no IQ2 integer-MMA GEMV with ", warps, " warps");
  const ::b12x::detail::DeviceScope scope(device);
  int blocks = 0;
  B12X_CUDA_CHECK(::b12x::detail::resident_ctas(reinterpret_cast<const void*>(k), 32 * warps,
                                                static_cast<int>(imma::smem_bytes(K)), &blocks));
  return blocks;
}

void launch_ggml_imma(bool fp16, int warps, int var, int ctas, const LinearParams& p,
                      Stream stream) {
  const ImmaFn k = imma_kernel(fp16, warps, var);
  B12X_ASSERT(k != nullptr, "no IQ2 integer-MMA GEMV with ", warps, " warps");
  B12X_ASSERT(p.M == 1 && p.split == 1 && p.K % 256 == 0, "IQ2 integer-MMA GEMV: M=", p.M,
              " split=", p.split, " K=", p.K, " (supported: M = 1, no split, K % 256 == 0)");
  const int64_t gx = std::max<int64_t>(1, std::min<int64_t>(ctas > 0 ? ctas : p.n16, p.n16));
  const int smem = static_cast<int>(imma::smem_bytes(p.K));
  B12X_CUDA_CHECK(::b12x::detail::opt_in_smem(reinterpret_cast<const void*>(k), smem));
  B12X_CUDA_CHECK(b12x::detail::launch_ex(k, dim3(static_cast<unsigned>(gx)), dim3(32 * warps),
                                          static_cast<size_t>(smem), stream, p.pdl != 0,
                                          dim3(1, 1, 1), p));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
