// M = 1 streaming kernel for NVFP4 weights with BF16 MMAs (session 11, Plan::decode_stream_parts).
//
// Why a second M = 1 kernel: the decode kernel's CTAs are short-lived at M = 1 (2-7 ring slices
// per warp), and each pays its own prologue (activation staging, scale LUT, the ring's first DRAM
// round trip) with its weight stream idle; Nsight Compute put that at ~27 % of warp time. Here a
// persistent grid (at most the CTAs that fit the SMs) walks groups of 8 / kParts row tiles, and
// each warp keeps a continuous register ring of kDepth 16-byte weight vectors in flight across
// group boundaries: the loads of the next group's first vectors are issued while the current
// group's last ones are computed, so a warp's stream never drains until its last group. Weights
// go straight to registers (ld.global.nc.L1::no_allocate): the bytes in flight cost no shared
// memory and no cp.async bookkeeping.
//
// Token broadcast: with one token, every column of the MMA's B operand carries the same
// activations (lane (g, t) holds x[2t, 2t + 1] and x[2t + 8, 2t + 9] of each k16 step whatever
// g), so every column of the accumulator holds the same row sums and no lane needs a clamp or a
// mask. The activations of the whole K are staged once per CTA in shared memory in the order
// the lanes read them: for each 64-K vector, lane t's 16 values (4 k16 steps x lo / hi pair) are
// 32 contiguous bytes, two 16-byte loads per vector (broadcast to the 8 lanes of a t).
//
// K split inside the CTA: the 8 warps are kTiles = 8 / kParts tiles x kParts K parts of vp
// vectors each (vp a multiple of kDepth; vectors past the tile's kvec are not loaded, and the
// staged activations there are zero). Part 0 adds the other parts' row sums from shared memory
// after one CTA barrier per group (double-buffered, so one barrier suffices).
//
// Scale splats without shared memory (round 42: the first version's per-vector scale bytes, LUT
// and quad exchange through shared memory made its L1 / shared-memory traffic the limit, 15.6 us
// at 14336x4096 whatever the warps per SM): each lane loads its rows' UE4M3 bytes of a block of 4
// vectors with one 16-byte load per row, and builds the (row g, row g + 8) scale * 2^119 pairs
// arithmetically: the UE4M3 bits shifted left by 4 are the BF16 bits of value * 2^-120
// (subnormal codes included), times 2^120 and 2^119 (two exact HMUL2s). The decode's multiplies
// take one half of a pair each (__low2bfloat162 / __high2bfloat162, which ptxas folds into the
// HMUL2's .H0_H0 / .H1_H1 operand: no splat instructions). (Code 0x7F, NaN in UE4M3, gives a
// finite splat; the LUT of the decode kernel gives NaN.) Since session 14 (round 52: -8 %
// at 14336x4096) lane t of a row pair builds only k16 step t's pair and the quad's lanes trade
// them by shuffles, instead of each of the 4 lanes building the same 4.
#pragma once

#include <cuda_bf16.h>

#include "formats/swizzle.h"
#include "gemm/kernels/cluster_sum.cuh"
#include "gemm/kernels/linear_common.cuh"

namespace b12x::gemm::lin {

inline constexpr int kStreamWarps = 8;
inline constexpr int kStreamDepth = 4;  ///< ring vectors per warp (= scale block)

/// Position of activation k in the staged (lane-ordered) layout: vector k / 64, then lane t's 32
/// bytes (t = (k % 8) / 2), then the k16 step, lo / hi 8, the pair element.
__device__ __forceinline__ int stream_xpos(int k) {
  const int r = k & 63, rr = r & 15;
  return (k & ~63) + (((rr & 7) >> 1) << 4) + ((r >> 4) << 2) + ((rr >> 3) << 1) + (rr & 1);
}

/// Position of activation k of token row r in the staged layout of kRows = 4 token rows:
/// vector k / 64, then the half (k16 steps 0-1 / 2-3), the row, lane t's 16 bytes (steps s, s + 1
/// of the half, lo / hi 8, the pair element). A quarter-warp's 16-byte loads (rows g, g + 1, t =
/// 0..3) then read 128 contiguous bytes: one wavefront, no bank conflict.
template <int kRows>
__device__ __forceinline__ int stream_xpos_rows(int k, int r) {
  const int r64 = k & 63, rr = r64 & 15, s = r64 >> 4;
  return (((k >> 6) * 2 + (s >> 1)) * kRows + r) * 32 + (((rr & 7) >> 1) << 3) + ((s & 1) << 2) +
         ((rr >> 3) << 1) + (rr & 1);
}

/// Shared memory of the parts' row sums (static): [2 buffers][warps][16 rows] at M = 1, else
/// [2][warps][4 values per lane][32 lanes].
template <int kRows>
inline constexpr int kStreamRedBytes =
    kRows == 1 ? 2 * kStreamWarps * 16 * 4 : 2 * kStreamWarps * 4 * 32 * 4;

/// Stores one 16-row tile's accumulator fragments of kNt n8 token tiles (lane (g, t) of token
/// tile n: c0 / c1 = row g, tokens 8n + 2t / + 1; c2 / c3 = row g + 8) into fp32 partial slot
/// `slot` ([slot][M][NP], every row of the tile: the reduce reads up to NP) or, without
/// partials, into the output (rows < N) with mult and bias.
template <int kNt>
__device__ __forceinline__ void stream_store_tile(const LinearParams& p, const float (&o)[kNt][4],
                                                  int64_t tile, int64_t slot, float mult, int g,
                                                  int t) {
#pragma unroll
  for (int n = 0; n < kNt; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t tok = 8 * n + 2 * t + (i & 1);
      const int64_t row = tile * 16 + g + 8 * (i >> 1);
      if (tok >= p.M) continue;
      if (p.partial != nullptr)
        p.partial[(slot * p.M + tok) * p.NP + row] = o[n][i];
      else if (row < p.N)
        store_out_elem(p, tok, row, o[n][i], mult);
    }
}

__device__ __forceinline__ void s16_cp_async16(void* smem, const void* gmem) {
  const uint32_t sa = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(gmem));
}

/// 8 BF16 activations of row 0 from k (zeros past K): one 16-byte load where whole and aligned.
__device__ __forceinline__ uint4 stream_x8(const LinearParams& p, const uint16_t* x, int64_t k) {
  if (p.x_vec16 && k + 8 <= p.K) return __ldg(reinterpret_cast<const uint4*>(x + k));
  uint32_t pr[4] = {0, 0, 0, 0};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    if (k + i >= p.K) break;
    pr[i / 2] |= static_cast<uint32_t>(x[k + i]) << (16 * (i % 2));
  }
  return make_uint4(pr[0], pr[1], pr[2], pr[3]);
}

/// The 4 packed bytes and the UE4M3 scale (128x4-swizzled, row 0) of the NVFP4 activations k..k + 7
/// of a block, k = kb + 8 lane (kb a multiple of 128: a block starts at an even vector, kHalf's
/// parts of an even number of vectors included; NVFP4's offsets below need 64, MXFP4's 128; K is
/// a multiple of 16, so a chunk is whole or past K: zeros), for nvfp4x8_bf16_e7; kMxAct: the E8M0
/// scale of MXFP4 activations (K a multiple of 32), for mxfp4x8_bf16. From per-lane constant bases
/// (session 23): row 0's 128x4-swizzled scale offset is (k / 16 / 4) x 512 + (k / 16) % 4 = kb x 8
/// + (lane / 8) x 512 + (lane / 2) % 4 (NVFP4; MXFP4's k / 32: kb x 4 + (lane / 16) x 512 + (lane /
/// 4) % 4) and the bytes sit at kb / 2 + 4 lane, so a block costs two shifts and adds instead of
/// signed 64-bit divisions (~35 sm_90a instructions per lane and block; round 85 / 86: NVFP4 /
/// MXFP4 W4A4 up to -0.17 us, docs/gemm.md session 23).
struct StreamQLane {
  const uint8_t* xb;  // the lane's packed bytes at kb = 0
  const uint8_t* xs;  // its scale byte at kb = 0
  int64_t klim;       // kb < klim: the lane's chunk exists (K - 8 lane)
};
template <bool kMxAct>
__device__ __forceinline__ StreamQLane stream_q8_lane(const LinearParams& p, const uint8_t* xq,
                                                      int lane) {
  const int so =
      kMxAct ? (lane >> 4) * 512 + ((lane >> 2) & 3) : (lane >> 3) * 512 + ((lane >> 1) & 3);
  return StreamQLane{xq + 4 * lane, p.xq_scale + so, p.K - 8 * lane};
}
template <bool kMxAct>
__device__ __forceinline__ void stream_q8_at(const StreamQLane& q, bool xq4, int64_t kb,
                                             uint32_t& qw, uint32_t& qs) {
  qw = qs = 0;
  if (kb >= q.klim) return;
  const uint8_t* const b = q.xb + (kb >> 1);
  if (xq4) {
    qw = __ldg(reinterpret_cast<const uint32_t*>(b));
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) qw |= static_cast<uint32_t>(b[i]) << (8 * i);
  }
  qs = q.xs[kMxAct ? kb << 2 : kb << 3];
}

