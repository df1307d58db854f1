// GPU checks of the shared codecs (suite FormatsGpu*):
//  - the scalar encoders of src/formats/scalar.h, compiled for the device, against the hardware
//    `cvt` instructions on ALL 2^32 float32 bit patterns: e4m3x2 / e5m2x2 satfinite, bf16x2 and
//    f16x2 rn (every GPU from sm_89), and e2m1x2 satfinite / ue8m0x2 rz+rp satfinite (only on
//    sm_100a/sm_120a/sm_121a builds: those checks are compiled under an arch-specific guard and
//    skipped with a message elsewhere, e.g. on the H200);
//  - the decoders against cvt.rn.f16x2.{e4m3,e5m2}x2 (and bf16x2.ue8m0x2 where it exists) on
//    every code pair;
//  - the block codecs of block.h / ggml.h run in a kernel against the host API (bit-identical).
// Each input pattern occupies both operand slots of the x2 instructions over the sweep (the
// second operand is ~u), which also pins the packing order (a -> high half).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "b12x/formats.h"
#include "formats/block.h"
#include "formats/ggml.h"
#include "formats/scalar.h"
#include "gpu/gpu_test_util.h"

#if defined(__CUDA_ARCH__) &&                                               \
    ((defined(__CUDA_ARCH_SPECIFIC__) && __CUDA_ARCH_SPECIFIC__ >= 1000) || \
     (defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && __CUDA_ARCH_FAMILY_SPECIFIC__ >= 1000))
#define B12X_TEST_HAS_FP4_CVT 1
#else
#define B12X_TEST_HAS_FP4_CVT 0
#endif

namespace {

namespace f = b12x::fmt;

struct Mismatch {
  uint32_t input, ours, hw;
};
struct SweepResult {
  unsigned long long mismatches;
  unsigned int recorded;
  unsigned int supported;  // set by the kernel when the instruction was compiled in
  Mismatch first[8];
};

__device__ bool bf16_is_nan(uint32_t h) {
  return (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu);
}
__device__ bool f16_is_nan(uint32_t h) {
  return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu);
}

