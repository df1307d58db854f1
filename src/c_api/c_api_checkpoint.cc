// C ABI: safetensors files, quantization configs, inspect and quantize.
#include <cstring>
#include <memory>

#include "b12x/c_api.h"
#include "b12x/checkpoint.h"
#include "c_api/c_api_util.h"
#include "checkpoint/internal.h"
#include "checkpoint/json.h"

using namespace b12x;
using namespace b12x::checkpoint;

struct b12x_safetensors_s {
  SafetensorsFile file;
};
struct b12x_safetensors_writer_s {
  SafetensorsWriter writer;
};

namespace b12x::capi {

void copy_out(const std::string& s, char* buf, size_t len, size_t* needed) {
  if (needed) *needed = s.size() + 1;
  if (buf && len > 0) {
    const size_t n = std::min(s.size(), len - 1);
    std::memcpy(buf, s.data(), n);
    buf[n] = 0;
  }
}

namespace {

QuantConfig config_of(const char* dir, const char* json_text) {
  if (json_text) return QuantConfig::from_json(json_text, dir ? dir : "<json>");
  B12X_CHECK_ARG(dir != nullptr, "quant config: dir and json_text are both NULL");
  return QuantConfig::from_dir(dir);
}

QuantAlgo quantize_format(const char* format) {
  B12X_CHECK_ARG(format != nullptr, "quantize: format is NULL");
  const std::string f = format;
  struct {
    const char* name;
    QuantAlgo algo;
  } table[] = {{"nvfp4", QuantAlgo::kNVFP4},    {"mxfp4", QuantAlgo::kMXFP4},
               {"mxfp8", QuantAlgo::kMXFP8},    {"fp8", QuantAlgo::kFP8},
               {"q8_0", QuantAlgo::kQ8_0},      {"iq2_xs", QuantAlgo::kIQ2_XS},
               {"iq2_xxs", QuantAlgo::kIQ2_XXS}};
  for (const auto& t : table)
    if (f == t.name) return t.algo;
  B12X_FAIL(Status::kInvalidArgument, "quantize: --format ", f,
            " is not supported (supported: nvfp4, mxfp4, mxfp8, fp8, q8_0, iq2_xs, iq2_xxs)");
}

}  // namespace

std::string quantize_report_json(const QuantizeReport& r) {
  json::Value v = json::Value::object();
  json::Value layers = json::Value::array();
  for (const auto& l : r.layers) {
    json::Value e = json::Value::object();
    e.set("name", json::Value::string(l.name));
    e.set("quant_algo", json::Value::string(quant_algo_name(l.algo)));
    e.set("n", json::Value::integer(l.n));
    e.set("k", json::Value::integer(l.k));
    e.set("rel_rms_error", json::Value::number(l.rel_rms_error));
    e.set("max_abs_error", json::Value::number(l.max_abs_error));
    e.set("bound", json::Value::number(l.bound));
    e.set("bytes_in", json::Value::integer(static_cast<int64_t>(l.bytes_in)));
    e.set("bytes_out", json::Value::integer(static_cast<int64_t>(l.bytes_out)));
    layers.push(std::move(e));
  }
  v.set("layers", std::move(layers));
  json::Value skipped = json::Value::array();
  for (const auto& [t, why] : r.skipped) {
    json::Value p = json::Value::array();
    p.push(json::Value::string(t));
    p.push(json::Value::string(why));
    skipped.push(std::move(p));
  }
  v.set("skipped", std::move(skipped));
  v.set("bytes_in", json::Value::integer(static_cast<int64_t>(r.bytes_in)));
  v.set("bytes_out", json::Value::integer(static_cast<int64_t>(r.bytes_out)));
  return json::dump(v);
}

QuantAlgo quantize_format_from_name(const char* f) {
  return quantize_format(f);
}

}  // namespace b12x::capi

