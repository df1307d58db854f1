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
#include "formats/scalar.h"
#include "gemm/kernels/mma_sync.cuh"
#include "gemm/linear_layout.h"
#include "gemm/linear_params.h"

namespace b12x::gemm::lin {

// GGML IQ2 decode tables, built at compile time from the grids of ggml-common.h and copied into
// shared memory by the kernels that decode IQ2:
//  - grid pairs: entry idx*4 + t = the grid bytes 2t, 2t+1 of grid[idx] as a bf16x2 / f16x2
//    (the two values lane t of a quad needs from one 8-value group);
//  - sign pairs: entry s7*4 + t = the sign bits of elements 2t, 2t+1 (ksigns: 7 stored bits plus
//    even parity) placed at bits 15 and 31, XORed onto the grid pair.
namespace iq2tab {
/// The magnitude code (0, 1, 2) of an IQ2 grid byte (8, 25, 43).
constexpr uint32_t code_of(uint32_t v) {
  return v == 0x08u ? 0u : v == 0x19u ? 1u : 2u;
}
/// The 8 sign bits of an entry's 7 stored ones (ksigns: bit 7 = their parity).
constexpr uint32_t sign8(uint32_t s7) {
  uint32_t par = s7 ^ (s7 >> 4);
  par ^= par >> 2;
  par ^= par >> 1;
  return s7 | ((par & 1u) << 7);
}
constexpr uint32_t small_int_bits(uint32_t v, bool fp16) {
  if (v == 0) return 0;
  int e = 0;
  while ((v >> (e + 1)) != 0) ++e;  // floor(log2 v)
  if (fp16) return ((static_cast<uint32_t>(e) + 15u) << 10) | ((v << (10 - e)) & 0x3FFu);
  return ((static_cast<uint32_t>(e) + 127u) << 7) | ((v << (7 - e)) & 0x7Fu);
}
template <int kEntries>
struct GridPairs {
  uint32_t v[kEntries * 4];
};
template <int kEntries>
constexpr GridPairs<kEntries> make_grid_pairs(const uint64_t* grid, bool fp16) {
  GridPairs<kEntries> t{};
  for (int i = 0; i < kEntries; ++i)
    for (int q = 0; q < 4; ++q) {
      const uint32_t lo = static_cast<uint32_t>((grid[i] >> (16 * q)) & 0xFFu);
      const uint32_t hi = static_cast<uint32_t>((grid[i] >> (16 * q + 8)) & 0xFFu);
      t.v[i * 4 + q] = small_int_bits(lo, fp16) | (small_int_bits(hi, fp16) << 16);
    }
  return t;
}
struct SignPairs {
  uint32_t v[128 * 4];
};
constexpr SignPairs make_sign_pairs() {
  SignPairs t{};
  for (uint32_t s7 = 0; s7 < 128; ++s7) {
    const uint32_t s8 = sign8(s7);
    for (uint32_t q = 0; q < 4; ++q)
      t.v[s7 * 4 + q] = (((s8 >> (2 * q)) & 1u) << 15) | (((s8 >> (2 * q + 1)) & 1u) << 31);
  }
  return t;
}
}  // namespace iq2tab

static __device__ const iq2tab::GridPairs<256> g_iq2xxs_pairs_bf16 =
    iq2tab::make_grid_pairs<256>(fmt::ggml::kIq2xxsGrid, false);
static __device__ const iq2tab::GridPairs<256> g_iq2xxs_pairs_fp16 =
    iq2tab::make_grid_pairs<256>(fmt::ggml::kIq2xxsGrid, true);
static __device__ const iq2tab::GridPairs<512> g_iq2xs_pairs_bf16 =
    iq2tab::make_grid_pairs<512>(fmt::ggml::kIq2xsGrid, false);
static __device__ const iq2tab::GridPairs<512> g_iq2xs_pairs_fp16 =
    iq2tab::make_grid_pairs<512>(fmt::ggml::kIq2xsGrid, true);
static __device__ const iq2tab::SignPairs g_iq2_sign_pairs = iq2tab::make_sign_pairs();

/// Copy the IQ2 tables of a format/dtype into shared memory (gtab: entries*4, stab: 512 words).
template <bool kXs, class T>
__device__ __forceinline__ void load_iq2_tables(uint32_t* gtab, uint32_t* stab, int tid,
                                                int nthreads) {
  const uint32_t* g;
  if constexpr (kXs) {
    g = T::kFp16 ? g_iq2xs_pairs_fp16.v : g_iq2xs_pairs_bf16.v;
  } else {
    g = T::kFp16 ? g_iq2xxs_pairs_fp16.v : g_iq2xxs_pairs_bf16.v;
  }
  constexpr int kWords = (kXs ? 512 : 256) * 4;
  for (int i = tid; i < kWords / 4; i += nthreads)
    reinterpret_cast<uint4*>(gtab)[i] = reinterpret_cast<const uint4*>(g)[i];
  for (int i = tid; i < 512 / 4; i += nthreads)
    reinterpret_cast<uint4*>(stab)[i] = reinterpret_cast<const uint4*>(g_iq2_sign_pairs.v)[i];
}

// ---------------------------------------------------------------- packed-half helpers -------
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

/// e4m3 m16n8k32 with a zero accumulator input (ptxas feeds RZ), so a fresh FP8 partial needs no
/// zeroing instructions.
__device__ __forceinline__ void mma16832_e4m3_zero(float d[4], const uint32_t a[4], uint32_t b0,
                                                   uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%10,%10,%10};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.f));
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

