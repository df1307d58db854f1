// b12x: host-memory quantize / dequantize for every block format, scale-grid swizzle, and
// scalar codecs over arrays.
//
// These are the CPU packers and oracles; they use the same B12X_HD codecs as the kernels
// (src/formats/{scalar,block,ggml}.h), so GPU results can be compared bit for bit. The exact
// rules (operation order, rounding, zero blocks) are documented in src/formats/block.h.
//
// Layouts (rows x k values, row-major, contiguous):
//   NVFP4     packed [rows, k/2] (element 2i in the low nibble), UE4M3 scales [rows, k/16]
//   MXFP4     packed [rows, k/2], E8M0 scales [rows, k/32]
//   MXFP8     E4M3 [rows, k], E8M0 scales [rows, k/32]
//   block FP8 E4M3 [rows, k], fp32 scales [ceil(rows/block_rows), ceil(k/128)] (multiplied),
//             block_rows = 128 (DeepSeek weights, 128x128 tiles) or 1 (1x128 activation groups)
//   FP8       E4M3 [rows, k], one fp32 scale (multiplied)
//   Q8_0 / IQ2_XXS / IQ2_XS: GGML blocks, k/32*34 / k/256*66 / k/256*74 bytes per row
// Scale grids are returned in linear (row-major) layout; swizzle_block_scale() produces the
// 128x4 MMA layout.
#pragma once

#include <cstdint>
#include <string>

#include "b12x/types.h"

