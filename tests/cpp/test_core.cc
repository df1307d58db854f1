#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "b12x/runtime.h"
#include "b12x/status.h"
#include "b12x/types.h"

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const b12x::Error& e) {
    return e.what();
  }
  return "";
}

TEST(Core, DTypeNamesRoundTrip) {
  for (int i = 0; i < b12x::kNumDTypes; ++i) {
    const auto t = static_cast<b12x::DType>(i);
    EXPECT_EQ(b12x::dtype_from_name(b12x::dtype_name(t)), t) << i;
  }
  EXPECT_EQ(b12x::dtype_from_name("float8_e4m3fn"), b12x::DType::kFP8E4M3);
  EXPECT_NE(error_of([] { b12x::dtype_from_name("fp7"); }).find("unknown dtype name 'fp7'"),
            std::string::npos);
}

TEST(Core, BlockSizes) {
  EXPECT_EQ(b12x::dtype_bytes_for(b12x::DType::kQ8_0, 64), 68);
  EXPECT_EQ(b12x::dtype_bytes_for(b12x::DType::kIQ2_XXS, 512), 132);
  EXPECT_EQ(b12x::dtype_bytes_for(b12x::DType::kIQ2_XS, 256), 74);
  EXPECT_EQ(b12x::dtype_bytes_for(b12x::DType::kFP4E2M1, 32), 16);
  EXPECT_EQ(b12x::dtype_bytes_for(b12x::DType::kBF16, 3), 6);
}

TEST(Core, TensorRefContiguousAndStrides) {
  auto t =
      b12x::TensorRef::contiguous(reinterpret_cast<void*>(0x1000), b12x::DType::kFP4E2M1, {4, 64});
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.numel(), 256);
  EXPECT_EQ(t.byte_stride(0), 32);
  EXPECT_EQ(t.span_bytes(), 128);
  auto q =
      b12x::TensorRef::contiguous(reinterpret_cast<void*>(0x1000), b12x::DType::kIQ2_XS, {3, 512});
  EXPECT_EQ(q.byte_stride(0), 148);
  EXPECT_EQ(q.span_bytes(), 3 * 148);
}

TEST(Core, ChecksNameArgumentValueAndSupportedSet) {
  auto t =
      b12x::TensorRef::contiguous(reinterpret_cast<void*>(0x1000), b12x::DType::kFP16, {2, 3}, 0);
  const std::string e = error_of([&] {
    b12x::check_dtype(t, "mm_test", "x", {b12x::DType::kBF16, b12x::DType::kFP32});
  });
  EXPECT_NE(e.find("mm_test: x has dtype fp16 (supported: bf16, fp32)"), std::string::npos) << e;
  const std::string s = error_of([&] { b12x::check_shape(t, "op", "w", {2, 4}); });
  EXPECT_NE(s.find("op: w must have shape [2, 4], got fp16[2, 3]"), std::string::npos) << s;
  EXPECT_EQ(error_of([&] { b12x::check_shape(t, "op", "w", {2, -1}); }), "");
  const std::string a = error_of([&] {
    auto u = t;
    u.data = reinterpret_cast<void*>(0x1002);
    b12x::check_aligned(u, "op", "w", 16);
  });
  EXPECT_NE(a.find("is not 16-byte aligned"), std::string::npos) << a;
  const std::string d = error_of([&] { b12x::check_device(t, "op", "w", b12x::kHostDevice); });
  EXPECT_NE(d.find("w is on device 0, expected the host"), std::string::npos) << d;
  auto blk =
      b12x::TensorRef::contiguous(reinterpret_cast<void*>(0x1000), b12x::DType::kQ8_0, {2, 48});
  const std::string b = error_of([&] { b12x::check_defined(blk, "op", "w"); });
  EXPECT_NE(b.find("not a multiple of its block of 32"), std::string::npos) << b;
}

TEST(Core, VersionAndArchs) {
  EXPECT_STREQ(b12x::version(), "0.1.0");
  EXPECT_FALSE(b12x::compiled_archs().empty());
  for (int a : b12x::compiled_archs()) EXPECT_TRUE(a == 89 || a == 90 || a == 120 || a == 121);
}

TEST(Core, FreezeFlag) {
  EXPECT_FALSE(b12x::kernel_resolution_frozen());
  b12x::freeze_kernel_resolution("test");
  EXPECT_TRUE(b12x::kernel_resolution_frozen());
  b12x::unfreeze_kernel_resolution();
  EXPECT_FALSE(b12x::kernel_resolution_frozen());
}

}  // namespace
