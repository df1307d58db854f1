// CPU tests of the activation quantisers: the reference on hand-worked cases, the scale rules,
// and the validation errors of the public ops and the reference (no GPU needed: the ops validate
// host metadata before touching the device).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "b12x/c_api/quantize.h"
#include "b12x/quantize.h"
#include "b12x/reference/quantize.h"
#include "b12x/status.h"
#include "formats/scalar.h"
#include "formats/swizzle.h"
#include "gemm/quantize_rules.h"
#include "test_errors.h"

namespace b12x {
namespace {

std::vector<uint16_t> bf16(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = fmt::float_to_bf16_bits(v[i]);
  return h;
}

TensorRef u8(std::vector<uint8_t>& v) {
  return TensorRef::contiguous(v.data(), DType::kUInt8, {static_cast<int64_t>(v.size())});
}

using test::expect_error;

TEST(QuantizeRules, MxScaledIsExactInverseOfScale) {
  for (int c = 1; c < 255; ++c) {
    const float y = gemm::qrules::mx_scaled(fmt::ue8m0_to_float(static_cast<uint8_t>(c)),
                                            static_cast<uint8_t>(c));
    EXPECT_EQ(y, 1.f) << c;
  }
}

/// The fast E2M1 encoder the kernels use on sm_89/sm_90 equals the scalar.h emulation on
/// every 61st fp32 bit pattern (all signs, exponents, NaN/Inf) plus every boundary +-1 ulp.
TEST(QuantizeRules, E2m1FastEncoderMatchesEmulation) {
  int64_t n = 0;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 61, ++n) {
    const float y = fmt::f32_from_bits(static_cast<uint32_t>(u));
    ASSERT_EQ(gemm::qrules::e2m1_code_canonical_fast(y), fmt::float_to_e2m1_canonical(y))
        << std::hex << u;
  }
  for (float b : {0.f, 0.25f, 0.5f, 0.75f, 1.f, 1.25f, 1.5f, 1.75f, 2.f, 2.5f, 3.f, 3.5f, 4.f, 5.f,
                  6.f, 7.f, 1e30f})
    for (int d = -2; d <= 2; ++d)
      for (uint32_t sign : {0u, 0x80000000u}) {
        const uint32_t bits = (fmt::f32_bits(b) + d) ^ sign;
        const float y = fmt::f32_from_bits(bits);
        EXPECT_EQ(gemm::qrules::e2m1_code_canonical_fast(y), fmt::float_to_e2m1_canonical(y))
            << b << " " << d;
      }
  EXPECT_GT(n, 70000000);
}

TEST(QuantizeReference, Mxfp8HandWorked) {
  // One row, K = 64: block 0 amax 448 -> scale 2^0 (byte 127); block 1 amax 1 -> 1/448 rounded
  // up to 2^-8 (byte 119), values x * 2^8.
  std::vector<float> x(64, 0.f);
  x[0] = 448.f;
  x[1] = -1.f;
  x[2] = 0.3f;
  x[32] = 1.f;
  x[33] = -0.5f;
  auto hx = bf16(x);
  std::vector<uint8_t> values(64), rows(2), swz(128 * 4);
  reference::quantize_mxfp8(TensorRef::contiguous(hx.data(), DType::kBF16, {1, 64}), u8(values),
                            u8(rows), u8(swz));
  EXPECT_EQ(rows[0], 127);
  EXPECT_EQ(rows[1], 119);
  EXPECT_EQ(values[0], 0x7E);  // 448
  EXPECT_EQ(values[1], 0xB8);  // -1
  EXPECT_EQ(values[2], fmt::float_to_e4m3_satfinite(fmt::round_to_bf16(0.3f)));
  EXPECT_EQ(values[32], fmt::float_to_e4m3_satfinite(256.f));
  EXPECT_EQ(values[33], fmt::float_to_e4m3_satfinite(-128.f));
  EXPECT_EQ(values[5], 0);
  // Swizzled: (0,0) at 0, (0,1) at 1, padding columns 2,3 and rows 1..127 are 127.
  EXPECT_EQ(swz[0], 127);
  EXPECT_EQ(swz[1], 119);
  for (int64_t r = 0; r < 128; ++r)
    for (int64_t c = 0; c < 4; ++c)
      if (r > 0 || c > 1) EXPECT_EQ(swz[fmt::swizzled_scale_offset(r, c, 2)], 127) << r << "," << c;
}

TEST(QuantizeReference, Nvfp4HandWorked) {
  // gs = 1: block amax 6 -> SF = 1 (0x38), values encode directly; block 2 all zero -> SF 0.
  std::vector<float> x(48, 0.f);
  x[0] = 6.f;
  x[1] = -0.5f;
  x[2] = 2.5f;   // tie -> 2
  x[3] = -0.1f;  // -> -0 -> canonical +0
  x[16] = 12.f;  // SF = 2 (0x40): 12/2 = 6
  x[17] = 3.f;   // 1.5
  auto hx = bf16(x);
  std::vector<uint8_t> packed(24), swz(128 * 4);
  reference::quantize_nvfp4(TensorRef::contiguous(hx.data(), DType::kBF16, {1, 48}), 1.f,
                            u8(packed), u8(swz));
  EXPECT_EQ(swz[0], 0x38);
  EXPECT_EQ(swz[1], 0x40);
  EXPECT_EQ(swz[2], 0x00);
  EXPECT_EQ(swz[3], 0x00);     // padding (NVFP4: 0)
  EXPECT_EQ(packed[0], 0x97);  // lo = 6 (0x7), hi = -0.5 (0x9)
  EXPECT_EQ(packed[1], 0x04);  // lo = 2 (0x4), hi = +0 (canonical)
  EXPECT_EQ(packed[8], 0x37);  // 6 and 1.5
  for (int i = 16; i < 24; ++i) EXPECT_EQ(packed[i], 0) << i;
}

TEST(QuantizeReference, Mxfp4CeilRule) {
  // amax 7 -> ceil(log2(7/6)) = 1 -> byte 128; values x/2: 7/2 = 3.5 -> tie to 4 (0x6).
  std::vector<float> x(32, 0.f);
  x[0] = 7.f;
  x[1] = -1.f;
  auto hx = bf16(x);
  std::vector<uint8_t> packed(16), swz(512);
  reference::quantize_mxfp4(TensorRef::contiguous(hx.data(), DType::kBF16, {1, 32}), u8(packed),
                            u8(swz));
  EXPECT_EQ(swz[0], 128);
  EXPECT_EQ(swz[1], 127);      // padding
  EXPECT_EQ(packed[0], 0x96);  // lo 4 (0x6), hi -0.5 (0x9)
}

TEST(QuantizeReference, Fp8Group128AndTensor) {
  std::vector<float> x(256, 0.f);
  x[0] = 896.f;  // group 0: s = 2, q = 448
  x[1] = -3.f;   // q = -1.5
  auto hx = bf16(x);
  std::vector<uint8_t> values(256);
  std::vector<float> scales(2);
  reference::quantize_fp8_group128(TensorRef::contiguous(hx.data(), DType::kBF16, {1, 256}),
                                   u8(values),
                                   TensorRef::contiguous(scales.data(), DType::kFP32, {1, 2}));
  EXPECT_EQ(scales[0], 2.f);
  EXPECT_EQ(scales[1], 0.f);  // all-zero group
  EXPECT_EQ(values[0], 0x7E);
  EXPECT_EQ(values[1], fmt::float_to_e4m3_satfinite(-1.5f));
  EXPECT_EQ(values[200], 0);
  // Per tensor with scale 1: 896 saturates to 448; any K (here 3) works.
  std::vector<uint8_t> v3(3);
  reference::quantize_fp8_tensor(TensorRef::contiguous(hx.data(), DType::kBF16, {1, 3}), 1.f,
                                 u8(v3));
  EXPECT_EQ(v3[0], 0x7E);
  EXPECT_EQ(v3[1], fmt::float_to_e4m3_satfinite(-3.f));
}

TEST(QuantizeReference, StridedInputMatchesContiguous) {
  std::vector<float> x(2 * 40);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * i) * (1 + i % 7);
  auto hs = bf16(x);
  std::vector<uint16_t> hc(64);
  for (int r = 0; r < 2; ++r) std::memcpy(&hc[r * 32], &hs[r * 40], 64);
  TensorRef xs = TensorRef::contiguous(hs.data(), DType::kBF16, {2, 32});
  xs.stride[0] = 40;
  std::vector<uint8_t> a(64), b(64), sa(2), sb(2);
  reference::quantize_mxfp8(xs, u8(a), u8(sa), TensorRef{});
  reference::quantize_mxfp8(TensorRef::contiguous(hc.data(), DType::kBF16, {2, 32}), u8(b), u8(sb),
                            TensorRef{});
  EXPECT_EQ(a, b);
  EXPECT_EQ(sa, sb);
}

