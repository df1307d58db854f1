// GPU tests of paged attention and the KV append op against the CPU reference.
//
// Every case builds a random paged problem: pages of each request are a random permutation of a
// pool whose other pages hold NaN (0xFF) bytes, page-table entries past each request's length
// hold out-of-range garbage ids (reading them would fault), outputs are poisoned before the run.
// The reference sees a compact host copy of the used pages with the same logical content.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "b12x/attention.h"
#include "b12x/reference/attention.h"
#include "b12x/runtime.h"
#include "b12x/status.h"
#include "cpp/test_attention_capi.h"
#include "formats/scalar.h"
#include "gpu/gpu_test_util.h"

namespace {

using b12x::DType;
using b12x::TensorRef;
namespace att = b12x::attention;

// Movable device buffer (gpu_test_util's DeviceBuffer API plus move assignment).
template <typename T>
struct DeviceBuffer : b12x::test::DeviceBuffer<T> {
  using Base = b12x::test::DeviceBuffer<T>;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : Base(n) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept : Base(std::move(o)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      if (this->ptr) cudaFree(this->ptr);
      this->ptr = o.ptr;
      this->count = o.count;
      o.ptr = nullptr;
      o.count = 0;
    }
    return *this;
  }
};

struct Spec {
  att::Mode mode = att::Mode::kDecode;
  DType q = DType::kBF16, kv = DType::kBF16;
  int hq = 8, hkv = 2, dqk = 128, dv = 128, page = 64;
  std::vector<int> qlens, prefix;  // kv length = prefix + qlen
  int window = -1;
  bool sinks = false, lse = true, per_head_scale = false, combined = true;
  int num_splits = 0, max_splits = 0;
  int64_t page_base = 0;  // device page ids start here (high ids: 64-bit offsets)
  int extra_t = 0;        // q rows beyond cu_seqlens_q[B] that must stay untouched
  float softmax_scale = 0.f;
  // > 0: q row (token, head) is scaled by 2^k, k in [-q_exp_spread, q_exp_spread] varying by
  // row (the fp16-MMA tiles scale Q rows into fp16's range by powers of two)
  int q_exp_spread = 0;
  bool prefix_stable = false;  // PagedCaps::kv_prefix_stable (early K/V copies)
  int cap_batch = 0;           // > B: the plan's max_batch (binds of fewer requests)
  std::string str() const {
    std::string s = std::string(att::mode_name(mode)) + " q=" + b12x::dtype_name(q) +
                    " kv=" + b12x::dtype_name(kv) + " hq=" + std::to_string(hq) +
                    " hkv=" + std::to_string(hkv) + " d=" + std::to_string(dqk) + "/" +
                    std::to_string(dv) + " page=" + std::to_string(page) +
                    " window=" + std::to_string(window) + " sinks=" + std::to_string(sinks) +
                    " splits=" + std::to_string(num_splits) +
                    " q_exp_spread=" + std::to_string(q_exp_spread) + " lens=";
    for (size_t i = 0; i < qlens.size(); ++i)
      s += std::to_string(qlens[i]) + "+" + std::to_string(prefix[i]) + ",";
    return s;
  }
};

int elt_bytes(DType t) {
  return t == DType::kFP8E4M3 ? 1 : 2;
}

uint16_t to_bits(DType t, float x) {
  return t == DType::kBF16 ? b12x::fmt::float_to_bf16_bits(x) : b12x::fmt::float_to_fp16_bits(x);
}

// Host problem + device buffers. Metadata lives in persistent device buffers so graph tests can
// rewrite it in place.
struct Problem {
  Spec s;
  int B = 0, T = 0, Talloc = 0, W = 0, n_used = 0;
  int64_t pool_pages = 0;
  std::vector<int> lk, npg;
  std::vector<int32_t> cu, lens, host_table, dev_table;
  std::vector<uint8_t> hk, hv, hq;  // host K/V compact cache, q (raw bytes)
  std::vector<float> kd, vd, sinks;
  // device
  DeviceBuffer<uint8_t> pool, pool_v, dq, dout, dscratch;
  DeviceBuffer<float> dlse, dkd, dvd, dsinks;
  DeviceBuffer<int32_t> dtable, dlens, dcu;
  att::PagedPlan plan;
  att::PagedBinding binding;
  int64_t k_page_stride = 0, v_page_stride = 0;  // elements
  uint8_t* kbase = nullptr;
  uint8_t* vbase = nullptr;
  std::vector<int64_t> dev_id;  // compact page -> device page id

  int64_t page_elems(int d) const { return int64_t(s.page) * s.hkv * d; }

  explicit Problem(const Spec& spec, std::mt19937_64& rng) : s(spec) {
    B = static_cast<int>(s.qlens.size());
    cu.assign(B + 1, 0);
    for (int b = 0; b < B; ++b) cu[b + 1] = cu[b] + s.qlens[b];
    T = cu[B];
    Talloc = T + s.extra_t;
    lk.resize(B);
    npg.resize(B);
    int maxp = 1;
    for (int b = 0; b < B; ++b) {
      lk[b] = s.prefix[b] + s.qlens[b];
      npg[b] = (lk[b] + s.page - 1) / s.page;
      maxp = std::max(maxp, npg[b]);
      n_used += npg[b];
    }
    W = maxp + 2;
    lens.assign(lk.begin(), lk.end());
    // Compact page ids in random order, then a random injective map into the device pool.
    std::vector<int> compact(n_used);
    std::iota(compact.begin(), compact.end(), 0);
    std::shuffle(compact.begin(), compact.end(), rng);
    const int spare = 3;
    std::vector<int64_t> slots(n_used + spare);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    dev_id.resize(n_used);
    for (int c = 0; c < n_used; ++c) dev_id[c] = s.page_base + slots[c];
    pool_pages = s.page_base + n_used + spare;
    host_table.assign(size_t(B) * W, 0);
    dev_table.assign(size_t(B) * W, 0);
    int next = 0;
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < W; ++i) {
        if (i < npg[b]) {
          const int c = compact[next++];
          host_table[size_t(b) * W + i] = c;
          dev_table[size_t(b) * W + i] = static_cast<int32_t>(dev_id[c]);
        } else {
          host_table[size_t(b) * W + i] = (i % 2) ? 0x7FFF0000 + i : -1 - i;  // never read
          dev_table[size_t(b) * W + i] = host_table[size_t(b) * W + i];
        }
      }
    fill_values(rng);
    upload();
  }

  void fill_values(std::mt19937_64& rng) {
    std::normal_distribution<float> nd(0.f, 1.f);
    const int kb = elt_bytes(s.kv);
    auto fill = [&](std::vector<uint8_t>& v, int64_t n, DType t, float sd) {
      v.resize(n * elt_bytes(t));
      for (int64_t i = 0; i < n; ++i) {
        const float x = nd(rng) * sd;
        if (t == DType::kFP8E4M3) {
          v[i] = b12x::fmt::float_to_e4m3_satfinite(x);
        } else {
          const uint16_t bits = to_bits(t, x);
          std::memcpy(&v[2 * i], &bits, 2);
        }
      }
    };
    (void)kb;
    fill(hk, int64_t(n_used) * page_elems(s.dqk), s.kv, s.kv == DType::kFP8E4M3 ? 3.f : 1.f);
    fill(hv, int64_t(n_used) * page_elems(s.dv), s.kv, s.kv == DType::kFP8E4M3 ? 3.f : 1.f);
    fill(hq, int64_t(Talloc) * s.hq * s.dqk, s.q, 1.f);
    if (s.q_exp_spread > 0) {
      const int span = 2 * s.q_exp_spread + 1;
      for (int64_t row = 0; row < int64_t(Talloc) * s.hq; ++row) {
        const float f = std::ldexp(1.f, int((row * 7) % span) - s.q_exp_spread);
        for (int d = 0; d < s.dqk; ++d) {
          uint16_t bits;
          std::memcpy(&bits, &hq[2 * (row * s.dqk + d)], 2);
          const float x = (s.q == DType::kBF16 ? b12x::fmt::bf16_bits_to_float(bits)
                                               : b12x::fmt::fp16_bits_to_float(bits)) *
                          f;
          bits = to_bits(s.q, x);
          std::memcpy(&hq[2 * (row * s.dqk + d)], &bits, 2);
        }
      }
    }
    std::uniform_real_distribution<float> ud(0.1f, 0.6f);
    if (s.kv == DType::kFP8E4M3) {
      const int n = s.per_head_scale ? B * s.hkv : B;
      kd.resize(n);
      vd.resize(n);
      for (auto& x : kd) x = ud(rng);
      for (auto& x : vd) x = ud(rng);
    }
    if (s.sinks) {
      sinks.resize(s.hq);
      for (auto& x : sinks) x = nd(rng) * 2.f;
    }
  }

  void upload() {
    const int eb = elt_bytes(s.kv);
    const int64_t kpb = page_elems(s.dqk) * eb, vpb = page_elems(s.dv) * eb;
    if (s.combined && s.dqk == s.dv) {
      pool = DeviceBuffer<uint8_t>(size_t(pool_pages) * (kpb + vpb));
      kbase = pool.ptr;
      vbase = pool.ptr + kpb;
      k_page_stride = v_page_stride = (kpb + vpb) / eb;
    } else {
      pool = DeviceBuffer<uint8_t>(size_t(pool_pages) * kpb);
      pool_v = DeviceBuffer<uint8_t>(size_t(pool_pages) * vpb);
      kbase = pool.ptr;
      vbase = pool_v.ptr;
      k_page_stride = kpb / eb;
      v_page_stride = vpb / eb;
    }
    pool.poison(0xFF);
    if (pool_v.ptr) pool_v.poison(0xFF);
    for (int c = 0; c < n_used; ++c) {
      EXPECT_EQ(cudaMemcpy(kbase + dev_id[c] * k_page_stride * eb, hk.data() + c * kpb, kpb,
                           cudaMemcpyHostToDevice),
                cudaSuccess);
      EXPECT_EQ(cudaMemcpy(vbase + dev_id[c] * v_page_stride * eb, hv.data() + c * vpb, vpb,
                           cudaMemcpyHostToDevice),
                cudaSuccess);
    }
    dq = DeviceBuffer<uint8_t>(hq.size());
    dq.upload(hq);
    dout = DeviceBuffer<uint8_t>(size_t(Talloc) * s.hq * s.dv * 2);
    dlse = DeviceBuffer<float>(size_t(Talloc) * s.hq);
    dtable = DeviceBuffer<int32_t>(dev_table.size());
    dtable.upload(dev_table);
    dlens = DeviceBuffer<int32_t>(B);
    dlens.upload(lens);
    dcu = DeviceBuffer<int32_t>(B + 1);
    dcu.upload(cu);
    if (!kd.empty()) {
      dkd = DeviceBuffer<float>(kd.size());
      dkd.upload(kd);
      dvd = DeviceBuffer<float>(vd.size());
      dvd.upload(vd);
    }
    if (!sinks.empty()) {
      dsinks = DeviceBuffer<float>(sinks.size());
      dsinks.upload(sinks);
    }
  }

  att::PagedCaps caps() const {
    att::PagedCaps c;
    c.device = 0;
    c.mode = s.mode;
    c.q_dtype = s.q;
    c.kv_dtype = s.kv;
    c.num_q_heads = s.hq;
    c.num_kv_heads = s.hkv;
    c.head_dim_qk = s.dqk;
    c.head_dim_vo = s.dv;
    c.page_size = s.page;
    c.max_batch = std::max(B, s.cap_batch);
    c.max_page_table_width = W;
    c.max_total_q = Talloc;
    c.max_splits = s.max_splits;
    c.kv_prefix_stable = s.prefix_stable;
    return c;
  }

  TensorRef scale_ref(float* p) const {
    if (s.per_head_scale) return TensorRef::contiguous(p, DType::kFP32, {B, s.hkv}, 0);
    return TensorRef::contiguous(p, DType::kFP32, {B}, 0);
  }

  att::PagedArgs device_args() {
    att::PagedArgs a;
    a.q = TensorRef::contiguous(dq.ptr, s.q, {Talloc, s.hq, s.dqk}, 0);
    a.k_cache = TensorRef::contiguous(kbase, s.kv, {pool_pages, s.page, s.hkv, s.dqk}, 0);
    a.k_cache.stride[0] = k_page_stride;
    a.v_cache = TensorRef::contiguous(vbase, s.kv, {pool_pages, s.page, s.hkv, s.dv}, 0);
    a.v_cache.stride[0] = v_page_stride;
    a.out = TensorRef::contiguous(dout.ptr, s.q, {Talloc, s.hq, s.dv}, 0);
    a.page_table = TensorRef::contiguous(dtable.ptr, DType::kInt32, {B, W}, 0);
    a.cache_seqlens = TensorRef::contiguous(dlens.ptr, DType::kInt32, {B}, 0);
    a.cu_seqlens_q = TensorRef::contiguous(dcu.ptr, DType::kInt32, {B + 1}, 0);
    if (dkd.ptr) {
      a.k_descale = scale_ref(dkd.ptr);
      a.v_descale = scale_ref(dvd.ptr);
    }
    if (dsinks.ptr) a.sinks = TensorRef::contiguous(dsinks.ptr, DType::kFP32, {s.hq}, 0);
    if (s.lse) a.lse = TensorRef::contiguous(dlse.ptr, DType::kFP32, {Talloc, s.hq}, 0);
    a.window_left = s.window;
    a.softmax_scale = s.softmax_scale;
    a.num_splits = s.num_splits;
    return a;
  }

  // Plans and binds; errors are checked through the C ABI first (C++ exceptions do not cross
  // libb12x's boundary), so a failure is reported instead of terminating the test binary.
  std::string try_plan_and_bind() {
    const b12x_paged_caps cc = b12x::attention_test::to_c(caps());
    b12x_paged_attention_plan h = nullptr;
    if (b12x_attention_paged_plan_create_ex(&cc, b12x::attention_test::c_flags(caps()), nullptr,
                                            &h) != B12X_OK)
      return b12x_last_error();
    b12x_paged_plan_info info{};
    b12x_attention_paged_plan_info(h, &info);
    dscratch = DeviceBuffer<uint8_t>(std::max<int64_t>(info.scratch_bytes, 256));
    dscratch.randomize();
    b12x::attention_test::CArgs ca(device_args());
    const b12x_tensor cs = b12x::attention_test::to_c(
        TensorRef::contiguous(dscratch.ptr, DType::kUInt8, {info.scratch_bytes}, 0));
    b12x_paged_attention_binding bnd = nullptr;
    std::string err;
    if (b12x_attention_paged_bind(h, &cs, &ca.a, &bnd) != B12X_OK) err = b12x_last_error();
    b12x_attention_paged_binding_destroy(bnd);
    b12x_attention_paged_plan_destroy(h);
    if (!err.empty()) return err;
    plan = att::plan_paged(caps());
    binding = att::bind_paged(
        plan, TensorRef::contiguous(dscratch.ptr, DType::kUInt8, {plan.scratch_bytes}, 0),
        device_args());
    return "";
  }

  void run(cudaStream_t stream = nullptr) {
    dout.poison(0xFF);
    dlse.poison(0xFF);
    att::run_paged(binding, stream);
  }

  // Reference on the host copy (compact pages).
  void reference(std::vector<double>& out, std::vector<double>& lse) {
    att::PagedArgs a;
    a.q = TensorRef::contiguous(hq.data(), s.q, {Talloc, s.hq, s.dqk});
    a.k_cache = TensorRef::contiguous(hk.data(), s.kv, {n_used, s.page, s.hkv, s.dqk});
    a.v_cache = TensorRef::contiguous(hv.data(), s.kv, {n_used, s.page, s.hkv, s.dv});
    out.assign(size_t(Talloc) * s.hq * s.dv, 0.0);
    lse.assign(size_t(Talloc) * s.hq, 0.0);
    a.out = TensorRef::contiguous(out.data(), DType::kFP64, {Talloc, s.hq, s.dv});
    a.lse = TensorRef::contiguous(lse.data(), DType::kFP64, {Talloc, s.hq});
    a.page_table = TensorRef::contiguous(host_table.data(), DType::kInt32, {B, W});
    a.cache_seqlens = TensorRef::contiguous(lens.data(), DType::kInt32, {B});
    a.cu_seqlens_q = TensorRef::contiguous(cu.data(), DType::kInt32, {B + 1});
    if (!kd.empty()) {
      if (s.per_head_scale) {
        a.k_descale = TensorRef::contiguous(kd.data(), DType::kFP32, {B, s.hkv});
        a.v_descale = TensorRef::contiguous(vd.data(), DType::kFP32, {B, s.hkv});
      } else {
        a.k_descale = TensorRef::contiguous(kd.data(), DType::kFP32, {B});
        a.v_descale = TensorRef::contiguous(vd.data(), DType::kFP32, {B});
      }
    }
    if (!sinks.empty()) a.sinks = TensorRef::contiguous(sinks.data(), DType::kFP32, {s.hq});
    a.window_left = s.window;
    a.softmax_scale = s.softmax_scale;
    b12x::reference::paged_attention(a);
  }

  std::vector<float> download_out() {
    std::vector<uint8_t> raw = dout.download();
    std::vector<float> o(raw.size() / 2);
    for (size_t i = 0; i < o.size(); ++i) {
      uint16_t b;
      std::memcpy(&b, &raw[2 * i], 2);
      o[i] =
          s.q == DType::kBF16 ? b12x::fmt::bf16_bits_to_float(b) : b12x::fmt::fp16_bits_to_float(b);
    }
    return o;
  }

  // Compares the device result with the reference; rows past cu[B] must stay poisoned.
  void check(const std::string& what) {
    std::vector<double> ref, ref_lse;
    reference(ref, ref_lse);
    const std::vector<float> got = download_out();
    const size_t live = size_t(T) * s.hq * s.dv;
    std::vector<float> g(got.begin(), got.begin() + live);
    std::vector<double> r(ref.begin(), ref.begin() + live);
    const auto c = b12x::test::compare(g, r);
    // Tolerance scales with the output magnitude: bf16 output rounding and bf16 P (half-ulp
    // 2^-9 relative) dominate; fp32 accumulation order is the only other difference.
    double ref_max = 1.0;
    for (double x : r) ref_max = std::max(ref_max, std::abs(x));
    const double tol = (s.q == DType::kFP16 ? 4e-3 : 1.2e-2) * ref_max;
    EXPECT_EQ(c.nonfinite, 0) << what << " " << s.str() << " " << c.str();
    EXPECT_LE(c.max_abs, tol) << what << " " << s.str() << " " << c.str();
    EXPECT_LE(c.rel_l2, 8e-3) << what << " " << s.str() << " " << c.str();
    for (size_t i = live; i < got.size(); ++i) {
      if (!std::isnan(got[i])) {
        ADD_FAILURE() << what << " padding row value " << i << " was written: " << got[i];
        break;
      }
    }
    if (s.lse) {
      const std::vector<float> gl = dlse.download();
      double worst = 0;
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < s.hq; ++h) {
          const double a = gl[size_t(t) * s.hq + h], b = ref_lse[size_t(t) * s.hq + h];
          if (!(std::isfinite(a) && std::isfinite(b))) {
            if (!(std::isinf(a) && std::isinf(b) && a < 0 && b < 0)) worst = INFINITY;
            continue;
          }
          worst = std::max(worst, std::abs(a - b));
        }
      EXPECT_LE(worst, 1e-2) << what << " lse " << s.str();
    }
  }
};

