// Internal: the one kernel-launch helper behind every area's launchers (CUDA runtime; host).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>

#include "b12x/status.h"

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

/// Thread-block clusters of (1, cluster, 1) CTAs of `fn` (`threads` threads, `bytes` of dynamic
/// shared memory, opted in before) that can be resident at once on the CURRENT device
/// (cudaOccupancyMaxActiveClusters); 0 where the device or driver cannot answer (no clusters), its
/// non-sticky error cleared. Host only, for plan time.
inline int max_active_clusters(const void* fn, int threads, int bytes, int cluster) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(1, static_cast<unsigned>(cluster), 1);
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = static_cast<size_t>(bytes);
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = 1;
  attr.val.clusterDim.y = static_cast<unsigned>(cluster);
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, fn, &cfg) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return clusters;
}

namespace smem_opt_in {

/// One (device, kernel) whose opt-in is done: `fn` is published last (release), after `dev` and
/// `bytes`, so a reader that sees its kernel in a slot also sees the rest. Slots are only ever
/// filled (under the writers' mutex), never cleared; `bytes` only grows (the largest opt-in).
struct Slot {
  std::atomic<const void*> fn{nullptr};
  std::atomic<int> dev{-1};
  std::atomic<int> bytes{0};  // dynamic bytes opted in, times 2, plus 1 with the max carveout
  /// resident_ctas's memo: carveout << 63 | threads << 40 | dynamic bytes << 8 | CTAs per SM
  /// (min 255), 0 = none;
  /// one word, so a reader never pairs one query's key with another's count.
  std::atomic<uint64_t> ctas{0};
};
inline constexpr unsigned kSlots = 2048;  // a few hundred kernels x devices in practice
inline Slot* table() {
  static Slot t[kSlots];
  return t;
}
inline unsigned home(const void* fn, int dev) {
  const uint64_t h = (reinterpret_cast<uintptr_t>(fn) >> 4) * 0x9E3779B97F4A7C15ull +
                     static_cast<uint64_t>(dev) * 0xC2B2AE3D27D4EB4Full;
  return static_cast<unsigned>(h >> 40) % kSlots;
}
/// The slot of (fn, dev), or the first empty slot of its probe sequence (fn == nullptr), or null
/// when the table is full.
inline Slot* find(const void* fn, int dev) {
  Slot* t = table();
  for (unsigned i = 0, s = home(fn, dev); i < kSlots; ++i, s = (s + 1) % kSlots) {
    const void* f = t[s].fn.load(std::memory_order_acquire);
    if (f == nullptr || (f == fn && t[s].dev.load(std::memory_order_relaxed) == dev)) return &t[s];
  }
  return nullptr;
}

}  // namespace smem_opt_in

