// Device building blocks of the linear GEMMs: mma.sync wrappers, exact fragment decoders of every
// packed weight format (gemm/linear_layout.h), and the kernel parameter block.
//
// Exactness: FP4 and FP8 values are decoded to v * 2^-7 (times the UE4M3 block scale for NVFP4),
// which BF16 and FP16 hold exactly; Q8_0 and IQ2 decode to the integers q / +-grid. The remaining
// scales are applied in fp32 (per group) or in the epilogue (2^7, alpha, global scale).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "formats/ggml_tables.h"
#include "gemm/linear_layout.h"
#include "gemm/linear_params.h"

namespace b12x::gemm::lin {

// GGML IQ2 grids (ggml-common.h), copied to shared memory by the kernels that decode IQ2.
static __constant__ uint64_t c_iq2xxs_grid[256] = B12X_GGML_IQ2XXS_GRID_INIT;
static __constant__ uint64_t c_iq2xs_grid[512] = B12X_GGML_IQ2XS_GRID_INIT;

// ---------------------------------------------------------------- packed-half helpers -------
struct Bf16Tag {
  static constexpr bool kFp16 = false;
};
struct Fp16Tag {
  static constexpr bool kFp16 = true;
};

template <class T>
__device__ __forceinline__ uint32_t fma2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  if constexpr (T::kFp16) {
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  } else {
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  }
  return d;
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

/// e4m3 x e4m3 -> f32, m16n8k32 (sm_89+; the FP8 weight formats).
__device__ __forceinline__ void mma16832_e4m3(float c[4], const uint32_t a[4], uint32_t b0,
                                              uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x2(uint32_t r[2], const void* smem) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(a));
}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void* smem) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void* smem) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

/// Streaming 16-byte load that bypasses L1 allocation (weights are read once).
__device__ __forceinline__ uint4 ldg_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// ---------------------------------------------------------------- constants ----------------
// Splat (both halves) constants.
template <class T>
__device__ __forceinline__ constexpr uint32_t kNegZero2() {
  return 0x80008000u;
}
/// FP4 magnitude bits placed in the low exponent bits decode to v * 2^-126 (bf16) / v * 2^-14
/// (fp16); this factor brings them to v * 2^-7.
template <class T>
__device__ __forceinline__ constexpr uint32_t kFp4Unit2() {
  return T::kFp16 ? 0x58005800u /* 2^7 */ : 0x7B007B00u /* 2^119 */;
}

/// One FP4 pair (nibbles at bits 0-3 and 16-19 of w) -> bits of v * 2^-126 (bf16) or
/// v * 2^-14 (fp16), exact (subnormal for v = 0.5).
template <class T>
__device__ __forceinline__ uint32_t fp4_pair_bits(uint32_t w) {
  constexpr int kMagShift = T::kFp16 ? 9 : 6;
  return ((w << kMagShift) & (0x00070007u << kMagShift)) | ((w << 12) & 0x80008000u);
}

/// The UE4M3 block scale as a splat of scale * 2^119 (bf16) or scale * 2^7 (fp16), so that
/// fma2(fp4_pair_bits, it, -0) = v * scale * 2^-7 exactly.
template <class T>
__device__ __forceinline__ uint32_t nvfp4_scale_splat(uint8_t code) {
  const float s = fmt::ue4m3_to_float(code) * (T::kFp16 ? 128.f : 6.646139978924579e35f /*2^119*/);
  uint16_t h;
  if constexpr (T::kFp16) {
    h = __half_as_ushort(__float2half_rn(s));
  } else {
    h = __bfloat16_as_ushort(__float2bfloat16_rn(s));
  }
  return static_cast<uint32_t>(h) * 0x10001u;
}

/// Decode one FP4 atom (words w[0], w[1] for steps 0,1) with per-(row, step) scale splats
/// sc[s][0] (row g) and sc[s][1] (row g+8).
template <class T>
__device__ __forceinline__ void decode_fp4_atom(const uint32_t w[2], const uint32_t sc[2][2],
                                                uint32_t a[2][4]) {
#pragma unroll
  for (int s = 0; s < 2; ++s) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t bits = fp4_pair_bits<T>(w[s] >> (4 * j));
      a[s][j] = fma2<T>(bits, sc[s][j & 1], kNegZero2<T>());
    }
  }
}

