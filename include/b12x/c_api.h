/* b12x C ABI.
 *
 * A plain C interface over the C++ API, used by the Python package (ctypes, no compile-time
 * Python or PyTorch) and by engines written in other languages. Conventions:
 *  - every function returns a b12x_status (0 = success); on failure the thread-local message is
 *    available from b12x_last_error() and names the argument, the value and the supported set;
 *  - tensors cross as b12x_tensor descriptors (pointer, dtype, shape, strides in values, device);
 *  - outputs are always passed in; nothing here allocates device memory except the explicit
 *    *_prepare / *_pack functions that document ownership;
 *  - streams are cudaStream_t passed as void* (NULL = legacy default stream).
 * Area headers under b12x/c_api/ declare the op families (each area's GPU ops, and the CPU
 * reference of its ops as b12x_ref_*); this header pulls them all in. */
#ifndef B12X_C_API_H_
#define B12X_C_API_H_

#include "b12x/c_api/attention.h"
#include "b12x/c_api/core.h"
#include "b12x/c_api/embedding.h"
#include "b12x/c_api/formats.h"
#include "b12x/c_api/gemm.h"
#include "b12x/c_api/integration.h"
#include "b12x/c_api/moe.h"
#include "b12x/c_api/quantize.h"

#endif /* B12X_C_API_H_ */
