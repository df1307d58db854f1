// Paged causal GQA attention (FA2 style on mma.sync m16n8k16, runs on SM89, SM90 and SM12x).
//
// One CTA serves one (request, row tile, KV head, KV split). A row tile packs `tile_rows` rows of
// (query token, q head of this KV head's group): packed row p -> token p / group, head
// kvh * group + p % group, so a decode step of a GQA group fills the MMA's 16 rows.
// Warps are arranged WM x WN: WM warps split the packed rows (16 each), WN warps split each KV
// tile along the tokens, each with its own online-softmax state, merged through shared memory at
// the end (the decode shape: WM = 1, WN = 4).
//
// K/V tiles of BN tokens stream through a cp.async ring of kStages stages. Every token row is
// located through the page table on its own (64-bit offsets), so tiles need not align with pages;
// a live tile inside one page (or page-aligned in two) forms one address per page and advances it.
// Rows beyond the split's range are zero-filled (cp.async src-size 0): a masked P (0) times a
// stale V (maybe NaN) would otherwise poison the output.
// FP8 E4M3 KV is staged raw and converted into one bf16 tile per step (exact: every e4m3 value
// is a bf16); k_descale folds into the softmax scale and v_descale into the final normalisation.
//
// Shared-memory tiles of 16-bit values are stored with 16-byte chunks XOR-swizzled by (row & 7),
// so the 8 row addresses of every ldmatrix phase hit 8 different bank groups.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

#include "attention/paged_params.h"
#include "gemm/kernels/mma_sync.cuh"

namespace b12x::attention::detail {

constexpr float kLog2e = 1.4426950408889634f;

// ---------------------------------------------------------------- tile configuration ---------
/// Tile shapes. kKind: 0 = extend (WM warps x 16 rows, all warps share each K/V tile);
/// 1 = decode "wide" (16 rows, 4 warps split a 64-token tile); 2 = decode "deep" (16 rows,
/// 2 warps split a 32-token tile, as many stages as fit 99 KB, at most 4: more bytes in flight
/// per SM for the memory-bound decode); 5 = decode "wide3" (the wide tile with Q's fragments
/// held in registers, so its shared memory goes to a third stage); 8 = decode "hcvt" (4 warps
/// split a 128-token (head dim 128) or 64-token (256) tile; FP8 K and V fragments are read from
/// the raw stage and become fp16 pairs with one hardware cvt.rn.f16x2.e4m3x2 per pair, for FP16
/// MMAs; Q is staged as fp16 scaled per row by a power of two); 13 = decode "hcvt3" (hcvt with 3
/// stages: 102-105 KB, beyond SM12x's 99 KB, so SM90 only; 2 CTAs per SM instead of 3).
/// Session 21 removed the variants that lost (docs/attention.md): 3 "direct", 4 "wdirect", 6
/// "wdirect2" (bf16 MMAs on integer-converted FP8 fragments), 7 / 10 / 12 (extend "wide", "n64",
/// "m64"), 9 "hbits", 11 "hvec", 14 "hcvt2", and wide3 at head dim 256.
template <int kDqk_, int kDv_, int kKind_, bool kFp8_>
struct TileCfg {
  static constexpr int kDqk = kDqk_, kDv = kDv_;
  // kind 16 ("wideh", 16-bit KV): wide with each token group's output dims split over two
  // warps (kDH = 2): both warps of a pair compute the group's S (the same MMAs and softmax) and
  // each keeps and accumulates half of O, so the tile runs twice the warps with half the O
  // registers (more warps per SM at the same shared memory). Kind 15 ("wide3h", the same for
  // wide3) was removed in session 11: 2-8 % slower than wide3 (rounds 37 / 38).
  // kind 18 ("wideh3", SM90 only): wideh with 3 stages (104 KB, 2 CTAs per SM90 SM): two
  // tiles in flight per CTA instead of one.
  static constexpr bool kH3 = kKind_ == 18;
  static constexpr int kDH = (kKind_ == 16 || kH3) ? 2 : 1;
  // kind 28 ("hcvt8", FP8 head dim 256, session 24): hcvt for plans whose packed rows per
  // request fit the MMA's first 8 rows (q_len x group <= 8: one row tile per request, rows 8-15
  // always padding). O's MMAs take rows 0-7 only: their accumulator inputs for rows 8-15 are
  // zero and the outputs dropped, so the 64 O values of rows 8-15 are not live across the loop
  // (the HMMA still writes a 4-register tuple, whose dropped halves then hold temporaries), and
  // the softmax, rescale, warp merge and epilogue handle rows g only. The registers this frees
  // (182 instead of hcvt's 209, sm_90a) hold a second S: odd k-steps accumulate apart from even
  // ones (added after the k loop), so the tile's dependent HMMA chains are 4 of 8 instead of 2
  // of 16 (206 registers: the early instance still fits beside the merge CTA).
  static constexpr bool kHalf = kKind_ == 28;
  static constexpr bool kSChains4 = kHalf;
  static constexpr int kKind = (kKind_ == 16 || kH3) ? 1 : (kHalf ? 8 : kKind_);
  static constexpr bool kFp8 = kFp8_;
  static_assert(kKind_ == 0 || kKind_ == 1 || kKind_ == 2 || kKind_ == 5 || kKind_ == 8 ||
                    kKind_ == 13 || kKind_ == 16 || kKind_ == 18 || kKind_ == 28,
                "tile kinds: 0, 1, 2, 5, 8, 13, 16, 18, 28");
  static constexpr bool kDecode = kKind != 0;
  // hcvt / hcvt3 (kF16Mma): K's B fragments come straight from the raw FP8 rows (no K conversion
  // pass; Q is stored in the matching permuted slot order), and so do V's (4-byte reads of 4
  // dims of one token; output dims permuted within 32-dim groups, undone in the epilogue). The
  // MMAs run on fp16 (P in [0, 1] and power-of-two-scaled Q lose nothing against bf16: fp16 has
  // 3 more mantissa bits), the fragments converted by the hardware e4m3x2 -> f16x2 cvt (sm_89+,
  // one instruction per pair). hcvt3: three stages, over SM12x's 99 KB (SM90: 2 CTAs per SM).
  static constexpr bool kF16Mma = kKind == 8 || kKind == 13;
  static constexpr bool kDirectK = kF16Mma, kDirectV = kF16Mma;
  static_assert(!kF16Mma || (kFp8_ && kDqk_ == kDv_ && (kDqk_ == 128 || kDqk_ == 256)),
                "fp16-MMA decode tiles: FP8 KV, head dim 128 or 256");
  // kind 5: Q is staged in the ring's last stage (free until the first loop iteration issues
  // into it) and read once into registers; the 4 KB of a Q tile then buys a third 32 KB stage.
  static constexpr bool kQInRegs = kKind == 5;
  static_assert(!kQInRegs || (!kFp8_ && kDqk_ <= 128), "wide3: 16-bit KV, head dim <= 128");
  static constexpr bool kBigHead = kDqk > 128 || kDv > 128;
  // Extend: 4 warps; for head dims <= 128 each warp owns two 16-row MMA blocks (32 rows, as
  // FA2), so every K/V fragment read from shared memory feeds two MMAs (32-token tiles keep
  // the two S blocks in registers for head dim 128). Larger dims keep one block per warp
  // (registers) and 64-row tiles (Q tile + ring must fit 99 KB).
  static constexpr int kWM = kDecode ? 1 : 4;
  static constexpr int kMB = (kDecode || kBigHead) ? 1 : 2;
  static constexpr int kBN =
      (kF16Mma && kDqk == 128) ? 128
      : (kKind == 5 || kF16Mma)
          ? 64
          : (kKind >= 2 ? 32 : (kBigHead ? 32 : (kMB == 2 && kDv > 64 ? 32 : 64)));
  static constexpr int kWN = kDecode ? (kBN > 64 ? 4 : kBN / 16) : 1;
  static constexpr int kThreads = kWM * kWN * kDH * 32;
  static constexpr int kBM = 16 * kWM * kMB;
  static constexpr int kKvBytes = kFp8 ? 1 : 2;
  static constexpr int kQBytes = kQInRegs ? 0 : kBM * kDqk * 2;
  static constexpr int kStageBytes = kBN * (kDqk + kDv) * kKvBytes;
  static constexpr int kConvBytes =
      kFp8 ? kBN * ((kDirectK ? 0 : kDqk) + (kDirectV ? 0 : kDv)) * 2 : 0;
  static constexpr int kMergeBytes = kWN > 1 ? kWN*(kBM* kDv * 4 + 2 * kBM * 4) : 0;
  // Each stage also holds its tile's page ids (kBN int32, see the loader).
  static constexpr int kIdStageBytes = kBN * 4;
  // Shared memory per block: SM12x's 99 KB, except hcvt3 (SM90's 227 KB; plans elsewhere fall
  // back to hcvt).
  static constexpr int kSmemLimit = (kKind == 13 || kH3) ? 232448 : 101376;
  static constexpr int kFitStages =
      (kSmemLimit - kQBytes - kConvBytes) / (kStageBytes + kIdStageBytes);
  static constexpr int kMaxStages =
      (kKind == 13 || kH3) ? 3 : (kKind >= 2 ? 4 : (kKind == 0 && kMB == 2 ? 3 : 0));
  static constexpr int kStages = kMaxStages > 0
                                     ? (kFitStages < kMaxStages ? kFitStages : kMaxStages)
                                     : ((kKind == 1 && kFp8) ? 3 : 2);
  static constexpr int kRingBytes = kStages * kStageBytes;
  static constexpr int kIdBytes = kStages * kIdStageBytes;
  static constexpr int kSmemBytes =
      kQBytes + kConvBytes + kIdBytes + (kRingBytes > kMergeBytes ? kRingBytes : kMergeBytes);
  // Decode CTAs are few warps each, so the SM's latency hiding comes from co-resident CTAs:
  // ask ptxas to keep as many resident as shared memory allows on an SM90 (228 KB per SM), at
  // most 4 and no more than a register estimate allows (O accumulators kDv / 2 per lane plus
  // ~96): a register cap only; SM12x fits one or two by shared memory anyway.
  static constexpr int kSmPerSm = 233472;
  static constexpr int kBySmem = kSmPerSm / (kSmemBytes + 1024);
  static constexpr int kByRegs = 65536 / (kThreads * (kDv / kDH / 2 + 96));
  static constexpr int kMinBlocksRaw = kBySmem < kByRegs ? kBySmem : kByRegs;
  static constexpr int kMinBlocks =
      !kDecode ? 1 : (kMinBlocksRaw > 4 ? 4 : (kMinBlocksRaw < 1 ? 1 : kMinBlocksRaw));
  static_assert(kStages >= 2, "paged attention needs at least a double-buffered ring");
  static_assert(kSmemBytes <= kSmemLimit, "paged attention tile exceeds its smem limit");
  static_assert((kBN / kWN) % 16 == 0, "each warp needs whole 16-token MMA K steps");
  static_assert(kWN == 1 || kMB == 1, "the cross-warp merge handles one row block per warp");
  static_assert(kDH == 1 || (kDecode && !kFp8 && kWN > 1 && kDv % (16 * kDH) == 0),
                "split output dims: 16-bit decode tiles");
  static_assert(!kHalf || (kF16Mma && kDqk == 256), "hcvt8: FP8 head dim 256");
};

// ---------------------------------------------------------------- PTX helpers ----------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
/// 4-byte copy (page ids); src-size 0 zero-fills without reading.
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
/// cp.async.wait_group with a CTA-uniform runtime count (0..3; larger counts wait for 3).
__device__ __forceinline__ void cp_async_wait_n(int n) {
  if (n <= 0)
    cp_async_wait<0>();
  else if (n == 1)
    cp_async_wait<1>();
  else if (n == 2)
    cp_async_wait<2>();
  else
    cp_async_wait<3>();
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The m16n8k16 instruction binding is gemm's (mma_sync.cuh); T (bf16 or fp16) picks its
// operand type tag.
template <typename T>
using MmaTag =
    std::conditional_t<std::is_same_v<T, __nv_bfloat16>, gemm::lin::Bf16Tag, gemm::lin::Fp16Tag>;
template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  gemm::lin::mma16816<MmaTag<T>>(d, a, b0, b1);
}

/// fp16 m16n8k16 on rows 0-7 only (hcvt8): A's rows 8-15 (a[1], a[3]) and the
/// accumulator's are zero, d[0], d[1] accumulate, d[2], d[3] are neither read nor written (their
/// outputs are dropped, so they need not stay live across the caller's loop).
__device__ __forceinline__ void mma16816_rows8(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
  asm volatile(
      "{\n .reg .f32 x2, x3;\n"
      " mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,x2,x3}, {%2,%3,%4,%3}, "
      "{%5,%6}, {%0,%1,%7,%7};\n}\n"
      : "+f"(d[0]), "+f"(d[1])
      : "r"(a[0]), "r"(0u), "r"(a[2]), "r"(b0), "r"(b1), "f"(0.f));
}

template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  uint32_t r;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    r = *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    r = *reinterpret_cast<uint32_t*>(&v);
  }
  return r;
}