// Each op: compare(u, &ours, &hw) -> equal?, and whether it is compiled for this arch.
struct E4m3Sat {
  static constexpr const char* kName = "cvt.rn.satfinite.e4m3x2.f32";
  __device__ static bool compare(uint32_t u, uint32_t* ours, uint32_t* hw) {
    const float a = __uint_as_float(u), b = __uint_as_float(~u);
    unsigned short d;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(a), "f"(b));
    *hw = d;
    *ours = (uint32_t(f::float_to_e4m3_satfinite(a)) << 8) | f::float_to_e4m3_satfinite(b);
    return *ours == *hw;
  }
  __device__ static bool supported() { return true; }
};
struct E5m2Sat {
  static constexpr const char* kName = "cvt.rn.satfinite.e5m2x2.f32";
  __device__ static bool compare(uint32_t u, uint32_t* ours, uint32_t* hw) {
    const float a = __uint_as_float(u), b = __uint_as_float(~u);
    unsigned short d;
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(d) : "f"(a), "f"(b));
    *hw = d;
    *ours = (uint32_t(f::float_to_e5m2_satfinite(a)) << 8) | f::float_to_e5m2_satfinite(b);
    return *ours == *hw;
  }
  __device__ static bool supported() { return true; }
};
struct Bf16Rn {
  static constexpr const char* kName = "cvt.rn.bf16x2.f32";
  __device__ static bool compare(uint32_t u, uint32_t* ours, uint32_t* hw) {
    const float a = __uint_as_float(u), b = __uint_as_float(~u);
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(a), "f"(b));
    *hw = d;
    *ours = (uint32_t(f::float_to_bf16_bits(a)) << 16) | f::float_to_bf16_bits(b);
    if (*ours == *hw) return true;
    // NaN payloads are not part of the contract: NaN in, NaN out.
    const bool hi_ok =
        (*ours >> 16) == (*hw >> 16) || (bf16_is_nan(*ours >> 16) && bf16_is_nan(*hw >> 16));
    const bool lo_ok = (*ours & 0xFFFFu) == (*hw & 0xFFFFu) ||
                       (bf16_is_nan(*ours & 0xFFFFu) && bf16_is_nan(*hw & 0xFFFFu));
    return hi_ok && lo_ok;
  }
  __device__ static bool supported() { return true; }
};
struct F16Rn {
  static constexpr const char* kName = "cvt.rn.f16x2.f32";
  __device__ static bool compare(uint32_t u, uint32_t* ours, uint32_t* hw) {
    const float a = __uint_as_float(u), b = __uint_as_float(~u);
    uint32_t d;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(a), "f"(b));
    *hw = d;
    *ours = (uint32_t(f::float_to_fp16_bits(a)) << 16) | f::float_to_fp16_bits(b);
    if (*ours == *hw) return true;
    const bool hi_ok =
        (*ours >> 16) == (*hw >> 16) || (f16_is_nan(*ours >> 16) && f16_is_nan(*hw >> 16));
    const bool lo_ok = (*ours & 0xFFFFu) == (*hw & 0xFFFFu) ||
                       (f16_is_nan(*ours & 0xFFFFu) && f16_is_nan(*hw & 0xFFFFu));
    return hi_ok && lo_ok;
  }
  __device__ static bool supported() { return true; }
};
struct E2m1Sat {
  static constexpr const char* kName = "cvt.rn.satfinite.e2m1x2.f32";
  __device__ static bool compare(uint32_t u, uint32_t* ours, uint32_t* hw) {
#if B12X_TEST_HAS_FP4_CVT
    const float a = __uint_as_float(u), b = __uint_as_float(~u);
    uint32_t d;
    asm("{\n .reg .b8 t;\n cvt.rn.satfinite.e2m1x2.f32 t, %1, %2;\n mov.b32 %0, {t, t, t, t};\n}"
        : "=r"(d)
        : "f"(a), "f"(b));
    *hw = d & 0xFFu;
    *ours = (uint32_t(f::float_to_e2m1(a)) << 4) | f::float_to_e2m1(b);
    return *ours == *hw;
#else
    *ours = *hw = 0;
    return true;
#endif
  }
  __device__ static bool supported() {
    return B12X_TEST_HAS_FP4_CVT;
  }
};
template <bool kCeil>
struct Ue8m0Sat {
  static constexpr const char* kName =
      kCeil ? "cvt.rp.satfinite.ue8m0x2.f32" : "cvt.rz.satfinite.ue8m0x2.f32";
  __device__ static bool compare(uint32_t u, uint32_t* ours, uint32_t* hw) {
#if B12X_TEST_HAS_FP4_CVT
    const float a = __uint_as_float(u), b = __uint_as_float(~u);
    unsigned short d;
    if (kCeil)
      asm("cvt.rp.satfinite.ue8m0x2.f32 %0, %1, %2;" : "=h"(d) : "f"(a), "f"(b));
    else
      asm("cvt.rz.satfinite.ue8m0x2.f32 %0, %1, %2;" : "=h"(d) : "f"(a), "f"(b));
    *hw = d;
    const uint32_t ha = kCeil ? f::float_to_ue8m0_ceil(a) : f::float_to_ue8m0_floor(a);
    const uint32_t hb = kCeil ? f::float_to_ue8m0_ceil(b) : f::float_to_ue8m0_floor(b);
    *ours = (ha << 8) | hb;
    return *ours == *hw;
#else
    *ours = *hw = 0;
    return true;
#endif
  }
  __device__ static bool supported() {
    return B12X_TEST_HAS_FP4_CVT;
  }
};

