// b12x: paged causal GQA attention (decode, verify, extend) over a paged KV cache, and the KV
// append op that writes new K/V rows into that cache.
//
// Lifecycle (docs/DEVELOPING.md): plan_paged(caps) sizes ONE uint8 scratch buffer from
// capacities; bind_paged(plan, scratch, args) checks shapes and does pointer arithmetic only;
// run_paged(binding, stream) launches only. The live schedule (which request, row tile and KV
// split each CTA serves) is derived on the device from cache_seqlens / cu_seqlens_q each launch,
// so one plan + binding can be captured in a CUDA graph and replayed with new lengths and page
// tables written in place into the same metadata buffers.
//
// Semantics (b12x-contract §4):
//  - k_cache / v_cache: [num_pages, page_size, Hkv, D] views, head_dim contiguous, any other
//    strides (16-byte aligned), e.g. the K and V planes of one [num_pages, 2, page, Hkv, D] cache.
//  - page_table int32 [B, W]; cache_seqlens int32 [B] = KV length INCLUDING the new tokens;
//    cu_seqlens_q int32 [B+1]; q [T, Hq, Dqk]; out [T, Hq, Dv]. Only page-table entries that
//    cover a request's first cache_seqlens tokens are read.
//  - Right-aligned causal mask: query row i of a request (q_len Lq, kv length Lk) sees key j iff
//    j <= i + Lk - Lq; with window_left >= 0 also j >= i + Lk - Lq - window_left (inclusive).
//  - sinks fp32 [Hq] (natural-log logit units) add exp(sink) to the softmax denominator only.
//  - softmax scale Dqk^-0.5 unless softmax_scale > 0 is given.
//  - FP8 E4M3 KV: k_descale / v_descale fp32 [B], [B, 1], [B, Hkv] or [1] (broadcast), required.
//  - lse (optional) fp32 [T, Hq] (any strides): BASE-2 log-sum-exp of the scaled logits,
//    including the sink.
//  - Output rows of tokens at or beyond cu_seqlens_q[B] are not written.
#pragma once

#include <cstdint>
#include <string>

#include "b12x/types.h"

