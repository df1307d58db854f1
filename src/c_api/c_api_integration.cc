// C ABI of the warm-up (layers described in JSON, see b12x/c_api/integration.h) and of the
// kernel-resolution registry.
#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "b12x/c_api.h"
#include "b12x/checkpoint.h"
#include "b12x/runtime.h"
#include "b12x/status.h"
#include "b12x/warmup.h"
#include "c_api/c_api_util.h"
#include "checkpoint/internal.h"
#include "checkpoint/json.h"

using namespace b12x;

struct b12x_checkpoint_moe_s {
  std::unique_ptr<checkpoint::MoeExpertsSource> src;
};

namespace {

constexpr const char* kOp = "b12x_warmup";

void copy_string(const std::string& s, char* buf, size_t len, size_t* needed) {
  if (needed) *needed = s.size() + 1;
  if (buf && len > 0) {
    const size_t n = std::min(s.size(), len - 1);
    std::memcpy(buf, s.data(), n);
    buf[n] = 0;
  }
}

/// Typed, checked access to one layer object; every key must be consumed (a typo is an error,
/// not a silently ignored option).
class Fields {
 public:
  Fields(const json::Value& v, size_t index)
      : v_(v), where_("layers[" + std::to_string(index) + "]") {
    B12X_CHECK_ARG(v.is_object(), kOp, ": ", where_, " is not a JSON object");
  }
  const json::Value* get(const char* key) {
    used_.insert(key);
    return v_.find(key);
  }
  std::string str(const char* key, const char* def) {
    const json::Value* x = get(key);
    if (x == nullptr) {
      B12X_CHECK_ARG(def != nullptr, kOp, ": ", where_, ".", key, " is required");
      return def;
    }
    B12X_CHECK_ARG(x->is_string(), kOp, ": ", where_, ".", key, " must be a string");
    return x->as_string();
  }
  int64_t integer(const char* key, const int64_t* def) {
    const json::Value* x = get(key);
    if (x == nullptr) {
      B12X_CHECK_ARG(def != nullptr, kOp, ": ", where_, ".", key, " is required");
      return *def;
    }
    B12X_CHECK_ARG(x->is_integer(), kOp, ": ", where_, ".", key, " must be an integer");
    return x->as_int();
  }
  int64_t req(const char* key) { return integer(key, nullptr); }
  int64_t opt(const char* key, int64_t def) { return integer(key, &def); }
  int opt_int(const char* key, int64_t def) {
    const int64_t v = opt(key, def);
    B12X_CHECK_ARG(v >= INT32_MIN && v <= INT32_MAX, kOp, ": ", where_, ".", key, "=", v,
                   " does not fit int32");
    return static_cast<int>(v);
  }
  int req_int(const char* key) {
    const int64_t v = req(key);
    B12X_CHECK_ARG(v >= INT32_MIN && v <= INT32_MAX, kOp, ": ", where_, ".", key, "=", v,
                   " does not fit int32");
    return static_cast<int>(v);
  }
  bool boolean(const char* key, bool def) {
    const json::Value* x = get(key);
    if (x == nullptr) return def;
    B12X_CHECK_ARG(x->is_bool(), kOp, ": ", where_, ".", key, " must be true or false");
    return x->as_bool();
  }
  DType dtype(const char* key, const char* def) { return dtype_from_name(str(key, def)); }
  /// Throws naming the first key no field read.
  void finish() {
    for (const auto& [k, _] : v_.as_object())
      B12X_CHECK_ARG(used_.count(k) != 0, kOp, ": ", where_, " has unknown key '", k, "'");
  }
  const std::string& where() const { return where_; }

