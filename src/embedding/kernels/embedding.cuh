// Q8_0 embedding gather: one CTA per (token, slice of up to kSliceBlocks Q8_0 blocks).
//
// A Q8_0 row is dim/32 blocks of 34 bytes (fp16 d + 32 int8), so rows and blocks are only
// 2-byte aligned in general. The CTA first copies its slice of the row into shared memory (16-byte
// loads when the slice start is 16-byte aligned, which holds for every slice when the row stride
// is a multiple of 16 bytes, e.g. dim % 256 == 0; 2-byte loads otherwise), then each thread
// decodes 8 consecutive values from shared memory and writes them with one 16-byte store.
// Byte offsets are 64-bit (id * row_stride_bytes exceeds 2^31 for large tables).
//
// Out-of-range ids: the row is written as zeros and the token's status flag (one byte per token,
// written by the slice-0 CTA of every token on every run, 1 = bad) records the error. Because
// every flag of the live tokens is rewritten by each launch, nothing needs resetting between runs
// (no memset node in a captured graph, no read-before-write state).
#pragma once

#include <cstdint>

#include "formats/block.h"
#include "formats/scalar.h"

namespace b12x::embedding::kernels {

inline constexpr int kThreads = 128;
inline constexpr int kSliceBlocks = 64;  // 2048 values, 2176 bytes of shared memory
inline constexpr int kBlockBytes = 34;
inline constexpr int kBlockValues = 32;

struct Params {
  const uint8_t* weight;
  int64_t row_stride_bytes;
  int64_t vocab;
  int64_t nblocks;  ///< dim / 32
  const void* ids;
  int64_t num_tokens;
  void* out;
  int64_t out_row_stride;  ///< values
  uint8_t* flags;          ///< [num_tokens] status flags, 1 = out-of-range id
  bool out_vec;            ///< out 16-byte aligned with a row stride multiple of 8 values
};

template <typename IdT, bool kBF16>
__global__ void __launch_bounds__(kThreads) q8_0_embedding_kernel(const Params p) {
  __shared__ __align__(16) uint8_t smem[kSliceBlocks * kBlockBytes];
  const int64_t t = blockIdx.x;
  const int64_t blk0 = static_cast<int64_t>(blockIdx.y) * kSliceBlocks;
  const int nb =
      static_cast<int>(p.nblocks - blk0 < kSliceBlocks ? p.nblocks - blk0 : kSliceBlocks);
  const int64_t id = static_cast<int64_t>(__ldg(static_cast<const IdT*>(p.ids) + t));
  const bool bad = id < 0 || id >= p.vocab;
  const int nvals = nb * kBlockValues;
  uint16_t* out_row = static_cast<uint16_t*>(p.out) + t * p.out_row_stride + blk0 * kBlockValues;

  if (blockIdx.y == 0 && threadIdx.x == 0) p.flags[t] = bad ? 1 : 0;
  if (bad) {
    for (int v = threadIdx.x * 8; v < nvals; v += kThreads * 8) {
      if (p.out_vec) {
        *reinterpret_cast<uint4*>(out_row + v) = make_uint4(0, 0, 0, 0);
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) out_row[v + j] = 0;
      }
    }
    return;
  }

  const uint8_t* src = p.weight + id * p.row_stride_bytes + blk0 * kBlockBytes;
  const int bytes = nb * kBlockBytes;
  int done = 0;
  if ((reinterpret_cast<uintptr_t>(src) & 15u) == 0) {
    const int n16 = bytes / 16;
    for (int i = threadIdx.x; i < n16; i += kThreads)
      reinterpret_cast<uint4*>(smem)[i] = __ldg(reinterpret_cast<const uint4*>(src) + i);
    done = n16 * 16;
  }
  for (int i = done / 2 + threadIdx.x; i < bytes / 2; i += kThreads)
    reinterpret_cast<uint16_t*>(smem)[i] = __ldg(reinterpret_cast<const uint16_t*>(src) + i);
  __syncthreads();

  for (int v = threadIdx.x * 8; v < nvals; v += kThreads * 8) {
    const uint8_t* blk = smem + (v / kBlockValues) * kBlockBytes;
    const float d = fmt::fp16_bits_to_float(*reinterpret_cast<const uint16_t*>(blk));
    const uint16_t* q2 = reinterpret_cast<const uint16_t*>(blk + 2 + (v % kBlockValues));
    uint16_t o[8];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint16_t w = q2[j];
      const float y0 = fmt::mul_rn(d, static_cast<float>(static_cast<int8_t>(w & 0xFFu)));
      const float y1 = fmt::mul_rn(d, static_cast<float>(static_cast<int8_t>(w >> 8)));
      if constexpr (kBF16) {
        o[2 * j] = fmt::float_to_bf16_bits(y0);
        o[2 * j + 1] = fmt::float_to_bf16_bits(y1);
      } else {
        o[2 * j] = fmt::float_to_fp16_bits(y0);
        o[2 * j + 1] = fmt::float_to_fp16_bits(y1);
      }
    }
    if (p.out_vec) {
      uint4 u;
      u.x = o[0] | (static_cast<uint32_t>(o[1]) << 16);
      u.y = o[2] | (static_cast<uint32_t>(o[3]) << 16);
      u.z = o[4] | (static_cast<uint32_t>(o[5]) << 16);
      u.w = o[6] | (static_cast<uint32_t>(o[7]) << 16);
      *reinterpret_cast<uint4*>(out_row + v) = u;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) out_row[v + j] = o[j];
    }
  }
}

}  // namespace b12x::embedding::kernels
