#include "src/store/plugin_join.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "src/common/stats.h"
#include "src/store/schema.h"
#include "src/store/sqlite_util.h"
#include "src/store/writer.h"

namespace overlapprof {
namespace {

struct Call {
  int64_t id, seq, count, root_peer, rank, nranks, bytes;
  std::string communicator;
  Collective op = Collective::kUnknown;
};
struct PluginRow {
  int64_t id, hash, rank, nranks, nccl_seq, count, root_peer, flags, host_start, bytes;
  std::string communicator;
  Collective op = Collective::kUnknown;
  bool gpu_times = false;  // GPU times on the trace clock (not a copy-engine op)
  int64_t match = -1;
};

bool IsP2p(Collective op) { return op == Collective::kSend || op == Collective::kRecv; }

// The call's size agrees with the plugin's: in bytes where both know them, since NCCL reports
// its non-reducing collectives (broadcast, all-gather) as ncclInt8 with the count in bytes
// (seen with NCCL 2.28.9), else in elements.
bool SameSize(const Call& c, const PluginRow& r) {
  if (c.bytes >= 0 && r.bytes >= 0) return c.bytes == r.bytes;
  return c.count == r.count;
}

}  // namespace

StatusOr<NcclPluginJoin> JoinNcclProfilerOps(const std::string& path) {
  NcclPluginJoin out;
  Db db;
  OVERLAPPROF_RETURN_IF_ERROR(db.Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX));
  sqlite3* h = db.get();
  {
    Stmt t;
    OVERLAPPROF_RETURN_IF_ERROR(t.Prepare(h, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?"));
    t.Bind(1, kNcclProfilerOpTable);
    OVERLAPPROF_ASSIGN_OR_RETURN(bool has, t.Step("find nccl_profiler_op"));
    if (!has) return out;
    Stmt j;
    OVERLAPPROF_RETURN_IF_ERROR(j.Prepare(h, "SELECT 1 FROM meta WHERE key='nccl_profiler_joined'"));
    OVERLAPPROF_ASSIGN_OR_RETURN(bool joined, j.Step("meta nccl_profiler_joined"));
    if (joined) return out;
  }
  std::vector<PluginRow> rows;
  {
    Stmt q;
    OVERLAPPROF_RETURN_IF_ERROR(q.Prepare(
        h, "SELECT id, communicator, nccl_comm_hash, comm_rank, comm_nranks, op, nccl_seq, count, root_peer, flags, "
           "host_start_ns, start_ns IS NOT NULL AND end_ns IS NOT NULL AND (flags & 2) = 0, bytes "
           "FROM nccl_profiler_op ORDER BY id"));
    for (;;) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool row, q.Step("select nccl_profiler_op"));
      if (!row) break;
      rows.push_back({q.Int(0), q.Int(2), q.OptionalInt(3), q.OptionalInt(4), q.OptionalInt(6), q.OptionalInt(7),
                      q.OptionalInt(8), q.Int(9), q.OptionalInt(10), q.OptionalInt(12), std::string(q.Text(1)),
                      ParseCollective(q.Text(5)), q.Int(11) != 0});
    }
  }
  if (rows.empty()) return out;
  std::vector<Call> calls;
  {
    Stmt q;
    OVERLAPPROF_RETURN_IF_ERROR(q.Prepare(
        h, "SELECT id, communicator, seq, op, count, root_peer, comm_rank, comm_nranks, bytes FROM comm_op ORDER BY id"));
    for (;;) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool row, q.Step("select comm_op"));
      if (!row) break;
      calls.push_back({q.Int(0), q.OptionalInt(2), q.OptionalInt(4), q.OptionalInt(5), q.OptionalInt(6),
                       q.OptionalInt(7), q.OptionalInt(8), std::string(q.Text(1)), ParseCollective(q.Text(3))});
    }
  }
  // Communicators the plugin did not name: the one of the same rank and size no other
  // NCCL communicator (hash) took.
  std::set<std::string> taken;
  for (const auto& r : rows)
    if (!r.communicator.empty()) taken.insert(r.communicator);
  std::map<int64_t, std::string> by_hash;
  for (const auto& r : rows) {
    if (!r.communicator.empty() || by_hash.count(r.hash)) continue;
    std::set<std::string> cands;
    for (const auto& c : calls)
      if (c.rank == r.rank && c.nranks == r.nranks && !taken.count(c.communicator)) cands.insert(c.communicator);
    by_hash[r.hash] = cands.size() == 1 ? *cands.begin() : std::string();
    if (cands.size() == 1) taken.insert(*cands.begin());
  }
  for (auto& r : rows)
    if (r.communicator.empty()) r.communicator = by_hash[r.hash];

  // Calls per (communicator, op) in sequence order, and per (communicator, op, peer) for p2p.
  std::map<std::pair<std::string, Collective>, std::vector<size_t>> colls;
  std::map<std::tuple<std::string, Collective, int64_t>, std::vector<size_t>> p2p;
  std::vector<size_t> order(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(calls[a].communicator, calls[a].seq) < std::tie(calls[b].communicator, calls[b].seq);
  });
  for (size_t i : order) {
    const Call& c = calls[i];
    if (IsP2p(c.op))
      p2p[{c.communicator, c.op, c.root_peer}].push_back(i);
    else
      colls[{c.communicator, c.op}].push_back(i);
  }
  // Point-to-point events in the order NCCL started them.
  std::vector<size_t> porder(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) porder[i] = i;
  std::stable_sort(porder.begin(), porder.end(),
                   [&](size_t a, size_t b) { return std::tie(rows[a].host_start, rows[a].id) < std::tie(rows[b].host_start, rows[b].id); });
  std::map<std::tuple<std::string, Collective, int64_t>, size_t> p2p_next;
  std::vector<bool> used(calls.size(), false);
  for (size_t k : porder) {
    PluginRow& r = rows[k];
    if (r.communicator.empty()) continue;
    const std::vector<size_t>* list = nullptr;
    size_t at = 0;
    if (IsP2p(r.op)) {
      auto key = std::make_tuple(r.communicator, r.op, r.root_peer);
      auto it = p2p.find(key);
      if (it == p2p.end()) continue;
      list = &it->second;
      at = p2p_next[key]++;
    } else {
      auto it = colls.find({r.communicator, r.op});
      if (it == colls.end() || r.nccl_seq < 0) continue;
      list = &it->second;
      at = static_cast<size_t>(r.nccl_seq);
    }
    if (at >= list->size()) continue;
    size_t ci = (*list)[at];
    if (used[ci] || !SameSize(calls[ci], r)) continue;
    used[ci] = true;
    r.match = calls[ci].id;
  }
  std::set<std::string> profiled;
  for (const auto& r : rows)
    if (!r.communicator.empty()) profiled.insert(r.communicator);
  out.plugin_ops = static_cast<int64_t>(rows.size());
  for (const auto& r : rows) (r.match >= 0 ? out.matched : out.plugin_unmatched)++;
  for (size_t i = 0; i < calls.size(); ++i)
    if (!used[i] && profiled.count(calls[i].communicator)) ++out.calls_unmatched;

  OVERLAPPROF_RETURN_IF_ERROR(db.Exec("BEGIN"));
  Stmt up, stat, meta;
  OVERLAPPROF_RETURN_IF_ERROR(up.Prepare(h, "UPDATE nccl_profiler_op SET comm_op_id = ?, communicator = ? WHERE id = ?"));
  for (const auto& r : rows) {
    if (r.match < 0 && r.communicator.empty()) continue;
    up.BindOptional(1, r.match);
    if (r.communicator.empty())
      up.BindNull(2);
    else
      up.Bind(2, r.communicator);
    up.Bind(3, r.id);
    OVERLAPPROF_RETURN_IF_ERROR(up.StepDone("update nccl_profiler_op"));
  }
  OVERLAPPROF_RETURN_IF_ERROR(stat.Prepare(h, store_detail::kInsertStatSql));
  for (auto [s, v] : {std::pair{Stat::nccl_plugin_ops_unmatched, out.plugin_unmatched},
                      std::pair{Stat::nccl_plugin_calls_unmatched, out.calls_unmatched}}) {
    const StatInfo& info = GetStatInfo(s);
    stat.Bind(1, info.name);
    stat.Bind(2, SeverityName(info.severity));
    stat.Bind(3, v);
    stat.Bind(4, info.description);
    OVERLAPPROF_RETURN_IF_ERROR(stat.StepDone("insert stats"));
  }
  OVERLAPPROF_RETURN_IF_ERROR(meta.Prepare(h, "INSERT OR REPLACE INTO meta(key, value) VALUES('nccl_profiler_joined', 1)"));
  OVERLAPPROF_RETURN_IF_ERROR(meta.StepDone("insert meta"));
  // What the analysis will time communication by (docs/nccl-profiler.md, "timing_source"):
  // the plugin's per-op GPU times when any joined op has them, else the kernels.
  for (const auto& r : rows)
    if (r.match >= 0 && r.gpu_times) ++out.timed;
  Stmt ts;
  OVERLAPPROF_RETURN_IF_ERROR(ts.Prepare(h, "INSERT OR REPLACE INTO meta(key, value) VALUES('timing_source', ?)"));
  ts.Bind(1, std::string_view(out.timed > 0 ? "nccl_profiler" : "kernels"));
  OVERLAPPROF_RETURN_IF_ERROR(ts.StepDone("insert meta"));
  OVERLAPPROF_RETURN_IF_ERROR(db.Exec("COMMIT"));
  return out;
}

}  // namespace overlapprof
