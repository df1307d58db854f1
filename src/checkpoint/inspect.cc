// `inspect`: every layer of a checkpoint, its format, bytes and the b12x path (or why not).
#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>

#include "b12x/checkpoint.h"
#include "b12x/status.h"
#include "checkpoint/internal.h"
#include "checkpoint/json.h"

namespace b12x::checkpoint {

namespace {

namespace sel = b12x::selection;

std::string last_component(const std::string& p) {
  const size_t dot = p.rfind('.');
  return dot == std::string::npos ? p : p.substr(dot + 1);
}
std::string parent_of(const std::string& p) {
  const size_t dot = p.rfind('.');
  return dot == std::string::npos ? "" : p.substr(0, dot);
}

// The MoE stack a tensor belongs to ("...experts"), or "".
std::string experts_group(const std::string& tensor) {
  const size_t at = tensor.find(".experts.");
  if (at == std::string::npos) return "";
  return tensor.substr(0, at + 8);
}

struct ModelInfo {
  DType io = DType::kBF16;
  sel::Activation act = sel::Activation::kSiLU;
  int64_t topk = 0;
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
};

int64_t int_field(const json::Value& root, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (const json::Value* v = root.find(k); v && v->is_integer()) return v->as_int();
  return 0;
}

ModelInfo model_info(const std::string& dir) {
  ModelInfo m;
  const std::string path = dir + "/config.json";
  if (!file_exists(path)) return m;
  json::Value root;
  try {
    root = json::parse(read_text_file(path), path);
  } catch (const Error& e) {
    throw Error(Status::kIoError, e.what());
  }
  // Multimodal configs keep the language model under text_config.
  const json::Value* text = root.find("text_config");
  const json::Value& r = text && text->is_object() ? *text : root;
  for (const char* key : {"torch_dtype", "dtype"})
    if (const json::Value* v = r.find(key); v && v->is_string()) {
      if (v->as_string() == "float16") m.io = DType::kFP16;
      break;
    }
  std::string act, model_type;
  if (const json::Value* v = r.find("hidden_act"); v && v->is_string()) act = v->as_string();
  if (const json::Value* v = r.find("model_type"); v && v->is_string()) model_type = v->as_string();
  if (model_type == "gpt_oss")
    m.act = sel::Activation::kSwigluOAIInterleaved;
  else if (act == "relu2")
    m.act = sel::Activation::kReLU2;
  else if (act.rfind("gelu", 0) == 0)
    m.act = sel::Activation::kGeLU;
  else if (!act.empty() && act != "silu" && act != "swish")
    m.act = sel::Activation::kOther;
  m.topk = int_field(
      r, {"num_experts_per_tok", "moe_topk", "experts_per_token", "num_experts_per_token"});
  m.heads = int_field(r, {"num_attention_heads"});
  m.kv_heads = int_field(r, {"num_key_value_heads"});
  if (m.kv_heads == 0) m.kv_heads = m.heads;
  m.head_dim = int_field(r, {"head_dim"});
  const int64_t hidden = int_field(r, {"hidden_size"});
  if (m.head_dim == 0 && m.heads > 0 && hidden % m.heads == 0) m.head_dim = hidden / m.heads;
  return m;
}

sel::LayerDesc base_desc(const InspectOptions& o, const ModelInfo& m, const std::string& name) {
  sel::LayerDesc d;
  d.name = name;
  d.io_dtype = m.io;
  d.compute_capability = o.compute_capability;
  d.tp_size = o.tp_size;
  return d;
}

std::string format_name(const LayerQuant& q, const std::string& st_dtype) {
  return q.quantized() ? quant_algo_name(q.algo) : st_dtype;
}

void inspect_moe(const CheckpointDir& c, const QuantConfig& cfg, const InspectOptions& o,
                 const ModelInfo& m, LayerReport& r) {
  r.kind = "moe";
  LayerQuant q;
  try {
    q = cfg.resolve(r.name, true);
  } catch (const Error& e) {
    r.error = e.what();
    r.format = "?";
    return;
  }
  int64_t experts = 0, hidden = 0, inter = 0;
  bool bias = false;
  std::string storage;
  // gpt-oss packed stacks: gate_up_proj_blocks [E, 2I, H/32, 16].
  const TensorInfo* blocks = c.find(r.name + ".gate_up_proj_blocks");
  const TensorInfo* fused = c.find(r.name + ".gate_up_proj");
  if (blocks) {
    storage = blocks->st_dtype;
    if (blocks->shape.size() == 4) {
      experts = blocks->shape[0];
      inter = blocks->shape[1] / 2;
      hidden = blocks->shape[2] * blocks->shape[3] * 2;
    } else {
      r.error = "gate_up_proj_blocks must be [E, 2I, H/32, 16]";
    }
    if (!q.quantized())
      r.error = "MXFP4 expert blocks found but the quantization config does not quantize '" +
                r.name + "'";
    bias = c.find(r.name + ".gate_up_proj_bias") != nullptr;
  } else if (fused && fused->shape.size() == 3) {
    storage = fused->st_dtype;
    experts = fused->shape[0];
    hidden = fused->shape[1];
    inter = fused->shape[2] / 2;
    bias = c.find(r.name + ".gate_up_proj_bias") != nullptr;
  } else {
    // Per-expert HF layout: <stack>.<e>.<proj>.weight.
    std::set<int64_t> ids;
    const std::string pre = r.name + ".";
    for (const auto& t : r.tensors) {
      const std::string rest = t.substr(pre.size());
      const size_t dot = rest.find('.');
      if (dot == std::string::npos) continue;
      const std::string id = rest.substr(0, dot);
      if (!id.empty() && std::all_of(id.begin(), id.end(), ::isdigit) && id.size() < 10)
        ids.insert(std::stoll(id));
    }
    experts = static_cast<int64_t>(ids.size());
    if (experts == 0) {
      r.error = "no expert weights found under '" + r.name + "'";
    } else {
      const std::string e0 = r.name + "." + std::to_string(*ids.begin());
      try {
        const char* up = c.find(e0 + ".up_proj.weight") ? "up_proj" : "w3";
        const char* down = c.find(e0 + ".down_proj.weight") ? "down_proj" : "w2";
        const LinearWeights u = load_linear(c, q, e0 + "." + up);
        const LinearWeights dn = load_linear(c, q, e0 + "." + down);
        storage = c.find(u.prefix + ".weight")->st_dtype;
        hidden = u.k;
        inter = u.n;
        if (dn.n != hidden || dn.k != inter)
          r.error = "down projection [" + std::to_string(dn.n) + ", " + std::to_string(dn.k) +
                    "] does not match up projection [" + std::to_string(u.n) + ", " +
                    std::to_string(u.k) + "]";
        bias = u.bias.data != nullptr || dn.bias.data != nullptr;
        // Every expert must have the same layout.
        for (int64_t id : ids)
          for (const char* proj : {"gate_proj", "up_proj", "down_proj", "w1", "w2", "w3"}) {
            const std::string p = r.name + "." + std::to_string(id) + "." + proj;
            if (!c.find(p + ".weight")) continue;
            const LinearWeights w = load_linear(c, q, p);
            const bool is_down = std::string(proj) == "down_proj" || std::string(proj) == "w2";
            if ((is_down && (w.n != hidden || w.k != inter)) ||
                (!is_down && (w.n != inter || w.k != hidden)))
              throw Error(Status::kInvalidArgument, "expert tensor '" + p +
                                                        "' has a different shape from expert " +
                                                        std::to_string(*ids.begin()));
          }
      } catch (const Error& e) {
        r.error = e.what();
      }
    }
  }
  r.format = format_name(q, storage);
  r.shape = {experts, hidden, inter};
  if (!r.error.empty()) return;
  sel::LayerDesc d = base_desc(o, m, r.name);
  d.kind = sel::LayerKind::kMoE;
  d.weight = weight_format_of(q, storage == "F16" ? DType::kFP16 : DType::kBF16);
  d.act = act_format_of(q, true);
  d.hidden = hidden;
  d.intermediate_per_rank = o.tp_size > 0 ? inter / o.tp_size : inter;
  d.num_experts = experts;
  d.topk = m.topk > 0 ? m.topk : 1;
  d.activation = m.act;
  d.has_bias = bias;
  r.selection = sel::select(d, o.env);
  r.has_selection = true;
}

void inspect_module(const CheckpointDir& c, const QuantConfig& cfg, const InspectOptions& o,
                    const ModelInfo& m, LayerReport& r) {
  const TensorInfo* w = c.find(r.name + ".weight");
  const std::string leaf = last_component(r.name);
  std::string lower_leaf = leaf;
  for (char& ch : lower_leaf) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (is_norm_module(r.name)) {
    r.kind = "norm";
    r.format = w ? w->st_dtype : "?";
    if (w) r.shape = w->shape;
    bool quantized_storage =
        w && w->st_dtype != "BF16" && w->st_dtype != "F16" && w->st_dtype != "F32";
    for (const auto& t : r.tensors)
      if (t != r.name + ".weight" && t != r.name + ".bias") quantized_storage = true;
    if (quantized_storage)
      r.error = "'" + r.name +
                "' is a normalization layer with quantized storage; quantized "
                "norm weights are not supported (keep norms in BF16/FP16/FP32)";
    try {
      cfg.resolve(r.name);
    } catch (const Error& e) {
      r.error = e.what();
    }
    return;
  }
  if (!w || w->shape.size() < 2) {
    r.kind = "other";
    r.format = w ? w->st_dtype : (r.tensors.empty() ? "?" : c.find(r.tensors[0])->st_dtype);
    if (w) r.shape = w->shape;
    return;
  }
  const bool embedding = lower_leaf.find("embed") != std::string::npos || lower_leaf == "wte";
  r.kind = embedding ? "embedding" : "linear";
  LinearWeights lw;
  try {
    lw = load_linear(c, cfg, r.name);
  } catch (const Error& e) {
    r.error = e.what();
    r.format = w->st_dtype;
    r.shape = w->shape;
    return;
  }
  r.format = format_name(lw.quant, w->st_dtype);
  r.shape = {lw.n, lw.k};
  sel::LayerDesc d = linear_layer_desc(lw, m.io, o.compute_capability, embedding);
  d.tp_size = o.tp_size;
  r.selection = sel::select(d, o.env);
  r.has_selection = true;
}

json::Value layer_json(const LayerReport& r) {
  json::Value v = json::Value::object();
  v.set("name", json::Value::string(r.name));
  v.set("kind", json::Value::string(r.kind));
  v.set("format", json::Value::string(r.format));
  json::Value shape = json::Value::array();
  for (int64_t s : r.shape) shape.push(json::Value::integer(s));
  v.set("shape", std::move(shape));
  v.set("bytes", json::Value::integer(static_cast<int64_t>(r.bytes)));
  json::Value ts = json::Value::array();
  for (const auto& t : r.tensors) ts.push(json::Value::string(t));
  v.set("tensors", std::move(ts));
  if (r.has_selection)
    v.set("selection", json::parse(r.selection.to_json(), "selection"));
  else
    v.set("selection", json::Value::null());
  v.set("error", r.error.empty() ? json::Value::null() : json::Value::string(r.error));
  return v;
}

}  // namespace

InspectReport inspect(const std::string& dir, const InspectOptions& o) {
  const CheckpointDir c = CheckpointDir::open(dir);
  const QuantConfig cfg = QuantConfig::from_dir(dir);
  const ModelInfo m = model_info(dir);
  InspectReport rep;
  rep.dir = dir;
  rep.quant_method = cfg.method();

  // Group tensors by module (MoE stacks as one layer).
  std::map<std::string, std::vector<std::string>> groups;
  std::set<std::string> moe;
  for (const auto& name : c.tensor_names()) {
    const std::string g = experts_group(name);
    if (!g.empty()) {
      groups[g].push_back(name);
      moe.insert(g);
    } else {
      std::string mod = parent_of(name);
      if (mod.empty()) mod = name;
      groups[mod].push_back(name);
    }
  }
  for (auto& [name, tensors] : groups) {
    LayerReport r;
    r.name = name;
    r.tensors = tensors;
    for (const auto& t : tensors) r.bytes += c.find(t)->nbytes;
    if (moe.count(name))
      inspect_moe(c, cfg, o, m, r);
    else
      inspect_module(c, cfg, o, m, r);
    rep.total_bytes += r.bytes;
    rep.layers.push_back(std::move(r));
  }
  // Attention (one row for the model: paged KV cache, every layer alike).
  if (m.heads > 0 && m.head_dim > 0) {
    LayerReport r;
    r.name = "attention (paged KV cache, every layer)";
    r.kind = "attention";
    const std::string kv = cfg.kv_cache_algo();
    r.format = kv.empty() || kv == "NONE" ? std::string("BF16 KV") : kv + " KV";
    r.shape = {m.heads, m.kv_heads, m.head_dim};
    sel::LayerDesc d = base_desc(o, m, "attention");
    d.kind = sel::LayerKind::kAttention;
    std::string kvu = kv;
    for (char& ch : kvu) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    d.weight = kvu.empty() || kvu == "NONE" ? sel::WeightFormat::kBF16
               : kvu == "FP8"               ? sel::WeightFormat::kFP8Tensor
               : kvu == "NVFP4"             ? sel::WeightFormat::kNVFP4
                                            : sel::WeightFormat::kInt4;
    d.num_q_heads = o.tp_size > 1 && m.heads % o.tp_size == 0 ? m.heads / o.tp_size : m.heads;
    d.num_kv_heads =
        o.tp_size > 1 && m.kv_heads % o.tp_size == 0 ? m.kv_heads / o.tp_size : m.kv_heads;
    d.head_dim = m.head_dim;
    d.page_size = 128;
    r.selection = sel::select(d, o.env);
    r.has_selection = true;
    rep.layers.push_back(std::move(r));
  }
  for (const auto& r : rep.layers) {
    if (!r.error.empty())
      ++rep.errors;
    else if (r.has_selection)
      (r.selection.supported ? rep.served : rep.not_served)++;
  }
  return rep;
}

std::string InspectReport::to_json() const {
  json::Value v = json::Value::object();
  v.set("dir", json::Value::string(dir));
  v.set("quant_method", json::Value::string(quant_method));
  v.set("total_bytes", json::Value::integer(static_cast<int64_t>(total_bytes)));
  v.set("served", json::Value::integer(served));
  v.set("not_served", json::Value::integer(not_served));
  v.set("errors", json::Value::integer(errors));
  json::Value ls = json::Value::array();
  for (const auto& l : layers) ls.push(layer_json(l));
  v.set("layers", std::move(ls));
  return json::dump(v);
}

}  // namespace b12x::checkpoint
