// Formats benchmark: throughput of the shared B12X_HD codecs (src/formats) used directly in
// simple one-thread-per-block kernels, against the streaming-read bandwidth ceiling.
//
// These are the reference device paths other areas build on (the quantize area owns the tuned
// quantizers); the numbers show how far a naive use of the codecs is from the memory roofline:
//   nvfp4_quant   bf16 [M,K] -> packed E2M1 + swizzled UE4M3 scales (128x4 layout)
//   mxfp8_quant   bf16 [M,K] -> E4M3 + swizzled E8M0 scales
//   q8_0_dequant  Q8_0 [M,K] -> bf16
//   iq2_xs_dequant IQ2_XS [M,K] -> bf16 (grid in __constant__ memory)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "formats/block.h"
#include "formats/ggml.h"
#include "formats/swizzle.h"

namespace f = b12x::fmt;
using b12x::bench::JsonRows;

__constant__ uint64_t c_iq2xs_grid[512] = B12X_GGML_IQ2XS_GRID_INIT;

__device__ __forceinline__ void load_bf16x16(const __nv_bfloat16* p, float* x) {
  const uint4 a = reinterpret_cast<const uint4*>(p)[0];
  const uint4 b = reinterpret_cast<const uint4*>(p)[1];
  const uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  for (int i = 0; i < 8; ++i) {
    x[2 * i] = f::bf16_bits_to_float(static_cast<uint16_t>(w[i] & 0xFFFFu));
    x[2 * i + 1] = f::bf16_bits_to_float(static_cast<uint16_t>(w[i] >> 16));
  }
}

__global__ void nvfp4_quant_kernel(const __nv_bfloat16* x, int64_t m, int64_t k, float gs,
                                   uint8_t* packed, uint8_t* sf) {
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // 16-value block index
  const int64_t nb = m * k / 16;
  if (b >= nb) return;
  float v[16];
  load_bf16x16(x + b * 16, v);
  alignas(8) uint8_t q[8];
  const uint8_t s = f::nvfp4_encode_block(v, gs, q);
  *reinterpret_cast<uint2*>(packed + b * 8) = *reinterpret_cast<const uint2*>(q);
  const int64_t cols = k / 16;
  sf[f::swizzled_scale_offset(b / cols, b % cols, cols)] = s;
}

__global__ void mxfp8_quant_kernel(const __nv_bfloat16* x, int64_t m, int64_t k, uint8_t* vals,
                                   uint8_t* sf) {
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // 32-value block index
  const int64_t nb = m * k / 32;
  if (b >= nb) return;
  float v[32];
  load_bf16x16(x + b * 32, v);
  load_bf16x16(x + b * 32 + 16, v + 16);
  alignas(16) uint8_t q[32];
  const uint8_t s = f::mxfp8_encode_block(v, f::MxZeroBlockScale::kOne, q);
  reinterpret_cast<uint4*>(vals + b * 32)[0] = reinterpret_cast<const uint4*>(q)[0];
  reinterpret_cast<uint4*>(vals + b * 32)[1] = reinterpret_cast<const uint4*>(q)[1];
  const int64_t cols = k / 32;
  sf[f::swizzled_scale_offset(b / cols, b % cols, cols)] = s;
}

__global__ void q8_0_dequant_kernel(const uint8_t* blocks, int64_t nblocks, __nv_bfloat16* out) {
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= nblocks) return;
  float y[32];
  f::ggml::q8_0_decode_block(blocks + b * 34, y);
  uint32_t w[16];
  for (int i = 0; i < 16; ++i)
    w[i] = f::float_to_bf16_bits(y[2 * i]) | (uint32_t(f::float_to_bf16_bits(y[2 * i + 1])) << 16);
  uint4* o = reinterpret_cast<uint4*>(out + b * 32);
  for (int i = 0; i < 4; ++i) o[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
}

