// Device kernels of the activation quantisers (BF16/FP16 -> FP8 / MXFP8 / NVFP4 / MXFP4).
//
// Work decomposition: one thread owns 8 consecutive values of a row (one 16-byte load), so a
// quantisation block of B values is owned by B/8 adjacent lanes (2 for NVFP4, 4 for MX, 16 for
// the 1x128 FP8 groups). K is a multiple of B, so blocks never straddle rows and, because
// B/8 divides 32 and rows hold a whole number of blocks, a block's lanes always sit in one warp.
// The block amax is a butterfly of xor shuffles inside those lanes. Warps iterate a grid-stride
// loop together (the loop bound is warp-uniform) so every shuffle has all 32 lanes present.
//
// Numerics: block scales and per-value multipliers come from the block codecs in
// formats/block.h (shared with the CPU reference); the value conversions are the scalar codecs of
// formats/scalar.h or, where the architecture has them, the `cvt` instructions they emulate bit
// for bit (e4m3x2 from sm_89, e2m1x2 on sm_100a+/sm_120a+; elsewhere the rounding-by-addition
// encoder qrules::e2m1_code_canonical_fast, checked against the emulation over fp32 on the CPU).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "formats/scalar.h"
#include "formats/swizzle.h"
#include "gemm/quantize_rules.h"

namespace b12x::gemm::kernels {

// ------------------------------------------------------------------------ conversions ----------
__device__ __forceinline__ float in_to_float(uint16_t bits, bool is_bf16) {
  return is_bf16 ? __uint_as_float(static_cast<uint32_t>(bits) << 16)
                 : __half2float(__ushort_as_half(bits));
}

/// Loads 8 consecutive values (16 bytes when `vec`, eight 2-byte loads otherwise).
template <bool kBF16>
__device__ __forceinline__ void load8(const uint16_t* p, bool vec, float v[8]) {
  uint16_t h[8];
  if (vec) {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      h[2 * j] = static_cast<uint16_t>(w[j] & 0xFFFFu);
      h[2 * j + 1] = static_cast<uint16_t>(w[j] >> 16);
    }
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) h[j] = __ldg(p + j);
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = in_to_float(h[j], kBF16);
}

/// Two fp32 -> two E4M3 bytes (lo -> byte 0). cvt.rn.satfinite is exactly
/// fmt::float_to_e4m3_satfinite (formats.md §A.2), available from sm_89.
__device__ __forceinline__ uint32_t e4m3x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return fmt::float_to_e4m3_satfinite(lo) |
         (static_cast<uint32_t>(fmt::float_to_e4m3_satfinite(hi)) << 8);
#endif
}

/// Two fp32 -> one E2M1 byte (lo -> low nibble), -0 canonicalised to +0 as every NVFP4/MXFP4
/// producer stores it.
__device__ __forceinline__ uint32_t e2m1x2(float lo, float hi) {
#if defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM120_ALL) || \
    defined(__CUDA_ARCH_FEAT_SM121_ALL) ||                                        \
    (defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && __CUDA_ARCH_FAMILY_SPECIFIC__ >= 1000)
#define B12X_HAS_CVT_E2M1 1
#endif
#if defined(B12X_HAS_CVT_E2M1)
  uint32_t r;
  asm("{\n .reg .b8 t;\n cvt.rn.satfinite.e2m1x2.f32 t, %1, %2;\n cvt.u32.u8 %0, t;\n}"
      : "=r"(r)
      : "f"(hi), "f"(lo));
  // Canonicalise -0 nibbles (0x8) to +0.
  if ((r & 0xFu) == 0x8u) r &= 0xF0u;
  if ((r & 0xF0u) == 0x80u) r &= 0x0Fu;
  return r;
#else
  return qrules::e2m1_code_canonical_fast(lo) | (qrules::e2m1_code_canonical_fast(hi) << 4);
#endif
}

// ------------------------------------------------------------------------ format policies ------
// Each policy: kBlock (values per scale), kFp4 (packed output), and
//   scale(amax, ctx) -> {stored scale byte / float, multiplier applied to each value}.
struct ScaleOut {
  uint8_t code;  ///< stored scale byte (E8M0 / UE4M3); unused for fp32-scale formats
  float value;   ///< fp32 scale stored (group128) -- unused otherwise
  float mul;     ///< per-value multiplier (NVFP4)
};