template <class Op>
__global__ void sweep_kernel(SweepResult* r, uint64_t begin, uint64_t end) {
  if (blockIdx.x == 0 && threadIdx.x == 0) r->supported = Op::supported() ? 1u : 0u;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = begin + uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < end; i += stride) {
    uint32_t ours, hw;
    const bool ok = Op::compare(static_cast<uint32_t>(i), &ours, &hw);
    // One atomic per warp for the count, so a systematic failure stays fast.
    const unsigned mask = __activemask();
    const unsigned bad = __ballot_sync(mask, !ok);
    if (bad && (threadIdx.x & 31) == __ffs(mask) - 1)
      atomicAdd(&r->mismatches, static_cast<unsigned long long>(__popc(bad)));
    if (!ok && *reinterpret_cast<volatile unsigned int*>(&r->recorded) < 8) {
      const unsigned int slot = atomicAdd(&r->recorded, 1u);
      if (slot < 8) r->first[slot] = {static_cast<uint32_t>(i), ours, hw};
    }
  }
}

/// Runs the full 2^32 sweep; returns false (and sets *skip_reason) if not compiled in.
template <class Op>
void run_sweep(bool may_be_unsupported) {
  B12X_REQUIRE_GPU();
  b12x::test::DeviceBuffer<SweepResult> r(1);
  B12X_TEST_CUDA(cudaMemset(r.ptr, 0, sizeof(SweepResult)));
  int sms = 0;
  B12X_TEST_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // Probe first (one element) so unsupported builds skip without sweeping.
  sweep_kernel<Op><<<1, 1>>>(r.ptr, 0, 1);
  B12X_TEST_CUDA(cudaGetLastError());
  B12X_TEST_CUDA(cudaDeviceSynchronize());
  SweepResult h{};
  B12X_TEST_CUDA(cudaMemcpy(&h, r.ptr, sizeof(h), cudaMemcpyDeviceToHost));
  if (!h.supported) {
    ASSERT_TRUE(may_be_unsupported);
    const auto& d = b12x::device_info(0);
    GTEST_SKIP() << Op::kName << " exists only on sm_100a/sm_120a/sm_121a; this device (" << d.name
                 << ", sm_" << d.cc_major << d.cc_minor
                 << ") runs a build without it: exhaustive check skipped";
  }
  B12X_TEST_CUDA(cudaMemset(r.ptr, 0, sizeof(SweepResult)));
  const auto t0 = std::chrono::steady_clock::now();
  sweep_kernel<Op><<<sms * 8, 256>>>(r.ptr, 0, 1ull << 32);
  B12X_TEST_CUDA(cudaGetLastError());
  B12X_TEST_CUDA(cudaDeviceSynchronize());
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  B12X_TEST_CUDA(cudaMemcpy(&h, r.ptr, sizeof(h), cudaMemcpyDeviceToHost));
  std::printf(
      "[ FormatsGpu ] %s: all 2^32 float32 patterns (each in both operand slots) in "
      "%.1f ms, %llu mismatches\n",
      Op::kName, ms, h.mismatches);
  for (unsigned i = 0; i < std::min(8u, h.recorded); ++i)
    ADD_FAILURE() << Op::kName << " input 0x" << std::hex << h.first[i].input << " ours 0x"
                  << h.first[i].ours << " hw 0x" << h.first[i].hw << std::dec;
  EXPECT_EQ(h.mismatches, 0ull) << Op::kName;
}

TEST(FormatsGpuCvt, E4m3x2SatfiniteAll2p32) {
  run_sweep<E4m3Sat>(false);
}
TEST(FormatsGpuCvt, E5m2x2SatfiniteAll2p32) {
  run_sweep<E5m2Sat>(false);
}
TEST(FormatsGpuCvt, Bf16x2RnAll2p32) {
  run_sweep<Bf16Rn>(false);
}
TEST(FormatsGpuCvt, F16x2RnAll2p32) {
  run_sweep<F16Rn>(false);
}
TEST(FormatsGpuCvt, E2m1x2SatfiniteAll2p32) {
  run_sweep<E2m1Sat>(true);
}
TEST(FormatsGpuCvt, Ue8m0x2RzSatfiniteAll2p32) {
  run_sweep<Ue8m0Sat<false>>(true);
}
TEST(FormatsGpuCvt, Ue8m0x2RpSatfiniteAll2p32) {
  run_sweep<Ue8m0Sat<true>>(true);
}