// ---- validation errors (public ops on fake device pointers: nothing is launched) ------------
struct DevArgs {
  alignas(16) uint8_t storage[64];
  TensorRef x(int64_t M, int64_t K, DType dt = DType::kBF16) {
    return TensorRef::contiguous(storage, dt, {M, K}, 0);
  }
  TensorRef bytes(int64_t n, DType dt = DType::kUInt8) {
    return TensorRef::contiguous(storage, dt, {n}, 0);
  }
  TensorRef scalar() { return TensorRef::contiguous(storage, DType::kFP32, {1}, 0); }
};

TEST(QuantizeValidation, Nvfp4) {
  DevArgs d;
  const Status bad = Status::kInvalidArgument;
  expect_error([&] { quantize_nvfp4(d.x(4, 40), d.scalar(), d.bytes(80), d.bytes(512), nullptr); },
               bad, {"quantize_nvfp4", "K=40", "multiple of 16"});
  expect_error(
      [&] {
        quantize_nvfp4(d.x(4, 32, DType::kFP32), d.scalar(), d.bytes(64), d.bytes(512), nullptr);
      },
      bad, {"quantize_nvfp4", "x", "fp32", "bf16, fp16"});
  expect_error([&] { quantize_nvfp4(d.x(4, 32), d.scalar(), d.bytes(63), d.bytes(512), nullptr); },
               bad, {"packed", "63", "expected 64"});
  expect_error([&] { quantize_nvfp4(d.x(4, 32), d.scalar(), d.bytes(64), d.bytes(256), nullptr); },
               bad, {"scale_swizzled", "256", "expected 512", "128 x 4"});
  expect_error(
      [&] {
        quantize_nvfp4(d.x(4, 32), d.bytes(4, DType::kFP32), d.bytes(64), d.bytes(512), nullptr);
      },
      bad, {"global_scale", "one fp32"});
  float host = 1.f;
  expect_error(
      [&] {
        quantize_nvfp4(d.x(4, 32), TensorRef::contiguous(&host, DType::kFP32, {1}), d.bytes(64),
                       d.bytes(512), nullptr);
      },
      bad, {"global_scale", "host"});
  TensorRef xh = d.x(4, 32);
  xh.device = kHostDevice;
  expect_error([&] { quantize_nvfp4(xh, d.scalar(), d.bytes(64), d.bytes(512), nullptr); }, bad,
               {"x must be on a CUDA device"});
  TensorRef xt = d.x(4, 32);
  xt.stride[1] = 2;
  xt.stride[0] = 64;
  expect_error([&] { quantize_nvfp4(xt, d.scalar(), d.bytes(64), d.bytes(512), nullptr); }, bad,
               {"contiguous in its last dim"});
  TensorRef out_other = d.bytes(64);
  out_other.device = 1;
  expect_error([&] { quantize_nvfp4(d.x(4, 32), d.scalar(), out_other, d.bytes(512), nullptr); },
               bad, {"packed", "device 1", "expected device 0"});
  expect_error(
      [&] {
        quantize_nvfp4(d.x(4, 32), d.scalar(), d.bytes(64, DType::kFP16), d.bytes(512), nullptr);
      },
      bad, {"packed", "fp16"});
}