namespace b12x::attention {

enum class Mode : int32_t {
  kDecode = 0,  ///< one query token per request
  kExtend = 1,  ///< prefill / chunked prefill with a cached prefix, any q_len per request
  kVerify = 2,  ///< speculative verify: uniform q_len > 1 per request (T = B * q_len)
};
const char* mode_name(Mode m) noexcept;

/// @brief Capacities a plan is built for. Every later bind must fit inside them.
struct PagedCaps {
  int device = 0;
  Mode mode = Mode::kDecode;
  DType q_dtype = DType::kBF16;   ///< q and out: bf16 or fp16
  DType kv_dtype = DType::kBF16;  ///< bf16 (bf16 q), fp16 (fp16 q) or fp8_e4m3 (bf16 q)
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim_qk = 0;  ///< 64, 128, 192, 256
  int head_dim_vo = 0;  ///< equal to head_dim_qk, or 128 with head_dim_qk 192
  int page_size = 0;    ///< 16, 32, 64, 128 (any power of two in [16, 256])
  int max_batch = 0;
  int max_page_table_width = 0;  ///< W: pages per request the page table can hold
  int max_total_q = 0;           ///< T capacity (decode: equals max_batch)
  /// Largest number of KV splits per (request, row tile); 0 = automatic (from SM count and
  /// capacities), 1 = never split. Split partials live in the scratch.
  int max_splits = 0;
  bool use_cuda_graph = false;  ///< informational: every plan is capture-safe
  /// The caller's promise that the K/V prefix each call reads is final when the call is
  /// launched: no kernel that may still run when this attention launches (one that let it
  /// launch early through programmatic dependent launch, griddepcontrol.launch_dependents, or
  /// one before such a kernel) writes K/V cache rows at positions below
  /// cache_seqlens[b] - q_len of request b in the pages page_table[b] names. Rows at and above
  /// cache_seqlens[b] - q_len (the new tokens the KV append writes) and the metadata (page_table,
  /// cache_seqlens, cu_seqlens_q) may still be written by such a kernel. vLLM's call path keeps it:
  /// the append (reshape_and_cache_flash) writes the new tokens' slots only, and finished pages
  /// are never rewritten in place while a request references them.
  /// With it, decode / verify plans of the lean speculative kernels (PagedPlan::early_kv) copy
  /// their first K/V tiles before the PDL wait. Read before the wait: cu_seqlens_q[b],
  /// cu_seqlens_q[b + 1], cache_seqlens[b], the page_table entries of the CTA's first (up to
  /// kStages - 1) K/V tiles, and the K/V rows of those of them whose rows all lie below
  /// cache_seqlens[b] - q_len. The metadata and page ids are read again after the wait; a CTA
  /// that read a stale value discards its copies and starts over, so only the rows themselves
  /// rest on the promise. Default false (C ABI: the B12X_PAGED_CAPS_KV_PREFIX_STABLE flag of
  /// b12x_attention_paged_plan_create_ex; the Python Caps, vLLM's surface, sets it).
  /// B12X_ATTN_EARLY_KV=0 turns the early copies off (benchmarking).
  bool kv_prefix_stable = false;
};

/// @brief A plan: the kernel variant, split policy and scratch layout for some capacities.
struct PagedPlan {
  PagedCaps caps;
  int64_t scratch_bytes = 0;  ///< size of the ONE uint8 scratch buffer bind() needs
  // ---- chosen by plan (read-only for callers) ----
  int tile_rows = 0;     ///< packed (query token x head-in-group) rows per CTA
  int tile_kv = 0;       ///< KV tokens per pipeline stage
  int max_splits = 1;    ///< splits the scratch has room for
  int min_split_kv = 0;  ///< smallest KV chunk a split serves
  int sm_count = 0;
  int arch = 0;              ///< 89, 90, 120, 121
  bool use_pdl = true;       ///< programmatic dependent launch on SM90+ (B12X_ATTN_PDL=0: off)
  int target_ctas = 0;       ///< CTAs that fill the device once (SMs x occupancy)
  bool heads_inner = false;  ///< grid x = (row tile, KV head), heads fastest (decode default;
                             ///< B12X_ATTN_GRID=heads|tiles)
  int split_limit = 1;       ///< most splits any bind may launch
  /// CTAs per SM the split model's waves count (0: the kernel's occupancy, target_ctas). wideh
  /// (3 CTAs per SM90 SM) is modelled at 2: H200 round 45, 16/2/256 page 128 x 8k, grids of 256
  /// CTAs beat the full 396-slot wave (B=4 s=32 24.6 vs s=43 24.9 us, B=8 s=16 39.4 / 39.5 vs
  /// s=24 40.8 / 41.0, B=16 s=8 67.5 vs s=12 70.6); round 46 as the default: B=4 24.8 vs 25.1,
  /// B=8 40.4 / 39.8 vs 41.5, B=16 67.6 vs 70.7. B12X_ATTN_SPLIT_OCC=n overrides (0: off).
  int split_occ = 0;
  /// Split model, early-K/V plans of the 16-bit 3-stage tiles (wide3, wideh3): a cost in KV-tile
  /// steps of the wave's CTAs beyond one per SM, weighted by the share of a split's tiles the
  /// early copies cover: split_pair x (min(CTAs, slots) - SMs) / SMs x split_pair_free / (tiles
  /// per split), split_pair_free = stages - 1, except for one wave of splits of at most
  /// split_pair_free tiles. Under early K/V a wave with free slots lets the next call's CTAs
  /// enter and issue their early copies while this call streams (session 15's stamps: 88 of
  /// them ~12 us before their release at 22 splits, none at 32), which the slot count alone
  /// does not see; the shorter the splits, the larger that share. 6 (0 elsewhere), fitted to
  /// H200 rounds 72-73 (us, old -> new count; 64/8/128 p128, 32/8/128 p64): B = 1 x 8k 32 -> 26
  /// 14.1 -> 13.2, 12.9 -> 12.6; x 6k 32 -> 24 12.2 -> 10.7, 11.1 -> 10.6; B = 2 x 4k 16 -> 13
  /// 13.9 -> 13.1, 13.9 -> 13.0; B = 3 x 2k 11 -> 8 11.8 -> 11.2, 11.4 -> 11.0; 32/4/128 B = 2 x
  /// 8k 32 -> 26 14.3 -> 13.2, B = 1 x 16k 64 -> 52 14.2 -> 14.0; 16/2/256 B = 2 64 -> 52 16.0
  /// -> 15.7. Kept: x 32k (s = 24 36.4 vs 32 35.5), B = 2 / 4 / 8 x 8k, B = 6 x 2k (s = 5 17.8 /
  /// 16.6 vs 4 18.5 / 17.1), 16/2/256 B = 4 (s = 26 22.9 = 32). No gain for the FP8 tiles (hcvt3
  /// B = 1 s = 24 11.7 vs 32 10.9; hcvt d256 B = 4 s = 24 16.5 vs 32 15.4).
  /// B12X_ATTN_SPLIT_PAIR=x overrides (0: off).
  double split_pair = 0;
  int split_pair_free = 0;
  /// The online softmax keeps its running max (and skips the O rescale) unless a tile's max
  /// exceeds it by more than this many base-2 units: P then stays below 2^slack, exact in
  /// fp32 accumulation (B12X_ATTN_RESCALE_SLACK; 0 = rescale on every increase).
  float rescale_slack = 8.f;
  /// Decode/verify CTAs prefetch their first K/V tiles into L2 before waiting for the previous
  /// kernel (programmatic dependent launch), from metadata read through L2 that may still be
  /// stale: only prefetch addresses depend on it. `prefetch`: in every bind; `prefetch_splits`:
  /// in binds that split the KV (num_splits > 1: short CTAs whose first tiles' round trip is a
  /// large share of their time). B12X_ATTN_PREFETCH=1 sets `prefetch`, =0 clears both.
  bool prefetch = false;
  bool prefetch_splits = true;
  /// K/V tiles per CTA the prefetch covers (0: those the ring's prologue issues, kStages - 1;
  /// B12X_ATTN_PREFETCH_TILES).
  int prefetch_tiles = 0;
  /// Decode/verify tiles fill every stage of their K/V ring before the first wait (wide3 then
  /// loads Q's fragments from global memory instead of staging Q in the ring), so a short
  /// split has one more tile in flight behind its first round trip (B12X_ATTN_FULL_RING=1|0).
  /// Off: no gain for BF16 and 10% slower FP8 at B=1 x 8k on the H200 (round 16).
  bool full_ring = false;
  /// Decode/verify: a split of n < stages tiles keeps n - 1 (at least 1) tiles in flight ahead
  /// of the one it computes instead of stages - 1 (B12X_ATTN_SHORT_AHEAD=1|0; on: FP8 B=1 x 8k
  /// on the 3-stage hcvt3 ring 14.2 -> 13.1 us on the H200, session 5's final round).
  bool short_ahead = true;
  /// Decode/verify tiles: split s of a row tile takes the KV tiles s, s + splits, ... instead of
  /// one contiguous chunk; a long range then knows its first tiles' page-table entries before
  /// the lengths arrive and loads both in one round trip (B12X_ATTN_SPLIT_INTERLEAVE=1|0).
  /// Decode tiles only: plan_paged leaves it false for the extend tiles.
  /// Off: no gain on the H200 (round 17: B=1 x 8k BF16 16.2 vs 15.9 us, FP8 14.8 vs 14.2).
  bool split_interleave = false;
  /// K/V tiles whose rows are all live and lie in one page, or page-aligned in exactly two,
  /// form each thread's row address once per page and advance it by token strides (the copies
  /// then skip the per-row page-id load, clamp, 64-bit multiply-add and zero-fill predicate;
  /// B12X_ATTN_PAGE_RUNS=1|0).
  bool page_runs = true;
  /// Decode tiles: each warp merges the other warps' states into, and stores, its own share of
  /// O's columns (float4 exchanges) instead of warp 0 merging and storing all of them at the
  /// CTA's tail (B12X_ATTN_SPREAD_MERGE=1|0).
  bool spread_merge = true;
  /// With the spread merge: the warps share one code copy (each sums its columns into fixed
  /// registers through runtime shared-memory offsets) instead of one copy per warp's column
  /// range (the epilogue runs once per warp, so each copy is fetched cold); H200 round 26: BF16
  /// B=1 x 8k 15.0-15.1 vs 15.3-15.5 us, FP8 B=1 12.4 vs 12.7, FP8 B=8 40.8 vs 41.5
  /// (B12X_ATTN_SPREAD_MERGE=2, =1 one copy per range).
  bool spread_shared = true;
  /// Decode tiles with every knob above at its default (and no fused merge) run an instance with
  /// those defaults compiled in: no measurement variants' code between the executed prologue and
  /// epilogue blocks, which run once per warp and are fetched cold (B12X_ATTN_LEAN=1|0; where no
  /// lean instance exists the plan keeps the general one). Lean FP8 tiles stage Q after the
  /// prologue's K/V copies. H200 round 29 (us, general -> lean): BF16 B=1 x 8k 15.3-15.4
  /// -> 14.3-14.6, FP8 B=1 13.2-13.3 -> 12.1, FP8 B=8 41.5 -> 40.2, BF16 B=8 67.8 -> 67.4, 16/2/256
  /// B=8 FP8 28.2 -> 27.0 and BF16 43.5 -> 41.7.
  bool lean = true;
  /// Lean decode kernels: before the PDL wait each CTA reads its metadata and its prologue's page
  /// ids through L2 and, after the wait, issues Q's and the first tiles' copies at once; the
  /// values are read again and compared, and a CTA that saw stale ones drains its copies and
  /// redoes the prologue (B12X_ATTN_SPEC=1|0; needs `lean`; used with PDL only). H200 round 29
  /// (lean -> lean + spec): BF16 B=1 x 8k 14.3-14.6 -> 14.3-14.4 us, FP8 B=1 12.1 -> 11.5-11.6,
  /// FP8 16/2/256 B=8 27.0 -> 26.0. Stale values (metadata written by the kernel just before,
  /// overlapping the pre-wait part) cost the redo.
  bool spec = true;
  /// Contiguous KV splits take whole KV tiles (the chunk ceil(len / splits) rounded up to a
  /// multiple of the tile; fewer splits may then be live): a split of a range from a page start
  /// begins on a tile boundary, so its tiles stay inside pages and take the page-run copies.
  /// Unrounded chunks (e.g. 8192 / 24 = 342 tokens) start most tiles mid-page, on the per-row
  /// loader path (B12X_ATTN_ALIGN_CHUNKS=1|0).
  bool align_chunks = true;
  int64_t partial_rows = 0;  ///< (split, token) rows of partials the scratch holds
  int64_t off_tiles = 0, off_partial_o = 0, off_partial_lse = 0, off_lse = 0;
  /// Decode/verify splits are merged by the main kernel (the last CTA of each row tile and KV
  /// head, found through a ticket counter that run() zeroes) instead of a merge kernel
  /// (B12X_ATTN_FUSED_MERGE=1; off by default: slower on the H200).
  bool fused_merge = false;
  int64_t off_merge_ctr = 0;  ///< int32 tickets, one per (row tile, KV head)
  /// Timeline probe (B12X_ATTN_STAMPS=1, lean decode plans of bf16 q whose tile has a stamp
  /// instance): the kernels record per-CTA event times into the scratch at `off_stamps` (uint64:
  /// kStampSlots per main CTA slot, then from uint64 index `stamp_merge` 4 per merge CTA;
  /// src/attention/kernels/paged_attention.cuh). Diagnostics only.
  bool stamps = false;
  int64_t off_stamps = 0, stamp_merge = 0;
  /// Early K/V (PagedCaps::kv_prefix_stable; lean + speculative decode / verify plans whose tile
  /// has the instance: wide3 d128, hcvt3 d128, wideh3, hcvt d256; PDL only): the prologue's tiles
  /// whose rows all lie below cache_seqlens - q_len are copied before the PDL wait (kernel suffix
  /// `_early`). B12X_ATTN_EARLY_KV=0 keeps it off, =1 forces it without the capability
  /// (diagnostics). H200 round 52: BF16 B=1 x 8k 13.5-13.9 -> 12.8-13.0 us, FP8 B=8 38.1-38.4
  /// -> 36.7-36.8.
  bool early_kv = false;
  /// Early K/V plans of FP8 hcvt at head dim 256 on SM90: the main kernel at 208 registers instead
  /// of 209 (kernel suffix `_r208`), so that a 96-register merge CTA (12288) fits beside its two
  /// CTAs per SM90 SM (53248 instead of 55296) and enters while they run, as session 16's
  /// 64-register merge did, without its serial loads at 32-64 splits (B12X_ATTN_EARLY_CAP=0 turns
  /// it off). H200 round 64 (16/2/256 x 8k, us, off -> on): page 128 B = 1 / 2 / 4 10.7 / 13.8
  /// / 16.2 -> 10.7 / 12.7 / 15.3, B = 8 23.7 / 24.2 -> 24.8 / 23.8; page 64 (pairs -> on) 10.9
  /// / 14.0 / 16.3 / 24.3 -> 10.8 / 12.8 / 15.3 / 23.9.
  bool early_cap = true;
  /// The decode tiles' cross-warp merge exchanges only the MMA fragments' first 8 rows when the
  /// other 8 are padding (GQA groups of <= 8 heads at q_len 1): half the epilogue's shared-memory
  /// traffic (B12X_ATTN_EPILOGUE_HALF=0 turns it off). H200 round 60 (us, off -> on): FP8
  /// 16/2/256 B=8 25.0 / 25.3 -> 24.7 / 24.9, BF16 37.9 / 38.2 -> 37.8 / 37.9, BF16 32/8/128
  /// B=1 x 8k 13.0 / 13.0 -> 12.8 / 12.9.
  bool epilogue_half = true;
  std::string kernel;          ///< kernel variant name (logging / diagnostics)
  const void* impl = nullptr;  ///< internal: the chosen kernel variant

