// Shared by the CPU and GPU tests: a contiguous (row-major) C ABI tensor descriptor.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "b12x/c_api.h"

inline b12x_tensor c_desc(void* p, int32_t dtype, std::initializer_list<int64_t> shape,
                          int32_t device = B12X_HOST_DEVICE) {
  b12x_tensor t{};
  t.data = p;
  t.dtype = dtype;
  t.ndim = static_cast<int32_t>(shape.size());
  int i = 0;
  for (int64_t s : shape) t.shape[i++] = s;
  int64_t st = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.strides[d] = st;
    st *= t.shape[d];
  }
  t.device = device;
  return t;
}
