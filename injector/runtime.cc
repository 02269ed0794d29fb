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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "injector/injector.h"
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
void Chain(int sig, siginfo_t* info, void* ctx, const struct sigaction& prev) {
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction) prev.sa_sigaction(sig, info, ctx);
    return;
  }
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
  prev.sa_handler(sig);
}

// C entry points for pthread/sigaction/atexit: they forward to the recorder.
void ForkChildTrampoline() { g_recorder.OnForkChild(); }
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

void WriteOne(int fd) {
  uint64_t one = 1;
  if (fd >= 0 && ::write(fd, &one, sizeof one) < 0) return;
}

__attribute__((constructor)) void OnLoad() { g_recorder.OnLoad(); }

}  // namespace

// ---- Process events -----------------------------------------------------------------------

void Recorder::OnLoad() noexcept {
  // Only reads the environment (the contract in injector.h).
  const char* dir = std::getenv("OVERLAPPROF_OUTPUT_DIR");
  if (!dir || !*dir) state_.store(static_cast<int>(State::kInert), std::memory_order_relaxed);
}

void Recorder::OnForkChild() noexcept {
  // The child is a copy with one thread: no writer thread, the parent's file. Inert for good.
  state_.store(static_cast<int>(State::kInert), std::memory_order_relaxed);
  writer_started_.store(false, std::memory_order_relaxed);
}

void Recorder::WaitForFlush(int timeout_ms) noexcept {
  // Async-signal-safe: the writer does the work; we wait on an eventfd with a bound.
  flush_requests_.fetch_add(1, std::memory_order_acq_rel);
  uint64_t one = 1;
  if (::write(wake_fd(), &one, sizeof one) < 0) return;
  struct pollfd p = {done_fd_.load(std::memory_order_relaxed), POLLIN, 0};
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
  uint64_t one = 1;
  return ::write(wake_fd(), &one, sizeof one) >= 0;
}

// Asks the writer for its final flush and close, and waits (bounded) until it is done.
void Recorder::WaitForFinish(int timeout_ms) noexcept {
  if (!BeginFinalFlush()) return;
  struct pollfd p = {done_fd_.load(std::memory_order_relaxed), POLLIN, 0};
  for (int waited = 0; waited < timeout_ms && state() != State::kFinished; waited += 50) ::poll(&p, 1, 50);
}

void Recorder::OnSignal(int sig, siginfo_t* info, void* ctx) noexcept {
  int saved_errno = errno;
  const struct sigaction& prev = sig == SIGTERM ? prev_term_ : prev_int_;
  if (::getpid() == owner_pid_.load(std::memory_order_relaxed) && state() == State::kActive &&
      !in_handler_.exchange(true)) {
    // torchrun sends SIGTERM, then SIGKILL 30 s later. When the signal will end the process
    // (default disposition), finish the file now; when the application handles it and may
    // go on, flush what we have and keep recording.
    bool fatal = !(prev.sa_flags & SA_SIGINFO) && prev.sa_handler == SIG_DFL;
    if (fatal)
      WaitForFinish(10000);
    else
      WaitForFlush(5000);
    in_handler_.store(false);
  }
  Chain(sig, info, ctx, prev);
  errno = saved_errno;
}

void Recorder::InstallSignalHandlers() noexcept {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = SignalTrampoline;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, &prev_term_);
  ::sigaction(SIGINT, &sa, &prev_int_);
}

void Recorder::OnExit() noexcept {
  if (::getpid() != owner_pid_.load(std::memory_order_relaxed) || !writer_started_.load(std::memory_order_acquire))
    return;
  // Stop recording first, so hooks called from later exit handlers do nothing.
  if (!BeginFinalFlush()) return;
  // Never hang the exit: give the final flush a bounded time.
  struct timespec deadline;
  ::clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 20;
  if (::pthread_timedjoin_np(thread_, nullptr, &deadline) != 0)
    Log("the final flush did not finish within 20 s; the file holds what was committed before");
  writer_started_.store(false, std::memory_order_relaxed);
}