// `scale(amax, gs, table)`: `table` is the per-CTA shared table of the 128 NVFP4 multipliers
// nvfp4_multiplier(sf, gs) (one per UE4M3 code; gs is the same for the whole launch), so a block
// needs one lookup instead of two divisions and a decode. Other formats ignore it.
struct MxFp8Policy {
  static constexpr int kBlock = 32;
  static constexpr bool kFp4 = false;
  static constexpr bool kTable = false;
  static constexpr uint8_t kPad = fmt::kMxScalePad;
  __device__ static ScaleOut scale(float amax, float, const float*) {
    return {qrules::mxfp8_scale_code(amax), 0.f, 0.f};
  }
  __device__ static float apply(float v, const ScaleOut& s) { return qrules::mx_scaled(v, s.code); }
};

struct MxFp4Policy {
  static constexpr int kBlock = 32;
  static constexpr bool kFp4 = true;
  static constexpr bool kTable = false;
  static constexpr uint8_t kPad = fmt::kMxScalePad;
  __device__ static ScaleOut scale(float amax, float, const float*) {
    return {qrules::mxfp4_scale_code(amax), 0.f, 0.f};
  }
  __device__ static float apply(float v, const ScaleOut& s) { return qrules::mx_scaled(v, s.code); }
};

struct NvFp4Policy {
  static constexpr int kBlock = 16;
  static constexpr bool kFp4 = true;
  static constexpr bool kTable = true;
  static constexpr uint8_t kPad = fmt::kNvfp4ScalePad;
  __device__ static ScaleOut scale(float amax, float gs, const float* table) {
    const uint8_t c = qrules::nvfp4_scale_code(amax, gs);  // <= 0x7E (satfinite, no NaN)
    return {c, 0.f, table[c & 0x7Fu]};
  }
  __device__ static float apply(float v, const ScaleOut& s) {
    return qrules::nvfp4_scaled(v, s.mul);
  }
};

struct Fp8Group128Policy {
  static constexpr int kBlock = 128;
  static constexpr bool kFp4 = false;
  static constexpr bool kTable = false;
  static constexpr uint8_t kPad = 0;
  __device__ static ScaleOut scale(float amax, float, const float*) {
    return {0, qrules::fp8_group_scale(amax), 0.f};
  }
  __device__ static float apply(float v, const ScaleOut& s) {
    return qrules::fp8_scaled(v, s.value);
  }
};

struct BlockQuantParams {
  const uint16_t* x;
  int64_t M, K, ldx;
  uint8_t* values;          ///< FP8 [M, K] or packed FP4 [M, K/2]
  uint8_t* scale_rows;      ///< [M, K/kBlock] bytes (MX) or nullptr
  float* scale_f32;         ///< [M, K/128] (group128) or nullptr
  uint8_t* scale_swizzled;  ///< 128x4 layout or nullptr
  const float* global_scale;
  bool vec_in;            ///< x 16-byte aligned and ldx % 8 == 0
  bool vec_out;           ///< values pointer aligned for 8-byte (FP8) / 4-byte (FP4) stores
  bool early_dependents;  ///< allow_dependents at the start (fp8_group128 / block_quant)
};

/// Lets a programmatic dependent launch (the GEMM consuming these values, launched with PDL on
/// SM90+) be scheduled once every CTA of this grid has started, so its CTAs take SMs as the last
/// wave drains and stream their weights; its griddepcontrol.wait still waits for this grid to
/// complete and its writes to be visible. A no-op without such a dependent or below sm_90.
__device__ __forceinline__ void allow_dependents(bool on) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (on) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Waits for the previous grid's completion and writes where this grid was launched as its
/// programmatic dependent (session 29: the quantizer of the decode kernel's shared staging, so
/// that it and the GEMM behind it can start during the previous GEMM's tail); a no-op otherwise.
__device__ __forceinline__ void wait_predecessor() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Quantises one 8-value chunk (row, c) whose values are in v; every lane of the warp calls it
/// (the block amax is a shuffle), `valid` says whether this lane's chunk exists.
template <class P>
__device__ __forceinline__ void quant_chunk(const BlockQuantParams& p, const float (&v)[8],
                                            bool valid, int64_t row, int64_t c, int64_t cols,
                                            float gs, const float* table) {
  constexpr int kLanes = P::kBlock / 8;
  float amax = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) amax = fmt::amax_update(amax, v[j]);
