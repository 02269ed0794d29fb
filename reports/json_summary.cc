// The JSON summary: "overlapprof.summary/1". Stable: keys are only ever added within a
// schema major version, never renamed or removed, and their meaning never changes.
#include <cmath>

#include "analyzers/comm_ops.h"
#include "overlapprof/version.h"
#include "reports/interference_report.h"
#include "reports/report.h"
#include "reports/what_if_report.h"
#include "src/trace/collective.h"

namespace overlapprof {

namespace {

using Json = nlohmann::ordered_json;

// An object with room for `keys` members. ordered_json keeps members in a vector of
// pair<const string, json>: growing it copies every key (const, so not movable), and the big
// tables (buckets, collectives, iterations) are tens of thousands of rows. The counts are the
// members each builder writes; a wrong count costs only a reallocation.
Json Obj(size_t keys) {
  Json j = Json::object();
  j.get_ref<Json::object_t&>().reserve(keys);
  return j;
}

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

template <typename T>
Json Opt(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

Json OpTypesJson(const std::vector<OpTypeRow>& rows) {
  Json out = Json::array();
  for (const OpTypeRow& r : rows) {
    Json j = Obj(10);
    j["rank"] = OptInt(r.rank);
    j["op"] = std::string(OpFamilyName(r.op));
    j["count"] = r.count;
    j["bytes"] = Opt(r.bytes);
    j["time_ns"] = r.time_ns;
    j["exposed_ns"] = r.exposed_ns;
    j["exposed_fraction"] = Opt(r.exposed_fraction);
    j["algbw_GBps"] = Opt(r.algbw_GBps);
    j["busbw_GBps"] = Opt(r.busbw_GBps);
    j["ops_under_1MiB"] = r.ops_under_1MiB;
    out.push_back(std::move(j));
  }
  return out;
}

// Findings identical across ranks are one entry: `rank` the lowest of them, `ranks` all of them.
Json FindingsJson(const std::vector<Finding>& findings) {
  Json out = Json::array();
  for (const GroupedFinding& g : GroupFindings(findings)) {
    const Finding& f = *g.first;
    Json j = Obj(13);
    j["analyzer"] = f.analyzer;
    j["rank"] = g.ranks.empty() ? OptInt(f.rank) : Json(g.ranks.front());
    j["ranks"] = g.ranks;
    j["severity"] = SeverityName(f.severity);
    j["message"] = f.message;
    out.push_back(std::move(j));
  }
  return out;
}

// The parts of a split, then (with `fractions`) each part as a fraction of the wall time (4
// decimals; null without wall time).
void PutSplit(Json& j, const StepSplit& s, bool fractions = true) {
  j["wall_ns"] = s.wall_ns;
  j["compute_only_ns"] = s.compute_only_ns;
  j["comm_hidden_ns"] = s.comm_hidden_ns;
  j["comm_exposed_ns"] = s.comm_exposed_ns;
  j["comm_waiting_ns"] = s.comm_waiting_ns;
  j["memory_only_ns"] = s.memory_only_ns;
  j["idle_ns"] = s.idle_ns;
  if (!fractions) return;
  auto frac = [&](int64_t ns) -> Json {
    if (s.wall_ns <= 0) return nullptr;
    return Ratio(static_cast<double>(ns) / static_cast<double>(s.wall_ns));
  };
  j["fractions"] = Json{{"compute_only", frac(s.compute_only_ns)}, {"comm_hidden", frac(s.comm_hidden_ns)},
                        {"comm_exposed", frac(s.comm_exposed_ns)}, {"comm_waiting", frac(s.comm_waiting_ns)},
                        {"memory_only", frac(s.memory_only_ns)},   {"idle", frac(s.idle_ns)}};
}

Json WaitedForJson(const std::vector<std::pair<int64_t, int64_t>>& waited) {
  Json out = Json::array();
  for (const auto& [rank, ns] : waited) out.push_back(Json{{"rank", rank}, {"exposed_wait_ns", ns}});
  return out;
}

Json StepBreakdownJson(const StepBreakdown& b, const Summary& s) {
  Json out;
  // The step time per iteration: wall over steady iterations (null when some rank has none).
  int64_t run_iterations = 0;
  bool all_iterations = !b.ranks.empty();
  for (const StepBreakdownRank& r : b.ranks) {
    run_iterations += r.iterations;
    all_iterations = all_iterations && r.iterations > 0;
  }
  Json run = Obj(5);
  run["ranks"] = b.ranks.size();
  run["iterations"] = run_iterations;
  run["step_ns"] = all_iterations ? Json(b.run.wall_ns / run_iterations) : Json(nullptr);
  PutSplit(run, b.run);
  run["waited_for"] = WaitedForJson(b.run_waited_for);
  run["verdict"] = s.verdict;
  out["run"] = std::move(run);
  Json ranks = Json::array();
  for (size_t i = 0; i < b.ranks.size(); ++i) {
    const StepBreakdownRank& r = b.ranks[i];
    Json j = Obj(6);
    j["rank"] = OptInt(r.rank);
    j["basis"] = r.basis;
    j["iterations"] = r.iterations;
    j["step_ns"] = r.iterations > 0 ? Json(r.split.wall_ns / r.iterations) : Json(nullptr);
    PutSplit(j, r.split);
    j["waited_for"] = WaitedForJson(r.waited_for);
    j["verdict"] = i < s.ranks.size() ? Json(s.ranks[i].verdict) : Json(nullptr);
    ranks.push_back(std::move(j));
  }
  out["ranks"] = std::move(ranks);
  Json iters = Json::array();
  for (const StepBreakdownIteration& it : b.iterations) {
    Json j = Obj(4);
    j["rank"] = OptInt(it.rank);
    j["index"] = it.index;
    j["step"] = OptInt(it.step);
    j["warmup"] = it.warmup;
    PutSplit(j, it.split, /*fractions=*/false);  // one row per iteration: the parts only
    iters.push_back(std::move(j));
  }
  out["iterations"] = std::move(iters);
  return out;
}

Json CollectivesSummaryJson(const CollectivesSummary& c) {
  Json cs = Obj(15);
  cs["matched"] = c.matched;
  cs["unmatched"] = c.unmatched;
  cs["listed"] = c.listed;
  cs["mismatched"] = c.mismatched;
  cs["ranks"] = c.ranks;
  cs["ops"] = c.ops;
  cs["p2p_skipped"] = c.p2p_skipped;
  cs["duplicate_keys"] = c.duplicate_keys;
  cs["matched_by"] = Json{{"seq", c.matched_by_seq},
                          {"step_ordinal", c.matched_by_step_ordinal},
                          {"ordinal", c.matched_by_ordinal}};
  if (c.skew_ns)
    cs["skew_ns"] = Json{{"median", c.skew_ns->median}, {"p90", c.skew_ns->p90}, {"max", c.skew_ns->max}};
  else
    cs["skew_ns"] = nullptr;
  cs["straggler_threshold_ns"] = c.straggler_threshold_ns;
  cs["ends_before_last_arrival"] = c.ends_before_last_arrival;
  if (c.plugin_timing)  // only with NCCL profiler plugin data (docs/summary-schema.md)
    cs["timing"] = Json{{"nccl_profiler", c.timed_by_nccl_profiler}, {"kernels_fallback", c.timed_by_kernels_fallback}};
  Json partial = Json::array();
  for (const PartialCommunicator& p : c.partial_communicators)
    partial.push_back(Json{{"communicator", p.communicator}, {"nranks", p.nranks}, {"ranks_present", p.ranks_present}});
  cs["partial_communicators"] = std::move(partial);
  cs["notices"] = c.notices;
  return cs;
}

Json CollectivesJson(const std::vector<ListedCollective>& listed, bool plugin_timing) {
  Json cols = Json::array();
  for (const ListedCollective& l : listed) {
    Json c = Obj(11);
    c["communicator"] = l.communicator;
    c["seq"] = Opt(l.seq);
    c["key"] = l.key;
    c["op"] = std::string(CollectiveName(l.op));
    c["bytes"] = Opt(l.bytes);
    c["ranks"] = l.members.size();
    c["start_ns"] = l.start_ns;
    c["skew_ns"] = l.skew_ns;
    c["last_rank"] = l.last_rank;
    Json w = Json::object(), x = Json::object();
    for (const CollectiveMember& m : l.members) {
      w[std::to_string(m.rank)] = m.wait_ns;
      x[std::to_string(m.rank)] = m.transfer_ns;
    }
    c["wait_ns"] = std::move(w);
    c["transfer_ns"] = std::move(x);
    if (plugin_timing) c["timing"] = l.timing;
    cols.push_back(std::move(c));
  }
  return cols;
}

Json StragglersJson(const std::vector<StragglerRow>& rows) {
  Json out = Json::array();
  for (const StragglerRow& t : rows) {
    Json s = Obj(6);
    s["rank"] = t.rank;
    s["last_arrivals"] = t.last_arrivals;
    s["collectives_counted"] = t.collectives_counted;
    s["last_fraction"] = t.last_fraction;
    s["others_wait_ns"] = t.others_wait_ns;
    s["mean_lateness_ns"] = Opt(t.mean_lateness_ns);
    out.push_back(std::move(s));
  }
  return out;
}

Json ClockOffsetsJson(const std::vector<ClockDomainRow>& rows) {
  Json out = Json::array();
  for (const ClockDomainRow& d : rows) {
    Json c = Obj(7);
    c["domain"] = d.domain;
    c["ranks"] = d.ranks;
    c["reference"] = d.reference;
    c["offset_ns"] = d.offset_ns;
    c["noise_ns"] = Opt(d.noise_ns);
    c["samples"] = d.samples;
    c["applied"] = d.applied;
    out.push_back(std::move(c));
  }
  return out;
}

Json CrossRankRowsJson(const std::vector<CrossRankRow>& rows) {
  Json out = Json::array();
  for (const CrossRankRow& r : rows) {
    Json p = Obj(7);
    p["rank"] = r.rank;
    p["clock_domain"] = r.clock_domain;
    p["collectives"] = r.collectives;
    p["wait_ns"] = r.wait_ns;
    p["transfer_ns"] = r.transfer_ns;
    p["exposed_wait_ns"] = r.exposed_wait_ns;
    p["exposed_comm_ns"] = r.exposed_comm_ns;
    out.push_back(std::move(p));
  }
  return out;
}

Json PointToPointJson(const PointToPoint& p) {
  Json j = Obj(9);
  j["pairs"] = p.pairs;
  j["unpaired_sends"] = p.unpaired_sends;
  j["unpaired_recvs"] = p.unpaired_recvs;
  j["recv_wait_ns"] = p.recv_wait_ns;
  j["bottleneck_rank"] = Opt(p.bottleneck_rank);
  j["bottleneck_waited_on_ns"] = p.bottleneck_waited_on_ns;
  Json ranks = Json::array();
  for (const P2pRankRow& r : p.ranks)
    ranks.push_back(Json{{"rank", r.rank},
                         {"sends", r.sends},
                         {"recvs", r.recvs},
                         {"recv_wait_ns", r.recv_wait_ns},
                         {"waited_on_ns", r.waited_on_ns}});
  j["ranks"] = std::move(ranks);
  Json its = Json::array();
  for (const P2pStepRow& r : p.iterations)
    its.push_back(Json{{"rank", r.rank},
                       {"step", Opt(r.step)},
                       {"recvs", r.recvs},
                       {"recv_wait_ns", r.recv_wait_ns},
                       {"waited_most_on", Opt(r.waited_most_on)}});
  j["iterations"] = std::move(its);
  j["notices"] = p.notices;
  return j;
}

// Whether AnalyzerSection builds `key` from the typed results (not Summary::sections).
bool IsTypedSection(const Summary& s, const std::string& key) {
  if (key == "op_types" || key == "findings" || key == "step_breakdown" || key == "what_if" ||
      key == "interference")
    return true;
  return s.cross_rank && (key == "collectives_summary" || key == "collectives" || key == "stragglers" ||
                          key == "clock_offsets" || key == "cross_rank" || key == "point_to_point");
}

// The analyzer section `key`: from the typed results, else the presentational sections.
// Null when neither has it.
Json AnalyzerSection(const Summary& s, const std::string& key) {
  if (key == "op_types") return s.op_types ? OpTypesJson(*s.op_types) : Json(nullptr);
  if (key == "findings") return FindingsJson(s.findings);
  if (key == "step_breakdown") return s.step_breakdown ? StepBreakdownJson(*s.step_breakdown, s) : Json(nullptr);
  if (key == "what_if") return s.what_if ? WhatIfJson(*s.what_if) : Json(nullptr);
  if (key == "interference") return s.interference ? InterferenceJson(*s.interference) : Json(nullptr);
  if (s.cross_rank) {
    const CrossRankResult& c = *s.cross_rank;
    if (key == "collectives_summary") return CollectivesSummaryJson(c.summary);
    if (key == "collectives") return CollectivesJson(c.collectives, c.summary.plugin_timing);
    if (key == "stragglers") return StragglersJson(c.stragglers);
    if (key == "clock_offsets") return ClockOffsetsJson(c.clock_offsets);
    if (key == "cross_rank") return CrossRankRowsJson(c.ranks);
    if (key == "point_to_point") return c.point_to_point ? PointToPointJson(*c.point_to_point) : Json(nullptr);
  }
  auto it = s.sections.find(key);
  return it != s.sections.end() ? *it : Json(nullptr);
}

}  // namespace

SummaryDocument BuildSummaryDocument(const Summary& s) {
  SummaryDocument doc;
  Json& root = doc.root;
  root["schema"] = kSummarySchema;
  Json ranks = Json::array();
  for (const RankResult& r : s.ranks) {
    const OverlapFigures& f = r.whole;
    Json j = Obj(34);
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
    j["comm_rules"] = r.comm_rules;
    if (!r.timing_source.empty()) {  // only with NCCL profiler plugin data (docs/summary-schema.md)
      j["timing_source"] = r.timing_source;
      j["nccl_profiler_ops"] = Json{{"total", r.nccl_profiler_ops}, {"timed", r.nccl_profiler_timed_ops}};
    }
    if (r.overlap_env) j["overlap_env"] = *r.overlap_env;  // only where the recorder stored it
    j["notices"] = r.notices;
    j["data_quality"] = DataQuality(r);
    ranks.push_back(std::move(j));
  }
  root["ranks"] = std::move(ranks);
  Json iters = Json::array();
  for (const IterationResult& it : s.iterations) {
    const OverlapFigures& f = it.figures;
    Json j = Obj(24);
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
  // Analyzer sections in the order they first appeared; the presentational ones by reference.
  auto put = [&](const std::string& k) {
    if (auto it = s.sections.find(k); it != s.sections.end() && !IsTypedSection(s, k)) {
      root[k] = nullptr;
      doc.by_reference.emplace_back(k, &*it);
    } else {
      root[k] = AnalyzerSection(s, k);
    }
  };
  for (const std::string& k : s.section_order) put(k);
  for (const auto& [k, v] : s.sections.items())  // (written without Summary::Section)
    if (!root.contains(k)) put(k);
  return doc;
}

nlohmann::ordered_json SummaryToJson(const Summary& s) {
  SummaryDocument doc = BuildSummaryDocument(s);
  for (const auto& [k, v] : doc.by_reference) doc.root[k] = *v;
  return std::move(doc.root);
}

void DumpSummaryDocument(const SummaryDocument& doc, int indent, Json::error_handler_t handler, std::string& out) {
  const Json::object_t& members = doc.root.get_ref<const Json::object_t&>();
  auto value_of = [&](const std::string& key, const Json& v) -> const Json& {
    if (v.is_null())
      for (const auto& [k, p] : doc.by_reference)
        if (k == key) return *p;
    return v;
  };
  // The top level as nlohmann's serializer writes an object (pretty: "{\n", members at one
  // indent, ",\n" between, "\n}"; compact: no white space), each member's value by it.
  nlohmann::detail::serializer<Json> ser(nlohmann::detail::output_adapter<char, std::string>(out), ' ', handler);
  const bool pretty = indent >= 0;
  const unsigned step = pretty ? static_cast<unsigned>(indent) : 0;
  if (members.empty()) {
    out += "{}";
    return;
  }
  out += pretty ? "{\n" : "{";
  bool first = true;
  for (const auto& [key, v] : members) {
    if (!first) out += pretty ? ",\n" : ",";
    first = false;
    if (pretty) out.append(step, ' ');
    out += Json(key).dump();
    out += pretty ? ": " : ":";
    ser.dump(value_of(key, v), pretty, false, step, step);
  }
  if (pretty) out += "\n";
  out += "}";
}

namespace {
class JsonReport : public ReportWriter {
 public:
  std::string_view name() const override { return "json"; }
  std::string_view description() const override { return "JSON summary (overlapprof.summary/1)"; }
  Status Write(const Summary& s, const ReportOptions& options, std::ostream& out) override {
    // Invalid UTF-8 (paths, host names, kernel names from stores and exports) becomes U+FFFD, as in
    // the HTML and Chrome-trace writers (src/common/utf8.h), instead of throwing.
    std::string text;
    constexpr auto kReplace = Json::error_handler_t::replace;
    if (options.summary_doc) {
      DumpSummaryDocument(*options.summary_doc, 2, kReplace, text);
    } else {
      DumpSummaryDocument(BuildSummaryDocument(s), 2, kReplace, text);
    }
    out << text << "\n";
    if (!out) return MakeError(StatusCode::kIo, "write failed");
    return OkStatus();
  }
};
}  // namespace

std::unique_ptr<ReportWriter> MakeJsonReport() { return std::make_unique<JsonReport>(); }

}  // namespace overlapprof
