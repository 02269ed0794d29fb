// Builds a rank's trace from Kineto events (src/importers/kineto/builder.h).
#include "src/importers/kineto/builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <unistd.h>

#include "src/trace/classify.h"

namespace overlapprof::kineto {

uint32_t TraceBuilder::InternRaw(std::string_view raw) {
  // The cache first: a slot picked from the length and 24 of the bytes (not a hash of them all:
  // kernel names are long), holding a name met before; a full compare says whether it is this one.
  const size_t n = raw.size();
  uint64_t a = n, b = 0, c = 0;
  if (n >= 8) {
    std::memcpy(&a, raw.data(), 8);
    std::memcpy(&b, raw.data() + n / 2 - 4 + (n & 1), 8);
    std::memcpy(&c, raw.data() + n - 8, 8);
  } else if (n > 0) {
    std::memcpy(&b, raw.data(), n);
  }
  InternSlot& slot = intern_cache_[((a * 0x9E3779B97F4A7C15ull) ^ (b * 0xC2B2AE3D27D4EB4Full) ^
                                    (c * 0x165667B19E3779F9ull) ^ n) >> (64 - kInternCacheBits)];
  if (slot.key && slot.key->size() == n && std::memcmp(slot.key->data(), raw.data(), n) == 0) return slot.id;
  auto it = raw_intern_.find(raw);
  if (it == raw_intern_.end()) {
    uint32_t id = raw.find('\\') == std::string_view::npos ? t_.names.Intern(raw) : t_.names.Intern(Text(raw));
    it = raw_intern_.emplace(std::string(raw), id).first;
  }
  slot = InternSlot{&it->first, it->second};  // the map's nodes do not move
  return it->second;
}

bool TraceBuilder::Times(const RawEvent& ev, int64_t* start, int64_t* end) {
  int64_t ts, dur;
  if (ev.ts.empty() || ev.dur.empty()) {
    t_.stats.Add(Stat::events_malformed);
    return false;
  }
  if (!ParseJsonNumber(ev.ts, opts_.kineto.time_exp, &ts) || !ParseJsonNumber(ev.dur, opts_.kineto.time_exp, &dur)) {
    // A number that does not fit int64 ns is out of range; anything else is malformed, the
    // NaN and (-)Infinity literals and numbers JSON does not allow ("0005", ".5") included
    // (docs/schema.md).
    t_.stats.Add(JsonNumberStart(ev.ts) && JsonNumberStart(ev.dur) ? Stat::events_timestamp_out_of_range
                                                                   : Stat::events_malformed);
    return false;
  }
  if (dur < 0) {
    t_.stats.Add(Stat::events_negative_duration);
    return false;
  }
  // Bounded before baseTimeNanoseconds is added; Finish() checks the sum again.
  if (__builtin_add_overflow(ts, dur, end) || !TimeInRange(ts) || !TimeInRange(*end)) {
    t_.stats.Add(Stat::events_timestamp_out_of_range);
    return false;
  }
  *start = ts;
  return true;
}

namespace {

// The array one of the builder's large vectors left when it grew (`old_bytes`: its size) goes
// back to the system at once when it was 8 MiB or more (the vector now 16 MiB or more): main()
// keeps freed memory in the heap for the next rank (M_TRIM_THRESHOLD), so without this the arrays
// a growing vector left behind (about as many bytes as the vector) would stay resident until the
// import ends (peak RSS of `analyze` on a 1 GB trace 208 -> 168 MB). About ten calls per vector
// for the largest traces, each a walk of the free lists.
void GiveBackOldArray(size_t old_bytes) {
#if defined(__GLIBC__)
  if (old_bytes >= (size_t{8} << 20)) malloc_trim(0);
#else
  (void)old_bytes;
#endif
}

// emplace_back for the builder's large vectors (one entry per event of a kind).
template <typename T, typename... Args>
void PushBack(std::vector<T>& v, Args&&... args) {
  const size_t old = v.capacity();
  v.emplace_back(std::forward<Args>(args)...);
  if (v.capacity() != old) GiveBackOldArray(old * sizeof(T));
}

}  // namespace

void TraceBuilder::ExpectMore(double factor) {
  if (!(factor > 1.0)) return;
  static const uint64_t kMaxBytes = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4 : uint64_t{1} << 30;
  }();
  const double scale = factor * 1.25;
  auto want = [&](size_t n) { return static_cast<size_t>(static_cast<double>(n) * scale); };
  const size_t a = want(t_.activities.size()), h = want(t_.host_calls.size()), l = want(launched_by_.size());
  const uint64_t bytes = uint64_t{a} * sizeof(Activity) + uint64_t{h} * sizeof(HostCall) +
                         uint64_t{l} * sizeof(launched_by_[0]);
  if (bytes > kMaxBytes) return;
  try {
    auto grow = [](auto& v, size_t n) {
      if (n <= v.capacity()) return;
      const size_t old = v.capacity();
      v.reserve(n);
      GiveBackOldArray(old * sizeof(v[0]));
    };
    grow(t_.activities, a);
    grow(t_.host_calls, h);
    grow(launched_by_, l);
  } catch (const std::bad_alloc&) {  // advice only: the vectors grow as before
  }
}

