// Registry of the compiled paged-attention kernel variants (one entry per head dims x q dtype x
// KV format x decode/extend tile shape). Filled by the instantiation units paged_attention_d*.cu.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "attention/paged_params.h"
#include "b12x/types.h"
#include "core/launch.h"

namespace b12x::attention::detail {

/// `pdl`: launch as a programmatic dependent of the previous kernel in the stream (SM90+): the
/// grid may start while its predecessor drains and waits (griddepcontrol.wait) before reading.
using LaunchFn = void (*)(const PagedParams&, dim3 grid, cudaStream_t, bool pdl);

/// cudaLaunchKernelEx with the programmatic-stream-serialization attribute when `pdl`.
template <typename Kernel>
inline cudaError_t launch_kernel(Kernel kernel, dim3 grid, int threads, int smem, cudaStream_t s,
                                 bool pdl, const PagedParams& p) {
  return ::b12x::detail::launch_ex(kernel, grid, dim3(threads), static_cast<size_t>(smem), s, pdl,
                                   dim3(1, 1, 1), p);
}

struct KernelInfo {
  int dqk = 0, dv = 0;
  /// 0 extend, 1 decode wide (4 warps x 16 tokens), 2 deep (2 x 16; FP8 head dims 64 / 192),
  /// 5 wide3, 8 hcvt, 13 hcvt3, 16 wideh, 18 wideh3, 28 hcvt8 (session 24's probe) (TileCfg; the
  /// other kinds were removed, see docs/attention.md)
  int kind = 0;
  DType q = DType::kBF16;
  bool fp8 = false;
  const void* func = nullptr;
  int smem = 0, threads = 0, tile_rows = 0, tile_kv = 0, stages = 0, warps_n = 0;
  LaunchFn launch = nullptr;
  LaunchFn launch_merge = nullptr;
  /// The lean instance (decode defaults compiled in; B12X_ATTN_LEAN) where one exists.
  const void* func_lean = nullptr;
  LaunchFn launch_lean = nullptr;
  /// The lean instance with the timeline probe's stamps and its merge kernel (B12X_ATTN_STAMPS;
  /// null where not compiled).
  const void* func_stamp = nullptr;
  LaunchFn launch_stamp = nullptr;
  LaunchFn launch_merge_stamp = nullptr;
  /// The early-K/V lean instance (B12X_ATTN_EARLY_KV), and stamped; null where not compiled.
  const void* func_early = nullptr;
  LaunchFn launch_early = nullptr;
  const void* func_stamp_early = nullptr;
  /// The early instance under a register cap that lets the merge CTA sit beside the main CTAs
  /// (PagedPlan::early_cap; FP8 hcvt head dim 256 only).
  const void* func_early_cap = nullptr;
  LaunchFn launch_early_cap = nullptr;
  LaunchFn launch_stamp_early = nullptr;
  const char* name = "";
};

void register_paged_d64(std::vector<KernelInfo>& out);
void register_paged_d128(std::vector<KernelInfo>& out);
void register_paged_d192(std::vector<KernelInfo>& out);
void register_paged_d256(std::vector<KernelInfo>& out);

/// The scheduler kernel (extend): tile_start[B+1] from cu_seqlens_q.
void launch_paged_schedule(const PagedParams& p, cudaStream_t stream, bool pdl);

}  // namespace b12x::attention::detail
