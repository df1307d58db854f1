// A host-only stand-in for the CUDA runtime calls libb12x makes while it plans, packs, binds and
// runs the linear GEMM, so that a CPU test can plan for devices it does not have (SM90, SM120,
// SM121, SM89) and see which kernels every run launches. The definitions here interpose the
// shared libcudart's (the executable comes first in the dynamic symbol lookup; CMake links it
// with ENABLE_EXPORTS). Device memory is host memory, launches are recorded (kernel, grid, block,
// dynamic shared memory, cluster) and checked against the device's limits instead of run, and
// occupancy is estimated from shared memory and threads per SM (no register counts: the plans see
// the occupancy their kernels were sized for).
#include "plans/fake_cudart.h"

#include <cuda_runtime_api.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace fake_cuda {
namespace {

struct State {
  std::mutex mu;
  std::vector<Device> devices;
  int current = 0;
  cudaError_t last = cudaSuccess;
  std::map<std::pair<const void*, int>, int> smem_optin;  // (kernel, device) -> bytes
  std::vector<Launch> launches;
  std::string first_error;
  // B12X_FAKE_CUDA_LOG=<file> (with the fake preloaded into another binary, e.g. the GPU tests):
  // every launched kernel's name, written at exit.
  std::set<const void*> logged;
  ~State() {
    const char* path = std::getenv("B12X_FAKE_CUDA_LOG");
    if (path == nullptr) return;
    if (FILE* f = std::fopen(path, "w")) {
      for (const void* k : logged) std::fprintf(f, "%s\n", kernel_name(k).c_str());
      std::fclose(f);
    }
  }
};
State& st() {
  static State s;
  return s;
}

cudaError_t fail(cudaError_t e, const std::string& why) {
  State& s = st();
  if (s.first_error.empty()) s.first_error = why;
  s.last = e;
  return e;
}

int blocks_per_sm(const Device& d, int threads, size_t dyn) {
  const int64_t per_block = static_cast<int64_t>(dyn) + 1024;  // + the per-block reserve
  const int64_t by_smem = d.smem_per_sm / std::max<int64_t>(per_block, 1);
  const int by_threads = d.threads_per_sm / std::max(threads, 1);
  return static_cast<int>(std::min<int64_t>({by_smem, by_threads, d.blocks_per_sm}));
}

}  // namespace

void set_devices(const std::vector<Device>& devices) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  s.devices = devices;
}

std::string kernel_name(const void* fn) {
  Dl_info info{};
  if (fn == nullptr || dladdr(fn, &info) == 0) return "<unknown>";
  if (info.dli_sname == nullptr || info.dli_saddr != fn) {
    // A launch function hidden from the dynamic symbol table: named by its library file and offset.
    char buf[64];
    std::snprintf(buf, sizeof(buf), "+0x%zx",
                  static_cast<size_t>(static_cast<const char*>(fn) -
                                      static_cast<const char*>(info.dli_fbase)));
    return std::string(info.dli_fname != nullptr ? info.dli_fname : "?") + buf;
  }
  int status = 0;
  char* dm = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
  std::string out = status == 0 && dm != nullptr ? dm : info.dli_sname;
  std::free(dm);
  return out;
}

std::vector<Launch> take_launches() {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  std::vector<Launch> out;
  out.swap(s.launches);
  return out;
}

std::string take_error() {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  std::string out;
  out.swap(s.first_error);
  return out;
}

}  // namespace fake_cuda

