// b12x Q8_0 embedding lookup: out[t, :] = dequant(weight[ids[t], :]).
//
// weight: GGML Q8_0 rows, described as dtype q8_0 [vocab, dim] (dim % 32 == 0; each row is
// dim/32 blocks of 34 bytes: fp16 d then 32 int8 qs; a uint8 [vocab, dim/32*34] buffer viewed as
// q8_0). Any row stride that is a whole number of blocks is accepted; byte offsets are 64-bit, so
// vocab * row_bytes may exceed 2^31. ids: int32 or int64 [T]. out: bf16 or fp16 [T, dim], inner
// dim contiguous, any row stride. out[t, j] = round(fp16(d) * qs[j]) (the fp32 product is exact).
//
// Out-of-range ids (id < 0 or id >= vocab) are an error that must be reported without reading
// out of bounds. run() cannot synchronise, so the check happens on the device: the kernel writes
// zeros for such a row and records the error in the plan's scratch, which holds one status byte
// per token (1 = out-of-range id) rewritten for every live token by every run, so it always
// describes the last run and needs no reset. embedding_status() reads it back (synchronising the
// stream); the one-shot embedding_q8_0() does that itself and throws an Error naming the first
// bad id and the vocab.
//
// Lifecycle: plan (host only, not during capture) -> bind (pointer checks) -> run (launch only,
// capture-safe; a replayed graph reads the current ids).
#pragma once

#include <cstdint>

#include "b12x/types.h"

namespace b12x {

struct EmbeddingCaps {
  int64_t vocab = 0;               ///< rows of the table (>= 1)
  int64_t dim = 0;                 ///< values per row (multiple of 32)
  int64_t max_tokens = 0;          ///< capacity: a binding may use any T <= max_tokens
  DType id_dtype = DType::kInt32;  ///< kInt32 or kInt64
  DType out_dtype = DType::kBF16;  ///< kBF16 or kFP16
  int device = 0;
};

/// Immutable result of plan_embedding (host data only).
struct EmbeddingPlan {
  EmbeddingCaps caps;
  int64_t scratch_bytes = 0;  ///< device scratch a binding needs: pad16(max(max_tokens, 1)) bytes
};

/// What bind_embedding resolved: pointers and sizes the launcher uses (no ownership).
struct EmbeddingBinding {
  EmbeddingCaps caps;
  const uint8_t* weight = nullptr;
  int64_t row_stride_bytes = 0;
  const void* ids = nullptr;
  int64_t num_tokens = 0;
  void* out = nullptr;
  int64_t out_row_stride = 0;  ///< values
  void* status = nullptr;      ///< per-token device status flags (the scratch)
};

/// Device status of the last run, read back on the host.
struct EmbeddingStatus {
  int64_t bad_tokens = 0;        ///< number of tokens whose id was out of range
  int64_t first_bad_token = -1;  ///< smallest such token position, -1 if none
  int64_t first_bad_id = 0;      ///< ids[first_bad_token] (read from the bound ids)
};

/// Validates caps against the device and sizes the scratch. Refuses to run during capture.
EmbeddingPlan plan_embedding(const EmbeddingCaps& caps);

/// weight q8_0 [vocab, dim]; ids [T] (T <= max_tokens); out [T, dim]; scratch uint8 of at least
/// plan.scratch_bytes, 16-byte aligned. All on caps.device.
EmbeddingBinding bind_embedding(const EmbeddingPlan& plan, const TensorRef& scratch,
                                const TensorRef& weight, const TensorRef& ids,
                                const TensorRef& out);

/// Launches the lookup on `stream`: no allocation, no sync; capture-safe.
void run_embedding(const EmbeddingBinding& binding, Stream stream);

/// Synchronises `stream` and reads the status of the last run (not during capture).
EmbeddingStatus embedding_status(const EmbeddingBinding& binding, Stream stream);

/// Throws Error(kInvalidArgument) naming the first bad id, its position and the vocab when the
/// last run saw out-of-range ids (synchronises `stream`).
void embedding_check(const EmbeddingBinding& binding, Stream stream);

/// One-shot: plan, bind (with a small internal per-device status buffer), run, synchronise and
/// check. Not capture-safe (it synchronises); use plan/bind/run inside graphs.
void embedding_q8_0(const TensorRef& weight, const TensorRef& ids, const TensorRef& out,
                    Stream stream);

}  // namespace b12x