void TraceBuilder::AddEvent(const RawEvent& ev) {
  if (ev.ph == 'M') {
    if (ev.has_name && !ev.arg_name.empty() && KeyIs(ev.name, "thread_name"))
      thread_names_[{ev.pid, ev.tid}] = Text(ev.arg_name);
    return;
  }
  if (ev.ph != 'X') return;
  Cat cat = DecodeCat(ev.cat);
  switch (cat) {
    case Cat::kKernel:
    case Cat::kMemcpy:
    case Cat::kMemset:
    case Cat::kSync:
      if (opts_.store_needs.host_calls) MaybeAddEventLink(ev, cat);
      return AddActivity(ev, cat);
    case Cat::kCudaEvent:
      if (opts_.store_needs.host_calls) MaybeAddEventLink(ev, cat);
      return;
    case Cat::kRuntime: {
      HostCall h;
      int64_t end;
      if (!Times(ev, &h.start_ns, &end)) return;
      h.end_ns = end;
      h.correlation_id = ev.correlation;
      h.tid = ev.tid;
      h.name_id = ev.has_name ? InternRaw(ev.name) : 0;
      if (t_.meta.pid == kUnknown) t_.meta.pid = ev.pid;
      PushBack(t_.host_calls, h);
      return;
    }
    case Cat::kUserAnnotation:
    case Cat::kCpuOp:
    case Cat::kGpuAnnotation: {
      if (!ev.has_name) {
        t_.stats.Add(Stat::events_malformed);
        return;
      }
      constexpr char kStep[] = "ProfilerStep#";
      const bool is_step = PrefixIs(ev.name, kStep);
      if (!is_step && cat != Cat::kGpuAnnotation) MaybeAddHostCommOp(ev);
      if (cat == Cat::kCpuOp && !is_step) {
        // Rule 2: the reader parses the args (External id) of host ops that launch communication.
        if (!ev.external_id.empty() && overlapprof::IsCommHostOpName(ev.name))
          if (int64_t ext = IdFromToken(ev.external_id); ext != kUnknown)
            comm_host_ops_.emplace_back(ext, InternRaw(ev.name));
        return;
      }
      Range r;
      int64_t end;
      if (!Times(ev, &r.start_ns, &end)) return;
      r.end_ns = end;
      r.name_id = InternRaw(ev.name);
      if (cat == Cat::kGpuAnnotation) {
        r.kind = RangeKind::kGpuAnnotation;
        r.stream = t_.StreamIndex(ev.device != kUnknown ? ev.device : ev.pid, ev.stream != kUnknown ? ev.stream : ev.tid);
      } else if (is_step) {
        r.kind = RangeKind::kStep;
        r.tid = ev.tid;
        int64_t n;
        std::string_view num = ev.name.substr(sizeof kStep - 1);
        if (!ParseScaledDecimal(num, 0, &n)) n = kUnknown;
        if (n != kUnknown && !steps_seen_.insert(n).second) {
          t_.stats.Add(Stat::steps_duplicated);
          return;
        }
        r.step = n;
      } else {
        r.kind = RangeKind::kAnnotation;
        r.tid = ev.tid;
      }
      t_.ranges.push_back(r);
      return;
    }
    default:
      return;
  }
}

