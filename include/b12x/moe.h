// b12x: fused tensor-parallel MoE (one rank's local experts).
//
//   output[m, :] = sum_k w[m,k] * FC2_e(act(FC1_e(x[m, :])))   e = topk_ids[m, k] in [0, E)
//
// Lifecycle: plan_weights (tensor-free) -> prepare_weights (one-time, b12x-owned device storage)
// -> plan(Caps) (host; sizes ONE uint8 scratch) -> bind (pointer checks only) -> run (launches
// only; capture-safe; routes are consumed on the device, so a replay with new ids/weights in the
// same buffers is correct).
//
// Numerics (shared by the GPU engine and the CPU reference, see reference/moe.h):
//  - FC1 input per route: A16 modes use x as is; nvfp4 quantises x with the expert's static
//    a1_gscale (formats/block.h NVFP4 rule); w4a8_* quantise to MXFP8 (pow2-ceil E8M0/32);
//    mxfp4 to MXFP4 (ceil rule, E8M0/32). All-zero MX blocks take scale byte 127.
//  - FC1 / FC2 accumulate sum(q_a * q_w) in fp32 and multiply by a per-expert alpha:
//    nvfp4: w_global_scale / a_gscale; w4a8_nvfp4 and w4a16 on NVFP4: w_global_scale; MX and
//    GGML weights: 1.
//  - Gated activations take gate/up from FC1 (w13 = [up; gate], w31 = [gate; up]: the b12x
//    naming, b12x-contract §2.6); the activation is computed in fp32 and rounded to BF16 (to the
//    params dtype for the A16 modes, i.e. FP16 for fp16 inputs) before FC2 quantisation.
//  - apply_router_weight_on_input (A16 modes only): FC1's output is multiplied by the route
//    weight before the activation and the combine uses weight 1 (b12x W4A16 semantics).
//  - Routes with ids outside [0, E) contribute nothing; a token without valid routes gets 0.
//  - The top-k combine sums each route's fp32 FC2 result in fixed k order, so the output is
//    bitwise reproducible run to run and under graph replay.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "b12x/types.h"

