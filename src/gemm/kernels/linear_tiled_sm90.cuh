// SM90 (Hopper) tiled linear kernel for large M: warpgroup MMAs (wgmma) with the weights on the
// MMA's M side, decoded from the packed atoms straight into wgmma's register A operand, and the
// activations as the shared-memory B operand (a "swapped" GEMM: D[weight row][token]).
//
// Why this shape: the packed layout (gemm/linear_layout.h) already holds, per lane, the bytes of
// the mma.sync m16n8k16 A fragment of a 16-row tile, and wgmma's register A fragment of warp w of
// a warpgroup is exactly that fragment for rows 16w..16w+15 of the warpgroup's 64 rows. So each
// warp decodes one 16-row tile per 64-K stage (one 16-byte load per lane for FP4, ~5 instructions
// per fragment register) and issues four m64nNk16 wgmmas whose tensor work (64 x N x 64 MACs per
// warpgroup) dwarfs the decode. Weights never pass through shared memory as BF16; the B operand
// (activations, BF16/FP16, K-major) is what the 128-byte-swizzled stages hold.
//
// CTA = 2 warpgroups (256 threads) = 128 weight rows x 128 tokens x 64 K per stage (128 K for FP8).
// Every thread issues cp.async copies for the stage kStages-kLag ahead: the activation tile (rows
// of 128 bytes, 16-byte chunk c of row r stored at chunk c ^ (r & 7), the layout wgmma's 128B
// swizzle mode reads), the packed weight run of the CTA's eight 16-row tiles and one u32 of
// block scales per row. One CTA barrier per stage. The refilled slot is that of stage kb-kLag,
// whose wgmmas every warpgroup retired before the barrier: kLag = 1 when each stage's wgmmas are
// drained (wait_group 0: the BF16 path and FP8 promoted per 128 K), 2 for the FP8 32 / 64-K
// promotion schedules (wait_group 1; ptxas serializes their wgmmas anyway, see WgmmaCfg). The
// mbarrier variants replace the CTA barrier by per-slot full / empty barriers; the
// warp-specialized ones (the defaults: FP8 at 128 tokens, BF16 operands at 256) add a third
// warpgroup that issues every copy, so the two MMA warpgroups only wait, issue and promote.
//
// Formats (the tiled kernel's fold mode, same numerics): NVFP4 (BF16 or FP16 MMAs; FP4 x UE4M3
// splat, exact), MXFP4 with BF16 MMAs (FP4 x 2^-7 x E8M0 splat, exact; activation E8M0 folded by
// the pre-pass) and MXFP8 (E4M3 x 2^-7 x E8M0, activations pre-passed in the k32 fragment's k
// order); per-tensor and block FP8 on e4m3 wgmmas with fp32 promotion (WgmmaCfg::kF8Sub).
// Epilogue: accumulators (weight row, token) staged transposed through shared memory, then
// 16-byte row stores of out[token][row].
//
// SM90 only (227 KB of shared memory per block): the body compiles under
// __CUDA_ARCH_FEAT_SM90_ALL and traps elsewhere; the host dispatches it only on compute
// capability 9.0.
#pragma once

#include "b12x/status.h"  // B12X_ASSERT (wgmma_grid), for units that include no host header first
#include "gemm/kernels/linear_common.cuh"
#include "gemm/kernels/linear_tiled.cuh"  // e8m0_bf16_splat

