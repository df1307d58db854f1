// CPU tests of the paged-attention reference (hand-computed cases), the argument checks shared
// with bind_paged, the capacity checks of plan_paged and the KV append reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "attention/paged_params.h"
#include "b12x/attention.h"
#include "b12x/reference/attention.h"
#include "b12x/status.h"
#include "formats/scalar.h"
#include "test_attention_capi.h"

namespace {

using b12x::DType;
using b12x::TensorRef;
namespace att = b12x::attention;

uint16_t bf(float x) {
  return b12x::fmt::float_to_bf16_bits(x);
}

// A small paged problem on the host with bf16 q/KV (or fp8 KV), fp64 out and lse.
struct Problem {
  int hq = 1, hkv = 1, d = 64, dv = 64, page = 4, pages = 8, width = 4;
  std::vector<int32_t> lens, cu, table;
  std::vector<uint16_t> q, k, v;  // bf16 bits
  std::vector<uint8_t> k8, v8;    // fp8 cache (when fp8)
  std::vector<double> out, lse;
  std::vector<float> kd, vd, sinks;
  bool fp8 = false;
  int window = -1;
  float scale = 0.f;

  int T() const { return cu.back(); }
  int B() const { return static_cast<int>(lens.size()); }
  void alloc() {
    q.assign(size_t(T()) * hq * d, bf(0.f));
    k.assign(size_t(pages) * page * hkv * d, bf(0.f));
    v.assign(size_t(pages) * page * hkv * dv, bf(0.f));
    k8.assign(k.size(), 0);
    v8.assign(v.size(), 0);
    out.assign(size_t(T()) * hq * dv, -12345.0);
    lse.assign(size_t(T()) * hq, -12345.0);
    if (table.empty()) {
      table.resize(size_t(B()) * width);
      for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i % pages);
    }
  }
  // Row of token `pos` of request b, kv head h, in the K or V cache.
  size_t kv_index(int b, int pos, int h, int dim) const {
    const int pid = table[size_t(b) * width + pos / page];
    return ((size_t(pid) * page + pos % page) * hkv + h) * dim;
  }
  att::PagedArgs args() {
    att::PagedArgs a;
    a.q = TensorRef::contiguous(q.data(), DType::kBF16, {T(), hq, d});
    if (fp8) {
      a.k_cache = TensorRef::contiguous(k8.data(), DType::kFP8E4M3, {pages, page, hkv, d});
      a.v_cache = TensorRef::contiguous(v8.data(), DType::kFP8E4M3, {pages, page, hkv, dv});
    } else {
      a.k_cache = TensorRef::contiguous(k.data(), DType::kBF16, {pages, page, hkv, d});
      a.v_cache = TensorRef::contiguous(v.data(), DType::kBF16, {pages, page, hkv, dv});
    }
    a.out = TensorRef::contiguous(out.data(), DType::kFP64, {T(), hq, dv});
    a.lse = TensorRef::contiguous(lse.data(), DType::kFP64, {T(), hq});
    a.page_table = TensorRef::contiguous(table.data(), DType::kInt32, {B(), width});
    a.cache_seqlens = TensorRef::contiguous(lens.data(), DType::kInt32, {B()});
    a.cu_seqlens_q = TensorRef::contiguous(cu.data(), DType::kInt32, {B() + 1});
    if (!kd.empty())
      a.k_descale = TensorRef::contiguous(kd.data(), DType::kFP32, {int64_t(kd.size())});
    if (!vd.empty())
      a.v_descale = TensorRef::contiguous(vd.data(), DType::kFP32, {int64_t(vd.size())});
    if (!sinks.empty()) a.sinks = TensorRef::contiguous(sinks.data(), DType::kFP32, {hq});
    a.window_left = window;
    a.softmax_scale = scale;
    return a;
  }
  double o(int t, int h, int dd) const { return out[(size_t(t) * hq + h) * dv + dd]; }
  double l(int t, int h) const { return lse[size_t(t) * hq + h]; }
};

