// `overlapprof run`: the capture half of the product. It sets the environment that makes
// every process of the job load the injector (LD_PRELOAD for NCCL, CUDA_INJECTION64_PATH for
// CUPTI, NVTX_INJECTION64_PATH for NVTX), runs the command, forwards the signals it is sent,
// then gathers the rank files and analyzes them. The environment reaches the whole process
// tree (torchrun's workers, mpirun's and srun's local ranks); only processes that call NCCL
// or initialize CUDA record anything (injector/injector.h).
#include "src/cli/run.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "src/store/writer.h"

namespace overlapprof {
namespace {

namespace fs = std::filesystem;

constexpr const char* kInjectorName = "liboverlapprof_inject.so";

void Note(const std::string& line) { std::fprintf(stderr, "overlapprof: %s\n", line.c_str()); }

// The injector: $OVERLAPPROF_INJECTOR, else beside the executable (install: ../lib/overlapprof/,
// build tree: injector/).
std::string FindInjector() {
  if (const char* e = std::getenv("OVERLAPPROF_INJECTOR"); e && *e) return e;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  fs::path dir = exe.parent_path();
  for (const fs::path& p : {dir / kInjectorName, dir / "injector" / kInjectorName,
                            dir / ".." / "lib" / "overlapprof" / kInjectorName}) {
    if (fs::exists(p, ec)) return fs::weakly_canonical(p, ec).string();
  }
  return "";
}

std::string DefaultDir() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "overlapprof-%Y%m%d-%H%M%S", &tm);
  return buf;
}

std::vector<fs::path> RankFiles(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".db") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

pid_t g_child = -1;

// Forwards signals sent to us (kill, a scheduler) to the child. Signals the terminal sends
// (Ctrl-C) already reach the child, which is in our process group: not forwarded twice.
void Forward(int sig, siginfo_t* info, void*) {
  if (g_child <= 0) return;
  if (info && info->si_code == SI_KERNEL) return;  // from the terminal: the child has it
  ::kill(g_child, sig);
}

// After the job: a process killed without its last flush leaves a -wal file beside its
// store. Checkpoint it into the store (SQLite recovers committed transactions), switch the
// file to a self-contained journal mode, and mark files whose recording did not finish.
void Settle(const fs::path& file) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    Note(file.string() + ": cannot open to settle: " + (db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return;
  }
  sqlite3_busy_timeout(db, 2000);
  char* err = nullptr;
  bool unfinished = false;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key='recording_state'", -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    const unsigned char* v = sqlite3_column_text(st, 0);
    unfinished = v && std::strcmp(reinterpret_cast<const char*>(v), "finished") != 0;
  }
  sqlite3_finalize(st);
  std::string sql = "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE;";
  if (unfinished) {
    // INSERT OR REPLACE: a process stopped before its first commit has no stats rows yet,
    // and the mark must not depend on a commit that never happened (issue 14).
    const StatInfo& info = GetStatInfo(Stat::recording_incomplete);
    std::string desc(info.description);
    std::string quoted;
    for (char c : desc) quoted += c == '\'' ? std::string("''") : std::string(1, c);
    sql += "INSERT OR REPLACE INTO stats(name, severity, value, description) VALUES('recording_incomplete','" +
           std::string(SeverityName(info.severity)) + "',1,'" + quoted + "');"
           "UPDATE meta SET value='incomplete' WHERE key='recording_state';";
  }
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    Note(file.string() + ": settling failed: " + (err ? err : "unknown error"));
    sqlite3_free(err);
  }
  sqlite3_close(db);
  // The injector writes comm ops as chunks only (speed); add their SQL rows now, off the job.
  if (Status st = MaterializeCommOpRows(file.string()); !st.ok())
    Note(file.string() + ": comm_op rows not added: " + st.message());
  if (unfinished) Note(file.filename().string() + ": the process did not finish recording (killed?): kept what it had committed");
}

}  // namespace

