// The decode kernel's instance table (included by the units that instantiate it:
// linear_decode.cu for the FP4 and GGML formats, linear_decode_fp8.cu for the FP8 weight
// formats; session 21 split them so that the two compile in parallel).
#pragma once

#include <type_traits>

#include "gemm/kernels/linear_decode.cuh"
#include "gemm/linear_layout.h"

namespace b12x::gemm::lin::decode_inst {

using DecodeFn = void (*)(const LinearParams);

/// The kernel with kMma (FP8 weights: 0 e4m3 mma.sync, 1 f16 MMAs on converted fragments)
/// appended to its configuration.
template <WFmt F, class T, int kMma, int NT, int kWS = 1, bool kPipe = false, bool kHalf = false,
          int kDeep = 0, bool kLean = false>
DecodeFn dk() {
  return &linear_decode_kernel<F, T, NT, kWS, kPipe, kHalf, kDeep, kLean, kMma>;
}

/// The instances: the configurations a default plan reaches on some supported device (SM90, SM120
/// / SM121, SM89; tests/plans/test_gemm_plans.cc sweeps them) and the decode kernel's fallbacks
/// where the tests turn the other kernels off (B12X_GEMM_STREAM16=0, B12X_GGML_GEMV=0, ...).
/// Session 21 removed the probes' instances no default takes (docs/gemm.md): non-lean 8 warps per
/// tile, deeper rings and pipelined halves of FP4 weights; two token tiles with 4 warps per tile;
/// FP16 MMAs and MXFP8 / block FP8 with 2 warps per tile; the IQ2 formats with warps per tile or
/// the pipelined staging.
/// ws: warps per weight tile (linear_decode_kernel's kWS). pipe: the pipelined two-buffer staging
/// (kPipe, BF16 MMAs). half: the 8-warp kernel over slice halves (kHalf, one warp per tile). deep:
/// one extra ring stage (kDeep, one token tile, 4 warps per tile, one staging buffer). lean: the
/// kernels with the per-slice bookkeeping by running pointers (kLean: FP4 weights with BF16 MMAs
/// at M = 1 with 4 or 8 warps per tile, and the pipelined slice halves). kMma 1: the FP8 weight
/// formats' f16 MMAs (SM90 at M >= 2, so not where only M = 1 runs take the kernel).
template <WFmt F, class T, int kMma = 0>
DecodeFn decode_fn(int nt, int ws, bool pipe, bool half, int deep, bool lean) {
  constexpr bool kBf16 = std::is_same_v<T, Bf16Tag>;
  constexpr bool kFp4 = F == WFmt::kNvfp4 || F == WFmt::kMxfp4;
  constexpr bool kIq2 = F == WFmt::kIq2Xxs || F == WFmt::kIq2Xs;
  if (lean) {
    if constexpr (kBf16 && kFp4) {
      if (nt == 1 && ws == 8 && !pipe && !half && deep == 0)
        return dk<F, T, kMma, 1, 8, false, false, 0, true>();
      if (nt == 1 && ws == 4 && !pipe && !half)
        return deep == 1   ? dk<F, T, kMma, 1, 4, false, false, 1, true>()
               : deep == 0 ? dk<F, T, kMma, 1, 4, false, false, 0, true>()
                           : nullptr;
      if (ws == 1 && pipe && half && deep == 0)
        return nt == 1 ? dk<F, T, kMma, 1, 1, true, true, 0, true>()
                       : dk<F, T, kMma, 2, 1, true, true, 0, true>();
    }
    return nullptr;
  }
  // 8 warps per tile, the deeper ring of FP4 weights and their pipelined halves: kLean only.
  if (ws == 8) return nullptr;
  if (deep > 0) {
    // FP8 weights (session 17: the 4-warp grid at M <= 3, both MMA kinds). (Q8_0 at M = 1,
    // session 18 round 68, us: 14336x4096 18.93 -> 22.73, 6144x4096 10.48 -> 11.42, the other
    // three shapes within 1 %: not instantiated.)
    if constexpr (kBf16 && wtraits(F).fp8mma) {
      if (nt == 1 && ws == 4 && !pipe && !half && deep == 1)
        return dk<F, T, kMma, 1, 4, false, false, 1>();
    }
    return nullptr;
  }
  if (half) {
    // FP4 weights with BF16 MMAs (with the pipelined staging: kLean only); per-tensor FP8 (by
    // default where each CTA streams >= 16 slices).
    if (ws != 1) return nullptr;
    if constexpr (kBf16 && kFp4) {
      if (!pipe)
        return nt == 1 ? dk<F, T, kMma, 1, 1, false, true>() : dk<F, T, kMma, 2, 1, false, true>();
    } else if constexpr (kBf16 && F == WFmt::kFp8) {
      if (nt == 1)
        return pipe ? dk<F, T, kMma, 1, 1, true, true>() : dk<F, T, kMma, 1, 1, false, true>();
      return pipe ? dk<F, T, kMma, 2, 1, true, true>() : dk<F, T, kMma, 2, 1, false, true>();
    }
    return nullptr;
  }
  if (pipe) {
    // BF16 MMAs, formats whose decode-regime activations carry no group scales (not the IQ2
    // formats: the GGML GEMV takes their M <= 16). One token tile with 1, 2 or 4 warps per tile;
    // two with one, per-tensor FP8 also with 2 (its M = 9..16 rule).
    if constexpr (kBf16 && (kFp4 || F == WFmt::kFp8 || F == WFmt::kQ8_0)) {
      if (nt == 1) {
        if (ws == 1) return dk<F, T, kMma, 1, 1, true>();
        if (ws == 2) return dk<F, T, kMma, 1, 2, true>();
        if (ws == 4) return dk<F, T, kMma, 1, 4, true>();
        return nullptr;
      }
      if (ws == 1) return dk<F, T, kMma, 2, 1, true>();
      if constexpr (F == WFmt::kFp8) {
        if (ws == 2) return dk<F, T, kMma, 2, 2, true>();
      }
    }
    return nullptr;
  }
  // One buffer: one warp per tile everywhere; at one token tile 4 warps per tile (M = 1, the FP8
  // formats' M <= 3 grid) but for the IQ2 formats (the GGML GEMV takes their M <= 16), and 2 where
  // a plan's pipelined 2-warp grid runs at M = 1 (the formats of that rule, BF16 MMAs).
  if (ws == 1) return nt == 1 ? dk<F, T, kMma, 1>() : dk<F, T, kMma, 2>();
  if (nt != 1) return nullptr;
  if constexpr (!kIq2) {
    if (ws == 4) return dk<F, T, kMma, 1, 4>();
  }
  if constexpr (kBf16 && (kFp4 || F == WFmt::kQ8_0 || F == WFmt::kFp8)) {
    if (ws == 2) return dk<F, T, kMma, 1, 2>();
  }
  return nullptr;
}

/// The FP8 weight formats' instances (linear_decode_fp8.cu; BF16 MMAs; mma 0 e4m3 mma.sync, 1 f16
/// MMAs on converted fragments).
DecodeFn pick_decode_fp8(WFmt f, int nt, int ws, bool pipe, bool half, int deep, bool lean,
                         int mma);
/// The 4-warp grid's shared-staging instances (kXsh, session 25: per-tensor FP8, one token tile, 4
/// warps per tile; f16 MMAs with deep 0 / 1, e4m3 with deep 0; session 26 default: two token tiles,
/// f16 MMAs, deep 0); nullptr otherwise.
DecodeFn pick_decode_fp8_xshare(WFmt f, int deep, int mma, int nt = 1);
/// Session 28's M = 1 instances (kVar of linear_decode_kernel: 2 the weight scales in the ring,
/// block FP8 on e4m3 MMAs; 3 with MXFP8's groups on the MMA's columns, f16 MMAs), at ws 4 deep
/// 0 / 1 and ws 1; nullptr where none exists.
DecodeFn pick_decode_fp8_var(WFmt f, int ws, int deep, int mma, int var);

}  // namespace b12x::gemm::lin::decode_inst
