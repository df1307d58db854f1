// Scalar codecs (src/formats/scalar.h) against the CUDA toolkit's host emulations of the cvt
// instructions (cuda_fp8.h / cuda_fp4.h / cuda_bf16.h / cuda_fp16.h): every code decoded, and
// encoders on a dense float32 sweep (every 61st bit pattern, ~70M values per codec) plus every tie
// and boundary of each format (midpoints between adjacent codes, their +-4 ulp neighbours, the
// saturation thresholds above the largest code, subnormals, signed zeros, Inf, NaN payloads).
// The GPU test (tests/gpu/test_formats_cvt.cu) checks all 2^32 patterns against the hardware.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "formats/scalar.h"

namespace {

using namespace b12x::fmt;

uint32_t bits(float x) {
  return f32_bits(x);
}
float from(uint32_t u) {
  return f32_from_bits(u);
}
bool same_or_both_nan(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return bits(a) == bits(b);
}

float half_raw_to_float(__half_raw h) {
  return fp16_bits_to_float(h.x);
}

// ---- decoders: every code ------------------------------------------------------------------
TEST(FormatsScalar, DecodeE4M3EveryCode) {
  for (int c = 0; c < 256; ++c) {
    const float ours = e4m3_to_float(static_cast<uint8_t>(c));
    const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), __NV_E4M3);
    const float ref = __half2float(__half(h));
    EXPECT_TRUE(same_or_both_nan(ours, ref))
        << "code 0x" << std::hex << c << " " << ours << " vs " << ref;
  }
  EXPECT_EQ(e4m3_to_float(0x7E), 448.f);
  EXPECT_EQ(e4m3_to_float(0x38), 1.f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.f, -9));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7F)) && std::isnan(e4m3_to_float(0xFF)));
}

TEST(FormatsScalar, DecodeE5M2EveryCode) {
  for (int c = 0; c < 256; ++c) {
    const float ours = e5m2_to_float(static_cast<uint8_t>(c));
    const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), __NV_E5M2);
    const float ref = __half2float(__half(h));
    EXPECT_TRUE(same_or_both_nan(ours, ref)) << "code 0x" << std::hex << c;
  }
  EXPECT_EQ(e5m2_to_float(0x7B), 57344.f);
  EXPECT_TRUE(std::isinf(e5m2_to_float(0x7C)) && e5m2_to_float(0xFC) < 0);
}

TEST(FormatsScalar, DecodeE2M1EveryCode) {
  const float expect[16] = {0, .5f, 1, 1.5f, 2, 3, 4, 6, -0.f, -.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int c = 0; c < 16; ++c) {
    const float ours = e2m1_to_float(static_cast<uint8_t>(c));
    const __half_raw h = __nv_cvt_fp4_to_halfraw(static_cast<__nv_fp4_storage_t>(c), __NV_E2M1);
    EXPECT_EQ(bits(ours), bits(half_raw_to_float(h))) << "code " << c;
    EXPECT_EQ(bits(ours), bits(expect[c])) << "code " << c;
  }
}

TEST(FormatsScalar, DecodeUE8M0EveryCode) {
  for (int c = 0; c < 256; ++c) {
    const float ours = ue8m0_to_float(static_cast<uint8_t>(c));
    const __nv_bfloat16_raw b = __nv_cvt_e8m0_to_bf16raw(static_cast<__nv_fp8_storage_t>(c));
    EXPECT_TRUE(same_or_both_nan(ours, bf16_bits_to_float(b.x))) << "code " << c;
    if (c != 255 && c != 0) EXPECT_EQ(ours, std::ldexp(1.f, c - 127));
  }
  EXPECT_EQ(ue8m0_to_float(0), std::ldexp(1.f, -127));
}

TEST(FormatsScalar, DecodeUE4M3EveryCode) {
  for (int c = 0; c < 128; ++c)
    EXPECT_TRUE(same_or_both_nan(ue4m3_to_float(static_cast<uint8_t>(c)),
                                 e4m3_to_float(static_cast<uint8_t>(c))));
}

TEST(FormatsScalar, DecodeBF16AndFP16EveryCode) {
  for (uint32_t c = 0; c < 65536; ++c) {
    __nv_bfloat16_raw br;
    br.x = static_cast<uint16_t>(c);
    EXPECT_TRUE(same_or_both_nan(bf16_bits_to_float(br.x), __bfloat162float(__nv_bfloat16(br))))
        << c;
    __half_raw hr;
    hr.x = static_cast<uint16_t>(c);
    ASSERT_TRUE(same_or_both_nan(fp16_bits_to_float(hr.x), __half2float(__half(hr)))) << c;
  }
}

// ---- encoders -------------------------------------------------------------------------------
/// A named pair (ours, reference) over float -> code.
struct Codec {
  std::string name;
  std::function<uint32_t(float)> ours, ref;
  std::function<float(uint32_t)> decode;  // to enumerate the format's boundaries
  int num_codes;
  bool nan_any_payload;  // compare NaN outputs only by NaN-ness (bf16/fp16)
};

