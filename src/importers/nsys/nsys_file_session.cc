#include "src/importers/nsys/nsys_file_session.h"

#include <algorithm>

namespace overlapprof::nsys {

namespace {

// Partitioning pays from two ranks on; above kMaxPartitionUnits the per-key buffers would
// weigh more than the passes saved (each rank scans the tables then).
constexpr size_t kMaxPartitionUnits = 256;
// Ranks built while listing hold an SQLite connection each (Builders): more than this many in
// one export are read as before.
constexpr size_t kMaxBuilders = 64;
// Builders check their estimate against the budget every kBuildCheckRows GPU rows; at the first
// check they size each rank for its share of the tables' rows, plus kShareMargin of it and
// kShareSlackRows rows.
constexpr uint64_t kBuildCheckRows = 0x10000;
constexpr double kShareMargin = 1.02;
constexpr uint64_t kShareSlackRows = 1024;

}  // namespace

// Ranks built while listing. ListUnits reads every column that a rank reads and hands each
// row to the reader of its (process, GPU), then does the same with the synchronization and
// runtime tables, so a file is read once instead of listed and then read (a one-rank export)
// or listed, partitioned and read from the spill (several ranks). The built ranks wait in
// built_ for the Import of each, within the session's budget: a file whose ranks would not fit
// is listed only (building stops when the estimate passes the budget) and read as kSpill.
struct NsysFileSession::Builders {
  bool on = false;
  std::map<UnitKey, std::unique_ptr<NsysRankReader>> by_unit;
  uint64_t rows = 0;        // GPU rows fed
  uint64_t budget = 0;      // bytes the built ranks may take
  uint64_t table_rows = 0;  // the GPU tables' largest rowids: about their rows

  void Stop() {
    on = false;
    by_unit.clear();
  }
  uint64_t Bytes() const {
    uint64_t n = 0;
    for (const auto& [k, e] : by_unit) n += e->Bytes();
    return n;
  }
  // The builder of a unit, made at its first row; null (building stopped) when it cannot be.
  NsysRankReader* For(const UnitKey& key, const std::string& path) {
    auto it = by_unit.find(key);
    if (it != by_unit.end()) return it->second.get();
    if (by_unit.size() >= kMaxBuilders) {
      Stop();
      return nullptr;
    }
    auto e = std::make_unique<NsysRankReader>();
    if (!e->Open(path).ok() || !e->Begin(key, TraceNeeds{}, /*sql=*/false).ok()) {
      Stop();
      return nullptr;
    }
    e->BeginGpuTable();
    return by_unit.emplace(key, std::move(e)).first->second.get();
  }
  // One GPU row to its builder; false when building stopped.
  template <typename Row>
  bool Feed(NsysRankReader* e, const Row& row, const GpuTable& g) {
    if (!on || !e) return false;
    if (!e->GpuRow(row, g).ok()) {  // the rank's own read reports it
      Stop();
      return false;
    }
    if (++rows % kBuildCheckRows != 0) return true;
    if (rows == kBuildCheckRows && table_rows > rows) {
      for (auto& [k, b] : by_unit) {
        const double share = static_cast<double>(b->activity_count()) / static_cast<double>(rows);
        const uint64_t want =
            static_cast<uint64_t>(share * static_cast<double>(table_rows) * kShareMargin) + kShareSlackRows;
        if (want * sizeof(Activity) > budget) {
          Stop();
          return false;
        }
        b->ReserveActivities(want);
      }
    }
    if (Bytes() > budget) {
      Stop();
      return false;
    }
    return true;
  }
};

NsysFileSession::NsysFileSession(std::string path, const ImportOptions& options)
    : path_(std::move(path)),
      mode_(ReadModeWithTestOverride(options.nsys.read_mode)),
      build_budget_(options.read_ahead_budget_bytes),
      list_needs_host_calls_(options.store_needs.host_calls),
      observer_(options.observer) {}

NsysFileSession::~NsysFileSession() = default;

uint64_t NsysFileSession::ReadAheadBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return built_bytes_;
}

StatusOr<std::vector<std::string>> NsysFileSession::Units() {
  NsysDb db;
  OVERLAPPROF_RETURN_IF_ERROR(db.Open(path_));
  OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<UnitKey> units, ListUnits(db, /*build=*/!list_needs_host_calls_));
  std::vector<std::string> keys;
  for (const UnitKey& u : units) keys.push_back(KeyString(u));
  return keys;
}

