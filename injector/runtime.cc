// Process-wide state of the injector: lazy activation, the ring, the writer thread, fork,
// signals and exit. See injector.h for the contract with the host process.
//
// Threads: hooks run on the application's threads and only touch g_state, g_ring and the
// atomic counters. The writer thread (started by Activate, never by the constructor) owns
// the Sink and the store file. Signal handlers only use async-signal-safe calls (write,
// poll, sigaction, raise) plus atomics.
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

#include "injector/injector.h"
#include "injector/ring.h"
#include "injector/sink.h"
#include "overlapprof/version.h"

namespace overlapprof::inject {

std::atomic<int> g_state{kUninit};
Counters g_counters;

// Implemented in sink.cc: the writer thread's body.
void RunWriter(const SinkConfig& cfg, Ring<HookRecord>* ring, int flush_ms, int wake_fd, int done_fd,
               std::atomic<bool>* stop, std::atomic<int>* flush_requests, std::atomic<int>* writer_state) noexcept;

namespace {

pid_t g_owner_pid = 0;  // the process that activated (forked children differ)
Ring<HookRecord>* g_ring = nullptr;
int g_wake_fd = -1;  // eventfd: wakes the writer
int g_done_fd = -1;  // eventfd: the writer finished a flush a signal handler asked for
std::atomic<bool> g_stop{false};
std::atomic<int> g_flush_requests{0};
std::atomic<int> g_writer_state{0};  // 0 not started, 1 running, 2 finished
pthread_t g_thread;
bool g_thread_started = false;
SinkConfig* g_cfg = nullptr;
int g_flush_ms = 1000;
struct sigaction g_prev_term, g_prev_int;
std::atomic<bool> g_in_handler{false};
thread_local int32_t t_tid = 0;

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

void OnForkChild() {
  // The child is a copy with one thread: no writer thread, the parent's file. Inert for good.
  g_state.store(kInert, std::memory_order_relaxed);
  g_thread_started = false;
}

void WaitForFlush(int timeout_ms) {
  // Async-signal-safe: the writer does the work; we wait on an eventfd with a bound.
  uint64_t one = 1;
  g_flush_requests.fetch_add(1, std::memory_order_relaxed);
  if (::write(g_wake_fd, &one, sizeof one) < 0) return;
  struct pollfd p = {g_done_fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) > 0) {
    uint64_t v;
    if (::read(g_done_fd, &v, sizeof v) < 0) return;
  }
}

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

// Asks the writer for its final flush and close, and waits (bounded) until it is done.
void WaitForFinish(int timeout_ms) {
  g_state.store(kInert, std::memory_order_relaxed);  // hooks stop recording now
  g_stop.store(true);
  uint64_t one = 1;
  if (::write(g_wake_fd, &one, sizeof one) < 0) return;
  struct pollfd p = {g_done_fd, POLLIN, 0};
  for (int waited = 0; waited < timeout_ms && g_writer_state.load() != 2; waited += 50) ::poll(&p, 1, 50);
}

void OnSignal(int sig, siginfo_t* info, void* ctx) {
  int saved_errno = errno;
  const struct sigaction& prev = sig == SIGTERM ? g_prev_term : g_prev_int;
  if (::getpid() == g_owner_pid && g_state.load(std::memory_order_relaxed) == kActive &&
      g_writer_state.load(std::memory_order_relaxed) == 1 && !g_in_handler.exchange(true)) {
    // torchrun sends SIGTERM, then SIGKILL 30 s later. When the signal will end the process
    // (default disposition), finish the file now; when the application handles it and may
    // go on, flush what we have and keep recording.
    bool fatal = !(prev.sa_flags & SA_SIGINFO) && prev.sa_handler == SIG_DFL;
    if (fatal)
      WaitForFinish(10000);
    else
      WaitForFlush(5000);
    g_in_handler.store(false);
  }
  Chain(sig, info, ctx, prev);
  errno = saved_errno;
}

void InstallSignalHandlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = OnSignal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, &g_prev_term);
  ::sigaction(SIGINT, &sa, &g_prev_int);
}

