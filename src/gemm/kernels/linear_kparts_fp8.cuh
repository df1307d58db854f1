// M <= 16 K-parts kernel for per-tensor FP8 weights on SM90 (session 19 probe, Plan::f8_kparts).
//
// The block kernel (linear_stream16_fp8.cuh) puts 8 warps x tw tiles of a CTA on one K range and
// splits K over gridDim.y CTAs, whose fp32 partials a second launch (linear_reduce_kernel) sums:
// at 4096x4096 M = 16 each warp streams 16 atoms of one tile and the reduce launch follows. Here a
// CTA is one 16-row tile and its kW warps split the whole K into contiguous parts (kW x the warps
// of the grid on the same weight stream, as the decode kernel's M = 1 grid does), so no partials
// leave the CTA: the kW accumulators are summed through shared memory and stored once. Each warp
// stages only its own K part of the 16 token rows (e4m3, cp.async in groups of 4 atoms, waited
// for by the warp alone: no CTA barrier before the epilogue), reads its B fragments by
// ldmatrix from them and converts both operands to f16 in registers (the decode kernel's kF16
// order: MMA h takes half h of every e4m3 register), weights in a register ring of kDepth atoms
// requested before griddep_wait. Rows past M and K past p.K are staged as zeros.
#pragma once

#include "gemm/kernels/linear_stream.cuh"

namespace b12x::gemm::lin {

/// A warp's staged rows: 16 tokens x its atoms (32 bytes each), the pitch a multiple of 128 plus
/// 16 so that ldmatrix's 8 rows of 16 bytes fall in 8 distinct bank groups.
__host__ __device__ constexpr int kparts_pitch(int atoms) {
  return (atoms * 32 + 127) / 128 * 128 + 16;
}
/// Dynamic shared memory: kW warps' staging plus the accumulators' reduction [kW][8][32] fp32.
__host__ __device__ constexpr int64_t kparts_smem_bytes(int warps, int atoms) {
  return int64_t{warps} * 16 * kparts_pitch(atoms) + int64_t{warps} * 8 * 32 * 4;
}

/// cp.async.wait_group with a run-time count (at most 7 groups left pending: waiting for more
/// than needed is safe).
__device__ __forceinline__ void kparts_wait_groups(int pending) {
  switch (pending <= 0 ? 0 : pending >= 7 ? 7 : pending) {
    case 0:
      asm volatile("cp.async.wait_group 0;" ::: "memory");
      break;
    case 1:
      asm volatile("cp.async.wait_group 1;" ::: "memory");
      break;
    case 2:
      asm volatile("cp.async.wait_group 2;" ::: "memory");
      break;
    case 3:
      asm volatile("cp.async.wait_group 3;" ::: "memory");
      break;
    case 4:
      asm volatile("cp.async.wait_group 4;" ::: "memory");
      break;
    case 5:
      asm volatile("cp.async.wait_group 5;" ::: "memory");
      break;
    case 6:
      asm volatile("cp.async.wait_group 6;" ::: "memory");
      break;
    default:
      asm volatile("cp.async.wait_group 7;" ::: "memory");
      break;
  }
}

/// kW warps per CTA (= per tile), kNt n8 token tiles (1 at M <= 8), kDepth ring atoms per warp.
/// p.stream_vp: atoms per warp (the K part); grid = n16 CTAs.
template <int kW, int kNt, int kDepth, int kMinCtas>
__global__ void __launch_bounds__(kW * 32, kMinCtas)
    linear_kparts_fp8_kernel(const LinearParams p) {
  static_assert(kNt == 1 || kNt == 2, "n8 token tiles");
  static_assert(kDepth == 4 || kDepth == 8 || kDepth == 16, "ring depth");
  constexpr int kBody = kDepth > 8 ? kDepth : 8;  // atoms per unrolled body: a multiple of kDepth
  extern __shared__ __align__(16) uint8_t dsm[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int64_t tile = blockIdx.x;
  const int per = p.stream_vp;
  const int pitch = kparts_pitch(per);
  const int64_t v0 = static_cast<int64_t>(warp) * per;  // the warp's first atom
  const int64_t vrem = p.kvec - v0;
  const int cnt = vrem <= 0 ? 0 : vrem < per ? static_cast<int>(vrem) : per;
  const uint8_t* const wp = p.wvals + (tile * p.kvec + v0) * 512 + lane * 16;
  uint4 ring[kDepth];
#pragma unroll
  for (int q = 0; q < kDepth; ++q) {
    ring[q] = make_uint4(0, 0, 0, 0);
    if (q < cnt) ring[q] = ldg_stream(wp + q * 512);
  }
  griddep_wait();  // the activations (and alpha) belong to earlier kernels

  // Stage the warp's part in groups of 4 atoms (16 rows x 128 bytes: 4 pieces of 16 bytes per
  // lane, rows lane / 8 + 4r), one commit group each.
  uint8_t* const xs = dsm + warp * 16 * pitch;
  const uint8_t* const x = static_cast<const uint8_t*>(p.x);
  const int groups = (cnt + 3) / 4;
  for (int gi = 0; gi < groups; ++gi) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int tok = (lane >> 3) + 4 * r;
      const int col = gi * 128 + (lane & 7) * 16;
      const int64_t k = v0 * 32 + col;
      uint8_t* const d = xs + tok * pitch + col;
      if (tok < p.M && p.x_vec16 && k + 16 <= p.K) {
        s16_cp_async16(d, x + tok * p.ldx_bytes + k);
      } else {
        uint32_t w[4] = {0, 0, 0, 0};
        if (tok < p.M) {
          const uint8_t* const xr = x + tok * p.ldx_bytes + k;
#pragma unroll
          for (int e = 0; e < 16; ++e) {
            if (k + e >= p.K) break;
            w[e / 4] |= static_cast<uint32_t>(xr[e]) << (8 * (e % 4));
          }
        }
        *reinterpret_cast<uint4*>(d) = make_uint4(w[0], w[1], w[2], w[3]);
      }
    }
    asm volatile("cp.async.commit_group;");
  }

