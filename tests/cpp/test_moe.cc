// CPU tests of the fused MoE: the reference against hand-computed cases, the numerics helpers,
// and every rejection of plan_weights / plan (the GPU comparisons are in tests/gpu/test_moe.cu).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "b12x/c_api.h"
#include "b12x/moe.h"
#include "b12x/reference/moe.h"
#include "b12x/status.h"
#include "formats/block.h"
#include "formats/scalar.h"
#include "formats/swizzle.h"
#include "moe/moe_launch.h"
#include "moe/moe_layout.h"
#include "moe/moe_numerics.h"

namespace {

using namespace b12x;
using moe::Activation;
using moe::QuantMode;
using moe::SourceFormat;

/// NVFP4 source weights with every value one E2M1 code and unit block scales (host tensors).
struct Nvfp4Src {
  int64_t E, rows, K;
  std::vector<uint8_t> w, s;
  std::vector<float> gs;
  Nvfp4Src(int64_t E_, int64_t rows_, int64_t K_) : E(E_), rows(rows_), K(K_) {
    w.assign(E * rows * K / 2, 0);
    s.assign(E * fmt::swizzled_scale_bytes(rows, K / 16), 0);
    gs.assign(E, 1.f);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < K / 16; ++c) set_scale(e, r, c, 0x38);  // 1.0
  }
  void set_scale(int64_t e, int64_t r, int64_t c, uint8_t v) {
    s[e * fmt::swizzled_scale_bytes(rows, K / 16) + fmt::swizzled_scale_offset(r, c, K / 16)] = v;
  }
  void set(int64_t e, int64_t r, int64_t k, uint8_t code) {
    uint8_t& b = w[(e * rows + r) * (K / 2) + k / 2];
    b = (k & 1) ? static_cast<uint8_t>((b & 0x0F) | (code << 4))
                : static_cast<uint8_t>((b & 0xF0) | code);
  }
  void fill_row(int64_t e, int64_t r, uint8_t code) {
    for (int64_t k = 0; k < K; ++k) set(e, r, k, code);
  }
  TensorRef values() { return TensorRef::contiguous(w.data(), DType::kUInt8, {E, rows, K / 2}); }
  TensorRef scales() {
    return TensorRef::contiguous(s.data(), DType::kUE4M3,
                                 {E, fmt::pad_to(rows, 128), fmt::pad_to(K / 16, 4)});
  }
  TensorRef global() { return TensorRef::contiguous(gs.data(), DType::kFP32, {E}); }
};

std::vector<uint16_t> bf16_vec(const std::vector<float>& v) {
  std::vector<uint16_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = fmt::float_to_bf16_bits(v[i]);
  return o;
}

TEST(Moe, ReferenceRelu2HandComputed) {
  // E=2, H=32, I=32, relu2 (FC1 has I rows), w4a16 on NVFP4 weights with unit scales.
  const int64_t E = 2, H = 32, I = 32, M = 2, topk = 2;
  Nvfp4Src w1(E, I, H), w2(E, H, I);
  // Expert 0: FC1 row 0 = 0.5 (code 1), other rows 1.0 (code 2); FC2 all 0.5.
  for (int64_t r = 0; r < I; ++r) w1.fill_row(0, r, r == 0 ? 1 : 2);
  for (int64_t r = 0; r < H; ++r) w2.fill_row(0, r, 1);
  // Expert 1: FC1 all -1 (code 0xA) so relu kills everything; FC2 all 6.
  for (int64_t r = 0; r < I; ++r) w1.fill_row(1, r, 0xA);
  for (int64_t r = 0; r < H; ++r) w2.fill_row(1, r, 7);
  w1.gs[0] = 1.f;
  w2.gs[0] = 1.f;
  std::vector<uint16_t> x = bf16_vec(std::vector<float>(M * H, 1.f));
  // token 0: expert 0 (w .5) + expert 1 (w .25); token 1: invalid ids only.
  std::vector<int32_t> ids = {0, 1, -1, 7};
  std::vector<float> wts = {0.5f, 0.25f, 1.f, 1.f};
  std::vector<float> out(M * H, -1.f);
  reference::MoeRefArgs A;
  A.quant_mode = QuantMode::kW4A16;
  A.source_format = SourceFormat::kModeloptNvfp4;
  A.activation = Activation::kRelu2;
  A.a = TensorRef::contiguous(x.data(), DType::kBF16, {M, H});
  A.topk_ids = TensorRef::contiguous(ids.data(), DType::kInt32, {M, topk});
  A.topk_weights = TensorRef::contiguous(wts.data(), DType::kFP32, {M, topk});
  A.weights.w1 = w1.values();
  A.weights.w1_scale = w1.scales();
  A.weights.w1_global_scale = w1.global();
  A.weights.w2 = w2.values();
  A.weights.w2_scale = w2.scales();
  A.weights.w2_global_scale = w2.global();
  A.output = TensorRef::contiguous(out.data(), DType::kFP32, {M, H});
  reference::fused_moe(A);
  // h = [16, 32 x 31] -> relu2 [256, 1024 x 31] -> FC2 0.5 * 32000 = 16000 -> * 0.5 = 8000.
  for (int64_t h = 0; h < H; ++h) {
    EXPECT_EQ(out[h], 8000.f) << h;
    EXPECT_EQ(out[H + h], 0.f) << h;  // no valid route: zero, fully overwritten
  }
  // Global scales and block scales multiply: w2 global 0.25, one FC2 block scale 2.0 (0x40).
  w2.gs[0] = 0.25f;
  w2.set_scale(0, 3, 1, 0x40);  // row 3, K block 1 (values 16..31) -> scale 2
  reference::fused_moe(A);
  // row 3: 0.5*(256 + 15*1024)*1 + 0.5*(16*1024)*2 = 7808 + 16384 = 24192, x .25 x .5 = 3024
  EXPECT_EQ(out[3], 3024.f);
  EXPECT_EQ(out[4], 2000.f);
}

