// GPU tests of the Q8_0 embedding lookup: bit-exact against the CPU reference over dims (at and
// off the 16-byte / slice boundaries), vocab sizes, id and output dtypes, strided tables and
// outputs; out-of-range ids (zero rows + device status + raised error); CUDA-graph replay with
// changed ids; 64-bit row offsets on a table larger than 2^31 bytes.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "b12x/embedding.h"
#include "b12x/reference/embedding.h"
#include "b12x/status.h"
#include "formats/scalar.h"
#include "gpu_test_util.h"

namespace b12x {
namespace {

using test::DeviceBuffer;

/// Random Q8_0 rows: finite fp16 scales of varied magnitude, random int8 values.
std::vector<uint8_t> make_table(int64_t vocab, int64_t row_stride_bytes, int64_t dim) {
  auto& g = test::rng();
  std::normal_distribution<float> n(0.f, 1.f);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> h(static_cast<size_t>(vocab * row_stride_bytes), 0xEE);
  for (int64_t r = 0; r < vocab; ++r)
    for (int64_t b = 0; b < dim / 32; ++b) {
      uint8_t* blk = &h[r * row_stride_bytes + b * 34];
      const uint16_t d = fmt::float_to_fp16_bits(n(g) * 0.02f);
      blk[0] = static_cast<uint8_t>(d);
      blk[1] = static_cast<uint8_t>(d >> 8);
      for (int j = 0; j < 32; ++j) blk[2 + j] = static_cast<uint8_t>(byte(g));
    }
  return h;
}

template <typename IdT>
std::vector<IdT> make_ids(int64_t T, int64_t vocab) {
  std::uniform_int_distribution<int64_t> u(0, vocab - 1);
  std::vector<IdT> ids(T);
  for (auto& i : ids) i = static_cast<IdT>(u(test::rng()));
  return ids;
}

struct Case {
  int64_t vocab, dim, T;
  DType id_dtype, out_dtype;
  int64_t weight_extra_blocks = 0;  // row stride = dim + 32*extra values
  int64_t out_extra = 0;            // out row stride = dim + extra values
};

std::string describe(const Case& c) {
  return "vocab=" + std::to_string(c.vocab) + " dim=" + std::to_string(c.dim) +
         " T=" + std::to_string(c.T) + " ids=" + dtype_name(c.id_dtype) +
         " out=" + dtype_name(c.out_dtype) + " wextra=" + std::to_string(c.weight_extra_blocks) +
         " oextra=" + std::to_string(c.out_extra);
}

template <typename IdT>
void run_case(const Case& c, bool one_shot) {
  SCOPED_TRACE(describe(c) + (one_shot ? " one-shot" : " plan"));
  const int64_t wstride_vals = c.dim + 32 * c.weight_extra_blocks;
  const int64_t wstride_bytes = wstride_vals / 32 * 34;
  auto table = make_table(c.vocab, wstride_bytes, c.dim);
  auto ids = make_ids<IdT>(c.T, c.vocab);
  if (c.T > 2) {  // repeated ids and the table edges
    ids[0] = 0;
    ids[1] = static_cast<IdT>(c.vocab - 1);
    ids[2] = ids[0];
  }
  const int64_t ld = c.dim + c.out_extra;
  DeviceBuffer<uint8_t> dw(table.size());
  dw.upload(table);
  DeviceBuffer<IdT> dids(std::max<int64_t>(c.T, 1));
  if (c.T)
    B12X_TEST_CUDA(cudaMemcpy(dids.ptr, ids.data(), c.T * sizeof(IdT), cudaMemcpyHostToDevice));
  DeviceBuffer<uint16_t> dout(std::max<int64_t>(c.T * ld, 1) + 8);
  dout.poison(0xFF);

  TensorRef w = TensorRef::contiguous(dw.ptr, DType::kQ8_0, {c.vocab, c.dim}, 0);
  w.stride[0] = wstride_vals;
  const TensorRef tid = TensorRef::contiguous(dids.ptr, c.id_dtype, {c.T}, 0);
  TensorRef out = TensorRef::contiguous(dout.ptr, c.out_dtype, {c.T, c.dim}, 0);
  out.stride[0] = ld;

  if (one_shot) {
    embedding_q8_0(w, tid, out, nullptr);
  } else {
    EmbeddingCaps caps;
    caps.vocab = c.vocab;
    caps.dim = c.dim;
    caps.max_tokens = c.T + 5;
    caps.id_dtype = c.id_dtype;
    caps.out_dtype = c.out_dtype;
    const EmbeddingPlan plan = plan_embedding(caps);
    DeviceBuffer<uint8_t> scratch(plan.scratch_bytes);
    scratch.poison(0x77);  // run() must reset the status word itself
    const EmbeddingBinding b = bind_embedding(
        plan, TensorRef::contiguous(scratch.ptr, DType::kUInt8, {plan.scratch_bytes}, 0), w, tid,
        out);
    run_embedding(b, nullptr);
    const EmbeddingStatus st = embedding_status(b, nullptr);
    EXPECT_EQ(st.bad_tokens, 0);
    EXPECT_EQ(st.first_bad_token, -1);
  }
  B12X_TEST_CUDA(cudaDeviceSynchronize());
  auto got = dout.download();

  std::vector<uint16_t> want(c.T * ld, 0xFFFF);
  TensorRef hw = TensorRef::contiguous(table.data(), DType::kQ8_0, {c.vocab, c.dim});
  hw.stride[0] = wstride_vals;
  TensorRef hout = TensorRef::contiguous(want.data(), c.out_dtype, {c.T, c.dim});
  hout.stride[0] = ld;
  const EmbeddingStatus rs =
      reference::embedding_q8_0(hw, TensorRef::contiguous(ids.data(), c.id_dtype, {c.T}), hout);
  EXPECT_EQ(rs.bad_tokens, 0);
  for (int64_t t = 0; t < c.T; ++t) {
    for (int64_t j = 0; j < c.dim; ++j)
      ASSERT_EQ(got[t * ld + j], want[t * ld + j]) << "token " << t << " value " << j;
    for (int64_t j = c.dim; j < ld; ++j)
      ASSERT_EQ(got[t * ld + j], 0xFFFF) << "wrote into the row gap, token " << t;
  }
  for (size_t i = c.T * ld; i < got.size(); ++i) ASSERT_EQ(got[i], 0xFFFF) << "wrote past the end";
}

void run_case_any(const Case& c, bool one_shot) {
  if (c.id_dtype == DType::kInt64)
    run_case<int64_t>(c, one_shot);
  else
    run_case<int32_t>(c, one_shot);
}

TEST(EmbeddingGpu, BitExactAcrossShapes) {
  B12X_REQUIRE_GPU();
  for (int64_t dim : {32, 96, 256, 2080, 4096, 5120})
    for (DType idt : {DType::kInt32, DType::kInt64})
      for (DType odt : {DType::kBF16, DType::kFP16}) run_case_any({1000, dim, 37, idt, odt}, false);
  run_case_any({1, 64, 5, DType::kInt32, DType::kBF16}, false);        // vocab 1
  run_case_any({32000, 4096, 1, DType::kInt32, DType::kBF16}, false);  // decode
  run_case_any({32000, 4096, 2048, DType::kInt64, DType::kBF16}, false);
  run_case_any({100, 64, 0, DType::kInt32, DType::kBF16}, false);  // T = 0
}

TEST(EmbeddingGpu, StridedTableAndOutput) {
  B12X_REQUIRE_GPU();
  run_case_any({500, 256, 33, DType::kInt32, DType::kBF16, 1, 0}, false);   // 34-byte row gap
  run_case_any({500, 4096, 33, DType::kInt32, DType::kBF16, 8, 0}, false);  // 16B-aligned gap
  run_case_any({500, 256, 33, DType::kInt64, DType::kFP16, 0, 8}, false);   // out ld = dim + 8
  run_case_any({500, 256, 33, DType::kInt32, DType::kBF16, 0, 1}, false);   // unaligned out rows
  run_case_any({500, 2080, 9, DType::kInt32, DType::kFP16, 3, 3}, false);
}

TEST(EmbeddingGpu, OneShotMatchesReference) {
  B12X_REQUIRE_GPU();
  run_case_any({3000, 1024, 100, DType::kInt64, DType::kBF16}, true);
  run_case_any({3000, 160, 3, DType::kInt32, DType::kFP16}, true);
}

/// Out-of-range ids: zero rows, valid rows still correct, status names the first bad token,
/// embedding_check and the one-shot raise naming the id and the vocab, and the next run with
/// valid ids clears the status.
TEST(EmbeddingGpu, OutOfRangeIds) {
  B12X_REQUIRE_GPU();
  const int64_t vocab = 777, dim = 128, T = 12;
  auto table = make_table(vocab, dim / 32 * 34, dim);
  DeviceBuffer<uint8_t> dw(table.size());
  dw.upload(table);
  std::vector<int64_t> ids = make_ids<int64_t>(T, vocab);
  ids[3] = vocab;  // first bad token
  ids[7] = -1;
  ids[9] = int64_t(1) << 40;
  DeviceBuffer<int64_t> dids(T);
  dids.upload(ids);
  DeviceBuffer<uint16_t> dout(T * dim);
  dout.poison(0xFF);
  const TensorRef w = TensorRef::contiguous(dw.ptr, DType::kQ8_0, {vocab, dim}, 0);
  const TensorRef tid = TensorRef::contiguous(dids.ptr, DType::kInt64, {T}, 0);
  const TensorRef out = TensorRef::contiguous(dout.ptr, DType::kBF16, {T, dim}, 0);
  EmbeddingCaps caps{vocab, dim, T, DType::kInt64, DType::kBF16, 0};
  const EmbeddingPlan plan = plan_embedding(caps);
  DeviceBuffer<uint8_t> scratch(plan.scratch_bytes);
  const EmbeddingBinding b = bind_embedding(
      plan, TensorRef::contiguous(scratch.ptr, DType::kUInt8, {plan.scratch_bytes}, 0), w, tid,
      out);
  run_embedding(b, nullptr);
  const EmbeddingStatus st = embedding_status(b, nullptr);
  EXPECT_EQ(st.bad_tokens, 3);
  EXPECT_EQ(st.first_bad_token, 3);
  EXPECT_EQ(st.first_bad_id, vocab);
  try {
    embedding_check(b, nullptr);
    ADD_FAILURE() << "embedding_check did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::kInvalidArgument);
    const std::string m = e.what();
    EXPECT_NE(m.find("ids[3]=777"), std::string::npos) << m;
    EXPECT_NE(m.find("vocab=777"), std::string::npos) << m;
  }
  auto got = dout.download();
  std::vector<uint16_t> want(T * dim);
  const EmbeddingStatus rs =
      reference::embedding_q8_0(TensorRef::contiguous(table.data(), DType::kQ8_0, {vocab, dim}),
                                TensorRef::contiguous(ids.data(), DType::kInt64, {T}),
                                TensorRef::contiguous(want.data(), DType::kBF16, {T, dim}));
  EXPECT_EQ(rs.bad_tokens, 3);
  EXPECT_EQ(rs.first_bad_token, 3);
  for (int64_t i = 0; i < T * dim; ++i) ASSERT_EQ(got[i], want[i]) << i;
  for (int64_t j = 0; j < dim; ++j) ASSERT_EQ(got[7 * dim + j], 0) << j;

  // One-shot raises too.
  try {
    embedding_q8_0(w, tid, out, nullptr);
    ADD_FAILURE() << "embedding_q8_0 did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of range for vocab=777"), std::string::npos)
        << e.what();
  }
  // Valid ids again: the status is reset by the run.
  ids[3] = 1;
  ids[7] = 2;
  ids[9] = 3;
  dids.upload(ids);
  run_embedding(b, nullptr);
  EXPECT_EQ(embedding_status(b, nullptr).bad_tokens, 0);
  EXPECT_NO_THROW(embedding_check(b, nullptr));
}

