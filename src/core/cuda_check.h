// Internal: CUDA error checking for host code. Every CUDA runtime call in b12x goes through
// B12X_CUDA_CHECK so failures surface as b12x::Error(kCudaError) naming the call and location.
#pragma once

#include <cuda_runtime_api.h>

#include "b12x/status.h"

#define B12X_CUDA_CHECK(expr)                                                                      \
  do {                                                                                             \
    cudaError_t b12x_err_ = (expr);                                                                \
    if (b12x_err_ != cudaSuccess) {                                                                \
      cudaGetLastError();                                                                          \
      B12X_FAIL(::b12x::Status::kCudaError, #expr, " failed: ", cudaGetErrorName(b12x_err_), " (", \
                cudaGetErrorString(b12x_err_), ") at ", __FILE__, ":", __LINE__);                  \
    }                                                                                              \
  } while (0)

/// After a kernel launch: report launch-configuration errors without synchronizing.
#define B12X_CUDA_CHECK_LAUNCH() B12X_CUDA_CHECK(cudaGetLastError())

namespace b12x::detail {

/// Makes `device` current for a scope and restores the caller's device on every exit, errors
/// included: plan-time function attributes and occupancy queries act on the CURRENT device, so a
/// plan for device d made from a thread whose current device is another must switch for them.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    B12X_CUDA_CHECK(cudaGetDevice(&prev_));
    if (device != prev_) B12X_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceScope() {
    int cur = 0;
    if (cudaGetDevice(&cur) == cudaSuccess && cur != prev_) cudaSetDevice(prev_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int prev_ = 0;
};

}  // namespace b12x::detail