std::mt19937_64& rng() {
  static std::mt19937_64 g(12345);
  return g;
}

#define PLAN_AND_BIND(p)                                                             \
  do {                                                                               \
    const std::string err_ = (p).try_plan_and_bind();                                \
    if (!err_.empty()) FAIL() << "plan/bind failed: " << err_ << " " << (p).s.str(); \
  } while (0)

void run_case(const Spec& s, const std::string& what) {
  Problem p(s, rng());
  PLAN_AND_BIND(p);
  p.run();
  B12X_TEST_CUDA(cudaDeviceSynchronize());
  p.check(what);
}

// Environment knobs set for one scope and unset at its end, also when an assertion returns
// early (so a probe cannot stay on for the later tests).
struct ScopedEnvs {
  std::vector<std::string> names;
  explicit ScopedEnvs(std::initializer_list<std::pair<const char*, const char*>> kv) {
    for (const auto& [n, v] : kv) {
      setenv(n, v, 1);
      names.emplace_back(n);
    }
  }
  ~ScopedEnvs() {
    for (const std::string& n : names) unsetenv(n.c_str());
  }
};

struct Dims {
  int dqk, dv;
};
constexpr Dims kDims[] = {{128, 128}, {64, 64}, {256, 256}, {192, 192}, {192, 128}};
constexpr int kRatios[] = {1, 4, 8, 16, 3, 6, 2, 5};

// Verify: 32 q heads over hkv KV heads, three requests of q_len rows on prefixes 0 / 61 / 700.
Spec verify_spec(int hkv, int q_len) {
  Spec v;
  v.mode = att::Mode::kVerify;
  v.hq = 32;
  v.hkv = hkv;
  v.qlens.assign(3, q_len);
  v.prefix = {0, 61, 700};
  return v;
}

// Ragged decode lengths: 1, page +- 1, a non-multiple, one long enough to split.
std::vector<int> decode_prefix(int page) {
  return {0, page - 1, page, 3 * page + 5, 1700};
}

TEST(AttentionGpuDecode, DtypesPagesWindowsSinks) {
  B12X_REQUIRE_GPU();
  int i = 0;
  for (DType kv : {DType::kBF16, DType::kFP16, DType::kFP8E4M3})
    for (int page : {16, 32, 64, 128})
      for (int variant = 0; variant < 2; ++variant, ++i) {
        Spec s;
        s.mode = att::Mode::kDecode;
        s.kv = kv;
        s.q = kv == DType::kFP16 ? DType::kFP16 : DType::kBF16;
        s.page = page;
        const Dims d = kDims[i % 5];
        s.dqk = d.dqk;
        s.dv = d.dv;
        s.hkv = 1 + i % 3;
        s.hq = s.hkv * kRatios[i % 8];
        s.prefix = decode_prefix(page);
        s.qlens.assign(s.prefix.size(), 1);
        s.window = variant ? 45 : -1;
        s.sinks = variant == 1;
        s.per_head_scale = (i % 2) == 0;
        s.combined = (i % 3) != 0;
        run_case(s, "decode");
      }
}

// The decode tiles ("wide": 4 warps x 16 tokens, 16-bit head dims 192 / 256; "wide3": the wide
// tile with Q in registers and 3 stages, the 16-bit default for head dims <= 128; "hcvt" /
// "hcvt3": FP8 fragments from the raw stage on fp16 MMAs with 2 / 3 stages, head dims 128 / 256)
// selected through B12X_ATTN_DECODE_TILE at plan time (shapes a tile does not cover take their
// default tile).
TEST(AttentionGpuDecode, AlternativeTiles) {
  B12X_REQUIRE_GPU();
  for (const char* tile : {"wide", "wide3", "hcvt", "hcvt3"}) {
    setenv("B12X_ATTN_DECODE_TILE", tile, 1);
    int i = 0;
    for (int d : {128, 256})
      for (int page : {16, 64}) {
        Spec s;
        s.kv = DType::kFP8E4M3;
        s.dqk = s.dv = d;
        s.page = page;
        s.hkv = 2;
        s.hq = 2 * (i % 2 ? 8 : 5);
        s.prefix = decode_prefix(page);
        s.qlens.assign(s.prefix.size(), 1);
        s.window = i == 1 ? 70 : -1;
        s.sinks = i >= 2;
        s.per_head_scale = i % 2 == 0;
        s.num_splits = i == 3 ? 5 : 0;
        s.max_splits = i == 3 ? 5 : 0;
        ++i;
        run_case(s, std::string("tile=") + tile);
        if (std::string(tile) == "wide" || std::string(tile) == "wide3") {  // 16-bit KV tiles
          Spec b = s;
          b.kv = DType::kBF16;
          run_case(b, std::string("tile=") + tile + " bf16");
          if (d == 128 || std::string(tile) == "wide3") {
            Spec f = s;
            f.kv = DType::kFP16;
            f.q = DType::kFP16;
            run_case(f, std::string("tile=") + tile + " fp16");
          }
        }
      }
    unsetenv("B12X_ATTN_DECODE_TILE");
  }
}

// The fp16-MMA FP8 tiles convert Q to fp16 after scaling each row by a power of two: rows
// spanning 2^-18..2^18 (q beyond fp16's range at the top, into its subnormals at the bottom) must
// match the reference, with and without splits, sinks and per-head descales.
TEST(AttentionGpuDecode, Fp16MmaQueryRange) {
  B12X_REQUIRE_GPU();
  for (const char* tile : {"hcvt", "hcvt3"}) {
    setenv("B12X_ATTN_DECODE_TILE", tile, 1);
    for (int i = 0; i < 3; ++i) {
      Spec s;
      s.kv = DType::kFP8E4M3;
      s.hq = 16;
      s.hkv = 2;
      s.page = i == 0 ? 16 : 64;
      s.prefix = decode_prefix(s.page);
      s.qlens.assign(s.prefix.size(), 1);
      s.dqk = s.dv = i == 1 ? 256 : 128;
      s.q_exp_spread = 18;
      s.softmax_scale = 1.f / 16384;  // logits of the 2^18 rows stay ~1e2 (LSE checked to 1e-2)
      s.sinks = i == 1;
      s.per_head_scale = i != 2;
      s.num_splits = i == 2 ? 7 : 0;
      s.max_splits = i == 2 ? 7 : 0;
      run_case(s, std::string("q range tile=") + tile);
    }
    unsetenv("B12X_ATTN_DECODE_TILE");
  }
}

// Decode, 32 q heads on 8 KV heads, one token per request over KV lengths prefix + 1, with
// `splits` forced splits (0: automatic) and room for `max_splits`.
Spec gqa_decode_spec(std::vector<int> prefix, int splits, int max_splits) {
  Spec s;
  s.hq = 32;
  s.hkv = 8;
  s.qlens.assign(prefix.size(), 1);
  s.prefix = std::move(prefix);
  s.num_splits = splits;
  s.max_splits = max_splits;
  return s;
}

// Forced split counts, with the splits merged by the merge kernel (the default) and in the main
// kernel (B12X_ATTN_FUSED_MERGE=1: the last CTA of each row tile and KV head merges).
TEST(AttentionGpuDecode, SplitCountsAgree) {
  B12X_REQUIRE_GPU();
  for (const char* fused : {"1", "0"}) {
    setenv("B12X_ATTN_FUSED_MERGE", fused, 1);
    for (int splits : {1, 2, 7, 64}) {
      Spec s = gqa_decode_spec({4000, 63, 1, 2500}, splits, 64);
      s.sinks = splits == 7;
      s.kv = splits == 2 ? DType::kFP8E4M3 : DType::kBF16;
      s.per_head_scale = true;
      run_case(s, "split=" + std::to_string(splits) + " fused=" + fused);
    }
    unsetenv("B12X_ATTN_FUSED_MERGE");
  }
}

// The split-merge kernel (session 26: 2 / 4 / 8 lanes per float4 column at head dims 256 and
// 192 / 128 / 64, its code run once before the wait with its loads and stores off) over forced
// (7) and automatic splits, 64 splits (four batches of loads per lane), both KV dtypes, pages 64 /
// 128, sinks, windows, no LSE, early K/V at 16/2/256 and verify (q_len 2 / 4); the extend split:
// ForcedSplitAndSoftmaxScale.
TEST(AttentionGpuDecode, SplitMergeKernel) {
  B12X_REQUIRE_GPU();
  int i = 0;
  for (const Dims d : kDims)
    for (int splits : {7, 0}) {
      Spec s = gqa_decode_spec({300, 63, 1, 900}, splits, splits);
      s.hq = 16;
      s.hkv = 4;
      s.dqk = d.dqk;
      s.dv = d.dv;
      s.kv = i % 2 ? DType::kFP8E4M3 : DType::kBF16;
      s.per_head_scale = s.kv == DType::kFP8E4M3 && i % 4 == 1;
      s.page = i % 3 ? 64 : 128;
      s.sinks = i % 3 == 1;
      s.window = i % 5 == 2 ? 200 : -1;
      s.lse = i % 4 != 3;
      ++i;
      run_case(s, "merge");
    }
  Spec s = gqa_decode_spec({8191, 1}, 64, 64);  // 64 splits of 128 tokens
  s.hq = 8;
  s.hkv = 2;
  s.dqk = s.dv = 256;
  s.kv = DType::kFP8E4M3;
  s.sinks = true;
  run_case(s, "merge, 64 splits");
  s.prefix = {1200, 63, 1, 2000};
  s.qlens.assign(4, 1);
  s.num_splits = s.max_splits = 0;
  s.prefix_stable = true;
  s.hq = 16;
  s.kv = DType::kBF16;
  s.page = 128;
  run_case(s, "merge, early");
  for (int qlen : {2, 4}) {
    Spec v = verify_spec(2, qlen);
    v.hq = 16;
    v.kv = qlen == 2 ? DType::kFP8E4M3 : DType::kBF16;
    v.num_splits = v.max_splits = qlen == 2 ? 5 : 0;
    v.sinks = qlen == 4;
    run_case(v, "merge, verify");
  }
}

