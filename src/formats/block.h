// Block formats: one definition shared by the CPU references, the host packers and the kernels.
//
// Every function here is B12X_HD and uses only integer operations plus fp32 multiplications and
// divisions that are correctly rounded on both sides (mul_rn/div_rn below: plain operators on
// the host, __fmul_rn/__fdiv_rn on the device, so nvcc can neither contract them into FMAs nor
// replace a division by an approximate reciprocal). Host and device results are therefore
// bit-identical, provided the translation unit is not compiled with -ftz=true / fast math.
//
// Conventions (formats.md §B, b12x-contract §2):
//  - Packed FP4: element 2i in the low nibble of byte i, 2i+1 in the high nibble. FP4 -0 is
//    canonicalised to +0 by every encoder here.
//  - amax ignores NaN (a NaN input never raises the block maximum); Inf saturates.
//  - NVFP4 (16 values, UE4M3 scale, fp32 global scale gs in the multiply convention
//    gs = 448*6/amax_tensor). The operation order, fixed once for b12x:
//        sf   = ue4m3_rn_satfinite(div_rn(mul_rn(gs, amax), 6))
//        mult = div_rn(1, mul_rn(dec(sf), div_rn(1, gs)))        (0 if sf == 0 or gs == 0)
//        q_i  = e2m1_rn_satfinite(mul_rn(x_i, mult)), -0 -> +0
//    i.e. exact IEEE division where the b12x/TRT-LLM kernels use rcp.approx by default
//    (their DISABLE_FP4_QUANT_FAST_MATH variant). Decode: (e2m1(q) * dec(sf)) / gs, where the
//    product is exact and the division correctly rounded.
//  - MXFP4 (32 values, E8M0): kFloor is the OCP rule X = 2^(floor(log2 amax) - 2); kCeil is
//    X = 2^ceil(log2(amax/6)) (never clips; TRT-LLM/FlashInfer). Values: e2m1(x * 2^(127-byte)).
//  - MXFP8 (32 values, E8M0): X = pow2_ceil(div_rn(amax, 448)) by the integer bit rule (a
//    non-zero mantissa bumps the exponent), byte = exponent field; values
//    e4m3_rn_satfinite(x * 2^(127-byte)). Bit-identical to DeepGEMM per_token_cast_to_fp8 at
//    granularity 32 and to the b12x row quantizer.
//  - All-zero MX blocks: scale byte kOne (127, what the b12x row quantizer writes) or kZero (0,
//    the OCP reference / the b12x MoE helper); payload zero either way.
//  - DeepSeek block FP8: s = div_rn(amax, 448) (fp32, multiplied at decode), q = e4m3(div_rn(x,
//    s)); an all-zero block stores s = 0 and q = 0. Weights use 128x128 tiles, activations 1x128.
//  - Per-tensor FP8: scale = div_rn(amax, 448) or a given static scale; q = e4m3(div_rn(x, scale)).
//  - b12x requantisation of block FP8 to UE8M0 (b12x-contract §1.6): blocks whose fp32 scale is
//    an exact power of two keep their values verbatim (byte = exponent); other blocks rebuild
//    w = mul_rn(dec(q), s), take the block amax and apply the MXFP8 rule to the whole block.
#pragma once

#include <cstdint>

#include "formats/scalar.h"

