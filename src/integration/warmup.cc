// Warm-up: plan every (layer, token count) as a server would, de-duplicate by the kernel
// signature each plan() records (core registry, b12x/runtime.h), launch each new signature once
// on zero-filled inputs allocated here, synchronise and free.
#include "b12x/warmup.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>

#include "b12x/quantize.h"
#include "b12x/runtime.h"
#include "b12x/status.h"
#include "core/cuda_check.h"

namespace b12x {
namespace {

constexpr const char* kOp = "warmup";

using Clock = std::chrono::steady_clock;

/// Signatures launched by any warmup() call of this process, per device: a kernel's module
/// stays loaded once its first launch happened, so a later call need not launch it again.
struct Warmed {
  std::mutex mu;
  std::set<std::pair<int, std::string>> done;
};
Warmed& warmed() {
  static Warmed* w = new Warmed();
  return *w;
}
bool is_warm(int device, const std::string& sig) {
  std::lock_guard<std::mutex> lock(warmed().mu);
  return warmed().done.count({device, sig}) != 0;
}
void mark_warm(int device, const std::string& sig) {
  std::lock_guard<std::mutex> lock(warmed().mu);
  warmed().done.insert({device, sig});
}

using ::b12x::detail::DeviceScope;  // the plan's device for its attribute calls

/// The device memory of one launch: 256-byte aligned sub-buffers of one allocation, zeroed
/// (zeros are valid values in every format, so no kernel sees NaN scales), freed on scope exit.
class Arena {
 public:
  explicit Arena(int device) : device_(device) {}
  ~Arena() {
    if (base_ != nullptr) cudaFree(base_);
  }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  /// Reserves `bytes` (before allocate()); returns the offset.
  int64_t add(int64_t bytes) {
    const int64_t off = size_;
    size_ += (std::max<int64_t>(bytes, 1) + 255) / 256 * 256;
    return off;
  }
  void allocate(Stream stream) {
    B12X_CUDA_CHECK(cudaMalloc(&base_, static_cast<size_t>(size_)));
    B12X_CUDA_CHECK(cudaMemsetAsync(base_, 0, static_cast<size_t>(size_),
                                    reinterpret_cast<cudaStream_t>(stream)));
  }
  void fill(int64_t off, int64_t bytes, uint8_t byte, Stream stream) {
    B12X_CUDA_CHECK(cudaMemsetAsync(at(off), byte, static_cast<size_t>(bytes),
                                    reinterpret_cast<cudaStream_t>(stream)));
  }
  void upload(int64_t off, const void* src, int64_t bytes, Stream stream) {
    B12X_CUDA_CHECK(cudaMemcpyAsync(at(off), src, static_cast<size_t>(bytes),
                                    cudaMemcpyHostToDevice,
                                    reinterpret_cast<cudaStream_t>(stream)));
  }
  void* at(int64_t off) const { return static_cast<uint8_t*>(base_) + off; }
  TensorRef tensor(int64_t off, DType dtype, std::initializer_list<int64_t> shape) const {
    return TensorRef::contiguous(at(off), dtype, shape, device_);
  }

