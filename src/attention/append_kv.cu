// KV append: writes new K/V rows into a paged cache at slot_mapping (like vLLM's
// reshape_and_cache_flash), copying bf16/fp16 rows or quantising to FP8 E4M3 (x / scale, RNE,
// saturating). One warp per (token, K-or-V, head); 64-bit page offsets.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "b12x/attention.h"
#include "b12x/runtime.h"
#include "b12x/status.h"
#include "core/cuda_check.h"

namespace b12x::attention {
namespace {

struct AppendParams {
  const uint8_t* src[2];  // k, v
  uint8_t* dst[2];        // k_cache, v_cache
  int64_t s_st[2], s_sh[2];
  int64_t d_sp[2], d_st[2], d_sh[2];
  const int64_t* slots;
  int64_t slot_stride;
  const float* scale[2];
  int64_t capacity;  // num_pages * page_size
  int tokens, heads, dim, page_size;
  bool fp8, src_bf16;
};

__global__ void append_kv_kernel(const __grid_constant__ AppendParams p) {
  const int warps_per_block = blockDim.x >> 5;
  const int64_t item = int64_t(blockIdx.x) * warps_per_block + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  const int64_t total = int64_t(p.tokens) * 2 * p.heads;
  if (item >= total) return;
  const int h = static_cast<int>(item % p.heads);
  const int which = static_cast<int>((item / p.heads) % 2);
  const int64_t t = item / (2 * p.heads);
  const int64_t slot = p.slots[t * p.slot_stride];
  if (slot < 0 || slot >= p.capacity) return;
  const int64_t page = slot / p.page_size, off = slot % p.page_size;
  const uint16_t* src =
      reinterpret_cast<const uint16_t*>(p.src[which]) + t * p.s_st[which] + h * p.s_sh[which];
  if (p.fp8) {
    uint8_t* dst = p.dst[which] + page * p.d_sp[which] + off * p.d_st[which] + h * p.d_sh[which];
    const float sc = p.scale[which][0];
    for (int d = lane; d < p.dim; d += 32) {
      const uint16_t bits = src[d];
      float x;
      if (p.src_bf16) {
        x = __uint_as_float(static_cast<uint32_t>(bits) << 16);
      } else {
        x = __half2float(__ushort_as_half(bits));
      }
      // cvt.rn.satfinite.e4m3x2 (formats.md §A.2); division by the scale as vLLM does.
      const float y = x / sc;
      uint16_t pair;
      asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(pair) : "f"(0.f), "f"(y));
      dst[d] = static_cast<uint8_t>(pair & 0xFF);
    }
  } else {
    uint16_t* dst = reinterpret_cast<uint16_t*>(p.dst[which]) + page * p.d_sp[which] +
                    off * p.d_st[which] + h * p.d_sh[which];
    for (int d = lane; d < p.dim; d += 32) dst[d] = src[d];
  }
}

}  // namespace

