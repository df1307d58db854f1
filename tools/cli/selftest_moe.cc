// Selftest cases for the fused MoE: the CPU reference on a hand-computed problem (CPU) and the
// GPU op against the reference for decode (NVFP4 W4A4), grouped (W4A16 on MXFP4) and GGML Q8_0.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "b12x/moe.h"
#include "b12x/reference/moe.h"
#include "b12x/runtime.h"
#include "b12x/status.h"
#include "formats/scalar.h"
#include "formats/swizzle.h"
#include "selftest.h"

namespace {
using b12x::DType;
using b12x::TensorRef;
using b12x::cli::SelftestResult;
namespace fmt = b12x::fmt;
namespace moe = b12x::moe;

/// Host source of one operand [E, rows, K] (FP4 bytes + scales, or GGML Q8_0 blocks).
struct Operand {
  std::vector<uint8_t> v, s;
  std::vector<float> gs;
  TensorRef tv, ts, tg;
};

Operand make_operand(std::mt19937& rng, moe::SourceFormat f, int64_t E, int64_t rows, int64_t K) {
  Operand o;
  std::uniform_int_distribution<int> byte(0, 255);
  if (f == moe::SourceFormat::kGgml) {
    const int64_t nb = E * rows * K / 32;
    o.v.resize(nb * 34);
    for (auto& b : o.v) b = static_cast<uint8_t>(byte(rng));
    for (int64_t b = 0; b < nb; ++b) {
      const uint16_t d = fmt::float_to_fp16_bits(std::ldexp(1.f + byte(rng) / 256.f, -10));
      o.v[b * 34] = d & 0xFF;
      o.v[b * 34 + 1] = d >> 8;
    }
    o.tv = TensorRef::contiguous(o.v.data(), DType::kQ8_0, {E, rows, K});
    return o;
  }
  o.v.resize(E * rows * K / 2);
  for (auto& b : o.v) {
    b = static_cast<uint8_t>(byte(rng));
    if ((b & 0xF) == 8) b &= 0xF0;
    if ((b >> 4) == 8) b &= 0x0F;
  }
  o.tv = TensorRef::contiguous(o.v.data(), DType::kUInt8, {E, rows, K / 2});
  if (f == moe::SourceFormat::kModeloptNvfp4) {
    const int64_t per = fmt::swizzled_scale_bytes(rows, K / 16);
    o.s.assign(E * per, 0);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < K / 16; ++k)
          o.s[e * per + fmt::swizzled_scale_offset(r, k, K / 16)] =
              static_cast<uint8_t>(0x28 + byte(rng) % 24);
    o.ts = TensorRef::contiguous(o.s.data(), DType::kUE4M3,
                                 {E, fmt::pad_to(rows, 128), fmt::pad_to(K / 16, 4)});
    o.gs.assign(E, 1.f / 16);
    o.tg = TensorRef::contiguous(o.gs.data(), DType::kFP32, {E});
  } else {
    o.s.resize(E * rows * K / 32);
    for (auto& b : o.s) b = static_cast<uint8_t>(121 + byte(rng) % 6);
    o.ts = TensorRef::contiguous(o.s.data(), DType::kUE8M0, {E, rows, K / 32});
  }
  return o;
}

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t n) {
    if (cudaMalloc(&p, n ? n : 1) != cudaSuccess) p = nullptr;
  }
  ~DevBuf() {
    if (p) cudaFree(p);
  }
};

TensorRef to_dev(TensorRef t, const void* host, size_t bytes, std::vector<DevBuf*>& keep) {
  auto* b = new DevBuf(bytes);
  keep.push_back(b);
  cudaMemcpy(b->p, host, bytes, cudaMemcpyHostToDevice);
  t.data = b->p;
  t.device = 0;
  return t;
}

