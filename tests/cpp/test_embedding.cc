// CPU tests of the Q8_0 embedding: the reference on hand-worked rows (incl. out-of-range ids and
// strided tables), and the validation errors of plan / bind / one-shot (no GPU needed: they
// check host metadata before touching the device).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "b12x/c_api/embedding.h"
#include "b12x/embedding.h"
#include "b12x/reference/embedding.h"
#include "b12x/status.h"
#include "formats/scalar.h"
#include "test_errors.h"

namespace b12x {
namespace {

using test::expect_error;

/// One Q8_0 block with scale d and values q[j] = (j - 16) * mult.
void write_block(uint8_t* blk, float d, int mult) {
  const uint16_t h = fmt::float_to_fp16_bits(d);
  blk[0] = static_cast<uint8_t>(h);
  blk[1] = static_cast<uint8_t>(h >> 8);
  for (int j = 0; j < 32; ++j)
    blk[2 + j] = static_cast<uint8_t>(static_cast<int8_t>((j - 16) * mult));
}

TEST(EmbeddingReference, HandWorkedRows) {
  // vocab 3, dim 64 (2 blocks per row), row stride 3 blocks (one spare block per row).
  const int64_t vocab = 3, dim = 64, stride_vals = 96, stride_bytes = 3 * 34;
  std::vector<uint8_t> w(vocab * stride_bytes, 0xCC);
  for (int r = 0; r < vocab; ++r)
    for (int b = 0; b < 2; ++b) write_block(&w[r * stride_bytes + b * 34], 0.5f * (r + 1), b + 1);
  TensorRef tw = TensorRef::contiguous(w.data(), DType::kQ8_0, {vocab, dim});
  tw.stride[0] = stride_vals;
  std::vector<int32_t> ids = {2, 0, 3, -1, 2};
  std::vector<uint16_t> out(5 * dim, 0xAAAA);
  const EmbeddingStatus st =
      reference::embedding_q8_0(tw, TensorRef::contiguous(ids.data(), DType::kInt32, {5}),
                                TensorRef::contiguous(out.data(), DType::kBF16, {5, dim}));
  EXPECT_EQ(st.bad_tokens, 2);
  EXPECT_EQ(st.first_bad_token, 2);
  EXPECT_EQ(st.first_bad_id, 3);
  // token 0 = row 2: d = 1.5; block 0 q = j-16, block 1 q = 2(j-16).
  EXPECT_EQ(fmt::bf16_bits_to_float(out[0]), 1.5f * -16);
  EXPECT_EQ(fmt::bf16_bits_to_float(out[17]), 1.5f);
  EXPECT_EQ(fmt::bf16_bits_to_float(out[32 + 31]), 1.5f * 30);
  // token 1 = row 0: d = 0.5.
  EXPECT_EQ(fmt::bf16_bits_to_float(out[dim + 20]), 0.5f * 4);
  // tokens 2 and 3 are out of range: zero rows.
  for (int j = 0; j < 2 * dim; ++j) EXPECT_EQ(out[2 * dim + j], 0) << j;
  EXPECT_EQ(out[4 * dim + 5], out[5]);
}

TEST(EmbeddingReference, Fp16OutputAndUint8View) {
  std::vector<uint8_t> w(2 * 34);
  write_block(&w[0], 0.25f, 3);
  write_block(&w[34], 1000.f, 4);  // 1000 * 60 = 60000 fits fp16; 1000 * 64 -> 64000 ok
  std::vector<int64_t> ids = {1, 0};
  std::vector<uint16_t> out(64);
  reference::embedding_q8_0(TensorRef::contiguous(w.data(), DType::kUInt8, {2, 34}),
                            TensorRef::contiguous(ids.data(), DType::kInt64, {2}),
                            TensorRef::contiguous(out.data(), DType::kFP16, {2, 32}));
  EXPECT_EQ(fmt::fp16_bits_to_float(out[0]),
            fmt::round_to_fp16(fmt::fp16_bits_to_float(fmt::float_to_fp16_bits(1000.f)) * -64));
  EXPECT_EQ(fmt::fp16_bits_to_float(out[32 + 1]), 0.25f * -45);
}

TEST(EmbeddingValidation, Plan) {
  EmbeddingCaps c{100, 64, 8, DType::kInt32, DType::kBF16, 0};
  const Status bad = Status::kInvalidArgument;
  auto with = [&](auto f) {
    EmbeddingCaps x = c;
    f(x);
    return x;
  };
  expect_error([&] { plan_embedding(with([](auto& x) { x.dim = 48; })); }, bad,
               {"plan_embedding", "dim=48", "multiple of 32"});
  expect_error([&] { plan_embedding(with([](auto& x) { x.vocab = 0; })); }, bad, {"vocab=0"});
  expect_error([&] { plan_embedding(with([](auto& x) { x.id_dtype = DType::kFP32; })); }, bad,
               {"id_dtype=fp32", "int32, int64"});
  expect_error([&] { plan_embedding(with([](auto& x) { x.out_dtype = DType::kFP32; })); }, bad,
               {"out_dtype=fp32", "bf16, fp16"});
  expect_error([&] { plan_embedding(with([](auto& x) { x.max_tokens = -1; })); }, bad,
               {"max_tokens=-1"});
  expect_error([&] { plan_embedding(with([](auto& x) { x.device = -1; })); }, bad, {"device=-1"});
}

TEST(EmbeddingValidation, OneShotChecksTensorsFirst) {
  alignas(16) static uint8_t buf[4096];
  const Status bad = Status::kInvalidArgument;
  const TensorRef w = TensorRef::contiguous(buf, DType::kQ8_0, {10, 64}, 0);
  const TensorRef ids = TensorRef::contiguous(buf, DType::kInt32, {4}, 0);
  const TensorRef out = TensorRef::contiguous(buf, DType::kBF16, {4, 64}, 0);
  expect_error(
      [&] {
        embedding_q8_0(w, ids, TensorRef::contiguous(buf, DType::kBF16, {4, 32}, 0), nullptr);
      },
      bad, {"embedding_q8_0", "out", "[4, 64]"});
  expect_error(
      [&] { embedding_q8_0(w, TensorRef::contiguous(buf, DType::kFP32, {4}, 0), out, nullptr); },
      bad, {"id_dtype=fp32"});
  expect_error(
      [&] {
        embedding_q8_0(TensorRef::contiguous(buf, DType::kQ8_0, {10, 64}), ids, out, nullptr);
      },
      bad, {"weight must be on a CUDA device"});
  expect_error(
      [&] {
        embedding_q8_0(TensorRef::contiguous(buf, DType::kUInt8, {10, 40}, 0), ids, out, nullptr);
      },
      bad, {"40 bytes", "34-byte"});
  expect_error(
      [&] {
        embedding_q8_0(TensorRef::contiguous(buf, DType::kFP16, {10, 64}, 0), ids, out, nullptr);
      },
      bad, {"weight", "fp16", "q8_0, uint8"});
  TensorRef ids2 = TensorRef::contiguous(buf, DType::kInt32, {2, 2}, 0);
  expect_error([&] { embedding_q8_0(w, ids2, out, nullptr); }, bad, {"ids must be 1-D"});
  TensorRef ids_strided = ids;
  ids_strided.stride[0] = 2;
  expect_error([&] { embedding_q8_0(w, ids_strided, out, nullptr); }, bad,
               {"ids must be contiguous"});
  TensorRef out_dev1 = out;
  out_dev1.device = 1;
  expect_error([&] { embedding_q8_0(w, ids, out_dev1, nullptr); }, bad,
               {"out is on device 1", "expected device 0"});
}

TEST(EmbeddingCApi, StatusCodesAndMessages) {
  b12x_embedding_caps caps{100, 48, 8, B12X_DTYPE_INT32, B12X_DTYPE_BF16, 0};
  b12x_embedding_plan plan = nullptr;
  EXPECT_EQ(b12x_embedding_plan_create(&caps, &plan), B12X_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(b12x_last_error()).find("dim=48"), std::string::npos) << b12x_last_error();
  EXPECT_EQ(plan, nullptr);
  caps.dim = 64;
  caps.id_dtype = 99;
  EXPECT_EQ(b12x_embedding_plan_create(&caps, &plan), B12X_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(b12x_embedding_plan_create(nullptr, &plan), B12X_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(b12x_embedding_run(nullptr, nullptr), B12X_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(b12x_last_error()).find("plan is NULL"), std::string::npos);
  EXPECT_EQ(b12x_embedding_plan_destroy(nullptr), B12X_OK);
  // Reference through the C ABI: an out-of-range id is reported, not raised.
  std::vector<uint8_t> w(2 * 34, 0);
  std::vector<int64_t> ids = {1, 2};
  std::vector<uint16_t> out(64, 0xFFFF);
  b12x_tensor tw{w.data(), B12X_DTYPE_Q8_0, 2, {2, 32}, {32, 1}, B12X_HOST_DEVICE};
  b12x_tensor ti{ids.data(), B12X_DTYPE_INT64, 1, {2}, {1}, B12X_HOST_DEVICE};
  b12x_tensor to{out.data(), B12X_DTYPE_BF16, 2, {2, 32}, {32, 1}, B12X_HOST_DEVICE};
  int64_t bad = -1, first = -1, fid = -1;
  EXPECT_EQ(b12x_ref_embedding_q8_0(&tw, &ti, &to, &bad, &first, &fid), B12X_OK);
  EXPECT_EQ(bad, 1);
  EXPECT_EQ(first, 1);
  EXPECT_EQ(fid, 2);
  EXPECT_EQ(out[32], 0);
}

}  // namespace
}  // namespace b12x
