// GGML block formats Q8_0, IQ2_XXS and IQ2_XS (formats.md §C): B12X_HD codecs, bit-exact with
// ggml `src/ggml-quants.c` (dequantize_row_q8_0 / _iq2_xxs / _iq2_xs, quantize_row_q8_0_ref).
//
// Every product in these formats is exact in fp32, so the evaluation order does not matter for
// decoding. Blocks are read byte by byte (little endian), so no alignment is required.
//
// The IQ2 decoders take the grid table as a pointer: host code passes the constexpr arrays of
// ggml_tables.h (see the *_host wrappers), kernels pass their own `__constant__` copy defined
// from B12X_GGML_IQ2XXS_GRID_INIT / B12X_GGML_IQ2XS_GRID_INIT. The sign table ksigns_iq2xs is
// computed (i | parity(i) << 7), which the tests check equals the generated table.
#pragma once

#include <cmath>
#include <cstdint>

#include "formats/block.h"
#include "formats/ggml_tables.h"
#include "formats/scalar.h"

namespace b12x::fmt::ggml {

inline constexpr int kQ8_0Values = 32, kQ8_0Bytes = 34;
inline constexpr int kIq2Values = 256, kIq2xxsBytes = 66, kIq2xsBytes = 74;

B12X_HD uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
}
B12X_HD uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
B12X_HD void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
B12X_HD void store_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

/// C roundf: nearest, ties away from zero (what ggml's Q8_0 reference quantizer uses).
B12X_HD float round_half_away(float x) {
#if defined(__CUDA_ARCH__)
  return ::roundf(x);
#else
  return std::round(x);
#endif
}

/// ksigns_iq2xs[i]: the 7 stored sign bits plus an 8th bit that makes the negatives even.
B12X_HD uint8_t ksigns(uint32_t i) {
  uint32_t p = i & 0x7Fu;
  p ^= p >> 4;
  p ^= p >> 2;
  p ^= p >> 1;
  return static_cast<uint8_t>((i & 0x7Fu) | ((p & 1u) << 7));
}

// ---------------------------------------------------------------- Q8_0 ------------------------
/// y[j] = fp16(d) * qs[j].
B12X_HD void q8_0_decode_block(const uint8_t* blk, float* out) {
  const float d = fp16_bits_to_float(load_u16(blk));
  for (int j = 0; j < kQ8_0Values; ++j)
    out[j] = mul_rn(d, static_cast<float>(static_cast<int8_t>(blk[2 + j])));
}
/// quantize_row_q8_0_ref: d = amax/127, id = d ? 1/d : 0, qs = roundf(x*id), stored d = fp16(d).
/// (ggml's MAX macro lets a NaN input leak into amax in some positions; here NaN is ignored.)
B12X_HD void q8_0_encode_block(const float* x, uint8_t* blk) {
  const float amax = block_amax(x, kQ8_0Values);
  const float d = div_rn(amax, 127.0f);
  const float id = d != 0.f ? div_rn(1.0f, d) : 0.f;
  store_u16(blk, float_to_fp16_bits(d));
  for (int j = 0; j < kQ8_0Values; ++j) {
    const float q = round_half_away(mul_rn(x[j], id));
    blk[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(q));
  }
}

// ---------------------------------------------------------------- IQ2 common ------------------
/// Sub-block scale db = d * (0.5 + s) * 0.25 (exact in fp32).
B12X_HD float iq2_sub_scale(float d, uint32_t s) {
  return mul_rn(mul_rn(d, 0.5f + static_cast<float>(s)), 0.25f);
}
/// One 8-value group: y[j] = db * grid_byte[j] * (sign bit j ? -1 : +1).
B12X_HD void iq2_decode_group(float db, uint64_t grid, uint32_t sign_index, float* y) {
  const uint8_t signs = ksigns(sign_index);
  for (int j = 0; j < 8; ++j) {
    const float g = static_cast<float>((grid >> (8 * j)) & 0xFFu);
    const float v = mul_rn(db, g);
    y[j] = (signs >> j) & 1u ? -v : v;
  }
}

// ---------------------------------------------------------------- IQ2_XXS ---------------------
/// 66-byte block -> 256 values. `grid` = iq2xxs_grid[256].
B12X_HD void iq2_xxs_decode_block(const uint8_t* blk, float* out, const uint64_t* grid) {
  const float d = fp16_bits_to_float(load_u16(blk));
  for (int ib = 0; ib < 8; ++ib) {
    const uint32_t w0 = load_u32(blk + 2 + 8 * ib);
    const uint32_t w1 = load_u32(blk + 2 + 8 * ib + 4);
    const float db = iq2_sub_scale(d, w1 >> 28);
    for (int l = 0; l < 4; ++l)
      iq2_decode_group(db, grid[(w0 >> (8 * l)) & 0xFFu], (w1 >> (7 * l)) & 0x7Fu,
                       out + 32 * ib + 8 * l);
  }
}

// ---------------------------------------------------------------- IQ2_XS ----------------------
/// 74-byte block -> 256 values. `grid` = iq2xs_grid[512].
B12X_HD void iq2_xs_decode_block(const uint8_t* blk, float* out, const uint64_t* grid) {
  const float d = fp16_bits_to_float(load_u16(blk));
  for (int ib = 0; ib < 8; ++ib) {
    const uint8_t sc = blk[66 + ib];
    const float db_lo = iq2_sub_scale(d, sc & 0xFu);
    const float db_hi = iq2_sub_scale(d, sc >> 4);
    for (int l = 0; l < 4; ++l) {
      const uint32_t q = load_u16(blk + 2 + 2 * (4 * ib + l));
      iq2_decode_group(l < 2 ? db_lo : db_hi, grid[q & 0x1FFu], q >> 9, out + 32 * ib + 8 * l);
    }
  }
}

// ---------------------------------------------------------------- host wrappers ---------------
inline void iq2_xxs_decode_block_host(const uint8_t* blk, float* out) {
  iq2_xxs_decode_block(blk, out, kIq2xxsGrid);
}
inline void iq2_xs_decode_block_host(const uint8_t* blk, float* out) {
  iq2_xs_decode_block(blk, out, kIq2xsGrid);
}

}  // namespace b12x::fmt::ggml
