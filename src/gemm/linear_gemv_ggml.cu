// Small-M GGML GEMV instantiations and launcher.
#include "gemm/linear_gemv_ggml.h"

#include <algorithm>
#include <cstdlib>

#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_gemv_ggml.cuh"
#include "gemm/linear_params.h"

namespace b12x::gemm::lin {

namespace {

using GemvFn = void (*)(const LinearParams, const gemv::Geo);

static_assert(gemv::smem_bytes<WFmt::kIq2Xs>() + gemv::kWarps * 8 * 32 * 4 <= 101376,
              "the GGML GEMV must fit SM12x's 99 KB of shared memory per block");
// 3 CTAs of the capped one-tile kernels (their static reduction area: 4 KB) in 228 KB per SM.
static_assert(3 * (gemv::smem_bytes<WFmt::kIq2Xs, true>() + gemv::kWarps * 4 * 32 * 4 + 1024) <=
                  228 * 1024,
              "3 CTAs per SM of the capped IQ2_XS GEMV");
static_assert(gemv::smem_bytes<WFmt::kIq2Xs>() + 24 * 4 * 32 * 4 <= 101376,
              "the 24-warp GGML GEMV must fit SM12x's 99 KB of shared memory per block");
// The balanced split's head and tail partials (two per warp) beside the tables, 16 warps.
static_assert(gemv::smem_bytes<WFmt::kIq2Xs>() + 2 * 16 * 4 * 32 * 4 <= 101376,
              "the 16-warp balanced GGML GEMV must fit SM12x's 99 KB of shared memory per block");

/// The kernels with the PDL trigger at each warp's last batch: IQ2_XS with its column groups
/// (M <= 4) and IQ2_XXS's one-tile kernels (M <= 8); the others without (each kernel exists with
/// this choice only: session 21 removed the B12X_GGML_GEMV_TRIGGER=0|1 probe's instances). H200, us
/// over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168, off -> on: round 38 IQ2_XS M =
/// 1 7.70 / 19.60 / 17.32 / 9.93 / 7.72 -> 6.65 / 18.40 / 15.63 / 9.04 / 7.35, Q8_0 7.49 / (decode
/// kernel) / 17.75 / (decode kernel) / 7.37 -> 8.04 / 21.18 / 8.14 (off); round 42 (session 11's
/// IQ2 decode; why the trigger now gains everywhere is not resolved; one difference: the uncapped
/// one-tile kernel takes 88 registers, so no third CTA fits beside two of them) IQ2_XXS M = 1 7.14
/// / 19.01 / 14.72 / 8.68 / 6.99
/// -> 5.89 / 14.88 / 14.07 / 7.65 / 6.47, M = 4 7.20 / 19.45 / 15.13 / 8.81 / 7.16 -> 6.20 / 15.85
/// / 14.58 / 8.01 / 6.80 (round 38, session 10's decode: 6.87 / 17.57 / 15.70 / 9.20 / 7.39 -> 7.30
/// / 21.01 / 16.44 / 8.10 / 7.06; and in round 42 the capped kernels, B12X_GGML_GEMV_OCC=3, lost
/// with it at 4096x4096 / 14336x4096: 6.90 / 16.59 -> 7.18 / 18.82). IQ2_XXS at M > 8 (two token
/// tiles) and IQ2_XS's two chains (M 5..8) unmeasured: off.
constexpr bool trigger_of(WFmt f, int nt) {
  return (f == WFmt::kIq2Xs && nt == 0) || (f == WFmt::kIq2Xxs && nt == 1);
}

/// The kernel <F, T, NT, kCol, kOcc, kW, kTrig> where kTrig is trigger_of its (format, nt): nt 0
/// for IQ2_XS's column groups.
template <WFmt F, class T, int NT, bool kCol, int kOcc, int kW, bool kTrig>
GemvFn tk() {
  if constexpr (kTrig != trigger_of(F, kCol ? 0 : NT)) {
    return nullptr;
  } else {
    return &linear_gemv_ggml_kernel<F, T, NT, kCol, kOcc, kW, kTrig>;
  }
}

template <WFmt F, class T, bool kTrig>
GemvFn fn_nt(int nt) {
  return nt == 1 ? tk<F, T, 1, false, 0, gemv::kWarps, kTrig>()
                 : tk<F, T, 2, false, 2, gemv::kWarps, kTrig>();
}

/// nt = 0: IQ2_XS with its two 16-K groups in the MMA's column halves (M <= 4). occ = 3: the IQ2
/// one-tile kernels with registers capped for 3 CTAs per SM.
template <class T, bool kTrig>
GemvFn pick(WFmt f, int nt, int occ) {
  constexpr int kW = gemv::kWarps;
  switch (f) {
    case WFmt::kQ8_0:
      return nt == 0 ? nullptr : fn_nt<WFmt::kQ8_0, T, kTrig>(nt);
    case WFmt::kIq2Xxs:
      if (occ == 3 && nt == 1) return tk<WFmt::kIq2Xxs, T, 1, false, 3, kW, kTrig>();
      return nt == 0 ? nullptr : fn_nt<WFmt::kIq2Xxs, T, kTrig>(nt);
    case WFmt::kIq2Xs:
      if (occ == 3 && nt <= 1)
        return nt == 0 ? tk<WFmt::kIq2Xs, T, 1, true, 3, kW, kTrig>()
                       : tk<WFmt::kIq2Xs, T, 1, false, 3, kW, kTrig>();
      return nt == 0 ? tk<WFmt::kIq2Xs, T, 1, true, 0, kW, kTrig>()
                     : fn_nt<WFmt::kIq2Xs, T, kTrig>(nt);
    default:
      return nullptr;
  }
}

/// The one-tile kernels (nt 0 / 1) with `warps` (16 / 24) warps per CTA, uncapped (one CTA per
/// SM; 24 warps leave 85 registers per thread).
template <class T, int kW, bool kTrig>
GemvFn pick_wide(WFmt f, int nt) {
  switch (f) {
    case WFmt::kQ8_0:
      return nt == 1 ? tk<WFmt::kQ8_0, T, 1, false, 0, kW, kTrig>() : nullptr;
    case WFmt::kIq2Xxs:
      return nt == 1 ? tk<WFmt::kIq2Xxs, T, 1, false, 0, kW, kTrig>() : nullptr;
    case WFmt::kIq2Xs:
      return nt == 0 ? tk<WFmt::kIq2Xs, T, 1, true, 0, kW, kTrig>()
                     : tk<WFmt::kIq2Xs, T, 1, false, 0, kW, kTrig>();
    default:
      return nullptr;
  }
}

template <class T, bool kTrig>
GemvFn kernel_of_t(WFmt f, int nt, int occ, int warps) {
  if (warps == gemv::kWarps) return pick<T, kTrig>(f, nt, occ);
  if (nt > 1) return nullptr;
  if (warps == 16) return pick_wide<T, 16, kTrig>(f, nt);
  if (warps == 24) return pick_wide<T, 24, kTrig>(f, nt);
  return nullptr;
}

/// The kernels of variant kVar (B12X_GGML_GEMV_VAR, gemv_ggml_body): the IQ2 one-tile kernels at
/// M <= 4 (IQ2_XXS one token tile, IQ2_XS column groups) with 8 (capped or not) or 24 warps and
/// the default PDL trigger (on for both).
template <class T, int kVar>
GemvFn pick_var(WFmt f, int nt, int occ, int warps) {
  constexpr WFmt kX = WFmt::kIq2Xxs, kS = WFmt::kIq2Xs;
  if constexpr ((kVar & 4096) != 0) {
    // The balanced split (one wave of CTAs): 16 warps, one CTA per SM (the atom columns capped at
    // 128 registers; 8 warps x 2 CTAs lost at every shape in round 73; 20 / 18 warps, five on some
    // of the SM's four schedulers, lost in round 74 and were removed). Q8_0 the plain kernel (no
    // trigger).
    if (occ == 3) return nullptr;
    if constexpr (kVar == 4096) {
      if (f != WFmt::kQ8_0 || nt != 1) return nullptr;
      return warps == 16 ? &linear_gemv_ggml_kernel<WFmt::kQ8_0, T, 1, false, 0, 16, false, kVar>
                         : nullptr;
    } else if constexpr (kVar == 4096 + 64) {
      if (f == kX && nt == 1)
        return warps == 16 ? &linear_gemv_ggml_kernel<kX, T, 1, false, 0, 16, true, kVar> : nullptr;
      if (f == kS && nt == 0)
        return warps == 16 ? &linear_gemv_ggml_kernel<kS, T, 1, true, 0, 16, true, kVar> : nullptr;
      return nullptr;
    } else {
      static_assert(kVar == 4096 + 1600, "balanced variants: 4096, 4160, 5696");
      return f == kX && nt == 1 && warps == 16
                 ? &linear_gemv_ggml_kernel<kX, T, 1, false, 1, 16, true, kVar>
                 : nullptr;
    }
  } else if constexpr ((kVar & 512) != 0) {
    // The atom columns: 8 warps with registers capped at 128 for two CTAs per SM (uncapped,
    // ptxas takes 146-178 for IQ2_XS: one CTA), or 16 (one CTA, the same cap); under the
    // 80-register caps they spill 124-368 bytes.
    if (occ == 3 || (warps != 8 && warps != 16)) return nullptr;
    if (f == kX && nt == 1)
      return warps == 8 ? &linear_gemv_ggml_kernel<kX, T, 1, false, 2, 8, true, kVar>
                        : &linear_gemv_ggml_kernel<kX, T, 1, false, 1, 16, true, kVar>;
    if constexpr ((kVar & 1024) == 0) {
      if (f == kS && nt == 0)
        return warps == 8 ? &linear_gemv_ggml_kernel<kS, T, 1, true, 2, 8, true, kVar>
                          : &linear_gemv_ggml_kernel<kS, T, 1, true, 1, 16, true, kVar>;
    }
    return nullptr;
  } else {
    if (f == kX && nt == 1) {
      if (warps == 24) return &linear_gemv_ggml_kernel<kX, T, 1, false, 0, 24, true, kVar>;
      if (warps == 8)
        return occ == 3 ? &linear_gemv_ggml_kernel<kX, T, 1, false, 3, 8, true, kVar>
                        : &linear_gemv_ggml_kernel<kX, T, 1, false, 0, 8, true, kVar>;
    }
    if (f == kS && nt == 0) {
      if (warps == 24) return &linear_gemv_ggml_kernel<kS, T, 1, true, 0, 24, true, kVar>;
      if (warps == 8)
        return occ == 3 ? &linear_gemv_ggml_kernel<kS, T, 1, true, 3, 8, true, kVar>
                        : &linear_gemv_ggml_kernel<kS, T, 1, true, 0, 8, true, kVar>;
    }
    return nullptr;
  }
}

template <int kVar>
GemvFn pick_var_of(bool fp16, WFmt f, int nt, int occ, int warps) {
  // The balanced split: BF16 activations only (measured in rounds 72-74).
  if constexpr ((kVar & 4096) != 0) {
    return fp16 ? nullptr : pick_var<Bf16Tag, kVar>(f, nt, occ, warps);
  } else {
    return fp16 ? pick_var<Fp16Tag, kVar>(f, nt, occ, warps)
                : pick_var<Bf16Tag, kVar>(f, nt, occ, warps);
  }
}

/// The kernel that launch_ggml_gemv runs (nullptr: none).
GemvFn kernel_of(WFmt f, bool fp16, int nt, int occ, int warps, int var) {
  if (var != 0) {
    if (!trigger_of(f, nt) && !(f == WFmt::kQ8_0 && var == 4096)) return nullptr;
    switch (var) {
      case 4096:
        return pick_var_of<4096>(fp16, f, nt, occ, warps);
      case 4096 + 64:
        return pick_var_of<4096 + 64>(fp16, f, nt, occ, warps);
      case 4096 + 1600:
        return pick_var_of<4096 + 1600>(fp16, f, nt, occ, warps);
      case 96:
        return pick_var_of<96>(fp16, f, nt, occ, warps);
      case 576:
        return pick_var_of<576>(fp16, f, nt, occ, warps);
      case 1600:
        return pick_var_of<1600>(fp16, f, nt, occ, warps);
      default:
        return nullptr;
    }
  }
  if (trigger_of(f, nt))
    return fp16 ? kernel_of_t<Fp16Tag, true>(f, nt, occ, warps)
                : kernel_of_t<Bf16Tag, true>(f, nt, occ, warps);
  return fp16 ? kernel_of_t<Fp16Tag, false>(f, nt, occ, warps)
              : kernel_of_t<Bf16Tag, false>(f, nt, occ, warps);
}

thread_local GgmlGemvLaunch t_last;  // last_ggml_gemv_launch()

/// The variant for M tokens (0 = IQ2_XS column groups) and the tokens per grid.z.
int variant_nt(WFmt f, int64_t M) {
  return f == WFmt::kIq2Xs && M <= 4 ? 0 : M <= 8 ? 1 : 2;
}

/// The dynamic shared memory of kernel_of(f, *, nt, occ, warps, var) (the variants add none but
/// the PRMT addresses' table layout, var & 1024: gemv::kPaBytes).
int smem_of(WFmt f, int nt, int occ, int warps, int var) {
  if (warps != gemv::kWarps) occ = 0;  // one CTA per SM: 16 table copies
  switch (f) {
    case WFmt::kIq2Xxs:
      if ((var & 1024) != 0) return gemv::kPaBytes + 16;
      return occ == 3 && nt == 1 ? gemv::smem_bytes<WFmt::kIq2Xxs, true>()
                                 : gemv::smem_bytes<WFmt::kIq2Xxs>();
    case WFmt::kIq2Xs:
      return occ == 3 && nt <= 1 ? gemv::smem_bytes<WFmt::kIq2Xs, true>()
                                 : gemv::smem_bytes<WFmt::kIq2Xs>();
    default:
      return 0;
  }
}

}  // namespace

GgmlGemvLaunch last_ggml_gemv_launch() {
  return t_last;
}

void note_ggml_gemv_launch(const GgmlGemvLaunch& l) {
  t_last = l;
}

bool ggml_gemv_available(WFmt f) {
  return f == WFmt::kQ8_0 || f == WFmt::kIq2Xxs || f == WFmt::kIq2Xs;
}

bool ggml_gemv_var_available(WFmt f, bool fp16, int64_t M, int occ, int warps, int var) {
  if (var == 0) return true;
  // The atom columns (var & 512) use the MMA's columns for the batch's atoms: M = 1 only.
  return M <= ((var & 512) != 0 ? 1 : 4) &&
         kernel_of(f, fp16, variant_nt(f, M), occ, warps, var) != nullptr;
}

int prepare_ggml_gemv(int device, WFmt f, bool fp16, int64_t M, int occ, int warps, int var) {
  B12X_ASSERT(ggml_gemv_available(f), "no GGML GEMV for format ", static_cast<int>(f));
  const int nt = variant_nt(f, M);
  const GemvFn k = kernel_of(f, fp16, nt, occ, warps, var);
  B12X_ASSERT(k != nullptr, "no GGML GEMV for format ", static_cast<int>(f), " with ", warps,
              " warps at M=", M);
  // The opt-in and the occupancy, once per (device, kernel): resident_ctas keeps both in
  // opt_in_smem's table.
  const ::b12x::detail::DeviceScope scope(device);
  int blocks = 0;
  B12X_CUDA_CHECK(::b12x::detail::resident_ctas(reinterpret_cast<const void*>(k), 32 * warps,
                                                smem_of(f, nt, occ, warps, var), &blocks));
  return blocks;
}

void launch_ggml_gemv(WFmt f, bool fp16, int kw, int ctas, int occ, int warps, int var,
                      const LinearParams& p, Stream stream) {
  const int nt = variant_nt(f, p.M);
  const GemvFn k = kernel_of(f, fp16, nt, occ, warps, var);
  B12X_ASSERT(k != nullptr, "no GGML GEMV for format ", static_cast<int>(f), " with ", warps,
              " warps at M=", p.M);
  B12X_ASSERT(kw >= 1 && kw <= warps && warps % kw == 0, "GGML GEMV: kw=", kw, " with ", warps,
              " warps");
  B12X_ASSERT((var & 512) == 0 || p.M == 1, "GGML GEMV: variant ", var, " at M=", p.M,
              " (the atom columns: M = 1)");
  const int tpc = warps / kw;
  const int64_t groups = (p.n16 + tpc - 1) / tpc;
  const int64_t gx = ctas > 0 ? std::min<int64_t>(ctas, groups) : groups;
  const int u =
      f == WFmt::kQ8_0 ? gemv::batch_atoms<WFmt::kQ8_0>() : gemv::batch_atoms<WFmt::kIq2Xxs>();
  const int64_t batches = (p.K / 32 + u - 1) / u;
  gemv::Geo geo{kw, tpc, (65536 + kw - 1) / kw, static_cast<int>(groups),
                static_cast<int>((batches + p.split - 1) / p.split)};
  if ((var & 4096) != 0) {
    // The balanced split: tiles per CTA n16 / grid.x, the first n16 % grid.x CTAs one more.
    geo.groups = static_cast<int>(p.n16 / gx);
    geo.per = static_cast<int>(p.n16 % gx);
  }
  const dim3 grid(
      static_cast<unsigned>(gx), static_cast<unsigned>(p.split),
      static_cast<unsigned>((p.M + (nt == 0 ? 3 : 8 * nt - 1)) / (nt == 0 ? 4 : 8 * nt)));
  const bool capped = occ == 3 && warps == gemv::kWarps && f != WFmt::kQ8_0 && nt <= 1;
  t_last = GgmlGemvLaunch{nt, capped ? 3 : 0, warps, kw, grid.x, grid.y, grid.z, trigger_of(f, nt)};
  // The plan prepared the kernel of its max_tokens; a run with fewer tokens may take another
  // (nt) whose dynamic shared memory is above 48 KB too: opt it in here (a lock-free lookup once
  // done, legal while a stream captures).
  const int smem = smem_of(f, nt, occ, warps, var);
  if (smem > 0)
    B12X_CUDA_CHECK(::b12x::detail::opt_in_smem(reinterpret_cast<const void*>(k), smem));
  B12X_CUDA_CHECK(b12x::detail::launch_ex(k, grid, dim3(32 * warps), static_cast<size_t>(smem),
                                          stream, p.pdl != 0, dim3(1, 1, 1), p, geo));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
