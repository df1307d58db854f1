// Weight-streaming linear kernel for small M (the decode regime).
//
// The weight rows sit on the MMA's M side (16 rows per warp) and up to 8*NT tokens on N, so the
// tiny token count costs nothing and every lane streams its fragment bytes with 16-byte loads.
// A CTA of 4 warps covers 64 rows; grid.y splits K into slices (partials reduced through a
// cluster's distributed shared memory, or by linear_reduce_kernel), grid.z walks token tiles of
// 8*NT (the fallback for larger M).
//
// Latency structure (what makes it stream): the activations of the CTA's K range are staged
// into shared memory once per chunk (only the valid token rows: ldmatrix row addresses of missing
// tokens are clamped to the last valid row, whose products land in output columns that are never
// stored), so the slice loop has no CTA barrier in the common one-chunk case. Each warp streams
// its 16-row tile through a private ring of decode_stages(F) slices in shared memory with cp.async
// (a warp-slice of values is one contiguous run of the packed layout), so in-flight weight bytes
// cost no registers: the kernel fits four CTAs per SM90 SM and the per-slice code exists once.
// Block scales (a few bytes per row) are loaded into registers one slice ahead. The first
// decode_stages(F)-1 slices are requested before the kernel waits on its predecessor (PDL).
#pragma once

#include <cooperative_groups.h>

#include <type_traits>

#include "formats/swizzle.h"
#include "gemm/kernels/cluster_sum.cuh"
#include "gemm/kernels/linear_common.cuh"
#include "gemm/kernels/quantize.cuh"

namespace b12x::gemm::lin {

__device__ __forceinline__ float act_group_scale(const LinearParams& p, int64_t tok, int64_t j);

/// Stage 8 activation values (k .. k+7 of token tok) as bf16/fp16 bits, dequantizing on the fly.
/// kFoldXs: the activation group scale (E8M0 of MXFP4 / MXFP8 activations) is multiplied in
/// here (exact in BF16 whenever the product is a BF16 number) instead of per group in fp32.
/// kTableE2m1: E2M1 codes through fmt::e2m1_to_float's table (which lives in local memory)
/// instead of the bit arithmetic. Both are exact; the choice only changes how ptxas compiles the
/// whole kernel. Measured on the H200 (round 9, same build otherwise): with the table the
/// one-token-tile kernels (NT = 1) are 5-33 % faster at M = 1 for every format (NVFP4 W4A16
/// 14336x4096 19.8 -> 16.0 us, 4096x14336 28.5 -> 19.0 us, Q8_0 27.9 -> 25.8 us), while the
/// two-tile kernels (M = 16) are 4-30 % faster with the arithmetic (NVFP4 W4A16 4096x14336
/// 47.1 -> 36.2 us). Hence the table for NT = 1 only.
template <class T, bool kFoldXs = false, bool kTableE2m1 = false>
__device__ __forceinline__ uint4 stage_chunk(const LinearParams& p, int64_t tok, int64_t k) {
  if (p.act_kind == kActRaw16) {
    const uint16_t* src = static_cast<const uint16_t*>(p.x) + tok * p.ldx + k;
    if (p.x_vec16) return __ldg(reinterpret_cast<const uint4*>(src));
    uint16_t h[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) h[i] = src[i];
    return make_uint4(h[0] | (uint32_t(h[1]) << 16), h[2] | (uint32_t(h[3]) << 16),
                      h[4] | (uint32_t(h[5]) << 16), h[6] | (uint32_t(h[7]) << 16));
  }
  // Quantized sources are staged as bf16 (the MMA dtype of those formats): exact values.
  float v[8];
  const uint8_t* row = static_cast<const uint8_t*>(p.x) + tok * p.ldx_bytes;
  if (p.act_kind == kActFp8) {
    const float s = (kFoldXs && p.xs_kind != kXsNone) ? act_group_scale(p, tok, k / 32) : 1.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = fmt::e4m3_to_float(row[k + i]) * s;
  } else {
    float s = 1.f;
    if (p.act_kind == kActNvfp4)
      s = fmt::ue4m3_to_float(p.xq_scale[fmt::swizzled_scale_offset(tok, k / 16, p.K / 16)]);
    else if (kFoldXs && p.xs_kind != kXsNone)
      s = act_group_scale(p, tok, k / 32);
    const uint8_t* src = row + k / 2;
    uint32_t packed;
    if ((reinterpret_cast<uintptr_t>(src) & 3u) == 0) {
      packed = __ldg(reinterpret_cast<const uint32_t*>(src));
    } else {
      packed =
          src[0] | (uint32_t(src[1]) << 8) | (uint32_t(src[2]) << 16) | (uint32_t(src[3]) << 24);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t b = (packed >> (8 * i)) & 0xFFu;
      if constexpr (kTableE2m1) {
        v[2 * i] = fmt::e2m1_to_float(b & 0xF) * s;
        v[2 * i + 1] = fmt::e2m1_to_float(b >> 4) * s;
      } else {
        v[2 * i] = e2m1_f32_fast(b & 0xFu) * s;
        v[2 * i + 1] = e2m1_f32_fast(b >> 4) * s;
      }
    }
  }
  uint4 o;
  uint32_t* ow = reinterpret_cast<uint32_t*>(&o);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    ow[i] = static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(v[2 * i]))) |
            (static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(v[2 * i + 1]))) << 16);
  return o;
}

/// fp32 group scale of (token, group j) from the configured source.
__device__ __forceinline__ float act_group_scale(const LinearParams& p, int64_t tok, int64_t j) {
  switch (p.xs_kind) {
    case kXsF32Rows:
      return p.xscale[tok * p.xscale_ld + j];
    case kXsE8m0Rows:
      return e8m0_f32(p.xq_scale[tok * p.xscale_ld + j]);
    case kXsE8m0Swz:
      return e8m0_f32(p.xq_scale[fmt::swizzled_scale_offset(tok, j, p.K / 32)]);
    default:
      return 1.f;
  }
}

__device__ __forceinline__ void dec_cp_async16(void* smem, const void* gmem) {
  const uint32_t sa = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(gmem));
}
__device__ __forceinline__ void dec_cp_async8(void* smem, const void* gmem) {
  const uint32_t sa = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(sa), "l"(gmem));
}
__device__ __forceinline__ void dec_cp_async_commit() {
  asm volatile("cp.async.commit_group;");
}
template <int N>
__device__ __forceinline__ void dec_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// kXsh (SM90a only; the plans take it on SM90 alone): the cluster's shared activation staging.
// One mbarrier per CTA whose phase 0 completes when the staged rows' bytes have landed; each CTA
// of the cluster brings one K quarter (1 / S) of every staged row in with a bulk copy multicast
// into all S CTAs' staging at the same offset, so the activations are read from L2 once per
// cluster instead of once per CTA.
__device__ __forceinline__ void xsh_cluster_arrive() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void xsh_cluster_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}
/// Thread 0, before the cluster barrier: the barrier, expecting one arrival (xsh_bar_arm's).
__device__ __forceinline__ void xsh_bar_init(uint32_t bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
  // Visible to the async proxy and the cluster (the peers' multicasts complete on it) before the
  // cluster barrier that lets them issue.
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#else
  __trap();
#endif
}
/// Thread 0, after the cluster barrier: the one arrival, with the staged bytes as transactions.
/// Peers' multicasts may complete bytes on the barrier before it (the tx-count goes negative,
/// which the mbarrier allows); the phase cannot complete before this arrival. Arming here rather
/// than right after the init puts the cluster barrier between the two: ptxas turns the init into
/// a warp-uniform instruction, which racecheck counted as 32 writers racing this arrival.
__device__ __forceinline__ void xsh_bar_arm(uint32_t bar, uint32_t bytes) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void xsh_bar_wait(uint32_t bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar)
        : "memory");
  } while (done == 0);
#endif
}
/// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global memory into the shared
/// memory at `dst` of every CTA in `mask`, completing on each one's barrier at `bar`.
__device__ __forceinline__ void xsh_bulk_multicast(uint32_t dst, const void* src, uint32_t bytes,
                                                   uint32_t bar, uint16_t mask) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1], %2, [%3], %4;" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar), "h"(mask)
      : "memory");
#endif
}

