// Block codecs (src/formats/block.h, ggml.h, swizzle.h) and the host API (b12x/formats.h):
// hand-worked cases, independent re-derivations of each scale rule, round trips, swizzle
// offsets, and argument validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "b12x/c_api.h"
#include "b12x/formats.h"
#include "b12x/status.h"
#include "formats/block.h"
#include "formats/ggml.h"
#include "formats/scalar.h"
#include "formats/swizzle.h"

namespace {

using namespace b12x;
namespace f = b12x::fmt;
namespace g = b12x::fmt::ggml;

std::mt19937_64& rng() {
  static std::mt19937_64 r(0xB12u + 7);
  return r;
}
std::vector<float> normal(size_t n, float sd = 1.f) {
  std::normal_distribution<float> d(0.f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng());
  return v;
}

/// The E2M1 code nearest to y (RNE, saturating at 6), found by brute force over the 8
/// magnitudes: an independent statement of what the encoder must return (canonical +0).
uint8_t e2m1_nearest(float y) {
  const double a = std::fabs(static_cast<double>(y));
  int best = 0;
  double bd = 1e300;
  for (int c = 0; c < 8; ++c) {
    const double d = std::fabs(a - f::e2m1_to_float(static_cast<uint8_t>(c)));
    if (d < bd || (d == bd && (c & 1) == 0)) {
      bd = d;
      best = c;
    }
  }
  return static_cast<uint8_t>(best == 0 ? 0 : (best | (y < 0 ? 8 : 0)));
}

// ---------------------------------------------------------------- NVFP4 ---------------------
TEST(FormatsBlock, Nvfp4HandWorked) {
  // gs = 1: amax 6 -> scale value 1.0 (0x38), multiplier 1, codes are e2m1(x).
  const float x[16] = {0, 0.25f, 0.75f, 1.25f, -1.75f, 2.5f, -3.5f, 5,
                       6, -6,    0.5f,  -0.1f, 1,      3,    4,     -0.25f};
  uint8_t packed[8];
  const uint8_t sf = f::nvfp4_encode_block(x, 1.0f, packed);
  EXPECT_EQ(sf, 0x38);
  const uint8_t want[16] = {0, 0, 2, 2, 0xC, 4, 0xE, 6, 7, 0xF, 1, 0 /* -0 -> +0 */,
                            2, 5, 6, 0 /* -0.25 ties to -0 -> +0 */};
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ((packed[i / 2] >> (4 * (i & 1))) & 0xF, want[i]) << "element " << i;
  // Zero block: scale 0, all codes 0, decodes to +0.
  float z[16] = {};
  z[3] = -0.f;
  EXPECT_EQ(f::nvfp4_encode_block(z, 123.f, packed), 0);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(packed[i], 0);
  // gs = 0 (all-zero tensor): everything zero.
  EXPECT_EQ(f::nvfp4_encode_block(x, 0.f, packed), 0);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(packed[i], 0);
  // Saturated block scale: gs*amax/6 > 448 -> 0x7E.
  EXPECT_EQ(f::nvfp4_scale(1000.f, 6.f), 0x7E);
}

TEST(FormatsBlock, Nvfp4MatchesIndependentRule) {
  for (int trial = 0; trial < 200; ++trial) {
    const float sd = std::ldexp(1.f, static_cast<int>(rng()() % 40) - 20);
    std::vector<float> x = normal(16 * 64, sd);
    const float gs = formats::nvfp4_global_scale(x.data(), x.size());
    std::vector<uint8_t> packed(x.size() / 2), sc(x.size() / 16);
    formats::quantize_nvfp4(x.data(), 1, x.size(), gs, packed.data(), sc.data());
    std::vector<float> y(x.size());
    formats::dequantize_nvfp4(packed.data(), sc.data(), 1, x.size(), gs, y.data());
    for (size_t b = 0; b < sc.size(); ++b) {
      float amax = 0;
      for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(x[16 * b + i]));
      const float sval = (gs * amax) / 6.0f;
      EXPECT_EQ(sc[b], f::float_to_e4m3_satfinite(sval) & 0x7F);
      const float dsf = f::ue4m3_to_float(sc[b]);
      const float mult = sc[b] ? 1.0f / (dsf * (1.0f / gs)) : 0.f;
      for (int i = 0; i < 16; ++i) {
        const size_t j = 16 * b + i;
        const uint8_t code = (packed[j / 2] >> (4 * (j & 1))) & 0xF;
        ASSERT_EQ(code, sc[b] ? e2m1_nearest(x[j] * mult) : 0) << "block " << b << " i " << i;
        EXPECT_EQ(y[j], f::e2m1_to_float(code) * dsf / gs);
      }
    }
    // Quality: NVFP4 with a good global scale has relative L2 error around 10%.
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      num += (x[i] - y[i]) * (x[i] - y[i]);
      den += x[i] * x[i];
    }
    EXPECT_LT(std::sqrt(num / den), 0.2) << "sd " << sd;
  }
}

