// Round trip: tiny BF16 checkpoint -> quantize -> inspect -> load -> dequantize -> compare.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "b12x/checkpoint.h"
#include "b12x/formats.h"
#include "b12x/status.h"

using namespace b12x;
using namespace b12x::checkpoint;
namespace fs = std::filesystem;

namespace {

struct TinyModel {
  std::string dir;
  std::map<std::string, std::vector<float>> weights;  // bf16-exact source values
  std::map<std::string, std::vector<int64_t>> shapes;
};

uint16_t to_bf16(float f) {
  uint16_t h = 0;
  formats::encode_scalar(DType::kBF16, formats::CvtMode::kSatFinite, &f, &h, 1);
  return h;
}

// A tiny decoder: one dense layer, one MoE layer with 4 experts, norms, embedding, lm_head.
TinyModel make_tiny(const std::string& tag, uint32_t seed) {
  TinyModel m;
  m.dir =
      (fs::temp_directory_path() / ("b12x_rt_" + tag + "_" + std::to_string(::getpid()))).string();
  fs::remove_all(m.dir);
  fs::create_directories(m.dir);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 0.02f);
  const int64_t H = 256, I = 512, V = 64;
  std::vector<std::pair<std::string, std::vector<int64_t>>> specs = {
      {"model.embed_tokens.weight", {V, H}},
      {"model.layers.0.input_layernorm.weight", {H}},
      {"model.layers.0.self_attn.q_proj.weight", {H, H}},
      {"model.layers.0.self_attn.k_proj.weight", {128, H}},
      {"model.layers.0.self_attn.v_proj.weight", {128, H}},
      {"model.layers.0.self_attn.o_proj.weight", {H, H}},
      {"model.layers.0.mlp.gate_proj.weight", {I, H}},
      {"model.layers.0.mlp.up_proj.weight", {I, H}},
      {"model.layers.0.mlp.down_proj.weight", {H, I}},
      {"model.layers.1.mlp.gate.weight", {4, H}},
      {"model.norm.weight", {H}},
      {"lm_head.weight", {V, H}},
  };
  for (int e = 0; e < 4; ++e)
    for (const char* p : {"gate_proj", "up_proj", "down_proj"}) {
      const bool down = std::string(p) == "down_proj";
      specs.push_back({"model.layers.1.mlp.experts." + std::to_string(e) + "." + p + ".weight",
                       down ? std::vector<int64_t>{H, 256} : std::vector<int64_t>{256, H}});
    }
  SafetensorsWriter w;
  for (const auto& [name, shape] : specs) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<uint16_t> bits(n);
    std::vector<float> vals(n);
    for (int64_t i = 0; i < n; ++i) {
      float v = shape.size() == 1 ? 1.f + nd(rng) : nd(rng);
      if (i % 97 == 0) v *= 8.f;  // a few outliers
      bits[i] = to_bf16(v);
      formats::decode_scalar(DType::kBF16, &bits[i], &vals[i], 1);
    }
    w.add(name, DType::kBF16, shape, bits.data(), bits.size() * 2);
    m.weights[name] = vals;
    m.shapes[name] = shape;
  }
  w.write(m.dir + "/model.safetensors");
  std::ofstream(m.dir + "/config.json") << R"({
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
    "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
    "num_experts_per_tok": 2, "hidden_act": "silu", "torch_dtype": "bfloat16"})";
  std::ofstream(m.dir + "/tokenizer.json") << "{}";
  return m;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

const LayerReport* find_layer(const InspectReport& r, const std::string& name) {
  for (const auto& l : r.layers)
    if (l.name == name) return &l;
  return nullptr;
}

struct Case {
  const char* tag;
  QuantAlgo algo;
  float input_amax;
  QuantAlgo expect_algo;
  const char* dense_path;
  const char* moe_path;           // nullptr: MoE not served by b12x for this format
  const char* pattern = nullptr;  // --layers (the IQ2 encoders are slow: fewer layers)
  size_t expect_layers = 19;      // 7 dense projections + 12 expert projections
};

}  // namespace

class CheckpointRoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(CheckpointRoundTrip, QuantizeInspectLoadDequantize) {
  const Case c = GetParam();
  TinyModel m = make_tiny(c.tag, 1234);
  const std::string out = m.dir + "_out";
  fs::remove_all(out);
  QuantizeOptions opt;
  opt.algo = c.algo;
  opt.input_amax = c.input_amax;
  if (c.pattern) opt.layer_patterns = {c.pattern};
  size_t last_done = 0, calls = 0;
  opt.progress = [&](size_t done, size_t total, const std::string&) {
    EXPECT_EQ(done, last_done + 1);
    EXPECT_LE(done, total);
    last_done = done;
    ++calls;
  };
  const QuantizeReport rep = quantize_checkpoint(m.dir, out, opt);
  EXPECT_EQ(calls, m.weights.size());
  // Embeddings, lm_head, router and norms are kept by default.
  ASSERT_EQ(rep.layers.size(), c.expect_layers);
  for (const auto& l : rep.layers) {
    EXPECT_EQ(l.algo, c.expect_algo);
    EXPECT_LE(l.rel_rms_error, l.bound) << l.name;
    EXPECT_GT(l.rel_rms_error, 0.0) << l.name;  // a lossy format never reproduces bf16 exactly
    EXPECT_LT(l.bytes_out, l.bytes_in) << l.name;
  }
  EXPECT_TRUE(fs::exists(out + "/tokenizer.json"));

