// GPU tests of the linear GEMMs: every format against the fp64 CPU reference on fresh random
// inputs (M from 1 to a few thousand, N and K at and off tile boundaries, bias / no bias, BF16 and
// FP16), poisoned outputs, CUDA-graph capture + replay with changed activations, weight refresh
// keeping pointers, and a small-shape subset for compute-sanitizer (GemmGpuSanitize*).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "b12x/c_api.h"
#include "b12x/gemm.h"
#include "b12x/reference/linear.h"
#include "b12x/reference/quantize.h"
#include "b12x/status.h"
#include "c_tensor_desc.h"
#include "formats/ggml.h"
#include "formats/scalar.h"
#include "formats/swizzle.h"
#include "gemm/linear_gemv_ggml.h"
#include "gemm/linear_launch.h"
#include "gemm/linear_params.h"
#include "gemm/linear_stream16_fp8.h"
#include "gpu_test_util.h"
#include "reference/parallel.h"

namespace b12x {
namespace {

using gemm::LinearFormat;
using test::DeviceBuffer;

struct Case {
  LinearFormat fmt;
  int64_t M, N, K;
  DType act = DType::kBF16;  // for raw / quantized-inside formats: bf16/fp16 input dtype
  DType out = DType::kBF16;
  bool bias = false;
  bool caller_quant = false;  // fp8_block: pass e4m3 + fp32 scales
  gemm::Regime regime = gemm::Regime::kAuto;
  int64_t max_tokens = 0;  // the plan's capacity (0: M)
};

std::string name(const Case& c) {
  return std::string(gemm::format_name(c.fmt)) + " M=" + std::to_string(c.M) +
         " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) + " act=" + dtype_name(c.act) +
         " out=" + dtype_name(c.out) + (c.bias ? " bias" : "") +
         (c.caller_quant ? " callerq" : "") +
         (c.regime == gemm::Regime::kDecode  ? " decode"
          : c.regime == gemm::Regime::kTiled ? " tiled"
                                             : "");
}

uint16_t to_half_bits(float v, DType t) {
  return t == DType::kFP16 ? fmt::float_to_fp16_bits(v) : fmt::float_to_bf16_bits(v);
}
float from_half_bits(uint16_t h, DType t) {
  return t == DType::kFP16 ? fmt::fp16_bits_to_float(h) : fmt::bf16_bits_to_float(h);
}

/// Host checkpoint tensors of one random weight.
struct HostWeight {
  std::vector<uint8_t> w, scale_bytes;
  std::vector<float> scale_f32;
  float output_scale = 1.f;
  int64_t N = 0, K = 0, row_bytes = 0;
  gemm::WeightSource src(LinearFormat f) {
    gemm::WeightSource s;
    s.format = f;
    switch (f) {
      case LinearFormat::kNvfp4:
      case LinearFormat::kNvfp4W4A16:
        s.weight = TensorRef::contiguous(w.data(), DType::kUInt8, {N, K / 2});
        s.weight_scale = TensorRef::contiguous(scale_bytes.data(), DType::kFP8E4M3, {N, K / 16});
        s.global_scale = f == LinearFormat::kNvfp4W4A16 ? 0.0625f : 1.f;
        break;
      case LinearFormat::kMxfp4:
      case LinearFormat::kMxfp4W4A8:
      case LinearFormat::kMxfp4W4A16:
        s.weight = TensorRef::contiguous(w.data(), DType::kUInt8, {N, K / 2});
        s.weight_scale = TensorRef::contiguous(scale_bytes.data(), DType::kUE8M0, {N, K / 32});
        break;
      case LinearFormat::kFp8Tensor:
        s.weight = TensorRef::contiguous(w.data(), DType::kFP8E4M3, {N, K});
        s.output_scale = TensorRef::contiguous(&output_scale, DType::kFP32, {1});
        break;
      case LinearFormat::kMxfp8:
        s.weight = TensorRef::contiguous(w.data(), DType::kFP8E4M3, {N, K});
        s.weight_scale = TensorRef::contiguous(scale_bytes.data(), DType::kUE8M0, {N, K / 32});
        break;
      case LinearFormat::kFp8Block:
        s.weight = TensorRef::contiguous(w.data(), DType::kFP8E4M3, {N, K});
        s.weight_scale =
            TensorRef::contiguous(scale_f32.data(), DType::kFP32, {(N + 127) / 128, K / 128});
        break;
      case LinearFormat::kQ8_0:
      case LinearFormat::kIq2Xxs:
      case LinearFormat::kIq2Xs:
        s.weight = TensorRef::contiguous(w.data(), DType::kUInt8, {N, row_bytes});
        break;
    }
    return s;
  }
};

uint8_t random_e4m3(std::mt19937_64& g) {
  uint8_t b = static_cast<uint8_t>(g());
  if ((b & 0x7F) == 0x7F) b ^= 1;  // no NaN codes in weights
  return b;
}

/// Where set, edits every random weight make_weight returns (a test's own scale ranges).
std::function<void(LinearFormat, HostWeight&)> g_weight_tweak;
/// run_case's graph replays (each on a poisoned output; the last one is checked).
int g_graph_replays = 1;

HostWeight make_weight(LinearFormat f, int64_t N, int64_t K) {
  auto& g = test::rng();
  HostWeight h;
  h.N = N;
  h.K = K;
  std::uniform_int_distribution<int> e8(112, 126);  // keeps fp16 outputs finite
  switch (f) {
    case LinearFormat::kNvfp4:
    case LinearFormat::kNvfp4W4A16: {
      h.w = test::random_bytes(N * K / 2);
      h.scale_bytes.resize(N * K / 16);
      // UE4M3 codes over the whole range incl. subnormals (0x01..0x07) and the max (0x7E).
      std::uniform_int_distribution<int> code(1, 0x7E);
      for (auto& b : h.scale_bytes) b = static_cast<uint8_t>(code(g));
      break;
    }
    case LinearFormat::kMxfp4:
    case LinearFormat::kMxfp4W4A8:
    case LinearFormat::kMxfp4W4A16:
      h.w = test::random_bytes(N * K / 2);
      h.scale_bytes.resize(N * K / 32);
      for (auto& b : h.scale_bytes) b = static_cast<uint8_t>(e8(g));
      break;
    case LinearFormat::kFp8Tensor:
    case LinearFormat::kMxfp8:
    case LinearFormat::kFp8Block: {
      h.w.resize(N * K);
      for (auto& b : h.w) b = random_e4m3(g);
      if (f == LinearFormat::kMxfp8) {
        h.scale_bytes.resize(N * K / 32);
        for (auto& b : h.scale_bytes) b = static_cast<uint8_t>(e8(g));
      } else if (f == LinearFormat::kFp8Block) {
        std::uniform_real_distribution<float> u(1e-4f, 2e-3f);
        h.scale_f32.resize(((N + 127) / 128) * (K / 128));
        for (auto& v : h.scale_f32) v = u(g);
      } else {
        h.output_scale = 0.00390625f * 1.37f;
      }
      break;
    }
    case LinearFormat::kQ8_0: {
      h.row_bytes = K / 32 * 34;
      h.w.resize(N * h.row_bytes);
      std::normal_distribution<float> nd(0.f, 1.f);
      std::uniform_real_distribution<float> mag(-3.f, 3.f);
      float blk[32];
      for (int64_t n = 0; n < N; ++n)
        for (int64_t b = 0; b < K / 32; ++b) {
          const float s = std::exp2(mag(g));
          for (auto& v : blk) v = nd(g) * s;
          fmt::ggml::q8_0_encode_block(blk, &h.w[n * h.row_bytes + b * 34]);
        }
      break;
    }
    case LinearFormat::kIq2Xxs:
    case LinearFormat::kIq2Xs: {
      const int bb = f == LinearFormat::kIq2Xs ? 74 : 66;
      h.row_bytes = K / 256 * bb;
      h.w = test::random_bytes(N * h.row_bytes);
      std::uniform_real_distribution<float> dd(0.005f, 0.05f);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t b = 0; b < K / 256; ++b) {
          const uint16_t d = fmt::float_to_fp16_bits(dd(g) * ((g() & 1) ? -1.f : 1.f));
          h.w[n * h.row_bytes + b * bb] = d & 0xFF;
          h.w[n * h.row_bytes + b * bb + 1] = d >> 8;
        }
      break;
    }
  }
  if (g_weight_tweak) g_weight_tweak(f, h);
  return h;
}

/// Activations as the op takes them, host + device.
struct Acts {
  std::vector<uint8_t> x;   // bytes of x
  std::vector<uint8_t> xs;  // bytes of x_scale
  DType x_dtype = DType::kBF16;
  int64_t x_cols = 0;  // in elements of x_dtype
  float alpha = 1.f;   // W4A4 NVFP4: brings alpha * (x*gs) . W into the fp16 range
  DType xs_dtype = DType::kUInt8;
  std::vector<int64_t> xs_shape;
  std::unique_ptr<DeviceBuffer<uint8_t>> dx, dxs;
  int x_offset = 0;  // device x starts this many bytes into its buffer (unaligned rows; no graphs)
  TensorRef host_x() {
    return TensorRef::contiguous(
        x.data(), x_dtype,
        {static_cast<int64_t>(x.size()) / (dtype_bytes_for(x_dtype, x_cols)), x_cols});
  }
  TensorRef host_xs() {
    if (xs.empty()) return TensorRef{};
    return TensorRef::contiguous(xs.data(), xs_dtype, static_cast<int>(xs_shape.size()),
                                 xs_shape.data());
  }
  TensorRef dev_x(int dev) {
    TensorRef t = host_x();
    t.data = dx->ptr + x_offset;
    t.device = dev;
    return t;
  }
  TensorRef dev_xs(int dev) {
    if (xs.empty()) return TensorRef{};
    TensorRef t = host_xs();
    t.data = dxs->ptr;
    t.device = dev;
    return t;
  }
  void upload() {
    dx = std::make_unique<DeviceBuffer<uint8_t>>(x.size() + x_offset);
    std::vector<uint8_t> xo(x_offset, 0);
    xo.insert(xo.end(), x.begin(), x.end());
    dx->upload(xo);
    if (!xs.empty()) {
      dxs = std::make_unique<DeviceBuffer<uint8_t>>(xs.size());
      dxs->upload(xs);
    }
  }
};

/// Random bf16/fp16 activations [M, K] with per-row magnitude spread.
std::vector<uint16_t> make_x(int64_t M, int64_t K, DType t) {
  auto& g = test::rng();
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> mag(-2.f, 2.f);
  std::vector<uint16_t> x(M * K);
  for (int64_t m = 0; m < M; ++m) {
    const float s = std::exp2(mag(g));
    for (int64_t k = 0; k < K; ++k) x[m * K + k] = to_half_bits(nd(g) * s, t);
  }
  return x;
}

void make_acts(const Case& c, Acts& a) {
  const int64_t M = c.M, K = c.K;
  const bool raw_or_inside =
      !(c.fmt == LinearFormat::kNvfp4 || c.fmt == LinearFormat::kMxfp4 ||
        c.fmt == LinearFormat::kFp8Tensor || (c.fmt == LinearFormat::kFp8Block && c.caller_quant));
  const DType hd = raw_or_inside ? c.act : DType::kBF16;
  std::vector<uint16_t> xh = make_x(M, K, hd);
  TensorRef xr = TensorRef::contiguous(xh.data(), hd, {M, K});
  a.xs.clear();
  a.xs_shape.clear();
  if (raw_or_inside) {
    a.x_dtype = hd;
    a.x_cols = K;
    a.x.resize(M * K * 2);
    std::memcpy(a.x.data(), xh.data(), a.x.size());
  } else if (c.fmt == LinearFormat::kNvfp4 || c.fmt == LinearFormat::kMxfp4) {
    const bool nv = c.fmt == LinearFormat::kNvfp4;
    a.x_dtype = DType::kUInt8;
    a.x_cols = K / 2;
    a.x.resize(M * K / 2);
    const int64_t cols = nv ? K / 16 : K / 32;
    a.xs.resize(fmt::swizzled_scale_bytes(M, cols));
    a.xs_shape = {static_cast<int64_t>(a.xs.size())};
    TensorRef packed = TensorRef::contiguous(a.x.data(), DType::kUInt8, {M, K / 2});
    TensorRef sw =
        TensorRef::contiguous(a.xs.data(), DType::kUInt8, {static_cast<int64_t>(a.xs.size())});
    if (nv) {
      float amax = 0;
      for (auto h : xh) amax = std::max(amax, std::fabs(from_half_bits(h, hd)));
      const float gs = 448.f * 6.f / amax;
      reference::quantize_nvfp4(xr, gs, packed, sw);
      a.alpha = 1.f / (gs * 64.f);
    } else {
      reference::quantize_mxfp4(xr, packed, sw);
    }
  } else if (c.fmt == LinearFormat::kFp8Tensor) {
    a.x_dtype = DType::kFP8E4M3;
    a.x_cols = K;
    a.x.resize(M * K);
    float amax = 0;
    for (auto h : xh) amax = std::max(amax, std::fabs(from_half_bits(h, hd)));
    reference::quantize_fp8_tensor(xr, amax / 448.f,
                                   TensorRef::contiguous(a.x.data(), DType::kFP8E4M3, {M, K}));
  } else {  // fp8_block caller-quantized
    a.x_dtype = DType::kFP8E4M3;
    a.x_cols = K;
    a.x.resize(M * K);
    a.xs.resize(M * (K / 128) * 4);
    a.xs_dtype = DType::kFP32;
    a.xs_shape = {M, K / 128};
    reference::quantize_fp8_group128(
        xr, TensorRef::contiguous(a.x.data(), DType::kFP8E4M3, {M, K}),
        TensorRef::contiguous(a.xs.data(), DType::kFP32, {M, K / 128}));
  }
}

DType plan_act_dtype(const Case& c, const Acts& a) {
  if (a.x_dtype == DType::kUInt8) return DType::kFP4E2M1;
  return a.x_dtype;
}

struct Check {
  test::Compare cmp;
  int64_t bad = 0;
  double worst = 0;
};

/// Per-element bound (output units) on the accumulation error of the FP8 wgmma path (SM90,
/// per-tensor and block FP8: e4m3 x e4m3 wgmmas into a partial started from zero, promoted into
/// fp32 accumulators every `chain` K, times the block scales for block FP8).
///
/// Model of one m64nNk32 e4m3 wgmma (Hopper's FP8 MMA does not accumulate in IEEE fp32: the
/// products are exact, then aligned to the largest magnitude among the terms and the incoming
/// accumulator and summed with 13 fraction bits kept, truncating, into an e8m13 result; the
/// DeepSeek-V3 report's "~14 bits", and bit-level studies of the H100 FP8 path). We allow the
/// 32 products to be aligned in up to 4 groups of >= 8 (the incoming partial truncated once per
/// group and each group result once more): with X the largest magnitude of the incoming partial
/// (exact |s| + the error so far), of any product and of any exact running sum inside the
/// instruction, every aligned term loses < 2^-13 X, so one instruction adds
///   e <= 2^-13 * (32 + 2 * 4) * X.
/// A chain is `chain / 32` instructions from zero; its error e_c is summed over the chains times
/// their scale (block FP8: x_scale[m][c] * w_scale[n/128][c]), plus the fp32 promotion (an
/// fmaf / add per chain, the scale product: (chains + 3) * 2^-24 * sum_c scale_c * (|s_c| + e_c)),
/// times |output_scale| (per-tensor FP8). The bound is a worst case (every truncation a full
/// unit, in one direction); the output rounding is the caller's relative term.
std::vector<double> fp8_wgmma_bound(const Case& c, const HostWeight& hw, Acts& a, int chain) {
  const int64_t M = c.M, N = c.N, K = c.K;
  const bool block = c.fmt == LinearFormat::kFp8Block;
  const int64_t groups = K / 128;
  // e4m3 activation values and (block) their fp32 scales [M, K/128], as the kernel reads them.
  std::vector<uint8_t> qv;
  std::vector<float> qs;
  if (a.x_dtype == DType::kFP8E4M3) {
    qv = a.x;
    if (block) {
      qs.resize(M * groups);
      std::memcpy(qs.data(), a.xs.data(), qs.size() * 4);
    }
  } else {  // block FP8 quantized inside from bf16/fp16
    qv.resize(M * K);
    qs.resize(M * groups);
    reference::quantize_fp8_group128(a.host_x(),
                                     TensorRef::contiguous(qv.data(), DType::kFP8E4M3, {M, K}),
                                     TensorRef::contiguous(qs.data(), DType::kFP32, {M, groups}));
  }
  std::vector<float> xv(M * K), wv(N * K);
  for (int64_t i = 0; i < M * K; ++i) xv[i] = fmt::e4m3_to_float(qv[i]);
  for (int64_t i = 0; i < N * K; ++i) wv[i] = fmt::e4m3_to_float(hw.w[i]);
  const double u13 = std::ldexp(1.0, -13), u24 = std::ldexp(1.0, -24);
  const double oscale = block ? 1.0 : std::fabs(hw.output_scale);
  const int64_t chains = (K + chain - 1) / chain;
  std::vector<double> bound(M * N);
  reference::parallel_rows(M, 3 * N * K, [&](int64_t m) {
    for (int64_t n = 0; n < N; ++n) {
      const float* x = &xv[m * K];
      const float* w = &wv[n * K];
      double err = 0, mag = 0;
      for (int64_t c0 = 0; c0 < K; c0 += chain) {
        double s = 0, e = 0;
        for (int64_t k0 = c0; k0 < std::min<int64_t>(c0 + chain, K); k0 += 32) {
          double X = std::fabs(s) + e;
          for (int64_t k = k0; k < std::min<int64_t>(k0 + 32, K); ++k) {
            const double pr = static_cast<double>(x[k]) * w[k];
            s += pr;
            X = std::max(X, std::max(std::fabs(pr), std::fabs(s) + e));
          }
          e += u13 * 40.0 * X;
        }
        const double sc = block ? static_cast<double>(qs[m * groups + c0 / 128]) *
                                      hw.scale_f32[(n / 128) * groups + c0 / 128]
                                : 1.0;
        err += sc * e;
        mag += sc * (std::fabs(s) + e);
      }
      bound[m * N + n] = oscale * (err + (chains + 3) * u24 * mag);
    }
  });
  return bound;
}

/// |out - ref| <= tol_rel * |ref| + tol_abs * rms(ref) per element, and all finite. With `bound`
/// (the FP8 wgmma path): |out - ref| <= tol_rel * |ref| + bound per element instead (tol_rel: the
/// output rounding), and `worst` reports the largest err / tol seen (also when within).
Check check_out(const std::vector<uint16_t>& out, DType t, const std::vector<double>& ref,
                const std::vector<double>* bound = nullptr) {
  Check ck;
  std::vector<float> o(out.size());
  for (size_t i = 0; i < out.size(); ++i) o[i] = from_half_bits(out[i], t);
  ck.cmp = test::compare(o, ref);
  double rms = 0;
  for (double r : ref) rms += r * r;
  rms = std::sqrt(rms / std::max<size_t>(ref.size(), 1));
  const double rel = t == DType::kFP16 ? 1.0 / 1024 : 1.0 / 128;
  for (size_t i = 0; i < o.size(); ++i) {
    const double err = std::fabs(o[i] - ref[i]);
    const double tol = bound != nullptr ? rel * std::fabs(ref[i]) + (*bound)[i] + 1e-30
                                        : rel * std::fabs(ref[i]) + 1e-3 * rms + 1e-30;
    if (!(err <= tol)) ++ck.bad;
    if (bound != nullptr || !(err <= tol)) ck.worst = std::max(ck.worst, err / tol);
  }
  return ck;
}

struct Runner {
  int dev = 0;
  std::shared_ptr<gemm::PackedWeight> pw;
  gemm::Plan plan;
  DeviceBuffer<uint8_t> scratch;
  DeviceBuffer<uint16_t> out, bias;
  DeviceBuffer<float> alpha;
};

/// Runs one case end to end; returns false (with a gtest failure) on mismatch.
/// `tiled_wgmma`: where given, receives the plan's wgmma token width (0: not the wgmma kernel).
/// `tweak`: where given, edits the host activations before they are uploaded.
void run_case(const Case& c, bool graph_replay = false, int* tiled_wgmma = nullptr,
              const std::function<void(Acts&)>& tweak = nullptr, int* tiled_wgmma_var = nullptr) {
  SCOPED_TRACE(name(c));
  const int dev = 0;
  HostWeight hw = make_weight(c.fmt, c.N, c.K);
  gemm::WeightSource src = hw.src(c.fmt);
  std::shared_ptr<gemm::PackedWeight> pw;
  try {
    pw = gemm::PackedWeight::pack(src, dev, nullptr);
  } catch (const Error& e) {
    FAIL() << "pack failed: " << e.what();
  }
  Acts a;
  make_acts(c, a);
  if (tweak) tweak(a);
  a.upload();
  gemm::Caps caps;
  caps.device = dev;
  caps.format = c.fmt;
  caps.max_tokens = c.max_tokens > 0 ? c.max_tokens : c.M;
  caps.in_features = c.K;
  caps.out_features = c.N;
  caps.act_dtype = plan_act_dtype(c, a);
  caps.out_dtype = c.out;
  caps.regime = c.regime;
  gemm::Plan plan;
  try {
    plan = gemm::plan(caps);
  } catch (const Error& e) {
    FAIL() << "plan failed: " << e.what();
  }
  if (tiled_wgmma != nullptr) *tiled_wgmma = plan.tiled_wgmma;
  if (tiled_wgmma_var != nullptr) *tiled_wgmma_var = plan.tiled_wgmma_var;
  DeviceBuffer<uint8_t> scratch(std::max<int64_t>(plan.scratch_bytes, 1));
  scratch.randomize();
  DeviceBuffer<uint16_t> out(c.M * c.N);
  std::vector<uint16_t> hbias;
  DeviceBuffer<uint16_t> dbias(c.N);
  if (c.bias) {
    auto& g = test::rng();
    std::normal_distribution<float> nd(0.f, 2.f);
    for (int64_t n = 0; n < c.N; ++n) hbias.push_back(to_half_bits(nd(g), c.out));
    dbias.upload(hbias);
  }
  const bool w4a4 = c.fmt == LinearFormat::kNvfp4 || c.fmt == LinearFormat::kMxfp4;
  const float alpha_v = a.alpha;
  DeviceBuffer<float> dalpha(1);
  dalpha.upload({alpha_v});
  TensorRef alpha_t;
  if (w4a4) alpha_t = TensorRef::contiguous(dalpha.ptr, DType::kFP32, {1}, dev);
  TensorRef bias_t, bias_h;
  if (c.bias) {
    bias_t = TensorRef::contiguous(dbias.ptr, c.out, {c.N}, dev);
    bias_h = TensorRef::contiguous(hbias.data(), c.out, {c.N});
  }
  TensorRef out_t = TensorRef::contiguous(out.ptr, c.out, {c.M, c.N}, dev);
  TensorRef scratch_t = TensorRef::contiguous(scratch.ptr, DType::kUInt8,
                                              {std::max<int64_t>(plan.scratch_bytes, 1)}, dev);

  cudaStream_t stream;
  B12X_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  out.poison();
  gemm::Binding b;
  try {
    b = gemm::bind(plan, scratch_t, a.dev_x(dev), a.dev_xs(dev), *pw, out_t, bias_t, alpha_t);
    gemm::run(b, stream);
  } catch (const Error& e) {
    cudaStreamDestroy(stream);
    FAIL() << "bind/run failed: " << e.what();
  }
  B12X_TEST_CUDA(cudaStreamSynchronize(stream));
  B12X_TEST_CUDA(cudaGetLastError());

  auto reference = [&](Acts& acts) {
    std::vector<double> ref(c.M * c.N);
    reference::linear(src, acts.host_x(), acts.host_xs(), alpha_v, bias_h,
                      TensorRef::contiguous(ref.data(), DType::kFP64, {c.M, c.N}));
    return ref;
  };
  // FP8 on the wgmma kernel: the accumulation-error bound of its promotion interval (plan
  // variant: 0, 3, 5 and 6 = per 128 K, 1 = 64 K, 2 = 32 K; lin::WgmmaCfg::kF8Sub).
  const bool f8_wgmma = plan.tiled_wgmma > 0 &&
                        (c.fmt == LinearFormat::kFp8Tensor || c.fmt == LinearFormat::kFp8Block);
  const int f8_chain = plan.tiled_wgmma_var == 2 ? 32 : plan.tiled_wgmma_var == 1 ? 64 : 128;
  {
    const auto ref = reference(a);
    std::vector<double> bound;
    if (f8_wgmma) bound = fp8_wgmma_bound(c, hw, a, f8_chain);
    const Check ck = check_out(out.download(), c.out, ref, f8_wgmma ? &bound : nullptr);
    if (f8_wgmma) {
      double rms = 0, bmax = 0;
      for (double r : ref) rms += r * r;
      for (double v : bound) bmax = std::max(bmax, v);
      rms = std::sqrt(rms / std::max<size_t>(ref.size(), 1));
      std::printf(
          "[fp8 wgmma bound] %s tok=%d var=%d chain=%d worst err/tol=%.4g "
          "max bound/rms=%.4g\n",
          name(c).c_str(), plan.tiled_wgmma, plan.tiled_wgmma_var, f8_chain, ck.worst, bmax / rms);
    }
    EXPECT_EQ(ck.cmp.nonfinite, 0) << ck.cmp.str();
    EXPECT_EQ(ck.bad, 0) << ck.cmp.str() << " worst err/tol=" << ck.worst;
    EXPECT_GT(ck.cmp.cosine, 0.9999) << ck.cmp.str();
  }
  if (graph_replay) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    B12X_TEST_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    gemm::run(b, stream);
    B12X_TEST_CUDA(cudaStreamEndCapture(stream, &graph));
    B12X_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    // New activations in the same buffers.
    Acts a2;
    make_acts(c, a2);
    ASSERT_EQ(a2.x.size(), a.x.size());
    B12X_TEST_CUDA(cudaMemcpy(a.dx->ptr, a2.x.data(), a2.x.size(), cudaMemcpyHostToDevice));
    if (!a2.xs.empty())
      B12X_TEST_CUDA(cudaMemcpy(a.dxs->ptr, a2.xs.data(), a2.xs.size(), cudaMemcpyHostToDevice));
    // The copies run on the legacy stream, which does not order against `stream` (non-blocking).
    B12X_TEST_CUDA(cudaDeviceSynchronize());
    for (int r = 0; r < g_graph_replays; ++r) {
      out.poison();
      B12X_TEST_CUDA(cudaGraphLaunch(exec, stream));
      B12X_TEST_CUDA(cudaStreamSynchronize(stream));
    }
    const auto graph_out = out.download();
    out.poison();
    gemm::run(b, stream);
    B12X_TEST_CUDA(cudaStreamSynchronize(stream));
    const auto eager_out = out.download();
    EXPECT_EQ(graph_out, eager_out) << "graph replay differs from eager";
    std::vector<double> bound2;
    if (f8_wgmma) bound2 = fp8_wgmma_bound(c, hw, a2, f8_chain);
    const Check ck = check_out(graph_out, c.out, reference(a2), f8_wgmma ? &bound2 : nullptr);
    EXPECT_EQ(ck.bad, 0) << "replay: " << ck.cmp.str();
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  cudaStreamDestroy(stream);
}

std::vector<Case> all_format_cases(int64_t M, int64_t N, int64_t K, bool bias, DType out,
                                   gemm::Regime regime = gemm::Regime::kAuto) {
  std::vector<Case> v;
  for (int i = 0; i < gemm::kNumLinearFormats; ++i) {
    const auto f = static_cast<LinearFormat>(i);
    const int64_t kk = (K + gemm::format_k_multiple(f) - 1) / gemm::format_k_multiple(f) *
                       gemm::format_k_multiple(f);
    Case c{f, M, N, kk, DType::kBF16, out, bias};
    c.regime = regime;
    v.push_back(c);
  }
  return v;
}

// ---------------------------------------------------------------- the grid -----------------
TEST(GemmGpu, AllFormatsDecodeM1) {
  B12X_REQUIRE_GPU();
  // The default M = 1 kernels, and the decode kernel where the stream kernel is the default.
  for (const char* stream : {"", "0"}) {
    if (stream[0] != 0) setenv("B12X_GEMM_DECODE_STREAM", stream, 1);
    for (const auto& c : all_format_cases(1, 256, 1024, false, DType::kBF16)) run_case(c);
    unsetenv("B12X_GEMM_DECODE_STREAM");
  }
}

TEST(GemmGpu, DecodeWarpSplitLongK) {
  B12X_REQUIRE_GPU();
  setenv("B12X_GEMM_DECODE_STREAM", "0", 1);  // the decode kernel at M = 1, not the stream one
  // M = 1 takes 4 warps per weight tile (K split inside the CTA) for the copy-staged formats; a
  // long K (35 slices of 256) also splits over a cluster of 2 for the decoded 8-bit / IQ2 formats
  // (at most 8 slices per warp), FP8 / FP4 weights keep one CTA per row block. Row tails (N = 72:
  // 4.5 tiles), BF16 and FP16.
  for (LinearFormat f : {LinearFormat::kQ8_0, LinearFormat::kIq2Xxs, LinearFormat::kIq2Xs,
                         LinearFormat::kFp8Tensor, LinearFormat::kNvfp4W4A16})
    for (DType a : {DType::kBF16, DType::kFP16}) {
      if (a == DType::kFP16 && f == LinearFormat::kFp8Tensor) continue;
      run_case({f, 1, 72, 8960, a, a, true});
    }
  unsetenv("B12X_GEMM_DECODE_STREAM");
}

TEST(GemmGpu, AllFormatsSmallMBiasFp16Out) {
  B12X_REQUIRE_GPU();
  for (int64_t M : {3, 8, 16})
    for (const auto& c : all_format_cases(M, 200, 768, true, DType::kFP16)) run_case(c);
}

TEST(GemmGpu, AllFormatsOddShapes) {
  B12X_REQUIRE_GPU();
  // N off every tile boundary, K off the slice boundary.
  for (const auto& c : all_format_cases(5, 72, 1280, true, DType::kBF16)) run_case(c);
  for (const auto& c : all_format_cases(11, 16, 256, false, DType::kBF16)) run_case(c);
}

TEST(GemmGpu, AllFormatsMidM) {
  B12X_REQUIRE_GPU();
  // 17..32 tokens: the weight-streaming kernel with two token tiles and split K.
  for (const auto& c : all_format_cases(17, 200, 1024, true, DType::kBF16)) run_case(c);
  for (const auto& c : all_format_cases(32, 144, 2048, false, DType::kFP16)) run_case(c);
}

TEST(GemmGpu, Fp16ActivationsRawFormats) {
  B12X_REQUIRE_GPU();
  for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4W4A16, LinearFormat::kQ8_0,
                         LinearFormat::kIq2Xxs, LinearFormat::kIq2Xs, LinearFormat::kMxfp8,
                         LinearFormat::kMxfp4W4A8, LinearFormat::kFp8Block})
    for (int64_t M : {1, 9}) run_case({f, M, 128, 512, DType::kFP16, DType::kFP16, M == 9});
}

TEST(GemmGpu, Fp8BlockCallerQuantized) {
  B12X_REQUIRE_GPU();
  for (int64_t M : {1, 7, 40}) {
    Case c{LinearFormat::kFp8Block, M, 384, 1024};
    c.caller_quant = true;
    run_case(c);
  }
}

TEST(GemmGpu, LargerMAllFormats) {
  B12X_REQUIRE_GPU();
  for (const auto& c : all_format_cases(77, 136, 512, true, DType::kBF16)) run_case(c);
  for (const auto& c : all_format_cases(300, 64, 512, false, DType::kFP16)) run_case(c);
}

TEST(GemmGpu, TiledRegimeAllFormats) {
  B12X_REQUIRE_GPU();
  // Tiled kernel forced, also for tiny M; N and K off the 128 x 64 tile.
  for (const auto& c : all_format_cases(1, 200, 1280, true, DType::kBF16, gemm::Regime::kTiled))
    run_case(c);
  for (const auto& c : all_format_cases(130, 136, 768, false, DType::kFP16, gemm::Regime::kTiled))
    run_case(c);
  for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4W4A16, LinearFormat::kQ8_0,
                         LinearFormat::kIq2Xxs, LinearFormat::kIq2Xs}) {
    Case c{f, 70, 256, 512, DType::kFP16, DType::kFP16, true};
    c.regime = gemm::Regime::kTiled;
    run_case(c);
  }
}

TEST(GemmGpu, DecodeRegimeLargerM) {
  B12X_REQUIRE_GPU();
  // The weight-streaming kernel walking token tiles (M > 16).
  for (const auto& c : all_format_cases(37, 72, 512, true, DType::kBF16, gemm::Regime::kDecode))
    run_case(c);
}

/// Sets an environment variable for the scope (plan() reads the internal overrides).
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

/// The plan of a linear of max_tokens M with `act` activations and BF16 output (reads the env
/// overrides).
gemm::Plan linear_plan(LinearFormat f, int64_t M, int64_t N, int64_t K, DType act) {
  gemm::Caps caps;
  caps.format = f;
  caps.max_tokens = M;
  caps.in_features = K;
  caps.out_features = N;
  caps.act_dtype = act;
  caps.out_dtype = DType::kBF16;
  return gemm::plan(caps);
}

/// The default plan of format f for N x K at capacity cap (BF16 activations, W4A4's FP4).
gemm::Plan plan_fmt(LinearFormat f, int64_t N, int64_t K, int64_t cap) {
  const bool fp4 = f == LinearFormat::kNvfp4 || f == LinearFormat::kMxfp4;
  return linear_plan(f, cap, N, K, fp4 ? DType::kFP4E2M1 : DType::kBF16);
}

TEST(GemmGpu, DecodeSplitReduceKernelAndActivationPrepass) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  ScopedEnv eg0("B12X_GGML_GEMV", "0");  // the decode kernel for the GGML formats too
  {
    ScopedEnv e("B12X_GEMM_SPLIT", "reduce");  // global partials + reduce kernel
    for (const auto& c : all_format_cases(1, 256, 2048, true, DType::kBF16)) run_case(c);
    for (const auto& c : all_format_cases(12, 96, 1024, false, DType::kFP16)) run_case(c);
  }
  {
    ScopedEnv e("B12X_GEMM_ACT_PREPASS", "1");  // quantized activations dequantized by a pass
    for (const auto& c : all_format_cases(6, 160, 1024, true, DType::kBF16)) run_case(c);
  }
  {
    // Dequantized in every CTA while staging (M = 1: one warp per tile; the default at M = 1 is
    // the pre-pass and 4 warps per tile).
    ScopedEnv e("B12X_GEMM_ACT_PREPASS", "0");
    for (const auto& c : all_format_cases(1, 160, 2048, true, DType::kBF16)) run_case(c);
    for (const auto& c : all_format_cases(3, 72, 1024, false, DType::kBF16)) run_case(c);
  }
}

/// The plan of a BF16-activation, BF16-output linear of max_tokens M (reads the env overrides).
gemm::Plan bf16_plan(LinearFormat f, int64_t M, int64_t N, int64_t K) {
  return linear_plan(f, M, N, K, DType::kBF16);
}

TEST(GemmGpu, DecodePipelinedStaging) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  ScopedEnv eg0("B12X_GGML_GEMV", "0");  // the decode kernel for the GGML formats too
  // Two staging buffers (the default at M >= 2), the next chunk's copies in flight. No K split
  // over CTAs, so every CTA walks K = 4864 in several chunks (FP4 at 16 rows: one 512-K slice per
  // buffer); N = 72 leaves warps without a tile in the last CTA; M = 24 has a second token tile
  // of 8 rows. Formats with activation group scales (block FP8, MXFP8) keep one buffer.
  ScopedEnv ep("B12X_GEMM_DECODE_PIPE", "1"), es("B12X_GEMM_SPLIT", "1");
  EXPECT_TRUE(bf16_plan(LinearFormat::kNvfp4W4A16, 16, 72, 4864).decode_pipe);
  for (int64_t M : {3, 16, 24})
    for (const auto& c : all_format_cases(M, 72, 4864, M != 16, DType::kBF16)) run_case(c);
  for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kQ8_0})  // FP16: one buffer
    run_case({f, 16, 72, 4864, DType::kFP16, DType::kBF16, true});
}

TEST(GemmGpu, DecodeOneStagingBuffer) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  ScopedEnv eg0("B12X_GGML_GEMV", "0");  // the decode kernel for the GGML formats too
  // B12X_GEMM_DECODE_PIPE=0: the single staging buffer refilled between chunks (the path of
  // FP16 MMAs and of activations with group scales), several chunks per CTA.
  ScopedEnv ep("B12X_GEMM_DECODE_PIPE", "0"), es("B12X_GEMM_SPLIT", "1");
  for (int64_t M : {3, 16})
    for (const auto& c : all_format_cases(M, 72, 4864, M == 3, DType::kBF16)) run_case(c);
}

TEST(GemmGpu, DecodeStagedActivationQuant) {
  B12X_REQUIRE_GPU();
  // B12X_GEMM_DECODE_ACTQ=1: block FP8 / MXFP8 activations (BF16) quantized while the decode
  // kernel stages them (units of 128 K on 4 lanes) instead of by the quantizer launch. K = 4864
  // (19 slices; block FP8) and 4832 (MXFP8: the last 128-K unit is 3 / 4 inside K, the last slice
  // half past it), the whole K range per CTA in several chunks (split 1), a cluster split, the
  // reduce kernel, 4 warps per tile at M = 1; M = 9..24: two token tiles (a second one of 8
  // rows); N = 200 leaves warps without a tile. FP16 activations keep the quantizer.
  // The default (session 12): where a CTA stages at most 16 K values (rows x its K range).
  // (The decode kernel at M = 5..16, not the session-14 FP8 block kernel.)
  ScopedEnv ef8("B12X_GEMM_STREAM16_F8", "0");
  EXPECT_TRUE(bf16_plan(LinearFormat::kFp8Block, 1, 4096, 4096).decode_act_quant);
  EXPECT_TRUE(bf16_plan(LinearFormat::kMxfp8, 4, 14336, 4096).decode_act_quant);
  EXPECT_FALSE(bf16_plan(LinearFormat::kFp8Block, 16, 14336, 4096).decode_act_quant);
  run_case({LinearFormat::kFp8Block, 16, 200, 4864, DType::kBF16, DType::kBF16, true});
  {
    // MXFP8 at M = 1 where the 64-row CTAs fill <= 1/4 of the SMs: 2 CTAs per SM over a cluster
    // split of the 4-warp-per-tile grid (2048x7168 on the H200).
    const int64_t n = 64 * std::max<int64_t>(1, device_info(0).sm_count / 4);
    const gemm::Plan pm = bf16_plan(LinearFormat::kMxfp8, 1, n, 7168);
    EXPECT_EQ(pm.decode_warp_split, 4);
    EXPECT_GT(pm.split_k, 1);
    EXPECT_TRUE(pm.split_cluster && pm.decode_act_quant);
    run_case({LinearFormat::kMxfp8, 1, n, 7168, DType::kBF16, DType::kBF16, true}, true);
  }
  ScopedEnv eq("B12X_GEMM_DECODE_ACTQ", "1");
  EXPECT_TRUE(bf16_plan(LinearFormat::kFp8Block, 1, 4096, 4096).decode_act_quant);
  EXPECT_TRUE(bf16_plan(LinearFormat::kMxfp8, 16, 4096, 4096).decode_act_quant);
  EXPECT_FALSE(bf16_plan(LinearFormat::kMxfp8, 64, 4096, 4096).decode_act_quant);  // tiled
  for (const char* split : {"", "1", "4", "reduce"}) {
    if (split[0] != 0) setenv("B12X_GEMM_SPLIT", split, 1);
    for (int64_t M : {1, 4, 9, 16, 24}) {
      run_case({LinearFormat::kFp8Block, M, 200, 4864, DType::kBF16, DType::kBF16, M == 9},
               M == 4 && split[0] == 0);
      run_case({LinearFormat::kMxfp8, M, 200, 4832, DType::kBF16, DType::kBF16, M == 16},
               M == 1 && split[0] == 0);
    }
    unsetenv("B12X_GEMM_SPLIT");
  }
  {
    ScopedEnv ew("B12X_GEMM_DECODE_WSPLIT", "4");
    for (LinearFormat f : {LinearFormat::kFp8Block, LinearFormat::kMxfp8})
      run_case({f, 1, 4096, 2048, DType::kBF16, DType::kBF16, true});
  }
  for (LinearFormat f : {LinearFormat::kFp8Block, LinearFormat::kMxfp8})
    run_case({f, 4, 72, 1024, DType::kFP16, DType::kBF16, true});
}

/// FP4 weight formats with BF16 MMAs (the slice-halves kernel's).
const LinearFormat kFp4Bf16Formats[] = {LinearFormat::kNvfp4, LinearFormat::kNvfp4W4A16,
                                        LinearFormat::kMxfp4, LinearFormat::kMxfp4W4A8,
                                        LinearFormat::kMxfp4W4A16};

TEST(GemmGpu, DecodeSliceHalves) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  ScopedEnv es0("B12X_GEMM_DECODE_STREAM", "0");  // the decode kernel at M = 1, not the stream one
  ScopedEnv eg0("B12X_GGML_GEMV", "0");           // the decode kernel for the GGML formats too
  // B12X_GEMM_DECODE_HALF=1: CTAs of 8 warps, two per tile on the halves of each slice. One and
  // two staging buffers, K = 4864 (9.5 slices) in several chunks (split 1), over a cluster of 4
  // and over 10 CTAs with partials (the default split at N = 72), M = 1 / 4 (one token tile), 9 /
  // 16 / 24 (two; a second token tile of 8), N = 72 (warps without a tile in the last CTA); FP16
  // MMAs and Q8_0 keep one warp per tile.
  ScopedEnv eh("B12X_GEMM_DECODE_HALF", "1");
  EXPECT_TRUE(bf16_plan(LinearFormat::kNvfp4W4A16, 16, 72, 4864).decode_half);
  EXPECT_TRUE(bf16_plan(LinearFormat::kMxfp4W4A16, 4, 72, 4864).decode_half);
  EXPECT_FALSE(bf16_plan(LinearFormat::kQ8_0, 16, 72, 4864).decode_half);
  for (const char* pipe : {"0", "1"})
    for (const char* split : {"1", "4", ""}) {
      ScopedEnv ep("B12X_GEMM_DECODE_PIPE", pipe);
      if (split[0] != 0) setenv("B12X_GEMM_SPLIT", split, 1);
      for (int64_t M : {1, 4, 9, 16, 24})
        for (LinearFormat f : kFp4Bf16Formats)
          run_case({f, M, 72, 4864, DType::kBF16, DType::kBF16, M != 16});
      unsetenv("B12X_GEMM_SPLIT");
    }
  run_case({LinearFormat::kNvfp4W4A16, 16, 72, 4864, DType::kFP16, DType::kBF16, true});
}

/// Output features N whose 64-row CTAs take a decode split of exactly `split` (2 or 4) at K =
/// 7168 / 8192 (14 / 32 slices) on device 0: the plan's smallest split reaching ~0.9 x SMs CTAs
/// (ceil(want / split) CTAs reach it with `split`, not with split - 1).
int64_t n_for_split(int split) {
  const int64_t want = (9 * int64_t{device_info(0).sm_count} + 9) / 10;
  return 64 * ((want + split - 1) / split);
}

TEST(GemmGpu, DecodeSliceHalvesDefault) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  // The default: NVFP4 weights at M = 5..8 where each CTA streams at least 8 slices, and NVFP4
  // and MXFP4 weights (MXFP4 since session 9) at M = 9..32 (with the pipelined staging) where K
  // is split over at most 2 CTAs; B12X_GEMM_DECODE_HALF=0 turns it off.
  const gemm::Plan p16 = bf16_plan(LinearFormat::kNvfp4W4A16, 16, 14336, 4096);
  EXPECT_TRUE(p16.decode_half && p16.decode_pipe && p16.decode_seg_stage);
  EXPECT_TRUE(bf16_plan(LinearFormat::kNvfp4W4A16, 6, 14336, 4096).decode_half);
  EXPECT_FALSE(bf16_plan(LinearFormat::kNvfp4W4A16, 6, 4096, 4096).decode_half);  // 4 slices
  EXPECT_FALSE(bf16_plan(LinearFormat::kNvfp4W4A16, 4, 14336, 4096).decode_half);
  EXPECT_TRUE(bf16_plan(LinearFormat::kNvfp4W4A16, 24, 4096, 4096).decode_half);
  EXPECT_TRUE(bf16_plan(LinearFormat::kMxfp4W4A16, 16, 14336, 4096).decode_half);  // session 9
  EXPECT_FALSE(bf16_plan(LinearFormat::kMxfp4W4A16, 8, 14336, 4096).decode_half);
  // A split of 4 (session 10: halves through partials); 2048x7168 is such a shape on the H200.
  const gemm::Plan pm = bf16_plan(LinearFormat::kMxfp4W4A16, 16, n_for_split(4), 7168);
  EXPECT_EQ(pm.split_k, 4);
  EXPECT_TRUE(pm.decode_half && !pm.split_cluster);
  EXPECT_TRUE(bf16_plan(LinearFormat::kNvfp4W4A16, 13, 4096, 2048).decode_half);  // split 2
  EXPECT_TRUE(bf16_plan(LinearFormat::kNvfp4W4A16, 8, 8200, 4096).decode_half);
  for (LinearFormat f : {LinearFormat::kNvfp4, LinearFormat::kNvfp4W4A16}) {
    // N = 8200 (513 tiles, 129 CTAs, the last with one): the whole K = 4096 (8 slices) per CTA.
    for (int64_t M : {5, 8}) run_case({f, M, 8200, 4096, DType::kBF16, DType::kBF16, M == 5});
    for (int64_t M : {13, 16, 27})
      run_case({f, M, 4096, 2048, DType::kBF16, DType::kBF16, M == 13});
  }
  run_case({LinearFormat::kMxfp4W4A16, 16, 4096, 2048, DType::kBF16, DType::kBF16, true});
  run_case({LinearFormat::kMxfp4, 27, 4096, 2048, DType::kBF16, DType::kBF16, false});
  ScopedEnv eh("B12X_GEMM_DECODE_HALF", "0");
  EXPECT_FALSE(bf16_plan(LinearFormat::kNvfp4W4A16, 16, 14336, 4096).decode_half);
}

TEST(GemmGpu, DecodeHalvesReduceDefault) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  // Session 10 defaults at M = 9..32: (1) the slice halves also where K is split over 3..4 CTAs,
  // through fp32 partials + the reduce kernel instead of a cluster (B12X_GEMM_DECODE_HALF_REDUCE=0:
  // the session-9 rule, halves only with a split of at most 2); (2) for NVFP4 weights the
  // pipelined staging's two buffers at 68 KB where the device holds them (chunks of 2 slices).
  // n_for_split(4) x 7168 (14 slices; 2048x7168 on the H200) takes a split of 4 on any device;
  // 8200x4096 (129 CTAs) one CTA per tile group over 8 slices in chunks; launches checked through
  // lin::last_decode_launch().
  const bool big_smem = device_info(0).smem_per_block_optin >= 160 * 1024;
  const int64_t n4 = n_for_split(4);
  for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4W4A16}) {
    const gemm::Plan pl = bf16_plan(f, 16, n4, 7168);
    EXPECT_EQ(pl.split_k, 4);
    EXPECT_TRUE(pl.decode_half && !pl.split_cluster);
    EXPECT_EQ(pl.decode_pipe_kb, f == LinearFormat::kNvfp4W4A16 ? 68 : 0);
    for (int64_t M : {9, 16}) {
      run_case({f, M, n4, 7168, DType::kBF16, DType::kBF16, M == 9});
      const gemm::lin::DecodeLaunch l = gemm::lin::last_decode_launch();
      EXPECT_TRUE(l.half && l.pipe) << "M = " << M;
      EXPECT_EQ(l.split, pl.split_k);
      EXPECT_EQ(l.cluster, pl.split_cluster ? pl.split_k : 1);
    }
  }
  run_case({LinearFormat::kNvfp4W4A16, 16, 8200, 4096, DType::kBF16, DType::kBF16, true});
  {
    const gemm::lin::DecodeLaunch l = gemm::lin::last_decode_launch();
    EXPECT_TRUE(l.half && l.pipe);
    // The 32 KB ring + two buffers of 2 slices of 16 rows (~64 KB) where the 68 KB fit: more
    // than the ring + the 36 KB default.
    if (big_smem) EXPECT_GT(l.smem, 32 * 1024 + gemm::lin::kDecodePipeBudget);
  }
  run_case({LinearFormat::kNvfp4, 27, 8200, 4096, DType::kBF16, DType::kBF16, false});
  ScopedEnv er("B12X_GEMM_DECODE_HALF_REDUCE", "0"), ek("B12X_GEMM_DECODE_PIPE_KB", "0");
  // The session-9 rule: no halves with a split of 4, halves with 2.
  const gemm::Plan old = bf16_plan(LinearFormat::kNvfp4W4A16, 16, n4, 7168);
  EXPECT_EQ(old.split_k, 4);
  EXPECT_FALSE(old.decode_half);
  EXPECT_EQ(old.decode_pipe_kb, 0);
  run_case({LinearFormat::kNvfp4W4A16, 16, n4, 7168, DType::kBF16, DType::kBF16, false});
  EXPECT_FALSE(gemm::lin::last_decode_launch().half);
  const gemm::Plan old2 = bf16_plan(LinearFormat::kNvfp4W4A16, 16, n_for_split(2), 7168);
  EXPECT_EQ(old2.split_k, 2);
  EXPECT_TRUE(old2.decode_half);
}

TEST(GemmGpu, DecodeFp8SmallM) {
  B12X_REQUIRE_GPU();
  // Session 17: FP8 weights at M = 2..3 on the M = 1 grid (4 warps per tile, the whole K staged
  // at once, no pipelined staging) where the 64-row CTAs fill more than a quarter and less than
  // 0.9 of the SMs and the staging holds the whole K; the decode kernel's early PDL trigger
  // (Plan::stream_trig bit 8) where each warp streams at most 8 slices of 256 K; the 4-slice
  // ring per warp where the grid takes 1-2 CTAs per SM (here 2 x SMs tiles); the activations
  // staged by plain loads at M >= 2 where M x K <= 8192. SM90's rules (measured there).
  if (!(device_info(0).cc_major == 9 && device_info(0).cc_minor == 0))
    GTEST_SKIP() << "the FP8 small-M decode grid rules are SM90's";
  const int64_t n = 64 * std::max<int64_t>(1, device_info(0).sm_count / 2);
  auto plan_of = [&](LinearFormat f, int64_t M, int64_t K) {
    gemm::Caps caps;
    caps.format = f;
    caps.max_tokens = M;
    caps.in_features = K;
    caps.out_features = n;
    caps.act_dtype = f == LinearFormat::kFp8Tensor ? DType::kFP8E4M3 : DType::kBF16;
    caps.out_dtype = DType::kBF16;
    return gemm::plan(caps);
  };
  for (int64_t M : {1, 2, 3}) {
    const gemm::Plan pt = plan_of(LinearFormat::kFp8Tensor, M, 4096);
    // (M = 3: the shared staging of session 25 where its clusters fit only without the ring.)
    EXPECT_TRUE(pt.decode_warp_split == 4 && !pt.decode_pipe &&
                (pt.decode_deep == 1 || (M == 3 && pt.decode_xshare > 0)))
        << "M = " << M;
    EXPECT_EQ(pt.stream_trig & 8, 8) << "M = " << M;  // 4 slices per warp
    EXPECT_EQ(pt.decode_sync_stage, M == 2) << "M = " << M;
  }
  EXPECT_EQ(plan_of(LinearFormat::kFp8Block, 2, 4096).decode_warp_split, 4);
  EXPECT_EQ(plan_of(LinearFormat::kFp8Tensor, 1, 14336).stream_trig & 8, 0);  // 14 per warp
  {
    // (Session 26's staging beyond 32 KB, the shared staging's, takes it where clusters fit.)
    ScopedEnv eb("B12X_GEMM_DECODE_XSHARE_BIG", "0");
    EXPECT_NE(plan_of(LinearFormat::kFp8Tensor, 3, 14336).decode_warp_split, 4);  // > staging
  }
  {
    ScopedEnv off("B12X_GEMM_DECODE_WS_M", "1");
    EXPECT_NE(plan_of(LinearFormat::kFp8Tensor, 2, 4096).decode_warp_split, 4);
  }
  // Runs (the block kernel takes block FP8 from M = 3), all with the plain-load staging (M x K <=
  // 8192; block FP8's BF16 rows are quantized while staged): K = 2048, and K = 896 (a K tail
  // inside a slice) with a partial last row tile (N = n - 8); FP16 outputs; capacity 3 at M = 2;
  // the e4m3 instances (B12X_GEMM_DECODE_F8MMA=0, the kind SM89 / SM12x take).
  struct Run {
    LinearFormat f;
    int64_t M, N, K;
    DType out;
    int64_t cap;
    bool e4m3;
  };
  const Run runs[] = {
      {LinearFormat::kFp8Tensor, 2, n, 2048, DType::kBF16, 2, false},
      {LinearFormat::kFp8Tensor, 3, n, 2048, DType::kBF16, 3, false},
      {LinearFormat::kFp8Block, 2, n, 2048, DType::kBF16, 2, false},
      {LinearFormat::kFp8Tensor, 2, n - 8, 896, DType::kFP16, 2, false},
      {LinearFormat::kFp8Tensor, 2, n - 8, 896, DType::kBF16, 3, false},
      {LinearFormat::kFp8Block, 2, n - 8, 896, DType::kFP16, 3, false},
      {LinearFormat::kFp8Tensor, 2, n - 8, 896, DType::kBF16, 2, true},
      {LinearFormat::kFp8Tensor, 3, n, 2048, DType::kFP16, 3, true},
      {LinearFormat::kFp8Block, 2, n - 8, 896, DType::kBF16, 2, true},
  };
  int k = 0;
  for (const Run& r : runs) {
    const DType act = r.f == LinearFormat::kFp8Tensor ? DType::kFP8E4M3 : DType::kBF16;
    Case c{r.f, r.M, r.N, r.K, act, r.out, (k % 2) == 0};
    c.max_tokens = r.cap;
    const bool graph = (k++ % 3) == 1;
    if (r.e4m3) {
      ScopedEnv em("B12X_GEMM_DECODE_F8MMA", "0");
      run_case(c, graph);
    } else {
      run_case(c, graph);
    }
    const gemm::lin::DecodeLaunch l = gemm::lin::last_decode_launch();
    EXPECT_TRUE(l.ws == 4 && !l.pipe && l.nt == 1 && l.deep == 1 && l.mma == (r.e4m3 ? 0 : 1))
        << name(c) << " capacity " << r.cap << (r.e4m3 ? " e4m3" : "");
  }
}

TEST(GemmGpu, DecodeFp8Xshare) {
  B12X_REQUIRE_GPU();
  // Session 25: per-tensor FP8 on the 4-warp grid in clusters of S CTAs sharing their staged rows
  // (Plan::decode_xshare, kXsh: each CTA multicasts 1 / S of every e4m3 row into the cluster).
  if (!(device_info(0).cc_major == 9 && device_info(0).cc_minor == 0))
    GTEST_SKIP() << "the shared staging is SM90's (multicast bulk copies)";
  // The default: at M <= 8 (the staging holding K) where a CTA stages >= 12 KB from M = 2 (K =
  // 4096: M = 3..7), at every M where the grid has at most one CTA per SM; S = 4 with more CTAs
  // than SMs where all clusters fit, else 2. N = 64 x SMs / 2 (2 x SMs tiles); capacity 4 run at M
  // = 2 (below the plan's first M: the plain staging), 3, 4; capacity 2 at K = 4096 keeps the plain
  // staging.
  const int64_t sms = device_info(0).sm_count;
  const int64_t n = 64 * std::max<int64_t>(1, sms / 2);
  {
    const gemm::Plan p4 = linear_plan(LinearFormat::kFp8Tensor, 4, n, 4096, DType::kFP8E4M3);
    EXPECT_TRUE(p4.decode_warp_split == 4 && (p4.decode_xshare == 2 || p4.decode_xshare == 4) &&
                p4.decode_xshare_min_m == 3)
        << "ws " << p4.decode_warp_split << " xshare " << p4.decode_xshare << " from "
        << p4.decode_xshare_min_m;
    EXPECT_EQ(linear_plan(LinearFormat::kFp8Tensor, 2, n, 4096, DType::kFP8E4M3).decode_xshare, 0);
    const gemm::Plan p1 =
        linear_plan(LinearFormat::kFp8Tensor, 1, 16 * (sms - 4), 7168, DType::kFP8E4M3);
    EXPECT_TRUE(p1.decode_xshare == 2 && p1.decode_xshare_min_m == 1) << p1.decode_xshare;
    // Session 27: two token tiles on the 2-slice ring (deep -1) where the default ring leaves one
    // CTA per SM (16 rows of K = 4096 over 2 x SMs - 8 tiles: 4096x4096 on the H200), the default
    // ring at M = 13 (it fits 2 per SM); none at M = 16 with B12X_GEMM_DECODE_XSHARE_SHALLOW=0.
    {
      const int64_t n2 = 16 * (2 * sms - 8);
      const gemm::Plan p16 = linear_plan(LinearFormat::kFp8Tensor, 16, n2, 4096, DType::kFP8E4M3);
      EXPECT_TRUE(p16.decode_xshare == 2 && p16.decode_deep == -1)
          << "xshare " << p16.decode_xshare << " deep " << p16.decode_deep;
      const gemm::Plan p13 = linear_plan(LinearFormat::kFp8Tensor, 13, n2, 4096, DType::kFP8E4M3);
      EXPECT_TRUE(p13.decode_xshare == 2 && p13.decode_deep == 0)
          << "xshare " << p13.decode_xshare << " deep " << p13.decode_deep;
      ScopedEnv esh("B12X_GEMM_DECODE_XSHARE_SHALLOW", "0");
      EXPECT_EQ(linear_plan(LinearFormat::kFp8Tensor, 16, n2, 4096, DType::kFP8E4M3).decode_xshare,
                0);
    }
    for (int64_t M : {2, 3, 4}) {
      Case c{LinearFormat::kFp8Tensor, M, n, 4096, DType::kFP8E4M3, DType::kBF16, M == 3};
      c.max_tokens = 4;
      run_case(c, /*graph_replay=*/M == 4);
      const gemm::lin::DecodeLaunch l = gemm::lin::last_decode_launch();
      EXPECT_EQ(l.xshare, M >= 3 ? p4.decode_xshare : 0) << "M = " << M;
      EXPECT_TRUE(l.ws == 4 && l.nt == 1 && !l.pipe) << "M = " << M;
    }
    // To M = 8 where the staging holds the whole K (K = 4096: M <= 7): capacity 6 at M = 6.
    Case c6{LinearFormat::kFp8Tensor, 6, n, 4096, DType::kFP8E4M3, DType::kFP16, true};
    run_case(c6);
    EXPECT_GT(gemm::lin::last_decode_launch().xshare, 0);
    ScopedEnv ex("B12X_GEMM_DECODE_XSHARE", "0");
    EXPECT_EQ(linear_plan(LinearFormat::kFp8Tensor, 4, n, 4096, DType::kFP8E4M3).decode_xshare, 0);
  }
  // Forced (B12X_GEMM_DECODE_XSHARE=4|2 to M = 8, the decode kernel at M >= 4): N = 40 / 200
  // (grids padded to whole clusters, a partial last tile), K tails inside a slice (K = 896 /
  // 1312: zero-filled per CTA), M = 1..8, bias, FP16 out, graph replays, both MMA kinds, with
  // and without the deeper ring.
  ScopedEnv ew("B12X_GEMM_DECODE_WS_M", "8"), ef8("B12X_GEMM_STREAM16_F8", "0");
  struct Run {
    int64_t M, N, K;
    DType out;
    bool bias, graph;
    const char *xshare, *deep, *mma;
  };
  const Run runs[] = {
      {1, 40, 896, DType::kBF16, true, false, "4", "0", nullptr},
      {4, 200, 1312, DType::kFP16, false, true, "4", "0", nullptr},
      {8, 72, 2048, DType::kBF16, true, true, "4", "0", nullptr},
      {3, 40, 896, DType::kBF16, true, false, "4", "1", nullptr},
      {5, 200, 2048, DType::kBF16, false, false, "4", "1", nullptr},
      {1, 200, 2048, DType::kBF16, false, false, "4", "0", "0"},
      {2, 40, 896, DType::kFP16, true, true, "2", "0", "0"},
      {6, 136, 1024, DType::kBF16, false, true, "2", "1", nullptr},
  };
  // One forced run (S, deep ring, MMA kind by knob) against the reference; its launch record.
  const auto run_forced = [](const Run& r) {
    ScopedEnv ex("B12X_GEMM_DECODE_XSHARE", r.xshare), ed("B12X_GEMM_DECODE_DEEP", r.deep);
    std::unique_ptr<ScopedEnv> em;
    if (r.mma != nullptr) em = std::make_unique<ScopedEnv>("B12X_GEMM_DECODE_F8MMA", r.mma);
    run_case({LinearFormat::kFp8Tensor, r.M, r.N, r.K, DType::kFP8E4M3, r.out, r.bias}, r.graph);
    return gemm::lin::last_decode_launch();
  };
  for (const Run& r : runs) {
    const gemm::lin::DecodeLaunch l = run_forced(r);
    EXPECT_TRUE(l.ws == 4 && !l.pipe && l.nt == 1 && l.xshare == std::atoi(r.xshare) &&
                l.deep == std::atoi(r.deep))
        << "M=" << r.M << " N=" << r.N << " K=" << r.K << " xshare " << l.xshare << " deep "
        << l.deep;
  }
  // Session 26: the staging beyond kDecodeStageBudget (ring + staging within kDecodeXshBudget,
  // SM90): the rule's plan at capacity 6 over K = 7168 (43 KB of rows) on a grid of one CTA per
  // SM, off with B12X_GEMM_DECODE_XSHARE_BIG=0; forced S at M = 5 / 8 over K = 8992 / 6176 (46 /
  // 51 KB of rows, K tails inside a slice), bias, FP16 out, a graph replay.
  {
    const gemm::Plan pg =
        linear_plan(LinearFormat::kFp8Tensor, 6, 16 * (sms - 4), 7168, DType::kFP8E4M3);
    EXPECT_TRUE(pg.decode_warp_split == 4 && pg.decode_xshare == 2) << pg.decode_xshare;
    ScopedEnv eg("B12X_GEMM_DECODE_XSHARE_BIG", "0");
    EXPECT_EQ(linear_plan(LinearFormat::kFp8Tensor, 6, 16 * (sms - 4), 7168, DType::kFP8E4M3)
                  .decode_xshare,
              0);
  }
  // Then two token tiles on the shared staging (M = 9..16, the default since round 98), forced
  // S = 4 / 2 at M = 9 / 16 / 13 with K tails inside a slice, bias, FP16 out, graphs.
  const Run grs[] = {
      {5, 200, 8992, DType::kBF16, true, true, "4", "0", nullptr},
      {8, 72, 6176, DType::kFP16, false, false, "2", "0", nullptr},
      {9, 200, 1312, DType::kBF16, true, true, "4", "0", nullptr},
      {16, 72, 2048, DType::kFP16, false, false, "2", "0", nullptr},
      {13, 136, 3104, DType::kBF16, false, true, "2", "0", nullptr},
  };
  for (const Run& r : grs) {
    const gemm::lin::DecodeLaunch l = run_forced(r);
    const int nt = r.M > 8 ? 2 : 1;
    EXPECT_TRUE(l.ws == 4 && !l.pipe && l.nt == nt && l.xshare == std::atoi(r.xshare) &&
                l.mma == 1 && (nt == 2 || l.smem > 48 * 1024 + gemm::lin::kDecodeStageBudget))
        << "M=" << r.M << " N=" << r.N << " K=" << r.K << " xshare " << l.xshare << " nt " << l.nt
        << " smem " << l.smem;
  }
  // Probe (session 27): two token tiles with a ring of 2 slices per warp
  // (B12X_GEMM_DECODE_XSHARE_SHALLOW=2) forced S = 2 / 4 at M = 16 / 11 with K tails inside a
  // slice, bias, FP16 out, graphs; a capacity-16 plan's M = 5 run on its one-tile instance
  // (the default ring).
  {
    ScopedEnv esh("B12X_GEMM_DECODE_XSHARE_SHALLOW", "2");
    const Run srs[] = {
        {16, 200, 4128, DType::kBF16, true, true, "2", nullptr, nullptr},
        {11, 72, 1312, DType::kFP16, false, true, "4", nullptr, nullptr},
        {5, 136, 2080, DType::kBF16, true, false, "2", nullptr, nullptr},
    };
    for (const Run& r : srs) {
      ScopedEnv ex("B12X_GEMM_DECODE_XSHARE", r.xshare);
      Case c{LinearFormat::kFp8Tensor, r.M, r.N, r.K, DType::kFP8E4M3, r.out, r.bias};
      c.max_tokens = 16;
      run_case(c, r.graph);
      const gemm::lin::DecodeLaunch l = gemm::lin::last_decode_launch();
      const int nt = r.M > 8 ? 2 : 1;
      EXPECT_TRUE(l.ws == 4 && l.nt == nt && l.xshare == std::atoi(r.xshare) &&
                  l.deep == (nt == 2 ? -1 : 0))
          << "M=" << r.M << " N=" << r.N << " K=" << r.K << " xshare " << l.xshare << " nt " << l.nt
          << " deep " << l.deep;
    }
  }
}

TEST(GemmGpu, DecodeFp8XshareQuant) {
  B12X_REQUIRE_GPU();
  // Session 29 probe (B12X_GEMM_DECODE_XSHARE_Q=1|2): block FP8 on the shared staging, the rows
  // quantized before the kernel (the quantizer launch, or the caller's e4m3 rows), each CTA
  // loading its rows' group scales. Forced S = 4 / 2 (the decode kernel to M = 8) at M = 2..8
  // with K tails inside a slice (1152 / 1280), N off the CTA (200 / 72 / 136), bias, FP16 out,
  // graph replays.
  if (!(device_info(0).cc_major == 9 && device_info(0).cc_minor == 0))
    GTEST_SKIP() << "the shared staging is SM90's (multicast bulk copies)";
  ScopedEnv ew("B12X_GEMM_DECODE_WS_M", "8"), ef8("B12X_GEMM_STREAM16_F8", "0");
  struct Run {
    LinearFormat f;
    int64_t M, N, K;
    DType out;
    bool bias, graph, callerq;
    const char *xshare, *shallow;
  };
  const Run runs[] = {
      {LinearFormat::kFp8Block, 2, 200, 1152, DType::kBF16, true, false, false, "4", "1"},
      {LinearFormat::kFp8Block, 4, 136, 2048, DType::kFP16, false, true, false, "2", "1"},
      {LinearFormat::kFp8Block, 5, 72, 1280, DType::kBF16, true, true, true, "4", "1"},
      {LinearFormat::kFp8Block, 8, 200, 1152, DType::kBF16, false, true, false, "2", "1"},
      {LinearFormat::kFp8Block, 3, 72, 2048, DType::kFP16, true, false, true, "4", "1"},
  };
  // The default's form (the quantizer launched as a programmatic dependent), forced.
  for (const char* q : {"1"})
    for (const Run& r : runs) {
      ScopedEnv eq("B12X_GEMM_DECODE_XSHARE_Q", q), ex("B12X_GEMM_DECODE_XSHARE", r.xshare),
          esh("B12X_GEMM_DECODE_XSHARE_SHALLOW", r.shallow);
      Case c{r.f, r.M, r.N, r.K, DType::kBF16, r.out, r.bias};
      c.caller_quant = r.callerq;
      run_case(c, r.graph);
      const gemm::lin::DecodeLaunch l = gemm::lin::last_decode_launch();
      const int nt = r.M > 8 ? 2 : 1;
      EXPECT_TRUE(l.ws == 4 && l.nt == nt && l.mma == 1 && l.xshare == std::atoi(r.xshare) &&
                  l.deep == (r.shallow[0] == '2' ? -1 : 0))
          << name(c) << " Q " << q << " xshare " << l.xshare << " nt " << l.nt << " deep "
          << l.deep;
    }
}

TEST(GemmGpu, DecodeSliceHalvesFp8) {
  B12X_REQUIRE_GPU();
  // One warp per tile throughout: the halves' rules (N = 72 and n_for_split(4) would take 2 warps
  // per tile at M = 9..16 since session 13). The decode kernel at M = 5..16, not the session-14
  // FP8 block kernel.
  ScopedEnv ews("B12X_GEMM_DECODE_PIPE_WS", "1"), ef8("B12X_GEMM_STREAM16_F8", "0");
  // The halves, not session 25's shared staging (the 4-warp grid at M <= 8 on these N).
  ScopedEnv ex("B12X_GEMM_DECODE_XSHARE", "0");
  // Per-tensor FP8 weights on the slice halves (8 warps, each on 4 of the 8 atoms of a 256-K
  // slice): by default at M = 9..32 where K is split over at most 2 CTAs of >= 16 slices each
  // (4096x8192: split 2 on the H200), forced by B12X_GEMM_DECODE_HALF=1: K = 4864 (19 slices) in
  // several chunks with split 1, a cluster of 4 and the default split (partials at N = 72); M = 5
  // (one token tile), 9 / 16 / 27 (two); one staging buffer (B12X_GEMM_DECODE_PIPE=0) too.
  gemm::Caps caps;
  caps.format = LinearFormat::kFp8Tensor;
  caps.max_tokens = 16;
  caps.in_features = 4864;
  caps.out_features = 72;
  caps.act_dtype = DType::kFP8E4M3;
  caps.out_dtype = DType::kBF16;
  EXPECT_FALSE(gemm::plan(caps).decode_half);  // N = 72: a split of 19
  // n_for_split(2) x 8192 (32 slices; 4096x8192 on the H200): a split of 2, 16 slices per CTA.
  caps.in_features = 8192;
  caps.out_features = n_for_split(2);
  const gemm::Plan pd = gemm::plan(caps);
  EXPECT_EQ(pd.split_k, 2);
  EXPECT_TRUE(pd.decode_half);
  // fp8_tensor runs take e4m3 activations (make_acts ignores Case::act for it; the cases say
  // FP8E4M3): the run plans with the caps above, so its launch must take the halves.
  run_case(
      {LinearFormat::kFp8Tensor, 16, caps.out_features, 8192, DType::kFP8E4M3, DType::kBF16, true});
  EXPECT_TRUE(gemm::lin::last_decode_launch().half);
  // A split of 4 (8 slices per CTA): one warp per tile.
  caps.out_features = n_for_split(4);
  EXPECT_EQ(gemm::plan(caps).split_k, 4);
  EXPECT_FALSE(gemm::plan(caps).decode_half);
  caps.out_features = 4096;
  caps.in_features = 2048;  // 8 slices: one warp per tile
  EXPECT_FALSE(gemm::plan(caps).decode_half);
  caps.max_tokens = 8;
  EXPECT_FALSE(gemm::plan(caps).decode_half);  // one token tile: not by default
  ScopedEnv eh("B12X_GEMM_DECODE_HALF", "1");
  EXPECT_TRUE(gemm::plan(caps).decode_half);
  int i = 0;
  for (const char* split : {"1", "4", ""}) {
    if (split[0] != 0) setenv("B12X_GEMM_SPLIT", split, 1);
    for (int64_t M : {5, 9, 16, 27}) {
      run_case(
          {LinearFormat::kFp8Tensor, M, 72, 4864, DType::kFP8E4M3, DType::kBF16, (i++ % 2) == 0});
      EXPECT_TRUE(gemm::lin::last_decode_launch().half) << "M = " << M << ", split '" << split;
    }
    unsetenv("B12X_GEMM_SPLIT");
  }
  ScopedEnv ep("B12X_GEMM_DECODE_PIPE", "0"), es("B12X_GEMM_SPLIT", "4");
  for (int64_t M : {9, 16}) {
    run_case({LinearFormat::kFp8Tensor, M, 72, 4864, DType::kFP8E4M3, DType::kFP16, M == 9});
    const gemm::lin::DecodeLaunch l = gemm::lin::last_decode_launch();
    EXPECT_TRUE(l.half && !l.pipe) << "M = " << M;
  }
}

TEST(GemmGpu, DecodeFp8MmaKinds) {
  B12X_REQUIRE_GPU();
  // The FP8 weight formats' decode kernels on e4m3 mma.sync (B12X_GEMM_DECODE_F8MMA=0, the
  // default off SM90) and on f16 MMAs over e4m3 fragments converted in the kernel (=1, SM90's
  // default): per-tensor (no group scales, four accumulator chains per token tile), block FP8
  // (1x128 groups) and MXFP8 (32-K groups); one and two token tiles, 4 warps per tile at M = 1,
  // splits over a cluster (N = 72) and none (N = 200), K in several staging chunks (4864) or one
  // (1024), bias on odd M; the halves, one staging buffer with partials (split 4), FP16 output.
  // The decode kernel at M = 5..16, not the session-14 FP8 block kernel.
  ScopedEnv ef8("B12X_GEMM_STREAM16_F8", "0");
  const bool sm90 = device_info(0).cc_major == 9 && device_info(0).cc_minor == 0;
  {
    gemm::Caps caps;
    caps.format = LinearFormat::kFp8Block;
    caps.max_tokens = 16;
    caps.in_features = 4096;
    caps.out_features = 4096;
    caps.act_dtype = DType::kBF16;
    caps.out_dtype = DType::kBF16;
    EXPECT_EQ(gemm::plan(caps).decode_fp8_mma, sm90 ? 1 : 0);
    caps.max_tokens = 1;  // M = 1 keeps e4m3 mma.sync
    EXPECT_EQ(gemm::plan(caps).decode_fp8_mma, 0);
  }
  ScopedEnv es("B12X_GEMM_DECODE_STREAM", "0");
  const std::pair<int64_t, int64_t> shapes[] = {{72, 4864}, {200, 1024}};
  for (const char* mma : {"0", "1"}) {
    ScopedEnv em("B12X_GEMM_DECODE_F8MMA", mma);
    for (LinearFormat f :
         {LinearFormat::kFp8Tensor, LinearFormat::kFp8Block, LinearFormat::kMxfp8}) {
      const DType act = f == LinearFormat::kFp8Tensor ? DType::kFP8E4M3 : DType::kBF16;
      for (int64_t M : {1, 4, 9, 16})
        for (const auto& nk : shapes) {
          run_case({f, M, nk.first, nk.second, act, DType::kBF16, M % 2 == 1});
          EXPECT_EQ(gemm::lin::last_decode_launch().mma, mma[0] - '0')
              << gemm::format_name(f) << " M = " << M << " N = " << nk.first << " F8MMA " << mma;
        }
    }
    {
      // (Not session 26's two-tile shared staging, which takes these plans by default.)
      ScopedEnv eh("B12X_GEMM_DECODE_HALF", "1"), ew("B12X_GEMM_DECODE_PIPE_WS", "1"),
          ex16("B12X_GEMM_DECODE_XSHARE16", "0");
      for (int64_t M : {9, 16}) {
        run_case({LinearFormat::kFp8Tensor, M, 72, 4864, DType::kFP8E4M3, DType::kBF16, M == 9});
        const gemm::lin::DecodeLaunch l = gemm::lin::last_decode_launch();
        EXPECT_TRUE(l.half && l.mma == mma[0] - '0') << "M = " << M;
      }
    }
    {
      ScopedEnv ep("B12X_GEMM_DECODE_PIPE", "0"), es4("B12X_GEMM_SPLIT", "4");
      for (int64_t M : {5, 16})
        run_case({LinearFormat::kFp8Tensor, M, 72, 4864, DType::kFP8E4M3, DType::kFP16, M == 5});
    }
  }
  // Two token tiles with warps per tile: by default 2 for per-tensor FP8 at M = 9..16 where the
  // 64-row CTAs fill at most a quarter of the SMs (N = 16 x SMs rows, K = 7168; 2048x7168 on the
  // H200); B12X_GEMM_DECODE_PIPE_WS=2|4 forces it (4 needs chunks of 8 slices, the 68 KB
  // staging): N = 40 (3 tiles) splits K = 20480 over a cluster, whose CTAs end on a short chunk
  // where some K parts have no slice; e4m3 and f16 MMAs. (Session 26's two-tile shared staging,
  // the default on this shape since, off.)
  {
    ScopedEnv ex16("B12X_GEMM_DECODE_XSHARE16", "0");
    gemm::Caps caps;
    caps.format = LinearFormat::kFp8Tensor;
    caps.max_tokens = 16;
    caps.in_features = 7168;
    caps.out_features = 16 * (device_info(0).sm_count / 4 * 4);
    caps.act_dtype = DType::kFP8E4M3;
    caps.out_dtype = DType::kBF16;
    const bool sm9x = device_info(0).cc_major >= 9;  // the pipelined K parts need SM90+
    EXPECT_EQ(gemm::plan(caps).decode_warp_split, sm9x ? 2 : 1);
    EXPECT_EQ(gemm::plan(caps).decode_pipe_kb, 68);  // the 68 KB pipelined staging (no halves)
    run_case({LinearFormat::kFp8Tensor, 16, caps.out_features, 7168, DType::kFP8E4M3, DType::kBF16,
              true});
    const gemm::lin::DecodeLaunch l = gemm::lin::last_decode_launch();
    EXPECT_TRUE(l.nt == 2 && l.ws == (sm9x ? 2 : 1) && l.pipe);
    // That capacity-16 plan run at M = 1 / 5 / 8 (one token tile, its 2 warps per tile and the
    // pipelined staging where M >= 2; e4m3 mma.sync at M = 1), and a capacity-64 plan (the tiled
    // regime's) decoding at M = 16 / 1: the MMA kind by the run's M.
    for (int64_t M : {1, 5, 8}) {
      run_case({LinearFormat::kFp8Tensor, M, caps.out_features, 7168, DType::kFP8E4M3, DType::kBF16,
                M == 5, false, gemm::Regime::kAuto, 16});
      const gemm::lin::DecodeLaunch lm = gemm::lin::last_decode_launch();
      EXPECT_TRUE(lm.nt == 1 && lm.mma == (sm90 && M >= 2 ? 1 : 0)) << "M = " << M;
    }
    for (int64_t M : {16, 1}) {
      run_case({LinearFormat::kFp8Tensor, M, 72, 4864, DType::kFP8E4M3, DType::kBF16, false, false,
                gemm::Regime::kAuto, 64});
      EXPECT_EQ(gemm::lin::last_decode_launch().mma, sm90 && M >= 2 ? 1 : 0) << "M = " << M;
    }
    caps.out_features = 64 * device_info(0).sm_count;  // CTAs for every SM: one warp per tile
    EXPECT_EQ(gemm::plan(caps).decode_warp_split, 1);
  }
  // (4 warps per tile at two token tiles, B12X_GEMM_DECODE_PIPE_WS=4, was removed in session 21:
  // round 48 measured it slower on every shape.)
  ScopedEnv ekb("B12X_GEMM_DECODE_PIPE_KB", "68");
  for (const char* mma : {"1", "0"})
    for (const char* ws : {"2"}) {
      ScopedEnv em("B12X_GEMM_DECODE_F8MMA", mma), ew("B12X_GEMM_DECODE_PIPE_WS", ws);
      for (int64_t M : {9, 16}) {
        run_case({LinearFormat::kFp8Tensor, M, 40, 20480, DType::kFP8E4M3, DType::kBF16, M == 9});
        const gemm::lin::DecodeLaunch l = gemm::lin::last_decode_launch();
        EXPECT_TRUE(l.nt == 2 && l.pipe && l.mma == mma[0] - '0') << "M = " << M;
        if (ws[0] == '2') EXPECT_EQ(l.ws, 2) << "M = " << M;
      }
    }
}

TEST(GemmGpu, DecodeMxfp8Diag) {
  B12X_REQUIRE_GPU();
  // Session 28: MXFP8 at M = 1 on the decode kernel with the 8 E8M0 groups of a slice on the
  // MMA's 8 columns (kDiag, f16 MMAs) and the weight scales in the ring (kSRing); block FP8 at
  // M = 1 with kSRing (e4m3 MMAs). SM90 defaults for plans of capacity 1 (MXFP8: no K split, at
  // most 16 slices); forced here (B12X_GEMM_STREAM16_F8_MINM=2 B12X_GEMM_DECODE_MXDIAG=1, which
  // takes f16 MMAs at M = 1, B12X_GEMM_DECODE_SRING=1) on BF16 rows quantized while staged and FP16
  // rows through the quantizer launch; a K tail inside a slice (4832; block FP8 4736), a cluster
  // split (N = 72), 4 warps per tile with the deeper ring (1.5 x SMs tiles on SM90), one warp per
  // tile (4 x SMs CTAs), a capacity-16 plan's M = 1 run; bias, FP16 out, graph replay.
  const int64_t sms = std::max(device_info(0).sm_count, 1);
  const bool sm90 = device_info(0).cc_major == 9 && device_info(0).cc_minor == 0;
  auto plan_of = [&](LinearFormat f, int64_t N, int64_t K) {
    gemm::Caps caps;
    caps.format = f;
    caps.max_tokens = 1;
    caps.in_features = K;
    caps.out_features = N;
    caps.act_dtype = DType::kBF16;
    caps.out_dtype = DType::kBF16;
    return gemm::plan(caps);
  };
  {
    // The defaults (SM90): MXFP8 K = 4096 without a K split takes both, K = 14336 neither (the
    // block kernel); block FP8 kSRing at capacity 1.
    const gemm::Plan a = plan_of(LinearFormat::kMxfp8, 16 * 2 * sms, 4096);
    EXPECT_TRUE(a.decode_mx_diag == sm90 && a.decode_sring == sm90) << a.describe();
    const gemm::Plan b = plan_of(LinearFormat::kMxfp8, 16 * 2 * sms, 14336);
    EXPECT_TRUE(!b.decode_mx_diag && !b.decode_sring) << b.describe();
    EXPECT_EQ(plan_of(LinearFormat::kFp8Block, 16 * 2 * sms, 4096).decode_sring, sm90);
    ScopedEnv off("B12X_GEMM_DECODE_MXDIAG", "0");
    EXPECT_FALSE(plan_of(LinearFormat::kMxfp8, 16 * 2 * sms, 4096).decode_mx_diag);
  }
  // The default plans' runs (SM90: 4 warps per tile with the deeper ring; one warp per tile).
  for (int64_t N : {24 * sms, 64 * sms}) {
    run_case({LinearFormat::kMxfp8, 1, N, 2048, DType::kBF16, DType::kBF16, N == 24 * sms},
             N == 64 * sms);
    const gemm::lin::DecodeLaunch l = gemm::lin::last_decode_launch();
    if (sm90) EXPECT_TRUE(l.diag && l.sring && l.mma == 1) << "N = " << N << " ws " << l.ws;
  }
  ScopedEnv emin("B12X_GEMM_STREAM16_F8_MINM", "2"), ed("B12X_GEMM_DECODE_MXDIAG", "1"),
      es("B12X_GEMM_DECODE_SRING", "1");
  struct Run {
    int64_t N, K;
    DType act, out;
    bool bias, graph;
    int64_t cap;
  };
  const Run runs[] = {
      {72, 4832, DType::kBF16, DType::kBF16, true, true, 1},
      {200, 1024, DType::kFP16, DType::kFP16, false, false, 1},
      {24 * sms, 2048, DType::kBF16, DType::kBF16, true, false, 1},
      {64 * sms, 512, DType::kBF16, DType::kFP16, false, true, 1},
      {72, 1024, DType::kBF16, DType::kBF16, true, false, 16},
  };
  for (LinearFormat f : {LinearFormat::kMxfp8, LinearFormat::kFp8Block}) {
    const bool mx = f == LinearFormat::kMxfp8;
    ScopedEnv em("B12X_GEMM_DECODE_F8MMA", mx ? "1" : "0");
    for (const Run& r : runs) {
      Case c{f, 1, r.N, !mx && r.K == 4832 ? 4736 : r.K, r.act, r.out, r.bias};
      c.max_tokens = r.cap;
      run_case(c, r.graph);
      const gemm::lin::DecodeLaunch l = gemm::lin::last_decode_launch();
      // (The instances: 4 warps per tile with deep 0 / 1 and one warp per tile, the SM90 grids
      // of these runs; elsewhere a run on another grid falls back to kVar 0.)
      const bool inst = (l.ws == 4 && (l.deep == 0 || l.deep == 1)) || (l.ws <= 1 && l.deep == 0);
      EXPECT_TRUE(l.nt == 1 && l.mma == (mx ? 1 : 0) && (sm90 || inst))
          << name(c) << " capacity " << r.cap << " ws " << l.ws << " deep " << l.deep;
      if (inst)
        EXPECT_TRUE(l.diag == mx && l.sring)
            << name(c) << " capacity " << r.cap << " ws " << l.ws << " deep " << l.deep;
    }
  }
}

TEST(GemmGpu, DecodePipelinedStagingWarpSplit) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  ScopedEnv eg0("B12X_GGML_GEMV", "0");  // the decode kernel for the GGML formats too
  // B12X_GEMM_DECODE_PIPE_WS=2|4 at M = 2..8: the warps of a tile take interleaved slices of each
  // staged chunk. N = 40 (3 tiles) splits K = 20480 over a cluster of 8; the CTA's range then
  // takes a short last chunk in which some K parts have no slice (FP4: 5 slices in chunks of 4).
  // The default: 4 warps per tile at M <= 4 for FP4 / Q8_0 weights on narrow grids with long K.
  EXPECT_EQ(bf16_plan(LinearFormat::kNvfp4W4A16, 4, 40, 20480).decode_warp_split, 4);
  EXPECT_EQ(bf16_plan(LinearFormat::kNvfp4W4A16, 8, 40, 20480).decode_warp_split, 1);
  for (const auto& c : all_format_cases(4, 40, 20480, true, DType::kBF16)) run_case(c);
  ScopedEnv ep("B12X_GEMM_DECODE_PIPE", "1");
  for (const char* ws : {"2", "4"}) {
    ScopedEnv ew("B12X_GEMM_DECODE_PIPE_WS", ws);
    for (int64_t M : {3, 5})
      for (const auto& c : all_format_cases(M, 40, 20480, M == 3, DType::kBF16)) run_case(c);
  }
  ScopedEnv ew("B12X_GEMM_DECODE_PIPE_WS", "4");
  const gemm::Plan plan = bf16_plan(LinearFormat::kNvfp4W4A16, 4, 40, 20480);
  EXPECT_TRUE(plan.decode_pipe);
  EXPECT_EQ(plan.decode_warp_split, 4);
}

TEST(GemmGpu, DecodeDeepRing) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  ScopedEnv es0("B12X_GEMM_DECODE_STREAM", "0");  // the decode kernel at M = 1, not the stream one
  ScopedEnv eg0("B12X_GGML_GEMV", "0");           // the decode kernel for the GGML formats too
  // B12X_GEMM_DECODE_DEEP=1: 3 ring slices per warp in the M = 1 kernels with 4 warps per tile
  // (FP4 weights, BF16 MMAs). K = 4096 (2 slices per warp: all in flight), 1280 (2.5 slices:
  // warps without a slice, a K tail), 8960 (several refills of the deeper ring), 20480 (split over
  // a cluster) and 14336. N = 72: a partial last tile; bias on every other case.
  {
    ScopedEnv ed("B12X_GEMM_DECODE_DEEP", "1");
    EXPECT_EQ(bf16_plan(LinearFormat::kNvfp4W4A16, 1, 4096, 4096).decode_deep, 1);
    EXPECT_EQ(bf16_plan(LinearFormat::kQ8_0, 1, 4096, 4096).decode_deep, 0);
    EXPECT_EQ(bf16_plan(LinearFormat::kNvfp4W4A16, 2, 4096, 4096).decode_deep, 0);
    int i = 0;
    for (int64_t K : {4096, 1280, 8960, 20480, 14336})
      for (LinearFormat f : kFp4Bf16Formats)
        run_case({f, 1, 72, K, DType::kBF16, DType::kBF16, (i++ % 2) == 0});
    run_case({LinearFormat::kNvfp4W4A16, 1, 72, 4096, DType::kFP16, DType::kFP16, true});
  }
  // The default: a third slice for NVFP4 weights where each of the 4 warps streams >= 6 slices
  // (N = 2176: more tiles than SMs, so 4 warps per tile; K = 14336: 7 slices per warp).
  EXPECT_EQ(bf16_plan(LinearFormat::kNvfp4W4A16, 1, 4096, 14336).decode_deep, 1);
  EXPECT_EQ(bf16_plan(LinearFormat::kMxfp4W4A16, 1, 4096, 14336).decode_deep, 0);
  EXPECT_EQ(bf16_plan(LinearFormat::kNvfp4W4A16, 1, 14336, 4096).decode_deep, 0);
  for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kNvfp4})
    run_case({f, 1, 2176, 14336, DType::kBF16, DType::kBF16, f == LinearFormat::kNvfp4});
}

TEST(GemmGpu, DecodeWarpSplit8Default) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  ScopedEnv es0("B12X_GEMM_DECODE_STREAM", "0");  // the decode kernel at M = 1, not the stream one
  // The default at M = 1: 8 warps per tile for FP4 weights with BF16 MMAs where the 16-row tiles
  // give at most one CTA per SM (2048x7168 on the H200's 132 SMs), else 4; segment staging copies
  // with the slice halves only.
  // (bf16_plan: BF16 activations, so the plan expectations take the W4A16 formats.)
  const int64_t sms = device_info(0).sm_count;
  for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4W4A16}) {
    EXPECT_EQ(bf16_plan(f, 1, 2048, 7168).decode_warp_split, 128 <= sms ? 8 : 4);
    EXPECT_EQ(bf16_plan(f, 1, 4096, 4096).decode_warp_split, 256 <= sms ? 8 : 4);
    EXPECT_FALSE(bf16_plan(f, 1, 2048, 7168).decode_seg_stage);
  }
  for (LinearFormat f :
       {LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4W4A16, LinearFormat::kNvfp4})
    run_case({f, 1, 2048, 7168, DType::kBF16, DType::kBF16, f == LinearFormat::kNvfp4});
}

TEST(GemmGpu, DecodeWarpSplit8) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  ScopedEnv es0("B12X_GEMM_DECODE_STREAM", "0");  // the decode kernel at M = 1, not the stream one
  ScopedEnv eg0("B12X_GGML_GEMV", "0");           // the decode kernel for the GGML formats too
  // B12X_GEMM_DECODE_WSPLIT=8 (probe): CTAs of 8 warps on one 16-row tile at M = 1 (FP4 weights,
  // BF16 MMAs), each warp 1/8 of the CTA's K range. K = 4096 (one slice per warp), 1280 (warps
  // without a slice, a K tail), 4864, 8960 (beyond SM12x's budget: 4 warps there); a cluster
  // split of K (B12X_GEMM_DECODE_WS_CTAS), N = 72 (a partial last tile).
  ScopedEnv ew("B12X_GEMM_DECODE_WSPLIT", "8");
  EXPECT_EQ(bf16_plan(LinearFormat::kNvfp4W4A16, 1, 4096, 4096).decode_warp_split, 8);
  EXPECT_EQ(bf16_plan(LinearFormat::kQ8_0, 1, 4096, 4096).decode_warp_split, 4);
  int i = 0;
  for (int64_t K : {4096, 1280, 4864, 8960})
    for (LinearFormat f : kFp4Bf16Formats)
      run_case({f, 1, 72, K, DType::kBF16, DType::kBF16, (i++ % 2) == 0});
  run_case({LinearFormat::kNvfp4W4A16, 1, 72, 4096, DType::kFP16, DType::kFP16, true});
  ScopedEnv ec("B12X_GEMM_DECODE_WS_CTAS", "4");
  for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4W4A16})
    run_case({f, 1, 72, 4096, DType::kBF16, DType::kBF16, true});
}

TEST(GemmGpu, DecodeSegmentStaging) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  ScopedEnv es0("B12X_GEMM_DECODE_STREAM", "0");  // the decode kernel at M = 1, not the stream one
  ScopedEnv eg0("B12X_GGML_GEMV", "0");           // the decode kernel for the GGML formats too
  // B12X_GEMM_DECODE_SEGSTAGE=1 (probe): the staging copies of the warp-split, pipelined and
  // slice-halves kernels by 32-piece segments per warp. M = 1 (4 warps per tile, the CTA's K
  // range at once), 3 / 16 / 24 (two buffers, several chunks: K = 4864, a short last chunk
  // reaching past K), the halves at M = 9 / 16 (split 1 and the default), N = 72; K = 1000 (a K
  // tail inside a piece row: zero-filled pieces); FP16 activations.
  ScopedEnv eg("B12X_GEMM_DECODE_SEGSTAGE", "1");
  EXPECT_TRUE(bf16_plan(LinearFormat::kNvfp4W4A16, 16, 72, 4864).decode_seg_stage);
  for (int64_t M : {1, 3, 16, 24})
    for (const auto& c : all_format_cases(M, 72, 4864, M != 16, DType::kBF16)) run_case(c);
  for (const auto& c : all_format_cases(2, 40, 1000, true, DType::kBF16)) run_case(c);
  for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kQ8_0})
    run_case({f, 16, 72, 4864, DType::kFP16, DType::kBF16, true});
  ScopedEnv eh("B12X_GEMM_DECODE_HALF", "1");
  for (const char* split : {"1", ""}) {
    if (split[0] != 0) setenv("B12X_GEMM_SPLIT", split, 1);
    for (int64_t M : {9, 16})
      for (LinearFormat f : kFp4Bf16Formats)
        run_case({f, M, 72, 4864, DType::kBF16, DType::kBF16, M == 9});
    unsetenv("B12X_GEMM_SPLIT");
  }
}

TEST(GemmGpu, DecodePipeBudget) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  // B12X_GEMM_DECODE_PIPE_KB=128 (probe): the pipelined staging's two buffers beyond SM12x's
  // 36 KB where the device allows it (SM90: chunks of 2 slices of 16 rows). K = 4864 (9.5 slices:
  // a short last chunk) in one CTA per tile group (split 1) and over the default split, the halves
  // at M = 9 / 16 / 24 / 32 (also with the lean bookkeeping) and the one-warp pipelined kernel at
  // M = 3; N = 72.
  ScopedEnv ek("B12X_GEMM_DECODE_PIPE_KB", "128"), eh("B12X_GEMM_DECODE_HALF", "1");
  EXPECT_EQ(bf16_plan(LinearFormat::kNvfp4W4A16, 16, 72, 4864).decode_pipe_kb, 128);
  int i = 0;
  for (const char* split : {"1", ""}) {
    if (split[0] != 0) setenv("B12X_GEMM_SPLIT", split, 1);
    for (int64_t M : {9, 16, 24, 32})
      for (LinearFormat f :
           {LinearFormat::kNvfp4, LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4W4A16})
        run_case({f, M, 72, 4864, DType::kBF16, DType::kBF16, (i++ % 2) == 0});
    unsetenv("B12X_GEMM_SPLIT");
  }
  {
    ScopedEnv el("B12X_GEMM_DECODE_LEAN", "1"), es("B12X_GEMM_SPLIT", "1");
    for (int64_t M : {16, 27})
      run_case({LinearFormat::kNvfp4W4A16, M, 72, 4864, DType::kBF16, DType::kBF16, M == 16});
  }
  // B12X_GGML_GEMV=0: Q8_0 at M = 3 would otherwise take the GGML GEMV, not this kernel.
  ScopedEnv eh0("B12X_GEMM_DECODE_HALF", "0"), es("B12X_GEMM_SPLIT", "1"),
      eg0("B12X_GGML_GEMV", "0");
  run_case({LinearFormat::kNvfp4W4A16, 3, 72, 4864, DType::kBF16, DType::kBF16, true});
  run_case({LinearFormat::kQ8_0, 3, 72, 4864, DType::kBF16, DType::kBF16, false});
}

TEST(GemmGpu, DecodeLean) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  ScopedEnv es0("B12X_GEMM_DECODE_STREAM", "0");  // the decode kernel at M = 1, not the stream one
  // The FP4 kernels with the per-slice bookkeeping by running pointers (kLean; the default where
  // they exist since session 9, B12X_GEMM_DECODE_LEAN=0 turns them off), forced by
  // B12X_GEMM_DECODE_LEAN=1. M = 1 with 4 warps per tile (K = 4096: 2 slices per warp, 1280: warps
  // without a slice and a K tail, 20480: a cluster split, 14336 with the deeper ring) and 8 (K =
  // 4096, 1280, 4864); the pipelined slice halves at M = 5 / 9 / 16 / 24 over K = 4864 in several
  // chunks with splits of 1, 4 (a cluster) and the default (partials at N = 72). N = 72: a partial
  // last tile; bias on every other case; FP16 MMAs keep the default kernels.
  // The plan asks for lean; lin::last_decode_launch() says which kernel each run launched (run
  // drops lean where no instance exists for the launch's configuration).
  EXPECT_TRUE(bf16_plan(LinearFormat::kNvfp4W4A16, 16, 14336, 4096).decode_lean);
  EXPECT_TRUE(bf16_plan(LinearFormat::kMxfp4W4A16, 1, 14336, 4096).decode_lean);
  auto ran_lean = [] { return gemm::lin::last_decode_launch().lean; };
  run_case({LinearFormat::kNvfp4W4A16, 1, 72, 4096, DType::kBF16, DType::kBF16, true});
  EXPECT_TRUE(ran_lean());  // the default at M = 1
  {
    // (4 warps per tile: the 8-warp tiles, the default at N = 72, exist with kLean only.)
    ScopedEnv el0("B12X_GEMM_DECODE_LEAN", "0"), ew4("B12X_GEMM_DECODE_WSPLIT", "4");
    EXPECT_FALSE(bf16_plan(LinearFormat::kNvfp4W4A16, 16, 14336, 4096).decode_lean);
    run_case({LinearFormat::kNvfp4W4A16, 1, 72, 4096, DType::kBF16, DType::kBF16, true});
    EXPECT_FALSE(ran_lean());
  }
  ScopedEnv el("B12X_GEMM_DECODE_LEAN", "1");
  EXPECT_TRUE(bf16_plan(LinearFormat::kNvfp4W4A16, 16, 72, 4864).decode_lean);
  int i = 0;
  for (const char* ws : {"4", "8"}) {
    ScopedEnv ew("B12X_GEMM_DECODE_WSPLIT", ws);
    for (int64_t K : {4096, 1280, ws[0] == '4' ? 20480 : 4864})
      for (LinearFormat f : kFp4Bf16Formats) {
        run_case({f, 1, 72, K, DType::kBF16, DType::kBF16, (i++ % 2) == 0});
        EXPECT_TRUE(ran_lean()) << "M = 1, K = " << K << ", ws " << ws;
      }
  }
  {
    ScopedEnv ew("B12X_GEMM_DECODE_WSPLIT", "4"), ed("B12X_GEMM_DECODE_DEEP", "1");
    for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4W4A16}) {
      run_case({f, 1, 72, 14336, DType::kBF16, DType::kBF16, f == LinearFormat::kNvfp4W4A16});
      EXPECT_TRUE(ran_lean()) << "deep ring";
    }
  }
  ScopedEnv eh("B12X_GEMM_DECODE_HALF", "1");
  for (const char* split : {"1", "4", ""}) {
    if (split[0] != 0) setenv("B12X_GEMM_SPLIT", split, 1);
    for (int64_t M : {5, 9, 16, 24})
      for (LinearFormat f : kFp4Bf16Formats) {
        run_case({f, M, 72, 4864, DType::kBF16, DType::kBF16, (i++ % 2) == 0});
        const gemm::lin::DecodeLaunch l = gemm::lin::last_decode_launch();
        EXPECT_TRUE(l.half);
        // Without a split the CTA's 10 slices take several chunks: the pipelined halves, lean.
        // (Splits of 4 and the default leave <= 3 slices per CTA: one chunk at M = 5, so the
        // one-buffer halves run, which have no lean instance.)
        if (split[0] == '1') EXPECT_TRUE(l.pipe && l.lean) << "halves, M = " << M;
        EXPECT_EQ(l.lean, l.pipe) << "halves, M = " << M << ", split '" << split << "'";
      }
    unsetenv("B12X_GEMM_SPLIT");
  }
  run_case({LinearFormat::kNvfp4W4A16, 16, 72, 4864, DType::kFP16, DType::kBF16, true});
  EXPECT_FALSE(ran_lean());  // FP16 MMAs: no lean instance
}

/// MXFP4 weights' E8M0 codes drawn over 0..135 (the fold-free range; 135 and 0 included), one
/// code set to `top` where > 135, while in scope.
struct MxCodeTweak {
  explicit MxCodeTweak(int top) {
    g_weight_tweak = [top](LinearFormat f, HostWeight& h) {
      if (f != LinearFormat::kMxfp4W4A16 && f != LinearFormat::kMxfp4) return;
      std::uniform_int_distribution<int> e8(0, 135);
      for (auto& b : h.scale_bytes) b = static_cast<uint8_t>(e8(test::rng()));
      h.scale_bytes[0] = 135;
      h.scale_bytes[1] = 0;
      if (top > 135) h.scale_bytes[h.scale_bytes.size() / 2] = static_cast<uint8_t>(top);
    };
  }
  ~MxCodeTweak() { g_weight_tweak = nullptr; }
};

/// Runs c (against the reference) and expects an M = 1 / block stream kernel launch with or
/// without MXFP4's fold-free splats.
void expect_stream_launch(const Case& c, bool graph, bool want_free) {
  const int64_t before = gemm::lin::last_stream_launch().serial;
  run_case(c, graph);
  const gemm::lin::StreamLaunch l = gemm::lin::last_stream_launch();
  EXPECT_GT(l.serial, before) << name(c);
  EXPECT_EQ(l.mx_free, want_free) << name(c);
}

TEST(GemmGpu, DecodeStreamMxFree) {
  B12X_REQUIRE_GPU();
  // Session 15: MXFP4 on the M = 1 stream kernel and the M <= 16 block kernel with the fold-free
  // splats (2^(e-8) straight onto the decoded bits; B12X_GEMM_STREAM_MX_FREE=1; at M = 1 built per
  // lane for both atoms since session 26, kLean's blocks included), taken by run
  // for weights whose E8M0 codes are all <= 135: codes over 0..135 (the largest scale 2^8, the
  // smallest products below BF16's subnormals), both register caps, K tails, W4A16 / W4A4, a
  // graph; a weight with one code 136 keeps the fold (W4A4's per-warp blocks) or runs the
  // decode kernel (M = 1 W4A16, and W4A4 on a plan without the blocks: since session 21 the
  // variant-free M = 1 instances are fold-free only); refresh leaves the range only until a plan
  // with the fold-free decode binds the weight.
  ScopedEnv es("B12X_GEMM_DECODE_STREAM", "1"), ef("B12X_GEMM_STREAM_MX_FREE", "1");
  using Tweak = MxCodeTweak;
  const auto launched = expect_stream_launch;
  auto decode_kernel = [](const Case& c) {
    const int64_t before = gemm::lin::last_stream_launch().serial;
    run_case(c);
    EXPECT_EQ(gemm::lin::last_stream_launch().serial, before) << name(c);
  };
  {
    Tweak tw(0);
    int k = 0;
    for (const char* occ : {"2", "3"})
      for (const char* parts : {"2", "8"}) {
        ScopedEnv eo("B12X_GEMM_STREAM_OCC", occ), ep("B12X_GEMM_STREAM_PARTS", parts);
        const LinearFormat f = (k % 2) ? LinearFormat::kMxfp4 : LinearFormat::kMxfp4W4A16;
        launched({f, 1, (k % 2) ? 72 : 200, (k % 2) ? 4832 : 1312, DType::kBF16, DType::kBF16,
                  (k % 2) == 0},
                 /*graph=*/k == 3, true);
        ++k;
      }
    // kLean's 3-CTA blocks (var 192 / 232, 6144x4096's plans; session 26: per-lane splats).
    {
      ScopedEnv eo("B12X_GEMM_STREAM_OCC", "3"), ep("B12X_GEMM_STREAM_PARTS", "8"),
          ej("B12X_GEMM_STREAM_JIT", "4");
      launched({LinearFormat::kMxfp4W4A16, 1, 200, 4832, DType::kBF16, DType::kFP16, true}, true,
               true);
      launched({LinearFormat::kMxfp4, 1, 72, 1312, DType::kBF16, DType::kBF16, false}, false, true);
    }
    // The block kernel (M = 5..16 of MXFP4 W4A16 / W4A4 by default).
    launched({LinearFormat::kMxfp4W4A16, 16, 200, 1312, DType::kBF16, DType::kBF16, true}, false,
             true);
    launched({LinearFormat::kMxfp4, 9, 72, 4832, DType::kBF16, DType::kBF16, false}, true, true);
  }
  {
    Tweak tw(136);
    decode_kernel({LinearFormat::kMxfp4W4A16, 1, 200, 1312, DType::kBF16, DType::kBF16, true});
    launched({LinearFormat::kMxfp4W4A16, 16, 72, 1312, DType::kBF16, DType::kBF16, false}, false,
             false);
    {
      ScopedEnv eo3("B12X_GEMM_STREAM_OCC", "3"), ep8("B12X_GEMM_STREAM_PARTS", "8");
      decode_kernel({LinearFormat::kMxfp4, 1, 72, 4832, DType::kBF16, DType::kBF16, false});
    }
    // Session 20: MXFP4 W4A4 at M = 1 converted in the per-warp blocks (var 168) with the fold,
    // at the plan's K parts and at 4 (a graph),
    launched({LinearFormat::kMxfp4, 1, 72, 4832, DType::kBF16, DType::kBF16, false}, false, false);
    ScopedEnv ep4("B12X_GEMM_STREAM_PARTS", "4");
    launched({LinearFormat::kMxfp4, 1, 200, 4832, DType::kBF16, DType::kBF16, true}, true, false);
    // and in kLean's 3-CTA instance (var 232; the default at 6144x4096).
    ScopedEnv eo3("B12X_GEMM_STREAM_OCC", "3"), ep8("B12X_GEMM_STREAM_PARTS", "8"),
        e4("B12X_GEMM_STREAM_JIT", "4");
    launched({LinearFormat::kMxfp4, 1, 72, 4832, DType::kBF16, DType::kBF16, false}, false, false);
  }
  {
    ScopedEnv e0("B12X_GEMM_STREAM_MX_FREE", "0");
    decode_kernel({LinearFormat::kMxfp4W4A16, 1, 72, 1312, DType::kBF16, DType::kBF16, false});
  }
  // MXFP4 W4A16 at M = 1 on the stream kernel for fold-free weights only (a graph).
  launched({LinearFormat::kMxfp4W4A16, 1, 200, 1312, DType::kBF16, DType::kBF16, true}, true, true);
  // Refresh may leave the fold-free range until a plan with the fold-free decode binds the
  // weight; from then on it keeps it.
  const LinearFormat fm = LinearFormat::kMxfp4W4A16;
  HostWeight hw = make_weight(fm, 32, 256);
  auto pw = gemm::PackedWeight::pack(hw.src(fm), 0, nullptr);
  hw.scale_bytes[3] = 136;
  EXPECT_NO_THROW(pw->refresh(hw.src(fm), nullptr));
  hw.scale_bytes[3] = 135;
  EXPECT_NO_THROW(pw->refresh(hw.src(fm), nullptr));
  gemm::Caps caps;
  caps.format = fm;
  caps.max_tokens = 1;
  caps.in_features = 256;
  caps.out_features = 32;
  caps.act_dtype = DType::kBF16;
  caps.out_dtype = DType::kBF16;
  const gemm::Plan plan = gemm::plan(caps);
  ASSERT_TRUE(plan.stream_mx_free);
  DeviceBuffer<uint16_t> x(256), out(32);
  DeviceBuffer<uint8_t> scratch(std::max<int64_t>(plan.scratch_bytes, 1));
  gemm::bind(plan,
             TensorRef::contiguous(scratch.ptr, DType::kUInt8,
                                   {std::max<int64_t>(plan.scratch_bytes, 1)}, 0),
             TensorRef::contiguous(x.ptr, DType::kBF16, {1, 256}, 0), TensorRef(), *pw,
             TensorRef::contiguous(out.ptr, DType::kBF16, {1, 32}, 0), TensorRef(), TensorRef());
  hw.scale_bytes[3] = 136;
  EXPECT_THROW(pw->refresh(hw.src(fm), nullptr), Error);
}

TEST(GemmGpu, DecodeStreamTrig) {
  B12X_REQUIRE_GPU();
  // Session 15 probe B12X_GEMM_STREAM_TRIG=7: the M = 1, 4-row and block kernels trigger their
  // dependents once a warp's last weight loads are out; eager and replayed graphs (back-to-back
  // launches of the same plan) match the reference, over persistent grids of several groups.
  ScopedEnv et("B12X_GEMM_STREAM_TRIG", "7");
  {
    ScopedEnv ec("B12X_GEMM_STREAM_CTAS", "1");
    run_case({LinearFormat::kNvfp4W4A16, 1, 4096, 1280, DType::kBF16, DType::kBF16, true},
             /*graph_replay=*/true);
  }
  run_case({LinearFormat::kNvfp4, 1, 200, 4832, DType::kBF16, DType::kBF16, false}, true);
  {
    ScopedEnv er("B12X_GEMM_STREAM_ROWS", "1");
    run_case({LinearFormat::kNvfp4W4A16, 3, 1000, 1312, DType::kBF16, DType::kBF16, true}, true);
  }
  run_case({LinearFormat::kNvfp4W4A16, 16, 1000, 4832, DType::kBF16, DType::kBF16, false}, true);
  run_case({LinearFormat::kMxfp4W4A16, 9, 200, 1312, DType::kBF16, DType::kBF16, true}, true);
}

TEST(GemmGpu, DecodeStreamQx) {
  B12X_REQUIRE_GPU();
  // The base variants pinned here: session 26's late ring requests (kStreamLateRule, var bit
  // 4096) off; DecodeStreamLate covers them.
  ScopedEnv enl("B12X_GEMM_STREAM_LATE", "0");
  // Session 16: W4A4's NVFP4 activations converted in the M = 1 stream kernel's staging (no
  // pre-pass; default where K <= 8192, B12X_GEMM_STREAM_QX=0|1) at the 2-CTA cap with K parts 1 /
  // 2 / 4 (8 parts take the per-warp blocks, DecodeStreamJit; session 21 removed the 3-CTA
  // staging's instances), K tails (1280: the staging past K zero), N = 72 / 200, bias, a replayed
  // graph; the plan's choice by K and the override.
  auto plan1 = [](int64_t K) {
    gemm::Caps caps;
    caps.format = LinearFormat::kNvfp4;
    caps.max_tokens = 1;
    caps.in_features = K;
    caps.out_features = 4096;
    caps.act_dtype = DType::kFP4E2M1;
    caps.out_dtype = DType::kBF16;
    return gemm::plan(caps);
  };
  // (Since session 19 with the per-warp activation blocks at 8 K parts, bit 128; session 20 with
  // the conversion by pair arithmetic in them at any K, bits 8 | 32.)
  EXPECT_EQ(plan1(4096).decode_stream_var, 8 | 32 | 128);
  EXPECT_EQ(plan1(14336).decode_stream_var, 8 | 32 | 128);
  ScopedEnv es("B12X_GEMM_DECODE_STREAM", "1"), eo("B12X_GEMM_STREAM_OCC", "2");
  {
    ScopedEnv e0("B12X_GEMM_STREAM_QX", "0"), ep("B12X_GEMM_STREAM_PARTS", "1");
    EXPECT_EQ(plan1(4096).decode_stream_var, 0);
  }
  // (Session 24: var 40, the staging's conversion by pair arithmetic, by default; DecodeStreamQs.)
  ScopedEnv eq("B12X_GEMM_STREAM_QX", "1"), eqs("B12X_GEMM_STREAM_QS", "0");
  int n = 0;
  for (const char* parts : {"1", "2", "4"})
    for (int64_t K : {1280, 4864}) {
      ScopedEnv ep("B12X_GEMM_STREAM_PARTS", parts);
      EXPECT_EQ(plan1(K).decode_stream_var, 8) << "parts " << parts << " K " << K;
      const bool graph = n == 3;
      const int64_t before = gemm::lin::last_stream_launch().serial;
      run_case({LinearFormat::kNvfp4, 1, (n % 3) ? 72 : 200, K, DType::kBF16, DType::kBF16,
                (n % 2) == 0},
               graph);
      ++n;
      const int64_t runs = gemm::lin::last_stream_launch().serial - before;
      if (graph)
        EXPECT_GT(runs, 1) << "parts " << parts << " K " << K;
      else
        EXPECT_EQ(runs, 1) << "parts " << parts << " K " << K;
    }
}

/// The plan of a capacity-1 linear layer (FP4 activations for W4A4, else BF16; BF16 output).
gemm::Plan plan_m1(LinearFormat f, int64_t N, int64_t K) {
  gemm::Caps caps;
  caps.format = f;
  caps.max_tokens = 1;
  caps.in_features = K;
  caps.out_features = N;
  caps.act_dtype =
      f == LinearFormat::kNvfp4 || f == LinearFormat::kMxfp4 ? DType::kFP4E2M1 : DType::kBF16;
  caps.out_dtype = DType::kBF16;
  return gemm::plan(caps);
}

TEST(GemmGpu, DecodeStreamLate) {
  // Session 26 (kStreamLateRule, var bit 4096; B12X_GEMM_STREAM_LATE=1 forces it): each ring
  // slot's next vector requested after the slot's decode, on the instances the SM90 rule reaches:
  // NVFP4 W4A16 / W4A4 and fold-free MXFP4 W4A16 (codes 0..135) on the 8-part blocks at the
  // 2-CTA cap, MXFP4 W4A16 / W4A4 on kLean's 3-CTA blocks, MXFP4 W4A4's 2-part staging; K tails
  // (1312, 4832), bias, an FP16 output, graphs.
  B12X_REQUIRE_GPU();
  ScopedEnv es("B12X_GEMM_DECODE_STREAM", "1"), ef("B12X_GEMM_STREAM_MX_FREE", "1"),
      el("B12X_GEMM_STREAM_LATE", "1");
  MxCodeTweak tw(0);
  struct LateCase {
    LinearFormat f;
    const char *parts, *occ;
  };
  const LateCase cases[] = {
      {LinearFormat::kNvfp4W4A16, "8", "2"}, {LinearFormat::kNvfp4, "8", "2"},
      {LinearFormat::kMxfp4W4A16, "8", "2"}, {LinearFormat::kMxfp4W4A16, "8", "3"},
      {LinearFormat::kMxfp4, "8", "3"},      {LinearFormat::kMxfp4, "2", "2"}};
  int k = 0;
  for (const LateCase& lc : cases) {
    const bool lean = lc.occ[0] == '3';
    ScopedEnv ep("B12X_GEMM_STREAM_PARTS", lc.parts), eo("B12X_GEMM_STREAM_OCC", lc.occ),
        ej("B12X_GEMM_STREAM_JIT", lean ? "4" : "");
    const int64_t N = (k % 2) ? 72 : 200, K = (k % 3) ? 4832 : 1312;
    EXPECT_NE(plan_m1(lc.f, N, K).decode_stream_var & gemm::lin::kStreamVarLate, 0)
        << lc.parts << " " << lc.occ << " " << static_cast<int>(lc.f);
    const bool mx = lc.f == LinearFormat::kMxfp4W4A16 || lc.f == LinearFormat::kMxfp4;
    expect_stream_launch(
        {lc.f, 1, N, K, DType::kBF16, k == 3 ? DType::kFP16 : DType::kBF16, (k % 2) == 0},
        /*graph=*/k % 4 == 1, mx);
    ++k;
  }
}

TEST(GemmGpu, DecodeStreamHalf) {
  // Session 27 (B12X_GEMM_STREAM_HALF=1, var bit 8192): the 8-part 2-CTA blocks with K parts of
  // ceil(kvec / 8) rounded to 2 vectors (a part's last block of 2), NVFP4 W4A16 (128) and MXFP4
  // W4A4 (168, fold-free and with a code 136 the fold): K = 7168 (vp 14), 3040 (vp 6,
  // the last vector past K), 1024 (vp 2: every block a half one), N = 72 / 200, bias, an FP16
  // output, graphs, and a persistent grid of two groups per CTA (the half block's requests run
  // on into the next group). The SM90 default (kStreamHalfRule) where the grid has more CTAs than
  // SMs, one group each, parts of at most 12 vectors (4096x3072), not on one CTA per SM
  // (2048x7168) nor at 16 vectors (4096x7168).
  B12X_REQUIRE_GPU();
  if (device_info(0).sm_count == 132 && device_info(0).family == ArchFamily::kSm90) {
    const gemm::Plan a = plan_m1(LinearFormat::kNvfp4W4A16, 4096, 3072);
    EXPECT_EQ(a.decode_stream_var, 128 | gemm::lin::kStreamVarHalf);
    EXPECT_EQ(a.decode_stream_vp, 6);
    EXPECT_EQ(plan_m1(LinearFormat::kMxfp4, 4096, 3072).decode_stream_var,
              168 | gemm::lin::kStreamVarHalf);
    EXPECT_EQ(plan_m1(LinearFormat::kNvfp4W4A16, 2048, 7168).decode_stream_var,
              128 | gemm::lin::kStreamVarRf);  // not HALF (session 28: requests first)
    EXPECT_EQ(plan_m1(LinearFormat::kMxfp4, 4096, 7168).decode_stream_var, 168);  // vp 16
    MxCodeTweak tw(0);
    expect_stream_launch({LinearFormat::kMxfp4, 1, 4096, 3072, DType::kBF16, DType::kBF16, true},
                         false, true);
  }
  ScopedEnv es("B12X_GEMM_DECODE_STREAM", "1"), ef("B12X_GEMM_STREAM_MX_FREE", "1"),
      el("B12X_GEMM_STREAM_LATE", "0"), eh("B12X_GEMM_STREAM_HALF", "1"),
      ep("B12X_GEMM_STREAM_PARTS", "8"), eo("B12X_GEMM_STREAM_OCC", "2");
  // (NVFP4 W4A4 / MXFP4 W4A16 have no HALF instance: the knob keeps their plan.)
  EXPECT_EQ(plan_m1(LinearFormat::kNvfp4, 200, 7168).decode_stream_var, 168);
  EXPECT_EQ(plan_m1(LinearFormat::kMxfp4W4A16, 200, 7168).decode_stream_var, 128);
  const LinearFormat fmts[] = {LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4};
  int k = 0;
  for (const LinearFormat f : fmts) {
    const bool mx = f == LinearFormat::kMxfp4W4A16 || f == LinearFormat::kMxfp4;
    MxCodeTweak tw(0);
    for (const int64_t K : {7168, 3040, 1024}) {
      const int64_t N = (k % 2) ? 72 : 200;
      const gemm::Plan pl = plan_m1(f, N, K);
      EXPECT_NE(pl.decode_stream_var & gemm::lin::kStreamVarHalf, 0) << k;
      EXPECT_EQ(pl.decode_stream_vp, K == 7168 ? 14 : K == 3040 ? 6 : 2) << k;
      expect_stream_launch(
          {f, 1, N, K, DType::kBF16, k == 5 ? DType::kFP16 : DType::kBF16, (k % 2) == 0},
          /*graph=*/k % 3 == 1, mx);
      ++k;
    }
  }
  {
    ScopedEnv ec("B12X_GEMM_STREAM_CTAS", "1");
    expect_stream_launch(
        {LinearFormat::kNvfp4W4A16, 1, 4096, 3040, DType::kBF16, DType::kBF16, true}, true, false);
    expect_stream_launch({LinearFormat::kMxfp4, 1, 4096, 7168, DType::kBF16, DType::kBF16, false},
                         false, true);
  }
  MxCodeTweak tw(136);
  expect_stream_launch({LinearFormat::kMxfp4, 1, 200, 7168, DType::kBF16, DType::kBF16, true}, true,
                       false);
}

TEST(GemmGpu, DecodeStreamRf) {
  // Session 28 (kStreamRfRule, var bit 32768; B12X_GEMM_STREAM_RF=1 forces it): the per-warp
  // blocks with each block's next ring requests before its activation store, on the instances the
  // SM90 rule reaches: NVFP4 W4A16 on the 8-part 2-CTA blocks (K = 7168: 2048x7168's parts, 3040:
  // the last vector past K, N = 72 / 200, bias, an FP16 output, graphs, a persistent grid of two
  // groups per CTA) and on kLean's 3-CTA blocks, NVFP4 W4A4 on kLean's.
  B12X_REQUIRE_GPU();
  if (device_info(0).sm_count == 132 && device_info(0).family == ArchFamily::kSm90) {
    const int rf = gemm::lin::kStreamVarRf;
    EXPECT_EQ(plan_m1(LinearFormat::kNvfp4W4A16, 2048, 7168).decode_stream_var, 128 | rf);
    EXPECT_EQ(plan_m1(LinearFormat::kNvfp4W4A16, 4096, 4096).decode_stream_var, 128 | rf);
    EXPECT_EQ(plan_m1(LinearFormat::kNvfp4W4A16, 6144, 4096).decode_stream_var, 192 | rf);
    EXPECT_EQ(plan_m1(LinearFormat::kNvfp4, 6144, 4096).decode_stream_var, 232 | rf);
    EXPECT_EQ(plan_m1(LinearFormat::kNvfp4, 2048, 7168).decode_stream_var, 168);
    EXPECT_EQ(plan_m1(LinearFormat::kMxfp4, 2048, 7168).decode_stream_var, 168);
  }
  ScopedEnv es("B12X_GEMM_DECODE_STREAM", "1"), el("B12X_GEMM_STREAM_LATE", "0"),
      eh("B12X_GEMM_STREAM_HALF", "0"), er("B12X_GEMM_STREAM_RF", "1"),
      ep("B12X_GEMM_STREAM_PARTS", "8"), eo("B12X_GEMM_STREAM_OCC", "2");
  int k = 0;
  for (const int64_t K : {7168, 3040}) {
    const int64_t N = (k % 2) ? 72 : 200;
    EXPECT_EQ(plan_m1(LinearFormat::kNvfp4W4A16, N, K).decode_stream_var,
              128 | gemm::lin::kStreamVarRf)
        << k;
    expect_stream_launch({LinearFormat::kNvfp4W4A16, 1, N, K, DType::kBF16,
                          k == 1 ? DType::kFP16 : DType::kBF16, (k % 2) == 0},
                         /*graph=*/k == 1, false);
    ++k;
  }
  {
    ScopedEnv ec("B12X_GEMM_STREAM_CTAS", "1");
    expect_stream_launch(
        {LinearFormat::kNvfp4W4A16, 1, 4096, 3040, DType::kBF16, DType::kBF16, true}, true, false);
  }
  // kLean's 3-CTA blocks (NVFP4 W4A16 192 / W4A4 232, 6144x4096's plans).
  ScopedEnv eo3("B12X_GEMM_STREAM_OCC", "3"), ej("B12X_GEMM_STREAM_JIT", "4");
  for (const LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kNvfp4}) {
    const int64_t N = (k % 2) ? 72 : 200, K = (k % 2) ? 4096 : 1312;
    EXPECT_NE(plan_m1(f, N, K).decode_stream_var & gemm::lin::kStreamVarRf, 0) << k;
    expect_stream_launch({f, 1, N, K, DType::kBF16, DType::kBF16, (k % 2) == 0}, k % 2 == 1, false);
    ++k;
  }
}

TEST(GemmGpu, DecodeStreamClaim) {
  // Session 29 probe (B12X_GEMM_STREAM_CLAIM=<ctas>, var bit 65536): the 8-part 2-CTA blocks
  // with each CTA's groups past its first three claimed from a %gridid-tagged word in the
  // scratch (randomized by run_case), on the plans' variants: NVFP4 W4A16 (RF | 128), NVFP4 W4A4
  // (late | 168), fold-free MXFP4 W4A16 (late | 128) and W4A4 (168; a code 136 runs its plan
  // without the claim); W4A16 also on the CTA's staging (var 0). 16 CTAs over 63 / 64 groups
  // (15 / 16 claimed), K = 3040 (vp 8, the last vector past K) / 4832 (vp 12), bias, an FP16
  // output; every case runs eager, in a graph replayed 12 times and eager again.
  B12X_REQUIRE_GPU();
  ScopedEnv es("B12X_GEMM_DECODE_STREAM", "1"), ef("B12X_GEMM_STREAM_MX_FREE", "1"),
      ec("B12X_GEMM_STREAM_CLAIM", "16");
  const int rf = gemm::lin::kStreamVarRf, late = gemm::lin::kStreamVarLate;
  // (The late requests' rule wants more CTAs than SMs: forced here.)
  struct ClaimCase {
    LinearFormat f;
    int base;
    const char *late, *rf;
  };
  const ClaimCase cases[] = {{LinearFormat::kNvfp4W4A16, rf | 128, "0", "1"},
                             {LinearFormat::kNvfp4, late | 168, "1", "0"},
                             {LinearFormat::kMxfp4W4A16, late | 128, "1", "0"},
                             {LinearFormat::kMxfp4, 168, "1", "0"}};
  g_graph_replays = 12;
  int k = 0;
  for (const ClaimCase& cc : cases) {
    const bool mx = cc.f == LinearFormat::kMxfp4W4A16 || cc.f == LinearFormat::kMxfp4;
    MxCodeTweak tw(0);
    ScopedEnv el("B12X_GEMM_STREAM_LATE", cc.late), er("B12X_GEMM_STREAM_RF", cc.rf);
    for (const int64_t K : {3040, 4832}) {
      const int64_t N = (k % 2) ? 1000 : 1024;
      const gemm::Plan pl = plan_m1(cc.f, N, K);
      EXPECT_EQ(pl.decode_stream_var, cc.base | gemm::lin::kStreamVarClaim) << k;
      EXPECT_EQ(pl.decode_stream_ctas, 16) << k;
      expect_stream_launch(
          {cc.f, 1, N, K, DType::kBF16, k == 5 ? DType::kFP16 : DType::kBF16, (k % 2) == 0},
          /*graph=*/true, mx);
      ++k;
    }
  }
  {
    // W4A16 on the CTA's staging of the whole K (B12X_GEMM_STREAM_CLAIM_ST=1, var 0).
    ScopedEnv est("B12X_GEMM_STREAM_CLAIM_ST", "1");
    MxCodeTweak tw(0);
    for (const LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4W4A16}) {
      const bool mx = f == LinearFormat::kMxfp4W4A16;
      const int64_t N = mx ? 1000 : 1024, K = mx ? 4832 : 3040;
      EXPECT_EQ(plan_m1(f, N, K).decode_stream_var, gemm::lin::kStreamVarClaim) << mx;
      expect_stream_launch({f, 1, N, K, DType::kBF16, DType::kBF16, !mx}, true, mx);
    }
  }
  MxCodeTweak tw(136);
  expect_stream_launch({LinearFormat::kMxfp4, 1, 1000, 3040, DType::kBF16, DType::kBF16, true},
                       true, false);
  g_graph_replays = 1;
}

TEST(GemmGpu, DecodeStreamJit) {
  // Session 19: the M = 1 kernel without the CTA's staging of the whole K, each warp loading its
  // blocks' activations one block ahead into its own buffer (var 128), default where each warp
  // owns its K part (8 parts) at the 2-CTA cap; session 20: W4A4's FP4 activations converted in
  // the blocks by BF16 pair arithmetic (var 168; NVFP4 at 8 parts, MXFP4 at any parts) and the
  // lean 3-CTA blocks (+64). K = 1280 (a part's last block past K) and 4864 / 14336, N = 72 / 200
  // (partial tiles and groups), bias, an FP16 output, a persistent grid of two groups per CTA,
  // replayed graphs. (Session 21 removed the knob-only instances: the blocks at 1..4 parts but
  // for MXFP4 W4A4, v136, the fold's v128.)
  B12X_REQUIRE_GPU();
  // The base variants pinned here: session 26's late ring requests (kStreamLateRule, var bit
  // 4096) and session 28's requests first (kStreamRfRule, 32768) off; DecodeStreamLate /
  // DecodeStreamRf cover them.
  ScopedEnv enl("B12X_GEMM_STREAM_LATE", "0"), enr("B12X_GEMM_STREAM_RF", "0");
  {
    auto var = [](LinearFormat f, int64_t N, int64_t K) {
      return plan_m1(f, N, K).decode_stream_var;
    };
    EXPECT_EQ(var(LinearFormat::kNvfp4W4A16, 4096, 4096), 128);  // 8 parts
    EXPECT_EQ(var(LinearFormat::kNvfp4W4A16, 14336, 4096), 0);   // 2 parts
    if (device_info(0).sm_count == 132) {
      // Session 20: the 3-CTA cap with one group of 8 parts per CTA filling >= 80 % of the slots
      // takes the lean blocks (W4A4 too, converted in the kernel); MXFP4 W4A4 the blocks at any
      // parts (2 at 14336x4096) with its activations converted in the kernel.
      EXPECT_EQ(var(LinearFormat::kNvfp4W4A16, 6144, 4096), 128 | 64);
      EXPECT_EQ(var(LinearFormat::kNvfp4, 6144, 4096), 128 | 64 | 32 | 8);
      EXPECT_EQ(plan_m1(LinearFormat::kNvfp4, 6144, 4096).decode_stream_occ, 3);
      // Session 24: 2 parts, the CTA's staging with the pair arithmetic's conversion (var 40).
      EXPECT_EQ(var(LinearFormat::kMxfp4, 14336, 4096), 32 | 8);
      EXPECT_EQ(var(LinearFormat::kNvfp4, 14336, 4096), 32 | 8);
      EXPECT_EQ(var(LinearFormat::kMxfp4W4A16, 6144, 4096), 128 | 64);
      // Session 24: W4A4's one-CTA-per-SM grid at 2048x7168 (128 CTAs of 8 parts) triggers the
      // next launch early, as W4A16's (kStreamTrigOnePerSm).
      EXPECT_NE(plan_m1(LinearFormat::kNvfp4, 2048, 7168).stream_trig & 1, 0);
      EXPECT_NE(plan_m1(LinearFormat::kMxfp4, 2048, 7168).stream_trig & 1, 0);
      EXPECT_EQ(var(LinearFormat::kMxfp4, 6144, 4096), 128 | 64 | 32 | 8);
    }
    EXPECT_EQ(var(LinearFormat::kMxfp4W4A16, 4096, 14336), 128);  // 8 parts
  }
  ScopedEnv es("B12X_GEMM_DECODE_STREAM", "1"), eo("B12X_GEMM_STREAM_OCC", "2");
  const auto plan1 = &plan_m1;
  {
    ScopedEnv ep("B12X_GEMM_STREAM_PARTS", "8");
    const LinearFormat fs[3] = {LinearFormat::kNvfp4W4A16, LinearFormat::kNvfp4,
                                LinearFormat::kMxfp4};
    int n = 0;
    for (int64_t K : {1280, 4864, 14336})
      for (const LinearFormat f : fs) {
        const int64_t N = (n % 2) ? 72 : 200;
        const bool w4a16 = f == LinearFormat::kNvfp4W4A16;
        EXPECT_EQ(plan1(f, N, K).decode_stream_var, w4a16 ? 128 : 168) << "K " << K;
        run_case({f, 1, N, K, DType::kBF16, n == 4 ? DType::kFP16 : DType::kBF16, (n % 2) == 0},
                 /*graph_replay=*/n == 3 || n == 7);
        ++n;
      }
  }
  // MXFP4 W4A4 in the blocks at fewer parts (its activations converted in the kernel; session 24:
  // B12X_GEMM_STREAM_QS=0, the default is the CTA's staging, DecodeStreamQs).
  for (const char* parts : {"1", "2"}) {
    ScopedEnv ep("B12X_GEMM_STREAM_PARTS", parts), eqs("B12X_GEMM_STREAM_QS", "0");
    EXPECT_EQ(plan1(LinearFormat::kMxfp4, 200, 1280).decode_stream_var, 168) << parts;
    run_case({LinearFormat::kMxfp4, 1, 200, 1280, DType::kBF16, DType::kBF16, parts[0] == '1'});
  }
  {
    // Session 20 (B12X_GEMM_STREAM_JIT=4; the default at 6144x4096): the blocks at the 3-CTA
    // cap, 8 parts, with kLean's single accumulator chain and compressed scale bytes (bit 64).
    ScopedEnv eo3("B12X_GEMM_STREAM_OCC", "3"), ep8("B12X_GEMM_STREAM_PARTS", "8"),
        e4("B12X_GEMM_STREAM_JIT", "4");
    for (const LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kNvfp4,
                                 LinearFormat::kMxfp4W4A16, LinearFormat::kMxfp4}) {
      const bool w4a4 = f == LinearFormat::kNvfp4 || f == LinearFormat::kMxfp4;
      EXPECT_EQ(plan1(f, 72, 4864).decode_stream_var, (w4a4 ? 168 : 128) | 64);
      run_case({f, 1, 72, 4864, DType::kBF16, DType::kBF16, w4a4});
    }
  }
  ScopedEnv ep("B12X_GEMM_STREAM_PARTS", "8"), ec("B12X_GEMM_STREAM_CTAS", "1");
  EXPECT_EQ(plan1(LinearFormat::kNvfp4W4A16, 4096, 4096).decode_stream_var, 128);
  run_case({LinearFormat::kNvfp4W4A16, 1, 4096, 4096, DType::kBF16, DType::kBF16, true});
}

TEST(GemmGpu, DecodeStreamQs) {
  // Session 24 (default, kStreamQs; var 40): W4A4's FP4 activations converted in the CTA's staging
  // by the blocks' pair arithmetic (NVFP4 x 2^-7, MXFP4 the pre-pass's values) at 1 / 2 / 4 parts,
  // NVFP4 and MXFP4; K = 1280 (a tail chunk past K) / 4864, N = 72 / 200, bias, an FP16 output,
  // replayed graphs.
  B12X_REQUIRE_GPU();
  ScopedEnv es("B12X_GEMM_DECODE_STREAM", "1"), eo("B12X_GEMM_STREAM_OCC", "2"),
      eqs("B12X_GEMM_STREAM_QS", "1");  // the SM90 default, forced elsewhere
  // The base variants pinned here: session 26's late ring requests (kStreamLateRule, var bit
  // 4096) off; DecodeStreamLate covers them.
  ScopedEnv enl("B12X_GEMM_STREAM_LATE", "0");
  int n = 0;
  for (const char* parts : {"1", "2", "4"}) {
    ScopedEnv ep("B12X_GEMM_STREAM_PARTS", parts);
    for (int64_t K : {1280, 4864})
      for (const LinearFormat f : {LinearFormat::kNvfp4, LinearFormat::kMxfp4}) {
        const int64_t N = (n % 2) ? 72 : 200;
        EXPECT_EQ(plan_m1(f, N, K).decode_stream_var, 40) << parts << " " << K;
        run_case({f, 1, N, K, DType::kBF16, n == 3 ? DType::kFP16 : DType::kBF16, (n % 2) == 0},
                 /*graph_replay=*/n == 1 || n == 6 || n == 9);
        ++n;
      }
  }
}

TEST(GemmGpu, DecodeStreamShfl) {
  B12X_REQUIRE_GPU();
  // Session 14: the stream kernels with the scale splats built one k16 step per lane and
  // exchanged by shuffles (M = 1: the default since round 52, B12X_GEMM_STREAM_SHFL; 4 rows at
  // M = 2..4; the only form of both since session 21): every K-part count at both register caps,
  // N = 72 (partial tile / group), K = 1280 (tail) and 4864, W4A16 and W4A4, bias; a persistent
  // grid over several groups (B12X_GEMM_STREAM_CTAS=1); a replayed graph; the 4-row kernel over
  // parts and K splits.
  ScopedEnv es("B12X_GEMM_DECODE_STREAM", "1");
  const auto plan1 = &plan_m1;
  int i = 0;
  for (const char* occ : {"2", "3"})
    for (const char* parts : {"1", "2", "4", "8"}) {
      ScopedEnv eo("B12X_GEMM_STREAM_OCC", occ), ep("B12X_GEMM_STREAM_PARTS", parts);
      const LinearFormat f = (i % 2) ? LinearFormat::kNvfp4 : LinearFormat::kNvfp4W4A16;
      const int64_t K = (i % 3) == 0 ? 4864 : 1280;
      const gemm::Plan pl = plan1(f, 72, K);
      EXPECT_TRUE(pl.decode_stream_shfl);
      EXPECT_EQ(pl.decode_stream_parts, std::atoi(parts));
      const int64_t before = gemm::lin::last_stream_launch().serial;
      run_case({f, 1, 72, K, DType::kBF16, DType::kBF16, (i % 2) == 0});
      ++i;
      const gemm::lin::StreamLaunch l = gemm::lin::last_stream_launch();
      EXPECT_EQ(l.serial, before + 1) << "parts " << parts << " occ " << occ;
      EXPECT_EQ(l.parts, std::atoi(parts));
      EXPECT_EQ(l.occ, std::atoi(occ));
    }
  {
    ScopedEnv ec("B12X_GEMM_STREAM_CTAS", "1"), ep("B12X_GEMM_STREAM_PARTS", "2");
    const int64_t before = gemm::lin::last_stream_launch().serial;
    run_case({LinearFormat::kNvfp4W4A16, 1, 4096, 4096, DType::kBF16, DType::kBF16, true});
    EXPECT_EQ(gemm::lin::last_stream_launch().serial, before + 1);
  }
  run_case({LinearFormat::kNvfp4W4A16, 1, 200, 1024, DType::kBF16, DType::kFP16, true},
           /*graph_replay=*/true);
  // MXFP4 weights on the M = 1 kernel (default for W4A4 since round 53, for W4A16 with fold-free
  // weights since session 15): W4A16 over parts and register caps with K tails (the last vector
  // half past K), W4A4.
  {
    const int64_t sms = device_info(0).sm_count;
    EXPECT_GT(plan1(LinearFormat::kMxfp4, 16 * (sms + 8), 4096).decode_stream_parts, 0);
    // MXFP4 W4A16 (session 15): the stream kernel for fold-free weights only.
    const gemm::Plan pmx = plan1(LinearFormat::kMxfp4W4A16, 16 * (sms + 8), 4096);
    EXPECT_GT(pmx.decode_stream_parts, 0);
    EXPECT_TRUE(pmx.decode_stream_free_only);
    EXPECT_TRUE(pmx.stream_mx_free);
    {
      ScopedEnv m0("B12X_GEMM_STREAM_MX", "0");
      EXPECT_EQ(plan1(LinearFormat::kMxfp4, 16 * (sms + 8), 4096).decode_stream_parts, 0);
    }
    gemm::Caps c4;
    c4.format = LinearFormat::kNvfp4W4A16;
    c4.max_tokens = 4;
    c4.in_features = 4096;
    c4.out_features = 14336;
    c4.act_dtype = DType::kBF16;
    c4.out_dtype = DType::kBF16;
    const gemm::Plan p4 = gemm::plan(c4);
    EXPECT_GT(p4.stream_rows_parts, 0);
    EXPECT_TRUE(p4.stream_rows_shfl);
  }
  {
    int k = 0;
    for (const char* occ : {"2", "3"})
      for (const char* parts : {"1", "2", "4", "8"}) {
        ScopedEnv eo("B12X_GEMM_STREAM_OCC", occ), ep("B12X_GEMM_STREAM_PARTS", parts);
        const int64_t K = (k % 3) == 0 ? 4832 : (k % 3) == 1 ? 1280 : 1312;
        EXPECT_EQ(plan1(LinearFormat::kMxfp4W4A16, 72, K).decode_stream_parts, std::atoi(parts));
        const int64_t before = gemm::lin::last_stream_launch().serial;
        run_case({LinearFormat::kMxfp4W4A16, 1, (k % 2) ? 72 : 200, K, DType::kBF16,
                  (k % 4) == 3 ? DType::kFP16 : DType::kBF16, (k % 2) == 0},
                 /*graph_replay=*/k == 5);
        ++k;
        EXPECT_GT(gemm::lin::last_stream_launch().serial, before)  // graph: several launches
            << "mx parts " << parts << " occ " << occ;
      }
    run_case({LinearFormat::kMxfp4, 1, 200, 1312, DType::kBF16, DType::kBF16, true});
  }
  ScopedEnv er("B12X_GEMM_STREAM_ROWS", "1");
  int j = 0;
  for (const char* parts : {"1", "2", "4", "8"})
    for (const char* sp : {"1", "3"}) {
      ScopedEnv ep("B12X_GEMM_STREAM_PARTS", parts), es2("B12X_GEMM_STREAM_SPLIT", sp);
      const LinearFormat f = (j % 2) ? LinearFormat::kNvfp4 : LinearFormat::kNvfp4W4A16;
      const int64_t M = 2 + j % 3, K = (j % 3) == 0 ? 4832 : 1280;
      Case c{f, M, (j % 4) < 2 ? 72 : 200, K, DType::kBF16, DType::kBF16, (j % 2) == 0};
      c.max_tokens = (j % 3) == 1 ? 16 : M;
      ++j;
      const int64_t before = gemm::lin::last_stream_launch().serial;
      run_case(c, /*graph_replay=*/(j % 5) == 0);
      const gemm::lin::StreamLaunch l = gemm::lin::last_stream_launch();
      EXPECT_GT(l.serial, before) << "rows parts " << parts << " split " << sp;
      EXPECT_EQ(l.rows, 4);
      EXPECT_EQ(l.parts, std::atoi(parts));
      EXPECT_EQ(l.split, std::atoi(sp));
    }
}

TEST(GemmGpu, DecodeStream) {
  B12X_REQUIRE_GPU();
  // The M = 1 stream kernel (session 11): NVFP4 weights, W4A16 and W4A4 (BF16 from the pre-pass).
  // Forced (B12X_GEMM_DECODE_STREAM=1) over every K-part count with registers for 2 and 3 CTAs
  // per SM: N = 72 (a partial last tile and group, warps without a tile), K = 1280 (K tail, 24
  // vectors per tile: parts whose vectors run past the tile are masked), 4864; bias on every
  // other case; a persistent grid walking several groups per CTA (B12X_GEMM_STREAM_CTAS=1 at
  // N = 4096) with its continuous ring across groups; a replayed graph. The default: W4A4
  // everywhere, W4A16 where the 16-row tiles outnumber the SMs, the 3-CTA registers where that
  // grid gives each CTA one tile group. lin::last_stream_launch() says which kernel ran.
  const LinearFormat kNv[] = {LinearFormat::kNvfp4W4A16, LinearFormat::kNvfp4};
  auto plan1 = [](LinearFormat f, int64_t N, int64_t K) { return plan_fmt(f, N, K, 1); };
  auto ran = [](int64_t before, int parts) {
    const gemm::lin::StreamLaunch l = gemm::lin::last_stream_launch();
    return l.serial == before + 1 && (parts == 0 || l.parts == parts);
  };
  const int64_t sms = device_info(0).sm_count;
  // Defaults: N = 16 * (sms + 8) (more tiles than SMs) and N = 16 * sms (one tile per SM, session
  // 16) take it for both; N = 16 * (sms / 2) only W4A4.
  for (LinearFormat f : kNv) {
    const gemm::Plan more = plan1(f, 16 * (sms + 8), 4096);
    EXPECT_GT(more.decode_stream_parts, 0) << gemm::format_name(f);
    EXPECT_GT(plan1(f, 16 * sms, 4096).decode_stream_parts, 0) << gemm::format_name(f);
    EXPECT_EQ(plan1(f, 16 * (sms / 2), 4096).decode_stream_parts > 0, f == LinearFormat::kNvfp4)
        << gemm::format_name(f);
    const int64_t before = gemm::lin::last_stream_launch().serial;
    run_case({f, 1, 16 * (sms + 8), 4096, DType::kBF16, DType::kBF16, true});
    EXPECT_TRUE(ran(before, more.decode_stream_parts)) << gemm::format_name(f);
  }
  // The 3-CTA registers where each CTA gets one tile group (W4A16), else 2.
  {
    const gemm::Plan one = plan1(LinearFormat::kNvfp4W4A16, 16 * (sms + 8), 4096);
    EXPECT_EQ(one.decode_stream_occ, 3);
    const gemm::Plan many = plan1(LinearFormat::kNvfp4W4A16, 16 * 8 * 4 * sms, 4096);
    EXPECT_EQ(many.decode_stream_occ, 2);
    EXPECT_EQ(plan1(LinearFormat::kNvfp4, 16 * (sms + 8), 4096).decode_stream_occ, 2);
    // Session 16: 2 where the 3-CTA grid would not take the trigger (2 x sms tiles: 67 % of the
    // slots) and the 2-CTA grid fills them, with the trigger.
    const gemm::Plan fill = plan1(LinearFormat::kNvfp4W4A16, 16 * 2 * sms, 4096);
    EXPECT_EQ(fill.decode_stream_occ, 2);
    EXPECT_EQ(fill.stream_trig & 1, 1);
    // One tile per SM (2048x7168 on 132 SMs): the 2-CTA cap with the trigger.
    const gemm::Plan one_per_sm = plan1(LinearFormat::kNvfp4W4A16, 16 * sms, 7168);
    EXPECT_EQ(one_per_sm.decode_stream_occ, 2);
    EXPECT_EQ(one_per_sm.stream_trig & 1, 1);
  }
  // A capacity of 2 prepares it for runs at M = 1 (session 12; DecodeStreamAnyCapacity).
  EXPECT_GT(bf16_plan(LinearFormat::kNvfp4W4A16, 2, 16 * (sms + 8), 4096).decode_stream_parts, 0);
  {
    // MXFP4 W4A16: the stream kernel for fold-free weights only (session 15; the decode kernel
    // with B12X_GEMM_STREAM_MX=0).
    const gemm::Plan mx = bf16_plan(LinearFormat::kMxfp4W4A16, 1, 16 * (sms + 8), 4096);
    EXPECT_GT(mx.decode_stream_parts, 0);
    EXPECT_TRUE(mx.decode_stream_free_only);
    ScopedEnv m0("B12X_GEMM_STREAM_MX", "0");
    EXPECT_EQ(bf16_plan(LinearFormat::kMxfp4W4A16, 1, 16 * (sms + 8), 4096).decode_stream_parts, 0);
  }
  {
    ScopedEnv es0("B12X_GEMM_DECODE_STREAM", "0");
    EXPECT_EQ(plan1(LinearFormat::kNvfp4, 16 * (sms + 8), 4096).decode_stream_parts, 0);
  }
  ScopedEnv es("B12X_GEMM_DECODE_STREAM", "1");
  int i = 0;
  for (const char* occ : {"2", "3"})
    for (const char* parts : {"1", "2", "4", "8"}) {
      ScopedEnv eo("B12X_GEMM_STREAM_OCC", occ), ep("B12X_GEMM_STREAM_PARTS", parts);
      for (int64_t K : {1280, 4864})
        for (LinearFormat f : kNv) {
          const gemm::Plan pl = plan1(f, 72, K);
          EXPECT_EQ(pl.decode_stream_parts, std::atoi(parts)) << gemm::format_name(f);
          EXPECT_EQ(pl.decode_stream_occ, std::atoi(occ)) << gemm::format_name(f);
          const int64_t before = gemm::lin::last_stream_launch().serial;
          run_case({f, 1, 72, K, DType::kBF16, DType::kBF16, (i++ % 2) == 0});
          EXPECT_TRUE(ran(before, std::atoi(parts))) << "parts " << parts << " occ " << occ;
          EXPECT_EQ(gemm::lin::last_stream_launch().occ, std::atoi(occ));
        }
    }
  {
    ScopedEnv ec("B12X_GEMM_STREAM_CTAS", "1");
    for (const char* parts : {"2", "8"}) {
      ScopedEnv ep("B12X_GEMM_STREAM_PARTS", parts);
      for (LinearFormat f : kNv) {
        const int64_t before = gemm::lin::last_stream_launch().serial;
        run_case({f, 1, 4096, 4096, DType::kBF16, DType::kBF16, true});
        EXPECT_TRUE(ran(before, std::atoi(parts)));
      }
    }
  }
  run_case({LinearFormat::kNvfp4W4A16, 1, 200, 1024, DType::kBF16, DType::kBF16, true},
           /*graph_replay=*/true);
  // Not taken: FP16 MMAs.
  const int64_t before = gemm::lin::last_stream_launch().serial;
  run_case({LinearFormat::kNvfp4W4A16, 1, 72, 1024, DType::kFP16, DType::kBF16, false});
  EXPECT_EQ(gemm::lin::last_stream_launch().serial, before);
}

TEST(GemmGpu, DecodeStreamAnyCapacity) {
  B12X_REQUIRE_GPU();
  // Session 12: the M = 1 stream kernel is chosen by run from the bound M, not by the plan's
  // capacity: plans sized for many tokens (vLLM's) prepare it, a run at M = 1 launches it and
  // matches the reference (eagerly and replayed in a graph), M = 5 and 16 run the M <= 16 block
  // kernel (session 13; a capacity above kDecodeMaxM: the auto regime, which the bound M
  // decides), and a plan that forces the tiled regime never prepares it.
  const int64_t sms = device_info(0).sm_count;
  for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kNvfp4})
    for (int64_t cap : {64, 16}) {
      SCOPED_TRACE(std::string(gemm::format_name(f)) + " max_tokens=" + std::to_string(cap));
      gemm::Caps caps;
      caps.format = f;
      caps.max_tokens = cap;
      caps.in_features = 4096;
      caps.out_features = 16 * (sms + 8);
      caps.act_dtype = f == LinearFormat::kNvfp4 ? DType::kFP4E2M1 : DType::kBF16;
      caps.out_dtype = DType::kBF16;
      const gemm::Plan pl = gemm::plan(caps);
      EXPECT_GT(pl.decode_stream_parts, 0);
      // W4A16 at N = 16 * sms too (capacity 1 as well since session 16).
      caps.out_features = 16 * sms;
      EXPECT_GT(gemm::plan(caps).decode_stream_parts, 0);
      caps.regime = gemm::Regime::kTiled;
      EXPECT_EQ(gemm::plan(caps).decode_stream_parts, 0);
      for (int64_t N : {16 * (sms + 8), int64_t{200}}) {
        int64_t before = gemm::lin::last_stream_launch().serial;
        Case c{f, 1, N, 4096, DType::kBF16, DType::kBF16, N == 200};
        c.max_tokens = cap;
        run_case(c);
        EXPECT_EQ(gemm::lin::last_stream_launch().serial, before + 1) << "N=" << N;
        before = gemm::lin::last_stream_launch().serial;
        run_case(c, /*graph_replay=*/true);
        EXPECT_GT(gemm::lin::last_stream_launch().serial, before) << "graph, N=" << N;
        for (int64_t m : {5, 16}) {
          c.M = m;
          before = gemm::lin::last_stream_launch().serial;
          run_case(c, /*graph_replay=*/m == 5);
          EXPECT_GT(gemm::lin::last_stream_launch().serial, before) << "M=" << m << " N=" << N;
          EXPECT_EQ(gemm::lin::last_stream_launch().rows, 32) << "M=" << m << " N=" << N;
        }
      }
    }
}

TEST(GemmGpu, DecodeStreamRows) {
  B12X_REQUIRE_GPU();
  // Session 12: the stream kernel with 4 token rows at M = 2..4 (forced: B12X_GEMM_STREAM_ROWS=1):
  // NVFP4 W4A16 and W4A4 (the BF16 pre-pass); M = 2..4 (rows past M staged as zeros, lanes g + 4
  // repeating tokens 0..3, never stored); every K-part count; K split over 1..3 CTAs through fp32
  // partials + the reduce kernel (K = 1280: K ranges that end past K; 4864); partial groups
  // (N = 72, 200), bias, FP16 outputs, capacity above M, replayed graphs; K = 14336, whose 4 rows
  // need a split of the staging. lin::last_stream_launch() says which kernel ran.
  ScopedEnv er("B12X_GEMM_STREAM_ROWS", "1");
  int i = 0;
  for (const char* parts : {"1", "2", "4", "8"})
    for (const char* sp : {"1", "2", "3"})
      for (int64_t M : {2, 3, 4}) {
        ScopedEnv ep("B12X_GEMM_STREAM_PARTS", parts), es("B12X_GEMM_STREAM_SPLIT", sp);
        const LinearFormat f = (i % 2) ? LinearFormat::kNvfp4 : LinearFormat::kNvfp4W4A16;
        const int64_t K = (i % 3) == 0 ? 4864 : 1280;
        const int64_t N = (i % 4) < 2 ? 72 : 200;
        Case c{f, M, N, K, DType::kBF16, (i % 5) == 0 ? DType::kFP16 : DType::kBF16, (i % 2) == 0};
        c.max_tokens = (i % 3) == 1 ? 16 : M;
        ++i;
        const int64_t before = gemm::lin::last_stream_launch().serial;
        run_case(c, /*graph_replay=*/(i % 7) == 0);
        const gemm::lin::StreamLaunch l = gemm::lin::last_stream_launch();
        EXPECT_GT(l.serial, before) << "parts " << parts << " split " << sp << " M " << M;
        EXPECT_EQ(l.rows, 4);
        EXPECT_EQ(l.parts, std::atoi(parts));
        EXPECT_EQ(l.split, std::atoi(sp));
      }
  // K tails: NVFP4 allows K % 32 == 0, so the last 64-K vector can end half past K (staged as
  // zeros in 8-value chunks): K = 1312 and 4832 with the K split over 1 and 3 CTAs.
  for (const int64_t K : {1312, 4832})
    for (const char* sp : {"1", "3"})
      for (const LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kNvfp4}) {
        ScopedEnv es("B12X_GEMM_STREAM_SPLIT", sp);
        const int64_t before = gemm::lin::last_stream_launch().serial;
        run_case({f, 3, 136, K, DType::kBF16, DType::kBF16, K == 1312});
        const gemm::lin::StreamLaunch l = gemm::lin::last_stream_launch();
        EXPECT_GT(l.serial, before) << "K " << K << " split " << sp;
        EXPECT_EQ(l.rows, 4);
        EXPECT_EQ(l.split, std::atoi(sp));
      }
  // The plan's own choice (no forced parts / split) from a plan of capacity 16.
  for (int64_t M : {2, 4}) {
    Case c{LinearFormat::kNvfp4W4A16, M, 4096, 4096, DType::kBF16, DType::kBF16, true};
    c.max_tokens = 16;
    const int64_t before = gemm::lin::last_stream_launch().serial;
    run_case(c, /*graph_replay=*/M == 4);
    EXPECT_GT(gemm::lin::last_stream_launch().serial, before);
  }
  {
    gemm::Caps caps;
    caps.format = LinearFormat::kNvfp4W4A16;
    caps.max_tokens = 4;
    caps.in_features = 14336;
    caps.out_features = 4096;
    caps.act_dtype = DType::kBF16;
    caps.out_dtype = DType::kBF16;
    const gemm::Plan pl = gemm::plan(caps);
    EXPECT_GT(pl.stream_rows_parts, 0);
    EXPECT_GT(pl.stream_rows_split, 1);
    run_case({LinearFormat::kNvfp4, 3, 4096, 14336, DType::kBF16, DType::kBF16, false});
    EXPECT_GT(gemm::lin::last_stream_launch().split, 1);
  }
}

TEST(GemmGpu, DecodeStream16Warm) {
  B12X_REQUIRE_GPU();
  // Session 28 (kS16WarmRule, reduce_trig bit 2): the FP4 block kernel and its reduce read their
  // parameter lines before griddep_wait (the SM90 default on the partials + reduce runs but MXFP4
  // W4A16's; =1 forces it, =0 turns it off); the same outputs either way. The default plans at
  // M = 2 / 5 / 8 / 16 (partials + reduce; 16 warps / cluster where the rules take them): NVFP4 /
  // MXFP4, W4A16 / W4A4, bias, FP16 outputs, replayed graphs with changed inputs.
  int i = 0;
  for (const char* w : {"1", "0"}) {
    ScopedEnv ew("B12X_GEMM_S16_WARM", w);
    for (const LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kNvfp4,
                                 LinearFormat::kMxfp4W4A16, LinearFormat::kMxfp4})
      for (int64_t M : {2, 5, 8, 16}) {
        const int64_t N = (i % 2) ? 264 : 512, K = (i % 3) ? 4096 : 2048;
        run_case(
            {f, M, N, K, DType::kBF16, (i % 5) == 2 ? DType::kFP16 : DType::kBF16, (i % 3) == 1},
            /*graph_replay=*/(i % 4) == 3);
        ++i;
      }
  }
}

TEST(GemmGpu, DecodeStream16) {
  B12X_REQUIRE_GPU();
  // Session 13: the M = 5..16 block kernel (forced: B12X_GEMM_STREAM16=1): NVFP4 W4A16 and W4A4
  // (the BF16 pre-pass); 2 tiles per warp (1: removed in session 21); M = 5, 8 (one n8 token tile),
  // 9, 16 (two; rows past M staged as zeros, never stored); K split over 1 or 3 CTAs through fp32
  // partials + the reduce kernel (K = 1280: 24 vectors, chunks of 4; K = 1312 / 4832: the last
  // vector half past K); partial CTAs (N = 72, 200: tiles past n16 not loaded), bias, FP16 outputs,
  // capacity above M, replayed graphs. lin::last_stream_launch() says which kernel ran (rows = 16 x
  // tw). The chunked kernel (B12X_GEMM_STREAM16_ONCE=0; DecodeStream16Once tests the staged-once
  // one).
  ScopedEnv e16("B12X_GEMM_STREAM16", "1"), eo0("B12X_GEMM_STREAM16_ONCE", "0");
  int i = 0;
  {
    ScopedEnv eq0("B12X_GEMM_STREAM16_QX", "0");  // W4A4 through the pre-pass here
    for (const char* tw : {"2"})
      for (const char* sp : {"1", "3"})
        for (int64_t M : {5, 8, 9, 16}) {
          ScopedEnv et("B12X_GEMM_STREAM16_TW", tw), es("B12X_GEMM_STREAM16_SPLIT", sp);
          const LinearFormat f = (i % 2) ? LinearFormat::kNvfp4 : LinearFormat::kNvfp4W4A16;
          const int64_t K = (i % 3) == 0 ? 4832 : (i % 3) == 1 ? 1280 : 1312;
          const int64_t N = (i % 4) < 2 ? 72 : 200;
          Case c{f,           M, N, K, DType::kBF16, (i % 5) == 0 ? DType::kFP16 : DType::kBF16,
                 (i % 2) == 0};
          c.max_tokens = (i % 3) == 1 ? 16 : M;
          ++i;
          const int64_t before = gemm::lin::last_stream_launch().serial;
          run_case(c, /*graph_replay=*/(i % 7) == 0);
          const gemm::lin::StreamLaunch l = gemm::lin::last_stream_launch();
          EXPECT_GT(l.serial, before) << "tw " << tw << " split " << sp << " M " << M;
          EXPECT_EQ(l.rows, 16 * std::atoi(tw));
          EXPECT_EQ(l.split, std::atoi(sp)) << "K " << K;
        }
  }
  // The plan's own split: every K range non-empty (4096x14336's plan; runs at N = 256, where the
  // CPU reference is cheap).
  for (const int64_t M : {6, 16}) {
    const char* tw = "2";
    gemm::Caps caps;
    caps.format = LinearFormat::kNvfp4W4A16;
    caps.max_tokens = 16;
    caps.in_features = 14336;
    caps.out_features = 4096;
    caps.act_dtype = DType::kBF16;
    caps.out_dtype = DType::kBF16;
    const gemm::Plan pl = gemm::plan(caps);
    EXPECT_EQ(pl.stream16_tw, std::atoi(tw));
    EXPECT_GT(pl.stream16_split, 1);
    EXPECT_LT(int64_t{pl.stream16_vp} * (pl.stream16_split - 1), 14336 / 64);
    EXPECT_GE(int64_t{pl.stream16_vp} * pl.stream16_split, 14336 / 64);
    const int64_t before = gemm::lin::last_stream_launch().serial;
    run_case({LinearFormat::kNvfp4W4A16, M, 256, 14336, DType::kBF16, DType::kBF16, M == 6},
             /*graph_replay=*/M == 16);
    EXPECT_GT(gemm::lin::last_stream_launch().serial, before);
  }
  // MXFP4 weights: W4A16, W4A4 and
  // W4A8 (their BF16 pre-pass), K tails and splits as above.
  int j = 0;
  for (const char* tw : {"2"})
    for (const char* sp : {"1", "3"})
      for (int64_t M : {5, 16}) {
        ScopedEnv et("B12X_GEMM_STREAM16_TW", tw), es("B12X_GEMM_STREAM16_SPLIT", sp);
        const LinearFormat f = (j % 3) == 0   ? LinearFormat::kMxfp4W4A16
                               : (j % 3) == 1 ? LinearFormat::kMxfp4
                                              : LinearFormat::kMxfp4W4A8;
        const int64_t K = (j % 2) == 0 ? 4832 : 1312;
        Case c{f, M, (j % 4) < 2 ? 72 : 200, K, DType::kBF16, DType::kBF16, (j % 2) == 1};
        ++j;
        const int64_t before = gemm::lin::last_stream_launch().serial;
        run_case(c, /*graph_replay=*/(j % 5) == 0);
        const gemm::lin::StreamLaunch l = gemm::lin::last_stream_launch();
        EXPECT_GT(l.serial, before) << "mx tw " << tw << " split " << sp << " M " << M;
        EXPECT_EQ(l.rows, 16 * std::atoi(tw));
        EXPECT_EQ(l.split, std::atoi(sp));
      }
  // W4A4 with its NVFP4 activations converted in the kernel (B12X_GEMM_STREAM16_QX=1: no
  // pre-pass at M = 5..16), K tails, splits, caller-side capacity above M.
  {
    ScopedEnv eq("B12X_GEMM_STREAM16_QX", "1");
    int k = 0;
    for (const char* tw : {"2"})
      for (const char* sp : {"1", "3"})
        for (int64_t M : {5, 16}) {
          ScopedEnv et("B12X_GEMM_STREAM16_TW", tw), es("B12X_GEMM_STREAM16_SPLIT", sp);
          Case c{LinearFormat::kNvfp4, M,
                 (k % 2) ? 72 : 200,   (k % 3) == 0 ? 4832 : 1312,
                 DType::kBF16,         (k % 4) == 3 ? DType::kFP16 : DType::kBF16,
                 (k % 2) == 0};
          c.max_tokens = (k % 3) == 2 ? 16 : M;
          ++k;
          const int64_t before = gemm::lin::last_stream_launch().serial;
          run_case(c, /*graph_replay=*/(k % 4) == 0);
          const gemm::lin::StreamLaunch l = gemm::lin::last_stream_launch();
          EXPECT_GT(l.serial, before) << "qx tw " << tw << " split " << sp << " M " << M;
          EXPECT_EQ(l.rows, 16 * std::atoi(tw));
          EXPECT_EQ(l.split, std::atoi(sp));
        }
  }
  // Not taken: M <= 4 with B12X_GEMM_STREAM16_MINM=5 (the 4-row / M = 1 kernels; NVFP4 W4A16's
  // block kernel starts at M = 2 since session 23), FP16 MMAs.
  {
    ScopedEnv em5("B12X_GEMM_STREAM16_MINM", "5");
    Case c{LinearFormat::kNvfp4W4A16, 4, 200, 1024, DType::kBF16, DType::kBF16, false};
    c.max_tokens = 16;
    const int64_t b4 = gemm::lin::last_stream_launch().serial;
    run_case(c);
    if (gemm::lin::last_stream_launch().serial > b4)
      EXPECT_EQ(gemm::lin::last_stream_launch().rows, 4);
    const int64_t before = gemm::lin::last_stream_launch().serial;
    run_case({LinearFormat::kNvfp4W4A16, 8, 200, 1024, DType::kFP16, DType::kBF16, false});
    run_case({LinearFormat::kMxfp4W4A16, 8, 200, 1024, DType::kFP16, DType::kBF16, false});
    EXPECT_EQ(gemm::lin::last_stream_launch().serial, before);
  }
}

/// The staged-once block kernel (forced on, B12X_GEMM_STREAM16=1 and _MINM=2 set by the caller)
/// over NVFP4 / MXFP4, W4A16 / W4A4 x ms: case i runs K ks[i % 3] at the forced split splits[i %
/// 3] with N ns[i % 3], FP16 output every 5th, bias every other case, capacity 16 every 4th,
/// the early trigger every other, a replayed graph every 3rd; cluster: the split summed in a
/// cluster (B12X_GEMM_S16_CLUSTER=8 set by the caller; NVFP4 on BF16 activations from M = 9).
/// qa: W4A4 only, its activations converted
/// in the staging (B12X_GEMM_S16_QA=1 set by the caller). w16: the 16-warp kernel
/// (B12X_GEMM_S16_W16=1 set by the caller).
void s16_once_cases(const std::vector<int64_t>& ms, const std::array<int64_t, 3>& ks,
                    const std::array<int, 3>& splits, const std::array<int64_t, 3>& ns,
                    bool cluster, bool qa = false, bool w16 = false) {
  int i = 0;
  const std::vector<LinearFormat> fmts =
      qa ? std::vector<LinearFormat>{LinearFormat::kNvfp4, LinearFormat::kMxfp4}
         : std::vector<LinearFormat>{LinearFormat::kNvfp4W4A16, LinearFormat::kNvfp4,
                                     LinearFormat::kMxfp4W4A16, LinearFormat::kMxfp4};
  for (const LinearFormat f : fmts)
    for (const int64_t M : ms) {
      const int64_t K = ks[i % 3];
      const int sp = splits[i % 3];
      ScopedEnv es("B12X_GEMM_STREAM16_SPLIT", std::to_string(sp).c_str());
      ScopedEnv etr("B12X_GEMM_STREAM_TRIG", (i % 2) ? "7" : "3");
      Case c{f,           M, ns[i % 3], K, DType::kBF16, (i % 5) == 0 ? DType::kFP16 : DType::kBF16,
             (i % 2) == 0};
      c.max_tokens = (i % 4) == 1 ? 16 : M;
      ++i;
      const int64_t before = gemm::lin::last_stream_launch().serial;
      run_case(c, /*graph_replay=*/(i % 3) == 0);
      const gemm::lin::StreamLaunch l = gemm::lin::last_stream_launch();
      EXPECT_GT(l.serial, before) << "M " << M << " K " << K;
      EXPECT_TRUE(l.once) << "M " << M << " K " << K;
      EXPECT_EQ(l.split, sp) << "M " << M << " K " << K;
      // NVFP4 on BF16 activations has no cluster instance at one token tile (session 25): M <= 8
      // keeps the partials.
      const bool cl_nt1 = f != LinearFormat::kNvfp4W4A16 && (f != LinearFormat::kNvfp4 || qa);
      EXPECT_EQ(l.cluster, cluster && (M > 8 || cl_nt1) ? sp : 0) << "M " << M << " K " << K;
      EXPECT_EQ(l.qa, qa) << "M " << M << " K " << K;
      // (No MXFP4 16-warp instance on BF16 activations, session 26.)
      const bool mx = f == LinearFormat::kMxfp4W4A16 || f == LinearFormat::kMxfp4;
      EXPECT_EQ(l.w16, w16 && (qa || !mx)) << "M " << M << " K " << K;
    }
}

TEST(GemmGpu, DecodeStream16Once) {
  B12X_REQUIRE_GPU();
  // Session 17: the block kernel with its K range staged once (the default at 2 tiles per warp on
  // BF16 activations where vp <= 16): NVFP4 W4A16 / W4A4 (pre-pass) and MXFP4 W4A16 / W4A4; M =
  // 5, 8, 9, 16; K = 992 (split 1, 16 vectors, the last half past K), 2848 (split 3: the last
  // range 13 of its 16 vectors, zero splats past kvec), 3040; partial CTAs (N = 72, 200), bias,
  // FP16 outputs, capacity above M, replayed graphs; the early trigger on every other case.
  // B12X_GEMM_STREAM16_ONCE=0 and vp > 16 keep the chunked kernel. Session 21: also M = 2 / 4
  // (B12X_GEMM_STREAM16_MINM=2; one n8 token tile as at M = 5..8).
  ScopedEnv e16("B12X_GEMM_STREAM16", "1"), em("B12X_GEMM_STREAM16_MINM", "2");
  // W4A4 through the pre-pass (SM90's default converts them in the kernel since session 24:
  // DecodeStream16Qa).
  ScopedEnv eq0("B12X_GEMM_STREAM16_QX", "0"), eqa0("B12X_GEMM_S16_QA", "0");
  s16_once_cases({2, 4, 5, 8, 9, 16}, {992, 2848, 3040}, {1, 3, 3}, {200, 72, 200}, false);
  // Not taken: B12X_GEMM_STREAM16_ONCE=0; vp > 16 (K = 2048 unsplit: 32 vectors).
  for (const bool off : {true, false}) {
    ScopedEnv eo("B12X_GEMM_STREAM16_ONCE", off ? "0" : "1");
    ScopedEnv es("B12X_GEMM_STREAM16_SPLIT", "1");
    const int64_t before = gemm::lin::last_stream_launch().serial;
    run_case(
        {LinearFormat::kNvfp4W4A16, 16, 200, off ? 992 : 2048, DType::kBF16, DType::kBF16, false});
    EXPECT_GT(gemm::lin::last_stream_launch().serial, before);
    EXPECT_FALSE(gemm::lin::last_stream_launch().once) << (off ? "ONCE=0" : "vp 32");
  }
  // The chunked kernel at M = 2 / 4 (MINM=2): NVFP4 W4A4 converting its activations in the
  // kernel (QX=1, the default for weights up to kS16QxMaxBytes) and W4A16 with ONCE=0; split 3
  // with a K range past K (K = 1312), FP16 output, a graph.
  for (const int64_t M : {2, 4}) {
    ScopedEnv em2("B12X_GEMM_STREAM16_MINM", "2"), es3("B12X_GEMM_STREAM16_SPLIT", "3");
    {
      ScopedEnv eq1("B12X_GEMM_STREAM16_QX", "1");
      const int64_t b0 = gemm::lin::last_stream_launch().serial;
      run_case({LinearFormat::kNvfp4, M, 200, 1312, DType::kBF16,
                M == 2 ? DType::kFP16 : DType::kBF16, true},
               /*graph_replay=*/M == 4);
      EXPECT_GT(gemm::lin::last_stream_launch().serial, b0) << "qx M " << M;
      EXPECT_EQ(gemm::lin::last_stream_launch().rows, 32);
      EXPECT_FALSE(gemm::lin::last_stream_launch().once);
    }
    ScopedEnv eo0("B12X_GEMM_STREAM16_ONCE", "0");
    const LinearFormat f = M == 2 ? LinearFormat::kNvfp4W4A16 : LinearFormat::kMxfp4W4A16;
    const int64_t b1 = gemm::lin::last_stream_launch().serial;
    run_case({f, M, 72, 1312, DType::kBF16, DType::kBF16, M == 2}, /*graph_replay=*/M == 2);
    EXPECT_GT(gemm::lin::last_stream_launch().serial, b1) << "chunked M " << M;
    EXPECT_EQ(gemm::lin::last_stream_launch().rows, 32);
    EXPECT_FALSE(gemm::lin::last_stream_launch().once);
  }
  // The defaults from M = 2 (session 21, no knob): NVFP4 W4A4, MXFP4 W4A4 / W4A16 on the block
  // kernel; NVFP4 W4A16 too since session 23 (round 86).
  unsetenv("B12X_GEMM_STREAM16_MINM");
  unsetenv("B12X_GEMM_STREAM16_QX");
  for (const LinearFormat f : {LinearFormat::kMxfp4, LinearFormat::kMxfp4W4A16,
                               LinearFormat::kNvfp4, LinearFormat::kNvfp4W4A16}) {
    const int64_t before = gemm::lin::last_stream_launch().serial;
    run_case({f, 3, 200, 4096, DType::kBF16, DType::kBF16, f == LinearFormat::kMxfp4});
    const bool launched = gemm::lin::last_stream_launch().serial > before;
    if (f == LinearFormat::kNvfp4W4A16 &&
        !(device_info(0).cc_major == 9 && device_info(0).cc_minor == 0)) {  // SM90 only
      EXPECT_TRUE(!launched || gemm::lin::last_stream_launch().rows == 4);
    } else {
      EXPECT_TRUE(launched) << gemm::format_name(f);
      EXPECT_EQ(gemm::lin::last_stream_launch().rows, 32) << gemm::format_name(f);
    }
  }
}

TEST(GemmGpu, DecodeStream16W16) {
  B12X_REQUIRE_GPU();
  // Session 26 (lin::kS16VarW16; B12X_GEMM_S16_W16=1 forces it): the staged-once kernel with 16
  // warps, two K halves of the same tiles summed in shared memory. NVFP4 / MXFP4, W4A16 / W4A4 (the
  // pre-pass, and converted in the staging), M = 2..16 (one and two n8 token tiles); vp 16 halves
  // of 8 (K = 992: the last vector half past K; 2848 split 3: the last range 13 of 16 vectors, its
  // second half 5; 1312 split 2: the last range 5 vectors, its second half idle), bias, FP16
  // outputs, capacity above M, graph replays with new activations and an eager call after them.
  // MXFP4 on BF16 activations has no 16-warp instance (the knob keeps the 8-warp kernel). Then the
  // SM90 rule (kS16W16Rule).
  const bool sm90 = device_info(0).cc_major == 9 && device_info(0).cc_minor == 0;
  const int64_t sms = device_info(0).sm_count;
  {
    ScopedEnv e16("B12X_GEMM_STREAM16", "1"), em("B12X_GEMM_STREAM16_MINM", "2");
    ScopedEnv ew("B12X_GEMM_S16_W16", "1");
    {
      ScopedEnv eq0("B12X_GEMM_STREAM16_QX", "0"), eqa0("B12X_GEMM_S16_QA", "0");
      s16_once_cases({2, 9, 16}, {992, 2848, 3040}, {1, 3, 3}, {200, 72, 200}, false, false, true);
    }
    {
      ScopedEnv eqa("B12X_GEMM_S16_QA", "1");
      s16_once_cases({4, 8, 16}, {1312, 2848, 992}, {2, 3, 1}, {72, 200, 520}, false, true, true);
    }
    // The plan's own split for one CTA per SM: vp a multiple of 8, at most one CTA per SM.
    for (const LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kNvfp4}) {
      const gemm::Plan pl = plan_fmt(f, 4096, 4096, 16);
      EXPECT_TRUE(pl.stream16_w16) << pl.describe();
      EXPECT_EQ(pl.stream16_vp % 8, 0) << pl.describe();
      EXPECT_LE(16 * pl.stream16_split, sms) << pl.describe();
      EXPECT_EQ(pl.stream16_cluster, 0) << pl.describe();
    }
  }
  // The rule (SM90): the 8-warp plan's split at <= 1 CTA per SM through partials, the same split
  // on 16 warps — MXFP4 W4A4 up to the SM count, NVFP4 W4A16 / W4A4 up to 90 % of it, from more
  // than half of it (an H200's 2048x7168: 8 x 14 CTAs; 4096x4096's 16 x 8 MXFP4 W4A4 only); =0
  // never.
  for (const LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kNvfp4,
                               LinearFormat::kMxfp4W4A16, LinearFormat::kMxfp4}) {
    SCOPED_TRACE(gemm::format_name(f));
    const gemm::Plan p0 = plan_fmt(f, 2048, 7168, 16);
    const gemm::Plan p1 = plan_fmt(f, 4096, 4096, 16);
    const bool mxa = f == LinearFormat::kMxfp4, nv = !mxa && f != LinearFormat::kMxfp4W4A16;
    EXPECT_EQ(p0.stream16_w16, sm90 && (mxa || nv) && 8 * 14 * 10 <= 9 * sms && 8 * 14 * 2 > sms)
        << p0.describe();
    // (NVFP4 W4A4 up to the SM count too since session 29.)
    EXPECT_EQ(p1.stream16_w16,
              sm90 && (mxa || f == LinearFormat::kNvfp4) && 16 * 8 <= sms && 16 * 8 * 2 > sms)
        << p1.describe();
    if (p0.stream16_w16) {
      EXPECT_EQ(p0.stream16_split, 14);
      EXPECT_NE(p0.stream_trig & 4, 0);  // the early trigger at <= 90 % of the SMs
      const int64_t before = gemm::lin::last_stream_launch().serial;
      run_case({f, 2, 2048, 7168, DType::kBF16, DType::kBF16, true});
      EXPECT_GT(gemm::lin::last_stream_launch().serial, before);
      EXPECT_TRUE(gemm::lin::last_stream_launch().w16);
    }
    ScopedEnv ew0("B12X_GEMM_S16_W16", "0");
    EXPECT_FALSE(plan_fmt(f, 2048, 7168, 16).stream16_w16);
  }
}

TEST(GemmGpu, DecodeStream16Qa) {
  B12X_REQUIRE_GPU();
  // Session 24 probe (B12X_GEMM_S16_QA=1, lin::kS16VarQa): NVFP4 / MXFP4 W4A4 on the staged-once
  // kernel with the FP4 activations converted in its staging (no pre-pass): M = 2..16 (one and
  // two n8 token tiles), K ranges past K (split 3 of K = 2848 / 3040: 13 / 16 vectors), bias, FP16
  // outputs, capacity above M, graph replays with new activations and an eager call after them;
  // the split's partials + reduce (NVFP4's outputs times 2^7 there too) and, on SM90+, the
  // cluster sum.
  ScopedEnv e16("B12X_GEMM_STREAM16", "1"), em("B12X_GEMM_STREAM16_MINM", "2");
  ScopedEnv eqa("B12X_GEMM_S16_QA", "1");
  s16_once_cases({2, 5, 8, 9, 16}, {992, 2848, 3040}, {1, 3, 3}, {200, 72, 200}, false, true);
  if (device_info(0).cc_major >= 9) {
    ScopedEnv ecl("B12X_GEMM_S16_CLUSTER", "8");
    s16_once_cases({3, 8, 16}, {1312, 2848, 2016}, {2, 3, 8}, {72, 200, 520}, true, true);
  }
  // M = 1 never takes the block kernel (the M = 1 kernels' own conversion or the pre-pass).
  {
    Case c{LinearFormat::kNvfp4, 1, 200, 992, DType::kBF16, DType::kBF16, true};
    c.max_tokens = 16;
    const int64_t before = gemm::lin::last_stream_launch().serial;
    run_case(c);
    const gemm::lin::StreamLaunch l = gemm::lin::last_stream_launch();
    if (l.serial > before) EXPECT_EQ(l.rows, 1);
    EXPECT_FALSE(l.serial > before && l.qa);
  }
  // Where the staged-once kernel is refused (K = 16384 unsplit: 256 vectors per CTA), NVFP4 W4A4
  // keeps the chunked qx kernel (its weight within kS16QxMaxBytes: N = 1024, 8 MB; round 91 ran
  // N = 2048, 16 MB, where the rule takes the pre-pass: the test's error), MXFP4 W4A4 the pre-pass.
  {
    ScopedEnv es("B12X_GEMM_STREAM16_SPLIT", "1");
    for (const LinearFormat f : {LinearFormat::kNvfp4, LinearFormat::kMxfp4}) {
      const gemm::Plan pl = plan_fmt(f, 1024, 16384, 16);
      EXPECT_FALSE(pl.stream16_qa) << gemm::format_name(f);
      EXPECT_FALSE(pl.stream16_once) << gemm::format_name(f);
      EXPECT_EQ(pl.stream16_qx, f == LinearFormat::kNvfp4) << gemm::format_name(f);
    }
  }
}

TEST(GemmGpu, DecodeStream16Cluster) {
  B12X_REQUIRE_GPU();
  // Session 23: the block kernel's K split summed in a thread-block cluster through DSMEM
  // (B12X_GEMM_S16_CLUSTER=<max size>, lin::kS16VarCluster; no partials, no reduce launch):
  // NVFP4 / MXFP4, W4A16 / W4A4 (pre-pass) on the staged-once kernel (the only one with the
  // cluster sum); M = 2..16 (one and two n8 token tiles); splits 2 /
  // 3 / 8 (K = 1312: the last range 9 of 12 vectors, the last half past K; 2848: 13 of 16;
  // 2016: vp 4, the smallest shared memory that holds the sum's tile); N = 72 / 200 / 520 (CTAs
  // with fewer tiles, rows past N); bias, FP16 outputs, capacity above M, graph replays with new
  // activations and an eager call after them. Split 16 (non-portable) where the device can.
  if (device_info(0).cc_major < 9) GTEST_SKIP() << "no thread-block clusters below SM90";
  ScopedEnv e16("B12X_GEMM_STREAM16", "1"), em("B12X_GEMM_STREAM16_MINM", "2");
  ScopedEnv ecl("B12X_GEMM_S16_CLUSTER", "8");
  {
    ScopedEnv eq0("B12X_GEMM_STREAM16_QX", "0"), eqa0("B12X_GEMM_S16_QA", "0");
    s16_once_cases({2, 5, 8, 9, 16}, {1312, 2848, 2016}, {2, 3, 8}, {72, 200, 520}, true);
  }
  {
    ScopedEnv ec16("B12X_GEMM_S16_CLUSTER", "16"), es("B12X_GEMM_STREAM16_SPLIT", "16");
    gemm::Caps caps;
    caps.format = LinearFormat::kNvfp4W4A16;
    caps.max_tokens = 16;
    caps.in_features = 4096;
    caps.out_features = 200;
    caps.act_dtype = DType::kBF16;
    caps.out_dtype = DType::kBF16;
    const bool c16 = gemm::plan(caps).stream16_cluster == 16;
    const int64_t before = gemm::lin::last_stream_launch().serial;
    run_case({LinearFormat::kNvfp4W4A16, 16, 200, 4096, DType::kBF16, DType::kBF16, true},
             /*graph_replay=*/true);
    EXPECT_GT(gemm::lin::last_stream_launch().serial, before);
    EXPECT_EQ(gemm::lin::last_stream_launch().cluster, c16 ? 16 : 0);
    if (!c16) std::printf("[cluster] split 16 not resident as one cluster: partials + reduce\n");
  }
  // Off: the split's partials and the reduce kernel.
  {
    ScopedEnv ec0("B12X_GEMM_S16_CLUSTER", "0"), er0("B12X_GEMM_S16_CL_RULE", "0");
    ScopedEnv es("B12X_GEMM_STREAM16_SPLIT", "3");
    run_case({LinearFormat::kNvfp4W4A16, 16, 200, 2848, DType::kBF16, DType::kBF16, false});
    EXPECT_EQ(gemm::lin::last_stream_launch().cluster, 0);
  }
  // The rule (default, kS16ClusterRule; B12X_GEMM_S16_CL_RULE=0|1): SM90 only, W4A16 formats and
  // (session 24) W4A4 with its activations converted in the kernel, a split <= 8 on a grid of
  // more CTAs than SMs (a cluster launch triggers the dependent launch early).
  unsetenv("B12X_GEMM_S16_CLUSTER");
  ScopedEnv er1("B12X_GEMM_S16_CL_RULE", "1");
  const bool sm90 = device_info(0).cc_major == 9 && device_info(0).cc_minor == 0;
  const int64_t sms = device_info(0).sm_count;
  for (const LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4W4A16,
                               LinearFormat::kNvfp4, LinearFormat::kMxfp4}) {
    SCOPED_TRACE(gemm::format_name(f));
    // N = 16 x 256 x ceil(1.5 SMs / 16) rows: 1.5 x SMs CTAs at split 8 (K = 4096), above them.
    const int64_t n = 256 * ((3 * sms / 2 + 7) / 8);
    const gemm::Plan big = plan_fmt(f, n, 4096, 16);
    EXPECT_EQ(big.stream16_split, 8);
    EXPECT_EQ(big.stream16_cluster, sm90 ? 8 : 0) << big.describe();
    EXPECT_EQ(big.stream16_qa, sm90 && (f == LinearFormat::kNvfp4 || f == LinearFormat::kMxfp4));
    if (sm90)  // the default's first M: NVFP4 W4A16 from 9 (round 87), the others every M
      EXPECT_EQ(big.stream16_cluster_min_m, f == LinearFormat::kNvfp4W4A16 ? 9 : 0);
    // floor(SMs / 8) x 8 CTAs (4096x4096 on an H200), not above the SM count: partials + reduce.
    EXPECT_EQ(plan_fmt(f, 256 * std::max<int64_t>(1, sms / 8), 4096, 16).stream16_cluster, 0);
  }
}

/// The K split the FP8 block kernel runs for a forced split (its CTAs hold whole 256-K chunks,
/// so a forced split can leave fewer K ranges).
int f8_split(int64_t K, int split) {
  const int64_t kvec = (K + 255) / 256 * 8;
  const int64_t vp = ((kvec + split - 1) / split + 7) / 8 * 8;
  return static_cast<int>((kvec + vp - 1) / vp);
}

TEST(GemmGpu, DecodeStream16Fp8) {
  B12X_REQUIRE_GPU();
  // Session 14: the FP8 block kernel (forced: B12X_GEMM_STREAM16_F8=1) for per-tensor FP8 (e4m3
  // activations), block FP8 (BF16 through the quantizer, or the caller's e4m3 + scales) and MXFP8
  // (the quantizer); f16 MMAs (B12X_GEMM_DECODE_F8MMA=1; session 21 removed the e4m3 mma.sync
  // instances, a probe of SM89 / SM12x no default reaches); 1 / 2 tiles per warp;
  // M = 5 / 8 (one n8 token tile), 9 / 16 (two; rows past M zero, never stored); K split over 1
  // or 3 CTAs through fp32 partials + the reduce kernel, K tails inside a chunk (1312: 41 atoms
  // of 48), partial CTAs (N = 72 / 200), bias, FP16 outputs, capacity above M, replayed graphs.
  // (Session 25's shared staging keeps per-tensor plans of capacity <= 8 on the decode kernel.)
  ScopedEnv e16("B12X_GEMM_STREAM16_F8", "1"), ex("B12X_GEMM_DECODE_XSHARE", "0");
  int i = 0;
  for (const char* mma : {"1"})
    for (LinearFormat f : {LinearFormat::kFp8Tensor, LinearFormat::kFp8Block, LinearFormat::kMxfp8})
      for (const char* tw : {"1", "2"})
        for (const char* sp : {"1", "3"}) {
          ScopedEnv em("B12X_GEMM_DECODE_F8MMA", mma), et("B12X_GEMM_STREAM16_TW", tw),
              es("B12X_GEMM_STREAM16_SPLIT", sp);
          const int64_t Ms[] = {5, 8, 9, 16};
          const int64_t M = Ms[i % 4];
          const bool block = f == LinearFormat::kFp8Block;
          const int64_t K = (i % 3) == 0 ? 4864 : (i % 3) == 1 ? 1024 : block ? 1280 : 1312;
          Case c{f,
                 M,
                 (i % 2) ? 72 : 200,
                 K,
                 f == LinearFormat::kFp8Tensor ? DType::kFP8E4M3 : DType::kBF16,
                 (i % 5) == 0 ? DType::kFP16 : DType::kBF16,
                 (i % 2) == 0};
          c.caller_quant = block && (i % 4) == 1;
          c.max_tokens = (i % 3) == 1 ? 16 : M;
          ++i;
          const int64_t before = gemm::lin::last_stream16_f8_launch().serial;
          run_case(c, /*graph_replay=*/(i % 5) == 0);
          const gemm::lin::Stream16F8Launch l = gemm::lin::last_stream16_f8_launch();
          EXPECT_GT(l.serial, before) << name(c) << " mma " << mma << " tw " << tw << " sp " << sp;
          EXPECT_EQ(l.tw, std::atoi(tw));
          EXPECT_EQ(l.mma, mma[0] - '0');
          EXPECT_EQ(l.split, f8_split(K, std::atoi(sp))) << name(c);
        }
  // Block FP8 / MXFP8 with their BF16 activations quantized in the kernel (B12X_GEMM_STREAM16_QX=1,
  // no quantizer launch): f16 MMAs, tw 1 / 2, M = 5..16, splits 1 / 3, K tails (1280 / 4864
  // with a half chunk), partial CTAs, graphs.
  {
    ScopedEnv eq("B12X_GEMM_STREAM16_QX", "1");
    int k = 0;
    for (const char* mma : {"1"})
      for (LinearFormat f : {LinearFormat::kFp8Block, LinearFormat::kMxfp8})
        for (const char* tw : {"1", "2"}) {
          const char* sp = (k % 2) ? "3" : "1";
          ScopedEnv em("B12X_GEMM_DECODE_F8MMA", mma), et("B12X_GEMM_STREAM16_TW", tw),
              es("B12X_GEMM_STREAM16_SPLIT", sp);
          const int64_t Ms[] = {5, 16, 9, 12};
          Case c{f,
                 Ms[k % 4],
                 (k % 3) ? 72 : 200,
                 (k % 2) ? 4864 : 1280,
                 DType::kBF16,
                 (k % 5) == 2 ? DType::kFP16 : DType::kBF16,
                 (k % 2) == 0};
          c.max_tokens = (k % 3) == 2 ? 16 : c.M;
          ++k;
          const int64_t before = gemm::lin::last_stream16_f8_launch().serial;
          run_case(c, /*graph_replay=*/(k % 3) == 0);
          const gemm::lin::Stream16F8Launch l = gemm::lin::last_stream16_f8_launch();
          EXPECT_GT(l.serial, before) << name(c) << " mma " << mma << " tw " << tw;
          EXPECT_TRUE(l.q) << name(c);
          EXPECT_EQ(l.split, f8_split(c.K, std::atoi(sp))) << name(c);
        }
  }
  // Splits 2 / 3 / 8 (K = 4096 / 6144: whole chunks per CTA), all three formats, with and without
  // the in-kernel quantization.
  {
    int k = 0;
    for (const char* sp : {"2", "3", "8"})
      for (LinearFormat f :
           {LinearFormat::kFp8Tensor, LinearFormat::kFp8Block, LinearFormat::kMxfp8}) {
        ScopedEnv em("B12X_GEMM_DECODE_F8MMA", "1"), es("B12X_GEMM_STREAM16_SPLIT", sp),
            eq("B12X_GEMM_STREAM16_QX", (k % 3) ? "1" : "0"), et("B12X_GEMM_STREAM16_TW", "2");
        Case c{f,
               (k % 2) ? 16 : 7,
               (k % 3) ? 200 : 72,
               (k % 2) ? 4096 : 6144,
               f == LinearFormat::kFp8Tensor ? DType::kFP8E4M3 : DType::kBF16,
               DType::kBF16,
               (k % 2) == 0};
        ++k;
        const int64_t before = gemm::lin::last_stream16_f8_launch().serial;
        run_case(c, /*graph_replay=*/(k % 4) == 0);
        const gemm::lin::Stream16F8Launch l = gemm::lin::last_stream16_f8_launch();
        EXPECT_GT(l.serial, before) << name(c) << " split " << sp;
        EXPECT_EQ(l.split, f8_split(c.K, std::atoi(sp))) << name(c);
      }
  }
  // MXFP8 on f16 MMAs (B12X_GEMM_STREAM16_F8_VAR): 2 scales folded into the f16 operands (one
  // fp32 fold per chunk; the default; the per-atom fold, 0, was removed in session 21); the
  // quantizer's e4m3 (QX=0; QX=1 with 2 alone is no instance: the in-kernel quantization runs 14,
  // below), tw 1 / 2, M = 5 / 16, splits 1 / 3, K tails inside a chunk, partial CTAs.
  // Variant 2 also with weight scales over 80..150 (atoms more than 22 binades below their chunk's
  // largest scale lose f16 precision, < 2^-32 of that row's largest element).
  for (const char* var : {"2"}) {
    ScopedEnv ev("B12X_GEMM_STREAM16_F8_VAR", var), em("B12X_GEMM_DECODE_F8MMA", "1");
    int k = 0;
    for (const char* qx : {"0", "0"})
      for (const char* tw : {"1", "2"}) {
        const char* sp = (k % 2) ? "3" : "1";
        ScopedEnv eq("B12X_GEMM_STREAM16_QX", qx), et("B12X_GEMM_STREAM16_TW", tw),
            es("B12X_GEMM_STREAM16_SPLIT", sp);
        Case c{LinearFormat::kMxfp8, (k % 3) ? int64_t{16} : int64_t{5},
               (k % 2) ? 72 : 200,   (k % 2) ? 4864 : 1312,
               DType::kBF16,         (k % 4) == 3 ? DType::kFP16 : DType::kBF16,
               (k % 2) == 0};
        c.max_tokens = k == 2 ? 16 : c.M;
        ++k;
        const bool wide = var[0] == '2' && k == 2;
        if (wide)
          g_weight_tweak = [](LinearFormat f, HostWeight& h) {
            std::uniform_int_distribution<int> e8(80, 150);
            if (f == LinearFormat::kMxfp8)
              for (auto& b : h.scale_bytes) b = static_cast<uint8_t>(e8(test::rng()));
          };
        const int64_t before = gemm::lin::last_stream16_f8_launch().serial;
        run_case(c, /*graph_replay=*/k == 4);
        g_weight_tweak = nullptr;
        const gemm::lin::Stream16F8Launch l = gemm::lin::last_stream16_f8_launch();
        EXPECT_GT(l.serial, before) << name(c) << " var " << var << " qx " << qx << " tw " << tw;
        EXPECT_EQ(l.var, var[0] - '0') << name(c);
        EXPECT_EQ(l.q, qx[0] == '1') << name(c);
        EXPECT_EQ(l.split, f8_split(c.K, std::atoi(sp))) << name(c);
      }
  }
  // MXFP8's in-kernel quantization on all 8 warps with its folded scales, a warp per token at M
  // <= 8 (VAR=14, the default on SM90; 6 without the warp per token was removed in session 21;
  // at M = 1 / 3 / 16): tw 1 / 2, splits 1 / 3, K tails (half chunks, 4864), partial CTAs, FP16
  // outputs, a graph; with kF8VarCheap (session 25: splats by one conversion, masked E8M0 bytes)
  // and kF8VarEarly | kF8VarEarly2 (238, session 27: the weight E8M0 bytes of chunks 0 / 1 staged
  // and their splats built before griddepcontrol.wait; 46 without them and 110 without the second
  // were removed), weight scales over 80..150 in one case (splats below 2^-24 flush to 0).
  for (const int var : {238}) {
    ScopedEnv em("B12X_GEMM_DECODE_F8MMA", "1"), eq("B12X_GEMM_STREAM16_QX", "1"),
        ev("B12X_GEMM_STREAM16_F8_VAR", std::to_string(var).c_str());
    int k = 0;
    for (const char* tw : {"1", "2"})
      for (const char* sp : {"1", "3"}) {
        ScopedEnv et("B12X_GEMM_STREAM16_TW", tw), es("B12X_GEMM_STREAM16_SPLIT", sp);
        const int64_t Ms[] = {var == 6 ? int64_t{5} : int64_t{1}, 16, var == 6 ? 12 : 3};
        Case c{LinearFormat::kMxfp8,  Ms[k % 3],    (k % 2) ? 72 : 200,
               (k % 2) ? 4864 : 1280, DType::kBF16, (k % 4) == 2 ? DType::kFP16 : DType::kBF16,
               (k % 2) == 0};
        c.max_tokens = (k % 3) == 0 ? 16 : c.M;
        ++k;
        if (k == 2)
          g_weight_tweak = [](LinearFormat f, HostWeight& h) {
            std::uniform_int_distribution<int> e8(80, 150);
            if (f == LinearFormat::kMxfp8)
              for (auto& b : h.scale_bytes) b = static_cast<uint8_t>(e8(test::rng()));
          };
        const int64_t before = gemm::lin::last_stream16_f8_launch().serial;
        run_case(c, /*graph_replay=*/k == 3);
        g_weight_tweak = nullptr;
        const gemm::lin::Stream16F8Launch l = gemm::lin::last_stream16_f8_launch();
        EXPECT_GT(l.serial, before) << name(c) << " tw " << tw << " sp " << sp;
        EXPECT_EQ(l.var, var) << name(c);
        EXPECT_TRUE(l.q) << name(c);
        EXPECT_EQ(l.split, f8_split(c.K, std::atoi(sp))) << name(c);
      }
  }
  // Block FP8 quantized after the MMAs (VAR=16, the default on SM90; before them, 0, was removed
  // in session 21) at M = 5 (one token tile) and 16: tw 1 / 2, splits 1 / 3, K tails.
  {
    ScopedEnv em("B12X_GEMM_DECODE_F8MMA", "1");
    int k = 0;
    for (const char* var : {"16", "16"})
      for (const char* tw : {"1", "2"}) {
        const LinearFormat f = LinearFormat::kFp8Block;
        ScopedEnv ev("B12X_GEMM_STREAM16_F8_VAR", var);
        const char* sp = (k % 2) ? "3" : "1";
        ScopedEnv et("B12X_GEMM_STREAM16_TW", tw), es("B12X_GEMM_STREAM16_SPLIT", sp),
            ed("B12X_GEMM_STREAM16_DEPTH", "4");
        Case c{f,
               (k % 2) ? int64_t{16} : int64_t{5},
               (k % 2) ? 72 : 200,
               (k % 2) ? 4864 : 1408,
               DType::kBF16,
               DType::kBF16,
               (k % 2) == 0};
        ++k;
        const int64_t before = gemm::lin::last_stream16_f8_launch().serial;
        run_case(c, /*graph_replay=*/k == 4);
        const gemm::lin::Stream16F8Launch l = gemm::lin::last_stream16_f8_launch();
        EXPECT_GT(l.serial, before) << name(c) << " tw " << tw;
        EXPECT_EQ(l.var, std::atoi(var)) << name(c);
      }
  }
  // MXFP8's default plan variant (238, session 27) at one chunk per CTA (K = 2048, split 8: chunk
  // 1 lies past every CTA's range), M = 1 / 12, bias, FP16 out, a graph.
  {
    ScopedEnv em("B12X_GEMM_DECODE_F8MMA", "1"), eq("B12X_GEMM_STREAM16_QX", "1"),
        es("B12X_GEMM_STREAM16_SPLIT", "8"), et("B12X_GEMM_STREAM16_TW", "2"),
        e1("B12X_GEMM_STREAM16_F8_MINM", "1");
    int k = 0;
    for (LinearFormat f : {LinearFormat::kMxfp8})
      for (int64_t M : {1, 12}) {
        Case c{f,
               M,
               (k % 2) ? 72 : 200,
               2048,
               DType::kBF16,
               (k % 2) ? DType::kFP16 : DType::kBF16,
               (k % 2) == 0};
        ++k;
        const int64_t before = gemm::lin::last_stream16_f8_launch().serial;
        run_case(c, /*graph_replay=*/k == 2);
        const gemm::lin::Stream16F8Launch l = gemm::lin::last_stream16_f8_launch();
        EXPECT_GT(l.serial, before) << name(c);
        EXPECT_TRUE(l.q) << name(c);
        EXPECT_EQ(l.var, 238) << name(c);
        EXPECT_EQ(l.split, 8) << name(c);
      }
  }
  // Ring depth 8 (f16 MMAs: per-tensor at tw 2, its default; block FP8 / MXFP8 at tw 1 were removed
  // in session 21) and the plan's own split (4096x14336's plan, run at N = 256: every K range
  // non-empty).
  {
    ScopedEnv em("B12X_GEMM_DECODE_F8MMA", "1"), ed("B12X_GEMM_STREAM16_DEPTH", "8"),
        et2("B12X_GEMM_STREAM16_TW", "2");
    for (int64_t M : {6, 16}) {
      const int64_t before = gemm::lin::last_stream16_f8_launch().serial;
      run_case({LinearFormat::kFp8Tensor, M, 200, 1312, DType::kFP8E4M3, DType::kBF16, M == 6},
               /*graph_replay=*/M == 16);
      EXPECT_GT(gemm::lin::last_stream16_f8_launch().serial, before);
      EXPECT_EQ(gemm::lin::last_stream16_f8_launch().depth, 8);
    }
  }
  // The block kernel at M = 1..4 (probe B12X_GEMM_STREAM16_F8_MINM=1: one n8 token tile, rows
  // past M zero; capacities below 5), f16 MMAs.
  {
    ScopedEnv em("B12X_GEMM_STREAM16_F8_MINM", "1");
    int k = 0;
    for (int64_t M : {1, 3})
      for (LinearFormat f :
           {LinearFormat::kFp8Tensor, LinearFormat::kFp8Block, LinearFormat::kMxfp8}) {
        ScopedEnv ef("B12X_GEMM_DECODE_F8MMA", "1");
        Case c{f,
               M,
               (k % 3) ? 200 : 72,
               f == LinearFormat::kFp8Block ? 1280 : 1312,
               f == LinearFormat::kFp8Tensor ? DType::kFP8E4M3 : DType::kBF16,
               DType::kBF16,
               (k % 2) == 0};
        c.max_tokens = M == 1 ? 1 : 16;
        ++k;
        const int64_t before = gemm::lin::last_stream16_f8_launch().serial;
        run_case(c, /*graph_replay=*/(k % 2) == 0);
        EXPECT_GT(gemm::lin::last_stream16_f8_launch().serial, before) << name(c);
      }
  }
  gemm::Caps caps;
  caps.format = LinearFormat::kFp8Tensor;
  caps.max_tokens = 16;
  caps.in_features = 14336;
  caps.out_features = 4096;
  caps.act_dtype = DType::kFP8E4M3;
  caps.out_dtype = DType::kBF16;
  const bool sm90 = device_info(0).cc_major == 9 && device_info(0).cc_minor == 0;
  const gemm::Plan pl = gemm::plan(caps);
  // Per-tensor / block FP8 at one tile per warp where K >= 3 N (session 15; depth 4), at 2 tiles
  // per warp (depth 8 on SM90) on the transposed shape.
  EXPECT_EQ(pl.stream16_tw, 1);
  EXPECT_EQ(pl.stream16_depth, 4);
  {
    gemm::Caps wide = caps;
    wide.in_features = 4096;
    wide.out_features = 14336;
    const gemm::Plan pw = gemm::plan(wide);
    EXPECT_EQ(pw.stream16_tw, 2);
    EXPECT_EQ(pw.stream16_depth, sm90 ? 8 : 4);
  }
  EXPECT_GT(pl.stream16_split, 1);
  EXPECT_LT(int64_t{pl.stream16_vp} * (pl.stream16_split - 1), 14336 / 32);
  EXPECT_GE(int64_t{pl.stream16_vp} * pl.stream16_split, 14336 / 32);
  const int64_t before = gemm::lin::last_stream16_f8_launch().serial;
  run_case({LinearFormat::kFp8Tensor, 16, 256, 14336, DType::kFP8E4M3, DType::kBF16, true});
  EXPECT_GT(gemm::lin::last_stream16_f8_launch().serial, before);
  // The default (round 51; SM90): 2 tiles per warp, depth 8 for per-tensor, 1 tile per warp where 2
  // give at most one CTA per SM (N = 16 x SMs / 2 x 8 rows here: one row block of 256 per 2 SMs
  // and the K split of 8 at K = 4096), block FP8 / MXFP8 quantized in the kernel; not with
  // B12X_GEMM_STREAM16_F8=0 or B12X_GEMM_STREAM16=0; runs at M <= 4 keep the decode kernel.
  if (sm90) {
    unsetenv("B12X_GEMM_STREAM16_F8");
    EXPECT_EQ(gemm::plan(caps).stream16_tw, 1);  // K >= 3 N
    gemm::Caps small = caps;
    small.in_features = 4096;
    small.out_features = 256 * (device_info(0).sm_count / 8);
    const gemm::Plan ps = gemm::plan(small);
    EXPECT_EQ(ps.stream16_tw, 1);
    EXPECT_EQ(ps.stream16_depth, 4);
    EXPECT_EQ(ps.stream16_split, 8);
    EXPECT_EQ(ps.stream16_min_m, 9);  // per-tensor at tw 1: the decode kernel at M = 5..8
    EXPECT_EQ(gemm::plan(caps).stream16_min_m, 4);  // session 15: from M = 4 (K >= 3 N at tw 1)
    // Session 24: block FP8 (BF16 activations) at two tiles per warp with the reduce launch
    // (6144x4096 on 132 SMs: 2x8, no cluster): plans of capacity <= 3 keep the decode kernel at
    // M = 3 (min M 4); capacity 16 takes the block kernel from M = 3.
    if (device_info(0).sm_count == 132) {
      gemm::Caps c6 = caps;
      c6.format = LinearFormat::kFp8Block;
      c6.act_dtype = DType::kBF16;
      c6.in_features = 4096;
      c6.out_features = 6144;
      const gemm::Plan p16 = gemm::plan(c6);
      EXPECT_TRUE(p16.stream16_tw == 2 && p16.stream16_cluster == 0 && p16.stream16_min_m == 3)
          << p16.describe();
      c6.max_tokens = 3;
      const gemm::Plan p3 = gemm::plan(c6);
      EXPECT_TRUE(p3.stream16_tw == 2 && p3.stream16_min_m == 4) << p3.describe();
      for (const int64_t cap : {3, 16}) {
        Case c3{LinearFormat::kFp8Block, 3, 6144, 4096, DType::kBF16, DType::kBF16, cap == 3};
        c3.max_tokens = cap;
        const int64_t b3 = gemm::lin::last_stream16_f8_launch().serial;
        run_case(c3);
        EXPECT_EQ(gemm::lin::last_stream16_f8_launch().serial > b3, cap == 16) << name(c3);
      }
    }
    for (LinearFormat f : {LinearFormat::kFp8Block, LinearFormat::kMxfp8}) {
      // (Session 28's MXFP8 M = 1 on the decode kernel, kDiag, where a capacity-1 plan has no K
      // split: off, so that the capacity-1 run below stays the block kernel's.)
      ScopedEnv emx("B12X_GEMM_DECODE_MXDIAG", "0");
      gemm::Caps cb = caps;
      cb.format = f;
      cb.act_dtype = DType::kBF16;
      const gemm::Plan pb = gemm::plan(cb);
      EXPECT_TRUE(pb.stream16_qx && pb.stream16_depth == 4 &&
                  pb.stream16_tw == (f == LinearFormat::kFp8Block ? 1 : 2))
          << gemm::format_name(f);
      const int64_t b16 = gemm::lin::last_stream16_f8_launch().serial;
      run_case({f, 16, 200, 2048, DType::kBF16, DType::kBF16, true});
      EXPECT_GT(gemm::lin::last_stream16_f8_launch().serial, b16) << gemm::format_name(f);
      EXPECT_TRUE(gemm::lin::last_stream16_f8_launch().q);
      // From M = 3 (block FP8, session 15; 2 where K >= 3 N as here, session 17) / 1 (MXFP8,
      // session 17), capacity 4; one less keeps the decode kernel. MXFP8 at M = 1 also from a
      // plan of capacity 1.
      const int64_t m0 = f == LinearFormat::kMxfp8 ? 1 : 2;
      Case c4{f, m0, 200, 2048, DType::kBF16, DType::kBF16, false};
      c4.max_tokens = 4;
      const int64_t b4 = gemm::lin::last_stream16_f8_launch().serial;
      run_case(c4);
      EXPECT_GT(gemm::lin::last_stream16_f8_launch().serial, b4) << gemm::format_name(f);
      c4.max_tokens = m0 == 1 ? 1 : 4;
      c4.M = m0 == 1 ? 1 : m0 - 1;
      const int64_t b3 = gemm::lin::last_stream16_f8_launch().serial;
      run_case(c4);
      if (m0 == 1)
        EXPECT_GT(gemm::lin::last_stream16_f8_launch().serial, b3) << gemm::format_name(f);
      else
        EXPECT_EQ(gemm::lin::last_stream16_f8_launch().serial, b3) << gemm::format_name(f);
    }
    // Default launches of per-tensor on a small N: 1 tile per warp at depth 4 from M = 9 (M = 6
    // keeps the decode kernel there); the 2-tile depth-8 plans are asserted above (14336x4096).
    {
      int64_t b0 = gemm::lin::last_stream16_f8_launch().serial;
      run_case({LinearFormat::kFp8Tensor, 16, 200, 2048, DType::kFP8E4M3, DType::kBF16, false});
      EXPECT_GT(gemm::lin::last_stream16_f8_launch().serial, b0);
      EXPECT_TRUE(gemm::lin::last_stream16_f8_launch().tw == 1 &&
                  gemm::lin::last_stream16_f8_launch().depth == 4);
      b0 = gemm::lin::last_stream16_f8_launch().serial;
      run_case({LinearFormat::kFp8Tensor, 6, 200, 2048, DType::kFP8E4M3, DType::kBF16, false});
      EXPECT_EQ(gemm::lin::last_stream16_f8_launch().serial, b0);
    }
    // A capacity-64 plan (the tiled regime's) at M = 12, and BF16 rows that are not 16-byte
    // vectors (x 8 bytes into its buffer): the plan's in-kernel quantization falls back to the
    // quantizer launch and the kernel without it.
    for (LinearFormat f : {LinearFormat::kFp8Block, LinearFormat::kMxfp8}) {
      Case c{f, 12, 200, 2048, DType::kBF16, DType::kBF16, false};
      c.max_tokens = 64;
      int64_t b0 = gemm::lin::last_stream16_f8_launch().serial;
      run_case(c);
      EXPECT_GT(gemm::lin::last_stream16_f8_launch().serial, b0) << gemm::format_name(f);
      EXPECT_TRUE(gemm::lin::last_stream16_f8_launch().q);
      // MXFP8: folded scales, quantized on all 8 warps (session 16), a warp per token at M <= 8,
      // splats by one conversion (session 25), weight scales and the first two chunks' splats
      // before the wait (session 27); block FP8: quantized after the MMAs at M <= 8 (session 20).
      EXPECT_EQ(gemm::lin::last_stream16_f8_launch().var, f == LinearFormat::kMxfp8 ? 238 : 16);
      c.max_tokens = 0;
      b0 = gemm::lin::last_stream16_f8_launch().serial;
      run_case(c, false, nullptr, [](Acts& a) { a.x_offset = 8; });
      EXPECT_GT(gemm::lin::last_stream16_f8_launch().serial, b0) << gemm::format_name(f);
      EXPECT_FALSE(gemm::lin::last_stream16_f8_launch().q) << gemm::format_name(f);
      EXPECT_EQ(gemm::lin::last_stream16_f8_launch().var, f == LinearFormat::kMxfp8 ? 2 : 0);
    }
    {
      ScopedEnv e0("B12X_GEMM_STREAM16", "0");
      EXPECT_EQ(gemm::plan(caps).stream16_depth, 0);
    }
    setenv("B12X_GEMM_STREAM16_F8", "1", 1);
  }
  // Not taken: M <= 4, B12X_GEMM_STREAM16_F8=0.
  {
    Case c{LinearFormat::kFp8Tensor, 4, 200, 1024, DType::kFP8E4M3, DType::kBF16, false};
    c.max_tokens = 16;
    const int64_t b4 = gemm::lin::last_stream16_f8_launch().serial;
    run_case(c);
    EXPECT_EQ(gemm::lin::last_stream16_f8_launch().serial, b4);
  }
  setenv("B12X_GEMM_STREAM16_F8", "0", 1);
  EXPECT_EQ(gemm::plan(caps).stream16_depth, 0);
  setenv("B12X_GEMM_STREAM16_F8", "1", 1);
}

TEST(GemmGpu, Stream16Fp8Cluster) {
  B12X_REQUIRE_GPU();
  if (device_info(0).cc_major < 9) GTEST_SKIP() << "thread-block clusters need SM90+";
  // Session 23 (B12X_GEMM_STREAM16_F8_CLUSTER=1 CLMAX=8: any forced split <= 8 in a cluster): the
  // FP8 block kernel's K split summed in a cluster of the split's CTAs over DSMEM (no partials, no
  // reduce launch), f16 MMAs, the three
  // FP8 formats (block FP8 / MXFP8 quantized in the kernel, or by the quantizer: QX=0), tw 1 / 2,
  // splits 2 / 3 / 8, M = 1..16 (B12X_GEMM_STREAM16_F8_MINM=1: one or two n8 token tiles), K tails
  // inside a chunk (1312: 41 atoms of 48; 6112: 8 CTAs, the last 23 atoms of 24), N
  // not a multiple of the CTA's rows (72 / 200), bias, FP16 outputs, capacity above M, a replayed
  // graph with new activations and an eager call after it.
  ScopedEnv e16("B12X_GEMM_STREAM16_F8", "1"), em("B12X_GEMM_DECODE_F8MMA", "1"),
      emin("B12X_GEMM_STREAM16_F8_MINM", "1"), ecl("B12X_GEMM_STREAM16_F8_CLUSTER", "1"),
      ecx("B12X_GEMM_STREAM16_F8_CLMAX", "8");
  int i = 0;
  for (LinearFormat f : {LinearFormat::kFp8Tensor, LinearFormat::kFp8Block, LinearFormat::kMxfp8})
    for (const char* sp : {"2", "3", "8"}) {
      const char* tw = (i % 2) ? "2" : "1";
      ScopedEnv et("B12X_GEMM_STREAM16_TW", tw), es("B12X_GEMM_STREAM16_SPLIT", sp),
          eq("B12X_GEMM_STREAM16_QX", (i % 3) == 2 ? "0" : "1");
      const int64_t Ms[] = {1, 5, 9, 16, 3, 12, 8, 16, 2};
      const bool block = f == LinearFormat::kFp8Block;
      Case c{f,
             Ms[i % 9],
             (i % 2) ? 72 : 200,
             sp[0] == '8' ? (block ? 6144 : 6112)
             : block      ? 1280
                          : 1312,
             f == LinearFormat::kFp8Tensor ? DType::kFP8E4M3 : DType::kBF16,
             (i % 4) == 1 ? DType::kFP16 : DType::kBF16,
             (i % 3) != 1};
      c.max_tokens = (i % 4) == 2 ? 16 : c.M;
      ++i;
      const int64_t before = gemm::lin::last_stream16_f8_launch().serial;
      run_case(c, /*graph_replay=*/(i % 3) != 0);
      const gemm::lin::Stream16F8Launch l = gemm::lin::last_stream16_f8_launch();
      const int split = f8_split(c.K, std::atoi(sp));
      EXPECT_GT(l.serial, before) << name(c) << " tw " << tw << " sp " << sp;
      EXPECT_EQ(l.split, split) << name(c);
      EXPECT_EQ(l.cluster, split > 1 ? split : 1) << name(c);
    }
  // The dependent launch before the sum (probe B12X_GEMM_STREAM_TRIG=4), a graph.
  {
    ScopedEnv es("B12X_GEMM_STREAM16_SPLIT", "4"), etr("B12X_GEMM_STREAM_TRIG", "4"),
        et("B12X_GEMM_STREAM16_TW", "1");
    Case c{LinearFormat::kFp8Tensor, 6, 72, 3584, DType::kFP8E4M3, DType::kBF16, true};
    const int64_t before = gemm::lin::last_stream16_f8_launch().serial;
    run_case(c, /*graph_replay=*/true);
    const gemm::lin::Stream16F8Launch l = gemm::lin::last_stream16_f8_launch();
    EXPECT_GT(l.serial, before) << name(c);
    EXPECT_EQ(l.cluster, 4) << name(c);
  }
  // The default rule (no knob; block FP8 / MXFP8): the one-wave split summed in a cluster where it
  // is <= 4 and all its clusters fit at once (block FP8, N = 7168, K = 1024: 56 row groups of 128
  // rows, split 2), M = 5 / 16; B12X_GEMM_STREAM16_F8_CLUSTER=0 keeps the partials + the reduce
  // launch, as per-tensor does by default.
  unsetenv("B12X_GEMM_STREAM16_F8_CLUSTER");
  for (const char* off : {"", "0"}) {
    if (off[0] != 0) setenv("B12X_GEMM_STREAM16_F8_CLUSTER", off, 1);
    for (const int64_t M : {5, 16}) {
      Case c{LinearFormat::kFp8Block, M, 7168, 1024, DType::kBF16, DType::kBF16, M == 5};
      const int64_t before = gemm::lin::last_stream16_f8_launch().serial;
      run_case(c, /*graph_replay=*/M == 16);
      const gemm::lin::Stream16F8Launch l = gemm::lin::last_stream16_f8_launch();
      EXPECT_GT(l.serial, before) << name(c);
      EXPECT_EQ(l.split, 2) << name(c);
      EXPECT_EQ(l.cluster, off[0] != 0 ? 1 : 2) << name(c) << " CLUSTER=" << off;
    }
  }
  // Session 24: BF16 rows that are not 16-byte vectors (x 8 bytes into its buffer) under the
  // default cluster plan: the quantizer launch, then the instance without the in-kernel
  // quantization as a cluster of the same split (the plan checked both instances' fit); block FP8
  // and MXFP8, one and two token tiles, bias, FP16 outputs.
  unsetenv("B12X_GEMM_STREAM16_F8_CLUSTER");
  for (LinearFormat f : {LinearFormat::kFp8Block, LinearFormat::kMxfp8})
    for (const int64_t M : {3, 13}) {
      Case c{f, M, 7168, 1024, DType::kBF16, M == 3 ? DType::kFP16 : DType::kBF16, M == 13};
      const int64_t before = gemm::lin::last_stream16_f8_launch().serial;
      run_case(c, false, nullptr, [](Acts& a) { a.x_offset = 8; });
      const gemm::lin::Stream16F8Launch l = gemm::lin::last_stream16_f8_launch();
      EXPECT_GT(l.serial, before) << name(c);
      EXPECT_FALSE(l.q) << name(c);
      EXPECT_GT(l.split, 1) << name(c);
      EXPECT_EQ(l.cluster, l.split) << name(c);
    }
  {
    unsetenv("B12X_GEMM_STREAM16_F8_CLUSTER");
    Case c{LinearFormat::kFp8Tensor, 16, 7168, 1024, DType::kFP8E4M3, DType::kBF16, false};
    run_case(c);
    EXPECT_EQ(gemm::lin::last_stream16_f8_launch().cluster, 1) << name(c);
  }
}

TEST(GemmGpu, DecodeStream16Default) {
  B12X_REQUIRE_GPU();
  // The default (session 13): the M <= 16 block kernel with 2 tiles per warp and the splats per
  // CTA for NVFP4 / MXFP4 weights on BF16 activations (W4A16 raw, W4A4 / W4A8 through the
  // pre-pass) at runs of M = 5..16, the largest K split whose grid is one wave with >= 8 vectors
  // per CTA (K = 4096: 8 vectors at N = 16 x 8 x 2 x 4 rows); not with FP16 activations or
  // B12X_GEMM_STREAM16=0.
  for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kNvfp4, LinearFormat::kMxfp4W4A16,
                         LinearFormat::kMxfp4, LinearFormat::kMxfp4W4A8}) {
    SCOPED_TRACE(gemm::format_name(f));
    gemm::Caps caps;
    caps.format = f;
    caps.max_tokens = 16;
    caps.in_features = 4096;
    caps.out_features = 1024;
    caps.act_dtype =
        f == LinearFormat::kNvfp4 || f == LinearFormat::kMxfp4 ? DType::kFP4E2M1 : DType::kBF16;
    caps.out_dtype = DType::kBF16;
    const gemm::Plan pl = gemm::plan(caps);
    EXPECT_EQ(pl.stream16_tw, 2);
    // W4A4 NVFP4 converts its activations in the kernel where the weight is small (2 MB here),
    // not at 14336x4096 (29 MB: the pre-pass); on SM90 (session 24) both W4A4 formats convert
    // them in the staged-once kernel (stream16_qa) at every shape.
    const bool sm90 = device_info(0).cc_major == 9 && device_info(0).cc_minor == 0;
    const bool qa = sm90 && (f == LinearFormat::kNvfp4 || f == LinearFormat::kMxfp4);
    EXPECT_EQ(pl.stream16_qx, f == LinearFormat::kNvfp4 && !qa);
    EXPECT_EQ(pl.stream16_qa, qa);
    if (f == LinearFormat::kNvfp4) {
      gemm::Caps big = caps;
      big.in_features = 4096;
      big.out_features = 14336;
      const gemm::Plan pb = gemm::plan(big);
      EXPECT_EQ(pb.stream16_tw, 2);
      EXPECT_FALSE(pb.stream16_qx);
    }
    EXPECT_EQ(pl.stream16_split, 8);  // 4 CTAs of 256 rows x 8 splits of 8 vectors
    EXPECT_EQ(pl.stream16_vp, 8);
    // Session 22's trigger rule (W4A16): the split's reduce lets the next call launch after its
    // wait; the block kernel triggers early where its grid fills < 80 % of the slots (32 of >= 2 x
    // SMs here; 14336x4096's 224 CTAs fill 85 % of an H200's 264); B12X_GEMM_S16_TRIG=0 turns both
    // off. (W4A16 only: round 82 measured W4A4 1-2 % slower at some points.)
    const bool w4a16 =
        f == LinearFormat::kNvfp4W4A16 || f == LinearFormat::kMxfp4W4A16 || qa;  // the rule's
    EXPECT_EQ(pl.reduce_trig & 1, w4a16 ? 1 : 0);
    EXPECT_EQ((pl.stream_trig & 4) != 0, w4a16);
    // Session 28 (kS16WarmRule): bit 2, the parameter lines read before griddep_wait, on SM90 but
    // for MXFP4 W4A16.
    EXPECT_EQ((pl.reduce_trig & 2) != 0, sm90 && f != LinearFormat::kMxfp4W4A16);
    if (f == LinearFormat::kNvfp4W4A16 && device_info(0).sm_count == 132) {
      gemm::Caps big = caps;
      big.out_features = 14336;
      const gemm::Plan pb = gemm::plan(big);
      EXPECT_EQ(pb.stream16_split, 4);
      EXPECT_EQ(pb.reduce_trig & 1, 1);
      EXPECT_EQ(pb.stream_trig & 4, 0);
    }
    {
      ScopedEnv et("B12X_GEMM_S16_TRIG", "0");
      const gemm::Plan p0 = gemm::plan(caps);
      EXPECT_EQ(p0.reduce_trig & 1, 0);
      EXPECT_EQ(p0.stream_trig & 4, 0);
    }
    // The K range staged once (session 17) except where the kernel converts NVFP4 activations.
    EXPECT_EQ(pl.stream16_once, f != LinearFormat::kNvfp4 || qa);
    // Session 24 (kS16LoSplitRule): SM90's MXFP4 runs of M <= 8 on twice the split (32 CTAs here).
    const bool lo = sm90 && f == LinearFormat::kMxfp4W4A16;
    EXPECT_EQ(pl.stream16_split_lo, lo ? 16 : 0);
    {
      ScopedEnv e0("B12X_GEMM_STREAM16", "0");
      EXPECT_EQ(gemm::plan(caps).stream16_tw, 0);
    }
    for (int64_t M : {7, 16}) {
      Case c{f, M, 1024, 4096, DType::kBF16, DType::kBF16, M == 7};
      c.max_tokens = 16;
      const int64_t before = gemm::lin::last_stream_launch().serial;
      run_case(c, /*graph_replay=*/M == 16);
      EXPECT_GT(gemm::lin::last_stream_launch().serial, before) << "M=" << M;
      EXPECT_EQ(gemm::lin::last_stream_launch().rows, 32) << "M=" << M;
      EXPECT_EQ(gemm::lin::last_stream_launch().split, lo && M <= 8 ? 16 : 8) << "M=" << M;
      // run hands the rule's triggers to the launches (the reduce gets the block kernel's params).
      EXPECT_EQ(gemm::lin::last_stream_launch().reduce_trig, w4a16) << "M=" << M;
      EXPECT_EQ(gemm::lin::last_stream_launch().trig, w4a16 && !(lo && M <= 8)) << "M=" << M;
    }
  }
  gemm::Caps caps;
  caps.format = LinearFormat::kNvfp4W4A16;
  caps.max_tokens = 8192;
  caps.in_features = 4096;
  caps.out_features = 1024;
  caps.act_dtype = DType::kBF16;
  caps.out_dtype = DType::kBF16;
  {
    // A capacity-8192 plan prepares it for runs at M <= 16; its partials hold 16 token rows, not
    // the capacity's (8 splits x 8192 rows x 1024 x 4 B would be 256 MB).
    const gemm::Plan big = gemm::plan(caps);
    EXPECT_EQ(big.stream16_split, 8);
    EXPECT_LT(big.scratch_bytes, int64_t{8} * 8192 * 1024 * 4);
    Case c{LinearFormat::kNvfp4W4A16, 12, 1024, 4096, DType::kBF16, DType::kBF16, false};
    c.max_tokens = 8192;
    const int64_t before = gemm::lin::last_stream_launch().serial;
    run_case(c);
    EXPECT_GT(gemm::lin::last_stream_launch().serial, before);
  }
  caps.max_tokens = 16;
  caps.act_dtype = DType::kFP16;
  EXPECT_EQ(gemm::plan(caps).stream16_tw, 0);
}

TEST(GemmGpu, DecodeStreamRowsDefault) {
  B12X_REQUIRE_GPU();
  // The default (session 12): the 4-row stream kernel at M = 2..4 on a grid where every CTA
  // streams at least 2 tiles over its staging and that still has ~0.9 x SMs CTAs (N = 256 * SMs,
  // and N = 32 * SMs: 2 tiles per CTA over 1 x SMs CTAs), not where that grid is too small (N = 8 *
  // SMs, K = 4096: 2 tiles in SMs / 4 CTAs); a capacity-16 plan runs it at M = 3, the M <= 16
  // block kernel at M = 7 (session 13). B12X_GEMM_STREAM_ROWS=0 turns it off.
  const int64_t sms = device_info(0).sm_count;
  const int64_t big = 256 * sms, small = 8 * sms;
  for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kNvfp4}) {
    SCOPED_TRACE(gemm::format_name(f));
    gemm::Caps caps;
    caps.format = f;
    caps.max_tokens = 4;
    caps.in_features = 1024;
    caps.out_features = big;
    caps.act_dtype = f == LinearFormat::kNvfp4 ? DType::kFP4E2M1 : DType::kBF16;
    caps.out_dtype = DType::kBF16;
    EXPECT_GT(gemm::plan(caps).stream_rows_parts, 0);
    caps.max_tokens = 16;
    EXPECT_GT(gemm::plan(caps).stream_rows_parts, 0);
    caps.out_features = 32 * sms;
    caps.in_features = 4096;
    EXPECT_GT(gemm::plan(caps).stream_rows_parts, 0);
    caps.out_features = small;
    EXPECT_EQ(gemm::plan(caps).stream_rows_parts, 0);
    caps.in_features = 1024;
    {
      ScopedEnv e0("B12X_GEMM_STREAM_ROWS", "0");
      caps.out_features = big;
      EXPECT_EQ(gemm::plan(caps).stream_rows_parts, 0);
    }
    // NVFP4 W4A4 runs the block kernel from M = 2 (session 21, round 79), NVFP4 W4A16 too (session
    // 23, round 86); B12X_GEMM_STREAM16_MINM=5 restores the 4-row kernel at M = 3.
    const bool block_from_2 =
        f == LinearFormat::kNvfp4 || (device_info(0).cc_major == 9 && device_info(0).cc_minor == 0);
    for (const char* minm : {"", "5"}) {
      if (minm[0] != '\0' && !block_from_2) continue;
      std::optional<ScopedEnv> em;
      if (minm[0] != '\0') em.emplace("B12X_GEMM_STREAM16_MINM", minm);
      for (int64_t M : {3, 7}) {
        Case c{f, M, big, 1024, DType::kBF16, DType::kBF16, M == 3};
        c.max_tokens = 16;
        const int64_t before = gemm::lin::last_stream_launch().serial;
        run_case(c);
        const bool rows4 = M == 3 && (!block_from_2 || minm[0] != '\0');
        EXPECT_EQ(gemm::lin::last_stream_launch().serial, before + 1) << "M=" << M;
        EXPECT_EQ(gemm::lin::last_stream_launch().rows, rows4 ? 4 : 32)
            << "M=" << M << " MINM=" << minm;
      }
    }
  }
}

TEST(GemmGpu, DecodeStreamShapes) {
  B12X_REQUIRE_GPU();
  // The M = 1 stream kernel (a default since session 11) on what DecodeStream leaves out (review
  // of session 11): K with a tail inside the last 256-value block (NVFP4 takes any K % 32 == 0,
  // the packing pads K to 256, the kernel masks the padded vectors), FP16 outputs, and a long K
  // whose staged BF16 row takes 88 KB of the 91 KB staging budget (K = 45056).
  ScopedEnv es("B12X_GEMM_DECODE_STREAM", "1");
  int i = 0;
  for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kNvfp4})
    for (int64_t K : {1056, 2080, 4128})
      for (DType out : {DType::kBF16, DType::kFP16}) {
        const int64_t before = gemm::lin::last_stream_launch().serial;
        run_case({f, 1, 200, K, DType::kBF16, out, (i++ % 2) == 0});
        EXPECT_EQ(gemm::lin::last_stream_launch().serial, before + 1)
            << gemm::format_name(f) << " K=" << K;
      }
  const int64_t before = gemm::lin::last_stream_launch().serial;
  run_case({LinearFormat::kNvfp4W4A16, 1, 200, 45056, DType::kBF16, DType::kBF16, true});
  EXPECT_EQ(gemm::lin::last_stream_launch().serial, before + 1);
}

TEST(GemmGpu, TiledSplitK) {
  B12X_REQUIRE_GPU();
  // The mma.sync tiled kernel with K split over grid.z (B12X_GEMM_TILED_SPLITK, the plan's
  // split; by default fp32 partials + the reduce kernel, B12X_GEMM_TILED_SPLITK_MODE=cluster: a
  // cluster reduced through DSMEM). Every format; token tails (M off 128, two token tiles), row
  // tails, splits that leave the last CTA without a stage (20 stages over 8 and 16) and FP8 128-K
  // groups cut between CTAs (odd stages per CTA); bias, FP16 activations and outputs, graph replay.
  ScopedEnv ew("B12X_GEMM_WGMMA", "0");
  const bool clusters = device_info(0).cc_major >= 9;
  {
    ScopedEnv es("B12X_GEMM_TILED_SPLITK", "auto");
    const gemm::Plan pl = bf16_plan(LinearFormat::kNvfp4W4A16, 64, 264, 4096);
    EXPECT_GT(pl.tiled_split, 1);
    EXPECT_TRUE(pl.tiled_split_reduce);  // 2 tiles: a split of 16
    for (const auto& c : all_format_cases(64, 264, 4096, true, DType::kBF16, gemm::Regime::kTiled))
      run_case(c);
    run_case({LinearFormat::kQ8_0, 40, 128, 2048, DType::kBF16, DType::kBF16, true}, true);
    run_case({LinearFormat::kMxfp4, 100, 256, 1024, DType::kBF16, DType::kFP16, true}, true);
  }
  for (const char* sp : {"8", "4"}) {
    ScopedEnv es("B12X_GEMM_TILED_SPLITK", sp), em("B12X_GEMM_TILED_SPLITK_MODE", "cluster");
    const gemm::Plan pl = bf16_plan(LinearFormat::kFp8Block, 200, 136, 1280);
    EXPECT_EQ(pl.tiled_split, std::atoi(sp));
    EXPECT_EQ(pl.tiled_split_reduce, !clusters);
    for (const auto& c :
         all_format_cases(200, 136, 1280, sp[0] == '8', DType::kFP16, gemm::Regime::kTiled))
      run_case(c);
    for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4W4A16,
                           LinearFormat::kQ8_0, LinearFormat::kIq2Xs})
      run_case({f, 70, 256, 2048, DType::kFP16, DType::kFP16, true, false, gemm::Regime::kTiled});
    run_case({LinearFormat::kFp8Block, 77, 256, 2048, DType::kBF16, DType::kBF16, true}, true);
  }
  {
    ScopedEnv es("B12X_GEMM_TILED_SPLITK", "3"), em("B12X_GEMM_TILED_SPLITK_MODE", "reduce");
    const gemm::Plan pl = bf16_plan(LinearFormat::kFp8Block, 77, 200, 1280);
    EXPECT_EQ(pl.tiled_split, 3);
    EXPECT_TRUE(pl.tiled_split_reduce);
    for (const auto& c : all_format_cases(77, 200, 1280, true, DType::kBF16, gemm::Regime::kTiled))
      run_case(c);
    for (const auto& c : all_format_cases(130, 72, 1280, false, DType::kFP16, gemm::Regime::kTiled))
      run_case(c);
    ScopedEnv es2("B12X_GEMM_TILED_SPLITK", "16");
    run_case({LinearFormat::kNvfp4, 50, 264, 1280, DType::kBF16, DType::kBF16, true}, true);
  }
  {
    // A forced tiled regime at M <= 32 makes no decode choices (it once decided a decode split of
    // 16 and sized the one partials region for it, while the tiled split of up to 32 wrote there):
    // the region holds the tiled split (N = 256, K = 8192, M = 32).
    gemm::Caps caps;
    caps.format = LinearFormat::kNvfp4W4A16;
    caps.max_tokens = 32;
    caps.in_features = 8192;
    caps.out_features = 256;
    caps.act_dtype = DType::kBF16;
    caps.out_dtype = DType::kBF16;
    caps.regime = gemm::Regime::kTiled;
    const gemm::Plan pl = gemm::plan(caps);
    const int64_t per_split = int64_t{32} * 256 * 4;
    EXPECT_EQ(pl.split_k, 1);
    EXPECT_EQ(pl.decode_warp_split, 1);
    EXPECT_FALSE(pl.decode_half || pl.decode_pipe);
    if (pl.tiled_split_reduce)
      EXPECT_GE(pl.scratch_bytes, pl.off_partial + pl.tiled_split * per_split);
    if (pl.split_k > 1 && !pl.split_cluster)
      EXPECT_GE(pl.scratch_bytes, pl.off_partial + pl.split_k * per_split);
    run_case({LinearFormat::kNvfp4W4A16, 32, 256, 8192, DType::kBF16, DType::kBF16, true, false,
              gemm::Regime::kTiled});
  }
}

TEST(GemmGpu, TiledTok64) {
  B12X_REQUIRE_GPU();
  // The 64-token variant of the mma.sync tiled kernel (B12X_GEMM_TILED_TOK=64, the default up to
  // 64 tokens; 1 x 8 warps of 64 x 32 in every mode, 256 rows per CTA): without the plan's split
  // (B12X_GEMM_TILED_SPLITK=0: run's cluster split of at most 2), with a cluster split of 4 and
  // with partials (3); token tails (M off 64, three token tiles), row tails, bias, FP16, graph
  // replay.
  ScopedEnv ew("B12X_GEMM_WGMMA", "0"), et("B12X_GEMM_TILED_TOK", "64");
  EXPECT_EQ(bf16_plan(LinearFormat::kQ8_0, 64, 264, 1024).tiled_tok, 64);
  {
    ScopedEnv es("B12X_GEMM_TILED_SPLITK", "0");
    EXPECT_EQ(bf16_plan(LinearFormat::kQ8_0, 64, 264, 1024).tiled_split, 0);
    for (const auto& c : all_format_cases(64, 264, 1280, true, DType::kBF16, gemm::Regime::kTiled))
      run_case(c);
    for (const auto& c : all_format_cases(150, 136, 768, false, DType::kFP16, gemm::Regime::kTiled))
      run_case(c);
    for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4W4A16,
                           LinearFormat::kQ8_0, LinearFormat::kIq2Xxs})
      run_case({f, 40, 256, 1024, DType::kFP16, DType::kFP16, true, false, gemm::Regime::kTiled});
  }
  {
    ScopedEnv es("B12X_GEMM_TILED_SPLITK", "4"), em("B12X_GEMM_TILED_SPLITK_MODE", "cluster");
    for (const auto& c : all_format_cases(100, 264, 2048, true, DType::kBF16, gemm::Regime::kTiled))
      run_case(c);
    run_case({LinearFormat::kMxfp8, 64, 256, 2048, DType::kBF16, DType::kBF16, true}, true);
  }
  {
    ScopedEnv es("B12X_GEMM_TILED_SPLITK", "3"), em("B12X_GEMM_TILED_SPLITK_MODE", "reduce");
    for (const auto& c : all_format_cases(33, 200, 1280, false, DType::kFP16, gemm::Regime::kTiled))
      run_case(c);
    run_case({LinearFormat::kFp8Block, 64, 256, 2048, DType::kBF16, DType::kBF16, true}, true);
  }
}

/// Block FP8, 4096 x 4096, up to 2048 tokens (the SM90 wgmma plan checks).
gemm::Caps fp8_block_caps_4096() {
  gemm::Caps caps;
  caps.format = LinearFormat::kFp8Block;
  caps.max_tokens = 2048;
  caps.in_features = 4096;
  caps.out_features = 4096;
  return caps;
}

/// The cases of TiledWgmmaFp8BlockBulk for variant v.
void bulk_cases(const char* v) {
  const auto& d = device_info(0);
  ScopedEnv e("B12X_GEMM_WGMMA", "1"), ev("B12X_GEMM_WGMMA_VAR", v);
  const int want = std::atoi(v);
  if (d.cc_major == 9 && d.cc_minor == 0) {
    auto var = [](int64_t K, DType act) {
      gemm::Caps caps;
      caps.format = LinearFormat::kFp8Block;
      caps.act_dtype = act;
      caps.max_tokens = 512;
      caps.in_features = K;
      caps.out_features = 256;
      return gemm::plan(caps).tiled_wgmma_var;
    };
    EXPECT_EQ(var(2048, DType::kBF16), want);
    EXPECT_EQ(var(640, DType::kBF16), 8);  // K % 256 != 0
    EXPECT_EQ(var(2048, DType::kFP8E4M3), 8);
  }
  run_case({LinearFormat::kFp8Block, 300, 136, 2048, DType::kBF16, DType::kBF16, true});
  run_case({LinearFormat::kFp8Block, 130, 264, 1024, DType::kFP16, DType::kFP16, true});
  run_case({LinearFormat::kFp8Block, 40, 136, 512, DType::kBF16, DType::kBF16, false});
  run_case({LinearFormat::kFp8Block, 2048, 256, 512, DType::kBF16, DType::kBF16, false});
  run_case({LinearFormat::kFp8Block, 300, 136, 640, DType::kBF16, DType::kBF16, false});
  Case cq{LinearFormat::kFp8Block, 130, 264, 1024};
  cq.caller_quant = true;
  run_case(cq);
  run_case({LinearFormat::kFp8Block, 300, 136, 1024, DType::kBF16, DType::kBF16, false}, true);
}

/// Block FP8's bulk-fed variants: the FP8 1x128 quantizer writes the wgmma kernel's stage images
/// and the producer fills the ring with bulk copies (33, the default since session 18; session
/// 9's 14 with the consumer proxy fence and six stages was removed in session 21). The plan takes
/// them only with activations quantized inside and K % 256 == 0 (else variant 8), without
/// overrides at M >= 128; bulk_cases (TiledWgmmaFp8BlockNoFence) runs token / row tails (weight
/// tiles past N copy the last tile), 1-16 token tiles, FP16 / BF16, bias, a replayed graph; K =
/// 640 and caller-quantized activations run variant 8.
TEST(GemmGpu, TiledWgmmaFp8BlockBulk) {
  B12X_REQUIRE_GPU();
  if (device_info(0).cc_major == 9 && device_info(0).cc_minor == 0) {
    gemm::Caps caps = fp8_block_caps_4096();
    const gemm::Plan pl = gemm::plan(caps);
    EXPECT_EQ(pl.tiled_wgmma, 128) << pl.describe();
    EXPECT_EQ(pl.tiled_wgmma_var, 33) << pl.describe();  // session 18: no fence, four stages
    caps.act_dtype = DType::kFP8E4M3;                    // caller-quantized: variant 8
    EXPECT_EQ(gemm::plan(caps).tiled_wgmma_var, 8);
    caps.format = LinearFormat::kFp8Tensor;  // per-tensor FP8: variant 16 (session 9)
    EXPECT_EQ(gemm::plan(caps).tiled_wgmma_var, 16);
  }
}

/// Block FP8 variant 33 (the default since session 18: session 9's 14 without the MMA warps' proxy
/// fence after each full barrier, four stages; 14 was removed in session 21).
TEST(GemmGpu, TiledWgmmaFp8BlockNoFence) {
  B12X_REQUIRE_GPU();
  bulk_cases("33");
}

/// Formats the SM90 wgmma tiled kernel runs (NVFP4 W4A4 / W4A16, MXFP4 W4A4 / W4A8 / W4A16 with
/// BF16 MMAs, MXFP8, per-tensor and block FP8; K must be a multiple of 128 for block FP8); the
/// others keep the mma.sync tiled kernel under the same override.
std::vector<Case> wgmma_cases(int64_t M, int64_t N, int64_t K, bool bias, DType out) {
  std::vector<Case> v;
  for (LinearFormat f : {LinearFormat::kNvfp4, LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4,
                         LinearFormat::kMxfp4W4A8, LinearFormat::kMxfp4W4A16, LinearFormat::kMxfp8,
                         LinearFormat::kFp8Tensor, LinearFormat::kFp8Block})
    v.push_back({f, M, N, K, DType::kBF16, out, bias});
  v.push_back({LinearFormat::kNvfp4W4A16, M, N, K, DType::kFP16, out, bias});  // FP16 MMAs
  Case cq{LinearFormat::kFp8Block, M, N, K, DType::kBF16, out, bias};
  cq.caller_quant = true;  // e4m3 + fp32 [M, K/128] from the caller
  v.push_back(cq);
  return v;
}

TEST(GemmGpu, TiledWgmmaTokenTiles) {
  B12X_REQUIRE_GPU();
  // Forced (a no-op off compute capability 9.0, where the override is ignored): token tails (M off
  // 128), row tails (N off 128 and off 8), K off the 64-K stage and the packed slice, 1 / 3 / 24
  // token tiles, both output dtypes.
  {
    ScopedEnv e("B12X_GEMM_WGMMA", "1");
    for (const auto& c : wgmma_cases(64, 200, 1280, true, DType::kBF16)) run_case(c);
    for (const auto& c : wgmma_cases(300, 136, 768, false, DType::kFP16)) run_case(c);
    for (const auto& c : wgmma_cases(3000, 264, 512, true, DType::kBF16)) run_case(c);
  }
  // The automatic choice at M >= 128 (every tiled format, wgmma where it applies).
  for (const auto& c : all_format_cases(1000, 384, 1024, true, DType::kBF16)) run_case(c);
  // The BF16-operand formats' default 256-token tiles, warp-specialized (chosen where they give
  // ~0.9 x SMs CTAs: 32 x 4 here); FP8 there in raster bands by default.
  run_case({LinearFormat::kMxfp8, 1000, 4096, 512, DType::kBF16, DType::kBF16, true});
  run_case({LinearFormat::kNvfp4W4A16, 1000, 4096, 512, DType::kFP16, DType::kBF16, false});
  run_case({LinearFormat::kMxfp4W4A8, 1000, 4096, 512, DType::kBF16, DType::kFP16, true});
  run_case({LinearFormat::kFp8Block, 1000, 4096, 512, DType::kBF16, DType::kBF16, true});
  // A long K at the default interval (32 promotions of 128 K).
  for (const auto& c : wgmma_cases(256, 256, 4096, false, DType::kBF16))
    if (c.fmt == LinearFormat::kFp8Tensor || c.fmt == LinearFormat::kFp8Block) run_case(c);
  // Warp-specialized FP8 (8, block FP8: the combined scales built by the producer warpgroup, the
  // fallback of 33; 16, per-tensor's default since session 9: the weight runs bulk-copied; each
  // runs the other format's default; session 21 removed the probes 0-3, 5-7, 9-12 and 14):
  // token / row / K tails, 1 and 24 token tiles, a long K refilling every slot many times.
  for (const char* var : {"8", "16"}) {
    ScopedEnv e("B12X_GEMM_WGMMA", "1"), ev("B12X_GEMM_WGMMA_VAR", var);
    for (const auto& c : wgmma_cases(300, 136, 768, false, DType::kFP16))
      if (c.fmt == LinearFormat::kFp8Tensor || c.fmt == LinearFormat::kFp8Block) run_case(c);
    for (const auto& c : wgmma_cases(3000, 264, 512, true, DType::kBF16))
      if (c.fmt == LinearFormat::kFp8Tensor || c.fmt == LinearFormat::kFp8Block) run_case(c);
    for (const auto& c : wgmma_cases(256, 256, 4096, false, DType::kBF16))
      if (c.fmt == LinearFormat::kFp8Tensor || c.fmt == LinearFormat::kFp8Block) run_case(c);
  }
  // Variant 8 with caller-quantized activations (the x_scale row pitch of the caller's tensor).
  {
    ScopedEnv e("B12X_GEMM_WGMMA", "1"), ev("B12X_GEMM_WGMMA_VAR", "8");
    for (int64_t M : {130, 300}) {
      Case c{LinearFormat::kFp8Block, M, 264, 1024};
      c.caller_quant = true;
      run_case(c);
    }
  }
  // The activation passes before the defaults of round 22 (B12X_QUANT_FP8G128=0: the generic FP8
  // 1x128 quantizer; B12X_QUANT_MXFP8_FUSED=0: MXFP8 quantized, then dequantized to BF16 by
  // act_dequant_kernel, MXFP8 in the k32 fragment order, MXFP4 W4A8 in plain order) on the wgmma
  // kernel and the mma.sync tiled kernel.
  {
    ScopedEnv e("B12X_GEMM_WGMMA", "1"), eq("B12X_QUANT_FP8G128", "0"),
        em("B12X_QUANT_MXFP8_FUSED", "0");
    for (const auto& c : wgmma_cases(300, 136, 768, true, DType::kBF16))
      if (c.fmt == LinearFormat::kFp8Block || c.fmt == LinearFormat::kMxfp8 ||
          c.fmt == LinearFormat::kMxfp4W4A8)
        run_case(c);
    for (LinearFormat f : {LinearFormat::kFp8Block, LinearFormat::kMxfp8})
      run_case({f, 1000, 4096, 512, DType::kBF16, DType::kBF16, true});
    ScopedEnv ew("B12X_GEMM_WGMMA", "0");
    for (LinearFormat f : {LinearFormat::kMxfp8, LinearFormat::kMxfp4W4A8})
      run_case({f, 200, 136, 768, DType::kFP16, DType::kBF16, true});
  }
  // The BF16-operand formats warp-specialized (variant 3, 256 tokens): token / row / K tails,
  // several token tiles.
  {
    ScopedEnv e("B12X_GEMM_WGMMA", "1"), et("B12X_GEMM_WGMMA_TOK", "256"),
        ev("B12X_GEMM_WGMMA_VAR", "3");
    for (const auto& c : wgmma_cases(450, 136, 768, true, DType::kBF16))
      if (c.fmt != LinearFormat::kFp8Tensor && c.fmt != LinearFormat::kFp8Block) run_case(c);
    for (const auto& c : wgmma_cases(300, 136, 768, false, DType::kFP16))
      if (c.fmt != LinearFormat::kFp8Tensor && c.fmt != LinearFormat::kFp8Block) run_case(c);
  }
  // Raster bands (B12X_GEMM_WGMMA_RASTER: 1 = sized to L2, one band here; 5 = bands of five token
  // tiles, the last of two, token tails in it), every format, with the FP8 defaults and 8.
  for (const char* r : {"1", "5"}) {
    ScopedEnv e("B12X_GEMM_WGMMA", "1"), er("B12X_GEMM_WGMMA_RASTER", r);
    for (const auto& c : wgmma_cases(1500, 264, 256, true, DType::kBF16)) run_case(c);
    ScopedEnv ev("B12X_GEMM_WGMMA_VAR", "8");
    for (const auto& c : wgmma_cases(1500, 264, 256, true, DType::kBF16))
      if (c.fmt == LinearFormat::kFp8Tensor || c.fmt == LinearFormat::kFp8Block) run_case(c);
  }
}

/// The GGML formats on the SM90 group wgmma kernel (opt-in: B12X_GEMM_WGMMA_GROUP=1, compute
/// capability 9.0 only): the plan must pick it there.
void run_wgmma_group_case(const Case& c) {
  int wgmma = 0, var = -1;
  run_case(c, false, &wgmma, nullptr, &var);
  const auto& d = device_info(0);
  if (d.cc_major == 9 && d.cc_minor == 0) {
    EXPECT_GT(wgmma, 0) << name(c) << ": not on wgmma";
    // A variant selected by the knob must be the one that ran (the plan falls back to the default
    // without a word where the knob names no kernel: a removed variant would test the default).
    if (const char* v = std::getenv("B12X_GEMM_WGMMA_GROUP_VAR"); v != nullptr)
      EXPECT_EQ(var, std::atoi(v)) << name(c) << ": B12X_GEMM_WGMMA_GROUP_VAR=" << v;
  }
}

TEST(GemmGpu, TiledWgmmaGgmlFormats) {
  B12X_REQUIRE_GPU();
  // Token tails (M off 128: 1, 2, 3, 16 token tiles), row tails (N off 128 and off 8), K off the
  // 64-K stage (Q8_0) and over several IQ2 super-blocks, BF16 and FP16 activations and outputs.
  // 128- and 256-token CTAs (the plan picks 256 where they fill the GPU, not at these N).
  ScopedEnv eg("B12X_GEMM_WGMMA_GROUP", "1");
  for (const char* tok : {"128", "256"}) {
    ScopedEnv et("B12X_GEMM_WGMMA_GROUP_TOK", tok);
    for (LinearFormat f : {LinearFormat::kQ8_0, LinearFormat::kIq2Xxs, LinearFormat::kIq2Xs}) {
      const bool q8 = f == LinearFormat::kQ8_0;
      run_wgmma_group_case({f, 128, 136, 768, DType::kBF16, DType::kBF16, true});
      run_wgmma_group_case({f, 200, 200, q8 ? 1312 : 1280, DType::kBF16, DType::kFP16, false});
      run_wgmma_group_case({f, 2000, 264, 1024, DType::kBF16, DType::kBF16, true});
      run_wgmma_group_case({f, 300, 72, 512, DType::kFP16, DType::kFP16, true});
    }
  }
  // The defaults (Q8_0 16, IQ2 52 since session 18: BF16 behind the FP16 pre-pass) with a long K
  // refilling every slot many times, odd pair / quad boundaries of the 5-slot Q8_0 ring.
  {
    ScopedEnv et("B12X_GEMM_WGMMA_GROUP_TOK", "256");
    for (LinearFormat f : {LinearFormat::kQ8_0, LinearFormat::kIq2Xxs, LinearFormat::kIq2Xs})
      run_wgmma_group_case({f, 520, 136, 4096, DType::kBF16, DType::kBF16, false});
  }
  // Raster bands (B12X_GEMM_WGMMA_RASTER=1: one band of every token tile here; 3: bands of 3 and
  // a last one of 2 over 8 token tiles at 128 tokens).
  for (const char* raster : {"1", "3"}) {
    ScopedEnv er("B12X_GEMM_WGMMA_RASTER", raster);
    for (LinearFormat f : {LinearFormat::kQ8_0, LinearFormat::kIq2Xs}) {
      run_wgmma_group_case({f, 2000, 264, 1024, DType::kBF16, DType::kBF16, true});
      ScopedEnv et("B12X_GEMM_WGMMA_GROUP_TOK", "128");
      run_wgmma_group_case({f, 1000, 264, 512, DType::kBF16, DType::kFP16, true});
      run_wgmma_group_case({f, 1000, 300, 512, DType::kFP16, DType::kBF16, false});
    }
  }
  // Forced below 128 tokens (one partial token tile).
  ScopedEnv e("B12X_GEMM_WGMMA", "1");
  for (LinearFormat f : {LinearFormat::kQ8_0, LinearFormat::kIq2Xxs, LinearFormat::kIq2Xs})
    run_wgmma_group_case({f, 40, 136, 512, DType::kBF16, DType::kBF16, true});
}

/// The group-kernel variants (B12X_GEMM_WGMMA_GROUP_VAR): 16 (256 tokens, chained quads, slots
/// released one stage late; the Q8_0 default), 52 / 53 (IQ2, 256 / 128 tokens: the sub-scales
/// folded into FP16 weights, the accumulators rescaled per super-block; BF16 activations through
/// the FP16 pre-pass; the IQ2 defaults since session 18), 21 (128 tokens on 13's schedule; the
/// Q8_0 default there). A long K refilling every slot many times, token / row / K tails, FP16
/// outputs.
TEST(GemmGpu, TiledWgmmaGroupProbes) {
  B12X_REQUIRE_GPU();
  // The defaults at 256 tokens (M = 2048, N = 4096 on an H200): Q8_0 16, IQ2 52 (BF16 behind the
  // FP16 pre-pass; session 18).
  const auto& d = device_info(0);
  if (d.cc_major == 9 && d.cc_minor == 0 && d.sm_count >= 114) {
    auto plan_of = [](LinearFormat f, DType act, int64_t tokens = 2048, int64_t n = 4096) {
      gemm::Caps caps;
      caps.format = f;
      caps.act_dtype = act;
      caps.max_tokens = tokens;
      caps.in_features = 4096;
      caps.out_features = n;
      return gemm::plan(caps);
    };
    EXPECT_EQ(plan_of(LinearFormat::kQ8_0, DType::kBF16).tiled_wgmma_var, 16);
    const gemm::Plan xxs = plan_of(LinearFormat::kIq2Xxs, DType::kBF16);
    EXPECT_EQ(xxs.tiled_wgmma_var, 52);
    EXPECT_TRUE(xxs.tiled_wgmma_f16x);
    EXPECT_EQ(plan_of(LinearFormat::kIq2Xxs, DType::kFP16).tiled_wgmma_var, 52);
    const gemm::Plan xs = plan_of(LinearFormat::kIq2Xs, DType::kBF16);
    EXPECT_EQ(xs.tiled_wgmma_var, 52);
    EXPECT_TRUE(xs.tiled_wgmma_f16x);
    EXPECT_FALSE(plan_of(LinearFormat::kIq2Xs, DType::kFP16).tiled_wgmma_f16x);
    // IQ2 from M = 256 on 256 tokens (52; session 18, round 70), below on 128 (53 behind the
    // pre-pass on BF16; M = 128, N = 14336); Q8_0 at M = 512 on 128 tokens (21).
    for (LinearFormat f : {LinearFormat::kIq2Xxs, LinearFormat::kIq2Xs}) {
      const gemm::Plan p512 = plan_of(f, DType::kBF16, 512);
      EXPECT_EQ(p512.tiled_wgmma, 256) << p512.describe();
      EXPECT_EQ(p512.tiled_wgmma_var, 52) << p512.describe();
      const gemm::Plan p128 = plan_of(f, DType::kBF16, 128, 14336);
      EXPECT_EQ(p128.tiled_wgmma, 128) << p128.describe();
      EXPECT_EQ(p128.tiled_wgmma_var, 53) << p128.describe();
      EXPECT_TRUE(p128.tiled_wgmma_f16x) << p128.describe();
    }
    EXPECT_EQ(plan_of(LinearFormat::kQ8_0, DType::kBF16, 512).tiled_wgmma_var, 21);
  }
  ScopedEnv eg("B12X_GEMM_WGMMA_GROUP", "1"), et("B12X_GEMM_WGMMA_GROUP_TOK", "256");
  for (const char* var : {"16", "21", "52", "53"}) {
    ScopedEnv ev("B12X_GEMM_WGMMA_GROUP_VAR", var);
    const std::string v = var;
    const bool fold = v == "52" || v == "53";
    for (LinearFormat f : {LinearFormat::kQ8_0, LinearFormat::kIq2Xxs, LinearFormat::kIq2Xs}) {
      const bool q8 = f == LinearFormat::kQ8_0;
      // 16 / 21 are Q8_0's defaults, 52 / 53 IQ2's (the others' instances removed in session 21).
      if (q8 != (v == "16" || v == "21")) continue;
      // 21 / 53: 128-token CTAs.
      ScopedEnv et2("B12X_GEMM_WGMMA_GROUP_TOK", v == "21" || v == "53" ? "128" : "256");
      // The folded variants on BF16 activations run behind the FP16 pre-pass.
      run_wgmma_group_case({f, 300, 136, 2048, DType::kBF16, DType::kBF16, false});
      if (fold) run_wgmma_group_case({f, 300, 136, 2048, DType::kFP16, DType::kBF16, false});
      run_wgmma_group_case({f, 200, 200, q8 ? 1312 : 1280, DType::kBF16, DType::kFP16, true});
      run_wgmma_group_case({f, 300, 72, 512, DType::kFP16, DType::kFP16, true});
    }
  }
  // The FP16 pre-pass's one-read row kernels (1 / 2 / 4 / 8 vectors of 8 per thread: K <= 2048,
  // 4096, 8192, 16384) and its two-pass warp kernel (K > 16384), on IQ2_XS's default (52).
  ScopedEnv ev("B12X_GEMM_WGMMA_GROUP_VAR", "52"), et3("B12X_GEMM_WGMMA_GROUP_TOK", "256");
  for (int64_t K : {7168, 14336, 16640})
    run_wgmma_group_case({LinearFormat::kIq2Xs, 130, 72, K, DType::kBF16, DType::kBF16, true});
  // Its PDL trigger at the CTAs' start (the default since session 16) and at their end
  // (B12X_GGML_ACT_F16_EARLY=0): one-read and two-pass kernels, replayed in a graph; the plan's
  // flag (its signature's ' f16xe') with the knob off / on / unset.
  const bool sm90 = d.cc_major == 9 && d.cc_minor == 0;
  auto early_plan = [] {
    gemm::Caps caps;
    caps.format = LinearFormat::kIq2Xs;
    caps.max_tokens = 300;
    caps.in_features = 2048;
    caps.out_features = 136;
    return gemm::plan(caps);
  };
  for (const char* early : {"0", "1"}) {
    ScopedEnv ee("B12X_GGML_ACT_F16_EARLY", early);
    if (sm90) {
      const gemm::Plan pl = early_plan();
      EXPECT_TRUE(pl.tiled_wgmma_f16x);
      EXPECT_EQ(pl.tiled_wgmma_f16x_early, early[0] == '1') << pl.describe();
    }
    for (int64_t K : {2048, 16640})
      run_case({LinearFormat::kIq2Xs, 300, 136, K, DType::kBF16, DType::kBF16, true},
               /*graph_replay=*/true);
    run_wgmma_group_case(
        {LinearFormat::kIq2Xxs, 300, 136, 2048, DType::kBF16, DType::kFP16, false});
  }
  if (sm90) EXPECT_TRUE(early_plan().tiled_wgmma_f16x_early);  // the default (env unset here)
}

/// Session 18's 52 / 53 (256 / 128 tokens; the folded kernel's accumulators rescaled per 256-K
/// super-block instead of promoted partials; the IQ2 defaults): super-block scales d of 0 (the
/// accumulators keep the previous unit; the first, a middle and the last super-block of a row),
/// of either sign and spread over 2^-14..2^2 (the rescale factors d_prev / d_new far from 1),
/// IQ2_XXS and IQ2_XS, BF16 (behind the FP16 pre-pass) and FP16 activations, K = 2048 (8
/// super-blocks) with token and row tails.
TEST(GemmGpu, TiledWgmmaGroupRescale) {
  B12X_REQUIRE_GPU();
  ScopedEnv eg("B12X_GEMM_WGMMA_GROUP", "1");
  g_weight_tweak = [](LinearFormat f, HostWeight& h) {
    const int bb = f == LinearFormat::kIq2Xs ? 74 : 66;
    const int64_t nb = h.row_bytes / bb, rows = static_cast<int64_t>(h.w.size()) / h.row_bytes;
    std::uniform_int_distribution<int> ex(-14, 2);
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t b = 0; b < nb; ++b) {
        const bool zero = (n % 5 == 1 && b == 0) || (n % 7 == 2 && b == nb / 2) ||
                          (n % 3 == 0 && b == nb - 1) || n % 11 == 4;
        const float v = std::ldexp((test::rng()() & 1) ? -1.5f : 1.25f, ex(test::rng()));
        const uint16_t d = zero ? 0 : fmt::float_to_fp16_bits(v);
        h.w[n * h.row_bytes + b * bb] = d & 0xFF;
        h.w[n * h.row_bytes + b * bb + 1] = d >> 8;
      }
  };
  for (const char* var : {"52", "53"}) {
    ScopedEnv et("B12X_GEMM_WGMMA_GROUP_TOK", var[1] == '2' ? "256" : "128"),
        ev("B12X_GEMM_WGMMA_GROUP_VAR", var);
    for (LinearFormat f : {LinearFormat::kIq2Xxs, LinearFormat::kIq2Xs}) {
      run_wgmma_group_case({f, 300, 136, 2048, DType::kBF16, DType::kBF16, true});
      run_wgmma_group_case({f, 260, 72, 2048, DType::kFP16, DType::kBF16, false});
    }
  }
  g_weight_tweak = nullptr;
}

/// The FP16 pre-pass's per-token scale on extreme BF16 rows (IQ2_XS's default 52 behind it): a
/// zero row and a row of BF16 subnormals (scale 1; the subnormals flush to FP16 zero, far below
/// the tolerance), a row spanning 2^-40..1 (elements below 2^-32 of its largest round on FP16's
/// grid), then every row scaled by 2^100 (past FP16's range: scales 2^-87..).
TEST(GemmGpu, TiledWgmmaGroupF16xRows) {
  B12X_REQUIRE_GPU();
  ScopedEnv eg("B12X_GEMM_WGMMA_GROUP", "1"), et("B12X_GEMM_WGMMA_GROUP_TOK", "256");
  const Case c{LinearFormat::kIq2Xs, 130, 72, 1024, DType::kBF16, DType::kBF16, true};
  auto scale_rows = [](Acts& a, int64_t m0, int64_t m1, auto&& f) {
    uint16_t* x = reinterpret_cast<uint16_t*>(a.x.data());
    for (int64_t m = m0; m < m1; ++m)
      for (int64_t k = 0; k < a.x_cols; ++k) {
        uint16_t& h = x[m * a.x_cols + k];
        h = to_half_bits(from_half_bits(h, DType::kBF16) * f(k), DType::kBF16);
      }
  };
  int wgmma = 0;
  run_case(c, false, &wgmma, [&](Acts& a) {
    scale_rows(a, 0, 1, [](int64_t) { return 0.f; });
    scale_rows(a, 1, 2, [](int64_t) { return std::ldexp(1.f, -130); });
    scale_rows(a, 2, 3, [](int64_t k) { return std::ldexp(1.f, -static_cast<int>(k % 41)); });
  });
  run_case(c, false, &wgmma,
           [&](Acts& a) { scale_rows(a, 0, c.M, [](int64_t) { return std::ldexp(1.f, 100); }); });
  const auto& d = device_info(0);
  if (d.cc_major == 9 && d.cc_minor == 0) EXPECT_EQ(wgmma, 256);
}

TEST(GemmGpu, ThousandsOfTokens) {
  B12X_REQUIRE_GPU();
  run_case({LinearFormat::kNvfp4W4A16, 2500, 96, 512, DType::kBF16, DType::kBF16, true});
  run_case({LinearFormat::kNvfp4, 1500, 128, 512, DType::kBF16, DType::kBF16, false});
  run_case({LinearFormat::kQ8_0, 2048, 64, 256, DType::kFP16, DType::kFP16, true});
  run_case({LinearFormat::kMxfp8, 1024, 48, 256, DType::kBF16, DType::kBF16, true});
}

TEST(GemmGpu, LargeWeightShapes) {
  B12X_REQUIRE_GPU();
  run_case({LinearFormat::kNvfp4W4A16, 4, 4096, 4096});
  run_case({LinearFormat::kIq2Xs, 1, 2048, 7168});
  run_case({LinearFormat::kFp8Tensor, 16, 1024, 4096, DType::kBF16, DType::kFP16});
}

TEST(GemmGpu, GraphReplayWithNewActivations) {
  B12X_REQUIRE_GPU();
  for (LinearFormat f : {LinearFormat::kNvfp4, LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp8,
                         LinearFormat::kIq2Xxs, LinearFormat::kFp8Block, LinearFormat::kMxfp4W4A8})
    run_case({f, 4, 256, 1024, DType::kBF16, DType::kBF16, true}, /*graph_replay=*/true);
  run_case({LinearFormat::kQ8_0, 40, 128, 512, DType::kBF16, DType::kBF16, true}, true);
  run_case({LinearFormat::kMxfp4, 200, 256, 512, DType::kBF16, DType::kBF16, true}, true);
}

TEST(GemmGpu, RefreshKeepsPointersAndChangesResult) {
  B12X_REQUIRE_GPU();
  const int64_t N = 64, K = 512;
  HostWeight h1 = make_weight(LinearFormat::kNvfp4W4A16, N, K);
  HostWeight h2 = make_weight(LinearFormat::kNvfp4W4A16, N, K);
  auto pw = gemm::PackedWeight::pack(h1.src(LinearFormat::kNvfp4W4A16), 0, nullptr);
  const uint8_t* before = pw->values_device();
  pw->refresh(h2.src(LinearFormat::kNvfp4W4A16), nullptr);
  EXPECT_EQ(before, pw->values_device());
  std::vector<uint16_t> xh = make_x(2, K, DType::kBF16);
  DeviceBuffer<uint16_t> dx(xh.size()), dout(2 * N);
  dx.upload(xh);
  dout.poison();
  gemm::linear(*pw, TensorRef::contiguous(dx.ptr, DType::kBF16, {2, K}, 0), TensorRef{},
               TensorRef::contiguous(dout.ptr, DType::kBF16, {2, N}, 0), TensorRef{}, TensorRef{},
               nullptr);
  B12X_TEST_CUDA(cudaDeviceSynchronize());
  std::vector<double> ref(2 * N);
  reference::linear(h2.src(LinearFormat::kNvfp4W4A16),
                    TensorRef::contiguous(xh.data(), DType::kBF16, {2, K}), TensorRef{}, 1.0,
                    TensorRef{}, TensorRef::contiguous(ref.data(), DType::kFP64, {2, N}));
  const Check ck = check_out(dout.download(), DType::kBF16, ref);
  EXPECT_EQ(ck.bad, 0) << ck.cmp.str();
}

// Through the C ABI (status + message), also exercising pack/plan/run there.
TEST(GemmGpu, BindRejectsBadTensors) {
  B12X_REQUIRE_GPU();
  HostWeight h = make_weight(LinearFormat::kNvfp4W4A16, 32, 256);
  b12x_tensor wt = c_desc(h.w.data(), B12X_DTYPE_UINT8, {32, 128}, B12X_HOST_DEVICE);
  b12x_tensor st = c_desc(h.scale_bytes.data(), B12X_DTYPE_FP8_E4M3, {32, 16}, B12X_HOST_DEVICE);
  b12x_linear_weight_source src{};
  src.format = B12X_LINEAR_NVFP4_W4A16;
  src.weight = &wt;
  src.weight_scale = &st;
  src.global_scale = 0.0625f;  // as HostWeight::src
  b12x_linear_weight w = nullptr;
  ASSERT_EQ(b12x_linear_weight_pack(&src, 0, nullptr, &w), B12X_OK) << b12x_last_error();
  b12x_linear_caps caps{};
  caps.format = B12X_LINEAR_NVFP4_W4A16;
  caps.max_tokens = 4;
  caps.in_features = 256;
  caps.out_features = 32;
  caps.act_dtype = B12X_DTYPE_BF16;
  caps.out_dtype = B12X_DTYPE_BF16;
  b12x_linear_plan plan = nullptr;
  ASSERT_EQ(b12x_linear_plan_create(&caps, &plan), B12X_OK) << b12x_last_error();
  int64_t sb = 0;
  ASSERT_EQ(b12x_linear_plan_scratch_bytes(plan, &sb), B12X_OK);
  DeviceBuffer<uint8_t> scratch(std::max<int64_t>(sb, 256));
  DeviceBuffer<uint16_t> x(8 * 256), out(8 * 32);
  b12x_tensor sct = c_desc(scratch.ptr, B12X_DTYPE_UINT8, {std::max<int64_t>(sb, 256)}, 0);
  auto expect_bad = [&](b12x_tensor xt, b12x_tensor ot, const char* needle) {
    EXPECT_EQ(b12x_linear_run(plan, &sct, &xt, nullptr, w, &ot, nullptr, nullptr, nullptr),
              B12X_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(b12x_last_error()).find(needle), std::string::npos) << b12x_last_error();
  };
  expect_bad(c_desc(x.ptr, B12X_DTYPE_BF16, {8, 256}, 0),
             c_desc(out.ptr, B12X_DTYPE_BF16, {8, 32}, 0), "max_tokens");
  expect_bad(c_desc(x.ptr, B12X_DTYPE_BF16, {2, 128}, 0),
             c_desc(out.ptr, B12X_DTYPE_BF16, {2, 32}, 0), "K=128");
  expect_bad(c_desc(x.ptr, B12X_DTYPE_FP32, {2, 256}, 0),
             c_desc(out.ptr, B12X_DTYPE_BF16, {2, 32}, 0), "dtype");
  expect_bad(c_desc(x.ptr, B12X_DTYPE_BF16, {2, 256}, 0),
             c_desc(out.ptr, B12X_DTYPE_FP16, {2, 32}, 0), "out");
  expect_bad(c_desc(x.ptr, B12X_DTYPE_BF16, {2, 256}, B12X_HOST_DEVICE),
             c_desc(out.ptr, B12X_DTYPE_BF16, {2, 32}, 0), "host");
  // A valid call through the same ABI.
  std::vector<uint16_t> xh = make_x(2, 256, DType::kBF16);
  x.upload([&] {
    std::vector<uint16_t> v(8 * 256, 0);
    std::copy(xh.begin(), xh.end(), v.begin());
    return v;
  }());
  out.poison();
  b12x_tensor xt = c_desc(x.ptr, B12X_DTYPE_BF16, {2, 256}, 0);
  b12x_tensor ot = c_desc(out.ptr, B12X_DTYPE_BF16, {2, 32}, 0);
  ASSERT_EQ(b12x_linear_run(plan, &sct, &xt, nullptr, w, &ot, nullptr, nullptr, nullptr), B12X_OK)
      << b12x_last_error();
  B12X_TEST_CUDA(cudaDeviceSynchronize());
  std::vector<double> ref(2 * 32);
  reference::linear(h.src(LinearFormat::kNvfp4W4A16),
                    TensorRef::contiguous(xh.data(), DType::kBF16, {2, 256}), TensorRef{}, 1.0,
                    TensorRef{}, TensorRef::contiguous(ref.data(), DType::kFP64, {2, 32}));
  auto o = out.download();
  o.resize(64);
  const Check ck = check_out(o, DType::kBF16, ref);
  EXPECT_EQ(ck.bad, 0) << ck.cmp.str();
  b12x_linear_plan_destroy(plan);
  b12x_linear_weight_destroy(w);
}

// ---------------------------------------------------------------- sanitizer subset ---------
TEST(GemmGpuSanitize, SmallShapesAllFormats) {
  B12X_REQUIRE_GPU();
  for (const auto& c : all_format_cases(3, 24, 256, true, DType::kBF16)) run_case(c);
  for (const auto& c : all_format_cases(18, 40, 512, false, DType::kFP16)) run_case(c);
  for (const auto& c : all_format_cases(5, 40, 256, true, DType::kBF16, gemm::Regime::kTiled))
    run_case(c);
  {
    ScopedEnv e("B12X_GEMM_WGMMA", "1");  // the SM90 wgmma tiled kernel (9.0 only)
    for (const auto& c : wgmma_cases(40, 136, 384, true, DType::kBF16)) run_case(c);
    // K = 2048 refills every slot of the mbarrier pipelines several times (FP8: the default
    // variant; the BF16-operand formats: 256-token CTAs, their default on wide grids).
    for (LinearFormat f : {LinearFormat::kFp8Tensor, LinearFormat::kFp8Block})
      run_case({f, 136, 136, 2048, DType::kBF16, DType::kBF16, true});
    // FP8's fallback 8 (block; per-tensor runs 16), raster bands of one token tile.
    for (const char* var : {"8"}) {
      ScopedEnv ev("B12X_GEMM_WGMMA_VAR", var), er("B12X_GEMM_WGMMA_RASTER", "1");
      for (LinearFormat f : {LinearFormat::kFp8Tensor, LinearFormat::kFp8Block})
        run_case({f, 136, 136, 2048, DType::kBF16, DType::kBF16, true});
    }
    for (const char* var : {"3"}) {  // 3: warp-specialized (the default at 256 tokens)
      ScopedEnv et("B12X_GEMM_WGMMA_TOK", "256"), ev("B12X_GEMM_WGMMA_VAR", var);
      for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp8})
        run_case({f, 300, 136, 2048, DType::kBF16, DType::kBF16, true});
    }
    ScopedEnv eg("B12X_GEMM_WGMMA_GROUP", "1");  // and its GGML kernel
    for (LinearFormat f : {LinearFormat::kQ8_0, LinearFormat::kIq2Xxs, LinearFormat::kIq2Xs})
      run_case({f, 40, 136, 512, DType::kBF16, DType::kBF16, true});
  }
}

/// Block FP8 probes for compute-sanitizer (separate, so a round can check just them): variant 8
/// (the producer stores the combined scales and arrives on the full barrier a second time) and
/// the four-lanes-per-group activation quantizer, K = 2048 (every slot refilled several times),
/// two token tiles; the one-pass MXFP8 pre-pass in front of MXFP8 and MXFP4 W4A8.
TEST(GemmGpuSanitize, Fp8BlockProbes) {
  B12X_REQUIRE_GPU();
  ScopedEnv e("B12X_GEMM_WGMMA", "1");
  {
    ScopedEnv ev("B12X_GEMM_WGMMA_VAR", "8");
    run_case({LinearFormat::kFp8Block, 136, 136, 2048, DType::kBF16, DType::kBF16, true});
    ScopedEnv eq("B12X_QUANT_FP8G128", "1");
    run_case({LinearFormat::kFp8Block, 200, 136, 2048, DType::kBF16, DType::kBF16, true});
  }
  ScopedEnv eq("B12X_QUANT_FP8G128", "1"), em("B12X_QUANT_MXFP8_FUSED", "1");
  run_case({LinearFormat::kFp8Block, 136, 136, 2048, DType::kBF16, DType::kBF16, true});
  for (LinearFormat f : {LinearFormat::kMxfp8, LinearFormat::kMxfp4W4A8})
    run_case({f, 136, 136, 512, DType::kBF16, DType::kBF16, true});
}

/// Block FP8 variant 33 (the default; 14 was removed in session 21) for compute-sanitizer:
/// the bulk-copied ring (the tiled quantizer's stage images, the weight runs, transaction counts
/// on the full barriers), K = 2048 (every slot refilled), a token tail (the quantizer's zero rows)
/// and weight tiles past N; per-tensor FP8 on 16.
TEST(GemmGpuSanitize, Fp8BlockBulk) {
  B12X_REQUIRE_GPU();
  ScopedEnv e("B12X_GEMM_WGMMA", "1");
  run_case({LinearFormat::kFp8Block, 200, 136, 2048, DType::kBF16, DType::kBF16, true});
  ScopedEnv ev("B12X_GEMM_WGMMA_VAR", "16");
  run_case({LinearFormat::kFp8Tensor, 200, 136, 2048, DType::kBF16, DType::kBF16, true});
}

TEST(GemmGpuSanitize, TiledSplitK) {
  B12X_REQUIRE_GPU();
  // The tiled kernel's K split: a cluster of 4 (rank 0 adds the others' accumulators over DSMEM)
  // and 3 CTAs writing fp32 partials for the reduce kernel; two token tiles, row tails, bias; the
  // 64-token variant with the default split (partials).
  ScopedEnv ew("B12X_GEMM_WGMMA", "0");
  for (const char* mode : {"cluster", "reduce"}) {
    ScopedEnv es("B12X_GEMM_TILED_SPLITK", mode[0] == 'c' ? "4" : "3"),
        em("B12X_GEMM_TILED_SPLITK_MODE", mode);
    for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kQ8_0, LinearFormat::kFp8Tensor,
                           LinearFormat::kMxfp8})
      run_case({f, 136, 136, 1024, DType::kBF16, DType::kBF16, true, false, gemm::Regime::kTiled});
  }
  ScopedEnv et("B12X_GEMM_TILED_TOK", "64");
  for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kQ8_0, LinearFormat::kFp8Block,
                         LinearFormat::kMxfp8})
    run_case({f, 72, 136, 1024, DType::kBF16, DType::kBF16, true, false, gemm::Regime::kTiled});
}

/// The GGML group wgmma kernel's defaults at 256 tokens (Q8_0 16, IQ2 52) for compute-sanitizer:
/// the producer's cp.async arrivals on the full mbarriers, the MMA threads' arrivals on the empty
/// ones (slots released in pairs), the epilogue's named barrier; K = 2048 refills every slot, two
/// token tiles with a tail.
TEST(GemmGpuSanitize, TiledWgmmaGroupWs) {
  B12X_REQUIRE_GPU();
  ScopedEnv eg("B12X_GEMM_WGMMA_GROUP", "1"), et("B12X_GEMM_WGMMA_GROUP_TOK", "256");
  for (LinearFormat f : {LinearFormat::kQ8_0, LinearFormat::kIq2Xxs, LinearFormat::kIq2Xs})
    run_wgmma_group_case({f, 300, 136, 2048, DType::kBF16, DType::kBF16, true});
}

TEST(GemmGpuSanitize, DecodePipelinedStaging) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  ScopedEnv eg0("B12X_GGML_GEMV", "0");  // the decode kernel for the GGML formats too
  // Two staging buffers (B12X_GEMM_DECODE_PIPE=1) over several chunks per CTA: 2 (FP4, 16 rows),
  // 3 (Q8_0, 3 rows) and 3 (FP8 with three ring stages, two token tiles), N = 40 with a tail CTA.
  ScopedEnv ep("B12X_GEMM_DECODE_PIPE", "1"), es("B12X_GEMM_SPLIT", "1");
  run_case({LinearFormat::kNvfp4W4A16, 16, 40, 1024, DType::kBF16, DType::kBF16, true});
  run_case({LinearFormat::kQ8_0, 3, 40, 8192, DType::kBF16, DType::kBF16, false});
  run_case({LinearFormat::kFp8Tensor, 24, 40, 3072, DType::kBF16, DType::kBF16, true});
  ScopedEnv ew("B12X_GEMM_DECODE_PIPE_WS", "4");  // with 4 warps per tile (a cluster of 8)
  for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kQ8_0, LinearFormat::kFp8Tensor})
    run_case({f, 4, 40, 20480, DType::kBF16, DType::kBF16, true});
}

TEST(GemmGpuSanitize, DecodeDeepRing) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  ScopedEnv es0("B12X_GEMM_DECODE_STREAM", "0");  // the decode kernel at M = 1, not the stream one
  // B12X_GEMM_DECODE_DEEP=1: the deeper ring at M = 1 (4 warps per tile), K = 1280 (warps
  // without a slice) and 8960 (refills), N = 40 (a partial last tile).
  ScopedEnv ed("B12X_GEMM_DECODE_DEEP", "1");
  for (int64_t K : {1280, 8960})
    for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4W4A16})
      run_case({f, 1, 40, K, DType::kBF16, DType::kBF16, true});
}

TEST(GemmGpuSanitize, DecodeWarpSplit8) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  ScopedEnv es0("B12X_GEMM_DECODE_STREAM", "0");  // the decode kernel at M = 1, not the stream one
  // B12X_GEMM_DECODE_WSPLIT=8: 8 warps per tile at M = 1, K = 1280 (warps without a slice) and
  // 4096 over a cluster split (B12X_GEMM_DECODE_WS_CTAS), N = 40.
  ScopedEnv ew("B12X_GEMM_DECODE_WSPLIT", "8");
  for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4W4A16})
    run_case({f, 1, 40, 1280, DType::kBF16, DType::kBF16, true});
  ScopedEnv ec("B12X_GEMM_DECODE_WS_CTAS", "4");
  run_case({LinearFormat::kNvfp4W4A16, 1, 40, 4096, DType::kBF16, DType::kBF16, false});
}

TEST(GemmGpuSanitize, DecodeSegmentStaging) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  ScopedEnv es0("B12X_GEMM_DECODE_STREAM", "0");  // the decode kernel at M = 1, not the stream one
  ScopedEnv eg0("B12X_GGML_GEMV", "0");           // the decode kernel for the GGML formats too
  // B12X_GEMM_DECODE_SEGSTAGE=1: segment-walk staging copies at M = 1 (4 warps per tile), 3 (two
  // buffers, several chunks, K tail) and 16 (the slice halves), N = 40.
  ScopedEnv eg("B12X_GEMM_DECODE_SEGSTAGE", "1"), es("B12X_GEMM_SPLIT", "1");
  for (int64_t M : {1, 3, 16})
    for (LinearFormat f :
         {LinearFormat::kNvfp4W4A16, LinearFormat::kQ8_0, LinearFormat::kFp8Tensor})
      run_case({f, M, 40, 2624, DType::kBF16, DType::kBF16, M != 3});
}

TEST(GemmGpuSanitize, DecodePipeBudget) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  // B12X_GEMM_DECODE_PIPE_KB=128: chunks of 2 slices in the halves at M = 16 (K = 2624: 5.1
  // slices, a short last chunk and a K tail), plain and lean, N = 40.
  ScopedEnv ek("B12X_GEMM_DECODE_PIPE_KB", "128"), eh("B12X_GEMM_DECODE_HALF", "1"),
      es("B12X_GEMM_SPLIT", "1");
  run_case({LinearFormat::kNvfp4W4A16, 16, 40, 2624, DType::kBF16, DType::kBF16, true});
  ScopedEnv el("B12X_GEMM_DECODE_LEAN", "1");
  run_case({LinearFormat::kMxfp4W4A16, 16, 40, 2624, DType::kBF16, DType::kBF16, false});
}

TEST(GemmGpuSanitize, DecodeLean) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  ScopedEnv es0("B12X_GEMM_DECODE_STREAM", "0");  // the decode kernel at M = 1, not the stream one
  // B12X_GEMM_DECODE_LEAN=1: M = 1 with 4 and 8 warps per tile (K = 1280: warps without a slice)
  // and the pipelined halves at M = 16 (K = 1280: 3 chunks, a short last one; a cluster of 4 at
  // K = 4096), N = 40.
  ScopedEnv el("B12X_GEMM_DECODE_LEAN", "1");
  for (const char* ws : {"4", "8"}) {
    ScopedEnv ew("B12X_GEMM_DECODE_WSPLIT", ws);
    run_case({LinearFormat::kNvfp4W4A16, 1, 40, 1280, DType::kBF16, DType::kBF16, true});
  }
  ScopedEnv eh("B12X_GEMM_DECODE_HALF", "1");
  for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4W4A16}) {
    {
      ScopedEnv es("B12X_GEMM_SPLIT", "1");
      run_case({f, 16, 40, 1280, DType::kBF16, DType::kBF16, true});
    }
    ScopedEnv es("B12X_GEMM_SPLIT", "4");
    run_case({f, 16, 40, 4096, DType::kBF16, DType::kBF16, false});
  }
}

TEST(GemmGpuSanitize, DecodeStream) {
  B12X_REQUIRE_GPU();
  // The M = 1 stream kernel (B12X_GEMM_DECODE_STREAM=1, NVFP4 weights): 2 and 8 K parts per tile
  // at K = 1280 (masked vectors past the tile, a K tail) with N = 40 (a partial group), registers
  // for 3 CTAs per SM, and a persistent grid of one CTA per SM walking several groups
  // (N = 4160).
  ScopedEnv es("B12X_GEMM_DECODE_STREAM", "1");
  for (const char* parts : {"2", "8"}) {
    ScopedEnv ep("B12X_GEMM_STREAM_PARTS", parts);
    run_case({LinearFormat::kNvfp4W4A16, 1, 40, 1280, DType::kBF16, DType::kBF16, true});
    run_case({LinearFormat::kNvfp4, 1, 40, 1280, DType::kBF16, DType::kBF16, false});
  }
  {
    ScopedEnv eo("B12X_GEMM_STREAM_OCC", "3");
    run_case({LinearFormat::kNvfp4W4A16, 1, 40, 4096, DType::kBF16, DType::kBF16, false});
  }
  ScopedEnv ec("B12X_GEMM_STREAM_CTAS", "1"), ep("B12X_GEMM_STREAM_PARTS", "8");
  run_case({LinearFormat::kNvfp4W4A16, 1, 4160, 1024, DType::kBF16, DType::kBF16, true});
}

TEST(GemmGpuSanitize, DecodeStreamRows) {
  B12X_REQUIRE_GPU();
  // The stream kernel with 4 token rows (session 12): a K split of 3 through partials with a K
  // range past K (K = 1280), 2 and 8 parts, a partial group (N = 40), M = 2..4.
  ScopedEnv er("B12X_GEMM_STREAM_ROWS", "1"), es("B12X_GEMM_STREAM_SPLIT", "3");
  for (const char* parts : {"2", "8"}) {
    ScopedEnv ep("B12X_GEMM_STREAM_PARTS", parts);
    run_case({LinearFormat::kNvfp4W4A16, 3, 40, 1280, DType::kBF16, DType::kBF16, true});
    run_case({LinearFormat::kNvfp4W4A16, 2, 40, 1280, DType::kBF16, DType::kBF16, false});
    run_case({LinearFormat::kNvfp4, 4, 40, 1280, DType::kBF16, DType::kBF16, false});
  }
}

TEST(GemmGpuSanitize, DecodeStream16) {
  B12X_REQUIRE_GPU();
  // The M = 5..16 block kernel (session 13): K split 3 with a K range past K (K = 1312), 2
  // tiles per warp over a partial CTA (N = 40), M = 5 / 16, NVFP4 W4A16 and W4A4 (also with its
  // activations converted in the kernel), MXFP4 W4A16.
  ScopedEnv e16("B12X_GEMM_STREAM16", "1"), es("B12X_GEMM_STREAM16_SPLIT", "3");
  ScopedEnv eqa0("B12X_GEMM_S16_QA", "0");  // Stream16Qa sanitizes SM90's default for W4A4
  run_case({LinearFormat::kMxfp4W4A16, 16, 40, 1312, DType::kBF16, DType::kBF16, true});
  {
    ScopedEnv eq("B12X_GEMM_STREAM16_QX", "1");
    run_case({LinearFormat::kNvfp4, 16, 40, 1312, DType::kBF16, DType::kBF16, true});
  }
  // The chunked and the staged-once kernels (2 tiles per warp).
  for (const char* once : {"0", "1"}) {
    ScopedEnv eo("B12X_GEMM_STREAM16_ONCE", once);
    run_case({LinearFormat::kNvfp4W4A16, 16, 40, 1312, DType::kBF16, DType::kBF16, true});
    ScopedEnv eq0("B12X_GEMM_STREAM16_QX", "0");  // W4A4 through the pre-pass
    run_case({LinearFormat::kNvfp4, 5, 40, 1312, DType::kBF16, DType::kBF16, false});
  }
}

TEST(GemmGpuSanitize, DecodeStream16Fp8) {
  B12X_REQUIRE_GPU();
  // The FP8 block kernel (session 14): K split 3 with a K range past K (K = 1312: 41 atoms of 48),
  // 1 / 2 tiles per warp over a partial CTA (N = 40), M = 5 / 16, per-tensor (depth 8 at tw 2),
  // block FP8 / MXFP8 with the in-kernel quantization.
  ScopedEnv e16("B12X_GEMM_STREAM16_F8", "1"), es("B12X_GEMM_STREAM16_SPLIT", "3");
  for (const char* tw : {"1", "2"}) {
    ScopedEnv et("B12X_GEMM_STREAM16_TW", tw);
    run_case({LinearFormat::kFp8Tensor, tw[0] == '1' ? 5 : 16, 40, 1312, DType::kFP8E4M3,
              DType::kBF16, true});
    run_case({LinearFormat::kFp8Block, 16, 40, 1280, DType::kBF16, DType::kBF16, false});
    run_case(
        {LinearFormat::kMxfp8, tw[0] == '1' ? 16 : 5, 40, 1312, DType::kBF16, DType::kBF16, true});
  }
}

TEST(GemmGpuSanitize, Stream16Fp8Cluster) {
  B12X_REQUIRE_GPU();
  if (device_info(0).cc_major < 9) GTEST_SKIP() << "thread-block clusters need SM90+";
  // Session 23: the FP8 block kernel's split of 3 summed in a cluster (the partial tiles read over
  // DSMEM, the exit barrier), per-tensor at M = 16, block FP8 at M = 5, N = 40, K tails.
  ScopedEnv e16("B12X_GEMM_STREAM16_F8", "1"), es("B12X_GEMM_STREAM16_SPLIT", "3"),
      ecl("B12X_GEMM_STREAM16_F8_CLUSTER", "1"), et("B12X_GEMM_STREAM16_TW", "1");
  run_case({LinearFormat::kFp8Tensor, 16, 40, 1312, DType::kFP8E4M3, DType::kBF16, true});
  run_case({LinearFormat::kFp8Block, 5, 40, 1280, DType::kBF16, DType::kBF16, false});
  EXPECT_EQ(gemm::lin::last_stream16_f8_launch().cluster, 3);
}

TEST(GemmGpuSanitize, Stream16Cluster) {
  B12X_REQUIRE_GPU();
  if (device_info(0).cc_major < 9) GTEST_SKIP() << "thread-block clusters need SM90+";
  // Session 23: the FP4 block kernel's split summed in a cluster (the partial tile written over
  // the staged activations after the CTA barrier, read over DSMEM, the exit barrier): NVFP4 W4A16
  // M = 16 split 3 (K = 2848: the last range 13 of 16 vectors), MXFP4 W4A16 M = 5 split 2 (K =
  // 1312); N = 40 / 72.
  ScopedEnv e16("B12X_GEMM_STREAM16", "1"), em("B12X_GEMM_STREAM16_MINM", "2"),
      ecl("B12X_GEMM_S16_CLUSTER", "8");
  {
    ScopedEnv es("B12X_GEMM_STREAM16_SPLIT", "3");
    run_case({LinearFormat::kNvfp4W4A16, 16, 40, 2848, DType::kBF16, DType::kBF16, true});
    EXPECT_EQ(gemm::lin::last_stream_launch().cluster, 3);
  }
  ScopedEnv es("B12X_GEMM_STREAM16_SPLIT", "2");
  run_case({LinearFormat::kMxfp4W4A16, 5, 72, 1312, DType::kBF16, DType::kBF16, true});
  EXPECT_EQ(gemm::lin::last_stream_launch().cluster, 2);
}

TEST(GemmGpu, DecodeStream16LoSplit) {
  B12X_REQUIRE_GPU();
  // Session 24 (Plan::stream16_split_lo; the default for MXFP4 W4A16 on SM90, forced here by
  // B12X_GEMM_S16_LOSPLIT=1 for the others): runs of M <= 8 on twice
  // the plan's split where its grid fills under half the CTA slots (N = 1024, K = 4096: 4 CTAs x
  // split 8 -> 16 of 4 vectors), runs of M >= 9 on the plan's; capacity 16 (the partials hold
  // both), MXFP4 W4A16 / W4A4 and NVFP4 W4A4 (SM90: converted in the kernel), bias, FP16, graphs.
  ScopedEnv elo("B12X_GEMM_S16_LOSPLIT", "1");
  int i = 0;
  for (const LinearFormat f :
       {LinearFormat::kMxfp4W4A16, LinearFormat::kMxfp4, LinearFormat::kNvfp4})
    for (const int64_t M : {2, 8, 9}) {
      Case c{f,           M, 1000, 4096, DType::kBF16, (i % 3) == 1 ? DType::kFP16 : DType::kBF16,
             (i % 2) == 0};
      c.max_tokens = 16;
      ++i;
      const int64_t before = gemm::lin::last_stream_launch().serial;
      run_case(c, /*graph_replay=*/(i % 2) == 1);
      const gemm::lin::StreamLaunch l = gemm::lin::last_stream_launch();
      EXPECT_GT(l.serial, before) << gemm::format_name(f) << " M " << M;
      EXPECT_TRUE(l.once) << gemm::format_name(f) << " M " << M;
      EXPECT_EQ(l.split, M <= 8 ? 16 : 8) << gemm::format_name(f) << " M " << M;
    }
}

TEST(GemmGpuSanitize, Stream16Qa) {
  B12X_REQUIRE_GPU();
  // Session 24 probe: W4A4's FP4 activations converted in the staged-once kernel's staging
  // (B12X_GEMM_S16_QA=1; registers -> shared memory, then the CTA barrier): NVFP4 W4A4 M = 16
  // split 3 (K = 2848: the last range 13 of 16 vectors) summed in a cluster where SM90+, MXFP4
  // W4A4 M = 5 split 2 (K = 1312) through the partials; N = 40 / 72.
  ScopedEnv e16("B12X_GEMM_STREAM16", "1"), em("B12X_GEMM_STREAM16_MINM", "2"),
      eqa("B12X_GEMM_S16_QA", "1");
  {
    ScopedEnv es("B12X_GEMM_STREAM16_SPLIT", "3"),
        ecl("B12X_GEMM_S16_CLUSTER", device_info(0).cc_major >= 9 ? "8" : "0");
    run_case({LinearFormat::kNvfp4, 16, 40, 2848, DType::kBF16, DType::kBF16, true});
    EXPECT_TRUE(gemm::lin::last_stream_launch().qa);
  }
  ScopedEnv es("B12X_GEMM_STREAM16_SPLIT", "2");
  run_case({LinearFormat::kMxfp4, 5, 72, 1312, DType::kBF16, DType::kBF16, true});
  EXPECT_TRUE(gemm::lin::last_stream_launch().qa);
}

TEST(GemmGpuSanitize, DecodeFp8SmallM) {
  B12X_REQUIRE_GPU();
  // Session 17's FP8 small-M decode grid forced on a small shape (the knobs the defaults use on
  // larger ones): 4 warps per tile at M = 2 / 3 with the 4-slice ring, the plain-load staging and
  // the early trigger; N = 40 (a partial last tile, a CTA of one tile), K tails inside a slice
  // (K = 1312: 6 slices, the 4th warp without one); per-tensor and block FP8 (BF16 rows quantized
  // while staged); the decode kernel, not the block kernel.
  ScopedEnv ew("B12X_GEMM_DECODE_WS_M", "3"), ed("B12X_GEMM_DECODE_DEEP", "1"),
      es("B12X_GEMM_DECODE_SYNCSTAGE", "1"), et("B12X_GEMM_STREAM_TRIG", "8"),
      e16("B12X_GEMM_STREAM16_F8", "0"), ex("B12X_GEMM_DECODE_XSHARE", "0");
  run_case({LinearFormat::kFp8Tensor, 2, 40, 1312, DType::kFP8E4M3, DType::kBF16, true});
  run_case({LinearFormat::kFp8Tensor, 3, 40, 1312, DType::kFP8E4M3, DType::kFP16, false});
  run_case({LinearFormat::kFp8Block, 2, 40, 1280, DType::kBF16, DType::kBF16, true});
  const gemm::lin::DecodeLaunch l = gemm::lin::last_decode_launch();
  EXPECT_TRUE(l.ws == 4 && l.deep == 1 && !l.pipe);
}

TEST(GemmGpuSanitize, DecodeFp8Xshare) {
  B12X_REQUIRE_GPU();
  // The shared staging (kXsh, session 25): clusters of 4 and 2 CTAs multicasting their shares of
  // the staged e4m3 rows; N = 40 (a grid padded to whole clusters), K tails inside a slice.
  if (!(device_info(0).cc_major == 9 && device_info(0).cc_minor == 0))
    GTEST_SKIP() << "the shared staging is SM90's (multicast bulk copies)";
  for (const char* xs : {"4", "2"}) {
    ScopedEnv ex("B12X_GEMM_DECODE_XSHARE", xs);
    run_case({LinearFormat::kFp8Tensor, 3, 40, 1312, DType::kFP8E4M3, DType::kBF16, true});
    EXPECT_EQ(gemm::lin::last_decode_launch().xshare, std::atoi(xs));
  }
  // Two token tiles on the 2-slice ring (session 27, deep -1): M = 16, S = 2.
  ScopedEnv ex("B12X_GEMM_DECODE_XSHARE", "2"), esh("B12X_GEMM_DECODE_XSHARE_SHALLOW", "2");
  run_case({LinearFormat::kFp8Tensor, 16, 40, 1312, DType::kFP8E4M3, DType::kBF16, true});
  const gemm::lin::DecodeLaunch l = gemm::lin::last_decode_launch();
  EXPECT_TRUE(l.xshare == 2 && l.nt == 2 && l.deep == -1) << l.xshare << " " << l.deep;
}

TEST(GemmGpuSanitize, DecodeHalvesReduce) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  // The session-10 defaults at M = 9..32: the halves with K split over 3..4 CTAs through
  // partials (2048x7168: split 4 on the H200, 4 slices per CTA) and, for NVFP4, the 68 KB
  // pipelined staging (2 chunks of 2 slices per CTA).
  run_case({LinearFormat::kNvfp4W4A16, 16, 2048, 7168, DType::kBF16, DType::kBF16, true});
  run_case({LinearFormat::kMxfp4W4A16, 9, 2048, 7168, DType::kBF16, DType::kBF16, false});
}

TEST(GemmGpuSanitize, DecodeSliceHalvesFp8) {
  B12X_REQUIRE_GPU();
  // B12X_GEMM_DECODE_HALF=1 with per-tensor FP8 weights: one chunk of 5 slices (K = 1280,
  // split 1), a cluster of 4 (K = 4096), N = 40.
  ScopedEnv eh("B12X_GEMM_DECODE_HALF", "1");
  {
    ScopedEnv es("B12X_GEMM_SPLIT", "1");
    run_case({LinearFormat::kFp8Tensor, 16, 40, 1280, DType::kBF16, DType::kBF16, true});
  }
  ScopedEnv es("B12X_GEMM_SPLIT", "4");
  run_case({LinearFormat::kFp8Tensor, 9, 40, 4096, DType::kBF16, DType::kBF16, false});
}

TEST(GemmGpuSanitize, DecodeSliceHalves) {
  B12X_REQUIRE_GPU();
  // The decode kernel at M = 5..16 (not the session-13 block kernel, the default there).
  ScopedEnv e16off("B12X_GEMM_STREAM16", "0");
  ScopedEnv es0("B12X_GEMM_DECODE_STREAM", "0");  // the decode kernel at M = 1, not the stream one
  // B12X_GEMM_DECODE_HALF=1 (8 warps, two per tile on slice halves): one and two staging buffers
  // over several chunks (K = 1280: 2.5 slices), a cluster of 4 (K = 4096), N = 40 (a tail CTA);
  // one and two token tiles.
  ScopedEnv eh("B12X_GEMM_DECODE_HALF", "1");
  for (const char* pipe : {"0", "1"}) {
    ScopedEnv ep("B12X_GEMM_DECODE_PIPE", pipe);
    for (LinearFormat f : {LinearFormat::kNvfp4W4A16, LinearFormat::kMxfp4W4A16}) {
      {
        ScopedEnv es("B12X_GEMM_SPLIT", "1");
        run_case({f, 16, 40, 1280, DType::kBF16, DType::kBF16, true});
      }
      ScopedEnv es("B12X_GEMM_SPLIT", "4");
      run_case({f, 12, 40, 4096, DType::kBF16, DType::kBF16, false});
      run_case({f, 3, 40, 4096, DType::kBF16, DType::kBF16, true});
    }
  }
}

// ---------------------------------------------------------------- GGML GEMV (M <= 16) -------
constexpr LinearFormat kGgmlFormats[] = {LinearFormat::kQ8_0, LinearFormat::kIq2Xxs,
                                         LinearFormat::kIq2Xs};

/// Cases of the GGML GEMV: every token count of one / two token tiles, N on and off the 16-row
/// tile and the 8-tile CTA (256, 72, 40), K at and off the batch (IQ2: 4 / 9 blocks of 256; Q8_0:
/// 32 / 33 atoms, a partial batch of 4), bias on every other case, BF16 and FP16 activations.
std::vector<Case> ggml_gemv_cases() {
  std::vector<Case> v;
  int i = 0;
  for (LinearFormat f : kGgmlFormats)
    for (int64_t M : {1, 2, 4, 8, 16})
      for (int64_t N : {256, 72, 40}) {
        const int64_t K = f == LinearFormat::kQ8_0 ? (M % 2 ? 1056 : 1024) : (M % 2 ? 2304 : 1024);
        const DType a = (i % 3) == 2 ? DType::kFP16 : DType::kBF16;
        v.push_back({f, M, N, K, a, a, (i++ % 2) == 0});
      }
  return v;
}

TEST(GemmGpu, GgmlGemvForced) {
  B12X_REQUIRE_GPU();
  // B12X_GGML_GEMV=1: the GEMV at M <= 16 with the plan's grid (warps per tile, K split).
  ScopedEnv e("B12X_GGML_GEMV", "1");
  for (LinearFormat f : kGgmlFormats) {
    EXPECT_GT(bf16_plan(f, 1, 4096, 4096).ggml_gemv, 0);
    EXPECT_GT(bf16_plan(f, 16, 4096, 4096).ggml_gemv, 0);
    EXPECT_EQ(bf16_plan(f, 17, 4096, 4096).ggml_gemv, 0);
  }
  for (const auto& c : ggml_gemv_cases()) run_case(c);
}

TEST(GemmGpu, GgmlGemvGrids) {
  B12X_REQUIRE_GPU();
  // Every warps-per-tile count (8 / kw tiles per CTA: idle warps past the last tile) and K splits
  // over CTAs (fp32 partials + the reduce kernel), including splits with empty K ranges (K =
  // 256: one IQ2 batch over 3 CTAs).
  // The IQ2 one-tile kernels uncapped (B12X_GGML_GEMV_OCC=0) for half of them.
  ScopedEnv e("B12X_GGML_GEMV", "1");
  for (const char* kw : {"1", "2", "4", "8"})
    for (const char* sp : {"1", "3"}) {
      ScopedEnv eo("B12X_GGML_GEMV_OCC", kw[0] == '1' || kw[0] == '4' ? "0" : "3");
      ScopedEnv ek("B12X_GGML_GEMV_KW", kw), es("B12X_GGML_GEMV_SPLIT", sp);
      EXPECT_EQ(bf16_plan(LinearFormat::kIq2Xs, 4, 72, 2304).ggml_gemv, std::atoi(kw));
      EXPECT_EQ(bf16_plan(LinearFormat::kIq2Xs, 4, 72, 2304).ggml_gemv_split, std::atoi(sp));
      for (LinearFormat f : kGgmlFormats) {
        run_case(
            {f, 3, 72, f == LinearFormat::kQ8_0 ? 1056 : 2304, DType::kBF16, DType::kBF16, true});
        run_case({f, 12, 40, 256, DType::kFP16, DType::kBF16, false});
      }
    }
}

TEST(GemmGpu, GgmlGemvTileWalk) {
  B12X_REQUIRE_GPU();
  // CTAs capped below the tile groups (B12X_GGML_GEMV_CTAS): each CTA walks several groups,
  // loading the next group's first batch during the last one of the current group; N = 200 (13
  // tiles, the last one partial), one and two token tiles, with and without a split; the IQ2
  // capped kernels (B12X_GGML_GEMV_OCC=3) with the split.
  ScopedEnv e("B12X_GGML_GEMV", "1"), ec("B12X_GGML_GEMV_CTAS", "2");
  for (const char* kw : {"8", "2"})
    for (const char* sp : {"1", "2"}) {
      ScopedEnv ek("B12X_GGML_GEMV_KW", kw), es("B12X_GGML_GEMV_SPLIT", sp),
          eo("B12X_GGML_GEMV_OCC", sp[0] == '2' ? "3" : "0");
      EXPECT_EQ(bf16_plan(LinearFormat::kQ8_0, 4, 200, 1024).ggml_gemv_ctas, 2);
      for (LinearFormat f : kGgmlFormats) {
        run_case({f, 2, 200, 1024, DType::kBF16, DType::kBF16, true});
        run_case({f, 13, 200, 512, DType::kFP16, DType::kFP16, false});
      }
    }
}

TEST(GemmGpu, GgmlGemvDefault) {
  B12X_REQUIRE_GPU();
  // The default route (no override): IQ2 at M <= 16 everywhere, Q8_0 where the 16-row tiles are
  // at most 2 x SMs; the decode kernel's knobs leave the route alone, B12X_GGML_GEMV=0 takes the
  // decode kernel.
  int sms = 0;
  B12X_TEST_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int ccmaj = 0, ccmin = 0;
  B12X_TEST_CUDA(cudaDeviceGetAttribute(&ccmaj, cudaDevAttrComputeCapabilityMajor, 0));
  B12X_TEST_CUDA(cudaDeviceGetAttribute(&ccmin, cudaDevAttrComputeCapabilityMinor, 0));
  if (ccmaj == 9 && ccmin == 0) {
    // Sessions 26-29 (SM90): the integer-MMA GEMV (16 warps) at M = 1 on every shape (IQ2_XXS
    // 8963, IQ2_XS 8431), at M = 2 (8207) where the SMs get >= 40 (tile, 256-K) units, or >= 24
    // with at most one tile per SM; BF16 only; B12X_GGML_GEMV_IMMA=0 or any GEMV override keeps
    // the BF16 GEMV.
    const int64_t big = int64_t{5} * sms * 16, small = int64_t{2} * sms * 16;  // rows
    for (LinearFormat f : {LinearFormat::kIq2Xxs, LinearFormat::kIq2Xs}) {
      const bool xs = f == LinearFormat::kIq2Xs;
      const int w = 16, w2 = 16, v1 = xs ? 8431 : 8963, v2 = 8207;
      EXPECT_EQ(bf16_plan(f, 2, int64_t{16} * sms, 24 * 256).ggml_gemv_var, v2);  // 24 units
      EXPECT_EQ(bf16_plan(f, 2, int64_t{16} * sms, 23 * 256).ggml_gemv_var & 8192, 0);
      EXPECT_EQ(bf16_plan(f, 1, big, 4096).ggml_gemv_var, v1);
      EXPECT_EQ(bf16_plan(f, 1, big, 4096).ggml_gemv_warps, w);
      EXPECT_EQ(bf16_plan(f, 1, small, 1024).ggml_gemv_var, v1);
      EXPECT_EQ(linear_plan(f, 1, big, 4096, DType::kFP16).ggml_gemv_var & 8192, 0);
      EXPECT_EQ(bf16_plan(f, 2, big, 2048).ggml_gemv_var, v2);        // 5 x 8 = 40 units per SM
      EXPECT_EQ(bf16_plan(f, 2, big, 1792).ggml_gemv_var & 8192, 0);  // 35
      EXPECT_EQ(bf16_plan(f, 3, big, 4096).ggml_gemv_var & 8192, 0);
      // Runs kept small (the CPU reference): M = 1 off the tile with bias, M = 2 at 40 units.
      run_case({f, 1, 200, 2304, DType::kBF16, DType::kBF16, true});
      EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().warps, w);
      run_case({f, 2, big, 2048, DType::kBF16, DType::kBF16, false});
      EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().warps, w2);
      EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().grid_x, static_cast<unsigned>(sms));
      ScopedEnv ei("B12X_GGML_GEMV_IMMA", "0");
      EXPECT_EQ(bf16_plan(f, 1, big, 4096).ggml_gemv_var & 8192, 0);
    }
  }
  // Below: the BF16 GEMV's defaults (sessions 13-19).
  ScopedEnv ei("B12X_GGML_GEMV_IMMA", "0");
  for (LinearFormat f : kGgmlFormats) {
    const int ac = f == LinearFormat::kIq2Xxs ? 1600 : 576;  // session 17's M = 1 variants
    EXPECT_GT(bf16_plan(f, 1, 4096, 4096).ggml_gemv, 0);
    EXPECT_GT(bf16_plan(f, 16, 2048, 7168).ggml_gemv, 0);
    EXPECT_EQ(bf16_plan(f, 17, 2048, 7168).ggml_gemv, 0);
    const int64_t n = int64_t{2} * sms * 16;  // 2 x SMs tiles (+ 16 rows: one more)
    EXPECT_EQ(bf16_plan(f, 2, n + 16, 4096).ggml_gemv > 0, f != LinearFormat::kQ8_0);
    // Session 19: Q8_0 at M = 1 (BF16) takes the GEMV's balanced split there (16 warps, one CTA
    // per SM); IQ2_XS the balanced split where the default runs the capped kernels (M <= 4),
    // IQ2_XXS (M = 1) where the grid-stride grid loads the SMs unevenly (14336x4096 on 132 SMs).
    const int bal = f == LinearFormat::kQ8_0 ? 4096 : f == LinearFormat::kIq2Xs ? 4160 : 5696;
    EXPECT_GT(bf16_plan(f, 1, n + 16, 4096).ggml_gemv, 0);
    if (f == LinearFormat::kQ8_0) {
      EXPECT_EQ(bf16_plan(f, 1, n + 16, 4096).ggml_gemv_var, bal);
      EXPECT_EQ(bf16_plan(f, 1, n + 16, 4096).ggml_gemv_warps, 16);
      run_case({f, 1, n + 16, 4096, DType::kBF16, DType::kBF16, true});
      EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().grid_x, static_cast<unsigned>(sms));
    }
    if (sms == 132 && f != LinearFormat::kQ8_0) {
      EXPECT_EQ(bf16_plan(f, 1, 14336, 4096).ggml_gemv_var, bal);
      EXPECT_EQ(bf16_plan(f, 4, 14336, 4096).ggml_gemv_var, f == LinearFormat::kIq2Xs ? bal : 96);
      run_case({f, 1, 14336, 4096, DType::kBF16, DType::kBF16, false});
      EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().warps, 16);
      EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().grid_x, 132u);
    }
    EXPECT_GT(bf16_plan(f, 1, n, 4096).ggml_gemv, 0);
    if (f != LinearFormat::kQ8_0) {
      // The kernel that runs: uncapped (no spills) on a grid of at most 2 CTAs per SM (2048 rows:
      // 128 tiles), capped at 80 registers on one of 3 tiles per SM; both compared with the
      // reference.
      run_case({f, 1, 2048, 4096, DType::kBF16, DType::kBF16, false});
      const gemm::lin::GgmlGemvLaunch small = gemm::lin::last_ggml_gemv_launch();
      EXPECT_EQ(small.occ, 0);
      // Session 14's defaults (BF16): the two-batch look-ahead and weights not allocated in L1 on
      // the uncapped 8-warp kernels at M <= 4, none on the capped ones (at M = 1 with K >= 6144
      // session 17's atom columns, below); B12X_GGML_GEMV_VAR=0 off.
      EXPECT_EQ(bf16_plan(f, 1, 2048, 4096).ggml_gemv_var, 96);
      EXPECT_EQ(bf16_plan(f, 4, 2048, 4096).ggml_gemv_var, 96);
      EXPECT_EQ(bf16_plan(f, 5, 2048, 4096).ggml_gemv_var, 0);
      EXPECT_EQ(bf16_plan(f, 1, 3 * sms * 16, 4096).ggml_gemv_var,
                f == LinearFormat::kIq2Xs ? 4160 : 0);
      {
        ScopedEnv ev0("B12X_GGML_GEMV_VAR", "0");
        EXPECT_EQ(bf16_plan(f, 1, 2048, 4096).ggml_gemv_var, 0);
      }
      EXPECT_LE(int64_t{small.grid_x} * small.grid_y, 2 * sms);
      if (f == LinearFormat::kIq2Xs) {
        run_case({f, 1, 3 * sms * 16, 4096, DType::kBF16, DType::kBF16, false});
        EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().warps, 16);
      }
      // The capped kernels (IQ2_XS: with B12X_GGML_GEMV_OCC=3, which keeps the grid-stride grid).
      std::optional<ScopedEnv> eo;
      if (f == LinearFormat::kIq2Xs) eo.emplace("B12X_GGML_GEMV_OCC", "3");
      run_case({f, 1, 3 * sms * 16, 4096, DType::kBF16, DType::kBF16, true});
      const gemm::lin::GgmlGemvLaunch big = gemm::lin::last_ggml_gemv_launch();
      EXPECT_EQ(big.occ, 3);
      EXPECT_GT(int64_t{big.grid_x} * big.grid_y, 2 * sms);
    }
    if (sms >= 128) {
      // 2048x7168 (128 tiles): the model's K split of 2 at M = 16, none for Q8_0 at M <= 8 (its
      // reduce kernel weighs more against its short batches) nor for IQ2 at M <= 8 (24-warp
      // CTAs, one tile each).
      EXPECT_EQ(bf16_plan(f, 1, 2048, 7168).ggml_gemv_split, 1);
      EXPECT_EQ(bf16_plan(f, 16, 2048, 7168).ggml_gemv_split, 2);
    }
    // At M <= 8: 24-warp CTAs for IQ2 with K >= 6144 on at most 2 x SMs tiles, 16 for Q8_0 on at
    // most SMs tiles, else 8 (M > 8, IQ2 with shorter K, more tiles); B12X_GGML_GEMV_WARPS=8
    // restores 8. The kernel that ran.
    const bool q8 = f == LinearFormat::kQ8_0;
    const int wide = q8 ? 16 : 24;
    if (sms >= 128) {
      // IQ2 at M = 1 with more tiles than SMs: 8 warps (session 14), the atom columns (17); with
      // at most SMs tiles 16 warps (17).
      EXPECT_EQ(bf16_plan(f, 1, 4096, 14336).ggml_gemv_warps, 8);
      EXPECT_EQ(bf16_plan(f, 1, 4096, 14336).ggml_gemv_var, q8 ? 0 : ac);
      EXPECT_EQ(bf16_plan(f, 2, 4096, 14336).ggml_gemv_warps, q8 ? 8 : 24);
      EXPECT_EQ(bf16_plan(f, 1, 2048, 7168).ggml_gemv_warps, 16);
      if (!q8) EXPECT_EQ(bf16_plan(f, 1, 2048, 7168).ggml_gemv, 16);
      EXPECT_EQ(bf16_plan(f, 1, 2048, 7168).ggml_gemv_var, q8 ? 0 : ac);
      EXPECT_EQ(bf16_plan(f, 8, 2048, 6144).ggml_gemv_warps, wide);
      EXPECT_EQ(bf16_plan(f, 1, 2048, 4096).ggml_gemv_warps, q8 ? 16 : 8);
      // The M = 1 defaults at K >= 6144 with bias and FP16 output: 16-warp CTAs (13 tiles, 16
      // warps per tile) and 8-warp CTAs of one tile each (sms + 2 tiles, the last one partial),
      // both on the atom columns for IQ2.
      run_case({f, 1, 200, 6144, DType::kBF16, DType::kFP16, true});
      if (!q8) {
        EXPECT_EQ(bf16_plan(f, 1, 200, 6144).ggml_gemv_var, ac);
        EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().warps, 16);
        EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().kw, 16);
      }
      const int64_t n8 = (sms + 2) * 16 - 8;
      EXPECT_EQ(bf16_plan(f, 1, n8, 6144).ggml_gemv_var, q8 ? 0 : ac);
      run_case({f, 1, n8, 6144, DType::kBF16, DType::kFP16, true});
      if (!q8) {
        EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().warps, 8);
        EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().kw, 8);
      }
    }
    EXPECT_EQ(bf16_plan(f, 9, 2048, 6144).ggml_gemv_warps, 8);
    EXPECT_EQ(bf16_plan(f, 1, n + 16, 14336).ggml_gemv_warps,
              f == LinearFormat::kIq2Xxs ? 8 : 16);  // IQ2_XS (capped grid) / Q8_0 balanced
    for (int64_t M : {1, 3, 8}) {
      run_case({f, M, 200, 6144, DType::kBF16, DType::kBF16, M == 3});
      EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().warps, M == 1 ? 16 : wide) << "M = " << M;
    }
    // The PDL trigger at each warp's last batch: IQ2_XS with its column groups (M <= 4), IQ2_XXS
    // with one token tile (M <= 8).
    for (int64_t M : {1, 4, 5, 9}) {
      run_case({f, M, 72, 2304, DType::kBF16, DType::kBF16, M == 4});
      EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().trig,
                (f == LinearFormat::kIq2Xs && M <= 4) || (f == LinearFormat::kIq2Xxs && M <= 8))
          << "M = " << M;
    }
    {
      // The 8-warp one-tile kernels on the same small grids (Q8_0's default above SMs tiles).
      ScopedEnv ew("B12X_GGML_GEMV_WARPS", "8");
      EXPECT_EQ(bf16_plan(f, 1, 2048, 6144).ggml_gemv_warps, 8);
      for (int64_t M : {1, 3}) {
        run_case({f, M, 200, 6144, DType::kFP16, DType::kBF16, M == 1});
        EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().warps, 8) << "M = " << M;
      }
    }
    ScopedEnv es("B12X_GEMM_SPLIT", "2"), ed("B12X_GEMM_DECODE_HALF", "1");
    EXPECT_GT(bf16_plan(f, 1, 4096, 4096).ggml_gemv, 0);
    ScopedEnv eg("B12X_GGML_GEMV", "0");
    EXPECT_EQ(bf16_plan(f, 1, 4096, 4096).ggml_gemv, 0);
  }
  for (const auto& c : ggml_gemv_cases()) run_case(c);
  for (LinearFormat f : kGgmlFormats)
    run_case({f, 4, 200, 2304, DType::kBF16, DType::kBF16, true}, /*graph_replay=*/true);
}

TEST(GemmGpu, GgmlGemvWarps) {
  B12X_REQUIRE_GPU();
  // B12X_GGML_GEMV_WARPS=16 / 24 (probe): CTAs of 16 / 24 warps (one per SM) at M <= 8, with
  // warps-per-tile counts that do not divide 8 (3, 6), the whole CTA on one tile, K splits and
  // tile walks (2 CTAs over N = 200: 13 tiles, the last one partial); M = 1 / 3 (IQ2_XS: column
  // groups) and 8 (one tile of 8 tokens). M = 12 keeps 8 warps.
  ScopedEnv e("B12X_GGML_GEMV", "1");
  for (const char* w : {"16", "24"}) {
    ScopedEnv ew("B12X_GGML_GEMV_WARPS", w);
    const int warps = std::atoi(w);
    EXPECT_EQ(bf16_plan(LinearFormat::kIq2Xxs, 8, 4096, 4096).ggml_gemv_warps, warps);
    EXPECT_EQ(bf16_plan(LinearFormat::kIq2Xxs, 12, 4096, 4096).ggml_gemv_warps, 8);
    for (const char* kw : {w, warps == 24 ? "3" : "1", warps == 24 ? "6" : "4"})
      for (const char* sp : {"1", "2"}) {
        ScopedEnv ek("B12X_GGML_GEMV_KW", kw), es("B12X_GGML_GEMV_SPLIT", sp),
            ec("B12X_GGML_GEMV_CTAS", kw[0] == '6' || kw[0] == '4' ? "2" : "0");
        for (LinearFormat f : kGgmlFormats) {
          const int64_t K = f == LinearFormat::kQ8_0 ? 1056 : 2304;
          for (int64_t M : {1, 3, 8}) {
            run_case({f, M, 200, K, M == 3 ? DType::kFP16 : DType::kBF16, DType::kBF16, M != 8});
            const gemm::lin::GgmlGemvLaunch l = gemm::lin::last_ggml_gemv_launch();
            EXPECT_EQ(l.warps, warps) << "M = " << M;
            EXPECT_EQ(l.kw, std::atoi(kw)) << "M = " << M;
          }
        }
      }
  }
  for (LinearFormat f : kGgmlFormats) {
    ScopedEnv ew("B12X_GGML_GEMV_WARPS", "24");
    run_case({f, 2, 200, 1024, DType::kBF16, DType::kBF16, true}, /*graph_replay=*/true);
  }
}

/// Runs with fewer tokens than the plan's max_tokens, where the GEMV takes another kernel (nt:
/// IQ2_XS column groups at M <= 4, one / two token tiles) than the one the plan prepared. Every
/// IQ2 kernel uses more than 48 KB of dynamic shared memory, so the launch itself must opt the
/// kernel in (session 10's review: the plan opted in only its own kernel, and such a run failed to
/// launch). Earlier tests of a process may have opted the kernels in already: run this test alone
/// (--gtest_filter) to see that failure.
TEST(GemmGpu, GgmlGemvRunBelowMaxTokens) {
  B12X_REQUIRE_GPU();
  for (LinearFormat f : {LinearFormat::kIq2Xs, LinearFormat::kIq2Xxs, LinearFormat::kQ8_0})
    for (int64_t mt : {8, 16})
      for (int64_t M : {1, 3, 8, 16}) {
        if (M > mt) continue;
        Case c{f, M, 1024, 4096, DType::kBF16, DType::kBF16, M == 3};
        c.max_tokens = mt;
        run_case(c);
      }
  Case c{LinearFormat::kIq2Xs, 2, 4096, 4096, DType::kBF16, DType::kFP16, true};
  c.max_tokens = 8;
  run_case(c);
  EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().nt, 0);  // the column groups (the plan's: nt 1)
}

TEST(GemmGpu, GgmlGemvGraphReplay) {
  B12X_REQUIRE_GPU();
  // Captured once, replayed with new activations in the same buffers (with and without a split).
  // The uncapped and the capped IQ2 one-tile kernels.
  ScopedEnv e("B12X_GGML_GEMV", "1");
  for (const char* sp : {"1", "2"})
    for (const char* occ : {"0", "3"}) {
      ScopedEnv es("B12X_GGML_GEMV_SPLIT", sp), eo("B12X_GGML_GEMV_OCC", occ);
      for (LinearFormat f : kGgmlFormats)
        for (int64_t M : {1, 16})
          run_case({f, M, 72, 1024, DType::kBF16, DType::kBF16, true}, /*graph_replay=*/true);
    }
}

TEST(GemmGpu, GgmlGemvVariants) {
  B12X_REQUIRE_GPU();
  // B12X_GGML_GEMV_VAR (session 14) on the IQ2 one-tile kernels at M <= 4, flags: 32 the weight
  // words two batches ahead (the look-ahead crosses K ranges and tile groups), 64 the weight words
  // not allocated in L1; 8 warps capped and uncapped, 24 warps; warps per tile 2 / 8 (8 warps),
  // 3 / 6 (24), K splits with empty ranges (K = 256 over 3 CTAs), tile walks (CTAS 2 over N = 200),
  // BF16 / FP16.
  ScopedEnv e("B12X_GGML_GEMV", "1");
  for (const char* var : {"96"}) {
    ScopedEnv ev("B12X_GGML_GEMV_VAR", var);
    const int v = std::atoi(var);
    EXPECT_EQ(bf16_plan(LinearFormat::kIq2Xxs, 1, 4096, 4096).ggml_gemv_var, v);
    EXPECT_EQ(bf16_plan(LinearFormat::kIq2Xs, 3, 4096, 4096).ggml_gemv_var, v);
    EXPECT_EQ(bf16_plan(LinearFormat::kIq2Xxs, 5, 4096, 4096).ggml_gemv_var, 0);
    EXPECT_EQ(bf16_plan(LinearFormat::kQ8_0, 1, 4096, 4096).ggml_gemv_var, 0);
    for (LinearFormat f : {LinearFormat::kIq2Xxs, LinearFormat::kIq2Xs}) {
      for (const char* occ : {"0", "3"}) {
        ScopedEnv eo("B12X_GGML_GEMV_OCC", occ), ek("B12X_GGML_GEMV_KW", occ[0] == '0' ? "2" : "8");
        run_case({f, 1, 200, 2304, DType::kBF16, DType::kBF16, true});
        EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().occ, std::atoi(occ));
        run_case({f, 3, 72, 2304, DType::kFP16, DType::kBF16, false});
        ScopedEnv es("B12X_GGML_GEMV_SPLIT", "3"), ec("B12X_GGML_GEMV_CTAS", "2");
        run_case({f, 1, 200, 2304, DType::kBF16, DType::kBF16, false});
        run_case({f, 3, 40, 256, DType::kFP16, DType::kFP16, true});
      }
      ScopedEnv ew("B12X_GGML_GEMV_WARPS", "24"), ek("B12X_GGML_GEMV_KW", "6"),
          es("B12X_GGML_GEMV_SPLIT", "2");
      run_case({f, 1, 200, 2304, DType::kBF16, DType::kBF16, true});
      EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().warps, 24);
      run_case({f, 3, 200, 4096, DType::kFP16, DType::kBF16, false}, /*graph_replay=*/true);
    }
  }
}

TEST(GemmGpu, GgmlGemvAtomColumns) {
  B12X_REQUIRE_GPU();
  // Session 17's atom columns at M = 1 (B12X_GGML_GEMV_VAR & 512: the MMA's columns hold the
  // batch's 8 atoms, activations zero outside their atom's column): with 64 (weights not in L1)
  // and 1024 (IQ2_XXS: PRMT-built table addresses, the 64 KB layout); 8
  // warps uncapped (B12X_GGML_GEMV_OCC=0) or 16, none at M > 1. Warps per tile 2 / 8 / 16 / 4,
  // K splits with empty ranges, tile walks (CTAS 2 over N = 200), N = 40, BF16 / FP16, graph
  // replay.
  ScopedEnv e("B12X_GGML_GEMV", "1"), eo("B12X_GGML_GEMV_OCC", "0");
  for (const char* var : {"576", "1600"}) {
    ScopedEnv ev("B12X_GGML_GEMV_VAR", var);
    const int v = std::atoi(var);
    const bool pa = (v & 1024) != 0;
    EXPECT_EQ(bf16_plan(LinearFormat::kIq2Xxs, 1, 4096, 4096).ggml_gemv_var, v);
    EXPECT_EQ(bf16_plan(LinearFormat::kIq2Xs, 1, 4096, 4096).ggml_gemv_var, pa ? 0 : v);
    EXPECT_EQ(bf16_plan(LinearFormat::kIq2Xxs, 2, 4096, 4096).ggml_gemv_var, 0);
    for (LinearFormat f : {LinearFormat::kIq2Xxs, LinearFormat::kIq2Xs}) {
      if (pa && f == LinearFormat::kIq2Xs) continue;
      for (const char* kw : {"2", "8"}) {
        ScopedEnv ek("B12X_GGML_GEMV_KW", kw);
        run_case({f, 1, 200, 2304, DType::kBF16, DType::kBF16, kw[0] == '2'});
        run_case({f, 1, 40, 1024, DType::kFP16, DType::kBF16, kw[0] == '8'});
      }
      {
        // 16-warp CTAs (one per SM): 16 / 4 warps per tile, a tile walk.
        ScopedEnv ew("B12X_GGML_GEMV_WARPS", "16"), ec("B12X_GGML_GEMV_CTAS", "2");
        for (const char* kw : {"16", "4"}) {
          ScopedEnv ek("B12X_GGML_GEMV_KW", kw);
          run_case({f, 1, 200, 2304, DType::kBF16, DType::kBF16, kw[0] == '4'});
          EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().warps, 16);
        }
      }
      ScopedEnv es("B12X_GGML_GEMV_SPLIT", "3"), ec("B12X_GGML_GEMV_CTAS", "2");
      run_case({f, 1, 200, 2304, DType::kBF16, DType::kBF16, false});
      run_case({f, 1, 40, 256, DType::kFP16, DType::kFP16, true}, /*graph_replay=*/true);
    }
  }
}

TEST(GemmGpu, GgmlGemvBalanced) {
  B12X_REQUIRE_GPU();
  // The balanced split (B12X_GGML_GEMV_VAR & 4096, session 19): each CTA a contiguous share of
  // the tiles, its (tile, batch) units cut into one contiguous range per warp; tiles a warp covers
  // in part are added through shared memory by their last contributor. 16 warps (one CTA per
  // SM); ranges crossing tile starts (13 tiles over 3 CTAs, K = 2304), empty ranges (3 tiles of 4
  // batches over 16 warps; K = 256), whole tiles per warp (K = 256 over 2 CTAs), Q8_0's short last
  // batch (K = 1056), M = 3 (4160: IQ2_XS column groups), FP16 output with bias, graph replay.
  ScopedEnv e("B12X_GGML_GEMV", "1");
  struct V {
    const char* var;
    LinearFormat f;
  };
  for (const V& v : {V{"4160", LinearFormat::kIq2Xxs}, V{"4160", LinearFormat::kIq2Xs},
                     V{"5696", LinearFormat::kIq2Xxs}, V{"4096", LinearFormat::kQ8_0}}) {
    const char* w = "16";
    ScopedEnv ev("B12X_GGML_GEMV_VAR", v.var), ew("B12X_GGML_GEMV_WARPS", w);
    const int64_t K = v.f == LinearFormat::kQ8_0 ? 1056 : 2304;
    EXPECT_EQ(bf16_plan(v.f, 1, 4096, K).ggml_gemv_var, std::atoi(v.var));
    run_case({v.f, 1, 4096, K, DType::kBF16, DType::kBF16, false});
    EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().warps, std::atoi(w));
    EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().kw, std::atoi(w));
    run_case(
        {v.f, 1, 40, v.f == LinearFormat::kQ8_0 ? 512 : 1024, DType::kBF16, DType::kFP16, true});
    {
      ScopedEnv ec("B12X_GGML_GEMV_CTAS", "3");
      run_case({v.f, 1, 200, K, DType::kBF16, DType::kBF16, true});
      if (v.var[1] == '1') run_case({v.f, 3, 200, K, DType::kBF16, DType::kBF16, false});
    }
    ScopedEnv ec("B12X_GGML_GEMV_CTAS", "2");
    run_case({v.f, 1, 200, 256, DType::kBF16, DType::kBF16, false}, /*graph_replay=*/true);
  }
}

/// Scales element 0 of every 32-K block of the activations by 2^sh (BF16 / FP16 bit patterns:
/// the exponent field, values whose exponent stays finite).
void widen_blocks(Acts& a, int sh) {
  const bool fp16 = a.x_dtype == DType::kFP16;
  uint16_t* x = reinterpret_cast<uint16_t*>(a.x.data());
  const int64_t n = static_cast<int64_t>(a.x.size()) / 2;
  const int mb = fp16 ? 10 : 7, emax = fp16 ? 30 : 254;
  for (int64_t i = 0; i < n; i += 32) {
    const int e = (x[i] >> mb) & (fp16 ? 0x1F : 0xFF);
    if (e != 0 && e + sh <= emax) x[i] = static_cast<uint16_t>(x[i] + (sh << mb));
  }
}

/// Runs case c once on its plan (BF16 output, no bias) with the host activations edited by tweak
/// before the upload; returns the outputs (a: the activations the reference reads).
std::vector<uint16_t> run_once(const Case& c, HostWeight& hw, Acts& a,
                               const std::function<void(Acts&)>& tweak) {
  const auto pw = gemm::PackedWeight::pack(hw.src(c.fmt), 0, nullptr);
  make_acts(c, a);
  tweak(a);
  a.upload();
  const gemm::Plan plan = linear_plan(c.fmt, c.M, c.N, c.K, a.x_dtype);  // BF16 output
  DeviceBuffer<uint8_t> scratch(std::max<int64_t>(plan.scratch_bytes, 1));
  DeviceBuffer<uint16_t> out(c.M * c.N);
  out.poison();
  const TensorRef out_t = TensorRef::contiguous(out.ptr, DType::kBF16, {c.M, c.N}, 0);
  const TensorRef scratch_t = TensorRef::contiguous(scratch.ptr, DType::kUInt8,
                                                    {std::max<int64_t>(plan.scratch_bytes, 1)}, 0);
  const gemm::Binding b =
      gemm::bind(plan, scratch_t, a.dev_x(0), a.dev_xs(0), *pw, out_t, TensorRef{}, TensorRef{});
  gemm::run(b, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return out.download();
}

/// Runs case c with element 35 of the activations (block 1) NaN and element 200 (block 6) +Inf
/// and expects every output non-finite (every row reads every block; IQ2 weights are never 0).
void run_nonfinite(const Case& c) {
  SCOPED_TRACE(name(c));
  HostWeight hw = make_weight(c.fmt, c.N, c.K);
  Acts a;
  const auto out = run_once(c, hw, a, [&](Acts& acts) {
    uint16_t* x = reinterpret_cast<uint16_t*>(acts.x.data());
    const bool h = acts.x_dtype == DType::kFP16;
    for (int64_t m = 0; m < c.M; ++m) {
      x[m * c.K + 35] = h ? 0x7E00 : 0x7FC0;
      x[m * c.K + 200] = h ? 0x7C00 : 0x7F80;
    }
  });
  int finite = 0;
  for (uint16_t v : out) finite += std::isfinite(from_half_bits(v, DType::kBF16)) ? 1 : 0;
  EXPECT_EQ(finite, 0);
}

/// The two-piece bound (review s26 item 3), case c (BF16 activations) with blocks widened by 2^sh:
/// per element, with E = floor(log2 max |x|) of its 32-K block (at least -100), a loss of at most
/// 2^(E - 14), none where |x| >= 2^(E - 6) (BF16's 8 bits then sit on the 2^(E - 13) grid);
/// |out - ref| <= |ref| / 128 (BF16 output) + sum_k |w_k| loss_k + the fp32 sums' rounding
/// ((K / 32 + 8) 2^-24 sum_k |w_k x_k|). Plain data then checks the exact elements exactly (no
/// 1e-3 rms slack).
void run_imma_bound(const Case& c, int sh) {
  SCOPED_TRACE(name(c) + " widened 2^" + std::to_string(sh));
  HostWeight hw = make_weight(c.fmt, c.N, c.K);
  Acts a;
  const auto out = run_once(c, hw, a, [&](Acts& acts) {
    if (sh > 0) widen_blocks(acts, sh);
  });
  const gemm::WeightSource src = hw.src(c.fmt);
  const std::vector<double> w = reference::linear_dequantize_weight(src);
  std::vector<double> ref(c.M * c.N), bound(c.M * c.N);
  reference::linear(src, a.host_x(), a.host_xs(), a.alpha, TensorRef{},
                    TensorRef::contiguous(ref.data(), DType::kFP64, {c.M, c.N}));
  const uint16_t* xb = reinterpret_cast<const uint16_t*>(a.x.data());
  std::vector<double> x(c.K), loss(c.K);
  for (int64_t m = 0; m < c.M; ++m) {
    for (int64_t k = 0; k < c.K; ++k) x[k] = from_half_bits(xb[m * c.K + k], DType::kBF16);
    for (int64_t k0 = 0; k0 < c.K; k0 += 32) {
      double mx = 0;
      for (int64_t k = k0; k < k0 + 32; ++k) mx = std::max(mx, std::fabs(x[k]));
      const int E = mx > 0 ? std::max(std::ilogb(mx), -100) : -100;
      for (int64_t k = k0; k < k0 + 32; ++k)
        loss[k] = std::fabs(x[k]) >= std::ldexp(1.0, E - 6) ? 0.0 : std::ldexp(1.0, E - 14);
    }
    for (int64_t n = 0; n < c.N; ++n) {
      double err = 0, mag = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        err += std::fabs(w[n * c.K + k]) * loss[k];
        mag += std::fabs(w[n * c.K + k] * x[k]);
      }
      bound[m * c.N + n] = err + (c.K / 32 + 8) * std::ldexp(mag, -24);
    }
  }
  const Check ck = check_out(out, DType::kBF16, ref, &bound);
  EXPECT_EQ(ck.bad, 0) << ck.cmp.str() << " worst err/tol=" << ck.worst;
}

/// The integer-MMA GEMV's cases for format f, M = 1 on plan variant v1 and M = 2 on v2
/// (B12X_GGML_GEMV_VAR): one wave (default CTAs) and CTAs of several tiles whose warps' ranges
/// cross tile starts (CTAS 2 / 5 over 13 tiles, K = 2304), N off the tile, bias, FP16 output,
/// graph replay with new activations; blocks with one element 2^12 and 2^20 above the rest (the
/// small ones rounded: two pieces keep 15 bits); M = 1 on a plan for 2 tokens; NaN / Inf.
void imma_m1_cases(LinearFormat f, const char* v1, int w1) {
  SCOPED_TRACE(name({f, 1, 0, 0, DType::kBF16, DType::kBF16, false}) + " var " + v1);
  const auto wide12 = [](Acts& a) { widen_blocks(a, 12); };
  const auto wide20 = [](Acts& a) { widen_blocks(a, 20); };
  {
    ScopedEnv ev("B12X_GGML_GEMV_VAR", v1);
    EXPECT_EQ(bf16_plan(f, 1, 4096, 4096).ggml_gemv_var, std::atoi(v1));
    run_case({f, 1, 200, 2304, DType::kBF16, DType::kBF16, true});
    EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().warps, w1);
    run_case({f, 1, 40, 1024, DType::kBF16, DType::kFP16, false});
    for (const char* ctas : {"2", "5"}) {
      ScopedEnv ec("B12X_GGML_GEMV_CTAS", ctas);
      run_case({f, 1, 200, 2304, DType::kBF16, DType::kBF16, ctas[0] == '2'},
               /*graph_replay=*/ctas[0] == '5');
    }
    run_case({f, 1, 72, 4096, DType::kBF16, DType::kBF16, false}, /*graph_replay=*/true);
    // K past 4 staging passes of 512 threads (17664 = 69 x 256: passes 0-3, then 4 in part).
    run_case({f, 1, 40, 17664, DType::kBF16, DType::kBF16, true});
    run_case({f, 1, 200, 2304, DType::kBF16, DType::kBF16, false}, false, nullptr, wide12);
    run_case({f, 1, 200, 2304, DType::kBF16, DType::kBF16, true}, false, nullptr, wide20);
    run_nonfinite({f, 1, 72, 2304, DType::kBF16, DType::kBF16, false});
    for (int sh : {0, 12}) run_imma_bound({f, 1, 200, 2304, DType::kBF16, DType::kBF16, false}, sh);
  }
}

/// imma_m1_cases on v1, then M = 2 on v2 (and M = 1 on a 2-token plan).
void imma_cases(LinearFormat f, const char* v1, const char* v2, int w1, int w2) {
  imma_m1_cases(f, v1, w1);
  SCOPED_TRACE(name({f, 2, 0, 0, DType::kBF16, DType::kBF16, false}));
  const auto wide12 = [](Acts& a) { widen_blocks(a, 12); };
  ScopedEnv ev("B12X_GGML_GEMV_VAR", v2);
  EXPECT_EQ(bf16_plan(f, 2, 4096, 4096).ggml_gemv_var, std::atoi(v2));
  run_case({f, 2, 200, 2304, DType::kBF16, DType::kBF16, true});
  EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().warps, w2);
  run_case({f, 2, 40, 1024, DType::kBF16, DType::kFP16, false}, /*graph_replay=*/true);
  run_case({f, 2, 200, 2304, DType::kBF16, DType::kBF16, false}, false, nullptr, wide12);
  run_case({f, 1, 72, 2304, DType::kBF16, DType::kBF16, false, false, gemm::Regime::kAuto, 2});
  EXPECT_EQ(gemm::lin::last_ggml_gemv_launch().warps, w2);
  run_nonfinite({f, 2, 72, 2304, DType::kBF16, DType::kBF16, false});
  ScopedEnv ec("B12X_GGML_GEMV_CTAS", "5");
  run_case({f, 2, 200, 2304, DType::kBF16, DType::kBF16, true}, /*graph_replay=*/true);
}

TEST(GemmGpu, GgmlGemvImma) {
  B12X_REQUIRE_GPU();
  // Sessions 25-27: IQ2 at M <= 2 on integer MMA with two activation pieces (15 bits: exact
  // within 2^6 of the block's largest BF16 value, else < 2^-14 of it lost per element; BF16
  // activations), 16 warps. B12X_GGML_GEMV_VAR 8963 (loads by the supplying lanes, every staging
  // pass's activation load at once, the table words as quads; session 29): IQ2_XXS M = 1; 8207 (+
  // the loop per tile, the next batch's loads in place): both formats, M = 1, 2; 8431
  // (+ the peeled loop, the interleaved halves, the table words after the first activation load):
  // IQ2_XS M = 1. M = 3, the others, Q8_0: not (round 99: Q8_0's BF16 GEMV took 8195 as its own
  // variant bits; the plan now ignores such vars there).
  ScopedEnv e("B12X_GGML_GEMV", "1");
  {
    ScopedEnv ev("B12X_GGML_GEMV_VAR", "8963");
    EXPECT_EQ(bf16_plan(LinearFormat::kIq2Xxs, 1, 4096, 4096).ggml_gemv_warps, 16);
    EXPECT_EQ(bf16_plan(LinearFormat::kIq2Xs, 1, 4096, 4096).ggml_gemv_var & 8192, 0);
    EXPECT_EQ(bf16_plan(LinearFormat::kIq2Xxs, 2, 4096, 4096).ggml_gemv_var & 8192, 0);
    EXPECT_EQ(bf16_plan(LinearFormat::kQ8_0, 1, 4096, 4096).ggml_gemv_var & 8192, 0);
    ScopedEnv ev2("B12X_GGML_GEMV_VAR", "8207");
    EXPECT_EQ(bf16_plan(LinearFormat::kIq2Xs, 2, 4096, 4096).ggml_gemv_var, 8207);
    EXPECT_EQ(bf16_plan(LinearFormat::kIq2Xxs, 3, 4096, 4096).ggml_gemv_var & 8192, 0);
    EXPECT_EQ(bf16_plan(LinearFormat::kQ8_0, 1, 4096, 4096).ggml_gemv_var & 8192, 0);
    // Removed: session 25's three pieces (8192), IQ2_XS's 24-warp 8193 and 8303 (session 27).
    // Session 29: 8195 (replaced by 8963), the probes 8451 and 8687.
    for (const char* v : {"8192", "8193", "8303", "8687"}) {
      ScopedEnv ev3("B12X_GGML_GEMV_VAR", v);
      EXPECT_EQ(bf16_plan(LinearFormat::kIq2Xs, 1, 4096, 4096).ggml_gemv_var & 8192, 0);
    }
    for (const char* v : {"8195", "8451"}) {
      ScopedEnv ev3("B12X_GGML_GEMV_VAR", v);
      EXPECT_EQ(bf16_plan(LinearFormat::kIq2Xxs, 1, 4096, 4096).ggml_gemv_var & 8192, 0);
    }
  }
  imma_cases(LinearFormat::kIq2Xxs, "8963", "8207", 16, 16);
  imma_cases(LinearFormat::kIq2Xs, "8431", "8207", 16, 16);
  // 8207 at M = 1 (a 2-token plan's 1-token runs) on its own.
  for (LinearFormat f : {LinearFormat::kIq2Xxs, LinearFormat::kIq2Xs}) imma_m1_cases(f, "8207", 16);
  // FP16 activations: the BF16 GEMV (no integer-MMA kernel).
  run_case({LinearFormat::kIq2Xxs, 1, 72, 1024, DType::kFP16, DType::kFP16, false});
}

TEST(GemmGpuSanitize, GgmlGemvVariants) {
  B12X_REQUIRE_GPU();
  // The variants past the end of a warp's work (round 52: kDeep's position step read past the
  // weights after the last group): two batches ahead (96; the default of the uncapped 8-warp
  // kernels at M <= 4) and 64, a tile walk over 13 tiles with a split of 2, memcheck-clean.
  ScopedEnv e("B12X_GGML_GEMV", "1"), ec("B12X_GGML_GEMV_CTAS", "2"),
      es("B12X_GGML_GEMV_SPLIT", "2"), ek("B12X_GGML_GEMV_KW", "2");
  for (const char* var : {"96"}) {
    ScopedEnv ev("B12X_GGML_GEMV_VAR", var);
    for (LinearFormat f : {LinearFormat::kIq2Xxs, LinearFormat::kIq2Xs})
      run_case({f, 1, 200, 2304, DType::kBF16, DType::kBF16, true});
  }
  // The atom columns (8 warps uncapped only; IQ2_XXS 1600, IQ2_XS 576).
  ScopedEnv eo("B12X_GGML_GEMV_OCC", "0");
  for (const char* var : {"576", "1600"}) {
    ScopedEnv ev("B12X_GGML_GEMV_VAR", var);
    for (LinearFormat f : {LinearFormat::kIq2Xxs, LinearFormat::kIq2Xs})
      if (var[0] == '5' || f == LinearFormat::kIq2Xxs)
        run_case({f, 1, 200, 2304, DType::kBF16, DType::kBF16, true});
  }
}

TEST(GemmGpuSanitize, GgmlGemvWarps) {
  B12X_REQUIRE_GPU();
  // 24-warp CTAs (probe) with 3 warps per tile, a split of 2 and a tile walk.
  ScopedEnv e("B12X_GGML_GEMV", "1"), ew("B12X_GGML_GEMV_WARPS", "24"),
      ek("B12X_GGML_GEMV_KW", "3"), es("B12X_GGML_GEMV_SPLIT", "2"), ec("B12X_GGML_GEMV_CTAS", "1");
  for (LinearFormat f : kGgmlFormats) {
    run_case({f, 1, 200, f == LinearFormat::kQ8_0 ? 1056 : 2304, DType::kBF16, DType::kBF16, true});
    run_case({f, 3, 41, 512, DType::kFP16, DType::kBF16, false});
  }
}

TEST(GemmGpuSanitize, GgmlGemv) {
  B12X_REQUIRE_GPU();
  ScopedEnv e("B12X_GGML_GEMV", "1");
  for (LinearFormat f : kGgmlFormats) {
    run_case({f, 1, 40, f == LinearFormat::kQ8_0 ? 1056 : 512, DType::kBF16, DType::kBF16, true});
    {
      ScopedEnv ew("B12X_GGML_GEMV_WARPS", "8");  // Q8_0's default there: 16 warps
      run_case(
          {f, 2, 40, f == LinearFormat::kQ8_0 ? 1056 : 512, DType::kBF16, DType::kBF16, false});
    }
    ScopedEnv ek("B12X_GGML_GEMV_KW", "2"), es("B12X_GGML_GEMV_SPLIT", "3"),
        ec("B12X_GGML_GEMV_CTAS", "1");
    run_case({f, 9, 40, 512, DType::kFP16, DType::kFP16, false});
    // Odd N with a split: the reduce kernel reads column pairs, the last one's column N from
    // partials the GEMV writes for every padded row (initcheck-clean).
    run_case({f, 3, 41, 512, DType::kBF16, DType::kBF16, true});
  }
}

}  // namespace
}  // namespace b12x
