// M = 1 streaming kernel for FP4 weights with BF16 MMAs (session 11, Plan::decode_stream_parts).
//
// Why a second M = 1 kernel: the decode kernel's CTAs are short-lived at M = 1 (2-7 ring slices
// per warp), and each pays its own prologue (activation staging, scale LUT, the ring's first DRAM
// round trip) with its weight stream idle; Nsight Compute put that at ~27 % of warp time. Here a
// persistent grid (at most the CTAs that fit the SMs) walks groups of 8 / kParts row tiles, and
// each warp keeps a continuous register ring of kDepth 16-byte weight vectors (plus their scale
// bytes) in flight across group boundaries: the loads of the next group's first vectors are
// issued while the current group's last ones are computed, so a warp's stream never drains
// until its last group. Weights go straight to registers (ld.global.nc.L1::no_allocate), so the
// bytes in flight cost no shared memory and no cp.async bookkeeping.
//
// Token broadcast: with one token, every column of the MMA's B operand carries the same
// activations (lane (g, t) holds x[2t, 2t + 1] and x[2t + 8, 2t + 9] of each k16 step whatever
// g), so every column of the accumulator holds the same row sums and no lane needs a clamp or a
// mask. The activations of the whole K are staged once per CTA in shared memory in the order
// the lanes read them: for each 64-K vector, lane t's 16 values (4 k16 steps x lo / hi pair) are
// 32 contiguous bytes, two 16-byte loads per vector (broadcast to the 8 lanes of a t).
//
// K split inside the CTA: the 8 warps are kTiles = 8 / kParts tiles x kParts K parts of vp
// vectors each (vp a multiple of kDepth; vectors past the tile's kvec are not loaded, and the
// staged activations there are zero). Part 0 adds the other parts' row sums from
// shared memory after one CTA barrier per group (double-buffered, so one barrier suffices).
//
// NVFP4 scale splats: the four lanes of a quad need the same 8 splats per vector (rows g, g + 8 x
// 4 k16 steps); lane t looks up step t's two codes in the LUT and the quad exchanges them through
// a per-warp shared buffer (one 8-byte store and four 8-byte loads per lane and vector instead of
// eight LUT lookups with their address arithmetic).
#pragma once

#include "gemm/kernels/linear_common.cuh"

