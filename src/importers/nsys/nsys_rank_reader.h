#pragma once
// One rank of an Nsight Systems export ((process, GPU) pair) read into a RankTrace: its GPU
// tables, the runtime calls that launched its work, NVTX, its device and host, its rank from the
// environment nsys ran in. Reads its own rows (a direct scan, SQL, or its part of a Partition);
// NsysFileSession may instead feed it rows of a pass over a whole table (GpuRow, RuntimeRow),
// shared with the file's other ranks. One reader per rank and thread; it holds its own
// connection.
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/importers/nsys/nsys_nvtx.h"
#include "src/importers/nsys/nsys_rows.h"
#include "src/importers/nsys/nsys_schema.h"
#include "src/trace/classify.h"
#include "src/trace/model.h"
#include "src/trace/rank_builder.h"

namespace overlapprof::nsys {

// Maps the pages of a vector's reserved capacity (1 MiB and more) in one call: one page fault
// per 4 KiB page filled costs about 2 us on a VM (docs/performance.md). Advice only: an older kernel (before
// 5.14) says EINVAL and the pages fault in as used.
void Prefault(void* p, size_t bytes);

class NsysRankReader {
 public:
  // Opens the export (NsysDb::Open: an error when it is not an export with kernels).
  Status Open(const std::string& path) { return db_.Open(path); }
  const NsysDb& db() const { return db_; }

  // The first step: the rank, what is asked for, the clock, the string lookup. `sql`: every
  // table through SQL (NsysReadMode::kSql), else read directly where the table allows.
  Status Begin(const UnitKey& unit, const TraceNeeds& needs, bool sql);
  // What the reader is asked for, changed after Begin (a rank built while listing, for its import).
  void SetNeeds(const TraceNeeds& needs) { needs_ = needs; }
  // Sizes the activities for `rows` GPU rows (the listing's count), in one allocation.
  void ReserveActivities(uint64_t rows);
  // This rank's GPU and runtime rows come from `partition` (null: scans of the tables).
  void UsePartition(std::shared_ptr<const Partition> partition) { partition_ = std::move(partition); }
  // The GPU-activity tables and the runtime calls of this rank, read by the reader itself.
  Status ReadTables();
  // The last step, after the GPU and runtime tables: NVTX, the device and host, the rank.
  // `units_in_file`: how many ranks the export holds (asked only when its environment names a
  // rank, which is this rank's only when the export holds one).
  StatusOr<RankTrace> Finish(const std::function<StatusOr<size_t>()>& units_in_file);

  // A table's rows fed by a pass over the whole table (the file's other ranks' rows are skipped):
  // BeginGpuTable, then GpuRow for each row of a GPU-activity table (NsysDb::GpuColumns);
  // BeginRuntime, then RuntimeRow for each row of the runtime table (NsysDb::RuntimeColumns) when
  // it says true, then EndRuntime.
  void BeginGpuTable() { memset_name_ = t_.names.Intern("Memset"); }
  template <typename Row>
  Status GpuRow(const Row& row, const GpuTable& g);
  StatusOr<bool> BeginRuntime();
  template <typename Row>
  Status RuntimeRow(const Row& row);
  template <typename Row>
  StatusOr<bool> ReadRuntimeCall(const Row& row, int64_t corr, HostCall* h);
  void EndRuntime();

  size_t activity_count() const { return t_.activities.size(); }
  // Bytes held by the records read so far (activities and comm ops, by capacity).
  uint64_t Bytes() const {
    return t_.activities.capacity() * sizeof(Activity) + t_.comm_ops.capacity() * sizeof(CommOp);
  }

 private:
  Status ReadClock();
  // Applies the clock offset; false (and counted) when the time does not fit.
  bool Shift(int64_t* t) {
    int64_t v;
    if (__builtin_add_overflow(*t, offset_, &v) || !TimeInRange(v)) return false;
    *t = v;
    return true;
  }

  // [start, end) from columns 0 and 1 of the current row, moved onto the trace clock; false
  // (and counted: malformed, negative duration, out of range) when the row cannot be used.
  template <typename Row>
  bool ReadSpan(const Row& st, int64_t* start, int64_t* end) {
    if (!st.IsInt(0) || !st.IsInt(1)) {
      t_.stats.Add(Stat::events_malformed);
      return false;
    }
    *start = st.Int(0);
    *end = st.Int(1);
    if (*end < *start) {
      t_.stats.Add(Stat::events_negative_duration);
      return false;
    }
    if (!Shift(start) || !Shift(end)) {
      t_.stats.Add(Stat::events_timestamp_out_of_range);
      return false;
    }
    return true;
  }

