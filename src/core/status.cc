#include "b12x/status.h"

namespace b12x {

const char* status_name(Status s) noexcept {
  switch (s) {
    case Status::kOk:
      return "ok";
    case Status::kInvalidArgument:
      return "invalid_argument";
    case Status::kUnsupported:
      return "unsupported";
    case Status::kCudaError:
      return "cuda_error";
    case Status::kNoDevice:
      return "no_device";
    case Status::kArchNotCompiled:
      return "arch_not_compiled";
    case Status::kCaptureActive:
      return "capture_active";
    case Status::kFrozen:
      return "frozen";
    case Status::kInternal:
      return "internal";
    case Status::kOutOfMemory:
      return "out_of_memory";
    case Status::kIoError:
      return "io_error";
  }
  return "unknown";
}

namespace detail {
void throw_error(Status code, const std::string& message) {
  throw Error(code, message);
}
}  // namespace detail

}  // namespace b12x
