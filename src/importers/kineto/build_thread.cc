// The builder's thread (build_thread.h).
#include "src/importers/kineto/build_thread.h"

#include <system_error>
#include <utility>

#include "src/common/stats.h"

namespace overlapprof::kineto {

BuildThread::BuildThread(TraceBuilder& b) : b_(b) {
  for (size_t i = 1; i < kBatches; ++i) free_.push_back(&batches_[i]);
  cur_ = &batches_[0];
}

BuildThread::~BuildThread() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool BuildThread::Start() {
  try {
    thread_ = std::thread([this] { Run(); });
  } catch (const std::system_error&) {
    return false;
  }
  return true;
}

void BuildThread::SyncTo(size_t n) {
  if (n > handed_) Hand(true);  // some are still in the batch being filled
  std::unique_lock<std::mutex> lock(mu_);
  if (built_ >= n) return;
  cv_.notify_all();
  cv_.wait(lock, [&] { return built_ >= n; });
}

void BuildThread::Call(const std::function<void()>& fn) {
  Sync();
  std::unique_lock<std::mutex> lock(mu_);
  call_ = &fn;
  cv_.notify_all();
  cv_.wait(lock, [&] { return call_ == nullptr; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void BuildThread::SyncHanded() {
  if (cur_->n != 0) Hand(true);
  std::unique_lock<std::mutex> lock(mu_);
  cv_.notify_all();
  cv_.wait(lock, [&] { return ready_.empty() && !building_; });
  pending_ = false;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void BuildThread::Hand(bool wake) {
  std::unique_lock<std::mutex> lock(mu_);
  ready_.push_back(cur_);
  handed_ += cur_->n;
  pending_ = true;
  if (wake || ready_.size() >= kWake || free_.empty()) cv_.notify_all();
  cv_.wait(lock, [&] { return !free_.empty(); });
  cur_ = free_.back();
  free_.pop_back();
}

void BuildThread::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !ready_.empty() || call_; });
    if (stop_) return;
    if (call_) {
      try {
        (*call_)();
      } catch (...) {
        error_ = std::current_exception();
      }
      call_ = nullptr;
      cv_.notify_all();
      continue;
    }
    Batch* batch = ready_.front();
    ready_.erase(ready_.begin());
    building_ = true;
    lock.unlock();
    try {
      if (!error_)
        for (size_t i = 0; i < batch->n; ++i) {
          const WalkSlot& e = batch->slots[i];
          if (e.dups) b_.AddStat(Stat::json_duplicate_keys, e.dups);
          b_.AddEvent(e.ev);
        }
    } catch (...) {
      error_ = std::current_exception();
    }
    const size_t n = batch->n;
    batch->n = 0;
    lock.lock();
    built_ += n;
    building_ = false;
    free_.push_back(batch);
    cv_.notify_all();
  }
}

}  // namespace overlapprof::kineto
