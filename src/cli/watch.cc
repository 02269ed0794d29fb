// The watcher of `overlapprof run --watch-*` (watch.h, docs/watch.md).
#include "src/cli/watch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "src/cli/options.h"
#include "src/cli/output.h"
#include "src/cli/pipeline.h"
#include "src/cli/watch_metrics.h"
#include "src/common/utf8.h"

#ifdef OVERLAPPROF_HAVE_MICROHTTPD
#include <microhttpd.h>
#endif

namespace overlapprof {
namespace {

namespace fs = std::filesystem;

void WatchNote(const std::string& line) {
  std::fprintf(stderr, "overlapprof: watch: %s\n", EscapeForTerminal(line).c_str());
}

// Runs `start` with every signal blocked, so that the threads it starts inherit that mask.
template <typename F>
auto WithSignalsBlocked(F&& start) {
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  auto result = start();
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return result;
}

// Limits of the endpoint (docs/watch.md): a scraper is a handful of connections; anything past
// these is refused or dropped by libmicrohttpd without reaching the analysis.
constexpr unsigned kMaxConnections = 16;
constexpr unsigned kConnectionTimeoutS = 5;        // an idle or slow (slowloris) client is dropped
constexpr size_t kConnectionMemoryBytes = 16 * 1024;  // request line and headers beyond: refused

// The exposition served, swapped in whole by the analysis thread; the server's thread only
// copies the pointer under the lock (never waits for an analysis).
class Published {
 public:
  void Set(std::string text) {
    auto p = std::make_shared<const std::string>(std::move(text));
    std::lock_guard<std::mutex> lock(mu_);
    text_ = std::move(p);
  }
  std::shared_ptr<const std::string> Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const std::string> text_ = std::make_shared<const std::string>();
};

#ifdef OVERLAPPROF_HAVE_MICROHTTPD
class MetricsServer {
 public:
  explicit MetricsServer(const Published& published) : published_(published) {}
  ~MetricsServer() { Stop(); }

  Status Start(const ListenAddress& a) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(a.port);
    ::inet_pton(AF_INET, a.host.c_str(), &addr.sin_addr);
    daemon_ = WithSignalsBlocked([&] {
      return MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, a.port, nullptr, nullptr, &Handle, this,
                              MHD_OPTION_SOCK_ADDR, reinterpret_cast<const sockaddr*>(&addr),
                              MHD_OPTION_CONNECTION_LIMIT, kMaxConnections, MHD_OPTION_CONNECTION_TIMEOUT,
                              kConnectionTimeoutS, MHD_OPTION_CONNECTION_MEMORY_LIMIT, kConnectionMemoryBytes,
                              MHD_OPTION_END);
    });
    if (!daemon_)
      return MakeError(StatusCode::kInvalidArgument,
                       "--watch-listen {}:{}: cannot listen there (the port is in use, or the address is not this "
                       "machine's)",
                       a.host, a.port);
    const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
    port_ = info ? info->port : a.port;
    return OkStatus();
  }
  void Stop() {
    if (daemon_) MHD_stop_daemon(daemon_);
    daemon_ = nullptr;
  }
  uint16_t port() const { return port_; }

 private:
  static MHD_Result Respond(MHD_Connection* c, unsigned status, const std::string& body, const char* type) {
    MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(r, "Allow", "GET");
    const MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
  }
  // Answers at the first call for a request (its body, if any, is never read).
  static MHD_Result Handle(void* cls, MHD_Connection* c, const char* url, const char* method, const char*,
                           const char*, size_t*, void**) {
    auto* self = static_cast<MetricsServer*>(cls);
    if (std::string_view(method) != "GET") return Respond(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n", "text/plain");
    const std::string_view path(url);
    if (path == "/metrics") {
      std::shared_ptr<const std::string> text = self->published_.Get();
      return Respond(c, MHD_HTTP_OK, *text, "text/plain; version=0.0.4; charset=utf-8");
    }
    if (path == "/healthz") return Respond(c, MHD_HTTP_OK, "ok\n", "text/plain");
    return Respond(c, MHD_HTTP_NOT_FOUND, "not found: only /metrics and /healthz\n", "text/plain");
  }

  const Published& published_;
  MHD_Daemon* daemon_ = nullptr;
  uint16_t port_ = 0;
};
#endif

std::vector<std::string> StoreFiles(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".db") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

struct Watcher::Impl {
  WatchOptions options;
  std::string dir;
  WatchState state;
  WatchHealth health;
  Published published;
#ifdef OVERLAPPROF_HAVE_MICROHTTPD
  std::optional<MetricsServer> server;
#endif
  std::thread thread;
  std::mutex mu;  // guards stop
  std::mutex stores;  // held while the analysis has rank files open (HoldStores)
  std::condition_variable cv;
  bool stop = false;
  bool failing = false;  // the last analysis failed (said once until one succeeds)
  bool expose_failing = false;  // the last textfile write failed (said once until one succeeds)
  std::optional<std::string> old_progress;  // OVERLAPPROF_PROGRESS as it was
  bool progress_set = false;

