// CPU tests of the linear GEMM reference (hand-computed cases per format), the packed layout
// (every packed byte traced back to its checkpoint value) and the bad-input catalogue (validation
// happens before any CUDA call).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "b12x/c_api.h"
#include "b12x/gemm.h"
#include "b12x/reference/linear.h"
#include "b12x/status.h"
#include "c_tensor_desc.h"
#include "formats/ggml.h"
#include "formats/scalar.h"
#include "formats/swizzle.h"
#include "gemm/linear_internal.h"
#include "gemm/linear_layout.h"

namespace b12x {
namespace {

using gemm::LinearFormat;
using gemm::WeightSource;

uint16_t bf16(float v) {
  return fmt::float_to_bf16_bits(v);
}

TensorRef host(void* p, DType t, std::initializer_list<int64_t> shape) {
  return TensorRef::contiguous(p, t, shape);
}

// y = x . W^T for a 1x32 NVFP4 W4A16 weight with two blocks of 16, hand computed.
TEST(GemmReference, Nvfp4W4A16HandComputed) {
  const int64_t N = 2, K = 32;
  std::vector<uint8_t> w(N * K / 2, 0);
  // row 0: element 0 = code 2 (1.0), element 17 = code 0xB (-1.5); row 1: element 31 = 7 (6.0)
  w[0] = 0x02;
  w[8] = 0xB0;
  w[16 + 15] = 0x70;
  std::vector<uint8_t> sc = {0x38 /*1.0*/, 0x40 /*2.0*/, 0x30 /*0.5*/, 0x48 /*4.0*/};
  WeightSource src;
  src.format = LinearFormat::kNvfp4W4A16;
  src.weight = host(w.data(), DType::kUInt8, {N, K / 2});
  src.weight_scale = host(sc.data(), DType::kFP8E4M3, {N, K / 16});
  src.global_scale = 0.25f;
  std::vector<uint16_t> x(K);
  for (int k = 0; k < K; ++k) x[k] = bf16(static_cast<float>(k + 1));
  std::vector<uint16_t> bias = {bf16(10.f), bf16(-2.f)};
  std::vector<double> out(N);
  reference::linear(src, host(x.data(), DType::kBF16, {1, K}), TensorRef{}, 1.0,
                    host(bias.data(), DType::kBF16, {N}), host(out.data(), DType::kFP64, {1, N}));
  // row 0: 0.25 * (1.0*1*1 + (-1.5)*2*18) + 10 = 0.25*(1 - 54) + 10 = -3.25
  EXPECT_DOUBLE_EQ(out[0], -3.25);
  // row 1: 0.25 * (6 * 4.0 * x[31] = 32) - 2 = 192 - 2 = 190
  EXPECT_DOUBLE_EQ(out[1], 190.0);
}

TEST(GemmReference, Mxfp4W4A4SwizzledHandComputed) {
  const int64_t N = 1, K = 64, M = 1;
  std::vector<uint8_t> w(K / 2, 0), xw(K / 2, 0);
  w[0] = 0x03;    // element 0: 1.5
  w[16] = 0x0C;   // element 32: -2.0
  xw[0] = 0x04;   // 2.0
  xw[16] = 0x02;  // 1.0
  std::vector<uint8_t> wsc(fmt::swizzled_scale_bytes(N, 2), 127),
      xsc(fmt::swizzled_scale_bytes(M, 2), 127);
  wsc[fmt::swizzled_scale_offset(0, 0, 2)] = 128;  // 2
  wsc[fmt::swizzled_scale_offset(0, 1, 2)] = 125;  // 0.25
  xsc[fmt::swizzled_scale_offset(0, 1, 2)] = 130;  // 8
  WeightSource src;
  src.format = LinearFormat::kMxfp4;
  src.weight = host(w.data(), DType::kUInt8, {N, K / 2});
  src.weight_scale = host(wsc.data(), DType::kUInt8, {static_cast<int64_t>(wsc.size())});
  src.scale_swizzled = true;
  double out = 0;
  reference::linear(src, host(xw.data(), DType::kUInt8, {M, K / 2}),
                    host(xsc.data(), DType::kUInt8, {static_cast<int64_t>(xsc.size())}), 1.0,
                    TensorRef{}, host(&out, DType::kFP64, {1, 1}));
  // 1.5*2 * 2*1 + (-2*0.25) * (1*8) = 6 - 4 = 2
  EXPECT_DOUBLE_EQ(out, 2.0);
}

TEST(GemmReference, Fp8BlockCallerQuantized) {
  const int64_t N = 130, K = 128, M = 1;
  std::vector<uint8_t> w(N * K, 0);
  w[0] = 0x38;                           // row 0, k 0: 1.0
  w[129 * K + 5] = 0xC0;                 // row 129, k 5: -2.0
  std::vector<float> ws = {0.5f, 3.0f};  // [ceil(130/128)=2, 1]
  std::vector<uint8_t> x(K, 0);
  x[0] = 0x40;  // 2.0
  x[5] = 0x38;  // 1.0
  std::vector<float> xs = {0.25f};
  WeightSource src;
  src.format = LinearFormat::kFp8Block;
  src.weight = host(w.data(), DType::kFP8E4M3, {N, K});
  src.weight_scale = host(ws.data(), DType::kFP32, {2, 1});
  std::vector<double> out(N);
  reference::linear(src, host(x.data(), DType::kFP8E4M3, {M, K}),
                    host(xs.data(), DType::kFP32, {M, 1}), 1.0, TensorRef{},
                    host(out.data(), DType::kFP64, {M, N}));
  EXPECT_DOUBLE_EQ(out[0], 1.0 * 0.5 * 2.0 * 0.25);
  EXPECT_DOUBLE_EQ(out[129], -2.0 * 3.0 * 1.0 * 0.25);
  EXPECT_DOUBLE_EQ(out[1], 0.0);
}

TEST(GemmReference, Fp8TensorOutputScaleAndBias) {
  const int64_t N = 1, K = 32;
  std::vector<uint8_t> w(K, 0x38), x(K, 0x40);  // 1.0 and 2.0
  float os = 0.125f;
  WeightSource src;
  src.format = LinearFormat::kFp8Tensor;
  src.weight = host(w.data(), DType::kFP8E4M3, {N, K});
  src.output_scale = host(&os, DType::kFP32, {1});
  float bias = 1.5f;
  double out = 0;
  reference::linear(src, host(x.data(), DType::kFP8E4M3, {1, K}), TensorRef{}, 1.0,
                    host(&bias, DType::kFP32, {1}), host(&out, DType::kFP64, {1, 1}));
  EXPECT_DOUBLE_EQ(out, 0.125 * 64 + 1.5);
}

TEST(GemmReference, Q8_0HandComputed) {
  const int64_t N = 1, K = 32;
  std::vector<uint8_t> blk(34, 0);
  const uint16_t d = fmt::float_to_fp16_bits(0.5f);
  blk[0] = d & 0xFF;
  blk[1] = d >> 8;
  blk[2] = 4;                              // q0 = 4
  blk[2 + 31] = static_cast<uint8_t>(-3);  // q31 = -3
  WeightSource src;
  src.format = LinearFormat::kQ8_0;
  src.weight = host(blk.data(), DType::kUInt8, {N, 34});
  std::vector<uint16_t> x(K, bf16(0.f));
  x[0] = bf16(3.f);
  x[31] = bf16(2.f);
  double out = 0;
  reference::linear(src, host(x.data(), DType::kBF16, {1, K}), TensorRef{}, 1.0, TensorRef{},
                    host(&out, DType::kFP64, {1, 1}));
  EXPECT_DOUBLE_EQ(out, 0.5 * 4 * 3 + 0.5 * -3 * 2);
}

TEST(GemmReference, Iq2XxsFirstGroup) {
  // One IQ2_XXS block: d = 1, sub-block 0 scale s = 1 -> db = 3/8; group 0 grid index 0
  // (all bytes 8), sign index 1 -> signs = 1 | parity(1)<<7 = 0x81: elements 0 and 7 negative.
  std::vector<uint8_t> blk(66, 0);
  const uint16_t d = fmt::float_to_fp16_bits(1.f);
  blk[0] = d & 0xFF;
  blk[1] = d >> 8;
  const uint32_t w1 = 1u | (1u << 28);
  std::memcpy(&blk[2 + 4], &w1, 4);
  WeightSource src;
  src.format = LinearFormat::kIq2Xxs;
  src.weight = host(blk.data(), DType::kUInt8, {1, 66});
  const auto wd = reference::linear_dequantize_weight(src);
  ASSERT_EQ(wd.size(), 256u);
  EXPECT_DOUBLE_EQ(wd[0], -3.0);  // 3/8 * 8, negative
  EXPECT_DOUBLE_EQ(wd[1], 3.0);
  EXPECT_DOUBLE_EQ(wd[7], -3.0);
}

// ---------------------------------------------------------------- packing ------------------
// Every value of the packed FP4 layout maps back to the checkpoint nibble of frag_coord().
TEST(GemmPack, Fp4LayoutMatchesFragmentCoordinates) {
  const int64_t N = 20, K = 96;
  std::mt19937 g(1);
  std::vector<uint8_t> w(N * K / 2), sc(N * K / 16);
  for (auto& b : w) b = static_cast<uint8_t>(g());
  for (auto& b : sc) b = static_cast<uint8_t>(g() & 0x7F);
  WeightSource src;
  src.format = LinearFormat::kNvfp4W4A16;
  src.weight = host(w.data(), DType::kUInt8, {N, K / 2});
  src.weight_scale = host(sc.data(), DType::kUInt8, {N, K / 16});
  const auto ph = gemm::pack_host(src, "test");
  const auto& geo = ph.geo;
  EXPECT_EQ(geo.NP, 32);
  EXPECT_EQ(geo.KP % 512, 0);
  for (int64_t tile = 0; tile < geo.n16; ++tile)
    for (int64_t a = 0; a < geo.KP / 32; ++a)
      for (int lane = 0; lane < 32; ++lane) {
        uint32_t word[2];
        std::memcpy(word,
                    ph.values.data() + gemm::lin::atom_offset(ph.wfmt, geo.kvec, tile, a, lane), 8);
        for (int s = 0; s < 2; ++s)
          for (int j = 0; j < 4; ++j)
            for (int e = 0; e < 2; ++e) {
              int r, k;
              gemm::lin::frag_coord(lane >> 2, lane & 3, s, j, e, &r, &k);
              const int64_t n = tile * 16 + r, kk = a * 32 + k;
              const uint32_t want = (n < N && kk < K) ? ((kk & 1) ? w[n * K / 2 + kk / 2] >> 4
                                                                  : w[n * K / 2 + kk / 2] & 0xF)
                                                      : 0;
              ASSERT_EQ(gemm::lin::fp4_code_at(word[s], j, e), want)
                  << "tile " << tile << " atom " << a << " lane " << lane;
            }
      }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < K / 16; ++c)
      ASSERT_EQ(ph.scale[n * geo.scale_ld + c], sc[n * K / 16 + c]);
}

// The linear FP4 placement (9-operation BF16 decode): a permutation of the word's 32 bits, and
// every code at every (register, half) decodes to its exact BF16 / FP16 value whatever the other
// seven codes of the word are.
template <int J>
void check_fp4_lin_register(uint32_t w, const uint32_t codes[4][2]) {
  const uint32_t b16 = fmt::fp4_lin_bits<false, J>(w), h16 = fmt::fp4_lin_bits<true, J>(w);
  const float k2p126 = std::ldexp(1.f, 126), k2p14 = std::ldexp(1.f, 14);
  for (int e = 0; e < 2; ++e) {
    const uint32_t c = codes[J][e];
    const uint16_t hb = static_cast<uint16_t>(b16 >> (16 * e));
    const uint16_t hh = static_cast<uint16_t>(h16 >> (16 * e));
    // Exact bits (magnitude at 8..6 / 11..9, sign at 15, nothing else) and exact values.
    ASSERT_EQ(hb, ((c & 7u) << 6) | ((c >> 3) << 15)) << "J=" << J << " e=" << e << " c=" << c;
    ASSERT_EQ(hh, ((c & 7u) << 9) | ((c >> 3) << 15)) << "J=" << J << " e=" << e << " c=" << c;
    const float want = fmt::e2m1_to_float(static_cast<uint8_t>(c));
    ASSERT_EQ(fmt::bf16_bits_to_float(hb) * k2p126, want) << "J=" << J << " c=" << c;
    ASSERT_EQ(fmt::fp16_bits_to_float(hh) * k2p14, want) << "J=" << J << " c=" << c;
  }
}

TEST(GemmPack, Fp4LinearPlacementDecodesEveryCodeExactly) {
  uint32_t seen = 0;
  for (int j = 0; j < 4; ++j)
    for (int e = 0; e < 2; ++e)
      for (int b = 0; b < 4; ++b) {
        const uint32_t bit = 1u << fmt::fp4_lin_pos(j, e, b);
        ASSERT_EQ(seen & bit, 0u) << "j=" << j << " e=" << e << " b=" << b;
        seen |= bit;
      }
  EXPECT_EQ(seen, 0xFFFFFFFFu);
  std::mt19937 gen(15);
  for (int j = 0; j < 4; ++j)
    for (int e = 0; e < 2; ++e)
      for (uint32_t code = 0; code < 16; ++code)
        for (int rep = 0; rep < 64; ++rep) {
          uint32_t codes[4][2], w = 0;
          for (int jj = 0; jj < 4; ++jj)
            for (int ee = 0; ee < 2; ++ee) {
              // rep 0 / 1: all other codes 0 / 15 (every other bit clear / set), then random.
              codes[jj][ee] = rep == 0 ? 0u : rep == 1 ? 15u : gen() & 15u;
            }
          codes[j][e] = code;
          for (int jj = 0; jj < 4; ++jj)
            for (int ee = 0; ee < 2; ++ee) w |= gemm::lin::fp4_place(codes[jj][ee], jj, ee);
          for (int jj = 0; jj < 4; ++jj)
            for (int ee = 0; ee < 2; ++ee)
              ASSERT_EQ(gemm::lin::fp4_code_at(w, jj, ee), codes[jj][ee]);
          check_fp4_lin_register<0>(w, codes);
          check_fp4_lin_register<1>(w, codes);
          check_fp4_lin_register<2>(w, codes);
          check_fp4_lin_register<3>(w, codes);
        }
}

// FP8 weights use the e4m3 m16n8k32 fragment; Q8_0 the 16-bit one.
TEST(GemmPack, Fp8AndQ8LayoutsMatchFragmentCoordinates) {
  const int64_t N = 18, K = 64;
  std::mt19937 g(4);
  std::vector<uint8_t> w(N * K), sc(N * K / 32, 127);
  for (auto& b : w) b = static_cast<uint8_t>(g() & 0x7E);
  WeightSource src;
  src.format = LinearFormat::kMxfp8;
  src.weight = host(w.data(), DType::kFP8E4M3, {N, K});
  src.weight_scale = host(sc.data(), DType::kUE8M0, {N, K / 32});
  const auto ph = gemm::pack_host(src, "test");
  for (int64_t tile = 0; tile < ph.geo.n16; ++tile)
    for (int64_t a = 0; a < ph.geo.KP / 32; ++a)
      for (int lane = 0; lane < 32; ++lane) {
        const uint8_t* v =
            ph.values.data() + gemm::lin::atom_offset(ph.wfmt, ph.geo.kvec, tile, a, lane);
        for (int j = 0; j < 4; ++j)
          for (int e = 0; e < 4; ++e) {
            int r, k;
            gemm::lin::frag_coord_k32(lane >> 2, lane & 3, j, e, &r, &k);
            const int64_t n = tile * 16 + r, kk = a * 32 + k;
            ASSERT_EQ(v[4 * j + e], (n < N && kk < K) ? w[n * K + kk] : 0);
          }
      }
  // Q8_0: one block per row, q = row + k (mod 100), d = 1.
  std::vector<uint8_t> q(N * 68);
  for (int64_t n = 0; n < N; ++n)
    for (int b = 0; b < 2; ++b) {
      q[n * 68 + b * 34] = 0x00;
      q[n * 68 + b * 34 + 1] = 0x3C;
      for (int j = 0; j < 32; ++j)
        q[n * 68 + b * 34 + 2 + j] = static_cast<uint8_t>((n + b * 32 + j) % 100);
    }
  WeightSource qs;
  qs.format = LinearFormat::kQ8_0;
  qs.weight = host(q.data(), DType::kUInt8, {N, 68});
  const auto pq = gemm::pack_host(qs, "test");
  for (int lane = 0; lane < 32; ++lane) {
    const uint8_t* v = pq.values.data() + gemm::lin::atom_offset(pq.wfmt, pq.geo.kvec, 0, 1, lane);
    for (int s = 0; s < 2; ++s)
      for (int h = 0; h < 2; ++h)
        for (int e = 0; e < 4; ++e) {
          const int row = (lane >> 2) + 8 * (e >> 1);
          const int k = 32 + 16 * s + 8 * h + 2 * (lane & 3) + (e & 1);
          ASSERT_EQ(v[4 * (2 * s + h) + e], (row + k) % 100);
        }
  }
}

TEST(GemmPack, SwizzledAndLinearScalesPackIdentically) {
  const int64_t N = 40, K = 64;
  std::mt19937 g(2);
  std::vector<uint8_t> w(N * K / 2), sc(N * K / 32);
  for (auto& b : w) b = static_cast<uint8_t>(g());
  for (auto& b : sc) b = static_cast<uint8_t>(100 + g() % 50);
  std::vector<uint8_t> sw(fmt::swizzled_scale_bytes(N, K / 32), 0);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < K / 32; ++c)
      sw[fmt::swizzled_scale_offset(r, c, K / 32)] = sc[r * K / 32 + c];
  WeightSource a, b;
  a.format = b.format = LinearFormat::kMxfp4W4A16;
  a.weight = b.weight = host(w.data(), DType::kUInt8, {N, K / 2});
  a.weight_scale = host(sc.data(), DType::kUE8M0, {N, K / 32});
  b.weight_scale = host(sw.data(), DType::kUInt8, {static_cast<int64_t>(sw.size())});
  b.scale_swizzled = true;
  const auto pa = gemm::pack_host(a, "t"), pb = gemm::pack_host(b, "t");
  EXPECT_EQ(pa.values, pb.values);
  EXPECT_EQ(pa.scale, pb.scale);
}