// B12X_ATTN_GRID=heads (the default): grid x enumerates (row tile, KV head) with the heads
// fastest; tiles: (row tile, head) = (x, y). Decode (automatic and forced splits, FP8 direct
// tile) and extend must match the reference with either.
TEST(AttentionGpuDecode, HeadsInnerGrid) {
  B12X_REQUIRE_GPU();
  for (const char* grid : {"heads", "tiles"}) {
    setenv("B12X_ATTN_GRID", grid, 1);
    for (int i = 0; i < 3; ++i) {
      Spec s;
      s.hq = 32;
      s.hkv = 8;
      s.kv = i == 1 ? DType::kFP8E4M3 : DType::kBF16;
      s.prefix = {4000, 63, 1, 2500, 700};
      s.qlens.assign(5, 1);
      s.num_splits = i == 2 ? 7 : 0;
      s.max_splits = i == 2 ? 7 : 0;
      s.sinks = i == 2;
      run_case(s, std::string("decode grid=") + grid);
    }
    Spec e;
    e.mode = att::Mode::kExtend;
    e.hq = 12;
    e.hkv = 3;
    e.qlens = {1, 37, 70, 5};
    e.prefix = {0, 67, 130, 0};
    e.window = 50;
    run_case(e, std::string("extend grid=") + grid);
    unsetenv("B12X_ATTN_GRID");
  }
}

// The online softmax's running max moves only past a slack of 8 (base 2; default) or on every
// increase (B12X_ATTN_RESCALE_SLACK=0). Q rows scaled by up to 2^+-4 make scores whose row
// maxima jump by far more than 8 between tiles of long causal rows (both branches taken), on
// the extend tile (with and without sinks), a decode tile and an FP8 hcvt decode.
TEST(AttentionGpuExtend, RescaleSlack) {
  B12X_REQUIRE_GPU();
  for (const char* slack : {"8", "0"})
    for (const bool second : {false, true}) {
      setenv("B12X_ATTN_RESCALE_SLACK", slack, 1);
      Spec e;
      e.mode = att::Mode::kExtend;
      e.hq = 16;
      e.hkv = 4;
      e.qlens = {300, 37, 129};
      e.prefix = {0, 500, 64};
      e.q_exp_spread = 4;
      e.sinks = second;
      run_case(e, std::string("extend slack=") + slack + (second ? " sinks" : ""));
      Spec d;
      d.hq = 32;
      d.hkv = 8;
      d.kv = second ? DType::kFP8E4M3 : DType::kBF16;
      d.qlens.assign(3, 1);
      d.prefix = {1500, 63, 700};
      d.q_exp_spread = 4;
      run_case(d, std::string("decode slack=") + slack);
      unsetenv("B12X_ATTN_RESCALE_SLACK");
    }
}

TEST(AttentionGpuExtend, DtypesPagesWindowsSinks) {
  B12X_REQUIRE_GPU();
  int i = 0;
  for (DType kv : {DType::kBF16, DType::kFP16, DType::kFP8E4M3})
    for (int page : {16, 32, 64, 128}) {
      Spec s;
      s.mode = att::Mode::kExtend;
      s.kv = kv;
      s.q = kv == DType::kFP16 ? DType::kFP16 : DType::kBF16;
      s.page = page;
      const Dims d = kDims[i % 5];
      s.dqk = d.dqk;
      s.dv = d.dv;
      s.hkv = 1 + i % 2;
      s.hq = s.hkv * kRatios[(i + 3) % 8];
      s.qlens = {1, 37, 70, 5};
      s.prefix = {0, page + 3, 130, 0};
      s.window = (i % 3 == 1) ? 50 : -1;
      s.sinks = (i % 2) == 1;
      s.per_head_scale = (i % 2) == 0;
      s.extra_t = 3;
      ++i;
      run_case(s, "extend");
    }
}

TEST(AttentionGpuExtend, ForcedSplitAndSoftmaxScale) {
  B12X_REQUIRE_GPU();
  Spec s;
  s.mode = att::Mode::kExtend;
  s.hq = 16;
  s.hkv = 4;
  s.qlens = {20, 3};
  s.prefix = {900, 1200};
  s.max_splits = 5;
  s.num_splits = 5;
  s.softmax_scale = 0.05f;
  s.sinks = true;
  run_case(s, "extend split");
}

TEST(AttentionGpuVerify, UniformQueryLength) {
  B12X_REQUIRE_GPU();
  int i = 0;
  for (DType kv : {DType::kBF16, DType::kFP8E4M3})
    for (int qlen : {2, 4, 7}) {
      Spec s;
      s.mode = att::Mode::kVerify;
      s.kv = kv;
      s.hkv = 2;
      s.hq = 2 * (i % 2 ? 8 : 3);
      s.page = i % 2 ? 128 : 64;
      s.qlens.assign(3, qlen);
      s.prefix = {10, 600, 2100};
      s.window = i == 2 ? 100 : -1;
      s.sinks = i == 3;
      // forced splits (qlen 7 x group 8 runs the extend tile)
      s.num_splits = s.max_splits = i >= 4 ? 3 : 0;
      ++i;
      run_case(s, "verify");
    }
}

// Live page ids whose byte offset exceeds 2^31 (64-bit page offsets).
TEST(AttentionGpuDecode, HighPageIdsBeyond2GiB) {
  B12X_REQUIRE_GPU();
  for (DType kv : {DType::kBF16, DType::kFP8E4M3}) {
    Spec s;
    s.kv = kv;
    s.hq = 16;
    s.hkv = 8;
    s.page = 64;
    s.qlens = {1, 1};
    s.prefix = {300, 130};
    // combined K/V page = 2 * 64 * 8 * 128 * elt bytes: push ids past 2^31 bytes.
    const int64_t page_bytes = int64_t(2) * 64 * 8 * 128 * elt_bytes(kv);
    s.page_base = (int64_t(1) << 31) / page_bytes + 7;
    run_case(s, "high page ids");
    Spec e = s;
    e.mode = att::Mode::kExtend;
    e.qlens = {5, 17};
    run_case(e, "high page ids extend");
  }
}

// Lengths and windows near the int range (review F8 of session 8): window_left = INT32_MAX must
// act as no window (run_paged clamps it to W x page_size), and a request whose cache_seqlens hold
// INT32_MIN, -7, 0 or INT32_MAX (clamped to W x page_size; bad metadata: its own rows are
// unspecified) must neither fault nor disturb the other requests, with and without that window,
// over decode (automatic and forced splits, both KV dtypes), verify and extend.
TEST(AttentionGpuDecode, OutOfRangeLengthsAndWindow) {
  B12X_REQUIRE_GPU();
  constexpr int kBad = 1;  // the request whose length is rewritten
  int i = 0;
  for (att::Mode mode : {att::Mode::kDecode, att::Mode::kVerify, att::Mode::kExtend})
    for (DType kv : {DType::kBF16, DType::kFP8E4M3}) {
      Spec s;
      s.mode = mode;
      s.kv = kv;
      s.hq = 8;
      s.hkv = 2;
      s.page = 64;
      s.prefix = {130, 63, 700, 1700};
      s.qlens.assign(4, mode == att::Mode::kDecode ? 1 : (mode == att::Mode::kVerify ? 3 : 9));
      s.window = INT32_MAX;
      s.num_splits = s.max_splits = (mode == att::Mode::kDecode && i % 2) ? 7 : 0;
      s.sinks = (i % 3) == 1;
      ++i;
      run_case(s, "window INT32_MAX");
      for (int32_t bad : {INT32_MIN, -7, 0, INT32_MAX}) {
        Problem p(s, rng());
        PLAN_AND_BIND(p);
        p.run();
        B12X_TEST_CUDA(cudaDeviceSynchronize());
        // The good run's rows of request kBad stand in for the bad run's (unspecified) ones.
        const size_t row0 = size_t(p.cu[kBad]) * s.hq, rows = size_t(s.qlens[kBad]) * s.hq;
        const size_t ob = size_t(s.dv) * 2;
        std::vector<uint8_t> out_rows(rows * ob);
        std::vector<float> lse_rows(rows);
        B12X_TEST_CUDA(
            cudaMemcpy(out_rows.data(), p.dout.ptr + row0 * ob, rows * ob, cudaMemcpyDeviceToHost));
        B12X_TEST_CUDA(
            cudaMemcpy(lse_rows.data(), p.dlse.ptr + row0, rows * 4, cudaMemcpyDeviceToHost));
        std::vector<int32_t> lens = p.lens;
        lens[kBad] = bad;
        p.dlens.upload(lens);
        p.run();
        B12X_TEST_CUDA(cudaDeviceSynchronize());
        B12X_TEST_CUDA(
            cudaMemcpy(p.dout.ptr + row0 * ob, out_rows.data(), rows * ob, cudaMemcpyHostToDevice));
        B12X_TEST_CUDA(
            cudaMemcpy(p.dlse.ptr + row0, lse_rows.data(), rows * 4, cudaMemcpyHostToDevice));
        p.check("cache_seqlens[1]=" + std::to_string(bad));
      }
    }
}

// Capture run() once, replay 100 times with new lengths and page tables written in place.
// Decode also with B12X_ATTN_PREFETCH=1 (first K/V tiles prefetched before the PDL wait from
// metadata read early): replays must still match eager runs and the reference.
TEST(AttentionGpuGraph, ReplayWithChangingMetadataMatchesEager) {
  B12X_REQUIRE_GPU();
  for (int run = 0; run < 3; ++run) {
    const att::Mode mode = run == 1 ? att::Mode::kExtend : att::Mode::kDecode;
    if (run == 2) setenv("B12X_ATTN_PREFETCH", "1", 1);
    Spec s;
    s.mode = mode;
    s.hq = 8;
    s.hkv = 2;
    s.page = 16;
    s.qlens =
        mode == att::Mode::kDecode ? std::vector<int>{1, 1, 1, 1} : std::vector<int>{9, 1, 30, 4};
    s.prefix = {700, 700, 700, 700};  // capacity: each request may hold up to ~730 tokens
    s.sinks = true;
    Problem p(s, rng());
    PLAN_AND_BIND(p);
    const int Tcap = p.Talloc;
    cudaStream_t st;
    B12X_TEST_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    B12X_TEST_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    att::run_paged(p.binding, st);
    B12X_TEST_CUDA(cudaStreamEndCapture(st, &graph));
    B12X_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    std::uniform_int_distribution<int> len_d(0, 700);
    int mismatches = 0;
    for (int rep = 0; rep < 100; ++rep) {
      // New lengths (same T for decode, <= capacity for extend) and a reshuffled table.
      if (mode == att::Mode::kExtend) {
        int t = 0;
        for (int b = 0; b < p.B; ++b) {
          const int q = std::uniform_int_distribution<int>(0, 11)(rng());
          p.cu[b + 1] = p.cu[b] + std::min(q, Tcap - t);
          t = p.cu[b + 1];
        }
      }
      for (int b = 0; b < p.B; ++b) {
        const int ql = p.cu[b + 1] - p.cu[b];
        p.lens[b] = std::max(std::max(ql, 1), std::min(ql + len_d(rng()), p.npg[b] * s.page));
      }
      // Reshuffle each request's pages; entries past the live length become garbage ids.
      for (int b = 0; b < p.B; ++b) {
        const int need = (p.lens[b] + s.page - 1) / s.page;
        auto row = p.host_table.begin() + size_t(b) * p.W;
        std::shuffle(row, row + p.npg[b], rng());
        for (int i = 0; i < p.W; ++i)
          p.dev_table[size_t(b) * p.W + i] =
              i < need ? static_cast<int32_t>(p.dev_id[row[i]]) : -100 - i;
      }
      p.T = p.cu[p.B];
      B12X_TEST_CUDA(
          cudaMemcpyAsync(p.dlens.ptr, p.lens.data(), p.B * 4, cudaMemcpyHostToDevice, st));
      B12X_TEST_CUDA(
          cudaMemcpyAsync(p.dcu.ptr, p.cu.data(), (p.B + 1) * 4, cudaMemcpyHostToDevice, st));
      B12X_TEST_CUDA(cudaMemcpyAsync(p.dtable.ptr, p.dev_table.data(), p.dev_table.size() * 4,
                                     cudaMemcpyHostToDevice, st));
      B12X_TEST_CUDA(cudaMemsetAsync(p.dout.ptr, 0xFF, p.dout.bytes(), st));
      B12X_TEST_CUDA(cudaGraphLaunch(exec, st));
      B12X_TEST_CUDA(cudaStreamSynchronize(st));
      const std::vector<uint8_t> replay = p.dout.download();
      const std::vector<float> replay_lse = p.dlse.download();
      B12X_TEST_CUDA(cudaMemsetAsync(p.dout.ptr, 0xFF, p.dout.bytes(), st));
      att::run_paged(p.binding, st);
      B12X_TEST_CUDA(cudaStreamSynchronize(st));
      const std::vector<uint8_t> eager = p.dout.download();
      if (std::memcmp(replay.data(), eager.data(), size_t(p.T) * s.hq * s.dv * 2) != 0)
        ++mismatches;
      if (rep % 25 == 0) {
        // Re-check the replayed state against the reference as well.
        p.check("graph replay " + std::to_string(rep));
      }
      (void)replay_lse;
    }
    EXPECT_EQ(mismatches, 0) << att::mode_name(mode) << " prefetch=" << (run == 2)
                             << ": replays differing from eager";
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(st);
    unsetenv("B12X_ATTN_PREFETCH");
  }
}

