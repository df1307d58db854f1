// Device side of the MoE op: routing, per-slot quantisation, the top-k combine, the weight
// repack used by prepare_weights, and the dispatch to the GEMM engine's per-format units
// (moe_gemm_<format>.cu). The decode stream lives in moe_decode.cu.
#include <cub/block/block_scan.cuh>

#include <utility>

#include "core/cuda_check.h"
#include "formats/swizzle.h"
#include "moe/kernels/moe_gemm.cuh"
#include "moe/moe_launch.h"
#include "moe/moe_launch_util.h"
#include "moe/moe_layout.h"

namespace b12x::moe::detail {
namespace {

__device__ __forceinline__ int64_t load_id(const void* ids, bool ids64, int64_t r) {
  return ids64 ? static_cast<const int64_t*>(ids)[r]
               : static_cast<int64_t>(static_cast<const int32_t*>(ids)[r]);
}

// One CTA: per-expert histogram, prefix sums of rows and of token tiles, the tile list and the
// slot -> route map (slot order inside an expert is arbitrary; results do not depend on it).
// Counters live in shared memory and are rebuilt every launch (graph-replay safe).
constexpr int kRouteThreads = 1024;
__global__ void __launch_bounds__(kRouteThreads)
    route_kernel(const void* ids, bool ids64, int routes, int E, int TN, int4* tiles,
                 int* num_tiles, int* slot_route, int* slot_expert) {
  extern __shared__ int sm[];
  int* cnt = sm;
  int* cur = sm + E;
  using Scan = cub::BlockScan<int, kRouteThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  const int tid = threadIdx.x;
  dev::pdl_trigger();
  for (int e = tid; e < E; e += kRouteThreads) cnt[e] = 0;
  __syncthreads();
  for (int r = tid; r < routes; r += kRouteThreads) {
    const int64_t e = load_id(ids, ids64, r);
    if (e >= 0 && e < E) atomicAdd(&cnt[e], 1);
  }
  __syncthreads();
  const int per = (E + kRouteThreads - 1) / kRouteThreads;
  const int e0 = min(tid * per, E), e1 = min(e0 + per, E);
  int rows = 0, ntiles = 0;
  for (int e = e0; e < e1; ++e) {
    rows += cnt[e];
    ntiles += (cnt[e] + TN - 1) / TN;
  }
  int row_off, tile_off, tile_total;
  Scan(scan_tmp).ExclusiveSum(rows, row_off);
  __syncthreads();
  Scan(scan_tmp).ExclusiveSum(ntiles, tile_off, tile_total);
  for (int e = e0; e < e1; ++e) {
    const int c = cnt[e];
    cur[e] = row_off;
    for (int i = 0; i * TN < c; ++i)
      tiles[tile_off++] = make_int4(e, row_off + i * TN, min(TN, c - i * TN), 0);
    row_off += c;
  }
  if (tid == kRouteThreads - 1) {
    num_tiles[0] = tile_total;
    num_tiles[1] = row_off;  // the last thread's running offset = number of valid routes
  }
  __syncthreads();
  for (int r = tid; r < routes; r += kRouteThreads) {
    const int64_t e = load_id(ids, ids64, r);
    if (e >= 0 && e < E) {
      const int pos = atomicAdd(&cur[e], 1);
      slot_route[pos] = r;
      slot_expert[pos] = static_cast<int>(e);
    }
  }
}

// One CTA per slot row: quantise-dequantise 32-value blocks into BF16 operand values.
__global__ void quant_rows_kernel(const void* src, bool src_fp16, int64_t src_ld, bool by_token,
                                  int topk, const int* slot_route, const int* slot_expert,
                                  const int* counts, const float* gs, int aquant, uint16_t* dst,
                                  int64_t dst_ld, int K) {
  dev::pdl_trigger();
  dev::pdl_wait();
  const int s = blockIdx.x;
  if (s >= counts[1]) return;
  const int64_t row = by_token ? static_cast<int64_t>(slot_route[s] / topk) : s;
  const float g = aquant == num::kANvfp4 ? gs[slot_expert[s]] : 1.f;
  const uint16_t* in = static_cast<const uint16_t*>(src) + row * src_ld;
  uint16_t* out = dst + static_cast<int64_t>(s) * dst_ld;
  for (int b = threadIdx.x; b < K / 32; b += blockDim.x) {
    float v[32];
    const uint4* p = reinterpret_cast<const uint4*>(in + 32 * b);
    uint4 w[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) w[q] = p[q];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const uint32_t ws[4] = {w[q].x, w[q].y, w[q].z, w[q].w};
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        const uint32_t lo = ws[h] & 0xFFFFu, hi = ws[h] >> 16;
        v[8 * q + 2 * h] = src_fp16 ? fmt::fp16_bits_to_float(lo) : fmt::bf16_bits_to_float(lo);
        v[8 * q + 2 * h + 1] = src_fp16 ? fmt::fp16_bits_to_float(hi) : fmt::bf16_bits_to_float(hi);
      }
    }
    num::quant_operand32(v, aquant, g);
    uint4* o = reinterpret_cast<uint4*>(out + 32 * b);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      uint32_t r[4];
#pragma unroll
      for (int h = 0; h < 4; ++h)
        r[h] = static_cast<uint32_t>(fmt::float_to_bf16_bits(v[8 * q + 2 * h])) |
               (static_cast<uint32_t>(fmt::float_to_bf16_bits(v[8 * q + 2 * h + 1])) << 16);
      o[q] = make_uint4(r[0], r[1], r[2], r[3]);
    }
  }
}