TEST(GemmPack, Iq2XsEntriesAndScales) {
  const int64_t N = 3, K = 256;
  std::mt19937 g(3);
  std::vector<uint8_t> w(N * 74);
  for (auto& b : w) b = static_cast<uint8_t>(g());
  WeightSource src;
  src.format = LinearFormat::kIq2Xs;
  src.weight = host(w.data(), DType::kUInt8, {N, 74});
  const auto ph = gemm::pack_host(src, "t");
  for (int64_t n = 0; n < N; ++n) {
    const uint8_t* blk = &w[n * 74];
    for (int q8 = 0; q8 < 32; ++q8) {
      const int64_t a = q8 / 4, q = q8 % 4;
      const int row = static_cast<int>(n % 16), gg = row % 8, half = row / 8;
      uint16_t e;
      std::memcpy(&e,
                  ph.values.data() + gemm::lin::atom_offset(ph.wfmt, ph.geo.kvec, 0, a, gg) +
                      2 * (half * 4 + q),
                  2);
      EXPECT_EQ(e, fmt::ggml::load_u16(blk + 2 + 2 * q8));
    }
    for (int ib = 0; ib < 8; ++ib) EXPECT_EQ(ph.scale2[n * ph.geo.scale2_ld + ib], blk[66 + ib]);
  }
}

