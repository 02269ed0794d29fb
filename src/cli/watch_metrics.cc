// The watcher's figures and their Prometheus exposition (watch_metrics.h, docs/watch.md).
#include "src/cli/watch_metrics.h"

#include "analyzers/comm_ops.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>

#include <map>
#include <cmath>
#include <tuple>

namespace overlapprof {

StatusOr<ListenAddress> ParseListenAddress(std::string_view value) {
  auto bad = [&](std::string_view why) {
    return MakeError(StatusCode::kInvalidArgument,
                     "--watch-listen {}: {} (expected IPV4:PORT, e.g. 127.0.0.1:9464; port 0 picks a free one)",
                     value, why);
  };
  const size_t colon = value.rfind(':');
  if (colon == std::string_view::npos) return bad("no port");
  ListenAddress a;
  a.host = std::string(value.substr(0, colon));
  const std::string_view port = value.substr(colon + 1);
  in_addr addr{};
  if (a.host.empty() || ::inet_pton(AF_INET, a.host.c_str(), &addr) != 1) return bad("not an IPv4 address");
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos)
    return bad("not a port number");
  const long p = std::stol(std::string(port));
  if (p > 65535) return bad("port out of range 0-65535");
  a.port = static_cast<uint16_t>(p);
  a.loopback = (ntohl(addr.s_addr) >> 24) == 127;
  return a;
}

std::string PromLabelValue(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

// Every file being written is unfinished; saying so for each live read is noise.
bool LiveOnlyCounter(std::string_view name) {
  return name == "recording_incomplete" || name == "recording_incomplete_large_loss";
}

}  // namespace

void WatchState::Fold(const Summary& summary, WatchPhase phase) {
  // The windows of each rank in the summary, in order (step_breakdown's rows: the split of each
  // window into parts that add up to its wall time).
  std::map<size_t, std::vector<const StepBreakdownIteration*>> windows;
  if (summary.step_breakdown)
    for (const StepBreakdownIteration& it : summary.step_breakdown->iterations) windows[it.rank_index].push_back(&it);
  for (size_t ri = 0; ri < summary.ranks.size(); ++ri) {
    const RankResult& r = summary.ranks[ri];
    WatchFileFigures& f = files_[r.source_path];
    f.rank = r.rank;
    f.host = r.host;
    const std::vector<const StepBreakdownIteration*>& w = windows[ri];
    const int64_t complete = phase == WatchPhase::kEnded ? static_cast<int64_t>(w.size())
                                                         : std::max<int64_t>(0, static_cast<int64_t>(w.size()) - 1);
    int64_t steps = 0, wall = 0, comm = 0, hidden = 0, exposed = 0;
    for (int64_t i = f.next_window; i < complete; ++i) {
      const StepSplit& s = w[static_cast<size_t>(i)]->split;
      const int64_t exposed_all = s.comm_exposed_ns + s.comm_waiting_ns;
      ++steps;
      wall += s.wall_ns;
      comm += s.comm_hidden_ns + exposed_all;
      hidden += s.comm_hidden_ns;
      exposed += exposed_all;
      f.compute_ns += s.compute_only_ns + s.comm_hidden_ns;
      f.waiting_ns += s.comm_waiting_ns;
      f.idle_ns += s.idle_ns;
    }
    if (complete > f.next_window) f.next_window = complete;
    f.steps += steps;
    f.wall_ns += wall;
    f.comm_ns += comm;
    f.hidden_ns += hidden;
    f.exposed_ns += exposed;
    if (steps > 0) {
      f.last_steps = steps;
      f.last_wall_ns = wall;
      f.last_comm_ns = comm;
      f.last_hidden_ns = hidden;
      f.last_exposed_ns = exposed;
    }
    f.op_types.clear();
    if (summary.op_types)
      for (const OpTypeRow& row : *summary.op_types)
        if (row.rank == r.rank) f.op_types.push_back(row);
    f.counters.clear();
    for (size_t s = 0; s < kStatCount; ++s) {
      const StatInfo& info = GetStatInfo(static_cast<Stat>(s));
      const int64_t v = r.stats.Get(static_cast<Stat>(s));
      if (v != 0 && !(phase == WatchPhase::kRecording && LiveOnlyCounter(info.name)))
        f.counters.emplace_back(std::string(info.name), v);
    }
  }
}

namespace {

double Seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

// One metric family: its HELP and TYPE lines, then its samples. Values are printed exactly
// enough to give back the integer ns they came from (seconds with 9 decimals).
class Family {
 public:
  Family(std::string name, std::string_view type, std::string_view help)
      : name_(std::move(name)), type_(type), help_(help) {}
  void Add(const std::string& labels, double value, bool ns_exact = false) {
    samples_ += name_;
    if (!labels.empty()) samples_ += "{" + labels + "}";
    samples_ += ns_exact ? fmt::format(" {:.9f}\n", value) : fmt::format(" {}\n", value);
  }
  void AddInt(const std::string& labels, int64_t value) {
    samples_ += name_;
    if (!labels.empty()) samples_ += "{" + labels + "}";
    samples_ += fmt::format(" {}\n", value);
  }
  // HELP text escapes backslash and newline (the text format's rule).
  void WriteTo(std::string& out) const {
    std::string help;
    for (char c : help_) help += c == '\\' ? std::string("\\\\") : c == '\n' ? std::string("\\n") : std::string(1, c);
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name_, help, name_, type_);
    out += samples_;
  }