TEST(Moe, ReferenceSiluLayoutsAgree) {
  // The same logical expert stored as w13 ([up; gate]) and as w31 ([gate; up]).
  const int64_t E = 1, H = 32, I = 32, M = 1;
  Nvfp4Src a13(E, 2 * I, H), a31(E, 2 * I, H), w2(E, H, I);
  for (int64_t f = 0; f < I; ++f) {
    const uint8_t up = static_cast<uint8_t>(1 + f % 7), gate = static_cast<uint8_t>(8 + f % 8);
    a13.fill_row(0, f, up);
    a13.fill_row(0, I + f, gate);
    a31.fill_row(0, f, gate);
    a31.fill_row(0, I + f, up);
  }
  for (int64_t r = 0; r < H; ++r) w2.fill_row(0, r, static_cast<uint8_t>(r % 16));
  std::vector<float> xf(H);
  for (int64_t i = 0; i < H; ++i) xf[i] = 0.03125f * static_cast<float>(i % 5) - 0.05f;
  std::vector<uint16_t> x = bf16_vec(xf);
  std::vector<int64_t> ids = {0};
  std::vector<float> wts = {1.f};
  std::vector<float> o13(H), o31(H);
  reference::MoeRefArgs A;
  A.quant_mode = QuantMode::kW4A16;
  A.activation = Activation::kSilu;
  A.a = TensorRef::contiguous(x.data(), DType::kBF16, {M, H});
  A.topk_ids = TensorRef::contiguous(ids.data(), DType::kInt64, {M, 1});
  A.topk_weights = TensorRef::contiguous(wts.data(), DType::kFP32, {M, 1});
  A.weights.w2 = w2.values();
  A.weights.w2_scale = w2.scales();
  A.weights.w2_global_scale = w2.global();
  A.weights.w1_global_scale = a13.global();
  A.w13_layout = moe::W13Layout::kW13;
  A.weights.w1 = a13.values();
  A.weights.w1_scale = a13.scales();
  A.output = TensorRef::contiguous(o13.data(), DType::kFP32, {M, H});
  reference::fused_moe(A);
  A.w13_layout = moe::W13Layout::kW31;
  A.weights.w1 = a31.values();
  A.weights.w1_scale = a31.scales();
  A.output = TensorRef::contiguous(o31.data(), DType::kFP32, {M, H});
  reference::fused_moe(A);
  double nz = 0;
  for (int64_t h = 0; h < H; ++h) {
    EXPECT_EQ(o13[h], o31[h]) << h;
    nz += std::abs(o13[h]);
  }
  EXPECT_GT(nz, 0.0);
  // Hand check of one output: recompute g, u for every feature.
  double expect = 0;
  for (int64_t f = 0; f < I; ++f) {
    double g = 0, u = 0;
    for (int64_t k = 0; k < H; ++k) {
      const float xv = fmt::bf16_bits_to_float(x[k]);
      g += xv * fmt::e2m1_to_float(static_cast<uint8_t>(8 + f % 8));
      u += xv * fmt::e2m1_to_float(static_cast<uint8_t>(1 + f % 7));
    }
    const float y = fmt::round_to_bf16(static_cast<float>(g / (1 + std::exp(-g)) * u));
    expect += y * fmt::e2m1_to_float(static_cast<uint8_t>(5 % 16));
  }
  EXPECT_NEAR(o13[5], expect, 1e-5 * std::abs(expect) + 1e-7);
}

TEST(Moe, ReferenceGgmlQ8AndMxfp4HandComputed) {
  // relu2, E=1, H=I=32, x = 1, one route with weight 0.5.
  const int64_t H = 32, I = 32;
  std::vector<uint16_t> x = bf16_vec(std::vector<float>(H, 1.f));
  std::vector<int32_t> ids = {0};
  std::vector<float> wts = {0.5f}, out(H);
  reference::MoeRefArgs A;
  A.activation = Activation::kRelu2;
  A.a = TensorRef::contiguous(x.data(), DType::kBF16, {1, H});
  A.topk_ids = TensorRef::contiguous(ids.data(), DType::kInt32, {1, 1});
  A.topk_weights = TensorRef::contiguous(wts.data(), DType::kFP32, {1, 1});
  A.output = TensorRef::contiguous(out.data(), DType::kFP32, {1, H});
  // GGML Q8_0: FC1 d = 1, qs = 1 (row 0) or 2; FC2 d = 0.5, qs = 1.
  //   h = [32, 64 x 31] -> relu2 [1024, 4096 x 31] -> FC2 0.5 * 128000 = 64000 -> x 0.5 = 32000
  std::vector<uint8_t> q1(I * 34), q2(H * 34);
  for (int64_t r = 0; r < I; ++r) {
    q1[r * 34] = 0x00;
    q1[r * 34 + 1] = 0x3C;  // fp16 1.0
    for (int j = 0; j < 32; ++j) q1[r * 34 + 2 + j] = r == 0 ? 1 : 2;
  }
  for (int64_t r = 0; r < H; ++r) {
    q2[r * 34] = 0x00;
    q2[r * 34 + 1] = 0x38;  // fp16 0.5
    for (int j = 0; j < 32; ++j) q2[r * 34 + 2 + j] = 1;
  }
  A.quant_mode = QuantMode::kGgmlA16;
  A.source_format = SourceFormat::kGgml;
  A.weights.w1 = TensorRef::contiguous(q1.data(), DType::kQ8_0, {1, I, H});
  A.weights.w2 = TensorRef::contiguous(q2.data(), DType::kQ8_0, {1, H, I});
  reference::fused_moe(A);
  for (int64_t h = 0; h < H; ++h) EXPECT_EQ(out[h], 32000.f) << h;
  // MXFP4 (w4a16): FC1 code 2 (1.0) x scale byte 126 (0.5), row 0 code 1 (0.5) x 0.5;
  // FC2 code 4 (2.0) x scale 125 (0.25).
  //   h = [8, 16 x 31] -> relu2 [64, 256 x 31] -> FC2 0.5 * 8000 = 4000 -> x 0.5 = 2000
  std::vector<uint8_t> m1(I * H / 2), m2(H * I / 2), s1(I * H / 32, 126), s2(H * I / 32, 125);
  for (int64_t r = 0; r < I; ++r)
    for (int64_t k = 0; k < H / 2; ++k) m1[r * H / 2 + k] = r == 0 ? 0x11 : 0x22;
  for (auto& b : m2) b = 0x44;
  A.quant_mode = QuantMode::kW4A16;
  A.source_format = SourceFormat::kFp4E8M0K32;
  A.weights.w1 = TensorRef::contiguous(m1.data(), DType::kUInt8, {1, I, H / 2});
  A.weights.w2 = TensorRef::contiguous(m2.data(), DType::kUInt8, {1, H, I / 2});
  A.weights.w1_scale = TensorRef::contiguous(s1.data(), DType::kUE8M0, {1, I, H / 32});
  A.weights.w2_scale = TensorRef::contiguous(s2.data(), DType::kUE8M0, {1, H, I / 32});
  reference::fused_moe(A);
  for (int64_t h = 0; h < H; ++h) EXPECT_EQ(out[h], 2000.f) << h;
  // Router weight on the input (A16): the FC1 output is scaled before relu2 and the combine
  // uses weight 1: h = [4, 8 x 31] -> [16, 64 x 31] -> 0.5 * 2000 = 1000.
  A.apply_router_weight_on_input = true;
  reference::fused_moe(A);
  for (int64_t h = 0; h < H; ++h) EXPECT_EQ(out[h], 1000.f) << h;
}

