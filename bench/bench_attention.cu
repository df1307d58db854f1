// Paged-attention benchmark, C++ part (no peer: the torch SDPA comparison is bench_attention.py).
// Decode at the target shapes (BF16 and FP8 KV) and extend 8 x 2048 on 0 / 8k prefixes, timed
// with CUDA-graph replays over rotating page sets; KV GB/s as % of the harness's read bandwidth.
// JSON: $B12X_BENCH_OUT/attention_cpp-<gpu>-<date>.json.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention/paged_params.h"  // the stamp slot counts
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

using AfterFn = std::function<void(const att::PagedPlan&, const uint8_t* scratch, double us)>;

// Returns microseconds per launch, or -1 when planning fails. `after` (optional) runs after the
// timing, with the plan and the scratch of the last call.
double run_case(JsonRows& json, double bw, const char* op, int B, int L, int qlen, int hq, int hkv,
                int D, int page, bool fp8, const AfterFn& after = {}) {
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
  // zeroed: the timeline probe reads only the stamps written by this case's launches
  BENCH_CUDA(cudaMemset(scratch, 0, std::max<int64_t>(plan.scratch_bytes, 256)));
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
  // B12X_ATTN_BENCH_PER_GRAPH=n: n decode calls per graph replay (default 10; the replay's own
  // start and end are amortised over them)
  const char* pg_env = std::getenv("B12X_ATTN_BENCH_PER_GRAPH");
  const int per_graph = qlen == 1 ? (pg_env != nullptr ? std::max(1, std::atoi(pg_env)) : 10) : 3;
  const double us = b12x::bench::time_graph_us(
      [&](int i, cudaStream_t st) { att::run_paged(s.binds[i % rot], st); }, per_graph,
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
  if (after) {
    BENCH_CUDA(cudaDeviceSynchronize());
    after(plan, scratch, us);
  }
  return us;
}

// ---- timeline probe (B12X_ATTN_BENCH_STAMPS) ----
// Reads the per-CTA stamps of the last timed call (PagedPlan::stamps; slot layout: kStampSlots
// in src/attention/kernels/paged_attention.cuh), prints percentiles of each event relative to
// the first griddepcontrol.wait release and writes the raw stamps as CSV into $B12X_BENCH_OUT.
constexpr int kSlots = b12x::attention::detail::kStampSlots,
              kMergeSlots = b12x::attention::detail::kMergeStampSlots;
void report_stamps(const att::PagedPlan& plan, const uint8_t* scratch, double us,
                   const std::string& label) {
  if (!plan.stamps) {
    std::printf("stamps %s: the plan has no stamp instance (%s)\n", label.c_str(),
                plan.kernel.c_str());
    return;
  }
  const int64_t n = (plan.scratch_bytes - plan.off_stamps) / 8;
  std::vector<unsigned long long> h(n);
  BENCH_CUDA(cudaMemcpy(h.data(), scratch + plan.off_stamps, n * 8, cudaMemcpyDeviceToHost));
  struct Cta {
    unsigned long long g[8], c[8], meta, prev_end, prev_wait;
  };
  std::vector<Cta> live;
  int exited = 0;
  for (int64_t i = 0; i + kSlots <= plan.stamp_merge; i += kSlots) {
    const unsigned long long meta = h[i + 16];
    if (meta >> 63) {
      Cta c;
      for (int e = 0; e < 8; ++e) c.g[e] = h[i + e], c.c[e] = h[i + 8 + e];
      c.meta = meta;
      c.prev_end = h[i + 17];
      c.prev_wait = h[i + 18];
      live.push_back(c);
    } else if ((meta >> 61) == 2) {
      ++exited;
    }
  }
  std::vector<std::array<unsigned long long, 4>> merge;
  for (int64_t i = plan.stamp_merge; i + kMergeSlots <= n; i += kMergeSlots)
    if (h[i + 3] >> 63) merge.push_back({h[i], h[i + 1], h[i + 2], h[i + 3]});
  if (live.empty()) {
    std::printf("stamps %s: no live CTA recorded\n", label.c_str());
    return;
  }
  unsigned long long a = ~0ull;
  for (const Cta& c : live) a = std::min(a, c.g[2]);
  auto pct = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    auto at = [&](double q) { return v[std::min<size_t>(v.size() - 1, size_t(q * v.size()))]; };
    char buf[96];
    std::snprintf(buf, sizeof buf, "%7.0f %7.0f %7.0f %7.0f %7.0f", v.front(), at(0.1), at(0.5),
                  at(0.9), v.back());
    return std::string(buf);
  };
  int khz = 0;
  BENCH_CUDA(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  std::printf(
      "stamps %s: %.1f us/call, %zu live main CTAs (%d exited early), %zu merge CTAs, "
      "%s; ns from the first wait release (min p10 p50 p90 max)\n",
      label.c_str(), us, live.size(), exited, merge.size(), plan.kernel.c_str());
  const char* names[8] = {"entry", "prewait", "waited",  "issued",
                          "first", "last",    "loopend", "end"};
  for (int e = 0; e < 8; ++e) {
    std::vector<double> v;
    for (const Cta& c : live) v.push_back(double(int64_t(c.g[e] - a)));
    std::printf("  main %-8s %s\n", names[e], pct(v).c_str());
  }
  const char* mnames[3] = {"entry", "waited", "end"};
  for (int e = 0; e < 3 && !merge.empty(); ++e) {
    std::vector<double> v;
    for (const auto& m : merge) v.push_back(double(int64_t(m[e] - a)));
    std::printf("  merge %-7s %s\n", mnames[e], pct(v).c_str());
  }
  // Per-CTA intervals from clock64 (one SM's clock, exact within a CTA), in ns at the
  // attribute's clock rate.
  const double ns_per_cyc = 1e6 / std::max(khz, 1);
  const int from[6] = {0, 2, 3, 4, 5, 6}, to[6] = {2, 3, 4, 5, 6, 7};
  const char* inames[6] = {"entry>waited", "waited>issued", "issued>first",
                           "first>last",   "last>loopend",  "loopend>end"};
  for (int k = 0; k < 6; ++k) {
    std::vector<double> v;
    for (const Cta& c : live) v.push_back(double(int64_t(c.c[to[k]] - c.c[from[k]])) * ns_per_cyc);
    std::printf("  clk  %-14s %s\n", inames[k], pct(v).c_str());
  }
  {
    // The previous call's merge (CTA 0), read by each main CTA after its wait.
    std::vector<double> e, w;
    for (const Cta& c : live)
      if (c.prev_end != 0) {
        e.push_back(double(int64_t(c.prev_end - a)));
        w.push_back(double(int64_t(c.prev_wait - a)));
      }
    if (!e.empty()) {
      std::printf("  prev merge waited %s\n", pct(w).c_str());
      std::printf("  prev merge end    %s\n", pct(e).c_str());
    }
  }
  const Cta* last = &live[0];
  for (const Cta& c : live)
    if (c.g[7] > last->g[7]) last = &c;
  std::printf("  last CTA: sm %llu split %llu tiles %llu, events", last->meta & 0xffff,
              (last->meta >> 32) & 0x1fffffff, (last->meta >> 16) & 0xffff);
  for (int e = 0; e < 8; ++e) std::printf(" %lld", (long long)(last->g[e] - a));
  std::printf(" (clock %d MHz)\n", khz / 1000);
  const char* dir = std::getenv("B12X_BENCH_OUT");
  if (dir != nullptr) {
    const std::string path = std::string(dir) + "/stamps-" + label + ".csv";
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      std::fprintf(f,
                   "kind,sm,split,tiles,g0,g1,g2,g3,g4,g5,g6,g7,c0,c1,c2,c3,c4,c5,c6,c7,pm_end,"
                   "pm_wait\n");
      for (const Cta& c : live) {
        std::fprintf(f, "main,%llu,%llu,%llu", c.meta & 0xffff, (c.meta >> 32) & 0x1fffffff,
                     (c.meta >> 16) & 0xffff);
        for (int e = 0; e < 8; ++e) std::fprintf(f, ",%lld", (long long)(c.g[e] - a));
        for (int e = 0; e < 8; ++e) std::fprintf(f, ",%llu", c.c[e]);
        std::fprintf(f, ",%lld,%lld\n", (long long)(c.prev_end - a), (long long)(c.prev_wait - a));
      }
      for (const auto& m : merge)
        std::fprintf(f, "merge,%llu,0,0,%lld,%lld,%lld,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n",
                     m[3] & 0xffff, (long long)(m[0] - a), (long long)(m[1] - a),
                     (long long)(m[2] - a));
      std::fclose(f);
    }
  }
}

