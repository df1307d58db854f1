// Host side of the fused MoE: validation, weight planning and preparation, scratch planning,
// binding and dispatch to the device launchers (moe_kernels.cu).
#include "b12x/moe.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "b12x/runtime.h"
#include "b12x/status.h"
#include "core/cuda_check.h"
#include "moe/moe_launch.h"

namespace b12x::moe {

using detail::WeightView;

// ---------------------------------------------------------------- names ----------------------
const char* quant_mode_name(QuantMode m) noexcept {
  switch (m) {
    case QuantMode::kNvfp4:
      return "nvfp4";
    case QuantMode::kW4A8Nvfp4:
      return "w4a8_nvfp4";
    case QuantMode::kW4A8Mx:
      return "w4a8_mx";
    case QuantMode::kMxfp4:
      return "mxfp4";
    case QuantMode::kW4A16:
      return "w4a16";
    case QuantMode::kGgmlA16:
      return "ggml_a16";
  }
  return "invalid";
}
const char* activation_name(Activation a) noexcept {
  switch (a) {
    case Activation::kSilu:
      return "silu";
    case Activation::kSitu:
      return "situ";
    case Activation::kSwigluOai:
      return "swigluoai_uninterleave";
    case Activation::kRelu2:
      return "relu2";
  }
  return "invalid";
}
const char* source_format_name(SourceFormat f) noexcept {
  switch (f) {
    case SourceFormat::kModeloptNvfp4:
      return "modelopt_nvfp4";
    case SourceFormat::kFp4E8M0K32:
      return "fp4_e8m0_k32";
    case SourceFormat::kGgml:
      return "ggml";
  }
  return "invalid";
}
QuantMode quant_mode_from_name(const std::string& s) {
  for (int i = 0; i <= 5; ++i)
    if (s == quant_mode_name(static_cast<QuantMode>(i))) return static_cast<QuantMode>(i);
  B12X_FAIL(Status::kInvalidArgument, "fused_moe: quant_mode='", s,
            "' is unknown (supported: nvfp4, w4a8_nvfp4, w4a8_mx, mxfp4, w4a16, ggml_a16)");
}
Activation activation_from_name(const std::string& s) {
  if (s == "silu") return Activation::kSilu;
  if (s == "situ") return Activation::kSitu;
  if (s == "swigluoai_uninterleave" || s == "swiglu_oai") return Activation::kSwigluOai;
  if (s == "relu2" || s == "relu2_no_mul") return Activation::kRelu2;
  B12X_FAIL(Status::kInvalidArgument, "fused_moe: activation='", s,
            "' is unknown (supported: silu, situ, swigluoai_uninterleave, relu2; interleaved "
            "swigluoai is not supported)");
}
SourceFormat source_format_from_name(const std::string& s) {
  for (int i = 0; i <= 2; ++i)
    if (s == source_format_name(static_cast<SourceFormat>(i))) return static_cast<SourceFormat>(i);
  B12X_FAIL(Status::kInvalidArgument, "fused_moe: source_format='", s,
            "' is unknown (supported: modelopt_nvfp4, fp4_e8m0_k32, ggml)");
}
W13Layout w13_layout_from_name(const std::string& s) {
  if (s == "w13" || s == "up_gate") return W13Layout::kW13;
  if (s == "w31" || s == "gate_up") return W13Layout::kW31;
  B12X_FAIL(Status::kInvalidArgument, "fused_moe: w13_layout='", s,
            "' is unknown (supported: w13 = [up; gate] (alias up_gate), w31 = [gate; up] "
            "(alias gate_up))");
}

namespace {

constexpr const char* kOp = "fused_moe";

int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}
int64_t align256(int64_t x) {
  return round_up(x, 256);
}

bool is_ggml_dtype(DType t) {
  return t == DType::kQ8_0 || t == DType::kIQ2_XXS || t == DType::kIQ2_XS;
}
int wfmt_of(SourceFormat f, DType ggml) {
  if (f != SourceFormat::kGgml) return detail::kWFp4;
  if (ggml == DType::kQ8_0) return detail::kWQ8_0;
  if (ggml == DType::kIQ2_XXS) return detail::kWIq2xxs;
  return detail::kWIq2xs;
}
bool a16(QuantMode m) {
  return m == QuantMode::kW4A16 || m == QuantMode::kGgmlA16;
}
int aquant_of(QuantMode m) {
  switch (m) {
    case QuantMode::kNvfp4:
      return num::kANvfp4;
    case QuantMode::kW4A8Nvfp4:
    case QuantMode::kW4A8Mx:
      return num::kAMxfp8;
    case QuantMode::kMxfp4:
      return num::kAMxfp4;
    default:
      return num::kANone;
  }
}

/// 32-row blocks of the prepared FC1 rows (gated: gate and up rows of round_up(I, 16) features).
int64_t fc1_row_blocks(bool gated, int64_t I) {
  return (gated ? round_up(2 * round_up(I, 16), detail::kPrepRowAlign)
                : round_up(I, detail::kPrepRowAlign)) /
         32;
}

/// The prepared layout of one operand: rows x K of format wfmt.
WeightView make_view(int wfmt, SourceFormat f, int64_t rows, int64_t rows_pad, int64_t K) {
  WeightView v;
  v.rows = static_cast<int>(rows);
  v.rows_pad = static_cast<int>(rows_pad);
  v.K = static_cast<int>(K);
  v.K_pad = static_cast<int>(round_up(K, detail::kPrepKAlign));
  const int64_t kp = v.K_pad;
  switch (wfmt) {
    case detail::kWFp4:
      v.values_row_stride = kp / 2;
      v.scale_kind = f == SourceFormat::kModeloptNvfp4 ? 0 : 1;
      v.scales_row_stride = v.scale_kind == 0 ? kp / 16 : kp / 32;
      break;
    case detail::kWQ8_0:
      v.values_row_stride = kp;
      v.scales_row_stride = kp / 32 * 2;
      break;
    case detail::kWIq2xxs:
      v.values_row_stride = kp / 256 * 64;
      v.scales_row_stride = kp / 256 * 2;
      break;
    default:
      v.values_row_stride = kp / 256 * 72;
      v.scales_row_stride = kp / 256 * 2;
      break;
  }
  v.values_expert_stride = v.values_row_stride * rows_pad;
  v.scales_expert_stride = v.scales_row_stride * rows_pad;
  v.scales_group_stride = 32 * v.scales_row_stride;
  // Bytes per 128-value chunk (only the FP4 kernels step chunks through scales_k_stride).
  const int chunk = wfmt == detail::kWFp4 ? (v.scale_kind == 0 ? 8 : 4) : 8;
  v.scales_k_stride = chunk;
  // FP4 block scales and codes in 32-row chunk tiles (sessions 14 / 15 measured them against
  // row-major; session 25's decode-stream refills take the tiles' constant strides, so FP4 is
  // always tiled). GGML weights keep their per-row layout.
  if (wfmt == detail::kWFp4) {  // scales: [32-row group][chunk][32 rows][chunk bytes]
    v.scales_row_stride = chunk;
    v.scales_k_stride = 32 * chunk;
  }
  v.values_group_stride = 32 * v.values_row_stride;
  v.values_k_stride = 64;       // FP4: 128 codes per chunk (only the FP4 kernels step through it)
  if (wfmt == detail::kWFp4) {  // codes: [32-row group][chunk][32 rows][64 B]
    v.values_row_stride = 64;
    v.values_k_stride = 32 * 64;
  }
  return v;
}

struct Layout {
  WeightView fc1, fc2;
  int wfmt1 = 0, wfmt2 = 0;
  int64_t off_w1v = 0, off_w1s = 0, off_w2v = 0, off_w2s = 0;
  int64_t off_alpha1 = 0, off_alpha2 = 0, off_a1gs = 0, off_a2gs = 0, bytes = 0;
};

Layout layout_of(const WeightsPlan& p) {
  const auto& a = p.args;
  Layout L;
  L.wfmt1 = wfmt_of(a.source_format, a.ggml_w1_dtype);
  L.wfmt2 = wfmt_of(a.source_format, a.ggml_w2_dtype);
  const int64_t I = a.intermediate_size, H = a.hidden_size, E = a.num_experts;
  const int64_t rows1_pad = 32 * fc1_row_blocks(p.gated, I);
  L.fc1 = make_view(L.wfmt1, a.source_format, p.w1_rows, rows1_pad, H);
  L.fc2 = make_view(L.wfmt2, a.source_format, H, round_up(H, detail::kPrepRowAlign), I);
  int64_t o = 0;
  L.off_w1v = o;
  o = align256(o + L.fc1.values_expert_stride * E);
  L.off_w1s = o;
  o = align256(o + L.fc1.scales_expert_stride * E);
  L.off_w2v = o;
  o = align256(o + L.fc2.values_expert_stride * E);
  L.off_w2s = o;
  o = align256(o + L.fc2.scales_expert_stride * E);
  L.off_alpha1 = o;
  o = align256(o + 4 * E);
  L.off_alpha2 = o;
  o = align256(o + 4 * E);
  L.off_a1gs = o;
  o = align256(o + 4 * E);
  L.off_a2gs = o;
  o = align256(o + 4 * E);
  L.bytes = o;
  return L;
}

}  // namespace

