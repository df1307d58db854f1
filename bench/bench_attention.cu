// Paged-attention benchmark, C++ part (no peer: the torch SDPA comparison is bench_attention.py).
// Decode at the target shapes (BF16 and FP8 KV) and extend 8 x 2048 on 0 / 8k prefixes, timed
// with CUDA-graph replays over rotating page sets; KV GB/s as % of the harness's read bandwidth.
// JSON: $B12X_BENCH_OUT/attention_cpp-<gpu>-<date>.json.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "b12x/attention.h"
#include "b12x/c_api.h"
#include "bench_common.h"

namespace {

using b12x::DType;
using b12x::TensorRef;
namespace att = b12x::attention;
using b12x::bench::JsonRows;

struct Sets {
  std::vector<att::PagedBinding> binds;
  std::vector<void*> allocs;
  ~Sets() {
    for (void* p : allocs) cudaFree(p);
  }
  template <typename T>
  T* alloc(size_t n) {
    void* p = nullptr;
    BENCH_CUDA(cudaMalloc(&p, n * sizeof(T)));
    allocs.push_back(p);
    return static_cast<T*>(p);
  }
};

// Returns microseconds per launch, or -1 when planning fails.
double run_case(JsonRows& json, double bw, const char* op, int B, int L, int qlen, int hq, int hkv,
                int D, int page, bool fp8) {
  const int npg = (L + page - 1) / page;
  const int eb = fp8 ? 1 : 2;
  const int64_t kv_bytes = int64_t(B) * L * hkv * 2 * D * eb;
  const int rot = qlen == 1 ? b12x::bench::rotation_count(kv_bytes) : 1;
  const int64_t pool = int64_t(rot) * B * npg;
  const int T = B * qlen;
  Sets s;
  uint8_t* cache = s.alloc<uint8_t>(size_t(pool) * 2 * page * hkv * D * eb);
  BENCH_CUDA(cudaMemset(cache, fp8 ? 0x30 : 0x11, size_t(pool) * 2 * page * hkv * D * eb));
  std::vector<int32_t> ids(pool);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
  int32_t* table = s.alloc<int32_t>(ids.size());
  BENCH_CUDA(cudaMemcpy(table, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  std::vector<int32_t> lens(B, L), cu(B + 1);
  for (int b = 0; b <= B; ++b) cu[b] = b * qlen;
  int32_t* dlens = s.alloc<int32_t>(B);
  int32_t* dcu = s.alloc<int32_t>(B + 1);
  BENCH_CUDA(cudaMemcpy(dlens, lens.data(), B * 4, cudaMemcpyHostToDevice));
  BENCH_CUDA(cudaMemcpy(dcu, cu.data(), (B + 1) * 4, cudaMemcpyHostToDevice));
  uint16_t* q = s.alloc<uint16_t>(size_t(rot) * T * hq * D);
  BENCH_CUDA(cudaMemset(q, 0x3c, size_t(rot) * T * hq * D * 2));
  uint16_t* out = s.alloc<uint16_t>(size_t(T) * hq * D);
  float* desc = s.alloc<float>(B);
  std::vector<float> ones(B, 0.05f);
  BENCH_CUDA(cudaMemcpy(desc, ones.data(), B * 4, cudaMemcpyHostToDevice));

  att::PagedCaps caps;
  caps.mode = qlen == 1 ? att::Mode::kDecode : att::Mode::kExtend;
  caps.kv_dtype = fp8 ? DType::kFP8E4M3 : DType::kBF16;
  caps.num_q_heads = hq;
  caps.num_kv_heads = hkv;
  caps.head_dim_qk = caps.head_dim_vo = D;
  caps.page_size = page;
  caps.max_batch = B;
  caps.max_page_table_width = npg;
  caps.max_total_q = T;
  // Plan through the C ABI first: errors come back as a status (no exception crosses).
  b12x_paged_caps cc{};
  cc.mode = static_cast<int32_t>(caps.mode);
  cc.q_dtype = B12X_DTYPE_BF16;
  cc.kv_dtype = fp8 ? B12X_DTYPE_FP8_E4M3 : B12X_DTYPE_BF16;
  cc.num_q_heads = hq;
  cc.num_kv_heads = hkv;
  cc.head_dim_qk = cc.head_dim_vo = D;
  cc.page_size = page;
  cc.max_batch = B;
  cc.max_page_table_width = npg;
  cc.max_total_q = T;
  b12x_paged_attention_plan h = nullptr;
  if (b12x_attention_paged_plan_create(&cc, nullptr, &h) != B12X_OK) {
    std::printf("%s B=%d L=%d: plan failed: %s\n", op, B, L, b12x_last_error());
    return -1;
  }
  b12x_attention_paged_plan_destroy(h);
  const att::PagedPlan plan = att::plan_paged(caps);
  uint8_t* scratch = s.alloc<uint8_t>(std::max<int64_t>(plan.scratch_bytes, 256));
  const int64_t cshape[4] = {pool, page, hkv, D};
  for (int r = 0; r < rot; ++r) {
    att::PagedArgs a;
    a.q = TensorRef::contiguous(q + size_t(r) * T * hq * D, DType::kBF16, {T, hq, D}, 0);
    a.k_cache = TensorRef::contiguous(cache, caps.kv_dtype, 4, cshape, 0);
    a.k_cache.stride[0] = int64_t(2) * page * hkv * D;
    a.v_cache = a.k_cache;
    a.v_cache.data = cache + size_t(page) * hkv * D * eb;
    a.out = TensorRef::contiguous(out, DType::kBF16, {T, hq, D}, 0);
    a.page_table = TensorRef::contiguous(table + size_t(r) * B * npg, DType::kInt32, {B, npg}, 0);
    a.cache_seqlens = TensorRef::contiguous(dlens, DType::kInt32, {B}, 0);
    a.cu_seqlens_q = TensorRef::contiguous(dcu, DType::kInt32, {B + 1}, 0);
    if (fp8) {
      a.k_descale = TensorRef::contiguous(desc, DType::kFP32, {B}, 0);
      a.v_descale = a.k_descale;
    }
    s.binds.push_back(att::bind_paged(
        plan, TensorRef::contiguous(scratch, DType::kUInt8, {plan.scratch_bytes}, 0), a));
  }
  const double us = b12x::bench::time_graph_us(
      [&](int i, cudaStream_t st) { att::run_paged(s.binds[i % rot], st); }, qlen == 1 ? 10 : 3,
      qlen == 1 ? 7 : 3);
  const double pairs = qlen == 1
                           ? double(B) * hq * L
                           : double(B) * hq * (double(qlen) * (L - qlen) + qlen * (qlen + 1) / 2.0);
  const double tflops = 2.0 * pairs * 2 * D / us / 1e6;
  const double gbs = kv_bytes / us / 1e3;
  std::printf(
      "%-7s %-5s B=%-4d ctx=%-6d q=%-5d %2d/%d/%-3d page=%-3d %9.1f us %7.0f GB/s %5.1f%% bw "
      "%6.1f TF/s splits=%d %s\n",
      op, fp8 ? "fp8" : "bf16", B, L, qlen, hq, hkv, D, page, us, gbs, 100 * gbs / bw, tflops,
      s.binds[0].num_splits, plan.kernel.c_str());
  json.add({{"op", JsonRows::str(op)},
            {"kv", JsonRows::str(fp8 ? "fp8" : "bf16")},
            {"B", JsonRows::num(B)},
            {"ctx", JsonRows::num(L)},
            {"q_len", JsonRows::num(qlen)},
            {"hq", JsonRows::num(hq)},
            {"hkv", JsonRows::num(hkv)},
            {"d", JsonRows::num(D)},
            {"page", JsonRows::num(page)},
            {"us", JsonRows::num(us)},
            {"kv_gbs", JsonRows::num(gbs)},
            {"pct_read_bw", JsonRows::num(100 * gbs / bw)},
            {"tflops", JsonRows::num(tflops)},
            {"splits", JsonRows::num(s.binds[0].num_splits)},
            {"kernel", JsonRows::str(plan.kernel)}});
  return us;
}

}  // namespace

int main() {
  if (b12x_device_count() == 0) {
    std::printf("no CUDA device: benchmark skipped\n");
    return 0;
  }
  const double bw = b12x::bench::measure_read_bandwidth_gbs();
  std::printf("gpu: %s  read bandwidth %.0f GB/s\n", b12x::bench::gpu_name().c_str(), bw);
  JsonRows json;
  for (bool fp8 : {false, true})
    for (int L : {8192, 1024, 32768})
      for (int B : {1, 8, 32, 128}) run_case(json, bw, "decode", B, L, 1, 32, 8, 128, 64, fp8);
  for (bool fp8 : {false, true}) {
    run_case(json, bw, "decode", 8, 8192, 1, 64, 8, 128, 128, fp8);
    run_case(json, bw, "decode", 8, 8192, 1, 16, 2, 256, 128, fp8);
  }
  for (int prefix : {0, 8192})
    run_case(json, bw, "extend", 8, prefix + 2048, 2048, 32, 8, 128, 64, false);
  run_case(json, bw, "extend", 8, 8192 + 2048, 2048, 32, 8, 128, 64, true);
  std::printf("wrote %s\n", json.write("attention_cpp", bw).c_str());
  return 0;
}
