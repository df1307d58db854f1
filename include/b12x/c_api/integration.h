/* b12x C ABI: integration — safetensors files, checkpoint quantization configs, inspect,
 * quantize, and the backend selection policy.
 *
 * Strings come back through (char* buf, size_t len, size_t* needed): at most len-1 bytes and a
 * NUL are written; *needed receives the full length + 1 (call with buf = NULL, len = 0 to size
 * the buffer). Structured answers are JSON text. */
#ifndef B12X_C_API_INTEGRATION_H_
#define B12X_C_API_INTEGRATION_H_

#include "b12x/c_api/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- safetensors (memory-mapped, validated on open) ------------------------------------------ */
typedef struct b12x_safetensors_s* b12x_safetensors;

#define B12X_SAFETENSORS_MAX_RANK 8

typedef struct b12x_safetensors_tensor {
  const char* name;     /* valid while the file is open */
  const char* st_dtype; /* "BF16", "F8_E4M3", "U8", ... */
  int32_t dtype;        /* B12X_DTYPE_* or -1 when b12x has no such dtype */
  int32_t bits;         /* bits per element */
  int32_t ndim;
  int64_t shape[B12X_SAFETENSORS_MAX_RANK];
  uint64_t offset; /* absolute byte offset in the file */
  uint64_t nbytes;
  const void* data; /* zero-copy pointer into the mapping */
} b12x_safetensors_tensor;

B12X_C_API b12x_status b12x_safetensors_open(const char* path, b12x_safetensors* out);
B12X_C_API b12x_status b12x_safetensors_close(b12x_safetensors f);
B12X_C_API b12x_status b12x_safetensors_num_tensors(b12x_safetensors f, int64_t* count);
B12X_C_API b12x_status b12x_safetensors_tensor_at(b12x_safetensors f, int64_t index,
                                                  b12x_safetensors_tensor* out);
/* *index = -1 when absent. */
B12X_C_API b12x_status b12x_safetensors_find(b12x_safetensors f, const char* name, int64_t* index);
/* {"key": "value", ...} of __metadata__. */
B12X_C_API b12x_status b12x_safetensors_metadata_json(b12x_safetensors f, char* buf, size_t len,
                                                      size_t* needed);
/* Validates an in-memory image; on success describes it as JSON
 * {"tensors": [{"name", "dtype", "shape", "offset", "nbytes"}], "metadata": {...}}. */
B12X_C_API b12x_status b12x_safetensors_parse(const void* data, size_t size, char* buf, size_t len,
                                              size_t* needed);

typedef struct b12x_safetensors_writer_s* b12x_safetensors_writer;
B12X_C_API b12x_status b12x_safetensors_writer_create(b12x_safetensors_writer* out);
B12X_C_API b12x_status b12x_safetensors_writer_destroy(b12x_safetensors_writer w);
/* Copies nbytes from data (nbytes must equal shape x element size). */
B12X_C_API b12x_status b12x_safetensors_writer_add(b12x_safetensors_writer w, const char* name,
                                                   const char* st_dtype, int32_t ndim,
                                                   const int64_t* shape, const void* data,
                                                   uint64_t nbytes);
B12X_C_API b12x_status b12x_safetensors_writer_set_metadata(b12x_safetensors_writer w,
                                                            const char* key, const char* value);
B12X_C_API b12x_status b12x_safetensors_writer_write(b12x_safetensors_writer w, const char* path);

/* ---- checkpoint directories -------------------------------------------------------------------
 */
/* The normalized quantization config of DIR (config.json / hf_quant_config.json), or of
 * json_text when it is not NULL (dir is then only used in messages). */
B12X_C_API b12x_status b12x_quant_config_json(const char* dir, const char* json_text, char* buf,
                                              size_t len, size_t* needed);
/* How layer `prefix` resolves: {"quant_algo", "group_size", ...}. */
B12X_C_API b12x_status b12x_quant_config_resolve(const char* dir, const char* json_text,
                                                 const char* prefix, int32_t is_moe, char* buf,
                                                 size_t len, size_t* needed);
/* Every layer, its format, bytes and b12x path (see b12x::checkpoint::InspectReport).
 * compute_capability 0 answers for SM120. */
B12X_C_API b12x_status b12x_checkpoint_inspect(const char* dir, int32_t compute_capability,
                                               int32_t tp_size, char* buf, size_t len,
                                               size_t* needed);
/* format: nvfp4, mxfp4, mxfp8, fp8, q8_0, iq2_xs, iq2_xxs. The per-layer report comes back as
 * JSON {"layers": [{"name", "quant_algo", "n", "k", "rel_rms_error", "max_abs_error", "bound",
 * "bytes_in", "bytes_out"}], "skipped": [[tensor, why]], "bytes_in", "bytes_out"}. */
