// SM90 (Hopper) wgmma tiled kernel of the GGML weight formats (Q8_0, IQ2_XXS, IQ2_XS): the swapped
// GEMM of linear_tiled_sm90.cuh (D[weight row][token], weights = wgmma's register A operand decoded
// from the packed atoms, activations = the 128-byte-swizzled shared-memory B operand) with the
// per-group fp32 weight scales of the mma.sync kernel's group mode.
//
// Why a partial per group: Q8_0 d x q and IQ2 d x (2s+1)/8 x grid are not BF16 / FP16 numbers, so
// the scales cannot be folded into the operands. The packed values decode to exact integers (the
// group-mode decoders of linear_common.cuh), every K group (32, or 16 for IQ2_XS) runs its k16
// wgmmas into a partial started from zero (scale-d = 0), and the partial is promoted into the fp32
// accumulators: acc[row][token] += scale[row][group] * partial. The accumulator rows of a thread
// are weight rows 16 warp + g and + 8, so each thread needs two fp32 scales per group.
//
// Schedule (var 0): every partial's wgmmas are drained (wait_group 0) before its promotion reads
// it; with 64 accumulators + 64 partials per thread the CTA (2 warpgroups, 128 rows x 128 tokens)
// runs one per SM, and the two warpgroups' promotions and wgmmas interleave on the tensor pipe.
// Probes: two partial sets with each promotion issued after the next partial's wgmmas (wait_group
// 1; the stage's last partial is drained, so no wgmma is in flight across the stage barrier or
// while the next stage's A fragments are decoded; ptxas reports no C7514 serialization), 256
// tokens (two m64n128 units per K group into the same partial in turn: half the weight traffic
// and decode per MAC) and 256 rows (two 64-row sets per warpgroup: half the activation traffic
// per MAC), each at 128 accumulators per thread. (An mbarrier pipeline without the per-stage CTA
// barrier, as the wgmma kernel's probe, measured 5-15% slower on the H200 in round 13 and was
// removed.)
//
// Pipeline: all 256 threads issue cp.async copies for the stage kStages-1 ahead (activation rows
// with the swizzle, the CTA's eight packed tile runs of the stage, the stage's raw scale words of
// each row), fence.proxy.async, one CTA barrier per stage; the refilled slot's wgmmas were drained
// before that barrier. Var 3 (kLateCopy) issues those copies after the stage's second unit of
// wgmmas rather than right after the barrier (round 17: +2-4% for Q8_0, +6-11% for IQ2_XS), and
// decodes the stage's second atom under the first unit's wgmmas.
// The default at 256 tokens since session 12 (var 13: kGroupWs | kGroupPair | kGroupChain) is
// warp-specialized instead: a producer warpgroup issues every copy into a ring of per-slot full /
// empty mbarriers, the two MMA warpgroups never meet at a CTA barrier (one's decode and
// promotions run under the other's wgmmas), and each consumes stages in pairs whose unit chain
// runs on across the pair (one wgmma drain per 128 K): round 46, M = 2048, +17-22% Q8_0, +15-17%
// IQ2_XXS, +5-6% IQ2_XS over var 3 (warp-specialized alone, var 10: +5-8% / +3-12% / -5-+1%).
// Session 13 (rounds 48-49) made the defaults per format on that schedule: Q8_0 16 (the chain
// across four stages, kGroupQuad), IQ2_XXS 17 (16 with computed sign masks), IQ2_XS 23 (the
// sub-scales folded into FP16 weights, kGroupFold, one promotion per 64 K; BF16 activations
// behind the FP16 pre-pass of linear_tiled_sm90_group.cu), and at 128 tokens 21 / 22 (the same
// schedule in two m64n64 units; 22 folded). Session 16 (rounds 59-61): the IQ2 sign masks by
// one IMAD + LOP3 (decode_iq2_atom), 23's (2s + 1) splats by IMAD + HFMA2 and its unit 0 split
// around atom 1's decode (kGroupSplit): IQ2_XXS 17 -7-12 %, IQ2_XS 23 -16-19 % time at M = 2048;
// IQ2_XXS on FP16 activations takes 23. Session 18 (rounds 68-69): IQ2 takes 52 at 256 tokens
// and 53 at 128 (kGroupRescale: the folded weights accumulated straight into the accumulators,
// rescaled per 256-K super-block; no partials, no promotions), on BF16 behind the pre-pass too:
// +16-27 % over 17 / 23 at M = 2048, 20-33 % over 21 / 22 at 128 tokens (17, 22, 23 removed;
// Q8_0 keeps 16 / 21).
// Epilogue as in linear_tiled_sm90.cuh.
//
// SM90 only: the body compiles under __CUDA_ARCH_FEAT_SM90_ALL and traps elsewhere; the host
// dispatches it only on compute capability 9.0.
#pragma once

#include "gemm/kernels/linear_common.cuh"
#include "gemm/kernels/linear_tiled_sm90.cuh"  // wg:: wgmma / descriptor / fence / cp.async

namespace b12x::gemm::lin {

/// True for the formats of the group wgmma kernel.
B12X_HD constexpr bool wgmma_group_format_ok(WFmt f) {
  return f == WFmt::kQ8_0 || f == WFmt::kIq2Xxs || f == WFmt::kIq2Xs;
}

/// m64n64k16 wgmma (A from registers, B from a shared-memory descriptor; scale_d = 0 starts the
/// 32 accumulators from zero): the 64-token partial units of the overlapped 256-token schedule.
/// (linear_tiled_sm90.cuh's wrappers are m64n128 only.)
template <class T>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], const uint32_t (&a)[4],
                                                uint64_t desc, int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define B12X_WGMMA_N64(TY)                                                                         \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                                 \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY                                      \
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "    \
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                         \
      "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"                                                \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),        \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                         \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d))
  if constexpr (T::kFp16) {
    B12X_WGMMA_N64("f16");
  } else {
    B12X_WGMMA_N64("bf16");
  }
#undef B12X_WGMMA_N64
#endif
}