/// Programmatic dependent launch: wait until the preceding grid in the stream has completed and
/// its writes are visible (a no-op when the grid was launched without the PDL attribute).
__device__ __forceinline__ void wait_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/// Lets the next PDL-launched grid in the stream get scheduled early (it still waits for this
/// grid's completion before reading anything).
__device__ __forceinline__ void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// ---------------------------------------------------------------- timeline probe -----------
/// Probe (B12X_ATTN_STAMPS=1, PagedPlan::stamps): thread 0 of every CTA records %globaltimer
/// (ns, common to all SMs) and clock64 (cycles, per SM) at fixed events into p.stamps, so one
/// call's per-CTA timeline can be read back (bench_attention B12X_ATTN_BENCH_STAMPS). Only the
/// stamp instances (kStamp) contain the stores; the default kernels are unchanged.
/// Main CTA slots (kStampSlots uint64 each): [0, 8) globaltimer of events 0..7, [8, 16) clock64
/// of the same events, [16] meta (smid | n_tiles << 16 | split << 32 | 1 << 63: a live CTA;
/// 2 << 61: it exited before the loop), [17] / [18]: the previous call's merge CTA 0 end / wait
/// release (read after the wait), [19] unused.
/// Events: 0 entry, 1 before griddepcontrol.wait, 2 after it, 3 prologue copies issued,
/// 4 first tile landed, 5 last tile landed, 6 loop done, 7 epilogue stores issued.
/// Merge CTA slots (at p.stamp_merge): [0, 3) globaltimer at entry, after the wait, at the end;
/// [3] meta (smid | 1 << 63).
__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t)::"memory");
  return t;
}
__device__ __forceinline__ uint32_t sm_id() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%smid;\n" : "=r"(r));
  return r;
}
/// This CTA's main-kernel stamp slots (the grid is at most 3-D; 64-bit: rows x heads x splits).
__device__ __forceinline__ unsigned long long* stamp_slots(const PagedParams& p) {
  const uint64_t cta =
      blockIdx.x + uint64_t(gridDim.x) * (blockIdx.y + uint64_t(gridDim.y) * blockIdx.z);
  return p.stamps + cta * kStampSlots;
}
template <bool kOn>
__device__ __forceinline__ void stamp(const PagedParams& p, int ev) {
  if constexpr (kOn) {
    if (threadIdx.x == 0 && p.stamps != nullptr) {
      unsigned long long* s = stamp_slots(p);
      s[ev] = global_ns();
      s[8 + ev] = clock64();
    }
  }
}
template <bool kOn>
__device__ __forceinline__ void stamp_meta(const PagedParams& p, uint64_t meta) {
  if constexpr (kOn) {
    if (threadIdx.x == 0 && p.stamps != nullptr) stamp_slots(p)[16] = meta | sm_id();
  }
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/// Four e4m3 bytes of `w` (byte i = element i) -> bf16x2 pairs (e0, e1) and (e2, e3), exact.
/// Integer ops only: the 7 magnitude bits move under the bf16 exponent field, which makes every
/// e4m3 value (subnormals included, as bf16 subnormals) exactly 2^-120 times its bf16 reading;
/// one bf16x2 multiply by 2^120 restores it. (e4m3 NaN is not preserved: such a cache is invalid.)
__device__ __forceinline__ void e4m3x4_to_bf16x4(uint32_t w, uint32_t& lo, uint32_t& hi) {
  const uint32_t odd = (w & 0x80008000u) | ((w & 0x7F007F00u) >> 4);  // (e1, e3)
  const uint32_t w8 = w << 8;
  const uint32_t even = (w8 & 0x80008000u) | ((w8 & 0x7F007F00u) >> 4);  // (e0, e2)
  uint32_t a = __byte_perm(even, odd, 0x5410);                           // (e0, e1)
  uint32_t b = __byte_perm(even, odd, 0x7632);                           // (e2, e3)
  const uint32_t k2p120 = 0x7B807B80u;                                   // bf16x2 (2^120, 2^120)
  __nv_bfloat162 sa = __hmul2(*reinterpret_cast<__nv_bfloat162*>(&a),
                              *reinterpret_cast<const __nv_bfloat162*>(&k2p120));
  __nv_bfloat162 sb = __hmul2(*reinterpret_cast<__nv_bfloat162*>(&b),
                              *reinterpret_cast<const __nv_bfloat162*>(&k2p120));
  lo = *reinterpret_cast<uint32_t*>(&sa);
  hi = *reinterpret_cast<uint32_t*>(&sb);
}

/// In-row part of swz(): XOR-ing it with (k << 5) selects chunk pair k (chunks 2k, 2k+1) of the
/// same swizzled row; the row part row * row_bytes is added separately (row_bytes need not be a
/// power of two: 384 for head dim 192).
__device__ __forceinline__ uint32_t swz_in_row(int row, int chunk) {
  return static_cast<uint32_t>((chunk ^ (row & 7)) << 4);
}

/// Bytes 1 and 3 of `y` (the low bytes are ignored) -> fp16x2, each the e4m3 value times 2^-8,
/// exactly: sign stays at bit 15, the 7 magnitude bits (exponent 4, mantissa 3) move one bit
/// down under fp16's 5-bit exponent, whose bias is 8 larger (subnormals map to subnormals).
__device__ __forceinline__ uint32_t e4m3_hi_bytes_to_f16x2_scaled(uint32_t y) {
  return (y & 0x80008000u) | ((y & 0x7F007F00u) >> 1);
}

/// Bytes (0, 1) and (2, 3) of `w` -> fp16x2 pairs, exact: the hardware conversion (sm_89+, one
/// F2FP per pair, the high half selected for free). Without it (older targets), the bit trick
/// and one fp16x2 multiply by 2^8.
__device__ __forceinline__ void e4m3x4_to_f16x4_hw(uint32_t w, uint32_t& lo, uint32_t& hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n"
      " cvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
#else
  const uint32_t k2p8 = 0x5C005C00u;  // fp16x2 (256, 256)
  uint32_t a = e4m3_hi_bytes_to_f16x2_scaled(__byte_perm(w, 0, 0x1404));
  uint32_t b = e4m3_hi_bytes_to_f16x2_scaled(__byte_perm(w, 0, 0x3424));
  __half2 sa = __hmul2(*reinterpret_cast<__half2*>(&a), *reinterpret_cast<const __half2*>(&k2p8));
  __half2 sb = __hmul2(*reinterpret_cast<__half2*>(&b), *reinterpret_cast<const __half2*>(&k2p8));
  lo = *reinterpret_cast<uint32_t*>(&sa);
  hi = *reinterpret_cast<uint32_t*>(&sb);
#endif
}

/// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile of `row_bytes` rows.
__device__ __forceinline__ uint32_t swz(int row, int chunk, int row_bytes) {
  return static_cast<uint32_t>(row * row_bytes + ((chunk ^ (row & 7)) << 4));
}

// ---------------------------------------------------------------- schedule -------------------
struct Work {
  int b, tile, q0, qlen, lk;
};

/// n / group for 0 <= n < 2^31 (rows to query tokens) by the bind-time multiply and shift: the
/// compiler's division by a runtime divisor is an I2F / MUFU.RCP / F2I chain of ~20 instructions.
/// Every kernel divides this way (session 9: a runtime choice of both paths had grown the general
/// kernels' prologue by ~390 instructions, extend without prefix 971 -> 1011 us).
__device__ __forceinline__ int div_group(const PagedParams& p, int n) {
  return fast_div_apply(n, p.div_group);
}

/// cache_seqlens[b] clamped into [0, p.max_kv]. check_caps bounds max_kv (W x page_size) by
/// 2^30 and total_q by 2^30, and run_paged clamps window_left to max_kv, so every sum kv_range and
/// the masks form from a clamped length (lk - qlen, qi + off - window_left, n + chunk - 1, ...)
/// stays within int whatever the metadata hold (a negative length reads as 0: no keys).
__device__ __forceinline__ int clamp_len(const PagedParams& p, int lk) {
  return min(max(lk, 0), p.max_kv);
}

/// The query rows [q0, cu1) of a request, cut at total_q, for 0 <= q0 < total_q: 0 when cu1 <= q0
/// (no difference of two arbitrary ints is formed).
__device__ __forceinline__ int clamp_qlen(const PagedParams& p, int q0, int cu1) {
  return max(min(cu1, p.total_q), q0) - q0;
}

/// Row tile `tile` of request b from its metadata (cu_seqlens_q[b], [b + 1], cache_seqlens[b]).
/// Metadata is trusted for values but never for memory safety: rows outside [0, T) and keys
/// past the page table's reach are dropped. Returns false when the tile has no live rows.
__device__ __forceinline__ bool make_work(const PagedParams& p, int b, int tile, int cu0, int cu1,
                                          int lk, Work& w) {
  w.b = b;
  w.tile = tile;
  w.q0 = cu0;
  if (w.q0 < 0 || w.q0 >= p.total_q) return false;
  w.qlen = clamp_qlen(p, w.q0, cu1);
  w.lk = clamp_len(p, lk);
  return w.tile * p.tile_rows < w.qlen * p.group;
}

/// Maps a grid x index to (request, row tile). Returns false when the tile has no live rows.
__device__ __forceinline__ bool find_work(const PagedParams& p, int x, Work& w) {
  int b;
  if (p.tiles_per_req > 0) {
    b = fast_div_apply(x, p.div_tiles_per_req);
    if (b >= p.batch) return false;
    w.tile = x - b * p.tiles_per_req;
  } else {
    if (x >= p.tile_start[p.batch]) return false;
    int lo = 0, hi = p.batch - 1;  // largest b with tile_start[b] <= x
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (p.tile_start[mid] <= x)
        lo = mid;
      else
        hi = mid - 1;
    }
    b = lo;
    // Heaviest (last, most causal keys) tile of each request first: shorter tail.
    w.tile = p.tile_start[b + 1] - 1 - x;
  }
  return make_work(p, b, w.tile, p.cu_q[b], p.cu_q[b + 1], p.seqlens[b], w);
}

/// KV range [lo, hi) a row tile may see (causal, window) and its split into chunks: split s
/// serves [lo + s chunk, lo + (s + 1) chunk), or with p.split_interleave (decode tiles) the KV
/// tiles s, s + ns, s + 2 ns, ... of the range (chunk = the KV tile, stride = ns tiles).
struct KvRange {
  int lo, hi, chunk, ns, stride;
};
__device__ __forceinline__ KvRange kv_range(const PagedParams& p, int tile, int qlen, int lk) {
  const int rows0 = tile * p.tile_rows;
  const int qi_min = div_group(p, rows0);
  const int qi_max = min(qlen - 1, div_group(p, rows0 + p.tile_rows - 1));
  const int off = lk - qlen;
  KvRange r;
  r.hi = max(0, min(lk, qi_max + off + 1));
  r.lo = p.window_left >= 0 ? max(0, qi_min + off - p.window_left) : 0;
  if (r.hi < r.lo) r.hi = r.lo;
  const int n = r.hi - r.lo;
  // Chunks need not align with KV tiles (tokens are located one by one and masked): with
  // p.chunk_round = 0 the split count is exactly what the plan asked for.
  if (p.split_interleave) {
    // at least min_chunk tokens per split, as for contiguous chunks
    const int tiles = (n + p.tile_kv - 1) >> p.tile_kv_shift;  // KV tiles are powers of two
    r.ns = n > 0 ? min(p.num_splits, fast_div_apply(tiles + p.min_tiles - 1, p.div_min_tiles)) : 1;
    r.chunk = p.tile_kv;
    r.stride = r.ns * p.tile_kv;
    return r;
  }
  int chunk = fast_div_apply(n + p.num_splits - 1, p.div_splits);
  // p.chunk_round = KV tile - 1 (B12X_ATTN_ALIGN_CHUNKS): whole KV tiles per split, so a range
  // from a page start keeps every tile page-aligned (page runs) at the cost of fewer live splits.
  chunk = (max(chunk, p.min_chunk) + p.chunk_round) & ~p.chunk_round;
  r.chunk = chunk;
  r.ns = n > 0 ? (n + chunk - 1) / chunk : 1;
  r.stride = 0;
  return r;
}

__device__ __forceinline__ float load_scale(const float* s, int64_t sb, int64_t sh, int b, int h) {
  return s ? s[b * sb + h * sh] : 1.f;
}

// ---------------------------------------------------------------- split merge ----------------
/// The merge weights of splits lane and lane + 32 from their base-2 LSEs l0, l1 (-inf past ns):
/// mm = the largest LSE (or the sink), wsum = the weights' sum over the warp plus the sink's.
__device__ __forceinline__ void weights_of_lses(const PagedParams& p, float l0, float l1, int h,
                                                float& w0, float& w1, float& mm, float& wsum) {
  mm = fmaxf(l0, l1);
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) mm = fmaxf(mm, __shfl_xor_sync(0xffffffffu, mm, d));
  const float sink = p.sinks != nullptr ? p.sinks[h] * kLog2e : -INFINITY;
  mm = fmaxf(mm, sink);
  const float m_use = mm == -INFINITY ? 0.f : mm;
  w0 = exp2f(l0 - m_use);
  w1 = exp2f(l1 - m_use);
  wsum = w0 + w1;
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) wsum += __shfl_xor_sync(0xffffffffu, wsum, d);
  if (p.sinks != nullptr) wsum += exp2f(sink - m_use);
}
/// Merge weights of the `ns` (<= 64) split partials of row `row`: lanes l and l+32 take splits l
/// and l+32, w = 2^(lse - max) with the sink (natural-log units) in the max; mm = that max and
/// wsum = the warp's weight sum plus the sink's, both warp-uniform. kCoherent: L2 loads, for
/// partials written by other CTAs of the same kernel (the fused merge).
template <bool kCoherent>
__device__ __forceinline__ void split_weights(const PagedParams& p, int64_t row, int ns, int h,
                                              int lane, float& w0, float& w1, float& mm,
                                              float& wsum) {
  const int64_t ss = (int64_t)p.total_q * p.num_q_heads;  // split stride (rows)
  auto lse = [&](int s) {
    const float* a = p.part_lse + s * ss + row;
    return kCoherent ? __ldcg(a) : *a;
  };
  const float l0 = lane < ns ? lse(lane) : -INFINITY;
  const float l1 = lane + 32 < ns ? lse(lane + 32) : -INFINITY;
  weights_of_lses(p, l0, l1, h, w0, w1, mm, wsum);
}