// Decode with two keys: closed form softmax of (s0, 0).
TEST(AttentionRef, DecodeTwoKeysClosedForm) {
  Problem p;
  p.lens = {2};
  p.cu = {0, 1};
  p.table = {5, 1, 2, 3};
  p.alloc();
  p.q[0] = bf(2.f);                         // q = 2 e0
  p.k[p.kv_index(0, 0, 0, p.d)] = bf(3.f);  // k0 = 3 e0, k1 = 0
  for (int dd = 0; dd < p.dv; ++dd) {
    p.v[p.kv_index(0, 0, 0, p.dv) + dd] = bf(float(dd));
    p.v[p.kv_index(0, 1, 0, p.dv) + dd] = bf(-1.f);
  }
  b12x::reference::paged_attention(p.args());
  const double s0 = 6.0 / 8.0;  // q.k0 * 64^-0.5
  const double w0 = std::exp(s0) / (std::exp(s0) + 1.0);
  for (int dd = 0; dd < p.dv; ++dd) EXPECT_NEAR(p.o(0, 0, dd), w0 * dd + (1 - w0) * -1.0, 1e-12);
  EXPECT_NEAR(p.l(0, 0), std::log2(std::exp(s0) + 1.0), 1e-12);
}

// Extend: right-aligned causal mask with q = 0 (uniform weights over visible keys).
TEST(AttentionRef, ExtendCausalRightAligned) {
  Problem p;
  p.lens = {5};
  p.cu = {0, 2};  // q rows are the last two tokens: row 0 sees keys 0..3, row 1 sees 0..4
  p.alloc();
  for (int j = 0; j < 5; ++j)
    for (int dd = 0; dd < p.dv; ++dd) p.v[p.kv_index(0, j, 0, p.dv) + dd] = bf(float(j + 1));
  b12x::reference::paged_attention(p.args());
  EXPECT_NEAR(p.o(0, 0, 3), (1 + 2 + 3 + 4) / 4.0, 1e-12);
  EXPECT_NEAR(p.o(1, 0, 7), (1 + 2 + 3 + 4 + 5) / 5.0, 1e-12);
  EXPECT_NEAR(p.l(0, 0), std::log2(4.0), 1e-12);
  EXPECT_NEAR(p.l(1, 0), std::log2(5.0), 1e-12);
}

// window_left = 1: the current position plus one earlier key.
TEST(AttentionRef, SlidingWindowInclusive) {
  Problem p;
  p.lens = {5};
  p.cu = {0, 2};
  p.window = 1;
  p.alloc();
  for (int j = 0; j < 5; ++j)
    for (int dd = 0; dd < p.dv; ++dd) p.v[p.kv_index(0, j, 0, p.dv) + dd] = bf(float(j + 1));
  b12x::reference::paged_attention(p.args());
  EXPECT_NEAR(p.o(0, 0, 0), (3 + 4) / 2.0, 1e-12);  // keys 2, 3
  EXPECT_NEAR(p.o(1, 0, 0), (4 + 5) / 2.0, 1e-12);  // keys 3, 4
  p.window = 0;
  b12x::reference::paged_attention(p.args());
  EXPECT_NEAR(p.o(1, 0, 5), 5.0, 1e-12);
  EXPECT_NEAR(p.l(1, 0), 0.0, 1e-12);
}

// Sink ln(2) with two zero logits: denominator 2 + 2 = 4, no value row; lse = log2(4).
TEST(AttentionRef, SinkDenominatorOnly) {
  Problem p;
  p.hq = 2;
  p.hkv = 1;
  p.lens = {2};
  p.cu = {0, 1};
  p.sinks = {static_cast<float>(std::log(2.0)), -INFINITY};
  p.alloc();
  for (int j = 0; j < 2; ++j)
    for (int dd = 0; dd < p.dv; ++dd) p.v[p.kv_index(0, j, 0, p.dv) + dd] = bf(float(4 * j + 4));
  b12x::reference::paged_attention(p.args());
  EXPECT_NEAR(p.o(0, 0, 1), (4 + 8) / 4.0, 1e-6);
  EXPECT_NEAR(p.l(0, 0), 2.0, 1e-6);
  EXPECT_NEAR(p.o(0, 1, 1), (4 + 8) / 2.0, 1e-12);  // -inf sink = no sink
  EXPECT_NEAR(p.l(0, 1), 1.0, 1e-12);
}

// GQA 4:2 with paged, permuted pages; each q head must read its own KV head.
TEST(AttentionRef, GqaHeadMappingAndPaging) {
  Problem p;
  p.hq = 4;
  p.hkv = 2;
  p.page = 2;
  p.pages = 6;
  p.width = 3;
  p.lens = {3, 1};
  p.cu = {0, 1, 2};
  p.table = {4, 0, 2, 5, 3, 3};
  p.alloc();
  for (int b = 0; b < 2; ++b)
    for (int j = 0; j < p.lens[b]; ++j)
      for (int h = 0; h < 2; ++h)
        for (int dd = 0; dd < p.dv; ++dd)
          p.v[p.kv_index(b, j, h, p.dv) + dd] = bf(float(100 * b + 10 * h + j));
  b12x::reference::paged_attention(p.args());
  for (int h = 0; h < 4; ++h) {
    EXPECT_NEAR(p.o(0, h, 0), 10 * (h / 2) + 1.0, 1e-12) << h;  // mean of j = 0, 1, 2
    EXPECT_NEAR(p.o(1, h, 0), 100 + 10 * (h / 2), 1e-12) << h;
  }
}

