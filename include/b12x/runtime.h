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
  kNone = 0,     ///< no device / not compiled
  kSm89 = 89,    ///< Ada: portable mma.sync path
  kSm90 = 90,    ///< Hopper: portable mma.sync path
  kSm120 = 120,  ///< Blackwell RTX PRO 6000 / 5090
  kSm121 = 121,  ///< GB10 (DGX Spark)
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

// ---- kernel resolution: registry, warm-up and freeze ----------------------------------------
// Every plan() names the compiled kernels it resolved with a signature string (op family,
// formats, dtypes, tile/regime, split mode: what a run at the plan's capacity launches, never
// sizes) and records it here, per device. b12x::warmup (b12x/warmup.h) plans every regime a
// server will see and launches each signature once, so the CUDA driver's lazy module loading
// (CUDA_MODULE_LOADING=LAZY, the default) happens before serving and outside graph capture.
// After freeze_kernel_resolution() a plan whose signature was never resolved on its device
// throws Status::kFrozen naming the op, the shape, the signature and the freeze reason.

/// One resolved kernel signature.
struct KernelResolution {
  int device = 0;
  std::string op;         ///< the op that resolved it first ("gemm::plan", ...)
  std::string signature;  ///< e.g. "gemm.nvfp4_w4a16 act=bf16 out=bf16 decode nt=1 split=cluster"
  std::string shape;      ///< the shape that resolved it first
  int64_t plans = 0;      ///< plans that resolved it so far
};
/// Every signature resolved in this process, in first-resolution order.
std::vector<KernelResolution> resolved_kernels();
/// Forgets every resolution (tests; a frozen process then refuses every new plan).
void clear_resolved_kernels();
/// From now on a plan whose kernel signature was never resolved throws kFrozen; `reason` is
/// quoted in that error.
void freeze_kernel_resolution(const std::string& reason);
void unfreeze_kernel_resolution();
bool kernel_resolution_frozen();

namespace detail {
/// Called by every plan() once it chose its kernels: records (device, signature), or throws
/// kFrozen when resolution is frozen and the signature is new on that device. `shape` describes
/// the request in the error. Also remembers the signature for last_kernel_signature().
void resolve_kernels(const char* op, int device, const std::string& signature,
                     const std::string& shape);
/// The signature the last plan() on this thread resolved ("" if none): how warm-up learns the
/// signature of a plan without a field in every op's plan struct.
const std::string& last_kernel_signature();
}  // namespace detail

// ---- logging: B12X_LOG_LEVEL (0 off, 1 errors+dispatch names, 3 shapes, 5 stats) ------------
int log_level();
void log_message(int level, const std::string& message);

}  // namespace b12x