// ---------------------------------------------------------------- plan_weights ---------------
std::string weights_support_reason(const WeightsPlanArgs& a) {
  std::ostringstream os;
  const QuantMode qm = a.quant_mode;
  const std::string mode = quant_mode_name(qm);
  if (static_cast<int>(qm) < 0 || static_cast<int>(qm) > 5) return "quant_mode is invalid";
  if (a.has_expert_bias)
    return "expert biases are not supported (b12x fused MoE has no bias inputs; gpt-oss style "
           "biased experts need another backend)";
  if (a.ep_size != 1) {
    os << "ep_size=" << a.ep_size
       << ": expert parallelism is not supported (this op is tensor-parallel only: ep_size must "
          "be 1)";
    return os.str();
  }
  if (a.has_expert_map)
    return "expert maps are not supported (tensor-parallel only: every local expert id in "
           "[0, num_experts) is served; no expert parallelism)";
  if (a.has_lora) return "LoRA is not supported by the fused MoE op";
  if (a.params_dtype != DType::kBF16 && a.params_dtype != DType::kFP16) {
    os << "params_dtype=" << dtype_name(a.params_dtype) << " is not supported (supported: bf16, "
       << "fp16)";
    return os.str();
  }
  if (a.num_experts < 1 || a.num_experts > detail::kMaxExperts) {
    os << "num_experts=" << a.num_experts << " outside [1, " << detail::kMaxExperts << "]";
    return os.str();
  }
  if (a.hidden_size <= 0 || a.intermediate_size <= 0) {
    os << "hidden_size=" << a.hidden_size << " and intermediate_size=" << a.intermediate_size
       << " must be positive";
    return os.str();
  }
  // Mode <-> source format pairing.
  const SourceFormat sf = a.source_format;
  const bool ok_src =
      ((qm == QuantMode::kNvfp4 || qm == QuantMode::kW4A8Nvfp4) &&
       sf == SourceFormat::kModeloptNvfp4) ||
      ((qm == QuantMode::kW4A8Mx || qm == QuantMode::kMxfp4) && sf == SourceFormat::kFp4E8M0K32) ||
      (qm == QuantMode::kW4A16 &&
       (sf == SourceFormat::kModeloptNvfp4 || sf == SourceFormat::kFp4E8M0K32)) ||
      (qm == QuantMode::kGgmlA16 && sf == SourceFormat::kGgml);
  if (!ok_src) {
    os << "source_format=" << source_format_name(sf) << " with quant_mode=" << mode
       << " is unsupported (nvfp4/w4a8_nvfp4 take modelopt_nvfp4; w4a8_mx/mxfp4 take "
          "fp4_e8m0_k32; w4a16 takes modelopt_nvfp4 or fp4_e8m0_k32; ggml_a16 takes ggml)";
    return os.str();
  }
  const int64_t H = a.hidden_size, I = a.intermediate_size;
  if (sf == SourceFormat::kFp4E8M0K32 && I % 32 != 0) {
    os << "intermediate_size=" << I << " is not a multiple of 32 (MXFP4 weights need the "
       << "per-rank intermediate size % 32 == 0)";
    return os.str();
  }
  if (qm == QuantMode::kW4A8Mx) {
    if (H % 256 != 0) {
      os << "hidden_size=" << H << " is not a multiple of 256 (w4a8_mx needs hidden % 256 == 0)";
      return os.str();
    }
    if (a.activation != Activation::kSilu && a.activation != Activation::kSitu) {
      os << "activation=" << activation_name(a.activation)
         << " is not supported with w4a8_mx (supported: silu, situ)";
      return os.str();
    }
  }
  if (a.activation == Activation::kSwigluOai &&
      (qm == QuantMode::kW4A8Nvfp4 || qm == QuantMode::kW4A8Mx)) {
    os << "activation=swigluoai_uninterleave is not supported with quant_mode=" << mode
       << " (SwiGLU-OAI is not available for the W4A8 recipes)";
    return os.str();
  }
  if (qm == QuantMode::kGgmlA16) {
    if (a.activation != Activation::kSilu && a.activation != Activation::kRelu2) {
      os << "activation=" << activation_name(a.activation)
         << " is not supported with ggml_a16 (supported: silu, relu2)";
      return os.str();
    }
    for (int w = 1; w <= 2; ++w) {
      const DType t = w == 1 ? a.ggml_w1_dtype : a.ggml_w2_dtype;
      if (!is_ggml_dtype(t)) {
        os << "ggml_w" << w << "_dtype=" << dtype_name(t)
           << " is not supported (supported: q8_0, iq2_xxs, iq2_xs)";
        return os.str();
      }
      const int64_t K = w == 1 ? H : I;
      if (K % dtype_block_values(t) != 0) {
        os << (w == 1 ? "hidden_size=" : "intermediate_size=") << K << " does not keep whole "
           << dtype_name(t) << " blocks of " << dtype_block_values(t)
           << " values (tensor-parallel shards of GGML weights must keep whole blocks)";
        return os.str();
      }
    }
  }
  if (H % 32 != 0 || I % 32 != 0) {
    os << "hidden_size=" << H << " and intermediate_size=" << I
       << " must be multiples of 32 (activation blocks of 32 values; vLLM pads NVFP4 I to 64)";
    return os.str();
  }
  if (H > (1 << 30) || I > (1 << 30)) return "hidden/intermediate size too large";
  return "";
}

WeightsPlan plan_weights(const WeightsPlanArgs& args) {
  const std::string why = weights_support_reason(args);
  if (!why.empty()) {
    const bool unsupported =
        args.has_expert_bias || args.ep_size != 1 || args.has_expert_map || args.has_lora;
    B12X_FAIL(unsupported ? Status::kUnsupported : Status::kInvalidArgument,
              "fused_moe.plan_weights: ", why);
  }
  WeightsPlan p;
  p.args = args;
  p.gated = args.activation != Activation::kRelu2;
  p.w1_rows = p.gated ? 2 * args.intermediate_size : args.intermediate_size;
  p.discards_source_parameters = true;
  p.prepared_bytes = layout_of(p).bytes;
  return p;
}

std::string WeightsPlan::describe() const {
  std::ostringstream os;
  os << "WeightsPlan(quant_mode=" << quant_mode_name(args.quant_mode)
     << ", source_format=" << source_format_name(args.source_format)
     << ", activation=" << activation_name(args.activation)
     << ", params_dtype=" << dtype_name(args.params_dtype) << ", E=" << args.num_experts
     << ", H=" << args.hidden_size << ", I=" << args.intermediate_size
     << ", w13_layout=" << (args.w13_layout == W13Layout::kW13 ? "w13" : "w31")
     << (args.source_format != SourceFormat::kGgml ? ", fp4_chunk_tiles" : "")
     << ", prepared_bytes=" << prepared_bytes << ")";
  return os.str();
}

// ---------------------------------------------------------------- prepared storage -----------
struct PreparedStorage {
  WeightsPlan plan;
  int device = -1;
  void* base = nullptr;
  int64_t bytes = 0;
  Layout L;
  ~PreparedStorage() {
    if (base) cudaFree(base);
  }
};

