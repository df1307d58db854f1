// Launcher of the Q8_0 embedding gather (kernels/embedding.cuh).
#pragma once

#include <cstdint>

#include "b12x/types.h"

namespace b12x::embedding {

/// Bytes of the device status word the kernel writes (zeroed by the launcher each run).
inline constexpr int64_t kStatusBytes = 16;

/// out[t] = dequant(weight row ids[t]) for t < num_tokens; bad ids -> zero row + status.
/// Memsets the status word, then launches; capture-safe. num_tokens == 0 only resets the status.
void launch_q8_0_embedding(const uint8_t* weight, int64_t row_stride_bytes, int64_t vocab,
                           int64_t dim, const void* ids, DType id_dtype, int64_t num_tokens,
                           void* out, DType out_dtype, int64_t out_row_stride, void* status,
                           Stream stream);

}  // namespace b12x::embedding
