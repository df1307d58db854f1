// Small-M GGML GEMV instantiations and launcher.
#include "gemm/linear_gemv_ggml.h"

#include <algorithm>

#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_gemv_ggml.cuh"
#include "gemm/linear_params.h"

namespace b12x::gemm::lin {

namespace {

using GemvFn = void (*)(const LinearParams, int);

static_assert(gemv::smem_bytes<WFmt::kIq2Xs>() + gemv::kWarps * 8 * 32 * 4 <= 101376,
              "the GGML GEMV must fit SM12x's 99 KB of shared memory per block");
// 3 CTAs of the capped one-tile kernels (their static reduction area: 4 KB) in 228 KB per SM.
static_assert(3 * (gemv::smem_bytes<WFmt::kIq2Xs, true>() + gemv::kWarps * 4 * 32 * 4 + 1024) <=
                  228 * 1024,
              "3 CTAs per SM of the capped IQ2_XS GEMV");

template <WFmt F, class T>
GemvFn fn_nt(int nt) {
  return nt == 1 ? &linear_gemv_ggml_kernel<F, T, 1, false, 0>
                 : &linear_gemv_ggml_kernel<F, T, 2, false, 2>;
}

/// nt = 0: IQ2_XS with its two 16-K groups in the MMA's column halves (M <= 4). occ = 3: the IQ2
/// one-tile kernels with registers capped for 3 CTAs per SM.
template <class T>
GemvFn pick(WFmt f, int nt, int occ) {
  switch (f) {
    case WFmt::kQ8_0:
      return nt == 0 ? nullptr : fn_nt<WFmt::kQ8_0, T>(nt);
    case WFmt::kIq2Xxs:
      if (occ == 3 && nt == 1) return &linear_gemv_ggml_kernel<WFmt::kIq2Xxs, T, 1, false, 3>;
      return nt == 0 ? nullptr : fn_nt<WFmt::kIq2Xxs, T>(nt);
    case WFmt::kIq2Xs:
      if (occ == 3 && nt <= 1)
        return nt == 0 ? &linear_gemv_ggml_kernel<WFmt::kIq2Xs, T, 1, true, 3>
                       : &linear_gemv_ggml_kernel<WFmt::kIq2Xs, T, 1, false, 3>;
      return nt == 0 ? &linear_gemv_ggml_kernel<WFmt::kIq2Xs, T, 1, true, 0>
                     : fn_nt<WFmt::kIq2Xs, T>(nt);
    default:
      return nullptr;
  }
}

/// The variant for M tokens (0 = IQ2_XS column groups) and the tokens per grid.z.
int variant_nt(WFmt f, int64_t M) {
  return f == WFmt::kIq2Xs && M <= 4 ? 0 : M <= 8 ? 1 : 2;
}

/// The dynamic shared memory of pick(f, nt, occ)'s kernel.
int smem_of(WFmt f, int nt, int occ) {
  switch (f) {
    case WFmt::kIq2Xxs:
      return occ == 3 && nt == 1 ? gemv::smem_bytes<WFmt::kIq2Xxs, true>()
                                 : gemv::smem_bytes<WFmt::kIq2Xxs>();
    case WFmt::kIq2Xs:
      return occ == 3 && nt <= 1 ? gemv::smem_bytes<WFmt::kIq2Xs, true>()
                                 : gemv::smem_bytes<WFmt::kIq2Xs>();
    default:
      return 0;
  }
}

}  // namespace

bool ggml_gemv_available(WFmt f) {
  return f == WFmt::kQ8_0 || f == WFmt::kIq2Xxs || f == WFmt::kIq2Xs;
}

int prepare_ggml_gemv(int device, WFmt f, bool fp16, int64_t M, int occ) {
  B12X_ASSERT(ggml_gemv_available(f), "no GGML GEMV for format ", static_cast<int>(f));
  int prev = 0;
  B12X_CUDA_CHECK(cudaGetDevice(&prev));
  if (prev != device) B12X_CUDA_CHECK(cudaSetDevice(device));
  const int nt = variant_nt(f, M);
  int blocks = 0;
  for (int n = 0; n <= 2; ++n)
    for (const int o : {0, 3}) {
      const GemvFn k = fp16 ? pick<Fp16Tag>(f, n, o) : pick<Bf16Tag>(f, n, o);
      if (k == nullptr) continue;
      const int smem = smem_of(f, n, o);
      B12X_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k),
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      if (n == nt && o == occ)
        B12X_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &blocks, reinterpret_cast<const void*>(k), gemv::kThreads, static_cast<size_t>(smem)));
    }
  if (prev != device) B12X_CUDA_CHECK(cudaSetDevice(prev));
  return blocks;
}

void launch_ggml_gemv(WFmt f, bool fp16, int kw, int ctas, int occ, const LinearParams& p,
                      Stream stream) {
  const int nt = variant_nt(f, p.M);
  const GemvFn k = fp16 ? pick<Fp16Tag>(f, nt, occ) : pick<Bf16Tag>(f, nt, occ);
  B12X_ASSERT(k != nullptr, "no GGML GEMV for format ", static_cast<int>(f));
  B12X_ASSERT(kw == 1 || kw == 2 || kw == 4 || kw == 8, "GGML GEMV: kw=", kw);
  const int tpc = gemv::kWarps / kw;
  const int64_t groups = (p.n16 + tpc - 1) / tpc;
  const int64_t gx = ctas > 0 ? std::min<int64_t>(ctas, groups) : groups;
  const dim3 grid(
      static_cast<unsigned>(gx), static_cast<unsigned>(p.split),
      static_cast<unsigned>((p.M + (nt == 0 ? 3 : 8 * nt - 1)) / (nt == 0 ? 4 : 8 * nt)));
  B12X_CUDA_CHECK(b12x::detail::launch_ex(k, grid, dim3(gemv::kThreads),
                                          static_cast<size_t>(smem_of(f, nt, occ)), stream,
                                          p.pdl != 0, dim3(1, 1, 1), p, kw));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
