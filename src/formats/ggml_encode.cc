// Simple IQ2_XXS / IQ2_XS encoders (host). ggml itself has no reference quantizer for these
// types (it needs an importance matrix); this one exists so tests and demos can make IQ2
// weights that decode through the real, bit-exact decoders.
//
// For an 8-value group with magnitudes a_j and a grid point g (bytes g_j), the error with the
// natural signs is sum a_j^2 - 2 db sum a_j g_j + db^2 sum g_j^2; when the natural sign pattern
// has an odd number of negatives, the pattern must flip one element (the format keeps the
// number of negatives even), which costs 4 db a_j g_j at the cheapest j. These three per-grid
// terms do not depend on db, so they are computed once per group and then every (d, s, grid)
// combination costs a few flops. The sub-block scale s (4 bits) is searched exhaustively; the
// fp16 block scale d is tried at a few candidates derived from the block maximum and the best
// total squared error wins.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "b12x/formats.h"
#include "b12x/status.h"
#include "formats/ggml.h"

namespace b12x::formats {
namespace {

namespace f = b12x::fmt;
namespace g = b12x::fmt::ggml;

/// Grid points grouped by their squared norm: for a fixed db the best point of a norm class is
/// the one with the largest p = dot - 2*odd*min(a_j g_j), so each group keeps one candidate per
/// class (12 classes for iq2xxs_grid, 22 for iq2xs_grid) and the scale search only visits those.
struct GridClasses {
  int count = 0;
  double norm[32] = {};
  std::vector<int> cls;  // class of each grid point
  int ngrid = 0;
  std::vector<double> gv;  // grid bytes as doubles, [8][ngrid] (element-major, vectorises)
};

GridClasses make_classes(const uint64_t* grid, int ngrid) {
  GridClasses c;
  c.ngrid = ngrid;
  c.cls.resize(ngrid);
  c.gv.resize(static_cast<size_t>(ngrid) * 8);
  for (int q = 0; q < ngrid; ++q) {
    double n = 0;
    for (int j = 0; j < 8; ++j) {
      const double gj = static_cast<double>((grid[q] >> (8 * j)) & 0xFF);
      c.gv[static_cast<size_t>(j) * ngrid + q] = gj;
      n += gj * gj;
    }
    int k = 0;
    while (k < c.count && c.norm[k] != n) ++k;
    if (k == c.count) {
      B12X_ASSERT(c.count < 32, "IQ2 grid has more than 32 norm classes");
      c.norm[c.count++] = n;
    }
    c.cls[q] = k;
  }
  return c;
}

const GridClasses& classes_xxs() {
  static const GridClasses c = make_classes(g::kIq2xxsGrid, 256);
  return c;
}
const GridClasses& classes_xs() {
  static const GridClasses c = make_classes(g::kIq2xsGrid, 512);
  return c;
}

/// One 8-value group: its best grid point per norm class.
struct GroupTerms {
  double a2 = 0;       // sum a_j^2
  bool odd = false;    // natural sign pattern has an odd number of negatives
  uint32_t signs = 0;  // natural sign pattern (bit j = x_j < 0)
  const GridClasses* classes = nullptr;
  double p[32];  // best p of each class
  int q[32];     // its grid index
  int minj[32];  // the element flipped for parity
};

GroupTerms group_terms(const float* x, const GridClasses& cl) {
  GroupTerms t;
  t.classes = &cl;
  double a[8];
  for (int j = 0; j < 8; ++j) {
    a[j] = std::fabs(static_cast<double>(x[j]));
    t.a2 += a[j] * a[j];
    if (std::signbit(x[j]) && x[j] != 0.f) t.signs |= 1u << j;
  }
  t.odd = __builtin_popcount(t.signs) & 1;
  // dot and min(a_j g_j) of every grid point, element-major so the inner loops vectorise.
  const int ngrid = cl.ngrid;
  double dot[512], mn[512];
  for (int q = 0; q < ngrid; ++q) {
    dot[q] = 0;
    mn[q] = std::numeric_limits<double>::infinity();
  }
  for (int j = 0; j < 8; ++j) {
    const double aj = a[j];
    const double* gj = &cl.gv[static_cast<size_t>(j) * ngrid];
    for (int q = 0; q < ngrid; ++q) {
      const double ag = aj * gj[q];
      dot[q] += ag;
      mn[q] = ag < mn[q] ? ag : mn[q];
    }
  }
  for (int k = 0; k < cl.count; ++k) {
    t.p[k] = -std::numeric_limits<double>::infinity();
    t.q[k] = 0;
  }
  for (int q = 0; q < ngrid; ++q) {
    const double p = t.odd ? dot[q] - 2 * mn[q] : dot[q];
    const int k = cl.cls[q];
    if (p > t.p[k]) {
      t.p[k] = p;
      t.q[k] = q;
    }
  }
  // The element flipped for parity: the first j with the smallest a_j g_j of the chosen point.
  for (int k = 0; k < cl.count; ++k) {
    double best = std::numeric_limits<double>::infinity();
    t.minj[k] = 0;
    for (int j = 0; j < 8; ++j) {
      const double ag = a[j] * cl.gv[static_cast<size_t>(j) * ngrid + t.q[k]];
      if (ag < best) {
        best = ag;
        t.minj[k] = j;
      }
    }
  }
  return t;
}

struct GroupChoice {
  double err;
  int cls;
};

GroupChoice best_grid(const GroupTerms& t, double db) {
  GroupChoice best{std::numeric_limits<double>::infinity(), 0};
  const GridClasses& cl = *t.classes;
  for (int k = 0; k < cl.count; ++k) {
    const double e = t.a2 - 2 * db * t.p[k] + db * db * cl.norm[k];
    if (e < best.err) best = {e, k};
  }
  return best;
}

/// 7-bit sign index for the chosen class (flipping the cheapest element if needed).
uint32_t sign_index(const GroupTerms& t, int k) {
  uint32_t s = t.signs;
  if (t.odd) s ^= 1u << t.minj[k];
  return s & 0x7Fu;
}

/// Scale search over a run of `ngroups` groups sharing one 4-bit scale under block scale d.
struct ScaleChoice {
  double err;
  uint32_t s;
  int grid[4];  // chosen class per group
};
ScaleChoice best_scale(const GroupTerms* terms, int ngroups, float d) {
  ScaleChoice best{std::numeric_limits<double>::infinity(), 0, {0, 0, 0, 0}};
  for (uint32_t s = 0; s < 16; ++s) {
    const double db = f::ggml::iq2_sub_scale(d, s);  // exactly the decoder's scale
    ScaleChoice c{0, s, {0, 0, 0, 0}};
    for (int l = 0; l < ngroups; ++l) {
      const GroupChoice gc = best_grid(terms[l], db);
      c.err += gc.err;
      c.grid[l] = gc.cls;
    }
    if (c.err < best.err) best = c;
  }
  return best;
}

/// d candidates: the block max mapped onto 43 * (2s+1)/8 for the largest few s.
std::vector<float> d_candidates(float amax) {
  std::vector<float> v;
  for (int s : {15, 14, 13, 12, 11}) {
    const float d = f::round_to_fp16(amax / (43.0f * (2 * s + 1) / 8.0f));
    if (d > 0.f && std::isfinite(d)) v.push_back(d);
  }
  return v;
}

void encode_iq2_xxs_block(const float* x, uint8_t* blk) {
  std::memset(blk, 0, g::kIq2xxsBytes);
  const float amax = f::block_amax(x, 256);
  std::vector<GroupTerms> terms;
  terms.reserve(32);
  for (int gi = 0; gi < 32; ++gi) terms.push_back(group_terms(x + 8 * gi, classes_xxs()));
  double best_err = std::numeric_limits<double>::infinity();
  for (float d : d_candidates(amax)) {
    uint8_t cand[g::kIq2xxsBytes];
    g::store_u16(cand, f::float_to_fp16_bits(d));
    double err = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const ScaleChoice sc = best_scale(&terms[4 * ib], 4, d);
      err += sc.err;
      uint32_t w0 = 0, w1 = sc.s << 28;
      for (int l = 0; l < 4; ++l) {
        w0 |= static_cast<uint32_t>(terms[4 * ib + l].q[sc.grid[l]]) << (8 * l);
        w1 |= sign_index(terms[4 * ib + l], sc.grid[l]) << (7 * l);
      }
      g::store_u32(cand + 2 + 8 * ib, w0);
      g::store_u32(cand + 2 + 8 * ib + 4, w1);
    }
    if (err < best_err) {
      best_err = err;
      std::memcpy(blk, cand, g::kIq2xxsBytes);
    }
  }
}

void encode_iq2_xs_block(const float* x, uint8_t* blk) {
  std::memset(blk, 0, g::kIq2xsBytes);
  const float amax = f::block_amax(x, 256);
  std::vector<GroupTerms> terms;
  terms.reserve(32);
  for (int gi = 0; gi < 32; ++gi) terms.push_back(group_terms(x + 8 * gi, classes_xs()));
  double best_err = std::numeric_limits<double>::infinity();
  for (float d : d_candidates(amax)) {
    uint8_t cand[g::kIq2xsBytes];
    g::store_u16(cand, f::float_to_fp16_bits(d));
    double err = 0;
    for (int ib = 0; ib < 8; ++ib) {
      uint32_t scales = 0;
      for (int half = 0; half < 2; ++half) {
        const int g0 = 4 * ib + 2 * half;
        const ScaleChoice sc = best_scale(&terms[g0], 2, d);
        err += sc.err;
        scales |= sc.s << (4 * half);
        for (int l = 0; l < 2; ++l) {
          const uint32_t q = static_cast<uint32_t>(terms[g0 + l].q[sc.grid[l]]) |
                             (sign_index(terms[g0 + l], sc.grid[l]) << 9);
          g::store_u16(cand + 2 + 2 * (g0 + l), static_cast<uint16_t>(q));
        }
      }
      cand[66 + ib] = static_cast<uint8_t>(scales);
    }
    if (err < best_err) {
      best_err = err;
      std::memcpy(blk, cand, g::kIq2xsBytes);
    }
  }
}

/// Runs fn(block) for block in [0, n) on up to hardware_concurrency threads (blocks are
/// independent, so the result does not depend on the thread count).
template <typename Fn>
void parallel_blocks(int64_t n, Fn fn) {
  const int64_t hw = std::max(1u, std::thread::hardware_concurrency());
  const int64_t nt = std::min<int64_t>({hw, 32, (n + 15) / 16});
  if (nt <= 1) {
    for (int64_t b = 0; b < n; ++b) fn(b);
    return;
  }
  std::vector<std::thread> threads;
  threads.reserve(nt);
  for (int64_t t = 0; t < nt; ++t)
    threads.emplace_back([&, t] {
      for (int64_t b = n * t / nt; b < n * (t + 1) / nt; ++b) fn(b);
    });
  for (auto& th : threads) th.join();
}

void check_iq2_args(const char* op, const float* x, int64_t rows, int64_t k, const uint8_t* out) {
  B12X_CHECK_ARG(rows >= 0 && k >= 0, op, ": rows=", rows, " k=", k, " must be >= 0");
  B12X_CHECK_ARG(k % 256 == 0, op, ": k=", k,
                 " is not a whole number of IQ2 blocks (256 values; partial blocks are not "
                 "supported)");
  B12X_CHECK_ARG(rows * k == 0 || (x != nullptr && out != nullptr), op, ": x or blocks is null");
  for (int64_t i = 0; i < rows * k; ++i)
    B12X_CHECK_ARG(std::isfinite(x[i]), op, ": x[", i, "]=", x[i],
                   " is not finite (the IQ2 encoder needs finite input)");
}

}  // namespace

void quantize_iq2_xxs(const float* x, int64_t rows, int64_t k, uint8_t* blocks) {
  check_iq2_args("quantize_iq2_xxs", x, rows, k, blocks);
  classes_xxs();  // initialise the shared tables before the workers start
  parallel_blocks(rows * k / 256, [&](int64_t b) {
    encode_iq2_xxs_block(x + 256 * b, blocks + g::kIq2xxsBytes * b);
  });
}

void quantize_iq2_xs(const float* x, int64_t rows, int64_t k, uint8_t* blocks) {
  check_iq2_args("quantize_iq2_xs", x, rows, k, blocks);
  classes_xs();
  parallel_blocks(rows * k / 256, [&](int64_t b) {
    encode_iq2_xs_block(x + 256 * b, blocks + g::kIq2xsBytes * b);
  });
}

}  // namespace b12x::formats
