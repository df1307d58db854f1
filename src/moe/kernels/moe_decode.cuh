// The decode stream: the small-M (M * topk <= 128) path of the fused MoE for FP4 weights.
//
// Why a separate path: at decode sizes the op is a weight stream (Qwen3-30B-A3B at M = 1 reads
// 21 MB of expert weights, ~5 us at the H200's 4.4 TB/s) and its time is set by how many bytes
// each SM keeps in flight and by the serial latency of the launch chain, not by math. So:
//
//  * Launches: [Q] quantise x once per route (only for quantised-activation modes) -> [FC1]
//    gated/ReLU2 activation, and the FC2 input quantisation, in the epilogue -> [FC2] with the
//    top-k combine fused. All three use programmatic dependent launch: each kernel is resident
//    and has its weight loads in flight before its predecessor's data is ready (griddepcontrol).
//    There is no routing launch (every CTA sorts the <= 128 ids itself) and no combine launch.
//  * Bytes in flight: each warp owns a ring of cp.async stages (one 128-value K sub-chunk of
//    its 32 or 16 weight rows + the matching activation fragments per stage) and issues every
//    stage's weights before the first wait; with 24 warps per SM that is ~110 KB of weights in
//    flight per SM (~27 KB covers the H200's bandwidth-latency product). Warps never wait for each
//    other inside the K loop (no per-slice __syncthreads: a warp's ring is private).
//  * Parallelism: the FP4 decode math (~0.1 warp instructions per weight) is as expensive as
//    the HBM stream, so every SM needs many warps: FC1 CTAs are (32 rows) x (a group of expert
//    tiles of <= 4 routes each) with 8 warps splitting K, the grid about one wave of 3 CTAs per
//    SM (Qwen3-30B at M = 1: 384 CTAs of one tile; at M = 8 384 CTAs of ~6 tiles, each warp's
//    ring running on across its tiles); FC2 CTAs own 16 output rows for *all* routes (H / 16
//    CTAs, 8 warps taking equal ranges of the (tile, sub-chunk) chunks), so the combine is a
//    fixed-order sum in shared memory: deterministic, no per-route fp32 round trip. From 9 routes
//    up to 4 CTAs may share a row block's tiles and the last one adds their fp32 partials in split
//    order (an atomic counter picks the adder, never the order).
//
// MMA orientation, K permutation and the FP4 fragment decode are those of moe_gemm.cuh.
#pragma once

#include <type_traits>

#include "gemm/kernels/cluster_sum.cuh"
#include "moe/kernels/moe_gemm.cuh"
#include "moe/kernels/smem_handover.cuh"