// FP8 KV: values decode exactly, k_descale scales logits, v_descale scales the output; per
// request and KV head scales [B, Hkv].
TEST(AttentionRef, Fp8DescalePerRequestAndHead) {
  Problem p;
  p.hq = 2;
  p.hkv = 2;
  p.fp8 = true;
  p.lens = {2};
  p.cu = {0, 1};
  p.kd = {0.5f, 2.f};
  p.vd = {3.f, 0.25f};
  p.alloc();
  for (int h = 0; h < 2; ++h) {
    p.q[size_t(h) * p.d] = bf(8.f);
    p.k8[p.kv_index(0, 0, h, p.d)] = b12x::fmt::float_to_e4m3_satfinite(1.f);
    for (int dd = 0; dd < p.dv; ++dd) {
      p.v8[p.kv_index(0, 0, h, p.dv) + dd] = b12x::fmt::float_to_e4m3_satfinite(2.f);
      p.v8[p.kv_index(0, 1, h, p.dv) + dd] = b12x::fmt::float_to_e4m3_satfinite(-1.f);
    }
  }
  att::PagedArgs a = p.args();
  a.k_descale = TensorRef::contiguous(p.kd.data(), DType::kFP32, {1, 2});
  a.v_descale = TensorRef::contiguous(p.vd.data(), DType::kFP32, {1, 2});
  b12x::reference::paged_attention(a);
  for (int h = 0; h < 2; ++h) {
    const double s0 = 8.0 * p.kd[h] / 8.0;
    const double w0 = std::exp(s0) / (std::exp(s0) + 1);
    EXPECT_NEAR(p.o(0, h, 2), p.vd[h] * (2 * w0 - (1 - w0)), 1e-12) << h;
  }
}

// An explicit softmax scale replaces Dqk^-0.5.
TEST(AttentionRef, ExplicitSoftmaxScale) {
  Problem p;
  p.lens = {2};
  p.cu = {0, 1};
  p.scale = 0.5f;
  p.alloc();
  p.q[0] = bf(1.f);
  p.k[p.kv_index(0, 1, 0, p.d)] = bf(2.f);
  for (int dd = 0; dd < p.dv; ++dd) p.v[p.kv_index(0, 1, 0, p.dv) + dd] = bf(1.f);
  b12x::reference::paged_attention(p.args());
  const double w1 = std::exp(1.0) / (1.0 + std::exp(1.0));
  EXPECT_NEAR(p.o(0, 0, 0), w1, 1e-12);
}

using b12x::attention_test::c_error_of;
using b12x::attention_test::CArgs;

// Reference errors through the C ABI (status + message).
std::string ref_error(const att::PagedArgs& a) {
  CArgs c(a);
  return c_error_of([&] { return b12x_ref_paged_attention(&c.a); });
}