namespace b12x::gemm::lin {

template <WFmt F, class T, int kTokens, int kVariant = 0>
struct WgmmaCfg {
  static constexpr int kRows = 128;  ///< weight rows per CTA (2 warpgroups x 64)
  static constexpr int kTok = kTokens;
  static constexpr bool kFp4 = F == WFmt::kNvfp4 || F == WFmt::kMxfp4;
  /// FP8 weights with FP8 activations (per-tensor, block): e4m3 wgmmas on the undecoded packed
  /// fragments (the e4m3 k32 A fragment), fp32 promotion per kF8Sub sub-block.
  static constexpr bool kF8 = F == WFmt::kFp8 || F == WFmt::kFp8Block;
  /// FP8 variants 5-7, BF16-operand variant 3 (default at 256 tokens): warp-specialized. A third
  /// warpgroup (warpgroup 0, `setmaxnreg` down to kProdRegs) issues every copy of the ring; the
  /// two MMA warpgroups (up to kConsRegs) only wait for full slots, decode, issue their wgmmas,
  /// promote and release the slot, so no copy issue, address arithmetic or empty-slot wait sits
  /// between one stage's wgmmas and the next's. (Round 16: +13-21% per-tensor and +19-29% block
  /// FP8 over variant 3; making the MMA warpgroups take turns issuing their wgmmas through named
  /// barriers, dropped, was 5-20% slower than variant 5.)
  static constexpr bool kWs = kF8 ? (kVariant >= 5 && kVariant <= 12) ||
                                        (kVariant >= 14 && kVariant <= 16) || kVariant == 33
                                  : kVariant == 3;
  /// FP8 variant 6 (the per-tensor default until session 9) = 5 with the stage's block scales built
  /// and loaded into registers while its wgmmas run (not after their wait) and the slot released
  /// right after the wait, so only the FFMA / FADD promotion follows the wgmmas on the MMA warps'
  /// critical path (round 17: block FP8 +0-3% over 5).
  static constexpr bool kHoist = kF8 && ((kVariant >= 6 && kVariant <= 12) || kVariant >= 14);
  /// Block FP8 variant 8 (the block FP8 default from round 22 to session 9) = 6 with the stage's
  /// combined scales x_scale[token] * w_scale built once per CTA by the producer warpgroup (one
  /// token per producer thread, plain loads two producer steps ahead, the product stored in the
  /// slot in the [t][2j + e] order the MMA lanes read, then a second arrival per producer thread on
  /// the slot's full barrier) instead of by each of the eight MMA warps. Why: block FP8 is bound by
  /// shared-memory traffic (round 21 Nsight Compute, 4096x4096: L1/TEX throughput 77% against
  /// per-tensor FP8's 47%; per MMA warp and stage, estimated: A fragments 16 wavefronts, the
  /// wgmmas' activation reads ~32, for block FP8 the scale reads 32 plus the table build, whose
  /// STS.64 were 3.8-way bank conflicted). Round 22: +7-10% over 6 at M = 2048.
  static constexpr bool kProdScales =
      F == WFmt::kFp8Block && ((kVariant >= 8 && kVariant <= 12) || kVariant >= 14);
  /// Block FP8 variant 14 (the block FP8 default since round 34) = 8 with every copy of the ring a
  /// bulk copy (cp.async.bulk, completing on the slot's full barrier by its transaction count): the
  /// CTA's eight 2 KB weight runs and one 16 KB block of activations, which the FP8 1x128 quantizer
  /// wrote as the stage's image (launch_quantize_fp8_group128_tiled: 128-token tile-major, rows
  /// pre-swizzled), all issued by one producer thread. Why: block FP8 is bound by the shared-memory
  /// pipe (77%, round 21) and its MMA warps stall mostly on shared loads (A fragments, scales); the
  /// 16 cp.async of 16 bytes per producer thread and stage (LDGSTS through the LSU) are that pipe's
  /// other large client. Needs K % 256 == 0 (KP == K: every stage a whole quantizer block) and
  /// the tiled quantizer (run() takes variant 8 where it cannot run).
  static constexpr bool kBulk = F == WFmt::kFp8Block && (kVariant == 14 || kVariant == 33);
  /// Block FP8 variant 33 (the block FP8 default since session 18) = 14 without the MMA warps'
  /// fence.proxy.async after each full barrier (MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC in SASS, per
  /// stage and warp; kConsFence) and with four stages instead of six (kF8BlockStages). Why the
  /// fence can go (compute-sanitizer does not check proxy ordering, so this rests on the PTX
  /// memory model): the fence orders generic-proxy writes before async-proxy reads, and a bulk-fed
  /// slot has none that wgmma reads. Its activations and weights are written by cp.async.bulk
  /// (async proxy) and complete on the slot's full barrier by transaction count, whose phase
  /// completion makes them visible to the threads that observe it (wgmma reads them in the async
  /// proxy, the A-fragment loads in the generic one, as CUTLASS's TMA consumers do without a
  /// fence); the combined scales are generic stores of the producer before its mbarrier.arrive
  /// (release), read by generic loads after the try_wait (acquire). The slot's refill after the
  /// empty barrier is the same write-after-read order as in 14. Why four stages: fewer leave more
  /// of the SM's 228 KB to L1, where the producer's x_scale / w_scale loads hit. Round 68 (Nsight
  /// Compute, 4096x4096 M = 2048): 3.5% of 14's stall samples on the FENCE, 5.9% on the
  /// WARPGROUP.ARRIVE after it; round 69 (M = 2048): without the fence -1.3 to -2.4% at the five
  /// shapes; round 70: then five stages -0.6 to -2.3%, four -0.6 to -3.2% (docs/gemm.md session
  /// 18); memcheck / racecheck clean (GemmGpuSanitize.Fp8BlockBulk).
  static constexpr bool kConsFence = !(kBulk && kVariant != 14);
  static constexpr int kF8BlockStages = F == WFmt::kFp8Block && kVariant == 33 ? 4 : 0;
  /// FP8 variant 16 (the per-tensor default since session 9; a probe for block) = 6 / 8 with only
  /// the weights bulk-copied (the eight 2 KB runs by one producer thread, complete_tx on the full
  /// barrier, one more arrival); the activations stay cp.async (caller-quantized ones too). Why:
  /// per-tensor FP8 and block FP8 with caller-quantized activations cannot take 14's activation
  /// images.
  static constexpr bool kBulkW = kBulk || (kF8 && kVariant == 16);
  /// FP8 variant 9 (probe) = 8 with the tokens on wgmma's M side (as DeepGEMM): each MMA
  /// warpgroup takes 64 tokens (A: the activation rows of the stage, 128-byte swizzle) times the
  /// CTA's 128 weight rows (B: shared memory), so a thread's accumulators are 2 tokens x 32
  /// weight rows of one 128-row weight block and block FP8's promotion needs 2 combined scales
  /// per thread and stage instead of 32 (the shared-memory traffic that bounds variant 8). The
  /// packed fragments interleave rows g / g + 8 at 4-byte granularity, which no wgmma
  /// descriptor reads; the producer therefore loads each lane's 16 bytes of an atom into
  /// registers two stages ahead and stores its four words as rows of K-major core matrices (no
  /// swizzle; four conflict-free 128-byte STS.32 wavefronts per atom, the cp.async's bytes), and
  /// the MMA warps no longer load A fragments.
  static constexpr bool kTokM = kF8 && kVariant >= 9 && kVariant <= 12;
  /// FP8 variant 10 (probe) = 9 with the activations as wgmma's register A operand (one
  /// ldmatrix.x4 per warp and k32 step from the swizzled rows) instead of a shared-memory
  /// descriptor. Why: round 25 (4096x4096, M = 2048) measured 9 slower than 8 (block 125.4 vs 101.3
  /// us, per-tensor 104.9 vs 76.6) although its LSU shared-memory wavefronts fell from 9.2 M to
  /// 5.4 M: with both operands in shared memory the wgmmas read 24 instead of 16 KB per
  /// warpgroup and stage.
  static constexpr bool kTokMRegA = kF8 && (kVariant >= 10 && kVariant <= 12);
  /// FP8 variant 11 (probe) = 10 with the weights stored in the 128-byte swizzle mode (row n of
  /// the stage: 128 bytes of K, 16-byte chunk c at c ^ (n & 7), the activations' layout) instead
  /// of non-swizzled core matrices. Why: round 26 measured 10 slower still than 9 (block FP8
  /// 4096x4096 M = 2048 129.0 us against 101.7 for 8), so the descriptor A operand was not what
  /// cost; left are the producer's register path and the wgmmas' reads of non-swizzled B (the
  /// two 16-byte chunks of a row's k32 step 2048 bytes apart: the same banks).
  static constexpr bool kSwB = kF8 && (kVariant == 11 || kVariant == 12);
  /// FP8 variant 12 (probe) = 11 with the producer's weight words loaded three steps ahead
  /// instead of two (96 registers of them; producer 152, MMA warps 176 registers), in case the
  /// register path's load latency starves the ring. kPfSteps: producer steps between a load
  /// (weights, block FP8 scales) and its store.
  static constexpr int kPfSteps = kF8 && kVariant == 12 ? 3 : 2;
  /// FP8 variant 7 (probe) = 6 with the next stage's A fragments loaded (after its full-barrier
  /// wait) while this stage's wgmmas run, before this stage's promotion: two fragment sets.
  static constexpr bool kPrefetch = kF8 && kVariant == 7;
  static constexpr int kThreads = kWs ? 384 : 256;
  static constexpr int kCopyThreads = kWs ? 128 : 256;  ///< threads issuing a stage's copies
  static constexpr int kMmaThreads = 256;               ///< threads of the two MMA warpgroups
  /// Per-thread register budgets (128 kProdRegs + 256 kConsRegs <= the 384 x 168 the launch
  /// holds): FP8 at 128 tokens and the BF16 operands at 256 fit 208 (64 + 64 / 128
  /// accumulators; 216 with variant 7's second fragment set), the producer 80 (72), no spills.
  /// (FP8 at 192 tokens, 96 + 96 accumulators at 232 registers with a spilling producer, measured
  /// 5-50% slower than 128 tokens in round 17 and was removed.)
  /// Variant 9: the producer holds two stages of weight words (64 registers), the MMA warps no
  /// A fragments: 136 + 2 x 184 = 3 x 168.
  static constexpr int kProdRegs = kF8 && kVariant == 7    ? 72
                                   : kF8 && kVariant == 12 ? 152
                                   : kTokM                 ? 136
                                                           : 80;
  static constexpr int kConsRegs = kF8 && kVariant == 7    ? 216
                                   : kF8 && kVariant == 12 ? 176
                                   : kTokM                 ? 184
                                                           : 208;
  static constexpr int kBK = kF8 ? 128 : 64;  // K per stage: 128-byte activation rows either way
  static constexpr int kActBytes = kTok * 128;
  static constexpr int kWTileBytes = kFp4 ? 512 : (kF8 ? 2048 : 1024);  // 16 rows x kBK, packed
  static constexpr int kWBytes = (kRows / 16) * kWTileBytes;
  /// Scale area: one u32 of block scales per row (NVFP4 / E8M0 codes); block FP8: the kTok
  /// activation scales of the stage's 128-K group, then the weight block scale.
  /// Variant 8: the combined scales, [t][kBsPitch] floats (the per-warp table's layout).
  static constexpr int kSBytes = kProdScales ? 4 * (kTok / 4 + 4) * 4
                                 : kF8       ? (F == WFmt::kFp8Block ? kTok * 4 + 16 : 0)
                                             : kRows * 4;
  /// FP8 promotion schedule. kVariant 0: one partial per 128-K stage, drained (wait_group 0)
  /// and promoted before the next stage. kVariant 1 / 2: a partial per 64 / 32 K (kF8Sub = 2 / 4
  /// sub-blocks per stage) in two alternating partial sets, each sub-block's promotion
  /// overlapping the next sub-block's wgmmas (wait_group 1) as written; ptxas serializes them
  /// (C7514: accumulator registers read inside the wgmma pipeline). The default is 2: per 128 K,
  /// ~5 elements in 10^5 fell just outside the test tolerance on the H200 (round 8).
  static constexpr int kF8Sub = !kF8 ? 1 : (kVariant == 1 ? 2 : kVariant == 2 ? 4 : 1);
  static constexpr bool kF8Overlap = kF8Sub > 1;
  /// mbarrier pipeline (FP8 variant 3: with the 128-K promotion; BF16 operands: variant 1)
  /// instead of one CTA barrier per stage: each thread's copies of a stage arrive on the slot's
  /// "full" mbarrier when they land (cp.async.mbarrier.arrive.noinc), each warp arrives on its
  /// "empty" mbarrier once its wgmmas of the slot retired, and a slot is refilled two stages after
  /// its consumption (kLag 2), so the two warpgroups drift up to a stage apart and one's wgmmas
  /// fill the other's drain / promotion / decode gaps.
  static constexpr bool kMbar = kF8 ? (kVariant == 3 || kWs) : (kVariant == 1 || kWs);
  /// BF16-operand formats drain each stage's wgmmas (wait_group 0) before the next stage. (A
  /// schedule keeping one group in flight across the stage barrier returned wrong results on the
  /// H200 in rounds 8 and 9: ptxas reallocated the A-fragment registers of the group in flight —
  /// and was removed; the drained schedule measured 2-20% slower than it.) kLag: stages between a
  /// slot's consumption and its refill.
  static constexpr bool kDrain = !kF8Overlap;
  static constexpr int kLag = kDrain && !kMbar ? 1 : 2;
  static constexpr int kStageBytes = (kActBytes + kWBytes + kSBytes + 1023) / 1024 * 1024;
  static constexpr int kSmemLimit = 232448;  // SM90 opt-in maximum per block
  /// Block FP8: per warp the stage's combined scales, [t][kTok / 4 (+ 4 pad)] floats.
  static constexpr int kBsPitch = kTok / 4 + 4;
  static constexpr int kBsFloats = F == WFmt::kFp8Block ? 4 * kBsPitch : 1;
  /// NVFP4 splat table, kMbar barriers, block-FP8 combined scales.
  static constexpr int kStaticBytes = 512 + 16 * 8 + kMmaThreads / 32 * kBsFloats * 4;
  static constexpr int kMaxStages = (kSmemLimit - kStaticBytes - 1024) / kStageBytes;
  /// BF16 operands at 128 tokens: 4 stages, so that two CTAs (<= 128 registers per thread) share
  /// an SM and one's epilogue overlaps the other's main loop. FP8 (kTok / 2 partial + kTok / 2
  /// promoted accumulators, two partial sets for the 32 / 64-K promotion) and 192 / 256-token
  /// CTAs (probes: more MACs per copied byte and per decoded fragment): one CTA per SM, up to 6
  /// stages.
  static constexpr bool kWide = kTok > 128;
  /// Two CTAs per SM: each within half of the SM's 228 KB less 1 KB reserved per block. The
  /// mbarrier pipeline (refill two stages after consumption) takes a fifth stage where it fits.
  static constexpr int kMaxStages2 = (115712 - kStaticBytes - 1024) / kStageBytes;
  /// FP8 at 64 tokens (probe): 32 + 32 accumulators, so two CTAs per SM as many stages as fit.
  static constexpr bool kNarrow = kTok < 128;
  static constexpr int kStages = kF8BlockStages > 0 ? kF8BlockStages
                                 : kNarrow          ? (kMaxStages2 > 6 ? 6 : kMaxStages2)
                                 : !kF8 && !kWide   ? (kMbar && kMaxStages2 >= 5 ? 5 : 4)
                                                    : (kMaxStages > 6 ? 6 : kMaxStages);
  static constexpr int kMinBlocks = (!kF8 && !kWide) || kNarrow ? 2 : 1;
  static constexpr int kEpPitch = kRows * 2 + 16;  // bytes per staged output row (token)
  static constexpr int kPipeBytes = kStages * kStageBytes;
  static constexpr int kSmemBytes =
      (kPipeBytes > kTok * kEpPitch ? kPipeBytes : kTok * kEpPitch) + 1024;  // + alignment
  static constexpr int kAcc = kTok / 2;  // fp32 accumulators per thread (64 x kTok / 128)
  static_assert(kStages >= 3, "wgmma pipeline needs 3 stages");
  static_assert(kSmemBytes + kStaticBytes <= kSmemLimit, "wgmma kernel exceeds 227 KB");
  static_assert(kTok == 128 || kTok == 192 || ((kTok == 256) != kF8 && (kTok == 256 || kTok == 64)),
                "128 / 192-token CTAs, 64 for FP8 (two CTAs per SM), 256 for BF16 operands");
  static_assert(!kNarrow || !kF8Overlap, "two FP8 partial sets only at 128 tokens");
  static_assert(!kWide || !kF8Overlap, "two FP8 partial sets only at 128 tokens");
  static_assert(!kTokM || kTok == 128, "tokens on the M side: two warpgroups of 64 tokens");
  static_assert(!kWs || (kF8 ? kTok == 128 : kTok == 256),
                "warp-specialized: FP8 at 128 tokens, BF16 operands at 256");
  static_assert(F == WFmt::kNvfp4 || ((F == WFmt::kMxfp4 || F == WFmt::kFp8Mx) && !T::kFp16) ||
                    (kF8 && !T::kFp16),
                "wgmma kernel: NVFP4, BF16 MXFP4, MXFP8 (fold mode), FP8");
};

/// True for the (format, MMA dtype) pairs the wgmma kernel implements.
B12X_HD constexpr bool wgmma_format_ok(WFmt f, bool fp16) {
  return f == WFmt::kNvfp4 ||
         ((f == WFmt::kMxfp4 || f == WFmt::kFp8Mx || f == WFmt::kFp8 || f == WFmt::kFp8Block) &&
          !fp16);
}

namespace wg {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The fp32 accumulators of an m64nN wgmma (one warpgroup, NA = N / 2 per thread; N = 128, 192,
// 256): their PTX operand list and inline-asm constraints, shared by the instruction variants.
#define B12X_WGMMA_D32_REGS                                                \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define B12X_WGMMA_D32_OUT(d)                                                                     \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define B12X_WGMMA_D64_REGS                                                          \
  B12X_WGMMA_D32_REGS                                                                \
  ", "                                                                               \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define B12X_WGMMA_D64_OUT(d)                                                                    \
  B12X_WGMMA_D32_OUT(d), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),        \
      "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), \
      "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), \
      "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), \
      "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define B12X_WGMMA_D96_REGS                                                          \
  B12X_WGMMA_D64_REGS                                                                \
  ", "                                                                               \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define B12X_WGMMA_D96_OUT(d)                                                                    \
  B12X_WGMMA_D64_OUT(d), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]),        \
      "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), \
      "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), \
      "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), \
      "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define B12X_WGMMA_D128_REGS                                                                   \
  B12X_WGMMA_D96_REGS                                                                          \
  ", "                                                                                         \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "     \
  "%111, "                                                                                     \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, " \
  "%127"
