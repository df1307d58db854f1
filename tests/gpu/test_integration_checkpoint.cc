// Checkpoint round trip on the GPU: a BF16 safetensors checkpoint with random weights ->
// quantize (the `b12x quantize` path) -> inspect (the path b12x would run) -> load into the
// prepared GEMM / fused-MoE / embedding objects on the device -> run on random activations ->
// compare with the CPU reference on the checkpoint's quantized operands (tight) and with the
// original BF16 weights (loose, format-appropriate).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "b12x/checkpoint.h"
#include "b12x/embedding.h"
#include "b12x/formats.h"
#include "b12x/gemm.h"
#include "b12x/moe.h"
#include "b12x/quantize.h"
#include "b12x/reference/linear.h"
#include "b12x/reference/moe.h"
#include "b12x/status.h"
#include "gpu_test_util.h"

using namespace b12x;
using namespace b12x::checkpoint;
using test::DeviceBuffer;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kH = 256, kI = 256, kE = 4, kV = 64;
const char* kDense = "model.layers.0.self_attn.o_proj";  // [256, 512]
const char* kExperts = "model.layers.1.mlp.experts";

uint16_t bf16_bits(float f) {
  uint16_t h = 0;
  formats::encode_scalar(DType::kBF16, formats::CvtMode::kSatFinite, &f, &h, 1);
  return h;
}
float bf16_value(uint16_t h) {
  float f = 0;
  formats::decode_scalar(DType::kBF16, &h, &f, 1);
  return f;
}

struct Model {
  std::string dir;
  std::map<std::string, std::vector<float>> w;  // bf16-exact source values
};

/// A tiny decoder: one dense projection, a 4-expert MoE layer with its router, an lm_head.
Model make_model(const std::string& tag) {
  Model m;
  m.dir = (fs::temp_directory_path() / ("b12x_gpu_rt_" + tag + "_" + std::to_string(::getpid())))
              .string();
  fs::remove_all(m.dir);
  fs::create_directories(m.dir);
  std::normal_distribution<float> nd(0.f, 0.02f);
  std::vector<std::pair<std::string, std::vector<int64_t>>> specs = {
      {std::string(kDense) + ".weight", {256, 512}},
      {"model.layers.1.mlp.gate.weight", {kE, kH}},
      {"lm_head.weight", {kV, kH}},
  };
  for (int e = 0; e < kE; ++e)
    for (const char* p : {"gate_proj", "up_proj", "down_proj"})
      specs.push_back({std::string(kExperts) + "." + std::to_string(e) + "." + p + ".weight",
                       std::string(p) == "down_proj" ? std::vector<int64_t>{kH, kI}
                                                     : std::vector<int64_t>{kI, kH}});
  SafetensorsWriter wr;
  for (const auto& [name, shape] : specs) {
    const int64_t n = shape[0] * shape[1];
    std::vector<uint16_t> bits(n);
    std::vector<float> vals(n);
    for (int64_t i = 0; i < n; ++i) {
      float v = nd(test::rng());
      if (i % 97 == 0) v *= 8.f;  // a few outliers, as real checkpoints have
      bits[i] = bf16_bits(v);
      vals[i] = bf16_value(bits[i]);
    }
    wr.add(name, DType::kBF16, shape, bits.data(), bits.size() * 2);
    m.w[name] = vals;
  }
  wr.write(m.dir + "/model.safetensors");
  std::ofstream(m.dir + "/config.json") << R"({
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
    "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
    "num_experts_per_tok": 2, "hidden_act": "silu", "torch_dtype": "bfloat16"})";
  return m;
}

std::vector<uint16_t> random_bf16(size_t n, float stddev, std::vector<float>* values) {
  std::vector<uint16_t> b(n);
  values->resize(n);
  const std::vector<float> r = test::random_normal(n, stddev);
  for (size_t i = 0; i < n; ++i) {
    b[i] = bf16_bits(r[i]);
    (*values)[i] = bf16_value(b[i]);
  }
  return b;
}

std::vector<float> download_bf16(const DeviceBuffer<uint16_t>& d) {
  const std::vector<uint16_t> h = d.download();
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); ++i) f[i] = bf16_value(h[i]);
  return f;
}

