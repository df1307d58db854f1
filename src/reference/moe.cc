// CPU reference of the fused MoE. See include/b12x/reference/moe.h and b12x/moe.h (numerics).
#include "b12x/reference/moe.h"

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "b12x/status.h"
#include "formats/block.h"
#include "formats/ggml.h"
#include "formats/scalar.h"
#include "formats/swizzle.h"
#include "moe/moe_numerics.h"

namespace b12x::reference {
namespace {

using moe::Activation;
using moe::QuantMode;
using moe::SourceFormat;

namespace num = b12x::moe::num;
const char* kOp = "reference::fused_moe";

const uint8_t* at(const TensorRef& t, int64_t i0, int64_t i1 = 0) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  if (t.ndim > 0) p += i0 * t.byte_stride(0);
  if (t.ndim > 1) p += i1 * t.byte_stride(1);
  return p;
}

float load_act(const TensorRef& a, int64_t m, int64_t k) {
  const uint8_t* row = at(a, m);
  uint16_t b;
  std::memcpy(&b, row + k * a.stride[1] * 2, 2);
  return a.dtype == DType::kBF16 ? fmt::bf16_bits_to_float(b) : fmt::fp16_bits_to_float(b);
}

/// Per-expert fp32 scalar from a [E], [E,1] or single-element tensor (absent -> 1).
float expert_scalar(const TensorRef& t, int64_t e) {
  if (t.data == nullptr) return 1.f;
  const int64_t idx = t.numel() == 1 ? 0 : e;
  float v;
  std::memcpy(&v, static_cast<const uint8_t*>(t.data) + idx * t.byte_stride(0), 4);
  return v;
}

/// Operand values of one source weight row (exact: e2m1*block scale, or the GGML decode).
std::vector<float> decode_row(SourceFormat f, const TensorRef& w, const TensorRef& ws, int64_t e,
                              int64_t r, int64_t K) {
  std::vector<float> out(static_cast<size_t>(K));
  const uint8_t* row =
      static_cast<const uint8_t*>(w.data) + e * w.byte_stride(0) + r * w.byte_stride(1);
  if (f == SourceFormat::kGgml) {
    const int bv = dtype_block_values(w.dtype), bb = dtype_block_bytes(w.dtype);
    for (int64_t b = 0; b < K / bv; ++b) {
      const uint8_t* blk = row + b * bb;
      float* o = out.data() + b * bv;
      if (w.dtype == DType::kQ8_0)
        fmt::ggml::q8_0_decode_block(blk, o);
      else if (w.dtype == DType::kIQ2_XXS)
        fmt::ggml::iq2_xxs_decode_block_host(blk, o);
      else
        fmt::ggml::iq2_xs_decode_block_host(blk, o);
    }
    return out;
  }
  const auto* sbase = static_cast<const uint8_t*>(ws.data) + e * ws.byte_stride(0);
  for (int64_t k = 0; k < K; ++k) {
    const uint8_t byte = row[k / 2];
    const float v = fmt::e2m1_to_float((k & 1) ? (byte >> 4) : (byte & 0xF));
    float s;
    if (f == SourceFormat::kModeloptNvfp4) {
      const int64_t cols = K / 16;
      s = fmt::ue4m3_to_float(sbase[fmt::swizzled_scale_offset(r, k / 16, cols)]);
    } else {
      s = fmt::ue8m0_to_float(sbase[r * ws.byte_stride(1) + k / 32]);
    }
    out[k] = v * s;
  }
  return out;
}

struct ExpertCache {
  std::vector<std::vector<float>> w1;  // [w1_rows][H]
  std::vector<std::vector<float>> w2;  // [H][I]
};

}  // namespace

