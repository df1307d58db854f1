// Host-side launchers of the linear GEMM kernels (defined in linear_launch.cu).
#pragma once

#include <cstdint>

#include "b12x/types.h"
#include "gemm/linear_layout.h"

namespace b12x::gemm::lin {

struct LinearParams;
struct ActParams;

/// True when a decode kernel exists for (format, MMA dtype fp16?, token tiles nt in {1, 2}).
bool decode_kernel_available(WFmt f, bool fp16, int nt);
/// Dynamic shared memory budget of the decode kernel's activation staging. With the weight rings
/// (at most 48 KB) and the static part (at most ~15 KB) it stays under SM12x's 99 KB; at M <= 8
/// the staging is a few KB, so four CTAs share an SM90 SM.
/// A deeper ring (B12X_DECODE_STAGES probe) takes its shared memory out of the staging budget.
inline constexpr int64_t kDecodeStageBudget =
    4 * kDecodeStagesMax * 4096 + 32 * 1024 + 15 * 1024 <= 101376
        ? 32 * 1024
        : 101376 - 15 * 1024 - 4 * kDecodeStagesMax * 4096;
/// Pipelined staging (LinearParams::decode_pipe: two buffers of stage_slices slices each): what
/// SM12x's 99 KB leave beside the largest ring and the static part.
inline constexpr int64_t kDecodePipeBudget = 101376 - 15 * 1024 - 4 * kDecodeStagesMax * 4096;
/// The pipelined-staging decode kernel exists (BF16 MMAs; formats without activation group
/// scales in the decode regime).
bool decode_pipe_available(WFmt f, bool fp16);
/// The 8-warp decode kernel over slice halves exists (LinearParams::decode_half: FP4 weights with
/// BF16 MMAs; per-tensor FP8 weights, by default where each CTA streams >= 16 slices).
bool decode_half_available(WFmt f, bool fp16);
/// The slice halves' one staging buffer: SM12x's 99 KB less their FP4 ring (32 KB) and static
/// shared memory (16.5 KB at most).
inline constexpr int64_t kDecodeHalfStageBudget = 101376 - 17 * 1024 - 4 * 2 * 4096;
/// Deeper rings (LinearParams::decode_deep, B12X_GEMM_DECODE_DEEP=0|1): `deep` (1) more ring
/// stages in the kernels with 4 warps per tile at one token tile (FP4 weights with BF16 MMAs:
/// kLean only; the FP8 weight formats); ring + staging within what SM12x's 99 KB leave beside the
/// static part.
bool decode_deep_available(WFmt f, bool fp16, int deep);
/// The weight rings of a CTA: 4 warps (8 with ws = 8) of decode_stages(f) + deep slices.
int64_t decode_ring_bytes_deep(WFmt f, int deep, int ws = 4);
inline constexpr int64_t kDecodeDeepBudget = 101376 - 15 * 1024;
/// The shared staging (kXsh, SM90 only: the plans take it there alone; session 26): ring +
/// staging + its barrier within 200 KB, beyond kDecodeStageBudget (SM90's 227 KB per block less
/// the static part, 5-9 KB); the plan's cluster query (every cluster resident) decides the grids
/// that take it (2 CTAs per SM hold ~108 KB each, 1 the rest).
inline constexpr int64_t kDecodeXshBudget = 200 * 1024;
/// 8 warps per tile at M = 1 (LinearParams::decode_ws = 8; B12X_GEMM_DECODE_WSPLIT=8 forces it):
/// the kernel exists (FP4 weights, BF16 MMAs, kLean only), and its dynamic shared memory budget
/// (ring + staging) beside up to 23 KB of static shared memory on a device with `smem_optin` bytes
/// per block (SM12x: K up to ~6k at M = 1; SM90: K up to ~70k).
bool decode_ws8_available(WFmt f, bool fp16);
inline constexpr int64_t decode_ws8_budget(int64_t smem_optin) {
  return smem_optin - 23 * 1024;
}
/// The decode kernel with the per-slice bookkeeping by running pointers exists for this
/// configuration (LinearParams::decode_lean, default there, B12X_GEMM_DECODE_LEAN=0|1; FP4 weights
/// with BF16 MMAs at M = 1 with 4 or 8 warps per tile, and the pipelined slice halves).
bool decode_lean_available(WFmt f, bool fp16, int nt, int ws, bool pipe, bool half, int deep);
/// M = 1 streaming kernel (kernels/linear_stream.cuh; NVFP4 weights with BF16 MMAs on BF16
/// activations, raw or from the FP4 pre-pass): CTAs of 8 warps = 8 / parts row tiles x parts K
/// parts of stream_vectors_per_part 64-K vectors, a register ring of kStreamDepth vectors per
/// warp, registers capped for `occ` (2 or 3) CTAs per SM, a persistent grid of `ctas` CTAs over
/// the row-tile groups; dynamic shared memory stream_smem_bytes (the staged activations).
bool stream_kernel_available(WFmt f, bool fp16, int parts, int occ, int rows = 1);
/// Session 24 (default; B12X_GEMM_STREAM_QS=0 off): W4A4 FP4 activations converted in the staging
/// by pair arithmetic (stream_var 40 = 8 | 32), NVFP4 and MXFP4.
bool stream_qs_available(int parts, int occ);
/// Session 26 (SM90 default by the plan's kStreamLateRule): the M = 1 stream kernel's late ring
/// requests (kStreamVarLate) exist for this format, grid and variant.
bool stream_late_available(WFmt f, int parts, int occ, int var);
/// Session 27 (SM90 default by the plan's kStreamHalfRule): K parts of an even number of vectors
/// (kStreamVarHalf) exist for this format, grid and variant (MXFP4: mx_free's instance).
bool stream_half_available(WFmt f, int parts, int occ, int var, bool mx_free);
/// Session 28 (SM90 default by the plan's kStreamRfRule): the blocks' requests first
/// (kStreamVarRf) exist for this format, grid and variant.
bool stream_rf_available(WFmt f, int parts, int occ, int var);
/// Session 29 probe (B12X_GEMM_STREAM_CLAIM): the dynamic group claim (kStreamVarClaim) exists for
/// this format, grid and variant.
bool stream_claim_available(WFmt f, int parts, int occ, int var);
/// Staging budget at M = 1: what SM12x's 99 KB per block leave beside the static shared memory
/// (the 1 KB reduction buffer; static_assert in linear_stream.cu) and margin (K up to ~46k).
inline constexpr int64_t kStreamSmemBudget = 101376 - 8 * 1024;
/// The M = 1 stream kernel's per-warp activation blocks (LinearParams::stream_var 128): 512
/// bytes per warp instead of the CTA's whole K.
inline constexpr int64_t kStreamJitBytes = 8 * 512;
/// Staging budget with 4 token rows (session 12, M = 2..4): SM12x's 99 KB beside the 8 KB
/// reduction buffer (kStreamRedBytes<4>) and margin: 82944 B (K up to ~10k without a K split).
inline constexpr int64_t kStreamRowsSmemBudget = 101376 - 18 * 1024;
/// The calling thread's last launch_linear_stream (tests: which kernel ran); serial counts the
/// launches.
struct StreamLaunch {
  int parts = 0, occ = 0, ctas = 0;
  int64_t serial = 0;
  int rows = 0, split = 0;
  bool mx_free = false;      // MXFP4 fold-free splat instance (p.mx_free)
  bool once = false;         // block kernel with the K range staged once (kS16VarOnce)
  bool reduce_trig = false;  // the split's reduce triggers the next launch (p.reduce_trig)
  bool trig = false;         // the kernel triggers its dependent launch early (p.stream_trig)
  int cluster = 0;           // block kernel: the K split summed in a cluster of this many CTAs
  bool qa = false;           // block kernel: FP4 activations converted in its staging (kS16VarQa)
  bool w16 = false;          // block kernel: 16 warps over two K halves (kS16VarW16)
};
StreamLaunch last_stream_launch();
/// 64-K vectors per K part: the tile's kvec vectors over split CTAs x parts warps, rounded up to
/// the ring depth.
int stream_vectors_per_part(int64_t kvec, int parts, int split = 1);
int64_t stream_smem_bytes(int64_t kvec, int parts, int rows = 1, int split = 1);
/// Host only (plan time): the opt-in above 48 KB on `device` and the CTAs per SM (occupancy).
int prepare_linear_stream(int device, WFmt f, int parts, int occ, int64_t smem, int rows = 1);
/// rows 4 (M = 2..4): a grid of (ctas, p.split); p.split > 1 writes fp32 partials to
/// p.partial, which the caller reduces (launch_linear_reduce). p.stream_vp and `smem` are the
/// plan's (stream_vectors_per_part / stream_smem_bytes at plan time; run recomputes neither).
void launch_linear_stream(WFmt f, int parts, int occ, int ctas, int64_t smem, const LinearParams& p,
                          Stream stream, int rows = 1);
/// M <= 16 block kernel (session 13, kernels/linear_stream.cuh linear_stream16_kernel): NVFP4 /
/// MXFP4 weights with BF16 MMAs on BF16 activations (or NVFP4 ones converted in the kernel: qx,
/// p.act_kind kActNvfp4); CTAs of 8 warps x tw (1 or 2) 16-row tiles (p.stream_tiles per CTA)
/// over one K range of p.stream_vp vectors (a multiple of kS16ChunkV), grid =
/// (ceil(n16 / p.stream_tiles), p.split); p.split > 1 writes fp32 partials to p.partial for
/// launch_linear_reduce. Dynamic shared memory stream16_smem_bytes(tw, qx) (three staging slots;
/// the plan carries it).
/// var (Plan::stream16_once): kS16VarOnce the CTA's K range staged once (session 17 default,
/// linear_stream16_once_kernel: tw 2, BF16 activations, p.stream_vp <= 16; its shared memory
/// depends on vp).
inline constexpr int kS16VarOnce = 1;
/// Session 23 (Plan::stream16_cluster; the SM90 W4A16 rule kS16ClusterRule in linear.cc): the
/// split's gridDim.y CTAs of one blockIdx.x launched as one thread-block cluster (SM90+, split
/// <= 16; above 8 non-portable, the H200's limit) that sums the K split through DSMEM
/// (kernels/cluster_sum.cuh): no partials, no reduce launch (p.partial unused). Staged-once
/// kernel only.
inline constexpr int kS16VarCluster = 2;
/// Session 24 (Plan::stream16_qa; SM90 default, B12X_GEMM_S16_QA=0|1): W4A4's FP4 activations
/// (p.act_kind kActNvfp4 for NVFP4 weights, kActMxfp4 + kXsE8m0Swz for MXFP4) converted to BF16 in
/// the staged-once kernel's staging, no pre-pass launch; NVFP4's values come times 2^-7 (the
/// caller's p.out_mult times 2^7). Staged-once kernel only, with or without kS16VarCluster.
inline constexpr int kS16VarQa = 4;
/// Session 26 (Plan::stream16_w16; SM90 rule kS16W16Rule in linear.cc, B12X_GEMM_S16_W16=0|1):
/// the staged-once kernel with 16 warps, two K halves of the same tiles summed in shared memory (1
/// CTA per SM; p.stream_vp a multiple of 8, at most kS16OnceMaxVp; partials only, no cluster).
inline constexpr int kS16VarW16 = 8;
/// Host only: whether the 16-warp instances of format f (qa: FP4 activations converted in the
/// staging; else BF16) exist for every token-tile count and MXFP4 splat kind.
bool stream16_w16_available(WFmt f, bool qa);
/// Host only: whether the staged-once kernel (var) has its cluster-sum instances at one token
/// tile (M <= 8) for format f (NVFP4 on BF16 activations has none since session 25).
bool stream16_cluster_nt1(WFmt f, int var);
/// Host only (plan time): the clusters of `split` CTAs of the kS16VarCluster instance (nt 2) that
/// can be resident at once (cudaOccupancyMaxActiveClusters; 0 where clusters are not supported);
/// allows the non-portable sizes above 8.
int stream16_max_active_clusters(int device, WFmt f, int tw, bool qx, int var, int vp, int split);
inline constexpr int kS16OnceMaxVp = 16;
bool stream16_available(WFmt f, bool fp16, int tw);
int64_t stream16_smem_bytes(int tw, bool qx = false, int var = 0, int vp = 0);
/// 64-K vectors per CTA of the split, rounded up to `chunk` (0: kS16ChunkV).
int stream16_vectors_per_cta(int64_t kvec, int split, int chunk = 0);
/// Host only (plan time): the opt-in and the CTAs per SM of both token-tile variants (the min).
int prepare_linear_stream16(int device, WFmt f, int tw, bool qx = false, int var = 0, int vp = 0);
void launch_linear_stream16(WFmt f, int tw, int64_t smem, const LinearParams& p, Stream stream,
                            int var = 0);
/// grid = (ceil(n16/4), split, ceil(M / (8*nt))); p.cluster_split > 1 launches grid.y as one
/// thread-block cluster. p.stage_rows / p.stage_slices size the activation staging.
void launch_linear_decode(WFmt f, bool fp16, int nt, const LinearParams& p, Stream stream);
/// The configuration of the calling thread's last launch_linear_decode (a debug query for the
/// tests: run refines the plan's choices per launch, e.g. it drops lean where no lean instance
/// exists for the launch's configuration, so the plan alone does not say which kernel ran).
struct DecodeLaunch {
  int nt = 0, ws = 0, deep = 0, split = 0, cluster = 0;
  bool pipe = false, half = false, lean = false;
  int64_t smem = 0;    // dynamic shared memory bytes
  int mma = 0;         // FP8 weights: 0 e4m3 mma.sync, 1 f16 MMAs on converted fragments
  int xshare = 0;      // kXsh: CTAs per cluster sharing the activation staging (0: none)
  bool diag = false;   // kDiag: MXFP8 at M = 1 with the slice's groups on the MMA's columns
  bool sring = false;  // kSRing: the weight scales in the ring with the values
};
DecodeLaunch last_decode_launch();
/// Tiled kernel (M > 16): grid = (ceil(NP/tiled_block_n), ceil(M/tok), split). x must allow
/// 16-byte loads. tok: tokens per CTA, 128 or 64 (the mid-M variant, 256 weight rows per CTA).
/// A split without a cluster (p.cluster_split == 1) writes fp32 partials to p.partial for
/// launch_linear_reduce.
bool tiled_kernel_available(WFmt f, bool fp16);
/// Weight rows per CTA of the tiled kernel with `tok` tokens per CTA (128 or 256; 256 at 64).
int tiled_block_n(WFmt f, bool fp16, int tok = 128);
/// B12X_GEMM_TILED_SPLIT=<n> (probe): forced cluster split of the tiled kernel, 0 when unset.
int tiled_split_override();
/// Host-only setup (dynamic shared memory opt-in, co-resident cluster counts) on `device` (the
/// current device is switched for the queries and restored); call before capture (plan does).
void prepare_linear_tiled(int device, WFmt f, bool fp16, int tok = 128);
/// Co-resident clusters of `split` CTAs of the tiled kernel on `device` (0 when prepare did not
/// run for it there; split 1: CTAs per SM); a host table lookup, no CUDA call.
int tiled_max_active_clusters(int device, WFmt f, bool fp16, int split, int tok = 128);
void launch_linear_tiled(WFmt f, bool fp16, const LinearParams& p, Stream stream, int tok = 128);
/// SM90 wgmma tiled kernel (compute capability 9.0 only): 128 weight rows x `tok` (128) tokens
/// per CTA, grid = (ceil(NP/128), ceil(M/tok)), or 1-D in raster bands (`raster`, below); NVFP4,
/// BF16 MXFP4 and MXFP8 (the fold formats), per-tensor and block FP8. x must allow 16-byte
/// loads.
bool wgmma_kernel_available(WFmt f, bool fp16, int tok, int var = 0);
/// `var`: the schedule variant (lin::WgmmaCfg; FP8: 0 / 3 = per-128-K promotion on the CTA-barrier
/// / mbarrier pipeline, 1 / 2 = per 64 / 32 K, 5 = 3 warp-specialized; BF16 operands: 0 / 1).
/// Host-only setup (dynamic shared memory opt-in, detail::opt_in_smem) on the current device.
/// Call before capture (plan does).
void prepare_linear_wgmma(WFmt f, bool fp16, int tok, int var);
/// `raster`: 0 = 2-D grid (weight tile fastest); 1 = bands of token tiles whose activations fit
/// a share of L2 (kWgmmaRasterBytes), token tile fastest; n > 1 = bands of n token tiles.
void launch_linear_wgmma(WFmt f, bool fp16, int tok, int var, int raster, const LinearParams& p,
                         Stream stream);
/// The epilogue of a K split over plain CTAs (p.partial, the decode or the tiled kernel): adds the
/// partials in split order (with PDL where p.pdl: it waits for the GEMM before reading them).
void launch_linear_reduce(const LinearParams& p, Stream stream);
/// p.pdl: launched with programmatic stream serialization (the kernel waits on its predecessor
/// and lets the GEMM after it launch at once; every GEMM kernel waits before reading
/// activations).
void launch_act_dequant(const ActParams& p, Stream stream);

}  // namespace b12x::gemm::lin