// B12X_ATTN_PREFETCH=1: decode (BF16 and FP8 tiles, automatic and forced splits, window, sinks)
// and verify on the decode tile, against the reference.
// The L2 prefetch before the PDL wait: in every bind (B12X_ATTN_PREFETCH=1), off (=0), and by
// default in split binds, over the prologue's tiles and deeper (B12X_ATTN_PREFETCH_TILES: 3,
// and 64, beyond every split's tiles).
TEST(AttentionGpuDecode, PrefetchBeforeWait) {
  B12X_REQUIRE_GPU();
  const char* modes[][2] = {{"1", ""}, {"1", "3"}, {"", "64"}, {"0", ""}};
  for (const auto& m : modes) {
    if (*m[0]) setenv("B12X_ATTN_PREFETCH", m[0], 1);
    if (*m[1]) setenv("B12X_ATTN_PREFETCH_TILES", m[1], 1);
    const std::string what =
        std::string("prefetch=") + m[0] + " tiles=" + m[1] + (*m[1] ? "" : "default");
    for (int i = 0; i < 4; ++i) {
      Spec s;
      s.hq = 32;
      s.hkv = 8;
      s.kv = i % 2 == 1 ? DType::kFP8E4M3 : DType::kBF16;
      s.prefix = {4000, 63, 1, 2500, 700};
      s.qlens.assign(5, 1);
      s.num_splits = i == 2 ? 7 : 0;
      s.max_splits = i == 2 ? 7 : 0;
      s.window = i == 3 ? 300 : -1;
      s.sinks = i >= 2;
      run_case(s, "decode " + what);
    }
    Spec d = gqa_decode_spec({4000, 63, 1, 700}, 0, 0);
    d.dqk = d.dv = 256;
    d.kv = DType::kFP8E4M3;
    run_case(d, "decode d=256 " + what);
    run_case(verify_spec(8, 2), "verify " + what);
    unsetenv("B12X_ATTN_PREFETCH");
    unsetenv("B12X_ATTN_PREFETCH_TILES");
  }
}

// B12X_ATTN_FULL_RING=1: decode tiles fill every ring stage in the prologue (wide3 loads Q's
// fragments from global memory); the default keeps kStages - 1 tiles in flight from the
// prologue (wide3 stages Q in the ring's last stage). Every decode tile family, short (1-3
// tiles) and long splits.
TEST(AttentionGpuDecode, FullRingOn) {
  B12X_REQUIRE_GPU();
  setenv("B12X_ATTN_FULL_RING", "1", 1);
  int i = 0;
  for (const char* tile : {"wide3", "hcvt", "hcvt3", "wide"})
    for (int d : {128, 256}) {
      setenv("B12X_ATTN_DECODE_TILE", tile, 1);
      Spec s;
      const std::string t = tile;
      s.kv = t == "wide3" || t == "wide" ? DType::kBF16 : DType::kFP8E4M3;
      s.dqk = s.dv = d;
      s.hkv = 2;
      s.hq = 2 * (i % 2 ? 8 : 4);
      s.prefix = {4000, 63, 1, 200, 700};
      s.qlens.assign(5, 1);
      s.num_splits = i % 3 == 0 ? 7 : 0;
      s.max_splits = i % 3 == 0 ? 7 : 0;
      s.window = i == 2 ? 300 : -1;
      s.sinks = i % 2 == 1;
      ++i;
      run_case(s, std::string("full ring, tile=") + tile);
    }
  unsetenv("B12X_ATTN_DECODE_TILE");
  Spec deep = gqa_decode_spec({4000, 63, 1, 700}, 7, 7);  // FP8 head dim 192: deep
  deep.kv = DType::kFP8E4M3;
  deep.dqk = deep.dv = 192;
  deep.sinks = true;
  run_case(deep, "full ring, deep");
  unsetenv("B12X_ATTN_FULL_RING");
}

// B12X_ATTN_SHORT_AHEAD (default on): a decode split of n < kStages tiles keeps n - 1 tiles
// ahead; =0 keeps kStages - 1. Both settings, forced split counts that leave 1-3 tiles per
// split, on the BF16 (wide3) and FP8 (hcvt3 / hcvt) default tiles.
TEST(AttentionGpuDecode, ShortAhead) {
  B12X_REQUIRE_GPU();
  for (const char* on : {"1", "0"}) {
    setenv("B12X_ATTN_SHORT_AHEAD", on, 1);
    for (int splits : {0, 7, 64}) {
      Spec s = gqa_decode_spec({4000, 63, 1, 700}, splits, splits);
      s.kv = splits == 7 ? DType::kBF16 : DType::kFP8E4M3;
      s.sinks = splits == 64;
      run_case(s, std::string("short ahead=") + on + ", splits=" + std::to_string(splits));
    }
    unsetenv("B12X_ATTN_SHORT_AHEAD");
  }
}

// B12X_ATTN_PAGE_RUNS (default on): live tiles inside one page, or page-aligned in exactly two,
// advance row addresses by token strides within a page. Both settings on decode (BF16 wide3
// 64-token and FP8 hcvt3 / hcvt 128-token tiles over 16..256-token pages: one page, two pages,
// the per-row path; tiles inside one page at unaligned split starts), interleaved splits,
// verify and extend with prefixes (32-token tiles; with and without a window).
TEST(AttentionGpuDecode, PageRuns) {
  B12X_REQUIRE_GPU();
  for (const char* on : {"1", "0"}) {
    setenv("B12X_ATTN_PAGE_RUNS", on, 1);
    for (int i = 0; i < 8; ++i) {
      const int page = 16 << (i % 5);  // 16 .. 256
      Spec s = gqa_decode_spec({4000, page - 1, 1, 3 * page + 70}, i == 2 ? 7 : 0, i == 2 ? 7 : 0);
      s.page = page;
      s.kv = i % 2 == 1 ? DType::kFP8E4M3 : DType::kBF16;
      s.window = i == 3 ? 300 : -1;
      s.sinks = i >= 4;
      if (i == 5) setenv("B12X_ATTN_SPLIT_INTERLEAVE", "1", 1);
      if (i == 6) setenv("B12X_ATTN_DECODE_TILE", "hcvt", 1);
      run_case(s, std::string("page runs=") + on + " decode " + std::to_string(i));
      unsetenv("B12X_ATTN_SPLIT_INTERLEAVE");
      unsetenv("B12X_ATTN_DECODE_TILE");
    }
    run_case(verify_spec(8, 2), std::string("page runs=") + on + " verify");
    for (const int window : {-1, 90}) {
      Spec e;
      e.mode = att::Mode::kExtend;
      e.page = 64;
      e.hkv = 2;
      e.hq = 8;
      e.qlens = {1, 37, 200, 5};
      e.prefix = {0, 67, 256, 1000};
      e.window = window;
      e.extra_t = 2;
      run_case(e, std::string("page runs=") + on + " extend window " + std::to_string(window));
    }
    unsetenv("B12X_ATTN_PAGE_RUNS");
  }
}

// B12X_ATTN_SPREAD_MERGE (default 2): each decode warp merges and stores its own share of O's
// columns in one code copy shared by the warps (=1: one copy per warp's columns); =0: warp 0
// merges and stores all. Every setting over every decode tile family (4 and 2 warps, plain and
// FP8 direct-V layouts), head dims 64-256, final outputs and partials
// (forced splits), sinks, window, the fused merge and verify.
TEST(AttentionGpuDecode, SpreadMerge) {
  B12X_REQUIRE_GPU();
  for (const char* on : {"1", "2", "0"}) {
    setenv("B12X_ATTN_SPREAD_MERGE", on, 1);
    const std::string what = std::string("spread merge=") + on;
    int i = 0;
    for (const char* tile : {"default", "wide3", "wide", "hcvt3", "hcvt"})
      for (int d : {128, 256}) {
        if (std::string(tile) != "default") setenv("B12X_ATTN_DECODE_TILE", tile, 1);
        Spec s;
        const std::string t = tile;
        s.kv = t == "wide3" || t == "wide" || (t == "default" && d == 256) ? DType::kBF16
                                                                           : DType::kFP8E4M3;
        s.dqk = s.dv = d;
        s.hkv = 2;
        s.hq = 2 * (i % 2 ? 8 : 5);
        s.prefix = {4000, 63, 1, 200, 0};
        s.qlens.assign(5, 1);
        s.num_splits = s.max_splits = i % 3 == 0 ? 7 : (i % 3 == 1 ? 1 : 0);
        s.window = i % 4 == 2 ? 300 : -1;
        s.sinks = i % 2 == 1;
        ++i;
        run_case(s, what + ", tile=" + tile);
        unsetenv("B12X_ATTN_DECODE_TILE");
      }
    for (const int d : {64, 192}) {
      Spec s = gqa_decode_spec({4000, 63, 1, 700}, 0, 0);
      s.dqk = s.dv = d;
      s.kv = d == 192 ? DType::kFP8E4M3 : DType::kBF16;  // FP8 192: deep
      s.sinks = true;
      run_case(s, what + ", d=" + std::to_string(d));
    }
    setenv("B12X_ATTN_FUSED_MERGE", "1", 1);
    run_case(gqa_decode_spec({4000, 63, 1, 2500}, 7, 7), what + ", fused merge");
    unsetenv("B12X_ATTN_FUSED_MERGE");
    run_case(verify_spec(8, 2), what + ", verify");
    unsetenv("B12X_ATTN_SPREAD_MERGE");
  }
}

// PagedPlan::epilogue_half (default: the decode tiles' cross-warp merge moves rows g only when
// rows g + 8 are padding):
// the default tiles of head dims 64-256 with GQA groups of 5 / 8 (half) and 16 (not), forced
// (7, 64) and automatic splits, sinks, a window, verify (q_len 2 x group 8: not half).
TEST(AttentionGpuDecode, EpilogueHalf) {
  B12X_REQUIRE_GPU();
  for (const int d : {128, 256}) {
    Spec s = gqa_decode_spec({4000}, 0, 0);
    s.dqk = s.dv = d;
    const att::PagedPlan plan = att::plan_paged(Problem(s, rng()).caps());
    EXPECT_TRUE(plan.epilogue_half) << d;
  }
  int i = 0;
  for (const int d : {128, 256, 64, 192})
    for (const DType kv : {DType::kBF16, DType::kFP8E4M3}) {
      if ((d == 64 || d == 192) && kv == DType::kFP8E4M3) continue;
      Spec s = gqa_decode_spec({4000, 63, 1, 700, 2100}, i % 3 == 0 ? 7 : (i % 3 == 1 ? 64 : 0),
                               i % 3 == 0 ? 7 : (i % 3 == 1 ? 64 : 0));
      s.dqk = s.dv = d;
      s.kv = kv;
      s.per_head_scale = kv == DType::kFP8E4M3;
      s.hkv = 2;
      s.hq = 2 * (i % 3 == 0 ? 5 : (i % 3 == 1 ? 8 : 16));
      if (d == 256) s.page = 128;
      s.sinks = i % 2 == 1;
      s.window = i == 2 ? 300 : -1;
      ++i;
      const std::string what =
          "epilogue half, d=" + std::to_string(d) + " case " + std::to_string(i);
      Problem p(s, rng());
      PLAN_AND_BIND(p);
      ASSERT_TRUE(p.plan.epilogue_half) << what;
      p.run();
      B12X_TEST_CUDA(cudaDeviceSynchronize());
      p.check(what);
    }
  run_case(verify_spec(8, 2), "epilogue half, verify");
}

// B12X_ATTN_SPLIT_INTERLEAVE=1: split s takes the KV tiles s, s + splits, ...; long ranges
// (every split live, no window) load the prologue's page ids with the metadata. BF16 and FP8
// tiles, automatic and forced splits (64: more splits than tiles), window, sinks, with the L2
// prefetch and the full ring, and verify on the decode tile.
TEST(AttentionGpuDecode, SplitInterleave) {
  B12X_REQUIRE_GPU();
  setenv("B12X_ATTN_SPLIT_INTERLEAVE", "1", 1);
  for (int i = 0; i < 6; ++i) {
    if (i == 4) setenv("B12X_ATTN_PREFETCH", "1", 1);
    if (i == 5) setenv("B12X_ATTN_FULL_RING", "1", 1);
    const int splits = i == 2 ? 7 : (i == 3 ? 64 : 0);
    Spec s = gqa_decode_spec({4000, 63, 1, 700}, splits, splits);
    s.kv = i % 2 == 1 ? DType::kFP8E4M3 : DType::kBF16;
    s.window = i == 3 ? 300 : -1;
    s.sinks = i >= 2;
    s.page = i == 1 ? 16 : 64;
    run_case(s, "decode interleave " + std::to_string(i));
  }
  run_case(verify_spec(8, 2), "verify interleave");
  unsetenv("B12X_ATTN_FULL_RING");
  unsetenv("B12X_ATTN_PREFETCH");
  unsetenv("B12X_ATTN_SPLIT_INTERLEAVE");
}

// The kernels divide by the GQA group, the KV heads, the row tiles per request, the splits and
// the minimum tiles per split with bind-time multiply-and-shift constants (every kernel since
// session 9; the general kernels here, B12X_ATTN_LEAN=0, the lean ones in Lean). Groups 1-16
// (powers of two and 3 / 5 / 6 / 7), both grid orders, every KV dtype and head dim, pages
// 16-256, automatic and forced splits (1 / 2 / 7 / 64: ns == splits and ns < splits), sinks,
// window, the fused merge, verify (q_len 2 / 3: several row tiles per request) and extend
// (tile_start).
// Decode case i of the knob sweeps (FastDiv, Lean, AlignedChunks): KV dtype bf16 / fp8 / fp16 in
// turn (q to match), pages 16..256, ragged lengths, split counts auto / 1 / 2 / 7 / 64, a window
// every fourth case, sinks every second.
Spec sweep_decode_spec(int i, int dqk, int dv, int hkv, int group) {
  const int splits[] = {0, 1, 2, 7, 64, 0};
  Spec s;
  s.kv = i % 3 == 0 ? DType::kBF16 : (i % 3 == 1 ? DType::kFP8E4M3 : DType::kFP16);
  s.q = s.kv == DType::kFP16 ? DType::kFP16 : DType::kBF16;
  s.dqk = dqk;
  s.dv = dv;
  s.hkv = hkv;
  s.hq = hkv * group;
  s.page = 16 << (i % 5);
  s.prefix = {4000, s.page - 1, 1, 3 * s.page + 5, 1700};
  s.qlens.assign(s.prefix.size(), 1);
  s.num_splits = s.max_splits = splits[i % 6];
  s.window = i % 4 == 3 ? 300 : -1;
  s.sinks = i % 2 == 1;
  return s;
}

