#include "reports/chrome_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "analyzers/overlap.h"
#include "src/common/file_key_map.h"
#include "reports/report.h"

namespace overlapprof {

size_t LanePacker::Place(int64_t start, int64_t end, size_t max_lanes) {
  size_t lane = 0;
  for (; lane < open_.size() && lane < max_lanes; ++lane) {
    std::vector<int64_t>& open = open_[lane];
    while (!open.empty() && open.back() <= start) open.pop_back();
    if (open.empty() || end <= open.back()) break;
  }
  if (lane >= max_lanes) return kNone;
  if (lane == open_.size()) open_.emplace_back();
  open_[lane].push_back(end);
  return lane;
}

StatusOr<TraceSelection> ParseTraceIterations(const std::string& spec) {
  TraceSelection sel;
  if (spec.empty()) return sel;
  if (spec == "all") {
    sel.all = true;
    return sel;
  }
  auto bad = [&] {
    return MakeError(StatusCode::kInvalidArgument,
                     "--trace-iterations: expected 'all' or 0-based iteration indices like 0,5,10-12, not '{}'", spec);
  };
  auto number = [](std::string_view s, int64_t& v) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && p == s.data() + s.size() && v >= 0;
  };
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string_view item(spec.data() + pos, comma - pos);
    size_t dash = item.find('-');
    int64_t lo = 0, hi = 0;
    if (dash == std::string_view::npos) {
      if (!number(item, lo)) return bad();
      hi = lo;
    } else if (!number(item.substr(0, dash), lo) || !number(item.substr(dash + 1), hi) || hi < lo || hi - lo > 1'000'000) {
      return bad();
    }
    for (int64_t i = lo; i <= hi; ++i)
      if (std::find(sel.indices.begin(), sel.indices.end(), i) == sel.indices.end()) sel.indices.push_back(i);
    pos = comma + 1;
  }
  return sel;
}

std::vector<size_t> DefaultTraceIterations(const std::vector<IterationSpan>& its) {
  std::vector<size_t> steady;
  for (size_t i = 0; i < its.size(); ++i)
    if (!its[i].warmup) steady.push_back(i);
  if (steady.empty())
    for (size_t i = 0; i < its.size(); ++i) steady.push_back(i);
  if (steady.empty()) return {};
  std::vector<size_t> by_duration = steady;
  auto dur = [&](size_t i) { return its[i].end_ns - its[i].start_ns; };
  std::stable_sort(by_duration.begin(), by_duration.end(), [&](size_t a, size_t b) { return dur(a) < dur(b); });
  std::vector<size_t> out;
  for (size_t i : {by_duration.back(), by_duration[(by_duration.size() - 1) / 2], steady.front()})
    if (std::find(out.begin(), out.end(), i) == out.end()) out.push_back(i);
  return out;
}