TEST(Moe, NumericsActivationQuantisers) {
  // NVFP4 with gs = 1: block amax 6 -> sf = 1.0, values snap to the E2M1 grid (RNE).
  float v[32];
  for (int i = 0; i < 32; ++i) v[i] = 0.f;
  v[0] = 6.f;
  v[1] = 1.25f;   // tie between 1 and 1.5 -> 1 (even)
  v[2] = -2.6f;   // -> -3
  v[16] = 0.75f;  // second block: amax .75 -> sf = ue4m3(.125) = .125, values /.125 = 6 -> 6*.125
  b12x::moe::num::quant_operand32(v, b12x::moe::num::kANvfp4, 1.f);
  EXPECT_EQ(v[0], 6.f);
  EXPECT_EQ(v[1], 1.f);
  EXPECT_EQ(v[2], -3.f);
  EXPECT_EQ(v[16], 0.75f);
  // MXFP8: amax 448 -> scale byte 127, values e4m3-rounded.
  for (int i = 0; i < 32; ++i) v[i] = 0.f;
  v[0] = 448.f;
  v[5] = 17.f;  // e4m3 spacing 2 in [16,32): 17 -> 16 (tie to even)
  b12x::moe::num::quant_operand32(v, b12x::moe::num::kAMxfp8, 1.f);
  EXPECT_EQ(v[0], 448.f);
  EXPECT_EQ(v[5], 16.f);
  // MXFP4 (ceil rule): amax 12 -> scale 2^1, 5 -> 5/2 = 2.5 -> 2 (tie to even) -> 4.
  for (int i = 0; i < 32; ++i) v[i] = 0.f;
  v[0] = 12.f;
  v[1] = 5.f;
  b12x::moe::num::quant_operand32(v, b12x::moe::num::kAMxfp4, 1.f);
  EXPECT_EQ(v[0], 12.f);
  EXPECT_EQ(v[1], 4.f);
  // Activations.
  b12x::moe::num::ActParams p;
  p.kind = b12x::moe::num::kActSilu;
  EXPECT_NEAR(b12x::moe::num::act_gated(p, 1.f, 2.f), 2.0 / (1 + std::exp(-1.0)), 1e-6);
  p.has_limit = true;
  p.limit = 0.5f;
  EXPECT_NEAR(b12x::moe::num::act_gated(p, 1.f, -2.f), 0.5 / (1 + std::exp(-0.5)) * -0.5, 1e-6);
  p.kind = b12x::moe::num::kActSwigluOai;
  p.limit = 7.f;
  p.alpha = 1.702f;
  p.beta = 1.f;
  EXPECT_NEAR(b12x::moe::num::act_gated(p, 9.f, 8.f), 7.0 / (1 + std::exp(-1.702 * 7)) * 8.0, 1e-4);
  p.kind = b12x::moe::num::kActSitu;
  EXPECT_NEAR(b12x::moe::num::act_gated(p, 2.f, 30.f),
              4 * std::tanh(0.5) / (1 + std::exp(-2.0)) * 25 * std::tanh(1.2), 1e-4);
  EXPECT_EQ(b12x::moe::num::act_relu2(-3.f), 0.f);
  EXPECT_EQ(b12x::moe::num::act_relu2(3.f), 9.f);
}

TEST(Moe, Fp4RepackAndFragmentDecodeRoundTrip) {
  // Emulates the device repack (fp4_word_k) and the kernel's per-step decode (word J/2 of the
  // quad's 16 bytes, pairs 2(J%2) and 2(J%2)+1, times 2^126 / 2^14) for every code.
  std::mt19937 gen(7);
  const int K = 256;
  std::vector<uint8_t> src(K / 2);
  for (auto& b : src) b = static_cast<uint8_t>(gen());
  auto code = [&](int64_t k) { return (src[k / 2] >> (4 * (k & 1))) & 0xF; };
  std::vector<uint32_t> words(K / 8);
  for (int c = 0; c < K / 128; ++c)
    for (int t = 0; t < 4; ++t)
      for (int w = 0; w < 4; ++w) {
        uint32_t word = 0;
        for (int i = 0; i < 8; ++i)
          word |= moe::layout::fp4_place(
              static_cast<uint32_t>(code(moe::layout::fp4_word_k(c, t, w, i))), i);
        words[c * 16 + t * 4 + w] = word;
      }
  const float k2p126 = std::ldexp(1.f, 126), k2p14 = std::ldexp(1.f, 14);
  int checked = 0;
  for (int c = 0; c < K / 128; ++c)
    for (int t = 0; t < 4; ++t)
      for (int j = 0; j < 8; ++j) {
        const uint32_t w = words[c * 16 + t * 4 + j / 2];
        uint32_t lo, hi, lo16, hi16;
        if (j % 2 == 0) {
          lo = moe::layout::fp4x2_bf16_bits<0>(w);
          hi = moe::layout::fp4x2_bf16_bits<1>(w);
          lo16 = moe::layout::fp4x2_fp16_bits<0>(w);
          hi16 = moe::layout::fp4x2_fp16_bits<1>(w);
        } else {
          lo = moe::layout::fp4x2_bf16_bits<2>(w);
          hi = moe::layout::fp4x2_bf16_bits<3>(w);
          lo16 = moe::layout::fp4x2_fp16_bits<2>(w);
          hi16 = moe::layout::fp4x2_fp16_bits<3>(w);
        }
        const int64_t k0 = 128 * c + 16 * j + 4 * t;
        const uint32_t bb[4] = {lo & 0xFFFF, lo >> 16, hi & 0xFFFF, hi >> 16};
        const uint32_t hh[4] = {lo16 & 0xFFFF, lo16 >> 16, hi16 & 0xFFFF, hi16 >> 16};
        for (int q = 0; q < 4; ++q) {
          const float want = fmt::e2m1_to_float(static_cast<uint8_t>(code(k0 + q)));
          EXPECT_EQ(fmt::bf16_bits_to_float(static_cast<uint16_t>(bb[q])) * k2p126, want)
              << "k=" << k0 + q;
          EXPECT_EQ(fmt::fp16_bits_to_float(static_cast<uint16_t>(hh[q])) * k2p14, want)
              << "k=" << k0 + q;
          ++checked;
        }
      }
  EXPECT_EQ(checked, K);
  for (uint32_t c = 0; c < 16; ++c)
    EXPECT_EQ(moe::num::e2m1_value(c), fmt::e2m1_to_float(static_cast<uint8_t>(c))) << c;
  // Prepared NVFP4 scales (E5M3): every finite UE4M3 code round-trips, through the fp32 decode
  // and through the decode stream's BF16 splat of s * 2^118 (both halves).
  for (uint32_t b = 0; b < 127; ++b) {
    const float want = fmt::ue4m3_to_float(static_cast<uint8_t>(b));
    const uint32_t p = moe::layout::e5m3_from_ue4m3(b);
    EXPECT_EQ(moe::layout::e5m3_value(p), want) << b;
    if (b == 0) continue;
    const uint32_t s2 = moe::layout::e5m3_bf16x2_2p118(p);
    EXPECT_EQ(fmt::bf16_bits_to_float(static_cast<uint16_t>(s2 & 0xFFFF)),
              want * std::ldexp(1.f, 118))
        << b;
    EXPECT_EQ(s2 >> 16, s2 & 0xFFFF) << b;
    // The fp32 kernel decode: (p << 20) + (117 << 23).
    EXPECT_EQ(fmt::f32_from_bits((p << 20) + (117u << 23)), want) << b;
  }
  // Row map: gated groups of 16 gate rows then 16 up rows; w13 = [up; gate], w31 = [gate; up].
  EXPECT_EQ(moe::layout::prep_row_source(true, true, 40, 80, 0), 40);    // gate f0 in w13
  EXPECT_EQ(moe::layout::prep_row_source(true, true, 40, 80, 16), 0);    // up f0 in w13
  EXPECT_EQ(moe::layout::prep_row_source(true, false, 40, 80, 0), 0);    // gate f0 in w31
  EXPECT_EQ(moe::layout::prep_row_source(true, false, 40, 80, 49), 57);  // up f17 in w31
  EXPECT_EQ(moe::layout::prep_row_source(true, false, 40, 80, 72), -1);  // f40: padding
  EXPECT_EQ(moe::layout::prep_row_source(false, false, 40, 40, 39), 39);
  EXPECT_EQ(moe::layout::prep_row_source(false, false, 40, 40, 40), -1);
}

