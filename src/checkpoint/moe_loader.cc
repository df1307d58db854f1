// Stacking a checkpoint's experts into the fused MoE source layout (moe::SourceWeights).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <set>

#include "b12x/checkpoint.h"
#include "b12x/formats.h"
#include "b12x/status.h"

namespace b12x::checkpoint {

namespace {

int64_t round_up(int64_t a, int64_t b) {
  return (a + b - 1) / b * b;
}

moe::QuantMode quant_mode_of(const std::string& m) {
  if (m == "nvfp4") return moe::QuantMode::kNvfp4;
  if (m == "w4a8_nvfp4") return moe::QuantMode::kW4A8Nvfp4;
  if (m == "w4a8_mx") return moe::QuantMode::kW4A8Mx;
  if (m == "mxfp4") return moe::QuantMode::kMxfp4;
  if (m == "w4a16") return moe::QuantMode::kW4A16;
  if (m == "ggml_a16") return moe::QuantMode::kGgmlA16;
  B12X_FAIL(Status::kInternal, "load_moe_experts: unmapped quant mode '", m, "'");
}

moe::Activation activation_of(selection::Activation a) {
  switch (a) {
    case selection::Activation::kSiLU:
      return moe::Activation::kSilu;
    case selection::Activation::kSiTU:
      return moe::Activation::kSitu;
    case selection::Activation::kSwigluOAIUninterleave:
      return moe::Activation::kSwigluOai;
    case selection::Activation::kReLU2:
      return moe::Activation::kRelu2;
    default:
      B12X_FAIL(Status::kUnsupported, "load_moe_experts: activation ",
                selection::activation_name(a), " has no fused MoE kernel");
  }
}

void append(std::vector<uint8_t>& dst, const TensorRef& t, int64_t bytes) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  dst.insert(dst.end(), p, p + bytes);
}

float same_scale(float a, float b, const std::string& what) {
  if (std::fabs(a - b) > 1e-6f * std::max(std::fabs(a), std::fabs(b)))
    B12X_FAIL(Status::kUnsupported, what,
              ": gate and up projections have different global "
              "scales (",
              a, " vs ", b,
              "); the fused FC1 takes one per expert (re-export with "
              "shared scales, as b12x quantize does)");
  return a;
}

}  // namespace

