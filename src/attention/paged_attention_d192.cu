// Paged-attention instantiations for head dims (192, 192) and (192 qk, 128 vo).
#include "attention/kernels/paged_instances.cuh"

namespace b12x::attention::detail {
void register_paged_d192(std::vector<KernelInfo>& out) {
  register_dims<192, 192>(out, "paged_fa2_d192");
  register_dims<192, 128>(out, "paged_fa2_d192_vo128");
}
}  // namespace b12x::attention::detail
