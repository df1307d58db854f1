// Launch parameters of the paged-attention kernels (plain data, shared by host and device code).
#pragma once

#include <cstdint>

namespace b12x::attention::detail {

/// Division by a bind-time divisor d >= 1 as a multiply and a shift: for 0 <= n < 2^31,
/// n / d == (n * mul) >> shift with l = ceil(log2 d), shift = 31 + l, mul = ceil(2^shift / d)
/// (mul < 2^32; the error mul * d - 2^shift is below d <= 2^l, so n times it stays below
/// 2^shift and never reaches the next quotient). Replaces the kernels' I2F / MUFU.RCP division
/// chains on the prologue's critical path.
struct FastDiv {
  uint32_t mul = 1u << 31;
  int32_t shift = 31;
};
inline FastDiv make_fast_div(uint32_t d) {
  FastDiv f;
  if (d == 0) return f;  // unused divisor (e.g. tiles_per_req of extend): n / 1
  int l = 0;
  while (l < 31 && (uint64_t{1} << l) < d) ++l;
  f.shift = 31 + l;
  f.mul = static_cast<uint32_t>(((uint64_t{1} << f.shift) + d - 1) / d);
  return f;
}
#if defined(__CUDACC__)
__host__ __device__
#endif
    inline int
    fast_div_apply(int n, FastDiv f) {
  return static_cast<int>((static_cast<uint64_t>(static_cast<uint32_t>(n)) * f.mul) >> f.shift);
}

/// Timeline probe (B12X_ATTN_STAMPS): uint64 slots per main CTA and per merge CTA (layout at the
/// kernels' stamp helpers).
constexpr int kStampSlots = 20;
constexpr int kMergeStampSlots = 4;

struct PagedParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  const int32_t* page_table;
  const int32_t* seqlens;  // [B] kv length incl. new tokens
  const int32_t* cu_q;     // [B+1]
  const float* k_descale;  // nullable
  const float* v_descale;  // nullable
  const float* sinks;      // nullable, [Hq] natural log units
  float* lse;              // nullable, base 2
  float* part_o;           // [num_splits][T][Hq][Dv] fp32 (split partials, normalised)
  float* part_lse;         // [num_splits][T][Hq] fp32 base 2
  int32_t* tile_start;     // [B+1] row-tile prefix (extend), written by the scheduler kernel
  int32_t* merge_ctr;      // non-null: fused split merge, one ticket per (row tile, KV head),
                           // zeroed before the launch (decode/verify only)
  int64_t q_st, q_sh;
  int64_t o_st, o_sh;
  int64_t k_sp, k_st, k_sh;
  int64_t v_sp, v_st, v_sh;
  int64_t pt_stride;
  int64_t kd_sb, kd_sh, vd_sb, vd_sh;
  int64_t lse_st, lse_sh;
  int32_t batch;
  int32_t total_q;
  int32_t num_pages;      // page ids are clamped into [0, num_pages): bad ids never fault
  int32_t max_kv;         // W * page_size: longer cache_seqlens are clamped
  int32_t tiles_per_req;  // > 0: uniform q_len (decode/verify) tiles per request; 0: use tile_start
  int32_t num_q_heads;
  int32_t num_kv_heads;
  int32_t group;        // Hq / Hkv
  int32_t page_shift;   // log2(page_size)
  int32_t window_left;  // -1 = off
  int32_t num_splits;   // grid z
  int32_t min_chunk;    // smallest KV chunk of a split (multiple of the KV tile)
  int32_t chunk_round;  // KV tile - 1: split chunks are rounded up to whole KV tiles; 0: not
  int32_t tile_rows;    // packed rows per CTA (BM)
  int32_t tile_kv;      // KV tile (BN)
  int32_t heads_inner;  // 1: blockIdx.x = row tile * num_kv_heads + KV head (grid y = 1)
  float scale_log2;     // softmax scale * log2(e)
  int32_t prefetch;     // 1: decode/verify CTAs prefetch their first K/V rows into L2 before the
                        // PDL wait (B12X_ATTN_PREFETCH)
  int32_t split_interleave;  // 1 (decode tiles): split s takes KV tiles s, s + ns, ... (kv_range)
  int32_t short_ahead;       // 1: a decode split of n < kStages tiles keeps n - 1 ahead
                             // (B12X_ATTN_SHORT_AHEAD)
  int32_t full_ring;  // 1: decode tiles fill every ring stage in the prologue (B12X_ATTN_FULL_RING)
  int32_t page_runs;  // 1: live tiles inside one page (or page-aligned in two) advance row
                      // addresses by token strides within a page (B12X_ATTN_PAGE_RUNS)
  int32_t spread_merge;   // 1: decode warps merge and store their own share of O's columns
                          // (B12X_ATTN_SPREAD_MERGE)
  float rescale_slack;    // the running max moves only when a tile's max exceeds it by more
                          // (base-2 units; 0 = every increase)
  int32_t spec;           // 1 (lean decode kernels): speculative prologue (B12X_ATTN_SPEC)
  int32_t epilogue_half;  // 1: the spread merge moves rows g only when rows g + 8 are padding
                          // (PagedPlan::epilogue_half)
  int32_t tile_kv_shift;  // log2(tile_kv)
  int32_t min_tiles;      // max(1, min_chunk / tile_kv)
  // The kernels' divisions by these values (multiply and shift, see FastDiv).
  FastDiv div_group, div_kv_heads, div_tiles_per_req, div_splits, div_min_tiles;
  // Timeline probe (B12X_ATTN_STAMPS, stamp instances only): per-CTA event times, main CTAs
  // first, merge CTAs from stamps + stamp_merge (see kStampSlots in the kernels); null: off.
  unsigned long long* stamps;
  int64_t stamp_merge;
};

}  // namespace b12x::attention::detail