/// One FP8 pair (bytes spread to the two 16-bit halves) -> bits of v * 2^-7 in bf16.
__device__ __forceinline__ uint32_t fp8_pair_bf16(uint32_t spread) {
  const uint32_t bits = ((spread << 4) & 0x07F007F0u) | ((spread << 8) & 0x80008000u);
  return fma2<Bf16Tag>(bits, 0x78007800u /* 2^113 */, 0x80008000u);
}

/// Q8_0 int8 pair (spread) -> exact integers.
template <class T>
__device__ __forceinline__ uint32_t q8_pair(uint32_t spread) {
  if constexpr (T::kFp16) {
    // 1024 + (q + 128) - 1152
    const uint32_t h = (spread ^ 0x00800080u) | 0x64006400u;
    return fma2<T>(h, 0x3C003C00u, 0xE480E480u);
  } else {
    // (128 + low7) - (128 or 256)
    const uint32_t a = (spread & 0x007F007Fu) | 0x43004300u;
    const uint32_t b = (spread & 0x00800080u) | 0x43004300u;
    return fma2<T>(b, 0xBF80BF80u, a);
  }
}

/// Decode an 8-bit atom (FP8 e4m3 or Q8_0 int8) from its 16 lane bytes.
template <class T, bool kQ8>
__device__ __forceinline__ void decode_byte_atom(const uint4& v, uint32_t a[2][4]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int s = 0; s < 2; ++s) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t word = w[2 * s + h];
      const uint32_t lo = prmt(word, 0, 0x4140u);  // row g
      const uint32_t hi = prmt(word, 0, 0x4342u);  // row g+8
      if constexpr (kQ8) {
        a[s][2 * h] = q8_pair<T>(lo);
        a[s][2 * h + 1] = q8_pair<T>(hi);
      } else {
        a[s][2 * h] = fp8_pair_bf16(lo);
        a[s][2 * h + 1] = fp8_pair_bf16(hi);
      }
    }
  }
}

/// IQ2 atom: entries (u16) e[half][q]; grid16 = shared table, grid16[idx * 4 + t] = grid bytes
/// 2t, 2t+1 of entry idx.
template <class T>
__device__ __forceinline__ void decode_iq2_atom(const uint4& v, const uint16_t* grid16, int t,
                                                uint32_t a[2][4]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int s = 0; s < 2; ++s) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int half = j & 1;       // row g / g+8
      const int q = 2 * s + (j >> 1);  // 8-value group in the atom
      const uint32_t word = w[half * 2 + (q >> 1)];
      const uint32_t e = (q & 1) ? (word >> 16) : (word & 0xFFFFu);
      const uint32_t idx = e & 0x1FFu;
      const uint32_t s7 = e >> 9;
      const uint32_t s8 = s7 | ((__popc(s7) & 1u) << 7);
      const uint32_t y = (s8 >> (2 * t)) & 3u;
      const uint32_t sbits = (y * 0x40008000u) & 0x80008000u;
      const uint32_t g2 = grid16[idx * 4 + t];
      const uint32_t spread = prmt(g2, 0, 0x4140u);
      uint32_t r;
      if constexpr (T::kFp16) {
        r = fma2<T>(spread | 0x64006400u, 0x3C003C00u, 0xE400E400u);  // 1024 + g - 1024
      } else {
        r = fma2<T>(spread | 0x43004300u, 0x3F803F80u, 0xC300C300u);  // 128 + g - 128
      }
      a[s][j] = r ^ sbits;
    }
  }
}

/// E8M0 -> fp32 2^(e-127) (0 -> 2^-127, 255 -> NaN).
__device__ __forceinline__ float e8m0_f32(uint32_t e) {
  return e == 0 ? __uint_as_float(0x00400000u) : (e == 255 ? __uint_as_float(0x7FC00000u)
                                                            : __uint_as_float(e << 23));
}

__device__ __forceinline__ float half_bits_f32(uint32_t h) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
}

template <bool kFp16>
__device__ __forceinline__ void store_out(void* out, int64_t idx, float v) {
  if constexpr (kFp16) {
    static_cast<__half*>(out)[idx] = __float2half_rn(v);
  } else {
    static_cast<__nv_bfloat16*>(out)[idx] = __float2bfloat16_rn(v);
  }
}
__device__ __forceinline__ float load_out_type(const void* p, int64_t idx, int fp16) {
  return fp16 ? __half2float(static_cast<const __half*>(p)[idx])
              : __bfloat162float(static_cast<const __nv_bfloat16*>(p)[idx]);
}

}  // namespace b12x::gemm::lin
