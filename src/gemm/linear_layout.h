// The packed weight layout of the linear GEMMs (host + device): one "atom" = 16 weight rows x 32
// K values, stored so that each lane of a warp reads exactly the bytes of its mma.sync m16n8k16
// fragment with one 16-byte load.
//
// Fragment mapping (formats.md §D.2, lane = 4g + t): for the k16 step s (0,1) of an atom a lane
// holds a0 = (row g, k 2t..2t+1), a1 = (row g+8, k 2t..), a2 = (row g, k 8+2t..), a3 = (row g+8,
// k 8+2t..), k relative to 16s. The same registers are the B fragments of two n8 tiles (rows 0-7
// and 8-15) when the weight sits on the MMA's N side, so both kernels share the layout.
//
// Per-format lane bytes of one atom:
//  FP4 (NVFP4, MXFP4): 8 bytes = two u32 words (step 0, step 1); in each word the pair of reg j
//    (j = 0..3: a0..a3) has its element e (0,1) in nibble j + 4e, so `word >> 4j` puts the pair at
//    bits 0-3 and 16-19. Two atoms (consecutive K) share one 16-byte lane vector.
//  Q8_0: 16 bytes = four words w(s, h), h = 0 for a0/a1, 1 for a2/a3, holding bytes
//    (row g, k0), (row g, k0+1), (row g+8, k0), (row g+8, k0+1) with k0 = 16s + 8h + 2t.
//  FP8 weights (per-tensor, MXFP8, block): the e4m3 m16n8k32 fragment instead, which both
//    kernels feed to FP8 MMAs without any decoding (activations of these formats are FP8):
//    word j (a0..a3) = bytes (row g + 8(j&1), k = 16(j>>1) + 4t + 0..3).
//  IQ2: one 16-byte slot per g (the four lanes of a quad share it): u16 entries [half][q], half 0
//    = row g, 1 = row g+8, q = 8-value group of the atom, entry = grid index | sign7 << 9.
// Vectors are ordered [row tile][K vector][slot][16 bytes].
//
// Scale arrays (rows padded to a multiple of 16, K padded to KP, a multiple of the slice):
//  NVFP4 ue4m3 [NP][KP/16]; MX e8m0 [NP][KP/32]; block FP8 fp32 [ceil(NP/128)][KP/128];
//  Q8_0 fp16 d [NP][KP/32]; IQ2 fp16 d [NP][KP/256] + 4-bit sub-scales [NP][KP/G/2] (G = 32 for
//  IQ2_XXS, 16 for IQ2_XS; group j in byte j/2, low nibble first).
#pragma once

#include <cstdint>

#include "formats/fp4_placement.h"
#include "formats/scalar.h"