/// One warp folds the `ns` (<= 64) normalised partials of row (tok, h) with their base-2 LSEs
/// and the sink, writes the output row and its LSE. Lane = float4 column; eight splits' loads in
/// flight per lane (L2 latency, not bandwidth, bounds a merge).
template <typename T, int kDv>
__device__ __forceinline__ void merge_row_warp(const PagedParams& p, int tok, int h, int ns,
                                               int lane) {
  const int64_t row = (int64_t)tok * p.num_q_heads + h;
  const int64_t ss = (int64_t)p.total_q * p.num_q_heads;  // split stride (rows)
  float w0, w1, mm, wsum;
  split_weights<true>(p, row, ns, h, lane, w0, w1, mm, wsum);
  const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
  T* out = static_cast<T*>(p.out) + (int64_t)tok * p.o_st + (int64_t)h * p.o_sh;
#pragma unroll
  for (int c0 = 0; c0 < kDv / 4; c0 += 32) {
    const int c = c0 + lane;
    const bool ok = c < kDv / 4;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = 0; s0 < ns; s0 += 8) {
      float4 v[8];
      float ws[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int sidx = s0 + j;  // < 64; weights past ns are 0
        ws[j] = __shfl_sync(0xffffffffu, sidx < 32 ? w0 : w1, sidx & 31);
        v[j] = ok && sidx < ns ? __ldcg(reinterpret_cast<const float4*>(
                                     p.part_o + (sidx * ss + row) * kDv + c * 4))
                               : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        acc.x += ws[j] * v[j].x;
        acc.y += ws[j] * v[j].y;
        acc.z += ws[j] * v[j].z;
        acc.w += ws[j] * v[j].w;
      }
    }
    if (ok)
      *reinterpret_cast<uint2*>(out + c * 4) =
          make_uint2(pack2<T>(acc.x * inv, acc.y * inv), pack2<T>(acc.z * inv, acc.w * inv));
  }
  if (p.lse != nullptr && lane == 0)
    p.lse[(int64_t)tok * p.lse_st + (int64_t)h * p.lse_sh] =
        wsum > 0.f ? mm + log2f(wsum) : -INFINITY;
}

/// Decode/verify, before the PDL wait: the K/V rows of the CTA's first p.prefetch tiles (by
/// default those the prologue loads: kStages - 1, or all kStages with the full ring) and their
/// page-table entries are prefetched into L2, so that after the wait the prologue's dependent
/// reads (and with deeper prefetches the loop's first refills) hit L2. The metadata are read
/// through L2 (ld.cg: nothing stale stays in L1 for the loads after the wait) and may be stale
/// (the previous grid may still be writing them): only prefetch addresses depend on them, every
/// index is bounded like the main path's.
template <typename Cfg>
__device__ __forceinline__ void prefetch_first_tiles(const PagedParams& p, int tile_x, int kvh,
                                                     int split) {
  if (p.tiles_per_req <= 0) return;
  const int b = fast_div_apply(tile_x, p.div_tiles_per_req);
  if (b >= p.batch) return;
  const int q0 = __ldcg(p.cu_q + b);
  if (q0 < 0 || q0 >= p.total_q) return;
  const int qlen = clamp_qlen(p, q0, __ldcg(p.cu_q + b + 1));
  const int lk = clamp_len(p, __ldcg(p.seqlens + b));
  const int tile = tile_x - b * p.tiles_per_req;
  if (qlen <= 0 || lk <= 0 || tile * p.tile_rows >= qlen * p.group) return;
  const KvRange r = kv_range(p, tile, qlen, lk);
  if (split >= r.ns) return;
  const int begin = r.lo + split * r.chunk;
  const int step = r.stride > 0 ? r.stride : Cfg::kBN;  // between the split's tiles
  const int last = r.stride > 0 ? r.hi : min(r.hi, begin + r.chunk);
  const int32_t* table = p.page_table + (int64_t)b * p.pt_stride;
  const uint32_t max_page = static_cast<uint32_t>(p.num_pages - 1);
  for (int i = static_cast<int>(threadIdx.x); i < p.prefetch * Cfg::kBN; i += Cfg::kThreads) {
    const int pos = begin + (i / Cfg::kBN) * step + i % Cfg::kBN;
    if (pos >= last) continue;
    const uint32_t page =
        min(static_cast<uint32_t>(__ldcg(table + (pos >> p.page_shift))), max_page);
    const int64_t in_page = pos & ((1 << p.page_shift) - 1);
    const uint8_t* k =
        static_cast<const uint8_t*>(p.k) +
        ((int64_t)page * p.k_sp + in_page * p.k_st + (int64_t)kvh * p.k_sh) * Cfg::kKvBytes;
    const uint8_t* v =
        static_cast<const uint8_t*>(p.v) +
        ((int64_t)page * p.v_sp + in_page * p.v_st + (int64_t)kvh * p.v_sh) * Cfg::kKvBytes;
#pragma unroll
    for (int off = 0; off < Cfg::kDqk * Cfg::kKvBytes; off += 128)
      asm volatile("prefetch.global.L2 [%0];\n" ::"l"(k + off));
#pragma unroll
    for (int off = 0; off < Cfg::kDv * Cfg::kKvBytes; off += 128)
      asm volatile("prefetch.global.L2 [%0];\n" ::"l"(v + off));
  }
}

