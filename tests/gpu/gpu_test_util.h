// Shared helpers for GPU tests: skip without a usable GPU, checked CUDA calls, device buffers,
// output poisoning and comparison statistics.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "b12x/runtime.h"

#define B12X_TEST_CUDA(expr)                                                   \
  do {                                                                         \
    cudaError_t e_ = (expr);                                                   \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorName(e_) << " " \
                               << cudaGetErrorString(e_);                      \
  } while (0)

/// Skip the test (with a clear message) when no GPU this build can run on is present.
#define B12X_REQUIRE_GPU()                                                                     \
  do {                                                                                         \
    if (b12x::device_count() == 0) GTEST_SKIP() << "no CUDA device visible: GPU test skipped"; \
    const auto& d_ = b12x::device_info(0);                                                     \
    if (!d_.arch_compiled)                                                                     \
      GTEST_SKIP() << "device " << d_.name << " (sm_" << d_.cc_major << d_.cc_minor            \
                   << ") not in the compiled architectures: GPU test skipped";                 \
  } while (0)

namespace b12x::test {

/// RAII device buffer.
template <typename T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t count = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : count(n) {
    if (n && cudaMalloc(&ptr, n * sizeof(T)) != cudaSuccess) {
      ptr = nullptr;
      ADD_FAILURE() << "cudaMalloc of " << n * sizeof(T) << " bytes failed";
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr(o.ptr), count(o.count) { o.ptr = nullptr; }
  // Swap, so the moved-from buffer frees what this one held (tests re-size a case's buffers).
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr, o.ptr);
    std::swap(count, o.count);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  size_t bytes() const { return count * sizeof(T); }
  // upload and poison end with a device-wide sync: cudaMemcpy from pageable memory may return
  // before its DMA lands and cudaMemset is asynchronous, both on the legacy default stream, which
  // does not order against the tests' cudaStreamNonBlocking streams. Without the sync a kernel on
  // such a stream can read stale inputs or have its output poisoned after it ran; seen when the
  // GPU is time-sliced between test processes (gpu-check.sh's B12X_GPU_TESTS_PARALLEL).
  void upload(const std::vector<T>& h) {
    EXPECT_EQ(h.size(), count);
    EXPECT_EQ(cudaMemcpy(ptr, h.data(), bytes(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> h(count);
    EXPECT_EQ(cudaMemcpy(h.data(), ptr, bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  /// Fill with a byte pattern (0xFF makes bf16/fp16/fp32 NaN): detects unwritten outputs.
  void poison(uint8_t byte = 0xFF) {
    EXPECT_EQ(cudaMemset(ptr, byte, bytes()), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  /// Fill with fresh random bytes (splitmix64 from a seed drawn from rng()). For scratch: Python
  /// hands an op torch.empty, and one scratch may serve several ops, so a call must not depend on
  /// what the buffer held before it — neither zeros (a fresh cudaMalloc) nor a fixed pattern.
  void randomize();
};

inline std::mt19937_64& rng() {
  static std::mt19937_64 g(std::random_device{}());
  return g;
}

template <typename T>
void DeviceBuffer<T>::randomize() {
  std::vector<uint64_t> h((bytes() + 7) / 8);
  uint64_t x = rng()();
  for (auto& w : h) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    w = z ^ (z >> 31);
  }
  EXPECT_EQ(cudaMemcpy(ptr, h.data(), bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

/// Normal(0, stddev) floats, fresh each call (never zeros).
inline std::vector<float> random_normal(size_t n, float stddev = 1.f) {
  std::normal_distribution<float> d(0.f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng());
  return v;
}

inline std::vector<uint8_t> random_bytes(size_t n) {
  std::uniform_int_distribution<int> d(0, 255);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(d(rng()));
  return v;
}

struct Compare {
  double max_abs = 0, rel_l2 = 0, cosine = 0;
  int64_t nonfinite = 0, count = 0;
  std::string str() const {
    return "max_abs=" + std::to_string(max_abs) + " rel_l2=" + std::to_string(rel_l2) +
           " cos=" + std::to_string(cosine) + " nonfinite=" + std::to_string(nonfinite) + "/" +
           std::to_string(count);
  }
};

/// Statistics of `out` against `ref` (NaN/Inf in out are counted, never pass).
inline Compare compare(const std::vector<float>& out, const std::vector<double>& ref) {
  Compare c;
  c.count = static_cast<int64_t>(out.size());
  double num = 0, den = 0, dot = 0, no = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      ++c.nonfinite;
      continue;
    }
    const double d = out[i] - ref[i];
    c.max_abs = std::max(c.max_abs, std::abs(d));
    num += d * d;
    den += ref[i] * ref[i];
    dot += out[i] * ref[i];
    no += static_cast<double>(out[i]) * out[i];
  }
  c.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  c.cosine = (den > 0 && no > 0) ? dot / std::sqrt(den * no) : (num == 0 ? 1.0 : 0.0);
  return c;
}

}  // namespace b12x::test
