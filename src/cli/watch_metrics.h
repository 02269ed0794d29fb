#pragma once
// `overlapprof run --watch`'s live figures (docs/watch.md): what the watcher keeps from one
// analysis of the rank files to the next, and their Prometheus text exposition.
//
// Each interval the watcher analyzes the rank files as committed so far (AnalyzeFiles, the
// same pass as `analyze`) and folds the result in here: per rank file, the iteration windows
// not counted yet that are complete (every window but the last while the job records; all of
// them once it has ended) are added to the rank's counters, once each. Op-family figures and
// data-quality counters are those of the whole recording so far. Units inside: ns; the
// exposition is in base units (seconds, bytes, ratios 0..1).
//
// Threading: none; the watcher's thread owns a WatchState.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analyzers/summary.h"
#include "src/common/status.h"

namespace overlapprof {

// One rank file's share of the figures (a restarted rank writes a second file: both add up
// under the same rank and host labels).
struct WatchFileFigures {
  int64_t rank = kUnknown;
  std::string host;
  int64_t next_window = 0;  // index of the first window not counted yet
  // Sums over the counted windows (ns).
  int64_t steps = 0, wall_ns = 0, compute_ns = 0, comm_ns = 0, hidden_ns = 0, exposed_ns = 0, waiting_ns = 0,
          idle_ns = 0;
  // The windows counted by the last fold that counted any (the "last interval" gauges).
  int64_t last_steps = 0, last_wall_ns = 0, last_comm_ns = 0, last_hidden_ns = 0, last_exposed_ns = 0;
  std::vector<OpTypeRow> op_types;                        // the whole recording so far
  std::vector<std::pair<std::string, int64_t>> counters;  // non-zero data-quality counters, by name
};

// Whether the job is still recording when the analysis was made.
enum class WatchPhase : uint8_t { kRecording, kEnded };

// The watcher's own health, exposed beside the figures.
struct WatchHealth {
  int64_t analyses = 0, failures = 0;
  double last_analysis_seconds = 0;       // how long the last analysis took
  double last_success_unix_seconds = 0;   // when the last analysis that succeeded ended (0: none yet)
  int64_t rank_files = 0;                 // rank files in the last analysis
};

class WatchState {
 public:
  // Folds one analysis of the rank files in. kRecording: the last window of each file may still
  // grow and is not counted; the counters recording_incomplete and recording_incomplete_large_loss
  // (every file being written is unfinished) are left out. kEnded: every window counts.
  void Fold(const Summary& summary, WatchPhase phase);

  // The Prometheus text exposition (format 0.0.4) of the figures and `health`.
  std::string Exposition(const WatchHealth& health) const;

  const std::map<std::string, WatchFileFigures>& files() const { return files_; }

 private:
  std::map<std::string, WatchFileFigures> files_;  // by source path
};

// --watch-listen's value: an IPv4 address and a port ("127.0.0.1:9464"; port 0: any free one).
struct ListenAddress {
  std::string host;  // dotted quad
  uint16_t port = 0;
  bool loopback = false;  // 127.0.0.0/8
};
// kInvalidArgument (one line, exit 2) for anything else.
StatusOr<ListenAddress> ParseListenAddress(std::string_view value);

// `s` escaped as a Prometheus label value (backslash, double quote and newline).
std::string PromLabelValue(std::string_view s);

}  // namespace overlapprof
