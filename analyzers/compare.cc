#include "analyzers/compare.h"

#include "src/io/input_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>
#include <unordered_set>

#include "src/common/stats.h"
#include "src/common/utf8.h"

namespace overlapprof {
namespace {

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

std::string Fixed(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }

}  // namespace

namespace {

// What a reader keeps of a JSON value while the SAX parser streams it by. An object keeps the
// keys listed (each with the shape of its value; nullptr: a scalar, and a container there is
// kept as an empty one of its kind, for the reader to name what it found) or, when `all`, every
// key; an array keeps its elements when `element` is set (shaped so), or hands each one to the
// consumer as it closes and forgets it when `stream` is set. Nothing else is kept, so the memory
// of a read is what it keeps, not the document's size.
struct Shape {
  bool all = false;
  std::vector<std::pair<std::string_view, const Shape*>> keys = {};
  const Shape* element = nullptr;
  int stream = -1;  // >= 0: the consumer's id for the elements of this array
};

// A SAX handler (nlohmann::json::sax_parse) that builds the values a Shape keeps, in one pass:
// time linear in the document, memory in what is kept. A key given twice in one object keeps its
// first value and is appended to *duplicates (checked in the objects whose keys are kept; a key
// the reader does not keep is skipped whichever value it holds). Streamed array elements go to
// `deliver(id, element)`, which returns false to ignore the rest (the parse still checks the JSON).
class ShapedJsonSax {
 public:
  using json = nlohmann::json;
  using Deliver = std::function<void(int, json&)>;
  ShapedJsonSax(const Shape* root, std::vector<std::string>* duplicates, Deliver deliver)
      : root_shape_(root), duplicates_(duplicates), deliver_(std::move(deliver)) {}

  json& root() { return root_; }
  const std::string& error() const { return error_; }

  bool null() { return Scalar(nullptr); }
  bool boolean(bool b) { return Scalar(b); }
  bool number_integer(json::number_integer_t x) { return Scalar(x); }
  bool number_unsigned(json::number_unsigned_t x) { return Scalar(x); }
  bool number_float(json::number_float_t x, const json::string_t&) { return Scalar(x); }
  bool string(json::string_t& s) { return Scalar(std::move(s)); }
  bool binary(json::binary_t&) { return Scalar(nullptr); }  // not in JSON text
  bool start_object(size_t) { return Open(json::value_t::object); }
  bool start_array(size_t) { return Open(json::value_t::array); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(json::string_t& k) {
    if (skip_depth_ > 0) return true;
    Frame& f = frames_.back();
    f.next = nullptr;
    f.next_shape = nullptr;
    if (f.shape == nullptr) return true;
    if (f.shape->all) {
      if (!f.seen.insert(k).second) return Duplicate(k);
      f.next = &(*f.node)[k];
      f.next_shape = f.shape;
      return true;
    }
    for (size_t i = 0; i < f.shape->keys.size(); ++i) {
      if (f.shape->keys[i].first != k) continue;
      if (f.seen_mask & (uint64_t{1} << i)) return Duplicate(k);
      f.seen_mask |= uint64_t{1} << i;
      f.next = &(*f.node)[k];
      f.next_shape = f.shape->keys[i].second;
      return true;
    }
    return true;
  }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) {
    error_ = e.what();
    return false;
  }

 private:
  struct Frame {
    json* node = nullptr;        // the container being built
    const Shape* shape = nullptr;  // what it keeps (nullptr: nothing)
    std::unordered_set<std::string> seen;  // keys so far (shape->all)
    uint64_t seen_mask = 0;               // kept keys so far (by index in shape->keys)
    json* next = nullptr;                 // where the value of the key just read goes (nullptr: skipped)
    const Shape* next_shape = nullptr;
    json element;    // a streamed array's element being built
    int deliver = -1;  // >= 0: this container is a streamed element, delivered when it closes
  };
  struct Target {
    json* slot = nullptr;
    const Shape* shape = nullptr;
    int deliver = -1;
  };

  bool Duplicate(const std::string& k) {
    if (duplicates_ != nullptr) duplicates_->push_back(k);
    Frame& f = frames_.back();
    f.next = nullptr;
    return true;
  }
  // Where the next value goes.
  Target Next() {
    if (frames_.empty()) return {&root_, root_shape_, -1};
    Frame& f = frames_.back();
    if (f.node->is_object()) {
      Target t{f.next, f.next_shape, -1};
      f.next = nullptr;
      return t;
    }
    if (f.shape == nullptr) return {};
    if (f.shape->stream >= 0) {
      f.element = nullptr;
      return {&f.element, f.shape->element, f.shape->stream};
    }
    if (f.shape->all || f.shape->element != nullptr) {
      f.node->push_back(nullptr);
      return {&f.node->back(), f.shape->all ? f.shape : f.shape->element, -1};
    }
    return {};
  }
  template <typename T>
  bool Scalar(T&& v) {
    if (skip_depth_ > 0) return true;
    Target t = Next();
    if (t.slot == nullptr) return true;
    *t.slot = std::forward<T>(v);
    if (t.deliver >= 0) deliver_(t.deliver, *t.slot);
    return true;
  }
  bool Open(json::value_t kind) {
    if (skip_depth_ > 0) {
      ++skip_depth_;
      return true;
    }
    Target t = Next();
    if (t.slot == nullptr) {
      skip_depth_ = 1;
      return true;
    }
    *t.slot = json(kind);
    Frame& f = frames_.emplace_back();
    f.node = t.slot;
    f.shape = t.shape;
    f.deliver = t.deliver;
    return true;
  }
  bool Close() {
    if (skip_depth_ > 0) {
      --skip_depth_;
      return true;
    }
    const int deliver = frames_.back().deliver;
    json* node = frames_.back().node;
    frames_.pop_back();
    if (deliver >= 0) {
      deliver_(deliver, *node);
      *node = nullptr;
    }
    return true;
  }

