// The recorder's lifecycle (recorder.h: its state machine, threads and locks): lazy
// activation, the ring, the writer thread, fork, signals and exit. See injector.h for the
// contract with the host process.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>

#include "injector/injector.h"
#include "injector/overlap_env.h"
#include "src/common/rank_env.h"
#include "injector/ring.h"
#include "injector/sink.h"
#include "overlapprof/version.h"

namespace overlapprof::inject {

// The injector's process-wide state: the one mutable namespace-scope variable (recorder.h).
constinit Recorder g_recorder;
constinit thread_local ThreadState t_thread;
static_assert(std::is_trivially_destructible_v<Recorder>, "g_recorder must never be destroyed (see recorder.h)");

namespace {

int64_t EnvInt(const char* const* names, int64_t fallback) {
  for (const char* const* n = names; *n; ++n) {
    const char* v = std::getenv(*n);
    if (!v || !*v) continue;
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(v, &end, 10);
    if (errno == 0 && end && *end == '\0' && x >= 0) return x;
  }
  return fallback;
}

// Async-signal-safe: restores the previous disposition's behaviour.
// SIG_DFL/SIG_IGN are tested first whatever the flags: the kernel keeps SA_SIGINFO in the
// flags of a disposition reset to SIG_DFL (SA_RESETHAND), where sa_sigaction is not callable.
void Chain(int sig, siginfo_t* info, void* ctx, const struct sigaction& prev) {
  if (prev.sa_handler == SIG_IGN) return;
  if (prev.sa_handler == SIG_DFL) {
    // Restore the default and re-raise: it is delivered when this handler returns.
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(sig, &dfl, nullptr);
    ::raise(sig);
    return;
  }
  if (prev.sa_flags & SA_SIGINFO)
    prev.sa_sigaction(sig, info, ctx);
  else
    prev.sa_handler(sig);
}

// C entry points for pthread/sigaction/atexit: they forward to the recorder.
void ForkChildTrampoline() { g_recorder.OnForkChild(); }
void ForkParentTrampoline() { g_recorder.OnForkParent(); }
void SignalTrampoline(int sig, siginfo_t* info, void* ctx) { g_recorder.OnSignal(sig, info, ctx); }
void ExitTrampoline() { g_recorder.OnExit(); }
void* WriterTrampoline(void* rec) {
  RunWriter(static_cast<Recorder*>(rec));
  return nullptr;
}

std::string Sanitize(std::string s) {
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.')) c = '_';
  return s;
}

// Writes 1 to one of our eventfds, only while it is still ours (async-signal-safe).
bool WriteOne(OwnedFd& fd, const char* what) {
  if (fd.get() < 0) return false;
  if (!fd.Owned()) {
    g_recorder.DescriptorLost(what);
    return false;
  }
  uint64_t one = 1;
  return ::write(fd.get(), &one, sizeof one) >= 0;
}

__attribute__((constructor)) void OnLoad() { g_recorder.OnLoad(); }

}  // namespace

// ---- Descriptors ---------------------------------------------------------------------------

bool OwnedFd::Adopt(int raw) noexcept {
  if (raw < 0) return false;
  int base = kHighFdBase;
  struct rlimit lim;
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
      lim.rlim_cur < static_cast<rlim_t>(base) + 64)
    base = lim.rlim_cur > 128 ? static_cast<int>(lim.rlim_cur) - 64 : 3;
  int high = ::fcntl(raw, F_DUPFD_CLOEXEC, base);
  if (high >= 0) {
    ::close(raw);
  } else {
    high = raw;  // no room up there: keep the number, the identity check still guards it
  }
  struct stat st;
  if (::fstat(high, &st) != 0) {
    ::close(high);
    return false;
  }
  dev.store(static_cast<uint64_t>(st.st_dev), std::memory_order_relaxed);
  ino.store(static_cast<uint64_t>(st.st_ino), std::memory_order_relaxed);
  fd.store(high, std::memory_order_release);
  return true;
}

