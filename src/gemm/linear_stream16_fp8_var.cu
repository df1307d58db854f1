// FP8 M <= 16 block kernel: variants of the defaults (kF8Var* bits; session 20), in units of their
// own so that they compile in parallel with linear_stream16_fp8.cu. This unit: MXFP8's kF8VarQ32
// (with kF8VarCheap and kF8VarEarly).
#include "gemm/kernels/linear_stream16_fp8.cuh"
#include "gemm/linear_stream16_fp8.h"
#include "gemm/linear_stream16_fp8_var.h"

namespace b12x::gemm::lin {

F8Fn pick_stream16_f8_mx_q32_early(int tw, int nt, bool early2) {
  constexpr int kV = kF8VarFold | kF8VarQ8 | kF8VarQ32 | kF8VarCheap | kF8VarEarly;
  return early2 ? pick_s16f8_tw_nt<32, 4, true, kV | kF8VarEarly2>(tw, nt)
                : pick_s16f8_tw_nt<32, 4, true, kV>(tw, nt);
}

}  // namespace b12x::gemm::lin
