// Descriptor-level quantize / dequantize (b12x::formats::quantize / dequantize): validates host
// TensorRefs, converts bf16/fp16 sources to fp32 and dispatches to the row functions.
#include <cstring>
#include <vector>

#include "b12x/formats.h"
#include "b12x/status.h"
#include "formats/scalar.h"

namespace b12x::formats {

const char* block_format_name(BlockFormat f) noexcept {
  switch (f) {
    case BlockFormat::kNvfp4:
      return "nvfp4";
    case BlockFormat::kMxfp4:
      return "mxfp4";
    case BlockFormat::kMxfp8:
      return "mxfp8";
    case BlockFormat::kBlockFp8:
      return "block_fp8";
    case BlockFormat::kFp8PerTensor:
      return "fp8_per_tensor";
    case BlockFormat::kQ8_0:
      return "q8_0";
    case BlockFormat::kIq2Xxs:
      return "iq2_xxs";
    case BlockFormat::kIq2Xs:
      return "iq2_xs";
  }
  return "unknown";
}

namespace {

namespace f = b12x::fmt;

struct Geometry {
  int64_t rows = 0, k = 0;
};

/// The logical [rows, k] view of a contiguous host tensor of values (k = innermost size).
Geometry geometry(const TensorRef& t) {
  Geometry g;
  g.k = t.ndim == 0 ? 1 : t.shape[t.ndim - 1];
  g.rows = 1;
  for (int d = 0; d + 1 < t.ndim; ++d) g.rows *= t.shape[d];
  return g;
}

void check_host_contiguous(const TensorRef& t, const char* op, const char* name) {
  check_device(t, op, name, kHostDevice);
  check_contiguous(t, op, name);
}

/// Numbers of stored bytes a container must hold and which dtypes may describe it.
void check_container(const TensorRef& t, const char* op, const char* name, int64_t expect_bytes,
                     std::initializer_list<DType> allowed) {
  B12X_CHECK_ARG(t.data != nullptr || expect_bytes == 0, op, ": ", name, " is required (",
                 expect_bytes, " bytes) but was not given");
  check_dtype(t, op, name, allowed);
  check_host_contiguous(t, op, name);
  const int64_t bytes = t.span_bytes();
  B12X_CHECK_ARG(bytes == expect_bytes, op, ": ", name, " ", t.describe(), " holds ", bytes,
                 " bytes, expected ", expect_bytes);
}

std::vector<float> to_f32(const TensorRef& src, const char* op) {
  check_dtype(src, op, "src", {DType::kFP32, DType::kBF16, DType::kFP16});
  check_host_contiguous(src, op, "src");
  const int64_t n = src.numel();
  std::vector<float> v(static_cast<size_t>(n));
  if (src.dtype == DType::kFP32) {
    if (n) std::memcpy(v.data(), src.data, static_cast<size_t>(n) * 4);
  } else {
    const auto* h = static_cast<const uint16_t*>(src.data);
    for (int64_t i = 0; i < n; ++i)
      v[i] = src.dtype == DType::kBF16 ? f::bf16_bits_to_float(h[i]) : f::fp16_bits_to_float(h[i]);
  }
  return v;
}

void from_f32(const std::vector<float>& v, const TensorRef& out) {
  const int64_t n = static_cast<int64_t>(v.size());
  if (out.dtype == DType::kFP32) {
    if (n) std::memcpy(out.data, v.data(), static_cast<size_t>(n) * 4);
    return;
  }
  auto* h = static_cast<uint16_t*>(out.data);
  for (int64_t i = 0; i < n; ++i)
    h[i] = out.dtype == DType::kBF16 ? f::float_to_bf16_bits(v[i]) : f::float_to_fp16_bits(v[i]);
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

/// Bytes of the value container for `n` values of format `fmt`.
int64_t value_bytes(BlockFormat fmt, int64_t n) {
  switch (fmt) {
    case BlockFormat::kNvfp4:
    case BlockFormat::kMxfp4:
      return n / 2;
    case BlockFormat::kQ8_0:
      return n / 32 * 34;
    case BlockFormat::kIq2Xxs:
      return n / 256 * 66;
    case BlockFormat::kIq2Xs:
      return n / 256 * 74;
    default:
      return n;
  }
}
std::initializer_list<DType> value_dtypes(BlockFormat fmt) {
  switch (fmt) {
    case BlockFormat::kNvfp4:
    case BlockFormat::kMxfp4: {
      static const auto l = {DType::kFP4E2M1, DType::kUInt8};
      return l;
    }
    case BlockFormat::kQ8_0: {
      static const auto l = {DType::kQ8_0, DType::kUInt8};
      return l;
    }
    case BlockFormat::kIq2Xxs: {
      static const auto l = {DType::kIQ2_XXS, DType::kUInt8};
      return l;
    }
    case BlockFormat::kIq2Xs: {
      static const auto l = {DType::kIQ2_XS, DType::kUInt8};
      return l;
    }
    default: {
      static const auto l = {DType::kFP8E4M3, DType::kUInt8};
      return l;
    }
  }
}
int64_t block_of(BlockFormat fmt) {
  switch (fmt) {
    case BlockFormat::kNvfp4:
      return 16;
    case BlockFormat::kMxfp4:
    case BlockFormat::kMxfp8:
    case BlockFormat::kQ8_0:
      return 32;
    case BlockFormat::kIq2Xxs:
    case BlockFormat::kIq2Xs:
      return 256;
    default:
      return 1;
  }
}

void check_format(const char* op, const QuantParams& p) {
  const int v = static_cast<int>(p.format);
  B12X_CHECK_ARG(v >= 1 && v <= 8, op, ": format=", v,
                 " is not a block format (supported: 1 nvfp4, 2 mxfp4, 3 mxfp8, 4 block_fp8, "
                 "5 fp8_per_tensor, 6 q8_0, 7 iq2_xxs, 8 iq2_xs)");
}

/// Checks the value and scale containers for a [rows, k] problem; returns the geometry.
void check_quant_tensors(const char* op, const QuantParams& p, const Geometry& g,
                         const TensorRef& values, const TensorRef& scales) {
  const int64_t blk = block_of(p.format);
  B12X_CHECK_ARG(g.k % blk == 0, op, ": ", block_format_name(p.format), " row length k=", g.k,
                 " is not a whole number of blocks (", blk,
                 " values per block; partial blocks are not supported)");
  const int64_t n = g.rows * g.k;
  check_defined(values, op, "values");
  check_container(values, op, "values", value_bytes(p.format, n), value_dtypes(p.format));
  switch (p.format) {
    case BlockFormat::kNvfp4:
      check_container(scales, op, "scales", n / 16,
                      {DType::kUE4M3, DType::kFP8E4M3, DType::kUInt8});
      break;
    case BlockFormat::kMxfp4:
    case BlockFormat::kMxfp8:
      check_container(scales, op, "scales", n / 32, {DType::kUE8M0, DType::kUInt8});
      break;
    case BlockFormat::kBlockFp8:
      B12X_CHECK_ARG(p.block_rows == 128 || p.block_rows == 1, op, ": block_rows=", p.block_rows,
                     " is not supported (supported: 128, 1)");
      check_container(scales, op, "scales", 4 * ceil_div(g.rows, p.block_rows) * ceil_div(g.k, 128),
                      {DType::kFP32});
      break;
    case BlockFormat::kFp8PerTensor:
      check_container(scales, op, "scales", 4, {DType::kFP32});
      break;
    default:
      B12X_CHECK_ARG(scales.data == nullptr, op, ": scales must be absent for ",
                     block_format_name(p.format), " (the scale lives in the GGML block)");
  }
}

}  // namespace

void quantize(const TensorRef& src, const TensorRef& values, const TensorRef& scales,
              const QuantParams& p) {
  const char* op = "quantize";
  check_format(op, p);
  check_defined(src, op, "src");
  const Geometry g = geometry(src);
  check_quant_tensors(op, p, g, values, scales);
  const std::vector<float> x = to_f32(src, op);
  auto* v = static_cast<uint8_t*>(values.data);
  auto* s8 = static_cast<uint8_t*>(scales.data);
  auto* s32 = static_cast<float*>(scales.data);
  switch (p.format) {
    case BlockFormat::kNvfp4:
      quantize_nvfp4(x.data(), g.rows, g.k, p.global_scale, v, s8);
      break;
    case BlockFormat::kMxfp4:
      quantize_mxfp4(x.data(), g.rows, g.k, p.mx_rule, p.zero_block, v, s8);
      break;
    case BlockFormat::kMxfp8:
      quantize_mxfp8(x.data(), g.rows, g.k, p.zero_block, v, s8);
      break;
    case BlockFormat::kBlockFp8:
      quantize_block_fp8(x.data(), g.rows, g.k, p.block_rows, v, s32);
      break;
    case BlockFormat::kFp8PerTensor:
      s32[0] = quantize_fp8_per_tensor(x.data(), g.rows * g.k, p.global_scale, v);
      break;
    case BlockFormat::kQ8_0:
      quantize_q8_0(x.data(), g.rows, g.k, v);
      break;
    case BlockFormat::kIq2Xxs:
      quantize_iq2_xxs(x.data(), g.rows, g.k, v);
      break;
    case BlockFormat::kIq2Xs:
      quantize_iq2_xs(x.data(), g.rows, g.k, v);
      break;
  }
}

void dequantize(const TensorRef& values, const TensorRef& scales, const TensorRef& out,
                const QuantParams& p) {
  const char* op = "dequantize";
  check_format(op, p);
  check_defined(out, op, "out");
  check_dtype(out, op, "out", {DType::kFP32, DType::kBF16, DType::kFP16});
  check_host_contiguous(out, op, "out");
  const Geometry g = geometry(out);
  check_quant_tensors(op, p, g, values, scales);
  std::vector<float> y(static_cast<size_t>(g.rows * g.k));
  const auto* v = static_cast<const uint8_t*>(values.data);
  const auto* s8 = static_cast<const uint8_t*>(scales.data);
  const auto* s32 = static_cast<const float*>(scales.data);
  switch (p.format) {
    case BlockFormat::kNvfp4:
      dequantize_nvfp4(v, s8, g.rows, g.k, p.global_scale, y.data());
      break;
    case BlockFormat::kMxfp4:
      dequantize_mxfp4(v, s8, g.rows, g.k, y.data());
      break;
    case BlockFormat::kMxfp8:
      dequantize_mxfp8(v, s8, g.rows, g.k, y.data());
      break;
    case BlockFormat::kBlockFp8:
      dequantize_block_fp8(v, s32, g.rows, g.k, p.block_rows, y.data());
      break;
    case BlockFormat::kFp8PerTensor:
      dequantize_fp8_per_tensor(v, g.rows * g.k, s32[0], y.data());
      break;
    case BlockFormat::kQ8_0:
      dequantize_q8_0(v, g.rows, g.k, y.data());
      break;
    case BlockFormat::kIq2Xxs:
      dequantize_iq2_xxs(v, g.rows, g.k, y.data());
      break;
    case BlockFormat::kIq2Xs:
      dequantize_iq2_xs(v, g.rows, g.k, y.data());
      break;
  }
  from_f32(y, out);
}

}  // namespace b12x::formats
