// The MoE last-warp hand-over protocol (moe_decode.cuh kLast) on its own, with the kernel's own
// acquire / release helpers (src/moe/kernels/smem_acq_rel.cuh), to see what compute-sanitizer
// racecheck says about shared-memory acquire / release hand-overs. Session 18 left it unrun (no
// device time after the final). Build from the repo root: nvcc -O3 -arch=sm_90a -Isrc -o rc
// tools/session/racecheck_acq_rel.cu; run: for m in 0 1 2; do ./rc $m; compute-sanitizer --tool
// racecheck ./rc $m; done (0 = barriers, expected clean; 1 = the MoE protocol; 2 = no sync, must
// be flagged). Session 19 round 72: mode 1 flagged (2 hazards, output right) with the shape of the
// MoE report, modes 0 / 2 as expected. Modes 3 / 4: the same hand-over through mbarriers (the
// finisher still chosen by an atomic counter): 3 = lane 0 arrives for its warp after __syncwarp
// (count = warps), 4 = every lane arrives and waits (count = threads).
#include <cstdio>

#include "moe/kernels/smem_acq_rel.cuh"

using b12x::moe::dev::smem_add_acq_rel;
using b12x::moe::dev::smem_ld_acquire;
using b12x::moe::dev::smem_st_release;

__device__ __forceinline__ void mbar_init(uint64_t* b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(b12x::moe::dev::smem_u32(b)),
               "r"(count)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* b) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [%0]; }" ::"r"(
                   b12x::moe::dev::smem_u32(b))
               : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* b, int parity) {
  asm volatile(
      "{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1; @!p bra W; }" ::"r"(
          b12x::moe::dev::smem_u32(b)),
      "r"(parity)
      : "memory");
}

// 0: barriers, 1: acquire / release hand-over (MoE kLast), 2: no sync at all, 3 / 4: mbarriers
template <int kMode>
__global__ void k(float* out, int tiles) {
  __shared__ float red[4 * 32];
  __shared__ int arrived, done;
  __shared__ uint64_t bar_arr, bar_done;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (threadIdx.x == 0) {
    arrived = done = 0;
    mbar_init(&bar_arr, kMode == 4 ? 128 : 4);
    mbar_init(&bar_done, kMode == 4 ? 32 : 1);
  }
  __syncthreads();
  for (int it = 0; it < tiles; ++it) {
    float acc = 0.f;
    for (int i = 0; i < 200 * (w + 1); ++i) acc += (float)((it * 7 + w * 3 + lane + i) & 15);
    if (kMode == 1) {
      if (lane == 0)
        while (smem_ld_acquire(&done) < it) {
        }
      __syncwarp();
    }
    if (kMode >= 3 && it > 0) {
      if (kMode == 4 || lane == 0) mbar_wait(&bar_done, (it - 1) & 1);
      __syncwarp();
    }
    red[w * 32 + lane] = acc;
    if (kMode >= 3) {
      if (kMode == 3) __syncwarp();
      if (kMode == 4 || lane == 0) mbar_arrive(&bar_arr);
      int old = 0;
      if (lane == 0) old = atomicAdd(&arrived, 1);
      old = __shfl_sync(0xffffffffu, old, 0);
      if (old != (it + 1) * 4 - 1) continue;
      if (kMode == 4 || lane == 0) mbar_wait(&bar_arr, it & 1);
      __syncwarp();
      float s = 0.f;
      for (int j = 0; j < 4; ++j) s += red[j * 32 + lane];
      out[(blockIdx.x * tiles + it) * 32 + lane] = s;
      if (kMode == 3) __syncwarp();
      if (kMode == 4 || lane == 0) mbar_arrive(&bar_done);
      continue;
    }
    if (kMode == 0) {
      __syncthreads();
      if (w == 0) {
        float s = 0.f;
        for (int j = 0; j < 4; ++j) s += red[j * 32 + lane];
        out[(blockIdx.x * tiles + it) * 32 + lane] = s;
      }
      __syncthreads();
      continue;
    }
    if (kMode == 1) {
      __syncwarp();
      int old = 0;
      if (lane == 0) old = smem_add_acq_rel(&arrived, 1);
      old = __shfl_sync(0xffffffffu, old, 0);
      if (old != (it + 1) * 4 - 1) continue;
      __syncwarp();
    } else if (w != 3)
      continue;
    float s = 0.f;
    for (int j = 0; j < 4; ++j) s += red[j * 32 + lane];
    out[(blockIdx.x * tiles + it) * 32 + lane] = s;
    if (kMode == 1) {
      __syncwarp();
      if (lane == 0) smem_st_release(&done, it + 1);
    }
  }
}
int main(int argc, char** argv) {
  int mode = argc > 1 ? atoi(argv[1]) : 1, tiles = 8, blocks = 4;
  float* d;
  cudaMalloc(&d, blocks * tiles * 32 * 4);
  if (mode == 0)
    k<0><<<blocks, 128>>>(d, tiles);
  else if (mode == 1)
    k<1><<<blocks, 128>>>(d, tiles);
  else if (mode == 2)
    k<2><<<blocks, 128>>>(d, tiles);
  else if (mode == 3)
    k<3><<<blocks, 128>>>(d, tiles);
  else
    k<4><<<blocks, 128>>>(d, tiles);
  float h[4 * 8 * 32];
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int b = 0; b < blocks; ++b)
    for (int it = 0; it < tiles; ++it)
      for (int lane = 0; lane < 32; ++lane) {
        float s = 0.f;
        for (int w = 0; w < 4; ++w) {
          float acc = 0.f;
          for (int i = 0; i < 200 * (w + 1); ++i) acc += (float)((it * 7 + w * 3 + lane + i) & 15);
          s += acc;
        }
        bad += h[(b * tiles + it) * 32 + lane] != s;
      }
  printf("mode %d: %s (%d wrong) err=%s\n", mode, bad ? "WRONG" : "ok", bad,
         cudaGetErrorString(cudaGetLastError()));
  return 0;
}