namespace b12x::fmt {

// ---------------------------------------------------------------- exact fp32 arithmetic -------
B12X_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
B12X_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
B12X_HD float abs_f32(float x) {
  return f32_from_bits(f32_bits(x) & 0x7FFFFFFFu);
}
/// max(m, |x|) ignoring NaN x (same result as fmaxf(m, fabsf(x)) for non-NaN m).
B12X_HD float amax_update(float m, float x) {
  const float a = abs_f32(x);
  return a > m ? a : m;
}
B12X_HD float block_amax(const float* x, int n) {
  float m = 0.f;
  for (int i = 0; i < n; ++i) m = amax_update(m, x[i]);
  return m;
}
/// 2^(127 - byte) as fp32 for an E8M0 byte in [0, 254] (the element multiplier of MX encoders).
B12X_HD float ue8m0_inverse(uint8_t byte) {
  if (byte == 254u) return f32_from_bits(0x00400000u);  // 2^-127 is an fp32 subnormal
  return f32_from_bits(static_cast<uint32_t>(254u - byte) << 23);
}

// ---------------------------------------------------------------- block geometry --------------
inline constexpr int kNvfp4BlockValues = 16;
inline constexpr int kMxBlockValues = 32;
inline constexpr int kFp8BlockDim = 128;  // DeepSeek 128x128 weights / 1x128 activations

/// MX scale rule (named: checkpoints differ by one exponent on many blocks).
enum class MxScaleRule : int32_t {
  kFloor = 0,  ///< OCP MX v1.0: X = 2^(floor(log2 amax) - emax_elem); may clip the block max
  kCeil = 1,   ///< X = 2^ceil(log2(amax / max_elem)); never clips
};
/// Scale byte written for an all-zero MX block.
enum class MxZeroBlockScale : int32_t {
  kOne = 127,  ///< 2^0: the b12x row quantizer (mxfp8_rows), FlashInfer
  kZero = 0,   ///< 2^-127: the OCP reference, the b12x MoE helper
};

// ---------------------------------------------------------------- NVFP4 -----------------------
/// UE4M3 block scale for a block maximum `amax` under global scale `gs`.
B12X_HD uint8_t nvfp4_scale(float amax, float gs) {
  return float_to_ue4m3_satfinite(div_rn(mul_rn(gs, amax), 6.0f));
}
/// Element multiplier gs / dec(sf) in the fixed order 1 / (dec(sf) * (1/gs)); 0 when the block
/// scale or the global scale is zero (or the product underflows), which makes every value 0;
/// clamped to FLT_MAX (only reachable with gs > ~2^117).
B12X_HD float nvfp4_multiplier(uint8_t sf, float gs) {
  if (sf == 0 || gs == 0.f) return 0.f;
  const float denom = mul_rn(ue4m3_to_float(sf), div_rn(1.0f, gs));
  if (denom == 0.f) return 0.f;
  // A subnormal denominator (gs > ~2^117) would give Inf and turn 0 * Inf into NaN -> code 6;
  // the largest finite multiplier keeps zeros at 0 and still saturates everything else.
  const float m = div_rn(1.0f, denom);
  return m <= 3.4028234663852886e38f ? m : 3.4028234663852886e38f;
}
/// One value with the block multiplier: 4-bit code, -0 canonicalised to +0.
B12X_HD uint8_t nvfp4_encode_value(float x, float mult) {
  if (mult == 0.f) return 0;
  return float_to_e2m1_canonical(mul_rn(x, mult));
}
B12X_HD float nvfp4_decode_value(uint8_t code, uint8_t sf, float gs) {
  return div_rn(mul_rn(e2m1_to_float(code), ue4m3_to_float(sf)), gs);  // exact product
}
/// 16 values -> 8 packed bytes; returns the UE4M3 scale byte.
B12X_HD uint8_t nvfp4_encode_block(const float* x, float gs, uint8_t* packed) {
  const uint8_t sf = nvfp4_scale(block_amax(x, kNvfp4BlockValues), gs);
  const float mult = nvfp4_multiplier(sf, gs);
  for (int i = 0; i < kNvfp4BlockValues / 2; ++i)
    packed[i] =
        pack_e2m1x2(nvfp4_encode_value(x[2 * i], mult), nvfp4_encode_value(x[2 * i + 1], mult));
  return sf;
}
B12X_HD void nvfp4_decode_block(const uint8_t* packed, uint8_t sf, float gs, float* out) {
  for (int i = 0; i < kNvfp4BlockValues / 2; ++i) {
    out[2 * i] = nvfp4_decode_value(packed[i] & 0xFu, sf, gs);
    out[2 * i + 1] = nvfp4_decode_value(packed[i] >> 4, sf, gs);
  }
}

// ---------------------------------------------------------------- MX scales -------------------
/// E8M0 byte of an MX block scale. `emax_elem` is the exponent of the element's largest normal
/// (2 for E2M1, 8 for E4M3) and `max_elem` its largest value (6, 448).
/// kFloor: byte = floor(log2 amax) + 127 - emax_elem, clamped to [0, 254].
/// kCeil (E2M1): byte = ceil(log2(amax / 6)) + 127, computed exactly from the bits
/// (amax = m*2^e: ceil(log2(m/1.5)) is 0 for m <= 1.5 and 1 above), clamped to [0, 254].
B12X_HD uint8_t mxfp4_scale(float amax, MxScaleRule rule, MxZeroBlockScale zero_block) {
  const uint32_t a = f32_bits(amax) & 0x7FFFFFFFu;
  if (a == 0) return static_cast<uint8_t>(zero_block);
  if (a >= 0x7F800000u) return 254u;  // Inf (NaN never reaches amax)
  const int e = static_cast<int>(a >> 23);
  int byte;
  if (rule == MxScaleRule::kFloor) {
    // fp32 subnormal amax: floor(log2) <= -127, below the smallest scale.
    byte = (e == 0) ? 0 : e - 2;
  } else {
    if (e == 0) {
      // amax < 2^-126, amax/6 < 2^-128.5: the smallest scale 2^-127 already covers it.
      byte = 0;
    } else {
      byte = e - 2 + ((a & 0x7FFFFFu) > 0x400000u ? 1 : 0);
    }
  }
  if (byte < 0) byte = 0;
  if (byte > 254) byte = 254;
  return static_cast<uint8_t>(byte);
}
/// MXFP8 / block-FP8-to-UE8M0 scale byte: pow2_ceil(div_rn(amax, 448)) by the integer bit rule
/// (= cvt.rp.satfinite.ue8m0 of the quotient whenever it is an fp32 normal; a subnormal quotient,
/// amax < 448*2^-126, gets byte 1 as in b12x's pow2_ceil_ue8m0, even when it is exactly 2^-127).
B12X_HD uint8_t mxfp8_scale(float amax, MxZeroBlockScale zero_block) {
  const uint32_t a = f32_bits(amax) & 0x7FFFFFFFu;
  if (a == 0) return static_cast<uint8_t>(zero_block);
  if (a >= 0x7F800000u) return 254u;
  const uint32_t s = f32_bits(div_rn(f32_from_bits(a), 448.0f));
  uint32_t e = s >> 23;
  if ((s & 0x7FFFFFu) != 0) ++e;  // not a power of two (or subnormal): round the exponent up
  if (e > 254u) e = 254u;
  return static_cast<uint8_t>(e);
}

// ---------------------------------------------------------------- MXFP4 -----------------------
B12X_HD uint8_t mxfp4_encode_value(float x, uint8_t scale) {
  return float_to_e2m1_canonical(mul_rn(x, ue8m0_inverse(scale)));
}
B12X_HD float mxfp4_decode_value(uint8_t code, uint8_t scale) {
  return mul_rn(e2m1_to_float(code), ue8m0_to_float(scale));  // exact
}
/// 32 values -> 16 packed bytes; returns the E8M0 scale byte.
B12X_HD uint8_t mxfp4_encode_block(const float* x, MxScaleRule rule, MxZeroBlockScale zero_block,
                                   uint8_t* packed) {
  const uint8_t s = mxfp4_scale(block_amax(x, kMxBlockValues), rule, zero_block);
  for (int i = 0; i < kMxBlockValues / 2; ++i)
    packed[i] = pack_e2m1x2(mxfp4_encode_value(x[2 * i], s), mxfp4_encode_value(x[2 * i + 1], s));
  return s;
}
B12X_HD void mxfp4_decode_block(const uint8_t* packed, uint8_t scale, float* out) {
  for (int i = 0; i < kMxBlockValues / 2; ++i) {
    out[2 * i] = mxfp4_decode_value(packed[i] & 0xFu, scale);
    out[2 * i + 1] = mxfp4_decode_value(packed[i] >> 4, scale);
  }
}

// ---------------------------------------------------------------- MXFP8 -----------------------
B12X_HD uint8_t mxfp8_encode_value(float x, uint8_t scale) {
  return float_to_e4m3_satfinite(mul_rn(x, ue8m0_inverse(scale)));
}
B12X_HD float mxfp8_decode_value(uint8_t code, uint8_t scale) {
  return mul_rn(e4m3_to_float(code), ue8m0_to_float(scale));
}
/// 32 values -> 32 E4M3 bytes; returns the E8M0 scale byte.
B12X_HD uint8_t mxfp8_encode_block(const float* x, MxZeroBlockScale zero_block, uint8_t* out) {
  const uint8_t s = mxfp8_scale(block_amax(x, kMxBlockValues), zero_block);
  for (int i = 0; i < kMxBlockValues; ++i) out[i] = mxfp8_encode_value(x[i], s);
  return s;
}
B12X_HD void mxfp8_decode_block(const uint8_t* in, uint8_t scale, float* out) {
  for (int i = 0; i < kMxBlockValues; ++i) out[i] = mxfp8_decode_value(in[i], scale);
}

// ---------------------------------------------------------------- FP8 with fp32 scales --------
/// DeepSeek block scale / per-tensor scale from an amax: amax / 448 (0 for an all-zero block).
B12X_HD float fp8_scale_from_amax(float amax) {
  return div_rn(amax, 448.0f);
}
/// q = e4m3_rn_satfinite(x / scale); 0 when the scale is 0.
B12X_HD uint8_t fp8_encode_value(float x, float scale) {
  if (scale == 0.f) return 0;
  return float_to_e4m3_satfinite(div_rn(x, scale));
}
B12X_HD float fp8_decode_value(uint8_t code, float scale) {
  return mul_rn(e4m3_to_float(code), scale);
}

// ---------------------------------------------------------------- block FP8 -> UE8M0 ----------
/// True when s is a positive normal exact power of two (an fp32 scale b12x keeps verbatim).
B12X_HD bool is_pow2_scale(float s) {
  const uint32_t u = f32_bits(s);
  return (u >> 31) == 0 && (u & 0x7FFFFFu) == 0 && (u >> 23) != 0 && (u >> 23) != 0xFFu;
}
/// The value the requantiser reconstructs from one stored weight code.
B12X_HD float block_fp8_reconstruct(uint8_t code, float scale) {
  return mul_rn(e4m3_to_float(code), scale);
}
/// Re-encode one reconstructed value under a UE8M0 block scale byte.
B12X_HD uint8_t block_fp8_requant_value(uint8_t code, float scale, uint8_t ue8m0) {
  return mxfp8_encode_value(block_fp8_reconstruct(code, scale), ue8m0);
}

// ---------------------------------------------------------------- rows ----------------------
// A row of k values (k a multiple of the block) with its linear scale row. Kernels that give a
// whole row to one thread use these directly; the host API loops over them.
B12X_HD void nvfp4_encode_row(const float* x, int64_t k, float gs, uint8_t* packed,
                              uint8_t* scales) {
  for (int64_t b = 0; b < k / kNvfp4BlockValues; ++b)
    scales[b] = nvfp4_encode_block(x + b * kNvfp4BlockValues, gs, packed + b * 8);
}
B12X_HD void nvfp4_decode_row(const uint8_t* packed, const uint8_t* scales, int64_t k, float gs,
                              float* out) {
  for (int64_t b = 0; b < k / kNvfp4BlockValues; ++b)
    nvfp4_decode_block(packed + b * 8, scales[b], gs, out + b * kNvfp4BlockValues);
}
B12X_HD void mxfp4_encode_row(const float* x, int64_t k, MxScaleRule rule,
                              MxZeroBlockScale zero_block, uint8_t* packed, uint8_t* scales) {
  for (int64_t b = 0; b < k / kMxBlockValues; ++b)
    scales[b] = mxfp4_encode_block(x + b * kMxBlockValues, rule, zero_block, packed + b * 16);
}
B12X_HD void mxfp4_decode_row(const uint8_t* packed, const uint8_t* scales, int64_t k, float* out) {
  for (int64_t b = 0; b < k / kMxBlockValues; ++b)
    mxfp4_decode_block(packed + b * 16, scales[b], out + b * kMxBlockValues);
}
B12X_HD void mxfp8_encode_row(const float* x, int64_t k, MxZeroBlockScale zero_block,
                              uint8_t* values, uint8_t* scales) {
  for (int64_t b = 0; b < k / kMxBlockValues; ++b)
    scales[b] = mxfp8_encode_block(x + b * kMxBlockValues, zero_block, values + b * kMxBlockValues);
}
B12X_HD void mxfp8_decode_row(const uint8_t* values, const uint8_t* scales, int64_t k, float* out) {
  for (int64_t b = 0; b < k / kMxBlockValues; ++b)
    mxfp8_decode_block(values + b * kMxBlockValues, scales[b], out + b * kMxBlockValues);
}
/// One 1x128 activation group (DeepSeek): returns the fp32 scale amax/448 (0 for a zero group).
B12X_HD float fp8_group_encode(const float* x, int n, uint8_t* out) {
  const float s = fp8_scale_from_amax(block_amax(x, n));
  for (int i = 0; i < n; ++i) out[i] = fp8_encode_value(x[i], s);
  return s;
}

}  // namespace b12x::fmt
