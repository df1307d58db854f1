// FP8 M <= 16 block kernel: kF8VarLate (session 20) on the defaults of the three FP8 formats.
#include "gemm/kernels/linear_stream16_fp8.cuh"
#include "gemm/linear_stream16_fp8.h"
#include "gemm/linear_stream16_fp8_var.h"

namespace b12x::gemm::lin {

F8Fn pick_stream16_f8_late(WFmt f, int tw, int nt, int depth, bool q) {
  switch (f) {
    case WFmt::kFp8:  // depth 4 at tw 1, 8 at tw 2 (the plan's)
      if (q || depth != (tw == 1 ? 4 : 8)) return nullptr;
      return tw == 1 ? pick_s16f8_tw_nt<0, 4, false, kF8VarLate>(tw, nt)
                     : pick_s16f8_tw_nt<0, 8, false, kF8VarLate>(tw, nt);
    case WFmt::kFp8Block:
      return q && depth == 4 ? pick_s16f8_tw_nt<128, 4, true, kF8VarLate>(tw, nt) : nullptr;
    case WFmt::kFp8Mx:
      return q && depth == 4
                 ? pick_s16f8_tw_nt<32, 4, true, kF8VarFold | kF8VarQ8 | kF8VarLate>(tw, nt)
                 : nullptr;
    default:
      return nullptr;
  }
}

}  // namespace b12x::gemm::lin