  const Shape* root_shape_;
  std::vector<std::string>* duplicates_;
  Deliver deliver_;
  json root_;
  std::deque<Frame> frames_;  // a deque: a frame's `element` stays where the child frame points
  size_t skip_depth_ = 0;       // > 0: inside a container that is not kept
  std::string error_;
};

const Shape kEverything{.all = true};

}  // namespace

StatusOr<nlohmann::json> ParseJsonFirstKeyWins(std::istream& in, const std::string& source,
                                              std::vector<std::string>* duplicates) {
  ShapedJsonSax sax(&kEverything, duplicates, [](int, nlohmann::json&) {});
  if (!nlohmann::json::sax_parse(in, &sax))
    return MakeError(StatusCode::kInvalidInput, "{}: invalid JSON ({})", source, sax.error());
  return std::move(sax.root());
}

namespace {

// Reading a summary that may have been edited, truncated or forged: every figure the gate uses
// is a required non-negative integer. A string, null, float, boolean, a missing key or a
// negative value is malformed (exit 2), never read as 0: a baseline of zeros, or a NEW run whose
// lost data is cancelled by a negative counter, would let the gate pass what it should stop.
class SummaryReader {
 public:
  explicit SummaryReader(const std::string& source) : source_(source) {}

  StatusOr<int64_t> Count(const nlohmann::json& j, const char* key, const std::string& where) const {
    auto it = j.find(key);
    if (it == j.end()) return Malformed(where, key, "is missing");
    if (!it->is_number_integer()) return Malformed(where, key, fmt::format("is {}, not an integer", Kind(*it)));
    const int64_t v = it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                          ? -1
                          : it->get<int64_t>();
    if (v < 0) return Malformed(where, key, fmt::format("is negative or too large ({})", it->dump()));
    return v;
  }
  // Like Count, but null (unknown) gives -1.
  StatusOr<int64_t> CountOrNull(const nlohmann::json& j, const char* key, const std::string& where) const {
    auto it = j.find(key);
    if (it != j.end() && it->is_null()) return int64_t{-1};
    return Count(j, key, where);
  }
  // sum += v, refused when it overflows.
  Status Add(int64_t& sum, int64_t v, const char* what) const {
    if (__builtin_add_overflow(sum, v, &sum))
      return MakeError(StatusCode::kInvalidInput, "{}: malformed summary: the sum of {} overflows 64 bits", source_, what);
    return OkStatus();
  }
  Status Malformed(const std::string& where, const char* key, const std::string& what) const {
    return MakeError(StatusCode::kInvalidInput, "{}: malformed summary: {}.{} {}", source_, where, key, what);
  }
  static const char* Kind(const nlohmann::json& j) {
    if (j.is_null()) return "null";
    if (j.is_string()) return "a string";
    if (j.is_boolean()) return "a boolean";
    if (j.is_number()) return "a fraction";
    return j.is_array() ? "an array" : "an object";
  }

 private:
  const std::string& source_;
};

// What the gate reads of a summary (docs/summary-schema.md); the four lists are streamed, one
// element at a time.
enum SummaryList { kRanks, kRankCounters, kIterations, kOpTypes };
const Shape kCounterShape{.keys = {{"counter", nullptr}, {"severity", nullptr}, {"value", nullptr}}};
const Shape kCounterList{.element = &kCounterShape, .stream = kRankCounters};
const Shape kRankShape{.keys = {{"comm_ns", nullptr}, {"compute_ns", nullptr}, {"overlap_ns", nullptr},
                                {"exposed_comm_ns", nullptr}, {"iterations", nullptr}, {"iteration_source", nullptr},
                                {"rank", nullptr}, {"world_size", nullptr}, {"data_quality", &kCounterList}}};
const Shape kIterationShape{.keys = {{"warmup", nullptr}, {"overlap_ratio", nullptr}, {"exposed_comm_ns", nullptr},
                                     {"comm_ns", nullptr}, {"compute_ns", nullptr}, {"wall_ns", nullptr}}};
const Shape kOpTypeShape{.keys = {{"op", nullptr}, {"time_ns", nullptr}, {"exposed_ns", nullptr}, {"count", nullptr},
                                  {"bytes", nullptr}}};
const Shape kRunQuality{.keys = {{"errors", nullptr}}};
const Shape kRankList{.element = &kRankShape, .stream = kRanks};
const Shape kIterationList{.element = &kIterationShape, .stream = kIterations};
const Shape kOpTypeList{.element = &kOpTypeShape, .stream = kOpTypes};
const Shape kSummaryShape{.keys = {{"schema", nullptr}, {"ranks", &kRankList}, {"data_quality", &kRunQuality},
                                   {"op_types", &kOpTypeList}, {"iterations", &kIterationList}}};

// Builds a RunView from the elements of a summary's lists as the parser hands them over, then
// checks the whole (Finish). The first malformed element decides the error; later ones are not read.
class RunViewBuilder {
 public:
  explicit RunViewBuilder(const std::string& source) : source_(source), rd_(source_) {
    v_.source = SanitizeUtf8(source);  // a path of any bytes; the renderings are UTF-8
  }

  void Take(int list, nlohmann::json& j) {
    if (!error_.ok()) return;
    Status s = list == kRanks          ? Rank(j)
               : list == kRankCounters ? Counter(j)
               : list == kIterations   ? Iteration(j)
                                       : OpType(j);
    if (!s.ok()) error_ = std::move(s);
  }