// Rejections go through the C ABI: C++ exceptions do not cross the library boundary (libb12x
// links its C++ runtime privately), statuses and messages do.
b12x_moe_weights_plan_desc base_desc() {
  b12x_moe_weights_plan_desc d{};
  d.quant_mode = B12X_MOE_NVFP4;
  d.source_format = B12X_MOE_SRC_MODELOPT_NVFP4;
  d.activation = B12X_MOE_ACT_SILU;
  d.params_dtype = B12X_DTYPE_BF16;
  d.num_experts = 8;
  d.hidden_size = 256;
  d.intermediate_size = 128;
  d.w13_layout = B12X_MOE_LAYOUT_W31;
  d.ggml_w1_dtype = B12X_DTYPE_Q8_0;
  d.ggml_w2_dtype = B12X_DTYPE_Q8_0;
  d.ep_size = 1;
  return d;
}

/// Status and message of plan_weights for a descriptor ("" when accepted).
std::string plan_weights_error(const b12x_moe_weights_plan_desc& d, b12x_status* code = nullptr) {
  int64_t bytes = 0;
  int32_t discards = 0;
  const b12x_status st = b12x_moe_plan_weights(&d, &bytes, &discards);
  if (code) *code = st;
  if (st == B12X_OK) {
    EXPECT_GT(bytes, 0);
    EXPECT_EQ(discards, 1);
    return "";
  }
  return b12x_last_error();
}

void expect_reject(const b12x_moe_weights_plan_desc& d, const std::string& needle,
                   b12x_status want = B12X_ERROR_INVALID_ARGUMENT) {
  b12x_status st = 0;
  const std::string e = plan_weights_error(d, &st);
  EXPECT_EQ(st, want) << e;
  EXPECT_NE(e.find(needle), std::string::npos) << "message: '" << e << "' lacks '" << needle << "'";
}

TEST(Moe, PlanWeightsRejections) {
  EXPECT_EQ(plan_weights_error(base_desc()), "");
  auto a = base_desc();
  a.has_expert_bias = 1;
  expect_reject(a, "expert biases are not supported", B12X_ERROR_UNSUPPORTED);
  a = base_desc();
  a.ep_size = 2;
  expect_reject(a, "expert parallelism is not supported", B12X_ERROR_UNSUPPORTED);
  a = base_desc();
  a.has_expert_map = 1;
  expect_reject(a, "expert maps are not supported", B12X_ERROR_UNSUPPORTED);
  a = base_desc();
  a.has_lora = 1;
  expect_reject(a, "LoRA is not supported", B12X_ERROR_UNSUPPORTED);
  a = base_desc();
  a.params_dtype = B12X_DTYPE_FP32;
  expect_reject(a, "params_dtype=fp32 is not supported (supported: bf16, fp16)");
  a = base_desc();
  a.quant_mode = B12X_MOE_W4A8_MX;
  expect_reject(a, "source_format=modelopt_nvfp4 with quant_mode=w4a8_mx is unsupported");
  a = base_desc();
  a.quant_mode = B12X_MOE_MXFP4;
  a.source_format = B12X_MOE_SRC_FP4_E8M0_K32;
  a.intermediate_size = 48;
  expect_reject(a, "intermediate_size=48 is not a multiple of 32 (MXFP4");
  a = base_desc();
  a.quant_mode = B12X_MOE_W4A8_MX;
  a.source_format = B12X_MOE_SRC_FP4_E8M0_K32;
  a.hidden_size = 384;
  expect_reject(a, "hidden_size=384 is not a multiple of 256 (w4a8_mx");
  a.hidden_size = 512;
  a.activation = B12X_MOE_ACT_RELU2;
  expect_reject(a, "activation=relu2 is not supported with w4a8_mx (supported: silu, situ)");
  a = base_desc();
  a.quant_mode = B12X_MOE_W4A8_NVFP4;
  a.activation = B12X_MOE_ACT_SWIGLUOAI_UNINTERLEAVE;
  expect_reject(a, "swigluoai_uninterleave is not supported with quant_mode=w4a8_nvfp4");
  a = base_desc();
  a.quant_mode = B12X_MOE_GGML_A16;
  a.source_format = B12X_MOE_SRC_GGML;
  a.activation = B12X_MOE_ACT_SITU;
  expect_reject(a, "activation=situ is not supported with ggml_a16 (supported: silu, relu2)");
  a.activation = B12X_MOE_ACT_SILU;
  a.ggml_w2_dtype = B12X_DTYPE_IQ2_XS;
  a.intermediate_size = 384;
  expect_reject(a, "does not keep whole iq2_xs blocks of 256 values");
  a.ggml_w2_dtype = B12X_DTYPE_BF16;
  expect_reject(a, "ggml_w2_dtype=bf16 is not supported");
  a = base_desc();
  a.hidden_size = 80;
  expect_reject(a, "must be multiples of 32");
  a = base_desc();
  a.num_experts = 0;
  expect_reject(a, "num_experts=0");
  a = base_desc();
  a.quant_mode = 9;
  expect_reject(a, "quant_mode=9");
  // The C++ validation entry point gives the same reasons without throwing.
  moe::WeightsPlanArgs wa;
  wa.quant_mode = QuantMode::kW4A8Nvfp4;
  wa.activation = Activation::kSwigluOai;
  wa.num_experts = 4;
  wa.hidden_size = 256;
  wa.intermediate_size = 128;
  EXPECT_NE(moe::weights_support_reason(wa).find("SwiGLU-OAI is not available"), std::string::npos);
  wa.activation = Activation::kSilu;
  EXPECT_EQ(moe::weights_support_reason(wa), "");
}

