// Minimal copy of the MoE last-warp hand-over protocol (moe_decode.cuh kLast), to see what
// compute-sanitizer racecheck says about shared-memory acquire / release hand-overs. Session 18
// left it unrun (no device time after the final). Build: nvcc -O3 -arch=sm_90a -o rc
// racecheck_acq_rel.cu; run: for m in 0 1 2; do ./rc $m; compute-sanitizer --tool racecheck
// ./rc $m; done (0 = barriers, expected clean; 1 = the MoE protocol; 2 = no sync, must be flagged).
#include <cstdio>
__device__ __forceinline__ unsigned sa(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ int add_acq_rel(int* p, int v) {
  int old;
  asm volatile("atom.acq_rel.cta.shared.add.u32 %0, [%1], %2;"
               : "=r"(old)
               : "r"(sa(p)), "r"(v)
               : "memory");
  return old;
}
__device__ __forceinline__ int ld_acq(const int* p) {
  int v;
  asm volatile("ld.acquire.cta.shared.u32 %0, [%1];" : "=r"(v) : "r"(sa(p)) : "memory");
  return v;
}
__device__ __forceinline__ void st_rel(int* p, int v) {
  asm volatile("st.release.cta.shared.u32 [%0], %1;" ::"r"(sa(p)), "r"(v) : "memory");
}
template <int kMode>  // 0: barriers, 1: acquire / release hand-over (MoE kLast), 2: no sync at all
__global__ void k(float* out, int tiles) {
  __shared__ float red[4 * 32];
  __shared__ int arrived, done;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (threadIdx.x == 0) arrived = done = 0;
  __syncthreads();
  for (int it = 0; it < tiles; ++it) {
    float acc = 0.f;
    for (int i = 0; i < 200 * (w + 1); ++i) acc += (float)((it * 7 + w * 3 + lane + i) & 15);
    if (kMode == 1) {
      if (lane == 0)
        while (ld_acq(&done) < it) {
        }
      __syncwarp();
    }
    red[w * 32 + lane] = acc;
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
      if (lane == 0) old = add_acq_rel(&arrived, 1);
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
      if (lane == 0) st_rel(&done, it + 1);
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
  else
    k<2><<<blocks, 128>>>(d, tiles);
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
