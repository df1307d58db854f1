// C ABI of the linear GEMMs: descriptors in, status out.
#include <cstring>
#include <memory>

#include "b12x/c_api.h"
#include "b12x/gemm.h"
#include "b12x/reference/linear.h"
#include "c_api/c_api_util.h"
#include "gemm/linear_internal.h"

struct b12x_linear_weight_s {
  std::shared_ptr<b12x::gemm::PackedWeight> w;
};
struct b12x_linear_plan_s {
  b12x::gemm::Plan plan;
};

namespace b12x::capi {
namespace {

gemm::WeightSource to_source(const b12x_linear_weight_source* s, const char* op) {
  B12X_CHECK_ARG(s != nullptr, op, ": weight source is NULL");
  B12X_CHECK_ARG(s->format >= 0 && s->format < gemm::kNumLinearFormats, op, ": format code ",
                 s->format, " is not a linear format (supported 0..", gemm::kNumLinearFormats - 1,
                 ")");
  gemm::WeightSource w;
  w.format = static_cast<gemm::LinearFormat>(s->format);
  w.weight = to_ref_required(s->weight, op, "weight");
  w.weight_scale = to_ref(s->weight_scale, op, "weight_scale");
  w.output_scale = to_ref(s->output_scale, op, "output_scale");
  w.scale_swizzled = s->scale_swizzled != 0;
  w.global_scale = s->global_scale;
  w.in_features = s->in_features;
  return w;
}

gemm::PackedWeight& weight_of(b12x_linear_weight w, const char* op) {
  B12X_CHECK_ARG(w != nullptr && w->w, op, ": weight handle is NULL");
  return *w->w;
}

}  // namespace
}  // namespace b12x::capi

using namespace b12x;