// ---------------------------------------------------------------- MX scales -----------------
/// Independent MXFP4 scale: floor rule via frexp, ceil rule as the smallest e with 6*2^e >= amax.
int mx4_floor_ref(float amax) {
  int e;
  std::frexp(amax, &e);  // amax = m * 2^e, m in [0.5, 1): floor(log2) = e - 1
  return std::clamp(e - 1 - 2 + 127, 0, 254);
}
int mx4_ceil_ref(float amax) {
  for (int e = -127; e <= 127; ++e)
    if (6.0 * std::ldexp(1.0, e) >= amax) return e + 127;
  return 254;
}

TEST(FormatsBlock, MxScaleRules) {
  using R = f::MxScaleRule;
  using Z = f::MxZeroBlockScale;
  struct Case {
    float amax;
    int floor, ceil;
  } cases[] = {{6.f, 127, 127}, {7.f, 127, 128}, {1.f, 125, 125},        {1.6f, 125, 126},
               {4.f, 127, 127}, {3.f, 126, 126}, {6.0000005f, 127, 128}, {0.75f, 124, 124}};
  for (const Case& c : cases) {
    EXPECT_EQ(f::mxfp4_scale(c.amax, R::kFloor, Z::kOne), c.floor) << c.amax;
    EXPECT_EQ(f::mxfp4_scale(c.amax, R::kCeil, Z::kOne), c.ceil) << c.amax;
  }
  EXPECT_EQ(f::mxfp4_scale(0.f, R::kFloor, Z::kOne), 127);
  EXPECT_EQ(f::mxfp4_scale(0.f, R::kCeil, Z::kZero), 0);
  EXPECT_EQ(f::mxfp8_scale(0.f, Z::kOne), 127);
  EXPECT_EQ(f::mxfp8_scale(0.f, Z::kZero), 0);
  EXPECT_EQ(f::mxfp8_scale(448.f, Z::kOne), 127);
  EXPECT_EQ(f::mxfp8_scale(449.f, Z::kOne), 128);
  EXPECT_EQ(f::mxfp8_scale(224.f, Z::kOne), 126);
  EXPECT_EQ(f::mxfp8_scale(INFINITY, Z::kOne), 254);
  // Random amax over the whole exponent range against the independent rules.
  std::uniform_int_distribution<uint32_t> u(0x00800000u, 0x7F7FFFFFu);
  for (int i = 0; i < 200000; ++i) {
    const float a = f::f32_from_bits(u(rng()));
    ASSERT_EQ(f::mxfp4_scale(a, R::kFloor, Z::kOne), mx4_floor_ref(a)) << a;
    ASSERT_EQ(f::mxfp4_scale(a, R::kCeil, Z::kOne), mx4_ceil_ref(a)) << a;
    // MXFP8: pow2_ceil of the fp32 quotient amax/448.
    const float s = a / 448.0f;
    int e;
    const float m = std::frexp(s, &e);  // s = m*2^e, m in [0.5,1)
    const int want = std::clamp(m == 0.5f ? e - 1 + 127 : e + 127, 1, 254);
    ASSERT_EQ(f::mxfp8_scale(a, Z::kOne), want) << a;
    // Both ceil rules equal cvt.rp.satfinite.ue8m0 of the correctly rounded quotient (the
    // TRT-LLM / FlashInfer formulation) whenever the quotient is an fp32 normal.
    if (a / 6.0f >= std::ldexp(1.f, -126))
      ASSERT_EQ(f::mxfp4_scale(a, R::kCeil, Z::kOne), f::float_to_ue8m0_ceil(a / 6.0f)) << a;
    if (s >= std::ldexp(1.f, -126))
      ASSERT_EQ(f::mxfp8_scale(a, Z::kOne), f::float_to_ue8m0_ceil(s));
  }
}

