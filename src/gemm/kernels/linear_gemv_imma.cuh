// IQ2 GEMV at M <= 2 on integer MMA (mma.sync m16n8k32 s8 x s8 -> s32), sessions 25-26; the
// packed weights of gemm/linear_layout.h, as the BF16 GEMV (linear_gemv_ggml.cuh) reads them.
//
// Why integers: an IQ2 weight is +-{8, 25, 43} times the group's fp32 factor, an exact int8. The
// BF16 GEMV builds four BF16 pairs per 8-value entry (4 PRMTs) and runs two m16n8k16 per atom;
// here an entry is two int8 words (2 PRMTs) and one m16n8k32 covers a quarter of 4 atoms.
//  - Decode: the entry's grid index picks a 32-bit word of PRMT selector nibbles (value j's
//    nibble = its magnitude code 0 / 1 / 2), its 7 sign bits (+ parity) a word with bit 2 of the
//    negative values' nibbles; their OR selects each byte from {8, 25, 43, 0, -8, -25, -43, 0}
//    (two source words). Both tables are replicated 32 times (lane L reads copy L: bank L, no
//    conflicts) in the 64 KB layout of the BF16 GEMV's kPa, so that each address is one PRMT of
//    the entry word and the lane's copy offsets: grid entry e at byte 256 e + 4 L, sign entry s at
//    512 s + 128 + 4 L.
//  - MMA layout ("atom columns", as the BF16 GEMV's kAc): lane (g, t) holds slot g (rows g,
//    g + 8) of atom t of a half batch (4 atoms); MMA q takes group q (8 values) of each lane's
//    atom, the entry's values 0-3 in a0 / a1 and 4-7 in a2 / a3, so each MMA's K order is
//    [atom t: group q] per lane t. The activation columns separate the atoms: column 2t + p
//    holds piece p of atom t (only lanes g = 2t + p supply B, the others zero), so C[row][2t + p]
//    is atom t's dot product with piece p.
//  - Activations (session 26: two pieces; session 25 split into three): per 32-K block with
//    exponent E (2^E <= max |x| < 2^(E+1)), X = rint(x 2^(13 - E)) (|X| <= 2^14) as radix-2^8
//    signed digits X = a 2^8 + b (a in [-64, 64], b in [-128, 127]; E at least -100, a block
//    with a NaN / Inf gets a NaN scale). One MMA per group and token: pieces a, b in columns 2t,
//    2t + 1. The int32 sums are exact (|A| <= 32 * 43 * 64) and combined as A 2^8 + B, times the
//    sub-scale 2s + 1 in int32 (<= 2^29.5), before one conversion per row and atom. An element
//    loses at most 2^(max(E, -100) - 14) (round to nearest): BF16 elements within 2^6 of their
//    block's largest are exact (llama.cpp's q8_1 activations keep 8 bits).
//  - Staging: each CTA converts the whole activation row into shared memory once (pieces
//    [p][atom][32 bytes], a 16-byte pad per piece so that the 8 lanes loading pieces a / b of 4
//    atoms hit 32 different banks; the per-atom fp32 scale 2^(E - 16) (d / 8 folded in) after
//    them, [batch][t][half]).
//  - Grid: one wave of CTAs (kW warps, one per SM on H200), each a contiguous share of the
//    16-row tiles, its (tile, batch) units cut into kW contiguous ranges, one per warp (the BF16
//    GEMV's balanced split); a tile a warp covers in part goes through shared memory and is added
//    in warp order (deterministic).
#pragma once

#include <type_traits>

#include "gemm/kernels/linear_common.cuh"

