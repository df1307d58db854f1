// Version, compiled architectures, device queries, capture guard, freeze flag and logging.
#include "b12x/runtime.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>

#include "b12x/build_config.h"
#include "b12x/status.h"
#include "core/cuda_check.h"

namespace b12x {

const char* version() noexcept {
  return B12X_VERSION_STRING;
}
const char* compiled_arch_string() noexcept {
  return B12X_CUDA_ARCHITECTURES;
}

std::vector<int> compiled_archs() {
  std::vector<int> out;
  std::string s = B12X_CUDA_ARCHITECTURES;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ';')) {
    int v = 0;
    for (char c : item) {
      if (c >= '0' && c <= '9')
        v = v * 10 + (c - '0');
      else
        break;
    }
    if (v > 0) out.push_back(v);
  }
  return out;
}

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

namespace {
ArchFamily family_of(int major, int minor) {
  const int cc = major * 10 + minor;
  switch (cc) {
    case 89:
      return ArchFamily::kSm89;
    case 90:
      return ArchFamily::kSm90;
    case 120:
      return ArchFamily::kSm120;
    case 121:
      return ArchFamily::kSm121;
    default:
      return ArchFamily::kNone;
  }
}
}  // namespace

const DeviceInfo& device_info(int ordinal) {
  static std::mutex mu;
  static std::map<int, DeviceInfo> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(ordinal);
  if (it != cache.end()) return it->second;
  const int n = device_count();
  if (n == 0) B12X_FAIL(Status::kNoDevice, "no CUDA device is visible");
  B12X_CHECK_ARG(ordinal >= 0 && ordinal < n, "device ordinal ", ordinal, " outside [0, ", n, ")");
  cudaDeviceProp p{};
  B12X_CUDA_CHECK(cudaGetDeviceProperties(&p, ordinal));
  DeviceInfo d;
  d.ordinal = ordinal;
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.smem_per_block_optin = static_cast<int64_t>(p.sharedMemPerBlockOptin);
  d.l2_bytes = p.l2CacheSize;
  d.global_mem_bytes = static_cast<int64_t>(p.totalGlobalMem);
  d.family = family_of(p.major, p.minor);
  const int cc = p.major * 10 + p.minor;
  for (int a : compiled_archs())
    if (a == cc) d.arch_compiled = true;
  return cache.emplace(ordinal, d).first->second;
}

int current_device() {
  int d = 0;
  B12X_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void require_compiled_arch(int ordinal, const char* op) {
  const DeviceInfo& d = device_info(ordinal);
  if (!d.arch_compiled || d.family == ArchFamily::kNone)
    B12X_FAIL(Status::kArchNotCompiled, op, ": device ", ordinal, " (", d.name, ", sm_", d.cc_major,
              d.cc_minor, ") is not supported by this build (compiled: ", B12X_CUDA_ARCHITECTURES,
              "; supported families sm_89, sm_90a, sm_120a, sm_121a; rebuild with "
              "-DCMAKE_CUDA_ARCHITECTURES including ",
              d.cc_major, d.cc_minor, d.cc_major >= 9 ? "a" : "", ")");
}

bool stream_is_capturing(Stream stream) {
  if (device_count() == 0) return false;
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  const cudaError_t e = cudaStreamIsCapturing(stream, &st);
  // Plans without a stream argument ask about the legacy stream: while a blocking stream of the
  // device is being captured, that query answers cudaErrorStreamCaptureImplicit (the capture
  // itself is not invalidated), which means exactly "a capture is in progress".
  if (stream == nullptr && e == cudaErrorStreamCaptureImplicit) {
    cudaGetLastError();
    return true;
  }
  B12X_CUDA_CHECK(e);
  return st != cudaStreamCaptureStatusNone;
}

void refuse_during_capture(Stream stream, const char* op) {
  if (stream_is_capturing(stream))
    B12X_FAIL(Status::kCaptureActive, op,
              ": host-side planning/preparation cannot run while the stream is being captured "
              "into a CUDA graph; plan and prepare before capture");
}

namespace {
struct Registry {
  std::mutex mu;
  bool frozen = false;
  std::string reason;
  std::vector<KernelResolution> entries;                // first-resolution order
  std::map<std::pair<int, std::string>, size_t> index;  // (device, signature) -> entry
};
Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: plans may run from other statics
  return *r;
}
std::atomic<bool> g_frozen{false};  // lock-free fast path for kernel_resolution_frozen()
thread_local std::string t_last_signature;
}  // namespace

void freeze_kernel_resolution(const std::string& reason) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.reason = reason;
  r.frozen = true;
  g_frozen = true;
}
void unfreeze_kernel_resolution() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.frozen = false;
  g_frozen = false;
}
bool kernel_resolution_frozen() {
  return g_frozen.load();
}

std::vector<KernelResolution> resolved_kernels() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.entries;
}

void clear_resolved_kernels() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.entries.clear();
  r.index.clear();
}

namespace detail {

void resolve_kernels(const char* op, int device, const std::string& signature,
                     const std::string& shape) {
  B12X_ASSERT(!signature.empty(), op, ": empty kernel signature");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const auto key = std::make_pair(device, signature);
  auto it = r.index.find(key);
  if (it == r.index.end()) {
    if (r.frozen)
      B12X_FAIL(Status::kFrozen, op, ": kernel resolution is frozen",
                r.reason.empty() ? std::string() : " (" + r.reason + ")", " and ", shape,
                " on device ", device, " needs kernel signature '", signature,
                "', which was not resolved before the freeze (", r.index.size(),
                " signatures were); warm this shape up (b12x::warmup, or plan it once) before "
                "freeze_kernel_resolution(), or call unfreeze_kernel_resolution()");
    KernelResolution e;
    e.device = device;
    e.op = op;
    e.signature = signature;
    e.shape = shape;
    it = r.index.emplace(key, r.entries.size()).first;
    r.entries.push_back(std::move(e));
  }
  ++r.entries[it->second].plans;
  t_last_signature = signature;
  if (log_level() >= 3)
    log_message(3, std::string(op) + ": kernels '" + signature + "' for " + shape);
}

const std::string& last_kernel_signature() {
  return t_last_signature;
}

}  // namespace detail

int log_level() {
  static const int level = [] {
    const char* v = std::getenv("B12X_LOG_LEVEL");
    return v ? std::atoi(v) : 0;
  }();
  return level;
}

void log_message(int level, const std::string& message) {
  if (level <= log_level()) std::fprintf(stderr, "[b12x] %s\n", message.c_str());
}

}  // namespace b12x