#define B12X_WGMMA_D128_OUT(d)                                                             \
  B12X_WGMMA_D96_OUT(d), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), \
      "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]),  \
      "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]),  \
      "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]),  \
      "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]),  \
      "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
// One wgmma with A from registers (4 x b32 per thread) and B from a shared-memory descriptor;
// scale_d = 0 starts the accumulators from zero. AOPS / PRED: the operand numbers of the A
// registers and descriptor / of scale_d (after the NA accumulators); TAIL: the immediates after
// the predicate (scale-a, scale-b and, for 16-bit types, the B transpose flag).
#define B12X_WGMMA_RS(NAME, NA, AOPS, PRED, INSTR, TAIL)                                    \
  __device__ __forceinline__ void NAME(float(&d)[NA], const uint32_t(&a)[4], uint64_t desc, \
                                       int scale_d) {                                       \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " PRED ", 0;\n" INSTR                    \
                 " {" B12X_WGMMA_D##NA##_REGS "}, " AOPS ", p, " TAIL ";\n}\n"              \
                 : B12X_WGMMA_D##NA##_OUT(d)                                                \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));    \
  }
// The three operand types of one N (16-bit A / B with B's transpose flag 0, e4m3 k32).
#define B12X_WGMMA_RS_TYPES(N, NA, AOPS, PRED)                                         \
  B12X_WGMMA_RS(wgmma_rs_m64n##N##k16_bf16, NA, AOPS, PRED,                            \
                "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16", "1, 1, 0") \
  B12X_WGMMA_RS(wgmma_rs_m64n##N##k16_f16, NA, AOPS, PRED,                             \
                "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.f16.f16", "1, 1, 0")   \
  B12X_WGMMA_RS(wgmma_rs_m64n##N##k32_e4m3, NA, AOPS, PRED,                            \
                "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32.e4m3.e4m3", "1, 1")
B12X_WGMMA_RS_TYPES(64, 32, "{%32, %33, %34, %35}, %36", "%37")
B12X_WGMMA_RS_TYPES(128, 64, "{%64, %65, %66, %67}, %68", "%69")
B12X_WGMMA_RS_TYPES(192, 96, "{%96, %97, %98, %99}, %100", "%101")
B12X_WGMMA_RS_TYPES(256, 128, "{%128, %129, %130, %131}, %132", "%133")
// e4m3 m64n128k32 with both operands in shared memory (FP8 variant 9: tokens as A).
__device__ __forceinline__ void wgmma_ss_m64n128k32_e4m3(float (&d)[64], uint64_t da, uint64_t db,
                                                         int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {" B12X_WGMMA_D64_REGS
      "}, %64, %65, p, 1, 1;\n}\n"
      : B12X_WGMMA_D64_OUT(d)
      : "l"(da), "l"(db), "r"(scale_d));
}
#undef B12X_WGMMA_RS_TYPES
#undef B12X_WGMMA_RS
#undef B12X_WGMMA_D64_OUT
#undef B12X_WGMMA_D64_REGS
#undef B12X_WGMMA_D32_OUT
#undef B12X_WGMMA_D32_REGS
#undef B12X_WGMMA_D96_OUT
#undef B12X_WGMMA_D96_REGS
#undef B12X_WGMMA_D128_OUT
#undef B12X_WGMMA_D128_REGS
#endif

/// Shared-memory matrix descriptor of a K-major operand in the 128-byte swizzle mode: rows of 128
/// bytes, 8-row groups 1024 bytes apart (stride byte offset), leading byte offset unused (1).
__device__ __forceinline__ uint64_t desc_sw128(uint32_t saddr) {
  return static_cast<uint64_t>((saddr & 0x3FFFFu) >> 4) | (uint64_t{1} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

/// Shared-memory matrix descriptor of a K-major operand without swizzle: core matrices of 8 rows
/// x 16 bytes (128 contiguous bytes), `lbo` bytes apart along K (leading byte offset) and `sbo`
/// bytes apart along the rows (stride byte offset).
__device__ __forceinline__ uint64_t desc_kmajor(uint32_t saddr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((saddr & 0x3FFFFu) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32);
}

/// 32-bit shared-memory store (variant 9's weight transposition).
__device__ __forceinline__ void sts32(uint32_t saddr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(saddr), "r"(v) : "memory");
}

/// Operand tag of the e4m3 wgmma (k32).
struct F8Tag {
  static constexpr bool kFp16 = false;
};

template <class T, int kN>
__device__ __forceinline__ void mma(float (&d)[kN / 2], const uint32_t (&a)[4], uint64_t desc,
                                    int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(kN == 64 || kN == 128 || kN == 192 || kN == 256, "wgmma N: 64..256-token CTAs");
#define B12X_WGMMA_PICK(N)                           \
  if constexpr (cuda::std::is_same_v<T, F8Tag>) {    \
    wgmma_rs_m64n##N##k32_e4m3(d, a, desc, scale_d); \
  } else if constexpr (T::kFp16) {                   \
    wgmma_rs_m64n##N##k16_f16(d, a, desc, scale_d);  \
  } else {                                           \
    wgmma_rs_m64n##N##k16_bf16(d, a, desc, scale_d); \
  }
  if constexpr (kN == 64) {
    B12X_WGMMA_PICK(64)
  } else if constexpr (kN == 128) {
    B12X_WGMMA_PICK(128)
  } else if constexpr (kN == 192) {
    B12X_WGMMA_PICK(192)
  } else {
    B12X_WGMMA_PICK(256)
  }
#undef B12X_WGMMA_PICK
#endif
}

__device__ __forceinline__ void fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}
/// Pins accumulator registers at this point of the program (the compiler does not know that
/// wgmma writes them asynchronously until wait_group).
template <int N>
__device__ __forceinline__ void fence_acc(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void fence_proxy_async() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

/// Makes mbarrier.init visible to the async proxy: bulk copies (cp.async.bulk ... complete_tx)
/// signal the barriers from the async proxy, which the CTA barrier after the init does not order.
__device__ __forceinline__ void fence_mbarrier_init() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

/// Warpgroup register budget of a warp-specialized kernel (every warp of the warpgroup executes
/// it): the producer gives registers back, the MMA warpgroups take them.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
#endif
}

/// Named CTA barrier (ids 1..15; 0 is __syncthreads): waits until `count` threads arrived.
__device__ __forceinline__ void bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

/// mbarrier (shared::cta) primitives of the kMbar pipeline.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
/// Arrives on `bar` once all of this thread's earlier cp.async copies have landed (the arrival
/// is counted in the barrier's initial count: .noinc).
__device__ __forceinline__ void mbar_cp_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
/// Waits until the phase of parity `parity` of `bar` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}

/// Arrives on `bar` and adds `bytes` to the transaction count its phase waits for (the bulk
/// copies below complete on it).
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
/// Bulk copy (async proxy) of `bytes` (a multiple of 16, both addresses 16-byte aligned) into
/// this CTA's shared memory, completing `bytes` transactions on `bar`.
__device__ __forceinline__ void bulk_g2s(uint32_t saddr, const void* gmem, uint32_t bytes,
                                         uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(saddr),
      "l"(gmem), "r"(bytes), "r"(bar)
      : "memory");
}