/// kOcc: CTAs per SM the registers are capped for (2: <= 128, 3: <= 85). kRows: 1 (M = 1, the
/// token broadcast over the MMA's 8 columns) or 4 (M = 2..4, session 12: the tokens on the MMA's
/// N side, lanes g and g + 4 on the same token; K split over gridDim.y CTAs whose fp32 partials
/// linear_reduce_kernel sums, so each CTA stages only its K range).
/// The splats (session 14; the only form since session 21, which removed the per-lane build,
/// round 52: -8 % at 14336x4096 / round 53 at 4 rows): lane t builds only step t's (row g,
/// row g + 8) splat pair of a vector and the quad's 4 lanes exchange them by shuffles (5 ALU
/// operations + 4 SHFL per vector instead of 4 x 5 ALU: the 4 lanes t of a row pair built the
/// same splats).
/// kMx (session 14, M = 1): MXFP4 weights, 2 E8M0 bytes per row and vector
/// (one 8-byte load per row and block of 4 vectors); lane t's splat pair is 2^(e-127) of atom
/// t / 2, applied after the 2^119 that brings the FP4 bits to v * 2^-7 (the block kernel's fold).
/// kMxFree (session 15): the splat is 2^(e-8) and multiplies the decoded bits directly, without
/// the fold's HFMA2 per register (weights whose E8M0 codes are all <= 135, e8m0_bf16_splat_free's
/// values); since session 26 each lane builds both atoms' splats (kMxS), no shuffles.
/// kVar (session 16, LinearParams::stream_var; M = 1): bit 8 (kQx, W4A4) the
/// NVFP4 activations (p.act_kind kActNvfp4) converted to BF16 while staging (nvfp4x8_bf16, the
/// pre-pass's exact values), so no pre-pass launch precedes the kernel. Bit 128 (kJit, session 19;
/// BF16 activations, or NVFP4 ones with kQx): no CTA staging of the whole K before the loop (round
/// 72's probe: the staging and its barriers cost 0.8-1.8 us of 4.7-10.7, all CTAs reading the same
/// K x 2 bytes from L2 at once while the weight stream idles); each warp loads the activations of a
/// block of 4 vectors (256 K: 16 bytes per lane) with the block's weights, one block ahead, and
/// writes them in lane order into its own 512-byte buffer at the block's start (two warp barriers).
template <int kParts, int kOcc, int kRows = 1, bool kMx = false, bool kMxFree = false, int kVar = 0>
__global__ void __launch_bounds__(kStreamWarps * 32, kOcc)
    linear_stream_kernel(const LinearParams p) {
  static_assert(!kMx || kRows == 1, "MXFP4: M = 1");
  static_assert(!kMxFree || kMx, "fold-free splats: MXFP4 only");
  static_assert(kVar == 0 || (kRows == 1 && (!kMx || (kVar & ~64 & ~40 & ~128 & ~kStreamVarLate &
                                                      ~kStreamVarHalf & ~kStreamVarClaim) == 0)),
                "kVar: M = 1; MXFP4 with kQf only");
  // kMxS (session 26, every fold-free MXFP4 instance): each lane builds both atoms' splat pairs
  // of a vector from the scale words by integer arithmetic (one PRMT, a mask and one IMAD per
  // atom, 2 ops for code 255's NaN) instead of atom t / 2's by compares and selects and the quad's
  // 4 shuffles (round 97); with kLean it keeps the block's two scale words per row (kLean's one
  // compressed word holds the lane's atom only).
  constexpr bool kMxS = kMx && kMxFree;
  // kLate (bit 4096, session 26, SM90 default by kStreamLateRule): a ring slot's next vector is
  // requested after the slot's words are decoded instead of before, so the slot needs no register
  // copy (sm_90a: 16 of the block's 32 IMAD.MOV were the ring's copies), at the cost of issuing
  // each load one decode later.
  constexpr bool kLate = (kVar & kStreamVarLate) != 0;
  // kHalf (bit 8192, session 27; SM90 default by kStreamHalfRule): vp a multiple of 2 (the plan's
  // ceil(kvec / parts) rounded to 2, not to the ring's 4), so that no warp of a tile idles where
  // kvec / 8 is 2 mod 4 (2048x7168: 7 of 8 parts of 16 vectors, the 8th empty, against 8 of 14). A
  // part's last block then holds 2 vectors: the vectors of its ring slots 2 / 3 are neither
  // requested (nvalid, lim capped at vp) nor computed (the next block's requests still go out). The
  // block's scale words are 8-byte aligned only (vbase x 4 bytes, MXFP4 4-byte: vbase x 2), so they
  // load in halves.
  constexpr bool kHalf = (kVar & kStreamVarHalf) != 0;
  // kRf (bit 32768, session 28; SM90 default by kStreamRfRule): on the per-warp blocks (kJit)
  // each block's 4 next ring requests go out before its activations are stored to the warp's
  // buffer. Otherwise slot j's request is issued in vector j's step, after that store, which waits
  // for the block's activation load: right after griddep_wait one L2 round trip with nothing but
  // the ring's first block in flight (round 105, Nsight Compute of 2048x7168: the store the
  // hottest stall, 8.5 % of the samples, long scoreboard).
  constexpr bool kRf = (kVar & kStreamVarRf) != 0;
  // kClaim (bit 65536, session 29 probe): the CTA's groups past its first kClaimStatic (blockIdx.x
  // + n gridDim.x) are claimed from a counter, so that CTAs that stream faster (an SM to
  // themselves: PDL places each call's CTAs where slots free up, so which ones changes every
  // call) take the tail's groups. Thread 0 claims group ordinal n + 2 at ordinal n's start and
  // publishes it in shared memory before n's reduction barrier: the claim's round trip overlaps
  // a whole group, and every warp reads it after that barrier, before its ring requests reach
  // ordinal n + 2 (one block ahead, during n + 1; vp >= 8). The counter is a word in the scratch
  // (p.s16_flags): %gridid's low 44 bits above a 20-bit count. CTA 0 writes (tag, 0) after
  // griddep_wait (the previous call's claims are complete), and a claim (atomicAdd) counts only
  // if it returns this launch's tag; one that returns another (the scratch's earlier bytes, CTA
  // 0 not there yet) is retried, so nothing is reset and no value of the scratch is trusted.
  // The first claim is at ordinal 1's start, long after CTA 0's write in practice.
  constexpr bool kClaim = (kVar & kStreamVarClaim) != 0;
  static_assert(!kClaim || (kParts > 1 && kRows == 1 && !kHalf),
                "kClaim: M = 1, the groups' reduction barrier");
  constexpr int kClaimStatic = 3;
  constexpr bool kQx = (kVar & 8) != 0;  // NVFP4 (kMx: MXFP4) activations converted in the kernel
  constexpr bool kJit = (kVar & 128) != 0;
  // kQf (bit 32, session 20; kQx): the conversion by BF16 pair arithmetic, NVFP4 into activations
  // times 2^-7 (nvfp4x8_bf16_e7; the output multiplier times 2^7), MXFP4 (kMx: the weights'
  // format is the activations') into the pre-pass's values (mxfp4x8_bf16); in the per-warp
  // blocks (kJit, session 20) and, without kJit, in the CTA's staging (session 24).
  constexpr bool kQf = (kVar & 32) != 0;
  // kLean (bit 64, session 20; kJit): fewer registers for the 3-CTA cap: one MMA
  // accumulator chain instead of four, and of the block's scale bytes only the lane's (byte t of
  // each vector's row word: its splat's step) kept, compressed into one register per row.
  constexpr bool kLean = (kVar & 64) != 0;
  static_assert(!kLean || kJit, "kLean: with the per-warp blocks");
  static_assert(!kHalf || (kJit && kParts == 8 && !kLean && !kLate),
                "kHalf: the 8-part 2-CTA blocks, requests before the decode");
  static_assert(!kRf || (kJit && kRows == 1 && !kHalf && !kLate),
                "kRf: the M = 1 blocks, requests at the vector's step otherwise");
  constexpr int kCh = kLean ? 1 : 4;  // MMA accumulator chains
  static_assert(!kQf || kQx, "kQf: FP4 activations converted by pair arithmetic");
  static_assert(!kQx || kQf || (!kJit && !kMx), "the blocks and MXFP4 convert FP4 by kQf only");
  constexpr int kSb = kMx ? 2 : 4;  // scale bytes per row and vector
  static_assert(kParts == 1 || kParts == 2 || kParts == 4 || kParts == 8, "K parts per tile");
  static_assert(kRows == 1 || kRows == 4, "token rows");
  using T = Bf16Tag;
  constexpr int kDepth = kStreamDepth;
  constexpr int kWarps = kStreamWarps;
  constexpr int kTiles = kWarps / kParts;
  constexpr int kNt = 1;  // n8 token tiles per MMA step (two measured slower for 16 rows)
  extern __shared__ __align__(16) uint8_t dsm[];
  __shared__ float red[kStreamRedBytes<kRows> / 4];
  __shared__ int64_t s_claim[2];  // kClaim: group ordinal n's index at [n & 1] (n >= 2)

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int wt = warp % kTiles, wk = warp / kTiles;
  const int vp = p.stream_vp;
  const int64_t groups = (p.n16 + kTiles - 1) / kTiles;
  // The CTA's K range (kRows > 1: gridDim.y ranges of kParts * vp vectors).
  const int ky = kRows == 1 ? 0 : static_cast<int>(blockIdx.y);
  const int64_t vbase = static_cast<int64_t>(ky * kParts + wk) * vp;  // warp's first vector

  // Issue state: the next block of kDepth vectors to request starts at vector iv of group igrp
  // (vp is a multiple of kDepth, so a block never straddles two groups and the vectors of a
  // block sit at immediate offsets from wp).
  int64_t igrp = blockIdx.x;
  int ino = 0;  // kClaim: igrp's ordinal
  // kClaim: the group of ordinal n (claimed ones past barrier n - 2; groups: none).
  auto group_at = [&](int n) -> int64_t {
    return n < kClaimStatic ? int64_t{blockIdx.x} + int64_t{n} * gridDim.x : s_claim[n & 1];
  };
  int iv = 0;
  int nvalid = 0;  // vectors of the current block that exist (0 for a group without this tile)
  const uint8_t* wp = nullptr;
  const uint8_t* sp = nullptr;   // scale bytes of row g at the block
  const uint8_t* sp8 = nullptr;  // row g + 8
  // Vectors of this warp's part that exist (kHalf: within its part; without kHalf a block never
  // crosses the part's end).
  const int64_t lim = kHalf ? min(p.kvec - vbase, int64_t{vp}) : p.kvec - vbase;
  auto set_group = [&]() {
    const int64_t tile = igrp * kTiles + wt;
    nvalid = igrp < groups && tile < p.n16 ? static_cast<int>(min(lim, int64_t{kDepth})) : 0;
    wp = p.wvals + (tile * p.kvec + vbase) * 512 + lane * 16;
    sp = p.wscale + (tile * 16 + g) * p.scale_ld + vbase * kSb;
    sp8 = sp + 8 * p.scale_ld;
  };
  set_group();
  // The scale bytes of rows g / g + 8 of the block being requested (next), and of the block being
  // computed (16-byte aligned: scale_ld and the block's first vector are multiples of 4 x 4).
  uint4 nb0 = make_uint4(0, 0, 0, 0), nb1 = nb0, cb0 = nb0, cb1 = nb0;
  // kLean: byte j = the code of vector j that lane t's splat takes (NVFP4: step t's; MXFP4: atom
  // t / 2's), rows g / g + 8.
  uint32_t cs0 = 0, cs1 = 0;
  // Vector j of the block. Vectors that do not exist are not loaded: their slot keeps an earlier
  // vector of this warp (finite: the ring starts zeroed), whose products with the zero-staged
  // activations past K, or with a tile that is not stored, vanish.
  // kJit: the lane's 8 activations of the block being requested (kQx: NVFP4 bytes and scale in
  // .x / .y, converted when stored), once they exist (xok).
  const uint8_t* const xjq = static_cast<const uint8_t*>(p.x);
  const bool xjq4 = (reinterpret_cast<uintptr_t>(xjq) & 3u) == 0;
  uint4 na = make_uint4(0, 0, 0, 0);
  bool xok = false;
  const StreamQLane xql = kQf ? stream_q8_lane<kMx>(p, xjq, lane) : StreamQLane{};
  auto load_x = [&](int64_t kb) {
    const int64_t k = kb + 8 * lane;
    if constexpr (kQf) {
      uint4 q = make_uint4(0, 0, 0, 0);
      stream_q8_at<kMx>(xql, xjq4, kb, q.x, q.y);
      return q;
    } else {
      return stream_x8(p, static_cast<const uint16_t*>(p.x), k);
    }
  };
  auto issue = [&](uint4& s, int j) {
    if constexpr (kJit) {
      if (j == 0 && xok) na = load_x((vbase + iv) * 64);
    }
    if (j < nvalid) {
      s = ldg_stream(wp + j * 512);
      if (j == 0) {
        if constexpr (kHalf && kMx) {
          const uint32_t* const a = reinterpret_cast<const uint32_t*>(sp);
          const uint32_t* const b = reinterpret_cast<const uint32_t*>(sp8);
          nb0.x = __ldg(a);
          nb1.x = __ldg(b);
          if (nvalid > 2) {
            nb0.y = __ldg(a + 1);
            nb1.y = __ldg(b + 1);
          }
        } else if constexpr (kHalf) {
          const uint2* const a = reinterpret_cast<const uint2*>(sp);
          const uint2* const b = reinterpret_cast<const uint2*>(sp8);
          const uint2 a0 = __ldg(a), b0 = __ldg(b);
          nb0.x = a0.x, nb0.y = a0.y, nb1.x = b0.x, nb1.y = b0.y;
          if (nvalid > 2) {
            const uint2 a1 = __ldg(a + 1), b1 = __ldg(b + 1);
            nb0.z = a1.x, nb0.w = a1.y, nb1.z = b1.x, nb1.w = b1.y;
          }
        } else if constexpr (kMx) {
          const uint2 a = __ldg(reinterpret_cast<const uint2*>(sp));
          const uint2 b = __ldg(reinterpret_cast<const uint2*>(sp8));
          nb0 = make_uint4(a.x, a.y, 0, 0);
          nb1 = make_uint4(b.x, b.y, 0, 0);
        } else {
          nb0 = __ldg(reinterpret_cast<const uint4*>(sp));
          nb1 = __ldg(reinterpret_cast<const uint4*>(sp8));
        }
      }
    }
  };
  auto advance = [&]() {
    wp += kDepth * 512;
    sp += kDepth * kSb;
    sp8 += kDepth * kSb;
    iv += kDepth;
    if (kHalf ? iv >= vp : iv == vp) {
      iv = 0;
      if constexpr (kClaim)
        igrp = group_at(++ino);
      else
        igrp += gridDim.x;
      set_group();
      // This warp's last weight loads are out (igrp only grows): let the next call's CTAs take
      // the slots that free up and request their first weights during this call's tail (their
      // griddep_wait still waits for this grid's completion and its stores).
      if (p.stream_trig && igrp >= groups && igrp < groups + gridDim.x) griddep_launch_dependents();
    } else {
      nvalid = nvalid > 0 ? static_cast<int>(min(lim - iv, int64_t{kDepth})) : 0;
    }
  };

  uint4 ring[kDepth];
#pragma unroll
  for (int j = 0; j < kDepth; ++j) {
    ring[j] = make_uint4(0, 0, 0, 0);
    issue(ring[j], j);
  }
  advance();
  griddep_wait();  // the activations (and alpha) belong to earlier kernels

  const int ks = kParts * vp * 64;  // staged activations (K values)
  uint8_t* const xs = dsm;
  if constexpr (kJit) {
    xok = true;
    na = load_x(vbase * 64);  // block 0 of the first group (requested before the wait)
  }

  // Stage the activations of the whole (padded) K in lane order; zeros past K. Each thread's
  // loads go out in batches of kBatch 16-byte chunks before any store, so the staging costs one
  // L2 round trip per batch (K <= 16384: one; 8192 with the 3-CTA cap), not one per chunk.
  if constexpr (kRows > 1) {
    // kRows token rows of the CTA's K range [ky * ks, ky * ks + ks); rows past M and K values
    // past K are zero (their products vanish; the rows' outputs are not stored).
    constexpr int kBatch = 8;
    constexpr int kT = kWarps * 32;
    const uint16_t* x = static_cast<const uint16_t*>(p.x);
    const int cpr = ks / 8;  // 16-byte chunks per row
    const int64_t k0 = static_cast<int64_t>(ky) * ks;
    for (int c0 = threadIdx.x; c0 < kRows * cpr; c0 += kT * kBatch) {
      uint4 v[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int c = c0 + b * kT;
        v[b] = make_uint4(0, 0, 0, 0);
        if (c >= kRows * cpr) continue;
        const int r = c / cpr;
        const int64_t k = k0 + 8 * (c - r * cpr);
        if (r >= p.M || k >= p.K) continue;
        const uint16_t* xr = x + r * p.ldx + k;
        if (p.x_vec16 && k + 8 <= p.K) {
          v[b] = __ldg(reinterpret_cast<const uint4*>(xr));
        } else {
          uint32_t pr[4] = {0, 0, 0, 0};
#pragma unroll
          for (int i = 0; i < 8; ++i) {
            if (k + i >= p.K) break;
            pr[i / 2] |= static_cast<uint32_t>(xr[i]) << (16 * (i % 2));
          }
          v[b] = make_uint4(pr[0], pr[1], pr[2], pr[3]);
        }
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int c = c0 + b * kT;
        if (c >= kRows * cpr) continue;
        const int r = c / cpr;
        // The chunk's 4 pairs belong to lanes t = 0..3 of one (vector, step, lo / hi).
        uint32_t* const d =
            reinterpret_cast<uint32_t*>(xs + stream_xpos_rows<kRows>(8 * (c - r * cpr), r) * 2);
        d[0] = v[b].x;
        d[4] = v[b].y;
        d[8] = v[b].z;
        d[12] = v[b].w;
      }
    }
  } else if constexpr (!kJit) {
    constexpr int kBatch = kOcc == 3 ? 4 : 8;  // within the 3-CTA register cap
    constexpr int kT = kWarps * 32;
    const uint16_t* x = static_cast<const uint16_t*>(p.x);
    const bool fast = p.x_vec16 && ks <= p.K;  // every chunk a whole aligned 16-byte load
    // kQx: the 4 packed bytes and the UE4M3 scale (128x4-swizzled, row 0) of each chunk (K is a
    // multiple of 16, so a chunk is whole or past K), converted as the pre-pass would. (The
    // stream_x8 / stream_q8 loads of kJit written out: session 19 measured the defaults with
    // this code; the helpers inlined here changed their register allocation.)
    const uint8_t* const xq = static_cast<const uint8_t*>(p.x);
    const bool xq4 = (reinterpret_cast<uintptr_t>(xq) & 3u) == 0;
    for (int c0 = threadIdx.x; c0 < ks / 8; c0 += kT * kBatch) {
      uint4 v[kBatch];
      uint32_t qw[kQx ? kBatch : 1], qs[kQx ? kBatch : 1];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int k = 8 * (c0 + b * kT);
        v[b] = make_uint4(0, 0, 0, 0);
        if constexpr (kQf) {
          // kb = k - 8 lane: the chunk's block start (threads of a warp take 256 consecutive K).
          stream_q8_at<kMx>(xql, xq4, k - 8 * lane, qw[b], qs[b]);
          continue;
        } else if constexpr (kQx) {
          qw[b] = qs[b] = 0;
          if (k >= p.K) continue;
          if (xq4) {
            qw[b] = __ldg(reinterpret_cast<const uint32_t*>(xq + k / 2));
          } else {
#pragma unroll
            for (int i = 0; i < 4; ++i) qw[b] |= static_cast<uint32_t>(xq[k / 2 + i]) << (8 * i);
          }
          qs[b] = p.xq_scale[fmt::swizzled_scale_offset(0, k / 16, p.K / 16)];
          continue;
        }
        if (k >= ks) continue;
        if (fast || (p.x_vec16 && k + 8 <= p.K)) {
          v[b] = __ldg(reinterpret_cast<const uint4*>(x + k));
        } else {
          uint32_t pr[4] = {0, 0, 0, 0};
#pragma unroll
          for (int i = 0; i < 8; ++i) {
            if (k + i >= p.K) break;
            pr[i / 2] |= static_cast<uint32_t>(x[k + i]) << (16 * (i % 2));
          }
          v[b] = make_uint4(pr[0], pr[1], pr[2], pr[3]);
        }
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int k = 8 * (c0 + b * kT);
        if (k >= ks) continue;
        if constexpr (kQf && kMx)
          v[b] = mxfp4x8_bf16(qw[b], qs[b]);
        else if constexpr (kQf)
          v[b] = nvfp4x8_bf16_e7(qw[b], qs[b]);
        else if constexpr (kQx)
          v[b] = nvfp4x8_bf16(qw[b], fmt::ue4m3_to_float(qs[b]));
        // The chunk's 4 pairs belong to lanes t = 0..3 of one (vector, step, lo / hi): lane
        // blocks of 32 bytes.
        uint32_t* const d = reinterpret_cast<uint32_t*>(xs + stream_xpos(k) * 2);
        d[0] = v[b].x;
        d[8] = v[b].y;
        d[16] = v[b].z;
        d[24] = v[b].w;
      }
    }
  }
  if constexpr (!kJit) __syncthreads();

  float mult = p.out_mult;
  if (p.alpha != nullptr) mult *= *p.alpha;
  if constexpr (kQf && !kMx) mult *= 128.f;  // exact: the accumulators hold the products / 2^7

  // Lane (g, t)'s activations: M = 1 the broadcast row (32 bytes per vector); 4 rows (M = 2..4)
  // row g & 3 (16 bytes per half, halves 4 * 64 bytes apart): lanes g and g + 4 read the same row
  // (a broadcast: half the wavefronts of 8 rows), so columns 4..7 repeat tokens 0..3 and are never
  // stored.
  const uint8_t* const xlane = kRows == 1
                                   ? xs + (vbase * 64 + t * 16) * 2
                                   : xs + wk * vp * kRows * 128 + ((g & (kRows - 1)) * 4 + t) * 16;
  uint8_t* const xw = dsm + warp * 512;  // kJit: the warp's block of activations
  int rb = 0;                            // reduction buffer
  // kClaim: the claimed groups start at ordinal kClaimStatic's static index (see kClaim).
  const int64_t claim0 = int64_t{kClaimStatic} * gridDim.x;
  unsigned long long claim_tag = 0;
  if constexpr (kClaim) {
    if (threadIdx.x == 0) {
      asm volatile("mov.u64 %0, %%gridid;" : "=l"(claim_tag));
      claim_tag &= (1ull << 44) - 1;
      if (blockIdx.x == 0) atomicExch(p.s16_flags, claim_tag << 20);
    }
  }
  int cno = 0;  // kClaim: grp's ordinal
  for (int64_t grp = blockIdx.x; grp < groups; grp = kClaim ? group_at(++cno) : grp + gridDim.x) {
    unsigned long long claim = 0;
    bool claiming = false;
    if constexpr (kClaim) {
      // Ordinal cno + 2 exists only behind a group at cno + 1.
      claiming = threadIdx.x == 0 && cno + 2 >= kClaimStatic && group_at(cno + 1) < groups;
      if (claiming) claim = atomicAdd(p.s16_flags, 1ull);
    }
    float acc[kNt][kCh][4];
#pragma unroll
    for (int n = 0; n < kNt; ++n)
#pragma unroll
      for (int s = 0; s < kCh; ++s)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[n][s][i] = 0.f;
    const uint8_t* xv = xlane;
    // Vector j of the block being computed (scale bytes cb0 / cb1).
    // req: the slot's next vector is requested here (kHalf requests the block's 4 first, below).
    auto vec = [&](uint4& slot, const int j, const bool req) {
      const uint4 cur = slot;
      if constexpr (!kLate) {
        if (req) issue(slot, j);
      }
      uint4 xa[kNt], xb[kNt];
#pragma unroll
      for (int n = 0; n < kNt; ++n) {
        if constexpr (kRows == 1) {
          xa[n] = *reinterpret_cast<const uint4*>(xv);
          xb[n] = *reinterpret_cast<const uint4*>(xv + 16);
        } else {
          xa[n] = *reinterpret_cast<const uint4*>(xv + n * 8 * 64);
          xb[n] = *reinterpret_cast<const uint4*>(xv + kRows * 64 + n * 8 * 64);
        }
      }
      xv += kRows * 128;
      const uint32_t wg = kMx      ? (j < 2 ? cb0.x : cb0.y)
                          : j == 0 ? cb0.x
                          : j == 1 ? cb0.y
                          : j == 2 ? cb0.z
                                   : cb0.w;
      const uint32_t wg8 = kMx      ? (j < 2 ? cb1.x : cb1.y)
                           : j == 0 ? cb1.x
                           : j == 1 ? cb1.y
                           : j == 2 ? cb1.z
                                    : cb1.w;
      // (row g, row g + 8) scale * 2^119 of each k16 step, as BF16 pairs.
      __nv_bfloat162 sv[4];
      if constexpr (kMxS) {
        // Atom a's codes of rows g / g + 8 to the halves' low bytes; (e + 119) << 7 per half is
        // e8m0_bf16_splat_free's 2^(e - 8) for every code <= 135 (a fold-free weight's), and
        // sets bit 15 of a half only for e = 255, whose half then becomes NaN.
#pragma unroll
        for (int a = 0; a < 2; ++a) {
          const uint32_t b = 2 * (j & 1) + a;  // a constant after unrolling
          const uint32_t pr = prmt(wg, wg8, b | ((b + 4) << 8));
          uint32_t v = (pr & 0x00FF00FFu) * 128u + 0x3B803B80u;
          v = lop3<kLutAndOr>(prmt(v, 0, 0xBB99u), 0x7FC07FC0u, v);
          sv[2 * a] = sv[2 * a + 1] = *reinterpret_cast<const __nv_bfloat162*>(&v);
        }
      } else {
        uint32_t v;
        if constexpr (kMx) {
          const int sh = 8 * (2 * (j & 1) + (t >> 1));  // atom t / 2 of vector j
          const uint32_t e0 = kLean ? (cs0 >> (8 * j)) & 0xFFu : (wg >> sh) & 0xFFu;
          const uint32_t e1 = kLean ? (cs1 >> (8 * j)) & 0xFFu : (wg8 >> sh) & 0xFFu;
          v = (e8m0_bf16_splat(e0) & 0xFFFFu) | (e8m0_bf16_splat(e1) << 16);
        } else {
          const uint32_t pr = kLean ? prmt(cs0, cs1, j * 0x11u + (4 + j) * 0x1100u)
                                    : prmt(wg, wg8, t * 0x1111u + 0x4400u);  // step t
          const uint32_t bits = (pr << 4) & 0x07F007F0u;
          v = fma2<T>(fma2<T>(bits, 0x7B807B80u /* 2^120 */, kNegZero2<T>()),
                      kFp4Unit2<T>() /* 2^119 */, kNegZero2<T>());
        }
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          const uint32_t vs = __shfl_sync(0xFFFFFFFFu, v, s, 4);
          sv[s] = *reinterpret_cast<const __nv_bfloat162*>(&vs);
        }
      }
      uint32_t af[2][2][4];  // [atom][step][reg]
#pragma unroll
      for (int a = 0; a < 2; ++a)
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          uint32_t bits[4];
          fp4_word_pairs<T>(s ? (a ? cur.w : cur.y) : (a ? cur.z : cur.x), bits);
          if constexpr (kMx && !kMxFree) {
#pragma unroll
            for (int r = 0; r < 4; ++r) bits[r] = fma2<T>(bits[r], kFp4Unit2<T>(), kNegZero2<T>());
          }
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const __nv_bfloat162 m =
                __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&bits[r]),
                        (r & 1) ? __high2bfloat162(sv[2 * a + s]) : __low2bfloat162(sv[2 * a + s]));
            af[a][s][r] = *reinterpret_cast<const uint32_t*>(&m);
          }
        }
      if constexpr (kLate) issue(slot, j);