TEST(QuantizeValidation, Mxfp8Mxfp4Fp8) {
  DevArgs d;
  const Status bad = Status::kInvalidArgument;
  expect_error([&] { quantize_mxfp8(d.x(2, 48), d.bytes(96), d.bytes(3), TensorRef{}, nullptr); },
               bad, {"quantize_mxfp8", "K=48", "multiple of 32"});
  expect_error([&] { quantize_mxfp8(d.x(2, 64), d.bytes(128), TensorRef{}, TensorRef{}, nullptr); },
               bad, {"neither scale_rows nor scale_swizzled"});
  expect_error([&] { quantize_mxfp8(d.x(2, 64), d.bytes(128), d.bytes(5), TensorRef{}, nullptr); },
               bad, {"scale_rows", "expected 4"});
  expect_error(
      [&] {
        quantize_mxfp8(d.x(2, 64), d.bytes(128), d.bytes(4, DType::kFP8E4M3), TensorRef{}, nullptr);
      },
      bad, {"scale_rows", "fp8_e4m3", "ue8m0, uint8"});
  expect_error([&] { quantize_mxfp4(d.x(2, 64), d.bytes(63), d.bytes(512), nullptr); }, bad,
               {"quantize_mxfp4", "packed", "expected 64"});
  TensorRef x2 = d.x(2, 64);
  x2.stride[0] = 32;  // row stride below K
  expect_error([&] { quantize_mxfp4(x2, d.bytes(64), d.bytes(512), nullptr); }, bad,
               {"row stride 32", "K=64"});
  expect_error(
      [&] { quantize_fp8_group128(d.x(2, 64), d.bytes(128), d.bytes(4, DType::kFP32), nullptr); },
      bad, {"quantize_fp8_group128", "K=64", "multiple of 128"});
  expect_error([&] { quantize_fp8_group128(d.x(1, 128), d.bytes(128), d.bytes(4), nullptr); }, bad,
               {"scales", "uint8", "fp32"});
  expect_error([&] { quantize_fp8_tensor(d.x(1, 7), d.scalar(), d.bytes(8), nullptr); }, bad,
               {"quantize_fp8_tensor", "values", "expected 7"});
  expect_error([&] { quantize_fp8_tensor(d.x(1, 7), TensorRef{}, d.bytes(7), nullptr); }, bad,
               {"scale", "missing"});
  TensorRef x3 = d.x(1, 7);
  x3.ndim = 3;
  x3.shape[2] = 1;
  expect_error([&] { quantize_fp8_tensor(x3, d.scalar(), d.bytes(7), nullptr); }, bad,
               {"x must be 2-D"});
}

