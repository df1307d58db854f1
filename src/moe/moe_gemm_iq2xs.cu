// Generic MoE GEMM engine instances for one weight format (see moe_gemm_unit.cuh).
#include "moe/moe_gemm_unit.cuh"

B12X_MOE_GEMM_UNIT(iq2xs, kWIq2xs)