 private:
  const json::Value& v_;
  std::string where_;
  std::set<std::string> used_;
};

attention::Mode mode_from_name(const std::string& s, const std::string& where) {
  if (s == "decode") return attention::Mode::kDecode;
  if (s == "extend") return attention::Mode::kExtend;
  if (s == "verify") return attention::Mode::kVerify;
  B12X_FAIL(Status::kInvalidArgument, kOp, ": ", where, ".mode='", s,
            "' (supported: decode, extend, verify)");
}

WarmupLayers parse_layers(const char* text) {
  B12X_CHECK_ARG(text != nullptr, kOp, ": layers_json is NULL");
  const json::Value root = json::parse(text, "layers_json");
  B12X_CHECK_ARG(root.is_array(), kOp, ": layers_json must be a JSON array of layer objects");
  WarmupLayers L;
  for (size_t i = 0; i < root.as_array().size(); ++i) {
    Fields f(root.as_array()[i], i);
    const std::string kind = f.str("kind", nullptr);
    const std::string name = f.str("name", "");
    const int device = f.opt_int("device", 0);
    if (kind == "linear") {
      WarmupLinear l;
      l.name = name;
      l.caps.device = device;
      l.caps.format = gemm::format_from_name(f.str("format", nullptr));
      l.caps.in_features = f.req("in_features");
      l.caps.out_features = f.req("out_features");
      l.caps.act_dtype = f.dtype("act_dtype", "bf16");
      l.caps.out_dtype = f.dtype("out_dtype", "bf16");
      l.caps.expected_m = f.opt("expected_m", 0);
      l.quantize_from = f.dtype("quantize_from", "bf16");
      L.linear.push_back(l);
    } else if (kind == "moe") {
      WarmupMoe m;
      m.name = name;
      m.caps.device = device;
      moe::WeightsPlanArgs& a = m.weights;
      a.quant_mode = moe::quant_mode_from_name(f.str("quant_mode", nullptr));
      a.source_format = moe::source_format_from_name(f.str("source_format", nullptr));
      a.activation = moe::activation_from_name(f.str("activation", "silu"));
      a.params_dtype = f.dtype("params_dtype", "bf16");
      a.num_experts = f.req("num_experts");
      a.hidden_size = f.req("hidden_size");
      a.intermediate_size = f.req("intermediate_size");
      a.w13_layout = moe::w13_layout_from_name(f.str("w13_layout", "w31"));
      a.ggml_w1_dtype = f.dtype("ggml_w1_dtype", "q8_0");
      a.ggml_w2_dtype = f.dtype("ggml_w2_dtype", "q8_0");
      m.caps.num_topk = f.req("num_topk");
      m.caps.apply_router_weight_on_input = f.boolean("apply_router_weight_on_input", false);
      L.moe.push_back(m);
    } else if (kind == "attention") {
      WarmupAttention at;
      at.name = name;
      attention::PagedCaps& c = at.caps;
      c.device = device;
      c.mode = mode_from_name(f.str("mode", "decode"), f.where());
      c.q_dtype = f.dtype("q_dtype", "bf16");
      c.kv_dtype = f.dtype("kv_dtype", "bf16");
      c.num_q_heads = f.req_int("num_q_heads");
      c.num_kv_heads = f.req_int("num_kv_heads");
      c.head_dim_qk = f.req_int("head_dim_qk");
      c.head_dim_vo = f.opt_int("head_dim_vo", c.head_dim_qk);
      c.page_size = f.req_int("page_size");
      c.max_batch = f.opt_int("max_batch", 1);
      c.max_page_table_width = f.req_int("max_page_table_width");
      c.max_total_q = f.opt_int("max_total_q", c.max_batch);
      c.max_splits = f.opt_int("max_splits", 0);
      L.attention.push_back(at);
    } else if (kind == "embedding") {
      WarmupEmbedding e;
      e.name = name;
      e.caps.device = device;
      e.caps.vocab = f.req("vocab");
      e.caps.dim = f.req("dim");
      e.caps.id_dtype = f.dtype("id_dtype", "int32");
      e.caps.out_dtype = f.dtype("out_dtype", "bf16");
      L.embedding.push_back(e);
    } else {
      B12X_FAIL(Status::kInvalidArgument, kOp, ": ", f.where(), ".kind='", kind,
                "' (supported: linear, moe, attention, embedding)");
    }
    f.finish();
  }
  return L;
}

}  // namespace

