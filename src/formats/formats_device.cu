// Device self-check of the shared codecs (b12x::formats::check_device_codecs), used by
// `b12x selftest`: the scalar encoders compiled for the device against the hardware `cvt`
// instructions on a strided sample of float32 bit patterns, and the block codecs run in a kernel
// against the host implementation (bit-identical). The exhaustive 2^32 version is the GPU test
// tests/gpu/test_formats_cvt.cu.
#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include "b12x/formats.h"
#include "b12x/runtime.h"
#include "core/cuda_check.h"
#include "formats/block.h"
#include "formats/ggml.h"
#include "formats/scalar.h"

#if defined(__CUDA_ARCH__) &&                                               \
    ((defined(__CUDA_ARCH_SPECIFIC__) && __CUDA_ARCH_SPECIFIC__ >= 1000) || \
     (defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && __CUDA_ARCH_FAMILY_SPECIFIC__ >= 1000))
#define B12X_FORMATS_HAS_FP4_CVT 1
#else
#define B12X_FORMATS_HAS_FP4_CVT 0
#endif

namespace b12x::formats {
namespace {

namespace f = b12x::fmt;

enum CvtKind { kE4m3 = 0, kE5m2, kBf16, kF16, kE2m1, kUe8m0Rz, kUe8m0Rp, kNumKinds };
const char* const kKindNames[kNumKinds] = {"e4m3x2.satfinite", "e5m2x2.satfinite", "bf16x2.rn",
                                           "f16x2.rn",         "e2m1x2.satfinite", "ue8m0x2.rz",
                                           "ue8m0x2.rp"};

struct CvtCounters {
  unsigned long long checked[kNumKinds];
  unsigned long long bad[kNumKinds];
  unsigned int has_fp4;
};

__device__ bool same16(uint32_t a, uint32_t b, bool bf16) {
  if (a == b) return true;
  // NaN payloads are not part of the contract.
  const uint32_t em = bf16 ? 0x7F80u : 0x7C00u, mm = bf16 ? 0x7Fu : 0x3FFu;
  return (a & em) == em && (a & mm) && (b & em) == em && (b & mm);
}

__global__ void cvt_check_kernel(CvtCounters* c, uint64_t samples, uint32_t stride) {
  unsigned long long checked[kNumKinds] = {}, bad[kNumKinds] = {};
  const uint64_t step = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < samples; i += step) {
    const uint32_t u = static_cast<uint32_t>(i * stride + (i >> 7));
    const float a = __uint_as_float(u), b = __uint_as_float(~u);
    unsigned short h;
    uint32_t w;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(h) : "f"(a), "f"(b));
    ++checked[kE4m3];
    bad[kE4m3] +=
        h != ((uint32_t(f::float_to_e4m3_satfinite(a)) << 8) | f::float_to_e4m3_satfinite(b));
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(h) : "f"(a), "f"(b));
    ++checked[kE5m2];
    bad[kE5m2] +=
        h != ((uint32_t(f::float_to_e5m2_satfinite(a)) << 8) | f::float_to_e5m2_satfinite(b));
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(a), "f"(b));
    ++checked[kBf16];
    bad[kBf16] += !(same16(w >> 16, f::float_to_bf16_bits(a), true) &&
                    same16(w & 0xFFFFu, f::float_to_bf16_bits(b), true));
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(a), "f"(b));
    ++checked[kF16];
    bad[kF16] += !(same16(w >> 16, f::float_to_fp16_bits(a), false) &&
                   same16(w & 0xFFFFu, f::float_to_fp16_bits(b), false));
#if B12X_FORMATS_HAS_FP4_CVT
    asm("{\n .reg .b8 t;\n cvt.rn.satfinite.e2m1x2.f32 t, %1, %2;\n mov.b32 %0, {t, t, t, t};\n}"
        : "=r"(w)
        : "f"(a), "f"(b));
    ++checked[kE2m1];
    bad[kE2m1] += (w & 0xFFu) != ((uint32_t(f::float_to_e2m1(a)) << 4) | f::float_to_e2m1(b));
    asm("cvt.rz.satfinite.ue8m0x2.f32 %0, %1, %2;" : "=h"(h) : "f"(a), "f"(b));
    ++checked[kUe8m0Rz];
    bad[kUe8m0Rz] +=
        h != ((uint32_t(f::float_to_ue8m0_floor(a)) << 8) | f::float_to_ue8m0_floor(b));
    asm("cvt.rp.satfinite.ue8m0x2.f32 %0, %1, %2;" : "=h"(h) : "f"(a), "f"(b));
    ++checked[kUe8m0Rp];
    bad[kUe8m0Rp] += h != ((uint32_t(f::float_to_ue8m0_ceil(a)) << 8) | f::float_to_ue8m0_ceil(b));
    if (i == 0) c->has_fp4 = 1;