bool OwnedFd::Owned() const noexcept {
  int f = fd.load(std::memory_order_acquire);
  if (f < 0) return false;
  struct stat st;
  return ::fstat(f, &st) == 0 && static_cast<uint64_t>(st.st_dev) == dev.load(std::memory_order_relaxed) &&
         static_cast<uint64_t>(st.st_ino) == ino.load(std::memory_order_relaxed);
}

void Recorder::DescriptorLost(const char* what) noexcept {
  stats_.Add(Stat::recorder_descriptor_lost);
  if (!descriptor_lost_logged_.exchange(true, std::memory_order_relaxed)) {
    // Async-signal-safe: a fixed message through write(2), to a descriptor checked first.
    static const char kMsg[] = "overlapprof: the process closed or reused a descriptor of the recorder; recording stops here (recorder_descriptor_lost)\n";
    if (int fd = LogFd(); fd >= 0) {
      ssize_t w = ::write(fd, kMsg, sizeof kMsg - 1);
      (void)w;
    }
    (void)what;
  }
  WriterFailed();
}

int Recorder::LogFd() const noexcept {
  if (log_fd_.Owned()) return log_fd_.get();
  if (!stderr_known_.load(std::memory_order_acquire)) return -1;
  struct stat st;
  if (::fstat(STDERR_FILENO, &st) == 0 && static_cast<uint64_t>(st.st_dev) == stderr_dev_.load(std::memory_order_relaxed) &&
      static_cast<uint64_t>(st.st_ino) == stderr_ino_.load(std::memory_order_relaxed))
    return STDERR_FILENO;
  return -1;
}

void Recorder::CountForkedChildOp() noexcept {
  if (std::atomic<int64_t>* n = forked_child_ops_.load(std::memory_order_acquire))
    n->fetch_add(1, std::memory_order_relaxed);
}

int64_t Recorder::ForkedChildOps() const noexcept {
  std::atomic<int64_t>* n = forked_child_ops_.load(std::memory_order_acquire);
  return n ? n->load(std::memory_order_relaxed) : 0;
}

int Recorder::CheckedWakeFd() noexcept {
  if (wake_fd_.get() < 0) return -1;
  if (wake_fd_.Owned()) return wake_fd_.get();
  DescriptorLost("wake eventfd");
  return -1;
}

// ---- Process events -----------------------------------------------------------------------

void Recorder::OnLoad() noexcept {
  // Only reads the environment (the contract in injector.h).
  const char* dir = std::getenv("OVERLAPPROF_OUTPUT_DIR");
  if (!dir || !*dir) {
    state_.store(static_cast<int>(State::kInert), std::memory_order_relaxed);
    return;
  }
  // What fd 2 is now (fstat only: no descriptor is made): our log lines go only where the
  // job's stderr was, never into a file the job later opened under number 2 (LogFd).
  struct stat st;
  if (::fstat(STDERR_FILENO, &st) == 0) {
    stderr_dev_.store(static_cast<uint64_t>(st.st_dev), std::memory_order_relaxed);
    stderr_ino_.store(static_cast<uint64_t>(st.st_ino), std::memory_order_relaxed);
    stderr_known_.store(true, std::memory_order_release);
  }
}

void Recorder::OnForkChild() noexcept {
  // The child is a copy with one thread: no writer thread, the parent's file. Never records;
  // its NCCL ops are counted on the page it shares with the parent (RecordingOp).
  state_.store(static_cast<int>(State::kForkedChild), std::memory_order_relaxed);
  writer_started_.store(false, std::memory_order_relaxed);
}

void Recorder::OnForkParent() noexcept {
  State s = state();
  if (::getpid() == owner_pid_.load(std::memory_order_relaxed) && (s == State::kActive || s == State::kFlushing))
    stats_.Add(Stat::forked_children_unrecorded);
}