// ---------------------------------------------------------------- main kernel ----------------
/// kLean (B12X_ATTN_LEAN, decode tiles): the knobs take their defaults at compile time (short
/// ahead, page runs, the shared-copy spread merge; no full ring, no fused
/// merge), so the executed prologue and epilogue are not interleaved with the measurement
/// variants' code (each runs once per warp and is fetched cold: Nsight Compute put most of the
/// BF16 B = 1 epilogue's stall samples on instruction fetch).
/// kStamp (lean decode instances only): the timeline probe's stamps (see kStampSlots).
/// kEarly (lean decode instances only, B12X_ATTN_EARLY_KV): with the speculative prologue, the
/// prologue's tiles whose rows all lie below cache_seqlens - q_len (as read before the wait) are
/// copied before the PDL wait (see the prologue below).
/// kVar (session 25, early-K/V lean instances only): kVarVdEarly loads the V descale before the
/// epilogue's barriers, kVarQPrefetch prefetches the CTA's Q rows into L2 before the PDL wait.
/// hcvt8's early instance runs both (round 94; paged_instances.cuh).
constexpr int kVarVdEarly = 1, kVarQPrefetch = 2;
template <typename T, typename Cfg, bool kLean, bool kStamp, bool kEarly, int kVar = 0>
__device__ __forceinline__ void paged_attention_body(const PagedParams& p) {
  static_assert(!kStamp || (kLean && Cfg::kDecode), "stamps: lean decode instances");
  static_assert(kVar == 0 || kEarly, "kVar: early-K/V lean instances");
  constexpr bool kVdEarly = (kVar & kVarVdEarly) != 0;
  static_assert(!kEarly || (kLean && Cfg::kDecode), "early K/V: lean decode instances");
  stamp<kStamp>(p, 0);
  constexpr int kDqk = Cfg::kDqk, kDv = Cfg::kDv, kBN = Cfg::kBN, kBM = Cfg::kBM;
  constexpr int kWM = Cfg::kWM, kWN = Cfg::kWN, kStages = Cfg::kStages;
  constexpr int kThreads = Cfg::kThreads;
  constexpr bool kFp8 = Cfg::kFp8;
  // hcvt8 (Cfg::kHalf): the lane's rows g only (kR = 1); rows g + 8 are padding in its plans
  constexpr bool kHalf = Cfg::kHalf;
  constexpr int kR = kHalf ? 1 : 2;
  constexpr int kNT = kBN / kWN;                                      // tokens per warp per tile
  constexpr int kDH = Cfg::kDH, kDvW = kDv / kDH;                     // O dims per warp (Cfg::kDH)
  constexpr int kQRow = kDqk * 2, kKRow = kDqk * 2, kVRow = kDv * 2;  // bf16 tile row bytes

  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* sConv = smem + Cfg::kQBytes;  // fp8 only: bf16 K then V tile
  int32_t* sIds = reinterpret_cast<int32_t*>(smem + Cfg::kQBytes + Cfg::kConvBytes);  // id ring
  uint8_t* sRing = smem + Cfg::kQBytes + Cfg::kConvBytes + Cfg::kIdBytes;  // stages, merge area
  static_assert(!Cfg::kQInRegs || kBM * kDqk * 2 <= Cfg::kStageBytes, "Q staging fits a stage");
  uint8_t* sQ = Cfg::kQInRegs ? sRing + (kStages - 1) * Cfg::kStageBytes : smem;
  // The MMA operand type: fp16 for the fp16-MMA FP8 tiles, else the q dtype.
  using TM = std::conditional_t<Cfg::kF16Mma, __half, T>;
  // fp16-MMA tiles: the power-of-two exponent each Q row was scaled by (see the Q staging).
  __shared__ int s_qexp[Cfg::kF16Mma ? kBM : 1];

  int tile_x = blockIdx.x, kvh = blockIdx.y;
  if (p.heads_inner) {
    tile_x = fast_div_apply(blockIdx.x, p.div_kv_heads);
    kvh = blockIdx.x - tile_x * p.num_kv_heads;
  }
  if (p.prefetch) prefetch_first_tiles<Cfg>(p, tile_x, kvh, blockIdx.z);
  constexpr int kIdRegs = kBN / 32;
  int pg0[kStages][kIdRegs];
  const int split = blockIdx.z;
  const bool full_ring = Cfg::kDecode && !kLean && p.full_ring != 0;
  Work w{};
  KvRange range{};
  // Tile it of this split covers [kv_begin + it * kv_step, + kBN) within [.., kv_end); the
  // prologue issues `pro` tiles and the loop keeps `ahead` in flight (see below).
  int kv_begin = 0, kv_end = 0, kv_step = kBN, n_tiles = 0, ahead = 1, pro = 1;
  auto derive = [&]() {
    kv_begin = range.lo + split * range.chunk;
    kv_end = range.stride > 0 ? range.hi : min(range.hi, kv_begin + range.chunk);
    kv_step = range.stride > 0 ? range.stride : kBN;
    // may be 0 (empty range); interleaved: ceil(len / (ns kBN)) = ceil(ceil(len / kBN) / ns)
    n_tiles = range.stride > 0 && range.ns == p.num_splits && kv_end > kv_begin
                  ? fast_div_apply((kv_end - kv_begin + kBN - 1) / kBN + range.ns - 1, p.div_splits)
                  : (kv_end - kv_begin + kv_step - 1) / kv_step;
    // The loop keeps `ahead` tiles in flight beyond the one it computes: iteration it issues
    // tile it + ahead into stage (it + ahead) % kStages, the stage of tile it + ahead - kStages,
    // which was computed before this iteration's barrier. ahead = kStages - 1, except that with
    // p.short_ahead (B12X_ATTN_SHORT_AHEAD, on by default; =0 disables) a decode split of
    // n <= kStages - 1 tiles keeps n - 1 (at least 1) ahead, since with all its tiles requested
    // at once the first lands later and the compute of every tile follows the last byte (FP8
    // B = 1 x 8k: a split's 2 tiles on the 3-stage hcvt3 ring, 14.8 vs 14.1 us on 2-stage hcvt in
    // round 17; the full ring's 14.5 vs 13.1 in round 16).
    ahead = Cfg::kDecode && !full_ring && (kLean || p.short_ahead)
                ? max(1, min(kStages - 1, n_tiles - 1))
                : kStages - 1;
    // Tiles issued by the prologue: ahead, or with the full ring all kStages (iteration 0 then
    // issues nothing). Tile t rides in cp.async group t either way, with the ids of tile
    // t + ahead (the tile issued together with tile t's wait; unused for the full ring's group
    // 0).
    pro = full_ring ? kStages : ahead;
  };
  // Speculative prologue (lean decode kernels, p.spec, B12X_ATTN_SPEC): before the PDL wait
  // the CTA reads its metadata and the page ids of its prologue's tiles through L2 (ld.cg: no
  // stale line stays in L1 for the loads after the wait; the previous grid may still be
  // writing them), so after the wait it issues Q's and those tiles' copies at once instead of
  // after two dependent round trips (metadata, then page ids). The copies read K/V after the
  // wait, so they are right whenever the ids are: the metadata and ids are loaded again after
  // the wait and compared; on any difference the CTA drains the copies and redoes its
  // prologue from the fresh values.
  bool spec = false;
  int spec_cu0 = 0, spec_cu1 = 0, spec_lk = 0;
  if constexpr (kLean && Cfg::kDecode) {
    if (p.spec && p.tiles_per_req > 0) {
      const int b = fast_div_apply(tile_x, p.div_tiles_per_req);
      if (b < p.batch) {
        spec_cu0 = __ldcg(p.cu_q + b);
        spec_cu1 = __ldcg(p.cu_q + b + 1);
        spec_lk = __ldcg(p.seqlens + b);
        spec = make_work(p, b, tile_x - b * p.tiles_per_req, spec_cu0, spec_cu1, spec_lk, w);
      }
      if (spec) {
        range = kv_range(p, w.tile, w.qlen, w.lk);
        spec = split < range.ns;
      }
      // CTA-uniform: threads may have read the metadata before and after a concurrent write.
      spec = __syncthreads_and(spec);
      if (spec) {
        derive();
        if constexpr ((kVar & kVarQPrefetch) != 0) {
          // kVarQPrefetch: the tile's Q rows into L2 before the wait, so that Q's loads after it
          // hit L2 (a row the preceding kernel writes later is updated in L2, the point of
          // coherence: the loads after the wait still see it; L1 holds no Q line yet). Round 94
          // (FP8 16/2/256): the bench's Q, last written many calls ago, came from DRAM after the
          // wait (release -> first tile 2.05 us at B = 8).
          constexpr int kLines = kDqk * int(sizeof(T)) / 128;  // 128-byte lines per Q row
          static_assert(kLines >= 1 && kBM * kLines <= kThreads, "one prefetch per thread");
          const int r = static_cast<int>(threadIdx.x) / kLines;
          const int pr = w.tile * kBM + r;
          const int qi = div_group(p, pr);
          if (r < kBM && qi < w.qlen) {
            const int h = kvh * p.group + (pr - qi * p.group);
            const T* q = static_cast<const T*>(p.q) + (int64_t)(w.q0 + qi) * p.q_st +
                         (int64_t)h * p.q_sh + (threadIdx.x % kLines) * (128 / sizeof(T));
            asm volatile("prefetch.global.L2 [%0];\n" ::"l"(q));
          }
        }
        const int32_t* tab = p.page_table + (int64_t)w.b * p.pt_stride;
        const uint32_t top = static_cast<uint32_t>(p.num_pages - 1);
#pragma unroll
        for (int st = 0; st < kStages; ++st)
#pragma unroll
          for (int r = 0; r < kIdRegs; ++r) {
            const int pos = kv_begin + st * kv_step + static_cast<int>(threadIdx.x & 31) + 32 * r;
            pg0[st][r] = st < pro && pos < kv_end
                             ? static_cast<int>(min(
                                   static_cast<uint32_t>(__ldcg(tab + (pos >> p.page_shift))), top))
                             : 0;
          }
      }
    }
  }
  auto wait_now = [&]() {
    stamp<kStamp>(p, 1);
    wait_prior_grid();
    stamp<kStamp>(p, 2);
    if constexpr (kStamp) {
      // the previous call's merge (CTA 0): end and wait release, final after the wait
      if (threadIdx.x == 0 && p.stamps != nullptr) {
        unsigned long long* s = stamp_slots(p);
        s[17] = __ldcg(p.stamps + p.stamp_merge + 2);
        s[18] = __ldcg(p.stamps + p.stamp_merge + 1);
      }
    }
    allow_next_grid();
  };
  // kEarly with the speculative prologue: the wait is deferred until the early tiles' copies are
  // issued (the prologue below).
  const bool early = kEarly && spec;  // CTA-uniform
  if (!early) wait_now();
  // Metadata for the speculative prologue's check, loaded first (a warp's loads return in
  // order, so these arrive before the prologue's copies).
  int real_cu0 = 0, real_cu1 = 0, real_lk = 0;
  auto load_real = [&]() {
    real_cu0 = p.cu_q[w.b];
    real_cu1 = p.cu_q[w.b + 1];
    real_lk = p.seqlens[w.b];
  };
  if constexpr (kLean && Cfg::kDecode) {
    if (spec && !early) load_real();
  }
  // Interleaved splits (p.split_interleave) of a range that starts at 0 with every split live
  // (a long context) know their first tiles before the metadata arrive: tile it of split s
  // starts at (s + it * num_splits) * kBN. The page ids of the prologue's tiles are then loaded
  // together with the metadata (one round trip instead of two). Entries past the live length
  // but within the table's width may be read then; ids are clamped into the cache and the
  // copies of masked rows read nothing.
  bool ids_early = spec;
  if (!spec && Cfg::kDecode && p.split_interleave && p.tiles_per_req > 0) {
    const int b = fast_div_apply(tile_x, p.div_tiles_per_req);
    if (b < p.batch) {
      ids_early = true;
      const int32_t* tab = p.page_table + (int64_t)b * p.pt_stride;
      const uint32_t top = static_cast<uint32_t>(p.num_pages - 1);
#pragma unroll
      for (int s = 0; s < kStages; ++s)
#pragma unroll
        for (int r = 0; r < kIdRegs; ++r) {
          const int pos = (static_cast<int>(blockIdx.z) + s * p.num_splits) * kBN +
                          static_cast<int>(threadIdx.x & 31) + 32 * r;
          pg0[s][r] = pos < p.max_kv
                          ? static_cast<int>(
                                min(static_cast<uint32_t>(__ldg(tab + (pos >> p.page_shift))), top))
                          : 0;
        }
    }
  }
  if (!spec) {
    if (!find_work(p, tile_x, w)) {
      stamp_meta<kStamp>(p, uint64_t(2) << 61);
      return;
    }
    range = kv_range(p, w.tile, w.qlen, w.lk);
    if (split >= range.ns) {
      stamp_meta<kStamp>(p, uint64_t(2) << 61);
      return;
    }
    ids_early = ids_early && range.stride > 0 && range.lo == 0 && range.ns == p.num_splits;
    derive();
  }

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Full ring (decode tiles, p.full_ring): the prologue fills every stage, not kStages - 1, and
  // iteration 0 issues nothing; from iteration 1 on both rings refill the stage consumed one
  // iteration earlier. A CTA of a short split (B = 1 x 8k: 4 wide3 tiles, 2 hcvt tiles) then
  // has 3 (2) instead of 2 (1) tiles in flight behind its first round trip. Off by default:
  // BF16 B = 1 x 8k gained nothing (15.6 vs 15.6-15.8 us) and FP8 lost (14.5 vs 13.1 us: with
  // every tile requested at once the first tile lands later, and the compute of both tiles
  // follows the last byte instead of overlapping it; round 16).
  // warp = (dh, wn, wm): dh picks the half of O's dims a warp keeps (kDH = 2)
  const int wm = warp % kWM, wn = kDH > 1 ? (warp / kWM) % kWN : warp / kWM;
  const int dh = kDH > 1 ? warp / (kWM * kWN) : 0;
  const int g = lane >> 2, t4 = lane & 3;
  int off_diag = w.lk - w.qlen;
  const int rows0 = w.tile * kBM;

  // ---- Q tile (rows beyond the request or group are zero) -> swizzled smem ----
  // The 16 dims of block kb of tile row r (query token x head of this KV head's group) as 8
  // words, zero past the request (the fp16-MMA and direct-K tiles rearrange them per block).
  auto load_q_block = [&](int r, int kb, uint32_t(&wv)[8]) {
    const T* q = static_cast<const T*>(p.q);
    const int pr = rows0 + r;
    const int qi = div_group(p, pr);
    uint4 lo = make_uint4(0, 0, 0, 0), hi = make_uint4(0, 0, 0, 0);
    if (qi < w.qlen) {
      const int h = kvh * p.group + (pr - qi * p.group);
      const uint4* src = reinterpret_cast<const uint4*>(q + (int64_t)(w.q0 + qi) * p.q_st +
                                                        (int64_t)h * p.q_sh + kb * 16);
      lo = src[0];
      hi = src[1];
    }
    wv[0] = lo.x, wv[1] = lo.y, wv[2] = lo.z, wv[3] = lo.w;
    wv[4] = hi.x, wv[5] = hi.y, wv[6] = hi.z, wv[7] = hi.w;
  };
  // Q staging of the fp16-MMA tiles: plain loads (each row's maximum sets its scale). The lean
  // kernels run it after the prologue's K/V copies are issued, so the copies do not wait for
  // the Q loads' round trip.
  auto stage_q_f16 = [&]() {
    if constexpr (Cfg::kF16Mma) {
      // fp16 MMAs: each Q row is scaled by 2^e (e from its largest |q|, so the row's maximum lands
      // in [2^14, 2^15)) and converted to fp16, exactly for every element within 2^-28 of the
      // row's maximum (bf16 has 8 significant bits, fp16 11); any finite bf16 row fits, and the
      // softmax scale takes the 2^-e back per row. Slot order per 16-dim block matches the K
      // fragments' conversion, which pairs dims (4t, 4t+1), (4t+2, 4t+3) (even words then odd).
      static_assert(std::is_same_v<T, __nv_bfloat16>, "FP8 KV takes bf16 q");
      constexpr int kBlocks = kDqk / 16;
      static_assert((kBM * kBlocks) % kThreads == 0 && 32 % kBlocks == 0,
                    "a row's blocks are adjacent lanes of one warp (max by shuffle)");
      for (int i = tid; i < kBM * kBlocks; i += kThreads) {
        const int r = i / kBlocks, kb = i % kBlocks;
        uint32_t wv[8];
        load_q_block(r, kb, wv);
        float f[16];
        float mx = 0.f;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          f[2 * k] = __uint_as_float(wv[k] << 16);
          f[2 * k + 1] = __uint_as_float(wv[k] & 0xFFFF0000u);
          mx = fmaxf(mx, fmaxf(fabsf(f[2 * k]), fabsf(f[2 * k + 1])));
        }
#pragma unroll
        for (int d = 1; d < kBlocks; d <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, d));
        int ex = 0;
        if (mx > 0.f) {
          int x;
          frexpf(mx, &x);        // mx = m * 2^x, m in [0.5, 1)
          ex = min(15 - x, 64);  // x >= -133 for bf16; 64 bounds the score scale's 2^-e
        }
        const float sc = __int_as_float((127 + ex) << 23);  // ex in [-113, 64]
        uint32_t hv[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          __half2 h2 = __floats2half2_rn(f[2 * k] * sc, f[2 * k + 1] * sc);
          hv[k] = *reinterpret_cast<uint32_t*>(&h2);
        }
        *reinterpret_cast<uint4*>(sQ + swz(r, 2 * kb, kQRow)) =
            make_uint4(hv[0], hv[2], hv[4], hv[6]);
        *reinterpret_cast<uint4*>(sQ + swz(r, 2 * kb + 1, kQRow)) =
            make_uint4(hv[1], hv[3], hv[5], hv[7]);
        if (kb == 0) s_qexp[r] = ex;
      }
    }
  };
  constexpr bool kLateQ = kLean && Cfg::kF16Mma;
  // Q staging issued before the prologue's K/V copies: every kind but the lean fp16-MMA tiles
  // (kLateQ: after the copies) and wide3 with the full ring (Q's fragments from global memory,
  // below). The speculative prologue's redo runs the same staging again.
  auto stage_q_early = [&]() {
    if constexpr (Cfg::kF16Mma) {
      if constexpr (!kLateQ) stage_q_f16();
    } else if (!(Cfg::kQInRegs && full_ring)) {
      // Q of the 16-bit tiles by cp.async (with tile 0's group).
      const T* q = static_cast<const T*>(p.q);
      constexpr int kCpr = kDqk / 8;
      for (int i = tid; i < kBM * kCpr; i += kThreads) {
        const int r = i / kCpr, c = i % kCpr;
        const int pr = rows0 + r;
        const int qi = div_group(p, pr);
        const bool valid = qi < w.qlen;
        const int h = kvh * p.group + (pr - qi * p.group);
        const T* src = valid ? q + (int64_t)(w.q0 + qi) * p.q_st + (int64_t)h * p.q_sh + c * 8 : q;
        cp_async16(smem_u32(sQ + swz(r, c, kQRow)), src, valid);
      }
    }
  };
  if (!early) stage_q_early();
  // wide3 with the full ring: every stage takes K/V, so Q's MMA A fragments come straight from
  // global memory (lane (g, t): rows g and g + 8, dims 16 kb + 2t, +1 and +8, +9), issued
  // before the page-id loads and copies (a load behind the copies would return after them).
  uint32_t qa[Cfg::kQInRegs ? kDqk / 16 : 1][4];
  if constexpr (Cfg::kQInRegs && Cfg::kDecode) {
    if (full_ring) {
      const uint32_t* src[2];
      bool ok[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int pr = rows0 + (lane >> 2) + 8 * r;
        const int qi = div_group(p, pr);
        ok[r] = qi < w.qlen;
        const int h = kvh * p.group + (pr - qi * p.group);
        src[r] = reinterpret_cast<const uint32_t*>(
            static_cast<const T*>(p.q) +
            (ok[r] ? (int64_t)(w.q0 + qi) * p.q_st + (int64_t)h * p.q_sh : 0));
      }
#pragma unroll
      for (int kb = 0; kb < kDqk / 16; ++kb)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          qa[kb][e] = ok[e & 1] ? src[e & 1][kb * 8 + (lane & 3) + 4 * (e >> 1)] : 0u;
    }
  }

  // ---- K/V tile loader ----
  // Page ids never come from a global load in the steady state. A load issued after the ring's
  // cp.async copies returns only after them (L1TEX serves a warp's requests in order), so a copy
  // that needs a page id loaded in the loop waits for the previous tiles' data: the ring
  // collapses to one tile in flight. Round 4 (ids loaded by each copy) and round 5 (ids loaded
  // one tile ahead into registers) both measured ~1.8 us per decode tile whatever its bytes (8
  // KB FP8 or 16 KB BF16) and whatever the load on the GPU. Instead the ids of tile t travel by
  // cp.async in the group of tile t - ahead (kStages - 1 tiles in flight, see the prologue)
  // into an id ring in shared memory (slot t % kStages), so they have landed when tile t's
  // copies are issued. The prologue's tiles
  // take their ids from direct loads (one round trip, once): lane l of every warp loads the id
  // of token l + 32 r and each copy takes its token's id with a shuffle.
  constexpr int kKvB = Cfg::kKvBytes;
  constexpr int kKc = kDqk * kKvB / 16, kVc = kDv * kKvB / 16;  // 16-byte chunks per row
  static_assert(kBN % 32 == 0, "page ids are fetched 32 tokens per warp register");
  static_assert((kBN & (kBN - 1)) == 0, "p.tile_kv_shift: KV tiles are powers of two");
  static_assert((kBN * kKc) % kThreads == 0 && (kBN * kVc) % kThreads == 0,
                "copy loops must be warp-uniform (page ids travel by shuffle)");
  const int32_t* table = p.page_table + (int64_t)w.b * p.pt_stride;
  const int page_mask = (1 << p.page_shift) - 1;
  const uint32_t max_page = static_cast<uint32_t>(p.num_pages - 1);
  auto load_ids = [&](int it, int(&pg)[kIdRegs]) {
    const int kv0 = kv_begin + it * kv_step;
#pragma unroll
    for (int r = 0; r < kIdRegs; ++r) {
      const int pos = kv0 + lane + 32 * r;
      // Entries past the range are never read (the table may end there); ids are clamped into
      // the cache so bad metadata cannot fault.
      pg[r] = pos < kv_end
                  ? static_cast<int>(
                        min(static_cast<uint32_t>(__ldg(table + (pos >> p.page_shift))), max_page))
                  : 0;
    }
  };
  // The id of tile token j (all lanes call this together).
  auto page_of = [&](const int(&pg)[kIdRegs], int j) {
    int v = 0;
#pragma unroll
    for (int r = 0; r < kIdRegs; ++r) {
      const int x = __shfl_sync(0xffffffffu, pg[r], j & 31);
      if ((j >> 5) == r) v = x;
    }
    return v;
  };
  // The head's base pointers are made opaque to the compiler: otherwise it re-associates
  // kvh x head stride (a 64-bit product) into every row address of the loader.
  auto opaque = [](const void* ptr) {
    uint64_t v = reinterpret_cast<uint64_t>(ptr);
    asm("" : "+l"(v));
    return reinterpret_cast<const uint8_t*>(v);
  };
  const uint8_t* kbase = opaque(static_cast<const uint8_t*>(p.k) + (int64_t)kvh * p.k_sh * kKvB);
  const uint8_t* vbase = opaque(static_cast<const uint8_t*>(p.v) + (int64_t)kvh * p.v_sh * kKvB);
  // Byte strides in 32 bits (bind checks: page strides < 4 GiB, a page's token rows < 2 GiB):
  // a row's address is base + page * sp (one 32x32 -> 64-bit multiply-add) + a 32-bit in-page
  // offset. With 64-bit products the loader cost ~50 instructions per K/V token pair, a third of
  // the extend tile's instructions (sm_90a SASS).
  const uint32_t k_sp = static_cast<uint32_t>(p.k_sp * kKvB),
                 k_st = static_cast<uint32_t>(p.k_st * kKvB);
  const uint32_t v_sp = static_cast<uint32_t>(p.v_sp * kKvB),
                 v_st = static_cast<uint32_t>(p.v_st * kKvB);
  // Chunk c of token pos's row: a masked position (past the range: page id 0, since the id
  // loads and copies zero-fill there) still addresses a row of page 0, which the copy never reads
  // (src-size 0), so no select is needed.
  auto row_src = [&](const uint8_t* base, uint32_t sp, uint32_t st, int page, int pos, int c) {
    const uint32_t in_page =
        static_cast<uint32_t>(pos & page_mask) * st + static_cast<uint32_t>(c) * 16u;
    return base + (static_cast<uint64_t>(static_cast<uint32_t>(page)) * sp + in_page);
  };
  // Chunk c of token j lands in a swizzled (bf16) or row-major (raw fp8) stage row.
  auto stage_dst = [&](uint8_t* tile, int j, int c, int cpr, bool is_k) {
    if constexpr (Cfg::kDirectK) {
      // raw FP8 K and V rows read as 4-byte fragments (8 or 4 rows at once) are swizzled too
      return smem_u32(tile) + static_cast<uint32_t>(j * (cpr * 16) + ((c ^ (j & 7)) << 4));
    } else if constexpr (kFp8) {
      return smem_u32(tile + j * (cpr * 16) + c * 16);
    } else {
      return smem_u32(tile + swz(j, c, cpr * 16));
    }
  };
  // Ids of tile t's tokens -> id-ring slot t % kStages (zero past the range, nothing read).
  static_assert(kBN <= kThreads, "one thread per tile token copies the page ids");
  auto issue_ids = [&](int t) {
    if (tid < kBN) {
      const int pos = kv_begin + t * kv_step + tid;
      const bool valid = pos < kv_end;
      cp_async4(smem_u32(sIds + (t % kStages) * kBN + tid),
                valid ? table + (pos >> p.page_shift) : table, valid);
    }
  };
  // One tile's copies; rows past the range are zero-filled (src-size 0). page_at(j): the
  // (clamped) page id of tile token j, called by all lanes together.
  auto load_tile = [&](int it, int stage, auto&& page_at) {
    uint8_t* sk = sRing + stage * Cfg::kStageBytes;
    uint8_t* sv = sk + kBN * kDqk * kKvB;
    const int kv0 = kv_begin + it * kv_step;
    // Chunk c of token j's K (is_k) or V row.
    auto copy = [&](bool is_k, int j, int c, int page) {
      const int pos = kv0 + j;
      cp_async16(
          stage_dst(is_k ? sk : sv, j, c, is_k ? kKc : kVc, is_k),
          row_src(is_k ? kbase : vbase, is_k ? k_sp : v_sp, is_k ? k_st : v_st, page, pos, c),
          pos < kv_end);
    };
    if constexpr (kKc == kVc && kThreads % kKc == 0) {
      // A thread copies chunk c of token rows j0, j0 + kRows, ...: the chunk's column offset
      // and the row swizzle (kRows % 8 == 0: j & 7 == j0 & 7) are loop-invariant, so only the
      // page id and the in-page row change per copy.
      constexpr int kRows = kThreads / kKc;
      const int c = static_cast<int>(static_cast<unsigned>(tid) % kKc);
      const int j0 = static_cast<int>(static_cast<unsigned>(tid) / kKc);
      // Page runs (p.page_runs, CTA-uniform): when every row of the tile is live and the tile
      // lies inside one page, or is page-aligned over exactly two pages, a thread's rows
      // j0 + k kRows of one page form their source address once (page id, 32x32 -> 64-bit
      // multiply-add) and advance it by kRows token strides: no per-row id load, clamp,
      // multiply or zero-fill predicate (~20 SASS instructions per K/V row pair otherwise,
      // ~6 here).
      constexpr int kPasses = kBN / kRows;
      const int in_page0 = kv0 & page_mask;
      const bool live = (kLean || p.page_runs != 0) && kv0 + kBN <= kv_end;
      const bool one_page = live && in_page0 + kBN <= page_mask + 1;
      const bool two_pages = live && kPasses % 2 == 0 && in_page0 == 0 && page_mask + 1 == kBN / 2;
      // Passes [K0, K0 + KN) of the rows of page `page` (tile token k0 * kRows starts them).
      auto copy_run = [&]<int K0, int KN>(int page) {
        const uint32_t k_run = kRows * k_st, v_run = kRows * v_st;
        const uint8_t* ksrc = row_src(kbase, k_sp, k_st, page, kv0 + j0 + K0 * kRows, c);
        const uint8_t* vsrc = row_src(vbase, v_sp, v_st, page, kv0 + j0 + K0 * kRows, c);
#pragma unroll
        for (int k = K0; k < K0 + KN; ++k) {
          const int j = j0 + k * kRows;
          cp_async16(stage_dst(sk, j, c, kKc, true), ksrc, true);
          cp_async16(stage_dst(sv, j, c, kVc, false), vsrc, true);
          ksrc += k_run;
          vsrc += v_run;
        }
      };
      if (one_page) {
        copy_run.template operator()<0, kPasses>(page_at(0));
      } else if (two_pages) {
        const int page_a = page_at(0), page_b = page_at(kBN / 2);
        copy_run.template operator()<0, kPasses / 2>(page_a);
        copy_run.template operator()<kPasses / 2, kPasses / 2>(page_b);
      } else {
#pragma unroll
        for (int k = 0; k < kBN / kRows; ++k) {
          const int j = j0 + k * kRows;
          const int page = page_at(j);
          copy(true, j, c, page);
          copy(false, j, c, page);
        }
      }
    } else if constexpr (kKc == kVc) {
#pragma unroll 2
      for (int k = 0; k < kBN * kKc / kThreads; ++k) {
        const int i = tid + k * kThreads;
        const int page = page_at(i / kKc);
        copy(true, i / kKc, i % kKc, page);
        copy(false, i / kKc, i % kKc, page);
      }
    } else {
#pragma unroll 2
      for (int k = 0; k < kBN * kKc / kThreads; ++k) {
        const int i = tid + k * kThreads;
        copy(true, i / kKc, i % kKc, page_at(i / kKc));
      }
#pragma unroll 2
      for (int k = 0; k < kBN * kVc / kThreads; ++k) {
        const int i = tid + k * kThreads;
        copy(false, i / kVc, i % kVc, page_at(i / kVc));
      }
    }
  };

  auto issue_prologue = [&]() {
#pragma unroll
    for (int s = 0; s < kStages; ++s)
      if (!ids_early && s < pro) load_ids(s, pg0[s]);
    // tile 0 always issued (zero-filled when the range is empty)
    load_tile(0, 0, [&](int j) { return page_of(pg0[0], j); });
    issue_ids(ahead);
    cp_async_commit();
#pragma unroll
    for (int s = 1; s < kStages; ++s) {
      if (s >= pro) break;
      if (s < n_tiles) load_tile(s, s, [&](int j) { return page_of(pg0[s], j); });
      issue_ids(s + ahead);
      cp_async_commit();
    }
  };
  if constexpr (kLean && Cfg::kDecode) {
    if (spec) {
      if (early) {
        // Early K/V (kEarly, B12X_ATTN_EARLY_KV): the prologue's tiles whose rows all lie below
        // cache_seqlens - q_len (the speculative values) are copied before the PDL wait, in tile
        // order (tile s in cp.async group s), from the speculative page ids; the preceding
        // kernels may still be running. Valid when they do not write those K/V rows (vLLM: the
        // cache append writes the new tokens' rows only); stale metadata or ids are caught by the
        // check below, which drains and redoes the prologue. After the wait: the remaining
        // prologue tiles (in order), then one group with Q (16-bit tiles) and the page ids of
        // tiles ahead .. ahead + pro - 1 (which the plain prologue sends with tiles 0 .. pro - 1:
        // the table is read only after the wait), all waited for before the loop.
        int n_early = 0;
#pragma unroll
        for (int s = 0; s < kStages; ++s) {
          if (s >= pro || s != n_early || s >= n_tiles) break;
          if (kv_begin + s * kv_step + kBN > w.lk - w.qlen) break;
          load_tile(s, s, [&](int j) { return page_of(pg0[s], j); });
          cp_async_commit();
          ++n_early;
        }
        wait_now();
        load_real();
      }
      // The check's page ids (the same entries, after the wait), issued before the copies.
      int chk[kStages][kIdRegs];
#pragma unroll
      for (int s = 0; s < kStages; ++s) {
        if (s < pro) {
          load_ids(s, chk[s]);
        } else {
#pragma unroll
          for (int r = 0; r < kIdRegs; ++r) chk[s][r] = 0;
        }
      }
      if (early) {
        int n_early = 0;  // recount (CTA-uniform, the same test as above)
#pragma unroll
        for (int s = 0; s < kStages; ++s)
          if (s < pro && s == n_early && s < n_tiles &&
              kv_begin + s * kv_step + kBN <= w.lk - w.qlen)
            ++n_early;
#pragma unroll
        for (int s = 0; s < kStages; ++s) {
          if (s >= pro) break;
          if (s < n_early) continue;
          if (s == 0 || s < n_tiles) load_tile(s, s, [&](int j) { return page_of(pg0[s], j); });
          cp_async_commit();
        }
        stage_q_early();
#pragma unroll
        for (int s = 0; s < kStages; ++s)
          if (s < pro) issue_ids(s + ahead);
        cp_async_commit();
      } else {
        issue_prologue();
      }
      if constexpr (kLateQ) stage_q_f16();
      bool ok = real_cu0 == spec_cu0 && real_cu1 == spec_cu1 && real_lk == spec_lk;
#pragma unroll
      for (int s = 0; s < kStages; ++s)
#pragma unroll
        for (int r = 0; r < kIdRegs; ++r) ok = ok && chk[s][r] == pg0[s][r];
      if (!__syncthreads_and(ok)) {
        // Stale metadata or ids: let the speculative copies land, then redo the prologue.
        cp_async_wait<0>();
        __syncthreads();
        if (!make_work(p, w.b, w.tile, real_cu0, real_cu1, real_lk, w)) return;
        range = kv_range(p, w.tile, w.qlen, w.lk);
        if (split >= range.ns) return;
        derive();
        off_diag = w.lk - w.qlen;
        ids_early = false;
        stage_q_early();  // the direct-K tiles' plain stores too: the copies above have landed
        issue_prologue();
        if constexpr (kLateQ) stage_q_f16();
      }
    } else {
      issue_prologue();
      if constexpr (kLateQ) stage_q_f16();
    }
  } else {
    issue_prologue();
    if constexpr (kLateQ) stage_q_f16();
  }
  // Early K/V: Q and the ring's first ids ride in the group after the prologue's tiles; the
  // loop's waits count only the groups it commits, so wait for all of them here.
  if (early) {
    cp_async_wait<0>();
    __syncthreads();
  }
  stamp<kStamp>(p, 3);
  auto ring_page = [&](const int32_t* ids, int j) {
    return static_cast<int>(min(static_cast<uint32_t>(ids[j]), max_page));
  };

  constexpr int kMB = Cfg::kMB;     // 16-row MMA blocks per warp
  const int wrow0 = wm * 16 * kMB;  // this warp's first row in the CTA tile
  float o[kMB][kDvW / 8][4];
