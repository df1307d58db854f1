// Internal interface between the MoE host code (moe.cc) and its device launchers (moe_kernels.cu).
// No CUDA headers: plain structs of pointers and sizes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "b12x/moe.h"
#include "b12x/types.h"
#include "moe/moe_numerics.h"

namespace b12x::moe::detail {

/// Weight formats of the engine (one kernel template instance each).
enum WFmt : int { kWFp4 = 0, kWQ8_0 = 1, kWIq2xxs = 2, kWIq2xs = 3 };
/// Tile configurations of the generic engine (moe_gemm.cuh): the split-K decode tile (GGML
/// weights; FP4 weights decode through the decode stream below) and the grouped tile.
enum TileCfg : int { kCfgDecode = 0, kCfgGrouped = 1 };
inline constexpr int kCfgRows[2] = {32, 128};  // rows per CTA
inline constexpr int kCfgTokens[2] = {8, 64};  // tokens per CTA tile
inline constexpr int kPrepRowAlign = 128;      // prepared rows are padded to this
inline constexpr int kPrepKAlign = 128;        // prepared K is padded to this
inline constexpr int kMaxExperts = 4096;       // routing keeps per-expert counters in smem
// FP4 weights are prepared in 32-row chunk tiles (make_view in moe.cc,
// always; session 25 removed the row-major layout): H200 round 51, row-major -> chunk-tiled
// scales, us: MiniMax nvfp4 M = 1 / 2 / 4 / 8 62.7 / 106.1 / 190.8 / 323.8 -> 59.0 / 101.6 /
// 180.7 / 309.2, Qwen3.5-TP4 42.2 / 69.8 / 115.2 / 204.5 -> 41.0 / 67.6 / 112.3 / 199.7; all 24
// M <= 8 rows 1.4-5.9 % faster. Round 55 (session 15), row-major -> chunk-tiled codes (the scales
// tiled in both), us: MiniMax nvfp4 M = 1 / 2 / 4 / 8 58.2 / 100.7 / 178.1 / 309.9 -> 54.8 /
// 95.1 / 171.6 / 300.6, Qwen3.5-TP4 40.9 / 69.0 / 115.9 / 204.4 -> 38.0 / 64.6 / 107.6 / 184.3;
// 15 M <= 8 rows 0.880-0.972x. Round 93 (session 25): the BF16 decode-stream refills with the
// tiles' constant strides (WarpStage::issue<true>) 0.980-0.996x on 29 of the 32 M <= 8 rows.

/// Prepared per-expert layout of one GEMM operand (FC1 or FC2).
struct WeightView {
  const uint8_t* values = nullptr;
  const uint8_t* scales = nullptr;
  int64_t values_expert_stride = 0, scales_expert_stride = 0;  // bytes
  int64_t values_row_stride = 0, scales_row_stride = 0;        // bytes
  int rows = 0;                                                // logical output rows (2I / I / H)
  int rows_pad = 0;    // prepared rows (multiple of kPrepRowAlign)
  int K = 0;           // logical reduction length
  int K_pad = 0;       // multiple of kPrepKAlign
  int scale_kind = 0;  // FP4 only: 0 = UE4M3 per 16, 1 = E8M0 per 32
  // Scales of row r, 128-value chunk kk: (r >> 5) * scales_group_stride + (r & 31) *
  // scales_row_stride + kk * scales_k_stride. Row-major: group = 32 rows, k = the chunk's bytes
  // (FP4: 8 UE4M3 / 4 E8M0). FP4 "chunk tiles": [32 rows][bytes]
  // per chunk, so one warp's 32 rows of one chunk are 256 (128) contiguous bytes — 8 (4) 32-byte
  // sectors per copy instruction instead of 32.
  int64_t scales_group_stride = 0;
  int scales_k_stride = 0;
  // Values likewise: (r >> 5) * values_group_stride + (r & 31) * values_row_stride + kk *
  // values_k_stride. Row-major: k = 64 (FP4: the chunk's 128 codes); FP4 chunk tiles
  // (always for FP4): [32 rows][64 B] per chunk, one warp's 32 rows of a chunk 2 KB
  // contiguous (a 512-byte run per copy instruction instead of 8 rows x 64 B).
  int64_t values_group_stride = 0;
  int values_k_stride = 0;
};

/// Byte offset of row r's values (chunk 0) inside an expert (see WeightView).
B12X_HD int64_t value_row_offset(const WeightView& w, int64_t r) {
  return (r >> 5) * w.values_group_stride + (r & 31) * w.values_row_stride;
}
/// Byte offset of row r's scales (chunk 0) inside an expert (see WeightView).
B12X_HD int64_t scale_row_offset(const WeightView& w, int64_t r) {
  return (r >> 5) * w.scales_group_stride + (r & 31) * w.scales_row_stride;
}

struct GemmArgs {
  WeightView w;
  const float* alpha = nullptr;     // [E]
  const float* a_gscale = nullptr;  // [E] NVFP4 activation global scales (aquant == kANvfp4)
  int aquant = 0;
  // activation source: FC1 gathers x rows by token (route / topk), FC2 reads intermediate slots
  const void* src = nullptr;
  int act_fp16 = 0;
  int64_t act_ld = 0;  // values
  int act_by_token = 0;
  int raw_operands = 0;  // src rows already hold operand values in the MMA dtype (no conversion)
  int topk = 1;
  int tile_tokens = 64;  // grouped FP4: slots per tile (the pipe kernel's kTN: 16, 32 or 64)
  // routing (scratch)
  const int* tiles = nullptr;  // int4 {expert, slot0, count, 0}
  const int* num_tiles = nullptr;
  const int* slot_route = nullptr;
  const float* topk_weights = nullptr;
  int weight_on_input = 0;
  // epilogue: 0 gated activation -> intermediate, 1 relu2 -> intermediate, 2 fp32 per-route out
  int epi = 0;
  num::ActParams act;
  int features = 0;  // intermediate width I (epi 0/1)
  void* out = nullptr;
  int64_t out_ld = 0;  // values
  int out_fp16 = 0;    // intermediate dtype (epi 0/1): 1 = FP16, 0 = BF16
  // Decode regime: routing computed inside every CTA from the ids (routes <= kMaxInlineRoutes),
  // so no routing launch; FC2 then also combines: the last CTA of each row tile (counted in
  // `counters`, zeroed by FC1 every launch) sums the per-route rows in fixed k order.
  int inline_route = 0;
  const void* ids = nullptr;
  int ids64 = 0;
  int routes = 0;
  int num_experts = 0;
  int* counters = nullptr;
  int num_counters = 0;  // FC1: zero these many counters
  int fused_combine = 0;
  void* final_out = nullptr;
  int64_t final_ld = 0;
  int final_fp16 = 0;
};
inline constexpr int kMaxInlineRoutes = 128;  // one route per thread of the 128-thread CTA
/// Route capacity of the FP4 decode stream's wide routing (moe_decode.cuh, decode_route_wide):
/// launches above kMaxInlineRoutes routes bucket the routes by expert in shared memory instead of
/// ranking one route per thread. Tokens are capped for FC2's per-warp combine rows.
inline constexpr int kMaxStreamRoutes = 1024;
inline constexpr int kMaxStreamTokens = 128;

/// Decode regime for FP4 weights ("decode stream", kernels/moe_decode.cuh): up to three launches
/// chained by programmatic dependent launch — [quantise x per route] -> FC1 + activation (+ the
/// FC2 input quantisation in its epilogue) -> FC2 + deterministic combine into the output. Every
/// CTA derives the expert-sorted tiles from the <= kMaxInlineRoutes ids itself, issues all of its
/// weight loads (cp.async rings) before waiting for its predecessor's data, and FC2 accumulates
/// the routes of each token in a fixed order (no atomics: bitwise reproducible).
struct DecodeArgs {
  const void* ids = nullptr;
  int ids64 = 0;
  int routes = 0;  // live M * topk (<= kMaxStreamRoutes)
  int topk = 1;
  int num_tokens = 0;  // live M
  int num_experts = 0;
  const float* topk_weights = nullptr;
  int weight_on_input = 0;
  WeightView w1, w2;
  const float* alpha1 = nullptr;  // [E]
  const float* alpha2 = nullptr;  // [E]
  const float* a1gs = nullptr;    // [E] NVFP4 activation global scales (FC1 input)
  const float* a2gs = nullptr;    // [E] (FC2 input)
  int aquant = 0;                 // num::AQuant of both GEMM inputs (kANone: A16)
  const void* x = nullptr;        // [M, H] caller activations
  int64_t x_ld = 0;               // values
  int x_fp16 = 0;
  uint16_t* xq = nullptr;     // [routes, H] FC1 operand rows (aquant != kANone), scratch
  uint16_t* inter = nullptr;  // [routes, I] FC2 operand rows (slot order), scratch
  int inter_fp16 = 0;         // A16 with fp16 input: FP16 operands; else BF16
  num::ActParams act;
  int gated = 1;
  int features = 0;  // I
  void* out = nullptr;
  int64_t out_ld = 0;
  int out_fp16 = 0;
  // FC2 split over expert tiles (decode_fc2_split): CTA (row block, p) sums the tiles
  // p, p + split, ... into partial[p][token][H]; the last CTA of a row block (counter) adds the
  // splits in p order. counters[rows_pad(H) / 16] are zeroed by FC1 every launch.
  int fc2_split = 1;
  int fc2_bal = 0;    // chunk ranges instead of whole tiles per split CTA (launch_decode_stream)
  int fc2_kil = 0;    // warps take chunks warp, warp + kW, ... of the CTA's range (decode_fc2_kil)
  int fc2_rows = 16;  // output rows per FC2 CTA (decode_fc2_rows: 16, or 32 up to 8 tokens)
  int fc2_stages32 = 3;  // ring stages of the 32-row FC2 CTA (decode_fc2_stages32: 3 or 2)
  float* partial = nullptr;
  int* counters = nullptr;
  // Launch shape of the stream, chosen by launch_decode_stream (decode_fc1_row_warps) unless
  // set: FC1 row warps per CTA (0: auto; 1, or 2 with BF16 operands) and whether [Q] lets FC1
  // launch before it
  // waits for the caller (FC1 then waits before reading anything).
  int fc1_wm = 0;
  // FC1 warp groups per CTA (0: auto, decode_fc1_groups; 1, or 2 with one row warp).
  int fc1_groups = 0;
  // FC1 with last-warp tile ends (decode_fc1_last; moe_decode.cuh's kLast; two unbalanced groups,
  // every narrow launch with two groups): the last K warp of a group to park a tile's partials
  // finishes it alone, no tile-end barriers.
  int fc1_last = 0;
  // FC1 warps per CTA (0: auto, decode_fc1_warps; 8, or 12 with one row warp and one group).
  int fc1_warps = 0;
  // [Q]'s trigger (DecodeKnobs::q_early): 0 after its wait, 1 before it, 2 none (FC1 launches when
  // [Q] has finished).
  int q_early = 0;
  // [Q]'s loads (DecodeKnobs::q_load, B12X_MOE_Q_LOAD): 0 one after another (ids, then
  // the x row, then the NVFP4 global scale a1gs[id]); 1 the ids and the x row in flight together
  // and a1gs read into shared memory before the wait (weights-side data, like FC1's weights; up
  // to kQGsTable experts, more read a1gs[id]). Same results bit for bit.
  int q_load = 1;
  // [Q]'s NVFP4 quantisation (DecodeKnobs::q_fast, B12X_MOE_Q_FAST): 1 (default) with
  // the 1 / a1gs table and num::quant_block_nvfp4 (H200 round 42: 0.97-1.00x on 15 of 16 nvfp4
  // rows, the same bits), 0 num::quant_block.
  int q_fast = 1;
  // A16 gate (DecodeKnobs::a16_gate): the [Q] kernel runs in A16 launches too, only waiting for
  // the caller, zeroing the balanced FC1's counters and letting FC1 launch, so that FC1 keeps
  // its programmatic edge and routes / streams weights before its wait (instead of a memset
  // node, after which FC1 launches without the edge and waits first).
  int a16_gate = 0;
  // A16 copy gate (launch_decode_stream: default up to kMaxInlineRoutes routes): the gate also
  // copies each route's input row x[route / topk] into xq[route] and FC1 reads xq: every (row
  // block, tile) of a token's routes then reads its own row instead of all of them the token's
  // one row (an L2 hot spot), and FC1 streams weights before its wait.
  int a16_copy = 0;
  int sm_count = 0;  // sizes FC1's tile groups (decode_fc1_tile_groups)
  // Balanced FC1 (decode_fc1_balanced; every mode (A16 unless B12X_MOE_A16_BAL=0), one row
  // warp, one group): CTA (row block x, y) takes the chunk range [N y / Y, (N (y + 1)) / Y) of
  // its row block's N = tiles x K sub-chunks instead of whole tiles y, y + Y, ...; a tile cut
  // between CTAs parks its raw K sums in fc1_part[x * Y + y][head / tail][token][32 rows] and the
  // last of its CTAs (the counter fc1_cnt[x][tile], zeroed by [Q] every launch, in A16 modes by
  // a memset node) adds them in CTA order.
  int fc1_bal = 0;
  float* fc1_part = nullptr;
  int* fc1_cnt = nullptr;
  int fc1_part_slots = 0;  // CTA slots (row blocks x tile groups) fc1_part holds
  int fc1_cnt_rows = 0;    // row blocks fc1_cnt holds (x fc1_cnt_stride counters each)
  int fc1_cnt_stride = kMaxInlineRoutes;  // counters per row block: the kernels' route capacity
  // FC2 split row block as one thread-block cluster (DecodeKnobs::fc2_dsmem, SM90+, fc2_split
  // > 1): the split CTAs add their sums through distributed shared memory (in split order, the
  // same bits) instead of fp32 partials in global memory, a fence, a counter and a reload. (Last:
  // it sits in the struct's tail padding, so no other parameter offset moves.)
  int fc2_cluster = 0;
  // FC1 loads its first tile's alpha / a2gs before the PDL wait (DecodeKnobs::fc1_scal0).
  int fc1_scal0 = 1;
  // FC1 reads [Q]'s operand rows on per-route ready words instead of after its PDL wait for
  // [Q]'s grid (DecodeKnobs::fc1_rdy; launch_decode_stream sets it where it applies, else
  // nullptr): word r = kRdyTag << 16 | the [Q] CTAs of route r that have stored their part
  // (q_ny per route). FC2 resets the fc1_rdy_cap words after its wait (FC1 and [Q] are complete
  // then), so the next call starts from count 0; a word without the tag (the first call on
  // fresh scratch, or scratch another plan wrote) sends FC1 to its PDL wait instead.
  unsigned long long* fc1_rdy = nullptr;
  int fc1_rdy_cap = 0;
  int q_ny = 0;
};
/// The tag of a valid ready word (48 bits; DecodeArgs::fc1_rdy).
inline constexpr unsigned long long kRdyTag = 0xB12C5EEDF1A6ull;
/// Balanced FC1 scratch (DecodeArgs::fc1_bal): counters [row_blocks][route capacity], then
/// fp32 partials [slots][head, tail][4 tokens x 32 rows] for slots = max(row blocks, 3 x 256)
/// CTAs (a one-wave grid of 3 CTAs per SM on up to 256 SMs, or one CTA per row block; plan has
/// no device query: a grid beyond it runs the unbalanced FC1).
inline constexpr int kFc1BalSlotFloats = 4 * 32;
inline int64_t decode_fc1_bal_slots(int64_t row_blocks) {
  return std::max<int64_t>(row_blocks, 3 * 256);
}
/// Counters per row block: the route capacity of the widest FC1 kernel a plan of `routes` runs
/// (tiles <= routes; the kernel indexes by its compile-time capacity).
inline int decode_fc1_bal_cnt_stride(int64_t routes) {
  return routes > kMaxInlineRoutes ? kMaxStreamRoutes : kMaxInlineRoutes;
}
inline int64_t decode_fc1_bal_cnt_bytes(int64_t row_blocks, int64_t routes) {
  return (row_blocks * decode_fc1_bal_cnt_stride(routes) * 4 + 255) / 256 * 256;
}
inline int64_t decode_fc1_bal_bytes(int64_t row_blocks, int64_t routes) {
  return decode_fc1_bal_cnt_bytes(row_blocks, routes) +
         decode_fc1_bal_slots(row_blocks) * 2 * kFc1BalSlotFloats * 4;
}
/// The decode stream's measurement knobs from the environment (Plan::knobs; moe.cc, at plan
/// time): values outside the supported ones are logged and replaced by the default; knobs set for
/// a plan that does not use them (`stream`: the plan runs the FP4 decode stream; `aquant`: its
/// activation quantisation, num::AQuant) are logged as ignored.
DecodeKnobs read_decode_knobs(bool stream, int aquant);
/// Whether [Q] runs its lean instance (moe_decode_quant_kernel<true>, DecodeKnobs::q_lean 1,
/// default): NVFP4 activations from BF16 x with [Q]'s scale table holding 1 / a1gs (q_load and
/// q_fast, up to kQLeanMaxExperts experts) — the default launch, whose other paths' runtime
/// branches it folds (H200 round 102: 0.985-1.002x on the 16 nvfp4 M <= 8 rows, the same bits).
inline constexpr int kQLeanMaxExperts = 512;
inline bool decode_q_lean(const DecodeKnobs& k, int aquant, bool x_fp16, int64_t experts) {
  return k.q_lean != 0 && aquant == num::kANvfp4 && !x_fp16 && k.q_load != 0 && k.q_fast != 0 &&
         experts <= kQLeanMaxExperts;
}
/// Whether an A16 decode-stream plan holds the per-route FC1 input rows of the copy gate
/// (DecodeKnobs::a16_gate: -1, the default rule of launch_decode_stream, or 3).
inline bool decode_a16_copy_rows(const DecodeKnobs& k) {
  return k.a16_gate == -1 || k.a16_gate == 3;
}
/// Upper bound of the FC2 tile split for `routes` routes (plan sizes the fp32 partials with it):
/// 4 (up to 8 routes only the 1-token 32-row FC2 splits, decode_fc2_rows / split32; the 16-row FC2
/// never: decode_fc2_split; session 22 bounded it at 2 there). `forced` (DecodeKnobs::fc2_split,
/// B12X_MOE_FC2_SPLIT=1..4) forces the split.
inline int decode_fc2_split_bound(int64_t /*routes*/, int forced = 0) {
  if (forced >= 1 && forced <= 4) return forced;
  return 4;
}
/// Whether a split FC2 row block runs as one thread-block cluster whose CTAs add their sums
/// through distributed shared memory (DecodeArgs::fc2_cluster; the same order and bits as the
/// fp32 partials, their fence, counter and reload gone), for the 32-row FC2 (`rows`; only its
/// instances carry the cluster tail, which grew moe_decode.cu's sm_90a compile by ~20 % in all
/// 44 FC2 instances): DecodeKnobs::fc2_dsmem 1 (default) where the split is 2, on SM90 (measured
/// there only; clusters need cc >= 9), 2 at any split, 0 never. H200 round 85 (session 23), us,
/// partials -> cluster: split 2 Qwen3-30B nvfp4 M = 1 21.5
/// -> 20.9 (0.975x), MiniMax nvfp4 M = 4 / 8 148.1 -> 144.9 / 256.6 -> 253.4 (0.979 / 0.988x),
/// Qwen3.5-TP4 nvfp4 M = 1 / 2 / 4 / 8 0.993 / 1.000 / 0.997 / 0.996x, w4a16 M = 1 / 8 0.998 /
/// 0.994x; clusters of 4 (Qwen3-30B M = 2 / 4 / 8, split 4) 1.16-1.20x, of 3 (Qwen3.5-TP4 M = 1
/// split 3, 2 stages) 1.20x.
/// `fit`: Plan::fc2_cluster_fit (bit s: a cluster of s CTAs fits the device, asked at plan time
/// by decode_fc2_cluster_fit), so a device or MIG slice where it does not fit takes the partials.
inline bool decode_fc2_cluster(const DecodeKnobs& k, int split, int cc_major, int rows, int fit) {
  if (rows != 32 || split < 2 || split > 4 || cc_major < 9 || ((fit >> split) & 1) == 0)
    return false;
  return k.fc2_dsmem == 2 || (k.fc2_dsmem == 1 && split == 2 && cc_major == 9);
}
/// The largest FC2 cluster decode_fc2_cluster can take under these knobs (< 2: none), the splits
/// plan asks decode_fc2_cluster_fit about.
inline int decode_fc2_cluster_max_split(const DecodeKnobs& k, int cc_major) {
  if (cc_major < 9 || k.fc2_dsmem == 0) return 0;
  return k.fc2_dsmem == 2 ? 4 : cc_major == 9 ? 2 : 0;
}
/// Plan time (sets the device): bit s (2 <= s <= max_split) set where a cluster of s CTAs of every
/// 32-row FC2 instance of the weights' scale kind (both operand types, 2 / 3 stages, K-interleaved
/// or not, at their largest shared memory) can be resident on `device`.
int decode_fc2_cluster_fit(int device, int scale_kind, int max_split);
/// FC2 tile split of a run over `row_blocks` 16-row blocks (rows_pad(H) / 16) on `sm_count`
/// SMs: as many CTAs per row block as one wave of 3 CTAs per SM holds, from 2 to 4 (1 below)
/// (above 64 routes: one split per 16 routes, at most ~1.25 waves). Up to 16 routes only where
/// that gives >= 3 (few row blocks). H200 round 13, Qwen3-30B (128 row blocks) nvfp4 with 3
/// splits instead of 1 / 2 / 4 at M = 2 / 4 / 8: 37.8 -> 34.2, 54.7 -> 50.2, 82.2 -> 79.3 us;
/// DeepSeek-TP4 (448 row blocks) M = 8 with 3 instead of 2: 170 -> 179; Qwen3.5-TP4 (256) M = 8
/// the same with 2 or 3; every shape slower with a split at M = 1. From 64 routes at least as
/// many as one wave of the 2-stage FC2 (4 CTAs per SM, decode_fc2_stages) holds: H200 round 17,
/// Qwen3-30B M = 8 with 4 splits of 2-stage CTAs instead of 3 of 3-stage ones: nvfp4 / w4a16
/// 74.9 / 76.8 -> 73.4 / 71.7 us (at M = 4, 32 routes, 47.6 -> 49.5: not there). Up to 64 routes
/// no split where the row blocks alone exceed one wave of 3 CTAs per SM (the FC2 then runs its
/// 2-stage CTAs, 4 per SM, and two splits would add a second partial wave: DeepSeek-TP4's 448 row
/// blocks, 896 CTAs on 528 slots). H200 round 37, DeepSeek-TP4 nvfp4 M = 4 93.5 -> 89.0 us, M = 8
/// 147.8 -> 148.1.
inline int decode_fc2_split(int64_t routes, int64_t row_blocks, int sm_count, int forced = 0) {
  if (forced >= 1 && forced <= 4) return forced;
  if (routes <= 8) return 1;  // (H200 round 82, M = 1 16-row splits 2-4: 0.99-1.42x)
  const int64_t rb = row_blocks > 0 ? row_blocks : 1;
  const int64_t sms = sm_count > 0 ? sm_count : 1;
  int64_t split;
  if (routes > 64) {
    const int64_t by_grid = (15 * sms + 4 * rb - 1) / (4 * rb);  // ceil(1.25 * 3 * SMs / rb)
    const int64_t by_routes = (routes + 15) / 16;
    split = std::max<int64_t>(1, std::min<int64_t>({4, by_grid, by_routes}));
  } else {
    const int64_t wave = std::min<int64_t>(4, std::max<int64_t>(2, 3 * sms / rb));
    split = (routes <= 16 && wave < 3) || rb > 3 * sms ? 1 : wave;
  }
  if (routes >= 64) split = std::max<int64_t>(split, std::min<int64_t>(4, 4 * sms / rb));
  return static_cast<int>(split);
}
/// Ring stages of the shallow 8-warp FC2 CTA: 2 (4 CTAs per SM) where the grid exceeds one wave
/// of 3 CTAs per SM — for the row blocks alone (DeepSeek-TP4's 448: H200 round 16, nvfp4 M = 1 /
/// 2 / 4 / 8 35.8 / 65.5 / 106.8 / 169.5 -> 33.8 / 56.7 / 97.3 / 164.4 us), or with the split
/// from 64 routes (Qwen3-30B M = 8 above; Qwen3.5-TP4 M = 8 233.4 -> 225.8 in round 16), or below
/// 64 routes where the split grid then fits one wave of 4 CTAs per SM (Qwen3.5-TP4 M = 2 / 4: 512
/// CTAs, 1.3 waves of 3 per SM; H200 round 30, nvfp4, 79.3 / 81.2 -> 75.9 us and 127.3 / 128.6
/// -> 122.0; round 16 had M = 4 5 % slower before the FC2 chunk ranges) — else 3 (grids within a
/// 3-per-SM wave lose with the shallower ring: round 30, Qwen3-30B nvfp4 M = 4, 384 CTAs, 47.6 /
/// 47.0 -> 49.3 us; MiniMax w4a16 M = 1 63.9 / 64.6 -> 68.1).
inline int decode_fc2_stages(int64_t routes, int64_t row_blocks, int fc2_split, int sm_count) {
  const int64_t sms = sm_count > 0 ? sm_count : 1, grid = row_blocks * fc2_split;
  return row_blocks > 3 * sms || (grid > 3 * sms && (routes >= 64 || grid <= 4 * sms)) ? 2 : 3;
}
/// Session 18: two FC1 groups with last-warp tile ends where a tile has > 32 sub-chunks
/// (decode_fc1_groups; per_cta = routes / the tile groups of 3 CTAs per SM).
bool decode_fc1_long_groups(int routes, int per_cta, int k_chunks);
/// FC1 warp groups per CTA (1 or 2; 2 only with fc1_wm == 1) of the decode stream.
int decode_fc1_groups(const DecodeKnobs& k, int routes, int row_blocks, int sm_count, int wm,
                      int k_chunks);
/// FC1 row warps per CTA (1, or 2 for gated activations with MX-quantised FC2 inputs).
int decode_fc1_row_warps(int aquant, bool gated);
/// Launches the decode stream (fp16_operands: FP16 MMA for fp16 A16 inputs) with the launch
/// shape the plan's knobs select (no environment read here).
void launch_decode_stream(const DecodeArgs& args, const DecodeKnobs& knobs, bool fp16_operands,
                          Stream stream, bool pdl);
/// K-interleaved FC2 warps (DecodeArgs::fc2_kil: warp w takes chunks w, w + kW, ... of its CTA's
/// range, so the CTA's warps stream neighbouring 64-byte pieces of the same rows together, FC1's
/// K order, at a combine flush per tile and warp) for `tokens` tokens and `nk` FC2 sub-chunks per
/// tile (K_pad(I) / 128): up to 8 tokens where a tile has >= 16 sub-chunks (>= 2 per warp and
/// tile). H200 round 49, contiguous -> interleaved, us: MiniMax (nk 24) nvfp4 M = 1 / 2 / 4 / 8
/// 63.5 -> 61.4, 110.7 -> 104.6, 201.6 -> 195.3, 362.3 -> 341.0, w4a16 M = 1 / 8 59.3 -> 59.1,
/// 356.5 -> 337.1 (FC2 alone at M = 8, Nsight Compute: 152.9 -> 135.9 us, DRAM 43.0 -> 47.6 %,
/// 0.56 -> 0.73 issued per scheduler and cycle); slower with nk 4 / 6 / 8 (one flush per 0.5-1
/// sub-chunk per warp): DeepSeek-TP4 1.026-1.113x, Qwen3-30B 0.989-1.104x, Qwen3.5-TP4
/// 1.019-1.092x. DecodeKnobs::fc2_kil 0 / 1 forces it. It runs in the 8-warp 3-stage FC2 CTAs
/// (16 or 32 rows, narrow routing: every FC2 of MiniMax at M <= 8); the others ignore it.
/// Session 16, on the chunk-tiled codes: from 3 tokens (each chunk's 16 or 32 rows are one
/// contiguous run, so neighbouring warps no longer share 128-byte lines). H200 rounds 60 / 61,
/// MiniMax 16-row FC2, interleaved -> contiguous, us: nvfp4 M = 1 57.4 -> 56.0 / 55.9 -> 53.8
/// (0.976 / 0.963x), M = 2 97.2 -> 91.9 (0.945x), w4a16 M = 1 53.5 -> 51.9 (0.969x; FC2 in the
/// chain 18.6 -> 16.7). At 4-8 tokens MiniMax's FC2 is the 2-stage 32-row CTA (contiguous
/// anyway); the interleave still decides its rows (decode_fc2_rows).
inline bool decode_fc2_kil(const DecodeKnobs& k, int64_t tokens, int nk) {
  return k.fc2_kil >= 0 ? k.fc2_kil != 0 : tokens >= 3 && tokens <= 8 && nk >= 16;
}
/// Whether the 32-row FC2's split is rounded up where its wave is < 80 % full (decode_fc2_split32's
/// `kil`): with the K-interleaved warps (decode_fc2_kil, 3-8 tokens), and (session 23) at 2 tokens
/// on tiles of >= 16 sub-chunks unless the interleave is forced off. H200 round 87, MiniMax nvfp4
/// M = 2 (192 blocks), 16 rows split 1 -> 32 rows split 2 (384 CTAs, the 2-stage CTA, a split-2
/// cluster): 88.7 -> 84.0 us (0.948x).
inline bool decode_fc2_round_up(const DecodeKnobs& k, int64_t tokens, int nk) {
  return decode_fc2_kil(k, tokens, nk) || (tokens == 2 && nk >= 16 && k.fc2_kil != 0);
}
/// FC2 split of the 32-row FC2 CTA (3-stage ring, 2 CTAs per SM): the most CTAs per row block
/// (<= 4, <= the plan's partials for `routes`) that keep the grid within one wave of 2 per SM;
/// `kil` (K-interleaved warps): where that fills < 80 % of the wave, the split that covers it
/// (MiniMax's 192 blocks: 2, 384 CTAs, 1.45 waves; see decode_fc2_rows).
/// `one_token` (session 22): a 1-token launch, which split up to 8 routes too (more tokens with
/// <= 8 routes did not: session 23 lifts that, the partials hold 4 splits at any route count:
/// MiniMax at 2 tokens, 8 routes, below); session 23: like more tokens, up to 4 (session 22: up to
/// 2; H200 round 85, Qwen3-30B nvfp4 M = 1, 64 row blocks, split 2 -> 4: 21.5 -> 20.1 us, 0.939x;
/// round 86 20.7 against 22.1, w4a16 22.3 against 23.1), and rounded up like the K-interleaved
/// FC2's where the wave is < 80 % full (MiniMax's 192 blocks: split 2, 384 CTAs, which the 2-stage
/// CTA runs in one wave of 3 per SM, decode_fc2_stages32; split-2 clusters, decode_fc2_cluster:
/// nvfp4 M = 1 53.5 -> 50.6 us in round 86, 0.945x, 52.6 -> 50.9 in round 85; without the
/// cluster 0.969x; DeepSeek-TP4's 224 blocks fill 85 %: split 2 there 1.142x).
inline int decode_fc2_split32(int64_t routes, int64_t row_blocks32, int sm_count, bool kil = false,
                              bool one_token = false) {
  const int64_t wave = 2 * std::max(sm_count, 1), rb = std::max<int64_t>(row_blocks32, 1);
  int64_t per = wave / rb;
  if ((kil || one_token) && 5 * rb * per < 4 * wave) per = (wave + rb - 1) / rb;
  const int64_t cap = decode_fc2_split_bound(routes);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({4, per, cap})));
}
/// Output rows per FC2 CTA (DecodeArgs::fc2_rows) of a launch of `tokens` tokens and `routes`
/// routes, FC2 rows padded to `rows_pad`: 32 (two 16-row MMA tiles per warp, 3 ring stages, 2
/// CTAs per SM, split decode_fc2_split32) from 2 to kFc2Rows32MaxTokens (8) tokens up to
/// kMaxInlineRoutes routes where that grid fills >= 80 % of one wave of 2 CTAs per SM, else 16.
/// H200 round 46 (132 SMs), us, 16 rows -> 32 rows: Qwen3.5-TP4 (128 32-row blocks, split 2)
/// nvfp4 M = 2 / 4 / 8 70.6 -> 68.4, 117.5 -> 113.7, 211.0 -> 203.0, w4a16 M = 8 205.0 ->
/// 196.9; DeepSeek-TP4 (224, split 1) nvfp4 50.2 -> 47.2, 86.6 -> 82.9, 148.6 -> 139.3, w4a16
/// M = 8 145.2 -> 137.1; Qwen3-30B (64, split 4) nvfp4 31.7 -> 30.1, 46.8 -> 45.1, 71.8 -> 69.3,
/// w4a16 M = 8 72.0 -> 69.0. MiniMax (192 blocks: 73 % of the wave) keeps 16 rows (split 1:
/// M = 2 / 4 / 8 1.075 / 1.089 / 1.080x; its 16-row split of 2, 1.45 waves: 1.078 / 1.088 /
/// 1.001x), and M = 1 too (round 45: 1.01-1.24x with fewer, longer CTAs). FC2 issues on ~68 %
/// of the cycles at M = 8 (Qwen3.5-TP4, Nsight Compute): the 32-row CTA cuts its instructions
/// by 22 % (46.1 -> 36.1 M) with fewer warps per SM. DecodeKnobs::fc2_rows 16 / 32 forces it.
/// `ctas32` = the 32-row CTAs (3 stages, 8 tokens) that fit one SM's shared memory: the rule was
/// measured with 2 per SM (SM90); a device that fits fewer (SM12x: ~100 KB per SM, one 93 KB
/// CTA) keeps 16 rows unless forced.
/// `nk`: FC2 sub-chunks per tile (decode_fc2_kil): with K-interleaved warps the 32-row CTA also
/// runs where only the rounded-up split fills the wave (decode_fc2_split32), from 4 tokens.
/// H200 round 49, MiniMax nvfp4 (192 blocks), 16 rows interleaved -> 32 rows split 2
/// interleaved: M = 1 61.4 -> 65.8 us, M = 2 104.6 -> 106.0, M = 4 195.3 -> 192.8, M = 8 341.0
/// -> 327.3 (FC2 124.0 -> 109.5 in the chain; 362.3 with the session-12 default).
/// Session 22: also at 1 token, whatever the wave (split decode_fc2_split32, at most 2 up to 8
/// routes: Qwen3-30B 64 x 2, Qwen3.5-TP4 128 x 2, DeepSeek-TP4 224 x 1, MiniMax 192 x 1 CTAs,
/// all 3-stage), instead of the deep 16-row CTA (one per SM) or the shallow ones. H200 round 82,
/// nvfp4 M = 1, us, 16 -> 32 rows: DeepSeek-TP4 30.4 -> 29.2 (0.962x), MiniMax 53.2 -> 52.0
/// (0.977x), Qwen3.5-TP4 38.3 -> 38.0 / 37.7 (0.992 / 0.983x; w4a16 0.980x), Qwen3-30B 21.8 ->
/// 21.4 (0.984x; split 1, 64 CTAs, 1.079x); round 45 had 1.01-1.24x on the kernels of then.
inline int decode_fc2_rows(const DecodeKnobs& k, int64_t tokens, int64_t routes, int rows_pad,
                           int sm_count, int ctas32 = 2, int nk = 0) {
  if (k.fc2_rows == 16 || tokens > 8 || routes > kMaxInlineRoutes) return 16;
  if (k.fc2_rows == 32) return 32;
  if (ctas32 < 2) return 16;
  if (tokens == 1) return 32;
  const int64_t rb = rows_pad / 32, wave = 2 * std::max<int64_t>(sm_count, 1);
  const bool kil = decode_fc2_kil(k, tokens, nk), up = decode_fc2_round_up(k, tokens, nk);
  const bool rounded_up = kil && 5 * rb * (wave / std::max<int64_t>(rb, 1)) < 4 * wave;
  return tokens >= (rounded_up ? 4 : 2) &&
                 5 * rb * decode_fc2_split32(routes, rb, sm_count, up) >= 4 * wave
             ? 32
             : 16;
}
/// Ring stages of the 32-row FC2 CTA (DecodeArgs::fc2_stages32) for `row_blocks32` 32-row blocks
/// x `split` CTAs on `sm_count` SMs: 2 (3 CTAs per SM, contiguous warp ranges) where that grid
/// exceeds one wave of the 3-stage CTA's 2 per SM but fits one wave of 3 per SM (`ctas2`: the
/// 2-stage CTAs that fit one SM, decode_fc2_rows32_ctas(device, 2)), else 3 (2 per SM, with the
/// K-interleaved warps where decode_fc2_kil takes them). H200 round 57 (session 15, chunk-tiled
/// codes), MiniMax nvfp4 (192 blocks, split 2: 384 CTAs, 1.45 waves of 2 per SM -> one wave of 3),
/// us, 3-stage K-interleaved -> 2-stage: M = 4 173.0 -> 158.9, M = 8 303.8 -> 284.1, w4a16 M = 8
/// 296.9 -> 280.6 (0.92-0.95x); Qwen3.5-TP4 (128 x 2 = 256 CTAs, one wave of 2 already) with
/// split 3 in the 2-stage CTA 0.990-0.998x (kept). DecodeKnobs::fc2_stages 2 / 3 forces it.
inline int decode_fc2_stages32(const DecodeKnobs& k, int64_t row_blocks32, int split, int sm_count,
                               int ctas2) {
  if (k.fc2_stages == 2 || k.fc2_stages == 3) return k.fc2_stages;
  const int64_t ctas = row_blocks32 * std::max(split, 1), sms = std::max(sm_count, 1);
  return ctas2 >= 3 && ctas > 2 * sms && ctas <= 3 * sms ? 2 : 3;
}
/// Dynamic shared memory of the larger FC1 variant (plan-time checks and tests).
int decode_fc1_smem_bytes();
/// The 32-row FC2 CTAs (`stages` 3 or 2, 8 tokens) that fit one SM of `device` (shared memory
/// per SM over the CTA's dynamic + static bytes and the runtime's 1 KB per block), at most 2
/// (3 stages) / 3 (2 stages). Plan time.
int decode_fc2_rows32_ctas(int device, int stages = 3);
/// FC1 grid.y: expert-tile groups (a CTA walks tiles y, y + groups, ...), about one wave of
/// `ctas_per_sm` CTAs per SM (DecodeKnobs::fc1_groups forces it).
int decode_fc1_tile_groups(const DecodeKnobs& k, int routes, int row_blocks, int sm_count,
                           int ctas_per_sm);