TEST(FormatsBlock, Mxfp4AndMxfp8Blocks) {
  for (auto rule : {formats::MxScaleRule::kFloor, formats::MxScaleRule::kCeil}) {
    std::vector<float> x = normal(32 * 40, 3.f);
    for (int i = 0; i < 32; ++i) x[i] = 0.f;  // an all-zero block
    std::vector<uint8_t> p(x.size() / 2), s(x.size() / 32);
    formats::quantize_mxfp4(x.data(), 2, x.size() / 2, rule, formats::MxZeroBlockScale::kZero,
                            p.data(), s.data());
    EXPECT_EQ(s[0], 0);
    std::vector<float> y(x.size());
    formats::dequantize_mxfp4(p.data(), s.data(), 2, x.size() / 2, y.data());
    for (size_t b = 0; b < s.size(); ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
      if (b > 0) {
        EXPECT_EQ(s[b],
                  rule == formats::MxScaleRule::kFloor ? mx4_floor_ref(amax) : mx4_ceil_ref(amax));
      }
      for (int i = 0; i < 32; ++i) {
        const size_t j = 32 * b + i;
        const uint8_t code = (p[j / 2] >> (4 * (j & 1))) & 0xF;
        ASSERT_EQ(code, e2m1_nearest(std::ldexp(x[j], 127 - s[b])));
        ASSERT_EQ(y[j], std::ldexp(f::e2m1_to_float(code), s[b] - 127));
      }
    }
  }
  std::vector<float> x = normal(32 * 64, 0.01f);
  for (int i = 32; i < 64; ++i) x[i] = 0.f;
  std::vector<uint8_t> v(x.size()), s(x.size() / 32);
  formats::quantize_mxfp8(x.data(), 4, x.size() / 4, formats::MxZeroBlockScale::kOne, v.data(),
                          s.data());
  EXPECT_EQ(s[1], 127);
  std::vector<float> y(x.size());
  formats::dequantize_mxfp8(v.data(), s.data(), 4, x.size() / 4, y.data());
  for (size_t j = 0; j < x.size(); ++j) {
    const int sb = s[j / 32];
    ASSERT_EQ(v[j], f::float_to_e4m3_satfinite(std::ldexp(x[j], 127 - sb))) << j;
    ASSERT_EQ(y[j], std::ldexp(f::e4m3_to_float(v[j]), sb - 127));
    // E4M3 relative step 2^-3: RNE error <= 2^-4 relative (no block max clips under ceil).
    ASSERT_LE(std::fabs(y[j] - x[j]),
              std::ldexp(std::fabs(x[j]), -4) + std::ldexp(1.f, sb - 127 - 10))
        << j;
  }
}

// ---------------------------------------------------------------- block FP8 -----------------
TEST(FormatsBlock, BlockFp8WeightsAndActivations) {
  for (int64_t br : {128, 1}) {
    const int64_t n = 200, k = 300;  // partial edge tiles in both dims
    std::vector<float> x = normal(n * k, 0.05f);
    for (int64_t c = 0; c < 128; ++c) x[c] = 0.f;  // first row group of tile (0,0) zero for br=1
    const int64_t tr = (n + br - 1) / br, tc = (k + 127) / 128;
    std::vector<uint8_t> q(n * k);
    std::vector<float> s(tr * tc), y(n * k);
    formats::quantize_block_fp8(x.data(), n, k, br, q.data(), s.data());
    formats::dequantize_block_fp8(q.data(), s.data(), n, k, br, y.data());
    for (int64_t bi = 0; bi < tr; ++bi)
      for (int64_t bj = 0; bj < tc; ++bj) {
        float amax = 0;
        for (int64_t r = bi * br; r < std::min(n, bi * br + br); ++r)
          for (int64_t c = bj * 128; c < std::min(k, bj * 128 + 128); ++c)
            amax = std::max(amax, std::fabs(x[r * k + c]));
        ASSERT_EQ(s[bi * tc + bj], amax / 448.0f);
      }
    if (br == 1) EXPECT_EQ(s[0], 0.f);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const float sc = s[(r / br) * tc + c / 128];
        const float xv = x[r * k + c];
        ASSERT_EQ(q[r * k + c], sc == 0.f ? 0 : f::float_to_e4m3_satfinite(xv / sc));
        ASSERT_EQ(y[r * k + c], f::e4m3_to_float(q[r * k + c]) * sc);
        ASSERT_LE(std::fabs(y[r * k + c] - xv), std::fabs(xv) / 16 + sc * std::ldexp(1.f, -9));
      }
  }
}

