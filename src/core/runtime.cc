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

const char* version() noexcept { return B12X_VERSION_STRING; }
const char* compiled_arch_string() noexcept { return B12X_CUDA_ARCHITECTURES; }

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
    case 89: return ArchFamily::kSm89;
    case 90: return ArchFamily::kSm90;
    case 120: return ArchFamily::kSm120;
    case 121: return ArchFamily::kSm121;
    default: return ArchFamily::kNone;
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
    B12X_FAIL(Status::kArchNotCompiled, op, ": device ", ordinal, " (", d.name, ", sm_",
              d.cc_major, d.cc_minor, ") is not supported by this build (compiled: ",
              B12X_CUDA_ARCHITECTURES,
              "; supported families sm_89, sm_90a, sm_120a, sm_121a; rebuild with "
              "-DCMAKE_CUDA_ARCHITECTURES including ",
              d.cc_major, d.cc_minor, d.cc_major >= 9 ? "a" : "", ")");
}

bool stream_is_capturing(Stream stream) {
  if (device_count() == 0) return false;
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  B12X_CUDA_CHECK(cudaStreamIsCapturing(stream, &st));
  return st != cudaStreamCaptureStatusNone;
}

void refuse_during_capture(Stream stream, const char* op) {
  if (stream_is_capturing(stream))
    B12X_FAIL(Status::kCaptureActive, op,
              ": host-side planning/preparation cannot run while the stream is being captured "
              "into a CUDA graph; plan and prepare before capture");
}

namespace {
std::atomic<bool> g_frozen{false};
std::mutex g_freeze_mu;
std::string g_freeze_reason;
}  // namespace

void freeze_kernel_resolution(const std::string& reason) {
  std::lock_guard<std::mutex> lock(g_freeze_mu);
  g_freeze_reason = reason;
  g_frozen = true;
}
void unfreeze_kernel_resolution() { g_frozen = false; }
bool kernel_resolution_frozen() { return g_frozen.load(); }

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
