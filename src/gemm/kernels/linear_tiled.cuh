// Tiled linear kernel for large M (the prefill regime).
//
// CTA tile 128 tokens x 128 weight rows, K stage of 64 (two packed atoms), 8 warps as 2 (tokens)
// x 4 (weight rows): each warp owns 64 tokens x 32 weight rows. Activations (bf16/fp16 or e4m3,
// row major) and packed weight atoms stream into shared memory through a 3-4 stage cp.async
// pipeline; A fragments come from ldmatrix, B fragments are decoded per lane from the packed
// atoms (the same decoders as the weight-streaming kernel: an atom's a0..a3 registers are the
// b0/b1 registers of its two n8 tiles), which keeps the shared-memory traffic of B at the packed
// size (a quarter of BF16 for FP4).
//
// Scales never sit on the MMA critical path: every stage carries a small scale area in shared
// memory holding exactly what that stage's MMAs need, already converted (NVFP4: the UE4M3 codes
// as BF16/FP16 splats; MX / Q8_0 / IQ2 / block FP8: fp32 per (weight row, group) and per
// (token, group)). The scale words of stage s are fetched from global memory into registers one
// iteration after its cp.async copies are issued and stored to shared memory one iteration later
// (still >= 1 barrier before the stage is consumed), so the global latency overlaps the MMAs.
//
// Group scales are applied in fp32 per 32-value atom (per k16 step for IQ2_XS) to a per-tile
// temporary; FP8 MMA partials of per-tensor and block FP8 accumulate over one 64-K stage before
// being promoted to fp32 (times the block scales for block FP8).
#pragma once

#include <cooperative_groups.h>

#include "gemm/kernels/linear_common.cuh"

