// StoreWriter's helpers for the injector's live writer (writer.h): each runs in its own
// transaction with its own statement, so they do not interleave with an Append batch.
#include "src/store/writer.h"

namespace overlapprof {

Status StoreWriter::UpdateMeta(const RunMeta& meta) {
  if (!open_) return MakeError(StatusCode::kInternal, "StoreWriter::UpdateMeta before Open");
  OVERLAPPROF_RETURN_IF_ERROR(Begin());
  OVERLAPPROF_RETURN_IF_ERROR(WriteMeta(meta));
  return Commit();
}

Status StoreWriter::PutMeta(std::string_view key, std::string_view value) {
  if (!open_) return MakeError(StatusCode::kInternal, "StoreWriter::PutMeta before Open");
  Stmt s;
  OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(db_.get(), "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)"));
  s.Bind(1, key);
  s.Bind(2, value);
  return s.StepDone("insert meta");
}

Status StoreWriter::WriteStats(const StatCounters& stats, const std::vector<ExtraStat>& extra) {
  if (!open_) return MakeError(StatusCode::kInternal, "StoreWriter::WriteStats before Open");
  Stmt q;
  OVERLAPPROF_RETURN_IF_ERROR(
      q.Prepare(db_.get(), "INSERT OR REPLACE INTO stats(name, severity, value, description) VALUES(?,?,?,?)"));
  OVERLAPPROF_RETURN_IF_ERROR(Begin());
  for (size_t i = 0; i < kStatCount; ++i) {
    const StatInfo& info = GetStatInfo(static_cast<Stat>(i));
    q.Bind(1, info.name);
    q.Bind(2, SeverityName(info.severity));
    q.Bind(3, stats.Get(static_cast<Stat>(i)));
    q.Bind(4, info.description);
    OVERLAPPROF_RETURN_IF_ERROR(q.StepDone("insert stats"));
  }
  for (const ExtraStat& e : extra) {
    q.Bind(1, e.name);
    q.Bind(2, SeverityName(e.severity));
    q.Bind(3, e.value);
    q.Bind(4, e.description);
    OVERLAPPROF_RETURN_IF_ERROR(q.StepDone("insert stats"));
  }
  return Commit();
}

}  // namespace overlapprof