  // One analysis of the rank files as committed so far, folded into `state`, then exposed.
  void AnalyzeOnce(WatchPhase phase) {
    const auto begin = std::chrono::steady_clock::now();
    ++health.analyses;
    Status st;
    {
      std::lock_guard<std::mutex> hold(stores);
      st = AnalyzeAndFold(phase);
    }
    health.last_analysis_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (st.ok()) {
      health.last_success_unix_seconds =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
      if (failing) WatchNote("the analysis of the rank files succeeds again");
      failing = false;
    } else {
      ++health.failures;
      if (!failing) WatchNote("the analysis of the rank files failed (the figures keep their last values): " + st.message());
      failing = true;
    }
    if (Status e = Expose(); !e.ok()) {
      if (!expose_failing) WatchNote(e.message() + " (said once; the endpoint, if any, is still updated)");
      expose_failing = true;
    } else {
      expose_failing = false;
    }
  }

  Status AnalyzeAndFold(WatchPhase phase) {
    // Each file on its own first: one not readable yet (created, no first commit) is left out
    // of this interval instead of failing the others.
    std::vector<TraceInput> inputs;
    for (const std::string& f : StoreFiles(dir)) {
      StatusOr<std::vector<TraceInput>> one = ExpandInputs({f});
      if (one.ok()) inputs.insert(inputs.end(), one->begin(), one->end());
    }
    health.rank_files = static_cast<int64_t>(inputs.size());
    if (inputs.empty()) return OkStatus();
    ImportFlags flags;
    OVERLAPPROF_ASSIGN_OR_RETURN(ImportOptions io, ImportOptionsOf(flags));
    OVERLAPPROF_RETURN_IF_ERROR(CompleteImportOptions(flags, inputs, io));
    AnalysisOptions ao;  // per_iteration: the windows' splits
    OVERLAPPROF_ASSIGN_OR_RETURN(Summary summary, AnalyzeFiles(inputs, io, ao, 1));
    state.Fold(summary, phase);
    return OkStatus();
  }

  Status Expose() {
    std::string text = state.Exposition(health);
    Status st;
    if (!options.textfile.empty())
      st = WriteAtomically(options.textfile, [&](std::ostream& o) {
        o << text;
        return OkStatus();
      });
    published.Set(std::move(text));
    return st;
  }

  void Loop() {
    const auto period = std::chrono::duration<double>(options.interval_s);
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      if (cv.wait_for(lock, period, [&] { return stop; })) return;
      lock.unlock();
      AnalyzeOnce(WatchPhase::kRecording);
      lock.lock();
    }
  }
};

Watcher::Watcher() : impl_(std::make_unique<Impl>()) {}

Watcher::~Watcher() {
  StopAnalysis();
#ifdef OVERLAPPROF_HAVE_MICROHTTPD
  impl_->server.reset();
#endif
}

Status Watcher::Prepare(const WatchOptions& options) {
  impl_->options = options;
  if (!options.enabled()) return OkStatus();
  if (!options.listen.empty()) {
    OVERLAPPROF_ASSIGN_OR_RETURN(ListenAddress a, ParseListenAddress(options.listen));
#ifdef OVERLAPPROF_HAVE_MICROHTTPD
    impl_->server.emplace(impl_->published);
    OVERLAPPROF_RETURN_IF_ERROR(impl_->server->Start(a));
    WatchNote(fmt::format("serving http://{}:{}/metrics{}", a.host, impl_->server->port(),
                          a.loopback ? "" : " (not loopback: reachable from other machines)"));
#else
    (void)a;
    return MakeError(StatusCode::kInvalidArgument,
                     "--watch-listen: this overlapprof was built without an HTTP server (libmicrohttpd-dev was not "
                     "found at build time); use --watch-textfile");
#endif
  }
  // A first (empty) exposition: an unwritable textfile is an error before the job starts.
  if (Status st = impl_->Expose(); !st.ok())
    return MakeError(StatusCode::kInvalidArgument, "--watch-textfile: cannot write it: {}", st.message());
  return OkStatus();
}

void Watcher::Start(const std::string& dir) {
  if (!impl_->options.enabled()) return;
  impl_->dir = dir;
  // The analyses' progress line would interleave with the job's output: off while watching
  // (the job's environment was taken at its start).
  if (const char* p = std::getenv("OVERLAPPROF_PROGRESS")) impl_->old_progress = p;
  ::setenv("OVERLAPPROF_PROGRESS", "0", 1);
  impl_->progress_set = true;
  Impl* impl = impl_.get();
  impl_->thread = WithSignalsBlocked([impl] { return std::thread([impl] { impl->Loop(); }); });
}

std::unique_lock<std::mutex> Watcher::HoldStores() { return std::unique_lock<std::mutex>(impl_->stores); }

void Watcher::StopAnalysis() {
  if (!impl_->thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  impl_->thread.join();
}

void Watcher::Finish() {
  if (!impl_->options.enabled()) return;
  StopAnalysis();
  if (!impl_->dir.empty()) impl_->AnalyzeOnce(WatchPhase::kEnded);
  if (impl_->progress_set) {
    if (impl_->old_progress) {
      ::setenv("OVERLAPPROF_PROGRESS", impl_->old_progress->c_str(), 1);
    } else {
      ::unsetenv("OVERLAPPROF_PROGRESS");
    }
    impl_->progress_set = false;
  }
#ifdef OVERLAPPROF_HAVE_MICROHTTPD
  impl_->server.reset();
#endif
}

}  // namespace overlapprof
