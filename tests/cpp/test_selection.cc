// The backend selection policy against the rules of vllm-contract.md §1.1, §1.3–1.5.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "b12x/runtime.h"
#include "b12x/selection.h"

using namespace b12x;
using namespace b12x::selection;

namespace {

LayerDesc moe(WeightFormat w, ActFormat a = ActFormat::kAuto, int64_t hidden = 4096,
              int64_t inter = 1024) {
  LayerDesc d;
  d.kind = LayerKind::kMoE;
  d.weight = w;
  d.act = a;
  d.hidden = hidden;
  d.intermediate_per_rank = inter;
  d.num_experts = 64;
  d.topk = 8;
  d.activation = Activation::kSiLU;
  d.compute_capability = 120;
  return d;
}

LayerDesc dense(WeightFormat w, int64_t n, int64_t k, ActFormat a = ActFormat::kAuto) {
  LayerDesc d;
  d.kind = LayerKind::kDenseLinear;
  d.weight = w;
  d.act = a;
  d.n = n;
  d.k = k;
  d.compute_capability = 120;
  return d;
}

LayerDesc attention() {
  LayerDesc d;
  d.kind = LayerKind::kAttention;
  d.weight = WeightFormat::kBF16;
  d.num_q_heads = 32;
  d.num_kv_heads = 8;
  d.head_dim = 128;
  d.page_size = 128;
  d.compute_capability = 121;
  return d;
}

bool has_reason(const Selection& s, const std::string& frag) {
  for (const auto& r : s.reasons)
    if (r.find(frag) != std::string::npos) return true;
  return false;
}
bool has_note(const Selection& s, const std::string& frag) {
  for (const auto& r : s.notes)
    if (r.find(frag) != std::string::npos) return true;
  return false;
}

const EnvOverrides kNoEnv{};

}  // namespace

TEST(Selection, MoeModeTable) {
  // (weights, activations) -> quant_mode, source_format, w13_layout (vllm-contract §1.4).
  struct Row {
    WeightFormat w;
    ActFormat a;
    const char* mode;
    const char* src;
    const char* layout;
  } rows[] = {
      {WeightFormat::kMXFP4, ActFormat::kMXFP8, "w4a8_mx", "fp4_e8m0_k32", "w31"},
      {WeightFormat::kMXFP4, ActFormat::kBF16, "w4a16", "fp4_e8m0_k32", "w31"},
      {WeightFormat::kNVFP4, ActFormat::kNVFP4, "nvfp4", "modelopt_nvfp4", "w31"},
      {WeightFormat::kNVFP4, ActFormat::kMXFP8, "w4a8_nvfp4", "modelopt_nvfp4", "w31"},
      {WeightFormat::kNVFP4, ActFormat::kBF16, "w4a16", "modelopt_nvfp4", "w13"},
  };
  for (const auto& r : rows) {
    const Selection s = select(moe(r.w, r.a), kNoEnv);
    ASSERT_TRUE(s.supported) << s.summary();
    EXPECT_EQ(s.moe_quant_mode, r.mode);
    EXPECT_EQ(s.moe_source_format, r.src);
    EXPECT_EQ(s.w13_layout, r.layout);
    EXPECT_EQ(s.path, std::string("moe.") + r.mode);
    EXPECT_EQ(s.arch, ArchPath::kNative);
  }
}