TEST(QuantizeValidation, ReferenceRejectsDeviceTensors) {
  DevArgs d;
  expect_error([&] { reference::quantize_mxfp4(d.x(1, 32), d.bytes(16), d.bytes(512)); },
               Status::kInvalidArgument, {"reference::quantize_mxfp4", "x", "device 0"});
}

TEST(QuantizeValidation, SwizzledBytes) {
  EXPECT_EQ(swizzled_scale_bytes(1, 1), 512);
  EXPECT_EQ(swizzled_scale_bytes(129, 5), 256 * 8);
  EXPECT_EQ(swizzled_scale_bytes(0, 4), 0);
  EXPECT_THROW(swizzled_scale_bytes(-1, 4), Error);
}

TEST(QuantizeCApi, StatusCodesAndMessages) {
  int64_t bytes = 0;
  EXPECT_EQ(b12x_swizzled_scale_bytes(130, 5, &bytes), B12X_OK);
  EXPECT_EQ(bytes, 256 * 8);
  EXPECT_EQ(b12x_swizzled_scale_bytes(1, 1, nullptr), B12X_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(b12x_quantize_mxfp4(nullptr, nullptr, nullptr, nullptr), B12X_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(b12x_last_error()).find("is required but was not given"), std::string::npos)
      << b12x_last_error();
  std::vector<uint16_t> x(64, 0x3F80);  // bf16 1.0
  std::vector<uint8_t> v(64), s(4);
  b12x_tensor tx{x.data(), B12X_DTYPE_BF16, 2, {2, 32}, {32, 1}, B12X_HOST_DEVICE};
  b12x_tensor tv{v.data(), B12X_DTYPE_UINT8, 2, {2, 32}, {32, 1}, B12X_HOST_DEVICE};
  b12x_tensor ts{s.data(), B12X_DTYPE_UINT8, 2, {2, 1}, {1, 1}, B12X_HOST_DEVICE};
  EXPECT_EQ(b12x_ref_quantize_mxfp8(&tx, &tv, &ts, nullptr), B12X_OK);
  EXPECT_EQ(s[0], 119);   // pow2-ceil(1/448) = 2^-8
  EXPECT_EQ(v[0], 0x78);  // 256 in E4M3
  // The GPU op rejects host tensors with a message naming the argument.
  EXPECT_EQ(b12x_quantize_mxfp8(&tx, &tv, &ts, nullptr, nullptr), B12X_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(b12x_last_error()).find("x must be on a CUDA device"), std::string::npos);
}

}  // namespace
}  // namespace b12x
