// CPU reference of the activation quantisers: straightforward loops over blocks, using the same
// scale rules (gemm/quantize_rules.h) and scalar codecs (formats/scalar.h) as the kernels.
#include "b12x/reference/quantize.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "formats/block.h"
#include "formats/scalar.h"
#include "formats/swizzle.h"
#include "gemm/quantize_check.h"
#include "gemm/quantize_rules.h"

namespace b12x::reference {

namespace {

using gemm::qcheck::Input;
namespace qr = gemm::qrules;

float load(const TensorRef& x, int64_t r, int64_t k) {
  const auto* p = static_cast<const uint16_t*>(x.data) + r * x.stride[0] + k;
  return x.dtype == DType::kBF16 ? fmt::bf16_bits_to_float(*p) : fmt::fp16_bits_to_float(*p);
}

/// Block amax (fmt::amax_update: |x| maximum, NaN ignored).
float block_amax(const TensorRef& x, int64_t r, int64_t k0, int n) {
  float a = 0.f;
  for (int j = 0; j < n; ++j) a = fmt::amax_update(a, load(x, r, k0 + j));
  return a;
}

void write_swizzled(uint8_t* out, const std::vector<uint8_t>& logical, int64_t M, int64_t cols,
                    uint8_t pad) {
  const int64_t prows = fmt::pad_to(M, 128), pcols = fmt::pad_to(cols, 4);
  for (int64_t r = 0; r < prows; ++r)
    for (int64_t c = 0; c < pcols; ++c)
      out[fmt::swizzled_scale_offset(r, c, cols)] =
          (r < M && c < cols) ? logical[r * cols + c] : pad;
}

constexpr std::initializer_list<DType> kFp8Out = {DType::kFP8E4M3, DType::kUInt8};
constexpr std::initializer_list<DType> kFp4Out = {DType::kUInt8, DType::kFP4E2M1};
constexpr std::initializer_list<DType> kE8M0Out = {DType::kUE8M0, DType::kUInt8};
constexpr std::initializer_list<DType> kUE4M3Out = {DType::kUE4M3, DType::kFP8E4M3, DType::kUInt8};

/// Shared body of the two FP4 formats: the scale code from `scale_code(amax)`, each value from
/// `encode(x, code)` (block.h's *_encode_value).
template <class ScaleFn, class EncodeFn>
void fp4_block_quant(const TensorRef& x, const Input& in, int block, uint8_t* packed,
                     std::vector<uint8_t>& codes, ScaleFn scale_code, EncodeFn encode) {
  const int64_t cols = in.K / block;
  codes.assign(in.M * cols, 0);
  for (int64_t r = 0; r < in.M; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t code = scale_code(block_amax(x, r, c * block, block));
      codes[r * cols + c] = code;
      for (int j = 0; j < block; j += 2) {
        const int64_t k = c * block + j;
        packed[r * (in.K / 2) + k / 2] =
            fmt::pack_e2m1x2(encode(load(x, r, k), code), encode(load(x, r, k + 1), code));
      }
    }
}

}  // namespace

void quantize_mxfp8(const TensorRef& x, const TensorRef& values, const TensorRef& scale_rows,
                    const TensorRef& scale_swizzled) {
  const char* op = "reference::quantize_mxfp8";
  const Input in = gemm::qcheck::input(x, op, 32, kHostDevice);
  const int64_t cols = in.K / 32;
  gemm::qcheck::output(values, op, "values", kFp8Out, in.M * in.K, kHostDevice, "e4m3 [M, K]");
  B12X_CHECK_ARG(scale_rows.data != nullptr || scale_swizzled.data != nullptr || in.M == 0, op,
                 ": neither scale_rows nor scale_swizzled is given (at least one is needed)");
  if (scale_rows.data != nullptr)
    gemm::qcheck::output(scale_rows, op, "scale_rows", kE8M0Out, in.M * cols, kHostDevice,
                         "ue8m0 [M, K/32]");
  if (scale_swizzled.data != nullptr)
    gemm::qcheck::output(scale_swizzled, op, "scale_swizzled", kE8M0Out,
                         fmt::swizzled_scale_bytes(in.M, cols), kHostDevice,
                         gemm::qcheck::swizzled_str(in.M, cols));
  std::vector<uint8_t> codes(in.M * cols);
  auto* v = static_cast<uint8_t*>(values.data);
  for (int64_t r = 0; r < in.M; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t code = qr::mxfp8_scale_code(block_amax(x, r, c * 32, 32));
      codes[r * cols + c] = code;
      for (int j = 0; j < 32; ++j) {
        const int64_t k = c * 32 + j;
        v[r * in.K + k] = fmt::mxfp8_encode_value(load(x, r, k), code);
      }
    }
  if (scale_rows.data != nullptr) std::memcpy(scale_rows.data, codes.data(), codes.size());
  if (scale_swizzled.data != nullptr)
    write_swizzled(static_cast<uint8_t*>(scale_swizzled.data), codes, in.M, cols, fmt::kMxScalePad);
}

void quantize_mxfp4(const TensorRef& x, const TensorRef& packed, const TensorRef& scale_swizzled) {
  const char* op = "reference::quantize_mxfp4";
  const Input in = gemm::qcheck::input(x, op, 32, kHostDevice);
  const int64_t cols = in.K / 32;
  gemm::qcheck::output(packed, op, "packed", kFp4Out, in.M * in.K / 2, kHostDevice,
                       "packed e2m1 [M, K/2] bytes");
  gemm::qcheck::output(scale_swizzled, op, "scale_swizzled", kE8M0Out,
                       fmt::swizzled_scale_bytes(in.M, cols), kHostDevice,
                       gemm::qcheck::swizzled_str(in.M, cols));
  std::vector<uint8_t> codes;
  fp4_block_quant(
      x, in, 32, static_cast<uint8_t*>(packed.data), codes,
      [](float a) { return qr::mxfp4_scale_code(a); },
      [](float v, uint8_t c) { return fmt::mxfp4_encode_value(v, c); });
  write_swizzled(static_cast<uint8_t*>(scale_swizzled.data), codes, in.M, cols, fmt::kMxScalePad);
}

void quantize_nvfp4(const TensorRef& x, float global_scale, const TensorRef& packed,
                    const TensorRef& scale_swizzled) {
  const char* op = "reference::quantize_nvfp4";
  const Input in = gemm::qcheck::input(x, op, 16, kHostDevice);
  const int64_t cols = in.K / 16;
  gemm::qcheck::output(packed, op, "packed", kFp4Out, in.M * in.K / 2, kHostDevice,
                       "packed e2m1 [M, K/2] bytes");
  gemm::qcheck::output(scale_swizzled, op, "scale_swizzled", kUE4M3Out,
                       fmt::swizzled_scale_bytes(in.M, cols), kHostDevice,
                       gemm::qcheck::swizzled_str(in.M, cols));
  std::vector<uint8_t> codes;
  fp4_block_quant(
      x, in, 16, static_cast<uint8_t*>(packed.data), codes,
      [&](float a) { return qr::nvfp4_scale_code(a, global_scale); },
      [&](float v, uint8_t c) {
        return fmt::nvfp4_encode_value(v, fmt::nvfp4_multiplier(c, global_scale));
      });
  write_swizzled(static_cast<uint8_t*>(scale_swizzled.data), codes, in.M, cols,
                 fmt::kNvfp4ScalePad);
}

void quantize_fp8_tensor(const TensorRef& x, float scale, const TensorRef& values) {
  const char* op = "reference::quantize_fp8_tensor";
  const Input in = gemm::qcheck::input(x, op, 1, kHostDevice);
  gemm::qcheck::output(values, op, "values", kFp8Out, in.M * in.K, kHostDevice, "e4m3 [M, K]");
  auto* v = static_cast<uint8_t*>(values.data);
  for (int64_t r = 0; r < in.M; ++r)
    for (int64_t k = 0; k < in.K; ++k)
      v[r * in.K + k] = fmt::fp8_encode_value(load(x, r, k), scale);
}

void quantize_fp8_group128(const TensorRef& x, const TensorRef& values, const TensorRef& scales) {
  const char* op = "reference::quantize_fp8_group128";
  const Input in = gemm::qcheck::input(x, op, 128, kHostDevice);
  const int64_t cols = in.K / 128;
  gemm::qcheck::output(values, op, "values", kFp8Out, in.M * in.K, kHostDevice, "e4m3 [M, K]");
  gemm::qcheck::output(scales, op, "scales", {DType::kFP32}, in.M * cols * 4, kHostDevice,
                       "fp32 [M, K/128]");
  auto* v = static_cast<uint8_t*>(values.data);
  auto* s = static_cast<float*>(scales.data);
  for (int64_t r = 0; r < in.M; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float sc = qr::fp8_group_scale(block_amax(x, r, c * 128, 128));
      s[r * cols + c] = sc;
      for (int j = 0; j < 128; ++j) {
        const int64_t k = c * 128 + j;
        v[r * in.K + k] = fmt::fp8_encode_value(load(x, r, k), sc);
      }
    }
}

}  // namespace b12x::reference