TEST(FormatsBlock, RequantizeBlockFp8ToUe8m0) {
  const int64_t n = 256, k = 384;
  std::vector<float> x = normal(n * k, 0.02f);
  std::vector<uint8_t> q(n * k), q2(n * k), e(2 * 3);
  std::vector<float> s(2 * 3);
  formats::quantize_block_fp8(x.data(), n, k, 128, q.data(), s.data());
  s[4] = 0.0078125f;  // tile (1,1): an exact power of two -> kept verbatim
  formats::requantize_block_fp8_to_ue8m0(q.data(), s.data(), n, k, q2.data(), e.data());
  EXPECT_EQ(e[4], 127 - 7);
  for (int64_t t = 0; t < 6; ++t) {
    const int64_t bi = t / 3, bj = t % 3;
    float amax = 0;
    for (int64_t r = bi * 128; r < bi * 128 + 128; ++r)
      for (int64_t c = bj * 128; c < bj * 128 + 128; ++c) {
        const float w = f::e4m3_to_float(q[r * k + c]) * s[t];
        amax = std::max(amax, std::fabs(w));
        const float w2 = std::ldexp(f::e4m3_to_float(q2[r * k + c]), e[t] - 127);
        if (t == 4) {
          ASSERT_EQ(q2[r * k + c], q[r * k + c]);
        } else {
          ASSERT_EQ(q2[r * k + c], f::float_to_e4m3_satfinite(std::ldexp(w, 127 - e[t])));
          ASSERT_LE(std::fabs(w2 - w), std::fabs(w) / 16 + std::ldexp(1.f, e[t] - 127 - 10));
        }
      }
    if (t != 4) {
      const float ratio = amax / 448.0f;
      EXPECT_GE(std::ldexp(1.0, e[t] - 127), ratio);
      EXPECT_LT(std::ldexp(1.0, e[t] - 127 - 1), ratio);
    }
  }
  EXPECT_THROW(
      {
        s[0] = -1.f;
        formats::requantize_block_fp8_to_ue8m0(q.data(), s.data(), n, k, q2.data(), e.data());
      },
      b12x::Error);
}

TEST(FormatsBlock, Fp8PerTensor) {
  std::vector<float> x = normal(1000, 7.f);
  std::vector<uint8_t> q(x.size());
  const float s = formats::quantize_fp8_per_tensor(x.data(), x.size(), 0.f, q.data());
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  EXPECT_EQ(s, amax / 448.0f);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(q[i], f::float_to_e4m3_satfinite(x[i] / s));
  const float s2 = formats::quantize_fp8_per_tensor(x.data(), x.size(), 0.01f, q.data());
  EXPECT_EQ(s2, 0.01f);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(q[i], f::float_to_e4m3_satfinite(x[i] / 0.01f));
  std::vector<float> y(x.size());
  formats::dequantize_fp8_per_tensor(q.data(), q.size(), s2, y.data());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], f::e4m3_to_float(q[i]) * 0.01f);
}

// ---------------------------------------------------------------- GGML ----------------------
TEST(FormatsGgml, Q8_0HandWorked) {
  float x[32] = {127.f, 82.5f, -103.5f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f};
  for (int i = 8; i < 32; ++i) x[i] = static_cast<float>(i) - 20.f;
  uint8_t blk[34];
  g::q8_0_encode_block(x, blk);
  EXPECT_EQ(g::load_u16(blk), 0x3C00);                      // d = 127/127 = 1.0
  const int8_t want[8] = {127, 83, -104, 1, -1, 2, 3, -3};  // ties away from zero
  for (int i = 0; i < 8; ++i) EXPECT_EQ(static_cast<int8_t>(blk[2 + i]), want[i]) << i;
  float y[32];
  g::q8_0_decode_block(blk, y);
  for (int i = 8; i < 32; ++i) EXPECT_EQ(y[i], x[i]);
  // d uses the unrounded fp32 amax/127 for the codes and fp16(d) for storage.
  float z[32];
  for (int i = 0; i < 32; ++i) z[i] = 0.001f * (i + 1) * ((i & 1) ? -1 : 1);
  g::q8_0_encode_block(z, blk);
  float zmax = 0;
  for (float v : z) zmax = std::max(zmax, std::fabs(v));
  const float d = zmax / 127.0f;
  EXPECT_EQ(g::load_u16(blk), f::float_to_fp16_bits(d));
  for (int i = 0; i < 32; ++i)
    EXPECT_EQ(static_cast<int8_t>(blk[2 + i]), static_cast<int8_t>(std::round(z[i] * (1.0f / d))));
  float zero[32] = {};
  g::q8_0_encode_block(zero, blk);
  for (int i = 0; i < 34; ++i) EXPECT_EQ(blk[i], 0);
}