std::vector<Codec> codecs() {
  std::vector<Codec> v;
  v.push_back(
      {"e4m3_satfinite", [](float x) { return (uint32_t)float_to_e4m3_satfinite(x); },
       [](float x) { return (uint32_t)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); },
       [](uint32_t c) { return e4m3_to_float((uint8_t)c); }, 256, false});
  v.push_back({"e4m3_nosat", [](float x) { return (uint32_t)float_to_e4m3_nosat(x); },
               [](float x) { return (uint32_t)__nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3); },
               [](uint32_t c) { return e4m3_to_float((uint8_t)c); }, 256, false});
  v.push_back(
      {"e5m2_satfinite", [](float x) { return (uint32_t)float_to_e5m2_satfinite(x); },
       [](float x) { return (uint32_t)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2); },
       [](uint32_t c) { return e5m2_to_float((uint8_t)c); }, 256, false});
  v.push_back({"e5m2_nosat", [](float x) { return (uint32_t)float_to_e5m2_nosat(x); },
               [](float x) { return (uint32_t)__nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2); },
               [](uint32_t c) { return e5m2_to_float((uint8_t)c); }, 256, false});
  v.push_back(
      {"e2m1", [](float x) { return (uint32_t)float_to_e2m1(x); },
       [](float x) { return (uint32_t)__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest); },
       [](uint32_t c) { return e2m1_to_float((uint8_t)c); }, 16, false});
  v.push_back(
      {"ue8m0_rz_satfinite", [](float x) { return (uint32_t)float_to_ue8m0_floor(x); },
       [](float x) { return (uint32_t)__nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero); },
       [](uint32_t c) { return ue8m0_to_float((uint8_t)c); }, 256, false});
  v.push_back(
      {"ue8m0_rp_satfinite", [](float x) { return (uint32_t)float_to_ue8m0_ceil(x); },
       [](float x) { return (uint32_t)__nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf); },
       [](uint32_t c) { return ue8m0_to_float((uint8_t)c); }, 256, false});
  v.push_back({"bf16_rn", [](float x) { return (uint32_t)float_to_bf16_bits(x); },
               [](float x) { return (uint32_t)__nv_bfloat16_raw(__float2bfloat16_rn(x)).x; },
               [](uint32_t c) { return bf16_bits_to_float((uint16_t)c); }, 65536, true});
  v.push_back({"fp16_rn", [](float x) { return (uint32_t)float_to_fp16_bits(x); },
               [](float x) { return (uint32_t)__half_raw(__float2half_rn(x)).x; },
               [](uint32_t c) { return fp16_bits_to_float((uint16_t)c); }, 65536, true});
  return v;
}

/// Every finite non-negative magnitude of the format, sorted, plus the value one step above the
/// largest (so the saturation/overflow threshold becomes a "midpoint" too).
std::vector<double> magnitudes(const Codec& c) {
  std::set<double> s;
  for (int k = 0; k < c.num_codes; ++k) {
    const float f = c.decode(static_cast<uint32_t>(k));
    if (std::isfinite(f)) s.insert(std::fabs(static_cast<double>(f)));
  }
  std::vector<double> m(s.begin(), s.end());
  if (m.size() >= 2) m.push_back(m.back() + (m.back() - m[m.size() - 2]));
  return m;
}

/// The boundary set: each magnitude and each midpoint (exact in double, rounded to fp32), with
/// their +-4 fp32 ulp neighbours, both signs; plus fp32 specials.
std::vector<uint32_t> boundary_patterns(const Codec& c) {
  std::set<uint32_t> pts;
  auto add_around = [&](double v) {
    const float f = static_cast<float>(v);
    if (!std::isfinite(f)) return;
    const int64_t u = bits(f);
    for (int64_t d = -4; d <= 4; ++d) {
      const int64_t w = u + d;
      if (w < 0 || w >= 0x7F800000) continue;
      pts.insert(static_cast<uint32_t>(w));
      pts.insert(static_cast<uint32_t>(w) | 0x80000000u);
    }
  };
  const std::vector<double> m = magnitudes(c);
  for (size_t i = 0; i < m.size(); ++i) {
    add_around(m[i]);
    if (i + 1 < m.size()) add_around(0.5 * (m[i] + m[i + 1]));
  }
  // Every power of two of fp32 (E8M0 boundaries, exponent edges) and fp32 subnormal edges.
  for (int e = -149; e <= 127; ++e) add_around(std::ldexp(1.0, e));
  for (uint32_t u : {0x00000000u, 0x00000001u, 0x00000002u, 0x003FFFFFu, 0x00400000u, 0x00400001u,
                     0x007FFFFFu, 0x00800000u, 0x7F7FFFFFu, 0x7F800000u, 0x7F800001u, 0x7FC00000u,
                     0x7FFFFFFFu, 0x7FA00000u}) {
    pts.insert(u);
    pts.insert(u | 0x80000000u);
  }
  return {pts.begin(), pts.end()};
}

