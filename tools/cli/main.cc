// The b12x command-line tool.
//   b12x info       version, compiled architectures, the GPU found and the path each op family
//                   would use on it
//   b12x selftest   every available op on a default problem set against the CPU reference
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "b12x/runtime.h"
#include "b12x/status.h"
#include "selftest.h"

namespace b12x::cli {

std::vector<SelftestCase>& selftest_registry() {
  static std::vector<SelftestCase> r;
  return r;
}
std::vector<Command>& command_registry() {
  static std::vector<Command> r;
  return r;
}

namespace {

const char* kFamilies[][2] = {
    {"linear (FP8, block FP8, MXFP8, NVFP4, MXFP4, GGML IQ2/Q8_0)", "gemm"},
    {"activation quantizers (NVFP4, MXFP4, MXFP8, FP8)", "quantize"},
    {"fused MoE", "moe"},
    {"paged attention", "attention"},
    {"Q8_0 embedding", "embedding"},
};

std::string path_for(const DeviceInfo* d) {
  if (d == nullptr) return "none (no GPU): CPU reference only";
  if (!d->arch_compiled)
    return "none: sm_" + std::to_string(d->cc_major * 10 + d->cc_minor) +
           " not compiled (compiled: " + compiled_arch_string() + ")";
  switch (d->family) {
    case ArchFamily::kSm89:
      return "portable mma.sync (sm_89)";
    case ArchFamily::kSm90:
      return "portable mma.sync (sm_90a)";
    case ArchFamily::kSm120:
      return "portable mma.sync (sm_120a)";
    case ArchFamily::kSm121:
      return "portable mma.sync (sm_121a)";
    default:
      return "none: unsupported architecture";
  }
}

int cmd_info() {
  std::printf("b12x %s\n", version());
  std::printf("compiled architectures: %s\n", compiled_arch_string());
  const int n = device_count();
  const DeviceInfo* d = nullptr;
  if (n == 0) {
    std::printf("GPU: none found\n");
  } else {
    for (int i = 0; i < n; ++i) {
      const DeviceInfo& di = device_info(i);
      std::printf("GPU %d: %s, sm_%d%d, %d SMs, %.1f GiB, %lld KB smem/block, %s\n", i,
                  di.name.c_str(), di.cc_major, di.cc_minor, di.sm_count,
                  di.global_mem_bytes / 1073741824.0,
                  static_cast<long long>(di.smem_per_block_optin / 1024),
                  di.arch_compiled ? "supported by this build" : "NOT in this build");
    }
    d = &device_info(current_device());
  }
  std::printf("op families on %s:\n", d ? d->name.c_str() : "this machine");
  for (auto& f : kFamilies) std::printf("  %-62s %s\n", f[0], path_for(d).c_str());
  return 0;
}

int cmd_selftest(const char* only_area) {
  const int n = device_count();
  bool gpu = false;
  if (n == 0) {
    std::printf("no GPU found: running the CPU paths only (GPU cases are skipped)\n");
  } else {
    const DeviceInfo& d = device_info(current_device());
    gpu = d.arch_compiled;
    if (!gpu)
      std::printf("GPU %s (sm_%d%d) is not in this build (%s): GPU cases are skipped\n",
                  d.name.c_str(), d.cc_major, d.cc_minor, compiled_arch_string());
    else
      std::printf("GPU: %s (sm_%d%d)\n", d.name.c_str(), d.cc_major, d.cc_minor);
  }
  int passed = 0, failed = 0, skipped = 0;
  std::printf("%-10s %-44s %-6s %9s  %s\n", "area", "case", "result", "ms", "detail");
  for (const auto& c : selftest_registry()) {
    if (only_area && c.area != only_area) continue;
    if (c.needs_gpu && !gpu) {
      ++skipped;
      std::printf("%-10s %-44s %-6s %9s  %s\n", c.area.c_str(), c.name.c_str(), "skip", "-",
                  "needs a supported GPU");
      continue;
    }
    SelftestResult r;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      r = c.run();
    } catch (const std::exception& e) {
      r = {false, std::string("exception: ") + e.what()};
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    (r.ok ? passed : failed)++;
    std::printf("%-10s %-44s %-6s %9.1f  %s\n", c.area.c_str(), c.name.c_str(),
                r.ok ? "ok" : "FAIL", ms, r.detail.c_str());
  }
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed == 0 ? 0 : 1;
}

void usage() {
  std::printf(
      "usage: b12x <command>\n"
      "  info                 version, compiled architectures, GPU, path per op family\n"
      "  selftest [--area A]  run every available op against the CPU reference\n"
      "  version              print the version\n");
  for (const auto& c : command_registry()) std::printf("  %s\n", c.help.c_str());
}

}  // namespace
}  // namespace b12x::cli

int main(int argc, char** argv) {
  using namespace b12x::cli;
  if (argc < 2) {
    usage();
    return 2;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "info") return cmd_info();
    if (cmd == "version") {
      std::printf("%s\n", b12x::version());
      return 0;
    }
    if (cmd == "selftest") {
      const char* area = nullptr;
      if (argc >= 4 && std::strcmp(argv[2], "--area") == 0) area = argv[3];
      return cmd_selftest(area);
    }
    for (const auto& c : command_registry())
      if (c.name == cmd) return c.run(argc - 1, argv + 1);
    if (cmd == "-h" || cmd == "--help" || cmd == "help") {
      usage();
      return 0;
    }
  } catch (const b12x::Error& e) {
    std::fprintf(stderr, "b12x %s: error [%s]: %s\n", cmd.c_str(), b12x::status_name(e.code()),
                 e.what());
    return 1;
  }
  std::fprintf(stderr, "b12x: unknown command '%s'\n", cmd.c_str());
  usage();
  return 2;
}
