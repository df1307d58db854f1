/* b12x C ABI: Q8_0 embedding lookup (see b12x/embedding.h).
 *
 * plan_create (host only) -> bind (pointer checks; the binding is kept in the plan handle) ->
 * run (launch only, capture-safe) -> status / check (synchronise the stream, read the device
 * status flags of the last run). Out-of-range ids produce zero rows and a status error;
 * b12x_embedding_check and the one-shot b12x_embedding_q8_0 return B12X_ERROR_INVALID_ARGUMENT
 * with a message naming the first bad id and the vocab. */
#ifndef B12X_C_API_EMBEDDING_H_
#define B12X_C_API_EMBEDDING_H_

#include "b12x/c_api/core.h"

typedef struct b12x_embedding_caps {
  int64_t vocab;
  int64_t dim; /* multiple of 32 */
  int64_t max_tokens;
  int32_t id_dtype;  /* B12X_DTYPE_INT32 / INT64 */
  int32_t out_dtype; /* B12X_DTYPE_BF16 / FP16 */
  int32_t device;
} b12x_embedding_caps;

typedef struct b12x_embedding_plan_s* b12x_embedding_plan;

B12X_C_API b12x_status b12x_embedding_plan_create(const b12x_embedding_caps* caps,
                                                  b12x_embedding_plan* plan);
B12X_C_API b12x_status b12x_embedding_plan_destroy(b12x_embedding_plan plan);
B12X_C_API b12x_status b12x_embedding_scratch_bytes(b12x_embedding_plan plan, int64_t* bytes);
/* weight q8_0 [vocab, dim] (or uint8 [vocab, dim/32*34]); ids [T]; out [T, dim]; scratch uint8
 * of at least scratch_bytes, 16-byte aligned. */
B12X_C_API b12x_status b12x_embedding_bind(b12x_embedding_plan plan, const b12x_tensor* scratch,
                                           const b12x_tensor* weight, const b12x_tensor* ids,
                                           const b12x_tensor* out);
B12X_C_API b12x_status b12x_embedding_run(b12x_embedding_plan plan, void* stream);
/* Synchronises stream; any output pointer may be NULL. */
B12X_C_API b12x_status b12x_embedding_status(b12x_embedding_plan plan, void* stream,
                                             int64_t* bad_tokens, int64_t* first_bad_token,
                                             int64_t* first_bad_id);
B12X_C_API b12x_status b12x_embedding_check(b12x_embedding_plan plan, void* stream);
/* One-shot (synchronises; not capture-safe). */
B12X_C_API b12x_status b12x_embedding_q8_0(const b12x_tensor* weight, const b12x_tensor* ids,
                                           const b12x_tensor* out, void* stream);
/* CPU reference on host tensors; reports out-of-range ids through the outputs (may be NULL). */
B12X_C_API b12x_status b12x_ref_embedding_q8_0(const b12x_tensor* weight, const b12x_tensor* ids,
                                               const b12x_tensor* out, int64_t* bad_tokens,
                                               int64_t* first_bad_token, int64_t* first_bad_id);

#endif /* B12X_C_API_EMBEDDING_H_ */
