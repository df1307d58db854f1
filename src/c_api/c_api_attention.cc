// C ABI: paged attention, KV append and their CPU references.
#include <cstring>
#include <memory>

#include "b12x/attention.h"
#include "b12x/c_api.h"
#include "b12x/reference/attention.h"
#include "c_api/c_api_util.h"

struct b12x_paged_attention_plan_s {
  b12x::attention::PagedPlan plan;
};
struct b12x_paged_attention_binding_s {
  b12x::attention::PagedBinding binding;
};

namespace {

using namespace b12x;

attention::PagedArgs to_args(const b12x_paged_args* a, const char* op) {
  B12X_CHECK_ARG(a != nullptr, op, ": args is NULL");
  attention::PagedArgs r;
  r.q = capi::to_ref_required(a->q, op, "q");
  r.k_cache = capi::to_ref_required(a->k_cache, op, "k_cache");
  r.v_cache = capi::to_ref_required(a->v_cache, op, "v_cache");
  r.out = capi::to_ref_required(a->out, op, "out");
  r.page_table = capi::to_ref_required(a->page_table, op, "page_table");
  r.cache_seqlens = capi::to_ref_required(a->cache_seqlens, op, "cache_seqlens");
  r.cu_seqlens_q = capi::to_ref_required(a->cu_seqlens_q, op, "cu_seqlens_q");
  r.k_descale = capi::to_ref(a->k_descale, op, "k_descale");
  r.v_descale = capi::to_ref(a->v_descale, op, "v_descale");
  r.sinks = capi::to_ref(a->sinks, op, "sinks");
  r.lse = capi::to_ref(a->lse, op, "lse");
  r.window_left = a->window_left;
  r.softmax_scale = a->softmax_scale;
  r.num_splits = a->num_splits;
  return r;
}

attention::PagedCaps to_caps(const b12x_paged_caps* c, const char* op) {
  B12X_CHECK_ARG(c != nullptr, op, ": caps is NULL");
  B12X_CHECK_ARG(
      c->q_dtype >= 0 && c->q_dtype < kNumDTypes && c->kv_dtype >= 0 && c->kv_dtype < kNumDTypes,
      op, ": dtype codes q=", c->q_dtype, " kv=", c->kv_dtype, " out of range");
  attention::PagedCaps r;
  r.device = c->device;
  r.mode = static_cast<attention::Mode>(c->mode);
  r.q_dtype = static_cast<DType>(c->q_dtype);
  r.kv_dtype = static_cast<DType>(c->kv_dtype);
  r.num_q_heads = c->num_q_heads;
  r.num_kv_heads = c->num_kv_heads;
  r.head_dim_qk = c->head_dim_qk;
  r.head_dim_vo = c->head_dim_vo;
  r.page_size = c->page_size;
  r.max_batch = c->max_batch;
  r.max_page_table_width = c->max_page_table_width;
  r.max_total_q = c->max_total_q;
  r.max_splits = c->max_splits;
  r.use_cuda_graph = c->use_cuda_graph != 0;
  return r;
}

}  // namespace

