// GPU tests of the fused MoE against the CPU reference: every mode x activation x layout x dtype,
// both regimes, random routes with duplicates / invalid ids / empty experts, graph capture and
// replay with changing routes (bit-exact: the combine is deterministic), re-preparation keeping
// pointers, and a 64-bit expert-offset case.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "b12x/c_api.h"
#include "b12x/moe.h"
#include "b12x/reference/moe.h"
#include "b12x/status.h"
#include "formats/scalar.h"
#include "formats/swizzle.h"
#include "gpu_test_util.h"
#include "moe/moe_launch.h"
#include "moe/moe_numerics.h"

namespace {

using namespace b12x;

// The shared buffer: its upload / poison synchronize the device, which the tests' non-blocking
// streams need when the areas' test processes share the GPU.
using moe::Activation;
using moe::QuantMode;
using moe::SourceFormat;
using test::DeviceBuffer;

struct Case {
  QuantMode mode;
  SourceFormat src;
  Activation act;
  moe::W13Layout layout = moe::W13Layout::kW31;
  DType dtype = DType::kBF16;
  DType g1 = DType::kQ8_0, g2 = DType::kQ8_0;
  int64_t E = 8, H = 256, I = 128, M = 5, topk = 4;
  int regime = -1;
  bool weight_on_input = false;
  bool edge_scales = false;  // NVFP4: also zero (0x00 / 0x80) and subnormal UE4M3 block scales
  float limit = NAN;
  std::string name() const {
    std::string s = std::string(moe::quant_mode_name(mode)) + "/" + moe::activation_name(act) +
                    "/" + (layout == moe::W13Layout::kW13 ? "w13" : "w31") + "/" +
                    dtype_name(dtype) + "/M" + std::to_string(M) + "/E" + std::to_string(E) + "/r" +
                    std::to_string(regime);
    if (src == SourceFormat::kGgml) s += std::string("/") + dtype_name(g1) + "," + dtype_name(g2);
    if (weight_on_input) s += "/win";
    if (edge_scales) s += "/edge";
    if (!std::isnan(limit)) s += "/lim";
    return s;
  }
};

std::mt19937_64& rng() {
  return b12x::test::rng();
}
int randint(int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng());
}

/// Host source tensors of one operand ([E, rows, K]) in the case's format.
struct HostOperand {
  std::vector<uint8_t> v, s;
  std::vector<float> gs;
  TensorRef tv, ts, tg;  // host views
  void make(const Case& c, int64_t rows, int64_t K, DType gdt, float gscale) {
    const int64_t E = c.E;
    if (c.src == SourceFormat::kGgml) {
      const int bv = dtype_block_values(gdt), bb = dtype_block_bytes(gdt);
      v = b12x::test::random_bytes(E * rows * K / bv * bb);
      const int64_t nb = E * rows * K / bv;
      for (int64_t b = 0; b < nb; ++b) {
        // fp16 d in [2^-9, 2^-6] with a random sign
        const float d = std::ldexp(1.f + randint(0, 1023) / 1024.f, randint(-9, -7)) *
                        (randint(0, 1) ? -1.f : 1.f) * (gdt == DType::kQ8_0 ? 0.25f : 1.f);
        const uint16_t h = fmt::float_to_fp16_bits(d);
        v[b * bb] = h & 0xFF;
        v[b * bb + 1] = h >> 8;
      }
      tv = TensorRef::contiguous(v.data(), gdt, {E, rows, K});
      return;
    }
    v = b12x::test::random_bytes(E * rows * K / 2);
    for (auto& b : v) {  // canonical FP4 zeros (vLLM pre-canonicalises -0)
      if ((b & 0xF) == 0x8) b &= 0xF0;
      if ((b >> 4) == 0x8) b &= 0x0F;
    }
    tv = TensorRef::contiguous(v.data(), DType::kUInt8, {E, rows, K / 2});
    if (c.src == SourceFormat::kModeloptNvfp4) {
      const int64_t per = fmt::swizzled_scale_bytes(rows, K / 16);
      s.assign(E * per, 0);
      for (int64_t e = 0; e < E; ++e)
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t k = 0; k < K / 16; ++k)
            s[e * per + fmt::swizzled_scale_offset(r, k, K / 16)] = static_cast<uint8_t>(
                !c.edge_scales || randint(0, 3) != 0 ? randint(0x28, 0x40)  // 0.25 .. 2
                : randint(0, 1)                      ? randint(0, 7)        // 0, subnormals
                                                     : 0x80);                                    // "-0": zero

      ts = TensorRef::contiguous(s.data(), DType::kUE4M3,
                                 {E, fmt::pad_to(rows, 128), fmt::pad_to(K / 16, 4)});
      gs.resize(E);
      for (auto& g : gs) g = gscale * (0.5f + randint(0, 100) / 100.f);
      tg = TensorRef::contiguous(gs.data(), DType::kFP32, {E});
    } else {
      s.resize(E * rows * K / 32);
      // FP16 outputs (max 65504) need smaller weights than BF16 ones: relu2 squares FC1.
      const int lo = c.dtype == DType::kFP16 ? 116 : 121;
      for (auto& b : s) b = static_cast<uint8_t>(randint(lo, lo + 5));
      ts = TensorRef::contiguous(s.data(), DType::kUE8M0, {E, rows, K / 32});
    }
  }
};

template <typename T>
DeviceBuffer<T> upload(const std::vector<T>& h) {
  DeviceBuffer<T> d(h.size());
  if (!h.empty()) d.upload(h);
  return d;
}
TensorRef on_device(TensorRef t, void* p) {
  t.data = p;
  t.device = 0;
  return t;
}

struct Problem {
  Case c;
  HostOperand w1, w2;
  std::vector<float> a1gs, a2gs;
  std::vector<uint16_t> x;
  std::vector<int32_t> ids;
  std::vector<float> wts;
  moe::WeightsPlan wplan;

  void make(const Case& cc) {
    c = cc;
    const bool gated = c.act != Activation::kRelu2;
    const float s1 = c.src == SourceFormat::kModeloptNvfp4 ? 1.f / 16 : 1.f;
    w1.make(c, gated ? 2 * c.I : c.I, c.H, c.g1, s1);
    w2.make(c, c.H, c.I, c.g2, s1);
    a1gs.assign(c.E, 0.f);
    a2gs.assign(c.E, 0.f);
    for (auto& g : a1gs) g = 2688.f / (3.f + randint(0, 20) / 10.f);
    for (auto& g : a2gs) g = 2688.f / (1.f + randint(0, 20) / 10.f);
    const auto xf = b12x::test::random_normal(c.M * c.H);
    x.resize(xf.size());
    for (size_t i = 0; i < xf.size(); ++i)
      x[i] =
          c.dtype == DType::kBF16 ? fmt::float_to_bf16_bits(xf[i]) : fmt::float_to_fp16_bits(xf[i]);
    new_routes();
    moe::WeightsPlanArgs a;
    a.quant_mode = c.mode;
    a.source_format = c.src;
    a.activation = c.act;
    a.params_dtype = c.dtype;
    a.num_experts = c.E;
    a.hidden_size = c.H;
    a.intermediate_size = c.I;
    a.w13_layout = c.layout;
    a.ggml_w1_dtype = c.g1;
    a.ggml_w2_dtype = c.g2;
    wplan = moe::plan_weights(a);
  }
  void new_routes() {
    ids.resize(c.M * c.topk);
    wts.resize(c.M * c.topk);
    // Experts 0..E/2-1 only (others stay empty), duplicates allowed, ~10% invalid ids.
    for (size_t i = 0; i < ids.size(); ++i) {
      const int r = randint(0, 19);
      ids[i] = r == 0 ? -1
                      : (r == 1 ? static_cast<int>(c.E) + randint(0, 3)
                                : randint(0, static_cast<int>(c.E / 2) - 1));
      wts[i] = 0.1f + randint(0, 100) / 100.f;
    }
  }
  std::vector<float> reference() const {
    std::vector<float> out(c.M * c.H);
    reference::MoeRefArgs A;
    A.quant_mode = c.mode;
    A.source_format = c.src;
    A.activation = c.act;
    A.w13_layout = c.layout;
    A.swiglu_limit = c.limit;
    A.apply_router_weight_on_input = c.weight_on_input;
    A.a = TensorRef::contiguous(const_cast<uint16_t*>(x.data()), c.dtype, {c.M, c.H});
    A.topk_ids =
        TensorRef::contiguous(const_cast<int32_t*>(ids.data()), DType::kInt32, {c.M, c.topk});
    A.topk_weights =
        TensorRef::contiguous(const_cast<float*>(wts.data()), DType::kFP32, {c.M, c.topk});
    A.weights = source_views(nullptr);
    A.output = TensorRef::contiguous(out.data(), DType::kFP32, {c.M, c.H});
    reference::fused_moe(A);
    return out;
  }
  /// Views of the sources: host (dev == nullptr) or the device copies.
  moe::SourceWeights source_views(const std::vector<void*>* dev) const {
    moe::SourceWeights s;
    auto pick = [&](const TensorRef& t, int i) { return dev ? on_device(t, (*dev)[i]) : t; };
    s.w1 = pick(w1.tv, 0);
    s.w2 = pick(w2.tv, 1);
    if (c.src != SourceFormat::kGgml) {
      s.w1_scale = pick(w1.ts, 2);
      s.w2_scale = pick(w2.ts, 3);
    }
    if (c.src == SourceFormat::kModeloptNvfp4) {
      s.w1_global_scale = w1.tg;
      s.w2_global_scale = w2.tg;
    }
    if (c.mode == QuantMode::kNvfp4) {
      s.a1_gscale = TensorRef::contiguous(const_cast<float*>(a1gs.data()), DType::kFP32, {c.E});
      s.a2_gscale = TensorRef::contiguous(const_cast<float*>(a2gs.data()), DType::kFP32, {c.E});
    }
    return s;
  }
};

