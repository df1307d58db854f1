// The BF16 / FP16 m16n8k16 mma.sync wrappers shared by the linear kernels (linear_common.cuh)
// and the MoE kernels (moe/kernels/moe_gemm.cuh): one copy of each instruction's operand binding.
// m16n8k16 runs on SM89, SM90 and SM120 alike (the portable path).
#pragma once

#include <cstdint>

namespace b12x::gemm::lin {

// Operand type tags of the packed-half helpers (BF16 or FP16 MMA operands).
struct Bf16Tag {
  static constexpr bool kFp16 = false;
};
struct Fp16Tag {
  static constexpr bool kFp16 = true;
};

/// BF16/FP16 m16n8k16 with a zero accumulator input (a fresh partial needs no zeroing
/// instructions).
template <class T>
__device__ __forceinline__ void mma16816_zero(float d[4], const uint32_t a[4], uint32_t b0,
                                              uint32_t b1) {
  if constexpr (T::kFp16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%10,%10,%10,%10};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.f));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%10,%10,%10,%10};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.f));
  }
}

template <class T>
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0,
                                         uint32_t b1) {
  if constexpr (T::kFp16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

}  // namespace b12x::gemm::lin
