// Launcher of the extend scheduler kernel (row-tile prefix from cu_seqlens_q, on the device).
#include "attention/kernels/paged_attention.cuh"
#include "attention/paged_kernels.h"

namespace b12x::attention::detail {
void launch_paged_schedule(const PagedParams& p, cudaStream_t stream, bool pdl) {
  const int threads = p.batch >= 512 ? 1024 : (p.batch >= 128 ? 512 : 128);
  launch_kernel(paged_schedule_kernel<0>, dim3(1), threads, 0, stream, pdl, p);
}
}  // namespace b12x::attention::detail
