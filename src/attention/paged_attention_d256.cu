// Paged-attention instantiations for head dim 256 (see kernels/paged_attention.cuh).
#include "attention/kernels/paged_instances.cuh"

namespace b12x::attention::detail {
void register_paged_d256(std::vector<KernelInfo>& out) {
  register_dims<256, 256>(out, "paged_fa2_d256");
}
}  // namespace b12x::attention::detail
