// FP8 M <= 16 block kernel: the variant units' pickers (linear_stream16_fp8_var.cu / _late.cu).
#pragma once

#include "gemm/linear_stream16_fp8.h"

namespace b12x::gemm::lin {

using F8Fn = void (*)(const LinearParams);

/// The f16-MMA instance <tw, nt, kGroup, kDepth, kQ, kVar> (tw, nt 1 or 2); include after
/// kernels/linear_stream16_fp8.cuh.
template <int kGroup, int kDepth, bool kQ, int kVar>
F8Fn pick_s16f8_tw_nt(int tw, int nt) {
  switch (tw * 4 + nt) {
    case 1 * 4 + 1:
      return &linear_stream16_fp8_kernel<1, 1, kGroup, 1, kDepth, kQ, 2, kVar>;
    case 1 * 4 + 2:
      return &linear_stream16_fp8_kernel<1, 2, kGroup, 1, kDepth, kQ, 2, kVar>;
    case 2 * 4 + 1:
      return &linear_stream16_fp8_kernel<2, 1, kGroup, 1, kDepth, kQ, 2, kVar>;
    case 2 * 4 + 2:
      return &linear_stream16_fp8_kernel<2, 2, kGroup, 1, kDepth, kQ, 2, kVar>;
    default:
      return nullptr;
  }
}

/// MXFP8's quantizing instances: kF8VarFold | kF8VarQ8 | kF8VarQ32 | kF8VarCheap | kF8VarEarly |
/// kF8VarEarly2 (238; session 25 removed the ones without kF8VarCheap, session 27 those without
/// kF8VarEarly / kF8VarEarly2).
F8Fn pick_stream16_f8_mx_q32(int tw, int nt);
/// Block FP8 (in-kernel quantization, depth 4) with kF8VarLate; nullptr otherwise.
F8Fn pick_stream16_f8_late(WFmt f, int tw, int nt, int depth, bool q);

}  // namespace b12x::gemm::lin
