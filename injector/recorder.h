#pragma once
// The recorder: every piece of process-wide state of the injector, in one object, g_recorder
// (defined in runtime.cc). It is the only mutable namespace-scope variable of injector/*.cc;
// the hooks' per-thread state (t_thread, below) is the only other one, and is per thread.
//
// State machine (Recorder::state(), one atomic int). A hook's fast path is one relaxed load
// of it: kActive records, kUndecided/kActivating take the slow path (Activate), every other
// state returns at once.
//
//   preload constructor, no OVERLAPPROF_OUTPUT_DIR ─────────────────────────────► kInert
//   preload constructor, OVERLAPPROF_OUTPUT_DIR set ──► kUndecided
//   kUndecided ── first NCCL call or InitializeInjection (one CAS winner) ──► kActivating
//   kActivating ── the run's metadata read from the environment (rank, and once, the listed
//               │  variables that change overlap: overlap_env.h, meta overlap_env), then ring,
//               │  descriptors, writer thread, handlers all set up ──────────► kActive
//               └─ any of them failed ─────────────────────────────────────► kInert
//   kActive ── exit (atexit) or a terminating signal left at its default disposition
//           │  (runtime.cc, kFlushSignals: HUP INT QUIT TERM USR1 USR2 ALRM VTALRM PROF XCPU
//           │  XFSZ PIPE PWR) ─────────────────────────────────────────────────► kFlushing
//           │  (the handler waits, bounded, for kFinished, then the default action happens)
//           ├─ SIGTERM/SIGINT the application handles: a flush, stays kActive (other handled
//           │  signals are never ours: the application's handler is left in place)
//           └─ the store cannot be created or written: stays kActive. The writer's failed mode
//              (sink.cc, Fail): hooks go on pushing, the writer drains, counts every record in
//              records_lost_write_failed and drops it (memory stays flat), CUPTI's activity
//              kinds are disabled; the counters go into the file when a small transaction
//              fits, else into one line at exit
//   kFlushing ── the writer thread committed and closed the file ─────────────► kFinished
//   kActivating/kActive ── the writer cannot guard the store's descriptors (no SQLite VFS
//           system-call table to override: nothing is opened) ────────────────► kFinished
//   fork(): the child of a process that activated becomes kForkedChild (pthread_atfork) and
//           never touches the parent's file or descriptors; the parent counts the fork
//           (forked_children_unrecorded) and the child counts its NCCL ops on a page it
//           shares with the parent (nccl_ops_in_forked_children). A child forked before
//           activation never saw an activated recorder: it is kUndecided and records on its
//           own. A child forked while another thread was activating inherits kActivating with
//           no thread to finish it: the activation is claimed with the activator's pid
//           (activator_pid_, CAS from 0), so such a child sees a pid not its own and turns
//           itself kInert instead of waiting.
//   A descriptor of ours closed or reused by the host (OwnedFd::Owned fails): nothing is
//           written through it; recorder_descriptor_lost is counted and recording stops
//           (kActive → kFinished); what the writer still holds is counted as lost.
//   Log lines go only to LogFd(): a private duplicate of fd 2 made at activation while fd 2
//           was still what it was when the library loaded, else fd 2 while it still is, else
//           nowhere.
//   Every commit writes meta last_commit_ns (when it began); the file's meta
//           flush_interval_ms bounds what a process that never reaches kFinished (_exit,
//           SIGKILL, a crash) lost after it.
//
// Who may do what, by thread:
//  - Hooks (application threads, CUPTI's threads): Recording(), Push(), stats(), comms(), the
//    id counters, the NCCL function table, WakeWriter(). Never block, never allocate.
//  - The writer thread (sink.cc, started by Activate, never by the constructor): the Sink,
//    the store file, the writer-side accessors below. Holds no lock a hook waits on.
//  - Signal handlers and the atexit handler: OnSignal/OnExit; async-signal-safe calls only
//    (write, poll, fstat, sigaction, raise) plus atomics.
//  - pthread_atfork: OnForkParent (counts) and OnForkChild (→ kForkedChild).
// Locks: CommTable::mu_ (inserts/removals of communicators) and CuptiState::mu (the CUPTI
// buffer pool). Neither is ever held across a call into NCCL or CUPTI.
//
// Memory order: the state's relaxed load only decides; every datum a hook then reads that
// another thread published (the ring, the CUPTI API table) is read through its own acquire
// load, paired with the publisher's release store. That is what keeps ThreadSanitizer quiet
// without adding a fence to the disabled fast path.
//
// The object is constant-initialized (constinit) and trivially destructible: it is usable
// from the preload constructor whatever the static-initialization order, and it is never
// destroyed, so a writer thread or CUPTI callback still running at exit never sees it go.
// Units: ns on CLOCK_REALTIME everywhere.
#include <cupti.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "injector/plugin_pool.h"
#include "injector/records.h"
#include "injector/ring.h"
#include "src/common/stats.h"

