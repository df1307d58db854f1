// b12x: backend selection policy — for one layer description, which b12x path runs, or every
// reason none can; b12x's place in the automatic backend order; the opt-in overrides.
//
// The rules are those vLLM applies to b12x (vllm-contract.md §1.1, §1.3–1.5) extended to the
// formats b12x serves beyond vLLM's integration (GGML Q8_0 / IQ2, Q8_0 embedding) and to the
// portable path on SM89/SM90. Ops call it from is_supported(), e.g.
//
//   b12x::selection::LayerDesc d = b12x::selection::LayerDesc::moe(...);
//   auto s = b12x::selection::select(d);
//   if (!s.supported) ...  // s.reasons lists every failed check
//
// Environment (read by EnvOverrides::from_process()):
//   B12X_MOE_FP4_FORCE_A16 / VLLM_B12X_MOE_FP4_FORCE_A16   BF16 activations for FP4 MoE
//   B12X_USE_FP8_GEMM / VLLM_USE_B12X_FP8_GEMM             b12x first for FP8 linears
//   B12X_USE_FP4_GEMM / VLLM_USE_B12X_FP4_GEMM             b12x first for FP4 linears
// The B12X_ spelling wins when both are set. Values: 1/true/yes/on, 0/false/no/off.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "b12x/types.h"

namespace b12x::selection {

enum class LayerKind : int32_t { kDenseLinear = 0, kMoE = 1, kAttention = 2, kEmbedding = 3 };

/// Weight (or KV-cache, for attention) storage format.
enum class WeightFormat : int32_t {
  kBF16 = 0,
  kFP16 = 1,
  kFP8Tensor = 2,  ///< per-tensor FP8 E4M3 (ModelOpt FP8)
  kFP8Block = 3,   ///< 128x128 block FP8 (DeepSeek)
  kMXFP8 = 4,
  kNVFP4 = 5,
  kMXFP4 = 6,
  kQ8_0 = 7,
  kIQ2_XS = 8,
  kIQ2_XXS = 9,
  kEXL3 = 10,  ///< fork-only MoE formats b12x does not take
  kNF3 = 11,
  kInt4 = 12,           ///< GPTQ/AWQ style
  kFP8BlockOther = 13,  ///< block FP8 with a block size other than 128x128
};

/// Activation operand format.
enum class ActFormat : int32_t {
  kAuto = 0,        ///< let the policy choose (MoE: the format's preferred path)
  kBF16 = 1,        ///< unquantized 16-bit activations (A16)
  kFP8Static = 2,   ///< per-tensor static scale
  kFP8Dynamic = 3,  ///< per-token-group (1x128) dynamic
  kMXFP8 = 4,
  kNVFP4 = 5,
  kMXFP4 = 6,
};

enum class Activation : int32_t {
  kNone = 0,  ///< not applicable (linear / attention)
  kSiLU = 1,
  kSiTU = 2,  ///< beta 4, linear_beta 25 only
  kSwigluOAIUninterleave = 3,
  kSwigluOAIInterleaved = 4,  ///< gpt-oss row-interleaved layout
  kReLU2 = 5,                 ///< non-gated
  kGeLU = 6,
  kOther = 7,
};

/// Which kernels serve the device.
enum class ArchPath : int32_t {
  kNone = 0,
  kNative = 1,    ///< SM120 / SM121: block-scaled mma.sync paths
  kPortable = 2,  ///< SM89 / SM90: portable mma.sync (BF16/FP16 m16n8k16, FP8 m16n8k32)
};

struct LayerDesc {
  LayerKind kind = LayerKind::kDenseLinear;
  WeightFormat weight = WeightFormat::kBF16;
  ActFormat act = ActFormat::kAuto;
  DType io_dtype = DType::kBF16;  ///< activations in / out (bf16 or fp16)
  std::string name;               ///< for messages and the dispatch trace

