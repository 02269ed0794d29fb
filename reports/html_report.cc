// The self-contained HTML report (docs/html-report.md). The C++ side writes two JSON blobs into
// the page: the JSON summary itself and the per-rank timeline unions (down-sampled to a bounded
// size); the page's script renders everything from them, so the page computes no figure of its
// own. The page itself (markup, stylesheet, scripts) is reports/html/, embedded at build time by
// cmake/EmbedAssets.cmake into kHtmlPage: the page cut where the two blobs go.
#include "reports/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <exception>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "analyzers/overlap.h"
#include "overlapprof/html_page.h"  // generated from reports/html/page.html
#include "reports/report.h"

namespace overlapprof {
namespace {

// reports/html/page.html has two data slots, {{data summary}} then {{data timeline}}: kHtmlPage[0]
// is the page up to the summary blob, [1] between the blobs, [2] the rest.
static_assert(std::size(kHtmlPageSlots) == 2 && kHtmlPageSlots[0] == "summary" && kHtmlPageSlots[1] == "timeline",
              "reports/html/page.html must have the slots {{data summary}} and {{data timeline}}, in this order");

// JSON text that is safe inside a <script> element: '<' occurs only inside JSON strings, and
// written as \u003c it can neither end the element ("</script>") nor open a comment ("<!--").
std::string ScriptSafe(std::string json) {
  if (json.find('<') == std::string::npos) return json;
  std::string out;
  out.reserve(json.size() + 64);
  size_t from = 0;
  for (size_t at; (at = json.find('<', from)) != std::string::npos; from = at + 1) {
    out.append(json, from, at - from);
    out += "\\u003c";
  }
  out.append(json, from, std::string::npos);
  return out;
}

// Invalid UTF-8 (kernel names, paths) is replaced rather than thrown on.
std::string Dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string DumpDocument(const SummaryDocument& doc) {
  std::string out;
  DumpSummaryDocument(doc, -1, nlohmann::ordered_json::error_handler_t::replace, out);
  return out;
}

std::string Quote(std::string_view s) { return ScriptSafe(Dump(nlohmann::ordered_json(std::string(s)))); }

// One lane: {"n": exact intervals, "gap_ns": gaps closed (0 = exact), "d": [gap, length, ...],
// "b": [busy, ...] (down-sampled lanes only)}; each gap from the previous interval's end (the
// first from `base`), so the numbers are short.
void WriteLane(std::ostream& out, std::string_view name, size_t exact, const DownSampled& ds, int64_t base) {
  fmt::memory_buffer buf;
  fmt::format_to(std::back_inserter(buf), "\"{}\":{{\"n\":{},\"gap_ns\":{},\"d\":[", name, exact, ds.gap_ns);
  int64_t prev = base;
  for (size_t i = 0; i < ds.intervals.size(); ++i) {
    const Interval& iv = ds.intervals[i];
    fmt::format_to(std::back_inserter(buf), "{}{},{}", i ? "," : "", iv.start - prev, iv.end - iv.start);
    prev = iv.end;
  }
  buf.push_back(']');
  if (ds.gap_ns > 0) {  // merged: the exact busy ns inside each interval
    fmt::format_to(std::back_inserter(buf), ",\"b\":[");
    for (size_t i = 0; i < ds.busy.size(); ++i) fmt::format_to(std::back_inserter(buf), "{}{}", i ? "," : "", ds.busy[i]);
    buf.push_back(']');
  }
  buf.push_back('}');
  out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
}

// What the page draws of one rank: its four lanes, down-sampled when the rank is taken in
// (bounded: HtmlLaneLimit intervals per lane).
struct RankTimeline {
  size_t input_index = 0;
  int64_t rank = kUnknown;
  std::string source;
  bool any = false;
  static constexpr size_t kLanes = 4;
  size_t exact[kLanes] = {};
  DownSampled lanes[kLanes];
  // Its communication ops, for the timeline's hover (the first `op_limit` by start): times in ns.
  struct Op {
    int64_t start = 0, end = 0, exposed = 0, bytes = kUnknown, seq = kUnknown;
    size_t name = 0;  // index into op_names
  };
  size_t ops_total = 0;
  std::vector<Op> ops;
  std::vector<std::string> op_names;
};
constexpr const char* kLaneNames[RankTimeline::kLanes] = {"compute", "comm", "memory", "overlap"};

// Orders ranks as the summary will be (rank ascending, unknown last, then input order).
bool ShownBefore(int64_t rank_a, size_t input_a, int64_t rank_b, size_t input_b) {
  if ((rank_a == kUnknown) != (rank_b == kUnknown)) return rank_b == kUnknown;
  if (rank_a != rank_b) return rank_a < rank_b;
  return input_a < input_b;
}

class HtmlReport : public ReportWriter {
 public:
  std::string_view name() const override { return "html"; }
  std::string_view description() const override {
    return "self-contained HTML report (opens offline in a browser; docs/html-report.md)";
  }

