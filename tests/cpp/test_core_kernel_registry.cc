// The kernel-resolution registry and the freeze (no GPU: the registry is called directly, as
// every op's plan() does once it chose its kernels).
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "b12x/runtime.h"
#include "b12x/status.h"

namespace {

using b12x::detail::resolve_kernels;

/// Leaves the process unfrozen and the registry empty whatever the test did.
struct RegistryTest : ::testing::Test {
  void SetUp() override {
    b12x::unfreeze_kernel_resolution();
    b12x::clear_resolved_kernels();
  }
  void TearDown() override {
    b12x::unfreeze_kernel_resolution();
    b12x::clear_resolved_kernels();
  }
};

TEST_F(RegistryTest, RecordsFirstResolutionAndCountsPlans) {
  resolve_kernels("gemm::plan", 0, "gemm.q8_0 act=bf16 out=bf16 decode nt=1 split=none",
                  "linear[q8_0 N=256 K=512]");
  EXPECT_EQ(b12x::detail::last_kernel_signature(),
            "gemm.q8_0 act=bf16 out=bf16 decode nt=1 split=none");
  resolve_kernels("gemm::plan", 0, "gemm.q8_0 act=bf16 out=bf16 decode nt=1 split=none",
                  "linear[q8_0 N=1024 K=512]");
  resolve_kernels("fused_moe.plan", 0, "moe.w4a16 decode_tn8", "E=8 H=256 I=128");
  resolve_kernels("fused_moe.plan", 1, "moe.w4a16 decode_tn8", "E=8 H=256 I=128");
  const auto r = b12x::resolved_kernels();
  ASSERT_EQ(r.size(), 3u);  // (device, signature) pairs
  EXPECT_EQ(r[0].op, "gemm::plan");
  EXPECT_EQ(r[0].shape, "linear[q8_0 N=256 K=512]");  // the first shape is kept
  EXPECT_EQ(r[0].plans, 2);
  EXPECT_EQ(r[1].signature, "moe.w4a16 decode_tn8");
  EXPECT_EQ(r[1].device, 0);
  EXPECT_EQ(r[2].device, 1);
  EXPECT_EQ(r[2].plans, 1);
}

TEST_F(RegistryTest, FrozenMissNamesOpShapeSignatureAndReason) {
  resolve_kernels("gemm::plan", 0, "gemm.nvfp4 act=fp4_e2m1 out=bf16 tiled", "shape A");
  b12x::freeze_kernel_resolution("serving started");
  // A resolved signature keeps planning, with any shape.
  EXPECT_NO_THROW(resolve_kernels("gemm::plan", 0, "gemm.nvfp4 act=fp4_e2m1 out=bf16 tiled",
                                  "linear[nvfp4 N=4096 K=4096 max_tokens=512]"));
  try {
    resolve_kernels("attention.plan_paged", 0, "attention.d128_decode_deep_bf16 mode=decode",
                    "Hq=32 Hkv=8 D=128/128");
    FAIL() << "a new signature was accepted while frozen";
  } catch (const b12x::Error& e) {
    EXPECT_EQ(e.code(), b12x::Status::kFrozen);
    const std::string m = e.what();
    EXPECT_NE(m.find("attention.plan_paged"), std::string::npos) << m;
    EXPECT_NE(m.find("Hq=32 Hkv=8 D=128/128"), std::string::npos) << m;
    EXPECT_NE(m.find("attention.d128_decode_deep_bf16 mode=decode"), std::string::npos) << m;
    EXPECT_NE(m.find("frozen"), std::string::npos) << m;
    EXPECT_NE(m.find("serving started"), std::string::npos) << m;
  }
  // The same signature on another device was never resolved there (modules load per device).
  EXPECT_THROW(resolve_kernels("gemm::plan", 1, "gemm.nvfp4 act=fp4_e2m1 out=bf16 tiled", "B"),
               b12x::Error);
  EXPECT_EQ(b12x::resolved_kernels().size(), 1u);  // a refused plan records nothing
  b12x::unfreeze_kernel_resolution();
  EXPECT_NO_THROW(resolve_kernels("attention.plan_paged", 0,
                                  "attention.d128_decode_deep_bf16 mode=decode", "Hq=32"));
  EXPECT_EQ(b12x::resolved_kernels().size(), 2u);
}

TEST_F(RegistryTest, LastSignatureIsPerThread) {
  resolve_kernels("op", 0, "sig.main", "s");
  std::string other;
  std::thread t([&] {
    resolve_kernels("op", 0, "sig.thread", "s");
    other = b12x::detail::last_kernel_signature();
  });
  t.join();
  EXPECT_EQ(other, "sig.thread");
  EXPECT_EQ(b12x::detail::last_kernel_signature(), "sig.main");
}

TEST_F(RegistryTest, EmptySignatureIsABug) {
  try {
    resolve_kernels("op", 0, "", "shape");
    FAIL() << "empty signature accepted";
  } catch (const b12x::Error& e) {
    EXPECT_EQ(e.code(), b12x::Status::kInternal);
  }
}

// Without a GPU no stream can be capturing; the guard must say so instead of failing.
TEST_F(RegistryTest, CaptureGuardWithoutDevice) {
  if (b12x::device_count() > 0) GTEST_SKIP() << "GPU present: covered by IntegrationGpu tests";
  EXPECT_FALSE(b12x::stream_is_capturing(nullptr));
  EXPECT_NO_THROW(b12x::refuse_during_capture(nullptr, "op"));
}

}  // namespace
