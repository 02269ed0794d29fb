// Importer for overlapprof's own trace store (one SQLite file per rank).
#include "src/importers/importer.h"
#include "src/io/input_file.h"
#include "src/store/reader.h"
#include "src/store/schema.h"

namespace overlapprof {

namespace {
class StoreImporter : public OneRankImporter {
 public:
  std::string_view name() const override { return "store"; }
  std::string_view description() const override { return "overlapprof trace store (SQLite, one file per rank)"; }
  // Other SQLite files (application_id not 'OVLP') are left to the Nsight Systems importer,
  // which claims them with 50 and names what they are not.
  int Probe(std::string_view head) const override {
    if (!IsSqlite(head)) return 0;
    return SqliteApplicationId(head) == static_cast<uint32_t>(kStoreApplicationId) ? 100 : 10;
  }
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
