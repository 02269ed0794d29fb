// `overlapprof run`: the capture half of the product. It sets the environment that makes
// every process of the job load the injector (LD_PRELOAD for NCCL, CUDA_INJECTION64_PATH for
// CUPTI, NVTX_INJECTION64_PATH for NVTX), runs the command in its own process group, forwards
// the signals it is sent to that group, waits (bounded) for processes still writing rank files,
// then settles the rank files and analyzes them. It owns its output directory for the run (a
// lock; a directory holding an earlier trace is refused). Guarantees: docs/run.md (issue 14 §2). The environment reaches the whole process
// tree (torchrun's workers, mpirun's and srun's local ranks); only processes that call NCCL
// or initialize CUDA record anything (injector/injector.h).
#include "src/cli/run.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
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

#include <fmt/format.h>

#include "src/store/plugin_join.h"
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

// The output directory (issue 14 §2: one directory per job) ----------------------------------

// Names of earlier traces that make a directory "used": rank files and their SQLite companions,
// any JSON trace or overlapprof report (*.json, *.json.gz, *.summary.json, ...).
bool IsEarlierTrace(const std::string& name) {
  auto ends = [&](std::string_view s) { return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0; };
  return ends(".db") || ends(".db-wal") || ends(".db-shm") || ends(".sqlite") || ends(".sqlite3") ||
         name.find(".json") != std::string::npos;
}

// The first earlier trace found under `dir` (subfolders too), or "" when there is none.
std::string FindEarlierTrace(const fs::path& dir) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    std::error_code fe;
    if (!it->is_directory(fe) && IsEarlierTrace(it->path().filename().string())) return it->path().string();
  }
  return "";
}

// overlapprof-YYYYmmdd-HHMMSS, then -2, -3, ... : mkdir is atomic, so two runs started in the
// same second never share a directory.
StatusOr<fs::path> MakeDefaultDir() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "overlapprof-%Y%m%d-%H%M%S", &tm);
  for (int n = 1; n < 1000; ++n) {
    std::string name = n == 1 ? std::string(buf) : std::string(buf) + "-" + std::to_string(n);
    if (::mkdir(name.c_str(), 0777) == 0) return fs::path(name);
    if (errno != EEXIST) return MakeError(StatusCode::kIo, "run: cannot create {}: {}", name, std::strerror(errno));
  }
  return MakeError(StatusCode::kIo, "run: cannot create a fresh {}-N directory here", buf);
}

constexpr const char* kLockName = ".overlapprof.lock";

// DIR/.overlapprof.lock, flock()ed for the whole run (O_CLOEXEC: the job never holds it) and
// holding the owner's pid. Released by unlinking then closing; an acquirer that locked a file
// unlinked meanwhile (it opened the old inode) tries again, so two runs never both hold it.
class DirLock {
 public:
  ~DirLock() { Release(); }
  void Release() {
    if (fd_ < 0) return;
    ::unlink(path_.c_str());
    ::close(fd_);
    fd_ = -1;
  }
  Status Acquire(const fs::path& dir) {
    path_ = dir / kLockName;
    for (int attempt = 0; attempt < 100; ++attempt) {
      int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
      if (fd < 0) {
        const int e = errno;
        if (e == EACCES || e == EROFS || e == EPERM)
          return MakeError(StatusCode::kIo, "run: cannot write into {}: {} (a read-only directory or file system); "
                           "choose another -o", dir.string(), std::strerror(e));
        return MakeError(StatusCode::kIo, "run: cannot create {}: {}", path_.string(), std::strerror(e));
      }
      if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        char buf[32] = {};
        ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
        ::close(fd);
        if (e != EWOULDBLOCK) return MakeError(StatusCode::kIo, "run: cannot lock {}: {}", path_.string(), std::strerror(e));
        std::string owner = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("?");
        while (!owner.empty() && (owner.back() == '\n' || owner.back() == ' ')) owner.pop_back();
        return MakeError(StatusCode::kInvalidArgument,
                         "run: another overlapprof run (pid {}) is recording into {}; choose another -o", owner,
                         dir.string());
      }
      struct stat held {}, named {};
      if (::fstat(fd, &held) == 0 && ::stat(path_.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
          held.st_dev == named.st_dev) {
        std::string pid = std::to_string(::getpid()) + "\n";
        if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
          const int e = errno;
          ::unlink(path_.c_str());
          ::close(fd);
          return MakeError(StatusCode::kIo, "run: cannot write into {}: {}", dir.string(), std::strerror(e));
        }
        fd_ = fd;
        return Status();
      }
      ::close(fd);  // the previous owner unlinked it after we opened it: take the new one
    }
    return MakeError(StatusCode::kIo, "run: cannot lock {}", path_.string());
  }

 private:
  fs::path path_;
  int fd_ = -1;
};