/// rel_l2 of `out` against x . w^T computed from the original BF16 weights in fp64.
double rel_l2_vs_bf16(const std::vector<float>& out, const std::vector<float>& x,
                      const std::vector<float>& w, int64_t M, int64_t N, int64_t K) {
  std::vector<double> ref(M * N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(x[m * K + k]) * w[n * K + k];
      ref[m * N + n] = s;
    }
  const test::Compare c = test::compare(out, ref);
  EXPECT_EQ(c.nonfinite, 0);
  return c.rel_l2;
}

/// Per element |out - ref| <= |ref| / 128 + 1e-3 * rms(ref) (BF16 output rounding plus fp32
/// summation order), all finite.
void expect_tight(const std::vector<float>& out, const std::vector<double>& ref,
                  const std::string& what) {
  double rms = 0;
  for (double r : ref) rms += r * r;
  rms = std::sqrt(rms / std::max<size_t>(ref.size(), 1));
  int64_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double err = std::fabs(out[i] - ref[i]);
    const double tol = std::fabs(ref[i]) / 128 + 1e-3 * rms + 1e-30;
    if (!(err <= tol)) {
      ++bad;
      worst = std::max(worst, err / tol);
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << test::compare(out, ref).str() << " worst err/tol=" << worst;
}

struct Case {
  const char* tag;
  QuantAlgo algo;
  float input_amax;
  std::vector<std::string> layers;  // --layers; empty: every linear layer but lm_head/router
  QuantAlgo expect_algo;
  const char* dense_path;
  const char* moe_mode;  // "" when the case does not quantize the experts for the MoE
  double loose_dense;    // rel_l2 bound vs the BF16 weights (weights + activation quantization)
  double loose_moe;
};

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  return i.param.tag;
}
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.tag;
}

class IntegrationGpuCheckpoint : public ::testing::TestWithParam<Case> {};

