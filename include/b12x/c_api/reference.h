/* b12x C ABI: reference. */
#ifndef B12X_C_API_REFERENCE_H_
#define B12X_C_API_REFERENCE_H_

#include "b12x/c_api/core.h"

#endif /* B12X_C_API_REFERENCE_H_ */
