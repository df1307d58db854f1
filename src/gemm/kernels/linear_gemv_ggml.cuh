// Small-M (decode, M <= 16) GEMV of the GGML weight formats (IQ2_XXS, IQ2_XS, Q8_0) with BF16 /
// FP16 activations, on the packed layout of gemm/linear_layout.h (the weights every other
// kernel reads; no second copy).
//
// Why a separate kernel: the weight-streaming decode kernel (linear_decode.cuh) decodes IQ2 with
// two 4-byte table loads per MMA register (grid pair, sign pair) whose 8 distinct entries per
// warp instruction collide in the banks (~2.6-way): ~40 shared-memory wavefronts per 128 bytes
// of IQ2 weights, i.e. ~0.8 TB/s at one wavefront per cycle per SM. Here:
//  - IQ2: each lane decodes whole 8-value entries. A 4-byte word per lane is loaded straight
//    from global memory (the quad's four words are the atom's 16-byte slot; two shuffles hand
//    each lane its two entries); an entry becomes its four BF16 / FP16 pairs with four PRMTs
//    whose selectors come from two 8-byte table loads (grid index -> per-value source-byte
//    selectors, sign pattern -> selector bits picking the negated high byte). The tables are
//    replicated 16 times in shared memory so that lane L reads banks 2(L%16), 2(L%16)+1: the
//    loads of a half-warp never conflict (4 wavefronts per 128 bytes of weights and table).
//  - The MMA's K order inside an atom is chosen per format so that each lane's activations are
//    contiguous (IQ2: lane t of a quad takes the atom's 8-value group t, rows g and g+8; its
//    activations are 8 consecutive values, one 16-byte load), and so that every MMA covers one
//    scale group (IQ2_XS, 16-K groups: two MMA chains per atom, the other group's activations
//    zeroed per lane).
//  - Q8_0: the existing int8 -> exact integer decode (decode_byte_atom), one 16-byte load per
//    lane per atom, no shared memory.
// Weights and scales of the next batch (IQ2: 8 atoms = one 256-K block; Q8_0: 4 atoms) are
// loaded while the current one is decoded; activations come through L1 (the CTA's tiles share
// them). CTA = 8 warps: kw warps per 16-row tile split the CTA's K range (interleaved batches)
// and are added in warp order through shared memory; a split over CTAs (grid.y) writes fp32
// partials for linear_reduce_kernel (split order: deterministic).
//
// Exactness as in the other kernels: the decoded weights are the exact integers q (Q8_0) or
// +-grid (IQ2); the fp32 scale d (Q8_0) or d * (2s + 1) / 8 (IQ2) multiplies each group's fp32
// MMA partial.
#pragma once

#include "gemm/kernels/linear_common.cuh"

