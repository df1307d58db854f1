// The MoE GEMM engine: one kernel template for FC1 (activation fused in the epilogue) and FC2
// (fp32 per-route output), parametrised by the weight format and the tile configuration.
//
// Orientation: weights on the MMA's M side (16 rows per m16 tile), routed tokens on N (8 per n8
// tile), portable mma.sync m16n8k16 with BF16 (or FP16, for fp16 A16 modes) operands and fp32
// accumulation. Each warp owns 32 weight rows (two m16 tiles; for gated FC1 the prepared layout
// puts 16 gate rows then the 16 up rows of the same features in every 32-row group, so a thread
// holds gate and up of the same (feature, token) and applies the activation in registers).
//
// K permutation ("mapping B"): within each 128-value chunk, MMA step j (0..7) covers physical
// K values 16j..16j+15 and thread t (lane & 3) holds physical 16j+4t+{0,1,2,3} as its logical
// {2t, 2t+1, 8+2t, 9+2t}. A step is then exactly one NVFP4 block / half an MX or Q8_0 block /
// one IQ2_XS scale group, so every block scale multiplies a whole step's fp32 partial sum
// (`acc += mma(a, b, 0) * s_row`): exact for every scale type (E8M0 extremes, FP16 d of GGML),
// and the operands themselves (E2M1 codes, int8, IQ2 grid values, quantised activations) are
// exact in BF16/FP16. The weight repack (prepare) stores each thread's bytes of a chunk
// contiguously; activations are staged in shared memory in the same fragment order
// ([step][token][t] x 8 bytes), so every fragment load is one conflict-free 8-byte access.
//
// Activations are gathered, quantised per the recipe (formats/block.h rules, per-expert NVFP4
// global scale) and converted to operand values while staging each K chunk: one code path for
// every mode, and no separate quantisation launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <utility>

#include "formats/ggml.h"
#include "formats/ggml_tables.h"
#include "gemm/kernels/mma_sync.cuh"
#include "moe/moe_launch.h"
#include "moe/moe_layout.h"
#include "moe/moe_numerics.h"

namespace b12x::moe::dev {

using detail::GemmArgs;

__constant__ uint64_t c_iq2xxs_grid[256] = B12X_GGML_IQ2XXS_GRID_INIT;
__constant__ uint64_t c_iq2xs_grid[512] = B12X_GGML_IQ2XS_GRID_INIT;

template <typename OpT>
struct OpTraits;
template <>
struct OpTraits<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    return static_cast<uint32_t>(fmt::float_to_bf16_bits(lo)) |
           (static_cast<uint32_t>(fmt::float_to_bf16_bits(hi)) << 16);
  }
  // The linear kernels' m16n8k16 wrappers (gemm/kernels/mma_sync.cuh): a zero / a running
  // accumulator.
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    gemm::lin::mma16816_zero<gemm::lin::Bf16Tag>(d, a, b0, b1);
  }
  static __device__ __forceinline__ void mma_acc(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                 uint32_t b1) {
    gemm::lin::mma16816<gemm::lin::Bf16Tag>(d, a, b0, b1);
  }
  /// A scale (exactly representable) broadcast to both halves.
  static __device__ __forceinline__ uint32_t splat(float s) {
    __nv_bfloat162 v = __float2bfloat162_rn(s);
    return *reinterpret_cast<uint32_t*>(&v);
  }
  static __device__ __forceinline__ uint32_t mul2(uint32_t a, uint32_t b) {
    __nv_bfloat162 v = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                               *reinterpret_cast<const __nv_bfloat162*>(&b));
    return *reinterpret_cast<uint32_t*>(&v);
  }
  // Pair P of a prepared word (moe_layout.h) -> bf16x2. The 3 magnitude bits go to bf16 bits
  // 8..6 (exponent low bits + mantissa top bit), giving value * 2^-126 (0.5 lands on a bf16
  // subnormal, which HMUL2 handles exactly); one multiply by 2^126 restores the value.
  template <int P>
  static __device__ __forceinline__ uint32_t fp4x2(uint32_t x) {
    const uint32_t r = layout::fp4x2_bf16_bits<P>(x);
    __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(&r);
    const __nv_bfloat162 k = __floats2bfloat162_rn(8.507059173023462e37f, 8.507059173023462e37f);
    v = __hmul2(v, k);
    return *reinterpret_cast<uint32_t*>(&v);
  }
};
template <>
struct OpTraits<__half> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    return static_cast<uint32_t>(fmt::float_to_fp16_bits(lo)) |
           (static_cast<uint32_t>(fmt::float_to_fp16_bits(hi)) << 16);
  }
  // The linear kernels' m16n8k16 wrappers (gemm/kernels/mma_sync.cuh): a zero / a running
  // accumulator.
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    gemm::lin::mma16816_zero<gemm::lin::Fp16Tag>(d, a, b0, b1);
  }
  static __device__ __forceinline__ void mma_acc(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                 uint32_t b1) {
    gemm::lin::mma16816<gemm::lin::Fp16Tag>(d, a, b0, b1);
  }
  static __device__ __forceinline__ uint32_t splat(float s) {
    __half2 v = __float2half2_rn(s);
    return *reinterpret_cast<uint32_t*>(&v);
  }
  static __device__ __forceinline__ uint32_t mul2(uint32_t a, uint32_t b) {
    __half2 v =
        __hmul2(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
    return *reinterpret_cast<uint32_t*>(&v);
  }
  // Same trick in FP16: magnitude bits to 11..9, value * 2^-14, times 2^14.
  template <int P>
  static __device__ __forceinline__ uint32_t fp4x2(uint32_t x) {
    const uint32_t r = layout::fp4x2_fp16_bits<P>(x);
    __half2 v = *reinterpret_cast<const __half2*>(&r);
    v = __hmul2(v, __floats2half2_rn(16384.f, 16384.f));
    return *reinterpret_cast<uint32_t*>(&v);
  }
};