namespace overlapprof::inject {

enum class State : int {
  kUndecided = 0,   // under `overlapprof run`, not activated yet
  kActivating = 1,  // one thread is activating; the others wait for its outcome
  kActive = 2,      // recording
  kFlushing = 3,    // the final flush (exit, fatal signal): hooks no longer record
  kFinished = 4,    // the file is closed (or the writer gave up): nothing more is recorded
  kInert = 5,       // never records in this process (not under run, activation failed)
  kForkedChild = 6, // a child forked after activation: never records; its NCCL ops are counted
                    // in the parent's file (nccl_ops_in_forked_children), through a shared page
};

// The data-quality counters the hooks, CUPTI callbacks and the writer bump: the store's own
// list (src/common/stats.def), as atomics. The writer copies them into the store's stats
// table at every commit (StatCounters).
class AtomicStats {
 public:
  void Add(Stat s, int64_t n = 1) noexcept { v_[static_cast<size_t>(s)].fetch_add(n, std::memory_order_relaxed); }
  void Set(Stat s, int64_t n) noexcept { v_[static_cast<size_t>(s)].store(n, std::memory_order_relaxed); }
  int64_t Get(Stat s) const noexcept { return v_[static_cast<size_t>(s)].load(std::memory_order_relaxed); }
  // Every counter, added to `into`.
  void AddTo(StatCounters* into) const noexcept {
    for (size_t i = 0; i < kStatCount; ++i) into->Add(static_cast<Stat>(i), v_[i].load(std::memory_order_relaxed));
  }

