// safetensors reader/writer, the strict JSON parser and malformed-file handling.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "b12x/checkpoint.h"
#include "b12x/status.h"
#include "checkpoint/json.h"

using namespace b12x;
using namespace b12x::checkpoint;

namespace {

std::string temp_dir(const std::string& tag) {
  auto p = std::filesystem::temp_directory_path() /
           ("b12x_ckpt_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(p);
  return p.string();
}

std::vector<uint8_t> image(const std::string& header, size_t data_bytes,
                           uint64_t override_len = UINT64_MAX) {
  std::vector<uint8_t> out(8 + header.size() + data_bytes);
  const uint64_t n = override_len == UINT64_MAX ? header.size() : override_len;
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, header.data(), header.size());
  for (size_t i = 0; i < data_bytes; ++i) out[8 + header.size() + i] = static_cast<uint8_t>(i * 7);
  return out;
}

// Expects parse to throw kIoError whose message contains every fragment.
void expect_bad(const std::vector<uint8_t>& img, std::initializer_list<const char*> fragments) {
  try {
    parse_safetensors(img.data(), img.size(), "bad.safetensors");
    FAIL() << "accepted a malformed file";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::kIoError) << e.what();
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bad.safetensors"), std::string::npos) << msg;
    for (const char* f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << msg;
  }
}

}  // namespace

TEST(CheckpointJson, ParsesValidDocuments) {
  auto v = json::parse(
      R"( {"a": [1, -2, 3.5e2, true, false, null], "s": "x\u00e9\ud83d\ude00\n"} )", "t");
  ASSERT_TRUE(v.is_object());
  const auto& a = v.find("a")->as_array();
  EXPECT_EQ(a[0].as_int(), 1);
  EXPECT_EQ(a[1].as_int(), -2);
  EXPECT_FALSE(a[2].is_integer());
  EXPECT_DOUBLE_EQ(a[2].as_double(), 350.0);
  EXPECT_TRUE(a[3].as_bool());
  EXPECT_TRUE(a[5].is_null());
  EXPECT_EQ(v.find("s")->as_string(), "x\xc3\xa9\xf0\x9f\x98\x80\n");
  // Round trip through dump.
  auto w = json::parse(json::dump(v), "t2");
  EXPECT_EQ(json::dump(w), json::dump(v));
  EXPECT_EQ(json::parse("9223372036854775807", "t").as_int(), INT64_MAX);
  EXPECT_FALSE(json::parse("9223372036854775808", "t").is_integer());
}

TEST(CheckpointJson, RejectsMalformedDocuments) {
  const char* bad[] = {
      "",
      "{",
      "{\"a\":1,}",
      "[1,]",
      "{'a':1}",
      "01",
      "1.",
      "-",
      "1e",
      "NaN",
      "Infinity",
      "tru",
      "\"\\x\"",
      "\"\x01\"",
      "\"\\ud800\"",
      "\"\\udc00\"",
      "\"\xc0\xaf\"",
      "\"\xed\xa0\x80\"",
      "\"\xff\"",
      "{\"a\":1 \"b\":2}",
      "{\"a\":1,\"a\":2}",
      "[1] 2",
      "1e999",
      "/*c*/1",
  };
  for (const char* s : bad) {
    try {
      json::parse(s, "doc.json");
      ADD_FAILURE() << "accepted: " << s;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Status::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("doc.json"), std::string::npos);
    }
  }
  // Depth limit: deep nesting is an error, not a stack overflow.
  std::string deep(100000, '[');
  EXPECT_THROW(json::parse(deep, "deep"), Error);
  json::Limits lim;
  lim.max_depth = 3;
  EXPECT_NO_THROW(json::parse("[[[1]]]", "ok", lim));
  EXPECT_THROW(json::parse("[[[[1]]]]", "deep", lim), Error);
  lim.max_bytes = 4;
  EXPECT_THROW(json::parse("[1, 2]", "big", lim), Error);
}