extern "C" {

const char* b12x_linear_format_name(int32_t format) {
  if (format < 0 || format >= gemm::kNumLinearFormats) return "invalid_format";
  return gemm::format_name(static_cast<gemm::LinearFormat>(format));
}

b12x_status b12x_linear_weight_pack(const b12x_linear_weight_source* src, int32_t device,
                                    void* stream, b12x_linear_weight* out) {
  return capi::guard([&] {
    const char* op = "b12x_linear_weight_pack";
    B12X_CHECK_ARG(out != nullptr, op, ": out handle pointer is NULL");
    *out = nullptr;
    auto w =
        gemm::PackedWeight::pack(capi::to_source(src, op), device, static_cast<Stream>(stream));
    *out = new b12x_linear_weight_s{std::move(w)};
  });
}

b12x_status b12x_linear_weight_refresh(b12x_linear_weight w, const b12x_linear_weight_source* src,
                                       void* stream) {
  return capi::guard([&] {
    const char* op = "b12x_linear_weight_refresh";
    capi::weight_of(w, op).refresh(capi::to_source(src, op), static_cast<Stream>(stream));
  });
}

b12x_status b12x_linear_weight_destroy(b12x_linear_weight w) {
  return capi::guard([&] { delete w; });
}

b12x_status b12x_linear_weight_info(b12x_linear_weight w, int32_t* format, int32_t* device,
                                    int64_t* out_features, int64_t* in_features,
                                    int64_t* padded_in_features, int64_t* bytes) {
  return capi::guard([&] {
    const auto& pw = capi::weight_of(w, "b12x_linear_weight_info");
    if (format) *format = static_cast<int32_t>(pw.format());
    if (device) *device = pw.device();
    if (out_features) *out_features = pw.out_features();
    if (in_features) *in_features = pw.in_features();
    if (padded_in_features) *padded_in_features = pw.padded_in_features();
    if (bytes) *bytes = pw.bytes();
  });
}

b12x_status b12x_linear_weight_values(b12x_linear_weight w, void** ptr, int64_t* bytes) {
  return capi::guard([&] {
    const auto& pw = capi::weight_of(w, "b12x_linear_weight_values");
    if (ptr) *ptr = const_cast<uint8_t*>(pw.values_device());
    if (bytes) *bytes = pw.impl().geo.values_bytes;
  });
}

b12x_status b12x_linear_plan_create(const b12x_linear_caps* caps, b12x_linear_plan* out) {
  return capi::guard([&] {
    const char* op = "b12x_linear_plan_create";
    B12X_CHECK_ARG(caps != nullptr && out != nullptr, op, ": caps and out must not be NULL");
    *out = nullptr;
    B12X_CHECK_ARG(caps->act_dtype >= 0 && caps->act_dtype < kNumDTypes, op, ": act_dtype code ",
                   caps->act_dtype, " is invalid");
    B12X_CHECK_ARG(caps->out_dtype >= 0 && caps->out_dtype < kNumDTypes, op, ": out_dtype code ",
                   caps->out_dtype, " is invalid");
    gemm::Caps c;
    c.device = caps->device;
    c.format = static_cast<gemm::LinearFormat>(caps->format);
    c.max_tokens = caps->max_tokens;
    c.in_features = caps->in_features;
    c.out_features = caps->out_features;
    c.act_dtype = static_cast<DType>(caps->act_dtype);
    c.out_dtype = static_cast<DType>(caps->out_dtype);
    c.expected_m = caps->expected_m;
    *out = new b12x_linear_plan_s{gemm::plan(c)};
  });
}

b12x_status b12x_linear_plan_scratch_bytes(b12x_linear_plan plan, int64_t* bytes) {
  return capi::guard([&] {
    B12X_CHECK_ARG(plan != nullptr && bytes != nullptr, "b12x_linear_plan_scratch_bytes",
                   ": plan and bytes must not be NULL");
    *bytes = plan->plan.scratch_bytes;
  });
}

b12x_status b12x_linear_plan_destroy(b12x_linear_plan plan) {
  return capi::guard([&] { delete plan; });
}

b12x_status b12x_linear_run(b12x_linear_plan plan, const b12x_tensor* scratch, const b12x_tensor* x,
                            const b12x_tensor* x_scale, b12x_linear_weight w,
                            const b12x_tensor* out, const b12x_tensor* bias,
                            const b12x_tensor* alpha, void* stream) {
  return capi::guard([&] {
    const char* op = "b12x_linear_run";
    B12X_CHECK_ARG(plan != nullptr, op, ": plan is NULL");
    const auto b =
        gemm::bind(plan->plan, capi::to_ref(scratch, op, "scratch"),
                   capi::to_ref_required(x, op, "x"), capi::to_ref(x_scale, op, "x_scale"),
                   capi::weight_of(w, op), capi::to_ref_required(out, op, "out"),
                   capi::to_ref(bias, op, "bias"), capi::to_ref(alpha, op, "alpha"));
    gemm::run(b, static_cast<Stream>(stream));
  });
}

b12x_status b12x_linear(b12x_linear_weight w, const b12x_tensor* x, const b12x_tensor* x_scale,
                        const b12x_tensor* out, const b12x_tensor* bias, const b12x_tensor* alpha,
                        void* stream, int64_t expected_m) {
  return capi::guard([&] {
    const char* op = "b12x_linear";
    gemm::linear(capi::weight_of(w, op), capi::to_ref_required(x, op, "x"),
                 capi::to_ref(x_scale, op, "x_scale"), capi::to_ref_required(out, op, "out"),
                 capi::to_ref(bias, op, "bias"), capi::to_ref(alpha, op, "alpha"),
                 static_cast<Stream>(stream), expected_m);
  });
}

b12x_status b12x_ref_linear(const b12x_linear_weight_source* w, const b12x_tensor* x,
                            const b12x_tensor* x_scale, double alpha, const b12x_tensor* bias,
                            const b12x_tensor* out) {
  return capi::guard([&] {
    const char* op = "b12x_ref_linear";
    reference::linear(capi::to_source(w, op), capi::to_ref_required(x, op, "x"),
                      capi::to_ref(x_scale, op, "x_scale"), alpha, capi::to_ref(bias, op, "bias"),
                      capi::to_ref_required(out, op, "out"));
  });
}

b12x_status b12x_ref_linear_dequantize_weight(const b12x_linear_weight_source* w,
                                              const b12x_tensor* out) {
  return capi::guard([&] {
    const char* op = "b12x_ref_linear_dequantize_weight";
    const TensorRef o = capi::to_ref_required(out, op, "out");
    const auto src = capi::to_source(w, op);
    const auto v = reference::linear_dequantize_weight(src);
    B12X_CHECK_ARG(o.device == kHostDevice && o.dtype == DType::kFP64 && o.is_contiguous() &&
                       o.numel() == static_cast<int64_t>(v.size()),
                   op, ": out must be a contiguous host fp64 tensor of ", v.size(), " values, got ",
                   o.describe());
    std::memcpy(o.data, v.data(), v.size() * sizeof(double));
  });
}

}  // extern "C"