StatusOr<RankTrace> NsysFileSession::Import(const std::string& unit_key, const ImportOptions& options) {
  NsysRankReader reader;
  OVERLAPPROF_RETURN_IF_ERROR(reader.Open(path_));
  UnitKey unit;
  if (unit_key.empty()) {
    // The whole file: fine when it holds one rank.
    std::vector<UnitKey> units;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (listed_)
        for (const auto& [k, n] : *listed_) units.push_back(k);
    }
    if (units.empty()) {
      OVERLAPPROF_ASSIGN_OR_RETURN(units, ListUnits(reader.db(), /*build=*/!options.store_needs.host_calls));
    }
    if (units.size() > 1) {
      std::string keys;
      for (const UnitKey& u : units) keys += (keys.empty() ? "" : ", ") + KeyString(u);
      return MakeError(StatusCode::kInvalidInput, "holds {} ranks ({}): name one as FILE#KEY", units.size(), keys);
    }
    if (!units.empty()) unit = units[0];
  } else if (!ParseKey(unit_key, &unit)) {
    return MakeError(StatusCode::kInvalidArgument, "'{}' names no rank of an Nsight Systems export (pidN.gpuN)",
                     unit_key);
  }
  OVERLAPPROF_ASSIGN_OR_RETURN(RankTrace t, Read(reader, unit, options));
  t.meta.source_path = unit_key.empty() ? path_ : path_ + "#" + unit_key;
  return t;
}

StatusOr<RankTrace> NsysFileSession::Read(NsysRankReader& reader, const UnitKey& unit, const ImportOptions& options) {
  const bool sql = mode_ == NsysReadMode::kSql;
  if (options.store_quick_check) {
    bool checked;
    {
      std::lock_guard<std::mutex> lock(mu_);
      checked = checked_;
    }
    if (!checked) {
      OVERLAPPROF_RETURN_IF_ERROR(QuickCheck(reader.db(), sql));
      std::lock_guard<std::mutex> lock(mu_);
      checked_ = true;
    }
  }
  auto units_in_file = [&]() -> StatusOr<size_t> { return UnitsInFile(reader.db()); };
  // A rank built while this file was listed has its GPU and runtime tables read; it was built
  // without host calls (Builders), so a reader that wants them reads the tables again.
  if (std::unique_ptr<NsysRankReader> built = TakeBuilt(unit); built && !options.store_needs.host_calls) {
    if (options.observer) ++options.observer->ranks_imported_from_listing;
    built->SetNeeds(options.store_needs);
    return built->Finish(units_in_file);
  }
  OVERLAPPROF_RETURN_IF_ERROR(reader.Begin(unit, options.store_needs, sql));
  {
    // The rows ListUnits counted for this unit: the activities are sized once instead of
    // growing by copies.
    std::lock_guard<std::mutex> lock(mu_);
    if (listed_) {
      auto u = listed_->find(unit);
      if (u != listed_->end()) reader.ReserveActivities(u->second);
    }
  }
  OVERLAPPROF_RETURN_IF_ERROR(UsePartition(reader, unit));
  OVERLAPPROF_RETURN_IF_ERROR(reader.ReadTables());
  return reader.Finish(units_in_file);
}

std::unique_ptr<NsysRankReader> NsysFileSession::TakeBuilt(const UnitKey& unit) {
  std::lock_guard<std::mutex> lock(mu_);
  auto r = built_.find(unit);
  if (r == built_.end()) return nullptr;
  std::unique_ptr<NsysRankReader> e = std::move(r->second);
  built_.erase(r);
  built_bytes_ = built_.empty() ? 0 : built_bytes_ - std::min(built_bytes_, e->Bytes());
  return e;
}

StatusOr<size_t> NsysFileSession::UnitsInFile(const NsysDb& db) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (listed_) return listed_->size();
  }
  std::string sql;
  for (const char* table : {kKernel, kMemcpy, kMemset}) {
    if (!db.Has(table)) continue;
    OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, db.Columns(table));
    if (!cols.count("deviceId")) continue;
    sql += fmt::format("{}SELECT DISTINCT {}, deviceId FROM {} WHERE typeof(deviceId) = 'integer'",
                       sql.empty() ? "" : " UNION ", cols.count("globalPid") ? kPidOfGlobalPid : "-1", table);
  }
  if (sql.empty()) return size_t{0};
  Stmt s;
  OVERLAPPROF_RETURN_IF_ERROR(db.Prep(s, fmt::format("SELECT COUNT(*) FROM ({})", sql)));
  StatusOr<bool> row = s.Step("units");
  if (!row.ok()) return DamagedFile(row.status());
  return *row ? static_cast<size_t>(s.Int(0)) : size_t{0};
}

