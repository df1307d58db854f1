// Public activation quantisers: validation of host metadata, then the device launchers (with the
// launch options of the device as decided at the first call for it: act_quant_cached).
#include "b12x/quantize.h"

#include "b12x/runtime.h"
#include "gemm/quantize_check.h"
#include "gemm/quantize_launch.h"

namespace b12x {

namespace {

constexpr std::initializer_list<DType> kFp8Out = {DType::kFP8E4M3, DType::kUInt8};
constexpr std::initializer_list<DType> kFp4Out = {DType::kUInt8, DType::kFP4E2M1};
constexpr std::initializer_list<DType> kE8M0Out = {DType::kUE8M0, DType::kUInt8};
constexpr std::initializer_list<DType> kUE4M3Out = {DType::kUE4M3, DType::kFP8E4M3, DType::kUInt8};

gemm::qcheck::Input device_input(const TensorRef& x, const char* op, int block) {
  check_defined(x, op, "x");
  B12X_CHECK_ARG(x.device >= 0, op, ": x must be on a CUDA device, got ", x.describe());
  return gemm::qcheck::input(x, op, block, x.device);
}

/// A device fp32 scalar ([1] or 0-d).
const float* device_scalar(const TensorRef& t, const char* op, const char* name, int device) {
  B12X_CHECK_ARG(t.data != nullptr, op, ": ", name, " is missing (expected fp32[1] on the device)");
  check_defined(t, op, name);
  check_dtype(t, op, name, {DType::kFP32});
  B12X_CHECK_ARG(t.numel() == 1, op, ": ", name, " must hold exactly one fp32 value, got ",
                 t.describe());
  check_device(t, op, name, device);
  check_aligned(t, op, name, 4);
  return static_cast<const float*>(t.data);
}

}  // namespace

int64_t swizzled_scale_bytes(int64_t rows, int64_t cols) {
  B12X_CHECK_ARG(rows >= 0 && cols >= 0, "swizzled_scale_bytes: rows=", rows, " cols=", cols,
                 " must be non-negative");
  return fmt::swizzled_scale_bytes(rows, cols);
}

void quantize_nvfp4(const TensorRef& x, const TensorRef& global_scale, const TensorRef& packed,
                    const TensorRef& scale_swizzled, Stream stream) {
  const char* op = "quantize_nvfp4";
  const auto in = device_input(x, op, 16);
  const float* gs = device_scalar(global_scale, op, "global_scale", x.device);
  const int64_t cols = in.K / 16;
  gemm::qcheck::output(packed, op, "packed", kFp4Out, in.M * in.K / 2, x.device,
                       "packed e2m1 [M, K/2] bytes");
  gemm::qcheck::output(scale_swizzled, op, "scale_swizzled", kUE4M3Out,
                       fmt::swizzled_scale_bytes(in.M, cols), x.device,
                       gemm::qcheck::swizzled_str(in.M, cols));
  require_compiled_arch(x.device, op);
  gemm::launch_quantize_nvfp4(
      x.data, in.dtype, in.M, in.K, in.ldx, gs, static_cast<uint8_t*>(packed.data),
      static_cast<uint8_t*>(scale_swizzled.data), gemm::act_quant_cached(x.device), stream);
}

void quantize_mxfp8(const TensorRef& x, const TensorRef& values, const TensorRef& scale_rows,
                    const TensorRef& scale_swizzled, Stream stream) {
  const char* op = "quantize_mxfp8";
  const auto in = device_input(x, op, 32);
  const int64_t cols = in.K / 32;
  gemm::qcheck::output(values, op, "values", kFp8Out, in.M * in.K, x.device, "e4m3 [M, K]");
  B12X_CHECK_ARG(scale_rows.data != nullptr || scale_swizzled.data != nullptr || in.M == 0, op,
                 ": neither scale_rows nor scale_swizzled is given (at least one is needed)");
  if (scale_rows.data != nullptr)
    gemm::qcheck::output(scale_rows, op, "scale_rows", kE8M0Out, in.M * cols, x.device,
                         "ue8m0 [M, K/32]");
  if (scale_swizzled.data != nullptr)
    gemm::qcheck::output(scale_swizzled, op, "scale_swizzled", kE8M0Out,
                         fmt::swizzled_scale_bytes(in.M, cols), x.device,
                         gemm::qcheck::swizzled_str(in.M, cols));
  require_compiled_arch(x.device, op);
  gemm::launch_quantize_mxfp8(
      x.data, in.dtype, in.M, in.K, in.ldx, static_cast<uint8_t*>(values.data),
      static_cast<uint8_t*>(scale_rows.data), static_cast<uint8_t*>(scale_swizzled.data),
      gemm::act_quant_cached(x.device), stream);
}

void quantize_mxfp4(const TensorRef& x, const TensorRef& packed, const TensorRef& scale_swizzled,
                    Stream stream) {
  const char* op = "quantize_mxfp4";
  const auto in = device_input(x, op, 32);
  const int64_t cols = in.K / 32;
  gemm::qcheck::output(packed, op, "packed", kFp4Out, in.M * in.K / 2, x.device,
                       "packed e2m1 [M, K/2] bytes");
  gemm::qcheck::output(scale_swizzled, op, "scale_swizzled", kE8M0Out,
                       fmt::swizzled_scale_bytes(in.M, cols), x.device,
                       gemm::qcheck::swizzled_str(in.M, cols));
  require_compiled_arch(x.device, op);
  gemm::launch_quantize_mxfp4(
      x.data, in.dtype, in.M, in.K, in.ldx, static_cast<uint8_t*>(packed.data),
      static_cast<uint8_t*>(scale_swizzled.data), gemm::act_quant_cached(x.device), stream);
}

void quantize_fp8_tensor(const TensorRef& x, const TensorRef& scale, const TensorRef& values,
                         Stream stream) {
  const char* op = "quantize_fp8_tensor";
  const auto in = device_input(x, op, 1);
  const float* s = device_scalar(scale, op, "scale", x.device);
  gemm::qcheck::output(values, op, "values", kFp8Out, in.M * in.K, x.device, "e4m3 [M, K]");
  require_compiled_arch(x.device, op);
  gemm::launch_quantize_fp8_tensor(x.data, in.dtype, in.M, in.K, in.ldx, s,
                                   static_cast<uint8_t*>(values.data),
                                   gemm::act_quant_cached(x.device), stream);
}

void quantize_fp8_group128(const TensorRef& x, const TensorRef& values, const TensorRef& scales,
                           Stream stream) {
  const char* op = "quantize_fp8_group128";
  const auto in = device_input(x, op, 128);
  const int64_t cols = in.K / 128;
  gemm::qcheck::output(values, op, "values", kFp8Out, in.M * in.K, x.device, "e4m3 [M, K]");
  gemm::qcheck::output(scales, op, "scales", {DType::kFP32}, in.M * cols * 4, x.device,
                       "fp32 [M, K/128]");
  check_aligned(scales, op, "scales", 4);
  require_compiled_arch(x.device, op);
  // No early programmatic trigger: the caller's next kernel may read without waiting.
  gemm::launch_quantize_fp8_group128(
      x.data, in.dtype, in.M, in.K, in.ldx, static_cast<uint8_t*>(values.data),
      static_cast<float*>(scales.data), gemm::act_quant_cached(x.device), stream,
      /*early_dependents=*/false);
}

}  // namespace b12x