PreparedExperts::PreparedExperts() = default;
PreparedExperts::~PreparedExperts() = default;
bool PreparedExperts::empty() const {
  return !s_ || !s_->base;
}
const WeightsPlan& PreparedExperts::plan() const {
  B12X_CHECK_ARG(s_ != nullptr, kOp, ": the prepared experts object is empty");
  return s_->plan;
}
int PreparedExperts::device() const {
  return s_ ? s_->device : -1;
}
const void* PreparedExperts::storage_ptr() const {
  return s_ ? s_->base : nullptr;
}
const PreparedStorage& PreparedExperts::storage() const {
  B12X_CHECK_ARG(s_ != nullptr, kOp, ": the prepared experts object is empty");
  return *s_;
}

namespace {

bool same_weight_plan(const WeightsPlanArgs& a, const WeightsPlanArgs& b) {
  return a.quant_mode == b.quant_mode && a.source_format == b.source_format &&
         a.activation == b.activation && a.params_dtype == b.params_dtype &&
         a.num_experts == b.num_experts && a.hidden_size == b.hidden_size &&
         a.intermediate_size == b.intermediate_size && a.w13_layout == b.w13_layout &&
         (a.source_format != SourceFormat::kGgml ||
          (a.ggml_w1_dtype == b.ggml_w1_dtype && a.ggml_w2_dtype == b.ggml_w2_dtype));
}

/// Reads a per-expert fp32 vector ([E], [E,1] or a single value broadcast) from host or device.
std::vector<float> read_expert_vector(const TensorRef& t, int64_t E, const char* name,
                                      bool required) {
  std::vector<float> out(static_cast<size_t>(E), 1.f);
  if (t.data == nullptr) {  // absent (a default TensorRef has ndim 0)
    B12X_CHECK_ARG(!required, "fused_moe.prepare_weights: ", name, " is required for this mode");
    return out;
  }
  check_dtype(t, "fused_moe.prepare_weights", name, {DType::kFP32});
  const int64_t n = t.numel();
  B12X_CHECK_ARG(n == 1 || n == E, "fused_moe.prepare_weights: ", name, " ", t.describe(),
                 " must have 1 or num_experts=", E, " values");
  B12X_CHECK_ARG(n == 1 || t.ndim == 0 || t.byte_stride(0) == 4 || t.size(0) == 1,
                 "fused_moe.prepare_weights: ", name, " must be contiguous, got ", t.describe());
  std::vector<float> host(static_cast<size_t>(n));
  if (t.device == kHostDevice)
    std::memcpy(host.data(), t.data, 4 * n);
  else
    B12X_CUDA_CHECK(cudaMemcpy(host.data(), t.data, 4 * n, cudaMemcpyDeviceToHost));
  for (int64_t e = 0; e < E; ++e) {
    out[e] = host[n == 1 ? 0 : e];
    B12X_CHECK_ARG(std::isfinite(out[e]), "fused_moe.prepare_weights: ", name, "[", e, "]=", out[e],
                   " is not finite");
  }
  return out;
}

void check_weight_tensor(const TensorRef& t, const char* name, int64_t E, int64_t rows, int64_t K,
                         SourceFormat sf, DType ggml, int device) {
  const char* op = "fused_moe.prepare_weights";
  check_ndim(t, op, name, 3);
  check_device(t, op, name, device);
  if (sf == SourceFormat::kGgml) {
    check_dtype(t, op, name, {ggml});
    check_shape(t, op, name, {E, rows, K});
  } else {
    check_dtype(t, op, name, {DType::kUInt8, DType::kFP4E2M1});
    check_shape(t, op, name, {E, rows, t.dtype == DType::kUInt8 ? K / 2 : K});
  }
  check_inner_contiguous(t, op, name);
  B12X_CHECK_ARG(t.stride[1] * (t.dtype == DType::kUInt8 ? 1 : 1) >= 0, op, ": ", name,
                 " has a negative stride");
}

void check_scale_tensor(const TensorRef& t, const char* name, int64_t E, int64_t rows, int64_t K,
                        SourceFormat sf, int device) {
  const char* op = "fused_moe.prepare_weights";
  check_ndim(t, op, name, 3);
  check_device(t, op, name, device);
  if (sf == SourceFormat::kModeloptNvfp4) {
    check_dtype(t, op, name, {DType::kUE4M3, DType::kFP8E4M3, DType::kUInt8});
    const int64_t r128 = round_up(rows, 128), c4 = round_up(K / 16, 4);
    check_shape(t, op, name, {E, r128, c4});
    B12X_CHECK_ARG(t.stride[2] == 1 && t.stride[1] == c4, op, ": ", name,
                   " must hold each expert's 128x4-swizzled scales contiguously, got ",
                   t.describe());
  } else {
    check_dtype(t, op, name, {DType::kUE8M0, DType::kUInt8});
    check_shape(t, op, name, {E, rows, K / 32});
    check_inner_contiguous(t, op, name);
  }
}

}  // namespace

