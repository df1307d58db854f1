// Selftest cases for the core and the scalar codecs (CPU only).
#include <cmath>
#include <string>

#include "b12x/types.h"
#include "formats/scalar.h"
#include "selftest.h"

namespace {
using b12x::cli::SelftestResult;
namespace fmt = b12x::fmt;

B12X_SELFTEST("formats", "e4m3/e5m2/e2m1/ue8m0 decode-encode round trip", false) {
  int bad = 0;
  for (int c = 0; c < 256; ++c) {
    const auto u = static_cast<uint8_t>(c);
    const float a = fmt::e4m3_to_float(u);
    if (!std::isnan(a) && fmt::float_to_e4m3_satfinite(a) != u) ++bad;
    const float b = fmt::e5m2_to_float(u);
    if (std::isfinite(b) && fmt::float_to_e5m2_satfinite(b) != u) ++bad;
    if (c < 255 && fmt::float_to_ue8m0_floor(fmt::ue8m0_to_float(u)) != u) ++bad;
    if (c < 16 && c != 8 && fmt::float_to_e2m1(fmt::e2m1_to_float(u)) != u) ++bad;
  }
  return {bad == 0, std::to_string(bad) + " mismatching codes of 4x256"};
}
}  // namespace
