// Warm-up, kernel-resolution freeze and the capture guard of every plan, on the GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "b12x/attention.h"
#include "b12x/embedding.h"
#include "b12x/gemm.h"
#include "b12x/moe.h"
#include "b12x/runtime.h"
#include "b12x/status.h"
#include "b12x/warmup.h"
#include "gpu_test_util.h"

using namespace b12x;

namespace {

WarmupLinear linear_layer(const char* name, gemm::LinearFormat f, int64_t n, int64_t k,
                          DType out = DType::kBF16) {
  WarmupLinear l;
  l.name = name;
  l.caps.format = f;
  l.caps.in_features = k;
  l.caps.out_features = n;
  l.caps.act_dtype = DType::kBF16;
  l.caps.out_dtype = out;
  return l;
}

WarmupMoe moe_layer(const char* name, moe::QuantMode q, moe::SourceFormat s) {
  WarmupMoe m;
  m.name = name;
  m.weights.quant_mode = q;
  m.weights.source_format = s;
  m.weights.activation = moe::Activation::kSilu;
  m.weights.num_experts = 8;
  m.weights.hidden_size = 256;
  m.weights.intermediate_size = 128;
  m.weights.w13_layout = moe::W13Layout::kW31;
  m.caps.num_topk = 2;
  return m;
}

WarmupAttention attention_layer(const char* name, int head_dim, attention::Mode mode) {
  WarmupAttention a;
  a.name = name;
  a.caps.mode = mode;
  a.caps.num_q_heads = 8;
  a.caps.num_kv_heads = 2;
  a.caps.head_dim_qk = a.caps.head_dim_vo = head_dim;
  a.caps.page_size = 16;
  a.caps.max_page_table_width = 256;  // 4096 tokens of context
  a.caps.max_batch = 4;
  a.caps.max_total_q = mode == attention::Mode::kVerify ? 16 : 4;  // verify: q_len 4
  return a;
}

struct IntegrationGpuWarmup : ::testing::Test {
  void SetUp() override { unfreeze_kernel_resolution(); }
  void TearDown() override { unfreeze_kernel_resolution(); }
};

TEST_F(IntegrationGpuWarmup, DedupsBySignatureAndLaunchesEachOnce) {
  B12X_REQUIRE_GPU();
  WarmupLayers L;
  // Two layers of one format and in_features: same kernels at every token count.
  L.linear.push_back(linear_layer("qkv", gemm::LinearFormat::kNvfp4W4A16, 384, 512));
  L.linear.push_back(linear_layer("o", gemm::LinearFormat::kNvfp4W4A16, 256, 512));
  L.linear.push_back(linear_layer("down", gemm::LinearFormat::kQ8_0, 256, 256));
  L.linear.push_back(linear_layer("w4a4", gemm::LinearFormat::kNvfp4, 256, 256));
  L.linear.back().caps.act_dtype = DType::kFP4E2M1;
  L.moe.push_back(moe_layer("experts", moe::QuantMode::kW4A16, moe::SourceFormat::kModeloptNvfp4));
  L.moe.push_back(moe_layer("experts_q8", moe::QuantMode::kGgmlA16, moe::SourceFormat::kGgml));
  L.attention.push_back(attention_layer("attn", 128, attention::Mode::kDecode));
  L.attention.push_back(attention_layer("attn_verify", 128, attention::Mode::kVerify));
  WarmupEmbedding e;
  e.name = "embed";
  e.caps.vocab = 151936;  // the real vocabulary: warm-up launches on a one-row table
  e.caps.dim = 256;
  L.embedding.push_back(e);
  const std::vector<int64_t> tokens = {1, 4, 16, 256, 4};  // the duplicate is ignored

  const WarmupReport r = warmup(L, tokens);
  const int64_t layers = 4 + 2 + 2 + 1, counts = 4;
  EXPECT_EQ(r.planned, layers * counts);
  // Entries: one per (layer, count) plus the NVFP4 activation quantizer per count.
  ASSERT_EQ(static_cast<int64_t>(r.entries.size()), layers * counts + counts);
  std::map<std::string, int> launches;  // signature -> launching entries
  std::set<std::string> sigs;
  for (const WarmupEntry& x : r.entries) {
    EXPECT_FALSE(x.signature.empty()) << x.layer << " t=" << x.tokens;
    sigs.insert(x.signature);
    if (x.launched) {
      ++launches[x.signature];
      EXPECT_GT(x.launch_ms, 0.0) << x.signature;
    }
  }
  EXPECT_EQ(static_cast<int64_t>(sigs.size()), r.unique);
  EXPECT_LT(r.unique, static_cast<int64_t>(r.entries.size()));  // de-duplicated
  EXPECT_EQ(r.launched + r.already_warm, r.unique);
  EXPECT_EQ(static_cast<int64_t>(launches.size()), r.launched);
  for (const auto& [s, n] : launches) EXPECT_EQ(n, 1) << s;
  EXPECT_GT(r.seconds, 0.0);
  // The first launch of each kernel includes the driver's lazy module load: print the times.
  std::printf("warmup: %lld plans, %lld signatures, %lld launched in %.3f s\n",
              static_cast<long long>(r.planned), static_cast<long long>(r.unique),
              static_cast<long long>(r.launched), r.seconds);
  for (const WarmupEntry& x : r.entries)
    if (x.launched)
      std::printf("  %8.3f ms  %-12s t=%-4lld %s\n", x.launch_ms, x.layer.c_str(),
                  static_cast<long long>(x.tokens), x.signature.c_str());

  // The signatures name the regimes a server sees.
  auto sig_of = [&](const std::string& layer, int64_t t) {
    for (const WarmupEntry& x : r.entries)
      if (x.layer == layer && x.tokens == t) return x.signature;
    return std::string("<none>");
  };
  EXPECT_EQ(sig_of("qkv", 1), sig_of("o", 1));
  EXPECT_NE(sig_of("qkv", 1).find("decode nt=1"), std::string::npos) << sig_of("qkv", 1);
  EXPECT_NE(sig_of("qkv", 16).find("decode nt=2"), std::string::npos) << sig_of("qkv", 16);
  EXPECT_NE(sig_of("qkv", 256).find("tiled"), std::string::npos) << sig_of("qkv", 256);
  EXPECT_NE(sig_of("down", 1).find("gemm.q8_0"), std::string::npos) << sig_of("down", 1);
  EXPECT_NE(sig_of("experts", 1).find("decode_tn8"), std::string::npos) << sig_of("experts", 1);
  EXPECT_NE(sig_of("experts", 256).find("grouped_tn64"), std::string::npos);
  EXPECT_NE(sig_of("experts_q8", 1).find("w1=q8_0"), std::string::npos);
  EXPECT_NE(sig_of("attn", 1).find("mode=decode"), std::string::npos) << sig_of("attn", 1);
  EXPECT_NE(sig_of("attn", 1).find("split_merge"), std::string::npos) << sig_of("attn", 1);
  EXPECT_NE(sig_of("attn_verify", 16).find("mode=verify"), std::string::npos);
  EXPECT_EQ(sig_of("embed", 1), sig_of("embed", 256));
  EXPECT_NE(sig_of("embed", 1).find("embedding.q8_0 ids=int32 out=bf16"), std::string::npos);
  bool quantizer = false;
  for (const WarmupEntry& x : r.entries)
    quantizer = quantizer || (x.op == "quantize" && x.signature == "quantize.nvfp4 in=bf16");
  EXPECT_TRUE(quantizer);

  // Every planned signature is in the registry, with the op that resolved it.
  std::set<std::string> ops;
  std::set<std::string> registered;
  for (const KernelResolution& k : resolved_kernels()) {
    registered.insert(k.signature);
    ops.insert(k.op);
    EXPECT_FALSE(k.shape.empty()) << k.signature;
    EXPECT_GE(k.plans, 1);
  }
  for (const std::string& s : sigs)
    if (s.rfind("quantize.", 0) != 0) EXPECT_EQ(registered.count(s), 1u) << s;
  for (const char* op : {"gemm::plan", "fused_moe.plan", "attention.plan_paged", "plan_embedding"})
    EXPECT_EQ(ops.count(op), 1u) << op;

  // A second call finds everything warm and launches nothing.
  const WarmupReport again = warmup(L, {1, 4, 16, 256});
  EXPECT_EQ(again.launched, 0);
  EXPECT_EQ(again.already_warm, r.unique);
  EXPECT_EQ(again.unique, r.unique);
  B12X_TEST_CUDA(cudaGetLastError());
}

TEST_F(IntegrationGpuWarmup, FreezeRefusesUnseenSignaturesAndNamesTheShape) {
  B12X_REQUIRE_GPU();
  // Other tests of this process resolved kernels too: start from an empty registry, so only
  // what this warm-up plans counts as resolved.
  clear_resolved_kernels();
  WarmupLayers L;
  L.linear.push_back(linear_layer("mx", gemm::LinearFormat::kMxfp4W4A16, 256, 512, DType::kFP16));
  warmup(L, {1, 128});
  freeze_kernel_resolution("IntegrationGpu freeze test");
  EXPECT_TRUE(kernel_resolution_frozen());

  // The warmed shape plans again.
  gemm::Caps c = L.linear[0].caps;
  c.max_tokens = 1;
  EXPECT_NO_THROW(gemm::plan(c));
  c.max_tokens = 128;
  EXPECT_NO_THROW(gemm::plan(c));

  // An unseen kernel configuration (fp16 MMA path of the same weights) is an error naming it.
  gemm::Caps u = c;
  u.max_tokens = 1;
  u.act_dtype = DType::kFP16;
  u.out_features = 768;
  try {
    gemm::plan(u);
    FAIL() << "a plan of an unseen signature succeeded while frozen";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::kFrozen);
    const std::string m = e.what();
    EXPECT_NE(m.find("gemm::plan"), std::string::npos) << m;
    EXPECT_NE(m.find("N=768 K=512"), std::string::npos) << m;                 // the shape
    EXPECT_NE(m.find("gemm.mxfp4_w4a16 act=fp16"), std::string::npos) << m;   // the signature
    EXPECT_NE(m.find("IntegrationGpu freeze test"), std::string::npos) << m;  // the reason
  }

