#include "src/importers/importer.h"

namespace overlapprof {

namespace {

class OneRankSession final : public ImportSession {
 public:
  OneRankSession(const OneRankImporter& importer, std::string path) : importer_(importer), path_(std::move(path)) {}
  StatusOr<RankTrace> Import(const std::string& /*unit*/, const ImportOptions& options) override {
    return importer_.Import(path_, options);
  }

 private:
  const OneRankImporter& importer_;
  const std::string path_;
};

}  // namespace

StatusOr<std::unique_ptr<ImportSession>> OneRankImporter::Open(const std::string& path,
                                                               const ImportOptions& /*options*/) const {
  return std::unique_ptr<ImportSession>(std::make_unique<OneRankSession>(*this, path));
}

}  // namespace overlapprof
