/* b12x C ABI: moe (fused tensor-parallel MoE; see b12x/moe.h for semantics). */
#ifndef B12X_C_API_MOE_H_
#define B12X_C_API_MOE_H_

#include "b12x/c_api/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* quant_mode */
#define B12X_MOE_NVFP4 0
#define B12X_MOE_W4A8_NVFP4 1
#define B12X_MOE_W4A8_MX 2
#define B12X_MOE_MXFP4 3
#define B12X_MOE_W4A16 4
#define B12X_MOE_GGML_A16 5
/* source_format */
#define B12X_MOE_SRC_MODELOPT_NVFP4 0
#define B12X_MOE_SRC_FP4_E8M0_K32 1
#define B12X_MOE_SRC_GGML 2
/* activation */
#define B12X_MOE_ACT_SILU 0
#define B12X_MOE_ACT_SITU 1
#define B12X_MOE_ACT_SWIGLUOAI_UNINTERLEAVE 2
#define B12X_MOE_ACT_RELU2 3
/* w13_layout: W13 = FC1 rows [up; gate], W31 = [gate; up] (b12x naming) */
#define B12X_MOE_LAYOUT_W13 0
#define B12X_MOE_LAYOUT_W31 1

typedef struct b12x_moe_weights_plan_desc {
  int32_t quant_mode;
  int32_t source_format;
  int32_t activation;
  int32_t params_dtype; /* B12X_DTYPE_BF16 / B12X_DTYPE_FP16 */
  int64_t num_experts;
  int64_t hidden_size;
  int64_t intermediate_size;
  int32_t w13_layout;
  int32_t ggml_w1_dtype; /* GGML only: B12X_DTYPE_Q8_0 / IQ2_XXS / IQ2_XS */
  int32_t ggml_w2_dtype;
  int32_t has_expert_bias; /* rejected */
  int32_t has_expert_map;  /* rejected */
  int32_t has_lora;        /* rejected */
  int64_t ep_size;         /* must be 1 */
} b12x_moe_weights_plan_desc;

typedef struct b12x_moe_caps {
  int64_t max_tokens;
  int64_t num_topk;
  int32_t device;
  int32_t apply_router_weight_on_input;
  float swiglu_limit; /* NaN = none */
  float swiglu_alpha; /* NaN = default 1.702 (swigluoai only) */
  float swiglu_beta;  /* NaN = default 1.0 (swigluoai only) */
  int32_t deterministic_output;
  int32_t regime; /* -1 auto, 0 grouped, 1 decode */
} b12x_moe_caps;

typedef struct b12x_moe_weights_s* b12x_moe_weights;
typedef struct b12x_moe_plan_s* b12x_moe_plan;

/* Validates the weight plan; writes the prepared storage bytes and whether sources may be freed
 * after preparation (either pointer may be NULL). */
B12X_C_API b12x_status b12x_moe_plan_weights(const b12x_moe_weights_plan_desc* desc,
                                             int64_t* prepared_bytes,
                                             int32_t* discards_source_parameters);
/* Prepares (or, when *weights is non-NULL and was prepared for the same plan, refreshes in place
 * keeping its device pointers) the experts from source tensors on the current device. Optional
 * tensors may be NULL. Synchronises stream; refused during capture. */
B12X_C_API b12x_status b12x_moe_prepare_weights(
    const b12x_moe_weights_plan_desc* desc, const b12x_tensor* w1, const b12x_tensor* w1_scale,
    const b12x_tensor* w1_global_scale, const b12x_tensor* a1_gscale, const b12x_tensor* w2,
    const b12x_tensor* w2_scale, const b12x_tensor* w2_global_scale, const b12x_tensor* a2_gscale,
    void* stream, b12x_moe_weights* weights);
B12X_C_API b12x_status b12x_moe_weights_destroy(b12x_moe_weights weights);
/* Base device address of the prepared storage (stable across refreshes). */
B12X_C_API b12x_status b12x_moe_weights_storage(b12x_moe_weights weights, uint64_t* ptr,
                                                int64_t* bytes);

B12X_C_API b12x_status b12x_moe_plan_create(const b12x_moe_weights_plan_desc* desc,
                                            const b12x_moe_caps* caps, b12x_moe_plan* plan);
B12X_C_API b12x_status b12x_moe_plan_destroy(b12x_moe_plan plan);
B12X_C_API b12x_status b12x_moe_plan_scratch_bytes(b12x_moe_plan plan, int64_t* bytes);
/* Host-only regime query: implementation and execution names (NUL-terminated, truncated). */
B12X_C_API b12x_status b12x_moe_plan_execution(const b12x_moe_weights_plan_desc* desc,
                                               const b12x_moe_caps* caps, int64_t num_tokens,
                                               char* implementation, size_t implementation_len,
                                               char* execution, size_t execution_len);
/* Validates the call (bind) without launching. */
B12X_C_API b12x_status b12x_moe_bind(b12x_moe_plan plan, const b12x_tensor* scratch,
                                     const b12x_tensor* a, b12x_moe_weights weights,
                                     const b12x_tensor* topk_weights, const b12x_tensor* topk_ids,
                                     const b12x_tensor* output);
/* bind + run: launches only (no allocation, no sync), capture-safe. */
B12X_C_API b12x_status b12x_moe_run(b12x_moe_plan plan, const b12x_tensor* scratch,
                                    const b12x_tensor* a, b12x_moe_weights weights,
                                    const b12x_tensor* topk_weights, const b12x_tensor* topk_ids,
                                    const b12x_tensor* output, void* stream);
B12X_C_API int32_t b12x_moe_is_supported(int32_t device);

/* CPU reference (host tensors; source-format weights as for prepare). output bf16/fp16/fp32. */
B12X_C_API b12x_status b12x_ref_moe(const b12x_moe_weights_plan_desc* desc,
                                    const b12x_moe_caps* caps, const b12x_tensor* a,
                                    const b12x_tensor* topk_ids, const b12x_tensor* topk_weights,
                                    const b12x_tensor* w1, const b12x_tensor* w1_scale,
                                    const b12x_tensor* w1_global_scale,
                                    const b12x_tensor* a1_gscale, const b12x_tensor* w2,
                                    const b12x_tensor* w2_scale, const b12x_tensor* w2_global_scale,
                                    const b12x_tensor* a2_gscale, const b12x_tensor* output);

#ifdef __cplusplus
}
#endif

#endif /* B12X_C_API_MOE_H_ */