 private:
  int device_;
  void* base_ = nullptr;
  int64_t size_ = 0;
};

/// Runs `launch` (which enqueues on `stream`), synchronises and returns the wall milliseconds:
/// the first launch of a kernel includes its lazy module load.
template <typename F>
double timed_launch(Stream stream, F&& launch) {
  const auto t0 = Clock::now();
  launch();
  B12X_CUDA_CHECK(cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(stream)));
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

bool is_w4a4(gemm::LinearFormat f) {
  return f == gemm::LinearFormat::kNvfp4 || f == gemm::LinearFormat::kMxfp4;
}

/// A packed weight of the caps' format and shape from constant values (host source; pack
/// copies it to the device).
std::shared_ptr<gemm::PackedWeight> dummy_weight(const gemm::Caps& c, Stream stream) {
  using F = gemm::LinearFormat;
  const int64_t N = c.out_features, K = c.in_features;
  std::vector<uint8_t> v, s;
  std::vector<float> fs;
  float one = 1.f;
  gemm::WeightSource src;
  src.format = c.format;
  src.in_features = K;
  switch (c.format) {
    case F::kFp8Tensor:
    case F::kFp8Block:
    case F::kMxfp8:
      v.assign(static_cast<size_t>(N * K), 0x38);  // e4m3 1.0
      src.weight = TensorRef::contiguous(v.data(), DType::kFP8E4M3, {N, K});
      if (c.format == F::kFp8Tensor) {
        src.output_scale = TensorRef::contiguous(&one, DType::kFP32, {1});
      } else if (c.format == F::kFp8Block) {
        const int64_t sn = (N + 127) / 128, sk = (K + 127) / 128;
        fs.assign(static_cast<size_t>(sn * sk), 1.f);
        src.weight_scale = TensorRef::contiguous(fs.data(), DType::kFP32, {sn, sk});
      } else {
        s.assign(static_cast<size_t>(N * (K / 32)), 127);  // e8m0 1.0
        src.weight_scale = TensorRef::contiguous(s.data(), DType::kUE8M0, {N, K / 32});
      }
      break;
    case F::kNvfp4:
    case F::kNvfp4W4A16:
      v.assign(static_cast<size_t>(N * K / 2), 0x22);     // e2m1 1.0 in both nibbles
      s.assign(static_cast<size_t>(N * (K / 16)), 0x38);  // ue4m3 1.0
      src.weight = TensorRef::contiguous(v.data(), DType::kUInt8, {N, K / 2});
      src.weight_scale = TensorRef::contiguous(s.data(), DType::kUE4M3, {N, K / 16});
      src.global_scale = 1.f;
      break;
    case F::kMxfp4:
    case F::kMxfp4W4A8:
    case F::kMxfp4W4A16:
      v.assign(static_cast<size_t>(N * K / 2), 0x22);
      s.assign(static_cast<size_t>(N * (K / 32)), 127);
      src.weight = TensorRef::contiguous(v.data(), DType::kUInt8, {N, K / 2});
      src.weight_scale = TensorRef::contiguous(s.data(), DType::kUE8M0, {N, K / 32});
      break;
    case F::kIq2Xxs:
    case F::kIq2Xs:
    case F::kQ8_0: {
      const DType dt = c.format == F::kQ8_0    ? DType::kQ8_0
                       : c.format == F::kIq2Xs ? DType::kIQ2_XS
                                               : DType::kIQ2_XXS;
      v.assign(static_cast<size_t>(dtype_bytes_for(dt, N * K)), 0);  // d = 0: all zeros
      src.weight = TensorRef::contiguous(v.data(), dt, {N, K});
      break;
    }
  }
  return gemm::PackedWeight::pack(src, c.device, stream);
}

struct Run {
  const std::vector<int64_t>& tokens;
  Stream stream;
  WarmupReport& report;
  std::set<std::pair<int, std::string>> seen;  // this call's signatures

