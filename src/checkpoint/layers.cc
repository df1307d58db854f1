// Loading one dense layer's tensors (validated against its quantization) and reconstructing it.
#include <cmath>
#include <cstring>

#include "b12x/checkpoint.h"
#include "b12x/formats.h"
#include "b12x/status.h"

namespace b12x::checkpoint {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

struct Found {
  const TensorInfo* info = nullptr;
  const SafetensorsFile* file = nullptr;
};

Found find_tensor(const CheckpointDir& c, const std::string& name) {
  Found f;
  f.info = c.find(name, &f.file);
  return f;
}

TensorRef bytes_view(const Found& f) {
  // Raw view for any dtype (packed data is addressed as bytes).
  if (f.info->dtype) return f.file->view(f.info->name);
  const int64_t n = static_cast<int64_t>(f.info->nbytes);
  return TensorRef::contiguous(const_cast<uint8_t*>(f.file->bytes(*f.info)), DType::kUInt8, {n});
}

void expect_dtype(const Found& f, std::initializer_list<const char*> allowed,
                  const std::string& what) {
  for (const char* a : allowed)
    if (f.info->st_dtype == a) return;
  std::string list;
  for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  B12X_FAIL(Status::kInvalidArgument, f.file->path(), ": tensor '", f.info->name, "' (", what,
            ") has dtype ", f.info->st_dtype, ", expected ", list);
}

void expect_shape(const Found& f, const std::vector<int64_t>& want, const std::string& what) {
  if (f.info->shape != want)
    B12X_FAIL(Status::kInvalidArgument, f.file->path(), ": tensor '", f.info->name, "' (", what,
              ") has shape ", shape_str(f.info->shape), ", expected ", shape_str(want));
}

float read_scalar(const Found& f, const std::string& what) {
  expect_dtype(f, {"F32"}, what);
  if (f.info->numel() != 1)
    B12X_FAIL(Status::kInvalidArgument, f.file->path(), ": tensor '", f.info->name, "' (", what,
              ") must hold one fp32 value, has shape ", shape_str(f.info->shape));
  float v = 0;
  std::memcpy(&v, f.file->bytes(*f.info), 4);
  if (!std::isfinite(v) || v < 0)
    B12X_FAIL(Status::kInvalidArgument, f.file->path(), ": tensor '", f.info->name, "' (", what,
              ") is ", v, ", expected a finite non-negative scale");
  return v;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

LinearWeights load_linear(const CheckpointDir& c, const QuantConfig& config,
                          const std::string& prefix) {
  return load_linear(c, config.resolve(prefix), prefix);
}

LinearWeights load_linear(const CheckpointDir& c, const LayerQuant& quant,
                          const std::string& prefix) {
  LinearWeights w;
  w.prefix = prefix;
  w.quant = quant;
  const Found wt = find_tensor(c, prefix + ".weight");
  if (!wt.info)
    B12X_FAIL(Status::kInvalidArgument, c.dir(), ": layer '", prefix, "' has no tensor '", prefix,
              ".weight'");
  Found sc = find_tensor(c, prefix + ".weight_scale");
  if (!sc.info) sc = find_tensor(c, prefix + ".weight_scale_inv");
  const Found sc2 = find_tensor(c, prefix + ".weight_scale_2");
  const Found in = find_tensor(c, prefix + ".input_scale");
  const Found bias = find_tensor(c, prefix + ".bias");
  for (const Found* f : std::initializer_list<const Found*>{&wt, &sc, &sc2, &in, &bias})
    if (f->info) {
      w.tensors.push_back(f->info->name);
      w.bytes += f->info->nbytes;
    }
  const auto& shape = wt.info->shape;
  const std::string where = c.dir() + ": layer '" + prefix + "'";
  const auto need_2d = [&] {
    if (shape.size() != 2)
      B12X_FAIL(Status::kInvalidArgument, wt.file->path(), ": tensor '", wt.info->name,
                "' has shape ", shape_str(shape), ", expected a 2-D weight");
  };
  const auto need_scale = [&](const char* what) {
    if (!sc.info)
      B12X_FAIL(Status::kInvalidArgument, where, " is ", quant_algo_name(w.quant.algo),
                " but has no ", prefix, ".weight_scale (", what, ")");
  };
  w.weight = bytes_view(wt);
  switch (w.quant.algo) {
    case QuantAlgo::kNone:
      need_2d();
      if (wt.info->st_dtype != "BF16" && wt.info->st_dtype != "F16" && wt.info->st_dtype != "F32")
        B12X_FAIL(Status::kInvalidArgument, where, ": weight is stored as ", wt.info->st_dtype,
                  " but the quantization config does not quantize this layer; refusing to treat it "
                  "as unquantized");
      if (sc.info || sc2.info)
        B12X_FAIL(Status::kInvalidArgument, where, ": has scale tensors (",
                  sc.info ? sc.info->name : sc2.info->name,
                  ") but the quantization config does not quantize this layer");
      w.n = shape[0];
      w.k = shape[1];
      break;
    case QuantAlgo::kNVFP4:
    case QuantAlgo::kW4A16NVFP4:
    case QuantAlgo::kMXFP4: {
      need_2d();
      expect_dtype(wt, {"U8"}, "packed FP4, two values per byte");
      w.n = shape[0];
      w.k = shape[1] * 2;
      const bool nv = w.quant.algo != QuantAlgo::kMXFP4;
      const int g = nv ? 16 : 32;
      if (w.k % g != 0)
        B12X_FAIL(Status::kInvalidArgument, where, ": K=", w.k, " is not a multiple of ", g);
      need_scale(nv ? "E4M3 per 16 values" : "E8M0 per 32 values");
      if (nv)
        expect_dtype(sc, {"F8_E4M3", "U8"}, "E4M3 block scales");
      else
        expect_dtype(sc, {"U8", "F8_E8M0"}, "E8M0 block scales");
      expect_shape(sc, {w.n, w.k / g}, "block scales");
      w.weight_scale = bytes_view(sc);
      if (nv) {
        if (!sc2.info)
          B12X_FAIL(Status::kInvalidArgument, where, ": NVFP4 needs ", prefix,
                    ".weight_scale_2 (the fp32 global dequant scale)");
        w.weight_scale_2 = read_scalar(sc2, "global scale");
        if (w.weight_scale_2 == 0.f)
          B12X_FAIL(Status::kInvalidArgument, where, ": weight_scale_2 is 0");
      }
      if (w.quant.algo == QuantAlgo::kNVFP4) {
        if (!in.info)
          B12X_FAIL(Status::kInvalidArgument, where, ": NVFP4 (W4A4) needs ", prefix,
                    ".input_scale; W4A16 checkpoints declare W4A16_NVFP4");
        w.input_scale = read_scalar(in, "input scale");
        w.output_scale = w.input_scale * w.weight_scale_2;
      }
      break;
    }
    case QuantAlgo::kMXFP8:
      need_2d();
      expect_dtype(wt, {"F8_E4M3"}, "E4M3 values");
      w.n = shape[0];
      w.k = shape[1];
      if (w.k % 32 != 0)
        B12X_FAIL(Status::kInvalidArgument, where, ": K=", w.k, " is not a multiple of 32");
      need_scale("E8M0 per 32 values");
      expect_dtype(sc, {"U8", "F8_E8M0"}, "E8M0 block scales");
      expect_shape(sc, {w.n, w.k / 32}, "block scales");
      w.weight_scale = bytes_view(sc);
      break;
    case QuantAlgo::kFP8:
      need_2d();
      expect_dtype(wt, {"F8_E4M3"}, "E4M3 values");
      w.n = shape[0];
      w.k = shape[1];
      need_scale("one fp32 per tensor");
      w.weight_scale_2 = read_scalar(sc, "per-tensor weight scale");
      if (in.info) w.input_scale = read_scalar(in, "input scale");
      w.output_scale = w.input_scale * w.weight_scale_2;
      if (!in.info && !w.quant.dynamic_activation)
        B12X_FAIL(Status::kInvalidArgument, where, ": static per-tensor FP8 needs ", prefix,
                  ".input_scale");
      break;
    case QuantAlgo::kFP8Block: {
      need_2d();
      expect_dtype(wt, {"F8_E4M3"}, "E4M3 values");
      w.n = shape[0];
      w.k = shape[1];
      need_scale("fp32 per 128x128 block");
      const int br = w.quant.weight_block[0] ? w.quant.weight_block[0] : 128;
      const int bc = w.quant.weight_block[1] ? w.quant.weight_block[1] : 128;
      expect_dtype(sc, {"F32"}, "block scales");
      expect_shape(sc, {ceil_div(w.n, br), ceil_div(w.k, bc)}, "block scales");
      w.weight_scale = bytes_view(sc);
      break;
    }
    case QuantAlgo::kQ8_0:
    case QuantAlgo::kIQ2_XS:
    case QuantAlgo::kIQ2_XXS: {
      expect_dtype(wt, {"U8"}, "GGML blocks");
      const int gs = w.quant.group_size, pb = w.quant.block_payload_bytes;
      w.n = shape.empty() ? 0 : shape[0];
      if (shape.size() == 3) {
        if (shape[2] != pb)
          B12X_FAIL(Status::kInvalidArgument, wt.file->path(), ": tensor '", wt.info->name,
                    "' has ", shape[2], "-byte blocks, ", quant_algo_name(w.quant.algo),
                    " blocks are ", pb, " bytes");
        w.k = shape[1] * gs;
      } else if (shape.size() == 2 && shape[1] % pb == 0) {
        w.k = shape[1] / pb * gs;
      } else {
        B12X_FAIL(Status::kInvalidArgument, wt.file->path(), ": tensor '", wt.info->name,
                  "' has shape ", shape_str(shape), ", expected uint8 [N, K/", gs, ", ", pb, "]");
      }
      if (sc.info)
        B12X_FAIL(Status::kInvalidArgument, where, ": GGML blocks carry their own scales but ",
                  sc.info->name, " exists");
      break;
    }
  }
  if (bias.info) {
    if (bias.info->shape != std::vector<int64_t>{w.n})
      B12X_FAIL(Status::kInvalidArgument, bias.file->path(), ": tensor '", bias.info->name,
                "' has shape ", shape_str(bias.info->shape), ", expected [", w.n, "]");
    w.bias = bytes_view(bias);
  }
  return w;
}

std::vector<float> dequantize_linear(const LinearWeights& w) {
  std::vector<float> out(static_cast<size_t>(w.n * w.k));
  const auto* v = static_cast<const uint8_t*>(w.weight.data);
  const auto* s = static_cast<const uint8_t*>(w.weight_scale.data);
  switch (w.quant.algo) {
    case QuantAlgo::kNone:
      if (w.weight.dtype == DType::kFP32)
        std::memcpy(out.data(), v, out.size() * 4);
      else
        formats::decode_scalar(w.weight.dtype, v, out.data(), static_cast<int64_t>(out.size()));
      break;
    case QuantAlgo::kNVFP4:
    case QuantAlgo::kW4A16NVFP4:
      formats::dequantize_nvfp4(v, s, w.n, w.k, 1.0f / w.weight_scale_2, out.data());
      break;
    case QuantAlgo::kMXFP4:
      formats::dequantize_mxfp4(v, s, w.n, w.k, out.data());
      break;
    case QuantAlgo::kMXFP8:
      formats::dequantize_mxfp8(v, s, w.n, w.k, out.data());
      break;
    case QuantAlgo::kFP8:
      formats::dequantize_fp8_per_tensor(v, w.n * w.k, w.weight_scale_2, out.data());
      break;
    case QuantAlgo::kFP8Block:
      formats::dequantize_block_fp8(v, reinterpret_cast<const float*>(s), w.n, w.k,
                                    w.quant.weight_block[0] ? w.quant.weight_block[0] : 128,
                                    out.data());
      break;
    case QuantAlgo::kQ8_0:
      formats::dequantize_q8_0(v, w.n, w.k, out.data());
      break;
    case QuantAlgo::kIQ2_XS:
      formats::dequantize_iq2_xs(v, w.n, w.k, out.data());
      break;
    case QuantAlgo::kIQ2_XXS:
      formats::dequantize_iq2_xxs(v, w.n, w.k, out.data());
      break;
  }
  return out;
}

selection::LayerDesc linear_layer_desc(const LinearWeights& w, DType io_dtype,
                                       int compute_capability, bool embedding) {
  selection::LayerDesc d;
  d.name = w.prefix;
  d.kind = embedding ? selection::LayerKind::kEmbedding : selection::LayerKind::kDenseLinear;
  d.weight =
      weight_format_of(w.quant, w.weight.dtype == DType::kFP16 ? DType::kFP16 : DType::kBF16);
  d.act = act_format_of(w.quant, false);
  d.io_dtype = io_dtype;
  d.n = w.n;
  d.k = w.k;
  d.has_bias = w.bias.data != nullptr;
  d.static_input_scale = w.input_scale > 0.f;
  d.weight_block_128 = w.quant.algo != QuantAlgo::kFP8Block ||
                       ((w.quant.weight_block[0] == 0 || w.quant.weight_block[0] == 128) &&
                        (w.quant.weight_block[1] == 0 || w.quant.weight_block[1] == 128));
  d.compute_capability = compute_capability;
  return d;
}

gemm::LinearFormat gemm_format_for_path(const std::string& path) {
  using F = gemm::LinearFormat;
  static const std::pair<const char*, F> table[] = {
      {"gemm.fp8_tensor", F::kFp8Tensor},
      {"gemm.fp8_block", F::kFp8Block},
      {"gemm.mxfp8", F::kMxfp8},
      {"gemm.nvfp4_w4a4", F::kNvfp4},
      {"gemm.nvfp4_w4a16", F::kNvfp4W4A16},
      {"gemm.mxfp4_w4a4", F::kMxfp4},
      {"gemm.mxfp4_w4a8", F::kMxfp4W4A8},
      {"gemm.mxfp4_w4a16", F::kMxfp4W4A16},
      {"gemm.iq2_xxs", F::kIq2Xxs},
      {"gemm.iq2_xs", F::kIq2Xs},
      {"gemm.q8_0", F::kQ8_0},
  };
  for (const auto& [name, f] : table)
    if (path == name) return f;
  B12X_FAIL(Status::kInvalidArgument, "gemm_format_for_path: '", path,
            "' is not a b12x GEMM path (gemm.fp8_tensor, gemm.fp8_block, gemm.mxfp8, "
            "gemm.nvfp4_w4a4, gemm.nvfp4_w4a16, gemm.mxfp4_w4a4/_w4a8/_w4a16, gemm.q8_0, "
            "gemm.iq2_xs, gemm.iq2_xxs)");
}

TensorRef ggml_weight_view(const LinearWeights& w) {
  DType dt;
  switch (w.quant.algo) {
    case QuantAlgo::kQ8_0:
      dt = DType::kQ8_0;
      break;
    case QuantAlgo::kIQ2_XS:
      dt = DType::kIQ2_XS;
      break;
    case QuantAlgo::kIQ2_XXS:
      dt = DType::kIQ2_XXS;
      break;
    default:
      B12X_FAIL(Status::kInvalidArgument, "ggml_weight_view: layer '", w.prefix, "' is ",
                quant_algo_name(w.quant.algo), ", not a GGML format (Q8_0, IQ2_XS, IQ2_XXS)");
  }
  return TensorRef::contiguous(w.weight.data, dt, {w.n, w.k}, w.weight.device);
}

gemm::WeightSource gemm_weight_source(const LinearWeights& w, gemm::LinearFormat f) {
  using F = gemm::LinearFormat;
  QuantAlgo need = QuantAlgo::kNone;
  switch (f) {
    case F::kFp8Tensor:
      need = QuantAlgo::kFP8;
      break;
    case F::kFp8Block:
      need = QuantAlgo::kFP8Block;
      break;
    case F::kMxfp8:
      need = QuantAlgo::kMXFP8;
      break;
    case F::kNvfp4:
      need = QuantAlgo::kNVFP4;
      break;
    case F::kNvfp4W4A16:
      need = QuantAlgo::kW4A16NVFP4;
      break;
    case F::kMxfp4:
    case F::kMxfp4W4A8:
    case F::kMxfp4W4A16:
      need = QuantAlgo::kMXFP4;
      break;
    case F::kIq2Xxs:
      need = QuantAlgo::kIQ2_XXS;
      break;
    case F::kIq2Xs:
      need = QuantAlgo::kIQ2_XS;
      break;
    case F::kQ8_0:
      need = QuantAlgo::kQ8_0;
      break;
  }
  // W4A4 NVFP4 weights also run as W4A16 (the activation scale is then unused).
  const bool ok =
      w.quant.algo == need || (f == F::kNvfp4W4A16 && w.quant.algo == QuantAlgo::kNVFP4);
  B12X_CHECK_ARG(ok, "gemm_weight_source: layer '", w.prefix, "' is ",
                 quant_algo_name(w.quant.algo), ", which GEMM format ", static_cast<int>(f),
                 " does not take (it needs ", quant_algo_name(need), ")");
  gemm::WeightSource s;
  s.format = f;
  s.weight = w.weight;
  s.weight_scale = w.weight_scale;
  s.in_features = w.k;
  switch (need) {
    case QuantAlgo::kNVFP4:
    case QuantAlgo::kW4A16NVFP4:
      s.global_scale = w.weight_scale_2;
      break;
    case QuantAlgo::kFP8:
      s.output_scale =
          TensorRef::contiguous(const_cast<float*>(&w.output_scale), DType::kFP32, {1});
      break;
    case QuantAlgo::kQ8_0:
    case QuantAlgo::kIQ2_XS:
    case QuantAlgo::kIQ2_XXS:
      s.weight = ggml_weight_view(w);
      break;
    default:
      break;
  }
  return s;
}

selection::WeightFormat weight_format_of(const LayerQuant& q, DType unquantized) {
  using W = selection::WeightFormat;
  switch (q.algo) {
    case QuantAlgo::kNone:
      return unquantized == DType::kFP16 ? W::kFP16 : W::kBF16;
    case QuantAlgo::kFP8:
      return W::kFP8Tensor;
    case QuantAlgo::kFP8Block:
      return (q.weight_block[0] == 0 || (q.weight_block[0] == 128 && q.weight_block[1] == 128))
                 ? W::kFP8Block
                 : W::kFP8BlockOther;
    case QuantAlgo::kMXFP8:
      return W::kMXFP8;
    case QuantAlgo::kNVFP4:
    case QuantAlgo::kW4A16NVFP4:
      return W::kNVFP4;
    case QuantAlgo::kMXFP4:
      return W::kMXFP4;
    case QuantAlgo::kQ8_0:
      return W::kQ8_0;
    case QuantAlgo::kIQ2_XS:
      return W::kIQ2_XS;
    case QuantAlgo::kIQ2_XXS:
      return W::kIQ2_XXS;
  }
  return W::kBF16;
}

selection::ActFormat act_format_of(const LayerQuant& q, bool is_moe) {
  using A = selection::ActFormat;
  switch (q.algo) {
    case QuantAlgo::kNVFP4:
      return A::kNVFP4;
    case QuantAlgo::kW4A16NVFP4:
      return A::kBF16;
    case QuantAlgo::kMXFP4:
      return is_moe ? A::kAuto : A::kMXFP4;
    case QuantAlgo::kMXFP8:
      return A::kMXFP8;
    case QuantAlgo::kFP8:
      return q.dynamic_activation ? A::kFP8Dynamic : A::kFP8Static;
    case QuantAlgo::kFP8Block:
      return A::kFP8Dynamic;
    default:
      return A::kBF16;
  }
}

}  // namespace b12x::checkpoint