  /// Splits a bind with `batch` requests of `q_len` rows launches automatically.
  int auto_splits(int batch, int q_len) const;
};

/// @brief Plan from capacities (host only; refuses to run while `stream` is capturing).
PagedPlan plan_paged(const PagedCaps& caps, Stream stream = nullptr);

/// @brief Tensors and options of one call.
struct PagedArgs {
  TensorRef q, k_cache, v_cache, out;
  TensorRef page_table, cache_seqlens, cu_seqlens_q;
  TensorRef k_descale, v_descale;  ///< optional (required for FP8 KV)
  TensorRef sinks;                 ///< optional fp32 [Hq]
  TensorRef lse;                   ///< optional fp32 [T, Hq]
  int window_left = -1;
  float softmax_scale = 0.f;  ///< <= 0: Dqk^-0.5
  int num_splits = 0;         ///< 0 = automatic, 1 = no split, n = at most n splits
};

/// @brief Everything a launch needs: raw pointers, strides and sizes (no ownership).
struct PagedBinding {
  PagedPlan plan;
  // tensors
  const void* q = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  void* out = nullptr;
  const int32_t* page_table = nullptr;
  const int32_t* cache_seqlens = nullptr;
  const int32_t* cu_seqlens_q = nullptr;
  const float* k_descale = nullptr;
  const float* v_descale = nullptr;
  const float* sinks = nullptr;
  float* lse = nullptr;
  uint8_t* scratch = nullptr;
  // strides in elements
  int64_t q_stride_t = 0, q_stride_h = 0;
  int64_t o_stride_t = 0, o_stride_h = 0;
  int64_t k_stride_page = 0, k_stride_tok = 0, k_stride_head = 0;
  int64_t v_stride_page = 0, v_stride_tok = 0, v_stride_head = 0;
  int64_t pt_stride = 0;
  int64_t kd_stride_b = 0, kd_stride_h = 0, vd_stride_b = 0, vd_stride_h = 0;
  int64_t lse_stride_t = 0, lse_stride_h = 0;
  // sizes
  int batch = 0, total_q = 0, q_len = 0;  ///< q_len: uniform q_len (decode 1, verify T/B)
  int num_pages = 0;
  int pt_width = 0;  ///< page-table width W
  int window_left = -1;
  float softmax_scale = 0.f;
  int num_splits = 1;     ///< splits launched (grid z)
  int num_row_tiles = 0;  ///< grid x bound
};

/// @brief Check `args` against the plan and the scratch; pointer arithmetic only.
PagedBinding bind_paged(const PagedPlan& plan, const TensorRef& scratch, const PagedArgs& args);

/// @brief Launch (capture-safe: no allocation, no host sync, no host read of device data).
void run_paged(const PagedBinding& binding, Stream stream);

/// @brief Writes new K/V rows into the cache: k/v [T, Hkv, D] (bf16/fp16), slot_mapping int64
/// [T] (page * page_size + offset; negative slots are skipped, like vLLM padding). For an FP8
/// cache k_scale / v_scale fp32 [1] are required and the stored value is x / scale (RNE,
/// saturating to +-448); for a bf16/fp16 cache the dtype of k/v must match the cache.
void append_kv(const TensorRef& k, const TensorRef& v, const TensorRef& k_cache,
               const TensorRef& v_cache, const TensorRef& slot_mapping, const TensorRef& k_scale,
               const TensorRef& v_scale, Stream stream);

}  // namespace b12x::attention
