// Host side of the small-M GGML GEMV (kernels/linear_gemv_ggml.cuh): availability, plan-time
// setup and the launcher.
#pragma once

#include "b12x/types.h"
#include "gemm/linear_layout.h"

namespace b12x::gemm::lin {

struct LinearParams;

/// The GGML GEMV exists for the format (IQ2_XXS, IQ2_XS, Q8_0; BF16 or FP16 activations).
bool ggml_gemv_available(WFmt f);
/// Host-only (plan time, before capture): the shared-memory opt-in of the format's kernels on
/// `device`; returns the CTAs per SM (occupancy) of the kernel that launch_ggml_gemv runs for M
/// tokens. occ = 3: the IQ2 one-tile kernels with registers capped for 3 CTAs per SM (0:
/// uncapped).
int prepare_ggml_gemv(int device, WFmt f, bool fp16, int64_t M, int occ);
/// grid = (min(ctas, ceil(n16 / (8 / kw))), p.split, ceil(M / tokens)), tokens = 8 for M <= 8
/// (4 for IQ2_XS at M <= 4), else 16; the CTAs walk the groups of 8 / kw tiles grid-stride
/// (ctas <= 0: one per group). kw (1, 2, 4, 8): warps per 16-row tile (K split inside the CTA).
/// p.split > 1 writes fp32 partials (all NP rows) to p.partial for launch_linear_reduce. Needs
/// 16-byte aligned activation rows.
void launch_ggml_gemv(WFmt f, bool fp16, int kw, int ctas, int occ, const LinearParams& p,
                      Stream stream);

}  // namespace b12x::gemm::lin