#pragma unroll
  for (int o = kLanes / 2; o > 0; o >>= 1)
    amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  if (!valid) return;
  const ScaleOut s = P::scale(amax, gs, table);
  if constexpr (P::kFp4) {
    uint32_t w = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      w |= e2m1x2(P::apply(v[2 * j], s), P::apply(v[2 * j + 1], s)) << (8 * j);
    uint8_t* out = p.values + row * (p.K / 2) + c * 4;
    if (p.vec_out) {
      *reinterpret_cast<uint32_t*>(out) = w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) out[j] = static_cast<uint8_t>(w >> (8 * j));
    }
  } else {
    float q[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) q[j] = P::apply(v[j], s);
    const uint32_t w0 = e4m3x2(q[0], q[1]) | (e4m3x2(q[2], q[3]) << 16);
    const uint32_t w1 = e4m3x2(q[4], q[5]) | (e4m3x2(q[6], q[7]) << 16);
    uint8_t* out = p.values + row * p.K + c * 8;
    if (p.vec_out) {
      *reinterpret_cast<uint2*>(out) = make_uint2(w0, w1);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        out[j] = static_cast<uint8_t>(w0 >> (8 * j));
        out[4 + j] = static_cast<uint8_t>(w1 >> (8 * j));
      }
    }
  }
  if ((c % kLanes) == 0) {
    const int64_t col = c / kLanes;
    if (p.scale_rows != nullptr) p.scale_rows[row * cols + col] = s.code;
    if (p.scale_f32 != nullptr) p.scale_f32[row * cols + col] = s.value;
    if (p.scale_swizzled != nullptr)
      p.scale_swizzled[fmt::swizzled_scale_offset(row, col, cols)] = s.code;
  }
}

template <bool kBF16>
__device__ __forceinline__ void load_chunk(const BlockQuantParams& p, bool valid, int64_t row,
                                           int64_t c, float (&v)[8]) {
  if (valid) {
    load8<kBF16>(p.x + row * p.ldx + c * 8, p.vec_in, v);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = 0.f;
  }
}

/// Advances a (row, chunk) position by (drow, dc) chunks-per-row units (dc < cpr).
__device__ __forceinline__ void advance(int64_t& row, int64_t& c, int64_t drow, int64_t dc,
                                        int64_t cpr) {
  row += drow;
  c += dc;
  if (c >= cpr) {
    c -= cpr;
    ++row;
  }
}

template <class P, bool kBF16>
__global__ void __launch_bounds__(256) block_quant_kernel(const BlockQuantParams p) {
  allow_dependents(p.early_dependents);
  wait_predecessor();
  constexpr int kLanes = P::kBlock / 8;  // lanes sharing one block
  static_assert(kLanes >= 1 && kLanes <= 32 && (32 % kLanes) == 0);
  const int64_t cpr = p.K / 8;  // 8-value chunks per row
  const int64_t total = p.M * cpr;
  const int64_t cols = p.K / P::kBlock;
  const int lane = threadIdx.x & 31;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const float gs = p.global_scale != nullptr ? __ldg(p.global_scale) : 0.f;
  __shared__ float table[P::kTable ? 128 : 1];
  if constexpr (P::kTable) {
    for (int i = threadIdx.x; i < 128; i += blockDim.x)
      table[i] = qrules::nvfp4_multiplier(static_cast<uint8_t>(i), gs);
    __syncthreads();
  }

  // Each iteration handles two chunks a grid stride apart (both loads issued before any math,
  // for memory-level parallelism). (row, c) positions advance without divisions.
  const int64_t start = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t row0 = start / cpr, c0 = start - (start / cpr) * cpr;
  const int64_t drow = stride / cpr, dc = stride - drow * cpr;
  const int64_t drow2 = (2 * stride) / cpr, dc2 = 2 * stride - drow2 * cpr;
  for (int64_t base = start - lane; base < total; base += 2 * stride) {
    const bool valid0 = base + lane < total;
    const bool valid1 = base + stride + lane < total;
    int64_t row1 = row0, c1 = c0;
    advance(row1, c1, drow, dc, cpr);
    float v0[8], v1[8];
    load_chunk<kBF16>(p, valid0, row0, c0, v0);
    load_chunk<kBF16>(p, valid1, row1, c1, v1);
    quant_chunk<P>(p, v0, valid0, row0, c0, cols, gs, table);
    if (base + stride < total)  // warp-uniform
      quant_chunk<P>(p, v1, valid1, row1, c1, cols, gs, table);
    advance(row0, c0, drow2, dc2, cpr);
  }

  // Padding of the swizzled grid: the pad columns of live rows, then whole pad rows.
  if (p.scale_swizzled != nullptr) {
    const int64_t pcols = fmt::pad_to(cols, 4);
    const int64_t prows = fmt::pad_to(p.M, 128);
    const int64_t n_col_pad = p.M * (pcols - cols);
    const int64_t n_total = n_col_pad + (prows - p.M) * pcols;
    for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < n_total;
         j += stride) {
      int64_t r, col;
      if (j < n_col_pad) {
        r = j / (pcols - cols);
        col = cols + (j - r * (pcols - cols));
      } else {
        const int64_t k = j - n_col_pad;
        r = p.M + k / pcols;
        col = k % pcols;
      }
      p.scale_swizzled[fmt::swizzled_scale_offset(r, col, cols)] = P::kPad;
    }
  }
}

