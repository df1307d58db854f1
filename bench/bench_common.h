// Shared benchmark harness: CUDA-event timing over CUDA-graph replays, rotating input sets past
// L2, the streaming-read bandwidth ceiling measured in the same process, and JSON output under
// bench/results/ (GPU, commit, date).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#define BENCH_CUDA(expr)                                                                         \
  do {                                                                                           \
    cudaError_t e_ = (expr);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(2);                                                                              \
    }                                                                                            \
  } while (0)

namespace b12x::bench {

/// How many independent input sets to rotate through so their total exceeds `l2_multiple` x L2.
inline int rotation_count(size_t bytes_per_set, double l2_multiple = 3.0) {
  int dev = 0, l2 = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev);
  const double need = l2_multiple * l2;
  int n = static_cast<int>(need / std::max<size_t>(bytes_per_set, 1)) + 1;
  return std::clamp(n, 1, 64);
}

/// Time `launch(i)` for i = 0..iters-1 (the caller rotates its inputs by i) captured into a CUDA
/// graph of `per_graph` launches; returns the median microseconds per launch over `reps` replays.
inline double time_graph_us(const std::function<void(int, cudaStream_t)>& launch,
                            int per_graph = 20, int reps = 15) {
  cudaStream_t s;
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < 3; ++i) launch(i, s);  // warm-up outside capture
  BENCH_CUDA(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  BENCH_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < per_graph; ++i) launch(i, s);
  BENCH_CUDA(cudaStreamEndCapture(s, &g));
  BENCH_CUDA(cudaGraphInstantiate(&ge, g, 0));
  BENCH_CUDA(cudaGraphLaunch(ge, s));
  BENCH_CUDA(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    BENCH_CUDA(cudaEventRecord(a, s));
    BENCH_CUDA(cudaGraphLaunch(ge, s));
    BENCH_CUDA(cudaEventRecord(b, s));
    BENCH_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.f / per_graph);
  }
  std::sort(t.begin(), t.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  return t[t.size() / 2];
}

/// Streaming-read bandwidth ceiling in GB/s: a plain kernel summing a 2 GiB buffer with 16-byte
/// loads (reads only; one tiny write per block). Defined in bench_common.cu.
double measure_read_bandwidth_gbs();

/// GPU name, git commit (B12X_GIT_COMMIT env or `git rev-parse`), ISO date.
std::string gpu_name();
std::string git_commit();
std::string today();

/// Minimal JSON writer for result files: {"gpu":..,"commit":..,"date":..,"read_bw_gbs":..,
/// "rows":[{...}, ...]}. Each row is a list of (key, value-as-JSON-text) pairs.
struct JsonRows {
  std::vector<std::vector<std::pair<std::string, std::string>>> rows;
  void add(std::vector<std::pair<std::string, std::string>> r) { rows.push_back(std::move(r)); }
  static std::string num(double v);
  static std::string str(const std::string& v);
  /// Writes bench/results/<area>-<gpu>-<date>.json (or $B12X_BENCH_OUT/<...>) and returns the path.
  std::string write(const std::string& area, double read_bw_gbs) const;
};

}  // namespace b12x::bench