// Programmatic dependent launch (sm_90+): the next kernel of the chain may start while this one
// runs; it calls pdl_wait() before touching this kernel's outputs. Both are no-ops when the
// kernel was launched without the programmatic attribute (or below sm_90).
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ uint4 ldg16(const uint8_t* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}
__device__ __forceinline__ uint2 ldg8(const uint8_t* p) {
  return __ldg(reinterpret_cast<const uint2*>(p));
}
__device__ __forceinline__ uint32_t ldg4(const uint8_t* p) {
  return __ldg(reinterpret_cast<const unsigned int*>(p));
}
__device__ __forceinline__ uint32_t u4_word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
/// Prepared NVFP4 scale (moe_layout.h e5m3_from_ue4m3) -> fp32 with one integer multiply-add.
/// The zero scale decodes to 2^-10, harmless: the repack zeroed the codes of its block.
__device__ __forceinline__ float e5m3_fast(uint32_t p) {
  return __uint_as_float((p << 20) + (117u << 23));
}
__device__ __forceinline__ float e8m0_fast(uint32_t b) {
  return b == 0 ? 5.877471754111438e-39f : __uint_as_float((b & 0xFFu) << 23);
}
__device__ __forceinline__ float half_bits_to_float(uint32_t h) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h & 0xFFFFu)));
}

/// Per-row weight fragment of one 128-value K chunk, decoded step by step.
template <int WF, typename OpT>
struct WeightFrag;

template <typename OpT>
struct WeightFrag<detail::kWFp4, OpT> {
  uint4 v;
  uint2 s;
  /// sks / vks: bytes between the scales / codes of consecutive chunks (WeightView).
  __device__ __forceinline__ void load(const uint8_t* vrow, const uint8_t* srow, int kk, int t,
                                       int scale_kind, int sks, int vks) {
    v = ldg16(vrow + static_cast<int64_t>(kk) * vks + t * 16);
    if (scale_kind == 0)
      s = ldg8(srow + static_cast<int64_t>(kk) * sks);
    else
      s.x = ldg4(srow + static_cast<int64_t>(kk) * sks);
  }
  template <int J>
  __device__ __forceinline__ void decode(uint32_t& lo, uint32_t& hi, const uint64_t*, int) const {
    const uint32_t w = u4_word(v, J / 2);
    lo = OpTraits<OpT>::template fp4x2<2 * (J % 2)>(w);
    hi = OpTraits<OpT>::template fp4x2<2 * (J % 2) + 1>(w);
  }
  template <int J>
  __device__ __forceinline__ float scale(int scale_kind) const {
    if (scale_kind == 0) return e5m3_fast(((J < 4 ? s.x : s.y) >> (8 * (J % 4))) & 0xFFu);
    return e8m0_fast((s.x >> (8 * (J / 2))) & 0xFFu);
  }
};

template <typename OpT>
__device__ __forceinline__ void int8x4_to_op(uint32_t w, uint32_t& lo, uint32_t& hi) {
  const float f0 = static_cast<float>(static_cast<int8_t>(w & 0xFF));
  const float f1 = static_cast<float>(static_cast<int8_t>((w >> 8) & 0xFF));
  const float f2 = static_cast<float>(static_cast<int8_t>((w >> 16) & 0xFF));
  const float f3 = static_cast<float>(static_cast<int8_t>(w >> 24));
  lo = OpTraits<OpT>::pack(f0, f1);
  hi = OpTraits<OpT>::pack(f2, f3);
}

template <typename OpT>
struct WeightFrag<detail::kWQ8_0, OpT> {
  uint4 v0, v1;
  uint2 d;  // 4 fp16 scales (one per 32 values)
  __device__ __forceinline__ void load(const uint8_t* vrow, const uint8_t* srow, int kk, int t, int,
                                       int, int) {
    const uint8_t* p = vrow + static_cast<int64_t>(kk) * 128 + t * 32;
    v0 = ldg16(p);
    v1 = ldg16(p + 16);
    d = ldg8(srow + static_cast<int64_t>(kk) * 8);
  }
  template <int J>
  __device__ __forceinline__ void decode(uint32_t& lo, uint32_t& hi, const uint64_t*, int) const {
    int8x4_to_op<OpT>(J < 4 ? u4_word(v0, J) : u4_word(v1, J - 4), lo, hi);
  }
  template <int J>
  __device__ __forceinline__ float scale(int) const {
    const uint32_t w = (J / 2) < 2 ? d.x : d.y;
    return half_bits_to_float(w >> (16 * ((J / 2) % 2)));
  }
};

