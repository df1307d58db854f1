// What compute-sanitizer racecheck makes of the MoE last-warp hand-over (moe_decode.cuh kLast) on
// its own. Build from the repo root: nvcc -O3 -arch=sm_90a -Isrc -o rc
// tools/session/racecheck_acq_rel.cu; run: for m in 0 1 2 3 4; do ./rc $m; compute-sanitizer
// --tool racecheck ./rc $m; done. Modes: 0 = barriers; 1 = session 18's hand-over, lane 0's
// acquire / release after __syncwarp; 2 = no sync; 3 / 4 = through mbarriers (the finisher still
// picked by an atomic counter), lane 0 arriving for its warp after __syncwarp (3) or every lane
// arriving and waiting (4, the kernel's since session 19, src/moe/kernels/smem_handover.cuh).
// H200 rounds 72 / 73: 0 clean; 1 flagged (2 hazards) though its output is right, the shape of
// the MoE report of session 18; 2 flagged and wrong; 3 flagged (1 hazard); 4 clean.
#include <cstdio>

#include "moe/kernels/smem_handover.cuh"

using b12x::moe::dev::mbar_arrive;
using b12x::moe::dev::mbar_init;
using b12x::moe::dev::mbar_wait;
using b12x::moe::dev::smem_add_acq_rel;
using b12x::moe::dev::smem_u32;

// Mode 1's acquire / release (session 18's kernel had these in the MoE header).
__device__ __forceinline__ int smem_ld_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.cta.shared.u32 %0, [%1];" : "=r"(v) : "r"(smem_u32(p)) : "memory");
  return v;
}
__device__ __forceinline__ void smem_st_release(int* p, int v) {
  asm volatile("st.release.cta.shared.u32 [%0], %1;" ::"r"(smem_u32(p)), "r"(v) : "memory");
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