B12X_C_API b12x_status b12x_checkpoint_quantize(const char* in_dir, const char* out_dir,
                                                const char* format,
                                                const char* const* layer_patterns,
                                                int32_t num_patterns, float input_amax, char* buf,
                                                size_t len, size_t* needed);
/* Loads dense layer `prefix` and reconstructs it as fp32 [n, k] into out (out_numel >= n*k);
 * out = NULL only reports n and k. */
B12X_C_API b12x_status b12x_checkpoint_dequantize_linear(const char* dir, const char* prefix,
                                                         float* out, int64_t out_numel, int64_t* n,
                                                         int64_t* k);

/* A dense layer as loaded and validated: {"prefix", "quant": {...}, "n", "k", "weight_scale_2",
 * "input_scale", "output_scale", "tensors": {"weight": {"file", "name"}, "weight_scale": ...,
 * "bias": ...}, "selection": {...} (for compute_capability; 0 = SM120)}. */
B12X_C_API b12x_status b12x_checkpoint_load_linear_json(const char* dir, const char* prefix,
                                                        int32_t compute_capability, char* buf,
                                                        size_t len, size_t* needed);

/* ---- backend selection ------------------------------------------------------------------------
 */
#define B12X_LAYER_LINEAR 0
#define B12X_LAYER_MOE 1
#define B12X_LAYER_ATTENTION 2
#define B12X_LAYER_EMBEDDING 3

#define B12X_WEIGHT_BF16 0
#define B12X_WEIGHT_FP16 1
#define B12X_WEIGHT_FP8_TENSOR 2
#define B12X_WEIGHT_FP8_BLOCK 3
#define B12X_WEIGHT_MXFP8 4
#define B12X_WEIGHT_NVFP4 5
#define B12X_WEIGHT_MXFP4 6
#define B12X_WEIGHT_Q8_0 7
#define B12X_WEIGHT_IQ2_XS 8
#define B12X_WEIGHT_IQ2_XXS 9
#define B12X_WEIGHT_EXL3 10
#define B12X_WEIGHT_NF3 11
#define B12X_WEIGHT_INT4 12
#define B12X_WEIGHT_FP8_BLOCK_OTHER 13

#define B12X_ACT_AUTO 0
#define B12X_ACT_BF16 1
#define B12X_ACT_FP8_STATIC 2
#define B12X_ACT_FP8_DYNAMIC 3
#define B12X_ACT_MXFP8 4
#define B12X_ACT_NVFP4 5
#define B12X_ACT_MXFP4 6

#define B12X_ACTIVATION_NONE 0
#define B12X_ACTIVATION_SILU 1
#define B12X_ACTIVATION_SITU 2
#define B12X_ACTIVATION_SWIGLUOAI_UNINTERLEAVE 3
#define B12X_ACTIVATION_SWIGLUOAI 4
#define B12X_ACTIVATION_RELU2 5
#define B12X_ACTIVATION_GELU 6
#define B12X_ACTIVATION_OTHER 7

/* Mirrors b12x::selection::LayerDesc. Fill with b12x_layer_desc_init first. */
typedef struct b12x_layer_desc {
  int32_t struct_size; /* sizeof(b12x_layer_desc) */
  int32_t kind, weight_format, act_format, io_dtype;
  int64_t n, k;
  int64_t hidden, intermediate_per_rank, num_experts, topk;
  int32_t activation;
  float situ_beta, situ_linear_beta;
  int32_t apply_router_weight_on_input, has_expert_map, use_all2all, use_eplb;
  int64_t num_q_heads, num_kv_heads, head_dim, page_size;
  float softmax_scale;
  int32_t alibi, softcap, fused_output_quant, decoder_self_attention, context_parallel;
  int32_t tp_size, ep_size, has_bias, has_lora, weight_block_128, static_input_scale;
  int32_t compute_capability, check_compiled_archs;
  /* -1: read the environment (B12X_* then VLLM_*); 0 / 1: explicit. */
  int32_t moe_fp4_force_a16, use_fp8_gemm, use_fp4_gemm;
  const char* name; /* may be NULL */
} b12x_layer_desc;

B12X_C_API void b12x_layer_desc_init(b12x_layer_desc* d);
/* *supported = 1 when a b12x path runs the layer; the full answer (path, arch, reasons, notes,
 * auto_order, ...) as JSON. */
B12X_C_API b12x_status b12x_select(const b12x_layer_desc* d, int32_t* supported, char* buf,
                                   size_t len, size_t* needed);