void TraceBuilder::AddActivity(const RawEvent& ev, Cat cat) {
  Activity a;
  int64_t end;
  if (!Times(ev, &a.start_ns, &end)) return;
  a.end_ns = end;
  if (a.end_ns == a.start_ns) t_.stats.Add(Stat::activities_zero_duration);
  a.kind = cat == Cat::kKernel   ? ActivityKind::kKernel
           : cat == Cat::kMemcpy ? ActivityKind::kMemcpy
           : cat == Cat::kMemset ? ActivityKind::kMemset
                                 : ActivityKind::kSync;
  a.name_id = ev.has_name ? InternRaw(ev.name) : 0;
  a.correlation_id = ev.correlation;
  int64_t device = ev.device != kUnknown ? ev.device : ev.in_device != kUnknown ? ev.in_device : ev.pid;
  int64_t stream = ev.stream != kUnknown ? ev.stream : ev.tid;
  if (stream == kUnknown) t_.stats.Add(Stat::activities_unknown_stream);
  a.stream = t_.StreamIndex(device, stream);
  if (a.kind == ActivityKind::kMemcpy || a.kind == ActivityKind::kMemset) a.bytes = ev.bytes;
  if (a.kind == ActivityKind::kMemcpy) {
    a.copy_kind = CopyKindFromName(t_.names.Get(a.name_id));
    // A device-to-device copy between two GPUs (fromDevice != toDevice) is a peer copy.
    if (IsPeerCopy(a.copy_kind, ev.from_device, ev.to_device)) a.copy_kind = kCopyKindPeer;
  }

  // Rule 1 (NCCL metadata: its op below), rule 3 (kernel name), rule 4 (peer copy); rule 2 (the
  // launching host op) in Finish.
  const bool has_meta = !ev.coll_name.empty();
  bool peer = false;
  if (has_meta) {
    a.category = Category::kComm;
  } else if (a.kind == ActivityKind::kKernel) {
    rank_builder_.AddKernel(t_, a);
  } else if (a.kind == ActivityKind::kMemcpy && IsPeerCopy(a.copy_kind)) {
    peer = true;
    RankTraceBuilder::AddPeerCopy(t_, a);
  } else {
    a.category = Classify(a.kind, t_.names.Get(a.name_id), false);
  }
  if (!has_meta && !ev.external_id.empty() &&
      (a.kind == ActivityKind::kKernel || (a.kind == ActivityKind::kMemcpy && !peer)))
    if (int64_t ext = IdFromToken(ev.external_id); ext != kUnknown)
      PushBack(launched_by_, static_cast<uint32_t>(t_.activities.size()), ext);
  if (has_meta) {
    CommOp& op = RankTraceBuilder::NewCommOp(t_, a, CommRule::kIdentity);
    FillFromMeta(ev, op);
    if (!ev.pg_ranks.empty()) pg_ranks_[a.comm_op] = Text(ev.pg_ranks);
    if (ev.src_rank != kUnknown || ev.dst_rank != kUnknown) p2p_ranks_[a.comm_op] = {ev.src_rank, ev.dst_rank};
  } else if (a.comm_op != kNoIndex && !peer && t_.comm_ops[a.comm_op].op == Collective::kSendRecv) {
    // NCCL runs all-to-all and send/recv as one SendRecv kernel: its host op names it (Finish).
    unnamed_p2p_.emplace_back(a.comm_op, IdFromToken(ev.external_id));
  }
  PushBack(t_.activities, a);
}