namespace b12x::moe {

enum class QuantMode : int32_t {
  kNvfp4 = 0,      ///< W4A4: NVFP4 weights, NVFP4 activations with per-expert static scales
  kW4A8Nvfp4 = 1,  ///< NVFP4 weights, MXFP8 activations quantised inside
  kW4A8Mx = 2,     ///< MXFP4 weights (fp4_e8m0_k32), MXFP8 activations quantised inside
  kMxfp4 = 3,      ///< W4A4 MXFP4: MXFP4 weights and activations quantised inside
  kW4A16 = 4,      ///< NVFP4 or MXFP4 weights, BF16/FP16 activations
  kGgmlA16 = 5,    ///< GGML Q8_0 / IQ2_XXS / IQ2_XS weights, BF16/FP16 activations
};
enum class SourceFormat : int32_t {
  kModeloptNvfp4 = 0,  ///< packed E2M1 + swizzled UE4M3/16 scales + per-expert fp32 globals
  kFp4E8M0K32 = 1,     ///< packed E2M1 + plain [E, rows, K/32] E8M0 scales
  kGgml = 2,           ///< GGML blocks (dtype q8_0 / iq2_xxs / iq2_xs of the weight tensors)
};
enum class Activation : int32_t {
  kSilu = 0,       ///< silu(g) * u, optional limit (g <= L, |u| <= L)
  kSitu = 1,       ///< [4 tanh(g/4) sigmoid(g)] * [25 tanh(u/25)]
  kSwigluOai = 2,  ///< swigluoai_uninterleave: g <= L, |u| <= L, g sigmoid(alpha g) (u + beta)
  kRelu2 = 3,      ///< non-gated relu(h)^2; FC1 has I rows
};
enum class W13Layout : int32_t {
  kW13 = 0,  ///< FC1 rows [up; gate] (b12x "w13", alias "up_gate")
  kW31 = 1,  ///< FC1 rows [gate; up] (b12x "w31", alias "gate_up"; vLLM's fused order)
};

const char* quant_mode_name(QuantMode m) noexcept;
const char* activation_name(Activation a) noexcept;
const char* source_format_name(SourceFormat f) noexcept;
/// Parse "nvfp4", "w4a8_nvfp4", "w4a8_mx", "mxfp4", "w4a16", "ggml_a16" (throws on others).
QuantMode quant_mode_from_name(const std::string& s);
/// "silu", "situ", "swigluoai_uninterleave" (alias "swiglu_oai"), "relu2" (alias "relu2_no_mul").
Activation activation_from_name(const std::string& s);
/// "modelopt_nvfp4", "fp4_e8m0_k32", "ggml".
SourceFormat source_format_from_name(const std::string& s);
/// "w13"/"up_gate", "w31"/"gate_up".
W13Layout w13_layout_from_name(const std::string& s);

/// @brief Arguments of plan_weights.
struct WeightsPlanArgs {
  QuantMode quant_mode = QuantMode::kNvfp4;
  SourceFormat source_format = SourceFormat::kModeloptNvfp4;
  Activation activation = Activation::kSilu;
  DType params_dtype = DType::kBF16;
  int64_t num_experts = 0;
  int64_t hidden_size = 0;        ///< H
  int64_t intermediate_size = 0;  ///< I per rank (FC1 has 2I rows when gated, I for relu2)
  W13Layout w13_layout = W13Layout::kW13;
  DType ggml_w1_dtype = DType::kQ8_0;  ///< GGML only: block type of w1
  DType ggml_w2_dtype = DType::kQ8_0;  ///< GGML only: block type of w2
  bool has_expert_bias = false;        ///< rejected: b12x MoE has no expert biases
  int64_t ep_size = 1;                 ///< rejected unless 1: tensor parallel only
  bool has_expert_map = false;         ///< rejected
  bool has_lora = false;               ///< rejected
};

/// @brief A validated, tensor-free weight plan (what prepare_weights will build).
struct WeightsPlan {
  WeightsPlanArgs args;
  bool gated = true;
  int64_t w1_rows = 0;  ///< 2I or I
  /// True: prepare_weights copies everything into b12x-owned storage, so the caller may free
  /// (or empty) the source tensors afterwards. Always true in this implementation.
  bool discards_source_parameters = true;
  /// Device bytes of the prepared storage. FP4 codes and block scales are stored in 32-row
  /// chunk tiles, GGML blocks per row (fixed by args.source_format).
  int64_t prepared_bytes = 0;
  std::string describe() const;
};

/// Validates the combination (precise reasons in the message) and returns the plan.
WeightsPlan plan_weights(const WeightsPlanArgs& args);
/// Same checks without throwing: empty string when supported, else the reason.
std::string weights_support_reason(const WeightsPlanArgs& args);

/// @brief Source tensors (device or host memory of the prepare device). Shapes:
///  modelopt_nvfp4: w1 fp4[E, w1_rows, H] (uint8 [E, w1_rows, H/2] viewed as fp4),
///    w1_scale ue4m3/fp8_e4m3/uint8 [E, pad128(w1_rows), pad4(H/16)] in the 128x4 swizzle,
///    w1_global_scale fp32 [E] (or [E,1]/scalar), a1_gscale fp32 [E] (nvfp4 only), and the
///    same for w2 [E, H, I] with scales [E, pad128(H), pad4(I/16)].
///  fp4_e8m0_k32: w1 fp4[E, w1_rows, H], w1_scale ue8m0/uint8 [E, w1_rows, H/32]; globals absent.
///  ggml: w1 q8_0/iq2_xxs/iq2_xs [E, w1_rows, H], w2 [E, H, I]; no scales.
struct SourceWeights {
  TensorRef w1, w1_scale, w1_global_scale, a1_gscale;
  TensorRef w2, w2_scale, w2_global_scale, a2_gscale;
};

struct PreparedStorage;  // device storage (opaque)

/// @brief Prepared experts: owned device storage in the kernels' layout. Re-preparing new weights
/// of the same plan into an existing object keeps every device pointer (graphs stay valid).
class PreparedExperts {
 public:
  PreparedExperts();
  ~PreparedExperts();
  PreparedExperts(const PreparedExperts&) = delete;
  PreparedExperts& operator=(const PreparedExperts&) = delete;
  bool empty() const;
  const WeightsPlan& plan() const;
  int device() const;
  int64_t num_experts() const { return plan().args.num_experts; }
  int64_t hidden_size() const { return plan().args.hidden_size; }
  int64_t intermediate_size() const { return plan().args.intermediate_size; }
  /// Base address of the prepared storage (stable across re-preparation).
  const void* storage_ptr() const;
  const PreparedStorage& storage() const;