namespace b12x::moe::dev {

using detail::DecodeArgs;

struct DecodeCfg {
  // Expert tiles hold <= kTileTokens slots (routes) of one expert: the activation fragments of a
  // ring stage are staged for kTileTokens tokens (MMA columns beyond are zero registers), which
  // keeps a stage at 3.3 KB (FC1) / 2.2 KB (FC2). At decode sizes nearly every expert has 1-2
  // routes; an expert with more than 4 routes becomes several tiles (its weights are read again).
  static constexpr int kTileTokens = 4;
  static constexpr int kActBytes = 8 * kTileTokens * 4 * 8;  // 8 steps x tokens x 4 quads x 8 B
  static constexpr int kMaxTokens = detail::kMaxInlineRoutes;
  static constexpr int kQuantThreads = 128;  // [Q]: 8 values per thread
  // FC1: 8 warps = kWM along rows (32 rows each) x 8 / kWM along K, a 2-stage ring per warp
  // that runs on across the CTA's expert tiles; split-K partials and the activated rows of a
  // finished tile go to their own areas (red, ys) so the ring never drains. 64 KB: 3 CTAs
  // (24 warps, ~80 KB of weights in flight) per SM. The wide variant (12 K warps, 94 KB, 2 CTAs
  // per SM) fills the SMs where a launch has only ~2 CTAs per SM of 8 warps (few row blocks x
  // few tiles with a long K: DeepSeek-TP4 at M = 1 has 256 CTAs with 7 sub-chunks per warp).
  static constexpr int kFc1Warps = 8, kFc1Threads = 32 * kFc1Warps, kFc1Stages = 2;
  static constexpr int kFc1WideWarps = 12;
  static constexpr int kFc1Stage = 32 * 64 + 32 * 8 + kActBytes;
  static constexpr int fc1_ring(int warps) { return warps * kFc1Stages * kFc1Stage; }
  static constexpr int fc1_red(int warps) { return warps * 8 * 32 * 4; }  // [warp][8][lane] fp32
  // [group][token][features] fp32: kG groups x kWM row warps x 32 rows <= 256 rows per CTA.
  static constexpr int kFc1Ys = kTileTokens * 8 * 32 * 4;
  static constexpr int fc1_smem(int warps) { return fc1_ring(warps) + fc1_red(warps) + kFc1Ys; }
  // FC2: 16 output rows per CTA; kW warps (8 while the per-warp combine rows fit, else 4) take
  // equal ranges of the CTA's (tile, sub-chunk) chunks. The deep variant (5 stages, one CTA per SM)
  // serves launches with at most one CTA per SM anyway (<= 16 routes): each warp's whole K stream
  // is then in flight.
  static constexpr int kFc2Rows = 16;
  static constexpr int kFc2Stage = kFc2Rows * 64 + kFc2Rows * 8 + kActBytes;
  // The 32-row FC2 CTA (DecodeArgs::fc2_rows, two 16-row MMA tiles per warp like FC1's): the
  // per-sub-chunk costs that do not scale with the rows (activation fragment loads, refill
  // addressing, ring bookkeeping) are shared by twice the weights. Up to kFc2Rows32MaxTokens
  // tokens (its per-warp combine rows are 128 B per token).
  static constexpr int kFc2Rows32MaxTokens = 8;
  static constexpr int fc2_stage(int rows) { return rows * 72 + kActBytes; }
  static constexpr int kFc2WideMaxTokens = 32;
  static constexpr int kFc2Wide2MaxTokens = 64;  // the 2-stage 8-warp CTA (B12X_MOE_FC2_WARPS=8)
  static constexpr int kFc2DeepStages = 5;
  // The 2-stage 8-warp variant (launches whose row blocks alone exceed one wave of 3 CTAs per
  // SM) fits 4 CTAs per SM: DeepSeek-TP4's 448 row blocks run in one wave instead of 1.13.
  static constexpr int fc2_ring(int warps, int stages, int rows = kFc2Rows) {
    return warps * stages * fc2_stage(rows);
  }
  static constexpr int fc2_smem(int warps, int stages, int tokens, int rows = kFc2Rows) {
    return fc2_ring(warps, stages, rows) + warps * tokens * rows * 4;
  }
  static_assert(kFc1Stage % 16 == 0 && kFc2Stage % 16 == 0, "16-byte cp.async destinations");
};
// Static shared memory of the kernels (routing arrays) is below 5 KB.
static_assert(DecodeCfg::fc1_smem(DecodeCfg::kFc1WideWarps) + 5120 <= 101376,
              "SM12x: at most 99 KB of shared memory per block");
static_assert(DecodeCfg::fc2_smem(8, 3, DecodeCfg::kFc2WideMaxTokens) + 5120 <= 101376,
              "SM12x: at most 99 KB of shared memory per block");
static_assert(DecodeCfg::fc2_smem(8, DecodeCfg::kFc2DeepStages, 16) + 5120 <= 101376,
              "SM12x: at most 99 KB of shared memory per block");
static_assert(DecodeCfg::fc2_smem(4, 4, DecodeCfg::kMaxTokens) + 5120 <= 101376,
              "SM12x: at most 99 KB of shared memory per block");
static_assert(DecodeCfg::fc2_smem(8, 3, DecodeCfg::kFc2Rows32MaxTokens, 32) + 5120 <= 101376,
              "SM12x: at most 99 KB of shared memory per block");
static_assert(DecodeCfg::fc2_stage(DecodeCfg::kFc2Rows) == DecodeCfg::kFc2Stage &&
                  DecodeCfg::fc2_stage(32) % 16 == 0,
              "16-byte cp.async destinations");
// The wide-routing variants (RouteSmemT<kMaxStreamRoutes>: below 9 KB static):
// the 8-warp FC1 and the 8-warp (<= 32 tokens) / 4-warp FC2.
static_assert(DecodeCfg::fc1_smem(DecodeCfg::kFc1Warps) + 9216 <= 101376 &&
                  DecodeCfg::fc2_smem(8, 3, DecodeCfg::kFc2WideMaxTokens) + 9216 <= 101376 &&
                  DecodeCfg::fc2_smem(8, 2, DecodeCfg::kFc2Wide2MaxTokens) + 9216 <= 101376 &&
                  DecodeCfg::fc2_smem(4, 4, DecodeCfg::kMaxTokens) + 9216 <= 101376,
              "SM12x: at most 99 KB of shared memory per block");
// decode_route_wide's scratch (counts of kMaxExperts + 1 experts, the bucketed routes) lives in
// the smallest ring of its kernels (the 2-stage 8-warp and the 4-warp FC2).
static_assert((detail::kMaxExperts + 1 + detail::kMaxStreamRoutes) * 4 <=
                      DecodeCfg::fc2_ring(8, 2) &&
                  (detail::kMaxExperts + 1 + detail::kMaxStreamRoutes) * 4 <=
                      DecodeCfg::fc2_ring(4, 4),
              "wide routing scratch fits the ring");

/// Shared-memory state of the decode routing (one per CTA), for launches of up to kRC routes.
/// kRC = kMaxInlineRoutes: one route per thread (decode_route); kMaxStreamRoutes: the routes
/// bucketed by expert (decode_route_wide), with 16-bit slot tables and tiles packed into one word
/// so that three FC1 CTAs (64 KB of ring each) still fit an SM.
template <int kRC>
struct RouteSmemT;
template <>
struct RouteSmemT<detail::kMaxInlineRoutes> {
  static constexpr int kN = detail::kMaxInlineRoutes;
  int key[kN];     // (expert << 7 | route), INT_MAX for absent/invalid
  int sorted[kN];  // keys of the valid routes in slot order
  int sr[kN];      // slot -> route
  int tok[kN];     // slot -> token (route / topk: no division per refill)
  int4 tiles[kN];  // {expert, first slot, slots, 0}
  int warp_heads[kN / 32];
  __device__ __forceinline__ int route(int slot) const { return sr[slot]; }
  __device__ __forceinline__ int token(int slot) const { return tok[slot]; }
  __device__ __forceinline__ int4 tile(int i) const { return tiles[i]; }
};
template <>
struct RouteSmemT<detail::kMaxStreamRoutes> {
  static constexpr int kN = detail::kMaxStreamRoutes;
  static_assert(detail::kMaxExperts <= 4096 && kN <= 1024, "12-bit experts, 10-bit slots");
  uint16_t sr[kN], tok[kN];
  int tiles[kN];  // expert | first slot << 12 | slots << 22
  int warp_tot[32];
  __device__ __forceinline__ int route(int slot) const { return sr[slot]; }
  __device__ __forceinline__ int token(int slot) const { return tok[slot]; }
  __device__ __forceinline__ int4 tile(int i) const {
    const int v = tiles[i];
    return make_int4(v & 0xFFF, (v >> 12) & 0x3FF, v >> 22, 0);
  }
};
using RouteSmem = RouteSmemT<detail::kMaxInlineRoutes>;

/// First index i in [0, n) with sorted[i] >= target (n if none).
__device__ __forceinline__ int lower_bound_key(const int* sorted, int n, int target) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (sorted[mid] < target)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// Routing of the decode regime, identical in every CTA of every decode kernel: slots sorted by
/// expert, then by route index (deterministic); tiles of <= kTileTokens slots of one expert in
/// expert order. Needs blockDim.x >= kMaxInlineRoutes; all threads must call it. Returns the number
/// of tiles. Branch-free ranks (each route counts the smaller keys, 4 per 16-byte shared load),
/// binary searches for the expert runs and a ballot scan for the tile heads keep it at a few
/// hundred instructions: every FC1/FC2 CTA pays it before it can stream weights.
__device__ __forceinline__ int decode_route(const DecodeArgs& a, RouteSmem& rs) {
  constexpr int kTN = DecodeCfg::kTileTokens, kN = detail::kMaxInlineRoutes;
  const int tid = threadIdx.x, lane = tid & 31;
  int key = 0x7FFFFFFF;
  if (tid < a.routes) {
    const int64_t id =
        a.ids64 ? static_cast<const int64_t*>(a.ids)[tid] : static_cast<const int32_t*>(a.ids)[tid];
    if (id >= 0 && id < a.num_experts) key = (static_cast<int>(id) << 7) | tid;
  }
  const bool valid = key != 0x7FFFFFFF;
  if (tid < kN) rs.key[tid] = key;
  __syncthreads();
  if (valid) {
    // Only the live routes' keys can be smaller (the rest are INT_MAX): at M = 1 this is
    // 2 iterations instead of 32.
    int rank = 0;
    const int4* k4 = reinterpret_cast<const int4*>(rs.key);
    const int n4 = (a.routes + 3) >> 2;
#pragma unroll 4
    for (int j = 0; j < n4; ++j) {
      const int4 k = k4[j];
      rank += (k.x < key) + (k.y < key) + (k.z < key) + (k.w < key);
    }
    rs.sorted[rank] = key;
    rs.sr[rank] = tid;
    rs.tok[rank] = tid / a.topk;
  }
  const int nvalid = __syncthreads_count(valid);  // also the barrier for sorted / sr
  bool head = false;
  int e = 0, pos = 0, cnt_e = 0;
  const int p = tid;  // slot
  if (p < nvalid) {
    e = rs.sorted[p] >> 7;
    // First slot of expert e and of expert e + 1 (lower bounds in the sorted keys).
    const int first = lower_bound_key(rs.sorted, nvalid, e << 7);
    const int last = lower_bound_key(rs.sorted, nvalid, (e + 1) << 7);
    pos = p - first;
    cnt_e = last - first;
    head = pos % kTN == 0;
  }
  int before = 0;
  if (tid < kN) {
    const unsigned b = __ballot_sync(0xFFFFFFFFu, head);
    before = __popc(b & ((1u << lane) - 1u));
    if (lane == 0) rs.warp_heads[tid >> 5] = __popc(b);
  }
  __syncthreads();
  int ntiles = 0;
#pragma unroll
  for (int w = 0; w < kN / 32; ++w) {
    if (w < (tid >> 5)) before += rs.warp_heads[w];
    ntiles += rs.warp_heads[w];
  }
  if (head) rs.tiles[before] = make_int4(e, p, min(kTN, cnt_e - pos), 0);
  __syncthreads();
  return ntiles;
}

/// Routing of launches with more than kMaxInlineRoutes routes (up to kMaxStreamRoutes, kT
/// threads): the same slots and tiles as decode_route (slots sorted by expert, then by route;
/// tiles of <= kTileTokens slots in expert order), built in O(routes + experts) instead of one
/// rank over all keys per route (1024 routes: 256 int4 loads per route, every CTA). Per-expert
/// counts by shared atomics, one exclusive scan of (slots | tiles << 16) over the experts, the
/// routes bucketed by expert in arrival order, then each route's rank inside its bucket counted
/// by route index (buckets hold ~topk * M / E routes; deterministic whatever the arrival order).
/// `scr`: (num_experts + 1 + routes) ints of shared scratch, free until the function returns
/// (the callers' ring areas: no copy is in flight yet).
template <int kT>
__device__ __forceinline__ int decode_route_wide(const DecodeArgs& a,
                                                 RouteSmemT<detail::kMaxStreamRoutes>& rs,
                                                 int* scr) {
  constexpr int kN = detail::kMaxStreamRoutes, kPer = kN / kT, kTN = DecodeCfg::kTileTokens;
  static_assert(kN % kT == 0 && kT % 32 == 0 && kT / 32 <= 32, "routes per thread, warp totals");
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int E = a.num_experts;
  int* cnt = scr;             // [E + 1] counts, then exclusive prefixes (slots | tiles << 16)
  int* bucket = scr + E + 1;  // [routes] routes by expert, in arrival order
  for (int i = tid; i <= E; i += kT) cnt[i] = 0;
  __syncthreads();
  int e[kPer], pos[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int r = tid + j * kT;
    e[j] = -1;
    pos[j] = 0;
    if (r < a.routes) {
      const int64_t id =
          a.ids64 ? static_cast<const int64_t*>(a.ids)[r] : static_cast<const int32_t*>(a.ids)[r];
      if (id >= 0 && id < E) e[j] = static_cast<int>(id);
    }
    if (e[j] >= 0) pos[j] = atomicAdd(&cnt[e[j]], 1);
  }
  __syncthreads();
  // Exclusive scan over E + 1 entries (the last, 0, receives the totals): thread tid owns the
  // contiguous range [b0, b1); slots and tiles both stay below 2^16, so the packed sums never
  // carry into each other.
  const int per = (E + kT) / kT;
  const int b0 = min(tid * per, E + 1), b1 = min(b0 + per, E + 1);
  auto packed = [](int c) { return c | ((c + kTN - 1) / kTN) << 16; };
  int sum = 0;
  for (int i = b0; i < b1; ++i) sum += packed(cnt[i]);
  int incl = sum;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int v = __shfl_up_sync(0xFFFFFFFFu, incl, o);
    if (lane >= o) incl += v;
  }
  if (lane == 31) rs.warp_tot[warp] = incl;
  __syncthreads();
  int base = incl - sum;
  for (int w = 0; w < warp; ++w) base += rs.warp_tot[w];
  for (int i = b0; i < b1; ++i) {
    const int c = cnt[i];
    cnt[i] = base;
    base += packed(c);
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kPer; ++j)
    if (e[j] >= 0) bucket[(cnt[e[j]] & 0xFFFF) + pos[j]] = tid + j * kT;
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    if (e[j] < 0) continue;
    const int r = tid + j * kT;
    const int pre = cnt[e[j]], s0 = pre & 0xFFFF, n = (cnt[e[j] + 1] & 0xFFFF) - s0;
    int rank = 0;
    for (int q = 0; q < n; ++q) rank += bucket[s0 + q] < r;
    const int slot = s0 + rank;
    rs.sr[slot] = static_cast<uint16_t>(r);
    rs.tok[slot] = static_cast<uint16_t>(r / a.topk);
    if (rank % kTN == 0)
      rs.tiles[(pre >> 16) + rank / kTN] = e[j] | slot << 12 | min(kTN, n - rank) << 22;
  }
  const int ntiles = cnt[E] >> 16;
  __syncthreads();  // tables complete; the scratch may be reused
  return ntiles;
}

/// The routing of a kT-thread CTA with route capacity kRC (`scr`: its dynamic shared memory).
template <int kRC, int kT>
__device__ __forceinline__ int route_tables(const DecodeArgs& a, RouteSmemT<kRC>& rs, void* scr) {
  if constexpr (kRC == detail::kMaxInlineRoutes) {
    (void)scr;
    return decode_route(a, rs);
  } else {
    return decode_route_wide<kT>(a, rs, static_cast<int*>(scr));
  }
}

