// `quantize`: BF16/FP16/F32 safetensors in, a ModelOpt MIXED_PRECISION checkpoint out.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "b12x/checkpoint.h"
#include "b12x/formats.h"
#include "b12x/runtime.h"
#include "b12x/status.h"
#include "checkpoint/internal.h"
#include "checkpoint/json.h"

namespace b12x::checkpoint {

namespace {

namespace fs = std::filesystem;

std::string last_component(const std::string& p) {
  const size_t dot = p.rfind('.');
  return dot == std::string::npos ? p : p.substr(dot + 1);
}

bool default_layer(const std::string& module) {
  std::string leaf = last_component(module);
  for (char& c : leaf) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (leaf.find("embed") != std::string::npos || leaf == "wte" || leaf == "lm_head") return false;
  if (leaf == "gate" || leaf == "router" || leaf.find("router") != std::string::npos) return false;
  return true;
}

int group_of(QuantAlgo a) {
  switch (a) {
    case QuantAlgo::kNVFP4:
    case QuantAlgo::kW4A16NVFP4:
      return 16;
    case QuantAlgo::kMXFP4:
    case QuantAlgo::kMXFP8:
    case QuantAlgo::kQ8_0:
      return 32;
    case QuantAlgo::kIQ2_XS:
    case QuantAlgo::kIQ2_XXS:
      return 256;
    default:
      return 1;
  }
}

std::vector<float> to_float(const SafetensorsFile& f, const TensorInfo& t) {
  std::vector<float> x(static_cast<size_t>(t.numel()));
  const uint8_t* p = f.bytes(t);
  if (t.st_dtype == "F32")
    std::memcpy(x.data(), p, x.size() * 4);
  else
    formats::decode_scalar(t.st_dtype == "BF16" ? DType::kBF16 : DType::kFP16, p, x.data(),
                           static_cast<int64_t>(x.size()));
  return x;
}

TensorRef host_ref(void* p, DType dt, std::initializer_list<int64_t> shape) {
  return TensorRef::contiguous(p, dt, shape);
}

}  // namespace

double quantize_error_bound(QuantAlgo algo) {
  // Relative RMS error of round-to-nearest on Gaussian rows, with margin (measured values on
  // the round-trip test's rows are 60-85 % of these).
  switch (algo) {
    case QuantAlgo::kNVFP4:
    case QuantAlgo::kW4A16NVFP4:
      return 0.13;
    case QuantAlgo::kMXFP4:
      return 0.20;
    case QuantAlgo::kMXFP8:
      return 0.045;
    case QuantAlgo::kFP8:
      return 0.045;
    case QuantAlgo::kFP8Block:
      return 0.045;
    case QuantAlgo::kQ8_0:
      return 0.012;
    case QuantAlgo::kIQ2_XS:
      return 0.50;
    case QuantAlgo::kIQ2_XXS:
      return 0.60;
    default:
      return 0.0;
  }
}

QuantizeReport quantize_checkpoint(const std::string& in_dir, const std::string& out_dir,
                                   const QuantizeOptions& o) {
  static const std::set<QuantAlgo> kSupported = {
      QuantAlgo::kNVFP4, QuantAlgo::kMXFP4,  QuantAlgo::kMXFP8,  QuantAlgo::kFP8,
      QuantAlgo::kQ8_0,  QuantAlgo::kIQ2_XS, QuantAlgo::kIQ2_XXS};
  B12X_CHECK_ARG(kSupported.count(o.algo), "quantize: format ", quant_algo_name(o.algo),
                 " is not a quantize target (supported: NVFP4, MXFP4, MXFP8, FP8, Q8_0, IQ2_XS, "
                 "IQ2_XXS)");
  B12X_CHECK_ARG(o.algo != QuantAlgo::kFP8 || o.input_amax > 0.f,
                 "quantize: FP8 is static W8A8 and needs the calibrated activation amax "
                 "(--input-amax); got ",
                 o.input_amax);
  B12X_CHECK_ARG(std::isfinite(o.input_amax) && o.input_amax >= 0.f,
                 "quantize: input_amax=", o.input_amax, " must be finite and >= 0");
  std::error_code ec;
  B12X_CHECK_ARG(!fs::exists(out_dir, ec) || !fs::equivalent(in_dir, out_dir, ec),
                 "quantize: OUT_DIR must differ from IN_DIR (", out_dir, ")");
  std::vector<std::regex> patterns;
  for (const auto& p : o.layer_patterns) {
    try {
      patterns.emplace_back(p, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      B12X_FAIL(Status::kInvalidArgument, "quantize: --layers pattern '", p,
                "' is not a valid regular expression: ", e.what());
    }
  }

  const CheckpointDir in = CheckpointDir::open(in_dir);
  const QuantConfig in_cfg = QuantConfig::from_dir(in_dir);
  B12X_CHECK_ARG(in_cfg.method() == "none", "quantize: ", in_dir, " is already quantized (",
                 in_cfg.method(), " from ", in_cfg.source(),
                 "); start from a BF16/FP16/F32 checkpoint");
  fs::create_directories(out_dir, ec);
  if (ec) B12X_FAIL(Status::kIoError, out_dir, ": cannot create: ", ec.message());
  for (const auto& e : fs::directory_iterator(out_dir))
    if (e.path().extension() == ".safetensors")
      B12X_FAIL(Status::kIoError, out_dir, ": already holds ", e.path().filename().string(),
                "; use an empty output directory");

  // Without a calibrated activation range NVFP4 weights are written as W4A16_NVFP4.
  QuantAlgo algo = o.algo;
  if (algo == QuantAlgo::kNVFP4 && o.input_amax <= 0.f) algo = QuantAlgo::kW4A16NVFP4;
  const int group = group_of(algo);

  size_t total = 0, done = 0;
  for (const auto& f : in.files()) total += f.tensors().size();
  QuantizeReport rep;
  json::Value layers = json::Value::object();
  std::vector<std::pair<std::string, std::string>> weight_map;

  // Decide per tensor, then per fused group: shards that vLLM fuses (q/k/v, gate/up, per expert)
  // are quantized together or not at all, and share one global scale (NVFP4 weight_scale_2,
  // FP8 weight_scale), since vLLM applies a single global to the fused weight.
  struct Decision {
    bool match = false, eligible = false, want = false;
    std::string why, group;
  };
  std::map<std::string, Decision> decide;
  std::map<std::string, std::vector<std::string>> groups;
  for (const auto& f : in.files())
    for (const auto& t : f.tensors()) {
      const bool is_weight =
          t.name.size() > 7 && t.name.compare(t.name.size() - 7, 7, ".weight") == 0;
      if (!is_weight || t.shape.size() != 2) continue;
      const std::string module = t.name.substr(0, t.name.size() - 7);
      if (is_norm_module(module)) continue;
      Decision d;
      d.match = patterns.empty() ? default_layer(module) : false;
      for (const auto& re : patterns) d.match = d.match || std::regex_search(module, re);
      if (t.st_dtype != "BF16" && t.st_dtype != "F16" && t.st_dtype != "F32")
        d.why = "dtype " + t.st_dtype + " is not BF16/F16/F32";
      else if (t.shape[1] % group != 0)
        d.why = "K=" + std::to_string(t.shape[1]) + " is not a multiple of the " +
                std::to_string(group) + "-value block";
      else if (t.shape[0] == 0)
        d.why = "empty weight";
      else
        d.eligible = true;
      d.group = module;
      const std::string leaf = last_component(module);
      const size_t dot = module.rfind('.');
      const std::string parent = dot == std::string::npos ? "" : module.substr(0, dot);
      for (const auto& [fused, shards] : default_packed_modules())
        if (std::find(shards.begin(), shards.end(), leaf) != shards.end())
          d.group = parent + "." + fused;
      groups[d.group].push_back(t.name);
      decide[t.name] = d;
    }
  for (const auto& [g, members] : groups) {
    bool any_match = false;
    std::string blocker;
    for (const auto& m : members) {
      any_match = any_match || decide[m].match;
      if (!decide[m].eligible) blocker = m;
    }
    if (!any_match) continue;
    for (const auto& m : members) {
      Decision& d = decide[m];
      d.want = blocker.empty();
      if (!d.want && d.why.empty())
        d.why = "kept with its fused shard " + blocker + " (" + decide[blocker].why + ")";
    }
  }
  // Shared global scale per fused group: the group's |max|.
  std::map<std::string, float> group_amax;
  for (const auto& f : in.files())
    for (const auto& t : f.tensors()) {
      auto it = decide.find(t.name);
      if (it == decide.end() || !it->second.want) continue;
      const std::vector<float> x = to_float(f, t);
      float m = 0.f;
      for (float v : x)
        if (std::fabs(v) > m) m = std::fabs(v);  // NaN never raises the maximum
      float& g = group_amax[it->second.group];
      g = std::max(g, m);
    }

  for (const auto& f : in.files()) {
    SafetensorsWriter w;
    const std::string out_name = fs::path(f.path()).filename().string();
    for (const auto& t : f.tensors()) {
      rep.bytes_in += t.nbytes;
      auto dit = decide.find(t.name);
      const bool want = dit != decide.end() && dit->second.want;
      const std::string why = dit != decide.end() && dit->second.match ? dit->second.why : "";
      const std::string module = want ? t.name.substr(0, t.name.size() - 7) : "";
      const float amax = want ? group_amax[dit->second.group] : 0.f;
      if (!want) {
        if (!why.empty()) rep.skipped.emplace_back(t.name, why);
        w.add(t.name, t.st_dtype, t.shape, f.bytes(t), t.nbytes);
        weight_map.emplace_back(t.name, out_name);
        rep.bytes_out += t.nbytes;
      } else {
        const int64_t n = t.shape[0], k = t.shape[1];
        const std::vector<float> x = to_float(f, t);
        LinearWeights lw;
        lw.prefix = module;
        lw.quant.algo = algo;
        lw.quant.group_size = group == 1 ? 0 : group;
        lw.n = n;
        lw.k = k;
        std::vector<uint8_t> values, scales;
        uint64_t out_bytes = 0;
        const auto add = [&](const std::string& name, const char* dt, std::vector<int64_t> shape,
                             const void* p, size_t nb) {
          w.add(name, dt, std::move(shape), p, nb);
          weight_map.emplace_back(name, out_name);
          out_bytes += nb;
        };
        switch (algo) {
          case QuantAlgo::kNVFP4:
          case QuantAlgo::kW4A16NVFP4: {
            // gs = 448*6 / amax of the fused group (1 for an all-zero group: decodes to zeros).
            const float gs = amax > 0.f ? (448.f * 6.f) / amax : 1.f;
            values.resize(n * k / 2);
            scales.resize(n * k / 16);
            formats::quantize_nvfp4(x.data(), n, k, gs, values.data(), scales.data());
            lw.weight_scale_2 = 1.0f / gs;
            add(t.name, "U8", {n, k / 2}, values.data(), values.size());
            add(module + ".weight_scale", "F8_E4M3", {n, k / 16}, scales.data(), scales.size());
            add(module + ".weight_scale_2", "F32", {}, &lw.weight_scale_2, 4);
            if (algo == QuantAlgo::kNVFP4) {
              lw.input_scale = o.input_amax / (448.f * 6.f);
              add(module + ".input_scale", "F32", {}, &lw.input_scale, 4);
            }
            lw.weight = host_ref(values.data(), DType::kUInt8, {n, k / 2});
            lw.weight_scale = host_ref(scales.data(), DType::kFP8E4M3, {n, k / 16});
            break;
          }
          case QuantAlgo::kMXFP4:
            values.resize(n * k / 2);
            scales.resize(n * k / 32);
            formats::quantize_mxfp4(x.data(), n, k, formats::MxScaleRule::kCeil,
                                    formats::MxZeroBlockScale::kOne, values.data(), scales.data());
            add(t.name, "U8", {n, k / 2}, values.data(), values.size());
            add(module + ".weight_scale", "U8", {n, k / 32}, scales.data(), scales.size());
            lw.weight = host_ref(values.data(), DType::kUInt8, {n, k / 2});
            lw.weight_scale = host_ref(scales.data(), DType::kUInt8, {n, k / 32});
            break;
          case QuantAlgo::kMXFP8:
            values.resize(n * k);
            scales.resize(n * k / 32);
            formats::quantize_mxfp8(x.data(), n, k, formats::MxZeroBlockScale::kOne, values.data(),
                                    scales.data());
            add(t.name, "F8_E4M3", {n, k}, values.data(), values.size());
            add(module + ".weight_scale", "U8", {n, k / 32}, scales.data(), scales.size());
            lw.weight = host_ref(values.data(), DType::kFP8E4M3, {n, k});
            lw.weight_scale = host_ref(scales.data(), DType::kUInt8, {n, k / 32});
            break;
          case QuantAlgo::kFP8: {
            values.resize(n * k);
            lw.weight_scale_2 = formats::quantize_fp8_per_tensor(
                x.data(), n * k, amax > 0.f ? amax / 448.f : 0.f, values.data());
            lw.input_scale = o.input_amax / 448.f;
            add(t.name, "F8_E4M3", {n, k}, values.data(), values.size());
            add(module + ".weight_scale", "F32", {}, &lw.weight_scale_2, 4);
            add(module + ".input_scale", "F32", {}, &lw.input_scale, 4);
            lw.weight = host_ref(values.data(), DType::kFP8E4M3, {n, k});
            break;
          }
          case QuantAlgo::kQ8_0:
          case QuantAlgo::kIQ2_XS:
          case QuantAlgo::kIQ2_XXS: {
            const int pb = algo == QuantAlgo::kQ8_0     ? kQ8_0BlockBytes
                           : algo == QuantAlgo::kIQ2_XS ? kIQ2XSBlockBytes
                                                        : kIQ2XXSBlockBytes;
            values.resize(static_cast<size_t>(n * (k / group) * pb));
            if (algo == QuantAlgo::kQ8_0)
              formats::quantize_q8_0(x.data(), n, k, values.data());
            else if (algo == QuantAlgo::kIQ2_XS)
              formats::quantize_iq2_xs(x.data(), n, k, values.data());
            else
              formats::quantize_iq2_xxs(x.data(), n, k, values.data());
            add(t.name, "U8", {n, k / group, pb}, values.data(), values.size());
            lw.quant.block_payload_bytes = pb;
            lw.quant.ggml_packing = true;
            lw.weight = host_ref(values.data(), DType::kUInt8, {n, k / group, pb});
            break;
          }
          default:
            B12X_ASSERT(false, "unhandled quantize target");
        }
        const std::vector<float> y = dequantize_linear(lw);
        double err2 = 0, ref2 = 0, max_abs = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          const double d = static_cast<double>(x[i]) - y[i];
          err2 += d * d;
          ref2 += static_cast<double>(x[i]) * x[i];
          max_abs = std::max(max_abs, std::fabs(d));
        }
        QuantizedLayer ql;
        ql.name = module;
        ql.algo = algo;
        ql.n = n;
        ql.k = k;
        ql.rel_rms_error = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
        ql.max_abs_error = max_abs;
        ql.bound = quantize_error_bound(algo);
        ql.bytes_in = t.nbytes;
        ql.bytes_out = out_bytes;
        rep.bytes_out += out_bytes;
        rep.layers.push_back(ql);
        layers.set(module, layer_quant_json(lw.quant));
        // layer_quant_json adds descriptive fields; keep the entry to the ModelOpt keys.
        json::Value& e = layers.as_object().back().second;
        json::Value clean = json::Value::object();
        for (const char* key : {"quant_algo", "group_size", "block_payload_bytes", "packing"})
          if (const json::Value* v = e.find(key)) clean.set(key, *v);
        e = std::move(clean);
        log_message(3, "quantize " + module + ": " + quant_algo_name(algo) +
                           " rel_rms=" + std::to_string(ql.rel_rms_error));
      }
      if (o.progress) o.progress(++done, total, t.name);
    }
    w.set_metadata("format", "pt");
    w.write((fs::path(out_dir) / out_name).string());
  }

  // config.json: the input's, with a ModelOpt quantization_config.
  json::Value cfg = json::Value::object();
  const std::string in_cfg_path = in_dir + "/config.json";
  if (file_exists(in_cfg_path)) {
    try {
      cfg = json::parse(read_text_file(in_cfg_path), in_cfg_path);
    } catch (const Error& e) {
      throw Error(Status::kIoError, e.what());
    }
    B12X_CHECK_ARG(cfg.is_object(), in_cfg_path, ": not a JSON object");
  }
  json::Value qc = json::Value::object();
  qc.set("quant_method", json::Value::string("modelopt"));
  qc.set("quant_algo", json::Value::string("MIXED_PRECISION"));
  qc.set("kv_cache_quant_algo", json::Value::null());
  json::Value producer = json::Value::object();
  producer.set("name", json::Value::string("b12x"));
  producer.set("version", json::Value::string(version()));
  qc.set("producer", std::move(producer));
  qc.set("quantized_layers", std::move(layers));
  cfg.set("quantization_config", std::move(qc));
  {
    const std::string text = json::dump(cfg, 2) + "\n";
    const std::string path = out_dir + "/config.json";
    FILE* fp = std::fopen(path.c_str(), "wb");
    if (!fp) B12X_FAIL(Status::kIoError, path, ": cannot create");
    const bool ok = std::fwrite(text.data(), 1, text.size(), fp) == text.size();
    if (std::fclose(fp) != 0 || !ok) B12X_FAIL(Status::kIoError, path, ": write failed");
  }
  // Sharded checkpoints get a fresh index; other files (tokenizer, generation config) are copied.
  if (in.files().size() > 1) {
    json::Value idx = json::Value::object();
    json::Value meta = json::Value::object();
    meta.set("total_size", json::Value::integer(static_cast<int64_t>(rep.bytes_out)));
    idx.set("metadata", std::move(meta));
    json::Value wm = json::Value::object();
    for (const auto& [name, file] : weight_map) wm.set(name, json::Value::string(file));
    idx.set("weight_map", std::move(wm));
    const std::string text = json::dump(idx, 2) + "\n";
    FILE* fp = std::fopen((out_dir + "/model.safetensors.index.json").c_str(), "wb");
    if (!fp) B12X_FAIL(Status::kIoError, out_dir, "/model.safetensors.index.json: cannot create");
    std::fwrite(text.data(), 1, text.size(), fp);
    std::fclose(fp);
  }
  for (const auto& e : fs::directory_iterator(in_dir)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".safetensors" || name == "config.json" ||
        name == "hf_quant_config.json" || name.find(".safetensors.index") != std::string::npos)
      continue;
    fs::copy_file(e.path(), fs::path(out_dir) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) B12X_FAIL(Status::kIoError, e.path().string(), ": copy failed: ", ec.message());
  }
  return rep;
}

}  // namespace b12x::checkpoint
