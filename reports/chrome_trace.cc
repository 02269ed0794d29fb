#include "reports/chrome_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

namespace overlapprof {
namespace {

// Thread ids inside a rank's process: GPU streams at kStreamTid + stream index (overflow lanes
// at kOverflowTid + ...), the iteration track at kIterTid; host threads keep their own tid.
constexpr int64_t kStreamTid = 1'000'000'000;
constexpr int64_t kOverflowTid = 1'500'000'000;
constexpr int64_t kIterTid = 1'999'999'999;
// pids of inputs without a (unique) rank: kOtherPid + input index.
constexpr int64_t kOtherPid = 100'000'000;

std::string Quote(std::string_view s) { return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

// ns since `base` as µs with 3 decimals, exactly (no floating point).
std::string Us(int64_t t, int64_t base) {
  int64_t d = t - base;
  const char* sign = d < 0 ? "-" : "";
  if (d < 0) d = -d;
  return fmt::format("{}{}.{:03d}", sign, d / 1000, static_cast<int>(d % 1000));
}

// Flow ids are global in the file: the input index in the high bits, the correlation id in the
// low 40 (ids stay below 2^53, exact in JavaScript, for up to 8192 ranks).
int64_t FlowId(size_t file, int64_t correlation) {
  return (static_cast<int64_t>(file) << 40) | (correlation & ((int64_t{1} << 40) - 1));
}

class Writer {
 public:
  Writer(std::ostream& out, int64_t base) : out_(out), base_(base) {}
  void Event(const std::string& body) {
    out_ << (first_ ? "\n" : ",\n") << body;
    first_ = false;
  }
  int64_t base() const { return base_; }

 private:
  std::ostream& out_;
  int64_t base_;
  bool first_ = true;
};

}  // namespace

Status WriteChromeTrace(const std::vector<std::string>& files, const ImportOptions& options,
                        const ImportFileFn& import, const Summary& summary, std::ostream& out) {
  // The base: the earliest activity or iteration of any rank, from the summary (no second pass).
  // Host calls before it get negative timestamps, which both viewers accept.
  int64_t base = std::numeric_limits<int64_t>::max();
  for (const RankResult& r : summary.ranks)
    if (r.whole.end_ns > r.whole.start_ns || r.whole.start_ns > 0) base = std::min(base, r.whole.start_ns);
  for (const IterationResult& it : summary.iterations) base = std::min(base, it.figures.start_ns);
  if (base == std::numeric_limits<int64_t>::max()) base = 0;
  std::unordered_map<int64_t, int> rank_inputs;  // rank -> number of inputs claiming it
  for (const RankResult& r : summary.ranks)
    if (r.rank != kUnknown) ++rank_inputs[r.rank];
  std::unordered_map<std::string, size_t> rank_of_path;
  for (size_t i = 0; i < summary.ranks.size(); ++i) rank_of_path[summary.ranks[i].source_path] = i;

  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"overlapprof\",\"base_time_ns\":" << base
      << "},\"traceEvents\":[";
  Writer w(out, base);
  int64_t moved_total = 0, host_skipped = 0;
  ImportOptions io = options;
  io.store_needs = TraceNeeds::All();
  for (size_t f = 0; f < files.size(); ++f) {
    OVERLAPPROF_ASSIGN_OR_RETURN(RankTrace t, import(files[f], io));
    t.meta.source_path = files[f];
    // pid: the rank, unless unknown or shared with another input (traces of different runs).
    const int64_t pid = t.meta.rank != kUnknown && rank_inputs[t.meta.rank] == 1 ? t.meta.rank
                                                                                 : kOtherPid + static_cast<int64_t>(f);
    w.Event(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":{}}}}})", pid,
                        Quote(t.meta.rank == kUnknown ? fmt::format("rank ? ({})", files[f])
                              : pid == t.meta.rank        ? fmt::format("rank {}", t.meta.rank)
                                                          : fmt::format("rank {} ({})", t.meta.rank, files[f]))));
    w.Event(fmt::format(R"({{"ph":"M","name":"process_sort_index","pid":{},"tid":0,"args":{{"sort_index":{}}}}})", pid,
                        t.meta.rank != kUnknown ? t.meta.rank : pid));
    std::vector<std::string> names(t.names.size());
    auto name = [&](uint32_t id) -> const std::string& {
      if (names[id].empty()) names[id] = Quote(t.names.Get(id));
      return names[id];
    };
    // Threads: streams (sorted by index), host threads seen in host calls.
    for (size_t s = 0; s < t.streams.size(); ++s) {
      const Stream& st = t.streams[s];
      std::string_view trimmed = st.name;
      while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\t')) trimmed.remove_suffix(1);
      std::string label = !trimmed.empty() ? std::string(trimmed) : fmt::format("stream {}", st.native_id);
      if (st.device != kUnknown) label = fmt::format("GPU {} {}", st.device, label);
      w.Event(fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", pid,
                          kStreamTid + static_cast<int64_t>(s), Quote(label)));
      w.Event(fmt::format(R"({{"ph":"M","name":"thread_sort_index","pid":{},"tid":{},"args":{{"sort_index":{}}}}})",
                          pid, kStreamTid + static_cast<int64_t>(s), 1000 + s));
    }
    w.Event(fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"iterations"}}}})", pid,
                        kIterTid));
    w.Event(fmt::format(R"({{"ph":"M","name":"thread_sort_index","pid":{},"tid":{},"args":{{"sort_index":0}}}})", pid,
                        kIterTid));

    // Host API calls (sorted by start). Calls on one thread nest or follow each other; one that
    // would partly overlap the previous is left out and counted (host_calls_not_nesting).
    std::unordered_map<int64_t, std::vector<int64_t>> host_open;  // tid -> ends of the open slices
    // Host threads get tids 1, 2, ... (in order of their native id, which names them): native
    // ids are arbitrary 32-bit values that could collide with the stream tids.
    std::unordered_map<int64_t, int64_t> host_tid;
    {
      std::vector<int64_t> tids;
      for (const HostCall& h : t.host_calls) tids.push_back(h.tid);
      std::sort(tids.begin(), tids.end());
      tids.erase(std::unique(tids.begin(), tids.end()), tids.end());
      for (int64_t native : tids) {
        const int64_t tid = static_cast<int64_t>(host_tid.size()) + 1;
        host_tid[native] = tid;
        w.Event(fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", pid, tid,
                            Quote(native != kUnknown ? fmt::format("host thread {}", native) : "host thread ?")));
      }
    }
    // Correlation ids that a flow starts from: those of GPU activities (a launch whose work is
    // not in the trace gets no flow, so every flow resolves).
    std::unordered_map<int64_t, bool> flow_source;  // correlation id -> a host call started its flow
    std::unordered_set<int64_t> launched;
    for (const Activity& a : t.activities)
      if (a.correlation_id != kUnknown) launched.insert(a.correlation_id);
    for (const HostCall& h : t.host_calls) {
      const int64_t tid = host_tid[h.tid];
      std::vector<int64_t>& open = host_open[tid];
      while (!open.empty() && open.back() <= h.start_ns) open.pop_back();
      if (!open.empty() && h.end_ns > open.back()) {  // would not nest
        ++host_skipped;
        continue;
      }
      open.push_back(h.end_ns);
      w.Event(fmt::format(R"({{"ph":"X","cat":"cuda_api","name":{},"pid":{},"tid":{},"ts":{},"dur":{},"args":{{"correlation":{}}}}})",
                          name(h.name_id), pid, tid, Us(h.start_ns, base), Us(h.end_ns, h.start_ns),
                          h.correlation_id));
      if (h.correlation_id != kUnknown && launched.count(h.correlation_id) && !flow_source.count(h.correlation_id)) {
        flow_source[h.correlation_id] = true;
        w.Event(fmt::format(R"({{"ph":"s","cat":"launch","name":"launch","id":{},"pid":{},"tid":{},"ts":{}}})",
                            FlowId(f, h.correlation_id), pid, tid, Us(h.start_ns, base)));
      }
    }

    // GPU activities, per stream in time order; an activity that partly overlaps the previous
    // one on its lane moves to the next lane that it fits. Per stream, lanes; per lane, the stack of open slices' ends. A slice fits a lane when it
    // nests inside the innermost open slice there (or none is open).
    std::vector<std::vector<std::vector<int64_t>>> lanes(t.streams.size() + 1);
    std::vector<size_t> order(t.activities.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const Activity &x = t.activities[a], &y = t.activities[b];
      return x.start_ns != y.start_ns ? x.start_ns < y.start_ns : x.end_ns > y.end_ns;  // parents first
    });
    std::map<std::pair<size_t, size_t>, bool> overflow_named;
    for (size_t i : order) {
      const Activity& a = t.activities[i];
      const size_t s = a.stream == kNoIndex ? t.streams.size() : a.stream;
      auto& stream_lanes = lanes[s];
      size_t lane = 0;
      for (; lane < stream_lanes.size(); ++lane) {
        auto& open = stream_lanes[lane];
        while (!open.empty() && open.back() <= a.start_ns) open.pop_back();
        if (open.empty() || a.end_ns <= open.back()) break;
      }
      if (lane == stream_lanes.size()) stream_lanes.emplace_back();
      stream_lanes[lane].push_back(a.end_ns);
      int64_t tid;
      if (lane == 0) {
        tid = kStreamTid + static_cast<int64_t>(s);
      } else {
        ++moved_total;
        tid = kOverflowTid + static_cast<int64_t>(s) * 16 + static_cast<int64_t>(std::min<size_t>(lane, 15));
        if (!overflow_named[{s, lane}]) {
          overflow_named[{s, lane}] = true;
          w.Event(fmt::format(R"x({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"stream {} (overlapping records {})"}}}})x",
                              pid, tid, s < t.streams.size() ? t.streams[s].native_id : -1, lane));
        }
      }
      std::string args = fmt::format(R"("category":"{}")", CategoryName(a.category));
      if (a.correlation_id != kUnknown) args += fmt::format(R"(,"correlation":{})", a.correlation_id);
      if (a.bytes != kUnknown) args += fmt::format(R"(,"bytes":{})", a.bytes);
      if (a.comm_op != kNoIndex && a.comm_op < t.comm_ops.size()) {
        const CommOp& op = t.comm_ops[a.comm_op];
        args += fmt::format(R"(,"op":{},"communicator":{},"seq":{},"comm_rank":{},"comm_nranks":{})", Quote(op.op),
                            Quote(op.communicator), op.seq, op.comm_rank, op.comm_nranks);
        if (op.bytes != kUnknown) {
          args += fmt::format(R"(,"bytes":{})", op.bytes);
          if (a.end_ns > a.start_ns)
            args += fmt::format(R"(,"algbw_GBps":{:.3f})", static_cast<double>(op.bytes) / static_cast<double>(a.end_ns - a.start_ns));
        }
      }
      w.Event(fmt::format(R"({{"ph":"X","cat":"{}","name":{},"pid":{},"tid":{},"ts":{},"dur":{},"args":{{{}}}}})",
                          ActivityKindName(a.kind), name(a.name_id), pid, tid, Us(a.start_ns, base),
                          Us(a.end_ns, a.start_ns), args));
      if (a.correlation_id != kUnknown && flow_source.count(a.correlation_id)) {
        flow_source.erase(a.correlation_id);  // one flow per launch: to its first activity
        w.Event(fmt::format(R"({{"ph":"f","bp":"e","cat":"launch","name":"launch","id":{},"pid":{},"tid":{},"ts":{}}})",
                            FlowId(f, a.correlation_id), pid, tid, Us(a.start_ns, base)));
      }
    }
    // Iterations and their counters, from the summary.
    auto r = rank_of_path.find(files[f]);
    if (r != rank_of_path.end()) {
      for (const IterationResult& it : summary.iterations) {
        if (it.rank_index != r->second) continue;
        const OverlapFigures& fi = it.figures;
        std::string label = it.step != kUnknown ? fmt::format("step {}", it.step) : fmt::format("iteration {}", it.index);
        w.Event(fmt::format(R"({{"ph":"X","cat":"iteration","name":"{}","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"overlap_ratio":{},"exposed_comm_ns":{},"comm_ns":{},"compute_ns":{}}}}})",
                            label, pid, kIterTid, Us(fi.start_ns, base), Us(fi.end_ns, fi.start_ns),
                            fi.overlap_ratio ? fmt::format("{:.4f}", *fi.overlap_ratio) : "null", fi.exposed_comm_ns,
                            fi.comm_ns, fi.compute_ns));
        w.Event(fmt::format(R"({{"ph":"C","name":"overlap %","pid":{},"tid":0,"ts":{},"args":{{"overlap %":{:.2f}}}}})", pid,
                            Us(fi.start_ns, base), fi.overlap_ratio ? 100 * *fi.overlap_ratio : 0.0));
        w.Event(fmt::format(R"x({{"ph":"C","name":"exposed comm (ms)","pid":{},"tid":0,"ts":{},"args":{{"exposed comm (ms)":{:.3f}}}}})x",
                            pid, Us(fi.start_ns, base), static_cast<double>(fi.exposed_comm_ns) / 1e6));
      }
    }
  }
  out << "\n],\"overlapprof\":{\"overflow_slices\":" << moved_total << ",\"host_calls_not_nesting\":" << host_skipped
      << "}}\n";
  if (!out) return MakeError(StatusCode::kIo, "write failed");
  return OkStatus();
}

}  // namespace overlapprof
