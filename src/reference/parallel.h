// Row-parallel loops for the CPU references: the fp64 reference of a large GEMM is the slowest part
// of the GPU tests (M = 3000, N = 264, K = 512 is 0.4 G multiply-adds per case), and every output
// row is independent, so rows are dealt to threads in contiguous blocks. Each row is still summed
// by one thread in the original order, so results are identical to the serial loop.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace b12x::reference {

// Calls f(row) for row in [0, rows), spread over the machine's hardware threads when the work
// (rows x cost_per_row multiply-adds) is large enough to pay for starting threads.
template <class F>
void parallel_rows(int64_t rows, int64_t cost_per_row, F&& f) {
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t want = std::min<int64_t>({hw, rows, rows * cost_per_row / (int64_t{1} << 20)});
  if (want <= 1) {
    for (int64_t r = 0; r < rows; ++r) f(r);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(want));
  for (int64_t t = 0; t < want; ++t) {
    const int64_t r0 = rows * t / want, r1 = rows * (t + 1) / want;
    pool.emplace_back([r0, r1, &f] {
      for (int64_t r = r0; r < r1; ++r) f(r);
    });
  }
  for (auto& th : pool) th.join();
}

}  // namespace b12x::reference