  // inspect accepts it and finds the expected paths.
  InspectOptions io;
  io.compute_capability = 120;
  io.env = {};
  const InspectReport ins = inspect(out, io);
  EXPECT_EQ(ins.errors, 0) << ins.to_json();
  EXPECT_EQ(ins.quant_method, "modelopt_mixed");
  const LayerReport* o_proj = find_layer(ins, "model.layers.0.self_attn.o_proj");
  ASSERT_NE(o_proj, nullptr);
  EXPECT_EQ(o_proj->format, quant_algo_name(c.expect_algo));
  ASSERT_TRUE(o_proj->has_selection);
  EXPECT_EQ(o_proj->selection.path, c.dense_path) << o_proj->selection.summary();
  const LayerReport* moe = find_layer(ins, "model.layers.1.mlp.experts");
  ASSERT_NE(moe, nullptr);
  EXPECT_EQ(moe->kind, "moe");
  EXPECT_EQ(moe->shape, (std::vector<int64_t>{4, 256, 256}));
  if (c.moe_path) {
    EXPECT_TRUE(moe->selection.supported) << moe->selection.summary();
    EXPECT_EQ(moe->selection.path, c.moe_path);
  } else {
    EXPECT_FALSE(moe->selection.supported);
  }
  const LayerReport* emb = find_layer(ins, "model.embed_tokens");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->format, "BF16");
  const LayerReport* norm = find_layer(ins, "model.layers.0.input_layernorm");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->kind, "norm");
  EXPECT_FALSE(find_layer(ins, "attention (paged KV cache, every layer)") == nullptr);

  // Load every quantized layer back and compare with the source.
  const CheckpointDir ck = CheckpointDir::open(out);
  const QuantConfig cfg = QuantConfig::from_dir(out);
  for (const auto& l : rep.layers) {
    const LinearWeights lw = load_linear(ck, cfg, l.name);
    ASSERT_EQ(lw.quant.algo, c.expect_algo) << l.name;
    const auto& src = m.weights.at(l.name + ".weight");
    ASSERT_EQ(lw.n * lw.k, static_cast<int64_t>(src.size()));
    const std::vector<float> y = dequantize_linear(lw);
    double e2 = 0, r2 = 0;
    for (size_t i = 0; i < src.size(); ++i) {
      e2 += (src[i] - y[i]) * static_cast<double>(src[i] - y[i]);
      r2 += src[i] * static_cast<double>(src[i]);
    }
    EXPECT_NEAR(std::sqrt(e2 / r2), l.rel_rms_error, 1e-9) << l.name;
    // The GEMM source the loader hands to gemm::PackedWeight::pack.
    const selection::Selection sel =
        selection::select(linear_layer_desc(lw, DType::kBF16, 120), selection::EnvOverrides{});
    ASSERT_TRUE(sel.supported) << sel.summary();
    const gemm::WeightSource gs = gemm_weight_source(lw, gemm_format_for_path(sel.path));
    EXPECT_EQ(gs.in_features, lw.k);
    EXPECT_EQ(gs.weight.shape[0], lw.n);
    if (c.expect_algo == QuantAlgo::kQ8_0 || c.expect_algo == QuantAlgo::kIQ2_XS ||
        c.expect_algo == QuantAlgo::kIQ2_XXS) {
      EXPECT_EQ(gs.weight.ndim, 2);
      EXPECT_EQ(gs.weight.shape[1], lw.k);
      EXPECT_EQ(gs.weight.span_bytes(), static_cast<int64_t>(ck.find(l.name + ".weight")->nbytes));
    } else {
      EXPECT_EQ(gs.weight.data, lw.weight.data);
    }
    if (c.expect_algo == QuantAlgo::kFP8) {
      ASSERT_NE(gs.output_scale.data, nullptr);
      EXPECT_FLOAT_EQ(*gs.output_scale.ptr<float>(), lw.input_scale * lw.weight_scale_2);
    }
    if (c.expect_algo == QuantAlgo::kW4A16NVFP4 || c.expect_algo == QuantAlgo::kNVFP4)
      EXPECT_EQ(gs.global_scale, lw.weight_scale_2);
    if (c.expect_algo == QuantAlgo::kNVFP4)
      EXPECT_FLOAT_EQ(lw.output_scale, lw.input_scale * lw.weight_scale_2);  // the W4A4 alpha
    EXPECT_THROW(
        gemm_weight_source(lw, c.expect_algo == QuantAlgo::kMXFP8 ? gemm::LinearFormat::kQ8_0
                                                                  : gemm::LinearFormat::kMxfp8),
        Error);
    // Bit-exact against the codec applied directly to the source.
    if (c.expect_algo == QuantAlgo::kQ8_0) {
      std::vector<uint8_t> blocks(src.size() / 32 * 34);
      formats::quantize_q8_0(src.data(), lw.n, lw.k, blocks.data());
      EXPECT_EQ(std::memcmp(blocks.data(), lw.weight.data, blocks.size()), 0) << l.name;
    } else if (c.expect_algo == QuantAlgo::kMXFP8) {
      std::vector<uint8_t> v(src.size()), s(src.size() / 32);
      formats::quantize_mxfp8(src.data(), lw.n, lw.k, formats::MxZeroBlockScale::kOne, v.data(),
                              s.data());
      EXPECT_EQ(std::memcmp(v.data(), lw.weight.data, v.size()), 0) << l.name;
      EXPECT_EQ(std::memcmp(s.data(), lw.weight_scale.data, s.size()), 0) << l.name;
    } else if (c.expect_algo == QuantAlgo::kNVFP4 || c.expect_algo == QuantAlgo::kW4A16NVFP4) {
      // The global scale is shared by the fused group (its amax), so it is at most the
      // tensor's own 448*6/amax.
      const float own = formats::nvfp4_global_scale(src.data(), static_cast<int64_t>(src.size()));
      const float gs = 1.f / lw.weight_scale_2;
      EXPECT_LE(gs, own * (1 + 1e-6f)) << l.name;
      std::vector<uint8_t> v(src.size() / 2), s(src.size() / 16);
      formats::quantize_nvfp4(src.data(), lw.n, lw.k, gs, v.data(), s.data());
      EXPECT_EQ(std::memcmp(v.data(), lw.weight.data, v.size()), 0) << l.name;
      if (c.expect_algo == QuantAlgo::kNVFP4)
        EXPECT_FLOAT_EQ(lw.input_scale, c.input_amax / 2688.f);
    }
  }
  // Fused shards share their global scale (vLLM applies one global to the fused weight).
  if (c.expect_algo == QuantAlgo::kNVFP4 || c.expect_algo == QuantAlgo::kW4A16NVFP4 ||
      c.expect_algo == QuantAlgo::kFP8) {
    const auto scale_of = [&](const std::string& prefix) {
      return load_linear(ck, cfg, prefix).weight_scale_2;
    };
    const std::string a = "model.layers.0.self_attn.", g = "model.layers.0.mlp.";
    EXPECT_EQ(scale_of(a + "q_proj"), scale_of(a + "k_proj"));
    EXPECT_EQ(scale_of(a + "q_proj"), scale_of(a + "v_proj"));
    EXPECT_EQ(scale_of(g + "gate_proj"), scale_of(g + "up_proj"));
    EXPECT_NE(scale_of(g + "gate_proj"), scale_of(g + "down_proj"));
    for (int e = 0; e < 4; ++e) {
      const std::string x = "model.layers.1.mlp.experts." + std::to_string(e) + ".";
      EXPECT_EQ(scale_of(x + "gate_proj"), scale_of(x + "up_proj"));
    }
    float amax = 0;
    for (const char* p : {"q_proj", "k_proj", "v_proj"})
      for (float v : m.weights.at(a + p + ".weight")) amax = std::max(amax, std::fabs(v));
    const float expect = c.expect_algo == QuantAlgo::kFP8 ? amax / 448.f : amax / 2688.f;
    EXPECT_NEAR(scale_of(a + "q_proj"), expect, expect * 1e-6f);
  }
  fs::remove_all(m.dir);
  fs::remove_all(out);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, CheckpointRoundTrip,
    ::testing::Values(
        Case{"nvfp4", QuantAlgo::kNVFP4, 8.f, QuantAlgo::kNVFP4, "gemm.nvfp4_w4a4", "moe.nvfp4"},
        Case{"nvfp4a16", QuantAlgo::kNVFP4, 0.f, QuantAlgo::kW4A16NVFP4, "gemm.nvfp4_w4a16",
             "moe.w4a16"},
        Case{"mxfp4", QuantAlgo::kMXFP4, 0.f, QuantAlgo::kMXFP4, "gemm.mxfp4_w4a4", "moe.w4a8_mx"},
        Case{"mxfp8", QuantAlgo::kMXFP8, 0.f, QuantAlgo::kMXFP8, "gemm.mxfp8", nullptr},
        Case{"fp8", QuantAlgo::kFP8, 4.f, QuantAlgo::kFP8, "gemm.fp8_tensor", nullptr},
        Case{"q8_0", QuantAlgo::kQ8_0, 0.f, QuantAlgo::kQ8_0, "gemm.q8_0", "moe.ggml_a16"},
        Case{"iq2_xs", QuantAlgo::kIQ2_XS, 0.f, QuantAlgo::kIQ2_XS, "gemm.iq2_xs", nullptr,
             "self_attn\\.(q|o)_proj", 4},  // q pulls in its fused k, v
        Case{"iq2_xxs", QuantAlgo::kIQ2_XXS, 0.f, QuantAlgo::kIQ2_XXS, "gemm.iq2_xxs", nullptr,
             "self_attn\\.(q|o)_proj", 4}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.tag); });