  // Every op refuses a configuration that was not warmed.
  WarmupMoe mo = moe_layer("m", moe::QuantMode::kW4A16, moe::SourceFormat::kFp4E8M0K32);
  const moe::WeightsPlan wp = moe::plan_weights(mo.weights);
  moe::Caps mc = mo.caps;
  mc.max_tokens = 3;
  mc.weight_plan = &wp;
  try {
    moe::plan(mc);
    FAIL() << "moe plan succeeded while frozen";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::kFrozen);
    EXPECT_NE(std::string(e.what()).find("E=8 H=256 I=128 max_tokens=3 topk=2"), std::string::npos)
        << e.what();
  }
  attention::PagedCaps ac = attention_layer("a", 64, attention::Mode::kExtend).caps;
  try {
    attention::plan_paged(ac);
    FAIL() << "attention plan succeeded while frozen";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::kFrozen);
    EXPECT_NE(std::string(e.what()).find("Hq=8 Hkv=2 D=64/64"), std::string::npos) << e.what();
  }
  EmbeddingCaps ec;
  ec.vocab = 10;
  ec.dim = 64;
  ec.max_tokens = 2;
  ec.id_dtype = DType::kInt64;
  ec.out_dtype = DType::kFP16;
  EXPECT_THROW(plan_embedding(ec), Error);
  // warmup itself plans, so it refuses new signatures too.
  WarmupLayers L2;
  L2.linear.push_back(linear_layer("new", gemm::LinearFormat::kIq2Xs, 256, 512));
  EXPECT_THROW(warmup(L2, {2}), Error);

  // Unfreezing restores planning.
  unfreeze_kernel_resolution();
  EXPECT_NO_THROW(gemm::plan(u));
  EXPECT_NO_THROW(moe::plan(mc));
  EXPECT_NO_THROW(attention::plan_paged(ac));
  EXPECT_NO_THROW(plan_embedding(ec));
}

