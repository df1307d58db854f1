// Host-side launch helper shared by the MoE launch units (CUDA runtime; not for moe.cc).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "b12x/types.h"
#include "core/cuda_check.h"
#include "core/launch.h"

namespace b12x::moe::detail {

/// Launch with (pdl) or without the programmatic-stream-serialization attribute. A kernel
/// launched with it may start before its predecessor in the stream finishes; every MoE kernel
/// calls griddepcontrol.wait before touching data its predecessor writes (or reads).
template <typename... KArgs, typename... Args>
void launch_k(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, Stream stream, bool pdl,
              Args&&... args) {
  B12X_CUDA_CHECK(::b12x::detail::launch_ex(kernel, grid, block, smem, stream, pdl, dim3(1, 1, 1),
                                            std::forward<Args>(args)...));
}

}  // namespace b12x::moe::detail
