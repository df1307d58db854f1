// Host-memory quantize / dequantize over the shared B12X_HD codecs (include/b12x/formats.h).
#include "b12x/formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "b12x/status.h"
#include "formats/block.h"
#include "formats/ggml.h"
#include "formats/scalar.h"
#include "formats/swizzle.h"

namespace b12x::formats {
namespace {

namespace f = b12x::fmt;

f::MxScaleRule to_fmt(MxScaleRule r) {
  return static_cast<f::MxScaleRule>(r);
}
f::MxZeroBlockScale to_fmt(MxZeroBlockScale z) {
  return static_cast<f::MxZeroBlockScale>(z);
}

void check_rule(const char* op, MxScaleRule r) {
  B12X_CHECK_ARG(r == MxScaleRule::kFloor || r == MxScaleRule::kCeil, op,
                 ": mx_rule=", static_cast<int>(r),
                 " is not a scale rule (supported: 0 floor (OCP), 1 ceil)");
}
void check_zero_block(const char* op, MxZeroBlockScale z) {
  B12X_CHECK_ARG(z == MxZeroBlockScale::kOne || z == MxZeroBlockScale::kZero, op,
                 ": zero_block=", static_cast<int>(z),
                 " is not a zero-block scale byte (supported: 127, 0)");
}
void check_rows_k(const char* op, int64_t rows, int64_t k) {
  B12X_CHECK_ARG(rows >= 0, op, ": rows=", rows, " is negative (supported: rows >= 0)");
  B12X_CHECK_ARG(k >= 0, op, ": k=", k, " is negative (supported: k >= 0)");
}
void check_whole_blocks(const char* op, int64_t k, int64_t block, const char* fmt_name) {
  B12X_CHECK_ARG(k % block == 0, op, ": k=", k, " is not a whole number of ", fmt_name, " blocks (",
                 block, " values; partial blocks are not supported)");
}
template <typename T>
void check_ptr(const char* op, const char* name, const T* p, int64_t count) {
  B12X_CHECK_ARG(count == 0 || p != nullptr, op, ": ", name, " is null");
}
int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

// ---------------------------------------------------------------- NVFP4 -----------------------
float nvfp4_global_scale(const float* x, int64_t n) {
  check_ptr("nvfp4_global_scale", "x", x, n);
  float m = 0.f;
  for (int64_t i = 0; i < n; ++i) m = f::amax_update(m, x[i]);
  return m > 0.f ? f::div_rn(448.f * 6.f, m) : 0.f;
}

void quantize_nvfp4(const float* x, int64_t rows, int64_t k, float global_scale, uint8_t* packed,
                    uint8_t* scales) {
  const char* op = "quantize_nvfp4";
  check_rows_k(op, rows, k);
  check_whole_blocks(op, k, kNvfp4Block, "NVFP4");
  B12X_CHECK_ARG(std::isfinite(global_scale) && global_scale >= 0.f, op,
                 ": global_scale=", global_scale,
                 " is not finite and >= 0 (gs = 448*6/amax, multiply convention)");
  const int64_t n = rows * k;
  check_ptr(op, "x", x, n);
  check_ptr(op, "packed", packed, n);
  check_ptr(op, "scales", scales, n);
  const int64_t nb = n / kNvfp4Block;
  for (int64_t b = 0; b < nb; ++b)
    scales[b] = f::nvfp4_encode_block(x + b * kNvfp4Block, global_scale, packed + b * 8);
}

void dequantize_nvfp4(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t k,
                      float global_scale, float* out) {
  const char* op = "dequantize_nvfp4";
  check_rows_k(op, rows, k);
  check_whole_blocks(op, k, kNvfp4Block, "NVFP4");
  B12X_CHECK_ARG(std::isfinite(global_scale) && global_scale > 0.f, op,
                 ": global_scale=", global_scale, " is not finite and > 0");
  const int64_t n = rows * k;
  check_ptr(op, "packed", packed, n);
  check_ptr(op, "scales", scales, n);
  check_ptr(op, "out", out, n);
  const int64_t nb = n / kNvfp4Block;
  for (int64_t b = 0; b < nb; ++b)
    f::nvfp4_decode_block(packed + b * 8, scales[b], global_scale, out + b * kNvfp4Block);
}

// ---------------------------------------------------------------- MXFP4 / MXFP8 ---------------
void quantize_mxfp4(const float* x, int64_t rows, int64_t k, MxScaleRule rule,
                    MxZeroBlockScale zero_block, uint8_t* packed, uint8_t* scales) {
  const char* op = "quantize_mxfp4";
  check_rows_k(op, rows, k);
  check_whole_blocks(op, k, kMxBlock, "MXFP4");
  check_rule(op, rule);
  check_zero_block(op, zero_block);
  const int64_t n = rows * k;
  check_ptr(op, "x", x, n);
  check_ptr(op, "packed", packed, n);
  check_ptr(op, "scales", scales, n);
  for (int64_t b = 0; b < n / kMxBlock; ++b)
    scales[b] =
        f::mxfp4_encode_block(x + b * kMxBlock, to_fmt(rule), to_fmt(zero_block), packed + b * 16);
}

void dequantize_mxfp4(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t k,
                      float* out) {
  const char* op = "dequantize_mxfp4";
  check_rows_k(op, rows, k);
  check_whole_blocks(op, k, kMxBlock, "MXFP4");
  const int64_t n = rows * k;
  check_ptr(op, "packed", packed, n);
  check_ptr(op, "scales", scales, n);
  check_ptr(op, "out", out, n);
  for (int64_t b = 0; b < n / kMxBlock; ++b)
    f::mxfp4_decode_block(packed + b * 16, scales[b], out + b * kMxBlock);
}

void quantize_mxfp8(const float* x, int64_t rows, int64_t k, MxZeroBlockScale zero_block,
                    uint8_t* values, uint8_t* scales) {
  const char* op = "quantize_mxfp8";
  check_rows_k(op, rows, k);
  check_whole_blocks(op, k, kMxBlock, "MXFP8");
  check_zero_block(op, zero_block);
  const int64_t n = rows * k;
  check_ptr(op, "x", x, n);
  check_ptr(op, "values", values, n);
  check_ptr(op, "scales", scales, n);
  for (int64_t b = 0; b < n / kMxBlock; ++b)
    scales[b] = f::mxfp8_encode_block(x + b * kMxBlock, to_fmt(zero_block), values + b * kMxBlock);
}

void dequantize_mxfp8(const uint8_t* values, const uint8_t* scales, int64_t rows, int64_t k,
                      float* out) {
  const char* op = "dequantize_mxfp8";
  check_rows_k(op, rows, k);
  check_whole_blocks(op, k, kMxBlock, "MXFP8");
  const int64_t n = rows * k;
  check_ptr(op, "values", values, n);
  check_ptr(op, "scales", scales, n);
  check_ptr(op, "out", out, n);
  for (int64_t b = 0; b < n / kMxBlock; ++b)
    f::mxfp8_decode_block(values + b * kMxBlock, scales[b], out + b * kMxBlock);
}

// ---------------------------------------------------------------- block FP8 -------------------
namespace {
void check_block_rows(const char* op, int64_t block_rows) {
  B12X_CHECK_ARG(block_rows == 128 || block_rows == 1, op, ": block_rows=", block_rows,
                 " is not supported (supported: 128 for 128x128 weight tiles, 1 for 1x128 "
                 "activation groups)");
}
}  // namespace

void quantize_block_fp8(const float* x, int64_t rows, int64_t k, int64_t block_rows,
                        uint8_t* values, float* scales) {
  const char* op = "quantize_block_fp8";
  check_rows_k(op, rows, k);
  check_block_rows(op, block_rows);
  const int64_t n = rows * k;
  check_ptr(op, "x", x, n);
  check_ptr(op, "values", values, n);
  check_ptr(op, "scales", scales, n);
  const int64_t tr = ceil_div(rows, block_rows), tc = ceil_div(k, kBlockFp8Cols);
  for (int64_t bi = 0; bi < tr; ++bi)
    for (int64_t bj = 0; bj < tc; ++bj) {
      const int64_t r0 = bi * block_rows, r1 = std::min(rows, r0 + block_rows);
      const int64_t c0 = bj * kBlockFp8Cols, c1 = std::min(k, c0 + kBlockFp8Cols);
      float amax = 0.f;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) amax = f::amax_update(amax, x[r * k + c]);
      const float s = f::fp8_scale_from_amax(amax);
      scales[bi * tc + bj] = s;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) values[r * k + c] = f::fp8_encode_value(x[r * k + c], s);
    }
}