  float acc[kNt][4];
#pragma unroll
  for (int n = 0; n < kNt; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[n][i] = 0.f;
  // ldmatrix rows (the block kernel's raw e4m3 order): matrices (tokens 0-7, k 0-15), (0-7,
  // 16-31), (8-15, 0-15), (8-15, 16-31) = the e4m3 B fragments (b0, b1) of token tiles 0 and 1.
  const int xrow = ((lane >> 4) & 1) * 8 + (lane & 7), xcol = ((lane >> 3) & 1) * 16;
  const uint8_t* const xa = xs + xrow * pitch + xcol;
  for (int s0 = 0; s0 < cnt; s0 += kBody) {
#pragma unroll
    for (int a = 0; a < kBody; ++a) {
      const int s = s0 + a;
      if (s >= cnt) break;
      if (a % 4 == 0) {
        // Group s / 4 has landed (this lane's copies), then every lane's (the warp's barrier).
        kparts_wait_groups(groups - 1 - s / 4);
        __syncwarp();
      }
      uint32_t be[4];
      if constexpr (kNt == 2)
        ldmatrix_x4(be, xa + s * 32);
      else
        ldmatrix_x2(be, xa + s * 32);
      const uint4 cur = ring[a % kDepth];
      if (s + kDepth < cnt)
        ring[a % kDepth] = ldg_stream(wp + static_cast<int64_t>(s + kDepth) * 512);
      const uint32_t af[4] = {cur.x, cur.y, cur.z, cur.w};
      uint32_t ah[2][4];
#pragma unroll
      for (int i = 0; i < 4; ++i) e4m3x2x2_to_f16x2(af[i], ah[0][i], ah[1][i]);
#pragma unroll
      for (int n = 0; n < kNt; ++n) {
        uint32_t bh[2][2];
        e4m3x2x2_to_f16x2(be[2 * n], bh[0][0], bh[1][0]);
        e4m3x2x2_to_f16x2(be[2 * n + 1], bh[0][1], bh[1][1]);
#pragma unroll
        for (int h = 0; h < 2; ++h) mma16816<Fp16Tag>(acc[n], ah[h], bh[h][0], bh[h][1]);
      }
    }
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");

  // The kW parts' sums in warp order (deterministic), stored by warp 0.
  float* const red = reinterpret_cast<float*>(dsm + int64_t{kW} * 16 * pitch);
#pragma unroll
  for (int n = 0; n < kNt; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) red[(warp * 8 + n * 4 + i) * 32 + lane] = acc[n][i];
  __syncthreads();
  if (warp == 0) {
    float o[kNt][4];
#pragma unroll
    for (int n = 0; n < kNt; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float v = 0.f;
        for (int w = 0; w < kW; ++w) v += red[(w * 8 + n * 4 + i) * 32 + lane];
        o[n][i] = v;
      }
    float mult = p.out_mult;
    if (p.alpha != nullptr) mult *= *p.alpha;
    if (tile < p.n16) stream_store_tile<kNt>(p, o, tile, 0, mult, g, t);
  }
  griddep_launch_dependents();
}

}  // namespace b12x::gemm::lin