/* ---- a MoE expert stack of a checkpoint (b12x::checkpoint::load_moe_experts) ------------------
 * Loads and stacks the experts under `prefix` ("model.layers.3.mlp.experts") in host memory owned
 * by the handle, in the fused MoE's source layout (FC1 = [gate; up], w13_layout w31), after asking
 * the selection policy for the path (B12X_ERROR_UNSUPPORTED with every reason when none).
 * activation: B12X_ACTIVATION_*; act_format: B12X_ACT_* (AUTO = the checkpoint's);
 * params_dtype: B12X_DTYPE_BF16 / FP16; compute_capability 0 answers for SM120. */
typedef struct b12x_checkpoint_moe_s* b12x_checkpoint_moe;
B12X_C_API b12x_status b12x_checkpoint_load_moe(const char* dir, const char* prefix, int64_t topk,
                                                int32_t compute_capability, int32_t activation,
                                                int32_t act_format, int32_t params_dtype,
                                                b12x_checkpoint_moe* out);
B12X_C_API b12x_status b12x_checkpoint_moe_destroy(b12x_checkpoint_moe m);
/* {"prefix", "quant": {...}, "selection": {...}, "num_experts", "hidden", "intermediate",
 * "gated", "plan": {"quant_mode", "source_format", "activation", "params_dtype", "w13_layout",
 * "ggml_w1_dtype", "ggml_w2_dtype"}} (names as b12x_moe_* and b12x.moe.fused_moe take them). */
B12X_C_API b12x_status b12x_checkpoint_moe_json(b12x_checkpoint_moe m, char* buf, size_t len,
                                                size_t* needed);
/* Host view of one source tensor, valid while the handle lives: which = "w1", "w1_scale",
 * "w1_global_scale", "a1_gscale", "w2", "w2_scale", "w2_global_scale", "a2_gscale";
 * out->data = NULL when the layer has none. */
B12X_C_API b12x_status b12x_checkpoint_moe_tensor(b12x_checkpoint_moe m, const char* which,
                                                  b12x_tensor* out);

/* ---- warm-up and kernel resolution (b12x/warmup.h, b12x/runtime.h) ---------------------------
 * layers_json: a JSON array of layer descriptions; every field but "kind" has the default shown
 * or is required (R):
 *   {"kind": "linear", "name": "", "device": 0, "format": R ("nvfp4_w4a16", ... as
 *    b12x_linear_format_name), "in_features": R, "out_features": R, "act_dtype": "bf16",
 *    "out_dtype": "bf16", "expected_m": 0, "quantize_from": "bf16"}
 *   {"kind": "moe", "name": "", "device": 0, "quant_mode": R, "source_format": R,
 *    "activation": "silu", "params_dtype": "bf16", "num_experts": R, "hidden_size": R,
 *    "intermediate_size": R, "w13_layout": "w31", "ggml_w1_dtype": "q8_0",
 *    "ggml_w2_dtype": "q8_0", "num_topk": R, "apply_router_weight_on_input": false}
 *   {"kind": "attention", "name": "", "device": 0, "mode": "decode", "q_dtype": "bf16",
 *    "kv_dtype": "bf16", "num_q_heads": R, "num_kv_heads": R, "head_dim_qk": R,
 *    "head_dim_vo": head_dim_qk, "page_size": R, "max_batch": 1, "max_page_table_width": R,
 *    "max_total_q": max_batch, "max_splits": 0}
 *   {"kind": "embedding", "name": "", "device": 0, "vocab": R, "dim": R, "id_dtype": "int32",
 *    "out_dtype": "bf16"}
 * Weights are constant dummies packed/prepared inside (the kernels do not depend on values); the
 * call allocates, synchronises `stream` and frees before returning, so it is refused while
 * `stream` is being captured (B12X_ERROR_CAPTURE_ACTIVE) and, after a freeze, fails with
 * B12X_ERROR_FROZEN when a layer needs a signature that was never resolved.
 * Unknown keys are an error. The report comes back as JSON: {"planned", "unique", "launched",
 * "already_warm", "seconds", "entries": [{"layer", "op", "tokens", "signature", "launched",
 * "launch_ms"}]}. */
B12X_C_API b12x_status b12x_warmup(const char* layers_json, const int64_t* token_counts,
                                   int32_t num_token_counts, void* stream, char* buf, size_t len,
                                   size_t* needed);
/* Every resolved kernel signature: [{"device", "op", "signature", "shape", "plans"}]. */
B12X_C_API b12x_status b12x_resolved_kernels_json(char* buf, size_t len, size_t* needed);
B12X_C_API b12x_status b12x_clear_resolved_kernels(void);

#ifdef __cplusplus
}
#endif

#endif /* B12X_C_API_INTEGRATION_H_ */