void dequantize_block_fp8(const uint8_t* values, const float* scales, int64_t rows, int64_t k,
                          int64_t block_rows, float* out) {
  const char* op = "dequantize_block_fp8";
  check_rows_k(op, rows, k);
  check_block_rows(op, block_rows);
  const int64_t n = rows * k;
  check_ptr(op, "values", values, n);
  check_ptr(op, "scales", scales, n);
  check_ptr(op, "out", out, n);
  const int64_t tc = ceil_div(k, kBlockFp8Cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < k; ++c)
      out[r * k + c] =
          f::fp8_decode_value(values[r * k + c], scales[(r / block_rows) * tc + c / kBlockFp8Cols]);
}

void requantize_block_fp8_to_ue8m0(const uint8_t* values, const float* scales, int64_t rows,
                                   int64_t k, uint8_t* out_values, uint8_t* out_scales) {
  const char* op = "requantize_block_fp8_to_ue8m0";
  check_rows_k(op, rows, k);
  const int64_t n = rows * k;
  check_ptr(op, "values", values, n);
  check_ptr(op, "scales", scales, n);
  check_ptr(op, "out_values", out_values, n);
  check_ptr(op, "out_scales", out_scales, n);
  const int64_t tr = ceil_div(rows, 128), tc = ceil_div(k, 128);
  for (int64_t bi = 0; bi < tr; ++bi)
    for (int64_t bj = 0; bj < tc; ++bj) {
      const float s = scales[bi * tc + bj];
      B12X_CHECK_ARG(std::isfinite(s) && s >= 0.f, op, ": scales[", bi, ", ", bj, "]=", s,
                     " is not a finite non-negative block scale");
      const int64_t r0 = bi * 128, r1 = std::min(rows, r0 + 128);
      const int64_t c0 = bj * 128, c1 = std::min(k, c0 + 128);
      if (f::is_pow2_scale(s)) {
        out_scales[bi * tc + bj] = static_cast<uint8_t>(f::f32_bits(s) >> 23);
        for (int64_t r = r0; r < r1; ++r)
          std::memcpy(out_values + r * k + c0, values + r * k + c0, c1 - c0);
        continue;
      }
      float amax = 0.f;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c)
          amax = f::amax_update(amax, f::block_fp8_reconstruct(values[r * k + c], s));
      const uint8_t e = f::mxfp8_scale(amax, f::MxZeroBlockScale::kOne);
      out_scales[bi * tc + bj] = e;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c)
          out_values[r * k + c] = f::block_fp8_requant_value(values[r * k + c], s, e);
    }
}

