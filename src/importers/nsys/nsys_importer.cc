// Importer for Nsight Systems SQLite exports (`nsys export --type sqlite report.nsys-rep`).
// One export holds every process nsys traced: each (process, GPU) with GPU work is one rank
// (ImportSession::Units: "pid<PID>.gpu<DEVICE>"), read by an NsysFileSession (how the tables
// are read: nsys_file_session.h). docs/nsys.md lists what is read and how ranks are assigned.
//
// Files are untrusted: opened like stores (OpenUntrustedReadOnly), every value validated,
// keys from the file kept in ordered containers (no identity-hashed maps).
#include "src/importers/importer.h"
#include "src/importers/nsys/nsys.h"
#include "src/importers/nsys/nsys_file_session.h"
#include "src/io/input_file.h"
#include "src/store/schema.h"

namespace overlapprof {

namespace {

class NsysImporter : public Importer {
 public:
  std::string_view name() const override { return "nsys"; }
  std::string_view description() const override {
    return "Nsight Systems SQLite export (nsys export --type sqlite), one rank per process and GPU";
  }
  // SQLite files that are not overlapprof stores; the session says what they are when not exports.
  int Probe(std::string_view head) const override {
    return IsSqlite(head) && SqliteApplicationId(head) != static_cast<uint32_t>(kStoreApplicationId) ? 50 : 0;
  }
  StatusOr<std::unique_ptr<ImportSession>> Open(const std::string& path, const ImportOptions& options) const override {
    return std::unique_ptr<ImportSession>(std::make_unique<nsys::NsysFileSession>(path, options));
  }
};

}  // namespace

std::optional<int64_t> NsysUnitDevice(std::string_view key) {
  nsys::UnitKey k;
  if (!nsys::ParseKey(key, &k)) return std::nullopt;
  return k.device;
}

std::unique_ptr<Importer> MakeNsysImporter() { return std::make_unique<NsysImporter>(); }

}  // namespace overlapprof
