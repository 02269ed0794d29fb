#pragma once
// One Nsight Systems export opened for import (Importer::Open): what reading it once learns
// and reads ahead for its ranks. The read strategy is chosen once, here, from ImportOptions::
// nsys (NsysReadMode):
// - kAuto: listing the ranks (Units) builds them whole, within the read-ahead budget, so the
//   file is read once (Builders); each Import takes its rank. A file whose ranks do not fit,
//   or imports that want host calls, read as kSpill.
// - kSpill: the first rank imported spills every rank's rows to a temporary file in one pass
//   (Partition), each rank reads its own from there (several ranks, up to kMaxPartitionUnits).
// - kScanPerRank: each rank scans the tables itself (SqliteTableScan).
// - kSql: each rank reads its rows through SQL queries (the reference the others are tested
//   against).
// Where a table cannot be scanned directly (a WAL file, an unusual table) its rows come from
// SQL whatever the strategy.
// Thread safety: Units once, before the imports; Import from several threads at once (each
// rank once); mu_ guards the state below it.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/importers/importer.h"
#include "src/importers/nsys/nsys_rank_reader.h"
#include "src/importers/nsys/nsys_rows.h"
#include "src/importers/nsys/nsys_schema.h"

namespace overlapprof::nsys {

class NsysFileSession final : public ImportSession {
 public:
  // `options`: as the imports will have them (Importer::Open); the read strategy is theirs,
  // or a test override's (ReadModeWithTestOverride).
  NsysFileSession(std::string path, const ImportOptions& options);
  ~NsysFileSession() override;

  StatusOr<std::vector<std::string>> Units() override;
  StatusOr<RankTrace> Import(const std::string& unit, const ImportOptions& options) override;
  uint64_t ReadAheadBytes() const override;

 private:
  struct Builders;
  // The (process, GPU) pairs with GPU rows, in key order, their rows counted (listed_);
  // `build`: and build them (Builders, into built_).
  StatusOr<std::vector<UnitKey>> ListUnits(const NsysDb& db, bool build);
  // Whether ListUnits builds the ranks (b.on), with which budget, and about how many GPU rows
  // there are (each table's largest rowid: rows are only appended to an export).
  void StartBuilders(const NsysDb& db, Builders& b) const;
  // The synchronization and runtime tables, once for all built ranks.
  void FinishBuilders(const NsysDb& db, Builders& b) const;
  // One rank read by `reader` (opened on this file).
  StatusOr<RankTrace> Read(NsysRankReader& reader, const UnitKey& unit, const ImportOptions& options);
  // The rank built for `unit` while the file was listed, taken out; null when none.
  std::unique_ptr<NsysRankReader> TakeBuilt(const UnitKey& unit);
  // Gives `reader` its rows spilled by the file's partition (kAuto, kSpill), when the file has
  // several ranks (as listed) and its tables can be scanned directly; the first rank read
  // builds it, the others wait for it.
  Status UsePartition(NsysRankReader& reader, const UnitKey& unit);
  // How many ranks the export holds: the listing's count, else counted with SQL (a
  // FILE#pidN.gpuN named without a listing).
  StatusOr<size_t> UnitsInFile(const NsysDb& db);

  const std::string path_;
  const NsysReadMode mode_;
  const uint64_t build_budget_;     // bytes the ranks built while listing may take
  const bool list_needs_host_calls_;  // the imports will want host calls: listing builds nothing
  ImportObserver* const observer_;  // of the listing (Units); null: none

  mutable std::mutex mu_;
  bool checked_ = false;  // PRAGMA quick_check ran (once per file, not once per rank)
  std::optional<std::map<UnitKey, uint64_t>> listed_;  // ListUnits' GPU rows per unit (a reserve hint)
  std::map<UnitKey, std::unique_ptr<NsysRankReader>> built_;  // ranks built while listing, not yet imported
  uint64_t built_bytes_ = 0;
  std::shared_ptr<const Partition> partition_;  // until every listed rank has been served
  bool partition_tried_ = false;
  std::set<UnitKey> served_;  // ranks given their part of partition_
  std::mutex partition_mu_;   // held while the partition is built: the file's other ranks wait for it
};

}  // namespace overlapprof::nsys
