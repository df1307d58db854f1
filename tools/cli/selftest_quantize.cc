// Selftest cases for the activation quantisers: the CPU reference against the block codecs of
// formats/block.h (CPU) and each GPU quantiser against the reference, byte for byte (GPU).
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "b12x/quantize.h"
#include "b12x/reference/quantize.h"
#include "b12x/status.h"
#include "formats/block.h"
#include "formats/scalar.h"
#include "formats/swizzle.h"
#include "selftest.h"

namespace {
using b12x::DType;
using b12x::TensorRef;
using b12x::cli::SelftestResult;
namespace fmt = b12x::fmt;

constexpr int64_t kM = 37, kK = 512;

std::vector<uint16_t> input(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> ud(-8.f, 8.f);
  std::vector<uint16_t> h(kM * kK);
  for (int64_t b = 0; b < kM * kK / 32; ++b) {
    const float mag = std::exp2(ud(rng));
    for (int j = 0; j < 32; ++j) h[b * 32 + j] = fmt::float_to_bf16_bits(nd(rng) * mag);
  }
  return h;
}

TensorRef host_u8(std::vector<uint8_t>& v) {
  return TensorRef::contiguous(v.data(), DType::kUInt8, {static_cast<int64_t>(v.size())});
}

B12X_SELFTEST("quantize", "reference nvfp4/mxfp8 == block codecs (bf16 37x512)", false) {
  try {
    auto h = input(11);
    std::vector<float> x(h.size());
    for (size_t i = 0; i < h.size(); ++i) x[i] = fmt::bf16_bits_to_float(h[i]);
    const TensorRef tx = TensorRef::contiguous(h.data(), DType::kBF16, {kM, kK});
    int64_t bad = 0;
    // NVFP4 with gs = 448*6/amax.
    float amax = 0.f;
    for (float v : x) amax = fmt::amax_update(amax, v);
    const float gs = 448.f * 6.f / amax;
    std::vector<uint8_t> packed(kM * kK / 2), swz(fmt::swizzled_scale_bytes(kM, kK / 16));
    b12x::reference::quantize_nvfp4(tx, gs, host_u8(packed), host_u8(swz));
    for (int64_t r = 0; r < kM; ++r)
      for (int64_t c = 0; c < kK / 16; ++c) {
        uint8_t p[8];
        const uint8_t sf = fmt::nvfp4_encode_block(&x[r * kK + c * 16], gs, p);
        bad += sf != swz[fmt::swizzled_scale_offset(r, c, kK / 16)];
        bad += std::memcmp(p, &packed[r * kK / 2 + c * 8], 8) != 0;
      }
    // MXFP8 (row-major scales).
    std::vector<uint8_t> values(kM * kK), rows(kM * kK / 32);
    b12x::reference::quantize_mxfp8(tx, host_u8(values), host_u8(rows), TensorRef{});
    for (int64_t b = 0; b < kM * kK / 32; ++b) {
      uint8_t v[32];
      const uint8_t s = fmt::mxfp8_encode_block(&x[b * 32], fmt::MxZeroBlockScale::kOne, v);
      bad += s != rows[b];
      bad += std::memcmp(v, &values[b * 32], 32) != 0;
    }
    return {bad == 0, std::to_string(bad) + " mismatching blocks of " +
                          std::to_string(kM * kK / 16 + kM * kK / 32)};
  } catch (const std::exception& e) {
    return {false, e.what()};
  }
}

/// One GPU quantiser vs the reference; returns mismatching bytes (or throws).
int64_t gpu_vs_reference(int which, const std::vector<uint16_t>& h, std::string& err) {
  auto hx = h;
  const TensorRef tx = TensorRef::contiguous(hx.data(), DType::kBF16, {kM, kK});
  std::vector<uint8_t> want_v, want_s;
  int64_t vbytes = 0, sbytes = 0;
  float scalar = 1.f;
  switch (which) {
    case 0:
      vbytes = kM * kK / 2;
      sbytes = fmt::swizzled_scale_bytes(kM, kK / 16);
      scalar = 0.5f;
      break;
    case 1:
      vbytes = kM * kK;
      sbytes = fmt::swizzled_scale_bytes(kM, kK / 32);
      break;
    case 2:
      vbytes = kM * kK / 2;
      sbytes = fmt::swizzled_scale_bytes(kM, kK / 32);
      break;
    case 3:
      vbytes = kM * kK;
      sbytes = kM * kK / 128 * 4;
      break;
    default:
      vbytes = kM * kK;
      sbytes = 0;
      scalar = 0.02f;
      break;
  }
  want_v.resize(vbytes);
  want_s.resize(sbytes);
  const TensorRef hv = host_u8(want_v);
  const TensorRef hs = TensorRef::contiguous(want_s.data(), DType::kUInt8, {sbytes});
  const TensorRef hf = TensorRef::contiguous(want_s.data(), DType::kFP32, {sbytes / 4});
  switch (which) {
    case 0:
      b12x::reference::quantize_nvfp4(tx, scalar, hv, hs);
      break;
    case 1:
      b12x::reference::quantize_mxfp8(tx, hv, TensorRef{}, hs);
      break;
    case 2:
      b12x::reference::quantize_mxfp4(tx, hv, hs);
      break;
    case 3:
      b12x::reference::quantize_fp8_group128(tx, hv, hf);
      break;
    default:
      b12x::reference::quantize_fp8_tensor(tx, scalar, hv);
      break;
  }
  void *dx = nullptr, *dv = nullptr, *ds = nullptr, *dsc = nullptr;
  cudaMalloc(&dx, h.size() * 2);
  cudaMalloc(&dv, vbytes);
  cudaMalloc(&ds, sbytes + 16);
  cudaMalloc(&dsc, 4);
  int64_t bad = -1;
  if (dx && dv && ds && dsc) {
    cudaMemcpy(dx, h.data(), h.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dsc, &scalar, 4, cudaMemcpyHostToDevice);
    cudaMemset(dv, 0xCD, vbytes);
    cudaMemset(ds, 0xCD, sbytes + 16);
    const TensorRef x = TensorRef::contiguous(dx, DType::kBF16, {kM, kK}, 0);
    const TensorRef v = TensorRef::contiguous(dv, DType::kUInt8, {vbytes}, 0);
    const TensorRef s = TensorRef::contiguous(ds, DType::kUInt8, {sbytes}, 0);
    const TensorRef f = TensorRef::contiguous(ds, DType::kFP32, {sbytes / 4}, 0);
    const TensorRef sc = TensorRef::contiguous(dsc, DType::kFP32, {1}, 0);
    try {
      switch (which) {
        case 0:
          b12x::quantize_nvfp4(x, sc, v, s, nullptr);
          break;
        case 1:
          b12x::quantize_mxfp8(x, v, TensorRef{}, s, nullptr);
          break;
        case 2:
          b12x::quantize_mxfp4(x, v, s, nullptr);
          break;
        case 3:
          b12x::quantize_fp8_group128(x, v, f, nullptr);
          break;
        default:
          b12x::quantize_fp8_tensor(x, sc, v, nullptr);
          break;
      }
      std::vector<uint8_t> got_v(vbytes), got_s(sbytes);
      if (cudaMemcpy(got_v.data(), dv, vbytes, cudaMemcpyDeviceToHost) != cudaSuccess ||
          cudaMemcpy(got_s.data(), ds, sbytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
        err = "CUDA copy failed";
      } else {
        bad = 0;
        for (int64_t i = 0; i < vbytes; ++i) bad += got_v[i] != want_v[i];
        for (int64_t i = 0; i < sbytes; ++i) bad += got_s[i] != want_s[i];
      }
    } catch (const std::exception& e) {
      err = e.what();
    }
  } else {
    err = "cudaMalloc failed";
  }
  cudaFree(dx);
  cudaFree(dv);
  cudaFree(ds);
  cudaFree(dsc);
  return bad;
}

B12X_SELFTEST("quantize", "gpu nvfp4/mxfp8/mxfp4/fp8 1x128/fp8 tensor == reference (37x512)",
              true) {
  const char* names[] = {"nvfp4", "mxfp8", "mxfp4", "fp8_group128", "fp8_tensor"};
  auto h = input(23);
  std::string detail;
  bool ok = true;
  for (int w = 0; w < 5; ++w) {
    std::string err;
    const int64_t bad = gpu_vs_reference(w, h, err);
    if (bad != 0) ok = false;
    detail += std::string(names[w]) + (bad < 0 ? " error: " + err : " " + std::to_string(bad)) +
              (w < 4 ? ", " : "");
  }
  return {ok, detail + " mismatching bytes"};
}

}  // namespace
