// Launchers of the auxiliary linear kernels (activation dequantization, split-K reduction). The
// GEMM kernels are instantiated in linear_decode.cu and linear_tiled.cu.
#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_aux.cuh"
#include "gemm/linear_launch.h"

namespace b12x::gemm::lin {

void launch_linear_reduce(const LinearParams& p, Stream stream) {
  const int64_t n = p.M * ((p.N + 1) / 2);
  if (n == 0) return;
  B12X_CUDA_CHECK(b12x::detail::launch_ex(linear_reduce_kernel,
                                          dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256),
                                          0, stream, p.pdl != 0, dim3(1, 1, 1), p));
  B12X_CUDA_CHECK_LAUNCH();
}

void launch_act_dequant(const ActParams& p, Stream stream) {
  const int64_t n = p.M * (p.KP / 8);
  if (n == 0) return;
  B12X_CUDA_CHECK(b12x::detail::launch_ex(act_dequant_kernel,
                                          dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256),
                                          0, stream, p.pdl != 0, dim3(1, 1, 1), p));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
