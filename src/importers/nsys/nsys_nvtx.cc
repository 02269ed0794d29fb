#include "src/importers/nsys/nsys_nvtx.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <tuple>

#include "src/trace/classify.h"
#include "src/trace/rank_builder.h"

namespace overlapprof::nsys {

// "ncclAllReduce" -> a collective "allreduce"; ncclSend/ncclRecv; ncclGroupStart/End; the rest
// (ncclCommCount, communicator calls such as ncclCommInitRank*) are kOther.
NcclRange NcclApiOf(std::string_view name) {
  NcclRange r{};
  static constexpr Collective kCollectives[] = {Collective::kAllReduce,  Collective::kBroadcast,
                                                Collective::kReduce,     Collective::kAllGather,
                                                Collective::kReduceScatter, Collective::kAllToAll,
                                                Collective::kGather,     Collective::kScatter};
  if (name == "ncclGroupEnd") {
    r.api = NcclApi::kGroupEnd;
  } else if (name == "ncclGroupStart") {
    r.api = NcclApi::kGroupStart;
  } else if (name == "ncclSend") {
    r.api = NcclApi::kSend;
  } else if (name == "ncclRecv") {
    r.api = NcclApi::kRecv;
  } else {
    const Collective op = NormalizeCollectiveName(name);
    if (std::find(std::begin(kCollectives), std::end(kCollectives), op) != std::end(kCollectives)) {
      r.api = NcclApi::kCollective;
      r.op = op;
    }
  }
  return r;
}

namespace {

// The payloads of the calls [begin, end) behind one op (its collective, send or receive, or the
// calls of its group): every call must have one, all of one communicator; the op's bytes are
// their sum (a group's calls run in the op's one kernel) when each says its size; the root or
// peer only for a single call. Anything short of that leaves the op as it was.
template <typename It>
void ApplyPayloads(CommOp& op, It begin, It end, const std::map<uint64_t, std::pair<int64_t, int64_t>>& members) {
  std::optional<uint64_t> comm;
  int64_t bytes = 0, calls = 0;
  bool all_bytes = true;
  for (It it = begin; it != end; ++it) {
    if (it->api != NcclApi::kCollective && it->api != NcclApi::kSend && it->api != NcclApi::kRecv) continue;
    if (!it->payload || !it->payload->communicator) return;
    if (comm && *comm != *it->payload->communicator) return;
    comm = it->payload->communicator;
    ++calls;
    if (it->payload->bytes && *it->payload->bytes <= (int64_t{1} << 50) - bytes) bytes += *it->payload->bytes;
    else all_bytes = false;
  }
  if (!comm || calls == 0) return;
  op.communicator = fmt::format("{:016x}", *comm);  // as the injector names NCCL communicators
  if (all_bytes) op.bytes = bytes;
  if (auto m = members.find(*comm); m != members.end()) {
    op.comm_rank = m->second.first;
    op.comm_nranks = m->second.second;
  }
  if (calls == 1) {
    const NcclPayload& p = *std::find_if(begin, end, [](const NcclRange& r) {
      return r.api == NcclApi::kCollective || r.api == NcclApi::kSend || r.api == NcclApi::kRecv;
    })->payload;
    if (p.peer) op.root_peer = *p.peer;
    else if (p.root) op.root_peer = *p.root;
  }
}

}  // namespace

// NCCL annotates its API calls with NVTX ranges (domain "NCCL"; exports without the payload
// still have the names). A communication kernel's launch (its runtime call, linked by the reader)
// lies inside the call that launched it: the collective's own range (ncclAllReduce), or the
// ncclGroupEnd of a group, whose calls are the NCCL ranges of that thread since its
// ncclGroupStart (else since the previous ncclGroupEnd). The op is named from them when they
// agree: one collective type, or sends and receives only (send, recv, sendrecv). Otherwise it
// keeps the kernel's name. With their payloads (ApplyPayloads), the op also gets its bytes,
// communicator, the rank's place in it (from the communicator's ncclCommInitRank* payload) and
// its root or peer. Linear in the ranges plus, per op, a binary search and its group's calls.
void NameOpsFromNcclRanges(std::vector<NcclRange>& ranges, RankTrace& trace, const std::vector<CopyLaunch>& copies) {
  if (ranges.empty()) return;
  std::sort(ranges.begin(), ranges.end(), [](const NcclRange& a, const NcclRange& b) {
    return std::tie(a.tid, a.start_ns, a.end_ns) < std::tie(b.tid, b.start_ns, b.end_ns);
  });
  // Each ncclGroupEnd's ncclGroupStart, matched per thread in call order (groups nest; -1: none),
  // and the latest end of a thread's ranges up to each (the search below stops where it is
  // before the launch: no earlier range holds it).
  std::vector<int64_t> group_start(ranges.size(), -1), max_end(ranges.size());
  {
    std::vector<int64_t> open;
    for (size_t i = 0; i < ranges.size(); ++i) {
      const bool new_thread = i == 0 || ranges[i].tid != ranges[i - 1].tid;
      if (new_thread) open.clear();
      max_end[i] = new_thread ? ranges[i].end_ns : std::max(max_end[i - 1], ranges[i].end_ns);
      if (ranges[i].api == NcclApi::kGroupStart) {
        open.push_back(static_cast<int64_t>(i));
      } else if (ranges[i].api == NcclApi::kGroupEnd && !open.empty()) {
        group_start[i] = open.back();
        open.pop_back();
      }
    }
  }
  // This process's rank and size in each communicator it initialized.
  std::map<uint64_t, std::pair<int64_t, int64_t>> members;
  for (const NcclRange& r : ranges)
    if (r.payload && r.payload->communicator && r.payload->rank && r.payload->nranks)
      members[*r.payload->communicator] = {*r.payload->rank, *r.payload->nranks};
  // The ranges of thread `tid` that started at or before `t` ([first, last)) and the innermost
  // one holding t (the latest-starting of them that has not ended; `last` when none).
  auto innermost = [&](int64_t tid, int64_t t) {
    auto first = std::lower_bound(ranges.begin(), ranges.end(), tid,
                                  [](const NcclRange& r, int64_t tid) { return r.tid < tid; });
    auto last = std::upper_bound(first, ranges.end(), std::make_pair(tid, t),
                                 [](const std::pair<int64_t, int64_t>& k, const NcclRange& r) {
                                   return std::tie(k.first, k.second) < std::tie(r.tid, r.start_ns);
                                 });
    // Bounded: NCCL's ranges do not nest (but for groups), so the one holding a launch is among
    // the last few; a file whose ranges all overlap costs at most kMaxBack steps per op.
    constexpr int kMaxBack = 4096;
    auto inner = last;
    int steps = 0;
    for (auto it = last; it != first && steps < kMaxBack; ++steps) {
      --it;
      if (max_end[static_cast<size_t>(it - ranges.begin())] < t) break;
      if (it->end_ns >= t) {
        inner = it;
        break;
      }
    }
    return std::tuple(first, last, inner);
  };
  if (!copies.empty()) {
    // The memcpys not yet communication, by correlation id (ids from the file: a sorted vector).
    std::vector<std::pair<int64_t, uint32_t>> by_corr;
    for (uint32_t i = 0; i < trace.activities.size(); ++i) {
      const Activity& a = trace.activities[i];
      if (a.kind == ActivityKind::kMemcpy && a.comm_op == kNoIndex && a.correlation_id != kUnknown)
        by_corr.emplace_back(a.correlation_id, i);
    }
    std::sort(by_corr.begin(), by_corr.end());
    // One op per NCCL call: the op of a kernel launched inside the same range, else the first
    // copy's (by range index).
    std::map<size_t, uint32_t> op_of_range;
    for (uint32_t i = 0; i < trace.comm_ops.size(); ++i) {
      const CommOp& op = trace.comm_ops[i];
      if (op.host_tid == kUnknown || op.host_enter_ns == kUnknown) continue;
      auto [first, last, inner] = innermost(op.host_tid, op.host_enter_ns);
      if (inner != last) op_of_range.emplace(static_cast<size_t>(inner - ranges.begin()), i);
    }
    for (const CopyLaunch& c : copies) {
      auto [first, last, inner] = innermost(c.tid, c.start_ns);
      if (inner == last || inner->api == NcclApi::kOther || inner->api == NcclApi::kGroupStart) continue;
      const size_t range = static_cast<size_t>(inner - ranges.begin());
      for (auto it = std::lower_bound(by_corr.begin(), by_corr.end(), std::pair(c.correlation, uint32_t{0}));
           it != by_corr.end() && it->first == c.correlation; ++it) {
        Activity& a = trace.activities[it->second];
        if (a.comm_op != kNoIndex) continue;
        if (auto known = op_of_range.find(range); known != op_of_range.end()) {
          a.comm_op = known->second;  // the call's op: its kernel's, or its first copy's
          a.category = Category::kComm;
          continue;
        }
        CommOp& op = RankTraceBuilder::NewCommOp(trace, a, CommRule::kCopyEngine);
        op.bytes = a.bytes;
        op.host_tid = c.tid;
        op.host_enter_ns = c.start_ns;
        op_of_range.emplace(range, a.comm_op);
      }
    }
  }
  for (CommOp& op : trace.comm_ops) {
    if (op.host_tid == kUnknown || op.host_enter_ns == kUnknown) continue;
    auto [first, last, inner] = innermost(op.host_tid, op.host_enter_ns);
    if (inner == last) continue;
    Collective name = Collective::kUnknown;
    auto calls_begin = inner, calls_end = std::next(inner);  // the calls behind the op
    if (inner->api == NcclApi::kGroupEnd) {
      // The group's calls: since its ncclGroupStart (groups nest: the launch is in the
      // outermost ncclGroupEnd), else, without ncclGroupStart ranges, since the previous
      // ncclGroupEnd of this thread.
      auto begin = inner;
      const int64_t start = group_start[static_cast<size_t>(inner - ranges.begin())];
      if (start >= first - ranges.begin()) {
        begin = ranges.begin() + start + 1;
      } else {
        while (begin != first && std::prev(begin)->api != NcclApi::kGroupEnd) --begin;
      }
      bool sends = false, recvs = false, other = false;
      Collective coll = Collective::kUnknown;
      for (auto it = begin; it != inner; ++it) {
        if (it->api == NcclApi::kSend) sends = true;
        else if (it->api == NcclApi::kRecv) recvs = true;
        else if (it->api == NcclApi::kCollective) {
          if (coll == Collective::kUnknown) coll = it->op;
          else if (coll != it->op) other = true;
        }
      }
      if (other || (coll != Collective::kUnknown && (sends || recvs))) continue;  // a mixed group: the kernel's name stays
      calls_begin = begin;
      calls_end = inner;
      if (coll != Collective::kUnknown) name = coll;
      else if (sends && recvs) name = Collective::kSendRecv;
      else if (sends) name = Collective::kSend;
      else if (recvs) name = Collective::kRecv;
    } else if (inner->api == NcclApi::kSend) {
      name = Collective::kSend;
    } else if (inner->api == NcclApi::kRecv) {
      name = Collective::kRecv;
    } else if (inner->api == NcclApi::kCollective) {
      name = inner->op;
    }
    if (name == Collective::kUnknown) continue;
    op.op = name;
    trace.stats.Add(Stat::nsys_ops_named_from_nccl_ranges);
    ApplyPayloads(op, calls_begin, calls_end, members);
  }
  std::vector<NcclRange>().swap(ranges);
}

// NCCL's payload schemas (nvtx_payload.h): small tables (NCCL 2.28
// registers 6 schemas of 34 entries). A file listing more than kMaxRows in either is not
// NCCL's: nothing is decoded from it rather than memory spent on it.
StatusOr<NvtxPayloadSchemas> ReadPayloadSchemas(const NsysDb& db) {
  NvtxPayloadSchemas schemas;
  if (!db.Has(kPayloadSchemas) || !db.Has(kPayloadEntries)) return schemas;
  OVERLAPPROF_ASSIGN_OR_RETURN(auto sc, db.Columns(kPayloadSchemas));
  OVERLAPPROF_ASSIGN_OR_RETURN(auto ec, db.Columns(kPayloadEntries));
  for (const char* c : {"schemaId", "payloadSize"})
    if (!sc.count(c)) return schemas;
  for (const char* c : {"schemaId", "idx", "type", "name"})
    if (!ec.count(c)) return schemas;
  // Each row of `sql` to `row`; false when the table has more than kMaxRows.
  auto each = [&](const char* table, const std::string& sql, auto&& row) -> StatusOr<bool> {
    constexpr int64_t kMaxRows = 65536;
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(db.Prep(s, sql));
    for (int64_t n = 0;; ++n) {
      StatusOr<bool> more = s.Step(table);
      if (!more.ok()) return DamagedFile(more.status());
      if (!*more) return true;
      if (n == kMaxRows) return false;
      row(s, SqlRow{s.get()});
    }
  };
  OVERLAPPROF_ASSIGN_OR_RETURN(
      bool fits, each(kPayloadSchemas,
                      fmt::format("SELECT {}, schemaId, payloadSize FROM {}", sc.count("domainId") ? "domainId" : "0",
                                  kPayloadSchemas),
                      [&](Stmt&, SqlRow r) {
                        if (r.IsInt(1) && r.IsInt(2)) schemas.AddSchema(r.Int(0), r.Int(1), r.Int(2));
                      }));
  if (fits) {
    OVERLAPPROF_ASSIGN_OR_RETURN(
        fits, each(kPayloadEntries,
                   fmt::format("SELECT {}, schemaId, idx, type, name, {} FROM {}",
                               ec.count("domainId") ? "domainId" : "0", ec.count("offset") ? "\"offset\"" : "NULL",
                               kPayloadEntries),
                   [&](Stmt& s, SqlRow r) {
                     if (!r.IsInt(1) || !r.IsInt(2) || !r.IsInt(3)) return;
                     // A NULL offset is the first entry's 0 (as exported); any other non-integer: not decodable.
                     const int64_t offset =
                         r.IsInt(5) ? r.Int(5) : sqlite3_column_type(r.st, 5) == SQLITE_NULL ? 0 : -1;
                     schemas.AddEntry(r.Int(0), r.Int(1), r.Int(2), r.Int(3), s.Text(4), offset);
                   }));
  }
  if (!fits) schemas = NvtxPayloadSchemas();
  return schemas;
}

}  // namespace overlapprof::nsys
