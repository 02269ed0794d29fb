#include "analyzers/what_if_model.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <tuple>

namespace overlapprof::whatif {

namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::min();

// Saturating: times and clock offsets come from the data, which may be hostile.
int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? std::numeric_limits<int64_t>::max() : kNever + 1;
  return r;
}
int64_t SatSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? std::numeric_limits<int64_t>::max() : kNever + 1;
  return r;
}

// Host calls that return only once the GPU got somewhere (docs/what-if.md, rule S).
bool IsSynchronizing(std::string_view name) {
  return name.find("Synchronize") != std::string_view::npos || name == "cudaMemcpy" || name == "cudaMemcpy2D" ||
         name == "cudaMemset" || name == "hipMemcpy" || name == "cuMemcpyDtoH_v2" || name == "cuMemcpyHtoD_v2";
}

bool IsPointToPoint(Collective op) {
  return op == Collective::kSend || op == Collective::kRecv || op == Collective::kSendRecv || op == Collective::kPeerCopy;
}

EdgeKind DurationKind(Category c) {
  switch (c) {
    case Category::kCompute: return EdgeKind::kCompute;
    case Category::kComm: return EdgeKind::kComm;
    case Category::kMemory: return EdgeKind::kMemory;
    default: return EdgeKind::kOther;
  }
}

uint32_t StartEv(uint32_t task) { return 2 * task; }
uint32_t EndEv(uint32_t task) { return 2 * task + 1; }

// The windows modeled: the first run of consecutive steady windows, at most kMaxModelIterations + 1.
std::vector<IterationWindow> ModeledWindows(const std::vector<IterationWindow>& windows) {
  std::vector<IterationWindow> sel;
  for (const IterationWindow& w : windows) {
    if (w.warmup) {
      if (!sel.empty()) break;
      continue;
    }
    if (!sel.empty() && w.start_ns < sel.back().end_ns) break;  // not in order: stop
    sel.push_back(w);
    if (sel.size() == kMaxModelIterations + 1) break;
  }
  return sel;
}

// The recorded dependencies of a rank's modeled tasks (docs/what-if.md, "Recorded edges"), from the
// trace's CUDA event records and the waits on them (RankTrace::event_links, joined by sync id): a
// wait waits for the last GPU task enqueued on the record's stream before the record call (by the
// host times of the launch and record calls); a stream wait holds the first GPU task enqueued on the
// waiting stream after the wait call, a host wait the wait call's return. Only waits whose task is
// modeled on both ends count (else the rules apply). Streams are matched by native id (a wait's
// stream entry names no device). Task indices as BuildRankModel's: GPU tasks [0, G), host tasks
// G + (call index - h_lo).
struct RecordedWaits {
  std::vector<std::pair<uint32_t, uint32_t>> gpu;   // (waiting GPU task, GPU task waited for), sorted
  std::vector<std::pair<uint32_t, uint32_t>> host;  // (waiting host task, GPU task waited for), sorted
  std::vector<bool> gpu_known;   // per GPU task: a recorded wait holds it (rules C and E not applied)
  std::vector<bool> host_known;  // per host task - G: a recorded host wait (rule S not applied)
};