std::unique_ptr<MoeExpertsSource> load_moe_experts(const CheckpointDir& c,
                                                   const QuantConfig& config,
                                                   const std::string& prefix,
                                                   const MoeLoadOptions& o) {
  auto out = std::make_unique<MoeExpertsSource>();
  MoeExpertsSource& m = *out;
  m.prefix = prefix;
  m.quant = config.resolve(prefix, true);
  if (c.find(prefix + ".gate_up_proj_blocks") || c.find(prefix + ".gate_up_proj"))
    B12X_FAIL(Status::kUnsupported, c.dir(), ": '", prefix,
              "' stores packed (gpt-oss style) expert tensors with interleaved gate/up rows; "
              "the fused MoE takes per-expert gate/up/down projections");
  // Expert ids.
  std::set<int64_t> ids;
  const std::string pre = prefix + ".";
  for (const auto& name : c.tensor_names()) {
    if (name.rfind(pre, 0) != 0) continue;
    const std::string rest = name.substr(pre.size());
    const std::string id = rest.substr(0, rest.find('.'));
    if (!id.empty() && id.size() < 10 && std::all_of(id.begin(), id.end(), ::isdigit))
      ids.insert(std::stoll(id));
  }
  B12X_CHECK_ARG(!ids.empty(), c.dir(), ": no experts under '", prefix, "'");
  m.num_experts = static_cast<int64_t>(ids.size());
  B12X_CHECK_ARG(*ids.begin() == 0 && *ids.rbegin() == m.num_experts - 1, c.dir(), ": experts of '",
                 prefix, "' are not numbered 0..", m.num_experts - 1);
  const std::string e0 = pre + "0.";
  const bool hf = c.find(e0 + "up_proj.weight") != nullptr;
  const std::string gate_n = hf ? "gate_proj" : "w1", up_n = hf ? "up_proj" : "w3",
                    down_n = hf ? "down_proj" : "w2";
  m.gated = c.find(e0 + gate_n + ".weight") != nullptr;

  std::vector<LinearWeights> gate, up, down;
  bool bias = false;
  for (int64_t e = 0; e < m.num_experts; ++e) {
    const std::string ep = pre + std::to_string(e) + ".";
    if (m.gated) gate.push_back(load_linear(c, m.quant, ep + gate_n));
    up.push_back(load_linear(c, m.quant, ep + up_n));
    down.push_back(load_linear(c, m.quant, ep + down_n));
    bias =
        bias || up.back().bias.data || down.back().bias.data || (m.gated && gate.back().bias.data);
  }
  m.hidden = up[0].k;
  m.intermediate = up[0].n;
  for (int64_t e = 0; e < m.num_experts; ++e) {
    const auto bad = [&](const LinearWeights& w, int64_t n, int64_t k) {
      B12X_CHECK_ARG(w.n == n && w.k == k, c.dir(), ": '", w.prefix, "' is [", w.n, ", ", w.k,
                     "], expected [", n, ", ", k, "] like expert 0");
    };
    if (m.gated) bad(gate[e], m.intermediate, m.hidden);
    bad(up[e], m.intermediate, m.hidden);
    bad(down[e], m.hidden, m.intermediate);
  }

  // Policy.
  const DType unq = up[0].weight.dtype == DType::kFP16 ? DType::kFP16 : DType::kBF16;
  selection::LayerDesc d = selection::LayerDesc::moe(
      weight_format_of(m.quant, unq),
      o.act != selection::ActFormat::kAuto ? o.act : act_format_of(m.quant, true), m.hidden,
      m.intermediate, m.num_experts, o.topk, m.gated ? o.activation : selection::Activation::kReLU2,
      o.compute_capability);
  d.name = prefix;
  d.io_dtype = o.params_dtype;
  d.has_bias = bias;
  m.selection = selection::select(d, o.env);
  if (!m.selection.supported) B12X_FAIL(Status::kUnsupported, prefix, ": ", m.selection.summary());

  const std::string& mode = m.selection.moe_quant_mode;
  moe::WeightsPlanArgs& a = m.plan_args;
  a.quant_mode = quant_mode_of(mode);
  a.source_format =
      m.selection.moe_source_format == "modelopt_nvfp4" ? moe::SourceFormat::kModeloptNvfp4
      : m.selection.moe_source_format == "fp4_e8m0_k32" ? moe::SourceFormat::kFp4E8M0K32
                                                        : moe::SourceFormat::kGgml;
  a.activation = activation_of(d.activation);
  a.params_dtype = o.params_dtype;
  a.num_experts = m.num_experts;
  a.hidden_size = m.hidden;
  a.intermediate_size = m.intermediate;
  a.w13_layout = moe::W13Layout::kW31;  // stacked [gate; up], flipped by prepare_weights
  const int64_t E = m.num_experts, H = m.hidden, I = m.intermediate;
  const int64_t rows1 = m.gated ? 2 * I : I;

  // Values: FC1 = [gate; up] per expert, FC2 = down.
  const auto stack_values = [&](int64_t row_bytes1, int64_t row_bytes2) {
    m.w1.reserve(E * rows1 * row_bytes1);
    m.w2.reserve(E * H * row_bytes2);
    for (int64_t e = 0; e < E; ++e) {
      if (m.gated) append(m.w1, gate[e].weight, I * row_bytes1);
      append(m.w1, up[e].weight, I * row_bytes1);
      append(m.w2, down[e].weight, H * row_bytes2);
    }
  };
  const bool nvfp4 = a.source_format == moe::SourceFormat::kModeloptNvfp4;
  if (a.source_format != moe::SourceFormat::kGgml) {
    stack_values(H / 2, I / 2);
    const int64_t g = nvfp4 ? 16 : 32;
    std::vector<uint8_t> s1, s2;  // linear grids
    for (int64_t e = 0; e < E; ++e) {
      if (m.gated) append(s1, gate[e].weight_scale, I * H / g);
      append(s1, up[e].weight_scale, I * H / g);
      append(s2, down[e].weight_scale, H * I / g);
    }
    if (nvfp4) {
      m.w1_scale.resize(E * formats::swizzled_block_scale_bytes(rows1, H / 16));
      m.w2_scale.resize(E * formats::swizzled_block_scale_bytes(H, I / 16));
      formats::swizzle_block_scale(s1.data(), E, rows1, H / 16, 0, m.w1_scale.data());
      formats::swizzle_block_scale(s2.data(), E, H, I / 16, 0, m.w2_scale.data());
      for (int64_t e = 0; e < E; ++e) {
        const std::string what = prefix + "." + std::to_string(e);
        m.w1_global.push_back(m.gated
                                  ? same_scale(gate[e].weight_scale_2, up[e].weight_scale_2, what)
                                  : up[e].weight_scale_2);
        m.w2_global.push_back(down[e].weight_scale_2);
        if (a.quant_mode == moe::QuantMode::kNvfp4) {
          const float in1 = std::max(m.gated ? gate[e].input_scale : 0.f, up[e].input_scale);
          B12X_CHECK_ARG(in1 > 0.f && down[e].input_scale > 0.f, what,
                         ": NVFP4 W4A4 needs the activation input_scale of every projection");
          m.a1_gscale.push_back(1.f / in1);
          m.a2_gscale.push_back(1.f / down[e].input_scale);
        }
      }
      const int64_t p1 = round_up(rows1, 128), c1 = round_up(H / 16, 4);
      const int64_t p2 = round_up(H, 128), c2 = round_up(I / 16, 4);
      m.source.w1_scale = TensorRef::contiguous(m.w1_scale.data(), DType::kUInt8, {E, p1, c1});
      m.source.w2_scale = TensorRef::contiguous(m.w2_scale.data(), DType::kUInt8, {E, p2, c2});
      m.source.w1_global_scale = TensorRef::contiguous(m.w1_global.data(), DType::kFP32, {E});
      m.source.w2_global_scale = TensorRef::contiguous(m.w2_global.data(), DType::kFP32, {E});
      if (!m.a1_gscale.empty()) {
        m.source.a1_gscale = TensorRef::contiguous(m.a1_gscale.data(), DType::kFP32, {E});
        m.source.a2_gscale = TensorRef::contiguous(m.a2_gscale.data(), DType::kFP32, {E});
      }
    } else {
      m.w1_scale = std::move(s1);
      m.w2_scale = std::move(s2);
      m.source.w1_scale =
          TensorRef::contiguous(m.w1_scale.data(), DType::kUInt8, {E, rows1, H / 32});
      m.source.w2_scale = TensorRef::contiguous(m.w2_scale.data(), DType::kUInt8, {E, H, I / 32});
    }
    m.source.w1 = TensorRef::contiguous(m.w1.data(), DType::kFP4E2M1, {E, rows1, H});
    m.source.w2 = TensorRef::contiguous(m.w2.data(), DType::kFP4E2M1, {E, H, I});
  } else {
    const DType dt = m.quant.algo == QuantAlgo::kQ8_0     ? DType::kQ8_0
                     : m.quant.algo == QuantAlgo::kIQ2_XS ? DType::kIQ2_XS
                                                          : DType::kIQ2_XXS;
    stack_values(dtype_bytes_for(dt, H), dtype_bytes_for(dt, I));
    a.ggml_w1_dtype = a.ggml_w2_dtype = dt;
    m.source.w1 = TensorRef::contiguous(m.w1.data(), dt, {E, rows1, H});
    m.source.w2 = TensorRef::contiguous(m.w2.data(), dt, {E, H, I});
  }
  return out;
}

}  // namespace b12x::checkpoint
