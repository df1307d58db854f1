// Checkpoint layers onto the GPU: the MoE expert stack (host memory, see moe_loader.cc) staged on
// the device and prepared for the fused MoE.
#include <cuda_runtime_api.h>

#include "b12x/checkpoint.h"
#include "b12x/moe.h"
#include "b12x/runtime.h"
#include "b12x/status.h"
#include "core/cuda_check.h"

namespace b12x::checkpoint {

namespace {

/// Owns one device allocation holding copies of host tensors.
struct DeviceCopies {
  void* base = nullptr;
  ~DeviceCopies() {
    if (base != nullptr) cudaFree(base);
  }
};

}  // namespace

moe::WeightsPlan prepare_moe(const MoeExpertsSource& src, moe::PreparedExperts& out,
                             Stream stream) {
  const char* op = "checkpoint::prepare_moe";
  refuse_during_capture(stream, op);
  const moe::WeightsPlan plan = moe::plan_weights(src.plan_args);
  const int device = current_device();
  // The values and block scales are host views into `src`; the per-expert global and
  // activation scales stay on the host (prepare_weights reads those from either side).
  const TensorRef* host[4] = {&src.source.w1, &src.source.w1_scale, &src.source.w2,
                              &src.source.w2_scale};
  int64_t offset[4] = {-1, -1, -1, -1};
  int64_t total = 0;
  for (int i = 0; i < 4; ++i) {
    const TensorRef& t = *host[i];
    if (t.data == nullptr) continue;
    B12X_CHECK_ARG(t.device == kHostDevice && t.is_contiguous(), op, ": '", src.prefix,
                   "' source tensor ", i, " is ", t.describe(),
                   " (expected the loader's contiguous host stack)");
    offset[i] = total;
    total += (t.span_bytes() + 255) / 256 * 256;
  }
  DeviceCopies d;
  B12X_CUDA_CHECK(cudaMalloc(&d.base, static_cast<size_t>(total)));
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  moe::SourceWeights dev = src.source;
  TensorRef* dst[4] = {&dev.w1, &dev.w1_scale, &dev.w2, &dev.w2_scale};
  for (int i = 0; i < 4; ++i) {
    if (offset[i] < 0) continue;
    void* p = static_cast<uint8_t*>(d.base) + offset[i];
    B12X_CUDA_CHECK(cudaMemcpyAsync(p, host[i]->data, static_cast<size_t>(host[i]->span_bytes()),
                                    cudaMemcpyHostToDevice, s));
    dst[i]->data = p;
    dst[i]->device = device;
  }
  moe::prepare_weights(plan, dev, out, stream);  // synchronises `stream`: the copies may go
  return plan;
}

}  // namespace b12x::checkpoint