void OnExit() {
  if (::getpid() != g_owner_pid || !g_thread_started) return;
  // Stop recording first, so hooks called from later exit handlers do nothing.
  g_state.store(kInert, std::memory_order_relaxed);
  g_stop.store(true);
  uint64_t one = 1;
  if (::write(g_wake_fd, &one, sizeof one) < 0) return;
  // Never hang the exit: give the final flush a bounded time.
  struct timespec deadline;
  ::clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 20;
  if (::pthread_timedjoin_np(g_thread, nullptr, &deadline) != 0)
    Log("the final flush did not finish within 20 s; the file holds what was committed before");
  g_thread_started = false;
}

void* WriterThread(void*) {
  RunWriter(*g_cfg, g_ring, g_flush_ms, g_wake_fd, g_done_fd, &g_stop, &g_flush_requests, &g_writer_state);
  return nullptr;
}

std::string Sanitize(std::string s) {
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.')) c = '_';
  return s;
}

bool DoActivate() {
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
  g_flush_ms = static_cast<int>(EnvInt(kFlush, 1000));
  if (g_flush_ms < 10) g_flush_ms = 10;
  size_t ring_records = static_cast<size_t>(EnvInt(kRingSize, 1 << 17));
  if (ring_records < 64) ring_records = 64;
  if (ring_records > (size_t{1} << 24)) ring_records = size_t{1} << 24;

  auto* ring = new (std::nothrow) Ring<HookRecord>(ring_records);
  if (!ring || !ring->ok()) {
    Log("cannot allocate the record ring (%zu records); not recording", ring_records);
    return false;
  }
  g_wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  g_done_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (g_wake_fd < 0 || g_done_fd < 0) {
    Log("eventfd failed: %s; not recording", std::strerror(errno));
    return false;
  }
  g_cfg = cfg;
  g_ring = ring;
  g_owner_pid = ::getpid();
  static bool atfork_done = false;
  if (!atfork_done) {
    ::pthread_atfork(nullptr, nullptr, OnForkChild);
    atfork_done = true;
  }
  // The writer thread gets every signal blocked: signals stay with the application's threads.
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = ::pthread_create(&g_thread, nullptr, WriterThread, nullptr);
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    Log("cannot start the writer thread: %s; not recording", std::strerror(rc));
    return false;
  }
  g_thread_started = true;
  g_writer_state.store(1);
  InstallSignalHandlers();
  std::atexit(OnExit);
  return true;
}

__attribute__((constructor)) void OnLoad() {
  // Only reads the environment (the contract in injector.h).
  const char* dir = std::getenv("OVERLAPPROF_OUTPUT_DIR");
  if (!dir || !*dir) g_state.store(kInert, std::memory_order_relaxed);
}

}  // namespace

bool Activate() noexcept {
  int expected = kUninit;
  if (!g_state.compare_exchange_strong(expected, kActivating)) {
    while ((expected = g_state.load(std::memory_order_acquire)) == kActivating) ::sched_yield();
    return expected == kActive;
  }
  bool ok = false;
  try {
    ok = DoActivate();
  } catch (...) {
    ok = false;
  }
  g_state.store(ok ? kActive : kInert, std::memory_order_release);
  return ok;
}

void Push(const HookRecord& r) noexcept {
  Ring<HookRecord>* ring = g_ring;
  if (!ring || !ring->TryPush(r)) g_counters.hook_records_dropped.fetch_add(1, std::memory_order_relaxed);
}

void WakeWriter() noexcept {
  if (g_wake_fd < 0) return;
  uint64_t one = 1;
  if (::write(g_wake_fd, &one, sizeof one) < 0) return;
}

int64_t NowNs() noexcept {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int32_t Tid() noexcept {
  if (t_tid == 0) t_tid = static_cast<int32_t>(::syscall(SYS_gettid));
  return t_tid;
}

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