/// cp.async with a 32-bit shared destination address (no generic -> shared conversion).
__device__ __forceinline__ void cp_async16_sa(uint32_t sa, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(gmem),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async8_sa(uint32_t sa, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(sa), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async4_sa(uint32_t sa, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(sa), "l"(gmem) : "memory");
}
/// cp.async of 16 bytes from gmem + kOff to shared sa + kOff: the offset is an immediate of the
/// instruction on both sides (no 64-bit address add per copy).
template <int kOff>
__device__ __forceinline__ void cp_async16_off(uint32_t sa, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0+%2], [%1+%2], 16;\n" ::"r"(sa), "l"(gmem), "n"(kOff)
               : "memory");
}
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// One warp's cp.async ring stage: kRows weight rows x 128 K values (64 B each), their block
/// scales (8 B per row; E8M0 rows use the low 4 B) and the activation fragments of up to
/// kTileTokens tokens in [step][token][quad] x 8 B order (moe_gemm.cuh's s_act layout).
template <int kRows>
struct WarpStage {
  static constexpr int kT = DecodeCfg::kTileTokens;
  static constexpr int kScaleOff = kRows * 64;
  static constexpr int kActOff = kRows * 72;
  /// Token whose activation fragments this lane copies (fixed per lane).
  static __device__ __forceinline__ int lane_token(int lane) { return (lane >> 1) % kT; }
  /// K offset (values) of this lane's first activation copy in a sub-chunk: it copies half
  /// lane & 1 of token lane_token(lane) in steps lane / (2 kT) + c * 16 / kT, copy c adding
  /// c * kActCopyK values.
  static __device__ __forceinline__ int lane_act_k(int lane) {
    return 16 * (lane / (2 * kT)) + 8 * (lane & 1);
  }
  static constexpr int kActCopyK = 256 / kT;
  static_assert(kT >= 2 && 16 % kT == 0, "2..16 tokens per tile, a divisor of 16");
  /// This lane's copy sources in one expert tile, built once per tile so that a refill only
  /// adds the sub-chunk offset: the 16-byte quad lane % 4 of weight row lane / 4, scale row
  /// `lane` (lanes < kRows), and its activation source with its K offset folded in (`al`, a
  /// valid address even for an absent token) and the values left in the row from there
  /// (`a_len`, <= 0: nothing to copy), so a refill needs one compare per activation copy.
  struct Src {
    const uint8_t* w;
    const uint8_t* s;
    const uint16_t* al;
    int a_len;
  };
  /// `arow`: the operand row of token lane_token(lane) (nullptr: absent token, zero-filled), K
  /// its valid length (zero-filled beyond), `any_valid` an address for the zero-fill copies.
  static __device__ __forceinline__ Src src(const uint8_t* vrow, const uint8_t* srow,
                                            int64_t vstride, int64_t sstride, const uint16_t* arow,
                                            int lane, int K, const void* any_valid) {
    const uint32_t off = static_cast<uint32_t>(lane >> 2) * static_cast<uint32_t>(vstride) +
                         static_cast<uint32_t>(lane & 3) * 16u;
    const int lk = lane_act_k(lane);
    const bool in = arow != nullptr && lk < K;
    return {vrow + off, srow + static_cast<uint32_t>(lane) * static_cast<uint32_t>(sstride),
            in ? arow + lk : (arow != nullptr ? arow : static_cast<const uint16_t*>(any_valid)),
            arow != nullptr ? K - lk : 0};
  }
  /// Refill of sub-chunk kk into the stage at shared address `sa` (32-bit shared destinations).
  /// Weights: lane copies rows lane / 4 + 8c, quad lane % 4 (4 lanes read 64 contiguous bytes
  /// per instruction) to + 16 lane + 512 c; `step` = 8 rows of the weight matrix in bytes (the
  /// row offsets are 32-bit: a warp's rows span < 4 GB). Scales: row `lane` to + kScaleOff +
  /// 8 lane. Activations: 8 steps x kT tokens x 2 halves of 16 B, copy c to + kActOff + 16 lane
  /// + 512 c, bounded by Src (session 5 rebuilt step, token, half and the row check every
  /// refill: ~75 of FC1's ~430 SASS instructions per sub-chunk were refill, now ~53).
  /// kTR (the BF16-operand UE4M3 kernels of the narrow routing, session 25; FP4 weights are
  /// always chunk-tiled): the strides are the tiles' constants (a chunk's 32 rows: 2 KB of codes,
  /// 32 x 8 / 4 B of scales; `step` 512 B), so the weight copies are one 64-bit address and
  /// immediate offsets instead of a runtime stride product and one 64-bit add per copy (the
  /// last-warp FC1's refill 53 -> 41 SASS instructions; H200 round 93 0.980-0.996x on 29 of 32
  /// M <= 8 rows).
  template <bool kTR = false>
  static __device__ __forceinline__ void issue(uint32_t sa, const Src& s, uint32_t step, int kk,
                                               int scale_kind, int sks, int vks, int lane,
                                               bool weights, bool acts) {
    if constexpr (kTR) {
      if (weights) {
        const uint8_t* v = s.w + static_cast<uint32_t>(kk) * 2048u;
        const uint32_t d = sa + static_cast<uint32_t>(lane) * 16u;
        cp_async16_off<0>(d, v);
        cp_async16_off<512>(d, v);
        if constexpr (kRows == 32) {
          cp_async16_off<1024>(d, v);
          cp_async16_off<1536>(d, v);
        }
        if (lane < kRows) {
          const uint32_t ds = sa + kScaleOff + static_cast<uint32_t>(lane) * 8u;
          if (scale_kind == 0)
            cp_async8_sa(ds, s.s + static_cast<uint32_t>(kk) * 256u);
          else
            cp_async4_sa(ds, s.s + static_cast<uint32_t>(kk) * 128u);
        }
      }
      weights = false;
    }
    if (weights) {
      // vks: WeightView::values_k_stride (row-major 64; chunk tiles 2 KB, `step` then 512: the
      // warp's 4 copy instructions each read 512 contiguous bytes).
      const uint8_t* v = s.w + kk * vks;
      const uint32_t d = sa + static_cast<uint32_t>(lane) * 16u;
#pragma unroll
      for (int c = 0; c < kRows / 8; ++c, v += step) cp_async16_sa(d + c * 512, v, true);
      if (lane < kRows) {
        const uint32_t ds = sa + kScaleOff + static_cast<uint32_t>(lane) * 8u;
        // sks: WeightView::scales_k_stride (row-major: the chunk's 8 / 4 bytes; chunk tiles:
        // 32 rows of them, the warp's copies then cover 8 / 4 whole 32-byte sectors).
        if (scale_kind == 0)
          cp_async8_sa(ds, s.s + kk * sks);
        else
          cp_async4_sa(ds, s.s + kk * sks);
      }
    }
    if (acts) {
      const int rem = s.a_len - kk * 128;
      const uint32_t d = sa + kActOff + static_cast<uint32_t>(lane) * 16u;
#pragma unroll
      for (int c = 0; c < kT / 2; ++c) {
        const bool ok = rem > c * kActCopyK;
        cp_async16_sa(d + c * 512, s.al + (ok ? kk * 128 + c * kActCopyK : 0), ok);
      }
    }
  }
};

/// Fills the first kS stages of a warp's ring in one pass (fn(s) issues stage s's copies), one
/// commit group per stage, empty past the warp's n chunks. The rings are primed in two passes
/// with the same group order: weights before the PDL wait (they do not depend on the
/// predecessor), activations after it; the K loop's cp_async_wait<kS - 1> counts on this order.
/// (tile, sub-chunk) of a warp's next chunk; next() steps without a division.
struct ChunkCursor {
  int t = 0, k = 0;
  int n = 0, ka = 0;  // balanced FC1: this warp's sub-chunks in piece t, the piece's first K
  __device__ __forceinline__ void next(int n_k) {
    if (++k == n_k) {
      k = 0;
      ++t;
    }
  }
  /// `step` chunks on (FC2's K-interleaved warps: step = kW); a loop, not a division (it runs
  /// once per sub-chunk and rarely more than once).
  __device__ __forceinline__ void next(int n_k, int step) {
    for (k += step; k >= n_k; k -= n_k) ++t;
  }
};

template <int kS, typename Fn>
__device__ __forceinline__ void prime_ring(int n, Fn&& fn) {
#pragma unroll
  for (int s = 0; s < kS; ++s) {
    if (s < n) fn(s);
    cp_async_commit();
  }
}

/// acc[m] += W(rows m*16 + {g, g+8}) x act over one staged 128-value sub-chunk. kM = number of
/// 16-row MMA tiles of the warp (2 for FC1's 32 rows, 1 for FC2's 16). kSK = the scale kind
/// (0 UE4M3/16, 1 E8M0/32) as a constant: a runtime kind put two branches in every (row, step),
/// splitting the unrolled body into small basic blocks the scheduler could not interleave.
/// BF16 operands with prepared NVFP4 (E5M3) scales fold with ONE multiply per weight pair: the
/// raw E2M1 bits are value * 2^-126 (code 1 a BF16 subnormal, exact in HMUL2) and the scale
/// splat is s * 2^118 built by one integer multiply-add, so the operand is value * s * 2^-8
/// (exact: <= 6 significant bits, far from the BF16 limits). The accumulators carry 2^-8; the
/// epilogues multiply alpha by kAccScale = 2^8 (exact). Saves the separate 2^126 multiplies and
/// the fp32 scale conversion: ~11 instead of ~15 instructions per (row, 16-value step).
// (clang-format misreads the && after a variable template's argument list)
// clang-format off
template <typename OpT, bool kFold, int kSK>
inline constexpr bool kOneMulFold = kFold && kSK == 0 && std::is_same_v<OpT, __nv_bfloat16>;
// clang-format on
template <typename OpT, bool kFold, int kSK>
inline constexpr float kAccScale = kOneMulFold<OpT, kFold, kSK> ? 256.f : 1.f;

/// bf16x2 a times the bf16 half H of b in both lanes (HMUL2 with a .H0_H0 / .H1_H1 operand).
template <int H>
__device__ __forceinline__ uint32_t mul2_half(uint32_t a, uint32_t b) {
  const __nv_bfloat162 bb = *reinterpret_cast<const __nv_bfloat162*>(&b);
  const __nv_bfloat162 v = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                                   H == 0 ? __low2bfloat162(bb) : __high2bfloat162(bb));
  return *reinterpret_cast<const uint32_t*>(&v);
}

