// config.json / hf_quant_config.json parsing and vLLM-style layer-name resolution.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "b12x/checkpoint.h"
#include "b12x/status.h"

using namespace b12x;
using namespace b12x::checkpoint;

namespace {

const char* kMixed = R"({
  "architectures": ["Qwen3ForCausalLM"],
  "quantization_config": {
    "quant_method": "modelopt",
    "quant_algo": "MIXED_PRECISION",
    "kv_cache_quant_algo": "FP8",
    "exclude_modules": ["lm_head", "model.layers.*.mlp.gate"],
    "quantized_layers": {
      "model.layers.0.self_attn.q_proj": {"quant_algo": "NVFP4", "group_size": 16},
      "model.layers.0.self_attn.k_proj": {"quant_algo": "NVFP4", "group_size": 16},
      "model.layers.0.self_attn.v_proj": {"quant_algo": "NVFP4", "group_size": 16},
      "model.layers.0.self_attn.o_proj": {"quant_algo": "FP8"},
      "model.layers.0.mlp.gate_proj": {"quant_algo": "W4A16_NVFP4"},
      "model.layers.0.mlp.up_proj": {"quant_algo": "W4A16_NVFP4"},
      "model.layers.0.mlp.down_proj": {"quant_algo": "MXFP8", "group_size": 32},
      "model.layers.1.self_attn.q_proj": {"quant_algo": "NVFP4"},
      "model.layers.1.self_attn.k_proj": {"quant_algo": "FP8"},
      "model.layers.1.self_attn.v_proj": {"quant_algo": "NVFP4"},
      "model.layers.1.mlp.gate_proj": {"quant_algo": "NVFP4"},
      "model.layers.1.mlp.down_proj": {"quant_algo": "Q8_0", "group_size": 32,
                                        "block_payload_bytes": 34, "packing": "ggml"},
      "model.layers.2.mlp.gate_up_proj": {"quant_algo": "IQ2_XS", "group_size": 256,
                                           "block_payload_bytes": 74, "packing": "ggml"},
      "model.layers.2.mlp.down_proj": {"quant_algo": "IQ2_XXS", "group_size": 256,
                                        "block_payload_bytes": 66, "packing": "ggml"},
      "model.layers.3.mlp.experts.0.gate_proj": {"quant_algo": "NVFP4"},
      "model.layers.3.mlp.experts.0.up_proj": {"quant_algo": "NVFP4"},
      "model.layers.3.mlp.experts.1.down_proj": {"quant_algo": "NVFP4"},
      "model.layers.4.mlp.experts.0.gate_proj": {"quant_algo": "NVFP4"},
      "model.layers.4.mlp.experts.1.gate_proj": {"quant_algo": "MXFP8"},
      "language_model.model.layers.5.self_attn.o_proj": {"quant_algo": "NVFP4"},
      "model.language_model.layers.6.self_attn.o_proj": {"quant_algo": "FP8"}
    }
  }
})";

