/* b12x C ABI: formats. Host-memory quantize / dequantize for every block format (ggml-style row
 * functions over b12x_tensor descriptors), 128x4 scale swizzle, and scalar codecs over arrays.
 * Semantics: include/b12x/formats.h and src/formats/block.h. */
#ifndef B12X_C_API_FORMATS_H_
#define B12X_C_API_FORMATS_H_

#include "b12x/c_api/core.h"

/* Block formats (values of b12x::formats::BlockFormat). */
#define B12X_FORMAT_NVFP4 1          /* E2M1 x16 + UE4M3 scale, fp32 global scale (multiply) */
#define B12X_FORMAT_MXFP4 2          /* E2M1 x32 + E8M0 scale */
#define B12X_FORMAT_MXFP8 3          /* E4M3 x32 + E8M0 scale (pow2_ceil(amax/448)) */
#define B12X_FORMAT_BLOCK_FP8 4      /* E4M3 + fp32 scale per 128x128 (or 1x128) tile */
#define B12X_FORMAT_FP8_PER_TENSOR 5 /* E4M3 + one fp32 scale */
#define B12X_FORMAT_Q8_0 6           /* GGML Q8_0 */
#define B12X_FORMAT_IQ2_XXS 7        /* GGML IQ2_XXS (quantize = simple encoder) */
#define B12X_FORMAT_IQ2_XS 8         /* GGML IQ2_XS (quantize = simple encoder) */

/* MX scale rules. */
#define B12X_MX_SCALE_FLOOR 0 /* OCP MX v1.0: 2^(floor(log2 amax) - emax_elem) */
#define B12X_MX_SCALE_CEIL 1  /* 2^ceil(log2(amax / max_elem)) */

/* Scalar encode modes: E4M3/E5M2 satfinite or no saturation; UE8M0 rz (floor) or rp (ceil). */
#define B12X_CVT_SATFINITE 0
#define B12X_CVT_NOSAT 1
#define B12X_CVT_RZ 0
#define B12X_CVT_RP 1

typedef struct b12x_quant_params {
  int32_t format;           /* B12X_FORMAT_* */
  int32_t mx_scale_rule;    /* MXFP4: B12X_MX_SCALE_FLOOR or _CEIL (MXFP8 is always ceil) */
  int32_t zero_block_scale; /* MX: scale byte of an all-zero block, 127 or 0 */
  float global_scale;       /* NVFP4: gs = 448*6/amax; FP8 per tensor: static scale or 0 */
  int64_t block_rows;       /* block FP8: 128 (weights) or 1 (activations) */
} b12x_quant_params;

/* Fill p with the defaults: mx_scale_rule floor, zero_block_scale 127, block_rows 128. */
B12X_C_API void b12x_quant_params_init(b12x_quant_params* p, int32_t format);

/* src: host fp32/bf16/fp16 [..., k] contiguous. values: the packed container (uint8 or the
 * format's dtype, e.g. FP4_E2M1 [.., k], Q8_0 [.., k], or uint8 bytes). scales: NVFP4 uint8/UE4M3
 * [.., k/16]; MX uint8/UE8M0 [.., k/32]; block FP8 fp32 [ceil(rows/block_rows), ceil(k/128)];
 * FP8 per tensor fp32 [1] (written when computed); NULL for GGML formats. Linear scale layout. */
B12X_C_API b12x_status b12x_quantize(const b12x_tensor* src, const b12x_tensor* values,
                                     const b12x_tensor* scales, const b12x_quant_params* params);
/* out: host fp32/bf16/fp16 [..., k] contiguous; values/scales as for b12x_quantize. */
B12X_C_API b12x_status b12x_dequantize(const b12x_tensor* values, const b12x_tensor* scales,
                                       const b12x_tensor* out, const b12x_quant_params* params);

/* b12x load-time rule: E4M3 [N, K] + fp32 scales [ceil(N/128), ceil(K/128)] -> E4M3 [N, K] +
 * UE8M0 bytes [ceil(N/128), ceil(K/128)] (power-of-two scales keep their values). */
B12X_C_API b12x_status b12x_requantize_block_fp8_to_ue8m0(const b12x_tensor* values,
                                                          const b12x_tensor* scales,
                                                          const b12x_tensor* out_values,
                                                          const b12x_tensor* out_scales);

/* src: host 1-byte [rows, cols] or [batch, rows, cols] contiguous; dst: host 1-byte
 * [(batch,) pad128(rows), pad4(cols)] contiguous, in the 128x4 MMA layout; padding = pad
 * (0 for NVFP4, 127 for MX). */
B12X_C_API b12x_status b12x_swizzle_block_scale(const b12x_tensor* src, const b12x_tensor* dst,
                                                int32_t pad);
/* Inverse: src [(batch,) pad128(rows), pad4(cols)], dst [(batch,) rows, cols]. */
B12X_C_API b12x_status b12x_unswizzle_block_scale(const b12x_tensor* src, const b12x_tensor* dst);

/* Scalar codecs over host arrays. dtype: B12X_DTYPE_FP8_E4M3, _FP8_E5M2, _FP4_E2M1 (one code per
 * byte), _UE8M0, _UE4M3 (1-byte out), _BF16, _FP16 (uint16 bit patterns out). */
B12X_C_API b12x_status b12x_encode_scalar(int32_t dtype, int32_t mode, const float* in, void* out,
                                          int64_t n);
B12X_C_API b12x_status b12x_decode_scalar(int32_t dtype, const void* in, float* out, int64_t n);

#endif /* B12X_C_API_FORMATS_H_ */