std::string plan_error(const b12x_moe_weights_plan_desc& d, const b12x_moe_caps& c,
                       int64_t* scratch = nullptr) {
  b12x_moe_plan p = nullptr;
  const b12x_status st = b12x_moe_plan_create(&d, &c, &p);
  if (st != B12X_OK) return b12x_last_error();
  if (scratch) EXPECT_EQ(b12x_moe_plan_scratch_bytes(p, scratch), B12X_OK);
  EXPECT_EQ(b12x_moe_plan_destroy(p), B12X_OK);
  return "";
}

TEST(Moe, PlanRejectionsAndScratch) {
  const auto d = base_desc();
  b12x_moe_caps c{};
  c.max_tokens = 16;
  c.num_topk = 4;
  c.swiglu_limit = c.swiglu_alpha = c.swiglu_beta = NAN;
  c.regime = -1;
  int64_t scratch = 0;
  EXPECT_EQ(plan_error(d, c, &scratch), "");
  // Decode stream (FP4, nvfp4): per route a quantised FC1 input row (H BF16) and an
  // intermediate row (I BF16); the combine runs in shared memory (no fp32 route rows).
  EXPECT_GE(scratch, 16 * 4 * (256 * 2 + 128 * 2));
  EXPECT_EQ(scratch % 256, 0);
  char impl[64], exec[64];
  ASSERT_EQ(b12x_moe_plan_execution(&d, &c, 16, impl, 64, exec, 64), B12X_OK);
  EXPECT_STREQ(exec, "decode_tn8");
  ASSERT_EQ(b12x_moe_plan_execution(&d, &c, 1024, impl, 64, exec, 64), B12X_OK);
  EXPECT_STREQ(exec, "grouped_tn64");
  EXPECT_STREQ(impl, "b12x_moe_mma_sync");
  auto cc = c;
  cc.apply_router_weight_on_input = 1;
  EXPECT_NE(plan_error(d, cc).find("apply_router_weight_on_input is only"), std::string::npos);
  cc = c;
  cc.swiglu_alpha = 1.5f;
  EXPECT_NE(plan_error(d, cc).find("swiglu_alpha/swiglu_beta are only"), std::string::npos);
  cc = c;
  cc.num_topk = 0;
  EXPECT_NE(plan_error(d, cc).find("num_topk=0"), std::string::npos);
  cc = c;
  cc.max_tokens = 200;
  cc.regime = 1;
  EXPECT_NE(plan_error(d, cc).find("regime=1 (decode) needs max_tokens*num_topk <= 1024 and "
                                   "max_tokens <= 128"),
            std::string::npos);
  // FP4 weights: the decode stream takes up to 1024 routes when forced (the wide routing).
  cc.max_tokens = 128;
  EXPECT_EQ(plan_error(d, cc), "");
  cc.max_tokens = 129;
  EXPECT_NE(plan_error(d, cc).find("max_tokens <= 128"), std::string::npos);
  auto dr = d;
  dr.activation = B12X_MOE_ACT_RELU2;
  cc = c;
  cc.swiglu_limit = 7.f;
  EXPECT_NE(plan_error(dr, cc).find("swiglu_limit=7 is not supported with activation=relu2"),
            std::string::npos);
  // Bind/run reject NULLs with a message instead of crashing.
  EXPECT_EQ(b12x_moe_run(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr),
            B12X_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(b12x_last_error()).find("plan is NULL"), std::string::npos);
  // Names (pure functions, no exceptions involved on success).
  EXPECT_EQ(moe::quant_mode_from_name("w4a8_mx"), QuantMode::kW4A8Mx);
  EXPECT_EQ(moe::activation_from_name("relu2_no_mul"), Activation::kRelu2);
  EXPECT_EQ(moe::w13_layout_from_name("gate_up"), moe::W13Layout::kW31);
  EXPECT_STREQ(moe::quant_mode_name(QuantMode::kGgmlA16), "ggml_a16");
}

