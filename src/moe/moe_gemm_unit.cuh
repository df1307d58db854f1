// One weight format's instances of the generic GEMM engine (kernels/moe_gemm.cuh). Included by
// the per-format units moe_gemm_<format>.cu, one B12X_MOE_GEMM_UNIT line each, so the slowest
// part of the MoE build compiles in parallel.
#pragma once

#include "moe/kernels/moe_gemm.cuh"
#include "moe/moe_launch.h"
#include "moe/moe_launch_util.h"

namespace b12x::moe::detail {

template <typename OpT, bool kFold, int kTN>
void launch_pipe_tn(const GemmArgs& a, dim3 grid, Stream stream, bool pdl) {
  using P = dev::PipeCfg<kTN>;
  auto* k = dev::moe_gemm_pipe_kernel<OpT, kFold, kTN>;
  B12X_CUDA_CHECK(::b12x::detail::opt_in_smem(reinterpret_cast<const void*>(k), P::kSmem));
  launch_k(k, grid, dim3(P::kThreads), P::kSmem, stream, pdl, a);
}
template <typename OpT, bool kFold>
void launch_pipe(const GemmArgs& a, dim3 grid, Stream stream, bool pdl) {
  // The routing was built for a.tile_tokens slots per tile: only the compiled widths may run.
  B12X_ASSERT(a.tile_tokens == 16 || a.tile_tokens == 64, "grouped FP4 tile of ", a.tile_tokens,
              " token slots (compiled: 16, 64)");
  if (a.tile_tokens == 16)
    launch_pipe_tn<OpT, kFold, 16>(a, grid, stream, pdl);
  else
    launch_pipe_tn<OpT, kFold, 64>(a, grid, stream, pdl);
}

template <int WF, typename OpT, bool kFold>
void launch_gemm_t(int cfg, const GemmArgs& a, int gx, int gy, Stream stream, bool pdl) {
  const dim3 grid(gx, gy);
  if constexpr (WF == kWFp4) {
    // Grouped FP4 always stages raw operands (A16 inputs or per-slot pre-quantised rows) through
    // the cp.async pipeline; FP4 decode is the decode stream (moe_decode.cu), not this engine.
    B12X_ASSERT(cfg == kCfgGrouped && a.raw_operands,
                "FP4 GEMMs of this engine are grouped with pre-quantised operands, got cfg=", cfg);
    launch_pipe<OpT, kFold>(a, grid, stream, pdl);
  } else {
    if (cfg == kCfgDecode) {
      launch_k(dev::moe_gemm_kernel<WF, OpT, 1, 4, 8, kFold>, grid, dim3(128), 0, stream, pdl, a);
    } else {
      launch_k(dev::moe_gemm_kernel<WF, OpT, 4, 1, 64, kFold>, grid, dim3(128), 0, stream, pdl, a);
    }
  }
}

/// Operand type / scale folding per format: BF16 operands fold every FP4 block scale exactly;
/// FP16 operands fold UE4M3 scales but not E8M0 ones (outside the FP16 range), which take the
/// fp32 partial-sum path; GGML scales (FP16 d) always multiply the fp32 partial sums.
template <int WF>
void launch_gemm_format(bool fp16, int cfg, const GemmArgs& a, int gx, int gy, Stream s, bool pdl) {
  if constexpr (WF == kWFp4) {
    if (!fp16)
      launch_gemm_t<WF, __nv_bfloat16, true>(cfg, a, gx, gy, s, pdl);
    else if (a.w.scale_kind == 0)
      launch_gemm_t<WF, __half, true>(cfg, a, gx, gy, s, pdl);
    else
      launch_gemm_t<WF, __half, false>(cfg, a, gx, gy, s, pdl);
  } else {
    fp16 ? launch_gemm_t<WF, __half, false>(cfg, a, gx, gy, s, pdl)
         : launch_gemm_t<WF, __nv_bfloat16, false>(cfg, a, gx, gy, s, pdl);
  }
}

}  // namespace b12x::moe::detail

/// Defines detail::launch_gemm_<name> (declared in moe_launch.h) for weight format WF.
#define B12X_MOE_GEMM_UNIT(name, WF)                                                       \
  namespace b12x::moe::detail {                                                            \
  void launch_gemm_##name(bool fp16, int cfg, const GemmArgs& a, int gx, int gy, Stream s, \
                          bool pdl) {                                                      \
    launch_gemm_format<WF>(fp16, cfg, a, gx, gy, s, pdl);                                  \
  }                                                                                        \
  }
