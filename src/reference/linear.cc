// CPU reference of the linear GEMMs: dequantize both operands with the block codecs of
// src/formats and accumulate in fp64. Written for clarity, not speed.
#include "reference/linear.h"

#include <cstring>
#include <vector>

#include "b12x/reference/quantize.h"
#include "b12x/status.h"
#include "formats/block.h"
#include "formats/ggml.h"
#include "formats/scalar.h"
#include "formats/swizzle.h"
#include "reference/parallel.h"

namespace b12x::reference {

namespace {

using gemm::LinearFormat;

constexpr const char* kOp = "reference::linear";

void require_host(const TensorRef& t, const char* name) {
  B12X_CHECK_ARG(t.device == kHostDevice, kOp, ": ", name, " must be a host tensor, got ",
                 t.describe());
}

/// Byte pointer of row r of a 2-D tensor.
const uint8_t* row_ptr(const TensorRef& t, int64_t r) {
  return static_cast<const uint8_t*>(t.data) + r * t.byte_stride(0);
}

double load_float(const TensorRef& t, int64_t i) {
  const uint8_t* p = static_cast<const uint8_t*>(t.data);
  switch (t.dtype) {
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return fmt::bf16_bits_to_float(h);
    }
    case DType::kFP16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return fmt::fp16_bits_to_float(h);
    }
    case DType::kFP32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    case DType::kFP64: {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      return d;
    }
    default:
      B12X_FAIL(Status::kInvalidArgument, kOp, ": unsupported dtype ", dtype_name(t.dtype));
  }
}

/// Row-major [rows][cols] scale bytes from a linear or 128x4-swizzled tensor.
std::vector<uint8_t> scale_bytes(const TensorRef& s, bool swizzled, int64_t rows, int64_t cols,
                                 const char* name) {
  B12X_CHECK_ARG(s.data != nullptr, kOp, ": ", name, " is required");
  require_host(s, name);
  std::vector<uint8_t> out(static_cast<size_t>(rows * cols));
  if (swizzled) {
    B12X_CHECK_ARG(s.is_contiguous() && s.numel() >= fmt::swizzled_scale_bytes(rows, cols), kOp,
                   ": ", name,
                   " must be contiguous with >= ", fmt::swizzled_scale_bytes(rows, cols),
                   " bytes (128x4 layout), got ", s.describe());
    const uint8_t* p = static_cast<const uint8_t*>(s.data);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        out[r * cols + c] = p[fmt::swizzled_scale_offset(r, c, cols)];
  } else {
    B12X_CHECK_ARG(s.ndim == 2 && s.shape[0] == rows && s.shape[1] >= cols && s.stride[1] == 1, kOp,
                   ": ", name, " must be [", rows, ", >=", cols, "] (inner contiguous), got ",
                   s.describe());
    for (int64_t r = 0; r < rows; ++r) std::memcpy(&out[r * cols], row_ptr(s, r), cols);
  }
  return out;
}

struct Dims {
  int64_t N, K;
};

Dims weight_dims(const gemm::WeightSource& w) {
  const TensorRef& t = w.weight;
  B12X_CHECK_ARG(t.data != nullptr && t.ndim == 2, kOp, ": weight must be a 2-D host tensor");
  require_host(t, "weight");
  B12X_CHECK_ARG(t.stride[1] == 1, kOp, ": weight must be inner-contiguous");
  Dims d{t.shape[0], 0};
  switch (w.format) {
    case LinearFormat::kNvfp4:
    case LinearFormat::kNvfp4W4A16:
    case LinearFormat::kMxfp4:
    case LinearFormat::kMxfp4W4A8:
    case LinearFormat::kMxfp4W4A16:
      d.K = t.dtype == DType::kFP4E2M1 ? t.shape[1] : 2 * t.shape[1];
      break;
    case LinearFormat::kQ8_0:
    case LinearFormat::kIq2Xxs:
    case LinearFormat::kIq2Xs: {
      const DType bt = w.format == LinearFormat::kQ8_0    ? DType::kQ8_0
                       : w.format == LinearFormat::kIq2Xs ? DType::kIQ2_XS
                                                          : DType::kIQ2_XXS;
      d.K = t.dtype == DType::kUInt8 ? t.shape[1] / dtype_block_bytes(bt) * dtype_block_values(bt)
                                     : t.shape[1];
      break;
    }
    default:
      d.K = t.shape[1];
  }
  B12X_CHECK_ARG(d.K % gemm::format_k_multiple(w.format) == 0, kOp, ": K=", d.K,
                 " is not a multiple of ", gemm::format_k_multiple(w.format));
  return d;
}