/// kWS (warps per weight tile, 1, 2 or 4): the CTA's 4 warps cover 4 / kWS 16-row tiles, and the
/// kWS warps of a tile split the CTA's K range (contiguous parts of ceil(slices / kWS) slices),
/// reduced through shared memory at the end: kWS x the warps of the grid for the same weight
/// stream, each with 1 / kWS of the slices. kWS > 1 needs the CTA's whole K range staged at once
/// (stage_slices >= slices_per_cta) and no split-K reduce kernel (a cluster split is fine).
/// kPipe: the activations are staged in two buffers of stage_slices slices; the copies of chunk
/// c + 1 are issued (cp.async, committed as their own group) when chunk c starts and land while
/// it is computed, so a chunk boundary costs one CTA barrier instead of a drained ring and an L2
/// round trip with every warp idle. Needs plain-copy staging (BF16 / FP16 or e4m3 bytes, 16-byte
/// aligned) and no activation group scales. With kWS > 1 the kWS warps of a tile take slices
/// interleaved (part k: slices k, k + kWS, ... of each chunk; stage_slices a multiple of kWS), so
/// the K range need not be staged at once.
/// kHalf (FP4 weights with BF16 MMAs, or per-tensor FP8 weights (4 of the 8 atoms of a
/// 256-K slice per warp, no scales), kWS = 1): CTAs of 8 warps over the same 4 tiles (64 rows),
/// two per tile, each streaming one half of every slice (8 of its 16 atoms, its own ring of
/// half-slices) against the same staged activations, reduced through shared memory like kWS:
/// twice the warps on the weight stream without a second activation staging (at M = 9..32 the
/// 16 staged token rows cost as many L2 bytes per CTA as its weights), and the ring's bytes per
/// CTA unchanged.
/// kDeep (FP4 weights at M = 1 with warps per tile, kWS > 1 without kPipe; FP8 at M <= 3 since
/// session 17, where the grid takes 1-2 CTAs per SM): kDeep more ring stages per warp (the plan
/// takes 1 for NVFP4 where each warp streams >= 6 slices). At K = 4096 each of a tile's 4 warps
/// streams 2 slices; with the default ring the second is requested only after the first has
/// landed (the staging's wait covers the first slice too), two DRAM round trips per CTA; one more
/// stage requests both before the staging. kDeep -1 (session 27 default; per-tensor FP8 on the
/// shared staging at two token tiles): a ring of 2 slices, so that 16 staged rows of K = 4096
/// leave 2 CTAs per SM.
/// kLean (FP4 weights with BF16 MMAs; the default where it exists since session 9): the
/// per-slice bookkeeping by running pointers (the source of the next ring request and the scale
/// bytes of the next slice advance by a constant instead of 64-bit multiplies of the slice index),
/// one ldmatrix base per token tile and slice with the atoms at immediate offsets, the halves'
/// staging walk set up once per CTA, and splat rows of 9 entries (no 4-way bank conflict in the
/// expansion's stores). Slice loop: M = 16 halves 456 -> 409 SASS, M = 1 724 -> 720; round 34:
/// NVFP4 W4A16 3-12 % faster at M = 16, 4-6 % at M = 1 (the padded splat rows).
/// kF16 (the FP8 weight formats on SM90, whose tensor cores have no e4m3 mma.sync: ptxas lowers
/// each m16n8k32 e4m3 MMA to 12 F2FP conversions, 2 f16 HMMAs and 4 FADDs, converting the weight
/// fragment again for every token tile): the e4m3 weight fragment is converted to f16 once per
/// atom and the activation fragment once per token tile (8 + 4 F2FP), and two f16 m16n8k16 MMAs
/// per atom and token tile accumulate in fp32 (exact products of e4m3 values, no reduced-precision
/// accumulation: per-tensor FP8 needs no promotion every 128 K). At two token tiles 24 -> 16 F2FP
/// and 8 -> 0 FADDs per atom.
/// kMma: 0 e4m3 mma.sync, 1 kF16 (above).
/// kXsh (session 25 probe; e4m3 activations on the 4-warp grid, SM90a): the grid's CTAs in
/// clusters of p.decode_xshare along x (consecutive 16-row tiles, the same K range and token
/// rows) share one read of their staged activations: each CTA requests 1 / S of every staged
/// row's bytes by bulk copies multicast into all S CTAs (see xsh_bulk_multicast), so at M = 4 a
/// CTA requests M = 1's bytes and the grid's L2 reads of the activations drop S-fold, while every
/// CTA keeps M = 1's schedule (the whole K staged at once, 4 warps per tile). Session 29: block
/// FP8 too, on e4m3 rows quantized before the kernel (the quantizer launch, or the caller's):
/// the codes are shared like per-tensor's, each CTA loads its rows' group scales itself (the
/// in-kernel quantization would repeat in every CTA of a cluster: session 26).
/// kDiag (session 28; MXFP8 at M = 1, one token tile, BF16 activations quantized or e4m3 with E8M0
/// group scales): the 8 atoms of a slice (8 E8M0 groups of both operands) go to the 8 columns of
/// the MMA's N side: atom a multiplies a B fragment whose column a holds the token's 32 values and
/// whose other columns are zero (lane g keeps its B words at atom g only), so one MMA chain per
/// slice leaves group j's partial alone in column j, and the scales are applied once per slice
/// (4 FFMAs per lane) instead of per atom; the columns are summed across the quad at the end.
/// At M = 1 the 7 other columns carried copies of the same token before, so no MMA work is added.
/// kSRing (session 28; block FP8, and MXFP8 with kDiag): the weight scales of a slice ride
/// in the ring with its values (cp.async of 8 bytes per row, or of the row block's 2 floats, in
/// the slice's commit group, into static shared memory per warp and stage), so they are requested
/// kStages - 1 slices ahead like the values instead of one slice ahead into registers, where
/// every slice of a long K range waited on a DRAM round trip for its scales.
/// kVar: bit 0 kDiag (8 groups), bit 1 kSRing.
template <WFmt F, class T, int NT, int kWS = 1, bool kPipe = false, bool kHalf = false,
          int kDeep = 0, bool kLean = false, int kMma = 0, bool kXsh = false, int kVar = 0>