template <WFmt F, class T, int kTokens, int kRowSetsPerWg = 1, bool kOverlapped = false,
          int kUnitTokens = 128, int kFoldK = 0>
struct WgmmaGroupCfg {
  /// 64-row sets per warpgroup: 1, or 2 (each warp decodes two 16-row tiles and issues the
  /// wgmmas of both into the same partial in turn: half the activation traffic per MAC).
  static constexpr int kRowSets = kRowSetsPerWg;
  static constexpr int kRows = 128 * kRowSets;  ///< weight rows per CTA (2 warpgroups)
  /// Tokens per CTA: 128 or 256 (half the decode and copy work per MAC, 128 accumulators per
  /// thread).
  static constexpr int kTok = kTokens;
  /// Partial units per K group: (row set, token block of kUnitN = 128 or 64 tokens), each an
  /// m64 x kUnitN wgmma chain promoted into its own kPart accumulators.
  static constexpr int kUnitN = kUnitTokens;
  static constexpr int kTokUnits = kTok / kUnitN;
  static constexpr int kPart = kUnitN / 2;
  static constexpr int kUnitsPerGroup = kTokUnits * kRowSets;
  /// Two partial sets: a unit's promotion overlaps the next unit's wgmmas within the stage (one
  /// unit per group only: 64 accumulators + 2 x 64 partials).
  static constexpr bool kOverlap = kOverlapped;
  static constexpr int kThreads = 256;
  static constexpr WTraits kTr = wtraits(F);
  static constexpr bool kIq2 = F == WFmt::kIq2Xxs || F == WFmt::kIq2Xs;
  static constexpr int kBK = 64;  ///< K per stage (128-byte activation rows)
  /// kFold (IQ2 on FP16 wgmmas; kFoldK = 32 or 64): the sub-scales folded into the decoded
  /// weights, which are then the exact integers +-(2s+1) x grid <= 1333 (FP16 holds every integer
  /// up to 2048, BF16 does not): one fp32 promotion by d / 8 per kFoldK instead of one per 32
  /// (IQ2_XXS) / 16 (IQ2_XS) K.
  static constexpr bool kFold = kFoldK > 0;
  static constexpr int kGroup = kFold ? kFoldK : kTr.group;  ///< K per fp32 weight scale
  static constexpr int kGroups = kBK / kGroup;
  static constexpr int kStepsPerGroup = kGroup / 16;  ///< k16 wgmmas per partial
  static constexpr int kActBytes = kTok * 128;
  static constexpr int kWTileBytes = (kBK / 32) * kTr.slots * 16;  ///< 16 rows x kBK, packed
  static constexpr int kWBytes = (kRows / 16) * kWTileBytes;
  /// Raw scale words per row and stage: Q8_0 the two fp16 d of the stage; IQ2 the aligned u32
  /// holding the super-block's fp16 d, then the aligned u32 holding the stage's sub-scales.
  static constexpr int kSWords = kIq2 ? 2 : 1;
  static constexpr int kSBytes = kRows * kSWords * 4;
  static constexpr int kStageBytes = (kActBytes + kWBytes + kSBytes + 1023) / 1024 * 1024;
  static constexpr int kSmemLimit = 232448;  // SM90 opt-in maximum per block
  static constexpr int kTabWords = kIq2 ? (F == WFmt::kIq2Xs ? 512 * 4 : 256 * 4) + 512 : 0;
  static constexpr int kMaxStages = (kSmemLimit - kTabWords * 4 - 1024) / kStageBytes;
  static constexpr int kStages = kMaxStages > 6 ? 6 : kMaxStages;
  static constexpr int kEpPitch = kRows * 2 + 16;  // bytes per staged output row (token)
  static constexpr int kPipeBytes = kStages * kStageBytes;
  static constexpr int kSmemBytes =
      (kPipeBytes > kTok * kEpPitch ? kPipeBytes : kTok * kEpPitch) + 1024;  // + alignment
  static constexpr int kAcc = kPart * kUnitsPerGroup;  // fp32 accumulators per thread
  static_assert(kTok == 128 || kTok == 256, "128- or 256-token CTAs");
  static_assert(kUnitN == 128 || kUnitN == 64, "m64n128 or m64n64 partial units");
  static_assert(kRowSets == 1 || kRowSets == 2, "one or two 64-row sets per warpgroup");
  static_assert(kAcc <= 128, "at most 128 accumulators per thread");
  static_assert(!kOverlap || kAcc + 2 * kPart <= 192, "overlapped promotion: two partial sets");
  static_assert(kStages >= 3, "pipeline depth");
  static_assert(wgmma_group_format_ok(F), "group wgmma kernel: Q8_0, IQ2_XXS, IQ2_XS");
  static_assert(!kFold || (kIq2 && T::kFp16), "folded sub-scales: IQ2 on FP16 wgmmas");
  static_assert(kBK % kGroup == 0 && kGroup % 16 == 0, "whole groups per stage");
  static_assert(kSmemBytes + kTabWords * 4 <= kSmemLimit, "group wgmma kernel exceeds 227 KB");
};

