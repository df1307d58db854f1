// Weight-streaming (decode regime) kernel instantiations of the FP8 weight formats (per-tensor,
// MXFP8, block FP8; BF16 MMAs): a unit apart from linear_decode.cu so that the two compile in
// parallel.
#include "gemm/linear_decode_inst.cuh"

namespace b12x::gemm::lin::decode_inst {

DecodeFn pick_decode_fp8(WFmt f, int nt, int ws, bool pipe, bool half, int deep, bool lean,
                         int mma) {
  switch (f) {
    case WFmt::kFp8:
      return mma ? decode_fn<WFmt::kFp8, Bf16Tag, 1>(nt, ws, pipe, half, deep, lean)
                 : decode_fn<WFmt::kFp8, Bf16Tag>(nt, ws, pipe, half, deep, lean);
    case WFmt::kFp8Mx:
      return mma ? decode_fn<WFmt::kFp8Mx, Bf16Tag, 1>(nt, ws, pipe, half, deep, lean)
                 : decode_fn<WFmt::kFp8Mx, Bf16Tag>(nt, ws, pipe, half, deep, lean);
    case WFmt::kFp8Block:
      return mma ? decode_fn<WFmt::kFp8Block, Bf16Tag, 1>(nt, ws, pipe, half, deep, lean)
                 : decode_fn<WFmt::kFp8Block, Bf16Tag>(nt, ws, pipe, half, deep, lean);
    default:
      return nullptr;
  }
}

DecodeFn pick_decode_fp8_xshare(WFmt f, int deep, int mma, int nt) {
  constexpr WFmt F = WFmt::kFp8;
  using B = Bf16Tag;
  // Session 29 (B12X_GEMM_DECODE_XSHARE_Q): block FP8 on e4m3 rows quantized before the kernel,
  // one token tile, the weight scales in the ring, f16 MMAs (round 110: MXFP8 and two token tiles
  // lost; their instances removed).
  if (f == WFmt::kFp8Block)
    return mma == 1 && nt == 1 && deep == 0
               ? &linear_decode_kernel<WFmt::kFp8Block, B, 1, 4, false, false, 0, false, 1, true, 2>
               : nullptr;
  if (f != F || deep < -1 || deep > 1) return nullptr;
  // Session 26 (default, XSHARE16): two token tiles (M = 9..16), f16 MMAs, the default ring;
  // session 27 (default where the default ring leaves one CTA per SM; off with
  // B12X_GEMM_DECODE_XSHARE_SHALLOW=0): a ring of 2 slices per warp (deep -1).
  if (nt == 2)
    return mma != 1    ? nullptr
           : deep == 0 ? &linear_decode_kernel<F, Bf16Tag, 2, 4, false, false, 0, false, 1, true>
           : deep < 0  ? &linear_decode_kernel<F, Bf16Tag, 2, 4, false, false, -1, false, 1, true>
                       : nullptr;
  if (deep < 0) return nullptr;
  if (nt != 1) return nullptr;
  // The e4m3 MMAs of M = 1 runs without the deeper ring (its rule never meets the shared
  // staging's from M = 1: both take grids of more CTAs than SMs only from M = 2).
  if (mma)
    return deep ? &linear_decode_kernel<F, Bf16Tag, 1, 4, false, false, 1, false, 1, true>
                : &linear_decode_kernel<F, Bf16Tag, 1, 4, false, false, 0, false, 1, true>;
  return deep ? nullptr : &linear_decode_kernel<F, Bf16Tag, 1, 4, false, false, 0, false, 0, true>;
}

DecodeFn pick_decode_fp8_var(WFmt f, int ws, int deep, int mma, int var) {
  // Session 28 (SM90 defaults at M = 1): var 3 kDiag + kSRing (MXFP8, f16 MMAs), var 2 kSRing
  // (block FP8, e4m3 MMAs); ws 4 deep 0 / 1 and ws 1.
  using B = Bf16Tag;
  constexpr WFmt X = WFmt::kFp8Mx, Q = WFmt::kFp8Block;
  const bool d0 = deep == 0, d1 = deep == 1, w4 = ws == 4, w1 = ws <= 1;
  if (f == X && mma == 1 && var == 3)
    return w4 && d1   ? &linear_decode_kernel<X, B, 1, 4, false, false, 1, false, 1, false, 3>
           : w4 && d0 ? &linear_decode_kernel<X, B, 1, 4, false, false, 0, false, 1, false, 3>
           : w1 && d0 ? &linear_decode_kernel<X, B, 1, 1, false, false, 0, false, 1, false, 3>
                      : nullptr;
  if (f == Q && mma == 0 && var == 2)
    return w4 && d1   ? &linear_decode_kernel<Q, B, 1, 4, false, false, 1, false, 0, false, 2>
           : w4 && d0 ? &linear_decode_kernel<Q, B, 1, 4, false, false, 0, false, 0, false, 2>
           : w1 && d0 ? &linear_decode_kernel<Q, B, 1, 1, false, false, 0, false, 0, false, 2>
                      : nullptr;
  return nullptr;
}

}  // namespace b12x::gemm::lin::decode_inst