 private:
  std::atomic<int64_t> v_[kStatCount] = {};
};

// A descriptor the recorder opened (eventfds, the store's SQLite files), moved to a high
// number (F_DUPFD_CLOEXEC from kHighFdBase, below the RLIMIT_NOFILE soft limit) so a host
// that closes every fd >= 3 and opens its own files does not get ours back, and its identity
// (st_dev, st_ino) at open. Every use checks Owned() first: fstat is async-signal-safe, so
// signal handlers check too. A host could still close ours and open a file under the same
// number between the check and the use; the high number makes that a deliberate act.
struct OwnedFd {
  std::atomic<int> fd{-1};               // published with release after dev/ino
  std::atomic<uint64_t> dev{0}, ino{0};  // identity at open
  // Takes `fd` (moves it high, closes the original): false (and `fd` closed) on failure.
  bool Adopt(int fd) noexcept;
  // The descriptor is still the one we opened (-1: never adopted, or not ours any more).
  bool Owned() const noexcept;
  int get() const noexcept { return fd.load(std::memory_order_acquire); }
};
inline constexpr int kHighFdBase = 1000;  // lower when RLIMIT_NOFILE is lower

// The unix VFS system calls of the injector's own SQLite that sink.cc overrides (each
// override checks the descriptor is one of store_fds() first): the real ones. Written once
// by the writer thread before it opens the store; used only by it.
struct StoreSyscalls {
  int (*open)(const char*, int, int) = nullptr;
  int (*close)(int) = nullptr;
  int (*fstat)(int, struct stat*) = nullptr;
  int (*ftruncate)(int, off_t) = nullptr;
  int (*fcntl)(int, int, ...) = nullptr;
  ssize_t (*read)(int, void*, size_t) = nullptr;
  ssize_t (*pread)(int, void*, size_t, off_t) = nullptr;
  ssize_t (*pread64)(int, void*, size_t, off64_t) = nullptr;
  ssize_t (*write)(int, const void*, size_t) = nullptr;
  ssize_t (*pwrite)(int, const void*, size_t, off_t) = nullptr;
  ssize_t (*pwrite64)(int, const void*, size_t, off64_t) = nullptr;
  int (*fchmod)(int, mode_t) = nullptr;
  int (*fallocate)(int, off_t, off_t) = nullptr;
  int (*fchown)(int, uid_t, gid_t) = nullptr;
  void* (*mmap)(void*, size_t, int, int, int, off_t) = nullptr;
};

// ---- Communicators (nccl_hooks.cc) ------------------------------------------------------
struct CommInfo {
  uint64_t id = 0;  // identical on every rank of the communicator
  // Relaxed atomics (plain loads on x86): a non-blocking communicator's are filled in once
  // it is ready (nccl_hooks.cc, RefreshPending), while other threads may read them.
  std::atomic<int32_t> rank{-1}, nranks{-1}, device{-1};
  bool nonblocking = false;
  bool derived = false;           // created by Split/Shrink (a sub-communicator)
  std::atomic<bool> pending{false};  // non-blocking and not ready at creation: rank/size/device unknown
  std::atomic<uint64_t> seq{0};     // next op's sequence number
  std::atomic<uint64_t> splits{0};  // ncclCommSplit/Shrink calls so far (derives child ids)
};

// Open addressing over ncclComm_t values (as const void*), power-of-two size. Lookups are
// lock-free (acquire loads); inserts and removals take `mu`. A removed key becomes
// kTombstone; CommInfos are never freed (a lookup may race with a removal).
class CommTable {
 public:
  static constexpr size_t kSlots = 4096;
  CommInfo* Find(const void* comm) noexcept;
  // Creates the CommInfo (nullptr when out of memory). When the table is full the info is
  // still returned (the caller's record keeps its identity) but never found again.
  CommInfo* Add(const void* comm, uint64_t id, int rank, int nranks, int device, bool nonblocking) noexcept;
  void Remove(const void* comm) noexcept;
  // Communicators created pending (non-blocking, not ready) and not resolved yet: while 0,
  // ncclCommGetAsyncError's hook looks nothing up.
  std::atomic<int> pending_count{0};

 private:
  struct Slot {
    std::atomic<const void*> key{nullptr};
    std::atomic<CommInfo*> info{nullptr};
  };
  Slot slots_[kSlots];
  std::mutex mu_;  // inserts and removals only; never held across an NCCL or CUPTI call
};

// ---- NCCL's real functions (nccl_hooks.cc) ----------------------------------------------
// Resolved on first use; `fn[i]` is null (not yet), kMissing, or the function. kMissing is
// cached only once an NCCL is loaded (ncclGetVersion resolves): a call made before NCCL is
// loaded answers ncclInvalidUsage and leaves the slot null, so a later load is found.
struct NcclFunctions {
  static constexpr size_t kMax = 40;
  std::atomic<void*> fn[kMax] = {};
  std::atomic<void*> library{nullptr};  // the loaded libnccl's handle (RTLD_NOLOAD)
  // A call came before any NCCL was loaded (logged once; nothing cached, so a later load
  // is found).
  std::atomic<bool> logged_not_loaded{false};
};

// ---- CUPTI (cupti.cc) -------------------------------------------------------------------
// The CUPTI entry points we use, resolved from the loaded libcupti. Written once by Start()
// before `active` is stored with release; read only after an acquire load of `active` saw
// true (or by the thread that wrote it).
struct CuptiApi {
  decltype(&cuptiSubscribe) Subscribe = nullptr;
  decltype(&cuptiEnableCallback) EnableCallback = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) RegisterCallbacks = nullptr;
  decltype(&cuptiActivityEnable) Enable = nullptr;
  decltype(&cuptiActivityDisable) Disable = nullptr;
  decltype(&cuptiActivityFlushAll) FlushAll = nullptr;
  decltype(&cuptiActivityGetNextRecord) GetNextRecord = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) GetNumDropped = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) PushExternal = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) PopExternal = nullptr;
  decltype(&cuptiGetResultString) ResultString = nullptr;
  decltype(&cuptiGetCallbackName) CallbackName = nullptr;                          // optional
  decltype(&cuptiActivityFlushPeriod) FlushPeriod = nullptr;                       // optional
  decltype(&cuptiActivityRegisterTimestampCallback) RegisterTimestamp = nullptr;  // optional
  decltype(&cuptiGetContextId) ContextId = nullptr;                               // optional
  decltype(&cuptiGetVersion) Version = nullptr;                                   // optional
};