void append_kv(const TensorRef& k, const TensorRef& v, const TensorRef& k_cache,
               const TensorRef& v_cache, const TensorRef& slot_mapping, const TensorRef& k_scale,
               const TensorRef& v_scale, Stream stream) {
  const char* op = "attention.append_kv";
  check_defined(k, op, "k");
  check_defined(v, op, "v");
  check_defined(k_cache, op, "k_cache");
  check_defined(v_cache, op, "v_cache");
  check_defined(slot_mapping, op, "slot_mapping");
  check_ndim(k, op, "k", 3);
  check_ndim(v, op, "v", 3);
  check_ndim(k_cache, op, "k_cache", 4);
  check_ndim(v_cache, op, "v_cache", 4);
  check_dtype(k, op, "k", {DType::kBF16, DType::kFP16});
  check_dtype(v, op, "v", {k.dtype});
  check_dtype(k_cache, op, "k_cache", {DType::kBF16, DType::kFP16, DType::kFP8E4M3});
  check_dtype(v_cache, op, "v_cache", {k_cache.dtype});
  check_dtype(slot_mapping, op, "slot_mapping", {DType::kInt64});
  const int64_t T = k.shape[0];
  check_shape(slot_mapping, op, "slot_mapping", {T});
  check_shape(k, op, "k", {T, k_cache.shape[2], k_cache.shape[3]});
  check_shape(v, op, "v", {T, v_cache.shape[2], v_cache.shape[3]});
  B12X_CHECK_ARG(k_cache.shape[3] == v_cache.shape[3] && k_cache.shape[0] == v_cache.shape[0] &&
                     k_cache.shape[1] == v_cache.shape[1] && k_cache.shape[2] == v_cache.shape[2],
                 op, ": k_cache ", k_cache.describe(), " and v_cache ", v_cache.describe(),
                 " differ (supported: equal shapes)");
  for (const auto* t : {&k, &v, &k_cache, &v_cache}) check_inner_contiguous(*t, op, "tensor");
  const bool fp8 = k_cache.dtype == DType::kFP8E4M3;
  if (fp8) {
    check_defined(k_scale, op, "k_scale");
    check_defined(v_scale, op, "v_scale");
    check_dtype(k_scale, op, "k_scale", {DType::kFP32});
    check_dtype(v_scale, op, "v_scale", {DType::kFP32});
    B12X_CHECK_ARG(k_scale.numel() == 1 && v_scale.numel() == 1, op,
                   ": k_scale/v_scale must hold one value (per-tensor scale), got ",
                   k_scale.describe(), " and ", v_scale.describe());
  } else {
    B12X_CHECK_ARG(k_cache.dtype == k.dtype, op, ": cache dtype ", dtype_name(k_cache.dtype),
                   " differs from k dtype ", dtype_name(k.dtype),
                   " (supported: equal, or an fp8_e4m3 cache with scales)");
  }
  const int dev = k.device;
  B12X_CHECK_ARG(dev >= 0, op, ": k must be a device tensor, got ", k.describe());
  for (const auto* t : {&v, &k_cache, &v_cache, &slot_mapping}) check_device(*t, op, "tensor", dev);
  if (fp8) {
    check_device(k_scale, op, "k_scale", dev);
    check_device(v_scale, op, "v_scale", dev);
  }
  if (T == 0) return;
  AppendParams p{};
  p.src[0] = static_cast<const uint8_t*>(k.data);
  p.src[1] = static_cast<const uint8_t*>(v.data);
  p.dst[0] = static_cast<uint8_t*>(k_cache.data);
  p.dst[1] = static_cast<uint8_t*>(v_cache.data);
  const TensorRef* srcs[2] = {&k, &v};
  const TensorRef* dsts[2] = {&k_cache, &v_cache};
  for (int i = 0; i < 2; ++i) {
    p.s_st[i] = srcs[i]->stride[0];
    p.s_sh[i] = srcs[i]->stride[1];
    p.d_sp[i] = dsts[i]->stride[0];
    p.d_st[i] = dsts[i]->stride[1];
    p.d_sh[i] = dsts[i]->stride[2];
  }
  p.slots = static_cast<const int64_t*>(slot_mapping.data);
  p.slot_stride = slot_mapping.stride[0];
  p.scale[0] = fp8 ? static_cast<const float*>(k_scale.data) : nullptr;
  p.scale[1] = fp8 ? static_cast<const float*>(v_scale.data) : nullptr;
  p.capacity = k_cache.shape[0] * k_cache.shape[1];
  p.tokens = static_cast<int>(T);
  p.heads = static_cast<int>(k.shape[1]);
  p.dim = static_cast<int>(k.shape[2]);
  p.page_size = static_cast<int>(k_cache.shape[1]);
  p.fp8 = fp8;
  p.src_bf16 = k.dtype == DType::kBF16;
  const int64_t items = T * 2 * p.heads;
  const int warps = 8;
  const int64_t blocks = (items + warps - 1) / warps;
  B12X_CHECK_ARG(blocks < (int64_t(1) << 31), op, ": too many rows (", items, ")");
  append_kv_kernel<<<static_cast<unsigned>(blocks), warps * 32, 0,
                     reinterpret_cast<cudaStream_t>(stream)>>>(p);
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::attention