void prepare_weights(const WeightsPlan& plan, const SourceWeights& src, PreparedExperts& out,
                     Stream stream) {
  refuse_during_capture(stream, "fused_moe.prepare_weights");
  const auto& a = plan.args;
  // Re-validate: a hand-built plan must not bypass the checks.
  const std::string why = weights_support_reason(a);
  B12X_CHECK_ARG(why.empty(), "fused_moe.prepare_weights: ", why);
  const int device = current_device();
  require_compiled_arch(device, "fused_moe.prepare_weights");
  const int64_t E = a.num_experts, H = a.hidden_size, I = a.intermediate_size;
  const SourceFormat sf = a.source_format;
  check_weight_tensor(src.w1, "w1", E, plan.w1_rows, H, sf, a.ggml_w1_dtype, device);
  check_weight_tensor(src.w2, "w2", E, H, I, sf, a.ggml_w2_dtype, device);
  if (sf != SourceFormat::kGgml) {
    check_scale_tensor(src.w1_scale, "w1_blockscale", E, plan.w1_rows, H, sf, device);
    check_scale_tensor(src.w2_scale, "w2_blockscale", E, H, I, sf, device);
  }
  const bool nv = sf == SourceFormat::kModeloptNvfp4;
  const bool nvact = a.quant_mode == QuantMode::kNvfp4;
  std::vector<float> w1gs = read_expert_vector(src.w1_global_scale, E, "w1_global_scale", nv);
  std::vector<float> w2gs = read_expert_vector(src.w2_global_scale, E, "w2_global_scale", nv);
  std::vector<float> a1gs = read_expert_vector(src.a1_gscale, E, "a1_gscale", nvact);
  std::vector<float> a2gs = read_expert_vector(src.a2_gscale, E, "a2_gscale", nvact);
  if (!nv) std::fill(w1gs.begin(), w1gs.end(), 1.f), std::fill(w2gs.begin(), w2gs.end(), 1.f);
  std::vector<float> alpha1(E), alpha2(E);
  for (int64_t e = 0; e < E; ++e) {
    if (nvact) {
      B12X_CHECK_ARG(a1gs[e] > 0 && a2gs[e] > 0, "fused_moe.prepare_weights: a1_gscale[", e,
                     "]=", a1gs[e], " / a2_gscale[", e, "]=", a2gs[e], " must be positive");
      alpha1[e] = w1gs[e] / a1gs[e];
      alpha2[e] = w2gs[e] / a2gs[e];
    } else {
      alpha1[e] = w1gs[e];
      alpha2[e] = w2gs[e];
    }
  }

  const Layout L = layout_of(plan);
  if (!out.s_ || !same_weight_plan(out.s_->plan.args, a) || out.s_->device != device) {
    auto s = std::make_unique<PreparedStorage>();
    s->device = device;
    s->bytes = L.bytes;
    B12X_CUDA_CHECK(cudaMalloc(&s->base, static_cast<size_t>(L.bytes)));
    out.s_ = std::move(s);
  }
  PreparedStorage& S = *out.s_;
  S.plan = plan;
  S.L = L;
  auto* base = static_cast<uint8_t*>(S.base);

  for (int w = 1; w <= 2; ++w) {
    const TensorRef& v = w == 1 ? src.w1 : src.w2;
    const TensorRef& s = w == 1 ? src.w1_scale : src.w2_scale;
    detail::RepackSrc r;
    r.values = static_cast<const uint8_t*>(v.data);
    r.values_expert_stride = v.byte_stride(0);
    r.values_row_stride = v.byte_stride(1);
    if (sf != SourceFormat::kGgml) {
      r.scales = static_cast<const uint8_t*>(s.data);
      r.scales_expert_stride = s.byte_stride(0);
      r.scales_row_stride = s.byte_stride(1);
      r.scales_swizzled = nv ? 1 : 0;
    }
    r.src_rows = static_cast<int>(w == 1 ? plan.w1_rows : H);
    r.gated = (w == 1 && plan.gated) ? 1 : 0;
    r.w13 = a.w13_layout == W13Layout::kW13 ? 1 : 0;
    r.features = static_cast<int>(I);
    const WeightView& d = w == 1 ? L.fc1 : L.fc2;
    detail::launch_repack(w == 1 ? L.wfmt1 : L.wfmt2, r, d, base + (w == 1 ? L.off_w1v : L.off_w2v),
                          base + (w == 1 ? L.off_w1s : L.off_w2s), static_cast<int>(E), stream);
  }
  B12X_CUDA_CHECK(
      cudaMemcpyAsync(base + L.off_alpha1, alpha1.data(), 4 * E, cudaMemcpyHostToDevice, stream));
  B12X_CUDA_CHECK(
      cudaMemcpyAsync(base + L.off_alpha2, alpha2.data(), 4 * E, cudaMemcpyHostToDevice, stream));
  B12X_CUDA_CHECK(
      cudaMemcpyAsync(base + L.off_a1gs, a1gs.data(), 4 * E, cudaMemcpyHostToDevice, stream));
  B12X_CUDA_CHECK(
      cudaMemcpyAsync(base + L.off_a2gs, a2gs.data(), 4 * E, cudaMemcpyHostToDevice, stream));
  B12X_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// ---------------------------------------------------------------- plan -----------------------
namespace {
void resolve_activation(const Caps& c, const WeightsPlan& w, Plan& p) {
  const Activation act = w.args.activation;
  const bool lim = !std::isnan(c.swiglu_limit);
  const bool al = !std::isnan(c.swiglu_alpha), be = !std::isnan(c.swiglu_beta);
  if (lim)
    B12X_CHECK_ARG(act == Activation::kSilu || act == Activation::kSwigluOai, kOp,
                   ".plan: swiglu_limit=", c.swiglu_limit,
                   " is not supported with activation=", activation_name(act),
                   " (supported with: silu, swigluoai_uninterleave)");
  if (al || be)
    B12X_CHECK_ARG(act == Activation::kSwigluOai, kOp,
                   ".plan: swiglu_alpha/swiglu_beta are only "
                   "supported with activation=swigluoai_uninterleave, got ",
                   activation_name(act));
  if (lim)
    B12X_CHECK_ARG(c.swiglu_limit > 0, kOp, ".plan: swiglu_limit=", c.swiglu_limit,
                   " must be positive");
  p.act_kind = static_cast<int>(act);
  p.has_limit = lim;
  p.limit = lim ? c.swiglu_limit : 0.f;
  if (act == Activation::kSwigluOai) {
    p.has_limit = true;
    p.limit = lim ? c.swiglu_limit : 7.0f;
    p.oai_alpha = al ? c.swiglu_alpha : 1.702f;
    p.oai_beta = be ? c.swiglu_beta : 1.0f;
  }
}

}  // namespace

namespace detail {
DecodeKnobs read_decode_knobs(bool stream, int aquant) {
  DecodeKnobs k;
  const bool a16 = aquant == num::kANone;
  // One knob: unset keeps the default; a value outside `ok` (empty: any value >= 1) is logged and
  // replaced by the default; `why` non-empty: the plan does not use the knob (logged, the default
  // kept).
  auto knob = [&](int& field, const char* name, std::initializer_list<int> ok,
                  const char* supported, const char* why) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == 0) return;
    const int x = std::atoi(v);
    if (why != nullptr && *why != 0) {
      log_message(1, std::string("fused_moe.plan: ") + name + "=" + v + " is ignored: " + why);
      return;
    }
    if (ok.size() == 0 ? x < 1 : std::find(ok.begin(), ok.end(), x) == ok.end()) {
      log_message(1, std::string("fused_moe.plan: ") + name + "=" + v +
                         " is not supported (supported: " + supported + "); the default is used");
      return;
    }
    field = x;
  };
  const char* not_stream = stream ? "" : "the plan does not run the FP4 decode stream";
  const char* quantised = !stream ? not_stream : a16 ? "" : "the plan's activations are quantised";
  const char* not_nvfp4 = !stream                  ? not_stream
                          : aquant != num::kANvfp4 ? "the plan's activations are not NVFP4"
                                                   : "";
  knob(k.q_load, "B12X_MOE_Q_LOAD", {0, 1}, "0, 1", not_stream);
  knob(k.q_fast, "B12X_MOE_Q_FAST", {0, 1}, "0, 1", not_nvfp4);
  knob(k.q_early, "B12X_MOE_Q_EARLY", {0, 1, 2}, "0, 1, 2", not_stream);
  knob(k.q_lean, "B12X_MOE_Q_LEAN", {0, 1}, "0, 1", not_nvfp4);
  knob(k.fc1_scal0, "B12X_MOE_FC1_SCAL0", {0, 1}, "0, 1", not_stream);
  knob(k.fc1_rdy, "B12X_MOE_FC1_RDY", {0, 1}, "0, 1", not_stream);
  knob(k.fc1_slot, "B12X_MOE_FC1_SLOT", {0, 1}, "0, 1", not_stream);
  knob(k.fc2_slot, "B12X_MOE_FC2_SLOT", {0, 1}, "0, 1", not_stream);
  knob(k.fc1_groups, "B12X_MOE_FC1_GROUPS", {}, ">= 1", not_stream);
  knob(k.fc1_kg, "B12X_MOE_FC1_KG", {1, 2}, "1, 2", not_stream);
  knob(k.fc1_fine, "B12X_MOE_FC1_FINE", {0, 1, 2}, "0, 1, 2", not_stream);
  knob(k.fc1_wide, "B12X_MOE_FC1_WIDE", {0, 1, 2, 3}, "0, 1, 2, 3", not_stream);
  knob(k.fc1_bal, "B12X_MOE_FC1_BAL", {0, 1, 2}, "0, 1, 2", not_stream);
  knob(k.fc1_bal1, "B12X_MOE_FC1_BAL1", {0, 1, 2, 3}, "0, 1, 2, 3", not_stream);
  knob(k.a16_bal, "B12X_MOE_A16_BAL", {0, 1}, "0, 1", quantised);
  knob(k.a16_gate, "B12X_MOE_A16_GATE", {0, 1, 2, 3}, "0, 1, 2, 3", quantised);
  knob(k.a16_pdl, "B12X_MOE_A16_PDL", {0, 1}, "0, 1", quantised);
  knob(k.fc2_split, "B12X_MOE_FC2_SPLIT", {1, 2, 3, 4}, "1, 2, 3, 4", not_stream);
  knob(k.fc2_warps, "B12X_MOE_FC2_WARPS", {4, 8}, "4, 8", not_stream);
  knob(k.fc2_stages, "B12X_MOE_FC2_STAGES", {2, 3}, "2, 3", not_stream);
  knob(k.fc2_deep, "B12X_MOE_FC2_DEEP", {0, 1}, "0, 1", not_stream);
  knob(k.fc2_bal, "B12X_MOE_FC2_BAL", {0, 1}, "0, 1", not_stream);
  knob(k.fc2_kil, "B12X_MOE_FC2_KIL", {0, 1}, "0, 1", not_stream);
  knob(k.fc2_rows, "B12X_MOE_FC2_ROWS", {16, 32}, "16, 32", not_stream);
  knob(k.fc2_dsmem, "B12X_MOE_FC2_CLUSTER", {0, 1, 2}, "0, 1, 2", not_stream);
  return k;
}
}  // namespace detail