namespace b12x::gemm::lin {

enum class WFmt : int32_t {
  kNvfp4 = 0,
  kMxfp4 = 1,
  kFp8 = 2,       ///< per-tensor FP8 (no per-block scale)
  kFp8Mx = 3,     ///< MXFP8 weights (E8M0 per 32)
  kFp8Block = 4,  ///< DeepSeek fp32 128x128
  kQ8_0 = 5,
  kIq2Xxs = 6,
  kIq2Xs = 7,
};
inline constexpr int kNumWFmt = 8;

struct WTraits {
  int slots;        ///< lane slots per atom (32, or 8 for IQ2)
  int lane_bytes;   ///< bytes per slot per atom
  int group;        ///< K group of the fp32 scale (0 = scale folded / none)
  int slice_atoms;  ///< atoms a decode warp streams per slice
  bool shifted;     ///< decoded values are v * 2^-7 (FP4); GGML decodes to integers
  bool fp8mma;      ///< e4m3 x e4m3 m16n8k32 MMAs on undecoded bytes (FP8 weight formats)
};

B12X_HD constexpr WTraits wtraits(WFmt f) {
  switch (f) {
    case WFmt::kNvfp4:
      return {32, 8, 0, 16, true, false};
    case WFmt::kMxfp4:
      return {32, 8, 32, 16, true, false};
    case WFmt::kFp8:
      return {32, 16, 0, 8, false, true};
    case WFmt::kFp8Mx:
      return {32, 16, 32, 8, false, true};
    case WFmt::kFp8Block:
      return {32, 16, 128, 8, false, true};
    case WFmt::kQ8_0:
      return {32, 16, 32, 8, false, false};
    case WFmt::kIq2Xxs:
      return {8, 16, 32, 8, false, false};
    case WFmt::kIq2Xs:
      return {8, 16, 16, 8, false, false};
  }
  return {32, 16, 0, 8, false, false};
}
B12X_HD constexpr int atoms_per_vector(WFmt f) {
  return 16 / wtraits(f).lane_bytes;
}
B12X_HD constexpr int slice_k(WFmt f) {
  return wtraits(f).slice_atoms * 32;
}

/// Geometry of one packed weight.
struct Geometry {
  int64_t N = 0, K = 0;  ///< logical
  int64_t NP = 0;        ///< rows padded to 16
  int64_t KP = 0;        ///< K padded to the slice
  int64_t n16 = 0;       ///< row tiles
  int64_t kvec = 0;      ///< 16-byte lane vectors per row tile along K
  int64_t values_bytes = 0;
  int64_t scale_ld = 0;  ///< elements per row of the primary scale array
  int64_t scale_rows = 0;
  int64_t scale_elem = 0;  ///< bytes per element of the primary scale array
  int64_t scale2_ld = 0;   ///< IQ2 sub-scale bytes per row
};

inline Geometry make_geometry(WFmt f, int64_t N, int64_t K) {
  const WTraits tr = wtraits(f);
  Geometry g;
  g.N = N;
  g.K = K;
  g.NP = (N + 15) / 16 * 16;
  const int64_t ks = slice_k(f);
  g.KP = (K + ks - 1) / ks * ks;
  g.n16 = g.NP / 16;
  g.kvec = g.KP / 32 / atoms_per_vector(f);
  g.values_bytes = g.n16 * g.kvec * tr.slots * 16;
  g.scale_rows = g.NP;
  switch (f) {
    case WFmt::kNvfp4:
      g.scale_ld = g.KP / 16;
      g.scale_elem = 1;
      break;
    case WFmt::kMxfp4:
    case WFmt::kFp8Mx:
      g.scale_ld = g.KP / 32;
      g.scale_elem = 1;
      break;
    case WFmt::kFp8:
      g.scale_ld = 0;
      g.scale_rows = 0;
      g.scale_elem = 0;
      break;
    case WFmt::kFp8Block:
      g.scale_ld = g.KP / 128;
      g.scale_rows = (g.NP + 127) / 128;
      g.scale_elem = 4;
      break;
    case WFmt::kQ8_0:
      g.scale_ld = g.KP / 32;
      g.scale_elem = 2;
      break;
    case WFmt::kIq2Xxs:
      g.scale_ld = g.KP / 256;
      g.scale_elem = 2;
      g.scale2_ld = g.KP / 64;
      break;
    case WFmt::kIq2Xs:
      g.scale_ld = g.KP / 256;
      g.scale_elem = 2;
      g.scale2_ld = g.KP / 32;
      break;
  }
  return g;
}

/// Byte offset of (row tile, atom, slot) in the values array.
B12X_HD int64_t atom_offset(WFmt f, int64_t kvec, int64_t tile, int64_t atom, int slot) {
  const WTraits tr = wtraits(f);
  const int apv = 16 / tr.lane_bytes;
  return ((tile * kvec + atom / apv) * tr.slots + slot) * 16 + (atom % apv) * tr.lane_bytes;
}

/// Logical (row-in-tile, k-in-atom) of value (step s, reg j, element e) of lane (g, t).
B12X_HD void frag_coord(int g, int t, int s, int j, int e, int* row, int* k) {
  *row = g + 8 * (j & 1);
  *k = 16 * s + 8 * (j >> 1) + 2 * t + e;
}

// FP4 words: value (register j, half e) of MMA step s's word is placed by the linear placement
// (fmt::fp4_lin_place, formats/fp4_placement.h: 9 integer operations per word for the BF16 pairs;
// MoE's experts use it too since session 17). Every linear kernel decodes it
// (kernels/linear_common.cuh, fp4_word_pairs), so one packed weight serves every M and both
// activation dtypes.
inline constexpr int kFp4Placement = fmt::kFp4PlacementLinear;
B12X_HD uint32_t fp4_place(uint32_t code, int j, int e) {
  return fmt::fp4_lin_place(code, j, e);
}
B12X_HD uint32_t fp4_code_at(uint32_t word, int j, int e) {
  return fmt::fp4_lin_code_at(word, j, e);
}

/// FP8 (m16n8k32) layout: byte e (0..3) of word j of lane (g, t).
B12X_HD void frag_coord_k32(int g, int t, int j, int e, int* row, int* k) {
  *row = g + 8 * (j & 1);
  *k = 16 * (j >> 1) + 4 * t + e;
}

/// Weight-streaming kernel: slices of weight values per warp ring (cp.async), bytes of one
/// warp-slice (one contiguous run of the packed layout), and the ring of its four warps.
/// Slices in each warp's ring (kStages - 1 in flight while one is computed). FP8 weights
/// (no decode: the kernel waits on memory) take three: round 13 on the H200, M = 1 / 16,
/// fp8_tensor 4096x14336 19.3 -> 17.6 us, 14336x4096 16.7 -> 16.3, 4096x4096 7.8 -> 7.4; the
/// FP4 / GGML decodes are bound by their instruction chains and were flat or slower (NVFP4
/// 14336x4096 21.6 -> 22.2 us), as was a split-K of 2 (more warps per SM, 10-20% slower).
/// B12X_DECODE_STAGES=<n> (build-time probe) forces one depth for every format.
#ifdef B12X_DECODE_STAGES
B12X_HD constexpr int decode_stages(WFmt) {
  return B12X_DECODE_STAGES;
}
inline constexpr int kDecodeStagesMax = B12X_DECODE_STAGES;
#else
B12X_HD constexpr int decode_stages(WFmt f) {
  return wtraits(f).fp8mma ? 3 : 2;
}
inline constexpr int kDecodeStagesMax = 3;
#endif
B12X_HD constexpr int decode_chunk_bytes(WFmt f) {
  return wtraits(f).slice_atoms / atoms_per_vector(f) * wtraits(f).slots * 16;
}
B12X_HD constexpr int decode_ring_bytes(WFmt f) {
  return 4 * decode_stages(f) * decode_chunk_bytes(f);
}

/// Activation staging of the weight-streaming kernel (after the rings in dynamic shared memory):
/// `rows` staged token rows of a chunk of `slices` K slices (bf16 halves, or e4m3 bytes for the FP8
/// weight formats) with a 16-byte row skew (rows 16 bytes apart modulo 128 keep ldmatrix
/// conflict-free), then the fp32 activation group scales [rows][chunk groups].
struct StageGeom {
  int64_t ck = 0;           ///< K values per chunk
  int64_t pitch_bytes = 0;  ///< bytes per staged row
  int64_t groups = 0;       ///< group scales per row
  int64_t bytes = 0;        ///< total dynamic shared memory
};
B12X_HD StageGeom stage_geom(WFmt f, int64_t rows, int64_t slices) {
  const WTraits tr = wtraits(f);
  StageGeom s;
  s.ck = slices * slice_k(f);
  s.pitch_bytes = (tr.fp8mma ? s.ck : 2 * s.ck) + 16;
  s.groups = tr.group ? s.ck / tr.group : 0;
  s.bytes = rows * s.pitch_bytes + rows * s.groups * 4;
  return s;
}

}  // namespace b12x::gemm::lin
