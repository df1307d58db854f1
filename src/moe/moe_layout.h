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
// 2w+1 with nibbles [v0(2w), v2(2w), v0(2w+1), v2(2w+1), v1(2w), v3(2w), v1(2w+1), v3(2w+1)]
// (v_q(j) = value 16j+4t+q), so nibble p and p+4 form one 16-bit pair of an MMA A register.
#pragma once

#include <cstdint>

#include "formats/scalar.h"

namespace b12x::moe::layout {

/// Source row of prepared row `pr` (-1: padding). w13: source [up; gate]; else [gate; up].
B12X_HD int prep_row_source(bool gated, bool w13, int64_t features, int64_t src_rows,
                            int64_t pr) {
  if (!gated) return pr < src_rows ? static_cast<int>(pr) : -1;
  const int64_t q = pr / 32, w = pr % 32;
  const int64_t f = 16 * q + (w & 15);
  const bool up = w >= 16;
  if (f >= features) return -1;
  if (w13) return static_cast<int>(up ? f : features + f);
  return static_cast<int>(up ? features + f : f);
}

/// Physical K of nibble i (0..7) of word w (0..3) of quad t in FP4 chunk c.
B12X_HD int64_t fp4_word_k(int64_t c, int t, int w, int i) {
  const int j = 2 * w + ((i >> 1) & 1);
  const int q = ((i & 1) << 1) | (i >> 2);  // i: 0->0, 1->2, 2->0, 3->2, 4->1, 5->3, 6->1, 7->3
  return 128 * c + 16 * j + 4 * t + q;
}

/// Nibbles p and p+4 of x as a BF16 pair scaled by 2^-126: the 3 magnitude bits go to bits
/// 8..6 (exponent low bits + mantissa top bit; code 1 = 0.5 becomes a BF16 subnormal), the sign
/// to bit 15. Multiplying by 2^126 yields the E2M1 values exactly.
template <int P>
B12X_HD uint32_t fp4x2_bf16_bits(uint32_t x) {
  constexpr int kMag = 6 - 4 * P, kSign = 12 - 4 * P;
  const uint32_t mag = (kMag >= 0 ? (x << kMag) : (x >> -kMag)) & 0x01C001C0u;
  return mag | ((x << kSign) & 0x80008000u);
}
/// Same for FP16: magnitude bits to 11..9, value * 2^-14.
template <int P>
B12X_HD uint32_t fp4x2_fp16_bits(uint32_t x) {
  constexpr int kMag = 9 - 4 * P, kSign = 12 - 4 * P;
  const uint32_t mag = (kMag >= 0 ? (x << kMag) : (x >> -kMag)) & 0x0E000E00u;
  return mag | ((x << kSign) & 0x80008000u);
}

/// UE4M3 code -> fp32 as the kernels compute it: bits placed at 26..20 give value * 2^-120.
B12X_HD float ue4m3_via_bits(uint32_t b) {
  return fmt::f32_from_bits((b & 0x7Fu) << 20) * 1.329227995784916e36f;  // 2^120
}

}  // namespace b12x::moe::layout
