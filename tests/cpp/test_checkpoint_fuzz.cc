// Deterministic mutation fuzzing of the checkpoint parsers, run in CI without libFuzzer: valid
// seed images are mutated thousands of times (byte flips, inserts, deletes, truncation, header
// length edits, splices of hostile JSON tokens) and every result must either parse with all
// ranges inside the input or fail with b12x::Error (io_error / invalid_argument).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../fuzz/fuzz_targets.h"
#include "b12x/checkpoint.h"

using namespace b12x;
using namespace b12x::checkpoint;

namespace {

std::vector<std::vector<uint8_t>> safetensors_seeds() {
  std::vector<std::vector<uint8_t>> seeds;
  {
    SafetensorsWriter w;
    std::vector<uint8_t> d(64);
    for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(i * 13);
    w.add("model.layers.0.mlp.down_proj.weight", "U8", {2, 16}, d.data(), 32);
    w.add("model.layers.0.mlp.down_proj.weight_scale", "F8_E4M3", {2, 2}, d.data(), 4);
    w.add("model.layers.0.mlp.down_proj.weight_scale_2", "F32", {}, d.data(), 4);
    w.add("b", "BF16", {2, 3}, d.data(), 12);
    w.add("f4", "F4", {2, 4}, d.data(), 4);
    w.add("empty", "I64", {0}, nullptr, 0);
    w.set_metadata("format", "pt");
    seeds.push_back(w.serialize());
  }
  {
    SafetensorsWriter w;
    std::vector<uint8_t> d(68, 7);
    w.add("g", "U8", {2, 1, 34}, d.data(), 68);
    seeds.push_back(w.serialize());
  }
  return seeds;
}

const char* kTokens[] = {"-1",
                         "1e308",
                         "99999999999999999999",
                         "18446744073709551615",
                         "{",
                         "}",
                         "[",
                         "]",
                         "\"",
                         "\\u0000",
                         "\\ud800",
                         ",",
                         ":",
                         "null",
                         "true",
                         "0.5",
                         "\"F4\"",
                         "\"F6_E2M3\"",
                         "\"U64\"",
                         "[0,0]",
                         "[]",
                         "\"__metadata__\"",
                         "4294967296",
                         "\xff\xfe",
                         "\xc3\x28",
                         "[[[[[[[[",
                         "\"shape\""};

std::vector<uint8_t> mutate(const std::vector<uint8_t>& in, std::mt19937_64& rng) {
  std::vector<uint8_t> m = in;
  const int n = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < n; ++i) {
    const size_t pos = m.empty() ? 0 : rng() % m.size();
    switch (rng() % 8) {
      case 0:  // flip a bit
        if (!m.empty()) m[pos] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // random byte
        if (!m.empty()) m[pos] = static_cast<uint8_t>(rng());
        break;
      case 2:  // delete a run
        if (!m.empty())
          m.erase(m.begin() + pos, m.begin() + std::min(m.size(), pos + 1 + rng() % 8));
        break;
      case 3:  // insert random bytes
        for (int k = static_cast<int>(rng() % 4); k >= 0; --k)
          m.insert(m.begin() + std::min(pos, m.size()), static_cast<uint8_t>(rng()));
        break;
      case 4: {  // splice a hostile token
        const char* t = kTokens[rng() % (sizeof(kTokens) / sizeof(kTokens[0]))];
        m.insert(m.begin() + std::min(pos, m.size()), t, t + std::strlen(t));
        break;
      }
      case 5:  // truncate
        m.resize(rng() % (m.size() + 1));
        break;
      case 6:  // edit the header length prefix
        if (m.size() >= 8) {
          uint64_t len = 0;
          for (int b = 7; b >= 0; --b) len = (len << 8) | m[b];
          const uint64_t choices[] = {len + 1, len - 1, 0, ~0ull, 1ull << 40, m.size(), rng()};
          len = choices[rng() % 7];
          for (int b = 0; b < 8; ++b) m[b] = static_cast<uint8_t>(len >> (8 * b));
        }
        break;
      case 7: {  // change a digit (offsets and shapes)
        for (size_t k = 0; k < m.size(); ++k) {
          const size_t j = (pos + k) % m.size();
          if (m[j] >= '0' && m[j] <= '9') {
            m[j] = static_cast<uint8_t>('0' + rng() % 10);
            break;
          }
        }
        break;
      }
    }
  }
  return m;
}

}  // namespace

TEST(CheckpointFuzz, SafetensorsMutationsFailCleanly) {
  std::mt19937_64 rng(0xb12c);
  int parsed = 0, rejected = 0;
  for (const auto& seed : safetensors_seeds()) {
    ASSERT_EQ(fuzz::safetensors_one(seed.data(), seed.size()), 1);
    for (int i = 0; i < 20000; ++i) {
      const std::vector<uint8_t> m = mutate(seed, rng);
      // Copy into an exact-size heap buffer so ASan builds catch any overread.
      std::unique_ptr<uint8_t[]> buf(new uint8_t[m.size() + 1]);
      if (!m.empty()) std::memcpy(buf.get(), m.data(), m.size());
      try {
        (fuzz::safetensors_one(buf.get(), m.size()) ? parsed : rejected)++;
      } catch (const std::exception& e) {
        FAIL() << "non-b12x exception on mutation " << i << ": " << e.what();
      }
    }
  }
  // Both outcomes occur: the mutations reach the validator, not only the length check.
  EXPECT_GT(parsed, 50);
  EXPECT_GT(rejected, 20000);
}

TEST(CheckpointFuzz, QuantConfigMutationsFailCleanly) {
  const std::string seeds[] = {
      R"({"quantization_config": {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
          "exclude_modules": ["lm_head", "model.layers.*.mlp.gate"],
          "quantized_layers": {
            "model.layers.0.self_attn.q_proj": {"quant_algo": "NVFP4", "group_size": 16},
            "model.layers.0.self_attn.k_proj": {"quant_algo": "NVFP4", "group_size": 16},
            "model.layers.0.self_attn.v_proj": {"quant_algo": "FP8"},
            "model.layers.0.mlp.experts.0.gate_proj": {"quant_algo": "Q8_0", "group_size": 32,
                "block_payload_bytes": 34, "packing": "ggml"}}}})",
      R"({"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
          "weight_block_size": [128, 128]}})",
      R"({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "W4A16_NVFP4",
          "group_size": 16, "exclude_modules": ["lm_head"]}})",
  };
  std::mt19937_64 rng(42);
  int parsed = 0, rejected = 0;
  for (const auto& s : seeds) {
    const std::vector<uint8_t> seed(s.begin(), s.end());
    ASSERT_EQ(fuzz::quant_config_one(seed.data(), seed.size()), 1);
    for (int i = 0; i < 8000; ++i) {
      std::vector<uint8_t> m = mutate(seed, rng);
      try {
        (fuzz::quant_config_one(m.data(), m.size()) ? parsed : rejected)++;
      } catch (const std::exception& e) {
        FAIL() << "non-b12x exception: " << e.what();
      }
    }
  }
  EXPECT_GT(parsed, 100);
  EXPECT_GT(rejected, 3000);
}