TEST(FormatsGgml, TablesAndSigns) {
  for (uint32_t i = 0; i < 128; ++i) EXPECT_EQ(g::ksigns(i), g::kKsignsIq2xs[i]) << i;
  for (int j = 0; j < 8; ++j) EXPECT_EQ(g::kKmaskIq2xs[j], 1 << j);
  EXPECT_EQ(g::kIq2xxsGrid[0], 0x0808080808080808ull);
  for (uint64_t v : g::kIq2xsGrid)
    for (int j = 0; j < 8; ++j) {
      const uint64_t b = (v >> (8 * j)) & 0xFF;
      ASSERT_TRUE(b == 8 || b == 25 || b == 43);
    }
}

/// Decoder as written in formats.md §C, evaluated in double with the table arrays.
void iq2_reference(const uint8_t* blk, bool xs, float* y) {
  const double d = f::fp16_bits_to_float(g::load_u16(blk));
  for (int ib = 0; ib < 8; ++ib)
    for (int l = 0; l < 4; ++l) {
      uint64_t grid;
      uint32_t sidx, s;
      if (xs) {
        const uint32_t q = g::load_u16(blk + 2 + 2 * (4 * ib + l));
        grid = g::kIq2xsGrid[q & 511];
        sidx = q >> 9;
        s = l < 2 ? (blk[66 + ib] & 0xF) : (blk[66 + ib] >> 4);
      } else {
        const uint32_t w0 = g::load_u32(blk + 2 + 8 * ib), w1 = g::load_u32(blk + 6 + 8 * ib);
        grid = g::kIq2xxsGrid[(w0 >> (8 * l)) & 0xFF];
        sidx = (w1 >> (7 * l)) & 127;
        s = w1 >> 28;
      }
      const uint8_t signs = g::kKsignsIq2xs[sidx];
      const double db = d * (0.5 + s) * 0.25;
      for (int j = 0; j < 8; ++j)
        y[32 * ib + 8 * l + j] =
            static_cast<float>(db * static_cast<double>((grid >> (8 * j)) & 0xFF) *
                               ((signs & g::kKmaskIq2xs[j]) ? -1 : 1));
    }
}

TEST(FormatsGgml, Iq2DecodeMatchesSpec) {
  std::uniform_int_distribution<int> byte(0, 255);
  for (int trial = 0; trial < 500; ++trial)
    for (bool xs : {false, true}) {
      uint8_t blk[74];
      for (auto& b : blk) b = static_cast<uint8_t>(byte(rng()));
      // Finite fp16 d (NaN payload signs are not meaningful).
      uint16_t d = g::load_u16(blk);
      if (((d >> 10) & 0x1F) == 0x1F) d &= 0xBFFF;
      g::store_u16(blk, d);
      float y[256], r[256];
      if (xs)
        g::iq2_xs_decode_block_host(blk, y);
      else
        g::iq2_xxs_decode_block_host(blk, y);
      iq2_reference(blk, xs, r);
      for (int i = 0; i < 256; ++i)
        ASSERT_EQ(f::f32_bits(y[i]), f::f32_bits(r[i])) << (xs ? "xs " : "xxs ") << i;
    }
}