#pragma unroll
      for (int n = 0; n < kNt; ++n) {
        mma16816<T>(acc[n][0], af[0][0], xa[n].x, xa[n].y);
        mma16816<T>(acc[n][1 % kCh], af[0][1], xa[n].z, xa[n].w);
        mma16816<T>(acc[n][2 % kCh], af[1][0], xb[n].x, xb[n].y);
        mma16816<T>(acc[n][3 % kCh], af[1][1], xb[n].z, xb[n].w);
      }
    };
    for (int v0 = 0; v0 < vp; v0 += kDepth) {
      if constexpr (kLean && kMx && !kMxS) {
        const uint32_t sel = (t >> 1) * 0x1111u + 0x6420u;  // byte 2j + t / 2 of .x, .y
        cs0 = prmt(nb0.x, nb0.y, sel);
        cs1 = prmt(nb1.x, nb1.y, sel);
      } else if constexpr (kLean && !kMx) {
        const uint32_t sel = t | ((t + 4) << 4);  // byte t of two words
        cs0 = prmt(prmt(nb0.x, nb0.y, sel), prmt(nb0.z, nb0.w, sel), 0x5410u);
        cs1 = prmt(prmt(nb1.x, nb1.y, sel), prmt(nb1.z, nb1.w, sel), 0x5410u);
      } else {
        cb0 = nb0;
        cb1 = nb1;
      }
      // kRf: the block's next requests (issue(0) also requests the next block's activations
      // into na) go out before this block's activations are stored, which waits for their load.
      uint4 xcur = na;
      uint4 rcur[kRf ? kDepth : 1];
      if constexpr (kRf) {
#pragma unroll
        for (int j = 0; j < kDepth; ++j) {
          rcur[j] = ring[j];
          issue(ring[j], j);
        }
      }
      if constexpr (kJit) {
        // The block's activations into the warp's buffer in lane order (the staging's layout),
        // after every lane has read the previous block's.
        __syncwarp();
        if constexpr (kQf && kMx)
          xcur = mxfp4x8_bf16(xcur.x, xcur.y);
        else if constexpr (kQf)
          xcur = nvfp4x8_bf16_e7(xcur.x, xcur.y);
        else if constexpr (kQx)
          xcur = nvfp4x8_bf16(xcur.x, fmt::ue4m3_to_float(xcur.y));
        uint32_t* const d = reinterpret_cast<uint32_t*>(xw + stream_xpos(8 * lane) * 2);
        d[0] = xcur.x;
        d[8] = xcur.y;
        d[16] = xcur.z;
        d[24] = xcur.w;
        __syncwarp();
        xv = xw + t * 32;
      }
      if constexpr (kHalf) {
        // All 4 slots' next requests ahead of the block's math (where ptxas puts the default's),
        // then vectors 2 / 3 only in a full block: round 101's first form requested slots 2 / 3
        // inside the skipped branch's arms, i.e. after vectors 0 / 1's math (2048x7168 4.47 ->
        // 5.58 us, long scoreboard 0.40 -> 1.55 per issue).
        uint4 cur[kDepth];
#pragma unroll
        for (int j = 0; j < kDepth; ++j) {
          cur[j] = ring[j];
          issue(ring[j], j);
        }
#pragma unroll
        for (int j = 0; j < kDepth; ++j)
          if (j < 2 || v0 + 2 < vp) vec(cur[j], j, false);
      } else if constexpr (kRf) {
#pragma unroll
        for (int j = 0; j < kDepth; ++j) vec(rcur[j], j, false);
      } else {
#pragma unroll
        for (int j = 0; j < kDepth; ++j) vec(ring[j], j, true);
      }
      advance();
    }
    if constexpr (kRows > 1) {
      // Lane (g, t) of token tile n: c0 / c1 = row g, tokens 8n + 2t / + 1; c2 / c3 = row g + 8.
      float o[kNt][4];
#pragma unroll
      for (int n = 0; n < kNt; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          o[n][i] = (acc[n][0][i] + acc[n][1][i]) + (acc[n][2][i] + acc[n][3][i]);
      if constexpr (kParts > 1) {
        float* const rw = red + (rb * kWarps + warp) * (kNt * 4) * 32 + lane;
#pragma unroll
        for (int n = 0; n < kNt; ++n)
#pragma unroll
          for (int i = 0; i < 4; ++i) rw[(n * 4 + i) * 32] = o[n][i];
        __syncthreads();  // one per group: see the M = 1 reduction below
        if (wk == 0) {
#pragma unroll
          for (int k = 1; k < kParts; ++k) {
            const float* const rr = red + (rb * kWarps + wt + k * kTiles) * (kNt * 4) * 32 + lane;
#pragma unroll
            for (int n = 0; n < kNt; ++n)
#pragma unroll
              for (int i = 0; i < 4; ++i) o[n][i] += rr[(n * 4 + i) * 32];
          }
        }
        rb ^= 1;
      }
      const int64_t tile = grp * kTiles + wt;
      if (wk == 0 && tile < p.n16) stream_store_tile<kNt>(p, o, tile, ky, mult, g, t);
      continue;
    }
    // Every column holds the row sums: c0 = row g, c2 = row g + 8.
    float r0 = acc[0][0][0], r1 = acc[0][0][2];
    if constexpr (kCh == 4) {
      r0 = (acc[0][0][0] + acc[0][1][0]) + (acc[0][2][0] + acc[0][3][0]);
      r1 = (acc[0][0][2] + acc[0][1][2]) + (acc[0][2][2] + acc[0][3][2]);
    }
    if constexpr (kParts > 1) {
      auto& red1 = *reinterpret_cast<float(*)[2][kWarps][16]>(red);
      if (t == 0) {
        red1[rb][warp][g] = r0;
        red1[rb][warp][g + 8] = r1;
      }
      if constexpr (kClaim) {
        if (claiming) {
          while ((claim >> 20) != claim_tag) {
            __nanosleep(64);
            claim = atomicAdd(p.s16_flags, 1ull);
          }
          s_claim[cno & 1] = min(claim0 + static_cast<int64_t>(claim & 0xFFFFFu), groups);
        }
      }
      // One barrier per group: the next group writes the other buffer, and the group after it
      // writes this one only after every reader here has passed the next group's barrier.
      __syncthreads();
      if (wk == 0) {
        r0 = r1 = 0.f;
#pragma unroll
        for (int k = 0; k < kParts; ++k) {
          r0 += red1[rb][wt + k * kTiles][g];
          r1 += red1[rb][wt + k * kTiles][g + 8];
        }
      }
      rb ^= 1;
    }
    const int64_t tile = grp * kTiles + wt;
    if (wk == 0 && t < 2 && tile < p.n16) {
      const int64_t row = tile * 16 + g + 8 * t;
      if (row < p.N) store_out_elem(p, 0, row, t ? r1 : r0, mult);
    }
  }
  griddep_launch_dependents();
}