#pragma unroll
  for (int mb = 0; mb < kMB; ++mb)
#pragma unroll
    for (int i = 0; i < kDvW / 8; ++i) o[mb][i][0] = o[mb][i][1] = o[mb][i][2] = o[mb][i][3] = 0.f;
  float m_run[kMB][2], l_run[kMB][2];
#pragma unroll
  for (int mb = 0; mb < kMB; ++mb) {
    m_run[mb][0] = m_run[mb][1] = -INFINITY;
    l_run[mb][0] = l_run[mb][1] = 0.f;
  }

  const float kdesc = load_scale(p.k_descale, p.kd_sb, p.kd_sh, w.b, kvh);
  const float scale = p.scale_log2 * kdesc;
  // Per-row score scale: fp16-MMA tiles undo each Q row's 2^e.
  float row_scale[Cfg::kMB][2];
#pragma unroll
  for (int mb = 0; mb < Cfg::kMB; ++mb) row_scale[mb][0] = row_scale[mb][1] = scale;
  if constexpr (Cfg::kF16Mma) {
    __syncthreads();  // s_qexp
#pragma unroll
    for (int r = 0; r < 2; ++r)
      row_scale[0][r] = scale * __int_as_float((127 - s_qexp[g + 8 * r]) << 23);
  }

  // Query positions of this lane's rows (for the causal / window mask).
  int row_qi[kMB][2];
#pragma unroll
  for (int mb = 0; mb < kMB; ++mb)