// ---------------------------------------------------------------- bad inputs ---------------
// Through the C ABI (status + b12x_last_error), which is also how Python and other languages see
// the errors; validation runs before any CUDA call.

void expect_status(b12x_status st, const char* needle) {
  EXPECT_EQ(st, B12X_ERROR_INVALID_ARGUMENT) << b12x_last_error();
  EXPECT_NE(std::string(b12x_last_error()).find(needle), std::string::npos) << b12x_last_error();
}

b12x_linear_weight_source wsrc(int32_t fmt, const b12x_tensor* w, const b12x_tensor* s) {
  b12x_linear_weight_source src{};
  src.format = fmt;
  src.weight = w;
  src.weight_scale = s;
  src.global_scale = 1.f;
  return src;
}

TEST(GemmValidation, PackRejectsBadSources) {
  std::vector<uint8_t> w(16 * 24), sc(16 * 3);
  b12x_linear_weight h = nullptr;
  b12x_tensor wt = c_desc(w.data(), B12X_DTYPE_UINT8, {16, 24});  // K = 48, not a multiple of 32
  b12x_tensor st = c_desc(sc.data(), B12X_DTYPE_UINT8, {16, 3});
  auto src = wsrc(B12X_LINEAR_NVFP4_W4A16, &wt, &st);
  expect_status(b12x_linear_weight_pack(&src, 0, nullptr, &h), "K=48");
  wt = c_desc(w.data(), B12X_DTYPE_FP32, {16, 24});
  expect_status(b12x_linear_weight_pack(&src, 0, nullptr, &h), "dtype");
  wt = c_desc(w.data(), B12X_DTYPE_UINT8, {16, 16});
  src.weight_scale = nullptr;
  expect_status(b12x_linear_weight_pack(&src, 0, nullptr, &h), "weight_scale");
  b12x_tensor st2 = c_desc(sc.data(), B12X_DTYPE_UINT8, {8, 2});
  src.weight_scale = &st2;
  expect_status(b12x_linear_weight_pack(&src, 0, nullptr, &h), "weight_scale has shape");
  b12x_tensor q = c_desc(w.data(), B12X_DTYPE_UINT8, {4, 35});
  auto qsrc = wsrc(B12X_LINEAR_Q8_0, &q, nullptr);
  expect_status(b12x_linear_weight_pack(&qsrc, 0, nullptr, &h), "blocks");
  std::vector<float> bs(4);
  b12x_tensor bw = c_desc(w.data(), B12X_DTYPE_FP8_E4M3, {2, 128});
  b12x_tensor bsc = c_desc(bs.data(), B12X_DTYPE_FP32, {2, 2});
  auto bsrc = wsrc(B12X_LINEAR_FP8_BLOCK, &bw, &bsc);
  expect_status(b12x_linear_weight_pack(&bsrc, 0, nullptr, &h), "ceil(N/128)");
  b12x_tensor tw = c_desc(w.data(), B12X_DTYPE_FP8_E4M3, {2, 32});
  auto tsrc = wsrc(B12X_LINEAR_FP8_TENSOR, &tw, nullptr);
  expect_status(b12x_linear_weight_pack(&tsrc, 0, nullptr, &h), "output_scale");
  auto bad = wsrc(77, &tw, nullptr);
  expect_status(b12x_linear_weight_pack(&bad, 0, nullptr, &h), "format code");
  EXPECT_EQ(h, nullptr);
}