/// Capture run_embedding into a graph; replay with new ids (incl. an out-of-range one) written
/// into the same buffer; every replay matches the reference and reports its own status.
TEST(EmbeddingGpu, GraphReplayWithChangedIds) {
  B12X_REQUIRE_GPU();
  const int64_t vocab = 5000, dim = 4096, T = 64;
  auto table = make_table(vocab, dim / 32 * 34, dim);
  DeviceBuffer<uint8_t> dw(table.size());
  dw.upload(table);
  DeviceBuffer<int32_t> dids(T);
  DeviceBuffer<uint16_t> dout(T * dim);
  const TensorRef w = TensorRef::contiguous(dw.ptr, DType::kQ8_0, {vocab, dim}, 0);
  const TensorRef tid = TensorRef::contiguous(dids.ptr, DType::kInt32, {T}, 0);
  const TensorRef out = TensorRef::contiguous(dout.ptr, DType::kBF16, {T, dim}, 0);
  const EmbeddingPlan plan = plan_embedding({vocab, dim, T, DType::kInt32, DType::kBF16, 0});
  DeviceBuffer<uint8_t> scratch(plan.scratch_bytes);
  const EmbeddingBinding b = bind_embedding(
      plan, TensorRef::contiguous(scratch.ptr, DType::kUInt8, {plan.scratch_bytes}, 0), w, tid,
      out);
  cudaStream_t s;
  B12X_TEST_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto ids = make_ids<int32_t>(T, vocab);
  dids.upload(ids);
  run_embedding(b, reinterpret_cast<Stream>(s));
  B12X_TEST_CUDA(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  B12X_TEST_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  run_embedding(b, reinterpret_cast<Stream>(s));
  B12X_TEST_CUDA(cudaStreamEndCapture(s, &g));
  B12X_TEST_CUDA(cudaGraphInstantiate(&ge, g, 0));
  for (int rep = 0; rep < 4; ++rep) {
    ids = make_ids<int32_t>(T, vocab);
    if (rep == 2) ids[17] = -5;
    dids.upload(ids);
    dout.poison(0xFF);
    B12X_TEST_CUDA(cudaGraphLaunch(ge, s));
    const EmbeddingStatus st = embedding_status(b, reinterpret_cast<Stream>(s));
    EXPECT_EQ(st.bad_tokens, rep == 2 ? 1 : 0) << rep;
    if (rep == 2) EXPECT_EQ(st.first_bad_id, -5);
    std::vector<uint16_t> want(T * dim);
    reference::embedding_q8_0(TensorRef::contiguous(table.data(), DType::kQ8_0, {vocab, dim}),
                              TensorRef::contiguous(ids.data(), DType::kInt32, {T}),
                              TensorRef::contiguous(want.data(), DType::kBF16, {T, dim}));
    auto got = dout.download();
    for (int64_t i = 0; i < T * dim; ++i) ASSERT_EQ(got[i], want[i]) << "rep " << rep << " " << i;
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
}

/// A table of > 2^31 bytes (vocab * 4352 B): rows near the end must be read at the right 64-bit
/// offset. Only the rows the ids touch are initialised; the reference runs on a compact copy.
TEST(EmbeddingGpu, LargeTable64BitOffsets) {
  B12X_REQUIRE_GPU();
  const int64_t dim = 4096, row = dim / 32 * 34, vocab = 600000;  // 2.61 GB
  ASSERT_GT(vocab * row, int64_t(1) << 31);
  size_t free_b = 0, total_b = 0;
  B12X_TEST_CUDA(cudaMemGetInfo(&free_b, &total_b));
  if (free_b < static_cast<size_t>(vocab * row) + (size_t(1) << 30))
    GTEST_SKIP() << "not enough device memory for a " << vocab * row << "-byte table";
  DeviceBuffer<uint8_t> dw(vocab * row);
  B12X_TEST_CUDA(cudaMemset(dw.ptr, 0, dw.bytes()));
  std::vector<int64_t> ids = {vocab - 1, 0, 493447, vocab - 2, 493448, 1, 599999, 527000};
  const int64_t T = static_cast<int64_t>(ids.size());
  auto compact = make_table(T, row, dim);  // row i of `compact` is written at ids[i]
  for (int64_t i = 0; i < T; ++i)
    if (!(i == 6))  // ids[6] repeats ids[0]: keep the first row's contents
      B12X_TEST_CUDA(
          cudaMemcpy(dw.ptr + ids[i] * row, &compact[i * row], row, cudaMemcpyHostToDevice));
  std::vector<int64_t> cids(T);
  for (int64_t i = 0; i < T; ++i) cids[i] = i == 6 ? 0 : i;
  DeviceBuffer<int64_t> dids(T);
  dids.upload(ids);
  DeviceBuffer<uint16_t> dout(T * dim);
  dout.poison(0xFF);
  embedding_q8_0(TensorRef::contiguous(dw.ptr, DType::kQ8_0, {vocab, dim}, 0),
                 TensorRef::contiguous(dids.ptr, DType::kInt64, {T}, 0),
                 TensorRef::contiguous(dout.ptr, DType::kBF16, {T, dim}, 0), nullptr);
  std::vector<uint16_t> want(T * dim);
  reference::embedding_q8_0(TensorRef::contiguous(compact.data(), DType::kQ8_0, {T, dim}),
                            TensorRef::contiguous(cids.data(), DType::kInt64, {T}),
                            TensorRef::contiguous(want.data(), DType::kBF16, {T, dim}));
  auto got = dout.download();
  for (int64_t i = 0; i < T * dim; ++i) ASSERT_EQ(got[i], want[i]) << "token " << i / dim;
}

/// Small cases for compute-sanitizer: unaligned rows (dim 96), a partial last slice, strided
/// output, and out-of-range ids (which must not be dereferenced).
TEST(EmbeddingGpuSanitize, SmallCasesAndBadIds) {
  B12X_REQUIRE_GPU();
  run_case_any({50, 96, 7, DType::kInt32, DType::kBF16, 1, 1}, false);
  run_case_any({50, 2080, 3, DType::kInt64, DType::kFP16}, true);
  const int64_t vocab = 20, dim = 64, T = 4;
  auto table = make_table(vocab, dim / 32 * 34, dim);
  DeviceBuffer<uint8_t> dw(table.size());  // exactly the table: any OOB read is reported
  dw.upload(table);
  DeviceBuffer<int32_t> dids(T);
  dids.upload({3, static_cast<int32_t>(vocab), -7, 2147483647});
  DeviceBuffer<uint16_t> dout(T * dim);
  EXPECT_THROW(embedding_q8_0(TensorRef::contiguous(dw.ptr, DType::kQ8_0, {vocab, dim}, 0),
                              TensorRef::contiguous(dids.ptr, DType::kInt32, {T}, 0),
                              TensorRef::contiguous(dout.ptr, DType::kBF16, {T, dim}, 0), nullptr),
               Error);
  auto got = dout.download();
  for (int64_t i = dim; i < T * dim; ++i) ASSERT_EQ(got[i], 0) << i;
}

TEST(EmbeddingGpu, BindRejectsMismatches) {
  B12X_REQUIRE_GPU();
  DeviceBuffer<uint8_t> buf(1 << 16);
  const EmbeddingPlan plan = plan_embedding({100, 64, 8, DType::kInt32, DType::kBF16, 0});
  const TensorRef scratch = TensorRef::contiguous(buf.ptr, DType::kUInt8, {16}, 0);
  const TensorRef w = TensorRef::contiguous(buf.ptr, DType::kQ8_0, {100, 64}, 0);
  const TensorRef out = TensorRef::contiguous(buf.ptr, DType::kBF16, {9, 64}, 0);
  // More tokens than planned.
  EXPECT_THROW(
      bind_embedding(plan, scratch, w, TensorRef::contiguous(buf.ptr, DType::kInt32, {9}, 0), out),
      Error);
  // Wrong id dtype.
  EXPECT_THROW(
      bind_embedding(plan, scratch, w, TensorRef::contiguous(buf.ptr, DType::kInt64, {4}, 0),
                     TensorRef::contiguous(buf.ptr, DType::kBF16, {4, 64}, 0)),
      Error);
  // Scratch too small.
  EXPECT_THROW(bind_embedding(plan, TensorRef::contiguous(buf.ptr, DType::kUInt8, {8}, 0), w,
                              TensorRef::contiguous(buf.ptr, DType::kInt32, {4}, 0),
                              TensorRef::contiguous(buf.ptr, DType::kBF16, {4, 64}, 0)),
               Error);
}

}  // namespace
}  // namespace b12x
