/* b12x C ABI: gemm (linear layers y = alpha * x . W^T + bias for every quantized weight format).
 *
 * Lifecycle: b12x_linear_weight_pack (before capture; b12x owns the packed copy) ->
 * b12x_linear_plan_create (host only) -> b12x_linear_run (bind + launch, capture-safe) or the
 * one-shot b12x_linear (plans and allocates its scratch on first use of a shape, so warm it up
 * before capturing). See b12x/gemm.h for the formats and the tensor layouts. */
#ifndef B12X_C_API_GEMM_H_
#define B12X_C_API_GEMM_H_

#include "b12x/c_api/core.h"

/* Linear formats: identical values to b12x::gemm::LinearFormat. */
#define B12X_LINEAR_FP8_TENSOR 0
#define B12X_LINEAR_FP8_BLOCK 1
#define B12X_LINEAR_MXFP8 2
#define B12X_LINEAR_NVFP4 3
#define B12X_LINEAR_NVFP4_W4A16 4
#define B12X_LINEAR_MXFP4 5
#define B12X_LINEAR_MXFP4_W4A8 6
#define B12X_LINEAR_MXFP4_W4A16 7
#define B12X_LINEAR_IQ2_XXS 8
#define B12X_LINEAR_IQ2_XS 9
#define B12X_LINEAR_Q8_0 10

typedef struct b12x_linear_weight_s* b12x_linear_weight;
typedef struct b12x_linear_plan_s* b12x_linear_plan;

/* Checkpoint-layout weight tensors (host or device); see b12x::gemm::WeightSource. */
typedef struct b12x_linear_weight_source {
  int32_t format;
  int32_t scale_swizzled; /* weight_scale given in the 128x4 layout */
  const b12x_tensor* weight;
  const b12x_tensor* weight_scale; /* NULL when the format has none */
  const b12x_tensor* output_scale; /* fp8_tensor: fp32[1] */
  float global_scale;              /* nvfp4_w4a16: weight_scale_2 (1 otherwise) */
  int64_t in_features;             /* 0 = from the weight */
} b12x_linear_weight_source;

typedef struct b12x_linear_caps {
  int32_t device;
  int32_t format;
  int64_t max_tokens;
  int64_t in_features;
  int64_t out_features;
  int32_t act_dtype;
  int32_t out_dtype;
  int64_t expected_m; /* 0 = unknown */
} b12x_linear_caps;

B12X_C_API const char* b12x_linear_format_name(int32_t format);
B12X_C_API b12x_status b12x_linear_weight_pack(const b12x_linear_weight_source* src, int32_t device,
                                               void* stream, b12x_linear_weight* out);
/* Rewrites the packed storage in place (same format and shape; pointers stay stable). */
B12X_C_API b12x_status b12x_linear_weight_refresh(b12x_linear_weight w,
                                                  const b12x_linear_weight_source* src,
                                                  void* stream);
B12X_C_API b12x_status b12x_linear_weight_destroy(b12x_linear_weight w);
B12X_C_API b12x_status b12x_linear_weight_info(b12x_linear_weight w, int32_t* format,
                                               int32_t* device, int64_t* out_features,
                                               int64_t* in_features, int64_t* padded_in_features,
                                               int64_t* bytes);
/* Device pointer and size of the packed values (stable across refresh). */
B12X_C_API b12x_status b12x_linear_weight_values(b12x_linear_weight w, void** ptr, int64_t* bytes);

B12X_C_API b12x_status b12x_linear_plan_create(const b12x_linear_caps* caps, b12x_linear_plan* out);
B12X_C_API b12x_status b12x_linear_plan_scratch_bytes(b12x_linear_plan plan, int64_t* bytes);
B12X_C_API b12x_status b12x_linear_plan_destroy(b12x_linear_plan plan);
/* Bind (checks only) and launch. x_scale, bias, alpha may be NULL. */
B12X_C_API b12x_status b12x_linear_run(b12x_linear_plan plan, const b12x_tensor* scratch,
                                       const b12x_tensor* x, const b12x_tensor* x_scale,
                                       b12x_linear_weight w, const b12x_tensor* out,
                                       const b12x_tensor* bias, const b12x_tensor* alpha,
                                       void* stream);
/* One-shot (cached plan and scratch per shape). */
B12X_C_API b12x_status b12x_linear(b12x_linear_weight w, const b12x_tensor* x,
                                   const b12x_tensor* x_scale, const b12x_tensor* out,
                                   const b12x_tensor* bias, const b12x_tensor* alpha, void* stream,
                                   int64_t expected_m);

/* CPU reference (host tensors): out fp64/fp32 [M, N]. */
B12X_C_API b12x_status b12x_ref_linear(const b12x_linear_weight_source* w, const b12x_tensor* x,
                                       const b12x_tensor* x_scale, double alpha,
                                       const b12x_tensor* bias, const b12x_tensor* out);
/* The dequantized weight [N, K] fp64 (host) the reference uses. */
B12X_C_API b12x_status b12x_ref_linear_dequantize_weight(const b12x_linear_weight_source* w,
                                                         const b12x_tensor* out);

#endif /* B12X_C_API_GEMM_H_ */
