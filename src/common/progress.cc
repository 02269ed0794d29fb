#include "src/common/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "src/common/utf8.h"

namespace overlapprof {

namespace {
bool ProgressWanted() {
  const char* force = std::getenv("OVERLAPPROF_PROGRESS");
  if (force && std::strcmp(force, "0") == 0) return false;
  if (force && std::strcmp(force, "1") == 0) return true;
  return ::isatty(STDERR_FILENO) == 1;
}
}  // namespace

Progress::Progress(std::string verb, size_t total_items, uint64_t total_bytes, std::chrono::milliseconds delay)
    : enabled_(ProgressWanted()),
      verb_(std::move(verb)),
      total_items_(total_items),
      total_bytes_(total_bytes),
      start_(std::chrono::steady_clock::now()),
      delay_(std::getenv("OVERLAPPROF_PROGRESS") && std::strcmp(std::getenv("OVERLAPPROF_PROGRESS"), "1") == 0
                 ? std::chrono::milliseconds(0)
                 : delay) {
  if (!enabled_) return;
  try {
    ticker_ = std::thread([this] { Loop(); });
  } catch (...) {  // no thread: no progress line; the work itself is unaffected
  }
}

Progress::~Progress() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  if (drawn_) std::fprintf(stderr, "\r\x1b[2K");
  std::fflush(stderr);
}

void Progress::Begin(const std::string& item, uint64_t bytes) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  current_ = item;
  current_bytes_ = bytes;
}

void Progress::Done() {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  ++done_items_;
  done_bytes_ += current_bytes_;
  current_bytes_ = 0;
  current_.clear();
  if (std::chrono::steady_clock::now() - start_ >= delay_) Draw();
}

void Progress::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(200));
    if (stop_) break;
    if (std::chrono::steady_clock::now() - start_ >= delay_) Draw();
  }
}

void Progress::Draw() {
  constexpr int kWidth = 24;
  const double frac = total_bytes_ > 0 ? static_cast<double>(done_bytes_) / static_cast<double>(total_bytes_)
                      : total_items_ > 0 ? static_cast<double>(done_items_) / static_cast<double>(total_items_)
                                         : 0.0;
  const int filled = static_cast<int>(frac * kWidth);
  char bar[kWidth + 1];
  for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '#' : '-';
  bar[kWidth] = '\0';
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // The file being read, escaped for the terminal, its last 37 bytes from a character's start.
  std::string item = EscapeForTerminal(current_);
  if (item.size() > 40) {
    size_t from = item.size() - 37;
    while (from < item.size() && (static_cast<uint8_t>(item[from]) & 0xC0) == 0x80) ++from;
    item = "..." + item.substr(from);
  }
  std::fprintf(stderr, "\r\x1b[2K%s [%s] %zu/%zu files %5.1f s %s", verb_.c_str(), bar, done_items_, total_items_, secs,
               item.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace overlapprof
