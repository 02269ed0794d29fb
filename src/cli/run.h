#pragma once
// `overlapprof run [-o DIR] [--force] [--flush-ms N] [--wait-s S] [--nccl-detail proxy] [--injector PATH] [--no-analyze]
// [--watch-textfile PATH] [--watch-listen ADDR:PORT] [--watch-interval S] -- CMD...`
// (docs/run.md).
#include <functional>
#include <string>
#include <vector>
#include "src/cli/command.h"
#include "src/cli/watch.h"

namespace overlapprof {

struct RunArgs {
  std::string output_dir;  // empty: a fresh overlapprof-YYYYmmdd-HHMMSS[-N]/
  int flush_ms = 1000;
  int wait_s = 30;     // how long to wait for processes still writing rank files after the command
  bool force = false;  // record into an output directory that holds earlier traces
  bool no_analyze = false;
  // NCCL profiler plugin detail: "" (operations and their channels) or "proxy" (also the
  // proxy thread's ProxyOp/ProxyStep events: OVERLAPPROF_NCCL_DETAIL=proxy).
  std::string nccl_detail;
  WatchOptions watch;  // --watch-textfile, --watch-listen, --watch-interval (docs/watch.md)
  // The injector to record with; empty: $OVERLAPPROF_INJECTOR, else found beside the executable.
  std::string injector;
  std::vector<std::string> command;
};

// Runs the command in its own process group with the injector in its environment, forwards
// signals to that group, waits (at most wait_s) for processes still writing rank files, settles
// the rank files and (unless no_analyze, or files are still written) calls `analyze` on the
// output directory. Returns the command's exit code (128+N when a signal N ended it;
// Outcome::CommandExited), or an error when it could not start: kInvalidArgument / kIo (exit 2)
// for a missing command or injector, an output directory that is used, locked or not writable;
// kInternal (exit 5) when the system refused a pipe or a fork. SIGPIPE is ignored in the calling
// process from its start (a reader that went away never ends `run`); the job gets the
// disposition it had.
// The job's LD_PRELOAD: the injector first (its NCCL hooks interpose before any other
// preloaded library's), then what was there before, in order; except a sanitizer runtime
// (libasan, libtsan, libubsan, libhwasan, clang's libclang_rt.*san), which must be the first
// library loaded and so stays ahead of the injector. Entries are split at ':' and spaces, as
// the dynamic loader splits them; empty ones are dropped.
std::string ComposePreload(const std::string& injector, const std::string& existing);

CommandResult RunCommand(const RunArgs& args, const std::function<CommandResult(const std::string& dir)>& analyze);

}  // namespace overlapprof