TEST(AttentionRef, RejectsBadArguments) {
  auto fresh = [] {
    Problem p;
    p.lens = {3};
    p.cu = {0, 1};
    p.alloc();
    return p;
  };
  {
    Problem p = fresh();
    p.table[0] = 99;  // a page id beyond the cache
    EXPECT_NE(ref_error(p.args()).find("page_table[0, 0]=99"), std::string::npos);
  }
  {
    Problem p = fresh();
    p.lens = {0};  // below q_len
    EXPECT_NE(ref_error(p.args()).find("cache_seqlens[0]=0"), std::string::npos);
  }
  {
    Problem p = fresh();
    p.lens = {17};  // beyond W * page_size = 16
    EXPECT_NE(ref_error(p.args()).find("cache_seqlens[0]=17"), std::string::npos);
  }
  {
    Problem p = fresh();
    p.fp8 = true;  // fp8 without descales
    EXPECT_NE(ref_error(p.args()).find("k_descale"), std::string::npos);
  }
  {
    Problem p = fresh();
    p.hq = 3;
    p.hkv = 2;
    p.alloc();
    EXPECT_NE(ref_error(p.args()).find("num_q_heads=3"), std::string::npos);
  }
  {
    Problem p = fresh();
    att::PagedArgs a = p.args();
    a.q.shape[2] = 96;
    a.k_cache.shape[3] = 96;
    a.v_cache.shape[3] = 96;
    a.out.shape[2] = 96;
    EXPECT_NE(ref_error(a).find("head dims (qk=96"), std::string::npos);
  }
  {
    Problem p = fresh();
    att::PagedArgs a = p.args();
    a.window_left = -2;
    EXPECT_NE(ref_error(a).find("window_left=-2"), std::string::npos);
  }
  {
    Problem p = fresh();
    att::PagedArgs a = p.args();
    a.cu_seqlens_q.shape[0] = 3;
    EXPECT_NE(ref_error(a).find("cu_seqlens_q"), std::string::npos);
  }
  {
    Problem p = fresh();
    att::PagedArgs a = p.args();
    std::vector<float> s(3, 0.f);
    a.sinks = TensorRef::contiguous(s.data(), DType::kFP32, {3});
    EXPECT_NE(ref_error(a).find("sinks"), std::string::npos);
  }
}

TEST(AttentionPlan, RejectsBadCaps) {
  att::PagedCaps c;
  c.num_q_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim_qk = c.head_dim_vo = 128;
  c.page_size = 64;
  c.max_batch = 4;
  c.max_page_table_width = 16;
  c.max_total_q = 4;
  auto bad = [&](auto mutate, const char* needle) {
    att::PagedCaps x = c;
    mutate(x);
    const b12x_paged_caps cc = b12x::attention_test::to_c(x);
    b12x_paged_attention_plan h = nullptr;
    EXPECT_NE(
        c_error_of([&] { return b12x_attention_paged_plan_create(&cc, nullptr, &h); }).find(needle),
        std::string::npos)
        << needle;
    EXPECT_EQ(h, nullptr);
  };
  bad([](att::PagedCaps& x) { x.head_dim_qk = x.head_dim_vo = 80; }, "head dims (qk=80");
  bad([](att::PagedCaps& x) { x.page_size = 48; }, "page_size=48");
  bad([](att::PagedCaps& x) { x.num_kv_heads = 5; }, "num_kv_heads=5");
  bad(
      [](att::PagedCaps& x) {
        x.kv_dtype = DType::kFP8E4M3;
        x.q_dtype = DType::kFP16;
      },
      "kv_dtype=fp8_e4m3");
  bad([](att::PagedCaps& x) { x.max_batch = 0; }, "max_batch=0");
  bad([](att::PagedCaps& x) { x.max_total_q = 2; }, "max_total_q (2)");
  bad([](att::PagedCaps& x) { x.max_splits = 65; }, "max_splits=65");
  // Capability flags (b12x_attention_paged_plan_create_ex): unknown bits are rejected.
  const b12x_paged_caps cc = b12x::attention_test::to_c(c);
  b12x_paged_attention_plan h = nullptr;
  EXPECT_NE(c_error_of([&] {
              return b12x_attention_paged_plan_create_ex(&cc, 6u, nullptr, &h);
            }).find("flags=6"),
            std::string::npos);
  EXPECT_EQ(h, nullptr);
}

// A decode plan for the split model's host arithmetic: 16-row tiles of tile_kv tokens, H200-like
// 132 SMs, `target` resident CTA slots, at most 64 splits.
att::PagedPlan split_model_plan(int hq, int hkv, int page, int width, int tile_kv, int target) {
  att::PagedPlan plan;
  plan.caps.mode = att::Mode::kDecode;
  plan.caps.num_q_heads = hq;
  plan.caps.num_kv_heads = hkv;
  plan.caps.page_size = page;
  plan.caps.max_page_table_width = width;
  plan.tile_rows = 16;
  plan.tile_kv = tile_kv;
  plan.sm_count = 132;
  plan.target_ctas = target;
  plan.split_limit = 64;
  return plan;
}