// out[m, h] = sum_k w[m,k] * route_out[m*topk + k, h] in fixed k order (bitwise reproducible).
__global__ void combine_kernel(const float* route_out, int64_t H, int topk, const void* ids,
                               bool ids64, int E, const float* weights, bool weight_on_input,
                               void* out, bool out_fp16, int64_t out_ld) {
  dev::pdl_trigger();
  dev::pdl_wait();
  const int64_t m = blockIdx.x;
  const int64_t h = (static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * 4;
  if (h >= H) return;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int k = 0; k < topk; ++k) {
    const int64_t r = m * topk + k;
    const int64_t e = load_id(ids, ids64, r);
    if (e < 0 || e >= E) continue;
    const float w = weight_on_input ? 1.f : weights[r];
    const float4 o = *reinterpret_cast<const float4*>(route_out + r * H + h);
    acc.x = fmaf(w, o.x, acc.x);
    acc.y = fmaf(w, o.y, acc.y);
    acc.z = fmaf(w, o.z, acc.z);
    acc.w = fmaf(w, o.w, acc.w);
  }
  uint16_t* o = static_cast<uint16_t*>(out) + m * out_ld + h;
  const float v[4] = {acc.x, acc.y, acc.z, acc.w};
  uint16_t b[4];
  for (int i = 0; i < 4; ++i)
    b[i] = out_fp16 ? fmt::float_to_fp16_bits(v[i]) : fmt::float_to_bf16_bits(v[i]);
  *reinterpret_cast<uint2*>(o) =
      make_uint2(b[0] | (uint32_t(b[1]) << 16), b[2] | (uint32_t(b[3]) << 16));
}

// ---- repack ------------------------------------------------------------------------------
__device__ int row_map(const RepackSrc& s, int64_t pr) {
  return layout::prep_row_source(s.gated != 0, s.w13 != 0, s.features, s.src_rows, pr);
}

__device__ __forceinline__ const uint8_t* src_row(const RepackSrc& s, int64_t e, int sr) {
  return s.values + e * s.values_expert_stride + sr * s.values_row_stride;
}