  /// Records a planned entry; true when its signature must be launched now.
  bool note(WarmupEntry& e, int device, bool planned) {
    if (planned) ++report.planned;
    if (!seen.insert({device, e.signature}).second) return false;
    ++report.unique;
    if (is_warm(device, e.signature)) {
      ++report.already_warm;
      return false;
    }
    return true;
  }
  void launched(WarmupEntry& e, int device, double ms) {
    e.launched = true;
    e.launch_ms = ms;
    ++report.launched;
    mark_warm(device, e.signature);
  }
};

std::string name_or(const std::string& name, const char* kind, size_t i) {
  return name.empty() ? std::string(kind) + "[" + std::to_string(i) + "]" : name;
}

// ---- linear -------------------------------------------------------------------------------------

/// The activation quantizer a server runs before a layer that takes quantized activations.

/// The entry of one planned regime of a layer.
WarmupEntry entry(const std::string& layer, const char* op, int64_t tokens, std::string signature) {
  WarmupEntry e;
  e.layer = layer;
  e.op = op;
  e.tokens = tokens;
  e.signature = std::move(signature);
  return e;
}

/// The entry of the plan just made (its kernel signature was recorded by resolve_kernels).
WarmupEntry planned_entry(const std::string& layer, const char* op, int64_t tokens) {
  return entry(layer, op, tokens, detail::last_kernel_signature());
}

void warm_quantizer(Run& r, const WarmupLinear& L, const std::string& layer, int64_t M) {
  using F = gemm::LinearFormat;
  const gemm::Caps& c = L.caps;
  const char* kind = c.format == F::kNvfp4                                        ? "nvfp4"
                     : c.format == F::kMxfp4                                      ? "mxfp4"
                     : c.format == F::kFp8Tensor                                  ? "fp8_tensor"
                     : c.format == F::kFp8Block && c.act_dtype == DType::kFP8E4M3 ? "fp8_group128"
                                                                                  : nullptr;
  if (kind == nullptr) return;
  B12X_CHECK_ARG(L.quantize_from == DType::kBF16 || L.quantize_from == DType::kFP16, kOp,
                 ": layer '", layer, "' quantize_from=", dtype_name(L.quantize_from),
                 " (supported: bf16, fp16)");
  WarmupEntry e = entry(layer, "quantize", M,
                        std::string("quantize.") + kind + " in=" + dtype_name(L.quantize_from));
  if (r.note(e, c.device, false)) {
    const int64_t K = c.in_features;
    Arena a(c.device);
    const int64_t ox = a.add(M * K * 2), ov = a.add(M * K), os = a.add(M * K), og = a.add(4);
    a.allocate(r.stream);
    const TensorRef x = a.tensor(ox, L.quantize_from, {M, K});
    const TensorRef g = a.tensor(og, DType::kFP32, {1});
    const double ms = timed_launch(r.stream, [&] {
      if (c.format == F::kNvfp4)
        quantize_nvfp4(x, g, a.tensor(ov, DType::kUInt8, {M, K / 2}),
                       a.tensor(os, DType::kUInt8, {swizzled_scale_bytes(M, K / 16)}), r.stream);
      else if (c.format == F::kMxfp4)
        quantize_mxfp4(x, a.tensor(ov, DType::kUInt8, {M, K / 2}),
                       a.tensor(os, DType::kUInt8, {swizzled_scale_bytes(M, K / 32)}), r.stream);
      else if (c.format == F::kFp8Tensor)
        quantize_fp8_tensor(x, g, a.tensor(ov, DType::kFP8E4M3, {M, K}), r.stream);
      else
        quantize_fp8_group128(x, a.tensor(ov, DType::kFP8E4M3, {M, K}),
                              a.tensor(os, DType::kFP32, {M, K / 128}), r.stream);
    });
    r.launched(e, c.device, ms);
  }
  r.report.entries.push_back(e);
}

void warm_linear(Run& r, const WarmupLinear& L, size_t index) {
  using F = gemm::LinearFormat;
  const std::string layer = name_or(L.name, "linear", index);
  std::shared_ptr<gemm::PackedWeight> own;  // packed on the first launch, reused by later ones
  for (int64_t t : r.tokens) {
    gemm::Caps c = L.caps;
    c.max_tokens = t;
    DeviceScope ds(c.device);
    const gemm::Plan p = gemm::plan(c);
    WarmupEntry e = planned_entry(layer, "linear", t);
    if (r.note(e, c.device, true)) {
      const gemm::PackedWeight* w = L.weight;
      if (w == nullptr) {
        if (!own) own = dummy_weight(c, r.stream);
        w = own.get();
      }
      const int64_t M = t, K = c.in_features, N = c.out_features;
      const bool w4a4 = is_w4a4(c.format);
      const bool packed_x = w4a4 && c.act_dtype == DType::kUInt8;
      Arena a(c.device);
      const int64_t ox = a.add(dtype_bytes_for(packed_x ? DType::kFP4E2M1 : c.act_dtype, M * K));
      int64_t oxs = -1, oal = -1;
      if (w4a4)
        oxs = a.add(swizzled_scale_bytes(M, c.format == F::kNvfp4 ? K / 16 : K / 32));
      else if (c.format == F::kFp8Block && c.act_dtype == DType::kFP8E4M3)
        oxs = a.add(M * (K / 128) * 4);
      if (c.format == F::kNvfp4) oal = a.add(4);
      const int64_t oo = a.add(M * N * 2), osc = a.add(p.scratch_bytes);
      a.allocate(r.stream);
      TensorRef x =
          packed_x ? a.tensor(ox, DType::kUInt8, {M, K / 2}) : a.tensor(ox, c.act_dtype, {M, K});
      TensorRef xs;
      if (oxs >= 0)
        xs = w4a4 ? a.tensor(oxs, DType::kUInt8,
                             {swizzled_scale_bytes(M, c.format == F::kNvfp4 ? K / 16 : K / 32)})
                  : a.tensor(oxs, DType::kFP32, {M, K / 128});
      TensorRef alpha;
      if (oal >= 0) alpha = a.tensor(oal, DType::kFP32, {1});
      TensorRef scratch;
      if (p.scratch_bytes > 0) scratch = a.tensor(osc, DType::kUInt8, {p.scratch_bytes});
      const gemm::Binding b =
          gemm::bind(p, scratch, x, xs, *w, a.tensor(oo, c.out_dtype, {M, N}), TensorRef(), alpha);
      r.launched(e, c.device, timed_launch(r.stream, [&] { gemm::run(b, r.stream); }));
    }
    r.report.entries.push_back(e);
    warm_quantizer(r, L, layer, t);
  }
}

// ---- fused MoE ----------------------------------------------------------------------------------

/// Device-side source tensors of constant values for a weights plan (prepare_weights reads the
/// sources on the device), released once the experts are prepared.
void prepare_dummy_experts(const moe::WeightsPlan& wp, moe::PreparedExperts& out, int device,
                           Stream stream) {
  const moe::WeightsPlanArgs& a = wp.args;
  const int64_t E = a.num_experts, H = a.hidden_size, I = a.intermediate_size, R1 = wp.w1_rows;
  auto pad = [](int64_t x, int64_t m) { return (x + m - 1) / m * m; };
  Arena ar(device);
  moe::SourceWeights s;
  std::vector<float> ones(static_cast<size_t>(E), 1.f);
  const TensorRef host_ones = TensorRef::contiguous(ones.data(), DType::kFP32, {E});
  if (a.source_format == moe::SourceFormat::kGgml) {
    const int64_t o1 = ar.add(dtype_bytes_for(a.ggml_w1_dtype, E * R1 * H));
    const int64_t o2 = ar.add(dtype_bytes_for(a.ggml_w2_dtype, E * H * I));
    ar.allocate(stream);
    s.w1 = ar.tensor(o1, a.ggml_w1_dtype, {E, R1, H});
    s.w2 = ar.tensor(o2, a.ggml_w2_dtype, {E, H, I});
  } else {
    const bool nv = a.source_format == moe::SourceFormat::kModeloptNvfp4;
    const int64_t o1 = ar.add(E * R1 * H / 2), o2 = ar.add(E * H * I / 2);
    const int64_t s1r = nv ? pad(R1, 128) : R1, s1c = nv ? pad(H / 16, 4) : H / 32;
    const int64_t s2r = nv ? pad(H, 128) : H, s2c = nv ? pad(I / 16, 4) : I / 32;
    const int64_t os1 = ar.add(E * s1r * s1c), os2 = ar.add(E * s2r * s2c);
    ar.allocate(stream);
    ar.fill(o1, E * R1 * H / 2, 0x22, stream);  // e2m1 1.0 pairs
    ar.fill(o2, E * H * I / 2, 0x22, stream);
    ar.fill(os1, E * s1r * s1c, nv ? 0x38 : 127, stream);  // scale 1.0 (ue4m3 / e8m0)
    ar.fill(os2, E * s2r * s2c, nv ? 0x38 : 127, stream);
    s.w1 = ar.tensor(o1, DType::kUInt8, {E, R1, H / 2});
    s.w2 = ar.tensor(o2, DType::kUInt8, {E, H, I / 2});
    const DType sd = nv ? DType::kUE4M3 : DType::kUE8M0;
    s.w1_scale = ar.tensor(os1, sd, {E, s1r, s1c});
    s.w2_scale = ar.tensor(os2, sd, {E, s2r, s2c});
    if (nv) {
      s.w1_global_scale = s.w2_global_scale = host_ones;
      if (a.quant_mode == moe::QuantMode::kNvfp4) s.a1_gscale = s.a2_gscale = host_ones;
    }
  }
  moe::prepare_weights(wp, s, out, stream);  // synchronises: the arena may go
}

void warm_moe(Run& r, const WarmupMoe& L, size_t index) {
  const std::string layer = name_or(L.name, "moe", index);
  const moe::WeightsPlan wp = moe::plan_weights(L.weights);
  std::unique_ptr<moe::PreparedExperts> own;
  for (int64_t t : r.tokens) {
    moe::Caps c = L.caps;
    c.max_tokens = t;
    c.weight_plan = &wp;
    DeviceScope ds(c.device);
    const moe::Plan p = moe::plan(c);
    WarmupEntry e = planned_entry(layer, "moe", t);
    if (r.note(e, c.device, true)) {
      const moe::PreparedExperts* experts = L.experts;
      if (experts == nullptr) {
        if (!own) {
          own = std::make_unique<moe::PreparedExperts>();
          prepare_dummy_experts(wp, *own, c.device, r.stream);
        }
        experts = own.get();
      }
      const int64_t M = t, H = wp.args.hidden_size, K = c.num_topk;
      // Valid, spread routes: token m's k-th route goes to expert (m*topk + k) % E.
      std::vector<int32_t> ids(static_cast<size_t>(M * K));
      for (int64_t i = 0; i < M * K; ++i)
        ids[static_cast<size_t>(i)] = static_cast<int32_t>(i % wp.args.num_experts);
      Arena a(c.device);
      const DType io = wp.args.params_dtype;
      const int64_t oa = a.add(M * H * 2), oi = a.add(M * K * 4), ow = a.add(M * K * 4);
      const int64_t oo = a.add(M * H * 2), os = a.add(p.scratch_bytes);
      a.allocate(r.stream);
      a.upload(oi, ids.data(), M * K * 4, r.stream);
      const moe::Binding b =
          moe::bind(p, a.tensor(os, DType::kUInt8, {std::max<int64_t>(p.scratch_bytes, 1)}),
                    a.tensor(oa, io, {M, H}), *experts, a.tensor(ow, DType::kFP32, {M, K}),
                    a.tensor(oi, DType::kInt32, {M, K}), a.tensor(oo, io, {M, H}));
      r.launched(e, c.device, timed_launch(r.stream, [&] { moe::run(b, r.stream); }));
    }
    r.report.entries.push_back(e);
  }
}

// ---- paged attention ----------------------------------------------------------------------------

void warm_attention(Run& r, const WarmupAttention& L, size_t index) {
  using attention::Mode;
  const std::string layer = name_or(L.name, "attention", index);
  const attention::PagedCaps& base = L.caps;
  const int verify_q = std::max(1, base.max_total_q / std::max(1, base.max_batch));
  for (int64_t t : r.tokens) {
    attention::PagedCaps c = base;
    int q_len = 1;
    B12X_CHECK_ARG(t <= (int64_t{1} << 24), kOp, ": token count ", t,
                   " is too large for "
                   "attention layer '",
                   layer, "' (supported: <= 2^24)");
    if (c.mode == Mode::kDecode) {
      c.max_batch = c.max_total_q = static_cast<int>(t);
    } else if (c.mode == Mode::kVerify) {
      q_len = verify_q;
      c.max_batch = static_cast<int>(std::max<int64_t>(1, t / q_len));
      c.max_total_q = c.max_batch * q_len;
    } else {
      q_len = static_cast<int>(t);
      c.max_batch = 1;
      c.max_total_q = static_cast<int>(t);
    }
    const int64_t max_ctx = int64_t(c.max_page_table_width) * c.page_size;
    const int64_t kv_len = std::min<int64_t>(max_ctx, std::max<int64_t>(2048, q_len));
    B12X_CHECK_ARG(kv_len >= q_len, kOp, ": attention layer '", layer, "' with ", q_len,
                   " query tokens per request does not fit its context capacity "
                   "max_page_table_width*page_size=",
                   max_ctx);
    DeviceScope ds(c.device);
    const attention::PagedPlan p = attention::plan_paged(c, r.stream);
    WarmupEntry e = planned_entry(layer, "attention", t);
    if (r.note(e, c.device, true)) {
      const int64_t B = c.max_batch, T = c.max_total_q, W = c.max_page_table_width;
      const int64_t pages = (kv_len + c.page_size - 1) / c.page_size;
      const int64_t Hq = c.num_q_heads, Hkv = c.num_kv_heads, Dq = c.head_dim_qk,
                    Dv = c.head_dim_vo, P = c.page_size;
      const int64_t kvb = c.kv_dtype == DType::kFP8E4M3 ? 1 : 2;
      // Every request reads the same pages (read-only), so the cache stays small.
      std::vector<int32_t> table(static_cast<size_t>(B * W), 0), lens(static_cast<size_t>(B)),
          cu(static_cast<size_t>(B + 1));
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t j = 0; j < pages; ++j) table[static_cast<size_t>(b * W + j)] = int32_t(j);
        lens[static_cast<size_t>(b)] = static_cast<int32_t>(kv_len);
      }
      for (int64_t b = 0; b <= B; ++b) cu[static_cast<size_t>(b)] = static_cast<int32_t>(b * q_len);
      const float one = 1.f;
      Arena a(c.device);
      const int64_t oq = a.add(T * Hq * Dq * 2), ok = a.add(pages * P * Hkv * Dq * kvb),
                    ov = a.add(pages * P * Hkv * Dv * kvb), oo = a.add(T * Hq * Dv * 2),
                    opt = a.add(B * W * 4), ol = a.add(B * 4), ocu = a.add((B + 1) * 4),
                    okd = a.add(4), ovd = a.add(4), os = a.add(p.scratch_bytes);
      a.allocate(r.stream);
      a.upload(opt, table.data(), B * W * 4, r.stream);
      a.upload(ol, lens.data(), B * 4, r.stream);
      a.upload(ocu, cu.data(), (B + 1) * 4, r.stream);
      a.upload(okd, &one, 4, r.stream);
      a.upload(ovd, &one, 4, r.stream);
      attention::PagedArgs args;
      args.q = a.tensor(oq, c.q_dtype, {T, Hq, Dq});
      args.k_cache = a.tensor(ok, c.kv_dtype, {pages, P, Hkv, Dq});
      args.v_cache = a.tensor(ov, c.kv_dtype, {pages, P, Hkv, Dv});
      args.out = a.tensor(oo, c.q_dtype, {T, Hq, Dv});
      args.page_table = a.tensor(opt, DType::kInt32, {B, W});
      args.cache_seqlens = a.tensor(ol, DType::kInt32, {B});
      args.cu_seqlens_q = a.tensor(ocu, DType::kInt32, {B + 1});
      if (c.kv_dtype == DType::kFP8E4M3) {
        args.k_descale = a.tensor(okd, DType::kFP32, {1});
        args.v_descale = a.tensor(ovd, DType::kFP32, {1});
      }
      const attention::PagedBinding b = attention::bind_paged(
          p, a.tensor(os, DType::kUInt8, {std::max<int64_t>(p.scratch_bytes, 1)}), args);
      r.launched(e, c.device, timed_launch(r.stream, [&] { attention::run_paged(b, r.stream); }));
    }
    r.report.entries.push_back(e);
  }
}