template <typename OpT, bool kFold, int kSK, int kM>
__device__ __forceinline__ void stage_mma(const uint8_t* st, float (&acc)[kM][4], int g, int t) {
  constexpr int kRows = 16 * kM, kT = DecodeCfg::kTileTokens;
  constexpr bool kOne = kOneMulFold<OpT, kFold, kSK>;
  WeightFrag<detail::kWFp4, OpT> f[2 * kM];
#pragma unroll
  for (int i = 0; i < 2 * kM; ++i) {
    const int r = (i >> 1) * 16 + (i & 1) * 8 + g;
    f[i].v = *reinterpret_cast<const uint4*>(st + r * 64 + t * 16);
    f[i].s = *reinterpret_cast<const uint2*>(st + WarpStage<kRows>::kScaleOff + r * 8);
  }
  const uint2* s_act = reinterpret_cast<const uint2*>(st + WarpStage<kRows>::kActOff);
  uint32_t sp[2 * kM];  // scale splats of two steps (kOne)
#define B12X_DEC_STEP(J)                                                                  \
  {                                                                                       \
    uint32_t a[kM][4];                                                                    \
    float s[2 * kM];                                                                      \
    _Pragma("unroll") for (int i = 0; i < 2 * kM; ++i) {                                  \
      uint32_t lo, hi;                                                                    \
      if constexpr (kOne) {                                                               \
        const uint32_t w = u4_word(f[i].v, J / 2);                                        \
        if (J % 2 == 0) {                                                                 \
          const uint32_t sb = __byte_perm(J < 4 ? f[i].s.x : f[i].s.y, 0u,                \
                                          0x4040u | (((J + 1) % 4) << 8) | (J % 4));      \
          sp[i] = sb * 16u + 0x75807580u; /* e5m3_bf16x2_2p118, steps J and J + 1 */      \
        }                                                                                 \
        lo = mul2_half<J % 2>(layout::fp4x2_bf16_bits<2 * (J % 2)>(w), sp[i]);            \
        hi = mul2_half<J % 2>(layout::fp4x2_bf16_bits<2 * (J % 2) + 1>(w), sp[i]);        \
        s[i] = 0.f;                                                                       \
      } else {                                                                            \
        f[i].template decode<J>(lo, hi, nullptr, t);                                      \
        s[i] = f[i].template scale<J>(kSK);                                               \
        if constexpr (kFold) {                                                            \
          const uint32_t s2 = OpTraits<OpT>::splat(s[i]);                                 \
          lo = OpTraits<OpT>::mul2(lo, s2);                                               \
          hi = OpTraits<OpT>::mul2(hi, s2);                                               \
        }                                                                                 \
      }                                                                                   \
      a[i >> 1][(i & 1)] = lo;                                                            \
      a[i >> 1][2 + (i & 1)] = hi;                                                        \
    }                                                                                     \
    const uint2 b = s_act[(J * kT + (g & (kT - 1))) * 4 + t]; /* columns >= kT: unused */ \
    _Pragma("unroll") for (int m = 0; m < kM; ++m) {                                      \
      if constexpr (kFold) {                                                              \
        OpTraits<OpT>::mma_acc(acc[m], a[m], b.x, b.y);                                   \
      } else {                                                                            \
        float d[4];                                                                       \
        OpTraits<OpT>::mma(d, a[m], b.x, b.y);                                            \
        acc[m][0] = fmaf(d[0], s[2 * m], acc[m][0]);                                      \
        acc[m][1] = fmaf(d[1], s[2 * m], acc[m][1]);                                      \
        acc[m][2] = fmaf(d[2], s[2 * m + 1], acc[m][2]);                                  \
        acc[m][3] = fmaf(d[3], s[2 * m + 1], acc[m][3]);                                  \
      }                                                                                   \
    }                                                                                     \
  }
  B12X_DEC_STEP(0);
  B12X_DEC_STEP(1);
  B12X_DEC_STEP(2);
  B12X_DEC_STEP(3);
  B12X_DEC_STEP(4);
  B12X_DEC_STEP(5);
  B12X_DEC_STEP(6);
  B12X_DEC_STEP(7);
#undef B12X_DEC_STEP
}

__device__ __forceinline__ uint32_t pack_op(float lo, float hi, bool fp16) {
  return fp16 ? (static_cast<uint32_t>(fmt::float_to_fp16_bits(lo)) |
                 (static_cast<uint32_t>(fmt::float_to_fp16_bits(hi)) << 16))
              : (static_cast<uint32_t>(fmt::float_to_bf16_bits(lo)) |
                 (static_cast<uint32_t>(fmt::float_to_bf16_bits(hi)) << 16));
}

/// Max of |partial amaxes| over the `lanes` (power of two) consecutive lanes sharing a block.
/// Same result as the sequential block_amax: max is order-free and partial maxima are never NaN.
__device__ __forceinline__ float group_amax(float m, int lanes) {
  for (int o = 1; o < lanes; o <<= 1) {
    const float p = __shfl_xor_sync(0xFFFFFFFFu, m, o);
    m = p > m ? p : m;
  }
  return m;
}

// ---- [Q] x -> per-route operand rows (quantised-activation modes only) --------------------
// grid (routes, ceil(H / 1024)), 128 threads x 8 values. The op's first kernel: it waits for the
// caller's kernels before reading x/ids, then lets FC1 launch (FC1 reads ids before its wait).
// [Q] runs while FC1's CTAs flood the memory system with their weight streams (FC1 launches on
// this grid's trigger), and FC1 waits for this grid: every serial global round trip here is one
// taken behind that flood. q_load (DecodeArgs) 1 keeps them to one: the ids and the x row are
// loaded together (the row does not depend on the id) and the NVFP4 global scales, weights-side
// data like FC1's weights, are read into shared memory before the wait.
// q_fast (NVFP4, up to kQGsTable / 2 experts) also keeps 1 / a1gs in the table's upper half,
// divided before the wait, and quantises with num::quant_block_nvfp4 (no division by 6 or by
// a1gs on the chain from the loads to the store, only the block multiplier's reciprocal; the
// same bits): [Q] runs its chain while FC1's CTAs, launched on
// its trigger, take the issue slots.
// kLean (the default NVFP4 launch: BF16 x, q_load 1, q_fast with the table; DecodeKnobs::q_lean):
// the other paths' runtime branches (FP16 x, the other modes, the A16 gates) folded at compile
// time, 752 instead of 2048 SASS instructions. [Q] runs 1.6-2.4x longer beside FC1's CTAs than
// alone (H200 round 101, Q_EARLY=2: +3.2 instead of +5.2 us after the previous FC2 at
// Qwen3.5-TP4 M = 4), and FC1 waits for its last CTA; round 102: 0.985-1.002x on the 16 nvfp4
// M <= 8 rows ([Q] +3.9 instead of +6.4 us at MiniMax M = 2).
constexpr int kQGsTable = 1024;  // experts whose a1gs fit the [Q] table (4 KB)
/// [Q]'s CTA has stored its part of route `route`'s FC1 input row: it counts itself in on the
/// route's ready word (DecodeArgs::fc1_rdy). Every thread of the CTA calls it: the barrier orders
/// their stores before thread 0's fence and add, the release that FC1's acquiring poll pairs with.
__device__ __forceinline__ void rdy_count_in(const DecodeArgs& a, int route) {
  if (a.fc1_rdy == nullptr) return;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(a.fc1_rdy + route, 1ull);
  }
}
template <bool kLean = false>
__global__ void __launch_bounds__(DecodeCfg::kQuantThreads)
    moe_decode_quant_kernel(const DecodeArgs a) {
  __shared__ float s_gs[kQGsTable];
  const int aq = kLean ? static_cast<int>(num::kANvfp4) : a.aquant;
  const bool x_fp16 = kLean ? false : a.x_fp16 != 0;
  const bool gs_tab =
      kLean || (a.q_load != 0 && a.aquant == num::kANvfp4 && a.num_experts <= kQGsTable);
  const bool fast = kLean || (gs_tab && a.q_fast != 0 && a.num_experts <= kQGsTable / 2);
  if (gs_tab)
    for (int i = threadIdx.x; i < a.num_experts; i += DecodeCfg::kQuantThreads) {
      const float g = a.a1gs[i];
      s_gs[i] = g;
      if (fast) s_gs[kQGsTable / 2 + i] = fmt::div_rn(1.0f, g);
    }
  // q_early 1: FC1 may launch (and wait, before reading anything) while this grid still waits
  // for the caller; FC1's wait for this grid's completion covers the caller transitively.
  // q_early 2: no trigger, FC1 launches when every CTA here has exited (its 24 warps per SM no
  // longer compete with this grid's quantisation; FC1 then streams no weights before its wait).
  if (a.q_early == 1) {
    pdl_trigger();
    pdl_wait();
  } else {
    pdl_wait();
    if (a.q_early == 0) pdl_trigger();
  }
  if (a.fc1_bal) {
    // The balanced FC1's tile counters: FC1 touches them only after its wait for this grid.
    const int n = a.fc1_cnt_rows * a.fc1_cnt_stride;
    const int step = gridDim.x * gridDim.y * blockDim.x;
    for (int i = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
      a.fc1_cnt[i] = 0;
  }
  if (!kLean && a.aquant == num::kANone && a.a16_copy == 0) return;  // A16 gate: nothing to do
  const int route = blockIdx.x;
  const int H = a.w1.K;
  const int k = (blockIdx.y * DecodeCfg::kQuantThreads + threadIdx.x) * 8;
  // This thread's 8 values of the token's x row (route / topk < num_tokens: always a valid row).
  const uint4* xsrc = reinterpret_cast<const uint4*>(
      static_cast<const uint16_t*>(a.x) + static_cast<int64_t>(route / a.topk) * a.x_ld + k);
  uint4 w = make_uint4(0u, 0u, 0u, 0u);
  if ((kLean || a.q_load != 0) && k < H) w = *xsrc;  // in flight with the id load
  const int64_t id = a.ids64 ? static_cast<const int64_t*>(a.ids)[route]
                             : static_cast<const int32_t*>(a.ids)[route];
  if (id < 0 || id >= a.num_experts) return;  // uniform over the CTA: FC1 never reads this row
  if (!kLean && a.q_load == 0 && k < H) w = *xsrc;
  uint4* dst = reinterpret_cast<uint4*>(a.xq + static_cast<int64_t>(route) * H + k);
  if (!kLean && a.aquant == num::kANone) {  // the A16 copy gate: the row as it is (BF16 or FP16)
    if (k < H) *dst = w;
    rdy_count_in(a, route);
    return;
  }
  if (gs_tab) __syncthreads();  // s_gs filled (uniform: every thread of the CTA is here)
  float v[8];
  float amax = 0.f;
  if (k < H) {
    const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const uint32_t lo = ws[h] & 0xFFFFu, hi = ws[h] >> 16;
      v[2 * h] = x_fp16 ? fmt::fp16_bits_to_float(lo) : fmt::bf16_bits_to_float(lo);
      v[2 * h + 1] = x_fp16 ? fmt::fp16_bits_to_float(hi) : fmt::bf16_bits_to_float(hi);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) amax = fmt::amax_update(amax, v[i]);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = 0.f;
  }
  // H % 32 == 0: the 2 (NVFP4) or 4 (MX) lanes of a block are all inside or all outside H.
  amax = group_amax(amax, num::quant_block_values(aq) / 8);
  if (k < H) {
    const float gs = aq != num::kANvfp4 ? 1.f : gs_tab ? s_gs[id] : a.a1gs[id];
    uint32_t o[4];
    if (fast) {
      // NVFP4 operand values (E2M1 x UE4M3, at most 6 significant bits, 2^-10 .. 2688) are exact
      // in BF16: its bits are the fp32's upper half (what the RNE conversion gives them).
      const num::QBlock qb = num::quant_block_nvfp4(amax, gs, s_gs[kQGsTable / 2 + id]);
#pragma unroll
      for (int h = 0; h < 4; ++h)
        o[h] = (fmt::f32_bits(num::quant_value(num::kANvfp4, qb, v[2 * h])) >> 16) |
               (fmt::f32_bits(num::quant_value(num::kANvfp4, qb, v[2 * h + 1])) & 0xFFFF0000u);
    } else {
      const num::QBlock qb = num::quant_block(aq, amax, gs);
#pragma unroll
      for (int h = 0; h < 4; ++h)
        o[h] = pack_op(num::quant_value(aq, qb, v[2 * h]), num::quant_value(aq, qb, v[2 * h + 1]),
                       false);
    }
    *dst = make_uint4(o[0], o[1], o[2], o[3]);
  }
  rdy_count_in(a, route);
}