/// Two e4m3 pairs (bytes 0-1, 2-3 of x) as two f16x2 (exact: every e4m3 value is an f16).
__device__ __forceinline__ void e4m3x2x2_to_f16x2(uint32_t x, uint32_t& lo, uint32_t& hi) {
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\n"
      "cvt.rn.f16x2.e4m3x2 %1, h;\n}"
      : "=r"(lo), "=r"(hi)
      : "r"(x));
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

/// Programmatic dependent launch (SM90+): wait until the preceding kernel of the stream has
/// completed and flushed (a no-op wait when it was not launched as a PDL primary), and let the
/// next kernel start its prologue. Weights do not depend on earlier kernels, so the GEMMs issue
/// their first weight loads before waiting.
__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Streaming 16-byte load that bypasses L1 allocation (weights are read once).
/// A 16-byte weight vector read once, not allocated in L1 (non-volatile: the compiler may move it).
__device__ __forceinline__ uint4 ldg_na128(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

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

/// Register J's FP4 pair of a packed weight word (the linear placement, lin::fp4_place) -> bits
/// of v * 2^-126 (bf16) or v * 2^-14 (fp16) in both halves, exact (v = 0.5 lands on a subnormal).
template <class T, int J>
__device__ __forceinline__ uint32_t fp4_pair_bits(uint32_t w) {
  static_assert(kFp4Placement == fmt::kFp4PlacementLinear, "linear FP4 placement");
  return fmt::fp4_lin_bits<T::kFp16, J>(w);
}

/// The four pairs (MMA registers 0..3) of a packed FP4 weight word.
template <class T>
__device__ __forceinline__ void fp4_word_pairs(uint32_t w, uint32_t bits[4]) {
  bits[0] = fp4_pair_bits<T, 0>(w);
  bits[1] = fp4_pair_bits<T, 1>(w);
  bits[2] = fp4_pair_bits<T, 2>(w);
  bits[3] = fp4_pair_bits<T, 3>(w);
}

/// BF16 splat of the E8M0 scale 2^(e-127) (e = 0: the subnormal 2^-127; 255: NaN), multiplied
/// onto FP4 values already decoded to v * 2^-7: exact whenever the product is a BF16 number.
__device__ __forceinline__ uint32_t e8m0_bf16_splat(uint32_t e) {
  const uint32_t h = e == 0 ? 0x0040u : (e == 255 ? 0x7FC0u : (e << 7));
  return h * 0x10001u;
}

/// The fold-free MXFP4 splat (session 15): 2^(e-127) * 2^119 = 2^(e-8) in both halves, multiplied
/// straight onto the decoded FP4 bits (v * 2^-126): one exact HMUL2 instead of the 2^119 fold and
/// the 2^(e-127) splat, and the same single rounding of v * 2^(e-134). BF16 holds 2^(e-8) for
/// e <= 135 only (scales up to 2^8); the prepared weight says whether every code of it is
/// (PackedWeight::Impl::mx_fold_free), 255 stays NaN.
__device__ __forceinline__ uint32_t e8m0_bf16_splat_free(uint32_t e) {
  const uint32_t h = e == 255 ? 0x7FC0u : ((e + 119u) << 7);
  return h * 0x10001u;
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
    uint32_t bits[4];
    fp4_word_pairs<T>(w[s], bits);
#pragma unroll
    for (int j = 0; j < 4; ++j) a[s][j] = fma2<T>(bits[j], sc[s][j & 1], kNegZero2<T>());
  }
}

