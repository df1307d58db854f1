// The backend selection policy (see include/b12x/selection.h). Every check appends a reason
// instead of returning early, so a caller learns everything that stands in the way at once.
#include "b12x/selection.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "b12x/runtime.h"
#include "b12x/status.h"

namespace b12x::selection {

namespace {

std::string jstr(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string jlist(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + jstr(v[i]);
  return out + "]";
}

template <typename... A>
std::string cat(A&&... a) {
  std::ostringstream os;
  (os << ... << std::forward<A>(a));
  return os.str();
}

bool is_fp4(WeightFormat f) {
  return f == WeightFormat::kNVFP4 || f == WeightFormat::kMXFP4;
}
bool is_fp8(WeightFormat f) {
  return f == WeightFormat::kFP8Tensor || f == WeightFormat::kFP8Block ||
         f == WeightFormat::kMXFP8 || f == WeightFormat::kFP8BlockOther;
}

// vLLM's automatic priority lists (vllm-contract §1.1) with b12x placed after the established
// optimised backends and before emulation where vLLM does not list it.
std::vector<std::string> auto_order_for(const LayerDesc& d, ActFormat act) {
  switch (d.kind) {
    case LayerKind::kDenseLinear:
      switch (d.weight) {
        case WeightFormat::kNVFP4:
          if (act == ActFormat::kBF16) return {"marlin", "b12x", "emulation"};
          return {"flashinfer_cutedsl",
                  "flashinfer_cutlass",
                  "flashinfer_b12x",
                  "cutlass",
                  "marlin",
                  "flashinfer_trtllm",
                  "flashinfer_cudnn",
                  "fbgemm",
                  "b12x",
                  "emulation",
                  "humming"};
        case WeightFormat::kMXFP4:
          return {"flashinfer", "marlin", "humming", "b12x", "emulation"};
        case WeightFormat::kMXFP8:
          return {"flashinfer_cutedsl", "flashinfer_cutlass", "marlin", "b12x", "emulation"};
        case WeightFormat::kFP8Tensor:
          return {"flashinfer", "cutlass", "b12x", "torch", "marlin", "humming"};
        case WeightFormat::kFP8Block:
          return {"flashinfer_deepgemm", "deepgemm", "cutlass", "b12x", "marlin", "triton"};
        case WeightFormat::kQ8_0:
        case WeightFormat::kIQ2_XS:
        case WeightFormat::kIQ2_XXS:
          return {"gguf", "b12x", "emulation"};
        default:
          return {};
      }
    case LayerKind::kMoE:
      if (d.weight == WeightFormat::kNVFP4)
        return {"flashinfer_trtllm",
                "flashinfer_cutedsl",
                "flashinfer_cutedsl_batched",
                "flashinfer_cutlass",
                "vllm_cutlass",
                "marlin",
                "humming",
                "b12x",
                "emulation"};
      if (d.weight == WeightFormat::kMXFP4)
        return {"flashinfer_trtllm", "flashinfer_cutlass", "triton", "marlin", "b12x", "emulation"};
      if (d.weight == WeightFormat::kQ8_0 || d.weight == WeightFormat::kIQ2_XS ||
          d.weight == WeightFormat::kIQ2_XXS)
        return {"gguf", "b12x", "emulation"};
      return {};
    case LayerKind::kAttention:
      return {"flash_attn", "flashinfer", "triton_attn", "b12x"};
    case LayerKind::kEmbedding:
      if (d.weight == WeightFormat::kQ8_0) return {"b12x", "emulation"};
      return {};
  }
  return {};
}

void check_io_dtype(const LayerDesc& d, std::vector<std::string>& reasons) {
  if (d.io_dtype != DType::kBF16 && d.io_dtype != DType::kFP16)
    reasons.push_back(cat("activation dtype ", dtype_name(d.io_dtype),
                          " is not supported (supported: bf16, fp16)"));
}

void select_dense(const LayerDesc& d, Selection& s) {
  auto& r = s.reasons;
  check_io_dtype(d, r);
  if (d.n <= 0 || d.k <= 0)
    r.push_back(cat("weight shape [N=", d.n, ", K=", d.k, "] must be positive"));
  const auto need_k = [&](int64_t mult, const char* why) {
    if (d.k > 0 && d.k % mult != 0)
      r.push_back(cat("K=", d.k, " is not a multiple of ", mult, " (", why, ")"));
  };
  ActFormat act = d.act;
  switch (d.weight) {
    case WeightFormat::kNVFP4:
      if (act == ActFormat::kAuto) act = ActFormat::kNVFP4;
      if (act == ActFormat::kNVFP4) {
        s.path = "gemm.nvfp4_w4a4";
        need_k(32, "NVFP4 W4A4 needs K % 32 == 0: 16-byte rows of packed FP4");
      } else if (act == ActFormat::kBF16) {
        s.path = "gemm.nvfp4_w4a16";
        need_k(32, "the b12x NVFP4 W4A16 GEMM needs K % 32 == 0");
        s.notes.push_back("dense NVFP4 W4A16 is served by b12x (vLLM upstream pins Marlin)");
      } else {
        r.push_back(cat("NVFP4 weights with ", act_format_name(act),
                        " activations: b12x runs dense NVFP4 with NVFP4 (W4A4) or BF16 (W4A16) "
                        "activations"));
      }
      break;
    case WeightFormat::kMXFP4:
      if (act == ActFormat::kAuto) act = ActFormat::kMXFP4;
      if (act == ActFormat::kMXFP4 || act == ActFormat::kMXFP8 || act == ActFormat::kBF16) {
        s.path = act == ActFormat::kMXFP4   ? "gemm.mxfp4_w4a4"
                 : act == ActFormat::kMXFP8 ? "gemm.mxfp4_w4a8"
                                            : "gemm.mxfp4_w4a16";
        need_k(32, "MXFP4 needs whole 32-value scale blocks");
        if (act != ActFormat::kMXFP4)
          s.notes.push_back(
              "vLLM runs only MXFP4 W4A4 linears on b12x (W4A16 goes to Marlin); "
              "the W4A8/W4A16 MXFP4 GEMMs are b12x extensions");
      } else {
        r.push_back(cat("MXFP4 weights with ", act_format_name(act),
                        " activations (supported: mxfp4, mxfp8, bf16)"));
      }
      break;
    case WeightFormat::kMXFP8:
      if (act == ActFormat::kAuto || act == ActFormat::kBF16) act = ActFormat::kMXFP8;
      if (act == ActFormat::kMXFP8) {
        s.path = "gemm.mxfp8";
        need_k(32, "MXFP8 needs whole 32-value scale blocks");
        s.notes.push_back("activations are quantized to MXFP8 inside b12x; bias is fused");
      } else {
        r.push_back(cat("MXFP8 weights with ", act_format_name(act),
                        " activations (b12x quantizes BF16/FP16 inputs to MXFP8 itself)"));
      }
      break;
    case WeightFormat::kFP8Tensor:
      if (act == ActFormat::kAuto) act = ActFormat::kFP8Static;
      if (act == ActFormat::kFP8Static && d.static_input_scale) {
        s.path = "gemm.fp8_tensor";
        need_k(32, "per-tensor FP8 needs K % 32 == 0");
      } else {
        r.push_back("per-tensor FP8 needs static per-tensor activation and weight scales");
      }
      break;
    case WeightFormat::kFP8Block:
      if (act == ActFormat::kAuto) act = ActFormat::kFP8Dynamic;
      if (!d.weight_block_128) r.push_back("block FP8 weights must use 128x128 blocks");
      if (act != ActFormat::kFP8Dynamic)
        r.push_back(cat("block FP8 needs dynamic per-token-group (1x128) FP8 activations, got ",
                        act_format_name(act)));
      if (d.n > 0 && d.n % 128 != 0)
        r.push_back(cat("N=", d.n, " is not a multiple of 128 (block FP8 needs N % 128 == 0)"));
      need_k(128, "block FP8 needs K % 128 == 0");
      s.path = "gemm.fp8_block";
      break;
    case WeightFormat::kFP8BlockOther:
      r.push_back("block FP8 with a block size other than 128x128 is not supported");
      break;
    case WeightFormat::kQ8_0:
    case WeightFormat::kIQ2_XS:
    case WeightFormat::kIQ2_XXS: {
      if (act == ActFormat::kAuto) act = ActFormat::kBF16;
      const bool q8 = d.weight == WeightFormat::kQ8_0;
      s.path =
          q8 ? "gemm.q8_0" : (d.weight == WeightFormat::kIQ2_XS ? "gemm.iq2_xs" : "gemm.iq2_xxs");
      if (act != ActFormat::kBF16)
        r.push_back(cat("GGML ", weight_format_name(d.weight),
                        " weights run with BF16/FP16 activations, got ", act_format_name(act)));
      need_k(q8 ? 32 : 256, q8 ? "Q8_0 blocks hold 32 values" : "IQ2 blocks hold 256 values");
      break;
    }
    case WeightFormat::kBF16:
    case WeightFormat::kFP16:
      r.push_back(cat("unquantized ", weight_format_name(d.weight),
                      " weights: b12x has no dense 16-bit GEMM (cuBLAS serves these)"));
      break;
    default:
      r.push_back(cat(weight_format_name(d.weight), " weights are not a b12x linear format"));
  }
  s.act = act;
  if (d.has_bias && s.path != "gemm.mxfp8" && r.empty())
    s.notes.push_back("bias is added after the GEMM");
  if (d.has_lora && r.empty()) s.notes.push_back("LoRA is applied outside the b12x GEMM");
}

bool situ_params_ok(const LayerDesc& d) {
  return d.situ_beta == 4.f && d.situ_linear_beta == 25.f;
}

void select_moe(const LayerDesc& d, const EnvOverrides& env, Selection& s) {
  auto& r = s.reasons;
  check_io_dtype(d, r);
  const bool ggml = d.weight == WeightFormat::kQ8_0 || d.weight == WeightFormat::kIQ2_XS ||
                    d.weight == WeightFormat::kIQ2_XXS;
  if (d.weight == WeightFormat::kEXL3 || d.weight == WeightFormat::kNF3) {
    r.push_back(cat(weight_format_name(d.weight), " MoE experts are not supported by b12x"));
  } else if (!is_fp4(d.weight) && !ggml) {
    r.push_back(cat(weight_format_name(d.weight),
                    " MoE experts: b12x fused MoE takes NVFP4, MXFP4 or GGML (Q8_0, IQ2_XS, "
                    "IQ2_XXS) experts"));
  }
  if (d.hidden > 0 && d.hidden % 32 != 0)
    r.push_back(cat("hidden=", d.hidden, " is not a multiple of 32 (activation blocks)"));
  if (d.hidden <= 0 || d.intermediate_per_rank <= 0 || d.num_experts <= 0 || d.topk <= 0)
    r.push_back(cat("MoE shape hidden=", d.hidden,
                    ", intermediate_per_rank=", d.intermediate_per_rank,
                    ", num_experts=", d.num_experts, ", topk=", d.topk, " must be positive"));
  else if (d.topk > d.num_experts)
    r.push_back(cat("topk=", d.topk, " exceeds num_experts=", d.num_experts));

  switch (d.activation) {
    case Activation::kSiLU:
    case Activation::kReLU2:
    case Activation::kSwigluOAIUninterleave:
      break;
    case Activation::kSiTU:
      if (!situ_params_ok(d))
        r.push_back(cat("SiTU with beta=", d.situ_beta, ", linear_beta=", d.situ_linear_beta,
                        " (only beta=4, linear_beta=25 is supported)"));
      break;
    case Activation::kSwigluOAIInterleaved:
      r.push_back(
          "interleaved SwiGLU-OAI (gpt-oss row layout) is not supported; only "
          "swigluoai_uninterleave ([gate; up] halves)");
      break;
    default:
      r.push_back(cat("activation ", activation_name(d.activation),
                      " is not supported (supported: silu, situ, swigluoai_uninterleave, relu2)"));
  }
  if (d.has_bias) r.push_back("expert biases are not supported (this excludes gpt-oss)");
  if (d.ep_size != 1)
    r.push_back(cat("expert parallelism (ep_size=", d.ep_size,
                    ") is not supported; b12x MoE is tensor-parallel only"));
  if (d.use_all2all) r.push_back("all2all dispatch kernels are not supported (TP only)");
  if (d.use_eplb) r.push_back("EPLB (expert load balancing) is not supported");
  if (d.has_expert_map) r.push_back("an expert map is not supported");
  if (d.has_lora) r.push_back("LoRA on MoE layers is not supported");

  // Activation format.
  ActFormat act = d.act;
  const bool gated_silu_like =
      d.activation == Activation::kSiLU || d.activation == Activation::kSiTU;
  if (is_fp4(d.weight) && env.moe_fp4_force_a16) {
    if (act != ActFormat::kAuto && act != ActFormat::kBF16)
      s.notes.push_back(cat("B12X_MOE_FP4_FORCE_A16 overrides the requested ", act_format_name(act),
                            " activations"));
    else
      s.notes.push_back("B12X_MOE_FP4_FORCE_A16: BF16 activations");
    act = ActFormat::kBF16;
  }
  if (d.weight == WeightFormat::kMXFP4) {
    s.moe_source_format = "fp4_e8m0_k32";
    if (d.intermediate_per_rank > 0 && d.intermediate_per_rank % 32 != 0)
      r.push_back(cat("intermediate_per_rank=", d.intermediate_per_rank,
                      " is not a multiple of 32 (MXFP4 MoE needs I % 32 == 0)"));
    std::vector<std::string> a8_blockers;
    if (d.hidden % 256 != 0)
      a8_blockers.push_back(cat("hidden=", d.hidden, " is not a multiple of 256"));
    if (d.intermediate_per_rank % 32 != 0)
      a8_blockers.push_back(
          cat("intermediate_per_rank=", d.intermediate_per_rank, " is not a multiple of 32"));
    if (!gated_silu_like)
      a8_blockers.push_back(
          cat("activation ", activation_name(d.activation), " (W4A8 takes silu/situ only)"));
    if (act == ActFormat::kAuto) {
      if (a8_blockers.empty()) {
        act = ActFormat::kMXFP8;
      } else {
        act = ActFormat::kBF16;
        std::string why;
        for (const auto& b : a8_blockers) why += (why.empty() ? "" : ", ") + b;
        s.notes.push_back("MXFP8 activations (W4A8) unavailable: " + why +
                          "; falling back to BF16 activations (W4A16)");
      }
    }
    if (act == ActFormat::kMXFP8) {
      s.moe_quant_mode = "w4a8_mx";
      for (const auto& b : a8_blockers) r.push_back("MXFP4 W4A8: " + b);
    } else if (act == ActFormat::kBF16) {
      s.moe_quant_mode = "w4a16";
    } else if (act == ActFormat::kMXFP4) {
      s.moe_quant_mode = "mxfp4";
      if (d.activation == Activation::kSwigluOAIUninterleave)
        r.push_back("swigluoai_uninterleave is not supported with MXFP4 activations");
    } else {
      r.push_back(cat("MXFP4 experts with ", act_format_name(act),
                      " activations (supported: mxfp8, bf16, mxfp4)"));
    }
  } else if (d.weight == WeightFormat::kNVFP4) {
    s.moe_source_format = "modelopt_nvfp4";
    if (d.intermediate_per_rank > 0 && d.intermediate_per_rank % 16 != 0)
      r.push_back(cat("intermediate_per_rank=", d.intermediate_per_rank,
                      " is not a multiple of 16 (NVFP4 blocks)"));
    if (act == ActFormat::kAuto) {
      act = ActFormat::kNVFP4;
      s.notes.push_back("activation format not given: using the ModelOpt NVFP4 default (W4A4)");
    }
    if (act == ActFormat::kNVFP4) {
      s.moe_quant_mode = "nvfp4";
    } else if (act == ActFormat::kMXFP8) {
      s.moe_quant_mode = "w4a8_nvfp4";
      if (d.activation == Activation::kSwigluOAIUninterleave)
        r.push_back("swigluoai_uninterleave is not supported with W4A8 activations");
    } else if (act == ActFormat::kBF16) {
      s.moe_quant_mode = "w4a16";
    } else {
      r.push_back(cat("NVFP4 experts with ", act_format_name(act),
                      " activations (supported: nvfp4, mxfp8, bf16)"));
    }
  } else if (ggml) {
    s.moe_source_format = "ggml";
    if (act == ActFormat::kAuto) act = ActFormat::kBF16;
    if (act != ActFormat::kBF16)
      r.push_back(cat("GGML experts run with BF16/FP16 activations, got ", act_format_name(act)));
    if (d.activation != Activation::kSiLU && d.activation != Activation::kReLU2 &&
        d.activation != Activation::kNone)
      r.push_back(cat("activation ", activation_name(d.activation),
                      " with GGML experts (supported: silu, relu2)"));
    const int64_t bv = d.weight == WeightFormat::kQ8_0 ? 32 : 256;
    if (d.hidden > 0 && d.hidden % bv != 0)
      r.push_back(cat("hidden=", d.hidden, " does not keep whole ", weight_format_name(d.weight),
                      " blocks of ", bv, " values"));
    if (d.intermediate_per_rank > 0 && d.intermediate_per_rank % bv != 0)
      r.push_back(cat("intermediate_per_rank=", d.intermediate_per_rank, " does not keep whole ",
                      weight_format_name(d.weight), " blocks of ", bv,
                      " values (tensor-parallel shards must keep whole blocks)"));
    s.moe_quant_mode = "ggml_a16";
  }
  if (d.apply_router_weight_on_input && s.moe_quant_mode != "w4a16")
    r.push_back("apply_router_weight_on_input is only supported with BF16 activations (W4A16)");
  s.act = act;
  if (!s.moe_quant_mode.empty()) {
    s.path = "moe." + s.moe_quant_mode;
    const bool w13 = d.weight == WeightFormat::kNVFP4 && s.moe_quant_mode == "w4a16" &&
                     d.activation != Activation::kSwigluOAIUninterleave;
    s.w13_layout = w13 ? "w13" : "w31";
  }
  if (d.weight == WeightFormat::kNVFP4)
    s.notes.push_back(
        "vLLM upstream leaves B12X out of automatic NVFP4 MoE selection "
        "(PR #54719 proposes it before MARLIN); use --moe-backend b12x");
  if (d.weight == WeightFormat::kMXFP4)
    s.notes.push_back("vLLM reaches B12X MXFP4 MoE only through --moe-backend b12x");
}

void select_attention(const LayerDesc& d, Selection& s) {
  auto& r = s.reasons;
  s.path = "attention.paged";
  s.act = ActFormat::kBF16;
  if (d.io_dtype != DType::kBF16)
    r.push_back(cat("query dtype ", dtype_name(d.io_dtype), " (paged attention takes bf16 only)"));
  if (d.weight == WeightFormat::kFP16)
    r.push_back("float16 KV cache is not supported (supported: bf16, fp8_e4m3)");
  else if (d.weight != WeightFormat::kBF16 && d.weight != WeightFormat::kFP8Tensor)
    r.push_back(
        cat("KV cache format ", weight_format_name(d.weight), " (supported: bf16, fp8_e4m3)"));
  if (d.page_size != 64 && d.page_size != 128)
    r.push_back(cat("page size ", d.page_size, " (supported: 64, 128)"));
  if (d.head_dim != 64 && d.head_dim != 128 && d.head_dim != 192 && d.head_dim != 256)
    r.push_back(cat("head_dim ", d.head_dim, " (supported: 64, 128, 192, 256)"));
  if (d.num_q_heads <= 0 || d.num_kv_heads <= 0)
    r.push_back(
        cat("num_q_heads=", d.num_q_heads, ", num_kv_heads=", d.num_kv_heads, " must be positive"));
  else if (d.num_q_heads % d.num_kv_heads != 0)
    r.push_back(
        cat("num_q_heads=", d.num_q_heads, " is not a multiple of num_kv_heads=", d.num_kv_heads));
  if (d.softmax_scale != 0.f && d.head_dim > 0) {
    const double want = 1.0 / std::sqrt(static_cast<double>(d.head_dim));
    if (std::fabs(d.softmax_scale - want) > 1e-6 * want)
      r.push_back(cat("softmax scale ", d.softmax_scale, " differs from head_dim^-0.5 = ", want));
  }
  if (d.alibi) r.push_back("ALiBi is not supported");
  if (d.softcap) r.push_back("logit soft-capping is not supported");
  if (d.fused_output_quant) r.push_back("fused output quantization is not supported");
  if (d.context_parallel) r.push_back("decode context parallelism (DCP) is not supported");
  if (!d.decoder_self_attention)
    r.push_back("only decoder self-attention is supported (no encoder / cross attention)");
  if (d.has_lora) s.notes.push_back("LoRA does not touch attention kernels");
  s.notes.push_back("vLLM selects B12X attention only with --attention-backend B12X");
}

void select_embedding(const LayerDesc& d, Selection& s) {
  auto& r = s.reasons;
  check_io_dtype(d, r);
  s.act = ActFormat::kBF16;
  if (d.weight == WeightFormat::kQ8_0) {
    s.path = "embedding.q8_0";
    if (d.k > 0 && d.k % 32 != 0)
      r.push_back(cat("hidden=", d.k, " is not a multiple of 32 (Q8_0 blocks hold 32 values)"));
    if (d.n <= 0 || d.k <= 0)
      r.push_back(cat("embedding shape [vocab=", d.n, ", hidden=", d.k, "] must be positive"));
  } else if (d.weight == WeightFormat::kBF16 || d.weight == WeightFormat::kFP16) {
    r.push_back("unquantized embedding: a plain gather, not a b12x op");
  } else {
    r.push_back(cat(weight_format_name(d.weight), " embedding: b12x serves Q8_0 embeddings only"));
  }
}

std::string lower(const char* v) {
  std::string s = v;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Reads the B12X_ spelling, else the VLLM_ one.
bool flag_pair(const char* b12x_name, const char* vllm_name) {
  if (std::getenv(b12x_name)) return env_flag(b12x_name);
  return env_flag(vllm_name);
}

}  // namespace

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return false;
  const std::string s = lower(v);
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s.empty() || s == "0" || s == "false" || s == "no" || s == "off") return false;
  log_message(1, cat("warning: ", name, "=", v,
                     " is not a boolean (use 1/true/yes/on or 0/false/no/off); treating as 0"));
  return false;
}

EnvOverrides EnvOverrides::from_process() {
  EnvOverrides e;
  e.moe_fp4_force_a16 = flag_pair("B12X_MOE_FP4_FORCE_A16", "VLLM_B12X_MOE_FP4_FORCE_A16");
  e.use_fp8_gemm = flag_pair("B12X_USE_FP8_GEMM", "VLLM_USE_B12X_FP8_GEMM");
  e.use_fp4_gemm = flag_pair("B12X_USE_FP4_GEMM", "VLLM_USE_B12X_FP4_GEMM");
  return e;
}

LayerDesc& LayerDesc::on_device(int ordinal) {
  const DeviceInfo& di = device_info(ordinal);
  compute_capability = di.cc_major * 10 + di.cc_minor;
  check_compiled_archs = true;
  return *this;
}

LayerDesc LayerDesc::linear(WeightFormat w, int64_t n, int64_t k, ActFormat act, int cc) {
  LayerDesc d;
  d.kind = LayerKind::kDenseLinear;
  d.weight = w;
  d.act = act;
  d.n = n;
  d.k = k;
  d.compute_capability = cc;
  return d;
}

LayerDesc LayerDesc::moe(WeightFormat w, ActFormat act, int64_t hidden,
                         int64_t intermediate_per_rank, int64_t num_experts, int64_t topk,
                         Activation activation, int cc) {
  LayerDesc d;
  d.kind = LayerKind::kMoE;
  d.weight = w;
  d.act = act;
  d.hidden = hidden;
  d.intermediate_per_rank = intermediate_per_rank;
  d.num_experts = num_experts;
  d.topk = topk;
  d.activation = activation;
  d.compute_capability = cc;
  return d;
}

LayerDesc LayerDesc::attention(WeightFormat kv, int64_t num_q_heads, int64_t num_kv_heads,
                               int64_t head_dim, int64_t page_size, int cc) {
  LayerDesc d;
  d.kind = LayerKind::kAttention;
  d.weight = kv;
  d.num_q_heads = num_q_heads;
  d.num_kv_heads = num_kv_heads;
  d.head_dim = head_dim;
  d.page_size = page_size;
  d.compute_capability = cc;
  return d;
}

LayerDesc LayerDesc::embedding(WeightFormat w, int64_t vocab, int64_t hidden, int cc) {
  LayerDesc d;
  d.kind = LayerKind::kEmbedding;
  d.weight = w;
  d.n = vocab;
  d.k = hidden;
  d.compute_capability = cc;
  return d;
}

std::string Selection::reason() const {
  std::string s;
  for (size_t i = 0; i < reasons.size(); ++i) s += (i ? "; " : "") + reasons[i];
  return s;
}

ArchPath arch_path_for(int cc) {
  switch (cc) {
    case 120:
    case 121:
      return ArchPath::kNative;
    case 89:
    case 90:
      return ArchPath::kPortable;
    default:
      return ArchPath::kNone;
  }
}

Selection select(const LayerDesc& d, const EnvOverrides& env) {
  Selection s;
  // Device.
  int cc = d.compute_capability;
  if (cc == 0) {
    cc = 120;
    s.notes.push_back("no device capability given: answering for SM120");
  }
  s.arch = arch_path_for(cc);
  if (s.arch == ArchPath::kNone) {
    s.reasons.push_back(cat("compute capability ", cc / 10, ".", cc % 10,
                            " is not served by b12x (SM120/SM121 natively, SM89/SM90 through the "
                            "portable path)"));
  } else {
    s.arch_detail = cat("sm_", cc, cc >= 90 ? "a" : "",
                        s.arch == ArchPath::kNative ? " native" : " portable mma.sync");
    if (d.check_compiled_archs) {
      bool compiled = false;
      for (int a : compiled_archs()) compiled = compiled || a == cc;
      if (!compiled)
        s.reasons.push_back(
            cat("sm_", cc, " is not in this build's architectures (", compiled_arch_string(), ")"));
    }
    if (s.arch == ArchPath::kPortable && (is_fp4(d.weight) || d.weight == WeightFormat::kMXFP8))
      s.notes.push_back(
          "no block-scaled tensor cores before SM120: the portable path decodes "
          "the weights in registers");
  }

  switch (d.kind) {
    case LayerKind::kDenseLinear:
      select_dense(d, s);
      break;
    case LayerKind::kMoE:
      select_moe(d, env, s);
      break;
    case LayerKind::kAttention:
      select_attention(d, s);
      break;
    case LayerKind::kEmbedding:
      select_embedding(d, s);
      break;
    default:
      s.reasons.push_back(cat("unknown layer kind ", static_cast<int>(d.kind)));
  }
  s.supported = s.reasons.empty();

  // Automatic order and the opt-in overrides.
  s.auto_order = auto_order_for(d, s.act);
  const bool fp8_linear = d.kind == LayerKind::kDenseLinear && is_fp8(d.weight);
  const bool fp4_linear = d.kind == LayerKind::kDenseLinear && is_fp4(d.weight);
  const bool override_on = (fp8_linear && env.use_fp8_gemm) || (fp4_linear && env.use_fp4_gemm);
  if (override_on) {
    const char* var = fp8_linear ? "B12X_USE_FP8_GEMM" : "B12X_USE_FP4_GEMM";
    if (s.supported) {
      s.auto_order.erase(std::remove(s.auto_order.begin(), s.auto_order.end(), "b12x"),
                         s.auto_order.end());
      s.auto_order.insert(s.auto_order.begin(), "b12x");
      s.b12x_first = true;
      s.notes.push_back(cat(var, ": b12x first"));
    } else {
      s.notes.push_back(cat(var, " is set but b12x cannot run this layer"));
    }
  }
  for (size_t i = 0; i < s.auto_order.size(); ++i)
    if (s.auto_order[i] == "b12x") s.auto_position = static_cast<int>(i);
  if (!s.supported) {
    s.path.clear();
    s.moe_quant_mode.clear();
    s.w13_layout.clear();
  }

  if (log_level() >= 1) {
    std::string line =
        cat("select ", d.name.empty() ? layer_kind_name(d.kind) : d.name.c_str(), " [",
            layer_kind_name(d.kind), " ", weight_format_name(d.weight), "]: ", s.summary());
    if (log_level() >= 3)
      line += cat(" (n=", d.n, " k=", d.k, " hidden=", d.hidden, " I=", d.intermediate_per_rank,
                  " E=", d.num_experts, " topk=", d.topk, " heads=", d.num_q_heads, "/",
                  d.num_kv_heads, " D=", d.head_dim, " page=", d.page_size, " cc=", cc, ")");
    log_message(1, line);
  }
  return s;
}

std::string Selection::summary() const {
  if (supported) {
    std::string s = path + " (" + arch_detail;
    if (act != ActFormat::kAuto) s += cat(", ", act_format_name(act), " activations");
    return s + ")";
  }
  std::string s = "not supported: ";
  for (size_t i = 0; i < reasons.size(); ++i) s += (i ? "; " : "") + reasons[i];
  return s;
}

std::string Selection::to_json() const {
  std::string o = "{";
  o += "\"supported\": " + std::string(supported ? "true" : "false");
  o += ", \"path\": " + jstr(path);
  o += ", \"arch\": " + jstr(arch_path_name(arch));
  o += ", \"arch_detail\": " + jstr(arch_detail);
  o += ", \"activation_format\": " + jstr(act_format_name(act));
  o += ", \"moe_quant_mode\": " + jstr(moe_quant_mode);
  o += ", \"moe_source_format\": " + jstr(moe_source_format);
  o += ", \"w13_layout\": " + jstr(w13_layout);
  o += ", \"reasons\": " + jlist(reasons);
  o += ", \"notes\": " + jlist(notes);
  o += ", \"auto_order\": " + jlist(auto_order);
  o += ", \"auto_position\": " + std::to_string(auto_position);
  o += ", \"b12x_first\": " + std::string(b12x_first ? "true" : "false");
  return o + "}";
}

const char* layer_kind_name(LayerKind k) noexcept {
  switch (k) {
    case LayerKind::kDenseLinear:
      return "linear";
    case LayerKind::kMoE:
      return "moe";
    case LayerKind::kAttention:
      return "attention";
    case LayerKind::kEmbedding:
      return "embedding";
  }
  return "unknown";
}

const char* weight_format_name(WeightFormat f) noexcept {
  switch (f) {
    case WeightFormat::kBF16:
      return "bf16";
    case WeightFormat::kFP16:
      return "fp16";
    case WeightFormat::kFP8Tensor:
      return "fp8";
    case WeightFormat::kFP8Block:
      return "fp8_block";
    case WeightFormat::kMXFP8:
      return "mxfp8";
    case WeightFormat::kNVFP4:
      return "nvfp4";
    case WeightFormat::kMXFP4:
      return "mxfp4";
    case WeightFormat::kQ8_0:
      return "q8_0";
    case WeightFormat::kIQ2_XS:
      return "iq2_xs";
    case WeightFormat::kIQ2_XXS:
      return "iq2_xxs";
    case WeightFormat::kEXL3:
      return "exl3";
    case WeightFormat::kNF3:
      return "nf3";
    case WeightFormat::kInt4:
      return "int4";
    case WeightFormat::kFP8BlockOther:
      return "fp8_block_other";
  }
  return "unknown";
}

const char* act_format_name(ActFormat a) noexcept {
  switch (a) {
    case ActFormat::kAuto:
      return "auto";
    case ActFormat::kBF16:
      return "bf16";
    case ActFormat::kFP8Static:
      return "fp8_static";
    case ActFormat::kFP8Dynamic:
      return "fp8_dynamic";
    case ActFormat::kMXFP8:
      return "mxfp8";
    case ActFormat::kNVFP4:
      return "nvfp4";
    case ActFormat::kMXFP4:
      return "mxfp4";
  }
  return "unknown";
}

const char* activation_name(Activation a) noexcept {
  switch (a) {
    case Activation::kNone:
      return "none";
    case Activation::kSiLU:
      return "silu";
    case Activation::kSiTU:
      return "situ";
    case Activation::kSwigluOAIUninterleave:
      return "swigluoai_uninterleave";
    case Activation::kSwigluOAIInterleaved:
      return "swigluoai";
    case Activation::kReLU2:
      return "relu2";
    case Activation::kGeLU:
      return "gelu";
    case Activation::kOther:
      return "other";
  }
  return "unknown";
}

const char* arch_path_name(ArchPath a) noexcept {
  switch (a) {
    case ArchPath::kNone:
      return "none";
    case ArchPath::kNative:
      return "native";
    case ArchPath::kPortable:
      return "portable";
  }
  return "unknown";
}

}  // namespace b12x::selection