std::vector<double> dequant_fp4(const TensorRef& x, const TensorRef& xs, int64_t rows, int64_t K,
                                bool nv, bool swizzled, double global) {
  const int bs = nv ? 16 : 32;
  const auto sc = scale_bytes(xs, swizzled, rows, K / bs, nv ? "nvfp4 scales" : "mx scales");
  std::vector<double> out(static_cast<size_t>(rows * K));
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* p = row_ptr(x, r);
    for (int64_t k = 0; k < K; ++k) {
      const uint8_t code = (k & 1) ? (p[k / 2] >> 4) : (p[k / 2] & 0xF);
      const uint8_t s = sc[r * (K / bs) + k / bs];
      const double v = nv ? static_cast<double>(fmt::e2m1_to_float(code)) * fmt::ue4m3_to_float(s)
                          : static_cast<double>(fmt::mxfp4_decode_value(code, s));
      out[r * K + k] = v * global;
    }
  }
  return out;
}

std::vector<double> dequant_fp8_mx(const TensorRef& x, const uint8_t* scales, int64_t rows,
                                   int64_t K, int64_t scale_ld) {
  std::vector<double> out(static_cast<size_t>(rows * K));
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* p = row_ptr(x, r);
    for (int64_t k = 0; k < K; ++k)
      out[r * K + k] = fmt::mxfp8_decode_value(p[k], scales[r * scale_ld + k / 32]);
  }
  return out;
}

}  // namespace

std::vector<double> linear_dequantize_weight(const gemm::WeightSource& w) {
  const Dims d = weight_dims(w);
  const int64_t N = d.N, K = d.K;
  const TensorRef& t = w.weight;
  std::vector<double> out(static_cast<size_t>(N * K));
  switch (w.format) {
    case LinearFormat::kNvfp4:
      return dequant_fp4(t, w.weight_scale, N, K, true, w.scale_swizzled, 1.0);
    case LinearFormat::kNvfp4W4A16:
      return dequant_fp4(t, w.weight_scale, N, K, true, w.scale_swizzled, w.global_scale);
    case LinearFormat::kMxfp4:
    case LinearFormat::kMxfp4W4A8:
    case LinearFormat::kMxfp4W4A16:
      return dequant_fp4(t, w.weight_scale, N, K, false, w.scale_swizzled, 1.0);
    case LinearFormat::kFp8Tensor:
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) out[n * K + k] = fmt::e4m3_to_float(row_ptr(t, n)[k]);
      return out;
    case LinearFormat::kMxfp8: {
      const auto sc = scale_bytes(w.weight_scale, w.scale_swizzled, N, K / 32, "weight_scale");
      return dequant_fp8_mx(t, sc.data(), N, K, K / 32);
    }
    case LinearFormat::kFp8Block: {
      const TensorRef& s = w.weight_scale;
      B12X_CHECK_ARG(s.data != nullptr && s.dtype == DType::kFP32 && s.ndim == 2 &&
                         s.shape[0] == (N + 127) / 128 && s.shape[1] == K / 128 && s.stride[1] == 1,
                     kOp, ": weight_scale must be fp32 [ceil(N/128), K/128], got ", s.describe());
      require_host(s, "weight_scale");
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) {
          float sv;
          std::memcpy(&sv, row_ptr(s, n / 128) + 4 * (k / 128), 4);
          out[n * K + k] = static_cast<double>(fmt::e4m3_to_float(row_ptr(t, n)[k])) * sv;
        }
      return out;
    }
    case LinearFormat::kQ8_0:
    case LinearFormat::kIq2Xxs:
    case LinearFormat::kIq2Xs: {
      const int bv = w.format == LinearFormat::kQ8_0 ? 32 : 256;
      const int bb = w.format == LinearFormat::kQ8_0    ? 34
                     : w.format == LinearFormat::kIq2Xs ? 74
                                                        : 66;
      std::vector<float> blk(bv);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t b = 0; b < K / bv; ++b) {
          const uint8_t* p = row_ptr(t, n) + b * bb;
          if (w.format == LinearFormat::kQ8_0)
            fmt::ggml::q8_0_decode_block(p, blk.data());
          else if (w.format == LinearFormat::kIq2Xs)
            fmt::ggml::iq2_xs_decode_block_host(p, blk.data());
          else
            fmt::ggml::iq2_xxs_decode_block_host(p, blk.data());
          for (int j = 0; j < bv; ++j) out[n * K + b * bv + j] = blk[j];
        }
      return out;
    }
  }
  B12X_FAIL(Status::kInvalidArgument, kOp, ": invalid format");
}