// ------------------------------------------------------------------------------------------
// M = 5..16 block kernel (session 13, Plan::stream16_tw): a CTA owns 8 x kTw row tiles (128 x kTw
// weight rows) over one K range of p.stream_vp vectors (gridDim.y ranges through fp32 partials +
// linear_reduce_kernel), so the activations it reads from L2 (16 tokens x its K range) are
// 64 / (128 kTw) of the weight bytes it streams, where the persistent 16-row stream kernel (round
// 45, dropped) re-read them for every 16-128 rows. The activations arrive in K chunks of 4
// vectors (256 K, one block of scale bytes) behind the weight ring, three slots of cp.async
// prefetched two chunks ahead, one CTA barrier per chunk (a slot is rewritten only after every
// warp has passed the barrier of the chunk after its last use); no chunk is staged before the
// first weights are requested. Each warp holds kTw tiles on the same K: one ldmatrix.x4 per k16
// step feeds the 2 x kTw MMAs of the kTw decoded tiles (kNt = 2 n8 token tiles at M = 9..16, one
// at M <= 8). Weights: a register ring of kStreamDepth vectors in (vector, tile) order, as in
// the M = 1 kernel. Scale bytes: the 16 bytes of each row for the chunk are staged with the
// activations (one 16-byte cp.async per row) and converted once per CTA into (row g, row g + 8)
// BF16 splat pairs (the M = 1 kernel's arithmetic), which a lane reads as one 16-byte load per
// vector and tile (round 48: per-lane splats, each of the 4 lanes t of a row pair building the
// same ones, ~20 ALU instructions per vector and tile, were slower on 4 of 5 shapes, NVFP4
// W4A16 M = 16 9.08 / 19.08 / 18.96 / 12.34 / 9.36 against 8.76 / 19.15 / 18.17 / 11.91 /
// 9.23 us; 4 tiles per warp 9.44 / 19.35 / 18.75 / 12.35 / 9.66: both removed). Activations and
// raw scales thus land one chunk before their conversion and two before use.
inline constexpr int kS16ChunkV = 4;  ///< 64-K vectors per staged chunk (= scale block)
inline constexpr int kS16Slots = 3;
/// Token row pitch of a staged chunk: 256 BF16 + 16 bytes, so ldmatrix's 8 rows of 16 bytes
/// fall in 8 distinct bank groups (528 = 4 x 128 + 16).
inline constexpr int kS16Pitch = (kS16ChunkV * 64 + 8) * 2;
inline constexpr int kS16ActBytes = 16 * kS16Pitch;
/// A slot: the activations, the raw scale bytes (16 per row), the (row g, row g + 8) BF16 splat
/// pairs built from them ([tile][vector][g][4 steps], 512 B per tile).
/// With kQx the chunk's NVFP4 activations as they arrive: 16 token rows x 128 packed bytes, then
/// 16 x 16 UE4M3 scale bytes.
inline constexpr int kS16QxBytes = 16 * 128 + 16 * 16;
template <int kTw, bool kQx = false>
inline constexpr int kS16SlotBytes = kS16ActBytes + kStreamWarps* kTw * 16 * 16 +
                                     kStreamWarps* kTw * 512 + (kQx ? kS16QxBytes : 0);
