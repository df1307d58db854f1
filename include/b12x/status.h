// b12x: status codes and the exception every C++ entry point throws.
//
// Messages name the argument, the value and the supported set, e.g.
//   "mm_nvfp4: K=1000 is not a multiple of 32 (NVFP4 needs K % 32 == 0)".
// The C ABI (c_api.h) catches b12x::Error and returns its code; the message is then available
// from b12x_last_error().
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace b12x {

/// @brief Status codes shared by the C++ API and the C ABI (values are part of the ABI).
enum class Status : int32_t {
  kOk = 0,
  kInvalidArgument = 1,  ///< a caller-supplied value is out of the supported set
  kUnsupported = 2,      ///< a valid request this build/device cannot serve
  kCudaError = 3,        ///< a CUDA runtime call failed
  kNoDevice = 4,         ///< no CUDA device is visible
  kArchNotCompiled = 5,  ///< the device's architecture is not in the compiled list
  kCaptureActive = 6,    ///< a host-only step (plan, prepare) was called during stream capture
  kFrozen = 7,           ///< kernel resolution is frozen and this plan was not warmed up
  kInternal = 8,         ///< a bug in b12x
  kOutOfMemory = 9,
  kIoError = 10,  ///< file I/O or a malformed file
};

/// @brief Short stable name of a status code ("invalid_argument", ...).
const char* status_name(Status s) noexcept;

/// @brief The exception thrown by every b12x C++ entry point.
class Error : public std::runtime_error {
 public:
  Error(Status code, std::string message) : std::runtime_error(std::move(message)), code_(code) {}
  Status code() const noexcept { return code_; }

 private:
  Status code_;
};

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
[[noreturn]] void throw_error(Status code, const std::string& message);
}  // namespace detail

}  // namespace b12x

/// Throw b12x::Error(code, message) where message is the streamed concatenation of the arguments.
#define B12X_FAIL(code, ...) \
  ::b12x::detail::throw_error((code), ::b12x::detail::concat(__VA_ARGS__))

/// Validate a caller-supplied value; the message must name the argument, value and supported set.
#define B12X_CHECK_ARG(cond, ...)                                          \
  do {                                                                     \
    if (!(cond)) B12X_FAIL(::b12x::Status::kInvalidArgument, __VA_ARGS__); \
  } while (0)

/// A request that is well formed but not supported by this build or device.
#define B12X_CHECK_SUPPORTED(cond, ...)                                \
  do {                                                                 \
    if (!(cond)) B12X_FAIL(::b12x::Status::kUnsupported, __VA_ARGS__); \
  } while (0)

/// An internal invariant; failing it is a b12x bug.
#define B12X_ASSERT(cond, ...)                                                              \
  do {                                                                                      \
    if (!(cond))                                                                            \
      B12X_FAIL(::b12x::Status::kInternal, __FILE__, ":", __LINE__, ": assertion `", #cond, \
                "` failed: ", ##__VA_ARGS__);                                               \
  } while (0)
