// Tiled (large-M regime) kernel instantiations and launcher.
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>

#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_tiled.cuh"
#include "gemm/linear_launch.h"

namespace b12x::gemm::lin {

namespace {

using TiledFn = void (*)(const LinearParams);

template <WFmt F, class T, bool kAlt, int kTok>
TiledFn tiled_fn() {
  if constexpr (TiledCfg<F, T, kAlt, kTok>::kTwoCta) {
    return &linear_tiled_kernel_2cta<F, T, kAlt, kTok>;
  } else {
    return &linear_tiled_kernel<F, T, kAlt, kTok>;
  }
}

struct TiledPick {
  TiledFn fn = nullptr;
  int smem = 0;
  int bn = 0;  // weight rows per CTA
  int bm = 0;  // tokens per CTA
};

template <WFmt F, class T, bool kAlt = false, int kTok = 128>
TiledPick tiled_pick() {
  using C = TiledCfg<F, T, kAlt, kTok>;
  return {tiled_fn<F, T, kAlt, kTok>(), C::kSmemBytes, C::kBN, C::kBM};
}

/// tok: tokens per CTA (128, or 64 for the mid-M variant). (TiledCfg's kAlt variants, the
/// B12X_GEMM_TILED_ALT=1 probe of session 7 that no default took, are not instantiated since
/// session 21.)
TiledPick pick_tiled(WFmt f, bool fp16, int tok = 128) {
#define B12X_TILED(FMT)                                                                          \
  if (tok == 64)                                                                                 \
    return fp16 ? tiled_pick<FMT, Fp16Tag, false, 64>() : tiled_pick<FMT, Bf16Tag, false, 64>(); \
  return fp16 ? tiled_pick<FMT, Fp16Tag>() : tiled_pick<FMT, Bf16Tag>()
  switch (f) {
    case WFmt::kNvfp4:
      B12X_TILED(WFmt::kNvfp4);
    case WFmt::kMxfp4:
      B12X_TILED(WFmt::kMxfp4);
    case WFmt::kIq2Xxs:
      B12X_TILED(WFmt::kIq2Xxs);
    case WFmt::kIq2Xs:
      B12X_TILED(WFmt::kIq2Xs);
    // No variants: Q8_0's 16 KB of packed B per 64x64-tile stage leaves no room for 3 stages;
    // MXFP8 already runs 64x32 at two CTAs per SM; FP8 promotion has no register room.
    case WFmt::kQ8_0:
      if (tok == 64)
        return fp16 ? tiled_pick<WFmt::kQ8_0, Fp16Tag, false, 64>()
                    : tiled_pick<WFmt::kQ8_0, Bf16Tag, false, 64>();
      return fp16 ? tiled_pick<WFmt::kQ8_0, Fp16Tag>() : tiled_pick<WFmt::kQ8_0, Bf16Tag>();
    case WFmt::kFp8:
      return fp16        ? TiledPick{}
             : tok == 64 ? tiled_pick<WFmt::kFp8, Bf16Tag, false, 64>()
                         : tiled_pick<WFmt::kFp8, Bf16Tag>();
    case WFmt::kFp8Mx:
      return fp16        ? TiledPick{}
             : tok == 64 ? tiled_pick<WFmt::kFp8Mx, Bf16Tag, false, 64>()
                         : tiled_pick<WFmt::kFp8Mx, Bf16Tag>();
    case WFmt::kFp8Block:
      return fp16        ? TiledPick{}
             : tok == 64 ? tiled_pick<WFmt::kFp8Block, Bf16Tag, false, 64>()
                         : tiled_pick<WFmt::kFp8Block, Bf16Tag>();
  }
#undef B12X_TILED
  return {};
}

}  // namespace

bool tiled_kernel_available(WFmt f, bool fp16) {
  return pick_tiled(f, fp16).fn != nullptr;
}

int tiled_split_override() {
  static const int forced = [] {
    const char* e = std::getenv("B12X_GEMM_TILED_SPLIT");
    const int v = e != nullptr ? std::atoi(e) : 0;
    return (v == 1 || v == 2 || v == 4 || v == 8) ? v : 0;
  }();
  return forced;
}

int tiled_block_n(WFmt f, bool fp16, int tok) {
  const TiledPick k = pick_tiled(f, fp16, tok);
  B12X_ASSERT(k.fn != nullptr, "no tiled kernel for format ", static_cast<int>(f));
  return k.bn;
}

namespace {

/// Clusters of the tiled kernel that can be co-resident, per (device, kernel, split 2/4/8):
/// a cluster needs `split` SMs of one GPC at one CTA per SM, so a grid of more clusters than
/// this runs in several waves. Filled by prepare_linear_tiled (plan time), read by run.
struct ClusterTable {
  std::mutex mu;
  std::map<std::tuple<int, const void*, int>, int> max_active;
};
ClusterTable& cluster_table() {
  static ClusterTable* t = new ClusterTable();  // never destroyed (used at exit by other statics)
  return *t;
}

}  // namespace

void prepare_linear_tiled(int device, WFmt f, bool fp16, int tok) {
  const TiledPick k = pick_tiled(f, fp16, tok);
  B12X_ASSERT(k.fn != nullptr, "no tiled kernel for format ", static_cast<int>(f));
  // The attribute and the occupancy queries apply to the current device: the plan's device for
  // their duration (the table is keyed by it, and run looks it up by the plan's device).
  const ::b12x::detail::DeviceScope scope(device);
  const int dev = device;
  int major = 0;
  B12X_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  {
    // The opt-in and the CTAs per SM (stored as "split 1"): the plan's split-K rule sizes grids
    // to full waves.
    int blocks = 0;
    B12X_CUDA_CHECK(
        ::b12x::detail::resident_ctas(reinterpret_cast<const void*>(k.fn), 256, k.smem, &blocks));
    std::lock_guard<std::mutex> lock(cluster_table().mu);
    cluster_table().max_active[{dev, reinterpret_cast<const void*>(k.fn), 1}] = blocks;
  }
  if (major < 9) return;  // no clusters: run() never splits over a cluster
  for (int split = 2; split <= 8; split *= 2) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(1, 1, static_cast<unsigned>(split));
    cfg.blockDim = dim3(256);
    cfg.dynamicSmemBytes = static_cast<size_t>(k.smem);
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 1;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = static_cast<unsigned>(split);
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    // A device or driver that cannot answer (no cluster support) leaves 0: run() never splits.
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, reinterpret_cast<const void*>(k.fn), &cfg) !=
        cudaSuccess) {
      (void)cudaGetLastError();  // clear the non-sticky error of the query
      clusters = 0;
    }
    std::lock_guard<std::mutex> lock(cluster_table().mu);
    cluster_table().max_active[{dev, reinterpret_cast<const void*>(k.fn), split}] = clusters;
  }
}