/// max(m, |x|) per 16-bit half of packed BF16 (kBF16) or FP16 pairs; m holds no NaN, and max
/// returns the non-NaN operand, so NaN halves of x are ignored.
template <bool kBF16>
__device__ __forceinline__ uint32_t hmax2_abs(uint32_t m, uint32_t x) {
  uint32_t d;
  if constexpr (kBF16) {
    asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(m), "r"(x & 0x7FFF7FFFu));
  } else {
    asm("max.f16x2 %0, %1, %2;" : "=r"(d) : "r"(m), "r"(x & 0x7FFF7FFFu));
  }
  return d;
}

/// 32 values from four 16-byte loads at src + step * i (i = 0..3; zeros when !valid), all issued
/// before any conversion.
template <bool kBF16>
__device__ __forceinline__ void load32(const uint16_t* src, int step, bool valid, float (&v)[32]) {
  uint4 u[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    u[i] = valid ? __ldg(reinterpret_cast<const uint4*>(src + step * i)) : make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t w[4] = {u[i].x, u[i].y, u[i].z, u[i].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[8 * i + 2 * j] = in_to_float(static_cast<uint16_t>(w[j] & 0xFFFFu), kBF16);
      v[8 * i + 2 * j + 1] = in_to_float(static_cast<uint16_t>(w[j] >> 16), kBF16);
    }
  }
}

// ------------------------------------------------------------------------ FP8 1x128 groups ----
/// The 32 values of group (row, col) that lane part `part` owns (16-byte chunk i of part p is the
/// group's chunk 4i + p, so a group's four lanes read 64 contiguous bytes per load), packed in
/// 16 words; zeros when !valid.
__device__ __forceinline__ void g128_load(const BlockQuantParams& p, int64_t row, int64_t col,
                                          int part, bool valid, uint32_t (&w)[16]) {
  const uint16_t* src = p.x + row * p.ldx + col * 128 + part * 8;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint4 u =
        valid ? __ldg(reinterpret_cast<const uint4*>(src + 32 * i)) : make_uint4(0, 0, 0, 0);
    w[4 * i] = u.x;
    w[4 * i + 1] = u.y;
    w[4 * i + 2] = u.z;
    w[4 * i + 3] = u.w;
  }
}

