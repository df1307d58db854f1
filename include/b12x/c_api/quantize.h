/* b12x C ABI: quantize. */
#ifndef B12X_C_API_QUANTIZE_H_
#define B12X_C_API_QUANTIZE_H_

#include "b12x/c_api/core.h"

#endif /* B12X_C_API_QUANTIZE_H_ */