  Status Begin(size_t inputs, const ReportOptions&) override {
    shown_ = std::min(inputs, kHtmlMaxTimelineRanks);
    limit_ = HtmlLaneLimit(shown_);
    return OkStatus();
  }

  // Keeps the timelines of the ranks that will be the first kHtmlMaxTimelineRanks in summary
  // order: when one more arrives, the one that sorts last is dropped.
  Status ConsumeRank(const RankTrace& trace, const RankDerived& derived, size_t rank_index,
                     const Summary& summary) override {
    if (shown_ == 0) return OkStatus();
    const RankResult& r = summary.ranks[rank_index];
    if (timelines_.size() == shown_) {
      auto last = std::max_element(timelines_.begin(), timelines_.end(), [](const RankTimeline& a, const RankTimeline& b) {
        return ShownBefore(a.rank, a.input_index, b.rank, b.input_index);
      });
      if (!ShownBefore(r.rank, r.input_index, last->rank, last->input_index)) return OkStatus();
      timelines_.erase(last);
    }
    RankTimeline tl;
    tl.input_index = r.input_index;
    tl.rank = r.rank;
    tl.source = r.source_path;
    tl.any = derived.sets.any_activity;
    const IntervalSet* sets[RankTimeline::kLanes] = {&derived.sets.compute, &derived.sets.comm, &derived.sets.memory,
                                                     &derived.sets.overlap};
    for (size_t l = 0; l < RankTimeline::kLanes; ++l) {
      tl.exact[l] = sets[l]->intervals().size();
      tl.lanes[l] = DownSampleIntervals(sets[l]->intervals(), limit_);
    }
    tl.ops_total = derived.ops.size();
    std::unordered_map<std::string, size_t> name_index;
    for (size_t i = 0; i < derived.ops.size() && i < limit_; ++i) {
      const OpSpan& o = derived.ops[i];
      RankTimeline::Op op;
      op.start = o.start_ns;
      op.end = o.end_ns;
      op.exposed = o.exposed_ns();
      op.bytes = o.bytes;
      if (o.op < trace.comm_ops.size()) op.seq = trace.comm_ops[o.op].seq;
      auto [it, fresh] = name_index.try_emplace(std::string(CollectiveName(o.collective)),
                                                tl.op_names.size());
      if (fresh) tl.op_names.push_back(it->first);
      op.name = it->second;
      tl.ops.push_back(op);
    }
    timelines_.push_back(std::move(tl));
    return OkStatus();
  }

  Status Write(const Summary& summary, const ReportOptions& options, std::ostream& out) override {
    try {
      return WriteHtml(summary, options, out);
    } catch (const std::exception& e) {  // nlohmann or allocation: nothing may escape as an exception
      return MakeError(StatusCode::kInternal, "html report: {}", e.what());
    }
  }

 private:
  Status WriteHtml(const Summary& summary, const ReportOptions& options, std::ostream& out);

