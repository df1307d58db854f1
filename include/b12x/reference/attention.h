// b12x CPU reference (oracle) of paged attention and the KV append op. Written for clarity, not
// speed: fp64 accumulation, one (token, head) at a time. Same argument contract as
// b12x::attention::bind_paged (see b12x/attention.h), but every tensor lives on the host, and the
// metadata values are checked (lengths, page ids) with clear errors instead of trusted.
#pragma once

#include "b12x/attention.h"
#include "b12x/types.h"

namespace b12x::reference {

/// Paged attention. `args.out` may be fp64, fp32, bf16 or fp16 (the reference rounds once at the
/// end); `args.lse` fp64 or fp32 [T, Hq], base 2. Rows of tokens at or beyond cu_seqlens_q[B]
/// are left untouched.
void paged_attention(const attention::PagedArgs& args);

/// KV append (same contract as b12x::attention::append_kv), host tensors.
void append_kv(const TensorRef& k, const TensorRef& v, const TensorRef& k_cache,
               const TensorRef& v_cache, const TensorRef& slot_mapping, const TensorRef& k_scale,
               const TensorRef& v_scale);

}  // namespace b12x::reference
