// Host-side launcher of the SM90 wgmma tiled kernel of the GGML formats (Q8_0, IQ2_XXS, IQ2_XS),
// defined in linear_tiled_sm90_group.cu; compute capability 9.0 only.
#pragma once

#include "b12x/types.h"
#include "gemm/linear_layout.h"

namespace b12x::gemm::lin {

struct LinearParams;

/// True for the (format, MMA dtype fp16?, tokens per CTA: 128 or 256, var) the group wgmma
/// kernel implements: since session 21 the defaults only, Q8_0 16 (256 tokens) / 21 (128) and
/// IQ2 52 / 53 on FP16 MMAs (the variants are listed at pick() in linear_tiled_sm90_group.cu).
bool wgmma_group_kernel_available(WFmt f, bool fp16, int tok, int var);
/// Host-only setup (dynamic shared memory opt-in); call before capture (plan does).
void prepare_linear_wgmma_group(WFmt f, bool fp16, int tok, int var);
/// grid = (ceil(NP/rows), ceil(M/tok)): rows (128, 256 for var 2) weight rows x tok tokens per
/// CTA, one CTA per SM; raster > 0: 1-D raster bands of token tiles (as the wgmma kernel's,
/// Plan::tiled_wgmma_raster). x must allow 16-byte loads.
void launch_linear_wgmma_group(WFmt f, bool fp16, int tok, int var, int raster,
                               const LinearParams& p, Stream stream);
/// True for the variants with the IQ2 sub-scales folded into FP16 weights (22, 23): on BF16
/// activations they run behind launch_ggml_act_f16 (Plan::tiled_wgmma_f16x).
bool wgmma_group_fold_var(int var);
/// BF16 activations x [M][ldx] -> FP16 y [M][K] scaled by 2^e(m) per token row, so that the
/// row's largest magnitude lies in [2^15, 2^16), and xs[m] = 2^-e(m) (the folded group kernel's
/// epilogue takes it as LinearParams::xscale). K % 8 == 0, x and ldx allow 16-byte loads. early:
/// the PDL trigger at the start of each CTA (Plan::tiled_wgmma_f16x_early) instead of its end.
void launch_ggml_act_f16(const void* x, int64_t ldx, int64_t M, int64_t K, void* y, float* xs,
                         bool pdl, Stream stream, bool early = false);

}  // namespace b12x::gemm::lin