/// Opts `fn` into `bytes` of dynamic shared memory (and, with `max_carveout`, the whole unified L1
/// as shared memory) on the CURRENT device, once per (device, kernel, largest bytes so far):
/// cudaFuncSetAttribute acts on the current device's copy of the kernel, so a once-per-process
/// flag would leave a second device of the same process without the opt-in (its first launch
/// above 48 KB would fail). The launchers call this on every launch, so the done case is a
/// lock-free lookup (no mutex, no allocation); the first call per (device, kernel), or one asking
/// for more bytes than before, sets the attributes under a mutex and then publishes them. A
/// function attribute, not a stream operation: legal while a stream captures. On failure nothing
/// is recorded (the next launch tries again) and b12x::Error (kCudaError) names the kernel, the
/// device and the bytes; the cudaError_t return (always cudaSuccess then) keeps the callers'
/// B12X_CUDA_CHECK wrappers valid.
inline cudaError_t opt_in_smem(const void* fn, int bytes, bool max_carveout = false) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  auto covers = [&](int have) { return have / 2 >= bytes && (have % 2 == 1 || !max_carveout); };
  smem_opt_in::Slot* slot = smem_opt_in::find(fn, dev);
  // find() may return an empty slot that another thread fills with (fn, another device) before
  // the loads below: check the device too (the acquire on fn orders the dev read).
  if (slot != nullptr && slot->fn.load(std::memory_order_acquire) == fn &&
      slot->dev.load(std::memory_order_relaxed) == dev &&
      covers(slot->bytes.load(std::memory_order_acquire)))
    return cudaSuccess;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  slot = smem_opt_in::find(fn, dev);  // again: another thread may have filled it meanwhile
  const bool known = slot != nullptr && slot->fn.load(std::memory_order_relaxed) == fn;
  const int have = known ? slot->bytes.load(std::memory_order_relaxed) : 0;
  if (known && covers(have)) return cudaSuccess;
  // The largest bytes asked for so far (a smaller later request must not lower the attribute).
  const int most = std::max(have / 2, bytes);
  const bool carveout = max_carveout || have % 2 == 1;
  e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, most);
  if (e == cudaSuccess && carveout)
    e = cudaFuncSetAttribute(fn, cudaFuncAttributePreferredSharedMemoryCarveout,
                             cudaSharedmemCarveoutMaxShared);
  if (e != cudaSuccess) {
    cudaGetLastError();
    const char* name = nullptr;
    if (cudaFuncGetName(&name, fn) != cudaSuccess || name == nullptr) {
      cudaGetLastError();
      name = "(unnamed)";
    }
    B12X_FAIL(::b12x::Status::kCudaError, "opting kernel ", name, " into ", most,
              " B of dynamic shared memory", carveout ? " (max carveout)" : "", " on device ", dev,
              " failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
  }
  if (slot == nullptr) return cudaSuccess;  // table full: set again at every launch
  slot->bytes.store(most * 2 + (carveout ? 1 : 0), std::memory_order_release);
  if (!known) {
    slot->dev.store(dev, std::memory_order_relaxed);
    slot->fn.store(fn, std::memory_order_release);
  }
  return cudaSuccess;
}

/// The resident CTAs per SM of `fn` launched with `threads` threads and `bytes` of dynamic shared
/// memory on the CURRENT device (cudaOccupancyMaxActiveBlocksPerMultiprocessor), after
/// opt_in_smem(fn, bytes, max_carveout). Host-only, for plan time. Memoized in opt_in_smem's slot
/// of (device, kernel) for the last (threads, bytes, carveout) asked, so the opt-in and the
/// occupancy of a kernel live in one table (a lock-free lookup once known; a query for other
/// threads / bytes replaces it). The carveout preference is part of the key: the runtime's
/// occupancy depends on it, and another caller may turn it on for the same kernel after a query
/// without it (it is never turned off), which must not leave a stale count.
inline cudaError_t resident_ctas(const void* fn, int threads, int bytes, int* ctas,
                                 bool max_carveout = false) {
  cudaError_t e = opt_in_smem(fn, bytes, max_carveout);
  if (e != cudaSuccess) return e;
  int dev = 0;
  e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  smem_opt_in::Slot* slot = smem_opt_in::find(fn, dev);
  if (slot != nullptr && (slot->fn.load(std::memory_order_acquire) != fn ||
                          slot->dev.load(std::memory_order_relaxed) != dev))
    slot = nullptr;  // table full (opt_in_smem recorded nothing): no memo
  // The kernel's carveout as set now (opt_in_smem's low bit: max_carveout, or an earlier caller's).
  const bool carveout = slot != nullptr && slot->bytes.load(std::memory_order_acquire) % 2 == 1;
  const uint64_t key = (carveout ? uint64_t{1} << 63 : 0) | (static_cast<uint64_t>(threads) << 40) |
                       (static_cast<uint64_t>(static_cast<uint32_t>(bytes)) << 8);
  if (slot != nullptr) {
    const uint64_t v = slot->ctas.load(std::memory_order_acquire);
    if (v != 0 && (v & ~uint64_t{0xFF}) == key) {
      *ctas = static_cast<int>(v & 0xFF);
      return cudaSuccess;
    }
  }
  int n = 0;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fn, threads, static_cast<size_t>(bytes));
  if (e != cudaSuccess) return e;
  if (slot != nullptr)
    slot->ctas.store(key | static_cast<uint64_t>(std::min(n, 255)), std::memory_order_release);
  *ctas = n;
  return cudaSuccess;
}

}  // namespace b12x::detail
