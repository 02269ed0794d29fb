#include "src/store/recording_state.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>

#include <fmt/format.h>

namespace overlapprof {
namespace {

// A meta value as an integer: an INTEGER cell, or decimal text (PutMeta writes text); else kUnknown.
int64_t MetaInt(Stmt& s, int col) {
  if (sqlite3_column_type(s.get(), col) == SQLITE_INTEGER) return s.Int(col);
  if (sqlite3_column_type(s.get(), col) != SQLITE_TEXT) return kUnknown;
  std::string text(s.Text(col));
  if (text.empty()) return kUnknown;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || !end || *end != '\0' || v < 0) return kUnknown;
  return static_cast<int64_t>(v);
}

// A duration for a person: "850 ms", "1.2 s", "3 min 20 s".
std::string Span(int64_t ns) {
  if (ns < 1000000) return fmt::format("{} us", ns / 1000);
  if (ns < 10000000000LL) return ns < 1000000000 ? fmt::format("{} ms", ns / 1000000) : fmt::format("{:.1f} s", ns / 1e9);
  if (ns < 600000000000LL) return fmt::format("{} s", ns / 1000000000);
  return fmt::format("{} min {} s", ns / 60000000000LL, (ns / 1000000000) % 60);
}

// A CLOCK_REALTIME time in ns as UTC, to the millisecond.
std::string UtcTime(int64_t ns) {
  std::time_t secs = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return fmt::format("{}.{:03d} UTC", buf, static_cast<int>((ns / 1000000) % 1000));
}

size_t RecordCount(const RankTrace& t) {
  return t.activities.size() + t.host_calls.size() + t.comm_ops.size() + t.ranges.size() + t.nccl_plugin_ops.size();
}

// The earliest time the file holds (its creation, or an earlier record on the same clock), or kUnknown.
int64_t RecordingStart(const RecordingEnd& end, const RankTrace& t) {
  int64_t start = end.created_ns > 0 ? end.created_ns : kUnknown;
  auto take = [&](int64_t v) {
    if (v > 0 && (start == kUnknown || v < start)) start = v;
  };
  if (!t.activities.empty()) take(t.activities.front().start_ns);  // sorted by Finalize
  if (!t.host_calls.empty()) take(t.host_calls.front().start_ns);
  if (!t.ranges.empty()) take(t.ranges.front().start_ns);
  for (const CommOp& op : t.comm_ops) take(op.host_enter_ns);
  return start;
}

// The notice and the severity of a file that ended without its final flush.
void NoteUnfinished(const RecordingEnd& end, RankTrace& t) {
  const std::string how = end.state == "recording" ? "ended without its final flush (killed, _exit, or still being written)"
                                                   : "ended without its final flush (killed or _exit)";
  if (end.last_commit_ns <= 0) {
    t.notices.push_back(how + ": how much is missing after its last commit is unknown (the file does not say when "
                              "it last committed: written by an older recorder)");
    return;
  }
  // What may be missing: one flush period after the last commit (the recorder commits at least
  // that often), or less when `run` saw the process gone sooner.
  // (Values from the file: a period past a day is not believed, and nothing below overflows.)
  constexpr int64_t kMaxPeriodMs = 86'400'000;
  int64_t missing =
      end.flush_interval_ms > 0 && end.flush_interval_ms <= kMaxPeriodMs ? end.flush_interval_ms * 1000000 : kUnknown;
  bool seen_gone = false;
  if (end.process_gone_ns >= end.last_commit_ns &&
      (missing == kUnknown || end.process_gone_ns - end.last_commit_ns < missing)) {
    missing = end.process_gone_ns - end.last_commit_ns;
    seen_gone = true;
  }
  if (missing == kUnknown) {
    t.notices.push_back(fmt::format("{}: its last commit was at {}; how much is missing after it is unknown (the file "
                                    "does not say its flush period)",
                                    how, UtcTime(end.last_commit_ns)));
    return;
  }
  const int64_t start = RecordingStart(end, t);
  const int64_t recorded = start != kUnknown && start < end.last_commit_ns ? end.last_commit_ns - start : kUnknown;
  std::string loss = fmt::format("{}: up to about {} after its last commit at {} may be missing", how, Span(missing),
                                 UtcTime(end.last_commit_ns));
  if (seen_gone) loss += " (its process was seen gone by then)";
  if (recorded == kUnknown || recorded <= 0) {
    t.notices.push_back(loss + "; what share of the recording that is, is unknown");
    return;
  }
  const double share = static_cast<double>(missing) / (static_cast<double>(recorded) + static_cast<double>(missing));
  const size_t records = RecordCount(t);
  const double lost_records = static_cast<double>(records) * static_cast<double>(missing) / static_cast<double>(recorded);
  const auto lost = static_cast<int64_t>(std::llround(std::min(lost_records, 1e15)));
  loss += fmt::format(": about {} records at this file's own rate ({} records in {}), {:.0f}% of the recording", lost,
                      records, Span(recorded), share * 100);
  if (share >= kLargeLossShare) {
    t.stats.Set(Stat::recording_incomplete_large_loss,
                std::max<int64_t>(t.stats.Get(Stat::recording_incomplete_large_loss), 1));
    loss += fmt::format(" (at least {:.0f}%: the figures cannot be trusted)", kLargeLossShare * 100);
  }
  t.notices.push_back(std::move(loss));
}

}  // namespace

