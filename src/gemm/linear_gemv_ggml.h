// Host side of the small-M GGML GEMV (kernels/linear_gemv_ggml.cuh): availability, plan-time
// setup and the launcher.
#pragma once

#include "b12x/types.h"
#include "gemm/linear_layout.h"

namespace b12x::gemm::lin {

struct LinearParams;

/// The GGML GEMV exists for the format (IQ2_XXS, IQ2_XS, Q8_0; BF16 or FP16 activations).
bool ggml_gemv_available(WFmt f);
/// Host-only (plan time, before capture): the shared-memory opt-in of the kernel that
/// launch_ggml_gemv runs for M tokens with `occ` and `warps` on `device`, and its CTAs per SM
/// (occupancy); both once per (device, kernel). occ = 3: the IQ2 one-tile kernels with registers
/// capped for 3 CTAs per SM (0: uncapped). warps: 8, or 16 / 24 for the one-tile kernels (M <= 8).
/// var (B12X_GGML_GEMV_VAR, kernels/linear_gemv_ggml.cuh's kVar): 0 the default kernels; the
/// variants exist where ggml_gemv_var_available says so.
int prepare_ggml_gemv(int device, WFmt f, bool fp16, int64_t M, int occ, int warps, int var = 0);
/// The variant var of the kernel for M tokens exists (IQ2 one-tile kernels at M <= 4 with the
/// default PDL trigger; the variants use the default kernels' shared memory).
bool ggml_gemv_var_available(WFmt f, bool fp16, int64_t M, int occ, int warps, int var);
/// grid = (min(ctas, ceil(n16 / (warps / kw))), p.split, ceil(M / tokens)), tokens = 8 for M <= 8
/// (4 for IQ2_XS at M <= 4), else 16; the CTAs walk the groups of warps / kw tiles grid-stride
/// (ctas <= 0: one per group). kw (a divisor of warps): warps per 16-row tile (K split inside
/// the CTA). p.split > 1 writes fp32 partials (all NP rows) to p.partial for
/// launch_linear_reduce. Needs 16-byte aligned activation rows and prepare_ggml_gemv's opt-in.
void launch_ggml_gemv(WFmt f, bool fp16, int kw, int ctas, int occ, int warps, int var,
                      const LinearParams& p, Stream stream);
/// The calling thread's last launch_ggml_gemv (a debug query for the tests: which kernel ran on
/// which grid).
struct GgmlGemvLaunch {
  int nt = -1;  // 0: IQ2_XS column groups, 1 / 2 token tiles
  int occ = 0;  // 3: the IQ2 one-tile kernels capped at 80 registers, else 0
  int warps = 0, kw = 0;
  unsigned grid_x = 0, grid_y = 0, grid_z = 0;
  bool trig = false;  // the PDL trigger at each warp's last batch
};
GgmlGemvLaunch last_ggml_gemv_launch();
/// Records a launch for last_ggml_gemv_launch (the integer-MMA GEMV's launcher).
void note_ggml_gemv_launch(const GgmlGemvLaunch& l);

/// Sessions 25-27: the IQ2 GEMV on integer MMA at M <= 2 (kernels/linear_gemv_imma.cuh; plan:
/// Plan::ggml_gemv_var = kGgmlImmaVar | bits, B12X_GGML_GEMV_VAR=8963 / 8207 / 8431, by default
/// where ggml_imma_default says so). BF16 activations, 16 warps; 8963 IQ2_XXS M = 1, 8207 both
/// formats at M = 1, 2, 8431 IQ2_XS M = 1; K % 256 == 0, where its shared memory (64 / 80 KB of
/// tables and ~70 bytes per 32 K and token of staged activations) fits smem_optin.
inline constexpr int kGgmlImmaVar = 8192;
/// Variant bits of the integer-MMA GEMV (var = kGgmlImmaVar | bits; the kernel's imma::kP2 ..):
/// two activation pieces (every kernel), activation loads by the supplying lanes only (session
/// 26), the loop per tile with the next batch's loads in place, the peeled loop, the interleaved
/// halves, the table words loaded after the first activation load (session 27); session 29's
/// probes: every staging pass's activation load issued at once (kXAll), the table words as
/// replicated quads loaded before the wait (kTabQ).
inline constexpr int kGgmlImmaP2 = 1, kGgmlImmaPred = 2, kGgmlImmaTile = 4, kGgmlImmaInPlace = 8,
                     kGgmlImmaPeel = 32, kGgmlImmaIlv = 64, kGgmlImmaXFirst = 128,
                     kGgmlImmaXAll = 256, kGgmlImmaTabQ = 512;
bool ggml_imma_available(WFmt f, bool fp16, int64_t M, int64_t K, int warps, int var,
                         int64_t smem_optin);
/// Host-only (plan time): the opt-ins of the kernels for 1..M tokens and the CTAs per SM of M's.
int prepare_ggml_imma(int device, WFmt f, bool fp16, int warps, int var, int64_t M, int64_t K);
/// grid = min(ctas, n16) CTAs (ctas <= 0: n16), each a contiguous share of the 16-row tiles.
void launch_ggml_imma(WFmt f, bool fp16, int warps, int var, int ctas, const LinearParams& p,
                      Stream stream);

}  // namespace b12x::gemm::lin
