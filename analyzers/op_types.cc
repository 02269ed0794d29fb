// The per-op-type table: per rank and op family (all-reduce, all-gather, reduce-scatter,
// broadcast, reduce, p2p, all-to-all), count, bytes, GPU time, exposed time and bandwidth.
// Section "op_types" of the JSON summary (docs/analyzers.md).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

#include "analyzers/analyzer.h"
#include "analyzers/comm_ops.h"
#include "analyzers/overlap.h"

namespace overlapprof {
namespace {

class OpTypesAnalyzer : public Analyzer {
 public:
  std::string_view name() const override { return "op_types"; }

  Status AnalyzeRank(const RankTrace& t, size_t rank_index, const AnalysisOptions&, Summary& summary) override {
    const RankDerived* d = summary.current.get();
    if (!d || d->rank_index != rank_index) return MakeError(StatusCode::kInternal, "op_types: no derived data for rank");
    struct Row {
      int64_t count = 0, bytes = 0, bytes_known = 0, time_ns = 0, exposed_ns = 0, small = 0;
      int64_t timed_bytes = 0, timed_ns = 0;  // ops with known size, for the bandwidth
      double bus_weighted = 0;                // sum of size * bus factor over those
    };
    std::map<Collective, Row> rows;
    for (const OpSpan& o : d->ops) {
      Row& r = rows[o.family];
      ++r.count;
      r.time_ns += o.busy_ns;
      r.exposed_ns += o.exposed_ns();
      const int64_t size = SizeBytes(t, o);
      if (size != kUnknown) {
        r.bytes += size;
        ++r.bytes_known;
        if (size < (int64_t{1} << 20)) ++r.small;
        if (o.busy_ns > 0) {
          r.timed_bytes += size;
          r.timed_ns += o.busy_ns;
          r.bus_weighted += static_cast<double>(size) * BusFactor(o.family, o.nranks);
        }
      }
    }
    if (!summary.op_types) summary.op_types.emplace();
    summary.NoteSection("op_types");
    // The rows in the order of their families' names.
    std::vector<std::pair<std::string_view, const std::pair<const Collective, Row>*>> by_name;
    for (const auto& e : rows) by_name.emplace_back(OpFamilyName(e.first), &e);
    std::sort(by_name.begin(), by_name.end());
    for (const auto& [name, e] : by_name) {
      const auto& [op, r] = *e;
      OpTypeRow j;
      j.rank = d->rank;
      j.op = op;
      j.count = r.count;
      if (r.bytes_known == r.count) j.bytes = r.bytes;
      j.time_ns = r.time_ns;
      j.exposed_ns = r.exposed_ns;
      if (r.time_ns > 0) j.exposed_fraction = std::round(10000.0 * r.exposed_ns / r.time_ns) / 10000.0;
      // Bandwidth over the ops of known size: bytes / GPU time (GB/s = bytes/ns); bus bandwidth
      // weights each op's size by its nccl-tests factor.
      if (r.timed_ns > 0) {
        j.algbw_GBps = std::round(1000.0 * r.timed_bytes / r.timed_ns) / 1000.0;
        j.busbw_GBps = std::round(1000.0 * r.bus_weighted / r.timed_ns) / 1000.0;
      }
      j.ops_under_1MiB = r.small;
      summary.op_types->push_back(std::move(j));
    }
    return OkStatus();
  }
};

}  // namespace

std::unique_ptr<Analyzer> MakeOpTypesAnalyzer() { return std::make_unique<OpTypesAnalyzer>(); }

}  // namespace overlapprof