namespace {

// Thread ids inside a rank's process: GPU streams at kStreamTid + stream index (overflow lanes
// at kOverflowTid + ...), the iteration track at kIterTid, the exposed-communication track at
// kExposedTid, the input's annotation ranges at kRangeTid + lane; host threads get 1, 2, ...
constexpr int64_t kStreamTid = 1'000'000'000;
constexpr int64_t kOverflowTid = 1'500'000'000;
constexpr int64_t kRangeTid = 1'999'999'900;  // + lane (ranges that partly overlap), < kRangeLanes
constexpr size_t kRangeLanes = 8;
constexpr int64_t kExposedTid = 1'999'999'998;
// NCCL's profiler plugin ops (each op of a fused kernel its own slice): kPluginTid + lane.
constexpr int64_t kPluginTid = 1'999'999'950;
constexpr size_t kPluginLanes = 8;
constexpr int64_t kIterTid = 1'999'999'999;
// pids of inputs without a (unique) rank: kOtherPid + input index.
constexpr int64_t kOtherPid = 100'000'000;
// Bytes kept back from the budget for the file's head, tail and process metadata.
constexpr int64_t kFixedBytes = 4096;
constexpr int64_t kProcessBytes = 512;
// Estimated bytes of an iteration's slice and two counter points.
constexpr int64_t kIterationBytes = 520;

std::string Quote(std::string_view s) {
  return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// ns since `base` as µs with 3 decimals, exactly (no floating point).
template <typename Buffer>
void AppendUs(Buffer& out, int64_t t, int64_t base) {
  int64_t d = t - base;
  if (d < 0) {
    out.push_back('-');
    d = -d;
  }
  char digits[24];
  char* end = fmt::format_to(digits, "{}", d / 1000);
  out.append(digits, end);
  const int frac = static_cast<int>(d % 1000);
  const char three[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                         static_cast<char>('0' + frac % 10)};
  out.append(three, three + 4);
}
std::string Us(int64_t t, int64_t base) {
  std::string b;
  AppendUs(b, t, base);
  return b;
}

// Flow ids are global in the file: the input index in the high bits, the correlation id in the
// low 40 (ids stay below 2^53, exact in JavaScript, for up to 8192 ranks).
int64_t FlowId(size_t input, int64_t correlation) {
  return (static_cast<int64_t>(input) << 40) | (correlation & ((int64_t{1} << 40) - 1));
}

// One rank's events, formatted except for the pid and the timestamp (known only at the end):
// each record is text[begin, end) with the pid inserted at pid_at and the timestamp (µs from
// the base) at ts_at.
struct Record {
  size_t begin = 0, pid_at = 0, ts_at = 0, end = 0;
  int64_t ts_ns = 0;
  bool has_ts = false;
};

struct RankEvents {
  std::string text;
  std::vector<Record> records;
  Record cur;
  int64_t moved = 0, host_skipped = 0, ranges_skipped = 0;

  template <typename... Args>
  void Put(fmt::format_string<Args...> f, Args&&... args) {
    fmt::format_to(std::back_inserter(text), f, std::forward<Args>(args)...);
  }
  void Start() { cur = Record{text.size()}; }
  void Pid() { cur.pid_at = text.size(); }
  void Ts(int64_t t) {
    cur.ts_at = text.size();
    cur.ts_ns = t;
    cur.has_ts = true;
  }
  void Finish() {
    cur.end = text.size();
    records.push_back(cur);
  }
  void Clear() { *this = RankEvents{}; }
};

// What the trace keeps of one rank.
struct RankPlan {
  std::vector<std::pair<int64_t, int64_t>> windows;  // [lo, hi), in priority order; empty with `whole`
  bool whole = true;                                 // everything is kept
  bool cut = false;                                  // a window was cut to the budget
  std::vector<int64_t> kept_iterations;              // their iteration indices (none without iterations)
};

struct RankOut {
  size_t input = 0;
  RankEvents events;
  int64_t iterations = 0, iterations_kept = 0;
  int64_t events_total = 0, events_kept = 0;
  RankPlan plan;
};

// Estimated output bytes per activity / host call (with its flow), indexed in time order, as
// prefix sums: the bytes of the events starting in [lo, hi) are prefix[b] - prefix[a].
struct SizeModel {
  std::vector<int64_t> act_start, act_prefix, host_start, host_prefix, extra_start, extra_prefix;

  // `extra`: start and estimated bytes of the other events (annotation ranges, exposed
  // communication slices), sorted by start.
  SizeModel(const RankTrace& t, const std::vector<size_t>& order, const std::vector<std::pair<int64_t, int64_t>>& extra) {
    extra_prefix.assign(1, 0);
    for (const auto& [start, bytes] : extra) {
      extra_start.push_back(start);
      extra_prefix.push_back(extra_prefix.back() + bytes);
    }
    act_start.reserve(order.size());
    act_prefix.assign(1, 0);
    for (size_t i : order) {
      const Activity& a = t.activities[i];
      // Measured on gen_kineto traces: ~120 bytes besides the name, ~140 more for a comm op's
      // arguments, ~200 for a flow's two ends.
      int64_t b = 125 + static_cast<int64_t>(t.names.Get(a.name_id).size());
      if (a.comm_op != kNoIndex) b += 150;
      if (a.correlation_id != kUnknown) b += 200;  // the flow's start and end
      act_start.push_back(a.start_ns);
      act_prefix.push_back(act_prefix.back() + b);
    }
    host_prefix.assign(1, 0);
    for (const HostCall& h : t.host_calls) {
      host_start.push_back(h.start_ns);
      host_prefix.push_back(host_prefix.back() + 130 + static_cast<int64_t>(t.names.Get(h.name_id).size()));
    }
  }
  static int64_t In(const std::vector<int64_t>& start, const std::vector<int64_t>& prefix, int64_t lo, int64_t hi) {
    size_t a = std::lower_bound(start.begin(), start.end(), lo) - start.begin();
    size_t b = std::lower_bound(start.begin(), start.end(), hi) - start.begin();
    return prefix[std::max(a, b)] - prefix[a];
  }
  int64_t Bytes(int64_t lo, int64_t hi) const {
    return In(act_start, act_prefix, lo, hi) + In(host_start, host_prefix, lo, hi) + In(extra_start, extra_prefix, lo, hi);
  }
  int64_t Total() const { return act_prefix.back() + host_prefix.back() + extra_prefix.back(); }
  // The largest hi in (lo, limit] whose window [lo, hi) stays within `bytes` (at least one
  // activity, so a window is never empty).
  int64_t CutAt(int64_t lo, int64_t limit, int64_t bytes) const {
    int64_t ok = lo, bad = limit;
    if (Bytes(lo, limit) <= bytes) return limit;
    while (bad - ok > 1) {
      int64_t mid = ok + (bad - ok) / 2;
      (Bytes(lo, mid) <= bytes ? ok : bad) = mid;
    }
    return std::max(ok, lo + 1);
  }
};

// a \ b for sorted, disjoint interval lists (unions): the parts of `a` that `b` does not cover.
std::vector<Interval> Minus(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  size_t j = 0;
  for (const Interval& x : a) {
    int64_t start = x.start;
    while (j < b.size() && b[j].end <= start) ++j;
    for (size_t k = j; k < b.size() && b[k].start < x.end; ++k) {
      if (b[k].start > start) out.push_back({start, b[k].start});
      start = std::max(start, b[k].end);
      if (start >= x.end) break;
    }
    if (start < x.end) out.push_back({start, x.end});
  }
  return out;
}

// Chooses the windows of one rank within `share` bytes.
RankPlan PlanRank(const SizeModel& size, const std::vector<IterationSpan>& its, const TraceSelection& sel,
                  int64_t share, int64_t first_ns, int64_t last_ns) {
  RankPlan plan;
  const int64_t iteration_bytes = static_cast<int64_t>(its.size()) * kIterationBytes;
  const bool explicit_list = !sel.indices.empty();
  if (!explicit_list && size.Total() + iteration_bytes <= share) return plan;  // everything fits
  plan.whole = false;
  int64_t left = share - iteration_bytes;
  std::vector<size_t> candidates;
  if (explicit_list) {
    for (int64_t want : sel.indices)
      for (size_t i = 0; i < its.size(); ++i)
        if (its[i].index == want) candidates.push_back(i);
  } else if (sel.all) {
    for (size_t i = 0; i < its.size(); ++i) candidates.push_back(i);
  } else {
    candidates = DefaultTraceIterations(its);
  }
  if (its.empty()) {  // no iterations: the start of the trace, cut to the budget
    if (first_ns < last_ns) {
      plan.windows.push_back({first_ns, size.CutAt(first_ns, last_ns, left)});
      plan.cut = plan.windows.back().second < last_ns;
    }
    return plan;
  }
  for (size_t c : candidates) {
    const IterationSpan& it = its[c];
    const int64_t bytes = size.Bytes(it.start_ns, it.end_ns);
    if (bytes > left) {
      if (plan.windows.empty()) {  // not even one iteration fits: its beginning fills the share
        plan.windows.push_back({it.start_ns, size.CutAt(it.start_ns, it.end_ns, left)});
        plan.cut = true;
        plan.kept_iterations.push_back(it.index);
        break;
      }
      if (!sel.all) continue;  // a smaller one later in the list may still fit
      break;                   // "all": whole iterations from the start, no gaps
    }
    left -= bytes;
    plan.windows.push_back({it.start_ns, it.end_ns});
    plan.kept_iterations.push_back(it.index);
  }
  return plan;
}

bool InWindows(const std::vector<std::pair<int64_t, int64_t>>& w, int64_t start, int64_t end) {
  // The first window ending after `start`; kept when it starts before `end` (or at an instant
  // event's time).
  auto it = std::upper_bound(w.begin(), w.end(), start,
                             [](int64_t t, const std::pair<int64_t, int64_t>& x) { return t < x.second; });
  return it != w.end() && (it->first < end || (start == end && it->first <= start));
}

// A track's metadata for Perfetto: its name (`quoted_name`, a JSON string) and, when
// sort_index >= 0, its place among the rank's tracks.
void NameTrack(RankEvents& ev, int64_t tid, const std::string& quoted_name, int64_t sort_index = -1) {
  ev.Start();
  ev.Put(R"({{"ph":"M","name":"thread_name","pid":)");
  ev.Pid();
  ev.Put(R"(,"tid":{},"args":{{"name":{}}}}})", tid, quoted_name);
  ev.Finish();
  if (sort_index < 0) return;
  ev.Start();
  ev.Put(R"({{"ph":"M","name":"thread_sort_index","pid":)");
  ev.Pid();
  ev.Put(R"(,"tid":{},"args":{{"sort_index":{}}}}})", tid, sort_index);
  ev.Finish();
}

// A stream's row name: "stream N", or "synchronization" for the records of no stream that the
// profiler files under stream id -1 (4294967295 as an unsigned 32-bit id: cudaDeviceSynchronize,
// event waits).
bool IsSyncStream(int64_t native_id) { return native_id == -1 || native_id == 4294967295; }
std::string StreamLabel(int64_t native_id) {
  if (IsSyncStream(native_id)) return "synchronization";
  return fmt::format("stream {}", native_id);
}

// The threads of one rank: its streams, its iteration track, its host threads (returned: their
// tids by native id).
FileKeyMap<int64_t, int64_t> EmitThreads(const RankTrace& t, RankEvents& ev) {
  for (size_t s = 0; s < t.streams.size(); ++s) {
    const Stream& st = t.streams[s];
    std::string_view trimmed = st.name;
    while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\t')) trimmed.remove_suffix(1);
    std::string label = !trimmed.empty() && !IsSyncStream(st.native_id) ? std::string(trimmed) : StreamLabel(st.native_id);
    if (st.device != kUnknown) label = fmt::format("GPU {} {}", st.device, label);
    NameTrack(ev, kStreamTid + static_cast<int64_t>(s), Quote(label), 1000 + static_cast<int64_t>(s));
  }
  NameTrack(ev, kIterTid, Quote("iterations"), 0);
  NameTrack(ev, kExposedTid, Quote("exposed communication"), 1);
  // Host threads get tids 1, 2, ... (in order of their native id, which names them): native
  // ids are arbitrary 32-bit values that could collide with the stream tids.
  FileKeyMap<int64_t, int64_t> host_tid;
  std::vector<int64_t> tids;  // distinct native ids (few), sorted
  int64_t last = 0;
  for (const HostCall& h : t.host_calls) {
    if (!tids.empty() && h.tid == last) continue;
    last = h.tid;
    auto at = std::lower_bound(tids.begin(), tids.end(), h.tid);
    if (at == tids.end() || *at != h.tid) tids.insert(at, h.tid);
  }
  for (int64_t native : tids) {
    const int64_t tid = static_cast<int64_t>(host_tid.size()) + 1;
    host_tid[native] = tid;
    NameTrack(ev, tid, Quote(native != kUnknown ? fmt::format("host thread {}", native) : "host thread ?"));
  }
  return host_tid;
}

// Formats the kept events of one rank.
class RankFormatter {
 public:
  RankFormatter(const RankTrace& t, const std::vector<size_t>& order, size_t input, RankEvents& ev)
      : t_(t), order_(order), input_(input), ev_(ev), names_(t.names.size()) {}

  // The correlation ids of the kept GPU activities (sorted, distinct): flows start only there.
  void SetLaunched(std::vector<int64_t> launched) {
    launched_ = std::move(launched);
    flow_.assign(launched_.size(), kNoFlow);
  }
  bool Launched(int64_t correlation) const {
    return correlation != kUnknown && std::binary_search(launched_.begin(), launched_.end(), correlation);
  }

  // Host API calls (sorted by start). Calls on one thread nest or follow each other; one that
  // would partly overlap the previous is left out and counted (host_calls_not_nesting). A flow
  // starts at each call whose correlation id a kept GPU activity has.
  void HostCalls(const std::vector<uint8_t>& keep_host, const FileKeyMap<int64_t, int64_t>& host_tid) {
    FileKeyMap<int64_t, LanePacker> lanes;  // per host tid
    for (size_t i = 0; i < t_.host_calls.size(); ++i) {
      if (!keep_host[i]) continue;
      const HostCall& h = t_.host_calls[i];
      const int64_t tid = host_tid.at(h.tid);
      if (lanes[tid].Place(h.start_ns, h.end_ns, 1) == LanePacker::kNone) {  // would not nest
        ++ev_.host_skipped;
        continue;
      }
      ev_.Start();
      ev_.Put(R"({{"ph":"X","cat":"cuda_api","name":{},"pid":)", Name(h.name_id));
      ev_.Pid();
      ev_.Put(R"(,"tid":{},"ts":)", tid);
      ev_.Ts(h.start_ns);
      ev_.Put(R"(,"dur":)");
      AppendUs(ev_.text, h.end_ns, h.start_ns);
      if (h.correlation_id != kUnknown) ev_.Put(R"(,"args":{{"correlation":{}}}}})", h.correlation_id);
      else ev_.Put("}}");
      ev_.Finish();
      if (uint8_t* state = Flow(h.correlation_id); state && *state == kNoFlow) {
        *state = kFlowOpen;
        ev_.Start();
        ev_.Put(R"({{"ph":"s","cat":"launch","name":"launch","id":{},"pid":)", FlowId(input_, h.correlation_id));
        ev_.Pid();
        ev_.Put(R"(,"tid":{},"ts":)", tid);
        ev_.Ts(h.start_ns);
        ev_.Put("}}");
        ev_.Finish();
      }
    }
  }

  // GPU activities, per stream in time order; an activity that partly overlaps the previous
  // one on its lane moves to the next lane that it fits (LanePacker).
  void Activities(const std::vector<uint8_t>& keep_act) {
    std::vector<LanePacker> lanes(t_.streams.size() + 1);
    std::map<std::pair<size_t, size_t>, bool> overflow_named;
    for (size_t k = 0; k < order_.size(); ++k) {
      if (!keep_act[k]) continue;
      const Activity& a = t_.activities[order_[k]];
      const size_t s = a.stream == kNoIndex ? t_.streams.size() : a.stream;
      const size_t lane = lanes[s].Place(a.start_ns, a.end_ns);
      int64_t tid = kStreamTid + static_cast<int64_t>(s);
      if (lane > 0) {
        ++ev_.moved;
        tid = kOverflowTid + static_cast<int64_t>(s) * 16 + static_cast<int64_t>(std::min<size_t>(lane, 15));
        if (!overflow_named[{s, lane}]) {
          overflow_named[{s, lane}] = true;
          const std::string stream = s < t_.streams.size() && t_.streams[s].native_id != kUnknown
                                         ? StreamLabel(t_.streams[s].native_id)
                                         : std::string("no stream");
          NameTrack(ev_, tid, Quote(fmt::format("{} (overlapping records {})", stream, lane)));
        }
      }
      ev_.Start();
      ev_.Put(R"({{"ph":"X","cat":"{}","name":{},"pid":)", ActivityKindName(a.kind), Name(a.name_id));
      ev_.Pid();
      ev_.Put(R"(,"tid":{},"ts":)", tid);
      ev_.Ts(a.start_ns);
      ev_.Put(R"(,"dur":)");
      AppendUs(ev_.text, a.end_ns, a.start_ns);
      ev_.Put(R"(,"args":{{)");
      Args(a);
      ev_.Put("}}}}");
      ev_.Finish();
      if (uint8_t* state = Flow(a.correlation_id); state && *state == kFlowOpen) {  // one flow per launch
        *state = kFlowEnded;
        ev_.Start();
        ev_.Put(R"({{"ph":"f","bp":"e","cat":"launch","name":"launch","id":{},"pid":)", FlowId(input_, a.correlation_id));
        ev_.Pid();
        ev_.Put(R"(,"tid":{},"ts":)", tid);
        ev_.Ts(a.start_ns);
        ev_.Put("}}");
        ev_.Finish();
      }
    }
  }

  // The input's host annotation ranges (NVTX, record_function: forward, backward, optimizer,
  // nccl:*), `idx` sorted by start, on the annotation track: nested ranges on one lane, one
  // that partly overlaps another on the next lane (at most kRangeLanes; beyond, counted).
  void Ranges(const std::vector<size_t>& idx) {
    LanePacker lanes;
    std::vector<bool> named(kRangeLanes, false);
    for (size_t i : idx) {
      const Range& g = t_.ranges[i];
      const size_t lane = lanes.Place(g.start_ns, g.end_ns, kRangeLanes);
      if (lane == LanePacker::kNone) {
        ++ev_.ranges_skipped;
        continue;
      }
      const int64_t tid = kRangeTid + static_cast<int64_t>(lane);
      if (!named[lane]) {
        named[lane] = true;
        NameTrack(ev_, tid,
                  Quote(lane == 0 ? std::string("annotations") : fmt::format("annotations (overlapping {})", lane)),
                  2 + static_cast<int64_t>(lane));
      }
      ev_.Start();
      ev_.Put(R"({{"ph":"X","cat":"annotation","name":{},"pid":)", Name(g.name_id));
      ev_.Pid();
      ev_.Put(R"(,"tid":{},"ts":)", tid);
      ev_.Ts(g.start_ns);
      ev_.Put(R"(,"dur":)");
      AppendUs(ev_.text, g.end_ns, g.start_ns);
      ev_.Put("}}");
      ev_.Finish();
    }
  }

  // Exposed communication: the parts of the communication union that no compute covers.
  void Exposed(const std::vector<Interval>& exposed) {
    for (const Interval& x : exposed) {
      ev_.Start();
      ev_.Put(R"({{"ph":"X","cat":"exposed","name":"exposed communication","pid":)");
      ev_.Pid();
      ev_.Put(R"(,"tid":{},"ts":)", kExposedTid);
      ev_.Ts(x.start);
      ev_.Put(R"(,"dur":)");
      AppendUs(ev_.text, x.end, x.start);
      ev_.Put("}}");
      ev_.Finish();
    }
  }

  // The operations NCCL's profiler plugin timed (`idx`: with GPU times, sorted by start), on
  // their own track ("NCCL ops (profiler plugin)"): each op of a fused kernel its own slice;
  // concurrent ones (grouped sends and recvs) on further lanes, at most kPluginLanes (beyond,
  // on the last: viewers then nest them).
  void PluginOps(const std::vector<size_t>& idx) {
    LanePacker lanes;
    std::vector<bool> named(kPluginLanes, false);
    for (size_t i : idx) {
      const NcclPluginOp& p = t_.nccl_plugin_ops[i];
      size_t lane = lanes.Place(p.start_ns, p.end_ns, kPluginLanes);
      if (lane == LanePacker::kNone) lane = kPluginLanes - 1;
      const int64_t tid = kPluginTid + static_cast<int64_t>(lane);
      if (!named[lane]) {
        named[lane] = true;
        NameTrack(ev_, tid,
                  Quote(lane == 0 ? std::string("NCCL ops (profiler plugin)")
                                  : fmt::format("NCCL ops (concurrent {})", lane)),
                  900 + static_cast<int64_t>(lane));
      }
      ev_.Start();
      ev_.Put(R"({{"ph":"X","cat":"nccl_op","name":{},"pid":)", Quote(CollectiveName(p.op)));
      ev_.Pid();
      ev_.Put(R"(,"tid":{},"ts":)", tid);
      ev_.Ts(p.start_ns);
      ev_.Put(R"(,"dur":)");
      AppendUs(ev_.text, p.end_ns, p.start_ns);
      ev_.Put(R"(,"args":{{"source":"nccl_profiler")");
      if (!p.communicator.empty()) ev_.Put(R"(,"communicator":{})", Quote(p.communicator));
      if (p.nccl_seq != kUnknown) ev_.Put(R"(,"nccl_seq":{})", p.nccl_seq);
      if (p.count != kUnknown) ev_.Put(R"(,"count":{})", p.count);
      if (p.bytes != kUnknown) ev_.Put(R"(,"bytes":{})", p.bytes);
      if (p.root_peer != kUnknown) ev_.Put(R"(,"root_peer":{})", p.root_peer);
      if (!p.algorithm.empty()) ev_.Put(R"(,"algorithm":{})", Quote(p.algorithm));
      if (!p.protocol.empty()) ev_.Put(R"(,"protocol":{})", Quote(p.protocol));
      if (p.channels_expected != kUnknown) ev_.Put(R"(,"channels":{})", p.channels_expected);
      if (p.group_id != kUnknown) ev_.Put(R"(,"group":{})", p.group_id);
      if (p.comm_op != kNoIndex && p.comm_op < t_.comm_ops.size() && t_.comm_ops[p.comm_op].seq != kUnknown)
        ev_.Put(R"(,"seq":{})", t_.comm_ops[p.comm_op].seq);
      ev_.Put("}}}}");
      ev_.Finish();
    }
  }

 private:
  const std::string& Name(uint32_t id) {
    if (names_[id].empty()) names_[id] = Quote(t_.names.Get(id));
    return names_[id];
  }

  // The activity's arguments (inside "args":{...}).
  void Args(const Activity& a) {
    ev_.Put(R"("category":"{}")", CategoryName(a.category));
    if (a.correlation_id != kUnknown) ev_.Put(R"(,"correlation":{})", a.correlation_id);
    if (a.bytes != kUnknown) ev_.Put(R"(,"bytes":{})", a.bytes);
    if (a.comm_op != kNoIndex && a.comm_op < t_.comm_ops.size()) {
      const CommOp& op = t_.comm_ops[a.comm_op];
      // Unknown values are left out, not written as -1 or "unknown".
      if (op.op != Collective::kUnknown) ev_.Put(R"(,"op":{})", Quote(CollectiveName(op.op)));
      if (!op.communicator.empty() && op.communicator != "unknown") ev_.Put(R"(,"communicator":{})", Quote(op.communicator));
      if (op.seq != kUnknown) ev_.Put(R"(,"seq":{})", op.seq);
      if (op.comm_rank != kUnknown) ev_.Put(R"(,"comm_rank":{})", op.comm_rank);
      if (op.comm_nranks != kUnknown) ev_.Put(R"(,"comm_nranks":{})", op.comm_nranks);
      if (op.bytes != kUnknown) {
        ev_.Put(R"(,"bytes":{})", op.bytes);
        if (a.end_ns > a.start_ns)
          ev_.Put(R"(,"algbw_GBps":{:.3f})", static_cast<double>(op.bytes) / static_cast<double>(a.end_ns - a.start_ns));
      }
    }
  }

  // The flow state of a correlation id that a kept GPU activity has; null for others (a launch
  // whose work is not in the trace gets no flow, so every flow resolves).
  uint8_t* Flow(int64_t correlation) {
    if (correlation == kUnknown) return nullptr;
    auto at = std::lower_bound(launched_.begin(), launched_.end(), correlation);
    if (at == launched_.end() || *at != correlation) return nullptr;
    return &flow_[static_cast<size_t>(at - launched_.begin())];
  }

  const RankTrace& t_;
  const std::vector<size_t>& order_;
  size_t input_;
  RankEvents& ev_;
  std::vector<std::string> names_;
  static constexpr uint8_t kNoFlow = 0, kFlowOpen = 1, kFlowEnded = 2;
  std::vector<int64_t> launched_;  // correlation ids of the kept GPU activities, sorted, distinct
  std::vector<uint8_t> flow_;      // per launched_ entry: kNoFlow, kFlowOpen (started at its host call), kFlowEnded

};

class ChromeTraceReport : public ReportWriter {
 public:
  std::string_view name() const override { return "chrome-trace"; }
  std::string_view description() const override {
    return "Chrome trace JSON for Perfetto UI / chrome://tracing, within a size budget (docs/chrome-trace.md)";
  }
  TraceNeeds needs() const override {
    TraceNeeds n;
    n.host_calls = true;   // drawn with their launch flows
    n.annotations = true;  // the input's NVTX / record_function ranges, carried over
    return n;
  }

  Status Begin(size_t inputs, const ReportOptions& options) override {
    OVERLAPPROF_ASSIGN_OR_RETURN(selection_, ParseTraceIterations(options.trace_iterations));
    budget_ = options.trace_budget_bytes > 0 ? options.trace_budget_bytes : kChromeTraceDefaultBudget;
    inputs_ = std::max<size_t>(1, inputs);
    share_ = std::max<int64_t>(0, budget_ - kFixedBytes) / static_cast<int64_t>(inputs_) - kProcessBytes;
    ranks_.clear();
    ranks_.reserve(inputs);
    return OkStatus();
  }

  Status ConsumeRank(const RankTrace& t, const RankDerived& derived, size_t rank_index,
                     const Summary& summary) override {
    RankOut r;
    r.input = rank_index;
    std::vector<IterationSpan> its;
    for (const IterationResult& it : summary.iterations)
      if (it.rank_index == rank_index) its.push_back({it.index, it.figures.start_ns, it.figures.end_ns, it.warmup});
    r.iterations = static_cast<int64_t>(its.size());
    // Activities in time order, parents first.
    std::vector<size_t> order(t.activities.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const Activity &x = t.activities[a], &y = t.activities[b];
      return x.start_ns != y.start_ns ? x.start_ns < y.start_ns : x.end_ns > y.end_ns;
    });
    // Exposed communication (comm minus compute) and the host annotation ranges, sorted by start.
    std::vector<Interval> exposed = Minus(derived.sets.comm.intervals(), derived.sets.compute.intervals());
    std::vector<size_t> ranges;
    for (size_t i = 0; i < t.ranges.size(); ++i)
      if (t.ranges[i].kind == RangeKind::kAnnotation && t.ranges[i].end_ns >= t.ranges[i].start_ns) ranges.push_back(i);
    std::stable_sort(ranges.begin(), ranges.end(), [&](size_t a, size_t b) {
      const Range &x = t.ranges[a], &y = t.ranges[b];
      return x.start_ns != y.start_ns ? x.start_ns < y.start_ns : x.end_ns > y.end_ns;
    });
    std::vector<std::pair<int64_t, int64_t>> extra;  // (start, estimated bytes), for the size model
    for (size_t i : ranges) extra.push_back({t.ranges[i].start_ns, 110 + static_cast<int64_t>(t.names.Get(t.ranges[i].name_id).size())});
    for (const Interval& x : exposed) extra.push_back({x.start, 120});
    for (const NcclPluginOp& p : t.nccl_plugin_ops)
      if (p.HasGpuTimes()) extra.push_back({p.start_ns, 260});
    std::stable_sort(extra.begin(), extra.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    const SizeModel size(t, order, extra);
    int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
    for (const Activity& a : t.activities) first = std::min(first, a.start_ns), last = std::max(last, a.end_ns);
    r.plan = PlanRank(size, its, selection_, share_, first, last);
    r.events_total = static_cast<int64_t>(t.activities.size() + t.host_calls.size());
    Format(t, order, ranges, exposed, r);
    // The size model is an estimate: while the formatted rank is over its share, drop the
    // window added last (or cut the only one shorter) and format again.
    for (int tries = 0; tries < 4 && !r.plan.whole && static_cast<int64_t>(r.events.text.size()) > share_; ++tries) {
      auto& w = r.plan.windows;
      if (w.size() > 1) {  // the last has the lowest priority
        w.pop_back();
        r.plan.kept_iterations.pop_back();
      } else if (!w.empty()) {
        const double f = static_cast<double>(share_) / static_cast<double>(r.events.text.size());
        w[0].second = w[0].first + std::max<int64_t>(1, static_cast<int64_t>(f * 0.9 * (w[0].second - w[0].first)));
        r.plan.cut = true;
      }
      Format(t, order, ranges, exposed, r);
    }
    r.iterations_kept = r.plan.whole ? r.iterations : static_cast<int64_t>(r.plan.kept_iterations.size());
    r.events.text.shrink_to_fit();  // kept until the end: no slack from growing
    r.events.records.shrink_to_fit();
    ranks_.push_back(std::move(r));
    return OkStatus();
  }

  Status Write(const Summary& summary, const ReportOptions& options, std::ostream& out) override;
  std::string Notice() const override;

 private:
  void Format(const RankTrace& t, const std::vector<size_t>& order, const std::vector<size_t>& ranges,
              const std::vector<Interval>& exposed, RankOut& r) const;
  void WriteIterations(const Summary& summary, size_t sorted_index, int64_t pid, int64_t base, fmt::memory_buffer& buf) const;

  TraceSelection selection_;
  int64_t budget_ = kChromeTraceDefaultBudget, share_ = 0;
  size_t inputs_ = 1;
  std::vector<RankOut> ranks_;
};

// Marks what the plan keeps (activities overlapping a window; host calls overlapping one or
// launching a kept activity, so flows resolve) and formats it.
void ChromeTraceReport::Format(const RankTrace& t, const std::vector<size_t>& order, const std::vector<size_t>& ranges,
                               const std::vector<Interval>& exposed, RankOut& r) const {
  r.events.Clear();
  std::vector<uint8_t> keep_act(order.size(), 1), keep_host(t.host_calls.size(), 1);
  std::vector<std::pair<int64_t, int64_t>> windows = r.plan.windows;
  std::sort(windows.begin(), windows.end());
  std::vector<int64_t> launched;  // correlation ids of kept GPU activities
  for (size_t k = 0; k < order.size(); ++k) {
    const Activity& a = t.activities[order[k]];
    if (!r.plan.whole) keep_act[k] = InWindows(windows, a.start_ns, a.end_ns);
    if (keep_act[k] && a.correlation_id != kUnknown) launched.push_back(a.correlation_id);
  }
  std::sort(launched.begin(), launched.end());
  launched.erase(std::unique(launched.begin(), launched.end()), launched.end());
  RankFormatter f(t, order, r.input, r.events);
  f.SetLaunched(std::move(launched));
  if (!r.plan.whole)
    for (size_t i = 0; i < t.host_calls.size(); ++i) {
      const HostCall& h = t.host_calls[i];
      keep_host[i] = InWindows(windows, h.start_ns, h.end_ns) || f.Launched(h.correlation_id);
    }
  r.events_kept = std::count(keep_act.begin(), keep_act.end(), 1) + std::count(keep_host.begin(), keep_host.end(), 1);
  const FileKeyMap<int64_t, int64_t> host_tid = EmitThreads(t, r.events);
  f.HostCalls(keep_host, host_tid);
  f.Activities(keep_act);
  std::vector<size_t> kept_ranges;
  for (size_t i : ranges)
    if (r.plan.whole || InWindows(windows, t.ranges[i].start_ns, t.ranges[i].end_ns)) kept_ranges.push_back(i);
  f.Ranges(kept_ranges);
  std::vector<Interval> kept_exposed;
  for (const Interval& x : exposed) {
    if (r.plan.whole) {
      kept_exposed.push_back(x);
      continue;
    }
    for (const auto& [lo, hi] : windows) {  // clipped to the windows, so it stays inside them
      const int64_t a = std::max(lo, x.start), b = std::min(hi, x.end);
      if (a < b) kept_exposed.push_back({a, b});
    }
  }
  f.Exposed(kept_exposed);
  std::vector<size_t> plugin_ops;  // with GPU times, in the kept windows, by start
  for (size_t i = 0; i < t.nccl_plugin_ops.size(); ++i) {
    const NcclPluginOp& p = t.nccl_plugin_ops[i];
    if (p.HasGpuTimes() && (r.plan.whole || InWindows(windows, p.start_ns, p.end_ns))) plugin_ops.push_back(i);
  }
  std::stable_sort(plugin_ops.begin(), plugin_ops.end(), [&](size_t a, size_t b) {
    return t.nccl_plugin_ops[a].start_ns < t.nccl_plugin_ops[b].start_ns;
  });
  f.PluginOps(plugin_ops);
}

// The iteration slices and counters of one rank (all of them, kept or not: they are few and
// show the whole run's shape), from the summary.
void ChromeTraceReport::WriteIterations(const Summary& summary, size_t sorted_index, int64_t pid, int64_t base,
                                        fmt::memory_buffer& buf) const {
  auto out = std::back_inserter(buf);
  for (const IterationResult& it : summary.iterations) {
    if (it.rank_index != sorted_index) continue;
    const OverlapFigures& fi = it.figures;
    const std::string label = it.step != kUnknown ? fmt::format("step {}", it.step) : fmt::format("iteration {}", it.index);
    const std::string ts = Us(fi.start_ns, base);
    fmt::format_to(out,
                   ",\n{{\"ph\":\"X\",\"cat\":\"iteration\",\"name\":\"{}\",\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{},"
                   "\"args\":{{{}\"exposed_comm_ns\":{},\"comm_ns\":{},\"compute_ns\":{}}}}}",
                   label, pid, kIterTid, ts, Us(fi.end_ns, fi.start_ns),
                   fi.overlap_ratio ? fmt::format("\"overlap_ratio\":{:.4f},", *fi.overlap_ratio) : "", fi.exposed_comm_ns,
                   fi.comm_ns, fi.compute_ns);
    // Viewers name a counter track "NAME KEY": the name and its one key make "overlap %" and
    // "exposed comm ms", each said once.
    fmt::format_to(out, ",\n{{\"ph\":\"C\",\"name\":\"overlap\",\"pid\":{},\"tid\":0,\"ts\":{},\"args\":{{\"%\":{:.2f}}}}}",
                   pid, ts, fi.overlap_ratio ? 100 * *fi.overlap_ratio : 0.0);
    fmt::format_to(out,
                   ",\n{{\"ph\":\"C\",\"name\":\"exposed comm\",\"pid\":{},\"tid\":0,\"ts\":{},\"args\":{{\"ms\":{:.3f}}}}}",
                   pid, ts, static_cast<double>(fi.exposed_comm_ns) / 1e6);
  }
}

Status ChromeTraceReport::Write(const Summary& summary, const ReportOptions& options, std::ostream& out) {
  // The base: the earliest event of any kind written (activity, host call, annotation range,
  // iteration), so no timestamp is negative: Perfetto UI drops events with a negative ts.
  int64_t base = std::numeric_limits<int64_t>::max();
  for (const RankResult& r : summary.ranks)
    if (r.whole.end_ns > r.whole.start_ns || r.whole.start_ns > 0) base = std::min(base, r.whole.start_ns);
  for (const IterationResult& it : summary.iterations) base = std::min(base, it.figures.start_ns);
  for (const RankOut& r : ranks_)
    for (const Record& rec : r.events.records)
      if (rec.has_ts) base = std::min(base, rec.ts_ns);
  if (base == std::numeric_limits<int64_t>::max()) base = 0;
  FileKeyMap<int64_t, int> rank_inputs;  // rank -> number of inputs claiming it
  for (const RankResult& r : summary.ranks)
    if (r.rank != kUnknown) ++rank_inputs[r.rank];
  std::vector<size_t> sorted_of_input(ranks_.size(), static_cast<size_t>(-1));
  for (size_t i = 0; i < summary.ranks.size(); ++i)
    if (summary.ranks[i].input_index < sorted_of_input.size()) sorted_of_input[summary.ranks[i].input_index] = i;

  int64_t moved = 0, host_skipped = 0, ranges_skipped = 0, its = 0, its_kept = 0, events = 0, events_kept = 0;
  for (const RankOut& r : ranks_) {
    moved += r.events.moved, host_skipped += r.events.host_skipped, ranges_skipped += r.events.ranges_skipped, its += r.iterations, its_kept += r.iterations_kept;
    events += r.events_total, events_kept += r.events_kept;
  }
  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"overlapprof\",\"base_time_ns\":" << base
      << ",\"budget_bytes\":" << budget_ << ",\"iterations\":" << its << ",\"iterations_left_out\":" << its - its_kept
      << ",\"events\":" << events << ",\"events_left_out\":" << events - events_kept;
  if (events_kept < events) out << ",\"left_out\":" << Quote(Notice());
  out << "},\"traceEvents\":[";
  fmt::memory_buffer buf;
  bool first = true;
  auto flush = [&] {
    out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    buf.clear();
  };
  for (const RankOut& r : ranks_) {
    const size_t sorted = sorted_of_input[r.input];
    if (sorted == static_cast<size_t>(-1)) return MakeError(StatusCode::kInternal, "chrome trace: rank {} not in the summary", r.input);
    const RankResult& rr = summary.ranks[sorted];
    // pid: the rank + 1 (Perfetto treats pid 0 as the idle process), unless the rank is unknown or
    // shared with another input (traces of different runs).
    const bool own_pid = rr.rank != kUnknown && rank_inputs[rr.rank] == 1;
    const int64_t pid = own_pid ? rr.rank + 1 : kOtherPid + static_cast<int64_t>(r.input);
    const std::string label = rr.rank == kUnknown ? fmt::format("rank ? ({})", rr.source_path)
                              : own_pid           ? fmt::format("rank {}", rr.rank)
                                                  : fmt::format("rank {} ({})", rr.rank, rr.source_path);
    fmt::format_to(std::back_inserter(buf), "{}{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,\"args\":{{\"name\":{}}}}}",
                   first ? "\n" : ",\n", pid, Quote(label));
    first = false;
    fmt::format_to(std::back_inserter(buf),
                   ",\n{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{},\"tid\":0,\"args\":{{\"sort_index\":{}}}}}", pid,
                   rr.rank != kUnknown ? rr.rank : pid);
    const std::string pid_text = std::to_string(pid);
    const std::string_view text = r.events.text;
    for (const Record& rec : r.events.records) {
      buf.append(std::string_view(",\n"));
      buf.append(text.substr(rec.begin, rec.pid_at - rec.begin));
      buf.append(pid_text);
      if (rec.has_ts) {
        buf.append(text.substr(rec.pid_at, rec.ts_at - rec.pid_at));
        AppendUs(buf, rec.ts_ns, base);
        buf.append(text.substr(rec.ts_at, rec.end - rec.ts_at));
      } else {
        buf.append(text.substr(rec.pid_at, rec.end - rec.pid_at));
      }
      if (buf.size() > (1 << 20)) flush();
    }
    WriteIterations(summary, sorted, pid, base, buf);
    flush();
  }
  out << "\n],\"overlapprof\":{\"overflow_slices\":" << moved << ",\"host_calls_not_nesting\":" << host_skipped
      << ",\"annotations_not_nesting\":" << ranges_skipped << "}}\n";
  if (!out) return MakeError(StatusCode::kIo, "write failed");
  return OkStatus();
}

std::string ChromeTraceReport::Notice() const {
  int64_t its = 0, its_kept = 0, events = 0, events_kept = 0, no_iterations = 0;
  bool cut = false;
  for (const RankOut& r : ranks_) {
    its += r.iterations, its_kept += r.iterations_kept, events += r.events_total, events_kept += r.events_kept;
    cut |= r.plan.cut;
    if (!r.plan.whole && r.iterations == 0) ++no_iterations;
  }
  if (events_kept == events) return "";
  std::string what = !selection_.indices.empty() ? "the iterations chosen with --trace-iterations"
                     : selection_.all            ? "whole iterations from the first"
                                                 : "the slowest steady, the median and the first steady iteration per rank";
  std::string s = fmt::format("kept {} of {} iterations ({}), left out {} of {} events (GPU activities and host calls) "
                              "to stay within {}",
                              its_kept, its, what, events - events_kept, events,
                              budget_ % 1'000'000 == 0 ? fmt::format("{} MB", budget_ / 1'000'000)
                                                       : fmt::format("{} bytes", budget_));
  if (no_iterations) s += fmt::format("; {} rank(s) without iterations: their first part, cut to the budget", no_iterations);
  else if (cut) s += "; an iteration too large for the budget was cut short";
  return s + " (--trace-iterations, --trace-budget)";
}

}  // namespace

std::unique_ptr<ReportWriter> MakeChromeTraceReport() { return std::make_unique<ChromeTraceReport>(); }

}  // namespace overlapprof
