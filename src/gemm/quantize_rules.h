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

B12X_HD uint8_t mxfp8_scale_code(float amax) { return fmt::mxfp8_scale(amax, kMxZero); }
B12X_HD uint8_t mxfp4_scale_code(float amax) {
  return fmt::mxfp4_scale(amax, kMxfp4Rule, kMxZero);
}
/// x * 2^(127 - code): the value mxfp8_encode_value / mxfp4_encode_value convert.
B12X_HD float mx_scaled(float x, uint8_t code) { return fmt::mul_rn(x, fmt::ue8m0_inverse(code)); }

B12X_HD uint8_t nvfp4_scale_code(float amax, float gs) { return fmt::nvfp4_scale(amax, gs); }
B12X_HD float nvfp4_multiplier(uint8_t code, float gs) { return fmt::nvfp4_multiplier(code, gs); }
/// The value nvfp4_encode_value converts (a zero multiplier encodes 0 whatever x is).
B12X_HD float nvfp4_scaled(float x, float mult) {
  return mult == 0.f ? 0.f : fmt::mul_rn(x, mult);
}

B12X_HD float fp8_group_scale(float amax) { return fmt::fp8_scale_from_amax(amax); }
/// The value fp8_encode_value converts (a zero scale encodes 0).
B12X_HD float fp8_scaled(float x, float scale) {
  return scale == 0.f ? 0.f : fmt::div_rn(x, scale);
}

}  // namespace b12x::gemm::qrules
