// Quantization config parsing (ModelOpt, DeepSeek block FP8, gpt-oss MXFP4, GGML entries of
// MIXED_PRECISION) and vLLM-style layer-name resolution.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "b12x/checkpoint.h"
#include "b12x/status.h"
#include "checkpoint/internal.h"
#include "checkpoint/json.h"

namespace b12x::checkpoint {

namespace {

struct AlgoInfo {
  QuantAlgo algo;
  const char* name;
  int group_size;     // fixed/default values per scale block (0 = none)
  int payload_bytes;  // GGML block bytes
  bool group_fixed;   // group_size must equal the default
};
constexpr AlgoInfo kAlgos[] = {
    {QuantAlgo::kNone, "NONE", 0, 0, false},
    {QuantAlgo::kFP8, "FP8", 0, 0, false},
    {QuantAlgo::kFP8Block, "FP8_BLOCK", 128, 0, true},
    {QuantAlgo::kMXFP8, "MXFP8", 32, 0, true},
    {QuantAlgo::kNVFP4, "NVFP4", 16, 0, true},
    {QuantAlgo::kW4A16NVFP4, "W4A16_NVFP4", 16, 0, true},
    {QuantAlgo::kMXFP4, "MXFP4", 32, 0, true},
    {QuantAlgo::kQ8_0, "Q8_0", kQ8_0BlockValues, kQ8_0BlockBytes, true},
    {QuantAlgo::kIQ2_XS, "IQ2_XS", kIQ2XSBlockValues, kIQ2XSBlockBytes, true},
    {QuantAlgo::kIQ2_XXS, "IQ2_XXS", kIQ2XXSBlockValues, kIQ2XXSBlockBytes, true},
};

const AlgoInfo& info(QuantAlgo a) {
  for (const auto& i : kAlgos)
    if (i.algo == a) return i;
  return kAlgos[0];
}

bool is_ggml(QuantAlgo a) {
  return a == QuantAlgo::kQ8_0 || a == QuantAlgo::kIQ2_XS || a == QuantAlgo::kIQ2_XXS;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const json::Value* member(const json::Value& obj, const char* key) {
  return obj.find(key);
}

std::string get_string(const json::Value& obj, const char* key, const std::string& where) {
  const json::Value* v = member(obj, key);
  if (!v || v->is_null()) return "";
  if (!v->is_string())
    B12X_FAIL(Status::kInvalidArgument, where, ": \"", key, "\" must be a string, got ",
              json::dump(*v));
  return v->as_string();
}

int get_int(const json::Value& obj, const char* key, int dflt, const std::string& where) {
  const json::Value* v = member(obj, key);
  if (!v || v->is_null()) return dflt;
  if (!v->is_integer() || v->as_int() <= 0 || v->as_int() > (1 << 20))
    B12X_FAIL(Status::kInvalidArgument, where, ": \"", key, "\" must be a positive integer, got ",
              json::dump(*v));
  return static_cast<int>(v->as_int());
}

std::vector<std::string> get_string_list(const json::Value& obj, const char* key,
                                         const std::string& where) {
  std::vector<std::string> out;
  const json::Value* v = member(obj, key);
  if (!v || v->is_null()) return out;
  if (!v->is_array())
    B12X_FAIL(Status::kInvalidArgument, where, ": \"", key,
              "\" must be a list of module names, got ", json::dump(*v));
  for (const auto& e : v->as_array()) {
    if (!e.is_string())
      B12X_FAIL(Status::kInvalidArgument, where, ": \"", key, "\" entries must be strings, got ",
                json::dump(e));
    out.push_back(e.as_string());
  }
  return out;
}

// Fills group size / GGML fields of `q` from an entry and validates them against the algorithm.
void fill_layer(LayerQuant& q, const json::Value& entry, int default_group,
                const std::string& where) {
  const AlgoInfo& ai = info(q.algo);
  const int dflt = ai.group_fixed ? ai.group_size : default_group;
  q.group_size = get_int(entry, "group_size", dflt, where);
  if (ai.group_fixed && q.group_size != ai.group_size)
    B12X_FAIL(Status::kInvalidArgument, where, ": ", ai.name, " needs group_size ", ai.group_size,
              ", got ", q.group_size);
  const std::string packing = get_string(entry, "packing", where);
  if (is_ggml(q.algo)) {
    q.block_payload_bytes = get_int(entry, "block_payload_bytes", ai.payload_bytes, where);
    if (q.block_payload_bytes != ai.payload_bytes)
      B12X_FAIL(Status::kInvalidArgument, where, ": ", ai.name, " needs block_payload_bytes ",
                ai.payload_bytes, " (", ai.group_size, " values per block), got ",
                q.block_payload_bytes);
    if (!packing.empty() && packing != "ggml")
      B12X_FAIL(Status::kInvalidArgument, where, ": ", ai.name, " needs packing \"ggml\", got \"",
                packing, "\"");
    q.ggml_packing = true;
  } else {
    if (member(entry, "block_payload_bytes"))
      B12X_FAIL(Status::kInvalidArgument, where,
                ": block_payload_bytes is only valid for the GGML algorithms (Q8_0, IQ2_XS, "
                "IQ2_XXS), not ",
                ai.name);
    if (!packing.empty())
      B12X_FAIL(Status::kInvalidArgument, where, ": packing \"", packing,
                "\" is only valid for the GGML algorithms, not ", ai.name);
  }
  if (q.algo == QuantAlgo::kFP8Block) q.weight_block[0] = q.weight_block[1] = 128;
  q.dynamic_activation =
      q.algo == QuantAlgo::kFP8Block || q.algo == QuantAlgo::kMXFP8 || q.algo == QuantAlgo::kMXFP4;
}

bool same_quant(const LayerQuant& a, const LayerQuant& b) {
  return a.algo == b.algo && a.group_size == b.group_size &&
         a.block_payload_bytes == b.block_payload_bytes;
}

std::string describe(const LayerQuant& q) {
  std::string s = quant_algo_name(q.algo);
  if (q.group_size) s += "/g" + std::to_string(q.group_size);
  return s;
}

// "model.language_model.X" <-> "language_model.model.X".
std::vector<std::string> aliases(const std::string& prefix) {
  std::vector<std::string> out{prefix};
  static const std::string a = "model.language_model.", b = "language_model.model.";
  if (prefix.rfind(a, 0) == 0) out.push_back(b + prefix.substr(a.size()));
  if (prefix.rfind(b, 0) == 0) out.push_back(a + prefix.substr(b.size()));
  return out;
}

std::string last_component(const std::string& p) {
  const size_t dot = p.rfind('.');
  return dot == std::string::npos ? p : p.substr(dot + 1);
}
std::string parent_of(const std::string& p) {
  const size_t dot = p.rfind('.');
  return dot == std::string::npos ? "" : p.substr(0, dot);
}
std::string join(const std::string& parent, const std::string& leaf) {
  return parent.empty() ? leaf : parent + "." + leaf;
}

}  // namespace

const char* quant_algo_name(QuantAlgo a) noexcept {
  return info(a).name;
}

QuantAlgo quant_algo_from_name(const std::string& name, const std::string& where) {
  const std::string u = upper(name);
  for (const auto& i : kAlgos)
    if (u == i.name && i.algo != QuantAlgo::kNone) return i.algo;
  if (u == "FP8_BLOCKWISE" || u == "FP8_PB") return QuantAlgo::kFP8Block;
  std::string supported;
  for (const auto& i : kAlgos)
    if (i.algo != QuantAlgo::kNone)
      supported += (supported.empty() ? "" : ", ") + std::string(i.name);
  B12X_FAIL(Status::kInvalidArgument, where, ": unknown quantization algorithm \"", name,
            "\" (supported: ", supported, "); refusing to load it as unquantized");
}

bool glob_match(const std::string& pattern, const std::string& text) {
  // Iterative wildcard match with single-star backtracking (linear-ish, no recursion).
  size_t p = 0, t = 0, star = std::string::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p, ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool is_norm_module(const std::string& prefix) {
  std::string leaf = prefix;
  for (const char* suffix : {".weight", ".bias"}) {
    const std::string s = suffix;
    if (leaf.size() > s.size() && leaf.compare(leaf.size() - s.size(), s.size(), s) == 0)
      leaf.resize(leaf.size() - s.size());
  }
  leaf = lower(last_component(leaf));
  return leaf.find("norm") != std::string::npos || leaf == "ln_f" || leaf == "ln_1" ||
         leaf == "ln_2";
}

const PackedModules& default_packed_modules() {
  static const PackedModules m = {
      {"qkv_proj", {"q_proj", "k_proj", "v_proj"}},
      {"gate_up_proj", {"gate_proj", "up_proj"}},
      {"in_proj_qkvz", {"in_proj_qkv", "in_proj_z"}},
      {"in_proj_ba", {"in_proj_b", "in_proj_a"}},
  };
  return m;
}

std::string read_text_file(const std::string& path, size_t max_bytes) {
  std::ifstream f(path, std::ios::binary);
  if (!f) B12X_FAIL(Status::kIoError, path, ": cannot open: ", std::strerror(errno));
  f.seekg(0, std::ios::end);
  const std::streamoff n = f.tellg();
  if (n < 0) B12X_FAIL(Status::kIoError, path, ": cannot determine the size");
  if (static_cast<uint64_t>(n) > max_bytes)
    B12X_FAIL(Status::kIoError, path, ": ", n, " bytes is larger than the limit of ", max_bytes);
  f.seekg(0);
  std::string s(static_cast<size_t>(n), '\0');
  f.read(s.data(), n);
  if (!f) B12X_FAIL(Status::kIoError, path, ": read failed");
  return s;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

json::Value layer_quant_json(const LayerQuant& q) {
  json::Value v = json::Value::object();
  v.set("quant_algo", json::Value::string(quant_algo_name(q.algo)));
  if (q.group_size) v.set("group_size", json::Value::integer(q.group_size));
  if (q.block_payload_bytes) {
    v.set("block_payload_bytes", json::Value::integer(q.block_payload_bytes));
    v.set("packing", json::Value::string("ggml"));
  }
  if (q.weight_block[0]) {
    json::Value b = json::Value::array();
    b.push(json::Value::integer(q.weight_block[0]));
    b.push(json::Value::integer(q.weight_block[1]));
    v.set("weight_block_size", std::move(b));
  }
  if (q.quantized()) v.set("dynamic_activation", json::Value::boolean(q.dynamic_activation));
  if (!q.matched.empty()) v.set("matched", json::Value::string(q.matched));
  return v;
}

QuantConfig QuantConfig::from_json(const std::string& text, const std::string& source) {
  json::Value root;
  try {
    root = json::parse(text, source);
  } catch (const Error& e) {
    throw Error(Status::kIoError, e.what());
  }
  QuantConfig c;
  c.source_ = source;
  if (!root.is_object())
    B12X_FAIL(Status::kIoError, source, ": expected a JSON object, got a ",
              json::Value::type_name(root.type()));
  const json::Value* qc = member(root, "quantization_config");
  std::string where = source + ": quantization_config";
  bool legacy = false;
  if (!qc || qc->is_null()) {
    qc = member(root, "quantization");  // hf_quant_config.json
    where = source + ": quantization";
    legacy = qc != nullptr;
  }
  if ((!qc || qc->is_null()) && (member(root, "quant_method") || member(root, "quant_algo"))) {
    qc = &root;  // a bare quantization_config object
    where = source;
  }
  if (!qc || qc->is_null()) return c;  // unquantized model
  if (!qc->is_object())
    B12X_FAIL(Status::kInvalidArgument, where, ": must be an object, got ", json::dump(*qc));

  std::string method = lower(get_string(*qc, "quant_method", where));
  const std::string algo_s = get_string(*qc, "quant_algo", where);
  if (method.empty() && (legacy || !algo_s.empty())) method = "modelopt";
  for (const char* key : {"exclude_modules", "ignore", "ignored_layers", "modules_to_not_convert"})
    for (auto& s : get_string_list(*qc, key, where)) c.exclude_.push_back(std::move(s));
  c.kv_cache_ = get_string(*qc, "kv_cache_quant_algo", where);

  if (method == "modelopt" || method == "modelopt_fp4" || method == "modelopt_mixed") {
    if (algo_s.empty())
      B12X_FAIL(Status::kInvalidArgument, where,
                ": ModelOpt config without quant_algo (expected NVFP4, W4A16_NVFP4, FP8, MXFP8 "
                "or MIXED_PRECISION)");
    if (upper(algo_s) == "MIXED_PRECISION") {
      c.method_ = "modelopt_mixed";
      const json::Value* layers = member(*qc, "quantized_layers");
      if (!layers || !layers->is_object())
        B12X_FAIL(Status::kInvalidArgument, where,
                  ": MIXED_PRECISION needs a \"quantized_layers\" object of "
                  "{layer: {quant_algo, group_size}}");
      // group_size defaults to the first NVFP4-family entry's value, else 16 (as vLLM).
      int nvfp4_default = 16;
      for (const auto& [name, e] : layers->as_object()) {
        if (!e.is_object()) continue;
        const std::string a =
            upper(get_string(e, "quant_algo", where + ".quantized_layers." + name));
        if ((a == "NVFP4" || a == "W4A16_NVFP4") && member(e, "group_size")) {
          nvfp4_default = get_int(e, "group_size", 16, where + ".quantized_layers." + name);
          break;
        }
      }
      for (const auto& [name, e] : layers->as_object()) {
        const std::string lw = where + ".quantized_layers[\"" + name + "\"]";
        if (!e.is_object())
          B12X_FAIL(Status::kInvalidArgument, lw, ": must be an object, got ", json::dump(e));
        const std::string a = get_string(e, "quant_algo", lw);
        if (a.empty()) B12X_FAIL(Status::kInvalidArgument, lw, ": missing quant_algo");
        LayerQuant q;
        q.algo = quant_algo_from_name(a, lw);
        fill_layer(q, e, nvfp4_default, lw);
        q.matched = name;
        if (is_norm_module(name))
          B12X_FAIL(Status::kInvalidArgument, lw, ": '", name, "' is a normalization layer; ",
                    "quantized norm weights are not supported (norms must stay BF16/FP16/FP32)");
        c.layers_[name] = q;
      }
    } else {
      c.method_ = "modelopt";
      c.global_.algo = quant_algo_from_name(algo_s, where);
      fill_layer(c.global_, *qc, 16, where);
    }
  } else if (method == "fp8") {
    const json::Value* wbs = member(*qc, "weight_block_size");
    if (wbs && !wbs->is_null()) {
      if (!wbs->is_array() || wbs->as_array().size() != 2 || !wbs->as_array()[0].is_integer() ||
          !wbs->as_array()[1].is_integer() || wbs->as_array()[0].as_int() <= 0 ||
          wbs->as_array()[1].as_int() <= 0)
        B12X_FAIL(Status::kInvalidArgument, where,
                  ": weight_block_size must be [rows, cols] of positive integers, got ",
                  json::dump(*wbs));
      c.method_ = "fp8_block";
      c.global_.algo = QuantAlgo::kFP8Block;
      c.global_.weight_block[0] = static_cast<int>(wbs->as_array()[0].as_int());
      c.global_.weight_block[1] = static_cast<int>(wbs->as_array()[1].as_int());
      c.global_.group_size = c.global_.weight_block[1];
      c.global_.dynamic_activation = true;
      const std::string scheme = lower(get_string(*qc, "activation_scheme", where));
      if (!scheme.empty() && scheme != "dynamic")
        B12X_FAIL(Status::kInvalidArgument, where,
                  ": block FP8 needs activation_scheme \"dynamic\", got \"", scheme, "\"");
    } else {
      c.method_ = "fp8";
      c.global_.algo = QuantAlgo::kFP8;
      const std::string scheme = lower(get_string(*qc, "activation_scheme", where));
      c.global_.dynamic_activation = scheme == "dynamic";
    }
  } else if (method == "mxfp4") {
    c.method_ = "mxfp4";
    c.global_.algo = QuantAlgo::kMXFP4;
    c.global_.group_size = 32;
    c.global_.dynamic_activation = false;  // gpt-oss experts run W4A16
  } else if (method.empty()) {
    B12X_FAIL(Status::kInvalidArgument, where, ": neither quant_method nor quant_algo is set");
  } else {
    B12X_FAIL(Status::kUnsupported, where, ": quant_method \"", method,
              "\" is not supported (supported: modelopt with NVFP4, W4A16_NVFP4, FP8, MXFP8, "
              "MIXED_PRECISION; fp8 (per-tensor or weight_block_size [128, 128]); mxfp4)");
  }
  return c;
}

QuantConfig QuantConfig::from_dir(const std::string& dir) {
  const std::string cfg = dir + "/config.json";
  const std::string hf = dir + "/hf_quant_config.json";
  if (file_exists(cfg)) {
    QuantConfig c = from_json(read_text_file(cfg), cfg);
    if (c.method_ != "none" || !file_exists(hf)) return c;
  }
  if (file_exists(hf)) return from_json(read_text_file(hf), hf);
  QuantConfig c;
  c.source_ = file_exists(cfg) ? cfg : "";
  return c;
}

LayerQuant QuantConfig::resolve(const std::string& prefix, bool is_moe,
                                const PackedModules& packed) const {
  const std::string leaf = last_component(prefix);
  const std::string parent = parent_of(prefix);

  // Exclusions: a fused layer is excluded only when every shard is.
  const auto excluded_one = [&](const std::string& p) {
    for (const auto& a : aliases(p))
      for (const auto& pat : exclude_)
        if (glob_match(pat, a) || glob_match(pat + ".*", a) || a.rfind(pat + ".", 0) == 0)
          return true;
    return false;
  };
  bool excluded = excluded_one(prefix);
  auto fused = packed.find(leaf);
  if (!excluded && fused != packed.end()) {
    size_t n = 0;
    for (const auto& s : fused->second) n += excluded_one(join(parent, s)) ? 1 : 0;
    if (n == fused->second.size()) excluded = true;
    if (n != 0 && n != fused->second.size())
      B12X_FAIL(Status::kInvalidArgument, source_, ": fused layer '", prefix,
                "' has some shards excluded from quantization and others not; shards of one "
                "fused layer must share one scheme");
  }

  if (method_ == "none") return {};
  if (method_ != "modelopt_mixed") {
    if (excluded) return {};
    if (method_ == "mxfp4") {
      // gpt-oss: only the expert stacks are MXFP4; dense layers stay BF16.
      if (!is_moe) return {};
      return global_;
    }
    if (is_norm_module(prefix)) return {};  // global algorithms never apply to norms
    return global_;
  }

  // MIXED_PRECISION lookup.
  const auto exact = [&](const std::string& p) -> const LayerQuant* {
    for (const auto& a : aliases(p)) {
      auto it = layers_.find(a);
      if (it != layers_.end()) return &it->second;
    }
    return nullptr;
  };
  if (const LayerQuant* q = exact(prefix)) {
    if (is_norm_module(prefix))
      B12X_FAIL(Status::kInvalidArgument, source_, ": '", prefix,
                "' is a normalization layer; quantized norm weights are not supported");
    return *q;
  }
  if (is_norm_module(prefix)) return {};
  if (excluded) return {};

  // Fused shards: every shard must be listed and agree.
  if (fused != packed.end()) {
    const LayerQuant* first = nullptr;
    std::string first_name, missing;
    size_t found = 0;
    for (const auto& s : fused->second) {
      const std::string sp = join(parent, s);
      const LayerQuant* q = exact(sp);
      if (!q) {
        missing += (missing.empty() ? "" : ", ") + sp;
        continue;
      }
      ++found;
      if (!first) {
        first = q;
        first_name = sp;
      } else if (!same_quant(*first, *q)) {
        B12X_FAIL(Status::kInvalidArgument, source_, ": fused layer '", prefix, "': shard '",
                  first_name, "' is ", describe(*first), " but shard '", sp, "' is ", describe(*q),
                  "; all shards of a fused layer must share one scheme");
      }
    }
    if (found > 0 && found < fused->second.size())
      B12X_FAIL(Status::kInvalidArgument, source_, ": fused layer '", prefix, "': shard '",
                first_name, "' is ", describe(*first), " but ", missing,
                " is not quantized; all shards of a fused layer must share one scheme");
    if (first) return *first;
  }

  // Shard fallback: the model asks for a shard while the config lists the fused module.
  for (const auto& [fused_name, shards] : packed)
    if (std::find(shards.begin(), shards.end(), leaf) != shards.end())
      if (const LayerQuant* q = exact(join(parent, fused_name))) return *q;

  // Experts parent prefix: "...experts" covers "...experts.<e>.<proj>" entries.
  if (leaf == "experts" || is_moe) {
    const LayerQuant* first = nullptr;
    std::string first_name;
    for (const auto& a : aliases(prefix)) {
      const std::string pre = a + ".";
      for (auto it = layers_.lower_bound(pre); it != layers_.end() && it->first.rfind(pre, 0) == 0;
           ++it) {
        if (!first) {
          first = &it->second;
          first_name = it->first;
        } else if (!same_quant(*first, it->second)) {
          B12X_FAIL(Status::kInvalidArgument, source_, ": experts '", prefix, "': '", first_name,
                    "' is ", describe(*first), " but '", it->first, "' is ", describe(it->second),
                    "; one MoE layer needs one scheme for all experts");
        }
      }
    }
    if (first) {
      LayerQuant q = *first;
      q.matched = first_name;
      return q;
    }
  }
  return {};
}

std::string QuantConfig::to_json() const {
  json::Value v = json::Value::object();
  v.set("method", json::Value::string(method_));
  v.set("source", json::Value::string(source_));
  v.set("global", layer_quant_json(global_));
  json::Value layers = json::Value::object();
  for (const auto& [k, q] : layers_) layers.set(k, layer_quant_json(q));
  v.set("quantized_layers", std::move(layers));
  json::Value ex = json::Value::array();
  for (const auto& e : exclude_) ex.push(json::Value::string(e));
  v.set("exclude", std::move(ex));
  v.set("kv_cache_quant_algo",
        kv_cache_.empty() ? json::Value::null() : json::Value::string(kv_cache_));
  return json::dump(v);
}

}  // namespace b12x::checkpoint