struct CuptiState {
  static constexpr size_t kBufferBytes = 4 << 20;
  static constexpr size_t kDropSlots = 64;
  struct Completed {
    uint8_t* data;
    size_t valid;  // bytes
  };
  struct DropSlot {
    uint32_t context, stream;
    uint64_t dropped;
  };
  CuptiApi api;                            // see CuptiApi
  std::atomic<bool> api_ready{false};      // api written (release); set before any callback is registered
  std::atomic<bool> active{false};         // subscribed and recording (release/acquire)
  std::atomic<bool> store_failed{false};   // the writer cannot store anything: activities stay disabled
  CUpti_SubscriberHandle subscriber = nullptr;  // Start() only
  // The synchronization records carry cudaEventSyncId (CUPTI 12.8+, CUpti_ActivitySynchronization2)
  // and CUDA_EVENT records are enabled: stored by Start() (release) before it enables either kind;
  // read by the decoder (acquire).
  std::atomic<bool> event_sync_ids{false};

  // The buffer pool: fixed arrays of max_buffers entries, allocated once by Start() before
  // CUPTI can ask for a buffer, so nothing in CUPTI's callbacks allocates but the buffers.
  std::mutex mu;  // guards everything below; never held across a CUPTI call
  size_t max_buffers = 64;  // 256 MiB at most; OVERLAPPROF_CUPTI_BUFFERS overrides
  size_t allocated = 0;
  uint8_t** free_buffers = nullptr;
  size_t n_free = 0;
  Completed* completed = nullptr;  // handed back by CUPTI, not yet decoded by the writer
  size_t n_completed = 0;
  // Dropped records per (context, stream), as CUPTI reports them. Past kDropSlots pairs,
  // drops go to the last slot.
  DropSlot drops[kDropSlots] = {};
  size_t n_drops = 0;
};

// ---- NCCL's profiler plugin (nccl_plugin.cc) -------------------------------------------
// One context per communicator NCCL initialized the plugin for, in a fixed array (NCCL's
// `void* context` points at one): no allocation on NCCL's threads. Written by the init call
// before NCCL can use the context; read by NCCL's threads afterwards.
struct PluginContext {
  uint64_t comm_id = 0;    // our communicator id (nccl_hooks.cc; 0 when the init ran elsewhere)
  uint64_t comm_hash = 0;  // NCCL's commHash
  int32_t rank = -1, nranks = -1;
  uint8_t abi = 0;         // 4, 5, 6
};
struct PluginState {
  static constexpr size_t kContexts = 1024;
  static constexpr size_t kDefaultOps = 65536;  // ops in flight (OVERLAPPROF_NCCL_PLUGIN_OPS)
  std::atomic<PluginOpPool*> pool{nullptr};  // created by the first init (release)
  std::atomic<bool> pool_failed{false};
  std::atomic<uint64_t> next_group{1};
  std::atomic<uint32_t> next_context{0};
  PluginContext contexts[kContexts];
};

struct SinkConfig;

// The hooks' per-thread state: the kernel thread id (cached) and NCCL group nesting.
struct ThreadState {
  int32_t tid = 0;
  int group_depth = 0;
  uint64_t group_launch_id = 0;
  // Set by the communicator-creating hooks around the real call: NCCL initializes its
  // profiler plugin for the new communicator inside that call (on this thread when blocking),
  // and the plugin's init takes our id for it from here (nccl_plugin.cc).
  uint64_t creating_comm_id = 0;
  // Depth of collective / point-to-point hooks on this thread. NCCL calls some of its own exported
  // functions through the PLT (ncclBcast calls ncclBroadcast), which lands in our hook again: only
  // the outermost call is recorded, so one user call is one comm op (and one launch id).
  int op_depth = 0;
};
extern constinit thread_local ThreadState t_thread __attribute__((visibility("hidden")));

