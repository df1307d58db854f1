// CPU tests of the activation quantisers: scale rules, reference, validation errors.
#include <gtest/gtest.h>

#include "gemm/quantize_rules.h"

namespace b12x::gemm {
namespace {

TEST(QuantizeRules, MxMultiplierIsInverseOfScale) {
  for (int c = 1; c < 255; ++c) {
    const float m = qrules::mx_value_multiplier(static_cast<uint8_t>(c));
    EXPECT_EQ(m * fmt::ue8m0_to_float(static_cast<uint8_t>(c)), 1.f) << c;
  }
}

}  // namespace
}  // namespace b12x::gemm
