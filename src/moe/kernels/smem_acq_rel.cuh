// CTA-scope acquire / release on shared-memory counters, for hand-overs between warps without a
// CTA or named barrier (the decode FC1's last-warp tile ends, moe_decode.cuh kLast). A warp's
// lanes write, __syncwarp orders them before lane 0, and lane 0's release (the acq_rel add or
// st.release) publishes them; the reader's lane 0 acquires, then __syncwarp before its lanes read.
// No framework headers, so tools/session/racecheck_acq_rel.cu runs these exact instructions.
#pragma once

#include <cstdint>

namespace b12x::moe::dev {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ int smem_add_acq_rel(int* p, int v) {
  int old;
  asm volatile("atom.acq_rel.cta.shared.add.u32 %0, [%1], %2;"
               : "=r"(old)
               : "r"(smem_u32(p)), "r"(v)
               : "memory");
  return old;
}
__device__ __forceinline__ int smem_ld_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.cta.shared.u32 %0, [%1];" : "=r"(v) : "r"(smem_u32(p)) : "memory");
  return v;
}
__device__ __forceinline__ void smem_st_release(int* p, int v) {
  asm volatile("st.release.cta.shared.u32 [%0], %1;" ::"r"(smem_u32(p)), "r"(v) : "memory");
}

// The same hand-over through mbarriers (DecodeArgs::fc1_mbar, probe of session 19):
// compute-sanitizer racecheck flags the acquire / release above although it is correct (round 72,
// tools/session/racecheck_acq_rel.cu mode 1); an mbarrier edge is one it may model.
__device__ __forceinline__ void mbar_init(uint64_t* b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* b) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [%0]; }" ::"r"(smem_u32(b))
               : "memory");
}
// Spins until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* b, int parity) {
  asm volatile(
      "{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1; @!p bra W; }" ::"r"(
          smem_u32(b)),
      "r"(parity)
      : "memory");
}

}  // namespace b12x::moe::dev