b12x_tensor ct(const TensorRef& t) {
  b12x_tensor d{};
  d.data = t.data;
  d.dtype = static_cast<int32_t>(t.dtype);
  d.ndim = t.ndim;
  for (int i = 0; i < t.ndim; ++i) {
    d.shape[i] = t.shape[i];
    d.strides[i] = t.stride[i];
  }
  d.device = t.device;
  return d;
}
b12x_moe_weights_plan_desc desc_of(const moe::WeightsPlanArgs& a) {
  b12x_moe_weights_plan_desc d{};
  d.quant_mode = static_cast<int32_t>(a.quant_mode);
  d.source_format = static_cast<int32_t>(a.source_format);
  d.activation = static_cast<int32_t>(a.activation);
  d.params_dtype = static_cast<int32_t>(a.params_dtype);
  d.num_experts = a.num_experts;
  d.hidden_size = a.hidden_size;
  d.intermediate_size = a.intermediate_size;
  d.w13_layout = static_cast<int32_t>(a.w13_layout);
  d.ggml_w1_dtype = static_cast<int32_t>(a.ggml_w1_dtype);
  d.ggml_w2_dtype = static_cast<int32_t>(a.ggml_w2_dtype);
  d.ep_size = 1;
  return d;
}
#define B12X_TEST_OK(expr)                                         \
  do {                                                             \
    const b12x_status st_ = (expr);                                \
    ASSERT_EQ(st_, B12X_OK) << #expr << ": " << b12x_last_error(); \
  } while (0)

/// Device state of one problem through the C ABI (C++ exceptions do not cross the library
/// boundary, so every failure surfaces as a status and message here).
struct GpuRun {
  const Problem& P;
  DeviceBuffer<uint8_t> dw1v, dw2v, dw1s, dw2s;
  b12x_moe_weights_plan_desc desc{};
  b12x_moe_caps caps{};
  b12x_moe_weights weights = nullptr;
  b12x_moe_plan plan = nullptr;
  int64_t scratch_bytes = 0;
  DeviceBuffer<uint8_t> scratch;
  DeviceBuffer<uint16_t> x, out;
  DeviceBuffer<int32_t> ids;
  DeviceBuffer<float> wts;
  b12x_tensor t_scratch{}, t_x{}, t_out{}, t_ids{}, t_wts{};
  bool ok = false;

  explicit GpuRun(const Problem& p) : P(p) { setup(); }
  ~GpuRun() {
    if (plan) b12x_moe_plan_destroy(plan);
    if (weights) b12x_moe_weights_destroy(weights);
  }
  void prepare(const Problem& Q) {
    dw1v = upload(Q.w1.v);
    dw2v = upload(Q.w2.v);
    dw1s = upload(Q.w1.s);
    dw2s = upload(Q.w2.s);
    std::vector<void*> dev = {dw1v.ptr, dw2v.ptr, dw1s.ptr, dw2s.ptr};
    const moe::SourceWeights sw = Q.source_views(&dev);
    b12x_tensor w1 = ct(sw.w1), w1s = ct(sw.w1_scale), w1g = ct(sw.w1_global_scale),
                a1g = ct(sw.a1_gscale), w2 = ct(sw.w2), w2s = ct(sw.w2_scale),
                w2g = ct(sw.w2_global_scale), a2g = ct(sw.a2_gscale);
    auto opt = [](const TensorRef& t, b12x_tensor* d) { return t.data ? d : nullptr; };
    B12X_TEST_OK(b12x_moe_prepare_weights(
        &desc, &w1, opt(sw.w1_scale, &w1s), opt(sw.w1_global_scale, &w1g), opt(sw.a1_gscale, &a1g),
        &w2, opt(sw.w2_scale, &w2s), opt(sw.w2_global_scale, &w2g), opt(sw.a2_gscale, &a2g),
        nullptr, &weights));
  }
  void setup() {
    const Case& c = P.c;
    desc = desc_of(P.wplan.args);
    prepare(P);
    caps.max_tokens = c.M;
    caps.num_topk = c.topk;
    caps.device = 0;
    caps.apply_router_weight_on_input = c.weight_on_input;
    caps.swiglu_limit = c.limit;
    caps.swiglu_alpha = caps.swiglu_beta = NAN;
    caps.deterministic_output = 1;
    caps.regime = c.regime;
    B12X_TEST_OK(b12x_moe_plan_create(&desc, &caps, &plan));
    B12X_TEST_OK(b12x_moe_plan_scratch_bytes(plan, &scratch_bytes));
    scratch = DeviceBuffer<uint8_t>(scratch_bytes);
    x = upload(P.x);
    ids = upload(P.ids);
    wts = upload(P.wts);
    out = DeviceBuffer<uint16_t>(c.M * c.H);
    t_scratch = ct(TensorRef::contiguous(scratch.ptr, DType::kUInt8, {scratch_bytes}, 0));
    t_x = ct(TensorRef::contiguous(x.ptr, c.dtype, {c.M, c.H}, 0));
    t_wts = ct(TensorRef::contiguous(wts.ptr, DType::kFP32, {c.M, c.topk}, 0));
    t_ids = ct(TensorRef::contiguous(ids.ptr, DType::kInt32, {c.M, c.topk}, 0));
    t_out = ct(TensorRef::contiguous(out.ptr, c.dtype, {c.M, c.H}, 0));
    B12X_TEST_OK(b12x_moe_bind(plan, &t_scratch, &t_x, weights, &t_wts, &t_ids, &t_out));
    ok = true;
  }
  b12x_status launch(cudaStream_t s) {
    return b12x_moe_run(plan, &t_scratch, &t_x, weights, &t_wts, &t_ids, &t_out, s);
  }
  std::vector<uint16_t> run_eager(cudaStream_t s = nullptr) {
    out.poison();
    scratch.randomize();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const b12x_status st = launch(s);
    EXPECT_EQ(st, B12X_OK) << b12x_last_error();
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    return out.download();
  }
  static std::vector<float> as_float(DType dtype, const std::vector<uint16_t>& h) {
    std::vector<float> f(h.size());
    for (size_t i = 0; i < h.size(); ++i)
      f[i] = dtype == DType::kBF16 ? fmt::bf16_bits_to_float(h[i]) : fmt::fp16_bits_to_float(h[i]);
    return f;
  }
  std::vector<float> as_float(const std::vector<uint16_t>& h) const {
    return as_float(P.c.dtype, h);
  }
  const void* storage() const {
    uint64_t p = 0;
    EXPECT_EQ(b12x_moe_weights_storage(weights, &p, nullptr), B12X_OK);
    return reinterpret_cast<const void*>(p);
  }
};

/// Eager runs of P on one plan made with plan-time knobs (B12X_MOE_*) set, unset again after:
/// `runs` outputs, none if the plan failed.
std::vector<std::vector<uint16_t>> eager_with_knobs(
    const Problem& P, const std::vector<std::pair<const char*, std::string>>& knobs, int runs = 1) {
  for (const auto& k : knobs) EXPECT_EQ(setenv(k.first, k.second.c_str(), 1), 0);
  GpuRun G(P);  // the plan reads the knobs
  for (const auto& k : knobs) unsetenv(k.first);
  EXPECT_TRUE(G.ok);
  std::vector<std::vector<uint16_t>> out;
  for (int r = 0; G.ok && r < runs; ++r) out.push_back(G.run_eager());
  return out;
}

