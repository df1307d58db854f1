// Tiled (large-M regime) kernel instantiations and launcher.
#include "core/cuda_check.h"
#include "gemm/kernels/linear_tiled.cuh"
#include "gemm/linear_launch.h"

namespace b12x::gemm::lin {

namespace {

using TiledFn = void (*)(const LinearParams);

template <WFmt F, class T>
TiledFn tiled_fn() {
  return &linear_tiled_kernel<F, T>;
}

struct TiledPick {
  TiledFn fn = nullptr;
  int smem = 0;
  int bn = 0;  // weight rows per CTA
};

template <WFmt F, class T>
TiledPick tiled_pick() {
  return {tiled_fn<F, T>(), TiledCfg<F, T>::kSmemBytes, TiledCfg<F, T>::kBN};
}

TiledPick pick_tiled(WFmt f, bool fp16) {
#define B12X_TILED(FMT) \
  return fp16 ? tiled_pick<FMT, Fp16Tag>() : tiled_pick<FMT, Bf16Tag>()
#define B12X_TILED_BF16(FMT) return fp16 ? TiledPick{} : tiled_pick<FMT, Bf16Tag>()
  switch (f) {
    case WFmt::kNvfp4: B12X_TILED(WFmt::kNvfp4);
    case WFmt::kMxfp4: B12X_TILED(WFmt::kMxfp4);
    case WFmt::kQ8_0: B12X_TILED(WFmt::kQ8_0);
    case WFmt::kIq2Xxs: B12X_TILED(WFmt::kIq2Xxs);
    case WFmt::kIq2Xs: B12X_TILED(WFmt::kIq2Xs);
    case WFmt::kFp8: B12X_TILED_BF16(WFmt::kFp8);
    case WFmt::kFp8Mx: B12X_TILED_BF16(WFmt::kFp8Mx);
    case WFmt::kFp8Block: B12X_TILED_BF16(WFmt::kFp8Block);
  }
#undef B12X_TILED
#undef B12X_TILED_BF16
  return {};
}

}  // namespace

bool tiled_kernel_available(WFmt f, bool fp16) { return pick_tiled(f, fp16).fn != nullptr; }

int tiled_block_n(WFmt f, bool fp16) {
  const TiledPick k = pick_tiled(f, fp16);
  B12X_ASSERT(k.fn != nullptr, "no tiled kernel for format ", static_cast<int>(f));
  return k.bn;
}

void prepare_linear_tiled(WFmt f, bool fp16) {
  const TiledPick k = pick_tiled(f, fp16);
  B12X_ASSERT(k.fn != nullptr, "no tiled kernel for format ", static_cast<int>(f));
  B12X_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k.fn),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, k.smem));
}

void launch_linear_tiled(WFmt f, bool fp16, const LinearParams& p, Stream stream) {
  const TiledPick k = pick_tiled(f, fp16);
  B12X_ASSERT(k.fn != nullptr, "no tiled kernel for format ", static_cast<int>(f));
  const int64_t gy = (p.M + 127) / 128;  // TiledCfg::kBM of every format
  B12X_ASSERT(gy <= 65535, "too many token tiles: M=", p.M);
  const dim3 grid(static_cast<unsigned>((p.NP + k.bn - 1) / k.bn),
                  static_cast<unsigned>(gy), static_cast<unsigned>(p.split));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(256);  // TiledCfg::kThreads
  cfg.dynamicSmemBytes = static_cast<size_t>(k.smem);
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  int na = 0;
  attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[na].val.programmaticStreamSerializationAllowed = p.pdl ? 1 : 0;
  ++na;
  if (p.cluster_split > 1) {
    B12X_ASSERT(p.cluster_split == p.split && p.split <= 8, "tiled cluster split ", p.split);
    attr[na].id = cudaLaunchAttributeClusterDimension;
    attr[na].val.clusterDim.x = 1;
    attr[na].val.clusterDim.y = 1;
    attr[na].val.clusterDim.z = static_cast<unsigned>(p.split);
    ++na;
  } else {
    B12X_ASSERT(p.split == 1, "tiled split without a cluster");
  }
  cfg.attrs = attr;
  cfg.numAttrs = na;
  B12X_CUDA_CHECK(cudaLaunchKernelEx(&cfg, k.fn, p));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