/// 16-byte cp.async copying `bytes` (16 or 0: zero-fill) of the source.
__device__ __forceinline__ void cp16n(uint32_t saddr, const void* gmem, uint32_t bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(saddr), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp16(uint32_t saddr, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(saddr), "l"(gmem),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp4(uint32_t saddr, const void* gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(saddr), "l"(gmem),
               "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_commit() {
  asm volatile("cp.async.commit_group;");
}
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

/// A thread's share of the packed weight copies of one stage: a 16-row tile's stage is the
/// contiguous run [kb * kWTileBytes, +kWTileBytes) of its packed row (the packed order keeps a
/// tile's K vectors adjacent); 16-byte chunk tid + kThreads i is tile chunk / kChunksPerTile.
/// Sources are computed once; chunks of tiles past the matrix read the last tile (in bounds) with
/// zero bytes copied, so a stage's copy is one add and the cp.async (no select).
template <int kWTileBytes, int kRows, int kThreads>
struct WeightRuns {
  static constexpr int kChunksPerTile = kWTileBytes / 16;
  static constexpr int kChunks = (kRows / 16) * kChunksPerTile;
  static constexpr int kPerThread = (kChunks + kThreads - 1) / kThreads;
  static_assert(kChunks % kThreads == 0 || kChunks < kThreads, "weight chunk split");
  const uint8_t* src[kPerThread];
  uint32_t bytes[kPerThread];

  __device__ __forceinline__ WeightRuns(const uint8_t* wvals, int64_t tile0, int64_t n16,
                                        int64_t tile_stride, int tid) {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int ci = tid + i * kThreads;
      const int tl = ci / kChunksPerTile, off = (ci % kChunksPerTile) * 16;
      const bool valid = (kChunks % kThreads == 0 || ci < kChunks) && tile0 + tl < n16;
      src[i] = wvals + (valid ? tile0 + tl : n16 - 1) * tile_stride + off;
      bytes[i] = valid ? 16u : 0u;
    }
  }
  /// Stage kb's runs into the slot's weight area dst (koff = kb * kWTileBytes, < 2^32).
  __device__ __forceinline__ void load(uint32_t dst, uint32_t koff, int tid) const {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i)
      if (kChunks % kThreads == 0 || tid + i * kThreads < kChunks)
        cp16n(dst + (tid + i * kThreads) * 16, src[i] + koff, bytes[i]);
  }
};

/// The stage ring of the wgmma kernels: kStages shared-memory slots, stage kb + kAhead loaded
/// into the slot consumed kStages - kAhead stages before it. kMbar: per-slot "full" mbarriers (each
/// thread's copies arrive when they land: cp.async.mbarrier.arrive.noinc) and "empty" ones (one
/// arrival per thread), no CTA barrier; slot and phase are counters. Else one CTA barrier per
/// stage: the copies of stage kb waited for (cp.async groups), then the refill of the slot every
/// warp finished before the barrier.
template <int kStages, int kAhead, bool kMbar>
struct StagePipe {
  uint32_t full0, empty0;  ///< barrier arrays (kMbar), 8 bytes per slot
  int slot = 0, ph = 0, wslot = kAhead % kStages, wph = kAhead / kStages;

  /// Refills (load(slot, stage) for stage kb + kAhead < num_k), waits until stage kb has landed
  /// and returns its slot.
  template <class Load>
  __device__ __forceinline__ int advance(int kb, int num_k, Load&& load) {
    const int nk = kb + kAhead;
    if constexpr (kMbar) {
      // Refill first: the slot of stage nk - kStages, once every warp released it (its empty
      // barrier's phase nk / kStages - 1).
      if (nk < num_k) {
        if (nk >= kStages) mbar_wait(empty0 + 8 * wslot, wph ^ 1);
        load(wslot, nk);
        mbar_cp_arrive(full0 + 8 * wslot);
      }
      if (++wslot == kStages) wslot = 0, wph ^= 1;
      mbar_wait(full0 + 8 * slot, ph);
      // Written through the generic proxy (cp.async; visible through the barrier), read by wgmma
      // through the async proxy.
      fence_proxy_async();
      return slot;
    } else {
      cp_wait<kAhead - 1>();
      fence_proxy_async();  // as above, before the barrier that publishes every thread's copies
      __syncthreads();
      if (nk < num_k) load(nk % kStages, nk);  // its slot: stage nk - kStages, drained by all
      cp_commit();
      return kb % kStages;
    }
  }
  /// kMbar: this thread is done with the consumed slot (its warp's wgmmas retired, its own
  /// shared-memory reads done). Every thread arrives (the empty barriers count kThreads): an
  /// arrive releases only the executing thread's prior accesses, so one elected lane per warp
  /// after __syncwarp leaned on the warp barrier's ordering, which compute-sanitizer's racecheck
  /// does not follow (round 13 reported the refills of such slots as hazards).
  __device__ __forceinline__ void release(int lane) {
    (void)lane;
    if constexpr (kMbar) {
      mbar_arrive(empty0 + 8 * slot);
      if (++slot == kStages) slot = 0, ph ^= 1;
    }
  }
};

/// The warp-specialized producer's ring after the first `pro` stages' weights were issued (before
/// griddepcontrol.wait): those stages' activations, then stage kb into slot kb % kStages once the
/// MMA warpgroups released the slot's previous stage (empty phase kb / kStages - 1). Each stage
/// arrives on its slot's full barrier when this thread's copies of it land (cp.async
/// .mbarrier.arrive.noinc: the full barriers count the copying threads). Shared by the wgmma
/// kernel's cp.async ring and the GGML group kernel's (linear_tiled_sm90_group.cuh).
template <int kStages, class LoadWeights, class LoadActs>
__device__ __forceinline__ void producer_ring(int num_k, int pro, uint32_t full0, uint32_t empty0,
                                              LoadWeights&& load_weights, LoadActs&& load_acts) {
  for (int s = 0; s < pro; ++s) {
    load_acts(s, s);
    mbar_cp_arrive(full0 + 8 * s);
  }
  int sl = 0;
  uint32_t ph = 0;
  for (int kb = kStages; kb < num_k; ++kb) {
    mbar_wait(empty0 + 8 * sl, ph);
    load_weights(sl, kb);
    load_acts(sl, kb);
    mbar_cp_arrive(full0 + 8 * sl);
    if (++sl == kStages) sl = 0, ph ^= 1;
  }
}

}  // namespace wg

/// One output element of the wgmma kernels' epilogue: rounded to the output dtype's bits.
__device__ __forceinline__ uint16_t wgmma_out_bits(float v, bool fp16) {
  return fp16 ? __half_as_ushort(__float2half_rn(v)) : __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

/// The wgmma kernels' output stores: the tile staged in shared memory as ep[token][row]
/// (kEpPitch-byte rows of output-dtype bits) for weight rows n0.. and tokens m0.., written as
/// 16-byte row runs of out[token][row] (per element at the N edge or for unaligned outputs).
/// Call after the barrier that follows the staging.
template <int kRows, int kTok, int kThreads, int kEpPitch>
__device__ __forceinline__ void wgmma_store_rows(const uint16_t* ep, const LinearParams& p,
                                                 int64_t n0, int64_t m0, int tid) {
  const bool vec_ok =
      (p.ldo % 8 == 0) && (reinterpret_cast<uintptr_t>(p.out) % 16 == 0) && n0 + kRows <= p.N;
  uint16_t* out = static_cast<uint16_t*>(p.out);
  constexpr int kRowChunks = kRows * 2 / 16;
  for (int idx = tid; idx < kTok * kRowChunks; idx += kThreads) {
    const int r = idx / kRowChunks, c = idx % kRowChunks;
    const int64_t m = m0 + r;
    if (m >= p.M) continue;
    const uint16_t* src = ep + r * (kEpPitch / 2) + c * 8;
    if (vec_ok) {
      *reinterpret_cast<uint4*>(out + m * p.ldo + n0 + c * 8) =
          *reinterpret_cast<const uint4*>(src);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (n0 + c * 8 + e < p.N) out[m * p.ldo + n0 + c * 8 + e] = src[e];
    }
  }
}

/// The (weight tile, token tile) of this CTA. Raster bands (p.raster_group = g > 0, 1-D grid):
/// band b holds token tiles [b g, b g + g) x every weight tile, the token tile fastest, so the
/// CTAs resident at once share a few weight tiles (each read from HBM about once per band
/// instead of once per token tile when the weights exceed L2) while the band's activations stay
/// in L2. 0: the 2-D grid, weight tile fastest (blockIdx.x).
__device__ __forceinline__ int2 wgmma_tile(const LinearParams& p, int rows, int tok) {
  if (p.raster_group <= 0) return make_int2(blockIdx.x, blockIdx.y);
  const int id = blockIdx.x;
  const int tiles_w = static_cast<int>((p.NP + rows - 1) / rows);
  const int tiles_t = static_cast<int>((p.M + tok - 1) / tok);
  const int g = p.raster_group;
  const int band = id / (g * tiles_w);
  const int in = id - band * g * tiles_w;
  const int gs = min(g, tiles_t - band * g);  // the last band may be narrower
  return make_int2(in / gs, band * g + in % gs);
}

/// Raster bands: the activation bytes of one band's token tiles (re-read by every weight tile of
/// the band, so meant to stay in L2: a third of the H200's 50 MB, the rest for the weight tiles
/// in flight and the output).
inline constexpr int64_t kWgmmaRasterBytes = int64_t{16} << 20;

/// Launch grid of the wgmma kernels (`rows` weight rows x `tok` tokens per CTA, wgmma_tile): the
/// 2-D grid, weight tile fastest (raster 0), or 1-D raster bands of token tiles (raster 1: as
/// many as keep the band's activations, `act_bytes` per element, within kWgmmaRasterBytes; n > 1:
/// n tiles), written to q.raster_group.
inline dim3 wgmma_grid(const LinearParams& p, int rows, int tok, int raster, int act_bytes,
                       LinearParams& q) {
  const int64_t gx = (p.NP + rows - 1) / rows;
  const int64_t gy = (p.M + tok - 1) / tok;
  q.raster_group = 0;
  if (raster <= 0) {
    B12X_ASSERT(gy <= 65535, "too many token tiles: M=", p.M);
    return dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), 1);
  }
  const int64_t tile_bytes = static_cast<int64_t>(tok) * p.K * act_bytes;
  int64_t g = raster > 1 ? raster : kWgmmaRasterBytes / tile_bytes;
  g = g < 1 ? 1 : (g > gy ? gy : g);
  B12X_ASSERT(gx * gy <= INT32_MAX, "too many wgmma tiles: NP=", p.NP, " M=", p.M);
  q.raster_group = static_cast<int>(g);
  return dim3(static_cast<unsigned>(gx * gy), 1, 1);
}

