// SM90 wgmma tiled kernel of the GGML formats (gemm/kernels/linear_tiled_sm90_group.cuh):
// instantiations and launcher.
#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_tiled_sm90_group.cuh"
#include "gemm/linear_wgmma_group.h"

namespace b12x::gemm::lin {

namespace {

using GroupFn = void (*)(const LinearParams);

struct GroupPick {
  GroupFn fn = nullptr;
  int smem = 0;
  int threads = 256;
};

template <WFmt F, class T, int kTok, int kRowSets, bool kOverlap, int kUnitN = 128,
          bool kLateCopy = false, bool kAluSign = false, int kMode = 0>
GroupPick group_pick() {
  return {
      &linear_wgmma_group_kernel<F, T, kTok, kRowSets, kOverlap, kUnitN, kLateCopy, kAluSign,
                                 kMode>,
      WgmmaGroupCfg<F, T, kTok, kRowSets, kOverlap, kUnitN, wgmma_group_fold_k(kMode)>::kSmemBytes,
      wgmma_group_threads(kMode)};
}

/// The instances (session 21: the defaults only; the probes below were concluded and removed
/// with their instances, docs/gemm.md): Q8_0 16 (256 tokens) and 21 (128), BF16 and FP16; IQ2
/// 52 / 53 on FP16 MMAs (BF16 activations run them behind the FP16 pre-pass).
template <WFmt F, class T>
GroupPick pick_cfg(int tok, int var) {
  constexpr int kWsChain = kGroupWs | kGroupPair | kGroupChain;
  if constexpr (F == WFmt::kQ8_0) {
    if (tok == 256 && var == 16)
      return group_pick<F, T, 256, 1, true, 64, false, false,
                        kGroupWs | kGroupQuad | kGroupChain>();
    // 128 tokens in two m64n64 units per group, warp-specialized with chained pairs (13's
    // schedule).
    if (tok == 128 && var == 21)
      return group_pick<F, T, 128, 1, true, 64, false, false, kWsChain>();
  } else if constexpr (T::kFp16) {
    // 52 / 53 (session 18; the IQ2 defaults at 256 / 128 tokens since round 69): the folded
    // weights accumulated straight into the accumulators, rescaled per super-block
    // (kGroupRescale).
    if (tok == 256 && var == 52)
      return group_pick<F, T, 256, 1, true, 64, false, true,
                        kGroupWs | kGroupFold | kGroupRescale>();
    if (tok == 128 && var == 53)
      return group_pick<F, T, 128, 1, true, 64, false, true,
                        kGroupWs | kGroupFold | kGroupRescale>();
  }
  return {};
}

/// The variants measured (numbers for the removed ones, session 21: see docs/gemm.md):
/// var: 0 = each partial's wgmmas drained before its promotion, 1 = promotion overlapping the
/// next partial's wgmmas (two partial sets; at 256 tokens in 64-token units), 2 = 256-row CTAs (two
/// 64-row sets per warpgroup, 128 tokens), 3 (256 tokens, the default there until session 12) = 1
/// with the stage's refill copies issued after the second unit's wgmmas, 4 (IQ2, 256 tokens,
/// probe) = 3 with the sign masks computed instead of loaded from the shared sign table, 13 (256
/// tokens, the default there since session 12's round 46) = 1 warp-specialized (a producer
/// warpgroup, an mbarrier ring) with the unit chain running on across pairs of stages. Session 12
/// measured and removed (round 46, M = 2048, against 3): two stages per CTA barrier (Q8_0 +2-3%,
/// IQ2 -2-+3%), that with the chain across the pair (Q8_0 -1-+3%, IQ2_XXS +1-5%), warp-
/// specialized without the pairs (Q8_0 +5-8%, IQ2_XXS +3-12%, IQ2_XS -5-+1%), that with drained
/// partials (-5-18%), with 4's computed signs (IQ2_XXS +7-15%, IQ2_XS -3-7%) or with the table
/// offsets built from the packed words (IQ2_XXS +6-13%, IQ2_XS -4-+3%). Session 13 (round 48, M =
/// 2048, against 13): 16 = 13 with the chain across four stages (one drain per 256 K; Q8_0
/// default, +0.4-2.9%), 17 (IQ2) = 16 with 4's computed signs (IQ2_XXS default, +3.8-5.6%;
/// IQ2_XS -57%: spills), 23 (IQ2, FP16 MMAs; round 49) = 13 with the sub-scales folded into the
/// decoded weights (one promotion per 64 K) and 4's computed signs (IQ2_XS default: on FP16
/// +29-32% over 13, BF16 behind the FP16 pre-pass +6-25%), 21 (128 tokens; Q8_0 / IQ2_XXS default)
/// = 13's schedule in two m64n64 units, 22 (IQ2, FP16 MMAs; IQ2_XS default at 128 tokens) = 21
/// with 23's folding (without the computed signs). Measured and removed: 13 with the computed
/// signs (IQ2_XXS -3-+1%, IQ2_XS -52%), folded with a promotion per 32 K (IQ2_XS +16-22%),
/// folded without the computed signs (20: IQ2_XS +20-26% over 13, 1-3% behind 23). Session 18:
/// 52 / 53 (IQ2, FP16 MMAs, 256 / 128 tokens; the accumulators rescaled per super-block, no
/// partials; the IQ2 defaults) — round 68 (50, 52 without the early decode) beat 17 by 16-23 % and
/// 23 by 14-19 % at M = 2048, round 69 52 beat 50 by 0.3-5 % and 53 beat 21 / 22 by 20-33 % at
/// 128 tokens: 17, 22, 23 (with its unit-0 split), 50 and 51 removed.
GroupPick pick(WFmt f, bool fp16, int tok, int var) {
  switch (f) {
    case WFmt::kQ8_0:
      return fp16 ? pick_cfg<WFmt::kQ8_0, Fp16Tag>(tok, var)
                  : pick_cfg<WFmt::kQ8_0, Bf16Tag>(tok, var);
    case WFmt::kIq2Xxs:
      return fp16 ? pick_cfg<WFmt::kIq2Xxs, Fp16Tag>(tok, var)
                  : pick_cfg<WFmt::kIq2Xxs, Bf16Tag>(tok, var);
    case WFmt::kIq2Xs:
      return fp16 ? pick_cfg<WFmt::kIq2Xs, Fp16Tag>(tok, var)
                  : pick_cfg<WFmt::kIq2Xs, Bf16Tag>(tok, var);
    default:
      return {};
  }
}

/// The power-of-two scale of one token row from the bits of its largest BF16 magnitude `mx`:
/// 2^e with e = 142 - biased exponent (at most 126); a zero / subnormal maximum (exponent 0) or
/// inf / NaN (255) keeps 1. Returns the scale; `*inv` gets 2^-e (the row's xscale).
__device__ __forceinline__ float act_f16_row_scale(uint32_t mx, float* inv) {
  const int eb = static_cast<int>(mx >> 7);
  int e = (eb == 0 || eb == 255) ? 0 : 142 - eb;
  e = e > 126 ? 126 : e;
  *inv = __uint_as_float(static_cast<uint32_t>(127 - e) << 23);
  return __uint_as_float(static_cast<uint32_t>(127 + e) << 23);
}

/// Eight BF16 values (one 16-byte vector) times `sc`, rounded to FP16.
__device__ __forceinline__ uint4 bf16x8_to_f16x8(const uint4& v, float sc) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t o[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const __half2 h = __floats2half2_rn(__uint_as_float(w[q] << 16) * sc,
                                        __uint_as_float(w[q] & 0xFFFF0000u) * sc);
    o[q] = *reinterpret_cast<const uint32_t*>(&h);
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

/// The FP16 pre-pass of the folded variants on BF16 activations (launch_ggml_act_f16): token
/// row m scaled by 2^e(m), e(m) = 15 - floor(log2 max|x[m]|) (at most 126), so the row's largest
/// element lies in [2^15, 2^16) (<= 65280 for a BF16 value, below FP16's 65504 limit); every
/// element within 2^-32 of the row's largest keeps all 8 significant bits (FP16 holds 11 down to
/// 2^-14, and multiples of 2^-24 below), smaller ones round to FP16's 2^-24 grid. One warp per
/// token row, 16-byte vectors; the row is read twice (the second time from L1 / L2).
/// kEarly (Plan::tiled_wgmma_f16x_early): the PDL trigger at the start instead of the end, so the
/// group kernel launches once the last CTAs here have started (its prologue then overlaps their
/// work; its griddepcontrol.wait still waits for this grid's completion and memory flush).
template <bool kEarly>
__global__ void __launch_bounds__(256)
    ggml_act_f16_kernel(const uint16_t* __restrict__ x, int64_t ldx, int64_t M, int64_t K,
                        uint16_t* __restrict__ y, float* __restrict__ xs) {
  griddep_wait();
  if constexpr (kEarly) griddep_launch_dependents();
  const int64_t m = static_cast<int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (m < M) {
    const uint4* src = reinterpret_cast<const uint4*>(x + m * ldx);
    uint4* dst = reinterpret_cast<uint4*>(y + m * K);
    const int64_t nv = K / 8;
    uint32_t mx = 0;  // the largest BF16 magnitude's bits (monotone in the magnitude)
    for (int64_t i = lane; i < nv; i += 32) {
      const uint4 v = src[i];
      const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) mx = max(mx, max(w[j] & 0x7FFFu, (w[j] >> 16) & 0x7FFFu));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = max(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
    float inv;
    const float sc = act_f16_row_scale(mx, &inv);
    if (lane == 0) xs[m] = inv;
    for (int64_t i = lane; i < nv; i += 32) dst[i] = bf16x8_to_f16x8(src[i], sc);
  }
  if constexpr (!kEarly) griddep_launch_dependents();
}

/// The same conversion with the row read once (round 49: the two-pass kernel above cost IQ2_XS
/// 22.7 / 32.3 / 52.4 / 24.2 / 35.9 us of the folded variant's time at M = 2048 over the five
/// shapes: it moves 3 M K x 2 bytes, this one 2): one CTA of 256 threads per token row, the row
/// in registers (kV 16-byte vectors per thread, K <= 2048 kV), the maximum reduced over the CTA.
template <int kV, bool kEarly>
__global__ void __launch_bounds__(256)
    ggml_act_f16_row_kernel(const uint16_t* __restrict__ x, int64_t ldx, int64_t K,
                            uint16_t* __restrict__ y, float* __restrict__ xs) {
  __shared__ uint32_t wmax[8];
  griddep_wait();
  if constexpr (kEarly) griddep_launch_dependents();
  const int64_t m = blockIdx.x;
  const int tid = threadIdx.x;
  const uint4* src = reinterpret_cast<const uint4*>(x + m * ldx);
  uint4* dst = reinterpret_cast<uint4*>(y + m * K);
  const int nv = static_cast<int>(K / 8);
  uint4 v[kV];
  uint32_t mx = 0;
#pragma unroll
  for (int j = 0; j < kV; ++j) {
    const int i = tid + 256 * j;
    v[j] = i < nv ? src[i] : make_uint4(0u, 0u, 0u, 0u);
    const uint32_t w[4] = {v[j].x, v[j].y, v[j].z, v[j].w};
#pragma unroll
    for (int q = 0; q < 4; ++q) mx = max(mx, max(w[q] & 0x7FFFu, (w[q] >> 16) & 0x7FFFu));
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = max(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
  if ((tid & 31) == 0) wmax[tid >> 5] = mx;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < 8; ++w) mx = max(mx, wmax[w]);
  float inv;
  const float sc = act_f16_row_scale(mx, &inv);
  if (tid == 0) xs[m] = inv;
#pragma unroll
  for (int j = 0; j < kV; ++j) {
    const int i = tid + 256 * j;
    if (i < nv) dst[i] = bf16x8_to_f16x8(v[j], sc);
  }
  if constexpr (!kEarly) griddep_launch_dependents();
}

}  // namespace

bool wgmma_group_fold_var(int var) {
  return var == 52 || var == 53;
}

namespace {

template <bool kEarly>
void launch_act_f16(const uint16_t* xp, int64_t ldx, int64_t M, int64_t K, uint16_t* yp, float* xs,
                    bool pdl, Stream stream) {
  // Rows of up to 16384 values in registers (one read); longer ones: two passes per warp.
  const int64_t per = (K / 8 + 255) / 256;  // 16-byte vectors per thread
  const dim3 rows(static_cast<unsigned>(M));
  auto one_read = [&](auto kern) {
    B12X_CUDA_CHECK(b12x::detail::launch_ex(kern, rows, dim3(256), 0, stream, pdl, dim3(1, 1, 1),
                                            xp, ldx, K, yp, xs));
  };
  if (per <= 1) {
    one_read(ggml_act_f16_row_kernel<1, kEarly>);
  } else if (per <= 2) {
    one_read(ggml_act_f16_row_kernel<2, kEarly>);
  } else if (per <= 4) {
    one_read(ggml_act_f16_row_kernel<4, kEarly>);
  } else if (per <= 8) {
    one_read(ggml_act_f16_row_kernel<8, kEarly>);
  } else {
    const dim3 grid(static_cast<unsigned>((M + 7) / 8));
    B12X_CUDA_CHECK(b12x::detail::launch_ex(ggml_act_f16_kernel<kEarly>, grid, dim3(256), 0, stream,
                                            pdl, dim3(1, 1, 1), xp, ldx, M, K, yp, xs));
  }
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_ggml_act_f16(const void* x, int64_t ldx, int64_t M, int64_t K, void* y, float* xs,
                         bool pdl, Stream stream, bool early) {
  const uint16_t* const xp = static_cast<const uint16_t*>(x);
  uint16_t* const yp = static_cast<uint16_t*>(y);
  if (early) {
    launch_act_f16<true>(xp, ldx, M, K, yp, xs, pdl, stream);
  } else {
    launch_act_f16<false>(xp, ldx, M, K, yp, xs, pdl, stream);
  }
}

bool wgmma_group_kernel_available(WFmt f, bool fp16, int tok, int var) {
  return pick(f, fp16, tok, var).fn != nullptr;
}

void prepare_linear_wgmma_group(WFmt f, bool fp16, int tok, int var) {
  const GroupPick k = pick(f, fp16, tok, var);
  B12X_ASSERT(k.fn != nullptr, "no group wgmma kernel for format ", static_cast<int>(f));
  B12X_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k.fn),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, k.smem));
}

void launch_linear_wgmma_group(WFmt f, bool fp16, int tok, int var, int raster,
                               const LinearParams& p, Stream stream) {
  const GroupPick k = pick(f, fp16, tok, var);
  B12X_ASSERT(k.fn != nullptr, "no group wgmma kernel for format ", static_cast<int>(f), " tok ",
              tok, " var ", var);
  LinearParams q = p;
  const dim3 grid = wgmma_grid(p, var == 2 ? 256 : 128, tok, raster, 2, q);  // BF16 / FP16 rows
  B12X_CUDA_CHECK(b12x::detail::launch_ex(k.fn, grid, dim3(k.threads), static_cast<size_t>(k.smem),
                                          stream, p.pdl != 0, dim3(1, 1, 1), q));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
