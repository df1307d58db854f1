// C ABI: fused MoE.
#include <cstring>

#include "b12x/c_api.h"
#include "b12x/moe.h"
#include "b12x/reference/moe.h"
#include "c_api/c_api_util.h"

struct b12x_moe_weights_s {
  b12x::moe::WeightsPlan plan;
  b12x::moe::PreparedExperts experts;
};
struct b12x_moe_plan_s {
  b12x::moe::Plan plan;
};

namespace {
using namespace b12x;

moe::WeightsPlanArgs args_of(const b12x_moe_weights_plan_desc* d) {
  B12X_CHECK_ARG(d != nullptr, "fused_moe: weights plan descriptor is NULL");
  B12X_CHECK_ARG(d->quant_mode >= 0 && d->quant_mode <= 5, "fused_moe: quant_mode=", d->quant_mode,
                 " (supported 0..5)");
  B12X_CHECK_ARG(d->source_format >= 0 && d->source_format <= 2,
                 "fused_moe: source_format=", d->source_format, " (supported 0..2)");
  B12X_CHECK_ARG(d->activation >= 0 && d->activation <= 3, "fused_moe: activation=", d->activation,
                 " (supported 0..3)");
  B12X_CHECK_ARG(d->w13_layout == 0 || d->w13_layout == 1, "fused_moe: w13_layout=", d->w13_layout,
                 " (supported 0 = w13, 1 = w31)");
  for (int32_t t : {d->params_dtype, d->ggml_w1_dtype, d->ggml_w2_dtype})
    B12X_CHECK_ARG(t >= 0 && t < kNumDTypes, "fused_moe: dtype code ", t, " is invalid");
  moe::WeightsPlanArgs a;
  a.quant_mode = static_cast<moe::QuantMode>(d->quant_mode);
  a.source_format = static_cast<moe::SourceFormat>(d->source_format);
  a.activation = static_cast<moe::Activation>(d->activation);
  a.params_dtype = static_cast<DType>(d->params_dtype);
  a.num_experts = d->num_experts;
  a.hidden_size = d->hidden_size;
  a.intermediate_size = d->intermediate_size;
  a.w13_layout = static_cast<moe::W13Layout>(d->w13_layout);
  a.ggml_w1_dtype = static_cast<DType>(d->ggml_w1_dtype);
  a.ggml_w2_dtype = static_cast<DType>(d->ggml_w2_dtype);
  a.has_expert_bias = d->has_expert_bias != 0;
  a.has_expert_map = d->has_expert_map != 0;
  a.has_lora = d->has_lora != 0;
  a.ep_size = d->ep_size;
  return a;
}

moe::Caps caps_of(const b12x_moe_caps* c) {
  B12X_CHECK_ARG(c != nullptr, "fused_moe: caps is NULL");
  moe::Caps k;
  k.max_tokens = c->max_tokens;
  k.num_topk = c->num_topk;
  k.device = c->device;
  k.apply_router_weight_on_input = c->apply_router_weight_on_input != 0;
  k.swiglu_limit = c->swiglu_limit;
  k.swiglu_alpha = c->swiglu_alpha;
  k.swiglu_beta = c->swiglu_beta;
  k.deterministic_output = c->deterministic_output != 0;
  k.regime = c->regime;
  return k;
}

moe::SourceWeights sources_of(const b12x_tensor* w1, const b12x_tensor* w1s, const b12x_tensor* w1g,
                              const b12x_tensor* a1g, const b12x_tensor* w2, const b12x_tensor* w2s,
                              const b12x_tensor* w2g, const b12x_tensor* a2g, const char* op) {
  moe::SourceWeights s;
  s.w1 = capi::to_ref_required(w1, op, "w1");
  s.w1_scale = capi::to_ref(w1s, op, "w1_blockscale");
  s.w1_global_scale = capi::to_ref(w1g, op, "w1_global_scale");
  s.a1_gscale = capi::to_ref(a1g, op, "a1_gscale");
  s.w2 = capi::to_ref_required(w2, op, "w2");
  s.w2_scale = capi::to_ref(w2s, op, "w2_blockscale");
  s.w2_global_scale = capi::to_ref(w2g, op, "w2_global_scale");
  s.a2_gscale = capi::to_ref(a2g, op, "a2_gscale");
  return s;
}

moe::Binding bind_of(b12x_moe_plan plan, const b12x_tensor* scratch, const b12x_tensor* a,
                     b12x_moe_weights weights, const b12x_tensor* tw, const b12x_tensor* ti,
                     const b12x_tensor* out) {
  const char* op = "fused_moe.bind";
  B12X_CHECK_ARG(plan != nullptr, op, ": plan is NULL");
  B12X_CHECK_ARG(weights != nullptr, op, ": experts (weights) is NULL");
  return moe::bind(
      plan->plan, capi::to_ref_required(scratch, op, "scratch"), capi::to_ref_required(a, op, "a"),
      weights->experts, capi::to_ref_required(tw, op, "topk_weights"),
      capi::to_ref_required(ti, op, "topk_ids"), capi::to_ref_required(out, op, "output"));
}
}  // namespace

