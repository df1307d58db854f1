// FP8 M <= 16 block kernel instantiations and launcher (kernels/linear_stream16_fp8.cuh).
#include <algorithm>

#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_stream16_fp8.cuh"
#include "gemm/linear_stream16_fp8.h"
#include "gemm/linear_stream16_fp8_var.h"

namespace b12x::gemm::lin {

static_assert(kF8SmemBytes<2, 32, 1, true> <= 101376 &&
                  kF8SmemBytes<2, 32, 1, true, kF8VarFold> <= 101376,
              "FP8 M <= 16 block kernel: slots exceed 99 KB");

namespace {

thread_local Stream16F8Launch t_last;

int group_of(WFmt f) {
  return f == WFmt::kFp8Block ? 128 : f == WFmt::kFp8Mx ? 32 : 0;
}

/// The variant a launch runs: kF8VarQ8 / kF8VarQ32 / kF8VarLate (and the kF8VarCheap probe, whose
/// instances all quantize) only where the kernel quantizes
/// (a plan's rows that are not 16-byte vectors come quantized by the quantizer launch instead).
int run_var(bool q, int var) {
  return q ? var
           : var & ~(kF8VarQ8 | kF8VarQ32 | kF8VarLate | kF8VarCheap | kF8VarEarly | kF8VarEarly2);
}

/// The instances: what the SM90 defaults run (f16 MMAs, 2 CTAs per SM; linear.cc's plan rules),
/// per-tensor at one tile per warp with a ring of 4 and at two with 8, block FP8 at depth 4 (its
/// in-kernel quantization with kF8VarLate), MXFP8 at depth 4 with kF8VarFold (quantized in the
/// kernel: kF8VarQ8 | kF8VarQ32 | kF8VarCheap). Both token tiles of each (plans prepare both).
/// Session 21 removed the rest, probes no default reaches (docs/gemm.md): the e4m3 mma.sync kernels
/// (SM89 / SM12x only when forced, B12X_GEMM_STREAM16_F8=1), other depths and variants
/// (B12X_GEMM_STREAM16_DEPTH, B12X_GEMM_STREAM16_F8_VAR) and 3 CTAs per SM
/// (B12X_GEMM_STREAM16_OCC=3).
F8Fn pick(WFmt f, int tw, int nt, int mma, int depth, bool q, int occ = 2, int var = 0) {
  if (mma != 1 || occ != 2 || (tw != 1 && tw != 2) || (nt != 1 && nt != 2)) return nullptr;
  var = run_var(q, var);
  switch (f) {
    case WFmt::kFp8:
      if (q || var != 0) return nullptr;
      if (tw == 1 && depth == 4)
        return nt == 1 ? &linear_stream16_fp8_kernel<1, 1, 0, 1, 4, false>
                       : &linear_stream16_fp8_kernel<1, 2, 0, 1, 4, false>;
      if (tw == 2 && depth == 8)
        return nt == 1 ? &linear_stream16_fp8_kernel<2, 1, 0, 1, 8, false>
                       : &linear_stream16_fp8_kernel<2, 2, 0, 1, 8, false>;
      return nullptr;
    case WFmt::kFp8Block:
      if (depth != 4) return nullptr;
      if (q) return var == kF8VarLate ? pick_stream16_f8_late(f, tw, nt, depth, q) : nullptr;
      return var == 0 ? pick_s16f8_tw_nt<128, 4, false, 0>(tw, nt) : nullptr;
    case WFmt::kFp8Mx:
      if (depth != 4) return nullptr;
      if (q)
        return var == (kF8VarFold | kF8VarQ8 | kF8VarQ32 | kF8VarCheap | kF8VarEarly | kF8VarEarly2)
                   ? pick_stream16_f8_mx_q32(tw, nt)
                   : nullptr;
      return var == kF8VarFold ? pick_s16f8_tw_nt<32, 4, false, kF8VarFold>(tw, nt) : nullptr;
    default:
      return nullptr;
  }
}

template <int kGroup, bool kQ, int kVar = 0>
int64_t smem_of(int tw, int mma) {
  if (tw == 1)
    return mma ? kF8SmemBytes<1, kGroup, 1, kQ, kVar> : kF8SmemBytes<1, kGroup, 0, kQ, kVar>;
  return mma ? kF8SmemBytes<2, kGroup, 1, kQ, kVar> : kF8SmemBytes<2, kGroup, 0, kQ, kVar>;
}

}  // namespace

bool stream16_f8_available(WFmt f, int tw, int mma, int depth, bool q, int occ, int var) {
  return pick(f, tw, 2, mma, depth, q, occ, var) != nullptr &&
         pick(f, tw, 1, mma, depth, q, occ, var) != nullptr;
}

int64_t stream16_f8_smem_bytes(WFmt f, int tw, int mma, bool q, int var) {
  switch (group_of(f)) {
    case 128:
      return q ? smem_of<128, true>(tw, mma) : smem_of<128, false>(tw, mma);
    case 32:
      if (var & kF8VarFold)
        return q ? smem_of<32, true, kF8VarFold>(tw, mma) : smem_of<32, false, kF8VarFold>(tw, mma);
      return q ? smem_of<32, true>(tw, mma) : smem_of<32, false>(tw, mma);
    default:
      return smem_of<0, false>(tw, mma);
  }
}

int stream16_f8_vectors_per_cta(int64_t kvec, int split) {
  const int64_t per = (kvec + split - 1) / split;
  return static_cast<int>((per + kF8ChunkV - 1) / kF8ChunkV * kF8ChunkV);
}

int prepare_linear_stream16_f8(int device, WFmt f, int tw, int mma, int depth, bool q, int occ,
                               int var) {
  const int64_t smem = stream16_f8_smem_bytes(f, tw, mma, q, var);
  const ::b12x::detail::DeviceScope scope(device);
  int fit = 0;
  for (int nt : {1, 2}) {
    const F8Fn k = pick(f, tw, nt, mma, depth, q, occ, var);
    B12X_ASSERT(k != nullptr, "no FP8 M <= 16 block kernel for format ", static_cast<int>(f),
                " tw=", tw, " mma=", mma, " depth=", depth, " q=", q, " var=", var);
    int blocks = 0;
    B12X_CUDA_CHECK(::b12x::detail::resident_ctas(
        reinterpret_cast<const void*>(k), kStreamWarps * 32, static_cast<int>(smem), &blocks));
    fit = nt == 1 ? blocks : std::min(fit, blocks);
  }
  return fit;
}

int stream16_f8_max_clusters(int device, WFmt f, int tw, int mma, int depth, bool q, int occ,
                             int var, int split) {
  const int64_t smem = stream16_f8_smem_bytes(f, tw, mma, q, var);
  const ::b12x::detail::DeviceScope scope(device);
  int fit = 0;
  for (int nt : {1, 2}) {
    const F8Fn k = pick(f, tw, nt, mma, depth, q, occ, var);
    if (k == nullptr) return 0;
    B12X_CUDA_CHECK(
        ::b12x::detail::opt_in_smem(reinterpret_cast<const void*>(k), static_cast<int>(smem)));
    const int clusters = ::b12x::detail::max_active_clusters(
        reinterpret_cast<const void*>(k), kStreamWarps * 32, static_cast<int>(smem), split);
    fit = nt == 1 ? clusters : std::min(fit, clusters);
  }
  return fit;
}

void launch_linear_stream16_f8(WFmt f, int tw, int mma, int depth, int64_t smem,
                               const LinearParams& p, Stream stream, int occ, int var) {
  const int nt = p.M <= 8 ? 1 : 2;
  const bool q = p.act_kind == kActBf16Quant;
  const F8Fn k = pick(f, tw, nt, mma, depth, q, occ, var);
  const int split = std::max(p.split, 1);
  const int want_xs = q                      ? kXsStaged
                      : f == WFmt::kFp8Block ? kXsF32Rows
                      : f == WFmt::kFp8Mx    ? kXsE8m0Rows
                                             : kXsNone;
  B12X_ASSERT(k != nullptr && smem == stream16_f8_smem_bytes(f, tw, mma, q, var),
              "FP8 M <= 16 block kernel: format ", static_cast<int>(f), " tw=", tw, " mma=", mma,
              " depth=", depth, " q=", q, " var=", var, " smem=", smem);
  B12X_ASSERT(p.M >= 1 && p.M <= 16 && (p.act_kind == kActFp8 || q) && p.xs_kind == want_xs &&
                  p.stream_vp > 0 && p.stream_vp % kF8ChunkV == 0 &&
                  int64_t{p.stream_vp} * split >= p.kvec &&
                  (split == 1 || (p.cluster_split > 1) == (p.partial == nullptr)) &&
                  (p.cluster_split <= 1 || (p.cluster_split == split && split <= 8)),
              "FP8 M <= 16 block kernel: M=", p.M, " act=", p.act_kind, " xs=", p.xs_kind,
              " vp=", p.stream_vp, " split=", split, " cluster=", p.cluster_split);
  B12X_ASSERT(p.stream_tiles == kStreamWarps * tw, "FP8 M <= 16 block kernel: tiles per CTA ",
              p.stream_tiles, " for tw=", tw);
  if (smem > 48 * 1024)
    B12X_CUDA_CHECK(
        ::b12x::detail::opt_in_smem(reinterpret_cast<const void*>(k), static_cast<int>(smem)));
  const int64_t gx = (p.n16 + p.stream_tiles - 1) / p.stream_tiles;
  // The K split summed in a cluster (cluster_split == split): grid.y is one cluster.
  const unsigned cl = p.cluster_split > 1 ? static_cast<unsigned>(split) : 1u;
  t_last = Stream16F8Launch{t_last.serial + 1, static_cast<int>(gx), split, tw, mma, depth, q,
                            run_var(q, var),   static_cast<int>(cl)};
  B12X_CUDA_CHECK(b12x::detail::launch_ex(
      k, dim3(static_cast<unsigned>(gx), static_cast<unsigned>(split)), dim3(kStreamWarps * 32),
      static_cast<size_t>(smem), stream, p.pdl != 0, dim3(1, cl, 1), p));
  B12X_CUDA_CHECK_LAUNCH();
}

Stream16F8Launch last_stream16_f8_launch() {
  return t_last;
}

}  // namespace b12x::gemm::lin