/// FC1 warps per CTA (8, or 12 where that shortens the per-warp chain of tiles x sub-chunks).
int decode_fc1_warps(const DecodeKnobs& k, int routes, int row_blocks, int sm_count, int wm,
                     int groups, int k_chunks);
/// DecodeArgs::fc1_last of a launch with these FC1 row warps, warps, groups and balance (wide:
/// more than kMaxInlineRoutes routes): 1 where the last-warp tile ends run, else 0.
int decode_fc1_last(bool wide, int wm, int warps, int groups, int bal);
/// grid.y of the last-warp two-group FC1 from the one-wave tile groups y (DecodeKnobs::fc1_fine:
/// finer grids on long tiles).
int decode_fc1_fine_groups(const DecodeKnobs& k, int routes, int k_chunks, int y);
/// Whether the FC1 takes balanced chunk ranges (DecodeArgs::fc1_bal) where they can run.
bool decode_fc1_balanced(int routes, int tile_groups, int warps, int k_chunks);
/// FC2 with the deep ring (one CTA per SM, 5 stages per warp): fc2_split == 1, few routes and
/// at most 2 row blocks per SM (more would cost extra waves at one CTA per SM).
inline constexpr int kFc2DeepMaxRoutes = 16;
bool decode_fc2_deep(const DecodeKnobs& k, int routes, int fc2_split, int row_blocks, int sm_count);