namespace b12x::gemm::lin {

namespace gemv {

inline constexpr int kWarps = 8;
inline constexpr int kThreads = 32 * kWarps;
/// Copies of the IQ2 tables (lane classes of a half-warp's 8-byte loads).
inline constexpr int kClasses = 16;

template <WFmt F>
constexpr int grid_entries() {
  return F == WFmt::kIq2Xs ? 512 : 256;
}
/// Atoms (32 K) per batch: an IQ2 block of 256 K (one fp16 d per row); 4 for Q8_0.
template <WFmt F>
constexpr int batch_atoms() {
  return F == WFmt::kQ8_0 ? 4 : 8;
}
/// Dynamic shared memory: the replicated IQ2 tables (grid selectors, then sign selectors).
template <WFmt F>
constexpr int smem_bytes() {
  return F == WFmt::kQ8_0 ? 0 : (grid_entries<F>() + 128) * kClasses * 8;
}

// ---------------------------------------------------------------- IQ2 selector tables -------
// A value's PRMT selector byte: low nibble = source byte of the result's low byte, high nibble =
// source byte of its high byte. Sources (kSrcLo = bytes 0-3, kSrcHi = bytes 4-7):
//  BF16: 8 = 0x4100, 25 = 0x41C8, 43 = 0x422C; bytes 0..3 = 0x41, 0x42, 0xC1, 0xC2 (high bytes,
//        negated at +2), 4..6 = 0x00, 0xC8, 0x2C (low bytes). A negative value's selector has bit
//        1 of its high nibble set (the sign table's bit 8i + 5), so grid | sign is the selector.
//  FP16: 8 = 0x4800, 25 = 0x4E40, 43 = 0x5160: three high bytes (0..2) and three low bytes
//        (4..6) leave no room for negated ones; the sign table holds 0x80 in byte i of a
//        negative value i, moved to bits 15 / 31 by a second PRMT and XORed on.
namespace tab {
constexpr uint32_t code_of(uint32_t v) {
  return v == 0x08u ? 0u : v == 0x19u ? 1u : 2u;
}
template <int kN>
struct U64s {
  uint64_t v[kN];
};
template <int kN>
constexpr U64s<kN> make_grid_sel(const uint64_t* grid, bool fp16) {
  U64s<kN> t{};
  for (int i = 0; i < kN; ++i) {
    uint64_t s = 0;
    for (int j = 0; j < 8; ++j) {
      const uint64_t c = code_of(static_cast<uint32_t>((grid[i] >> (8 * j)) & 0xFFu));
      const uint64_t hi = fp16 ? c : (c == 2 ? 1 : 0);
      s |= ((4 + c) | (hi << 4)) << (8 * j);
    }
    t.v[i] = s;
  }
  return t;
}
constexpr U64s<128> make_sign_sel(bool fp16) {
  U64s<128> t{};
  for (uint32_t s7 = 0; s7 < 128; ++s7) {
    uint32_t par = s7 ^ (s7 >> 4);
    par ^= par >> 2;
    par ^= par >> 1;
    const uint32_t s8 = s7 | ((par & 1u) << 7);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      if ((s8 >> i) & 1u) v |= uint64_t{1} << (8 * i + (fp16 ? 7 : 5));
    t.v[s7] = v;
  }
  return t;
}
}  // namespace tab

static __device__ const tab::U64s<256> g_gsel_xxs_bf16 =
    tab::make_grid_sel<256>(fmt::ggml::kIq2xxsGrid, false);
static __device__ const tab::U64s<256> g_gsel_xxs_fp16 =
    tab::make_grid_sel<256>(fmt::ggml::kIq2xxsGrid, true);
static __device__ const tab::U64s<512> g_gsel_xs_bf16 =
    tab::make_grid_sel<512>(fmt::ggml::kIq2xsGrid, false);
static __device__ const tab::U64s<512> g_gsel_xs_fp16 =
    tab::make_grid_sel<512>(fmt::ggml::kIq2xsGrid, true);
static __device__ const tab::U64s<128> g_ssel_bf16 = tab::make_sign_sel(false);
static __device__ const tab::U64s<128> g_ssel_fp16 = tab::make_sign_sel(true);

template <class T>
__device__ __forceinline__ constexpr uint32_t src_hi() {
  return T::kFp16 ? 0x00604000u : 0x002CC800u;
}
/// The low source word, once per thread in a register that ptxas cannot rematerialize (it
/// otherwise copies the uniform constant into a register before every PRMT: 8 moves per atom).
template <class T>
__device__ __forceinline__ uint32_t src_lo_reg() {
  uint32_t r;
  asm volatile("mov.b32 %0, %1;" : "=r"(r) : "n"(T::kFp16 ? 0x00514E48u : 0xC2C14241u));
  return r;
}

/// One IQ2 entry (grid index | sign7 << 9 in bits 0-15; higher bits ignored) -> its four value
/// pairs (values 2p, 2p + 1 in the low / high half of p[p]), exact +-grid in BF16 / FP16.
__device__ __forceinline__ uint64_t lds64(uint32_t addr) {
  uint32_t lo, hi;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(lo), "=r"(hi) : "r"(addr));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

/// gbase / sbase: shared addresses of the lane's copy (class) of entry 0 of the grid / sign
/// selector tables (entries kClasses * 8 = 128 bytes apart).
template <class T>
__device__ __forceinline__ void iq2_entry_pairs(uint32_t e, uint32_t gbase, uint32_t sbase,
                                                uint32_t lo, uint32_t p[4]) {
  const uint64_t gs = lds64(gbase + ((e << 7) & (0x1FFu << 7)));
  const uint64_t ss = lds64(sbase + ((e >> 2) & (0x7Fu << 7)));
  if constexpr (T::kFp16) {
    const uint32_t g0 = static_cast<uint32_t>(gs), g1 = static_cast<uint32_t>(gs >> 32);
    const uint32_t s0 = static_cast<uint32_t>(ss), s1 = static_cast<uint32_t>(ss >> 32);
    p[0] = lop3<0x6A>(prmt(s0, s1, 0x1100u), 0x80008000u, prmt(lo, src_hi<T>(), g0));
    p[1] = lop3<0x6A>(prmt(s0, s1, 0x3322u), 0x80008000u, prmt(lo, src_hi<T>(), g0 >> 16));
    p[2] = lop3<0x6A>(prmt(s0, s1, 0x5544u), 0x80008000u, prmt(lo, src_hi<T>(), g1));
    p[3] = lop3<0x6A>(prmt(s0, s1, 0x7766u), 0x80008000u, prmt(lo, src_hi<T>(), g1 >> 16));
  } else {
    const uint64_t sel = gs | ss;
    const uint32_t s0 = static_cast<uint32_t>(sel), s1 = static_cast<uint32_t>(sel >> 32);
    p[0] = prmt(lo, src_hi<T>(), s0);
    p[1] = prmt(lo, src_hi<T>(), s0 >> 16);
    p[2] = prmt(lo, src_hi<T>(), s1);
    p[3] = prmt(lo, src_hi<T>(), s1 >> 16);
  }
}

/// fp32 of a 4-bit IQ2 sub-scale factor (2s + 1) / 8 times d.
__device__ __forceinline__ float iq2_scale(float d, uint32_t s) {
  return d * static_cast<float>(2u * s + 1u) * 0.125f;
}

/// Weights and scales of one batch of a warp (registers; loaded one batch ahead).
template <WFmt F>
struct Batch;
template <>
struct Batch<WFmt::kQ8_0> {
  uint4 w[4];  // the lane's 16 bytes of each atom
  uint2 d[2];  // fp16 d of the 4 atoms, rows g / g + 8
};
template <>
struct Batch<WFmt::kIq2Xxs> {
  uint32_t w[8];  // word t of slot g of each atom
  uint32_t d[2];  // fp16 d of the block, rows g / g + 8
  uint32_t s[2];  // sub-scale nibbles of the 8 atoms
};
template <>
struct Batch<WFmt::kIq2Xs> {
  uint32_t w[8];
  uint32_t d[2];
  uint2 s[2];  // scale bytes of the 8 atoms (low nibble: K 0-15, high: 16-31)
};

template <WFmt F>
__device__ __forceinline__ void load_batch(const LinearParams& p, int tile, int b, int atoms,
                                           int lane, Batch<F>& B) {
  const int g = lane >> 2, t = lane & 3;
  const int64_t r0 = static_cast<int64_t>(tile) * 16 + g, r1 = r0 + 8;
  if constexpr (F == WFmt::kQ8_0) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int a = b * 4 + j;
      B.w[j] = a < atoms ? ldg_stream(p.wvals + ((tile * p.kvec + a) * 32 + lane) * 16)
                         : make_uint4(0, 0, 0, 0);
    }
    const uint2* ds = reinterpret_cast<const uint2*>(p.wscale);
    B.d[0] = __ldg(ds + (r0 * p.scale_ld + b * 4) / 4);
    B.d[1] = __ldg(ds + (r1 * p.scale_ld + b * 4) / 4);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int a = b * 8 + j;
      B.w[j] = __ldg(
          reinterpret_cast<const uint32_t*>(p.wvals + ((tile * p.kvec + a) * 8 + g) * 16) + t);
    }
    const uint16_t* ds = reinterpret_cast<const uint16_t*>(p.wscale);
    B.d[0] = __ldg(ds + r0 * p.scale_ld + b);
    B.d[1] = __ldg(ds + r1 * p.scale_ld + b);
    if constexpr (F == WFmt::kIq2Xxs) {
      const uint32_t* ss = reinterpret_cast<const uint32_t*>(p.wscale2);
      B.s[0] = __ldg(ss + (r0 * p.scale2_ld + b * 4) / 4);
      B.s[1] = __ldg(ss + (r1 * p.scale2_ld + b * 4) / 4);
    } else {
      const uint2* ss = reinterpret_cast<const uint2*>(p.wscale2);
      B.s[0] = __ldg(ss + (r0 * p.scale2_ld + b * 8) / 8);
      B.s[1] = __ldg(ss + (r1 * p.scale2_ld + b * 8) / 8);
    }
  }
}