/// Replays of G's plan (problem P) captured in a CUDA graph on a non-blocking stream, after new
/// routes Q (P's, redrawn) were uploaded into G's buffers: n replays, the output poisoned before
/// each, every one bit-equal to an eager run of the same inputs on that stream (`what` names the
/// path); the last replay's output in `replay`.
void check_graph_replays(GpuRun& G, const Problem& P, int n, const char* what, Problem& Q,
                         std::vector<uint16_t>& replay) {
  Q = P;  // (and a zero output: a failed capture leaves the caller's checks something to fail on)
  replay.assign(static_cast<size_t>(P.c.M * P.c.H), 0);
  cudaStream_t s;
  B12X_TEST_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  B12X_TEST_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  const b12x_status st = G.launch(s);
  B12X_TEST_CUDA(cudaStreamEndCapture(s, &graph));
  ASSERT_EQ(st, B12X_OK) << b12x_last_error();
  B12X_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  Q.new_routes();
  G.ids.upload(Q.ids);
  G.wts.upload(Q.wts);
  std::vector<std::vector<uint16_t>> out;
  for (int r = 0; r < n; ++r) {
    G.out.poison();
    B12X_TEST_CUDA(cudaDeviceSynchronize());
    B12X_TEST_CUDA(cudaGraphLaunch(exec, s));
    B12X_TEST_CUDA(cudaStreamSynchronize(s));
    out.push_back(G.out.download());
  }
  const auto eager = G.run_eager(s);
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(std::memcmp(out[r].data(), eager.data(), 2 * eager.size()), 0)
        << what << ": replay " << r << " differs from eager";
  replay = out.back();
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

void check_against_reference(const Problem& P, const std::vector<float>& got, double min_cos) {
  const std::vector<float> ref = P.reference();
  std::vector<double> refd(ref.begin(), ref.end());
  const auto cmp = b12x::test::compare(got, refd);
  double ref_max = 0;
  for (float v : ref) ref_max = std::max(ref_max, static_cast<double>(std::abs(v)));
  EXPECT_EQ(cmp.nonfinite, 0) << P.c.name() << " " << cmp.str();
  EXPECT_GE(cmp.cosine, min_cos) << P.c.name() << " " << cmp.str();
  // BF16 output rounding (2^-8 relative) plus fp32 summation-order effects that may flip
  // an activation-quantisation decision.
  EXPECT_LE(cmp.max_abs, 0.02 * ref_max + 1e-6)
      << P.c.name() << " " << cmp.str() << " ref_max=" << ref_max;
  // Rows of tokens without a valid route are exactly zero.
  for (int64_t m = 0; m < P.c.M; ++m) {
    bool any = false;
    for (int64_t k = 0; k < P.c.topk; ++k) {
      const int id = P.ids[m * P.c.topk + k];
      any |= id >= 0 && id < P.c.E;
    }
    if (!any)
      for (int64_t h = 0; h < P.c.H; ++h) ASSERT_EQ(got[m * P.c.H + h], 0.f) << P.c.name();
  }
}

void run_case(const Case& c, double min_cos = 0.9999) {
  Problem P;
  P.make(c);
  GpuRun G(P);
  ASSERT_TRUE(G.ok) << c.name();
  const auto got = G.as_float(G.run_eager());
  check_against_reference(P, got, min_cos);
}

std::vector<Case> mode_cases() {
  std::vector<Case> cs;
  const Activation acts[] = {Activation::kSilu, Activation::kSitu, Activation::kSwigluOai,
                             Activation::kRelu2};
  struct MS {
    QuantMode m;
    SourceFormat s;
  };
  const MS modes[] = {{QuantMode::kNvfp4, SourceFormat::kModeloptNvfp4},
                      {QuantMode::kW4A8Nvfp4, SourceFormat::kModeloptNvfp4},
                      {QuantMode::kW4A8Mx, SourceFormat::kFp4E8M0K32},
                      {QuantMode::kMxfp4, SourceFormat::kFp4E8M0K32},
                      {QuantMode::kW4A16, SourceFormat::kModeloptNvfp4},
                      {QuantMode::kW4A16, SourceFormat::kFp4E8M0K32}};
  int i = 0;
  for (const auto& ms : modes)
    for (Activation a : acts) {
      moe::WeightsPlanArgs wa;
      wa.quant_mode = ms.m;
      wa.source_format = ms.s;
      wa.activation = a;
      wa.num_experts = 8;
      wa.hidden_size = 256;
      wa.intermediate_size = 128;
      if (!moe::weights_support_reason(wa).empty()) continue;
      Case c;
      c.mode = ms.m;
      c.src = ms.s;
      c.act = a;
      c.layout = (i % 2) ? moe::W13Layout::kW13 : moe::W13Layout::kW31;
      c.M = (i % 3 == 0) ? 1 : (i % 3 == 1 ? 7 : 37);
      c.dtype = (i % 4 == 3) ? DType::kFP16 : DType::kBF16;
      if (a == Activation::kSilu && i % 2) c.limit = 3.f;
      cs.push_back(c);
      ++i;
    }
  return cs;
}

TEST(MoeGpu, EveryModeAndActivation) {
  B12X_REQUIRE_GPU();
  for (const Case& c : mode_cases()) {
    SCOPED_TRACE(c.name());
    run_case(c);
  }
}

TEST(MoeGpu, BothRegimesBothLayoutsBothDtypes) {
  B12X_REQUIRE_GPU();
  for (int regime = 0; regime <= 1; ++regime)
    for (int l = 0; l < 2; ++l)
      for (DType dt : {DType::kBF16, DType::kFP16})
        for (QuantMode qm : {QuantMode::kNvfp4, QuantMode::kW4A16}) {
          Case c;
          c.mode = qm;
          c.src = SourceFormat::kModeloptNvfp4;
          c.act = Activation::kSilu;
          c.layout = l ? moe::W13Layout::kW13 : moe::W13Layout::kW31;
          c.dtype = dt;
          c.regime = regime;
          c.M = regime ? 9 : 70;
          SCOPED_TRACE(c.name());
          run_case(c);
        }
}

TEST(MoeGpu, GgmlA16) {
  B12X_REQUIRE_GPU();
  const DType ts[] = {DType::kQ8_0, DType::kIQ2_XXS, DType::kIQ2_XS};
  int i = 0;
  for (DType t1 : ts)
    for (DType t2 : ts) {
      Case c;
      c.mode = QuantMode::kGgmlA16;
      c.src = SourceFormat::kGgml;
      c.act = (i % 2) ? Activation::kRelu2 : Activation::kSilu;
      c.g1 = t1;
      c.g2 = t2;
      c.H = 256;
      c.I = 256;
      c.dtype = (i % 3 == 2) ? DType::kFP16 : DType::kBF16;
      c.M = (i % 2) ? 3 : 40;
      c.weight_on_input = (i == 4);
      c.topk = c.weight_on_input ? 1 : 4;
      ++i;
      SCOPED_TRACE(c.name());
      run_case(c);
    }
}

TEST(MoeGpu, RouterWeightOnInputW4A16) {
  B12X_REQUIRE_GPU();
  Case c;
  c.mode = QuantMode::kW4A16;
  c.src = SourceFormat::kFp4E8M0K32;
  c.act = Activation::kSilu;
  c.weight_on_input = true;
  c.topk = 1;
  c.M = 33;
  run_case(c);
}

TEST(MoeGpu, LargeM) {
  B12X_REQUIRE_GPU();
  for (QuantMode qm : {QuantMode::kNvfp4, QuantMode::kW4A16}) {
    Case c;
    c.mode = qm;
    c.src = SourceFormat::kModeloptNvfp4;
    c.act = Activation::kSilu;
    c.E = 16;
    c.M = 1500;
    c.topk = 4;
    c.H = 128;
    c.I = 96;
    SCOPED_TRACE(c.name());
    run_case(c);
  }
}

// One FP4-weight variant (mode, source format, dtype, activation) of the multi-variant cases.
struct Fp4Variant {
  QuantMode m;
  SourceFormat s;
  DType dt;
  Activation a;
};

Case fp4_variant_case(const Fp4Variant& v, int64_t E, int64_t H, int64_t I, int64_t M, int topk,
                      int regime) {
  Case c;
  c.mode = v.m;
  c.src = v.s;
  c.act = v.a;
  c.dtype = v.dt;
  c.E = E;
  c.H = H;
  c.I = I;
  c.M = M;
  c.topk = topk;
  c.regime = regime;
  return c;
}

const Fp4Variant kNvfp4Silu{QuantMode::kNvfp4, SourceFormat::kModeloptNvfp4, DType::kBF16,
                            Activation::kSilu};
/// Runs each case against the CPU reference, traced by its name.
void run_cases(std::initializer_list<Case> cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name());
    run_case(c);
  }
}

const Fp4Variant kMxSitu{QuantMode::kW4A8Mx, SourceFormat::kFp4E8M0K32, DType::kBF16,
                         Activation::kSitu};
const Fp4Variant kMxfp4Relu2{QuantMode::kMxfp4, SourceFormat::kFp4E8M0K32, DType::kBF16,
                             Activation::kRelu2};

TEST(MoeGpu, LongKBothRegimesEveryFp4Variant) {
  B12X_REQUIRE_GPU();
  // K of 1024 / 512 runs the grouped cp.async pipeline through many stages and the decode tiles
  // (split-K and wide) over several sub-chunks; covers bf16 fold, fp16 fold and fp16 E8M0 paths.
  const Fp4Variant vs[] = {
      {QuantMode::kNvfp4, SourceFormat::kModeloptNvfp4, DType::kBF16, Activation::kSilu},
      {QuantMode::kW4A16, SourceFormat::kModeloptNvfp4, DType::kFP16, Activation::kSitu},
      {QuantMode::kW4A16, SourceFormat::kFp4E8M0K32, DType::kFP16, Activation::kRelu2},
      {QuantMode::kW4A8Mx, SourceFormat::kFp4E8M0K32, DType::kBF16, Activation::kSilu}};
  for (const Fp4Variant& v : vs)
    for (int regime = 0; regime <= 1; ++regime) {
      const Case c = fp4_variant_case(v, 8, 1024, 512, regime ? 5 : 100, 4, regime);
      SCOPED_TRACE(c.name());
      run_case(c);
    }
}

