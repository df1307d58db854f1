// b12x CPU reference of the Q8_0 embedding lookup (bit-exact oracle of embedding_q8_0).
#pragma once

#include "b12x/embedding.h"
#include "b12x/types.h"

namespace b12x::reference {

/// Host tensors: weight q8_0 [vocab, dim] (or uint8 [vocab, dim/32*34]), ids int32/int64 [T],
/// out bf16/fp16 [T, dim]. Out-of-range ids give zero rows and are reported in the returned
/// status (never read out of bounds); nothing is thrown for them.
EmbeddingStatus embedding_q8_0(const TensorRef& weight, const TensorRef& ids, const TensorRef& out);

}  // namespace b12x::reference