using fake_cuda::st;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = static_cast<int>(st().devices.size());
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  auto& s = st();
  if (device < 0 || device >= static_cast<int>(s.devices.size())) return cudaErrorInvalidDevice;
  const fake_cuda::Device& d = s.devices[device];
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof(p->name), "%s", d.name.c_str());
  p->major = d.cc / 10;
  p->minor = d.cc % 10;
  p->multiProcessorCount = d.sms;
  p->sharedMemPerBlockOptin = static_cast<size_t>(d.smem_optin);
  p->sharedMemPerMultiprocessor = static_cast<size_t>(d.smem_per_sm);
  p->sharedMemPerBlock = 48 * 1024;
  p->maxThreadsPerMultiProcessor = d.threads_per_sm;
  p->maxThreadsPerBlock = 1024;
  p->l2CacheSize = d.l2_bytes;
  p->totalGlobalMem = size_t{80} << 30;
  p->warpSize = 32;
  p->regsPerBlock = 65536;
  p->regsPerMultiprocessor = 65536;
  p->maxBlocksPerMultiProcessor = d.blocks_per_sm;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return cudaErrorInvalidDevice;
  switch (attr) {
    case cudaDevAttrComputeCapabilityMajor:
      *value = p.major;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = p.minor;
      break;
    case cudaDevAttrMultiProcessorCount:
      *value = p.multiProcessorCount;
      break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(p.sharedMemPerBlockOptin);
      break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
      *value = static_cast<int>(p.sharedMemPerMultiprocessor);
      break;
    case cudaDevAttrL2CacheSize:
      *value = p.l2CacheSize;
      break;
    case cudaDevAttrMaxThreadsPerMultiProcessor:
      *value = p.maxThreadsPerMultiProcessor;
      break;
    case cudaDevAttrMaxBlocksPerMultiprocessor:
      *value = p.maxBlocksPerMultiProcessor;
      break;
    default:
      return fake_cuda::fail(cudaErrorInvalidValue,
                             "cudaDeviceGetAttribute: attribute " + std::to_string(attr));
  }
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = st().current;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= static_cast<int>(st().devices.size())) return cudaErrorInvalidDevice;
  st().current = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t, cudaStreamCaptureStatus* status) {
  *status = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = st().last;
  st().last = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError(void) {
  return st().last;
}

const char* cudaGetErrorName(cudaError_t e) {
  return e == cudaSuccess ? "cudaSuccess" : "fake_cuda_error";
}
const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "fake CUDA runtime error (see fake_cuda::take_error)";
}

cudaError_t cudaMalloc(void** ptr, size_t size) {
  *ptr = std::aligned_alloc(256, (std::max<size_t>(size, 1) + 255) / 256 * 256);
  return *ptr != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}
// Copies into "device" memory are real (pack uploads its host image); run never copies device
// data the test did not allocate (activations and outputs are fake addresses), so async copies
// and sets are recorded as done without touching memory.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind) {
  std::memcpy(dst, src, n);
  return cudaSuccess;
}
cudaError_t cudaMemcpy2D(void* dst, size_t dp, const void* src, size_t sp, size_t w, size_t h,
                         cudaMemcpyKind) {
  for (size_t r = 0; r < h; ++r)
    std::memcpy(static_cast<char*>(dst) + r * dp, static_cast<const char*>(src) + r * sp, w);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t) {
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int v, size_t n) {
  std::memset(p, v, n);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void*, int, size_t, cudaStream_t) {
  return cudaSuccess;
}

