// Launcher of the Q8_0 embedding gather (kernels/embedding.cuh).
#pragma once

#include <cstdint>

#include "b12x/types.h"

namespace b12x::embedding {

/// Bytes of the per-token status flags for `max_tokens` tokens (16-byte multiple, at least 16).
inline int64_t status_flag_bytes(int64_t max_tokens) {
  return (max_tokens > 0 ? (max_tokens + 15) / 16 * 16 : 16);
}

/// out[t] = dequant(weight row ids[t]) for t < num_tokens; flags[t] = 1 for an out-of-range id
/// (its row is written as zeros), 0 otherwise. One launch, capture-safe; num_tokens == 0 is a
/// no-op.
void launch_q8_0_embedding(const uint8_t* weight, int64_t row_stride_bytes, int64_t vocab,
                           int64_t dim, const void* ids, DType id_dtype, int64_t num_tokens,
                           void* out, DType out_dtype, int64_t out_row_stride, uint8_t* flags,
                           Stream stream);

}  // namespace b12x::embedding