void expect_error(const std::string& text, Status code, const char* fragment) {
  try {
    QuantConfig::from_json(text, "config.json");
    FAIL() << "accepted: " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(CheckpointConfig, MixedPrecisionResolution) {
  const QuantConfig c = QuantConfig::from_json(kMixed, "config.json");
  EXPECT_EQ(c.method(), "modelopt_mixed");
  EXPECT_EQ(c.kv_cache_algo(), "FP8");
  // Exact.
  EXPECT_EQ(c.resolve("model.layers.0.self_attn.o_proj").algo, QuantAlgo::kFP8);
  LayerQuant q = c.resolve("model.layers.0.mlp.down_proj");
  EXPECT_EQ(q.algo, QuantAlgo::kMXFP8);
  EXPECT_EQ(q.group_size, 32);
  // Fused shards that agree.
  q = c.resolve("model.layers.0.self_attn.qkv_proj");
  EXPECT_EQ(q.algo, QuantAlgo::kNVFP4);
  EXPECT_EQ(q.group_size, 16);
  EXPECT_EQ(c.resolve("model.layers.0.mlp.gate_up_proj").algo, QuantAlgo::kW4A16NVFP4);
  // Fused shards that disagree, or are partly missing.
  try {
    c.resolve("model.layers.1.self_attn.qkv_proj");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("k_proj"), std::string::npos) << e.what();
  }
  EXPECT_THROW(c.resolve("model.layers.1.mlp.gate_up_proj"), Error);
  // GGML entries.
  q = c.resolve("model.layers.1.mlp.down_proj");
  EXPECT_EQ(q.algo, QuantAlgo::kQ8_0);
  EXPECT_EQ(q.block_payload_bytes, 34);
  EXPECT_TRUE(q.ggml_packing);
  // Shard fallback: the config lists the fused module, the model asks a shard.
  q = c.resolve("model.layers.2.mlp.up_proj");
  EXPECT_EQ(q.algo, QuantAlgo::kIQ2_XS);
  EXPECT_EQ(q.block_payload_bytes, 74);
  EXPECT_EQ(c.resolve("model.layers.2.mlp.down_proj").algo, QuantAlgo::kIQ2_XXS);
  // Experts parent prefix.
  q = c.resolve("model.layers.3.mlp.experts", true);
  EXPECT_EQ(q.algo, QuantAlgo::kNVFP4);
  EXPECT_THROW(c.resolve("model.layers.4.mlp.experts", true), Error);
  // Aliasing both ways.
  EXPECT_EQ(c.resolve("model.language_model.layers.5.self_attn.o_proj").algo, QuantAlgo::kNVFP4);
  EXPECT_EQ(c.resolve("language_model.model.layers.6.self_attn.o_proj").algo, QuantAlgo::kFP8);
  // Not listed / excluded: unquantized.
  EXPECT_FALSE(c.resolve("model.layers.9.self_attn.o_proj").quantized());
  EXPECT_FALSE(c.resolve("lm_head").quantized());
  EXPECT_FALSE(c.resolve("model.layers.0.mlp.gate").quantized());
  EXPECT_FALSE(c.resolve("model.layers.0.input_layernorm").quantized());
  // The normalized description round-trips the main facts.
  const std::string j = c.to_json();
  EXPECT_NE(j.find("\"method\":\"modelopt_mixed\""), std::string::npos) << j;
  EXPECT_NE(j.find("IQ2_XXS"), std::string::npos);
}

TEST(CheckpointConfig, GlobalAlgorithms) {
  QuantConfig c = QuantConfig::from_json(
      R"({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
          "group_size": 16, "exclude_modules": ["lm_head", "model.layers.*.self_attn*"]}})",
      "config.json");
  EXPECT_EQ(c.method(), "modelopt");
  EXPECT_EQ(c.resolve("model.layers.0.mlp.down_proj").algo, QuantAlgo::kNVFP4);
  EXPECT_FALSE(c.resolve("model.layers.0.self_attn.qkv_proj").quantized());
  EXPECT_FALSE(c.resolve("model.norm").quantized());
  EXPECT_FALSE(c.resolve("lm_head").quantized());

  c = QuantConfig::from_json(R"({"quantization_config": {"quant_method": "modelopt",
      "quant_algo": "W4A16_NVFP4"}})",
                             "config.json");
  EXPECT_EQ(c.resolve("x.o_proj").algo, QuantAlgo::kW4A16NVFP4);
  EXPECT_EQ(c.resolve("x.o_proj").group_size, 16);

  // Legacy hf_quant_config.json.
  c = QuantConfig::from_json(R"({"producer": {"name": "modelopt", "version": "0.31"},
      "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": null,
                       "exclude_modules": ["lm_head"]}})",
                             "hf_quant_config.json");
  EXPECT_EQ(c.method(), "modelopt");
  EXPECT_EQ(c.resolve("model.layers.0.mlp.down_proj").algo, QuantAlgo::kFP8);

  // DeepSeek block FP8.
  c = QuantConfig::from_json(R"({"quantization_config": {"activation_scheme": "dynamic",
      "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}})",
                             "config.json");
  EXPECT_EQ(c.method(), "fp8_block");
  LayerQuant q = c.resolve("model.layers.0.mlp.experts", true);
  EXPECT_EQ(q.algo, QuantAlgo::kFP8Block);
  EXPECT_EQ(q.weight_block[0], 128);
  EXPECT_TRUE(q.dynamic_activation);

  // Per-tensor FP8 (no block size).
  c = QuantConfig::from_json(R"({"quantization_config": {"quant_method": "fp8",
      "activation_scheme": "static"}})",
                             "config.json");
  EXPECT_EQ(c.resolve("a.o_proj").algo, QuantAlgo::kFP8);

  // gpt-oss MXFP4: experts only.
  c = QuantConfig::from_json(R"({"quantization_config": {"quant_method": "mxfp4",
      "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                 "model.embed_tokens", "lm_head"]}})",
                             "config.json");
  EXPECT_EQ(c.method(), "mxfp4");
  q = c.resolve("model.layers.0.mlp.experts", true);
  EXPECT_EQ(q.algo, QuantAlgo::kMXFP4);
  EXPECT_EQ(q.group_size, 32);
  EXPECT_FALSE(c.resolve("model.layers.0.self_attn.qkv_proj").quantized());
  EXPECT_FALSE(c.resolve("model.layers.0.mlp.router").quantized());

  // No quantization at all.
  c = QuantConfig::from_json(R"({"architectures": ["X"], "hidden_size": 64})", "config.json");
  EXPECT_EQ(c.method(), "none");
  EXPECT_FALSE(c.resolve("model.layers.0.mlp.down_proj").quantized());
}

