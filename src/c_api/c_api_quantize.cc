// C ABI of the activation quantisers and their CPU reference.
#include "b12x/c_api/quantize.h"

#include "b12x/quantize.h"
#include "b12x/reference/quantize.h"
#include "c_api/c_api_util.h"

using namespace b12x;
using capi::to_ref;
using capi::to_ref_required;

namespace {
Stream as_stream(void* s) {
  return static_cast<Stream>(s);
}
}  // namespace

extern "C" {

b12x_status b12x_swizzled_scale_bytes(int64_t rows, int64_t cols, int64_t* bytes) {
  return capi::guard([&] {
    B12X_CHECK_ARG(bytes != nullptr, "b12x_swizzled_scale_bytes: bytes is NULL");
    *bytes = swizzled_scale_bytes(rows, cols);
  });
}

b12x_status b12x_quantize_nvfp4(const b12x_tensor* x, const b12x_tensor* global_scale,
                                const b12x_tensor* packed, const b12x_tensor* scale_swizzled,
                                void* stream) {
  return capi::guard([&] {
    const char* op = "quantize_nvfp4";
    quantize_nvfp4(to_ref_required(x, op, "x"), to_ref_required(global_scale, op, "global_scale"),
                   to_ref_required(packed, op, "packed"),
                   to_ref_required(scale_swizzled, op, "scale_swizzled"), as_stream(stream));
  });
}

b12x_status b12x_quantize_mxfp8(const b12x_tensor* x, const b12x_tensor* values,
                                const b12x_tensor* scale_rows, const b12x_tensor* scale_swizzled,
                                void* stream) {
  return capi::guard([&] {
    const char* op = "quantize_mxfp8";
    quantize_mxfp8(to_ref_required(x, op, "x"), to_ref_required(values, op, "values"),
                   to_ref(scale_rows, op, "scale_rows"),
                   to_ref(scale_swizzled, op, "scale_swizzled"), as_stream(stream));
  });
}

b12x_status b12x_quantize_mxfp4(const b12x_tensor* x, const b12x_tensor* packed,
                                const b12x_tensor* scale_swizzled, void* stream) {
  return capi::guard([&] {
    const char* op = "quantize_mxfp4";
    quantize_mxfp4(to_ref_required(x, op, "x"), to_ref_required(packed, op, "packed"),
                   to_ref_required(scale_swizzled, op, "scale_swizzled"), as_stream(stream));
  });
}

b12x_status b12x_quantize_fp8_tensor(const b12x_tensor* x, const b12x_tensor* scale,
                                     const b12x_tensor* values, void* stream) {
  return capi::guard([&] {
    const char* op = "quantize_fp8_tensor";
    quantize_fp8_tensor(to_ref_required(x, op, "x"), to_ref_required(scale, op, "scale"),
                        to_ref_required(values, op, "values"), as_stream(stream));
  });
}

b12x_status b12x_quantize_fp8_group128(const b12x_tensor* x, const b12x_tensor* values,
                                       const b12x_tensor* scales, void* stream) {
  return capi::guard([&] {
    const char* op = "quantize_fp8_group128";
    quantize_fp8_group128(to_ref_required(x, op, "x"), to_ref_required(values, op, "values"),
                          to_ref_required(scales, op, "scales"), as_stream(stream));
  });
}

b12x_status b12x_ref_quantize_nvfp4(const b12x_tensor* x, float global_scale,
                                    const b12x_tensor* packed, const b12x_tensor* scale_swizzled) {
  return capi::guard([&] {
    const char* op = "reference::quantize_nvfp4";
    reference::quantize_nvfp4(to_ref_required(x, op, "x"), global_scale,
                              to_ref_required(packed, op, "packed"),
                              to_ref_required(scale_swizzled, op, "scale_swizzled"));
  });
}

b12x_status b12x_ref_quantize_mxfp8(const b12x_tensor* x, const b12x_tensor* values,
                                    const b12x_tensor* scale_rows,
                                    const b12x_tensor* scale_swizzled) {
  return capi::guard([&] {
    const char* op = "reference::quantize_mxfp8";
    reference::quantize_mxfp8(to_ref_required(x, op, "x"), to_ref_required(values, op, "values"),
                              to_ref(scale_rows, op, "scale_rows"),
                              to_ref(scale_swizzled, op, "scale_swizzled"));
  });
}

b12x_status b12x_ref_quantize_mxfp4(const b12x_tensor* x, const b12x_tensor* packed,
                                    const b12x_tensor* scale_swizzled) {
  return capi::guard([&] {
    const char* op = "reference::quantize_mxfp4";
    reference::quantize_mxfp4(to_ref_required(x, op, "x"), to_ref_required(packed, op, "packed"),
                              to_ref_required(scale_swizzled, op, "scale_swizzled"));
  });
}

b12x_status b12x_ref_quantize_fp8_tensor(const b12x_tensor* x, float scale,
                                         const b12x_tensor* values) {
  return capi::guard([&] {
    const char* op = "reference::quantize_fp8_tensor";
    reference::quantize_fp8_tensor(to_ref_required(x, op, "x"), scale,
                                   to_ref_required(values, op, "values"));
  });
}

b12x_status b12x_ref_quantize_fp8_group128(const b12x_tensor* x, const b12x_tensor* values,
                                           const b12x_tensor* scales) {
  return capi::guard([&] {
    const char* op = "reference::quantize_fp8_group128";
    reference::quantize_fp8_group128(to_ref_required(x, op, "x"),
                                     to_ref_required(values, op, "values"),
                                     to_ref_required(scales, op, "scales"));
  });
}

}  // extern "C"
