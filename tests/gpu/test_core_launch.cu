// core/launch.h on the GPU: opt_in_smem (the per-(device, kernel) opt-in into more than 48 KB of
// dynamic shared memory) and resident_ctas (the occupancy memo in the same table).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "b12x/status.h"
#include "core/launch.h"
#include "gpu_test_util.h"

using b12x::test::DeviceBuffer;

namespace {

/// Touches the first and the last word of its dynamic shared memory (so a launch with more than
/// the opted-in bytes fails instead of passing unnoticed) and writes their sum.
__global__ void smem_probe_kernel(int* out, int words) {
  extern __shared__ int buf[];
  if (threadIdx.x == 0) buf[0] = 1;
  if (threadIdx.x == 1 % blockDim.x) buf[words - 1] = 2;
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = buf[0] + buf[words - 1];
}
// Separate kernels per test, so that the process-wide table starts empty for each.
__global__ void smem_grow_kernel(int* out, int words) {
  extern __shared__ int buf[];
  if (threadIdx.x == 0) buf[0] = 1;
  if (threadIdx.x == 1 % blockDim.x) buf[words - 1] = 2;
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = buf[0] + buf[words - 1];
}
__global__ void smem_fail_kernel(int* out, int words) {
  extern __shared__ int buf[];
  if (threadIdx.x == 0) buf[0] = 1;
  if (threadIdx.x == 1 % blockDim.x) buf[words - 1] = 2;
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = buf[0] + buf[words - 1];
}
__global__ void smem_occ_kernel(int* out, int words) {
  extern __shared__ int buf[];
  if (threadIdx.x == 0) buf[0] = 1;
  if (threadIdx.x == 1 % blockDim.x) buf[words - 1] = 2;
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = buf[0] + buf[words - 1];
}

/// Launches k with `bytes` of dynamic shared memory; returns the launch + sync status and checks
/// the kernel's output on success.
cudaError_t launch_probe(void (*k)(int*, int), int bytes, int* out) {
  k<<<2, 64, static_cast<size_t>(bytes)>>>(out, bytes / 4);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e == cudaSuccess) {
    int h[2] = {0, 0};
    e = cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost);
    EXPECT_EQ(h[0], 3);
    EXPECT_EQ(h[1], 3);
  }
  return e;
}

int max_dynamic_attr(const void* fn) {
  cudaFuncAttributes a{};
  EXPECT_EQ(cudaFuncGetAttributes(&a, fn), cudaSuccess);
  return a.maxDynamicSharedSizeBytes;
}

int optin_limit(int dev) {
  int v = 0;
  EXPECT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), cudaSuccess);
  return v;
}

}  // namespace

// Growing byte counts on one kernel: each opt-in raises the attribute, a smaller later request
// keeps the largest (a launch with the earlier, larger size still runs), and the max-carveout
// flag is added without lowering the bytes.
TEST(IntegrationGpuLaunch, OptInSmemGrowsAndNeverShrinks) {
  B12X_REQUIRE_GPU();
  const int dev = 0;
  B12X_TEST_CUDA(cudaSetDevice(dev));
  const int limit = optin_limit(dev);
  if (limit <= 64 * 1024)
    GTEST_SKIP() << "device " << dev << " opts in at most " << limit
                 << " B of shared memory per block: no room above 48 KB to test";
  DeviceBuffer<int> out(2);
  const void* fn = reinterpret_cast<const void*>(&smem_grow_kernel);
  const int a = 56 * 1024, b = std::min(limit, 96 * 1024), c = 52 * 1024;
  // Without the opt-in, 56 KB does not launch (the check that the later successes mean something).
  EXPECT_NE(launch_probe(&smem_grow_kernel, a, out.ptr), cudaSuccess);
  cudaGetLastError();
  B12X_TEST_CUDA(b12x::detail::opt_in_smem(fn, a));
  EXPECT_EQ(max_dynamic_attr(fn), a);
  B12X_TEST_CUDA(launch_probe(&smem_grow_kernel, a, out.ptr));
  EXPECT_NE(launch_probe(&smem_grow_kernel, b, out.ptr), cudaSuccess);
  cudaGetLastError();
  B12X_TEST_CUDA(b12x::detail::opt_in_smem(fn, b));
  EXPECT_EQ(max_dynamic_attr(fn), b);
  B12X_TEST_CUDA(launch_probe(&smem_grow_kernel, b, out.ptr));
  B12X_TEST_CUDA(b12x::detail::opt_in_smem(fn, c));  // smaller: the attribute stays at b
  EXPECT_EQ(max_dynamic_attr(fn), b);
  B12X_TEST_CUDA(launch_probe(&smem_grow_kernel, b, out.ptr));
  B12X_TEST_CUDA(launch_probe(&smem_grow_kernel, c, out.ptr));
  B12X_TEST_CUDA(b12x::detail::opt_in_smem(fn, c, /*max_carveout=*/true));
  EXPECT_EQ(max_dynamic_attr(fn), b);
  cudaFuncAttributes attr{};
  B12X_TEST_CUDA(cudaFuncGetAttributes(&attr, fn));
  EXPECT_EQ(attr.preferredShmemCarveout, static_cast<int>(cudaSharedmemCarveoutMaxShared));
  B12X_TEST_CUDA(launch_probe(&smem_grow_kernel, b, out.ptr));
  // The done case is a lookup that does not touch the attribute: lower it behind the table's
  // back, ask for fewer bytes than recorded, and the attribute stays as set here.
  B12X_TEST_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, a));
  B12X_TEST_CUDA(b12x::detail::opt_in_smem(fn, c));
  EXPECT_EQ(max_dynamic_attr(fn), a);
  B12X_TEST_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, b));
}