TEST(CheckpointConfig, Errors) {
  // Unknown algorithms are errors, not silently unquantized.
  expect_error(R"({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP5"}})",
               Status::kInvalidArgument, "unknown quantization algorithm \"NVFP5\"");
  expect_error(R"({"quantization_config": {"quant_method": "modelopt", "quant_algo":
      "MIXED_PRECISION", "quantized_layers": {"a.q_proj": {"quant_algo": "FP8_PB_WO"}}}})",
               Status::kInvalidArgument, "FP8_PB_WO");
  expect_error(R"({"quantization_config": {"quant_method": "awq", "bits": 4}})",
               Status::kUnsupported, "awq");
  // Quantized norm weights are rejected with a message.
  expect_error(R"({"quantization_config": {"quant_method": "modelopt", "quant_algo":
      "MIXED_PRECISION", "quantized_layers": {"model.layers.0.input_layernorm":
      {"quant_algo": "FP8"}}}})",
               Status::kInvalidArgument, "norm");
  // GGML entries must carry their real block geometry.
  expect_error(R"({"quantization_config": {"quant_method": "modelopt", "quant_algo":
      "MIXED_PRECISION", "quantized_layers": {"a.q_proj": {"quant_algo": "IQ2_XS",
      "group_size": 256, "block_payload_bytes": 66, "packing": "ggml"}}}})",
               Status::kInvalidArgument, "block_payload_bytes 74");
  expect_error(R"({"quantization_config": {"quant_method": "modelopt", "quant_algo":
      "MIXED_PRECISION", "quantized_layers": {"a.q_proj": {"quant_algo": "Q8_0",
      "group_size": 64}}}})",
               Status::kInvalidArgument, "group_size 32");
  expect_error(R"({"quantization_config": {"quant_method": "modelopt", "quant_algo":
      "MIXED_PRECISION", "quantized_layers": {"a.q_proj": {"quant_algo": "Q8_0",
      "packing": "gguf"}}}})",
               Status::kInvalidArgument, "packing");
  expect_error(R"({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
      "group_size": 32}})",
               Status::kInvalidArgument, "group_size 16");
  expect_error(R"({"quantization_config": {"quant_method": "modelopt", "quant_algo":
      "MIXED_PRECISION"}})",
               Status::kInvalidArgument, "quantized_layers");
  expect_error(R"({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128]}})",
               Status::kInvalidArgument, "weight_block_size");
  expect_error(R"({"quantization_config": {"quant_method": "modelopt", "quant_algo": 3}})",
               Status::kInvalidArgument, "quant_algo");
  expect_error("{not json", Status::kIoError, "malformed JSON");
}

TEST(CheckpointConfig, FromDirPrefersConfigJson) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("b12x_cfg_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"hidden_size": 8})";
  std::ofstream(dir / "hf_quant_config.json")
      << R"({"quantization": {"quant_algo": "NVFP4", "group_size": 16}})";
  QuantConfig c = QuantConfig::from_dir(dir.string());
  EXPECT_EQ(c.method(), "modelopt");  // config.json has none: the legacy file is used
  EXPECT_NE(c.source().find("hf_quant_config.json"), std::string::npos);
  std::ofstream(dir / "config.json")
      << R"({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})";
  c = QuantConfig::from_dir(dir.string());
  EXPECT_EQ(c.method(), "fp8_block");
  std::filesystem::remove_all(dir);
}

TEST(CheckpointConfig, Helpers) {
  EXPECT_TRUE(glob_match("model.layers.*.mlp.gate", "model.layers.12.mlp.gate"));
  EXPECT_FALSE(glob_match("model.layers.*.mlp.gate", "model.layers.12.mlp.gate_proj"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("a?c*", "abcdef"));
  EXPECT_FALSE(glob_match("a?c", "ac"));
  EXPECT_TRUE(is_norm_module("model.layers.0.input_layernorm.weight"));
  EXPECT_TRUE(is_norm_module("model.norm"));
  EXPECT_TRUE(is_norm_module("model.layers.0.self_attn.q_norm"));
  EXPECT_FALSE(is_norm_module("model.layers.0.self_attn.o_proj"));
  EXPECT_EQ(quant_algo_from_name("nvfp4", "x"), QuantAlgo::kNVFP4);
  EXPECT_STREQ(quant_algo_name(QuantAlgo::kW4A16NVFP4), "W4A16_NVFP4");
}