  StatusOr<uint32_t> Name(int64_t string_id) {
    if (string_id == last_string_id_) return last_name_;
    // Ids below kDenseNames (nsys numbers its strings densely from 0): a vector lookup.
    constexpr int64_t kDenseNames = int64_t{1} << 20;
    const bool dense = string_id >= 0 && string_id < kDenseNames;
    if (dense && static_cast<size_t>(string_id) < dense_names_.size() && dense_names_[string_id] != kNoName) {
      last_string_id_ = string_id;
      last_name_ = dense_names_[string_id];
      return last_name_;
    }
    auto it = names_.find(string_id);
    if (it == names_.end()) {
      strings_.Bind(1, string_id);
      StatusOr<bool> row = strings_.Step("StringIds lookup");
      if (!row.ok()) {
        strings_.Reset();
        return DamagedFile(row.status());
      }
      uint32_t id = *row ? t_.names.Intern(strings_.Text(0)) : 0;
      strings_.Reset();
      it = names_.emplace(string_id, id).first;
    }
    if (dense) {
      if (static_cast<size_t>(string_id) >= dense_names_.size()) dense_names_.resize(string_id + 1, kNoName);
      dense_names_[string_id] = it->second;
    }
    last_string_id_ = string_id;
    last_name_ = it->second;
    return it->second;
  }

  Status ReadGpuTable(GpuTable g);
  // The recorded dependencies (RankTrace::event_links, docs/what-if.md): a synchronization row
  // waiting for an event record (syncType 1 event synchronize, 2 stream wait), and the records
  // (kCudaEvent, read by BeginRuntime). Their API calls are kept as host calls (event_calls_).
  void AddEventWait(int64_t sync_type, int64_t sync_id, const Activity& a);
  Status ReadEventRecords();
  std::vector<int64_t> event_calls_;  // correlation ids of the event calls, sorted by BeginRuntime
  Status ReadRuntime();
  Status ReadNvtx();
  Status ReadDeviceAndHost();
  StatusOr<std::optional<std::string>> SystemEnv(std::string_view name);
  Status ReadRankFromEnvironment(const std::function<StatusOr<size_t>()>& units_in_file);

