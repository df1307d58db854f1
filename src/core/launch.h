// Internal: the one kernel-launch helper behind every area's launchers (CUDA runtime; host).
#pragma once

#include <cuda_runtime.h>

#include <mutex>
#include <set>
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

/// Opts `fn` into `bytes` of dynamic shared memory (and, with `max_carveout`, the whole unified L1
/// as shared memory) on the CURRENT device, once per (device, kernel). cudaFuncSetAttribute acts on
/// the current device's copy of the kernel, so a once-per-process flag would leave a second device
/// of the same process without the opt-in (its first launch above 48 KB would fail). A function
/// attribute, not a stream operation: legal while a stream captures. `bytes` must be the largest
/// this kernel is ever launched with on that device.
inline cudaError_t opt_in_smem(const void* fn, int bytes, bool max_carveout = false) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  static std::mutex mu;
  static std::set<std::pair<int, const void*>> done;
  std::lock_guard<std::mutex> lock(mu);
  if (done.count({dev, fn}) != 0) return cudaSuccess;
  e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess && max_carveout)
    e = cudaFuncSetAttribute(fn, cudaFuncAttributePreferredSharedMemoryCarveout,
                             cudaSharedmemCarveoutMaxShared);
  if (e == cudaSuccess) done.insert({dev, fn});
  return e;
}

}  // namespace b12x::detail