TEST(GemmValidation, PlanRejectsBadCaps) {
  b12x_linear_caps c{};
  c.format = B12X_LINEAR_NVFP4_W4A16;
  c.max_tokens = 4;
  c.in_features = 100;
  c.out_features = 64;
  c.act_dtype = B12X_DTYPE_BF16;
  c.out_dtype = B12X_DTYPE_BF16;
  b12x_linear_plan p = nullptr;
  expect_status(b12x_linear_plan_create(&c, &p), "K=100");
  c.in_features = 128;
  c.act_dtype = B12X_DTYPE_FP32;
  expect_status(b12x_linear_plan_create(&c, &p), "act_dtype");
  c.act_dtype = B12X_DTYPE_BF16;
  c.out_dtype = B12X_DTYPE_FP8_E4M3;
  expect_status(b12x_linear_plan_create(&c, &p), "out_dtype");
  c.out_dtype = B12X_DTYPE_BF16;
  c.max_tokens = 0;
  expect_status(b12x_linear_plan_create(&c, &p), "max_tokens");
  c.max_tokens = 4;
  c.format = 99;
  expect_status(b12x_linear_plan_create(&c, &p), "format code");
  c.format = B12X_LINEAR_FP8_BLOCK;
  c.in_features = 96;
  expect_status(b12x_linear_plan_create(&c, &p), "multiple of 128");
  c.format = B12X_LINEAR_NVFP4;
  c.in_features = 128;
  c.act_dtype = B12X_DTYPE_BF16;  // W4A4 takes packed FP4 activations
  expect_status(b12x_linear_plan_create(&c, &p), "act_dtype");
  EXPECT_EQ(p, nullptr);
}