void Recorder::WaitForFlush(int timeout_ms) noexcept {
  // Async-signal-safe: the writer does the work; we wait on an eventfd with a bound.
  flush_requests_.fetch_add(1, std::memory_order_acq_rel);
  if (!WriteOne(wake_fd_, "wake eventfd") || !done_fd_.Owned()) return;
  struct pollfd p = {done_fd_.get(), POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) > 0) {
    uint64_t v;
    if (::read(p.fd, &v, sizeof v) < 0) return;
  }
}

bool Recorder::BeginFinalFlush() noexcept {
  // Hooks stop recording now (kActive → kFlushing); after a write failure (kFinished) the
  // writer thread still has to be stopped.
  int expected = static_cast<int>(State::kActive);
  state_.compare_exchange_strong(expected, static_cast<int>(State::kFlushing), std::memory_order_acq_rel);
  stop_.store(true, std::memory_order_release);
  // A lost wake eventfd is no reason to stop waiting: the writer polls with a timeout and
  // sees stop_ on its next pass.
  WriteOne(wake_fd_, "wake eventfd");
  return writer_started_.load(std::memory_order_acquire);
}

// Asks the writer for its final flush and close, and waits (bounded) until it is done.
void Recorder::WaitForFinish(int timeout_ms) noexcept {
  if (!BeginFinalFlush()) return;
  // Sleeps in 50 ms steps (poll with no descriptor) until the writer reports kFinished.
  for (int waited = 0; waited < timeout_ms && state() != State::kFinished; waited += 50) ::poll(nullptr, 0, 50);
}

void Recorder::OnSignal(int sig, siginfo_t* info, void* ctx) noexcept {
  int saved_errno = errno;
  const struct sigaction& prev = prev_[sig];
  if (::getpid() == owner_pid_.load(std::memory_order_relaxed)) {
    // When the signal will end the process (default disposition), the file is finished
    // first (bounded): also while another thread's handler or the exit already began the
    // final flush, so a second terminating signal (SIGHUP, then the SIGTERM a launcher
    // sends) cannot end the process in the middle of it. When the application handles the
    // signal (SIGTERM/SIGINT only: see InstallSignalHandlers) and may go on, what we have
    // is flushed and recording goes on.
    if (prev.sa_handler == SIG_DFL) {
      State s = state();
      if (s == State::kActive || s == State::kFlushing) WaitForFinish(10000);
    } else if (state() == State::kActive && !in_handler_.exchange(true)) {
      WaitForFlush(5000);
      in_handler_.store(false);
    }
  }
  Chain(sig, info, ctx, prev);
  errno = saved_errno;
}

// Which signals end the process with the final flush (docs/run.md, "Signals"): every signal
// whose default action terminates the process and that another process, the terminal or
// the kernel's limits send to stop a job: SIGHUP (an ssh disconnect, a closed terminal),
// SIGINT, SIGQUIT, SIGTERM, SIGUSR1/SIGUSR2 (batch schedulers' warning signals), SIGALRM,
// SIGVTALRM, SIGPROF (timers with nobody handling them), SIGXCPU, SIGXFSZ (resource limits),
// SIGPIPE (a reader gone: the writing thread is at a system call, its state intact) and
// SIGPWR. Left alone: the crash signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS,
// SIGABRT: the process state may be corrupt, e.g. abort() inside malloc, and a flush could
// hang or write garbage; a crash keeps what the last commit wrote), SIGKILL/SIGSTOP (cannot
// be caught), SIGIO, SIGSTKFLT and the real-time signals (private channels of libraries,
// e.g. timers and asynchronous I/O, consumed with sigwaitinfo or their own handlers; not
// how a job is stopped), and the signals whose default is to ignore, stop or continue.
constexpr int kFlushSignals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM,
                                 SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGPIPE, SIGPWR};