extern "C" {

b12x_status b12x_safetensors_open(const char* path, b12x_safetensors* out) {
  return capi::guard([&] {
    B12X_CHECK_ARG(path && out, "b12x_safetensors_open: path and out must not be NULL");
    *out = nullptr;
    auto h = std::make_unique<b12x_safetensors_s>(b12x_safetensors_s{SafetensorsFile::open(path)});
    *out = h.release();
  });
}

b12x_status b12x_safetensors_close(b12x_safetensors f) {
  return capi::guard([&] { delete f; });
}

b12x_status b12x_safetensors_num_tensors(b12x_safetensors f, int64_t* count) {
  return capi::guard([&] {
    B12X_CHECK_ARG(f && count, "b12x_safetensors_num_tensors: NULL argument");
    *count = static_cast<int64_t>(f->file.tensors().size());
  });
}

b12x_status b12x_safetensors_tensor_at(b12x_safetensors f, int64_t index,
                                       b12x_safetensors_tensor* out) {
  return capi::guard([&] {
    B12X_CHECK_ARG(f && out, "b12x_safetensors_tensor_at: NULL argument");
    const auto& ts = f->file.tensors();
    B12X_CHECK_ARG(index >= 0 && index < static_cast<int64_t>(ts.size()),
                   "b12x_safetensors_tensor_at: index=", index, " outside [0, ", ts.size(), ")");
    const TensorInfo& t = ts[static_cast<size_t>(index)];
    B12X_CHECK_ARG(t.shape.size() <= B12X_SAFETENSORS_MAX_RANK, f->file.path(), ": tensor '",
                   t.name, "' has rank ", t.shape.size(), " (the C ABI carries up to ",
                   B12X_SAFETENSORS_MAX_RANK, ")");
    std::memset(out, 0, sizeof(*out));
    out->name = t.name.c_str();
    out->st_dtype = t.st_dtype.c_str();
    out->dtype = t.dtype ? static_cast<int32_t>(*t.dtype) : -1;
    out->bits = t.bits;
    out->ndim = static_cast<int32_t>(t.shape.size());
    for (size_t d = 0; d < t.shape.size(); ++d) out->shape[d] = t.shape[d];
    out->offset = t.offset;
    out->nbytes = t.nbytes;
    out->data = f->file.bytes(t);
  });
}

b12x_status b12x_safetensors_find(b12x_safetensors f, const char* name, int64_t* index) {
  return capi::guard([&] {
    B12X_CHECK_ARG(f && name && index, "b12x_safetensors_find: NULL argument");
    *index = -1;
    const auto& ts = f->file.tensors();
    for (size_t i = 0; i < ts.size(); ++i)
      if (ts[i].name == name) *index = static_cast<int64_t>(i);
  });
}

b12x_status b12x_safetensors_metadata_json(b12x_safetensors f, char* buf, size_t len,
                                           size_t* needed) {
  return capi::guard([&] {
    B12X_CHECK_ARG(f != nullptr, "b12x_safetensors_metadata_json: NULL file");
    json::Value v = json::Value::object();
    for (const auto& [k, val] : f->file.metadata()) v.set(k, json::Value::string(val));
    capi::copy_out(json::dump(v), buf, len, needed);
  });
}

b12x_status b12x_safetensors_parse(const void* data, size_t size, char* buf, size_t len,
                                   size_t* needed) {
  return capi::guard([&] {
    const SafetensorsIndex idx =
        parse_safetensors(static_cast<const uint8_t*>(data), size, "<memory>");
    json::Value v = json::Value::object();
    json::Value ts = json::Value::array();
    for (const auto& t : idx.tensors) {
      json::Value e = json::Value::object();
      e.set("name", json::Value::string(t.name));
      e.set("dtype", json::Value::string(t.st_dtype));
      json::Value shape = json::Value::array();
      for (int64_t d : t.shape) shape.push(json::Value::integer(d));
      e.set("shape", std::move(shape));
      e.set("offset", json::Value::integer(static_cast<int64_t>(t.offset)));
      e.set("nbytes", json::Value::integer(static_cast<int64_t>(t.nbytes)));
      ts.push(std::move(e));
    }
    v.set("tensors", std::move(ts));
    json::Value md = json::Value::object();
    for (const auto& [k, val] : idx.metadata) md.set(k, json::Value::string(val));
    v.set("metadata", std::move(md));
    capi::copy_out(json::dump(v), buf, len, needed);
  });
}

b12x_status b12x_safetensors_writer_create(b12x_safetensors_writer* out) {
  return capi::guard([&] {
    B12X_CHECK_ARG(out != nullptr, "b12x_safetensors_writer_create: out is NULL");
    *out = new b12x_safetensors_writer_s();
  });
}

b12x_status b12x_safetensors_writer_destroy(b12x_safetensors_writer w) {
  return capi::guard([&] { delete w; });
}

b12x_status b12x_safetensors_writer_add(b12x_safetensors_writer w, const char* name,
                                        const char* st_dtype, int32_t ndim, const int64_t* shape,
                                        const void* data, uint64_t nbytes) {
  return capi::guard([&] {
    B12X_CHECK_ARG(w && name && st_dtype, "b12x_safetensors_writer_add: NULL argument");
    B12X_CHECK_ARG(ndim >= 0 && ndim <= 32 && (ndim == 0 || shape),
                   "b12x_safetensors_writer_add: ndim=", ndim, " (0..32 with a shape array)");
    B12X_CHECK_ARG(data || nbytes == 0, "b12x_safetensors_writer_add: data is NULL");
    w->writer.add(name, st_dtype, std::vector<int64_t>(shape, shape + ndim), data,
                  static_cast<size_t>(nbytes));
  });
}

b12x_status b12x_safetensors_writer_set_metadata(b12x_safetensors_writer w, const char* key,
                                                 const char* value) {
  return capi::guard([&] {
    B12X_CHECK_ARG(w && key && value, "b12x_safetensors_writer_set_metadata: NULL argument");
    w->writer.set_metadata(key, value);
  });
}

b12x_status b12x_safetensors_writer_write(b12x_safetensors_writer w, const char* path) {
  return capi::guard([&] {
    B12X_CHECK_ARG(w && path, "b12x_safetensors_writer_write: NULL argument");
    w->writer.write(path);
  });
}

b12x_status b12x_quant_config_json(const char* dir, const char* json_text, char* buf, size_t len,
                                   size_t* needed) {
  return capi::guard(
      [&] { capi::copy_out(capi::config_of(dir, json_text).to_json(), buf, len, needed); });
}

b12x_status b12x_quant_config_resolve(const char* dir, const char* json_text, const char* prefix,
                                      int32_t is_moe, char* buf, size_t len, size_t* needed) {
  return capi::guard([&] {
    B12X_CHECK_ARG(prefix != nullptr, "b12x_quant_config_resolve: prefix is NULL");
    const LayerQuant q = capi::config_of(dir, json_text).resolve(prefix, is_moe != 0);
    capi::copy_out(json::dump(layer_quant_json(q)), buf, len, needed);
  });
}

b12x_status b12x_checkpoint_inspect(const char* dir, int32_t compute_capability, int32_t tp_size,
                                    char* buf, size_t len, size_t* needed) {
  return capi::guard([&] {
    B12X_CHECK_ARG(dir != nullptr, "b12x_checkpoint_inspect: dir is NULL");
    B12X_CHECK_ARG(tp_size >= 1, "b12x_checkpoint_inspect: tp_size=", tp_size, " must be >= 1");
    InspectOptions o;
    o.compute_capability = compute_capability;
    o.tp_size = tp_size;
    capi::copy_out(inspect(dir, o).to_json(), buf, len, needed);
  });
}

b12x_status b12x_checkpoint_quantize(const char* in_dir, const char* out_dir, const char* format,
                                     const char* const* layer_patterns, int32_t num_patterns,
                                     float input_amax, char* buf, size_t len, size_t* needed) {
  return capi::guard([&] {
    B12X_CHECK_ARG(in_dir && out_dir, "b12x_checkpoint_quantize: in_dir and out_dir are required");
    B12X_CHECK_ARG(num_patterns >= 0 && (num_patterns == 0 || layer_patterns),
                   "b12x_checkpoint_quantize: num_patterns=", num_patterns);
    QuantizeOptions o;
    o.algo = capi::quantize_format_from_name(format);
    o.input_amax = input_amax;
    for (int32_t i = 0; i < num_patterns; ++i) {
      B12X_CHECK_ARG(layer_patterns[i] != nullptr, "b12x_checkpoint_quantize: pattern ", i,
                     " is NULL");
      o.layer_patterns.emplace_back(layer_patterns[i]);
    }
    capi::copy_out(capi::quantize_report_json(quantize_checkpoint(in_dir, out_dir, o)), buf, len,
                   needed);
  });
}

b12x_status b12x_checkpoint_dequantize_linear(const char* dir, const char* prefix, float* out,
                                              int64_t out_numel, int64_t* n, int64_t* k) {
  return capi::guard([&] {
    B12X_CHECK_ARG(dir && prefix, "b12x_checkpoint_dequantize_linear: dir and prefix required");
    const CheckpointDir c = CheckpointDir::open(dir);
    const LinearWeights w = load_linear(c, QuantConfig::from_dir(dir), prefix);
    if (n) *n = w.n;
    if (k) *k = w.k;
    if (!out) return;
    B12X_CHECK_ARG(out_numel >= w.n * w.k, "b12x_checkpoint_dequantize_linear: out holds ",
                   out_numel, " values, layer '", prefix, "' needs ", w.n * w.k);
    const std::vector<float> v = dequantize_linear(w);
    std::memcpy(out, v.data(), v.size() * sizeof(float));
  });
}

b12x_status b12x_checkpoint_load_linear_json(const char* dir, const char* prefix,
                                             int32_t compute_capability, char* buf, size_t len,
                                             size_t* needed) {
  return capi::guard([&] {
    B12X_CHECK_ARG(dir && prefix, "b12x_checkpoint_load_linear_json: dir and prefix required");
    const CheckpointDir c = CheckpointDir::open(dir);
    const LinearWeights w = load_linear(c, QuantConfig::from_dir(dir), prefix);
    json::Value v = json::Value::object();
    v.set("prefix", json::Value::string(w.prefix));
    v.set("quant", layer_quant_json(w.quant));
    v.set("n", json::Value::integer(w.n));
    v.set("k", json::Value::integer(w.k));
    v.set("weight_scale_2", json::Value::number(w.weight_scale_2));
    v.set("input_scale", json::Value::number(w.input_scale));
    v.set("output_scale", json::Value::number(w.output_scale));
    json::Value ts = json::Value::object();
    for (const auto& name : w.tensors) {
      const SafetensorsFile* f = nullptr;
      c.find(name, &f);
      json::Value e = json::Value::object();
      e.set("file", json::Value::string(f->path()));
      e.set("name", json::Value::string(name));
      ts.set(name.substr(w.prefix.size() + 1), std::move(e));
    }
    v.set("tensors", std::move(ts));
    const selection::Selection s =
        selection::select(linear_layer_desc(w, DType::kBF16, compute_capability));
    v.set("selection", json::parse(s.to_json(), "selection"));
    capi::copy_out(json::dump(v), buf, len, needed);
  });
}

}  // extern "C"