/// kLateCopy (256 tokens: kUnits >= 2): the stage's refill copies are issued after the second
/// unit's wgmmas (the first unit's are followed by the late atom decode) instead of right after
/// the stage barrier, so the tensor pipe starts earlier after the barrier. kAluSign: IQ2 sign
/// masks computed (decode_iq2_atom<T, true>; variant 4).
/// kMode bits: kGroupPair = two 64-K stages per CTA barrier (kGroupWs: the MMA warps consume the
/// ring in pairs of slots); kGroupChain (with kGroupPair): the unit chain runs on across the
/// pair's two stages (the second stage's first atom decoded and its first unit issued before the
/// first stage's last unit is retired and promoted: one drain per pair instead of per stage).
/// kGroupWs: warp-specialized as the BF16-operand wgmma kernel's variant 3 — a producer
/// warpgroup (setmaxnreg down to kGroupProdRegs) issues every copy of the ring and the two MMA
/// warpgroups (up to kGroupConsRegs) only wait for full slots (per-slot mbarriers) and release them
/// (empty mbarriers): no CTA barrier and no copy issue in the MMA warps, whose warpgroups run
/// desynchronized (one's promotion and decode under the other's wgmmas).
/// kGroupQuad (with kGroupWs | kGroupChain, instead of kGroupPair): the chain runs across four
/// stages (one drain per 256 K) and each slot is released once its last unit retired (in the next
/// stage), not after the group. (A chain across the whole K loop, a wgmma in flight over the loop's
/// back edge, made ptxas serialize every wgmma: C7514.)
/// kGroupFold: WgmmaGroupCfg::kFold with a promotion per 64 K (IQ2, FP16 wgmmas; per 32 K
/// measured slower in round 48, IQ2_XS 184.2 against 179.7 us at 4096x4096, M = 2048).
/// (kGroupSplit = 32, session 16's unit 0 of 23 split around atom 1's decode: removed with 23 in
/// session 18.)
/// kGroupRescale (with kGroupWs | kGroupFold; probe 50 of session 18): no partials and no
/// promotions. Within a 256-K super-block the IQ2 weight scale d / 8 is one number per row, and
/// the folded weights +-grid x (2s + 1) carry the rest, so the wgmmas of a super-block's four
/// stages accumulate straight into the accumulators, kept in units of the row's d: at each
/// super-block's start (nothing in flight) they are multiplied by d_prev / d_new (2 x 64 FMUL per
/// 256 K instead of 4 x 128 FFMA promotions), and by d_last / 8 before the epilogue. A zero d
/// keeps the previous unit and zeroes its super-block's splats. One m64 x kTok x k16 wgmma per k16
/// step (its accumulator layout is the m64n64 units' one), the A fragments double-buffered across
/// stages, one drain per super-block. Round 68 (M = 2048, 256 tokens, us, 23 -> 50 on FP16
/// activations): IQ2_XS 143.81 / 482.98 / 522.62 / 211.67 / 120.28 -> 121.59 / 407.56 / 420.45 /
/// 177.63 / 97.27 over 4096x4096 / 14336x4096 / 4096x14336 / 6144x4096 / 2048x7168. The outputs
/// differ from 23's by relerr 1.4e-4 (K = 4096) to 2.8e-4 (K = 14336) in BF16: the tensor cores'
/// fp32 accumulation now runs over the whole K (as cuBLAS's) instead of 64-K partials promoted by
/// FFMA. The next super-block's first stage is decoded before the drain (round 69, M = 2048, 50
/// -> 52: IQ2_XS +2-5 %, IQ2_XXS +0.3-4 %, bit-identical; 50 / 51 decoded it after, removed).
inline constexpr int kGroupPair = 1, kGroupQuad = 2, kGroupFold = 4, kGroupChain = 8, kGroupWs = 16,
                     kGroupRescale = 64;
B12X_HD constexpr int wgmma_group_fold_k(int mode) {
  return (mode & kGroupFold) != 0 ? 64 : 0;
}
/// Register budgets of kGroupWs: 128 x 56 + 256 x 224 = 384 x 168 (the launch's); no spills
/// (the producer's copy addresses stepped, not hoisted; 40 / 232 spilled in the producer).
inline constexpr int kGroupProdRegs = 56, kGroupConsRegs = 224;
B12X_HD constexpr int wgmma_group_threads(int mode) {
  return (mode & kGroupWs) != 0 ? 384 : 256;
}

template <WFmt F, class T, int kTokens, int kRowSets, bool kOverlap, int kUnitN,
          bool kLateCopy = false, bool kAluSign = false, int kMode = 0>