extern "C" {

b12x_status b12x_moe_plan_weights(const b12x_moe_weights_plan_desc* desc, int64_t* bytes,
                                  int32_t* discards) {
  return capi::guard([&] {
    const moe::WeightsPlan p = moe::plan_weights(args_of(desc));
    if (bytes) *bytes = p.prepared_bytes;
    if (discards) *discards = p.discards_source_parameters ? 1 : 0;
  });
}

b12x_status b12x_moe_prepare_weights(
    const b12x_moe_weights_plan_desc* desc, const b12x_tensor* w1, const b12x_tensor* w1_scale,
    const b12x_tensor* w1_global_scale, const b12x_tensor* a1_gscale, const b12x_tensor* w2,
    const b12x_tensor* w2_scale, const b12x_tensor* w2_global_scale, const b12x_tensor* a2_gscale,
    void* stream, b12x_moe_weights* weights) {
  return capi::guard([&] {
    const char* op = "fused_moe.prepare_weights";
    B12X_CHECK_ARG(weights != nullptr, op, ": weights (out) is NULL");
    const moe::WeightsPlan plan = moe::plan_weights(args_of(desc));
    const moe::SourceWeights src = sources_of(w1, w1_scale, w1_global_scale, a1_gscale, w2,
                                              w2_scale, w2_global_scale, a2_gscale, op);
    b12x_moe_weights w = *weights;
    std::unique_ptr<b12x_moe_weights_s> fresh;
    if (w == nullptr) {
      fresh = std::make_unique<b12x_moe_weights_s>();
      w = fresh.get();
    }
    moe::prepare_weights(plan, src, w->experts, static_cast<Stream>(stream));
    w->plan = plan;
    if (fresh) *weights = fresh.release();
  });
}

b12x_status b12x_moe_weights_destroy(b12x_moe_weights weights) {
  return capi::guard([&] { delete weights; });
}

b12x_status b12x_moe_weights_storage(b12x_moe_weights weights, uint64_t* ptr, int64_t* bytes) {
  return capi::guard([&] {
    B12X_CHECK_ARG(weights != nullptr, "fused_moe: weights is NULL");
    if (ptr) *ptr = reinterpret_cast<uint64_t>(weights->experts.storage_ptr());
    if (bytes) *bytes = weights->plan.prepared_bytes;
  });
}

b12x_status b12x_moe_plan_create(const b12x_moe_weights_plan_desc* desc, const b12x_moe_caps* caps,
                                 b12x_moe_plan* plan) {
  return capi::guard([&] {
    B12X_CHECK_ARG(plan != nullptr, "fused_moe.plan: plan (out) is NULL");
    const moe::WeightsPlan wp = moe::plan_weights(args_of(desc));
    moe::Caps c = caps_of(caps);
    c.weight_plan = &wp;
    auto p = std::make_unique<b12x_moe_plan_s>();
    p->plan = moe::plan(c);
    p->plan.caps.weight_plan = &p->plan.weights;
    *plan = p.release();
  });
}

b12x_status b12x_moe_plan_destroy(b12x_moe_plan plan) {
  return capi::guard([&] { delete plan; });
}

b12x_status b12x_moe_plan_scratch_bytes(b12x_moe_plan plan, int64_t* bytes) {
  return capi::guard([&] {
    B12X_CHECK_ARG(plan != nullptr && bytes != nullptr, "fused_moe: NULL argument");
    *bytes = plan->plan.scratch_bytes;
  });
}

b12x_status b12x_moe_plan_execution(const b12x_moe_weights_plan_desc* desc,
                                    const b12x_moe_caps* caps, int64_t num_tokens, char* impl,
                                    size_t impl_len, char* exec, size_t exec_len) {
  return capi::guard([&] {
    const moe::WeightsPlan wp = moe::plan_weights(args_of(desc));
    moe::Caps c = caps_of(caps);
    c.weight_plan = &wp;
    const moe::ExecutionPlan e = moe::plan_execution(num_tokens, c);
    auto put = [](char* dst, size_t n, const std::string& s) {
      if (!dst || n == 0) return;
      std::strncpy(dst, s.c_str(), n - 1);
      dst[n - 1] = 0;
    };
    put(impl, impl_len, e.implementation);
    put(exec, exec_len, e.execution);
  });
}

b12x_status b12x_moe_bind(b12x_moe_plan plan, const b12x_tensor* scratch, const b12x_tensor* a,
                          b12x_moe_weights weights, const b12x_tensor* topk_weights,
                          const b12x_tensor* topk_ids, const b12x_tensor* output) {
  return capi::guard([&] { bind_of(plan, scratch, a, weights, topk_weights, topk_ids, output); });
}

b12x_status b12x_moe_run(b12x_moe_plan plan, const b12x_tensor* scratch, const b12x_tensor* a,
                         b12x_moe_weights weights, const b12x_tensor* topk_weights,
                         const b12x_tensor* topk_ids, const b12x_tensor* output, void* stream) {
  return capi::guard([&] {
    const moe::Binding b = bind_of(plan, scratch, a, weights, topk_weights, topk_ids, output);
    moe::run(b, static_cast<Stream>(stream));
  });
}

int32_t b12x_moe_is_supported(int32_t device) {
  return moe::is_supported(device) ? 1 : 0;
}

b12x_status b12x_ref_moe(const b12x_moe_weights_plan_desc* desc, const b12x_moe_caps* caps,
                         const b12x_tensor* a, const b12x_tensor* topk_ids,
                         const b12x_tensor* topk_weights, const b12x_tensor* w1,
                         const b12x_tensor* w1_scale, const b12x_tensor* w1_global_scale,
                         const b12x_tensor* a1_gscale, const b12x_tensor* w2,
                         const b12x_tensor* w2_scale, const b12x_tensor* w2_global_scale,
                         const b12x_tensor* a2_gscale, const b12x_tensor* output) {
  return capi::guard([&] {
    const char* op = "b12x_ref_moe";
    const moe::WeightsPlanArgs wa = args_of(desc);
    const moe::Caps c = caps_of(caps);
    reference::MoeRefArgs A;
    A.quant_mode = wa.quant_mode;
    A.source_format = wa.source_format;
    A.activation = wa.activation;
    A.w13_layout = wa.w13_layout;
    A.swiglu_limit = c.swiglu_limit;
    A.swiglu_alpha = c.swiglu_alpha;
    A.swiglu_beta = c.swiglu_beta;
    A.apply_router_weight_on_input = c.apply_router_weight_on_input;
    A.a = capi::to_ref_required(a, op, "a");
    A.topk_ids = capi::to_ref_required(topk_ids, op, "topk_ids");
    A.topk_weights = capi::to_ref_required(topk_weights, op, "topk_weights");
    A.weights = sources_of(w1, w1_scale, w1_global_scale, a1_gscale, w2, w2_scale, w2_global_scale,
                           a2_gscale, op);
    A.output = capi::to_ref_required(output, op, "output");
    for (const TensorRef* t :
         {&A.a, &A.topk_ids, &A.topk_weights, &A.weights.w1, &A.weights.w2, &A.output})
      check_device(*t, op, "tensor", kHostDevice);
    reference::fused_moe(A);
  });
}

}  // extern "C"