  // dense linear / embedding: weight [n, k] (embedding: n = vocab, k = hidden)
  int64_t n = 0, k = 0;
  // MoE
  int64_t hidden = 0, intermediate_per_rank = 0, num_experts = 0, topk = 0;
  Activation activation = Activation::kNone;
  float situ_beta = 4.f, situ_linear_beta = 25.f;
  bool apply_router_weight_on_input = false;
  bool has_expert_map = false;
  bool use_all2all = false;
  bool use_eplb = false;
  // attention
  int64_t num_q_heads = 0, num_kv_heads = 0, head_dim = 0, page_size = 0;
  float softmax_scale = 0.f;  ///< 0 = head_dim^-0.5
  bool alibi = false, softcap = false, fused_output_quant = false;
  bool decoder_self_attention = true;
  bool context_parallel = false;
  // common
  int tp_size = 1, ep_size = 1;
  bool has_bias = false;
  bool has_lora = false;
  bool weight_block_128 = true;       ///< block FP8: the block is 128x128
  bool static_input_scale = true;     ///< per-tensor FP8: activation scale is static
  int compute_capability = 0;         ///< 10*major+minor of the device (e.g. 120); 0 = unknown
  bool check_compiled_archs = false;  ///< also require the device arch in this build

  /// The device's capability, filled from device_info(ordinal); check_compiled_archs = true.
  LayerDesc& on_device(int ordinal);

  // Shorthands for is_supported() implementations (cc = 10*major+minor, 0 = SM120).
  static LayerDesc linear(WeightFormat w, int64_t n, int64_t k, ActFormat act = ActFormat::kAuto,
                          int cc = 0);
  static LayerDesc moe(WeightFormat w, ActFormat act, int64_t hidden, int64_t intermediate_per_rank,
                       int64_t num_experts, int64_t topk, Activation activation, int cc = 0);
  static LayerDesc attention(WeightFormat kv, int64_t num_q_heads, int64_t num_kv_heads,
                             int64_t head_dim, int64_t page_size, int cc = 0);
  static LayerDesc embedding(WeightFormat w, int64_t vocab, int64_t hidden, int cc = 0);
};

/// The env-derived switches (explicit values make tests independent of the environment).
struct EnvOverrides {
  bool moe_fp4_force_a16 = false;
  bool use_fp8_gemm = false;
  bool use_fp4_gemm = false;
  static EnvOverrides from_process();
};

struct Selection {
  bool supported = false;
  std::string path;  ///< e.g. "gemm.nvfp4_w4a4", "moe.w4a8_mx", "attention.paged"
  ArchPath arch = ArchPath::kNone;
  std::string arch_detail;              ///< "sm_120a native" / "sm_90a portable mma.sync"
  ActFormat act = ActFormat::kAuto;     ///< activation format the path runs with
  std::string moe_quant_mode;           ///< b12x quant_mode (nvfp4, w4a8_nvfp4, w4a8_mx, w4a16)
  std::string moe_source_format;        ///< modelopt_nvfp4 / fp4_e8m0_k32
  std::string w13_layout;               ///< w13 / w31 as vLLM passes it
  std::vector<std::string> reasons;     ///< every reason b12x cannot run it (empty when supported)
  std::vector<std::string> notes;       ///< fallbacks taken, overrides applied
  std::vector<std::string> auto_order;  ///< automatic backend order with "b12x" in it
  int auto_position = -1;               ///< index of "b12x" in auto_order (-1 when not listed)
  bool b12x_first = false;              ///< an opt-in override put b12x first
  std::string to_json() const;
  /// One line: "gemm.nvfp4_w4a4 (sm_120a native, ...)" or "not supported: r1; r2".
  std::string summary() const;
  /// The reasons joined with "; " ("" when supported): vLLM's is_supported() -> (bool, reason).
  std::string reason() const;
};

/// The policy. Logs the decision at B12X_LOG_LEVEL >= 1 (dispatch trace; >= 3 adds shapes).
Selection select(const LayerDesc& layer, const EnvOverrides& env = EnvOverrides::from_process());

/// Device family served for a capability: kNative (120, 121), kPortable (89, 90), else kNone.
ArchPath arch_path_for(int compute_capability);

const char* layer_kind_name(LayerKind k) noexcept;
const char* weight_format_name(WeightFormat f) noexcept;
const char* act_format_name(ActFormat a) noexcept;
const char* activation_name(Activation a) noexcept;
const char* arch_path_name(ArchPath a) noexcept;

/// Parse "true/1/yes/on" / "false/0/no/off/empty" (case-insensitive); anything else is false
/// and logs a warning naming the variable.
bool env_flag(const char* name);

}  // namespace b12x::selection
