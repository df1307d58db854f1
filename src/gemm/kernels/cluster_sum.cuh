// A K split summed inside a thread-block cluster through distributed shared memory (session 23;
// SM90 / SM12x, compute capability >= 9.0). The S CTAs of a cluster each computed an fp32 partial
// of the same output tile over their own K range and left it in shared memory, at the same offset
// in every CTA; rank r then adds its 1/S share of the tile's entries over all S partials, in rank
// order (the order linear_reduce_kernel adds its slots: the sums are the reduce path's, bit for
// bit), and stores them. No partials in global memory, no counters (nothing read before it is
// written: the scratch's bytes do not matter), no reduce launch. Shared by the FP4 / FP8 linear
// block kernels and MoE's split FC2 (the M = 1 stream kernel's cluster probes lost and went).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace b12x::gemm::lin {

/// This CTA's rank in its cluster and the cluster's CTA count.
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
#endif
  return r;
}
__device__ __forceinline__ unsigned cluster_size() {
  unsigned n = 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
#endif
  return n;
}

/// Every thread of every CTA of the cluster arrives (release: its shared-memory stores before it
/// are visible to the cluster) and waits for all (acquire). Also a CTA-wide barrier.
__device__ __forceinline__ void cluster_barrier() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
#else
  __trap();  // no clusters below SM90: the plans never launch a cluster there
#endif
}

/// The 16 bytes at this CTA's shared-memory address `local` in the shared memory of rank `rank`.
__device__ __forceinline__ float4 ld_dsmem_f4(const void* local, unsigned rank) {
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(local));
  uint32_t ra;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(ra)
               : "memory");
#endif
  return v;
}

/// The cluster's sum of n float4 entries: entry e of every rank's partial sits at part +
/// off(e) (float4 units, this CTA's shared memory; the same offsets in every rank). After a cluster
/// barrier (the partials written before it by every thread of every rank), rank r adds entries
/// [r ceil(n / S), (r + 1) ceil(n / S)), each over ranks 0..S-1 in order starting from zero, and
/// hands each sum to out(e, float4); a second barrier keeps every CTA (and its shared memory)
/// alive until its peers have read it. The S loads of an entry are issued in batches of 4 before
/// their adds (one DSMEM round trip per batch, not per rank). Called by every thread of the CTA.
template <class Off, class Out>
__device__ __forceinline__ void cluster_sum_f4(const float4* part, int n, Off off, Out out) {
  cluster_barrier();
  const unsigned S = cluster_size(), r = cluster_rank();
  const int per = static_cast<int>((static_cast<unsigned>(n) + S - 1) / S);
  const int lo = static_cast<int>(r) * per;
  const int hi = min(n, lo + per);
  for (int e = lo + static_cast<int>(threadIdx.x); e < hi; e += static_cast<int>(blockDim.x)) {
    const float4* const src = part + off(e);
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
    for (unsigned q0 = 0; q0 < S; q0 += 4) {
      float4 v[4];
#pragma unroll
      for (unsigned i = 0; i < 4; ++i)
        if (q0 + i < S) v[i] = ld_dsmem_f4(src, q0 + i);
#pragma unroll
      for (unsigned i = 0; i < 4; ++i)
        if (q0 + i < S) {
          s.x += v[i].x;
          s.y += v[i].y;
          s.z += v[i].z;
          s.w += v[i].w;
        }
    }
    out(e, s);
  }
  cluster_barrier();
}

}  // namespace b12x::gemm::lin