  StatusOr<RunView> Finish(const nlohmann::json& s) {
    if (!s.is_object() || !s.contains("schema") || !s["schema"].is_string() ||
        s["schema"].get<std::string>().rfind("overlapprof.summary/", 0) != 0)
      return MakeError(StatusCode::kInvalidInput, "{}: not an overlapprof JSON summary", source_);
    if (s["schema"].get<std::string>() != "overlapprof.summary/1")
      return MakeError(StatusCode::kUnsupportedVersion, "{}: summary schema {} is newer than this overlapprof reads",
                       source_, s["schema"].get<std::string>());
    if (!s.contains("ranks") || !s["ranks"].is_array())
      return MakeError(StatusCode::kInvalidInput, "{}: summary without ranks", source_);
    OVERLAPPROF_RETURN_IF_ERROR(error_);
    if (v_.ranks == 0) return MakeError(StatusCode::kInvalidInput, "{}: malformed summary: no ranks", source_);
    // The run-level count of error counters (what `analyze` exits 4 on) cannot exceed what the
    // ranks list: counters removed from the ranks would hide the loss. (More listed than counted:
    // the ranks decide.)
    if (auto dq = s.find("data_quality"); dq != s.end()) {
      OVERLAPPROF_ASSIGN_OR_RETURN(int64_t errors, rd_.Count(*dq, "errors", "data_quality"));
      if (errors > error_counters_)
        return MakeError(StatusCode::kInvalidInput,
                         "{}: malformed summary: data_quality.errors is {} but the ranks list {} non-zero error counter(s)",
                         source_, errors, error_counters_);
    }
    return std::move(v_);
  }

 private:
  // A counter of the rank being read (its data_quality list comes before the rank closes). Its
  // severity is this overlapprof's (stats.def), never the file's: a summary cannot relabel lost
  // data as a warning. A counter this overlapprof does not know counts as lost data, named so.
  Status Counter(const nlohmann::json& c) {
    const std::string cwhere = fmt::format("ranks[{}].data_quality[{}]", v_.ranks, counter_index_++);
    if (!c.is_object() || !c.contains("severity") || !c["severity"].is_string())
      return MakeError(StatusCode::kInvalidInput, "{}: malformed summary: {} has no severity", source_, cwhere);
    OVERLAPPROF_ASSIGN_OR_RETURN(int64_t value, rd_.Count(c, "value", cwhere));
    const std::string name = c.contains("counter") && c["counter"].is_string() ? c["counter"].get<std::string>() : "";
    const std::optional<Stat> stat = FindStat(name);
    if (stat && GetStatInfo(*stat).severity != Severity::kError) return OkStatus();
    error_counters_ += value != 0;
    OVERLAPPROF_RETURN_IF_ERROR(rd_.Add(v_.data_lost, value, "error-severity counters"));
    lost_.push_back(stat ? fmt::format("{} = {}", name, value)
                         : fmt::format("{} = {} (a counter this overlapprof does not know: counted as lost data)",
                                       name.empty() ? "?" : name, value));
    return OkStatus();
  }

  Status Rank(const nlohmann::json& r) {
    const std::string where = fmt::format("ranks[{}]", v_.ranks);
    std::vector<std::string> lost = std::move(lost_);
    lost_.clear();
    counter_index_ = 0;
    if (!r.is_object())
      return MakeError(StatusCode::kInvalidInput, "{}: malformed summary: {} is not an object", source_, where);
    ++v_.ranks;
    for (auto [key, sum] : {std::pair{"comm_ns", &v_.comm_ns}, std::pair{"compute_ns", &v_.compute_ns},
                            std::pair{"overlap_ns", &v_.overlap_ns}, std::pair{"exposed_comm_ns", &v_.exposed_comm_ns},
                            std::pair{"iterations", &v_.iterations}}) {
      OVERLAPPROF_ASSIGN_OR_RETURN(int64_t x, rd_.Count(r, key, where));
      OVERLAPPROF_RETURN_IF_ERROR(rd_.Add(*sum, x, key));
    }
    const std::string src = r.contains("iteration_source") && r["iteration_source"].is_string()
                                ? r["iteration_source"].get<std::string>()
                                : std::string();
    v_.marked_iterations &= src == "ProfilerStep" || src == "step range";
    v_.rank_ids.push_back(r.contains("rank") && r["rank"].is_number_integer() ? std::to_string(r["rank"].get<int64_t>())
                                                                                : std::string("?"));
    if (v_.world_size < 0 && r.contains("world_size") && r["world_size"].is_number_integer())
      v_.world_size = r["world_size"].get<int64_t>();
    auto dq = r.find("data_quality");
    if (dq == r.end() || !dq->is_array())
      return rd_.Malformed(where, "data_quality", dq == r.end() ? "is missing" : "is not an array");
    for (const std::string& l : lost) v_.data_lost_counters.push_back(fmt::format("rank {}: {}", v_.rank_ids.back(), l));
    return OkStatus();
  }

