// CPU reference of the Q8_0 embedding lookup: decode each row with the GGML Q8_0 codec
// (formats/ggml.h) and round to the output type.
#include "b12x/reference/embedding.h"

#include "b12x/status.h"
#include "formats/ggml.h"
#include "formats/scalar.h"

namespace b12x::reference {

EmbeddingStatus embedding_q8_0(const TensorRef& weight, const TensorRef& ids,
                               const TensorRef& out) {
  const char* op = "reference::embedding_q8_0";
  check_defined(weight, op, "weight");
  check_dtype(weight, op, "weight", {DType::kQ8_0, DType::kUInt8});
  check_ndim(weight, op, "weight", 2);
  check_device(weight, op, "weight", kHostDevice);
  check_inner_contiguous(weight, op, "weight");
  const int64_t vocab = weight.shape[0];
  int64_t dim = weight.shape[1];
  if (weight.dtype == DType::kUInt8) {
    B12X_CHECK_ARG(dim % 34 == 0, op, ": weight (uint8) row of ", dim,
                   " bytes is not a whole number of 34-byte Q8_0 blocks");
    dim = dim / 34 * 32;
  }
  B12X_CHECK_ARG(dim > 0, op, ": dim=", dim, " must be positive");
  const int64_t row_stride = vocab > 1 ? weight.byte_stride(0) : dim / 32 * 34;
  check_defined(ids, op, "ids");
  check_dtype(ids, op, "ids", {DType::kInt32, DType::kInt64});
  check_ndim(ids, op, "ids", 1);
  check_device(ids, op, "ids", kHostDevice);
  const int64_t T = ids.shape[0];
  check_defined(out, op, "out");
  check_dtype(out, op, "out", {DType::kBF16, DType::kFP16});
  check_shape(out, op, "out", {T, dim});
  check_inner_contiguous(out, op, "out");
  check_device(out, op, "out", kHostDevice);

  EmbeddingStatus st;
  const auto* w = static_cast<const uint8_t*>(weight.data);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t id = ids.dtype == DType::kInt64
                           ? static_cast<const int64_t*>(ids.data)[t * ids.stride[0]]
                           : static_cast<const int32_t*>(ids.data)[t * ids.stride[0]];
    auto* o = static_cast<uint16_t*>(out.data) + t * out.stride[0];
    if (id < 0 || id >= vocab) {
      if (st.bad_tokens++ == 0) {
        st.first_bad_token = t;
        st.first_bad_id = id;
      }
      for (int64_t j = 0; j < dim; ++j) o[j] = 0;
      continue;
    }
    float vals[fmt::ggml::kQ8_0Values];
    for (int64_t b = 0; b < dim / 32; ++b) {
      fmt::ggml::q8_0_decode_block(w + id * row_stride + b * 34, vals);
      for (int j = 0; j < 32; ++j)
        o[b * 32 + j] = out.dtype == DType::kBF16 ? fmt::float_to_bf16_bits(vals[j])
                                                  : fmt::float_to_fp16_bits(vals[j]);
    }
  }
  return st;
}

}  // namespace b12x::reference