TEST(MoeGpu, DecodeStreamCtasWalkSeveralTiles) {
  B12X_REQUIRE_GPU();
  // A wide intermediate (I = 3072: 192 / 96 FC1 row blocks) leaves room for only 2-4 expert-tile
  // groups in a one-wave FC1 grid, so each FC1 CTA walks several tiles with one ring; 32 routes
  // on 8 experts give experts with more than 4 routes (split into several 4-slot tiles).
  const Fp4Variant vs[] = {
      {QuantMode::kNvfp4, SourceFormat::kModeloptNvfp4, DType::kBF16, Activation::kSilu},
      {QuantMode::kW4A8Mx, SourceFormat::kFp4E8M0K32, DType::kBF16, Activation::kSitu},
      {QuantMode::kW4A16, SourceFormat::kFp4E8M0K32, DType::kFP16, Activation::kRelu2},
      {QuantMode::kMxfp4, SourceFormat::kFp4E8M0K32, DType::kBF16, Activation::kRelu2}};
  for (const Fp4Variant& v : vs) {
    const Case c = fp4_variant_case(v, 16, 256, 3072, 8, 4, 1);
    SCOPED_TRACE(c.name());
    run_case(c);
  }
}

TEST(MoeGpu, DecodeStreamWideGrids) {
  B12X_REQUIRE_GPU();
  // DeepSeek-TP4-like H = 7168: 448 FC2 row blocks, more than one wave of 3 CTAs per SM on a
  // 132-SM H200, so FC2 runs its 2-stage CTAs (4 per SM; no split up to 64 routes, where two
  // splits would exceed that wave: 20 routes; split 2 at 72 routes); at I = 512 and 16 routes the
  // 12-warp FC1 has the shorter chain and walks 2 tiles per CTA.
  const Fp4Variant a16{QuantMode::kW4A16, SourceFormat::kModeloptNvfp4, DType::kFP16,
                       Activation::kSitu};
  run_cases({fp4_variant_case(kNvfp4Silu, 16, 7168, 512, 2, 8, 1),
             fp4_variant_case(a16, 8, 7168, 64, 5, 4, 1),
             fp4_variant_case(kNvfp4Silu, 16, 7168, 64, 9, 8, 1)});
}

TEST(MoeGpu, DecodeStreamTwoStageSplitAndA16OneGroup) {
  B12X_REQUIRE_GPU();
  // Qwen3.5-TP4-like H = 4096: 256 FC2 row blocks split over 2 CTAs at 20 / 40 routes, 1.3 waves
  // of the 3-stage CTA on a 132-SM H200, so FC2 runs the 2-stage one (decode_fc2_stages); a
  // Qwen3-30B-like w4a16 launch at 64 routes (16 sub-chunks per tile) takes one balanced FC1
  // warp group (its counters zeroed by a memset node) instead of two groups.
  const Fp4Variant a16{QuantMode::kW4A16, SourceFormat::kModeloptNvfp4, DType::kBF16,
                       Activation::kSilu};
  run_cases({fp4_variant_case(kNvfp4Silu, 12, 4096, 1024, 2, 10, 1),
             fp4_variant_case(kNvfp4Silu, 12, 4096, 1024, 4, 10, 1),
             fp4_variant_case(a16, 16, 2048, 768, 8, 8, 1)});
}

TEST(MoeGpu, DecodeStreamWideRouting) {
  B12X_REQUIRE_GPU();
  // Above 128 routes the decode stream buckets the routes by expert (decode_route_wide): 160 to
  // 1024 routes, buckets of ~2 to ~70 routes (experts with many 4-slot tiles), 20 to 128 tokens
  // (8- and 4-warp FC2), the balanced FC1 (nvfp4 at H = 2304: 18 sub-chunks, one warp group), two
  // FC1 row warps (w4a8_mx) and two warp groups (w4a16 at H = 1024), E above the thread count.
  const Fp4Variant& nv = kNvfp4Silu;
  const Fp4Variant& mx = kMxSitu;
  const Fp4Variant a16{QuantMode::kW4A16, SourceFormat::kFp4E8M0K32, DType::kFP16,
                       Activation::kRelu2};
  const Fp4Variant a16n{QuantMode::kW4A16, SourceFormat::kModeloptNvfp4, DType::kBF16,
                        Activation::kSilu};
  const Fp4Variant& m4 = kMxfp4Relu2;
  run_cases({fp4_variant_case(nv, 16, 2304, 256, 40, 8, 1),
             fp4_variant_case(mx, 64, 512, 256, 20, 8, 1),
             fp4_variant_case(a16, 8, 256, 128, 64, 8, 1),
             fp4_variant_case(a16n, 32, 1024, 256, 48, 6, 1),
             fp4_variant_case(m4, 600, 256, 64, 128, 4, 1),
             fp4_variant_case(nv, 256, 256, 128, 128, 8, 1)});
}

}  // namespace
namespace b12x::moe::detail {
int decode_last_q_lean();  // moe_decode.cu: whether the last [Q] launch ran the lean instance
}  // namespace b12x::moe::detail
namespace {

TEST(MoeGpu, DecodeStreamQLoadOrdersAreBitEqual) {
  B12X_REQUIRE_GPU();
  // [Q]'s load order (DecodeKnobs::q_load, B12X_MOE_Q_LOAD read by plan): 1 (default) loads the ids
  // and the x row together and the NVFP4 global scales into shared memory before the PDL wait, 0
  // one after another; and its NVFP4 quantisation with the 1 / a1gs table (DecodeKnobs::q_fast)
  // or with num::quant_block (B12X_MOE_Q_FAST=0): the same bits either way. Cases: nvfp4, MXFP8
  // activations (no scale table), the A16 copy gate, and nvfp4 with 1040 experts, routed to experts
  // 1024..1039, where the scales do not fit [Q]'s table (kQGsTable) and are read per route as in
  // order 0.
  const Fp4Variant a16{QuantMode::kW4A16, SourceFormat::kModeloptNvfp4, DType::kBF16,
                       Activation::kSilu};
  const Case cases[] = {fp4_variant_case(kNvfp4Silu, 16, 1024, 256, 6, 8, 1),
                        fp4_variant_case(kMxSitu, 16, 512, 256, 3, 8, 1),
                        fp4_variant_case(a16, 16, 512, 256, 4, 8, 1),
                        fp4_variant_case(kNvfp4Silu, 1040, 256, 64, 8, 8, 1)};
  // Also [Q]'s generic instance where the lean one is the default (B12X_MOE_Q_LEAN=0; the lean
  // [Q] runs only with order 1 and the table: decode_q_lean), and FC1 loading its first tile's
  // scalars at the tile's start instead of before its wait (B12X_MOE_FC1_SCAL0=0).
  const char* knobs[5][2] = {{"B12X_MOE_Q_LOAD", "1"},
                             {"B12X_MOE_Q_LOAD", "0"},
                             {"B12X_MOE_Q_FAST", "0"},
                             {"B12X_MOE_Q_LEAN", "0"},
                             {"B12X_MOE_FC1_SCAL0", "0"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name());
    Problem P;
    P.make(c);
    if (c.E > 1024)
      for (int32_t& id : P.ids)
        if (id >= 0 && id < c.E) id = static_cast<int32_t>(c.E) - 16 + id % 16;
    std::vector<uint16_t> got[5];
    for (int q = 0; q < 5; ++q) {
      const auto out = eager_with_knobs(P, {{knobs[q][0], knobs[q][1]}});
      ASSERT_EQ(out.size(), 1u);
      // The lean [Q] ran exactly where decode_q_lean takes it: the NVFP4 case with 16 experts,
      // unless the load order, the table or the knob turned it off.
      const bool lean = c.mode == QuantMode::kNvfp4 && c.E <= 512 && q != 1 && q != 2 && q != 3;
      EXPECT_EQ(moe::detail::decode_last_q_lean(), lean ? 1 : 0)
          << knobs[q][0] << "=" << knobs[q][1];
      got[q] = out[0];
      ASSERT_EQ(got[q].size(), got[0].size());
      EXPECT_EQ(std::memcmp(got[q].data(), got[0].data(), 2 * got[0].size()), 0)
          << knobs[q][0] << "=" << knobs[q][1] << " differs from the default";
    }
    check_against_reference(P, GpuRun::as_float(c.dtype, got[0]), 0.9999);
  }
}

TEST(MoeGpu, DecodeStreamFc2RowsAreBitEqual) {
  B12X_REQUIRE_GPU();
  // The 32-row FC2 CTA (B12X_MOE_FC2_ROWS=32, read by plan: two 16-row MMA tiles per warp, 2 or
  // 3 ring stages) computes every output row as the 16-row CTA does (the same per-warp chunk
  // ranges of the row block's tiles, the same split partials): with the split forced equal the
  // outputs are bit-equal, and they match the reference. Cases: nvfp4 (UE4M3 scales, split 1 and
  // 2), MXFP8 activations on E8M0 weights, FP16 w4a16 (FP16 MMAs), H = 992 (rows padded to 1024:
  // the last 32-row block outside H), 1 token; and one graph replay of the 32-row plan with new
  // routes.
  const Fp4Variant a16{QuantMode::kW4A16, SourceFormat::kModeloptNvfp4, DType::kFP16,
                       Activation::kSilu};
  const Case cases[] = {fp4_variant_case(kNvfp4Silu, 16, 1024, 256, 8, 8, 1),
                        fp4_variant_case(kMxSitu, 16, 512, 384, 5, 4, 1),
                        fp4_variant_case(a16, 32, 992, 256, 8, 6, 1),
                        fp4_variant_case(kNvfp4Silu, 8, 992, 512, 1, 2, 1)};
  struct Var {
    const char *rows, *stages;
  };
  const Var vars[3] = {{"16", nullptr}, {"32", "2"}, {"32", "3"}};
  for (const Case& c : cases)
    for (const char* split : {"1", "2", "4"}) {
      SCOPED_TRACE(c.name() + " split " + split);
      Problem P;
      P.make(c);
      std::vector<uint16_t> got[3];
      for (int v = 0; v < 3; ++v) {
        ASSERT_EQ(setenv("B12X_MOE_FC2_SPLIT", split, 1), 0);
        ASSERT_EQ(setenv("B12X_MOE_FC2_ROWS", vars[v].rows, 1), 0);
        if (vars[v].stages) ASSERT_EQ(setenv("B12X_MOE_FC2_STAGES", vars[v].stages, 1), 0);
        GpuRun G(P);  // the plan reads the knobs
        unsetenv("B12X_MOE_FC2_SPLIT");
        unsetenv("B12X_MOE_FC2_ROWS");
        unsetenv("B12X_MOE_FC2_STAGES");
        ASSERT_TRUE(G.ok);
        got[v] = G.run_eager();
        ASSERT_EQ(got[v].size(), got[0].size());
        EXPECT_EQ(std::memcmp(got[v].data(), got[0].data(), 2 * got[0].size()), 0)
            << "FC2 rows " << vars[v].rows << " stages " << (vars[v].stages ? vars[v].stages : "-")
            << " differs from 16 rows";
        if (v == 1) check_against_reference(P, G.as_float(got[v]), 0.9999);
        if (v != 1 || std::string(split) != "1") continue;
        // Graph replay of the 32-row plan with new routes matches eager.
        Problem Q;
        std::vector<uint16_t> replay;
        check_graph_replays(G, P, 1, "32-row FC2", Q, replay);
        check_against_reference(Q, G.as_float(replay), 0.9999);
      }
    }
}

TEST(MoeGpu, DecodeStreamFc1LastWarpTileEnds) {
  B12X_REQUIRE_GPU();
  // The two-group FC1's last-warp tile ends (every narrow two-group launch; session 21 removed the
  // barrier-ended instance and its knob B12X_MOE_FC1_LAST, which this test compared bit for bit
  // until then): the last K warp of a group to park a tile's partials sums them in the fixed K-warp
  // order, applies the activation and quantises alone, so the outputs are bit-equal run after run.
  // Two groups on 2 tile groups (FC1_KG=2, FC1_GROUPS=2, FC1_BAL=0: each group walks ~8-16
  // tiles). Cases: nvfp4 SiLU (16 sub-chunks per tile, FC2 input quantised per 16-feature block),
  // MXFP4 ReLU2 (32-feature blocks) and FP16 w4a16 ReLU2 at H = 384 (3 sub-chunks per tile, fewer
  // than a group's 4 K warps: one parks zeros). Then the long-tile two groups of the default rule.
  const Fp4Variant a16{QuantMode::kW4A16, SourceFormat::kModeloptNvfp4, DType::kFP16,
                       Activation::kRelu2};
  const Case cases[] = {fp4_variant_case(kNvfp4Silu, 64, 2048, 256, 8, 8, 1),
                        fp4_variant_case(kMxfp4Relu2, 48, 1024, 256, 16, 4, 1),
                        fp4_variant_case(a16, 32, 384, 128, 12, 6, 1)};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name());
    Problem P;
    P.make(c);
    const auto out = eager_with_knobs(P,
                                      {{"B12X_MOE_FC1_KG", "2"},
                                       {"B12X_MOE_FC1_GROUPS", "2"},
                                       {"B12X_MOE_FC1_BAL", "0"},
                                       {"B12X_MOE_FC1_WIDE", "0"}},
                                      2);
    ASSERT_EQ(out.size(), 2u);
    ASSERT_EQ(out[1].size(), out[0].size());
    EXPECT_EQ(std::memcmp(out[1].data(), out[0].data(), 2 * out[0].size()), 0)
        << "last-warp tile ends: a second run differs";
    check_against_reference(P, GpuRun::as_float(c.dtype, out[0]), 0.9999);
  }
  // decode_fc1_long_groups: with the default knobs a tile of > 32 sub-chunks (H = 4224: 33) on
  // CTAs walking >= 2 tiles (96 row blocks, 4 tile groups, 16 routes) runs the two groups with
  // last-warp ends; FC1_KG=1 the balanced one group. Both against the reference.
  Problem L;
  L.make(fp4_variant_case(kNvfp4Silu, 16, 4224, 1536, 4, 4, 1));
  using Knobs = std::vector<std::pair<const char*, std::string>>;
  for (const Knobs& k : {Knobs{}, Knobs{{"B12X_MOE_FC1_KG", "1"}}}) {
    SCOPED_TRACE(k.empty() ? "long tiles, default" : "long tiles, FC1_KG=1");
    const auto out = eager_with_knobs(L, k);
    ASSERT_EQ(out.size(), 1u);
    check_against_reference(L, GpuRun::as_float(L.c.dtype, out[0]), 0.9999);
  }
}