namespace b12x::gemm::lin {

inline constexpr int kStreamWarps = 8;

/// Position of activation k in the staged (lane-ordered) layout: vector k / 64, then lane t's 32
/// bytes (t = (k % 8) / 2), then the k16 step, lo / hi 8, the pair element.
__device__ __forceinline__ int stream_xpos(int k) {
  const int r = k & 63, rr = r & 15;
  return (k & ~63) + (((rr & 7) >> 1) << 4) + ((r >> 4) << 2) + ((rr >> 3) << 1) + (rr & 1);
}

/// kOcc: CTAs per SM the registers are capped for (2: <= 128, 3: <= 85; depth 8 spills at 3).
/// kMode 1 (probe, WRONG OUTPUT, kNoMath): the same loads, staging and reductions with each vector
/// folded by integer ops instead of its decode and MMAs: the memory structure's ceiling.
/// kMode 2 (NVFP4, depth 4, kArith): each lane loads its rows' scale bytes of a whole block of 4
/// vectors (16 bytes per row, one 16-byte load per row and block instead of a byte per row and
/// vector) and builds the splats arithmetically: UE4M3 bits shifted into a BF16 (bits << 4 are
/// the value * 2^-120, subnormals included), times 2^120 and 2^119 (two exact HMUL2s, no
/// shared-memory LUT, no quad exchange): fewer L1 / shared-memory wavefronts per vector for more
/// ALU instructions. (Code 0x7F, NaN in UE4M3, gives a finite splat.)
/// kMode 3 (per-tensor FP8, kF16x): SM90 has no e4m3 mma.sync (ptxas emulates m16n8k32 e4m3 by
/// converting both operands to FP16 at every MMA: 6 F2FP per HMMA in the kMode 0 loop); here the
/// activations are converted once, in the staging, to FP16 in the lane order of two m16n8k16
/// MMAs per atom (K permuted inside the atom: lane t's e4m3 k 4t..4t+3 / 16+4t..16+4t+3 take the
/// MMA's k slots 2t, 2t+1, 2t+8, 2t+9 of the first / second MMA, the same for weights and
/// activations), and the weights by 8 cvt.rn.f16x2.e4m3x2 per atom. Exact products, fp32
/// accumulation (no reduced-precision FP8 accumulator, no promotion blocks).
/// Bytes (0, 1) / (2, 3) of w (e4m3) -> FP16x2 lo / hi, exact (cvt.rn.f16x2.e4m3x2, SM89+; the
/// halves are selected for free, as in the attention kernels' e4m3x4_to_f16x4_hw).
__device__ __forceinline__ void e4m3x4_f16(uint32_t w, uint32_t& lo, uint32_t& hi) {
  asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n"
      " cvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
}

template <WFmt F, int kParts, int kDepth, int kOcc, int kMode = 0>
__global__ void __launch_bounds__(kStreamWarps * 32, kOcc)
    linear_stream_kernel(const LinearParams p) {
  static_assert(F == WFmt::kNvfp4 || F == WFmt::kMxfp4 || F == WFmt::kFp8,
                "FP4 weights with BF16 MMAs, or per-tensor FP8 weights with FP8 MMAs");
  static_assert(kParts == 1 || kParts == 2 || kParts == 4 || kParts == 8, "K parts per tile");
  static_assert(kDepth % 2 == 0, "the splat exchange alternates its buffers by ring slot");
  using T = Bf16Tag;
  constexpr bool kNv = F == WFmt::kNvfp4;
  constexpr bool kNoMath = kMode == 1;
  constexpr bool kArith = kMode == 2;
  constexpr bool kF16x = kMode == 3;
  static_assert(!kF16x || F == WFmt::kFp8, "FP16 conversion: per-tensor FP8");
  static_assert(!kArith || (kNv && kDepth == 4), "arithmetic splats: NVFP4, blocks of 4 vectors");
  // Per-tensor FP8: a vector is one e4m3 k32 atom (the A fragment of m16n8k32, undecoded) against
  // e4m3 activations staged as bytes (lane t: x[4t..4t+3], x[16+4t..16+4t+3] of each atom, 8
  // contiguous bytes); no scales (output_scale in the epilogue).
  constexpr bool kF8 = F == WFmt::kFp8;
  constexpr int kKv = kF8 ? 32 : 64;           // K values per vector
  constexpr int kXb = kF8 ? 1 : 2;             // source bytes per activation
  constexpr int kSb2 = kF8 && !kF16x ? 1 : 2;  // staged bytes per activation
  constexpr int kTiles = kStreamWarps / kParts;
  extern __shared__ __align__(16) uint8_t dsm[];
  __shared__ uint32_t lut[kNv ? 128 : kF8 ? 1 : 256];
  __shared__ uint2 spl[kNv ? 2 : 1][kStreamWarps][4][8];
  __shared__ float red[2][kStreamWarps][16];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int wt = warp % kTiles, wk = warp / kTiles;
  const int vp = p.stream_vp;
  const int64_t groups = (p.n16 + kTiles - 1) / kTiles;
  const int64_t vbase = static_cast<int64_t>(wk) * vp;  // this warp's first vector of a tile

  // The ring: a vector's 16 bytes and its scale bytes (NVFP4: step t of rows g / g + 8; MXFP4:
  // the two atoms' E8M0 bytes of rows g / g + 8).
  struct Slot {
    uint4 w;
    uint32_t s0, s1;
  };
  // Issue state: the next block of kDepth vectors to request starts at vector iv of group igrp
  // (vp is a multiple of kDepth, so a block never straddles two groups and the vectors of a
  // block sit at immediate offsets from wp / sp / sp8).
  int64_t igrp = blockIdx.x;
  int iv = 0;
  int nvalid = 0;  // vectors of the current block that exist (0 for a group without this tile)
  const uint8_t* wp = nullptr;
  const uint8_t* sp = nullptr;
  const uint8_t* sp8 = nullptr;
  constexpr int kSb = kNv ? 4 : 2;     // scale bytes per row and vector
  const int64_t lim = p.kvec - vbase;  // vectors of this warp's part that exist
  auto set_group = [&]() {
    const int64_t tile = igrp * kTiles + wt;
    nvalid = igrp < groups && tile < p.n16 ? static_cast<int>(min(lim, int64_t{kDepth})) : 0;
    wp = p.wvals + (tile * p.kvec + vbase) * 512 + lane * 16;
    if constexpr (!kF8) {
      sp = p.wscale + (tile * 16 + g) * p.scale_ld + vbase * kSb + (kNv && !kArith ? t : 0);
      sp8 = sp + 8 * p.scale_ld;
    }
  };
  set_group();
  // Vector j of the block. Vectors that do not exist are not loaded: their slot keeps an earlier
  // vector of this warp (finite: the ring starts zeroed), whose products with the zero-staged
  // activations past K, or with a tile that is not stored, vanish.
  // kArith: the scale bytes of rows g / g + 8 of the block being requested (next block), and of
  // the block being computed.
  [[maybe_unused]] uint4 nb0 = make_uint4(0, 0, 0, 0), nb1 = nb0, cb0 = nb0, cb1 = nb0;
  auto issue = [&](Slot& s, int j) {
    if (j < nvalid) {
      s.w = ldg_stream(wp + j * 512);
      if constexpr (kF8) {
      } else if constexpr (kArith) {
        if (j == 0) {
          nb0 = __ldg(reinterpret_cast<const uint4*>(sp));
          nb1 = __ldg(reinterpret_cast<const uint4*>(sp8));
        }
      } else if constexpr (kNv) {
        s.s0 = __ldg(sp + j * kSb);
        s.s1 = __ldg(sp8 + j * kSb);
      } else {
        s.s0 = __ldg(reinterpret_cast<const uint16_t*>(sp + j * kSb));
        s.s1 = __ldg(reinterpret_cast<const uint16_t*>(sp8 + j * kSb));
      }
    }
  };
  auto advance = [&]() {
    wp += kDepth * 512;
    if constexpr (!kF8) {
      sp += kDepth * kSb;
      sp8 += kDepth * kSb;
    }
    iv += kDepth;
    if (iv == vp) {
      iv = 0;
      igrp += gridDim.x;
      set_group();
    } else {
      nvalid = nvalid > 0 ? static_cast<int>(min(lim - iv, int64_t{kDepth})) : 0;
    }
  };

  Slot ring[kDepth];
#pragma unroll
  for (int j = 0; j < kDepth; ++j) {
    ring[j].w = make_uint4(0, 0, 0, 0);
    ring[j].s0 = ring[j].s1 = 0;
    issue(ring[j], j);
  }
  advance();

  if constexpr (kNv) {
    if (threadIdx.x < 128)
      lut[threadIdx.x] = nvfp4_scale_splat<T>(static_cast<uint8_t>(threadIdx.x));
  } else if constexpr (!kF8) {
    lut[threadIdx.x] = e8m0_bf16_splat(threadIdx.x);
  }
  griddep_wait();  // the activations (and alpha) belong to earlier kernels

  // Stage the activations of the whole (padded) K in lane order; zeros past K. Each thread's
  // loads go out in batches of kBatch 16-byte chunks before any store, so the staging costs one
  // L2 round trip per batch (K <= 16384: one; 8192 with the 3-CTA cap), not one per chunk.
  const int ks = kParts * vp * kKv;  // staged activations (K values)
  uint8_t* const xs = dsm;
  {
    constexpr int kBatch = kOcc == 3 ? 4 : 8;  // within the 3-CTA register cap
    constexpr int kT = kStreamWarps * 32;
    constexpr int kC = 16 / kXb;  // activations per 16-byte chunk
    const uint8_t* x = static_cast<const uint8_t*>(p.x);
    const bool fast = p.x_vec16 && ks <= p.K;  // every chunk a whole aligned 16-byte load
    for (int c0 = threadIdx.x; c0 < ks / kC; c0 += kT * kBatch) {
      uint4 v[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int k = kC * (c0 + b * kT);
        v[b] = make_uint4(0, 0, 0, 0);
        if (k >= ks) continue;
        if (fast || (p.x_vec16 && k + kC <= p.K)) {
          v[b] = __ldg(reinterpret_cast<const uint4*>(x + k * kXb));
        } else {
          uint32_t pr[4] = {0, 0, 0, 0};
#pragma unroll
          for (int i = 0; i < kC; ++i) {
            if (k + i >= p.K) break;
            const uint32_t e = kF8 ? x[k + i] : reinterpret_cast<const uint16_t*>(x)[k + i];
            pr[i * kXb / 4] |= e << (8 * ((i * kXb) % 4));
          }
          v[b] = make_uint4(pr[0], pr[1], pr[2], pr[3]);
        }
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int k = kC * (c0 + b * kT);
        if (k >= ks) continue;
        if constexpr (kF16x) {
          // Lane t's 4 e4m3 of the chunk (k 4t..4t+3 of the atom's lo / hi 16) as FP16 at
          // element atom * 32 + t * 8 + hi * 4.
          uint2* const d = reinterpret_cast<uint2*>(xs + ((k & ~31) + ((k >> 4) & 1) * 4) * 2);
          const uint32_t w[4] = {v[b].x, v[b].y, v[b].z, v[b].w};
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            uint32_t lo, hi;
            e4m3x4_f16(w[q], lo, hi);
            d[2 * q] = make_uint2(lo, hi);
          }
          continue;
        }
        // The chunk's 4 words belong to lanes t = 0..3 of one (vector, step, lo / hi): BF16 at
        // stream_xpos (lane blocks of 32 bytes), e4m3 at atom * 32 + t * 8 + hi * 4.
        uint32_t* const d = reinterpret_cast<uint32_t*>(
            xs + (kF8 ? (k & ~31) + ((k >> 4) & 1) * 4 : stream_xpos(k) * 2));
        constexpr int kS = kF8 ? 2 : 8;  // words between the lanes t
        d[0] = v[b].x;
        d[kS] = v[b].y;
        d[2 * kS] = v[b].z;
        d[3 * kS] = v[b].w;
      }
    }
  }
  __syncthreads();