namespace b12x::formats {

/// MX block-scale rule. Checkpoints differ by one exponent on many blocks: pin the one used.
enum class MxScaleRule : int32_t {
  kFloor = 0,  ///< OCP MX v1.0: X = 2^(floor(log2 amax) - emax_elem) (may clip the block max)
  kCeil = 1,   ///< X = 2^ceil(log2(amax / max_elem)) (never clips; TRT-LLM / FlashInfer)
};
/// E8M0 scale byte written for an all-zero MX block (payload is zero either way).
enum class MxZeroBlockScale : int32_t {
  kOne = 127,  ///< 2^0: the b12x MXFP8 row quantizer
  kZero = 0,   ///< OCP reference, b12x MoE helper
};

/// Block sizes (values per scale).
inline constexpr int kNvfp4Block = 16;
inline constexpr int kMxBlock = 32;
inline constexpr int kBlockFp8Cols = 128;

// ---- pointer-level row functions (host memory) -----------------------------------------------
// Every function checks its sizes and pointers and throws b12x::Error(kInvalidArgument) naming
// the argument (e.g. "quantize_nvfp4: k=40 is not a whole number of NVFP4 blocks (16 values)").

/// NVFP4 with the fp32 global scale gs in the multiply convention (gs = 448*6 / amax_tensor).
void quantize_nvfp4(const float* x, int64_t rows, int64_t k, float global_scale, uint8_t* packed,
                    uint8_t* scales);
void dequantize_nvfp4(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t k,
                      float global_scale, float* out);
/// gs = 448*6 / amax(x) (0 for an all-zero tensor); the convention used by tests and vLLM.
float nvfp4_global_scale(const float* x, int64_t n);

void quantize_mxfp4(const float* x, int64_t rows, int64_t k, MxScaleRule rule,
                    MxZeroBlockScale zero_block, uint8_t* packed, uint8_t* scales);
void dequantize_mxfp4(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t k,
                      float* out);

/// MXFP8: scale = pow2_ceil(amax/448) (integer bit rule), values e4m3 satfinite.
void quantize_mxfp8(const float* x, int64_t rows, int64_t k, MxZeroBlockScale zero_block,
                    uint8_t* values, uint8_t* scales);
void dequantize_mxfp8(const uint8_t* values, const uint8_t* scales, int64_t rows, int64_t k,
                      float* out);

/// DeepSeek block FP8: s = amax/448 per (block_rows x 128) tile, q = e4m3(x / s).
/// Partial edge tiles are allowed (the scale grid uses ceil), as in DeepSeek checkpoints.
void quantize_block_fp8(const float* x, int64_t rows, int64_t k, int64_t block_rows,
                        uint8_t* values, float* scales);
void dequantize_block_fp8(const uint8_t* values, const float* scales, int64_t rows, int64_t k,
                          int64_t block_rows, float* out);
/// b12x load-time rule (b12x-contract §1.6): 128x128 blocks whose scale is an exact power of two
/// keep their values (byte = exponent); others are rebuilt (q*s), and requantized with
/// scale = pow2_ceil(amax/448). Output: E4M3 [rows, k] and E8M0 bytes [ceil(rows/128),
/// ceil(k/128)]. Throws on a non-finite or negative scale.
void requantize_block_fp8_to_ue8m0(const uint8_t* values, const float* scales, int64_t rows,
                                   int64_t k, uint8_t* out_values, uint8_t* out_scales);

/// Per-tensor FP8: if static_scale > 0 it is used, else scale = amax/448 (0 for all-zero x).
/// Returns the scale used (multiplied at decode).
float quantize_fp8_per_tensor(const float* x, int64_t n, float static_scale, uint8_t* values);
void dequantize_fp8_per_tensor(const uint8_t* values, int64_t n, float scale, float* out);

/// GGML Q8_0 (ggml quantize_row_q8_0_ref, bit-exact) and decode.
void quantize_q8_0(const float* x, int64_t rows, int64_t k, uint8_t* blocks);
void dequantize_q8_0(const uint8_t* blocks, int64_t rows, int64_t k, float* out);
/// GGML IQ2 decode (bit-exact with ggml dequantize_row_iq2_xxs / _xs).
void dequantize_iq2_xxs(const uint8_t* blocks, int64_t rows, int64_t k, float* out);
void dequantize_iq2_xs(const uint8_t* blocks, int64_t rows, int64_t k, float* out);
/// Simple IQ2 encoders (no importance matrix): per 8-value group the grid point and sign
/// pattern (even number of negatives, flipping the cheapest element) minimising the squared
/// error, per sub-block scale (4 bits) by exhaustive search, fp16 block scale d from a few
/// candidates derived from the block maximum. For tests and demos, not model-quality.
void quantize_iq2_xxs(const float* x, int64_t rows, int64_t k, uint8_t* blocks);
void quantize_iq2_xs(const float* x, int64_t rows, int64_t k, uint8_t* blocks);

/// 128x4 swizzle of `batch` grids [rows, cols] (contiguous) into `batch` consecutive swizzled
/// grids of pad128(rows)*pad4(cols) bytes; padding bytes are `pad` (0 NVFP4, 127 MX).
void swizzle_block_scale(const uint8_t* src, int64_t batch, int64_t rows, int64_t cols, uint8_t pad,
                         uint8_t* dst);
void unswizzle_block_scale(const uint8_t* src, int64_t batch, int64_t rows, int64_t cols,
                           uint8_t* dst);
int64_t swizzled_block_scale_bytes(int64_t rows, int64_t cols);

// ---- scalar codecs over arrays -------------------------------------------------------------
/// Encoding mode: for E4M3/E5M2 kSatFinite or kNoSat (E2M1, UE4M3 are always satfinite);
/// for UE8M0 kRz (floor) or kRp (ceil), both satfinite; BF16/FP16 ignore it (RNE).
enum class CvtMode : int32_t { kSatFinite = 0, kNoSat = 1, kRz = 0, kRp = 1 };
/// dtype in {kFP8E4M3, kFP8E5M2, kFP4E2M1 (one code per output byte, unpacked), kUE8M0, kUE4M3,
/// kBF16, kFP16 (uint16 bit patterns)}.
void encode_scalar(DType dtype, CvtMode mode, const float* in, void* out, int64_t n);
void decode_scalar(DType dtype, const void* in, float* out, int64_t n);

// ---- device self-check (b12x selftest) ---------------------------------------------------------
struct DeviceCodecReport {
  int64_t cvt_checked = 0;     ///< scalar conversions compared with the hardware cvt
  int64_t cvt_mismatches = 0;  ///< must be 0
  int64_t block_bytes_checked = 0;
  int64_t block_mismatches = 0;   ///< device block codecs vs host, bytes differing (must be 0)
  bool hardware_fp4_cvt = false;  ///< e2m1x2/ue8m0x2 cvt compiled for this device (sm_100a+)
  std::string detail;             ///< per-conversion counts
};
/// Runs the shared codecs on `device`: the scalar encoders against the hardware cvt on `samples`
/// strided float32 bit patterns (both operand slots), and the block codecs (NVFP4, MXFP4 ceil,
/// MXFP8, Q8_0, IQ2 decode) against the host implementation. Synchronizes the device.
DeviceCodecReport check_device_codecs(int device, int64_t samples = int64_t(1) << 24);

// ---- descriptor-level entry points (used by the C ABI) ----------------------------------------
enum class BlockFormat : int32_t {
  kNvfp4 = 1,
  kMxfp4 = 2,
  kMxfp8 = 3,
  kBlockFp8 = 4,
  kFp8PerTensor = 5,
  kQ8_0 = 6,
  kIq2Xxs = 7,
  kIq2Xs = 8,
};
const char* block_format_name(BlockFormat f) noexcept;

struct QuantParams {
  BlockFormat format = BlockFormat::kNvfp4;
  MxScaleRule mx_rule = MxScaleRule::kFloor;
  MxZeroBlockScale zero_block = MxZeroBlockScale::kOne;
  /// NVFP4: the global scale gs. FP8 per tensor: a static scale (> 0) or 0 to compute amax/448.
  float global_scale = 0.f;
  /// Block FP8: 128 (weights) or 1 (activations).
  int64_t block_rows = 128;
};

/// src: host fp32/bf16/fp16 [..., k] contiguous. values/scales: see the layout table above;
/// 1-byte containers may be uint8 or the format's dtype (FP4 packed is FP4_E2M1 [.., k] or uint8
/// [.., k/2]; GGML blocks are Q8_0/IQ2_* [.., k] or uint8 [.., bytes]). scales: absent for GGML;
/// for per-tensor FP8 one fp32 value (written when the scale is computed).
void quantize(const TensorRef& src, const TensorRef& values, const TensorRef& scales,
              const QuantParams& params);
/// out: host fp32/bf16/fp16 [..., k] contiguous.
void dequantize(const TensorRef& values, const TensorRef& scales, const TensorRef& out,
                const QuantParams& params);

}  // namespace b12x::formats
