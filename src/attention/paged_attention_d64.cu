// Paged-attention instantiations for head dim 64 (see kernels/paged_attention.cuh).
#include "attention/kernels/paged_instances.cuh"

namespace b12x::attention::detail {
void register_paged_d64(std::vector<KernelInfo>& out) {
  register_dims<64, 64>(out, "paged_fa2_d64");
}
}  // namespace b12x::attention::detail