// ---- [FC1] (32 * kWM rows) x (expert tiles y, y + Y, ...) per CTA -----------------------
// kWM row warps x 8 / kWM K warps. kWM >= 2 for gated activations with MX-quantised FC2 inputs
// (the epilogue quantises whole 32-feature blocks, a gated 32-row warp holds 16 features).
// A CTA walks the expert tiles blockIdx.y, blockIdx.y + gridDim.y, ... of its row block with one
// continuous per-warp ring: at M = 8 a single-tile CTA streamed 2 sub-chunks per warp between
// its routing and its epilogue; now the host sizes gridDim.y so that the grid is about one wave
// (decode_fc1_tile_groups) and each warp streams all of its tiles' sub-chunks back to back.
// At a tile's end every warp parks its partials (red), the CTA sums them in fixed K-warp order,
// applies the activation (ys) and writes the FC2 operand rows, while the ring's next loads are
// already in flight. No co-residency is assumed: CTAs never wait for each other.
// kG > 1 splits the CTA into kG independent warp groups (kWM x kWK warps each) that take the
// CTA's tiles round robin, each synchronised by its own named barrier (one warp: __syncwarp):
// fewer K warps per tile and no CTA-wide barrier at tile ends, for launches with many tiles per
// CTA (the tile-end barriers were the top stall of FC1 at M = 8).
// kLast (DecodeArgs::fc1_last: two unbalanced groups): no barrier at tile ends. Each warp parks
// its partials and counts itself in on its group's arrival counter; the warp that arrives last
// sums the tile (the tile's <= 4 live columns only: 2 items per lane), applies the activation
// and quantises alone, while the others go straight on with their next tile: the group's K warps no
// longer wait for the slowest one at every tile (barrier stalls 0.89 cycles per instruction at
// Qwen3.5-TP4 M = 8). Before parking the next tile a warp waits until the previous tile's finisher
// has released red / ys (the group's done mbarrier; a tile's K loop later, so it rarely waits).
// The partials reach the finisher through the group's arrival mbarrier (smem_handover.cuh: every
// lane arrives after its writes, every reading lane waits, so racecheck can check the edges).

template <int kThreads, int kCta>
__device__ __forceinline__ void group_sync(int id) {
  if constexpr (kThreads == kCta)
    __syncthreads();
  else if constexpr (kThreads == 32)
    __syncwarp();
  else
    asm volatile("bar.sync %0, %1;" ::"r"(id), "n"(kThreads) : "memory");
}

// kBal: the balanced chunk ranges of DecodeArgs::fc1_bal (one row warp; with kG groups each
// group is a unit of its own, unit y * kG + grp of the row block's Y * kG). A unit's
// range is a list of pieces (tile, K sub-chunks [ka, kb)): whole tiles in the middle, parts of
// tiles at its ends. Every warp splits each piece's sub-chunks as it splits a whole tile; a
// part's K sums go to fc1_part and the tile's last CTA (fc1_cnt) finishes it.
// kTR: the chunk-tile refills of WarpStage::issue (launch_gemms: BF16 operands, UE4M3 scales).
// kSlotU (probe B12X_MOE_FC1_SLOT): the K step's ring slot as a constant (one body per slot of the
// 2-stage ring): the slot's shared-memory addresses become immediate offsets (sm_90a, the
// last-warp FC1: 289 instead of 298 SASS instructions per sub-chunk before the refill).
template <typename OpT, bool kFold, int kSK, int kWM, int kG, int kNW = DecodeCfg::kFc1Warps,
          bool kBal = false, int kRC = detail::kMaxInlineRoutes, bool kLast = false,
          bool kTR = false, bool kSlotU = false>
