// Helpers for the instantiation units: one KernelInfo per compiled variant.
#pragma once

#include "attention/kernels/paged_attention.cuh"
#include "attention/paged_kernels.h"

namespace b12x::attention::detail {

template <typename T, typename Cfg, bool kLean, bool kStamp = false, bool kEarly = false>
void launch_main(const PagedParams& p, dim3 grid, cudaStream_t s, bool pdl) {
  launch_kernel(paged_attention_kernel<T, Cfg, kLean, kStamp, kEarly>, grid, Cfg::kThreads,
                Cfg::kSmemBytes, s, pdl, p);
}
template <typename T, typename Cfg, int kMaxRegs>
void launch_main_cap(const PagedParams& p, dim3 grid, cudaStream_t s, bool pdl) {
  launch_kernel(paged_attention_kernel_cap<T, Cfg, true, false, true, kMaxRegs>, grid,
                Cfg::kThreads, Cfg::kSmemBytes, s, pdl, p);
}
template <typename T, int kDv, bool kStamp = false, bool kSlim = false>
void launch_merge(const PagedParams& p, dim3 grid, cudaStream_t s, bool pdl) {
  if constexpr (kSlim)
    launch_kernel(paged_merge_kernel_slim<T, kDv, kStamp>, grid, 32 * kMergeWarps, 0, s, pdl, p);
  else
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
      k.launch_merge_stamp_slim = &launch_merge<T, kDv, true, true>;
    }
    if constexpr (kWithEarly) {
      k.func_early =
          reinterpret_cast<const void*>(&paged_attention_kernel<T, Cfg, true, false, true>);
      k.launch_early = &launch_main<T, Cfg, true, false, true>;
      // FP8 hcvt at head dim 256: the early instance at 208 registers (PagedPlan::early_cap)
      if constexpr (kFp8 && kDqk == 256 && kKind == 8) {
        k.func_early_cap = reinterpret_cast<const void*>(
            &paged_attention_kernel_cap<T, Cfg, true, false, true, 208>);
        k.launch_early_cap = &launch_main_cap<T, Cfg, 208>;
      }
      if constexpr (kWithStamp) {
        k.func_stamp_early =
            reinterpret_cast<const void*>(&paged_attention_kernel<T, Cfg, true, true, true>);
        k.launch_stamp_early = &launch_main<T, Cfg, true, true, true>;
      }
    }
  }
  k.launch_merge = &launch_merge<T, kDv>;
  k.launch_merge_slim = &launch_merge<T, kDv, false, true>;
  k.name = name;
  return k;
}

/// The variants of one head-dim pair: {bf16 q + bf16 KV, fp16 q + fp16 KV, bf16 q + fp8 KV}
/// x {extend, decode wide, decode deep}, plus the FP8 direct decode tiles (direct, wdirect, and
/// wdirect2, hcvt, hbits, hvec for head dim 128), the 16-bit wide3 tile (head dims <= 128 and
/// 256), the split-dims wideh (bf16, head dim 256) and the extend tile
/// with 64-token stages (head dim 128).
template <typename T, bool kFp8, int kDqk, int kDv>
void register_kinds(std::vector<KernelInfo>& out, const char* tag) {
  out.push_back(make_info<T, kFp8, kDqk, kDv, 0>(tag));
  if constexpr (kDqk == 128 && kDv == 128) {
    out.push_back(make_info<T, kFp8, kDqk, kDv, 7>(tag));
    out.push_back(make_info<T, kFp8, kDqk, kDv, 10>(tag));
    if constexpr (!kFp8) out.push_back(make_info<T, kFp8, kDqk, kDv, 12>(tag));
  }
  // wide: the 16-bit decode default for head dim 256 (lean at 128 too: 3 CTAs per SM)
  constexpr bool kLeanWide = !kFp8 && kDqk == kDv && (kDqk == 128 || kDqk == 256);
  out.push_back(make_info<T, kFp8, kDqk, kDv, 1, kLeanWide>(tag));
  out.push_back(make_info<T, kFp8, kDqk, kDv, 2>(tag));
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (!kFp8 && (kDqk <= 128 || (kDqk == 256 && kDv == 256)))
    out.push_back(
        make_info<T, kFp8, kDqk, kDv, 5, (kDqk <= 128), (kBf16 && kDqk == 128 && kDv == 128),
                  (kBf16 && kDqk == 128 && kDv == 128)>(tag));
  // wideh (bf16 q): wide at head dim 256 with each token group's output dims split over two
  // warps
  if constexpr (!kFp8 && std::is_same_v<T, __nv_bfloat16> && kDqk == 256 && kDv == 256)
    out.push_back(make_info<T, kFp8, kDqk, kDv, 16, true>(tag));
  // wideh3 (bf16 q, head dim 256, SM90): wideh with 3 stages
  if constexpr (!kFp8 && std::is_same_v<T, __nv_bfloat16> && kDqk == 256 && kDv == 256)
    out.push_back(make_info<T, kFp8, kDqk, kDv, 18, true, true, true>(tag));
  if constexpr (kFp8 && (kDqk == 128 || kDqk == 256)) {
    out.push_back(make_info<T, kFp8, kDqk, kDv, 3>(tag));
    out.push_back(make_info<T, kFp8, kDqk, kDv, 4>(tag));
  }
  if constexpr (kFp8 && kDqk == 128 && kDv == 128) {
    out.push_back(make_info<T, kFp8, kDqk, kDv, 6>(tag));
    out.push_back(make_info<T, kFp8, kDqk, kDv, 8, true>(tag));
    out.push_back(make_info<T, kFp8, kDqk, kDv, 9>(tag));
    out.push_back(make_info<T, kFp8, kDqk, kDv, 11>(tag));
    out.push_back(make_info<T, kFp8, kDqk, kDv, 13, true, true, (kDqk == 128)>(tag));
  }
  if constexpr (kFp8 && kDqk == 256 && kDv == 256) {
    out.push_back(make_info<T, kFp8, kDqk, kDv, 8, true, true, true>(tag));
    out.push_back(make_info<T, kFp8, kDqk, kDv, 9>(tag));
    out.push_back(make_info<T, kFp8, kDqk, kDv, 13, true, true, (kDqk == 128)>(tag));
    out.push_back(make_info<T, kFp8, kDqk, kDv, 14>(tag));
  }
}
template <int kDqk, int kDv>
void register_dims(std::vector<KernelInfo>& out, const char* tag) {
  register_kinds<__nv_bfloat16, false, kDqk, kDv>(out, tag);
  register_kinds<__half, false, kDqk, kDv>(out, tag);
  register_kinds<__nv_bfloat16, true, kDqk, kDv>(out, tag);
}

}  // namespace b12x::attention::detail