RecordedWaits FindRecordedWaits(const RankTrace& trace, const std::vector<uint32_t>& gpu_act, size_t h_lo,
                                size_t h_hi) {
  RecordedWaits out;
  const uint32_t G = static_cast<uint32_t>(gpu_act.size());
  out.gpu_known.assign(G, false);
  out.host_known.assign(h_hi - h_lo, false);
  if (trace.event_links.empty()) return out;
  const std::vector<Activity>& acts = trace.activities;
  auto native = [&](uint32_t stream) {
    return stream < trace.streams.size() ? trace.streams[stream].native_id : kUnknown;
  };
  // Correlation id -> host call index, for the links' calls (the first call with an id).
  std::vector<int64_t> want;
  for (const EventLink& l : trace.event_links)
    if (l.correlation_id != kUnknown) want.push_back(l.correlation_id);
  std::sort(want.begin(), want.end());
  want.erase(std::unique(want.begin(), want.end()), want.end());
  std::vector<std::pair<int64_t, size_t>> call_of;
  for (size_t i = 0; i < trace.host_calls.size(); ++i)
    if (std::binary_search(want.begin(), want.end(), trace.host_calls[i].correlation_id))
      call_of.emplace_back(trace.host_calls[i].correlation_id, i);
  std::stable_sort(call_of.begin(), call_of.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  auto call = [&](int64_t corr) -> size_t {
    auto it = std::lower_bound(call_of.begin(), call_of.end(), corr, [](const auto& x, int64_t v) { return x.first < v; });
    return it != call_of.end() && it->first == corr ? it->second : SIZE_MAX;
  };
  // Per native stream id: the modeled GPU tasks with a known launch, in launch order.
  std::map<int64_t, std::vector<std::pair<int64_t, uint32_t>>> on_stream;
  for (uint32_t g = 0; g < G; ++g) {
    const Activity& a = acts[gpu_act[g]];
    if (a.launch_ns != kUnknown) on_stream[native(a.stream)].emplace_back(a.launch_ns, g);
  }
  for (auto& [id, v] : on_stream) std::stable_sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  // Per native stream id: the latest launch of a GPU task before the modeled ones (a wait made
  // before it holds that task, not a modeled one).
  std::map<int64_t, int64_t> launched_before;
  for (size_t i = 0; i < (gpu_act.empty() ? 0 : gpu_act.front()); ++i) {
    const Activity& a = acts[i];
    if (a.kind == ActivityKind::kSync || a.launch_ns == kUnknown) continue;
    auto [it, fresh] = launched_before.emplace(native(a.stream), a.launch_ns);
    if (!fresh) it->second = std::max(it->second, a.launch_ns);
  }
  // sync id -> the record: (native stream, record call start).
  std::vector<std::tuple<int64_t, int64_t, int64_t>> records;
  for (const EventLink& l : trace.event_links) {
    if (l.kind != EventLinkKind::kRecord || l.sync_id == kUnknown) continue;
    const size_t c = call(l.correlation_id);
    if (c != SIZE_MAX) records.emplace_back(l.sync_id, native(l.stream), trace.host_calls[c].start_ns);
  }
  std::stable_sort(records.begin(), records.end(),
                   [](const auto& x, const auto& y) { return std::get<0>(x) < std::get<0>(y); });
  for (const EventLink& l : trace.event_links) {
    if (l.kind == EventLinkKind::kRecord) continue;
    auto r = std::lower_bound(records.begin(), records.end(), l.sync_id,
                              [](const auto& x, int64_t v) { return std::get<0>(x) < v; });
    const size_t c = call(l.correlation_id);
    if (r == records.end() || std::get<0>(*r) != l.sync_id || c == SIZE_MAX) continue;  // not joined: inferred
    uint32_t producer = kNoIndex;
    if (auto s = on_stream.find(std::get<1>(*r)); s != on_stream.end()) {
      auto it = std::lower_bound(s->second.begin(), s->second.end(), std::get<2>(*r),
                                 [](const auto& x, int64_t v) { return x.first < v; });
      if (it != s->second.begin()) producer = std::prev(it)->second;
    }
    if (l.kind == EventLinkKind::kStreamWait) {
      auto s = on_stream.find(native(l.stream));
      if (s == on_stream.end()) continue;
      const int64_t at = trace.host_calls[c].start_ns;
      auto it = std::lower_bound(s->second.begin(), s->second.end(), at, [](const auto& x, int64_t v) { return x.first < v; });
      if (it == s->second.end()) continue;
      if (auto b = launched_before.find(native(l.stream)); b != launched_before.end() && b->second >= at)
        continue;  // it holds a task before the modeled ones
      if (producer == kNoIndex || producer == it->second) continue;
      out.gpu_known[it->second] = true;
      out.gpu.emplace_back(it->second, producer);
    } else if (c >= h_lo && c < h_hi && producer != kNoIndex) {
      out.host_known[c - h_lo] = true;
      out.host.emplace_back(static_cast<uint32_t>(G + (c - h_lo)), producer);
    }
  }
  for (auto* v : {&out.gpu, &out.host}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  return out;
}

}  // namespace

RankModel BuildRankModel(const RankTrace& trace, const std::vector<IterationWindow>& windows) {
  RankModel m;
  m.rank = trace.meta.rank;
  const std::vector<IterationWindow> sel = ModeledWindows(windows);
  if (sel.size() < 2) {
    m.why_not = "fewer than two consecutive steady iterations";
    return m;
  }
  if (trace.host_calls.empty()) {
    m.why_not = "no host runtime calls in the trace (launches unknown)";
    return m;
  }
  const int64_t lo = sel.front().start_ns, hi = sel.back().end_ns;

  // GPU tasks: every activity starting in [lo, hi), in start order (activities are sorted).
  const std::vector<Activity>& acts = trace.activities;
  auto by_start = [](const Activity& a, int64_t t) { return a.start_ns < t; };
  const size_t a_lo = std::lower_bound(acts.begin(), acts.end(), lo, by_start) - acts.begin();
  const size_t a_hi = std::lower_bound(acts.begin(), acts.end(), hi, by_start) - acts.begin();
  std::vector<uint32_t> gpu_act;  // GPU task -> activity index
  for (size_t i = a_lo; i < a_hi; ++i)
    if (acts[i].kind != ActivityKind::kSync) gpu_act.push_back(static_cast<uint32_t>(i));
  const uint32_t G = static_cast<uint32_t>(gpu_act.size());
  m.window_first.reserve(sel.size() + 1);
  {
    size_t g = 0;
    for (const IterationWindow& w : sel) {
      while (g < G && acts[gpu_act[g]].start_ns < w.start_ns) ++g;
      m.window_first.push_back(static_cast<uint32_t>(g));
    }
    m.window_first.push_back(G);
  }
  for (size_t w = 0; w + 1 < m.window_first.size(); ++w) {
    if (m.window_first[w] == m.window_first[w + 1]) {
      m.why_not = "a steady iteration without GPU work";
      return m;
    }
  }

  // Host range: from the first launch of a modeled GPU task to the launch of the first GPU task
  // after the modeled windows (the trace's end when none).
  int64_t hlo = std::numeric_limits<int64_t>::max(), hhi = std::numeric_limits<int64_t>::max();
  for (uint32_t i : gpu_act)
    if (acts[i].launch_ns != kUnknown) hlo = std::min(hlo, acts[i].launch_ns);
  for (size_t i = a_hi; i < acts.size(); ++i) {
    if (acts[i].kind == ActivityKind::kSync || acts[i].launch_ns == kUnknown) continue;
    hhi = acts[i].launch_ns;
    break;
  }
  if (hlo == std::numeric_limits<int64_t>::max()) {
    m.why_not = "no GPU task of the steady iterations is linked to its launch call";
    return m;
  }
  const std::vector<HostCall>& calls = trace.host_calls;
  auto call_by_start = [](const HostCall& h, int64_t t) { return h.start_ns < t; };
  const size_t h_lo = std::lower_bound(calls.begin(), calls.end(), hlo, call_by_start) - calls.begin();
  const size_t h_hi = std::lower_bound(calls.begin(), calls.end(), hhi, call_by_start) - calls.begin();
  const uint32_t H = static_cast<uint32_t>(h_hi - h_lo);

  m.tasks.resize(G + H);
  for (uint32_t g = 0; g < G; ++g) {
    const Activity& a = acts[gpu_act[g]];
    m.tasks[g] = {a.start_ns, a.end_ns, TaskKind::kGpu};
  }
  std::vector<std::pair<int64_t, uint32_t>> by_corr;  // (correlation id, task)
  by_corr.reserve(H);
  for (uint32_t h = 0; h < H; ++h) {
    const HostCall& c = calls[h_lo + h];
    m.tasks[G + h] = {c.start_ns, std::max(c.start_ns, c.end_ns),
                      IsSynchronizing(trace.names.Get(c.name_id)) ? TaskKind::kHostSync : TaskKind::kHost};
    if (c.correlation_id != kUnknown) by_corr.emplace_back(c.correlation_id, G + h);
  }
  std::sort(by_corr.begin(), by_corr.end());
  std::vector<uint32_t> launch(G, kNoIndex);  // GPU task -> its launch call's task
  for (uint32_t g = 0; g < G; ++g) {
    const int64_t id = acts[gpu_act[g]].correlation_id;
    if (id == kUnknown) continue;
    auto it = std::lower_bound(by_corr.begin(), by_corr.end(), std::make_pair(id, uint32_t{0}));
    if (it != by_corr.end() && it->first == id) launch[g] = it->second;
  }
  auto add = [&](uint32_t src, uint32_t dst, int64_t lat, EdgeKind kind, bool sync = false) {
    Edge e;
    e.src = src;
    e.dst = dst;
    e.lat = lat;
    e.kind = kind;
    e.source_is_sync = sync;
    m.edges.push_back(e);
  };
  auto add_recorded = [&](uint32_t src, uint32_t dst, int64_t lat, EdgeKind kind) {
    add(src, dst, lat, kind);
    m.edges.back().recorded = true;
    ++m.dependencies_recorded;
  };
  const RecordedWaits rec = FindRecordedWaits(trace, gpu_act, h_lo, h_hi);
  for (uint32_t h = 0; h < H; ++h)
    if (rec.host_known[h]) m.tasks[G + h].kind = TaskKind::kHostSync;  // it returns once the GPU got there
  // The recorded waits of task t: [first, last) of rec.gpu or rec.host.
  auto recorded_of = [](const std::vector<std::pair<uint32_t, uint32_t>>& v, uint32_t t) {
    return std::equal_range(v.begin(), v.end(), std::make_pair(t, uint32_t{0}),
                            [](const auto& x, const auto& y) { return x.first < y.first; });
  };

  // Host: per thread in order; the latest-ending call of another thread that ended before a call
  // started, when later than the thread's own previous call, is what it waited for (rule H).
  struct ThreadState {
    uint32_t last = kNoIndex, prev = kNoIndex;
  };
  std::map<int64_t, ThreadState> threads;
  // GPU tasks in launch order, for the synchronizing calls (rule S).
  std::vector<uint32_t> by_launch;
  for (uint32_t g = 0; g < G; ++g)
    if (launch[g] != kNoIndex) by_launch.push_back(g);
  std::stable_sort(by_launch.begin(), by_launch.end(),
                   [&](uint32_t x, uint32_t y) { return m.tasks[launch[x]].start_ns < m.tasks[launch[y]].start_ns; });
  size_t launched = 0;
  std::map<uint32_t, uint32_t> last_launched;  // stream -> its GPU task launched last so far
  for (uint32_t h = G; h < G + H; ++h) {
    const Task& t = m.tasks[h];
    const int64_t tid = calls[h_lo + (h - G)].tid;
    ThreadState& own = threads[tid];
    uint32_t cross = kNoIndex;
    for (const auto& [other_tid, st] : threads) {
      if (other_tid == tid) continue;
      uint32_t c = kNoIndex;
      if (st.last != kNoIndex && m.tasks[st.last].end_ns <= t.start_ns) c = st.last;
      else if (st.prev != kNoIndex && m.tasks[st.prev].end_ns <= t.start_ns) c = st.prev;
      if (c != kNoIndex && (cross == kNoIndex || m.tasks[c].end_ns > m.tasks[cross].end_ns)) cross = c;
    }
    const bool cross_binds =
        cross != kNoIndex && (own.last == kNoIndex || m.tasks[cross].end_ns > m.tasks[own.last].end_ns);
    if (own.last != kNoIndex) {
      const int64_t slack = t.start_ns - m.tasks[own.last].end_ns;
      add(EndEv(own.last), StartEv(h), cross_binds ? std::min<int64_t>(0, slack) : slack, EdgeKind::kHostGap,
          m.tasks[own.last].kind == TaskKind::kHostSync);
    }
    if (cross_binds) {
      add(EndEv(cross), StartEv(h), t.start_ns - m.tasks[cross].end_ns, EdgeKind::kHostGap,
          m.tasks[cross].kind == TaskKind::kHostSync);
      ++m.dependencies_inferred;
    }
    own.prev = own.last;
    own.last = h;
    const int64_t dur = t.end_ns - t.start_ns;
    if (t.kind != TaskKind::kHostSync) {
      add(StartEv(h), EndEv(h), dur, EdgeKind::kHostWork);
      continue;
    }
    while (launched < by_launch.size() && m.tasks[launch[by_launch[launched]]].start_ns < t.start_ns) {
      const uint32_t g = by_launch[launched++];
      last_launched[acts[gpu_act[g]].stream] = g;
    }
    uint32_t waited = kNoIndex;
    const bool recorded = rec.host_known[h - G];
    if (recorded) {
      // The event it waits for, recorded: rule S not applied.
      const auto [first, last] = recorded_of(rec.host, h);
      for (auto it = first; it != last; ++it)
        if (waited == kNoIndex || m.tasks[it->second].end_ns > m.tasks[waited].end_ns) waited = it->second;
    } else {
      for (const auto& [stream, g] : last_launched)
        if (m.tasks[g].end_ns <= t.end_ns && (waited == kNoIndex || m.tasks[g].end_ns > m.tasks[waited].end_ns))
          waited = g;
    }
    if (waited == kNoIndex) {
      add(StartEv(h), EndEv(h), dur, EdgeKind::kHostWork, true);
      continue;
    }
    const int64_t ret = t.end_ns - m.tasks[waited].end_ns;
    const bool did_wait = m.tasks[waited].end_ns > t.start_ns && ret >= 0;
    add(StartEv(h), EndEv(h), did_wait ? std::min(dur, ret) : dur, EdgeKind::kHostWork, true);
    if (recorded) add_recorded(EndEv(waited), EndEv(h), did_wait ? ret : std::min<int64_t>(0, ret), EdgeKind::kSyncWait);
    else add(EndEv(waited), EndEv(h), did_wait ? ret : 0, EdgeKind::kSyncWait);
    if (did_wait && !recorded) ++m.dependencies_inferred;
  }

  // The launch latency (10th percentile) of GPU tasks whose stream was idle when they were launched: a
  // later start waited for something else.
  std::vector<int64_t> lat_samples;
  {
    std::map<uint32_t, uint32_t> prev_on;
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t s = acts[gpu_act[g]].stream;
      auto p = prev_on.find(s);
      if (launch[g] != kNoIndex) {
        const int64_t l = m.tasks[launch[g]].start_ns;
        if ((p == prev_on.end() || m.tasks[p->second].end_ns <= l) && m.tasks[g].start_ns >= l)
          lat_samples.push_back(m.tasks[g].start_ns - l);
      }
      prev_on[s] = g;
    }
  }
  int64_t typical_launch = 0;
  if (!lat_samples.empty()) {
    std::nth_element(lat_samples.begin(), lat_samples.begin() + lat_samples.size() / 10, lat_samples.end());
    typical_launch = lat_samples[lat_samples.size() / 10];
  }

  // Rule C: a communication task waits for the last other GPU task (on another stream) that its
  // launching thread launched before it (the communication stream waits for the current stream).
  std::vector<uint32_t> waits_for_current(G, kNoIndex);
  {
    std::map<int64_t, uint32_t> last_by_thread;  // thread -> its last non-communication launch
    for (uint32_t g : by_launch) {
      const int64_t tid = calls[h_lo + (launch[g] - G)].tid;
      const Activity& a = acts[gpu_act[g]];
      if (a.category != Category::kComm) {
        last_by_thread[tid] = g;
        continue;
      }
      auto it = last_by_thread.find(tid);
      if (it != last_by_thread.end() && acts[gpu_act[it->second]].stream != a.stream) waits_for_current[g] = it->second;
    }
  }

  // GPU: stream FIFO, launch, and inferred cross-stream waits (rules C and E).
  struct StreamState {
    std::vector<int64_t> max_end;  // running maximum of the ends, in the stream's order
    std::vector<uint32_t> task;
  };
  std::map<uint32_t, StreamState> streams;
  for (uint32_t g = 0; g < G; ++g) {
    const Activity& a = acts[gpu_act[g]];
    const Task& t = m.tasks[g];
    StreamState& own = streams[a.stream];
    const uint32_t prev = own.task.empty() ? kNoIndex : own.task.back();
    const int64_t l_at = launch[g] != kNoIndex ? m.tasks[launch[g]].start_ns : kNever;
    int64_t ready = kNever;
    if (prev != kNoIndex) ready = m.tasks[prev].end_ns;
    if (launch[g] != kNoIndex) ready = std::max(ready, l_at + typical_launch);
    uint32_t event = kNoIndex;
    // A recorded wait holds this task: the tasks it names, and no inferred cross-stream edge.
    const bool recorded = rec.gpu_known[g];
    const auto [rec_first, rec_last] = recorded_of(rec.gpu, g);
    for (const auto& [s, st] : streams) {
      if (recorded) break;
      if (s == a.stream || st.task.empty()) continue;
      auto it = std::upper_bound(st.max_end.begin(), st.max_end.end(), t.start_ns);
      if (it == st.max_end.begin()) continue;
      const uint32_t c = st.task[(it - st.max_end.begin()) - 1];
      if (m.tasks[c].end_ns > t.start_ns) continue;
      if (launch[c] != kNoIndex && launch[g] != kNoIndex && m.tasks[launch[c]].start_ns > l_at) continue;
      if (event == kNoIndex || m.tasks[c].end_ns > m.tasks[event].end_ns) event = c;
    }
    if (event != kNoIndex &&
        !(m.tasks[event].end_ns > ready && t.start_ns - m.tasks[event].end_ns <= kEventToleranceNs))
      event = kNoIndex;
    // The recorded task that ended last explains the start where it ended after the stream and the
    // launch allowed.
    uint32_t rec_bind = kNoIndex;
    for (auto it = rec_first; it != rec_last; ++it)
      if (m.tasks[it->second].end_ns > ready &&
          (rec_bind == kNoIndex || m.tasks[it->second].end_ns > m.tasks[rec_bind].end_ns))
        rec_bind = it->second;
    if (rec_bind != kNoIndex) event = rec_bind;
    for (auto it = rec_first; it != rec_last; ++it)
      if (it->second != rec_bind)
        add_recorded(EndEv(it->second), StartEv(g), std::min<int64_t>(0, t.start_ns - m.tasks[it->second].end_ns),
                     EdgeKind::kEvent);
    // Rule C holds where the data agree (the task it waits for ended by the start).
    uint32_t current = recorded ? kNoIndex : waits_for_current[g];
    if (current != kNoIndex && (m.tasks[current].end_ns > t.start_ns || current == event)) current = kNoIndex;
    if (current != kNoIndex && event == kNoIndex && m.tasks[current].end_ns > ready) {
      event = current;  // it explains the start
      current = kNoIndex;
    }
    if (current != kNoIndex) {
      add(EndEv(current), StartEv(g), std::min<int64_t>(0, t.start_ns - m.tasks[current].end_ns), EdgeKind::kEvent);
      ++m.dependencies_inferred;
    }
    const bool stream_binds = event == kNoIndex && prev != kNoIndex &&
                              (launch[g] == kNoIndex || m.tasks[prev].end_ns >= l_at + typical_launch);
    const bool launch_binds = event == kNoIndex && !stream_binds && launch[g] != kNoIndex;
    if (prev != kNoIndex) {
      const int64_t slack = t.start_ns - m.tasks[prev].end_ns;
      add(EndEv(prev), StartEv(g), stream_binds ? slack : std::min<int64_t>(0, slack), EdgeKind::kStream);
      if (stream_binds && slack > kUnexplainedDelayNs) m.unexplained_ns += slack;
    }
    if (launch_binds && t.start_ns - l_at - typical_launch > kUnexplainedDelayNs)
      m.unexplained_ns += t.start_ns - l_at - typical_launch;
    if (launch[g] != kNoIndex) {
      const int64_t slack = t.start_ns - l_at;
      add(StartEv(launch[g]), StartEv(g), launch_binds ? slack : std::min(typical_launch, slack), EdgeKind::kLaunch);
    }
    if (event != kNoIndex && event == rec_bind) {
      const int64_t slack = t.start_ns - m.tasks[event].end_ns;
      add_recorded(EndEv(event), StartEv(g), slack, EdgeKind::kEvent);
      if (slack > kUnexplainedDelayNs) m.unexplained_ns += slack;
    } else if (event != kNoIndex) {
      add(EndEv(event), StartEv(g), t.start_ns - m.tasks[event].end_ns, EdgeKind::kEvent);
      ++m.dependencies_inferred;
    }
    add(StartEv(g), EndEv(g), t.end_ns - t.start_ns, DurationKind(a.category));
    own.max_end.push_back(own.max_end.empty() ? t.end_ns : std::max(own.max_end.back(), t.end_ns));
    own.task.push_back(g);
  }

  // Collective members: communication kernels alone in their op (point-to-point left out),
  // keyed by sequence number, else by the op's ordinal in its communicator on this rank.
  std::vector<int64_t> kernels_of_op(trace.comm_ops.size(), 0);
  std::vector<int64_t> ordinal(trace.comm_ops.size(), -1);
  {
    std::map<std::string, int64_t> next;
    for (const Activity& a : acts) {
      if (a.comm_op == kNoIndex || a.comm_op >= trace.comm_ops.size()) continue;
      if (kernels_of_op[a.comm_op]++ == 0) ordinal[a.comm_op] = next[trace.comm_ops[a.comm_op].communicator]++;
    }
  }
  for (uint32_t g = 0; g < G; ++g) {
    const Activity& a = acts[gpu_act[g]];
    if (a.comm_op == kNoIndex || a.comm_op >= trace.comm_ops.size() || kernels_of_op[a.comm_op] != 1) continue;
    const CommOp& op = trace.comm_ops[a.comm_op];
    if (IsPointToPoint(op.op)) continue;
    m.collectives.push_back({op.communicator, op.seq != kUnknown ? op.seq : -1 - ordinal[a.comm_op], g, op.op, op.bytes});
  }

  m.gpu_activity = std::move(gpu_act);
  const size_t W = sel.size();
  for (size_t w = 0; w + 1 < W; ++w)
    m.measured_steps.push_back(m.tasks[m.window_first[w + 1]].start_ns - m.tasks[m.window_first[w]].start_ns);
  return m;
}