__global__ void __launch_bounds__(32 * kNW, kNW == DecodeCfg::kFc1Warps ? (kFold ? 3 : 2) : 2)
    moe_decode_fc1_kernel(const DecodeArgs a) {
  using C = DecodeCfg;
  using St = WarpStage<32>;
  constexpr int kT = C::kTileTokens;
  constexpr int kS = C::kFc1Stages, kWK = kNW / (kWM * kG), kRows = 32 * kWM;
  constexpr int kGT = 32 * kWM * kWK, kCta = 32 * kNW;  // threads per group / CTA
  constexpr int kRing = C::fc1_ring(kNW), kRed = C::fc1_red(kNW);
  static_assert(kWK >= 1 && kWK * kWM * kG == kNW, "warps = groups x rows x K");
  static_assert(kWM == 1 || kWM == 2 || kWM == 4, "row warps: a power of two (epilogue shifts)");
  static_assert(!kBal || kWM == 1, "balanced FC1: one row warp");
  static_assert(C::kTileTokens * 32 == detail::kFc1BalSlotFloats, "fc1_part slot size");
  static_assert(!kLast || !kBal, "last-warp tile ends: whole tiles only");
  static_assert(C::kTileTokens <= 4, "kLast: live columns 2 t + {0, 1} with t < 2");
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ RouteSmemT<kRC> rs;
  // kLast: per group, warps arrived at tile ends (cumulative; the last one finishes the tile).
  __shared__ int s_arrived[kLast ? kG : 1];
  // kLast: per group an arrival mbarrier [grp] (the lanes of the group's warps, one phase per tile)
  // and a done mbarrier [kG + grp] (the finisher's lanes).
  __shared__ uint64_t s_bar[kLast ? 2 * kG : 1];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  // (Warps < 8: with one group grp is 0 and wk warp / kWM, known at compile time.)
  const int grp = kG == 1 ? 0 : warp / (kWM * kWK);
  const int wm = warp % kWM, wk = kG == 1 ? warp / kWM : (warp / kWM) % kWK;
  const int gtid = kG == 1 ? tid : tid - grp * kGT;
  // A16: FC1 is the op's first kernel and reads x directly, so it waits for the caller first.
  // Quantised modes: the [Q] kernel waited for the caller before letting FC1 launch, so the ids
  // may be read (and the weights streamed) now; only xq needs the wait below. q_early: [Q] let
  // this grid launch before the caller finished, so not even the ids may be read before the wait.
  // A16 gate: the gate kernel waited for the caller before letting FC1 launch (like [Q]).
  const bool first = a.aquant == num::kANone;
  const bool wait_first = (first && a.a16_gate == 0) || a.q_early == 1;
  if (wait_first) pdl_wait();
  pdl_trigger();  // FC2 may launch now and stream its own weights (it waits for us before reading)
  if (kLast && tid < kG) {  // route_tables' barriers publish them
    s_arrived[tid] = 0;
    mbar_init(&s_bar[tid], 32 * kWK * kWM);
    mbar_init(&s_bar[kG + tid], 32);
  }
  const int ntiles = route_tables<kRC, kCta>(a, rs, smem);
  if (a.fc2_split > 1 && blockIdx.x == 0 && blockIdx.y == 0) {
    // FC2's split counters: read by FC2 only after it waited for this grid. The previous call's
    // FC2 is complete: A16 waited above, otherwise [Q] waited before FC1 could launch.
    for (int i = tid; i < a.w2.rows_pad / C::kFc2Rows; i += kCta) a.counters[i] = 0;
  }
  const int R0 = blockIdx.x * kRows;
  const int F0 = a.gated ? R0 / 2 : R0;
  const int y0 = blockIdx.y, Y = gridDim.y;
  const detail::WeightView& W = a.w1;
  const int nk = W.K_pad / 128;
  // Pieces of this group: tiles grp, grp + kG, ... of the CTA's tiles y0, y0 + Y, ... (whole),
  // or (kBal) tiles t_lo..t_hi of the chunk range [c_lo, c_hi), the first from sub-chunk k_lo,
  // the last up to k_hi.
  const int N = ntiles * nk;
  // kBal units: Yu = Y x kG per row block, this group's u0. (kRC = 128: N <= 128 tiles x nk and
  // Yu <= 128 x 8, N * y fits 32 bits for K < 2^21; the wide routing's 1024 tiles take 64-bit
  // products.)
  const int Yu = kBal ? Y * kG : Y, u0 = kBal ? y0 * kG + grp : y0;
  using Prod = std::conditional_t<kRC == detail::kMaxInlineRoutes, int, int64_t>;
  auto range_lo = [&](int y) { return static_cast<int>(static_cast<Prod>(N) * y / Yu); };
  const int c_lo = kBal ? range_lo(u0) : 0, c_hi = kBal ? range_lo(u0 + 1) : 0;
  const int t_lo = c_lo / max(nk, 1), k_lo = c_lo - t_lo * nk;
  const int k_hi = c_hi - (c_hi - 1) / max(nk, 1) * nk;  // 1..nk
  const int n_t = F0 >= a.features ? 0
                  : kBal           ? (c_hi > c_lo ? (c_hi - 1) / nk - t_lo + 1 : 0)
                  : y0 < ntiles    ? (ntiles - y0 + Y - 1) / Y
                                   : 0;  // my pieces
  if (n_t == 0) {
    if (!wait_first) pdl_wait();  // completion of this grid implies the predecessor's
    return;
  }
  const int n_tg = kBal ? n_t : grp < n_t ? (n_t - grp + kG - 1) / kG : 0;
  auto tile_index = [&](int it) { return kBal ? t_lo + it : y0 + Y * (grp + kG * it); };
  auto tile_of = [&](int it) { return rs.tile(tile_index(it)); };
  auto piece_ka = [&](int it) { return kBal && it == 0 ? k_lo : 0; };
  auto piece_kb = [&](int it) { return kBal && it == n_tg - 1 ? k_hi : nk; };
  const int n_k = wk < nk ? (nk - wk + kWK - 1) / kWK : 0;  // sub-chunks per tile of this warp
  auto piece_nk = [&](int it) {                             // this warp's sub-chunks of piece it
    if constexpr (!kBal) return n_k;
    const int len = piece_kb(it) - piece_ka(it);
    return len > wk ? (len - wk + kWK - 1) / kWK : 0;
  };
  int n_my = n_tg * n_k;
  if constexpr (kBal) {
    n_my = 0;
    for (int it = 0; it < n_tg; ++it) n_my += piece_nk(it);
  }
  // Steps a chunk cursor (piece, sub-chunk of this warp) on, past pieces without a sub-chunk.
  auto enter = [&](ChunkCursor& cu) {  // from piece cu.t on, the first with a sub-chunk
    for (; cu.t < n_tg && (cu.n = piece_nk(cu.t)) == 0; ++cu.t) {
    }
    cu.ka = piece_ka(cu.t);
  };
  auto advance = [&](ChunkCursor& cu) {
    if constexpr (!kBal) {
      cu.next(n_k);
    } else if (++cu.k == cu.n) {
      cu.k = 0;
      ++cu.t;
      enter(cu);
    }
  };
  auto cursor0 = [&] {
    ChunkCursor cu;
    if constexpr (kBal) enter(cu);
    return cu;
  };
  const int64_t r0 = R0 + 32 * wm;
  const uint8_t* vrow = W.values + detail::value_row_offset(W, r0);  // r0 % 32 == 0
  const uint8_t* srow = W.scales + detail::scale_row_offset(W, r0);  // r0 % 32 == 0
  uint8_t* ring = smem + warp * kS * C::kFc1Stage;
  constexpr int kYs = 32 * kWM;  // features per token row of ys (gated: 16 * kWM used)
  // Group areas: red [wk * kWM + wm][m * 4 + i][lane], ys [token][kYs].
  float* red = reinterpret_cast<float*>(smem + kRing) + grp * (kWK * kWM * 8 * 32);
  float* ys = reinterpret_cast<float*>(smem + kRing + kRed) + grp * (kT * kYs);
  static_assert(kRed == kG * kWK * kWM * 8 * 32 * 4 && C::kFc1Ys >= kG * kT * kYs * 4, "areas");

  // Chunk (it, kc) of this warp: group tile it, sub-chunk wk + kWK * kc. The loads run kS
  // chunks ahead of the math; the ChunkCursor ni is the next chunk to load.
  const int n_lane = St::lane_token(lane);
  const uint32_t wstep = 8u * static_cast<uint32_t>(W.values_row_stride);
  auto src_of = [&](int it) {
    const int4 tl = tile_of(it);
    const uint16_t* arow = nullptr;
    if (n_lane < tl.z) {
      const int slot = tl.y + n_lane;
      arow = first && a.a16_copy == 0
                 ? static_cast<const uint16_t*>(a.x) + static_cast<int64_t>(rs.token(slot)) * a.x_ld
                 : a.xq + static_cast<int64_t>(rs.route(slot)) * W.K;
    }
    return St::src(vrow + tl.x * W.values_expert_stride, srow + tl.x * W.scales_expert_stride,
                   W.values_row_stride, W.scales_row_stride, arow, lane, W.K, W.values);
  };
  const uint32_t ring_sa = smem_addr(ring);
  auto issue = [&](int slot, const typename St::Src& sc, const ChunkCursor& cu, bool weights,
                   bool acts) {
    St::template issue<kTR>(ring_sa + slot * C::kFc1Stage, sc, wstep, cu.ka + wk + kWK * cu.k, kSK,
                            W.scales_k_stride, W.values_k_stride, lane, weights, acts);
  };
  ChunkCursor ni = cursor0();  // the next chunk to load
  {
    ChunkCursor wc = ni;  // the weights' cursor in the first pass
    prime_ring<kS>(n_my, [&](int s) {
      issue(s, src_of(wc.t), wc, true, false);
      advance(wc);
    });
  }
  // fc1_scal0: the first tile's per-expert scalars (weights-side, like the weights) are loaded
  // before the wait. Loaded at the tile's start, ptxas consumed alpha (x kAccScale) right after
  // its load, so every warp's first K step waited for a round trip queued behind the primes
  // (ncu, H200 round 102, DeepSeek-TP4 nvfp4 M = 8: that FMUL 4.2 % of FC1's stall samples).
  const bool scal0 = a.fc1_scal0 != 0 && n_tg > 0;  // (a group without tiles reads none)
  float alpha0 = 0.f, gs20 = 1.f;
  if (scal0) {
    const int e0 = tile_of(0).x;
    alpha0 = a.alpha1[e0];
    if (a.aquant == num::kANvfp4) gs20 = a.a2gs[e0];
  }
  // xq is written by [Q]. fc1_rdy (DecodeArgs): instead of waiting for [Q]'s grid, lane l polls
  // the ready word of slot l % kT of the group's tile l / kT (every tile of the group, 32 / kT per
  // pass) with an acquiring load until its [Q] CTAs have all counted in; __syncwarp hands that on
  // to the lanes that copy the rows. A word without the tag (fresh scratch): the PDL wait.
  const bool rdy = !kBal && a.fc1_rdy != nullptr && !wait_first;
  if (rdy) {
    bool fall_back = false;
    for (int i0 = 0; i0 < n_tg; i0 += 32 / kT) {
      const int it = i0 + lane / kT, sl = lane % kT;
      const int4 tl = it < n_tg ? tile_of(it) : make_int4(0, 0, 0, 0);
      if (sl < tl.z) {
        const unsigned long long* w = a.fc1_rdy + rs.route(tl.y + sl);
        for (;;) {
          unsigned long long v;
          asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(w) : "memory");
          if ((v >> 16) != detail::kRdyTag) {
            fall_back = true;
            break;
          }
          if (static_cast<int>(v & 0xFFFFu) >= a.q_ny) break;
        }
      }
    }
    if (__any_sync(0xFFFFFFFFu, fall_back)) pdl_wait();
    __syncwarp();
  } else if (!wait_first) {
    pdl_wait();
  }
  prime_ring<kS>(n_my, [&](int s) {
    issue(s, src_of(ni.t), ni, false, true);
    advance(ni);
  });
  // Sources of the next chunk's tile, rebuilt only when the cursor enters a new tile.
  typename St::Src nsrc{};
  if (ni.t < n_tg) nsrc = src_of(ni.t);

  float acc[2][4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[m][i] = 0.f;
  int c = 0;
  for (int it = 0; it < n_tg; ++it) {
    const int4 tile = tile_of(it);
    const int e = tile.x, slot0 = tile.y, cnt = tile.z;
    // Per-expert scalars, loaded now (the first tile's before the wait: fc1_scal0) and used in
    // the epilogue.
    const bool pre = scal0 && it == 0;
    const float alpha = (pre ? alpha0 : a.alpha1[e]) * kAccScale<OpT, kFold, kSK>;
    const float gs2 = pre ? gs20 : a.aquant == num::kANvfp4 ? a.a2gs[e] : 1.f;
    const int n_kc = piece_nk(it);
    auto kstep = [&](int slot) {
      stage_mma<OpT, kFold, kSK, 2>(ring + slot * C::kFc1Stage, acc, g, t);
      __syncwarp();  // every lane is done reading the slot before it is refilled
      if (c + kS < n_my) {
        issue(slot, nsrc, ni, true, true);
        advance(ni);
        if (ni.k == 0 && ni.t < n_tg) nsrc = src_of(ni.t);
      }
    };
    for (int kc = 0; kc < n_kc; ++kc, ++c) {
      cp_async_wait<kS - 1>();
      __syncwarp();
      if constexpr (kSlotU) {
        static_assert(kS == 2, "kSlotU: a 2-stage ring");
        if (c & 1)
          kstep(1);
        else
          kstep(0);
      } else {
        kstep(c % kS);
      }
      cp_async_commit();
    }
    // 1 / gs2 for the FC2-input quantisation (num::quant_block_nvfp4), here, off the tile end's
    // chain (the a2gs load has landed during the K loop).
    const float inv_gs2 = a.aquant == num::kANvfp4 ? fmt::div_rn(1.0f, gs2) : 1.f;

    // ---- split-K reduction and activation into ys[token][feature] -------------------------
    // Every warp parks its partials; then each thread sums one output (gated: a (gate, up)
    // pair) over the K warps in fixed order 0, 1, ... and applies the activation (kLast: the
    // group's last warp to arrive does it all, ep / ep_n its lane / 32 instead of the group's).
    if constexpr (kLast) {
      if (it > 0) mbar_wait(&s_bar[kG + grp], (it - 1) & 1);
      __syncwarp();  // the previous tile's finisher is done with red and ys
    }
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        red[((wk * kWM + wm) * 8 + m * 4 + i) * 32 + lane] = acc[m][i];
        acc[m][i] = 0.f;
      }
    if constexpr (kLast) {
      __syncwarp();
      mbar_arrive(&s_bar[grp]);  // each lane's partials
      int old = 0;
      if (lane == 0) old = smem_add_acq_rel(&s_arrived[grp], 1);
      old = __shfl_sync(0xFFFFFFFFu, old, 0);
      if (old != (it + 1) * (kWK * kWM) - 1) continue;  // another warp finishes this tile
      __syncwarp();
      mbar_wait(&s_bar[grp], it & 1);  // every warp has arrived (this warp's atom was the last)
      __syncwarp();
    } else {
      group_sync<kGT, kCta>(1 + grp);  // partials complete; the previous tile's ys readers are done
    }
    const int ep = kLast ? lane : gtid, ep_n = kLast ? 32 : kGT;
    auto ep_sync = [&] {
      if constexpr (kLast)
        __syncwarp();
      else
        group_sync<kGT, kCta>(1 + grp);
    };
    // kLast: the finisher hands red / ys to the next tile's warps.
    auto release_tile = [&] {
      if constexpr (kLast) {
        __syncwarp();
        mbar_arrive(&s_bar[kG + grp]);  // each lane's red / ys reads are done
      }
    };
    // Item q: (wm, [m,] i, lane) of the accumulator fragments; gated items pair m = 0 / 1.
    const int per_wm = a.gated ? 128 : 256;
    const int wm_shift = a.gated ? 7 : 8;  // log2(per_wm): no runtime division per item
    // kBal: a piece that is part of a tile parks its K sums (fc1_part [token][m * 16 + row]); the
    // tile's last CTA adds all parts in CTA order and finishes it (act: this CTA finishes it).
    const bool part = kBal && (piece_ka(it) != 0 || piece_kb(it) != nk);
    bool act = true;
    int ya = 0, yb = -1;  // kBal parts: the CTAs holding them
    if constexpr (kBal) {
      if (part) {
        const int side = it == 0 ? 0 : 1;  // head: the range's first piece, tail: its last
        float* dst = a.fc1_part + (static_cast<int64_t>(blockIdx.x * Yu + u0) * 2 + side) *
                                      detail::kFc1BalSlotFloats;
        for (int q = gtid; q < per_wm; q += kGT) {
          const int qm = a.gated ? 0 : q >> 7, qi = (q >> 5) & 3, ql = q & 31;
          const int col = 2 * (ql & 3) + (qi & 1), roff = (ql >> 2) + 8 * (qi >> 1);
          if (col >= cnt) continue;
          for (int m = qm; m <= (a.gated ? 1 : qm); ++m) {
            float v = 0.f;
#pragma unroll
            for (int w2 = 0; w2 < kWK; ++w2) {
              const float p = red[(w2 * 8 + m * 4 + qi) * 32 + ql];
              v = w2 == 0 ? p : v + p;
            }
            dst[col * 32 + m * 16 + roff] = v;
          }
        }
        __threadfence();
        group_sync<kGT, kCta>(1 + grp);
        __shared__ int s_last[kG], s_ya[kG], s_yb[kG];
        if (gtid == 0) {
          // The units whose ranges meet the tile's chunks [c0, c1): ya (holding c0) to yb
          // (holding c1 - 1), less empty ranges in between (N < Yu).
          const int tt = tile_index(it), c0 = tt * nk, c1 = c0 + nk;
          const int ya = static_cast<int>((static_cast<Prod>(c0 + 1) * Yu - 1) / N),
                    yb = static_cast<int>((static_cast<Prod>(c1) * Yu - 1) / N);
          int parts = 0;
          for (int y = ya; y <= yb; ++y) parts += range_lo(y + 1) > range_lo(y);
          s_ya[grp] = ya;
          s_yb[grp] = yb;
          s_last[grp] = atomicAdd(&a.fc1_cnt[blockIdx.x * kRC + tt], 1) == parts - 1;
        }
        group_sync<kGT, kCta>(1 + grp);
        act = s_last[grp] != 0;
        if (act) __threadfence();
        ya = s_ya[grp];
        yb = s_yb[grp];
      }
    }
    if (act) {
      // kLast: the finisher's lanes take only the items of the live columns (col < 4: ql & 3 <
      // 2), half of them, u -> q = (u / 16) * 32 + ((u / 2) % 8) * 4 + u % 2.
#pragma unroll(kLast ? 2 : 1)
      for (int u = ep; u < (kLast ? kWM * per_wm / 2 : kWM * per_wm); u += ep_n) {
        const int q = kLast ? ((u >> 4) << 5) | (((u >> 1) & 7) << 2) | (u & 1) : u;
        const int qw = q >> wm_shift, r = q & (per_wm - 1);
        const int qm = a.gated ? 0 : r / 128, qi = (r / 32) % 4, ql = r % 32;
        const int col = 2 * (ql & 3) + (qi & 1);
        if (col >= cnt) continue;
        const int roff = (ql >> 2) + 8 * (qi >> 1);
        auto sum = [&](int m) {
          float v = 0.f;
          if (kBal && part) {
            // The parts in unit order: unit y's part of tile tt is its head if tt is its range's
            // first tile, else its tail.
            const int tt = tile_index(it);
            bool any = false;
            for (int y = ya; y <= yb; ++y) {
              const int lo = range_lo(y);
              if (range_lo(y + 1) == lo) continue;  // empty range
              const int side = lo / nk == tt ? 0 : 1;
              const float p = __ldcg(a.fc1_part +
                                     (static_cast<int64_t>(blockIdx.x * Yu + y) * 2 + side) *
                                         detail::kFc1BalSlotFloats +
                                     col * 32 + m * 16 + roff);
              v = any ? v + p : p;
              any = true;
            }
            return v * alpha;
          }
#pragma unroll
          for (int w2 = 0; w2 < kWK; ++w2) {
            const float p = red[((w2 * kWM + qw) * 8 + m * 4 + qi) * 32 + ql];
            v = w2 == 0 ? p : v + p;
          }
          return v * alpha;
        };
        const float w = a.weight_on_input ? a.topk_weights[rs.route(slot0 + col)] : 1.f;
        if (a.gated) {
          float gate = sum(0), up = sum(1);
          if (a.weight_on_input) {
            gate *= w;
            up *= w;
          }
          ys[col * kYs + qw * 16 + roff] =
              num::round_inter(num::act_gated(a.act, gate, up), a.inter_fp16 != 0);
        } else {
          float h = sum(qm);
          if (a.weight_on_input) h *= w;
          ys[col * kYs + qw * 32 + 16 * qm + roff] =
              num::round_inter(num::act_relu2(h), a.inter_fp16 != 0);
        }
      }
    }
    ep_sync();           // ys complete; red may be overwritten by the next tile (kLast: below)
    if (!act) continue;  // uniform over the CTA: another CTA finishes this tile (kBal only)
    // ---- FC2 operand rows: 4 consecutive features of one token per thread ------------------
    // Quantised modes quantise here, once per (route, block), instead of in every FC2 CTA: the
    // CTA owns whole blocks (16 * kWM features gated, 32 * kWM ReLU2; I % 32 == 0).
    const int nf = a.gated ? 16 * kWM : 32 * kWM;
    const int qpt = nf / 4;                // threads per token
    const int qn = (kT * qpt + 31) & ~31;  // whole warps (the amax shuffles use full masks)
    // kLast: the finisher's lane takes items lane, lane + 32, ... (kT * qpt <= 128).
#pragma unroll
    for (int qr = 0; qr < (kLast ? 4 : 1); ++qr) {
      const int qt = ep + 32 * qr;
      if (qt >= qn) break;
      // qpt = 4 or 8 times kWM (a power of two): a shift instead of a runtime division.
      const int qpt_shift = (a.gated ? 2 : 3) + (kWM == 4 ? 2 : kWM == 2 ? 1 : 0);
      const int col = qt >> qpt_shift, fl = 4 * (qt & (qpt - 1));
      float v[4];
      float amax = 0.f;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        v[q] = col < cnt ? ys[col * kYs + fl + q] : 0.f;
        amax = fmt::amax_update(amax, v[q]);
      }
      if (a.aquant != num::kANone) {
        amax = group_amax(amax, num::quant_block_values(a.aquant) / 4);
        const num::QBlock qb = a.aquant == num::kANvfp4 ? num::quant_block_nvfp4(amax, gs2, inv_gs2)
                                                        : num::quant_block(a.aquant, amax, gs2);
#pragma unroll
        for (int q = 0; q < 4; ++q) v[q] = num::quant_value(a.aquant, qb, v[q]);
      }
      const int f = F0 + fl;
      if (col < cnt && f < a.features)
        *reinterpret_cast<uint2*>(a.inter + static_cast<int64_t>(slot0 + col) * a.features + f) =
            make_uint2(pack_op(v[0], v[1], a.inter_fp16 != 0),
                       pack_op(v[2], v[3], a.inter_fp16 != 0));
    }
    release_tile();
  }
  cp_async_wait<0>();
  // fc1_rdy: this grid's completion still implies [Q]'s (FC2 and the next call count on it).
  if (rdy) pdl_wait();
}