cudaError_t cudaFuncGetName(const char** name, const void* func) {
  static thread_local std::string n;
  n = fake_cuda::kernel_name(func);
  *name = n.c_str();
  return cudaSuccess;
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, const void* func) {
  *a = cudaFuncAttributes{};
  a->maxThreadsPerBlock = 1024;
  a->numRegs = 64;
  auto& s = st();
  auto it = s.smem_optin.find({func, s.current});
  a->maxDynamicSharedSizeBytes = it != s.smem_optin.end() ? it->second : 48 * 1024;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  auto& s = st();
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    const fake_cuda::Device& d = s.devices.at(s.current);
    if (value < 0 || value > d.smem_optin)
      return fake_cuda::fail(cudaErrorInvalidValue,
                             "cudaFuncSetAttribute: " + std::to_string(value) + " B of shared " +
                                 "memory above the opt-in of " + d.name + " for " +
                                 fake_cuda::kernel_name(func));
    int& have = s.smem_optin[{func, s.current}];
    have = std::max(have, value);
  }
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, const void*, int threads,
                                                          size_t dyn) {
  *n = fake_cuda::blocks_per_sm(st().devices.at(st().current), threads, dyn);
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveClusters(int* n, const void*, const cudaLaunchConfig_t* cfg) {
  const fake_cuda::Device& d = st().devices.at(st().current);
  int cluster = 1;
  for (unsigned i = 0; i < cfg->numAttrs; ++i)
    if (cfg->attrs[i].id == cudaLaunchAttributeClusterDimension)
      cluster = static_cast<int>(cfg->attrs[i].val.clusterDim.x * cfg->attrs[i].val.clusterDim.y *
                                 cfg->attrs[i].val.clusterDim.z);
  if (d.cc < 90 && cluster > 1) {
    *n = 0;
    return fake_cuda::fail(cudaErrorInvalidValue, "cluster occupancy query on " + d.name);
  }
  const int threads = static_cast<int>(cfg->blockDim.x * cfg->blockDim.y * cfg->blockDim.z);
  *n = d.sms * fake_cuda::blocks_per_sm(d, threads, cfg->dynamicSmemBytes) / cluster;
  return cudaSuccess;
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* cfg, const void* func, void**) {
  auto& s = st();
  const fake_cuda::Device& d = s.devices.at(s.current);
  fake_cuda::Launch l;
  l.device = s.current;
  l.kernel = func;
  l.grid = cfg->gridDim;
  l.block = cfg->blockDim;
  l.smem = static_cast<int64_t>(cfg->dynamicSmemBytes);
  dim3 cd(1, 1, 1);
  for (unsigned i = 0; i < cfg->numAttrs; ++i)
    if (cfg->attrs[i].id == cudaLaunchAttributeClusterDimension)
      cd = dim3(cfg->attrs[i].val.clusterDim.x, cfg->attrs[i].val.clusterDim.y,
                cfg->attrs[i].val.clusterDim.z);
  l.cluster = static_cast<int>(cd.x * cd.y * cd.z);
  const int threads = static_cast<int>(l.block.x * l.block.y * l.block.z);
  std::string why;
  if (func == nullptr) why = "null kernel";
  if (threads < 1 || threads > 1024) why = "block of " + std::to_string(threads) + " threads";
  if (l.grid.x < 1 || l.grid.y < 1 || l.grid.z < 1 || l.grid.y > 65535 || l.grid.z > 65535)
    why = "grid " + std::to_string(l.grid.x) + "x" + std::to_string(l.grid.y) + "x" +
          std::to_string(l.grid.z);
  if (l.cluster > 1 && d.cc < 90) why = "a cluster of " + std::to_string(l.cluster) + " on sm_89";
  if (l.cluster > 8) why = "a cluster of " + std::to_string(l.cluster) + " (portable limit 8)";
  if (l.grid.x % cd.x != 0 || l.grid.y % cd.y != 0 || l.grid.z % cd.z != 0)
    why = "grid not a multiple of the cluster";
  if (l.smem > d.smem_optin) why = std::to_string(l.smem) + " B of shared memory on " + d.name;
  if (l.smem > 48 * 1024) {
    auto it = s.smem_optin.find({func, s.current});
    if (it == s.smem_optin.end() || it->second < l.smem)
      why = std::to_string(l.smem) + " B of shared memory without the opt-in";
  }
  if (!why.empty())
    return fake_cuda::fail(cudaErrorInvalidConfiguration,
                           "launch of " + fake_cuda::kernel_name(func) + ": " + why);
  s.launches.push_back(l);
  if (s.launches.size() > 4096) s.launches.erase(s.launches.begin(), s.launches.begin() + 2048);
  s.logged.insert(func);
  return cudaSuccess;
}

}  // extern "C"
