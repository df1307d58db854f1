// Paged-attention instantiations for head dim 128 (see kernels/paged_attention.cuh).
#include "attention/kernels/paged_instances.cuh"

namespace b12x::attention::detail {
void register_paged_d128(std::vector<KernelInfo>& out) {
  register_dims<128, 128>(out, "paged_fa2_d128");
}
}  // namespace b12x::attention::detail
