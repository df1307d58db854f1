// Error-path helpers for the attention tests: errors are observed through the C ABI (status +
// b12x_last_error), because libb12x keeps its C++ runtime private and C++ exceptions do not
// cross the library boundary.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "b12x/attention.h"
#include "b12x/c_api.h"

namespace b12x::attention_test {

inline b12x_tensor to_c(const TensorRef& t) {
  b12x_tensor c{};
  c.data = t.data;
  c.dtype = static_cast<int32_t>(t.dtype);
  c.ndim = t.ndim;
  for (int d = 0; d < t.ndim; ++d) {
    c.shape[d] = t.shape[d];
    c.strides[d] = t.stride[d];
  }
  c.device = t.device;
  return c;
}

/// C descriptors of a PagedArgs (absent optional tensors stay NULL).
struct CArgs {
  b12x_tensor t[11];
  b12x_paged_args a{};
  explicit CArgs(const attention::PagedArgs& x) {
    const TensorRef* refs[11] = {&x.q,          &x.k_cache,       &x.v_cache,      &x.out,
                                 &x.page_table, &x.cache_seqlens, &x.cu_seqlens_q, &x.k_descale,
                                 &x.v_descale,  &x.sinks,         &x.lse};
    const b12x_tensor** slots[11] = {&a.q,          &a.k_cache,       &a.v_cache,      &a.out,
                                     &a.page_table, &a.cache_seqlens, &a.cu_seqlens_q, &a.k_descale,
                                     &a.v_descale,  &a.sinks,         &a.lse};
    for (int i = 0; i < 11; ++i) {
      t[i] = to_c(*refs[i]);
      *slots[i] = refs[i]->data ? &t[i] : nullptr;
    }
    a.window_left = x.window_left;
    a.softmax_scale = x.softmax_scale;
    a.num_splits = x.num_splits;
  }
};

inline b12x_paged_caps to_c(const attention::PagedCaps& c) {
  b12x_paged_caps r{};
  r.device = c.device;
  r.mode = static_cast<int32_t>(c.mode);
  r.q_dtype = static_cast<int32_t>(c.q_dtype);
  r.kv_dtype = static_cast<int32_t>(c.kv_dtype);
  r.num_q_heads = c.num_q_heads;
  r.num_kv_heads = c.num_kv_heads;
  r.head_dim_qk = c.head_dim_qk;
  r.head_dim_vo = c.head_dim_vo;
  r.page_size = c.page_size;
  r.max_batch = c.max_batch;
  r.max_page_table_width = c.max_page_table_width;
  r.max_total_q = c.max_total_q;
  r.max_splits = c.max_splits;
  r.use_cuda_graph = c.use_cuda_graph;
  return r;
}

/// The capability flags of b12x_attention_paged_plan_create_ex for `c`.
inline uint32_t c_flags(const attention::PagedCaps& c) {
  return c.kv_prefix_stable ? B12X_PAGED_CAPS_KV_PREFIX_STABLE : 0u;
}

/// Runs a status-returning C call that must fail with `expected`; returns b12x_last_error().
template <typename F>
std::string c_error_of(F&& f, b12x_status expected = B12X_ERROR_INVALID_ARGUMENT) {
  const b12x_status st = f();
  const std::string msg = b12x_last_error();
  EXPECT_EQ(st, expected) << msg;
  return msg;
}

}  // namespace b12x::attention_test