TEST_P(IntegrationGpuCheckpoint, QuantizeInspectLoadRun) {
  B12X_REQUIRE_GPU();
  const Case c = GetParam();
  const DeviceInfo& di = device_info(0);
  const int cc = di.cc_major * 10 + di.cc_minor;
  Model m = make_model(c.tag);
  const std::string out = m.dir + "_q";
  fs::remove_all(out);

  // quantize: the `b12x quantize` code path.
  QuantizeOptions qo;
  qo.algo = c.algo;
  qo.input_amax = c.input_amax;
  qo.layer_patterns = c.layers;
  const QuantizeReport qr = quantize_checkpoint(m.dir, out, qo);
  ASSERT_FALSE(qr.layers.empty());
  for (const auto& l : qr.layers) EXPECT_EQ(l.algo, c.expect_algo) << l.name;

  // inspect: the path b12x runs for this device.
  InspectOptions io;
  io.compute_capability = cc;
  io.env = {};
  const InspectReport ins = inspect(out, io);
  EXPECT_EQ(ins.errors, 0) << ins.to_json();
  const LayerReport* dense = nullptr;
  const LayerReport* moe_layer = nullptr;
  for (const auto& l : ins.layers) {
    if (l.name == kDense) dense = &l;
    if (l.name == kExperts) moe_layer = &l;
  }
  ASSERT_NE(dense, nullptr) << ins.to_json();
  EXPECT_EQ(dense->format, quant_algo_name(c.expect_algo));
  ASSERT_TRUE(dense->selection.supported) << dense->selection.summary();
  EXPECT_EQ(dense->selection.path, c.dense_path) << dense->selection.summary();

  const CheckpointDir ck = CheckpointDir::open(out);
  const QuantConfig cfg = QuantConfig::from_dir(out);
  cudaStream_t stream = nullptr;
  B12X_TEST_CUDA(cudaStreamCreate(&stream));

  // ---- dense layer -> PackedWeight -> gemm on the device ----
  const LinearWeights lw = load_linear(ck, cfg, kDense);
  const int64_t N = lw.n, K = lw.k;
  ASSERT_EQ(N, 256);
  ASSERT_EQ(K, 512);
  const std::shared_ptr<gemm::PackedWeight> pw = pack_linear(lw, 0, stream);
  const gemm::LinearFormat fmt = gemm_format_for_path(dense->selection.path);
  EXPECT_EQ(pw->format(), fmt);
  const gemm::WeightSource host_src = gemm_weight_source(lw, fmt);
  {
    // The loader's host reconstruction and the GEMM reference's dequantization agree. The
    // reference leaves the per-tensor weight scale of W4A4 NVFP4 and FP8 to the per-call alpha /
    // output scale, the checkpoint reconstruction includes it.
    const std::vector<float> deq = dequantize_linear(lw);
    const std::vector<double> ref_deq = reference::linear_dequantize_weight(host_src);
    const double factor = fmt == gemm::LinearFormat::kNvfp4 || fmt == gemm::LinearFormat::kFp8Tensor
                              ? lw.weight_scale_2
                              : 1.0;
    ASSERT_EQ(deq.size(), ref_deq.size());
    int64_t diff = 0;
    for (size_t i = 0; i < deq.size(); ++i)
      diff +=
          std::fabs(deq[i] - ref_deq[i] * factor) > 1e-6 * std::fabs(ref_deq[i] * factor) + 1e-30;
    EXPECT_EQ(diff, 0) << "dequantize_linear differs from reference::linear_dequantize_weight";
  }
  for (int64_t M : {3, 40}) {  // weight-streaming decode and tiled regimes
    SCOPED_TRACE("M=" + std::to_string(M));
    std::vector<float> xv;
    const std::vector<uint16_t> xb = random_bf16(M * K, 1.f, &xv);
    DeviceBuffer<uint16_t> x(M * K), y(M * N);
    x.upload(xb);
    y.poison();
    // Activations as the path takes them: BF16, or quantized by the activation quantizer a
    // server runs (W4A4 NVFP4 / MXFP4, static per-tensor FP8).
    TensorRef xr = TensorRef::contiguous(x.ptr, DType::kBF16, {M, K}, 0);
    TensorRef xs_dev, alpha_dev;
    std::vector<uint8_t> xq_host, xs_host;
    TensorRef xq_ref =
        TensorRef::contiguous(const_cast<uint16_t*>(xb.data()), DType::kBF16, {M, K});
    TensorRef xs_ref;
    double alpha = 1.0;
    DeviceBuffer<uint8_t> xq(M * K), xs(std::max<int64_t>(swizzled_scale_bytes(M, K / 16), 1));
    DeviceBuffer<float> scal(2);
    if (fmt == gemm::LinearFormat::kNvfp4 || fmt == gemm::LinearFormat::kMxfp4) {
      const bool nv = fmt == gemm::LinearFormat::kNvfp4;
      const int64_t sb = swizzled_scale_bytes(M, nv ? K / 16 : K / 32);
      // NVFP4: the global scale is 1 / input_scale (multiply convention), alpha the product.
      scal.upload({nv ? 1.f / lw.input_scale : 1.f, lw.output_scale});
      const TensorRef q = TensorRef::contiguous(xq.ptr, DType::kUInt8, {M, K / 2}, 0);
      const TensorRef s = TensorRef::contiguous(xs.ptr, DType::kUInt8, {sb}, 0);
      if (nv)
        quantize_nvfp4(xr, TensorRef::contiguous(scal.ptr, DType::kFP32, {1}, 0), q, s, stream);
      else
        quantize_mxfp4(xr, q, s, stream);
      B12X_TEST_CUDA(cudaStreamSynchronize(stream));
      xq_host.resize(M * K / 2);
      xs_host.resize(sb);
      B12X_TEST_CUDA(cudaMemcpy(xq_host.data(), xq.ptr, xq_host.size(), cudaMemcpyDeviceToHost));
      B12X_TEST_CUDA(cudaMemcpy(xs_host.data(), xs.ptr, sb, cudaMemcpyDeviceToHost));
      xr = q;
      xs_dev = s;
      xq_ref = TensorRef::contiguous(xq_host.data(), DType::kUInt8, {M, K / 2});
      xs_ref = TensorRef::contiguous(xs_host.data(), DType::kUInt8, {sb});
      if (nv) {
        alpha_dev = TensorRef::contiguous(scal.ptr + 1, DType::kFP32, {1}, 0);
        alpha = lw.output_scale;
        EXPECT_FLOAT_EQ(lw.output_scale, lw.input_scale * lw.weight_scale_2);
      }
    } else if (fmt == gemm::LinearFormat::kFp8Tensor) {
      scal.upload({lw.input_scale, 0.f});
      const TensorRef q = TensorRef::contiguous(xq.ptr, DType::kFP8E4M3, {M, K}, 0);
      quantize_fp8_tensor(xr, TensorRef::contiguous(scal.ptr, DType::kFP32, {1}, 0), q, stream);
      B12X_TEST_CUDA(cudaStreamSynchronize(stream));
      xq_host.resize(M * K);
      B12X_TEST_CUDA(cudaMemcpy(xq_host.data(), xq.ptr, xq_host.size(), cudaMemcpyDeviceToHost));
      xr = q;
      xq_ref = TensorRef::contiguous(xq_host.data(), DType::kFP8E4M3, {M, K});
    }
    gemm::linear(*pw, xr, xs_dev, TensorRef::contiguous(y.ptr, DType::kBF16, {M, N}, 0),
                 TensorRef(), alpha_dev, stream);
    B12X_TEST_CUDA(cudaStreamSynchronize(stream));
    const std::vector<float> got = download_bf16(y);

    std::vector<double> ref(M * N);
    reference::linear(host_src, xq_ref, xs_ref, alpha, TensorRef(),
                      TensorRef::contiguous(ref.data(), DType::kFP64, {M, N}));
    expect_tight(got, ref, std::string(c.tag) + " dense vs reference");
    const double loose = rel_l2_vs_bf16(got, xv, m.w.at(std::string(kDense) + ".weight"), M, N, K);
    EXPECT_LT(loose, c.loose_dense) << "dense vs the BF16 weights";
    EXPECT_GT(loose, 0.0);  // lossy formats never reproduce BF16 exactly
    RecordProperty(std::string("dense_rel_l2_vs_bf16_M") + std::to_string(M),
                   std::to_string(loose));
  }

  // ---- MoE experts -> PreparedExperts -> fused MoE on the device ----
  if (*c.moe_mode != 0) {
    ASSERT_NE(moe_layer, nullptr);
    EXPECT_TRUE(moe_layer->selection.supported) << moe_layer->selection.summary();
    EXPECT_EQ(moe_layer->selection.path, std::string("moe.") + c.moe_mode);
    MoeLoadOptions mo;
    mo.compute_capability = cc;
    mo.topk = 2;
    mo.env = {};
    const auto src = load_moe_experts(ck, cfg, kExperts, mo);
    EXPECT_EQ(src->selection.moe_quant_mode, c.moe_mode);
    moe::PreparedExperts experts;
    const moe::WeightsPlan wp = prepare_moe(*src, experts, stream);
    EXPECT_FALSE(experts.empty());
    for (int64_t M : {5, 80}) {  // decode (routes <= 128) and grouped regimes
      SCOPED_TRACE("moe M=" + std::to_string(M));
      const int64_t topk = 2;
      std::vector<float> xv;
      const std::vector<uint16_t> xb = random_bf16(M * kH, 1.f, &xv);
      std::vector<int32_t> ids(M * topk);
      std::vector<float> wts(M * topk);
      std::uniform_int_distribution<int> pick(0, kE - 1);
      std::uniform_real_distribution<float> wd(0.1f, 1.f);
      for (int64_t i = 0; i < M * topk; ++i) {
        ids[i] = pick(test::rng());
        wts[i] = wd(test::rng());
      }
      moe::Caps mc;
      mc.max_tokens = M;
      mc.num_topk = topk;
      mc.weight_plan = &wp;
      const moe::Plan plan = moe::plan(mc);
      DeviceBuffer<uint16_t> a(M * kH), o(M * kH);
      DeviceBuffer<int32_t> did(M * topk);
      DeviceBuffer<float> dw(M * topk);
      DeviceBuffer<uint8_t> scratch(std::max<int64_t>(plan.scratch_bytes, 1));
      a.upload(xb);
      did.upload(ids);
      dw.upload(wts);
      o.poison();
      const moe::Binding b = moe::bind(
          plan, TensorRef::contiguous(scratch.ptr, DType::kUInt8, {plan.scratch_bytes}, 0),
          TensorRef::contiguous(a.ptr, DType::kBF16, {M, kH}, 0), experts,
          TensorRef::contiguous(dw.ptr, DType::kFP32, {M, topk}, 0),
          TensorRef::contiguous(did.ptr, DType::kInt32, {M, topk}, 0),
          TensorRef::contiguous(o.ptr, DType::kBF16, {M, kH}, 0));
      moe::run(b, stream);
      B12X_TEST_CUDA(cudaStreamSynchronize(stream));
      const std::vector<float> got = download_bf16(o);

      // Tight: the CPU reference on the checkpoint's own (host) expert stack.
      std::vector<float> ref(M * kH);
      reference::MoeRefArgs A;
      A.quant_mode = src->plan_args.quant_mode;
      A.source_format = src->plan_args.source_format;
      A.activation = src->plan_args.activation;
      A.w13_layout = src->plan_args.w13_layout;
      A.a = TensorRef::contiguous(const_cast<uint16_t*>(xb.data()), DType::kBF16, {M, kH});
      A.topk_ids = TensorRef::contiguous(ids.data(), DType::kInt32, {M, topk});
      A.topk_weights = TensorRef::contiguous(wts.data(), DType::kFP32, {M, topk});
      A.weights = src->source;
      A.output = TensorRef::contiguous(ref.data(), DType::kFP32, {M, kH});
      reference::fused_moe(A);
      std::vector<double> refd(ref.begin(), ref.end());
      double ref_max = 0;
      for (float r : ref) ref_max = std::max(ref_max, double(std::fabs(r)));
      const test::Compare cmp = test::compare(got, refd);
      EXPECT_EQ(cmp.nonfinite, 0);
      EXPECT_LE(cmp.max_abs, 0.02 * ref_max + 1e-6) << "moe vs reference: " << cmp.str();

      // Loose: silu(gate x) * (up x) -> down, top-k weighted, with the original BF16 weights.
      std::vector<double> bf(M * kH, 0.0);
      for (int64_t t = 0; t < M; ++t)
        for (int64_t k = 0; k < topk; ++k) {
          const std::string ep = std::string(kExperts) + "." + std::to_string(ids[t * topk + k]);
          const auto& g = m.w.at(ep + ".gate_proj.weight");
          const auto& u = m.w.at(ep + ".up_proj.weight");
          const auto& d = m.w.at(ep + ".down_proj.weight");
          std::vector<double> act(kI);
          for (int64_t i = 0; i < kI; ++i) {
            double hg = 0, hu = 0;
            for (int64_t j = 0; j < kH; ++j) {
              hg += double(xv[t * kH + j]) * g[i * kH + j];
              hu += double(xv[t * kH + j]) * u[i * kH + j];
            }
            act[i] = hg / (1.0 + std::exp(-hg)) * hu;
          }
          for (int64_t h = 0; h < kH; ++h) {
            double s = 0;
            for (int64_t i = 0; i < kI; ++i) s += act[i] * d[h * kI + i];
            bf[t * kH + h] += wts[t * topk + k] * s;
          }
        }
      const test::Compare lc = test::compare(got, bf);
      EXPECT_LT(lc.rel_l2, c.loose_moe) << "moe vs the BF16 weights: " << lc.str();
      EXPECT_GT(lc.rel_l2, 0.0);
    }
  }

  // ---- a Q8_0 lm_head as the embedding table (tied embeddings) ----
  if (c.expect_algo == QuantAlgo::kQ8_0) {
    const LinearWeights hw = load_linear(ck, cfg, "lm_head");
    const TensorRef hv = ggml_weight_view(hw);
    DeviceBuffer<uint8_t> table(hv.span_bytes());
    B12X_TEST_CUDA(cudaMemcpy(table.ptr, hv.data, hv.span_bytes(), cudaMemcpyHostToDevice));
    const int64_t T = 9;
    std::vector<int32_t> ids(T);
    std::uniform_int_distribution<int> pick(0, kV - 1);
    for (auto& i : ids) i = pick(test::rng());
    DeviceBuffer<int32_t> did(T);
    DeviceBuffer<uint16_t> o(T * kH);
    did.upload(ids);
    o.poison();
    embedding_q8_0(TensorRef::contiguous(table.ptr, DType::kQ8_0, {kV, kH}, 0),
                   TensorRef::contiguous(did.ptr, DType::kInt32, {T}, 0),
                   TensorRef::contiguous(o.ptr, DType::kBF16, {T, kH}, 0), stream);
    const std::vector<uint16_t> got = o.download();
    const std::vector<float> deq = dequantize_linear(hw);
    const std::vector<float>& orig = m.w.at("lm_head.weight");
    double e2 = 0, r2 = 0;
    int64_t mismatch = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < kH; ++j) {
        const float want = deq[ids[t] * kH + j];
        mismatch += got[t * kH + j] != bf16_bits(want);  // the fp32 d*q rounded once to BF16
        const double o_ = orig[ids[t] * kH + j], g_ = bf16_value(got[t * kH + j]);
        e2 += (g_ - o_) * (g_ - o_);
        r2 += o_ * o_;
      }
    EXPECT_EQ(mismatch, 0) << "embedding rows differ from the dequantized Q8_0 rows";
    EXPECT_LT(std::sqrt(e2 / r2), 1.5 * quantize_error_bound(QuantAlgo::kQ8_0));
  }
  B12X_TEST_CUDA(cudaStreamDestroy(stream));
  fs::remove_all(m.dir);
  fs::remove_all(out);
}