#pragma unroll
    for (int r = 0; r < 2; ++r) row_qi[mb][r] = div_group(p, rows0 + wrow0 + mb * 16 + g + 8 * r);
  const int tile_qi_min = div_group(p, rows0);
  const int tile_qi_max = min(w.qlen - 1, div_group(p, rows0 + kBM - 1));
  const uint32_t q_base = smem_u32(sQ) + (wrow0 + (lane & 15)) * kQRow;
  const uint32_t q_lane = swz_in_row(wrow0 + (lane & 15), lane >> 4);

  // wide3: Q (cp.async group 0, with tile 0) into registers before the first iteration issues
  // into the last stage, where Q was staged; that iteration's barrier orders the two. (The full
  // ring loaded Q's fragments from global memory above.)
  if constexpr (Cfg::kQInRegs) {
    if (!full_ring) {
      cp_async_wait_n(ahead - 1);  // group 0 (Q, tile 0)
      __syncthreads();
#pragma unroll
      for (int kb = 0; kb < kDqk / 16; ++kb) ldmatrix_x4(qa[kb], q_base + (q_lane ^ (kb << 5)));
    }
  }

  for (int it = 0; it < n_tiles; ++it) {
    // Group g holds tile g (the full ring's iteration 0 commits none): `ahead` groups may stay
    // pending at iteration 0 of the full ring, ahead - 1 otherwise.
    const bool refill = !(full_ring && it == 0);  // the full ring's stages are all in use
    cp_async_wait_n(refill ? ahead - 1 : ahead);
    __syncthreads();
    if constexpr (kStamp) {
      if (it == 0) stamp<kStamp>(p, 4);
      if (it == n_tiles - 1) stamp<kStamp>(p, 5);
    }
    if (refill) {
      const int nx = it + ahead;
      if (nx < n_tiles) {  // CTA-uniform
        // Tile nx's ids landed with tile it's group (waited above). The slot written now,
        // (nx + ahead) % kStages, held the ids of tile nx + ahead - kStages, issued (read)
        // before this iteration's barrier.
        const int32_t* ids = sIds + (nx % kStages) * kBN;
        load_tile(nx, nx % kStages, [&](int j) { return ring_page(ids, j); });
        issue_ids(nx + ahead);
      }
      cp_async_commit();
    }
    const uint8_t* sK_t;  // this stage's K and V tiles as the body reads them
    const uint8_t* sV_t;
    if constexpr (Cfg::kDirectV) {
      sK_t = sRing + (it % kStages) * Cfg::kStageBytes;
      sV_t = sK_t + kBN * kDqk;
    } else if constexpr (kFp8) {
      const uint8_t* rk = sRing + (it % kStages) * Cfg::kStageBytes;
      const uint8_t* rv = rk + kBN * kDqk;
      uint8_t* ck = sConv;
      uint8_t* cv = sConv + kBN * kDqk * 2;
      constexpr int kKc = kDqk / 16, kVc = kDv / 16;
      // Decode tiles (warps split the tokens): each warp converts only its own tokens, so a
      // warp barrier suffices; otherwise the whole block converts the tile.
      constexpr bool kWarpConv = kWN > 1 && kWM == 1;
      constexpr int kConvTok = kWarpConv ? kNT : kBN;
      constexpr int kConvThreads = kWarpConv ? 32 : kThreads;
      const int conv_tok0 = kWarpConv ? wn * kNT : 0;
      // 16 raw bytes (chunk c of row j) -> two swizzled 16-byte bf16 chunks 2c, 2c+1.
      auto convert = [&](const uint8_t* raw_tile, uint8_t* bf_tile, int j, int c, int cpr) {
        const uint4 raw = *reinterpret_cast<const uint4*>(raw_tile + j * cpr * 16 + c * 16);
        uint32_t w8[8];
        e4m3x4_to_bf16x4(raw.x, w8[0], w8[1]);
        e4m3x4_to_bf16x4(raw.y, w8[2], w8[3]);
        e4m3x4_to_bf16x4(raw.z, w8[4], w8[5]);
        e4m3x4_to_bf16x4(raw.w, w8[6], w8[7]);
        const int rb = cpr * 32;
        *reinterpret_cast<uint4*>(bf_tile + swz(j, 2 * c, rb)) =
            make_uint4(w8[0], w8[1], w8[2], w8[3]);
        *reinterpret_cast<uint4*>(bf_tile + swz(j, 2 * c + 1, rb)) =
            make_uint4(w8[4], w8[5], w8[6], w8[7]);
      };
      const int conv_first = kWarpConv ? lane : tid;
      if constexpr (kKc == kVc) {
#pragma unroll 1
        for (int i = conv_first; i < kConvTok * kKc; i += kConvThreads) {
          const int j = conv_tok0 + i / kKc, c = i % kKc;
          convert(rk, ck, j, c, kKc);
          convert(rv, cv, j, c, kVc);
        }
      } else {
#pragma unroll 1
        for (int i = conv_first; i < kConvTok * kKc; i += kConvThreads)
          convert(rk, ck, conv_tok0 + i / kKc, i % kKc, kKc);
#pragma unroll 1
        for (int i = conv_first; i < kConvTok * kVc; i += kConvThreads)
          convert(rv, cv, conv_tok0 + i / kVc, i % kVc, kVc);
      }
      if constexpr (kWarpConv) {
        __syncwarp();
      } else {
        __syncthreads();
      }
      sK_t = ck;
      sV_t = cv;
    } else {
      sK_t = sRing + (it % kStages) * Cfg::kStageBytes;
      sV_t = sK_t + kBN * kDqk * 2;
    }

    {
      const int kv0 = kv_begin + it * kv_step;
      const uint8_t* sK = sK_t;
      const uint8_t* sV = sV_t;

      // ---- S = Q K^T for this warp's kMB x 16 rows x kNT tokens ----
      const int tok0 = wn * kNT;
      float s[kMB][kNT / 8][4];
#pragma unroll
      for (int mb = 0; mb < kMB; ++mb)
#pragma unroll
        for (int i = 0; i < kNT / 8; ++i)
          s[mb][i][0] = s[mb][i][1] = s[mb][i][2] = s[mb][i][3] = 0.f;
      // Swizzled ldmatrix addresses: the chunk XOR only touches bits 4.. of the in-row offset,
      // so k-step kb is `lane_off ^ (kb << 5)` and row blocks are immediate offsets (keeps the
      // address registers few).
      if constexpr (Cfg::kDirectK) {
        // B fragments straight from the raw FP8 K rows: lane (g, t) reads dims 4t..4t+3 of k-step
        // kb of token row g (one 4-byte read; rows' 16-byte chunks are swizzled by row & 7).
        // hcvt8 (Cfg::kSChains4): odd k-steps accumulate into s_odd (4 chains of 8).
        constexpr bool kS4 = Cfg::kSChains4;
        float s_odd[kS4 ? kMB : 1][kS4 ? kNT / 8 : 1][4];
        if constexpr (kS4) {
#pragma unroll
          for (int mb = 0; mb < kMB; ++mb)
#pragma unroll
            for (int i = 0; i < kNT / 8; ++i)
              s_odd[mb][i][0] = s_odd[mb][i][1] = s_odd[mb][i][2] = s_odd[mb][i][3] = 0.f;
        }
#pragma unroll
        for (int kb = 0; kb < kDqk / 16; ++kb) {
          uint32_t a[kMB][4];
          const uint32_t q_off = q_base + (q_lane ^ (kb << 5));
#pragma unroll
          for (int mb = 0; mb < kMB; ++mb) ldmatrix_x4(a[mb], q_off + mb * 16 * kQRow);
#pragma unroll
          for (int nb = 0; nb < kNT / 8; ++nb) {
            const int row = tok0 + nb * 8 + g;
            const uint32_t wv = *reinterpret_cast<const uint32_t*>(
                sK + row * kDqk + ((kb ^ (row & 7)) << 4) + 4 * t4);
            uint32_t b0, b1;
            e4m3x4_to_f16x4_hw(wv, b0, b1);  // (4t, 4t+1), (4t+2, 4t+3)
#pragma unroll
            for (int mb = 0; mb < kMB; ++mb) {
              if constexpr (kS4) {
                if (kb & 1)
                  mma16816<TM>(s_odd[mb][nb], a[mb], b0, b1);
                else
                  mma16816<TM>(s[mb][nb], a[mb], b0, b1);
              } else {
                mma16816<TM>(s[mb][nb], a[mb], b0, b1);
              }
            }
          }
        }
        if constexpr (kS4) {
#pragma unroll
          for (int mb = 0; mb < kMB; ++mb)
#pragma unroll
            for (int i = 0; i < kNT / 8; ++i)
#pragma unroll
              for (int e = 0; e < 4; ++e) s[mb][i][e] += s_odd[mb][i][e];
        }
      }
      const int k_row = tok0 + ((lane >> 4) << 3) + (lane & 7);
      const uint32_t k_base = smem_u32(sK) + k_row * kKRow;
      const uint32_t k_lane = swz_in_row(k_row, (lane >> 3) & 1);
#pragma unroll
      for (int kb = 0; kb < (Cfg::kDirectK ? 0 : kDqk / 16); ++kb) {
        uint32_t a[kMB][4];
        if constexpr (Cfg::kQInRegs) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[0][e] = qa[kb][e];
        } else {
          const uint32_t q_off = q_base + (q_lane ^ (kb << 5));
#pragma unroll
          for (int mb = 0; mb < kMB; ++mb) ldmatrix_x4(a[mb], q_off + mb * 16 * kQRow);
        }
        const uint32_t k_off = k_base + (k_lane ^ (kb << 5));
#pragma unroll
        for (int nb2 = 0; nb2 < kNT / 16; ++nb2) {
          uint32_t bf[4];
          ldmatrix_x4(bf, k_off + nb2 * 16 * kKRow);
#pragma unroll
          for (int mb = 0; mb < kMB; ++mb) {
            mma16816<TM>(s[mb][2 * nb2], a[mb], bf[0], bf[1]);
            mma16816<TM>(s[mb][2 * nb2 + 1], a[mb], bf[2], bf[3]);
          }
        }
      }

      // ---- mask: range end, causal diagonal, window start ----
      constexpr int kSBN = kBN;
      const bool need_mask = (kv0 + kSBN > kv_end) || (kv0 + kSBN - 1 > tile_qi_min + off_diag) ||
                             (p.window_left >= 0 && kv0 < tile_qi_max + off_diag - p.window_left);
      if (need_mask) {
#pragma unroll
        for (int mb = 0; mb < kMB; ++mb)
#pragma unroll
          for (int nb = 0; nb < kNT / 8; ++nb) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int pos = kv0 + tok0 + nb * 8 + 2 * t4 + (e & 1);
              const int diag = row_qi[mb][e >> 1] + off_diag;
              const bool ok =
                  pos < kv_end && pos <= diag && (p.window_left < 0 || pos >= diag - p.window_left);
              if (!ok) s[mb][nb][e] = -INFINITY;
            }
          }
      }

      // ---- online softmax (base 2) ----
      float alpha[kMB][2];
      bool grew = false;
#pragma unroll
      for (int mb = 0; mb < kMB; ++mb)