template <bool kXs>
void iq2_roundtrip_test() {
  const int bytes = kXs ? 74 : 66;
  // (1) A block made from a random encoding whose largest sub-block scale is 15 and holds a 43
  // is reproduced exactly: the d candidate equals the original d and s=15 is searched.
  std::uniform_int_distribution<int> byte(0, 255);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<uint8_t> blk(bytes);
    for (auto& b : blk) b = static_cast<uint8_t>(byte(rng()));
    g::store_u16(blk.data(), f::float_to_fp16_bits(std::ldexp(1.f, trial % 7 - 3)));
    if (kXs) {
      for (int ib = 0; ib < 8; ++ib) blk[66 + ib] &= 0xEE;  // scales <= 14 ...
      blk[66] |= 0x0F;                                      // ... except sub-block 0 lo = 15
      g::store_u16(blk.data() + 2, static_cast<uint16_t>(g::load_u16(blk.data() + 2) & ~0x1FFu) |
                                       0x1FFu);  // grid 511 holds a 43
    } else {
      for (int ib = 0; ib < 8; ++ib) blk[2 + 8 * ib + 7] &= 0xEF;  // s <= 14 ...
      blk[2 + 7] |= 0xF0;                                          // ... except sub-block 0
      blk[2] = 0xFF;                                               // grid 255 holds a 43
    }
    std::vector<float> y(256), y2(256);
    std::vector<uint8_t> enc(bytes);
    if (kXs) {
      formats::dequantize_iq2_xs(blk.data(), 1, 256, y.data());
      formats::quantize_iq2_xs(y.data(), 1, 256, enc.data());
      formats::dequantize_iq2_xs(enc.data(), 1, 256, y2.data());
    } else {
      formats::dequantize_iq2_xxs(blk.data(), 1, 256, y.data());
      formats::quantize_iq2_xxs(y.data(), 1, 256, enc.data());
      formats::dequantize_iq2_xxs(enc.data(), 1, 256, y2.data());
    }
    for (int i = 0; i < 256; ++i) ASSERT_EQ(y2[i], y[i]) << "trial " << trial << " i " << i;
  }
  // (2) Gaussian weights: the encoder beats the zero block by a wide margin.
  std::vector<float> x = normal(256 * 8, 0.02f);
  std::vector<uint8_t> enc(8 * bytes);
  std::vector<float> y(x.size());
  if (kXs) {
    formats::quantize_iq2_xs(x.data(), 2, 1024, enc.data());
    formats::dequantize_iq2_xs(enc.data(), 2, 1024, y.data());
  } else {
    formats::quantize_iq2_xxs(x.data(), 2, 1024, enc.data());
    formats::dequantize_iq2_xxs(enc.data(), 2, 1024, y.data());
  }
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - y[i]) * (x[i] - y[i]);
    den += x[i] * x[i];
  }
  const double rel = std::sqrt(num / den);
  std::printf("[ iq2 ] %s gaussian rel_l2=%.3f\n", kXs ? "iq2_xs" : "iq2_xxs", rel);
  EXPECT_LT(rel, kXs ? 0.35 : 0.4);  // measured ~0.28 / ~0.33
}

TEST(FormatsGgml, Iq2XxsEncoderRoundTrip) {
  iq2_roundtrip_test<false>();
}
TEST(FormatsGgml, Iq2XsEncoderRoundTrip) {
  iq2_roundtrip_test<true>();
}

// ---------------------------------------------------------------- swizzle -------------------
TEST(FormatsSwizzle, KnownOffsetsAndRoundTrip) {
  EXPECT_EQ(f::swizzled_scale_offset(0, 0, 8), 0);
  EXPECT_EQ(f::swizzled_scale_offset(0, 1, 8), 1);
  EXPECT_EQ(f::swizzled_scale_offset(1, 0, 8), 16);
  EXPECT_EQ(f::swizzled_scale_offset(32, 0, 8), 4);
  EXPECT_EQ(f::swizzled_scale_offset(97, 3, 8), 1 * 16 + 3 * 4 + 3);
  EXPECT_EQ(f::swizzled_scale_offset(0, 4, 8), 512);
  EXPECT_EQ(f::swizzled_scale_offset(128, 0, 8), 1024);
  EXPECT_EQ(f::swizzled_scale_offset(128, 0, 3), 512);
  EXPECT_EQ(f::swizzled_scale_bytes(129, 5), 256 * 8);
  // Against the vLLM formulation: view [M/128, 4, 32, K/4, 4], permute (0, 3, 2, 1, 4).
  for (int64_t rows : {1, 100, 128, 300})
    for (int64_t cols : {1, 3, 4, 9}) {
      const int64_t pr = f::pad_to(rows, 128), pc = f::pad_to(cols, 4);
      std::vector<uint8_t> src(2 * rows * cols);
      for (auto& b : src) b = static_cast<uint8_t>(rng()() % 255 + 1);  // never a pad byte
      std::vector<uint8_t> dst(2 * pr * pc, 0xAA), back(src.size());
      formats::swizzle_block_scale(src.data(), 2, rows, cols, 127, dst.data());
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t r = 0; r < pr; ++r)
          for (int64_t c = 0; c < pc; ++c) {
            const int64_t m0 = r / 128, m1 = (r % 128) / 32, m2 = r % 32, k0 = c / 4, k1 = c % 4;
            const int64_t off = b * pr * pc + (((m0 * (pc / 4) + k0) * 32 + m2) * 4 + m1) * 4 + k1;
            const uint8_t want = (r < rows && c < cols) ? src[b * rows * cols + r * cols + c] : 127;
            ASSERT_EQ(dst[off], want) << rows << "x" << cols << " r" << r << " c" << c;
          }
      formats::unswizzle_block_scale(dst.data(), 2, rows, cols, back.data());
      ASSERT_EQ(back, src);
    }
}