TEST(Moe, DecodeKnobsAreReadByPlan) {
  // The decode stream's measurement knobs are read when a plan is made (read_decode_knobs), never
  // by run(): a supported value is taken, an unsupported one falls back to the default, and a knob
  // the plan does not use (A16-only knobs in a quantised plan, every knob outside the decode
  // stream) keeps its default (each case is logged at B12X_LOG_LEVEL >= 1).
  using moe::detail::read_decode_knobs;
  const moe::DecodeKnobs def;
  const moe::DecodeKnobs unset = read_decode_knobs(true, moe::num::kANvfp4);
  EXPECT_EQ(unset.fc1_wide, def.fc1_wide);
  EXPECT_EQ(unset.a16_gate, -1);
  struct Set {
    const char* name;
    const char* value;
  };
  const Set set[] = {{"B12X_MOE_FC1_KG", "2"},     {"B12X_MOE_FC1_WIDE", "3"},
                     {"B12X_MOE_FC2_STAGES", "5"}, {"B12X_MOE_A16_GATE", "3"},
                     {"B12X_MOE_FC1_GROUPS", "7"}, {"B12X_MOE_Q_EARLY", "1"},
                     {"B12X_MOE_FC2_SPLIT", "9"},  {"B12X_MOE_FC1_FINE", "2"}};
  for (const Set& v : set) ASSERT_EQ(setenv(v.name, v.value, 1), 0);
  const moe::DecodeKnobs nv = read_decode_knobs(true, moe::num::kANvfp4);
  const moe::DecodeKnobs a16 = read_decode_knobs(true, moe::num::kANone);
  const moe::DecodeKnobs grouped = read_decode_knobs(false, moe::num::kANvfp4);
  for (const Set& v : set) unsetenv(v.name);
  EXPECT_EQ(nv.fc1_kg, 2);
  EXPECT_EQ(nv.fc1_wide, 3);
  EXPECT_EQ(nv.fc1_groups, 7);
  EXPECT_EQ(nv.q_early, 1);
  EXPECT_EQ(nv.fc1_fine, 2);
  EXPECT_EQ(grouped.fc1_fine, def.fc1_fine);
  EXPECT_EQ(nv.fc2_stages, def.fc2_stages);  // 5 is not a shallow ring depth
  EXPECT_EQ(nv.fc2_split, def.fc2_split);    // 9 > 4
  EXPECT_EQ(nv.a16_gate, -1);                // A16-only knob in an nvfp4 plan
  EXPECT_EQ(a16.a16_gate, 3);
  EXPECT_EQ(a16.fc1_kg, 2);
  EXPECT_EQ(grouped.fc1_kg, def.fc1_kg);  // no decode stream
  // Session 21 removed the 4- and 8-group FC1 instances: FC1_KG=4 falls back to the rule.
  ASSERT_EQ(setenv("B12X_MOE_FC1_KG", "4", 1), 0);
  EXPECT_EQ(read_decode_knobs(true, moe::num::kANvfp4).fc1_kg, def.fc1_kg);
  unsetenv("B12X_MOE_FC1_KG");
  EXPECT_EQ(grouped.fc1_wide, def.fc1_wide);
  // The FC2 split's bound and rule take the forced split from the knobs.
  EXPECT_EQ(moe::detail::decode_fc2_split_bound(8, 3), 3);
  EXPECT_EQ(moe::detail::decode_fc2_split(64, 384, 132, 1), 1);
  EXPECT_TRUE(moe::detail::decode_a16_copy_rows(def));
  // FC2 split row blocks as clusters (decode_fc2_cluster): by default split 2 of the 32-row FC2
  // on SM90 only.
  EXPECT_EQ(def.fc2_dsmem, 1);
  constexpr int kFitAll = 0x1c;  // Plan::fc2_cluster_fit: clusters of 2, 3 and 4 fit
  EXPECT_TRUE(moe::detail::decode_fc2_cluster(def, 2, 9, 32, kFitAll));
  EXPECT_FALSE(moe::detail::decode_fc2_cluster(def, 4, 9, 32, kFitAll));
  EXPECT_FALSE(moe::detail::decode_fc2_cluster(def, 1, 9, 32, kFitAll));
  EXPECT_FALSE(moe::detail::decode_fc2_cluster(def, 2, 8, 32, kFitAll));
  EXPECT_FALSE(moe::detail::decode_fc2_cluster(def, 2, 12, 32, kFitAll));
  moe::DecodeKnobs cl0 = def, cl2 = def;
  cl0.fc2_dsmem = 0;
  cl2.fc2_dsmem = 2;
  EXPECT_FALSE(moe::detail::decode_fc2_cluster(cl0, 2, 9, 32, kFitAll));
  EXPECT_TRUE(moe::detail::decode_fc2_cluster(cl2, 4, 12, 32, kFitAll));
  // A device where the plan's occupancy query found no room for the cluster (Plan::fc2_cluster_fit
  // without the split's bit: a MIG slice, a GPC with too few free SMs) takes the partials.
  EXPECT_FALSE(moe::detail::decode_fc2_cluster(def, 2, 9, 32, 0));
  EXPECT_FALSE(moe::detail::decode_fc2_cluster(cl2, 4, 9, 32, 0x0c));
  EXPECT_TRUE(moe::detail::decode_fc2_cluster(cl2, 3, 9, 32, 0x0c));
  // Which splits plan asks about.
  EXPECT_EQ(moe::detail::decode_fc2_cluster_max_split(def, 9), 2);
  EXPECT_EQ(moe::detail::decode_fc2_cluster_max_split(def, 12), 0);
  EXPECT_EQ(moe::detail::decode_fc2_cluster_max_split(def, 8), 0);
  EXPECT_EQ(moe::detail::decode_fc2_cluster_max_split(cl0, 9), 0);
  EXPECT_EQ(moe::detail::decode_fc2_cluster_max_split(cl2, 12), 4);
  EXPECT_FALSE(moe::detail::decode_fc2_cluster(cl2, 4, 8, 32, kFitAll));
  EXPECT_FALSE(
      moe::detail::decode_fc2_cluster(cl2, 2, 9, 16, kFitAll));  // 16-row FC2: the partials
}

TEST(Moe, ChunkTilesAndOffsets) {
  // plan_weights prepares FP4 weights in 32-row chunk tiles, always (session 25 removed the
  // row-major measurement knobs B12X_MOE_SCALE_TILED / B12X_MOE_VALUE_TILED), GGML weights never;
  // plan() refuses an FP4 weight plan without them (the decode stream's BF16 refills take the
  // tiles' constant strides).
  moe::WeightsPlanArgs wa;
  wa.quant_mode = QuantMode::kNvfp4;
  wa.source_format = SourceFormat::kModeloptNvfp4;
  wa.num_experts = 4;
  wa.hidden_size = 256;
  wa.intermediate_size = 96;
  const moe::WeightsPlan p = moe::plan_weights(wa);
  EXPECT_NE(p.describe().find("fp4_chunk_tiles"), std::string::npos);
  moe::WeightsPlanArgs wg = wa;
  wg.quant_mode = QuantMode::kGgmlA16;
  wg.source_format = SourceFormat::kGgml;
  const moe::WeightsPlan pg = moe::plan_weights(wg);
  EXPECT_EQ(pg.describe().find("fp4_chunk_tiles"), std::string::npos);
  // Chunk tiles of 128 rows x 384 values (UE4M3: 3 chunks of 8 bytes per row): every (row,
  // chunk) maps to its own 8 bytes inside the expert; a 32-row group's chunk is contiguous.
  moe::detail::WeightView w;
  w.rows_pad = 128;
  w.scales_row_stride = 8;
  w.scales_group_stride = 32 * 3 * 8;
  w.scales_k_stride = 32 * 8;
  std::vector<int> hit(128 * 3, 0);
  for (int r = 0; r < 128; ++r)
    for (int kk = 0; kk < 3; ++kk) {
      const int64_t off = moe::detail::scale_row_offset(w, r) + kk * w.scales_k_stride;
      ASSERT_EQ(off % 8, 0);
      ASSERT_LT(off / 8, 128 * 3);
      ++hit[off / 8];
      if (r % 32 != 0)
        EXPECT_EQ(off, moe::detail::scale_row_offset(w, r - 1) + kk * w.scales_k_stride + 8);
    }
  for (int h : hit) EXPECT_EQ(h, 1);
}

TEST(Moe, DecodeFc1GroupsRuleOnTheModelShapes) {
  // FC1 warp groups (decode_fc1_groups) on a 132-SM H200, one row warp: two groups where a tile
  // has <= 16 sub-chunks and a CTA walks >= 4 tiles (Qwen3-30B, 48 row blocks: M = 4 / 8), and
  // (session 16) where it has 17-32 and a CTA walks >= 3 up to 128 routes (Qwen3.5-TP4, 64 row
  // blocks: M = 2 / 4 / 8); session 18, with last-warp tile ends, also
  // where it has > 32 and a CTA walks >= 2 up to 128 routes (DeepSeek-TP4, 56 sub-chunks, 32 row
  // blocks: M = 4 / 8 / 16; MiniMax, 48, 192 row blocks: M = 1-16), else one group as before.
  struct Shape {
    const char* name;
    int row_blocks, topk, k_chunks;
    int groups[5];  // M = 1, 2, 4, 8, 16
  };
  const Shape shapes[] = {{"qwen3-30b", 48, 8, 16, {1, 1, 2, 2, 2}},
                          {"deepseek-tp4", 32, 8, 56, {1, 1, 2, 2, 2}},
                          {"minimax", 192, 4, 48, {2, 2, 2, 2, 2}},
                          {"qwen3.5-tp4", 64, 10, 32, {1, 2, 2, 2, 1}}};
  const moe::DecodeKnobs def;
  const int ms[5] = {1, 2, 4, 8, 16};
  for (const Shape& s : shapes)
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ(
          moe::detail::decode_fc1_groups(def, ms[i] * s.topk, s.row_blocks, 132, 1, s.k_chunks),
          s.groups[i])
          << s.name << " M=" << ms[i];
}