// ---- [FC2] kR (16 or 32) output rows x every route per CTA, combine fused ------------------
// kW warps with a kS-stage ring each (DecodeCfg: 8 x 3, 8 x 5 deep, 8 x 2, 4 x 4; 32 rows: 8 x 2
// (3 CTAs per SM, the register cap of FC1) or 8 x 3 (2 per SM)).
// kKil: the K-interleaved warp chunks of DecodeArgs::fc2_kil (8 warps x 3 stages, narrow
// routing; a template constant, so the contiguous ranges' code is unchanged).
template <typename OpT, bool kFold, int kSK, int kW, int kS, int kRC = detail::kMaxInlineRoutes,
          int kR = DecodeCfg::kFc2Rows, bool kKil = false, bool kTR = false, bool kSlotU = false>
__global__ void __launch_bounds__(32 * kW, kR == 32             ? (kS == 2 ? 3 : 2)
                                           : kW == 8 && kS == 2 ? 4
                                                                : 1)
    moe_decode_fc2_kernel(const DecodeArgs a) {
  using C = DecodeCfg;
  static_assert(
      kR == 16 || (kR == 32 && kW == 8 && (kS == 2 || kS == 3) && kRC == detail::kMaxInlineRoutes),
      "FC2 rows: 16, or 32 with 8 warps, 2-3 stages and the narrow routing");
  static_assert(!kKil || (kW == 8 && kS == 3 && kRC == detail::kMaxInlineRoutes),
                "K-interleaved FC2 warps: the 8-warp 3-stage CTA, narrow routing");
  constexpr int kM = kR / 16, kStage = C::fc2_stage(kR);
  using St = WarpStage<kR>;
  constexpr int kRing = C::fc2_ring(kW, kS, kR);
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ RouteSmemT<kRC> rs;
  // Combine weight per slot; the wide routing (up to 1024 slots) instead loads each lane's two
  // columns' weights at a tile's start (w01), off the flush's chain like alpha.
  constexpr bool kWide = kRC != detail::kMaxInlineRoutes;
  __shared__ float s_w[kWide ? 1 : kRC];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int ntiles = route_tables<kRC, 32 * kW>(a, rs, smem);
  const int R0 = blockIdx.x * kR;
  const detail::WeightView& W = a.w2;
  if (R0 >= W.rows) {
    pdl_wait();
    return;
  }
  {
    // Slots [0, valid routes) are the tiles' slots, contiguous in expert order.
    const int4 last = ntiles > 0 ? rs.tile(ntiles - 1) : make_int4(0, 0, 0, 0);
    const int nvalid = last.y + last.z;
    for (int i = tid; i < nvalid && !kWide; i += 32 * kW)
      s_w[i] = a.weight_on_input ? 1.f : a.topk_weights[rs.route(i)];
  }
  const int M = a.num_tokens;
  float* pacc = reinterpret_cast<float*>(smem + kRing) + warp * M * kR;
  for (int i = lane; i < M * kR; i += 32) pacc[i] = 0.f;

  const int nk = W.K_pad / 128;
  // Work of this warp. The CTA owns the tiles split, split + P, ... (P = fc2_split CTAs share
  // the row block): cta_tiles x nk (tile, sub-chunk) chunks in tile-major order, of which warp w
  // takes the contiguous range [w, w + 1) * total / kW. Every warp streams the same number of
  // sub-chunks (+-1) whatever the tile count: whole tiles round robin left warps with one tile
  // more than others idle (Qwen3-30B at M = 8: 17 tiles on 8 warps, 3 vs 2.1 on average), and
  // with fewer tiles than warps (top-4 routing at M = 1) a tile spreads over several warps. A
  // warp adds each tile's (partial K) sum into its own combine rows when its range leaves the
  // tile; the warps' rows are summed in warp order at the end (a fixed order for given routes).
  const int P = a.fc2_split;
  const int split = static_cast<int>(blockIdx.y);
  // fc2_bal: the CTA takes the chunk range [N2 split / P, N2 (split + 1) / P) of the row block's
  // N2 = tiles x nk chunks (a tile cut between CTAs adds its partial K sums like any other);
  // else the whole tiles split, split + P, ... (one tile more on some CTAs).
  const bool bal = a.fc2_bal != 0 && P > 1;
  const int N2 = ntiles * nk;
  const int c_lo = bal ? N2 * split / P : 0;
  const int cta_tiles = split < ntiles ? (ntiles - split + P - 1) / P : 0;
  const int total = bal ? N2 * (split + 1) / P - c_lo : cta_tiles * nk;
  // fc2_kil (decode_fc2_kil: tiles of >= 16 sub-chunks): warp w takes chunks w, w + kW, ... of
  // the CTA's range instead, so that the CTA's warps stream neighbouring sub-chunks of the same
  // rows at a time (FC1's K order: a row's 64-byte pieces in flight together) at the cost of a
  // combine flush per tile and warp (H200 round 49: MiniMax's FC2 alone 152.9 -> 135.9 us).
  constexpr bool kil = kKil;
  constexpr int jstep = kil ? kW : 1;
  const int j0 = kil ? c_lo + warp : c_lo + warp * total / kW;
  const int n_my =
      kil ? (warp < total ? (total - warp + kW - 1) / kW : 0) : c_lo + (warp + 1) * total / kW - j0;
  uint8_t* ring = smem + warp * kS * kStage;
  // Chunk (it, kk): CTA tile it (global tile split + P * it; fc2_bal: global tile it), sub-chunk
  // kk. Loads run kS chunks ahead; the ChunkCursor ni is the next one.
  auto tile_of = [&](int it) { return bal ? it : split + P * it; };
  const ChunkCursor first{nk > 0 ? j0 / nk : 0, nk > 0 ? j0 % nk : 0};
  const uint32_t wstep = 8u * static_cast<uint32_t>(W.values_row_stride);
  auto src_of = [&](int it) {
    const int4 tl = rs.tile(tile_of(it));
    const int n = St::lane_token(lane);
    return St::src(W.values + tl.x * W.values_expert_stride + detail::value_row_offset(W, R0),
                   W.scales + tl.x * W.scales_expert_stride + detail::scale_row_offset(W, R0),
                   W.values_row_stride, W.scales_row_stride,
                   n < tl.z ? a.inter + static_cast<int64_t>(tl.y + n) * a.features : nullptr, lane,
                   W.K, W.values);
  };
  const uint32_t ring_sa = smem_addr(ring);
  auto issue = [&](int slot, const typename St::Src& sc, int kk, bool weights, bool acts) {
    St::template issue<kTR>(ring_sa + slot * kStage, sc, wstep, kk, kSK, W.scales_k_stride,
                            W.values_k_stride, lane, weights, acts);
  };
  // Steps a cursor to this warp's next chunk; true where that enters another tile.
  auto step = [&](ChunkCursor& cu) {
    if constexpr (kil) {
      const int pt = cu.t;
      cu.next(nk, jstep);
      return cu.t != pt;
    } else {
      cu.next(nk);
      return cu.k == 0;
    }
  };
  ChunkCursor ni = first;  // the next chunk to load
  {
    ChunkCursor wc = first;  // the weights' cursor in the first pass
    prime_ring<kS>(n_my, [&](int s) {
      issue(s, src_of(wc.t), wc.k, true, false);
      step(wc);
    });
  }
  pdl_wait();  // the intermediate is written by FC1
  pdl_trigger();
  if (a.fc1_rdy != nullptr && blockIdx.x == 0 && blockIdx.y == 0) {
    // FC1 (and so [Q]) is complete: the ready words start the next call from count 0.
    for (int i = tid; i < a.fc1_rdy_cap; i += 32 * kW) a.fc1_rdy[i] = detail::kRdyTag << 16;
  }
  prime_ring<kS>(n_my, [&](int s) {
    issue(s, src_of(ni.t), ni.k, false, true);
    step(ni);
  });
  // Sources of the next chunk's tile, rebuilt only when the cursor enters a new tile.
  typename St::Src nsrc{};
  if (n_my > kS) nsrc = src_of(ni.t);
  __syncthreads();  // s_w / pacc initialised before the first flush

  float acc[kM][4];
#pragma unroll
  for (int m = 0; m < kM; ++m) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0.f;
  ChunkCursor cur = first;  // the chunk being multiplied
  int4 tl = n_my > 0 ? rs.tile(tile_of(cur.t)) : make_int4(0, 0, 0, 0);
  // Per-expert scale, loaded at the tile's start and used at its end (latency off the chain).
  float alpha = n_my > 0 ? a.alpha2[tl.x] * kAccScale<OpT, kFold, kSK> : 0.f;
  float w0 = 1.f, w1 = 1.f;  // kWide: the weights of this lane's columns 2t, 2t + 1 of tile tl
  auto tile_weights = [&] {
    if constexpr (kWide) {
      const bool use = !a.weight_on_input;
      w0 = use && 2 * t < tl.z ? a.topk_weights[rs.route(tl.y + 2 * t)] : 1.f;
      w1 = use && 2 * t + 1 < tl.z ? a.topk_weights[rs.route(tl.y + 2 * t + 1)] : 1.f;
    }
  };
  if (n_my > 0) tile_weights();
  int ring_slot = 0;  // c % kS without a division (kS = 3 or 5)
  for (int c = 0; c < n_my; ++c) {
    cp_async_wait<kS - 1>();
    __syncwarp();
    const int slot = ring_slot;
    ring_slot = ring_slot + 1 == kS ? 0 : ring_slot + 1;
    auto kstep = [&](int sl) {
      stage_mma<OpT, kFold, kSK, kM>(ring + sl * kStage, acc, g, t);
      __syncwarp();
      if (c + kS < n_my) {
        issue(sl, nsrc, ni.k, true, true);
        if (step(ni) && c + kS + 1 < n_my) nsrc = src_of(ni.t);
      }
    };
    if constexpr (kSlotU) {  // one body per slot of the 3-stage ring (kSlotU)
      static_assert(kS == 3, "kSlotU: a 3-stage ring");
      if (slot == 0)
        kstep(0);
      else if (slot == 1)
        kstep(1);
      else
        kstep(2);
    } else {
      kstep(slot);
    }
    cp_async_commit();
    if (!step(cur) && c + 1 < n_my) continue;  // the range stays in this tile
    // Tile (slice) done: out[token, row] += w_route * (alpha * acc). Columns one at a time in
    // slot order, so duplicate (token, expert) routes never race and the order is fixed.
    for (int col = 0; col < tl.z; ++col) {
      if (t == (col >> 1)) {
        const int slot = tl.y + col;
        float* p = pacc + rs.token(slot) * kR;
        const float w = kWide ? ((col & 1) ? w1 : w0) : s_w[slot];
#pragma unroll
        for (int m = 0; m < kM; ++m) {
          // Registers are selected, not indexed by the runtime column (no local memory).
          const float v0 = (col & 1) ? acc[m][1] : acc[m][0];
          const float v1 = (col & 1) ? acc[m][3] : acc[m][2];
          p[16 * m + g] = fmaf(w, v0 * alpha, p[16 * m + g]);
          p[16 * m + g + 8] = fmaf(w, v1 * alpha, p[16 * m + g + 8]);
        }
      }
      __syncwarp();
    }
#pragma unroll
    for (int m = 0; m < kM; ++m) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0.f;
    if (c + 1 < n_my) {
      tl = rs.tile(tile_of(cur.t));
      alpha = a.alpha2[tl.x] * kAccScale<OpT, kFold, kSK>;
      tile_weights();
    }
  }
  cp_async_wait<0>();
  __syncthreads();
  // Fixed-order sum of the kW warps' partial combines; tokens without a route get exact zeros.
  const float* pall = reinterpret_cast<const float*>(smem + kRing);
  auto store = [&](int m, int r, float v) {
    static_cast<uint16_t*>(a.out)[static_cast<int64_t>(m) * a.out_ld + R0 + r] =
        a.out_fp16 ? fmt::float_to_fp16_bits(v) : fmt::float_to_bf16_bits(v);
  };
  const int H = W.rows;
  // fc2_cluster: the CTA's sums stay in shared memory (the ring's start: free after the wait and
  // barrier above) for the cluster's adds below.
  const bool cl_sum = kR == 32 && P > 1 && a.fc2_cluster != 0;
  float* csum = reinterpret_cast<float*>(smem);
  for (int i = tid; i < M * kR; i += 32 * kW) {
    const int m = i / kR, r = i % kR;
    if (R0 + r >= H) continue;
    float s = pall[i];
#pragma unroll
    for (int w = 1; w < kW; ++w) s += pall[w * M * kR + i];
    if (P == 1)
      store(m, r, s);
    else if (cl_sum)
      csum[i] = s;
    else
      a.partial[(static_cast<int64_t>(blockIdx.y) * M + m) * H + R0 + r] = s;
  }
  if (P == 1) return;
  if constexpr (kR == 32) {  // (the 16-row instances keep the partials: no cluster tail code)
    if (cl_sum) {
      // The row block's P CTAs are one cluster (grid.y): each adds its share of every CTA's sums
      // in split order from 0, the partials path's order (the same bits), reading the others'
      // shared memory. An entry is 4 rows of one token; H % 32 == 0 (validated), so they are all
      // inside H or all outside.
      ::b12x::gemm::lin::cluster_sum_f4(
          reinterpret_cast<const float4*>(csum), M * kR / 4, [](int e) { return e; },
          [&](int e, float4 v) {
            const int m = 4 * e / kR, r = 4 * e % kR;
            if (R0 + r >= H) return;
            store(m, r, v.x);
            store(m, r + 1, v.y);
            store(m, r + 2, v.z);
            store(m, r + 3, v.w);
          });
      return;
    }
  }
  // Split row block: the last of its P CTAs adds the P partials in split order (deterministic;
  // the counter only decides who adds, not the order).
  __shared__ int s_last;
  __threadfence();
  __syncthreads();
  if (tid == 0) s_last = atomicAdd(&a.counters[blockIdx.x], 1) == P - 1;
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  for (int i = tid; i < M * kR; i += 32 * kW) {
    const int m = i / kR, r = i % kR;
    if (R0 + r >= H) continue;
    float s = 0.f;
    for (int q = 0; q < P; ++q)
      s += __ldcg(a.partial + (static_cast<int64_t>(q) * M + m) * H + R0 + r);
    store(m, r, s);
  }
}

}  // namespace b12x::moe::dev