TEST(MoeGpu, DecodeStreamFc2KInterleaved) {
  B12X_REQUIRE_GPU();
  // FC2 warps taking every 8th chunk of their CTA's range (DecodeArgs::fc2_kil, the 8-warp 3-stage
  // CTAs: by decode_fc2_kil where a tile has >= 16 sub-chunks, or B12X_MOE_FC2_KIL=1, read by
  // plan) against the reference. I = 2048 (16 sub-chunks per tile, the rule's threshold): the
  // rule's 16-row CTA (split 4), 32 rows with split 2, 16 rows with whole tiles per split CTA, and
  // a graph replay with new routes; forced with fewer sub-chunks per tile than warps (FP16 w4a16,
  // I = 256: 2; MXFP8 on E8M0 weights, I = 384: 3) and at 1 token (the 16-row 3-stage CTA, no
  // deep ring).
  struct Var {
    Case c;
    const char *kil, *split, *rows, *bal, *deep;
  };
  const Fp4Variant a16{QuantMode::kW4A16, SourceFormat::kModeloptNvfp4, DType::kFP16,
                       Activation::kSilu};
  const Case c16 = fp4_variant_case(kNvfp4Silu, 16, 512, 2048, 4, 4, 1);
  const Var vars[] = {
      {c16, nullptr, nullptr, nullptr, nullptr, nullptr},
      {c16, nullptr, "2", "32", nullptr, nullptr},
      {c16, nullptr, "2", "16", "0", nullptr},
      {fp4_variant_case(a16, 32, 992, 256, 8, 6, 1), "1", nullptr, nullptr, nullptr, nullptr},
      {fp4_variant_case(kMxSitu, 16, 512, 384, 5, 4, 1), "1", nullptr, nullptr, nullptr, nullptr},
      {fp4_variant_case(kNvfp4Silu, 8, 992, 512, 1, 2, 1), "1", nullptr, "16", nullptr, "0"}};
  for (const Var& v : vars) {
    SCOPED_TRACE(v.c.name() + " kil " + (v.kil ? v.kil : "rule") + " split " +
                 (v.split ? v.split : "rule") + " rows " + (v.rows ? v.rows : "rule") +
                 (v.bal ? " whole tiles" : ""));
    if (!v.kil)
      EXPECT_TRUE(
          moe::detail::decode_fc2_kil(moe::DecodeKnobs{}, v.c.M, static_cast<int>(v.c.I / 128)));
    Problem P;
    P.make(v.c);
    const std::pair<const char*, const char*> env[] = {{"B12X_MOE_FC2_KIL", v.kil},
                                                       {"B12X_MOE_FC2_SPLIT", v.split},
                                                       {"B12X_MOE_FC2_ROWS", v.rows},
                                                       {"B12X_MOE_FC2_BAL", v.bal},
                                                       {"B12X_MOE_FC2_DEEP", v.deep}};
    for (const auto& e : env)
      if (e.second) ASSERT_EQ(setenv(e.first, e.second, 1), 0);
    GpuRun G(P);  // the plan reads the knobs
    for (const auto& e : env) unsetenv(e.first);
    ASSERT_TRUE(G.ok);
    check_against_reference(P, G.as_float(G.run_eager()), 0.9999);
    if (&v != &vars[0]) continue;
    // Graph replay of the rule's plan with new routes matches eager.
    Problem Q;
    std::vector<uint16_t> replay;
    check_graph_replays(G, P, 1, "K-interleaved FC2", Q, replay);
    check_against_reference(Q, G.as_float(replay), 0.9999);
  }
}

