// Small-M (decode, M <= 16) GEMV of the GGML weight formats (IQ2_XXS, IQ2_XS, Q8_0) with BF16 /
// FP16 activations, on the packed layout of gemm/linear_layout.h (the weights every other
// kernel reads; no second copy).
//
// Why a separate kernel: the weight-streaming decode kernel (linear_decode.cuh) decodes IQ2 with
// two 4-byte table loads per MMA register (grid pair, sign pair) whose 8 distinct entries per
// warp instruction collide in the banks (~2.6-way): ~40 shared-memory wavefronts per 128 bytes
// of IQ2 weights, i.e. ~0.8 TB/s at one wavefront per cycle per SM. Here:
//  - IQ2: each lane decodes whole 8-value entries. A 4-byte word per lane is loaded straight
//    from global memory (the quad's four words are the atom's 16-byte slot; one shuffle with the
//    neighbour lane hands each lane its two entries); an entry becomes its four BF16 / FP16 pairs
//    with four PRMTs whose selectors come from two 8-byte table loads (grid index -> per-value
//    source-byte selectors, sign pattern -> selector bits picking the negated high byte). The
//    tables are replicated 16 times in shared memory so that lane L reads banks 2(L%16), 2(L%16)+1:
//    the loads of a half-warp never conflict (4 wavefronts per 128 bytes of weights and table).
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

