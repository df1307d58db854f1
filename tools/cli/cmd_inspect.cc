// `b12x inspect CHECKPOINT_DIR [--cc CC] [--tp N] [--json]`: every layer of a checkpoint, its
// format, bytes and which b12x path would run it (or every reason none can).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "b12x/checkpoint.h"
#include "b12x/runtime.h"
#include "b12x/status.h"
#include "selftest.h"

namespace b12x::cli {
namespace {

std::string human_bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string o;
  for (size_t i = 0; i < s.size(); ++i) o += (i ? "x" : "") + std::to_string(s[i]);
  return o;
}

int usage() {
  std::fprintf(stderr,
               "usage: b12x inspect CHECKPOINT_DIR [--cc CC] [--tp N] [--json]\n"
               "  --cc CC   device compute capability to answer for (e.g. 120, 121, 90, 89);\n"
               "            default: the current GPU, or 120 without one\n"
               "  --tp N    tensor-parallel size (divides MoE intermediate and heads)\n"
               "  --json    machine-readable output\n");
  return 2;
}

int run(int argc, char** argv) {
  std::string dir;
  checkpoint::InspectOptions o;
  bool as_json = false, cc_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      as_json = true;
    } else if ((a == "--cc" || a == "--tp") && i + 1 < argc) {
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (!end || *end || v <= 0) {
        std::fprintf(stderr, "b12x inspect: %s needs a positive integer, got '%s'\n", a.c_str(),
                     argv[i]);
        return 2;
      }
      if (a == "--cc") {
        o.compute_capability = static_cast<int>(v);
        cc_given = true;
      } else {
        o.tp_size = static_cast<int>(v);
      }
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "b12x inspect: unknown option '%s'\n", a.c_str());
      return usage();
    } else if (dir.empty()) {
      dir = a;
    } else {
      return usage();
    }
  }
  if (dir.empty()) return usage();
  if (!cc_given && device_count() > 0) {
    const DeviceInfo& d = device_info(current_device());
    o.compute_capability = d.cc_major * 10 + d.cc_minor;
  }
  const checkpoint::InspectReport r = checkpoint::inspect(dir, o);
  if (as_json) {
    std::printf("%s\n", r.to_json().c_str());
    return r.errors == 0 ? 0 : 1;
  }
  std::printf("checkpoint %s\nquantization: %s; answering for sm_%d%s, tp=%d\n\n", dir.c_str(),
              r.quant_method.c_str(), o.compute_capability ? o.compute_capability : 120,
              o.compute_capability ? "" : " (no GPU: default)", o.tp_size);
  std::printf("%-52s %-9s %-12s %-16s %10s  %s\n", "LAYER", "KIND", "FORMAT", "SHAPE", "BYTES",
              "B12X PATH");
  for (const auto& l : r.layers) {
    std::string path;
    if (!l.error.empty())
      path = "ERROR: " + l.error;
    else if (!l.has_selection)
      path = "-";
    else
      path = l.selection.summary();
    std::printf("%-52s %-9s %-12s %-16s %10s  %s\n", l.name.c_str(), l.kind.c_str(),
                l.format.c_str(), shape_str(l.shape).c_str(), human_bytes(l.bytes).c_str(),
                path.c_str());
    if (l.has_selection && l.error.empty())
      for (const auto& n : l.selection.notes)
        if (n.find("no device capability") == std::string::npos)
          std::printf("%-52s   note: %s\n", "", n.c_str());
  }
  std::printf("\n%zu layers, %s; %d served by b12x, %d not, %d with checkpoint errors\n",
              r.layers.size(), human_bytes(r.total_bytes).c_str(), r.served, r.not_served,
              r.errors);
  return r.errors == 0 ? 0 : 1;
}

CommandRegistrar reg("inspect",
                     "inspect CHECKPOINT_DIR [--cc CC] [--tp N] [--json]   every layer, its "
                     "format, bytes and the b12x path (or why not)",
                     run);

}  // namespace
}  // namespace b12x::cli
