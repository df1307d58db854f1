// CPU reference of the fused MoE (the oracle of the GPU tests). Host tensors only; clarity over
// speed. Takes the *source* weight tensors (the same ones prepare_weights takes) and follows the
// numerics documented in b12x/moe.h exactly (same activation quantisers, same alphas), so the
// GPU engine differs only by fp32 summation order.
#pragma once

#include <cmath>
#include <limits>

#include "b12x/moe.h"
#include "b12x/types.h"

namespace b12x::reference {

struct MoeRefArgs {
  moe::QuantMode quant_mode = moe::QuantMode::kNvfp4;
  moe::SourceFormat source_format = moe::SourceFormat::kModeloptNvfp4;
  moe::Activation activation = moe::Activation::kSilu;
  moe::W13Layout w13_layout = moe::W13Layout::kW13;
  float swiglu_limit = std::numeric_limits<float>::quiet_NaN();
  float swiglu_alpha = std::numeric_limits<float>::quiet_NaN();
  float swiglu_beta = std::numeric_limits<float>::quiet_NaN();
  bool apply_router_weight_on_input = false;
  TensorRef a;             ///< bf16/fp16 [M, H]
  TensorRef topk_ids;      ///< int32/int64 [M, topk]
  TensorRef topk_weights;  ///< fp32 [M, topk]
  moe::SourceWeights weights;
  TensorRef output;  ///< bf16/fp16/fp32 [M, H]
};

/// Computes the fused MoE on the host into args.output.
void fused_moe(const MoeRefArgs& args);

}  // namespace b12x::reference