template <int kTw, bool kQx = false>
inline constexpr int kS16SmemBytes = kS16Slots* kS16SlotBytes<kTw, kQx>;

/// (row g, row g + 8) UE4M3 scale * 2^119 of k16 step s as a BF16 pair, from the rows' scale
/// words of one vector (see the M = 1 kernel).
__device__ __forceinline__ uint32_t s16_splat(uint32_t wg, uint32_t wg8, int s) {
  const uint32_t pr = prmt(wg, wg8, s | (s << 4) | ((4 + s) << 8) | ((4 + s) << 12));
  const uint32_t bits = (pr << 4) & 0x07F007F0u;
  return fma2<Bf16Tag>(fma2<Bf16Tag>(bits, 0x7B807B80u /* 2^120 */, kNegZero2<Bf16Tag>()),
                       kFp4Unit2<Bf16Tag>() /* 2^119 */, kNegZero2<Bf16Tag>());
}

/// The block kernels' CTA (FP4 linear_stream16_kernel, FP8 linear_stream16_fp8_kernel): its K
/// range of p.stream_vp vectors from blockIdx.y * p.stream_vp (vlim of them exist, nch chunks of
/// kChunkV), its p.stream_tiles tiles from blockIdx.x * p.stream_tiles (the plan's 8 kTw; with
/// fewer the warps past them idle), and per tile j of the warp the address of its first vector
/// (this lane's 16 bytes) and how many of its vectors exist (lim, 0: no tile).
template <int kTw>
struct S16Range {
  int64_t vbase, row0, tile0;
  int tpc, nch;
  const uint8_t* wp[kTw];
  int lim[kTw];
};
template <int kTw, int kChunkV>
__device__ __forceinline__ S16Range<kTw> s16_range(const LinearParams& p, int warp, int lane) {
  S16Range<kTw> r;
  const int vp = p.stream_vp;
  r.vbase = static_cast<int64_t>(blockIdx.y) * vp;
  const int tpc = p.stream_tiles;
  r.tpc = tpc;
  r.row0 = static_cast<int64_t>(blockIdx.x) * tpc * 16;
  r.tile0 = r.row0 / 16 + warp * kTw;
  const int64_t vrem = p.kvec - r.vbase;
  const int vlim = vrem <= 0 ? 0 : vrem < vp ? static_cast<int>(vrem) : vp;
  r.nch = (vlim + kChunkV - 1) / kChunkV;
#pragma unroll
  for (int j = 0; j < kTw; ++j) {
    const int64_t tile = r.tile0 + j;
    r.lim[j] = tile < p.n16 && warp * kTw + j < tpc ? vlim : 0;
    r.wp[j] = p.wvals + (tile * p.kvec + r.vbase) * 512 + lane * 16;
  }
  return r;
}
/// kW16 (the staged-once kernel's 16 warps): half h's part of the CTA's range, its vectors [h vh,
/// (h + 1) vh) with vh = p.stream_vp / 2 (whole chunks), capped by what exists.
template <bool kW16, int kTw>
__device__ __forceinline__ S16Range<kTw> s16_half(S16Range<kTw> r, const LinearParams& p,
                                                  int half) {
  if constexpr (kW16) {
    const int vh = p.stream_vp / 2, c0 = half * (vh / kS16ChunkV);
    r.nch = max(0, min(r.nch - c0, vh / kS16ChunkV));
    r.vbase += c0 * kS16ChunkV;
#pragma unroll
    for (int j = 0; j < kTw; ++j) {
      r.lim[j] = max(0, min(r.lim[j] - c0 * kS16ChunkV, vh));
      r.wp[j] += static_cast<int64_t>(c0) * kS16ChunkV * 512;
    }
  }
  return r;
}
/// Ring slot q holds vector q / kTw of tile q % kTw (then every kDepth later). Vectors that do
/// not exist are not loaded: the slot keeps a finite earlier vector (the ring starts zeroed), whose
/// products with the activations staged as zeros past K (FP8) or with the scales staged as zeros
/// (FP4) vanish.
template <int kTw, int kDepth>
__device__ __forceinline__ void s16_ring_fill(uint4 (&ring)[kDepth], const S16Range<kTw>& r) {
#pragma unroll
  for (int q = 0; q < kDepth; ++q) {
    ring[q] = make_uint4(0, 0, 0, 0);
    if (q / kTw < r.lim[q % kTw]) ring[q] = ldg_stream(r.wp[q % kTw] + (q / kTw) * 512);
  }
}

/// One vector of one tile in the block kernels: the lane's 4 FP4 words (k16 steps 0..3) decoded,
/// times the steps' (row g, row g + 8) splat pairs (kFold: MXFP4's 2^119 first), into the MMAs
/// of kNt n8 token tiles whose B fragments b[step] came from ldmatrix.
template <int kNt, bool kFold>
__device__ __forceinline__ void s16_vector(float (&acc)[kNt][4], const uint4 cur, const uint4 q4,
                                           const uint32_t (&b)[4][4]) {
  using T = Bf16Tag;
  const uint32_t svp[4] = {q4.x, q4.y, q4.z, q4.w};
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const __nv_bfloat162 sv = *reinterpret_cast<const __nv_bfloat162*>(&svp[s]);
    uint32_t wb[4], af[4];
    fp4_word_pairs<T>(s == 0 ? cur.x : s == 1 ? cur.y : s == 2 ? cur.z : cur.w, wb);
    if constexpr (kFold) {
#pragma unroll
      for (int r = 0; r < 4; ++r) wb[r] = fma2<T>(wb[r], kFp4Unit2<T>(), kNegZero2<T>());
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const __nv_bfloat162 m = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&wb[r]),
                                       (r & 1) ? __high2bfloat162(sv) : __low2bfloat162(sv));
      af[r] = *reinterpret_cast<const uint32_t*>(&m);
    }
    mma16816<T>(acc[0], af, b[s][0], b[s][1]);
    if constexpr (kNt == 2) mma16816<T>(acc[1], af, b[s][2], b[s][3]);
  }
}