/// One FP8 pair (bytes spread to the two 16-bit halves) -> bits of v * 2^-7 in bf16.
__device__ __forceinline__ uint32_t fp8_pair_bf16(uint32_t spread) {
  const uint32_t bits = ((spread << 4) & 0x07F007F0u) | ((spread << 8) & 0x80008000u);
  return fma2<Bf16Tag>(bits, 0x78007800u /* 2^113 */, 0x80008000u);
}

/// One LOP3 with lookup table kLut over (a, b, c). Written as PTX so that two constant operands
/// stay one instruction (ptxas keeps one of them in a register); C++ `(x & m) | c` becomes two
/// LOP3s with an immediate each.
template <uint32_t kLut>
__device__ __forceinline__ uint32_t lop3(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, %4;" : "=r"(d) : "r"(a), "r"(b), "r"(c), "n"(kLut));
  return d;
}
inline constexpr uint32_t kLutAndOr = (0xF0 & 0xCC) | 0xAA;   ///< (a & b) | c
inline constexpr uint32_t kLutXorOr = (0xF0 ^ 0xCC) | 0xAA;   ///< (a ^ b) | c
inline constexpr uint32_t kLutAndXor = (0xF0 & 0xCC) ^ 0xAA;  ///< (a & b) ^ c

/// Q8_0 int8 pair (spread) -> exact integers.
template <class T>
__device__ __forceinline__ uint32_t q8_pair(uint32_t spread) {
  if constexpr (T::kFp16) {
    // 1024 + (q + 128) - 1152
    const uint32_t h = lop3<kLutXorOr>(spread, 0x00800080u, 0x64006400u);
    return fma2<T>(h, 0x3C003C00u, 0xE480E480u);
  } else {
    // (128 + low7) - (128 or 256)
    const uint32_t a = lop3<kLutAndOr>(spread, 0x007F007Fu, 0x43004300u);
    const uint32_t b = lop3<kLutAndOr>(spread, 0x00800080u, 0x43004300u);
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

/// IQ2 atom: entries (u16) e[half][q] (grid index | sign7 << 9); gtab / stab are the shared
/// copies of the grid-pair and sign-pair tables (load_iq2_tables). The values are the exact
/// integers +-grid; d*(2s+1)/8 is applied in fp32 per group. kAluSign (the SM90 group wgmma
/// kernel's variants 4, 17, 23; stab unused): the sign mask computed from the entry, its 7 sign
/// bits plus their parity (GGML's ksigns), lane t taking bits 2t, 2t + 1 into the sign bits 15 and
/// 31 — the four lanes of a row group share an entry, so each table load serves 8 entries whose
/// bank sets collide when equal mod 8; this halves the table loads per register. The mask in few
/// instructions (session 16; round 59, M = 2048: the group kernel's IQ2_XXS 17 and IQ2_XS 23 +10-14
/// %): s8 = s7 + 128 popc(s7) carries the parity in bit 7 (bits 8-9 hold popc / 2, below 2^10);
/// with the entry's s7 at bits 25..31 of `hi` (the word, or its low entry moved up) and its popc
/// above, one funnel shift gives x = s8 >> 2t, lane t's two sign bits at 0 and 1; x * (2^15 + 2^30)
/// puts bit 0 at 15 and bit 1 at 31 (x << 15 spans bits 15..24, x << 30 bits 30..31: no carry
/// between them), so one IMAD and one LOP3 (& 0x80008000, ^ grid pair) apply it. The grid pair's
/// byte offset (16 per entry, 4 per lane) is built in the index register (LDS [R + UR]).
template <class T, bool kAluSign = false>
__device__ __forceinline__ void decode_iq2_atom(const uint4& v, const uint32_t* gtab,
                                                const uint32_t* stab, int t, uint32_t a[2][4]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int s = 0; s < 2; ++s) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int half = j & 1;          // row g / g+8
      const int q = 2 * s + (j >> 1);  // 8-value group in the atom
      const uint32_t word = w[half * 2 + (q >> 1)];
      if constexpr (kAluSign) {
        const uint32_t hi = (q & 1) ? word : word << 16;
        const uint32_t pc = static_cast<uint32_t>(__popc(hi & 0xFE000000u));
        const uint32_t x = __funnelshift_r(hi, pc, 25 + 2 * t);
        const uint32_t off = ((q & 1) ? (word >> 12) & 0x1FF0u : (word << 4) & 0x1FF0u) | (4 * t);
        const uint32_t gp =
            *reinterpret_cast<const uint32_t*>(reinterpret_cast<const uint8_t*>(gtab) + off);
        a[s][j] = lop3<kLutAndXor>(x * 0x40008000u, 0x80008000u, gp);
      } else {
        const uint32_t e = (q & 1) ? (word >> 16) : (word & 0xFFFFu);
        a[s][j] = gtab[(e & 0x1FFu) * 4 + t] ^ stab[(e >> 9) * 4 + t];
      }
    }
  }
}