/// The scale of the 1x128 group whose 32 values (packed in w, 16-byte chunk i holding the
/// group's chunk 4i + part) this lane part holds, and their E4M3 codes: store(i, lo, hi) gets
/// chunk i's 8 codes (every lane of the warp calls it: the group amax is two xor shuffles over
/// its four lanes; !valid lanes only take part in the shuffles and store nothing). The 32 values
/// stay packed (16 registers): amax over |x| pairs by max.bf16x2 / max.f16x2 (exact; a NaN never
/// wins against the running maximum, which starts at +0, as in fmt::amax_update), each value
/// converted to fp32 where it is divided. Shared by fp8_group128_kernel and the decode GEMM's
/// staging (lin::kActBf16Quant).
template <bool kBF16, class Store>
__device__ __forceinline__ float g128_codes(const uint32_t (&w)[16], bool valid, Store&& store) {
  uint32_t m2 = 0u;
#pragma unroll
  for (int j = 0; j < 16; ++j) m2 = hmax2_abs<kBF16>(m2, w[j]);
  float amax = fmaxf(in_to_float(static_cast<uint16_t>(m2 & 0xFFFFu), kBF16),
                     in_to_float(static_cast<uint16_t>(m2 >> 16), kBF16));
  amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 2));
  if (!valid) return 0.f;
  const float s = qrules::fp8_group_scale(amax);
  const bool fast = amax >= 0x1p-60f && amax <= 3.40282347e38f;
  const float y = fast ? __frcp_rn(s) : 0.f;
  auto val = [&](int j) {
    return in_to_float(static_cast<uint16_t>((j & 1) ? w[j / 2] >> 16 : w[j / 2] & 0xFFFFu), kBF16);
  };
  // Chunk i (8 values) quantized and stored at once (no 32-value fp32 array stays live).
  auto store8 = [&](int i, const float(&q)[8]) {
    store(i, e4m3x2(q[0], q[1]) | (e4m3x2(q[2], q[3]) << 16),
          e4m3x2(q[4], q[5]) | (e4m3x2(q[6], q[7]) << 16));
  };
  if (fast) {  // two code paths, so the fast one carries no per-value branch
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float q[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float x = val(8 * i + k);
        const float q0 = __fmul_rn(x, y);
        const float r = fmaf(-q0, s, x);
        q[k] = r == 0.f ? q0 : fmaf(r, y, q0);
      }
      store8(i, q);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float q[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) q[k] = qrules::fp8_scaled(val(8 * i + k), s);
      store8(i, q);
    }
  }
  return s;
}

/// Quantizes and stores the 32 values g128_load gave this lane part (g128_codes). kTiled: the
/// values in the SM90 block FP8 wgmma kernel's activation stage image (fp8_group128_kernel), the
/// scale only for rows < M.
template <bool kBF16, bool kTiled = false>
__device__ __forceinline__ void g128_quant(const BlockQuantParams& p, int64_t row, int64_t col,
                                           int part, bool valid, const uint32_t (&w)[16]) {
  // Tiled: row r of token tile row / 128 and 128-K group col at ((tile * cols + col) * 128 + r)
  // * 128, its 16-byte chunk c at c ^ (r & 7) (the stage's 128-byte swizzle); this lane's 8-byte
  // piece i lies in chunk 2i + part / 2.
  const int64_t cols = p.K / 128;
  uint8_t* out =
      kTiled ? p.values + (((row >> 7) * cols + col) * 128 + (row & 127)) * 128 + (part & 1) * 8
             : p.values + row * p.K + col * 128 + part * 8;
  const int sw = static_cast<int>(row & 7);
  const float s = g128_codes<kBF16>(w, valid, [&](int i, uint32_t w0, uint32_t w1) {
    uint8_t* const o = kTiled ? out + (((2 * i + (part >> 1)) ^ sw) << 4) : out + 32 * i;
    *reinterpret_cast<uint2*>(o) = make_uint2(w0, w1);
  });
  if (valid && part == 0 && (!kTiled || row < p.M)) p.scale_f32[row * cols + col] = s;
}

/// The MXFP8 E8M0 code of the 32-value block whose 8-value chunk v this lane holds (the block's
/// four chunks on four adjacent lanes, every lane of the warp calling it) and the chunk's E4M3
/// codes (lo, hi): MxFp8Policy's numerics (quant_chunk), for the decode GEMM's staging.
__device__ __forceinline__ uint8_t mx8_codes(const float (&v)[8], uint32_t& lo, uint32_t& hi) {
  float amax = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) amax = fmt::amax_update(amax, v[j]);
  amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 2));
  amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 1));
  const ScaleOut s = MxFp8Policy::scale(amax, 0.f, nullptr);
  float q[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) q[j] = MxFp8Policy::apply(v[j], s);
  lo = e4m3x2(q[0], q[1]) | (e4m3x2(q[2], q[3]) << 16);
  hi = e4m3x2(q[4], q[5]) | (e4m3x2(q[6], q[7]) << 16);
  return s.code;
}

/// mx8_codes of 8 BF16 values in one 16-byte vector (the GEMM kernels' staged activation rows).
__device__ __forceinline__ uint8_t mx8_codes_bf16(const uint4& v, uint32_t& lo, uint32_t& hi) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  float f[8];
#pragma unroll
  for (int e = 0; e < 8; ++e)
    f[e] = __uint_as_float(e & 1 ? w[e / 2] & 0xFFFF0000u : w[e / 2] << 16);
  return mx8_codes(f, lo, hi);
}

