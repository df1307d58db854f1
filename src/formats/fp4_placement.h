// E2M1 (FP4) code placement inside the 32-bit words of b12x's prepared FP4 weights (linear and
// MoE), and the matching decode to BF16 / FP16 bit pairs. Host and device.
//
// A word holds 8 codes as four MMA-register pairs j = 0..3, value (j, e) in 16-bit half e. The
// decode of a pair wants, in each half, the 3 magnitude bits at bits 8..6 (BF16: exponent low
// bits and mantissa top bit, value * 2^-126; code 1 = 0.5 lands on a BF16 subnormal, which
// HFMA2 handles exactly) or 11..9 (FP16, value * 2^-14), and the sign at bit 15. Four
// (magnitude, sign) groups cannot all be translates of {8..6, 15} inside 16 bits, so the packing
// mixes positions (magnitude at, sign at): j=0 (6, 15) in place, one AND; j=1 (0, 9) one shift
// and an AND; j=2 (3, 10) and j=3 (11, 14) magnitude and sign shifted separately: 11 integer
// operations per word for the BF16 pairs instead of 16 with plain nibbles (a shift and a mask
// each for magnitude and sign). The positions are packed into integer constants because device
// code may not index a host array at run time.
#pragma once

#include <cstdint>

#include "formats/scalar.h"  // B12X_HD

namespace b12x::fmt {

B12X_HD constexpr int fp4_mag_pos(int j) {
  return (0x0B030006 >> (8 * j)) & 0xFF;
}
B12X_HD constexpr int fp4_sign_pos(int j) {
  return (0x0E0A090F >> (8 * j)) & 0xFF;
}

/// Bits of E2M1 `code` (4 bits) as value (pair j, half e) of a prepared word.
B12X_HD uint32_t fp4_place(uint32_t code, int j, int e) {
  const int h = 16 * e;
  return ((code & 7u) << (fp4_mag_pos(j) + h)) | (((code >> 3) & 1u) << (fp4_sign_pos(j) + h));
}

/// The E2M1 code of value (pair j, half e) of a prepared word.
B12X_HD uint32_t fp4_code_at(uint32_t word, int j, int e) {
  const int h = 16 * e;
  return ((word >> (fp4_mag_pos(j) + h)) & 7u) | (((word >> (fp4_sign_pos(j) + h)) & 1u) << 3);
}

/// (x shifted left by S, or right by -S) & mask.
template <int S>
B12X_HD uint32_t fp4_shl_mask(uint32_t x, uint32_t mask) {
  if constexpr (S >= 0) {
    return (x << S) & mask;
  } else {
    return (x >> -S) & mask;
  }
}

/// Pair J of a prepared word with the magnitude bits moved to kMagTo..kMagTo+2 and the sign to
/// bit 15 of both halves: kMagTo = 6 gives BF16 bits of value * 2^-126, 9 FP16 bits of
/// value * 2^-14 (exact; multiplying by 2^126 / 2^14, or folding it into a scale, restores it).
template <int kMagTo, int J>
B12X_HD uint32_t fp4x2_bits(uint32_t w) {
  constexpr uint32_t kMag = 0x00070007u << kMagTo, kSign = 0x80008000u;
  constexpr int sm = kMagTo - fp4_mag_pos(J), ss = 15 - fp4_sign_pos(J);
  if constexpr (sm == ss) {
    return fp4_shl_mask<sm>(w, kMag | kSign);
  } else {
    return fp4_shl_mask<sm>(w, kMag) | fp4_shl_mask<ss>(w, kSign);
  }
}

}  // namespace b12x::fmt
