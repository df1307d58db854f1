// Helpers for the instantiation units: one KernelInfo per compiled variant.
#pragma once

#include "attention/kernels/paged_attention.cuh"
#include "attention/paged_kernels.h"

namespace b12x::attention::detail {

template <typename T, typename Cfg, bool kLean, bool kStamp = false, bool kEarly = false,
          int kVar = 0>
void launch_main(const PagedParams& p, dim3 grid, cudaStream_t s, bool pdl) {
  launch_kernel(paged_attention_kernel<T, Cfg, kLean, kStamp, kEarly, kVar>, grid, Cfg::kThreads,
                Cfg::kSmemBytes, s, pdl, p);
}
template <typename T, typename Cfg, int kMaxRegs>
void launch_main_cap(const PagedParams& p, dim3 grid, cudaStream_t s, bool pdl) {
  launch_kernel(paged_attention_kernel_cap<T, Cfg, true, false, true, kMaxRegs>, grid,
                Cfg::kThreads, Cfg::kSmemBytes, s, pdl, p);
}
template <typename T, int kDv, bool kStamp = false>
void launch_merge(const PagedParams& p, dim3 grid, cudaStream_t s, bool pdl) {
  launch_kernel(paged_merge_kernel<T, kDv, kStamp>, grid, 32 * kMergeWarps, 0, s, pdl, p);
}

/// kWithLean: also the lean instance (the decode defaults' tiles); kWithStamp: also the lean
/// instance with the timeline probe's stamps (B12X_ATTN_STAMPS; bf16 q defaults only);
/// kWithEarly: the early-K/V lean instance (B12X_ATTN_EARLY_KV; with kWithStamp also stamped).
template <typename T, bool kFp8, int kDqk, int kDv, int kKind, bool kWithLean = false,
          bool kWithStamp = false, bool kWithEarly = false>
KernelInfo make_info(const char* name) {
  using Cfg = TileCfg<kDqk, kDv, kKind, kFp8>;
  KernelInfo k;
  k.dqk = kDqk;
  k.dv = kDv;
  k.kind = kKind;
  k.q = std::is_same_v<T, __nv_bfloat16> ? DType::kBF16 : DType::kFP16;
  k.fp8 = kFp8;
  k.func = reinterpret_cast<const void*>(&paged_attention_kernel<T, Cfg>);
  k.smem = Cfg::kSmemBytes;
  k.threads = Cfg::kThreads;
  k.tile_rows = Cfg::kBM;
  k.tile_kv = Cfg::kBN;
  k.stages = Cfg::kStages;
  k.warps_n = Cfg::kWN;
  k.launch = &launch_main<T, Cfg, false>;
  if constexpr (kWithLean) {
    k.func_lean = reinterpret_cast<const void*>(&paged_attention_kernel<T, Cfg, true>);
    k.launch_lean = &launch_main<T, Cfg, true>;
    if constexpr (kWithStamp) {
      k.func_stamp = reinterpret_cast<const void*>(&paged_attention_kernel<T, Cfg, true, true>);
      k.launch_stamp = &launch_main<T, Cfg, true, true>;
      k.launch_merge_stamp = &launch_merge<T, kDv, true>;
    }
    if constexpr (kWithEarly) {
      // Session 25: hcvt8's early instance loads the V descale before the epilogue's barriers and
      // prefetches its Q rows into L2 before the PDL wait (round 94, 16/2/256 x 8k, us, then ->
      // now, two passes: B = 8 23.15 / 23.01 -> 23.04 / 23.00, B = 4 14.84 / 14.69 -> 14.57 /
      // 14.48, B = 2 11.93 / 11.82 -> 11.69 / 11.57, B = 1 10.36 / 10.13 -> 10.25 / 9.92, B = 32
      // 69.15 / 68.67 -> 68.58 / 68.39, page 64 B = 8 22.99 / 22.94 -> 22.88 / 22.75). wideh3
      // keeps none (the Q prefetch: B = 8 36.83 / 36.66 -> 36.45 / 36.43, B = 2 15.14 / 15.04 ->
      // 15.29 / 15.21; docs/attention.md "Session 25").
      constexpr int kEarlyVar =
          kDqk == 256 && kDv == 256 && kKind == 28 ? (kVarVdEarly | kVarQPrefetch) : 0;
      k.func_early = reinterpret_cast<const void*>(
          &paged_attention_kernel<T, Cfg, true, false, true, kEarlyVar>);
      k.launch_early = &launch_main<T, Cfg, true, false, true, kEarlyVar>;
      // FP8 hcvt at head dim 256: the early instance at 208 registers (PagedPlan::early_cap;
      // hcvt8 takes 206 uncapped)
      if constexpr (kFp8 && kDqk == 256 && kKind == 8) {
        k.func_early_cap = reinterpret_cast<const void*>(
            &paged_attention_kernel_cap<T, Cfg, true, false, true, 208>);
        k.launch_early_cap = &launch_main_cap<T, Cfg, 208>;
      }
      if constexpr (kWithStamp) {
        k.func_stamp_early = reinterpret_cast<const void*>(
            &paged_attention_kernel<T, Cfg, true, true, true, kEarlyVar>);
        k.launch_stamp_early = &launch_main<T, Cfg, true, true, true, kEarlyVar>;
      }
    }
  }
  k.launch_merge = &launch_merge<T, kDv>;
  k.name = name;
  return k;
}

/// The variants of one head-dim pair that a default plan reaches on some device (SM90, SM12x,
/// SM89; decode / verify / extend; every batch capacity), for {bf16 q + bf16 KV, fp16 q + fp16
/// KV, bf16 q + fp8 KV}:
/// - extend (0): every head-dim pair and KV format;
/// - 16-bit decode: wide3 (5, lean) for head dims <= 128; wide (1) for 192 and 256 (lean at 256:
///   fp16, SM12x / SM89, and SM90 plans of more than kWidehMaxBatch requests), wideh (16) and
///   wideh3 (18, with early K/V) for bf16 256 on SM90;
/// - FP8 decode: hcvt3 (13, SM90) with hcvt (8) where a block holds only 99 KB, for head dims
///   128 and 256 (hcvt also the 256 default up to kHcvt256MaxBatch requests, with early K/V and
///   its 208-register SM90 instance); hcvt8 (28, with early K/V) for SM90 head dim 256 plans of
///   q_len x group <= 8 (any batch capacity); deep (2) for head dims 64 and 192.
/// Stamped instances (B12X_ATTN_STAMPS) for the bf16 q early-K/V defaults. Session 21 removed
/// the measured-and-dropped variants (docs/attention.md "Session 21").
template <typename T, bool kFp8, int kDqk, int kDv>
void register_kinds(std::vector<KernelInfo>& out, const char* tag) {
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  constexpr bool kPow2 = kDqk == kDv && (kDqk == 128 || kDqk == 256);
  out.push_back(make_info<T, kFp8, kDqk, kDv, 0>(tag));
  if constexpr (!kFp8 && kDqk <= 128) {
    constexpr bool kEarly = kBf16 && kDqk == 128;
    out.push_back(make_info<T, kFp8, kDqk, kDv, 5, true, kEarly, kEarly>(tag));
  }
  if constexpr (!kFp8 && kDqk > 128) out.push_back(make_info<T, kFp8, kDqk, kDv, 1, kPow2>(tag));
  if constexpr (!kFp8 && kBf16 && kDqk == 256 && kDv == 256) {
    out.push_back(make_info<T, kFp8, kDqk, kDv, 16, true>(tag));
    out.push_back(make_info<T, kFp8, kDqk, kDv, 18, true, true, true>(tag));
  }
  if constexpr (kFp8 && !kPow2) out.push_back(make_info<T, kFp8, kDqk, kDv, 2>(tag));
  if constexpr (kFp8 && kPow2) {
    constexpr bool k256 = kDqk == 256;
    out.push_back(make_info<T, kFp8, kDqk, kDv, 8, true, k256, k256>(tag));
    out.push_back(make_info<T, kFp8, kDqk, kDv, 13, true, !k256, !k256>(tag));
    // hcvt8 (28; head dim 256, q_len x group <= 8)
    if constexpr (k256) out.push_back(make_info<T, kFp8, kDqk, kDv, 28, true, false, true>(tag));
  }
}
template <int kDqk, int kDv>
void register_dims(std::vector<KernelInfo>& out, const char* tag) {
  register_kinds<__nv_bfloat16, false, kDqk, kDv>(out, tag);
  register_kinds<__half, false, kDqk, kDv>(out, tag);
  register_kinds<__nv_bfloat16, true, kDqk, kDv>(out, tag);
}

}  // namespace b12x::attention::detail