TEST(Moe, DecodeFc1LastWarpEndsRunInTheGpuTestShapes) {
  // MoeGpu.DecodeStreamFc1LastWarpTileEnds checks the last-warp instance against the reference,
  // so it proves nothing unless its launches take it: its forced shapes (KG=2,
  // GROUPS=2, BAL=0, WIDE=0; nvfp4 SiLU 16 row blocks / 64 routes / 16 sub-chunks, MXFP4 ReLU2 8 /
  // 64 / 8, w4a16 ReLU2 4 / 72 / 3) and its default long-tile case (96 row blocks, 16 routes, 33
  // sub-chunks) get two unbalanced 8-warp groups, and decode_fc1_last 1.
  moe::DecodeKnobs forced;
  forced.fc1_kg = 2;
  forced.fc1_groups = 2;
  forced.fc1_bal = 0;
  forced.fc1_wide = 0;
  const moe::DecodeKnobs def;
  struct Shape {
    const moe::DecodeKnobs* k;
    int row_blocks, routes, k_chunks;
  };
  const Shape shapes[] = {
      {&forced, 16, 64, 16}, {&forced, 8, 64, 8}, {&forced, 4, 72, 3}, {&def, 96, 16, 33}};
  for (const Shape& s : shapes) {
    const int g = moe::detail::decode_fc1_groups(*s.k, s.routes, s.row_blocks, 132, 1, s.k_chunks);
    EXPECT_EQ(g, 2) << s.row_blocks << " row blocks";
    const int w =
        moe::detail::decode_fc1_warps(*s.k, s.routes, s.row_blocks, 132, 1, g, s.k_chunks);
    EXPECT_EQ(moe::detail::decode_fc1_last(false, 1, w, g, 0), 1) << s.row_blocks;
  }
  // Finer grids for the last-warp FC1 on long tiles (B12X_MOE_FC1_FINE): DeepSeek-TP4 (56
  // sub-chunks, one-wave Y = 12) at 32 / 64 routes, ~2 (1) or ~2.7 (2) tiles per CTA; 1 not beyond
  // 6 tiles per CTA (DeepSeek-TP4 M = 16, MiniMax M = 4..16 keep one wave); unchanged at <= 32
  // sub-chunks (Qwen3.5-TP4), with FC1_GROUPS forced, or off.
  moe::DecodeKnobs fine;
  fine.fc1_fine = 1;
  EXPECT_EQ(moe::detail::decode_fc1_fine_groups(fine, 32, 56, 12), 16);
  EXPECT_EQ(moe::detail::decode_fc1_fine_groups(fine, 64, 56, 12), 28);  // session 21: 7 / 16
  EXPECT_EQ(moe::detail::decode_fc1_fine_groups(fine, 128, 56, 12), 12);
  EXPECT_EQ(moe::detail::decode_fc1_fine_groups(fine, 8, 48, 2), 4);
  EXPECT_EQ(moe::detail::decode_fc1_fine_groups(fine, 16, 48, 2), 2);
  EXPECT_EQ(moe::detail::decode_fc1_fine_groups(fine, 40, 32, 6), 6);
  fine.fc1_fine = 2;
  EXPECT_EQ(moe::detail::decode_fc1_fine_groups(fine, 32, 56, 12), 12);
  EXPECT_EQ(moe::detail::decode_fc1_fine_groups(fine, 64, 56, 12), 24);
  fine.fc1_groups = 12;
  EXPECT_EQ(moe::detail::decode_fc1_fine_groups(fine, 64, 56, 12), 12);
  EXPECT_EQ(moe::detail::decode_fc1_fine_groups(moe::DecodeKnobs{}, 64, 56, 12),
            moe::DecodeKnobs{}.fc1_fine == 0   ? 12
            : moe::DecodeKnobs{}.fc1_fine == 1 ? 28
                                               : 24);
  // Never with the balanced group, other warp counts or row warps, or beyond 128 routes.
  EXPECT_EQ(moe::detail::decode_fc1_last(false, 1, 8, 1, 1), 0);
  EXPECT_EQ(moe::detail::decode_fc1_last(false, 1, 12, 1, 0), 0);
  EXPECT_EQ(moe::detail::decode_fc1_last(false, 2, 8, 1, 0), 0);
  EXPECT_EQ(moe::detail::decode_fc1_last(true, 1, 8, 2, 0), 0);
}