static_assert(sizeof(Recorder::prev_signal_actions_t) / sizeof(struct sigaction) > SIGPWR, "prev_ is indexed by signal number");

// Only a signal with the default disposition gets our handler (its default action then
// follows the flush: same exit status, same core dump), plus SIGTERM/SIGINT when the
// application handles them (it is chained to: its handler runs as before, after a flush).
// Every other handled signal keeps the application's handler untouched (a profiler's
// SIGPROF at 100 Hz must not wait for our flush), and an ignored signal stays ignored (and
// stays ignored across exec): we install nothing. A handler the application installs later
// replaces ours (it then owns the signal; no flush). Our handler takes the previous
// disposition's flags and mask, so the program's semantics do not change: no SA_RESTART it
// did not ask for (CPython installs SIGINT without it, and a read must still be
// interrupted), SA_RESETHAND (the kernel resets to SIG_DFL on delivery; we chain to the
// program's handler once), SA_ONSTACK, SA_NODEFER and sa_mask as given. Over a default
// disposition, the other flush signals are added to the mask: a second one waits until the
// flush is done and the first signal has ended the process.
void Recorder::InstallSignalHandlers() noexcept {
  for (int sig : kFlushSignals) {
    struct sigaction cur;
    if (::sigaction(sig, nullptr, &cur) != 0) continue;
    if (cur.sa_handler == SIG_IGN) continue;  // (the kernel keeps flags with SIG_IGN/SIG_DFL)
    const bool handled = cur.sa_handler != SIG_DFL;
    if (handled && sig != SIGTERM && sig != SIGINT) continue;
    prev_[sig] = cur;  // written before our handler can run (it reads prev)
    struct sigaction sa = cur;
    sa.sa_sigaction = SignalTrampoline;
    sa.sa_flags = cur.sa_flags | SA_SIGINFO;
    if (!handled)
      for (int other : kFlushSignals) sigaddset(&sa.sa_mask, other);
    struct sigaction replaced;
    if (::sigaction(sig, &sa, &replaced) != 0) continue;
    // Another thread changed it in between: put that back (it wins, as if it came after us).
    if (replaced.sa_handler != cur.sa_handler) ::sigaction(sig, &replaced, nullptr);
  }
}

void Recorder::OnExit() noexcept {
  if (::getpid() != owner_pid_.load(std::memory_order_relaxed) || !writer_started_.load(std::memory_order_acquire))
    return;
  // NCCL profiler plugin ops still open (their kernels never reported back) go out first,
  // marked incomplete, while recording is still on.
  PluginAtExit();
  // Stop recording first, so hooks called from later exit handlers do nothing.
  if (!BeginFinalFlush()) return;
  // Never hang the exit on a stall: the final flush may take as long as it makes progress
  // (a full ring takes seconds to write), but once the writer made none for one flush period
  // plus a short grace (kExitGraceMs), or after kExitCapMs in all, we leave. The file then
  // keeps recording_state "recording", which `overlapprof run` marks incomplete.
  const int64_t stall_ns = (int64_t{flush_ms_} + kExitGraceMs) * 1000000;
  int64_t start = NowNs(), last_progress_at = start;
  uint64_t last = writer_progress_.load(std::memory_order_relaxed);
  for (;;) {
    struct timespec deadline;
    ::clock_gettime(CLOCK_REALTIME, &deadline);
    int64_t ns = deadline.tv_nsec + 100 * 1000000;
    deadline.tv_sec += ns / 1000000000;
    deadline.tv_nsec = ns % 1000000000;
    if (::pthread_timedjoin_np(thread_, nullptr, &deadline) == 0) break;
    int64_t now = NowNs();
    uint64_t p = writer_progress_.load(std::memory_order_relaxed);
    if (p != last) {
      last = p;
      last_progress_at = now;
    }
    if (now - last_progress_at >= stall_ns || now - start >= int64_t{kExitCapMs} * 1000000) {
      Log("the final flush made no progress for %d ms; leaving: the file holds what was committed before and is "
          "marked incomplete",
          flush_ms_ + kExitGraceMs);
      break;
    }
  }
  writer_started_.store(false, std::memory_order_relaxed);
}

