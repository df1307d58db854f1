// MoE numerics shared bit for bit by the GPU engine (kernels/moe_gemm.cuh) and the CPU reference
// (reference/moe.cc): activation-operand quantisation and the gated/non-gated activations.
//
// The quantisers return the *operand* value a tensor core consumes: the dequantised value without
// the per-tensor NVFP4 global scale, i.e. e2m1*ue4m3 (NVFP4), e4m3*2^k (MXFP8), e2m1*2^k (MXFP4).
// Each is exact in BF16 (at most 6 significant bits), so feeding it to a BF16 MMA computes what a
// block-scaled FP4/FP8 MMA computes; 1/gs goes into the per-expert alpha.
#pragma once

#include <cmath>
#include <cstdint>

#include "formats/block.h"
#include "formats/scalar.h"

namespace b12x::moe::num {

enum AQuant : int { kANone = 0, kANvfp4 = 1, kAMxfp8 = 2, kAMxfp4 = 3 };
enum ActKind : int { kActSilu = 0, kActSitu = 1, kActSwigluOai = 2, kActRelu2 = 3 };

/// E2M1 code -> value without a lookup table (kernels would put the table in local memory):
/// codes 2..7 are normal (2^(e-1) * (1 + m/2)), code 1 is 0.5, code 0 is 0; bit 3 is the sign.
B12X_HD float e2m1_value(uint32_t code) {
  const uint32_t c = code & 7u;
  const float mag = c >= 2 ? fmt::f32_from_bits((((c >> 1) + 126u) << 23) | ((c & 1u) << 22))
                           : 0.5f * static_cast<float>(c);
  return (code & 8u) ? -mag : mag;
}

/// Quantise-dequantise 32 consecutive K values (one MX block, two NVFP4 blocks) in place into
/// operand values. `gs` is the NVFP4 activation global scale (a_gscale of the expert).
B12X_HD void quant_operand32(float* v, int aq, float gs) {
  if (aq == kANvfp4) {
    for (int h = 0; h < 2; ++h) {
      float* x = v + 16 * h;
      const uint8_t sf = fmt::nvfp4_scale(fmt::block_amax(x, 16), gs);
      const float mult = fmt::nvfp4_multiplier(sf, gs);
      const float dsf = fmt::ue4m3_to_float(sf);
      for (int i = 0; i < 16; ++i)
        x[i] = fmt::mul_rn(e2m1_value(fmt::nvfp4_encode_value(x[i], mult)), dsf);
    }
  } else if (aq == kAMxfp8) {
    const uint8_t s = fmt::mxfp8_scale(fmt::block_amax(v, 32), fmt::MxZeroBlockScale::kOne);
    for (int i = 0; i < 32; ++i)
      v[i] = fmt::mxfp8_decode_value(fmt::mxfp8_encode_value(v[i], s), s);
  } else if (aq == kAMxfp4) {
    const uint8_t s = fmt::mxfp4_scale(fmt::block_amax(v, 32), fmt::MxScaleRule::kCeil,
                                       fmt::MxZeroBlockScale::kOne);
    const float scale = fmt::ue8m0_to_float(s);
    for (int i = 0; i < 32; ++i)
      v[i] = fmt::mul_rn(e2m1_value(fmt::mxfp4_encode_value(v[i], s)), scale);
  }
}

B12X_HD float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/// Activation parameters resolved by the plan (limit only when has_limit).
struct ActParams {
  int kind = kActSilu;
  bool has_limit = false;
  float limit = 0.f;
  float alpha = 1.702f;  // swigluoai
  float beta = 1.0f;     // swigluoai
};

B12X_HD float clamp_sym(float u, float L) { return fminf(fmaxf(u, -L), L); }

/// Gated activation of (gate, up); fp32.
B12X_HD float act_gated(const ActParams& p, float g, float u) {
  switch (p.kind) {
    case kActSitu: {
      const float gc = 4.0f * tanhf(g * 0.25f) * sigmoid(g);
      const float uc = 25.0f * tanhf(u / 25.0f);
      return gc * uc;
    }
    case kActSwigluOai: {
      if (p.has_limit) {
        g = fminf(g, p.limit);
        u = clamp_sym(u, p.limit);
      }
      return (g * sigmoid(p.alpha * g)) * (u + p.beta);
    }
    default: {  // silu
      if (p.has_limit) {
        g = fminf(g, p.limit);
        u = clamp_sym(u, p.limit);
      }
      return (g * sigmoid(g)) * u;
    }
  }
}

B12X_HD float act_relu2(float h) {
  const float r = fmaxf(h, 0.f);
  return r * r;
}

/// Round the activation to the intermediate dtype (BF16, or FP16 for fp16 A16 modes).
B12X_HD float round_inter(float x, bool fp16) {
  return fp16 ? fmt::round_to_fp16(x) : fmt::round_to_bf16(x);
}

}  // namespace b12x::moe::num