using Knobs = std::vector<std::pair<const char*, std::string>>;
}  // namespace
namespace b12x::moe::detail {
int decode_last_fc2_cluster();  // moe_decode.cu: the last FC2 launch's cluster size (1: none)
int decode_last_fc1_rdy();      // moe_decode.cu: whether the last launch's FC1 took the ready words
}  // namespace b12x::moe::detail
namespace {

/// P's eager output with plan-time `knobs` plus the probe knob `probe` against P's with `knobs`
/// alone: bit-equal (`what` names the probe); with `replay` the probe's plan is also replayed in a
/// CUDA graph with new routes, and both outputs are checked against the reference.
void expect_probe_bit_equal(const Problem& P, const Knobs& knobs,
                            const std::pair<const char*, std::string>& probe, const char* what,
                            bool replay) {
  const auto base = eager_with_knobs(P, knobs);
  Knobs kp = knobs;
  kp.push_back(probe);
  for (const auto& k : kp) ASSERT_EQ(setenv(k.first, k.second.c_str(), 1), 0);
  GpuRun G(P);  // the plan reads the knobs
  for (const auto& k : kp) unsetenv(k.first);
  ASSERT_TRUE(G.ok);
  ASSERT_EQ(base.size(), 1u);
  const auto got = G.run_eager();
  ASSERT_EQ(got.size(), base[0].size());
  EXPECT_EQ(std::memcmp(got.data(), base[0].data(), 2 * got.size()), 0)
      << what << " differs from the default";
  if (!replay) return;
  check_against_reference(P, G.as_float(got), 0.9999);
  Problem Q;
  std::vector<uint16_t> out;
  check_graph_replays(G, P, 1, what, Q, out);
  check_against_reference(Q, G.as_float(out), 0.9999);
}

TEST(MoeGpu, DecodeStreamQLeanReplays) {
  B12X_REQUIRE_GPU();
  // [Q]'s generic instance where the lean one is the default (B12X_MOE_Q_LEAN=0) against it,
  // bit-equal, and replayed in a graph with new routes.
  Problem P;
  P.make(fp4_variant_case(kNvfp4Silu, 32, 512, 256, 4, 8, 1));
  expect_probe_bit_equal(P, {}, {"B12X_MOE_Q_LEAN", "0"}, "generic [Q]", true);
}

TEST(MoeGpu, DecodeStreamFc1ReadyWords) {
  B12X_REQUIRE_GPU();
  // FC1 reading [Q]'s rows on per-route ready words (B12X_MOE_FC1_RDY=1, probe): an eager run
  // starts from randomised scratch (no tag: FC1 takes its PDL wait), graph replays from the words
  // the previous call's FC2 reset (FC1 polls them; three replays, new routes). Bit-equal to the
  // default both ways; nvfp4 ([Q]) and w4a16 (the copy gate), the two-group last-warp FC1.
  const Fp4Variant a16{QuantMode::kW4A16, SourceFormat::kModeloptNvfp4, DType::kBF16,
                       Activation::kSilu};
  // (K = 4224: 33 sub-chunks per tile, 64 routes on 16 row blocks: ~2 per CTA, two groups.)
  for (const Case& c : {fp4_variant_case(kNvfp4Silu, 16, 4224, 256, 8, 8, 1),
                        fp4_variant_case(a16, 16, 4224, 256, 8, 8, 1)}) {
    SCOPED_TRACE(c.name());
    Problem P;
    P.make(c);
    const auto base = eager_with_knobs(P, {});
    ASSERT_EQ(base.size(), 1u);
    ASSERT_EQ(setenv("B12X_MOE_FC1_RDY", "1", 1), 0);
    GpuRun G(P);  // the plan reads the knob
    unsetenv("B12X_MOE_FC1_RDY");
    ASSERT_TRUE(G.ok);
    const auto got = G.run_eager();
    EXPECT_EQ(moe::detail::decode_last_fc1_rdy(), 1);
    ASSERT_EQ(got.size(), base[0].size());
    EXPECT_EQ(std::memcmp(got.data(), base[0].data(), 2 * got.size()), 0)
        << "FC1 ready words (fresh scratch) differ from the default";
    Problem Q;
    std::vector<uint16_t> out;
    check_graph_replays(G, P, 3, "FC1 ready words", Q, out);
    check_against_reference(Q, G.as_float(out), 0.9999);
    // The last-warp FC1 / the 3-stage 32-row FC2 with constant ring slots (B12X_MOE_FC1_SLOT=1 /
    // B12X_MOE_FC2_SLOT=1, probes): the same bits.
    expect_probe_bit_equal(P, {}, {"B12X_MOE_FC1_SLOT", "1"}, "FC1 constant ring slots", false);
    expect_probe_bit_equal(P, {{"B12X_MOE_FC2_ROWS", "32"}, {"B12X_MOE_FC2_STAGES", "3"}},
                           {"B12X_MOE_FC2_SLOT", "1"}, "FC2 constant ring slots", false);
  }
}

TEST(MoeGpu, DecodeStreamFc2ClusterSum) {
  B12X_REQUIRE_GPU();
  if (b12x::device_info(0).cc_major < 9) GTEST_SKIP() << "thread-block clusters need SM90+";
  // A split FC2 row block as one thread-block cluster (decode_fc2_cluster: by default at split 2
  // on SM90; B12X_MOE_FC2_CLUSTER=2 at any split, =0 never, read by plan): the split CTAs add their
  // sums through distributed shared memory in split order, the order the fp32 partials are added
  // in, so the outputs are bit-equal to the partials path (=0) at the same split. The 32-row FC2
  // only (the 16-row instances have no cluster tail). Cases: 1 token (split 2), 8 tokens with split
  // 4 and split 3 in the 2-stage CTA, FP16 w4a16 at H = 992 (the last row block partly outside H);
  // and a graph replay of the cluster plan with new routes.
  const Fp4Variant a16{QuantMode::kW4A16, SourceFormat::kModeloptNvfp4, DType::kFP16,
                       Activation::kSilu};
  const std::pair<Case, Knobs> vars[] = {
      {fp4_variant_case(kNvfp4Silu, 16, 1024, 256, 1, 8, 1), {{"B12X_MOE_FC2_SPLIT", "2"}}},
      {fp4_variant_case(kNvfp4Silu, 16, 512, 384, 8, 4, 1),
       {{"B12X_MOE_FC2_ROWS", "32"}, {"B12X_MOE_FC2_SPLIT", "4"}}},
      {fp4_variant_case(kNvfp4Silu, 16, 512, 384, 8, 4, 1),
       {{"B12X_MOE_FC2_SPLIT", "3"}, {"B12X_MOE_FC2_ROWS", "32"}, {"B12X_MOE_FC2_STAGES", "2"}}},
      {fp4_variant_case(a16, 32, 992, 256, 6, 6, 1),
       {{"B12X_MOE_FC2_SPLIT", "2"}, {"B12X_MOE_FC2_ROWS", "32"}}}};
  for (const auto& v : vars) {
    SCOPED_TRACE(v.first.name() + " " + v.second[0].first + "=" + v.second[0].second);
    Problem P;
    P.make(v.first);
    Knobs base = v.second;
    base.push_back({"B12X_MOE_FC2_CLUSTER", "0"});
    expect_probe_bit_equal(P, base, {"B12X_MOE_FC2_CLUSTER", "2"}, "FC2 cluster sum",
                           &v == &vars[0]);
    // The probe's plan ran last: its FC2 launched as clusters of the split's CTAs.
    int split = 0;
    for (const auto& k : v.second)
      if (std::string(k.first) == "B12X_MOE_FC2_SPLIT") split = std::stoi(k.second);
    EXPECT_EQ(moe::detail::decode_last_fc2_cluster(), split);
  }
  {  // A cluster plan whose first call is a graph capture: plan asked the fit, run only launches.
    Problem P;
    P.make(vars[0].first);
    ASSERT_EQ(setenv("B12X_MOE_FC2_SPLIT", "2", 1), 0);
    GpuRun G(P);
    unsetenv("B12X_MOE_FC2_SPLIT");
    ASSERT_TRUE(G.ok);
    Problem Q;
    std::vector<uint16_t> out;
    check_graph_replays(G, P, 2, "FC2 cluster captured first", Q, out);
    EXPECT_EQ(moe::detail::decode_last_fc2_cluster(), 2);
    check_against_reference(Q, G.as_float(out), 0.9999);
  }
}

TEST(MoeGpu, DecodeStreamFc2RowsDefaultRule) {
  B12X_REQUIRE_GPU();
  // Nothing forced: H = 4096 (128 32-row blocks), top-k 8, M = 4 (32 routes) is where the rule
  // takes the 32-row CTA with its own split on a device that fits 2 per SM (an H200: split 2,
  // 256 CTAs of a 264-CTA wave), nvfp4 and FP16 w4a16; M = 1 too (session 22: split 2 with 8
  // routes). Each run matches the reference and equals the same plan with the rule's rows and
  // split forced (bit-equal).
  const int sms = device_info(0).sm_count, ctas32 = moe::detail::decode_fc2_rows32_ctas(0);
  const Fp4Variant a16{QuantMode::kW4A16, SourceFormat::kModeloptNvfp4, DType::kFP16,
                       Activation::kSilu};
  const Case cases[] = {fp4_variant_case(kNvfp4Silu, 16, 4096, 256, 4, 8, 1),
                        fp4_variant_case(a16, 16, 4096, 256, 4, 8, 1),
                        fp4_variant_case(kNvfp4Silu, 16, 4096, 256, 1, 8, 1)};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name());
    const int64_t routes = c.M * c.topk;
    const int rows =
        moe::detail::decode_fc2_rows(moe::DecodeKnobs{}, c.M, routes, 4096, sms, ctas32);
    if (ctas32 >= 2 && sms >= 100 && sms <= 160) EXPECT_EQ(rows, 32);
    const int split = rows == 32
                          ? moe::detail::decode_fc2_split32(routes, 4096 / 32, sms, false, c.M == 1)
                          : moe::detail::decode_fc2_split(routes, 4096 / 16, sms, 0);
    Problem P;
    P.make(c);
    std::vector<uint16_t> def, forced;
    {
      GpuRun G(P);
      ASSERT_TRUE(G.ok);
      def = G.run_eager();
      check_against_reference(P, G.as_float(def), 0.9999);
    }
    const std::string rs = std::to_string(rows), ss = std::to_string(split);
    ASSERT_EQ(setenv("B12X_MOE_FC2_ROWS", rs.c_str(), 1), 0);
    ASSERT_EQ(setenv("B12X_MOE_FC2_SPLIT", ss.c_str(), 1), 0);
    {
      GpuRun G(P);
      unsetenv("B12X_MOE_FC2_ROWS");
      unsetenv("B12X_MOE_FC2_SPLIT");
      ASSERT_TRUE(G.ok);
      forced = G.run_eager();
    }
    ASSERT_EQ(def.size(), forced.size());
    EXPECT_EQ(std::memcmp(def.data(), forced.data(), 2 * def.size()), 0)
        << "default differs from FC2 rows " << rows << " split " << split << " forced";
  }
}

