// Which block-format rules the activation quantisers use, on top of formats/block.h (the one
// host+device definition of every block codec). The kernels split each encoder of block.h into
// "scaled fp32 value" (here) + the final conversion (a `cvt` instruction where the architecture
// has it, the scalar.h emulation otherwise); the CPU reference calls block.h's *_encode_value
// directly, so the GPU tests also check that split.
//
// Choices (documented in b12x/quantize.h):
// - MXFP4 uses the ceil rule (MxScaleRule::kCeil: never clips the block maximum; TRT-LLM,
//   FlashInfer). The OCP floor rule is for checkpoints, not activations.
// - All-zero MX blocks store 127 (MxZeroBlockScale::kOne), like the b12x row quantiser; this is
//   also the swizzle padding byte.
// - NVFP4, MXFP8, FP8 1x128 groups and per-tensor FP8 follow block.h exactly.
#pragma once

#include <cstdint>

#include "formats/block.h"

namespace b12x::gemm::qrules {

inline constexpr fmt::MxScaleRule kMxfp4Rule = fmt::MxScaleRule::kCeil;
inline constexpr fmt::MxZeroBlockScale kMxZero = fmt::MxZeroBlockScale::kOne;

B12X_HD uint8_t mxfp8_scale_code(float amax) {
  return fmt::mxfp8_scale(amax, kMxZero);
}
B12X_HD uint8_t mxfp4_scale_code(float amax) {
  return fmt::mxfp4_scale(amax, kMxfp4Rule, kMxZero);
}
/// x * 2^(127 - code): the value mxfp8_encode_value / mxfp4_encode_value convert.
B12X_HD float mx_scaled(float x, uint8_t code) {
  return fmt::mul_rn(x, fmt::ue8m0_inverse(code));
}

B12X_HD uint8_t nvfp4_scale_code(float amax, float gs) {
  return fmt::nvfp4_scale(amax, gs);
}
B12X_HD float nvfp4_multiplier(uint8_t code, float gs) {
  return fmt::nvfp4_multiplier(code, gs);
}
/// The value nvfp4_encode_value converts (a zero multiplier encodes 0 whatever x is).
B12X_HD float nvfp4_scaled(float x, float mult) {
  return mult == 0.f ? 0.f : fmt::mul_rn(x, mult);
}

/// fmt::float_to_e2m1_canonical without the integer emulation, for architectures without
/// cvt.e2m1x2 (sm_89/sm_90): on the grid {0, .5, 1, 1.5, 2, 3, 4, 6} the code is rne(2|y|) for
/// |y| < 2 and 4 + rne(|y| - 2) for 2 <= |y| < 4 (both exact: a power-of-two scale and a
/// Sterbenz subtraction), rounded to an integer by adding 1.5 * 2^23 (RNE); |y| >= 4 gives 4
/// (code 6) up to 5 inclusive (tie to even) and 6 (code 7) above, Inf included. NaN -> +6
/// (0x7), -0 -> +0. Exhaustively equal to the emulation over all 2^32 inputs (checked once; the
/// CPU test sweeps a strided subset).
B12X_HD uint8_t e2m1_code_canonical_fast(float y) {
  const uint32_t u = fmt::f32_bits(y);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7;
  const float m = fmt::f32_from_bits(a);
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  const uint32_t lo = fmt::f32_bits(m * 2.0f + kMagic) - 0x4B400000u;
  const uint32_t mid = fmt::f32_bits((m - 2.0f) + kMagic) - 0x4B400000u + 4u;
  const uint32_t hi = m > 5.0f ? 7u : 6u;
  const uint32_t c = m < 2.0f ? lo : (m < 4.0f ? mid : hi);
  return static_cast<uint8_t>(c == 0 ? 0u : (c | ((u >> 28) & 0x8u)));
}

B12X_HD float fp8_group_scale(float amax) {
  return fmt::fp8_scale_from_amax(amax);
}
/// The value fp8_encode_value converts (a zero scale encodes 0).
B12X_HD float fp8_scaled(float x, float scale) {
  return scale == 0.f ? 0.f : fmt::div_rn(x, scale);
}

}  // namespace b12x::gemm::qrules
