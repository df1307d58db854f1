// Scale rules of the activation quantisers: one host+device definition used by the kernels
// (gemm/kernels/quantize.cuh) and the CPU reference (reference/quantize.cc), so both give the
// same bits. Built on the scalar codecs of formats/scalar.h.
//
// Rules (b12x-contract §2, formats.md §B):
// - MXFP8: scale byte = pow2-ceil(amax / 448) as E8M0 (cvt.rp rule: exponent + 1 when the fp32
//   mantissa is non-zero); an all-zero block stores 127 (1.0), as b12x's row quantiser does.
//   Values: e4m3_satfinite(x * 2^(127 - byte)).
// - MXFP4: the ceil rule, scale byte = ceil(log2(amax / 6)) + 127, which never clips the block
//   maximum (TRT-LLM / FlashInfer; the OCP floor rule clips up to 25%); all-zero block -> 127.
//   Values: e2m1(x * 2^(127 - byte)), -0 stored as +0.
// - NVFP4 (multiply-convention global scale gs): SF = ue4m3_satfinite(gs * (amax * (1/6))),
//   values e2m1(x * (1 / (dec(SF) * (1 / gs)))) -- the TRT-LLM/FlashInfer/vLLM order with
//   correctly rounded reciprocals (rcp of 6 is exact-rounded 1/6); SF == 0 or gs == 0 gives
//   zeros.
// - FP8 1x128 groups (DeepSeek): s = amax / 448, q = e4m3_satfinite(x / s); amax 0 -> s = 0,
//   q = 0. Dequantisation multiplies by s.
// - FP8 per tensor: q = e4m3_satfinite(x / scale).
#pragma once

#include <cstdint>

#include "formats/scalar.h"

namespace b12x::gemm::qrules {

inline constexpr float kE4M3Max = 448.f;
inline constexpr float kE2M1Max = 6.f;

/// 2^(127 - code) as fp32 (code 254 -> 2^-127, an fp32 subnormal; code 255 -> NaN).
B12X_HD float mx_value_multiplier(uint8_t code) {
  if (code == 0xFFu) return fmt::f32_from_bits(0x7FC00000u);
  const int e = 254 - static_cast<int>(code);  // biased exponent of 2^(127 - code)
  if (e >= 1) return fmt::f32_from_bits(static_cast<uint32_t>(e) << 23);
  return fmt::f32_from_bits(0x00400000u);  // e == 0: 2^-127
}

B12X_HD uint8_t mxfp8_scale_code(float amax) {
  if (!(amax > 0.f)) return 127;
  return fmt::float_to_ue8m0_ceil(amax / kE4M3Max);
}

B12X_HD uint8_t mxfp4_scale_code(float amax) {
  if (!(amax > 0.f)) return 127;
  return fmt::float_to_ue8m0_ceil(amax / kE2M1Max);
}

B12X_HD uint8_t nvfp4_scale_code(float amax, float gs) {
  const float r6 = 1.f / kE2M1Max;
  return fmt::float_to_ue4m3_satfinite(gs * (amax * r6));
}

B12X_HD float nvfp4_value_multiplier(uint8_t code, float gs) {
  if (code == 0 || gs == 0.f) return 0.f;
  return 1.f / (fmt::ue4m3_to_float(code) * (1.f / gs));
}

B12X_HD float fp8_group_scale(float amax) { return amax / kE4M3Max; }

B12X_HD float fp8_group_scaled(float x, float s) { return s == 0.f ? 0.f : x / s; }

B12X_HD float fp8_tensor_scaled(float x, float scale) { return x / scale; }

}  // namespace b12x::gemm::qrules