/// Activation words of an atom from the lane's pointer (its token row, + 2t for Q8_0, + 8t for
/// IQ2): Q8_0 the pairs at k = 16s + 8h + 2t (x[2s + h]); IQ2 the 8 values of group t.
template <WFmt F>
__device__ __forceinline__ void load_acts(const uint16_t* xa, uint32_t x[4]) {
  if constexpr (F == WFmt::kQ8_0) {
#pragma unroll
    for (int i = 0; i < 4; ++i) x[i] = __ldg(reinterpret_cast<const uint32_t*>(xa + 8 * i));
  } else {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(xa));
    x[0] = v.x;
    x[1] = v.y;
    x[2] = v.z;
    x[3] = v.w;
  }
}

}  // namespace gemv

/// grid = (<= ceil(n16 / (8 / kw)) CTAs walking the tile groups, split, ceil(M / (8 * NT)));
/// 256 threads; dynamic shared memory gemv::smem_bytes<F>(). kw (1, 2, 4, 8): warps per 16-row
/// tile.
template <WFmt F, class T, int NT>
__global__ void __launch_bounds__(gemv::kThreads)
    linear_gemv_ggml_kernel(const LinearParams p, int kw) {
  using namespace gemv;
  constexpr bool kIq2 = F != WFmt::kQ8_0;
  constexpr bool kXs = F == WFmt::kIq2Xs;
  constexpr int kU = batch_atoms<F>();
  extern __shared__ __align__(16) uint64_t tabs[];
  __shared__ float red[kWarps][NT * 4][32];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int tpc = kWarps / kw;
  const int kp = warp % kw;
  // Tile groups (tpc tiles of 16 rows) handed out grid-stride over grid.x, so that a grid capped
  // at the resident CTAs fills the IQ2 tables once per CTA; the warp's tile of group tg.
  // 32-bit tile / batch indices (N, K < 2^31); byte offsets are 64-bit in load_batch.
  const int n16 = static_cast<int>(p.n16);
  const int groups = (n16 + tpc - 1) / tpc;
  const int wt = warp / kw;
  const int atoms = static_cast<int>(p.K / 32);
  const int batches = (atoms + kU - 1) / kU;
  const int per = (batches + p.split - 1) / p.split;
  const int b_end = min(batches, static_cast<int>(blockIdx.y + 1) * per);
  const int b_first = static_cast<int>(blockIdx.y) * per + kp;
  const int64_t tok0 = static_cast<int64_t>(blockIdx.z) * 8 * NT;

  int tg = blockIdx.x;
  Batch<F> cur;
  if (tg * tpc + wt < n16 && b_first < b_end)
    load_batch<F>(p, tg * tpc + wt, b_first, atoms, lane, cur);

  if constexpr (kIq2) {
    const uint64_t* gsrc;
    if constexpr (kXs) {
      gsrc = T::kFp16 ? g_gsel_xs_fp16.v : g_gsel_xs_bf16.v;
    } else {
      gsrc = T::kFp16 ? g_gsel_xxs_fp16.v : g_gsel_xxs_bf16.v;
    }
    const uint64_t* ssrc = T::kFp16 ? g_ssel_fp16.v : g_ssel_bf16.v;
    constexpr int kE = grid_entries<F>();
#pragma unroll 8
    for (int i = threadIdx.x; i < (kE + 128) * kClasses; i += kThreads) {
      const int e = i / kClasses;
      tabs[i] = e < kE ? gsrc[e] : ssrc[e - kE];
    }
    __syncthreads();
  }
  griddep_wait();

  const uint32_t gbase =
      static_cast<uint32_t>(__cvta_generic_to_shared(tabs)) + (lane % kClasses) * 8;
  const uint32_t sbase = gbase + grid_entries<F>() * kClasses * 8;
  const uint32_t esel = (t & 1) ? 0x7632u : 0x5410u;
  const uint32_t src_lo = src_lo_reg<T>();
  // The lane's activation row per token tile; token rows past M read row M - 1 (their output
  // columns are never stored).
  const uint16_t* xl[NT];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    const int64_t m = std::min<int64_t>(tok0 + 8 * n + g, p.M - 1);
    xl[n] = static_cast<const uint16_t*>(p.x) + m * p.ldx + (kIq2 ? 8 * t : 2 * t);
  }
  float mult = p.out_mult;
  if (p.alpha != nullptr) mult *= *p.alpha;

  for (; tg < groups; tg += static_cast<int>(gridDim.x)) {
    const int tile = tg * tpc + wt;
    const bool active = tile < n16;
    // The next group's tile of this warp (n16: none): its first batch is loaded during the last
    // batch here.
    const int next_tile = tg + static_cast<int>(gridDim.x) < groups
                              ? (tg + static_cast<int>(gridDim.x)) * tpc + wt
                              : n16;
    float acc[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;

    for (int b = b_first; active && b < b_end; b += kw) {
      Batch<F> nxt;
      const bool more = b + kw < b_end;
      const int ltile = more ? tile : next_tile;
      if (ltile < n16) load_batch<F>(p, ltile, more ? b + kw : b_first, atoms, lane, nxt);
      float dg[2];
      if constexpr (kIq2) {
        dg[0] = half_bits_f32(cur.d[0] & 0xFFFFu);
        dg[1] = half_bits_f32(cur.d[1] & 0xFFFFu);
      }
#pragma unroll
      for (int j = 0; j < kU; ++j) {
        const int a = b * kU + j;
        uint32_t A[2][4];
        if constexpr (kIq2) {
          // Lane t takes the atom's group t for rows g (entry in word t / 2 of the slot, held by
          // lane t / 2 of the quad) and g + 8 (word 2 + t / 2).
          const uint32_t v0 = __shfl_sync(0xFFFFFFFFu, cur.w[j], (lane & ~3) | (t >> 1));
          const uint32_t v1 = __shfl_sync(0xFFFFFFFFu, cur.w[j], (lane & ~3) | 2 | (t >> 1));
          const uint32_t e01 = prmt(v0, v1, esel);
          uint32_t P0[4], P1[4];
          iq2_entry_pairs<T>(e01, gbase, sbase, src_lo, P0);
          iq2_entry_pairs<T>(e01 >> 16, gbase, sbase, src_lo, P1);
#pragma unroll
          for (int s = 0; s < 2; ++s) {
            A[s][0] = P0[2 * s];
            A[s][1] = P1[2 * s];
            A[s][2] = P0[2 * s + 1];
            A[s][3] = P1[2 * s + 1];
          }
        } else {
          decode_byte_atom<T, true>(cur.w[j], A);
        }
        // Per-row fp32 scales of the atom's group(s).
        float sc[2][2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          if constexpr (F == WFmt::kQ8_0) {
            const uint32_t dw = (j < 2 ? cur.d[r].x : cur.d[r].y) >> (16 * (j & 1));
            sc[r][0] = half_bits_f32(dw & 0xFFFFu);
          } else if constexpr (F == WFmt::kIq2Xxs) {
            sc[r][0] = iq2_scale(dg[r], (cur.s[r] >> (4 * j)) & 0xFu);
          } else {
            const uint32_t sb = (j < 4 ? cur.s[r].x : cur.s[r].y) >> (8 * (j & 3));
            sc[r][0] = iq2_scale(dg[r], sb & 0xFu);
            sc[r][1] = iq2_scale(dg[r], (sb >> 4) & 0xFu);
          }
        }
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          uint32_t x[4];
          load_acts<F>(xl[n] + a * 32, x);
          if constexpr (kXs) {
            // Lanes t = 0, 1 hold K 0-15 (group 0), t = 2, 3 K 16-31 (group 1): one MMA chain
            // per group with the other group's activations zeroed.
            const bool g0 = t < 2;
            float c0[4] = {0.f, 0.f, 0.f, 0.f}, c1[4] = {0.f, 0.f, 0.f, 0.f};
            mma16816<T>(c0, A[0], g0 ? x[0] : 0u, g0 ? x[1] : 0u);
            mma16816<T>(c0, A[1], g0 ? x[2] : 0u, g0 ? x[3] : 0u);
            mma16816<T>(c1, A[0], g0 ? 0u : x[0], g0 ? 0u : x[1]);
            mma16816<T>(c1, A[1], g0 ? 0u : x[2], g0 ? 0u : x[3]);
#pragma unroll
            for (int i = 0; i < 4; ++i)
              acc[n][i] = fmaf(c1[i], sc[i >> 1][1], fmaf(c0[i], sc[i >> 1][0], acc[n][i]));
          } else {
            float c[4] = {0.f, 0.f, 0.f, 0.f};
            mma16816<T>(c, A[0], x[0], x[1]);
            mma16816<T>(c, A[1], x[2], x[3]);
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[n][i] = fmaf(c[i], sc[i >> 1][0], acc[n][i]);
          }
        }
      }
      cur = nxt;
    }

    // K parts of a tile added in warp order (deterministic); the first barrier keeps the
    // previous group's readers ahead of these writes.
    if (kw > 1) {
      __syncthreads();
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) red[warp][n * 4 + i][lane] = acc[n][i];
      __syncthreads();
      if (kp == 0)
        for (int q = 1; q < kw; ++q)
#pragma unroll
          for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[n][i] += red[warp + q][n * 4 + i][lane];
    }
    if (kp != 0 || !active) continue;
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = static_cast<int64_t>(tile) * 16 + g + 8 * (i >> 1);
        const int64_t m = tok0 + 8 * n + 2 * t + (i & 1);
        if (row >= p.N || m >= p.M) continue;
        if (p.split > 1) {
          p.partial[(static_cast<int64_t>(blockIdx.y) * p.M + m) * p.NP + row] = acc[n][i];
        } else {
          float v = acc[n][i] * mult;
          if (p.bias != nullptr) v += load_out_type(p.bias, row, p.out_fp16);
          if (p.out_fp16)
            store_out<true>(p.out, m * p.ldo + row, v);
          else
            store_out<false>(p.out, m * p.ldo + row, v);
        }
      }
  }
  griddep_launch_dependents();
}

}  // namespace b12x::gemm::lin
