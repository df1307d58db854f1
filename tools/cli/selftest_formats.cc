// Selftest cases for the formats area: host block codecs (round trip quality, GGML) and, with a
// GPU, the device codecs against the hardware cvt and the host implementation.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "b12x/formats.h"
#include "b12x/runtime.h"
#include "selftest.h"

namespace {
using b12x::cli::SelftestResult;
namespace fm = b12x::formats;

double rel_l2(const std::vector<float>& x, const std::vector<float>& y) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    den += double(x[i]) * x[i];
  }
  return std::sqrt(num / den);
}

B12X_SELFTEST("formats", "block codecs round trip (nvfp4, mxfp4, mxfp8, q8_0, iq2)", false) {
  try {
    const int64_t rows = 4, k = 512, n = rows * k;
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x(n), y(n);
    for (auto& v : x) v = nd(rng);
    std::vector<uint8_t> q(n * 2), s(n);
    std::string detail;
    bool ok = true;
    auto check = [&](const char* name, double tol) {
      const double e = rel_l2(x, y);
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%s %.3f ", name, e);
      detail += buf;
      ok = ok && e < tol;
    };
    const float gs = fm::nvfp4_global_scale(x.data(), n);
    fm::quantize_nvfp4(x.data(), rows, k, gs, q.data(), s.data());
    fm::dequantize_nvfp4(q.data(), s.data(), rows, k, gs, y.data());
    check("nvfp4", 0.2);
    fm::quantize_mxfp4(x.data(), rows, k, fm::MxScaleRule::kCeil, fm::MxZeroBlockScale::kOne,
                       q.data(), s.data());
    fm::dequantize_mxfp4(q.data(), s.data(), rows, k, y.data());
    check("mxfp4", 0.25);
    fm::quantize_mxfp8(x.data(), rows, k, fm::MxZeroBlockScale::kOne, q.data(), s.data());
    fm::dequantize_mxfp8(q.data(), s.data(), rows, k, y.data());
    check("mxfp8", 0.05);
    fm::quantize_q8_0(x.data(), rows, k, q.data());
    fm::dequantize_q8_0(q.data(), rows, k, y.data());
    check("q8_0", 0.01);
    fm::quantize_iq2_xs(x.data(), rows, k, q.data());
    fm::dequantize_iq2_xs(q.data(), rows, k, y.data());
    check("iq2_xs", 0.4);
    fm::quantize_iq2_xxs(x.data(), rows, k, q.data());
    fm::dequantize_iq2_xxs(q.data(), rows, k, y.data());
    check("iq2_xxs", 0.45);
    return {ok, "rel_l2: " + detail};
  } catch (const std::exception& e) {
    return {false, e.what()};
  }
}

B12X_SELFTEST("formats", "device codecs vs hardware cvt and host (2^24 patterns)", true) {
  try {
    const fm::DeviceCodecReport r = fm::check_device_codecs(b12x::current_device());
    const bool ok = r.cvt_mismatches == 0 && r.block_mismatches == 0 && r.cvt_checked > 0;
    return {ok, std::to_string(r.cvt_mismatches) + " cvt mismatches of " +
                    std::to_string(r.cvt_checked) + ", " + std::to_string(r.block_mismatches) +
                    " block bytes differ of " + std::to_string(r.block_bytes_checked) + "; " +
                    r.detail};
  } catch (const std::exception& e) {
    return {false, e.what()};
  }
}

}  // namespace