// B12X_ATTN_DECODE_TILE=wideh (bf16, head dim 256): each token group's output dims split over
// two warps (4 warps). (wide3h, the same for wide3 at head dim 128, was removed.) Pages
// 16-256, groups 1-16 (3 / 5 / 7 too), forced splits 1 / 2 / 7 / 64 and automatic, sinks,
// window, per-head shapes, the general kernel (B12X_ATTN_LEAN=0) and the fused merge, verify on
// the decode tile; the plan names the variant (other dtypes and head dims fall back to wide).
TEST(AttentionGpuDecode, SplitDims) {
  B12X_REQUIRE_GPU();
  const bool sm90 = b12x::device_info(0).family == b12x::ArchFamily::kSm90;
  const int groups[] = {4, 1, 8, 16, 3, 5, 7, 2};
  // wideh3: wideh with 3 stages (104 KB: SM90; wide elsewhere)
  for (const char* tile : {"wideh", "wideh3"}) {
    const std::string name = std::string(tile) == "wideh3" && !sm90 ? "wide" : tile;
    setenv("B12X_ATTN_DECODE_TILE", tile, 1);
    const int d = 256;
    for (int i = 0; i < 10; ++i) {
      Spec s = sweep_decode_spec(i, d, d, 1 + i % 2, groups[i % 8]);
      s.kv = DType::kBF16;
      s.q = DType::kBF16;
      s.per_head_scale = i % 3 != 2;
      if (i == 0) {
        Problem p(s, rng());
        PLAN_AND_BIND(p);
        EXPECT_NE(p.plan.kernel.find("_decode_" + name + "_bf16_lean"), std::string::npos)
            << p.plan.kernel;
      }
      if (i == 6) setenv("B12X_ATTN_LEAN", "0", 1);
      if (i == 9) setenv("B12X_ATTN_FUSED_MERGE", "1", 1);
      run_case(s, std::string("tile=") + tile + " decode " + std::to_string(i));
      unsetenv("B12X_ATTN_LEAN");
      unsetenv("B12X_ATTN_FUSED_MERGE");
    }
    Spec gq = gqa_decode_spec({8192, 4000, 63, 1}, 0, 0);
    gq.dqk = gq.dv = d;
    run_case(gq, std::string("tile=") + tile + " gqa");
    Spec v = verify_spec(8, 2);
    v.dqk = v.dv = d;
    v.sinks = true;
    run_case(v, std::string("tile=") + tile + " verify");
    unsetenv("B12X_ATTN_DECODE_TILE");
  }
}

// The default tile of BF16 head dim 256 decode on SM90: wideh3 for plans of at most 8 requests
// (kWideh3MaxBatch), wideh up to 16 (kWidehMaxBatch), wide for larger plans and on other devices;
// each against the reference.
TEST(AttentionGpuDecode, WidehDefault) {
  B12X_REQUIRE_GPU();
  const bool sm90 = b12x::device_info(0).family == b12x::ArchFamily::kSm90;
  for (int batch : {1, 3, 8, 9, 16, 17}) {
    std::vector<int> lens;
    for (int i = 0; i < batch; ++i) lens.push_back(i % 3 == 0 ? 8000 : i % 3 == 1 ? 700 : 1);
    Spec s = gqa_decode_spec(lens, 0, 0);
    s.dqk = s.dv = 256;
    s.hq = 16;
    s.hkv = 2;
    s.page = 128;
    s.sinks = batch == 3;
    Problem p(s, rng());
    PLAN_AND_BIND(p);
    const char* want = !sm90         ? "_decode_wide_bf16_lean"
                       : batch <= 8  ? "_decode_wideh3_bf16_lean_spec"
                       : batch <= 16 ? "_decode_wideh_bf16_lean_spec"
                                     : "_decode_wide_bf16_lean";
    EXPECT_NE(p.plan.kernel.find(want), std::string::npos) << batch << " " << p.plan.kernel;
    p.run();
    B12X_TEST_CUDA(cudaDeviceSynchronize());
    p.check("default tile d256 batch " + std::to_string(batch));
  }
}

// FP8 head dim 256: hcvt in plans of <= 32 requests (rounds 51 / 52), hcvt3 above on SM90 (hcvt
// where a block cannot hold hcvt3's 105 KB); on SM90 hcvt8 at any batch capacity where q_len x
// group <= 8 (rounds 89 / 90; group 16 keeps hcvt / hcvt3).
TEST(AttentionGpuDecode, Hcvt256Default) {
  B12X_REQUIRE_GPU();
  const bool sm90 = b12x::device_info(0).family == b12x::ArchFamily::kSm90;
  for (int batch : {1, 32, 33, 2, 34}) {
    std::vector<int> lens;
    for (int i = 0; i < batch; ++i) lens.push_back(i % 3 == 0 ? 700 : i % 3 == 1 ? 130 : 1);
    Spec s = gqa_decode_spec(lens, 0, 0);
    s.kv = DType::kFP8E4M3;
    s.dqk = s.dv = 256;
    s.hq = batch == 2 || batch == 34 ? 32 : 16;
    s.hkv = 2;
    s.page = 128;
    s.per_head_scale = true;
    Problem p(s, rng());
    PLAN_AND_BIND(p);
    const char* want = sm90 && s.hq == 16   ? "_decode_hcvt8_kvfp8"
                       : batch > 32 && sm90 ? "_decode_hcvt3_kvfp8"
                                            : "_decode_hcvt_kvfp8";
    EXPECT_NE(p.plan.kernel.find(want), std::string::npos) << batch << " " << p.plan.kernel;
    p.run();
    B12X_TEST_CUDA(cudaDeviceSynchronize());
    p.check("fp8 d256 default batch " + std::to_string(batch));
  }
}

// B12X_ATTN_ALIGN_CHUNKS (default on): contiguous splits take whole KV tiles, so some of the
// forced or automatic splits have nothing to do (8000 tokens / 24 splits: 334 -> 384-token chunks
// of 64-token tiles, 21 live splits) and each live one starts on a tile (and page) boundary.
// On: ragged lengths with forced splits 24 / 7 / 64 over pages 16-128, both KV dtypes, head
// dims 128 / 256, sinks, window, the fused merge, verify; off (=0, the chunks of session 8):
// the decode sweep.
TEST(AttentionGpuDecode, AlignedChunks) {
  B12X_REQUIRE_GPU();
  const int splits[] = {24, 7, 64, 24, 0, 7};
  for (int i = 0; i < 6; ++i) {
    Spec s = gqa_decode_spec({8000, 4000, 2500, 700, 1}, splits[i], splits[i]);
    s.kv = i % 2 == 1 ? DType::kFP8E4M3 : DType::kBF16;
    s.page = 16 << (i % 4);
    if (i >= 3) {
      s.dqk = s.dv = 256;
      s.hq = 16;
      s.hkv = 2;
    }
    s.sinks = i % 3 == 0;
    s.window = i == 4 ? 3000 : -1;
    if (i == 5) setenv("B12X_ATTN_FUSED_MERGE", "1", 1);
    run_case(s, "aligned chunks " + std::to_string(i));
    unsetenv("B12X_ATTN_FUSED_MERGE");
  }
  Spec v = verify_spec(8, 2);
  v.prefix = {5000, 61, 1300};
  v.num_splits = v.max_splits = 24;
  run_case(v, "aligned chunks verify");
  setenv("B12X_ATTN_ALIGN_CHUNKS", "0", 1);
  for (int i = 0; i < 6; ++i)
    run_case(sweep_decode_spec(i, kDims[i % 5].dqk, kDims[i % 5].dv, 2, 4),
             "unaligned chunks " + std::to_string(i));
  unsetenv("B12X_ATTN_ALIGN_CHUNKS");
}

TEST(AttentionGpuDecode, FastDiv) {
  B12X_REQUIRE_GPU();
  setenv("B12X_ATTN_LEAN", "0", 1);
  const int groups[] = {1, 4, 8, 16, 3, 5, 6, 7};
  for (int i = 0; i < 12; ++i) {
    Spec s = sweep_decode_spec(i, kDims[i % 5].dqk, kDims[i % 5].dv, 1 + i % 3, groups[i % 8]);
    if (i == 10) setenv("B12X_ATTN_GRID", "tiles", 1);
    if (i == 11) setenv("B12X_ATTN_FUSED_MERGE", "1", 1);
    run_case(s, "fast div decode " + std::to_string(i));
    unsetenv("B12X_ATTN_GRID");
    unsetenv("B12X_ATTN_FUSED_MERGE");
  }
  for (int hkv : {8, 2}) {
    for (int q_len : {2, 3}) run_case(verify_spec(hkv, q_len), "fast div verify");
  }
  Spec v = verify_spec(2, 3);
  v.hq = 14;  // group 7: 21 rows, two row tiles per request
  v.kv = DType::kFP8E4M3;
  v.sinks = true;
  run_case(v, "fast div verify fp8 group 7");
  Spec e;
  e.mode = att::Mode::kExtend;
  e.hkv = 2;
  e.hq = 10;
  e.qlens = {1, 37, 200, 5};
  e.prefix = {0, 67, 256, 1000};
  e.window = 90;
  e.extra_t = 2;
  run_case(e, "fast div extend");
  unsetenv("B12X_ATTN_LEAN");
}

// B12X_ATTN_LEAN (default on): the decode defaults' tiles (wide3 at head dims 64 / 128, wide at
// 256, hcvt3 for FP8 at 128 / 256) run their lean instances (defaults
// compiled in). Lean without the speculative prologue (B12X_ATTN_SPEC=0; the default lean + spec
// runs in every other test) and the general kernels (B12X_ATTN_LEAN=0) over every KV dtype,
// pages 16-256, groups 1-16 (3 / 5 / 6 / 7 too), automatic and forced splits (1 / 2 / 7 / 64),
// interleaved splits, sinks, window, q rows over 2^-18..2^18 on the fp16-MMA tile, verify; the
// default plan names lean + spec, and a knob off its default (or the fused merge) keeps the
// general kernel.
TEST(AttentionGpuDecode, Lean) {
  B12X_REQUIRE_GPU();
  {
    Spec s = gqa_decode_spec({4000, 63, 1, 2500}, 0, 0);
    Problem p(s, rng());
    PLAN_AND_BIND(p);
    EXPECT_NE(p.plan.kernel.find("_lean_spec"), std::string::npos) << p.plan.kernel;
  }
  const int groups[] = {4, 1, 8, 16, 3, 5, 6, 7};
  const int dims[] = {128, 64, 256};
  for (const char* lean : {"1", "0"}) {
    setenv("B12X_ATTN_LEAN", lean, 1);
    setenv("B12X_ATTN_SPEC", "0", 1);
    const std::string what = std::string("lean=") + lean + " spec=0";
    for (int i = 0; i < 15; ++i) {
      const int d = dims[(i / 3) % 3];
      Spec s = sweep_decode_spec(i, d, d, 1 + i % 2, groups[i % 8]);
      if (s.kv == DType::kFP8E4M3 && s.dqk == 64) s.dqk = s.dv = 128;  // no FP8 lean tile at 64
      s.per_head_scale = i % 3 != 2;
      if (i == 7) {
        s.q_exp_spread = 18;
        s.softmax_scale = 1.f / 16384;
      }
      if (i == 8) setenv("B12X_ATTN_SPLIT_INTERLEAVE", "1", 1);
      if (i == 9) setenv("B12X_ATTN_GRID", "tiles", 1);
      if (i == 0) {
        Problem p(s, rng());
        PLAN_AND_BIND(p);
        const bool lean_kernel = p.plan.kernel.find("_lean") != std::string::npos;
        EXPECT_EQ(lean_kernel, std::string(lean) == "1") << p.plan.kernel;
        EXPECT_EQ(p.plan.kernel.find("_spec"), std::string::npos) << p.plan.kernel;
      }
      run_case(s, what + " decode " + std::to_string(i));
      unsetenv("B12X_ATTN_SPLIT_INTERLEAVE");
      unsetenv("B12X_ATTN_GRID");
    }
    for (int hkv : {8, 2}) run_case(verify_spec(hkv, 2), what + " verify");
    Spec v = verify_spec(2, 2);
    v.hq = 14;  // group 7: 14 rows on the decode tile
    v.kv = DType::kFP8E4M3;
    v.sinks = true;
    run_case(v, what + " verify fp8 group 7");
    unsetenv("B12X_ATTN_SPEC");
    unsetenv("B12X_ATTN_LEAN");
  }
  for (const char* knob : {"B12X_ATTN_SPREAD_MERGE=1", "B12X_ATTN_FUSED_MERGE=1"}) {
    const std::string k = knob;
    const size_t eq = k.find('=');
    setenv(k.substr(0, eq).c_str(), k.substr(eq + 1).c_str(), 1);
    Spec s = gqa_decode_spec({4000, 63, 1, 2500}, 7, 7);
    Problem p(s, rng());
    PLAN_AND_BIND(p);
    EXPECT_EQ(p.plan.kernel.find("_lean"), std::string::npos) << knob << " " << p.plan.kernel;
    run_case(s, std::string("lean default with ") + knob);
    unsetenv(k.substr(0, eq).c_str());
  }
}