Status NsysFileSession::UsePartition(NsysRankReader& reader, const UnitKey& unit) {
  if (mode_ != NsysReadMode::kAuto && mode_ != NsysReadMode::kSpill) return OkStatus();
  std::vector<UnitKey> units;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!listed_ || listed_->size() < 2 || listed_->size() > kMaxPartitionUnits || !listed_->count(unit))
      return OkStatus();
    for (const auto& [k, n] : *listed_) units.push_back(k);
  }
  std::lock_guard<std::mutex> build(partition_mu_);
  std::shared_ptr<const Partition> partition;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!partition_tried_) {
      partition_tried_ = true;
    } else {
      partition = partition_;
      if (!partition || served_.count(unit)) return OkStatus();
    }
  }
  if (!partition) {
    StatusOr<std::shared_ptr<Partition>> p = BuildPartition(reader.db(), units);
    std::lock_guard<std::mutex> lock(mu_);
    if (!p.ok()) {
      partition_tried_ = false;  // the next rank tries again (and reports the same damage)
      return p.status();
    }
    partition_ = std::move(*p);
    partition = partition_;
    if (!partition) return OkStatus();
  }
  std::lock_guard<std::mutex> lock(mu_);
  served_.insert(unit);
  reader.UsePartition(partition);
  if (served_.size() == units.size()) partition_.reset();  // the spill goes with the last reader
  return OkStatus();
}

StatusOr<std::vector<UnitKey>> NsysFileSession::ListUnits(const NsysDb& db, bool build) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    built_.clear();  // a new listing starts afresh
    built_bytes_ = 0;
  }
  const bool sql = mode_ == NsysReadMode::kSql;
  std::map<UnitKey, uint64_t> units;  // GPU rows per unit: Read's reserve hint
  Builders b;
  if (build) StartBuilders(db, b);
  for (GpuTable g : {GpuTable{kKernel, ActivityKind::kKernel}, GpuTable{kMemcpy, ActivityKind::kMemcpy},
                     GpuTable{kMemset, ActivityKind::kMemset}}) {
    if (!db.Has(g.table)) continue;
    OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, db.Columns(g.table));
    if (!cols.count("deviceId")) return NsysDb::MissingColumn(g.table, "deviceId");
    // Building: every column a rank reads (deviceId and globalPid are 8 and 9); listing only:
    // those two.
    std::vector<std::string> columns{cols.count("globalPid") ? "globalPid" : "", "deviceId"};
    int device_col = 1, pid_col = 0;
    if (b.on) {
      StatusOr<std::vector<std::string>> all = db.GpuColumns(g);
      if (all.ok()) {
        columns = std::move(*all);
        device_col = 8;
        pid_col = 9;
        for (auto& [k, e] : b.by_unit) e->BeginGpuTable();
      } else {
        b.Stop();
      }
    }
    Rows r;
    OVERLAPPROF_RETURN_IF_ERROR(DamagedFile(r.Open(db, g.table, columns, "", {}, sql)));
    // The units seen last, searched before the maps: rows of a few ranks come interleaved.
    struct Seen {
      UnitKey key;
      uint64_t* count;          // in `units` (map nodes stay put)
      NsysRankReader* builder;  // null: not building
    };
    std::vector<Seen> seen;
    size_t replace = 0;
    OVERLAPPROF_RETURN_IF_ERROR(r.ForEach([&](const auto& row) -> Status {
      if (!row.IsInt(device_col)) return OkStatus();  // no integer device: no rank reads the row
      const UnitKey key{PidOf(row, pid_col), row.Int(device_col)};
      Seen* u = nullptr;
      for (Seen& x : seen)
        if (x.key == key) {
          u = &x;
          break;
        }
      if (!u) {
        uint64_t* count = &units[key];
        if (units.size() > kMaxUnits)
          return MakeError(StatusCode::kInvalidInput, "more than {} (process, GPU) pairs in one export", kMaxUnits);
        Seen x{key, count, b.on ? b.For(key, path_) : nullptr};
        if (seen.size() < 16) {
          u = &seen.emplace_back(x);
        } else {
          u = &seen[replace++ % seen.size()];
          *u = x;
        }
      }
      ++*u->count;
      if (b.on && !b.Feed(u->builder, row, g)) u->builder = nullptr;
      return OkStatus();
    }));
  }
  if (b.on) FinishBuilders(db, b);
  std::vector<UnitKey> keys;
  for (const auto& [k, n] : units) keys.push_back(k);
  std::lock_guard<std::mutex> lock(mu_);
  listed_ = std::move(units);
  // A new listing starts afresh: a partition built from an earlier listing is not used.
  partition_.reset();
  partition_tried_ = false;
  served_.clear();
  if (b.on && !b.by_unit.empty()) {
    const uint64_t bytes = b.Bytes();
    if (bytes <= build_budget_) {
      built_bytes_ = bytes;
      if (observer_) observer_->ranks_built_while_listing += b.by_unit.size();
      built_ = std::move(b.by_unit);
    }
  }
  return keys;
}