namespace b12x::gemm::lin {

namespace imma {

/// The replicated tables: IQ2_XXS the BF16 GEMV's kPa layout (gemv::kPaBytes) with 4-byte entries
/// and 32 copies (grid entry e at 256 e, sign entry s at 512 s + 128); IQ2_XS (9-bit grid indices)
/// grid entry e at 128 e, sign entry s at 64 KB + 128 s (addresses by shift and mask), then 128
/// bytes with the words and 128 zero bytes.
template <WFmt F>
__host__ __device__ constexpr int tab_bytes() {
  return F == WFmt::kIq2Xs ? 512 * 128 + 128 * 128 + 256 : 256 * 256;
}
/// The PRMT source words (two copies each, read by lane parity): IQ2_XXS in a free 128-byte half
/// (grid row 1's upper half: sign entries sit in the even rows' upper halves).
template <WFmt F>
__host__ __device__ constexpr int src_off() {
  return F == WFmt::kIq2Xs ? 512 * 128 + 128 * 128 : 384;
}
/// 128 zero bytes at bank 0 (IQ2_XXS: grid row 3's upper half): the activation loads of the
/// lanes that supply none (kP2: each quarter warp its own 32 bytes, off its data's banks).
template <WFmt F>
__host__ __device__ constexpr int zero_off() {
  return F == WFmt::kIq2Xs ? src_off<F>() + 128 : 3 * 256 + 128;
}
/// Bytes of one activation piece array (16-byte pad: bank shift between pieces a and b).
__host__ __device__ constexpr int64_t piece_stride(int64_t atoms) {
  return atoms * 32 + 16;
}
/// Kernel variant bits (plan var kGgmlImmaVar | bits; session 26): kP2 two pieces per value
/// (radix 2^8 signed digits, 15 bits; every kernel), kPred activation loads by the supplying lanes
/// only; session 27: kTile | kInPlace (together) a loop per tile (no per-batch tile checks), lane
/// constants through shared memory, the sub-scale words shifted once per batch, the CTA's tail
/// reading every warp's partials at once, and the next batch's loads into the current batch's
/// registers as each part of them is consumed (no register copies per batch); kPeel each tile's
/// last batch out of the batch loop, the loads' addresses from per-tile row bases; kIlv the two
/// half batches' entries decoded and multiplied interleaved (two MMA chains in flight, as the
/// session-26 loop had them; kTile's loop ran the halves one after the other); kXFirst the table
/// words loaded after the first activation load. Bit 16 was round 101's tile pairs (removed).
inline constexpr int kP2 = 1, kPred = 2, kTile = 4, kInPlace = 8, kPeel = 32, kIlv = 64,
                     kXFirst = 128, kXAll = 256, kTabQ = 512;
/// Static shared memory of a kernel of kW warps and M tokens: the warps' partial tiles (two slots)
/// and their tile ids, kTile's lane constants (ggml_imma_available adds it to the dynamic part).
__host__ __device__ constexpr int static_smem_bytes(int warps, int M) {
  return warps * (2 * M * 16 + 2) * 4 + (5 + 2 * M) * 32 * 4;
}
/// Dynamic shared memory at K for M tokens: the tables, two pieces and the per-atom scales per
/// token.
template <WFmt F>
__host__ __device__ constexpr int64_t smem_bytes(int64_t K, int64_t M = 1) {
  return tab_bytes<F>() + M * (2 * piece_stride(K / 32) + (K / 32) * 4);
}

namespace tab {
template <int kN>
struct U32s {
  uint32_t v[kN];
};
template <int kN>
constexpr U32s<kN> make_grid_nib(const uint64_t* grid) {
  U32s<kN> t{};
  for (int i = 0; i < kN; ++i) {
    uint32_t s = 0;
    for (int j = 0; j < 8; ++j)
      s |= iq2tab::code_of(static_cast<uint32_t>((grid[i] >> (8 * j)) & 0xFFu)) << (4 * j);
    t.v[i] = s;
  }
  return t;
}
constexpr U32s<128> make_sign_nib() {
  U32s<128> t{};
  for (uint32_t s7 = 0; s7 < 128; ++s7) {
    const uint32_t s8 = iq2tab::sign8(s7);
    uint32_t v = 0;
    for (int j = 0; j < 8; ++j)
      if ((s8 >> j) & 1u) v |= 4u << (4 * j);
    t.v[s7] = v;
  }
  return t;
}
}  // namespace tab

static __device__ const tab::U32s<256> g_grid_nib_xxs =
    tab::make_grid_nib<256>(fmt::ggml::kIq2xxsGrid);
static __device__ const tab::U32s<512> g_grid_nib_xs =
    tab::make_grid_nib<512>(fmt::ggml::kIq2xsGrid);
static __device__ const tab::U32s<128> g_sign_nib = tab::make_sign_nib();
/// kTabQ: the grid and sign words, each replicated 4 times (one 16-byte store's quad).
template <int kN>
struct Q32s {
  alignas(16) uint32_t v[kN][4];
};
template <int kN>
constexpr Q32s<kN> make_tabq(const tab::U32s<kN>& w) {
  Q32s<kN> q{};
  for (int e = 0; e < kN; ++e)
    for (int r = 0; r < 4; ++r) q.v[e][r] = w.v[e];
  return q;
}
static __device__ const Q32s<256> g_tabq_xxs =
    make_tabq<256>(tab::make_grid_nib<256>(fmt::ggml::kIq2xxsGrid));
static __device__ const Q32s<512> g_tabq_xs =
    make_tabq<512>(tab::make_grid_nib<512>(fmt::ggml::kIq2xsGrid));
static __device__ const Q32s<128> g_tabq_sign = make_tabq<128>(tab::make_sign_nib());

/// Source bytes {8, 25, 43, 0} and {-8, -25, -43, 0}: selector nibble c | 4 sign.
inline constexpr uint32_t kSrcLo = 0x002B1908u, kSrcHi = 0x00D5E7F8u;

__device__ __forceinline__ uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr));
  return v;
}