class Recorder {
 public:
  constexpr Recorder() = default;
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // ---- Hooks (any thread) -------------------------------------------------------------
  State state() const noexcept { return static_cast<State>(state_.load(std::memory_order_relaxed)); }
  // True when this process records. The fast path is one relaxed load.
  bool Recording() noexcept {
    int s = state_.load(std::memory_order_relaxed);
    if (s == static_cast<int>(State::kActive)) return true;
    if (s > static_cast<int>(State::kActive)) return false;
    return Activate();
  }
  // Slow path of Recording(): decides once per process whether to record, and starts the
  // writer thread if so. Safe from any thread, any number of times; never throws.
  bool Activate() noexcept;
  // Recording() for a collective or point-to-point call: in a forked child (kForkedChild)
  // the call is counted for the parent (CountForkedChildOp) before it is passed through.
  bool RecordingOp() noexcept {
    int s = state_.load(std::memory_order_relaxed);
    if (s == static_cast<int>(State::kActive)) return true;
    if (s < static_cast<int>(State::kActive)) return Activate();
    if (s == static_cast<int>(State::kForkedChild)) CountForkedChildOp();
    return false;
  }
  void CountForkedChildOp() noexcept;
  // NCCL ops forked children made so far (the shared page; 0 without one).
  int64_t ForkedChildOps() const noexcept;
  // The descriptor our log lines go to, checked now (async-signal-safe): the private
  // duplicate of fd 2 made at activation while it was still ours, else fd 2 itself while it
  // is still what it was when the library loaded; -1 (nothing is written) otherwise.
  int LogFd() const noexcept;
  // Queues a record for the writer thread; counts it as dropped when the ring is full.
  // Out of line on purpose (runtime.cc): inlined into a hook, GCC keeps the record's fields
  // in registers across the NCCL call and rebuilds it on the stack just before the copy into
  // the ring, and the copy's 16-byte loads then stall on store forwarding (+30-40 ns per
  // call measured with bench/injector).
  void Push(const HookRecord& r) noexcept;
  // Wakes the writer thread (async-signal-safe; a no-op before activation).
  void WakeWriter() noexcept;

