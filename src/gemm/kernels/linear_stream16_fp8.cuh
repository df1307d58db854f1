// M = 5..16 block kernel for the FP8 weight formats (session 14, Plan::stream16_tw with an FP8
// weight): per-tensor FP8, 128x128 block FP8 and MXFP8 weights on e4m3 activations.
//
// The structure of the FP4 block kernel (linear_stream.cuh, linear_stream16_kernel; gemm.md
// "Session 13 ... the M <= 16 block kernel"): a CTA of 8 warps x kTw 16-row tiles over one K range
// of p.stream_vp vectors, so the activations it reads from L2 (16 tokens x its K range, one byte
// each) are 1 / (16 kTw) of the weight bytes it streams; K split over gridDim.y CTAs through fp32
// partials + linear_reduce_kernel; weights in a per-warp register ring (ld.global.nc
// L1::no_allocate) requested before griddepcontrol.wait; activations in chunks of 256 K (8 FP8
// atoms), three cp.async slots two chunks ahead, one CTA barrier per chunk. An FP8 vector is one
// atom (16 rows x 32 K, the e4m3 m16n8k32 A fragment, 16 bytes per lane).
//
// MMAs (kMma): 0 e4m3 mma.sync m16n8k32 (SM89 / SM12x; partials promoted to fp32 per 128 K as
// the decode kernel does), 1 f16 m16n8k16 (SM90, which has no e4m3 mma.sync and whose ptxas
// lowering of it adds 4 FADDs per MMA, session 13): the weight fragment is converted with
// cvt.rn.f16x2.e4m3x2 in the K order ptxas uses (MMA h takes half h of every register: k 4t + 2h,
// + 1 and 16 + 4t + 2h, + 1), the activations once per CTA while the chunk before is computed
// (the 8 warps would each convert the same B fragments: 8 of every 24 conversions per atom), into
// f16 rows in that permuted order so that one ldmatrix.x4 per (atom, h) gives both token tiles'
// B fragments. Every e4m3 value is an f16 value, the products are exact and the HMMAs accumulate
// in fp32.
//
// Scales (kGroup): 0 per-tensor (output_scale through p.alpha in the epilogue), 128 block FP8
// (fp32 weight scale per 128 rows x 128 K, fp32 activation scale per token and 128 K: partial
// sums per group folded in fp32), 32 MXFP8 (E8M0 per row / token and 32 K, folded per atom, or on
// f16 MMAs by default folded into the operands per chunk: kF8VarFold below). The chunk's
// activation scales and the weight scales (block FP8: the CTA's kTw row blocks x 2 groups; MXFP8:
// 8 E8M0 bytes per row) are staged with the activations.
#pragma once

#include "gemm/kernels/linear_stream.cuh"
#include "gemm/kernels/quantize.cuh"
#include "gemm/linear_stream16_fp8.h"

