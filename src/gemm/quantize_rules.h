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

/// fmt::float_to_e2m1_canonical by comparisons against the rounding boundaries of the E2M1 grid
/// {0, .5, 1, 1.5, 2, 3, 4, 6} (ties to even: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2,
/// 2.5 -> 2, 3.5 -> 4, 5 -> 4; above 5 and Inf -> 6; NaN -> +6 (0x7); -0 -> +0). Bit-identical
/// (tests/cpp/test_quantize.cc sweeps fp32), and ~10x cheaper than the integer emulation on
/// architectures without cvt.e2m1x2 (sm_89/sm_90).
B12X_HD uint8_t e2m1_code_canonical_cmp(float y) {
  const uint32_t u = fmt::f32_bits(y);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7;
  const float m = fmt::f32_from_bits(a);
  const uint32_t c = static_cast<uint32_t>(m > 0.25f) + static_cast<uint32_t>(m >= 0.75f) +
                     static_cast<uint32_t>(m > 1.25f) + static_cast<uint32_t>(m >= 1.75f) +
                     static_cast<uint32_t>(m > 2.5f) + static_cast<uint32_t>(m >= 3.5f) +
                     static_cast<uint32_t>(m > 5.0f);
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