TEST(Selection, Mxfp4MoePrefersMxfp8AndFallsBackToBf16) {
  Selection s = select(moe(WeightFormat::kMXFP4), kNoEnv);
  ASSERT_TRUE(s.supported);
  EXPECT_EQ(s.moe_quant_mode, "w4a8_mx");
  EXPECT_EQ(s.act, ActFormat::kMXFP8);
  // hidden % 256 != 0: the A8 path cannot take it, BF16 can.
  s = select(moe(WeightFormat::kMXFP4, ActFormat::kAuto, 2880, 1024), kNoEnv);
  ASSERT_TRUE(s.supported) << s.summary();
  EXPECT_EQ(s.moe_quant_mode, "w4a16");
  EXPECT_TRUE(has_note(s, "hidden=2880 is not a multiple of 256")) << s.to_json();
  // swigluoai_uninterleave is not a W4A8 activation: fall back to BF16.
  LayerDesc d = moe(WeightFormat::kMXFP4);
  d.activation = Activation::kSwigluOAIUninterleave;
  s = select(d, kNoEnv);
  ASSERT_TRUE(s.supported);
  EXPECT_EQ(s.moe_quant_mode, "w4a16");
  EXPECT_EQ(s.w13_layout, "w31");
  // Explicit MXFP8 request with an unsupported shape is an error, not a silent fallback.
  s = select(moe(WeightFormat::kMXFP4, ActFormat::kMXFP8, 2880, 1024), kNoEnv);
  EXPECT_FALSE(s.supported);
  EXPECT_TRUE(has_reason(s, "2880"));
  // MXFP4 needs I % 32 == 0 in every mode.
  s = select(moe(WeightFormat::kMXFP4, ActFormat::kBF16, 4096, 1000), kNoEnv);
  EXPECT_FALSE(s.supported);
  EXPECT_TRUE(has_reason(s, "intermediate_per_rank=1000"));
}

TEST(Selection, Nvfp4MoeUsesCheckpointActivations) {
  Selection s = select(moe(WeightFormat::kNVFP4, ActFormat::kMXFP8), kNoEnv);
  EXPECT_EQ(s.moe_quant_mode, "w4a8_nvfp4");
  s = select(moe(WeightFormat::kNVFP4, ActFormat::kAuto), kNoEnv);
  EXPECT_EQ(s.moe_quant_mode, "nvfp4");
  s = select(moe(WeightFormat::kNVFP4, ActFormat::kFP8Dynamic), kNoEnv);
  EXPECT_FALSE(s.supported);
}

TEST(Selection, ForceA16ForBothFp4Formats) {
  EnvOverrides env;
  env.moe_fp4_force_a16 = true;
  for (auto w : {WeightFormat::kNVFP4, WeightFormat::kMXFP4})
    for (auto a : {ActFormat::kAuto, ActFormat::kMXFP8, ActFormat::kNVFP4}) {
      if (w == WeightFormat::kMXFP4 && a == ActFormat::kNVFP4) continue;
      const Selection s = select(moe(w, a), env);
      ASSERT_TRUE(s.supported) << s.summary();
      EXPECT_EQ(s.moe_quant_mode, "w4a16");
      EXPECT_EQ(s.act, ActFormat::kBF16);
      EXPECT_TRUE(has_note(s, "FORCE_A16"));
    }
}

TEST(Selection, EnvironmentSpellings) {
  const char* vars[] = {"B12X_MOE_FP4_FORCE_A16", "VLLM_B12X_MOE_FP4_FORCE_A16",
                        "B12X_USE_FP8_GEMM",      "VLLM_USE_B12X_FP8_GEMM",
                        "B12X_USE_FP4_GEMM",      "VLLM_USE_B12X_FP4_GEMM"};
  for (const char* v : vars) unsetenv(v);
  EXPECT_FALSE(EnvOverrides::from_process().moe_fp4_force_a16);
  setenv("VLLM_B12X_MOE_FP4_FORCE_A16", "1", 1);
  EXPECT_TRUE(EnvOverrides::from_process().moe_fp4_force_a16);
  setenv("B12X_MOE_FP4_FORCE_A16", "0", 1);  // the B12X_ spelling wins
  EXPECT_FALSE(EnvOverrides::from_process().moe_fp4_force_a16);
  setenv("VLLM_USE_B12X_FP8_GEMM", "true", 1);
  EXPECT_TRUE(EnvOverrides::from_process().use_fp8_gemm);
  setenv("B12X_USE_FP4_GEMM", "On", 1);
  EXPECT_TRUE(EnvOverrides::from_process().use_fp4_gemm);
  setenv("B12X_USE_FP4_GEMM", "maybe", 1);
  EXPECT_FALSE(EnvOverrides::from_process().use_fp4_gemm);
  for (const char* v : vars) unsetenv(v);
}

