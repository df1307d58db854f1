// Generic MoE GEMM engine instances for one weight format (see moe_gemm_unit.cuh).
#include "moe/moe_gemm_unit.cuh"

B12X_MOE_GEMM_UNIT(q8_0, kWQ8_0)
