// C ABI: formats (include/b12x/c_api/formats.h).
#include "b12x/c_api/formats.h"

#include "b12x/formats.h"
#include "c_api/c_api_util.h"

using namespace b12x;

namespace {

formats::QuantParams to_params(const b12x_quant_params* p, const char* op) {
  B12X_CHECK_ARG(p != nullptr, op, ": params is required but was not given");
  formats::QuantParams q;
  q.format = static_cast<formats::BlockFormat>(p->format);
  q.mx_rule = static_cast<formats::MxScaleRule>(p->mx_scale_rule);
  B12X_CHECK_ARG(p->mx_scale_rule == 0 || p->mx_scale_rule == 1, op,
                 ": mx_scale_rule=", p->mx_scale_rule, " is not supported (0 floor, 1 ceil)");
  B12X_CHECK_ARG(p->zero_block_scale == 0 || p->zero_block_scale == 127, op,
                 ": zero_block_scale=", p->zero_block_scale, " is not supported (127 or 0)");
  q.zero_block = static_cast<formats::MxZeroBlockScale>(p->zero_block_scale);
  q.global_scale = p->global_scale;
  q.block_rows = p->block_rows;
  return q;
}

bool is_byte_dtype(DType t) {
  return t == DType::kUInt8 || t == DType::kInt8 || t == DType::kFP8E4M3 || t == DType::kFP8E5M2 ||
         t == DType::kUE8M0 || t == DType::kUE4M3;
}

void check_byte_grid(const TensorRef& t, const char* op, const char* name) {
  B12X_CHECK_ARG(is_byte_dtype(t.dtype), op, ": ", name, " has dtype ", dtype_name(t.dtype),
                 " (supported: any 1-byte dtype: uint8, int8, fp8_e4m3, fp8_e5m2, ue8m0, ue4m3)");
  B12X_CHECK_ARG(t.ndim == 2 || t.ndim == 3, op, ": ", name, " has ndim=", t.ndim,
                 " (supported: 2 [rows, cols] or 3 [batch, rows, cols])");
  check_device(t, op, name, kHostDevice);
  check_contiguous(t, op, name);
}

}  // namespace