void TraceBuilder::MaybeAddEventLink(const RawEvent& ev, Cat cat) {
  SyncLink l;
  l.correlation = ev.correlation;
  l.device = ev.device != kUnknown ? ev.device : ev.pid;
  l.stream = ev.stream;
  if (cat == Cat::kCudaEvent) {
    if (l.correlation == kUnknown || l.stream == kUnknown || l.stream < 0) return;
    sync_links_.push_back(l);  // a record
    return;
  }
  // cuda_sync: "Event Sync" (cudaEventSynchronize: the host waits), any other kind naming the
  // record it waits for ("Stream Wait Event", older "Wait on stream": a stream waits).
  if (ev.wait_on_record == kUnknown || ev.wait_on_record < 0 || l.correlation == kUnknown) return;
  l.kind = ev.has_name && KeyIs(ev.name, "Event Sync") ? EventLinkKind::kHostWait : EventLinkKind::kStreamWait;
  if (l.kind == EventLinkKind::kStreamWait && (l.stream == kUnknown || l.stream < 0)) return;
  l.record = ev.wait_on_record;
  l.record_stream = ev.wait_on_stream;
  sync_links_.push_back(l);
}

void TraceBuilder::BuildEventLinks() {
  // sync id: the record call's correlation id (unique per cudaEventRecord call, as CUPTI's sync id).
  std::vector<EventLink> records;
  for (const SyncLink& s : sync_links_) {
    EventLink r;
    r.kind = EventLinkKind::kRecord;
    if (s.kind == EventLinkKind::kRecord) {
      r.correlation_id = r.sync_id = s.correlation;
      r.stream = t_.StreamIndex(s.device, s.stream);
      records.push_back(r);
      continue;
    }
    if (s.record_stream != kUnknown && s.record_stream >= 0) {
      r.correlation_id = r.sync_id = s.record;
      r.stream = t_.StreamIndex(s.device, s.record_stream);
      records.push_back(r);
    }
    EventLink w;
    w.kind = s.kind;
    w.correlation_id = s.correlation;
    w.sync_id = s.record;
    if (s.kind == EventLinkKind::kStreamWait) w.stream = t_.StreamIndex(s.device, s.stream);
    t_.event_links.push_back(w);
  }
  // One record per record call (several waits name it; a cuda_event event may too): the first.
  std::stable_sort(records.begin(), records.end(),
                   [](const EventLink& x, const EventLink& y) { return x.sync_id < y.sync_id; });
  records.erase(std::unique(records.begin(), records.end(),
                            [](const EventLink& x, const EventLink& y) { return x.sync_id == y.sync_id; }),
                records.end());
  t_.event_links.insert(t_.event_links.end(), records.begin(), records.end());
  std::vector<SyncLink>().swap(sync_links_);
}

void TraceBuilder::ClassifyByHostOp() {
  if (comm_host_ops_.empty()) return;
  // Sorted vector and binary search: the ids come from the file (no identity-hashed map,
  // src/common/file_key_map.h). Stable: the first host op with an id wins.
  std::stable_sort(comm_host_ops_.begin(), comm_host_ops_.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const auto& [index, ext] : launched_by_) {
    auto it = std::lower_bound(comm_host_ops_.begin(), comm_host_ops_.end(), ext,
                               [](const auto& x, int64_t v) { return x.first < v; });
    if (it == comm_host_ops_.end() || it->first != ext) continue;
    Activity& a = t_.activities[index];
    std::string_view host_op = t_.names.Get(it->second);
    if (a.comm_op != kNoIndex) {
      // Already communication by its kernel name: the host op is the stronger evidence
      // (rule 2 before rule 3); the kernel's own collective is kept when it names one.
      CommOp& op = t_.comm_ops[a.comm_op];
      op.rule = CommRule::kHostOp;
      if (op.op == Collective::kUnknown) op.op = CollectiveFromHostOp(host_op);
      continue;
    }
    // A copy an NCCL call or a c10d op launched: a copy-engine collective's transfer (NCCL 2.29+)
    // or the op's own staging copy; either way the op's time on the GPU (docs/classification.md).
    const CommRule rule = a.kind == ActivityKind::kMemcpy ? CommRule::kCopyEngine : CommRule::kHostOp;
    RankTraceBuilder::NewCommOp(t_, a, rule).op = CollectiveFromHostOp(host_op);
  }
}

