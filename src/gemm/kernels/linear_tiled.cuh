// Tiled linear kernel for large M (the prefill regime).
//
// CTA tile 128 tokens x 128 weight rows, K stage of 64 (two packed atoms), 8 warps as 2 (tokens)
// x 4 (weight rows): each warp owns 64 tokens x 32 weight rows. Activations (bf16/fp16, row
// major) and packed weight atoms stream into shared memory through a 3-stage cp.async pipeline;
// A fragments come from ldmatrix, B fragments are decoded per lane from the packed atoms (the
// same decoders as the weight-streaming kernel: an atom's a0..a3 registers are the b0/b1
// registers of its two n8 tiles). Group scales are applied in fp32 per 32-value atom (per k16
// step for IQ2_XS) to a per-tile temporary.
//
// Shared memory: 3 x (128 x 72 halves + 8 x 2 atoms x 512 B) <= 79 KB, within SM12x's 99 KB.
#pragma once

#include <cooperative_groups.h>

#include "gemm/kernels/linear_common.cuh"

namespace b12x::gemm::lin {

struct TiledConfig {
  static constexpr int kBM = 128, kBN = 128, kBK = 64, kStages = 3, kThreads = 256;
  static constexpr int kAPitch = kBK + 8;  // halves; 144-byte rows keep ldmatrix conflict-free
  static constexpr int kABytes = kBM * kAPitch * 2;
  static constexpr int kBTiles = kBN / 16;
};

template <WFmt F>
__host__ __device__ constexpr int tiled_b_stage_bytes() {
  return TiledConfig::kBTiles * 2 * wtraits(F).slots * wtraits(F).lane_bytes;
}
/// FP8 formats stage e4m3 activation bytes (80-byte rows) instead of 16-bit values.
template <WFmt F>
__host__ __device__ constexpr int tiled_a_stage_bytes() {
  return wtraits(F).fp8mma ? TiledConfig::kBM * (TiledConfig::kBK + 16) : TiledConfig::kABytes;
}
/// The pipeline buffers, at least the 64 KB the split-K reduction reuses them for.
template <WFmt F>
__host__ __device__ constexpr int tiled_smem_bytes() {
  constexpr int kPipe = TiledConfig::kStages * (tiled_a_stage_bytes<F>() + tiled_b_stage_bytes<F>());
  constexpr int kRed = TiledConfig::kThreads * 64 * 4;
  return kPipe > kRed ? kPipe : kRed;
}
static_assert(tiled_smem_bytes<WFmt::kFp8>() <= 101376, "tiled kernel exceeds SM12x smem");
static_assert(tiled_smem_bytes<WFmt::kQ8_0>() <= 101376, "tiled kernel exceeds SM12x smem");
static_assert(tiled_smem_bytes<WFmt::kNvfp4>() + 512 <= 101376, "tiled kernel exceeds SM12x smem");
static_assert(tiled_smem_bytes<WFmt::kIq2Xs>() + 10240 <= 101376, "tiled kernel exceeds SM12x smem");

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

/// fp32 group scale of activation row m, group j (fp32 rows or E8M0 rows; 1 without scales).
__device__ __forceinline__ float act_scale_tiled(const LinearParams& p, int64_t m, int64_t j) {
  switch (p.xs_kind) {
    case kXsF32Rows: return __ldg(p.xscale + m * p.xscale_ld + j);
    case kXsE8m0Rows: return e8m0_f32(__ldg(p.xq_scale + m * p.xscale_ld + j));
    default: return 1.f;
  }
}

template <WFmt F, class T>
__global__ void __launch_bounds__(256) linear_tiled_kernel(const LinearParams p) {
  using C = TiledConfig;
  constexpr WTraits kTr = wtraits(F);
  constexpr int kApv = 16 / kTr.lane_bytes;  // atoms per 16-byte lane vector
  constexpr int kAtomBytes = kTr.slots * kTr.lane_bytes;
  constexpr int kBStage = tiled_b_stage_bytes<F>();
  constexpr bool kIq2 = (F == WFmt::kIq2Xxs || F == WFmt::kIq2Xs);
  constexpr int kGroup = kTr.group;
  constexpr int kScaleStep = kGroup == 16 ? 1 : 2;  // k16 steps per fp32 scale application
  constexpr bool kF8 = kTr.fp8mma;
  constexpr int kAStage = tiled_a_stage_bytes<F>();
  constexpr int kAPitchB = C::kBK + 16;  // FP8 row pitch in bytes

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

  griddep_wait();  // activations and the output belong to earlier kernels of the stream

  auto a_stage = [&](int s) { return reinterpret_cast<uint16_t*>(smem + s * (kAStage + kBStage)); };
  auto b_stage = [&](int s) { return smem + s * (kAStage + kBStage) + kAStage; };

  // Split-K over grid.z (one thread-block cluster): this CTA's stages [kb_begin, kb_end).
  const int64_t total_k = p.KP / C::kBK;
  const int64_t per_split = (total_k + p.split - 1) / p.split;
  const int64_t kb_begin = min(total_k, static_cast<int64_t>(blockIdx.z) * per_split);
  const int64_t num_k = min(total_k, kb_begin + per_split) - kb_begin;
  const uint16_t* x = static_cast<const uint16_t*>(p.x);

  auto load_stage = [&](int s, int64_t kb) {
    const int64_t k0 = kb * C::kBK;  // kb: absolute stage index
    uint16_t* as = a_stage(s);
    if constexpr (kF8) {
      // A: 128 rows x 4 chunks of 16 e4m3 bytes
      const uint8_t* xb = static_cast<const uint8_t*>(p.x);
      uint8_t* asb = reinterpret_cast<uint8_t*>(as);
#pragma unroll
      for (int i = 0; i < (C::kBM * C::kBK / 16) / C::kThreads; ++i) {
        const int c = tid + i * C::kThreads;
        const int r = c >> 2, col = (c & 3) * 16;
        const int64_t m = m0 + r, k = k0 + col;
        const bool valid = m < p.M && k < p.K;
        cp_async16(asb + r * kAPitchB + col, valid ? (xb + m * p.ldx_bytes + k) : xb, valid);
      }
    } else {
      // A: 128 rows x 8 chunks of 16 bytes
#pragma unroll
      for (int i = 0; i < (C::kBM * C::kBK / 8) / C::kThreads; ++i) {
        const int c = tid + i * C::kThreads;
        const int r = c >> 3, col = (c & 7) * 8;
        const int64_t m = m0 + r, k = k0 + col;
        const bool valid = m < p.M && k < p.K;
        cp_async16(as + r * C::kAPitch + col, valid ? (x + m * p.ldx + k) : x, valid);
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

  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    if (s < num_k) load_stage(s, kb_begin + s);
    cp_async_commit();
  }

  for (int64_t kb = 0; kb < num_k; ++kb) {
    cp_async_wait<C::kStages - 2>();
    __syncthreads();
    {
      const int64_t nk = kb + C::kStages - 1;
      if (nk < num_k) load_stage(static_cast<int>(nk % C::kStages), kb_begin + nk);
      cp_async_commit();
    }
    const int s = static_cast<int>(kb % C::kStages);
    const uint16_t* as = a_stage(s);
    const uint8_t* bs = b_stage(s);
    const int64_t k0 = (kb_begin + kb) * C::kBK;

    if constexpr (kF8) {
      const uint8_t* asb = reinterpret_cast<const uint8_t*>(as);
      // Per-tensor FP8: the stage's two k32 MMAs accumulate in a temporary that is promoted to
      // the fp32 accumulators once per 64 K (FP8 MMA accumulation precision).
      float stage_acc[4][4][4];
      if constexpr (kGroup == 0) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) stage_acc[i][j][e] = 0.f;
      }
#pragma unroll
      for (int at = 0; at < 2; ++at) {
        uint32_t af[4][4];
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
          const int row = wm * 64 + mt * 16 + (lane & 15);
          ldmatrix_x4(af[mt], asb + row * kAPitchB + at * 32 + (lane >> 4) * 16);
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
        if constexpr (kGroup == 0) {
#pragma unroll
          for (int mt = 0; mt < 4; ++mt)
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
              mma16832_e4m3(stage_acc[mt][nt], af[mt], bw[nt >> 1][nt & 1],
                            bw[nt >> 1][2 + (nt & 1)]);
        } else {
          const int64_t kk = k0 + at * 32;
          float ws[4][2];
#pragma unroll
          for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int64_t row = n0 + wn * 32 + nt * 8 + 2 * t + e;
              float v = 0.f;
              if (row < p.NP) {
                if constexpr (F == WFmt::kFp8Mx) {
                  v = e8m0_f32(__ldg(p.wscale + row * p.scale_ld + kk / 32));
                } else {
                  v = __ldg(reinterpret_cast<const float*>(p.wscale) + (row / 128) * p.scale_ld +
                            kk / 128);
                }
              }
              ws[nt][e] = v;
            }
          float xs[4][2];
#pragma unroll
          for (int mt = 0; mt < 4; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int64_t m = m0 + wm * 64 + mt * 16 + g + 8 * h;
              xs[mt][h] = m < p.M ? act_scale_tiled(p, m, kk / kGroup) : 1.f;
            }
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
      if constexpr (kGroup == 0) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] += stage_acc[i][j][e];
      }
    } else {
#pragma unroll
    for (int at = 0; at < 2; ++at) {  // atom (32 k) within the stage
      // A fragments for 4 m16 tiles x 2 k16 steps.
      uint32_t af[4][2][4];
#pragma unroll
      for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int st = 0; st < 2; ++st) {
          const int row = wm * 64 + mt * 16 + (lane & 15);
          const int col = at * 32 + st * 16 + (lane >> 4) * 8;
          ldmatrix_x4(af[mt][st], as + row * C::kAPitch + col);
        }
      // B fragments: the warp's two 16-row atom tiles -> 4 n8 tiles.
      uint32_t bf[2][2][4];  // [atom tile][step][a0..a3]
#pragma unroll
      for (int ar = 0; ar < 2; ++ar) {
        const int tl = wn * 2 + ar;  // tile within the CTA
        const int64_t tile = tile0 + tl;
        const int slot = kIq2 ? g : lane;
        const uint8_t* ab = bs + tl * 2 * kAtomBytes + slot * 16 * 0;
        // Atom `at` lives in vector (at / kApv), part (at % kApv): with kApv == 2 both atoms share
        // one 16-byte lane vector; with kApv == 1 they are consecutive 512-byte (or 128-byte) runs.
        uint4 rv;
        if constexpr (kApv == 2) {
          rv = *reinterpret_cast<const uint4*>(ab + slot * 16);
        } else {
          rv = *reinterpret_cast<const uint4*>(ab + at * kAtomBytes + slot * 16);
        }
        const int64_t row_g = tile * 16 + g, row_g8 = row_g + 8;
        const bool tile_ok = tile < p.n16;
        if constexpr (F == WFmt::kNvfp4 || F == WFmt::kMxfp4) {
          const uint32_t w[2] = {at ? rv.z : rv.x, at ? rv.w : rv.y};
          uint32_t sc[2][2];
          if constexpr (F == WFmt::kNvfp4) {
            const int64_t sb0 = (k0 + at * 32) / 16;
            uint32_t s0 = 0, s1 = 0;
            if (tile_ok) {
              s0 = __ldg(reinterpret_cast<const uint16_t*>(p.wscale + row_g * p.scale_ld + sb0));
              s1 = __ldg(reinterpret_cast<const uint16_t*>(p.wscale + row_g8 * p.scale_ld + sb0));
            }
            sc[0][0] = lut[s0 & 0x7Fu];
            sc[1][0] = lut[(s0 >> 8) & 0x7Fu];
            sc[0][1] = lut[s1 & 0x7Fu];
            sc[1][1] = lut[(s1 >> 8) & 0x7Fu];
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
        // fp32 scales: weight rows (2t, 2t+1) of each n8 tile, tokens (g, g+8) of each m16 tile.
#pragma unroll
        for (int sg = 0; sg < 2 / kScaleStep; ++sg) {
          const int64_t kk = k0 + at * 32 + sg * 16;  // first k of this scale group
          float ws[4][2];
#pragma unroll
          for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int64_t row = n0 + wn * 32 + nt * 8 + 2 * t + e;
              float v = 0.f;
              if (row < p.NP) {
                if constexpr (F == WFmt::kMxfp4 || F == WFmt::kFp8Mx) {
                  v = e8m0_f32(__ldg(p.wscale + row * p.scale_ld + kk / 32));
                } else if constexpr (F == WFmt::kFp8Block) {
                  v = __ldg(reinterpret_cast<const float*>(p.wscale) + (row / 128) * p.scale_ld +
                            kk / 128);
                } else if constexpr (F == WFmt::kQ8_0) {
                  v = half_bits_f32(
                      __ldg(reinterpret_cast<const uint16_t*>(p.wscale) + row * p.scale_ld + kk / 32));
                } else if constexpr (kIq2) {
                  const float d = half_bits_f32(__ldg(
                      reinterpret_cast<const uint16_t*>(p.wscale) + row * p.scale_ld + kk / 256));
                  const int64_t j = kk / kGroup;
                  const uint32_t sv = (__ldg(p.wscale2 + row * p.scale2_ld + j / 2) >> (4 * (j & 1))) & 0xFu;
                  v = d * static_cast<float>(2 * sv + 1) * 0.125f;
                }
              }
              ws[nt][e] = v;
            }
          float xs[4][2];
#pragma unroll
          for (int mt = 0; mt < 4; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int64_t m = m0 + wm * 64 + mt * 16 + g + 8 * h;
              xs[mt][h] = m < p.M ? act_scale_tiled(p, m, kk / kGroup) : 1.f;
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
