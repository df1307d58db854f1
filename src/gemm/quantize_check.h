// Argument checks shared by the public quantiser ops (gemm/quantize.cc) and their CPU reference
// (reference/quantize.cc). Header-only so the reference does not depend on the gemm sources.
#pragma once

#include <initializer_list>
#include <string>

#include "b12x/status.h"
#include "b12x/types.h"
#include "formats/swizzle.h"

namespace b12x::gemm::qcheck {

struct Input {
  int64_t M = 0, K = 0, ldx = 0;
  DType dtype = DType::kBF16;
};

/// x: bf16/fp16 [M, K], inner dim contiguous, row stride >= K; K a positive multiple of `block`;
/// on `device` (-1 = host). `align16` additionally asks for 2-byte alignment only: the kernels
/// pick their vector path at launch.
inline Input input(const TensorRef& x, const char* op, int block, int device) {
  check_defined(x, op, "x");
  check_dtype(x, op, "x", {DType::kBF16, DType::kFP16});
  check_ndim(x, op, "x", 2);
  check_inner_contiguous(x, op, "x");
  check_device(x, op, "x", device);
  check_aligned(x, op, "x", 2);
  Input in;
  in.M = x.shape[0];
  in.K = x.shape[1];
  in.ldx = x.shape[0] > 1 ? x.stride[0] : x.shape[1];
  in.dtype = x.dtype;
  B12X_CHECK_ARG(in.K > 0, op, ": x has K=", in.K, " (K must be positive)");
  B12X_CHECK_ARG(in.K % block == 0, op, ": K=", in.K, " is not a multiple of ", block,
                 " (this format quantises blocks of ", block, " values along K)");
  B12X_CHECK_ARG(x.shape[0] <= 1 || x.stride[0] >= in.K, op, ": x row stride ", x.stride[0],
                 " is smaller than K=", in.K);
  return in;
}

inline std::string dtypes_str(std::initializer_list<DType> ds) {
  std::string s;
  for (DType d : ds) s += (s.empty() ? "" : ", ") + std::string(dtype_name(d));
  return s;
}

/// A dense output of exactly `bytes` bytes (any shape), contiguous, with an allowed dtype.
inline void output(const TensorRef& t, const char* op, const char* name,
                   std::initializer_list<DType> dtypes, int64_t bytes, int device,
                   const std::string& what) {
  B12X_CHECK_ARG(t.data != nullptr || bytes == 0, op, ": ", name, " is missing (expected ", what,
                 ")");
  check_defined(t, op, name);
  check_dtype(t, op, name, dtypes);
  check_contiguous(t, op, name);
  check_device(t, op, name, device);
  const int64_t have = dtype_bytes_for(t.dtype, t.numel());
  B12X_CHECK_ARG(have == bytes, op, ": ", name, " ", t.describe(), " holds ", have,
                 " bytes, expected ", bytes, " (", what, ")");
}

inline std::string grid_str(int64_t rows, int64_t cols) {
  return std::to_string(rows) + " x " + std::to_string(cols);
}

/// Swizzled-grid description for messages: "128x4-swizzled scales pad128(M) x pad4(K/B) = ...".
inline std::string swizzled_str(int64_t M, int64_t cols) {
  return "128x4-swizzled scales pad128(M) x pad4(cols) = " +
         grid_str(fmt::pad_to(M, 128), fmt::pad_to(cols, 4)) + " bytes";
}

}  // namespace b12x::gemm::qcheck
