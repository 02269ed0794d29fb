#pragma once
// A progress line on stderr for long imports and analyses: shown only when stderr is a terminal
// (or OVERLAPPROF_PROGRESS=1 forces it at once, for tests), never when OVERLAPPROF_PROGRESS=0, and
// only once the work has run for `delay` (short runs print nothing). A ticker thread redraws it every
// 200 ms so a single huge file still shows time passing; the line is erased when done.
//
// Threading: Begin/Done are called by the one thread driving the work; the ticker only reads
// the state under mu_. Nothing here throws (a failed thread start just means no ticker).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace overlapprof {

class Progress {
 public:
  // `total_bytes`: the sum of the input sizes (progress is weighted by size).
  Progress(std::string verb, size_t total_items, uint64_t total_bytes,
           std::chrono::milliseconds delay = std::chrono::milliseconds(1000));
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void Begin(const std::string& item, uint64_t bytes);  // starts item i (0-based, in order)
  void Done();                                          // the current item finished
  bool enabled() const { return enabled_; }

 private:
  void Draw();  // requires mu_
  void Loop();

  const bool enabled_;
  const std::string verb_;
  const size_t total_items_;
  const uint64_t total_bytes_;
  const std::chrono::steady_clock::time_point start_;
  const std::chrono::milliseconds delay_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, drawn_ = false;
  size_t done_items_ = 0;
  uint64_t done_bytes_ = 0, current_bytes_ = 0;
  std::string current_;
  std::thread ticker_;
};

}  // namespace overlapprof