TEST(CheckpointSafetensors, WriteThenReadRoundTrip) {
  const std::string dir = temp_dir("rt");
  std::vector<uint16_t> bf16(6);
  for (size_t i = 0; i < bf16.size(); ++i) bf16[i] = static_cast<uint16_t>(0x3f80 + 17 * i);
  std::vector<float> f32 = {1.5f, -2.25f, 3.0f};
  std::vector<uint8_t> fp4 = {0x21, 0x43, 0x65, 0x07};
  SafetensorsWriter w;
  w.add("a.weight", DType::kBF16, {2, 3}, bf16.data(), bf16.size() * 2);
  w.add("b", "F32", {3}, f32.data(), 12);
  w.add("c", "F4", {2, 4}, fp4.data(), 4);
  w.add("empty", "I64", {0, 5}, nullptr, 0);
  w.add("scalar", "F8_E8M0", {}, fp4.data(), 1);
  w.set_metadata("format", "pt");
  EXPECT_THROW(w.add("b", "F32", {3}, f32.data(), 12), Error);  // duplicate
  EXPECT_THROW(w.add("d", "F32", {4}, f32.data(), 12), Error);  // size mismatch
  EXPECT_THROW(w.add("d", "F7", {3}, f32.data(), 12), Error);   // unknown dtype
  const std::string path = dir + "/model.safetensors";
  w.write(path);

  auto f = SafetensorsFile::open(path);
  ASSERT_EQ(f.tensors().size(), 5u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const TensorRef a = f.view("a.weight");
  EXPECT_EQ(a.dtype, DType::kBF16);
  EXPECT_EQ(a.ndim, 2);
  EXPECT_EQ(a.shape[1], 3);
  EXPECT_EQ(std::memcmp(a.data, bf16.data(), 12), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data) % 8, 0u);  // header padded to 8 bytes
  const TensorRef b = f.view("b");
  EXPECT_EQ(b.ptr<float>()[1], -2.25f);
  const TensorRef c = f.view("c");
  EXPECT_EQ(c.dtype, DType::kFP4E2M1);
  EXPECT_EQ(c.shape[1], 4);
  EXPECT_EQ(c.span_bytes(), 4);
  EXPECT_EQ(f.get("empty").nbytes, 0u);
  EXPECT_EQ(f.view("scalar").ndim, 0);
  EXPECT_THROW(f.get("nope"), Error);
  // Views keep the mapping alive after the file object is gone.
  TensorRef keep;
  {
    auto g = SafetensorsFile::open(path);
    keep = g.view("b");
  }
  {
    auto g2 = SafetensorsFile::open(path);
    EXPECT_EQ(g2.view("b").ptr<float>()[2], 3.0f);
  }
  auto d = CheckpointDir::open(dir);
  EXPECT_NE(d.find("a.weight"), nullptr);
  EXPECT_EQ(d.tensor_names().size(), 5u);
  std::filesystem::remove_all(dir);
}

TEST(CheckpointSafetensors, MalformedFilesGetClearErrors) {
  // Valid baseline.
  const std::string ok = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_NO_THROW(parse_safetensors(image(ok, 8).data(), image(ok, 8).size(), "ok"));

  // Truncated: shorter than the length prefix, header cut, data cut.
  expect_bad(std::vector<uint8_t>{1, 2, 3}, {"too short"});
  {
    auto img = image(ok, 8);
    img.resize(20);
    expect_bad(img, {"past the end"});
  }
  {
    auto img = image(ok, 8);
    img.resize(img.size() - 3);
    expect_bad(img, {"'w'", "run past the data section"});
  }
  // Huge header length.
  expect_bad(image(ok, 8, uint64_t{1} << 40), {"exceeds the limit"});
  expect_bad(image(ok, 8, UINT64_MAX - 1), {"exceeds the limit"});
  // Bad JSON.
  expect_bad(image(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 8), {"JSON"});
  expect_bad(image(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],}})", 8), {"JSON"});
  expect_bad(image("[1,2]", 0), {"JSON object"});
  // Unknown dtype.
  expect_bad(image(R"({"w":{"dtype":"F7","shape":[2],"data_offsets":[0,8]}})", 8),
             {"'w'", "unknown dtype \"F7\""});
  // Size mismatch.
  expect_bad(image(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
             {"'w'", "needs 12 bytes", "span 8"});
  // Overlapping ranges.
  expect_bad(image(R"({"a":{"dtype":"U8","shape":[6],"data_offsets":[0,6]},)"
                   R"("b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                   8),
             {"overlaps"});
  // Out-of-file range.
  expect_bad(image(R"({"w":{"dtype":"U8","shape":[8],"data_offsets":[100,108]}})", 8),
             {"'w'", "run past the data section"});
  // begin > end.
  expect_bad(image(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}})", 8),
             {"begin after end"});
  // Negative, fractional and overflowing shapes.
  expect_bad(image(R"({"w":{"dtype":"U8","shape":[-8],"data_offsets":[0,8]}})", 8),
             {"non-negative"});
  expect_bad(image(R"({"w":{"dtype":"U8","shape":[2.5],"data_offsets":[0,8]}})", 8),
             {"non-negative"});
  expect_bad(
      image(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})", 8),
      {"overflows"});
  expect_bad(
      image(R"({"w":{"dtype":"U8","shape":[99999999999999999999],"data_offsets":[0,8]}})", 8),
      {"non-negative"});
  expect_bad(image(R"({"w":{"dtype":"U8","shape":[8],"data_offsets":[-1,8]}})", 8),
             {"non-negative"});
  // Duplicate names.
  expect_bad(image(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                   R"("w":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                   8),
             {"duplicate key \"w\""});
  // Holes and trailing bytes.
  expect_bad(image(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", 8),
             {"unreferenced"});
  expect_bad(image(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 8), {"trailing"});
  // Missing / unknown fields, bad metadata, sub-byte sizes.
  expect_bad(image(R"({"w":{"dtype":"U8","shape":[8]}})", 8), {"missing data_offsets"});
  expect_bad(image(R"({"w":{"dtype":"U8","shape":[8],"data_offsets":[0,8],"x":1}})", 8),
             {"unknown field"});
  expect_bad(
      image(R"({"__metadata__":{"a":1},"w":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", 8),
      {"__metadata__"});
  expect_bad(image(R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2),
             {"whole number of bytes"});
  expect_bad(image(R"({"w":{"dtype":"U8","shape":8,"data_offsets":[0,8]}})", 8), {"shape"});
  expect_bad(image(R"({"w":{"dtype":"U8","shape":[8],"data_offsets":[0,8,9]}})", 8),
             {"[begin, end]"});
  expect_bad(image(R"({"w":7})", 0), {"must be an object"});
  expect_bad(image(R"({"":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", 8), {"empty name"});
}

TEST(CheckpointSafetensors, OpenReportsIoProblems) {
  try {
    SafetensorsFile::open("/nonexistent/dir/x.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::kIoError);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/x.safetensors"), std::string::npos);
  }
  const std::string dir = temp_dir("io");
  { std::ofstream(dir + "/empty.safetensors"); }
  EXPECT_THROW(SafetensorsFile::open(dir + "/empty.safetensors"), Error);
  EXPECT_THROW(SafetensorsFile::open(dir), Error);  // a directory
  EXPECT_THROW(CheckpointDir::open(dir + "/missing"), Error);
  std::filesystem::remove_all(dir);
}

