// IQ2 M <= 2 GEMV on integer MMA (kernels/linear_gemv_imma.cuh): instantiations and launcher.
#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_gemv_imma.cuh"
#include "gemm/linear_gemv_ggml.h"
#include "gemm/linear_params.h"

namespace b12x::gemm::lin {

static_assert(kGgmlImmaP2 == imma::kP2 && kGgmlImmaPred == imma::kPred &&
              kGgmlImmaTile == imma::kTile && kGgmlImmaInPlace == imma::kInPlace &&
              kGgmlImmaPeel == imma::kPeel && kGgmlImmaIlv == imma::kIlv &&
              kGgmlImmaXFirst == imma::kXFirst && kGgmlImmaXAll == imma::kXAll &&
              kGgmlImmaTabQ == imma::kTabQ);

namespace {

using ImmaFn = void (*)(const LinearParams);

/// The kernel for (format, activation dtype, warps per CTA, var, M tokens): BF16 activations, two
/// activation pieces, 16 warps (nullptr: none). The defaults (ggml_imma_default), no other
/// instance: kP2 | kPred | kXAll | kTabQ (8963; session 26's 8195 until session 29) for IQ2_XXS
/// M = 1; kP2 | kPred | kTile | kInPlace (8207) at M = 2
/// (a 2-token plan's 1-token runs take its M = 1 kernel); 8207 | kPeel | kIlv | kXFirst (8431) for
/// IQ2_XS M = 1.
/// Dropped in rounds 93-95 (removed): 8 warps (two CTAs per SM), 20 / 32 warps, IQ2_XXS 24, the
/// weights two batches ahead, two MMA chains per piece set; FP16 activations are unmeasured (no
/// kernel). Session 26, rounds 97-98 (removed; us over 4096x4096 / 14336x4096 / 4096x14336 /
/// 6144x4096 / 2048x7168, M = 1): session 25's three pieces (8192: IQ2_XXS 5.66 / 11.34 / 12.34 /
/// 6.94 / 5.57 against kP2 | kPred's 4.94 / 9.31 / 10.09 / 6.00 / 4.98), two units per loop
/// iteration (8197: IQ2_XXS 5.19 / 10.56 / 11.42 / 6.60 / 4.99), the weights two batches ahead
/// (8201: 5.45 / 10.52 / 11.35 / 6.39 / 5.20), 20 warps (5.24 / 10.18 / 10.81 / 6.33 / 5.34), the
/// entry's OR and shift as IMADs (8227: 5.43 / 10.04 / 11.15 / 6.43 / 5.15), lane constants kept
/// via shuffles (8209 .. 8243: wrong sub-scales for s >= 8 in atom 7, 9.63-10.65 us at
/// 14336x4096). Session 27, round 101 (removed; same shapes, M = 1, two runs averaged): kTile
/// alone (8199: IQ2_XXS 5.40 / 9.85 / 10.90 / 6.43 / 5.19 against 8195's 5.02 / 9.30 / 10.11 /
/// 6.00 / 4.97: its halves ran one after the other), tile pairs (8223: IQ2_XXS 5.63 / 10.39 /
/// 10.96 / 7.43 / 5.95, IQ2_XS 6.22 / 12.17 / 12.29 / 8.28 / 6.50 at 128 registers), IQ2_XS 8193
/// at 24 warps for M = 2 (13.62 / 14.78 / 8.38 us at the three big shapes against 8207's 11.71 /
/// 13.10 / 7.40). Round 102 (IQ2_XXS / IQ2_XS M = 1, against 8195 / 8207): 8207 + kPeel (8239)
/// 5.29 / 10.00 / 10.86 / 6.38 / 5.25 and 5.68 / 10.50 / 11.11 / 6.70 / 5.42 against 5.07 / 9.27 /
/// 10.09 / 6.04 / 4.96 and 5.56 / 10.22 / 10.86 / 6.47 / 5.32; kTile + kIlv without the in-place
/// loads (8263) 5.39 / 9.41 / 10.43 / 6.31 / 5.12 and 5.77 / 10.16 / 10.91 / 6.61 / 5.45. Round
/// 103 (against the defaults 8195 / 8303): 8303 at M = 2 IQ2_XXS 5.98 / 11.51 / 12.85 / 7.27 / 6.24
/// and IQ2_XS 6.64 / 13.31 / 14.65 / 8.09 / 6.74 against 8207's (and 4096x4096's BF16 GEMV) 5.71
/// / 10.96 / 12.32 / 6.96 / 6.09 and 6.32 / 11.66 / 12.97 / 7.31 / 6.34; IQ2_XXS M = 1 8303 5.14 /
/// 9.30 / 9.95 / 6.11 / 4.89 and 8195 | kXFirst (8323) 4.96 / 9.23 / 9.91 / 5.95 / 5.00 against
/// 8195's 5.07 / 9.27 / 10.09 / 6.00 / 4.96 (not on every shape: kept 8195). Session 28, rounds
/// 105-106 (removed; IQ2_XXS / IQ2_XS defaults 8195 / 8431 at M = 1 in the same runs, docs/gemm.md
/// "Session 28: IQ2"): the table words from __constant__ memory (IQ2_XS 5.16 -> 6.24 us at
/// 4096x4096), the weights two units ahead requested into L2 (prefetch.global.L2, in the loop or at
/// kernel start: +0.3-2.1 us), the tables filled before griddepcontrol.wait (IQ2_XS 5.23 -> 5.48,
/// 9.70 -> 10.25), the dependents launched at the end (+0.3-0.9 us), IQ2_XXS 8323 / 8431 re-timed
/// (within 3 % of 8195 both ways). Session 29, round 111 (removed; two passes averaged, against
/// 8195 / 8431 5.17 / 9.86 / 10.77 / 6.35 / 5.15 and 5.26 / 9.82 / 10.53 / 6.37 / 5.18): IQ2_XXS
/// 8195 + kXAll alone (8451) 5.21 / 9.61 / 10.58 / 6.28 / 5.21, IQ2_XS 8431 + kXAll (8687) 5.38 /
/// 9.92 / 10.65 / 6.48 / 5.31; 8195 itself (replaced by 8963).
ImmaFn imma_kernel(WFmt f, bool fp16, int warps, int var, int64_t M) {
  using namespace imma;
  const bool xs = f == WFmt::kIq2Xs;
  // IQ2 weights only: a forced B12X_GGML_GEMV_VAR on a Q8_0 plan must find no kernel here.
  if (fp16 || M < 1 || M > 2 || warps != 16 || (f != WFmt::kIq2Xs && f != WFmt::kIq2Xxs))
    return nullptr;
  constexpr int kIpv = kP2 | kPred | kTile | kInPlace;
  if (var == (kGgmlImmaVar | kIpv)) {
    if (xs)
      return M == 2 ? &linear_gemv_imma_kernel<WFmt::kIq2Xs, Bf16Tag, 16, 2, kIpv>
                    : &linear_gemv_imma_kernel<WFmt::kIq2Xs, Bf16Tag, 16, 1, kIpv>;
    return M == 2 ? &linear_gemv_imma_kernel<WFmt::kIq2Xxs, Bf16Tag, 16, 2, kIpv>
                  : &linear_gemv_imma_kernel<WFmt::kIq2Xxs, Bf16Tag, 16, 1, kIpv>;
  }
  // 8431 = 8207 + kPeel + kIlv + kXFirst: IQ2_XS M = 1.
  if (M == 1 && xs && var == (kGgmlImmaVar | kIpv | kPeel | kIlv | kXFirst))
    return &linear_gemv_imma_kernel<WFmt::kIq2Xs, Bf16Tag, 16, 1, kIpv | kPeel | kIlv | kXFirst>;
  // 8963 = kP2 | kPred | kXAll | kTabQ: IQ2_XXS M = 1 (session 29).
  if (M == 1 && !xs && var == (kGgmlImmaVar | kP2 | kPred | kXAll | kTabQ))
    return &linear_gemv_imma_kernel<WFmt::kIq2Xxs, Bf16Tag, 16, 1, kP2 | kPred | kXAll | kTabQ>;
  return nullptr;
}

int64_t imma_smem(WFmt f, int64_t K, int64_t M) {
  return f == WFmt::kIq2Xs ? imma::smem_bytes<WFmt::kIq2Xs>(K, M)
                           : imma::smem_bytes<WFmt::kIq2Xxs>(K, M);
}

}  // namespace

bool ggml_imma_available(WFmt f, bool fp16, int64_t M, int64_t K, int warps, int var,
                         int64_t smem_optin) {
  // Every M up to the plan's (a run may bind fewer tokens).
  for (int64_t m = 1; m <= M; ++m)
    if (imma_kernel(f, fp16, warps, var, m) == nullptr) return false;
  return K % 256 == 0 && imma_smem(f, K, M) + imma::static_smem_bytes(warps, M) <= smem_optin;
}

int prepare_ggml_imma(int device, WFmt f, bool fp16, int warps, int var, int64_t M, int64_t K) {
  const ::b12x::detail::DeviceScope scope(device);
  int blocks = 0;
  for (int64_t m = M; m >= 1; --m) {  // the opt-in of each; the occupancy of M's
    const ImmaFn k = imma_kernel(f, fp16, warps, var, m);
    B12X_ASSERT(k != nullptr, "no IQ2 integer-MMA GEMV with ", warps, " warps at M=", m);
    int b = 0;
    B12X_CUDA_CHECK(::b12x::detail::resident_ctas(reinterpret_cast<const void*>(k), 32 * warps,
                                                  static_cast<int>(imma_smem(f, K, m)), &b));
    if (m == M) blocks = b;
  }
  return blocks;
}

void launch_ggml_imma(WFmt f, bool fp16, int warps, int var, int ctas, const LinearParams& p,
                      Stream stream) {
  const ImmaFn k = imma_kernel(f, fp16, warps, var, p.M);
  B12X_ASSERT(k != nullptr && p.split == 1 && p.K % 256 == 0, "IQ2 integer-MMA GEMV: M=", p.M,
              " warps=", warps, " var=", var, " split=", p.split, " K=", p.K,
              " (supported: M = 1, 2, no split, K % 256 == 0)");
  const int64_t gx = std::max<int64_t>(1, std::min<int64_t>(ctas > 0 ? ctas : p.n16, p.n16));
  const int smem = static_cast<int>(imma_smem(f, p.K, p.M));
  B12X_CUDA_CHECK(::b12x::detail::opt_in_smem(reinterpret_cast<const void*>(k), smem));
  note_ggml_gemv_launch(
      GgmlGemvLaunch{1, 0, warps, warps, static_cast<unsigned>(gx), 1u, 1u, false});
  B12X_CUDA_CHECK(b12x::detail::launch_ex(k, dim3(static_cast<unsigned>(gx)), dim3(32 * warps),
                                          static_cast<size_t>(smem), stream, p.pdl != 0,
                                          dim3(1, 1, 1), p));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
