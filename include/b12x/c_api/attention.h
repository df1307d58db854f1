/* b12x C ABI: attention. */
#ifndef B12X_C_API_ATTENTION_H_
#define B12X_C_API_ATTENTION_H_

#include "b12x/c_api/core.h"

#endif /* B12X_C_API_ATTENTION_H_ */
