// Warm-up argument checks and the C ABI's layer parsing (CPU: every check happens before the
// first plan, so no device is needed).
#include <gtest/gtest.h>

#include <string>

#include "b12x/c_api.h"
#include "b12x/status.h"
#include "b12x/warmup.h"

namespace {

std::string warmup_error(const std::vector<int64_t>& counts) {
  try {
    b12x::warmup(b12x::WarmupLayers{}, counts);
  } catch (const b12x::Error& e) {
    EXPECT_EQ(e.code(), b12x::Status::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(IntegrationWarmup, RejectsTokenCounts) {
  EXPECT_NE(warmup_error({}).find("token_counts is empty"), std::string::npos);
  EXPECT_NE(warmup_error({4, 0}).find("token_counts[1]=0"), std::string::npos);
  EXPECT_NE(warmup_error({int64_t{1} << 25}).find("supported: 1 .. 2^24"), std::string::npos);
}

TEST(IntegrationWarmup, NoLayersPlansNothing) {
  // Without a GPU the capture guard answers "not capturing"; with one nothing is planned either.
  const b12x::WarmupReport r = b12x::warmup(b12x::WarmupLayers{}, {1, 8, 8});
  EXPECT_EQ(r.planned, 0);
  EXPECT_EQ(r.unique, 0);
  EXPECT_EQ(r.launched, 0);
  EXPECT_TRUE(r.entries.empty());
  EXPECT_EQ(r.to_json().rfind("{\"planned\": 0, \"unique\": 0, \"launched\": 0", 0), 0u)
      << r.to_json();
}

std::string capi_error(const char* layers, std::vector<int64_t> counts = {1}) {
  size_t needed = 0;
  const b12x_status st = b12x_warmup(layers, counts.data(), static_cast<int32_t>(counts.size()),
                                     nullptr, nullptr, 0, &needed);
  EXPECT_EQ(st, B12X_ERROR_INVALID_ARGUMENT) << layers;
  return b12x_last_error();
}

TEST(IntegrationWarmup, CApiParsesAndRejectsLayerDescriptions) {
  EXPECT_NE(capi_error("{}").find("must be a JSON array"), std::string::npos);
  EXPECT_NE(capi_error("[1]").find("layers[0] is not a JSON object"), std::string::npos);
  EXPECT_NE(capi_error(R"([{"kind": "conv"}])").find("layers[0].kind='conv'"), std::string::npos);
  EXPECT_NE(capi_error(R"([{"format": "q8_0"}])").find("layers[0].kind is required"),
            std::string::npos);
  EXPECT_NE(capi_error(R"([{"kind": "linear", "format": "q8_0", "in_features": 256,
                            "out_features": 256, "outdtype": "bf16"}])")
                .find("unknown key 'outdtype'"),
            std::string::npos);
  EXPECT_NE(capi_error(R"([{"kind": "linear", "format": "q8_0", "in_features": 2.5,
                            "out_features": 256}])")
                .find("in_features must be an integer"),
            std::string::npos);
  EXPECT_NE(capi_error(R"([{"kind": "attention", "num_q_heads": 8, "num_kv_heads": 2,
                            "head_dim_qk": 128, "page_size": 16}])")
                .find("layers[0].max_page_table_width is required"),
            std::string::npos);
  EXPECT_NE(capi_error(R"([{"kind": "embedding", "vocab": 8, "dim": 64,
                            "id_dtype": "int16"}])")
                .find("unknown dtype name 'int16'"),
            std::string::npos);
  EXPECT_NE(capi_error("[]", {}).find("token_counts must hold at least one count"),
            std::string::npos);
  // Valid and empty: an empty report.
  size_t needed = 0;
  const int64_t one = 1;
  ASSERT_EQ(b12x_warmup("[]", &one, 1, nullptr, nullptr, 0, &needed), B12X_OK);
  std::string buf(needed, '\0');
  ASSERT_EQ(b12x_warmup("[]", &one, 1, nullptr, buf.data(), buf.size(), &needed), B12X_OK);
  EXPECT_NE(buf.find("\"planned\": 0"), std::string::npos) << buf;
}

TEST(IntegrationWarmup, CApiRegistryJson) {
  ASSERT_EQ(b12x_clear_resolved_kernels(), B12X_OK);
  size_t needed = 0;
  ASSERT_EQ(b12x_resolved_kernels_json(nullptr, 0, &needed), B12X_OK);
  std::string buf(needed, '\0');
  ASSERT_EQ(b12x_resolved_kernels_json(buf.data(), buf.size(), &needed), B12X_OK);
  EXPECT_EQ(std::string(buf.c_str()), "[]");
}

}  // namespace
