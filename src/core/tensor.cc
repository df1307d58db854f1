// TensorRef helpers and the argument checks shared by every entry point.
#include <cstring>
#include <sstream>

#include "b12x/status.h"
#include "b12x/types.h"

namespace b12x {

namespace {
struct DTypeInfo {
  DType t;
  const char* name;
  int block_values;
  int block_bytes;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kBF16, "bf16", 1, 2},
    {DType::kFP16, "fp16", 1, 2},
    {DType::kFP32, "fp32", 1, 4},
    {DType::kInt32, "int32", 1, 4},
    {DType::kInt64, "int64", 1, 8},
    {DType::kUInt8, "uint8", 1, 1},
    {DType::kFP8E4M3, "fp8_e4m3", 1, 1},
    {DType::kFP8E5M2, "fp8_e5m2", 1, 1},
    {DType::kFP4E2M1, "fp4_e2m1", 2, 1},
    {DType::kUE8M0, "ue8m0", 1, 1},
    {DType::kUE4M3, "ue4m3", 1, 1},
    {DType::kQ8_0, "q8_0", kQ8_0BlockValues, kQ8_0BlockBytes},
    {DType::kIQ2_XXS, "iq2_xxs", kIQ2XXSBlockValues, kIQ2XXSBlockBytes},
    {DType::kIQ2_XS, "iq2_xs", kIQ2XSBlockValues, kIQ2XSBlockBytes},
    {DType::kFP64, "fp64", 1, 8},
    {DType::kInt8, "int8", 1, 1},
};
const DTypeInfo* find(DType t) {
  for (const auto& d : kDTypes)
    if (d.t == t) return &d;
  return nullptr;
}
}  // namespace

const char* dtype_name(DType t) noexcept {
  const DTypeInfo* d = find(t);
  return d ? d->name : "invalid_dtype";
}

DType dtype_from_name(const std::string& name) {
  for (const auto& d : kDTypes)
    if (name == d.name) return d.t;
  struct Alias {
    const char* alias;
    DType t;
  };
  static const Alias kAliases[] = {
      {"bfloat16", DType::kBF16},
      {"float16", DType::kFP16},
      {"half", DType::kFP16},
      {"float32", DType::kFP32},
      {"float", DType::kFP32},
      {"float64", DType::kFP64},
      {"float8_e4m3fn", DType::kFP8E4M3},
      {"e4m3", DType::kFP8E4M3},
      {"float8_e5m2", DType::kFP8E5M2},
      {"e5m2", DType::kFP8E5M2},
      {"float4_e2m1fn_x2", DType::kFP4E2M1},
      {"float4_e2m1fn", DType::kFP4E2M1},
      {"e2m1", DType::kFP4E2M1},
      {"float8_e8m0fnu", DType::kUE8M0},
      {"e8m0", DType::kUE8M0},
      {"ue4m3fn", DType::kUE4M3},
  };
  for (const auto& a : kAliases)
    if (name == a.alias) return a.t;
  std::ostringstream os;
  for (const auto& d : kDTypes) os << (&d == kDTypes ? "" : ", ") << d.name;
  B12X_FAIL(Status::kInvalidArgument, "unknown dtype name '", name, "' (supported: ", os.str(),
            ")");
}

int dtype_block_values(DType t) noexcept {
  const DTypeInfo* d = find(t);
  return d ? d->block_values : 1;
}
int dtype_block_bytes(DType t) noexcept {
  const DTypeInfo* d = find(t);
  return d ? d->block_bytes : 0;
}

TensorRef TensorRef::contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape,
                                int device) {
  return contiguous(data, dtype, static_cast<int>(shape.size()), shape.begin(), device);
}

TensorRef TensorRef::contiguous(void* data, DType dtype, int ndim, const int64_t* shape,
                                int device) {
  B12X_CHECK_ARG(ndim >= 0 && ndim <= kMaxDims, "TensorRef: ndim=", ndim, " outside [0, ", kMaxDims,
                 "]");
  TensorRef t;
  t.data = data;
  t.dtype = dtype;
  t.ndim = ndim;
  t.device = device;
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    t.shape[d] = shape[d];
    t.stride[d] = s;
    s *= shape[d];
  }
  return t;
}

int64_t TensorRef::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

int64_t TensorRef::byte_stride(int d) const {
  if (d < 0) d += ndim;
  return stride[d] / dtype_block_values(dtype) * dtype_block_bytes(dtype);
}

bool TensorRef::is_contiguous() const {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && stride[d] != s) return false;
    s *= shape[d];
  }
  return true;
}

int64_t TensorRef::span_bytes() const {
  if (numel() == 0) return 0;
  int64_t last = 0;  // value offset of the last element
  for (int d = 0; d < ndim; ++d) last += (shape[d] - 1) * stride[d];
  const int bv = dtype_block_values(dtype);
  // One past the last element, rounded up to its block.
  return (last / bv + 1) * dtype_block_bytes(dtype);
}

std::string TensorRef::describe() const {
  std::ostringstream os;
  os << dtype_name(dtype) << "[";
  for (int d = 0; d < ndim; ++d) os << (d ? ", " : "") << shape[d];
  os << "]";
  if (!is_contiguous()) {
    os << " strides (";
    for (int d = 0; d < ndim; ++d) os << (d ? ", " : "") << stride[d];
    os << ")";
  }
  os << (device == kHostDevice ? " (host)" : " (device " + std::to_string(device) + ")");
  return os.str();
}