extern "C" {

b12x_status b12x_warmup(const char* layers_json, const int64_t* token_counts,
                        int32_t num_token_counts, void* stream, char* buf, size_t len,
                        size_t* needed) {
  return capi::guard([&] {
    B12X_CHECK_ARG(num_token_counts >= 1 && token_counts != nullptr, kOp,
                   ": token_counts must hold at least one count (got num_token_counts=",
                   num_token_counts, token_counts == nullptr ? ", token_counts=NULL" : "", ")");
    const WarmupLayers layers = parse_layers(layers_json);
    const std::vector<int64_t> counts(token_counts, token_counts + num_token_counts);
    const WarmupReport r = warmup(layers, counts, static_cast<Stream>(stream));
    copy_string(r.to_json(), buf, len, needed);
  });
}

b12x_status b12x_checkpoint_load_moe(const char* dir, const char* prefix, int64_t topk,
                                     int32_t compute_capability, int32_t activation,
                                     int32_t act_format, int32_t params_dtype,
                                     b12x_checkpoint_moe* out) {
  return capi::guard([&] {
    const char* op = "b12x_checkpoint_load_moe";
    B12X_CHECK_ARG(dir != nullptr && prefix != nullptr && out != nullptr, op,
                   ": dir, prefix and out must not be NULL");
    B12X_CHECK_ARG(activation >= 1 && activation <= 7, op, ": activation=", activation,
                   " (supported: B12X_ACTIVATION_SILU .. B12X_ACTIVATION_OTHER)");
    B12X_CHECK_ARG(act_format >= 0 && act_format <= 6, op, ": act_format=", act_format,
                   " (supported: B12X_ACT_AUTO .. B12X_ACT_MXFP4)");
    B12X_CHECK_ARG(params_dtype == B12X_DTYPE_BF16 || params_dtype == B12X_DTYPE_FP16, op,
                   ": params_dtype=", params_dtype, " (supported: bf16, fp16)");
    checkpoint::MoeLoadOptions o;
    o.activation = static_cast<selection::Activation>(activation);
    o.act = static_cast<selection::ActFormat>(act_format);
    o.params_dtype = static_cast<DType>(params_dtype);
    o.compute_capability = compute_capability;
    o.topk = topk;
    const checkpoint::CheckpointDir ck = checkpoint::CheckpointDir::open(dir);
    const checkpoint::QuantConfig cfg = checkpoint::QuantConfig::from_dir(dir);
    auto h = std::make_unique<b12x_checkpoint_moe_s>();
    h->src = checkpoint::load_moe_experts(ck, cfg, prefix, o);
    *out = h.release();
  });
}

b12x_status b12x_checkpoint_moe_destroy(b12x_checkpoint_moe m) {
  return capi::guard([&] { delete m; });
}

b12x_status b12x_checkpoint_moe_json(b12x_checkpoint_moe m, char* buf, size_t len, size_t* needed) {
  return capi::guard([&] {
    B12X_CHECK_ARG(m != nullptr && m->src, "b12x_checkpoint_moe_json: handle is NULL");
    const checkpoint::MoeExpertsSource& s = *m->src;
    const moe::WeightsPlanArgs& a = s.plan_args;
    json::Value v = json::Value::object();
    v.set("prefix", json::Value::string(s.prefix));
    v.set("quant", checkpoint::layer_quant_json(s.quant));
    v.set("selection", json::parse(s.selection.to_json(), "selection"));
    v.set("num_experts", json::Value::integer(s.num_experts));
    v.set("hidden", json::Value::integer(s.hidden));
    v.set("intermediate", json::Value::integer(s.intermediate));
    v.set("gated", json::Value::boolean(s.gated));
    json::Value p = json::Value::object();
    p.set("quant_mode", json::Value::string(moe::quant_mode_name(a.quant_mode)));
    p.set("source_format", json::Value::string(moe::source_format_name(a.source_format)));
    p.set("activation", json::Value::string(moe::activation_name(a.activation)));
    p.set("params_dtype", json::Value::string(dtype_name(a.params_dtype)));
    p.set("w13_layout", json::Value::string(a.w13_layout == moe::W13Layout::kW13 ? "w13" : "w31"));
    p.set("ggml_w1_dtype", json::Value::string(dtype_name(a.ggml_w1_dtype)));
    p.set("ggml_w2_dtype", json::Value::string(dtype_name(a.ggml_w2_dtype)));
    v.set("plan", std::move(p));
    copy_string(json::dump(v), buf, len, needed);
  });
}

b12x_status b12x_checkpoint_moe_tensor(b12x_checkpoint_moe m, const char* which, b12x_tensor* out) {
  return capi::guard([&] {
    const char* op = "b12x_checkpoint_moe_tensor";
    B12X_CHECK_ARG(m != nullptr && m->src && which != nullptr && out != nullptr, op,
                   ": handle, which and out must not be NULL");
    const moe::SourceWeights& s = m->src->source;
    const std::string w = which;
    const TensorRef* t = w == "w1"                ? &s.w1
                         : w == "w1_scale"        ? &s.w1_scale
                         : w == "w1_global_scale" ? &s.w1_global_scale
                         : w == "a1_gscale"       ? &s.a1_gscale
                         : w == "w2"              ? &s.w2
                         : w == "w2_scale"        ? &s.w2_scale
                         : w == "w2_global_scale" ? &s.w2_global_scale
                         : w == "a2_gscale"       ? &s.a2_gscale
                                                  : nullptr;
    B12X_CHECK_ARG(t != nullptr, op, ": which='", w,
                   "' (supported: w1, w1_scale, w1_global_scale, a1_gscale, w2, w2_scale, "
                   "w2_global_scale, a2_gscale)");
    *out = b12x_tensor{};
    out->data = t->data;
    out->dtype = static_cast<int32_t>(t->dtype);
    out->ndim = t->data ? t->ndim : 0;
    for (int i = 0; i < out->ndim; ++i) {
      out->shape[i] = t->shape[i];
      out->strides[i] = t->stride[i];
    }
    out->device = B12X_HOST_DEVICE;
  });
}

b12x_status b12x_resolved_kernels_json(char* buf, size_t len, size_t* needed) {
  return capi::guard([&] {
    json::Value a = json::Value::array();
    for (const KernelResolution& k : resolved_kernels()) {
      json::Value e = json::Value::object();
      e.set("device", json::Value::integer(k.device));
      e.set("op", json::Value::string(k.op));
      e.set("signature", json::Value::string(k.signature));
      e.set("shape", json::Value::string(k.shape));
      e.set("plans", json::Value::integer(k.plans));
      a.push(std::move(e));
    }
    copy_string(json::dump(a), buf, len, needed);
  });
}

b12x_status b12x_clear_resolved_kernels(void) {
  return capi::guard([&] { clear_resolved_kernels(); });
}

}  // extern "C"
