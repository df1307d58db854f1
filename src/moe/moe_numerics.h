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

/// e2m1_value(float_to_e2m1_canonical(y)) without the generic minifloat encoder (whose
/// subnormal / normal branches diverge inside a warp and whose inlined code dominated the decode
/// kernels): round-to-nearest-even on {0, .5, 1, 1.5, 2, 3, 4, 6} as a select chain on |y|, ties
/// to the even code (0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4),
/// |y| > 5 (and Inf) -> 6, NaN -> +6, -0 and small negatives -> +0. Same value bit for bit
/// (tests/gpu/test_moe.cu sweeps it against the encoder).
B12X_HD float e2m1_round(float y) {
  const float a = fabsf(y);
  const float r = a > 5.f      ? 6.f
                  : a >= 3.5f  ? 4.f
                  : a > 2.5f   ? 3.f
                  : a >= 1.75f ? 2.f
                  : a > 1.25f  ? 1.5f
                  : a >= 0.75f ? 1.f
                  : a > 0.25f  ? 0.5f
                               : 0.f;
  if (!(a == a)) return 6.f;
  return y < 0.f && r != 0.f ? -r : r;
}

/// fmt::float_to_e4m3_satfinite; on sm_89+ the cvt.rn.satfinite.e4m3x2.f32 it emulates
/// (tests/gpu/test_formats_cvt.cu checks the two agree on all 2^32 inputs) instead of the
/// generic minifloat encoder's branches.
B12X_HD uint8_t e4m3_satfinite(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint16_t d;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(0.f), "f"(x));
  return static_cast<uint8_t>(d & 0xFFu);
#else
  return fmt::float_to_e4m3_satfinite(x);
#endif
}

/// One activation-quantisation block, decided from its amax: NVFP4 (16 values) keeps the UE4M3
/// byte, the element multiplier and the decoded scale; MXFP8/MXFP4 (32 values) the E8M0 byte
/// (and, MXFP4, its decoded scale). Split out of quant_operand32 so kernels that spread one block
/// over several lanes (amax by shuffles) compute bit for bit what the CPU reference computes.
struct QBlock {
  float mult = 0.f, dsf = 0.f;
  uint8_t s = 0;
};
B12X_HD int quant_block_values(int aq) {
  return aq == kANvfp4 ? 16 : 32;
}
B12X_HD QBlock quant_block(int aq, float amax, float gs) {
  QBlock q;
  if (aq == kANvfp4) {
    // fmt::nvfp4_scale: UE4M3 of gs * amax / 6, satfinite.
    q.s = e4m3_satfinite(fmt::div_rn(fmt::mul_rn(gs, amax), 6.0f)) & 0x7Fu;
    q.mult = fmt::nvfp4_multiplier(q.s, gs);
    q.dsf = fmt::ue4m3_to_float(q.s);
  } else if (aq == kAMxfp8) {
    q.s = fmt::mxfp8_scale(amax, fmt::MxZeroBlockScale::kOne);
  } else if (aq == kAMxfp4) {
    q.s = fmt::mxfp4_scale(amax, fmt::MxScaleRule::kCeil, fmt::MxZeroBlockScale::kOne);
    q.dsf = fmt::ue8m0_to_float(q.s);
  }
  return q;
}
/// For gs >= 0 (the global scales b12x accepts): quant_block(kANvfp4, amax, gs) bit for bit with
/// inv_gs = div_rn(1, gs) given (a per-expert value the decode stream's FC1 computes off its
/// tile-end chain) and no division by 6: for every normal t, q0 = RN(t * RN(1/6)), q1 =
/// RN(fma(RN(fma(-q0, 6, t)), RN(1/6), q0)) is RN(t / 6) (checked on all of them); t below 2^-125
/// encodes to the zero scale either way, and t above 6144 is clamped to it, which saturates to 448
/// as any larger t (Inf) does (NaN stays NaN: 0x7F).
B12X_HD QBlock quant_block_nvfp4(float amax, float gs, float inv_gs) {
  QBlock q;
  float t = fmt::mul_rn(gs, amax);
  t = t > 6144.f ? 6144.f : t;
  constexpr float kSixth = 0x1.555556p-3f;  // RN(1 / 6)
  const float q0 = fmt::mul_rn(t, kSixth);
  q.s = e4m3_satfinite(fmaf(fmaf(-q0, 6.f, t), kSixth, q0)) & 0x7Fu;
  q.dsf = fmt::ue4m3_to_float(q.s);
  // fmt::nvfp4_multiplier(q.s, gs) with div_rn(1, gs) = inv_gs.
  const float denom = fmt::mul_rn(q.dsf, inv_gs);
  if (q.s != 0 && gs != 0.f && denom != 0.f) {
    const float m = fmt::div_rn(1.0f, denom);
    q.mult = m <= 3.4028234663852886e38f ? m : 3.4028234663852886e38f;
  }
  return q;
}
/// The operand value of x inside a block decided by quant_block (x itself for kANone).
/// (The fmt encoders/decoders through e2m1_round and e4m3_satfinite.)
B12X_HD float quant_value(int aq, const QBlock& q, float x) {
  if (aq == kANvfp4)
    return fmt::mul_rn(q.mult == 0.f ? 0.f : e2m1_round(fmt::mul_rn(x, q.mult)), q.dsf);
  if (aq == kAMxfp8)  // mxfp8_decode_value(mxfp8_encode_value(x, s), s)
    return fmt::mul_rn(fmt::e4m3_to_float(e4m3_satfinite(fmt::mul_rn(x, fmt::ue8m0_inverse(q.s)))),
                       fmt::ue8m0_to_float(q.s));
  if (aq == kAMxfp4) return fmt::mul_rn(e2m1_round(fmt::mul_rn(x, fmt::ue8m0_inverse(q.s))), q.dsf);
  return x;
}

/// Quantise-dequantise 32 consecutive K values (one MX block, two NVFP4 blocks) in place into
/// operand values. `gs` is the NVFP4 activation global scale (a_gscale of the expert).
B12X_HD void quant_operand32(float* v, int aq, float gs) {
  if (aq == kANone) return;
  const int bv = quant_block_values(aq);
  for (int b0 = 0; b0 < 32; b0 += bv) {
    const QBlock q = quant_block(aq, fmt::block_amax(v + b0, bv), gs);
    for (int i = 0; i < bv; ++i) v[b0 + i] = quant_value(aq, q, v[b0 + i]);
  }
}

B12X_HD float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

/// Activation parameters resolved by the plan (limit only when has_limit).
struct ActParams {
  int kind = kActSilu;
  bool has_limit = false;
  float limit = 0.f;
  float alpha = 1.702f;  // swigluoai
  float beta = 1.0f;     // swigluoai
};

B12X_HD float clamp_sym(float u, float L) {
  return fminf(fmaxf(u, -L), L);
}

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