void check_defined(const TensorRef& t, const char* op, const char* name) {
  B12X_CHECK_ARG(t.data != nullptr || t.numel() == 0, op, ": ", name, " is a null pointer with ",
                 t.numel(), " elements");
  B12X_CHECK_ARG(t.ndim >= 0 && t.ndim <= kMaxDims, op, ": ", name, " has ndim=", t.ndim,
                 " (supported 0..", kMaxDims, ")");
  for (int d = 0; d < t.ndim; ++d)
    B12X_CHECK_ARG(t.shape[d] >= 0, op, ": ", name, " has negative size ", t.shape[d], " in dim ",
                   d);
  const int bv = dtype_block_values(t.dtype);
  if (bv > 1 && t.ndim > 0) {
    B12X_CHECK_ARG(t.stride[t.ndim - 1] == 1 || t.shape[t.ndim - 1] <= 1, op, ": ", name, " (",
                   dtype_name(t.dtype), ") must be contiguous in its last dim, got stride ",
                   t.stride[t.ndim - 1]);
    B12X_CHECK_ARG(t.shape[t.ndim - 1] % bv == 0, op, ": ", name, " (", dtype_name(t.dtype),
                   ") last dim ", t.shape[t.ndim - 1], " is not a multiple of its block of ", bv,
                   " values");
    for (int d = 0; d + 1 < t.ndim; ++d)
      B12X_CHECK_ARG(t.stride[d] % bv == 0, op, ": ", name, " (", dtype_name(t.dtype), ") stride ",
                     t.stride[d], " of dim ", d, " is not a whole number of ", bv, "-value blocks");
  }
}

void check_dtype(const TensorRef& t, const char* op, const char* name,
                 std::initializer_list<DType> allowed) {
  for (DType a : allowed)
    if (a == t.dtype) return;
  std::ostringstream os;
  bool first = true;
  for (DType a : allowed) {
    os << (first ? "" : ", ") << dtype_name(a);
    first = false;
  }
  B12X_FAIL(Status::kInvalidArgument, op, ": ", name, " has dtype ", dtype_name(t.dtype),
            " (supported: ", os.str(), ")");
}

void check_ndim(const TensorRef& t, const char* op, const char* name, int ndim) {
  B12X_CHECK_ARG(t.ndim == ndim, op, ": ", name, " must be ", ndim, "-D, got ", t.describe());
}

void check_shape(const TensorRef& t, const char* op, const char* name,
                 std::initializer_list<int64_t> expected) {
  bool ok = t.ndim == static_cast<int>(expected.size());
  int d = 0;
  for (int64_t e : expected) {
    if (ok && e >= 0 && t.shape[d] != e) ok = false;
    ++d;
  }
  if (ok) return;
  std::ostringstream os;
  os << "[";
  d = 0;
  for (int64_t e : expected) {
    os << (d++ ? ", " : "");
    if (e < 0)
      os << "*";
    else
      os << e;
  }
  os << "]";
  B12X_FAIL(Status::kInvalidArgument, op, ": ", name, " must have shape ", os.str(), ", got ",
            t.describe());
}

void check_contiguous(const TensorRef& t, const char* op, const char* name) {
  B12X_CHECK_ARG(t.is_contiguous(), op, ": ", name, " must be contiguous, got ", t.describe());
}

void check_inner_contiguous(const TensorRef& t, const char* op, const char* name) {
  B12X_CHECK_ARG(t.ndim == 0 || t.shape[t.ndim - 1] <= 1 || t.stride[t.ndim - 1] == 1, op, ": ",
                 name, " must be contiguous in its last dim, got ", t.describe());
}

void check_aligned(const TensorRef& t, const char* op, const char* name, int bytes) {
  const auto addr = reinterpret_cast<uintptr_t>(t.data);
  B12X_CHECK_ARG(addr % bytes == 0, op, ": ", name, " pointer 0x", std::hex, addr, std::dec,
                 " is not ", bytes, "-byte aligned");
  for (int d = 0; d + 1 < t.ndim; ++d)
    B12X_CHECK_ARG(t.shape[d] <= 1 || t.byte_stride(d) % bytes == 0, op, ": ", name,
                   " stride of dim ", d, " (", t.byte_stride(d), " bytes) is not a multiple of ",
                   bytes, " bytes");
}

void check_device(const TensorRef& t, const char* op, const char* name, int device) {
  B12X_CHECK_ARG(
      t.device == device, op, ": ", name, " is on ",
      t.device == kHostDevice ? std::string("the host") : "device " + std::to_string(t.device),
      ", expected ",
      device == kHostDevice ? std::string("the host") : "device " + std::to_string(device));
}

void check_same_device(const TensorRef& a, const char* a_name, const TensorRef& b,
                       const char* b_name, const char* op) {
  B12X_CHECK_ARG(a.device == b.device, op, ": ", a_name, " (device ", a.device, ") and ", b_name,
                 " (device ", b.device, ") must be on the same device");
}

}  // namespace b12x