// ---- The writer thread's side ------------------------------------------------------------

__attribute__((noinline)) void Recorder::Push(const HookRecord& r) noexcept {
  Ring<HookRecord>* ring = ring_.load(std::memory_order_acquire);
  if (!ring || !ring->TryPush(r)) stats_.Add(Stat::records_dropped_hooks);
}

void Recorder::WakeWriter() noexcept { WriteOne(wake_fd()); }

void Recorder::SignalFlushDone() noexcept { WriteOne(done_fd_.load(std::memory_order_relaxed)); }

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
  static const char* const kRank[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", nullptr};
  static const char* const kWorld[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", nullptr};
  static const char* const kLocal[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                       "SLURM_LOCALID", nullptr};
  static const char* const kRestart[] = {"TORCHELASTIC_RESTART_COUNT", nullptr};
  static const char* const kFlush[] = {"OVERLAPPROF_FLUSH_MS", nullptr};
  static const char* const kRingSize[] = {"OVERLAPPROF_RING_RECORDS", nullptr};

  auto* cfg = new SinkConfig();
  cfg->meta.rank = EnvInt(kRank, kUnknown);
  cfg->rank_from_env = cfg->meta.rank != kUnknown;
  cfg->meta.world_size = EnvInt(kWorld, kUnknown);
  cfg->meta.local_rank = EnvInt(kLocal, kUnknown);
  cfg->meta.pid = ::getpid();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  cfg->meta.host = host;
  cfg->meta.clock_source = "CLOCK_REALTIME";
  cfg->meta.source_format = "overlapprof";
  cfg->meta.tool_version = kToolVersion;
  cfg->meta.backend = "nccl";
  int64_t restart = EnvInt(kRestart, 0);
  std::string name = cfg->meta.rank != kUnknown ? "rank" + std::to_string(cfg->meta.rank) + "_" : std::string("norank_");
  name += Sanitize(host) + "_pid" + std::to_string(cfg->meta.pid) + "_restart" + std::to_string(restart) + ".db";
  cfg->path = std::string(dir) + "/" + name;
  cfg->meta.source_path = cfg->path;
  flush_ms_ = static_cast<int>(EnvInt(kFlush, 1000));
  if (flush_ms_ < 10) flush_ms_ = 10;
  size_t ring_records = static_cast<size_t>(EnvInt(kRingSize, 1 << 17));
  if (ring_records < 64) ring_records = 64;
  if (ring_records > (size_t{1} << 24)) ring_records = size_t{1} << 24;

  auto* ring = new (std::nothrow) Ring<HookRecord>(ring_records);
  if (!ring || !ring->ok()) {
    Log("cannot allocate the record ring (%zu records); not recording", ring_records);
    return false;
  }
  int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  int done = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0 || done < 0) {
    Log("eventfd failed: %s; not recording", std::strerror(errno));
    return false;
  }
  wake_fd_.store(wake, std::memory_order_relaxed);
  done_fd_.store(done, std::memory_order_relaxed);
  cfg_ = cfg;
  ring_.store(ring, std::memory_order_release);
  owner_pid_.store(::getpid(), std::memory_order_relaxed);
  if (!atfork_installed_.exchange(true)) ::pthread_atfork(nullptr, nullptr, ForkChildTrampoline);
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
  int expected = static_cast<int>(State::kUndecided);
  if (!state_.compare_exchange_strong(expected, static_cast<int>(State::kActivating), std::memory_order_acq_rel)) {
    while ((expected = state_.load(std::memory_order_acquire)) == static_cast<int>(State::kActivating))
      ::sched_yield();
    return expected == static_cast<int>(State::kActive);
  }
  bool ok = false;
  try {
    ok = DoActivate();
  } catch (...) {
    ok = false;
  }
  // kActive, unless the writer already gave up (kFinished: it could not create the file).
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
  ssize_t w = ::write(STDERR_FILENO, buf, len);
  (void)w;
}

}  // namespace overlapprof::inject
