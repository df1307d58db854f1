// CPU test: every default plan of the linear GEMM has its kernels, on devices this machine does
// not have. fake_cudart.cc stands in for the CUDA runtime (SM90 H200, SM120 with 188 and 170 SMs,
// SM121 with 48, SM89 without clusters), so plan / pack / bind / run execute their host code as
// on those devices and every launch is checked (a kernel exists for the run's configuration: the
// launchers assert a non-null pick; grid, block, cluster and shared memory within the device's
// limits, the opt-in done) instead of executed. Sweep: every linear format and activation dtype,
// BF16 / FP16 outputs, with and without bias, capacities M = 1..16, 32, 64, 256, 2048, the five
// bench shapes and odd ones (N not a multiple of 16 / 128, K tails), each plan run at its
// capacity and at smaller live M. It is what makes removing kernel instantiations safe on devices
// the GPU rounds cannot run: a removed kernel a default still reaches fails here.
// B12X_PLAN_KERNELS=<file> writes the launched kernels' names (sorted, unique) for that analysis.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "b12x/gemm.h"
#include "b12x/runtime.h"
#include "b12x/status.h"
#include "plans/fake_cudart.h"

using namespace b12x;
using gemm::LinearFormat;

namespace {

const std::vector<fake_cuda::Device>& devices() {
  static const std::vector<fake_cuda::Device> d = {
      {"H200 (sm_90)", 90, 132, 232448, 233472, 2048, 32, 60 << 20},
      {"RTX PRO 6000 (sm_120)", 120, 188, 101376, 102400, 1536, 32, 128 << 20},
      {"RTX 5090 (sm_120)", 120, 170, 101376, 102400, 1536, 32, 96 << 20},
      {"GB10 (sm_121)", 121, 48, 101376, 102400, 1536, 32, 24 << 20},
      {"L40S (sm_89)", 89, 142, 101376, 102400, 1536, 24, 96 << 20},
  };
  return d;
}

// The fake devices are installed before the library's first device query; the build compiles
// only some of these architectures, but kernel picks are host code, the same for every one.
void init_devices() {
  static const bool done = [] {
    fake_cuda::set_devices(devices());
    for (int i = 0; i < static_cast<int>(devices().size()); ++i)
      const_cast<DeviceInfo&>(device_info(i)).arch_compiled = true;
    return true;
  }();
  (void)done;
}

std::set<const void*>& kernels_seen() {
  static std::set<const void*> s;
  return s;
}

void write_kernels_seen() {
  const char* path = std::getenv("B12X_PLAN_KERNELS");
  if (path == nullptr) return;
  std::set<std::string> names;
  for (const void* k : kernels_seen()) names.insert(fake_cuda::kernel_name(k));
  std::ofstream os(path);
  for (const auto& k : names) os << k << "\n";
}

// Host storage of a checkpoint-shaped weight (zero values, unit scales).
struct Source {
  gemm::WeightSource src;
  std::vector<uint8_t> w, s;
  std::vector<float> sf;
  float out_scale = 1.f;
};

std::unique_ptr<Source> make_source(LinearFormat f, int64_t N, int64_t K, uint8_t e8m0) {
  auto h = std::make_unique<Source>();
  gemm::WeightSource& src = h->src;
  src.format = f;
  src.in_features = K;
  auto host = [](void* p, DType t, std::initializer_list<int64_t> shape) {
    return TensorRef::contiguous(p, t, shape);
  };
  switch (f) {
    case LinearFormat::kNvfp4:
    case LinearFormat::kNvfp4W4A16:
      h->w.assign(N * K / 2, 0);
      h->s.assign(N * K / 16, 0x38);
      src.weight = host(h->w.data(), DType::kUInt8, {N, K / 2});
      src.weight_scale = host(h->s.data(), DType::kFP8E4M3, {N, K / 16});
      break;
    case LinearFormat::kMxfp4:
    case LinearFormat::kMxfp4W4A8:
    case LinearFormat::kMxfp4W4A16:
      h->w.assign(N * K / 2, 0);
      h->s.assign(N * K / 32, e8m0);
      src.weight = host(h->w.data(), DType::kUInt8, {N, K / 2});
      src.weight_scale = host(h->s.data(), DType::kUE8M0, {N, K / 32});
      break;
    case LinearFormat::kFp8Tensor:
      h->w.assign(N * K, 0);
      src.weight = host(h->w.data(), DType::kFP8E4M3, {N, K});
      src.output_scale = host(&h->out_scale, DType::kFP32, {1});
      break;
    case LinearFormat::kFp8Block:
      h->w.assign(N * K, 0);
      h->sf.assign(((N + 127) / 128) * (K / 128), 1.f);
      src.weight = host(h->w.data(), DType::kFP8E4M3, {N, K});
      src.weight_scale = host(h->sf.data(), DType::kFP32, {(N + 127) / 128, K / 128});
      break;
    case LinearFormat::kMxfp8:
      h->w.assign(N * K, 0);
      h->s.assign(N * K / 32, e8m0);
      src.weight = host(h->w.data(), DType::kFP8E4M3, {N, K});
      src.weight_scale = host(h->s.data(), DType::kUE8M0, {N, K / 32});
      break;
    case LinearFormat::kQ8_0:
    case LinearFormat::kIq2Xxs:
    case LinearFormat::kIq2Xs: {
      const DType bt = f == LinearFormat::kQ8_0    ? DType::kQ8_0
                       : f == LinearFormat::kIq2Xs ? DType::kIQ2_XS
                                                   : DType::kIQ2_XXS;
      const int64_t row = K / dtype_block_values(bt) * dtype_block_bytes(bt);
      h->w.assign(N * row, 0);
      src.weight = host(h->w.data(), DType::kUInt8, {N, row});
      break;
    }
  }
  return h;
}

int64_t pad_to(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

// Fake device addresses (never dereferenced: run only launches), far apart and 4 KB aligned.
void* fake_ptr(int slot) {
  return reinterpret_cast<void*>((uintptr_t{0x7f} << 40) + (uintptr_t(slot) << 36));
}

struct Shape {
  int64_t n, k;
};

std::vector<Shape> shapes(LinearFormat f) {
  const int64_t km = gemm::format_k_multiple(f);
  auto kr = [&](int64_t k) { return pad_to(k, km); };
  return {{4096, 4096},
          {14336, 4096},
          {4096, 14336},
          {6144, 4096},
          {2048, 7168},
          {4096, kr(3072)},       // SM90: the M = 1 8-part blocks' even parts (kStreamHalfRule)
          {1000, kr(4096 + km)},  // N not a multiple of 16, K tail past the 64 / 128 / 256 slices
          {2880, kr(2880)},
          {24, kr(3 * km)},
          {200, kr(1536 + km)},
          {256, 57344},  // K beyond the
                         // M = 1 stream
                         // kernel's
                         // staging
                         // (decode
                         // kernel, deep
                         // ring)
          {32768, 1024}};
}

const std::vector<int64_t> kCaps = {1,  2,  3,  4,  5,  6,  7,  8,  9,   10,
                                    11, 12, 13, 14, 15, 16, 32, 64, 256, 2048};
const std::vector<int64_t> kLiveM = {1,  2,  3,  4,  5,  8,   9,   12,  16,
                                     17, 24, 32, 33, 64, 128, 256, 1000};

struct Counts {
  int plans = 0, runs = 0, launches = 0;
};

// Plans (device, format, activation dtype, output dtype) over every capacity and shape and runs
// each plan at its capacity and smaller live M.
void sweep(int dev, LinearFormat f, Counts* c) {
  const std::vector<DType> acts = {DType::kBF16, DType::kFP16, DType::kFP8E4M3, DType::kFP4E2M1};
  const bool mx4 =
      f == LinearFormat::kMxfp4 || f == LinearFormat::kMxfp4W4A8 || f == LinearFormat::kMxfp4W4A16;
  // MXFP4 weights: E8M0 codes all <= 135 (the fold-free instances) and not.
  const std::vector<uint8_t> e8m0s =
      mx4 ? std::vector<uint8_t>{127, 140} : std::vector<uint8_t>{127};
  for (const Shape& sh : shapes(f)) {
    for (uint8_t e8 : e8m0s) {
      auto src = make_source(f, sh.n, sh.k, e8);
      std::shared_ptr<gemm::PackedWeight> w = gemm::PackedWeight::pack(src->src, dev, nullptr);
      for (DType act : acts) {
        for (DType out : {DType::kBF16, DType::kFP16}) {
          for (int64_t cap : kCaps)
            for (int64_t em : {int64_t{0}, int64_t{8}}) {
              // The expected-M hint, for capacities above the decode regime; FP16 outputs (the
              // kernels' epilogue only) at a few capacities.
              if (em > 0 && cap <= 32) continue;
              if (out == DType::kFP16 && cap != 1 && cap != 8 && cap != 16 && cap != 2048) continue;
              gemm::Caps caps;
              caps.expected_m = em;
              caps.device = dev;
              caps.format = f;
              caps.max_tokens = cap;
              caps.in_features = sh.k;
              caps.out_features = sh.n;
              caps.act_dtype = act;
              caps.out_dtype = out;
              gemm::Plan p;
              try {
                p = gemm::plan(caps);
              } catch (const Error& e) {
                // Activation dtypes the format does not take are refused by name; nothing else.
                ASSERT_NE(std::string(e.what()).find("act_dtype="), std::string::npos) << e.what();
                break;
              }
              ASSERT_EQ(fake_cuda::take_error(), "") << p.describe();
              ++c->plans;
              std::vector<int64_t> ms;
              for (int64_t m : kLiveM)
                if (m < cap) ms.push_back(m);
              ms.push_back(cap);
              const bool w4a4 = f == LinearFormat::kNvfp4 || f == LinearFormat::kMxfp4;
              for (int64_t m : ms) {
                const bool bias = (m + cap) % 2 == 0;
                const TensorRef x = TensorRef::contiguous(fake_ptr(1), act, {m, sh.k}, dev);
                TensorRef xs;
                if (w4a4) {
                  const int64_t cols = f == LinearFormat::kNvfp4 ? sh.k / 16 : sh.k / 32;
                  xs = TensorRef::contiguous(fake_ptr(2), DType::kUInt8,
                                             {pad_to(m, 128) * pad_to(cols, 4)}, dev);
                } else if (f == LinearFormat::kFp8Block && act == DType::kFP8E4M3) {
                  xs = TensorRef::contiguous(fake_ptr(2), DType::kFP32, {m, sh.k / 128}, dev);
                }
                const TensorRef y = TensorRef::contiguous(fake_ptr(3), out, {m, sh.n}, dev);
                const TensorRef b =
                    bias ? TensorRef::contiguous(fake_ptr(4), out, {sh.n}, dev) : TensorRef{};
                const TensorRef scratch = TensorRef::contiguous(
                    fake_ptr(5), DType::kUInt8, {std::max<int64_t>(p.scratch_bytes, 1)}, dev);
                auto what = [&] {
                  return p.describe() + " act=" + dtype_name(act) + " out=" + dtype_name(out) +
                         " M=" + std::to_string(m) + " on " + devices()[dev].name;
                };
                try {
                  const gemm::Binding bd = gemm::bind(p, scratch, x, xs, *w, y, b, TensorRef{});
                  gemm::run(bd, nullptr);
                } catch (const std::exception& e) {
                  ADD_FAILURE() << what() << ": " << e.what() << " " << fake_cuda::take_error();
                  return;
                }
                const std::string err = fake_cuda::take_error();
                const auto launches = fake_cuda::take_launches();
                ASSERT_EQ(err, "") << what();
                ASSERT_FALSE(launches.empty()) << what();
                ++c->runs;
                for (const auto& l : launches) {
                  ++c->launches;
                  kernels_seen().insert(l.kernel);
                }
              }
            }
        }
      }
    }
  }
}

class GemmPlans : public ::testing::TestWithParam<int> {};

TEST_P(GemmPlans, EveryDefaultPlanHasItsKernels) {
  init_devices();
  const int dev = GetParam();
  // Runs launch on the current device, as a caller's would (the plan's device: the fake checks
  // its limits and opt-ins there).
  ASSERT_EQ(cudaSetDevice(dev), cudaSuccess);
  Counts c;
  for (int fi = 0; fi < gemm::kNumLinearFormats; ++fi) {
    sweep(dev, static_cast<LinearFormat>(fi), &c);
    if (HasFatalFailure() || HasFailure()) break;
  }
  std::printf("%s: %d plans, %d runs, %d launches, %zu kernels so far\n",
              devices()[dev].name.c_str(), c.plans, c.runs, c.launches, kernels_seen().size());
  write_kernels_seen();
}

std::string device_test_name(const ::testing::TestParamInfo<int>& i) {
  static const char* const kNames[] = {"Sm90H200", "Sm120Rtx6000", "Sm120Rtx5090", "Sm121Gb10",
                                       "Sm89L40s"};
  return kNames[i.param];
}

INSTANTIATE_TEST_SUITE_P(Devices, GemmPlans, ::testing::Range(0, 5), device_test_name);

}  // namespace
