#include "src/cli/output.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <system_error>
#include <thread>
#include <iostream>
#include <streambuf>
#include <vector>

#include "src/cli/registry.h"
#include "analyzers/comm_ops.h"
#include "analyzers/cross_rank_result.h"
#include <fmt/format.h>
#include "src/common/utf8.h"

namespace overlapprof {
namespace {

namespace fs = std::filesystem;

// A streambuf that gzip-compresses into another stream (zlib level 1: a Chrome trace compresses
// about 11:1, three times faster than level 6's 14:1).
class GzipBuf : public std::streambuf {
 public:
  explicit GzipBuf(std::ostream& sink) : sink_(sink), in_(1 << 16), out_(1 << 16) {
    ok_ = deflateInit2(&z_, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;  // +16: gzip wrapper
    setp(in_.data(), in_.data() + in_.size());
  }
  ~GzipBuf() override { deflateEnd(&z_); }
  // Flushes the rest and writes the gzip trailer; false when anything failed.
  bool Finish() {
    ok_ = ok_ && Deflate(Z_FINISH);
    return ok_ && static_cast<bool>(sink_);
  }

 protected:
  int_type overflow(int_type c) override {
    if (!Deflate(Z_NO_FLUSH)) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }

 private:
  // Compresses what is buffered; with Z_FINISH, also the trailer.
  bool Deflate(int flush) {
    if (!ok_) return false;
    z_.next_in = reinterpret_cast<Bytef*>(pbase());
    z_.avail_in = static_cast<uInt>(pptr() - pbase());
    int rc;
    do {
      z_.next_out = reinterpret_cast<Bytef*>(out_.data());
      z_.avail_out = static_cast<uInt>(out_.size());
      rc = deflate(&z_, flush);
      if (rc == Z_STREAM_ERROR) return ok_ = false;
      sink_.write(out_.data(), static_cast<std::streamsize>(out_.size() - z_.avail_out));
      if (!sink_) return ok_ = false;
    } while (z_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
    setp(in_.data(), in_.data() + in_.size());
    return true;
  }

  std::ostream& sink_;
  std::vector<char> in_, out_;
  z_stream z_{};
  bool ok_ = false;
};

// A streambuf writing to a descriptor it does not own (64 KiB buffered); a failed write(2)
// makes the stream bad.
class FdBuf : public std::streambuf {
 public:
  explicit FdBuf(int fd) : fd_(fd), buf_(1 << 16) { setp(buf_.data(), buf_.data() + buf_.size()); }

 protected:
  int_type overflow(int_type c) override {
    if (!Flush()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return Flush() ? 0 : -1; }

 private:
  bool Flush() {
    const char* p = pbase();
    size_t n = static_cast<size_t>(pptr() - pbase());
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
    setp(buf_.data(), buf_.data() + buf_.size());
    return true;
  }
  int fd_;
  std::vector<char> buf_;
};

// Creates `tmp` exclusively (O_EXCL|O_NOFOLLOW): never through a symbolic link planted at that
// name, never into a file another process has open. A leftover (a killed run's, or a planted
// link) is unlinked first, once: unlink(2) removes a link itself, not its target.
StatusOr<int> CreatePartial(const std::string& tmp) {
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(tmp.c_str(), kFlags, 0644);
  if (fd < 0 && errno == EEXIST && ::unlink(tmp.c_str()) == 0) fd = ::open(tmp.c_str(), kFlags, 0644);
  if (fd < 0) return MakeError(StatusCode::kIo, "{}: cannot create: {}", tmp, std::strerror(errno));
  return fd;
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Status CheckOutputPaths(const std::vector<std::pair<std::string, std::string>>& outputs, bool force) {
  std::vector<std::pair<std::string, const std::pair<std::string, std::string>*>> seen;  // canonical path
  for (const auto& o : outputs) {
    const std::string& path = o.second;
    if (path.empty() || path == "-") continue;
    std::error_code ec;
    const std::string canonical = fs::weakly_canonical(fs::absolute(path, ec), ec).string();
    for (const auto& [c, other] : seen)
      if (c == canonical)
        return MakeError(StatusCode::kInvalidArgument, "{} and {} name the same file {}: give each its own",
                         other->first, o.first, path);
    seen.emplace_back(canonical, &o);
    const fs::file_status st = fs::status(path, ec);
    if (ec || !fs::exists(st)) continue;
    if (!fs::is_regular_file(st))
      return MakeError(StatusCode::kInvalidArgument, "{} {}: not a regular file: refused ('-' writes to stdout)",
                       o.first, path);
    if (!force)
      return MakeError(StatusCode::kInvalidArgument, "{} {}: the file exists: --force replaces it", o.first, path);
  }
  return OkStatus();
}

Status WriteAtomically(const std::string& path, const std::function<Status(std::ostream&)>& write) {
  const std::string tmp = path + ".partial";
  OVERLAPPROF_ASSIGN_OR_RETURN(const int fd, CreatePartial(tmp));
  FdBuf fb(fd);
  std::ostream f(&fb);
  Status st;
  if (EndsWith(path, ".gz")) {
    GzipBuf gz(f);
    std::ostream zout(&gz);
    st = write(zout);
    zout.flush();
    if (st.ok() && (!zout || !gz.Finish())) st = MakeError(StatusCode::kIo, "write failed");
  } else {
    st = write(f);
  }
  f.flush();
  const bool closed = ::close(fd) == 0;
  if (st.ok() && (!f || !closed)) st = MakeError(StatusCode::kIo, "write failed");
  if (!st.ok()) {
    std::remove(tmp.c_str());
    return st.WithPrefix(path);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return MakeError(StatusCode::kIo, "{}: cannot rename into place: {}", path, ec.message());
  return OkStatus();
}

Status WriteReportFiles(const ReportPaths& paths, const Summary& summary, ReportWriter* chrome, ReportWriter* html,
                        const ReportOptions& chrome_options) {
  // The writers only read the summary and their own state, so each file is written on its own
  // thread: the Chrome trace (the largest) from the start, the HTML page once the summary's JSON,
  // which it shares with the JSON summary file, is built (BuildSummaryDocument once for both). Where no
  // thread can be had, the write runs on this one. Errors are reported in the order JSON, Chrome
  // trace, HTML.
  Status json_status = OkStatus(), chrome_status = OkStatus(), html_status = OkStatus();
  std::optional<SummaryDocument> summary_doc;
  auto write_chrome = [&] {
    chrome_status = WriteAtomically(paths.chrome_trace, [&](std::ostream& o) { return chrome->Write(summary, chrome_options, o); });
  };
  auto write_html = [&] {
    ReportOptions html_options;
    html_options.summary_doc = summary_doc ? &*summary_doc : nullptr;
    html_status = WriteAtomically(paths.html, [&](std::ostream& o) { return html->Write(summary, html_options, o); });
  };
  auto start = [](std::thread& t, const std::function<void()>& f) {
    try {
      t = std::thread(f);
    } catch (const std::system_error&) {
      f();
    }
  };
  std::thread chrome_thread, html_thread;
  if (chrome) start(chrome_thread, write_chrome);
  try {
    if (!paths.json.empty() && html) summary_doc = BuildSummaryDocument(summary);
  } catch (const std::exception& e) {  // allocation
    json_status = MakeError(StatusCode::kInternal, "summary JSON: {}", e.what());
  }
  if (html && json_status.ok()) start(html_thread, write_html);
  if (!paths.json.empty() && json_status.ok())
    json_status = WriteJsonFile(summary, paths.json, summary_doc ? &*summary_doc : nullptr);
  if (chrome_thread.joinable()) chrome_thread.join();
  if (html_thread.joinable()) html_thread.join();
  // Each file written, one line each on stderr (stdout stays free for the caller), in the order
  // JSON, Chrome trace, HTML; a file whose write failed is not named (its error follows), nor "-".
  auto wrote = [](const std::string& path, const Status& st, const char* what) {
    if (!path.empty() && path != "-" && st.ok()) std::fprintf(stderr, "overlapprof: wrote %s (%s)\n", EscapeForTerminal(path).c_str(), what);
  };
  if (paths.announce_json) wrote(paths.json, json_status, "JSON summary");
  wrote(paths.chrome_trace, chrome_status, "Chrome trace: open in ui.perfetto.dev");
  wrote(paths.html, html_status, "HTML report: open in a browser");
  OVERLAPPROF_RETURN_IF_ERROR(json_status);
  OVERLAPPROF_RETURN_IF_ERROR(chrome_status);
  if (chrome) {
    if (std::string note = chrome->Notice(); !note.empty())
      std::fprintf(stderr, "overlapprof: %s: %s\n", EscapeForTerminal(paths.chrome_trace).c_str(),
                   EscapeForTerminal(note).c_str());
  }
  return html_status;
}

Status WriteJsonFile(const Summary& summary, const std::string& path, const SummaryDocument* summary_doc) {
  std::unique_ptr<ReportWriter> json = MakeReportWriter("json");
  ReportOptions options;
  options.summary_doc = summary_doc;
  if (path == "-") return json->Write(summary, options, std::cout);
  return WriteAtomically(path, [&](std::ostream& o) { return json->Write(summary, options, o); });
}

namespace {

// One CSV field: quoted when it holds a comma, a quote or a line break.
std::string CsvField(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}
std::string CsvRank(int64_t r) { return r == kUnknown ? std::string() : std::to_string(r); }
// Ratios as the JSON summary rounds them (4 decimals).
std::string CsvOpt(const std::optional<double>& v) {
  return v ? fmt::format("{}", std::round(*v * 1e4) / 1e4) : std::string();
}
std::string CsvOpt(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : std::string(); }

Status WriteCsv(const std::string& path, const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows) {
  return WriteAtomically(path, [&](std::ostream& o) {
    auto line = [&](const std::vector<std::string>& cells) {
      for (size_t i = 0; i < cells.size(); ++i) o << (i ? "," : "") << CsvField(cells[i]);
      o << "\r\n";
    };
    line(header);
    for (const auto& r : rows) line(r);
    return o ? OkStatus() : MakeError(StatusCode::kIo, "write failed");
  });
}

}  // namespace

Status WriteCsvTables(const Summary& s, const std::string& dir, bool force) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return MakeError(StatusCode::kIo, "--csv {}: cannot create directory: {}", dir, ec.message());
  const auto path = [&](const char* name) { return (fs::path(dir) / name).string(); };
  std::vector<std::pair<std::string, std::string>> outputs = {
      {"--csv", path("ranks.csv")}, {"--csv", path("iterations.csv")}, {"--csv", path("op_types.csv")},
      {"--csv", path("findings.csv")}};
  const bool collectives = s.cross_rank && !s.cross_rank->collectives.empty();
  if (collectives) outputs.emplace_back("--csv", path("collectives.csv"));
  OVERLAPPROF_RETURN_IF_ERROR(CheckOutputPaths(outputs, force));

  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < s.ranks.size(); ++i) {
    const RankResult& r = s.ranks[i];
    const OverlapFigures& f = r.whole;
    std::vector<std::string> row = {CsvRank(r.rank), r.source_path, std::to_string(f.wall_ns),
                                    std::to_string(f.compute_ns), std::to_string(f.comm_ns),
                                    std::to_string(f.overlap_ns), std::to_string(f.exposed_comm_ns),
                                    CsvOpt(f.overlap_ratio), CsvOpt(f.achievable_ratio), std::to_string(f.comm_ops),
                                    std::to_string(r.iteration_count)};
    if (s.step_breakdown && i < s.step_breakdown->ranks.size()) {
      const StepBreakdownRank& b = s.step_breakdown->ranks[i];
      const StepSplit& p = b.split;
      for (int64_t v : {b.iterations, p.wall_ns, p.compute_only_ns, p.comm_hidden_ns, p.comm_exposed_ns,
                        p.comm_waiting_ns, p.memory_only_ns, p.idle_ns})
        row.push_back(std::to_string(v));
    } else {
      row.insert(row.end(), 8, "");
    }
    row.push_back(r.verdict);
    rows.push_back(std::move(row));
  }
  OVERLAPPROF_RETURN_IF_ERROR(WriteCsv(
      path("ranks.csv"),
      {"rank", "file", "wall_ns", "compute_ns", "comm_ns", "overlap_ns", "exposed_comm_ns", "overlap_ratio (0-1)",
       "bound_ratio (0-1)", "comm_ops (count)", "iterations (count)", "steady_iterations (count)",
       "steady_wall_ns", "compute_only_ns", "comm_hidden_ns", "comm_exposed_ns", "comm_waiting_ns",
       "memory_only_ns", "idle_ns", "verdict"},
      rows));

  rows.clear();
  for (const IterationResult& it : s.iterations) {
    const OverlapFigures& f = it.figures;
    rows.push_back({CsvRank(it.rank), std::to_string(it.index), it.step == kUnknown ? "" : std::to_string(it.step),
                    it.warmup ? "1" : "0", std::to_string(f.start_ns), std::to_string(f.wall_ns),
                    std::to_string(f.compute_ns), std::to_string(f.comm_ns), std::to_string(f.overlap_ns),
                    std::to_string(f.exposed_comm_ns), CsvOpt(f.overlap_ratio), std::to_string(f.comm_ops)});
  }
  OVERLAPPROF_RETURN_IF_ERROR(WriteCsv(path("iterations.csv"),
                                       {"rank", "index", "step", "warmup (0/1)", "start_ns", "wall_ns", "compute_ns",
                                        "comm_ns", "overlap_ns", "exposed_comm_ns", "overlap_ratio (0-1)",
                                        "comm_ops (count)"},
                                       rows));

  rows.clear();
  if (s.op_types)
    for (const OpTypeRow& o : *s.op_types)
      rows.push_back({CsvRank(o.rank), std::string(OpFamilyName(o.op)), std::to_string(o.count), CsvOpt(o.bytes), std::to_string(o.time_ns),
                      std::to_string(o.exposed_ns), CsvOpt(o.exposed_fraction), CsvOpt(o.algbw_GBps),
                      CsvOpt(o.busbw_GBps), std::to_string(o.ops_under_1MiB)});
  OVERLAPPROF_RETURN_IF_ERROR(WriteCsv(path("op_types.csv"),
                                       {"rank", "op", "count", "bytes", "time_ns", "exposed_ns",
                                        "exposed_fraction (0-1)", "algbw_GBps", "busbw_GBps",
                                        "ops_under_1MiB (count)"},
                                       rows));

  if (collectives) {
    rows.clear();
    for (const ListedCollective& c : s.cross_rank->collectives)
      rows.push_back({c.communicator, c.key, std::string(CollectiveName(c.op)), CsvOpt(c.bytes), std::to_string(c.start_ns),
                      std::to_string(c.skew_ns), std::to_string(c.last_rank), std::to_string(c.members.size())});
    OVERLAPPROF_RETURN_IF_ERROR(WriteCsv(path("collectives.csv"),
                                         {"communicator", "key", "op", "bytes", "start_ns", "skew_ns", "last_rank",
                                          "members (count)"},
                                         rows));
  }

  rows.clear();
  for (const Finding& f : s.findings)
    rows.push_back({CsvRank(f.rank), std::string(SeverityName(f.severity)), f.analyzer, f.message});
  return WriteCsv(path("findings.csv"), {"rank", "severity", "analyzer", "message"}, rows);
}

}  // namespace overlapprof