void TraceBuilder::FillFromMeta(const RawEvent& ev, CommOp& op) {
  op.source = CommSource::kKinetoArgs;
  op.op = NormalizeCollectiveName(Text(ev.coll_name));
  op.datatype = Text(ev.dtype);
  op.count = ev.in_nelems;
  int64_t sz = DtypeSize(op.datatype);
  int64_t bytes;
  if (sz > 0 && op.count >= 0 && !__builtin_mul_overflow(op.count, sz, &bytes)) op.bytes = bytes;
  op.comm_nranks = ev.group_size;
  op.seq = ev.seq;
  op.communicator = ev.pg_name.empty() ? "unknown" : Text(ev.pg_name);
  op.pg_desc = Text(ev.pg_desc);
}

namespace {

// The integer fields of a host op that naming reads, between a RawEvent and a HostCommOp (both
// ways: kept, then made a RawEvent again).
template <typename To, typename From>
void CopyNamingInts(To& to, const From& from) {
  to.tid = from.tid;
  to.in_nelems = from.in_nelems;
  to.group_size = from.group_size;
  to.seq = from.seq;
  to.src_rank = from.src_rank;
  to.dst_rank = from.dst_rank;
}

}  // namespace

void TraceBuilder::MaybeAddHostCommOp(const RawEvent& ev) {
  if (ev.coll_name.empty() && !IsNamingHostOp(ev.name)) return;  // most host ops
  HostCommOp h;
  h.ext = IdFromToken(ev.external_id);
  CopyNamingInts(h, ev);
  // Own the bytes: the views point into the reader's window, reused after this event.
  const std::string_view strs[HostCommOp::kStrCount] = {ev.name,    ev.ts,      ev.dur,     ev.coll_name,
                                                        ev.dtype,   ev.pg_name, ev.pg_desc, ev.pg_ranks};
  h.text = host_text_.size();
  const size_t cap = host_text_.capacity();
  for (int i = 0; i < HostCommOp::kStrCount; ++i) {
    h.len[i] = static_cast<uint32_t>(strs[i].size());  // a field is at most a window (256 MiB)
    host_text_.append(strs[i]);
  }
  if (host_text_.capacity() != cap) GiveBackOldArray(cap);  // as PushBack
  PushBack(host_comm_ops_, h);
}

RawEvent TraceBuilder::Raw(const HostCommOp& h) const {
  RawEvent ev;
  std::string_view* views[HostCommOp::kStrCount] = {&ev.name,    &ev.ts,      &ev.dur,     &ev.coll_name,
                                                    &ev.dtype,   &ev.pg_name, &ev.pg_desc, &ev.pg_ranks};
  size_t at = h.text;
  for (int i = 0; i < HostCommOp::kStrCount; ++i) {
    *views[i] = std::string_view(host_text_).substr(at, h.len[i]);
    at += h.len[i];
  }
  ev.has_name = true;
  CopyNamingInts(ev, h);
  return ev;
}

bool TraceBuilder::HostOpNames(const RawEvent& h, CommOp& op) {
  if (!h.coll_name.empty()) {
    FillFromMeta(h, op);
  } else {
    // "nccl:all_to_all", "c10d::alltoall_base_", "nccl:send 0->1": the op's name after the prefix.
    std::string_view n = h.name;
    if (size_t c = n.rfind(':'); c != std::string_view::npos) n.remove_prefix(c + 1);
    n = n.substr(0, n.find(' '));
    while (!n.empty() && n.back() == '_') n.remove_suffix(1);
    op.op = NormalizeCollectiveName(n);
  }
  static constexpr Collective kOps[] = {Collective::kAllToAll,      Collective::kSend,      Collective::kRecv,
                                        Collective::kAllReduce,     Collective::kAllGather, Collective::kReduceScatter,
                                        Collective::kBroadcast,     Collective::kReduce};
  return std::find(std::begin(kOps), std::end(kOps), op.op) != std::end(kOps);
}

