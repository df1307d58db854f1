/* b12x C ABI: embedding. */
#ifndef B12X_C_API_EMBEDDING_H_
#define B12X_C_API_EMBEDDING_H_

#include "b12x/c_api/core.h"

#endif /* B12X_C_API_EMBEDDING_H_ */
