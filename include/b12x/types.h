// b12x: element types and the non-owning tensor descriptor used by every entry point.
//
// No CUDA headers: a stream crosses this API as b12x::Stream, which is the same pointer type as
// cudaStream_t (CUstream_st*), so callers pass their cudaStream_t unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

struct CUstream_st;

namespace b12x {

/// @brief Same type as cudaStream_t; nullptr is the legacy default stream.
using Stream = CUstream_st*;

/// @brief Element types. Values are part of the C ABI (see c_api.h B12X_DTYPE_*).
///
/// Packed and block types are described in *values*, not bytes:
/// - kFP4E2M1: two E2M1 values per byte, element 2i in the low nibble of byte i.
/// - kQ8_0 / kIQ2_XXS / kIQ2_XS: GGML blocks of 32 / 256 / 256 values stored in 34 / 66 / 74 bytes;
///   the innermost dimension counts values and must be a whole number of blocks.
enum class DType : int32_t {
  kBF16 = 0,
  kFP16 = 1,
  kFP32 = 2,
  kInt32 = 3,
  kInt64 = 4,
  kUInt8 = 5,
  kFP8E4M3 = 6,
  kFP8E5M2 = 7,
  kFP4E2M1 = 8,
  kUE8M0 = 9,
  kUE4M3 = 10,
  kQ8_0 = 11,
  kIQ2_XXS = 12,
  kIQ2_XS = 13,
  kFP64 = 14,
  kInt8 = 15,
};

/// @brief Number of DType values (for tables indexed by DType).
inline constexpr int kNumDTypes = 16;

/// @brief Lower-case name ("bf16", "fp8_e4m3", "iq2_xs", ...).
const char* dtype_name(DType t) noexcept;
/// @brief Parse a name produced by dtype_name (also accepts common aliases like "bfloat16",
/// "float8_e4m3fn", "float4_e2m1fn_x2", "float8_e8m0fnu"). Throws Error on an unknown name.
DType dtype_from_name(const std::string& name);

/// @brief Values per storage block: 2 for packed FP4, 32 for Q8_0, 256 for IQ2_*, 1 otherwise.
int dtype_block_values(DType t) noexcept;
/// @brief Bytes per storage block: 1 for FP4 (2 values), 34 / 66 / 74 for GGML, element size
/// otherwise.
int dtype_block_bytes(DType t) noexcept;
/// @brief True for packed/block types whose innermost dimension must be a whole number of blocks.
inline bool dtype_is_blocked(DType t) noexcept {
  return dtype_block_values(t) > 1;
}
/// @brief Bytes occupied by `values` contiguous values (values must be a multiple of the block).
inline int64_t dtype_bytes_for(DType t, int64_t values) noexcept {
  return values / dtype_block_values(t) * dtype_block_bytes(t);
}

/// @brief GGML block sizes (values, bytes) as in ggml-common.h.
inline constexpr int kQ8_0BlockValues = 32, kQ8_0BlockBytes = 34;
inline constexpr int kIQ2XXSBlockValues = 256, kIQ2XXSBlockBytes = 66;
inline constexpr int kIQ2XSBlockValues = 256, kIQ2XSBlockBytes = 74;

inline constexpr int kMaxDims = 6;
inline constexpr int kHostDevice = -1;

/// @brief A non-owning view: pointer, dtype, shape and strides (in values), device (-1 = host).
///
/// Strides count values of `dtype`. For packed/block dtypes the innermost dimension must have
/// stride 1 and every other stride must be a whole number of blocks, so the byte offset of any
/// index is exact (see byte_stride()).
struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::kUInt8;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t stride[kMaxDims] = {};
  int device = kHostDevice;

  /// Contiguous row-major view over `data`.
  static TensorRef contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape,
                              int device = kHostDevice);
  static TensorRef contiguous(void* data, DType dtype, int ndim, const int64_t* shape,
                              int device = kHostDevice);

  int64_t size(int d) const { return shape[d < 0 ? d + ndim : d]; }
  int64_t numel() const;
  /// Bytes between consecutive indices of dimension d.
  int64_t byte_stride(int d) const;
  /// True when strides are exactly row-major contiguous.
  bool is_contiguous() const;
  /// Bytes spanned from the first to one past the last element (0 for an empty tensor).
  int64_t span_bytes() const;
  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data);
  }
  /// "bf16[4, 4096] (device 0)" style description for error messages.
  std::string describe() const;
};

// ---- validation helpers used by every entry point -------------------------------------------
// Each throws b12x::Error(kInvalidArgument) with a message naming `op`, the argument `name`,
// the offending value and what is supported.
void check_defined(const TensorRef& t, const char* op, const char* name);
void check_dtype(const TensorRef& t, const char* op, const char* name,
                 std::initializer_list<DType> allowed);
void check_ndim(const TensorRef& t, const char* op, const char* name, int ndim);
/// shape must match; a negative entry in `expected` matches anything.
void check_shape(const TensorRef& t, const char* op, const char* name,
                 std::initializer_list<int64_t> expected);
void check_contiguous(const TensorRef& t, const char* op, const char* name);
/// Innermost dimension contiguous (stride 1); other strides arbitrary.
void check_inner_contiguous(const TensorRef& t, const char* op, const char* name);
void check_aligned(const TensorRef& t, const char* op, const char* name, int bytes);
void check_device(const TensorRef& t, const char* op, const char* name, int device);
void check_same_device(const TensorRef& a, const char* a_name, const TensorRef& b,
                       const char* b_name, const char* op);

}  // namespace b12x