void TraceBuilder::NameFromHostOps() {
  if (unnamed_p2p_.empty() || host_comm_ops_.empty()) return;
  // Times, quietly (a bad one is counted where the range itself is kept), on the activities' clock.
  std::erase_if(host_comm_ops_, [&](HostCommOp& h) {
    int64_t ts, dur;
    const RawEvent raw = Raw(h);
    return !ParseJsonNumber(raw.ts, opts_.kineto.time_exp, &ts) ||
           !ParseJsonNumber(raw.dur, opts_.kineto.time_exp, &dur) || dur < 0 ||
           __builtin_add_overflow(ts, base_ns_, &h.start_ns) || __builtin_add_overflow(h.start_ns, dur, &h.end_ns);
  });
  // By External id (one with "Collective name" first).
  std::vector<std::pair<int64_t, size_t>> by_ext;
  for (size_t i = 0; i < host_comm_ops_.size(); ++i)
    if (host_comm_ops_[i].ext != kUnknown) by_ext.emplace_back(host_comm_ops_[i].ext, i);
  std::sort(by_ext.begin(), by_ext.end(), [&](const auto& x, const auto& y) {
    if (x.first != y.first) return x.first < y.first;
    return host_comm_ops_[x.second].len[HostCommOp::kColl] > host_comm_ops_[y.second].len[HostCommOp::kColl];
  });
  // By the launching thread and time: (tid, start) order.
  std::vector<size_t> by_time(host_comm_ops_.size());
  for (size_t i = 0; i < by_time.size(); ++i) by_time[i] = i;
  auto tkey = [&](size_t i) { return std::pair(host_comm_ops_[i].tid, host_comm_ops_[i].start_ns); };
  std::sort(by_time.begin(), by_time.end(), [&](size_t x, size_t y) { return tkey(x) < tkey(y); });
  for (const auto& [idx, ext] : unnamed_p2p_) {
    CommOp& op = t_.comm_ops[idx];
    const HostCommOp* h = nullptr;
    CommOp named;
    if (ext != kUnknown) {
      auto it = std::lower_bound(by_ext.begin(), by_ext.end(), ext, [](const auto& x, int64_t v) { return x.first < v; });
      for (; !h && it != by_ext.end() && it->first == ext; ++it) {
        named = CommOp{};
        if (HostOpNames(Raw(host_comm_ops_[it->second]), named)) h = &host_comm_ops_[it->second];
      }
    }
    if (!h && op.host_enter_ns != kUnknown) {
      // The innermost host op open at the launch: the latest start at or before it that still runs.
      const std::pair<int64_t, int64_t> at{op.host_tid, op.host_enter_ns};
      auto it = std::upper_bound(by_time.begin(), by_time.end(), at, [&](const auto& v, size_t i) { return v < tkey(i); });
      for (int k = 0; k < 8 && !h && it != by_time.begin(); ++k) {
        const HostCommOp& c = host_comm_ops_[*--it];
        if (c.tid != op.host_tid) break;
        named = CommOp{};
        if (c.end_ns >= op.host_enter_ns && HostOpNames(Raw(c), named)) h = &c;
      }
    }
    if (!h) continue;
    if (h->len[HostCommOp::kColl] != 0) {
      named.stream = op.stream;
      named.host_enter_ns = op.host_enter_ns;
      named.host_exit_ns = op.host_exit_ns;
      named.host_tid = op.host_tid;
      op = std::move(named);
      op.rule = CommRule::kIdentity;  // "Collective name" of the host op that launched it
      if (h->len[HostCommOp::kPgRanks] != 0) pg_ranks_[idx] = Text(Raw(*h).pg_ranks);
      if (h->src_rank != kUnknown || h->dst_rank != kUnknown) p2p_ranks_[idx] = {h->src_rank, h->dst_rank};
    } else {
      op.op = named.op;
      op.rule = CommRule::kHostOp;
    }
  }
}