namespace {

/// Routes the decode regime can take: the FP4 decode stream buckets up to kMaxStreamRoutes
/// routes (and kMaxStreamTokens tokens) per CTA, GGML's split-K tile one route per thread.
bool decode_fits(const Caps& c) {
  const bool stream =
      c.weight_plan != nullptr && c.weight_plan->args.source_format != SourceFormat::kGgml;
  const int64_t R = c.max_tokens * c.num_topk;
  return stream ? R <= detail::kMaxStreamRoutes && c.max_tokens <= detail::kMaxStreamTokens
                : R <= detail::kMaxInlineRoutes;
}

double env_double(const char* name, double fallback) {
  const char* e = std::getenv(name);
  return e != nullptr && *e != 0 ? std::atof(e) : fallback;
}

/// Whether the automatic regime gives an FP4 plan the decode stream (from the plan's capacities,
/// never the live routes): up to 128 routes always; above, where the routes per expert
/// rho = max_tokens * topk / E stay <= kStreamRho (the stream reads an expert's weights once per
/// 4-route tile, the 16-slot grouped tile once per 16). H200 round 26, nvfp4, us (rho): decode
/// stream vs grouped (64-slot tiles; 16-slot tiles at M = 256): Qwen3-30B M = 32 / 64 (2 / 4) 169
/// / 262 vs 344 / 389, M = 128 (8) 447 vs 407, M = 256 (16) 307 with 16-slot tiles; DeepSeek-TP4
/// M = 32 / 64 / 128 (1 / 2 / 4) 509 / 799 / 1250 vs 1038 / 1392 / 1616, M = 256 (8) 889;
/// MiniMax M = 64 / 128 (2 / 4) 1852 / 2921 vs 3288 / 3711, M = 256 (8) 2086; Qwen3.5-TP4 M = 16
/// / 32 / 64 / 96 (0.3 / 0.6 / 1.25 / 1.9) 450 / 820 / 1337 / 1701 vs 974 / 1619 / 2506 / 2944,
/// M = 256 (5) 1818. Measurement knobs: B12X_MOE_STREAM_ROUTES (128..1024, routes cap),
/// B12X_MOE_STREAM_RHO (the rho bound).
bool auto_stream(const Caps& c) {
  const int64_t cap = [] {
    const char* e = std::getenv("B12X_MOE_STREAM_ROUTES");
    const int64_t n = e != nullptr ? std::atoll(e) : 0;
    return n >= detail::kMaxInlineRoutes && n <= detail::kMaxStreamRoutes
               ? n
               : int64_t{detail::kMaxStreamRoutes};
  }();
  const double rho_max = env_double("B12X_MOE_STREAM_RHO", 2.0);
  const int64_t R = c.max_tokens * c.num_topk;
  if (R <= detail::kMaxInlineRoutes) return true;
  return R <= cap && static_cast<double>(R) <= rho_max * c.weight_plan->args.num_experts;
}

int choose_cfg(const Caps& c) {
  if (c.regime == 1) return detail::kCfgDecode;
  if (c.regime == 0) return detail::kCfgGrouped;
  const bool stream =
      c.weight_plan != nullptr && c.weight_plan->args.source_format != SourceFormat::kGgml;
  const bool take = stream ? auto_stream(c) : c.max_tokens * c.num_topk <= detail::kMaxInlineRoutes;
  return take && decode_fits(c) ? detail::kCfgDecode : detail::kCfgGrouped;
}

/// Slots per grouped FP4 tile (the cp.async pipe kernel's kTN): 16 where the plan's routes per
/// expert are <= 16, else 64 (a 64-slot tile holding ~16 routes runs 3/4 of its MMA columns and
/// activation copies empty; a 16-slot tile reads its expert's weights once per 16 routes). H200
/// round 26, nvfp4 M = 256, 64 -> 16 (32) slots, us: Qwen3-30B (rho 16) 446 -> 307 (298),
/// DeepSeek-TP4 (8) 1683 -> 889 (1101), MiniMax (8) 3804 -> 2086 (2522), Qwen3.5-TP4 (5) 3490 ->
/// 1818 (2265). Measurement knob B12X_MOE_GROUPED_TN=16|64 forces the tile (session 21 removed the
/// 32-slot instances, which only the knob reached: 1.21-1.25x the 16-slot tile above, 0.97x at
/// Qwen3-30B).
int grouped_tile_tokens(const Caps& c) {
  const int forced = [] {
    const char* e = std::getenv("B12X_MOE_GROUPED_TN");
    const int n = e != nullptr ? std::atoi(e) : 0;
    return n == 16 || n == 64 ? n : 0;
  }();
  const bool fp4 =
      c.weight_plan != nullptr && c.weight_plan->args.source_format != SourceFormat::kGgml;
  if (!fp4) return detail::kCfgTokens[detail::kCfgGrouped];
  if (forced != 0) return forced;
  const int64_t R = c.max_tokens * c.num_topk;
  return R <= 16 * c.weight_plan->args.num_experts ? 16 : detail::kCfgTokens[detail::kCfgGrouped];
}

ExecutionPlan exec_of(int cfg, int tn) {
  ExecutionPlan e;
  e.implementation = "b12x_moe_mma_sync";
  e.execution = cfg == detail::kCfgDecode ? "decode_tn8" : "grouped_tn" + std::to_string(tn);
  e.tile_tokens = tn;
  e.tile_rows = detail::kCfgRows[cfg];
  return e;
}
ExecutionPlan exec_of(int cfg, const Caps& c) {
  return exec_of(cfg, cfg == detail::kCfgDecode ? detail::kCfgTokens[cfg] : grouped_tile_tokens(c));
}

/// FP4 weights take the decode stream in the decode regime; GGML weights keep the generic
/// split-K decode tile.
bool decode_stream(const WeightsPlan& w) {
  return w.args.source_format != SourceFormat::kGgml;
}

int64_t max_tiles_for(int64_t routes, int64_t E, int tn) {
  return (routes + tn - 1) / tn + std::min(E, routes);
}
}  // namespace

