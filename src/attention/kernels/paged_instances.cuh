// Helpers for the instantiation units: one KernelInfo per compiled variant.
#pragma once

#include "attention/kernels/paged_attention.cuh"
#include "attention/paged_kernels.h"

namespace b12x::attention::detail {

template <typename T, typename Cfg>
void launch_main(const PagedParams& p, dim3 grid, cudaStream_t s) {
  paged_attention_kernel<T, Cfg><<<grid, Cfg::kThreads, Cfg::kSmemBytes, s>>>(p);
}
template <typename T, int kDv>
void launch_merge(const PagedParams& p, dim3 grid, cudaStream_t s) {
  paged_merge_kernel<T, kDv><<<grid, 128, 0, s>>>(p);
}

template <typename T, bool kFp8, int kDqk, int kDv, bool kDecode>
KernelInfo make_info(const char* name) {
  using Cfg = TileCfg<kDqk, kDv, kDecode, kFp8>;
  KernelInfo k;
  k.dqk = kDqk;
  k.dv = kDv;
  k.decode = kDecode;
  k.q = std::is_same_v<T, __nv_bfloat16> ? DType::kBF16 : DType::kFP16;
  k.fp8 = kFp8;
  k.func = reinterpret_cast<const void*>(&paged_attention_kernel<T, Cfg>);
  k.smem = Cfg::kSmemBytes;
  k.threads = Cfg::kThreads;
  k.tile_rows = Cfg::kBM;
  k.tile_kv = Cfg::kBN;
  k.stages = Cfg::kStages;
  k.warps_n = Cfg::kWN;
  k.launch = &launch_main<T, Cfg>;
  k.launch_merge = &launch_merge<T, kDv>;
  k.name = name;
  return k;
}

/// The six variants of one head-dim pair: {bf16 q + bf16 KV, fp16 q + fp16 KV, bf16 q + fp8 KV}
/// x {decode, extend}.
template <int kDqk, int kDv>
void register_dims(std::vector<KernelInfo>& out, const char* tag) {
  out.push_back(make_info<__nv_bfloat16, false, kDqk, kDv, true>(tag));
  out.push_back(make_info<__nv_bfloat16, false, kDqk, kDv, false>(tag));
  out.push_back(make_info<__half, false, kDqk, kDv, true>(tag));
  out.push_back(make_info<__half, false, kDqk, kDv, false>(tag));
  out.push_back(make_info<__nv_bfloat16, true, kDqk, kDv, true>(tag));
  out.push_back(make_info<__nv_bfloat16, true, kDqk, kDv, false>(tag));
}

}  // namespace b12x::attention::detail