__global__ void __launch_bounds__(wgmma_group_threads(kMode), 1)
    linear_wgmma_group_kernel(const LinearParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = WgmmaGroupCfg<F, T, kTokens, kRowSets, kOverlap, kUnitN, wgmma_group_fold_k(kMode)>;
  // Stages per CTA barrier (kPer) and the ring in whole barrier groups of kPer slots.
  constexpr bool kRescale = (kMode & kGroupRescale) != 0;
  constexpr int kPer = (kMode & (kGroupQuad | kGroupRescale)) != 0 ? 4
                       : (kMode & kGroupPair) != 0                 ? 2
                                                                   : 1;
  constexpr bool kChain = (kMode & kGroupChain) != 0;
  static_assert(kRescale == C::kFold, "the folded weights: with the rescaled accumulators only");
  static_assert(!kRescale || (C::kFold && (kMode & kGroupWs) != 0 && !kChain && C::kRowSets == 1 &&
                              C::kAcc == C::kTok / 2),
                "rescaled accumulators: the folded warp-specialized kernel, one m64 x kTok wgmma");
  static_assert(!kChain || (kPer >= 2 && kOverlap && C::kRowSets == 1 && C::kTokUnits > 1),
                "the chained pair: overlapped 256-token units");
  static_assert(kPer < 4 || kRescale || (kChain && (kMode & kGroupWs) != 0),
                "chained quads: warp-specialized");
  constexpr bool kWs = (kMode & kGroupWs) != 0;
  // kWs: the ring stays slot-wise (kPer = 2 / 4 there: the MMA warps' chained pair, each slot
  // released after the pair, or quad, each slot released once its last unit retired).
  constexpr int kStages = kWs ? C::kStages : C::kStages / kPer * kPer;
  constexpr int kRing = kStages / kPer;  // barrier groups in the ring
  static_assert(kWs || kRing >= 2, "pipeline depth in barrier groups");
  constexpr int kTok = C::kTok;
  constexpr int kAhead = kRing - 1;  // barrier groups in flight ahead of the consumed one
  static_assert(!kWs || !kLateCopy, "warp-specialized: no copies in the MMA warps");
  static_assert(!kWs || kPer == 1 || kChain || kRescale, "warp-specialized pairs: chained");
  constexpr int kCT = kWs ? 128 : C::kThreads;  // threads issuing the copies

  extern __shared__ uint8_t smem_raw[];
  __shared__ alignas(16) uint32_t gtab[C::kIq2 ? (F == WFmt::kIq2Xs ? 512 * 4 : 256 * 4) : 4];
  __shared__ alignas(16) uint32_t stab[C::kIq2 ? 512 : 4];
  // The 128B swizzle pattern repeats every 1024 bytes and wgmma computes it from the address:
  // stages start on 1024-byte boundaries.
  const uint32_t sbase =
      (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  uint8_t* const sgen =
      smem_raw + (sbase - static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)));

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  // This warp among the MMA warps (kWs: warpgroup 0 is the producer).
  const int cw = kWs ? warp - 4 : warp;
  // 16-row tile of row set rs of this warp (warp w of warpgroup wg: rows 16w.. of each of the
  // warpgroup's 64-row sets).
  auto tile_of = [&](int rs) { return ((cw >> 2) * C::kRowSets + rs) * 4 + (cw & 3); };
  const int2 tile = wgmma_tile(p, C::kRows, kTok);  // raster bands where p.raster_group > 0
  const int64_t n0 = static_cast<int64_t>(tile.x) * C::kRows;
  const int64_t m0 = static_cast<int64_t>(tile.y) * kTok;
  const int64_t tile0 = n0 / 16;

  if constexpr (C::kIq2)
    load_iq2_tables<F == WFmt::kIq2Xs, T>(gtab, stab, tid, wgmma_group_threads(kMode));
  // kWs: per slot a "full" mbarrier (one cp.async arrival per producer thread) and an "empty" one
  // (one arrival per MMA thread), outside the dynamic area (which the epilogue reuses).
  __shared__ alignas(8) uint64_t bars[kWs ? 2 * kStages : 1];
  const uint32_t full0 = static_cast<uint32_t>(__cvta_generic_to_shared(bars));
  const uint32_t empty0 = full0 + 8 * kStages;
  if constexpr (kWs) {
    if (tid == 0) {
      for (int i = 0; i < kStages; ++i) {
        wg::mbar_init(full0 + 8 * i, kCT);
        wg::mbar_init(empty0 + 8 * i, 256);
      }
    }
  }

  const int num_k = static_cast<int>(p.KP / C::kBK);  // KP: a multiple of 256
  const int64_t tile_stride = p.kvec * static_cast<int64_t>(C::kTr.slots) * 16;

  auto act_addr = [&](int s) { return sbase + s * C::kStageBytes; };
  auto w_addr = [&](int s) { return sbase + s * C::kStageBytes + C::kActBytes; };
  auto s_addr = [&](int s) { return sbase + s * C::kStageBytes + C::kActBytes + C::kWBytes; };

  // Weight copies: the packed 16-row tile runs of the stage (wg::WeightRuns, as the FP4 / FP8
  // kernel); the epilogue shares its row stores too.
  const wg::WeightRuns<C::kWTileBytes, C::kRows, kCT> wruns(p.wvals, tile0, p.n16, tile_stride,
                                                            tid);
  // Scale words [kind][row] (kind 0: d, 1: IQ2 sub-scales): word wi = tid + kThreads i of the
  // stage. The source row of each is fixed per thread: its base is computed once, a stage adds a
  // 32-bit byte offset. Rows past NP copy zero bytes from (in-bounds) row 0.
  // Q8_0: the stage's two fp16 d at byte 4 kb of the row (scale_ld = KP/32, a multiple of 8).
  // IQ2 d: the aligned u32 holding the fp16 d of super-block kb / 4, element row x scale_ld +
  // kb / 4; the row's parity (dpar) and the aligned row base split the 64-bit part from the
  // stage's. IQ2 sub-scales: IQ2_XXS byte kb (scale2_ld = KP/64), IQ2_XS bytes 2kb, 2kb+1
  // (scale2_ld = KP/32), both at 4-byte aligned row starts.
  constexpr int kSW = C::kRows * C::kSWords;
  constexpr int kSPerThread = (kSW + kCT - 1) / kCT;
  static_assert(kSW % kCT == 0 || kSW < kCT, "scale word split");
  const uint8_t* s_base[kSPerThread];
  uint32_t s_par[kSPerThread];
  bool s_valid[kSPerThread];
