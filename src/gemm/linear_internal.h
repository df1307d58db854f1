// Internal pieces of the linear GEMM host side shared by pack, plan/bind/run and the C ABI.
#pragma once

#include <cstdint>
#include <vector>

#include "b12x/gemm.h"
#include "gemm/linear_layout.h"

namespace b12x::gemm {

struct PackedWeight::Impl {
  lin::WFmt wfmt = lin::WFmt::kNvfp4;
  lin::Geometry geo;
  uint8_t* scale = nullptr;       // primary scale array (device)
  uint8_t* scale2 = nullptr;      // IQ2 sub-scales (device)
  float* output_scale = nullptr;  // kFp8Tensor: device fp32[1]
  int64_t scale_bytes = 0, scale2_bytes = 0;
  /// MXFP4: every E8M0 code <= 135 or 255 (the fold-free splats 2^(e-8) are BF16 numbers); run
  /// takes the fold-free instances where this and Plan::stream_mx_free hold. Refresh updates it,
  /// but refuses to clear it once a plan with stream_mx_free has bound the weight (bound_mx_free:
  /// its captured graphs keep the fold-free instances).
  bool mx_fold_free = false;
  mutable bool bound_mx_free = false;
};

/// Weight format used by the kernels for a linear format.
lin::WFmt weight_format(LinearFormat f);
/// The weight's checkpoint dtype group needs, e.g. "fp4", "fp8", "q8_0".
bool format_is_w4a4(LinearFormat f);
/// Activations quantized inside the op (from bf16/fp16).
bool format_quantizes_inside(LinearFormat f);
/// Activations are bf16/fp16 fed directly to the MMA.
bool format_raw_activations(LinearFormat f);

/// Host images of the packed arrays, built from a validated source (shared by pack() and the
/// packing tests).
struct PackedHost {
  lin::WFmt wfmt;
  lin::Geometry geo;
  std::vector<uint8_t> values, scale, scale2;
  float global_scale = 1.f;
  float output_scale = 1.f;   // kFp8Tensor
  bool mx_fold_free = false;  // kMxfp4: Impl::mx_fold_free
};
/// Validates `src` (host or device tensors) and builds the packed host image.
PackedHost pack_host(const WeightSource& src, const char* op);

}  // namespace b12x::gemm
