// Internal: the one kernel-launch helper behind every area's launchers (CUDA runtime; host).
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace b12x::detail {

/// cudaLaunchKernelEx with programmatic dependent launch when `pdl` (the kernel may start while
/// its predecessor drains; it must griddepcontrol.wait before touching data the predecessor
/// writes) and a thread-block cluster when `cluster` is not 1x1x1 (SM90+). Returns the launch
/// status; callers wrap it in B12X_CUDA_CHECK.
template <typename... KArgs, typename... Args>
cudaError_t launch_ex(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                      cudaStream_t stream, bool pdl, dim3 cluster, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  if (cluster.x * cluster.y * cluster.z > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster.x;
    attr[n].val.clusterDim.y = cluster.y;
    attr[n].val.clusterDim.z = cluster.z;
    ++n;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace b12x::detail