#pragma unroll
  for (int i = 0; i < kSPerThread; ++i) {
    const int wi = tid + i * kCT;
    const bool sub = C::kIq2 && wi >= C::kRows;
    s_valid[i] = wi < kSW && n0 + wi % C::kRows < p.NP;
    const int64_t row = s_valid[i] ? n0 + wi % C::kRows : 0;
    const int64_t delem = row * p.scale_ld;
    s_base[i] = !C::kIq2 ? p.wscale + 2 * delem
                : sub    ? p.wscale2 + row * p.scale2_ld
                         : p.wscale + 2 * (delem & ~int64_t{1});
    s_par[i] = sub ? 2u : static_cast<uint32_t>(delem & 1);  // 2: a sub-scale word
  }
  auto s_off = [&](int i, int kb) -> uint32_t {
    if constexpr (!C::kIq2) {
      return 4u * kb;
    } else {
      const uint32_t sub = F == WFmt::kIq2Xs ? 2u * kb & ~3u : static_cast<uint32_t>(kb) & ~3u;
      return s_par[i] == 2u ? sub : (2u * (s_par[i] + kb / 4) & ~3u);
    }
  };
  // Activations: thread tid copies 16-byte chunk ac = tid & 7 of token rows ar0 + kAR i (ar0 =
  // tid / 8, kAR = kCT / 8 rows per pass): a warp's copy covers four whole 128-byte rows (the
  // lane-pair mapping with 32-byte pieces of 16 rows per copy, tried in round 16, ran the kernel
  // 20% slower). The swizzled chunk (ac ^ (r & 7)) is the same for every i; a stage advances one
  // row pointer by 32 rows per copy.
  const int ar0 = tid >> 3, ac = tid & 7;
  const int64_t ldb = 2 * p.ldx;
  const uint8_t* const xb = static_cast<const uint8_t*>(p.x);
  // The whole CTA's kTok rows are tokens (every token tile but a tail one).
  const bool m_full = m0 + kTok <= p.M;
  const uint8_t* const asrc0 = xb + (m_full ? (m0 + ar0) * ldb : 0) + ac * 16;
  constexpr int kAR = kCT / 8;
  static_assert(kTok % kAR == 0 && kAR % 8 == 0, "activation rows per copying thread");
  const int64_t astep = kAR * ldb;
  const uint32_t adst0 = ar0 * 128 + ((ac ^ (ar0 & 7)) << 4);

  auto load_weights = [&](int s, int kb) {
    wruns.load(w_addr(s), static_cast<uint32_t>(kb) * C::kWTileBytes, tid);
#pragma unroll
    for (int i = 0; i < kSPerThread; ++i)
      if (kSW % kCT == 0 || tid + i * kCT < kSW)
        wg::cp4(s_addr(s) + (tid + i * kCT) * 4, s_base[i] + s_off(i, kb), s_valid[i]);
  };
  auto load_acts = [&](int s, int kb) {
    const int k0 = kb * C::kBK;
    const uint32_t dst = act_addr(s) + adst0;
    if (m_full && k0 + C::kBK <= p.K) {
      const uint8_t* src = asrc0 + 2 * k0;
#pragma unroll
      for (int i = 0; i < kTok / kAR; ++i, src += astep) {
        // kWs: one pointer stepped per copy (an empty asm keeps ptxas from hoisting the 16 row
        // offsets out of the producer's loop into registers its 56-register budget lacks).
        if constexpr (kWs) asm volatile("" : "+l"(src));
        wg::cp16n(dst + i * kAR * 128, src, 16u);
      }
    } else {
      // A token tail or the K tail (the zero-filled last stage): invalid rows / chunks copy zero
      // bytes from the start of x.
      const bool kvalid = k0 + ac * 8 < p.K;
      if constexpr (kWs) {
        // As above: the row pointer and the token stepped per copy, nothing hoisted.
        const uint8_t* src = xb + (m0 + ar0) * ldb + 2 * k0 + ac * 16;
        int64_t m = m0 + ar0;
#pragma unroll
        for (int i = 0; i < kTok / kAR; ++i, src += astep, m += kAR) {
          asm volatile("" : "+l"(src), "+l"(m));
          const bool valid = kvalid && m < p.M;
          wg::cp16n(dst + i * kAR * 128, valid ? src : xb, valid ? 16u : 0u);
        }
      } else {
#pragma unroll
        for (int i = 0; i < kTok / kAR; ++i) {
          const int64_t m = m0 + ar0 + kAR * i;
          const bool valid = kvalid && m < p.M;
          const uint8_t* src = xb + m * ldb + 2 * k0 + ac * 16;
          wg::cp16n(dst + i * kAR * 128, valid ? src : xb, valid ? 16u : 0u);
        }
      }
    }
  };

  // IQ2: parity of the fp16 d element index row x scale_ld of rows g (h = 0) and g + 8 (h = 1) of
  // this warp's tile of row set rs (the d of stage kb sits at half (parity + kb / 4) & 1 of the
  // copied word).
  uint32_t dpar[C::kRowSets][2];
#pragma unroll
  for (int rs = 0; rs < C::kRowSets; ++rs)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      dpar[rs][h] =
          C::kIq2 ? static_cast<uint32_t>(((n0 + tile_of(rs) * 16 + g + 8 * h) * p.scale_ld) & 1)
                  : 0u;
  // fp32 scales of rows g (h = 0) and g + 8 (h = 1) of this warp's tile of row set rs for group
  // j of stage kb.
  auto group_scales = [&](const uint32_t* ssg, int kb, int j, int rs, float(&sc)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = tile_of(rs) * 16 + g + 8 * h;
      if constexpr (F == WFmt::kQ8_0) {
        sc[h] = half_bits_f32((ssg[r] >> (16 * j)) & 0xFFFFu);
      } else {
        const uint32_t dsh = ((dpar[rs][h] + kb / 4) & 1u) * 16u;
        const float d = half_bits_f32((ssg[r] >> dsh) & 0xFFFFu);
        const int ssh = F == WFmt::kIq2Xs ? 16 * (kb & 1) + 4 * j : 8 * (kb & 3) + 4 * j;
        const uint32_t sv = (ssg[C::kRows + r] >> ssh) & 0xFu;
        sc[h] = d * static_cast<float>(2 * sv + 1) * 0.125f;
      }
    }
  };

  // Zeroed where the MMA warps start (kWs: after setmaxnreg, so that no accumulator is live in
  // the producer's or the launch's register budget).
  float acc[C::kAcc];
  auto zero_acc = [&] {
#pragma unroll
    for (int i = 0; i < C::kAcc; ++i) acc[i] = 0.f;
  };
  float part0[C::kPart];  // unit partials; two sets when promotions overlap wgmmas
  float part1[C::kOverlap ? C::kPart : 1];

  // A fragments of a stage's four k16 steps (exact integers) of this warp's 16-row tiles, from
  // slot s (stage kb; ssg: its scale words); atom at (32 K) holds steps 2 at, 2 at + 1.
  // kGroupRescale: zm[h] masks row h's folded splats (0 where the super-block's d is 0, so its
  // weights add nothing to the accumulators kept in units of the last nonzero d).
  using Frags = uint32_t[C::kRowSets][4][4];
  const uint32_t kAllRows[2] = {~0u, ~0u};
  auto decode_frags = [&](Frags& af, const uint32_t* ssg, int s, int kb, int at,
                          const uint32_t(&zm)[2]) {
#pragma unroll
    for (int rs = 0; rs < C::kRowSets; ++rs) {
      const uint8_t* wsg = sgen + s * C::kStageBytes + C::kActBytes + tile_of(rs) * C::kWTileBytes;
      const int slot = C::kIq2 ? g : lane;
      const uint4 rv = *reinterpret_cast<const uint4*>(wsg + at * C::kTr.slots * 16 + slot * 16);
      uint32_t a2[2][4];
      if constexpr (C::kIq2) {
        decode_iq2_atom<T, kAluSign>(rv, gtab, stab, t, a2);
        if constexpr (C::kFold) {
          // The FP16 splats (2s + 1) of rows g (h = 0) and g + 8 (h = 1) for the atom's
          // sub-blocks (IQ2_XXS: the atom, IQ2_XS: each k16 step); +-grid x (2s + 1) is an
          // integer <= 43 x 31, exact in FP16.
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint32_t sw = ssg[C::kRows + tile_of(0) * 16 + g + 8 * h];
#pragma unroll
            for (int st = 0; st < 2; ++st) {
              const int q = F == WFmt::kIq2Xs ? 2 * at + st : at;
              const int ssh = F == WFmt::kIq2Xs ? 16 * (kb & 1) + 4 * q : 8 * (kb & 3) + 4 * q;
              // FP16 0x6400 | s is 1024 + s, and 2 (1024 + s) - 2047 = 2s + 1 exactly: one IMAD
              // and one HFMA2 build the splat (no I2F on the XU pipe; session 16).
              uint32_t m =
                  fma2<T>(((sw >> ssh) & 0xFu) * 0x10001u + 0x64006400u, 0x40004000u, 0xE7FFE7FFu);
              if constexpr (kRescale) m &= zm[h];
#pragma unroll
              for (int j = h; j < 4; j += 2)
                asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(a2[st][j]) : "r"(a2[st][j]), "r"(m));
            }
          }
        }
      } else {
        decode_byte_atom<T, true>(rv, a2);
      }