  float mult = p.out_mult;
  if (p.alpha != nullptr) mult *= *p.alpha;

  const uint8_t* const xlane = xs + (kF8 ? (vbase * 32 + t * 8) * kSb2 : (vbase * 64 + t * 16) * 2);
  int rb = 0;  // reduction buffer
  for (int64_t grp = blockIdx.x; grp < groups; grp += gridDim.x) {
    float acc[4][4];
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[s][i] = 0.f;
    const uint8_t* xv = xlane;
    // FP8: the block's partial sums (two chains), started from zero and added to acc after each
    // block of kDepth atoms: Hopper's FP8 MMAs accumulate with reduced precision inside the
    // tensor core, so partials are promoted to fp32 at least every 128 K (4 atoms per chain).
    static_assert(!kF8 || kDepth <= 8, "FP8 promotion every 128 K per chain");
    [[maybe_unused]] float tmp[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    for (int v0 = 0; v0 < vp; v0 += kDepth) {
      if constexpr (kArith) {
        cb0 = nb0;
        cb1 = nb1;
      }
#pragma unroll
      for (int j = 0; j < kDepth; ++j) {
        const Slot cur = ring[j];
        issue(ring[j], j);
        if constexpr (kF16x) {
          // Lane t's FP16 activations: lo 4 (first MMA's slots), hi 4 (second MMA's).
          const uint4 xw = *reinterpret_cast<const uint4*>(xv);
          xv += 64;
          uint32_t a0[4], a1[4];  // [row g lo, row g+8 lo, row g hi, row g+8 hi] k pairs
          e4m3x4_f16(cur.w.x, a0[0], a0[2]);
          e4m3x4_f16(cur.w.y, a0[1], a0[3]);
          e4m3x4_f16(cur.w.z, a1[0], a1[2]);
          e4m3x4_f16(cur.w.w, a1[1], a1[3]);
          mma16816<Fp16Tag>(acc[(2 * j) & 3], a0, xw.x, xw.y);
          mma16816<Fp16Tag>(acc[(2 * j + 1) & 3], a1, xw.z, xw.w);
          continue;
        }
        if constexpr (kF8) {
          // Undecoded e4m3 A fragment; partial sums promoted every block (<= 128 K per chain).
          const uint2 xw = *reinterpret_cast<const uint2*>(xv);
          xv += 32;
          const uint32_t a[4] = {cur.w.x, cur.w.y, cur.w.z, cur.w.w};
          mma16832_e4m3(tmp[j & 1], a, xw.x, xw.y);
          continue;
        }
        const uint4 xa = *reinterpret_cast<const uint4*>(xv);
        const uint4 xb = *reinterpret_cast<const uint4*>(xv + 16);
        xv += 128;
        if constexpr (kNoMath) {
          acc[j & 3][0] += __uint_as_float(
              (cur.w.x ^ cur.w.y ^ cur.w.z ^ cur.w.w ^ cur.s0 ^ cur.s1 ^ xa.x ^ xb.y) & 0x3FFFFFu);
          continue;
        }
        uint32_t af[2][2][4];  // [atom][step][reg]
        if constexpr (kArith) {
          const uint32_t wg = j == 0 ? cb0.x : j == 1 ? cb0.y : j == 2 ? cb0.z : cb0.w;
          const uint32_t wg8 = j == 0 ? cb1.x : j == 1 ? cb1.y : j == 2 ? cb1.z : cb1.w;
          // (row g, row g + 8) scale * 2^119 of each k16 step, as BF16 pairs: the decode's
          // multiplies take a half of it (ptxas folds __low2bfloat162 / __high2bfloat162 into
          // the HMUL2's .H0_H0 / .H1_H1 operand: no splat instructions).
          __nv_bfloat162 sv[4];
#pragma unroll
          for (int s = 0; s < 4; ++s) {
            // (code of row g, code of row g + 8) of step s in the low bytes of the two halves.
            const uint32_t pr = prmt(wg, wg8, s | (s << 4) | ((4 + s) << 8) | ((4 + s) << 12));
            const uint32_t bits = (pr << 4) & 0x07F007F0u;
            const uint32_t v = fma2<T>(fma2<T>(bits, 0x7B807B80u /* 2^120 */, kNegZero2<T>()),
                                       kFp4Unit2<T>() /* 2^119 */, kNegZero2<T>());
            sv[s] = *reinterpret_cast<const __nv_bfloat162*>(&v);
          }
#pragma unroll
          for (int a = 0; a < 2; ++a)
#pragma unroll
            for (int s = 0; s < 2; ++s) {
              uint32_t bits[4];
              fp4_word_pairs<T>(s ? (a ? cur.w.w : cur.w.y) : (a ? cur.w.z : cur.w.x), bits);
#pragma unroll
              for (int r = 0; r < 4; ++r) {
                const __nv_bfloat162 m = __hmul2(
                    *reinterpret_cast<const __nv_bfloat162*>(&bits[r]),
                    (r & 1) ? __high2bfloat162(sv[2 * a + s]) : __low2bfloat162(sv[2 * a + s]));
                af[a][s][r] = *reinterpret_cast<const uint32_t*>(&m);
              }
            }
        } else if constexpr (kNv) {
          spl[j & 1][warp][t][g] = make_uint2(lut[cur.s0 & 0x7Fu], lut[cur.s1 & 0x7Fu]);
          __syncwarp();
          uint2 sc4[4];
#pragma unroll
          for (int s = 0; s < 4; ++s) sc4[s] = spl[j & 1][warp][s][g];
#pragma unroll
          for (int a = 0; a < 2; ++a) {
            const uint32_t w[2] = {a ? cur.w.z : cur.w.x, a ? cur.w.w : cur.w.y};
            const uint32_t sc[2][2] = {{sc4[2 * a].x, sc4[2 * a].y},
                                       {sc4[2 * a + 1].x, sc4[2 * a + 1].y}};
            decode_fp4_atom<T>(w, sc, af[a]);
          }
        } else {
          // E8M0 of atoms 0 / 1 (bytes 0 / 1) of rows g / g + 8, folded after the unit decode
          // (exact whenever the product is a BF16 number, as in the decode kernel).
          const uint32_t e[2][2] = {{lut[cur.s0 & 0xFFu], lut[cur.s1 & 0xFFu]},
                                    {lut[(cur.s0 >> 8) & 0xFFu], lut[(cur.s1 >> 8) & 0xFFu]}};
          const uint32_t unit[2][2] = {{kFp4Unit2<T>(), kFp4Unit2<T>()},
                                       {kFp4Unit2<T>(), kFp4Unit2<T>()}};
#pragma unroll
          for (int a = 0; a < 2; ++a) {
            const uint32_t w[2] = {a ? cur.w.z : cur.w.x, a ? cur.w.w : cur.w.y};
            decode_fp4_atom<T>(w, unit, af[a]);
#pragma unroll
            for (int s = 0; s < 2; ++s)
#pragma unroll
              for (int r = 0; r < 4; ++r)
                af[a][s][r] = fma2<T>(af[a][s][r], e[a][r & 1], kNegZero2<T>());
          }
        }
        mma16816<T>(acc[0], af[0][0], xa.x, xa.y);
        mma16816<T>(acc[1], af[0][1], xa.z, xa.w);
        mma16816<T>(acc[2], af[1][0], xb.x, xb.y);
        mma16816<T>(acc[3], af[1][1], xb.z, xb.w);
      }
      if constexpr (kF8 && !kF16x) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          acc[0][i] += tmp[0][i] + tmp[1][i];
          tmp[0][i] = tmp[1][i] = 0.f;
        }
      }
      advance();
    }
    // Every column holds the row sums: c0 = row g, c2 = row g + 8.
    float r0 = (acc[0][0] + acc[1][0]) + (acc[2][0] + acc[3][0]);
    float r1 = (acc[0][2] + acc[1][2]) + (acc[2][2] + acc[3][2]);
    if constexpr (kParts > 1) {
      if (t == 0) {
        red[rb][warp][g] = r0;
        red[rb][warp][g + 8] = r1;
      }
      // One barrier per group: the next group writes the other buffer, and the group after it
      // writes this one only after every reader here has passed the next group's barrier.
      __syncthreads();
      if (wk == 0) {
        r0 = r1 = 0.f;
#pragma unroll
        for (int k = 0; k < kParts; ++k) {
          r0 += red[rb][wt + k * kTiles][g];
          r1 += red[rb][wt + k * kTiles][g + 8];
        }
      }
      rb ^= 1;
    }
    const int64_t tile = grp * kTiles + wt;
    if (wk == 0 && t < 2 && tile < p.n16) {
      const int64_t row = tile * 16 + g + 8 * t;
      if (row < p.N) store_out_elem(p, 0, row, t ? r1 : r0, mult);
    }
  }
  griddep_launch_dependents();
}

}  // namespace b12x::gemm::lin