// Timeline probe (B12X_ATTN_STAMPS=1): the stamp instances (bf16 q: wide3 d128, hcvt3 d128 /
// d256, wideh3 and hcvt d256) match the reference, and every live CTA's event times are in order
// (globaltimer), with merge stamps where the KV is split.
TEST(AttentionGpuDecode, TimelineStamps) {
  B12X_REQUIRE_GPU();
  setenv("B12X_ATTN_STAMPS", "1", 1);
  struct Case {
    DType kv;
    int d, hq, hkv, page;
    const char* tile;
  };
  const Case cases[] = {{DType::kBF16, 128, 32, 8, 64, nullptr},
                        {DType::kFP8E4M3, 128, 32, 8, 64, nullptr},
                        {DType::kBF16, 256, 16, 2, 128, nullptr},
                        {DType::kFP8E4M3, 256, 16, 2, 128, nullptr},
                        {DType::kFP8E4M3, 256, 16, 2, 128, "hcvt"}};
  for (const Case& c : cases) {
    if (c.tile != nullptr) setenv("B12X_ATTN_DECODE_TILE", c.tile, 1);
    Spec s = gqa_decode_spec({3000, 1, 700}, 0, 0);
    s.kv = c.kv;
    s.dqk = s.dv = c.d;
    s.hq = c.hq;
    s.hkv = c.hkv;
    s.page = c.page;
    s.per_head_scale = c.kv == DType::kFP8E4M3;
    Problem p(s, rng());
    PLAN_AND_BIND(p);
    const std::string what = "stamps " + p.plan.kernel;
    p.dscratch.poison(0);  // no stale stamps (a live CTA's meta has bit 63 set)
    if (c.d == 128 && c.kv == DType::kBF16) EXPECT_TRUE(p.plan.stamps) << what;
    EXPECT_EQ(p.plan.stamps, p.plan.kernel.find("_stamps") != std::string::npos) << what;
    p.run();
    B12X_TEST_CUDA(cudaDeviceSynchronize());
    p.check(what);
    if (c.tile != nullptr) unsetenv("B12X_ATTN_DECODE_TILE");
    if (!p.plan.stamps) continue;
    const int64_t n = (p.plan.scratch_bytes - p.plan.off_stamps) / 8;
    std::vector<unsigned long long> h(n);
    B12X_TEST_CUDA(
        cudaMemcpy(h.data(), p.dscratch.ptr + p.plan.off_stamps, n * 8, cudaMemcpyDeviceToHost));
    int live = 0, merged = 0;
    for (int64_t i = 0; i + 20 <= p.plan.stamp_merge; i += 20) {
      if (!(h[i + 16] >> 63)) continue;
      ++live;
      for (int e = 1; e < 8; ++e) EXPECT_LE(h[i + e - 1], h[i + e]) << what << " event " << e;
    }
    for (int64_t i = p.plan.stamp_merge; i + 4 <= n; i += 4) {
      if (!(h[i + 3] >> 63)) continue;
      ++merged;
      EXPECT_LE(h[i], h[i + 1]) << what;
      EXPECT_LE(h[i + 1], h[i + 2]) << what;
    }
    EXPECT_GT(live, 0) << what;
    EXPECT_EQ(merged > 0, p.binding.num_splits > 1) << what << " splits " << p.binding.num_splits;
  }
  unsetenv("B12X_ATTN_STAMPS");
}

// One device array the late writer restores (n = 0: left alone).
struct LateCopy {
  int32_t* dst = nullptr;
  const int32_t* src = nullptr;
  int n = 0;
};

// Lets the next grid in the stream launch at once (PDL), spins, then writes the true metadata:
// a speculating attention grid (B12X_ATTN_SPEC) reads stale values before its
// griddepcontrol.wait and must redo its prologue.
__global__ void late_metadata_writer(LateCopy lens, LateCopy table, LateCopy cu, long long spin) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::);
#endif
  const long long t0 = clock64();
  while (clock64() - t0 < spin) {
  }
  const LateCopy cs[3] = {lens, table, cu};
  for (int k = 0; k < 3; ++k)
    for (int i = threadIdx.x; i < cs[k].n; i += blockDim.x) cs[k].dst[i] = cs[k].src[i];
}

// Runs p with stale device copies of the metadata that are non-empty among stale_lens /
// stale_table / stale_cu; a preceding kernel writes the true values while the attention grid
// runs its pre-wait part. The result must match the reference of the true metadata.
void run_with_late_metadata(Problem& p, cudaStream_t st, const std::vector<int32_t>& stale_lens,
                            const std::vector<int32_t>& stale_table,
                            const std::vector<int32_t>& stale_cu, const std::string& what) {
  DeviceBuffer<int32_t> good_lens(p.lens.size()), good_table(p.dev_table.size()),
      good_cu(p.cu.size());
  good_lens.upload(p.lens);
  good_table.upload(p.dev_table);
  good_cu.upload(p.cu);
  LateCopy lens, table, cu;
  if (!stale_lens.empty()) {
    p.dlens.upload(stale_lens);
    lens = {p.dlens.ptr, good_lens.ptr, static_cast<int>(p.lens.size())};
  }
  if (!stale_table.empty()) {
    p.dtable.upload(stale_table);
    table = {p.dtable.ptr, good_table.ptr, static_cast<int>(p.dev_table.size())};
  }
  if (!stale_cu.empty()) {
    p.dcu.upload(stale_cu);
    cu = {p.dcu.ptr, good_cu.ptr, static_cast<int>(p.cu.size())};
  }
  p.dout.poison(0xFF);
  p.dlse.poison(0xFF);
  B12X_TEST_CUDA(cudaDeviceSynchronize());
  late_metadata_writer<<<1, 256, 0, st>>>(lens, table, cu, 2000000);
  B12X_TEST_CUDA(cudaGetLastError());
  att::run_paged(p.binding, st);
  B12X_TEST_CUDA(cudaStreamSynchronize(st));
  p.check(what);
}

// Each request's live pages in reverse order (a stale page table for the same lengths).
std::vector<int32_t> reversed_tables(const Problem& p) {
  std::vector<int32_t> t = p.dev_table;
  for (int b = 0; b < p.B; ++b)
    std::reverse(t.begin() + size_t(b) * p.W, t.begin() + size_t(b) * p.W + p.npg[b]);
  return t;
}

// p with fresh metadata, then with stale lengths (37 shorter, or 5 longer) and reversed tables
// that a preceding PDL kernel rewrites during the attention grid's pre-wait part.
void run_fresh_and_stale(Problem& p, cudaStream_t st, const std::string& what) {
  p.run(st);
  B12X_TEST_CUDA(cudaStreamSynchronize(st));
  p.check(what + " fresh");
  std::vector<int32_t> stale_lens = p.lens;
  for (int b = 0; b < p.B; ++b) stale_lens[b] = p.lens[b] > 40 ? p.lens[b] - 37 : p.lens[b] + 5;
  run_with_late_metadata(p, st, stale_lens, reversed_tables(p), {}, what + " stale");
}

// B12X_ATTN_LEAN=1 + B12X_ATTN_SPEC=1: the speculative prologue, with fresh metadata (the
// speculation holds), with stale lengths and page tables, and with a stale page table alone
// (fresh lengths: only the page-id comparison finds the difference), each replaced by a preceding
// kernel while the attention grid already runs its pre-wait part (the CTAs redo their prologue);
// BF16 and FP8 KV, head dims 128 / 256, pages 16-128, automatic and forced splits, interleaved
// splits, sinks, window. Verify (several query tokens per request): stale cu_seqlens_q alone
// (the CTAs' query rows and Q staging move) and a stale page table alone.
TEST(AttentionGpuDecode, SpeculativePrologue) {
  B12X_REQUIRE_GPU();
  setenv("B12X_ATTN_LEAN", "1", 1);
  setenv("B12X_ATTN_SPEC", "1", 1);
  cudaStream_t st;
  B12X_TEST_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const std::vector<int32_t> fresh;
  for (int i = 0; i < 6; ++i) {
    Spec s = gqa_decode_spec({4000, 63, 1, 2500, 700}, i == 2 ? 7 : 0, i == 2 ? 7 : 0);
    s.kv = i % 2 == 1 ? DType::kFP8E4M3 : DType::kBF16;
    s.dqk = s.dv = i >= 4 ? 256 : 128;
    if (i >= 4) {
      s.hq = 16;
      s.hkv = 2;
    }
    s.page = 16 << (i % 4);
    s.window = i == 3 ? 300 : -1;
    s.sinks = i % 3 == 1;
    if (i == 5) setenv("B12X_ATTN_SPLIT_INTERLEAVE", "1", 1);
    const std::string what = "spec case " + std::to_string(i);
    Problem p(s, rng());
    PLAN_AND_BIND(p);
    EXPECT_NE(p.plan.kernel.find("_lean_spec"), std::string::npos) << p.plan.kernel;
    p.run(st);
    B12X_TEST_CUDA(cudaStreamSynchronize(st));
    p.check(what + " fresh");
    std::vector<int32_t> stale_lens = p.lens;
    for (int b = 0; b < p.B; ++b) stale_lens[b] = p.lens[b] > 40 ? p.lens[b] - 37 : p.lens[b] + 5;
    const std::vector<int32_t> stale_table = reversed_tables(p);
    run_with_late_metadata(p, st, stale_lens, stale_table, fresh, what + " stale");
    run_with_late_metadata(p, st, fresh, stale_table, fresh, what + " stale table only");
    unsetenv("B12X_ATTN_SPLIT_INTERLEAVE");
  }
  for (DType kv : {DType::kBF16, DType::kFP8E4M3}) {
    Spec v = verify_spec(8, 2);  // 4 x 2 packed rows: the decode tile, 3 requests
    v.kv = kv;
    v.prefix = {0, 61, 1300};
    const std::string what = std::string("spec verify ") + b12x::dtype_name(kv);
    Problem p(v, rng());
    PLAN_AND_BIND(p);
    EXPECT_NE(p.plan.kernel.find("_lean_spec"), std::string::npos) << p.plan.kernel;
    std::vector<int32_t> stale_cu = p.cu;  // same total, other query rows per request
    for (int b = 1; b < p.B; ++b) stale_cu[b] = p.cu[b] - 1;
    run_with_late_metadata(p, st, fresh, fresh, stale_cu, what + " stale cu_seqlens_q");
    run_with_late_metadata(p, st, fresh, reversed_tables(p), fresh, what + " stale table only");
  }
  B12X_TEST_CUDA(cudaStreamDestroy(st));
  unsetenv("B12X_ATTN_SPEC");
  unsetenv("B12X_ATTN_LEAN");
}

// FP8 head dim 256, hcvt8 (hcvt with O's MMAs on rows 0-7 only and S in 4 MMA chains; the SM90
// default for plans of q_len x group <= 8) through B12X_ATTN_DECODE_TILE (any device): group 8
// and 5, pages 16..256, forced and automatic splits, sinks, window, per-head descales, the Q
// range of the fp16 MMAs, the general kernel (B12X_ATTN_LEAN=0), verify with 8 packed rows (16
// take the default tile) and early K/V with stale metadata.
TEST(AttentionGpuDecode, HalfRowsTile) {
  B12X_REQUIRE_GPU();
  for (const char* tile : {"hcvt8"}) {
    ScopedEnvs knob({{"B12X_ATTN_DECODE_TILE", tile}});
    const std::string name = std::string("_decode_") + tile + "_";
    for (int i = 0; i < 6; ++i) {
      Spec s;
      s.kv = DType::kFP8E4M3;
      s.dqk = s.dv = 256;
      s.hkv = 2;
      s.hq = i == 4 ? 10 : 16;
      s.page = 16 << (i % 5);
      s.prefix = {1700, s.page - 1, 0, 3 * s.page + 5};
      s.qlens.assign(s.prefix.size(), 1);
      s.window = i == 1 ? 300 : -1;
      s.sinks = i % 2 == 0;
      s.per_head_scale = i != 3;
      s.num_splits = s.max_splits = i == 2 ? 7 : 0;
      if (i == 3) {
        s.q_exp_spread = 18;
        s.softmax_scale = 1.f / 16384;
      }
      std::optional<ScopedEnvs> general;
      if (i == 5)
        general.emplace(
            std::initializer_list<std::pair<const char*, const char*>>{{"B12X_ATTN_LEAN", "0"}});
      Problem p(s, rng());
      PLAN_AND_BIND(p);
      EXPECT_NE(p.plan.kernel.find(name), std::string::npos) << p.plan.kernel;
      p.run();
      B12X_TEST_CUDA(cudaDeviceSynchronize());
      p.check(std::string(tile) + " " + std::to_string(i));
    }
    // Verify: hcvt8 only where every bind's q_len x group fits 8 (q_len up to max_total_q):
    // group 4 with T = 2 (a bind of one request may take q_len 2); the session-24 review's case,
    // a plan of max_batch 4 / max_total_q 8 (plan_q_len 2: 8 packed rows) bound with B = 2, T = 8
    // (q_len 4: 16 rows per request), takes the default tile, and so does group 8.
    for (int c = 0; c < 3; ++c) {
      Spec v = verify_spec(2, 1);
      v.kv = DType::kFP8E4M3;
      v.dqk = v.dv = 256;
      v.hq = c == 2 ? 16 : 8;
      v.page = 128;
      v.sinks = c == 0;
      v.qlens.assign(2, c == 0 ? 1 : 4);
      v.prefix = {61, 700};
      v.cap_batch = c == 0 ? 0 : 4;
      Problem p(v, rng());
      PLAN_AND_BIND(p);
      EXPECT_EQ(p.plan.kernel.find(name) != std::string::npos, c == 0) << p.plan.kernel;
      p.run();
      B12X_TEST_CUDA(cudaDeviceSynchronize());
      p.check(std::string(tile) + " verify case " + std::to_string(c));
    }
    cudaStream_t st;
    B12X_TEST_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    Spec e = gqa_decode_spec({2000, 63, 1, 700}, 0, 0);
    e.prefix_stable = true;
    e.kv = DType::kFP8E4M3;
    e.per_head_scale = true;
    e.dqk = e.dv = 256;
    e.hq = 16;
    e.hkv = 2;
    e.page = 128;
    e.sinks = true;
    Problem p(e, rng());
    PLAN_AND_BIND(p);
    EXPECT_NE(p.plan.kernel.find(name), std::string::npos) << p.plan.kernel;
    if (b12x::device_info(0).family == b12x::ArchFamily::kSm90)
      EXPECT_NE(p.plan.kernel.find("_early"), std::string::npos) << p.plan.kernel;
    p.run(st);
    B12X_TEST_CUDA(cudaStreamSynchronize(st));
    p.check(std::string(tile) + " early fresh");
    std::vector<int32_t> stale_lens = p.lens;
    for (int b = 0; b < p.B; ++b) stale_lens[b] = p.lens[b] > 40 ? p.lens[b] - 37 : p.lens[b] + 5;
    run_with_late_metadata(p, st, stale_lens, reversed_tables(p), {},
                           std::string(tile) + " early stale");
    B12X_TEST_CUDA(cudaStreamDestroy(st));
  }
}