// ---------------------------------------------------------------- decoders ------------------
__global__ void decode_kernel(uint32_t* mismatches, uint32_t* fp4_supported) {
  const uint32_t v = blockIdx.x * blockDim.x + threadIdx.x;  // 0..65535: a pair of codes
  if (v >= 65536) return;
  const unsigned short in = static_cast<unsigned short>(v);
  uint32_t d;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(d) : "h"(in));
  for (int h = 0; h < 2; ++h) {
    const float hw = f::fp16_bits_to_float(static_cast<uint16_t>(d >> (16 * h)));
    const float ours = f::e4m3_to_float(static_cast<uint8_t>(v >> (8 * h)));
    if (!(hw == ours && signbit(hw) == signbit(ours)) && !(isnan(hw) && isnan(ours)))
      atomicAdd(&mismatches[0], 1u);
  }
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(d) : "h"(in));
  for (int h = 0; h < 2; ++h) {
    const float hw = f::fp16_bits_to_float(static_cast<uint16_t>(d >> (16 * h)));
    const float ours = f::e5m2_to_float(static_cast<uint8_t>(v >> (8 * h)));
    if (!(hw == ours && signbit(hw) == signbit(ours)) && !(isnan(hw) && isnan(ours)))
      atomicAdd(&mismatches[1], 1u);
  }
#if B12X_TEST_HAS_FP4_CVT
  if (v == 0) *fp4_supported = 1;
  asm("cvt.rn.bf16x2.ue8m0x2 %0, %1;" : "=r"(d) : "h"(in));
  for (int h = 0; h < 2; ++h) {
    const float hw = f::bf16_bits_to_float(static_cast<uint16_t>(d >> (16 * h)));
    const float ours = f::ue8m0_to_float(static_cast<uint8_t>(v >> (8 * h)));
    if (!(hw == ours) && !(isnan(hw) && isnan(ours))) atomicAdd(&mismatches[2], 1u);
  }
#endif
}

TEST(FormatsGpuCvt, DecodeEveryCodePair) {
  B12X_REQUIRE_GPU();
  b12x::test::DeviceBuffer<uint32_t> mm(4);
  B12X_TEST_CUDA(cudaMemset(mm.ptr, 0, mm.bytes()));
  decode_kernel<<<256, 256>>>(mm.ptr, mm.ptr + 3);
  B12X_TEST_CUDA(cudaGetLastError());
  B12X_TEST_CUDA(cudaDeviceSynchronize());
  const auto h = mm.download();
  EXPECT_EQ(h[0], 0u) << "e4m3 decode vs cvt.rn.f16x2.e4m3x2";
  EXPECT_EQ(h[1], 0u) << "e5m2 decode vs cvt.rn.f16x2.e5m2x2";
  if (h[3])
    EXPECT_EQ(h[2], 0u) << "ue8m0 decode vs cvt.rn.bf16x2.ue8m0x2";
  else
    std::printf(
        "[ FormatsGpu ] cvt.rn.bf16x2.ue8m0x2 not in this build (sm_100a/120a only): "
        "ue8m0 decode checked on the host only\n");
}

// ---------------------------------------------------------------- block codecs --------------
// One thread per block; the same B12X_HD functions the host API uses.
__constant__ uint64_t c_iq2xxs_grid[256] = B12X_GGML_IQ2XXS_GRID_INIT;
__constant__ uint64_t c_iq2xs_grid[512] = B12X_GGML_IQ2XS_GRID_INIT;