__global__ void repack_values_kernel(int wfmt, RepackSrc s, WeightView d, uint8_t* out, int E) {
  // Logical bytes (e, row, byte) in row-major order; FP4 codes are stored at the WeightView's
  // offsets (row-major or in 32-row chunk tiles, the same bytes per expert).
  const int64_t row_bytes = d.values_group_stride / 32;
  const int64_t per_expert = static_cast<int64_t>(d.rows_pad) * row_bytes;
  const int64_t total = per_expert * E;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  if (wfmt == kWFp4) {
    for (int64_t wi = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; wi < total / 4; wi += step) {
      const int64_t byte = wi * 4;
      const int64_t e = byte / per_expert, pr = (byte % per_expert) / row_bytes;
      const int64_t wr = (byte % row_bytes) / 4;  // word in row
      const int64_t c = wr / 16;
      const int t = static_cast<int>((wr % 16) / 4), w = static_cast<int>(wr % 4);
      const int sr = row_map(s, pr);
      uint32_t word = 0;
      if (sr >= 0) {
        const uint8_t* row = src_row(s, e, sr);
        const uint8_t* sb = s.scales + e * s.scales_expert_stride;
        for (int i = 0; i < 8; ++i) {
          const int64_t k = layout::fp4_word_k(c, t, w, i);
          if (k < d.K) {
            uint32_t nib = (row[k / 2] >> (4 * (k & 1))) & 0xFu;
            // NVFP4: a zero block scale zeroes its codes (the prepared E5M3 scale byte 0 is
            // then never decoded against a non-zero code; see moe_layout.h).
            if (d.scale_kind == 0 &&
                (sb[fmt::swizzled_scale_offset(sr, k / 16, d.K / 16)] & 0x7Fu) == 0)
              nib = 0;
            word |= layout::fp4_place(nib, i);
          }
        }
      }
      *reinterpret_cast<uint32_t*>(out + e * d.values_expert_stride + value_row_offset(d, pr) +
                                   c * d.values_k_stride + (wr % 16) * 4) = word;
    }
    return;
  }
  for (int64_t byte = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; byte < total; byte += step) {
    const int64_t e = byte / per_expert, pr = (byte % per_expert) / row_bytes;
    const int64_t rb = byte % row_bytes;
    const int sr = row_map(s, pr);
    uint8_t v = 0;
    if (sr >= 0) {
      const uint8_t* row = src_row(s, e, sr);
      if (wfmt == kWQ8_0) {
        const int64_t c = rb / 128, t = (rb % 128) / 32, j = (rb % 32) / 4, q = rb % 4;
        const int64_t k = 128 * c + 16 * j + 4 * t + q;
        if (k < d.K) v = row[(k / 32) * 34 + 2 + k % 32];
      } else if (wfmt == kWIq2xxs) {
        v = row[(rb / 64) * 66 + 2 + rb % 64];
      } else {
        v = row[(rb / 72) * 74 + 2 + rb % 72];
      }
    }
    out[byte] = v;
  }
}

__global__ void repack_scales_kernel(int wfmt, RepackSrc s, WeightView d, uint8_t* out, int E) {
  // Logical bytes (e, row, rb) in row-major order; FP4 scales are stored at the WeightView's
  // offsets (row-major or in 32-row chunk tiles, the same bytes per expert).
  const int chunk = wfmt == kWFp4 ? (d.scale_kind == 0 ? 8 : 4) : 0;
  const int64_t row_bytes = d.scales_group_stride / 32;
  const int64_t per_expert = static_cast<int64_t>(d.rows_pad) * row_bytes;
  const int64_t total = per_expert * E;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t byte = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; byte < total; byte += step) {
    const int64_t e = byte / per_expert, pr = (byte % per_expert) / row_bytes;
    const int64_t rb = byte % row_bytes;
    const int sr = row_map(s, pr);
    uint8_t v = 0;
    if (sr >= 0) {
      if (wfmt == kWFp4) {
        const uint8_t* sb = s.scales + e * s.scales_expert_stride;
        if (d.scale_kind == 0) {
          if (rb < d.K / 16)
            v = layout::e5m3_from_ue4m3(sb[fmt::swizzled_scale_offset(sr, rb, d.K / 16)]);
        } else {
          if (rb < d.K / 32) v = sb[sr * s.scales_row_stride + rb];
        }
      } else {
        const uint8_t* row = src_row(s, e, sr);
        // fp16 d per block: 2 bytes per block of 32 (Q8_0) or 256 (IQ2)
        const int64_t blk = rb / 2, half = rb % 2;
        const int bv = wfmt == kWQ8_0 ? 32 : 256;
        const int bb = wfmt == kWQ8_0 ? 34 : (wfmt == kWIq2xxs ? 66 : 74);
        if (blk * bv < d.K) v = row[blk * bb + half];
      }
    }
    if (chunk != 0)
      out[e * d.scales_expert_stride + scale_row_offset(d, pr) + rb / chunk * d.scales_k_stride +
          rb % chunk] = v;
    else
      out[byte] = v;
  }
}

}  // namespace

