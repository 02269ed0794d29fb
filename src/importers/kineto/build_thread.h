#pragma once
// The Kineto builder on a thread of its own, for large inputs: the events the walkers read
// (walk.h, index_walk.h) are handed over in batches and built while the reader reads the next
// ones.
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "src/importers/kineto/builder.h"
#include "src/importers/kineto/walk.h"

namespace overlapprof::kineto {

// Threads: the reader's calls all come from one thread (the reader's); the builder runs on this
// object's thread, and only there while the thread is started. The text the events' views point
// into must stay as it is until Sync() (the reader's KinetoReader::B: before every other use of
// the builder, and before the window's bytes are moved, overwritten or given back to the stream).
class BuildThread {
 public:
  explicit BuildThread(TraceBuilder& b);
  ~BuildThread();
  // Starts the thread; false when it cannot be started (events are then built at once).
  bool Start();

  // The slot for the next event (cleared), added by Commit.
  WalkSlot& Slot() {
    if (cur_->n == kBatch) Hand();
    WalkSlot& slot = cur_->slots[cur_->n];
    slot.Clear();
    return slot;
  }
  void Commit() {
    ++cur_->n;
    ++added_;
  }
  size_t added() const { return added_; }  // events added so far
  // Returns when the first `n` events added are built (Sync's, for a part).
  void SyncTo(size_t n);
  // Runs fn on the thread, after every event added (Sync), and waits for it: the builder's
  // Finish, so that its memory comes from the same malloc arena as the trace it sorts.
  void Call(const std::function<void()>& fn);
  // Returns when every event added is built (an exception the builder threw is thrown here).
  void Sync() {
    if (cur_->n == 0 && !pending_) return;
    SyncHanded();
  }

 private:
  static constexpr size_t kBatch = 512;  // events handed over at once (~180 KB)
  // Batches in flight (5.8 MB): room for the reader to run on while the builder waits for a core
  // (three threads share two); 32 was measured best (docs/performance.md, Streaming import).
  static constexpr size_t kBatches = 32;
  static constexpr size_t kWake = 4;
  struct Batch {
    std::unique_ptr<WalkSlot[]> slots{new WalkSlot[kBatch]};
    size_t n = 0;
  };

  // Hands the batch being filled over. The thread is woken when kWake batches wait (or when
  // the reader waits: no batch free, Sync), not for each: fewer switches between the threads.
  void Hand(bool wake = false);
  void SyncHanded();
  void Run();

  TraceBuilder& b_;
  Batch batches_[kBatches];
  Batch* cur_;                 // being filled by the reader
  bool pending_ = false;       // batches handed over since the last Sync (reader's)
  size_t added_ = 0, handed_ = 0;  // events added, and handed over (reader's)
  size_t built_ = 0;               // events built (under mu_)
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Batch*> ready_;  // handed over, in order
  std::vector<Batch*> free_;
  bool building_ = false, stop_ = false;
  std::exception_ptr error_;   // thrown by the builder; set and read under mu_ or when idle
  const std::function<void()>* call_ = nullptr;  // Call's, until done
  std::thread thread_;
};

}  // namespace overlapprof::kineto