std::string TraceBuilder::Text(std::string_view raw) {
  kineto::UnescapeIssues issues;
  std::string s = kineto::Unescape(raw, &issues);
  if (issues.replaced > 0) t_.stats.Add(Stat::invalid_utf8_replaced, static_cast<int64_t>(issues.replaced));
  bad_escape_ |= issues.invalid;
  return s;
}

Status TraceBuilder::Finish() {
  if (bad_escape_)
    return MakeError(StatusCode::kInvalidInput,
                     "not JSON: a string holds an invalid escape (\\u without 4 hex digits, or a backslash before a "
                     "character JSON does not escape)");
  t_.meta.source_format = "kineto";
  t_.meta.clock_source = have_base_ ? "kineto: baseTimeNanoseconds + ts" : "kineto: ts";
  if (!have_rank_) t_.stats.Set(Stat::rank_unknown, 1);
  if (have_base_ && base_ns_ != 0) {
    auto shift = [&](int64_t& x) {
      if (__builtin_add_overflow(x, base_ns_, &x) || !TimeInRange(x)) overflow_ = true;
    };
    for (Activity& a : t_.activities) { shift(a.start_ns); shift(a.end_ns); }
    for (HostCall& h : t_.host_calls) { shift(h.start_ns); shift(h.end_ns); }
    for (Range& r : t_.ranges) { shift(r.start_ns); shift(r.end_ns); }
    if (overflow_)
      return MakeError(StatusCode::kInvalidInput,
                       "baseTimeNanoseconds + ts falls outside 0..2^62 ns (the range overlapprof accepts)");
  }
  ClassifyByHostOp();
  BuildEventLinks();  // before the streams are named: it may add the streams events were recorded on
  for (Stream& s : t_.streams) {
    auto it = thread_names_.find({s.device, s.native_id});
    s.name = it != thread_names_.end() ? it->second : fmt::format("stream {}", s.native_id);
  }
  // Correlate GPU activities with the host calls that launched them (in file order: the first
  // call with an id wins).
  rank_builder_.LinkLaunches(t_, t_.host_calls);
  NameFromHostOps();
  // This rank's index in its process group, from "Process Group Ranks" ("[0, 1]").
  auto position = [](const std::string& ranks, int64_t rank) -> int64_t {
    int64_t pos = 0;
    const char* p = ranks.c_str();
    while (*p) {
      while (*p && !(*p >= '0' && *p <= '9') && *p != '-') ++p;
      if (!*p) break;
      char* endp;
      long long r = std::strtoll(p, &endp, 10);
      if (endp == p) break;
      if (r == rank) return pos;
      ++pos;
      p = endp;
    }
    return kUnknown;
  };
  if (t_.meta.rank != kUnknown) {
    for (const auto& [idx, ranks] : pg_ranks_) {
      const int64_t pos = position(ranks, t_.meta.rank);
      if (pos != kUnknown) t_.comm_ops[idx].comm_rank = pos;
    }
  }
  // Send/recv peers: "Src Rank"/"Dst Rank" are global ranks; CommOp::root_peer is the peer's rank
  // in the process group (its position in "Process Group Ranks"; the global rank without them, as
  // is this rank's own comm_rank then).
  for (const auto& [idx, sd] : p2p_ranks_) {
    CommOp& op = t_.comm_ops[idx];
    const int64_t peer = op.op == Collective::kSend ? sd.second : op.op == Collective::kRecv ? sd.first : kUnknown;
    if (peer == kUnknown) continue;
    auto pr = pg_ranks_.find(idx);
    if (pr != pg_ranks_.end()) {
      op.root_peer = position(pr->second, peer);
    } else {
      op.root_peer = peer;
      if (op.comm_rank == kUnknown) op.comm_rank = t_.meta.rank;
    }
  }
  // Host calls were kept to link launches (above). An import for analyses that do not read them
  // (`analyze`'s analyzers and reports: ImportOptions::store_needs) hands none over, as a store
  // read for them decodes none: 40 bytes per runtime call less while the rank is analyzed.
  if (!opts_.store_needs.host_calls) std::vector<HostCall>().swap(t_.host_calls);
  t_.Finalize();
  return OkStatus();
}

}  // namespace overlapprof::kineto