 private:
  friend void prepare_weights(const WeightsPlan&, const SourceWeights&, PreparedExperts&, Stream);
  std::unique_ptr<PreparedStorage> s_;
};

/// Builds (or refreshes in place) the prepared storage on `stream`'s device; never mutates the
/// sources. Host-only step: refuses to run during stream capture. Synchronises `stream`.
void prepare_weights(const WeightsPlan& plan, const SourceWeights& src, PreparedExperts& out,
                     Stream stream = nullptr);

/// @brief Measurement knobs of the FP4 decode stream (docs/moe.md lists each one with the rounds
/// that set its default). plan() reads them from the B12X_MOE_* variable named beside each field;
/// unset means the default below (the measured best), a value outside the supported ones is
/// logged (B12X_LOG_LEVEL >= 1) and replaced by the default, and a knob set for a plan that does
/// not use it (another regime or activation mode) is logged as ignored.
struct DecodeKnobs {
  int q_load = 1;      ///< B12X_MOE_Q_LOAD 0|1: [Q]'s load order (1: ids + x row together)
  int q_fast = 1;      ///< B12X_MOE_Q_FAST 0|1: [Q] with the 1 / a1gs table
  int q_early = 0;     ///< B12X_MOE_Q_EARLY 0|1|2: [Q]'s trigger (after / before its wait, none)
  int q_lean = 1;      ///< B12X_MOE_Q_LEAN 0|1: the lean NVFP4 [Q] (decode_q_lean) where it applies
  int fc1_scal0 = 1;   ///< B12X_MOE_FC1_SCAL0 0|1: FC1's first-tile scalars loaded before its wait
  int fc1_rdy = 0;     ///< B12X_MOE_FC1_RDY 0|1: FC1 reads [Q]'s rows on per-route ready words
  int fc1_slot = 0;    ///< B12X_MOE_FC1_SLOT 0|1: the last-warp FC1 with constant ring slots
  int fc2_slot = 0;    ///< B12X_MOE_FC2_SLOT 0|1: the 3-stage 32-row FC2 with constant ring slots
  int fc1_groups = 0;  ///< B12X_MOE_FC1_GROUPS >= 1: FC1 tile groups (0: one wave)
  int fc1_kg = 0;      ///< B12X_MOE_FC1_KG 1|2: FC1 warp groups (0: rule)
  int fc1_fine = 1;    ///< B12X_MOE_FC1_FINE 0|1|2: last-warp FC1 long tiles, ~2 / 2.7 per CTA
  int fc1_wide = 2;    ///< B12X_MOE_FC1_WIDE 0..3: the 12-warp FC1 (0 never, 1 session 4, 2 chain
                       ///< rule, 3 wherever it runs)
  int fc1_bal = 2;     ///< B12X_MOE_FC1_BAL 0|1|2: balanced FC1 ranges (never / wherever / rule)
  int fc1_bal1 = 2;    ///< B12X_MOE_FC1_BAL1 0|1|2: one balanced FC1 group (never / always / A16)
  int a16_bal = 1;     ///< B12X_MOE_A16_BAL 0|1: balanced FC1 in A16 modes
  int a16_gate = -1;   ///< B12X_MOE_A16_GATE 0..3: A16 gate kernel (-1: copy gate <= 128 routes)
  int a16_pdl = 1;     ///< B12X_MOE_A16_PDL 0|1: programmatic edge of a gateless A16 FC1
  int fc2_split = 0;   ///< B12X_MOE_FC2_SPLIT 1..4: FC2 split CTAs per row block (0: rule)
  int fc2_warps = 0;   ///< B12X_MOE_FC2_WARPS 4|8: FC2 CTA shape (0: rule)
  int fc2_stages = 0;  ///< B12X_MOE_FC2_STAGES 2|3: the 8-warp FC2's ring, 16- or 32-row (0: rule)
  int fc2_deep = 1;    ///< B12X_MOE_FC2_DEEP 0|1: the deep 5-stage FC2 ring where it applies
  int fc2_bal = 1;     ///< B12X_MOE_FC2_BAL 0|1: FC2 split CTAs take equal chunk ranges
  int fc2_kil = -1;    ///< B12X_MOE_FC2_KIL 0|1: FC2 warps take every kW-th chunk (-1: rule)
  int fc2_rows = 0;    ///< B12X_MOE_FC2_ROWS 16|32: output rows per FC2 CTA (0: rule, 2-8 tokens)
  int fc2_dsmem = 1;   ///< B12X_MOE_FC2_CLUSTER 0|1|2: FC2 split 2 (1) / any (2) as a cluster
};

/// @brief Runtime capacities.
struct Caps {
  int64_t max_tokens = 0;
  int64_t num_topk = 0;
  int device = 0;
  const WeightsPlan* weight_plan = nullptr;  ///< required; copied into the plan
  bool apply_router_weight_on_input = false;
  float swiglu_limit = std::numeric_limits<float>::quiet_NaN();  ///< NaN = none
  float swiglu_alpha = std::numeric_limits<float>::quiet_NaN();  ///< NaN = 1.702 (oai only)
  float swiglu_beta = std::numeric_limits<float>::quiet_NaN();   ///< NaN = 1.0 (oai only)
  /// The combine is always bitwise reproducible; kept for API parity with b12x.
  bool deterministic_output = true;
  /// Regime: -1 auto (decode when max_tokens*topk <= 128), 0 force grouped, 1 force decode.
  int regime = -1;
};

/// @brief Host-side execution description (the regime identity and tile choice).
struct ExecutionPlan {
  std::string implementation;  ///< "b12x_moe_mma_sync"
  std::string execution;       ///< "decode_tn8" | "grouped_tn64"
  int tile_tokens = 0;
  int tile_rows = 0;
};

class Plan {
 public:
  Caps caps;
  WeightsPlan weights;
  ExecutionPlan exec;
  int64_t scratch_bytes = 0;
  // scratch layout (byte offsets, 256-aligned)
  int64_t off_counts = 0, off_tiles = 0, off_slot_route = 0, off_inter = 0, off_route_out = 0;
  int64_t off_slot_expert = 0, off_xq = 0;  ///< off_xq < 0: no per-slot quantised input buffer
  int64_t off_fc1_bal = -1;  ///< decode stream: balanced FC1's counters + partials (< 0: none)
  int64_t off_fc1_rdy = -1;  ///< decode stream: per-route ready words (DecodeKnobs::fc1_rdy)
  int64_t max_routes = 0, max_tiles = 0;
  int act_kind = 0;
  float limit = 0, oai_alpha = 1.702f, oai_beta = 1.0f;
  bool has_limit = false;
  /// Decode-stream measurement knobs, read from the environment by plan() (so that one process
  /// can time several variants; run() reads no environment).
  DecodeKnobs knobs;
  /// Device facts the decode stream's run needs, read by plan() (run reads no device info):
  /// the SMs, the compute capability's major, and the 32-row FC2 CTAs with 3 / 2 ring stages
  /// that fit one SM (0 where plan saw no device).
  int sm_count = 0, cc_major = 0, fc2_rows32_ctas = 0, fc2_rows32_ctas2 = 0;
  /// Bit s set: a thread-block cluster of s split CTAs of every 32-row FC2 instance fits the
  /// device (cudaOccupancyMaxActiveClusters, asked by plan for the splits the knobs allow; 0:
  /// none fits or plan saw no device). run launches a cluster only where its bit is set.
  int fc2_cluster_fit = 0;
};

/// Validates caps against the weights plan and device and sizes the scratch. Host only.
Plan plan(const Caps& caps);
/// The regime a call with `num_tokens` tokens would use (host only, no allocation).
ExecutionPlan plan_execution(int64_t num_tokens, const Caps& caps);

struct Binding {
  const Plan* plan = nullptr;
  const PreparedExperts* experts = nullptr;
  TensorRef scratch, a, topk_weights, topk_ids, output;
  int64_t num_tokens = 0;
};

/// Checks shapes/dtypes/devices against the plan; pointer arithmetic only.
Binding bind(const Plan& plan, const TensorRef& scratch, const TensorRef& a,
             const PreparedExperts& experts, const TensorRef& topk_weights,
             const TensorRef& topk_ids, const TensorRef& output);
/// Launches routing, FC1(+activation), FC2 and the combine. No allocation, no sync.
void run(const Binding& binding, Stream stream);

/// True when `device` can run this op with this build.
bool is_supported(int device = 0);

}  // namespace b12x::moe