void compare_on(const Codec& c, const std::vector<uint32_t>& pats, int64_t* checked,
                int64_t* failures) {
  for (uint32_t u : pats) {
    const float x = from(u);
    const uint32_t a = c.ours(x), b = c.ref(x);
    bool ok = a == b;
    if (!ok && c.nan_any_payload && std::isnan(x))
      ok = std::isnan(c.decode(a)) && std::isnan(c.decode(b));
    ++*checked;
    if (!ok && ++*failures <= 10)
      ADD_FAILURE() << c.name << ": x=" << x << " (0x" << std::hex << u << ") ours=0x" << a
                    << " cuda=0x" << b << std::dec;
  }
}

TEST(FormatsScalar, EncodeBoundariesVsCudaHost) {
  for (const Codec& c : codecs()) {
    const std::vector<uint32_t> pats = boundary_patterns(c);
    int64_t checked = 0, failures = 0;
    compare_on(c, pats, &checked, &failures);
    EXPECT_EQ(failures, 0) << c.name << ": " << failures << " mismatches of " << checked;
    EXPECT_GT(checked, 1000) << c.name;
  }
}

TEST(FormatsScalar, EncodeDenseSweepVsCudaHost) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto all = codecs();
  // bf16/fp16 are checked at a coarser stride: their boundaries are covered above.
  for (const Codec& c : all) {
    const uint64_t stride = c.num_codes > 256 ? 251 : 61;
    std::vector<uint32_t> pats;
    pats.reserve((1ull << 32) / stride + 1);
    for (uint64_t u = 0; u < (1ull << 32); u += stride) pats.push_back(static_cast<uint32_t>(u));
    int64_t checked = 0, failures = 0;
    compare_on(c, pats, &checked, &failures);
    EXPECT_EQ(failures, 0) << c.name << ": " << failures << " mismatches of " << checked;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ dense sweep ] %zu codecs in %.2f s\n", all.size(), s);
}

// ---- hand-worked cases of formats.md §A.2 ------------------------------------------------------
TEST(FormatsScalar, HandWorkedCases) {
  EXPECT_EQ(float_to_e4m3_satfinite(464.f), 0x7E);  // tie -> even (448)
  EXPECT_EQ(float_to_e4m3_satfinite(465.f), 0x7E);  // saturates
  EXPECT_EQ(float_to_e4m3_nosat(465.f), 0x7F);      // NaN without saturation
  EXPECT_EQ(float_to_e4m3_satfinite(-INFINITY), 0xFE);
  EXPECT_EQ(float_to_e4m3_satfinite(NAN), 0x7F);
  EXPECT_EQ(float_to_e4m3_satfinite(std::ldexp(1.f, -10)), 0x00);
  EXPECT_EQ(float_to_e4m3_satfinite(1.5f * std::ldexp(1.f, -9)), 0x02);
  EXPECT_EQ(float_to_e5m2_nosat(61440.f), 0x7C);
  EXPECT_EQ(float_to_e5m2_satfinite(INFINITY), 0x7B);
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.f};
  const uint8_t tie_codes[] = {0, 2, 2, 4, 4, 6, 6};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(float_to_e2m1(ties[i]), tie_codes[i]) << ties[i];
  EXPECT_EQ(float_to_e2m1(NAN), 0x7);
  EXPECT_EQ(float_to_e2m1(-INFINITY), 0xF);
  EXPECT_EQ(float_to_e2m1(-0.1f), 0x8);
  EXPECT_EQ(float_to_e2m1_canonical(-0.1f), 0x0);
  EXPECT_EQ(float_to_ue8m0_ceil(1.5f), 0x80);
  EXPECT_EQ(float_to_ue8m0_floor(1.5f), 0x7F);
  EXPECT_EQ(float_to_ue8m0_floor(3.f), 0x80);
  EXPECT_EQ(float_to_ue8m0_ceil(3.f), 0x81);
  EXPECT_EQ(float_to_ue8m0_ceil(0.f), 0x00);
  EXPECT_EQ(float_to_ue8m0_ceil(NAN), 0xFF);
  EXPECT_EQ(pack_e2m1x2(0x1, 0xA), 0xA1);
}

}  // namespace

namespace {
/// All 2^32 float32 patterns on the host for every codec (about 2-3 minutes on one core; run with
/// B12X_EXHAUSTIVE=1). The GPU test covers the sm_90 cvt forms against the hardware in ms.
TEST(FormatsScalar, ExhaustiveVsCudaHostOptIn) {
  const char* env = std::getenv("B12X_EXHAUSTIVE");
  if (!env || std::string(env) != "1")
    GTEST_SKIP() << "set B12X_EXHAUSTIVE=1 to compare all 2^32 patterns (minutes on one core)";
  const auto t0 = std::chrono::steady_clock::now();
  for (const Codec& c : codecs()) {
    int64_t bad = 0;
    for (uint64_t u = 0; u < (1ull << 32); ++u) {
      const float x = from(static_cast<uint32_t>(u));
      const uint32_t a = c.ours(x), b = c.ref(x);
      if (a != b && !(c.nan_any_payload && std::isnan(x))) ++bad;
    }
    EXPECT_EQ(bad, 0) << c.name;
    std::printf("[ exhaustive ] %s: %lld mismatches of 2^32\n", c.name.c_str(),
                static_cast<long long>(bad));
  }
  std::printf("[ exhaustive ] %.0f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}
}  // namespace