std::vector<fs::path> RankFiles(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".db") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Liveness of rank files (issue 14 §2: never settle or analyze a file still written) -----------

// The pid named in a rank file's name (..._pid<N>_restart<R>.db), or 0.
pid_t PidInName(const std::string& name) {
  size_t at = name.rfind("_pid");
  if (at == std::string::npos) return 0;
  long v = 0;
  size_t i = at + 4;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && v < (1L << 31); ++i) v = v * 10 + (name[i] - '0');
  return i > at + 4 && name.compare(i, 8, "_restart") == 0 ? static_cast<pid_t>(v) : 0;
}

bool HasOpen(pid_t pid, const struct stat& file) {
  std::error_code ec;
  for (fs::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end; !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (::stat(it->path().c_str(), &st) == 0 && st.st_ino == file.st_ino && st.st_dev == file.st_dev) return true;
  }
  return false;
}

// The process still writing `file`, or 0 when none is. A writer's SQLite connection (WAL mode)
// holds a POSIX read lock on the file as long as it is open: F_GETLK finds it, with its pid, on
// any host sharing the file system's locks. The process named in the file's name is also asked
// through /proc (it may hold the file a moment before its first lock).
pid_t WriterOf(const fs::path& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 0;  // the whole file, SQLite's lock bytes past 1 GiB included
  struct stat st {};
  const bool locked = ::fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
  const bool have_stat = ::fstat(fd, &st) == 0;
  ::close(fd);  // run holds no lock of its own on it: closing drops nothing
  if (locked) return fl.l_pid > 0 ? fl.l_pid : -1;
  const pid_t named = PidInName(file.filename().string());
  if (have_stat && named > 0 && named != ::getpid() && HasOpen(named, st)) return named;
  return 0;
}

// Signals -------------------------------------------------------------------------------------

// Forwarded to the job's process group (every process the job started that did not leave it:
// ranks under `sh -c`, a launcher's workers) and, once the command has exited, to the
// processes still writing rank files. Written before the handlers run or with them blocked.
volatile sig_atomic_t g_job_pgid = 0;
constexpr int kMaxWriters = 256;
pid_t g_writers[kMaxWriters];
volatile sig_atomic_t g_writer_count = 0;

void Forward(int sig) {
  const int saved = errno;
  if (g_job_pgid > 0) ::kill(-static_cast<pid_t>(g_job_pgid), sig);
  for (int i = 0; i < g_writer_count; ++i) ::kill(g_writers[i], sig);
  errno = saved;
}

constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
constexpr size_t kNumForwarded = sizeof kForwarded / sizeof kForwarded[0];

// The terminal descriptor when `run` is in its foreground process group, else -1: the job's
// group then gets the foreground (Ctrl-C, Ctrl-Z and terminal reads go to the job, as under a
// shell) and `run` takes it back after.
int ForegroundTty() {
  for (int fd : {0, 1, 2})
    if (::isatty(fd) && ::tcgetpgrp(fd) == ::getpgrp()) return fd;
  return -1;
}