TEST(Selection, MoeRejectsEveryUnsupportedFeatureAtOnce) {
  LayerDesc d = moe(WeightFormat::kNVFP4);
  d.ep_size = 2;
  d.has_expert_map = true;
  d.has_bias = true;
  d.has_lora = true;
  d.use_all2all = true;
  d.use_eplb = true;
  d.activation = Activation::kSwigluOAIInterleaved;
  d.apply_router_weight_on_input = true;
  const Selection s = select(d, kNoEnv);
  EXPECT_FALSE(s.supported);
  EXPECT_TRUE(s.path.empty());
  for (const char* frag : {"expert parallelism", "expert map", "biases", "LoRA", "all2all", "EPLB",
                           "interleaved", "apply_router_weight_on_input"})
    EXPECT_TRUE(has_reason(s, frag)) << frag << " missing in " << s.to_json();
  for (auto w :
       {WeightFormat::kEXL3, WeightFormat::kNF3, WeightFormat::kFP8Block, WeightFormat::kBF16}) {
    const Selection t = select(moe(w), kNoEnv);
    EXPECT_FALSE(t.supported);
  }
  EXPECT_TRUE(has_reason(select(moe(WeightFormat::kEXL3), kNoEnv), "exl3"));
  // SiTU only with beta 4 / linear_beta 25; W4A16 allows router weight on input.
  d = moe(WeightFormat::kNVFP4, ActFormat::kBF16);
  d.activation = Activation::kSiTU;
  d.apply_router_weight_on_input = true;
  EXPECT_TRUE(select(d, kNoEnv).supported);
  d.situ_beta = 3.f;
  EXPECT_FALSE(select(d, kNoEnv).supported);
  d = moe(WeightFormat::kNVFP4, ActFormat::kMXFP8);
  d.activation = Activation::kSwigluOAIUninterleave;
  EXPECT_FALSE(select(d, kNoEnv).supported);
  d = moe(WeightFormat::kNVFP4);
  d.activation = Activation::kReLU2;
  EXPECT_TRUE(select(d, kNoEnv).supported);
}