template <WFmt F, class T, int kTokens, int kVariant>
__global__ void __launch_bounds__(WgmmaCfg<F, T, kTokens, kVariant>::kThreads,
                                  WgmmaCfg<F, T, kTokens, kVariant>::kMinBlocks)
    linear_wgmma_kernel(const LinearParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = WgmmaCfg<F, T, kTokens, kVariant>;
  constexpr int kStages = C::kStages;
  constexpr int kTok = C::kTok;
  constexpr WTraits kTr = wtraits(F);

  extern __shared__ uint8_t smem_raw[];
  __shared__ uint32_t lut[F == WFmt::kNvfp4 ? 128 : 1];
  // The 128B swizzle pattern repeats every 1024 bytes and wgmma computes it from the address:
  // stages start on 1024-byte boundaries.
  const uint32_t sbase =
      (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  uint8_t* const sgen =
      smem_raw + (sbase - static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)));

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int2 tile = wgmma_tile(p, C::kRows, kTok);
  const int64_t n0 = static_cast<int64_t>(tile.x) * C::kRows;
  const int64_t m0 = static_cast<int64_t>(tile.y) * kTok;
  const int64_t tile0 = n0 / 16;

  if constexpr (F == WFmt::kNvfp4) {
    if (tid < 128) lut[tid] = nvfp4_scale_splat<T>(static_cast<uint8_t>(tid));
  }
  __shared__ alignas(16) float bscale[C::kMmaThreads / 32][C::kBsFloats];  // block FP8 (promote)
  // kMbar: per slot a "full" barrier (one arrival per copying thread) and an "empty" one (one per
  // MMA thread), outside the dynamic area (which the epilogue reuses).
  __shared__ alignas(8) uint64_t bars[C::kMbar ? 2 * kStages : 1];
  const uint32_t full0 = static_cast<uint32_t>(__cvta_generic_to_shared(bars));
  const uint32_t empty0 = full0 + 8 * kStages;
  if constexpr (C::kMbar) {
    if (tid == 0) {
      for (int i = 0; i < kStages; ++i) {
        // Variant 14: the producer threads' scale stores plus the bulk-copying thread's
        // expect_tx arrival.
        wg::mbar_init(full0 + 8 * i, C::kBulk                     ? C::kCopyThreads + 1
                                     : C::kProdScales || C::kTokM ? 2 * C::kCopyThreads + C::kBulkW
                                                                  : C::kCopyThreads + C::kBulkW);
        wg::mbar_init(empty0 + 8 * i, C::kMmaThreads);
      }
      if constexpr (C::kBulkW) wg::fence_mbarrier_init();
    }
    __syncthreads();
  }

  const int num_k = static_cast<int>(p.KP / C::kBK);  // KP: a multiple of 256 (FP8) or 512
  const int64_t tile_stride = p.kvec * static_cast<int64_t>(kTr.slots) * 16;
  constexpr int kApv = 16 / kTr.lane_bytes;

  auto act_addr = [&](int s) { return sbase + s * C::kStageBytes; };
  auto w_addr = [&](int s) { return sbase + s * C::kStageBytes + C::kActBytes; };
  auto s_addr = [&](int s) { return sbase + s * C::kStageBytes + C::kActBytes + C::kWBytes; };

  // Weights and their scales do not depend on earlier kernels (issued before griddepcontrol.wait).
  static_assert(C::kWTileBytes == C::kBK / 32 / kApv * kTr.slots * 16, "stage run of a tile");
  // Copying threads (every thread; warpgroup 0 alone when warp-specialized).
  constexpr int kCT = C::kCopyThreads;
  constexpr int kAR = kCT / 8;  // activation rows per pass (8 chunks of 16 bytes per row)
  const wg::WeightRuns<C::kWTileBytes, C::kRows, kCT> wruns(p.wvals, tile0, p.n16, tile_stride,
                                                            tid);
  // Activation rows r0 + kAR i of 16-byte chunk c: the swizzled chunk (c ^ (r & 7)) is the same
  // for every i (kAR is a multiple of 8); rows at and past M are zero-filled (zero bytes copied
  // from the start of x).
  const int ar0 = tid >> 3, ac = tid & 7;
  constexpr int kElem = C::kF8 ? 1 : 2;  // bytes per activation
  const int64_t ldb = C::kF8 ? p.ldx_bytes : 2 * p.ldx;
  const uint8_t* const xb = static_cast<const uint8_t*>(p.x);
  const int64_t rows_left = p.M - m0 - ar0;  // rows i with kAR i < rows_left are valid
  const uint8_t* const asrc0 = xb + (m0 + ar0) * ldb + ac * 16;
  const uint32_t adst0 = ar0 * 128 + ((ac ^ (ar0 & 7)) << 4);
  // All kTok / kAR rows of this thread valid (every token tile but a tail one).
  static_assert(kTok % kAR == 0, "activation rows per copying thread");
  const bool arows_full = rows_left > kAR * (kTok / kAR - 1);

  auto load_weights = [&](int s, int kb) {
    if constexpr (C::kBulkW) {
      // Variant 14: the slot's whole transaction count (weights and activations; 16: the
      // weights) announced with the copying thread's arrival before its first copy; tiles past
      // the matrix copy the last one (their rows are never stored).
      if (tid == 0) {
        const uint32_t bar = full0 + 8 * s;
        wg::mbar_arrive_expect_tx(bar, C::kWBytes + (C::kBulk ? C::kActBytes : 0));
#pragma unroll
        for (int i = 0; i < C::kRows / 16; ++i) {
          const int64_t tl = tile0 + i < p.n16 ? tile0 + i : p.n16 - 1;
          wg::bulk_g2s(w_addr(s) + i * C::kWTileBytes,
                       p.wvals + tl * tile_stride + static_cast<int64_t>(kb) * C::kWTileBytes,
                       C::kWTileBytes, bar);
        }
      }
      return;
    }
    const int64_t k0 = static_cast<int64_t>(kb) * C::kBK;
    wruns.load(w_addr(s), static_cast<uint32_t>(kb) * C::kWTileBytes, tid);  // <= 16 KP bytes
    if constexpr (F == WFmt::kFp8Block && !C::kProdScales) {
      // The CTA's 128 rows lie in one 128-row block (n0 is a multiple of 128).
      if (tid == 0)
        wg::cp4(s_addr(s) + kTok * 4,
                reinterpret_cast<const float*>(p.wscale) + (n0 / 128) * p.scale_ld + kb, true);
    } else if (!C::kF8 && tid < C::kRows) {
      const int64_t row = n0 + tid;
      const bool valid = row < p.NP;
      // NVFP4: the stage's four UE4M3 codes (KP/16 is a multiple of 32, k0/16 of 4); E8M0: the
      // aligned u32 holding the stage's two 32-K scales (bytes 2(kb&1), 2(kb&1)+1).
      const int64_t col = F == WFmt::kNvfp4 ? k0 / 16 : (k0 / 32) & ~int64_t{3};
      const uint8_t* src = p.wscale + row * p.scale_ld + col;
      wg::cp4(s_addr(s) + tid * 4, valid ? src : p.wscale, valid);
    }
  };
  auto load_acts = [&](int s, int kb) {
    if constexpr (C::kBulk) {
      // Variant 14: the quantizer's image of this stage (token tile m0 / 128, group kb).
      if (tid == 0)
        wg::bulk_g2s(act_addr(s), xb + m0 * p.K + static_cast<int64_t>(kb) * C::kActBytes,
                     C::kActBytes, full0 + 8 * s);
      return;
    }
    const int64_t k0 = static_cast<int64_t>(kb) * C::kBK;
    const bool kvalid = k0 + ac * (16 / kElem) < p.K;
    const uint8_t* src = asrc0 + k0 * kElem;
    const uint32_t dst = act_addr(s) + adst0;
    if (arows_full && kvalid) {
#pragma unroll
      for (int i = 0; i < kTok / kAR; ++i) wg::cp16n(dst + i * kAR * 128, src + i * kAR * ldb, 16u);
    } else {
      // A token tail or the K tail (the zero-filled last stage): invalid rows / chunks copy zero
      // bytes from the start of x.
#pragma unroll
      for (int i = 0; i < kTok / kAR; ++i) {
        const bool valid = kvalid && kAR * i < rows_left;
        wg::cp16n(dst + i * kAR * 128, valid ? src + i * kAR * ldb : xb, valid ? 16u : 0u);
      }
    }
    if constexpr (F == WFmt::kFp8Block && !C::kProdScales) {
      // Activation scales of the stage's group (zero-filled past M / K, where x is zero too).
      for (int r = tid; r < kTok; r += kCT) {
        const int64_t m = m0 + r;
        const bool valid = m < p.M && k0 < p.K;
        const float* src = p.xscale + m * p.xscale_ld + kb;
        wg::cp4(s_addr(s) + r * 4, valid ? src : p.xscale, valid);
      }
    }
  };

  if constexpr (C::kWs) {
    if (warp < 4) {
      // Producer warpgroup: fills slot kb % kStages with stage kb once the MMA warpgroups
      // released its previous stage (empty barrier phase kb / kStages - 1); the first kStages
      // stages' weights go out before griddepcontrol.wait, as in the shared ring.
      wg::setmaxnreg_dec<C::kProdRegs>();
      const int pro = num_k < kStages ? num_k : kStages;
      // Variant 9: warp w's eight atoms of a stage (tiles 2w, 2w + 1, four k32 atoms each), one
      // 16-byte lane vector each, loaded into registers (fetch_w) and stored as the K-major core
      // matrices the B descriptor reads (put_w): weight row 16 tile + 8 h + g of the lane's
      // words h (k 4t..4t+3) and 2 + h (k 16 + 4t..) is row 8 ng + g of core matrix ng = 2 tile +
      // h; k chunk kc = 2 atom + c at kc * 2048 bytes (LBO), ng at ng * 128 (SBO). Per STS.32 the
      // warp writes one 128-byte core matrix: no bank conflict. Tiles past the matrix read the
      // last one (their output columns are never stored).
      const uint8_t* wsrc[2] = {p.wvals, p.wvals};
      constexpr bool kRegW = C::kTokM;  // variants 9-12
      if constexpr (kRegW) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int64_t tl = tile0 + 2 * warp + i;
          wsrc[i] = p.wvals + (tl < p.n16 ? tl : p.n16 - 1) * tile_stride + lane * 16;
        }
      }
      auto fetch_w = [&](int kb, uint4(&r)[8]) {
        if (kb < num_k) {
          const int64_t off = static_cast<int64_t>(kb) * C::kWTileBytes;
#pragma unroll
          for (int q = 0; q < 8; ++q)
            r[q] = __ldg(reinterpret_cast<const uint4*>(wsrc[q >> 2] + off + (q & 3) * 512));
        }
      };
      auto put_w = [&](int sl, const uint4(&r)[8]) {
        if constexpr (C::kSwB) {
          // Variant 11: row n = 16 tile + 8 h + g at n * 128, chunk kc = 2 atom + c at kc ^ g
          // (n & 7 = g): per STS.32 eight rows x four words, all 32 banks.
          const uint32_t base = w_addr(sl) + warp * 4096 + g * 128 + t * 4;
#pragma unroll
          for (int q = 0; q < 8; ++q) {
            const uint32_t d = base + (q >> 2) * 2048;
            const uint32_t c0 = ((2 * (q & 3)) ^ g) << 4, c1 = ((2 * (q & 3) + 1) ^ g) << 4;
            wg::sts32(d + c0, r[q].x);
            wg::sts32(d + 1024 + c0, r[q].y);
            wg::sts32(d + c1, r[q].z);
            wg::sts32(d + 1024 + c1, r[q].w);
          }
        } else {
          const uint32_t base = w_addr(sl) + warp * 512 + g * 16 + t * 4;
#pragma unroll
          for (int q = 0; q < 8; ++q) {
            const uint32_t d = base + (q >> 2) * 256 + (q & 3) * 4096;
            wg::sts32(d, r[q].x);
            wg::sts32(d + 128, r[q].y);
            wg::sts32(d + 2048, r[q].z);
            wg::sts32(d + 2048 + 128, r[q].w);
          }
        }
      };
      if constexpr (kRegW) {
        for (int s = 0; s < pro; ++s) {
          uint4 r[8];
          fetch_w(s, r);
          put_w(s, r);
        }
      } else {
        for (int s = 0; s < pro; ++s) load_weights(s, s);
      }
      griddep_wait();
      if constexpr (C::kProdScales || C::kTokM) {
        // Variant 8: this thread's token tid of stage kb, x_scale * w_scale (0 past M / K, where
        // the activations are zero-filled), read with plain loads (x_scale comes from the
        // previous kernel) two producer steps before the step that stores the product into the
        // stage's slot and arrives on its full barrier a second time, so no step waits for a
        // load. (Round 21: loading and multiplying in the same step, then storing one step later,
        // ran 4096x14336 10% slower than variant 6 while K = 4096 shapes gained 5%.)
        static_assert(kTok == C::kCopyThreads, "one token per producer thread");
        // (Variant 9 with per-tensor FP8: no scales, the second arrival follows the weights.)
        const int64_t m = m0 + tid;
        const float* const xrow =
            C::kProdScales ? p.xscale + (m < p.M ? m : 0) * p.xscale_ld : nullptr;
        const float* const wrow =
            C::kProdScales ? reinterpret_cast<const float*>(p.wscale) + (n0 / 128) * p.scale_ld
                           : nullptr;
        auto fetch = [&](int kb, float& x, float& w) {
          x = 0.f;
          w = 0.f;
          if (C::kProdScales && kb < num_k && m < p.M && static_cast<int64_t>(kb) * C::kBK < p.K) {
            x = xrow[kb];
            w = __ldg(wrow + kb);
          }
        };
        // Token 8j + 2t + e at [t][2j + e] (variant 8), in token order (variant 9).
        const int r = tid;
        const int toff = C::kTokM ? r : ((r >> 1) & 3) * C::kBsPitch + 2 * (r >> 3) + (r & 1);
        auto put = [&](int sl, float x, float w) {
          if constexpr (C::kProdScales)
            reinterpret_cast<float*>(sgen + sl * C::kStageBytes + C::kActBytes + C::kWBytes)[toff] =
                x * w;
          // Variant 9: the weight stores (generic proxy) are read by wgmma (async proxy).
          if constexpr (C::kTokM) wg::fence_proxy_async();
          wg::mbar_arrive(full0 + 8 * sl);  // after this thread's weight / scale stores
        };
        float xp[kStages], wp[kStages];
#pragma unroll
        for (int s = 0; s < kStages; ++s) {
          if (s < pro) {
            load_acts(s, s);
            if constexpr (!C::kBulk) wg::mbar_cp_arrive(full0 + 8 * s);
            fetch(s, xp[s], wp[s]);
          }
        }
#pragma unroll
        for (int s = 0; s < kStages; ++s)
          if (s < pro) put(s, xp[s], wp[s]);
        // Step kb + h of each pass of kPf steps uses register set h, refetched for kb + h + kPf.
        constexpr int kPf = C::kPfSteps;
        float xq[kPf], wq[kPf];
        uint4 wr[kRegW ? kPf : 1][8];
#pragma unroll
        for (int h = 0; h < kPf; ++h) {
          fetch(kStages + h, xq[h], wq[h]);
          if constexpr (kRegW) fetch_w(kStages + h, wr[h]);
        }
        int sl = 0;
        uint32_t ph = 0;
        for (int kb = kStages; kb < num_k; kb += kPf) {
#pragma unroll
          for (int h = 0; h < kPf; ++h) {
            if (kb + h < num_k) {
              wg::mbar_wait(empty0 + 8 * sl, ph);
              if constexpr (!kRegW) load_weights(sl, kb + h);
              load_acts(sl, kb + h);
              if constexpr (!C::kBulk) wg::mbar_cp_arrive(full0 + 8 * sl);
              if constexpr (kRegW) {
                put_w(sl, wr[h]);
                fetch_w(kb + h + kPf, wr[h]);
              }
              put(sl, xq[h], wq[h]);
              fetch(kb + h + kPf, xq[h], wq[h]);
              if (++sl == kStages) sl = 0, ph ^= 1;
            }
          }
        }
      } else {
        wg::producer_ring<kStages>(num_k, pro, full0, empty0, load_weights, load_acts);
      }
      wg::cp_wait<0>();  // no copy of this thread outlives it
      griddep_launch_dependents();
      return;
    }
    wg::setmaxnreg_inc<C::kConsRegs>();
    griddep_wait();  // alpha / bias
  }
  // This warp among the MMA warps: its 16-row tile of the CTA's weight rows.
  const int cw = C::kWs ? warp - 4 : warp;

  float acc[C::kAcc];