// Small cases for compute-sanitizer: the general kernels (B12X_ATTN_LEAN=0), lean without the
// speculative prologue (B12X_ATTN_SPEC=0) and lean + spec (the default); group 6, splits, both
// dtypes.
// PagedCaps::kv_prefix_stable: the lean speculative instances that copy the prologue's tiles
// below cache_seqlens - q_len before the PDL wait (wide3 d128, hcvt3 d128, wideh3 and hcvt d256):
// fresh metadata, stale lengths and tables rewritten by a preceding PDL kernel during the
// pre-wait part (the check redoes the prologue), forced splits, verify; B12X_ATTN_EARLY_KV=0
// turns it off.
TEST(AttentionGpuDecode, EarlyKv) {
  B12X_REQUIRE_GPU();
  const bool sm90 = b12x::device_info(0).family == b12x::ArchFamily::kSm90;
  cudaStream_t st;
  B12X_TEST_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const std::vector<int32_t> fresh;
  for (int j = 0; j < 5; ++j) {
    // case 4: case 3 (FP8 hcvt d256, whose early instance runs at 208 registers by default:
    // PagedPlan::early_cap; group 16: group 8 takes hcvt8 on SM90) without the cap
    const int i = j == 4 ? 3 : j;
    std::optional<ScopedEnvs> no_cap;  // the defaults otherwise (knob unset)
    if (j == 4)
      no_cap.emplace(
          std::initializer_list<std::pair<const char*, const char*>>{{"B12X_ATTN_EARLY_CAP", "0"}});
    Spec s = gqa_decode_spec({2000, 63, 1, 700}, i == 2 ? 7 : 0, i == 2 ? 7 : 0);
    s.prefix_stable = true;
    s.kv = i % 2 == 1 ? DType::kFP8E4M3 : DType::kBF16;
    s.per_head_scale = s.kv == DType::kFP8E4M3;
    s.dqk = s.dv = (i == 2 || i == 3) ? 256 : 128;
    if (s.dqk == 256) {
      s.hq = i == 3 ? 32 : 16;
      s.hkv = 2;
      s.page = 128;
    } else {
      s.page = i == 0 ? 16 : 64;
    }
    s.sinks = i == 1;
    const std::string what = "early case " + std::to_string(j);
    Problem p(s, rng());
    if (j == 0) {
      // the environment override: no early copies despite the capability
      setenv("B12X_ATTN_EARLY_KV", "0", 1);
      EXPECT_FALSE(att::plan_paged(p.caps()).early_kv);
      unsetenv("B12X_ATTN_EARLY_KV");
      Spec plain = s;
      plain.prefix_stable = false;
      EXPECT_FALSE(att::plan_paged(Problem(plain, rng()).caps()).early_kv);
    }
    PLAN_AND_BIND(p);
    if (sm90) EXPECT_TRUE(p.plan.early_kv) << what << " " << p.plan.kernel;
    EXPECT_EQ(p.plan.early_kv, p.plan.kernel.find("_early") != std::string::npos) << p.plan.kernel;
    EXPECT_EQ(p.plan.early_cap, sm90 && j == 3) << what << " " << p.plan.kernel;
    EXPECT_EQ(p.plan.early_cap, p.plan.kernel.find("_r208") != std::string::npos) << p.plan.kernel;
    run_fresh_and_stale(p, st, what);
  }
  {
    Spec v = verify_spec(8, 2);
    v.prefix = {0, 61, 1300};
    v.prefix_stable = true;
    Problem p(v, rng());
    PLAN_AND_BIND(p);
    if (sm90) EXPECT_TRUE(p.plan.early_kv) << p.plan.kernel;
    std::vector<int32_t> stale_cu = p.cu;
    for (int b = 1; b < p.B; ++b) stale_cu[b] = p.cu[b] - 1;
    run_with_late_metadata(p, st, fresh, fresh, stale_cu, "early verify stale cu_seqlens_q");
  }
  B12X_TEST_CUDA(cudaStreamDestroy(st));
}

// The split model's cost of a wave's second CTA per SM (PagedPlan::split_pair, early-K/V wide3 /
// wideh3 plans) moves automatic counts off the powers of two: 32/8/128 page 64 B = 1 x 8k takes
// 26 splits on a 132-SM H200 (33 without the term), B = 2 x 2k 9 (12); BF16 16/2/256 page 128
// B = 8 x 2k (wideh3) 12 (15). Each plan must take the count its model gives, bind it and match
// the reference, with ragged lengths under that count's chunks.
TEST(AttentionGpuDecode, EarlyKvAutoSplitsNonPowerOfTwo) {
  B12X_REQUIRE_GPU();
  const bool h200 = b12x::device_info(0).family == b12x::ArchFamily::kSm90 &&
                    b12x::device_info(0).sm_count == 132;
  struct Case {
    std::vector<int> prefix;
    int d, want;
  };
  const Case cases[] = {{{8191}, 128, 26},
                        {{2047, 1500}, 128, 9},
                        {{2047, 2000, 1, 700, 2047, 129, 1800, 2040}, 256, 12}};
  for (const Case& c : cases) {
    Spec s = gqa_decode_spec(c.prefix, 0, 0);
    s.prefix_stable = true;
    if (c.d == 256) {
      s.dqk = s.dv = 256;
      s.hq = 16;
      s.hkv = 2;
      s.page = 128;
    }
    s.sinks = c.d == 256;
    Problem p(s, rng());
    PLAN_AND_BIND(p);
    const std::string what = "early auto splits " + s.str();
    const int b = static_cast<int>(c.prefix.size());
    EXPECT_EQ(p.binding.num_splits, p.plan.auto_splits(b, 1)) << what;
    if (h200) {
      EXPECT_TRUE(p.plan.early_kv) << what << " " << p.plan.kernel;
      EXPECT_GT(p.plan.split_pair, 0.0) << what << " " << p.plan.kernel;
      EXPECT_EQ(p.binding.num_splits, c.want) << what << " " << p.plan.kernel;
      att::PagedPlan flat = p.plan;
      flat.split_pair = 0;
      EXPECT_NE(flat.auto_splits(b, 1), c.want) << what;
    }
    p.run();
    B12X_TEST_CUDA(cudaDeviceSynchronize());
    p.check(what);
  }
}

// Session 25: hcvt8's early-K/V instance (the FP8 16/2/256 default) loads the V descale before
// the epilogue's barriers and prefetches its Q rows into L2 before the PDL wait. With BF16
// wideh3's early instance beside it: per-request-and-head descales, forced and automatic splits
// (final output and partials), sinks, a window, fresh and stale metadata (a preceding PDL kernel
// rewrites lengths and tables during the pre-wait part), and Q written late by a preceding PDL
// kernel (after the prefetch), against the reference.
TEST(AttentionGpuDecode, EarlyQPrefetch) {
  B12X_REQUIRE_GPU();
  if (b12x::device_info(0).family != b12x::ArchFamily::kSm90)
    GTEST_SKIP() << "early K/V plans (SM90) only";
  cudaStream_t st;
  B12X_TEST_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  struct Case {
    DType kv;
    int splits;
  };
  const Case cases[] = {{DType::kFP8E4M3, 0},
                        {DType::kFP8E4M3, 5},
                        {DType::kFP8E4M3, 1},
                        {DType::kBF16, 0},
                        {DType::kBF16, 7}};
  for (const Case& c : cases) {
    Spec s = gqa_decode_spec({1500, 63, 1, 700}, c.splits, c.splits > 0 ? 64 : 0);
    s.prefix_stable = true;
    s.kv = c.kv;
    s.per_head_scale = c.kv == DType::kFP8E4M3 && c.splits != 1;
    s.dqk = s.dv = 256;
    s.hq = 16;
    s.hkv = 2;
    s.page = c.splits == 7 ? 64 : 128;
    s.sinks = c.splits == 5 || c.splits == 7;
    s.window = c.splits == 7 ? 300 : -1;
    const std::string what = "early q prefetch " + s.str();
    Problem p(s, rng());
    PLAN_AND_BIND(p);
    EXPECT_TRUE(p.plan.early_kv) << what << " " << p.plan.kernel;
    EXPECT_NE(p.plan.kernel.find(c.kv == DType::kBF16 ? "_wideh3_" : "_hcvt8_"), std::string::npos)
        << what << p.plan.kernel;
    run_fresh_and_stale(p, st, what);
    // Q written by the preceding kernel while the attention grid runs its pre-wait part (after
    // the Q prefetch may have brought the stale rows into L2)
    const int qwords = static_cast<int>(p.dq.bytes() / 4);
    DeviceBuffer<int32_t> good_q(qwords);
    B12X_TEST_CUDA(cudaMemcpy(good_q.ptr, p.dq.ptr, p.dq.bytes(), cudaMemcpyDeviceToDevice));
    B12X_TEST_CUDA(cudaMemset(p.dq.ptr, 0x3c, p.dq.bytes()));
    p.dout.poison(0xFF);
    p.dlse.poison(0xFF);
    late_metadata_writer<<<1, 256, 0, st>>>(
        LateCopy{reinterpret_cast<int32_t*>(p.dq.ptr), good_q.ptr, qwords}, LateCopy{}, LateCopy{},
        2000000);
    B12X_TEST_CUDA(cudaGetLastError());
    att::run_paged(p.binding, st);
    B12X_TEST_CUDA(cudaStreamSynchronize(st));
    p.check(what + " late q");
  }
  B12X_TEST_CUDA(cudaStreamDestroy(st));
}

// PagedCaps::kv_prefix_stable under graph replay, the way vLLM runs it: one graph holds a
// preceding kernel that lets the attention launch at once (PDL), spins, then writes the lengths
// and page table and appends each request's new K/V row (at cache_seqlens - 1, which the promise
// leaves to it), followed by the attention call. Every replay has new lengths, reshuffled tables
// and new rows; it starts from fresh metadata (only the rows are late), from stale lengths and
// tables, or from a stale table alone, and must match the reference of the final state (BF16
// wide3 and FP8 hcvt3, 32/8/128 with splits).
struct LateAppend {
  LateCopy lens, table;
  uint8_t* k_base = nullptr;
  uint8_t* v_base = nullptr;
  const int64_t* off = nullptr;  // [n] byte offset of request b's new row in either plane
  const uint8_t* k_src = nullptr;
  const uint8_t* v_src = nullptr;
  int row_bytes = 0, n = 0;
};

__global__ void late_append_writer(LateAppend a, long long spin) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::);
#endif
  const long long t0 = clock64();
  while (clock64() - t0 < spin) {
  }
  const LateCopy cs[2] = {a.lens, a.table};
  for (int k = 0; k < 2; ++k)
    for (int i = threadIdx.x; i < cs[k].n; i += blockDim.x) cs[k].dst[i] = cs[k].src[i];
  for (int r = 0; r < a.n; ++r)
    for (int i = threadIdx.x; i < a.row_bytes; i += blockDim.x) {
      a.k_base[a.off[r] + i] = a.k_src[size_t(r) * a.row_bytes + i];
      a.v_base[a.off[r] + i] = a.v_src[size_t(r) * a.row_bytes + i];
    }
}

TEST(AttentionGpuGraph, EarlyKvReplayWithLateMetadataAndAppend) {
  B12X_REQUIRE_GPU();
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int c = 0; c < 3; ++c) {
    // c = 2: session 24's probe hcvt8 (FP8 16/2/256, page 128)
    const char* probe = "hcvt8";
    const DType kv = c == 0 ? DType::kBF16 : DType::kFP8E4M3;
    Spec s = gqa_decode_spec({1500, 900, 200, 1200}, 0, 0);
    s.prefix_stable = true;
    s.kv = kv;
    s.page = 64;
    std::optional<ScopedEnvs> tile;
    if (c >= 2) {
      tile.emplace(std::initializer_list<std::pair<const char*, const char*>>{
          {"B12X_ATTN_DECODE_TILE", probe}});
      s.dqk = s.dv = 256;
      s.hq = 16;
      s.hkv = 2;
      s.page = 128;
    }
    const std::string what = std::string("early graph ") + b12x::dtype_name(kv) +
                             (c >= 2 ? std::string(" ") + probe : "");
    Problem p(s, rng());
    PLAN_AND_BIND(p);
    if (c >= 2)
      EXPECT_NE(p.plan.kernel.find(std::string("_") + probe + "_"), std::string::npos)
          << p.plan.kernel;
    if (b12x::device_info(0).family == b12x::ArchFamily::kSm90)
      EXPECT_TRUE(p.plan.early_kv) << what << " " << p.plan.kernel;
    cudaStream_t st;
    B12X_TEST_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const int eb = elt_bytes(kv);
    const int row_bytes = s.hkv * s.dqk * eb;  // one token's K (or V) row of all KV heads
    DeviceBuffer<int32_t> good_lens(p.B), good_table(p.dev_table.size());
    DeviceBuffer<int64_t> offs(p.B);
    DeviceBuffer<uint8_t> new_k(size_t(p.B) * row_bytes), new_v(size_t(p.B) * row_bytes);
    LateAppend la;
    la.lens = {p.dlens.ptr, good_lens.ptr, p.B};
    la.table = {p.dtable.ptr, good_table.ptr, static_cast<int>(p.dev_table.size())};
    la.k_base = p.kbase;
    la.v_base = p.vbase;
    la.off = offs.ptr;
    la.k_src = new_k.ptr;
    la.v_src = new_v.ptr;
    la.row_bytes = row_bytes;
    la.n = p.B;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    B12X_TEST_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    late_append_writer<<<1, 256, 0, st>>>(la, 1000000);
    att::run_paged(p.binding, st);
    B12X_TEST_CUDA(cudaStreamEndCapture(st, &graph));
    B12X_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    auto encode = [&](float x, uint8_t* dst) {
      if (kv == DType::kFP8E4M3) {
        *dst = b12x::fmt::float_to_e4m3_satfinite(3.f * x);
      } else {
        const uint16_t bits = to_bits(kv, x);
        std::memcpy(dst, &bits, 2);
      }
    };
    std::uniform_int_distribution<int> len_d(1, 1 << 30);
    for (int rep = 0; rep < 6; ++rep) {
      // New lengths within each request's pages, reshuffled tables, new rows.
      for (int b = 0; b < p.B; ++b) {
        p.lens[b] = 1 + len_d(rng()) % (p.npg[b] * s.page);
        auto row = p.host_table.begin() + size_t(b) * p.W;
        std::shuffle(row, row + p.npg[b], rng());
        for (int i = 0; i < p.npg[b]; ++i)
          p.dev_table[size_t(b) * p.W + i] = static_cast<int32_t>(p.dev_id[row[i]]);
      }
      std::vector<uint8_t> knew(size_t(p.B) * row_bytes), vnew(knew.size());
      for (size_t i = 0; i < knew.size(); i += eb) {
        encode(nd(rng()), &knew[i]);
        encode(nd(rng()), &vnew[i]);
      }
      std::vector<int64_t> off(p.B);
      for (int b = 0; b < p.B; ++b) {
        const int pos = p.lens[b] - 1;
        const int c = p.host_table[size_t(b) * p.W + pos / s.page];
        off[b] = (p.dev_id[c] * p.k_page_stride + int64_t(pos % s.page) * s.hkv * s.dqk) * eb;
        const size_t h = (size_t(c) * s.page + pos % s.page) * s.hkv * s.dqk * eb;
        std::memcpy(p.hk.data() + h, knew.data() + size_t(b) * row_bytes, row_bytes);
        std::memcpy(p.hv.data() + h, vnew.data() + size_t(b) * row_bytes, row_bytes);
        // the device slot holds an old row until the preceding kernel appends
        std::vector<uint8_t> old(row_bytes, eb == 1 ? 0x38 : 0x40);
        B12X_TEST_CUDA(cudaMemcpy(p.kbase + off[b], old.data(), row_bytes, cudaMemcpyHostToDevice));
        B12X_TEST_CUDA(cudaMemcpy(p.vbase + off[b], old.data(), row_bytes, cudaMemcpyHostToDevice));
      }
      ASSERT_EQ(p.k_page_stride, p.v_page_stride);
      offs.upload(off);
      new_k.upload(knew);
      new_v.upload(vnew);
      good_lens.upload(p.lens);
      good_table.upload(p.dev_table);
      const int kind = rep % 3;  // 0: fresh metadata, 1: stale lengths + table, 2: stale table
      std::vector<int32_t> stale_lens = p.lens;
      for (int b = 0; b < p.B; ++b) stale_lens[b] = p.lens[b] > 80 ? p.lens[b] - 70 : p.lens[b] + 3;
      p.dlens.upload(kind == 1 ? stale_lens : p.lens);
      p.dtable.upload(kind == 0 ? p.dev_table : reversed_tables(p));
      p.dout.poison(0xFF);
      p.dlse.poison(0xFF);
      B12X_TEST_CUDA(cudaDeviceSynchronize());
      B12X_TEST_CUDA(cudaGraphLaunch(exec, st));
      B12X_TEST_CUDA(cudaStreamSynchronize(st));
      p.check(what + " replay " + std::to_string(rep) + " kind " + std::to_string(kind));
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(st);
  }
}