// The automatic split count (PagedPlan::auto_splits, host arithmetic only): H200-like numbers,
// 396 resident CTA slots, 16-row decode tiles of 32 KV tokens, 8 KV heads of 4 q heads, 8k
// context capacity. A batch whose CTAs fill a wave stays unsplit only when that wave is nearly
// full; a batch of 32 (256 CTAs, 0.65 of a wave) splits in 3 (1.94 waves).
TEST(AttentionPlan, AutoSplitsFillWaves) {
  att::PagedPlan plan = split_model_plan(32, 8, 64, 128, 32, 396);
  EXPECT_EQ(plan.auto_splits(32, 1), 3);
  EXPECT_EQ(plan.auto_splits(8, 1), 6);
  EXPECT_GE(plan.auto_splits(1, 1), 32);  // one request: enough CTAs for every SM
  EXPECT_LE(plan.auto_splits(1, 1), 49);  // never a second wave
  for (int b = 1; b <= 512; ++b) {
    const int s = plan.auto_splits(b, 1);
    EXPECT_GE(s, 1);
    EXPECT_LE(s, plan.split_limit);
  }
  plan.split_limit = 1;
  EXPECT_EQ(plan.auto_splits(1, 1), 1);
}

// split_occ (B12X_ATTN_SPLIT_OCC; 2 by default for wideh): the split model's waves count that
// many CTAs per SM instead of the kernel's occupancy. 16/2/256-like plan (2 KV heads of 8 q
// heads, 32-token tiles, 8k), 132 SMs with 3 CTAs each: the full wave takes B=8 to 24 splits
// (384 CTAs), B=16 to 12; counted at 2 per SM, 16 and 8 (256 CTAs). B=1 (128 CTAs) keeps 64;
// a cap at or above the occupancy changes nothing.
TEST(AttentionPlan, AutoSplitsOccupancyCap) {
  att::PagedPlan plan = split_model_plan(16, 2, 128, 64, 32, 396);
  EXPECT_EQ(plan.auto_splits(8, 1), 24);
  EXPECT_EQ(plan.auto_splits(16, 1), 12);
  EXPECT_EQ(plan.auto_splits(4, 1), 43);
  plan.split_occ = 2;
  EXPECT_EQ(plan.auto_splits(8, 1), 16);
  EXPECT_EQ(plan.auto_splits(16, 1), 8);
  EXPECT_EQ(plan.auto_splits(4, 1), 32);
  EXPECT_EQ(plan.auto_splits(1, 1), 64);
  plan.split_occ = 3;
  EXPECT_EQ(plan.auto_splits(8, 1), 24);
  plan.split_occ = 4;
  EXPECT_EQ(plan.auto_splits(16, 1), 12);
}

// split_pair (early-K/V wide3 / wideh3 plans, B12X_ATTN_SPLIT_PAIR): each wave slot beyond one
// CTA per SM costs split_pair / SMs tile steps times the early tiles' share of a split
// (split_pair_free / tiles), except in one wave of splits of at most split_pair_free tiles.
// 64/8/128-like plan (8 KV heads, 64-token tiles), 132 SMs x 2 CTAs: B=1 x 8k takes 26 splits
// of 5 tiles (208 CTAs) instead of 32 of 4, B=2 x 4k 13 instead of 16; x 32k keeps 32, B=2 /
// 4 / 8 x 8k keep 16 / 8 / 4, B=6 x 2k keeps 5 (7 tiles), and x 4k keeps 32 splits of 2 tiles.
TEST(AttentionPlan, AutoSplitsSecondCtaPerSm) {
  att::PagedPlan plan = split_model_plan(64, 8, 128, 64, 64, 264);
  plan.split_pair_free = 2;
  EXPECT_EQ(plan.auto_splits(1, 1), 32);
  plan.split_pair = 6;
  EXPECT_EQ(plan.auto_splits(1, 1), 26);
  EXPECT_EQ(plan.auto_splits(2, 1), 16);
  EXPECT_EQ(plan.auto_splits(4, 1), 8);
  EXPECT_EQ(plan.auto_splits(8, 1), 4);
  plan.caps.max_page_table_width = 256;
  EXPECT_EQ(plan.auto_splits(1, 1), 32);
  plan.caps.max_page_table_width = 32;
  plan.split_limit = 32;
  EXPECT_EQ(plan.auto_splits(1, 1), 32);
  EXPECT_EQ(plan.auto_splits(2, 1), 13);
  plan.caps.max_page_table_width = 16;
  plan.split_limit = 16;
  EXPECT_EQ(plan.auto_splits(6, 1), 5);
  EXPECT_EQ(plan.auto_splits(3, 1), 8);
}

