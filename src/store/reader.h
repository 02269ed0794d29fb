#pragma once
// Reads a store file into a RankTrace. Files are untrusted input (SQLite's advice for
// untrusted databases): opened read-only in defensive mode with trusted_schema off and
// tight limits, checked with PRAGMA quick_check, identified by application_id, and
// version-checked: a newer major schema is refused with a message naming the version.
#include <string>

#include "src/common/status.h"
#include "src/trace/model.h"

namespace overlapprof {

struct StoreReadOptions {
  bool quick_check = true;  // PRAGMA quick_check of the tables read, before reading them
  TraceNeeds needs = TraceNeeds::All();  // what to read beyond activities, comm ops and steps
};

StatusOr<RankTrace> ReadStore(const std::string& path, const StoreReadOptions& options = {});

}  // namespace overlapprof