/// 4 values of an IQ2 8-value group: grid bytes 4h..4h+3 with their signs.
template <typename OpT>
__device__ __forceinline__ void iq2_quad(uint64_t grid, uint32_t sign_index, int h, uint32_t& lo,
                                         uint32_t& hi) {
  const uint32_t signs = fmt::ggml::ksigns(sign_index);
  float f[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int bi = 4 * h + q;
    const float m = static_cast<float>((grid >> (8 * bi)) & 0xFFu);
    f[q] = (signs >> bi) & 1u ? -m : m;
  }
  lo = OpTraits<OpT>::pack(f[0], f[1]);
  hi = OpTraits<OpT>::pack(f[2], f[3]);
}

template <typename OpT>
struct WeightFrag<detail::kWIq2xxs, OpT> {
  uint4 v0, v1;  // 4 sub-blocks x (w0, w1)
  float d;
  __device__ __forceinline__ void load(const uint8_t* vrow, const uint8_t* srow, int kk, int, int,
                                       int, int) {
    const uint8_t* p = vrow + static_cast<int64_t>(kk) * 32;
    v0 = ldg16(p);
    v1 = ldg16(p + 16);
    const uint8_t* dp = srow + static_cast<int64_t>(kk / 2) * 2;
    d = half_bits_to_float(dp[0] | (static_cast<uint32_t>(dp[1]) << 8));
  }
  __device__ __forceinline__ uint32_t word(int i) const {
    return i < 4 ? u4_word(v0, i) : u4_word(v1, i - 4);
  }
  template <int J>
  __device__ __forceinline__ void decode(uint32_t& lo, uint32_t& hi, const uint64_t* grid,
                                         int t) const {
    constexpr int sb = J / 2;
    const uint32_t w0 = word(2 * sb), w1 = word(2 * sb + 1);
    const int l = (J % 2) * 2 + (t >> 1);
    iq2_quad<OpT>(grid[(w0 >> (8 * l)) & 0xFFu], (w1 >> (7 * l)) & 0x7Fu, t & 1, lo, hi);
  }
  template <int J>
  __device__ __forceinline__ float scale(int) const {
    const uint32_t w1 = word(2 * (J / 2) + 1);
    return fmt::ggml::iq2_sub_scale(d, w1 >> 28);
  }
};

template <typename OpT>
struct WeightFrag<detail::kWIq2xs, OpT> {
  uint2 q[4];   // 4 sub-blocks x 4 uint16
  uint32_t sc;  // 4 scale bytes
  float d;
  __device__ __forceinline__ void load(const uint8_t* vrow, const uint8_t* srow, int kk, int, int,
                                       int, int) {
    const uint8_t* blk = vrow + static_cast<int64_t>(kk / 2) * 72;
    const int half = kk % 2;
#pragma unroll
    for (int i = 0; i < 4; ++i) q[i] = ldg8(blk + half * 32 + i * 8);
    sc = ldg4(blk + 64 + half * 4);
    const uint8_t* dp = srow + static_cast<int64_t>(kk / 2) * 2;
    d = half_bits_to_float(dp[0] | (static_cast<uint32_t>(dp[1]) << 8));
  }
  template <int J>
  __device__ __forceinline__ void decode(uint32_t& lo, uint32_t& hi, const uint64_t* grid,
                                         int t) const {
    constexpr int sb = J / 2;
    const int l = (J % 2) * 2 + (t >> 1);
    const uint32_t w = (l < 2) ? q[sb].x : q[sb].y;
    const uint32_t q16 = (w >> (16 * (l % 2))) & 0xFFFFu;
    iq2_quad<OpT>(grid[q16 & 0x1FFu], q16 >> 9, t & 1, lo, hi);
  }
  template <int J>
  __device__ __forceinline__ float scale(int) const {
    const uint32_t b = (sc >> (8 * (J / 2))) & 0xFFu;
    return fmt::ggml::iq2_sub_scale(d, (J % 2) == 0 ? (b & 0xFu) : (b >> 4));
  }
};

