// b12x warm-up: plan every regime a server will see, launch each distinct kernel signature once.
//
// Why: the library's kernels are compiled ahead of time, but the CUDA driver loads each kernel's
// module lazily on its first launch (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2), which
// stalls that launch by milliseconds and is not allowed inside a stream capture. warmup() moves
// those first launches before serving: for every (layer, token count) it plans the op as a server
// would (gemm / fused MoE with max_tokens = the token count, paged attention with that many
// decode requests or query tokens, embedding with that many ids), de-duplicates the plans by the
// kernel signature each plan() records (b12x/runtime.h), and runs ONE launch per new signature on
// inputs it allocates itself (zeros; the results are discarded). Then freeze_kernel_resolution()
// turns any later plan of a signature that was not warmed into an error naming the shape.
//
// warmup() allocates and synchronises: call it before capture (it refuses to run while `stream`
// is capturing). Signatures already launched by an earlier warmup() call in this process are not
// launched again.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "b12x/attention.h"
#include "b12x/embedding.h"
#include "b12x/gemm.h"
#include "b12x/moe.h"
#include "b12x/types.h"

namespace b12x {

/// A linear layer: caps.max_tokens is replaced by each token count (caps.expected_m and
/// caps.regime are kept). `weight` (optional) is the packed weight to launch with; without it a
/// weight of the caps' format and shape is packed from constant values inside warmup (device
/// memory of N*K bytes or less, freed before returning).
struct WarmupLinear {
  std::string name;
  gemm::Caps caps;
  const gemm::PackedWeight* weight = nullptr;
  /// W4A4 (nvfp4, mxfp4) and fp8_tensor layers also launch the activation quantizer a server
  /// runs before them, from activations of this dtype (bf16 or fp16).
  DType quantize_from = DType::kBF16;
};

/// A fused MoE layer: caps.max_tokens is replaced by each token count; caps.weight_plan is
/// ignored (the plan of `weights` is used). `experts` (optional) must be prepared for that plan;
/// without it experts of constant values are prepared inside warmup.
struct WarmupMoe {
  std::string name;
  moe::WeightsPlanArgs weights;
  moe::Caps caps;
  const moe::PreparedExperts* experts = nullptr;
};

/// A paged-attention layer (the caps a server plans with). Per token count t: decode plans
/// max_batch = max_total_q = t; verify keeps q_len = max_total_q / max_batch and plans
/// max(1, t / q_len) requests; extend plans one request of t query tokens. The launch uses a
/// KV length of min(max_page_table_width * page_size, 2048) per request (all requests read the
/// same pages), long enough for split-KV plans to split.
struct WarmupAttention {
  std::string name;
  attention::PagedCaps caps;
};

/// A Q8_0 embedding: caps.max_tokens is replaced by each token count. `weight` (optional,
/// q8_0 [vocab, dim] on caps.device); without it the launch uses a one-row table (the kernel does
/// not depend on the vocabulary size) and ids 0.
struct WarmupEmbedding {
  std::string name;
  EmbeddingCaps caps;
  TensorRef weight;
};

struct WarmupLayers {
  std::vector<WarmupLinear> linear;
  std::vector<WarmupMoe> moe;
  std::vector<WarmupAttention> attention;
  std::vector<WarmupEmbedding> embedding;
};

/// One (layer, token count) of a warm-up.
struct WarmupEntry {
  std::string layer;  ///< the layer's name (or "<kind>[index]")
  std::string op;     ///< "linear", "moe", "attention", "embedding", "quantize"
  int64_t tokens = 0;
  std::string signature;  ///< the kernel signature its plan resolved
  bool launched = false;  ///< this entry ran the signature's one launch
  double launch_ms = 0;   ///< host wall time of that launch + synchronisation (lazy loading)
};

struct WarmupReport {
  std::vector<WarmupEntry> entries;  ///< one per (layer, token count), plus quantizer launches
  int64_t planned = 0;               ///< plans made
  int64_t unique = 0;                ///< distinct (device, signature) pairs among them
  int64_t launched = 0;      ///< launches run (unique minus those warmed by an earlier call)
  int64_t already_warm = 0;  ///< unique signatures launched by an earlier warmup() call
  double seconds = 0;        ///< wall time of the whole call
  std::string to_json() const;
};

/// Plans every (layer, token count), launches each new kernel signature once on `stream`,
/// synchronises it, and frees what it allocated. Token counts must be >= 1 (duplicates are
/// ignored). Throws kCaptureActive while `stream` is capturing and kFrozen when resolution is
/// frozen and a plan needs a new signature (warm up before freezing).
WarmupReport warmup(const WarmupLayers& layers, const std::vector<int64_t>& token_counts,
                    Stream stream = nullptr);

}  // namespace b12x
