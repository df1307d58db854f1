// `b12x selftest`: each area registers cases that run one op on a default problem and compare it
// with the CPU reference. Cases live in tools/cli/selftest_<area>.cc.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace b12x::cli {

struct SelftestResult {
  bool ok = false;
  std::string detail;  ///< e.g. "max_abs=1e-6 vs tol 1e-3" or the error message
};

struct SelftestCase {
  std::string area;
  std::string name;
  bool needs_gpu;
  std::function<SelftestResult()> run;
};

std::vector<SelftestCase>& selftest_registry();

/// Further subcommands (inspect, quantize, ...) register themselves from their own files.
struct Command {
  std::string name;
  std::string help;  ///< one line: "inspect CHECKPOINT_DIR   every layer, its format, ..."
  std::function<int(int argc, char** argv)> run;  ///< argv[0] is the subcommand name
};
std::vector<Command>& command_registry();
struct CommandRegistrar {
  CommandRegistrar(const char* name, const char* help, std::function<int(int, char**)> fn) {
    command_registry().push_back({name, help, std::move(fn)});
  }
};

struct SelftestRegistrar {
  SelftestRegistrar(const char* area, const char* name, bool needs_gpu,
                    std::function<SelftestResult()> fn) {
    selftest_registry().push_back({area, name, needs_gpu, std::move(fn)});
  }
};

}  // namespace b12x::cli

#define B12X_SELFTEST_CAT2(a, b) a##b
#define B12X_SELFTEST_CAT(a, b) B12X_SELFTEST_CAT2(a, b)
/// B12X_SELFTEST("gemm", "nvfp4 w4a4 m=16", true) { ...; return {ok, detail}; }
#define B12X_SELFTEST(area, name, needs_gpu)                                             \
  static ::b12x::cli::SelftestResult B12X_SELFTEST_CAT(b12x_selftest_fn_, __LINE__)();   \
  static ::b12x::cli::SelftestRegistrar B12X_SELFTEST_CAT(b12x_selftest_reg_, __LINE__)( \
      area, name, needs_gpu, B12X_SELFTEST_CAT(b12x_selftest_fn_, __LINE__));            \
  static ::b12x::cli::SelftestResult B12X_SELFTEST_CAT(b12x_selftest_fn_, __LINE__)()