RunGraph::RunGraph(std::vector<RankModel> ranks, const std::vector<int64_t>& offsets) : ranks_(std::move(ranks)) {
  base_.resize(ranks_.size());
  for (size_t s = 0; s < ranks_.size(); ++s) {
    base_[s] = events_;
    events_ += static_cast<uint32_t>(2 * ranks_[s].tasks.size());
  }
  measured_.resize(events_);
  for (size_t s = 0; s < ranks_.size(); ++s)
    for (size_t t = 0; t < ranks_[s].tasks.size(); ++t) {
      measured_[base_[s] + 2 * t] = ranks_[s].tasks[t].start_ns;
      measured_[base_[s] + 2 * t + 1] = ranks_[s].tasks[t].end_ns;
    }
  auto off = [&](size_t s) { return s < offsets.size() ? offsets[s] : 0; };
  // Collectives: members of two or more ranks under one key (one member per rank: the first).
  std::map<std::pair<std::string, int64_t>, std::vector<std::pair<uint32_t, uint32_t>>> groups;
  for (uint32_t s = 0; s < ranks_.size(); ++s) {
    if (!ranks_[s].why_not.empty()) continue;
    for (const CollectiveMember& c : ranks_[s].collectives) {
      auto& g = groups[{c.communicator, c.key}];
      if (g.empty() || g.back().first != s) g.emplace_back(s, c.task);
    }
  }
  std::vector<std::map<uint32_t, const CollectiveMember*>> member_of(ranks_.size());  // slot: task -> member
  for (uint32_t s = 0; s < ranks_.size(); ++s)
    for (const CollectiveMember& c : ranks_[s].collectives) member_of[s].emplace(c.task, &c);
  std::vector<std::vector<bool>> matched(ranks_.size());
  for (size_t s = 0; s < ranks_.size(); ++s) matched[s].assign(ranks_[s].tasks.size(), false);
  first_arrival_ = events_;
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    const uint32_t arrival = events_++;
    arrivals_.emplace_back();
    int64_t last = kNever;
    for (const auto& [s, t] : members) last = std::max(last, SatSub(ranks_[s].tasks[t].start_ns, off(s)));
    measured_.push_back(last);
    for (const auto& [s, t] : members) {
      matched[s][t] = true;
      Edge in;
      in.src = base_[s] + StartEv(t);
      in.dst = arrival;
      in.lat = SatSub(0, off(s));
      in.kind = EdgeKind::kArrive;
      arrivals_.back().push_back({s, in.src, in.lat});
      edges_.push_back(in);
      edge_slot_.push_back(s);
      int64_t transfer = SatSub(SatSub(ranks_[s].tasks[t].end_ns, off(s)), last);
      if (transfer < 0) {
        ++negative_transfers_;
        transfer = 0;
      }
      if (const CollectiveMember* c = member_of[s][t]; c && c->bytes != kUnknown)
        samples_.push_back({c->op, c->bytes, transfer, false});
      Edge outv;
      outv.src = arrival;
      outv.dst = base_[s] + EndEv(t);
      outv.lat = SatAdd(off(s), transfer);
      outv.aux = transfer;
      outv.kind = EdgeKind::kTransfer;
      edges_.push_back(outv);
      edge_slot_.push_back(s);
    }
    ++matched_;
  }
  for (uint32_t s = 0; s < ranks_.size(); ++s) {
    if (!ranks_[s].why_not.empty()) continue;
    for (const CollectiveMember& c : ranks_[s].collectives)
      if (!matched[s][c.task] && c.bytes != kUnknown)
        samples_.push_back({c.op, c.bytes, ranks_[s].tasks[c.task].end_ns - ranks_[s].tasks[c.task].start_ns, true});
    for (const Edge& e : ranks_[s].edges) {
      if (e.kind == EdgeKind::kComm && matched[s][e.src / 2]) continue;  // timed by its collective
      Edge r = e;
      r.src += base_[s];
      r.dst += base_[s];
      edges_.push_back(r);
      edge_slot_.push_back(s);
    }
  }
  // Out-edges grouped by source, for the replay.
  std::vector<uint32_t> order(edges_.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) { return edges_[x].src < edges_[y].src; });
  std::vector<Edge> sorted(edges_.size());
  std::vector<uint32_t> slots(edges_.size());
  for (size_t i = 0; i < order.size(); ++i) {
    sorted[i] = edges_[order[i]];
    slots[i] = edge_slot_[order[i]];
  }
  edges_ = std::move(sorted);
  edge_slot_ = std::move(slots);
}

