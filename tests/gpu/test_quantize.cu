// GPU tests of the activation quantisers: bit-exact against the CPU reference over many shapes
// (M = 1 and non-multiples of 128, K at and off 128 boundaries, strided and unaligned rows),
// poisoned outputs (every byte incl. the swizzle padding must be written), the raw launchers the
// GEMM/MoE ops call, and CUDA-graph capture + replay with changed inputs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "b12x/quantize.h"
#include "b12x/reference/quantize.h"
#include "b12x/status.h"
#include "formats/scalar.h"
#include "formats/swizzle.h"
#include "gemm/quantize_launch.h"
#include "gpu_test_util.h"

namespace b12x {
namespace {

using test::DeviceBuffer;

enum class Fmt { kNvfp4, kMxfp8, kMxfp4, kFp8Tensor, kFp8Group };

const char* fmt_name(Fmt f) {
  switch (f) {
    case Fmt::kNvfp4:
      return "nvfp4";
    case Fmt::kMxfp8:
      return "mxfp8";
    case Fmt::kMxfp4:
      return "mxfp4";
    case Fmt::kFp8Tensor:
      return "fp8_tensor";
    case Fmt::kFp8Group:
      return "fp8_group128";
  }
  return "?";
}

int block_of(Fmt f) {
  switch (f) {
    case Fmt::kNvfp4:
      return 16;
    case Fmt::kMxfp8:
    case Fmt::kMxfp4:
      return 32;
    case Fmt::kFp8Group:
      return 128;
    default:
      return 1;
  }
}

/// Host input [M, ldx] of bf16/fp16 bit patterns: normal values with per-row and per-block
/// magnitudes spread over many binades (exercises the scale range), some all-zero blocks, and a
/// few exact ties / large values.
std::vector<uint16_t> make_input(int64_t M, int64_t K, int64_t ldx, DType dt, int block,
                                 float spread_log2 = 12.f) {
  auto& g = test::rng();
  std::normal_distribution<float> n(0.f, 1.f);
  std::uniform_real_distribution<float> u(-spread_log2, spread_log2);
  std::uniform_int_distribution<int> pick(0, 19);
  const int b = block > 1 ? block : 32;
  std::vector<uint16_t> h(static_cast<size_t>(M * ldx), 0x7FFF);  // gap columns: NaN sentinels
  for (int64_t r = 0; r < M; ++r) {
    for (int64_t k0 = 0; k0 < K; k0 += b) {
      const int kind = pick(g);
      const float mag = std::exp2(u(g));
      for (int64_t k = k0; k < std::min<int64_t>(K, k0 + b); ++k) {
        float v = n(g) * mag;
        if (kind == 0) v = 0.f;                                   // all-zero block
        if (kind == 1 && (k % 3 == 0)) v = 0.f;                   // partly zero
        if (kind == 2) v = std::round(n(g) * 8.f) * 0.25f * mag;  // coarse grid: FP4/FP8 ties
        const float lim = dt == DType::kFP16 ? 60000.f : 3e38f;
        v = std::fmax(-lim, std::fmin(lim, v));
        h[r * ldx + k] =
            dt == DType::kBF16 ? fmt::float_to_bf16_bits(v) : fmt::float_to_fp16_bits(v);
      }
    }
  }
  return h;
}

TensorRef host_x(std::vector<uint16_t>& h, DType dt, int64_t M, int64_t K, int64_t ldx) {
  TensorRef t = TensorRef::contiguous(h.data(), dt, {M, K});
  t.stride[0] = ldx;
  return t;
}

TensorRef dev_x(const uint16_t* p, DType dt, int64_t M, int64_t K, int64_t ldx) {
  TensorRef t = TensorRef::contiguous(const_cast<uint16_t*>(p), dt, {M, K}, 0);
  t.stride[0] = ldx;
  return t;
}

struct Outputs {
  int64_t values_bytes = 0, rows_bytes = 0, swz_bytes = 0, f32_count = 0;
};

Outputs sizes(Fmt f, int64_t M, int64_t K) {
  Outputs o;
  switch (f) {
    case Fmt::kNvfp4:
      o.values_bytes = M * K / 2;
      o.swz_bytes = fmt::swizzled_scale_bytes(M, K / 16);
      break;
    case Fmt::kMxfp8:
      o.values_bytes = M * K;
      o.rows_bytes = M * K / 32;
      o.swz_bytes = fmt::swizzled_scale_bytes(M, K / 32);
      break;
    case Fmt::kMxfp4:
      o.values_bytes = M * K / 2;
      o.swz_bytes = fmt::swizzled_scale_bytes(M, K / 32);
      break;
    case Fmt::kFp8Tensor:
      o.values_bytes = M * K;
      break;
    case Fmt::kFp8Group:
      o.values_bytes = M * K;
      o.f32_count = M * K / 128;
      break;
  }
  return o;
}

struct HostResult {
  std::vector<uint8_t> values, rows, swz;
  std::vector<float> f32;
};

HostResult run_reference(Fmt f, std::vector<uint16_t>& hx, DType dt, int64_t M, int64_t K,
                         int64_t ldx, float scalar) {
  const Outputs o = sizes(f, M, K);
  HostResult r;
  r.values.assign(o.values_bytes, 0xAB);
  r.rows.assign(o.rows_bytes, 0xAB);
  r.swz.assign(o.swz_bytes, 0xAB);
  r.f32.assign(o.f32_count, -1.f);
  TensorRef x = host_x(hx, dt, M, K, ldx);
  auto u8 = [](std::vector<uint8_t>& v) {
    return TensorRef::contiguous(v.data(), DType::kUInt8, {static_cast<int64_t>(v.size())});
  };
  switch (f) {
    case Fmt::kNvfp4:
      reference::quantize_nvfp4(x, scalar, u8(r.values), u8(r.swz));
      break;
    case Fmt::kMxfp8:
      reference::quantize_mxfp8(x, u8(r.values), u8(r.rows), u8(r.swz));
      break;
    case Fmt::kMxfp4:
      reference::quantize_mxfp4(x, u8(r.values), u8(r.swz));
      break;
    case Fmt::kFp8Tensor:
      reference::quantize_fp8_tensor(x, scalar, u8(r.values));
      break;
    case Fmt::kFp8Group:
      reference::quantize_fp8_group128(
          x, u8(r.values),
          TensorRef::contiguous(r.f32.data(), DType::kFP32, {static_cast<int64_t>(r.f32.size())}));
      break;
  }
  return r;
}

struct DeviceResult {
  DeviceBuffer<uint8_t> values, rows, swz;
  DeviceBuffer<float> f32;
  explicit DeviceResult(const Outputs& o)
      : values(o.values_bytes + 8),
        rows(o.rows_bytes + 8),
        swz(o.swz_bytes + 8),
        f32(o.f32_count + 2) {}
  void poison() {
    values.poison(0xCD);
    rows.poison(0xCD);
    swz.poison(0xCD);
    f32.poison(0xFF);
  }
};

/// Launch through the public op (use_launcher = false) or the raw launcher.
void launch(Fmt f, const uint16_t* dx, DType dt, int64_t M, int64_t K, int64_t ldx,
            const float* dscalar, DeviceResult& d, const Outputs& o, bool use_launcher,
            bool with_rows, bool with_swz, cudaStream_t s) {
  auto st = reinterpret_cast<Stream>(s);
  if (use_launcher) {
    // The knobs as set now (the FP8 1x128 kernel test switches B12X_QUANT_FP8G128 in-process;
    // the public ops keep the options of their first call).
    int dev = 0;
    B12X_TEST_CUDA(cudaGetDevice(&dev));
    const gemm::ActQuant q = gemm::act_quant_options(dev);
    switch (f) {
      case Fmt::kNvfp4:
        gemm::launch_quantize_nvfp4(dx, dt, M, K, ldx, dscalar, d.values.ptr, d.swz.ptr, q, st);
        break;
      case Fmt::kMxfp8:
        gemm::launch_quantize_mxfp8(dx, dt, M, K, ldx, d.values.ptr,
                                    with_rows ? d.rows.ptr : nullptr,
                                    with_swz ? d.swz.ptr : nullptr, q, st);
        break;
      case Fmt::kMxfp4:
        gemm::launch_quantize_mxfp4(dx, dt, M, K, ldx, d.values.ptr, d.swz.ptr, q, st);
        break;
      case Fmt::kFp8Tensor:
        gemm::launch_quantize_fp8_tensor(dx, dt, M, K, ldx, dscalar, d.values.ptr, q, st);
        break;
      case Fmt::kFp8Group:
        gemm::launch_quantize_fp8_group128(dx, dt, M, K, ldx, d.values.ptr, d.f32.ptr, q, st);
        break;
    }
    return;
  }
  const TensorRef x = dev_x(dx, dt, M, K, ldx);
  auto u8 = [](uint8_t* p, int64_t n) { return TensorRef::contiguous(p, DType::kUInt8, {n}, 0); };
  const TensorRef sc = TensorRef::contiguous(const_cast<float*>(dscalar), DType::kFP32, {1}, 0);
  const TensorRef none;
  switch (f) {
    case Fmt::kNvfp4:
      quantize_nvfp4(x, sc, u8(d.values.ptr, o.values_bytes), u8(d.swz.ptr, o.swz_bytes), st);
      break;
    case Fmt::kMxfp8:
      quantize_mxfp8(x, u8(d.values.ptr, o.values_bytes),
                     with_rows ? u8(d.rows.ptr, o.rows_bytes) : none,
                     with_swz ? u8(d.swz.ptr, o.swz_bytes) : none, st);
      break;
    case Fmt::kMxfp4:
      quantize_mxfp4(x, u8(d.values.ptr, o.values_bytes), u8(d.swz.ptr, o.swz_bytes), st);
      break;
    case Fmt::kFp8Tensor:
      quantize_fp8_tensor(x, sc, u8(d.values.ptr, o.values_bytes), st);
      break;
    case Fmt::kFp8Group:
      quantize_fp8_group128(x, u8(d.values.ptr, o.values_bytes),
                            TensorRef::contiguous(d.f32.ptr, DType::kFP32, {o.f32_count}, 0), st);
      break;
  }
}

/// Byte-exact comparison of the first n bytes; also checks the guard bytes after n are intact.
::testing::AssertionResult same_bytes(const char* what, const std::vector<uint8_t>& got,
                                      const std::vector<uint8_t>& want, uint8_t guard) {
  for (size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i])
      return ::testing::AssertionFailure()
             << what << ": first mismatch at byte " << i << " of " << want.size() << ": got 0x"
             << std::hex << int(got[i]) << " want 0x" << int(want[i]) << std::dec;
  for (size_t i = want.size(); i < got.size(); ++i)
    if (got[i] != guard)
      return ::testing::AssertionFailure() << what << ": wrote past the end at byte " << i;
  return ::testing::AssertionSuccess();
}

float tensor_amax(const std::vector<uint16_t>& h, DType dt, int64_t M, int64_t K, int64_t ldx) {
  float a = 0.f;
  for (int64_t r = 0; r < M; ++r)
    for (int64_t k = 0; k < K; ++k) {
      const uint16_t b = h[r * ldx + k];
      a = std::fmax(a, std::fabs(dt == DType::kBF16 ? fmt::bf16_bits_to_float(b)
                                                    : fmt::fp16_bits_to_float(b)));
    }
  return a;
}

/// Runs the quantiser on hx (device copy) and compares every output with want (guard bytes
/// included: outputs not requested must stay untouched).
void expect_device_matches(Fmt f, const std::vector<uint16_t>& hx, DType dt, int64_t M, int64_t K,
                           int64_t ldx, float scalar, const HostResult& want, bool use_launcher,
                           bool with_rows, bool with_swz) {
  // An odd ldx makes rows 2-byte aligned only: the kernels take their scalar-load path.
  DeviceBuffer<uint16_t> dx(hx.size() + 8);
  B12X_TEST_CUDA(cudaMemcpy(dx.ptr, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  DeviceBuffer<float> dscalar(1);
  dscalar.upload({scalar});
  const Outputs o = sizes(f, M, K);
  DeviceResult d(o);
  d.poison();
  launch(f, dx.ptr, dt, M, K, ldx, dscalar.ptr, d, o, use_launcher, with_rows, with_swz, nullptr);
  B12X_TEST_CUDA(cudaDeviceSynchronize());
  auto got_v = d.values.download();
  EXPECT_TRUE(same_bytes("values", got_v, want.values, 0xCD));
  if (o.rows_bytes) {
    auto got = d.rows.download();
    EXPECT_TRUE(same_bytes("scale_rows", got, want.rows, 0xCD));
  }
  if (o.swz_bytes) {
    auto got = d.swz.download();
    EXPECT_TRUE(same_bytes("scale_swizzled", got, want.swz, 0xCD));
  }
  if (o.f32_count) {
    auto got = d.f32.download();
    for (int64_t i = 0; i < o.f32_count; ++i)
      ASSERT_EQ(fmt::f32_bits(got[i]), fmt::f32_bits(want.f32[i])) << "scale " << i;
  }
}

void check_case(Fmt f, DType dt, int64_t M, int64_t K, int64_t ldx_extra, bool use_launcher,
                bool with_rows = true, bool with_swz = true, float spread_log2 = 12.f) {
  SCOPED_TRACE(std::string(fmt_name(f)) + " " + dtype_name(dt) + " M=" + std::to_string(M) +
               " K=" + std::to_string(K) + " ldx=K+" + std::to_string(ldx_extra) +
               (use_launcher ? " (launcher)" : " (op)"));
  const int64_t ldx = K + ldx_extra;
  auto hx = make_input(M, K, ldx, dt, block_of(f), spread_log2);
  const float amax = tensor_amax(hx, dt, M, K, ldx);
  float scalar = 1.f;
  if (f == Fmt::kNvfp4) scalar = amax > 0 ? 448.f * 6.f / amax : 1.f;
  if (f == Fmt::kFp8Tensor) scalar = amax > 0 ? amax / 448.f * 0.75f : 1.f;  // some saturate
  HostResult want = run_reference(f, hx, dt, M, K, ldx, scalar);
  if (!with_rows) want.rows.clear();
  if (!with_swz) want.swz.clear();

  expect_device_matches(f, hx, dt, M, K, ldx, scalar, want, use_launcher, with_rows, with_swz);
}

const Fmt kAllFormats[] = {Fmt::kNvfp4, Fmt::kMxfp8, Fmt::kMxfp4, Fmt::kFp8Tensor, Fmt::kFp8Group};

std::vector<int64_t> ks_for(Fmt f) {
  switch (f) {
    case Fmt::kNvfp4:
      return {16, 48, 128, 144, 1024, 4112};
    case Fmt::kMxfp8:
    case Fmt::kMxfp4:
      return {32, 96, 128, 160, 2048, 4128};
    case Fmt::kFp8Group:
      return {128, 384, 4096};
    case Fmt::kFp8Tensor:
      return {1, 7, 100, 128, 4103};
  }
  return {};
}

TEST(QuantizeGpu, OpsBitExactAcrossShapes) {
  B12X_REQUIRE_GPU();
  for (Fmt f : kAllFormats)
    for (int64_t M : {1, 3, 127, 128, 129, 300})
      for (int64_t K : ks_for(f))
        for (DType dt : {DType::kBF16, DType::kFP16}) {
          if (M * K > 300 * 1024 && dt == DType::kFP16) continue;
          check_case(f, dt, M, K, 0, false);
        }
}

TEST(QuantizeGpu, StridedAndUnalignedRows) {
  B12X_REQUIRE_GPU();
  for (Fmt f : kAllFormats)
    for (int64_t extra : {8, 1, 3})
      for (int64_t M : {1, 5, 130}) check_case(f, DType::kBF16, M, ks_for(f)[2], extra, false);
}

TEST(QuantizeGpu, LaunchersBitExact) {
  B12X_REQUIRE_GPU();
  for (Fmt f : kAllFormats)
    for (int64_t M : {1, 2, 16, 200, 1000, 2048})
      check_case(f, DType::kBF16, M, f == Fmt::kFp8Tensor ? 4096 : ks_for(f).back(), 0, true);
  // MXFP8 with only one of the two scale outputs.
  check_case(Fmt::kMxfp8, DType::kBF16, 77, 256, 0, true, true, false);
  check_case(Fmt::kMxfp8, DType::kFP16, 77, 256, 0, true, false, true);
}

TEST(QuantizeGpu, LargeM) {
  B12X_REQUIRE_GPU();
  check_case(Fmt::kNvfp4, DType::kBF16, 4097, 2048, 0, false);
  check_case(Fmt::kMxfp8, DType::kBF16, 4097, 2048, 0, false);
}

TEST(QuantizeGpu, ZeroRowsIsNoOp) {
  B12X_REQUIRE_GPU();
  DeviceBuffer<uint16_t> dx(64);
  DeviceBuffer<uint8_t> out(64);
  DeviceBuffer<float> s(1);
  s.upload({1.f});
  out.poison(0xCD);
  const TensorRef x = dev_x(dx.ptr, DType::kBF16, 0, 64, 64);
  const TensorRef none = TensorRef::contiguous(out.ptr, DType::kUInt8, {0}, 0);
  quantize_nvfp4(x, TensorRef::contiguous(s.ptr, DType::kFP32, {1}, 0), none, none, nullptr);
  quantize_mxfp8(x, none, none, none, nullptr);
  gemm::launch_quantize_mxfp4(dx.ptr, DType::kBF16, 0, 64, 64, out.ptr, out.ptr,
                              gemm::act_quant_options(0), nullptr);
  B12X_TEST_CUDA(cudaDeviceSynchronize());
  for (uint8_t b : out.download()) ASSERT_EQ(b, 0xCD);
}

/// Capture NVFP4 + MXFP8 + FP8 group quantisation into one graph, then replay with new
/// activations and a new global scale written into the same device buffers.
TEST(QuantizeGpu, GraphReplayWithChangedInputs) {
  B12X_REQUIRE_GPU();
  const int64_t M = 133, K = 512;
  const DType dt = DType::kBF16;
  DeviceBuffer<uint16_t> dx(M * K);
  DeviceBuffer<float> dgs(1);
  const Outputs on = sizes(Fmt::kNvfp4, M, K), om = sizes(Fmt::kMxfp8, M, K),
                og = sizes(Fmt::kFp8Group, M, K);
  DeviceResult rn(on), rm(om), rg(og);
  cudaStream_t s;
  B12X_TEST_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto hx = make_input(M, K, K, dt, 16);
  dx.upload(hx);
  dgs.upload({1.f});
  // Eager warm-up, then capture.
  auto enqueue = [&] {
    launch(Fmt::kNvfp4, dx.ptr, dt, M, K, K, dgs.ptr, rn, on, false, true, true, s);
    launch(Fmt::kMxfp8, dx.ptr, dt, M, K, K, nullptr, rm, om, false, true, true, s);
    launch(Fmt::kFp8Group, dx.ptr, dt, M, K, K, nullptr, rg, og, false, true, true, s);
  };
  enqueue();
  B12X_TEST_CUDA(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  B12X_TEST_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  enqueue();
  B12X_TEST_CUDA(cudaStreamEndCapture(s, &g));
  B12X_TEST_CUDA(cudaGraphInstantiate(&ge, g, 0));
  for (int rep = 0; rep < 3; ++rep) {
    hx = make_input(M, K, K, dt, 16, 4.f + rep * 6.f);
    const float gs = 448.f * 6.f / tensor_amax(hx, dt, M, K, K);
    dx.upload(hx);
    dgs.upload({gs});
    rn.poison();
    rm.poison();
    rg.poison();
    B12X_TEST_CUDA(cudaGraphLaunch(ge, s));
    B12X_TEST_CUDA(cudaStreamSynchronize(s));
    const HostResult wn = run_reference(Fmt::kNvfp4, hx, dt, M, K, K, gs);
    const HostResult wm = run_reference(Fmt::kMxfp8, hx, dt, M, K, K, 1.f);
    const HostResult wg = run_reference(Fmt::kFp8Group, hx, dt, M, K, K, 1.f);
    EXPECT_TRUE(same_bytes("nvfp4 packed", rn.values.download(), wn.values, 0xCD)) << rep;
    EXPECT_TRUE(same_bytes("nvfp4 scales", rn.swz.download(), wn.swz, 0xCD)) << rep;
    EXPECT_TRUE(same_bytes("mxfp8 values", rm.values.download(), wm.values, 0xCD)) << rep;
    EXPECT_TRUE(same_bytes("mxfp8 rows", rm.rows.download(), wm.rows, 0xCD)) << rep;
    EXPECT_TRUE(same_bytes("mxfp8 swizzled", rm.swz.download(), wm.swz, 0xCD)) << rep;
    EXPECT_TRUE(same_bytes("fp8g values", rg.values.download(), wg.values, 0xCD)) << rep;
    auto gf = rg.f32.download();
    for (size_t i = 0; i < wg.f32.size(); ++i) ASSERT_EQ(gf[i], wg.f32[i]) << rep << " " << i;
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
}

/// Non-finite and extreme inputs (NaN, +-Inf, +-max finite, subnormals, -0) mixed into random
/// rows: the kernels' conversions (cvt or comparison encoders) must match the reference bits.
void check_specials(Fmt f, DType dt) {
  const bool bf = dt == DType::kBF16;
  const uint16_t specials[] = {
      static_cast<uint16_t>(bf ? 0x7FC0 : 0x7E00),  // NaN
      static_cast<uint16_t>(bf ? 0xFFC1 : 0xFE01),  // -NaN with payload
      static_cast<uint16_t>(bf ? 0x7F80 : 0x7C00),  // +Inf
      static_cast<uint16_t>(bf ? 0xFF80 : 0xFC00),  // -Inf
      static_cast<uint16_t>(bf ? 0x7F7F : 0x7BFF),  // max finite
      static_cast<uint16_t>(bf ? 0xFF7F : 0xFBFF),
      0x0001,
      0x8003,  // subnormals
      0x8000,  // -0
  };
  const int64_t M = 40, K = 256;
  auto hx = make_input(M, K, K, dt, block_of(f));
  std::uniform_int_distribution<int> pos(0, static_cast<int>(M * K - 1));
  std::uniform_int_distribution<int> which(0, 8);
  for (int n = 0; n < 60; ++n) hx[pos(test::rng())] = specials[which(test::rng())];
  // Whole rows of one special value.
  for (int64_t k = 0; k < K; ++k) {
    hx[0 * K + k] = specials[2];
    hx[1 * K + k] = specials[0];
    hx[2 * K + k] = specials[6];
  }
  SCOPED_TRACE(std::string(fmt_name(f)) + " " + dtype_name(dt));
  const float scalar = f == Fmt::kNvfp4 ? 0.37f : (f == Fmt::kFp8Tensor ? 0.01f : 1.f);
  const HostResult want = run_reference(f, hx, dt, M, K, K, scalar);
  expect_device_matches(f, hx, dt, M, K, K, scalar, want, false, true, true);
}

TEST(QuantizeGpu, SpecialValuesBitExact) {
  B12X_REQUIRE_GPU();
  for (DType dt : {DType::kBF16, DType::kFP16})
    for (Fmt f : kAllFormats) check_specials(f, dt);
}

/// The FP8 1x128 quantizer's two kernels (B12X_QUANT_FP8G128=1: four lanes per group with the
/// Markstein division, the default on vector rows; 0: block_quant_kernel): the same bits as the
/// reference on the launcher's and the op's shapes (M past a full wave, odd M, tiny / large /
/// zero groups from make_input), the special values, and an odd row pitch (scalar loads: always
/// block_quant_kernel).
void check_fp8_group128_kernels(const char* knob) {
  SCOPED_TRACE(std::string("B12X_QUANT_FP8G128=") + knob);
  setenv("B12X_QUANT_FP8G128", knob, 1);
  for (DType dt : {DType::kBF16, DType::kFP16})
    for (int64_t M : {1, 3, 129, 2048})
      for (int64_t K : {128, 384, 4096}) check_case(Fmt::kFp8Group, dt, M, K, 0, M != 3);
  check_case(Fmt::kFp8Group, DType::kBF16, 130, 384, 8, false);
  check_case(Fmt::kFp8Group, DType::kBF16, 130, 384, 1, false);
  check_case(Fmt::kFp8Group, DType::kBF16, 129, 384, 0, false);
  for (DType dt : {DType::kBF16, DType::kFP16}) check_specials(Fmt::kFp8Group, dt);
  // Magnitudes over the whole range (2^-60 is the fast path's lower bound, so both sides of it).
  for (float spread : {40.f, 70.f, 120.f})
    check_case(Fmt::kFp8Group, DType::kBF16, 64, 512, 0, true, true, true, spread);
  unsetenv("B12X_QUANT_FP8G128");
}

TEST(QuantizeGpu, Fp8Group128FastKernel) {
  B12X_REQUIRE_GPU();
  check_fp8_group128_kernels("1");
  check_fp8_group128_kernels("0");
}

/// Small cases of every path (vector and scalar loads, partial swizzle tiles) for
/// compute-sanitizer (memcheck + racecheck run the *GpuSanitize* suites).
TEST(QuantizeGpuSanitize, SmallShapesAllPaths) {
  B12X_REQUIRE_GPU();
  for (Fmt f : kAllFormats)
    for (int64_t M : {1, 129})
      for (int64_t extra : {0, 1}) {
        check_case(f, DType::kBF16, M, ks_for(f)[1], extra, false);
        check_case(f, DType::kFP16, M, ks_for(f)[0], extra, true);
      }
}

TEST(QuantizeGpu, RejectsBadArguments) {
  B12X_REQUIRE_GPU();
  DeviceBuffer<uint16_t> dx(256);
  DeviceBuffer<uint8_t> out(1024);
  DeviceBuffer<float> s(1);
  const TensorRef x = dev_x(dx.ptr, DType::kBF16, 2, 100, 100);  // K=100: not a block multiple
  const TensorRef o = TensorRef::contiguous(out.ptr, DType::kUInt8, {100}, 0);
  const TensorRef sc = TensorRef::contiguous(s.ptr, DType::kFP32, {1}, 0);
  EXPECT_THROW(quantize_nvfp4(x, sc, o, o, nullptr), Error);
  EXPECT_THROW(quantize_mxfp8(x, o, o, o, nullptr), Error);
  EXPECT_THROW(quantize_fp8_group128(x, o, o, nullptr), Error);
  // Host scale for a device op.
  float hs = 1.f;
  const TensorRef x2 = dev_x(dx.ptr, DType::kBF16, 1, 16, 16);
  EXPECT_THROW(quantize_fp8_tensor(x2, TensorRef::contiguous(&hs, DType::kFP32, {1}), o, nullptr),
               Error);
}

}  // namespace
}  // namespace b12x