TEST(CheckpointQuantize, ShardedInputKeepsShardsAndWritesAFullIndex) {
  TinyModel m = make_tiny("sharded", 3);
  // Re-split the single file into two shards with an index.
  {
    const auto f = SafetensorsFile::open(m.dir + "/model.safetensors");
    SafetensorsWriter a, b;
    std::string index = R"({"metadata": {}, "weight_map": {)";
    bool first = true;
    for (const auto& t : f.tensors()) {
      const bool second = t.name.find("layers.1.") != std::string::npos;
      (second ? b : a).add(t.name, t.st_dtype, t.shape, f.bytes(t), t.nbytes);
      index += std::string(first ? "" : ", ") + "\"" + t.name + "\": \"" +
               (second ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors") +
               "\"";
      first = false;
    }
    a.write(m.dir + "/model-00001-of-00002.safetensors");
    b.write(m.dir + "/model-00002-of-00002.safetensors");
    std::ofstream(m.dir + "/model.safetensors.index.json") << index << "}}";
  }
  fs::remove(m.dir + "/model.safetensors");
  QuantizeOptions opt;
  opt.algo = QuantAlgo::kMXFP8;
  const auto rep = quantize_checkpoint(m.dir, m.dir + "_q", opt);
  EXPECT_EQ(rep.layers.size(), 19u);
  // The new index lists every tensor (scales included) and CheckpointDir verifies it.
  const CheckpointDir c = CheckpointDir::open(m.dir + "_q");
  EXPECT_EQ(c.files().size(), 2u);
  const std::string idx = read_text(m.dir + "_q/model.safetensors.index.json");
  for (const auto& name : c.tensor_names())
    EXPECT_NE(idx.find("\"" + name + "\""), std::string::npos) << name;
  EXPECT_EQ(inspect(m.dir + "_q").errors, 0);
  fs::remove_all(m.dir);
  fs::remove_all(m.dir + "_q");
}

TEST(CheckpointQuantize, GemmPathNames) {
  EXPECT_EQ(gemm_format_for_path("gemm.nvfp4_w4a16"), gemm::LinearFormat::kNvfp4W4A16);
  EXPECT_EQ(gemm_format_for_path("gemm.mxfp4_w4a8"), gemm::LinearFormat::kMxfp4W4A8);
  EXPECT_EQ(gemm_format_for_path("gemm.fp8_block"), gemm::LinearFormat::kFp8Block);
  EXPECT_THROW(gemm_format_for_path("moe.nvfp4"), Error);
}

TEST(CheckpointQuantize, RejectsBadRequests) {
  TinyModel m = make_tiny("bad", 7);
  QuantizeOptions opt;
  opt.algo = QuantAlgo::kFP8;  // FP8 without --input-amax
  EXPECT_THROW(quantize_checkpoint(m.dir, m.dir + "_o1", opt), Error);
  opt.algo = QuantAlgo::kNVFP4;
  opt.layer_patterns = {"("};  // invalid regex
  EXPECT_THROW(quantize_checkpoint(m.dir, m.dir + "_o2", opt), Error);
  opt.layer_patterns = {};
  EXPECT_THROW(quantize_checkpoint(m.dir, m.dir, opt), Error);  // in == out
  opt.algo = QuantAlgo::kFP8Block;
  EXPECT_THROW(quantize_checkpoint(m.dir, m.dir + "_o3", opt), Error);
  // --layers restricts the set.
  opt.algo = QuantAlgo::kQ8_0;
  opt.layer_patterns = {"o_proj$", "lm_head"};
  const auto rep = quantize_checkpoint(m.dir, m.dir + "_o4", opt);
  ASSERT_EQ(rep.layers.size(), 2u);
  // Selecting one shard of a fused layer quantizes the whole fused group.
  opt.layer_patterns = {"q_proj$"};
  const auto rep2 = quantize_checkpoint(m.dir, m.dir + "_o6", opt);
  EXPECT_EQ(rep2.layers.size(), 3u);
  const QuantConfig cfg6 = QuantConfig::from_dir(m.dir + "_o6");
  EXPECT_EQ(cfg6.resolve("model.layers.0.self_attn.qkv_proj").algo, QuantAlgo::kQ8_0);
  // A quantized checkpoint is not accepted as input.
  EXPECT_THROW(quantize_checkpoint(m.dir + "_o4", m.dir + "_o5", opt), Error);
  // The Q8_0 lm_head loads as the block-dtype view the embedding op and GGML GEMMs take.
  {
    const CheckpointDir ck = CheckpointDir::open(m.dir + "_o4");
    const LinearWeights lw = load_linear(ck, QuantConfig::from_dir(m.dir + "_o4"), "lm_head");
    const TensorRef v = ggml_weight_view(lw);
    EXPECT_EQ(v.dtype, DType::kQ8_0);
    EXPECT_EQ(v.shape[0], 64);
    EXPECT_EQ(v.shape[1], 256);
    EXPECT_EQ(v.span_bytes(), 64 * 256 / 32 * 34);
    const LinearWeights o =
        load_linear(ck, QuantConfig::from_dir(m.dir + "_o4"), "model.layers.0.mlp.down_proj");
    EXPECT_THROW(ggml_weight_view(o), Error);  // BF16, not GGML
  }
  const QuantConfig cfg = QuantConfig::from_dir(m.dir + "_o4");
  EXPECT_EQ(cfg.resolve("lm_head").algo, QuantAlgo::kQ8_0);
  EXPECT_FALSE(cfg.resolve("model.layers.0.self_attn.q_proj").quantized());
  for (const char* s : {"", "_o1", "_o2", "_o3", "_o4", "_o5", "_o6"}) fs::remove_all(m.dir + s);
}

TEST(CheckpointInspect, ReportsInconsistentCheckpoints) {
  TinyModel m = make_tiny("incons", 9);
  // Config claims NVFP4 for a layer stored in BF16; another entry names a norm.
  std::ofstream(m.dir + "/config.json") << R"({"num_attention_heads": 4, "hidden_size": 256,
    "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
                            "exclude_modules": ["lm_head", "model.embed_tokens"]}})";
  InspectOptions io;
  io.env = {};
  const InspectReport r = inspect(m.dir, io);
  const LayerReport* q = find_layer(r, "model.layers.0.self_attn.q_proj");
  ASSERT_NE(q, nullptr);
  EXPECT_NE(q->error.find("U8"), std::string::npos) << q->error;
  EXPECT_GT(r.errors, 0);
  const LayerReport* emb = find_layer(r, "model.embed_tokens");
  EXPECT_TRUE(emb->error.empty()) << emb->error;
  EXPECT_FALSE(emb->selection.supported);  // BF16 embedding is not a b12x op
  // The JSON form parses and lists every layer.
  EXPECT_NE(r.to_json().find("\"errors\":"), std::string::npos);
  fs::remove_all(m.dir);
}