TEST(Selection, DenseLinearPaths) {
  struct Row {
    WeightFormat w;
    ActFormat a;
    int64_t n, k;
    const char* path;
  } ok[] = {
      {WeightFormat::kNVFP4, ActFormat::kAuto, 4096, 4096, "gemm.nvfp4_w4a4"},
      {WeightFormat::kNVFP4, ActFormat::kBF16, 4096, 4096, "gemm.nvfp4_w4a16"},
      {WeightFormat::kMXFP4, ActFormat::kMXFP4, 4096, 4096, "gemm.mxfp4_w4a4"},
      {WeightFormat::kMXFP8, ActFormat::kAuto, 4096, 4096, "gemm.mxfp8"},
      {WeightFormat::kFP8Tensor, ActFormat::kFP8Static, 4096, 4096, "gemm.fp8_tensor"},
      {WeightFormat::kFP8Block, ActFormat::kFP8Dynamic, 4096, 7168, "gemm.fp8_block"},
      {WeightFormat::kQ8_0, ActFormat::kAuto, 4096, 4096, "gemm.q8_0"},
      {WeightFormat::kIQ2_XS, ActFormat::kBF16, 4096, 4096, "gemm.iq2_xs"},
      {WeightFormat::kIQ2_XXS, ActFormat::kAuto, 4096, 4096, "gemm.iq2_xxs"},
  };
  for (const auto& r : ok) {
    const Selection s = select(dense(r.w, r.n, r.k, r.a), kNoEnv);
    ASSERT_TRUE(s.supported) << r.path << ": " << s.summary();
    EXPECT_EQ(s.path, r.path);
  }
  EXPECT_TRUE(has_note(select(dense(WeightFormat::kNVFP4, 64, 64, ActFormat::kBF16), kNoEnv),
                       "served by b12x"));
  // Failing shape / format checks.
  EXPECT_TRUE(has_reason(select(dense(WeightFormat::kNVFP4, 64, 48), kNoEnv), "K=48"));
  EXPECT_TRUE(has_reason(select(dense(WeightFormat::kFP8Block, 4000, 7168), kNoEnv), "N=4000"));
  EXPECT_TRUE(has_reason(select(dense(WeightFormat::kFP8Block, 4096, 7000), kNoEnv), "K=7000"));
  EXPECT_TRUE(has_reason(select(dense(WeightFormat::kIQ2_XS, 64, 128), kNoEnv), "256"));
  EXPECT_FALSE(select(dense(WeightFormat::kMXFP4, 64, 64, ActFormat::kNVFP4), kNoEnv).supported);
  EXPECT_FALSE(select(dense(WeightFormat::kBF16, 64, 64), kNoEnv).supported);
  EXPECT_FALSE(select(dense(WeightFormat::kFP8BlockOther, 128, 128), kNoEnv).supported);
  LayerDesc d = dense(WeightFormat::kFP8Tensor, 64, 64);
  d.static_input_scale = false;
  EXPECT_FALSE(select(d, kNoEnv).supported);
  d = dense(WeightFormat::kNVFP4, 64, 64);
  d.io_dtype = DType::kFP32;
  EXPECT_TRUE(has_reason(select(d, kNoEnv), "fp32"));
}

TEST(Selection, AutomaticOrderAndOverrides) {
  Selection s = select(dense(WeightFormat::kNVFP4, 4096, 4096), kNoEnv);
  ASSERT_FALSE(s.auto_order.empty());
  EXPECT_EQ(s.auto_order[s.auto_position], "b12x");
  // After the established optimised backends, before emulation.
  const auto pos = [&](const char* n) {
    return std::find(s.auto_order.begin(), s.auto_order.end(), n) - s.auto_order.begin();
  };
  EXPECT_GT(s.auto_position, pos("cutlass"));
  EXPECT_GT(s.auto_position, pos("marlin"));
  EXPECT_LT(s.auto_position, pos("emulation"));
  EXPECT_FALSE(s.b12x_first);

  EnvOverrides fp4;
  fp4.use_fp4_gemm = true;
  s = select(dense(WeightFormat::kNVFP4, 4096, 4096), fp4);
  EXPECT_TRUE(s.b12x_first);
  EXPECT_EQ(s.auto_position, 0);
  EXPECT_EQ(std::count(s.auto_order.begin(), s.auto_order.end(), "b12x"), 1);
  // The FP4 switch does not touch FP8 linears, and vice versa.
  s = select(dense(WeightFormat::kFP8Tensor, 4096, 4096), fp4);
  EXPECT_FALSE(s.b12x_first);
  EXPECT_EQ(s.auto_order[s.auto_position - 1], "cutlass");
  EnvOverrides fp8;
  fp8.use_fp8_gemm = true;
  for (auto w : {WeightFormat::kFP8Tensor, WeightFormat::kFP8Block, WeightFormat::kMXFP8}) {
    s = select(dense(w, 4096, 4096), fp8);
    EXPECT_TRUE(s.b12x_first) << weight_format_name(w);
    EXPECT_EQ(s.auto_order.front(), "b12x");
  }
  // An override never puts an unsupported layer first.
  s = select(dense(WeightFormat::kFP8Block, 4000, 4096), fp8);
  EXPECT_FALSE(s.b12x_first);
  EXPECT_TRUE(has_note(s, "cannot run"));
  // MoE is never subject to the GEMM overrides; b12x sits before emulation.
  s = select(moe(WeightFormat::kNVFP4), fp4);
  EXPECT_FALSE(s.b12x_first);
  EXPECT_EQ(s.auto_order[s.auto_position + 1], "emulation");
}