// Loose bounds: weight quantization (quantize_error_bound) plus activation quantization where the
// path quantizes activations, with margin; MoE compounds two GEMMs and the activation.
// The instantiation prefix starts with the area name so tools/gpu-check.sh's "IntegrationGpu*"
// filter selects it.
INSTANTIATE_TEST_SUITE_P(IntegrationGpu, IntegrationGpuCheckpoint,
                         ::testing::Values(Case{"nvfp4",
                                                QuantAlgo::kNVFP4,
                                                8.f,
                                                {},
                                                QuantAlgo::kNVFP4,
                                                "gemm.nvfp4_w4a4",
                                                "nvfp4",
                                                0.30,
                                                0.50},
                                           Case{"nvfp4_w4a16",
                                                QuantAlgo::kNVFP4,
                                                0.f,
                                                {},
                                                QuantAlgo::kW4A16NVFP4,
                                                "gemm.nvfp4_w4a16",
                                                "w4a16",
                                                0.15,
                                                0.35},
                                           Case{"mxfp4",
                                                QuantAlgo::kMXFP4,
                                                0.f,
                                                {},
                                                QuantAlgo::kMXFP4,
                                                "gemm.mxfp4_w4a4",
                                                "w4a8_mx",
                                                0.40,
                                                0.50},
                                           Case{"mxfp8",
                                                QuantAlgo::kMXFP8,
                                                0.f,
                                                {"o_proj$"},
                                                QuantAlgo::kMXFP8,
                                                "gemm.mxfp8",
                                                "",
                                                0.08,
                                                0},
                                           Case{"fp8",
                                                QuantAlgo::kFP8,
                                                4.f,
                                                {"o_proj$"},
                                                QuantAlgo::kFP8,
                                                "gemm.fp8_tensor",
                                                "",
                                                0.08,
                                                0},
                                           Case{"q8_0",
                                                QuantAlgo::kQ8_0,
                                                0.f,
                                                {"o_proj$", "experts\\.", "lm_head"},
                                                QuantAlgo::kQ8_0,
                                                "gemm.q8_0",
                                                "ggml_a16",
                                                0.02,
                                                0.05},
                                           Case{"iq2_xs",
                                                QuantAlgo::kIQ2_XS,
                                                0.f,
                                                {"o_proj$"},
                                                QuantAlgo::kIQ2_XS,
                                                "gemm.iq2_xs",
                                                "",
                                                0.60,
                                                0}),
                         case_name);

}  // namespace
