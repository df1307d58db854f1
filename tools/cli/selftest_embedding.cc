// Selftest cases for the Q8_0 embedding: the CPU reference against the GGML Q8_0 decoder (CPU)
// and the GPU lookup against the reference, including an out-of-range id (GPU).
#include <cuda_runtime.h>

#include <random>
#include <string>
#include <vector>

#include "b12x/embedding.h"
#include "b12x/reference/embedding.h"
#include "b12x/status.h"
#include "formats/ggml.h"
#include "formats/scalar.h"
#include "selftest.h"

namespace {
using b12x::DType;
using b12x::TensorRef;
using b12x::cli::SelftestResult;
namespace fmt = b12x::fmt;

constexpr int64_t kVocab = 1000, kDim = 1024, kRow = kDim / 32 * 34, kT = 19;

std::vector<uint8_t> table() {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 0.05f);
  std::vector<float> x(kDim);
  std::vector<uint8_t> t(kVocab * kRow);
  for (int64_t r = 0; r < kVocab; ++r) {
    for (auto& v : x) v = nd(rng);
    for (int64_t b = 0; b < kDim / 32; ++b)
      fmt::ggml::q8_0_encode_block(&x[b * 32], &t[r * kRow + b * 34]);
  }
  return t;
}

std::vector<int32_t> ids() {
  std::mt19937 rng(9);
  std::uniform_int_distribution<int32_t> u(0, kVocab - 1);
  std::vector<int32_t> v(kT);
  for (auto& i : v) i = u(rng);
  return v;
}

B12X_SELFTEST("embedding", "reference q8_0 lookup == ggml decode (1000x1024, 19 ids)", false) {
  try {
    auto t = table();
    auto id = ids();
    id[3] = static_cast<int32_t>(kVocab);  // out of range: zero row + status
    std::vector<uint16_t> out(kT * kDim);
    const b12x::EmbeddingStatus st = b12x::reference::embedding_q8_0(
        TensorRef::contiguous(t.data(), DType::kQ8_0, {kVocab, kDim}),
        TensorRef::contiguous(id.data(), DType::kInt32, {kT}),
        TensorRef::contiguous(out.data(), DType::kBF16, {kT, kDim}));
    int64_t bad = 0;
    float vals[32];
    for (int64_t k = 0; k < kT; ++k)
      for (int64_t b = 0; b < kDim / 32; ++b) {
        if (k == 3) {
          for (int j = 0; j < 32; ++j) bad += out[k * kDim + b * 32 + j] != 0;
          continue;
        }
        fmt::ggml::q8_0_decode_block(&t[id[k] * kRow + b * 34], vals);
        for (int j = 0; j < 32; ++j)
          bad += out[k * kDim + b * 32 + j] != fmt::float_to_bf16_bits(vals[j]);
      }
    const bool status_ok =
        st.bad_tokens == 1 && st.first_bad_token == 3 && st.first_bad_id == kVocab;
    return {bad == 0 && status_ok,
            std::to_string(bad) + " mismatching values; status " + (status_ok ? "ok" : "wrong")};
  } catch (const std::exception& e) {
    return {false, e.what()};
  }
}

B12X_SELFTEST("embedding", "gpu q8_0 lookup == reference; out-of-range id raises", true) {
  auto t = table();
  auto id = ids();
  std::vector<uint16_t> want(kT * kDim), got(kT * kDim);
  b12x::reference::embedding_q8_0(TensorRef::contiguous(t.data(), DType::kQ8_0, {kVocab, kDim}),
                                  TensorRef::contiguous(id.data(), DType::kInt32, {kT}),
                                  TensorRef::contiguous(want.data(), DType::kBF16, {kT, kDim}));
  void *dw = nullptr, *di = nullptr, *dout = nullptr;
  cudaMalloc(&dw, t.size());
  cudaMalloc(&di, kT * 4);
  cudaMalloc(&dout, kT * kDim * 2);
  std::string detail;
  bool ok = false;
  if (dw && di && dout) {
    cudaMemcpy(dw, t.data(), t.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(di, id.data(), kT * 4, cudaMemcpyHostToDevice);
    cudaMemset(dout, 0xFF, kT * kDim * 2);
    const TensorRef w = TensorRef::contiguous(dw, DType::kQ8_0, {kVocab, kDim}, 0);
    const TensorRef ti = TensorRef::contiguous(di, DType::kInt32, {kT}, 0);
    const TensorRef o = TensorRef::contiguous(dout, DType::kBF16, {kT, kDim}, 0);
    try {
      b12x::embedding_q8_0(w, ti, o, nullptr);
      cudaMemcpy(got.data(), dout, got.size() * 2, cudaMemcpyDeviceToHost);
      int64_t bad = 0;
      for (size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i];
      detail = std::to_string(bad) + " mismatching values";
      ok = bad == 0;
      const int32_t oob = -1;
      cudaMemcpy(di, &oob, 4, cudaMemcpyHostToDevice);
      bool raised = false;
      try {
        b12x::embedding_q8_0(w, ti, o, nullptr);
      } catch (const b12x::Error& e) {
        raised = std::string(e.what()).find("ids[0]=-1") != std::string::npos;
      }
      detail += raised ? "; bad id raised" : "; bad id NOT raised";
      ok = ok && raised;
    } catch (const std::exception& e) {
      detail = e.what();
    }
  } else {
    detail = "cudaMalloc failed";
  }
  cudaFree(dw);
  cudaFree(di);
  cudaFree(dout);
  return {ok, detail};
}

}  // namespace