TEST(CheckpointSafetensors, DtypeTable) {
  int bits = 0;
  std::optional<DType> dt;
  ASSERT_TRUE(safetensors_dtype_info("F8_E4M3", &bits, &dt));
  EXPECT_EQ(bits, 8);
  EXPECT_EQ(*dt, DType::kFP8E4M3);
  ASSERT_TRUE(safetensors_dtype_info("F8_E8M0", &bits, &dt));
  EXPECT_EQ(*dt, DType::kUE8M0);
  ASSERT_TRUE(safetensors_dtype_info("U16", &bits, &dt));
  EXPECT_FALSE(dt.has_value());
  EXPECT_FALSE(safetensors_dtype_info("F7", &bits, &dt));
  EXPECT_STREQ(safetensors_dtype_name(DType::kBF16), "BF16");
  EXPECT_THROW(safetensors_dtype_name(DType::kQ8_0), Error);
}

TEST(CheckpointSafetensors, ShardedDirectoryWithIndex) {
  const std::string dir = temp_dir("shards");
  float v[2] = {1.f, 2.f};
  SafetensorsWriter a, b, stray;
  a.add("x", "F32", {2}, v, 8);
  b.add("y", "F32", {1}, v, 4);
  stray.add("x", "F32", {2}, v, 8);  // a consolidated copy outside the index
  a.write(dir + "/model-00001-of-00002.safetensors");
  b.write(dir + "/model-00002-of-00002.safetensors");
  stray.write(dir + "/consolidated.safetensors");
  // Without an index the duplicate is an error naming both files.
  EXPECT_THROW(CheckpointDir::open(dir), Error);
  const auto write_index = [&](const std::string& body) {
    std::ofstream(dir + "/model.safetensors.index.json") << body;
  };
  write_index(R"({"metadata": {}, "weight_map": {"x": "model-00001-of-00002.safetensors",
                                                  "y": "model-00002-of-00002.safetensors"}})");
  const CheckpointDir c = CheckpointDir::open(dir);
  EXPECT_EQ(c.files().size(), 2u);
  EXPECT_NE(c.find("y"), nullptr);
  // Wrong shard, missing shard, path traversal.
  write_index(R"({"weight_map": {"x": "model-00002-of-00002.safetensors",
                                 "y": "model-00002-of-00002.safetensors"}})");
  EXPECT_THROW(CheckpointDir::open(dir), Error);
  write_index(R"({"weight_map": {"x": "missing.safetensors"}})");
  EXPECT_THROW(CheckpointDir::open(dir), Error);
  write_index(R"({"weight_map": {"x": "../etc/passwd"}})");
  try {
    CheckpointDir::open(dir);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a file name"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(CheckpointSafetensors, LargeHeadersParseInLinearTime) {
  // 200k tensors (a ~10 MB header): duplicate detection and lookups must not be quadratic.
  std::string h = "{";
  const int n = 200000;
  for (int i = 0; i < n; ++i)
    h += (i ? ",\"t" : "\"t") + std::to_string(i) +
         R"(":{"dtype":"U8","shape":[1],"data_offsets":[)" + std::to_string(i) + "," +
         std::to_string(i + 1) + "]}";
  h += "}";
  std::vector<uint8_t> img = image(h, n);
  const auto t0 = std::chrono::steady_clock::now();
  const SafetensorsIndex idx = parse_safetensors(img.data(), img.size(), "big");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(idx.tensors.size(), static_cast<size_t>(n));
  EXPECT_EQ(idx.by_name.at("t123456"), 123456u);
  EXPECT_LT(s, 10.0);
  // A duplicate late in a big object is still found.
  h.insert(h.size() - 1, R"(,"t7":{"dtype":"U8","shape":[0],"data_offsets":[0,0]})");
  img = image(h, n);
  expect_bad(img, {"duplicate key \"t7\""});
}
