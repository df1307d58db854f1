// FP8 M <= 16 block kernel: the probe kF8VarFused (session 22; the K split summed in the kernel
// by each row group's last CTA) on the defaults' variants, in a unit of its own so that it
// compiles in parallel with linear_stream16_fp8.cu.
#include "gemm/kernels/linear_stream16_fp8.cuh"
#include "gemm/linear_stream16_fp8.h"
#include "gemm/linear_stream16_fp8_var.h"

namespace b12x::gemm::lin {

F8Fn pick_stream16_f8_fused(WFmt f, int tw, int nt, int depth, bool q, int var) {
  constexpr int kF = kF8VarFused;
  constexpr int kMx = kF8VarFold | kF8VarQ8 | kF8VarQ32;
  switch (f) {
    case WFmt::kFp8:
      if (q || var != 0) return nullptr;
      if (tw == 1 && depth == 4)
        return nt == 1 ? &linear_stream16_fp8_kernel<1, 1, 0, 1, 4, false, 2, kF>
                       : &linear_stream16_fp8_kernel<1, 2, 0, 1, 4, false, 2, kF>;
      if (tw == 2 && depth == 8)
        return nt == 1 ? &linear_stream16_fp8_kernel<2, 1, 0, 1, 8, false, 2, kF>
                       : &linear_stream16_fp8_kernel<2, 2, 0, 1, 8, false, 2, kF>;
      return nullptr;
    case WFmt::kFp8Block:
      // kF8VarLate applies at one token tile; two run the kernel without it (its default there).
      if (!q || depth != 4 || var != kF8VarLate) return nullptr;
      return pick_s16f8_tw_nt<128, 4, true, kF8VarLate | kF>(tw, nt);
    case WFmt::kFp8Mx:
      if (!q || depth != 4) return nullptr;
      if (var == kMx) return pick_s16f8_tw_nt<32, 4, true, kMx | kF>(tw, nt);
      if (var == (kMx | kF8VarSplat))
        return pick_s16f8_tw_nt<32, 4, true, kMx | kF8VarSplat | kF>(tw, nt);
      return nullptr;
    default:
      return nullptr;
  }
}

}  // namespace b12x::gemm::lin