  Status OpType(const nlohmann::json& o) {
    const std::string where = fmt::format("op_types[{}]", op_index_++);
    if (!o.is_object() || !o.contains("op") || !o["op"].is_string())
      return MakeError(StatusCode::kInvalidInput, "{}: malformed summary: {} has no op name", source_, where);
    const std::string op = o["op"].get<std::string>();
    OVERLAPPROF_ASSIGN_OR_RETURN(int64_t time, rd_.Count(o, "time_ns", where));
    OVERLAPPROF_ASSIGN_OR_RETURN(int64_t exposed, rd_.Count(o, "exposed_ns", where));
    OVERLAPPROF_ASSIGN_OR_RETURN(int64_t count, rd_.Count(o, "count", where));
    OVERLAPPROF_ASSIGN_OR_RETURN(int64_t bytes, rd_.CountOrNull(o, "bytes", where));
    auto& [t, e] = v_.op_time_exposed_ns[op];
    OVERLAPPROF_RETURN_IF_ERROR(rd_.Add(t, time, "op_types[].time_ns"));
    OVERLAPPROF_RETURN_IF_ERROR(rd_.Add(e, exposed, "op_types[].exposed_ns"));
    auto& [n, b] = v_.op_count_bytes[op];
    OVERLAPPROF_RETURN_IF_ERROR(rd_.Add(n, count, "op_types[].count"));
    if (b >= 0 && bytes >= 0) OVERLAPPROF_RETURN_IF_ERROR(rd_.Add(b, bytes, "op_types[].bytes"));
    else b = -1;  // some size unknown
    return OkStatus();
  }

  Status Iteration(const nlohmann::json& i) {
    const std::string where = fmt::format("iterations[{}]", iteration_index_++);
    if (!i.is_object())
      return MakeError(StatusCode::kInvalidInput, "{}: malformed summary: {} is not an object", source_, where);
    // Warm-up iterations (compilation, autotuning, DDP's first bucket layout) are not the
    // steady state the gate compares.
    if (auto w = i.find("warmup"); w != i.end() && w->is_boolean() && w->get<bool>()) {
      ++v_.warmup_iterations;
      return OkStatus();
    }
    if (auto r = i.find("overlap_ratio"); r != i.end() && !r->is_null()) {
      if (!r->is_number() || !std::isfinite(r->get<double>()) || r->get<double>() < 0 || r->get<double>() > 1)
        return rd_.Malformed(where, "overlap_ratio", "is not null nor a number in [0, 1]");
      v_.iter_overlap_ratio.push_back(r->get<double>());
    }
    for (auto [key, out] : {std::pair{"exposed_comm_ns", &v_.iter_exposed_ns}, std::pair{"comm_ns", &v_.iter_comm_ns},
                            std::pair{"compute_ns", &v_.iter_compute_ns}, std::pair{"wall_ns", &v_.iter_wall_ns}}) {
      OVERLAPPROF_ASSIGN_OR_RETURN(int64_t x, rd_.Count(i, key, where));
      out->push_back(static_cast<double>(x));
    }
    return OkStatus();
  }

  const std::string source_;
  const SummaryReader rd_;
  RunView v_;
  Status error_ = OkStatus();
  int64_t error_counters_ = 0;  // non-zero error-severity counters, to check against data_quality.errors
  std::vector<std::string> lost_;  // the rank being read: its error-severity counters ("name = value")
  size_t counter_index_ = 0, op_index_ = 0, iteration_index_ = 0;
};

}  // namespace

StatusOr<RunView> ReadSummary(std::string_view text, const std::string& source, std::vector<std::string>* duplicates) {
  RunViewBuilder builder(source);
  ShapedJsonSax sax(&kSummaryShape, duplicates, [&](int list, nlohmann::json& j) { builder.Take(list, j); });
  if (!nlohmann::json::sax_parse(text.begin(), text.end(), &sax))
    return MakeError(StatusCode::kInvalidInput, "{}: invalid JSON ({})", source, sax.error());
  return builder.Finish(sax.root());
}

StatusOr<RunView> RunViewFromSummary(const nlohmann::json& summary, const std::string& source) {
  return ReadSummary(summary.dump(), source, nullptr);
}

double MannWhitneyP(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n1 = a.size(), n2 = b.size(), n = n1 + n2;
  if (n1 == 0 || n2 == 0) return 1.0;
  std::vector<std::pair<double, int>> all;
  all.reserve(n);
  for (double x : a) all.emplace_back(x, 0);
  for (double x : b) all.emplace_back(x, 1);
  std::sort(all.begin(), all.end(), [](const auto& l, const auto& r) { return l.first < r.first; });
  double rank_sum_a = 0, tie_term = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && all[j].first == all[i].first) ++j;
    const double avg_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2;  // ranks i+1..j
    for (size_t k = i; k < j; ++k)
      if (all[k].second == 0) rank_sum_a += avg_rank;
    const double t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    i = j;
  }
  const double dn1 = static_cast<double>(n1), dn2 = static_cast<double>(n2), dn = static_cast<double>(n);
  const double u = rank_sum_a - dn1 * (dn1 + 1) / 2;
  const double mean = dn1 * dn2 / 2;
  const double var = dn1 * dn2 / 12 * ((dn + 1) - tie_term / (dn * (dn - 1)));
  if (var <= 0) return 1.0;
  const double diff = std::fabs(u - mean);
  const double z = std::max(0.0, diff - 0.5) / std::sqrt(var);  // continuity correction
  return std::min(1.0, std::erfc(z / std::sqrt(2.0)));
}