void NsysFileSession::StartBuilders(const NsysDb& db, Builders& b) const {
  if (mode_ != NsysReadMode::kAuto || build_budget_ == 0) return;
  b.budget = build_budget_;
  for (const char* table : {kKernel, kMemcpy, kMemset}) {
    if (!db.Has(table)) continue;
    Stmt st;
    if (!st.Prepare(db.get(), fmt::format("SELECT max(rowid) FROM {}", table)).ok()) continue;
    StatusOr<bool> row = st.Step("largest rowid");
    if (row.ok() && *row && !st.IsNull(0) && st.Int(0) > 0)
      b.table_rows = std::min<uint64_t>(b.table_rows + static_cast<uint64_t>(st.Int(0)), uint64_t{1} << 40);
  }
  b.on = true;
}

void NsysFileSession::FinishBuilders(const NsysDb& db, Builders& b) const {
  if (db.Has(kSync)) {
    GpuTable g{kSync, ActivityKind::kSync};
    StatusOr<std::vector<std::string>> columns = db.GpuColumns(g);
    Rows r;
    if (!columns.ok() || !r.Open(db, g.table, *columns, "", {}, /*sql=*/false).ok()) return b.Stop();
    for (auto& [k, e] : b.by_unit) e->BeginGpuTable();
    Status st = r.ForEach([&](const auto& row) -> Status {
      if (!row.IsInt(8)) return OkStatus();
      auto it = b.by_unit.find(UnitKey{PidOf(row, 9), row.Int(8)});
      if (it == b.by_unit.end()) return OkStatus();
      return it->second->GpuRow(row, g);
    });
    if (!st.ok()) return b.Stop();
  }
  if (!db.Has(kRuntime)) return;
  // Builders by process: the runtime table's rows are a process's calls.
  std::map<int64_t, std::vector<NsysRankReader*>> by_pid;
  for (auto& [k, e] : b.by_unit) {
    StatusOr<bool> wants = e->BeginRuntime();
    if (!wants.ok()) return b.Stop();
    if (*wants) by_pid[k.pid].push_back(e.get());
  }
  if (by_pid.empty()) return;
  StatusOr<std::set<std::string>> cols = db.Columns(kRuntime);
  if (!cols.ok()) return b.Stop();
  Rows r;
  if (!r.Open(db, kRuntime, NsysDb::RuntimeColumns(*cols), "", {}, /*sql=*/false).ok()) return b.Stop();
  // The processes seen last, searched before the map: calls of a few processes come
  // interleaved. Null: a process without builders.
  std::vector<std::pair<int64_t, const std::vector<NsysRankReader*>*>> seen;
  size_t replace = 0;
  Status st = r.ForEach([&](const auto& row) -> Status {
    const int64_t pid = PidOf(row, 3);
    const std::vector<NsysRankReader*>* es = nullptr;
    bool found = false;
    for (const auto& [p, v] : seen)
      if (p == pid) {
        es = v;
        found = true;
        break;
      }
    if (!found) {
      auto it = by_pid.find(pid);
      es = it == by_pid.end() ? nullptr : &it->second;
      if (seen.size() < 16) seen.emplace_back(pid, es);
      else seen[replace++ % seen.size()] = {pid, es};
    }
    if (es)
      for (NsysRankReader* e : *es) OVERLAPPROF_RETURN_IF_ERROR(e->RuntimeRow(row));
    return OkStatus();
  });
  if (!st.ok()) return b.Stop();
  for (auto& [pid, es] : by_pid)
    for (NsysRankReader* e : es) e->EndRuntime();
}

}  // namespace overlapprof::nsys