TEST(Selection, Devices) {
  LayerDesc d = dense(WeightFormat::kNVFP4, 4096, 4096);
  for (int cc : {120, 121}) {
    d.compute_capability = cc;
    const Selection s = select(d, kNoEnv);
    EXPECT_EQ(s.arch, ArchPath::kNative);
    EXPECT_NE(s.arch_detail.find("sm_" + std::to_string(cc) + "a"), std::string::npos);
  }
  for (int cc : {89, 90}) {
    d.compute_capability = cc;
    const Selection s = select(d, kNoEnv);
    EXPECT_TRUE(s.supported);
    EXPECT_EQ(s.arch, ArchPath::kPortable);
    EXPECT_NE(s.arch_detail.find("portable"), std::string::npos);
  }
  for (int cc : {80, 100, 86}) {
    d.compute_capability = cc;
    const Selection s = select(d, kNoEnv);
    EXPECT_FALSE(s.supported);
    EXPECT_TRUE(has_reason(s, "not served by b12x"));
  }
  d.compute_capability = 0;
  EXPECT_TRUE(has_note(select(d, kNoEnv), "SM120"));
  // A capability outside the compiled list is refused when asked to check.
  d.compute_capability = 89;
  d.check_compiled_archs = true;
  bool has89 = false;
  for (int a : compiled_archs()) has89 = has89 || a == 89;
  EXPECT_EQ(select(d, kNoEnv).supported, has89);
}

TEST(Selection, Attention) {
  EXPECT_TRUE(select(attention(), kNoEnv).supported);
  LayerDesc d = attention();
  d.weight = WeightFormat::kFP8Tensor;
  d.page_size = 64;
  d.head_dim = 256;
  EXPECT_TRUE(select(d, kNoEnv).supported);
  d = attention();
  d.weight = WeightFormat::kFP16;
  d.page_size = 32;
  d.head_dim = 96;
  d.num_kv_heads = 5;
  d.alibi = d.softcap = d.fused_output_quant = d.context_parallel = true;
  d.decoder_self_attention = false;
  d.softmax_scale = 0.1f;
  d.io_dtype = DType::kFP16;
  const Selection s = select(d, kNoEnv);
  EXPECT_FALSE(s.supported);
  EXPECT_GE(s.reasons.size(), 10u) << s.to_json();
  d = attention();
  d.softmax_scale = 1.0f / std::sqrt(128.0f);
  EXPECT_TRUE(select(d, kNoEnv).supported);
}

TEST(Selection, Embedding) {
  LayerDesc d;
  d.kind = LayerKind::kEmbedding;
  d.weight = WeightFormat::kQ8_0;
  d.n = 32000;
  d.k = 4096;
  d.compute_capability = 120;
  Selection s = select(d, kNoEnv);
  EXPECT_TRUE(s.supported);
  EXPECT_EQ(s.path, "embedding.q8_0");
  d.k = 4016;
  EXPECT_FALSE(select(d, kNoEnv).supported);
  d.k = 4096;
  d.weight = WeightFormat::kNVFP4;
  EXPECT_FALSE(select(d, kNoEnv).supported);
}

TEST(Selection, JsonAndSummary) {
  const Selection s = select(moe(WeightFormat::kMXFP4), kNoEnv);
  const std::string j = s.to_json();
  EXPECT_NE(j.find("\"moe_quant_mode\": \"w4a8_mx\""), std::string::npos) << j;
  EXPECT_NE(s.summary().find("moe.w4a8_mx"), std::string::npos);
  LayerDesc bad = moe(WeightFormat::kMXFP4);
  bad.name = "layer \"0\"";
  bad.ep_size = 4;
  EXPECT_NE(select(bad, kNoEnv).summary().find("not supported"), std::string::npos);
}

