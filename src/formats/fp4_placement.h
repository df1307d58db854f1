// E2M1 (FP4) code placement inside the 32-bit words of b12x's prepared FP4 weights, and the
// matching decode to BF16 / FP16 bit pairs. Host and device. Two placements: the shared one
// (fp4_place, MoE's experts; linear weights until session 14) and the linear one (fp4_lin_place,
// at the end).
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

// ---------------------------------------------------------------------------------------------
// The linear placement (session 15; linear GEMM weights only, MoE keeps the one above): 9 integer
// operations per word for the BF16 pairs instead of 11. Registers 0..2 each come from one source
// word masked by T (bits 8..6 and 15 of both halves): r0 = w & T, r1 = (w << 6) & T,
// r2 = rot(w, 12) & T (its half 0 takes the magnitude from bits 28..26, the other half's high
// bits, and the sign from bit 3); r3 = ((w << 2) & A) | ((w >> 6) & B), magnitude bit 2 and the
// rest arriving from opposite directions. Session 14's search found no placement at <= 8 under
// the one-LOP3-per-source model (T is 16-periodic and its translates cannot tile 16 residues).
// Half 1's positions are half 0's + 16 (mod 32) for every register. The FP16 pairs (magnitude at
// 11..9) take the BF16 pair and move the magnitude up by 3: 2 more operations per register (17
// per word, the old placement's FP16 decode took 15).

/// Placement id of the linear layers' prepared weights (gemm::lin::kFp4Placement; MoE's experts
/// use fp4_place above).
inline constexpr int kFp4PlacementLinear = 1;

/// Bit position of bit b (0..2 magnitude low to high, 3 sign) of value (pair j, half e).
B12X_HD constexpr int fp4_lin_pos(int j, int e, int b) {
  const uint32_t base = j == 0   ? 0x0F080706u
                        : j == 1 ? 0x09020100u
                        : j == 2 ? 0x031C1B1Au
                                 : 0x0D0E0504u;
  return (static_cast<int>((base >> (8 * b)) & 0xFFu) + 16 * e) & 31;
}

B12X_HD uint32_t fp4_lin_place(uint32_t code, int j, int e) {
  uint32_t w = 0;
  for (int b = 0; b < 4; ++b) w |= ((code >> b) & 1u) << fp4_lin_pos(j, e, b);
  return w;
}

B12X_HD uint32_t fp4_lin_code_at(uint32_t word, int j, int e) {
  uint32_t c = 0;
  for (int b = 0; b < 4; ++b) c |= ((word >> fp4_lin_pos(j, e, b)) & 1u) << b;
  return c;
}

/// Pair J of a linear-placed word as BF16 bits of value * 2^-126 (kFp16: FP16 bits of
/// value * 2^-14) in both halves, exact (as fp4x2_bits).
template <bool kFp16, int J>
B12X_HD uint32_t fp4_lin_bits(uint32_t w) {
  constexpr uint32_t kT = 0x81C081C0u;  // bits 8..6 and 15 of both halves
  uint32_t r;
  if constexpr (J == 0) {
    r = w & kT;
  } else if constexpr (J == 1) {
    r = (w << 6) & kT;
  } else if constexpr (J == 2) {
#ifdef __CUDA_ARCH__
    r = __funnelshift_l(w, w, 12) & kT;
#else
    r = ((w << 12) | (w >> 20)) & kT;
#endif
  } else {
    r = ((w << 2) & 0x80C080C0u) | ((w >> 6) & 0x01000100u);
  }
  if constexpr (kFp16) {
    // r holds bits of T only, so r << 3 and r are disjoint on the FP16 magnitude / sign bits.
    return ((r << 3) | r) & 0x8E008E00u;
  } else {
    return r;
  }
}

}  // namespace b12x::fmt