// ---------------------------------------------------------------- per-tensor FP8 --------------
float quantize_fp8_per_tensor(const float* x, int64_t n, float static_scale, uint8_t* values) {
  const char* op = "quantize_fp8_per_tensor";
  B12X_CHECK_ARG(n >= 0, op, ": n=", n, " is negative");
  check_ptr(op, "x", x, n);
  check_ptr(op, "values", values, n);
  B12X_CHECK_ARG(std::isfinite(static_scale) && static_scale >= 0.f, op,
                 ": static_scale=", static_scale, " is not finite and >= 0 (0 = compute amax/448)");
  float s = static_scale;
  if (s == 0.f) {
    float amax = 0.f;
    for (int64_t i = 0; i < n; ++i) amax = f::amax_update(amax, x[i]);
    s = f::fp8_scale_from_amax(amax);
  }
  for (int64_t i = 0; i < n; ++i) values[i] = f::fp8_encode_value(x[i], s);
  return s;
}

void dequantize_fp8_per_tensor(const uint8_t* values, int64_t n, float scale, float* out) {
  const char* op = "dequantize_fp8_per_tensor";
  B12X_CHECK_ARG(n >= 0, op, ": n=", n, " is negative");
  check_ptr(op, "values", values, n);
  check_ptr(op, "out", out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = f::fp8_decode_value(values[i], scale);
}

// ---------------------------------------------------------------- GGML ------------------------
void quantize_q8_0(const float* x, int64_t rows, int64_t k, uint8_t* blocks) {
  const char* op = "quantize_q8_0";
  check_rows_k(op, rows, k);
  check_whole_blocks(op, k, f::ggml::kQ8_0Values, "Q8_0");
  const int64_t n = rows * k;
  check_ptr(op, "x", x, n);
  check_ptr(op, "blocks", blocks, n);
  for (int64_t b = 0; b < n / f::ggml::kQ8_0Values; ++b)
    f::ggml::q8_0_encode_block(x + b * f::ggml::kQ8_0Values, blocks + b * f::ggml::kQ8_0Bytes);
}

void dequantize_q8_0(const uint8_t* blocks, int64_t rows, int64_t k, float* out) {
  const char* op = "dequantize_q8_0";
  check_rows_k(op, rows, k);
  check_whole_blocks(op, k, f::ggml::kQ8_0Values, "Q8_0");
  const int64_t n = rows * k;
  check_ptr(op, "blocks", blocks, n);
  check_ptr(op, "out", out, n);
  for (int64_t b = 0; b < n / f::ggml::kQ8_0Values; ++b)
    f::ggml::q8_0_decode_block(blocks + b * f::ggml::kQ8_0Bytes, out + b * f::ggml::kQ8_0Values);
}

void dequantize_iq2_xxs(const uint8_t* blocks, int64_t rows, int64_t k, float* out) {
  const char* op = "dequantize_iq2_xxs";
  check_rows_k(op, rows, k);
  check_whole_blocks(op, k, f::ggml::kIq2Values, "IQ2_XXS");
  const int64_t n = rows * k;
  check_ptr(op, "blocks", blocks, n);
  check_ptr(op, "out", out, n);
  for (int64_t b = 0; b < n / f::ggml::kIq2Values; ++b)
    f::ggml::iq2_xxs_decode_block_host(blocks + b * f::ggml::kIq2xxsBytes,
                                       out + b * f::ggml::kIq2Values);
}

void dequantize_iq2_xs(const uint8_t* blocks, int64_t rows, int64_t k, float* out) {
  const char* op = "dequantize_iq2_xs";
  check_rows_k(op, rows, k);
  check_whole_blocks(op, k, f::ggml::kIq2Values, "IQ2_XS");
  const int64_t n = rows * k;
  check_ptr(op, "blocks", blocks, n);
  check_ptr(op, "out", out, n);
  for (int64_t b = 0; b < n / f::ggml::kIq2Values; ++b)
    f::ggml::iq2_xs_decode_block_host(blocks + b * f::ggml::kIq2xsBytes,
                                      out + b * f::ggml::kIq2Values);
}

// ---------------------------------------------------------------- swizzle ---------------------
int64_t swizzled_block_scale_bytes(int64_t rows, int64_t cols) {
  B12X_CHECK_ARG(rows >= 0 && cols >= 0, "swizzled_block_scale_bytes: rows=", rows, " cols=", cols,
                 " must be >= 0");
  return f::swizzled_scale_bytes(rows, cols);
}

void swizzle_block_scale(const uint8_t* src, int64_t batch, int64_t rows, int64_t cols, uint8_t pad,
                         uint8_t* dst) {
  const char* op = "swizzle_block_scale";
  B12X_CHECK_ARG(batch >= 0 && rows >= 0 && cols >= 0, op, ": batch=", batch, " rows=", rows,
                 " cols=", cols, " must be >= 0");
  const int64_t sb = f::swizzled_scale_bytes(rows, cols);
  check_ptr(op, "src", src, batch * rows * cols);
  check_ptr(op, "dst", dst, batch * sb);
  for (int64_t b = 0; b < batch; ++b)
    f::swizzle_scale_grid(src + b * rows * cols, rows, cols, cols, dst + b * sb, pad);
}

void unswizzle_block_scale(const uint8_t* src, int64_t batch, int64_t rows, int64_t cols,
                           uint8_t* dst) {
  const char* op = "unswizzle_block_scale";
  B12X_CHECK_ARG(batch >= 0 && rows >= 0 && cols >= 0, op, ": batch=", batch, " rows=", rows,
                 " cols=", cols, " must be >= 0");
  const int64_t sb = f::swizzled_scale_bytes(rows, cols);
  check_ptr(op, "src", src, batch * sb);
  check_ptr(op, "dst", dst, batch * rows * cols);
  for (int64_t b = 0; b < batch; ++b)
    f::unswizzle_scale_grid(src + b * sb, rows, cols, dst + b * rows * cols, cols);
}

// ---------------------------------------------------------------- scalar codecs ---------------
void encode_scalar(DType dtype, CvtMode mode, const float* in, void* out, int64_t n) {
  const char* op = "encode_scalar";
  B12X_CHECK_ARG(n >= 0, op, ": n=", n, " is negative");
  check_ptr(op, "in", in, n);
  check_ptr(op, "out", out, n);
  const int m = static_cast<int>(mode);
  B12X_CHECK_ARG(m == 0 || m == 1, op, ": mode=", m,
                 " is not supported (0 = satfinite / rz, 1 = nosat / rp)");
  auto* o8 = static_cast<uint8_t*>(out);
  auto* o16 = static_cast<uint16_t*>(out);
  switch (dtype) {
    case DType::kFP8E4M3:
      for (int64_t i = 0; i < n; ++i)
        o8[i] = m == 0 ? f::float_to_e4m3_satfinite(in[i]) : f::float_to_e4m3_nosat(in[i]);
      return;
    case DType::kFP8E5M2:
      for (int64_t i = 0; i < n; ++i)
        o8[i] = m == 0 ? f::float_to_e5m2_satfinite(in[i]) : f::float_to_e5m2_nosat(in[i]);
      return;
    case DType::kFP4E2M1:
      for (int64_t i = 0; i < n; ++i) o8[i] = f::float_to_e2m1(in[i]);
      return;
    case DType::kUE8M0:
      for (int64_t i = 0; i < n; ++i)
        o8[i] = m == 0 ? f::float_to_ue8m0_floor(in[i]) : f::float_to_ue8m0_ceil(in[i]);
      return;
    case DType::kUE4M3:
      for (int64_t i = 0; i < n; ++i) o8[i] = f::float_to_ue4m3_satfinite(in[i]);
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) o16[i] = f::float_to_bf16_bits(in[i]);
      return;
    case DType::kFP16:
      for (int64_t i = 0; i < n; ++i) o16[i] = f::float_to_fp16_bits(in[i]);
      return;
    default:
      B12X_FAIL(Status::kInvalidArgument, op, ": dtype=", dtype_name(dtype),
                " has no scalar codec (supported: fp8_e4m3, fp8_e5m2, fp4_e2m1, ue8m0, ue4m3, "
                "bf16, fp16)");
  }
}