std::vector<int64_t> RunGraph::ComputeTime() const {
  std::vector<int64_t> out(ranks_.size(), 0);
  for (size_t i = 0; i < edges_.size(); ++i)
    if (edges_[i].kind == EdgeKind::kCompute) out[edge_slot_[i]] += edges_[i].lat;
  return out;
}

std::vector<std::vector<int64_t>> RunGraph::Replay(const Change& change,
                                                   std::vector<std::vector<PathSplit>>* paths) const {
  auto scaled = [&](size_t i) -> int64_t {
    const uint32_t s = edge_slot_[i];
    if (s < change.compute_factor.size() && change.compute_factor[s] != 1.0 && edges_[i].lat > 0)
      return static_cast<int64_t>(static_cast<double>(edges_[i].lat) * change.compute_factor[s] + 0.5);
    return edges_[i].lat;
  };
  // The change to the GPU task whose end event is `dst` (a duration or transfer edge), or null.
  auto task_change = [&](size_t i) -> const TaskChange* {
    const uint32_t s = edge_slot_[i];
    if (s >= change.tasks.size() || edges_[i].dst < base_[s]) return nullptr;
    const uint32_t t = (edges_[i].dst - base_[s]) / 2;
    return t < change.tasks[s].size() ? &change.tasks[s][t] : nullptr;
  };
  auto per_task = [&](size_t i, int64_t v) -> int64_t {
    const TaskChange* tc = task_change(i);
    if (!tc) return v;
    if (tc->factor != 1.0) v = static_cast<int64_t>(static_cast<double>(v) * tc->factor + 0.5);
    return SatAdd(v, tc->extra_ns);
  };
  auto latency = [&](size_t i) -> int64_t {
    const Edge& e = edges_[i];
    switch (e.kind) {
      case EdgeKind::kHostWork:
      case EdgeKind::kHostGap:
        if (e.source_is_sync) return e.lat;
        if (change.host_free) return 0;
        if (change.host_factor != 1.0)
          return static_cast<int64_t>(static_cast<double>(scaled(i)) * change.host_factor + 0.5);
        return scaled(i);
      case EdgeKind::kLaunch:
        return change.host_free ? 0 : e.lat;
      case EdgeKind::kCompute:
      case EdgeKind::kMemory:
      case EdgeKind::kOther:
        return per_task(i, e.kind == EdgeKind::kCompute ? scaled(i) : e.lat);
      case EdgeKind::kComm:
        return per_task(i, static_cast<int64_t>(static_cast<double>(e.lat) * change.comm_factor + 0.5));
      case EdgeKind::kTransfer:
        return SatAdd(SatSub(e.lat, e.aux),
                      per_task(i, static_cast<int64_t>(static_cast<double>(e.aux) * change.comm_factor + 0.5)));
      default:
        return e.lat;
    }
  };
  std::vector<uint32_t> indeg(events_, 0), first_out(events_ + 1, 0);
  for (const Edge& e : edges_) {
    ++indeg[e.dst];
    ++first_out[e.src + 1];
  }
  for (uint32_t v = 0; v < events_; ++v) first_out[v + 1] += first_out[v];
  std::vector<int64_t> time(events_, kNever);
  std::vector<uint32_t> via(events_, kNoIndex);  // the binding in-edge of each event
  std::vector<uint32_t> ready;
  for (uint32_t v = 0; v < events_; ++v)
    if (indeg[v] == 0) {
      time[v] = measured_[v];  // an anchor: nothing modeled before it
      ready.push_back(v);
    }
  while (!ready.empty()) {
    const uint32_t u = ready.back();
    ready.pop_back();
    for (uint32_t i = first_out[u]; i < first_out[u + 1]; ++i) {
      const uint32_t v = edges_[i].dst;
      int64_t t = SatAdd(time[u], latency(i));
      if (edges_[i].kind == EdgeKind::kTransfer) {
        // A detached member ends when it starts (its start event precedes its end: dst - 1), final
        // here since the member's start is a source of this arrival.
        const TaskChange* tc = task_change(i);
        if (tc && tc->detached) t = time[v - 1];
      }
      bool dropped = false;
      if (edges_[i].kind == EdgeKind::kLaunch || edges_[i].kind == EdgeKind::kEvent) {
        const TaskChange* tc = task_change(i);
        dropped = tc && tc->stream_only;
      }
      if (!dropped && (t > time[v] || via[v] == kNoIndex)) {
        time[v] = std::max(time[v], t);
        via[v] = i;
      }
      if (--indeg[v] == 0) ready.push_back(v);
    }
  }
  for (uint32_t v = 0; v < events_; ++v)
    if (indeg[v] != 0) {
      time[v] = measured_[v];  // on a cycle (contradicting data): as measured
      via[v] = kNoIndex;
    }
  std::vector<std::vector<int64_t>> steps(ranks_.size());
  if (paths) paths->assign(ranks_.size(), {});
  for (size_t s = 0; s < ranks_.size(); ++s) {
    const RankModel& m = ranks_[s];
    if (!m.why_not.empty()) continue;
    std::vector<int64_t> first;
    std::vector<uint32_t> first_event;
    for (size_t w = 0; w + 1 < m.window_first.size(); ++w) {
      int64_t f = std::numeric_limits<int64_t>::max();
      uint32_t fe = 0;
      for (uint32_t t = m.window_first[w]; t < m.window_first[w + 1]; ++t)
        if (time[base_[s] + 2 * t] < f) {
          f = time[base_[s] + 2 * t];
          fe = base_[s] + 2 * t;
        }
      first.push_back(f);
      first_event.push_back(fe);
    }
    for (size_t k = 0; k + 1 < first.size(); ++k) steps[s].push_back(SatSub(first[k + 1], first[k]));
    if (!paths) continue;
    const uint32_t lo = base_[s], hi = base_[s] + static_cast<uint32_t>(2 * m.tasks.size());
    for (size_t k = 0; k + 1 < first.size(); ++k) {
      PathSplit p;
      p.length_ns = steps[s][k];
      std::map<uint32_t, int64_t> waited;  // slot -> ns
      uint32_t v = first_event[k + 1];
      for (uint32_t guard = 0; guard <= events_ && time[v] > first[k]; ++guard) {
        const uint32_t i = via[v];
        if (i == kNoIndex) {
          p.part_ns[kPathOther] += SatSub(time[v], first[k]);
          break;
        }
        uint32_t u = edges_[i].src;
        if (edges_[i].kind == EdgeKind::kArrive && edge_slot_[i] != s && v >= first_arrival_) {
          // The last member was another rank: this rank waited for it from its own arrival on, and
          // the path goes on through its own work.
          const Arrival* mine = nullptr;
          for (const Arrival& a : arrivals_[v - first_arrival_])
            if (a.slot == s) mine = &a;
          if (mine) {
            const int64_t own_at = SatAdd(time[mine->start], mine->lat);
            const int64_t ns = std::max<int64_t>(0, SatSub(time[v], std::max(own_at, first[k])));
            p.part_ns[kPathWaiting] += ns;
            waited[edge_slot_[i]] += ns;
            v = mine->start;
            continue;
          }
        }
        const int64_t ns = std::max<int64_t>(0, SatSub(time[v], std::max(time[u], first[k])));
        const bool own = edge_slot_[i] == s && (edges_[i].kind == EdgeKind::kTransfer || (v >= lo && v < hi));
        int part = kPathOther;
        if (!own) {
          part = kPathWaiting;
          waited[edge_slot_[i]] += ns;
        } else {
          switch (edges_[i].kind) {
            case EdgeKind::kCompute: part = kPathCompute; break;
            case EdgeKind::kComm:
            case EdgeKind::kTransfer: part = kPathComm; break;
            case EdgeKind::kHostWork:
            case EdgeKind::kHostGap: part = kPathHost; break;
            case EdgeKind::kLaunch: part = kPathLaunch; break;
            case EdgeKind::kMemory: part = kPathMemory; break;
            default: part = kPathOther; break;
          }
        }
        p.part_ns[part] += ns;
        v = u;
      }
      int64_t most = 0;
      for (const auto& [slot, ns] : waited)
        if (ns > most) {
          most = ns;
          p.waited_slot = slot;
        }
      (*paths)[s].push_back(p);
    }
  }
  return steps;
}

}  // namespace overlapprof::whatif