TEST(AttentionGpuSanitize, DecodeFastDivLean) {
  B12X_REQUIRE_GPU();
  for (const char* knob : {"B12X_ATTN_LEAN", "B12X_ATTN_SPEC", ""})
    for (DType kv : {DType::kBF16, DType::kFP8E4M3}) {
      const std::string k = knob;
      if (!k.empty()) setenv(knob, "0", 1);
      Spec s;
      s.kv = kv;
      s.hq = 12;
      s.hkv = 2;
      s.page = 16;
      s.prefix = {0, 17, 600, 2000};
      s.qlens.assign(4, 1);
      s.num_splits = s.max_splits = 3;
      s.sinks = true;
      run_case(s, "sanitize decode " + (k.empty() ? std::string("default") : k + "=0"));
      if (!k.empty()) unsetenv(knob);
    }
}

TEST(AttentionGpuBind, RejectsBadInputs) {
  B12X_REQUIRE_GPU();
  Spec s;
  s.qlens = {1, 1};
  s.prefix = {10, 20};
  Problem p(s, rng());
  PLAN_AND_BIND(p);
  // Errors are observed through the C ABI (C++ exceptions do not cross libb12x's boundary).
  const b12x_paged_caps cc = b12x::attention_test::to_c(p.caps());
  b12x_paged_attention_plan plan = nullptr;
  ASSERT_EQ(b12x_attention_paged_plan_create(&cc, nullptr, &plan), B12X_OK) << b12x_last_error();
  auto expect_bad = [&](auto mutate, const char* needle) {
    att::PagedArgs a = p.device_args();
    TensorRef scratch =
        TensorRef::contiguous(p.dscratch.ptr, DType::kUInt8, {p.plan.scratch_bytes}, 0);
    mutate(a, scratch);
    b12x::attention_test::CArgs ca(a);
    const b12x_tensor cs = b12x::attention_test::to_c(scratch);
    b12x_paged_attention_binding bnd = nullptr;
    const std::string msg = b12x::attention_test::c_error_of(
        [&] { return b12x_attention_paged_bind(plan, &cs, &ca.a, &bnd); });
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(bnd, nullptr);
  };
  expect_bad([](att::PagedArgs&, TensorRef& sc) { sc.shape[0] -= 1; }, "scratch has");
  expect_bad([](att::PagedArgs& a, TensorRef&) { a.q.device = -1; }, "q");
  expect_bad([](att::PagedArgs& a, TensorRef&) { a.page_table.dtype = DType::kInt64; },
             "page_table");
  expect_bad([](att::PagedArgs& a, TensorRef&) { a.k_cache.stride[0] += 1; },
             "not a multiple of 16 bytes");
  expect_bad([&](att::PagedArgs& a, TensorRef&) { a.cu_seqlens_q.shape[0] = 2; }, "cu_seqlens_q");
  expect_bad(
      [&](att::PagedArgs& a, TensorRef&) {
        a.page_table.shape[1] = p.W + 5;
        a.page_table.stride[0] = p.W + 5;
      },
      "max_page_table_width");
  // A good bind through the C ABI runs and matches the C++ path.
  {
    b12x::attention_test::CArgs ca(p.device_args());
    const b12x_tensor cs = b12x::attention_test::to_c(
        TensorRef::contiguous(p.dscratch.ptr, DType::kUInt8, {p.plan.scratch_bytes}, 0));
    b12x_paged_attention_binding bnd = nullptr;
    ASSERT_EQ(b12x_attention_paged_bind(plan, &cs, &ca.a, &bnd), B12X_OK) << b12x_last_error();
    p.dout.poison(0xFF);
    ASSERT_EQ(b12x_attention_paged_run(bnd, nullptr), B12X_OK) << b12x_last_error();
    B12X_TEST_CUDA(cudaDeviceSynchronize());
    p.check("C ABI run");
    b12x_attention_paged_binding_destroy(bnd);
  }
  b12x_attention_paged_plan_destroy(plan);
}

TEST(AttentionGpuAppend, MatchesReference) {
  B12X_REQUIRE_GPU();
  for (DType cache : {DType::kBF16, DType::kFP8E4M3}) {
    const int T = 37, H = 4, D = 128, P = 20, S = 16;
    std::vector<uint8_t> hk(T * H * D * 2), hv(T * H * D * 2);
    auto fill = [](std::vector<uint8_t>& v) {
      const auto f = b12x::test::random_normal(v.size() / 2, 2.f);
      for (size_t i = 0; i < f.size(); ++i) {
        const uint16_t b = b12x::fmt::float_to_bf16_bits(f[i]);
        std::memcpy(&v[2 * i], &b, 2);
      }
    };
    fill(hk);
    fill(hv);
    std::vector<int64_t> slots(T);
    std::vector<int64_t> all(P * S);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng());
    for (int t = 0; t < T; ++t) slots[t] = (t % 9 == 4) ? -1 : all[t];
    const int eb = elt_bytes(cache);
    const size_t cache_bytes = size_t(P) * S * H * D * eb;
    std::vector<uint8_t> ref_k(cache_bytes, 0x11), ref_v(cache_bytes, 0x22);
    DeviceBuffer<uint8_t> dk(hk.size()), dv(hv.size()), dkc(cache_bytes), dvc(cache_bytes);
    DeviceBuffer<int64_t> dslots(T);
    DeviceBuffer<float> dks(1), dvs(1);
    std::vector<float> ks = {0.02f}, vs = {0.03f};
    dk.upload(hk);
    dv.upload(hv);
    dkc.upload(ref_k);
    dvc.upload(ref_v);
    dslots.upload(slots);
    dks.upload(ks);
    dvs.upload(vs);
    const bool fp8 = cache == DType::kFP8E4M3;
    att::append_kv(TensorRef::contiguous(dk.ptr, DType::kBF16, {T, H, D}, 0),
                   TensorRef::contiguous(dv.ptr, DType::kBF16, {T, H, D}, 0),
                   TensorRef::contiguous(dkc.ptr, cache, {P, S, H, D}, 0),
                   TensorRef::contiguous(dvc.ptr, cache, {P, S, H, D}, 0),
                   TensorRef::contiguous(dslots.ptr, DType::kInt64, {T}, 0),
                   fp8 ? TensorRef::contiguous(dks.ptr, DType::kFP32, {1}, 0) : TensorRef{},
                   fp8 ? TensorRef::contiguous(dvs.ptr, DType::kFP32, {1}, 0) : TensorRef{},
                   nullptr);
    B12X_TEST_CUDA(cudaDeviceSynchronize());
    b12x::reference::append_kv(
        TensorRef::contiguous(hk.data(), DType::kBF16, {T, H, D}),
        TensorRef::contiguous(hv.data(), DType::kBF16, {T, H, D}),
        TensorRef::contiguous(ref_k.data(), cache, {P, S, H, D}),
        TensorRef::contiguous(ref_v.data(), cache, {P, S, H, D}),
        TensorRef::contiguous(slots.data(), DType::kInt64, {T}),
        fp8 ? TensorRef::contiguous(ks.data(), DType::kFP32, {1}) : TensorRef{},
        fp8 ? TensorRef::contiguous(vs.data(), DType::kFP32, {1}) : TensorRef{});
    EXPECT_EQ(dkc.download(), ref_k) << b12x::dtype_name(cache);
    EXPECT_EQ(dvc.download(), ref_v) << b12x::dtype_name(cache);
  }
}

// Small cases for compute-sanitizer (memcheck + racecheck).
// Three FP8-KV decode requests (empty, short and 600-token prefixes, 16-token pages) in 3 splits.
Spec sanitize_fp8_decode_spec() {
  Spec s;
  s.kv = DType::kFP8E4M3;
  s.hq = 8;
  s.hkv = 2;
  s.page = 16;
  s.qlens = {1, 1, 1};
  s.prefix = {0, 17, 600};
  s.num_splits = 3;
  s.max_splits = 3;
  return s;
}

TEST(AttentionGpuSanitize, DecodeSplitFp8) {
  B12X_REQUIRE_GPU();
  for (const char* fused : {"0", "1"}) {  // merge kernel, fused merge (tickets, atomics)
    setenv("B12X_ATTN_FUSED_MERGE", fused, 1);
    Spec s = sanitize_fp8_decode_spec();
    s.sinks = true;
    run_case(s, std::string("sanitize decode fused=") + fused);
    unsetenv("B12X_ATTN_FUSED_MERGE");
  }
}

TEST(AttentionGpuSanitize, DecodeSplitDims) {
  B12X_REQUIRE_GPU();
  for (const char* tile : {"wideh"}) {
    setenv("B12X_ATTN_DECODE_TILE", tile, 1);
    Spec s = gqa_decode_spec({700, 63, 1}, 3, 3);
    s.hq = 16;
    s.hkv = 2;
    s.dqk = s.dv = 256;
    s.sinks = true;
    run_case(s, std::string("sanitize decode tile=") + tile);
    unsetenv("B12X_ATTN_DECODE_TILE");
  }
}

TEST(AttentionGpuSanitize, DecodeFp16MmaTiles) {
  B12X_REQUIRE_GPU();
  for (const char* tile : {"hcvt", "hcvt3"}) {
    setenv("B12X_ATTN_DECODE_TILE", tile, 1);
    Spec s = sanitize_fp8_decode_spec();
    s.q_exp_spread = 18;
    s.softmax_scale = 1.f / 16384;
    run_case(s, std::string("sanitize decode tile=") + tile);
    unsetenv("B12X_ATTN_DECODE_TILE");
  }
}

// 16-bit decode tiles with the full ring (B12X_ATTN_FULL_RING=1: wide3 loads Q's fragments
// from global memory, every stage takes K/V) and without it; wide3 at head dim 128, the default
// tile at 256.
TEST(AttentionGpuSanitize, DecodeRing16Bit) {
  B12X_REQUIRE_GPU();
  for (const char* ring : {"1", "0"})
    for (int d : {128, 256}) {
      setenv("B12X_ATTN_FULL_RING", ring, 1);
      setenv("B12X_ATTN_DECODE_TILE", "wide3", 1);
      Spec s = sanitize_fp8_decode_spec();
      s.kv = DType::kBF16;
      s.dqk = s.dv = d;
      run_case(s, std::string("sanitize decode wide3 full_ring=") + ring);
      unsetenv("B12X_ATTN_DECODE_TILE");
      unsetenv("B12X_ATTN_FULL_RING");
    }
}

// Page runs (default) over one-page tiles (pages of 64 / 128 tokens) and multi-page tiles.
TEST(AttentionGpuSanitize, DecodePageRuns) {
  B12X_REQUIRE_GPU();
  for (int page : {64, 128})
    for (DType kv : {DType::kBF16, DType::kFP8E4M3}) {
      Spec s = sanitize_fp8_decode_spec();
      s.kv = kv;
      s.page = page;
      s.prefix = {0, 17, 600, 2000};
      s.qlens.assign(4, 1);
      run_case(s, "sanitize decode page runs, page=" + std::to_string(page));
    }
}

TEST(AttentionGpuSanitize, DecodeSpreadMerge) {
  B12X_REQUIRE_GPU();
  for (const char* on : {"1", "2", "0"})
    for (DType kv : {DType::kBF16, DType::kFP8E4M3}) {
      setenv("B12X_ATTN_SPREAD_MERGE", on, 1);
      Spec s = sanitize_fp8_decode_spec();
      s.kv = kv;
      s.prefix = {0, 17, 600, 2000};
      s.qlens.assign(4, 1);
      s.sinks = true;
      run_case(s, std::string("sanitize decode spread merge=") + on);
      unsetenv("B12X_ATTN_SPREAD_MERGE");
    }
}

TEST(AttentionGpuSanitize, DecodeSplitInterleave) {
  B12X_REQUIRE_GPU();
  for (const char* si : {"1", "0"})
    for (DType kv : {DType::kBF16, DType::kFP8E4M3}) {
      setenv("B12X_ATTN_SPLIT_INTERLEAVE", si, 1);
      Spec s = sanitize_fp8_decode_spec();
      s.kv = kv;
      s.prefix = {0, 17, 600, 2000};
      s.qlens.assign(4, 1);
      run_case(s, std::string("sanitize decode interleave=") + si);
      unsetenv("B12X_ATTN_SPLIT_INTERLEAVE");
    }
}

TEST(AttentionGpuSanitize, ExtendWindow) {
  B12X_REQUIRE_GPU();
  Spec s;
  s.mode = att::Mode::kExtend;
  s.hq = 4;
  s.hkv = 1;
  s.dqk = s.dv = 64;
  s.page = 32;
  s.qlens = {3, 40};
  s.prefix = {70, 0};
  s.window = 20;
  s.extra_t = 2;
  run_case(s, "sanitize extend");
}

}  // namespace
