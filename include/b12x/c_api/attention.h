/* b12x C ABI: paged attention (plan -> bind -> run), the KV append op and their CPU references.
 * Semantics: b12x/attention.h. */
#ifndef B12X_C_API_ATTENTION_H_
#define B12X_C_API_ATTENTION_H_

#include "b12x/c_api/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define B12X_ATTENTION_MODE_DECODE 0
#define B12X_ATTENTION_MODE_EXTEND 1
#define B12X_ATTENTION_MODE_VERIFY 2

typedef struct b12x_paged_attention_plan_s* b12x_paged_attention_plan;
typedef struct b12x_paged_attention_binding_s* b12x_paged_attention_binding;

/* Capacities (b12x::attention::PagedCaps). */
typedef struct b12x_paged_caps {
  int32_t device;
  int32_t mode; /* B12X_ATTENTION_MODE_* */
  int32_t q_dtype;
  int32_t kv_dtype;
  int32_t num_q_heads;
  int32_t num_kv_heads;
  int32_t head_dim_qk;
  int32_t head_dim_vo;
  int32_t page_size;
  int32_t max_batch;
  int32_t max_page_table_width;
  int32_t max_total_q;
  int32_t max_splits; /* 0 = automatic, 1 = never split */
  int32_t use_cuda_graph;
} b12x_paged_caps;

/* Capability flags of b12x_attention_paged_plan_create_ex (the caps struct keeps its layout:
 * callers built against an older header pass the same struct). */
/* PagedCaps::kv_prefix_stable (b12x/attention.h): the caller promises that no kernel still
 * running when an attention call launches writes K/V rows below cache_seqlens - q_len; decode /
 * verify plans then copy their first K/V tiles before the PDL wait. */
#define B12X_PAGED_CAPS_KV_PREFIX_STABLE 1u

/* What a plan chose. */
typedef struct b12x_paged_plan_info {
  int64_t scratch_bytes;
  int64_t partial_rows;
  int64_t lse_offset; /* byte offset of an fp32 [Hq, max_total_q] LSE area inside the scratch */
  int32_t tile_rows;
  int32_t tile_kv;
  int32_t split_limit;
  int32_t target_ctas;
  char kernel[96];
} b12x_paged_plan_info;

/* Tensors and options of one call; optional tensors may be NULL. */
typedef struct b12x_paged_args {
  const b12x_tensor* q;
  const b12x_tensor* k_cache;
  const b12x_tensor* v_cache;
  const b12x_tensor* out;
  const b12x_tensor* page_table;
  const b12x_tensor* cache_seqlens;
  const b12x_tensor* cu_seqlens_q;
  const b12x_tensor* k_descale;
  const b12x_tensor* v_descale;
  const b12x_tensor* sinks;
  const b12x_tensor* lse;
  int32_t window_left; /* -1 = off */
  float softmax_scale; /* <= 0: head_dim_qk^-0.5 */
  int32_t num_splits;  /* 0 = automatic */
} b12x_paged_args;

/* Host only; refuses while `stream` is capturing. */
B12X_C_API b12x_status b12x_attention_paged_plan_create(const b12x_paged_caps* caps, void* stream,
                                                        b12x_paged_attention_plan* plan);
/* The same with capability flags (B12X_PAGED_CAPS_*; other bits are rejected). */
B12X_C_API b12x_status b12x_attention_paged_plan_create_ex(const b12x_paged_caps* caps,
                                                           uint32_t flags, void* stream,
                                                           b12x_paged_attention_plan* plan);
B12X_C_API b12x_status b12x_attention_paged_plan_destroy(b12x_paged_attention_plan plan);
B12X_C_API b12x_status b12x_attention_paged_plan_info(b12x_paged_attention_plan plan,
                                                      b12x_paged_plan_info* info);
/* Checks and pointer arithmetic only (no device allocation); capture-safe. */
B12X_C_API b12x_status b12x_attention_paged_bind(b12x_paged_attention_plan plan,
                                                 const b12x_tensor* scratch,
                                                 const b12x_paged_args* args,
                                                 b12x_paged_attention_binding* binding);
B12X_C_API b12x_status b12x_attention_paged_binding_destroy(b12x_paged_attention_binding binding);
/* Launch geometry a binding chose: KV splits (grid z) and row tiles (grid x bound). */
B12X_C_API b12x_status b12x_attention_paged_binding_info(b12x_paged_attention_binding binding,
                                                         int32_t* num_splits,
                                                         int32_t* num_row_tiles);
/* Launch only; capture-safe. */
B12X_C_API b12x_status b12x_attention_paged_run(b12x_paged_attention_binding binding, void* stream);
/* bind + run in one call. */
B12X_C_API b12x_status b12x_attention_paged_forward(b12x_paged_attention_plan plan,
                                                    const b12x_tensor* scratch,
                                                    const b12x_paged_args* args, void* stream);

/* KV append (b12x::attention::append_kv); k_scale/v_scale may be NULL for bf16/fp16 caches. */
B12X_C_API b12x_status b12x_attention_append_kv(const b12x_tensor* k, const b12x_tensor* v,
                                                const b12x_tensor* k_cache,
                                                const b12x_tensor* v_cache,
                                                const b12x_tensor* slot_mapping,
                                                const b12x_tensor* k_scale,
                                                const b12x_tensor* v_scale, void* stream);

/* CPU references (host tensors; out fp64/fp32/bf16/fp16, lse fp64/fp32). */
B12X_C_API b12x_status b12x_ref_paged_attention(const b12x_paged_args* args);
B12X_C_API b12x_status b12x_ref_append_kv(const b12x_tensor* k, const b12x_tensor* v,
                                          const b12x_tensor* k_cache, const b12x_tensor* v_cache,
                                          const b12x_tensor* slot_mapping,
                                          const b12x_tensor* k_scale, const b12x_tensor* v_scale);

#ifdef __cplusplus
}
#endif

#endif /* B12X_C_API_ATTENTION_H_ */