/// m16n8k32 s8 x s8 + s32.
__device__ __forceinline__ void imma16832(int c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// The int8 values of one entry (half kHi of word w: grid index | sign7 << 9): values 0-3 in lo,
/// 4-7 in hi. clsw: the lane's copy offsets (IQ2_XXS: byte 0 4 L, byte 1 4 L + 128, the
/// addresses one PRMT each; IQ2_XS: 4 L, the addresses shift, mask and OR).
template <WFmt F, bool kHi>
__device__ __forceinline__ void entry_s8(uint32_t w, uint32_t clsw, uint32_t tab0, uint32_t slo,
                                         uint32_t shi, uint32_t& lo, uint32_t& hi) {
  uint32_t ga, sa;
  if constexpr (F == WFmt::kIq2Xs) {
    constexpr uint32_t kSign = 512 * 128;
    ga = lop3<0xEA>(kHi ? w >> 9 : w << 7, 0xFF80u, clsw) + tab0;  // (idx << 7) | 4 L
    sa = lop3<0xEA>(kHi ? w >> 18 : w >> 2, 0x3F80u, clsw) + (tab0 + kSign);
  } else {
    ga = prmt(w, clsw, kHi ? 0x7624u : 0x7604u) + tab0;
    sa = prmt(w, clsw, kHi ? 0x7635u : 0x7615u) + tab0;
  }
  const uint32_t sel = lds32(ga) | lds32(sa);
  lo = prmt(slo, shi, sel);
  hi = prmt(slo, shi, sel >> 16);
}

/// One batch (8 atoms = one 256-K block) of a lane: slot g of atoms t and 4 + t, both rows'
/// fp16 d and sub-scale words.
template <WFmt F>
struct Batch {
  uint4 w[2];
  uint32_t d[2];
  uint2 s[2];  // sub-scales (IQ2_XXS: .x, one nibble per atom; IQ2_XS: one byte per atom)
};

/// Where the lane's loads of a batch read (row g's scale words; row g + 8's are d8 / s8 bytes
/// on), advanced batch by batch within a tile (64-bit bases computed once per tile).
struct Cursor {
  const uint8_t* w;
  const uint8_t* d;
  const uint8_t* s;
};
/// kSb: sub-scale bytes of a batch per row (IQ2_XXS 4, IQ2_XS 8).
template <int kSb>
__device__ __forceinline__ Cursor cursor_at(const LinearParams& p, int tile, int b, int g, int t) {
  const int64_t r0 = static_cast<int64_t>(tile) * 16 + g;
  return Cursor{p.wvals + (static_cast<int64_t>(tile) * p.kvec + 8 * b + t) * 128 + g * 16,
                p.wscale + r0 * p.scale_ld * 2 + b * 2, p.wscale2 + r0 * p.scale2_ld + b * kSb};
}
/// The cursor of the warp's next unit: the next batch of the tile, or batch 0 of the next tile.
template <int kSb>
__device__ __forceinline__ void cursor_next(Cursor& c, const LinearParams& p, int tile, int b,
                                            int g, int t) {
  if (b == 0) {
    c = cursor_at<kSb>(p, tile, 0, g, t);
  } else {
    c.w += 1024;
    c.d += 2;
    c.s += kSb;
  }
}

/// The lane's batch at the cursor (weights not allocated in L1: the activations live in shared
/// memory, the weights are read once).
template <WFmt F>
__device__ __forceinline__ void load_subs(const Cursor& c, int s8, Batch<F>& B) {
  if constexpr (F == WFmt::kIq2Xs) {
    B.s[0] = __ldg(reinterpret_cast<const uint2*>(c.s));
    B.s[1] = __ldg(reinterpret_cast<const uint2*>(c.s + s8));
  } else {
    B.s[0] = make_uint2(__ldg(reinterpret_cast<const uint32_t*>(c.s)), 0u);
    B.s[1] = make_uint2(__ldg(reinterpret_cast<const uint32_t*>(c.s + s8)), 0u);
  }
}
template <WFmt F>
__device__ __forceinline__ void load_d(const Cursor& c, int d8, Batch<F>& B) {
  B.d[0] = __ldg(reinterpret_cast<const uint16_t*>(c.d));
  B.d[1] = __ldg(reinterpret_cast<const uint16_t*>(c.d + d8));
}
/// kPeel: a batch's addresses (rows g and g + 8), from per-tile bases by at().
struct Addr {
  const uint8_t *w, *d, *d8, *s, *s8;
  template <int kSb>
  __device__ __forceinline__ Addr at(int b) const {
    return Addr{w + b * 1024, d + b * 2, d8 + b * 2, s + b * kSb, s8 + b * kSb};
  }
};
template <WFmt F>
__device__ __forceinline__ void load_subs(const Addr& a, int, Batch<F>& B) {
  if constexpr (F == WFmt::kIq2Xs) {
    B.s[0] = __ldg(reinterpret_cast<const uint2*>(a.s));
    B.s[1] = __ldg(reinterpret_cast<const uint2*>(a.s8));
  } else {
    B.s[0] = make_uint2(__ldg(reinterpret_cast<const uint32_t*>(a.s)), 0u);
    B.s[1] = make_uint2(__ldg(reinterpret_cast<const uint32_t*>(a.s8)), 0u);
  }
}
template <WFmt F>
__device__ __forceinline__ void load_d(const Addr& a, int, Batch<F>& B) {
  B.d[0] = __ldg(reinterpret_cast<const uint16_t*>(a.d));
  B.d[1] = __ldg(reinterpret_cast<const uint16_t*>(a.d8));
}
template <WFmt F>
__device__ __forceinline__ void load_batch(const Cursor& c, int d8, int s8, Batch<F>& B) {
  B.w[0] = ldg_na128(c.w);
  B.w[1] = ldg_na128(c.w + 512);
  load_d(c, d8, B);
  load_subs(c, s8, B);
}

/// Values 4 i .. 4 i + 3 of a chunk: R bits of fma(x, 2^(13-E), 1.5 * 2^23 + 128), bits 0-22 =
/// 2^22 + X + 128 (|X| <= 2^14); X = a 2^8 + b with signed digits b = ((X + 128) mod 256) - 128
/// (byte 0 xor 0x80) and a = floor((X + 128) / 2^8) in [-64, 64] (byte 1).
__device__ __forceinline__ void split4(const uint32_t R[4], uint32_t& aw, uint32_t& bw) {
  const uint32_t t01 = prmt(R[0], R[1], 0x5410u), t23 = prmt(R[2], R[3], 0x5410u);
  bw = prmt(t01, t23, 0x6420u) ^ 0x80808080u;
  aw = prmt(t01, t23, 0x7531u);
}

/// Lanes that supply no activations keep zero registers (kPred): the load only where on.
__device__ __forceinline__ void lds128_if(uint4& v, uint32_t addr, bool on) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n @p ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n}"
      : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)
      : "r"(addr), "r"(static_cast<uint32_t>(on)));
}

}  // namespace imma