StatusOr<RecordingEnd> ReadRecordingEnd(sqlite3* db) {
  Stmt s;
  OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(db,
                                        "SELECT key, value FROM meta WHERE key IN ('recording_state', 'last_commit_ns', "
                                        "'flush_interval_ms', 'process_gone_ns', 'created_unix_ns', 'lost_reason')"));
  RecordingEnd end;
  for (;;) {
    OVERLAPPROF_ASSIGN_OR_RETURN(bool row, s.Step("select meta"));
    if (!row) break;
    const std::string_view key = s.Text(0);
    if (key == "recording_state") end.state = std::string(s.Text(1));
    else if (key == "lost_reason") end.lost_reason = std::string(s.Text(1));
    else if (key == "last_commit_ns") end.last_commit_ns = MetaInt(s, 1);
    else if (key == "flush_interval_ms") end.flush_interval_ms = MetaInt(s, 1);
    else if (key == "process_gone_ns") end.process_gone_ns = MetaInt(s, 1);
    else if (key == "created_unix_ns") end.created_ns = MetaInt(s, 1);
  }
  return end;
}

void NoteRecordingEnd(const RecordingEnd& end, RankTrace& t) {
  const bool unfinished = end.state == "recording" || end.state == "incomplete";
  if (unfinished)
    t.stats.Set(Stat::recording_incomplete, std::max<int64_t>(t.stats.Get(Stat::recording_incomplete), 1));
  if (end.state == "write_failed" || (unfinished && t.stats.Get(Stat::records_lost_write_failed) > 0)) {
    t.notices.push_back(end.last_commit_ns > 0
                            ? fmt::format("its recording stopped at a failed write (disk full, quota, I/O error): "
                                          "everything after its last commit at {} is missing",
                                          UtcTime(end.last_commit_ns))
                            : std::string("its recording stopped at a failed write (disk full, quota, I/O error): "
                                          "everything after its last commit is missing"));
  } else if (unfinished) {
    NoteUnfinished(end, t);
  } else if (end.state == "lost") {
    t.stats.Set(Stat::recording_failed, std::max<int64_t>(t.stats.Get(Stat::recording_failed), 1));
    t.notices.push_back("its recording failed (" + (end.lost_reason.empty() ? std::string("reason unknown") : end.lost_reason) +
                        "): everything this process did is missing");
  }
}

}  // namespace overlapprof
