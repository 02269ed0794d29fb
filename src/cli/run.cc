// `overlapprof run`: the capture half of the product. It sets the environment that makes
// every process of the job load the injector (LD_PRELOAD for NCCL, CUDA_INJECTION64_PATH for
// CUPTI, NVTX_INJECTION64_PATH for NVTX), runs the command in its own process group, forwards
// the signals it is sent to that group, waits (bounded) for the processes the command left
// behind (it is their subreaper) and for processes still writing rank files, then settles the
// rank files and analyzes them. It owns its output directory for the run (a lock; a directory
// holding an earlier trace or named by a symbolic link is refused). Guarantees: docs/run.md.
// The environment reaches the whole process tree (torchrun's workers, mpirun's and srun's
// local ranks); only processes that call NCCL or initialize CUDA record anything
// (injector/injector.h).
#include "src/cli/run.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/prctl.h>
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
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "src/cli/options.h"
#include "src/cli/subcommand.h"
#include "src/common/utf8.h"
#include "src/store/plugin_join.h"
#include "src/store/writer.h"

namespace overlapprof {
namespace {

namespace fs = std::filesystem;

constexpr const char* kInjectorName = "liboverlapprof_inject.so";

// Every line run prints is escaped for the terminal (paths and job names may hold control characters).
void Note(const std::string& line) { std::fprintf(stderr, "overlapprof: %s\n", EscapeForTerminal(line).c_str()); }

int64_t RealtimeNs() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

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

// Phase 1: the injector is there and loads (its constructor only reads the environment, and
// OVERLAPPROF_OUTPUT_DIR is unset here), so a broken or foreign library is reported before the
// job starts rather than as a loader message in every rank.
StatusOr<std::string> CheckInjector() {
  std::string injector = FindInjector();
  if (injector.empty()) {
    return MakeError(StatusCode::kInvalidArgument,
                     "run: the injector ({}) was not found beside overlapprof; this build has no CUDA toolkit, or set "
                     "OVERLAPPROF_INJECTOR",
                     kInjectorName);
  }
  if (void* h = dlopen(injector.c_str(), RTLD_NOW | RTLD_LOCAL); !h) {
    const char* why = dlerror();
    return MakeError(StatusCode::kInvalidArgument, "run: the injector cannot be loaded: {}", why ? why : injector.c_str());
  }
  if (void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL); !cuda) {
    Note("no CUDA driver (libcuda.so.1) here: GPU activities will not be recorded; NCCL calls and NVTX ranges will");
  } else {
    dlclose(cuda);
  }
  return injector;
}

// The output directory (one directory per job) -----------------------------------------------

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
  DirLock() = default;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  ~DirLock() { Release(); }
  void Release() {
    if (fd_ < 0) return;
    ::unlink(path_.c_str());
    ::close(fd_);
    fd_ = -1;
  }
  Status Acquire(const fs::path& dir, const fs::path& shown) {
    path_ = dir / kLockName;
    for (int attempt = 0; attempt < 100; ++attempt) {
      int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
      if (fd < 0) {
        const int e = errno;
        if (e == EACCES || e == EROFS || e == EPERM)
          return MakeError(StatusCode::kIo, "run: cannot write into {}: {} (a read-only directory or file system); "
                           "choose another -o", shown.string(), std::strerror(e));
        return MakeError(StatusCode::kIo, "run: cannot create {}: {}", (shown / kLockName).string(), std::strerror(e));
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
                         shown.string());
      }
      struct stat held {}, named {};
      if (::fstat(fd, &held) == 0 && ::stat(path_.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
          held.st_dev == named.st_dev) {
        std::string pid = std::to_string(::getpid()) + "\n";
        if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
          const int e = errno;
          ::unlink(path_.c_str());
          ::close(fd);
          return MakeError(StatusCode::kIo, "run: cannot write into {}: {}", shown.string(), std::strerror(e));
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

// Phase 2: the output directory, ours alone for the run (a lock) and holding no earlier trace.
// `-o DIR` naming a symbolic link is refused unless --force (then `run` says where it records);
// the job is given the directory's resolved path, so it writes where `run` checked. Owns the
// lock; when destroyed it releases it and removes the directory again if `run` created it and
// it stayed empty (unless told to keep it: processes of the job may still write into it).
class OutputDir {
 public:
  OutputDir() = default;
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;
  ~OutputDir() {
    lock_.Release();
    std::error_code rm;
    if (created_ && !keep_ && fs::is_empty(resolved_, rm)) fs::remove(resolved_, rm);
  }

  Status Prepare(const RunArgs& a) {
    std::error_code ec;
    if (a.output_dir.empty()) {
      OVERLAPPROF_ASSIGN_OR_RETURN(shown_, MakeDefaultDir());
      created_ = true;
    } else {
      shown_ = fs::path(a.output_dir);
      OVERLAPPROF_RETURN_IF_ERROR(CheckNotALink(a.force));
      created_ = fs::create_directories(shown_, ec);
      if (ec) return MakeError(StatusCode::kIo, "run: cannot create {}: {}", shown_.string(), ec.message());
    }
    resolved_ = fs::canonical(shown_, ec);
    if (ec) return MakeError(StatusCode::kIo, "run: cannot resolve {}: {}", shown_.string(), ec.message());
    if (!said_link_) {
      fs::path plain = fs::absolute(shown_, ec).lexically_normal();
      if (!plain.has_filename()) plain = plain.parent_path();
      if (!ec && plain != resolved_)
        Note(fmt::format("{} resolves to {} through a symbolic link: the rank files are written there",
                         shown_.string(), resolved_.string()));
    }
    OVERLAPPROF_RETURN_IF_ERROR(lock_.Acquire(resolved_, shown_));
    if (std::string old = FindEarlierTrace(resolved_); !old.empty() && !a.force) {
      return MakeError(StatusCode::kInvalidArgument,
                       "run: {} already holds a trace ({}); choose another -o, or --force to record into it anyway",
                       shown_.string(), old);
    }
    return OkStatus();
  }

  const fs::path& shown() const { return shown_; }        // as the user named it (messages)
  const fs::path& resolved() const { return resolved_; }  // absolute, no links: where files go
  void Keep() { keep_ = true; }

 private:
  // The final component of -o must not be a symbolic link: files would land where it points
  // (as root, anywhere). --force records there all the same, and says where.
  Status CheckNotALink(bool force) {
    fs::path last = shown_.lexically_normal();
    if (!last.has_filename()) last = last.parent_path();  // "DIR/": lstat would follow the link
    struct stat st {};
    if (last.empty() || ::lstat(last.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return OkStatus();
    std::error_code ec;
    const fs::path target = fs::read_symlink(last, ec);
    const fs::path where = fs::weakly_canonical(last, ec);
    if (!force)
      return MakeError(StatusCode::kInvalidArgument,
                       "run: -o {} is a symbolic link (to {}): refused, the rank files and reports would be written "
                       "where it points; name the directory itself, or --force to record into {}",
                       shown_.string(), target.string(), where.string());
    Note(fmt::format("-o {} is a symbolic link: recording into {} (--force)", shown_.string(), where.string()));
    said_link_ = true;
    return OkStatus();
  }

  fs::path shown_, resolved_;
  bool created_ = false;  // removed again when it stayed empty
  bool keep_ = false;
  bool said_link_ = false;
  DirLock lock_;
};

// Phase 3: the path LD_PRELOAD gets. LD_PRELOAD is split at spaces and colons: an injector whose
// path has one is preloaded through a link in a private temporary directory, removed with this.
class PreloadPath {
 public:
  PreloadPath() = default;
  PreloadPath(const PreloadPath&) = delete;
  PreloadPath& operator=(const PreloadPath&) = delete;
  ~PreloadPath() {
    std::error_code rm;
    if (!link_dir_.empty()) fs::remove_all(link_dir_, rm);
  }
  Status Make(const std::string& injector) {
    path_ = injector;
    if (injector.find_first_of(" :\t\n") == std::string::npos) return OkStatus();
    std::string tmpl = "/tmp/overlapprof-XXXXXX";
    if (const char* t = std::getenv("TMPDIR"); t && *t && std::string(t).find_first_of(" :\t\n") == std::string::npos)
      tmpl = std::string(t) + "/overlapprof-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) return LinkError(injector, tmpl);
    link_dir_ = buf.data();
    if (::symlink(injector.c_str(), (link_dir_ / kInjectorName).c_str()) != 0) return LinkError(injector, tmpl);
    path_ = (link_dir_ / kInjectorName).string();
    return OkStatus();
  }
  const std::string& path() const { return path_; }

 private:
  static Status LinkError(const std::string& injector, const std::string& tmpl) {
    return MakeError(StatusCode::kIo,
                     "run: the injector's path has a space or ':' ({}), which LD_PRELOAD cannot hold, and no link to "
                     "it could be made in {}: {}",
                     injector, tmpl, std::strerror(errno));
  }
  std::string path_;
  fs::path link_dir_;
};

// Phase 4: the environment of the whole process tree.
void SetRecordingEnvironment(const RunArgs& a, const std::string& injector, const std::string& preload_path,
                             const fs::path& dir) {
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
  ::setenv("OVERLAPPROF_OUTPUT_DIR", dir.c_str(), 1);
  ::setenv("OVERLAPPROF_FLUSH_MS", std::to_string(a.flush_ms).c_str(), 1);
}

// Rank files and the processes writing them --------------------------------------------------

std::vector<fs::path> RankFiles(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".db") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

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

// Processes -----------------------------------------------------------------------------------

struct ProcStat {
  pid_t ppid = 0;
  pid_t pgid = 0;
  char state = '?';
};

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return std::nullopt;
  size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  ProcStat s;
  long ppid = 0, pgid = 0;
  if (std::sscanf(line.c_str() + close + 1, " %c %ld %ld", &s.state, &ppid, &pgid) != 3) return std::nullopt;
  s.ppid = static_cast<pid_t>(ppid);
  s.pgid = static_cast<pid_t>(pgid);
  return s;
}

// Running (a zombie counts as gone).
bool Alive(pid_t pid) {
  std::optional<ProcStat> s = ReadProcStat(pid);
  return s && s->state != 'Z' && s->state != 'X';
}

std::string ProcName(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(f, name);
  return name;
}

// Every living descendant of this process (its children's children too), from /proc.
std::vector<pid_t> Descendants() {
  std::multimap<pid_t, pid_t> children;
  std::map<pid_t, char> state;
  if (DIR* d = ::opendir("/proc")) {
    while (struct dirent* e = ::readdir(d)) {
      char* end = nullptr;
      long pid = std::strtol(e->d_name, &end, 10);
      if (pid <= 0 || !end || *end != '\0') continue;
      if (std::optional<ProcStat> s = ReadProcStat(static_cast<pid_t>(pid))) {
        children.emplace(s->ppid, static_cast<pid_t>(pid));
        state[static_cast<pid_t>(pid)] = s->state;
      }
    }
    ::closedir(d);
  }
  std::vector<pid_t> out, pending = {::getpid()};
  while (!pending.empty()) {
    pid_t p = pending.back();
    pending.pop_back();
    auto [b, e] = children.equal_range(p);
    for (auto it = b; it != e; ++it) {
      if (state[it->second] != 'Z' && state[it->second] != 'X') out.push_back(it->second);
      pending.push_back(it->second);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string PidList(const std::vector<pid_t>& pids, bool with_names) {
  std::string s;
  for (size_t i = 0; i < pids.size() && i < 10; ++i) {
    s += (i ? ", " : "") + std::to_string(pids[i]);
    if (with_names) {
      std::string n = ProcName(pids[i]);
      if (!n.empty()) s += " (" + n + ")";
    }
  }
  if (pids.size() > 10) s += fmt::format(" and {} more", pids.size() - 10);
  return s;
}

// Signals -------------------------------------------------------------------------------------

// Forwarded to the job's process group (every process the job started that did not leave it:
// ranks under `sh -c`, a launcher's workers) and, once the command has exited, to the
// processes it left behind outside that group and those still writing rank files. Written
// before the handlers run or with them blocked (the count is 0 while the array changes).
volatile sig_atomic_t g_job_pgid = 0;
constexpr int kMaxTargets = 1024;
pid_t g_targets[kMaxTargets];
volatile sig_atomic_t g_target_count = 0;

void Forward(int sig) {
  const int saved = errno;
  if (g_job_pgid > 0) ::kill(-static_cast<pid_t>(g_job_pgid), sig);
  for (int i = 0; i < g_target_count; ++i) ::kill(g_targets[i], sig);
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

// What the command left behind once `--wait-s` was over.
struct LeftBehind {
  std::vector<std::pair<fs::path, pid_t>> writers;  // rank files still written, with the writer's pid (-1: unknown)
  std::vector<pid_t> running;                       // processes of the job still running
};

// Phases 5 and 6: the job. Its constructor makes `run` ready to start it (SIGCHLD at its
// default, so exit codes are not lost to a parent that ignores it; the forwarded signals blocked
// until their handlers are in place; `run` a child subreaper, so that processes the command
// leaves behind, `setsid` ones included, become its children and can be waited for); its
// destructor gives `run` its own dispositions, mask and handlers back.
class Job {
 public:
  Job() {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGCHLD, &dfl, &old_chld_);
    sigset_t block;
    sigemptyset(&block);
    for (int sig : kForwarded) sigaddset(&block, sig);
    sigaddset(&block, SIGTTOU);
    ::sigprocmask(SIG_BLOCK, &block, &old_mask_);
    subreaper_ = ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0;
    if (!subreaper_)
      Note(fmt::format("cannot wait for processes the command leaves behind (prctl PR_SET_CHILD_SUBREAPER: {})",
                       std::strerror(errno)));
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  ~Job() {
    g_target_count = 0;
    g_job_pgid = 0;
    if (handlers_) {
      for (size_t i = 0; i < kNumForwarded; ++i) ::sigaction(kForwarded[i], &old_actions_[i], nullptr);
    }
    if (subreaper_) ::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
    ::sigaction(SIGCHLD, &old_chld_, nullptr);
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }

  // Forks and execs the command in its own process group (and the terminal's foreground when
  // `run` has it), with SIGPIPE as `run` was given it (`job_sigpipe`). kInvalidArgument when it
  // could not be executed (it is reaped), kInternal when the system refused a pipe or a fork.
  Status Spawn(const std::vector<std::string>& command, const struct sigaction& job_sigpipe) {
    std::vector<char*> argv;
    for (const std::string& s : command) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    tty_ = ForegroundTty();
    int exec_pipe[2];
    if (::pipe2(exec_pipe, O_CLOEXEC) != 0) return MakeError(StatusCode::kInternal, "run: pipe: {}", std::strerror(errno));
    start_ = std::chrono::steady_clock::now();
    pid_ = ::fork();
    if (pid_ < 0) {
      const int e = errno;
      ::close(exec_pipe[0]);
      ::close(exec_pipe[1]);
      return MakeError(StatusCode::kInternal, "run: fork: {}", std::strerror(e));
    }
    if (pid_ == 0) {
      // The job's own process group: every process it starts is in it unless it leaves, and a
      // forwarded signal reaches them all.
      ::setpgid(0, 0);
      if (tty_ >= 0) ::tcsetpgrp(tty_, ::getpid());  // SIGTTOU is blocked here
      ::close(exec_pipe[0]);
      ::sigaction(SIGCHLD, &old_chld_, nullptr);
      ::sigaction(SIGPIPE, &job_sigpipe, nullptr);
      ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
      ::execvp(argv[0], argv.data());
      int e = errno;
      ssize_t w = ::write(exec_pipe[1], &e, sizeof e);
      (void)w;
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);  // also here: no window in which a forwarded signal misses the group
    if (tty_ >= 0) ::tcsetpgrp(tty_, pid_);
    g_job_pgid = pid_;
    struct sigaction fwd {};
    fwd.sa_handler = Forward;
    fwd.sa_flags = SA_RESTART;
    sigemptyset(&fwd.sa_mask);
    for (size_t i = 0; i < kNumForwarded; ++i) ::sigaction(kForwarded[i], &fwd, &old_actions_[i]);
    handlers_ = true;
    // The mask `run` was given, with the forwarded signals deliverable whatever it was.
    sigset_t fwd_set;
    sigemptyset(&fwd_set);
    for (int sig : kForwarded) sigaddset(&fwd_set, sig);
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    ::sigprocmask(SIG_UNBLOCK, &fwd_set, nullptr);
    ::close(exec_pipe[1]);
    int exec_errno = 0;
    ssize_t got;
    while ((got = ::read(exec_pipe[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
    }
    ::close(exec_pipe[0]);
    if (got == static_cast<ssize_t>(sizeof exec_errno)) {
      while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
      }
      GiveTerminal(tty_, ::getpgrp());
      return MakeError(StatusCode::kInvalidArgument, "run: cannot run '{}': {}", command[0], std::strerror(exec_errno));
    }
    return OkStatus();
  }

  // Waits for the command itself (reaping the processes left to `run` meanwhile), with job
  // control: a stopped job stops `run` too, and `fg` continues both.
  void WaitForCommand() {
    int status = 0;
    int lost = 0;  // the errno of a failed wait
    for (;;) {
      pid_t r = ::waitpid(-1, &status, tty_ >= 0 ? WUNTRACED : 0);
      if (r < 0) {
        if (errno == EINTR) continue;
        lost = errno;  // ECHILD: cannot happen with SIGCHLD at its default
        break;
      }
      if (r != pid_) {
        if (!WIFSTOPPED(status)) gone_ns_[r] = RealtimeNs();  // a process left to run, ended
        continue;
      }
      if (!WIFSTOPPED(status)) break;
      // Ctrl-Z stopped the job: stop too, so that the shell sees it stopped; on `fg`, give the
      // terminal back to the job and continue it.
      GiveTerminal(tty_, ::getpgrp());
      ::kill(::getpid(), SIGSTOP);
      if (::tcgetpgrp(tty_) == ::getpgrp()) GiveTerminal(tty_, pid_);
      ::kill(-pid_, SIGCONT);
    }
    gone_ns_[pid_] = RealtimeNs();
    GiveTerminal(tty_, ::getpgrp());
    code_ = lost ? 255 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (lost) Note("the command's exit status was lost (waitpid: " + std::string(std::strerror(lost)) + "); returning 255");
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  // Waits (at most `wait_s` seconds) until the processes the command left behind have exited
  // and no process writes a rank file in `dir`; returns those still there then. Signals sent to
  // `run` meanwhile also reach them. A process that outlives the wait is left running.
  LeftBehind WaitForLeftBehind(const fs::path& dir, int wait_s) {
    const auto begin = std::chrono::steady_clock::now();
    const auto deadline = begin + std::chrono::seconds(wait_s);
    bool said_writers = false, said_running = false;
    for (;;) {
      LeftBehind left;
      const bool children = ReapChildren();
      if (children) left.running = Descendants();
      for (const fs::path& f : RankFiles(dir)) {
        if (pid_t w = WriterOf(f); w != 0) left.writers.emplace_back(f, w);
        NoteIfGone(PidInName(f.filename().string()));
      }
      Publish(left);
      const auto now = std::chrono::steady_clock::now();
      // Done once `run` has no child left (then the job has no process left) and nothing writes.
      if ((!children && left.writers.empty()) || now >= deadline) return left;
      if (!left.writers.empty() && !said_writers) {
        std::vector<pid_t> pids;
        for (const auto& [f, w] : left.writers) pids.push_back(w);
        Note(fmt::format("the command exited but pid(s) {} still write rank files (a process left behind); waiting up "
                         "to {} s for them (--wait-s)",
                         PidList(pids, false), wait_s));
        said_writers = true;
      } else if (!left.running.empty() && !said_running && !said_writers && now - begin >= std::chrono::seconds(1)) {
        Note(fmt::format("the command exited but process(es) it started still run ({}): they may still record; "
                         "waiting up to {} s for them (--wait-s)",
                         PidList(left.running, true), wait_s));
        said_running = true;
      }
      struct timespec ts {0, 50 * 1000 * 1000};
      ::nanosleep(&ts, nullptr);
    }
  }

  int code() const { return code_; }
  double seconds() const { return seconds_; }
  // CLOCK_REALTIME ns by which `pid` (a process of this host) was seen gone, or kUnknown.
  int64_t SeenGone(pid_t pid) const {
    auto it = gone_ns_.find(pid);
    return it == gone_ns_.end() ? kUnknown : it->second;
  }

 private:
  // Reaps the children that have exited; false once `run` has none left (then the job has no
  // process left: orphans are re-parented to `run`, the nearest subreaper).
  bool ReapChildren() {
    for (;;) {
      int status = 0;
      pid_t r = ::waitpid(-1, &status, WNOHANG);
      if (r > 0) {
        gone_ns_[r] = RealtimeNs();
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      return r == 0;
    }
  }

  void NoteIfGone(pid_t pid) {
    if (pid > 0 && pid != ::getpid() && !gone_ns_.count(pid) && !Alive(pid)) gone_ns_[pid] = RealtimeNs();
  }

  // The processes outside the job's group that a forwarded signal must reach as well.
  void Publish(const LeftBehind& left) {
    std::set<pid_t> targets;
    for (pid_t p : left.running) targets.insert(p);
    for (const auto& [f, w] : left.writers)
      if (w > 0) targets.insert(w);
    g_target_count = 0;
    int n = 0;
    for (pid_t p : targets) {
      std::optional<ProcStat> s = ReadProcStat(p);
      if (n < kMaxTargets && (!s || s->pgid != pid_)) g_targets[n++] = p;
    }
    g_target_count = n;
  }

  struct sigaction old_chld_ {};
  struct sigaction old_actions_[kNumForwarded] {};
  sigset_t old_mask_{};
  bool handlers_ = false;
  bool subreaper_ = false;
  int tty_ = -1;
  pid_t pid_ = 0;
  int code_ = 0;
  double seconds_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::map<pid_t, int64_t> gone_ns_;  // CLOCK_REALTIME ns when each process was reaped or seen gone
};

// Settling ------------------------------------------------------------------------------------

enum class Settled { kOk, kLost, kEmpty };

std::string Quoted(std::string_view s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// A stats row as SQL: INSERT OR REPLACE of counter `s` with `value`.
std::string StatRowSql(Stat s, int64_t value) {
  const StatInfo& info = GetStatInfo(s);
  return fmt::format("INSERT OR REPLACE INTO stats(name, severity, value, description) VALUES({}, {}, {}, {});",
                     Quoted(info.name), Quoted(SeverityName(info.severity)), value, Quoted(info.description));
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// What a rank file is, read without changing it (a read-only connection neither checkpoints nor
// drops its -wal).
struct Probe {
  std::string error;  // not readable as a store: why
  bool has_meta = false;
  bool has_state = false;
  std::string state, source_format, host;
};

Probe ProbeRankFile(const fs::path& file) {
  Probe p;
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(db, 2000);
    sqlite3_stmt* st = nullptr;
    rc = sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'", -1, &st, nullptr);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    p.has_meta = rc == SQLITE_ROW;
    if (rc == SQLITE_ROW || rc == SQLITE_DONE) rc = SQLITE_OK;
    sqlite3_finalize(st);
    if (rc == SQLITE_OK && p.has_meta) {
      rc = sqlite3_prepare_v2(db, "SELECT key, value FROM meta WHERE key IN ('recording_state', 'source_format', 'host')",
                              -1, &st, nullptr);
      while (rc == SQLITE_OK || rc == SQLITE_ROW) {
        if ((rc = sqlite3_step(st)) != SQLITE_ROW) break;
        const char* k = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
        const char* v = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
        std::string key = k ? k : "", value = v ? v : "";
        if (key == "recording_state") {
          p.has_state = true;
          p.state = value;
        } else if (key == "source_format") {
          p.source_format = value;
        } else if (key == "host") {
          p.host = value;
        }
      }
      if (rc == SQLITE_DONE) rc = SQLITE_OK;
      sqlite3_finalize(st);
    }
  }
  if (rc != SQLITE_OK) p.error = db ? sqlite3_errmsg(db) : "out of memory";
  sqlite3_close(db);
  return p;
}

std::string LocalHost() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

// "its process (pid N)" from the file's name.
std::string WhoWrote(const fs::path& file) {
  const pid_t pid = PidInName(file.filename().string());
  return pid > 0 ? "its process (pid " + std::to_string(pid) + ")" : std::string("its process");
}

// A rank file that holds no readable recording shows a recording that failed (its process died,
// or its disk filled, while creating it): it is never removed. It is kept, with its -wal,
// -journal, -shm and write-failed marker, as FILE.unrecorded (out of the analysis' scan, each companion beside it
// under the matching name so SQLite can still read it), and a placeholder store takes its name:
// its meta says recording_state = lost and why, and its counter recording_failed (error) makes
// the loss part of every analysis of the directory (exit 4).
void PreserveLostFile(const fs::path& file, const std::string& reason) {
  const std::string name = file.filename().string();
  const fs::path kept = file.string() + ".unrecorded";
  std::error_code ec;
  fs::rename(file, kept, ec);
  if (ec) {
    Note(fmt::format("{}: {} {}: its recording is lost, and the file could not be set aside ({}): the analysis of "
                     "the directory will stop at it",
                     name, WhoWrote(file), reason, ec.message()));
    return;
  }
  for (const char* suffix : {"-wal", "-journal", "-shm", ".write_failed"}) {
    std::error_code rc;
    if (Exists(file.string() + suffix)) fs::rename(file.string() + suffix, kept.string() + suffix, rc);
  }
  // The placeholder's meta, from the file's name (rank<R>_ or norank_, host, pid).
  RankTrace t;
  if (name.rfind("rank", 0) == 0) {
    char* end = nullptr;
    long r = std::strtol(name.c_str() + 4, &end, 10);
    if (end && *end == '_' && r >= 0) t.meta.rank = r;
  }
  if (size_t u = name.find('_'), p = name.rfind("_pid"); u != std::string::npos && p != std::string::npos && p > u)
    t.meta.host = name.substr(u + 1, p - u - 1);
  if (pid_t pid = PidInName(name); pid > 0) t.meta.pid = pid;
  t.meta.source_format = "overlapprof";
  t.meta.clock_source = "CLOCK_REALTIME";
  t.meta.source_path = kept.string();
  t.stats.Set(Stat::recording_failed, 1);
  Status st = WriteStore(t, file.string(), false);
  if (st.ok()) {
    Db db;
    st = db.Open(file.string(), SQLITE_OPEN_READWRITE);
    if (st.ok())
      st = db.Exec("BEGIN; INSERT OR REPLACE INTO meta(key, value) VALUES('recording_state', 'lost'), ('lost_reason', " +
                   Quoted(fmt::format("{} {}; this store stands for its file, kept as {}", WhoWrote(file), reason,
                                      kept.filename().string())) +
                   "); COMMIT;");
  }
  if (!st.ok()) {
    Note(fmt::format("{}: {} {}: its recording is lost (kept as {}); the loss could not be noted for the analysis "
                     "({})",
                     name, WhoWrote(file), reason, kept.filename().string(), st.message()));
    return;
  }
  Note(fmt::format("{}: {} {}: its recording is lost (kept as {}; counted in the analysis: recording_failed)", name,
                   WhoWrote(file), reason, kept.filename().string()));
}

// Marks an unfinished injector store in one transaction, before any checkpoint (on a full disk
// the checkpoint is what fails, and the mark must not depend on it; a small transaction usually
// fits in the WAL space the failed commit had already taken):
//  - "recording" (killed, _exit, the exit flush cut short) or "write_failed": recording_state =
//    incomplete and recording_incomplete; a write failure (that state, or the injector's
//    FILE.write_failed marker: its write failed and it could not even note it) also sets
//    records_lost_write_failed to at least 1;
//  - no recording_state (its process failed while creating the file, after the schema): lost,
//    and recording_failed: the injector stopped recording that process.
// Also meta process_gone_ns, when `run` saw the file's process gone (a process of this host):
// the reader bounds what the file may miss by it (src/store/recording_state.h).
// Returns false when the mark could not be written.
bool MarkUnfinished(sqlite3* db, const fs::path& file, const Probe& probe, int64_t gone_ns, bool marker) {
  std::string mark = "BEGIN;";
  if (!probe.has_state) {
    mark += StatRowSql(Stat::recording_failed, 1) +
            "INSERT OR REPLACE INTO meta(key, value) VALUES('recording_state', 'lost'), ('lost_reason', "
            "'its process failed while creating it (disk full?), after the schema and before its first record');";
  } else {
    mark += StatRowSql(Stat::recording_incomplete, 1) + "UPDATE meta SET value='incomplete' WHERE key='recording_state';";
    if (marker || probe.state == "write_failed") {
      const StatInfo& lost = GetStatInfo(Stat::records_lost_write_failed);
      mark += "INSERT OR IGNORE INTO stats(name, severity, value, description) VALUES('records_lost_write_failed', " +
              Quoted(SeverityName(lost.severity)) + ", 1, " + Quoted(lost.description) +
              ");"
              "UPDATE stats SET value=max(value,1) WHERE name='records_lost_write_failed';";
    }
  }
  if (gone_ns > 0 && !probe.host.empty() && probe.host == LocalHost())
    mark += fmt::format("INSERT OR REPLACE INTO meta(key, value) VALUES('process_gone_ns', {});", gone_ns);
  mark += "COMMIT;";
  char* err = nullptr;
  if (sqlite3_exec(db, mark.c_str(), nullptr, nullptr, &err) == SQLITE_OK) return true;
  Note(file.string() + ": cannot mark it incomplete: " + (err ? err : "unknown error") +
       " (disk full?); its recording did not finish: treat its figures as incomplete");
  sqlite3_free(err);
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  return false;
}

// After its process is gone. A rank file that holds no readable recording (0 bytes, no schema,
// not a readable SQLite store) is kept and stood in for (PreserveLostFile): kLost. A store
// whose recording did not finish is marked (MarkUnfinished); a process killed before its last
// flush leaves a -wal file, which is checkpointed into the store (SQLite recovers committed
// transactions) and the file switched to a self-contained journal mode. Only a store that
// finished cleanly, left nothing behind (-wal, -journal, a write-failed marker) and records
// nothing is removed: a launcher's or helper's (kEmpty).
Settled SettleRankFile(const fs::path& file, int64_t gone_ns) {
  std::error_code ec;
  const std::string who = WhoWrote(file);
  const std::string marker_path = file.string() + ".write_failed";  // injector/sink.h, kWriteFailedSuffix
  struct stat wal {};
  const bool leftovers = (::stat((file.string() + "-wal").c_str(), &wal) == 0 && wal.st_size > 0) ||
                         Exists(file.string() + "-journal") || Exists(marker_path);
  const bool marker = Exists(marker_path);
  // 0 bytes and no WAL (a first commit may be in the -wal alone until its checkpoint).
  if (fs::file_size(file, ec) == 0 && !ec && wal.st_size == 0) {
    PreserveLostFile(file, "died or ran out of disk while creating it (0 bytes)");
    return Settled::kLost;
  }
  const Probe probe = ProbeRankFile(file);
  if (!probe.error.empty()) {
    PreserveLostFile(file, "left a file that cannot be read as a store (" + probe.error + ")");
    return Settled::kLost;
  }
  if (!probe.has_meta) {
    PreserveLostFile(file, "was killed or ran out of disk before its first commit (no schema)");
    return Settled::kLost;
  }
  const bool injector_store = probe.source_format == "overlapprof";
  const bool unfinished =
      injector_store && (!probe.has_state || probe.state == "recording" || probe.state == "write_failed");
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    Note(file.string() + ": cannot open to settle: " + (db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return Settled::kOk;  // it was read above: the analysis reads it as it is
  }
  sqlite3_busy_timeout(db, 2000);
  const bool marked = unfinished && MarkUnfinished(db, file, probe, gone_ns, marker);
  if (marked && marker) fs::remove(marker_path, ec);
  char* err = nullptr;
  if (sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE;", nullptr, nullptr, &err) !=
      SQLITE_OK) {
    Note(file.string() + ": settling failed: " + (err ? err : "unknown error") +
         (marked ? " (it is marked incomplete all the same)" : ""));
    sqlite3_free(err);
  }
  sqlite3_close(db);
  // A launcher's or helper's store (src/store/writer.h); kept when unsure (the check failed).
  if (probe.state == "finished" && !leftovers) {
    if (auto nothing = StoreRecordsNothing(file.string()); nothing.ok() && *nothing) {
      std::error_code rm;
      fs::remove(file, rm);
      if (!rm) {
        Note(file.filename().string() + ": " + who +
             " recorded nothing (no GPU work, no NCCL call: a launcher or helper process): removed");
        return Settled::kEmpty;
      }
    }
  }
  // The injector writes comm ops as chunks only (speed); add their SQL rows now, off the job.
  if (Status s = MaterializeCommOpRows(file.string()); !s.ok()) {
    Note(file.string() + ": comm_op rows not added: " + s.message());
  } else if (auto j = JoinNcclProfilerOps(file.string()); !j.ok()) {
    // NCCL's profiler plugin ops to the calls they timed (src/store/plugin_join.h).
    Note(file.string() + ": NCCL profiler plugin operations not joined to the calls: " + j.status().message());
  }
  if (unfinished && !probe.has_state)
    Note(file.filename().string() + ": " + who +
         " failed while creating it (disk full?): its recording is lost (counted in the analysis: recording_failed)");
  else if (unfinished)
    Note(file.filename().string() + ": the process did not finish recording (killed, _exit?): kept what it had committed");
  return Settled::kOk;
}

// Phase 7: the rank files once no process writes them: settled, the ones still written left
// as they are.
struct RankFilesFound {
  std::vector<fs::path> files;  // to analyze (placeholders of lost files included)
  size_t lost = 0, empty = 0;
};

RankFilesFound CollectRankFiles(const fs::path& dir, const LeftBehind& left, const Job& job) {
  RankFilesFound found;
  for (const fs::path& f : RankFiles(dir)) {
    if (std::any_of(left.writers.begin(), left.writers.end(), [&](const auto& l) { return l.first == f; })) continue;
    switch (SettleRankFile(f, job.SeenGone(PidInName(f.filename().string())))) {
      case Settled::kEmpty:
        ++found.empty;
        continue;
      case Settled::kLost:
        ++found.lost;
        break;
      case Settled::kOk:
        break;
    }
    if (fs::exists(f)) found.files.push_back(f);
  }
  return found;
}

// Phase 8: no rank file at all: why, in plain words.
void ExplainNothingRecorded(size_t empty) {
  if (empty > 0)
    Note(fmt::format("nothing was recorded: {} process(es) of the job had the injector in them but ran no GPU work "
                     "and made no NCCL call.",
                     empty));
  else
    Note("nothing was recorded: no process of the job loaded NCCL or initialized CUDA with the injector in it.");
  Note("  - a job that does not use NCCL (torch.distributed with gloo, a CPU-only job) has no GPU communication "
       "to measure;");
  Note("  - or the injector did not load in the workers: a launcher that clears LD_PRELOAD (a container, "
       "ranks started over ssh) keeps it out. To check, in a running worker: grep overlapprof_inject "
       "/proc/<worker pid>/maps");
  Note("  - another route: record with the PyTorch profiler (torch.profiler, one trace per rank) and run "
       "'overlapprof analyze' on its traces (docs/run.md)");
}

// `run`'s own output never ends it: a reader that went away (`run ... | head -c1`, stdout or
// stderr) makes a write fail with EPIPE instead of killing `run` (and leaving its job without
// its signals, its wait and its settling) or replacing the command's exit code with 141.
// SIGPIPE stays ignored in `run` from here on (what stdio still holds is written at exit);
// returns the disposition it had, which the job gets back.
struct sigaction IgnoreSigpipe() {
  struct sigaction ign {}, old {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  ::sigaction(SIGPIPE, &ign, &old);
  return old;
}

// Phase 9: the analysis of the directory. Its result never replaces the command's exit code: a
// failed analysis is a line; a reader that closed stdout makes its printing stop (EPIPE).
void AnalyzeAfterRun(const OutputDir& out, int code,
                     const std::function<CommandResult(const std::string& dir)>& analyze) {
  std::fflush(stderr);
  int rc;
  try {
    rc = ExitCodeOf(analyze(out.shown().string()));
  } catch (const std::exception& e) {  // the job's exit code must survive a failed analysis
    rc = ExitCodeOf(MakeError(StatusCode::kInternal, "analysis: internal error: {}", e.what()));
  }
  std::cout.flush();
  std::fflush(stdout);
  if (rc != kExitOk && code == 0)
    Note("analysis exited with " + std::to_string(rc) + " (docs/exit-codes.md); the command's exit code is returned");
}

}  // namespace

CommandResult RunCommand(const RunArgs& a, const std::function<CommandResult(const std::string& dir)>& analyze) {
  if (a.command.empty())
    return MakeError(StatusCode::kInvalidArgument, "run: no command given (usage: overlapprof run [-o DIR] -- CMD ARGS...)");
  const struct sigaction job_sigpipe = IgnoreSigpipe();
  OVERLAPPROF_ASSIGN_OR_RETURN(std::string injector, CheckInjector());
  OutputDir out;
  OVERLAPPROF_RETURN_IF_ERROR(out.Prepare(a));
  PreloadPath preload;
  OVERLAPPROF_RETURN_IF_ERROR(preload.Make(injector));
  SetRecordingEnvironment(a, injector, preload.path(), out.resolved());

  Job job;
  OVERLAPPROF_RETURN_IF_ERROR(job.Spawn(a.command, job_sigpipe));
  job.WaitForCommand();
  const int code = job.code();
  // Processes of the job may outlive the command (a worker started after its launcher exited,
  // a grandchild left behind): waited for, and their files settled only once they are gone.
  // Signals keep being forwarded while waiting.
  const LeftBehind left = job.WaitForLeftBehind(out.resolved(), a.wait_s);
  RankFilesFound found = CollectRankFiles(out.resolved(), left, job);
  for (const auto& [f, w] : left.writers)
    Note(fmt::format("{}: still written by pid {} after {} s: left as it is (not settled, not analyzed)",
                     f.filename().string(), w > 0 ? std::to_string(w) : std::string("?"), a.wait_s));
  if (!left.running.empty()) {
    out.Keep();  // they may still write into it
    Note(fmt::format("process(es) of the job still run after {} s (--wait-s): {}; left running: what they record "
                     "from now on is not in this analysis",
                     a.wait_s, PidList(left.running, true)));
  }
  char line[256];
  std::snprintf(line, sizeof line, "the command exited with %d after %.1f s; %zu rank file(s) in %s", code,
                job.seconds(), found.files.size() + left.writers.size(), out.shown().c_str());
  Note(line);
  if (found.files.empty() && left.writers.empty()) {
    ExplainNothingRecorded(found.empty);
    return Outcome::CommandExited(code);  // out removes the directory it created, when empty
  }
  if (found.lost > 0 && found.lost == found.files.size() && left.writers.empty())
    Note("no rank file holds a recording: every recording process died or failed before its first commit");
  if (!left.writers.empty()) {
    if (!a.no_analyze)
      Note(fmt::format("not analyzed while rank files are still written; once those processes have exited: "
                       "overlapprof analyze {}",
                       out.shown().string()));
    return Outcome::CommandExited(code);
  }
  if (!a.no_analyze) AnalyzeAfterRun(out, code, analyze);
  return Outcome::CommandExited(code);
}

namespace {

class RunSubcommand : public Subcommand {
 public:
  std::string_view name() const override { return "run"; }
  std::string_view description() const override {
    return "Run a training command with the injector and record every rank (overlapprof run -- CMD ARGS...)";
  }
  std::string_view usage() const override { return "run [OPTIONS] -- CMD [ARGS...]"; }
  void AddOptions(CLI::App& app) override {
    app_ = &app;
    app.add_option("-o,--output", a_.output_dir,
                   "directory for the rank files, refused if it holds a trace or is a symbolic link (default: a new "
                   "overlapprof-YYYYmmdd-HHMMSS)");
    app.add_option("--flush-ms", a_.flush_ms,
                   "commit the rank files at least this often, in ms from 10 to 600000 (10 minutes); bounds what "
                   "SIGKILL loses")
        ->check(Quiet(CLI::Range(10, 600000)))
        ->type_name("MS");
    app.add_flag("--no-analyze", a_.no_analyze, "only record; do not analyze afterwards");
    app.add_flag("--force", a_.force,
                 "record into an output directory that already holds traces, or into the directory a symbolic "
                 "link -o names");
    app.add_option("--wait-s", a_.wait_s,
                   "after the command exits, wait at most this long (0 to 86400 s, default 30) for the processes it "
                   "left behind (workers started in the background or with setsid) and those still writing rank "
                   "files")
        ->check(Quiet(CLI::Range(0, 86400)))
        ->type_name("S");
    app.add_option("--nccl-detail", a_.nccl_detail,
                   "what NCCL's profiler plugin reports beyond each operation's GPU time: 'proxy' adds the proxy "
                   "thread's network progress (ProxyOp/ProxyStep counts per operation; more events, more cost)")
        ->check(Quiet(CLI::IsMember({"proxy"})))
        ->type_name("proxy");
    // Everything from the first positional argument (or after "--") is the command, passed on
    // untouched, its own options included.
    app.prefix_command();
    app.allow_extras();
  }
  bool takes_command_after_dashes() const override { return true; }
  CommandResult Run(const std::vector<std::string>& after_dashes) override {
    a_.command = app_->remaining();
    // What CLI11 left before the command that starts with '-' is an option run does not have
    // (the command itself never starts with '-' unless it follows "--").
    if (!a_.command.empty() && a_.command.front().size() > 1 && a_.command.front()[0] == '-')
      return MakeError(StatusCode::kInvalidArgument, "run: unknown option '{}' (see overlapprof run --help)",
                       a_.command.front());
    a_.command.insert(a_.command.end(), after_dashes.begin(), after_dashes.end());
    return RunCommand(a_, AnalyzeRunDirectory);
  }

 private:
  RunArgs a_;
  CLI::App* app_ = nullptr;
};

}  // namespace

std::unique_ptr<Subcommand> MakeRunCommand() { return std::make_unique<RunSubcommand>(); }

}  // namespace overlapprof
