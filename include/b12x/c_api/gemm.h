/* b12x C ABI: gemm. */
#ifndef B12X_C_API_GEMM_H_
#define B12X_C_API_GEMM_H_

#include "b12x/c_api/core.h"

#endif /* B12X_C_API_GEMM_H_ */
