// Q8_0 embedding: plan / bind / run, the device status read-back and the one-shot call.
#include "b12x/embedding.h"

#include <cuda_runtime.h>

#include <limits>
#include <mutex>
#include <vector>

#include "b12x/runtime.h"
#include "b12x/status.h"
#include "core/cuda_check.h"
#include "embedding/embedding_launch.h"

namespace b12x {

namespace {

constexpr int64_t kQ8Block = 32, kQ8Bytes = 34;

void check_caps(const EmbeddingCaps& c, const char* op) {
  B12X_CHECK_ARG(c.vocab >= 1, op, ": vocab=", c.vocab, " (must be >= 1)");
  B12X_CHECK_ARG(c.dim > 0 && c.dim % kQ8Block == 0, op, ": dim=", c.dim,
                 " is not a positive multiple of 32 (Q8_0 blocks hold 32 values)");
  B12X_CHECK_ARG(c.max_tokens >= 0 && c.max_tokens <= std::numeric_limits<int32_t>::max(), op,
                 ": max_tokens=", c.max_tokens, " outside [0, 2^31-1]");
  B12X_CHECK_ARG(c.id_dtype == DType::kInt32 || c.id_dtype == DType::kInt64, op,
                 ": id_dtype=", dtype_name(c.id_dtype), " (supported: int32, int64)");
  B12X_CHECK_ARG(c.out_dtype == DType::kBF16 || c.out_dtype == DType::kFP16, op,
                 ": out_dtype=", dtype_name(c.out_dtype), " (supported: bf16, fp16)");
  B12X_CHECK_ARG(c.device >= 0, op, ": device=", c.device, " (must be a CUDA device ordinal)");
}

/// Validates weight/ids/out against caps; fills the pointer part of a binding.
EmbeddingBinding bind_tensors(const EmbeddingCaps& caps, const TensorRef& weight,
                              const TensorRef& ids, const TensorRef& out, const char* op) {
  EmbeddingBinding b;
  b.caps = caps;
  const int64_t row_bytes = caps.dim / kQ8Block * kQ8Bytes;
  check_defined(weight, op, "weight");
  check_dtype(weight, op, "weight", {DType::kQ8_0, DType::kUInt8});
  check_ndim(weight, op, "weight", 2);
  check_device(weight, op, "weight", caps.device);
  if (weight.dtype == DType::kQ8_0)
    check_shape(weight, op, "weight", {caps.vocab, caps.dim});
  else
    check_shape(weight, op, "weight", {caps.vocab, row_bytes});
  check_inner_contiguous(weight, op, "weight");
  B12X_CHECK_ARG(weight.data != nullptr, op, ": weight is a null pointer");
  b.row_stride_bytes = caps.vocab > 1 ? weight.byte_stride(0) : row_bytes;
  B12X_CHECK_ARG(b.row_stride_bytes >= row_bytes, op, ": weight row stride ", b.row_stride_bytes,
                 " bytes is smaller than a row (", row_bytes, " bytes)");
  check_aligned(weight, op, "weight", 2);
  b.weight = static_cast<const uint8_t*>(weight.data);

  check_defined(ids, op, "ids");
  check_dtype(ids, op, "ids", {caps.id_dtype});
  check_ndim(ids, op, "ids", 1);
  check_contiguous(ids, op, "ids");
  check_device(ids, op, "ids", caps.device);
  B12X_CHECK_ARG(ids.shape[0] <= caps.max_tokens, op, ": ids has ", ids.shape[0],
                 " tokens, more than the planned max_tokens=", caps.max_tokens);
  check_aligned(ids, op, "ids", caps.id_dtype == DType::kInt64 ? 8 : 4);
  b.ids = ids.data;
  b.num_tokens = ids.shape[0];

  check_defined(out, op, "out");
  check_dtype(out, op, "out", {caps.out_dtype});
  check_shape(out, op, "out", {b.num_tokens, caps.dim});
  check_inner_contiguous(out, op, "out");
  check_device(out, op, "out", caps.device);
  check_aligned(out, op, "out", 2);
  b.out = out.data;
  b.out_row_stride = b.num_tokens > 1 ? out.stride[0] : caps.dim;
  B12X_CHECK_ARG(b.out_row_stride >= caps.dim, op, ": out row stride ", b.out_row_stride,
                 " is smaller than dim=", caps.dim);
  return b;
}

}  // namespace

EmbeddingPlan plan_embedding(const EmbeddingCaps& caps) {
  const char* op = "plan_embedding";
  check_caps(caps, op);
  require_compiled_arch(caps.device, op);
  refuse_during_capture(nullptr, op);  // no stream in the caps: the legacy-stream query
  EmbeddingPlan p;
  p.caps = caps;
  p.scratch_bytes = embedding::status_flag_bytes(caps.max_tokens);  // one status byte per token
  // Kernel signature (warm-up / freeze, b12x/runtime.h): one kernel per id / output dtype.
  detail::resolve_kernels(op, caps.device,
                          std::string("embedding.q8_0 ids=") + dtype_name(caps.id_dtype) +
                              " out=" + dtype_name(caps.out_dtype),
                          "vocab=" + std::to_string(caps.vocab) +
                              " dim=" + std::to_string(caps.dim) +
                              " max_tokens=" + std::to_string(caps.max_tokens));
  return p;
}

EmbeddingBinding bind_embedding(const EmbeddingPlan& plan, const TensorRef& scratch,
                                const TensorRef& weight, const TensorRef& ids,
                                const TensorRef& out) {
  const char* op = "bind_embedding";
  B12X_CHECK_ARG(plan.scratch_bytes > 0, op, ": plan is empty (create it with plan_embedding)");
  EmbeddingBinding b = bind_tensors(plan.caps, weight, ids, out, op);
  check_defined(scratch, op, "scratch");
  B12X_CHECK_ARG(scratch.data != nullptr, op, ": scratch is a null pointer");
  check_contiguous(scratch, op, "scratch");
  check_device(scratch, op, "scratch", plan.caps.device);
  check_aligned(scratch, op, "scratch", 16);
  B12X_CHECK_ARG(scratch.span_bytes() >= plan.scratch_bytes, op, ": scratch holds ",
                 scratch.span_bytes(), " bytes, the plan needs ", plan.scratch_bytes);
  b.status = scratch.data;  // per-token status flags
  return b;
}

void run_embedding(const EmbeddingBinding& b, Stream stream) {
  B12X_CHECK_ARG(b.status != nullptr,
                 "run_embedding: binding is empty (create it with bind_embedding)");
  embedding::launch_q8_0_embedding(b.weight, b.row_stride_bytes, b.caps.vocab, b.caps.dim, b.ids,
                                   b.caps.id_dtype, b.num_tokens, b.out, b.caps.out_dtype,
                                   b.out_row_stride, static_cast<uint8_t*>(b.status), stream);
}

EmbeddingStatus embedding_status(const EmbeddingBinding& b, Stream stream) {
  const char* op = "embedding_status";
  B12X_CHECK_ARG(b.status != nullptr, op, ": binding is empty (create it with bind_embedding)");
  refuse_during_capture(stream, op);
  auto s = reinterpret_cast<cudaStream_t>(stream);
  EmbeddingStatus st;
  if (b.num_tokens == 0) return st;
  std::vector<uint8_t> flags(b.num_tokens);
  B12X_CUDA_CHECK(cudaMemcpyAsync(flags.data(), b.status, flags.size(), cudaMemcpyDeviceToHost, s));
  B12X_CUDA_CHECK(cudaStreamSynchronize(s));
  for (int64_t t = 0; t < b.num_tokens; ++t) {
    B12X_ASSERT(flags[t] <= 1, "status flag of token ", t, " is ", int(flags[t]),
                " (the binding's scratch was overwritten?)");
    if (flags[t] != 0 && st.bad_tokens++ == 0) st.first_bad_token = t;
  }
  if (st.bad_tokens != 0) {
    const int es = b.caps.id_dtype == DType::kInt64 ? 8 : 4;
    int64_t id64 = 0;
    int32_t id32 = 0;
    void* dst = es == 8 ? static_cast<void*>(&id64) : static_cast<void*>(&id32);
    B12X_CUDA_CHECK(cudaMemcpyAsync(dst,
                                    static_cast<const uint8_t*>(b.ids) + st.first_bad_token * es,
                                    es, cudaMemcpyDeviceToHost, s));
    B12X_CUDA_CHECK(cudaStreamSynchronize(s));
    st.first_bad_id = es == 8 ? id64 : id32;
  }
  return st;
}

void embedding_check(const EmbeddingBinding& b, Stream stream) {
  const EmbeddingStatus st = embedding_status(b, stream);
  B12X_CHECK_ARG(st.bad_tokens == 0, "embedding_q8_0: ids[", st.first_bad_token,
                 "]=", st.first_bad_id, " is out of range for vocab=", b.caps.vocab,
                 " (valid ids: 0..", b.caps.vocab - 1, "; ", st.bad_tokens,
                 " token(s) out of range, their rows were written as zeros)");
}

void embedding_q8_0(const TensorRef& weight, const TensorRef& ids, const TensorRef& out,
                    Stream stream) {
  const char* op = "embedding_q8_0";
  check_defined(weight, op, "weight");
  check_defined(ids, op, "ids");
  check_ndim(weight, op, "weight", 2);
  check_ndim(ids, op, "ids", 1);
  B12X_CHECK_ARG(weight.device >= 0, op, ": weight must be on a CUDA device, got ",
                 weight.describe());
  EmbeddingCaps caps;
  caps.vocab = weight.shape[0];
  caps.dim =
      weight.dtype == DType::kUInt8 ? weight.shape[1] / kQ8Bytes * kQ8Block : weight.shape[1];
  if (weight.dtype == DType::kUInt8)
    B12X_CHECK_ARG(weight.shape[1] % kQ8Bytes == 0, op, ": weight (uint8) row of ", weight.shape[1],
                   " bytes is not a whole number of 34-byte Q8_0 blocks");
  caps.max_tokens = ids.shape[0];
  caps.id_dtype = ids.dtype;
  caps.out_dtype = out.dtype;
  caps.device = weight.device;
  check_caps(caps, op);
  // Validate the tensors before touching the device.
  bind_tensors(caps, weight, ids, out, op);
  refuse_during_capture(stream, op);
  require_compiled_arch(caps.device, op);
  const EmbeddingPlan plan = plan_embedding(caps);

  // Per-device status flags owned by the library, grown on demand (the previous one-shot has
  // completed: it synchronised); the mutex covers run + read-back.
  struct Flags {
    void* ptr = nullptr;
    int64_t bytes = 0;
  };
  static std::mutex mu;
  static std::vector<Flags> flags;
  std::lock_guard<std::mutex> lock(mu);
  if (flags.size() <= static_cast<size_t>(caps.device)) flags.resize(caps.device + 1);
  Flags& f = flags[caps.device];
  if (f.bytes < plan.scratch_bytes) {
    int prev = 0;
    B12X_CUDA_CHECK(cudaGetDevice(&prev));
    B12X_CUDA_CHECK(cudaSetDevice(caps.device));
    if (f.ptr != nullptr) cudaFree(f.ptr);
    f = Flags{};
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, plan.scratch_bytes);
    cudaSetDevice(prev);
    B12X_CUDA_CHECK(e);
    f = Flags{p, plan.scratch_bytes};
  }
  const TensorRef scratch =
      TensorRef::contiguous(f.ptr, DType::kUInt8, {plan.scratch_bytes}, caps.device);
  const EmbeddingBinding b = bind_embedding(plan, scratch, weight, ids, out);
  run_embedding(b, stream);
  embedding_check(b, stream);
}

}  // namespace b12x