extern "C" {

b12x_status b12x_attention_paged_plan_create_ex(const b12x_paged_caps* caps, uint32_t flags,
                                                void* stream, b12x_paged_attention_plan* plan) {
  return capi::guard([&] {
    const char* op = "b12x_attention_paged_plan_create";
    B12X_CHECK_ARG(plan != nullptr, op, ": plan output pointer is NULL");
    *plan = nullptr;
    B12X_CHECK_ARG((flags & ~B12X_PAGED_CAPS_KV_PREFIX_STABLE) == 0u, op, ": flags=", flags,
                   " (supported: B12X_PAGED_CAPS_KV_PREFIX_STABLE = 1)");
    attention::PagedCaps c = to_caps(caps, op);
    c.kv_prefix_stable = (flags & B12X_PAGED_CAPS_KV_PREFIX_STABLE) != 0u;
    auto p = std::make_unique<b12x_paged_attention_plan_s>();
    p->plan = attention::plan_paged(c, static_cast<Stream>(stream));
    *plan = p.release();
  });
}

b12x_status b12x_attention_paged_plan_create(const b12x_paged_caps* caps, void* stream,
                                             b12x_paged_attention_plan* plan) {
  return b12x_attention_paged_plan_create_ex(caps, 0u, stream, plan);
}

b12x_status b12x_attention_paged_plan_destroy(b12x_paged_attention_plan plan) {
  return capi::guard([&] { delete plan; });
}

b12x_status b12x_attention_paged_plan_info(b12x_paged_attention_plan plan,
                                           b12x_paged_plan_info* info) {
  return capi::guard([&] {
    const char* op = "b12x_attention_paged_plan_info";
    B12X_CHECK_ARG(plan != nullptr && info != nullptr, op, ": plan or info is NULL");
    const auto& p = plan->plan;
    std::memset(info, 0, sizeof(*info));
    info->scratch_bytes = p.scratch_bytes;
    info->partial_rows = p.partial_rows;
    info->lse_offset = p.off_lse;
    info->tile_rows = p.tile_rows;
    info->tile_kv = p.tile_kv;
    info->split_limit = p.split_limit;
    info->target_ctas = p.target_ctas;
    std::strncpy(info->kernel, p.kernel.c_str(), sizeof(info->kernel) - 1);
  });
}

b12x_status b12x_attention_paged_bind(b12x_paged_attention_plan plan, const b12x_tensor* scratch,
                                      const b12x_paged_args* args,
                                      b12x_paged_attention_binding* binding) {
  return capi::guard([&] {
    const char* op = "b12x_attention_paged_bind";
    B12X_CHECK_ARG(plan != nullptr && binding != nullptr, op, ": plan or binding pointer is NULL");
    *binding = nullptr;
    auto b = std::make_unique<b12x_paged_attention_binding_s>();
    b->binding = attention::bind_paged(plan->plan, capi::to_ref_required(scratch, op, "scratch"),
                                       to_args(args, op));
    *binding = b.release();
  });
}

b12x_status b12x_attention_paged_binding_destroy(b12x_paged_attention_binding binding) {
  return capi::guard([&] { delete binding; });
}

b12x_status b12x_attention_paged_binding_info(b12x_paged_attention_binding binding,
                                              int32_t* num_splits, int32_t* num_row_tiles) {
  return capi::guard([&] {
    B12X_CHECK_ARG(binding != nullptr, "b12x_attention_paged_binding_info: binding is NULL");
    if (num_splits) *num_splits = binding->binding.num_splits;
    if (num_row_tiles) *num_row_tiles = binding->binding.num_row_tiles;
  });
}

b12x_status b12x_attention_paged_run(b12x_paged_attention_binding binding, void* stream) {
  return capi::guard([&] {
    B12X_CHECK_ARG(binding != nullptr, "b12x_attention_paged_run: binding is NULL");
    attention::run_paged(binding->binding, static_cast<Stream>(stream));
  });
}

b12x_status b12x_attention_paged_forward(b12x_paged_attention_plan plan, const b12x_tensor* scratch,
                                         const b12x_paged_args* args, void* stream) {
  return capi::guard([&] {
    const char* op = "b12x_attention_paged_forward";
    B12X_CHECK_ARG(plan != nullptr, op, ": plan is NULL");
    const auto b = attention::bind_paged(plan->plan, capi::to_ref_required(scratch, op, "scratch"),
                                         to_args(args, op));
    attention::run_paged(b, static_cast<Stream>(stream));
  });
}

b12x_status b12x_attention_append_kv(const b12x_tensor* k, const b12x_tensor* v,
                                     const b12x_tensor* k_cache, const b12x_tensor* v_cache,
                                     const b12x_tensor* slot_mapping, const b12x_tensor* k_scale,
                                     const b12x_tensor* v_scale, void* stream) {
  return capi::guard([&] {
    const char* op = "b12x_attention_append_kv";
    attention::append_kv(capi::to_ref_required(k, op, "k"), capi::to_ref_required(v, op, "v"),
                         capi::to_ref_required(k_cache, op, "k_cache"),
                         capi::to_ref_required(v_cache, op, "v_cache"),
                         capi::to_ref_required(slot_mapping, op, "slot_mapping"),
                         capi::to_ref(k_scale, op, "k_scale"), capi::to_ref(v_scale, op, "v_scale"),
                         static_cast<Stream>(stream));
  });
}

b12x_status b12x_ref_paged_attention(const b12x_paged_args* args) {
  return capi::guard(
      [&] { reference::paged_attention(to_args(args, "b12x_ref_paged_attention")); });
}

b12x_status b12x_ref_append_kv(const b12x_tensor* k, const b12x_tensor* v,
                               const b12x_tensor* k_cache, const b12x_tensor* v_cache,
                               const b12x_tensor* slot_mapping, const b12x_tensor* k_scale,
                               const b12x_tensor* v_scale) {
  return capi::guard([&] {
    const char* op = "b12x_ref_append_kv";
    reference::append_kv(capi::to_ref_required(k, op, "k"), capi::to_ref_required(v, op, "v"),
                         capi::to_ref_required(k_cache, op, "k_cache"),
                         capi::to_ref_required(v_cache, op, "v_cache"),
                         capi::to_ref_required(slot_mapping, op, "slot_mapping"),
                         capi::to_ref(k_scale, op, "k_scale"),
                         capi::to_ref(v_scale, op, "v_scale"));
  });
}

}  // extern "C"