// ---- The writer thread's side ------------------------------------------------------------

__attribute__((noinline)) void Recorder::Push(const HookRecord& r) noexcept {
  Ring<HookRecord>* ring = ring_.load(std::memory_order_acquire);
  if (!ring || !ring->TryPush(r)) stats_.Add(Stat::records_dropped_hooks);
}

void Recorder::WakeWriter() noexcept { WriteOne(wake_fd_, "wake eventfd"); }

void Recorder::SignalFlushDone() noexcept { WriteOne(done_fd_, "done eventfd"); }

void Recorder::WriterFailed() noexcept {
  int expected = static_cast<int>(State::kActive);
  state_.compare_exchange_strong(expected, static_cast<int>(State::kFinished), std::memory_order_acq_rel);
}

void Recorder::WriterFinished() noexcept {
  state_.store(static_cast<int>(State::kFinished), std::memory_order_release);
}

// ---- Activation ----------------------------------------------------------------------------

bool Recorder::DoActivate() {
  const char* dir = std::getenv("OVERLAPPROF_OUTPUT_DIR");
  if (!dir || !*dir) return false;
  static const char* const kRestart[] = {"TORCHELASTIC_RESTART_COUNT", nullptr};
  static const char* const kFlush[] = {"OVERLAPPROF_FLUSH_MS", nullptr};
  static const char* const kRingSize[] = {"OVERLAPPROF_RING_RECORDS", nullptr};

  auto* cfg = new SinkConfig();
  cfg->meta.rank = EnvInt(kRankEnv, kUnknown);
  cfg->rank_from_env = cfg->meta.rank != kUnknown;
  cfg->meta.world_size = EnvInt(kWorldSizeEnv, kUnknown);
  cfg->meta.local_rank = EnvInt(kLocalRankEnv, kUnknown);
  cfg->meta.pid = ::getpid();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  cfg->meta.host = host;
  cfg->meta.clock_source = "CLOCK_REALTIME";
  cfg->meta.source_format = "overlapprof";
  cfg->meta.tool_version = kToolVersion;
  cfg->meta.backend = "nccl";
  // Once, here: the listed variables only (overlap_env.h); environ is only read.
  bool env_truncated = false;
  cfg->meta.overlap_env_json = OverlapEnvJson(environ, &env_truncated);
  if (env_truncated) stats_.Add(Stat::overlap_env_truncated);
  int64_t restart = EnvInt(kRestart, 0);
  std::string name = cfg->meta.rank != kUnknown ? "rank" + std::to_string(cfg->meta.rank) + "_" : std::string("norank_");
  name += Sanitize(host) + "_pid" + std::to_string(cfg->meta.pid) + "_restart" + std::to_string(restart) + ".db";
  cfg->path = std::string(dir) + "/" + name;
  cfg->meta.source_path = cfg->path;
  flush_ms_ = static_cast<int>(EnvInt(kFlush, 1000));
  if (flush_ms_ < 10) flush_ms_ = 10;
  cfg->flush_ms = flush_ms_;
  size_t ring_records = static_cast<size_t>(EnvInt(kRingSize, 1 << 17));
  if (ring_records < 64) ring_records = 64;
  if (ring_records > (size_t{1} << 24)) ring_records = size_t{1} << 24;

  auto* ring = new (std::nothrow) Ring<HookRecord>(ring_records);
  if (!ring || !ring->ok()) {
    Log("cannot allocate the record ring (%zu records); not recording", ring_records);
    return false;
  }
  // High-numbered and identity-checked (OwnedFd): the host may close and reuse low ones.
  if (!wake_fd_.Adopt(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) ||
      !done_fd_.Adopt(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK))) {
    Log("eventfd failed: %s; not recording", std::strerror(errno));
    return false;
  }
  // Our log lines' descriptor: a private duplicate of fd 2, made only while fd 2 is still
  // what it was when the library loaded (LogFd).
  if (LogFd() == STDERR_FILENO) log_fd_.Adopt(::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3));
  // The counter forked children bump (CountForkedChildOp): a page they share with us.
  void* page = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page != MAP_FAILED) forked_child_ops_.store(new (page) std::atomic<int64_t>(0), std::memory_order_release);
  cfg_ = cfg;
  ring_.store(ring, std::memory_order_release);
  owner_pid_.store(::getpid(), std::memory_order_relaxed);
  if (!atfork_installed_.exchange(true)) ::pthread_atfork(nullptr, ForkParentTrampoline, ForkChildTrampoline);
  // The writer thread gets every signal blocked: signals stay with the application's threads.
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = ::pthread_create(&thread_, nullptr, WriterTrampoline, this);
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    Log("cannot start the writer thread: %s; not recording", std::strerror(rc));
    return false;
  }
  writer_started_.store(true, std::memory_order_release);
  InstallSignalHandlers();
  std::atexit(ExitTrampoline);
  return true;
}

