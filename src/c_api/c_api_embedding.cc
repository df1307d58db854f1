// C ABI of the Q8_0 embedding lookup and its CPU reference.
#include "b12x/c_api/embedding.h"

#include "b12x/embedding.h"
#include "b12x/reference/embedding.h"
#include "c_api/c_api_util.h"

using namespace b12x;
using capi::to_ref_required;

struct b12x_embedding_plan_s {
  EmbeddingPlan plan;
  EmbeddingBinding binding;
  bool bound = false;
};

namespace {
b12x_embedding_plan_s& handle(b12x_embedding_plan p, const char* op) {
  B12X_CHECK_ARG(p != nullptr, op, ": plan is NULL");
  return *p;
}
const EmbeddingBinding& bound(b12x_embedding_plan p, const char* op) {
  auto& h = handle(p, op);
  B12X_CHECK_ARG(h.bound, op, ": plan has no binding (call b12x_embedding_bind first)");
  return h.binding;
}
}  // namespace

extern "C" {

b12x_status b12x_embedding_plan_create(const b12x_embedding_caps* caps, b12x_embedding_plan* plan) {
  return capi::guard([&] {
    const char* op = "b12x_embedding_plan_create";
    B12X_CHECK_ARG(caps != nullptr && plan != nullptr, op, ": caps and plan must not be NULL");
    *plan = nullptr;
    EmbeddingCaps c;
    c.vocab = caps->vocab;
    c.dim = caps->dim;
    c.max_tokens = caps->max_tokens;
    B12X_CHECK_ARG(caps->id_dtype >= 0 && caps->id_dtype < kNumDTypes, op, ": id_dtype code ",
                   caps->id_dtype, " is not a dtype");
    B12X_CHECK_ARG(caps->out_dtype >= 0 && caps->out_dtype < kNumDTypes, op, ": out_dtype code ",
                   caps->out_dtype, " is not a dtype");
    c.id_dtype = static_cast<DType>(caps->id_dtype);
    c.out_dtype = static_cast<DType>(caps->out_dtype);
    c.device = caps->device;
    auto* h = new b12x_embedding_plan_s;
    try {
      h->plan = plan_embedding(c);
    } catch (...) {
      delete h;
      throw;
    }
    *plan = h;
  });
}

b12x_status b12x_embedding_plan_destroy(b12x_embedding_plan plan) {
  return capi::guard([&] { delete plan; });
}

b12x_status b12x_embedding_scratch_bytes(b12x_embedding_plan plan, int64_t* bytes) {
  return capi::guard([&] {
    auto& h = handle(plan, "b12x_embedding_scratch_bytes");
    B12X_CHECK_ARG(bytes != nullptr, "b12x_embedding_scratch_bytes: bytes is NULL");
    *bytes = h.plan.scratch_bytes;
  });
}

b12x_status b12x_embedding_bind(b12x_embedding_plan plan, const b12x_tensor* scratch,
                                const b12x_tensor* weight, const b12x_tensor* ids,
                                const b12x_tensor* out) {
  return capi::guard([&] {
    const char* op = "bind_embedding";
    auto& h = handle(plan, op);
    h.bound = false;
    h.binding = bind_embedding(h.plan, to_ref_required(scratch, op, "scratch"),
                               to_ref_required(weight, op, "weight"),
                               to_ref_required(ids, op, "ids"), to_ref_required(out, op, "out"));
    h.bound = true;
  });
}

b12x_status b12x_embedding_run(b12x_embedding_plan plan, void* stream) {
  return capi::guard(
      [&] { run_embedding(bound(plan, "run_embedding"), static_cast<Stream>(stream)); });
}

b12x_status b12x_embedding_status(b12x_embedding_plan plan, void* stream, int64_t* bad_tokens,
                                  int64_t* first_bad_token, int64_t* first_bad_id) {
  return capi::guard([&] {
    const EmbeddingStatus s =
        embedding_status(bound(plan, "embedding_status"), static_cast<Stream>(stream));
    if (bad_tokens) *bad_tokens = s.bad_tokens;
    if (first_bad_token) *first_bad_token = s.first_bad_token;
    if (first_bad_id) *first_bad_id = s.first_bad_id;
  });
}

b12x_status b12x_embedding_check(b12x_embedding_plan plan, void* stream) {
  return capi::guard(
      [&] { embedding_check(bound(plan, "embedding_check"), static_cast<Stream>(stream)); });
}

b12x_status b12x_embedding_q8_0(const b12x_tensor* weight, const b12x_tensor* ids,
                                const b12x_tensor* out, void* stream) {
  return capi::guard([&] {
    const char* op = "embedding_q8_0";
    embedding_q8_0(to_ref_required(weight, op, "weight"), to_ref_required(ids, op, "ids"),
                   to_ref_required(out, op, "out"), static_cast<Stream>(stream));
  });
}

b12x_status b12x_ref_embedding_q8_0(const b12x_tensor* weight, const b12x_tensor* ids,
                                    const b12x_tensor* out, int64_t* bad_tokens,
                                    int64_t* first_bad_token, int64_t* first_bad_id) {
  return capi::guard([&] {
    const char* op = "reference::embedding_q8_0";
    const EmbeddingStatus s =
        reference::embedding_q8_0(to_ref_required(weight, op, "weight"),
                                  to_ref_required(ids, op, "ids"), to_ref_required(out, op, "out"));
    if (bad_tokens) *bad_tokens = s.bad_tokens;
    if (first_bad_token) *first_bad_token = s.first_bad_token;
    if (first_bad_id) *first_bad_id = s.first_bad_id;
  });
}

}  // extern "C"
