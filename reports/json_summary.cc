// The JSON summary: "overlapprof.summary/1". Stable: keys are only ever added within a
// schema major version, never renamed or removed, and their meaning never changes.
#include <cmath>

#include "overlapprof/version.h"
#include "reports/report.h"

namespace overlapprof {

namespace {

using Json = nlohmann::ordered_json;

Json OptInt(int64_t v) { return v == kUnknown ? Json(nullptr) : Json(v); }
Json OptStr(const std::string& s) { return s.empty() ? Json(nullptr) : Json(s); }
// Ratios are fractions rounded to 4 decimals (0.01 percentage point).
Json Ratio(const std::optional<double>& r) {
  if (!r) return nullptr;
  return std::round(*r * 10000.0) / 10000.0;
}

// The figures shared by rank and iteration entries, after the leading keys.
void PutFigures(Json& j, const OverlapFigures& f, bool with_window) {
  if (with_window) {
    j["start_ns"] = f.start_ns;
    j["end_ns"] = f.end_ns;
  }
  j["wall_ns"] = f.wall_ns;
  j["busy_ns"] = f.busy_ns;
  j["idle_ns"] = f.idle_ns;
  j["memory_ns"] = f.memory_ns;
  j["achievable_ratio"] = Ratio(f.achievable_ratio);
  j["overlap_ratio_reason"] = f.overlap_ratio ? Json(nullptr) : Json(f.ratio_reason);
  j["kernels"] = f.kernels;
  j["comm_kernels"] = f.comm_kernels;
  j["memcpys"] = f.memcpys;
  j["memsets"] = f.memsets;
}

Json DataQuality(const RankResult& r) {
  Json list = Json::array();
  for (size_t i = 0; i < kStatCount; ++i) {
    Stat s = static_cast<Stat>(i);
    int64_t v = r.stats.Get(s);
    if (v == 0) continue;
    const StatInfo& info = GetStatInfo(s);
    list.push_back(Json{{"counter", info.name},
                        {"severity", SeverityName(info.severity)},
                        {"value", v},
                        {"description", info.description}});
  }
  for (const ExtraStat& e : r.extra_stats) {
    if (e.value == 0) continue;
    list.push_back(Json{{"counter", e.name},
                        {"severity", SeverityName(e.severity)},
                        {"value", e.value},
                        {"description", e.description}});
  }
  return list;
}

}  // namespace

nlohmann::ordered_json SummaryToJson(const Summary& s) {
  Json root;
  root["schema"] = kSummarySchema;
  Json ranks = Json::array();
  for (const RankResult& r : s.ranks) {
    const OverlapFigures& f = r.whole;
    Json j;
    j["rank"] = OptInt(r.rank);
    j["comm_ns"] = f.comm_ns;
    j["compute_ns"] = f.compute_ns;
    j["overlap_ns"] = f.overlap_ns;
    j["exposed_comm_ns"] = f.exposed_comm_ns;
    j["overlap_ratio"] = Ratio(f.overlap_ratio);
    j["comm_ops"] = f.comm_ops;
    j["world_size"] = OptInt(r.world_size);
    j["source"] = r.source_path;
    j["format"] = r.source_format;
    j["device"] = OptStr(r.device);
    j["host"] = OptStr(r.host);
    PutFigures(j, f, true);
    j["streams"] = r.streams;
    j["iterations"] = r.iteration_count;
    j["iteration_source"] = r.iteration_source;
    j["warmup_iterations"] = r.warmup_iterations;
    if (r.spread_wall_ns.n > 0) {
      auto spread = [](const Spread& sp, bool ratio) -> Json {
        if (sp.n == 0) return nullptr;
        auto v = [&](double x) -> Json {
          return ratio ? Json(std::round(x * 10000.0) / 10000.0) : Json(static_cast<int64_t>(std::llround(x)));
        };
        return Json{{"median", v(sp.median)}, {"p10", v(sp.p10)}, {"p90", v(sp.p90)}, {"n", sp.n}};
      };
      j["iteration_spread"] = Json{{"overlap_ratio", spread(r.spread_overlap_ratio, true)},
                                   {"exposed_comm_ns", spread(r.spread_exposed_comm_ns, false)},
                                   {"wall_ns", spread(r.spread_wall_ns, false)}};
    } else {
      j["iteration_spread"] = nullptr;
    }
    j["verdict"] = r.verdict;
    j["notices"] = r.notices;
    j["data_quality"] = DataQuality(r);
    ranks.push_back(std::move(j));
  }
  root["ranks"] = std::move(ranks);
  Json iters = Json::array();
  for (const IterationResult& it : s.iterations) {
    const OverlapFigures& f = it.figures;
    Json j;
    j["rank"] = OptInt(it.rank);
    j["index"] = it.index;
    j["start_ns"] = f.start_ns;
    j["end_ns"] = f.end_ns;
    j["overlap_ratio"] = Ratio(f.overlap_ratio);
    j["step"] = OptInt(it.step);
    j["warmup"] = it.warmup;
    j["comm_ns"] = f.comm_ns;
    j["compute_ns"] = f.compute_ns;
    j["overlap_ns"] = f.overlap_ns;
    j["exposed_comm_ns"] = f.exposed_comm_ns;
    j["comm_ops"] = f.comm_ops;
    PutFigures(j, f, false);
    iters.push_back(std::move(j));
  }
  root["iterations"] = std::move(iters);
  root["verdict"] = s.verdict;
  root["data_quality"] = Json{{"errors", s.ErrorCounters()}, {"warnings", s.WarningCounters()}};
  root["tool"] = Json{{"name", "overlapprof"}, {"version", kToolVersion}};
  for (const auto& [k, v] : s.sections.items()) root[k] = v;
  return root;
}

namespace {
class JsonReport : public ReportWriter {
 public:
  std::string_view name() const override { return "json"; }
  std::string_view description() const override { return "JSON summary (overlapprof.summary/1)"; }
  Status Write(const Summary& s, const ReportOptions&, std::ostream& out) override {
    out << SummaryToJson(s).dump(2) << "\n";
    if (!out) return MakeError(StatusCode::kIo, "write failed");
    return OkStatus();
  }
};
}  // namespace

std::unique_ptr<ReportWriter> MakeJsonReport() { return std::make_unique<JsonReport>(); }

}  // namespace overlapprof