TEST(Selection, ProjectExtensionsBeyondVllm) {
  // MXFP4 W4A4 MoE and GGML MoE are served by this project's fused MoE.
  Selection s = select(moe(WeightFormat::kMXFP4, ActFormat::kMXFP4), kNoEnv);
  ASSERT_TRUE(s.supported) << s.summary();
  EXPECT_EQ(s.moe_quant_mode, "mxfp4");
  for (auto w : {WeightFormat::kQ8_0, WeightFormat::kIQ2_XS, WeightFormat::kIQ2_XXS}) {
    s = select(moe(w, ActFormat::kAuto, 4096, 1024), kNoEnv);
    ASSERT_TRUE(s.supported) << s.summary();
    EXPECT_EQ(s.moe_quant_mode, "ggml_a16");
    EXPECT_EQ(s.moe_source_format, "ggml");
    EXPECT_EQ(s.auto_order[s.auto_position - 1], "gguf");
  }
  // IQ2 shards must keep whole 256-value blocks; Q8_0 whole 32-value blocks.
  s = select(moe(WeightFormat::kIQ2_XS, ActFormat::kAuto, 4096, 1408), kNoEnv);
  EXPECT_FALSE(s.supported);
  EXPECT_TRUE(has_reason(s, "1408"));
  EXPECT_TRUE(select(moe(WeightFormat::kQ8_0, ActFormat::kAuto, 4096, 1408), kNoEnv).supported);
  LayerDesc d = moe(WeightFormat::kQ8_0);
  d.activation = Activation::kSiTU;
  EXPECT_FALSE(select(d, kNoEnv).supported);
  // All MoE modes need hidden % 32 == 0.
  EXPECT_TRUE(has_reason(select(moe(WeightFormat::kNVFP4, ActFormat::kNVFP4, 4008, 1024), kNoEnv),
                         "hidden=4008"));
  // Dense MXFP4 with MXFP8 or BF16 activations.
  s = select(dense(WeightFormat::kMXFP4, 64, 64, ActFormat::kMXFP8), kNoEnv);
  EXPECT_EQ(s.path, "gemm.mxfp4_w4a8");
  s = select(dense(WeightFormat::kMXFP4, 64, 64, ActFormat::kBF16), kNoEnv);
  EXPECT_EQ(s.path, "gemm.mxfp4_w4a16");
  EXPECT_TRUE(has_note(s, "extension"));
  // NVFP4 W4A16 dense needs K % 32 (the GEMM's K granule).
  EXPECT_FALSE(select(dense(WeightFormat::kNVFP4, 64, 48, ActFormat::kBF16), kNoEnv).supported);
}

TEST(Selection, Shorthands) {
  Selection s =
      select(LayerDesc::linear(WeightFormat::kMXFP8, 256, 512, ActFormat::kAuto, 121), kNoEnv);
  EXPECT_EQ(s.path, "gemm.mxfp8");
  EXPECT_EQ(s.reason(), "");
  s = select(LayerDesc::moe(WeightFormat::kNVFP4, ActFormat::kBF16, 2048, 768, 128, 8,
                            Activation::kSiLU, 120),
             kNoEnv);
  EXPECT_EQ(s.moe_quant_mode, "w4a16");
  s = select(LayerDesc::attention(WeightFormat::kBF16, 16, 4, 96, 128, 120), kNoEnv);
  EXPECT_FALSE(s.supported);
  EXPECT_NE(s.reason().find("head_dim 96"), std::string::npos);
  EXPECT_TRUE(select(LayerDesc::embedding(WeightFormat::kQ8_0, 1000, 512, 90), kNoEnv).supported);
}
