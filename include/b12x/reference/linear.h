// b12x CPU reference of the linear GEMMs (the oracle of gemm::run / gemm::linear).
//
// y[M, N] = alpha * sum_k deq(x)[m, k] * deq(W)[n, k] (+ bias[n]) in fp64, from the checkpoint
// layout operands (gemm::WeightSource, host tensors) and the activations exactly as the op takes
// them. Where the op quantizes activations inside (fp8_block from bf16/fp16, mxfp8, mxfp4_w4a8)
// the reference quantizes them with the activation-quantizer reference (b12x/reference/quantize.h,
// the same rules as the GPU quantizers) before dequantizing. Dequantization uses the block codecs
// of src/formats (block.h, ggml.h).
#pragma once

#include <vector>

#include "b12x/gemm.h"
#include "b12x/types.h"

namespace b12x::reference {

/// weight: host tensors (see gemm::WeightSource). x: host [M, K] bf16/fp16 (unquantized
/// activations), fp8_e4m3 [M, K] (fp8_tensor; fp8_block with x_scale fp32 [M, K/128]), packed FP4
/// uint8 [M, K/2] / fp4 [M, K] (W4A4, x_scale = 128x4-swizzled scales). alpha multiplies the sum
/// (W4A4 NVFP4: input_scale * weight_scale_2; 1 otherwise). bias: host [N] bf16/fp16/fp32 or
/// empty. out: host fp64 or fp32 [M, N] (contiguous). The NVFP4 W4A16 weight_scale_2 is
/// weight.global_scale; the fp8_tensor output scale is weight.output_scale.
void linear(const gemm::WeightSource& weight, const TensorRef& x, const TensorRef& x_scale,
            double alpha, const TensorRef& bias, const TensorRef& out);

/// The dequantized weight [N, K] (row-major fp64) the reference multiplies with.
std::vector<double> linear_dequantize_weight(const gemm::WeightSource& weight);

}  // namespace b12x::reference