  size_t shown_ = 0, limit_ = 0;
  std::vector<RankTimeline> timelines_;
};

Status HtmlReport::WriteHtml(const Summary& summary, const ReportOptions& options, std::ostream& out) {
  // The time origin: the earliest activity or iteration of any rank (as the Chrome trace's).
  int64_t base = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  for (const RankResult& r : summary.ranks)
    if (r.whole.end_ns > r.whole.start_ns || r.whole.start_ns > 0) {
      base = std::min(base, r.whole.start_ns);
      last = std::max(last, r.whole.end_ns);
    }
  for (const IterationResult& it : summary.iterations) {
    base = std::min(base, it.figures.start_ns);
    last = std::max(last, it.figures.end_ns);
  }
  if (base == std::numeric_limits<int64_t>::max()) base = last = 0;

  out << kHtmlPage[0]
      << ScriptSafe(DumpDocument(options.summary_doc ? *options.summary_doc : BuildSummaryDocument(summary)))
      << kHtmlPage[1];

  const size_t shown = std::min(summary.ranks.size(), kHtmlMaxTimelineRanks);
  const size_t limit = HtmlLaneLimit(shown);
  out << "{\"base_ns\":\"" << base << "\",\"end\":" << (last - base) << ",\"ranks_total\":" << summary.ranks.size()
      << ",\"ranks_shown\":" << shown << ",\"max_ranks\":" << kHtmlMaxTimelineRanks << ",\"lane_limit\":" << limit
      << ",\n\"iteration_windows\":[";
  {
    fmt::memory_buffer buf;
    for (size_t j = 0; j < summary.iterations.size(); ++j) {
      const IterationResult& it = summary.iterations[j];
      fmt::format_to(std::back_inserter(buf), "{}[{},{},{}]", j ? "," : "", it.rank_index, it.figures.start_ns - base,
                     it.figures.end_ns - base);
    }
    out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  }
  out << "],\n\"ranks\":[";

  // The kept timelines, in input order (as the page always listed them), each with its index in
  // the sorted summary.
  std::vector<size_t> index_of_input(summary.ranks.size(), kNoIndex);
  for (size_t i = 0; i < summary.ranks.size(); ++i)
    if (summary.ranks[i].input_index < index_of_input.size()) index_of_input[summary.ranks[i].input_index] = i;
  std::sort(timelines_.begin(), timelines_.end(),
            [](const RankTimeline& a, const RankTimeline& b) { return a.input_index < b.input_index; });
  bool first = true;
  for (const RankTimeline& tl : timelines_) {
    const size_t index = tl.input_index < index_of_input.size() ? index_of_input[tl.input_index] : kNoIndex;
    if (index == kNoIndex || index >= shown) continue;
    out << (first ? "\n" : ",\n") << "{\"index\":" << index << ",\"rank\":";
    first = false;
    if (tl.rank == kUnknown)
      out << "null";
    else
      out << tl.rank;
    out << ",\"source\":" << Quote(tl.source) << ",\"any\":" << (tl.any ? "true" : "false") << ",\"lanes\":{";
    for (size_t l = 0; l < RankTimeline::kLanes; ++l) {
      if (l) out << ',';
      WriteLane(out, kLaneNames[l], tl.exact[l], tl.lanes[l], base);
    }
    // "ops": {"n": ops of the rank, "names": [...], "d": [start gap, duration, exposed, bytes, seq,
    // name index, ...]}, six numbers per op (the first `op_limit`), each start from the previous
    // op's start (the first from base); bytes and seq -1 when unknown.
    out << "},\"ops\":{\"n\":" << tl.ops_total << ",\"names\":[";
    for (size_t i = 0; i < tl.op_names.size(); ++i) out << (i ? "," : "") << Quote(tl.op_names[i]);
    out << "],\"d\":[";
    {
      fmt::memory_buffer buf;
      int64_t prev = base;
      for (size_t i = 0; i < tl.ops.size(); ++i) {
        const RankTimeline::Op& op = tl.ops[i];
        fmt::format_to(std::back_inserter(buf), "{}{},{},{},{},{},{}", i ? "," : "", op.start - prev, op.end - op.start,
                       op.exposed, op.bytes == kUnknown ? -1 : op.bytes, op.seq == kUnknown ? -1 : op.seq, op.name);
        prev = op.start;
      }
      out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    }
    out << "]}}";
    if (!out) return MakeError(StatusCode::kIo, "write failed");
  }
  out << "\n]}" << kHtmlPage[2];
  if (!out) return MakeError(StatusCode::kIo, "write failed");
  return OkStatus();
}

}  // namespace

size_t HtmlLaneLimit(size_t ranks_shown) {
  const size_t share = kHtmlTimelineBudget / (4 * std::max<size_t>(ranks_shown, 1));
  return std::clamp(share, kHtmlMinLaneIntervals, kHtmlMaxLaneIntervals);
}

DownSampled DownSampleIntervals(const std::vector<Interval>& in, size_t limit) {
  DownSampled ds;
  if (in.size() <= limit || limit == 0) {
    ds.intervals = in;
    return ds;
  }
  // Close the k = n - limit shortest gaps (and any as short as the k-th: ties close together).
  const size_t n = in.size(), k = n - limit;
  std::vector<int64_t> gaps(n - 1);
  for (size_t i = 0; i + 1 < n; ++i) gaps[i] = in[i + 1].start - in[i].end;
  std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(k - 1), gaps.end());
  const int64_t gap = gaps[k - 1] + 1;
  ds.gap_ns = gap;
  ds.intervals.reserve(limit);
  ds.busy.reserve(limit);
  for (const Interval& iv : in) {
    if (!ds.intervals.empty() && iv.start - ds.intervals.back().end < gap) {
      ds.intervals.back().end = std::max(ds.intervals.back().end, iv.end);
      ds.busy.back() += iv.end - iv.start;
    } else {
      ds.intervals.push_back(iv);
      ds.busy.push_back(iv.end - iv.start);
    }
  }
  return ds;
}

std::unique_ptr<ReportWriter> MakeHtmlReport() { return std::make_unique<HtmlReport>(); }

}  // namespace overlapprof
