// `b12x quantize IN_DIR OUT_DIR --format F [--layers REGEX ...] [--input-amax A]`:
// BF16/FP16/F32 safetensors in, a ModelOpt MIXED_PRECISION checkpoint out, with a progress bar
// and a per-layer quantisation error summary.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "b12x/checkpoint.h"
#include "b12x/status.h"
#include "selftest.h"

namespace b12x::cli {
namespace {

int usage() {
  std::fprintf(
      stderr,
      "usage: b12x quantize IN_DIR OUT_DIR --format "
      "nvfp4|mxfp4|mxfp8|fp8|q8_0|iq2_xs|iq2_xxs\n"
      "                     [--layers REGEX ...] [--input-amax A] [--quiet]\n"
      "  --layers REGEX  quantize only modules whose name matches (ECMAScript, searched);\n"
      "                  default: every linear layer except embeddings, lm_head, routers\n"
      "  --input-amax A  calibrated activation |max|: required for fp8 (static scales);\n"
      "                  for nvfp4 it writes W4A4 NVFP4, without it W4A16_NVFP4\n");
  return 2;
}

struct Algo {
  const char* name;
  checkpoint::QuantAlgo algo;
};
constexpr Algo kAlgos[] = {
    {"nvfp4", checkpoint::QuantAlgo::kNVFP4},     {"mxfp4", checkpoint::QuantAlgo::kMXFP4},
    {"mxfp8", checkpoint::QuantAlgo::kMXFP8},     {"fp8", checkpoint::QuantAlgo::kFP8},
    {"q8_0", checkpoint::QuantAlgo::kQ8_0},       {"iq2_xs", checkpoint::QuantAlgo::kIQ2_XS},
    {"iq2_xxs", checkpoint::QuantAlgo::kIQ2_XXS},
};

int run(int argc, char** argv) {
  std::vector<std::string> pos;
  checkpoint::QuantizeOptions o;
  bool have_format = false, quiet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--format" && i + 1 < argc) {
      const std::string f = argv[++i];
      for (const auto& al : kAlgos)
        if (f == al.name) {
          o.algo = al.algo;
          have_format = true;
        }
      if (!have_format) {
        std::fprintf(stderr, "b12x quantize: unknown --format '%s'\n", f.c_str());
        return usage();
      }
    } else if (a == "--layers" && i + 1 < argc) {
      while (i + 1 < argc && argv[i + 1][0] != '-') o.layer_patterns.emplace_back(argv[++i]);
    } else if (a == "--input-amax" && i + 1 < argc) {
      char* end = nullptr;
      o.input_amax = std::strtof(argv[++i], &end);
      if (!end || *end || !(o.input_amax > 0)) {
        std::fprintf(stderr, "b12x quantize: --input-amax needs a positive number, got '%s'\n",
                     argv[i]);
        return 2;
      }
    } else if (a == "--quiet") {
      quiet = true;
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "b12x quantize: unknown option '%s'\n", a.c_str());
      return usage();
    } else {
      pos.push_back(a);
    }
  }
  if (pos.size() != 2 || !have_format) return usage();

  const bool tty = isatty(2);
  const auto t0 = std::chrono::steady_clock::now();
  o.progress = [&](size_t done, size_t total, const std::string& name) {
    if (quiet) return;
    const int width = 30;
    const int fill = total ? static_cast<int>(width * done / total) : width;
    std::string bar(fill, '#');
    bar.resize(width, '.');
    std::string shown = name.size() > 48 ? "..." + name.substr(name.size() - 45) : name;
    if (tty)
      std::fprintf(stderr, "\r[%s] %zu/%zu %-48s", bar.c_str(), done, total, shown.c_str());
    else if (done == total || done % 64 == 0)
      std::fprintf(stderr, "[%s] %zu/%zu\n", bar.c_str(), done, total);
    if (tty && done == total) std::fprintf(stderr, "\n");
  };
  const checkpoint::QuantizeReport r = checkpoint::quantize_checkpoint(pos[0], pos[1], o);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::printf("%-52s %-12s %-12s %10s %10s %8s\n", "LAYER", "FORMAT", "SHAPE", "REL_RMS", "MAX_ABS",
              "BOUND");
  int over = 0;
  for (const auto& l : r.layers) {
    const bool bad = l.rel_rms_error > l.bound;
    over += bad ? 1 : 0;
    std::printf("%-52s %-12s %-12s %10.4g %10.4g %8.3g%s\n", l.name.c_str(),
                checkpoint::quant_algo_name(l.algo),
                (std::to_string(l.n) + "x" + std::to_string(l.k)).c_str(), l.rel_rms_error,
                l.max_abs_error, l.bound, bad ? "  ABOVE BOUND" : "");
  }
  for (const auto& [t, why] : r.skipped)
    std::printf("kept as is: %s (%s)\n", t.c_str(), why.c_str());
  std::printf(
      "\n%zu layers quantized in %.1f s; %.1f MiB -> %.1f MiB; %d above the format's "
      "usual error bound\nwrote %s (inspect it with: b12x inspect %s)\n",
      r.layers.size(), secs, r.bytes_in / 1048576.0, r.bytes_out / 1048576.0, over, pos[1].c_str(),
      pos[1].c_str());
  return 0;
}

CommandRegistrar reg("quantize",
                     "quantize IN_DIR OUT_DIR --format nvfp4|mxfp4|mxfp8|fp8|q8_0|iq2_xs|iq2_xxs "
                     "[--layers REGEX...] [--input-amax A]   BF16 safetensors -> ModelOpt "
                     "checkpoint",
                     run);

}  // namespace
}  // namespace b12x::cli