// tcsetpgrp from a background group with SIGTTOU blocked (otherwise the caller is stopped).
void GiveTerminal(int tty, pid_t pgid) {
  if (tty < 0) return;
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  ::sigprocmask(SIG_BLOCK, &ttou, &old);
  ::tcsetpgrp(tty, pgid);
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
}

// Settling ------------------------------------------------------------------------------------

enum class Settled { kOk, kUnrecorded, kEmpty };

// After its process is gone: a process killed without its last flush leaves a -wal file beside
// its store. Checkpoint it into the store (SQLite recovers committed transactions), switch the
// file to a self-contained journal mode, and mark files whose recording did not finish.
// A file without the schema (0 bytes, or its process died before its first commit, which
// writes the schema and `meta` together) holds nothing: it is renamed FILE.unrecorded, out of
// the analysis' scan, and kUnrecorded returned.
Settled Settle(const fs::path& file) {
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  const pid_t pid = PidInName(file.filename().string());
  const std::string who = pid > 0 ? "its process (pid " + std::to_string(pid) + ")" : std::string("its process");
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    Note(file.string() + ": cannot open to settle: " + (db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return Settled::kOk;  // the analysis says what it is
  }
  sqlite3_busy_timeout(db, 2000);
  bool has_meta = false;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'", -1, &st, nullptr) ==
          SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    has_meta = true;
  sqlite3_finalize(st);
  if (!has_meta) {
    sqlite3_close(db);  // the last connection: SQLite drops the uncommitted -wal
    for (const char* suffix : {"-wal", "-shm"}) fs::remove(file.string() + suffix, ec);
    fs::path to = file.string() + ".unrecorded";
    fs::rename(file, to, ec);
    Note(file.filename().string() + ": " +
         (size == 0 ? who + " died while creating it (0 bytes)" : who + " was killed before its first commit") +
         ": nothing was recorded; skipped" + (ec ? std::string() : " (renamed " + to.filename().string() + ")"));
    return Settled::kUnrecorded;
  }
  char* err = nullptr;
  bool unfinished = false;
  if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key='recording_state'", -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    const unsigned char* v = sqlite3_column_text(st, 0);
    unfinished = v && std::strcmp(reinterpret_cast<const char*>(v), "finished") != 0;
  }
  sqlite3_finalize(st);
  // The mark first, in its own transaction, then the checkpoint: on a full disk the
  // checkpoint (which copies the WAL into the file) is what fails, and the mark must not
  // depend on it (issue 14). A small transaction usually fits in the WAL space the failed
  // commit had already taken; if even it fails, the note below says so.
  bool mark_failed = false, write_failed_marker = false;
  if (unfinished) {
    // INSERT OR REPLACE: a process stopped before its first data commit has no stats rows yet,
    // and the mark must not depend on a commit that never happened (issue 14).
    const StatInfo& info = GetStatInfo(Stat::recording_incomplete);
    std::string desc(info.description);
    std::string quoted;
    for (char c : desc) quoted += c == '\'' ? std::string("''") : std::string(1, c);
    std::string mark = "BEGIN; INSERT OR REPLACE INTO stats(name, severity, value, description) VALUES('recording_incomplete','" +
                       std::string(SeverityName(info.severity)) + "',1,'" + quoted + "');"
                       "UPDATE meta SET value='incomplete' WHERE key='recording_state';";
    // The injector could not write its file and could not even note it there: its marker
    // (injector/sink.h, kWriteFailedSuffix) says so; at least one record was lost.
    if (fs::exists(file.string() + ".write_failed", ec)) {
      const StatInfo& lost = GetStatInfo(Stat::records_lost_write_failed);
      std::string d;
      for (char c : std::string(lost.description)) d += c == '\'' ? std::string("''") : std::string(1, c);
      mark += "INSERT OR IGNORE INTO stats(name, severity, value, description) VALUES('records_lost_write_failed','" +
              std::string(SeverityName(lost.severity)) + "',1,'" + d + "');"
              "UPDATE stats SET value=max(value,1) WHERE name='records_lost_write_failed';";
      write_failed_marker = true;
    }
    mark += "COMMIT;";
    if (sqlite3_exec(db, mark.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      mark_failed = true;
      Note(file.string() + ": cannot mark it incomplete: " + (err ? err : "unknown error") +
           " (disk full?); its recording did not finish: treat its figures as incomplete");
      sqlite3_free(err);
      err = nullptr;
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    }
  }
  if (write_failed_marker && !mark_failed) fs::remove(file.string() + ".write_failed", ec);
  if (sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE;", nullptr, nullptr, &err) !=
      SQLITE_OK) {
    Note(file.string() + ": settling failed: " + (err ? err : "unknown error") +
         (unfinished && !mark_failed ? " (it is marked incomplete all the same)" : ""));
    sqlite3_free(err);
  }
  sqlite3_close(db);
  // A launcher's or helper's store (src/store/writer.h); kept when unsure (the check failed).
  if (auto nothing = StoreRecordsNothing(file.string()); !unfinished && nothing.ok() && *nothing) {
    std::error_code rm;
    fs::remove(file, rm);
    if (!rm) {
      Note(file.filename().string() + ": " + who +
           " recorded nothing (no GPU work, no NCCL call: a launcher or helper process): removed");
      return Settled::kEmpty;
    }
  }
  // The injector writes comm ops as chunks only (speed); add their SQL rows now, off the job.
  if (Status s = MaterializeCommOpRows(file.string()); !s.ok()) {
    Note(file.string() + ": comm_op rows not added: " + s.message());
  } else if (auto j = JoinNcclProfilerOps(file.string()); !j.ok()) {
    // NCCL's profiler plugin ops to the calls they timed (src/store/plugin_join.h).
    Note(file.string() + ": NCCL profiler plugin operations not joined to the calls: " + j.status().message());
  }
  if (unfinished) Note(file.filename().string() + ": the process did not finish recording (killed?): kept what it had committed");
  return Settled::kOk;
}

// Waits (at most `wait_s` seconds) until no process writes any of `files`; returns the files
// still written then, with their writer's pid (-1: a lock whose owner is not known here).
// Signals forwarded meanwhile also reach those writers.
std::vector<std::pair<fs::path, pid_t>> WaitForWriters(const fs::path& dir, int wait_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s);
  bool said = false;
  for (;;) {
    std::vector<std::pair<fs::path, pid_t>> live;
    for (const fs::path& f : RankFiles(dir))
      if (pid_t w = WriterOf(f); w != 0) live.emplace_back(f, w);
    // Publish the writers to the signal handler: count 0 while the array changes.
    g_writer_count = 0;
    int n = 0;
    for (const auto& [f, w] : live)
      if (w > 0 && n < kMaxWriters) g_writers[n++] = w;
    g_writer_count = n;
    if (live.empty() || std::chrono::steady_clock::now() >= deadline) return live;
    if (!said) {
      std::string pids;
      for (const auto& [f, w] : live) pids += (pids.empty() ? "" : ", ") + std::to_string(w);
      Note(fmt::format("the command exited but pid(s) {} still write rank files (a process left behind); waiting up to "
                       "{} s for them (--wait-s)", pids, wait_s));
      said = true;
    }
    struct timespec ts {0, 50 * 1000 * 1000};
    ::nanosleep(&ts, nullptr);
  }
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

  // The output directory: ours alone for the run (a lock), and holding no earlier trace.
  fs::path dir;
  bool created = false;  // removed again if nothing is recorded
  std::error_code ec;
  if (a.output_dir.empty()) {
    OVERLAPPROF_ASSIGN_OR_RETURN(dir, MakeDefaultDir());
    created = true;
  } else {
    dir = fs::path(a.output_dir);
    created = fs::create_directories(dir, ec);
    if (ec) return MakeError(StatusCode::kIo, "run: cannot create {}: {}", dir.string(), ec.message());
  }
  auto remove_if_ours = [&] {
    std::error_code rm;
    if (created && fs::is_empty(dir, rm)) fs::remove(dir, rm);
  };
  DirLock lock;
  if (Status s = lock.Acquire(dir); !s.ok()) {
    remove_if_ours();
    return s;
  }
  if (std::string old = FindEarlierTrace(dir); !old.empty() && !a.force) {
    return MakeError(StatusCode::kInvalidArgument,
                     "run: {} already holds a trace ({}); choose another -o, or --force to record into it anyway",
                     dir.string(), old);
  }
  fs::path abs_dir = fs::absolute(dir, ec);

  // LD_PRELOAD is split at spaces and colons: an injector whose path has one is preloaded
  // through a link in a private temporary directory (removed when `run` ends).
  std::string preload_path = injector;
  fs::path link_dir;
  if (injector.find_first_of(" :\t\n") != std::string::npos) {
    std::string tmpl = "/tmp/overlapprof-XXXXXX";
    if (const char* t = std::getenv("TMPDIR"); t && *t && std::string(t).find_first_of(" :\t\n") == std::string::npos)
      tmpl = std::string(t) + "/overlapprof-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data()) || ::symlink(injector.c_str(), (std::string(buf.data()) + "/" + kInjectorName).c_str()) != 0) {
      return MakeError(StatusCode::kIo,
                       "run: the injector's path has a space or ':' ({}), which LD_PRELOAD cannot hold, and no link to "
                       "it could be made in {}: {}",
                       injector, tmpl, std::strerror(errno));
    }
    link_dir = buf.data();
    preload_path = (link_dir / kInjectorName).string();
  }
  struct LinkCleanup {
    fs::path d;
    ~LinkCleanup() {
      std::error_code rm;
      if (!d.empty()) fs::remove_all(d, rm);
    }
  } link_cleanup{link_dir};

  // The environment of the whole process tree.
  const char* old_preload = std::getenv("LD_PRELOAD");
  std::string preload = ComposePreload(preload_path, old_preload ? old_preload : "");
  ::setenv("LD_PRELOAD", preload.c_str(), 1);
  if (const char* other = std::getenv("CUDA_INJECTION64_PATH");
      other && *other && injector != other && preload_path != other) {
    Note(std::string("CUDA_INJECTION64_PATH is already set (") + other +
         ", another tool such as Nsight Systems): it is kept, so overlapprof records no GPU activities; "
         "NCCL calls and NVTX ranges are still recorded");
  } else {
    ::setenv("CUDA_INJECTION64_PATH", preload_path.c_str(), 1);
  }
  if (const char* other = std::getenv("NVTX_INJECTION64_PATH");
      other && *other && injector != other && preload_path != other)
    Note(std::string("NVTX_INJECTION64_PATH is already set (") + other + "): NVTX ranges are not recorded");
  else
    ::setenv("NVTX_INJECTION64_PATH", preload_path.c_str(), 1);
  // NCCL's profiler plugin slot: ours (the injector exports ncclProfiler_v4..v6; NCCL loads
  // it by this path, NCCL 2.23+), unless the user or the platform put another plugin there.
  // NCCL loads one profiler plugin only: theirs keeps it (injector/README.md, coexistence).
  if (const char* other = std::getenv("NCCL_PROFILER_PLUGIN"); other && *other && injector != other &&
                                                               preload_path != other) {
    Note(std::string("NCCL_PROFILER_PLUGIN is already set (") + other +
         "): that profiler plugin keeps NCCL's slot, so per-operation NCCL timing from the plugin is not recorded; "
         "kernel-based timing is kept");
  } else {
    ::setenv("NCCL_PROFILER_PLUGIN", injector.c_str(), 1);
  }
  if (!a.nccl_detail.empty()) ::setenv("OVERLAPPROF_NCCL_DETAIL", a.nccl_detail.c_str(), 1);
  ::setenv("OVERLAPPROF_OUTPUT_DIR", abs_dir.c_str(), 1);
  ::setenv("OVERLAPPROF_FLUSH_MS", std::to_string(a.flush_ms).c_str(), 1);

  std::vector<char*> argv;
  for (const std::string& s : a.command) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);

  // SIGCHLD must not be ignored here (inherited from a parent that ignores it), or the kernel
  // reaps the child and its exit code is lost; the job gets the disposition run was given.
  struct sigaction dfl {}, old_chld {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGCHLD, &dfl, &old_chld);
  // The forwarded signals are blocked from before the fork until the handlers are in place: one
  // sent meanwhile is forwarded then, not lost or fatal to `run` alone.
  sigset_t fwd_set, old_mask;
  sigemptyset(&fwd_set);
  for (int sig : kForwarded) sigaddset(&fwd_set, sig);
  sigaddset(&fwd_set, SIGTTOU);
  ::sigprocmask(SIG_BLOCK, &fwd_set, &old_mask);
  auto restore_chld = [&] {
    ::sigaction(SIGCHLD, &old_chld, nullptr);
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  };

  const int tty = ForegroundTty();
  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    restore_chld();
    return MakeError(StatusCode::kInternal, "run: pipe: {}", std::strerror(errno));
  }
  auto start = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid < 0) {
    restore_chld();
    return MakeError(StatusCode::kInternal, "run: fork: {}", std::strerror(errno));
  }
  if (pid == 0) {
    // The job's own process group (and the terminal's foreground when run had it): every
    // process it starts is in it unless it leaves, and a forwarded signal reaches them all.
    ::setpgid(0, 0);
    if (tty >= 0) ::tcsetpgrp(tty, ::getpid());  // SIGTTOU is blocked here
    ::close(exec_pipe[0]);
    ::sigaction(SIGCHLD, &old_chld, nullptr);
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    ::execvp(argv[0], argv.data());
    int e = errno;
    ssize_t w = ::write(exec_pipe[1], &e, sizeof e);
    (void)w;
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: no window in which a forwarded signal misses the group
  if (tty >= 0) ::tcsetpgrp(tty, pid);
  g_job_pgid = pid;
  struct sigaction fwd {};
  fwd.sa_handler = Forward;
  fwd.sa_flags = SA_RESTART;
  sigemptyset(&fwd.sa_mask);
  struct sigaction old_actions[kNumForwarded];
  for (size_t i = 0; i < kNumForwarded; ++i) ::sigaction(kForwarded[i], &fwd, &old_actions[i]);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  sigdelset(&fwd_set, SIGTTOU);
  ::sigprocmask(SIG_UNBLOCK, &fwd_set, nullptr);
  ::close(exec_pipe[1]);
  int exec_errno = 0;
  ssize_t got;
  while ((got = ::read(exec_pipe[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  ::close(exec_pipe[0]);

  int status = 0;
  int lost = 0;  // the errno of a failed wait
  for (;;) {
    if (::waitpid(pid, &status, tty >= 0 ? WUNTRACED : 0) < 0) {
      if (errno == EINTR) continue;
      lost = errno;  // ECHILD: cannot happen with SIGCHLD at its default
      break;
    }
    if (!WIFSTOPPED(status)) break;
    // Ctrl-Z stopped the job: stop too, so that the shell sees it stopped; on `fg`, give the
    // terminal back to the job and continue it.
    GiveTerminal(tty, ::getpgrp());
    ::kill(::getpid(), SIGSTOP);
    if (::tcgetpgrp(tty) == ::getpgrp()) GiveTerminal(tty, pid);
    ::kill(-pid, SIGCONT);
  }
  GiveTerminal(tty, ::getpgrp());
  ::sigaction(SIGCHLD, &old_chld, nullptr);
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    g_job_pgid = 0;
    for (size_t i = 0; i < kNumForwarded; ++i) ::sigaction(kForwarded[i], &old_actions[i], nullptr);
    lock.Release();
    remove_if_ours();
    return MakeError(StatusCode::kInvalidArgument, "run: cannot run '{}': {}", a.command[0], std::strerror(exec_errno));
  }
  int code = lost ? 255 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (lost) Note("the command's exit status was lost (waitpid: " + std::string(std::strerror(lost)) + "); returning 255");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Processes of the job may outlive the command (a grandchild left behind): their files are
  // settled only once they are gone. Signals keep being forwarded while waiting.
  std::vector<std::pair<fs::path, pid_t>> live = WaitForWriters(dir, a.wait_s);
  g_writer_count = 0;
  g_job_pgid = 0;
  for (size_t i = 0; i < kNumForwarded; ++i) ::sigaction(kForwarded[i], &old_actions[i], nullptr);

  std::vector<fs::path> files;
  size_t unrecorded = 0, empty = 0;
  for (const fs::path& f : RankFiles(dir)) {
    if (std::any_of(live.begin(), live.end(), [&](const auto& l) { return l.first == f; })) continue;
    Settled settled = Settle(f);
    if (settled == Settled::kUnrecorded) {
      ++unrecorded;
      continue;
    }
    if (settled == Settled::kEmpty) {
      ++empty;
      continue;
    }
    files.push_back(f);
  }
  for (const auto& [f, w] : live)
    Note(fmt::format("{}: still written by pid {} after {} s: left as it is (not settled, not analyzed)",
                     f.filename().string(), w > 0 ? std::to_string(w) : std::string("?"), a.wait_s));
  char line[256];
  std::snprintf(line, sizeof line, "the command exited with %d after %.1f s; %zu rank file(s) in %s", code, secs,
                files.size() + live.size(), dir.c_str());
  Note(line);
  if (files.empty() && live.empty()) {
    if (unrecorded > 0) {
      Note("no rank file holds a recording: every recording process died before its first commit");
      return Outcome::CommandExited(code);
    }
    if (empty > 0)
      Note(fmt::format("nothing was recorded: {} process(es) of the job had the injector in them but ran no GPU work "
                       "and made no NCCL call.", empty));
    else
      Note("nothing was recorded: no process of the job loaded NCCL or initialized CUDA with the injector in it.");
    Note("  - a job that does not use NCCL (torch.distributed with gloo, a CPU-only job) has no GPU communication "
         "to measure;");
    Note("  - or the injector did not load in the workers: a launcher that clears LD_PRELOAD (a container, "
         "ranks started over ssh) keeps it out. To check, in a running worker: grep overlapprof_inject "
         "/proc/<worker pid>/maps");
    Note("  - another route: record with the PyTorch profiler (torch.profiler, one trace per rank) and run "
         "'overlapprof analyze' on its traces (docs/run.md)");
    lock.Release();
    remove_if_ours();  // no empty directory left behind
    return Outcome::CommandExited(code);
  }
  if (!live.empty()) {
    if (!a.no_analyze)
      Note(fmt::format("not analyzed while rank files are still written; once those processes have exited: "
                       "overlapprof analyze {}", dir.string()));
    return Outcome::CommandExited(code);
  }
  if (!a.no_analyze) {
    std::fflush(stderr);
    int rc;
    try {
      rc = ExitCodeOf(analyze(dir.string()));
    } catch (const std::exception& e) {  // the job's exit code must survive a failed analysis
      rc = ExitCodeOf(MakeError(StatusCode::kInternal, "analysis: internal error: {}", e.what()));
    }
    if (rc != kExitOk && code == 0)
      Note("analysis exited with " + std::to_string(rc) + " (docs/exit-codes.md); the command's exit code is returned");
  }
  return Outcome::CommandExited(code);
}

}  // namespace overlapprof