CommandResult RunCommand(const RunArgs& a, const std::function<CommandResult(const std::string& dir)>& analyze) {
  if (a.command.empty())
    return MakeError(StatusCode::kInvalidArgument, "run: no command given (usage: overlapprof run [-o DIR] -- CMD ARGS...)");
  std::string injector = FindInjector();
  if (injector.empty()) {
    return MakeError(StatusCode::kInvalidArgument,
                     "run: the injector ({}) was not found beside overlapprof; this build has no CUDA toolkit, or set "
                     "OVERLAPPROF_INJECTOR",
                     kInjectorName);
  }
  // Load it here first, so a broken or foreign library is reported before the job starts
  // (its constructor only reads the environment, and OVERLAPPROF_OUTPUT_DIR is unset here).
  if (void* h = dlopen(injector.c_str(), RTLD_NOW | RTLD_LOCAL); !h) {
    const char* why = dlerror();
    return MakeError(StatusCode::kInvalidArgument, "run: the injector cannot be loaded: {}", why ? why : injector.c_str());
  }
  if (void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL); !cuda) {
    Note("no CUDA driver (libcuda.so.1) here: GPU activities will not be recorded; NCCL calls and NVTX ranges will");
  } else {
    dlclose(cuda);
  }

  fs::path dir = a.output_dir.empty() ? fs::path(DefaultDir()) : fs::path(a.output_dir);
  std::error_code ec;
  const bool created = fs::create_directories(dir, ec);  // removed again if nothing is recorded
  if (ec) return MakeError(StatusCode::kIo, "run: cannot create {}: {}", dir.string(), ec.message());
  if (!RankFiles(dir).empty()) {
    return MakeError(StatusCode::kInvalidArgument,
                     "run: {} already holds rank files (*.db); choose another -o or remove them", dir.string());
  }
  fs::path abs_dir = fs::absolute(dir, ec);

  // The environment of the whole process tree.
  std::string preload = injector;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
  ::setenv("LD_PRELOAD", preload.c_str(), 1);
  if (const char* other = std::getenv("CUDA_INJECTION64_PATH"); other && *other && injector != other) {
    Note(std::string("CUDA_INJECTION64_PATH is already set (") + other +
         ", another tool such as Nsight Systems): it is kept, so overlapprof records no GPU activities; "
         "NCCL calls and NVTX ranges are still recorded");
  } else {
    ::setenv("CUDA_INJECTION64_PATH", injector.c_str(), 1);
  }
  if (const char* other = std::getenv("NVTX_INJECTION64_PATH"); other && *other && injector != other)
    Note(std::string("NVTX_INJECTION64_PATH is already set (") + other + "): NVTX ranges are not recorded");
  else
    ::setenv("NVTX_INJECTION64_PATH", injector.c_str(), 1);
  ::setenv("OVERLAPPROF_OUTPUT_DIR", abs_dir.c_str(), 1);
  ::setenv("OVERLAPPROF_FLUSH_MS", std::to_string(a.flush_ms).c_str(), 1);

  std::vector<char*> argv;
  for (const std::string& s : a.command) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);

  // Forward signals from the moment the child exists; the child restores the defaults.
  struct sigaction fwd {};
  fwd.sa_sigaction = Forward;
  fwd.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&fwd.sa_mask);
  const int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  struct sigaction old_actions[6];
  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    return MakeError(StatusCode::kInternal, "run: pipe: {}", std::strerror(errno));
  }
  auto start = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid < 0) {
    return MakeError(StatusCode::kInternal, "run: fork: {}", std::strerror(errno));
  }
  if (pid == 0) {
    ::close(exec_pipe[0]);
    ::execvp(argv[0], argv.data());
    int e = errno;
    ssize_t w = ::write(exec_pipe[1], &e, sizeof e);
    (void)w;
    ::_exit(127);
  }
  g_child = pid;
  for (size_t i = 0; i < 6; ++i) ::sigaction(kForwarded[i], &fwd, &old_actions[i]);
  ::close(exec_pipe[1]);
  int exec_errno = 0;
  ssize_t got = ::read(exec_pipe[0], &exec_errno, sizeof exec_errno);
  ::close(exec_pipe[0]);

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  for (size_t i = 0; i < 6; ++i) ::sigaction(kForwarded[i], &old_actions[i], nullptr);
  g_child = -1;
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    std::error_code rm;
    if (a.output_dir.empty()) fs::remove(dir, rm);  // nothing recorded in a directory we made up
    return MakeError(StatusCode::kInvalidArgument, "run: cannot run '{}': {}", a.command[0], std::strerror(exec_errno));
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<fs::path> files = RankFiles(dir);
  for (const fs::path& f : files) Settle(f);
  char line[256];
  std::snprintf(line, sizeof line, "the command exited with %d after %.1f s; %zu rank file(s) in %s", code, secs,
                files.size(), dir.c_str());
  Note(line);
  if (files.empty()) {
    Note("nothing was recorded: no process of the job loaded NCCL or initialized CUDA with the injector in it.");
    Note("  - a job that does not use NCCL (torch.distributed with gloo, a CPU-only job) has no GPU communication "
         "to measure;");
    Note("  - or the injector did not load in the workers: a launcher that clears LD_PRELOAD (a container, "
         "ranks started over ssh) keeps it out. To check, in a running worker: grep overlapprof_inject "
         "/proc/<worker pid>/maps");
    Note("  - another route: record with the PyTorch profiler (torch.profiler, one trace per rank) and run "
         "'overlapprof analyze' on its traces (docs/run.md)");
    std::error_code rm;
    if (created && fs::is_empty(dir, rm)) fs::remove(dir, rm);  // no empty directory left behind
    return Outcome::CommandExited(code);
  }
  if (!a.no_analyze) {
    std::fflush(stderr);
    const int rc = ExitCodeOf(analyze(dir.string()));
    if (rc != kExitOk && code == 0)
      Note("analysis exited with " + std::to_string(rc) + " (docs/exit-codes.md); the command's exit code is returned");
  }
  return Outcome::CommandExited(code);
}

}  // namespace overlapprof
