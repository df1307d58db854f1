// b12x linear GEMMs: y[M, N] = alpha * x[M, K] . W[N, K]^T (+ bias[N]) for every quantized weight
// format of the project (FP8 per-tensor, DeepSeek 128x128 block FP8, MXFP8, NVFP4 W4A4/W4A16,
// MXFP4 W4A4/W4A8/W4A16, GGML IQ2_XXS / IQ2_XS / Q8_0), BF16/FP16 activations and outputs.
//
// Lifecycle (docs/DEVELOPING.md):
//   PackedWeight::pack(source)   once, before capture: repacks the checkpoint tensors into the
//                                kernel layout (owned device memory); refresh() rewrites the same
//                                storage so device pointers stay stable.
//   plan(caps)                   host only: validates, picks the regime (weight-streaming decode
//                                kernel for small M, tiled kernel for large M) from max_tokens and
//                                the expected_m hint, sizes ONE uint8 scratch buffer.
//   bind(plan, scratch, ...)     pointer arithmetic and checks only.
//   run(binding, stream)         launches only; capture-safe.
// One-shot helpers (linear()) plan from the call's shapes and use a cached scratch.
//
// Numerics: weights and activations are dequantized exactly (FP4/FP8 values times their
// UE4M3/E8M0 block scales are exact in BF16); scales that are not exact in BF16 (block-FP8 fp32
// scales, Q8_0 fp16 d, IQ2 d*(2s+1)/8, MX E8M0) are applied in fp32 to per-group partial sums.
// Results equal the fp64 reference (b12x/reference/linear.h) up to fp32 summation order and the
// final rounding to the output dtype.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "b12x/types.h"

namespace b12x::gemm {

/// Weight format x activation format of a linear layer. Values are part of the C ABI.
enum class LinearFormat : int32_t {
  /// W e4m3 [N,K]; x e4m3 [M,K] quantized by the caller with a static per-tensor scale;
  /// out = output_scale * (x_q . W_q^T). K % 32 == 0.
  kFp8Tensor = 0,
  /// W e4m3 [N,K] + fp32 scales [ceil(N/128), ceil(K/128)] (multiplied, DeepSeek
  /// "weight_scale_inv"); x bf16/fp16 quantized inside to FP8 with one fp32 scale per 1x128 group
  /// (or caller-quantized: x e4m3 [M,K] + x_scale fp32 [M, K/128]). K % 128 == 0.
  kFp8Block = 1,
  /// W e4m3 [N,K] + E8M0 [N,K/32]; x bf16/fp16 quantized inside to MXFP8. K % 32 == 0.
  kMxfp8 = 2,
  /// W4A4: W NVFP4 (packed [N,K/2] + UE4M3 [N,K/16]); x NVFP4 quantized by the caller (packed
  /// [M,K/2] + 128x4-swizzled UE4M3 scales); alpha = input_scale * weight_scale_2 (device fp32[1]).
  kNvfp4 = 3,
  /// W4A16: W NVFP4 + weight_scale_2 (global, multiplied); x bf16/fp16.
  kNvfp4W4A16 = 4,
  /// W4A4: W MXFP4 (packed [N,K/2] + E8M0 [N,K/32]); x MXFP4 quantized by the caller (packed +
  /// 128x4-swizzled E8M0 scales).
  kMxfp4 = 5,
  /// W4A8: W MXFP4; x bf16/fp16 quantized inside to MXFP8.
  kMxfp4W4A8 = 6,
  /// W4A16: W MXFP4; x bf16/fp16.
  kMxfp4W4A16 = 7,
  /// GGML blocks (W [N,K] of iq2_xxs / iq2_xs / q8_0); x bf16/fp16, no activation quantization.
  kIq2Xxs = 8,
  kIq2Xs = 9,
  kQ8_0 = 10,
};
inline constexpr int kNumLinearFormats = 11;

const char* format_name(LinearFormat f) noexcept;
/// Parse "fp8_tensor", "fp8_block", "mxfp8", "nvfp4", "nvfp4_w4a16", "mxfp4", "mxfp4_w4a8",
/// "mxfp4_w4a16", "iq2_xxs", "iq2_xs", "q8_0".
LinearFormat format_from_name(const std::string& name);
/// K must be a multiple of this (32, or 128 for block FP8, 256 for IQ2).
int format_k_multiple(LinearFormat f) noexcept;

/// Checkpoint-layout weight tensors (host or device memory). Which fields apply:
///  kFp8Tensor  weight e4m3/uint8 [N,K]; output_scale fp32[1] (= input_scale * weight_scale).
///  kFp8Block   weight e4m3 [N,K]; weight_scale fp32 [ceil(N/128), ceil(K/128)].
///  kMxfp8      weight e4m3 [N,K]; weight_scale ue8m0/uint8 [N, >=K/32].
///  NVFP4       weight uint8 [N,K/2] (or fp4 [N,K]); weight_scale e4m3/ue4m3/uint8 [N,K/16]
///              linear, or the 128x4-swizzled storage (pad128(N)*pad4(K/16) bytes, any shape)
///              with scale_swizzled = true; global_scale = weight_scale_2 (W4A16 only; W4A4 takes
///              alpha per call).
///  MXFP4       weight uint8 [N,K/2]; weight_scale ue8m0/uint8 [N,K/32] linear or swizzled.
///  GGML        weight uint8 [N, K/bv*bb] viewed as iq2_xxs/iq2_xs/q8_0 [N,K] (set dtype).
struct WeightSource {
  LinearFormat format = LinearFormat::kNvfp4W4A16;
  TensorRef weight;
  TensorRef weight_scale;
  bool scale_swizzled = false;
  float global_scale = 1.f;
  TensorRef output_scale;  ///< kFp8Tensor: fp32[1], host or device
  /// Logical K for swizzled-scale sources whose weight is given as bytes (0 = from weight).
  int64_t in_features = 0;
};

/// Weights repacked for the kernels (owned device memory on one device).
class PackedWeight {
 public:
  /// Validates the source and repacks it; refuses to run during capture. `stream` orders the
  /// device copies (the call synchronizes it before returning).
  static std::shared_ptr<PackedWeight> pack(const WeightSource& src, int device, Stream stream);
  ~PackedWeight();
  PackedWeight(const PackedWeight&) = delete;
  PackedWeight& operator=(const PackedWeight&) = delete;