/// grid = (<= n16 CTAs, 1, 1), 32 kW threads, dynamic shared memory imma::smem_bytes<F>(K, kM).
/// IQ2_XXS / IQ2_XS, K % 256 == 0, 16-byte aligned activations, no K split (p.split == 1). kM = M
/// tokens (1, 2): one piece set per group and token, columns (2t, 2t + 1) its pieces a, b. kV:
/// imma::kP2 (required) | kPred.
template <WFmt F, class T, int kW, int kM, int kV>
__global__ void __launch_bounds__(32 * kW, 1) linear_gemv_imma_kernel(const LinearParams p) {
  using namespace imma;
  constexpr int kThr = 32 * kW;
  constexpr bool kXs = F == WFmt::kIq2Xs;
  constexpr int kE = kXs ? 512 : 256, kSb = kXs ? 8 : 4;
  constexpr int kTabBytes = tab_bytes<F>(), kSrcOff = src_off<F>(), kZeroOff = zero_off<F>();
  static_assert((kV & kP2) != 0, "two activation pieces");
  constexpr bool kPr = (kV & kPred) != 0, kTl = (kV & kTile) != 0, kIp = (kV & kInPlace) != 0;
  static_assert(kIp == kTl, "the loop per tile runs with the in-place loads");
  constexpr bool kPl = (kV & kPeel) != 0, kIv = (kV & kIlv) != 0, kXf = (kV & kXFirst) != 0;
  constexpr bool kTq = (kV & kTabQ) != 0;
  constexpr int kXq = (kV & kXAll) != 0 ? 4 : 1;  // activation loads in flight per thread
  static_assert(!kTq || !kXf, "kTabQ loads the table words before the wait");
  static_assert(!kIv || kTl, "interleaved halves in the loop per tile");
  static_assert(!kPl || kIp, "the peeled loop with the in-place loads");
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ float part[kW][2][kM][16];
  __shared__ __align__(8) int ptile[kW][2];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int n16 = static_cast<int>(p.n16);
  const int atoms = static_cast<int>(p.K / 32);
  const int batches = atoms / 8;
  // The CTA's tiles [t0, t0 + ntl) and the warp's units [ua, ue) of its ntl x batches.
  const int G = static_cast<int>(gridDim.x), bx = static_cast<int>(blockIdx.x);
  const int tq = n16 / G, tr = n16 % G;
  const int t0 = bx * tq + min(bx, tr);
  const int ntl = tq + (bx < tr ? 1 : 0);
  const int nu = ntl * batches;
  const int ua = static_cast<int>(static_cast<int64_t>(nu) * warp / kW);
  const int ue = static_cast<int>(static_cast<int64_t>(nu) * (warp + 1) / kW);
  int tile = t0 + (ua < ue ? ua / batches : 0), b = ua < ue ? ua % batches : 0;

  int d8 = static_cast<int>(16 * p.scale_ld), s8 = static_cast<int>(8 * p.scale2_ld);
  Batch<F> cur;
  Cursor ld = cursor_at<kSb>(p, tile, b, g, t);
  if (ua < ue) load_batch(ld, d8, s8, cur);
  // The position of the latest load (ltile, lb).
  int ltile = tile, lb = b;
  const auto step = [&]() {
    if (++lb == batches) {
      lb = 0;
      ++ltile;
    }
    cursor_next<kSb>(ld, p, ltile, lb, g, t);
  };

  // Tables: 384 (IQ2_XS 640) entries x 32 copies as 16-byte stores (4 copies each); all of a
  // thread's words loaded first (one round trip), stored after the first activation load is out.
  // kXFirst: the words loaded after that activation load (round 102's warp sampling: ptxas copied
  // a word into the store's registers before griddepcontrol.wait, so the activation load went out
  // only after the tables' round trip, the two latencies in series).
  // kTabQ: the words pre-replicated as 16-byte quads (g_tabq_*), one entry per thread and pass
  // (IQ2_XXS 1, IQ2_XS 2 loads instead of 6 / 10): the quad lands in the store's registers as
  // loaded, so ptxas has no copy to hoist above griddepcontrol.wait, and both formats load the
  // words before the wait.
  constexpr int kTabChunks = (kE + 128) * 8;
  constexpr int kTabPass = kTq ? (kE + 128 + kThr - 1) / kThr : (kTabChunks + kThr - 1) / kThr;
  using TabW = std::conditional_t<kTq, uint4, uint32_t>;
  TabW tw[kTabPass];
  const auto tab_load = [&]() {
#pragma unroll
    for (int it = 0; it < kTabPass; ++it) {
      if constexpr (kTq) {
        const int e = static_cast<int>(threadIdx.x) + it * kThr;
        // Each entry is read by one thread of the CTA (no L1 reuse). ptxas puts these loads after
        // griddepcontrol.wait in every form tried (session 29 SASS: __ldg, volatile, predicated or
        // not); the wait's p.pdl branch keeps the first unit's weight loads above it.
        const uint4* q = reinterpret_cast<const uint4*>(
            e < kE ? (kXs ? g_tabq_xs.v[e] : g_tabq_xxs.v[e]) : g_tabq_sign.v[min(e - kE, 127)]);
        tw[it] = ldg_stream(q);
      } else {
        const int e = (static_cast<int>(threadIdx.x) + it * kThr) >> 3;
        tw[it] = e < kE         ? (kXs ? g_grid_nib_xs.v[e] : g_grid_nib_xxs.v[e])
                 : e < kE + 128 ? g_sign_nib.v[e - kE]
                                : 0u;
      }
    }
  };
  if constexpr (!kXf) tab_load();
  if (threadIdx.x < 4)
    reinterpret_cast<uint32_t*>(smem + kSrcOff)[threadIdx.x] = threadIdx.x < 2 ? kSrcLo : kSrcHi;
  if (threadIdx.x < 32) reinterpret_cast<uint32_t*>(smem + kZeroOff)[threadIdx.x] = 0u;
  if (lane < 2) ptile[warp][lane] = -1;
  // kTabQ: the wait behind a branch on p.pdl (without PDL it returns at once): ptxas scheduled an
  // unconditional griddepcontrol.wait above the table and weight loads (SASS), so they waited for
  // the previous grid.
  if (!kTq || p.pdl != 0) griddep_wait();
  // kTile: the output scale's load issued here (its latency under the staging), not after the
  // barrier (round 101's warp sampling: ~1 % of 4096x4096's samples waited on it there).
  float mult = p.out_mult;
  if constexpr (kTl)
    if (p.alpha != nullptr) mult *= __ldcg(p.alpha);
  // Activation staging: chunks of 8 values, 4 per atom (lanes 4k .. 4k + 3 of a warp); token m's
  // piece p at piece array 2 m + p. Each pass's load is issued before the previous pass converts.
  const int64_t PS = piece_stride(atoms);
  uint8_t* pieces = smem + kTabBytes;
  float* pscale = reinterpret_cast<float*>(pieces + 2 * kM * PS);
  {
    const int chunks = atoms * 4;
    const auto xload = [&](int ct) {
      const int m = kM > 1 && ct >= chunks ? 1 : 0;
      // ld.global.cg, not .nc: the activations may come from the PDL predecessor, and ptxas moved
      // .nc loads above griddepcontrol.wait (session 27: IQ2_XS's kernels since session 25 read
      // them before the wait).
      return ct < kM * chunks ? __ldcg(reinterpret_cast<const uint4*>(
                                    static_cast<const uint16_t*>(p.x) + m * p.ldx +
                                    static_cast<int64_t>(ct - m * chunks) * 8))
                              : make_uint4(0u, 0u, 0u, 0u);
    };
    // kXAll: the thread's first kXq passes' loads all issued at once (K <= 16384 at M = 1: every
    // pass; session 28's stamps: staging 2.6 K cycles at K = 14336 against 1.2 K at 4096, one
    // round trip per pass when each pass's load waited for the previous pass's data).
    uint4 vq[kXq];
#pragma unroll
    for (int j = 0; j < kXq; ++j) vq[j] = xload(static_cast<int>(threadIdx.x) + j * kThr);
    if constexpr (kXf) tab_load();
    uint4* tv = reinterpret_cast<uint4*>(smem);
#pragma unroll
    for (int it = 0; it < kTabPass; ++it) {
      if constexpr (kTq) {
        // Entry e's 8 chunks, lane l's chunk c at (c + l) mod 8: 8 lanes cover the 32 banks.
        const int e = static_cast<int>(threadIdx.x) + it * kThr;
        const int at = kXs ? e * 128 : e < kE ? e * 256 : (e - kE) * 512 + 128;
        if (e < kE + 128)
#pragma unroll
          for (int c = 0; c < 8; ++c) tv[at / 16 + ((c + lane) & 7)] = tw[it];
      } else {
        const int i = static_cast<int>(threadIdx.x) + it * kThr, e = i >> 3;
        const int at = kXs ? e * 128 : e < kE ? e * 256 : (e - kE) * 512 + 128;
        if (i < kTabChunks) tv[at / 16 + (i & 7)] = make_uint4(tw[it], tw[it], tw[it], tw[it]);
      }
    }
    for (int base = 0; base < kM * chunks; base += kXq * kThr) {
#pragma unroll
      for (int j = 0; j < kXq; ++j) {
        if (base + j * kThr >= kM * chunks) break;  // CTA-uniform (the shuffles below)
        const int ct = base + j * kThr + static_cast<int>(threadIdx.x);
        const int m = kM > 1 && ct >= chunks ? 1 : 0, c = ct - m * chunks;
        const bool ok = ct < kM * chunks;
        const uint4 v = vq[j];
        if (base + (kXq + j) * kThr < kM * chunks) vq[j] = xload(ct + kXq * kThr);
        const uint32_t vw[4] = {v.x, v.y, v.z, v.w};
        float f[8];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          if constexpr (T::kFp16) {
            const float2 h = __half22float2(*reinterpret_cast<const __half2*>(&vw[i]));
            f[2 * i] = h.x;
            f[2 * i + 1] = h.y;
          } else {
            f[2 * i] = __uint_as_float(vw[i] << 16);
            f[2 * i + 1] = __uint_as_float(vw[i] & 0xFFFF0000u);
          }
        }
        // The block's largest |x| as bits (integer max: a NaN or Inf, exponent field 255, wins,
        // where fmaxf would drop a NaN), over the atom's 4 lanes.
        uint32_t mx = 0u;
#pragma unroll
        for (int i = 0; i < 8; ++i) mx = max(mx, __float_as_uint(f[i]) & 0x7FFFFFFFu);
        mx = max(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 1));
        mx = max(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 2));
        // E = floor(log2 max |x|), at least -100 (2^(E - 16) stays a normal fp32); a non-finite
        // block (E = 128) gets a NaN scale, so its rows' outputs are NaN as the reference's are
        // non-finite (IQ2 weights are never 0).
        const int E = max(static_cast<int>(mx >> 23) - 127, -100);
        // X = rint(x 2^(13 - E)); the atom's scale is 2^(E - 16): its inverse and d / 8.
        const float up = __uint_as_float(static_cast<uint32_t>(140 - E) << 23);
        uint32_t R[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) R[i] = __float_as_uint(fmaf(f[i], up, 12583040.f));
        uint32_t aw[2], bw[2];
        split4(R, aw[0], bw[0]);
        split4(R + 4, aw[1], bw[1]);
        if (ok) {
          uint8_t* pc = pieces + 2 * m * PS + static_cast<int64_t>(c) * 8;  // atom 32 + 8 (c % 4)
          *reinterpret_cast<uint2*>(pc) = make_uint2(aw[0], aw[1]);
          *reinterpret_cast<uint2*>(pc + PS) = make_uint2(bw[0], bw[1]);
          // Atom a's scale at 8 (a / 8) + 2 (a % 4) + (a % 8) / 4 (a lane's two halves in one
          // 8-byte load).
          const int at = c >> 2, sa = (at & ~7) + 2 * (at & 3) + ((at >> 2) & 1);
          if ((c & 3) == 0)
            pscale[m * atoms + sa] = E > 127
                                         ? __uint_as_float(0x7FC00000u)
                                         : __uint_as_float(static_cast<uint32_t>(111 + E) << 23);
        }
      }
    }
  }
  const uint32_t tab0 = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  uint32_t clsw = kXs ? 4u * lane : 4u * lane | ((4u * lane + 128u) << 8);
  // Lanes g = 2t + p supply piece p (a / b) of atom t in set m (token m); the others read zero
  // bytes (kZeroOff, stride 0): no predicated loads, no registers zeroed per atom; kPred: the
  // other lanes load nothing and keep zero registers (loop-carried).
  constexpr int kSets = kM;
  const bool act1 = (g >> 1) == t;
  uint32_t xo[kSets], xs[kSets];
  bool xon[kSets];