__global__ void __launch_bounds__(kHalf || kWS == 8 ? 256 : 128, kHalf || kWS == 8 ? 2 : 4)
    linear_decode_kernel(const LinearParams p) {
  static_assert(kWS == 1 || kWS == 2 || kWS == 4 || kWS == 8, "warps per weight tile");
  static_assert(kWS != 8 || (!kPipe && !kHalf && NT == 1), "8 warps per tile: M = 1 kernels");
  static_assert(!kHalf || (kWS == 1 && !T::kFp16 &&
                           (F == WFmt::kNvfp4 || F == WFmt::kMxfp4 || F == WFmt::kFp8)),
                "slice halves: FP4 weights with BF16 MMAs or per-tensor FP8, one warp per half");
  static_assert(kDeep == 0 || (kWS > 1 && !kPipe && !kHalf), "deeper rings: warp-split kernels");
  static_assert(kDeep >= 0 || (kXsh && decode_stages(F) + kDeep >= 2), "shallow ring: kXsh");
  static_assert(!kLean || (!T::kFp16 && (F == WFmt::kNvfp4 || F == WFmt::kMxfp4)),
                "lean bookkeeping: FP4 weights with BF16 MMAs");
  constexpr int kThreads = kHalf || kWS == 8 ? 256 : 128;
  constexpr int kParts = kHalf ? 2 : kWS;  // warps per tile
  constexpr WTraits kTr = wtraits(F);
  constexpr int kAtoms = kTr.slice_atoms;
  constexpr int kKS = kAtoms * 32;
  constexpr int kApv = 16 / kTr.lane_bytes;
  constexpr int kVecs = kAtoms / kApv;
  constexpr int kAtomsW = kHalf ? kAtoms / kParts : kAtoms;  // atoms of a slice per warp
  // MXFP4 weights with BF16 MMAs: the E8M0 scales are folded into the decoded BF16 operands
  // (weights: v * 2^-7 times a per-(row, atom) splat of 2^(e-127), two exact HFMA2s; activations:
  // in the pre-pass or the staging), like the tiled kernel, instead of a per-32-K fp32 group
  // epilogue that costs as many instructions as the decode. FP16's range is too small for it.
  constexpr bool kMxFold = F == WFmt::kMxfp4 && !T::kFp16;
  constexpr int kGroup = kMxFold ? 0 : kTr.group;
  constexpr bool kSplat = F == WFmt::kNvfp4 || kMxFold;
  constexpr bool kIq2 = (F == WFmt::kIq2Xxs || F == WFmt::kIq2Xs);
  constexpr int kGroupsPerSlice = kGroup ? kKS / kGroup : 1;
  constexpr bool kF8 = kTr.fp8mma;  // e4m3 activations staged as bytes, FP8 MMAs
  static_assert(kMma == 0 || (kMma == 1 && kF8), "f16 MMAs: the FP8 weight formats");
  static_assert(!kXsh || ((F == WFmt::kFp8 || F == WFmt::kFp8Block) && kWS == 4 && !kPipe &&
                          !kHalf && NT <= 2),
                "shared staging: per-tensor / block FP8 weights on the 4-warp grid");
  constexpr bool kF16 = kMma == 1;
  constexpr int kDiag = (kVar & 1) ? 8 : 0;
  constexpr bool kSRing = (kVar & 2) != 0;
  static_assert(kDiag == 0 || (F == WFmt::kFp8Mx && NT == 1 && !kPipe && !kHalf && !kXsh &&
                               !T::kFp16 && kF16),
                "diagonal groups: MXFP8 at one token tile, f16 MMAs");
  static_assert(!kSRing || ((F == WFmt::kFp8Block || kDiag > 0) && !kPipe && !kHalf && !kLean),
                "scales in the ring: block FP8, MXFP8 with kDiag");

  extern __shared__ __align__(16) uint8_t dsm[];
  __shared__ uint32_t lut[F == WFmt::kNvfp4 ? 128 : 1];
  // NVFP4: the current slice's scale splats [warp][sub-block][g] = (row g, row g+8), expanded
  // once per slice by the quad's four lanes instead of looked up by each lane at every step.
  // MXFP4 (kMxFold): the E8M0 splats of the slice's 16 atoms, [warp][atom][g] likewise.
  // kLean (halves and 4 warps per tile): rows of 9 entries, so that the expansion's stores by the
  // quad's four lanes (rows 4t.. or 8t.. apart, a multiple of 128 bytes with 8 entries: a 4-way
  // bank conflict, 8.8 wavefronts per store in Nsight Compute) land in different banks.
  constexpr int kSplRow = kLean && (kHalf || kWS == 4) ? 9 : 8;
  __shared__ uint2 spl[kSplat ? kThreads / 32 : 1][kSplat ? 2 * kAtomsW : 1][kSplRow];
  __shared__ alignas(16) uint32_t gtab[kIq2 ? (F == WFmt::kIq2Xs ? 512 * 4 : 256 * 4) : 4];
  __shared__ alignas(16) uint32_t stab[kIq2 ? 512 : 4];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  constexpr int kTilesPerCta = kHalf ? 4 : kWS == 8 ? 1 : 4 / kWS;
  // kWS = 1 keeps tile = 4 * blockIdx.x + warp without the mask: `warp % 4` alone changed ptxas's
  // schedule of the NVFP4 slice loop and cost 20-40 % at M = 1..4 (round 20 bisect of b1c65ec).
  const int wt = kParts == 1 ? warp : warp % kTilesPerCta;  // tile in the CTA
  const int wk = kParts == 1 ? 0 : warp / kTilesPerCta;     // K part (kHalf: slice part) of it
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * kTilesPerCta + wt;
  const bool active = tile < p.n16;
  const int64_t tok0 = static_cast<int64_t>(blockIdx.z) * (8 * NT);
  const int64_t total_slices = p.KP / kKS;
  // The CTA's slices [c_begin, c_end); this warp's [s_begin, s_end).
  const int64_t c_begin = static_cast<int64_t>(blockIdx.y) * p.slices_per_cta;
  const int64_t c_end = min(total_slices, c_begin + p.slices_per_cta);
  const int64_t w_per = (c_end - c_begin + kWS - 1) / kWS;
  const int64_t s_begin = kWS == 1 ? c_begin
                          : kPipe  ? c_begin + wk
                                   : min(c_end, c_begin + wk * w_per);
  const int64_t s_end = kWS == 1 || kPipe ? c_end : min(c_end, s_begin + w_per);
  constexpr int kStep = kPipe ? kWS : 1;  // the warp's slices: s_begin, s_begin + kStep, ...

  // Dynamic shared memory: the warps' weight rings [4][kStages][kChunk], then the staged
  // activations [rows][pitch] (bf16 halves, or e4m3 bytes for the FP8 formats), then the fp32
  // activation group scales [rows][chunk groups].
  constexpr int kStages = decode_stages(F) + kDeep;
  // kSRing: the weight scales of each ring stage, [warp][stage][row of the tile] (MXFP8 8 E8M0
  // bytes; block FP8 [0] = the row block's 2 floats).
  __shared__ alignas(16) uint2 wsr[kSRing ? kThreads / 32 : 1][kSRing ? kStages : 1][16];
  constexpr bool kTrig = wtraits(F).fp8mma;  // the early trigger: FP8 weights only
  constexpr int kChunk = decode_chunk_bytes(F);
  constexpr int kChunkW = kHalf ? kChunk / kParts : kChunk;  // a warp's bytes of a slice
  const StageGeom sg = stage_geom(F, p.stage_rows, p.stage_slices);
  uint8_t* const ring = dsm + warp * (kStages * kChunkW);
  // decode_ring_bytes(F) with 4 warps per CTA (or 8 on half slices) and no kDeep
  uint8_t* const xs = dsm + (kThreads / 32) * kStages * kChunkW;
  float* const xsc = reinterpret_cast<float*>(xs + p.stage_rows * sg.pitch_bytes);
  const int rows = static_cast<int>(min(static_cast<int64_t>(p.stage_rows), p.M - tok0));
  // kPipe: the second staging buffer, and the one the current chunk is read from.
  uint8_t* const xs1 = xs + sg.bytes;
  uint8_t* xcur = xs;
  // kXsh: the staging's barrier after the staged rows (the launcher adds 16 bytes); the bytes of
  // the CTA's K range per staged row that exist (the rest of its last slice is zero-filled).
  [[maybe_unused]] const uint32_t xbar =
      static_cast<uint32_t>(__cvta_generic_to_shared(xs + ((sg.bytes + 7) & ~int64_t{7})));
  [[maybe_unused]] const int64_t xvb =
      c_begin < c_end ? min(p.K, c_end * kKS) - c_begin * kKS : int64_t{0};
  if constexpr (kXsh) {
    if (threadIdx.x == 0) xsh_bar_init(xbar);
    xsh_cluster_arrive();  // waited for after griddep_wait, before the multicasts
  }

  if constexpr (F == WFmt::kNvfp4) {
    if (kThreads == 128 || threadIdx.x < 128)
      lut[threadIdx.x] = nvfp4_scale_splat<T>(static_cast<uint8_t>(threadIdx.x));
  }
  if constexpr (kIq2) load_iq2_tables<F == WFmt::kIq2Xs, T>(gtab, stab, threadIdx.x, 128);

  // Two accumulator sets (even / odd k16 steps of formats without group scales) so that
  // consecutive MMAs do not wait on each other's results; summed before the reduction.
  float acc[NT][4], acc_odd[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[n][i] = acc_odd[n][i] = 0.f;

  const int64_t row_g = tile * 16 + g, row_g8 = row_g + 8;
  const int slot = kIq2 ? g : lane;
  // The tile's packed values are contiguous along K: slice sl of this warp is the run
  // [sl * kChunk, (sl + 1) * kChunk) from the tile base.
  const uint8_t* const wtile = p.wvals + tile * p.kvec * kTr.slots * 16;
  // Lane l copies the 16-byte pieces l + 32 i: one base address per slice, the pieces at
  // immediate offsets (512 i) from it.
  static_assert(kChunk % 512 == 0, "whole 512-byte rows of lane pieces per slice");
  static_assert(!kPipe || kStages * kChunkW >= 2 * 32 * NT * 16, "sums in the drained ring");
  // kLean: a warp requests its slices in order (s_begin, s_begin + kStep, ...), so the source of
  // the next request advances by a constant.
  const uint8_t* wnext = wtile + s_begin * kChunk + (kHalf ? wk * kChunkW : 0) + lane * 16;
  auto issue_values = [&](int64_t sl, int stage) {
    const uint8_t* src;
    if constexpr (kLean) {
      src = wnext;
      wnext += kStep * kChunk;
    } else {
      src = wtile + sl * kChunk + (kHalf ? wk * kChunkW : 0) + lane * 16;
    }
    uint8_t* dst = ring + stage * kChunkW + lane * 16;
#pragma unroll
    for (int i = 0; i < kChunkW / 512; ++i) dec_cp_async16(dst + i * 512, src + i * 512);
    if constexpr (kSRing) {
      // MXFP8: row `lane`'s 8 E8M0 bytes of the slice; block FP8: the row block's 2 floats.
      if constexpr (F == WFmt::kFp8Mx) {
        if (lane < 16)
          dec_cp_async8(&wsr[warp][stage][lane],
                        p.wscale + (tile * 16 + lane) * p.scale_ld + sl * 8);
      } else {
        if (lane == 0)
          dec_cp_async8(&wsr[warp][stage][0], reinterpret_cast<const float*>(p.wscale) +
                                                  (tile * 16 / 128) * p.scale_ld + sl * 2);
      }
    }
  };

  // Raw scale bytes of one slice (registers).
  struct SliceScales {
    // [row g / g+8][0]. The unused [1] keeps the struct as ptxas allocated it before the tile
    // pairs left: with a one-entry second index the IQ2_XXS and one-buffer halves kernels got
    // other registers in their staging code.
    uint4 sc[2][2];
  };
  // kLean: the scale bytes of rows g / g+8 at the lane's part of the next slice to load (loads
  // go in slice order like the requests), advanced by a slice's scale bytes per load.
  constexpr int kScaleK = F == WFmt::kNvfp4 ? 16 : 32;  // K values per scale byte (FP4 formats)
  const uint8_t* snext[2] = {nullptr, nullptr};
  if constexpr (kLean) {
    const int part = F == WFmt::kNvfp4 ? (kHalf ? 16 * wk + 4 * t : 8 * t) : (kHalf ? 8 * wk : 0);
    snext[0] = p.wscale + row_g * p.scale_ld + s_begin * (kKS / kScaleK) + part;
    snext[1] = snext[0] + 8 * p.scale_ld;
  }
  auto load_scales = [&](int64_t sl, SliceScales& r) {
    if constexpr (kSRing) return;  // in the ring (wsr)
    if constexpr (kLean) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if constexpr (F == WFmt::kNvfp4 && kHalf) {
          r.sc[h][0] = make_uint4(__ldg(reinterpret_cast<const uint32_t*>(snext[h])), 0, 0, 0);
        } else if constexpr (F == WFmt::kNvfp4 || kHalf) {
          const uint2 v = __ldg(reinterpret_cast<const uint2*>(snext[h]));
          r.sc[h][0] = make_uint4(v.x, v.y, 0, 0);
        } else {
          r.sc[h][0] = __ldg(reinterpret_cast<const uint4*>(snext[h]));
        }
        snext[h] += kStep * (kKS / kScaleK);
      }
      return;
    }
    const int64_t k0 = sl * kKS;
    const int64_t rws[2] = {row_g, row_g8};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = rws[h];
      if constexpr (F == WFmt::kNvfp4 && kHalf) {
        // Lane t of a quad expands sub-blocks 4t..4t+3 of its half (16 wk ..) of the slice.
        r.sc[h][0] = make_uint4(__ldg(reinterpret_cast<const uint32_t*>(
                                    p.wscale + row * p.scale_ld + k0 / 16 + 16 * wk + 4 * t)),
                                0, 0, 0);
      } else if constexpr (F == WFmt::kMxfp4 && kHalf) {
        const uint2 v =
            __ldg(reinterpret_cast<const uint2*>(p.wscale + row * p.scale_ld + k0 / 32 + 8 * wk));
        r.sc[h][0] = make_uint4(v.x, v.y, 0, 0);
      } else if constexpr (F == WFmt::kNvfp4) {
        // Lane t of a quad expands sub-blocks 8t..8t+7 of its two rows (splats below).
        const uint2 v =
            __ldg(reinterpret_cast<const uint2*>(p.wscale + row * p.scale_ld + k0 / 16 + 8 * t));
        r.sc[h][0] = make_uint4(v.x, v.y, 0, 0);
      } else if constexpr (F == WFmt::kMxfp4) {
        r.sc[h][0] = __ldg(reinterpret_cast<const uint4*>(p.wscale + row * p.scale_ld + k0 / 32));
      } else if constexpr (F == WFmt::kFp8Mx) {
        const uint2 v =
            __ldg(reinterpret_cast<const uint2*>(p.wscale + row * p.scale_ld + k0 / 32));
        r.sc[h][0] = make_uint4(v.x, v.y, 0, 0);
      } else if constexpr (F == WFmt::kFp8Block) {
        if (h == 0) {
          const uint2 v = __ldg(reinterpret_cast<const uint2*>(
              reinterpret_cast<const float*>(p.wscale) + (row / 128) * p.scale_ld + k0 / 128));
          r.sc[0][0] = make_uint4(v.x, v.y, 0, 0);
        }
      } else if constexpr (F == WFmt::kQ8_0) {
        r.sc[h][0] = __ldg(reinterpret_cast<const uint4*>(
            reinterpret_cast<const uint16_t*>(p.wscale) + row * p.scale_ld + k0 / 32));
      } else if constexpr (kIq2) {
        const uint32_t d =
            __ldg(reinterpret_cast<const uint16_t*>(p.wscale) + row * p.scale_ld + k0 / 256);
        if constexpr (F == WFmt::kIq2Xs) {
          const uint2 n =
              __ldg(reinterpret_cast<const uint2*>(p.wscale2 + row * p.scale2_ld + k0 / 32));
          r.sc[h][0] = make_uint4(d, n.x, n.y, 0);
        } else {
          const uint32_t n =
              __ldg(reinterpret_cast<const uint32_t*>(p.wscale2 + row * p.scale2_ld + k0 / 64));
          r.sc[h][0] = make_uint4(d, n, 0, 0);
        }
      }
    }
  };

  // The cp.async copies of slices [c0, c1) of the staged token rows into the staging buffer dst,
  // not committed: piece (r, c) (16 bytes) = thread + kThreads i of rows x per_row, walked without
  // divisions (per row and piece ~10 instructions instead of ~45 with a div / mod).
  // kLean: the segment walk of a full chunk (stage_slices slices, no K tail) with fewer segments
  // per row than warps (the halves at M = 9..32: 2 segments per slice row) is the same for every
  // chunk but its source offset, so this thread's copies (column, first row, row steps) are set up
  // once here instead of per chunk (~80 SASS instructions per chunk and warp, 13 % of the M = 16
  // kernel's instructions in round 33).
  int lw_n = -1;  // copies of this thread per full chunk; -1: the generic walk
  const uint8_t* lw_src = nullptr;
  int64_t lw_srow = 0;
  int lw_dst = 0, lw_drow = 0;
  if constexpr (kLean) {
    constexpr int kElem = kF8 ? 16 : 8;
    constexpr int kW = kThreads / 32;
    const int per_row = static_cast<int>(p.stage_slices * (kKS / kElem));
    const int segs = (per_row + 31) >> 5;
    const int sh = 32 - __clz(segs - 1);
    if (p.decode_seg_stage && (1 << sh) < kW) {
      const int64_t ldx_b = kF8 ? p.ldx_bytes : 2 * p.ldx;
      const int col = warp & ((1 << sh) - 1), r0 = warp >> sh, dr = kW >> sh;
      const int c = (col << 5) + lane;
      lw_n = col < segs && c < per_row && r0 < rows ? (rows - r0 + dr - 1) / dr : 0;
      lw_src = static_cast<const uint8_t*>(p.x) + (tok0 + r0) * ldx_b +
               c_begin * kKS * (kF8 ? 1 : 2) + lane * 16 + col * 512;
      lw_srow = dr * ldx_b;
      lw_dst = r0 * sg.pitch_bytes + c * 16;
      lw_drow = dr * sg.pitch_bytes;
    }
  }
  auto issue_stage = [&](int64_t c0, int64_t c1, uint8_t* dst) {
    if constexpr (kLean) {
      if (lw_n >= 0 && c1 - c0 == p.stage_slices && c1 * kKS <= p.K) {
        const uint8_t* src = lw_src + (c0 - c_begin) * kKS * (kF8 ? 1 : 2);
        uint8_t* d = dst + lw_dst;
        for (int i = 0; i < lw_n; ++i, src += lw_srow, d += lw_drow) dec_cp_async16(d, src);
        return;
      }
    }
    const int64_t kbase = c0 * kKS;
    constexpr int kElem = kF8 ? 16 : 8;  // K values per 16-byte piece
    const int per_row = static_cast<int>((c1 - c0) * kKS / kElem);
    if (p.decode_seg_stage) {
      // Segments of 32 consecutive pieces of a row, one per lane, spread over the warps: with at
      // least as many segments per row (rounded up to a power of two) as warps, each row's
      // segments w, w + warps, ...; with fewer, a fixed column per warp and every (warps / 2^sh)-th
      // row. Pointers advance by constants (no division, no 64-bit multiply per copy), and the K
      // check only where the chunk reaches past K; the walk over single pieces below spends ~35
      // instructions per copy on its subtraction loops and a 64-bit address and K check.
      constexpr int kW = kThreads / 32;
      const int segs = (per_row + 31) >> 5;
      const int sh = 32 - __clz(segs - 1);  // ceil(log2(segs))
      const int64_t ldx_b = kF8 ? p.ldx_bytes : 2 * p.ldx;
      const uint8_t* const xb =
          static_cast<const uint8_t*>(p.x) + tok0 * ldx_b + kbase * (kF8 ? 1 : 2) + lane * 16;
      auto copy = [&](auto checked, uint8_t* d, const uint8_t* src, int c) {
        if (!decltype(checked)::value || kbase + c * kElem < p.K)
          dec_cp_async16(d, src);
        else
          *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
      };
      auto walk = [&](auto checked) {
        if ((1 << sh) >= kW) {
          for (int r = 0; r < rows; ++r)
            for (int col = warp; col < segs; col += kW) {
              const int c = (col << 5) + lane;
              if (c < per_row)
                copy(checked, dst + r * sg.pitch_bytes + c * 16, xb + r * ldx_b + col * 512, c);
            }
        } else {
          const int col = warp & ((1 << sh) - 1), r0 = warp >> sh, dr = kW >> sh;
          const int c = (col << 5) + lane;
          if (col >= segs || c >= per_row) return;
          const uint8_t* src = xb + r0 * ldx_b + col * 512;
          uint8_t* d = dst + r0 * sg.pitch_bytes + c * 16;
          for (int r = r0; r < rows; r += dr, src += dr * ldx_b, d += dr * sg.pitch_bytes)
            copy(checked, d, src, c);
        }
      };
      if (c1 * kKS <= p.K)
        walk(std::false_type{});  // no piece of the chunk reaches past K
      else
        walk(std::true_type{});
      return;
    }
    int r = 0, c = threadIdx.x;
    while (c >= per_row) c -= per_row, ++r;
    while (r < rows) {
      const int64_t k = kbase + c * kElem;
      uint8_t* d = dst + r * sg.pitch_bytes + c * 16;
      if (k < p.K) {
        const int64_t tok = tok0 + r;
        dec_cp_async16(d, kF8 ? static_cast<const uint8_t*>(p.x) + tok * p.ldx_bytes + k
                              : reinterpret_cast<const uint8_t*>(static_cast<const uint16_t*>(p.x) +
                                                                 tok * p.ldx + k));
      } else {
        *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
      }
      c += kThreads;
      while (c >= per_row) c -= per_row, ++r;
    }
  };

  // kActBf16Quant (block FP8 / MXFP8 weights, BF16 activations): slices [c0, c1) of the valid
  // token rows quantized to e4m3 into the staging and their group scales into xsc, with the
  // activation quantizer's numerics (kernels::g128_codes / mx8_codes), so no quantizer launch
  // precedes the GEMM. Units of 128 K of one row on 4 lanes, 8 per warp and pass (the loop bound
  // is warp-uniform: every lane takes part in the shuffles); lane part p holds the unit's 16-byte
  // chunks p, p + 4, p + 8, p + 12 (4 loads in flight, 64 contiguous bytes per load over the
  // unit's lanes), so a 1x128 group is one unit and an MXFP8 block one chunk index over its 4
  // lanes. Chunks past K are zeros with a zero scale, as the copied path stages them.
  auto stage_quant = [&](int64_t c0, int64_t c1) {
    if constexpr (kF8 && kGroup > 0) {
      static_assert(kKS % 128 == 0, "whole 128-K units per slice");
      constexpr int kW = kThreads / 32;
      const int64_t kbase = c0 * kKS;
      const int per_row = static_cast<int>((c1 - c0) * (kKS / 128));
      const int total = rows * per_row;
      const int part = lane & 3;
      const uint16_t* const x16 = static_cast<const uint16_t*>(p.x);
      for (int ub = warp * 8; ub < total; ub += kW * 8) {
        const int u = ub + (lane >> 2);
        const bool valid = u < total;
        const int r = valid ? u / per_row : 0;
        const int j = valid ? u - r * per_row : 0;
        const int64_t k0 = kbase + j * 128 + part * 8;  // this lane's first value
        const uint16_t* const src = x16 + (tok0 + r) * p.ldx + k0;
        uint4 v4[4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          v4[i] = valid && k0 + 32 * i < p.K ? __ldg(reinterpret_cast<const uint4*>(src + 32 * i))
                                             : make_uint4(0, 0, 0, 0);
        uint8_t* const dst = xs + r * sg.pitch_bytes + j * 128 + part * 8;
        if constexpr (kGroup == 128) {
          const uint32_t w[16] = {v4[0].x, v4[0].y, v4[0].z, v4[0].w, v4[1].x, v4[1].y,
                                  v4[1].z, v4[1].w, v4[2].x, v4[2].y, v4[2].z, v4[2].w,
                                  v4[3].x, v4[3].y, v4[3].z, v4[3].w};
          const float sc =
              kernels::g128_codes<true>(w, valid, [&](int i, uint32_t lo, uint32_t hi) {
                *reinterpret_cast<uint2*>(dst + 32 * i) = make_uint2(lo, hi);
              });
          if (valid && part == 0) xsc[r * sg.groups + j] = kbase + j * 128 < p.K ? sc : 0.f;
        } else {
          static_assert(kGroup == 32, "1x128 groups or MXFP8 blocks");
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            uint32_t lo, hi;
            const uint8_t code = kernels::mx8_codes_bf16(v4[i], lo, hi);
            if (valid) {
              *reinterpret_cast<uint2*>(dst + 32 * i) = make_uint2(lo, hi);
              if (part == 0)
                xsc[r * sg.groups + j * 4 + i] =
                    kbase + j * 128 + 32 * i < p.K ? e8m0_f32(code) : 0.f;
            }
          }
        }
      }
    }
  };

  // The activation group scales of slices [c0, c1) of the valid token rows into xsc (fp32; zero
  // past K), from the quantizer's (or the caller's) rows.
  auto stage_scales = [&](int64_t c0, int64_t c1) {
    if constexpr (kGroup > 0) {
      if (p.xs_kind != kXsNone) {
        const int64_t kbase = c0 * kKS;
        const int gpr = static_cast<int>((c1 - c0) * kGroupsPerSlice);
        for (int c = threadIdx.x; c < rows * gpr; c += kThreads) {
          const int r = c / gpr, j = c % gpr;
          const int64_t tok = tok0 + r;
          const int64_t gj = kbase / kGroup + j;
          xsc[r * sg.groups + j] = (gj * kGroup < p.K) ? act_group_scale(p, tok, gj) : 0.f;
        }
      }
    }
  };

  // Stage slices [c0, c1) of the valid token rows. Loads go out in batches of 8 per thread
  // before any shared store, so a chunk costs about one L2 round trip, not one per element.
  auto stage = [&](int64_t c0, int64_t c1) {
    if constexpr (kF8 && kGroup > 0) {
      if (p.act_kind == kActBf16Quant) return stage_quant(c0, c1);
    }
    const int64_t kbase = c0 * kKS;
    constexpr int kElem = kF8 ? 16 : 8;  // K values per 16-byte chunk
    const int per_row = static_cast<int>((c1 - c0) * kKS / kElem);
    const int total = rows * per_row;
    // Plain 16-byte copies (BF16/FP16 activations, or e4m3 bytes for the FP8 formats, 16-byte
    // aligned) go through cp.async: every copy of the chunk is in flight at once and costs no
    // registers, so a 32 KB chunk takes about one L2 round trip. The wait also drains the weight
    // ring's outstanding slices (at most one ahead), which the next MMAs need soon anyway.
    // (p.decode_sync_stage, FP8 with warps per tile: plain loads, so that the ring's slices
    // requested before the staging stay in flight past it.)
    const bool async_copy = p.x_vec16 && (kF8 || p.act_kind == kActRaw16) &&
                            !(kF8 && kWS > 1 && !kPipe && p.decode_sync_stage);
    if (async_copy) {
      if constexpr (kWS > 1 || kPipe || kHalf) {
        issue_stage(c0, c1, xs);
      } else {
        // The same copies with a div / mod per piece: kept for the one-warp kernels, whose
        // NVFP4 slice-loop schedule moves with any change here (see kWS above).
        for (int c = threadIdx.x; c < total; c += kThreads) {
          const int r = c / per_row, col = (c % per_row) * kElem;
          const int64_t tok = tok0 + r, k = kbase + col;
          uint8_t* dst = xs + r * sg.pitch_bytes + col * (kF8 ? 1 : 2);
          if (k < p.K) {
            const uint8_t* src = kF8 ? static_cast<const uint8_t*>(p.x) + tok * p.ldx_bytes + k
                                     : reinterpret_cast<const uint8_t*>(
                                           static_cast<const uint16_t*>(p.x) + tok * p.ldx + k);
            dec_cp_async16(dst, src);
          } else {
            *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
          }
        }
      }
      dec_cp_async_commit();
      dec_cp_async_wait<0>();
    }
    constexpr int kBatch = 4;  // 4 x 16 B in flight per thread (dequantizing sources)
    for (int c0i = async_copy ? total : threadIdx.x; c0i < total; c0i += kThreads * kBatch) {
      uint4 v[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int c = c0i + b * kThreads;
        v[b] = make_uint4(0, 0, 0, 0);
        if (c < total) {
          const int r = c / per_row, col = (c % per_row) * kElem;
          const int64_t tok = tok0 + r, k = kbase + col;
          if (k < p.K) {
            if constexpr (kF8) {
              const uint8_t* src = static_cast<const uint8_t*>(p.x) + tok * p.ldx_bytes + k;
              if (p.x_vec16) {
                v[b] = __ldg(reinterpret_cast<const uint4*>(src));
              } else {
                uint32_t w[4];
#pragma unroll
                for (int i = 0; i < 4; ++i)
                  w[i] = src[4 * i] | (uint32_t(src[4 * i + 1]) << 8) |
                         (uint32_t(src[4 * i + 2]) << 16) | (uint32_t(src[4 * i + 3]) << 24);
                v[b] = make_uint4(w[0], w[1], w[2], w[3]);
              }
            } else {
              v[b] = stage_chunk<T, kMxFold, NT == 1>(p, tok, k);
            }
          }
        }
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int c = c0i + b * kThreads;
        if (c < total) {
          const int r = c / per_row, col = (c % per_row) * kElem;
          *reinterpret_cast<uint4*>(xs + r * sg.pitch_bytes + col * (kF8 ? 1 : 2)) = v[b];
        }
      }
    }
    stage_scales(c0, c1);
  };

  // GGML formats take BF16 / FP16 activations only (no activation group scales): constant false
  // there, so their fold has no activation-scale loads or multiplies.
  constexpr bool kGgml = F == WFmt::kQ8_0 || kIq2;
  const bool has_xs = (kGroup > 0) && !kGgml && p.xs_kind != kXsNone;
  // ldmatrix row of token (nt*8 + lane&7), clamped to the staged rows.
  auto xrow = [&](int nt) -> uint8_t* {
    const int r = min(nt * 8 + (lane & 7), rows - 1);
    return (kPipe ? xcur : xs) + r * sg.pitch_bytes;
  };
  auto xsc_at = [&](int tokr, int col) -> float {
    return xsc[min(tokr, rows - 1) * sg.groups + col];
  };

  // FP4 atom a (of the warp's part of the slice) from its lane vector rv:
  // the decode with the scale splats of its rows (NVFP4: per sub-block; MXFP4 with BF16 MMAs: the
  // unit, then the atom's E8M0 splat: v * 2^-7 (exact) times 2^(e-127), exact whenever the product
  // is a BF16 number (|v| * 2^(e-127) below 2^128, above 2^-134)).
  auto decode_fp4_splat = [&](const uint4& rv, int a, uint32_t(&af)[2][4]) {
    const uint32_t w[2] = {(a % 2) ? rv.z : rv.x, (a % 2) ? rv.w : rv.y};
    uint32_t sc[2][2];
    if constexpr (F == WFmt::kNvfp4) {
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const uint2 sp = spl[warp][2 * a + s][g];  // (row g, row g+8) of sub-block 2a+s
        sc[s][0] = sp.x;
        sc[s][1] = sp.y;
      }
    } else {
      sc[0][0] = sc[0][1] = sc[1][0] = sc[1][1] = kFp4Unit2<T>();
    }
    decode_fp4_atom<T>(w, sc, af);
    if constexpr (kMxFold) {
      const uint2 sp = spl[warp][a][g];
#pragma unroll
      for (int s = 0; s < 2; ++s)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          af[s][j] = fma2<T>(af[s][j], (j & 1) ? sp.y : sp.x, kNegZero2<T>());
    }
  };

  // Decode + MMA of one slice whose activations start at staged column koff (K values).
  auto compute = [&](const uint8_t* vals, const SliceScales& cur, int64_t koff) {
    // This lane's 16-byte fragment vector v of the slice (conflict-free: lanes read
    // consecutive 16-byte slots; the IQ2 quads share one slot).
    auto raw = [&](int v) -> uint4 {
      return *reinterpret_cast<const uint4*>(vals + (v * kTr.slots + slot) * 16);
    };
    const uint4(&sc_raw)[2][2] = cur.sc;
    const int gcol0 = static_cast<int>(kGroup ? koff / kGroup : 0);
    // kSRing: this slice's ring stage (its scales in wsr).
    [[maybe_unused]] const int stg = kSRing ? static_cast<int>((vals - ring) / kChunkW) : 0;
    // kLean: each token tile's ldmatrix row address of the slice, the atoms at immediate offsets.
    [[maybe_unused]] const uint8_t* xb[NT];
    if constexpr (kLean) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) xb[nt] = xrow(nt) + (koff + (lane >> 3) * 8) * 2;
    }
    float gsc[2][kGroupsPerSlice];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t w[4] = {sc_raw[h][0].x, sc_raw[h][0].y, sc_raw[h][0].z, sc_raw[h][0].w};