// ---------------------------------------------------------------- validation ----------------
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const b12x::Error& e) {
    EXPECT_EQ(e.code(), b12x::Status::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(FormatsApi, PartialBlocksAreErrors) {
  std::vector<float> x(1024, 1.f);
  std::vector<uint8_t> o(4096);
  std::string m =
      error_of([&] { formats::quantize_nvfp4(x.data(), 1, 40, 1.f, o.data(), o.data()); });
  EXPECT_NE(m.find("k=40"), std::string::npos) << m;
  EXPECT_NE(m.find("16 values"), std::string::npos) << m;
  m = error_of([&] {
    formats::quantize_mxfp8(x.data(), 1, 48, formats::MxZeroBlockScale::kOne, o.data(), o.data());
  });
  EXPECT_NE(m.find("k=48"), std::string::npos) << m;
  EXPECT_NE(m.find("32 values"), std::string::npos) << m;
  m = error_of([&] { formats::dequantize_iq2_xs(o.data(), 1, 300, x.data()); });
  EXPECT_NE(m.find("k=300"), std::string::npos) << m;
  EXPECT_NE(m.find("256"), std::string::npos) << m;
  m = error_of([&] { formats::quantize_block_fp8(x.data(), 2, 64, 64, o.data(), x.data()); });
  EXPECT_NE(m.find("block_rows=64"), std::string::npos) << m;
  m = error_of([&] { formats::quantize_nvfp4(x.data(), 1, 16, NAN, o.data(), o.data()); });
  EXPECT_NE(m.find("global_scale"), std::string::npos) << m;
  // Descriptor-level: values container of the wrong size.
  TensorRef src = TensorRef::contiguous(x.data(), DType::kFP32, {2, 64});
  TensorRef vals = TensorRef::contiguous(o.data(), DType::kUInt8, {2, 31});
  TensorRef sc = TensorRef::contiguous(o.data() + 1024, DType::kUInt8, {2, 4});
  formats::QuantParams p;
  p.format = formats::BlockFormat::kNvfp4;
  p.global_scale = 1.f;
  m = error_of([&] { formats::quantize(src, vals, sc, p); });
  EXPECT_NE(m.find("values"), std::string::npos) << m;
  EXPECT_NE(m.find("expected 64"), std::string::npos) << m;
}

TEST(FormatsApi, DescriptorQuantizeMatchesRowFunctions) {
  std::vector<float> x = normal(4 * 256, 1.f);
  std::vector<uint16_t> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = f::float_to_bf16_bits(x[i]);
  std::vector<float> xr(x.size());
  for (size_t i = 0; i < x.size(); ++i) xr[i] = f::bf16_bits_to_float(xb[i]);
  // bf16 source, Q8_0 container described as q8_0 values.
  std::vector<uint8_t> a(4 * 8 * 34), b(a.size());
  formats::QuantParams p;
  p.format = formats::BlockFormat::kQ8_0;
  formats::quantize(TensorRef::contiguous(xb.data(), DType::kBF16, {4, 256}),
                    TensorRef::contiguous(a.data(), DType::kQ8_0, {4, 256}), TensorRef{}, p);
  formats::quantize_q8_0(xr.data(), 4, 256, b.data());
  EXPECT_EQ(a, b);
  std::vector<float> y(x.size()), y2(x.size());
  formats::dequantize(TensorRef::contiguous(a.data(), DType::kUInt8, {4, 8 * 34}), TensorRef{},
                      TensorRef::contiguous(y.data(), DType::kFP32, {4, 256}), p);
  formats::dequantize_q8_0(b.data(), 4, 256, y2.data());
  EXPECT_EQ(y, y2);
}

}  // namespace

// ---------------------------------------------------------------- C ABI -----------------------

namespace {

b12x_tensor desc(void* data, int32_t dtype, std::initializer_list<int64_t> shape) {
  b12x_tensor t{};
  t.data = data;
  t.dtype = dtype;
  t.ndim = static_cast<int32_t>(shape.size());
  int64_t stride = 1;
  int d = t.ndim;
  for (auto it = shape.end(); it != shape.begin();) {
    --it;
    --d;
    t.shape[d] = *it;
    t.strides[d] = stride;
    stride *= *it;
  }
  t.device = B12X_HOST_DEVICE;
  return t;
}

TEST(FormatsCApi, QuantizeDequantizeSwizzleAndErrors) {
  std::vector<float> x = normal(2 * 64, 1.f);
  std::vector<uint8_t> v(64), s(8), v2(64), s2(8);
  b12x_quant_params p;
  b12x_quant_params_init(&p, B12X_FORMAT_NVFP4);
  p.global_scale = formats::nvfp4_global_scale(x.data(), x.size());
  b12x_tensor src = desc(x.data(), B12X_DTYPE_FP32, {2, 64});
  b12x_tensor vals = desc(v.data(), B12X_DTYPE_FP4_E2M1, {2, 64});
  b12x_tensor sc = desc(s.data(), B12X_DTYPE_UE4M3, {2, 4});
  ASSERT_EQ(b12x_quantize(&src, &vals, &sc, &p), B12X_OK) << b12x_last_error();
  formats::quantize_nvfp4(x.data(), 2, 64, p.global_scale, v2.data(), s2.data());
  EXPECT_EQ(v, v2);
  EXPECT_EQ(s, s2);
  std::vector<float> y(128), y2(128);
  b12x_tensor out = desc(y.data(), B12X_DTYPE_FP32, {2, 64});
  ASSERT_EQ(b12x_dequantize(&vals, &sc, &out, &p), B12X_OK) << b12x_last_error();
  formats::dequantize_nvfp4(v2.data(), s2.data(), 2, 64, p.global_scale, y2.data());
  EXPECT_EQ(y, y2);
  // Errors come back as status + message naming the argument.
  b12x_tensor bad = desc(x.data(), B12X_DTYPE_FP32, {2, 40});
  EXPECT_EQ(b12x_quantize(&bad, &vals, &sc, &p), B12X_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(b12x_last_error()).find("k=40"), std::string::npos) << b12x_last_error();
  EXPECT_EQ(b12x_quantize(&src, &vals, &sc, nullptr), B12X_ERROR_INVALID_ARGUMENT);
  p.format = 99;
  EXPECT_EQ(b12x_quantize(&src, &vals, &sc, &p), B12X_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(b12x_last_error()).find("format=99"), std::string::npos);
  // Swizzle: [130, 5] -> [256, 8], pad 127.
  std::vector<uint8_t> g(130 * 5), sw(256 * 8), back(130 * 5);
  for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<uint8_t>(i * 7 + 1);
  b12x_tensor gs = desc(g.data(), B12X_DTYPE_UE8M0, {130, 5});
  b12x_tensor gd = desc(sw.data(), B12X_DTYPE_UE8M0, {256, 8});
  ASSERT_EQ(b12x_swizzle_block_scale(&gs, &gd, 127), B12X_OK) << b12x_last_error();
  EXPECT_EQ(sw[f::swizzled_scale_offset(129, 4, 5)], g[129 * 5 + 4]);
  EXPECT_EQ(sw[f::swizzled_scale_offset(129, 5, 5)], 127);
  b12x_tensor gb = desc(back.data(), B12X_DTYPE_UINT8, {130, 5});
  ASSERT_EQ(b12x_unswizzle_block_scale(&gd, &gb), B12X_OK) << b12x_last_error();
  EXPECT_EQ(back, g);
  b12x_tensor wrong = desc(sw.data(), B12X_DTYPE_UE8M0, {128, 8});
  EXPECT_EQ(b12x_swizzle_block_scale(&gs, &wrong, 0), B12X_ERROR_INVALID_ARGUMENT);
  // Scalar codecs.
  const float in[3] = {1.f, 500.f, -0.3f};
  uint8_t codes[3];
  ASSERT_EQ(b12x_encode_scalar(B12X_DTYPE_FP8_E4M3, B12X_CVT_SATFINITE, in, codes, 3), B12X_OK);
  EXPECT_EQ(codes[0], 0x38);
  EXPECT_EQ(codes[1], 0x7E);
  float dec[3];
  ASSERT_EQ(b12x_decode_scalar(B12X_DTYPE_FP8_E4M3, codes, dec, 3), B12X_OK);
  EXPECT_EQ(dec[1], 448.f);
  EXPECT_EQ(b12x_encode_scalar(B12X_DTYPE_Q8_0, 0, in, codes, 3), B12X_ERROR_INVALID_ARGUMENT);
}

}  // namespace