TEST(GemmValidation, ReferenceRejectsBadActivations) {
  std::vector<uint8_t> w(4 * 16, 0), sc(4 * 2, 0x38);
  std::vector<uint16_t> x(2 * 64, 0);
  std::vector<double> out(8);
  b12x_tensor wt = c_desc(w.data(), B12X_DTYPE_UINT8, {4, 16});
  b12x_tensor st = c_desc(sc.data(), B12X_DTYPE_UINT8, {4, 2});
  auto src = wsrc(B12X_LINEAR_NVFP4_W4A16, &wt, &st);
  b12x_tensor xt = c_desc(x.data(), B12X_DTYPE_BF16, {2, 64});  // K=64 vs the weight's 32
  b12x_tensor ot = c_desc(out.data(), B12X_DTYPE_FP64, {2, 4});
  expect_status(b12x_ref_linear(&src, &xt, nullptr, 1.0, nullptr, &ot), "K=64");
  xt = c_desc(x.data(), B12X_DTYPE_BF16, {2, 32});
  b12x_tensor bad_out = c_desc(out.data(), B12X_DTYPE_BF16, {2, 4});
  expect_status(b12x_ref_linear(&src, &xt, nullptr, 1.0, nullptr, &bad_out), "out must be");
  EXPECT_EQ(b12x_ref_linear(&src, &xt, nullptr, 1.0, nullptr, &ot), B12X_OK) << b12x_last_error();
}

TEST(GemmValidation, FormatNames) {
  for (int i = 0; i < gemm::kNumLinearFormats; ++i) {
    const auto f = static_cast<LinearFormat>(i);
    EXPECT_STREQ(b12x_linear_format_name(i), gemm::format_name(f));
  }
  EXPECT_STREQ(b12x_linear_format_name(42), "invalid_format");
}

}  // namespace
}  // namespace b12x