#pragma unroll
      for (int j = 0; j < kGroupsPerSlice; ++j) {
        if constexpr (F == WFmt::kMxfp4 || F == WFmt::kFp8Mx) {
          gsc[h][j] = e8m0_f32((w[j / 4] >> (8 * (j % 4))) & 0xFFu);
        } else if constexpr (F == WFmt::kFp8Block) {
          const uint2 bs = kSRing ? wsr[warp][stg][0] : make_uint2(sc_raw[0][0].x, sc_raw[0][0].y);
          gsc[h][j] = __uint_as_float(j == 0 ? bs.x : bs.y);
        } else if constexpr (F == WFmt::kQ8_0) {
          gsc[h][j] = half_bits_f32((w[j / 2] >> (16 * (j % 2))) & 0xFFFFu);
        } else if constexpr (kIq2) {
          // w[0] = d, w[1..2] = sub-scale nibbles (group j in byte j/2, low nibble first)
          const uint32_t nb = w[1 + j / 8];
          const uint32_t sv = (nb >> (4 * (j % 8))) & 0xFu;
          gsc[h][j] = half_bits_f32(w[0]) * static_cast<float>(2 * sv + 1) * 0.125f;
        } else {
          gsc[h][j] = 1.f;
        }
      }
    }
    // fp32 group epilogue: acc += (tmp0 + tmp1) * (weight group scale x activation group
    // scale). A group's MMAs alternate between tmp0 and tmp1 (two independent chains), except for
    // the GGML formats (groups of one or two k16 steps) and MXFP8 (one k32 MMA per group): one
    // chain in tmp0, no adds of a zero tmp1 (the slice's other groups keep the MMAs independent).
    constexpr bool kOneChain = kGgml || (kF8 && kGroup == 32);
    auto fold = [&](float(&tmp2)[2][NT][4], int j, int parity) {
      float(&dst)[NT][4] = parity ? acc_odd : acc;  // alternate FFMA chains too
      float tmp[NT][4];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          tmp[nt][i] = kOneChain ? tmp2[0][nt][i] : tmp2[0][nt][i] + tmp2[1][nt][i];
      const float w0 = kGroup ? gsc[0][j] : 1.f;
      const float w1 = kGroup ? gsc[1][j] : 1.f;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        float x0 = 1.f, x1 = 1.f;
        if (has_xs) {
          x0 = xsc_at(nt * 8 + 2 * t, gcol0 + j);
          x1 = xsc_at(nt * 8 + 2 * t + 1, gcol0 + j);
        }
        dst[nt][0] = fmaf(tmp[nt][0], w0 * x0, dst[nt][0]);
        dst[nt][1] = fmaf(tmp[nt][1], w0 * x1, dst[nt][1]);
        dst[nt][2] = fmaf(tmp[nt][2], w1 * x0, dst[nt][2]);
        dst[nt][3] = fmaf(tmp[nt][3], w1 * x1, dst[nt][3]);
      }
    };
    float tmp[2][NT][4];
    auto zero_tmp = [&]() {
#pragma unroll
      for (int c = 0; c < 2; ++c)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) tmp[c][nt][i] = 0.f;
    };
    if constexpr (kDiag > 0) {
      // Lane (g, t)'s B words (k 4t..4t+3 and 16 + 4t.. of column g) are token 0's values of
      // atom g; at atom a != g they are zero (kDiag above). Four chains (atom parity x k16 half):
      // columns stay groups in every chain.
      const uint8_t* const xb0 = xs + koff + g * 32 + 4 * t;
      const uint32_t bw[2] = {*reinterpret_cast<const uint32_t*>(xb0),
                              *reinterpret_cast<const uint32_t*>(xb0 + 16)};
      uint32_t bwh[2][2];
      e4m3x2x2_to_f16x2(bw[0], bwh[0][0], bwh[1][0]);
      e4m3x2x2_to_f16x2(bw[1], bwh[0][1], bwh[1][1]);
      // (e4m3 mma.sync, SM12x's kind, measured 0.3-0.5 us slower on SM90 in round 105: removed.)
      constexpr int kCh = 4;
      float dt[kCh][4];
#pragma unroll
      for (int c = 0; c < kCh; ++c)
#pragma unroll
        for (int i = 0; i < 4; ++i) dt[c][i] = 0.f;
#pragma unroll
      for (int a = 0; a < kAtomsW; ++a) {
        const uint4 rv = raw(a);
        const uint32_t af[4] = {rv.x, rv.y, rv.z, rv.w};
        const bool on = g == a;
        uint32_t ah[2][4];
#pragma unroll
        for (int i = 0; i < 4; ++i) e4m3x2x2_to_f16x2(af[i], ah[0][i], ah[1][i]);
#pragma unroll
        for (int h = 0; h < 2; ++h)
          mma16816<Fp16Tag>(dt[2 * (a & 1) + h], ah[h], on ? bwh[h][0] : 0u, on ? bwh[h][1] : 0u);
      }
      // Column c = 2t + (i & 1) is group c of the slice: weight scale byte c of rows g / g + 8
      // times the token's activation scale of that group.
      uint32_t w0, w1;
      if constexpr (kSRing) {
        w0 = reinterpret_cast<const uint32_t*>(&wsr[warp][stg][g])[t >> 1] >> (16 * (t & 1));
        w1 = reinterpret_cast<const uint32_t*>(&wsr[warp][stg][g + 8])[t >> 1] >> (16 * (t & 1));
      } else {
        w0 = (t < 2 ? sc_raw[0][0].x : sc_raw[0][0].y) >> (16 * (t & 1));
        w1 = (t < 2 ? sc_raw[1][0].x : sc_raw[1][0].y) >> (16 * (t & 1));
      }
      float x0 = 1.f, x1 = 1.f;
      if (has_xs) {
        const float2 xv = *reinterpret_cast<const float2*>(xsc + gcol0 + 2 * t);
        x0 = xv.x;
        x1 = xv.y;
      }
      // e8m0_f32 by selects (its branches cost ~6 instructions each here).
      auto e8 = [](uint32_t e) {
        const uint32_t b = e == 0 ? 0x00400000u : e << 23;
        return __uint_as_float(e == 255 ? 0x7FC00000u : b);
      };
      const float f[4] = {e8(w0 & 0xFFu) * x0, e8((w0 >> 8) & 0xFFu) * x1, e8(w1 & 0xFFu) * x0,
                          e8((w1 >> 8) & 0xFFu) * x1};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float s = (dt[0][i] + dt[1][i]) + (dt[2][i] + dt[3][i]);
        acc[0][i] = fmaf(s, f[i], acc[0][i]);
      }
    } else if constexpr (kF8) {
      // Undecoded e4m3 weight fragments x e4m3 activations, one m16n8k32 MMA per atom and n8.
      // FP8 MMAs may accumulate with reduced precision inside the tensor core (Hopper): partial
      // sums are promoted to the fp32 accumulators at least every 128 K (per scale group).
      constexpr int kAtomsPerGroup = kGroup ? kGroup / 32 : 4;
      static_assert(kAtomsW % kAtomsPerGroup == 0, "whole scale groups per (half) slice");
#pragma unroll
      for (int a = 0; a < kAtomsW; ++a) {
        const uint4 rv = raw(a);
        const uint32_t af[4] = {rv.x, rv.y, rv.z, rv.w};
        uint32_t bf[NT][2];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          ldmatrix_x2(bf[nt], xrow(nt) + koff + a * 32 + ((lane >> 3) & 1) * 16);
        if constexpr (kF16) {
          // k32 fragments (lane t: k 4t..4t+3 in registers 0 / 1, 16 + 4t.. in 2 / 3) as two k16
          // f16 MMAs over a permuted K, the lowering ptxas uses: MMA h takes the half h of every
          // register (k 4t + 2h, 4t + 2h + 1 and 16 + 4t + 2h, ..), for A and B alike.
          uint32_t ah[2][4];
#pragma unroll
          for (int i = 0; i < 4; ++i) e4m3x2x2_to_f16x2(af[i], ah[0][i], ah[1][i]);
          if (kGroup > 0 ? a % kAtomsPerGroup == 0 : a == 0) zero_tmp();
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            uint32_t bh[2][2];
            e4m3x2x2_to_f16x2(bf[nt][0], bh[0][0], bh[1][0]);
            e4m3x2x2_to_f16x2(bf[nt][1], bh[0][1], bh[1][1]);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              if constexpr (kGroup == 0) {
                // Four chains per token tile (odd atoms in tmp, added once per slice below).
                float(&d)[4] = (a & 1) ? tmp[h][nt] : h ? acc_odd[nt] : acc[nt];
                mma16816<Fp16Tag>(d, ah[h], bh[h][0], bh[h][1]);
              } else {
                mma16816<Fp16Tag>(tmp[kOneChain ? 0 : h][nt], ah[h], bh[h][0], bh[h][1]);
              }
            }
          }
          if constexpr (kGroup > 0) {
            if (a % kAtomsPerGroup == kAtomsPerGroup - 1)
              fold(tmp, a / kAtomsPerGroup, (a / kAtomsPerGroup) & 1);
          } else if (a == kAtomsW - 1) {
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
              for (int i = 0; i < 4; ++i) {
                acc[nt][i] += tmp[0][nt][i];
                acc_odd[nt][i] += tmp[1][nt][i];
              }
          }
        } else {
          if (a % kAtomsPerGroup == 0) zero_tmp();
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
            mma16832_e4m3(tmp[(a % kAtomsPerGroup) & 1][nt], af, bf[nt][0], bf[nt][1]);
          if (a % kAtomsPerGroup == kAtomsPerGroup - 1)
            fold(tmp, kGroup ? a / kAtomsPerGroup : 0, (a / kAtomsPerGroup) & 1);
        }
      }
    } else {
#pragma unroll
      for (int a = 0; a < kAtomsW; ++a) {
        uint32_t af[2][4];
        const uint4 rv = raw(a / kApv);
        if constexpr (F == WFmt::kNvfp4 || F == WFmt::kMxfp4) {
          decode_fp4_splat(rv, a, af);
        } else if constexpr (F == WFmt::kQ8_0) {
          decode_byte_atom<T, true>(rv, af);
        } else if constexpr (kIq2) {
          decode_iq2_atom<T>(rv, gtab, stab, t, af);
        } else {
          decode_byte_atom<T, false>(rv, af);  // unused: FP8 weights take the kF8 path
        }
        // B fragments: ldmatrix.x4 over [tokens 0-7 of tile nt][k 32a .. 32a+31]
        uint32_t bf[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          if constexpr (kLean)
            ldmatrix_x4(bf[nt], xb[nt] + a * 64);
          else
            ldmatrix_x4(bf[nt], xrow(nt) + (koff + a * 32 + (lane >> 3) * 8) * 2);
        }
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          const int kstep = 2 * a + s;  // k16 step within the slice
          if constexpr (kGroup == 0) {
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
              mma16816<T>(s ? acc_odd[nt] : acc[nt], af[s], bf[nt][2 * s], bf[nt][2 * s + 1]);
          } else {
            constexpr int kStepsPerGroup = kGroup / 16;
            if (kstep % kStepsPerGroup == 0) zero_tmp();
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
              mma16816<T>(tmp[kOneChain ? 0 : (kstep % kStepsPerGroup) & 1][nt], af[s],
                          bf[nt][2 * s], bf[nt][2 * s + 1]);
            if (kstep % kStepsPerGroup == kStepsPerGroup - 1)
              fold(tmp, kstep / kStepsPerGroup, (kstep / kStepsPerGroup) & 1);
          }
        }
      }
    }
  };

  // ---- pipeline: kStages-1 slices in flight per warp, staging once per chunk.
  SliceScales cur, nxt;
  if (active) {
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) {
      if (s_begin + i * kStep < s_end) issue_values(s_begin + i * kStep, i);
      dec_cp_async_commit();  // empty groups keep the group count uniform
    }
    if (s_begin < s_end) load_scales(s_begin, cur);
    // p.stream_trig (FP8 weights, Plan::stream_trig bit 8): the warp's last weight values are
    // requested (here, or in fetch below), so the next call's CTAs may take free slots and
    // request theirs during this call's tail (their griddep_wait still waits for this grid's
    // completion and stores).
    if (kTrig && p.stream_trig && s_begin + (kStages - 1) * kStep >= s_end)
      griddep_launch_dependents();
  }
  griddep_wait();  // activations, scales of x and the output belong to earlier kernels

  int64_t chunk_begin = s_begin, chunk_end = s_begin;
  int cbuf = 0;  // kPipe: staging buffer of the current chunk
  if constexpr (kPipe) {
    chunk_begin = c_begin;
    chunk_end = min(c_end, c_begin + p.stage_slices);
    if (c_begin < c_end) stage(c_begin, chunk_end);  // the first chunk at once, into buffer 0
    __syncthreads();  // also orders the LUT / IQ2 table fills before the first decode
  }
  if constexpr (kWS > 1 && !kPipe) {
    // The CTA's whole K range at once (its warps work on different parts of it): no barrier in
    // the slice loop, whose trip counts differ between the K parts.
    chunk_begin = c_begin;
    chunk_end = c_end;
    if constexpr (kXsh) {
      // Every CTA's barrier is initialized (cluster barrier); rank r's share of each row is its
      // 16-byte pieces [r / S, (r + 1) / S) of the row's xvb bytes, issued by thread `row`.
      xsh_cluster_wait();
      if (threadIdx.x == 0) xsh_bar_arm(xbar, static_cast<uint32_t>(rows * xvb));
      const int S = p.decode_xshare;
      const int r = static_cast<int>(cluster_rank());
      const int64_t pieces = xvb / 16;
      const int64_t lo = pieces * r / S * 16, hi = pieces * (r + 1) / S * 16;
      if (threadIdx.x < rows && hi > lo)
        xsh_bulk_multicast(
            static_cast<uint32_t>(__cvta_generic_to_shared(xs + threadIdx.x * sg.pitch_bytes + lo)),
            static_cast<const uint8_t*>(p.x) + (tok0 + threadIdx.x) * p.ldx_bytes + c_begin * kKS +
                lo,
            static_cast<uint32_t>(hi - lo), xbar, static_cast<uint16_t>((1u << S) - 1));
      // The last slice's columns past K (16-byte pieces: K % 16 == 0, launcher).
      const int tail = static_cast<int>(((c_end - c_begin) * kKS - xvb) / 16);
      for (int i = threadIdx.x; i < rows * tail; i += kThreads)
        *reinterpret_cast<uint4*>(xs + (i / tail) * sg.pitch_bytes + xvb + (i % tail) * 16) =
            make_uint4(0, 0, 0, 0);
      // Block FP8 (session 29): the rows' group scales, per CTA (4 bytes per row and 128 K: no
      // sharing needed), while the multicasts land.
      stage_scales(c_begin, c_end);
      xsh_bar_wait(xbar);
    } else {
      if (c_begin < c_end) stage(c_begin, c_end);
    }
    __syncthreads();  // also orders the LUT / IQ2 table fills before the first decode
  }
  // Barriers inside depend only on block-uniform values (slice indices), never on `active`.
  auto ensure_staged = [&](int64_t sl) {
    if (kWS > 1 || kPipe || sl < chunk_end) return;
    if (sl != s_begin) __syncthreads();  // readers of the previous chunk are done
    chunk_begin = sl;
    chunk_end = min(s_end, sl + p.stage_slices);
    stage(chunk_begin, chunk_end);
    __syncthreads();  // also orders the LUT / IQ2 table fills before the first decode
  };
  // Per slice of a warp with a tile: the refill of the ring stage read one slice ago, the next
  // slice's scales, the wait for this slice's values; then the NVFP4 / MXFP4 scale splats.
  auto fetch = [&](int64_t sl, int st) {
    __syncwarp();  // every lane has finished reading the stage refilled below (slice sl-1)
    if (sl + (kStages - 1) * kStep < s_end) {
      issue_values(sl + (kStages - 1) * kStep, (st + kStages - 1) % kStages);
      if (kTrig && p.stream_trig && sl + kStages * kStep >= s_end) griddep_launch_dependents();
    }
    dec_cp_async_commit();
    if (sl + kStep < s_end) load_scales(sl + kStep, nxt);
    dec_cp_async_wait<kStages - 1>();  // this lane's copies of slice sl have landed...
    __syncwarp();                      // ...and so have every other lane's
  };
  auto expand_splats = [&]() {
    if constexpr (kHalf && F == WFmt::kNvfp4) {
      // The half's 16 sub-blocks: lane t of a quad expands 4t..4t+3 (one scale word per row).
#pragma unroll
      for (int i = 0; i < 4; ++i)
        spl[warp][4 * t + i][g] = make_uint2(lut[(cur.sc[0][0].x >> (8 * i)) & 0x7Fu],
                                             lut[(cur.sc[1][0].x >> (8 * i)) & 0x7Fu]);
      __syncwarp();
    } else if constexpr (kHalf && F == WFmt::kMxfp4) {
      // MXFP4: the half's 8 atoms; lane t of a quad expands 2t, 2t + 1 (scale bytes 2t, 2t + 1).
      const uint32_t w0 = (t & 2 ? cur.sc[0][0].y : cur.sc[0][0].x) >> (16 * (t & 1));
      const uint32_t w1 = (t & 2 ? cur.sc[1][0].y : cur.sc[1][0].x) >> (16 * (t & 1));
#pragma unroll
      for (int i = 0; i < 2; ++i)
        spl[warp][2 * t + i][g] = make_uint2(e8m0_bf16_splat((w0 >> (8 * i)) & 0xFFu),
                                             e8m0_bf16_splat((w1 >> (8 * i)) & 0xFFu));
      __syncwarp();
    } else if constexpr (F == WFmt::kNvfp4) {
      // The previous slice's readers of spl are past the __syncwarp at the top of the loop.
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const uint32_t w0 = i < 4 ? cur.sc[0][0].x : cur.sc[0][0].y;
        const uint32_t w1 = i < 4 ? cur.sc[1][0].x : cur.sc[1][0].y;
        spl[warp][8 * t + i][g] =
            make_uint2(lut[(w0 >> (8 * (i % 4))) & 0x7Fu], lut[(w1 >> (8 * (i % 4))) & 0x7Fu]);
      }
      __syncwarp();
    } else if constexpr (kMxFold) {
      // Lane t of a quad expands atoms 4t..4t+3 (scale bytes 4t..4t+3 of rows g, g+8).
      const uint32_t w0 = t == 0   ? cur.sc[0][0].x
                          : t == 1 ? cur.sc[0][0].y
                          : t == 2 ? cur.sc[0][0].z
                                   : cur.sc[0][0].w;
      const uint32_t w1 = t == 0   ? cur.sc[1][0].x
                          : t == 1 ? cur.sc[1][0].y
                          : t == 2 ? cur.sc[1][0].z
                                   : cur.sc[1][0].w;
#pragma unroll
      for (int i = 0; i < 4; ++i)
        spl[warp][4 * t + i][g] = make_uint2(e8m0_bf16_splat((w0 >> (8 * i)) & 0xFFu),
                                             e8m0_bf16_splat((w1 >> (8 * i)) & 0xFFu));
      __syncwarp();
    }
  };
  int st = 0;
  if constexpr (kPipe) {
    // Chunks [cb, ce) of stage_slices slices (block-uniform); this warp's slices in a chunk are
    // cb + wk, cb + wk + kWS, ...
    for (int64_t cb = c_begin; cb < c_end; cb += p.stage_slices) {
      const int64_t ce = min(c_end, cb + p.stage_slices);
      const int64_t sl0 = cb + (kHalf ? 0 : wk);
      const bool mine = active && sl0 < ce;
      // The chunk's copies were committed when the previous chunk's first slice was fetched,
      // followed by >= kStages - 1 more fetches of this warp (stage_slices >= (kStages - 1) x
      // kWS, launcher): the wait in this fetch covers them. Warps without a slice here (no tile,
      // or a short last chunk) wait for everything.
      if (mine) fetch(sl0, st);
      if (cb != c_begin) {
        if (!mine) dec_cp_async_wait<0>();
        __syncthreads();  // every thread's copies landed; every warp is done with the last chunk
        cbuf ^= 1;
        xcur = cbuf ? xs1 : xs;
      }
      chunk_begin = cb;
      if (ce < c_end) {
        // The next chunk into the other buffer, whose last readers passed the barrier above (or,
        // for the first chunk, never existed).
        issue_stage(ce, min(c_end, ce + p.stage_slices), cbuf ? xs : xs1);
        dec_cp_async_commit();
      }
      if (!mine) continue;
      for (int64_t sl = sl0; sl < ce; sl += kWS) {
        if (sl != sl0) fetch(sl, st);
        expand_splats();
        compute(ring + st * kChunkW, cur, (sl - cb) * kKS + (kHalf ? wk * kAtomsW * 32 : 0));
        cur = nxt;
        st = (st + 1 == kStages) ? 0 : st + 1;
      }
    }
  } else {
    for (int64_t sl = s_begin; sl < s_end; ++sl) {
      ensure_staged(sl);
      if (active) {
        fetch(sl, st);
        expand_splats();
        compute(ring + st * kChunkW, cur,
                (sl - chunk_begin) * kKS + (kHalf ? wk * kAtomsW * 32 : 0));
        cur = nxt;  // loaded a whole slice of compute ago: no stall
      }
      st = (st + 1 == kStages) ? 0 : st + 1;
    }
  }
  griddep_launch_dependents();
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[nt][i] += acc_odd[nt][i];
  constexpr int kSums = NT * 4;  // floats per lane handed between warps
  if constexpr (kParts > 1) {
    // K parts 1.. of each tile hand their sums to part 0 (the same lane holds the same outputs).
    // kPipe: at the start of each warp's own (drained) ring. kHalf: the part-k warps write slot
    // w % 4.
    __shared__ float wred_static[kPipe ? 1 : kWS == 8 ? 8 : 4][32][NT * 4];
    auto wred = [&](int w) -> float* {
      return kPipe ? reinterpret_cast<float*>(dsm + w * (kStages * kChunkW)) + lane * kSums
                   : wred_static[kHalf ? w % 4 : w][lane];
    };
    if (wk > 0) {
      if constexpr (kPipe) __syncwarp();  // every lane's last reads of the ring are done
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) wred(warp)[nt * 4 + i] = acc[nt][i];
    }
    __syncthreads();
    if (wk == 0) {
#pragma unroll
      for (int k = 1; k < kParts; ++k)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[nt][i] += wred(wt + k * kTilesPerCta)[nt * 4 + i];
    }
    // K parts > 0 stay for the cluster barriers below (their sums are not used) and return after.
  }
  // ---- split-K across a cluster: ranks > 0 hand their partial sums to rank 0 via DSMEM.
  // kPipe: in the warp's own ring, drained by now (every copy into it was waited for), after the
  // K-part sums above, which keeps the pipelined kernel at three CTAs per SM90 SM.
  // kHalf / 8 warps per tile: slot wt, written by part 0 only (the other parts' sums are in part
  // 0's by now).
  constexpr bool kPart0Red = kHalf || kWS == 8;
  __shared__ float red_static[kPipe ? 1 : 4][32][NT * 4];
  float* const red = kPipe ? reinterpret_cast<float*>(ring + 32 * NT * 16) + lane * kSums
                           : red_static[kPart0Red ? wt : warp][lane];
  if (p.cluster_split > 1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    __trap();  // clusters need SM90+; the plan never sets cluster_split on SM89 (dev.cc_major >= 9)
#else
    if constexpr (kPipe) __syncwarp();  // every lane's last reads of the ring are done
    if (!kPart0Red || wk == 0) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) red[nt * 4 + i] = acc[nt][i];
    }
    cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
    cl.sync();
    const unsigned rank = cl.block_rank();
    if (rank == 0) {
      // All remote loads are issued before the adds (one DSMEM round trip, not seven).
      const unsigned nb = cl.num_blocks();
      float part[7][kSums];
#pragma unroll
      for (int r = 1; r < 8; ++r) {
        if (static_cast<unsigned>(r) < nb) {
          const float* rr = cl.map_shared_rank(red, static_cast<unsigned>(r));
#pragma unroll
          for (int i = 0; i < kSums; ++i) part[r - 1][i] = rr[i];
        }
      }
#pragma unroll
      for (int r = 1; r < 8; ++r) {
        if (static_cast<unsigned>(r) < nb) {
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[nt][i] += part[r - 1][nt * 4 + i];
        }
      }
    }
    cl.sync();  // remote shared memory stays alive until rank 0 has read it
    if (rank != 0) return;
#endif
  }
  if (kParts > 1 && wk > 0) return;
  if (!active) return;

  if constexpr (kDiag > 0) {
    // The columns (groups) of rows g / g + 8 summed over the quad: token 0's outputs in c0 / c2.
#pragma unroll
    for (int h = 0; h < 2; ++h) acc[0][2 * h] = quad_sum(acc[0][2 * h] + acc[0][2 * h + 1]);
  }
  // ---- epilogue: c0 = (row g, tok 2t), c1 = (row g, tok 2t+1), c2/c3 = row g+8
  float mult = p.out_mult;
  if (p.alpha != nullptr) mult *= *p.alpha;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = (i < 2) ? row_g : row_g8;
      const int64_t tok = tok0 + nt * 8 + 2 * t + (i & 1);
      if (tok >= p.M) continue;
      if (p.partial != nullptr) {
        p.partial[(static_cast<int64_t>(blockIdx.y) * p.M + tok) * p.NP + row] = acc[nt][i];
      } else if (row < p.N) {
        store_out_elem(p, tok, row, acc[nt][i], mult);
      }
    }
  }
}

}  // namespace b12x::gemm::lin
