// Scalar number formats: one definition shared by the CPU reference, the packers and the kernels.
//
// Encoders reproduce the hardware `cvt` rules of formats.md §A.2 bit for bit:
// round-to-nearest-even applied once from fp32, `.satfinite` saturation, NaN rules. They are
// written with integer arithmetic only, so host and device give identical bits.
// Kernels that convert many values use the PTX instructions directly (see ptx helpers); these
// functions are the oracle they are tested against.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define B12X_HD __host__ __device__ __forceinline__
#else
#define B12X_HD inline
#endif

namespace b12x::fmt {

B12X_HD uint32_t f32_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}
B12X_HD float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, 4);
  return x;
#endif
}

/// m >> s with round-to-nearest-even on the dropped bits (s may exceed 31: result 0 or 1 never
/// happens for s >= 33 since m < 2^25).
B12X_HD uint32_t rne_shift_right(uint32_t m, int s) {
  if (s <= 0) return m << (-s);
  if (s >= 32) return 0;
  const uint32_t q = m >> s;
  const uint32_t rem = m & ((1u << s) - 1u);
  const uint32_t half = 1u << (s - 1);
  return q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
}

/// Magnitude code of a finite non-negative fp32 (given as bits) in a minifloat with kEBits
/// exponent bits, kMBits mantissa bits and bias kBias, RNE, without saturation (the caller clamps).
/// Subnormals of the target are handled; fp32 subnormals flush to 0 (they are far below every
/// target's smallest subnormal).
template <int kEBits, int kMBits, int kBias>
B12X_HD uint32_t minifloat_magnitude_rne(uint32_t abs_bits) {
  const int e32 = static_cast<int>(abs_bits >> 23);
  if (e32 == 0) return 0;
  const int e = e32 - 127;
  const int emin = 1 - kBias;
  const uint32_t mant = (abs_bits & 0x7FFFFFu) | 0x800000u;
  if (e < emin) {
    // Target subnormal: value = q * 2^(emin - kMBits).
    return rne_shift_right(mant, 23 - kMBits + (emin - e));
  }
  const uint32_t r = rne_shift_right(mant, 23 - kMBits);  // in [2^kMBits, 2^(kMBits+1)]
  // A carry out of the mantissa (r == 2^(kMBits+1)) increments the exponent field naturally.
  return (static_cast<uint32_t>(e + kBias) << kMBits) + r - (1u << kMBits);
}