/// out[m, r0 .. r0+rows) = sum_k w[m,k] * route_out[m*topk+k, r] over valid routes, fixed k order
/// (the same arithmetic as the grouped path's combine kernel).
__device__ __forceinline__ void combine_rows(const GemmArgs& args, int r0, int rows, int H, int tid,
                                             int nthreads) {
  const int M = args.routes / args.topk;
  for (int idx = tid; idx < M * rows; idx += nthreads) {
    const int m = idx / rows, r = r0 + idx % rows;
    if (r >= H) continue;
    float a = 0.f;
    for (int k = 0; k < args.topk; ++k) {
      const int route = m * args.topk + k;
      const int64_t id = args.ids64 ? static_cast<const int64_t*>(args.ids)[route]
                                    : static_cast<const int32_t*>(args.ids)[route];
      if (id < 0 || id >= args.num_experts) continue;
      const float w = args.weight_on_input ? 1.f : args.topk_weights[route];
      a = fmaf(w,
               __ldcg(static_cast<const float*>(args.out) +
                      static_cast<int64_t>(route) * args.out_ld + r),
               a);
    }
    static_cast<uint16_t*>(args.final_out)[static_cast<int64_t>(m) * args.final_ld + r] =
        args.final_fp16 ? fmt::float_to_fp16_bits(a) : fmt::float_to_bf16_bits(a);
  }
}

/// FC1: activation (gated: acc[0] = gate rows, acc[1] = up rows of the same 16 features) into
/// the intermediate slot rows; FC2: fp32 per-route rows. Rows rb + {g, g+8, 16+g, 24+g}.
/// One 16-value step J of a warp's 4 weight fragments (32 rows) x kNT 8-column tiles: decode
/// (kFold: and scale-fold) each fragment, then one MMA per (16-row tile m, column tile n).
/// s_act: the 128-value sub-chunk's activation fragments, [step][kTN columns][quad] x 8 B.
template <int J, int kTN, int kNT, bool kFold, int WF, typename OpT>
__device__ __forceinline__ void warp_fp4_step(const WeightFrag<WF, OpT> (&f)[4], const uint2* s_act,
                                              const uint64_t* s_grid, int scale_kind, int g, int t,
                                              float (&acc)[2][kNT][4]) {
  uint32_t a[2][4];
  float s[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t lo, hi;
    f[i].template decode<J>(lo, hi, s_grid, t);
    s[i] = f[i].template scale<J>(scale_kind);
    if constexpr (kFold) {
      const uint32_t s2 = OpTraits<OpT>::splat(s[i]);
      lo = OpTraits<OpT>::mul2(lo, s2);
      hi = OpTraits<OpT>::mul2(hi, s2);
    }
    a[i >> 1][(i & 1)] = lo;
    a[i >> 1][2 + (i & 1)] = hi;
  }
#pragma unroll
  for (int n = 0; n < kNT; ++n) {
    const uint2 b = s_act[(J * kTN + n * 8 + g) * 4 + t];
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      if constexpr (kFold) {
        OpTraits<OpT>::mma_acc(acc[m][n], a[m], b.x, b.y);
      } else {
        float d[4];
        OpTraits<OpT>::mma(d, a[m], b.x, b.y);
        acc[m][n][0] = fmaf(d[0], s[2 * m], acc[m][n][0]);
        acc[m][n][1] = fmaf(d[1], s[2 * m], acc[m][n][1]);
        acc[m][n][2] = fmaf(d[2], s[2 * m + 1], acc[m][n][2]);
        acc[m][n][3] = fmaf(d[3], s[2 * m + 1], acc[m][n][3]);
      }
    }
  }
}
/// The 8 steps of one 128-value sub-chunk (the split-K tile's and the pipeline tile's MMA).
template <int kTN, int kNT, bool kFold, int WF, typename OpT>
__device__ __forceinline__ void warp_fp4_subchunk(const WeightFrag<WF, OpT> (&f)[4],
                                                  const uint2* s_act, const uint64_t* s_grid,
                                                  int scale_kind, int g, int t,
                                                  float (&acc)[2][kNT][4]) {
  [&]<int... J>(std::integer_sequence<int, J...>) {
    (warp_fp4_step<J, kTN, kNT, kFold>(f, s_act, s_grid, scale_kind, g, t, acc), ...);
  }
  (std::make_integer_sequence<int, 8>{});
}

template <int kNT>
__device__ __forceinline__ void epilogue(const GemmArgs& args, const float (&acc)[2][kNT][4], int e,
                                         int slot0, int cnt, const int* s_route, int rb, int g,
                                         int t) {
  const float alpha = args.alpha[e];
#pragma unroll
  for (int n = 0; n < kNT; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int col = n * 8 + 2 * t + (i & 1);
      if (col >= cnt) continue;
      const int route = s_route[col];
      const int64_t slot = slot0 + col;
      const int roff = g + 8 * (i >> 1);
      if (args.epi == 0) {
        const int f = (rb / 32) * 16 + roff;
        if (f >= args.features) continue;
        float gate = acc[0][n][i] * alpha, up = acc[1][n][i] * alpha;
        if (args.weight_on_input) {
          const float wr = args.topk_weights[route];
          gate *= wr;
          up *= wr;
        }
        const float y = num::act_gated(args.act, gate, up);
        static_cast<uint16_t*>(args.out)[slot * args.out_ld + f] =
            args.out_fp16 ? fmt::float_to_fp16_bits(y) : fmt::float_to_bf16_bits(y);
      } else {
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          const int r = rb + 16 * m + roff;
          float h = acc[m][n][i] * alpha;
          if (args.epi == 1) {
            if (r >= args.features) continue;
            if (args.weight_on_input) h *= args.topk_weights[route];
            const float y = num::act_relu2(h);
            static_cast<uint16_t*>(args.out)[slot * args.out_ld + r] =
                args.out_fp16 ? fmt::float_to_fp16_bits(y) : fmt::float_to_bf16_bits(y);
          } else {
            if (r >= args.w.rows) continue;
            static_cast<float*>(args.out)[static_cast<int64_t>(route) * args.out_ld + r] = h;
          }
        }
      }
    }
  }
}