struct BlockOut {
  uint8_t* nvfp4_q;
  uint8_t* nvfp4_s;
  uint8_t* mx4f_q;
  uint8_t* mx4f_s;
  uint8_t* mx4c_q;
  uint8_t* mx4c_s;
  uint8_t* mx8_q;
  uint8_t* mx8_s;
  uint8_t* q8;
  float* iq2xxs;
  float* iq2xs;
  float* nvfp4_deq;
};

__global__ void block_kernel(const float* x, int n, float gs, const uint8_t* iq2xxs_blocks,
                             const uint8_t* iq2xs_blocks, BlockOut o) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n / 16) {
    o.nvfp4_s[t] = f::nvfp4_encode_block(x + 16 * t, gs, o.nvfp4_q + 8 * t);
    f::nvfp4_decode_block(o.nvfp4_q + 8 * t, o.nvfp4_s[t], gs, o.nvfp4_deq + 16 * t);
  }
  if (t < n / 32) {
    o.mx4f_s[t] = f::mxfp4_encode_block(x + 32 * t, f::MxScaleRule::kFloor,
                                        f::MxZeroBlockScale::kOne, o.mx4f_q + 16 * t);
    o.mx4c_s[t] = f::mxfp4_encode_block(x + 32 * t, f::MxScaleRule::kCeil,
                                        f::MxZeroBlockScale::kOne, o.mx4c_q + 16 * t);
    o.mx8_s[t] = f::mxfp8_encode_block(x + 32 * t, f::MxZeroBlockScale::kOne, o.mx8_q + 32 * t);
    f::ggml::q8_0_encode_block(x + 32 * t, o.q8 + 34 * t);
  }
  if (t < n / 256) {
    f::ggml::iq2_xxs_decode_block(iq2xxs_blocks + 66 * t, o.iq2xxs + 256 * t, c_iq2xxs_grid);
    f::ggml::iq2_xs_decode_block(iq2xs_blocks + 74 * t, o.iq2xs + 256 * t, c_iq2xs_grid);
  }
}

template <typename T>
std::vector<T> down(const b12x::test::DeviceBuffer<T>& b) {
  return b.download();
}