// An impossible size fails with b12x::Error (kCudaError) naming the kernel, the bytes and the
// device; nothing is recorded, so a possible size afterwards still opts in and launches.
TEST(IntegrationGpuLaunch, OptInSmemImpossibleSizeNamesKernelBytesDevice) {
  B12X_REQUIRE_GPU();
  const int dev = 0;
  B12X_TEST_CUDA(cudaSetDevice(dev));
  const int limit = optin_limit(dev);
  const void* fn = reinterpret_cast<const void*>(&smem_fail_kernel);
  const int too_many = limit + 1024;
  try {
    (void)b12x::detail::opt_in_smem(fn, too_many);
    FAIL() << "opt_in_smem(" << too_many << " B) above the device's " << limit << " B did not fail";
  } catch (const b12x::Error& e) {
    EXPECT_EQ(e.code(), b12x::Status::kCudaError);
    const std::string m = e.what();
    EXPECT_NE(m.find("smem_fail_kernel"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(too_many) + " B"), std::string::npos) << m;
    EXPECT_NE(m.find("device " + std::to_string(dev)), std::string::npos) << m;
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // the sticky error was cleared
  const int ok = std::min(limit, 64 * 1024);
  B12X_TEST_CUDA(b12x::detail::opt_in_smem(fn, ok));
  EXPECT_EQ(max_dynamic_attr(fn), ok);
  DeviceBuffer<int> out(2);
  B12X_TEST_CUDA(launch_probe(&smem_fail_kernel, ok, out.ptr));
}

// resident_ctas opts in and returns the runtime's occupancy for each (threads, bytes) asked, the
// memo answering a repeat without a new query and a different query replacing it.
TEST(IntegrationGpuLaunch, ResidentCtasMatchesOccupancyQuery) {
  B12X_REQUIRE_GPU();
  B12X_TEST_CUDA(cudaSetDevice(0));
  const int limit = optin_limit(0);
  const void* fn = reinterpret_cast<const void*>(&smem_occ_kernel);
  const int sizes[] = {0, 16 * 1024, std::min(limit, 72 * 1024), 16 * 1024};
  for (const int threads : {64, 256}) {
    for (const int bytes : sizes) {
      for (int rep = 0; rep < 2; ++rep) {
        int got = -1;
        B12X_TEST_CUDA(b12x::detail::resident_ctas(fn, threads, bytes, &got));
        int want = 0;
        B12X_TEST_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&want, fn, threads,
                                                                     static_cast<size_t>(bytes)));
        EXPECT_EQ(got, want) << threads << " threads, " << bytes << " B, query " << rep;
        EXPECT_GE(got, 1);
      }
    }
  }
  EXPECT_GE(max_dynamic_attr(fn), std::min(limit, 72 * 1024));
  DeviceBuffer<int> out(2);
  B12X_TEST_CUDA(launch_probe(&smem_occ_kernel, std::min(limit, 72 * 1024), out.ptr));
  // The max carveout (asked by this query, then kept for every later one) is part of the memo's
  // key: each answer is the runtime's query under the kernel's carveout at that moment. The first
  // query repeats the loop's last (256 threads, 16 KB) with the carveout now on.
  for (const bool carve : {true, false}) {
    for (const int bytes : {16 * 1024, 0, std::min(limit, 72 * 1024)}) {
      int got = -1;
      B12X_TEST_CUDA(b12x::detail::resident_ctas(fn, 256, bytes, &got, carve));
      int want = 0;
      B12X_TEST_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&want, fn, 256,
                                                                   static_cast<size_t>(bytes)));
      EXPECT_EQ(got, want) << "carveout " << carve << ", " << bytes << " B";
    }
  }
}

// The opt-in is per device (cudaFuncSetAttribute acts on the current device's copy of the
// kernel): opting in on device 0 leaves device 1 without it until opt_in_smem runs there.
TEST(IntegrationGpuLaunch, OptInSmemPerDevice) {
  B12X_REQUIRE_GPU();
  int n = 0;
  B12X_TEST_CUDA(cudaGetDeviceCount(&n));
  if (n < 2) GTEST_SKIP() << "one CUDA device visible: the per-device opt-in needs two";
  const int bytes = std::min(optin_limit(0), std::min(optin_limit(1), 64 * 1024));
  if (bytes <= 48 * 1024) GTEST_SKIP() << "no room above 48 KB on devices 0 / 1";
  const void* fn = reinterpret_cast<const void*>(&smem_probe_kernel);
  B12X_TEST_CUDA(cudaSetDevice(0));
  DeviceBuffer<int> out0(2);
  B12X_TEST_CUDA(b12x::detail::opt_in_smem(fn, bytes));
  B12X_TEST_CUDA(launch_probe(&smem_probe_kernel, bytes, out0.ptr));
  B12X_TEST_CUDA(cudaSetDevice(1));
  {
    DeviceBuffer<int> out1(2);
    if (max_dynamic_attr(fn) < bytes) {  // the attribute is per device here
      EXPECT_NE(launch_probe(&smem_probe_kernel, bytes, out1.ptr), cudaSuccess);
      cudaGetLastError();
    }
    B12X_TEST_CUDA(b12x::detail::opt_in_smem(fn, bytes));
    EXPECT_EQ(max_dynamic_attr(fn), bytes);
    B12X_TEST_CUDA(launch_probe(&smem_probe_kernel, bytes, out1.ptr));
  }
  B12X_TEST_CUDA(cudaSetDevice(0));
}
