// Host-side launch helper shared by the MoE launch units (CUDA runtime; not for moe.cc).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "b12x/types.h"
#include "core/cuda_check.h"

namespace b12x::moe::detail {

/// Launch with (pdl) or without the programmatic-stream-serialization attribute. A kernel
/// launched with it may start before its predecessor in the stream finishes; every MoE kernel
/// calls griddepcontrol.wait before touching data its predecessor writes (or reads).
template <typename... KArgs, typename... Args>
void launch_k(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, Stream stream, bool pdl,
              Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  B12X_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace b12x::moe::detail