TEST(MoeGpu, GroupedSmallTiles) {
  B12X_REQUIRE_GPU();
  // Grouped plans with <= 16 routes per expert take 16-slot FP4 tiles (grouped_tile_tokens):
  // experts with more routes than a tile (several tiles), empty experts, every operand path.
  const Fp4Variant& mx = kMxSitu;
  const Fp4Variant a16{QuantMode::kW4A16, SourceFormat::kModeloptNvfp4, DType::kFP16,
                       Activation::kSilu};
  const Fp4Variant& m4 = kMxfp4Relu2;
  run_cases({fp4_variant_case(kNvfp4Silu, 32, 512, 256, 96, 4, 0),
             fp4_variant_case(mx, 16, 512, 128, 40, 6, 0),
             fp4_variant_case(a16, 24, 256, 192, 60, 4, 0),
             fp4_variant_case(m4, 40, 256, 64, 150, 4, 0)});
}

// Counts the amax patterns [0, +Inf] whose quant_block_nvfp4 (1 / gs given, no division by 6)
// differs from quant_block in the scale byte, multiplier or decoded scale, for each gs.
__global__ void quant_block_nvfp4_diff_kernel(const float* gs, int ngs, unsigned long long* bad) {
  const float inv[8] = {fmt::div_rn(1.f, gs[0 % ngs]), fmt::div_rn(1.f, gs[1 % ngs]),
                        fmt::div_rn(1.f, gs[2 % ngs]), fmt::div_rn(1.f, gs[3 % ngs]),
                        fmt::div_rn(1.f, gs[4 % ngs]), fmt::div_rn(1.f, gs[5 % ngs]),
                        fmt::div_rn(1.f, gs[6 % ngs]), fmt::div_rn(1.f, gs[7 % ngs])};
  unsigned long long n = 0;
  for (uint64_t u = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
       u <= 0x7F800000ull; u += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const float amax = fmt::f32_from_bits(static_cast<uint32_t>(u));
    for (int g = 0; g < ngs && g < 8; ++g) {
      const moe::num::QBlock a = moe::num::quant_block(moe::num::kANvfp4, amax, gs[g]);
      const moe::num::QBlock b = moe::num::quant_block_nvfp4(amax, gs[g], inv[g]);
      n += a.s != b.s || fmt::f32_bits(a.mult) != fmt::f32_bits(b.mult) ||
           fmt::f32_bits(a.dsf) != fmt::f32_bits(b.dsf);
    }
  }
  if (n) atomicAdd(bad, n);
}

TEST(MoeGpu, Nvfp4QuantBlockWithoutDivisionsMatches) {
  B12X_REQUIRE_GPU();
  // The decode stream's FC1 quantises its FC2 input with quant_block_nvfp4 (1 / gs hoisted, the
  // division by 6 as a corrected product): every amax pattern in [0, +Inf], eight global scales
  // (zero, subnormal, tiny, typical, huge, Inf), bit for bit against quant_block on the device.
  const std::vector<float> gs = {0.f, 1e-40f, 1e-30f, 1.f, 672.f, 2688.f / 3.1f, 3e38f, INFINITY};
  DeviceBuffer<float> dgs = upload(gs);
  DeviceBuffer<unsigned long long> bad(1);
  B12X_TEST_CUDA(cudaMemset(bad.ptr, 0, sizeof(unsigned long long)));
  quant_block_nvfp4_diff_kernel<<<1056, 256>>>(dgs.ptr, static_cast<int>(gs.size()), bad.ptr);
  B12X_TEST_CUDA(cudaGetLastError());
  B12X_TEST_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(bad.download()[0], 0ull);
}

TEST(MoeGpu, E2m1RoundMatchesTheGenericEncoder) {
  // Host check (no GPU needed) of the select-chain E2M1 rounding the activation quantisers use
  // on both sides: every BF16 pattern, a strided sweep of every fp32 exponent and sign, and every
  // fp32 in +-[2^-7, 16) (all thresholds and their neighbours), bit for bit against the encoder.
  int64_t bad = 0;
  auto check = [&](float y) {
    const float want = moe::num::e2m1_value(fmt::float_to_e2m1_canonical(y));
    const float got = moe::num::e2m1_round(y);
    if (fmt::f32_bits(got) != fmt::f32_bits(want) && bad++ < 8)
      ADD_FAILURE() << "y bits 0x" << std::hex << fmt::f32_bits(y) << ": got " << got
                    << ", encoder " << want;
  };
  for (uint32_t b = 0; b < 0x10000u; ++b) check(fmt::f32_from_bits(b << 16));
  for (uint32_t sign = 0; sign < 2; ++sign) {
    for (uint32_t e = 0; e < 256; ++e)
      for (uint32_t m = 0; m < (1u << 23); m += 1021)
        check(fmt::f32_from_bits((sign << 31) | (e << 23) | m));
    for (uint32_t e = 120; e <= 130; ++e)
      for (uint32_t m = 0; m < (1u << 23); ++m)
        check(fmt::f32_from_bits((sign << 31) | (e << 23) | m));
  }
  EXPECT_EQ(bad, 0);
}

TEST(MoeGpu, Nvfp4ZeroAndSubnormalBlockScales) {
  B12X_REQUIRE_GPU();
  // Prepared NVFP4 scales are re-encoded (moe_layout.h E5M3) and zero-scale blocks get zero
  // codes: every regime and operand path must still match the reference exactly as before.
  for (int regime = 0; regime <= 1; ++regime)
    for (QuantMode qm : {QuantMode::kNvfp4, QuantMode::kW4A16})
      for (DType dt : {DType::kBF16, DType::kFP16}) {
        if (qm == QuantMode::kNvfp4 && dt == DType::kFP16) continue;
        Case c;
        c.mode = qm;
        c.src = SourceFormat::kModeloptNvfp4;
        c.act = Activation::kSilu;
        c.dtype = dt;
        c.edge_scales = true;
        c.regime = regime;
        c.M = regime ? 6 : 40;
        SCOPED_TRACE(c.name());
        run_case(c);
      }
}