/// Warps per CTA of the 8-warp kernels (kW; 16 / 24: one CTA per SM, the IQ2 tables filled once
/// per SM instead of once per each of 2-3 CTAs).
inline constexpr int kWarps = 8;
/// Copies of the IQ2 tables (lane classes of a half-warp's 8-byte loads): 16 make every
/// half-warp's loads conflict-free.
inline constexpr int kClasses = 16;
template <WFmt F>
constexpr int grid_entries() {
  return F == WFmt::kIq2Xs ? 512 : 256;
}
/// Atoms (32 K) per batch: an IQ2 block of 256 K (one fp16 d per row); 4 for Q8_0 (8 measured
/// slower in round 34: 4096x4096 M = 1 7.45 -> 8.57 us).
template <WFmt F>
constexpr int batch_atoms() {
  return F == WFmt::kQ8_0 ? 4 : 8;
}
/// Copies of the grid table: 16, or 8 for the IQ2_XS kernels capped for 3 CTAs per SM (kO3),
/// whose 16 copies (64 KB) would leave room for 2 CTAs only. With 8 copies (64 bytes per entry)
/// lanes L and L + 8 of a half-warp share a copy: their loads conflict when both entries have
/// the same parity (2 wavefronts per half-warp instead of 1).
template <WFmt F, bool kO3>
constexpr int grid_copies() {
  return F == WFmt::kIq2Xs && kO3 ? 8 : kClasses;
}
/// Dynamic shared memory: the replicated IQ2 tables (grid selectors, then sign selectors, then
/// three PRMT source words in the last 16 bytes).
template <WFmt F, bool kO3 = false>
constexpr int smem_bytes() {
  return F == WFmt::kQ8_0 ? 0
                          : (grid_entries<F>() * grid_copies<F, kO3>() + 128 * kClasses) * 8 + 16;
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
using iq2tab::code_of;
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
    const uint32_t s8 = iq2tab::sign8(s7);
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
/// The low source word; the kernel keeps it in shared memory after the tables and loads it once
/// (a constant in a register is rematerialized by ptxas before every PRMT from a uniform
/// register: 8 extra moves per atom).
template <class T>
__device__ __forceinline__ constexpr uint32_t src_lo() {
  return T::kFp16 ? 0x00514E48u : 0xC2C14241u;
}

/// pairs (values 2p, 2p + 1 in the low / high half of p[p]), exact +-grid in BF16 / FP16.
__device__ __forceinline__ uint64_t lds64(uint32_t addr) {
  uint32_t lo, hi;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(lo), "=r"(hi) : "r"(addr));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

/// The four value pairs (values 2p, 2p + 1 in the low / high half of p[p]) of an entry, exact
/// +-grid in BF16 / FP16, from its grid and sign selector words (the tables' 8-byte entries).
template <class T>
__device__ __forceinline__ void iq2_pairs(uint64_t gs, uint64_t ss, uint32_t lo, uint32_t p[4]) {
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

/// The two entries of e01 (rows g and g + 8: grid index | sign7 << 9 in each 16-bit half) ->
/// their pairs. gcls / scls: shared addresses of the lane's copy (class) of grid / sign entry 0
/// (grid entries kGc * 8 bytes apart, sign entries 128). Each address is a mask (LOP3, kept as
/// written: ptxas turned `(e01 & m) * stride + base` into shift, mask and add) and one
/// shift-and-add (IMAD / LEA).
template <class T, int kGc>
__device__ __forceinline__ void iq2_entry_pairs2(uint32_t e01, uint32_t gcls, uint32_t scls,
                                                 uint32_t lo, uint32_t p0[4], uint32_t p1[4]) {
  constexpr int kSh = kGc == 16 ? 7 : 6;  // log2 of the grid stride kGc * 8
  static_assert(kGc == 16 || kGc == 8, "grid stride");
  const uint64_t g0 = lds64(lop3<0xC0>(e01, 0x1FFu, 0u) * (1u << kSh) + gcls);
  const uint64_t s0 = lds64((lop3<0xC0>(e01, 0xFE00u, 0u) >> 2) + scls);
  const uint64_t g1 = lds64((lop3<0xC0>(e01, 0x1FF0000u, 0u) >> (16 - kSh)) + gcls);
  const uint64_t s1 = lds64((lop3<0xC0>(e01, 0xFE000000u, 0u) >> 18) + scls);
  iq2_pairs<T>(g0, s0, lo, p0);
  iq2_pairs<T>(g1, s1, lo, p1);
}

/// The tables' layout for kPa (gemv_ggml_body, IQ2_XXS): grid entry e's copies at byte 256 e, sign
/// entry s's at 512 s + 128 (the upper halves of the even grid rows), so that both addresses of an
/// entry are one PRMT each: byte 1 = the entry's index byte (grid) or index-bit-8 | sign7 << 1
/// byte (sign; bit 8 is 0 for IQ2_XXS), byte 0 = the lane's copy offset from `clsw` (byte 0:
/// 8 (lane % 16), byte 1: that + 128). 64 KB instead of 48.
inline constexpr int kPaBytes = 256 * 256;

/// The pairs of one entry (half kHi of word w: grid index | sign7 << 9), as iq2_entry_pairs2.
/// kPa: the addresses by PRMT from `clsw` (kPaBytes' layout, tab0 its base); else the masks of
/// iq2_entry_pairs2 from the lane's copies gcls / scls.
template <class T, int kGc, bool kHi, bool kPa>
__device__ __forceinline__ void iq2_entry_pairs1(uint32_t w, uint32_t gcls, uint32_t scls,
                                                 uint32_t clsw, uint32_t tab0, uint32_t lo,
                                                 uint32_t p[4]) {
  uint32_t ga, sa;
  if constexpr (kPa) {
    ga = prmt(w, clsw, kHi ? 0x7624u : 0x7604u) + tab0;
    sa = prmt(w, clsw, kHi ? 0x7635u : 0x7615u) + tab0;
  } else {
    constexpr int kSh = kGc == 16 ? 7 : 6;
    if constexpr (kHi) {
      ga = (lop3<0xC0>(w, 0x1FF0000u, 0u) >> (16 - kSh)) + gcls;
      sa = (lop3<0xC0>(w, 0xFE000000u, 0u) >> 18) + scls;
    } else {
      ga = lop3<0xC0>(w, 0x1FFu, 0u) * (1u << kSh) + gcls;
      sa = (lop3<0xC0>(w, 0xFE00u, 0u) >> 2) + scls;
    }
  }
  iq2_pairs<T>(lds64(ga), lds64(sa), lo, p);
}

/// IQ2 sub-scale factors: the nibbles s of bytes (x >> shift) & 0x0F as bytes 2s + 1 (<= 31,
/// no carries), one word per four sub-scales.
__device__ __forceinline__ uint32_t iq2_odd_bytes(uint32_t x, int shift) {
  return ((x >> shift) & 0x0F0F0F0Fu) * 2u + 0x01010101u;
}
/// Byte k of such a word as fp32: 2^23 + v built by one PRMT (the exponent byte from `magic` =
/// 0x4B000000, in a register so that the selector is the immediate), minus 2^23 (exact).
__device__ __forceinline__ float iq2_factor(uint32_t w, int k, uint32_t magic) {
  return __uint_as_float(prmt(w, magic, 0x7540u | static_cast<uint32_t>(k))) - 8388608.f;
}

/// iq2_factor with the byte chosen by a selector register (0x7540 | k).
__device__ __forceinline__ float iq2_factor_sel(uint32_t w, uint32_t sel, uint32_t magic) {
  return __uint_as_float(prmt(w, magic, sel)) - 8388608.f;
}

/// The grid geometry, computed by the launcher (the kernel's integer divisions by runtime values
/// sat on the path to the first weight load): kw warps per 16-row tile, tpc = warps / kw tiles
/// per group, wt_magic = ceil(2^16 / kw) (warp / kw = (warp * wt_magic) >> 16, exact for warp <
/// 32), groups = ceil(n16 / tpc) tile groups, per = ceil(batches / split) batches per split.
/// The Q8_0 kernels use kw only (gemv_ggml_body's kDivs). The balanced split (kVar & 4096):
/// groups = n16 / grid.x, per = n16 % grid.x (its CTAs' tile counts).
struct Geo {
  int kw, tpc, wt_magic, groups, per;
};

/// Weights and scales of one batch of a warp (registers; loaded one batch ahead).
template <WFmt F>
struct Batch;
template <>
struct Batch<WFmt::kQ8_0> {
  uint4 w[4];        // the lane's 16 bytes of each atom
  uint32_t d[2][2];  // fp16 d of the 4 atoms (two per word), rows g / g + 8
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

/// Where the lane's next batch load reads: its weight bytes and row g's scale words (advanced
/// batch by batch, so ptxas keeps them instead of recomputing 64-bit bases per batch), and the
/// byte distances to row g + 8's scale words.
struct Cursor {
  const uint8_t* w;
  const uint8_t* d;
  const uint8_t* s;
};
template <WFmt F>
constexpr int batch_bytes() {  // weight bytes of a batch in one tile
  return F == WFmt::kQ8_0 ? 4 * 512 : 8 * 128;
}
template <WFmt F>
constexpr int batch_dbytes() {  // fp16 d bytes of a batch per row
  return F == WFmt::kQ8_0 ? 8 : 2;
}
template <WFmt F>
constexpr int batch_sbytes() {  // IQ2 sub-scale bytes of a batch per row
  return F == WFmt::kIq2Xs ? 8 : 4;
}
/// The cursor at batch b of a tile. kAc (the IQ2 atom-column decode at M = 1): slot g of atom t
/// (and t + 4, 512 bytes on).
template <WFmt F, bool kAc = false>
__device__ __forceinline__ Cursor cursor_at(const LinearParams& p, int tile, int b, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const int64_t r0 = static_cast<int64_t>(tile) * 16 + g;
  Cursor c;
  // Q8_0: atoms of 512 bytes (32 lanes x 16), the lane's 16; IQ2: atoms of 128 bytes (8 slots x
  // 16), word (t >> 1) + 2 (t & 1) of slot g (words 0 / 2: groups 0-1 of rows g / g + 8, words
  // 1 / 3 groups 2-3), so that lanes t and t ^ 1 hold both rows of groups 2 (t >> 1) + {0, 1}:
  // one shuffle per atom.
  c.w = p.wvals + static_cast<int64_t>(tile) * p.kvec * (F == WFmt::kQ8_0 ? 512 : 128) +
        (F == WFmt::kQ8_0 ? lane * 16
         : kAc            ? t * 128 + g * 16
                          : g * 16 + ((t >> 1) + 2 * (t & 1)) * 4) +
        static_cast<int64_t>(b) * batch_bytes<F>();
  c.d = p.wscale + r0 * p.scale_ld * 2 + b * batch_dbytes<F>();
  c.s = F == WFmt::kQ8_0 ? nullptr : p.wscale2 + r0 * p.scale2_ld + b * batch_sbytes<F>();
  return c;
}
template <WFmt F>
__device__ __forceinline__ void advance(Cursor& c, int batches) {
  c.w += static_cast<int64_t>(batches) * batch_bytes<F>();
  c.d += batches * batch_dbytes<F>();
  if constexpr (F != WFmt::kQ8_0) c.s += batches * batch_sbytes<F>();
}

/// A 4-byte weight word read once: not allocated in L1, which then keeps the activations (round
/// 51's Nsight Compute: L1 hit rate 53 %, the MMAs waiting on their activation loads).
__device__ __forceinline__ uint32_t ldg_na32(const void* p) {
  uint32_t v;
  asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

/// The batch at the cursor: Q8_0 4 atoms (nv valid: the last batch of K % 128 != 0 has fewer),
/// IQ2 8 atoms (one 256-K block). d8 / s8: bytes from row g's scale words to row g + 8's. kNa: the
/// IQ2 weight words through ldg_na32. kAc: IQ2 slot g of atoms t and t + 4 (w[0..3], w[4..7]).
template <WFmt F, bool kNa = false, bool kAc = false>
__device__ __forceinline__ void load_batch(const Cursor& c, int nv, int d8, int s8, Batch<F>& B) {
  if constexpr (F == WFmt::kQ8_0) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      B.w[j] = j < nv ? ldg_stream(c.w + j * 512) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const uint2 v = __ldg(reinterpret_cast<const uint2*>(c.d + (r ? d8 : 0)));
      B.d[r][0] = v.x;
      B.d[r][1] = v.y;
    }
  } else {
    if constexpr (kAc) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint4 v =
            kNa ? ldg_na128(c.w + h * 512) : __ldg(reinterpret_cast<const uint4*>(c.w + h * 512));
        B.w[4 * h] = v.x;
        B.w[4 * h + 1] = v.y;
        B.w[4 * h + 2] = v.z;
        B.w[4 * h + 3] = v.w;
      }
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j)
        B.w[j] =
            kNa ? ldg_na32(c.w + j * 128) : __ldg(reinterpret_cast<const uint32_t*>(c.w + j * 128));
    }
    B.d[0] = __ldg(reinterpret_cast<const uint16_t*>(c.d));
    B.d[1] = __ldg(reinterpret_cast<const uint16_t*>(c.d + d8));
    if constexpr (F == WFmt::kIq2Xxs) {
      B.s[0] = __ldg(reinterpret_cast<const uint32_t*>(c.s));
      B.s[1] = __ldg(reinterpret_cast<const uint32_t*>(c.s + s8));
    } else {
      B.s[0] = __ldg(reinterpret_cast<const uint2*>(c.s));
      B.s[1] = __ldg(reinterpret_cast<const uint2*>(c.s + s8));
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

/// grid = (<= ceil(n16 / (8 / kw)) CTAs walking the tile groups, split, ceil(M / tokens)), tokens
/// = 8 * NT (4 with kCols); 256 threads; dynamic shared memory gemv::smem_bytes<F, kO3>(). kw (1,
/// 2, 4, 8): warps per 16-row tile. kCols (IQ2_XS, NT = 1, M <= 4): the two 16-K groups of an atom
/// in the MMA's column halves instead of two MMA chains: columns 4h + m hold token m's sums over
/// group h (lanes g = 4h + m load token m with the other group's activations zeroed), so one
/// chain and one sub-scale per lane; lanes t and t + 2 (columns 2t, 2t + 1 of groups 0 / 1) are
/// added before the epilogue. kVar (the IQ2 one-tile kernels at M <= 4; plan: Plan::ggml_gemv_var,
/// B12X_GGML_GEMV_VAR), flags: kDeep (32) the weight words loaded two batches ahead instead of one
/// (one batch of 1 KB per warp, ~16 KB in flight per SM at two 8-warp CTAs, held round 51's
/// loads-only probe near 2.2 TB/s), kNa (64) the weight words not allocated in L1, which keeps the
/// activations (round 51's Nsight Compute: L1 hit rate 53 %, the first MMAs of a batch waiting on
/// their activation loads), kAc (512, M = 1 only; session 17) the atom columns: the MMA's 8
/// columns carry the batch's 8 atoms (see the batch loop), kPa (1024, IQ2_XXS with kAc) the
/// table addresses by PRMT over kPaBytes' layout. Defaults since round 53 / session 17: see
/// linear.cc (ggml_gemv_var_default).
template <WFmt F, class T, int NT, bool kCols, bool kO3, int kW, bool kTrig, int kVar = 0>
__device__ __forceinline__ void gemv_ggml_body(const LinearParams& p, const gemv::Geo& geo) {
  using namespace gemv;
  constexpr int kThr = 32 * kW;
  constexpr bool kIq2 = F != WFmt::kQ8_0;
  constexpr bool kXs = F == WFmt::kIq2Xs;
  constexpr bool kDeep = (kVar & 32) != 0;
  constexpr bool kNa = (kVar & 64) != 0;
  constexpr bool kAc = (kVar & 512) != 0;
  constexpr bool kPa = (kVar & 1024) != 0;
  constexpr bool kBal = (kVar & 4096) != 0;
  static_assert(kVar == 0 || (NT == 1 && (kIq2 || kVar == 4096)),
                "GEMV variants: the IQ2 one-tile kernels (Q8_0: the balanced split only)");
  static_assert(!kBal || (!kDeep && kW <= 16), "balanced split: one batch ahead, <= 16 warps");
  static_assert(!kPa || (kAc && !kXs), "PRMT addresses: IQ2_XXS with the atom columns");
  constexpr int kU = batch_atoms<F>();
  constexpr int kE = grid_entries<F>();
  constexpr int kGc = grid_copies<F, kO3>();
  // Three PRMT source words after the tables (u32 index; registers ptxas cannot rematerialize).
  constexpr int kSrcWord = kPa ? kPaBytes / 4 : (kE * kGc + 128 * kClasses) * 2;
  extern __shared__ __align__(16) uint64_t tabs[];
  // kBal: a head (red[warp]) and a tail (red[kW + warp]) partial per warp.
  __shared__ float red[kBal ? 2 * kW : kW][NT * 4][32];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int kw = geo.kw;
  // Q8_0 divides in the kernel: with the launcher's values ptxas scheduled its activation loads
  // later (round 42, M = 1, us: 4096x14336 17.67 -> 19.00, 2048x7168 7.32 -> 7.56; M = 4
  // 19.30 -> 21.67 / 8.08 -> 8.20); the IQ2 kernels take them (their first weight load ~50
  // instructions earlier).
  constexpr bool kDivs = F == WFmt::kQ8_0;
  const int tpc = kDivs ? kW / kw : geo.tpc;
  const int wt = kDivs ? warp / kw : (warp * geo.wt_magic) >> 16;  // warp / kw
  const int kp = kDivs ? warp % kw : warp - wt * kw;
  // Tile groups (tpc tiles of 16 rows) handed out grid-stride over grid.x, so that a grid capped
  // at the resident CTAs fills the IQ2 tables once per CTA; the warp's tile of group tg.
  // 32-bit tile / batch indices (N, K < 2^31); byte offsets are 64-bit in load_batch.
  const int n16 = static_cast<int>(p.n16);
  const int groups = kDivs ? (n16 + tpc - 1) / tpc : geo.groups;
  const int atoms = static_cast<int>(p.K / 32);
  const int batches = (atoms + kU - 1) / kU;
  const int per = kDivs ? (batches + p.split - 1) / p.split : geo.per;
  const int b_end = min(batches, static_cast<int>(blockIdx.y + 1) * per);
  const int b_first = static_cast<int>(blockIdx.y) * per + kp;
  static_assert(!kCols || (F == WFmt::kIq2Xs && NT == 1), "column groups: IQ2_XS, one tile");
  const int64_t tok0 = static_cast<int64_t>(blockIdx.z) * (kCols ? 4 : 8 * NT);

  const int d8 = static_cast<int>(16 * p.scale_ld), s8 = static_cast<int>(8 * p.scale2_ld);
  // kBal (one wave of CTAs, split 1): CTA x takes the tiles [t0, t1), a contiguous share of n16
  // (sizes differ by at most one), and its (tile, batch) units are cut into kW contiguous,
  // equal ranges, one per warp, so that every SM's work is within one tile of the mean (the
  // tile groups of the grid-stride walk leave e.g. 40 of 132 SMs with one of two CTAs at
  // 14336x4096) and a warp streams its range without per-tile barriers. A warp's range
  // [ua, ue) crosses at most one tile start where it is shorter than a tile; tiles it covers
  // whole are stored directly, the partial ones through red (see after the loop). tg walks the
  // warp's tiles [tg_first, tg_end); bal_first / bal_last: the first tile's first and the last
  // tile's end batch. Units relative to the CTA's first tile t0, 32-bit (the plan keeps
  // tiles per CTA x batches x kW < 2^31), and no 64-bit division before the first weight load
  // (round 72: the first version's six, ~1-2 us, lost at every shape but 14336x4096).
  int t0 = 0, nu = 0, ua = 0, ue = 0, bal_first = 0, bal_last = 0;
  int tg = blockIdx.x, tg_end = groups, tg_step = static_cast<int>(gridDim.x);
  if constexpr (kBal) {
    // geo.groups = n16 / grid.x, geo.per = n16 % grid.x (launcher).
    const int bx = static_cast<int>(blockIdx.x);
    t0 = bx * geo.groups + min(bx, geo.per);
    nu = (geo.groups + (bx < geo.per ? 1 : 0)) * batches;
    ua = nu * warp / kW;
    ue = nu * (warp + 1) / kW;
    const unsigned fa = static_cast<unsigned>(ua) / static_cast<unsigned>(batches);
    const unsigned fe = static_cast<unsigned>(max(ue - 1, 0)) / static_cast<unsigned>(batches);
    tg = t0 + static_cast<int>(fa);
    tg_end = ue > ua ? t0 + static_cast<int>(fe) + 1 : tg;
    tg_step = 1;
    bal_first = ua - static_cast<int>(fa) * batches;
    bal_last = ue - static_cast<int>(fe) * batches;
  }
  const int tg_first = tg;
  Batch<F> cur;
  Cursor ld = cursor_at<F, kAc>(p, kBal ? tg : tg * tpc + wt, kBal ? bal_first : b_first, lane);
  if (kBal ? tg < tg_end : tg * tpc + wt < n16 && b_first < b_end)
    load_batch<F, kNa, kAc>(ld, atoms - (kBal ? bal_first : b_first) * kU, d8, s8, cur);
  // kDeep: the position (group pg, batch pb) of the latest load and the batch after cur (n1);
  // pdone once the warp's positions ran out (sticky: a later step inside the group past the end
  // would otherwise read past the weights — round 52's illegal address).
  int pg = tg, pb = b_first;
  bool pdone = !(tg * tpc + wt < n16 && b_first < b_end);
  Batch<F> n1;
  const auto step = [&]() {  // the warp's next position and its cursor (false: none)
    if (pdone) return false;
    pb += kw;
    if (pb >= b_end) {
      pg += static_cast<int>(gridDim.x);
      pb = b_first;
      pdone = pg >= groups || pg * tpc + wt >= n16;
      if (pdone) return false;
      ld = cursor_at<F, kAc>(p, pg * tpc + wt, b_first, lane);
    } else {
      advance<F>(ld, kw);
    }
    return true;
  };
  if constexpr (kDeep) {
    if (step()) load_batch<F, kNa, kAc>(ld, atoms - pb * kU, d8, s8, n1);
  }

  if constexpr (kIq2) {
    const uint64_t* gsrc;
    if constexpr (kXs) {
      gsrc = T::kFp16 ? g_gsel_xs_fp16.v : g_gsel_xs_bf16.v;
    } else {
      gsrc = T::kFp16 ? g_gsel_xxs_fp16.v : g_gsel_xxs_bf16.v;
    }
    const uint64_t* ssrc = T::kFp16 ? g_ssel_fp16.v : g_ssel_bf16.v;
    if (threadIdx.x < 3)
      reinterpret_cast<uint32_t*>(tabs)[kSrcWord + threadIdx.x] =
          threadIdx.x < 2 ? src_lo<T>() : 0x4B000000u;
    // One entry per thread and pass (all loads first: one global round trip), its copies
    // written as 16-byte pairs starting at pair `threadIdx.x` (rotated, so that the 8 threads of
    // a 128-byte store wavefront hit different bank groups).
    constexpr int kEnt = kE + 128, kPasses = (kEnt + kThr - 1) / kThr;
    uint64_t v[kPasses];
#pragma unroll
    for (int it = 0; it < kPasses; ++it) {
      const int e = static_cast<int>(threadIdx.x) + it * kThr;
      v[it] = e < kE ? gsrc[e] : e < kEnt ? ssrc[e - kE] : 0;
    }
#pragma unroll
    for (int it = 0; it < kPasses; ++it) {
      const int e = static_cast<int>(threadIdx.x) + it * kThr;
      if (e >= kEnt) break;
      const bool grid = e < kE;  // uniform per pass where kE is a multiple of kThr (8 warps)
      const int pairs = (grid ? kGc : kClasses) / 2;
      uint4* dst = reinterpret_cast<uint4*>(kPa ? (grid ? tabs + e * 32 : tabs + (e - kE) * 64 + 16)
                                            : grid ? tabs + e * kGc
                                                   : tabs + kE * kGc + (e - kE) * kClasses);
      const uint32_t lo = static_cast<uint32_t>(v[it]), hi = static_cast<uint32_t>(v[it] >> 32);
#pragma unroll
      for (int k = 0; k < kClasses / 2; ++k)
        if (k < pairs) dst[(k + threadIdx.x) & (pairs - 1)] = make_uint4(lo, hi, lo, hi);
    }
    __syncthreads();
  }
  griddep_wait();
  const uint32_t tab0 = static_cast<uint32_t>(__cvta_generic_to_shared(tabs));
  const uint32_t gcls = tab0 + (lane % kGc) * 8;
  const uint32_t scls = tab0 + kE * kGc * 8 + (lane % kClasses) * 8;
  // e01 = row g's entry | row g + 8's << 16 from (own word, partner's word): even t the low
  // halves (own = row g), odd t the high halves (own = row g + 8).
  const uint32_t esel = (t & 1) ? 0x3276u : 0x5410u;
  uint32_t src_lo = 0, magic = 0;
  if constexpr (kIq2) {
    // Two copies read by lane parity: a uniform load would let ptxas park the word in a uniform
    // register (it does under the 80-register caps) and copy it into a register before each of
    // the atom's 8 PRMTs (~70 of ~600 loop instructions per batch).
    src_lo = reinterpret_cast<const uint32_t*>(tabs)[kSrcWord + (lane & 1)];
    magic = reinterpret_cast<const uint32_t*>(tabs)[kSrcWord + 2];
  }
  // The lane's activation row per token tile; token rows past M read row M - 1 (their output
  // columns are never stored).
  const uint16_t* xl[NT];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    const int64_t m = std::min<int64_t>(tok0 + 8 * n + (kCols ? (g & 3) : g), p.M - 1);
    xl[n] = static_cast<const uint16_t*>(p.x) + m * p.ldx + (kIq2 ? 8 * t : 2 * t);
  }
  float mult = p.out_mult;
  if (p.alpha != nullptr) mult *= *p.alpha;
  // kAc (M = 1): the lane's activations are atom g's of each batch, loaded by the lanes that
  // supply them (g == t: b0, g == t + 4: b1); the others' registers stay 0 (never written).
  // clsw: the lane's copy offsets for kPa's PRMT addresses; fsel: byte t of a factor word.
  const uint16_t* xa = static_cast<const uint16_t*>(p.x) + g * 32;
  const bool act_lo = g == t, act_hi = g == t + 4;
  const uint32_t clsw = (lane % kClasses) * 8 + (((lane % kClasses) * 8 + 128) << 8);
  const uint32_t fsel = 0x7540u | static_cast<uint32_t>(t);
  uint4 xlo[2], xhi[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) xlo[i] = xhi[i] = make_uint4(0u, 0u, 0u, 0u);

  // The tile's sums (split: fp32 partials) of the lane's rows and tokens.
  const auto store = [&](int tile, const float(&acc)[NT][4]) {
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = static_cast<int64_t>(tile) * 16 + g + 8 * (i >> 1);
        const int64_t m = tok0 + 8 * n + 2 * t + (i & 1);
        if (m >= p.M) continue;
        if (p.split > 1) {
          // Every row < NP, also the padding's: the reduce kernel reads column pairs, with odd N
          // column N too (its value is discarded, but the scratch read is then initialized).
          p.partial[(static_cast<int64_t>(blockIdx.y) * p.M + m) * p.NP + row] = acc[n][i];
        } else if (row < p.N) {
          store_out_elem(p, m, row, acc[n][i], mult);
        }
      }
  };
  int head_tile = -1;  // kBal: the tile whose partial this warp holds in red[warp]
  for (; tg < tg_end; tg += tg_step) {
    const int tile = kBal ? tg : tg * tpc + wt;
    const bool active = tile < n16;
    // The warp's batches of this tile: [bs, be) step kst.
    const int bs = kBal ? (tg == tg_first ? bal_first : 0) : b_first;
    const int be = kBal ? (tg + 1 == tg_end ? bal_last : batches) : b_end;
    const int kst = kBal ? 1 : kw;
    // The next group's tile of this warp (n16: none): its first batch (nbs) is loaded during the
    // last batch here.
    const int next_tile = tg + tg_step < tg_end ? (kBal ? tg + 1 : (tg + tg_step) * tpc + wt) : n16;
    const int nbs = kBal ? 0 : b_first;
    // kTrig: the PDL trigger at the start of the warp's last batch (the next call's CTAs launch
    // while this one drains; the end-of-kernel trigger stays for the other warps).
    if (kTrig && next_tile >= n16 && !(active && bs < be)) griddep_launch_dependents();
    float acc[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;

    for (int b = bs; active && b < be; b += kst) {
      Batch<F> nxt;
      if constexpr (kDeep) {
        // Two batches ahead; the trigger still at the start of the warp's last batch.
        if (step()) load_batch<F, kNa, kAc>(ld, atoms - pb * kU, d8, s8, nxt);
        if (kTrig && b + kw >= b_end && next_tile >= n16) griddep_launch_dependents();
      } else if (b + kst < be) {
        advance<F>(ld, kst);
        load_batch<F, kNa, kAc>(ld, atoms - (b + kst) * kU, d8, s8, nxt);
      } else if (next_tile < n16) {
        ld = cursor_at<F, kAc>(p, next_tile, nbs, lane);
        load_batch<F, kNa, kAc>(ld, atoms - nbs * kU, d8, s8, nxt);
      } else if (kTrig) {
        griddep_launch_dependents();
      }
      if constexpr (kAc) {
        // Atom columns (M = 1): MMA column c accumulates atom c of the batch. Each MMA takes
        // k pair t from atom t and pair t + 4 from atom t + 4 (lane (g, t) decodes slot g of both
        // atoms: rows g, g + 8), one 8-value group q per four MMAs (pair p of group q at K
        // 8q + 2p of its atom); the activations of atom c sit only in column c (lanes g == t
        // supply b0, g == t + 4 b1; the other lanes' xlo / xhi stay 0). So the atoms' sub-scales
        // and d / 8 multiply the four accumulators once per batch, not every atom's partials.
        float D[2][4];
        const uint16_t* xq = xa + static_cast<int64_t>(b) * (kU * 32);
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          if (act_lo) xlo[q] = __ldg(reinterpret_cast<const uint4*>(xq + 8 * q));
          if (act_hi) xhi[q] = __ldg(reinterpret_cast<const uint4*>(xq + 8 * q));
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          // (row g, atom t), (row g + 8, atom t), (row g, atom t + 4), (row g + 8, atom t + 4)
          uint32_t P[4][4];
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const uint32_t w = cur.w[(e >> 1) * 4 + (e & 1) * 2 + (q >> 1)];
            if (q & 1)
              iq2_entry_pairs1<T, kGc, true, kPa>(w, gcls, scls, clsw, tab0, src_lo, P[e]);
            else
              iq2_entry_pairs1<T, kGc, false, kPa>(w, gcls, scls, clsw, tab0, src_lo, P[e]);
          }
          const uint4 xl4 = xlo[q & 1], xh4 = xhi[q & 1];
          if (q < 2) {  // group q + 2's activations into the registers just read
            if (act_lo) xlo[q] = __ldg(reinterpret_cast<const uint4*>(xq + 8 * (q + 2)));
            if (act_hi) xhi[q] = __ldg(reinterpret_cast<const uint4*>(xq + 8 * (q + 2)));
          }
          const uint32_t bl[4] = {xl4.x, xl4.y, xl4.z, xl4.w};
          const uint32_t bh[4] = {xh4.x, xh4.y, xh4.z, xh4.w};
          // IQ2_XS: K 0-15 (groups 0, 1) and 16-31 (2, 3) carry their own sub-scales: D[1].
          float* d = D[kXs && q >= 2 ? 1 : 0];
#pragma unroll
          for (int pp = 0; pp < 4; ++pp) {
            const uint32_t a[4] = {P[0][pp], P[1][pp], P[2][pp], P[3][pp]};
            if (pp == 0 && (q == 0 || (kXs && q == 2)))
              mma16816_zero<T>(d, a, bl[pp], bh[pp]);
            else
              mma16816<T>(d, a, bl[pp], bh[pp]);
          }
        }
        // Lane (g, t) holds columns 2t, 2t + 1: atoms 2t, 2t + 1 of rows g, g + 8.
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const float dr = half_bits_f32(cur.d[r] & 0xFFFFu) * 0.125f;
          if constexpr (kXs) {
            const uint32_t sw = (t < 2 ? cur.s[r].x : cur.s[r].y) >> (16 * (t & 1));
            const uint32_t f0 = iq2_odd_bytes(sw, 0), f1 = iq2_odd_bytes(sw, 4);
#pragma unroll
            for (int c = 0; c < 2; ++c)
              acc[0][2 * r + c] = fmaf(fmaf(D[1][2 * r + c], iq2_factor(f1, c, magic),
                                            D[0][2 * r + c] * iq2_factor(f0, c, magic)),
                                       dr, acc[0][2 * r + c]);
          } else {
            const uint32_t f0 = iq2_odd_bytes(cur.s[r], 0), f1 = iq2_odd_bytes(cur.s[r], 4);
            acc[0][2 * r] = fmaf(D[0][2 * r] * iq2_factor_sel(f0, fsel, magic), dr, acc[0][2 * r]);
            acc[0][2 * r + 1] =
                fmaf(D[0][2 * r + 1] * iq2_factor_sel(f1, fsel, magic), dr, acc[0][2 * r + 1]);
          }
        }
      } else {
        // IQ2: the block's d / 8 per row, applied once per batch to sums of the atoms' partials
        // times (2s + 1) (fw: the factors as bytes, iq2_odd_bytes; per row: XXS even / odd atoms,
        // XS group 0 / 1 of atoms 0-3 / 4-7, XS column groups the lane's group of atoms 0-3 / 4-7).
        float d8[2];
        uint32_t fw[2][4];
        float accb[NT][4];
        if constexpr (kIq2) {
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            d8[r] = half_bits_f32(cur.d[r] & 0xFFFFu) * 0.125f;
            if constexpr (F == WFmt::kIq2Xxs) {
              fw[r][0] = iq2_odd_bytes(cur.s[r], 0);
              fw[r][1] = iq2_odd_bytes(cur.s[r], 4);
            } else if constexpr (kCols) {
              fw[r][0] = iq2_odd_bytes(cur.s[r].x, 4 * (t >> 1));
              fw[r][1] = iq2_odd_bytes(cur.s[r].y, 4 * (t >> 1));
            } else {
              fw[r][0] = iq2_odd_bytes(cur.s[r].x, 0);
              fw[r][1] = iq2_odd_bytes(cur.s[r].y, 0);
              fw[r][2] = iq2_odd_bytes(cur.s[r].x, 4);
              fw[r][3] = iq2_odd_bytes(cur.s[r].y, 4);
            }
          }
#pragma unroll
          for (int n = 0; n < NT; ++n) accb[n][0] = accb[n][1] = accb[n][2] = accb[n][3] = 0.f;
        }
        const uint16_t* xb[NT];
#pragma unroll
        for (int n = 0; n < NT; ++n) xb[n] = xl[n] + static_cast<int64_t>(b) * (kU * 32);
#pragma unroll
        for (int j = 0; j < kU; ++j) {
          uint32_t A[2][4];
          if constexpr (kIq2) {
            // Lane t takes the atom's group t for rows g (half t & 1 of word t / 2 of the slot) and
            // g + 8 (of word 2 + t / 2): even lanes hold row g's word, odd lanes row g + 8's.
            const uint32_t v = __shfl_xor_sync(0xFFFFFFFFu, cur.w[j], 1);
            const uint32_t e01 = prmt(cur.w[j], v, esel);
            uint32_t P0[4], P1[4];
            iq2_entry_pairs2<T, kGc>(e01, gcls, scls, src_lo, P0, P1);
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
          // Per-row fp32 factors of the atom's group(s): Q8_0 d; IQ2 2s + 1 (d / 8 per batch).
          float sc[2][2];
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            if constexpr (F == WFmt::kQ8_0) {
              const uint32_t dw = cur.d[r][j >> 1] >> (16 * (j & 1));
              sc[r][0] = half_bits_f32(dw & 0xFFFFu);
            } else if constexpr (F == WFmt::kIq2Xxs) {
              sc[r][0] = iq2_factor(fw[r][j & 1], j >> 1, magic);
            } else if constexpr (kCols) {
              sc[r][0] = iq2_factor(fw[r][j >> 2], j & 3, magic);
            } else {
              sc[r][0] = iq2_factor(fw[r][j >> 2], j & 3, magic);
              sc[r][1] = iq2_factor(fw[r][2 + (j >> 2)], j & 3, magic);
            }
          }
#pragma unroll
          for (int n = 0; n < NT; ++n) {
            uint32_t x[4] = {0u, 0u, 0u, 0u};
            // Q8_0: the last batch of K % 128 != 0 stops at K (IQ2: K % 256 == 0).
            if (kIq2 || b * kU + j < atoms) load_acts<F>(xb[n] + j * 32, x);
            if constexpr (kCols) {
              // Column group g / 4 keeps the activations of its K half (lanes t / 2 == g / 4).
              const bool keep = (t >> 1) == (g >> 2);
              float c[4] = {0.f, 0.f, 0.f, 0.f};
              mma16816<T>(c, A[0], keep ? x[0] : 0u, keep ? x[1] : 0u);
              mma16816<T>(c, A[1], keep ? x[2] : 0u, keep ? x[3] : 0u);
#pragma unroll
              for (int i = 0; i < 4; ++i) accb[n][i] = fmaf(c[i], sc[i >> 1][0], accb[n][i]);
            } else if constexpr (kXs) {
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
                accb[n][i] = fmaf(c1[i], sc[i >> 1][1], fmaf(c0[i], sc[i >> 1][0], accb[n][i]));
            } else {
              float c[4] = {0.f, 0.f, 0.f, 0.f};
              mma16816<T>(c, A[0], x[0], x[1]);
              mma16816<T>(c, A[1], x[2], x[3]);
#pragma unroll
              for (int i = 0; i < 4; ++i) {
                if constexpr (kIq2) {
                  accb[n][i] = fmaf(c[i], sc[i >> 1][0], accb[n][i]);
                } else {
                  acc[n][i] = fmaf(c[i], sc[i >> 1][0], acc[n][i]);
                }
              }
            }
          }
        }
        if constexpr (kIq2) {
#pragma unroll
          for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[n][i] = fmaf(accb[n][i], d8[i >> 1], acc[n][i]);
        }
      }
      if constexpr (kDeep) {
        cur = n1;
        n1 = nxt;
      } else {
        cur = nxt;
      }
    }

    if constexpr (kAc) {
      // The atoms' columns of each row added: lanes t hold columns 2t, 2t + 1 (fixed order).
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float v = acc[0][2 * r] + acc[0][2 * r + 1];
        v += __shfl_xor_sync(0xFFFFFFFFu, v, 1);
        v += __shfl_xor_sync(0xFFFFFFFFu, v, 2);
        acc[0][2 * r] = v;
        acc[0][2 * r + 1] = 0.f;
      }
    } else if constexpr (kCols) {
      // Group 1's sums (lanes t + 2) onto group 0's (lanes t < 2, which store).
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[0][i] += __shfl_xor_sync(0xFFFFFFFFu, acc[0][i], 2);
    }
    if constexpr (kBal) {
      // A tile the warp covers in part: its last contributor (the range reaching the tile's
      // end) keeps its partial as the head, the others leave theirs as tails (their last tile).
      if (bs != 0 || be != batches) {
        const bool head = be == batches;
        if (head) head_tile = tile;
#pragma unroll
        for (int i = 0; i < 4; ++i) red[head ? warp : kW + warp][i][lane] = acc[0][i];
        continue;
      }
    } else if (kw > 1) {
      // K parts of a tile added in warp order (deterministic); the first barrier keeps the
      // previous group's readers ahead of these writes.
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
    if ((!kBal && kp != 0) || !active || (kCols && t >= 2)) continue;
    store(tile, acc);
  }
  if constexpr (kBal) {
    // The partial tiles, each by its head warp: the tails of the earlier warps whose ranges end
    // inside it, then its own head, in warp order (deterministic).
    __syncthreads();
    if (head_tile >= 0 && !(kCols && t >= 2)) {
      const int s0 = (head_tile - t0) * batches;  // the tile's first unit
      float acc[NT][4] = {};
      for (int q = 0; q <= warp; ++q) {
        const int qa = nu * q / kW, qe = nu * (q + 1) / kW;
        if (q == warp || (qe > qa && qe > s0)) {
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[0][i] += red[q == warp ? q : kW + q][i][lane];
        }
      }
      store(head_tile, acc);
    }
  }
  griddep_launch_dependents();
}

