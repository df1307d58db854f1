// Names and K granularity of the linear weight formats (declared in b12x/gemm.h). They live in
// the always-built formats area because the CPU reference (src/reference/linear.cc) validates
// with them, so a developer build of B12X_AREAS="moe;reference" links without the gemm area.
#include <string>

#include "b12x/gemm.h"
#include "b12x/status.h"

namespace b12x::gemm {

const char* format_name(LinearFormat f) noexcept {
  switch (f) {
    case LinearFormat::kFp8Tensor:
      return "fp8_tensor";
    case LinearFormat::kFp8Block:
      return "fp8_block";
    case LinearFormat::kMxfp8:
      return "mxfp8";
    case LinearFormat::kNvfp4:
      return "nvfp4";
    case LinearFormat::kNvfp4W4A16:
      return "nvfp4_w4a16";
    case LinearFormat::kMxfp4:
      return "mxfp4";
    case LinearFormat::kMxfp4W4A8:
      return "mxfp4_w4a8";
    case LinearFormat::kMxfp4W4A16:
      return "mxfp4_w4a16";
    case LinearFormat::kIq2Xxs:
      return "iq2_xxs";
    case LinearFormat::kIq2Xs:
      return "iq2_xs";
    case LinearFormat::kQ8_0:
      return "q8_0";
  }
  return "invalid_format";
}

LinearFormat format_from_name(const std::string& name) {
  for (int i = 0; i < kNumLinearFormats; ++i)
    if (name == format_name(static_cast<LinearFormat>(i))) return static_cast<LinearFormat>(i);
  B12X_FAIL(Status::kInvalidArgument, "unknown linear format '", name,
            "' (supported: fp8_tensor, fp8_block, mxfp8, nvfp4, nvfp4_w4a16, mxfp4, mxfp4_w4a8, "
            "mxfp4_w4a16, iq2_xxs, iq2_xs, q8_0)");
}

int format_k_multiple(LinearFormat f) noexcept {
  switch (f) {
    case LinearFormat::kFp8Block:
      return 128;
    case LinearFormat::kIq2Xxs:
    case LinearFormat::kIq2Xs:
      return 256;
    default:
      return 32;
  }
}

}  // namespace b12x::gemm
