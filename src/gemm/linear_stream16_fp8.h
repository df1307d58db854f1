// Host-side launcher of the FP8 M <= 16 block kernel (session 14,
// kernels/linear_stream16_fp8.cuh), kept apart from linear_launch.h's FP4 stream kernels.
#pragma once

#include <cstdint>

#include "b12x/types.h"
#include "gemm/linear_layout.h"

namespace b12x::gemm::lin {

struct LinearParams;

/// Kernel variants (the kernel's kVar bits, Plan::stream16_var; kernels/linear_stream16_fp8.cuh
/// says what each does).
inline constexpr int kF8VarFold = 2;  ///< MXFP8 scales folded into the f16 operands
inline constexpr int kF8VarQ8 = 4;    ///< MXFP8's in-kernel quantization on all 8 warps
/// With kF8VarQ8 at one token tile (M <= 8): the quantization on a warp per token, one 8-value
/// piece per lane, instead of 16 lanes per token with two pieces each (MXFP8's default since
/// session 20).
inline constexpr int kF8VarQ32 = 8;
/// Block FP8 with the in-kernel quantization at one token tile: chunk c + 1 quantized after chunk
/// c's MMAs instead of before (its default since session 20).
inline constexpr int kF8VarLate = 16;
/// Probe (session 25), with kF8VarFold: the splats 2^(e - emax + 7) by one f16x2 conversion per
/// atom and the chunk's E8M0 bytes masked past K once (byte-wise maxima), instead of pow2_h2's
/// selects and a compare per atom: the same bits.
inline constexpr int kF8VarCheap = 32;
/// MXFP8 with the in-kernel quantization (its default since session 27, with kF8VarCheap): the
/// weight E8M0 bytes of the first two chunks staged and chunk 0's splats built before
/// griddepcontrol.wait (block FP8's weight scales so, var 80, measured level or slower: removed).
inline constexpr int kF8VarEarly = 64;
/// With kF8VarEarly (MXFP8's default since session 27, round 102): chunk 1's splats built before
/// griddepcontrol.wait too.
inline constexpr int kF8VarEarly2 = 128;

/// FP8 weights (per-tensor, block FP8, MXFP8) on e4m3 activations (MXFP8 / block FP8 with their
/// group scales, p.xs_kind kXsE8m0Rows / kXsF32Rows); CTAs of 8 warps x tw (1 or 2) 16-row tiles
/// (p.stream_tiles) over one K range of p.stream_vp 32-K atoms (a multiple of kF8ChunkV), grid =
/// (ceil(n16 / p.stream_tiles), p.split); p.split > 1 writes fp32 partials to p.partial for
/// launch_linear_reduce, or with p.cluster_split == p.split (<= 8, SM90+) sums them in a cluster
/// of the split's CTAs (kernels/cluster_sum.cuh; no partials, no reduce launch). mma: 0 e4m3
/// mma.sync, 1 f16 MMAs (SM90). depth: ring vectors per warp (4; 8 with f16 MMAs: per-tensor, and
/// block FP8 / MXFP8 at tw 1). q (block FP8 / MXFP8, depth 4): BF16 activations quantized in the
/// kernel (p.act_kind kActBf16Quant, p.xs_kind kXsStaged; 16-byte rows) instead of the quantizer
/// launch before it. occ 3 (probe): per-tensor, tw 1, f16 MMAs, depth 4 with registers for 3 CTAs
/// per SM. var (Plan::stream16_var): kernel variants kF8Var* (MXFP8, f16 MMAs, depth 4; its
/// default): 2 scales folded into the f16 operands, 6 = 2 + the in-kernel quantization on all 8
/// warps.
bool stream16_f8_available(WFmt f, int tw, int mma, int depth, bool q = false, int occ = 2,
                           int var = 0);
int64_t stream16_f8_smem_bytes(WFmt f, int tw, int mma, bool q = false, int var = 0);
/// Atoms per CTA of a K split of `split`: ceil(kvec / split) rounded up to whole chunks.
int stream16_f8_vectors_per_cta(int64_t kvec, int split);
/// Host only (plan time): the opt-in and the CTAs per SM of both token-tile variants (the min).
int prepare_linear_stream16_f8(int device, WFmt f, int tw, int mma, int depth, bool q = false,
                               int occ = 2, int var = 0);
/// Host only (plan time): clusters of `split` CTAs (1, split, 1) that can be resident at once
/// (cudaOccupancyMaxActiveClusters, the min over both token-tile variants; 0 where there are none).
int stream16_f8_max_clusters(int device, WFmt f, int tw, int mma, int depth, bool q, int occ,
                             int var, int split);
void launch_linear_stream16_f8(WFmt f, int tw, int mma, int depth, int64_t smem,
                               const LinearParams& p, Stream stream, int occ = 2, int var = 0);
/// The last launch on this thread (tests): serial (counts launches), grid x, split, kernel choice.
struct Stream16F8Launch {
  int64_t serial = 0;
  int ctas = 0, split = 0, tw = 0, mma = 0, depth = 0;
  bool q = false;   ///< activations quantized in the kernel
  int var = 0;      ///< kernel variant (kF8Var*)
  int cluster = 1;  ///< CTAs per cluster (the K split summed in it), 1: none
};
Stream16F8Launch last_stream16_f8_launch();

}  // namespace b12x::gemm::lin