// ---- embedding ----------------------------------------------------------------------------------

void warm_embedding(Run& r, const WarmupEmbedding& L, size_t index) {
  const std::string layer = name_or(L.name, "embedding", index);
  for (int64_t t : r.tokens) {
    EmbeddingCaps c = L.caps;
    c.max_tokens = t;
    DeviceScope ds(c.device);
    plan_embedding(c);
    WarmupEntry e = planned_entry(layer, "embedding", t);
    if (r.note(e, c.device, true)) {
      // Without the caller's table: a one-row table (same kernel, same signature) and ids 0.
      EmbeddingCaps lc = c;
      if (L.weight.data == nullptr) lc.vocab = 1;
      const EmbeddingPlan p = plan_embedding(lc);
      const int64_t ib = c.id_dtype == DType::kInt64 ? 8 : 4;
      Arena a(c.device);
      const int64_t ow = a.add(dtype_bytes_for(DType::kQ8_0, lc.vocab * c.dim)), oi = a.add(t * ib),
                    oo = a.add(t * c.dim * 2), os = a.add(p.scratch_bytes);
      a.allocate(r.stream);
      const TensorRef w =
          L.weight.data != nullptr ? L.weight : a.tensor(ow, DType::kQ8_0, {1, c.dim});
      const EmbeddingBinding b =
          bind_embedding(p, a.tensor(os, DType::kUInt8, {p.scratch_bytes}), w,
                         a.tensor(oi, c.id_dtype, {t}), a.tensor(oo, c.out_dtype, {t, c.dim}));
      r.launched(e, c.device, timed_launch(r.stream, [&] { run_embedding(b, r.stream); }));
    }
    r.report.entries.push_back(e);
  }
}

