/* b12x C ABI: formats. */
#ifndef B12X_C_API_FORMATS_H_
#define B12X_C_API_FORMATS_H_

#include "b12x/c_api/core.h"

#endif /* B12X_C_API_FORMATS_H_ */