void linear(const gemm::WeightSource& w, const TensorRef& x, const TensorRef& x_scale, double alpha,
            const TensorRef& bias, const TensorRef& out) {
  const Dims d = weight_dims(w);
  const int64_t N = d.N, K = d.K;
  B12X_CHECK_ARG(x.data != nullptr && x.ndim == 2 && x.stride[1] == 1, kOp,
                 ": x must be a 2-D inner-contiguous host tensor");
  require_host(x, "x");
  const int64_t M = x.shape[0];
  const std::vector<double> wd = linear_dequantize_weight(w);
  std::vector<double> xd(static_cast<size_t>(M * K));
  const LinearFormat f = w.format;
  auto raw = [&]() {
    B12X_CHECK_ARG(x.dtype == DType::kBF16 || x.dtype == DType::kFP16, kOp,
                   ": x must be bf16/fp16 for ", gemm::format_name(f));
    B12X_CHECK_ARG(x.shape[1] == K, kOp, ": x has K=", x.shape[1], ", expected ", K);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) xd[m * K + k] = load_float(x, m * x.stride[0] + k);
  };
  switch (f) {
    case LinearFormat::kNvfp4W4A16:
    case LinearFormat::kMxfp4W4A16:
    case LinearFormat::kIq2Xxs:
    case LinearFormat::kIq2Xs:
    case LinearFormat::kQ8_0:
      raw();
      break;
    case LinearFormat::kNvfp4:
    case LinearFormat::kMxfp4: {
      const int64_t xk = x.dtype == DType::kFP4E2M1 ? x.shape[1] : 2 * x.shape[1];
      B12X_CHECK_ARG(xk == K, kOp, ": x has K=", xk, ", expected ", K);
      xd = dequant_fp4(x, x_scale, M, K, f == LinearFormat::kNvfp4, true, 1.0);
      break;
    }
    case LinearFormat::kFp8Tensor:
      B12X_CHECK_ARG(x.shape[1] == K, kOp, ": x has K=", x.shape[1], ", expected ", K);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K; ++k) xd[m * K + k] = fmt::e4m3_to_float(row_ptr(x, m)[k]);
      break;
    case LinearFormat::kFp8Block: {
      B12X_CHECK_ARG(x.shape[1] == K, kOp, ": x has K=", x.shape[1], ", expected ", K);
      std::vector<uint8_t> qv;
      std::vector<float> qs;
      const uint8_t* vp;
      int64_t vld;
      if (x.dtype == DType::kFP8E4M3 || x.dtype == DType::kUInt8) {
        B12X_CHECK_ARG(x_scale.data != nullptr && x_scale.dtype == DType::kFP32 &&
                           x_scale.ndim == 2 && x_scale.shape[0] == M &&
                           x_scale.shape[1] == K / 128 && x_scale.stride[1] == 1,
                       kOp, ": x_scale must be fp32 [M, K/128]");
        require_host(x_scale, "x_scale");
        qs.resize(static_cast<size_t>(M * (K / 128)));
        for (int64_t m = 0; m < M; ++m)
          std::memcpy(&qs[m * (K / 128)], row_ptr(x_scale, m), K / 128 * 4);
        vp = static_cast<const uint8_t*>(x.data);
        vld = x.byte_stride(0);
      } else {
        qv.resize(static_cast<size_t>(M * K));
        qs.resize(static_cast<size_t>(M * (K / 128)));
        quantize_fp8_group128(x, TensorRef::contiguous(qv.data(), DType::kFP8E4M3, {M, K}),
                              TensorRef::contiguous(qs.data(), DType::kFP32, {M, K / 128}));
        vp = qv.data();
        vld = K;
      }
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K; ++k)
          xd[m * K + k] = static_cast<double>(fmt::e4m3_to_float(vp[m * vld + k])) *
                          qs[m * (K / 128) + k / 128];
      break;
    }
    case LinearFormat::kMxfp8:
    case LinearFormat::kMxfp4W4A8: {
      B12X_CHECK_ARG(x.shape[1] == K, kOp, ": x has K=", x.shape[1], ", expected ", K);
      std::vector<uint8_t> qv(static_cast<size_t>(M * K)), qs(static_cast<size_t>(M * (K / 32)));
      quantize_mxfp8(x, TensorRef::contiguous(qv.data(), DType::kFP8E4M3, {M, K}),
                     TensorRef::contiguous(qs.data(), DType::kUE8M0, {M, K / 32}), TensorRef{});
      const TensorRef qt = TensorRef::contiguous(qv.data(), DType::kFP8E4M3, {M, K});
      xd = dequant_fp8_mx(qt, qs.data(), M, K, K / 32);
      break;
    }
  }
  double scale = alpha;
  if (f == LinearFormat::kFp8Tensor) {
    const TensorRef& s = w.output_scale;
    B12X_CHECK_ARG(s.data != nullptr && s.dtype == DType::kFP32 && s.numel() == 1, kOp,
                   ": output_scale (fp32[1]) is required for fp8_tensor");
    require_host(s, "output_scale");
    float v;
    std::memcpy(&v, s.data, 4);
    scale *= v;
  }
  B12X_CHECK_ARG(
      out.data != nullptr && out.ndim == 2 && out.shape[0] == M && out.shape[1] == N &&
          out.is_contiguous() && (out.dtype == DType::kFP64 || out.dtype == DType::kFP32),
      kOp, ": out must be a contiguous host fp64/fp32 [", M, ", ", N, "], got ", out.describe());
  require_host(out, "out");
  if (bias.data != nullptr) {
    require_host(bias, "bias");
    B12X_CHECK_ARG(bias.ndim == 1 && bias.shape[0] == N, kOp, ": bias must be [", N, "]");
  }
  parallel_rows(M, N * K, [&](int64_t m) {
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      const double* a = &xd[m * K];
      const double* b = &wd[n * K];
      for (int64_t k = 0; k < K; ++k) s += a[k] * b[k];
      double v = scale * s;
      if (bias.data != nullptr) v += load_float(bias, n * bias.stride[0]);
      if (out.dtype == DType::kFP64)
        static_cast<double*>(out.data)[m * N + n] = v;
      else
        static_cast<float*>(out.data)[m * N + n] = static_cast<float>(v);
    }
  });
}

}  // namespace b12x::reference
