#pragma once
// RunViews for the gate's tests (compare_test.cc, comparison_test.cc).
#include <cstdint>
#include <vector>

#include "analyzers/compare.h"

namespace overlapprof::testing {

// A one-rank run whose iterations have these overlap ratios (in %), `comm_per_iter_ns` of
// communication and 10 ms of compute each.
inline RunView View(std::vector<double> ratios_pct, int64_t comm_per_iter_ns = 4000000) {
  RunView v;
  v.source = "x";
  v.ranks = 1;
  for (double r : ratios_pct) {
    v.iter_overlap_ratio.push_back(r / 100);
    int64_t overlap = static_cast<int64_t>(r / 100 * comm_per_iter_ns);
    v.iter_exposed_ns.push_back(static_cast<double>(comm_per_iter_ns - overlap));
    v.iter_comm_ns.push_back(static_cast<double>(comm_per_iter_ns));
    v.iter_compute_ns.push_back(1e7);
    v.comm_ns += comm_per_iter_ns;
    v.overlap_ns += overlap;
    v.exposed_comm_ns += comm_per_iter_ns - overlap;
    v.compute_ns += 10000000;
    ++v.iterations;
  }
  return v;
}

}  // namespace overlapprof::testing