StatusOr<Policy> LoadPolicy(const std::string& path, Policy p) {
  // Read as the traces are (src/io/input_file.h): opened without blocking, a FIFO, socket or
  // device refused at once instead of waited on.
  StatusOr<InputBuffer> buf = ReadInputFile(path);
  if (!buf.ok())
    return MakeError(buf.status().code() == StatusCode::kNotFound ? StatusCode::kNotFound : StatusCode::kInvalidInput,
                     "{}: cannot read the policy file: {}", path, buf.status().message());
  std::istringstream f(std::string(buf->data(), buf->size()));
  std::vector<std::string> duplicates;
  StatusOr<nlohmann::json> parsed = ParseJsonFirstKeyWins(f, path, &duplicates);
  if (!parsed.ok()) return parsed.status();
  const nlohmann::json& j = *parsed;
  for (const std::string& d : duplicates)
    p.warnings.push_back(fmt::format("{}: key \"{}\" given twice: the first value is used", path, d));
  if (!j.is_object())
    return MakeError(StatusCode::kInvalidInput, "{}: the policy must be a JSON object", path);
  for (const auto& [key, value] : j.items()) {
    if (key == "comm_kernel" || key == "not_comm") {
      std::vector<std::string>& out = key == "comm_kernel" ? p.comm_kernel : p.not_comm;
      if (value.is_string()) {
        out.push_back(value.get<std::string>());
        continue;
      }
      bool ok = value.is_array();
      if (ok)
        for (const auto& v : value) ok = ok && v.is_string();
      if (!ok) return MakeError(StatusCode::kInvalidInput, "{}: {} must be a regex or a list of regexes", path, key);
      for (const auto& v : value) out.push_back(v.get<std::string>());
      continue;
    }
    if (!value.is_number())
      return MakeError(StatusCode::kInvalidInput, "{}: {} must be a number", path, key);
    double x = value.get<double>();
    if (x < 0) return MakeError(StatusCode::kInvalidInput, "{}: {} must not be negative", path, key);
    if (key == "max_step_time_increase_pct") p.max_step_time_increase_pct = x;
    else if (key == "min_effect_ms") p.min_effect_ms = x;
    else if (key == "op_mix_tolerance_pct") p.op_mix_tolerance_pct = x;
    else if (key == "max_overlap_drop_pp") p.max_overlap_drop_pp = x;
    else if (key == "max_exposed_comm_increase_pct") p.max_exposed_comm_increase_pct = x;
    else if (key == "max_data_loss") p.max_data_loss = static_cast<int64_t>(x);
    else if (key == "alpha" && x > 0 && x < 1) p.alpha = x;
    else
      return MakeError(StatusCode::kInvalidInput,
                       "{}: unknown or invalid key '{}' (known: max_step_time_increase_pct, max_overlap_drop_pp, "
                       "max_exposed_comm_increase_pct, max_data_loss, min_effect_ms, op_mix_tolerance_pct, alpha in (0,1), comm_kernel, not_comm)",
                       path, key);
  }
  return p;
}

static std::string ChangeText(const MetricResult& m) {
  // A relative change from zero has no percentage: say what happened instead.
  if (m.change_unit == "%" && m.base == 0 && m.next != 0) return "new";
  return fmt::format("{:+.2f} {}", m.change, m.change_unit);
}

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kUnchanged: return "unchanged";
    case Verdict::kImproved: return "improved";
    case Verdict::kRegressed: return "regressed";
    case Verdict::kInconclusive: return "inconclusive";
  }
  return "?";
}

namespace {

// `higher_is_better`: the direction of an improvement. `relative`: change in % of base
// (else in the unit's own points, for ratios).
MetricResult Decide(std::string name, std::string unit, bool gated, double base, double next, bool relative,
                    bool higher_is_better, double threshold, const std::vector<double>& sb,
                    const std::vector<double>& sn, double alpha) {
  MetricResult m;
  m.name = std::move(name);
  m.unit = std::move(unit);
  m.gated = gated;
  m.base = base;
  m.next = next;
  m.delta = next - base;
  m.threshold = threshold;
  m.change_unit = relative ? "%" : "pp";
  if (relative)
    m.change = base != 0 ? 100 * (next - base) / std::fabs(base) : (next == 0 ? 0 : (next > 0 ? 1e9 : -1e9));
  else
    m.change = next - base;
  m.n_base = sb.size();
  m.n_next = sn.size();
  const bool better = higher_is_better ? m.change > 0 : m.change < 0;
  const bool big = std::fabs(m.change) >= threshold && m.change != 0;
  const Verdict direction = better ? Verdict::kImproved : Verdict::kRegressed;
  const std::string change_text = ChangeText(m);
  if (sb.size() >= Policy::kMinSamples && sn.size() >= Policy::kMinSamples) {
    m.p = MannWhitneyP(sb, sn);
    if (!big) {
      m.verdict = Verdict::kUnchanged;
      m.why = fmt::format("{} is within the threshold of {} {}", change_text, threshold, m.change_unit);
    } else if (*m.p < alpha) {
      m.verdict = direction;
      m.why = fmt::format("{} (threshold {} {}) and significant: Mann-Whitney p = {:.3g} < {} over {} vs {} iterations",
                          change_text, threshold, m.change_unit, *m.p, alpha, sb.size(), sn.size());
    } else {
      m.verdict = Verdict::kInconclusive;
      m.why = fmt::format("{} exceeds {} {} but is not significant (Mann-Whitney p = {:.3g} >= {}): too noisy to decide",
                          change_text, threshold, m.change_unit, *m.p, alpha);
    }
  } else {
    m.verdict = big ? direction : Verdict::kUnchanged;
    m.why = fmt::format("{} against a threshold of {} {}; no statistical test possible ({} vs {} iterations, "
                        "{} needed on each side)",
                        change_text, threshold, m.change_unit, sb.size(), sn.size(), Policy::kMinSamples);
  }
  return m;
}

std::vector<double> Scaled(const std::vector<double>& v, double k) {
  std::vector<double> out(v);
  for (double& x : out) x *= k;
  return out;
}

// Per-iteration mean when there are iterations, else the per-rank mean of the whole trace.
double PerIteration(const RunView& v, const std::vector<double>& samples, int64_t total_ns) {
  if (!samples.empty()) return Mean(samples);
  return v.ranks > 0 ? static_cast<double>(total_ns) / static_cast<double>(v.ranks) : 0;
}

// The absolute floor: a gated change whose effect per iteration (`effect_ms`) is below
// p.min_effect_ms or 1% of the base step time is unchanged, whatever its p-value.
void ApplyFloor(MetricResult& m, double effect_ms, double step_ms, const Policy& p) {
  if (m.verdict == Verdict::kUnchanged) return;
  const double floor_ms = std::max(p.min_effect_ms, 0.01 * step_ms);
  if (std::fabs(effect_ms) >= floor_ms) return;
  m.verdict = Verdict::kUnchanged;
  m.why = fmt::format("{} but only {:.3f} ms per iteration: below the minimum effect of {:.3f} ms (the larger of "
                      "--min-effect-ms {} and 1% of the {:.2f} ms step)",
                      ChangeText(m), std::fabs(effect_ms), floor_ms, p.min_effect_ms, step_ms);
}

// A per-iteration metric with no steady iteration on a side compares per-rank figures of the
// whole trace, which grow with the number of steps the trace holds: a move beyond the threshold
// is then inconclusive, never regressed or improved (docs/ci-gate.md, "Without iterations").
void WithoutIterations(MetricResult& m, const RunView& b, const RunView& n, bool has_b, bool has_n) {
  if (has_b && has_n) return;
  if (m.verdict != Verdict::kRegressed && m.verdict != Verdict::kImproved) return;
  m.verdict = Verdict::kInconclusive;
  const char* side = !has_b && !has_n ? "neither run has" : !has_b ? "the base run has no" : "the new run has no";
  m.why += fmt::format("; inconclusive: {} steady iterations ({} vs {}), so these are whole-trace figures per rank, "
                       "which depend on how many steps each trace holds (mark steps: ProfilerStep#N, or --step-range "
                       "NAME)",
                       side, b.iterations - b.warmup_iterations, n.iterations - n.warmup_iterations);
}

}  // namespace

Comparison Compare(const RunView& b, const RunView& n, const Policy& p) {
  Comparison c;
  constexpr double kMs = 1e-6;
  const double exposed_b = PerIteration(b, b.iter_exposed_ns, b.exposed_comm_ns) * kMs;
  const double exposed_n = PerIteration(n, n.iter_exposed_ns, n.exposed_comm_ns) * kMs;
  // Step time: only with steady iterations on both sides (a whole trace's length is no step).
  const bool steps = !b.iter_wall_ns.empty() && !n.iter_wall_ns.empty();
  const double step_b = Mean(b.iter_wall_ns) * kMs, step_n = Mean(n.iter_wall_ns) * kMs;
  if (steps) {
    // Gated only on marked iterations (ProfilerStep, --step-range): windows detected from the
    // communication pattern may be cut differently in the two runs (another period), and a
    // "step" of a different cut is no step time.
    const bool marked = b.marked_iterations && n.marked_iterations;
    MetricResult m = Decide("step_time", "ms", marked, step_b, step_n, true, false, p.max_step_time_increase_pct,
                            Scaled(b.iter_wall_ns, kMs), Scaled(n.iter_wall_ns, kMs), p.alpha);
    ApplyFloor(m, step_n - step_b, step_b, p);
    if (!marked) m.why += "; not gated: iterations detected from the communication pattern, not marked (ProfilerStep#N, --step-range)";
    c.metrics.push_back(std::move(m));
  }
  auto ratio = [](const RunView& v) { return v.comm_ns > 0 ? 100.0 * static_cast<double>(v.overlap_ns) / static_cast<double>(v.comm_ns) : 0.0; };
  MetricResult overlap = Decide("overlap_ratio", "%", true, ratio(b), ratio(n), false, true, p.max_overlap_drop_pp,
                                Scaled(b.iter_overlap_ratio, 100), Scaled(n.iter_overlap_ratio, 100), p.alpha);
  // The overlap ratio's effect in time is the change of exposed communication it stands for.
  if (steps) ApplyFloor(overlap, exposed_n - exposed_b, step_b, p);
  c.metrics.push_back(std::move(overlap));
  MetricResult exposed = Decide("exposed_comm_per_iter", "ms", true, exposed_b, exposed_n, true, false,
                                p.max_exposed_comm_increase_pct, Scaled(b.iter_exposed_ns, kMs),
                                Scaled(n.iter_exposed_ns, kMs), p.alpha);
  if (steps) ApplyFloor(exposed, exposed_n - exposed_b, step_b, p);
  else ApplyFloor(exposed, exposed_n - exposed_b, 0, p);
  const bool iters_b = !b.iter_exposed_ns.empty(), iters_n = !n.iter_exposed_ns.empty();
  WithoutIterations(exposed, b, n, iters_b, iters_n);
  c.metrics.push_back(std::move(exposed));
  c.metrics.push_back(Decide("comm_per_iter", "ms", false, PerIteration(b, b.iter_comm_ns, b.comm_ns) * kMs,
                             PerIteration(n, n.iter_comm_ns, n.comm_ns) * kMs, true, false, p.info_threshold_pct,
                             Scaled(b.iter_comm_ns, kMs), Scaled(n.iter_comm_ns, kMs), p.alpha));
  WithoutIterations(c.metrics.back(), b, n, iters_b, iters_n);
  c.metrics.push_back(Decide("compute_per_iter", "ms", false, PerIteration(b, b.iter_compute_ns, b.compute_ns) * kMs,
                             PerIteration(n, n.iter_compute_ns, n.compute_ns) * kMs, true, false, p.info_threshold_pct,
                             Scaled(b.iter_compute_ns, kMs), Scaled(n.iter_compute_ns, kMs), p.alpha));
  WithoutIterations(c.metrics.back(), b, n, iters_b, iters_n);
  // Exposed time per op type, per iteration, for information. The summary's op_types cover the
  // whole trace (warm-up and the edges included), so each op type's share of that exposed time
  // is applied to the gated exposed figure above: the rows then use the same (steady) iterations
  // as the gated metrics and never exceed it.
  auto per_op = [&](const RunView& v, const std::string& op, double exposed_per_iter) {
    __int128 total = 0;  // of non-negative 64-bit sums: cannot overflow
    for (const auto& entry : v.op_time_exposed_ns) total += entry.second.second;
    auto it = v.op_time_exposed_ns.find(op);
    if (it == v.op_time_exposed_ns.end() || total <= 0) return 0.0;
    return exposed_per_iter * static_cast<double>(it->second.second) / static_cast<double>(total);
  };
  std::set<std::string> ops;
  for (const auto& entry : b.op_time_exposed_ns) ops.insert(entry.first);
  for (const auto& entry : n.op_time_exposed_ns) ops.insert(entry.first);
  for (const std::string& op : ops) {
    c.metrics.push_back(Decide("exposed_" + op + "_per_iter", "ms", false, per_op(b, op, exposed_b),
                               per_op(n, op, exposed_n), true, false, p.info_threshold_pct, {}, {}, p.alpha));
    WithoutIterations(c.metrics.back(), b, n, iters_b, iters_n);
  }
  for (const MetricResult& m : c.metrics) {
    if (!m.gated) continue;
    if (m.verdict == Verdict::kRegressed) c.gate = Verdict::kRegressed;
    else if (m.verdict == Verdict::kInconclusive && c.gate != Verdict::kRegressed) c.gate = Verdict::kInconclusive;
    else if (m.verdict == Verdict::kImproved && c.gate == Verdict::kUnchanged) c.gate = Verdict::kImproved;
  }
  if (n.data_lost > p.max_data_loss) {
    c.data_lost = true;
    std::string list;
    for (const std::string& s : n.data_lost_counters) list += (list.empty() ? "" : "; ") + s;
    c.data_lost_why = fmt::format("the new run lost data: error-severity counters total {} > allowed {} ({})",
                                  n.data_lost, p.max_data_loss, list);
  }
  return c;
}

std::vector<std::string> Differences(const RunView& b, const RunView& n, const Policy& p) {
  std::vector<std::string> d;
  if (b.world_size >= 0 && n.world_size >= 0 && b.world_size != n.world_size)
    d.push_back(fmt::format("world size {} vs {}", b.world_size, n.world_size));
  auto join = [](const std::vector<std::string>& v) {
    std::string o;
    for (const std::string& x : v) o += (o.empty() ? "" : ",") + x;
    return o;
  };
  std::vector<std::string> rb = b.rank_ids, rn = n.rank_ids;
  std::sort(rb.begin(), rb.end());
  std::sort(rn.begin(), rn.end());
  if (rb.size() == 1 && rn.size() == 1 && rb != rn)
    d.push_back(fmt::format("this compares rank {} of the base with rank {} of the new run, another rank", rb[0], rn[0]));
  else if (rb != rn)
    d.push_back(fmt::format("rank set {} ({} rank(s)) vs {} ({} rank(s))", join(rb), rb.size(), join(rn), rn.size()));
  // Op mix, per iteration (per rank when there are no iterations).
  const bool per_iteration = b.marked_iterations && n.marked_iterations && b.iterations > 0 && n.iterations > 0;
  const char* unit = per_iteration ? "iteration" : "rank";
  auto per = [&](const RunView& v, int64_t x) {
    const double div = per_iteration ? static_cast<double>(v.iterations) : static_cast<double>(std::max<int64_t>(1, v.ranks));
    return static_cast<double>(x) / div;
  };
  auto differ = [&](double x, double y) {
    const double m = std::max(std::fabs(x), std::fabs(y));
    return m > 0 && 100 * std::fabs(x - y) / m > p.op_mix_tolerance_pct;
  };
  std::set<std::string> ops;
  for (const auto& e : b.op_count_bytes) ops.insert(e.first);
  for (const auto& e : n.op_count_bytes) ops.insert(e.first);
  for (const std::string& op : ops) {
    auto ib = b.op_count_bytes.find(op), in = n.op_count_bytes.find(op);
    const std::pair<int64_t, int64_t> zero{0, 0};
    const auto& xb = ib == b.op_count_bytes.end() ? zero : ib->second;
    const auto& xn = in == n.op_count_bytes.end() ? zero : in->second;
    if (xb.first == 0 || xn.first == 0) {
      if (xb.first != xn.first) d.push_back(fmt::format("{} only in the {} run", op, xb.first ? "base" : "new"));
      continue;
    }
    const double cb = per(b, xb.first), cn = per(n, xn.first);
    if (differ(cb, cn)) {
      d.push_back(fmt::format("{} ops per {} {:.1f} vs {:.1f}", op, unit, cb, cn));
    } else if (xb.second >= 0 && xn.second >= 0 && differ(per(b, xb.second), per(n, xn.second))) {
      d.push_back(fmt::format("{} bytes per {} {:.0f} vs {:.0f}", op, unit, per(b, xb.second), per(n, xn.second)));
    }
  }
  return d;
}