TEST(FormatsGpuSanitize, DeviceCodecsMatchHostBitExact) {
  B12X_REQUIRE_GPU();
  namespace fm = b12x::formats;
  const int n = 256 * 512;
  std::vector<float> x = b12x::test::random_normal(n, 0.7f);
  // Give some blocks wide dynamic range, exact ties and zeros.
  for (int i = 0; i < n; i += 97) x[i] *= 1e4f;
  for (int i = 0; i < 32; ++i) x[64 + i] = 0.f;
  for (int i = 0; i < n; i += 131) x[i] = 0.25f * static_cast<float>(i % 29);
  const float gs = fm::nvfp4_global_scale(x.data(), n);
  std::vector<uint8_t> xxs = b12x::test::random_bytes(n / 256 * 66);
  std::vector<uint8_t> xs = b12x::test::random_bytes(n / 256 * 74);
  for (int b = 0; b < n / 256; ++b) {  // finite d
    xxs[66 * b + 1] &= 0xFB;
    xs[74 * b + 1] &= 0xFB;
  }
  b12x::test::DeviceBuffer<float> dx(n), d_iq2xxs(n), d_iq2xs(n), d_deq(n);
  b12x::test::DeviceBuffer<uint8_t> d_xxs(xxs.size()), d_xs(xs.size());
  dx.upload(x);
  d_xxs.upload(xxs);
  d_xs.upload(xs);
  b12x::test::DeviceBuffer<uint8_t> nq(n / 2), ns(n / 16), mfq(n / 2), mfs(n / 32), mcq(n / 2),
      mcs(n / 32), m8q(n), m8s(n / 32), q8(n / 32 * 34);
  for (auto* b : {&nq, &ns, &mfq, &mfs, &mcq, &mcs, &m8q, &m8s, &q8}) b->poison(0xA5);
  d_iq2xxs.poison();
  d_iq2xs.poison();
  d_deq.poison();
  BlockOut o{nq.ptr,  ns.ptr,  mfq.ptr, mfs.ptr,      mcq.ptr,     mcs.ptr,
             m8q.ptr, m8s.ptr, q8.ptr,  d_iq2xxs.ptr, d_iq2xs.ptr, d_deq.ptr};
  block_kernel<<<(n / 16 + 127) / 128, 128>>>(dx.ptr, n, gs, d_xxs.ptr, d_xs.ptr, o);
  B12X_TEST_CUDA(cudaGetLastError());
  B12X_TEST_CUDA(cudaDeviceSynchronize());

  std::vector<uint8_t> hq(n / 2), hs(n / 16);
  fm::quantize_nvfp4(x.data(), 1, n, gs, hq.data(), hs.data());
  EXPECT_EQ(down(nq), hq) << "NVFP4 values";
  EXPECT_EQ(down(ns), hs) << "NVFP4 scales";
  std::vector<float> hdeq(n);
  fm::dequantize_nvfp4(hq.data(), hs.data(), 1, n, gs, hdeq.data());
  EXPECT_EQ(0, std::memcmp(down(d_deq).data(), hdeq.data(), n * 4)) << "NVFP4 decode";
  std::vector<uint8_t> h4q(n / 2), h4s(n / 32);
  fm::quantize_mxfp4(x.data(), 1, n, fm::MxScaleRule::kFloor, fm::MxZeroBlockScale::kOne,
                     h4q.data(), h4s.data());
  EXPECT_EQ(down(mfq), h4q) << "MXFP4 floor values";
  EXPECT_EQ(down(mfs), h4s) << "MXFP4 floor scales";
  fm::quantize_mxfp4(x.data(), 1, n, fm::MxScaleRule::kCeil, fm::MxZeroBlockScale::kOne, h4q.data(),
                     h4s.data());
  EXPECT_EQ(down(mcq), h4q) << "MXFP4 ceil values";
  EXPECT_EQ(down(mcs), h4s) << "MXFP4 ceil scales";
  std::vector<uint8_t> h8q(n), h8s(n / 32);
  fm::quantize_mxfp8(x.data(), 1, n, fm::MxZeroBlockScale::kOne, h8q.data(), h8s.data());
  EXPECT_EQ(down(m8q), h8q) << "MXFP8 values";
  EXPECT_EQ(down(m8s), h8s) << "MXFP8 scales";
  std::vector<uint8_t> hq8(n / 32 * 34);
  fm::quantize_q8_0(x.data(), 1, n, hq8.data());
  EXPECT_EQ(down(q8), hq8) << "Q8_0 blocks";
  std::vector<float> hxxs(n), hxs(n);
  fm::dequantize_iq2_xxs(xxs.data(), 1, n, hxxs.data());
  fm::dequantize_iq2_xs(xs.data(), 1, n, hxs.data());
  EXPECT_EQ(0, std::memcmp(down(d_iq2xxs).data(), hxxs.data(), n * 4)) << "IQ2_XXS decode";
  EXPECT_EQ(0, std::memcmp(down(d_iq2xs).data(), hxs.data(), n * 4)) << "IQ2_XS decode";
}

}  // namespace

namespace {
TEST(FormatsGpuCvt, DeviceSelfCheckApi) {
  B12X_REQUIRE_GPU();
  const auto r = b12x::formats::check_device_codecs(0, int64_t(1) << 22);
  std::printf("[ FormatsGpu ] check_device_codecs: %s\n", r.detail.c_str());
  EXPECT_GE(r.cvt_checked, 4 * (int64_t(1) << 22));
  EXPECT_EQ(r.cvt_mismatches, 0);
  EXPECT_GT(r.block_bytes_checked, 0);
  EXPECT_EQ(r.block_mismatches, 0);
}
}  // namespace