#endif
  }
  for (int k = 0; k < kNumKinds; ++k) {
    if (checked[k]) atomicAdd(&c->checked[k], checked[k]);
    if (bad[k]) atomicAdd(&c->bad[k], bad[k]);
  }
}

__constant__ uint64_t c_iq2xxs_grid[256] = B12X_GGML_IQ2XXS_GRID_INIT;
__constant__ uint64_t c_iq2xs_grid[512] = B12X_GGML_IQ2XS_GRID_INIT;

struct BlockBuffers {
  uint8_t *nvfp4_q, *nvfp4_s, *mx4_q, *mx4_s, *mx8_q, *mx8_s, *q8;
  float *iq2xxs, *iq2xs;
};

__global__ void block_check_kernel(const float* x, int n, float gs, const uint8_t* xxs,
                                   const uint8_t* xs, BlockBuffers o) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n / 16) o.nvfp4_s[t] = f::nvfp4_encode_block(x + 16 * t, gs, o.nvfp4_q + 8 * t);
  if (t < n / 32) {
    o.mx4_s[t] = f::mxfp4_encode_block(x + 32 * t, f::MxScaleRule::kCeil, f::MxZeroBlockScale::kOne,
                                       o.mx4_q + 16 * t);
    o.mx8_s[t] = f::mxfp8_encode_block(x + 32 * t, f::MxZeroBlockScale::kOne, o.mx8_q + 32 * t);
    f::ggml::q8_0_encode_block(x + 32 * t, o.q8 + 34 * t);
  }
  if (t < n / 256) {
    f::ggml::iq2_xxs_decode_block(xxs + 66 * t, o.iq2xxs + 256 * t, c_iq2xxs_grid);
    f::ggml::iq2_xs_decode_block(xs + 74 * t, o.iq2xs + 256 * t, c_iq2xs_grid);
  }
}

/// cudaMalloc'd scratch freed on scope exit.
struct Scratch {
  std::vector<void*> ptrs;
  ~Scratch() {
    for (void* p : ptrs) cudaFree(p);
  }
  template <typename T>
  T* alloc(size_t n) {
    void* p = nullptr;
    B12X_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
    ptrs.push_back(p);
    return static_cast<T*>(p);
  }
};

/// Restores the caller's current device.
struct DeviceGuard {
  int prev = 0;
  explicit DeviceGuard(int device) {
    B12X_CUDA_CHECK(cudaGetDevice(&prev));
    B12X_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() { cudaSetDevice(prev); }
};

}  // namespace

