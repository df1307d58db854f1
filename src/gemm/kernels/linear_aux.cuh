// Auxiliary kernels of the linear GEMMs: exact dequantization of quantized activations into BF16
// (+ fp32 group scales) for the MMA engine, and the split-K reduction with the epilogue.
#pragma once

#include "formats/swizzle.h"
#include "gemm/kernels/linear_common.cuh"

namespace b12x::gemm::lin {

__global__ void __launch_bounds__(256) act_dequant_kernel(const ActParams p) {
  // PDL: x comes from earlier kernels; the GEMM after this grid may launch at once (it streams
  // its first weight slices, then its griddepcontrol.wait waits for this grid's stores).
  if (p.pdl) {
    griddep_wait();
    griddep_launch_dependents();
  }
  const int64_t chunks = p.KP / 8;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= p.M * chunks) return;
  const int64_t m = idx / chunks, k8 = (idx % chunks) * 8;
  float v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = 0.f;
  float gscale = 1.f;
  if (k8 < p.K) {
    const uint8_t* row = p.x + m * p.ldx_bytes;
    switch (p.kind) {
      case ActKind::kNvfp4:
      case ActKind::kMxfp4: {
        // 8 values = 4 packed bytes (element 2i in the low nibble).
        uint32_t w = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) w |= static_cast<uint32_t>(row[k8 / 2 + i]) << (8 * i);
        float s = 1.f;
        if (p.kind == ActKind::kNvfp4) {
          s = fmt::ue4m3_to_float(p.xs[fmt::swizzled_scale_offset(m, k8 / 16, p.K / 16)]);
        } else {
          gscale = e8m0_f32(p.xs[fmt::swizzled_scale_offset(m, k8 / 32, p.K / 32)]);
        }
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = e2m1_f32_fast((w >> (4 * i)) & 0xFu) * s;
        break;
      }
      case ActKind::kFp8:
      case ActKind::kFp8Group:
      case ActKind::kMxfp8Rows: {
        if (p.kperm) {
          // Slots k8..k8+7 = (s, h) fixed, t = 0..3, e = 0..1: k = 16s + 4t + 2h + e (a 32-K block
          // never straddles K, which is a multiple of 32 for the FP8 formats).
          const int64_t base = (k8 & ~int64_t{31}) + 16 * ((k8 >> 4) & 1) + 2 * ((k8 >> 3) & 1);
#pragma unroll
          for (int i = 0; i < 8; ++i) v[i] = fmt::e4m3_to_float(row[base + 4 * (i >> 1) + (i & 1)]);
        } else {
          for (int i = 0; i < 8; ++i) v[i] = fmt::e4m3_to_float(row[k8 + i]);
        }
        if (p.kind == ActKind::kFp8Group)
          gscale = reinterpret_cast<const float*>(p.xs)[m * p.xs_ld + k8 / 128];
        else if (p.kind == ActKind::kMxfp8Rows)
          gscale = e8m0_f32(p.xs[m * p.xs_ld + k8 / 32]);
        break;
      }
    }
  }
  // Without a scale output the group scale is folded into the values: exact for the power-of-two
  // E8M0 scales (e2m1 / e4m3 times 2^k is a BF16 number within BF16's range); the fp32 group
  // scales of kFp8Group always go to out_scale.
  if (p.out_scale == nullptr) {
    for (int i = 0; i < 8; ++i) v[i] *= gscale;
  }
  uint4 o;
  uint32_t* ow = reinterpret_cast<uint32_t*>(&o);
  for (int i = 0; i < 4; ++i) {
    const uint32_t lo = __bfloat16_as_ushort(__float2bfloat16_rn(v[2 * i]));
    const uint32_t hi = __bfloat16_as_ushort(__float2bfloat16_rn(v[2 * i + 1]));
    ow[i] = lo | (hi << 16);
  }
  *reinterpret_cast<uint4*>(p.out + m * p.KP + k8) = o;
  if (p.out_scale != nullptr && (k8 % p.group) == 0)
    p.out_scale[m * (p.KP / p.group) + k8 / p.group] = gscale;
}

/// out[m][n] = mult * sum_z partial[z][m][n] (+ bias[n]), z in order from 0: the epilogue of a
/// K split over plain CTAs (fp32 partials [split][M][NP]) of the decode, tiled and GGML GEMV
/// kernels. Launched with PDL behind them where the GEMM was (their triggers follow the main
/// loops): the launch overlaps their epilogues and griddep_wait orders the reads after every
/// partial. Two columns per thread (NP is even, inside the partials region). Every producer writes
/// all NP columns, so with odd N the pair's second column n = N is read initialized and never
/// stored (the n + e < N check below).
__global__ void __launch_bounds__(256) linear_reduce_kernel(const LinearParams p) {
  // Bit 2 (session 28, the FP4 block kernel's reduce on SM90): the parameter lines the sums and
  // stores read, fetched into the SM's constant cache during the wait (warm_param_lines).
  if (threadIdx.x == 0 && (p.reduce_trig & 2)) warm_param_lines(p);
  griddep_wait();
  // The next kernel's griddep_wait still waits for this grid's completion and stores; its CTAs
  // take free slots and request their weights meanwhile (Plan::reduce_trig, session 22).
  if (p.reduce_trig & 1) griddep_launch_dependents();
  const int64_t pairs = (p.N + 1) / 2;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= p.M * pairs) return;
  const int64_t m = idx / pairs, n = 2 * (idx % pairs);
  const float* src = p.partial + m * p.NP + n;
  const int64_t zstride = p.M * p.NP;
  float2 s = make_float2(0.f, 0.f);
  for (int z = 0; z < p.split; ++z) {
    const float2 v = *reinterpret_cast<const float2*>(src + z * zstride);
    s.x += v.x;
    s.y += v.y;
  }
  float mult = p.out_mult;
  if (p.alpha != nullptr) mult *= *p.alpha;
  const float v[2] = {s.x * mult, s.y * mult};
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    if (n + e >= p.N) break;
    const float o = p.bias != nullptr ? v[e] + load_out_type(p.bias, n + e, p.out_fp16) : v[e];
    if (p.out_fp16)
      store_out<true>(p.out, m * p.ldo + n + e, o);
    else
      store_out<false>(p.out, m * p.ldo + n + e, o);
  }
}

}  // namespace b12x::gemm::lin