std::string quote(const std::string& s) {
  std::string o = "\"";
  for (char ch : s) {
    const unsigned char u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      o += '\\';
      o += ch;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      o += buf;
    } else {
      o += ch;
    }
  }
  return o + "\"";
}

}  // namespace

std::string WarmupReport::to_json() const {
  std::ostringstream os;
  os << "{\"planned\": " << planned << ", \"unique\": " << unique << ", \"launched\": " << launched
     << ", \"already_warm\": " << already_warm << ", \"seconds\": " << seconds
     << ", \"entries\": [";
  for (size_t i = 0; i < entries.size(); ++i) {
    const WarmupEntry& e = entries[i];
    os << (i ? ", " : "") << "{\"layer\": " << quote(e.layer) << ", \"op\": " << quote(e.op)
       << ", \"tokens\": " << e.tokens << ", \"signature\": " << quote(e.signature)
       << ", \"launched\": " << (e.launched ? "true" : "false")
       << ", \"launch_ms\": " << e.launch_ms << "}";
  }
  os << "]}";
  return os.str();
}

WarmupReport warmup(const WarmupLayers& layers, const std::vector<int64_t>& token_counts,
                    Stream stream) {
  const auto t0 = Clock::now();
  std::vector<int64_t> tokens;
  for (size_t i = 0; i < token_counts.size(); ++i) {
    const int64_t t = token_counts[i];
    B12X_CHECK_ARG(t >= 1 && t <= (int64_t{1} << 24), kOp, ": token_counts[", i, "]=", t,
                   " (supported: 1 .. 2^24)");
    if (std::find(tokens.begin(), tokens.end(), t) == tokens.end()) tokens.push_back(t);
  }
  B12X_CHECK_ARG(!tokens.empty(), kOp,
                 ": token_counts is empty (give the batch sizes the "
                 "server will run, e.g. its CUDA-graph sizes and its prefill chunk)");
  refuse_during_capture(stream, kOp);
  WarmupReport report;
  Run r{tokens, stream, report, {}};
  for (size_t i = 0; i < layers.linear.size(); ++i) warm_linear(r, layers.linear[i], i);
  for (size_t i = 0; i < layers.moe.size(); ++i) warm_moe(r, layers.moe[i], i);
  for (size_t i = 0; i < layers.attention.size(); ++i) warm_attention(r, layers.attention[i], i);
  for (size_t i = 0; i < layers.embedding.size(); ++i) warm_embedding(r, layers.embedding[i], i);
  report.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (log_level() >= 1)
    log_message(1, "warmup: " + std::to_string(report.planned) + " plans, " +
                       std::to_string(report.unique) + " kernel signatures, " +
                       std::to_string(report.launched) + " launched in " +
                       std::to_string(report.seconds) + " s");
  return report;
}

}  // namespace b12x