int tiled_max_active_clusters(int device, WFmt f, bool fp16, int split, int tok) {
  const TiledPick k = pick_tiled(f, fp16, tok);
  std::lock_guard<std::mutex> lock(cluster_table().mu);
  const auto it =
      cluster_table().max_active.find({device, reinterpret_cast<const void*>(k.fn), split});
  return it == cluster_table().max_active.end() ? 0 : it->second;
}

void launch_linear_tiled(WFmt f, bool fp16, const LinearParams& p, Stream stream, int tok) {
  const TiledPick k = pick_tiled(f, fp16, tok);
  B12X_ASSERT(k.fn != nullptr, "no tiled kernel for format ", static_cast<int>(f));
  const int64_t gy = (p.M + k.bm - 1) / k.bm;
  B12X_ASSERT(gy <= 65535, "too many token tiles: M=", p.M);
  const dim3 grid(static_cast<unsigned>((p.NP + k.bn - 1) / k.bn), static_cast<unsigned>(gy),
                  static_cast<unsigned>(p.split));
  if (p.cluster_split > 1) {
    B12X_ASSERT(p.cluster_split == p.split && p.split <= 8 && (p.split & (p.split - 1)) == 0,
                "tiled cluster split ", p.split);
  } else {
    B12X_ASSERT(p.split == 1 || p.partial != nullptr, "tiled split without a cluster or partials");
  }
  B12X_ASSERT(p.split <= 65535, "tiled split ", p.split);
  const dim3 cluster(1, 1, p.cluster_split > 1 ? static_cast<unsigned>(p.split) : 1u);
  B12X_CUDA_CHECK(b12x::detail::launch_ex(k.fn, grid, dim3(256) /* TiledCfg::kThreads */,
                                          static_cast<size_t>(k.smem), stream, p.pdl != 0, cluster,
                                          p));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