#pragma unroll
  for (int k = 0; k < kSets; ++k) {
    const bool on = act1;
    const int arr = 2 * k + (g & 1);
    // Quarter warp q's data of set k (lanes g = 2q, 2q + 1; arrays 2k, 2k + 1, each 4 banks on)
    // sits in banks 8 (q + k) .. + 11 over the two loads; its zero lanes read 32 bytes at banks
    // 8 (q + k + 2) .. (mod 32): no conflict.
    const uint32_t zo = kZeroOff + 32u * (((g >> 1) + k + 2) & 3);
    xo[k] = tab0 + (on ? kTabBytes + static_cast<uint32_t>(arr * PS) + 32 * t : zo);
    xs[k] = on ? 32 : 0;
    xon[k] = on;
  }
  // The sub-scale shift (IQ2_XXS 4 t, IQ2_XS 8 t) and the lane's atom-scale offset (2 t floats).
  uint32_t ssh_t = (kXs ? 8u : 4u) * t, ps_t = 2u * t;
  // kTile: the lane constants and the row strides pass through shared memory (written by warp 0
  // before the barrier), since ptxas otherwise recomputes them from the thread index and the
  // kernel parameters inside the batch loop (session 27 SASS: ~20 instructions per batch); loaded
  // values it keeps in registers.
  __shared__ uint32_t lconst[5 + 2 * kM][32];
  static_assert(sizeof(part) + sizeof(ptile) + sizeof(lconst) == static_smem_bytes(kW, kM));
  if constexpr (kTl) {
    if (warp == 0) {
      lconst[0][lane] = clsw;
      lconst[1][lane] = ssh_t;
      lconst[2][lane] = ps_t;
      lconst[3][lane] = static_cast<uint32_t>(d8);
      lconst[4][lane] = static_cast<uint32_t>(s8);
#pragma unroll
      for (int k = 0; k < kSets; ++k) {
        lconst[5 + 2 * k][lane] = xo[k];
        lconst[6 + 2 * k][lane] = xon[k] ? 1u : 0u;
      }
    }
  }
  __syncthreads();
  if constexpr (kTl) {
    clsw = lconst[0][lane];
    ssh_t = lconst[1][lane];
    ps_t = lconst[2][lane];
    d8 = static_cast<int>(lconst[3][lane]);
    s8 = static_cast<int>(lconst[4][lane]);
#pragma unroll
    for (int k = 0; k < kSets; ++k) {
      xo[k] = lconst[5 + 2 * k][lane];
      xon[k] = lconst[6 + 2 * k][lane] != 0u;
      xs[k] = xon[k] ? 32u : 0u;
    }
  }
  // Two copies read by lane parity (a uniform load would let ptxas keep the words in uniform
  // registers and copy them before every PRMT).
  const uint32_t slo = reinterpret_cast<const uint32_t*>(smem + kSrcOff)[lane & 1];
  const uint32_t shi = reinterpret_cast<const uint32_t*>(smem + kSrcOff)[2 + (lane & 1)];
  uint4 xz[2][kSets][2];  // kPred: the halves' activation registers (zero where not on)
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int k = 0; k < kSets; ++k) xz[h][k][0] = xz[h][k][1] = make_uint4(0u, 0u, 0u, 0u);
  if constexpr (!kTl)
    if (p.alpha != nullptr) mult *= *p.alpha;

  float acc[kM][2] = {};  // token m, rows g, g + 8 over the lane's atoms
  int tile_b0 = b;        // the first batch of the current tile in the warp's range
  const int first_tile = tile;
  // Batch b of the current tile (weights in cur) into acc. kInPlace: pf, the next batch's loads
  // from nc into cur, each part once its values are used (sub-scales after their shift, half h's
  // weights after its decode, d last): ~0.7-1 batch of latency cover instead of 1, no copies.
  const auto compute = [&](Batch<F>& cur, int b, bool pf, const auto& nc) {
    float bacc[kM][2] = {};
    float2 ps2[kM];
#pragma unroll
    for (int m = 0; m < kM; ++m)
      ps2[m] = *reinterpret_cast<const float2*>(pscale + m * atoms + 8 * b + ps_t);
    // kTile: the rows' sub-scale words shifted to the lane's atoms once per batch (IQ2_XXS: atom
    // t's nibble at bit 0, 4 + t's at 16; IQ2_XS: byte t of each half's word at bit 0).
    uint32_t ssh[2][2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      ssh[r][0] = cur.s[r].x >> ssh_t;
      ssh[r][1] = kXs ? cur.s[r].y >> ssh_t : 0u;
    }
    if constexpr (kIp)
      if (pf) load_subs(nc, s8, cur);
    // Half h (atoms 4h .. 4h + 3): its activation registers, its MMA chains (IQ2_XS: groups 0-1
    // (K 0-15) and 2-3 (16-31) of an atom carry their own sub-scales: two chains per piece set,
    // [1] groups 2-3).
    uint4 xv[2][kSets][2];
    int cs[2][kSets][kXs ? 2 : 1][4] = {};
    const auto act = [&](int h) {
      const uint32_t A0 = 8 * b + 4 * h;  // the half batch's first atom
#pragma unroll
      for (int k = 0; k < kSets; ++k) {
        const uint32_t xa = xo[k] + xs[k] * A0;
        if constexpr (kPr) {
          lds128_if(xz[h][k][0], xa, xon[k]);
          lds128_if(xz[h][k][1], xa + 16, xon[k]);
          xv[h][k][0] = xz[h][k][0];
          xv[h][k][1] = xz[h][k][1];
        } else {
          xv[h][k][0] = lds128(xa);
          xv[h][k][1] = lds128(xa + 16);
        }
      }
    };
    // Group q of half h: its entries decoded, one MMA per piece set.
    const auto group = [&](int h, int q) {
      // Slot words: row g groups 0|1, 2|3, row g + 8 groups 0|1, 2|3.
      const uint4 wv = cur.w[h];
      const uint32_t wg = q < 2 ? wv.x : wv.y, w8 = q < 2 ? wv.z : wv.w;
      uint32_t a[4];
      if (q & 1) {
        entry_s8<F, true>(wg, clsw, tab0, slo, shi, a[0], a[2]);
        entry_s8<F, true>(w8, clsw, tab0, slo, shi, a[1], a[3]);
      } else {
        entry_s8<F, false>(wg, clsw, tab0, slo, shi, a[0], a[2]);
        entry_s8<F, false>(w8, clsw, tab0, slo, shi, a[1], a[3]);
      }
      const int ch = kXs ? q >> 1 : 0;
#pragma unroll
      for (int k = 0; k < kSets; ++k) {
        const uint4 x = xv[h][k][q >> 1];
        imma16832(cs[h][k][ch], a, (q & 1) ? x.z : x.x, (q & 1) ? x.w : x.y);
      }
    };
    // Half h's sums: lane (g, t) holds atom 4h + t's pieces a, b of token m (cs[h][m][.][0], [1];
    // row g + 8: [2], [3]); its sub-scale(s) (IQ2_XXS: nibble 4h + t of the row's word; IQ2_XS:
    // byte t of word h, low nibble K 0-15, high 16-31).
    const auto half_end = [&](int h) {
      if constexpr (kIp)
        if (pf) cur.w[h] = ldg_na128(nc.w + 512 * h);
      float ps[kM];
#pragma unroll
      for (int m = 0; m < kM; ++m) ps[m] = h ? ps2[m].y : ps2[m].x;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        // The sub-scales applied in int32 (|A 2^8 + B| (2s + 1) <= 2^29.5 over both IQ2_XS
        // chains), one conversion per row and atom; d / 8 is in the atom's scale.
        int Xs[kM] = {};
#pragma unroll
        for (int ch = 0; ch < (kXs ? 2 : 1); ++ch) {
          int fi;
          if constexpr (kTl) {
            // 2s + 1 from the shifted word's nibble (IQ2_XXS: at bit 16 h; IQ2_XS: at bit 4 ch of
            // half h's word): one shift, one LOP3.
            const uint32_t v = ssh[r][kXs ? h : 0];
            const uint32_t sv = kXs ? (ch ? v >> 3 : v << 1) : (h ? v >> 15 : v << 1);
            fi = static_cast<int>(lop3<0xEA>(sv, 0x1Eu, 1u));
          } else {
            const uint32_t sw = kXs ? (h ? cur.s[r].y : cur.s[r].x) >> (8 * t + 4 * ch)
                                    : cur.s[r].x >> (16 * h + 4 * t);
            fi = static_cast<int>(((sw << 1) & 0x1Eu) | 1u);
          }
#pragma unroll
          for (int m = 0; m < kM; ++m)
            Xs[m] += (cs[h][m][ch][2 * r] * 256 + cs[h][m][ch][2 * r + 1]) * fi;
        }
#pragma unroll
        for (int m = 0; m < kM; ++m)
          bacc[m][r] = fmaf(static_cast<float>(Xs[m]), ps[m], bacc[m][r]);
      }
    };
    if constexpr (kIv) {
      act(0);
      act(1);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        group(0, q);
        group(1, q);
      }
      half_end(0);
      half_end(1);
    } else {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        act(h);
#pragma unroll
        for (int q = 0; q < 4; ++q) group(h, q);
        half_end(h);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float d = half_bits_f32(cur.d[r] & 0xFFFFu);
#pragma unroll
      for (int m = 0; m < kM; ++m) acc[m][r] = fmaf(bacc[m][r], d, acc[m][r]);
    }
    if constexpr (kIp)
      if (pf) load_d(nc, d8, cur);
  };
  // The warp's part of tile tl ends (whole: all of its batches): the quad's atoms added (fixed
  // order), stored, or kept in part[] for the CTA's tail.
  const auto tile_end = [&](int tl, bool whole) {
    float v[kM][2];
#pragma unroll
    for (int m = 0; m < kM; ++m)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        v[m][r] = acc[m][r];
        v[m][r] += __shfl_xor_sync(0xFFFFFFFFu, v[m][r], 1);
        v[m][r] += __shfl_xor_sync(0xFFFFFFFFu, v[m][r], 2);
        acc[m][r] = 0.f;
      }
    if (whole) {
      if (t == 0) {
#pragma unroll
        for (int m = 0; m < kM; ++m)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int64_t row = static_cast<int64_t>(tl) * 16 + g + 8 * r;
            if (row < p.N) store_out_elem(p, m, row, v[m][r], mult);
          }
      }
    } else {
      const int slot = tl == first_tile ? 0 : 1;
      if (t == 0) {
#pragma unroll
        for (int m = 0; m < kM; ++m) {
          part[warp][slot][m][g] = v[m][0];
          part[warp][slot][m][g + 8] = v[m][1];
        }
      }
      if (lane == 0) ptile[warp][slot] = tl;
    }
  };
  if constexpr (kPl) {
    // kPeel: per tile, the row bases of this tile and the next (64-bit products once per tile);
    // the batch loop's loads at base + index x stride, the tile's last batch (which loads the
    // next tile's first) peeled out of it.
    const auto rows_at = [&](int tl) {
      const Cursor c = cursor_at<kSb>(p, tl, 0, g, t);
      return Addr{c.w, c.d, c.d + d8, c.s, c.s + s8};
    };
    Addr rb = rows_at(tile);
    for (int u = ua; u < ue;) {
      const int b1 = min(batches, b + (ue - u));
      const bool more = u + (b1 - b) < ue;
      u += b1 - b;
      const Addr nb = more ? rows_at(tile + 1) : rb;
      for (; b + 1 < b1; ++b) compute(cur, b, true, rb.template at<kSb>(b + 1));
      compute(cur, b, more, nb);
      tile_end(tile, tile_b0 == 0 && b1 == batches);
      rb = nb;
      tile_b0 = 0;
      b = 0;
      ++tile;
    }
  } else if constexpr (kTl) {
    // Session 27: a loop per tile (batches [b, b1) of the warp's range in it), so that a batch
    // pays no tile checks; the next batch's load is a stride on within the tile, the next tile's
    // first batch at its last.
    for (int u = ua; u < ue;) {
      const int b1 = min(batches, b + (ue - u));
      const bool more = u + (b1 - b) < ue;
      u += b1 - b;
      // The next tile's cursor, computed before the batch loop (no 64-bit products in it).
      const Cursor nx = more ? cursor_at<kSb>(p, tile + 1, 0, g, t) : ld;
      for (; b < b1; ++b) {
        const bool in = b + 1 < b1;
        if (in) {
          ld.w += 1024;
          ld.d += 2;
          ld.s += kSb;
        } else {
          ld = nx;
        }
        compute(cur, b, in || more, ld);
      }
      tile_end(tile, tile_b0 == 0 && b1 == batches);
      tile_b0 = 0;
      b = 0;
      ++tile;
    }
  } else {
    for (int u = ua; u < ue; ++u) {
      Batch<F> nxt;
      int nb = b + 1, ntile = tile;
      if (nb == batches) {
        nb = 0;
        ++ntile;
      }
      if (u + 1 < ue) {
        step();
        load_batch(ld, d8, s8, nxt);
      }
      compute(cur, b, false, ld);
      if (nb == 0 || u + 1 == ue) {
        tile_end(tile, tile_b0 == 0 && nb == 0);
        tile_b0 = 0;
      }
      tile = ntile;
      b = nb;
      cur = nxt;
    }
  }
  griddep_launch_dependents();
  __syncthreads();
  // Tiles covered in part by several warps: their partials in warp order (kTile: every warp's
  // slots read at once, one shared-memory round trip).
  for (int i = static_cast<int>(threadIdx.x); i < kM * ntl * 16; i += kThr) {
    const int m = kM > 1 ? i / (ntl * 16) : 0, it = i - m * ntl * 16;
    const int tl = t0 + (it >> 4), row16 = it & 15;
    float s = 0.f;
    bool any = false;
    if constexpr (kTl) {
      int pt[kW][2];
      float pv[kW][2];
#pragma unroll
      for (int w = 0; w < kW; ++w) {
        const int2 q = *reinterpret_cast<const int2*>(ptile[w]);
        pt[w][0] = q.x;
        pt[w][1] = q.y;
#pragma unroll
        for (int sl = 0; sl < 2; ++sl) pv[w][sl] = part[w][sl][m][row16];
      }
#pragma unroll
      for (int w = 0; w < kW; ++w)
#pragma unroll
        for (int sl = 0; sl < 2; ++sl)
          if (pt[w][sl] == tl) {
            s += pv[w][sl];
            any = true;
          }
    } else {
      for (int w = 0; w < kW; ++w)
#pragma unroll
        for (int sl = 0; sl < 2; ++sl)
          if (ptile[w][sl] == tl) {
            s += part[w][sl][m][row16];
            any = true;
          }
    }
    const int64_t row = static_cast<int64_t>(tl) * 16 + row16;
    if (any && row < p.N) store_out_elem(p, m, row, s, mult);
  }
}

}  // namespace b12x::gemm::lin