 private:
  std::string name_, type_, help_, samples_;
};

struct RankKey {
  int64_t rank;
  std::string host;
  bool operator<(const RankKey& o) const { return std::tie(rank, host) < std::tie(o.rank, o.host); }
};

std::string RankLabels(const RankKey& k) {
  return fmt::format("rank=\"{}\",host=\"{}\"", k.rank == kUnknown ? std::string("unknown") : std::to_string(k.rank),
                     PromLabelValue(k.host));
}

}  // namespace

std::string WatchState::Exposition(const WatchHealth& health) const {
  // Files of the same rank and host (a restarted rank) add up.
  struct Sum {
    int64_t steps = 0, wall = 0, compute = 0, comm = 0, hidden = 0, exposed = 0, waiting = 0, idle = 0;
    int64_t last_steps = 0, last_wall = 0, last_comm = 0, last_hidden = 0, last_exposed = 0;
    int64_t errors = 0, warnings = 0;
    std::map<std::string, int64_t> counters;
    struct Op {
      int64_t count = 0, time = 0, exposed = 0;
      int64_t bytes = 0;
      bool bytes_known = true;
      double bus_weighted = 0, alg_weighted = 0;  // bandwidth (bytes/ns) x time, to average by time
      int64_t timed = 0;
    };
    std::map<std::string, Op> ops;
  };
  std::map<RankKey, Sum> sums;
  for (const auto& [path, f] : files_) {
    Sum& s = sums[RankKey{f.rank, f.host}];
    s.steps += f.steps;
    s.wall += f.wall_ns;
    s.compute += f.compute_ns;
    s.comm += f.comm_ns;
    s.hidden += f.hidden_ns;
    s.exposed += f.exposed_ns;
    s.waiting += f.waiting_ns;
    s.idle += f.idle_ns;
    s.last_steps += f.last_steps;
    s.last_wall += f.last_wall_ns;
    s.last_comm += f.last_comm_ns;
    s.last_hidden += f.last_hidden_ns;
    s.last_exposed += f.last_exposed_ns;
    for (const auto& [name, v] : f.counters) {
      s.counters[name] += v;
      if (auto st = FindStat(name)) {
        const Severity sev = GetStatInfo(*st).severity;
        if (sev == Severity::kError) s.errors += v;
        if (sev == Severity::kWarning) s.warnings += v;
      }
    }
    for (const OpTypeRow& row : f.op_types) {
      Sum::Op& o = s.ops[std::string(OpFamilyName(row.op))];
      o.count += row.count;
      o.time += row.time_ns;
      o.exposed += row.exposed_ns;
      if (row.bytes) {
        o.bytes += *row.bytes;
      } else {
        o.bytes_known = false;
      }
      if (row.busbw_GBps && row.algbw_GBps && row.time_ns > 0) {
        o.bus_weighted += *row.busbw_GBps * static_cast<double>(row.time_ns);
        o.alg_weighted += *row.algbw_GBps * static_cast<double>(row.time_ns);
        o.timed += row.time_ns;
      }
    }
  }

  Family steps("overlapprof_steps_total", "counter", "Iterations (steps) completed and analyzed, per rank.");
  Family wall("overlapprof_step_seconds_total", "counter", "Wall time of the completed steps (GPU timeline).");
  Family compute("overlapprof_compute_seconds_total", "counter", "Time compute kernels ran in the completed steps (union).");
  Family comm("overlapprof_comm_seconds_total", "counter", "Time communication ran in the completed steps (union).");
  Family hidden("overlapprof_comm_hidden_seconds_total", "counter",
                "Communication time overlapped by compute in the completed steps.");
  Family exposed("overlapprof_comm_exposed_seconds_total", "counter",
                 "Communication time not overlapped by compute in the completed steps (transfer and waiting).");
  Family waiting("overlapprof_comm_waiting_seconds_total", "counter",
                 "Part of the exposed communication spent waiting for another rank to arrive.");
  Family idle("overlapprof_gpu_idle_seconds_total", "counter", "Time the GPU ran nothing in the completed steps.");
  Family step_g("overlapprof_step_seconds", "gauge", "Mean step time over the steps completed in the last interval that completed any.");
  Family hidden_g("overlapprof_comm_hidden_ratio", "gauge",
                  "Share of communication time hidden by compute, over the steps completed in the last interval (0-1).");
  Family exposed_g("overlapprof_comm_exposed_ratio", "gauge",
                   "Exposed communication over step time, over the steps completed in the last interval (0-1).");
  Family op_count("overlapprof_comm_ops_total", "counter", "Communication operations recorded so far, per op family.");
  Family op_bytes("overlapprof_comm_op_bytes_total", "counter",
                  "Bytes of the communication operations recorded so far, per op family (NCCL's message size).");
  Family op_time("overlapprof_comm_op_seconds_total", "counter",
                 "GPU execution time of the communication operations recorded so far, per op family.");
  Family op_exposed("overlapprof_comm_op_exposed_seconds_total", "counter",
                    "Execution time of the communication operations not overlapped by compute, per op family.");
  Family op_busbw("overlapprof_comm_op_bus_bandwidth_bytes_per_second", "gauge",
                  "Bus bandwidth (nccl-tests factors) of the op family over the recording so far, time-weighted.");
  Family op_algbw("overlapprof_comm_op_algorithm_bandwidth_bytes_per_second", "gauge",
                  "Algorithm bandwidth (bytes / execution time) of the op family over the recording so far.");
  Family dq_err("overlapprof_data_quality_errors", "gauge", "Sum of the error-severity data-quality counters (lost data).");
  Family dq_warn("overlapprof_data_quality_warnings", "gauge", "Sum of the warning-severity data-quality counters.");
  std::map<std::string, Family> dq;  // one family per counter seen, by name

  for (const auto& [key, s] : sums) {
    const std::string l = RankLabels(key);
    steps.AddInt(l, s.steps);
    wall.Add(l, Seconds(s.wall), true);
    compute.Add(l, Seconds(s.compute), true);
    comm.Add(l, Seconds(s.comm), true);
    hidden.Add(l, Seconds(s.hidden), true);
    exposed.Add(l, Seconds(s.exposed), true);
    waiting.Add(l, Seconds(s.waiting), true);
    idle.Add(l, Seconds(s.idle), true);
    if (s.last_steps > 0) {
      step_g.Add(l, Seconds(s.last_wall) / static_cast<double>(s.last_steps));
      if (s.last_comm > 0) hidden_g.Add(l, static_cast<double>(s.last_hidden) / static_cast<double>(s.last_comm));
      if (s.last_wall > 0) exposed_g.Add(l, static_cast<double>(s.last_exposed) / static_cast<double>(s.last_wall));
    }
    for (const auto& [op, o] : s.ops) {
      const std::string lo = l + ",op=\"" + PromLabelValue(op) + "\"";
      op_count.AddInt(lo, o.count);
      if (o.bytes_known) op_bytes.AddInt(lo, o.bytes);
      op_time.Add(lo, Seconds(o.time), true);
      op_exposed.Add(lo, Seconds(o.exposed), true);
      if (o.timed > 0) {
        op_busbw.AddInt(lo, std::llround(o.bus_weighted / static_cast<double>(o.timed) * 1e9));
        op_algbw.AddInt(lo, std::llround(o.alg_weighted / static_cast<double>(o.timed) * 1e9));
      }
    }
    dq_err.AddInt(l, s.errors);
    dq_warn.AddInt(l, s.warnings);
    for (const auto& [name, v] : s.counters) {
      auto it = dq.find(name);
      if (it == dq.end()) {
        const auto st = FindStat(name);
        const std::string help = st ? fmt::format("Data-quality counter {} ({}): {}", name,
                                                  SeverityName(GetStatInfo(*st).severity), GetStatInfo(*st).description)
                                    : "Data-quality counter " + name;
        it = dq.emplace(name, Family("overlapprof_data_quality_" + name, "gauge", help)).first;
      }
      it->second.AddInt(l, v);
    }
  }

  std::string out;
  for (const Family* f : {&steps, &wall, &compute, &comm, &hidden, &exposed, &waiting, &idle, &step_g, &hidden_g,
                          &exposed_g, &op_count, &op_bytes, &op_time, &op_exposed, &op_busbw, &op_algbw, &dq_err,
                          &dq_warn})
    f->WriteTo(out);
  for (const auto& [name, f] : dq) f.WriteTo(out);
  Family analyses("overlapprof_watch_analyses_total", "counter", "Analyses of the rank files the watcher made.");
  Family failures("overlapprof_watch_analysis_failures_total", "counter", "Analyses that failed (the figures kept their last values).");
  Family duration("overlapprof_watch_analysis_duration_seconds", "gauge", "How long the last analysis took.");
  Family success("overlapprof_watch_last_success_timestamp_seconds", "gauge",
                 "Unix time at which the last analysis that succeeded ended (0: none yet).");
  Family files("overlapprof_watch_rank_files", "gauge", "Rank files in the last analysis.");
  analyses.AddInt("", health.analyses);
  failures.AddInt("", health.failures);
  duration.Add("", health.last_analysis_seconds);
  success.Add("", health.last_success_unix_seconds);
  files.AddInt("", health.rank_files);
  for (const Family* f : {&analyses, &failures, &duration, &success, &files}) f->WriteTo(out);
  return out;
}

}  // namespace overlapprof