TEST(AttentionRef, AppendKvBf16AndFp8) {
  const int T = 3, H = 2, D = 64, P = 4, S = 2;
  std::vector<uint16_t> k(T * H * D), v(T * H * D), kc(P * S * H * D, 0), vc(P * S * H * D, 0);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = bf(0.25f * float(i % 37) - 3.f);
    v[i] = bf(0.5f * float(i % 11) + 1.f);
  }
  std::vector<int64_t> slots = {7, -1, 2};  // page 3 off 1, skipped, page 1 off 0
  auto kt = TensorRef::contiguous(k.data(), DType::kBF16, {T, H, D});
  auto vt = TensorRef::contiguous(v.data(), DType::kBF16, {T, H, D});
  auto st = TensorRef::contiguous(slots.data(), DType::kInt64, {T});
  b12x::reference::append_kv(kt, vt, TensorRef::contiguous(kc.data(), DType::kBF16, {P, S, H, D}),
                             TensorRef::contiguous(vc.data(), DType::kBF16, {P, S, H, D}), st, {},
                             {});
  for (int h = 0; h < H; ++h)
    for (int d = 0; d < D; ++d) {
      EXPECT_EQ(kc[((3 * S + 1) * H + h) * D + d], k[(0 * H + h) * D + d]);
      EXPECT_EQ(vc[((1 * S + 0) * H + h) * D + d], v[(2 * H + h) * D + d]);
    }
  std::vector<uint8_t> kc8(P * S * H * D, 0), vc8(P * S * H * D, 0);
  float ks = 0.5f, vs = 4.f;
  b12x::reference::append_kv(
      kt, vt, TensorRef::contiguous(kc8.data(), DType::kFP8E4M3, {P, S, H, D}),
      TensorRef::contiguous(vc8.data(), DType::kFP8E4M3, {P, S, H, D}), st,
      TensorRef::contiguous(&ks, DType::kFP32, {1}), TensorRef::contiguous(&vs, DType::kFP32, {1}));
  const float x = b12x::fmt::bf16_bits_to_float(k[5]);
  EXPECT_EQ(kc8[((3 * S + 1) * H + 0) * D + 5], b12x::fmt::float_to_e4m3_satfinite(x / ks));
  const int untouched = ((0 * S + 0) * H + 0) * D;
  EXPECT_EQ(kc8[untouched], 0);
  slots[0] = P * S;  // beyond the cache
  const b12x_tensor ck = b12x::attention_test::to_c(kt), cv = b12x::attention_test::to_c(vt),
                    cs = b12x::attention_test::to_c(st),
                    ckc = b12x::attention_test::to_c(
                        TensorRef::contiguous(kc.data(), DType::kBF16, {P, S, H, D})),
                    cvc = b12x::attention_test::to_c(
                        TensorRef::contiguous(vc.data(), DType::kBF16, {P, S, H, D}));
  EXPECT_NE(c_error_of([&] {
              return b12x_ref_append_kv(&ck, &cv, &ckc, &cvc, &cs, nullptr, nullptr);
            }).find("slot_mapping[0]=8"),
            std::string::npos);
}

// The kernels' multiply-and-shift division (FastDiv, every kernel) against n / d for every divisor
// a bind can pass (groups, heads, tiles per request, splits) and numerators over [0, 2^31).
TEST(AttentionFastDiv, MatchesDivision) {
  namespace det = b12x::attention::detail;
  std::vector<uint32_t> divisors;
  for (uint32_t d = 0; d <= 1100; ++d) divisors.push_back(d);
  for (uint32_t d : {4095u, 4096u, 4097u, 65535u, 65537u, 1000003u, (1u << 30) + 1, 2147483647u})
    divisors.push_back(d);
  uint64_t x = 88172645463325252ull;  // xorshift
  for (uint32_t d : divisors) {
    const det::FastDiv f = det::make_fast_div(d);
    const int64_t dd = d == 0 ? 1 : d;  // 0: unused divisor, divides by 1
    auto check = [&](int n) {
      ASSERT_EQ(det::fast_div_apply(n, f), n / dd) << "n=" << n << " d=" << d;
    };
    for (int n = 0; n < 3000; ++n) check(n);
    for (int k = 1; k <= 3; ++k) {
      check(INT32_MAX - k + 1);
      check(static_cast<int>(INT32_MAX / dd * dd) - k + 1 > 0
                ? static_cast<int>(INT32_MAX / dd * dd) - k + 1
                : 0);
    }
    for (int i = 0; i < 2000; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const int n = static_cast<int>(x & 0x7fffffffu);
      check(n);
      check(static_cast<int>(n / dd * dd));  // exact multiples
      if (n / dd * dd > 0) check(static_cast<int>(n / dd * dd - 1));
    }
  }
}

}  // namespace