// B12X_ATTN_BENCH_STAMPS: ';'-separated 'B:ctx:kv:HQxHKVxDxPAGE[:ENV=VAL,...]' decode cases;
// each runs plain, then with B12X_ATTN_STAMPS=1 (the stamps of its last call reported).
void run_stamp_cases(JsonRows& json, double bw, const std::string& spec) {
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t end = spec.find(';', pos);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(pos, end - pos);
    pos = end + 1;
    std::vector<std::string> f;
    for (size_t p = 0; p <= item.size();) {
      size_t q = item.find(':', p);
      if (q == std::string::npos) q = item.size();
      f.push_back(item.substr(p, q - p));
      p = q + 1;
    }
    if (f.size() < 4) continue;
    int hq = 32, hkv = 8, d = 128, page = 64;
    std::sscanf(f[3].c_str(), "%dx%dx%dx%d", &hq, &hkv, &d, &page);
    std::vector<std::string> envs;
    if (f.size() > 4 && !f[4].empty())
      for (size_t p = 0; p <= f[4].size();) {
        size_t q = f[4].find(',', p);
        if (q == std::string::npos) q = f[4].size();
        envs.push_back(f[4].substr(p, q - p));
        p = q + 1;
      }
    for (const std::string& e : envs) {
      const size_t eq = e.find('=');
      if (eq != std::string::npos) setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
    }
    const int B = std::atoi(f[0].c_str()), L = std::atoi(f[1].c_str());
    const bool fp8 = f[2] == "fp8";
    std::string label = f[2] + "-B" + f[0] + "-" + f[1] + "-" + f[3];
    for (const std::string& e : envs) label += "-" + e.substr(e.find('=') + 1);
    run_case(json, bw, "decode", B, L, 1, hq, hkv, d, page, fp8);
    setenv("B12X_ATTN_STAMPS", "1", 1);
    run_case(json, bw, "decode", B, L, 1, hq, hkv, d, page, fp8,
             [&](const att::PagedPlan& plan, const uint8_t* scratch, double us) {
               report_stamps(plan, scratch, us, label);
             });
    unsetenv("B12X_ATTN_STAMPS");
    for (const std::string& e : envs) unsetenv(e.substr(0, e.find('=')).c_str());
  }
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
  if (const char* st = std::getenv("B12X_ATTN_BENCH_STAMPS")) {
    run_stamp_cases(json, bw, st);
    return 0;
  }
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