/// One 64-K vector of both of a warp's tiles in the block kernels (called with jj, its position
/// in a block of kS16ChunkV, a compile-time constant of an unrolled loop): the activations' B
/// fragments by ldmatrix at xv (this lane's row address at the vector), then per tile j its ring
/// slot consumed and refilled with vector vn of the tile (where it exists), its splats at
/// spv + j * spl_tile, the decode and the MMAs.
template <int kTw, int kNt, bool kFold, int kDepth>
__device__ __forceinline__ void s16_step(float (&acc)[kTw][kNt][4], uint4 (&ring)[kDepth], int jj,
                                         const uint8_t* xv, const uint8_t* spv, int spl_tile,
                                         const S16Range<kTw>& cr, int vn) {
  uint32_t b[4][4];
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    if constexpr (kNt == 2)
      ldmatrix_x4(b[s], xv + s * 32);
    else
      ldmatrix_x2(b[s], xv + s * 32);
  }
#pragma unroll
  for (int j = 0; j < kTw; ++j) {
    const int q = (jj * kTw + j) % kDepth;
    const uint4 cur = ring[q];
    if (vn < cr.lim[j]) ring[q] = ldg_stream(cr.wp[j] + static_cast<int64_t>(vn) * 512);
    s16_vector<kNt, kFold>(acc[j], cur, *reinterpret_cast<const uint4*>(spv + j * spl_tile), b);
  }
}

/// The 8 BF16 activations of token row tok from K index k into shared memory at d: one 16-byte
/// cp.async where the row allows it, else element by element with zeros past K (and for rows
/// past M, whose outputs are never stored).
__device__ __forceinline__ void s16_stage_x8(const LinearParams& p, const uint16_t* x, int tok,
                                             int64_t k, uint8_t* d) {
  if (tok < p.M && p.x_vec16 && k + 8 <= p.K) {
    s16_cp_async16(d, x + tok * p.ldx + k);
    return;
  }
  uint32_t pr[4] = {0, 0, 0, 0};
  if (tok < p.M) {
    const uint16_t* xr = x + tok * p.ldx + k;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      if (k + e >= p.K) break;
      pr[e / 2] |= static_cast<uint32_t>(xr[e]) << (16 * (e % 2));
    }
  }
  *reinterpret_cast<uint4*>(d) = make_uint4(pr[0], pr[1], pr[2], pr[3]);
}

/// f(acc[j][n][i], j, n, i) over a warp's block-kernel accumulators (compile-time indices).
template <int kTw, int kNt, class F>
__device__ __forceinline__ void s16_each_acc(const float (&acc)[kTw][kNt][4], F f) {
#pragma unroll
  for (int j = 0; j < kTw; ++j)
#pragma unroll
    for (int n = 0; n < kNt; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) f(acc[j][n][i], j, n, i);
}

/// The block kernels' K split summed in a thread-block cluster (session 23, kCl; the split's
/// gridDim.y CTAs of one blockIdx.x are one cluster): each CTA's fp32 tile [token][row of the CTA]
/// in its shared memory (the loop's activations and splats, after a CTA barrier), then
/// cluster_sum_f4 over the M token rows' float4s of 4 rows, each rank storing its share with mult
/// and bias. Row pitch 8 kTw x 16 + 4 floats: a fragment store's lanes (g, t) hit banks 8 t + g
/// (tokens 2t apart), conflict-free, and the rows stay 16-byte aligned.
template <int kTw>
inline constexpr int kS16ClPitch = kStreamWarps* kTw * 16 + 4;
template <int kTw, int kNt>
inline constexpr int kS16ClBytes = 8 * kNt* kS16ClPitch<kTw> * 4;
template <int kTw, int kNt>
__device__ __forceinline__ void s16_cluster_store(const LinearParams& p,
                                                  const float (&acc)[kTw][kNt][4], uint8_t* smem,
                                                  int64_t row0, int tpc, float mult, int warp,
                                                  int g, int t) {
  constexpr int kPitch = kS16ClPitch<kTw>;
  float* const part = reinterpret_cast<float*>(smem);
  __syncthreads();  // every warp is past its last read of the activations and splats
  s16_each_acc(acc, [&](float a, int j, int n, int i) {
    part[(8 * n + 2 * t + (i & 1)) * kPitch + (warp * kTw + j) * 16 + g + 8 * (i >> 1)] = a;
  });
  constexpr int kQuads = kStreamWarps * kTw * 4;  // float4s of a token row
  const int rows = tpc * 16;
  cluster_sum_f4(
      reinterpret_cast<const float4*>(part),
      static_cast<int>(p.M < 8 * kNt ? p.M : 8 * kNt) * kQuads,
      [](int e) { return (e / kQuads) * (kPitch / 4) + e % kQuads; },
      [&](int e, float4 v) {
        const int tok = e / kQuads, r = (e % kQuads) * 4;
        const float w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (r + i < rows && row0 + r + i < p.N) store_out_elem(p, tok, row0 + r + i, w[i], mult);
      });
}

/// kMx: MXFP4 weights (E8M0 per 32 K, 8 scale bytes per row and chunk): the splats
/// are 2^(e-127) pairs, applied after the 2^119 that brings the decoded FP4 bits to v * 2^-7
/// (two exact multiplies, as the decode kernel's fold: one with 2^(e-8) would overflow BF16 for
/// scales above 2^8). kMxFree (session 15): 2^(e-8) splats straight onto the decoded bits, no
/// fold (weights whose E8M0 codes are all <= 135; see the M = 1 kernel).
/// kQx: NVFP4 activations (W4A4, p.act_kind kActNvfp4: packed e2m1 + 128x4-swizzled UE4M3)
/// converted to BF16 in the kernel (they land one chunk before their conversion, as the scales),
/// instead of the pre-pass launch before it; the values are the pre-pass's (e2m1 x
/// UE4M3 is exact in BF16).
template <int kTw, int kNt, bool kMx = false, bool kQx = false, bool kMxFree = false>
__global__ void __launch_bounds__(kStreamWarps * 32, 2)
    linear_stream16_kernel(const LinearParams p) {
  static_assert(!kMxFree || kMx, "fold-free splats: MXFP4 only");
  static_assert(kTw == 1 || kTw == 2, "tiles per warp");
  static_assert(kNt == 1 || kNt == 2, "n8 token tiles");
  using T = Bf16Tag;
  constexpr int kDepth = kStreamDepth;
  static_assert((kS16ChunkV * kTw) % kDepth == 0 && kDepth % kTw == 0, "ring order");
  constexpr int kAhead = kDepth / kTw;  // vectors of a tile in flight beyond the current one
  constexpr int kSlot = kS16SlotBytes<kTw, kQx>;
  constexpr int kRawBytes = kStreamWarps * kTw * 16 * 16;
  constexpr int kQxOff = kS16ActBytes + kRawBytes + kStreamWarps * kTw * 512;
  extern __shared__ __align__(16) uint8_t dsm[];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const S16Range<kTw> cr = s16_range<kTw, kS16ChunkV>(p, warp, lane);
  const int64_t vbase = cr.vbase, row0 = cr.row0, tile0 = cr.tile0;
  const int tpc = cr.tpc, nch = cr.nch;
  uint4 ring[kDepth];
  s16_ring_fill(ring, cr);
  griddep_wait();  // the activations (and alpha) belong to earlier kernels

  // Chunk c -> slot c % 3: 16 token rows x 256 K of BF16 (rows past M and K values past K zero)
  // and the 16 scale bytes of each of the CTA's rows (zero past n16 / kvec). Always one commit
  // group, so wait_group 1 at chunk c means chunk c has landed.
  const uint16_t* const x = static_cast<const uint16_t*>(p.x);
  auto stage = [&](int c) {
    if (c < nch) {
      uint8_t* const slot = dsm + (c % kS16Slots) * kSlot;
      const int64_t kc = (vbase + static_cast<int64_t>(c) * kS16ChunkV) * 64;
      if constexpr (kQx) {
        // Threads 0..127: 16 packed bytes (32 values; K % 32 == 0, so all or none past K) of
        // token i / 8; threads 128..191: 4 scale bytes (k blocks 4j..4j+3 of the chunk, one
        // swizzled 4-byte group) of token (i - 128) / 4. Zeros past M / K.
        const uint8_t* const xq = static_cast<const uint8_t*>(p.x);
        uint8_t* const q = slot + kQxOff;
        const int i = threadIdx.x;
        if (i < 128) {
          const int tok = i >> 3, part = i & 7;
          const int64_t k = kc + part * 32;
          uint8_t* const d = q + tok * 128 + part * 16;
          if (tok < p.M && k < p.K) {
            const uint8_t* const src = xq + tok * p.ldx_bytes + k / 2;
            if (p.x_vec16) {
              s16_cp_async16(d, src);
            } else {
              uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
              for (int e = 0; e < 16; ++e)
                w[e / 4] |= static_cast<uint32_t>(src[e]) << (8 * (e % 4));
              *reinterpret_cast<uint4*>(d) = make_uint4(w[0], w[1], w[2], w[3]);
            }
          } else {
            *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
          }
        } else if (i < 192) {
          const int tok = (i - 128) >> 2, grp = (i - 128) & 3;
          const int64_t kb = kc / 16 + grp * 4, cols = p.K / 16;
          uint8_t* const d = q + 16 * 128 + tok * 16 + grp * 4;
          if (tok < p.M && kb < cols) {
            // 4 consecutive k blocks of a row are one aligned 4-byte group of the swizzle (the
            // grid's columns are padded to 4 with zero bytes).
            const uint8_t* const src = p.xq_scale + fmt::swizzled_scale_offset(tok, kb, cols);
            if ((reinterpret_cast<uintptr_t>(src) & 3u) == 0) {
              const uint32_t sa = static_cast<uint32_t>(__cvta_generic_to_shared(d));
              asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(sa), "l"(src));
            } else {
              *reinterpret_cast<uint32_t*>(d) = src[0] | (static_cast<uint32_t>(src[1]) << 8) |
                                                (static_cast<uint32_t>(src[2]) << 16) |
                                                (static_cast<uint32_t>(src[3]) << 24);
            }
          } else {
            *reinterpret_cast<uint32_t*>(d) = 0;
          }
        }
      }
#pragma unroll
      for (int i0 = 0; i0 < (kQx ? 0 : 16 * 32); i0 += kStreamWarps * 32) {
        const int i = i0 + threadIdx.x;
        const int tok = i >> 5, kk = (i & 31) * 8;
        s16_stage_x8(p, x, tok, kc + kk, slot + tok * kS16Pitch + kk * 2);
      }
      uint8_t* const sd = slot + kS16ActBytes;
      const int64_t v0 = vbase + static_cast<int64_t>(c) * kS16ChunkV;
#pragma unroll
      for (int i0 = 0; i0 < kStreamWarps * kTw * 16; i0 += kStreamWarps * 32) {
        const int i = i0 + threadIdx.x;
        if (kStreamWarps * kTw * 16 < kStreamWarps * 32 && i >= kStreamWarps * kTw * 16) break;
        const int64_t row = i < tpc * 16 ? row0 + i : p.n16 * 16;  // past the CTA: zeros
        if constexpr (kMx) {
          // 8 bytes (2 E8M0 per vector); the row's other 8 staged bytes are never read.
          if (row < p.n16 * 16 && v0 < p.kvec) {
            const uint32_t sa = static_cast<uint32_t>(__cvta_generic_to_shared(sd + i * 16));
            asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(sa),
                         "l"(p.wscale + row * p.scale_ld + v0 * 2));
          } else {
            *reinterpret_cast<uint2*>(sd + i * 16) = make_uint2(0, 0);
          }
        } else {
          if (row < p.n16 * 16 && v0 < p.kvec)
            s16_cp_async16(sd + i * 16, p.wscale + row * p.scale_ld + v0 * 4);
          else
            *reinterpret_cast<uint4*>(sd + i * 16) = make_uint4(0, 0, 0, 0);
        }
      }
    }
    asm volatile("cp.async.commit_group;");
  };
  stage(0);
  stage(1);
  // Chunk c's splat pairs, [tile][vector][g][step] (a lane's 4 steps of one vector are one
  // 16-byte load; a quarter-warp's 8 rows g read 128 contiguous bytes).
  auto convert = [&](int c) {
    uint8_t* const slot = dsm + (c % kS16Slots) * kSlot;
    if constexpr (kQx) {
      // 8 values (one 16-byte chunk of a staged row) per thread and pass: v * s in BF16, exact.
      // Values past K are zero whatever their staged scale byte: a 4-byte swizzle group that
      // straddles K / 16 carries the caller's padding bytes, which may hold a NaN code.
      const uint8_t* const q = slot + kQxOff;
      const int64_t kc = (vbase + static_cast<int64_t>(c) * kS16ChunkV) * 64;
#pragma unroll
      for (int i0 = 0; i0 < 16 * 32; i0 += kStreamWarps * 32) {
        const int i = i0 + threadIdx.x;
        const int tok = i >> 5, kk = (i & 31) * 8;
        const bool in_k = kc + kk < p.K;
        const uint32_t w = in_k ? *reinterpret_cast<const uint32_t*>(q + tok * 128 + kk / 2) : 0u;
        const float sc = in_k ? fmt::ue4m3_to_float(q[16 * 128 + tok * 16 + kk / 16]) : 0.f;
        *reinterpret_cast<uint4*>(slot + tok * kS16Pitch + kk * 2) = nvfp4x8_bf16(w, sc);
      }
    }
    const uint8_t* const raw = slot + kS16ActBytes;
    uint8_t* const spl = slot + kS16ActBytes + kRawBytes;
#pragma unroll
    for (int e0 = 0; e0 < kStreamWarps * kTw * 32; e0 += kStreamWarps * 32) {
      const int e = e0 + threadIdx.x;
      const int lt = e >> 5, jj = (e >> 3) & 3, gg = e & 7;
      if constexpr (kMx) {
        // (row g, row g + 8) 2^(e-127) of the vector's atoms 0 / 1, repeated for its steps.
        const uint8_t* const r = raw + (lt * 16 + gg) * 16 + jj * 2;
        const uint32_t e0 = r[0], e1 = r[1], f0 = r[128], f1 = r[129];
        auto splat = [](uint32_t e) {
          return kMxFree ? e8m0_bf16_splat_free(e) : e8m0_bf16_splat(e);
        };
        const uint32_t a0 = (splat(e0) & 0xFFFFu) | (splat(f0) << 16);
        const uint32_t a1 = (splat(e1) & 0xFFFFu) | (splat(f1) << 16);
        *reinterpret_cast<uint4*>(spl + lt * 512 + jj * 128 + gg * 16) = make_uint4(a0, a0, a1, a1);
      } else {
        const uint8_t* const r = raw + (lt * 16 + gg) * 16 + jj * 4;
        const uint32_t wg = *reinterpret_cast<const uint32_t*>(r);
        const uint32_t wg8 = *reinterpret_cast<const uint32_t*>(r + 128);
        *reinterpret_cast<uint4*>(spl + lt * 512 + jj * 128 + gg * 16) =
            make_uint4(s16_splat(wg, wg8, 0), s16_splat(wg, wg8, 1), s16_splat(wg, wg8, 2),
                       s16_splat(wg, wg8, 3));
      }
    }
  };
  if (nch > 0) {
    asm volatile("cp.async.wait_group 1;" ::: "memory");
    __syncthreads();
    convert(0);
  }

  float acc[kTw][kNt][4];