TEST(MoeGpu, GraphReplayWithNewRoutesIsBitExact) {
  B12X_REQUIRE_GPU();
  // Grouped, the decode stream, and the decode stream above 128 routes (the wide routing: 320
  // routes of 40 tokens on 32 live experts).
  for (int v = 0; v < 3; ++v) {
    const int regime = v == 0 ? 0 : 1;
    Case c;
    c.mode = QuantMode::kNvfp4;
    c.src = SourceFormat::kModeloptNvfp4;
    c.act = Activation::kSilu;
    c.regime = regime;
    c.M = v == 0 ? 50 : v == 1 ? 6 : 40;
    if (v == 2) {
      c.E = 64;
      c.topk = 8;
    }
    Problem P;
    P.make(c);
    GpuRun G(P);
    cudaStream_t s;
    B12X_TEST_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    ASSERT_TRUE(G.ok);
    B12X_TEST_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    const b12x_status st = G.launch(s);
    B12X_TEST_CUDA(cudaStreamEndCapture(s, &graph));
    ASSERT_EQ(st, B12X_OK) << b12x_last_error();
    B12X_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    for (int rep = 0; rep < 3; ++rep) {
      P.new_routes();
      G.ids.upload(P.ids);
      G.wts.upload(P.wts);
      G.out.poison();
      B12X_TEST_CUDA(cudaDeviceSynchronize());
      B12X_TEST_CUDA(cudaGraphLaunch(exec, s));
      B12X_TEST_CUDA(cudaStreamSynchronize(s));
      const auto replay = G.out.download();
      const auto eager = G.run_eager(s);
      ASSERT_EQ(std::memcmp(replay.data(), eager.data(), 2 * replay.size()), 0)
          << "replay differs from eager, rep " << rep;
      if (rep == 0) check_against_reference(P, G.as_float(replay), 0.9999);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
  }
}

TEST(MoeGpu, RepreparationKeepsPointers) {
  B12X_REQUIRE_GPU();
  Case c;
  c.mode = QuantMode::kW4A16;
  c.src = SourceFormat::kModeloptNvfp4;
  c.act = Activation::kRelu2;
  Problem P;
  P.make(c);
  GpuRun G(P);
  ASSERT_TRUE(G.ok);
  const void* before = G.storage();
  const auto first = G.run_eager();
  // New weights with the same plan, re-prepared into the same object.
  Problem Q = P;
  Q.w1.make(c, c.I, c.H, c.g1, 1.f / 16);
  Q.w2.make(c, c.H, c.I, c.g2, 1.f / 16);
  G.prepare(Q);
  EXPECT_EQ(G.storage(), before);
  EXPECT_EQ(G.dw1v.download(), Q.w1.v) << "prepare_weights must not mutate the source";
  Q.ids = P.ids;
  Q.wts = P.wts;
  check_against_reference(Q, G.as_float(G.run_eager()), 0.9999);
  EXPECT_NE(first, G.out.download());
}

TEST(MoeGpu, BindRejectsMismatches) {
  B12X_REQUIRE_GPU();
  Case c;
  c.mode = QuantMode::kW4A16;
  c.src = SourceFormat::kModeloptNvfp4;
  c.act = Activation::kSilu;
  Problem P;
  P.make(c);
  GpuRun G(P);
  ASSERT_TRUE(G.ok);
  auto bind_err = [&](b12x_tensor sc, b12x_tensor a, b12x_tensor w) {
    const b12x_status st = b12x_moe_bind(G.plan, &sc, &a, G.weights, &w, &G.t_ids, &G.t_out);
    return st == B12X_OK ? std::string() : std::string(b12x_last_error());
  };
  auto small = G.t_scratch;
  small.shape[0] = 16;
  EXPECT_NE(bind_err(small, G.t_x, G.t_wts).find("scratch has 16 bytes"), std::string::npos);
  auto big = G.t_x;
  big.shape[0] = c.M + 1;
  EXPECT_NE(bind_err(G.t_scratch, big, G.t_wts).find("> plan max_tokens"), std::string::npos);
  auto w16 = G.t_wts;
  w16.dtype = B12X_DTYPE_FP16;
  EXPECT_NE(bind_err(G.t_scratch, G.t_x, w16).find("topk_weights has dtype fp16"),
            std::string::npos);
  auto host = G.t_x;
  host.device = -1;
  EXPECT_NE(bind_err(G.t_scratch, host, G.t_wts).find("a is on the host"), std::string::npos);
  auto odd = G.t_x;  // rows read in 16-byte pieces: the row stride must keep them aligned
  odd.strides[0] += 4;
  EXPECT_NE(bind_err(G.t_scratch, odd, G.t_wts).find("a stride of dim 0"), std::string::npos);
}

TEST(MoeGpu, ExpertOffsetsBeyond32Bits) {
  B12X_REQUIRE_GPU();
  // 640 experts of H=4096, I=1024 NVFP4: the prepared FC1 storage spans 2.7 GB, so expert
  // offsets of the routed (high) experts exceed 2^31 bytes.
  Case c;
  c.mode = QuantMode::kW4A16;
  c.src = SourceFormat::kModeloptNvfp4;
  c.act = Activation::kSilu;
  c.E = 640;
  c.H = 4096;
  c.I = 1024;
  c.M = 2;
  c.topk = 2;
  Problem P;
  P.c = c;
  // Build sources cheaply: zero everywhere except the routed experts 600 and 639.
  auto mk = [&](HostOperand& o, int64_t rows, int64_t K) {
    o.v.assign(c.E * rows * K / 2, 0);
    const int64_t per = fmt::swizzled_scale_bytes(rows, K / 16);
    o.s.assign(c.E * per, 0);
    for (int64_t e : {600, 639}) {
      auto r = b12x::test::random_bytes(rows * K / 2);
      std::copy(r.begin(), r.end(), o.v.begin() + e * rows * K / 2);
      for (int64_t i = 0; i < per; ++i)
        o.s[e * per + i] = static_cast<uint8_t>(randint(0x28, 0x38));
    }
    o.gs.assign(c.E, 1.f / 64);
    o.tv = TensorRef::contiguous(o.v.data(), DType::kUInt8, {c.E, rows, K / 2});
    o.ts = TensorRef::contiguous(o.s.data(), DType::kUE4M3,
                                 {c.E, fmt::pad_to(rows, 128), fmt::pad_to(K / 16, 4)});
    o.tg = TensorRef::contiguous(o.gs.data(), DType::kFP32, {c.E});
  };
  mk(P.w1, 2 * c.I, c.H);
  mk(P.w2, c.H, c.I);
  const auto xf = b12x::test::random_normal(c.M * c.H);
  P.x.resize(xf.size());
  for (size_t i = 0; i < xf.size(); ++i) P.x[i] = fmt::float_to_bf16_bits(xf[i]);
  P.ids = {600, 639, 639, -1};
  P.wts = {0.5f, 0.25f, 1.0f, 1.0f};
  moe::WeightsPlanArgs a;
  a.quant_mode = c.mode;
  a.source_format = c.src;
  a.activation = c.act;
  a.num_experts = c.E;
  a.hidden_size = c.H;
  a.intermediate_size = c.I;
  a.w13_layout = c.layout;
  P.wplan = moe::plan_weights(a);
  ASSERT_GT(P.wplan.prepared_bytes, int64_t(1) << 31);
  GpuRun G(P);
  ASSERT_TRUE(G.ok);
  check_against_reference(P, G.as_float(G.run_eager()), 0.9999);
}

TEST(MoeGpuSanitize, SmallDecodeAndGrouped) {
  B12X_REQUIRE_GPU();
  for (int regime = 0; regime <= 1; ++regime) {
    Case c;
    c.mode = QuantMode::kNvfp4;
    c.src = SourceFormat::kModeloptNvfp4;
    c.act = Activation::kSilu;
    c.E = 4;
    c.H = 128;
    c.I = 64;
    c.M = 3;
    c.topk = 2;
    c.regime = regime;
    run_case(c);
    c.mode = QuantMode::kGgmlA16;
    c.src = SourceFormat::kGgml;
    c.g1 = DType::kIQ2_XS;
    c.g2 = DType::kQ8_0;
    c.H = 256;
    run_case(c);
  }
  // Decode stream with the FC2 split over several CTAs per row block (36 routes on 8 row
  // blocks): partials + counters.
  Case c;
  c.mode = QuantMode::kW4A16;
  c.src = SourceFormat::kModeloptNvfp4;
  c.act = Activation::kSilu;
  c.E = 4;
  c.H = 128;
  c.I = 64;
  c.M = 9;
  c.topk = 4;
  c.regime = 1;
  run_case(c);
  // Decode FC1 CTAs walking many tiles (I = 3072: 2 tile groups of 192 row blocks, 16 tiles per
  // CTA): FC1 warp groups, each synchronised by its own named barrier.
  c.mode = QuantMode::kNvfp4;
  c.E = 8;
  c.I = 3072;
  c.M = 8;
  run_case(c);
  // Long K (8 sub-chunks) on few row blocks: under B12X_MOE_FC1_BAL=1 the balanced FC1 ranges
  // cut tiles between CTAs (parts in fc1_part, the last CTA of a tile adds them).
  c.H = 1024;
  c.I = 256;
  c.M = 5;
  c.topk = 2;
  run_case(c);
  // Many row blocks and long per-warp chains: the default rule (decode_fc1_balanced) takes the
  // balanced FC1 ranges, 4 CTAs per row block cutting tiles between them (132-SM H200: 96 row
  // blocks, chain 5 tiles x 3 sub-chunks).
  c.E = 6;
  c.H = 2176;
  c.I = 1536;
  c.topk = 4;
  run_case(c);
  // The wide routing (above 128 routes): 192 routes on 24 experts, 48 tokens (4-warp FC2).
  c.E = 24;
  c.H = 256;
  c.I = 128;
  c.M = 48;
  run_case(c);
  // The 32-row FC2 at 1 token, split 2: on SM90 one cluster per row block summed through DSMEM
  // (decode_fc2_cluster).
  c.E = 8;
  c.M = 1;
  c.topk = 4;
  ASSERT_EQ(setenv("B12X_MOE_FC2_SPLIT", "2", 1), 0);
  run_case(c);
  unsetenv("B12X_MOE_FC2_SPLIT");
}

}  // namespace
