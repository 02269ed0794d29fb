// `nsys export` run for the CLI: an Nsight Systems report (.nsys-rep) becomes the SQLite
// export the importer reads.
#include "src/cli/nsys_export.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

extern char** environ;

namespace overlapprof {

namespace {

// The first executable `program` in $PATH's directories; "" when none.
std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string_view rest = path ? path : "";
  while (!rest.empty()) {
    size_t colon = rest.find(':');
    std::string dir(rest.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

StatusOr<std::string> ExportNsysReport(const std::string& path, const std::string& cache_dir) {
  namespace fs = std::filesystem;
  std::string stem = fs::path(path).stem().string();
  const std::string nsys = FindOnPath("nsys");
  if (nsys.empty())
    return MakeError(StatusCode::kInvalidInput,
                     "an Nsight Systems report; nsys is not on PATH: export it first with: nsys export --type sqlite "
                     "--output {}.sqlite {}",
                     (fs::path(path).parent_path() / stem).string(), path);
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  const auto mtime = fs::last_write_time(path, ec).time_since_epoch().count();
  const char* tmp = std::getenv("TMPDIR");
  fs::path dir = !cache_dir.empty() ? fs::path(cache_dir)
                                    : fs::path(tmp && *tmp ? tmp : "/tmp") / fmt::format("overlapprof-nsys-{}", ::getuid());
  fs::create_directories(dir, ec);
  if (ec) return MakeError(StatusCode::kIo, "{}: cannot create directory: {}", dir.string(), ec.message());
  if (cache_dir.empty()) {
    // The default cache is in a shared /tmp: another user could have created it (or a link
    // by that name) to feed us an export or catch our writes.
    struct stat st;
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 022) != 0)
      return MakeError(StatusCode::kInvalidInput,
                       "{}: not a directory owned by you and writable only by you: refused (--cache-dir DIR picks another)",
                       dir.string());
  }
  const std::string out = (dir / fmt::format("{}-{}-{}.sqlite", stem, size, static_cast<int64_t>(mtime))).string();
  if (fs::exists(out, ec)) return out;  // exported before, report unchanged
  const std::string partial = out + ".partial.sqlite";
  ::unlink(partial.c_str());  // a leftover, or a link planted at that name: nsys must not write through it
  std::vector<std::string> args = {"nsys", "export", "--type", "sqlite", "--force-overwrite", "true",
                                   "--output", partial, path};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  if (int rc = ::posix_spawn(&pid, nsys.c_str(), nullptr, nullptr, argv.data(), environ); rc != 0)
    return MakeError(StatusCode::kIo, "cannot run {}: {}", nsys, std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !fs::exists(partial, ec)) {
    fs::remove(partial, ec);
    return MakeError(StatusCode::kInvalidInput, "nsys export --type sqlite failed (exit status {}); run it by hand: "
                     "nsys export --type sqlite --output {}.sqlite {}",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1, stem, path);
  }
  fs::rename(partial, out, ec);
  if (ec) return MakeError(StatusCode::kIo, "{}: cannot rename into place: {}", out, ec.message());
  return out;
}

}  // namespace overlapprof
