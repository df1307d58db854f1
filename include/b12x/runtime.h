// b12x: version, compiled architectures, device queries, capture guards and logging.
#pragma once

#include <string>
#include <vector>

#include "b12x/types.h"

namespace b12x {

/// @brief Library version "MAJOR.MINOR.PATCH".
const char* version() noexcept;
/// @brief Compiled SM versions as 10*major+minor with the arch-specific flag, e.g. {90, 120, 121}
/// for "90a;120a;121a".
std::vector<int> compiled_archs();
/// @brief The compiled architecture list as given to CMake ("90a;120a;121a").
const char* compiled_arch_string() noexcept;

/// @brief Kernel family a device runs. Dispatch is on the exact compute capability.
enum class ArchFamily : int32_t {
  kNone = 0,      ///< no device / not compiled
  kSm89 = 89,     ///< Ada: portable mma.sync path
  kSm90 = 90,     ///< Hopper: portable mma.sync path
  kSm120 = 120,   ///< Blackwell RTX PRO 6000 / 5090
  kSm121 = 121,   ///< GB10 (DGX Spark)
};

struct DeviceInfo {
  int ordinal = -1;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int64_t smem_per_block_optin = 0;  ///< bytes
  int64_t l2_bytes = 0;
  int64_t global_mem_bytes = 0;
  ArchFamily family = ArchFamily::kNone;
  bool arch_compiled = false;  ///< a cubin for this exact capability is in the library
};

/// @brief Number of visible CUDA devices (0 without a driver or GPU; never throws).
int device_count() noexcept;
/// @brief Properties of `ordinal` (cached). Throws kNoDevice / kInvalidArgument.
const DeviceInfo& device_info(int ordinal);
/// @brief Current device of the calling thread (cudaGetDevice).
int current_device();
/// @brief Throws kArchNotCompiled naming the device, its capability and the compiled list
/// when `ordinal` cannot run this library's kernels.
void require_compiled_arch(int ordinal, const char* op);

/// @brief True while `stream` (or the legacy stream, for nullptr) is being captured.
bool stream_is_capturing(Stream stream);
/// @brief Host-only steps (plan, prepare, pack) call this; throws kCaptureActive while capturing.
void refuse_during_capture(Stream stream, const char* op);

// ---- kernel-resolution freeze (warm up, freeze, then capture) -------------------------------
void freeze_kernel_resolution(const std::string& reason);
void unfreeze_kernel_resolution();
bool kernel_resolution_frozen();

// ---- logging: B12X_LOG_LEVEL (0 off, 1 errors+dispatch names, 3 shapes, 5 stats) ------------
int log_level();
void log_message(int level, const std::string& message);

}  // namespace b12x
