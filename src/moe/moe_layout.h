// Prepared-weight layout of the MoE engine, shared by the device repack, the kernels and the CPU
// tests (B12X_HD, no CUDA headers).
//
// Rows: FC1 of a gated activation is stored in groups of 32 rows = 16 gate rows then the 16 up
// rows of the same 16 features (so one warp holds gate and up of a feature); FC2 and non-gated
// FC1 keep the source row order. Rows are padded to 128 and K to 128 with zeros.
//
// K inside a 128-value chunk ("mapping B"): MMA step j (0..7) covers values 16j..16j+15, lane
// quad t holds 16j+4t+{0,1,2,3} as its logical {2t,2t+1,8+2t,9+2t}. Packed FP4 rows are stored
// as 64-byte chunks in which quad t owns bytes 16t..16t+15: word w (4 bytes) holds steps 2w and
// 2w+1 as four MMA A-register pairs P = 2 * (j - 2w) + q / 2 (v_q(j) = value 16j+4t+q; the low
// 16-bit half holds q even, the high half q odd). Inside the word the codes are not nibbles: the
// bits are placed so that the BF16 decode needs few operations (fp4_place below).
//
// Where a row's chunks and block scales live is the WeightView's business (moe_launch.h): FP4
// scales and codes are always stored in 32-row chunk tiles (make_view in moe.cc: the 8 UE4M3 / 4
// E8M0 bytes of chunk kk of rows 32g .. 32g + 31 are one contiguous 256 / 128-byte run, their
// 64-byte code chunks one 2 KB run; session 15: the tiled codes 3-12 % faster at M <= 8, session
// 14's "no faster" had measured the row-major ones twice).
#pragma once

#include <cstdint>

#include "formats/fp4_placement.h"
#include "formats/scalar.h"

namespace b12x::moe::layout {

/// Source row of prepared row `pr` (-1: padding). w13: source [up; gate]; else [gate; up].
B12X_HD int prep_row_source(bool gated, bool w13, int64_t features, int64_t src_rows, int64_t pr) {
  if (!gated) return pr < src_rows ? static_cast<int>(pr) : -1;
  const int64_t q = pr / 32, w = pr % 32;
  const int64_t f = 16 * q + (w & 15);
  const bool up = w >= 16;
  if (f >= features) return -1;
  if (w13) return static_cast<int>(up ? f : features + f);
  return static_cast<int>(up ? features + f : f);
}

/// Physical K of value slot i (0..7) of word w (0..3) of quad t in FP4 chunk c: slot i is pair
/// P = i & 3, half i >> 2 (fp4_place).
B12X_HD int64_t fp4_word_k(int64_t c, int t, int w, int i) {
  const int j = 2 * w + ((i >> 1) & 1);
  const int q = ((i & 1) << 1) | (i >> 2);  // i: 0->0, 1->2, 2->0, 3->2, 4->1, 5->3, 6->1, 7->3
  return 128 * c + 16 * j + 4 * t + q;
}

/// Bits of E2M1 `code` (4 bits) in value slot i (pair i & 3, half i >> 2) of a prepared word: the
/// linear layers' placement (fmt::fp4_lin_place, formats/fp4_placement.h: 9 integer operations
/// per word for the BF16 pairs; H200 round 64, docs/moe.md "Session 17").
B12X_HD uint32_t fp4_place(uint32_t code, int i) {
  return fmt::fp4_lin_place(code, i & 3, i >> 2);
}

/// Pair P of a prepared word as BF16 bits of value * 2^-126 (both halves). Multiplying by 2^126
/// (or folding 2^126 into the scale) yields the E2M1 values exactly.
template <int P>
B12X_HD uint32_t fp4x2_bf16_bits(uint32_t x) {
  return fmt::fp4_lin_bits<false, P>(x);
}
/// Same for FP16: magnitude bits to 11..9, value * 2^-14.
template <int P>
B12X_HD uint32_t fp4x2_fp16_bits(uint32_t x) {
  return fmt::fp4_lin_bits<true, P>(x);
}

/// Prepared NVFP4 block scales ("E5M3"). A UE4M3 scale s = 2^E (1 + m/8), E in [-9, 8] once its
/// subnormals are normalised, is stored as ((E + 10) << 3) | m, so every kernel decodes it with
/// one integer multiply-add and no case split: fp32 bits (p << 20) + (117 << 23), or bf16 bits
/// (p << 4) + ((117 + D) << 7) for s * 2^D. A zero scale is stored as 0 and the repack zeroes
/// the FP4 codes of its block, so whatever the byte decodes to is multiplied by zero codes.
/// (UE4M3 0x7F, NaN in E4M3FN, is stored as the largest value: checkpoints never contain it.)
B12X_HD uint8_t e5m3_from_ue4m3(uint32_t b) {
  b &= 0x7Fu;
  if (b == 0) return 0;
  const uint32_t e = b >> 3, m = b & 7u;
  if (e != 0) return static_cast<uint8_t>(((e + 3u) << 3) | m);  // E = e - 7
  // Subnormal m * 2^-9: E = p - 9 with p = floor(log2 m), mantissa (m - 2^p) << (3 - p).
  const uint32_t p = m >= 4 ? 2u : (m >= 2 ? 1u : 0u);
  return static_cast<uint8_t>(((p + 1u) << 3) | (((m - (1u << p)) << (3u - p)) & 7u));
}
/// Value of a prepared scale byte (0 for the zero scale).
B12X_HD float e5m3_value(uint32_t p) {
  return p == 0 ? 0.f : fmt::f32_from_bits(((p & 0xFFu) << 20) + (117u << 23));
}
/// BF16 bits of s * 2^118 (the decode stream's one-multiply scale fold), both halves.
B12X_HD uint32_t e5m3_bf16x2_2p118(uint32_t p) {
  return ((p & 0xFFu) * 0x00100010u) + 0x75807580u;  // (p << 4) + (235 << 7) per half
}

}  // namespace b12x::moe::layout