Plan plan(const Caps& caps) {
  B12X_CHECK_ARG(caps.weight_plan != nullptr, kOp, ".plan: caps.weight_plan is required");
  const WeightsPlan& w = *caps.weight_plan;
  const std::string why = weights_support_reason(w.args);
  B12X_CHECK_ARG(why.empty(), kOp, ".plan: ", why);
  B12X_CHECK_ARG(caps.max_tokens >= 1 && caps.max_tokens <= (1 << 24), kOp,
                 ".plan: max_tokens=", caps.max_tokens, " outside [1, 2^24]");
  B12X_CHECK_ARG(caps.num_topk >= 1 && caps.num_topk <= 64, kOp, ".plan: num_topk=", caps.num_topk,
                 " outside [1, 64]");
  B12X_CHECK_ARG(caps.max_tokens * caps.num_topk <= (int64_t(1) << 30), kOp,
                 ".plan: max_tokens*num_topk=", caps.max_tokens * caps.num_topk,
                 " exceeds 2^30 routes");
  B12X_CHECK_ARG(!caps.apply_router_weight_on_input || a16(w.args.quant_mode), kOp,
                 ".plan: apply_router_weight_on_input is only supported with the A16 modes "
                 "(w4a16, ggml_a16), got quant_mode=",
                 quant_mode_name(w.args.quant_mode));
  B12X_CHECK_ARG(caps.regime >= -1 && caps.regime <= 1, kOp, ".plan: regime=", caps.regime,
                 " (supported: -1 auto, 0 grouped, 1 decode)");
  const bool ggml = w.args.source_format == SourceFormat::kGgml;
  B12X_CHECK_ARG(caps.regime != 1 || decode_fits(caps), kOp,
                 ".plan: regime=1 (decode) needs max_tokens*num_topk <= ",
                 ggml ? detail::kMaxInlineRoutes : detail::kMaxStreamRoutes,
                 ggml ? "" : " and max_tokens <= " + std::to_string(detail::kMaxStreamTokens),
                 ", got max_tokens=", caps.max_tokens, " num_topk=", caps.num_topk);
  Plan p;
  p.caps = caps;
  p.weights = w;
  p.caps.weight_plan = &p.weights;
  resolve_activation(caps, w, p);
  const int cfg = choose_cfg(caps);
  p.exec = exec_of(cfg, caps);
  const int64_t R = caps.max_tokens * caps.num_topk;
  const int64_t E = w.args.num_experts, H = w.args.hidden_size, I = w.args.intermediate_size;
  p.max_routes = R;
  p.max_tiles = max_tiles_for(R, E, p.exec.tile_tokens);
  B12X_CHECK_ARG(p.max_tiles <= 65535, kOp, ".plan: max_tokens*num_topk=", R, " needs ",
                 p.max_tiles, " token tiles (> 65535); lower max_tokens");
  int64_t o = 0;
  p.off_counts = o;  // GGML decode: counters per 32-row tile; decode stream: per 16-row block
  o = align256(o + 16 + 4 * (round_up(H, detail::kPrepRowAlign) / 16 + 1));
  p.off_tiles = o;
  o = align256(o + 16 * p.max_tiles);
  p.off_slot_route = o;
  o = align256(o + 4 * R);
  p.off_slot_expert = o;
  o = align256(o + 4 * R);
  // Quantised activations: the FC1 input is quantised once per slot (grouped) or per route
  // (decode stream) into [R, H] BF16 operand rows (the FC2 input is quantised in place in the
  // intermediate, or by FC1's epilogue in the decode stream).
  const bool stream = cfg == detail::kCfgDecode && decode_stream(w);
  p.off_xq = -1;
  p.knobs = detail::read_decode_knobs(stream, aquant_of(w.args.quant_mode));
  const bool a16_copy = stream && detail::decode_a16_copy_rows(p.knobs);
  if ((aquant_of(w.args.quant_mode) != num::kANone && (cfg == detail::kCfgGrouped || stream)) ||
      a16_copy) {
    p.off_xq = o;
    o = align256(o + 2 * R * H);
  }
  p.off_inter = o;
  o = align256(o + 2 * R * I);
  // fp32 per-route FC2 rows for the separate (grouped) or counter-fused (GGML decode) combine;
  // the decode stream combines in shared memory.
  // (decode stream: fp32 [split][token][H] partial combines when FC2 splits its tiles).
  p.off_route_out = -1;
  if (!stream) {
    p.off_route_out = o;
    o = align256(o + 4 * R * H);
  } else if (detail::decode_fc2_split_bound(R, p.knobs.fc2_split) > 1) {
    p.off_route_out = o;
    o = align256(o +
                 4 * detail::decode_fc2_split_bound(R, p.knobs.fc2_split) * caps.max_tokens * H);
  }
  // Balanced FC1 (decode stream; [Q] zeroes its counters, or a memset node in A16 modes).
  p.off_fc1_bal = -1;
  if (stream) {
    p.off_fc1_bal = o;
    o = align256(o + detail::decode_fc1_bal_bytes(fc1_row_blocks(p.weights.gated, I), R));
  }
  // FC1 on per-route ready words (DecodeKnobs::fc1_rdy; DecodeArgs::fc1_rdy).
  p.off_fc1_rdy = -1;
  if (stream && p.knobs.fc1_rdy != 0) {
    p.off_fc1_rdy = o;
    o = align256(o + 8 * R);
  }
  p.scratch_bytes = o;
  // Host-only step: refused during capture (no stream in Caps: the legacy-stream query).
  refuse_during_capture(nullptr, "fused_moe.plan");
  {
    // Kernel signature (warm-up / freeze, b12x/runtime.h): the kernels a run at max_tokens
    // launches (decode picks each GEMM's tile from the route count, as run() does).
    std::ostringstream sig;
    sig << "moe." << quant_mode_name(w.args.quant_mode)
        << " src=" << source_format_name(w.args.source_format)
        << " act=" << activation_name(w.args.activation)
        << " io=" << dtype_name(w.args.params_dtype) << " " << p.exec.execution;
    if (w.args.source_format == SourceFormat::kGgml)
      sig << " w1=" << dtype_name(w.args.ggml_w1_dtype)
          << " w2=" << dtype_name(w.args.ggml_w2_dtype);
    // Decode: the FP4 decode stream (quantise, FC1, FC2+combine) or GGML's split-K tiles.
    if (cfg == detail::kCfgDecode) sig << (stream ? " decode_stream" : " decode_split_k");
    // The FC2 CTA of a run at the plan's capacity (decode_fc2_rows; smaller runs may take 16).
    // The SM count only where a device answers (plan itself needs none: CPU-only tests).
    if (device_count() > 0) {
      try {
        const DeviceInfo& di = device_info(caps.device);
        p.sm_count = di.sm_count;
        p.cc_major = di.cc_major;
        if (stream) {
          p.fc2_rows32_ctas = detail::decode_fc2_rows32_ctas(caps.device);
          p.fc2_rows32_ctas2 = detail::decode_fc2_rows32_ctas(caps.device, 2);
          // The FC2 clusters the knobs allow (decode_fc2_cluster): which fit this device, asked
          // here so that run only launches (a GPC or MIG slice with too few free SMs would fail
          // a cluster launch; the query may not run inside a graph capture).
          const int max_split = detail::decode_fc2_cluster_max_split(p.knobs, p.cc_major);
          if (max_split > 1)
            p.fc2_cluster_fit = detail::decode_fc2_cluster_fit(
                caps.device, w.args.source_format == SourceFormat::kModeloptNvfp4 ? 0 : 1,
                max_split);
        }
      } catch (const Error&) {
        p.sm_count = p.cc_major = p.fc2_rows32_ctas = p.fc2_rows32_ctas2 = 0;
        p.fc2_cluster_fit = 0;
      }
    }
    const int nk2 = static_cast<int>(round_up(I, detail::kPrepKAlign) / 128);
    const int rows_pad2 = static_cast<int>(round_up(H, detail::kPrepRowAlign));
    if (p.sm_count > 0 && detail::decode_fc2_rows(p.knobs, caps.max_tokens, R, rows_pad2,
                                                  p.sm_count, p.fc2_rows32_ctas, nk2) == 32) {
      sig << " fc2_rows32";
      // Its ring depth at the capacity's split (decode_fc2_stages32; run derives both again).
      const int split32 =
          p.knobs.fc2_split == 0
              ? detail::decode_fc2_split32(
                    R, rows_pad2 / 32, p.sm_count,
                    detail::decode_fc2_round_up(p.knobs, caps.max_tokens, nk2),
                    caps.max_tokens == 1)
              : detail::decode_fc2_split(R, rows_pad2 / 32, p.sm_count, p.knobs.fc2_split);
      if (detail::decode_fc2_stages32(p.knobs, rows_pad2 / 32, split32, p.sm_count,
                                      p.fc2_rows32_ctas2) == 2)
        sig << " fc2_st2";
    } else if (stream && p.sm_count > 0 && caps.max_tokens > 1 &&
               detail::decode_fc2_rows(p.knobs, 1, caps.num_topk, rows_pad2, p.sm_count,
                                       p.fc2_rows32_ctas, nk2) == 32) {
      // A 1-token run takes the 32-row FC2 (session 22) where the capacity's FC2 is 16-row: name
      // it too (run derives the rows from the live tokens).
      sig << " fc2_rows32_m1";
    }
    // The K-interleaved FC2 kernels (decode_fc2_kil, from the weights' I and the capacity).
    if (stream && detail::decode_fc2_kil(p.knobs, caps.max_tokens, nk2)) sig << " fc2_kil";
    // FC2 split row blocks launched as clusters of these sizes (a launch attribute of the same
    // kernels; decode_fc2_cluster with the plan's fit).
    if (stream && p.fc2_cluster_fit != 0) {
      sig << " fc2_cluster_fit=";
      for (int s = 2, n = 0; s <= 4; ++s)
        if ((p.fc2_cluster_fit >> s) & 1) sig << (n++ ? "," : "") << s;
    }
    // [Q]'s lean NVFP4 instance (decode_q_lean, session 27).
    if (stream && detail::decode_q_lean(p.knobs, aquant_of(w.args.quant_mode),
                                        w.args.params_dtype == DType::kFP16, E))
      sig << " q_lean";
    // FC1 waiting on per-route ready words (a runtime path of the same kernels; probe).
    if (p.off_fc1_rdy >= 0) sig << " fc1_rdy";
    // The last-warp FC1 with constant ring slots (probe; BF16 operands with UE4M3 scales).
    if (stream && p.knobs.fc1_slot == 1) sig << " fc1_slot";
    if (stream && p.knobs.fc2_slot == 1) sig << " fc2_slot";
    if (caps.apply_router_weight_on_input) sig << " weight_on_input";
    std::ostringstream shape;
    shape << "E=" << E << " H=" << H << " I=" << I << " max_tokens=" << caps.max_tokens
          << " topk=" << caps.num_topk;
    b12x::detail::resolve_kernels("fused_moe.plan", caps.device, sig.str(), shape.str());
  }
  return p;
}

