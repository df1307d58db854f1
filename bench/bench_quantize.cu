// Benchmark of the activation quantisers (memory-bound): microseconds per call (CUDA-graph
// replays over rotating input sets larger than L2), effective GB/s (bytes read + written), % of
// the streaming-read bandwidth measured in the same process, and the ratio to a peer: a plain
// device-to-device copy of the BF16 input (cudaMemcpyAsync, same bytes read) in the same run.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench_common.h"
#include "formats/swizzle.h"
#include "gemm/quantize_launch.h"

using namespace b12x;
using namespace b12x::bench;

namespace {

__global__ void fill_kernel(uint16_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    // bf16 with exponent in [2^-8, 2^7]: sign + 7-bit mantissa random.
    const uint32_t e = 119 + (h >> 8) % 16;
    p[i] = static_cast<uint16_t>(((h & 1u) << 15) | (e << 7) | ((h >> 1) & 0x7Fu));
  }
}

enum Fmt { kNvfp4, kMxfp8, kMxfp4, kFp8Group, kFp8Tensor };
const char* kNames[] = {"nvfp4", "mxfp8", "mxfp4", "fp8_group128", "fp8_tensor"};

int64_t out_bytes(Fmt f, int64_t M, int64_t K) {
  switch (f) {
    case kNvfp4:
      return M * K / 2 + fmt::swizzled_scale_bytes(M, K / 16);
    case kMxfp8:
      return M * K + M * K / 32 + fmt::swizzled_scale_bytes(M, K / 32);
    case kMxfp4:
      return M * K / 2 + fmt::swizzled_scale_bytes(M, K / 32);
    case kFp8Group:
      return M * K + M * K / 128 * 4;
    case kFp8Tensor:
      return M * K;
  }
  return 0;
}

}  // namespace

int main() {
  // Line-buffered so a timeout still leaves every printed row; the JSON is rewritten per row.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const double bw = measure_read_bandwidth_gbs();
  std::printf("read bandwidth ceiling: %.0f GB/s\n", bw);
  std::printf("%-13s %6s %6s %9s %9s %6s %9s %7s\n", "format", "M", "K", "us", "GB/s", "%bw",
              "copy_us", "x_copy");
  JsonRows json;
  int dev = 0;
  BENCH_CUDA(cudaGetDevice(&dev));
  const gemm::ActQuant q = gemm::act_quant_options(dev);  // the B12X_QUANT_* knobs of this run
  const int64_t Ms[] = {1, 16, 128, 2048, 8192};
  const int64_t Ks[] = {4096, 7168};
  float* scalar = nullptr;
  BENCH_CUDA(cudaMalloc(&scalar, 4));
  const float one = 1.f;
  BENCH_CUDA(cudaMemcpy(scalar, &one, 4, cudaMemcpyHostToDevice));
  for (int64_t K : Ks)
    for (int64_t M : Ms) {
      const size_t in_bytes = size_t(M) * K * 2;
      const int64_t max_out = out_bytes(kMxfp8, M, K);
      const int sets = rotation_count(in_bytes + max_out);
      std::vector<uint16_t*> xs(sets);
      std::vector<uint8_t*> vs(sets), ss(sets), rs(sets);
      std::vector<uint16_t*> copies(sets);
      for (int i = 0; i < sets; ++i) {
        BENCH_CUDA(cudaMalloc(&xs[i], in_bytes));
        BENCH_CUDA(cudaMalloc(&copies[i], in_bytes));
        BENCH_CUDA(cudaMalloc(&vs[i], size_t(M) * K));
        BENCH_CUDA(cudaMalloc(&ss[i], fmt::swizzled_scale_bytes(M, K / 16) * 4 + 64));
        BENCH_CUDA(cudaMalloc(&rs[i], size_t(M) * K / 32 * 4 + 64));
        fill_kernel<<<1024, 256>>>(xs[i], size_t(M) * K, 1234u + i);
      }
      BENCH_CUDA(cudaDeviceSynchronize());
      const double copy_us = time_graph_us([&](int i, cudaStream_t s) {
        const int j = i % sets;
        BENCH_CUDA(cudaMemcpyAsync(copies[j], xs[j], in_bytes, cudaMemcpyDeviceToDevice, s));
      });
      for (int f = 0; f < 5; ++f) {
        const double us = time_graph_us([&](int i, cudaStream_t s) {
          const int j = i % sets;
          auto st = reinterpret_cast<Stream>(s);
          switch (f) {
            case kNvfp4:
              gemm::launch_quantize_nvfp4(xs[j], DType::kBF16, M, K, K, scalar, vs[j], ss[j], q,
                                          st);
              break;
            case kMxfp8:
              gemm::launch_quantize_mxfp8(xs[j], DType::kBF16, M, K, K, vs[j], rs[j], ss[j], q, st);
              break;
            case kMxfp4:
              gemm::launch_quantize_mxfp4(xs[j], DType::kBF16, M, K, K, vs[j], ss[j], q, st);
              break;
            case kFp8Group:
              gemm::launch_quantize_fp8_group128(xs[j], DType::kBF16, M, K, K, vs[j],
                                                 reinterpret_cast<float*>(rs[j]), q, st);
              break;
            case kFp8Tensor:
              gemm::launch_quantize_fp8_tensor(xs[j], DType::kBF16, M, K, K, scalar, vs[j], q, st);
              break;
          }
        });
        const double bytes = double(in_bytes) + double(out_bytes(Fmt(f), M, K));
        const double gbs = bytes / (us * 1e-6) / 1e9;
        std::printf("%-13s %6lld %6lld %9.2f %9.0f %6.1f %9.2f %7.2f\n", kNames[f], (long long)M,
                    (long long)K, us, gbs, 100.0 * gbs / bw, copy_us, copy_us / us);
        json.add({{"op", JsonRows::str(std::string("quantize_") + kNames[f])},
                  {"M", JsonRows::num(double(M))},
                  {"K", JsonRows::num(double(K))},
                  {"us", JsonRows::num(us)},
                  {"bytes", JsonRows::num(bytes)},
                  {"gbs", JsonRows::num(gbs)},
                  {"pct_read_bw", JsonRows::num(100.0 * gbs / bw)},
                  {"peer", JsonRows::str("bf16 d2d copy of the input")},
                  {"peer_us", JsonRows::num(copy_us)},
                  {"speedup_vs_peer", JsonRows::num(copy_us / us)}});
        json.write("quantize", bw);
      }
      for (int i = 0; i < sets; ++i) {
        cudaFree(xs[i]);
        cudaFree(copies[i]);
        cudaFree(vs[i]);
        cudaFree(ss[i]);
        cudaFree(rs[i]);
      }
    }
  cudaFree(scalar);
  const std::string path = json.write("quantize", bw);
  std::printf("wrote %s\n", path.c_str());
  return 0;
}
