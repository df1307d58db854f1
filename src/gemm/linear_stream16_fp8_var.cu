// FP8 M <= 16 block kernel: variants of the defaults (kF8Var* bits; session 20), in units of their
// own so that they compile in parallel with linear_stream16_fp8.cu. This unit: MXFP8's kF8VarQ32
// (with kF8VarCheap and kF8VarEarly).
#include "gemm/kernels/linear_stream16_fp8.cuh"
#include "gemm/linear_stream16_fp8.h"
#include "gemm/linear_stream16_fp8_var.h"

namespace b12x::gemm::lin {

F8Fn pick_stream16_f8_mx_q32(int tw, int nt) {
  return pick_s16f8_tw_nt<
      32, 4, true, kF8VarFold | kF8VarQ8 | kF8VarQ32 | kF8VarCheap | kF8VarEarly | kF8VarEarly2>(
      tw, nt);
}

}  // namespace b12x::gemm::lin