template <int kWM, int kWK, int kTN>
struct Cfg {
  static constexpr int kWarps = kWM * kWK;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = 32 * kWM;
  static constexpr int kNT = kTN / 8;
  static constexpr int kKC = 16384 / kTN;  // K values staged per chunk (32 KB of operands)
  static constexpr int kSteps = kKC / 16;
  static constexpr int kSmemAct = kKC * kTN * 2;
  static_assert(kKC % (128 * kWK) == 0, "each K warp needs whole 128-value sub-chunks");
  static_assert(kSmemAct + 4096 <= 101376, "SM12x: at most 99 KB of shared memory per block");
};

/// kFold (FP4 only): multiply each decoded weight pair by its block scale in BF16/FP16 (exact:
/// E2M1 x UE4M3 has at most 6 significant bits and stays in range; E8M0 scales within
/// [2^-126, 2^126] likewise in BF16) and accumulate in the MMA directly. Otherwise (GGML d, E8M0
/// with FP16 operands) the scale multiplies each step's fp32 partial sum.
template <int WF, typename OpT, int kWM, int kWK, int kTN, bool kFold>
__global__ void __launch_bounds__(32 * kWM * kWK, kTN <= 8 ? 4 : 1)
    moe_gemm_kernel(const GemmArgs args) {
  using C = Cfg<kWM, kWK, kTN>;
  __shared__ __align__(16) uint2 s_act[C::kSteps * kTN * 4];
  __shared__ int64_t s_src[kTN];
  __shared__ int s_route[kTN];
  __shared__ uint64_t s_grid[WF == detail::kWIq2xs ? 512 : (WF == detail::kWIq2xxs ? 256 : 1)];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int tile_idx = blockIdx.y;
  pdl_trigger();
  // Grouped: tiles come from the routing kernel, wait for the predecessor first. Decode: routes
  // are derived from the caller's ids, so FC2 prefetches weights before waiting for FC1.
  if (!args.inline_route) pdl_wait();
  int4 tile;
  int live_tiles = 0;
  const int* slot_route = args.slot_route;
  static_assert(C::kThreads >= detail::kMaxInlineRoutes, "one thread per inline route");
  if (args.inline_route) {
    // Decode: every CTA derives the same expert-sorted slots and tiles from the <= 128 ids
    // (slot order: by expert, then by route index; deterministic).
    __shared__ int s_e[detail::kMaxInlineRoutes], s_cnt[detail::kMaxInlineRoutes];
    __shared__ int s_sr[detail::kMaxInlineRoutes];
    __shared__ int4 s_tiles[detail::kMaxInlineRoutes];
    __shared__ int s_ntiles;
    if (args.num_counters > 0 && blockIdx.x == 0 && blockIdx.y == 0)
      for (int i = tid; i < args.num_counters; i += C::kThreads) args.counters[i] = 0;
    const int R = args.routes;
    if (tid < detail::kMaxInlineRoutes) {
      int ev = -1;
      if (tid < R) {
        const int64_t id = args.ids64 ? static_cast<const int64_t*>(args.ids)[tid]
                                      : static_cast<const int32_t*>(args.ids)[tid];
        if (id >= 0 && id < args.num_experts) ev = static_cast<int>(id);
      }
      s_e[tid] = ev;
      s_cnt[tid] = 0;
    }
    __syncthreads();
    int rank = 0, cnt_e = 0, ev = -1;
    if (tid < R) ev = s_e[tid];
    if (ev >= 0) {
      int before = 0;
      for (int j = 0; j < R; ++j) {
        const int ej = s_e[j];
        if (ej < 0) continue;
        rank += (ej < ev || (ej == ev && j < tid)) ? 1 : 0;
        if (ej == ev) {
          ++cnt_e;
          before += j < tid ? 1 : 0;
        }
      }
      s_sr[rank] = tid;
      if (before == 0) s_cnt[tid] = cnt_e;
    }
    __syncthreads();
    if (ev >= 0 && s_cnt[tid] > 0) {
      int base = 0;
      for (int j = 0; j < R; ++j)
        if (s_cnt[j] > 0 && s_e[j] < ev) base += (s_cnt[j] + kTN - 1) / kTN;
      for (int q = 0; q * kTN < cnt_e; ++q)
        s_tiles[base + q] = make_int4(ev, rank + q * kTN, min(kTN, cnt_e - q * kTN), 0);
    }
    if (tid == 0) {
      int total = 0;
      for (int j = 0; j < R; ++j) total += (s_cnt[j] + kTN - 1) / kTN;
      s_ntiles = total;
    }
    __syncthreads();
    live_tiles = s_ntiles;
    if (tile_idx >= live_tiles) {
      // No valid route at all: the output must still be fully overwritten (with zeros).
      if (args.fused_combine && live_tiles == 0 && tile_idx == 0)
        combine_rows(args, blockIdx.x * C::kRows, C::kRows, args.w.rows, tid, C::kThreads);
      return;
    }
    tile = s_tiles[tile_idx];
    slot_route = s_sr;
  } else {
    live_tiles = *args.num_tiles;
    if (tile_idx >= live_tiles) return;
    tile = reinterpret_cast<const int4*>(args.tiles)[tile_idx];
  }
  const int e = tile.x, slot0 = tile.y, cnt = tile.z;
  const int g = lane >> 2, t = lane & 3;
  const int wm = warp % kWM, wk = warp / kWM;
  const int rb = blockIdx.x * C::kRows + 32 * wm;

  if constexpr (WF == detail::kWIq2xxs) {
    for (int i = tid; i < 256; i += C::kThreads) s_grid[i] = c_iq2xxs_grid[i];
  } else if constexpr (WF == detail::kWIq2xs) {
    for (int i = tid; i < 512; i += C::kThreads) s_grid[i] = c_iq2xs_grid[i];
  }
  if (tid < kTN) {
    int route = -1;
    int64_t src = -1;
    if (tid < cnt) {
      route = slot_route[slot0 + tid];
      src = args.act_by_token ? static_cast<int64_t>(route / args.topk)
                              : static_cast<int64_t>(slot0 + tid);
    }
    s_route[tid] = route;
    s_src[tid] = src;
  }

  const detail::WeightView& W = args.w;
  const uint8_t* vrow[4];
  const uint8_t* srow[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t r = rb + (i >> 1) * 16 + (i & 1) * 8 + g;  // rows g, g+8, 16+g, 24+g
    vrow[i] = W.values + e * W.values_expert_stride + detail::value_row_offset(W, r);
    srow[i] = W.scales + e * W.scales_expert_stride + detail::scale_row_offset(W, r);
  }
  const float gs = args.aquant == num::kANvfp4 ? args.a_gscale[e] : 1.f;

  float acc[2][C::kNT][4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < C::kNT; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][n][i] = 0.f;

  // Weight fragments are prefetched one 128-value sub-chunk ahead (also across the staging of
  // the next activation chunk, which does not depend on them).
  // Prefetching doubles the fragment registers: only the decode tile (few accumulators) does it.
  constexpr bool kPrefetch = kTN <= 8;
  const int nk = W.K_pad / 128;
  int kk = wk;
  WeightFrag<WF, OpT> f[4];
  if (kPrefetch && kk < nk) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      f[i].load(vrow[i], srow[i], kk, t, W.scale_kind, W.scales_k_stride, W.values_k_stride);
  }
  if (args.inline_route) pdl_wait();
  for (int kc0 = 0; kc0 < W.K_pad; kc0 += C::kKC) {
    __syncthreads();
    // ---- stage the activation chunk into fragment order ----------------------------------
    if (args.raw_operands) {
      // The source already holds operand values (OpT, physical K order): within a 16-value
      // step the fragment order is the physical order, so each (token, step) is a 32-byte copy.
      constexpr int kStepsC = C::kKC / 16;
      for (int u = tid; u < kTN * kStepsC; u += C::kThreads) {
        const int n = u / kStepsC, j = u % kStepsC;
        const int k = kc0 + 16 * j;
        uint4 a0 = make_uint4(0, 0, 0, 0), a1 = a0;
        const int64_t src = s_src[n];
        if (src >= 0 && k < W.K) {
          const uint4* p = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(args.src) +
                                                          src * args.act_ld + k);
          a0 = p[0];
          a1 = p[1];
        }
        uint4* d = reinterpret_cast<uint4*>(s_act + (j * kTN + n) * 4);
        d[0] = a0;
        d[1] = a1;
      }
    } else {
      // gather, convert, quantise (decode), scatter
      constexpr int kBlocks = C::kKC / 32;
      for (int u = tid; u < kTN * kBlocks; u += C::kThreads) {
        const int n = u / kBlocks, b = u % kBlocks;
        const int k = kc0 + 32 * b;
        float v[32];
        const int64_t src = s_src[n];
        if (src >= 0 && k < W.K) {
          const uint4* p = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(args.src) +
                                                          src * args.act_ld + k);
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const uint4 w = p[q];
            const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
            for (int h = 0; h < 4; ++h) {
              const uint32_t lo = ws[h] & 0xFFFFu, hi = ws[h] >> 16;
              v[8 * q + 2 * h] =
                  args.act_fp16 ? fmt::fp16_bits_to_float(lo) : fmt::bf16_bits_to_float(lo);
              v[8 * q + 2 * h + 1] =
                  args.act_fp16 ? fmt::fp16_bits_to_float(hi) : fmt::bf16_bits_to_float(hi);
            }
          }
          if (args.aquant != num::kANone) num::quant_operand32(v, args.aquant, gs);
        } else {
#pragma unroll
          for (int i = 0; i < 32; ++i) v[i] = 0.f;
        }