extern "C" {

void b12x_quant_params_init(b12x_quant_params* p, int32_t format) {
  if (!p) return;
  p->format = format;
  p->mx_scale_rule = B12X_MX_SCALE_FLOOR;
  p->zero_block_scale = 127;
  p->global_scale = 0.f;
  p->block_rows = 128;
}

b12x_status b12x_quantize(const b12x_tensor* src, const b12x_tensor* values,
                          const b12x_tensor* scales, const b12x_quant_params* params) {
  return capi::guard([&] {
    const char* op = "b12x_quantize";
    const formats::QuantParams q = to_params(params, op);
    formats::quantize(capi::to_ref_required(src, op, "src"),
                      capi::to_ref_required(values, op, "values"),
                      capi::to_ref(scales, op, "scales"), q);
  });
}

b12x_status b12x_dequantize(const b12x_tensor* values, const b12x_tensor* scales,
                            const b12x_tensor* out, const b12x_quant_params* params) {
  return capi::guard([&] {
    const char* op = "b12x_dequantize";
    const formats::QuantParams q = to_params(params, op);
    formats::dequantize(capi::to_ref_required(values, op, "values"),
                        capi::to_ref(scales, op, "scales"), capi::to_ref_required(out, op, "out"),
                        q);
  });
}

b12x_status b12x_requantize_block_fp8_to_ue8m0(const b12x_tensor* values, const b12x_tensor* scales,
                                               const b12x_tensor* out_values,
                                               const b12x_tensor* out_scales) {
  return capi::guard([&] {
    const char* op = "b12x_requantize_block_fp8_to_ue8m0";
    const TensorRef v = capi::to_ref_required(values, op, "values");
    const TensorRef s = capi::to_ref_required(scales, op, "scales");
    const TensorRef ov = capi::to_ref_required(out_values, op, "out_values");
    const TensorRef os = capi::to_ref_required(out_scales, op, "out_scales");
    check_dtype(v, op, "values", {DType::kFP8E4M3, DType::kUInt8});
    check_ndim(v, op, "values", 2);
    const int64_t n = v.shape[0], k = v.shape[1];
    const int64_t tr = (n + 127) / 128, tc = (k + 127) / 128;
    check_dtype(s, op, "scales", {DType::kFP32});
    check_shape(s, op, "scales", {tr, tc});
    check_dtype(ov, op, "out_values", {DType::kFP8E4M3, DType::kUInt8});
    check_shape(ov, op, "out_values", {n, k});
    check_dtype(os, op, "out_scales", {DType::kUE8M0, DType::kUInt8});
    check_shape(os, op, "out_scales", {tr, tc});
    for (const TensorRef* t : {&v, &s, &ov, &os}) {
      check_device(*t, op, "tensor", kHostDevice);
      check_contiguous(*t, op, "tensor");
    }
    formats::requantize_block_fp8_to_ue8m0(v.ptr<uint8_t>(), s.ptr<float>(), n, k,
                                           ov.ptr<uint8_t>(), os.ptr<uint8_t>());
  });
}

b12x_status b12x_swizzle_block_scale(const b12x_tensor* src, const b12x_tensor* dst, int32_t pad) {
  return capi::guard([&] {
    const char* op = "b12x_swizzle_block_scale";
    const TensorRef s = capi::to_ref_required(src, op, "src");
    const TensorRef d = capi::to_ref_required(dst, op, "dst");
    check_byte_grid(s, op, "src");
    check_byte_grid(d, op, "dst");
    B12X_CHECK_ARG(pad >= 0 && pad <= 255, op, ": pad=", pad, " is not a byte (0..255)");
    const int64_t batch = s.ndim == 3 ? s.shape[0] : 1;
    const int64_t rows = s.shape[s.ndim - 2], cols = s.shape[s.ndim - 1];
    const int64_t prow = (rows + 127) / 128 * 128, pcol = (cols + 3) / 4 * 4;
    if (s.ndim == 3)
      check_shape(d, op, "dst", {batch, prow, pcol});
    else
      check_shape(d, op, "dst", {prow, pcol});
    formats::swizzle_block_scale(s.ptr<uint8_t>(), batch, rows, cols, static_cast<uint8_t>(pad),
                                 d.ptr<uint8_t>());
  });
}

b12x_status b12x_unswizzle_block_scale(const b12x_tensor* src, const b12x_tensor* dst) {
  return capi::guard([&] {
    const char* op = "b12x_unswizzle_block_scale";
    const TensorRef s = capi::to_ref_required(src, op, "src");
    const TensorRef d = capi::to_ref_required(dst, op, "dst");
    check_byte_grid(s, op, "src");
    check_byte_grid(d, op, "dst");
    const int64_t batch = d.ndim == 3 ? d.shape[0] : 1;
    const int64_t rows = d.shape[d.ndim - 2], cols = d.shape[d.ndim - 1];
    const int64_t prow = (rows + 127) / 128 * 128, pcol = (cols + 3) / 4 * 4;
    if (d.ndim == 3)
      check_shape(s, op, "src", {batch, prow, pcol});
    else
      check_shape(s, op, "src", {prow, pcol});
    formats::unswizzle_block_scale(s.ptr<uint8_t>(), batch, rows, cols, d.ptr<uint8_t>());
  });
}

b12x_status b12x_encode_scalar(int32_t dtype, int32_t mode, const float* in, void* out, int64_t n) {
  return capi::guard([&] {
    B12X_CHECK_ARG(dtype >= 0 && dtype < kNumDTypes, "b12x_encode_scalar: dtype=", dtype,
                   " is not a dtype code");
    formats::encode_scalar(static_cast<DType>(dtype), static_cast<formats::CvtMode>(mode), in, out,
                           n);
  });
}

b12x_status b12x_decode_scalar(int32_t dtype, const void* in, float* out, int64_t n) {
  return capi::guard([&] {
    B12X_CHECK_ARG(dtype >= 0 && dtype < kNumDTypes, "b12x_decode_scalar: dtype=", dtype,
                   " is not a dtype code");
    formats::decode_scalar(static_cast<DType>(dtype), in, out, n);
  });
}

}  // extern "C"