ExecutionPlan plan_execution(int64_t num_tokens, const Caps& caps) {
  Caps c = caps;
  c.max_tokens = std::max<int64_t>(num_tokens, 1);
  return exec_of(choose_cfg(c), c);
}

// ---------------------------------------------------------------- bind / run -----------------
Binding bind(const Plan& p, const TensorRef& scratch, const TensorRef& a,
             const PreparedExperts& experts, const TensorRef& topk_weights,
             const TensorRef& topk_ids, const TensorRef& output) {
  const char* op = "fused_moe.bind";
  B12X_CHECK_ARG(!experts.empty(), op, ": experts are not prepared");
  B12X_CHECK_ARG(same_weight_plan(experts.plan().args, p.weights.args), op,
                 ": experts were prepared for ", experts.plan().describe(),
                 " but the plan was made for ", p.weights.describe());
  const int dev = p.caps.device;
  B12X_CHECK_ARG(experts.device() == dev, op, ": experts live on device ", experts.device(),
                 ", the plan is for device ", dev);
  const int64_t H = p.weights.args.hidden_size, topk = p.caps.num_topk;
  check_ndim(a, op, "a", 2);
  check_dtype(a, op, "a", {p.weights.args.params_dtype});
  check_device(a, op, "a", dev);
  const int64_t M = a.size(0);
  B12X_CHECK_ARG(M <= p.caps.max_tokens, op, ": a has M=", M,
                 " tokens > plan max_tokens=", p.caps.max_tokens);
  check_shape(a, op, "a", {M, H});
  check_inner_contiguous(a, op, "a");
  // Also the row stride (M > 1): every path reads a's rows in 16-byte pieces from row * stride
  // (the quantizers, the A16 copy gate, the grouped FC1's copies).
  check_aligned(a, op, "a", 16);
  check_shape(topk_ids, op, "topk_ids", {M, topk});
  check_dtype(topk_ids, op, "topk_ids", {DType::kInt32, DType::kInt64});
  check_contiguous(topk_ids, op, "topk_ids");
  check_device(topk_ids, op, "topk_ids", dev);
  check_shape(topk_weights, op, "topk_weights", {M, topk});
  check_dtype(topk_weights, op, "topk_weights", {DType::kFP32});
  check_contiguous(topk_weights, op, "topk_weights");
  check_device(topk_weights, op, "topk_weights", dev);
  check_shape(output, op, "output", {M, H});
  check_dtype(output, op, "output", {a.dtype});
  check_device(output, op, "output", dev);
  check_inner_contiguous(output, op, "output");
  check_aligned(output, op, "output", 8);
  check_ndim(scratch, op, "scratch", 1);
  check_dtype(scratch, op, "scratch", {DType::kUInt8});
  check_contiguous(scratch, op, "scratch");
  check_device(scratch, op, "scratch", dev);
  check_aligned(scratch, op, "scratch", 256);
  B12X_CHECK_ARG(scratch.size(0) >= p.scratch_bytes, op, ": scratch has ", scratch.size(0),
                 " bytes, the plan needs ", p.scratch_bytes);
  Binding b;
  b.plan = &p;
  b.experts = &experts;
  b.scratch = scratch;
  b.a = a;
  b.topk_weights = topk_weights;
  b.topk_ids = topk_ids;
  b.output = output;
  b.num_tokens = M;
  return b;
}

