#include "bench_common.h"

#include <sys/stat.h>
#include <array>
#include <memory>

namespace b12x::bench {

namespace {
__global__ void read_sum_kernel(const uint4* __restrict__ p, size_t n, unsigned* out) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) out[blockIdx.x] = acc;  // keeps the loads alive, almost never writes
}
}  // namespace

double measure_read_bandwidth_gbs() {
  const size_t bytes = size_t(2) << 30;
  uint4* buf = nullptr;
  unsigned* out = nullptr;
  BENCH_CUDA(cudaMalloc(&buf, bytes));
  BENCH_CUDA(cudaMalloc(&out, 1 << 20));
  BENCH_CUDA(cudaMemset(buf, 0x5A, bytes));
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const size_t n = bytes / sizeof(uint4);
  const double us = time_graph_us(
      [&](int, cudaStream_t s) { read_sum_kernel<<<sms * 8, 512, 0, s>>>(buf, n, out); }, 5, 9);
  cudaFree(buf);
  cudaFree(out);
  return bytes / (us * 1e-6) / 1e9;
}

std::string gpu_name() {
  cudaDeviceProp p{};
  int dev = 0;
  cudaGetDevice(&dev);
  cudaGetDeviceProperties(&p, dev);
  return p.name;
}

std::string git_commit() {
  if (const char* c = std::getenv("B12X_GIT_COMMIT")) return c;
  std::array<char, 128> buf{};
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen("git rev-parse --short HEAD 2>/dev/null", "r"),
                                             pclose);
  if (pipe && fgets(buf.data(), buf.size(), pipe.get())) out = buf.data();
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out.empty() ? "unknown" : out;
}

std::string today() {
  std::time_t t = std::time(nullptr);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%d", std::gmtime(&t));
  return b;
}

std::string JsonRows::num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}
std::string JsonRows::str(const std::string& v) {
  std::string o = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

std::string JsonRows::write(const std::string& area, double read_bw_gbs) const {
  std::string gpu = gpu_name();
  std::string slug;
  for (char c : gpu)
    slug += (std::isalnum(static_cast<unsigned char>(c)) ? char(std::tolower(c)) : '-');
  const char* dir_env = std::getenv("B12X_BENCH_OUT");
  std::string dir = dir_env ? dir_env : "bench/results";
  mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/" + area + "-" + slug + "-" + today() + ".json";
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return "";
  std::fprintf(f, "{\n  \"area\": %s,\n  \"gpu\": %s,\n  \"commit\": %s,\n  \"date\": %s,\n",
               str(area).c_str(), str(gpu).c_str(), str(git_commit()).c_str(),
               str(today()).c_str());
  std::fprintf(f, "  \"read_bw_gbs\": %s,\n  \"rows\": [\n", num(read_bw_gbs).c_str());
  for (size_t i = 0; i < rows.size(); ++i) {
    std::fprintf(f, "    {");
    for (size_t j = 0; j < rows[i].size(); ++j)
      std::fprintf(f, "%s%s: %s", j ? ", " : "", str(rows[i][j].first).c_str(),
                   rows[i][j].second.c_str());
    std::fprintf(f, "}%s\n", i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
  return path;
}

}  // namespace b12x::bench