// ---------------------------------------------------------------- FP8 E4M3 (fn) ---------------
/// cvt.rn.satfinite.e4m3x2.f32 semantics: |x| >= 448 (and +-Inf) -> +-448 (0x7E/0xFE), NaN -> 0x7F.
B12X_HD uint8_t float_to_e4m3_satfinite(float x) {
  const uint32_t u = f32_bits(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F;
  if (a >= 0x43E00000u) return static_cast<uint8_t>(sign | 0x7Eu);  // 448.0f and above
  uint32_t code = minifloat_magnitude_rne<4, 3, 7>(a);
  if (code > 0x7Eu) code = 0x7Eu;
  return static_cast<uint8_t>(sign | code);
}
/// cvt.rn.e4m3x2.f32 without .satfinite: results above 448 after rounding become NaN (0x7F|sign).
B12X_HD uint8_t float_to_e4m3_nosat(float x) {
  const uint32_t u = f32_bits(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F;
  if (a == 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Fu);
  uint32_t code = minifloat_magnitude_rne<4, 3, 7>(a);
  if (code > 0x7Eu) code = 0x7Fu;
  return static_cast<uint8_t>(sign | code);
}
B12X_HD float e4m3_to_float(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t e = (v >> 3) & 0xFu, m = v & 0x7u;
  if (e == 0xFu && m == 0x7u) return f32_from_bits(sign | 0x7FC00000u);
  float mag;
  if (e == 0)
    mag = static_cast<float>(m) * 0.001953125f;  // m * 2^-9
  else
    mag = f32_from_bits(((e + 120u) << 23) | (m << 20));  // (1+m/8) * 2^(e-7)
  return f32_from_bits(f32_bits(mag) | sign);
}

// ---------------------------------------------------------------- FP8 E5M2 --------------------
/// satfinite: |x| > 57344 and Inf -> +-57344 (0x7B), NaN -> 0x7F.
B12X_HD uint8_t float_to_e5m2_satfinite(float x) {
  const uint32_t u = f32_bits(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F;
  if (a >= 0x47600000u) return static_cast<uint8_t>(sign | 0x7Bu);  // 57344.0f and above
  uint32_t code = minifloat_magnitude_rne<5, 2, 15>(a);
  if (code > 0x7Bu) code = 0x7Bu;
  return static_cast<uint8_t>(sign | code);
}
/// No saturation: overflow after rounding -> +-Inf (0x7C), NaN -> 0x7F.
B12X_HD uint8_t float_to_e5m2_nosat(float x) {
  const uint32_t u = f32_bits(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F;
  if (a == 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Cu);
  uint32_t code = minifloat_magnitude_rne<5, 2, 15>(a);
  if (code > 0x7Bu) code = 0x7Cu;
  return static_cast<uint8_t>(sign | code);
}
B12X_HD float e5m2_to_float(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t e = (v >> 2) & 0x1Fu, m = v & 0x3u;
  if (e == 0x1Fu) return f32_from_bits(sign | (m ? 0x7FC00000u : 0x7F800000u));
  float mag;
  if (e == 0)
    mag = static_cast<float>(m) * 1.52587890625e-05f;  // m * 2^-16
  else
    mag = f32_from_bits(((e + 112u) << 23) | (m << 21));
  return f32_from_bits(f32_bits(mag) | sign);
}

// ---------------------------------------------------------------- FP4 E2M1 --------------------
/// cvt.rn.satfinite.e2m1x2.f32 for one value: RNE on {0,.5,1,1.5,2,3,4,6}, |x| > 6 -> 6,
/// NaN -> +6 (0x7), -Inf -> 0xF, small negatives -> -0 (0x8). Returns the 4-bit code.
B12X_HD uint8_t float_to_e2m1(float x) {
  const uint32_t u = f32_bits(x);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7;
  const uint32_t sign = (u >> 28) & 0x8u;
  if (a >= 0x40C00000u) return static_cast<uint8_t>(sign | 0x7u);  // 6.0f and above, Inf
  uint32_t code = minifloat_magnitude_rne<2, 1, 1>(a);
  if (code > 0x7u) code = 0x7u;
  return static_cast<uint8_t>(sign | code);
}
/// Same, with -0 canonicalised to +0 (what NVFP4/MXFP4 producers store).
B12X_HD uint8_t float_to_e2m1_canonical(float x) {
  const uint8_t c = float_to_e2m1(x);
  return c == 0x8u ? 0u : c;
}
B12X_HD float e2m1_to_float(uint8_t nibble) {
  constexpr float kMag[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  const float m = kMag[nibble & 7u];
  return (nibble & 8u) ? -m : m;
}
/// Two values into one byte: lo -> bits 3..0 (element 2i), hi -> bits 7..4 (element 2i+1).
B12X_HD uint8_t pack_e2m1x2(uint8_t lo, uint8_t hi) {
  return static_cast<uint8_t>((lo & 0xFu) | ((hi & 0xFu) << 4));
}

// ---------------------------------------------------------------- E8M0 (MX scale) -------------
B12X_HD float ue8m0_to_float(uint8_t v) {
  if (v == 0xFFu) return f32_from_bits(0x7FC00000u);
  if (v == 0) return f32_from_bits(0x00400000u);  // 2^-127 (fp32 subnormal)
  return f32_from_bits(static_cast<uint32_t>(v) << 23);
}
/// cvt.rz.satfinite.ue8m0x2.f32: floor(log2|x|) + 127, clamped to [0, 0xFE]; NaN -> 0xFF;
/// Inf -> 0xFE (satfinite); 0 -> 0.
B12X_HD uint8_t float_to_ue8m0_floor(float x) {
  const uint32_t a = f32_bits(x) & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0xFF;
  if (a == 0x7F800000u) return 0xFE;
  const uint32_t e = a >> 23;
  if (e == 0) return 0;  // zero and fp32 subnormals: floor(log2) <= -127
  return static_cast<uint8_t>(e > 0xFEu ? 0xFEu : e);
}
/// cvt.rp.satfinite.ue8m0x2.f32: ceil(log2|x|) + 127, clamped to [0, 0xFE]; NaN -> 0xFF.
B12X_HD uint8_t float_to_ue8m0_ceil(float x) {
  const uint32_t a = f32_bits(x) & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0xFF;
  if (a == 0x7F800000u) return 0xFE;
  if (a == 0) return 0;
  uint32_t e = a >> 23;
  const uint32_t m = a & 0x7FFFFFu;
  if (e == 0) return (a > 0x00400000u) ? 1 : 0;  // fp32 subnormal: 2^-127 is code 0
  if (m != 0) ++e;
  return static_cast<uint8_t>(e > 0xFEu ? 0xFEu : e);
}

// ---------------------------------------------------------------- UE4M3 (NVFP4 scale) ---------
/// E4M3 restricted to non-negative values; encoding a negative gives its magnitude's code.
B12X_HD uint8_t float_to_ue4m3_satfinite(float x) {
  return static_cast<uint8_t>(float_to_e4m3_satfinite(x) & 0x7Fu);
}
B12X_HD float ue4m3_to_float(uint8_t v) {
  return e4m3_to_float(static_cast<uint8_t>(v & 0x7Fu));
}

// ---------------------------------------------------------------- BF16 / FP16 -----------------
B12X_HD float bf16_bits_to_float(uint16_t b) {
  return f32_from_bits(static_cast<uint32_t>(b) << 16);
}
/// RNE, NaN kept quiet.
B12X_HD uint16_t float_to_bf16_bits(float x) {
  const uint32_t u = f32_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7FFFu + lsb) >> 16);
}
/// Round an fp32 to the nearest bf16 value and return it as fp32.
B12X_HD float round_to_bf16(float x) {
  return bf16_bits_to_float(float_to_bf16_bits(x));
}

B12X_HD float fp16_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1Fu) return f32_from_bits(sign | 0x7F800000u | (m << 13));
  float mag;
  if (e == 0)
    mag = static_cast<float>(m) * 5.9604644775390625e-08f;  // m * 2^-24
  else
    mag = f32_from_bits(((e + 112u) << 23) | (m << 13));
  return f32_from_bits(f32_bits(mag) | sign);
}
/// IEEE binary16, RNE, overflow -> Inf, NaN kept.
B12X_HD uint16_t float_to_fp16_bits(float x) {
  const uint32_t u = f32_bits(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 65536
  return static_cast<uint16_t>(sign | minifloat_magnitude_rne<5, 10, 15>(a));
}
B12X_HD float round_to_fp16(float x) {
  return fp16_bits_to_float(float_to_fp16_bits(x));
}

}  // namespace b12x::fmt