TEST(Moe, DecodeFc2RowsRuleOnTheModelShapes) {
  // The 32-row FC2 CTA (decode_fc2_rows, H200 round 46) on a 132-SM H200: from 2 to 8 tokens where
  // its one-wave grid of 2 CTAs per SM is >= 80 % full: Qwen3-30B (64 32-row blocks, split 4),
  // DeepSeek-TP4 (224, split 1), Qwen3.5-TP4 (128, split 2); never MiniMax (192: 73 %), more than
  // 8 tokens or 128 routes. The knob forces either size within its limits. Session 22 (round 82):
  // every shape at 1 token, split <= 2 up to 8 routes (Qwen3-30B 2, DeepSeek-TP4 1, MiniMax 1,
  // Qwen3.5-TP4 2), 3 stages; session 23 (rounds 85 / 86): up to 4 (Qwen3-30B 4), rounded up
  // where the wave is < 80 % full (MiniMax 2, in the 2-stage CTA).
  // Session 13 (round 49): with the K-interleaved FC2 warps (decode_fc2_kil: >= 16 sub-chunks
  // per tile, MiniMax's I = 3072) MiniMax takes 32 rows from 4 tokens with the rounded-up split 2
  // (session 15: in the 2-stage CTA, decode_fc2_stages32).
  struct Shape {
    const char* name;
    int rows_pad, topk, split, nk;
    bool r32, kil;
    int split1;  // at 1 token
  };
  const Shape shapes[] = {{"qwen3-30b", 2048, 8, 4, 6, true, false, 4},
                          {"deepseek-tp4", 7168, 8, 1, 4, true, false, 1},
                          {"minimax", 6144, 4, 2, 24, true, true, 2},
                          {"qwen3.5-tp4", 4096, 10, 2, 8, true, false, 2}};
  const moe::DecodeKnobs def;
  for (const Shape& s : shapes)
    for (int m : {1, 2, 4, 8, 9}) {
      const int routes = m * s.topk;
      const bool kil = s.kil && m >= 3 && m <= 8;  // session 16: contiguous ranges at 1-2 tokens
      EXPECT_EQ(moe::detail::decode_fc2_kil(def, m, s.nk), kil) << s.name << " M=" << m;
      // Session 23 (round 87): MiniMax at 2 tokens too (the rounded-up split, decode_fc2_round_up).
      const int want = m == 1 || (s.r32 && m >= (s.kil && m != 2 ? 4 : 2) && m <= 8) ? 32 : 16;
      EXPECT_EQ(moe::detail::decode_fc2_rows(def, m, routes, s.rows_pad, 132, 2, s.nk), want)
          << s.name << " M=" << m;
      if (want == 32) {
        const int split = m == 1 ? s.split1 : s.split;
        const bool up = moe::detail::decode_fc2_round_up(def, m, s.nk);
        EXPECT_EQ(moe::detail::decode_fc2_split32(routes, s.rows_pad / 32, 132, up, m == 1), split)
            << s.name << " M=" << m;
        EXPECT_LE(moe::detail::decode_fc2_split32(routes, s.rows_pad / 32, 132, up, m == 1),
                  moe::detail::decode_fc2_split_bound(routes));
        // Session 15 (round 57): the 2-stage 32-row CTA (3 per SM) where the grid exceeds one
        // wave of 2 per SM but fits one of 3: MiniMax (192 x 2 = 384 CTAs), no other shape; not
        // where only 2 fit an SM (ctas2 < 3), and the knob forces either depth.
        const int st = moe::detail::decode_fc2_stages32(def, s.rows_pad / 32, split, 132, 3);
        EXPECT_EQ(st, s.kil ? 2 : 3) << s.name << " M=" << m;
        EXPECT_EQ(moe::detail::decode_fc2_stages32(def, s.rows_pad / 32, split, 132, 2), 3);
      }
    }
  moe::DecodeKnobs st2, st3;
  st2.fc2_stages = 2;
  st3.fc2_stages = 3;
  EXPECT_EQ(moe::detail::decode_fc2_stages32(st3, 192, 2, 132, 3), 3);
  EXPECT_EQ(moe::detail::decode_fc2_stages32(st2, 64, 4, 132, 3), 2);
  EXPECT_EQ(moe::detail::decode_fc2_stages32(def, 192, 3, 132, 3), 3);  // 576 CTAs: > 1 wave
  // Without the interleave (nk unknown, or forced off) MiniMax keeps 16 rows (73 % of the wave).
  moe::DecodeKnobs no_kil;
  no_kil.fc2_kil = 0;
  EXPECT_EQ(moe::detail::decode_fc2_rows(def, 8, 32, 6144, 132), 16);
  EXPECT_EQ(moe::detail::decode_fc2_rows(no_kil, 8, 32, 6144, 132, 2, 24), 16);
  EXPECT_FALSE(moe::detail::decode_fc2_kil(no_kil, 8, 24));
  moe::DecodeKnobs k16, k32;
  k16.fc2_rows = 16;
  k32.fc2_rows = 32;
  EXPECT_EQ(moe::detail::decode_fc2_rows(k16, 8, 64, 2048, 132), 16);
  EXPECT_EQ(moe::detail::decode_fc2_rows(k32, 1, 8, 6144, 132), 32);
  EXPECT_EQ(moe::detail::decode_fc2_rows(k32, 9, 72, 6144, 132), 16);
  EXPECT_EQ(moe::detail::decode_fc2_rows(k32, 8, 129, 6144, 132), 16);
  // A device that fits one 32-row CTA per SM (SM12x) keeps 16 rows unless forced: the rule's
  // DeepSeek-TP4 M = 8 case (224 blocks, 32 rows at 2 per SM) with 1.
  EXPECT_EQ(moe::detail::decode_fc2_rows(def, 8, 64, 7168, 132, 2), 32);
  EXPECT_EQ(moe::detail::decode_fc2_rows(def, 8, 64, 7168, 132, 1), 16);
  EXPECT_EQ(moe::detail::decode_fc2_rows(k32, 8, 64, 7168, 132, 1), 32);
  // Within the plan's partials for any SM and route count (<= 8 routes: none, 1 token up to 4).
  for (int sms : {1, 48, 84, 132, 188})
    for (int routes = 1; routes <= 128; ++routes)
      for (int rb : {1, 32, 64, 224, 4096}) {
        for (bool kil : {false, true}) {
          for (bool one : {false, true}) {
            const int p = moe::detail::decode_fc2_split32(routes, rb, sms, kil, one);
            EXPECT_GE(p, 1);
            EXPECT_LE(p, moe::detail::decode_fc2_split_bound(routes));
            EXPECT_LE(p, 4);
          }
        }
      }
}

TEST(Moe, DecodeFc2SplitRuleOnTheModelShapes) {
  // The FC2 tile split of the decode stream (decode_fc2_split) on the four issue-4 shapes at
  // M = 1 / 2 / 4 / 8 on a 132-SM H200, as measured into the rule (docs/moe.md): none up to 8
  // routes; Qwen3-30B's 128 row blocks 3 (4 from 64 routes); DeepSeek-TP4's 448 none (the row
  // blocks alone exceed a 3-per-SM wave); MiniMax's 384 none at 16 routes, 2 above; Qwen3.5-TP4's
  // 256 none at 10 routes, 2 above. The plan's partials (decode_fc2_split_bound) always hold it.
  struct Shape {
    const char* name;
    int64_t H, topk;
    int want[4];  // M = 1, 2, 4, 8
  };
  const Shape shapes[] = {{"qwen3-30b", 2048, 8, {1, 3, 3, 4}},
                          {"deepseek-tp4", 7168, 8, {1, 1, 1, 1}},
                          {"minimax", 6144, 4, {1, 1, 1, 2}},
                          {"qwen3.5-tp4", 4096, 10, {1, 2, 2, 2}}};
  const int ms[4] = {1, 2, 4, 8};
  for (const Shape& s : shapes)
    for (int i = 0; i < 4; ++i) {
      const int64_t routes = ms[i] * s.topk;
      const int64_t row_blocks = (s.H + moe::detail::kPrepRowAlign - 1) /
                                 moe::detail::kPrepRowAlign * moe::detail::kPrepRowAlign / 16;
      EXPECT_EQ(moe::detail::decode_fc2_split(routes, row_blocks, 132), s.want[i])
          << s.name << " M=" << ms[i];
    }
  // Any SM count and route count of the decode stream: 1..4 and within the plan's bound.
  for (int sms : {1, 48, 84, 132, 170, 188})
    for (int64_t routes = 1; routes <= moe::detail::kMaxStreamRoutes; routes += 7)
      for (int64_t rb : {1, 8, 128, 256, 384, 448, 1024}) {
        const int split = moe::detail::decode_fc2_split(routes, rb, sms);
        EXPECT_GE(split, 1) << routes << " " << rb << " " << sms;
        EXPECT_LE(split, moe::detail::decode_fc2_split_bound(routes))
            << routes << " " << rb << " " << sms;
      }
}

}  // namespace
