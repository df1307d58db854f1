// The 128x4 block-scale layout used by the SM120 block-scaled MMA, cuBLASLt, CUTLASS, TRT-LLM,
// FlashInfer and b12x ("MMA layout", formats.md §B.2, b12x-contract §2.5).
//
// Logical scales [rows, cols] (cols = K/16 for NVFP4, K/32 for MX) are padded to
// pad128(rows) x pad4(cols). Storage is a sequence of 512-byte atoms, one per (128-row tile,
// 4-column tile), column tiles fastest. Inside an atom the 128 rows are split into 4 groups of 32
// and interleaved so that one 16-byte line holds the 4 scales of rows r, r+32, r+64, r+96 for the
// 4 columns: that is exactly what one lane of the MMA's scale fragment wants, so a kernel loads
// its scales with one 16-byte read per lane.
#pragma once

#include <cstdint>

#include "formats/scalar.h"

namespace b12x::fmt {

B12X_HD int64_t pad_to(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

/// Bytes of swizzled storage for a [rows, cols] logical scale grid.
B12X_HD int64_t swizzled_scale_bytes(int64_t rows, int64_t cols) {
  return pad_to(rows, 128) * pad_to(cols, 4);
}

/// Byte offset of logical scale (r, c) in the swizzled storage of a grid with `cols` columns.
B12X_HD int64_t swizzled_scale_offset(int64_t r, int64_t c, int64_t cols) {
  const int64_t num_col_tiles = pad_to(cols, 4) / 4;
  return ((r / 128) * num_col_tiles + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + (c % 4);
}

/// Padding byte written where no logical scale exists: 0 for NVFP4 (UE4M3 zero),
/// 127 (= 1.0) for MX (E8M0), matching b12x and FlashInfer.
inline constexpr uint8_t kNvfp4ScalePad = 0;
inline constexpr uint8_t kMxScalePad = 127;

}  // namespace b12x::fmt

namespace b12x::fmt {

/// Swizzle one [rows, cols] grid (row stride `src_row_stride` bytes) into the 128x4 layout at
/// `dst` (swizzled_scale_bytes(rows, cols) bytes); every padding byte is set to `pad`.
/// Host code (packers, references); kernels compute swizzled_scale_offset per element.
inline void swizzle_scale_grid(const uint8_t* src, int64_t rows, int64_t cols,
                               int64_t src_row_stride, uint8_t* dst, uint8_t pad) {
  const int64_t prow = pad_to(rows, 128), pcol = pad_to(cols, 4);
  for (int64_t r = 0; r < prow; ++r)
    for (int64_t c = 0; c < pcol; ++c)
      dst[swizzled_scale_offset(r, c, cols)] =
          (r < rows && c < cols) ? src[r * src_row_stride + c] : pad;
}

/// Inverse of swizzle_scale_grid for the logical [rows, cols] part (padding is dropped).
inline void unswizzle_scale_grid(const uint8_t* src, int64_t rows, int64_t cols, uint8_t* dst,
                                 int64_t dst_row_stride) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      dst[r * dst_row_stride + c] = src[swizzled_scale_offset(r, c, cols)];
}

}  // namespace b12x::fmt