TEST_F(IntegrationGpuWarmup, PlansAreRefusedDuringStreamCapture) {
  B12X_REQUIRE_GPU();
  gemm::Caps gc = linear_layer("g", gemm::LinearFormat::kQ8_0, 256, 256).caps;
  gc.max_tokens = 4;
  WarmupMoe mo = moe_layer("m", moe::QuantMode::kGgmlA16, moe::SourceFormat::kGgml);
  const moe::WeightsPlan wp = moe::plan_weights(mo.weights);
  moe::Caps mc = mo.caps;
  mc.max_tokens = 4;
  mc.weight_plan = &wp;
  attention::PagedCaps ac = attention_layer("a", 128, attention::Mode::kDecode).caps;
  EmbeddingCaps ec;
  ec.vocab = 16;
  ec.dim = 64;
  ec.max_tokens = 4;
  WarmupLayers L;
  L.linear.push_back(linear_layer("g", gemm::LinearFormat::kQ8_0, 256, 256));

  // Blocking stream: plans without a stream argument see the capture through the legacy stream;
  // non-blocking stream: only the ops that take the stream can see it.
  for (unsigned flags : {cudaStreamDefault, cudaStreamNonBlocking}) {
    SCOPED_TRACE(flags == cudaStreamDefault ? "blocking stream" : "non-blocking stream");
    cudaStream_t s = nullptr;
    B12X_TEST_CUDA(cudaStreamCreateWithFlags(&s, flags));
    B12X_TEST_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    auto refused = [&](const char* what, auto&& f) {
      try {
        f();
        ADD_FAILURE() << what << " planned during capture";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), Status::kCaptureActive) << what << ": " << e.what();
        EXPECT_NE(std::string(e.what()).find("captur"), std::string::npos) << e.what();
      }
    };
    refused("attention.plan_paged", [&] { attention::plan_paged(ac, s); });
    refused("warmup", [&] { warmup(L, {1}, s); });
    if (flags == cudaStreamDefault) {
      refused("gemm::plan", [&] { gemm::plan(gc); });
      refused("moe::plan", [&] { moe::plan(mc); });
      refused("plan_embedding", [&] { plan_embedding(ec); });
    }
    // The refusals left the capture intact.
    cudaGraph_t g = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    if (g != nullptr) cudaGraphDestroy(g);
    B12X_TEST_CUDA(cudaStreamDestroy(s));
    B12X_TEST_CUDA(cudaGetLastError());
  }
  // And outside the capture they plan.
  EXPECT_NO_THROW(gemm::plan(gc));
  EXPECT_NO_THROW(moe::plan(mc));
  EXPECT_NO_THROW(attention::plan_paged(ac));
  EXPECT_NO_THROW(plan_embedding(ec));
}

}  // namespace