#pragma unroll
        for (int r = 0; r < kR; ++r) {
          float mx = -INFINITY;
#pragma unroll
          for (int nb = 0; nb < kNT / 8; ++nb)
            mx = fmaxf(mx, fmaxf(s[mb][nb][2 * r], s[mb][nb][2 * r + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          // The running max moves only past a slack (P then stays below 2^slack; exact, the
          // normalisation uses the same max): after the first tiles a causal row's max rarely
          // jumps that far, so the O rescale below is rarely due. -inf (no key yet) always moves.
          const float m_cand = fmaxf(m_run[mb][r], mx * row_scale[mb][r]);
          const float m_new = m_cand > m_run[mb][r] + p.rescale_slack ? m_cand : m_run[mb][r];
          const float m_use = m_new == -INFINITY ? 0.f : m_new;
          alpha[mb][r] = fast_exp2(m_run[mb][r] - m_use);  // exactly 1 when the max held
          grew |= alpha[mb][r] != 1.f;
          m_run[mb][r] = m_new;
          l_run[mb][r] *= alpha[mb][r];
          float sum = 0.f;
#pragma unroll
          for (int nb = 0; nb < kNT / 8; ++nb) {
            s[mb][nb][2 * r] = fast_exp2(fmaf(s[mb][nb][2 * r], row_scale[mb][r], -m_use));
            s[mb][nb][2 * r + 1] = fast_exp2(fmaf(s[mb][nb][2 * r + 1], row_scale[mb][r], -m_use));
            sum += s[mb][nb][2 * r] + s[mb][nb][2 * r + 1];
          }
          l_run[mb][r] += sum;
        }
      // O is rescaled only when some row of the warp raised its running max: past the first tiles
      // of a long range the max rarely moves, and the rescale (kDv / 4 multiplies per row pair, as
      // many FP32 ops as the tile's MMAs for decode) is skipped. Bit-identical (x * 1 == x).
      if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
        for (int mb = 0; mb < kMB; ++mb)
#pragma unroll
          for (int r = 0; r < kR; ++r)
#pragma unroll
            for (int db = 0; db < kDvW / 8; ++db) {
              o[mb][db][2 * r] *= alpha[mb][r];
              o[mb][db][2 * r + 1] *= alpha[mb][r];
            }
      }

      // ---- O += P V ----
      const int v_row = tok0 + (((lane >> 3) & 1) << 3) + (lane & 7);
      const uint32_t v_base = smem_u32(sV) + v_row * kVRow;
      const uint32_t v_lane = swz_in_row(v_row, lane >> 4);
#pragma unroll
      for (int kk = 0; kk < kNT / 16; ++kk) {
        uint32_t pa[kMB][4];
#pragma unroll
        for (int mb = 0; mb < kMB; ++mb) {
          pa[mb][0] = pack2<TM>(s[mb][2 * kk][0], s[mb][2 * kk][1]);
          pa[mb][1] = kHalf ? 0u : pack2<TM>(s[mb][2 * kk][2], s[mb][2 * kk][3]);
          pa[mb][2] = pack2<TM>(s[mb][2 * kk + 1][0], s[mb][2 * kk + 1][1]);
          pa[mb][3] = kHalf ? 0u : pack2<TM>(s[mb][2 * kk + 1][2], s[mb][2 * kk + 1][3]);
        }
        if constexpr (Cfg::kDirectV) {
          // B fragment of n-block (4 q + i), lane (g, t): tokens (2t, 2t+1) and (2t+8, 2t+9) of the
          // k-step at "n = g", which stands for dim 32 q + 4 g + i. One 4-byte read of dims
          // 32q+4g..+3 per token row therefore feeds all four n-blocks of the 32-dim group; rows'
          // 16-byte chunks are swizzled by row & 7 (conflict-free: the 4 rows x 2 chunks of a read
          // land in 8 distinct chunk slots).
          const int r0 = tok0 + kk * 16 + 2 * t4;
#pragma unroll
          for (int q = 0; q < kDv / 32; ++q) {
            const int c = 2 * q + (g >> 2);
            auto rd = [&](int row) {
              return *reinterpret_cast<const uint32_t*>(sV + row * kDv + ((c ^ (row & 7)) << 4) +
                                                        4 * (g & 3));
            };
            const uint32_t w0 = rd(r0), w1 = rd(r0 + 1), w8 = rd(r0 + 8), w9 = rd(r0 + 9);
            uint32_t b0[4], b1[4];
            e4m3x4_to_f16x4_hw(__byte_perm(w0, w1, 0x5140), b0[0], b0[1]);
            e4m3x4_to_f16x4_hw(__byte_perm(w0, w1, 0x7362), b0[2], b0[3]);
            e4m3x4_to_f16x4_hw(__byte_perm(w8, w9, 0x5140), b1[0], b1[1]);
            e4m3x4_to_f16x4_hw(__byte_perm(w8, w9, 0x7362), b1[2], b1[3]);
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
              for (int mb = 0; mb < kMB; ++mb) {
                if constexpr (kHalf)
                  mma16816_rows8(o[mb][4 * q + i], pa[mb], b0[i], b1[i]);
                else
                  mma16816<TM>(o[mb][4 * q + i], pa[mb], b0[i], b1[i]);
              }
          }
        } else {
          // this warp's dims start at chunk dh * kDvW / 8: a power of two above the swizzle's
          // row & 7 bits, so it composes by XOR
          const uint32_t v_lane_h = v_lane ^ ((dh * (kDvW / 16)) << 5);
#pragma unroll
          for (int db2 = 0; db2 < kDvW / 16; ++db2) {
            uint32_t bf[4];
            ldmatrix_x4_trans(bf, v_base + (v_lane_h ^ (db2 << 5)) + kk * 16 * kVRow);
#pragma unroll
            for (int mb = 0; mb < kMB; ++mb) {
              mma16816<TM>(o[mb][2 * db2], pa[mb], bf[0], bf[1]);
              mma16816<TM>(o[mb][2 * db2 + 1], pa[mb], bf[2], bf[3]);
            }
          }
        }
      }
    }
  }
  cp_async_wait<0>();
  stamp<kStamp>(p, 6);
  // kVarVdEarly: the V descale's load leaves before the warp merge's barriers instead of after
  // them, where its L2 round trip sat between the last barrier and the epilogue's stores.
  const float vdesc_early = kVdEarly ? load_scale(p.v_descale, p.vd_sb, p.vd_sh, w.b, kvh) : 1.f;

#pragma unroll
  for (int mb = 0; mb < kMB; ++mb)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l_run[mb][r] += __shfl_xor_sync(0xffffffffu, l_run[mb][r], 1);
      l_run[mb][r] += __shfl_xor_sync(0xffffffffu, l_run[mb][r], 2);
    }

  // Spread merge (p.spread_merge, decode tiles whose n-blocks split evenly over the warps; the
  // FP8 direct-V layout needs whole 32-dim groups per warp): every warp merges and
  // stores its own kSpreadNB n-blocks of O.
  constexpr int kSpreadNB = kWN > 1 ? (kDv / 8) / (kWN * kDH) : kDv / 8;
  constexpr bool kSpreadOk =
      kWN > 1 && (kDv / 8) % (kWN * kDH) == 0 && (!Cfg::kDirectV || kSpreadNB % 4 == 0);
  static_assert(kDH == 1 || kSpreadOk, "split output dims merge through the spread merge");
  // the split-dims tiles (kDH = 2) merge only through the shared-copy spread merge
  const bool spread = kSpreadOk && (kDH > 1 || kLean || p.spread_merge != 0);
  // p.spread_merge == 2 (the default; 1: B12X_ATTN_SPREAD_MERGE=1): the warps run one code
  // copy instead of one per n-block range (the epilogue runs once per warp, so each copy is
  // fetched cold; Nsight Compute had 18% of the BF16 B=1 warps' stall samples in the epilogue,
  // mostly waiting for instructions): every warp writes all its n-blocks, sums its own range
  // from shared memory into own[] (runtime offsets, fixed registers) and stores them with a
  // runtime column base. H200 round 26: BF16 B=1 x 8k 15.0-15.1 vs 15.3-15.5 us, FP8 B=1 12.4
  // vs 12.7, FP8 B=8 40.8 vs 41.5, BF16 16/2/256 B=8 42.4 vs 42.8.
  const bool spread_shared = spread && (kDH > 1 || kLean || p.spread_merge == 2);
  const int owner = dh * kWN + wn;  // the spread merge's n-block range of this warp
  float own[kSpreadOk ? kSpreadNB : 1][4];
  // Runs f.template operator()<lo, hi>() with this warp's n-block range (warp-uniform branch,
  // compile-time bounds so that O stays in registers).
  auto for_own_nblocks = [&](auto&& f) {
    if (wn == 0) {
      f.template operator()<0, kSpreadNB>();
    } else if constexpr (kWN == 2) {
      f.template operator()<kSpreadNB, 2 * kSpreadNB>();
    } else if constexpr (kWN == 4) {
      if (wn == 1)
        f.template operator()<kSpreadNB, 2 * kSpreadNB>();
      else if (wn == 2)
        f.template operator()<2 * kSpreadNB, 3 * kSpreadNB>();
      else
        f.template operator()<3 * kSpreadNB, 4 * kSpreadNB>();
    }
  };
  // ---- merge the WN warp states of each row block through shared memory (kMB == 1) ----
  if constexpr (kWN > 1) {
    cp_async_wait<0>();  // an empty range issued a zero-filled tile 0 that no iteration waited for
    __syncthreads();     // everyone is done with the ring
    float* sm_m = reinterpret_cast<float*>(sRing);
    float* sm_l = sm_m + kWN * kBM;
    float* sm_o = sm_l + kWN * kBM;
    if (t4 == 0 && dh == 0) {  // both halves of a pair hold the same m and l
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        sm_m[wn * kBM + wm * 16 + g + 8 * r] = m_run[0][r];
        sm_l[wn * kBM + wm * 16 + g + 8 * r] = l_run[0][r];
      }
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const int row = wm * 16 + g + 8 * r;
      float mm = -INFINITY;
#pragma unroll
      for (int x = 0; x < kWN; ++x) mm = fmaxf(mm, sm_m[x * kBM + row]);
      const float m_use = mm == -INFINITY ? 0.f : mm;
      float ll = 0.f;
#pragma unroll
      for (int x = 0; x < kWN; ++x)
        ll += sm_l[x * kBM + row] * fast_exp2(sm_m[x * kBM + row] - m_use);
      const float mine = fast_exp2(m_run[0][r] - m_use);
#pragma unroll
      for (int db = 0; db < kDvW / 8; ++db) {
        o[0][db][2 * r] *= mine;
        o[0][db][2 * r + 1] *= mine;
      }
      m_run[0][r] = mm;
      l_run[0][r] = ll;
    }
    // Rows g + 8 of the MMA fragments (elements 2, 3) hold no query row when the CTA's packed
    // rows end within its first 8 (a decode step of a GQA group of <= 8 heads): the exchange
    // then moves elements 0, 1 only, half the shared-memory traffic of the CTA's tail
    // (PagedPlan::epilogue_half).
    const bool half_rows =
        kHalf || (p.epilogue_half != 0 && rows0 + 8 >= w.qlen * p.group);  // CTA-uniform
    // kE fragment elements per lane and n-block through shared memory: 4, or 2 (rows g only)
    auto exchange = [&]<int kE>() {
      using V = std::conditional_t<kE == 2, float2, float4>;
      V* sv = reinterpret_cast<V*>(sm_o);
#pragma unroll
      for (int db = 0; db < kDvW / 8; ++db) {
        V v;
        v.x = o[0][db][0];
        v.y = o[0][db][1];
        if constexpr (kE == 4) {
          v.z = o[0][db][2];
          v.w = o[0][db][3];
        }
        sv[(wn * (kDv / 8) + dh * (kDvW / 8) + db) * 32 + lane] = v;
      }
      __syncthreads();
#pragma unroll
      for (int i = 0; i < (kSpreadOk ? kSpreadNB : 1); ++i) {
        own[i][0] = own[i][1] = own[i][2] = own[i][3] = 0.f;
#pragma unroll
        for (int x = 0; x < kWN; ++x) {
          const V v = sv[(x * (kDv / 8) + owner * kSpreadNB + i) * 32 + lane];
          own[i][0] += v.x;
          own[i][1] += v.y;
          if constexpr (kE == 4) {
            own[i][2] += v.z;
            own[i][3] += v.w;
          }
        }
      }
    };
    if (spread_shared) {
      if (half_rows)
        exchange.template operator()<2>();
      else
        exchange.template operator()<4>();
    } else if constexpr (kDH == 1) {
      if (spread) {
        // Warp wn sums (and later stores) n-blocks [wn kSpreadNB, (wn + 1) kSpreadNB): it writes
        // the others' n-blocks as one float4 per lane ([writer][n-block][lane]) and adds the
        // other warps' float4s of its own: kWN - 1 quarters per warp instead of warp 0 adding
        // every other warp's O alone (kDv / 2 loads and adds per lane) at the CTA's tail.
        float4* s4 = reinterpret_cast<float4*>(sm_o);
        for_own_nblocks([&]<int kLo, int kHi>() {
#pragma unroll
          for (int db = 0; db < kDv / 8; ++db)
            if (db < kLo || db >= kHi)
              s4[(wn * (kDv / 8) + db) * 32 + lane] =
                  make_float4(o[0][db][0], o[0][db][1], o[0][db][2], o[0][db][3]);
        });
        __syncthreads();
        for_own_nblocks([&]<int kLo, int kHi>() {
#pragma unroll
          for (int x = 0; x < kWN; ++x) {
            if (x == wn) continue;
#pragma unroll
            for (int db = kLo; db < kHi; ++db) {
              const float4 v = s4[(x * (kDv / 8) + db) * 32 + lane];
              o[0][db][0] += v.x;
              o[0][db][1] += v.y;
              o[0][db][2] += v.z;
              o[0][db][3] += v.w;
            }
          }
        });
      } else {
        // fragment-ordered partial O of warps wn > 0
        float* my = sm_o + ((wn * kWM + wm) * (kDv / 8) * 4) * 32;
        if (wn > 0) {
#pragma unroll
          for (int db = 0; db < kDv / 8; ++db)
#pragma unroll
            for (int e = 0; e < 4; ++e) my[(db * 4 + e) * 32 + lane] = o[0][db][e];
        }
        __syncthreads();
        // Warps wn > 0 are done unless the CTA may merge the splits afterwards (all warps do).
        if (wn > 0 && !(!kLean && p.merge_ctr != nullptr && range.ns > 1)) return;
#pragma unroll
        for (int x = 1; x < kWN && wn == 0; ++x) {
          const float* other = sm_o + ((x * kWM + wm) * (kDv / 8) * 4) * 32;
#pragma unroll
          for (int db = 0; db < kDv / 8; ++db)
#pragma unroll
            for (int e = 0; e < 4; ++e) o[0][db][e] += other[(db * 4 + e) * 32 + lane];
        }
      }
    }
  }

  // ---- epilogue: final output (single split) or normalised partial + LSE ----
  const float vdesc = kVdEarly ? vdesc_early : load_scale(p.v_descale, p.vd_sb, p.vd_sh, w.b, kvh);
  const bool final_out = range.ns == 1;
  // Rows of kN n-blocks starting at n-block `base` (all of them unless spread; the warp holding
  // n-block 0 writes the LSE); at(mb, i, e) is element e of the i-th of them (compile-time i:
  // registers).
  auto emit = [&]<int kN>(auto&& at, int base) {
#pragma unroll
    for (int mb = 0; mb < kMB; ++mb)
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        const int pr = rows0 + wrow0 + mb * 16 + g + 8 * r;
        const int qi = div_group(p, pr);
        if (qi >= w.qlen) continue;
        const int h = kvh * p.group + (pr - qi * p.group);
        const int tok = w.q0 + qi;
        float mm = m_run[mb][r], ll = l_run[mb][r];
        float rescale = 1.f;
        if (final_out && p.sinks != nullptr) {
          const float sl2 = p.sinks[h] * kLog2e;
          const float mn = fmaxf(mm, sl2);
          rescale = fast_exp2(mm - mn);  // 0 when there was no key
          ll = ll * rescale + fast_exp2(sl2 - mn);
          mm = mn;
        }
        const float factor = ll > 0.f ? rescale * vdesc / ll : 0.f;
        const float lse = ll > 0.f ? mm + __log2f(ll) : -INFINITY;
        if (Cfg::kDirectV && final_out) {
          // permuted dims: this lane holds dims 32 q + 8 t .. +7 of each 32-dim group q (one
          // 16-byte store): dim 32q+8t+i is o[4q+i][2r], dim 32q+8t+4+i is o[4q+i][2r+1]
          T* out = static_cast<T*>(p.out) + (int64_t)tok * p.o_st + (int64_t)h * p.o_sh + 8 * base +
                   8 * t4;
#pragma unroll
          for (int q = 0; q < kN / 4; ++q) {
            auto x = [&](int i, int e) { return at(mb, 4 * q + i, 2 * r + e) * factor; };
            *reinterpret_cast<uint4*>(out + 32 * q) =
                make_uint4(pack2<T>(x(0, 0), x(1, 0)), pack2<T>(x(2, 0), x(3, 0)),
                           pack2<T>(x(0, 1), x(1, 1)), pack2<T>(x(2, 1), x(3, 1)));
          }
          if (base == 0 && p.lse != nullptr && t4 == 0)
            p.lse[(int64_t)tok * p.lse_st + (int64_t)h * p.lse_sh] = lse;
        } else if (Cfg::kDirectV) {
          const int64_t row = ((int64_t)split * p.total_q + tok) * p.num_q_heads + h;
          float* po = p.part_o + row * kDv + 8 * base + 8 * t4;
#pragma unroll
          for (int q = 0; q < kN / 4; ++q) {
            auto x = [&](int i, int e) { return at(mb, 4 * q + i, 2 * r + e) * factor; };
            *reinterpret_cast<float4*>(po + 32 * q) =
                make_float4(x(0, 0), x(1, 0), x(2, 0), x(3, 0));
            *reinterpret_cast<float4*>(po + 32 * q + 4) =
                make_float4(x(0, 1), x(1, 1), x(2, 1), x(3, 1));
          }
          if (base == 0 && t4 == 0) p.part_lse[row] = lse;
        } else if (final_out) {
          T* out = static_cast<T*>(p.out) + (int64_t)tok * p.o_st + (int64_t)h * p.o_sh + 8 * base +
                   2 * t4;
#pragma unroll
          for (int i = 0; i < kN; ++i)
            *reinterpret_cast<uint32_t*>(out + i * 8) =
                pack2<T>(at(mb, i, 2 * r) * factor, at(mb, i, 2 * r + 1) * factor);
          if (base == 0 && p.lse != nullptr && t4 == 0)
            p.lse[(int64_t)tok * p.lse_st + (int64_t)h * p.lse_sh] = lse;
        } else {
          const int64_t row = ((int64_t)split * p.total_q + tok) * p.num_q_heads + h;
          float* po = p.part_o + row * kDv + 8 * base + 2 * t4;
#pragma unroll
          for (int i = 0; i < kN; ++i)
            *reinterpret_cast<float2*>(po + i * 8) =
                make_float2(at(mb, i, 2 * r) * factor, at(mb, i, 2 * r + 1) * factor);
          if (base == 0 && t4 == 0) p.part_lse[row] = lse;
        }
      }
  };
  if constexpr (kSpreadOk) {
    if (spread_shared) {
      emit.template operator()<kSpreadNB>([&](int, int i, int e) { return own[i][e]; },
                                          owner * kSpreadNB);
    } else if constexpr (kDH == 1) {
      if (spread) {
        for_own_nblocks([&]<int kLo, int kHi>() {
          emit.template operator()<kHi - kLo>(
              [&](int mb, int i, int e) { return o[mb][kLo + i][e]; }, kLo);
        });
      }
    }
  }
  if constexpr (kDH == 1) {
    if (!spread && (kWN == 1 || wn == 0))
      emit.template operator()<kDv / 8>([&](int mb, int i, int e) { return o[mb][i][e]; }, 0);
  }
  stamp<kStamp>(p, 7);
  stamp_meta<kStamp>(
      p, (uint64_t(1) << 63) | (uint64_t(split) << 32) | (uint64_t(n_tiles & 0xffff) << 16));

  // ---- fused split merge (decode/verify): the last CTA of the tile's splits merges ----
  // Each CTA publishes its partials (fence, then one ticket per CTA); the CTA that draws the
  // last ticket sees every other CTA's partials in L2 (read with ld.global.cg: L1 is not
  // coherent). run() zeroes the tickets before every launch (a memset node in a graph).
  if (!kLean && p.merge_ctr != nullptr && range.ns > 1) {  // CTA-uniform
    __shared__ int s_ticket;
    __threadfence();
    __syncthreads();
    if (tid == 0) s_ticket = atomicAdd(p.merge_ctr + (int64_t)tile_x * p.num_kv_heads + kvh, 1);
    __syncthreads();
    if (s_ticket != range.ns - 1) return;
    __threadfence();
    for (int i = warp; i < kBM; i += kThreads / 32) {  // one warp per packed row
      const int pr = rows0 + i;
      const int qi = div_group(p, pr);
      if (qi >= w.qlen) break;  // rows are in token order
      merge_row_warp<T, kDv>(p, w.q0 + qi, kvh * p.group + (pr - qi * p.group), range.ns, lane);
    }
  }
}