#pragma unroll
        for (int q4 = 0; q4 < 8; ++q4) {
          const int p = 32 * b + 4 * q4;
          const int j = p / 16, tt = (p % 16) / 4;
          uint2 o;
          o.x = OpTraits<OpT>::pack(v[4 * q4], v[4 * q4 + 1]);
          o.y = OpTraits<OpT>::pack(v[4 * q4 + 2], v[4 * q4 + 3]);
          s_act[(j * kTN + n) * 4 + tt] = o;
        }
      }
    }
    __syncthreads();
    // ---- MMA over the chunk's 128-value sub-chunks (split across the K warps) ---------------
    const int kk_end = min(nk, (kc0 + C::kKC) / 128);
    for (; kk < kk_end; kk += kWK) {
      const int sc = kk - kc0 / 128;
      WeightFrag<WF, OpT> fn[4];
      if constexpr (kPrefetch) {
        if (kk + kWK < nk) {
#pragma unroll
          for (int i = 0; i < 4; ++i)
            fn[i].load(vrow[i], srow[i], kk + kWK, t, W.scale_kind, W.scales_k_stride,
                       W.values_k_stride);
        }
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          f[i].load(vrow[i], srow[i], kk, t, W.scale_kind, W.scales_k_stride, W.values_k_stride);
      }
      warp_fp4_subchunk<kTN, C::kNT, kFold>(f, s_act + sc * 8 * kTN * 4, s_grid, W.scale_kind, g, t,
                                            acc);
      if constexpr (kPrefetch) {
#pragma unroll
        for (int i = 0; i < 4; ++i) f[i] = fn[i];
      }
    }
  }

  // ---- split-K reduction (fixed order: deterministic) -------------------------------------
  if constexpr (kWK > 1) {
    __syncthreads();
    float* red = reinterpret_cast<float*>(s_act);
    constexpr int kPer = 2 * C::kNT * 4;
    static_assert((kWK - 1) * kWM * 32 * kPer * 4 <= C::kSmemAct, "reduction fits");
    if (wk > 0) {
      float* dst = red + ((wk - 1) * kWM + wm) * 32 * kPer + lane;
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int n = 0; n < C::kNT; ++n)
#pragma unroll
          for (int i = 0; i < 4; ++i) dst[((m * C::kNT + n) * 4 + i) * 32] = acc[m][n][i];
    }
    __syncthreads();
    for (int w2 = 1; w2 < kWK && wk == 0; ++w2) {
      const float* src = red + ((w2 - 1) * kWM + wm) * 32 * kPer + lane;
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int n = 0; n < C::kNT; ++n)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[m][n][i] += src[((m * C::kNT + n) * 4 + i) * 32];
    }
  }

  // ---- epilogue --------------------------------------------------------------------------
  if (wk == 0) epilogue<C::kNT>(args, acc, e, slot0, cnt, s_route, rb, g, t);

  // ---- decode FC2: the last CTA of this row tile sums the routes of every token ----------
  if (args.fused_combine) {
    __shared__ int s_last;
    __threadfence();
    __syncthreads();
    if (tid == 0) s_last = atomicAdd(&args.counters[blockIdx.x], 1);
    __syncthreads();
    if (s_last != live_tiles - 1) return;
    __threadfence();
    combine_rows(args, blockIdx.x * C::kRows, C::kRows, W.rows, tid, C::kThreads);
    if (tid == 0) args.counters[blockIdx.x] = 0;
  }
}

