// Shared-memory hand-overs between warps without a CTA or named barrier (the decode FC1's last-warp
// tile ends, moe_decode.cuh kLast): an atomic counter picks the warp that finishes a tile, and
// mbarriers carry the data: every lane arrives after its own writes and every reading lane waits
// on the phase, so compute-sanitizer racecheck sees each edge. (Session 18 ordered the same
// hand-over by lane 0's acquire / release after __syncwarp, correct under the PTX memory model
// but flagged by racecheck, which does not model it: session 19 rounds 72 / 73,
// tools/session/racecheck_acq_rel.cu; the mbarriers time the same.) No framework headers, so
// that tool runs these exact instructions.
#pragma once

#include <cstdint>

namespace b12x::moe::dev {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// The finisher's pick (acq_rel as timed in round 73; the data edges are the mbarriers').
__device__ __forceinline__ int smem_add_acq_rel(int* p, int v) {
  int old;
  asm volatile("atom.acq_rel.cta.shared.add.u32 %0, [%1], %2;"
               : "=r"(old)
               : "r"(smem_u32(p)), "r"(v)
               : "memory");
  return old;
}
__device__ __forceinline__ void mbar_init(uint64_t* b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* b) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [%0]; }" ::"r"(smem_u32(b))
               : "memory");
}
// Spins until the phase of parity `parity` has completed. try_wait (which may suspend the thread
// for a while) needs sm_90; SM89 polls with test_wait.
__device__ __forceinline__ void mbar_wait(uint64_t* b, int parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  asm volatile(
      "{ .reg .pred p; W: mbarrier.test_wait.parity.shared::cta.b64 p, [%0], %1; @!p bra W; }" ::
          "r"(smem_u32(b)),
      "r"(parity)
      : "memory");
#else
  asm volatile(
      "{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1; @!p bra W; }" ::"r"(
          smem_u32(b)),
      "r"(parity)
      : "memory");
#endif
}

}  // namespace b12x::moe::dev
