#pragma once
// `overlapprof run --watch-textfile PATH / --watch-listen ADDR:PORT` (docs/watch.md): while the
// job records, a thread of `run` analyzes the rank files as committed so far every interval and
// exposes the figures (WatchState, watch_metrics.h) as a Prometheus textfile (written
// atomically) and/or over HTTP (GET /metrics, /healthz; libmicrohttpd, its own thread).
//
// Lifecycle, all on run's main thread: Prepare (before the job: checks the options, binds the
// port, writes a first textfile: any failure is exit 2 and the job does not start), Start (after
// the job started: the analysis thread), StopAnalysis (before the rank files are settled: joins
// the thread; no store stays open), Finish (after settling: one last analysis with every window
// counted, written and served; then the server stops).
// Threads are started with every signal blocked: run's signal forwarding stays on its main thread.
#include <memory>
#include <mutex>
#include <string>

#include "src/common/status.h"

namespace overlapprof {

struct WatchOptions {
  std::string textfile;  // empty: none
  std::string listen;    // empty: no HTTP endpoint
  double interval_s = 10;
  bool enabled() const { return !textfile.empty() || !listen.empty(); }
};

class Watcher {
 public:
  Watcher();
  ~Watcher();
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  Status Prepare(const WatchOptions& options);
  void Start(const std::string& dir);
  void StopAnalysis();
  void Finish();
  // Held while `run` itself opens a rank file (WriterOf, while it waits for processes left
  // behind): closing any descriptor of a file drops every POSIX lock this process holds on it,
  // the analysis' SQLite locks included, so the two never overlap. An analysis in progress is
  // waited for.
  std::unique_lock<std::mutex> HoldStores();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace overlapprof
