// The fake CUDA runtime of the plan tests (fake_cudart.cc): devices described here, launches
// recorded instead of run.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fake_cuda {

struct Device {
  std::string name;
  int cc = 90;  // compute capability, major * 10 + minor
  int sms = 132;
  int64_t smem_optin = 232448;   // dynamic + static shared memory per block
  int64_t smem_per_sm = 233472;  // per SM
  int threads_per_sm = 2048;
  int blocks_per_sm = 32;
  int l2_bytes = 60 << 20;
};

struct Launch {
  int device = 0;
  const void* kernel = nullptr;
  dim3 grid, block;
  int64_t smem = 0;
  int cluster = 1;
};

/// Replaces the visible devices (call before the library's first device query).
void set_devices(const std::vector<Device>& devices);
/// The launches since the last call.
std::vector<Launch> take_launches();
/// The first refused call since the last call ("" when none).
std::string take_error();
/// The demangled name of a kernel's host stub, or "<library file>+0x<offset>" where the stub is
/// not in the dynamic symbol table (resolve it with nm).
std::string kernel_name(const void* fn);

}  // namespace fake_cuda