// ---- grouped FP4 kernel: cp.async multi-stage pipeline -----------------------------------
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int sz = valid ? 16 : 0;  // 0: zero-fill
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(gmem), "r"(sz)
               : "memory");
}
__device__ __forceinline__ void cp_async8(void* smem, const void* gmem) {
  const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(sa), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(sa), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/// Grouped tile for FP4 weights with pre-quantised (raw) operands: 128 weight rows x kTN slots
/// (64; 16 where experts hold few routes: B12X_MOE_GROUPED_TN), one 128-value K sub-chunk
/// per pipeline stage (weights 8 KB + scales 1 KB + activations kTN x 256 B), kStages stages in
/// flight via cp.async.
template <int kTN_ = 64>
struct PipeCfg {
  static constexpr int kThreads = 128, kRows = 128, kTN = kTN_, kNT = kTN / 8, kStages = 3;
  static constexpr int kValBytes = kRows * 64, kScaleBytes = kRows * 8, kActBytes = 8 * kTN * 32;
  static constexpr int kStageBytes = kValBytes + kScaleBytes + kActBytes;
  static constexpr int kSmem = kStages * kStageBytes;
  // Smaller tiles hold fewer accumulators: more CTAs per SM (registers capped accordingly).
  static constexpr int kMinBlocks = kTN == 64 ? 1 : 4;
  static_assert(kTN == 16 || kTN == 64, "16 or 64 slots");
  static_assert(kSmem + 2048 <= 101376, "SM12x: at most 99 KB of shared memory per block");
};

template <typename OpT, bool kFold, int kTN = 64>
__global__ void __launch_bounds__(PipeCfg<kTN>::kThreads, PipeCfg<kTN>::kMinBlocks)
    moe_gemm_pipe_kernel(const GemmArgs args) {
  using P = PipeCfg<kTN>;
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int64_t s_src[P::kTN];
  __shared__ int s_route[P::kTN];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  pdl_trigger();
  pdl_wait();
  const int tile_idx = blockIdx.y;
  if (tile_idx >= *args.num_tiles) return;
  const int4 tile = reinterpret_cast<const int4*>(args.tiles)[tile_idx];
  const int e = tile.x, slot0 = tile.y, cnt = tile.z;
  const int g = lane >> 2, t = lane & 3;
  const int rb = blockIdx.x * P::kRows + 32 * warp;
  if (tid < P::kTN) {
    int route = -1;
    int64_t src = -1;
    if (tid < cnt) {
      route = args.slot_route[slot0 + tid];
      src = args.act_by_token ? static_cast<int64_t>(route / args.topk)
                              : static_cast<int64_t>(slot0 + tid);
    }
    s_route[tid] = route;
    s_src[tid] = src;
  }
  __syncthreads();
  const detail::WeightView& W = args.w;
  const int nk = W.K_pad / 128;
  const int scale_bytes = W.scale_kind == 0 ? 8 : 4;
  const uint8_t* wbase = W.values + e * W.values_expert_stride +
                         detail::value_row_offset(W, static_cast<int64_t>(blockIdx.x) * P::kRows);
  // This thread's scale row (tid < kRows = 128 rows; see WeightView for the layouts).
  const uint8_t* sbase = W.scales + e * W.scales_expert_stride +
                         detail::scale_row_offset(W, static_cast<int64_t>(blockIdx.x) * P::kRows +
                                                         (tid & (P::kRows - 1)));
  const uint16_t* abase = static_cast<const uint16_t*>(args.src);

  auto issue = [&](int kk) {
    uint8_t* st = smem + (kk % P::kStages) * P::kStageBytes;
    // weights: 128 rows x 64 B
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int idx = tid + i * P::kThreads;  // 0..511
      const int r = idx >> 2, q = idx & 3;
      cp_async16(st + r * 64 + q * 16,
                 wbase + detail::value_row_offset(W, r) +
                     static_cast<int64_t>(kk) * W.values_k_stride + q * 16,
                 true);
    }
    // scales: 128 rows x 8 B (UE4M3/16) or 4 B (E8M0/32, in the low half)
    const uint8_t* sp = sbase + static_cast<int64_t>(kk) * W.scales_k_stride;
    if (scale_bytes == 8)
      cp_async8(st + P::kValBytes + tid * 8, sp);
    else
      cp_async4(st + P::kValBytes + tid * 8, sp);
    // activations: kTN slots x 8 steps x 32 B in [step][slot] order
    uint8_t* act = st + P::kValBytes + P::kScaleBytes;
#pragma unroll
    for (int i = 0; i < P::kTN / 8; ++i) {
      const int idx = tid + i * P::kThreads;  // (step, slot, half)
      const int h = idx & 1, n = (idx >> 1) & (P::kTN - 1), j = idx / (2 * P::kTN);
      const int k = kk * 128 + 16 * j + 8 * h;
      const int64_t src = s_src[n];
      const bool ok = src >= 0 && k < W.K;
      const uint16_t* gp = ok ? abase + src * args.act_ld + k : abase;
      cp_async16(act + (j * P::kTN + n) * 32 + h * 16, gp, ok);
    }
  };

  float acc[2][P::kNT][4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < P::kNT; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][n][i] = 0.f;

#pragma unroll
  for (int s = 0; s < P::kStages - 1; ++s) {
    if (s < nk) issue(s);
    cp_async_commit();
  }
  for (int kk = 0; kk < nk; ++kk) {
    cp_async_wait<P::kStages - 2>();
    __syncthreads();
    if (kk + P::kStages - 1 < nk) issue(kk + P::kStages - 1);
    cp_async_commit();
    const uint8_t* st = smem + (kk % P::kStages) * P::kStageBytes;
    const uint2* s_act = reinterpret_cast<const uint2*>(st + P::kValBytes + P::kScaleBytes);
    WeightFrag<detail::kWFp4, OpT> f[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = 32 * warp + (i >> 1) * 16 + (i & 1) * 8 + g;
      f[i].v = *reinterpret_cast<const uint4*>(st + r * 64 + t * 16);
      f[i].s = *reinterpret_cast<const uint2*>(st + P::kValBytes + r * 8);
    }
    warp_fp4_subchunk<P::kTN, P::kNT, kFold>(f, s_act, nullptr, W.scale_kind, g, t, acc);
  }
  cp_async_wait<0>();
  epilogue<P::kNT>(args, acc, e, slot0, cnt, s_route, rb, g, t);
}

}  // namespace b12x::moe::dev