namespace b12x::gemm::lin {

inline constexpr int kF8ChunkV = 8;  ///< FP8 atoms (32-K vectors) per staged chunk
inline constexpr int kF8Slots = 3;
/// Raw e4m3 rows of a chunk: 256 bytes + 16, so that ldmatrix's 8 rows of 16 bytes fall in 8
/// distinct bank groups (272 = 2 x 128 + 16).
inline constexpr int kF8RawPitch = kF8ChunkV * 32 + 16;
inline constexpr int kF8RawBytes = 16 * kF8RawPitch;
/// f16 rows of a chunk (kMma 1): 256 halves + 8 (528 = 4 x 128 + 16).
inline constexpr int kF8HalfPitch = (kF8ChunkV * 32 + 8) * 2;
inline constexpr int kF8HalfBytes = 16 * kF8HalfPitch;
/// Group scales of a chunk: activations [16 tokens][8 bytes] (2 fp32 per 128 K, or 8 E8M0), then
/// the block FP8 weight scales [kTw row blocks][2 groups] fp32.
inline constexpr int kF8ScaleBytes = 16 * 8 + 2 * 2 * 4;
/// BF16 rows of a chunk (kQ: quantized in the kernel), pitch as kF8HalfPitch.
inline constexpr int kF8BfBytes = kF8HalfBytes;
/// A slot: raw activations (not with kQ on f16 MMAs, whose quantization writes the f16 rows
/// directly), group scales, MXFP8 weight E8M0 bytes [rows][8] (kGroup 32), the f16 activations
/// (kMma 1), the BF16 activations (kQ).
template <int kMma, bool kQ>
inline constexpr int kF8RawSlotBytes = (kQ && kMma == 1) ? 0 : kF8RawBytes;
/// kVar bit 1 (MXFP8 on f16 MMAs, kF8VarFold; its default since session 16): both operands' E8M0
/// scales folded into the f16 operands relative to the chunk's largest scale of their row / token,
/// so that the MMAs of a whole chunk accumulate in one chain and the fp32 fold runs once per chunk
/// instead of per atom. A value e4m3 x 2^k is exact in f16 for k in [-15, 7] (448 x 2^7 < 65504;
/// e4m3's 2^-9 steps stay on f16's 2^-24 grid): with k = e - emax + 7 every atom within 22 binades
/// of the chunk's largest scale is exact; further below, the f16 rounding / flush costs < 2^-32 of
/// the largest element of that row or token in the chunk (far under the fp32 accumulation's
/// 2^-24). The activations are scaled once per CTA as they are converted to f16, the weights by
/// one HMUL2 per f16x2 register with per-(row, atom) splats [kTw tiles][8 atoms][8 g] (rows g,
/// g + 8) built once per CTA; the chunk factors 2^(emax - 134) per row ([tiles][8 g] float2) and
/// per token ([16]).
/// kVar bit 2 (MXFP8 with kQ, kF8VarQ8; with kF8VarFold its default since session 16): the
/// in-kernel quantization on all 8 warps (16 lanes per token, two 8-value pieces each, one E8M0
/// block per 4 lanes) instead of warps 0-3 (4 lanes per 128 K, four pieces each), which the other
/// warps waited for at the next chunk's barrier. The same codes and scales.
template <int kTw, int kGroup, int kVar>
inline constexpr int kF8FoldBytes = kGroup == 32 && (kVar & kF8VarFold)
                                        ? kStreamWarps* kTw*(512 + 64) + 16 * 4
                                        : 0;
template <int kTw, int kGroup, int kMma, bool kQ = false, int kVar = 0>
inline constexpr int kF8SlotBytes = kF8RawSlotBytes<kMma, kQ> + kF8ScaleBytes +
                                    (kGroup == 32 ? kStreamWarps * kTw * 16 * 8 : 0) +
                                    (kMma == 1 ? kF8HalfBytes : 0) +
                                    (kQ ? kF8BfBytes : 0) + kF8FoldBytes<kTw, kGroup, kVar>;
template <int kTw, int kGroup, int kMma, bool kQ = false, int kVar = 0>
inline constexpr int kF8SmemBytes = kF8Slots* kF8SlotBytes<kTw, kGroup, kMma, kQ, kVar>;

/// 2^k as an f16x2 splat: exact for k in [-24, 15], 0 below.
__device__ __forceinline__ uint32_t pow2_h2(int k) {
  const uint32_t h = k >= -14   ? static_cast<uint32_t>(k + 15) << 10
                     : k >= -24 ? 1u << (k + 24)
                                : 0u;
  return h | (h << 16);
}
/// E8M0 code a of a chunk's 8 (a row's or a token's 8 bytes), 0 for atoms past K (ain inside),
/// and the largest of them.
__device__ __forceinline__ int e8m0_in(uint2 eb, int a, int ain) {
  return a < ain ? ((a < 4 ? eb.x : eb.y) >> (8 * (a & 3))) & 0xFF : 0;
}
__device__ __forceinline__ int e8m0_chunk_max(uint2 eb, int ain) {
  int m = 0;
#pragma unroll
  for (int a = 0; a < kF8ChunkV; ++a) m = max(m, e8m0_in(eb, a, ain));
  return m;
}
/// kF8VarCheap: pow2_h2 by one conversion, the same bits for k <= 15 (2^k for k >= -24; 2^-25
/// rounds to even, 0, and below, as pow2_h2's 0).
__device__ __forceinline__ uint32_t pow2_h2_cvt(int k) {
  const float f = __uint_as_float(static_cast<uint32_t>(max(k + 127, 1)) << 23);
  uint32_t h;
  asm("cvt.rn.f16x2.f32 %0, %1, %1;" : "=r"(h) : "f"(f));
  return h;
}
/// kF8VarCheap: a chunk's 8 E8M0 bytes with the atoms past K (a >= ain) zeroed, their largest
/// (byte-wise maxima) and byte a: e8m0_in / e8m0_chunk_max without a compare per atom.
__device__ __forceinline__ uint2 e8m0_masked(uint2 eb, int ain) {
  const uint64_t m = ain >= kF8ChunkV ? ~uint64_t{0} : (uint64_t{1} << (8 * ain)) - 1;
  return make_uint2(eb.x & static_cast<uint32_t>(m), eb.y & static_cast<uint32_t>(m >> 32));
}
__device__ __forceinline__ int e8m0_max8(uint2 em) {
  uint32_t m = __vmaxu4(em.x, em.y);
  m = __vmaxu4(m, m >> 16);
  return static_cast<int>(__vmaxu4(m, m >> 8) & 0xFFu);
}
__device__ __forceinline__ int e8m0_byte(uint2 em, int a) {
  return static_cast<int>(((a < 4 ? em.x : em.y) >> (8 * (a & 3))) & 0xFFu);
}
/// kF8VarFold's chunk factor 2^(emax - 127 - 7) (fp32 subnormals included; E8M0 255 is NaN).
__device__ __forceinline__ float chunk_factor(int emax) {
  const int k = emax - 134;
  return emax == 255 ? __uint_as_float(0x7FC00000u)
         : k >= -126 ? __uint_as_float(static_cast<uint32_t>(k + 127) << 23)
                     : __uint_as_float(1u << (k + 149));
}
__device__ __forceinline__ uint32_t hmul2_bits(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

/// 4-byte cp.async (8 with kEight), or a plain copy where the source is not aligned.
template <bool kEight>
__device__ __forceinline__ void f8s_cp_small(void* smem, const uint8_t* gmem) {
  constexpr int kB = kEight ? 8 : 4;
  if ((reinterpret_cast<uintptr_t>(gmem) & (kB - 1)) == 0) {
    const uint32_t sa = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(sa), "l"(gmem), "n"(kB));
  } else {
#pragma unroll
    for (int e = 0; e < kB; ++e) static_cast<uint8_t*>(smem)[e] = gmem[e];
  }
}

/// kTw tiles per warp, kNt n8 token tiles (1 at M <= 8), kGroup 0 / 128 / 32 (per-tensor / block
/// FP8 / MXFP8), kMma 0 e4m3 / 1 f16, kDepth ring vectors per warp. kQ (block FP8 / MXFP8,
/// p.act_kind kActBf16Quant): BF16 activations staged by cp.async and quantized per CTA one chunk
/// ahead with the activation quantizer's numerics (kernels::g128_codes / mx8_codes: the codes and
/// scales the quantizer launch would give), instead of that launch before the GEMM.
/// kOcc: CTAs per SM the registers are capped for (2: <= 128; 3: <= 80, probe). kVar: kF8Var*.
template <int kTw, int kNt, int kGroup, int kMma, int kDepth, bool kQ = false, int kOcc = 2,
          int kVar = 0>
__global__ void __launch_bounds__(kStreamWarps * 32, kOcc)
    linear_stream16_fp8_kernel(const LinearParams p) {
  static_assert(kTw == 1 || kTw == 2, "tiles per warp");
  static_assert(kNt == 1 || kNt == 2, "n8 token tiles");
  static_assert(kGroup == 0 || kGroup == 32 || kGroup == 128, "scale group");
  static_assert(kMma == 0 || kMma == 1, "MMA kind");
  static_assert((kF8ChunkV * kTw) % kDepth == 0 && kDepth % kTw == 0, "ring order");
  static_assert(!kQ || kGroup > 0, "in-kernel quantization: block FP8 / MXFP8");
  constexpr int kAhead = kDepth / kTw;  // vectors of a tile in flight beyond the current one
  constexpr bool kFold2 = kGroup == 32 && (kVar & kF8VarFold);
  constexpr bool kQ8 = kQ && (kVar & kF8VarQ8);
  constexpr bool kQ32 = kQ8 && kNt == 1 && (kVar & kF8VarQ32);
  constexpr bool kLate = (kVar & kF8VarLate) != 0 && kNt == 1;
  constexpr bool kCheap = kFold2 && (kVar & kF8VarCheap);
  // kEarly (MXFP8's default since session 27): the weight scales of chunks 0 and 1 staged before
  // griddep_wait (they belong to no earlier kernel), and with kFold2 chunk 0's splats built there
  // too, so that where the previous launch triggers its dependents early (the cluster sum's
  // trigger before the sum) the scales' DRAM round trip and the splat build overlap it instead of
  // following the wait (round 101: -1.0..-1.4 us at 14336x4096, cl4).
  constexpr bool kEarly = (kVar & kF8VarEarly) != 0 && kGroup > 0;
  // kEarly2 (with kEarly, MXFP8's default since round 102): chunk 1's splats before the wait too.
  constexpr bool kEarly2 = kEarly && kFold2 && (kVar & kF8VarEarly2) != 0;
  auto pow2s = [](int k) { return kCheap ? pow2_h2_cvt(k) : pow2_h2(k); };
  static_assert(!kQ8 || kGroup == 32, "quantization on 8 warps: MXFP8");
  static_assert(!kFold2 || kMma == 1, "operand-folded MXFP8 scales: f16 MMAs");
  constexpr int kSlot = kF8SlotBytes<kTw, kGroup, kMma, kQ, kVar>;
  constexpr int kScaleOff = kF8RawSlotBytes<kMma, kQ>;
  constexpr int kWmxOff = kScaleOff + kF8ScaleBytes;
  constexpr int kHalfOff = kWmxOff + (kGroup == 32 ? kStreamWarps * kTw * 16 * 8 : 0);
  constexpr int kBfOff = kHalfOff + (kMma == 1 ? kF8HalfBytes : 0);
  constexpr int kSplatOff = kBfOff + (kQ ? kF8BfBytes : 0);       // kFold2: weight splats
  constexpr int kWfacOff = kSplatOff + kStreamWarps * kTw * 512;  // kFold2: row factors
  constexpr int kXfacOff = kWfacOff + kStreamWarps * kTw * 64;
  // Atoms per fp32 fold: the scale group, or per 128 K for e4m3 MMAs without scales (Hopper's
  // FP8 tensor cores may accumulate with reduced precision), none for f16 MMAs without scales.
  constexpr int kFoldAtoms = kFold2 ? kF8ChunkV : kGroup ? kGroup / 32 : kMma == 0 ? 4 : 0;
  extern __shared__ __align__(16) uint8_t dsm[];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const S16Range<kTw> cr = s16_range<kTw, kF8ChunkV>(p, warp, lane);
  const int64_t vbase = cr.vbase, row0 = cr.row0, tile0 = cr.tile0;
  const int tpc = cr.tpc, nch = cr.nch;
  const uint8_t* const(&wp)[kTw] = cr.wp;
  const int(&lim)[kTw] = cr.lim;
  uint4 ring[kDepth];
  s16_ring_fill(ring, cr);

  // The weight scales of chunk c (no commit): block FP8 the CTA's row blocks x 2 groups (fp32),
  // MXFP8 8 E8M0 bytes per row of the CTA (zero past the CTA / K).
  auto stage_w = [&](int c) {
    if (c >= nch) return;
    uint8_t* const slot = dsm + (c % kF8Slots) * kSlot;
    const int64_t v0 = vbase + static_cast<int64_t>(c) * kF8ChunkV;
    if constexpr (kGroup == 128) {
      const int i = threadIdx.x;
      if (i >= 32 && i < 32 + 2 * kTw) {
        const int rb = (i - 32) >> 1, gi = (i - 32) & 1;
        const int64_t grp = v0 * 32 / 128 + gi;
        const int64_t rblk = row0 / 128 + rb;
        uint8_t* const d = slot + kScaleOff + 128 + (rb * 2 + gi) * 4;
        if (rblk * 128 < p.n16 * 16 && grp < p.scale_ld)
          f8s_cp_small<false>(d, p.wscale + (rblk * p.scale_ld + grp) * 4);
        else
          *reinterpret_cast<float*>(d) = 0.f;
      }
    } else if constexpr (kGroup == 32) {
#pragma unroll
      for (int i0 = 0; i0 < kStreamWarps * kTw * 16; i0 += kStreamWarps * 32) {
        const int r = i0 + threadIdx.x;
        if (kStreamWarps * kTw * 16 < kStreamWarps * 32 && r >= kStreamWarps * kTw * 16) break;
        const int64_t row = r < tpc * 16 ? row0 + r : p.n16 * 16;  // past the CTA: zeros
        uint8_t* const d = slot + kWmxOff + r * 8;
        // scale_ld (KP / 32) and v0 are multiples of 8: aligned 8-byte rows.
        if (row < p.n16 * 16 && v0 < p.kvec)
          f8s_cp_small<true>(d, p.wscale + row * p.scale_ld + v0);
        else
          *reinterpret_cast<uint2*>(d) = make_uint2(0, 0);
      }
    }
  };
  // Atoms of chunk c inside K (0..8).
  auto atoms_in = [&](int c) {
    const int64_t arem = (p.K + 31) / 32 - (vbase + static_cast<int64_t>(c) * kF8ChunkV);
    return arem <= 0 ? 0 : arem < kF8ChunkV ? static_cast<int>(arem) : kF8ChunkV;
  };
  // kFold2: per weight row of chunk c its largest E8M0 over the chunk's atoms inside K, the splats
  // 2^(e - emax + 7) per atom and the chunk factor.
  auto splats = [&](int c) {
    if constexpr (kFold2) {
      const int ain = atoms_in(c);
      uint8_t* const slot = dsm + (c % kF8Slots) * kSlot;
#pragma unroll
      for (int r0 = 0; r0 < kStreamWarps * kTw * 16; r0 += kStreamWarps * 32) {
        const int r = r0 + threadIdx.x;
        if (kStreamWarps * kTw * 16 < kStreamWarps * 32 && r >= kStreamWarps * kTw * 16) break;
        const uint2 eb = *reinterpret_cast<const uint2*>(slot + kWmxOff + r * 8);
        const uint2 em = kCheap ? e8m0_masked(eb, ain) : eb;
        const int emax = kCheap ? e8m0_max8(em) : e8m0_chunk_max(eb, ain);
        const int wt = r >> 4, gg = r & 7, hi = (r >> 3) & 1;
        uint32_t* const sp = reinterpret_cast<uint32_t*>(slot + kSplatOff);
#pragma unroll
        for (int a = 0; a < kF8ChunkV; ++a)
          sp[((wt * kF8ChunkV + a) * 8 + gg) * 2 + hi] =
              pow2s((kCheap ? e8m0_byte(em, a) : e8m0_in(eb, a, ain)) - emax + 7);
        reinterpret_cast<float*>(slot + kWfacOff)[(wt * 8 + gg) * 2 + hi] = chunk_factor(emax);
      }
    }
  };
  if constexpr (kEarly) {
    stage_w(0);
    stage_w(1);
    asm volatile("cp.async.commit_group;");
    if constexpr (kFold2) {
      asm volatile("cp.async.wait_group 0;" ::: "memory");
      __syncthreads();
      splats(0);
      if (kEarly2 && nch > 1) splats(1);
    }
  }
  griddep_wait();  // the activations, their scales (and alpha) belong to earlier kernels

  // Chunk c -> slot c % 3: 16 token rows x 256 e4m3 (zero past M / K) and the chunk's scales.
  // Always one commit group, so wait_group 1 at chunk c means chunk c has landed (kEarly: its
  // weight scales of chunks 0 / 1 are one group before them).
  const uint8_t* const x = static_cast<const uint8_t*>(p.x);
  auto stage = [&](int c) {
    if (c < nch) {
      uint8_t* const slot = dsm + (c % kF8Slots) * kSlot;
      const int64_t v0 = vbase + static_cast<int64_t>(c) * kF8ChunkV;
      const int64_t kc = v0 * 32;
      if constexpr (kQ) {
        // 16 token rows x 256 BF16: 512 pieces of 8 values (token P / 32, k 8 (P % 32)).
        const uint16_t* const xb = static_cast<const uint16_t*>(p.x);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int pc = threadIdx.x + r * kStreamWarps * 32;
          const int tok = pc >> 5, kk = (pc & 31) * 8;
          const int64_t k = kc + kk;
          uint8_t* const d = slot + kBfOff + tok * kF8HalfPitch + kk * 2;
          if (tok < p.M && p.x_vec16 && k + 8 <= p.K) {
            s16_cp_async16(d, xb + tok * p.ldx + k);
          } else {
            uint32_t w[4] = {0, 0, 0, 0};
            if (tok < p.M) {
              const uint16_t* const xr = xb + tok * p.ldx + k;
#pragma unroll
              for (int e = 0; e < 8; ++e) {
                if (k + e >= p.K) break;
                w[e / 2] |= static_cast<uint32_t>(xr[e]) << (16 * (e % 2));
              }
            }
            *reinterpret_cast<uint4*>(d) = make_uint4(w[0], w[1], w[2], w[3]);
          }
        }
      } else {
        const int i = threadIdx.x;  // 256 pieces of 16 bytes: token i / 16, k 16 (i % 16)
        const int tok = i >> 4, kk = (i & 15) * 16;
        const int64_t k = kc + kk;
        uint8_t* const d = slot + tok * kF8RawPitch + kk;
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
      if constexpr (kGroup == 128) {
        // Activations: 2 fp32 per token (groups kc / 128, + 1; kQ: computed by convert).
        const int i = threadIdx.x;
        if (i < 32 && !kQ) {
          const int tok = i >> 1, gi = i & 1;
          const int64_t grp = kc / 128 + gi;
          uint8_t* const d = slot + kScaleOff + tok * 8 + gi * 4;
          if (tok < p.M && grp * 128 < p.K)
            f8s_cp_small<false>(
                d, reinterpret_cast<const uint8_t*>(p.xscale + tok * p.xscale_ld + grp));
          else
            *reinterpret_cast<float*>(d) = 0.f;
        }
      } else if constexpr (kGroup == 32) {
        // Activations: 8 E8M0 bytes per token (zero past M / K: 2^-127, finite).
        const int i = threadIdx.x;
        if (i < 16 && !kQ) {
          uint8_t* const d = slot + kScaleOff + i * 8;
          const int64_t grp = kc / 32;
          if (i < p.M && kc < p.K && grp + 8 <= p.xscale_ld) {
            f8s_cp_small<true>(d, p.xq_scale + i * p.xscale_ld + grp);
          } else {
            uint32_t w[2] = {0, 0};
            if (i < p.M)
              for (int e = 0; e < 8 && grp + e < p.xscale_ld; ++e)
                w[e / 4] |= static_cast<uint32_t>(p.xq_scale[i * p.xscale_ld + grp + e])
                            << (8 * (e % 4));
            *reinterpret_cast<uint2*>(d) = make_uint2(w[0], w[1]);
          }
        }
      }
      if (!kEarly || c >= 2) stage_w(c);
    }
    asm volatile("cp.async.commit_group;");
  };
  stage(0);
  stage(1);
  // kMma 1: chunk c's activations as f16 in the permuted K order of the f16 MMAs. Within an atom
  // (64 bytes of a row), byte 32h + 16i + 4t + 2e holds k = 16i + 4t + 2h + e: a raw 16-byte
  // piece (k 16i + 0..15 of one atom) converts into the lo halves (h = 0, 16 contiguous bytes) and
  // the hi halves (h = 1).
  // kQ: chunk c's BF16 rows quantized as the activation quantizer does, in units of 128 K of
  // one token row on 4 lanes (threads 0..127, warps 0-3 whole for the shuffles): lane part p
  // holds the unit's 8-value pieces p, p + 4, p + 8, p + 12 (quantize.cuh's lane order), so a
  // 1x128 group is one unit and an MXFP8 block one piece index over the unit's lanes. The codes go
  // straight to the MMA layout (e4m3 rows, or the f16 rows below), the scales to the chunk's
  // activation scales; rows past M are zeros.
  auto quantize = [&](int c) {
    if constexpr (kQ) {
      uint8_t* const slot = dsm + (c % kF8Slots) * kSlot;
      const int i = threadIdx.x;
      if (!kQ8 && i >= 128) return;
      // kQ8: warp w holds tokens 2w, 2w + 1 (kQ32: w); rows past M are never stored, so warps
      // wholly past M leave their f16 rows unwritten (an MMA's column depends on its own B column
      // only). Round 75, MXFP8 M = 1 / 4, us: 9.38 / 21.95 / 22.68 / 13.00 / 9.57 -> 9.21 / 20.59 /
      // 21.34 / 12.23 / 9.25 and 9.53 / 22.29 / 22.89 / 13.16 / 9.61 -> 9.43 / 21.01 / 21.64 /
      // 12.51 / 9.50.
      if constexpr (kQ8)
        if ((kQ32 ? i >> 5 : 2 * (i >> 5)) >= p.M) return;
      // kQ8: 16 lanes per token (warps whole for the shuffles), lane u holding k 8u + 128q of
      // piece q (q < 2); else 4 lanes per 128 K of a token (threads 0..127), lane part of half
      // chunk j holding k 128j + 32q + 8part (q < 4).
      // kQ32 (one token tile): a warp per token, lane u holding k 8u (one piece).
      constexpr int kQn = kQ32 ? 1 : kQ8 ? 2 : 4;
      const int tok = kQ32 ? i >> 5 : kQ8 ? i >> 4 : i >> 3, u = kQ32 ? i & 31 : i & 15;
      const int j = (i >> 2) & 1, part = i & 3;
      const bool valid = tok < p.M;
      const int64_t kc = (vbase + static_cast<int64_t>(c) * kF8ChunkV) * 32;
      // K values of the chunk inside K (0..256): 32-bit compares in the per-piece masks (MXFP8's
      // K % 32 == 0: an 8-value piece, as its 32-value block, lies wholly inside or past K).
      const int64_t krem = p.K - kc;
      [[maybe_unused]] const int kin = krem <= 0               ? 0
                                       : krem < kF8ChunkV * 32 ? static_cast<int>(krem)
                                                               : kF8ChunkV * 32;
      auto kq = [&](int q) { return kQ8 ? 128 * q + 8 * u : 128 * j + 32 * q + 8 * part; };
      uint4 v4[kQn];
#pragma unroll
      for (int q = 0; q < kQn; ++q)
        v4[q] = *reinterpret_cast<const uint4*>(slot + kBfOff + tok * kF8HalfPitch + kq(q) * 2);
      // Piece q of this lane: atom kq / 32, its 8-value part (kq % 32) / 8 = part.
      auto put = [&](int q, uint32_t lo, uint32_t hi, uint32_t sp = 0) {
        const int a = kq(q) / 32;
        if constexpr (kMma == 1) {
          uint32_t l0, l1, h0, h1;
          e4m3x2x2_to_f16x2(lo, l0, l1);
          e4m3x2x2_to_f16x2(hi, h0, h1);
          if constexpr (kFold2) {
            l0 = hmul2_bits(l0, sp), l1 = hmul2_bits(l1, sp);
            h0 = hmul2_bits(h0, sp), h1 = hmul2_bits(h1, sp);
          }
          uint8_t* const d =
              slot + kHalfOff + tok * kF8HalfPitch + a * 64 + (part >> 1) * 16 + (part & 1) * 8;
          *reinterpret_cast<uint2*>(d) = make_uint2(l0, h0);
          *reinterpret_cast<uint2*>(d + 32) = make_uint2(l1, h1);
        } else {
          *reinterpret_cast<uint2*>(slot + tok * kF8RawPitch + a * 32 + part * 8) =
              make_uint2(lo, hi);
        }
      };
      if constexpr (kGroup == 128) {
        const uint32_t w[16] = {v4[0].x, v4[0].y, v4[0].z, v4[0].w, v4[1].x, v4[1].y,
                                v4[1].z, v4[1].w, v4[2].x, v4[2].y, v4[2].z, v4[2].w,
                                v4[3].x, v4[3].y, v4[3].z, v4[3].w};
        const float sc = kernels::g128_codes<true>(w, valid, put);
        if (!valid)
#pragma unroll
          for (int q = 0; q < 4; ++q) put(q, 0u, 0u);
        if (part == 0)
          *reinterpret_cast<float*>(slot + kScaleOff + tok * 8 + j * 4) =
              valid && kc + 128 * j < p.K ? sc : 0.f;
      } else if constexpr (kFold2) {
        // The token's largest code over the chunk's 8 atoms: this lane's, then its other lanes'
        // (i ^ 4 / i ^ 8 with kQ8, i ^ 4 without: the same token, other atoms).
        uint32_t lo[kQn], hi[kQn];
        int e[kQn], emax = 0;
#pragma unroll
        for (int q = 0; q < kQn; ++q) {
          const uint8_t code = kernels::mx8_codes_bf16(v4[q], lo[q], hi[q]);
          e[q] = valid && kq(q) < kin ? code : 0;
          emax = max(emax, e[q]);
        }
        emax = max(emax, __shfl_xor_sync(0xFFFFFFFFu, emax, 4));
        if constexpr (kQ8) emax = max(emax, __shfl_xor_sync(0xFFFFFFFFu, emax, 8));
        if constexpr (kQ32) emax = max(emax, __shfl_xor_sync(0xFFFFFFFFu, emax, 16));
#pragma unroll
        for (int q = 0; q < kQn; ++q)
          put(q, valid ? lo[q] : 0u, valid ? hi[q] : 0u, pow2s(e[q] - emax + 7));
        if ((kQ8 ? u : i & 7) == 0)
          reinterpret_cast<float*>(slot + kXfacOff)[tok] = chunk_factor(emax);
      } else {
#pragma unroll
        for (int q = 0; q < kQn; ++q) {
          uint32_t lo, hi;
          const uint8_t code = kernels::mx8_codes_bf16(v4[q], lo, hi);
          put(q, valid ? lo : 0u, valid ? hi : 0u);
          if (part == 0) {
            slot[kScaleOff + tok * 8 + kq(q) / 32] = valid ? code : 0;
          }
        }
      }
    }
  };
  auto convert = [&](int c) {
    [[maybe_unused]] const int ain = atoms_in(c);
    if (!kEarly || c > (kEarly2 ? 1 : 0)) splats(c);
    if constexpr (kQ) {
      quantize(c);
    } else if constexpr (kMma == 1) {
      uint8_t* const slot = dsm + (c % kF8Slots) * kSlot;
      const int i = threadIdx.x;
      const int tok = i >> 4, pc = i & 15;
      const uint4 r = *reinterpret_cast<const uint4*>(slot + tok * kF8RawPitch + pc * 16);
      uint32_t lo[4], hi[4];
      e4m3x2x2_to_f16x2(r.x, lo[0], hi[0]);
      e4m3x2x2_to_f16x2(r.y, lo[1], hi[1]);
      e4m3x2x2_to_f16x2(r.z, lo[2], hi[2]);
      e4m3x2x2_to_f16x2(r.w, lo[3], hi[3]);
      if constexpr (kFold2) {
        // The token's largest E8M0 over the chunk's atoms inside K (each of its 16 threads
        // computes it), this piece's atom pc / 2 scaled by 2^(e - emax + 7).
        const uint2 eb = *reinterpret_cast<const uint2*>(slot + kScaleOff + tok * 8);
        const uint32_t sp = pow2_h2(e8m0_in(eb, pc >> 1, ain) - e8m0_chunk_max(eb, ain) + 7);
#pragma unroll
        for (int e = 0; e < 4; ++e) lo[e] = hmul2_bits(lo[e], sp), hi[e] = hmul2_bits(hi[e], sp);
        if (pc == 0)
          reinterpret_cast<float*>(slot + kXfacOff)[tok] = chunk_factor(e8m0_chunk_max(eb, ain));
      }
      uint8_t* const d = slot + kHalfOff + tok * kF8HalfPitch + (pc >> 1) * 64 + (pc & 1) * 16;
      *reinterpret_cast<uint4*>(d) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
      *reinterpret_cast<uint4*>(d + 32) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
    }
  };
  if (nch > 0) {
    asm volatile("cp.async.wait_group 1;" ::: "memory");
    __syncthreads();
    convert(0);
  }

  float acc[kTw][kNt][4];
  float tmp[kTw][kNt][4];
#pragma unroll
  for (int j = 0; j < kTw; ++j)
#pragma unroll
    for (int n = 0; n < kNt; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[j][n][i] = tmp[j][n][i] = 0.f;
  // ldmatrix rows: lane l addresses row l % 8 of matrix l / 8 = (token tile, 16-byte half):
  // matrices (tokens 0-7, half 0), (0-7, 1), (8-15, 0), (8-15, 1), which are the B fragments
  // (b0, b1) of token tiles 0 and 1 (x2 at kNt = 1: lanes 0-15). Raw e4m3: half i = k 16i + 4t..;
  // f16: half i of the h block (see convert).
  const int xrow = ((lane >> 4) & 1) * 8 + (lane & 7), xcol = ((lane >> 3) & 1) * 16;
  for (int c = 0; c < nch; ++c) {
    // Chunk c + 1 must have landed too (it is converted in this iteration).
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    stage(c + 2);
    // kLate (block FP8 at one token tile): chunk c + 1 quantized after chunk c's MMAs, so that the
    // ring loads those issue go out before the quantization instead of after it (the next barrier
    // orders it before c + 1's MMAs). Round 76, M = 4, us over 4096x4096 / 14336x4096 /
    // 4096x14336 / 6144x4096 / 2048x7168: 8.65 / 20.19 / 19.30 / 11.49 / 9.20 -> 8.48 / 19.33 /
    // 18.87 / 11.44 / 8.93 (M = 16 mixed, +1.0 / -3.7 / +1.7 / +1.4 / +0.6 %: not there; MXFP8
    // and per-tensor lost or gained < 1.3 %).
    if (!kLate && c + 1 < nch) convert(c + 1);
    const uint8_t* const slot = dsm + (c % kF8Slots) * kSlot;
    const uint8_t* const xa =
        kMma == 1 ? slot + kHalfOff + xrow * kF8HalfPitch + xcol : slot + xrow * kF8RawPitch + xcol;
    // The chunk's weight scales of this lane's rows: block FP8 one fp32 per group (a warp's kTw
    // tiles lie in one 128-row block: warp kTw / 8 of the CTA's, so the products with the
    // activation scales are shared by its tiles); MXFP8 8 E8M0 bytes of rows g / g + 8 per tile.
    float wsb[2];
    uint2 wmx[kTw][2];
    // The chunk's activation scales of this lane's tokens 8n + 2t, + 1 (one 8-byte load each):
    // block FP8 the two groups' fp32, MXFP8 the 8 E8M0 bytes.
    float2 xsb[kNt][2];
    uint2 xmx[kNt][2];
#pragma unroll
    for (int n = 0; n < kNt; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const uint8_t* const xs = slot + kScaleOff + (8 * n + 2 * t + e) * 8;
        if constexpr (kGroup == 128) xsb[n][e] = *reinterpret_cast<const float2*>(xs);
        if constexpr (kGroup == 32 && !kFold2) xmx[n][e] = *reinterpret_cast<const uint2*>(xs);
      }
    if constexpr (kGroup == 128) {
      const float* const s =
          reinterpret_cast<const float*>(slot + kScaleOff + 128) + warp * kTw / 8 * 2;
      wsb[0] = s[0];
      wsb[1] = s[1];
    }
#pragma unroll
    for (int j = 0; j < kTw; ++j) {
      if constexpr (kGroup == 32 && !kFold2) {
        const uint8_t* const s = slot + kWmxOff + ((warp * kTw + j) * 16 + g) * 8;
        wmx[j][0] = *reinterpret_cast<const uint2*>(s);
        wmx[j][1] = *reinterpret_cast<const uint2*>(s + 64);
      }
    }
#pragma unroll
    for (int a = 0; a < kF8ChunkV; ++a) {
      uint32_t b[2][4];  // [h][reg] (f16), or b[0] (e4m3)
      if constexpr (kMma == 1) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if constexpr (kNt == 2)
            ldmatrix_x4(b[h], xa + a * 64 + h * 32);
          else
            ldmatrix_x2(b[h], xa + a * 64 + h * 32);
        }
      } else {
        if constexpr (kNt == 2)
          ldmatrix_x4(b[0], xa + a * 32);
        else
          ldmatrix_x2(b[0], xa + a * 32);
      }
      // A group's first atom starts its partials from zero (kFoldAtoms > 0); at its last one the
      // activation scales of tokens 8n + 2t, + 1, shared by the kTw tiles.
      constexpr bool kNoGroups = kFoldAtoms == 0;
      const bool first = !kNoGroups && a % (kNoGroups ? 1 : kFoldAtoms) == 0;
      const bool last = !kNoGroups && a % (kNoGroups ? 1 : kFoldAtoms) == kFoldAtoms - 1;
      float xs0[kNt], xs1[kNt];
#pragma unroll
      for (int n = 0; n < kNt; ++n) {
        xs0[n] = xs1[n] = 1.f;
        if (last) {
          if constexpr (kGroup == 128) {
            xs0[n] = (a < 4 ? xsb[n][0].x : xsb[n][0].y) * wsb[a / 4];
            xs1[n] = (a < 4 ? xsb[n][1].x : xsb[n][1].y) * wsb[a / 4];
          } else if constexpr (kFold2) {
            const float2 xf = reinterpret_cast<const float2*>(slot + kXfacOff)[(8 * n + 2 * t) / 2];
            xs0[n] = xf.x;
            xs1[n] = xf.y;
          } else if constexpr (kGroup == 32) {
            const uint32_t s0 = a < 4 ? xmx[n][0].x : xmx[n][0].y;
            const uint32_t s1 = a < 4 ? xmx[n][1].x : xmx[n][1].y;
            xs0[n] = e8m0_f32((s0 >> (8 * (a & 3))) & 0xFFu);
            xs1[n] = e8m0_f32((s1 >> (8 * (a & 3))) & 0xFFu);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < kTw; ++j) {
        const int q = (a * kTw + j) % kDepth;
        const uint4 cur = ring[q];
        const int vn = c * kF8ChunkV + a + kAhead;
        if (vn < lim[j]) ring[q] = ldg_stream(wp[j] + static_cast<int64_t>(vn) * 512);
        const uint32_t af[4] = {cur.x, cur.y, cur.z, cur.w};
        float(&dst)[kNt][4] = kFoldAtoms ? tmp[j] : acc[j];
        if constexpr (kMma == 1) {
          uint32_t ah[2][4];
#pragma unroll
          for (int i = 0; i < 4; ++i) e4m3x2x2_to_f16x2(af[i], ah[0][i], ah[1][i]);
          if constexpr (kFold2) {
            // A registers i = 0, 2 hold row g, 1, 3 row g + 8.
            const uint2 sp = reinterpret_cast<const uint2*>(
                slot + kSplatOff)[((warp * kTw + j) * kF8ChunkV + a) * 8 + g];
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
              for (int i = 0; i < 4; ++i) ah[h][i] = hmul2_bits(ah[h][i], i & 1 ? sp.y : sp.x);
          }
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int n = 0; n < kNt; ++n) {
              if (first && h == 0)
                mma16816_zero<Fp16Tag>(dst[n], ah[h], b[h][2 * n], b[h][2 * n + 1]);
              else
                mma16816<Fp16Tag>(dst[n], ah[h], b[h][2 * n], b[h][2 * n + 1]);
            }
        } else {
#pragma unroll
          for (int n = 0; n < kNt; ++n) {
            if (first)
              mma16832_e4m3_zero(dst[n], af, b[0][2 * n], b[0][2 * n + 1]);
            else
              mma16832_e4m3(dst[n], af, b[0][2 * n], b[0][2 * n + 1]);
          }
        }
        if constexpr (kFoldAtoms > 0) {
          if (last) {
            // acc += tmp x (weight scale of rows g / g + 8) x (activation scale of tokens
            // 8n + 2t / + 1); the next group's first MMAs start tmp from zero.
            // (Block FP8: the weight scale is in xs0 / xs1.)
            float w0 = 1.f, w1 = 1.f;
            if constexpr (kFold2) {
              const float2 wf =
                  reinterpret_cast<const float2*>(slot + kWfacOff)[(warp * kTw + j) * 8 + g];
              w0 = wf.x;
              w1 = wf.y;
            } else if constexpr (kGroup == 32) {
              const uint32_t s0 = a < 4 ? wmx[j][0].x : wmx[j][0].y;
              const uint32_t s1 = a < 4 ? wmx[j][1].x : wmx[j][1].y;
              w0 = e8m0_f32((s0 >> (8 * (a & 3))) & 0xFFu);
              w1 = e8m0_f32((s1 >> (8 * (a & 3))) & 0xFFu);
            }
#pragma unroll
            for (int n = 0; n < kNt; ++n) {
              const float x0 = xs0[n], x1 = xs1[n];
              acc[j][n][0] = fmaf(tmp[j][n][0], w0 * x0, acc[j][n][0]);
              acc[j][n][1] = fmaf(tmp[j][n][1], w0 * x1, acc[j][n][1]);
              acc[j][n][2] = fmaf(tmp[j][n][2], w1 * x0, acc[j][n][2]);
              acc[j][n][3] = fmaf(tmp[j][n][3], w1 * x1, acc[j][n][3]);
            }
          }
        }
      }
    }
    if (kLate && c + 1 < nch) convert(c + 1);
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");

  float mult = p.out_mult;
  if (p.alpha != nullptr) mult *= *p.alpha;
  if (p.cluster_split > 1) {
    // The K split summed in the cluster (kernels/cluster_sum.cuh), the partial tile in the slots'
    // shared memory.
    static_assert(kS16ClBytes<kTw, kNt> <= kF8SmemBytes<kTw, kGroup, kMma, kQ, kVar>,
                  "cluster sum: partial tile exceeds the slots");
    // p.stream_trig (Plan::stream_trig bit 4, the default with a cluster): the dependent launch
    // before the sum, so that the next call's clusters can take the slots of clusters that finish
    // first (round 87: 1-3 % at 14336x4096).
    if (p.stream_trig) griddep_launch_dependents();
    s16_cluster_store<kTw, kNt>(p, acc, dsm, row0, tpc, mult, warp, g, t);
    if (!p.stream_trig) griddep_launch_dependents();
    return;
  }
#pragma unroll
  for (int j = 0; j < kTw; ++j) {
    const int64_t tile = tile0 + j;
    if (tile < p.n16 && warp * kTw + j < tpc)
      stream_store_tile<kNt>(p, acc[j], tile, blockIdx.y, mult, g, t);
  }
  griddep_launch_dependents();
}

}  // namespace b12x::gemm::lin