  AtomicStats& stats() noexcept { return stats_; }
  CommTable& comms() noexcept { return comms_; }
  NcclFunctions& nccl() noexcept { return nccl_; }
  CuptiState& cupti() noexcept { return cupti_; }
  PluginState& plugin() noexcept { return plugin_; }
  // Id counters: external correlation ids of NCCL launches, NVTX start/end range ids, and
  // ncclCommInitAll calls (part of those communicators' ids). Never 0 for the first two.
  uint64_t NextLaunchId() noexcept { return next_launch_id_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t NextRangeId() noexcept { return next_range_id_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t NextInitAllCall() noexcept { return init_all_calls_.fetch_add(1, std::memory_order_relaxed); }

  // ---- Process events (runtime.cc) ----------------------------------------------------
  void OnLoad() noexcept;       // the preload constructor: reads the environment only
  void OnForkChild() noexcept;   // pthread_atfork child handler
  void OnForkParent() noexcept;  // pthread_atfork parent handler: counts forked_children
  void OnSignal(int sig, siginfo_t* info, void* ctx) noexcept;
  using prev_signal_actions_t = struct sigaction[32];
  // atexit: the final flush, left after flush_ms + kExitGraceMs without writer progress
  // (a stall), or kExitCapMs in all.
  void OnExit() noexcept;
  static constexpr int kExitGraceMs = 2000;
  static constexpr int kExitCapMs = 20000;

  // ---- The writer thread's side (sink.cc) ---------------------------------------------
  Ring<HookRecord>* ring() const noexcept { return ring_.load(std::memory_order_acquire); }
  int wake_fd() const noexcept { return wake_fd_.get(); }
  int flush_ms() const noexcept { return flush_ms_; }
  const SinkConfig& config() const noexcept { return *cfg_; }
  bool StopRequested() const noexcept { return stop_.load(std::memory_order_acquire); }
  // Flush requests from signal handlers since the last call.
  int TakeFlushRequests() noexcept { return flush_requests_.exchange(0, std::memory_order_acq_rel); }
  // Tells a signal handler waiting in WaitForFlush/WaitForFinish that a flush is done.
  void SignalFlushDone() noexcept;
  // The writer took records or committed (OnExit tells a stall from a long final flush).
  void WriterProgress() noexcept { writer_progress_.fetch_add(1, std::memory_order_relaxed); }
  // A descriptor of ours is lost: nothing more is recorded (kActive → kFinished). (A store
  // that cannot be written keeps kActive: the writer counts what hooks push, sink.cc.)
  void WriterFailed() noexcept;
  // The writer thread is done with the file: → kFinished (release).
  void WriterFinished() noexcept;
  // One of our descriptors was closed or reused by the host: counts recorder_descriptor_lost
  // (once per descriptor use refused), logs once, and stops recording (→ kFinished).
  void DescriptorLost(const char* what) noexcept;
  bool DescriptorWasLost() const noexcept { return descriptor_lost_logged_.load(std::memory_order_relaxed); }
  // The wake eventfd when it is still ours, else -1 (and DescriptorLost).
  int CheckedWakeFd() noexcept;
  // The SQLite files of the store (writer thread only; sink.cc's VFS system-call overrides).
  static constexpr size_t kStoreFds = 16;
  OwnedFd* store_fds() noexcept { return store_fds_; }
  StoreSyscalls& store_syscalls() noexcept { return store_syscalls_; }

 private:
  bool DoActivate();
  void InstallSignalHandlers() noexcept;
  void WaitForFlush(int timeout_ms) noexcept;
  void WaitForFinish(int timeout_ms) noexcept;
  // kActive → kFlushing (once) and asks the writer to stop; false when nothing to stop.
  bool BeginFinalFlush() noexcept;

  std::atomic<int> state_{static_cast<int>(State::kUndecided)};
  AtomicStats stats_;

  // Set up by DoActivate (on the activating thread) before state_ becomes kActive.
  std::atomic<pid_t> activator_pid_{0};           // who claimed activation (CAS from 0; see above)
  std::atomic<pid_t> owner_pid_{0};                // the process that activated (forks differ)
  std::atomic<Ring<HookRecord>*> ring_{nullptr};  // published with release
  OwnedFd wake_fd_;                               // eventfd: wakes the writer
  OwnedFd done_fd_;                               // eventfd: the writer finished a requested flush
  OwnedFd store_fds_[kStoreFds];                  // the store's SQLite files (writer thread)
  StoreSyscalls store_syscalls_;                  // writer thread
  std::atomic<bool> descriptor_lost_logged_{false};
  std::atomic<uint64_t> writer_progress_{0};      // see WriterProgress
  SinkConfig* cfg_ = nullptr;                     // handed to the writer by pthread_create
  int flush_ms_ = 1000;                           // commit period, ms (>= 10)
  pthread_t thread_{};                            // the writer thread
  std::atomic<bool> writer_started_{false};       // thread_ is joinable (this process)
  std::atomic<bool> atfork_installed_{false};
  // NCCL ops of forked children: one counter on a MAP_SHARED page made at activation, which
  // every child forked after it shares (null when the mapping failed).
  std::atomic<std::atomic<int64_t>*> forked_child_ops_{nullptr};
  // fd 2 when the library loaded (preload constructor: fstat only), and our private
  // duplicate of it made at activation (LogFd).
  std::atomic<bool> stderr_known_{false};
  std::atomic<uint64_t> stderr_dev_{0}, stderr_ino_{0};
  OwnedFd log_fd_;

  // Requests to the writer thread.
  std::atomic<bool> stop_{false};          // final flush, then close
  std::atomic<int> flush_requests_{0};     // flush now and say so on done_fd_

  // Signal dispositions we replaced and chain to, by signal number (written before our
  // handler is installed; runtime.cc, InstallSignalHandlers, says which signals).
  struct sigaction prev_[32] {};
  std::atomic<bool> in_handler_{false};

  std::atomic<uint64_t> next_launch_id_{1};
  std::atomic<uint64_t> next_range_id_{1};
  std::atomic<uint64_t> init_all_calls_{0};

  CommTable comms_;
  NcclFunctions nccl_;
  CuptiState cupti_;
  PluginState plugin_;
};

extern constinit Recorder g_recorder __attribute__((visibility("hidden")));

}  // namespace overlapprof::inject