namespace b12x::gemm::lin {

struct TiledConfig {
  static constexpr int kBM = 128, kBN = 128, kBK = 64, kThreads = 256;
  static constexpr int kAPitch = kBK + 8;  // halves; 144-byte rows keep ldmatrix conflict-free
  static constexpr int kAPitchF8 = kBK + 16;  // bytes; 80-byte rows, conflict-free as well
  static constexpr int kBTiles = kBN / 16;
};

/// Per-format shape of one pipeline stage: [A tile][packed B tile][scale area].
template <WFmt F>
struct TiledStage {
  static constexpr WTraits kTr = wtraits(F);
  static constexpr bool kF8 = kTr.fp8mma;
  static constexpr int kGroup = kTr.group;
  static constexpr int kABytes =
      kF8 ? TiledConfig::kBM * TiledConfig::kAPitchF8 : TiledConfig::kBM * TiledConfig::kAPitch * 2;
  static constexpr int kBBytes = TiledConfig::kBTiles * 2 * kTr.slots * kTr.lane_bytes;
  /// Weight scale items per stage (one global fetch each): NVFP4 one u32 of 4 UE4M3 codes per
  /// row (stored as 4 splats), block FP8 one fp32 for the whole CTA (its 128 rows are one block,
  /// the 64-K stage lies in one 128-K group), otherwise one fp32 per (row, group).
  static constexpr int kWItems = F == WFmt::kNvfp4      ? TiledConfig::kBN
                                 : F == WFmt::kFp8Block ? 1
                                 : kGroup == 0          ? 0
                                                        : TiledConfig::kBN * (TiledConfig::kBK / kGroup);
  static constexpr int kWWords = F == WFmt::kNvfp4 ? 4 * TiledConfig::kBN : (kWItems + 3) / 4 * 4;
  /// Activation group scales (fp32 rows or E8M0 rows) exist only for these formats.
  static constexpr bool kHasXs = F == WFmt::kMxfp4 || F == WFmt::kFp8Mx || F == WFmt::kFp8Block;
  static constexpr int kXGroups = !kHasXs ? 0 : (kGroup >= TiledConfig::kBK ? 1 : TiledConfig::kBK / kGroup);
  static constexpr int kXItems = kXGroups * TiledConfig::kBM;
  static constexpr int kItems = kWItems + kXItems;
  static constexpr int kItemsPerThread = (kItems + TiledConfig::kThreads - 1) / TiledConfig::kThreads;
  static constexpr int kScaleBytes = (kWWords + kXItems) * 4;
  static constexpr int kBytes = kABytes + kBBytes + kScaleBytes;
  /// Static shared memory of the kernel (NVFP4 splat table, IQ2 grid/sign tables).
  static constexpr int kStaticBytes = F == WFmt::kNvfp4 ? 512
                                      : F == WFmt::kIq2Xs ? (512 * 4 + 512) * 4
                                      : F == WFmt::kIq2Xxs ? (256 * 4 + 512) * 4
                                                            : 64;
  /// As many stages as fit SM12x's 99 KB (Q8_0's 8 KB of packed B per stage allows 3).
  static constexpr int kStages = 4 * kBytes + kStaticBytes <= 101376 ? 4 : 3;
  static_assert(kBytes % 16 == 0, "stage must keep 16-byte alignment");
};

/// The pipeline buffers, at least the 64 KB the split-K reduction reuses them for.
template <WFmt F>
__host__ __device__ constexpr int tiled_smem_bytes() {
  constexpr int kPipe = TiledStage<F>::kStages * TiledStage<F>::kBytes;
  constexpr int kRed = TiledConfig::kThreads * 64 * 4;
  return kPipe > kRed ? kPipe : kRed;
}
#define B12X_TILED_SMEM_CHECK(FMT)                                                     \
  static_assert(tiled_smem_bytes<FMT>() + TiledStage<FMT>::kStaticBytes <= 101376, \
                "tiled kernel exceeds SM12x's 99 KB of shared memory")
B12X_TILED_SMEM_CHECK(WFmt::kNvfp4);
B12X_TILED_SMEM_CHECK(WFmt::kMxfp4);
B12X_TILED_SMEM_CHECK(WFmt::kFp8);
B12X_TILED_SMEM_CHECK(WFmt::kFp8Mx);
B12X_TILED_SMEM_CHECK(WFmt::kFp8Block);
B12X_TILED_SMEM_CHECK(WFmt::kQ8_0);
B12X_TILED_SMEM_CHECK(WFmt::kIq2Xxs);
B12X_TILED_SMEM_CHECK(WFmt::kIq2Xs);
#undef B12X_TILED_SMEM_CHECK

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

/// Raw scale word of item i for the stage starting at absolute K k0 (see TiledStage): fetched
/// with plain loads into registers, converted by tiled_scale_store one iteration later.
template <WFmt F>
__device__ __forceinline__ uint32_t tiled_scale_fetch(const LinearParams& p, int i, int64_t n0,
                                                      int64_t m0, int64_t k0) {
  using S = TiledStage<F>;
  if (i < S::kWItems) {
    if constexpr (F == WFmt::kNvfp4) {
      const int64_t row = n0 + i;
      return row < p.NP ? __ldg(reinterpret_cast<const uint32_t*>(p.wscale + row * p.scale_ld +
                                                                  k0 / 16))
                        : 0u;
    } else if constexpr (F == WFmt::kFp8Block) {
      return __float_as_uint(__ldg(reinterpret_cast<const float*>(p.wscale) +
                                   (n0 / 128) * p.scale_ld + k0 / 128));
    } else if constexpr (S::kGroup > 0) {
      const int j = i / TiledConfig::kBN;
      const int64_t row = n0 + (i % TiledConfig::kBN);
      const int64_t kk = k0 + j * S::kGroup;
      if (row >= p.NP) return 0u;
      if constexpr (F == WFmt::kMxfp4 || F == WFmt::kFp8Mx) {
        return __ldg(p.wscale + row * p.scale_ld + kk / 32);
      } else if constexpr (F == WFmt::kQ8_0) {
        return __ldg(reinterpret_cast<const uint16_t*>(p.wscale) + row * p.scale_ld + kk / 32);
      } else {  // IQ2: fp16 d | 4-bit sub-scale << 16
        const uint32_t d =
            __ldg(reinterpret_cast<const uint16_t*>(p.wscale) + row * p.scale_ld + kk / 256);
        const int64_t jj = kk / S::kGroup;
        const uint32_t sv = (__ldg(p.wscale2 + row * p.scale2_ld + jj / 2) >> (4 * (jj & 1))) & 0xFu;
        return d | (sv << 16);
      }
    }
    return 0u;
  } else if constexpr (S::kHasXs) {
    // Activation group scale (token r, group j); 1.0 for padding rows / K beyond the input
    // (x is zero-filled there) and when the binding has no activation scales.
    const int x = i - S::kWItems;
    const int j = x / TiledConfig::kBM;
    const int64_t m = m0 + (x % TiledConfig::kBM);
    const int64_t kk = k0 + j * S::kGroup;
    const bool valid = m < p.M && kk < p.K;
    switch (p.xs_kind) {
      case kXsF32Rows:
        return valid ? __float_as_uint(__ldg(p.xscale + m * p.xscale_ld + kk / S::kGroup))
                     : 0x3F800000u;
      case kXsE8m0Rows: return valid ? __ldg(p.xq_scale + m * p.xscale_ld + kk / S::kGroup) : 127u;
      default: return 127u;
    }
  }
  return 0u;
}

/// Convert and store item i into a stage's scale area (weights: [group][row], activations:
/// [group][token] after the weight words).
template <WFmt F>
__device__ __forceinline__ void tiled_scale_store(const LinearParams& p, int i, uint32_t raw,
                                                  uint32_t* area, const uint32_t* lut) {
  using S = TiledStage<F>;
  if (i < S::kWItems) {
    if constexpr (F == WFmt::kNvfp4) {
#pragma unroll
      for (int j = 0; j < 4; ++j) area[j * TiledConfig::kBN + i] = lut[(raw >> (8 * j)) & 0x7Fu];
    } else if constexpr (F == WFmt::kMxfp4 || F == WFmt::kFp8Mx) {
      area[i] = __float_as_uint(e8m0_f32(raw));
    } else if constexpr (F == WFmt::kFp8Block) {
      area[i] = raw;
    } else if constexpr (F == WFmt::kQ8_0) {
      area[i] = __float_as_uint(half_bits_f32(raw));
    } else if constexpr (S::kGroup > 0) {
      const float d = half_bits_f32(raw & 0xFFFFu);
      area[i] = __float_as_uint(d * static_cast<float>(2 * (raw >> 16) + 1) * 0.125f);
    }
  } else {
    const uint32_t v = p.xs_kind == kXsF32Rows ? raw : __float_as_uint(e8m0_f32(raw));
    area[S::kWWords + (i - S::kWItems)] = v;
  }
}

template <WFmt F, class T>
__global__ void __launch_bounds__(256) linear_tiled_kernel(const LinearParams p) {
  using C = TiledConfig;
  using S = TiledStage<F>;
  constexpr WTraits kTr = wtraits(F);
  constexpr int kApv = 16 / kTr.lane_bytes;  // atoms per 16-byte lane vector
  constexpr int kAtomBytes = kTr.slots * kTr.lane_bytes;
  constexpr bool kIq2 = (F == WFmt::kIq2Xxs || F == WFmt::kIq2Xs);
  constexpr int kGroup = kTr.group;
  constexpr int kScaleStep = kGroup == 16 ? 1 : 2;  // k16 steps per fp32 scale application
  constexpr bool kF8 = kTr.fp8mma;
  constexpr int kStages = S::kStages;
  // FP8 MMA partials accumulated over one stage before the fp32 promotion.
  constexpr bool kF8Promote = kF8 && (kGroup == 0 || kGroup == 128);

  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ uint32_t lut[F == WFmt::kNvfp4 ? 128 : 1];
  __shared__ alignas(16) uint32_t gtab[kIq2 ? (F == WFmt::kIq2Xs ? 512 * 4 : 256 * 4) : 4];
  __shared__ alignas(16) uint32_t stab[kIq2 ? 512 : 4];

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int wm = warp >> 2, wn = warp & 3;  // warp position: tokens 64*wm, rows 32*wn
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * C::kBM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * C::kBN;
  const int64_t tile0 = n0 / 16;  // first 16-row tile of the CTA

  if constexpr (F == WFmt::kNvfp4) {
    if (tid < 128) lut[tid] = nvfp4_scale_splat<T>(static_cast<uint8_t>(tid));
  }
  if constexpr (kIq2) load_iq2_tables<F == WFmt::kIq2Xs, T>(gtab, stab, tid, 256);
  // The prologue's scale stores read lut.
  __syncthreads();

  griddep_wait();  // activations and the output belong to earlier kernels of the stream

  auto a_stage = [&](int s) { return smem + s * S::kBytes; };
  auto b_stage = [&](int s) { return smem + s * S::kBytes + S::kABytes; };
  auto scale_area = [&](int s) {
    return reinterpret_cast<uint32_t*>(smem + s * S::kBytes + S::kABytes + S::kBBytes);
  };

  // Split-K over grid.z (one thread-block cluster): this CTA's stages [kb_begin, kb_end).
  const int64_t total_k = p.KP / C::kBK;
  const int64_t per_split = (total_k + p.split - 1) / p.split;
  const int64_t kb_begin = min(total_k, static_cast<int64_t>(blockIdx.z) * per_split);
  const int64_t num_k = min(total_k, kb_begin + per_split) - kb_begin;

  auto load_stage = [&](int s, int64_t kb) {
    const int64_t k0 = kb * C::kBK;  // kb: absolute stage index
    uint8_t* as = a_stage(s);
    if constexpr (kF8) {
      // A: 128 rows x 4 chunks of 16 e4m3 bytes
      const uint8_t* xb = static_cast<const uint8_t*>(p.x);
#pragma unroll
      for (int i = 0; i < (C::kBM * C::kBK / 16) / C::kThreads; ++i) {
        const int c = tid + i * C::kThreads;
        const int r = c >> 2, col = (c & 3) * 16;
        const int64_t m = m0 + r, k = k0 + col;
        const bool valid = m < p.M && k < p.K;
        cp_async16(as + r * C::kAPitchF8 + col, valid ? (xb + m * p.ldx_bytes + k) : xb, valid);
      }
    } else {
      // A: 128 rows x 8 chunks of 16 bytes
      const uint16_t* x = static_cast<const uint16_t*>(p.x);
      uint16_t* ash = reinterpret_cast<uint16_t*>(as);
#pragma unroll
      for (int i = 0; i < (C::kBM * C::kBK / 8) / C::kThreads; ++i) {
        const int c = tid + i * C::kThreads;
        const int r = c >> 3, col = (c & 7) * 8;
        const int64_t m = m0 + r, k = k0 + col;
        const bool valid = m < p.M && k < p.K;
        cp_async16(ash + r * C::kAPitch + col, valid ? (x + m * p.ldx + k) : x, valid);
      }
    }
    // B: kBTiles row tiles x 2 atoms, contiguous kAtomBytes*2 per tile (the packed order keeps a
    // tile's consecutive K vectors adjacent).
    uint8_t* bs = b_stage(s);
    constexpr int kChunksPerTile = 2 * kAtomBytes / 16;
#pragma unroll
    for (int i = 0; i < (C::kBTiles * kChunksPerTile + C::kThreads - 1) / C::kThreads; ++i) {
      const int c = tid + i * C::kThreads;
      if (c < C::kBTiles * kChunksPerTile) {
        const int tl = c / kChunksPerTile, off = (c % kChunksPerTile) * 16;
        const int64_t tile = tile0 + tl;
        const bool valid = tile < p.n16;
        const uint8_t* src =
            p.wvals + (tile * p.kvec + k0 / 32 / kApv) * static_cast<int64_t>(kTr.slots) * 16 + off;
        cp_async16(bs + tl * 2 * kAtomBytes + off, valid ? src : p.wvals, valid);
      }
    }
  };

  uint32_t sraw[S::kItemsPerThread > 0 ? S::kItemsPerThread : 1];
  auto fetch_scales = [&](int64_t kb) {
#pragma unroll
    for (int j = 0; j < S::kItemsPerThread; ++j) {
      const int i = tid + j * C::kThreads;
      sraw[j] = i < S::kItems ? tiled_scale_fetch<F>(p, i, n0, m0, kb * C::kBK) : 0u;
    }
  };
  auto store_scales = [&](int s) {
#pragma unroll
    for (int j = 0; j < S::kItemsPerThread; ++j) {
      const int i = tid + j * C::kThreads;
      if (i < S::kItems) tiled_scale_store<F>(p, i, sraw[j], scale_area(s), lut);
    }
  };

  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_k) {
      load_stage(s, kb_begin + s);
      fetch_scales(kb_begin + s);
      store_scales(s);
    }
    cp_async_commit();
  }

  for (int64_t kb = 0; kb < num_k; ++kb) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    {
      // Scales of stage kb+kStages-2 (fetched last iteration) go to its slot, whose previous
      // stage (kb-2) every warp finished before the previous barrier; the stage is consumed
      // at least one barrier later. Then the copies and scale fetches of stage kb+kStages-1.
      const int64_t nk = kb + kStages - 1;
      if (kb >= 1 && nk - 1 < num_k) store_scales(static_cast<int>((nk - 1) % kStages));
      if (nk < num_k) {
        load_stage(static_cast<int>(nk % kStages), kb_begin + nk);
        fetch_scales(kb_begin + nk);
      }
      cp_async_commit();
    }
    const int s = static_cast<int>(kb % kStages);
    const uint8_t* as = a_stage(s);
    const uint8_t* bs = b_stage(s);
    const uint32_t* sa = scale_area(s);
    const float* wsa = reinterpret_cast<const float*>(sa);
    const float* xsa = reinterpret_cast<const float*>(sa + S::kWWords);

    if constexpr (kF8) {
      float pacc[kF8Promote ? 4 : 1][4][4];  // FP8 MMA partials of this stage
#pragma unroll
      for (int i = 0; i < (kF8Promote ? 4 : 1); ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) pacc[i][j][e] = 0.f;
#pragma unroll
      for (int at = 0; at < 2; ++at) {
        uint32_t af[4][4];
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
          const int row = wm * 64 + mt * 16 + (lane & 15);
          ldmatrix_x4(af[mt], as + row * C::kAPitchF8 + at * 32 + (lane >> 4) * 16);
        }
        uint32_t bw[2][4];
#pragma unroll
        for (int ar = 0; ar < 2; ++ar) {
          const uint4 rv = *reinterpret_cast<const uint4*>(bs + (wn * 2 + ar) * 2 * kAtomBytes +
                                                           at * kAtomBytes + lane * 16);
          bw[ar][0] = rv.x;
          bw[ar][1] = rv.y;
          bw[ar][2] = rv.z;
          bw[ar][3] = rv.w;
        }
        if constexpr (kF8Promote) {
#pragma unroll
          for (int mt = 0; mt < 4; ++mt)
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
              mma16832_e4m3(pacc[mt][nt], af[mt], bw[nt >> 1][nt & 1], bw[nt >> 1][2 + (nt & 1)]);
        } else {
          // MXFP8: E8M0 weight x activation scales per 32-K atom.
          float ws[4][2];
#pragma unroll
          for (int nt = 0; nt < 4; ++nt) {
            const float2 v =
                *reinterpret_cast<const float2*>(wsa + at * C::kBN + wn * 32 + nt * 8 + 2 * t);
            ws[nt][0] = v.x;
            ws[nt][1] = v.y;
          }
          float xs[4][2];
#pragma unroll
          for (int mt = 0; mt < 4; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) xs[mt][h] = xsa[at * C::kBM + wm * 64 + mt * 16 + g + 8 * h];
#pragma unroll
          for (int mt = 0; mt < 4; ++mt)
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
              float tmp[4] = {0.f, 0.f, 0.f, 0.f};
              mma16832_e4m3(tmp, af[mt], bw[nt >> 1][nt & 1], bw[nt >> 1][2 + (nt & 1)]);
              acc[mt][nt][0] = fmaf(tmp[0], xs[mt][0] * ws[nt][0], acc[mt][nt][0]);
              acc[mt][nt][1] = fmaf(tmp[1], xs[mt][0] * ws[nt][1], acc[mt][nt][1]);
              acc[mt][nt][2] = fmaf(tmp[2], xs[mt][1] * ws[nt][0], acc[mt][nt][2]);
              acc[mt][nt][3] = fmaf(tmp[3], xs[mt][1] * ws[nt][1], acc[mt][nt][3]);
            }
        }
      }
      if constexpr (kF8Promote) {
        // Promote once per stage (64 K); block FP8 applies the group's activation x weight
        // block scales here (a stage never straddles a 128-K group).
        {
          float xs[4][2];
#pragma unroll
          for (int mt = 0; mt < 4; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              if constexpr (kGroup == 128) {
                xs[mt][h] = xsa[wm * 64 + mt * 16 + g + 8 * h] * wsa[0];
              } else {
                xs[mt][h] = 1.f;
              }
            }
#pragma unroll
          for (int mt = 0; mt < 4; ++mt)
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                acc[mt][nt][e] = fmaf(pacc[mt][nt][e], xs[mt][e >> 1], acc[mt][nt][e]);
              }
        }
      }
    } else {
#pragma unroll
      for (int at = 0; at < 2; ++at) {  // atom (32 k) within the stage
        // A fragments for 4 m16 tiles x 2 k16 steps.
        uint32_t af[4][2][4];
        const uint16_t* ash = reinterpret_cast<const uint16_t*>(as);
#pragma unroll
        for (int mt = 0; mt < 4; ++mt)
#pragma unroll
          for (int st = 0; st < 2; ++st) {
            const int row = wm * 64 + mt * 16 + (lane & 15);
            const int col = at * 32 + st * 16 + (lane >> 4) * 8;
            ldmatrix_x4(af[mt][st], ash + row * C::kAPitch + col);
          }
        // B fragments: the warp's two 16-row atom tiles -> 4 n8 tiles.
        uint32_t bf[2][2][4];  // [atom tile][step][a0..a3]
#pragma unroll
        for (int ar = 0; ar < 2; ++ar) {
          const int tl = wn * 2 + ar;  // tile within the CTA
          const int slot = kIq2 ? g : lane;
          const uint8_t* ab = bs + tl * 2 * kAtomBytes;
          // Atom `at` lives in vector (at / kApv), part (at % kApv): with kApv == 2 both atoms
          // share one 16-byte lane vector; with kApv == 1 they are consecutive runs.
          uint4 rv;
          if constexpr (kApv == 2) {
            rv = *reinterpret_cast<const uint4*>(ab + slot * 16);
          } else {
            rv = *reinterpret_cast<const uint4*>(ab + at * kAtomBytes + slot * 16);
          }
          if constexpr (F == WFmt::kNvfp4 || F == WFmt::kMxfp4) {
            const uint32_t w[2] = {at ? rv.z : rv.x, at ? rv.w : rv.y};
            uint32_t sc[2][2];
            if constexpr (F == WFmt::kNvfp4) {
              // Splats [16-group of the stage][row]: groups 2at, 2at+1 are the atom's steps.
              const int r = tl * 16 + g;
#pragma unroll
              for (int st = 0; st < 2; ++st) {
                sc[st][0] = sa[(2 * at + st) * C::kBN + r];
                sc[st][1] = sa[(2 * at + st) * C::kBN + r + 8];
              }
            } else {
              sc[0][0] = sc[0][1] = sc[1][0] = sc[1][1] = kFp4Unit2<T>();
            }
            decode_fp4_atom<T>(w, sc, bf[ar]);
          } else if constexpr (F == WFmt::kQ8_0) {
            decode_byte_atom<T, true>(rv, bf[ar]);
          } else if constexpr (kIq2) {
            decode_iq2_atom<T>(rv, gtab, stab, t, bf[ar]);
          } else {
            decode_byte_atom<T, false>(rv, bf[ar]);
          }
        }

        if constexpr (kGroup == 0) {
#pragma unroll
          for (int st = 0; st < 2; ++st)
#pragma unroll
            for (int mt = 0; mt < 4; ++mt)
#pragma unroll
              for (int nt = 0; nt < 4; ++nt) {
                const uint32_t* b = bf[nt >> 1][st];
                mma16816<T>(acc[mt][nt], af[mt][st], b[(nt & 1)], b[2 + (nt & 1)]);
              }
        } else {
          // fp32 scales: weight rows (2t, 2t+1) of each n8 tile, tokens (g, g+8) of each m16
          // tile, read from the stage's scale area ([group][row] / [group][token]).
#pragma unroll
          for (int sg = 0; sg < 2 / kScaleStep; ++sg) {
            const int gi = (at * 32 + sg * 16) / kGroup;  // group within the stage
            float ws[4][2];
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
              const float2 v =
                  *reinterpret_cast<const float2*>(wsa + gi * C::kBN + wn * 32 + nt * 8 + 2 * t);
              ws[nt][0] = v.x;
              ws[nt][1] = v.y;
            }
            float xs[4][2];
#pragma unroll
            for (int mt = 0; mt < 4; ++mt)
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                if constexpr (S::kHasXs) {
                  xs[mt][h] = xsa[gi * C::kBM + wm * 64 + mt * 16 + g + 8 * h];
                } else {
                  xs[mt][h] = 1.f;
                }
              }
#pragma unroll
            for (int mt = 0; mt < 4; ++mt)
#pragma unroll
              for (int nt = 0; nt < 4; ++nt) {
                float tmp[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
                for (int st = sg * kScaleStep; st < (sg + 1) * kScaleStep; ++st) {
                  const uint32_t* b = bf[nt >> 1][st];
                  mma16816<T>(tmp, af[mt][st], b[(nt & 1)], b[2 + (nt & 1)]);
                }
                acc[mt][nt][0] = fmaf(tmp[0], xs[mt][0] * ws[nt][0], acc[mt][nt][0]);
                acc[mt][nt][1] = fmaf(tmp[1], xs[mt][0] * ws[nt][1], acc[mt][nt][1]);
                acc[mt][nt][2] = fmaf(tmp[2], xs[mt][1] * ws[nt][0], acc[mt][nt][2]);
                acc[mt][nt][3] = fmaf(tmp[3], xs[mt][1] * ws[nt][1], acc[mt][nt][3]);
              }
          }
        }
      }
    }  // !kF8
  }
  cp_async_wait<0>();
  griddep_launch_dependents();

  // Split-K: ranks > 0 leave their accumulators in shared memory; rank 0 adds them over DSMEM.
  if (p.cluster_split > 1) {
    __syncthreads();  // the pipeline buffers become the reduction buffer
    float* red = reinterpret_cast<float*>(smem);
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) red[((mt * 4 + nt) * 4 + e) * C::kThreads + tid] = acc[mt][nt][e];
    cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
    cl.sync();
    const unsigned rank = cl.block_rank();
    if (rank == 0) {
      for (unsigned r = 1; r < cl.num_blocks(); ++r) {
        const float* rr = cl.map_shared_rank(red, r);
#pragma unroll
        for (int mt = 0; mt < 4; ++mt)
#pragma unroll
          for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              acc[mt][nt][e] += rr[((mt * 4 + nt) * 4 + e) * C::kThreads + tid];
      }
    }
    cl.sync();
    if (rank != 0) return;
  }

  // Epilogue: c0 = (token g, row 2t), c1 = (g, 2t+1), c2/c3 = token g+8.
  float mult = p.out_mult;
  if (p.alpha != nullptr) mult *= *p.alpha;
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t m = m0 + wm * 64 + mt * 16 + g + 8 * h;
        const int64_t n = n0 + wn * 32 + nt * 8 + 2 * t;
        if (m >= p.M) continue;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if (n + e >= p.N) continue;
          float v = acc[mt][nt][2 * h + e] * mult;
          if (p.bias != nullptr) v += load_out_type(p.bias, n + e, p.out_fp16);
          if (p.out_fp16)
            store_out<true>(p.out, m * p.ldo + n + e, v);
          else
            store_out<false>(p.out, m * p.ldo + n + e, v);
        }
      }
}

}  // namespace b12x::gemm::lin