#pragma unroll
  for (int j = 0; j < kTw; ++j)
#pragma unroll
    for (int n = 0; n < kNt; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[j][n][i] = 0.f;
  // ldmatrix rows: lane l addresses row l % 8 of matrix l / 8 = (token tile, k half): matrices
  // (tokens 0-7, k 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15) of a k16 step, which are the B
  // fragments (b0, b1) of token tiles 0 and 1 (x2 at kNt = 1: lanes 0-15).
  const int xoff = (((lane >> 4) & 1) * 8 + (lane & 7)) * kS16Pitch + ((lane >> 3) & 1) * 16;
  for (int c = 0; c < nch; ++c) {
    // The CTA's last chunk: its weight loads are issued a chunk ahead (see the M = 1 kernel).
    if (p.stream_trig && c + 1 == nch) griddep_launch_dependents();
    // Chunk c + 1 must have landed too (it is converted in this iteration).
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    stage(c + 2);
    if (c + 1 < nch) convert(c + 1);
    const uint8_t* const slot = dsm + (c % kS16Slots) * kSlot;
    const uint8_t* const xa = slot + xoff;
    const uint8_t* const spl = slot + kS16ActBytes + kRawBytes + warp * kTw * 512 + g * 16;
#pragma unroll
    for (int jj = 0; jj < kS16ChunkV; ++jj)
      s16_step<kTw, kNt, kMx && !kMxFree>(acc, ring, jj, xa + jj * 128, spl + jj * 128, 512, cr,
                                          c * kS16ChunkV + jj + kAhead);
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");

  float mult = p.out_mult;
  if (p.alpha != nullptr) mult *= *p.alpha;
#pragma unroll
  for (int j = 0; j < kTw; ++j) {
    const int64_t tile = tile0 + j;
    if (tile >= p.n16 || warp * kTw + j >= tpc) continue;
    stream_store_tile<kNt>(p, acc[j], tile, static_cast<int64_t>(blockIdx.y), mult, g, t);
  }
  griddep_launch_dependents();
}

// ---------------------------------------------------------------------------------------------
// The block kernel with its K range staged once (session 17, default where vp <= 16,
// Plan::stream16_once; B12X_GEMM_STREAM16_ONCE=0 keeps the chunked kernel above): Nsight Compute
// and the SASS put the chunked kernel at ~120 issued instructions per 512-byte vector and tile
// against ~64 for the vector's own work (decode, splats, 8 MMAs, its loads): the per-chunk
// staging, splat conversion, barrier and slot arithmetic, and a prologue amortized over 4 chunks
// (round 64, 14336x4096 M = 16: 26 % of the stall samples in the prologue's first DRAM round
// trip, 17 % in the per-chunk work, 50 % in the MMA loop). Here each CTA stages its 16 token rows
// x vp vectors once (vp <= 16, lin::kS16OnceMaxVp: 33 KB) and each warp converts its own tiles'
// scale bytes into splat pairs once ([tile][vector][g][step]; the bytes requested with the
// weight ring, before griddep_wait), so the loop over the K range (~73 SASS per vector and tile)
// has no CTA barrier, no staging and no slot rotation. Round 65, NVFP4 W4A16 M = 16: 5-8 % under
// the chunked kernel on the five shapes.
/// Token row pitch: vp x 64 BF16 + 16 bytes (a multiple of 128 plus 16: conflict-free ldmatrix).
__host__ __device__ constexpr int s16_once_pitch(int vp) {
  return vp * 128 + 16;
}
/// Dynamic shared memory: the activations (16 rows), then per warp tw x vp x 128 B of splats.
__host__ __device__ constexpr int s16_once_smem(int tw, int vp) {
  return 16 * s16_once_pitch(vp) + kStreamWarps * tw * vp * 128;
}

/// kQa (session 24, lin::kS16VarQa): W4A4's FP4 activations (the weights' format: NVFP4 with
/// 128x4-swizzled UE4M3, kMx MXFP4 with swizzled E8M0) converted to BF16 in the staging instead
/// of the pre-pass launch: each thread loads whole 32-value blocks (16 bytes + their scale bytes)
/// after griddep_wait, builds its warp's splats while they land, then stores their BF16 values.
/// NVFP4 by pair arithmetic (nvfp4x8_bf16_e7: the values times 2^-7, the host's out_mult times
/// 2^7; bit-identical outputs), MXFP4 as mxfp4x8_bf16 (the pre-pass's values). Only the token
/// rows the MMAs read (8 kNt) are staged. Session 17 tried the conversion here with the scalar
/// decode and per-value swizzle offsets (round 64: +0.7-2.3 us, the ALU work in the prologue);
/// this one issues ~35 instructions per 8 values.
///
/// kW16 (session 26, SM90 default by kS16W16Rule, lin::kS16VarW16): 16 warps, two K halves of the
/// same 8 x kTw tiles — warps 0..7 the range's first vp / 2 vectors, warps 8..15 the rest
/// (p.stream_vp a multiple of 8, at most lin::kS16OnceMaxVp) — summed in shared memory at the end,
/// so an SM that holds one CTA runs 16 warps where the 8-warp CTA gave the small grids 8 (session
/// 25: 0.50 eligible warps per scheduler at 4096x4096 against M = 1's 0.93). The staging and the
/// splats are the 8-warp kernel's bytes (each warp's splats cover its half), 1 CTA per SM (512 x <=
/// 128 registers).
template <int kTw, int kNt, bool kMx = false, bool kMxFree = false, bool kCl = false,
          bool kQa = false, bool kW16 = false>
__global__ void __launch_bounds__(kStreamWarps * 32 * (kW16 ? 2 : 1), kW16 ? 1 : 2)
    linear_stream16_once_kernel(const LinearParams p) {
  static_assert(!kMxFree || kMx, "fold-free splats: MXFP4 only");
  static_assert(kTw == 1 || kTw == 2, "tiles per warp");
  static_assert(kNt == 1 || kNt == 2, "n8 token tiles");
  static_assert(!(kW16 && kCl), "16 warps: partials only (the cluster sum lost, round 97)");

  constexpr int kDepth = kStreamDepth;
  static_assert(kDepth % kTw == 0 && (kS16ChunkV * kTw) % kDepth == 0, "ring order");
  constexpr int kAhead = kDepth / kTw;  // vectors of a tile in flight beyond the current one
  constexpr int kThreads = kStreamWarps * 32 * (kW16 ? 2 : 1);
  extern __shared__ __align__(16) uint8_t dsm[];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int wt = kW16 ? warp % kStreamWarps : warp;  // its tiles (kW16: both halves the same)
  const int half = kW16 ? warp / kStreamWarps : 0;
  const S16Range<kTw> cr = s16_half<kW16>(s16_range<kTw, kS16ChunkV>(p, wt, lane), p, half);
  const int vp = p.stream_vp, pitch = s16_once_pitch(vp);
  const int vh = kW16 ? vp / 2 : vp;  // this warp's vectors (its splats' extent)
  uint4 ring[kDepth];
  s16_ring_fill(ring, cr);
  // This warp's scale bytes, requested with the ring (weights: no dependence on earlier kernels):
  // task (tile j, row pair g, block b of 4 vectors) reads rows g and g + 8's bytes of the block
  // (16 NVFP4 / 8 MXFP4 each, aligned: scale_ld and vbase are multiples of 4 vectors), at most
  // kTasks per lane (vp <= 16). Tiles that do not exist and blocks past kvec get zero splats, so
  // the ring's stale vectors there contribute nothing.
  constexpr int kTasks = kTw * 8 * (16 / 4) / 32;
  uint8_t* const spw = dsm + 16 * pitch + warp * (kTw * vh * 128);
  const int nb = vh / 4;
  uint4 sw0[kTasks], sw8[kTasks];
#pragma unroll
  for (int u = 0; u < kTasks; ++u) {
    const int task = lane + 32 * u;
    const int b = task % nb, gg = (task / nb) % 8, j = task / (8 * nb);
    const int64_t v0 = cr.vbase + 4 * b;
    sw0[u] = sw8[u] = make_uint4(0, 0, 0, 0);
    if (task >= kTw * 8 * nb || cr.tile0 + j >= p.n16 || wt * kTw + j >= cr.tpc || v0 >= p.kvec)
      continue;
    const uint8_t* const sr =
        p.wscale + ((cr.tile0 + j) * 16 + gg) * p.scale_ld + v0 * (kMx ? 2 : 4);
    if constexpr (kMx) {
      const uint2 a = __ldg(reinterpret_cast<const uint2*>(sr));
      const uint2 c = __ldg(reinterpret_cast<const uint2*>(sr + 8 * p.scale_ld));
      sw0[u] = make_uint4(a.x, a.y, 0, 0);
      sw8[u] = make_uint4(c.x, c.y, 0, 0);
    } else {
      sw0[u] = __ldg(reinterpret_cast<const uint4*>(sr));
      sw8[u] = __ldg(reinterpret_cast<const uint4*>(sr + 8 * p.scale_ld));
    }
  }
  if (threadIdx.x == 0 && (p.reduce_trig & 2)) warm_param_lines(p);
  griddep_wait();  // the activations (and alpha) belong to earlier kernels

  // The CTA's activations: 16 token rows x vp x 64 K from vbase; rows past M, K values past K zero.
  const int64_t k0 = kW16 ? static_cast<int64_t>(blockIdx.y) * vp * 64 : cr.vbase * 64;
  // kQa: task u = token row (8 kNt of them) x 32-value block of the range; its 16 packed bytes
  // and scale bytes (NVFP4 2, MXFP4 1) in registers until the splats are built.
  constexpr int kQRows = 8 * kNt,
                kQTasks = kQa ? kQRows * 2 * 16 / (kStreamWarps * 32) : 1;  // vh <= 16
  uint4 qv[kQTasks];
  uint32_t qsc[kQTasks];
  if constexpr (kQa) {
    const uint8_t* const xq = static_cast<const uint8_t*>(p.x);
#pragma unroll
    for (int u = 0; u < kQTasks; ++u) {
      const int task = threadIdx.x + kThreads * u;
      const int tok = task % kQRows, blk = task / kQRows;
      const int64_t k = k0 + blk * 32;  // K % 32 == 0: a block is whole or past K
      qv[u] = make_uint4(0, 0, 0, 0);
      qsc[u] = 0;
      if (blk >= 2 * vp || tok >= p.M || k >= p.K) continue;
      const uint8_t* const src = xq + tok * p.ldx_bytes + k / 2;
      if (p.x_vec16) {
        qv[u] = __ldg(reinterpret_cast<const uint4*>(src));
      } else {
        uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
        for (int e = 0; e < 16; ++e) w[e / 4] |= static_cast<uint32_t>(src[e]) << (8 * (e % 4));
        qv[u] = make_uint4(w[0], w[1], w[2], w[3]);
      }
      // fmt::swizzled_scale_offset of rows < 32: (c / 4) x 512 + row x 16 + c % 4; NVFP4's two
      // blocks of 16 (c even) are adjacent bytes of one 4-byte group.
      const int64_t c = k / (kMx ? 32 : 16);
      const uint8_t* const sp = p.xq_scale + (c >> 2) * 512 + tok * 16 + (c & 3);
      qsc[u] = kMx ? sp[0] : sp[0] | (static_cast<uint32_t>(sp[1]) << 8);
    }
  } else {
    const uint16_t* const x = static_cast<const uint16_t*>(p.x);
    const int cpr = vp * 8;  // 16-byte chunks per row
    for (int i = threadIdx.x; i < 16 * cpr; i += kThreads) {
      const int tok = i / cpr, kk = (i - tok * cpr) * 8;
      s16_stage_x8(p, x, tok, k0 + kk, dsm + tok * pitch + kk * 2);
    }
    asm volatile("cp.async.commit_group;");
  }

  // This warp's splat pairs while the activations land, from the scale bytes loaded above.
#pragma unroll
  for (int u = 0; u < kTasks; ++u) {
    const int task = lane + 32 * u;
    if (task >= kTw * 8 * nb) break;
    const int b = task % nb, gg = (task / nb) % 8, j = task / (8 * nb);
    const uint32_t r0[4] = {sw0[u].x, sw0[u].y, sw0[u].z, sw0[u].w};
    const uint32_t r8[4] = {sw8[u].x, sw8[u].y, sw8[u].z, sw8[u].w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      uint4 o;
      if constexpr (kMx) {
        // (row g, row g + 8) 2^(e-127) (fold-free: 2^(e-8)) of vector q's atoms 0 / 1.
        const int sh = 16 * (q & 1);
        const uint32_t wg = r0[q >> 1] >> sh, wg8 = r8[q >> 1] >> sh;
        auto splat = [](uint32_t e) {
          return kMxFree ? e8m0_bf16_splat_free(e) : e8m0_bf16_splat(e);
        };
        const uint32_t a0 = (splat(wg & 0xFFu) & 0xFFFFu) | (splat(wg8 & 0xFFu) << 16);
        const uint32_t a1 =
            (splat((wg >> 8) & 0xFFu) & 0xFFFFu) | (splat((wg8 >> 8) & 0xFFu) << 16);
        o = make_uint4(a0, a0, a1, a1);
      } else {
        o = make_uint4(s16_splat(r0[q], r8[q], 0), s16_splat(r0[q], r8[q], 1),
                       s16_splat(r0[q], r8[q], 2), s16_splat(r0[q], r8[q], 3));
      }
      *reinterpret_cast<uint4*>(spw + (j * vh + 4 * b + q) * 128 + gg * 16) = o;
    }
  }
  if constexpr (kQa) {
    // Rows past M get zeros (their columns are never stored, but stay finite).
#pragma unroll
    for (int u = 0; u < kQTasks; ++u) {
      const int task = threadIdx.x + kThreads * u;
      const int tok = task % kQRows, blk = task / kQRows;
      if (blk >= 2 * vp) continue;
      const uint32_t w[4] = {qv[u].x, qv[u].y, qv[u].z, qv[u].w};
      uint4* const d = reinterpret_cast<uint4*>(dsm + tok * pitch + blk * 64);
#pragma unroll
      for (int i = 0; i < 4; ++i)
        d[i] = kMx ? mxfp4x8_bf16(w[i], qsc[u])
                   : nvfp4x8_bf16_e7(w[i], (qsc[u] >> (4 * (i & 2))) & 0xFFu);
    }
  } else {
    asm volatile("cp.async.wait_group 0;" ::: "memory");
  }
  __syncthreads();

  float acc[kTw][kNt][4] = {};
  // ldmatrix rows as in the chunked kernel, over the whole staged range.
  // (kW16: this half's vectors start vh into the staged range.)
  const uint8_t* const xa =
      dsm + (((lane >> 4) & 1) * 8 + (lane & 7)) * pitch + ((lane >> 3) & 1) * 16 + half * vh * 128;
  const uint8_t* const spl = spw + g * 16;
  for (int c = 0; c < cr.nch; ++c) {
    // The last block: its weight loads were issued a block ahead (see the M = 1 kernel).
    if (p.stream_trig && c + 1 == cr.nch) griddep_launch_dependents();
#pragma unroll
    for (int jj = 0; jj < kS16ChunkV; ++jj) {
      const int v = c * kS16ChunkV + jj;
      s16_step<kTw, kNt, kMx && !kMxFree>(acc, ring, jj, xa + v * 128, spl + v * 128, vh * 128, cr,
                                          v + kAhead);
    }
  }

  float mult = p.out_mult;
  if (p.alpha != nullptr) mult *= *p.alpha;
  if constexpr (kW16) {
    // The second half's accumulators through shared memory (lane-minor, conflict-free; 16 KB at
    // kTw 2 / kNt 2, within the staging of vp >= 8), added by the first half in a fixed order.
    float* const red = reinterpret_cast<float*>(dsm);
    constexpr int kAcc = kTw * kNt * 4;
    __syncthreads();  // every warp is past its last read of the activations and splats
    auto slot = [&](int j, int n, int i) {
      return (wt * kAcc + (j * kNt + n) * 4 + i) * 32 + lane;
    };
    if (half == 1) s16_each_acc(acc, [&](float a, int j, int n, int i) { red[slot(j, n, i)] = a; });
    __syncthreads();
    if (half == 1) {
      griddep_launch_dependents();
      return;
    }
    s16_each_acc(acc, [&](float, int j, int n, int i) { acc[j][n][i] += red[slot(j, n, i)]; });
  }
  if constexpr (kCl) {
    s16_cluster_store<kTw, kNt>(p, acc, dsm, cr.row0, cr.tpc, mult, warp, g, t);
  } else {
#pragma unroll
    for (int j = 0; j < kTw; ++j) {
      const int64_t tile = cr.tile0 + j;
      if (tile >= p.n16 || wt * kTw + j >= cr.tpc) continue;
      stream_store_tile<kNt>(p, acc[j], tile, static_cast<int64_t>(blockIdx.y), mult, g, t);
    }
  }
  griddep_launch_dependents();
}

}  // namespace b12x::gemm::lin