/// NT token tiles, registers capped for kMinCtas CTAs per SM: 0 (uncapped, one tile: 78-125
/// registers; a minimum of 1 would raise ptxas's budget to 136-167), 2 (two tiles; uncapped,
/// IQ2_XS takes 183), 3 (the IQ2 one-tile kernels, which round 29's Nsight Compute found
/// latency-bound at two CTAs per SM: 80 registers, a few bytes of spills; IQ2_XS with 8
/// grid-table copies, gemv::grid_copies, so that 3 CTAs fit the shared memory). kW warps per CTA:
/// 8, or 16 / 24 (one CTA per SM at M <= 8 where the plan's rule says so; 24 warps leave 85
/// registers per thread, ptxas allocates 80 as for the capped 8-warp kernels). kTrig: the PDL
/// trigger at each warp's last batch (the default for IQ2_XS's column groups,
/// B12X_GGML_GEMV_TRIGGER=0|1).
template <WFmt F, class T, int NT, bool kCols, int kMinCtas, int kW = gemv::kWarps,
          bool kTrig = false, int kVar = 0>
__global__ void __launch_bounds__(32 * kW, kMinCtas)
    linear_gemv_ggml_kernel(const LinearParams p, const gemv::Geo geo) {
  gemv_ggml_body<F, T, NT, kCols, (kMinCtas >= 3), kW, kTrig, kVar>(p, geo);
}

}  // namespace b12x::gemm::lin