#pragma unroll
      for (int st = 0; st < 2; ++st)
#pragma unroll
        for (int j = 0; j < 4; ++j) af[rs][2 * at + st][j] = a2[st][j];
    }
  };

  // One stage in slot s (stage kb, hs-th of its barrier group): decode, the units' wgmmas and
  // promotions (drained at the end unless the chained pair's first stage); refill() issues the
  // late copies (kLateCopy, the barrier group's first stage).
  using Scales = float[kPer][C::kGroups][C::kRowSets][2];
  // retired() runs once the previous stage's last unit retired (kChain, every stage of the group
  // but its first): its slot may be released.
  auto stage_body = [&](const int kb, const int s, const int hs, Scales& sc, auto&& refill,
                        auto&& retired) {
    // This warp's 16-row tiles: the stage's A fragments.
    Frags af;
    const uint32_t* ssg =
        reinterpret_cast<const uint32_t*>(sgen + s * C::kStageBytes + C::kActBytes + C::kWBytes);
    auto decode_atom = [&](int at) { decode_frags(af, ssg, s, kb, at, kAllRows); };
    // Several token units per group on one row set: atom 1 is decoded after the first unit's
    // wgmmas are issued (under them), while atom 0's fragments stay live for the group's later
    // units, so no register of an in-flight wgmma can be reallocated to the decode. (With one
    // unit per group, or two row sets, a fragment is dead once its last wgmma is issued: decoded
    // up front there.)
    // (kFold: every unit reads both atoms.)
    constexpr bool kLateAtom1 = C::kRowSets == 1 && C::kTokUnits > 1 && C::kGroups > 1;
    decode_atom(0);
    if constexpr (!kLateAtom1) decode_atom(1);
    const uint64_t desc = wg::desc_sw128(act_addr(s));
    // Unit u = (group u / kUnitsPerGroup, row set, token half): its k16 wgmmas into partial set
    // u & 1 (kOverlap) or the one set, then acc += scale x partial. kOverlap: unit u's
    // promotion runs after unit u+1's wgmmas are issued (wait_group 1); the stage's last unit is
    // drained (wait_group 0), so no wgmma stays in flight across the stage barrier and the next
    // stage's decode (its A fragments would be rewritten while in flight).
    constexpr int kUnits = C::kGroups * C::kUnitsPerGroup;
#pragma unroll
    for (int j = 0; j < C::kGroups; ++j)
#pragma unroll
      for (int rs = 0; rs < C::kRowSets; ++rs) group_scales(ssg, kb, j, rs, sc[hs][j][rs]);
    // Unit u's accumulators: acc[kPart v + i] for v = u % kUnitsPerGroup = (row set v /
    // kTokUnits, token block v % kTokUnits).
    auto issue = [&](float(&pt)[C::kPart], int u) {
      const int j = u / C::kUnitsPerGroup, v = u % C::kUnitsPerGroup;
      const int rs = v / C::kTokUnits, tq = v % C::kTokUnits;
      wg::fence_acc(pt);
      wg::fence();
#pragma unroll
      for (int q = 0; q < C::kStepsPerGroup; ++q) {
        const int ks = j * C::kStepsPerGroup + q;
        // Token block tq starts kUnitN rows of 128 bytes further into the stage.
        const uint64_t d = desc + tq * (C::kUnitN * 128 >> 4) + 2 * ks;
        if constexpr (C::kUnitN == 128) {
          wg::mma<T, 128>(pt, af[rs][ks], d, q);
        } else {
          wgmma_m64n64k16<T>(pt, af[rs][ks], d, q);
        }
      }
      wg::commit();
    };
    auto promote = [&](float(&pt)[C::kPart], int u, int h) {
      const int j = u / C::kUnitsPerGroup, v = u % C::kUnitsPerGroup;
      const int rs = v / C::kTokUnits;
      wg::fence_acc(pt);
      // pt[4i + 2h + e] = (row 16 tile_of(rs) + g + 8h, token kUnitN tq + 8i + 2t + e).
#pragma unroll
      for (int i = 0; i < C::kPart; ++i)
        acc[C::kPart * v + i] = fmaf(pt[i], sc[h][j][rs][(i >> 1) & 1], acc[C::kPart * v + i]);
    };
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
      if constexpr (C::kOverlap) {
        issue((u & 1) ? part1 : part0, u);
        if (kChain && hs >= 1 && u == 0) {
          // The previous stage's last unit (partial set (kUnits - 1) & 1 = 1, kUnits even): its
          // atom-1 fragments are rewritten by the decode below only after this retires it.
          static_assert(kUnits % 2 == 0, "chained pair: even unit count");
          wg::wait<1>();
          promote(part1, kUnits - 1, hs - 1);
          retired();
        }
        if (kLateAtom1 && u == 0) decode_atom(1);
        if (kLateCopy && u == 1 && hs == 0) refill();
        if (u > 0) {
          wg::wait<1>();
          promote((u & 1) ? part0 : part1, u - 1, hs);
        }
      } else {
        issue(part0, u);
        if (kLateAtom1 && u == 0) decode_atom(1);
        if (kLateCopy && u == 1 && hs == 0) refill();
        wg::wait<0>();
        promote(part0, u, hs);
      }
    }
    if constexpr (C::kOverlap) {
      if (!(kChain && hs < kPer - 1)) {
        wg::wait<0>();
        promote(((kUnits - 1) & 1) ? part1 : part0, kUnits - 1, hs);
      }
    }
  };

  if constexpr (kWs) {
    __syncthreads();  // the IQ2 tables, the mbarrier inits
    if (warp < 4) {
      // Producer warpgroup: fills slot kb % kStages with stage kb once the MMA warpgroups
      // released its previous stage (empty phase kb / kStages - 1); the first kStages stages'
      // weights go out before griddepcontrol.wait.
      wg::setmaxnreg_dec<kGroupProdRegs>();
      const int pro = num_k < kStages ? num_k : kStages;
      for (int s = 0; s < pro; ++s) load_weights(s, s);
      griddep_wait();
      wg::producer_ring<kStages>(num_k, pro, full0, empty0, load_weights, load_acts);
      wg::cp_wait<0>();  // no copy of this thread outlives it
      griddep_launch_dependents();
      return;
    }
    wg::setmaxnreg_inc<kGroupConsRegs>();
    zero_acc();
    griddep_wait();  // alpha / bias
    int sl = 0;
    uint32_t ph = 0;
    if constexpr (kRescale) {
      // Accumulators in units of e[h], the last nonzero d of row g + 8h (1 before the first).
      float e[2] = {1.f, 1.f};
      Frags afb[2];  // stage kb's fragments in afb[kb & 1], rewritten once kb - 2 retired
      uint32_t zm[2];
      float dn[2];
      auto ssg_of = [&](int s) {
        return reinterpret_cast<const uint32_t*>(sgen + s * C::kStageBytes + C::kActBytes +
                                                 C::kWBytes);
      };
      // Super-block kb's first stage (slot sl): its d (dn, zm) and its fragments (into afb[0]).
      auto sb_head = [&](int kb) {
        wg::mbar_wait(full0 + 8 * sl, ph);
        wg::fence_proxy_async();  // cp.async writes (generic proxy) read by wgmma (async proxy)
        const uint32_t* ssg = ssg_of(sl);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t dsh = ((dpar[0][h] + kb / 4) & 1u) * 16u;
          const float d = half_bits_f32((ssg[tile_of(0) * 16 + g + 8 * h] >> dsh) & 0xFFFFu);
          zm[h] = d != 0.f ? ~0u : 0u;
          dn[h] = d != 0.f ? d : e[h];
        }
        decode_frags(afb[0], ssg, sl, kb, 0, zm);
        decode_frags(afb[0], ssg, sl, kb, 1, zm);
      };
      if (num_k > 0) sb_head(0);
      for (int kb = 0; kb < num_k; kb += 4) {
        int sls[4];
#pragma unroll
        for (int hs = 0; hs < 4; ++hs) {
          sls[hs] = sl;
          if (hs > 0) {
            wg::mbar_wait(full0 + 8 * sl, ph);
            wg::fence_proxy_async();
            decode_frags(afb[hs & 1], ssg_of(sl), sl, kb + hs, 0, zm);
            decode_frags(afb[hs & 1], ssg_of(sl), sl, kb + hs, 1, zm);
          }
          if (hs == 0) {
            // The previous super-block drained (below): acc = V / e_prev -> V / d_new.
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const float r = e[h] / dn[h];
              e[h] = dn[h];
#pragma unroll
              for (int i = 2 * h; i < C::kAcc; i += 4) {
                acc[i] *= r;
                acc[i + 1] *= r;
              }
            }
            wg::fence_acc(acc);
          }
          wg::fence();
          const uint64_t desc = wg::desc_sw128(act_addr(sl));
#pragma unroll
          for (int ks = 0; ks < 4; ++ks)
            wg::mma<T, C::kTok>(acc, afb[hs & 1][0][ks], desc + 2 * ks, 1);
          wg::commit();
          if (hs > 0) {
            // Stage kb + hs - 1 retired: its slot and fragment buffer are free.
            wg::wait<1>();
            wg::mbar_arrive(empty0 + 8 * sls[hs - 1]);
          }
          if (++sl == kStages) sl = 0, ph ^= 1;
        }
        // The next super-block's first stage decoded into afb[0] (stage kb + 2's, retired above)
        // while stage kb + 3's wgmmas run, so that only the rescale sits between the drain and
        // the next issue (round 69: 1-5 % over decoding it after the drain).
        if (kb + 4 < num_k) sb_head(kb + 4);
        // One drain per super-block: no wgmma in flight over the loop's back edge (C7514) or
        // while the next super-block rescales the accumulators.
        wg::wait<0>();
        wg::fence_acc(acc);
        wg::mbar_arrive(empty0 + 8 * sls[3]);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float f = e[h] * 0.125f;
#pragma unroll
        for (int i = 2 * h; i < C::kAcc; i += 4) {
          acc[i] *= f;
          acc[i + 1] *= f;
        }
      }
    } else {
      Scales sc;
      for (int kb = 0; kb < num_k; kb += kPer) {
        // kPer = 2 (chained pair): the first stage's last unit stays in flight into the second
        // (num_k is a multiple of 4); both slots are released after the pair (kPer = 4, chained
        // quads: each slot once its last unit retired).
        int sls[kPer];
#pragma unroll
        for (int hs = 0; hs < kPer; ++hs) {
          sls[hs] = sl;
          wg::mbar_wait(full0 + 8 * sl, ph);
          wg::fence_proxy_async();  // cp.async writes (generic proxy) read by wgmma (async proxy)
          stage_body(
              kb + hs, sl, hs, sc, [] {},
              [&] {
                if constexpr (kPer == 4) wg::mbar_arrive(empty0 + 8 * sls[hs - 1]);
              });
          if (++sl == kStages) sl = 0, ph ^= 1;
        }
        // This thread's wgmmas of the slots retired (drained) and its shared-memory reads done
        // (kPer = 4: the others were released by retired()).
#pragma unroll
        for (int hs = kPer == 4 ? 3 : 0; hs < kPer; ++hs) wg::mbar_arrive(empty0 + 8 * sls[hs]);
      }
    }
  } else {
    zero_acc();
    // Prologue: barrier groups 0..kAhead-1 (the weights first, then the wait for the
    // activations; one commit group per barrier group). num_k is a multiple of 4 (KP: of 256).
#pragma unroll
    for (int s = 0; s < kAhead * kPer; ++s)
      if (s < num_k) load_weights(s, s);
    griddep_wait();
#pragma unroll
    for (int b = 0; b < kAhead; ++b) {
#pragma unroll
      for (int h = 0; h < kPer; ++h)
        if (b * kPer + h < num_k) load_acts(b * kPer + h, b * kPer + h);
      wg::cp_commit();
    }
    __syncthreads();  // IQ2 tables

    // s0 = kb % kStages (first slot of the barrier group); group kb / kPer + kAhead refills the
    // previous group's slots.
    for (int kb0 = 0, s0 = 0; kb0 < num_k; kb0 += kPer, s0 = s0 + kPer == kStages ? 0 : s0 + kPer) {
      wg::cp_wait<kAhead - 1>();
      // The stages were written through the generic proxy (cp.async); wgmma reads them through
      // the async proxy.
      wg::fence_proxy_async();
      __syncthreads();
      // Its slots held the previous barrier group, whose wgmmas every warpgroup drained before
      // the barrier.
      auto refill = [&] {
        const int nk = kb0 + kAhead * kPer;
        const int ns = s0 == 0 ? kStages - kPer : s0 - kPer;
#pragma unroll
        for (int h = 0; h < kPer; ++h)
          if (nk + h < num_k) {
            load_weights(ns + h, nk + h);
            load_acts(ns + h, nk + h);
          }
        wg::cp_commit();
      };
      static_assert(!kLateCopy || C::kGroups * C::kUnitsPerGroup >= 2, "late copies after unit 1");
      if constexpr (!kLateCopy) refill();
      // Group scales of each stage of the barrier group (the chained pair promotes the first
      // stage's last unit during the second).
      Scales sc;
#pragma unroll
      for (int hs = 0; hs < kPer; ++hs) stage_body(kb0 + hs, s0 + hs, hs, sc, refill, [] {});
    }
  }
  wg::cp_wait<0>();
  griddep_launch_dependents();
  // Barrier of the MMA warps (kWs: the producer warpgroup has returned; named barrier 1 of 256).
  auto mma_sync = [] {
    if constexpr (kWs) {
      wg::bar_sync(1, 256);
    } else {
      __syncthreads();
    }
  };
  mma_sync();  // the pipeline buffers become the output staging tile

  // Accumulators (wgmma D fragments): acc[kPart v + 4j + 2h + e] = (weight row 16 tile_of(rs) +
  // g + 8h, token kUnitN tq + 8j + 2t + e) for unit v = (rs, tq). Staged as out dtype
  // [token][row] (kEpPitch-byte rows), then written as rows (the epilogue of
  // linear_wgmma_kernel).
  float mult = p.out_mult;
  if (p.alpha != nullptr) mult *= *p.alpha;
  if constexpr (C::kFold) {
    if (p.xscale != nullptr) {
      // BF16 activations behind the FP16 pre-pass (launch_ggml_act_f16): each token's 2^-e.
      // Loaded unit by unit (volatile loads, the unit's accumulators pinned after): loaded all
      // at once they were live beside the 128 accumulators and spilled.
      const float* const xs = p.xscale + m0;
      const int64_t last = p.M - 1 - m0;  // tokens past M read the last one (never stored)
#pragma unroll
      for (int v = 0; v < C::kUnitsPerGroup; ++v) {
        const int tq = v % C::kTokUnits;
#pragma unroll
        for (int j = 0; j < C::kUnitN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int64_t tk = C::kUnitN * tq + 8 * j + 2 * t + e;
            float sv;
            asm volatile("ld.global.nc.f32 %0, [%1];"
                         : "=f"(sv)
                         : "l"(xs + (tk < last ? tk : last)));
            acc[C::kPart * v + 4 * j + e] *= sv;
            acc[C::kPart * v + 4 * j + 2 + e] *= sv;
          }
        wg::fence_acc(acc);
      }
    }
  }
  uint16_t* ep = reinterpret_cast<uint16_t*>(sgen);
#pragma unroll
  for (int v = 0; v < C::kUnitsPerGroup; ++v) {
    const int rs = v / C::kTokUnits, tq = v % C::kTokUnits;
    const int r0 = tile_of(rs) * 16 + g;
    float bias[2] = {0.f, 0.f};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t n = n0 + r0 + 8 * h;
      if (p.bias != nullptr && n < p.N) bias[h] = load_out_type(p.bias, n, p.out_fp16);
    }
#pragma unroll
    for (int j = 0; j < C::kUnitN / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          ep[(C::kUnitN * tq + 8 * j + 2 * t + e) * (C::kEpPitch / 2) + r0 + 8 * h] =
              wgmma_out_bits(acc[C::kPart * v + 4 * j + 2 * h + e] * mult + bias[h], p.out_fp16);
        }
  }
  mma_sync();
  wgmma_store_rows<C::kRows, kTok, 256, C::kEpPitch>(ep, p, n0, m0, 32 * cw + lane);
#else
  __trap();  // SM90 only: the host dispatches this kernel on compute capability 9.0 alone
#endif
}

}  // namespace b12x::gemm::lin