DeviceCodecReport check_device_codecs(int device, int64_t samples) {
  B12X_CHECK_ARG(samples > 0 && samples <= (int64_t(1) << 32),
                 "check_device_codecs: samples=", samples, " is not in [1, 2^32]");
  require_compiled_arch(device, "check_device_codecs");
  const DeviceGuard guard(device);
  DeviceCodecReport rep;
  std::ostringstream msg;
  {
    Scratch s;
    // ---- scalar encoders vs cvt ----
    CvtCounters* c = s.alloc<CvtCounters>(1);
    B12X_CUDA_CHECK(cudaMemset(c, 0, sizeof(CvtCounters)));
    const uint64_t stride = (uint64_t(1) << 32) / static_cast<uint64_t>(samples);
    cvt_check_kernel<<<256, 256>>>(c, static_cast<uint64_t>(samples),
                                   static_cast<uint32_t>(stride | 1));
    B12X_CUDA_CHECK_LAUNCH();
    CvtCounters h{};
    B12X_CUDA_CHECK(cudaMemcpy(&h, c, sizeof(h), cudaMemcpyDeviceToHost));
    rep.hardware_fp4_cvt = h.has_fp4 != 0;
    for (int k = 0; k < kNumKinds; ++k) {
      rep.cvt_checked += static_cast<int64_t>(h.checked[k]);
      rep.cvt_mismatches += static_cast<int64_t>(h.bad[k]);
      if (h.checked[k]) msg << kKindNames[k] << ":" << h.bad[k] << "/" << h.checked[k] << " ";
    }
    if (!rep.hardware_fp4_cvt) msg << "(e2m1x2/ue8m0x2 cvt not in this build) ";

    // ---- block codecs: device vs host ----
    const int n = 256 * 64;
    std::mt19937 rng(12345);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x(n);
    for (int i = 0; i < n; ++i) x[i] = nd(rng) * ((i % 97) == 0 ? 1e3f : 1.f);
    for (int i = 0; i < 32; ++i) x[32 + i] = 0.f;
    std::vector<uint8_t> xxs(n / 256 * 66), xs(n / 256 * 74);
    for (auto& b : xxs) b = static_cast<uint8_t>(rng());
    for (auto& b : xs) b = static_cast<uint8_t>(rng());
    for (int b = 0; b < n / 256; ++b) {
      xxs[66 * b + 1] &= 0xFB;  // finite fp16 d
      xs[74 * b + 1] &= 0xFB;
    }
    const float gs = nvfp4_global_scale(x.data(), n);
    float* dx = s.alloc<float>(n);
    uint8_t* dxxs = s.alloc<uint8_t>(xxs.size());
    uint8_t* dxs = s.alloc<uint8_t>(xs.size());
    B12X_CUDA_CHECK(cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice));
    B12X_CUDA_CHECK(cudaMemcpy(dxxs, xxs.data(), xxs.size(), cudaMemcpyHostToDevice));
    B12X_CUDA_CHECK(cudaMemcpy(dxs, xs.data(), xs.size(), cudaMemcpyHostToDevice));
    BlockBuffers o{
        s.alloc<uint8_t>(n / 2),       s.alloc<uint8_t>(n / 16), s.alloc<uint8_t>(n / 2),
        s.alloc<uint8_t>(n / 32),      s.alloc<uint8_t>(n),      s.alloc<uint8_t>(n / 32),
        s.alloc<uint8_t>(n / 32 * 34), s.alloc<float>(n),        s.alloc<float>(n)};
    block_check_kernel<<<(n / 16 + 127) / 128, 128>>>(dx, n, gs, dxxs, dxs, o);
    B12X_CUDA_CHECK_LAUNCH();
    B12X_CUDA_CHECK(cudaDeviceSynchronize());

    auto count = [&](const char* name, const void* dev, const void* host, size_t bytes) {
      std::vector<uint8_t> d(bytes);
      B12X_CUDA_CHECK(cudaMemcpy(d.data(), dev, bytes, cudaMemcpyDeviceToHost));
      int64_t diff = 0;
      for (size_t i = 0; i < bytes; ++i) diff += d[i] != static_cast<const uint8_t*>(host)[i];
      rep.block_bytes_checked += static_cast<int64_t>(bytes);
      rep.block_mismatches += diff;
      if (diff) msg << name << ": " << diff << " bytes differ ";
    };
    std::vector<uint8_t> hq(n / 2), hs(n / 16), h4q(n / 2), h4s(n / 32), h8q(n), h8s(n / 32),
        hq8(n / 32 * 34);
    std::vector<float> hxxs(n), hxs(n);
    quantize_nvfp4(x.data(), 1, n, gs, hq.data(), hs.data());
    quantize_mxfp4(x.data(), 1, n, MxScaleRule::kCeil, MxZeroBlockScale::kOne, h4q.data(),
                   h4s.data());
    quantize_mxfp8(x.data(), 1, n, MxZeroBlockScale::kOne, h8q.data(), h8s.data());
    quantize_q8_0(x.data(), 1, n, hq8.data());
    dequantize_iq2_xxs(xxs.data(), 1, n, hxxs.data());
    dequantize_iq2_xs(xs.data(), 1, n, hxs.data());
    count("nvfp4 values", o.nvfp4_q, hq.data(), hq.size());
    count("nvfp4 scales", o.nvfp4_s, hs.data(), hs.size());
    count("mxfp4 values", o.mx4_q, h4q.data(), h4q.size());
    count("mxfp4 scales", o.mx4_s, h4s.data(), h4s.size());
    count("mxfp8 values", o.mx8_q, h8q.data(), h8q.size());
    count("mxfp8 scales", o.mx8_s, h8s.data(), h8s.size());
    count("q8_0 blocks", o.q8, hq8.data(), hq8.size());
    count("iq2_xxs decode", o.iq2xxs, hxxs.data(), hxxs.size() * 4);
    count("iq2_xs decode", o.iq2xs, hxs.data(), hxs.size() * 4);
  }
  rep.detail = msg.str();
  return rep;
}

}  // namespace b12x::formats