__global__ void iq2_xs_dequant_kernel(const uint8_t* blocks, int64_t nblocks, __nv_bfloat16* out) {
  // One thread per 32-value sub-block: decode the whole block and keep the slice (simple).
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= nblocks * 8) return;
  const int64_t b = t / 8;
  const int ib = static_cast<int>(t % 8);
  const uint8_t* blk = blocks + b * 74;
  const float d = f::fp16_bits_to_float(f::ggml::load_u16(blk));
  const uint8_t sc = blk[66 + ib];
  float y[32];
  for (int l = 0; l < 4; ++l) {
    const uint32_t q = f::ggml::load_u16(blk + 2 + 2 * (4 * ib + l));
    f::ggml::iq2_decode_group(f::ggml::iq2_sub_scale(d, l < 2 ? (sc & 0xFu) : (sc >> 4)),
                              c_iq2xs_grid[q & 0x1FFu], q >> 9, y + 8 * l);
  }
  uint32_t w[16];
  for (int i = 0; i < 16; ++i)
    w[i] = f::float_to_bf16_bits(y[2 * i]) | (uint32_t(f::float_to_bf16_bits(y[2 * i + 1])) << 16);
  uint4* o = reinterpret_cast<uint4*>(out + b * 256 + ib * 32);
  for (int i = 0; i < 4; ++i) o[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
}

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows reach the log even if a timeout kills us
  const double bw = b12x::bench::measure_read_bandwidth_gbs();
  std::printf("formats bench on %s, read bandwidth ceiling %.0f GB/s\n",
              b12x::bench::gpu_name().c_str(), bw);
  JsonRows json;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);

  struct Shape {
    int64_t m, k;
  };
  for (Shape sh : {Shape{4096, 4096}, Shape{8192, 8192}}) {
    const int64_t m = sh.m, k = sh.k, n = m * k;
    // ---- quantizers (bf16 in) ----
    const size_t in_bytes = n * 2;
    const int sets = b12x::bench::rotation_count(in_bytes + n);
    // 1M random values tiled over the matrix (generating 64M normals on the host is slow).
    std::vector<uint16_t> hx(n);
    for (int64_t i = 0; i < (int64_t(1) << 20); ++i) hx[i] = f::float_to_bf16_bits(nd(rng));
    for (int64_t i = int64_t(1) << 20; i < n; ++i) hx[i] = hx[i & ((int64_t(1) << 20) - 1)];
    std::vector<__nv_bfloat16*> xs(sets);
    for (auto& p : xs) {
      BENCH_CUDA(cudaMalloc(&p, in_bytes));
      BENCH_CUDA(cudaMemcpy(p, hx.data(), in_bytes, cudaMemcpyHostToDevice));
    }
    uint8_t *packed, *sf, *vals;
    BENCH_CUDA(cudaMalloc(&packed, n / 2));
    BENCH_CUDA(cudaMalloc(&vals, n));
    BENCH_CUDA(cudaMalloc(&sf, f::swizzled_scale_bytes(m, k / 16)));
    auto report = [&](const char* name, double us, double bytes) {
      const double gbs = bytes / us * 1e-3;
      std::printf("  %-15s M=%-5lld K=%-5lld %9.1f us %7.0f GB/s (%4.1f%% of read ceiling)\n", name,
                  (long long)m, (long long)k, us, gbs, 100.0 * gbs / bw);
      json.add({{"op", JsonRows::str(name)},
                {"m", JsonRows::num(double(m))},
                {"k", JsonRows::num(double(k))},
                {"us", JsonRows::num(us)},
                {"gbs", JsonRows::num(gbs)},
                {"pct_read_bw", JsonRows::num(100.0 * gbs / bw)}});
    };
    {
      const int64_t nb = n / 16;
      const double us = b12x::bench::time_graph_us([&](int i, cudaStream_t s) {
        nvfp4_quant_kernel<<<(nb + 255) / 256, 256, 0, s>>>(xs[i % sets], m, k, 3.f, packed, sf);
      });
      report("nvfp4_quant", us, double(in_bytes) + n / 2 + n / 16);
    }
    {
      const int64_t nb = n / 32;
      const double us = b12x::bench::time_graph_us([&](int i, cudaStream_t s) {
        mxfp8_quant_kernel<<<(nb + 255) / 256, 256, 0, s>>>(xs[i % sets], m, k, vals, sf);
      });
      report("mxfp8_quant", us, double(in_bytes) + n + n / 32);
    }
    // ---- dequantizers (bf16 out) ----
    __nv_bfloat16* out;
    BENCH_CUDA(cudaMalloc(&out, in_bytes));
    {
      const int64_t nb = n / 32, bytes = nb * 34;
      std::vector<uint8_t> hb(bytes);
      for (int64_t i = 0; i < bytes; ++i) hb[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
      for (int64_t i = 0; i < nb; ++i) hb[i * 34 + 1] &= 0x3B;  // modest finite d
      const int qs = b12x::bench::rotation_count(bytes + in_bytes);
      std::vector<uint8_t*> bs(qs);
      for (auto& p : bs) {
        BENCH_CUDA(cudaMalloc(&p, bytes));
        BENCH_CUDA(cudaMemcpy(p, hb.data(), bytes, cudaMemcpyHostToDevice));
      }
      const double us = b12x::bench::time_graph_us([&](int i, cudaStream_t s) {
        q8_0_dequant_kernel<<<(nb + 255) / 256, 256, 0, s>>>(bs[i % qs], nb, out);
      });
      report("q8_0_dequant", us, double(bytes) + in_bytes);
      for (auto p : bs) cudaFree(p);
    }
    {
      const int64_t nb = n / 256, bytes = nb * 74;
      std::vector<uint8_t> hb(bytes);
      for (int64_t i = 0; i < bytes; ++i) hb[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
      for (int64_t i = 0; i < nb; ++i) hb[i * 74 + 1] &= 0x3B;
      const int qs = b12x::bench::rotation_count(bytes + in_bytes);
      std::vector<uint8_t*> bs(qs);
      for (auto& p : bs) {
        BENCH_CUDA(cudaMalloc(&p, bytes));
        BENCH_CUDA(cudaMemcpy(p, hb.data(), bytes, cudaMemcpyHostToDevice));
      }
      const double us = b12x::bench::time_graph_us([&](int i, cudaStream_t s) {
        iq2_xs_dequant_kernel<<<(nb * 8 + 255) / 256, 256, 0, s>>>(bs[i % qs], nb, out);
      });
      report("iq2_xs_dequant", us, double(bytes) + in_bytes);
      for (auto p : bs) cudaFree(p);
    }
    BENCH_CUDA(cudaGetLastError());
    for (auto p : xs) cudaFree(p);
    cudaFree(packed);
    cudaFree(vals);
    cudaFree(sf);
    cudaFree(out);
    // Written after every shape so a timeout still leaves the numbers measured so far.
    std::printf("wrote %s\n", json.write("formats", bw).c_str());
  }
  return 0;
}