#pragma unroll
  for (int i = 0; i < C::kAcc; ++i) acc[i] = 0.f;
  // FP8: the stage's partial sums (the FP8 MMA accumulator keeps ~13 mantissa bits on SM90);
  // two sets when the promotion overlaps the next stage's wgmmas.
  float part0[C::kF8 ? C::kAcc : 1];
  float part1[C::kF8Overlap ? C::kAcc : 1];
  static_assert(C::kF8Sub == 1 || C::kF8Sub % 2 == 0, "sub-blocks alternate two partial sets");

  // acc += partial of the stage in slot `sl` (times the block scales in its scale area).
  // Block FP8: the combined scales x_scale[token] * w_scale of the stage in slot `sl`, computed
  // once per warp (four tokens per lane) rather than by each lane for its kTok / 4 tokens, stored
  // so that lane (g, t) reads its tokens 8j + 2t + e as float4 runs of [t][2j + e] into v.
  constexpr int kSv = F == WFmt::kFp8Block ? kTok / 16 : 1;
  auto block_scales = [&](int sl, float4(&v)[kSv]) {
    if constexpr (C::kProdScales) {
      // Built by the producer in this layout (released by the slot's full barrier).
      const float* tb =
          reinterpret_cast<const float*>(sgen + sl * C::kStageBytes + C::kActBytes + C::kWBytes) +
          t * C::kBsPitch;
#pragma unroll
      for (int jj = 0; jj < kSv; ++jj) v[jj] = *reinterpret_cast<const float4*>(tb + 4 * jj);
      return;
    }
    const float* xs =
        reinterpret_cast<const float*>(sgen + sl * C::kStageBytes + C::kActBytes + C::kWBytes);
    const float ws = xs[kTok];
    float* const bs = bscale[cw];
    __syncwarp();  // the previous stage's reads of bs
#pragma unroll
    for (int q = lane; q < kTok / 4; q += 32) {
      const float4 x4 = *reinterpret_cast<const float4*>(xs + 4 * q);
      float* d = bs + 2 * (q & 1) * C::kBsPitch + 2 * (q >> 1);  // tokens 4q, 4q+1: t = 2(q&1)
      *reinterpret_cast<float2*>(d) = make_float2(x4.x * ws, x4.y * ws);
      *reinterpret_cast<float2*>(d + C::kBsPitch) = make_float2(x4.z * ws, x4.w * ws);
    }
    __syncwarp();
    const float* mine = bs + t * C::kBsPitch;
#pragma unroll
    for (int jj = 0; jj < kSv; ++jj) v[jj] = *reinterpret_cast<const float4*>(mine + 4 * jj);
  };
  // acc += partial (times the block scales v for block FP8).
  auto promote_with = [&](float(&pt)[C::kF8 ? C::kAcc : 1], const float4(&v)[kSv]) {
    if constexpr (F == WFmt::kFp8Block) {
#pragma unroll
      for (int jj = 0; jj < kSv; ++jj)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          acc[8 * jj + 2 * h] = fmaf(pt[8 * jj + 2 * h], v[jj].x, acc[8 * jj + 2 * h]);
          acc[8 * jj + 2 * h + 1] = fmaf(pt[8 * jj + 2 * h + 1], v[jj].y, acc[8 * jj + 2 * h + 1]);
          acc[8 * jj + 4 + 2 * h] = fmaf(pt[8 * jj + 4 + 2 * h], v[jj].z, acc[8 * jj + 4 + 2 * h]);
          acc[8 * jj + 5 + 2 * h] = fmaf(pt[8 * jj + 5 + 2 * h], v[jj].w, acc[8 * jj + 5 + 2 * h]);
        }
    } else if constexpr (C::kF8) {
#pragma unroll
      for (int i = 0; i < C::kAcc; ++i) acc[i] += pt[i];
    }
  };
  // acc += partial of the stage in slot `sl` (times the block scales in its scale area).
  auto promote = [&](float(&pt)[C::kF8 ? C::kAcc : 1], int sl) {
    float4 v[kSv];
    if constexpr (F == WFmt::kFp8Block) block_scales(sl, v);
    promote_with(pt, v);
  };

  // Prologue: stages 0..kStages-1-kLag (the weights first, then the wait for the activations).
  constexpr int kAhead = kStages - C::kLag;  // stages in flight ahead of the consumed one
  if constexpr (!C::kWs) {
#pragma unroll
    for (int s = 0; s < kAhead; ++s)
      if (s < num_k) load_weights(s, s);
    griddep_wait();
#pragma unroll
    for (int s = 0; s < kAhead; ++s) {
      if (s < num_k) load_acts(s, s);
      if constexpr (C::kMbar) {
        if (s < num_k) wg::mbar_cp_arrive(full0 + 8 * s);
      } else {
        wg::cp_commit();
      }
    }
    __syncthreads();  // lut
  }

  // One stage: wait for its copies, refill the slot freed kLag stages ago, decode this warp's A
  // fragments, issue the wgmmas. FP8: into partial set pc; pp holds the previous stage's
  // partials (overlapped promotion).
  // A fragments of the wgmma group still in flight after a stage (wait_group 1), meant to keep
  // them live until the wait that retires the group. This does not reach ptxas (the empty asm
  // emits no PTX; round 9's SASS reuses the registers), so it protects nothing: the FP8 32 / 64-K
  // schedules are correct because ptxas serializes their wgmmas (C7514), and the BF16 path
  // drains every stage. See docs/gemm.md.
  uint32_t held[C::kF8Overlap ? 4 : 1][4] = {};
  auto release_held = [&] {
#pragma unroll
    for (int i = 0; i < (C::kF8Overlap ? 4 : 1); ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) asm volatile("" ::"r"(held[i][j]));
  };
  // FP8: this warp's A fragments of the stage in slot s (the packed e4m3 k32 fragments are
  // wgmma's register A operand as they are) / its four chained k32 wgmmas into the partial.
  auto load_af8 = [&](int s, uint32_t(&af)[4][4]) {
    const uint8_t* wsg = sgen + s * C::kStageBytes + C::kActBytes + cw * C::kWTileBytes;
#pragma unroll
    for (int at = 0; at < 4; ++at) {
      const uint4 rv = *reinterpret_cast<const uint4*>(wsg + at * 512 + lane * 16);
      af[at][0] = rv.x;
      af[at][1] = rv.y;
      af[at][2] = rv.z;
      af[at][3] = rv.w;
    }
  };
  auto issue_f8 = [&](int s, const uint32_t(&af)[4][4]) {
    if constexpr (C::kF8) {
      const uint64_t desc = wg::desc_sw128(act_addr(s));
      wg::fence_acc(part0);
      wg::fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) wg::mma<wg::F8Tag, kTok>(part0, af[ks], desc + 2 * ks, ks);
      wg::commit();
    }
  };
  // Stage kb in slot s (landed): this warp's A fragments, the wgmmas, the promotion.
  // Variant 9 (tokens on the M side): warpgroup cw / 4 multiplies its 64 activation rows (A,
  // 128-byte swizzle, 8 KB per warpgroup) by the stage's 128 weight rows (B, the producer's
  // K-major core matrices: LBO 2048 bytes along K, SBO 128 along the rows; a k32 step is two
  // core matrices = 4096 bytes). Thread (warp cw, g, t) holds tokens 16 cw + g + 8 h times
  // weight rows 8 j + 2 t + e: part0[4 j + 2 h + e]; block FP8 promotes with the combined
  // scales of its two tokens.
  auto compute_tm = [&](int s) {
    if constexpr (C::kTokM) {
      // B: k32 step ks at +32 bytes (swizzled rows, variant 11) or +4096 (two core matrices).
      const uint64_t db =
          C::kSwB ? wg::desc_sw128(w_addr(s)) : wg::desc_kmajor(w_addr(s), 2048, 128);
      constexpr int kBStep = C::kSwB ? 2 : 256;
      if constexpr (C::kTokMRegA) {
        // Lane l addresses row l & 7 of matrix l >> 3 (rows 16 cw + 8 (mi & 1).., 16-byte chunk
        // 2 ks + (mi >> 1) of the 32-byte k step, swizzled): the four 8 x 16-byte matrices are
        // the e4m3 k32 A fragment's registers (g, 4t..), (g + 8, 4t..), (g, 16 + 4t..), (g + 8,
        // 16 + 4t..).
        const int mi = lane >> 3, rr = lane & 7;
        const uint8_t* rowp = sgen + s * C::kStageBytes + (16 * cw + rr + 8 * (mi & 1)) * 128;
        uint32_t af[4][4];
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
          ldmatrix_x4(af[ks], rowp + (((2 * ks + (mi >> 1)) ^ rr) << 4));
        wg::fence_acc(part0);
        wg::fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) wg::mma<wg::F8Tag, 128>(part0, af[ks], db + kBStep * ks, ks);
        wg::commit();
      } else {
        const uint64_t da = wg::desc_sw128(act_addr(s) + (cw >> 2) * (C::kActBytes / 2));
        wg::fence_acc(part0);
        wg::fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
          wg::wgmma_ss_m64n128k32_e4m3(part0, da + 2 * ks, db + kBStep * ks, ks);
        wg::commit();
      }
      float sc[2] = {1.f, 1.f};
      if constexpr (F == WFmt::kFp8Block) {
        const float* cs =
            reinterpret_cast<const float*>(sgen + s * C::kStageBytes + C::kActBytes + C::kWBytes) +
            16 * cw + g;
        sc[0] = cs[0];
        sc[1] = cs[8];
      }
      wg::wait<0>();
      wg::fence_acc(part0);
      wg::mbar_arrive(empty0 + 8 * s);  // this thread's reads of the slot are done
#pragma unroll
      for (int i = 0; i < C::kAcc; ++i) {
        if constexpr (F == WFmt::kFp8Block) {
          acc[i] = fmaf(part0[i], sc[(i >> 1) & 1], acc[i]);
        } else {
          acc[i] += part0[i];
        }
      }
    }
  };
  auto compute = [&](int s, int kb) {
    if constexpr (C::kTokM) {
      compute_tm(s);
      return;
    }
    // This warp's 16-row tile: A fragments of the stage's four k16 steps.
    uint32_t af[4][4];
    const uint8_t* wsg = sgen + s * C::kStageBytes + C::kActBytes + cw * C::kWTileBytes;
    const uint32_t* ssg =
        reinterpret_cast<const uint32_t*>(sgen + s * C::kStageBytes + C::kActBytes + C::kWBytes);
    const uint32_t s_lo = C::kF8 ? 0u : ssg[cw * 16 + g];
    const uint32_t s_hi = C::kF8 ? 0u : ssg[cw * 16 + g + 8];
    if constexpr (C::kF8) {
      load_af8(s, af);
    } else if constexpr (C::kFp4) {
      const uint4 rv = *reinterpret_cast<const uint4*>(wsg + lane * 16);
      const uint32_t words[4] = {rv.x, rv.y, rv.z, rv.w};  // (atom 0: step 0, 1), (atom 1: ...)
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        uint32_t sc[2];
        if constexpr (F == WFmt::kNvfp4) {
          sc[0] = lut[(s_lo >> (8 * ks)) & 0x7Fu];
          sc[1] = lut[(s_hi >> (8 * ks)) & 0x7Fu];
        } else {
          const int sh = 8 * (2 * (kb & 1) + (ks >> 1));
          sc[0] = e8m0_bf16_splat((s_lo >> sh) & 0xFFu);
          sc[1] = e8m0_bf16_splat((s_hi >> sh) & 0xFFu);
        }
        uint32_t pairs[4];
        fp4_word_pairs<T>(words[ks], pairs);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t bits = pairs[j];
          if constexpr (F == WFmt::kNvfp4) {
            af[ks][j] = fma2<T>(bits, sc[j & 1], kNegZero2<T>());
          } else {
            af[ks][j] =
                fma2<T>(fma2<T>(bits, kFp4Unit2<T>(), kNegZero2<T>()), sc[j & 1], kNegZero2<T>());
          }
        }
      }
    } else {
      // MXFP8: per atom one 16-byte vector, the e4m3 k32 fragment; its bytes decode in place
      // into two BF16 k16 fragments in the pre-pass's permuted k order (see linear_tiled.cuh).
#pragma unroll
      for (int at = 0; at < 2; ++at) {
        const uint4 rv = *reinterpret_cast<const uint4*>(wsg + at * 512 + lane * 16);
        const int sh = 8 * (2 * (kb & 1) + at);
        const uint32_t sc0 = e8m0_bf16_splat((s_lo >> sh) & 0xFFu);
        const uint32_t sc1 = e8m0_bf16_splat((s_hi >> sh) & 0xFFu);
#pragma unroll
        for (int st = 0; st < 2; ++st) {
          const uint32_t w0 = st ? rv.z : rv.x;
          const uint32_t w1 = st ? rv.w : rv.y;
          uint32_t* a = af[2 * at + st];
          a[0] = fma2<T>(fp8_pair_bf16(prmt(w0, 0, 0x4140u)), sc0, kNegZero2<T>());
          a[2] = fma2<T>(fp8_pair_bf16(prmt(w0, 0, 0x4342u)), sc0, kNegZero2<T>());
          a[1] = fma2<T>(fp8_pair_bf16(prmt(w1, 0, 0x4140u)), sc1, kNegZero2<T>());
          a[3] = fma2<T>(fp8_pair_bf16(prmt(w1, 0, 0x4342u)), sc1, kNegZero2<T>());
        }
      }
    }
    const uint64_t desc = wg::desc_sw128(act_addr(s));
    if constexpr (C::kF8Overlap) {
      // Sub-block i (kF8Sub per stage) into partial set i & 1; its wait retires sub-block i-1
      // (the previous stage's last for i = 0), whose partials are then promoted.
      constexpr int kPer = 4 / C::kF8Sub;  // k32 wgmmas per sub-block
#pragma unroll
      for (int i = 0; i < C::kF8Sub; ++i) {
        float(&pc)[C::kAcc] = (i & 1) ? part1 : part0;
        float(&pp)[C::kAcc] = (i & 1) ? part0 : part1;
        wg::fence_acc(pc);
        wg::fence();
#pragma unroll
        for (int q = 0; q < kPer; ++q)
          wg::mma<wg::F8Tag, kTok>(pc, af[i * kPer + q], desc + 2 * (i * kPer + q), q);
        wg::commit();
        wg::wait<1>();
        wg::fence_acc(pp);
        if (i == 0) {
          release_held();
          if (kb > 0) promote(pp, (kb - 1) % kStages);
        } else {
          promote(pp, s);
        }
      }
    } else if constexpr (C::kF8) {
      issue_f8(s, af);
      if constexpr (C::kHoist) {
        float4 v[kSv];
        if constexpr (F == WFmt::kFp8Block) block_scales(s, v);
        wg::wait<0>();
        wg::fence_acc(part0);
        wg::mbar_arrive(empty0 + 8 * s);  // this thread's reads of the slot are done
        promote_with(part0, v);
      } else {
        wg::wait<0>();
        wg::fence_acc(part0);
        promote(part0, s);
      }
    } else {
      wg::fence_acc(acc);
      wg::fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) wg::mma<T, kTok>(acc, af[ks], desc + 2 * ks, 1);
      wg::commit();
      if constexpr (C::kDrain) {
        wg::wait<0>();
      } else {
        wg::wait<1>();
      }
      wg::fence_acc(acc);
      release_held();
    }
    if constexpr (C::kF8Overlap) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) held[i][j] = af[i][j];
    }
  };
  // Barrier of the MMA warps (the producer warpgroup has returned: named barrier 1 of 256).
  auto mma_sync = [] {
    if constexpr (C::kWs) {
      wg::bar_sync(1, C::kMmaThreads);
    } else {
      __syncthreads();
    }
  };
  // The output multiplier and this thread's two rows' bias of the tile at n0.
  auto tile_out_params = [&](float& mult, float(&bias)[2]) {
    mult = F == WFmt::kFp8Mx ? 128.f * p.out_mult : p.out_mult;
    if (p.alpha != nullptr) mult *= *p.alpha;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t n = n0 + cw * 16 + g + 8 * h;
      bias[h] =
          !C::kTokM && p.bias != nullptr && n < p.N ? load_out_type(p.bias, n, p.out_fp16) : 0.f;
    }
  };
  // Accumulator (wgmma D fragment): acc[4j + 2h + e] = (weight row 16 cw + g + 8h, token
  // 8j + 2t + e), staged as out dtype [token][row] (kEpPitch-byte rows) for wgmma_store_rows.
  auto stage_out = [&](uint16_t* ep, float mult, const float(&bias)[2]) {
#pragma unroll
    for (int j = 0; j < kTok / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          ep[(8 * j + 2 * t + e) * (C::kEpPitch / 2) + cw * 16 + g + 8 * h] =
              wgmma_out_bits(acc[4 * j + 2 * h + e] * mult + bias[h], p.out_fp16);
        }
  };
  if constexpr (C::kWs) {
    // MMA warpgroups: wait for stage kb's slot to fill (full phase kb / kStages), consume it,
    // release it (this thread's wgmmas of the slot retired and its shared-memory reads done).
    int sl = 0;
    uint32_t ph = 0;
    if constexpr (C::kPrefetch) {
      // Two fragment sets, alternating (the loop body unrolled twice keeps them in registers).
      // The wgmmas of set h read its registers until their wait, the loads go to set h ^ 1.
      uint32_t afs[2][4][4];
      wg::mbar_wait(full0, 0);
      wg::fence_proxy_async();
      load_af8(0, afs[0]);
      for (int kb = 0; kb < num_k; kb += 2) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (kb + h < num_k) {
            const int nsl = sl + 1 == kStages ? 0 : sl + 1;
            const uint32_t nph = sl + 1 == kStages ? ph ^ 1 : ph;
            issue_f8(sl, afs[h]);
            float4 v[kSv];
            if constexpr (F == WFmt::kFp8Block) block_scales(sl, v);
            if (kb + h + 1 < num_k) {
              wg::mbar_wait(full0 + 8 * nsl, nph);
              wg::fence_proxy_async();
              load_af8(nsl, afs[h ^ 1]);
            }
            wg::wait<0>();
            wg::fence_acc(part0);
            wg::mbar_arrive(empty0 + 8 * sl);
            promote_with(part0, v);
            sl = nsl;
            ph = nph;
          }
        }
      }
    } else {
      for (int kb = 0; kb < num_k; ++kb) {
        wg::mbar_wait(full0 + 8 * sl, ph);
        // cp.async writes (generic proxy) read by wgmma (async proxy); not needed where every
        // byte the MMA warps read came by bulk copy or generic stores (kConsFence).
        if constexpr (C::kConsFence) wg::fence_proxy_async();
        compute(sl, kb);
        if constexpr (!C::kHoist) wg::mbar_arrive(empty0 + 8 * sl);  // kHoist: inside compute
        if (++sl == kStages) sl = 0, ph ^= 1;
      }
    }
  } else {
    wg::StagePipe<kStages, kAhead, C::kMbar> pipe{full0, empty0};
    for (int kb = 0; kb < num_k; ++kb) {
      const int s = pipe.advance(kb, num_k, [&](int sl, int k) {
        load_weights(sl, k);
        load_acts(sl, k);
      });
      compute(s, kb);
      // This warp's wgmmas of the slot retired (wait_group 0) and its scale reads are done.
      pipe.release(lane);
    }
  }
  wg::wait<0>();
  release_held();
  if constexpr (C::kF8Overlap) {
    // The last sub-block (kF8Sub is even: partial set 1).
    wg::fence_acc(part1);
    promote(part1, (num_k - 1) % kStages);
  }
  wg::fence_acc(acc);
  wg::cp_wait<0>();
  griddep_launch_dependents();
  mma_sync();  // the pipeline buffers become the output staging tile

  float mult = 0.f;
  float bias[2] = {0.f, 0.f};
  tile_out_params(mult, bias);
  uint16_t* ep = reinterpret_cast<uint16_t*>(sgen);
  if constexpr (C::kTokM) {
    // acc[4j + 2h + e] = (token 16 cw + g + 8h, weight row 8j + 2t + e): row pairs as u32 (bank
    // 4g + t + 4j of the 272-byte rows: conflict-free).
    uint32_t* ep32 = reinterpret_cast<uint32_t*>(sgen);
#pragma unroll
    for (int j = 0; j < C::kRows / 8; ++j) {
      const int64_t n = n0 + 8 * j + 2 * t;
      float b[2] = {0.f, 0.f};
#pragma unroll
      for (int e = 0; e < 2; ++e)
        if (p.bias != nullptr && n + e < p.N) b[e] = load_out_type(p.bias, n + e, p.out_fp16);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t lo = wgmma_out_bits(acc[4 * j + 2 * h] * mult + b[0], p.out_fp16);
        const uint32_t hi = wgmma_out_bits(acc[4 * j + 2 * h + 1] * mult + b[1], p.out_fp16);
        ep32[(16 * cw + g + 8 * h) * (C::kEpPitch / 4) + 4 * j + t] = lo | (hi << 16);
      }
    }
  } else {
    stage_out(ep, mult, bias);
  }
  mma_sync();
  wgmma_store_rows<C::kRows, kTok, C::kMmaThreads, C::kEpPitch>(ep, p, n0, m0, 32 * cw + lane);
#else
  __trap();  // SM90 only: the host dispatches this kernel on compute capability 9.0 alone
#endif
}

}  // namespace b12x::gemm::lin