  NsysDb db_;
  bool sql_ = false;  // Begin
  UnitKey unit_;
  TraceNeeds needs_;
  RankTrace t_;
  int64_t offset_ = 0;
  std::string clock_source_;
  Stmt strings_;
  std::map<int64_t, uint32_t> names_;  // StringIds id -> StringTable id (ordered: keys from the file)
  static constexpr uint32_t kNoName = UINT32_MAX;
  std::vector<uint32_t> dense_names_;  // StringIds id -> StringTable id, kNoName: not looked up yet
  int64_t last_string_id_ = -1;
  uint32_t last_name_ = 0;
  RankTraceBuilder builder_;  // kernels' and peer copies' comm ops, launch links
  bool launches_counted_ = false;  // EndRuntime counted the unmatched launches
  std::shared_ptr<const Partition> partition_;  // this rank's rows, spilled (null: scan the tables)
  uint32_t memset_name_ = 0;  // BeginGpuTable
  std::vector<NcclRange> nccl_ranges_;  // NCCL's API ranges of this process (ReadNvtx), ns on the trace clock
  // Copy-engine communication (NameOpsFromNcclRanges): the correlation ids of the memcpys that
  // are not communication (sorted; BeginRuntime), and the calls that launched them (RuntimeRow).
  std::vector<int64_t> copy_correlations_;
  std::vector<CopyLaunch> copy_launches_;
};

// One row of a GPU-activity table (GpuColumns), any rank: others are skipped.
template <typename Row>
Status NsysRankReader::GpuRow(const Row& row, const GpuTable& g) {
  if (!row.IsInt(8) || row.Int(8) != unit_.device || PidOf(row, 9) != unit_.pid) return OkStatus();
  Activity a;
  if (!ReadSpan(row, &a.start_ns, &a.end_ns)) return OkStatus();
  if (a.end_ns == a.start_ns) t_.stats.Add(Stat::activities_zero_duration);
  a.kind = g.kind;
  int64_t stream = kUnknown;
  if (row.IsInt(2)) stream = row.Int(2);
  else t_.stats.Add(Stat::activities_unknown_stream);
  a.stream = t_.StreamIndex(unit_.device, stream);
  if (row.IsInt(3)) a.correlation_id = row.Int(3);
  switch (g.kind) {
    case ActivityKind::kKernel: {
      if (row.IsInt(4)) {
        OVERLAPPROF_ASSIGN_OR_RETURN(a.name_id, Name(row.Int(4)));
      }
      builder_.AddKernel(t_, a);  // rule 3, its comm op
      break;
    }
    case ActivityKind::kMemcpy: {
      int64_t kind = row.IsInt(6) ? row.Int(6) : 0;
      if (kind < 0 || kind > 255) kind = 0;
      a.copy_kind = static_cast<uint8_t>(kind);
      a.name_id = t_.names.Intern(CopyKindName(kind));
      // Peer-to-peer copies move data between GPUs: communication (rule 4,
      // docs/classification.md, below with its bytes), done by the copy engines.
      if (kind != kCopyKindPeerToPeer) a.category = Classify(a.kind, t_.names.Get(a.name_id), false);
      break;
    }
    case ActivityKind::kMemset:
      a.name_id = memset_name_;
      a.category = Classify(a.kind, "Memset", false);
      break;
    case ActivityKind::kSync:
      a.name_id = t_.names.Intern(
          SyncTypeName(row.IsInt(7) ? row.Int(7) : 0));
      a.category = Category::kOther;
      // A wait on an event record (CUPTI 12.8+: its eventSyncId), for the what-if model.
      if (needs_.host_calls && row.IsInt(5) && row.IsInt(7) && a.correlation_id != kUnknown)
        AddEventWait(row.Int(7), row.Int(5), a);
      break;
  }
  if (row.IsInt(5) && a.kind != ActivityKind::kSync) {
    int64_t b = row.Int(5);
    if (b >= 0) a.bytes = b;
  }
  if (a.kind == ActivityKind::kMemcpy && a.copy_kind == kCopyKindPeerToPeer) RankTraceBuilder::AddPeerCopy(t_, a);
  t_.activities.push_back(a);
  return OkStatus();
}

// The host call of a runtime row (RuntimeColumns) with correlation id `corr`; false when its span
// is not a valid time range (the row is skipped).
template <typename Row>
StatusOr<bool> NsysRankReader::ReadRuntimeCall(const Row& row, int64_t corr, HostCall* h) {
  if (!ReadSpan(row, &h->start_ns, &h->end_ns)) return false;
  h->correlation_id = corr;
  if (row.IsInt(3)) h->tid = row.Int(3) & 16777215;
  if (row.IsInt(4)) {
    OVERLAPPROF_ASSIGN_OR_RETURN(h->name_id, Name(row.Int(4)));
  }
  return true;
}

// One row of the runtime table (RuntimeColumns), any process: others are skipped.
template <typename Row>
Status NsysRankReader::RuntimeRow(const Row& row) {
  if (!row.IsInt(2)) return OkStatus();
  const int64_t corr = row.Int(2);
  if (!event_calls_.empty() && std::binary_search(event_calls_.begin(), event_calls_.end(), corr) &&
      PidOf(row, 3) == unit_.pid) {
    // An event record or wait (only read with host calls): kept for its place in program order.
    HostCall h;
    OVERLAPPROF_ASSIGN_OR_RETURN(bool ok, ReadRuntimeCall(row, corr, &h));
    if (ok) t_.host_calls.push_back(h);
    return OkStatus();
  }
  if (!builder_.InRange(corr) || PidOf(row, 3) != unit_.pid) return OkStatus();
  const size_t w = builder_.Waiting(corr);
  if (w == RankTraceBuilder::kNotWaiting) return OkStatus();
  if (builder_.Launched(w) && !needs_.host_calls) return OkStatus();  // a later call with the same id: the first won
  HostCall h;
  OVERLAPPROF_ASSIGN_OR_RETURN(bool ok, ReadRuntimeCall(row, corr, &h));
  if (!ok) return OkStatus();
  if (needs_.host_calls) t_.host_calls.push_back(h);
  if (!builder_.Launched(w) && h.tid != kUnknown && !copy_correlations_.empty() &&
      std::binary_search(copy_correlations_.begin(), copy_correlations_.end(), corr))
    copy_launches_.push_back({corr, h.tid, h.start_ns});
  builder_.Launch(t_, w, h);
  return OkStatus();
}

}  // namespace overlapprof::nsys