  /// Rewrite the packed storage from new tensors of the same format and shape; device pointers
  /// stay the same (graphs captured with this weight see the new values).
  void refresh(const WeightSource& src, Stream stream);
  /// A device-side copy with its own storage (e.g. to rotate weights past L2 in benchmarks).
  std::shared_ptr<PackedWeight> clone(Stream stream) const;

  LinearFormat format() const { return format_; }
  int device() const { return device_; }
  int64_t out_features() const { return N_; }
  int64_t in_features() const { return K_; }
  int64_t padded_in_features() const { return KP_; }
  /// Bytes of device memory owned (values + scales + tables).
  int64_t bytes() const { return bytes_; }
  /// Bytes the kernels stream per full pass (values + scale arrays).
  int64_t stream_bytes() const { return stream_bytes_; }
  /// Host-side fp32 multiplier (weight_scale_2 for NVFP4 W4A16; output_scale for FP8 tensor is
  /// kept on the device).
  float global_scale() const { return global_scale_; }
  const uint8_t* values_device() const { return values_; }

  struct Impl;  // internal view for the kernels
  const Impl& impl() const { return *impl_; }

 private:
  PackedWeight() = default;
  LinearFormat format_{};
  int device_ = -1;
  int64_t N_ = 0, K_ = 0, KP_ = 0, bytes_ = 0, stream_bytes_ = 0;
  float global_scale_ = 1.f;
  uint8_t* values_ = nullptr;
  std::unique_ptr<Impl> impl_;
};

/// Which kernel family a plan uses.
enum class Regime : int32_t {
  kDecode = 0,  ///< weight streaming, weights on the MMA M side, tokens on N (M <= 16 per tile)
  kTiled = 1,   ///< cp.async multi-stage tiles for large M
  kAuto = 2,    ///< decided at bind from the bound activation shape (host metadata)
};

/// Capacities of a linear layer.
struct Caps {
  int device = 0;
  LinearFormat format = LinearFormat::kNvfp4W4A16;
  int64_t max_tokens = 0;
  int64_t in_features = 0;   ///< K
  int64_t out_features = 0;  ///< N
  /// Activation dtype the caller passes: bf16/fp16 for every format that takes unquantized
  /// activations (W4A16, GGML, MXFP8, W4A8, block FP8 quantized inside); fp8_e4m3 for kFp8Tensor
  /// and for kFp8Block with caller-quantized activations; fp4_e2m1/uint8 for W4A4.
  DType act_dtype = DType::kBF16;
  DType out_dtype = DType::kBF16;
  /// Regime hint: typical live M (0 = unknown; small-M decode kernel when max_tokens <= 16).
  int64_t expected_m = 0;
  /// Force a kernel family (tests, benchmarks); kAuto lets plan/bind decide.
  Regime regime = Regime::kAuto;
};

/// Launch options of the activation quantizers (the GEMM's and the public quantize ops'), decided
/// once from the device and the environment knobs so that a run only launches:
/// B12X_QUANT_FP8G128=0 (the generic FP8 1x128 kernel instead of four lanes per group),
/// B12X_QUANT_MXFP8_FUSED=0 (the MXFP8 pre-pass as two kernels), B12X_QUANT_PDL=0 (no early
/// programmatic trigger of the FP8 1x128 kernel).
struct ActQuant {
  int grid_cap = 8;   ///< CTAs of the grid-stride kernels: 8 of 256 threads per SM
  bool sm90 = false;  ///< compute capability exactly 9.0
  bool fp8g128 = true;
  bool mxfp8_fused = true;
  bool pdl = true;
};

struct Plan {
  Caps caps;
  ActQuant act_quant;  ///< the activation quantizers' options (plan time)
  Regime regime = Regime::kAuto;
  int64_t scratch_bytes = 0;
  // Scratch carve-out (byte offsets, 1024-aligned).
  int64_t off_qvalues = 0, off_qscales = 0, off_act = 0, off_act_scales = 0, off_partial = 0;
  int split_k = 1;  ///< decode regime split of K
  /// Decode regime: warps per 16-row weight tile (1, 2, 4 or 8), which split the CTA's K range
  /// inside the CTA: at M = 1 (8 for FP4 weights with BF16 MMAs where the tiles give at most one
  /// CTA per SM; B12X_GEMM_DECODE_WSPLIT=1|2|4|8 overrides where it applies), for FP8 weights on
  /// SM90 also at M = 2..3 (session 17, where the whole K is staged; B12X_GEMM_DECODE_WS_M) and,
  /// with decode_pipe, at M = 2..4 where the one-warp grid is small.
  int decode_warp_split = 1;
  /// Decode regime, M >= 2: the activations are staged in two buffers, the next chunk's copies in
  /// flight while the current one is computed (BF16 MMAs, activations without group scales;
  /// B12X_GEMM_DECODE_PIPE=0 keeps one buffer); B12X_GEMM_DECODE_PIPE_WS=1|2|4 overrides the
  /// warps per tile (decode_warp_split) it takes at M = 2..8 (and, per-tensor FP8, at M = 9..16).
  bool decode_pipe = false;
  /// Decode regime, one warp per tile otherwise: CTAs of 8 warps, two per tile on the halves of
  /// each K slice, sharing one activation staging (FP4 weights with BF16 MMAs; by rule for NVFP4,
  /// B12X_GEMM_DECODE_HALF=0|1 overrides).
  bool decode_half = false;
  /// Decode regime, M = 1 with 4 warps per tile (FP4 weights, BF16 MMAs; FP8 weights on SM90 at
  /// M <= 3 where the grid takes 1-2 CTAs per SM, session 17): ring stages beyond the default
  /// (B12X_GEMM_DECODE_DEEP=0|1 overrides; run takes it where ring + staging fit).
  int decode_deep = 0;
  /// Decode regime: the activation staging's cp.async copies walk segments of 32 pieces per warp
  /// instead of single pieces per thread (with decode_half; B12X_GEMM_DECODE_SEGSTAGE=0|1).
  bool decode_seg_stage = false;
  /// Decode regime, FP8 weights with warps per tile (the M = 1 grid): the activations staged by
  /// plain loads instead of cp.async, whose wait would also drain the weight ring's slices
  /// requested before it (session 17: default at M >= 2 where M x K <= 8192, runs at M >= 2;
  /// B12X_GEMM_DECODE_SYNCSTAGE=0|1).
  bool decode_sync_stage = false;
  /// Decode regime, per-tensor FP8 on the 4-warp grid (SM90; session 25): clusters of this many
  /// CTAs along the weight rows share one read of the staged activations (each multicasts 1 / n
  /// of them into all n), for runs from M = decode_xshare_min_m; 0: every CTA stages its own.
  /// Taken only where all the grid's clusters are resident at once (B12X_GEMM_DECODE_XSHARE=0
  /// turns it off, =2|4 forces n).
  int decode_xshare = 0;
  int decode_xshare_min_m = 0;
  /// Block FP8 on that staging (session 29; B12X_GEMM_DECODE_XSHARE_Q=0 turns it off): its rows
  /// quantized by the quantizer launched as a programmatic dependent of the previous kernel that
  /// lets the GEMM start at once.
  bool decode_xshare_qpdl = false;
  /// Decode regime, block FP8 / MXFP8 weights with BF16 activations: the activations quantized
  /// (the quantizer's numerics) while the decode kernel stages them, instead of by a quantizer
  /// launch before it, where a CTA stages at most 16 K values (default since session 12;
  /// B12X_GEMM_DECODE_ACTQ=0|1 overrides).
  bool decode_act_quant = false;
  /// Decode regime: the FP4 kernels with the per-slice bookkeeping by running pointers where they
  /// exist (BF16 MMAs; M = 1 with 4 or 8 warps per tile, the pipelined slice halves; default
  /// there since session 9, B12X_GEMM_DECODE_LEAN=0|1 overrides).
  bool decode_lean = false;
  /// Decode regime: the pipelined staging's two buffers get n KB where the device's shared memory
  /// per block allows (SM90: up to ~170; 0: the 36 KB that fit SM12x), so the slice halves at
  /// M = 9..32 stage more than one slice per chunk. Default 68 in the NVFP4 halves at M = 9..32
  /// since session 10 and for per-tensor FP8 at M = 9..16 without the halves since session 13,
  /// else 0; B12X_GEMM_DECODE_PIPE_KB=<n> overrides.
  int decode_pipe_kb = 0;
  /// Decode regime, FP8 weight formats, the MMA (session 13): 0 e4m3 mma.sync, 1 f16 MMAs on
  /// e4m3 fragments converted in the kernel (default on SM90 for runs at M >= 2, plans of any
  /// capacity >= 2, and MXFP8 plans of capacity 1, whose M = 1 runs take the block kernel; SM90 has
  /// no e4m3 mma.sync and lowers it to conversions, f16 MMAs and FADDs per call).
  /// B12X_GEMM_DECODE_F8MMA=0|1 overrides (for every M).
  int decode_fp8_mma = 0;
  /// The same for runs at M = 1 (0 unless B12X_GEMM_DECODE_F8MMA forces a kind: f16 MMAs lost
  /// for MXFP8 at M = 1, session 13).
  int decode_fp8_mma_m1 = 0;
  /// Decode regime, MXFP8 runs at M = 1 (session 28): the 8 E8M0 groups of a K slice on the
  /// MMA's 8 columns (linear_decode_kernel's kDiag, f16 MMAs), the scales applied once per slice
  /// instead of per 32-K atom; such plans run M = 1 on the decode kernel instead of the block
  /// kernel. SM90 default for plans of capacity 1 with BF16 activations whose decode grid has no
  /// K split and at most 16 slices (K <= 4096); B12X_GEMM_DECODE_MXDIAG=0|1 overrides.
  bool decode_mx_diag = false;
  /// Decode regime, M = 1 runs of block FP8 and of MXFP8 with decode_mx_diag (session 28): the
  /// weight scales of each K slice requested by cp.async with its values into the weight ring
  /// (kSRing) instead of one slice ahead into registers. SM90 default for plans of capacity 1;
  /// B12X_GEMM_DECODE_SRING=0|1 overrides.
  bool decode_sring = false;
  /// Decode regime at M = 1, NVFP4 weights with BF16 activations (raw, or W4A4's pre-pass): the
  /// persistent streaming kernel (lin::launch_linear_stream) with this many K parts per 16-row
  /// tile (1, 2, 4, 8; 0 = the decode kernel), registers for decode_stream_occ (2 or 3) CTAs per
  /// SM, decode_stream_ctas CTAs (SMs x CTAs per SM at most). Prepared by any plan whose runs can
  /// take the decode regime and launched by run when the bound M is 1 (session 12: whatever
  /// max_tokens). Default since session 11 for W4A4, and for W4A16 where the row tiles outnumber
  /// the SMs or max_tokens > 1; B12X_GEMM_DECODE_STREAM=0|1,
  /// B12X_GEMM_STREAM_PARTS=<n>, B12X_GEMM_STREAM_OCC=2|3, B12X_GEMM_STREAM_CTAS=<per SM>
  /// override.
  int decode_stream_parts = 0;
  int decode_stream_occ = 0;
  int decode_stream_ctas = 0;
  /// The M = 1 stream kernel with the scale splats built one k16 step per lane and exchanged by
  /// shuffles (session 14, default since round 52; always true since session 21, which removed
  /// the other form). The M = 1 stream kernel also takes MXFP4 weights: default for MXFP4 W4A4
  /// (round 53), B12X_GEMM_STREAM_MX=0 turns it off.
  bool decode_stream_shfl = false;
  /// The M = 1 stream kernel's variant (session 16): 8 = W4A4's NVFP4 activations converted in
  /// the kernel's staging instead of the pre-pass launch (default where K <= 8192;
  /// B12X_GEMM_STREAM_QX=0|1 overrides), 0 the BF16 staging.
  int decode_stream_var = 0;
  /// The M = 1 stream kernel's dynamic group claim (session 29 probe, var bit 65536): its claim
  /// word in the scratch (tagged with the launch's %gridid, so no reset).
  int64_t off_stream_claim = 0;
  /// MXFP4 weights on the M = 1 stream kernel and the M <= 16 block kernel: the fold-free splat
  /// instances (session 15: 2^(e-8) straight onto the decoded FP4 bits, one HMUL2 per register
  /// instead of the 2^119 fold's HFMA2 + the splat's HMUL2), which run takes for weights whose
  /// E8M0 codes are all <= 135 (scales up to 2^8; PackedWeight::pack records it, refresh keeps
  /// it); B12X_GEMM_STREAM_MX_FREE=0|1.
  bool stream_mx_free = false;
  /// The M = 1 stream kernel is for weights that take the fold-free splats only (MXFP4 W4A16, and
  /// MXFP4 W4A4 on a plan without the per-warp blocks, session 21): run keeps the decode kernel
  /// for the others.
  bool decode_stream_free_only = false;
  /// The stream kernels trigger their dependents' programmatic launch (PDL) as soon as a warp
  /// has issued its last weight loads, so the next call's CTAs take the slots that free up and
  /// request their first weights during this call's tail (session 15 probe; the GGML GEMV's
  /// trigger). Bits: 1 the M = 1 kernel, 2 the 4-row kernel, 4 the M <= 16 block kernel, 8 the
  /// decode kernel with FP8 weights (session 17: once a warp has requested its last slice, where
  /// each warp streams at most 8 slices); B12X_GEMM_STREAM_TRIG=<mask>.
  int stream_trig = 0;
  /// Its 64-K vectors per K part and dynamic shared memory bytes (the staged activations),
  /// derived at plan time and carried to run (lin::stream_vectors_per_part / stream_smem_bytes).
  int decode_stream_vp = 0;
  int64_t decode_stream_smem = 0;
  /// Decode regime at M = 2..4, NVFP4 weights with BF16 activations (session 12): the stream
  /// kernel with 4 staged token rows (tokens on the MMA's N side, the decoded weight fragments
  /// shared by all tokens) with this many K parts per tile (0: the decode kernel), K split over
  /// stream_rows_split CTAs (fp32 partials + the reduce kernel where > 1; each CTA stages only its
  /// K range) and stream_rows_ctas CTAs per split. Default where every CTA streams >= 2 tiles;
  /// B12X_GEMM_STREAM_ROWS=0|1 turns it off / forces it, B12X_GEMM_STREAM_PARTS,
  /// B12X_GEMM_STREAM_SPLIT, B12X_GEMM_STREAM_CTAS (per SM) override.
  int stream_rows_parts = 0;
  int stream_rows_split = 0;
  int stream_rows_ctas = 0;
  /// Its vectors per K part and dynamic shared memory bytes (plan time, carried to run).
  int stream_rows_vp = 0;
  int64_t stream_rows_smem = 0;
  /// W4A4 at M = 2..4 on the stream kernel: the activation pre-pass launched with PDL (the
  /// stream kernel requests its first weight vectors before waiting on it);
  /// B12X_GEMM_STREAM_PREPASS_PDL=0 turns it off.
  bool stream_rows_pdl = true;
  /// The 4-row stream kernel with the shuffled splats (session 14, default since round 53;
  /// always true since session 21, which removed the other form).
  bool stream_rows_shfl = false;
  /// Decode regime at M = 5..16, NVFP4 / MXFP4 weights with BF16 activations (raw, or the
  /// pre-pass's; session 13, default): the block kernel (lin::launch_linear_stream16) whose CTAs
  /// hold stream16_tiles (8 x stream16_tw) 16-row tiles over one K range of stream16_vp 64-K
  /// vectors (32-K atoms for the FP8 weight formats' block kernel, session 14: stream16_depth >
  /// 0), K split over stream16_split CTAs (fp32 partials + the reduce kernel where > 1),
  /// stream16_smem bytes of dynamic shared memory (stream16_tw 0 = the decode kernel).
  /// B12X_GEMM_STREAM16=0|1 turns it off / forces it (FP8: B12X_GEMM_STREAM16_TW=1|2),
  /// B12X_GEMM_STREAM16_SPLIT=<n>, B12X_GEMM_STREAM16_CTAS=<per SM> override.
  int stream16_tw = 0;
  int stream16_split = 0;
  int stream16_vp = 0;
  int64_t stream16_smem = 0;
  /// W4A4 NVFP4 at M = 5..16 on the block kernel: activations converted from NVFP4 in the kernel
  /// (no pre-pass launch at those M); default where the FP4 weight is at most 10 MB. Block FP8 /
  /// MXFP8 (session 14, default on their BF16 activations): quantized in the FP8 block kernel
  /// instead of by the quantizer launch. B12X_GEMM_STREAM16_QX=0|1 overrides.
  bool stream16_qx = false;
  /// Its 16-row tiles per CTA (8 x stream16_tw).
  int stream16_tiles = 0;
  /// NVFP4 / MXFP4 block kernel with its K range staged once (session 17, default at 2 tiles
  /// per warp on BF16 activations where stream16_vp <= 16; B12X_GEMM_STREAM16_ONCE=0 keeps the
  /// chunked kernel).
  bool stream16_once = false;
  /// W4A4 (NVFP4 / MXFP4) on the staged-once block kernel with its FP4 activations converted in
  /// the staging, no pre-pass launch at the block kernel's M (session 24, default on SM90 with the
  /// W4A16 trigger and cluster rules; B12X_GEMM_S16_QA=0|1; lin::kS16VarQa).
  bool stream16_qa = false;
  /// NVFP4 / MXFP4 block kernel (session 23; on SM90 by default for W4A16 where the split is <= 8,
  /// the grid has more CTAs than SMs and every cluster is resident at once, B12X_GEMM_S16_CLUSTER=
  /// <max size> takes it wherever it fits): its K split of stream16_split CTAs launched as one
  /// thread-block cluster that sums the split through distributed shared memory (no partials,
  /// no reduce launch); 0: partials + the reduce kernel.
  /// The FP8 block kernel (session 23, default on SM90): where its one-wave split is <= 4 and all
  /// its clusters fit at once; B12X_GEMM_STREAM16_F8_CLUSTER=0 never, =1 any split <=
  /// B12X_GEMM_STREAM16_F8_CLMAX (2..8, default 4).
  int stream16_cluster = 0;
  /// Runs at M >= this take the cluster (0: every M); below it the split's partials + the reduce
  /// kernel. A cluster launch also triggers the dependent launch early (stream_trig bit 4's).
  int stream16_cluster_min_m = 0;
  /// NVFP4 / MXFP4 block kernel, staged once (session 24; default for MXFP4 W4A16 on SM90,
  /// B12X_GEMM_S16_LOSPLIT=0|1): runs of
  /// M <= 8 on this split (twice stream16_split: the grids that fill under half the CTA slots),
  /// stream16_vp_lo vectors per CTA and stream16_smem_lo bytes, partials + reduce, no early
  /// trigger; 0: the plan's split at every M.
  int stream16_split_lo = 0;
  int stream16_vp_lo = 0;
  int64_t stream16_smem_lo = 0;
  /// NVFP4 / MXFP4 block kernel, staged once (session 26; SM90 default by the plan's kS16W16Rule,
  /// B12X_GEMM_S16_W16=0|1): CTAs of 16 warps, two K halves of the same tiles summed in shared
  /// memory, one CTA per SM, the split chosen for that (stream16_vp a multiple of 8, at most
  /// kS16OnceMaxVp = 16), partials + reduce.
  bool stream16_w16 = false;
  /// FP8 weights (per-tensor, block FP8, MXFP8) on the block kernel (session 14,
  /// lin::launch_linear_stream16_f8; the stream16_* fields above describe its grid): its
  /// weight ring depth per warp (0: not the FP8 kernel). Its MMA kind is decode_fp8_mma.
  /// B12X_GEMM_STREAM16_F8=0|1 turns it off / on, B12X_GEMM_STREAM16_DEPTH=4|8 (2: probe)
  /// overrides.
  int stream16_depth = 0;
  /// FP8 block kernel: the smallest run M it takes (MXFP8 1, block FP8 3 (2 where K >= 3 N),
  /// per-tensor 4; 9 for per-tensor where it runs one tile per warp on a small grid, whose decode
  /// kernel was 1-3 % faster at M = 5..8, round 52). NVFP4 / MXFP4 (sessions 21, 23): 2 for every
  /// format (NVFP4 W4A16 5 before session 23); B12X_GEMM_STREAM16_MINM=<2..5> overrides.
  int stream16_min_m = 0;
  /// FP8 block kernel: CTAs per SM its registers are capped for (2; 3: probe
  /// B12X_GEMM_STREAM16_OCC=3, per-tensor at one tile per warp).
  int stream16_occ = 2;
  /// FP8 block kernel variants (session 16; MXFP8 on f16 MMAs at depth 4, its default): 2 its
  /// scales folded into the f16 operands, 6 also its in-kernel quantization on all 8 warps; 0 none
  /// (the per-atom fold). B12X_GEMM_STREAM16_F8_VAR=<flags> overrides.
  int stream16_var = 0;
  /// The split's reduce kernel lets its dependent launch (PDL) right after its own wait, so the
  /// next kernel's CTAs request their first weights during the reduce (session 22): 1 after the
  /// NVFP4 / MXFP4 W4A16 block kernel and the 4-row kernel (round 81-82's rule, see linear.cc
  /// kS16TrigRule; other split kernels measured slower with it in round 82).
  /// B12X_GEMM_REDUCE_TRIG=0|1 overrides; B12X_GEMM_S16_TRIG=0 turns session 22's rule off (this
  /// and the block kernel's early trigger, stream_trig bit 4, on grids filling < 80 % of the CTA
  /// slots).
  int reduce_trig = 0;
  /// Decode regime, from the device's opt-in shared memory at plan time (run reads no device
  /// info): the pipelined staging budget of decode_pipe_kb (bytes, 0: kDecodePipeBudget) and the
  /// 8-warps-per-tile budget (lin::decode_ws8_budget).
  int64_t decode_pipe_budget = 0;
  int64_t decode_ws8_budget = 0;
  /// GGML formats (IQ2_XXS, IQ2_XS, Q8_0) at M <= 16: the GEMV kernel (linear_gemv_ggml) with
  /// this many warps per 16-row tile (a divisor of ggml_gemv_warps; 0 = the decode kernel), its K
  /// split over ggml_gemv_split CTAs (fp32 partials + the reduce kernel when > 1), at most
  /// ggml_gemv_ctas CTAs per split walking the row tiles, ggml_gemv_occ = 3: the IQ2 one-tile
  /// kernels capped at 80 registers (3 CTAs per SM); ggml_gemv_warps per CTA (8; 16 / 24 at M <= 8:
  /// one CTA per SM, the plan's rule). B12X_GGML_GEMV=0|1, B12X_GGML_GEMV_KW=<n>,
  /// B12X_GGML_GEMV_SPLIT=<n>, B12X_GGML_GEMV_CTAS=<n>, B12X_GGML_GEMV_OCC=0|3,
  /// B12X_GGML_GEMV_WARPS=8|16|24 override.
  int ggml_gemv = 0;
  int ggml_gemv_split = 1;
  int ggml_gemv_ctas = 0;
  int ggml_gemv_occ = 0;
  int ggml_gemv_warps = 8;
  /// The GEMV's kernel variant (B12X_GGML_GEMV_VAR=<n>, kernels/linear_gemv_ggml.cuh's kVar; 0:
  /// the default kernels), kept only where lin::ggml_gemv_var_available says it exists.
  int ggml_gemv_var = 0;
  /// The split is one thread-block cluster reduced through distributed shared memory (SM90+,
  /// split <= 8); otherwise partials go to scratch and a second kernel reduces them.
  bool split_cluster = false;
  /// Quantized activations are dequantized by a separate pass into scratch (tiled regime)
  /// rather than while the weight-streaming kernel stages them.
  bool act_prepass = false;
  int sm_count = 0;               ///< SMs of the device (tiled split-K choice)
  bool tiled_cluster_ok = false;  ///< thread-block clusters available (SM90+)
  /// mma.sync tiled kernel: K split over grid.z decided by the plan (0: run's cluster rule of at
  /// most 2); with tiled_split_reduce the CTAs write fp32 partials to scratch (off_partial) and a
  /// second kernel adds them in split order, else grid.z is one cluster reduced through DSMEM.
  int tiled_split = 0;
  bool tiled_split_reduce = false;
  /// mma.sync tiled kernel: tokens per CTA (128, or 64: the mid-M variant with 256 weight rows).
  int tiled_tok = 128;
  /// Tiled regime on compute capability 9.0: tokens per CTA (128) of the wgmma kernel, 0 for the
  /// portable mma.sync tiled kernel (B12X_GEMM_WGMMA=0|1 overrides the choice).
  int tiled_wgmma = 0;
  /// wgmma kernel schedule variant (FP8: 3 = per-128-K promotion on the mbarrier pipeline;
  /// B12X_GEMM_WGMMA_VAR=<n> overrides).
  int tiled_wgmma_var = 0;
  /// wgmma kernel CTA order: 0 = weight tile fastest, 1 = bands of token tiles sized to L2,
  /// n > 1 = bands of n token tiles (B12X_GEMM_WGMMA_RASTER=<n> overrides).
  int tiled_wgmma_raster = 0;
  /// GGML group kernel, IQ2 with BF16 activations on a variant that folds the sub-scales into
  /// FP16 weights (22 / 23; the IQ2_XS defaults since session 13): the activations converted to
  /// FP16 with a power-of-two scale per token row (lin::launch_ggml_act_f16) into scratch at
  /// off_f16x (M x K FP16, then M fp32 scales).
  bool tiled_wgmma_f16x = false;
  /// That pre-pass with its PDL trigger at each CTA's start (the default since session 16;
  /// B12X_GGML_ACT_F16_EARLY=0|1 overrides; signature " f16xe").
  bool tiled_wgmma_f16x_early = false;
  int64_t off_f16x = 0;
  bool pdl = false;  ///< programmatic dependent launch (SM90+; B12X_GEMM_PDL=0 disables)
  std::string describe() const;
};

/// Host only; throws kCaptureActive during capture.
Plan plan(const Caps& caps);

struct Binding {
  Plan plan;
  Regime regime = Regime::kDecode;
  const PackedWeight* weight = nullptr;
  TensorRef x, x_scale, out, bias, alpha;
  int64_t M = 0;
  uint8_t* scratch = nullptr;
};

/// x: [M, K] (act_dtype; for W4A4 packed [M, K/2] uint8 or fp4 [M, K]); x_scale: W4A4 swizzled
/// scales (pad128(M)*pad4(K/16 or K/32) bytes), kFp8Block caller-quantized fp32 [M, K/128], else
/// empty. out: [M, N] out_dtype, inner dim contiguous. bias: [N] out_dtype or empty. alpha: device
/// fp32[1] (kNvfp4 W4A4) or empty. M <= caps.max_tokens.
Binding bind(const Plan& plan, const TensorRef& scratch, const TensorRef& x,
             const TensorRef& x_scale, const PackedWeight& weight, const TensorRef& out,
             const TensorRef& bias, const TensorRef& alpha);

/// Launches only (capture-safe).
void run(const Binding& binding, Stream stream);

/// One-shot: plan (cached per shape), bind with a cached per-device scratch, run. Allocates the
/// scratch on first use of a shape, so call it once before capturing.
void linear(const PackedWeight& weight, const TensorRef& x, const TensorRef& x_scale,
            const TensorRef& out, const TensorRef& bias, const TensorRef& alpha, Stream stream,
            int64_t expected_m = 0);

}  // namespace b12x::gemm
