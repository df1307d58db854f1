// C ABI: core queries and the descriptor conversion shared by every area.
#include <cstring>
#include <new>

#include "b12x/c_api.h"
#include "b12x/runtime.h"
#include "c_api/c_api_util.h"

namespace b12x::capi {
namespace {
thread_local std::string t_last_error;
}
void set_last_error(const std::string& message) {
  t_last_error = message;
}
void clear_last_error() {
  t_last_error.clear();
}
const char* last_error_c_str() {
  return t_last_error.c_str();
}

TensorRef to_ref(const b12x_tensor* t, const char* op, const char* name) {
  TensorRef r;
  if (t == nullptr) return r;
  B12X_CHECK_ARG(t->ndim >= 0 && t->ndim <= kMaxDims, op, ": ", name, " has ndim=", t->ndim,
                 " (supported 0..", kMaxDims, ")");
  B12X_CHECK_ARG(t->dtype >= 0 && t->dtype < kNumDTypes, op, ": ", name, " has dtype code ",
                 t->dtype, " (supported 0..", kNumDTypes - 1, ")");
  r.data = t->data;
  r.dtype = static_cast<DType>(t->dtype);
  r.ndim = t->ndim;
  for (int d = 0; d < t->ndim; ++d) {
    r.shape[d] = t->shape[d];
    r.stride[d] = t->strides[d];
  }
  r.device = t->device;
  check_defined(r, op, name);
  return r;
}

TensorRef to_ref_required(const b12x_tensor* t, const char* op, const char* name) {
  B12X_CHECK_ARG(t != nullptr, op, ": ", name, " is required but was not given");
  return to_ref(t, op, name);
}

}  // namespace b12x::capi

using namespace b12x;

extern "C" {

const char* b12x_last_error(void) {
  return capi::last_error_c_str();
}
const char* b12x_status_name(b12x_status s) {
  return status_name(static_cast<Status>(s));
}
const char* b12x_version(void) {
  return version();
}
const char* b12x_compiled_archs(void) {
  return compiled_arch_string();
}
const char* b12x_dtype_name(int32_t dtype) {
  return dtype_name(static_cast<DType>(dtype));
}
int32_t b12x_device_count(void) {
  return device_count();
}

b12x_status b12x_device_query(int32_t ordinal, int32_t* cc, int32_t* sm_count,
                              int32_t* arch_compiled, char* name, size_t name_len) {
  return capi::guard([&] {
    const DeviceInfo& d = device_info(ordinal);
    if (cc) *cc = d.cc_major * 10 + d.cc_minor;
    if (sm_count) *sm_count = d.sm_count;
    if (arch_compiled) *arch_compiled = d.arch_compiled ? 1 : 0;
    if (name && name_len > 0) {
      std::strncpy(name, d.name.c_str(), name_len - 1);
      name[name_len - 1] = 0;
    }
  });
}

b12x_status b12x_freeze_kernel_resolution(const char* reason) {
  return capi::guard([&] { freeze_kernel_resolution(reason ? reason : ""); });
}
b12x_status b12x_unfreeze_kernel_resolution(void) {
  return capi::guard([&] { unfreeze_kernel_resolution(); });
}
int32_t b12x_kernel_resolution_frozen(void) {
  return kernel_resolution_frozen() ? 1 : 0;
}

}  // extern "C"
