// FP8 M <= 16 block kernel: block FP8's kF8VarLate (session 20), in a unit of its own so that it
// compiles in parallel with linear_stream16_fp8.cu.
#include "gemm/kernels/linear_stream16_fp8.cuh"
#include "gemm/linear_stream16_fp8.h"
#include "gemm/linear_stream16_fp8_var.h"

namespace b12x::gemm::lin {

F8Fn pick_stream16_f8_late(WFmt f, int tw, int nt, int depth, bool q) {
  return f == WFmt::kFp8Block && q && depth == 4
             ? pick_s16f8_tw_nt<128, 4, true, kF8VarLate>(tw, nt)
             : nullptr;
}

}  // namespace b12x::gemm::lin