void fused_moe(const MoeRefArgs& A) {
  check_dtype(A.a, kOp, "a", {DType::kBF16, DType::kFP16});
  check_ndim(A.a, kOp, "a", 2);
  const int64_t M = A.a.size(0), H = A.a.size(1);
  check_shape(A.topk_ids, kOp, "topk_ids", {M, -1});
  check_dtype(A.topk_ids, kOp, "topk_ids", {DType::kInt32, DType::kInt64});
  const int64_t topk = A.topk_ids.size(1);
  check_shape(A.topk_weights, kOp, "topk_weights", {M, topk});
  check_dtype(A.topk_weights, kOp, "topk_weights", {DType::kFP32});
  check_shape(A.output, kOp, "output", {M, H});
  check_dtype(A.output, kOp, "output", {DType::kBF16, DType::kFP16, DType::kFP32});
  const auto& W = A.weights;
  check_ndim(W.w1, kOp, "w1", 3);
  check_ndim(W.w2, kOp, "w2", 3);
  const int64_t E = W.w1.size(0);
  const bool gated = A.activation != Activation::kRelu2;
  // FP4 weights may come as uint8 bytes [.., K/2] or fp4 values [.., K].
  auto kvals = [](const TensorRef& t) {
    return t.dtype == DType::kUInt8 ? t.size(2) * 2 : t.size(2);
  };
  const int64_t I = kvals(W.w2);
  const int64_t rows1 = gated ? 2 * I : I;
  B12X_CHECK_ARG(W.w1.size(1) == rows1 && kvals(W.w1) == H, kOp, ": w1 ", W.w1.describe(),
                 " does not match [E, ", rows1, ", H=", H, "]");
  B12X_CHECK_ARG(W.w2.size(0) == E && W.w2.size(1) == H && kvals(W.w2) == I, kOp, ": w2 ",
                 W.w2.describe(), " does not match [E, H, I]");

  const QuantMode qm = A.quant_mode;
  int aq = num::kANone;
  if (qm == QuantMode::kNvfp4) aq = num::kANvfp4;
  if (qm == QuantMode::kW4A8Nvfp4 || qm == QuantMode::kW4A8Mx) aq = num::kAMxfp8;
  if (qm == QuantMode::kMxfp4) aq = num::kAMxfp4;
  const bool a16 = qm == QuantMode::kW4A16 || qm == QuantMode::kGgmlA16;
  const bool inter_fp16 = a16 && A.a.dtype == DType::kFP16;
  const bool nv_weights = A.source_format == SourceFormat::kModeloptNvfp4;

  num::ActParams ap;
  ap.kind = static_cast<int>(A.activation);
  ap.has_limit = !std::isnan(A.swiglu_limit);
  ap.limit = A.swiglu_limit;
  if (A.activation == Activation::kSwigluOai) {
    if (!ap.has_limit) {
      ap.has_limit = true;
      ap.limit = 7.0f;
    }
    ap.alpha = std::isnan(A.swiglu_alpha) ? 1.702f : A.swiglu_alpha;
    ap.beta = std::isnan(A.swiglu_beta) ? 1.0f : A.swiglu_beta;
  }

  std::map<int64_t, ExpertCache> cache;
  auto expert = [&](int64_t e) -> ExpertCache& {
    auto it = cache.find(e);
    if (it != cache.end()) return it->second;
    ExpertCache c;
    c.w1.resize(rows1);
    for (int64_t r = 0; r < rows1; ++r)
      c.w1[r] = decode_row(A.source_format, W.w1, W.w1_scale, e, r, H);
    c.w2.resize(H);
    for (int64_t r = 0; r < H; ++r)
      c.w2[r] = decode_row(A.source_format, W.w2, W.w2_scale, e, r, I);
    return cache.emplace(e, std::move(c)).first->second;
  };

  std::vector<float> acc(static_cast<size_t>(H));
  std::vector<float> x(static_cast<size_t>(H)), y(static_cast<size_t>(I)), h1(rows1),
      o(static_cast<size_t>(H));
  for (int64_t m = 0; m < M; ++m) {
    std::fill(acc.begin(), acc.end(), 0.f);
    for (int64_t k = 0; k < topk; ++k) {
      int64_t e;
      if (A.topk_ids.dtype == DType::kInt32) {
        int32_t v;
        std::memcpy(&v, at(A.topk_ids, m) + k * A.topk_ids.byte_stride(1), 4);
        e = v;
      } else {
        std::memcpy(&e, at(A.topk_ids, m) + k * A.topk_ids.byte_stride(1), 8);
      }
      if (e < 0 || e >= E) continue;
      float wr;
      std::memcpy(&wr, at(A.topk_weights, m) + k * A.topk_weights.byte_stride(1), 4);
      ExpertCache& c = expert(e);
      const float w1gs = nv_weights ? expert_scalar(W.w1_global_scale, e) : 1.f;
      const float w2gs = nv_weights ? expert_scalar(W.w2_global_scale, e) : 1.f;
      const float a1gs = expert_scalar(W.a1_gscale, e), a2gs = expert_scalar(W.a2_gscale, e);
      const float alpha1 = aq == num::kANvfp4 ? w1gs / a1gs : w1gs;
      const float alpha2 = aq == num::kANvfp4 ? w2gs / a2gs : w2gs;
      // FC1 input operand.
      for (int64_t i = 0; i < H; ++i) x[i] = load_act(A.a, m, i);
      if (aq != num::kANone)
        for (int64_t b = 0; b < H / 32; ++b) num::quant_operand32(x.data() + 32 * b, aq, a1gs);
      for (int64_t r = 0; r < rows1; ++r) {
        double s = 0;
        const float* wr1 = c.w1[r].data();
        for (int64_t i = 0; i < H; ++i) s += static_cast<double>(x[i]) * wr1[i];
        h1[r] = static_cast<float>(s) * alpha1;
        if (A.apply_router_weight_on_input) h1[r] *= wr;
      }
      for (int64_t f = 0; f < I; ++f) {
        float v;
        if (gated) {
          const bool w13 = A.w13_layout == moe::W13Layout::kW13;  // [up; gate]
          const float g = h1[w13 ? I + f : f], u = h1[w13 ? f : I + f];
          v = num::act_gated(ap, g, u);
        } else {
          v = num::act_relu2(h1[f]);
        }
        y[f] = num::round_inter(v, inter_fp16);
      }
      if (aq != num::kANone)
        for (int64_t b = 0; b < I / 32; ++b) num::quant_operand32(y.data() + 32 * b, aq, a2gs);
      for (int64_t r = 0; r < H; ++r) {
        double s = 0;
        const float* wr2 = c.w2[r].data();
        for (int64_t i = 0; i < I; ++i) s += static_cast<double>(y[i]) * wr2[i];
        o[r] = static_cast<float>(s) * alpha2;
      }
      const float wc = A.apply_router_weight_on_input ? 1.f : wr;
      for (int64_t r = 0; r < H; ++r) acc[r] = std::fma(wc, o[r], acc[r]);
    }
    uint8_t* orow = static_cast<uint8_t*>(A.output.data) + m * A.output.byte_stride(0);
    for (int64_t r = 0; r < H; ++r) {
      const int64_t off = r * A.output.stride[1];
      if (A.output.dtype == DType::kFP32) {
        std::memcpy(orow + off * 4, &acc[r], 4);
      } else {
        const uint16_t b = A.output.dtype == DType::kBF16 ? fmt::float_to_bf16_bits(acc[r])
                                                          : fmt::float_to_fp16_bits(acc[r]);
        std::memcpy(orow + off * 2, &b, 2);
      }
    }
  }
}

}  // namespace b12x::reference
