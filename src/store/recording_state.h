#pragma once
// How a store's recording ended (meta `recording_state`, docs/schema.md), read by ReadStore:
// a recording that never finished is a data-quality counter and a notice in every report,
// saying how much it may miss.
#include <cstdint>
#include <string>

#include "src/common/status.h"
#include "src/store/sqlite_util.h"
#include "src/trace/model.h"

namespace overlapprof {

// Share of a recording that, when it may be missing, makes an unfinished file an error
// (recording_incomplete_large_loss) rather than a warning: the possibly missing time over the
// time the file recorded plus that time.
inline constexpr double kLargeLossShare = 0.10;

// What the meta of an injector store says about the end of its recording (keys absent: unknown).
struct RecordingEnd {
  std::string state;             // recording_state: "", recording, incomplete, write_failed, lost, finished
  int64_t last_commit_ns = kUnknown;   // CLOCK_REALTIME ns when its last commit began (injector)
  int64_t flush_interval_ms = kUnknown;  // the injector's periodic flush period
  int64_t process_gone_ns = kUnknown;  // CLOCK_REALTIME ns by which `overlapprof run` saw its process gone
  int64_t created_ns = kUnknown;       // created_unix_ns
  std::string lost_reason;       // state "lost": why its recording failed (and where run kept its file)
};

// Reads the keys above from `db`'s meta (integers stored as integers or decimal text).
StatusOr<RecordingEnd> ReadRecordingEnd(sqlite3* db);

// Sets the counters and adds the notice for a recording that did not finish: state
// "recording" (nobody marked it) or "incomplete" → recording_incomplete (warning), and
// recording_incomplete_large_loss (error) when the time that may be missing is at least
// kLargeLossShare of what it recorded; "write_failed" → a notice beside its counter; "lost"
// (run's placeholder for an unreadable file) → recording_failed. `t` is the trace as read
// (its records give the file's own record rate). A finished (or imported) store is unchanged.
void NoteRecordingEnd(const RecordingEnd& end, RankTrace& t);

}  // namespace overlapprof
