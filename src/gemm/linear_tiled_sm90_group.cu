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
};

template <WFmt F, class T, int kTok>
GroupPick group_pick() {
  return {&linear_wgmma_group_kernel<F, T, kTok>, WgmmaGroupCfg<F, T, kTok>::kSmemBytes};
}

template <WFmt F>
GroupPick pick_dtype(bool fp16, int tok) {
  if (tok == 256) return fp16 ? group_pick<F, Fp16Tag, 256>() : group_pick<F, Bf16Tag, 256>();
  if (tok == 128) return fp16 ? group_pick<F, Fp16Tag, 128>() : group_pick<F, Bf16Tag, 128>();
  return {};
}

GroupPick pick(WFmt f, bool fp16, int tok) {
  switch (f) {
    case WFmt::kQ8_0:
      return pick_dtype<WFmt::kQ8_0>(fp16, tok);
    case WFmt::kIq2Xxs:
      return pick_dtype<WFmt::kIq2Xxs>(fp16, tok);
    case WFmt::kIq2Xs:
      return pick_dtype<WFmt::kIq2Xs>(fp16, tok);
    default:
      return {};
  }
}

}  // namespace

bool wgmma_group_kernel_available(WFmt f, bool fp16, int tok) {
  return pick(f, fp16, tok).fn != nullptr;
}

void prepare_linear_wgmma_group(WFmt f, bool fp16, int tok) {
  const GroupPick k = pick(f, fp16, tok);
  B12X_ASSERT(k.fn != nullptr, "no group wgmma kernel for format ", static_cast<int>(f));
  B12X_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k.fn),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, k.smem));
}

void launch_linear_wgmma_group(WFmt f, bool fp16, int tok, const LinearParams& p, Stream stream) {
  const GroupPick k = pick(f, fp16, tok);
  B12X_ASSERT(k.fn != nullptr, "no group wgmma kernel for format ", static_cast<int>(f), " tok ",
              tok);
  const int64_t gy = (p.M + tok - 1) / tok;
  B12X_ASSERT(gy <= 65535, "too many token tiles: M=", p.M);
  const dim3 grid(static_cast<unsigned>((p.NP + 127) / 128), static_cast<unsigned>(gy), 1);
  B12X_CUDA_CHECK(b12x::detail::launch_ex(k.fn, grid, dim3(256), static_cast<size_t>(k.smem),
                                          stream, p.pdl != 0, dim3(1, 1, 1), p));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
