// Paged attention host side: capacity planning, binding (checks + pointer arithmetic) and the
// capture-safe launch sequence (scheduler for extend, main kernel, split merge).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "attention/paged_kernels.h"
#include "attention/paged_params.h"
#include "attention/paged_validate.h"
#include "b12x/attention.h"
#include "b12x/runtime.h"
#include "b12x/status.h"
#include "core/cuda_check.h"
#include "core/launch.h"  // resident_ctas, opt_in_smem

namespace b12x::attention {

using detail::KernelInfo;
using detail::PagedParams;

const char* mode_name(Mode m) noexcept {
  switch (m) {
    case Mode::kDecode:
      return "decode";
    case Mode::kExtend:
      return "extend";
    case Mode::kVerify:
      return "verify";
  }
  return "invalid_mode";
}

namespace {

constexpr const char* kPlanOp = "attention.plan_paged";
constexpr const char* kBindOp = "attention.bind_paged";
constexpr int kMaxSplits = 64;
// Largest max_batch whose BF16 head-dim-256 SM90 decode plans take wideh3 / wideh (see
// decode_kind).
constexpr int kWideh3MaxBatch = 8;
constexpr int kWidehMaxBatch = 16;
// Largest max_batch whose FP8 head-dim-256 decode plans take hcvt (2 stages) instead of hcvt3.
constexpr int kHcvt256MaxBatch = 32;
constexpr int64_t kAlign = 256;
// PagedPlan::split_pair of early-K/V wide3 / wideh3 plans (see there).
constexpr double kEarlySplitPair = 6.0;

const std::vector<KernelInfo>& registry() {
  static const std::vector<KernelInfo> kTable = [] {
    std::vector<KernelInfo> t;
    detail::register_paged_d64(t);
    detail::register_paged_d128(t);
    detail::register_paged_d192(t);
    detail::register_paged_d256(t);
    return t;
  }();
  return kTable;
}

const KernelInfo* find_kernel(int dqk, int dv, int kind, DType q, bool fp8) {
  for (const KernelInfo& k : registry())
    if (k.dqk == dqk && k.dv == dv && k.kind == kind && k.q == q && k.fp8 == fp8) return &k;
  return nullptr;
}

// Uniform q_len of a plan (decode 1, verify max_total_q / max_batch), 0 for extend.
int plan_q_len(const PagedCaps& c) {
  if (c.mode == Mode::kDecode) return 1;
  if (c.mode == Mode::kVerify) return std::max(1, c.max_total_q / std::max(1, c.max_batch));
  return 0;
}

// The largest uniform q_len a bind of the plan can take (decode 1; verify max_total_q: a bind
// of one request may carry all of T), 0 for extend. hcvt8 computes a request's first 8 packed
// rows only, so it needs every bind's q_len x group <= 8, not only plan_q_len's.
int max_bind_q_len(const PagedCaps& c) {
  if (c.mode == Mode::kDecode) return 1;
  if (c.mode == Mode::kVerify) return std::max(1, c.max_total_q);
  return 0;
}

int default_decode_kind(const PagedCaps& c, ArchFamily family, bool fp8, int head_dim) {
  // Defaults from the H200 (rounds 5-7, 32/8/128, 8k): BF16 wide3 streamed at 84-99% of the
  // read bandwidth (B=8..128; wide 83-98%, deep 68-77%); for FP8 wdirect2 beat wdirect by
  // 15-19% (round 7, B=8/32/128: 57.5/194.2/699.2 vs 66.0/221.8/829.2 us) and wdirect beat
  // direct by 10-20%; hcvt (wdirect2 on fp16 MMAs, hardware conversion) beat wdirect2 by
  // 17-21% (round 8, B=8/32/128: 48.1/156.8/554.7 vs 57.9/195.2/700.1 us; issued instructions
  // -26%) while hbits (the bit move) gained nothing (all three removed in session 21). Shapes
  // without these kernels fall back (plan_paged).
  // FP8: hcvt3 (hcvt with 3 stages) where a block may hold its 102-105 KB of shared memory (SM90;
  // plan_paged falls back to hcvt elsewhere): round 17, 32/8/128 8k: B=32 134.9 vs 142.3 us,
  // B=8 41.7 vs 42.8, 16/2/256 and 64/8/128 B=8 within 0.5%; B=1 slower (14.8 vs 14.1, both
  // with interleaved splits: a split's two tiles both in flight, as with the full ring, which
  // cost FP8 B=1 10% in round 16). wide3 for head dim 256 (32-token tiles, 3 stages) measured
  // within noise of wide (round 16: B=8 41.2 vs 42.3, B=32 131.8 vs 130.5): removed (session 21).
  // FP8 head dim 256 in plans of at most kHcvt256MaxBatch requests: hcvt (2 stages, 74 KB; 2
  // CTAs per SM90 SM either way, held there by its 206 registers) instead of hcvt3. H200, 16/2/256
  // page 128 x 8k, us, hcvt3 -> hcvt at the same split counts: round 49 B=8 25.8 / 26.0 -> 25.2 /
  // 25.1; round 51 B=1 12.5 / 12.3 -> 11.0 / 11.1, B=8 25.8 / 25.8 -> 24.5 / 24.8, B=16 41.3 /
  // 41.6 -> 40.2 / 40.3; round 52 B=8 hcvt 24.2 / 24.3 vs hcvt3 25.3, B=32 (s=4) 70.0 vs 71.7.
  // Larger plans keep hcvt3 (unmeasured there).
  // SM90 plans whose packed rows per request fit 8 (q_len x group <= 8, e.g. a decode step of
  // GQA group 8) take hcvt8 at any batch capacity: hcvt with O's MMAs on rows 0-7 only (half the
  // softmax and epilogue) and S in 4 MMA chains of 8 k-steps. H200 (us, FP8 16/2/256 x 8k, page
  // 128, medians of 7 graph replays, two passes), round 89 (rows 0-7 only, 2 chains; hcvt ->
  // hcvt8): B=8 24.03 / 24.08 -> 23.44 / 23.39, B=4 15.61 / 15.46 -> 14.81 / 14.92, B=2 12.68 /
  // 12.96 -> 11.95 / 12.18, B=1 10.81 / 10.90 -> 10.05 / 10.24; round 90 (hcvt -> 2 chains -> 4
  // chains): B=8 24.14 / 23.94 -> 23.65 / 23.40 -> 23.41 / 23.32, B=4 15.44 / 15.39 -> 15.08 /
  // 14.83 -> 14.92 / 14.70, B=2 12.79 / 12.63 -> 12.25 / 12.16 -> 11.96 / 11.87, B=1 10.83 /
  // 10.70 -> 10.23 / 10.13 -> 10.04 / 10.00, B=16 39.88 / 39.68 -> 39.31 / 39.19 -> 38.99 /
  // 39.18, B=32 70.71 / 70.41 -> 70.20 / 69.87 -> 69.85 / 69.60, page 64 B=8 23.85 / 23.74 ->
  // 23.29 / 23.21 -> 23.29 / 23.12; B=64 (hcvt3 the default there) 135.30 / 135.55 -> 134.08 /
  // 133.57 -> 133.35 / 133.33. SM12x / SM89 (one hcvt CTA per SM) are unmeasured: hcvt.
  if (fp8 && head_dim == 256 && family == ArchFamily::kSm90 && c.mode != Mode::kExtend &&
      int64_t(max_bind_q_len(c)) * (c.num_q_heads / c.num_kv_heads) <= 8)
    return 28;
  if (fp8) return head_dim == 256 && c.max_batch <= kHcvt256MaxBatch ? 8 : 13;
  if (head_dim <= 128) return 5;
  // BF16 head dim 256 on SM90, plans of at most kWidehMaxBatch requests: wideh (wide with each
  // token group's output dims split over two warps: 12 warps per SM instead of 6) instead of
  // wide. H200 (us, 16/2/256 page 128, 8k, wide -> wideh): B=1 13.9 -> 13.1 (round 38), 14.0 ->
  // 13.2 (round 41), 14.3 -> 13.1 (round 42); B=2 18.3 -> 17.5, B=4 26.2 -> 25.1, B=16 72.4 ->
  // 71.5 (round 42); B=8 40.5 -> 40.7 (round 37), 40.3 -> 40.1 at s=16 (38), 41.0 -> 40.3 (41),
  // 42.0 / 42.3 -> 41.0 / 41.5 (42). B=32 keeps wide (127.3 -> 127.9, 127.5 -> 128.8). SM12x
  // (one 74 KB CTA per SM for either) is unmeasured: wide. By capacity (max_batch), so a plan and
  // its signature name one kernel.
  // Plans of at most kWideh3MaxBatch requests take wideh3 (wideh with 3 stages, 104 KB, 2 CTAs
  // per SM: two tiles in flight per CTA instead of one; plan_paged falls back to wide where a
  // block cannot hold it). H200 rounds 48 / 49 (us, 16/2/256 page 128, 8k, wideh -> wideh3): B=1
  // 13.2 / 13.1 -> 12.4 / 12.5, B=2 17.5 -> 16.3, B=4 24.9 -> 23.7, B=8 (s=16) 39.6 / 39.1 ->
  // 38.4 (48), 40.8 / 40.3 / 40.3 -> 39.0 / 39.2 / 39.3 (49); B=16 (s=8) 67.6 -> 67.7 (48),
  // 68.9 / 69.4 -> 69.6 / 69.6 (49): wideh stays for 9..16.
  if (c.q_dtype == DType::kBF16 && c.head_dim_qk == 256 && c.head_dim_vo == 256 &&
      family == ArchFamily::kSm90 && c.max_batch <= kWidehMaxBatch)
    return c.max_batch <= kWideh3MaxBatch ? 18 : 16;
  return 1;
}

// Decode tile kind: 1 ("wide": 4 warps x 16 tokens; 16-bit head dims 192 / 256), 2 ("deep": 2
// warps x 16 tokens; FP8 head dims 64 / 192), 5 ("wide3": wide with Q in registers and 3
// stages; 16-bit head dims <= 128), 8 ("hcvt": 4 warps x 32 or 16 tokens, FP8 fragments read
// from the raw stage and converted by the hardware e4m3x2 -> f16x2 cvt for fp16 MMAs; FP8 head
// dims 128 / 256), 13 ("hcvt3": hcvt with 3 stages, > 99 KB of shared memory: SM90 only, hcvt
// elsewhere), 16 ("wideh": wide with each token group's output dims split over two warps, bf16
// head dim 256), 18 ("wideh3": wideh with 3 stages, 104 KB: SM90, else wide) and 28 ("hcvt8":
// hcvt on MMA rows 0-7 with S in 4 MMA chains, FP8 head dim 256 with q_len x group <= 8). The
// variants that lost (direct, wdirect, wdirect2, hbits, hvec, hcvt2, wide3 at 256, wide at <=
// 128) were removed in session 21, session 24's hcvt8r3 and 3-CTA hcvt8 after their rounds
// (docs/attention.md). B12X_ATTN_DECODE_TILE=wide|wide3|hcvt|hcvt3|hcvt8|wideh|wideh3 overrides
// (benchmarking); a tile not compiled for the shape takes the default.
int decode_kind(const PagedCaps& c, ArchFamily family) {
  const bool fp8 = c.kv_dtype == DType::kFP8E4M3;
  const int head_dim = std::max(c.head_dim_qk, c.head_dim_vo);
  const char* e = std::getenv("B12X_ATTN_DECODE_TILE");
  if (e != nullptr && std::string(e) == "wide") return 1;
  if (e != nullptr && std::string(e) == "wide3") return 5;
  if (e != nullptr && std::string(e) == "hcvt") return 8;
  if (e != nullptr && std::string(e) == "hcvt3") return 13;
  if (e != nullptr && std::string(e) == "hcvt8") return 28;
  if (e != nullptr && std::string(e) == "wideh") return 16;
  if (e != nullptr && std::string(e) == "wideh3") return 18;
  // Any other value (a typo, or a removed tile such as hbits) takes the defaults below; say so
  // once per process rather than silently.
  if (e != nullptr && e[0] != '\0') {
    static std::once_flag once;
    std::call_once(once, [e] {
      log_message(0, std::string("B12X_ATTN_DECODE_TILE=") + e +
                         " is not a decode tile (wide, wide3, hcvt, hcvt3, hcvt8, wideh, wideh3): "
                         "the default tiles are used");
    });
  }
  return default_decode_kind(c, family, fp8, head_dim);
}

int64_t align_up(int64_t x, int64_t a) {
  return (x + a - 1) / a * a;
}
int ceil_div(int64_t a, int64_t b) {
  return static_cast<int>((a + b - 1) / b);
}

bool is_pow2(int64_t x) {
  return x > 0 && (x & (x - 1)) == 0;
}

using ::b12x::detail::DeviceScope;  // the plan's device for its attribute calls

void check_caps(const PagedCaps& c) {
  B12X_CHECK_ARG(c.mode == Mode::kDecode || c.mode == Mode::kExtend || c.mode == Mode::kVerify,
                 kPlanOp, ": mode=", static_cast<int>(c.mode),
                 " (supported: decode, extend, verify)");
  B12X_CHECK_ARG(c.q_dtype == DType::kBF16 || c.q_dtype == DType::kFP16, kPlanOp,
                 ": q_dtype=", dtype_name(c.q_dtype), " (supported: bf16, fp16)");
  const bool fp8 = c.kv_dtype == DType::kFP8E4M3;
  B12X_CHECK_ARG(c.kv_dtype == c.q_dtype || (fp8 && c.q_dtype == DType::kBF16), kPlanOp,
                 ": kv_dtype=", dtype_name(c.kv_dtype), " with q_dtype=", dtype_name(c.q_dtype),
                 " (supported: bf16/bf16, fp16/fp16, bf16 q with fp8_e4m3 KV)");
  B12X_CHECK_ARG(c.num_kv_heads > 0 && c.num_q_heads > 0 && c.num_q_heads % c.num_kv_heads == 0,
                 kPlanOp, ": num_q_heads=", c.num_q_heads, ", num_kv_heads=", c.num_kv_heads,
                 " (supported: positive, num_q_heads % num_kv_heads == 0)");
  B12X_CHECK_ARG(detail::supported_head_dims(c.head_dim_qk, c.head_dim_vo), kPlanOp,
                 ": head dims (qk=", c.head_dim_qk, ", vo=", c.head_dim_vo,
                 ") (supported: 64, 128, 192, 256 equal, or qk 192 with vo 128)");
  B12X_CHECK_ARG(is_pow2(c.page_size) && c.page_size <= 256, kPlanOp, ": page_size=", c.page_size,
                 " (supported: powers of two 1..256; vLLM uses 16, 32, 64, 128)");
  B12X_CHECK_ARG(c.max_batch >= 1, kPlanOp, ": max_batch=", c.max_batch, " (supported: >= 1)");
  B12X_CHECK_ARG(c.max_page_table_width >= 1, kPlanOp,
                 ": max_page_table_width=", c.max_page_table_width, " (supported: >= 1)");
  B12X_CHECK_ARG(c.max_total_q >= 1, kPlanOp, ": max_total_q=", c.max_total_q,
                 " (supported: >= 1)");
  B12X_CHECK_ARG(int64_t(c.max_page_table_width) * c.page_size <= (int64_t(1) << 30), kPlanOp,
                 ": max_page_table_width * page_size = ",
                 int64_t(c.max_page_table_width) * c.page_size, " tokens (supported: <= 2^30)");
  B12X_CHECK_ARG(int64_t(c.max_total_q) * c.num_q_heads <= (int64_t(1) << 30), kPlanOp,
                 ": max_total_q * num_q_heads too large (", int64_t(c.max_total_q) * c.num_q_heads,
                 ", supported: <= 2^30)");
  if (c.mode == Mode::kDecode)
    B12X_CHECK_ARG(c.max_total_q >= c.max_batch, kPlanOp, ": decode needs max_total_q (",
                   c.max_total_q, ") >= max_batch (", c.max_batch, ")");
  B12X_CHECK_ARG(c.max_splits >= 0 && c.max_splits <= kMaxSplits, kPlanOp,
                 ": max_splits=", c.max_splits, " (supported: 0 = automatic, 1..", kMaxSplits, ")");
}

}  // namespace

int PagedPlan::auto_splits(int batch, int q_len) const {
  if (split_limit <= 1 || q_len <= 0) return 1;
  // Equal CTAs of a memory-bound kernel run in waves of target_ctas (SMs x resident CTAs), each
  // CTA at its own latency-bound rate, so a partial wave leaves bandwidth unused: B=32 x 8 KV
  // heads = 256 CTAs fill 0.65 of an H200's 396 slots unsplit, 1.94 waves split in 3. Estimate
  // the time in KV-tile steps for each split count: waves x (tiles per split + a prologue of
  // ~3 tiles), plus ~2 for the merge launch; the context is the plan's capacity (bind does not
  // see the live lengths). Ties go to fewer splits. Early-K/V wide3 / wideh3 plans also pay for
  // a wave's second CTA per SM (PagedPlan::split_pair).
  const int group = caps.num_q_heads / caps.num_kv_heads;
  const int64_t tiles = ceil_div(int64_t(q_len) * group, tile_rows);
  const int64_t ctas = std::max<int64_t>(int64_t(batch) * caps.num_kv_heads * tiles, 1);
  const int64_t ctx = int64_t(caps.max_page_table_width) * caps.page_size;
  const double kv_tiles = double(std::max<int64_t>(1, ceil_div(ctx, tile_kv)));
  // split_occ: wave slots counted at that many CTAs per SM instead of the kernel's occupancy.
  const int64_t slots = std::max<int64_t>(
      1,
      split_occ > 0 ? std::min<int64_t>(target_ctas, int64_t(split_occ) * sm_count) : target_ctas);
  int best = 1;
  double best_t = 0;
  for (int s = 1; s <= split_limit; ++s) {
    const int64_t waves = ceil_div(ctas * s, slots);
    const double per = std::ceil(kv_tiles / s);
    double t = double(waves) * (per + 3.0) + (s > 1 ? 2.0 : 0.0);
    // split_pair: the wave's CTAs beyond one per SM, weighted by the share of a split's tiles
    // the early copies cover (PagedPlan::split_pair).
    if (split_pair > 0 && (waves > 1 || per > split_pair_free))
      t += split_pair * double(std::max<int64_t>(0, std::min(ctas * s, slots) - sm_count)) /
           double(std::max(1, sm_count)) * (double(split_pair_free) / per);
    if (s == 1 || t < best_t) {
      best = s;
      best_t = t;
    }
  }
  return best;
}

PagedPlan plan_paged(const PagedCaps& caps, Stream stream) {
  refuse_during_capture(stream, kPlanOp);
  check_caps(caps);
  require_compiled_arch(caps.device, kPlanOp);
  const DeviceInfo& dev = device_info(caps.device);

  PagedPlan plan;
  plan.caps = caps;
  plan.arch = static_cast<int>(dev.family);
  plan.sm_count = dev.sm_count;
  const int group = caps.num_q_heads / caps.num_kv_heads;
  const int q_len = plan_q_len(caps);
  // Decode tile (16 rows, warps split the KV) unless the packed rows of one request need more.
  const bool decode_tile = caps.mode != Mode::kExtend && int64_t(q_len) * group <= 16;
  const bool fp8 = caps.kv_dtype == DType::kFP8E4M3;
  // Extend: one tile (kind 0; the 64-token-stage, n64 and m64 variants were removed in session
  // 21). Decode / verify: decode_kind; a tile the knob names that is not compiled for the shape
  // takes the default, and the defaults not compiled for it (wide3 for head dims 192 / 256, hcvt
  // for FP8 64 / 192) fall back to wide for 16-bit KV and to deep for FP8 (deep beat wide for
  // FP8 in round 5).
  const int head_dim = std::max(caps.head_dim_qk, caps.head_dim_vo);
  const int kind = decode_tile ? decode_kind(caps, dev.family) : 0;
  const KernelInfo* k = find_kernel(caps.head_dim_qk, caps.head_dim_vo, kind, caps.q_dtype, fp8);
  if (k == nullptr && decode_tile)
    k = find_kernel(caps.head_dim_qk, caps.head_dim_vo,
                    default_decode_kind(caps, dev.family, fp8, head_dim), caps.q_dtype, fp8);
  if (k == nullptr && decode_tile)
    k = find_kernel(caps.head_dim_qk, caps.head_dim_vo, fp8 ? 2 : 1, caps.q_dtype, fp8);
  // hcvt8 computes the MMA's rows 0-7 only: plans whose binds may carry more than 8 packed rows
  // per request (verify: q_len up to max_total_q) take the default tile (hcvt or hcvt3 then).
  if (k != nullptr && k->kind == 28 && int64_t(max_bind_q_len(caps)) * group > 8)
    k = find_kernel(caps.head_dim_qk, caps.head_dim_vo,
                    default_decode_kind(caps, dev.family, fp8, head_dim), caps.q_dtype, fp8);
  // hcvt3 needs more than SM12x's (and SM89's) 99 KB of shared memory per block: hcvt there.
  if (k != nullptr && k->kind == 13 && k->smem > dev.smem_per_block_optin)
    k = find_kernel(caps.head_dim_qk, caps.head_dim_vo, 8, caps.q_dtype, fp8);
  // wideh3 (104 KB): wide there.
  if (k != nullptr && k->kind == 18 && k->smem > dev.smem_per_block_optin)
    k = find_kernel(caps.head_dim_qk, caps.head_dim_vo, 1, caps.q_dtype, fp8);
  B12X_CHECK_SUPPORTED(k != nullptr, kPlanOp, ": no compiled kernel for head dims (",
                       caps.head_dim_qk, ", ", caps.head_dim_vo, "), q ", dtype_name(caps.q_dtype),
                       ", kv ", dtype_name(caps.kv_dtype));
  B12X_CHECK_SUPPORTED(k->smem <= dev.smem_per_block_optin, kPlanOp, ": kernel ", k->name,
                       " needs ", k->smem, " bytes of shared memory, device ", dev.name, " allows ",
                       dev.smem_per_block_optin);
  int occ = 0;
  {
    const DeviceScope scope(caps.device);  // the opt-in and the query act on the current device
    B12X_CUDA_CHECK(::b12x::detail::resident_ctas(k->func, k->threads, k->smem, &occ));
  }
  occ = std::max(occ, 1);

  plan.impl = k;
  plan.kernel = std::string(k->name) +
                (k->kind == 0    ? "_extend"
                 : k->kind == 1  ? "_decode_wide"
                 : k->kind == 2  ? "_decode_deep"
                 : k->kind == 5  ? "_decode_wide3"
                 : k->kind == 8  ? "_decode_hcvt"
                 : k->kind == 13 ? "_decode_hcvt3"
                 : k->kind == 16 ? "_decode_wideh"
                 : k->kind == 28 ? "_decode_hcvt8"
                                 : "_decode_wideh3") +
                (fp8 ? "_kvfp8" : "") + (caps.q_dtype == DType::kFP16 ? "_fp16" : "_bf16");
  plan.tile_rows = k->tile_rows;
  plan.tile_kv = k->tile_kv;
  plan.min_split_kv = std::max(128, k->tile_kv);
  const char* pdl_env = std::getenv("B12X_ATTN_PDL");
  plan.use_pdl = !(pdl_env != nullptr && std::string(pdl_env) == "0");
  plan.target_ctas = dev.sm_count * occ;
  // Grid order: with the KV heads fastest, the CTAs reading one token row's heads (adjacent
  // 256-512 B pieces of one cache row) run in the same wave; the default for decode/verify
  // (H200 round 5: B=128 x 8k wide tile 1008 vs 1021 us, neutral elsewhere). Extend too: each
  // request's row tiles run heaviest first with its KV heads side by side, so the last
  // request's heaviest tiles start a request (not a request x KV head) before the end and the
  // causal tail is short (a list-scheduling model of 8 x 2048 tokens, 64 row tiles x 8 KV
  // heads in 264 slots: 6% shorter), while the CTAs running together still read few K/V
  // streams (one request's 8 heads: L2 reuse).
  // B12X_ATTN_GRID=heads|tiles overrides (benchmarking).
  const char* grid_env = std::getenv("B12X_ATTN_GRID");
  plan.heads_inner = grid_env != nullptr ? std::string(grid_env) == "heads" : true;
  const char* slack_env = std::getenv("B12X_ATTN_RESCALE_SLACK");
  if (slack_env != nullptr) plan.rescale_slack = std::max(0.f, std::strtof(slack_env, nullptr));
  const char* pf_env = std::getenv("B12X_ATTN_PREFETCH");
  if (pf_env != nullptr) plan.prefetch = std::string(pf_env) == "1";
  if (pf_env != nullptr && std::string(pf_env) == "0") plan.prefetch_splits = false;
  const char* pft_env = std::getenv("B12X_ATTN_PREFETCH_TILES");
  if (pft_env != nullptr) plan.prefetch_tiles = std::max(0, std::atoi(pft_env));
  // The split model's CTAs per SM (PagedPlan::split_occ): 2 for wideh (rounds 45 / 46, see there).
  plan.split_occ = k->kind == 16 ? 2 : 0;
  const char* so_env = std::getenv("B12X_ATTN_SPLIT_OCC");
  if (so_env != nullptr) plan.split_occ = std::max(0, std::atoi(so_env));
  const char* si_env = std::getenv("B12X_ATTN_SPLIT_INTERLEAVE");
  // Interleaved splits exist for the decode tiles only (the extend tiles' ranges stay
  // contiguous; the merge kernel reads the same flag through kv_range).
  plan.split_interleave =
      decode_tile && (si_env != nullptr ? std::string(si_env) == "1" : plan.split_interleave);
  const char* sa_env = std::getenv("B12X_ATTN_SHORT_AHEAD");
  if (sa_env != nullptr) plan.short_ahead = std::string(sa_env) == "1";
  const char* spread_env = std::getenv("B12X_ATTN_SPREAD_MERGE");
  if (spread_env != nullptr) plan.spread_merge = std::string(spread_env) != "0";
  if (spread_env != nullptr && std::string(spread_env) == "1") plan.spread_shared = false;
  const char* runs_env = std::getenv("B12X_ATTN_PAGE_RUNS");
  if (runs_env != nullptr) plan.page_runs = std::string(runs_env) != "0";
  const char* fr_env = std::getenv("B12X_ATTN_FULL_RING");
  if (fr_env != nullptr) plan.full_ring = std::string(fr_env) != "0";
  const char* align_env = std::getenv("B12X_ATTN_ALIGN_CHUNKS");
  if (align_env != nullptr) plan.align_chunks = std::string(align_env) != "0";

  const int64_t max_ctx = int64_t(caps.max_page_table_width) * caps.page_size;
  int limit = caps.max_splits > 0 ? caps.max_splits : (caps.mode == Mode::kExtend ? 1 : kMaxSplits);
  limit = std::min<int64_t>(limit, std::max<int64_t>(1, ceil_div(max_ctx, plan.min_split_kv)));
  plan.split_limit = std::max(1, limit);

  // Partial rows the scratch must hold: the worst automatic split over every batch the plan can
  // see; an explicit max_splits reserves max_splits x max_total_q. (Again below once early K/V,
  // and with it split_pair, is settled.)
  auto partial_rows = [&]() {
    int64_t r = 0;
    if (plan.split_limit > 1) {
      if (caps.max_splits > 1 || q_len == 0) {
        r = int64_t(plan.split_limit) * caps.max_total_q;
      } else {
        for (int b = 1; b <= caps.max_batch; ++b) {
          const int s = plan.auto_splits(b, q_len);
          if (s > 1) r = std::max<int64_t>(r, int64_t(s) * b * q_len);
        }
      }
    }
    return r;
  };
  plan.partial_rows = partial_rows();
  // B12X_ATTN_FUSED_MERGE=1: decode/verify (uniform q_len: the grid maps to (request, row
  // tile) arithmetically) merge their splits in the main kernel: the last CTA of each (row tile,
  // KV head) folds the partials (no merge launch; run() zeroes the tickets). Off by default: on
  // the H200 (round 9) it was slower than the PDL-launched merge kernel (B=1 x 8k BF16 20.7 vs
  // 17.2 us, FP8 18.4 vs 14.5; B=8 73.1 vs 71.9): the last CTA's merge (dependent L2 round
  // trips on one SM) and the memset node cost more than the launch they save.
  const char* fm_env = std::getenv("B12X_ATTN_FUSED_MERGE");
  plan.fused_merge =
      q_len > 0 && plan.partial_rows > 0 && fm_env != nullptr && std::string(fm_env) == "1";
  const char* lean_env = std::getenv("B12X_ATTN_LEAN");
  if (lean_env != nullptr) plan.lean = std::string(lean_env) != "0";
  const char* spec_env = std::getenv("B12X_ATTN_SPEC");
  if (spec_env != nullptr) plan.spec = std::string(spec_env) != "0";
  // The lean instance compiles in the defaults it replaces: any other setting keeps the general
  // kernel.
  plan.lean = plan.lean && decode_tile && k->launch_lean != nullptr && !plan.full_ring &&
              plan.short_ahead && plan.page_runs && plan.spread_merge && plan.spread_shared &&
              !plan.fused_merge;
  plan.spec = plan.spec && plan.lean;
  // Timeline probe (diagnostics): the lean instance with per-CTA event stamps, where compiled.
  const char* stamps_env = std::getenv("B12X_ATTN_STAMPS");
  plan.stamps = plan.lean && k->launch_stamp != nullptr && !plan.fused_merge &&
                stamps_env != nullptr && std::string(stamps_env) == "1";
  // Early K/V (PagedCaps::kv_prefix_stable; compiled for wide3 d128, hcvt3 d128, wideh3, hcvt
  // d256): the lean + speculative instance that copies the prologue's tiles below cache_seqlens -
  // q_len before the PDL wait (PagedPlan::early_kv). It needs the caller's promise: the post-wait
  // check sees lengths and page ids only, not a preceding kernel rewriting rows inside an
  // unchanged page. B12X_ATTN_EARLY_KV=0|1 overrides the capability (benchmarking; =1 is
  // diagnostics only). H200 round 52 (us, default -> early): BF16 32/8/128 page 64 B=1 x 8k
  // 13.5 / 13.9 / 13.8 -> 12.8 / 13.0 / 12.9 (SDPA 15.6), FP8 B=1 10.9 / 11.1 -> 10.5 / 10.7,
  // FP8 B=8 38.4 / 38.1 / 38.3 -> 36.8 / 36.8 / 36.7, BF16 16/2/256 page 128 B=1 12.0 / 12.2 ->
  // 11.2 / 11.5, B=8 37.7 / 38.1 / 38.2 -> 36.4 / 36.7 / 37.0; B=1 x 1k 6.5 / 6.6 -> 6.4 / 6.4;
  // neutral: BF16 B=8 65.2 -> 65.3, FP8 16/2/256 (hcvt, one tile ahead) B=1 10.7 -> 10.8, B=8
  // 24.2 / 24.3 -> 24.3 / 24.6.
  const char* early_env = std::getenv("B12X_ATTN_EARLY_KV");
  const bool early_wanted =
      early_env != nullptr ? std::string(early_env) == "1" : caps.kv_prefix_stable;
  plan.early_kv =
      plan.spec && plan.arch >= 90 && plan.use_pdl && k->launch_early != nullptr && early_wanted;
  if (plan.stamps && plan.early_kv && k->launch_stamp_early == nullptr) plan.stamps = false;
  // The split model's cost of a second CTA per SM: early-K/V wide3 / wideh3 plans
  // (PagedPlan::split_pair).
  plan.split_pair = plan.early_kv && (k->kind == 5 || k->kind == 18) ? kEarlySplitPair : 0.0;
  plan.split_pair_free = k->stages - 1;
  const char* sp_env = std::getenv("B12X_ATTN_SPLIT_PAIR");
  if (sp_env != nullptr) plan.split_pair = std::max(0.0, std::strtod(sp_env, nullptr));
  // the scratch keeps room for the counts without the term too (binds that force them)
  if (plan.split_pair > 0) plan.partial_rows = std::max(plan.partial_rows, partial_rows());
  // The capped instance where one exists (FP8 hcvt d256; see PagedPlan::early_cap), on SM90 only:
  // the merge CTA's room beside two main CTAs is SM90's (SM12x runs one 74 KB hcvt CTA per SM,
  // and there the instance takes 249 registers uncapped: 208 would spill).
  plan.early_cap = true;
  const char* cap_env = std::getenv("B12X_ATTN_EARLY_CAP");
  if (cap_env != nullptr) plan.early_cap = std::string(cap_env) != "0";
  plan.early_cap = plan.early_cap && plan.early_kv && !plan.stamps &&
                   dev.family == ArchFamily::kSm90 && k->launch_early_cap != nullptr;
  const char* eh_env = std::getenv("B12X_ATTN_EPILOGUE_HALF");
  if (eh_env != nullptr) plan.epilogue_half = std::string(eh_env) != "0";
  if (plan.lean) {
    plan.kernel += plan.spec ? "_lean_spec" : "_lean";
    if (plan.early_kv) plan.kernel += "_early";
    if (plan.early_cap) plan.kernel += "_r208";
    if (plan.stamps) plan.kernel += "_stamps";
    const void* fn = plan.stamps      ? (plan.early_kv ? k->func_stamp_early : k->func_stamp)
                     : plan.early_cap ? k->func_early_cap
                     : plan.early_kv  ? k->func_early
                                      : k->func_lean;
    const DeviceScope scope(caps.device);
    B12X_CUDA_CHECK(::b12x::detail::opt_in_smem(fn, k->smem));
  }
  // Tickets: at most B * ceil(q_len * group / tile_rows) <= T * group / tile_rows + B row tiles.
  const int64_t max_row_tiles =
      plan.fused_merge
          ? ceil_div(int64_t(caps.max_total_q) * group, plan.tile_rows) + caps.max_batch
          : 0;

  int64_t off = 0;
  plan.off_tiles = off;
  off = align_up(off + int64_t(caps.max_batch + 1) * 4, kAlign);
  plan.off_partial_o = off;
  off = align_up(off + plan.partial_rows * caps.num_q_heads * caps.head_dim_vo * 4, kAlign);
  plan.off_partial_lse = off;
  off = align_up(off + plan.partial_rows * caps.num_q_heads * 4, kAlign);
  plan.off_lse = off;
  off = align_up(off + int64_t(caps.num_q_heads) * caps.max_total_q * 4, kAlign);
  plan.off_merge_ctr = off;
  off = align_up(off + max_row_tiles * caps.num_kv_heads * 4, kAlign);
  if (plan.stamps) {
    // Main CTAs: grid x (row tiles x KV heads; decode and verify: at most T x group / tile_rows
    // + B row tiles) x splits; merge CTAs: T x Hq.
    const int64_t main_ctas =
        (ceil_div(int64_t(caps.max_total_q) * group, plan.tile_rows) + caps.max_batch) *
        caps.num_kv_heads * plan.split_limit;
    plan.off_stamps = off;
    plan.stamp_merge = main_ctas * detail::kStampSlots;
    off = align_up(off + (plan.stamp_merge +
                          int64_t(caps.max_total_q) * caps.num_q_heads * detail::kMergeStampSlots) *
                             8,
                   kAlign);
  }
  plan.scratch_bytes = off;
  if (log_level() >= 1)
    log_message(1, "attention.plan_paged: " + plan.kernel + " mode=" + mode_name(caps.mode) +
                       " splits<=" + std::to_string(plan.split_limit) +
                       " scratch=" + std::to_string(plan.scratch_bytes));
  // Kernel signature (warm-up / freeze, b12x/runtime.h): the variant, and whether a run at
  // max_batch splits the KV (the merge kernel); never head counts or lengths.
  const bool splits =
      plan.split_limit > 1 && (q_len == 0 || plan.auto_splits(caps.max_batch, q_len) > 1);
  b12x::detail::resolve_kernels(
      kPlanOp, caps.device,
      "attention." + plan.kernel + " mode=" + mode_name(caps.mode) +
          (splits ? (plan.fused_merge ? " split_merge_fused" : " split_merge") : ""),
      "Hq=" + std::to_string(caps.num_q_heads) + " Hkv=" + std::to_string(caps.num_kv_heads) +
          " D=" + std::to_string(caps.head_dim_qk) + "/" + std::to_string(caps.head_dim_vo) +
          " page=" + std::to_string(caps.page_size) + " max_batch=" +
          std::to_string(caps.max_batch) + " max_total_q=" + std::to_string(caps.max_total_q) +
          " W=" + std::to_string(caps.max_page_table_width));
  return plan;
}

PagedBinding bind_paged(const PagedPlan& plan, const TensorRef& scratch, const PagedArgs& a) {
  const char* op = kBindOp;
  B12X_CHECK_ARG(plan.impl != nullptr, op, ": the plan was not created by plan_paged");
  const PagedCaps& c = plan.caps;
  const auto s = detail::validate_paged_args(a, op);
  // Against the plan's capacities.
  B12X_CHECK_ARG(a.q.dtype == c.q_dtype, op, ": q dtype ", dtype_name(a.q.dtype),
                 " differs from the plan's ", dtype_name(c.q_dtype));
  B12X_CHECK_ARG(a.k_cache.dtype == c.kv_dtype, op, ": k_cache dtype ", dtype_name(a.k_cache.dtype),
                 " differs from the plan's kv_dtype ", dtype_name(c.kv_dtype));
  B12X_CHECK_ARG(s.num_q_heads == c.num_q_heads && s.num_kv_heads == c.num_kv_heads, op,
                 ": heads (q=", s.num_q_heads, ", kv=", s.num_kv_heads,
                 ") differ from the plan's (", c.num_q_heads, ", ", c.num_kv_heads, ")");
  B12X_CHECK_ARG(s.head_dim_qk == c.head_dim_qk && s.head_dim_vo == c.head_dim_vo, op,
                 ": head dims (", s.head_dim_qk, ", ", s.head_dim_vo, ") differ from the plan's (",
                 c.head_dim_qk, ", ", c.head_dim_vo, ")");
  B12X_CHECK_ARG(s.page_size == c.page_size, op, ": k_cache page_size ", s.page_size,
                 " differs from the plan's ", c.page_size);
  B12X_CHECK_ARG(s.batch <= c.max_batch, op, ": batch ", s.batch, " exceeds the plan's max_batch ",
                 c.max_batch);
  B12X_CHECK_ARG(s.table_width <= c.max_page_table_width, op, ": page_table width ", s.table_width,
                 " exceeds the plan's max_page_table_width ", c.max_page_table_width);
  B12X_CHECK_ARG(s.total_q <= c.max_total_q, op, ": total q ", s.total_q,
                 " exceeds the plan's max_total_q ", c.max_total_q);
  B12X_CHECK_ARG(s.num_pages >= 1, op, ": k_cache has no pages");
  int q_len = 0;
  if (c.mode == Mode::kDecode) {
    // T < B happens with padded graph batches: requests whose row lies past T are dropped.
    B12X_CHECK_ARG(s.total_q <= s.batch, op,
                   ": decode needs one query per request, got T=", s.total_q, " for B=", s.batch,
                   " (supported: T <= B)");
    q_len = 1;
  } else if (c.mode == Mode::kVerify) {
    B12X_CHECK_ARG(s.total_q % s.batch == 0, op,
                   ": verify needs a uniform q_len, got T=", s.total_q, " for B=", s.batch);
    q_len = static_cast<int>(s.total_q / s.batch);
  }
  // Device, alignment and the scratch.
  const TensorRef* dev_tensors[] = {&a.q,          &a.k_cache,       &a.v_cache,     &a.out,
                                    &a.page_table, &a.cache_seqlens, &a.cu_seqlens_q};
  const char* dev_names[] = {"q",          "k_cache",       "v_cache",     "out",
                             "page_table", "cache_seqlens", "cu_seqlens_q"};
  for (int i = 0; i < 7; ++i) check_device(*dev_tensors[i], op, dev_names[i], c.device);
  if (a.k_descale.data) check_device(a.k_descale, op, "k_descale", c.device);
  if (a.v_descale.data) check_device(a.v_descale, op, "v_descale", c.device);
  if (a.sinks.data) check_device(a.sinks, op, "sinks", c.device);
  if (a.lse.data) check_device(a.lse, op, "lse", c.device);
  for (const auto* t : {&a.q, &a.k_cache, &a.v_cache, &a.out}) {
    const char* name = t == &a.q         ? "q"
                       : t == &a.k_cache ? "k_cache"
                       : t == &a.v_cache ? "v_cache"
                                         : "out";
    check_aligned(*t, op, name, 16);
    for (int d = 0; d < t->ndim - 1; ++d)
      B12X_CHECK_ARG(t->byte_stride(d) % 16 == 0 || t->shape[d] == 1, op, ": ", name, " stride ",
                     t->stride[d], " of dim ", d, " is not a multiple of 16 bytes (", t->describe(),
                     "; supported: 16-byte aligned rows)");
  }
  // The kernels address a K/V row as base + page id x page stride (32 x 32 -> 64-bit) plus a
  // 32-bit offset inside the page.
  const int64_t kv_eb = c.kv_dtype == DType::kFP8E4M3 ? 1 : 2;
  for (const auto* t : {&a.k_cache, &a.v_cache}) {
    const char* name = t == &a.k_cache ? "k_cache" : "v_cache";
    const bool page_ok =
        t->shape[0] <= 1 || (t->stride[0] >= 0 && t->stride[0] * kv_eb <= UINT32_MAX);
    const bool tok_ok = t->stride[1] >= 0 && t->stride[1] * kv_eb * s.page_size <= INT32_MAX;
    B12X_CHECK_SUPPORTED(page_ok && tok_ok, op, ": ", name, " strides (page ", t->stride[0],
                         ", token ", t->stride[1],
                         " elements; supported: a page stride below 4 GiB "
                         "and page_size x the token stride below 2 GiB, both non-negative)");
  }
  check_defined(scratch, op, "scratch");
  check_dtype(scratch, op, "scratch", {DType::kUInt8});
  check_ndim(scratch, op, "scratch", 1);
  check_contiguous(scratch, op, "scratch");
  check_device(scratch, op, "scratch", c.device);
  check_aligned(scratch, op, "scratch", 256);
  B12X_CHECK_ARG(scratch.shape[0] >= plan.scratch_bytes, op, ": scratch has ", scratch.shape[0],
                 " bytes, the plan needs ", plan.scratch_bytes);

  PagedBinding b;
  b.plan = plan;
  b.q = a.q.data;
  b.k_cache = a.k_cache.data;
  b.v_cache = a.v_cache.data;
  b.out = a.out.data;
  b.page_table = static_cast<const int32_t*>(a.page_table.data);
  b.cache_seqlens = static_cast<const int32_t*>(a.cache_seqlens.data);
  b.cu_seqlens_q = static_cast<const int32_t*>(a.cu_seqlens_q.data);
  b.k_descale = static_cast<const float*>(a.k_descale.data);
  b.v_descale = static_cast<const float*>(a.v_descale.data);
  b.sinks = static_cast<const float*>(a.sinks.data);
  b.lse = static_cast<float*>(a.lse.data);
  b.scratch = static_cast<uint8_t*>(scratch.data);
  b.q_stride_t = a.q.stride[0];
  b.q_stride_h = a.q.stride[1];
  b.o_stride_t = a.out.stride[0];
  b.o_stride_h = a.out.stride[1];
  b.k_stride_page = a.k_cache.stride[0];
  b.k_stride_tok = a.k_cache.stride[1];
  b.k_stride_head = a.k_cache.stride[2];
  b.v_stride_page = a.v_cache.stride[0];
  b.v_stride_tok = a.v_cache.stride[1];
  b.v_stride_head = a.v_cache.stride[2];
  b.pt_stride = a.page_table.stride[0];
  b.pt_width = static_cast<int>(s.table_width);
  detail::scale_strides(a.k_descale, &b.kd_stride_b, &b.kd_stride_h);
  detail::scale_strides(a.v_descale, &b.vd_stride_b, &b.vd_stride_h);
  if (a.lse.data) {
    b.lse_stride_t = a.lse.stride[0];
    b.lse_stride_h = a.lse.stride[1];
  }
  b.batch = static_cast<int>(s.batch);
  b.total_q = static_cast<int>(s.total_q);
  b.q_len = q_len;
  b.num_pages = static_cast<int>(std::min<int64_t>(s.num_pages, INT32_MAX));
  b.window_left = a.window_left;
  b.softmax_scale = a.softmax_scale > 0 ? a.softmax_scale : 1.f / std::sqrt(float(s.head_dim_qk));

  int splits = 1;
  if (plan.split_limit > 1) {
    splits = a.num_splits > 0 ? std::min(a.num_splits, plan.split_limit)
                              : (q_len > 0 ? plan.auto_splits(b.batch, q_len) : plan.split_limit);
    if (plan.partial_rows < int64_t(splits) * b.total_q)
      splits = static_cast<int>(std::max<int64_t>(1, plan.partial_rows / std::max(1, b.total_q)));
  }
  b.num_splits = std::max(1, splits);
  const int group = c.num_q_heads / c.num_kv_heads;
  if (q_len > 0) {
    b.num_row_tiles = b.batch * ceil_div(int64_t(q_len) * group, plan.tile_rows);
  } else {
    b.num_row_tiles = static_cast<int>(
        (int64_t(b.total_q) * group + int64_t(b.batch) * (plan.tile_rows - 1)) / plan.tile_rows);
  }
  return b;
}

void run_paged(const PagedBinding& b, Stream stream) {
  const PagedPlan& plan = b.plan;
  const auto* k = static_cast<const KernelInfo*>(plan.impl);
  B12X_CHECK_ARG(k != nullptr, "attention.run_paged: binding was not created by bind_paged");
  const PagedCaps& c = plan.caps;
  PagedParams p{};
  p.q = b.q;
  p.k = b.k_cache;
  p.v = b.v_cache;
  p.out = b.out;
  p.page_table = b.page_table;
  p.seqlens = b.cache_seqlens;
  p.cu_q = b.cu_seqlens_q;
  p.k_descale = b.k_descale;
  p.v_descale = b.v_descale;
  p.sinks = b.sinks;
  p.lse = b.lse;
  p.tile_start = reinterpret_cast<int32_t*>(b.scratch + plan.off_tiles);
  p.part_o = reinterpret_cast<float*>(b.scratch + plan.off_partial_o);
  p.part_lse = reinterpret_cast<float*>(b.scratch + plan.off_partial_lse);
  p.q_st = b.q_stride_t;
  p.q_sh = b.q_stride_h;
  p.o_st = b.o_stride_t;
  p.o_sh = b.o_stride_h;
  p.k_sp = b.k_stride_page;
  p.k_st = b.k_stride_tok;
  p.k_sh = b.k_stride_head;
  p.v_sp = b.v_stride_page;
  p.v_st = b.v_stride_tok;
  p.v_sh = b.v_stride_head;
  p.pt_stride = b.pt_stride;
  p.kd_sb = b.kd_stride_b;
  p.kd_sh = b.kd_stride_h;
  p.vd_sb = b.vd_stride_b;
  p.vd_sh = b.vd_stride_h;
  p.lse_st = b.lse_stride_t;
  p.lse_sh = b.lse_stride_h;
  p.batch = b.batch;
  p.total_q = b.total_q;
  p.num_pages = b.num_pages;
  p.max_kv = static_cast<int>(std::min<int64_t>(int64_t(b.pt_width) * c.page_size, INT32_MAX));
  const int group = c.num_q_heads / c.num_kv_heads;
  p.tiles_per_req = b.q_len > 0 ? ceil_div(int64_t(b.q_len) * group, plan.tile_rows) : 0;
  p.num_q_heads = c.num_q_heads;
  p.num_kv_heads = c.num_kv_heads;
  p.group = group;
  int shift = 0;
  while ((1 << shift) < c.page_size) ++shift;
  p.page_shift = shift;
  // A window of max_kv or more keys excludes nothing (the last visible key is below max_kv):
  // clamped, qi + lk - qlen - window_left stays within int (clamp_len in the kernels).
  p.window_left = b.window_left < 0 ? -1 : std::min(b.window_left, p.max_kv);
  p.num_splits = b.num_splits;
  p.min_chunk = plan.min_split_kv;
  p.chunk_round = plan.align_chunks ? plan.tile_kv - 1 : 0;  // KV tiles are powers of two
  p.tile_rows = plan.tile_rows;
  p.tile_kv = plan.tile_kv;
  p.heads_inner = plan.heads_inner ? 1 : 0;
  p.scale_log2 = b.softmax_scale * 1.4426950408889634f;
  p.rescale_slack = plan.rescale_slack;
  p.full_ring = plan.full_ring ? 1 : 0;
  p.short_ahead = plan.short_ahead ? 1 : 0;
  p.page_runs = plan.page_runs ? 1 : 0;
  p.spread_merge = plan.spread_merge ? (plan.spread_shared ? 2 : 1) : 0;
  p.split_interleave = plan.split_interleave ? 1 : 0;  // plan_paged: decode tiles only
  int kv_shift = 0;
  while ((1 << kv_shift) < plan.tile_kv) ++kv_shift;
  p.tile_kv_shift = kv_shift;  // KV tiles are powers of two (32, 64, 128)
  p.min_tiles = std::max(1, p.min_chunk / p.tile_kv);
  p.div_group = detail::make_fast_div(static_cast<uint32_t>(p.group));
  p.div_kv_heads = detail::make_fast_div(static_cast<uint32_t>(p.num_kv_heads));
  p.div_tiles_per_req = detail::make_fast_div(static_cast<uint32_t>(p.tiles_per_req));
  p.div_splits = detail::make_fast_div(static_cast<uint32_t>(p.num_splits));
  p.div_min_tiles = detail::make_fast_div(static_cast<uint32_t>(p.min_tiles));
  if (b.num_row_tiles <= 0) return;
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  // PDL (SM90+): each kernel may launch while its predecessor drains; all three wait for it
  // (griddepcontrol.wait) before they read anything it may write (before the wait, the merge
  // kernel reads the metadata, which its predecessor only reads, and a prefetching main kernel
  // reads metadata only to form prefetch addresses).
  const bool pdl = plan.arch >= 90 && plan.use_pdl;
  // Without PDL the values read before the (absent) wait are final: nothing to speculate on.
  p.spec = plan.spec && pdl ? 1 : 0;
  p.epilogue_half = plan.epilogue_half ? 1 : 0;
  // The prefetch is only useful while waiting for the previous grid (decode tiles: p.prefetch
  // is ignored by the extend tiles).
  // Early K/V copies the prologue's tiles before the wait, which makes the prefetch redundant and
  // its dependent L2 reads only delay the copies (round 53: BF16 B=1 x 8k 13.0 / 13.2 -> 12.8 /
  // 12.9 us, FP8 B=1 10.7 -> 10.4, 16/2/256 B=1 11.5 -> 11.2).
  const bool prefetch =
      pdl && !plan.early_kv && (plan.prefetch || (plan.prefetch_splits && b.num_splits > 1));
  const int stages = static_cast<const detail::KernelInfo*>(plan.impl)->stages;
  const int ring_ahead = plan.full_ring ? stages : stages - 1;
  p.prefetch = prefetch ? (plan.prefetch_tiles > 0 ? plan.prefetch_tiles : ring_ahead) : 0;
  if (p.tiles_per_req == 0) {
    detail::launch_paged_schedule(p, s, pdl);
    B12X_CUDA_CHECK_LAUNCH();
  }
  // Fused merge: the tickets of the live (row tile, KV head) pairs start at zero every launch
  // (a memset node when captured: capture-safe, no allocation).
  const bool fused = b.num_splits > 1 && plan.fused_merge && p.tiles_per_req > 0;
  if (fused) {
    p.merge_ctr = reinterpret_cast<int32_t*>(b.scratch + plan.off_merge_ctr);
    B12X_CUDA_CHECK(cudaMemsetAsync(p.merge_ctr, 0,
                                    size_t(b.num_row_tiles) * c.num_kv_heads * sizeof(int32_t), s));
  }
  const dim3 grid = plan.heads_inner
                        ? dim3(unsigned(int64_t(b.num_row_tiles) * c.num_kv_heads), 1, b.num_splits)
                        : dim3(b.num_row_tiles, c.num_kv_heads, b.num_splits);
  if (plan.stamps) {
    p.stamps = reinterpret_cast<unsigned long long*>(b.scratch + plan.off_stamps);
    p.stamp_merge = plan.stamp_merge;
  }
  const detail::LaunchFn main_fn = plan.stamps
                                       ? (plan.early_kv ? k->launch_stamp_early : k->launch_stamp)
                                   : plan.early_cap ? k->launch_early_cap
                                   : plan.early_kv  ? k->launch_early
                                   : plan.lean      ? k->launch_lean
                                                    : k->launch;
  main_fn(p, grid, s, pdl);
  B12X_CUDA_CHECK_LAUNCH();
  if (b.num_splits > 1 && !fused) {
    const int64_t rows = int64_t(b.total_q) * c.num_q_heads;
    // one CTA per (token, head)
    const detail::LaunchFn merge_fn = plan.stamps ? k->launch_merge_stamp : k->launch_merge;
    merge_fn(p, dim3(static_cast<unsigned>(rows)), s, pdl);
    B12X_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace b12x::attention
