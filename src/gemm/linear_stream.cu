// M = 1 streaming kernel instantiations and launcher (kernels/linear_stream.cuh).
#include <algorithm>

#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_stream.cuh"
#include "gemm/linear_launch.h"

namespace b12x::gemm::lin {

// The plan's staging budget plus the kernel's static reduction buffer (red[2][warps][16] fp32)
// fit one SM12x block (99 KB).
static_assert(kStreamSmemBudget + kStreamRedBytes<1> <= 101376,
              "stream kernel: staging budget + static shared memory exceed 99 KB");
static_assert(kStreamRowsSmemBudget + kStreamRedBytes<4> <= 101376,
              "stream kernel (4 rows): staging budget + static shared memory exceed 99 KB");
static_assert(kS16SmemBytes<2, true> <= 101376, "M <= 16 block kernel: staging slots exceed 99 KB");
static_assert(s16_once_smem(2, kS16OnceMaxVp) <= 101376,
              "M <= 16 block kernel, staged once: activations + splats exceed 99 KB");

namespace {

using StreamFn = void (*)(const LinearParams);

thread_local StreamLaunch t_last;  // last_stream_launch()

template <int kOcc, int kRows = 1, bool kMx = false, bool kMxFree = false, int kVar = 0>
StreamFn stream_fn(int parts) {
  switch (parts) {
    case 1:
      return &linear_stream_kernel<1, kOcc, kRows, kMx, kMxFree, kVar>;
    case 2:
      return &linear_stream_kernel<2, kOcc, kRows, kMx, kMxFree, kVar>;
    case 4:
      return &linear_stream_kernel<4, kOcc, kRows, kMx, kMxFree, kVar>;
    case 8:
      return &linear_stream_kernel<8, kOcc, kRows, kMx, kMxFree, kVar>;
    default:
      return nullptr;
  }
}

/// Session 24 (default, linear.cc kStreamQs; var 40 = 8 | 32): W4A4's FP4 activations converted
/// in the CTA's staging by the blocks' pair arithmetic (nvfp4x8_bf16_e7 / mxfp4x8_bf16, per-lane
/// constant addresses) instead of the scalar nvfp4x8_bf16 (NVFP4 var 8) or the blocks at fewer
/// than 8 parts (MXFP4 var 168); 2-CTA cap, 1 / 2 / 4 parts.
template <int kParts>
StreamFn stream_qs_fmt(bool mx, bool mx_free) {
  return !mx       ? &linear_stream_kernel<kParts, 2, 1, false, false, 40>
         : mx_free ? &linear_stream_kernel<kParts, 2, 1, true, true, 40>
                   : &linear_stream_kernel<kParts, 2, 1, true, false, 40>;
}
StreamFn stream_qs_fn(bool mx, bool mx_free, int parts) {
  return parts == 1   ? stream_qs_fmt<1>(mx, mx_free)
         : parts == 2 ? stream_qs_fmt<2>(mx, mx_free)
         : parts == 4 ? stream_qs_fmt<4>(mx, mx_free)
                      : nullptr;
}

/// The M = 1 instances with a variant (LinearParams::stream_var), those a default plan reaches on
/// some device (session 21 removed the knob-only ones: the unshuffled splats, v136, the 3-CTA
/// staging's conversion, the blocks at parts 1 / 2 / 4 but for MXFP4 W4A4, MXFP4's fold at var
/// 0 / 128 / 192; see docs/gemm.md). NVFP4 var 8 (W4A4's activations converted in the CTA's
/// staging) at the 2-CTA cap where parts < 8 (8 parts take the blocks). The per-warp activation
/// blocks (var 128, linear_stream_kernel's kJit) at the 2-CTA cap with 8 parts: NVFP4 (168: W4A4's
/// activations converted by pair arithmetic) and fold-free MXFP4 W4A16; MXFP4 W4A4 (168) at any
/// parts. At the 3-CTA cap with 8 parts only and kLean's registers (+64, session 20; without kLean
/// the instances spilled 80-120 bytes and lost, round 75: 6144x4096 NVFP4 W4A16 7.33 us vs 6.43
/// staged, kLean 5.70): W4A16 192 (MXFP4 fold-free), W4A4 232.
/// Session 26 (kLate, linear.cc's kStreamLateRule; SM90): the instances its rule reaches — NVFP4
/// 8-part blocks at the 2-CTA cap (W4A16 128, W4A4 168), fold-free MXFP4's 8-part W4A16 blocks
/// (128), kLean 3-CTA blocks (192 / 232) and W4A4's 2-part staging (40).
StreamFn stream_late_fn(bool mx, int parts, int occ, int base) {
  constexpr int L = kStreamVarLate;
  if (!mx)
    return occ != 2 || parts != 8 ? nullptr
           : base == 128          ? &linear_stream_kernel<8, 2, 1, false, false, L | 128>
           : base == 168          ? &linear_stream_kernel<8, 2, 1, false, false, L | 168>
                                  : nullptr;
  if (occ == 3)
    return parts != 8    ? nullptr
           : base == 192 ? &linear_stream_kernel<8, 3, 1, true, true, L | 192>
           : base == 232 ? &linear_stream_kernel<8, 3, 1, true, true, L | 232>
                         : nullptr;
  if (occ != 2) return nullptr;
  return parts == 8 && base == 128  ? &linear_stream_kernel<8, 2, 1, true, true, L | 128>
         : parts == 2 && base == 40 ? &linear_stream_kernel<2, 2, 1, true, true, L | 40>
                                    : nullptr;
}

/// Session 27 (kHalf; linear.cc's kStreamHalfRule, SM90): K parts of an even number of vectors on
/// the 8-part 2-CTA blocks, the instances its rule reaches: NVFP4 W4A16 (128) and MXFP4 W4A4 (168,
/// both splats). (NVFP4 W4A4's and MXFP4 W4A16's grids there take the late requests; their HALF
/// instances, knob-only, were removed.)
StreamFn stream_half_fn(bool mx, bool mx_free, int parts, int occ, int base) {
  constexpr int H = kStreamVarHalf;
  if (parts != 8 || occ != 2) return nullptr;
  if (base == 128 && !mx) return &linear_stream_kernel<8, 2, 1, false, false, H | 128>;
  if (base == 168 && mx)
    return mx_free ? &linear_stream_kernel<8, 2, 1, true, true, H | 168>
                   : &linear_stream_kernel<8, 2, 1, true, false, H | 168>;
  return nullptr;
}

/// Session 28 (kRf; linear.cc's kStreamRfRule, SM90): the blocks' next requests before each
/// block's activation store, the instances its rule reaches: NVFP4 W4A16 on the 8-part 2-CTA
/// blocks (128) and kLean's 3-CTA blocks (192), NVFP4 W4A4 on kLean's (232). (Round 106's
/// NVFP4 W4A4 168 and fold-free MXFP4 128 / 168 instances lost or tied; removed.)
StreamFn stream_rf_fn(bool mx, int parts, int occ, int base) {
  constexpr int R = kStreamVarRf;
  if (mx || parts != 8) return nullptr;
  return occ == 2 && base == 128   ? &linear_stream_kernel<8, 2, 1, false, false, R | 128>
         : occ == 3 && base == 192 ? &linear_stream_kernel<8, 3, 1, false, false, R | 192>
         : occ == 3 && base == 232 ? &linear_stream_kernel<8, 3, 1, false, false, R | 232>
                                   : nullptr;
}

/// Session 29 probe (kClaim, B12X_GEMM_STREAM_CLAIM): the 8-part 2-CTA blocks with the dynamic
/// group claim, on the variants the plan's rules give them: NVFP4 W4A16 with the requests first
/// (RF | 128), NVFP4 W4A4 and fold-free MXFP4 W4A16 with the late requests (4096 | 168 / 128),
/// fold-free MXFP4 W4A4 (168); and W4A16 on the CTA's staging of the whole K (0: reused by every
/// group, B12X_GEMM_STREAM_CLAIM_ST=1). Other MXFP4 weights run the plan's variant without the
/// claim (the same grid, its groups strided).
StreamFn stream_claim_fn(bool mx, bool mx_free, int parts, int occ, int base) {
  constexpr int C = kStreamVarClaim, L = kStreamVarLate, R = kStreamVarRf;
  if (parts != 8 || occ != 2) return nullptr;
  if (!mx)
    return base == (R | 128)   ? &linear_stream_kernel<8, 2, 1, false, false, C | R | 128>
           : base == (L | 168) ? &linear_stream_kernel<8, 2, 1, false, false, C | L | 168>
           : base == 0         ? &linear_stream_kernel<8, 2, 1, false, false, C>
                               : nullptr;
  if (!mx_free) return nullptr;
  return base == (L | 128) ? &linear_stream_kernel<8, 2, 1, true, true, C | L | 128>
         : base == 168     ? &linear_stream_kernel<8, 2, 1, true, true, C | 168>
         : base == 0       ? &linear_stream_kernel<8, 2, 1, true, true, C>
                           : nullptr;
}

StreamFn stream_var_fn(WFmt f, int parts, int occ, int var, bool mx_free) {
  const bool mx = f == WFmt::kMxfp4;
  if (var & kStreamVarClaim) {
    const int base = var & ~kStreamVarClaim;
    if (mx && !mx_free && stream_claim_fn(mx, true, parts, occ, base) != nullptr)
      return stream_var_fn(f, parts, occ, base, mx_free);
    return stream_claim_fn(mx, mx_free, parts, occ, base);
  }
  if (var & kStreamVarRf) return stream_rf_fn(mx, parts, occ, var & ~kStreamVarRf);
  if (var & kStreamVarHalf) return stream_half_fn(mx, mx_free, parts, occ, var & ~kStreamVarHalf);
  if (var & kStreamVarLate) {
    // Session 26 (kLate): other MXFP4 weights than fold-free ones run the plan's own variant.
    const int base = var & ~kStreamVarLate;
    if (mx && !mx_free) return base != 0 ? stream_var_fn(f, parts, occ, base, mx_free) : nullptr;
    return stream_late_fn(mx, parts, occ, base);
  }
  if (occ == 3) {
    if (parts != 8) return nullptr;
    if (var == 232)
      return !mx       ? &linear_stream_kernel<8, 3, 1, false, false, 232>
             : mx_free ? &linear_stream_kernel<8, 3, 1, true, true, 232>
                       : &linear_stream_kernel<8, 3, 1, true, false, 232>;
    if (var != 192 || (mx && !mx_free)) return nullptr;
    return mx ? &linear_stream_kernel<8, 3, 1, true, true, 192>
              : &linear_stream_kernel<8, 3, 1, false, false, 192>;
  }
  if (occ != 2) return nullptr;
  if (var == 40) return stream_qs_fn(mx, mx_free, parts);
  if (mx) {
    if (var == 168)  // MXFP4 W4A4, its activations converted in the kernel
      return mx_free ? stream_fn<2, 1, true, true, 168>(parts)
                     : stream_fn<2, 1, true, false, 168>(parts);
    return var == 128 && parts == 8 && mx_free ? &linear_stream_kernel<8, 2, 1, true, true, 128>
                                               : nullptr;
  }
  if (var == 8)
    return parts == 1   ? &linear_stream_kernel<1, 2, 1, false, false, 8>
           : parts == 2 ? &linear_stream_kernel<2, 2, 1, false, false, 8>
           : parts == 4 ? &linear_stream_kernel<4, 2, 1, false, false, 8>
                        : nullptr;
  if (parts != 8) return nullptr;
  return var == 128   ? &linear_stream_kernel<8, 2, 1, false, false, 128>
         : var == 168 ? &linear_stream_kernel<8, 2, 1, false, false, 168>
                      : nullptr;
}

// 4 token rows (M = 2..4) with the 2-CTA register cap only (their accumulators and activation
// fragments do not fit 85 registers). MXFP4 at M = 1 on fold-free splats only where no variant
// runs (var 0: W4A16, whose stream kernel takes fold-free weights only).
StreamFn pick_stream(WFmt f, bool fp16, int parts, int occ, int rows, bool mx_free = false,
                     int var = 0) {
  if (fp16) return nullptr;
  if (var == kStreamVarLate && f == WFmt::kMxfp4 && !mx_free)
    return pick_stream(f, fp16, parts, occ, rows, mx_free);
  if (var != 0) return rows == 1 ? stream_var_fn(f, parts, occ, var, mx_free) : nullptr;
  if (f == WFmt::kMxfp4) {
    if (rows != 1 || !mx_free) return nullptr;
    return occ == 3   ? stream_fn<3, 1, true, true>(parts)
           : occ == 2 ? stream_fn<2, 1, true, true>(parts)
                      : nullptr;
  }
  if (f != WFmt::kNvfp4) return nullptr;
  if (rows == 4) return occ == 2 ? stream_fn<2, 4>(parts) : nullptr;
  if (rows != 1) return nullptr;
  return occ == 3 ? stream_fn<3>(parts) : occ == 2 ? stream_fn<2>(parts) : nullptr;
}

using S16Fn = void (*)(const LinearParams);

// 2 tiles per warp, nt token tiles; MXFP4 weights (mx) or NVFP4 activations (qx, NVFP4
// weights). One tile per warp (B12X_GEMM_STREAM16_TW=1, round 48: NVFP4 W4A16 M = 16 8.44 /
// 19.62 / 18.83 / 11.25 / 8.80 us against 2's 8.76 / 19.15 / 18.17 / 11.91 / 9.23 on the chunked
// kernel, which the staged-once kernel (2 tiles only) has replaced where vp <= 16): no default
// plan reached it; its 8 instances were removed in session 21.
template <bool kMx, bool kQx, bool kMxFree = false>
S16Fn pick_stream16_fmt(int tw, int nt) {
  if (tw != 2) return nullptr;
  return nt == 1 ? &linear_stream16_kernel<2, 1, kMx, kQx, kMxFree>
                 : &linear_stream16_kernel<2, 2, kMx, kQx, kMxFree>;
}

/// The K range staged once (var & kS16VarOnce; 2 tiles per warp, BF16 activations; kQa, var &
/// kS16VarQa: W4A4's FP4 ones converted in the staging, session 24's SM90 default). Round 64's
/// first conversion there (scalar decode, per-value swizzle offsets) lost: NVFP4 M = 16, us over
/// the five shapes, 9.77 / 21.62 / 22.15 / 13.30 / 10.36 against 9.07 / 19.32 / 19.47 / 12.96 /
/// 9.64; session 24's pair arithmetic wins (docs/gemm.md).
template <bool kCl, bool kQa = false, bool kW16 = false>
S16Fn pick_stream16_once(int nt, bool mx, bool mx_free) {
  if (mx && mx_free)
    return nt == 1 ? &linear_stream16_once_kernel<2, 1, true, true, kCl, kQa, kW16>
                   : &linear_stream16_once_kernel<2, 2, true, true, kCl, kQa, kW16>;
  if (mx)
    return nt == 1 ? &linear_stream16_once_kernel<2, 1, true, false, kCl, kQa, kW16>
                   : &linear_stream16_once_kernel<2, 2, true, false, kCl, kQa, kW16>;
  // NVFP4 weights on BF16 activations summed in a cluster at one token tile: no default reached
  // it (NVFP4 W4A16 takes the cluster from M = 9, session 23's round 87; NVFP4 W4A4 with its
  // activations converted in the kernel, qa); removed in session 25, its runs keep the partials
  // (the plan's stream16_cluster_min_m >= 9, stream16_cluster_nt1).
  if constexpr (kCl && !kQa)
    return nt == 1 ? nullptr : &linear_stream16_once_kernel<2, 2, false, false, kCl, kQa, kW16>;
  else
    return nt == 1 ? &linear_stream16_once_kernel<2, 1, false, false, kCl, kQa, kW16>
                   : &linear_stream16_once_kernel<2, 2, false, false, kCl, kQa, kW16>;
}

/// var & kS16VarCluster (session 23): the split summed in a cluster (kCl) on the staged-once
/// kernel only (the chunked kernel's qx instances, W4A4 NVFP4 converted in the kernel, measured
/// +25 % at 4096x4096 / 2048x7168 in round 85 and were removed).
S16Fn pick_stream16(int tw, int nt, bool mx, bool qx, bool mx_free = false, int var = 0) {
  const bool cl = (var & kS16VarCluster) != 0;
  const bool qa = (var & kS16VarQa) != 0;
  // Session 26: staged once, partials only; MXFP4 on FP4 activations converted in the staging
  // only (the rule's; MXFP4 W4A16 lost to its lo split at M <= 8 in round 97).
  if (var & kS16VarW16)
    return tw != 2 || qx || cl || !(var & kS16VarOnce) || (mx && !qa) ? nullptr
           : qa      ? pick_stream16_once<false, true, true>(nt, mx, mx_free)
           : nt == 1 ? &linear_stream16_once_kernel<2, 1, false, false, false, false, true>
                     : &linear_stream16_once_kernel<2, 2, false, false, false, false, true>;
  if (var & kS16VarOnce)
    return tw != 2 || qx ? nullptr
           : qa          ? (cl ? pick_stream16_once<true, true>(nt, mx, mx_free)
                               : pick_stream16_once<false, true>(nt, mx, mx_free))
           : cl          ? pick_stream16_once<true>(nt, mx, mx_free)
                         : pick_stream16_once<false>(nt, mx, mx_free);
  if (cl || qa) return nullptr;
  if (qx) return mx ? nullptr : pick_stream16_fmt<false, true>(tw, nt);
  if (mx && mx_free) return pick_stream16_fmt<true, false, true>(tw, nt);
  return mx ? pick_stream16_fmt<true, false>(tw, nt) : pick_stream16_fmt<false, false>(tw, nt);
}

}  // namespace

static int stream16_threads(int var) {
  return kStreamWarps * 32 * ((var & kS16VarW16) ? 2 : 1);
}

bool stream16_cluster_nt1(WFmt f, int var) {
  const bool mx = f == WFmt::kMxfp4;
  return pick_stream16(2, 1, mx, false, false, var | kS16VarCluster) != nullptr &&
         pick_stream16(2, 1, mx, false, mx, var | kS16VarCluster) != nullptr;
}

bool stream16_w16_available(WFmt f, bool qa) {
  const bool mx = f == WFmt::kMxfp4;
  const int var = kS16VarOnce | kS16VarW16 | (qa ? kS16VarQa : 0);
  for (int i = 0; i < 4; ++i)
    if (pick_stream16(2, 1 + (i & 1), mx, false, mx && i >= 2, var) == nullptr) return false;
  return true;
}

bool stream16_available(WFmt f, bool fp16, int tw) {
  if (fp16 || (f != WFmt::kNvfp4 && f != WFmt::kMxfp4)) return false;
  return pick_stream16(tw, 2, f == WFmt::kMxfp4, false) != nullptr;
}

int64_t stream16_smem_bytes(int tw, bool qx, int var, int vp) {
  if (var & kS16VarOnce) return s16_once_smem(tw, vp);
  return qx ? kS16SmemBytes<2, true> : kS16SmemBytes<2>;
}

int stream16_vectors_per_cta(int64_t kvec, int split, int chunk) {
  const int64_t per = (kvec + split - 1) / split;
  const int64_t c = chunk > 0 ? chunk : kS16ChunkV;
  return static_cast<int>((per + c - 1) / c * c);
}

int prepare_linear_stream16(int device, WFmt f, int tw, bool qx, int var, int vp) {
  const int64_t smem = stream16_smem_bytes(tw, qx, var, vp);
  const ::b12x::detail::DeviceScope scope(device);
  int fit = 0;
  for (int nt : {1, 2}) {
    const S16Fn k = pick_stream16(tw, nt, f == WFmt::kMxfp4, qx, false, var);
    B12X_ASSERT(k != nullptr, "no M <= 16 block kernel for format ", static_cast<int>(f),
                " tw=", tw, " qx=", qx);
    int blocks = 0;
    B12X_CUDA_CHECK(::b12x::detail::resident_ctas(
        reinterpret_cast<const void*>(k), stream16_threads(var), static_cast<int>(smem), &blocks));
    fit = nt == 1 ? blocks : std::min(fit, blocks);
  }
  return fit;
}

int stream16_max_active_clusters(int device, WFmt f, int tw, bool qx, int var, int vp, int split) {
  const S16Fn k = pick_stream16(tw, 2, f == WFmt::kMxfp4, qx, false, var | kS16VarCluster);
  if (k == nullptr || split < 2 || split > 16) return 0;
  const ::b12x::detail::DeviceScope scope(device);
  const int smem = static_cast<int>(stream16_smem_bytes(tw, qx, var, vp));
  int major = 0;
  B12X_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 9) return 0;
  // Every instance run may pick (token tiles, MXFP4's fold-free splats): the opt-in (and, above
  // 8, the non-portable size) before the query.
  for (int i = 0; i < 4; ++i) {
    const void* fn = reinterpret_cast<const void*>(
        pick_stream16(tw, 1 + (i & 1), f == WFmt::kMxfp4, qx, i >= 2, var | kS16VarCluster));
    if (fn == nullptr) continue;
    int blocks = 0;
    B12X_CUDA_CHECK(::b12x::detail::resident_ctas(fn, stream16_threads(var), smem, &blocks));
    if (split > 8 && cudaFuncSetAttribute(fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
                         cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
  }
  return ::b12x::detail::max_active_clusters(reinterpret_cast<const void*>(k),
                                             stream16_threads(var), smem, split);
}

void launch_linear_stream16(WFmt f, int tw, int64_t smem, const LinearParams& p, Stream stream,
                            int var) {
  const int nt = p.M <= 8 ? 1 : 2;
  const bool qa = (var & kS16VarQa) != 0;
  const bool qx = p.act_kind == kActNvfp4 && !qa;
  const S16Fn k = pick_stream16(tw, nt, f == WFmt::kMxfp4, qx, p.mx_free != 0, var);
  const int split = std::max(p.split, 1);
  B12X_ASSERT(k != nullptr && (f == WFmt::kNvfp4 || f == WFmt::kMxfp4) &&
                  smem == stream16_smem_bytes(tw, qx, var, p.stream_vp) &&
                  (!(var & kS16VarOnce) || p.stream_vp <= kS16OnceMaxVp) &&
                  (!(var & kS16VarW16) || p.stream_vp % (2 * kS16ChunkV) == 0),
              "M <= 16 block kernel: format ", static_cast<int>(f), " tw=", tw, " qx=", qx,
              " var=", var, " vp=", p.stream_vp, " smem=", smem);
  const int qa_act = f == WFmt::kMxfp4 ? kActMxfp4 : kActNvfp4;
  const int qa_xs = f == WFmt::kMxfp4 ? kXsE8m0Swz : kXsNone;
  B12X_ASSERT(p.M >= 1 && p.M <= 16 &&
                  (qa ? p.act_kind == qa_act && p.xs_kind == qa_xs
                      : (p.act_kind == kActRaw16 || qx) && p.xs_kind == kXsNone) &&
                  p.stream_vp > 0 && p.stream_vp % kS16ChunkV == 0 &&
                  int64_t{p.stream_vp} * split >= p.kvec &&
                  (split == 1 || p.partial != nullptr || (var & kS16VarCluster)),
              "M <= 16 block kernel: M=", p.M, " act=", p.act_kind, " vp=", p.stream_vp,
              " split=", split);
  const bool cl = (var & kS16VarCluster) != 0;
  B12X_ASSERT(!cl || (split >= 2 && split <= 16 &&
                      smem >= (p.M <= 8 ? kS16ClBytes<2, 1> : kS16ClBytes<2, 2>)),
              "M <= 16 block kernel, cluster sum: split=", split, " smem=", smem);
  if (smem > 48 * 1024)
    B12X_CUDA_CHECK(
        ::b12x::detail::opt_in_smem(reinterpret_cast<const void*>(k), static_cast<int>(smem)));
  B12X_ASSERT(p.stream_tiles >= 1 && p.stream_tiles <= kStreamWarps * tw,
              "M <= 16 block kernel: tiles per CTA ", p.stream_tiles, " for tw=", tw);
  const int64_t gx = (p.n16 + p.stream_tiles - 1) / p.stream_tiles;
  t_last = StreamLaunch{0,
                        0,
                        static_cast<int>(gx),
                        t_last.serial + 1,
                        16 * tw,
                        split,
                        k != nullptr && f == WFmt::kMxfp4 && p.mx_free != 0,
                        (var & kS16VarOnce) != 0,
                        (p.reduce_trig & 1) != 0,
                        p.stream_trig != 0,
                        cl ? split : 0,
                        qa,
                        (var & kS16VarW16) != 0};
  B12X_CUDA_CHECK(
      b12x::detail::launch_ex(k, dim3(static_cast<unsigned>(gx), static_cast<unsigned>(split)),
                              dim3(stream16_threads(var)), static_cast<size_t>(smem), stream,
                              p.pdl != 0, dim3(1, cl ? static_cast<unsigned>(split) : 1u, 1), p));
  B12X_CUDA_CHECK_LAUNCH();
}

StreamLaunch last_stream_launch() {
  return t_last;
}

// The plan's queries take MXFP4's fold-free instance (the only staged one; the fold's have the
// same registers and shared memory).
bool stream_kernel_available(WFmt f, bool fp16, int parts, int occ, int rows) {
  return pick_stream(f, fp16, parts, occ, rows, f == WFmt::kMxfp4) != nullptr;
}

bool stream_late_available(WFmt f, int parts, int occ, int var) {
  return (f == WFmt::kNvfp4 || f == WFmt::kMxfp4) &&
         stream_var_fn(f, parts, occ, var | kStreamVarLate, true) != nullptr;
}

bool stream_half_available(WFmt f, int parts, int occ, int var, bool mx_free) {
  return (f == WFmt::kNvfp4 || f == WFmt::kMxfp4) &&
         stream_var_fn(f, parts, occ, var | kStreamVarHalf, mx_free) != nullptr;
}

bool stream_rf_available(WFmt f, int parts, int occ, int var) {
  return f == WFmt::kNvfp4 && stream_var_fn(f, parts, occ, var | kStreamVarRf, false) != nullptr;
}

bool stream_claim_available(WFmt f, int parts, int occ, int var) {
  return (f == WFmt::kNvfp4 || f == WFmt::kMxfp4) &&
         stream_var_fn(f, parts, occ, var | kStreamVarClaim, true) != nullptr;
}

bool stream_qs_available(int parts, int occ) {
  return occ == 2 && stream_qs_fn(false, false, parts) != nullptr;
}

int stream_vectors_per_part(int64_t kvec, int parts, int split) {
  const int64_t per = (kvec + int64_t{parts} * split - 1) / (int64_t{parts} * split);
  return static_cast<int>((per + kStreamDepth - 1) / kStreamDepth * kStreamDepth);
}

int64_t stream_smem_bytes(int64_t kvec, int parts, int rows, int split) {
  return int64_t{parts} * stream_vectors_per_part(kvec, parts, split) * 64 * 2 *
         rows;  // staged BF16
}

int prepare_linear_stream(int device, WFmt f, int parts, int occ, int64_t smem, int rows) {
  const StreamFn k = pick_stream(f, false, parts, occ, rows, f == WFmt::kMxfp4);
  B12X_ASSERT(k != nullptr, "no stream kernel for format ", static_cast<int>(f), " parts=", parts,
              " occ=", occ, " rows=", rows);
  const void* fn = reinterpret_cast<const void*>(k);
  const ::b12x::detail::DeviceScope scope(device);
  int blocks = 0;  // the opt-in and the occupancy query, memoized with the launches' opt-in
  B12X_CUDA_CHECK(
      ::b12x::detail::resident_ctas(fn, kStreamWarps * 32, static_cast<int>(smem), &blocks));
  return blocks;
}

void launch_linear_stream(WFmt f, int parts, int occ, int ctas, int64_t smem, const LinearParams& p,
                          Stream stream, int rows) {
  const StreamFn k =
      pick_stream(f, false, parts, occ, rows, p.mx_free != 0, rows == 1 ? p.stream_var : 0);
  B12X_ASSERT(k != nullptr, "no stream kernel for format ", static_cast<int>(f), " parts=", parts,
              " occ=", occ, " rows=", rows, " var=", p.stream_var);
  const int split = rows == 1 ? 1 : std::max(p.split, 1);
  const bool qx = rows == 1 && (p.stream_var & 8);
  const int act_kind = qx ? (f == WFmt::kMxfp4 ? kActMxfp4 : kActNvfp4) : kActRaw16;
  const int xs_kind = qx && f == WFmt::kMxfp4 ? kXsE8m0Swz : kXsNone;
  B12X_ASSERT(p.M >= 1 && p.M <= rows && p.act_kind == act_kind && p.xs_kind == xs_kind &&
                  p.stream_vp > 0 &&
                  p.stream_vp % ((p.stream_var & kStreamVarHalf) ? 2 : kStreamDepth) == 0 &&
                  int64_t{p.stream_vp} * parts * split >= p.kvec &&
                  smem == (rows == 1 && (p.stream_var & 128)
                               ? kStreamJitBytes
                               : int64_t{parts} * p.stream_vp * 64 * 2 * rows) &&
                  (split == 1 || p.partial != nullptr) &&
                  (!(p.stream_var & kStreamVarClaim) ||
                   (p.stream_vp >= 2 * kStreamDepth && p.s16_flags != nullptr)),
              "stream kernel: M=", p.M, " rows=", rows, " act=", p.act_kind, " vp=", p.stream_vp,
              " split=", split, " smem=", smem);
  if (smem > 48 * 1024)
    B12X_CUDA_CHECK(
        ::b12x::detail::opt_in_smem(reinterpret_cast<const void*>(k), static_cast<int>(smem)));
  const int64_t groups = (p.n16 + kStreamWarps / parts - 1) / (kStreamWarps / parts);
  const int64_t gx = std::max<int64_t>(1, std::min<int64_t>(ctas, groups));
  t_last = StreamLaunch{parts,
                        occ,
                        static_cast<int>(gx),
                        t_last.serial + 1,
                        rows,
                        split,
                        f == WFmt::kMxfp4 && p.mx_free != 0,
                        false,
                        p.reduce_trig != 0,
                        p.stream_trig != 0};
  B12X_CUDA_CHECK(b12x::detail::launch_ex(
      k, dim3(static_cast<unsigned>(gx), static_cast<unsigned>(split)), dim3(kStreamWarps * 32),
      static_cast<size_t>(smem), stream, p.pdl != 0, dim3(1, 1, 1), p));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
