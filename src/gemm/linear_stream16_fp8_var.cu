// FP8 M <= 16 block kernel: MXFP8 variants on top of the default kF8VarFold | kF8VarQ8, in their
// own unit so that they compile in parallel with linear_stream16_fp8.cu.
#include "gemm/kernels/linear_stream16_fp8.cuh"
#include "gemm/linear_stream16_fp8.h"

namespace b12x::gemm::lin {

using F8Fn = void (*)(const LinearParams);

namespace {

constexpr int kV6 = kF8VarFold | kF8VarQ8;

template <int kVar>
F8Fn pick_tw_nt(int tw, int nt) {
  switch (tw * 4 + nt) {
    case 1 * 4 + 1:
      return &linear_stream16_fp8_kernel<1, 1, 32, 1, 4, true, 2, kVar>;
    case 1 * 4 + 2:
      return &linear_stream16_fp8_kernel<1, 2, 32, 1, 4, true, 2, kVar>;
    case 2 * 4 + 1:
      return &linear_stream16_fp8_kernel<2, 1, 32, 1, 4, true, 2, kVar>;
    case 2 * 4 + 2:
      return &linear_stream16_fp8_kernel<2, 2, 32, 1, 4, true, 2, kVar>;
    default:
      return nullptr;
  }
}

/// The probes exist for one token tile only (M <= 8); their two-tile entry is the same kernel so
/// that a plan's availability check (both tiles) passes. Timing only.
template <int kVar>
F8Fn pick_probe(int tw) {
  return tw == 1   ? &linear_stream16_fp8_kernel<1, 1, 32, 1, 4, true, 2, kVar>
         : tw == 2 ? &linear_stream16_fp8_kernel<2, 1, 32, 1, 4, true, 2, kVar>
                   : nullptr;
}

}  // namespace

F8Fn pick_stream16_f8_var2(int tw, int nt, int var) {
  switch (var) {
    case kV6 | kF8VarQm:
      return pick_tw_nt<kV6 | kF8VarQm>(tw, nt);
    case kV6 | kF8VarQm | kF8VarWf:
      return pick_tw_nt<kV6 | kF8VarQm | kF8VarWf>(tw, nt);
    case kV6 | kF8VarQm | kF8VarQ32:
      return pick_tw_nt<kV6 | kF8VarQm | kF8VarQ32>(tw, nt);
    case kV6 | kF8VarPrNoQ:
      return pick_probe<kV6 | kF8VarPrNoQ>(tw);
    case kV6 | kF8VarQm | kF8VarPrNoSplat:
      return pick_probe<kV6 | kF8VarQm | kF8VarPrNoSplat>(tw);
    case kV6 | kF8VarQm | kF8VarPrNoHmul:
      return pick_probe<kV6 | kF8VarQm | kF8VarPrNoHmul>(tw);
    default:
      return nullptr;
  }
}

}  // namespace b12x::gemm::lin
