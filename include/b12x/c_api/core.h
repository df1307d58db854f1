/* b12x C ABI: status codes, tensor descriptor, version and device queries. */
#ifndef B12X_C_API_CORE_H_
#define B12X_C_API_CORE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define B12X_C_API extern "C" __attribute__((visibility("default")))
#else
#define B12X_C_API __attribute__((visibility("default")))
#endif

/* Status codes: identical values to b12x::Status. */
typedef int32_t b12x_status;
#define B12X_OK 0
#define B12X_ERROR_INVALID_ARGUMENT 1
#define B12X_ERROR_UNSUPPORTED 2
#define B12X_ERROR_CUDA 3
#define B12X_ERROR_NO_DEVICE 4
#define B12X_ERROR_ARCH_NOT_COMPILED 5
#define B12X_ERROR_CAPTURE_ACTIVE 6
#define B12X_ERROR_FROZEN 7
#define B12X_ERROR_INTERNAL 8
#define B12X_ERROR_OUT_OF_MEMORY 9
#define B12X_ERROR_IO 10

/* Element types: identical values to b12x::DType. */
#define B12X_DTYPE_BF16 0
#define B12X_DTYPE_FP16 1
#define B12X_DTYPE_FP32 2
#define B12X_DTYPE_INT32 3
#define B12X_DTYPE_INT64 4
#define B12X_DTYPE_UINT8 5
#define B12X_DTYPE_FP8_E4M3 6
#define B12X_DTYPE_FP8_E5M2 7
#define B12X_DTYPE_FP4_E2M1 8 /* packed, 2 values per byte, element 2i in the low nibble */
#define B12X_DTYPE_UE8M0 9
#define B12X_DTYPE_UE4M3 10
#define B12X_DTYPE_Q8_0 11    /* GGML blocks of 32 values / 34 bytes */
#define B12X_DTYPE_IQ2_XXS 12 /* GGML blocks of 256 values / 66 bytes */
#define B12X_DTYPE_IQ2_XS 13  /* GGML blocks of 256 values / 74 bytes */
#define B12X_DTYPE_FP64 14
#define B12X_DTYPE_INT8 15

#define B12X_MAX_DIMS 6
#define B12X_HOST_DEVICE (-1)

/* A non-owning tensor view. shape and strides count values of dtype (see b12x/types.h). */
typedef struct b12x_tensor {
  void* data;
  int32_t dtype;
  int32_t ndim;
  int64_t shape[B12X_MAX_DIMS];
  int64_t strides[B12X_MAX_DIMS];
  int32_t device; /* B12X_HOST_DEVICE or a CUDA device ordinal */
} b12x_tensor;

/* Thread-local message of the last failing call on this thread ("" if none). */
B12X_C_API const char* b12x_last_error(void);
B12X_C_API const char* b12x_status_name(b12x_status s);
B12X_C_API const char* b12x_version(void);
/* "90a;120a;121a" */
B12X_C_API const char* b12x_compiled_archs(void);
B12X_C_API const char* b12x_dtype_name(int32_t dtype);
/* Number of visible CUDA devices (0 when there is no driver or GPU). */
B12X_C_API int32_t b12x_device_count(void);
/* Writes cc_major*10+cc_minor, SM count and whether this build runs on it. */
B12X_C_API b12x_status b12x_device_query(int32_t ordinal, int32_t* cc, int32_t* sm_count,
                                         int32_t* arch_compiled, char* name, size_t name_len);
B12X_C_API b12x_status b12x_freeze_kernel_resolution(const char* reason);
B12X_C_API b12x_status b12x_unfreeze_kernel_resolution(void);
B12X_C_API int32_t b12x_kernel_resolution_frozen(void);

#endif /* B12X_C_API_CORE_H_ */
