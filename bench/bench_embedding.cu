// Benchmark of the Q8_0 embedding lookup: microseconds per call (CUDA-graph replays, rotating
// random id sets), effective GB/s (Q8_0 rows read + BF16 rows written), % of the streaming-read
// bandwidth measured in the same process, and the ratio to the peer: a plain BF16 embedding
// gather (16-byte loads/stores) of the same [vocab, dim] shape in the same process.
#include <cuda_runtime.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "b12x/embedding.h"
#include "bench_common.h"

using namespace b12x;
using namespace b12x::bench;

namespace {

__global__ void bf16_gather_kernel(const uint4* __restrict__ table, const int32_t* __restrict__ ids,
                                   uint4* __restrict__ out, int64_t row_vec) {
  const int64_t t = blockIdx.x;
  const int64_t id = ids[t];
  const uint4* src = table + id * row_vec;
  uint4* dst = out + t * row_vec;
  for (int64_t i = threadIdx.x; i < row_vec; i += blockDim.x) dst[i] = __ldg(src + i);
}

__global__ void fill_bytes(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    p[i] = static_cast<uint8_t>(h);
  }
}

}  // namespace

int main() {
  // Line-buffered so a timeout still leaves every printed row; the JSON is rewritten per row.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const double bw = measure_read_bandwidth_gbs();
  std::printf("read bandwidth ceiling: %.0f GB/s\n", bw);
  std::printf("%7s %6s %6s %9s %9s %6s %9s %8s\n", "vocab", "dim", "T", "us", "GB/s", "%bw",
              "bf16_us", "x_bf16");
  JsonRows json;
  struct Shape {
    int64_t vocab, dim;
  };
  const Shape shapes[] = {{128256, 4096}, {151936, 5120}};
  const int64_t Ts[] = {1, 16, 128, 1024, 8192};
  for (const Shape& sh : shapes) {
    const int64_t row_q8 = sh.dim / 32 * 34, row_bf16 = sh.dim * 2;
    uint8_t* q8 = nullptr;
    uint8_t* bf = nullptr;
    BENCH_CUDA(cudaMalloc(&q8, size_t(sh.vocab) * row_q8));
    BENCH_CUDA(cudaMalloc(&bf, size_t(sh.vocab) * row_bf16));
    fill_bytes<<<4096, 256>>>(q8, size_t(sh.vocab) * row_q8, 7);
    fill_bytes<<<4096, 256>>>(bf, size_t(sh.vocab) * row_bf16, 9);
    BENCH_CUDA(cudaDeviceSynchronize());
    const EmbeddingPlan plan =
        plan_embedding({sh.vocab, sh.dim, 8192, DType::kInt32, DType::kBF16, 0});
    void* scratch = nullptr;
    BENCH_CUDA(cudaMalloc(&scratch, plan.scratch_bytes));
    for (int64_t T : Ts) {
      const int sets = 8;
      std::vector<int32_t*> ids(sets);
      std::mt19937 g(42 + T);
      std::uniform_int_distribution<int32_t> u(0, static_cast<int32_t>(sh.vocab - 1));
      for (int i = 0; i < sets; ++i) {
        std::vector<int32_t> h(T);
        for (auto& v : h) v = u(g);
        BENCH_CUDA(cudaMalloc(&ids[i], T * 4));
        BENCH_CUDA(cudaMemcpy(ids[i], h.data(), T * 4, cudaMemcpyHostToDevice));
      }
      uint16_t* out = nullptr;
      uint16_t* out_peer = nullptr;
      BENCH_CUDA(cudaMalloc(&out, size_t(T) * row_bf16));
      BENCH_CUDA(cudaMalloc(&out_peer, size_t(T) * row_bf16));
      std::vector<EmbeddingBinding> binds;
      for (int i = 0; i < sets; ++i)
        binds.push_back(bind_embedding(
            plan, TensorRef::contiguous(scratch, DType::kUInt8, {plan.scratch_bytes}, 0),
            TensorRef::contiguous(q8, DType::kQ8_0, {sh.vocab, sh.dim}, 0),
            TensorRef::contiguous(ids[i], DType::kInt32, {T}, 0),
            TensorRef::contiguous(out, DType::kBF16, {T, sh.dim}, 0)));
      const double us = time_graph_us([&](int i, cudaStream_t s) {
        run_embedding(binds[i % sets], reinterpret_cast<Stream>(s));
      });
      const double peer_us = time_graph_us([&](int i, cudaStream_t s) {
        bf16_gather_kernel<<<static_cast<unsigned>(T), 128, 0, s>>>(
            reinterpret_cast<const uint4*>(bf), ids[i % sets], reinterpret_cast<uint4*>(out_peer),
            row_bf16 / 16);
      });
      const double bytes = double(T) * (row_q8 + row_bf16);
      const double gbs = bytes / (us * 1e-6) / 1e9;
      const double peer_gbs = double(T) * 2 * row_bf16 / (peer_us * 1e-6) / 1e9;
      std::printf("%7lld %6lld %6lld %9.2f %9.0f %6.1f %9.2f %8.2f\n", (long long)sh.vocab,
                  (long long)sh.dim, (long long)T, us, gbs, 100.0 * gbs / bw, peer_us,
                  peer_us / us);
      json.add({{"op", JsonRows::str("embedding_q8_0")},
                {"vocab", JsonRows::num(double(sh.vocab))},
                {"dim", JsonRows::num(double(sh.dim))},
                {"T", JsonRows::num(double(T))},
                {"us", JsonRows::num(us)},
                {"bytes", JsonRows::num(bytes)},
                {"gbs", JsonRows::num(gbs)},
                {"pct_read_bw", JsonRows::num(100.0 * gbs / bw)},
                {"peer", JsonRows::str("bf16 embedding gather, same shape")},
                {"peer_us", JsonRows::num(peer_us)},
                {"peer_gbs", JsonRows::num(peer_gbs)},
                {"speedup_vs_peer", JsonRows::num(peer_us / us)}});
      json.write("embedding", bw);
      for (auto* p : ids) cudaFree(p);
      cudaFree(out);
      cudaFree(out_peer);
    }
    cudaFree(scratch);
    cudaFree(q8);
    cudaFree(bf);
  }
  const std::string path = json.write("embedding", bw);
  std::printf("wrote %s\n", path.c_str());
  return 0;
}
