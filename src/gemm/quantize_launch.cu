// Launchers of the activation quantisers (declared in quantize_launch.h).
#include "gemm/quantize_launch.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "b12x/runtime.h"
#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/quantize.cuh"

namespace b12x::gemm {

namespace {

constexpr int kThreads = 256;

bool aligned(const void* p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

/// Grid for `work` thread-items: enough CTAs to cover the work, capped at a few waves (the
/// kernels grid-stride). At least one CTA so the swizzle padding is always written.
int grid_for(int64_t work, const ActQuant& q) {
  const int64_t need = (work + kThreads - 1) / kThreads;
  return static_cast<int>(std::clamp<int64_t>(need, 1, std::max(1, q.grid_cap)));
}

/// Launches the BF16- or FP16-input instance of a quantiser kernel; `pdl`: as a programmatic
/// dependent of the previous kernel (the kernels wait for it before reading x).
template <class Params>
void launch_for(DType x_dtype, int grid, void (*bf16)(Params), void (*f16)(Params), const Params& p,
                Stream stream, bool pdl = false) {
  auto s = reinterpret_cast<cudaStream_t>(stream);
  B12X_CUDA_CHECK(::b12x::detail::launch_ex(x_dtype == DType::kBF16 ? bf16 : f16, dim3(grid),
                                            dim3(kThreads), 0, s, pdl, dim3(1, 1, 1), p));
}

/// Early PDL trigger of the FP8 1x128 kernel (allow_dependents) where it was measured: on SM90
/// at M >= 128, in front of the block FP8 wgmma kernel (one CTA per SM). Round 23: +1-3% at M =
/// 2048, +2-4% at M = 256 over the implicit trigger at completion. Not for the MXFP8 pre-pass:
/// its GEMM at 128 tokens takes two CTAs per SM, and launched early those CTAs double up on the
/// SMs that free first (round 23, M = 256: 58 -> 77 us at 4096x4096). B12X_QUANT_PDL=0 turns it
/// off (ActQuant::pdl).
bool quant_pdl_enabled(int64_t M, const ActQuant& q) {
  return q.pdl && M >= 128 && q.sm90;
}

/// The input / value fields every block quantiser kernel reads.
kernels::BlockQuantParams block_params(const void* x, int64_t M, int64_t K, int64_t ldx,
                                       uint8_t* values) {
  kernels::BlockQuantParams p{};
  p.x = static_cast<const uint16_t*>(x);
  p.M = M;
  p.K = K;
  p.ldx = ldx;
  p.values = values;
  return p;
}

template <class P>
void launch_block(const void* x, DType x_dtype, int64_t M, int64_t K, int64_t ldx, uint8_t* values,
                  uint8_t* scale_rows, float* scale_f32, uint8_t* swizzled, const float* gs,
                  const ActQuant& q, Stream stream, bool pdl = false) {
  if (M <= 0) return;
  kernels::BlockQuantParams p = block_params(x, M, K, ldx, values);
  p.early_dependents = pdl;
  p.scale_rows = scale_rows;
  p.scale_f32 = scale_f32;
  p.scale_swizzled = swizzled;
  p.global_scale = gs;
  p.vec_in = aligned(x, 16) && ldx % 8 == 0;
  p.vec_out = aligned(values, P::kFp4 ? 4 : 8);
  const int64_t work = std::max<int64_t>(M * (K / 8), swizzled ? fmt::pad_to(M, 128) * 4 : 0);
  launch_for(x_dtype, grid_for(work, q), kernels::block_quant_kernel<P, true>,
             kernels::block_quant_kernel<P, false>, p, stream, pdl);
}

/// A B12X_QUANT_* knob set to 0.
bool knob_off(const char* name) {
  const char* e = std::getenv(name);
  return e != nullptr && e[0] == '0';
}

}  // namespace

ActQuant act_quant_options(int device) {
  int sms = 0, major = 0, minor = 0;
  B12X_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  B12X_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  B12X_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  ActQuant q;
  q.grid_cap = std::max(1, sms) * 8;  // full occupancy at 256 threads per CTA
  q.sm90 = major == 9 && minor == 0;
  q.fp8g128 = !knob_off("B12X_QUANT_FP8G128");
  q.mxfp8_fused = !knob_off("B12X_QUANT_MXFP8_FUSED");
  q.pdl = !knob_off("B12X_QUANT_PDL");
  return q;
}

const ActQuant& act_quant_cached(int device) {
  static std::mutex mu;
  static std::map<int, ActQuant> cache;  // map nodes are stable: the reference stays valid
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(device);
  if (it == cache.end()) it = cache.emplace(device, act_quant_options(device)).first;
  return it->second;
}

void launch_quantize_mxfp8(const void* x, DType x_dtype, int64_t M, int64_t K, int64_t ldx,
                           uint8_t* values, uint8_t* scale_rows, uint8_t* scale_swizzled,
                           const ActQuant& q, Stream stream, bool pdl) {
  launch_block<kernels::MxFp8Policy>(x, x_dtype, M, K, ldx, values, scale_rows, nullptr,
                                     scale_swizzled, nullptr, q, stream, pdl);
}

namespace {

/// The four-lanes-per-group FP8 1x128 kernel on vector rows (false: not launched), values row-major
/// or (tiled) as the wgmma kernel's stage images over pad128(M) rows.
bool launch_fp8_group128_vec(const void* x, DType x_dtype, int64_t M, int64_t K, int64_t ldx,
                             uint8_t* values, float* scales, const ActQuant& q, Stream stream,
                             bool early_dependents, bool tiled, bool pdl = false) {
  if (!q.fp8g128 || M <= 0 || K % 128 != 0 || !aligned(x, 16) || ldx % 8 != 0 ||
      !aligned(values, tiled ? 16 : 8))
    return false;
  kernels::BlockQuantParams p = block_params(x, M, K, ldx, values);
  p.scale_f32 = scales;
  p.early_dependents = (early_dependents && quant_pdl_enabled(M, q)) || pdl;
  // Four threads per group, one pass each (no cap at a few waves as grid_for: many short CTAs
  // keep the SMs' loads and arithmetic out of step).
  const int64_t rows = tiled ? fmt::pad_to(M, 128) : M;
  const int grid = static_cast<int>(
      std::min<int64_t>((rows * (K / 128) * 4 + kThreads - 1) / kThreads, int64_t{1} << 24));
  if (tiled)
    launch_for(x_dtype, grid, kernels::fp8_group128_kernel<true, true>,
               kernels::fp8_group128_kernel<false, true>, p, stream);
  else
    launch_for(x_dtype, grid, kernels::fp8_group128_kernel<true>,
               kernels::fp8_group128_kernel<false>, p, stream, pdl);
  return true;
}

}  // namespace

void launch_quantize_fp8_group128(const void* x, DType x_dtype, int64_t M, int64_t K, int64_t ldx,
                                  uint8_t* values, float* scales, const ActQuant& q, Stream stream,
                                  bool early_dependents, bool pdl) {
  // The four-lanes-per-group kernel on vector rows (same bits; round 21, M = 2048: 5-24 us less
  // per block FP8 GEMM than block_quant_kernel). B12X_QUANT_FP8G128=0 (q.fp8g128) keeps the
  // generic kernel.
  if (launch_fp8_group128_vec(x, x_dtype, M, K, ldx, values, scales, q, stream, early_dependents,
                              false, pdl))
    return;
  launch_block<kernels::Fp8Group128Policy>(x, x_dtype, M, K, ldx, values, nullptr, scales, nullptr,
                                           nullptr, q, stream, pdl);
}

bool launch_quantize_fp8_group128_tiled(const void* x, DType x_dtype, int64_t M, int64_t K,
                                        int64_t ldx, uint8_t* values, float* scales,
                                        const ActQuant& q, Stream stream) {
  return launch_fp8_group128_vec(x, x_dtype, M, K, ldx, values, scales, q, stream, true, true);
}

bool launch_mxfp8_dequant_bf16(const void* x, DType x_dtype, int64_t M, int64_t K, int64_t ldx,
                               int64_t KP, bool kperm, uint16_t* out, const ActQuant& q,
                               Stream stream) {
  if (!q.mxfp8_fused || M <= 0 || K % 32 != 0 || KP % 32 != 0 || KP < K || !aligned(x, 16) ||
      ldx % 8 != 0 || !aligned(out, 16))
    return false;
  kernels::MxDequantParams p{};
  p.x = static_cast<const uint16_t*>(x);
  p.M = M;
  p.K = K;
  p.KP = KP;
  p.ldx = ldx;
  p.out = out;
  p.kperm = kperm ? 1 : 0;
  p.early_dependents = false;  // see quant_pdl_enabled
  launch_for(x_dtype, grid_for(M * (KP / 32), q), kernels::mxfp8_dequant_kernel<true>,
             kernels::mxfp8_dequant_kernel<false>, p, stream);
  return true;
}

void launch_quantize_nvfp4(const void* x, DType x_dtype, int64_t M, int64_t K, int64_t ldx,
                           const float* global_scale, uint8_t* packed, uint8_t* scale_swizzled,
                           const ActQuant& q, Stream stream) {
  launch_block<kernels::NvFp4Policy>(x, x_dtype, M, K, ldx, packed, nullptr, nullptr,
                                     scale_swizzled, global_scale, q, stream);
}

void launch_quantize_mxfp4(const void* x, DType x_dtype, int64_t M, int64_t K, int64_t ldx,
                           uint8_t* packed, uint8_t* scale_swizzled, const ActQuant& q,
                           Stream stream) {
  launch_block<kernels::MxFp4Policy>(x, x_dtype, M, K, ldx, packed, nullptr, nullptr,
                                     scale_swizzled, nullptr, q, stream);
}

void launch_quantize_fp8_tensor(const void* x, DType x_dtype, int64_t M, int64_t K, int64_t ldx,
                                const float* scale, uint8_t* values, const ActQuant& q,
                                Stream stream) {
  if (M <= 0 || K <= 0) return;
  kernels::TensorFp8Params p{};
  p.x = static_cast<const uint16_t*>(x);
  p.M = M;
  p.K = K;
  p.ldx = ldx;
  p.values = values;
  p.scale = scale;
  p.vec = aligned(x, 16) && ldx % 8 == 0 && K % 8 == 0 && aligned(values, 8);
  const int grid = grid_for(M * ((K + 7) / 8), q);
  auto s = reinterpret_cast<cudaStream_t>(stream);
  if (x_dtype == DType::kBF16)
    kernels::tensor_fp8_kernel<true><<<grid, kThreads, 0, s>>>(p);
  else
    kernels::tensor_fp8_kernel<false><<<grid, kThreads, 0, s>>>(p);
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm
