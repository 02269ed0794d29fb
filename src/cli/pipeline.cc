#include "src/cli/pipeline.h"

#include <algorithm>
#include <deque>
#include <future>
#include <filesystem>
#include <map>
#include <numeric>
#include <ostream>
#include <system_error>
#include <thread>
#include <tuple>

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <cstdio>
#include <fnmatch.h>
#include <nlohmann/json.hpp>

#include "analyzers/cross_rank_windows.h"
#include "analyzers/overlap.h"
#include "src/common/progress.h"
#include "src/cli/nsys_export.h"
#include "src/cli/registry.h"
#include "src/common/utf8.h"
#include "src/io/input_stream.h"
#include "src/importers/nsys/nsys.h"

namespace overlapprof {

namespace fs = std::filesystem;

bool LooksLikeTraceFile(const std::string& name) {
  auto ends = [&](std::string_view s) { return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0; };
  // overlapprof's own reports (what `run` writes beside the rank files) are not traces.
  if (ends(".summary.json") || ends(".perfetto.json")) return false;
  return ends(".json") || ends(".json.gz") || ends(".db") || ends(".sqlite") || ends(".sqlite3");
}

namespace {

const char* FileTypeName(fs::file_type t) {
  switch (t) {
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::character: return "a character device";
    case fs::file_type::block: return "a block device";
    case fs::file_type::symlink: return "a broken symbolic link";
    case fs::file_type::not_found: return "a broken symbolic link";
    default: return "not a regular file";
  }
}

// overlapprof's own outputs beside the rank files (`run`): skipped without a word.
bool IsOwnReport(const std::string& name) {
  auto ends = [&](std::string_view s) { return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0; };
  return ends(".summary.json") || ends(".perfetto.json") || ends(".report.html") || ends(".partial");
}

// Why a file named like a JSON trace is not one, or "" when it may be one: only a whole JSON
// document (up to 1 MiB, inflated) that parses and is clearly something else is not.
std::string NotATraceReason(const std::string& path) {
  if (path.size() > 3 && (path.compare(path.size() - 3, 3, ".db") == 0 || path.find(".sqlite") != std::string::npos))
    return "";
  StatusOr<std::unique_ptr<ByteStream>> in = OpenInputStream(path);
  if (!in.ok()) return "";
  constexpr size_t kLimit = 1 << 20;
  std::string text(kLimit + 1, '\0');
  size_t n = 0;
  while (n < text.size()) {
    StatusOr<size_t> got = (*in)->Read(text.data() + n, std::min<size_t>(text.size() - n, 1 << 16));
    if (!got.ok()) return "";
    if (*got == 0) break;
    n += *got;
    // A trace says so early: its events' key, or an event's phase.
    const std::string_view seen(text.data(), n);
    if (seen.find("\"traceEvents\"") != std::string_view::npos || seen.find("\"ph\"") != std::string_view::npos)
      return "";
  }
  if (n > kLimit) return "";  // too large to tell here: the import decides
  text.resize(n);
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded()) return "";  // broken: the import says how (exit 2)
  if (doc.is_object()) {
    if (doc.contains("traceEvents")) return "";
    if (StatusOr<const Importer*> imp = ChooseImporter(path); imp.ok() && (*imp)->name() != "kineto") return "";
    if (auto it = doc.find("schema"); it != doc.end() && it->is_string() &&
                                      it->get<std::string>().rfind("overlapprof.summary/", 0) == 0)
      return "an overlapprof JSON summary";
    return "JSON without \"traceEvents\": not a trace";
  }
  if (doc.is_array()) {
    for (const auto& e : doc)
      if (e.is_object() && e.contains("ph")) return "";
    return "a JSON array without trace events";
  }
  return "JSON that is not a trace";
}

// The files skipped in one directory and why, as ExpandInputs lists them on stderr.
struct Skipped {
  std::vector<std::pair<std::string, std::string>> files;  // path below the directory, reason
};

// Appends the trace files under `dir` (recursively, symbolic links followed for files, not for
// directories). Nothing is skipped silently: a subdirectory that cannot be listed, or an entry
// named like a trace that is not a readable regular file (a FIFO, a socket, a device, a broken
// link), is an error naming it; a file that is no trace is noted in `skipped` with the reason.
Status ListTraceFiles(const std::string& dir, const std::string& top, const std::vector<std::string>& exclude,
                      std::vector<std::string>& found, Skipped& skipped) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  if (ec) return MakeError(StatusCode::kIo, "{}: cannot list directory: {}", dir, ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return MakeError(StatusCode::kIo, "{}: cannot list directory: {}", dir, ec.message());
    const fs::path& p = it->path();
    std::error_code sec;
    const fs::file_status lst = it->symlink_status(sec);
    if (sec) return MakeError(StatusCode::kIo, "{}: cannot stat: {}", p.string(), sec.message());
    const std::string below = p.lexically_relative(top).string();
    const std::string name = p.filename().string();
    const auto excluded = std::find_if(exclude.begin(), exclude.end(), [&](const std::string& g) {
      return ::fnmatch(g.c_str(), below.c_str(), 0) == 0 || ::fnmatch(g.c_str(), name.c_str(), 0) == 0;
    });
    if (excluded != exclude.end()) {
      skipped.files.emplace_back(below, "--exclude " + *excluded);
      continue;
    }
    if (fs::is_directory(lst)) {
      OVERLAPPROF_RETURN_IF_ERROR(ListTraceFiles(p.string(), top, exclude, found, skipped));
      continue;
    }
    if (fs::is_symlink(lst) && fs::is_directory(it->status(sec))) continue;  // no cycles through links
    if (IsOwnReport(name)) continue;
    if (!LooksLikeTraceFile(name)) {
      skipped.files.emplace_back(below, "not named like a trace (.json, .json.gz, .db, .sqlite, .sqlite3)");
      continue;
    }
    const fs::file_status st = it->status(sec);
    if (sec && sec != std::errc::no_such_file_or_directory)
      return MakeError(StatusCode::kIo, "{}: cannot stat: {}", p.string(), sec.message());
    if (!fs::is_regular_file(st))
      return MakeError(StatusCode::kInvalidInput, "{}: {}, not a regular file: refused", p.string(),
                       FileTypeName(sec ? fs::file_type::not_found : st.type()));
    if (::access(p.c_str(), R_OK) != 0)
      return MakeError(StatusCode::kIo, "{}: cannot read: {}", p.string(), std::strerror(errno));
    if (std::string why = NotATraceReason(p.string()); !why.empty()) {
      skipped.files.emplace_back(below, std::move(why));
      continue;
    }
    found.push_back(p.string());
  }
  if (ec) return MakeError(StatusCode::kIo, "{}: cannot list directory: {}", dir, ec.message());
  return OkStatus();
}

}  // namespace

TraceInput::TraceInput(std::string input) : name(std::move(input)) {
  std::tie(path, unit) = SplitUnit(name);
}

TraceInput::TraceInput(std::string file, std::string key, std::shared_ptr<ImportSession> s)
    : name(key.empty() ? file : file + '#' + key), path(std::move(file)), unit(std::move(key)), session(std::move(s)) {}

std::ostream& operator<<(std::ostream& os, const TraceInput& input) { return os << input.name; }

StatusOr<std::vector<TraceInput>> ExpandInputs(const std::vector<std::string>& args, const std::string& nsys_cache_dir,
                                               const TraceNeeds& needs, const ImportOptions& options,
                                               const std::vector<std::string>& exclude) {
  std::vector<std::string> out;
  for (const std::string& a : args) {
    std::error_code ec;
    fs::file_status st = fs::status(a, ec);
    if (ec || !fs::exists(st)) return MakeError(StatusCode::kNotFound, "{}: no such file or directory", a);
    if (!fs::is_directory(st)) {
      // A FIFO, socket or device is refused at once, never waited on.
      if (!fs::is_regular_file(st))
        return MakeError(StatusCode::kInvalidInput, "{}: {}, not a regular file: refused", a, FileTypeName(st.type()));
      if (a.size() > 9 && a.compare(a.size() - 9, 9, ".nsys-rep") == 0) {  // Nsight Systems: its SQLite export
        StatusOr<std::string> exported = ExportNsysReport(a, nsys_cache_dir);
        if (!exported.ok()) return exported.status().WithPrefix(a);
        out.push_back(*exported);
        continue;
      }
      out.push_back(a);
      continue;
    }
    std::vector<std::string> found;
    Skipped skipped;
    OVERLAPPROF_RETURN_IF_ERROR(ListTraceFiles(a, a, exclude, found, skipped));
    std::sort(skipped.files.begin(), skipped.files.end());
    std::string list;
    constexpr size_t kListed = 5;
    for (size_t i = 0; i < skipped.files.size() && i < kListed; ++i)
      list += fmt::format("{}{} ({})", i ? "; " : "", skipped.files[i].first, skipped.files[i].second);
    if (skipped.files.size() > kListed) list += fmt::format("; and {} more", skipped.files.size() - kListed);
    if (found.empty())
      return MakeError(StatusCode::kInvalidInput,
                       "{}: directory holds no trace files (.json, .json.gz, .db, .sqlite, .sqlite3){}", a,
                       list.empty() ? "" : "; skipped: " + list);
    if (!skipped.files.empty())
      std::fprintf(stderr, "overlapprof: %s: skipped %zu file(s) that are not traces: %s\n",
                   EscapeForTerminal(a).c_str(), skipped.files.size(), EscapeForTerminal(list).c_str());
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  // Files holding several ranks (ImportSession::Units) become one input per rank. Files no
  // importer claims are kept: importing them reports why.
  ImportOptions open_options = options;
  open_options.store_needs = needs;
  std::vector<TraceInput> units;
  for (const std::string& path : out) {
    StatusOr<const Importer*> imp = ChooseImporter(path);
    if (!imp.ok()) {
      units.emplace_back(path, "", nullptr);
      continue;
    }
    StatusOr<std::unique_ptr<ImportSession>> opened = (*imp)->Open(path, open_options);
    if (!opened.ok()) return opened.status().WithPrefix(path);
    std::shared_ptr<ImportSession> session = std::move(*opened);
    StatusOr<std::vector<std::string>> keys = session->Units();
    if (!keys.ok()) return keys.status().WithPrefix(path);
    open_options.read_ahead_budget_bytes -= std::min(open_options.read_ahead_budget_bytes, session->ReadAheadBytes());
    if (keys->empty()) units.emplace_back(path, "", session);
    for (std::string& k : *keys) units.emplace_back(path, std::move(k), session);
  }
  return units;
}

std::pair<std::string, std::string> SplitUnit(const std::string& input) {
  const size_t hash = input.rfind('#');
  std::error_code ec;
  if (hash == std::string::npos || fs::exists(input, ec)) return {input, ""};
  return {input.substr(0, hash), input.substr(hash + 1)};
}

StatusOr<RankTrace> ImportFile(const TraceInput& input, const ImportOptions& options) {
  std::shared_ptr<ImportSession> session = input.session;
  if (!session) {
    StatusOr<const Importer*> imp = ChooseImporter(input.path);
    if (!imp.ok()) return imp.status().WithPrefix(input.name);
    StatusOr<std::unique_ptr<ImportSession>> opened = (*imp)->Open(input.path, options);
    if (!opened.ok()) return opened.status().WithPrefix(input.name);
    session = std::move(*opened);
  }
  StatusOr<RankTrace> t = session->Import(input.unit, options);
  if (!t.ok()) return t.status().WithPrefix(input.name);
  if (options.comm_patterns) options.comm_patterns->Apply(*t);
  if (options.kernel_timing_only) {
    t->nccl_plugin_ops.clear();
    t->nccl_plugin_ops.shrink_to_fit();
  }
  if (options.nsys.rank_by_gpu_world > 0 && t->meta.source_format == "nsys" && t->meta.rank == kUnknown &&
      !t->devices.empty() && t->devices[0].id >= 0) {
    t->meta.rank = t->meta.local_rank = t->devices[0].id;
    t->meta.world_size = options.nsys.rank_by_gpu_world;
    t->stats.Set(Stat::rank_unknown, 0);
    t->stats.Set(Stat::nsys_rank_from_gpu, 1);
  }
  return t;
}

StatusOr<int64_t> CheckRanksByGpu(const std::vector<TraceInput>& inputs) {
  std::map<int64_t, std::string> by_gpu;
  for (const TraceInput& input : inputs) {
    const std::string& in = input.name;
    const std::optional<int64_t> gpu = NsysUnitDevice(input.unit);
    if (!gpu) continue;
    auto [it, inserted] = by_gpu.emplace(*gpu, in);
    if (!inserted)
      return MakeError(StatusCode::kInvalidInput,
                       "--rank-by-gpu: GPU {} holds two ranks ({} and {}): ranks cannot be numbered by GPU (ranks "
                       "sharing a GPU, or exports of several nodes; docs/nsys.md, \"Ranks\")",
                       *gpu, it->second, in);
  }
  if (by_gpu.empty())
    return MakeError(StatusCode::kInvalidInput, "--rank-by-gpu: no input is a rank of an Nsight Systems export");
  return static_cast<int64_t>(by_gpu.size());
}

int DefaultJobs() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int n = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(n, 1, 256);
}

namespace {

// One input read and prepared (Analyzer::PrepareRank of every analyzer, in registry order), on
// the thread that read it; what the analyzers' AnalyzeRank take on the pass's thread.
struct PreparedInput {
  RankTrace trace;
  std::vector<std::unique_ptr<RankWork>> work;  // by analyzer (null: nothing prepared)
};

StatusOr<PreparedInput> ImportAndPrepare(const TraceInput& path, const ImportOptions& io, size_t rank_index,
                                         const std::vector<std::unique_ptr<Analyzer>>& analyzers,
                                         const AnalysisOptions& options) {
  OVERLAPPROF_ASSIGN_OR_RETURN(RankTrace t, ImportFile(path, io));
  PreparedInput in{std::move(t), {}};
  in.work.reserve(analyzers.size());
  RankPrep rank{in.trace, rank_index, nullptr};
  for (const auto& a : analyzers) in.work.push_back(a->PrepareRank(rank, options));
  return in;
}

// One pass over the inputs: the summary before Finish, and the analyzers that made it.
struct Pass {
  Summary summary;
  std::vector<std::unique_ptr<Analyzer>> analyzers;
};

// Imports and analyzes every input once, in input order; `records` (when not null) gets each
// rank's RankWindowRecord for planning windows across ranks.
StatusOr<Pass> RunPass(const std::vector<TraceInput>& files, const ImportOptions& import_options,
                       const AnalysisOptions& analysis_options, int jobs, const std::vector<ReportWriter*>& consumers,
                       const ReportOptions& report_options, std::vector<RankWindowRecord>* records) {
  Pass pass;
  Summary& summary = pass.summary;
  std::vector<std::unique_ptr<Analyzer>>& analyzers = pass.analyzers;
  analyzers = MakeAnalyzers();
  ImportOptions io = import_options;
  ImportScratch scratch;  // reused across files when one thread imports them all
  io.store_needs = TraceNeeds{};
  for (const auto& a : analyzers) io.store_needs |= a->needs(analysis_options);
  for (ReportWriter* w : consumers) io.store_needs |= w->needs();
  if (!analysis_options.step_range.empty()) io.store_needs.annotations = true;  // steps are annotations
  ImportOptions with_scratch = io;
  with_scratch.scratch = &scratch;
  // jobs > 1: each input is imported and prepared (Analyzer::PrepareRank) on its own thread,
  // started in input order, at most `jobs` of them in flight or done and not yet analyzed (a
  // rank leaves memory when the next is started). AnalyzeRank runs here, in input order.
  // (Declared after `analyzers`, which the threads use: destroyed, so waited for, first.)
  if (jobs <= 0) jobs = DefaultJobs();
  std::deque<std::future<StatusOr<PreparedInput>>> ahead;
  size_t next_to_start = 0;
  const size_t window = jobs > 1 ? static_cast<size_t>(jobs) : 0;
  auto start_more = [&] {
    while (ahead.size() < window && next_to_start < files.size()) {
      const size_t i = next_to_start;
      try {
        ahead.push_back(std::async(std::launch::async, [&files, &io, &analyzers, &analysis_options, i] {
          return ImportAndPrepare(files[i], io, i, analyzers, analysis_options);
        }));
      } catch (const std::system_error&) {
        return;  // no thread to be had now: fewer in flight (none: imported on this thread)
      }
      ++next_to_start;
    }
  };
  // The next rank in input order: the oldest import in flight, or imported here when none is.
  auto next_rank = [&]() -> StatusOr<PreparedInput> {
    if (ahead.empty()) {
      const size_t i = next_to_start++;
      return ImportAndPrepare(files[i], with_scratch, i, analyzers, analysis_options);
    }
    StatusOr<PreparedInput> t = ahead.front().get();
    ahead.pop_front();
    return t;
  };
  uint64_t total_bytes = 0;
  std::vector<uint64_t> sizes(files.size(), 0);
  for (size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    const auto n = std::filesystem::file_size(files[i].path, ec);
    sizes[i] = ec ? 0 : static_cast<uint64_t>(n);
    total_bytes += sizes[i];
  }
  for (ReportWriter* w : consumers)
    OVERLAPPROF_RETURN_IF_ERROR(w->Begin(files.size(), report_options).WithPrefix(fmt::format("report {}", w->name())));
  Progress progress("analyzing", files.size(), total_bytes);
  for (size_t i = 0; i < files.size(); ++i) {
    progress.Begin(files[i].name, sizes[i]);
    start_more();
    StatusOr<PreparedInput> in = next_rank();
    if (!in.ok()) return in.status();  // futures still in flight finish in their destructors
    const RankTrace* t = &in->trace;
    for (size_t k = 0; k < analyzers.size(); ++k) {
      Status st = analyzers[k]->AnalyzeRank(*t, i, analysis_options, std::move(in->work[k]), summary);
      if (!st.ok()) return st.WithPrefix(fmt::format("{}: analyzer {}", files[i].name, analyzers[k]->name()));
    }
    if (records && summary.current && summary.current->rank_index == i)
      records->push_back(RecordRankWindows(*t, *summary.current, i));
    if (!consumers.empty()) {
      if (!summary.current || summary.ranks.size() != i + 1)
        return MakeError(StatusCode::kInternal, "{}: the overlap analyzer did not derive this rank", files[i].name);
      for (ReportWriter* w : consumers) {
        Status st = w->ConsumeRank(*t, *summary.current, i, summary);
        if (!st.ok()) return st.WithPrefix(fmt::format("{}: report {}", files[i].name, w->name()));
      }
    }
    progress.Done();
  }  // each RankTrace is freed before the next file is read
  summary.current.reset();  // the last rank's derived data
  return pass;
}

}  // namespace

StatusOr<Summary> AnalyzeFiles(const std::vector<TraceInput>& files, const ImportOptions& import_options,
                               const AnalysisOptions& analysis_options, int jobs,
                               const std::vector<ReportWriter*>& consumers, const ReportOptions& report_options) {
  // The ranks of one job get the same windows (analyzers/cross_rank_windows.h): the first pass
  // keeps what planning needs; when the plan changes a rank's windows, a second pass analyzes
  // every input again with the planned windows (and the writers start over).
  std::vector<RankWindowRecord> records;
  OVERLAPPROF_ASSIGN_OR_RETURN(Pass pass, RunPass(files, import_options, analysis_options, jobs, consumers,
                                                  report_options, files.size() > 1 ? &records : nullptr));
  const WindowPlan plan = PlanRankWindows(records);
  records = {};
  if (plan.any_replaced()) {
    auto carried = std::make_shared<std::map<size_t, IterationInfo>>();
    for (const auto& [input, p] : plan.ranks)
      if (p.replace) carried->emplace(input, p.windows);
    AnalysisOptions again = analysis_options;
    again.carried_windows = std::move(carried);
    pass = Pass{};
    OVERLAPPROF_ASSIGN_OR_RETURN(pass, RunPass(files, import_options, again, jobs, consumers, report_options, nullptr));
  }
  Summary& summary = pass.summary;
  std::vector<std::unique_ptr<Analyzer>>& analyzers = pass.analyzers;
  for (const auto& [input, p] : plan.ranks) {
    if (input >= summary.ranks.size()) continue;
    if (p.disagreeing > 0) summary.ranks[input].stats.Add(Stat::iteration_windows_disagree, p.disagreeing);
    if (!p.notice.empty()) summary.ranks[input].notices.push_back(p.notice);
  }
  // A --step-range that names nothing is a typo, not "0 iterations": it would switch off the
  // per-iteration figures (and the gate's test) without a word.
  if (!analysis_options.step_range.empty() && !summary.ranks.empty() &&
      std::all_of(summary.ranks.begin(), summary.ranks.end(), [](const RankResult& r) { return r.iteration_count == 0; }))
    return MakeError(StatusCode::kInvalidArgument,
                     "--step-range '{}' matches no host range (NVTX or record_function, named NAME or NAME#N) in {}",
                     analysis_options.step_range, files.size() == 1 ? files[0].name : fmt::format("any of the {} inputs", files.size()));
  // Order ranks by rank number (unknown last), keeping input order among equals.
  std::vector<size_t> order(summary.ranks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    int64_t ra = summary.ranks[a].rank, rb = summary.ranks[b].rank;
    if ((ra == kUnknown) != (rb == kUnknown)) return rb == kUnknown;
    return ra < rb;
  });
  std::vector<size_t> new_index(order.size());
  std::vector<RankResult> ranks;
  for (size_t k = 0; k < order.size(); ++k) {
    new_index[order[k]] = k;
    ranks.push_back(std::move(summary.ranks[order[k]]));
  }
  summary.ranks = std::move(ranks);
  for (IterationResult& it : summary.iterations) it.rank_index = new_index[it.rank_index];
  std::stable_sort(summary.iterations.begin(), summary.iterations.end(),
                   [](const IterationResult& a, const IterationResult& b) { return a.rank_index < b.rank_index; });
  for (auto& a : analyzers) {
    Status st = a->Finish(analysis_options, summary);
    if (!st.ok()) return st.WithPrefix(fmt::format("analyzer {}", a->name()));
  }
  return summary;
}

}  // namespace overlapprof