/// The FP8 1x128-group quantiser on vector rows (x 16-byte aligned, ldx % 8 == 0, K % 128 == 0,
/// values 8-byte aligned): four lanes per group, each with 32 values in four 16-byte loads issued
/// before any math, amax over two shuffles. The division x / s of every
/// value is Markstein's correction of x * RN(1/s): q0 = RN(x * y), r = x - q0 * s (exact by FMA),
/// q = RN(q0 + r * y) is the correctly rounded quotient whenever no intermediate leaves the normal
/// range (Handbook of Floating-Point Arithmetic, thm. 5.8); q0 is kept when r = 0 so the sign of a
/// zero quotient stays that of x. With amax in [2^-60, FLT_MAX] every quotient that can round to
/// a non-zero E4M3 value (>= 2^-10) is in range (checked on the host against x / s over 10^9
/// pairs: equal wherever |x / s| >= 2^-12); other groups (all-zero, Inf, tiny) take div_rn.
/// 3 instructions per value instead of the IEEE division's ~8 (MUFU, FCHK, branch).
/// kTiled (the SM90 block FP8 wgmma kernel's bulk-copy default): values as that kernel's stage
/// images, one 16 KB block per (128-token tile, 128-K group) in tile-major order, rows swizzled
/// as the stage's 128-byte mode, so one bulk copy fills a stage's activations; the rows from M
/// up to the next multiple of 128 are written as zeros (no scale).
template <bool kBF16, bool kTiled = false>
__global__ void __launch_bounds__(256) fp8_group128_kernel(const BlockQuantParams p) {
  allow_dependents(p.early_dependents);
  wait_predecessor();
  const int lane = threadIdx.x & 31, part = lane & 3;
  const int64_t cols = p.K / 128;
  const int64_t groups = (kTiled ? (p.M + 127) / 128 * 128 : p.M) * cols;
  const int64_t wstride = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32) * 8;
  for (int64_t g0 = (static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32) * 8;
       g0 < groups; g0 += wstride) {  // warp-uniform: 8 groups per warp and pass
    const int64_t gi = g0 + (lane >> 2);
    const bool valid = gi < groups;
    int64_t row = 0, col = 0;
    if (valid) {
      if (groups <= 0xFFFFFFFFll) {
        const uint32_t r32 = static_cast<uint32_t>(gi) / static_cast<uint32_t>(cols);
        row = r32;
        col = static_cast<uint32_t>(gi) - r32 * static_cast<uint32_t>(cols);
      } else {
        row = gi / cols;
        col = gi - row * cols;
      }
    }
    uint32_t w[16];
    g128_load(p, row, col, part, valid && (!kTiled || row < p.M), w);
    g128_quant<kBF16, kTiled>(p, row, col, part, valid, w);
  }
}

// ------------------------------------------------------------------------ MXFP8 to BF16 -------
struct MxDequantParams {
  const uint16_t* x;
  int64_t M, K, KP, ldx;
  uint16_t* out;  ///< BF16 [M][KP], zeros past K
  int kperm;      ///< 1: every 32-K block in the e4m3 k32 fragment's k order (lin::ActParams)
  bool early_dependents;  ///< allow_dependents at the start
};