/// E2M1 nibble -> fp32 by bit arithmetic (fmt::e2m1_to_float indexes a local table, which the
/// device compiler places in local memory): magnitudes 2..7 are (1 + m/2) * 2^(e-1) with e, m the
/// nibble's exponent/mantissa bits, 1 is 0.5, 0 is 0.
__device__ __forceinline__ float e2m1_f32_fast(uint32_t nib) {
  const uint32_t mag = nib & 7u;
  const uint32_t bits =
      mag >= 2u ? (((mag >> 1) + 126u) << 23) | ((mag & 1u) << 22) : (mag == 1u ? 0x3F000000u : 0u);
  return __uint_as_float(bits | ((nib & 8u) << 28));
}

/// 8 NVFP4 activations (4 packed bytes, element 2e in the low nibble of byte e) times their UE4M3
/// block scale as 4 BF16 pairs (elements 2e, 2e + 1), exact: e2m1 x UE4M3 fits BF16.
__device__ __forceinline__ uint4 nvfp4x8_bf16(uint32_t w, float sc) {
  uint32_t o[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float lo = e2m1_f32_fast((w >> (8 * e)) & 0xFu) * sc;
    const float hi = e2m1_f32_fast((w >> (8 * e + 4)) & 0xFu) * sc;
    o[e] = static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
           (static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16);
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

/// Elements 2e / 2e + 1 of 8 packed E2M1 codes (element 2i in the low nibble of byte i; w4 = w >>
/// 4) as the BF16 bits of value * 2^-126 in halves 0 / 1 (fp4_lin_bits' form): one PRMT brings the
/// two nibbles to bits 0..3 and 16..19, two shifts and masks place magnitude (bits 8..6) and sign.
__device__ __forceinline__ uint32_t nvfp4_nibble_pair_bits(uint32_t w, uint32_t w4, int e) {
  const uint32_t y = prmt(w, w4, e | (e << 4) | ((4 + e) << 8) | ((4 + e) << 12));
  return ((y << 6) & 0x01C001C0u) | ((y << 12) & 0x80008000u);
}

/// nvfp4x8_bf16's values times 2^-7 by BF16 pair arithmetic (session 20, the M = 1 stream kernel's
/// kQf): per pair nvfp4_nibble_pair_bits and one HMUL2 by the splat scale * 2^119 (the weights'
/// UE4M3 splat) gives v * scale * 2^-7, exact (e2m1 x UE4M3 fits BF16; the caller multiplies its
/// output by 2^7). ~30 instructions instead of ~90 (scalar e2m1 decode, FMULs, conversions). Code
/// 0x7F (NaN) gives a finite splat.
__device__ __forceinline__ uint4 nvfp4x8_bf16_e7(uint32_t w, uint32_t code) {
  const uint32_t sb = ((code * 0x10001u) << 4) & 0x07F007F0u;  // scale * 2^-120 in both halves
  const uint32_t sc = fma2<Bf16Tag>(fma2<Bf16Tag>(sb, 0x7B807B80u /* 2^120 */, 0x80008000u),
                                    0x7B007B00u /* 2^119 */, 0x80008000u);
  const uint32_t w4 = w >> 4;
  uint32_t o[4];
#pragma unroll
  for (int e = 0; e < 4; ++e)
    o[e] = fma2<Bf16Tag>(nvfp4_nibble_pair_bits(w, w4, e), sc, 0x80008000u);
  return make_uint4(o[0], o[1], o[2], o[3]);
}

/// 8 MXFP4 activations times 2^(e-127) (E8M0 code e) as 4 BF16 pairs, the pre-pass's values
/// (act_dequant_kernel: the fp32 product rounded to BF16) by two HMUL2 per pair: the decoded bits
/// times 2^126 are the E2M1 values, times the splat 2^(e-127) one rounding (e = 0: the subnormal
/// 2^-127, 255: NaN).
__device__ __forceinline__ uint4 mxfp4x8_bf16(uint32_t w, uint32_t e) {
  const uint32_t sc = e8m0_bf16_splat(e);
  const uint32_t w4 = w >> 4;
  uint32_t o[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t r = nvfp4_nibble_pair_bits(w, w4, i);
    o[i] = fma2<Bf16Tag>(fma2<Bf16Tag>(r, 0x7E807E80u /* 2^126 */, 0x80008000u), sc, 0x80008000u);
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

/// The sum of v over the 4 lanes of a quad (the lanes t of an MMA fragment's row), the same
/// on every lane and in a fixed order.
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xFFFFFFFFu, v, 1);
  return v + __shfl_xor_sync(0xFFFFFFFFu, v, 2);
}

/// E8M0 -> fp32 2^(e-127) (0 -> 2^-127, 255 -> NaN).
__device__ __forceinline__ float e8m0_f32(uint32_t e) {
  return e == 0 ? __uint_as_float(0x00400000u)
                : (e == 255 ? __uint_as_float(0x7FC00000u) : __uint_as_float(e << 23));
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

/// The output epilogue of one accumulator element (token `tok`, output row `row` < N): times
/// `mult` (the 2^7 / global-scale multiplier, with alpha folded in by the caller), plus the bias
/// in the output dtype, rounded once to BF16 / FP16. Shared by the decode kernel and the GGML
/// GEMV, whose fragments store one element at a time (rows of a fragment are 8 apart).
__device__ __forceinline__ void store_out_elem(const LinearParams& p, int64_t tok, int64_t row,
                                               float acc, float mult) {
  float v = acc * mult;
  if (p.bias != nullptr) v += load_out_type(p.bias, row, p.out_fp16);
  if (p.out_fp16)
    store_out<true>(p.out, tok * p.ldo + row, v);
  else
    store_out<false>(p.out, tok * p.ldo + row, v);
}

/// Session 28 (LinearParams::reduce_trig bit 2; linear.cc's kS16WarmRule, B12X_GEMM_S16_WARM):
/// one thread per CTA reads the parameters the staging, the epilogue and the reduce read after
/// griddep_wait, so that their constant-bank lines are fetched while the CTA waits. The sum's store
/// into a shared word no one reads keeps the loads alive. Round 106: the FP4 block kernel's runs
/// through partials + reduce 0.02-0.24 us faster (the block kernel's own phases, stamped, did not
/// move: the gain is the reduce's, whose CTAs read these lines first after their wait).
__device__ __forceinline__ void warm_param_lines(const LinearParams& p) {
  __shared__ volatile uint64_t warm_sink;
  const uint64_t h = reinterpret_cast<uint64_t>(p.x) ^ reinterpret_cast<uint64_t>(p.partial) ^
                     reinterpret_cast<uint64_t>(p.out) ^ reinterpret_cast<uint64_t>(p.bias) ^
                     reinterpret_cast<uint64_t>(p.alpha) ^ static_cast<uint64_t>(p.ldx) ^
                     static_cast<uint64_t>(p.NP) ^ static_cast<uint64_t>(p.N) ^
                     static_cast<uint64_t>(p.M) ^ static_cast<uint64_t>(p.K) ^
                     static_cast<uint64_t>(p.ldo) ^ __float_as_uint(p.out_mult) ^
                     static_cast<uint64_t>(p.out_fp16) ^ static_cast<uint64_t>(p.x_vec16) ^
                     static_cast<uint64_t>(p.split) ^ static_cast<uint64_t>(p.n16);
  warm_sink = h;
}

}  // namespace b12x::gemm::lin
