#include "src/cli/summary_input.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <set>
#include <sstream>
#include <unordered_set>

#include "src/common/stats.h"
#include "src/common/utf8.h"
#include "src/io/input_file.h"

namespace overlapprof {

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
const Shape kReplayShape{.keys = {{"iterations", nullptr}, {"median_error_pct", nullptr}, {"max_error_pct", nullptr}}};
const Shape kReplayList{.element = &kReplayShape};
const Shape kWhatIfShape{.keys = {{"replay", &kReplayList}}};
const Shape kSummaryShape{.keys = {{"schema", nullptr}, {"ranks", &kRankList}, {"data_quality", &kRunQuality},
                                   {"op_types", &kOpTypeList}, {"iterations", &kIterationList},
                                   {"what_if", &kWhatIfShape}}};

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
    if (auto w = s.find("what_if"); w != s.end() && !w->is_null()) OVERLAPPROF_RETURN_IF_ERROR(WhatIf(*w));
    return std::move(v_);
  }

 private:
  // what_if.replay: the modeled ranks' errors (ranks with 0 iterations were not modeled; their
  // errors are null).
  Status WhatIf(const nlohmann::json& w) {
    if (!w.is_object()) return MakeError(StatusCode::kInvalidInput, "{}: malformed summary: what_if is not an object", source_);
    auto r = w.find("replay");
    if (r == w.end() || !r->is_array()) return rd_.Malformed("what_if", "replay", r == w.end() ? "is missing" : "is not an array");
    std::vector<double> medians;
    double max = 0;
    for (size_t i = 0; i < r->size(); ++i) {
      const nlohmann::json& e = (*r)[i];
      const std::string where = fmt::format("what_if.replay[{}]", i);
      if (!e.is_object()) return MakeError(StatusCode::kInvalidInput, "{}: malformed summary: {} is not an object", source_, where);
      OVERLAPPROF_ASSIGN_OR_RETURN(int64_t iterations, rd_.Count(e, "iterations", where));
      if (iterations == 0) continue;
      double pct[2];
      const char* keys[2] = {"median_error_pct", "max_error_pct"};
      for (int k = 0; k < 2; ++k) {
        auto it = e.find(keys[k]);
        if (it == e.end() || !it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0)
          return rd_.Malformed(where, keys[k], "is not a number >= 0");
        pct[k] = it->get<double>();
      }
      medians.push_back(pct[0]);
      max = std::max(max, pct[1]);
    }
    v_.what_if_ranks = static_cast<int64_t>(medians.size());
    if (!medians.empty()) {
      std::sort(medians.begin(), medians.end());
      const size_t n = medians.size();
      v_.what_if_median_error_pct = n % 2 ? medians[n / 2] : (medians[n / 2 - 1] + medians[n / 2]) / 2;
    }
    v_.what_if_max_error_pct = max;
    return OkStatus();
  }

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

namespace {
void ListKeys(const Shape& shape, const std::string& prefix, std::vector<std::string>& out) {
  if (shape.element) ListKeys(*shape.element, prefix + "[]", out);
  for (const auto& [key, value] : shape.keys) {
    const std::string path = prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
    out.push_back(path);
    if (value) ListKeys(*value, path, out);
  }
}
}  // namespace

std::vector<std::string> SummaryKeysRead() {
  std::vector<std::string> out;
  ListKeys(kSummaryShape, "", out);
  return out;
}

StatusOr<RunView> RunViewFromSummary(const nlohmann::json& summary, const std::string& source) {
  return ReadSummary(summary.dump(), source, nullptr);
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

}  // namespace overlapprof