/// Routing (grouped regime): tiles, slot -> route and slot -> expert maps; counts[1] = slots.
void launch_route(const void* ids, bool ids64, int64_t routes, int num_experts, int tile_tokens,
                  int* tiles, int* counts, int* slot_route, int* slot_expert, Stream stream);
/// Quantise-dequantise activation rows once per slot into operand values (BF16, physical order):
/// dst[s, :] = q(src[row(s), :]) with the NVFP4 global scale of slot s's expert. row(s) =
/// slot_route[s] / topk (by_token) or s. In place when src == dst. Launched after routing (PDL).
void launch_quant_rows(const void* src, bool src_fp16, int64_t src_ld, bool by_token, int topk,
                       const int* slot_route, const int* slot_expert, const int* counts,
                       const float* gs, int aquant, uint16_t* dst, int64_t dst_ld, int K,
                       int64_t max_rows, Stream stream, bool pdl);
/// pdl: launch with programmatic stream serialization (only for a kernel whose predecessor in
/// the stream is the previous kernel of this op; it then waits for it on the device).
void launch_gemm(int wfmt, bool fp16_operands, int cfg, const GemmArgs& args, int grid_rows,
                 int grid_tiles, Stream stream, bool pdl);
/// launch_gemm's per-format instantiation units (moe_gemm_<format>.cu).
void launch_gemm_fp4(bool fp16, int cfg, const GemmArgs& a, int gx, int gy, Stream s, bool pdl);
void launch_gemm_q8_0(bool fp16, int cfg, const GemmArgs& a, int gx, int gy, Stream s, bool pdl);
void launch_gemm_iq2xxs(bool fp16, int cfg, const GemmArgs& a, int gx, int gy, Stream s, bool pdl);
void launch_gemm_iq2xs(bool fp16, int cfg, const GemmArgs& a, int gx, int gy, Stream s, bool pdl);
void launch_combine(const float* route_out, int64_t M, int64_t H, int topk, const void* ids,
                    bool ids64, int num_experts, const float* weights, bool weight_on_input,
                    void* out, bool out_fp16, int64_t out_ld, Stream stream, bool pdl);

/// Source description for the device repack of one operand.
struct RepackSrc {
  const uint8_t* values = nullptr;                          // packed FP4 bytes or GGML blocks
  int64_t values_expert_stride = 0, values_row_stride = 0;  // bytes
  const uint8_t* scales = nullptr;
  int64_t scales_expert_stride = 0, scales_row_stride = 0;  // bytes (row stride: plain grids)
  int scales_swizzled = 0;  // NVFP4: 128x4 swizzle with K/16 logical columns
  int src_rows = 0;         // rows of the source
  // FC1 gated reorder: prepared row -> source row (see moe.cc row_map)
  int gated = 0;
  int w13 = 1;  // 1: source [up; gate], 0: [gate; up]
  int features = 0;
};
void launch_repack(int wfmt, const RepackSrc& src, const WeightView& dst, uint8_t* values,
                   uint8_t* scales, int num_experts, Stream stream);

}  // namespace b12x::moe::detail
