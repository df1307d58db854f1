/* b12x C ABI: moe. */
#ifndef B12X_C_API_MOE_H_
#define B12X_C_API_MOE_H_

#include "b12x/c_api/core.h"

#endif /* B12X_C_API_MOE_H_ */