bool Recorder::Activate() noexcept {
  // The claim carries the claimant's pid: a child forked while another thread of its parent
  // was activating inherits kActivating and a pid not its own, and has no thread that will
  // ever finish the activation: it turns inert instead of waiting (recorder.h).
  pid_t me = ::getpid();
  pid_t claimant = 0;
  int expected;
  if (!activator_pid_.compare_exchange_strong(claimant, me, std::memory_order_acq_rel)) {
    if (claimant != me) {
      for (int from : {static_cast<int>(State::kUndecided), static_cast<int>(State::kActivating)}) {
        expected = from;
        state_.compare_exchange_strong(expected, static_cast<int>(State::kInert), std::memory_order_acq_rel);
      }
      return state() == State::kActive && owner_pid_.load(std::memory_order_relaxed) == me;
    }
    // Same process: the claimant sets kActivating, then the outcome.
    while ((expected = state_.load(std::memory_order_acquire)) <= static_cast<int>(State::kActivating))
      ::sched_yield();
    return expected == static_cast<int>(State::kActive);
  }
  expected = static_cast<int>(State::kUndecided);
  if (!state_.compare_exchange_strong(expected, static_cast<int>(State::kActivating), std::memory_order_acq_rel))
    return expected == static_cast<int>(State::kActive);  // decided before (inert): nothing to do
  bool ok = false;
  try {
    ok = DoActivate();
  } catch (...) {
    ok = false;
  }
  // kActive, unless the writer already gave up (kFinished: it could not guard the store's
  // descriptors, or one was lost).
  expected = static_cast<int>(State::kActivating);
  state_.compare_exchange_strong(expected, static_cast<int>(ok ? State::kActive : State::kInert),
                                 std::memory_order_acq_rel);
  return ok && expected == static_cast<int>(State::kActivating);
}

// ---- Helpers ---------------------------------------------------------------------------------

int64_t NowNs() noexcept {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int32_t TidSlow() noexcept { return t_thread.tid = static_cast<int32_t>(::syscall(SYS_gettid)); }

void Log(const char* fmt, ...) noexcept {
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "overlapprof[%d]: ", static_cast<int>(::getpid()));
  if (n < 0) return;
  va_list ap;
  va_start(ap, fmt);
  int m = std::vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  size_t len = std::strlen(buf);
  buf[len++] = '\n';
  int fd = g_recorder.LogFd();
  if (fd < 0) return;  // fd 2 is no longer the job's stderr we started with: say nothing
  ssize_t w = ::write(fd, buf, len);
  (void)w;
}

}  // namespace overlapprof::inject