/// Runs one problem on the GPU and compares with the reference (cosine and max-abs).
SelftestResult gpu_case(moe::QuantMode qm, moe::SourceFormat sf, moe::Activation act, int64_t M,
                        int64_t topk) {
  std::vector<DevBuf*> keep;
  try {
    if (b12x::device_count() == 0) return {false, "no CUDA device"};
    const int64_t E = 8, H = 256, I = 128;
    std::mt19937 rng(1234);
    const bool gated = act != moe::Activation::kRelu2;
    Operand w1 = make_operand(rng, sf, E, gated ? 2 * I : I, H);
    Operand w2 = make_operand(rng, sf, E, H, I);
    std::vector<float> a1(E, 2688.f / 4), a2(E, 2688.f / 2);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<uint16_t> x(M * H);
    for (auto& v : x) v = fmt::float_to_bf16_bits(nd(rng));
    std::vector<int32_t> ids(M * topk);
    std::vector<float> wts(M * topk);
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = static_cast<int32_t>(rng() % (E + 1)) - (i % 7 == 3 ? E + 1 : 0);  // some invalid
      wts[i] = 0.25f + 0.5f * static_cast<float>(rng() % 100) / 100.f;
    }
    moe::WeightsPlanArgs wa;
    wa.quant_mode = qm;
    wa.source_format = sf;
    wa.activation = act;
    wa.num_experts = E;
    wa.hidden_size = H;
    wa.intermediate_size = I;
    wa.w13_layout = moe::W13Layout::kW31;
    const moe::WeightsPlan wp = moe::plan_weights(wa);
    moe::SourceWeights host;
    host.w1 = w1.tv;
    host.w2 = w2.tv;
    host.w1_scale = w1.ts;
    host.w2_scale = w2.ts;
    host.w1_global_scale = w1.tg;
    host.w2_global_scale = w2.tg;
    if (qm == moe::QuantMode::kNvfp4) {
      host.a1_gscale = TensorRef::contiguous(a1.data(), DType::kFP32, {E});
      host.a2_gscale = TensorRef::contiguous(a2.data(), DType::kFP32, {E});
    }
    moe::SourceWeights dev = host;
    dev.w1 = to_dev(w1.tv, w1.v.data(), w1.v.size(), keep);
    dev.w2 = to_dev(w2.tv, w2.v.data(), w2.v.size(), keep);
    if (!w1.s.empty()) {
      dev.w1_scale = to_dev(w1.ts, w1.s.data(), w1.s.size(), keep);
      dev.w2_scale = to_dev(w2.ts, w2.s.data(), w2.s.size(), keep);
    }
    moe::PreparedExperts ex;
    moe::prepare_weights(wp, dev, ex, nullptr);
    moe::Caps caps;
    caps.max_tokens = M;
    caps.num_topk = topk;
    caps.weight_plan = &wp;
    const moe::Plan plan = moe::plan(caps);
    const TensorRef sc =
        to_dev(TensorRef::contiguous(nullptr, DType::kUInt8, {plan.scratch_bytes}),
               std::vector<uint8_t>(plan.scratch_bytes).data(), plan.scratch_bytes, keep);
    const TensorRef tx =
        to_dev(TensorRef::contiguous(nullptr, DType::kBF16, {M, H}), x.data(), 2 * x.size(), keep);
    const TensorRef ti = to_dev(TensorRef::contiguous(nullptr, DType::kInt32, {M, topk}),
                                ids.data(), 4 * ids.size(), keep);
    const TensorRef tw = to_dev(TensorRef::contiguous(nullptr, DType::kFP32, {M, topk}), wts.data(),
                                4 * wts.size(), keep);
    std::vector<uint16_t> out(M * H, 0xFFFF);
    const TensorRef to = to_dev(TensorRef::contiguous(nullptr, DType::kBF16, {M, H}), out.data(),
                                2 * out.size(), keep);
    moe::run(moe::bind(plan, sc, tx, ex, tw, ti, to), nullptr);
    if (cudaDeviceSynchronize() != cudaSuccess) return {false, "CUDA error after run"};
    cudaMemcpy(out.data(), to.data, 2 * out.size(), cudaMemcpyDeviceToHost);
    std::vector<float> ref(M * H);
    b12x::reference::MoeRefArgs A;
    A.quant_mode = qm;
    A.source_format = sf;
    A.activation = act;
    A.w13_layout = wa.w13_layout;
    A.a = TensorRef::contiguous(x.data(), DType::kBF16, {M, H});
    A.topk_ids = TensorRef::contiguous(ids.data(), DType::kInt32, {M, topk});
    A.topk_weights = TensorRef::contiguous(wts.data(), DType::kFP32, {M, topk});
    A.weights = host;
    A.output = TensorRef::contiguous(ref.data(), DType::kFP32, {M, H});
    b12x::reference::fused_moe(A);
    double dot = 0, nr = 0, ng = 0, max_abs = 0, ref_max = 0;
    for (int64_t i = 0; i < M * H; ++i) {
      const double g = fmt::bf16_bits_to_float(out[i]), r = ref[i];
      if (!std::isfinite(g)) return {false, "non-finite output"};
      dot += g * r;
      nr += r * r;
      ng += g * g;
      max_abs = std::max(max_abs, std::abs(g - r));
      ref_max = std::max(ref_max, std::abs(r));
    }
    const double cos = (nr > 0 && ng > 0) ? dot / std::sqrt(nr * ng) : (nr == ng ? 1.0 : 0.0);
    for (auto* b : keep) delete b;
    const bool ok = cos >= 0.9999 && max_abs <= 0.02 * ref_max + 1e-6;
    return {ok, plan.exec.execution + " cos=" + std::to_string(cos) + " max_abs=" +
                    std::to_string(max_abs) + " (tol " + std::to_string(0.02 * ref_max) + ")"};
  } catch (const std::exception& e) {
    for (auto* b : keep) delete b;
    return {false, e.what()};
  }
}

