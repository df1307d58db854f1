// Argument checks shared by the paged-attention CPU reference and bind_paged. Header-only so the
// reference does not depend on the attention area at link time.
#pragma once

#include <cstdint>

#include "b12x/attention.h"
#include "b12x/status.h"
#include "b12x/types.h"

namespace b12x::attention::detail {

/// Sizes read from the shapes of a validated call.
struct PagedShape {
  int64_t total_q = 0, num_q_heads = 0, num_kv_heads = 0, head_dim_qk = 0, head_dim_vo = 0;
  int64_t batch = 0, table_width = 0, num_pages = 0, page_size = 0;
  bool fp8_kv = false;
};

inline bool supported_head_dims(int64_t dqk, int64_t dvo) {
  if (dqk == dvo) return dqk == 64 || dqk == 128 || dqk == 192 || dqk == 256;
  return dqk == 192 && dvo == 128;
}

inline void check_scale_tensor(const TensorRef& t, const char* op, const char* name, int64_t batch,
                               int64_t hkv) {
  check_dtype(t, op, name, {DType::kFP32});
  if (t.ndim == 1) {
    B12X_CHECK_ARG(t.shape[0] == batch || t.shape[0] == 1, op, ": ", name, " has shape ",
                   t.describe(), " (supported: [B]=[", batch, "], [B, 1], [B, Hkv]=[", batch, ", ",
                   hkv, "] or [1])");
  } else if (t.ndim == 2) {
    B12X_CHECK_ARG(t.shape[0] == batch && (t.shape[1] == hkv || t.shape[1] == 1), op, ": ", name,
                   " has shape ", t.describe(), " (supported: [B]=[", batch,
                   "], [B, 1], [B, Hkv]=[", batch, ", ", hkv, "] or [1])");
  } else if (t.ndim != 0) {
    B12X_CHECK_ARG(false, op, ": ", name, " has ", t.ndim, " dims ", t.describe(),
                   " (supported: [B], [B, 1], [B, Hkv] or [1])");
  }
}

/// Scale element strides (batch, head) with broadcasting for [1] / [B] / [B, 1].
inline void scale_strides(const TensorRef& t, int64_t* sb, int64_t* sh) {
  *sb = 0;
  *sh = 0;
  if (t.data == nullptr) return;
  if (t.ndim >= 1 && t.shape[0] > 1) *sb = t.stride[0];
  if (t.ndim == 2 && t.shape[1] > 1) *sh = t.stride[1];
}

/// Validates dtypes, ranks, shapes and options of a paged-attention call (not device or
/// alignment: callers add those).
inline PagedShape validate_paged_args(const PagedArgs& a, const char* op) {
  PagedShape s;
  check_defined(a.q, op, "q");
  check_defined(a.k_cache, op, "k_cache");
  check_defined(a.v_cache, op, "v_cache");
  check_defined(a.out, op, "out");
  check_defined(a.page_table, op, "page_table");
  check_defined(a.cache_seqlens, op, "cache_seqlens");
  check_defined(a.cu_seqlens_q, op, "cu_seqlens_q");
  check_dtype(a.q, op, "q", {DType::kBF16, DType::kFP16});
  check_ndim(a.q, op, "q", 3);
  check_inner_contiguous(a.q, op, "q");
  check_ndim(a.k_cache, op, "k_cache", 4);
  check_ndim(a.v_cache, op, "v_cache", 4);
  check_inner_contiguous(a.k_cache, op, "k_cache");
  check_inner_contiguous(a.v_cache, op, "v_cache");
  check_dtype(a.k_cache, op, "k_cache", {DType::kBF16, DType::kFP16, DType::kFP8E4M3});
  B12X_CHECK_ARG(a.v_cache.dtype == a.k_cache.dtype, op, ": v_cache dtype ",
                 dtype_name(a.v_cache.dtype), " differs from k_cache dtype ",
                 dtype_name(a.k_cache.dtype), " (supported: equal K and V dtypes)");
  s.fp8_kv = a.k_cache.dtype == DType::kFP8E4M3;
  if (s.fp8_kv) {
    B12X_CHECK_ARG(a.q.dtype == DType::kBF16, op, ": FP8 KV cache needs bf16 q, got q ",
                   dtype_name(a.q.dtype), " (supported: q bf16 with fp8_e4m3 KV)");
  } else {
    B12X_CHECK_ARG(a.k_cache.dtype == a.q.dtype, op, ": k_cache dtype ",
                   dtype_name(a.k_cache.dtype), " does not match q dtype ", dtype_name(a.q.dtype),
                   " (supported: bf16 q with bf16/fp8_e4m3 KV, fp16 q with fp16 KV)");
  }
  s.total_q = a.q.shape[0];
  s.num_q_heads = a.q.shape[1];
  s.head_dim_qk = a.q.shape[2];
  s.num_pages = a.k_cache.shape[0];
  s.page_size = a.k_cache.shape[1];
  s.num_kv_heads = a.k_cache.shape[2];
  B12X_CHECK_ARG(a.k_cache.shape[3] == s.head_dim_qk, op, ": k_cache head_dim ", a.k_cache.shape[3],
                 " differs from q head_dim ", s.head_dim_qk, " (supported: equal)");
  s.head_dim_vo = a.v_cache.shape[3];
  B12X_CHECK_ARG(a.v_cache.shape[0] == s.num_pages && a.v_cache.shape[1] == s.page_size &&
                     a.v_cache.shape[2] == s.num_kv_heads,
                 op, ": v_cache ", a.v_cache.describe(), " does not match k_cache ",
                 a.k_cache.describe(), " in pages, page_size or heads");
  B12X_CHECK_ARG(supported_head_dims(s.head_dim_qk, s.head_dim_vo), op,
                 ": head dims (qk=", s.head_dim_qk, ", vo=", s.head_dim_vo,
                 ") unsupported (supported: 64, 128, 192, 256 equal, or qk 192 with vo 128)");
  B12X_CHECK_ARG(s.num_kv_heads > 0 && s.num_q_heads > 0 && s.num_q_heads % s.num_kv_heads == 0, op,
                 ": num_q_heads=", s.num_q_heads,
                 " is not a multiple of num_kv_heads=", s.num_kv_heads,
                 " (supported: GQA with Hq % Hkv == 0)");
  B12X_CHECK_ARG(s.page_size >= 1 && s.page_size <= 256 && (s.page_size & (s.page_size - 1)) == 0,
                 op, ": page_size=", s.page_size, " (supported: powers of two 1..256)");
  check_shape(a.out, op, "out", {s.total_q, s.num_q_heads, s.head_dim_vo});
  check_dtype(a.out, op, "out", {a.q.dtype});
  check_inner_contiguous(a.out, op, "out");
  check_dtype(a.page_table, op, "page_table", {DType::kInt32});
  check_ndim(a.page_table, op, "page_table", 2);
  B12X_CHECK_ARG(a.page_table.stride[1] == 1 || a.page_table.shape[1] <= 1, op,
                 ": page_table must be contiguous along its width, got ", a.page_table.describe());
  s.batch = a.page_table.shape[0];
  s.table_width = a.page_table.shape[1];
  B12X_CHECK_ARG(s.batch >= 1, op, ": batch (page_table rows) is ", s.batch, " (supported: >= 1)");
  check_dtype(a.cache_seqlens, op, "cache_seqlens", {DType::kInt32});
  check_shape(a.cache_seqlens, op, "cache_seqlens", {s.batch});
  check_contiguous(a.cache_seqlens, op, "cache_seqlens");
  check_dtype(a.cu_seqlens_q, op, "cu_seqlens_q", {DType::kInt32});
  check_shape(a.cu_seqlens_q, op, "cu_seqlens_q", {s.batch + 1});
  check_contiguous(a.cu_seqlens_q, op, "cu_seqlens_q");
  if (s.fp8_kv) {
    B12X_CHECK_ARG(a.k_descale.data != nullptr && a.v_descale.data != nullptr, op,
                   ": FP8 KV cache needs k_descale and v_descale (fp32 [B] or [B, Hkv])");
  }
  if (a.k_descale.data != nullptr)
    check_scale_tensor(a.k_descale, op, "k_descale", s.batch, s.num_kv_heads);
  if (a.v_descale.data != nullptr)
    check_scale_tensor(a.v_descale, op, "v_descale", s.batch, s.num_kv_heads);
  if (a.sinks.data != nullptr) {
    check_dtype(a.sinks, op, "sinks", {DType::kFP32});
    check_shape(a.sinks, op, "sinks", {s.num_q_heads});
  }
  if (a.lse.data != nullptr) {
    check_dtype(a.lse, op, "lse", {DType::kFP32});
    check_shape(a.lse, op, "lse", {s.total_q, s.num_q_heads});
  }
  B12X_CHECK_ARG(a.window_left >= -1, op, ": window_left=", a.window_left,
                 " (supported: -1 = no window, or >= 0)");
  B12X_CHECK_ARG(!(a.softmax_scale != a.softmax_scale), op, ": softmax_scale is NaN");
  return s;
}

}  // namespace b12x::attention::detail