std::string RenderComparisonText(const Comparison& c, const RunView& b, const RunView& n) {
  std::ostringstream o;
  // Text from the inputs (paths, op and counter names) is escaped for the terminal.
  const auto t = [](const std::string& s) { return EscapeForTerminal(s); };
  o << "base: " << t(b.source) << " (" << b.ranks << " rank(s), " << b.iterations << " iteration(s))\n";
  o << "new:  " << t(n.source) << " (" << n.ranks << " rank(s), " << n.iterations << " iteration(s))\n";
  for (const std::string& note : c.notes) o << "note: " << t(note) << "\n";
  o << "\n";
  o << fmt::format("{:<34} {:>12} {:>12} {:>12} {:>10} {:>8}  {}\n", "metric", "base", "new", "change", "p", "gated",
                   "verdict");
  for (const MetricResult& m : c.metrics) {
    o << fmt::format("{:<34} {:>12} {:>12} {:>12} {:>10} {:>8}  {}\n", t(m.name) + " (" + m.unit + ")", Fixed(m.base, 2),
                     Fixed(m.next, 2), ChangeText(m),
                     m.p ? fmt::format("{:.3g}", *m.p) : std::string("-"), m.gated ? "yes" : "no", VerdictName(m.verdict));
  }
  o << "\n";
  for (const MetricResult& m : c.metrics) o << t(m.name) << ": " << VerdictName(m.verdict) << ": " << t(m.why) << "\n";
  if (c.data_lost) o << "data quality: " << t(c.data_lost_why) << "\n";
  return o.str();
}

namespace {
// Text from the inputs (paths, op and counter names) as literal Markdown: the characters that
// can open markup anywhere in a line (emphasis, links, images, HTML, code spans, table cells,
// strike-through, entities) are backslash-escaped and line breaks become spaces, so a hostile
// name cannot add rows, links, HTML or lines to a CI summary. (Intraword `_` is literal in
// GitHub-flavoured Markdown; the text never starts a line, so `#`, `-`, `+` need nothing.)
std::string MdEscape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char ch : s) {
    if (ch == '\n' || ch == '\r') {
      o += ' ';
      continue;
    }
    if (std::strchr("\\`*[]()<>!|~&", ch) != nullptr && ch != '\0') o += '\\';
    o += ch;
  }
  return o;
}
}  // namespace

std::string RenderComparisonMarkdown(const Comparison& c, const RunView& b, const RunView& n,
                                     const std::string& command) {
  std::ostringstream o;
  const char* icon = c.data_lost || c.gate == Verdict::kRegressed ? "❌"
                     : c.gate == Verdict::kInconclusive          ? "⚠️"
                                                                 : "✅";
  o << "### " << icon << " overlapprof " << command << ": " << (c.data_lost ? "data lost" : VerdictName(c.gate))
    << "\n\n";
  for (const std::string& note : c.notes) o << "> note: " << MdEscape(note) << "\n\n";
  o << "| metric | base | new | change | p | gated | verdict |\n|---|---:|---:|---:|---:|:-:|---|\n";
  for (const MetricResult& m : c.metrics)
    o << fmt::format("| {} ({}) | {} | {} | {} | {} | {} | {} |\n", MdEscape(m.name), m.unit, Fixed(m.base, 2),
                     Fixed(m.next, 2), ChangeText(m), m.p ? fmt::format("{:.3g}", *m.p) : std::string("–"),
                     m.gated ? "yes" : "no", VerdictName(m.verdict));
  o << "\n";
  for (const MetricResult& m : c.metrics)
    if (m.gated) o << "- **" << MdEscape(m.name) << "**: " << MdEscape(m.why) << "\n";
  if (c.data_lost) o << "- **data quality**: " << MdEscape(c.data_lost_why) << "\n";
  o << "\nbase: " << MdEscape(b.source) << " (" << b.iterations << " iterations), new: " << MdEscape(n.source) << " ("
    << n.iterations << " iterations)\n";
  return o.str();
}

namespace {
// Also valid XML 1.0 text: invalid UTF-8 and the control characters XML forbids become U+FFFD.
std::string XmlEscape(const std::string& raw) {
  const std::string s = SanitizeUtf8(raw);
  std::string o;
  for (char ch : s) {
    if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') {
      o += "\xEF\xBF\xBD";
      continue;
    }
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}
}  // namespace

std::string RenderComparisonJUnit(const Comparison& c, const RunView&, const RunView&) {
  std::vector<const MetricResult*> gated;
  for (const MetricResult& m : c.metrics)
    if (m.gated) gated.push_back(&m);
  int failures = c.data_lost ? 1 : 0, skipped = 0;
  for (const MetricResult* m : gated) {
    if (m->verdict == Verdict::kRegressed) ++failures;
    if (m->verdict == Verdict::kInconclusive) ++skipped;
  }
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << fmt::format("<testsuite name=\"overlapprof check\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">\n",
                   gated.size() + 1, failures, skipped);
  for (const MetricResult* m : gated) {
    o << fmt::format("  <testcase classname=\"overlapprof.check\" name=\"{}\">\n", XmlEscape(m->name));
    if (m->verdict == Verdict::kRegressed)
      o << fmt::format("    <failure message=\"regressed\">{}</failure>\n", XmlEscape(m->why));
    else if (m->verdict == Verdict::kInconclusive)
      o << fmt::format("    <skipped message=\"inconclusive\">{}</skipped>\n", XmlEscape(m->why));
    else
      o << fmt::format("    <system-out>{}: {}</system-out>\n", VerdictName(m->verdict), XmlEscape(m->why));
    o << "  </testcase>\n";
  }
  o << "  <testcase classname=\"overlapprof.check\" name=\"data_quality\">\n";
  if (c.data_lost) o << fmt::format("    <failure message=\"data lost\">{}</failure>\n", XmlEscape(c.data_lost_why));
  o << "  </testcase>\n</testsuite>\n";
  return o.str();
}

}  // namespace overlapprof