TEST(CheckpointMoeLoader, StacksExpertsForTheFusedMoe) {
  TinyModel m = make_tiny("moe", 21);
  MoeLoadOptions mo;
  mo.compute_capability = 120;
  mo.topk = 2;
  mo.env = {};
  const std::string pre = "model.layers.1.mlp.experts";
  // BF16 experts are not a fused-MoE format.
  {
    const CheckpointDir ck = CheckpointDir::open(m.dir);
    EXPECT_THROW(load_moe_experts(ck, QuantConfig::from_dir(m.dir), pre, mo), Error);
  }
  struct Fmt {
    QuantAlgo algo;
    float amax;
    const char* mode;
  } fmts[] = {{QuantAlgo::kNVFP4, 6.f, "nvfp4"},
              {QuantAlgo::kNVFP4, 0.f, "w4a16"},
              {QuantAlgo::kMXFP4, 0.f, "w4a8_mx"},
              {QuantAlgo::kQ8_0, 0.f, "ggml_a16"}};
  int idx = 0;
  for (const auto& f : fmts) {
    const std::string out = m.dir + "_m" + std::to_string(idx++);
    QuantizeOptions opt;
    opt.algo = f.algo;
    opt.input_amax = f.amax;
    quantize_checkpoint(m.dir, out, opt);
    const CheckpointDir ck = CheckpointDir::open(out);
    const QuantConfig cfg = QuantConfig::from_dir(out);
    const auto s = load_moe_experts(ck, cfg, pre, mo);
    ASSERT_TRUE(s->selection.supported);
    EXPECT_EQ(s->selection.moe_quant_mode, f.mode);
    EXPECT_EQ(s->num_experts, 4);
    EXPECT_EQ(s->hidden, 256);
    EXPECT_EQ(s->intermediate, 256);
    EXPECT_EQ(s->plan_args.num_experts, 4);
    EXPECT_EQ(s->plan_args.w13_layout, moe::W13Layout::kW31);
    EXPECT_EQ(s->source.w1.shape[1], 512);  // [gate; up]
    EXPECT_EQ(s->source.w2.shape[1], 256);
    const int64_t H = 256, I = 256;
    for (int e = 0; e < 4; ++e) {
      const std::string ep = pre + "." + std::to_string(e) + ".";
      const LinearWeights g = load_linear(ck, cfg, ep + "gate_proj");
      const LinearWeights u = load_linear(ck, cfg, ep + "up_proj");
      const LinearWeights d = load_linear(ck, cfg, ep + "down_proj");
      const int64_t row1 = s->source.w1.byte_stride(1), row2 = s->source.w2.byte_stride(1);
      const uint8_t* w1 = static_cast<const uint8_t*>(s->source.w1.data) + e * 2 * I * row1;
      const uint8_t* w2 = static_cast<const uint8_t*>(s->source.w2.data) + e * H * row2;
      EXPECT_EQ(std::memcmp(w1, g.weight.data, I * row1), 0) << e;             // gate first
      EXPECT_EQ(std::memcmp(w1 + I * row1, u.weight.data, I * row1), 0) << e;  // then up
      EXPECT_EQ(std::memcmp(w2, d.weight.data, H * row2), 0) << e;
      if (f.algo == QuantAlgo::kNVFP4) {
        // Scales come back out of the 128x4 swizzle as [gate; up].
        std::vector<uint8_t> lin(2 * I * H / 16);
        const int64_t per = formats::swizzled_block_scale_bytes(2 * I, H / 16);
        formats::unswizzle_block_scale(s->w1_scale.data() + e * per, 1, 2 * I, H / 16, lin.data());
        EXPECT_EQ(std::memcmp(lin.data(), g.weight_scale.data, I * H / 16), 0);
        EXPECT_EQ(std::memcmp(lin.data() + I * H / 16, u.weight_scale.data, I * H / 16), 0);
        EXPECT_EQ(s->w1_global[e], g.weight_scale_2);
        EXPECT_EQ(s->w2_global[e], d.weight_scale_2);
        if (f.amax > 0) {
          EXPECT_FLOAT_EQ(s->a1_gscale[e], 2688.f / f.amax);
          EXPECT_FLOAT_EQ(s->a2_gscale[e], 2688.f / f.amax);
        } else {
          EXPECT_TRUE(s->a1_gscale.empty());
        }
      } else if (f.algo == QuantAlgo::kMXFP4) {
        EXPECT_EQ(
            std::memcmp(s->w1_scale.data() + e * 2 * I * H / 32, g.weight_scale.data, I * H / 32),
            0);
      }
    }
    if (f.algo == QuantAlgo::kQ8_0) {
      EXPECT_EQ(s->source.w1.dtype, DType::kQ8_0);
      EXPECT_EQ(s->plan_args.ggml_w1_dtype, DType::kQ8_0);
    }
    fs::remove_all(out);
  }
  fs::remove_all(m.dir);
}