B12X_SELFTEST("moe", "reference relu2 hand-computed (E=1, H=I=32)", false) {
  try {
    const int64_t H = 32, I = 32;
    // FC1 row 0 = 0.5, others 1.0; FC2 all 0.5; unit block and global scales; x = 1.
    std::vector<uint8_t> w1(I * H / 2), w2(H * I / 2);
    for (int64_t r = 0; r < I; ++r)
      for (int64_t k = 0; k < H / 2; ++k) w1[r * H / 2 + k] = r == 0 ? 0x11 : 0x22;
    for (auto& b : w2) b = 0x11;
    std::vector<uint8_t> s1(fmt::swizzled_scale_bytes(I, H / 16), 0),
        s2(fmt::swizzled_scale_bytes(H, I / 16), 0);
    for (int64_t r = 0; r < 32; ++r)
      for (int64_t c = 0; c < 2; ++c) {
        s1[fmt::swizzled_scale_offset(r, c, 2)] = 0x38;
        s2[fmt::swizzled_scale_offset(r, c, 2)] = 0x38;
      }
    std::vector<float> one = {1.f};
    std::vector<uint16_t> x(H, fmt::float_to_bf16_bits(1.f));
    std::vector<int32_t> ids = {0};
    std::vector<float> wts = {0.5f}, out(H);
    b12x::reference::MoeRefArgs A;
    A.quant_mode = moe::QuantMode::kW4A16;
    A.activation = moe::Activation::kRelu2;
    A.a = TensorRef::contiguous(x.data(), DType::kBF16, {1, H});
    A.topk_ids = TensorRef::contiguous(ids.data(), DType::kInt32, {1, 1});
    A.topk_weights = TensorRef::contiguous(wts.data(), DType::kFP32, {1, 1});
    A.weights.w1 = TensorRef::contiguous(w1.data(), DType::kUInt8, {1, I, H / 2});
    A.weights.w2 = TensorRef::contiguous(w2.data(), DType::kUInt8, {1, H, I / 2});
    A.weights.w1_scale = TensorRef::contiguous(s1.data(), DType::kUE4M3, {1, 128, 4});
    A.weights.w2_scale = TensorRef::contiguous(s2.data(), DType::kUE4M3, {1, 128, 4});
    A.weights.w1_global_scale = TensorRef::contiguous(one.data(), DType::kFP32, {1});
    A.weights.w2_global_scale = TensorRef::contiguous(one.data(), DType::kFP32, {1});
    A.output = TensorRef::contiguous(out.data(), DType::kFP32, {1, H});
    b12x::reference::fused_moe(A);
    // h = [16, 32 x 31] -> relu2 [256, 1024 x 31] -> FC2 0.5 * 32000 -> x 0.5 = 8000.
    int bad = 0;
    for (float v : out) bad += v != 8000.f;
    return {bad == 0, "out[0]=" + std::to_string(out[0]) + " (expected 8000)"};
  } catch (const std::exception& e) {
    return {false, e.what()};
  }
}

B12X_SELFTEST("moe", "nvfp4 silu decode M=2 topk=4 vs reference", true) {
  return gpu_case(moe::QuantMode::kNvfp4, moe::SourceFormat::kModeloptNvfp4, moe::Activation::kSilu,
                  2, 4);
}
B12X_SELFTEST("moe", "w4a16 mxfp4 swiglu-oai grouped M=40 topk=4 vs reference", true) {
  return gpu_case(moe::QuantMode::kW4A16, moe::SourceFormat::kFp4E8M0K32,
                  moe::Activation::kSwigluOai, 40, 4);
}
B12X_SELFTEST("moe", "ggml_a16 q8_0 relu2 M=3 topk=2 vs reference", true) {
  return gpu_case(moe::QuantMode::kGgmlA16, moe::SourceFormat::kGgml, moe::Activation::kRelu2, 3,
                  2);
}

}  // namespace