void decode_scalar(DType dtype, const void* in, float* out, int64_t n) {
  const char* op = "decode_scalar";
  B12X_CHECK_ARG(n >= 0, op, ": n=", n, " is negative");
  check_ptr(op, "in", in, n);
  check_ptr(op, "out", out, n);
  const auto* i8 = static_cast<const uint8_t*>(in);
  const auto* i16 = static_cast<const uint16_t*>(in);
  switch (dtype) {
    case DType::kFP8E4M3:
      for (int64_t i = 0; i < n; ++i) out[i] = f::e4m3_to_float(i8[i]);
      return;
    case DType::kFP8E5M2:
      for (int64_t i = 0; i < n; ++i) out[i] = f::e5m2_to_float(i8[i]);
      return;
    case DType::kFP4E2M1:
      for (int64_t i = 0; i < n; ++i) out[i] = f::e2m1_to_float(i8[i]);
      return;
    case DType::kUE8M0:
      for (int64_t i = 0; i < n; ++i) out[i] = f::ue8m0_to_float(i8[i]);
      return;
    case DType::kUE4M3:
      for (int64_t i = 0; i < n; ++i) out[i] = f::ue4m3_to_float(i8[i]);
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) out[i] = f::bf16_bits_to_float(i16[i]);
      return;
    case DType::kFP16:
      for (int64_t i = 0; i < n; ++i) out[i] = f::fp16_bits_to_float(i16[i]);
      return;
    default:
      B12X_FAIL(Status::kInvalidArgument, op, ": dtype=", dtype_name(dtype),
                " has no scalar codec (supported: fp8_e4m3, fp8_e5m2, fp4_e2m1, ue8m0, ue4m3, "
                "bf16, fp16)");
  }
}

}  // namespace b12x::formats
