// E2M1 (FP4) code placement inside the 32-bit words of b12x's prepared FP4 weights (linear layers
// since session 15, MoE's experts since session 17), and the matching decode to BF16 / FP16 bit
// pairs. Host and device.
//
// A word holds 8 codes as four MMA-register pairs j = 0..3, value (j, e) in 16-bit half e. The
// decode of a pair wants, in each half, the 3 magnitude bits at bits 8..6 (BF16: exponent low
// bits and mantissa top bit, value * 2^-126; code 1 = 0.5 lands on a BF16 subnormal, which
// HFMA2 handles exactly) or 11..9 (FP16, value * 2^-14), and the sign at bit 15. Registers 0..2
// each come from one source word masked by T (bits 8..6 and 15 of both halves): r0 = w & T,
// r1 = (w << 6) & T, r2 = rot(w, 12) & T (its half 0 takes the magnitude from bits 28..26, the
// other half's high bits, and the sign from bit 3); r3 = ((w << 2) & A) | ((w >> 6) & B),
// magnitude bit 2 and the rest arriving from opposite directions: 9 integer operations per word
// for the BF16 pairs (plain nibbles take 16; session 5's placement, MoE's until session 17, 11).
// Session 14's search found no placement at <= 8 under the one-LOP3-per-source model (T is
// 16-periodic and its translates cannot tile 16 residues). Half 1's positions are half 0's + 16
// (mod 32) for every register. The FP16 pairs (magnitude at 11..9) take the BF16 pair and move
// the magnitude up by 3: 2 more operations per register (17 per word; the 11-operation
// placement's FP16 decode took 15).
#pragma once

#include <cstdint>

#include "formats/scalar.h"  // B12X_HD

namespace b12x::fmt {

/// Placement id of the prepared FP4 weights (gemm::lin::kFp4Placement; MoE's experts use the same
/// placement, moe::layout::fp4_place).
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
/// value * 2^-14) in both halves, exact (multiplying by 2^126 / 2^14, or folding it into a scale,
/// restores the E2M1 values).
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
