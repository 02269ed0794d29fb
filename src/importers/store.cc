// Importer for overlapprof's own trace store (one SQLite file per rank).
#include "src/importers/importer.h"
#include "src/io/input_file.h"
#include "src/store/reader.h"

namespace overlapprof {

namespace {
class StoreImporter : public Importer {
 public:
  std::string_view name() const override { return "store"; }
  std::string_view description() const override { return "overlapprof trace store (SQLite, one file per rank)"; }
  int Probe(std::string_view head) const override { return IsSqlite(head) ? 100 : 0; }
  StatusOr<RankTrace> Import(const std::string& path, const ImportOptions& options) const override {
    StoreReadOptions ro;
    ro.quick_check = options.store_quick_check;
    ro.needs = options.store_needs;
    return ReadStore(path, ro);
  }
};
}  // namespace

std::unique_ptr<Importer> MakeStoreImporter() { return std::make_unique<StoreImporter>(); }

}  // namespace overlapprof