/// The tiled kernels' MXFP8 / MXFP4 W4A8 activation pre-pass in one kernel: per 32-value block
/// the E8M0 code and E4M3 values of launch_quantize_mxfp8, then back to BF16 as
/// lin::act_dequant_kernel writes them (e4m3 x 2^(code - 127), the power of two folded, RN),
/// in the fragment's k order when kperm. Same bits as those two passes, without writing and
/// re-reading the E4M3 intermediate (and without the dequant pass's byte loads): one thread per
/// block, four 16-byte loads and four 16-byte stores. Vector rows only (x 16-byte aligned,
/// ldx % 8 == 0, K % 32 == 0, out 16-byte aligned, KP % 32 == 0).
template <bool kBF16>
__global__ void __launch_bounds__(256) mxfp8_dequant_kernel(const MxDequantParams p) {
  allow_dependents(p.early_dependents);
  const int64_t bpr = p.KP / 32;
  const int64_t total = p.M * bpr;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < total;
       b += stride) {
    int64_t m, k0;
    if (total <= 0xFFFFFFFFll) {  // 32-bit division where it fits
      const uint32_t q = static_cast<uint32_t>(b) / static_cast<uint32_t>(bpr);
      m = q;
      k0 = static_cast<int64_t>(static_cast<uint32_t>(b) - q * static_cast<uint32_t>(bpr)) * 32;
    } else {
      m = b / bpr;
      k0 = (b - m * bpr) * 32;
    }
    uint32_t o[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) o[i] = 0u;
    if (k0 < p.K) {
      float v[32];
      load32<kBF16>(p.x + m * p.ldx + k0, 8, true, v);
      float amax = 0.f;
#pragma unroll
      for (int j = 0; j < 32; ++j) amax = fmt::amax_update(amax, v[j]);
      const uint8_t code = qrules::mxfp8_scale_code(amax);
      // lin::e8m0_f32: 2^(code - 127), code 0 -> 2^-127, 255 -> NaN.
      const float gs = code == 0     ? __uint_as_float(0x00400000u)
                       : code == 255 ? __uint_as_float(0x7FC00000u)
                                     : __uint_as_float(static_cast<uint32_t>(code) << 23);
      float d[32];
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const uint32_t q =
            e4m3x2(qrules::mx_scaled(v[2 * j], code), qrules::mx_scaled(v[2 * j + 1], code));
        d[2 * j] = fmt::e4m3_to_float(static_cast<uint8_t>(q & 0xFFu)) * gs;
        d[2 * j + 1] = fmt::e4m3_to_float(static_cast<uint8_t>(q >> 8)) * gs;
      }
      // Output slot 8 c + i of the block holds k = 16 (c >> 1) + 2 (c & 1) + 4 (i >> 1) + (i & 1)
      // (kperm) or 8 c + i.
#pragma unroll
      for (int c = 0; c < 4; ++c)
#pragma unroll
        for (int i = 0; i < 8; i += 2) {
          const int k = 16 * (c >> 1) + 2 * (c & 1) + 4 * (i >> 1);
          const float lo = p.kperm ? d[k] : d[8 * c + i];
          const float hi = p.kperm ? d[k + 1] : d[8 * c + i + 1];
          o[4 * c + i / 2] =
              static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
              (static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16);
        }
    }
    uint4* dst = reinterpret_cast<uint4*>(p.out + m * p.KP + k0);
#pragma unroll
    for (int c = 0; c < 4; ++c)
      dst[c] = make_uint4(o[4 * c], o[4 * c + 1], o[4 * c + 2], o[4 * c + 3]);
  }
}

// ------------------------------------------------------------------------ per-tensor FP8 -------
struct TensorFp8Params {
  const uint16_t* x;
  int64_t M, K, ldx;
  uint8_t* values;  ///< [M, K]
  const float* scale;
  bool vec;  ///< x 16-byte aligned, ldx % 8 == 0, K % 8 == 0, values 8-byte aligned
};

template <bool kBF16>
__global__ void __launch_bounds__(256) tensor_fp8_kernel(const TensorFp8Params p) {
  const int64_t cpr = (p.K + 7) / 8;
  const int64_t total = p.M * cpr;
  const float scale = __ldg(p.scale);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t row = start / cpr, c = start - (start / cpr) * cpr;
  const int64_t drow = stride / cpr, dc = stride - drow * cpr;
  for (int64_t i = start; i < total;
       i += stride, row += drow, c += dc, (c >= cpr ? (c -= cpr, ++row) : 0)) {
    const uint16_t* src = p.x + row * p.ldx + c * 8;
    uint8_t* out = p.values + row * p.K + c * 8;
    if (p.vec) {
      float v[8];
      load8<kBF16>(src, true, v);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = qrules::fp8_scaled(v[j], scale);
      const uint32_t w0 = e4m3x2(v[0], v[1]) | (e4m3x2(v[2], v[3]) << 16);
      const uint32_t w1 = e4m3x2(v[4], v[5]) | (e4m3x2(v[6], v[7]) << 16);
      *reinterpret_cast<uint2*>(out) = make_uint2(w0, w1);
    } else {
      const int n = static_cast<int>(p.K - c * 8 < 8 ? p.K - c * 8 : 8);
      for (int j = 0; j < n; ++j) {
        const float f = in_to_float(__ldg(src + j), kBF16);
        out[j] = static_cast<uint8_t>(e4m3x2(qrules::fp8_scaled(f, scale), 0.f) & 0xFFu);
      }
    }
  }
}

}  // namespace b12x::gemm::kernels