template <typename T, typename Cfg, bool kLean = false, bool kStamp = false, bool kEarly = false,
          int kVar = 0>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    paged_attention_kernel(const __grid_constant__ PagedParams p) {
  paged_attention_body<T, Cfg, kLean, kStamp, kEarly, kVar>(p);
}
/// The same kernel at most kMaxRegs registers per thread (__maxnreg__ instead of the launch
/// bounds, which can only cap at 65536 / (threads x CTAs)): FP8 hcvt at head dim 256 with early
/// K/V takes 209 (216 allocated, 55296 per SM for its two CTAs), which leaves 10240 registers,
/// less than the 12288 of a 96-register merge CTA; at 208 (53248) the merge CTA of the same call
/// fits beside them (PagedPlan::early_cap).
template <typename T, typename Cfg, bool kLean, bool kStamp, bool kEarly, int kMaxRegs>
__global__ void __maxnreg__(kMaxRegs)
    paged_attention_kernel_cap(const __grid_constant__ PagedParams p) {
  paged_attention_body<T, Cfg, kLean, kStamp, kEarly>(p);
}

// ---------------------------------------------------------------- merge ----------------------
/// Folds the normalised split partials of each (token, head) with their base-2 LSEs (and the
/// sink as one extra state with no value row). One CTA of kMergeWarps warps per (token, head).
/// The metadata (cu_seqlens_q, cache_seqlens: inputs the main kernel only reads, final before it
/// let this grid launch, since its CTAs trigger the launch after their own griddepcontrol.wait)
/// are read before waiting for the main kernel. Rows whose tile had a single split were written
/// by the main kernel: skipped.
constexpr int kMergeWarps = 4;
/// The merge of row (tok, h): kP adjacent lanes share a float4 column (kP x kDv / 4 <= the CTA's
/// 128 threads) and take every kP-th split, so a warp's loads of one split cover 32 / kP columns
/// contiguously; every warp turns the (at most 64) LSEs into weights itself (shuffles, no shared
/// memory) while its first 8 splits' partials are in flight, and kP - 1 shuffle steps add the
/// lanes' sums: no barrier, one L2 round trip per 8 x kP splits. `live` false runs the same
/// instructions with every load and store off (the warm-up pass before the wait, see
/// paged_merge_body).
template <typename T, int kDv>
__device__ __forceinline__ void merge_row_flat(const PagedParams& p, int64_t row, int tok, int h,
                                               int ns, bool live) {
  constexpr int kC = kDv / 4;  // float4 columns: 16, 32, 48 or 64
  constexpr int kP = kC <= 16 ? 8 : (kC <= 32 ? 4 : 2);
  static_assert(kC * kP <= 32 * kMergeWarps && 64 % (8 * kP) == 0, "merge lanes");
  const int lane = threadIdx.x & 31;
  const int c = threadIdx.x / kP, part = threadIdx.x % kP;
  const bool active = c < kC;
  const int64_t split_stride = int64_t(p.total_q) * p.num_q_heads;
  const float* base = p.part_o + row * kDv + c * 4;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  float w0 = 0.f, w1 = 0.f, mm = 0.f, wsum = 0.f;
  // batches of 8 splits per lane; 8 x kP divides 64, so every split index stays below 64
  for (int s0 = 0; s0 < ns; s0 += 8 * kP) {  // CTA-uniform
    float4 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int sidx = s0 + part + kP * j;
      v[j] = live && active && sidx < ns
                 ? *reinterpret_cast<const float4*>(base + sidx * split_stride * kDv)
                 : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    if (s0 == 0) split_weights<false>(p, row, live ? ns : 0, h, lane, w0, w1, mm, wsum);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int sidx = s0 + part + kP * j;  // < 64; weights past ns are 0
      const float a = __shfl_sync(0xffffffffu, w0, sidx & 31);
      const float b = __shfl_sync(0xffffffffu, w1, sidx & 31);
      const float ws = sidx < 32 ? a : b;
      acc.x += ws * v[j].x;
      acc.y += ws * v[j].y;
      acc.z += ws * v[j].z;
      acc.w += ws * v[j].w;
    }
  }
#pragma unroll
  for (int d = 1; d < kP; d <<= 1) {
    acc.x += __shfl_xor_sync(0xffffffffu, acc.x, d);
    acc.y += __shfl_xor_sync(0xffffffffu, acc.y, d);
    acc.z += __shfl_xor_sync(0xffffffffu, acc.z, d);
    acc.w += __shfl_xor_sync(0xffffffffu, acc.w, d);
  }
  const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
  if (live && active && part == 0) {
    T* out = static_cast<T*>(p.out) + (int64_t)tok * p.o_st + (int64_t)h * p.o_sh + c * 4;
    *reinterpret_cast<uint2*>(out) =
        make_uint2(pack2<T>(acc.x * inv, acc.y * inv), pack2<T>(acc.z * inv, acc.w * inv));
  }
  if (live && p.lse != nullptr && threadIdx.x == 0)
    p.lse[(int64_t)tok * p.lse_st + (int64_t)h * p.lse_sh] =
        wsum > 0.f ? mm + log2f(wsum) : -INFINITY;
}
template <typename T, int kDv, bool kStamp>
__device__ __forceinline__ void paged_merge_body(const PagedParams& p) {
  unsigned long long* st = kStamp && threadIdx.x == 0 && p.stamps != nullptr
                               ? p.stamps + p.stamp_merge + blockIdx.x * kMergeStampSlots
                               : nullptr;
  if constexpr (kStamp) {
    if (st != nullptr) st[0] = global_ns();
  }
  // The next PDL-launched kernel (e.g. the next call's main kernel) may get scheduled now: it
  // waits for this grid's completion before reading anything, and its launch latency overlaps
  // the merge instead of following it (H200 round 97: letting it launch only once the partials
  // have arrived cost 2.5 us per call at 16/2/256 x 8k B = 8).
  allow_next_grid();
  const int64_t row = blockIdx.x;
  if (row >= int64_t(p.total_q) * p.num_q_heads) return;
  const int tok = static_cast<int>(row / p.num_q_heads);
  const int h = static_cast<int>(row % p.num_q_heads);
  if (tok >= p.cu_q[p.batch]) return;
  int lo = 0, hi = p.batch - 1;  // request of this token: largest b with cu_q[b] <= tok
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (p.cu_q[mid] <= tok)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int b = lo;
  const int q0 = p.cu_q[b];
  if (q0 < 0 || q0 > tok) return;
  const int qlen = clamp_qlen(p, q0, p.cu_q[b + 1]);
  if (tok - q0 >= qlen) return;
  const int qi = tok - q0;
  const int lk = clamp_len(p, p.seqlens[b]);
  const int pr = qi * p.group + h % p.group;
  const KvRange range = kv_range(p, pr / p.tile_rows, qlen, lk);
  if (range.ns <= 1) return;  // CTA-uniform
  const int ns = min(range.ns, 64);
  // The merge's code runs once before the wait with every load and store off, so that after the
  // wait its instructions come from the SM's instruction cache: each call's K/V stream (67-134
  // MB at 16/2/256 B = 8) evicts them from L2, and fetched cold after the wait they cost more
  // than the loads (H200 rounds 97-98, session 26: docs/attention.md). A loop, not two inlined
  // copies: the second pass must execute the same instructions.
#pragma unroll 1
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) {
      wait_prior_grid();
      if constexpr (kStamp) {
        if (st != nullptr) st[1] = global_ns();
      }
    }
    merge_row_flat<T, kDv>(p, row, tok, h, ns, pass == 1);
  }
  if constexpr (kStamp) {
    if (st != nullptr) {
      st[2] = global_ns();
      st[3] = (uint64_t(1) << 63) | sm_id();
    }
  }
}

template <typename T, int kDv, bool kStamp = false>
__global__ void __launch_bounds__(32 * kMergeWarps)
    paged_merge_kernel(const __grid_constant__ PagedParams p) {
  paged_merge_body<T, kDv, kStamp>(p);
}

// ---------------------------------------------------------------- scheduler ------------------
/// Extend: row tiles per request (ceil(q_len * group / BM)) and their prefix, rebuilt on the
/// device from cu_seqlens_q each launch. One block.
template <int kUnused = 0>
__global__ void __launch_bounds__(1024)
    paged_schedule_kernel(const __grid_constant__ PagedParams p) {
  wait_prior_grid();
  allow_next_grid();
  __shared__ int warp_sums[32];
  __shared__ int carry;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int base = 0; base < p.batch; base += blockDim.x) {
    const int b = base + threadIdx.x;
    int n = 0;
    if (b < p.batch) {
      const int qlen = min(max(0, p.cu_q[b + 1] - p.cu_q[b]), p.total_q);
      n = (qlen * p.group + p.tile_rows - 1) / p.tile_rows;
    }
    int x = n;  // inclusive warp scan
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, x, d);
      if (lane >= d) x += y;
    }
    if (lane == 31) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
      int v = lane < (int)(blockDim.x >> 5) ? warp_sums[lane] : 0;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += y;
      }
      warp_sums[lane] = v;  // inclusive prefix of warp totals
    }
    __syncthreads();
    const int excl = carry + (warp > 0 ? warp_sums[warp - 1] : 0) + x - n;
    if (b < p.batch) p.tile_start[b] = excl;
    __syncthreads();
    if (threadIdx.x == 0) carry += warp_sums[(blockDim.x >> 5) - 1];
    __syncthreads();
  }
  if (threadIdx.x == 0) p.tile_start[p.batch] = carry;
}

}  // namespace b12x::attention::detail