void launch_route(const void* ids, bool ids64, int64_t routes, int num_experts, int tile_tokens,
                  int* tiles, int* counts, int* slot_route, int* slot_expert, Stream stream) {
  const size_t smem = 2 * sizeof(int) * num_experts;
  route_kernel<<<1, kRouteThreads, smem, stream>>>(
      ids, ids64, static_cast<int>(routes), num_experts, tile_tokens,
      reinterpret_cast<int4*>(tiles), counts, slot_route, slot_expert);
  B12X_CUDA_CHECK_LAUNCH();
}

void launch_quant_rows(const void* src, bool src_fp16, int64_t src_ld, bool by_token, int topk,
                       const int* slot_route, const int* slot_expert, const int* counts,
                       const float* gs, int aquant, uint16_t* dst, int64_t dst_ld, int K,
                       int64_t max_rows, Stream stream, bool pdl) {
  if (max_rows <= 0) return;
  launch_k(quant_rows_kernel, dim3(static_cast<unsigned>(max_rows)), dim3(128), 0, stream, pdl, src,
           src_fp16, src_ld, by_token, topk, slot_route, slot_expert, counts, gs, aquant, dst,
           dst_ld, K);
}

void launch_gemm(int wfmt, bool fp16, int cfg, const GemmArgs& a, int gx, int gy, Stream s,
                 bool pdl) {
  if (gx <= 0 || gy <= 0) return;
  // One instantiation unit per weight format (moe_gemm_<format>.cu) so they compile in parallel.
  switch (wfmt) {
    case kWFp4:
      launch_gemm_fp4(fp16, cfg, a, gx, gy, s, pdl);
      break;
    case kWQ8_0:
      launch_gemm_q8_0(fp16, cfg, a, gx, gy, s, pdl);
      break;
    case kWIq2xxs:
      launch_gemm_iq2xxs(fp16, cfg, a, gx, gy, s, pdl);
      break;
    default:
      launch_gemm_iq2xs(fp16, cfg, a, gx, gy, s, pdl);
      break;
  }
  B12X_CUDA_CHECK_LAUNCH();
}

void launch_combine(const float* route_out, int64_t M, int64_t H, int topk, const void* ids,
                    bool ids64, int num_experts, const float* weights, bool weight_on_input,
                    void* out, bool out_fp16, int64_t out_ld, Stream stream, bool pdl) {
  if (M == 0) return;
  const int threads = 256;
  const dim3 grid(static_cast<unsigned>(M), static_cast<unsigned>((H / 4 + threads - 1) / threads));
  launch_k(combine_kernel, grid, dim3(threads), 0, stream, pdl, route_out, H, topk, ids, ids64,
           num_experts, weights, weight_on_input, out, out_fp16, out_ld);
}

void launch_repack(int wfmt, const RepackSrc& src, const WeightView& dst, uint8_t* values,
                   uint8_t* scales, int num_experts, Stream stream) {
  repack_values_kernel<<<2048, 256, 0, stream>>>(wfmt, src, dst, values, num_experts);
  B12X_CUDA_CHECK_LAUNCH();
  repack_scales_kernel<<<1024, 256, 0, stream>>>(wfmt, src, dst, scales, num_experts);
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::moe::detail