void run(const Binding& b, Stream stream) {
  B12X_CHECK_ARG(b.plan != nullptr && b.experts != nullptr, kOp, ".run: binding is empty");
  const Plan& p = *b.plan;
  const PreparedStorage& S = b.experts->storage();
  const auto& wa = p.weights.args;
  const int64_t M = b.num_tokens, topk = p.caps.num_topk;
  if (M == 0) return;
  const int64_t R = M * topk, E = wa.num_experts, H = wa.hidden_size, I = wa.intermediate_size;
  const int cfg = p.exec.tile_tokens == detail::kCfgTokens[detail::kCfgDecode]
                      ? detail::kCfgDecode
                      : detail::kCfgGrouped;
  const int TN = p.exec.tile_tokens;
  auto* sc = static_cast<uint8_t*>(b.scratch.data);
  int* num_tiles = reinterpret_cast<int*>(sc + p.off_counts);
  int* tiles = reinterpret_cast<int*>(sc + p.off_tiles);
  int* slot_route = reinterpret_cast<int*>(sc + p.off_slot_route);
  void* inter = sc + p.off_inter;
  float* route_out =
      p.off_route_out >= 0 ? reinterpret_cast<float*>(sc + p.off_route_out) : nullptr;
  const bool ids64 = b.topk_ids.dtype == DType::kInt64;
  const bool fp16_in = b.a.dtype == DType::kFP16;
  const bool is_a16 = a16(wa.quant_mode);
  const bool inter_fp16 = is_a16 && fp16_in;
  const bool fp16_ops = inter_fp16;  // FP16 MMA only for fp16 A16 modes
  const auto* base = static_cast<const uint8_t*>(S.base);

  const bool decode = cfg == detail::kCfgDecode;
  // Programmatic dependent launches inside the op's own kernel chain (sm_90+ only).
  const bool pdl = (p.cc_major > 0 ? p.cc_major : device_info(p.caps.device).cc_major) >= 9;
  if (decode && decode_stream(p.weights)) {
    detail::DecodeArgs d;
    d.ids = b.topk_ids.data;
    d.ids64 = ids64 ? 1 : 0;
    d.routes = static_cast<int>(R);
    d.topk = static_cast<int>(topk);
    d.num_tokens = static_cast<int>(M);
    d.num_experts = static_cast<int>(E);
    d.topk_weights = static_cast<const float*>(b.topk_weights.data);
    d.weight_on_input = p.caps.apply_router_weight_on_input ? 1 : 0;
    d.w1 = S.L.fc1;
    d.w1.values = base + S.L.off_w1v;
    d.w1.scales = base + S.L.off_w1s;
    d.w2 = S.L.fc2;
    d.w2.values = base + S.L.off_w2v;
    d.w2.scales = base + S.L.off_w2s;
    d.alpha1 = reinterpret_cast<const float*>(base + S.L.off_alpha1);
    d.alpha2 = reinterpret_cast<const float*>(base + S.L.off_alpha2);
    d.a1gs = reinterpret_cast<const float*>(base + S.L.off_a1gs);
    d.a2gs = reinterpret_cast<const float*>(base + S.L.off_a2gs);
    d.aquant = aquant_of(wa.quant_mode);
    d.x = b.a.data;
    d.x_ld = b.a.stride[0];
    d.x_fp16 = fp16_in ? 1 : 0;
    d.xq = p.off_xq >= 0 ? reinterpret_cast<uint16_t*>(sc + p.off_xq) : nullptr;
    d.inter = reinterpret_cast<uint16_t*>(inter);
    d.inter_fp16 = inter_fp16 ? 1 : 0;
    d.act.kind = p.act_kind;
    d.act.has_limit = p.has_limit;
    d.act.limit = p.limit;
    d.act.alpha = p.oai_alpha;
    d.act.beta = p.oai_beta;
    d.gated = p.weights.gated ? 1 : 0;
    d.features = static_cast<int>(I);
    d.out = b.output.data;
    d.out_ld = b.output.stride[0];
    d.out_fp16 = b.output.dtype == DType::kFP16 ? 1 : 0;
    // The plan's device facts (a stream plan made without a device cannot reach run: bind
    // checks the tensors' device; the fallback keeps run correct if one ever does).
    d.sm_count = p.sm_count > 0 ? p.sm_count : device_info(p.caps.device).sm_count;
    // FC2 CTA rows and split from the live tokens and routes (like the ring depth); the plan's
    // partials hold any split up to decode_fc2_split_bound(max routes).
    const int nk2 = S.L.fc2.K_pad / 128;
    d.fc2_rows = detail::decode_fc2_rows(p.knobs, M, R, S.L.fc2.rows_pad, d.sm_count,
                                         p.sm_count > 0 ? p.fc2_rows32_ctas : 2, nk2);
    d.fc2_split =
        d.fc2_rows == 32 && p.knobs.fc2_split == 0
            ? detail::decode_fc2_split32(R, S.L.fc2.rows_pad / 32, d.sm_count,
                                         detail::decode_fc2_round_up(p.knobs, M, nk2), M == 1)
            : detail::decode_fc2_split(R, S.L.fc2.rows_pad / d.fc2_rows, d.sm_count,
                                       p.knobs.fc2_split);
    d.fc2_stages32 =
        detail::decode_fc2_stages32(p.knobs, S.L.fc2.rows_pad / 32, d.fc2_split, d.sm_count,
                                    p.sm_count > 0 ? p.fc2_rows32_ctas2 : 0);
    // A split row block's CTAs as one cluster summed through distributed shared memory
    // (decode_fc2_cluster; the partials below then stay unused), where the plan found it fits
    // (Plan::fc2_cluster_fit, shown in the signature).
    d.fc2_cluster =
        detail::decode_fc2_cluster(p.knobs, d.fc2_split, p.cc_major, d.fc2_rows, p.fc2_cluster_fit)
            ? 1
            : 0;
    d.partial = route_out;  // sized for the plan's split x max_tokens (>= this call's)
    d.counters = num_tiles + 4;
    if (p.off_fc1_bal >= 0) {
      const int64_t R0 = p.max_routes;  // the plan's capacity sized the counters
      const int64_t rb = fc1_row_blocks(p.weights.gated, I);
      d.fc1_cnt = reinterpret_cast<int*>(sc + p.off_fc1_bal);
      d.fc1_part =
          reinterpret_cast<float*>(sc + p.off_fc1_bal + detail::decode_fc1_bal_cnt_bytes(rb, R0));
      d.fc1_part_slots = static_cast<int>(detail::decode_fc1_bal_slots(rb));
      d.fc1_cnt_stride = detail::decode_fc1_bal_cnt_stride(R0);
      d.fc1_cnt_rows = static_cast<int>(rb);
    }
    if (p.off_fc1_rdy >= 0) {
      d.fc1_rdy = reinterpret_cast<unsigned long long*>(sc + p.off_fc1_rdy);
      d.fc1_rdy_cap = static_cast<int>(p.max_routes);
    }
    B12X_ASSERT(d.fc2_split == 1 || d.partial != nullptr, "decode stream: no partial buffer");
    detail::launch_decode_stream(d, p.knobs, fp16_ops, stream, pdl);
    return;
  }
  int* counters = num_tiles + 4;
  int* slot_expert = reinterpret_cast<int*>(sc + p.off_slot_expert);
  if (!decode)
    detail::launch_route(b.topk_ids.data, ids64, R, static_cast<int>(E), TN, tiles, num_tiles,
                         slot_route, slot_expert, stream);
  // Grouped + quantised activations: quantise once per slot (not once per row tile).
  const bool preq = !decode && p.off_xq >= 0;
  uint16_t* xq = preq ? reinterpret_cast<uint16_t*>(sc + p.off_xq) : nullptr;
  const int grid_tiles = decode ? static_cast<int>(R) : static_cast<int>(max_tiles_for(R, E, TN));

  detail::GemmArgs g;
  g.aquant = aquant_of(wa.quant_mode);
  g.topk = static_cast<int>(topk);
  g.tile_tokens = TN;
  g.tiles = tiles;
  g.num_tiles = num_tiles;
  g.slot_route = slot_route;
  g.topk_weights = static_cast<const float*>(b.topk_weights.data);
  g.weight_on_input = p.caps.apply_router_weight_on_input ? 1 : 0;
  g.act.kind = p.act_kind;
  g.act.has_limit = p.has_limit;
  g.act.limit = p.limit;
  g.act.alpha = p.oai_alpha;
  g.act.beta = p.oai_beta;
  g.features = static_cast<int>(I);
  g.inline_route = decode ? 1 : 0;
  g.ids = b.topk_ids.data;
  g.ids64 = ids64 ? 1 : 0;
  g.routes = static_cast<int>(R);
  g.num_experts = static_cast<int>(E);
  g.counters = counters;

  // FC1 (+ activation) -> intermediate [slot, I]
  detail::GemmArgs g1 = g;
  g1.w = S.L.fc1;
  g1.w.values = base + S.L.off_w1v;
  g1.w.scales = base + S.L.off_w1s;
  g1.alpha = reinterpret_cast<const float*>(base + S.L.off_alpha1);
  g1.a_gscale = reinterpret_cast<const float*>(base + S.L.off_a1gs);
  g1.src = b.a.data;
  g1.act_fp16 = fp16_in;
  g1.act_ld = b.a.stride[0];
  g1.act_by_token = 1;
  // A16: x already holds operand values in the MMA dtype.
  g1.raw_operands = is_a16 ? 1 : 0;
  if (preq) {
    detail::launch_quant_rows(b.a.data, fp16_in, b.a.stride[0], true, static_cast<int>(topk),
                              slot_route, slot_expert, num_tiles, g1.a_gscale, g1.aquant, xq, H,
                              static_cast<int>(H), R, stream, pdl);
    g1.src = xq;
    g1.act_fp16 = 0;
    g1.act_ld = H;
    g1.act_by_token = 0;
    g1.aquant = num::kANone;
    g1.raw_operands = 1;
  }
  g1.epi = p.weights.gated ? 0 : 1;
  g1.out = inter;
  g1.out_ld = I;
  g1.out_fp16 = inter_fp16;
  // (GGML) decode: FC2's row tiles own the fused combine's counters, zeroed by FC1.
  const int cfg1 = cfg, cfg2 = cfg;
  if (decode) g1.num_counters = S.L.fc2.rows_pad / detail::kCfgRows[cfg2];
  // FC1 follows the caller's kernels (decode) or our routing kernel (grouped).
  detail::launch_gemm(S.L.wfmt1, fp16_ops, cfg1, g1, g1.w.rows_pad / detail::kCfgRows[cfg1],
                      grid_tiles, stream, pdl && !decode);

  // FC2 -> per-route fp32 [route, H]
  detail::GemmArgs g2 = g;
  g2.w = S.L.fc2;
  g2.w.values = base + S.L.off_w2v;
  g2.w.scales = base + S.L.off_w2s;
  g2.alpha = reinterpret_cast<const float*>(base + S.L.off_alpha2);
  g2.a_gscale = reinterpret_cast<const float*>(base + S.L.off_a2gs);
  g2.src = inter;
  g2.act_fp16 = inter_fp16;
  g2.act_ld = I;
  g2.act_by_token = 0;
  g2.raw_operands = is_a16 ? 1 : 0;
  if (preq) {
    detail::launch_quant_rows(inter, false, I, false, static_cast<int>(topk), slot_route,
                              slot_expert, num_tiles, g2.a_gscale, g2.aquant,
                              static_cast<uint16_t*>(inter), I, static_cast<int>(I), R, stream,
                              pdl);
    g2.aquant = num::kANone;
    g2.raw_operands = 1;
  }
  g2.epi = 2;
  g2.out = route_out;
  g2.out_ld = H;
  g2.weight_on_input = p.caps.apply_router_weight_on_input ? 1 : 0;  // read by the fused combine
  g2.fused_combine = decode ? 1 : 0;
  g2.final_out = b.output.data;
  g2.final_ld = b.output.stride[0];
  g2.final_fp16 = b.output.dtype == DType::kFP16 ? 1 : 0;
  detail::launch_gemm(S.L.wfmt2, fp16_ops, cfg2, g2, g2.w.rows_pad / detail::kCfgRows[cfg2],
                      grid_tiles, stream, pdl);
  if (decode) return;

  detail::launch_combine(route_out, M, H, static_cast<int>(topk), b.topk_ids.data, ids64,
                         static_cast<int>(E), static_cast<const float*>(b.topk_weights.data),
                         p.caps.apply_router_weight_on_input, b.output.data,
                         b.output.dtype == DType::kFP16, b.output.stride[0], stream, pdl);
}

bool is_supported(int device) {
  if (device_count() == 0) return false;
  try {
    const DeviceInfo& d = device_info(device);
    return d.arch_compiled && d.family != ArchFamily::kNone;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace b12x::moe
