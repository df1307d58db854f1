// Internal helpers for the C ABI: descriptor conversion and the exception firewall.
#pragma once

#include <string>

#include "b12x/c_api/core.h"
#include "b12x/status.h"
#include "b12x/types.h"

namespace b12x::capi {

/// Thread-local last error used by b12x_last_error().
void set_last_error(const std::string& message);
void clear_last_error();
const char* last_error_c_str();

/// Convert and sanity-check a descriptor (null descriptor -> empty TensorRef with data nullptr,
/// ndim 0; callers treat that as "absent" for optional arguments).
TensorRef to_ref(const b12x_tensor* t, const char* op, const char* name);
/// Same, but the descriptor must be present.
TensorRef to_ref_required(const b12x_tensor* t, const char* op, const char* name);

/// Runs `body`, mapping b12x::Error and any other exception to a status + last-error message.
template <typename F>
b12x_status guard(F&& body) noexcept {
  try {
    clear_last_error();
    body();
    return B12X_OK;
  } catch (const Error& e) {
    set_last_error(e.what());
    return static_cast<b12x_status>(e.code());
  } catch (const std::bad_alloc&) {
    set_last_error("out of host memory");
    return B12X_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(std::string("internal error: ") + e.what());
    return B12X_ERROR_INTERNAL;
  } catch (...) {
    set_last_error("internal error: unknown exception");
    return B12X_ERROR_INTERNAL;
  }
}

}  // namespace b12x::capi
