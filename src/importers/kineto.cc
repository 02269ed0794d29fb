// Importer for PyTorch-profiler (Kineto) Chrome-trace JSON, plain or gzip.
//
// Reads: GPU kernels, memcpy, memset and sync activities (device, stream, correlation,
// bytes, NCCL metadata args), CUDA/HIP runtime and driver calls (for correlation),
// ProfilerStep#N ranges (iterations), user annotations, GPU user annotations,
// distributedInfo, deviceProperties, thread names of GPU streams, baseTimeNanoseconds.
// Everything else (cpu_op details, flows, python stacks) is skipped without being decoded.
//
// Split in two: KinetoReader (here) tokenizes the JSON; kineto::TraceBuilder
// (kineto_builder.*) builds the rank's trace from the events (kineto_event.h).
//
// Memory: the decompressed document, simdjson's structural index (~0.5x the document for
// trace JSON) and the compact RankTrace. Strings are interned from their raw (escaped)
// bytes in the input, so simdjson's string buffer is never filled.
//
// Times: "ts" and "dur" are parsed from their decimal text exactly (no double rounding)
// into integer ns; absolute time = baseTimeNanoseconds (when present) + ts.
#include <simdjson.h>

#include <charconv>
#include <cstring>
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "src/importers/importer.h"
#include "src/importers/kineto_builder.h"
#include "src/importers/kineto_event.h"
#include "src/trace/classify.h"
#include "src/io/input_file.h"
#include "src/common/utf8.h"

namespace overlapprof {

namespace od = simdjson::ondemand;
using kineto::Cat;
using kineto::DecodeCat;
using kineto::RawEvent;
using kineto::Unescape;

bool ParseScaledDecimal(std::string_view tok, int exp10, int64_t* out) {
  while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\n' || tok.back() == '\r' || tok.back() == '\t'))
    tok.remove_suffix(1);
  size_t i = 0, n = tok.size();
  bool neg = false;
  if (i < n && tok[i] == '-') {
    neg = true;
    ++i;
  }
  unsigned __int128 mant = 0;
  int sig_digits = 0;  // significant digits accumulated in mant
  int64_t scale = 0;   // value = mant * 10^scale
  bool any = false;
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < n && is_digit(tok[i])) {
    if (sig_digits < 36) {
      mant = mant * 10 + static_cast<unsigned>(tok[i] - '0');
      if (mant != 0) ++sig_digits;
    } else {
      ++scale;  // digits beyond 36 significant ones are dropped (never seen in traces)
    }
    any = true;
    ++i;
  }
  if (i < n && tok[i] == '.') {
    ++i;
    bool frac_any = false;
    while (i < n && is_digit(tok[i])) {
      if (sig_digits < 36) {
        mant = mant * 10 + static_cast<unsigned>(tok[i] - '0');
        if (mant != 0) ++sig_digits;
        --scale;
      }
      frac_any = true;
      ++i;
    }
    if (!frac_any) return false;
    any = true;
  }
  if (!any) return false;
  if (i < n && (tok[i] == 'e' || tok[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < n && (tok[i] == '+' || tok[i] == '-')) eneg = tok[i++] == '-';
    if (i >= n || !is_digit(tok[i])) return false;
    int64_t e = 0;
    while (i < n && is_digit(tok[i])) {
      if (e < 100000) e = e * 10 + (tok[i] - '0');
      ++i;
    }
    scale += eneg ? -e : e;
  }
  if (i != n) return false;
  int64_t total = scale + exp10;
  unsigned __int128 v;
  if (mant == 0) {
    v = 0;
  } else if (total >= 0) {
    if (total > 38) return false;
    v = mant;
    for (int64_t k = 0; k < total; ++k) {
      if (v > (static_cast<unsigned __int128>(1) << 64)) return false;
      v *= 10;
    }
  } else {
    if (-total > 38) {
      v = 0;
    } else {
      unsigned __int128 p = 1;
      for (int64_t k = 0; k < -total; ++k) p *= 10;
      v = mant / p;
      if ((mant % p) * 2 >= p) ++v;  // half away from zero (sign applied below)
    }
  }
  const unsigned __int128 limit = neg ? static_cast<unsigned __int128>(INT64_MAX) + 1 : INT64_MAX;
  if (v > limit) return false;
  *out = neg ? static_cast<int64_t>(-static_cast<__int128>(v)) : static_cast<int64_t>(v);
  return true;
}

namespace {

// Tokenizes the document (simdjson on-demand): the top-level keys into the builder's metadata,
// each element of traceEvents into a RawEvent that the builder adds. JSON errors are reported
// here with their byte offset; what the events mean is the builder's business.
class KinetoReader {
 public:
  KinetoReader(const char* buf, size_t size, const ImportOptions& o, od::parser& parser)
      : buf_(buf), size_(size), parser_(parser), builder_(o) {}

  Status Parse(size_t capacity) {
    // A reused parser grows with headroom, so ranks of similar size reuse its index.
    if (parser_.capacity() < size_) {
      size_t want = std::min<size_t>(size_ + size_ / 4, simdjson::SIMDJSON_MAXSIZE_BYTES);
      // On failure iterate() below allocates exactly what it needs, or reports the error.
      (void)!parser_.allocate(std::max(want, size_));
    }
    od::document doc;
    if (auto e = parser_.iterate(buf_, size_, capacity).get(doc)) {
      if (e != simdjson::UTF8_ERROR || sanitized_) return JsonError(e, nullptr);
      // Invalid UTF-8 (raw bytes in a kernel or host name): parse a copy with each invalid
      // sequence replaced by U+FFFD (src/common/utf8.h), counted. Costs a copy, only then.
      size_t replaced = 0;
      const std::string fixed = SanitizeUtf8(std::string_view(buf_, size_), &replaced);
      sanitized_.reset(new char[fixed.size() + kInputPadding]);
      std::memcpy(sanitized_.get(), fixed.data(), fixed.size());
      std::memset(sanitized_.get() + fixed.size(), 0, kInputPadding);
      buf_ = sanitized_.get();
      size_ = fixed.size();
      builder_.AddStat(Stat::invalid_utf8_replaced, static_cast<int64_t>(replaced));
      return Parse(size_ + kInputPadding);
    }
    od::json_type type;
    if (auto e = doc.type().get(type)) return JsonError(e, &doc);
    if (type == od::json_type::array) {
      od::array arr;
      if (auto e = doc.get_array().get(arr)) return JsonError(e, &doc);
      OVERLAPPROF_RETURN_IF_ERROR(ParseEvents(arr, &doc));
      have_events_ = true;
    } else if (type == od::json_type::object) {
      od::object obj;
      if (auto e = doc.get_object().get(obj)) return JsonError(e, &doc);
      uint32_t seen = 0;
      for (auto fr : obj) {
        od::field f;
        if (auto e = std::move(fr).get(f)) return JsonError(e, &doc);
        std::string_view key = KeyOf(f);
        od::value v = f.value();
        if (key == "traceEvents" && !First(seen, 0)) continue;
        if (key == "distributedInfo" && !First(seen, 1)) continue;
        if (key == "deviceProperties" && !First(seen, 2)) continue;
        if (key == "baseTimeNanoseconds" && !First(seen, 3)) continue;
        if ((key == "host_name" || key == "hostname") && !First(seen, 4)) continue;
        if (key == "traceEvents") {
          od::array arr;
          if (auto e = v.get_array().get(arr)) return JsonError(e, &doc, "\"traceEvents\" is not an array");
          OVERLAPPROF_RETURN_IF_ERROR(ParseEvents(arr, &doc));
          have_events_ = true;
        } else if (key == "distributedInfo") {
          OVERLAPPROF_RETURN_IF_ERROR(ParseDistributedInfo(v, &doc));
        } else if (key == "deviceProperties") {
          OVERLAPPROF_RETURN_IF_ERROR(ParseDeviceProperties(v, &doc));
        } else if (key == "baseTimeNanoseconds") {
          std::string_view tok;
          tok = v.raw_json_token();
          int64_t base;
          if (ParseScaledDecimal(tok, 0, &base)) builder_.SetBaseTime(base);
        } else if (key == "host_name" || key == "hostname") {
          std::string_view s;
          if (RawString(v, &s)) builder_.meta().host = Unescape(s);
        }
      }
    } else {
      return MakeError(StatusCode::kInvalidInput, "not a Chrome-trace JSON: the top level is not an object or array");
    }
    {
      // At the end of a well-formed document there is no current location.
      const char* loc = nullptr;
      if (doc.current_location().get(loc) == simdjson::SUCCESS)
        return MakeError(StatusCode::kInvalidInput, "invalid JSON: trailing content after the document near byte {}",
                         static_cast<size_t>(loc - buf_));
    }
    if (!have_events_)
      return MakeError(StatusCode::kInvalidInput, "no \"traceEvents\" array: not a PyTorch-profiler trace");
    return builder_.Finish();
  }

  RankTrace Take() { return builder_.Take(); }

 private:
  Status JsonError(simdjson::error_code e, od::document* doc, std::string_view what = {}) {
    size_t offset = size_;
    if (doc) {
      const char* loc = nullptr;
      if (doc->current_location().get(loc) == simdjson::SUCCESS && loc >= buf_ && loc <= buf_ + size_)
        offset = static_cast<size_t>(loc - buf_);
    }
    if (!what.empty()) return MakeError(StatusCode::kInvalidInput, "{} near byte {}", what, offset);
    // A document cut short leaves a string or a bracket open; anything else is malformed
    // (unbalanced closers, trailing content, bad tokens). One scan, on the error path only.
    bool in_string = false, escaped = false;
    int64_t depth = 0;
    for (size_t i = 0; i < size_; ++i) {
      char c = buf_[i];
      if (in_string) {
        if (escaped) escaped = false;
        else if (c == '\\') escaped = true;
        else if (c == '"') in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        --depth;
      }
    }
    bool ends_complete = !in_string && depth <= 0;
    if (e == simdjson::CAPACITY)
      return MakeError(StatusCode::kInvalidInput, "JSON document too large for one parse ({} bytes; the limit is 4 GiB)", size_);
    if (e == simdjson::UTF8_ERROR) return MakeError(StatusCode::kInvalidInput, "invalid JSON: not valid UTF-8");
    if (!ends_complete)
      return MakeError(StatusCode::kInvalidInput,
                       "truncated JSON: the document ends inside an unclosed {} after {} bytes",
                       in_string ? "string" : "object or array", size_);
    return MakeError(StatusCode::kInvalidInput, "invalid JSON near byte {} ({})", offset, simdjson::error_message(e));
  }

  // Duplicate keys: the first occurrence of a key overlapprof reads is used, later ones are
  // skipped and counted (json_duplicate_keys, a warning); docs/schema.md. `seen` holds one bit
  // per key of the object being read. Keys overlapprof does not read are never compared.
  bool First(uint32_t& seen, int bit) {
    const uint32_t m = uint32_t{1} << bit;
    if (seen & m) {
      builder_.AddStat(Stat::json_duplicate_keys, 1);
      return false;
    }
    seen |= m;
    return true;
  }

  // The raw (escaped) text of a key. Keys of interest never contain escapes.
  static std::string_view KeyOf(od::field& f) {
    const char* p = f.key().raw();
    const char* q = p;
    while (*q != '"') q += (*q == '\\') ? 2 : 1;  // the padded buffer ends in zeros and '"' exists
    return {p, static_cast<size_t>(q - p)};
  }

  // Raw (still escaped) contents of a JSON string value; false if it is not a string.
  static bool RawString(od::value& v, std::string_view* out) {
    std::string_view tok = v.raw_json_token();
    while (!tok.empty() && tok.back() != '"') tok.remove_suffix(1);  // trailing whitespace
    if (tok.size() < 2 || tok.front() != '"') return false;
    *out = tok.substr(1, tok.size() - 2);
    return true;
  }

  // An integer from a number, a numeric string, or a hex string ("0x1f").
  static bool AnyInt(od::value& v, int64_t* out) {
    std::string_view tok = v.raw_json_token();
    while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\n' || tok.back() == '\r' || tok.back() == '\t'))
      tok.remove_suffix(1);
    if (!tok.empty() && tok.front() == '"') {
      if (tok.size() < 2) return false;
      std::string_view s = tok.substr(1, tok.size() - 2);
      if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        uint64_t u;
        auto r = std::from_chars(s.data() + 2, s.data() + s.size(), u, 16);
        if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return false;
        *out = static_cast<int64_t>(u);
        return true;
      }
      return ParseScaledDecimal(s, 0, out);
    }
    return ParseScaledDecimal(tok, 0, out);
  }

  Status ParseDistributedInfo(od::value& v, od::document* doc) {
    od::object obj;
    if (v.get_object().get(obj) != simdjson::SUCCESS) return OkStatus();  // ignored if not an object
    uint32_t seen = 0;
    for (auto fr : obj) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return JsonError(e, doc);
      std::string_view key = KeyOf(f);
      od::value fv = f.value();
      int64_t n;
      std::string_view s;
      static constexpr std::string_view kKeys[] = {"rank", "world_size", "backend", "nccl_version", "pg_config"};
      bool dup = false;
      for (int k = 0; k < 5; ++k)
        if (key == kKeys[k]) dup = !First(seen, k);
      if (dup) continue;
      if (key == "rank" && AnyInt(fv, &n)) {
        builder_.SetRank(n);
      } else if (key == "world_size" && AnyInt(fv, &n)) {
        builder_.meta().world_size = n;
      } else if (key == "backend" && RawString(fv, &s)) {
        builder_.meta().backend = Unescape(s);
      } else if (key == "nccl_version" && RawString(fv, &s)) {
        builder_.meta().nccl_version = Unescape(s);
      } else if (key == "pg_config") {
        od::array pgs;
        std::string_view raw;
        if (fv.get_array().get(pgs) == simdjson::SUCCESS && pgs.raw_json().get(raw) == simdjson::SUCCESS)
          builder_.meta().pg_config_json = std::string(raw);
      }
    }
    return OkStatus();
  }

  Status ParseDeviceProperties(od::value& v, od::document* doc) {
    od::array arr;
    if (v.get_array().get(arr) != simdjson::SUCCESS) return OkStatus();
    for (auto er : arr) {
      od::value ev;
      if (auto e = std::move(er).get(ev)) return JsonError(e, doc);
      od::object obj;
      if (ev.get_object().get(obj) != simdjson::SUCCESS) continue;
      Device d;
      uint32_t seen = 0;
      for (auto fr : obj) {
        od::field f;
        if (auto e = std::move(fr).get(f)) return JsonError(e, doc);
        std::string_view key = KeyOf(f);
        od::value fv = f.value();
        std::string_view s;
        static constexpr std::string_view kKeys[] = {"id", "name", "totalGlobalMem", "computeMajor", "computeMinor", "numSms"};
        bool dup = false;
        for (int k = 0; k < 6; ++k)
          if (key == kKeys[k]) dup = !First(seen, k);
        if (dup) continue;
        if (key == "id") AnyInt(fv, &d.id);
        else if (key == "name" && RawString(fv, &s)) d.name = Unescape(s);
        else if (key == "totalGlobalMem") AnyInt(fv, &d.total_memory);
        else if (key == "computeMajor") AnyInt(fv, &d.compute_major);
        else if (key == "computeMinor") AnyInt(fv, &d.compute_minor);
        else if (key == "numSms") AnyInt(fv, &d.sm_count);
      }
      builder_.AddDevice(std::move(d));
    }
    return OkStatus();
  }

  Status ParseArgs(od::value& v, RawEvent& ev, od::document* doc) {
    od::object obj;
    if (v.get_object().get(obj) != simdjson::SUCCESS) return OkStatus();
    uint32_t seen = 0;
    for (auto fr : obj) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return JsonError(e, doc);
      std::string_view key = KeyOf(f);
      od::value fv = f.value();
      switch (key.size()) {
        case 3:
          if ((key == "Seq" && First(seen, 0)) || (key == "seq" && First(seen, 1))) AnyInt(fv, &ev.seq);
          break;
        case 4:
          if (key == "name" && First(seen, 2)) RawString(fv, &ev.arg_name);
          break;
        case 5:
          if (key == "bytes" && First(seen, 3)) AnyInt(fv, &ev.bytes);
          else if (key == "dtype" && First(seen, 4)) RawString(fv, &ev.dtype);
          break;
        case 6:
          if (key == "device" && First(seen, 5)) AnyInt(fv, &ev.device);
          else if (key == "stream" && First(seen, 6)) AnyInt(fv, &ev.stream);
          else if (key == "labels" && First(seen, 7)) RawString(fv, &ev.arg_labels);
          break;
        case 8:
          if (key == "Src Rank" && First(seen, 8)) AnyInt(fv, &ev.src_rank);
          else if (key == "Dst Rank" && First(seen, 9)) AnyInt(fv, &ev.dst_rank);
          else if (key == "toDevice" && First(seen, 20)) AnyInt(fv, &ev.to_device);
          else if (key == "inDevice" && First(seen, 21)) AnyInt(fv, &ev.in_device);
          break;
        case 10:
          if (key == "Group size" && First(seen, 10)) AnyInt(fv, &ev.group_size);
          else if (key == "fromDevice" && First(seen, 22)) AnyInt(fv, &ev.from_device);
          break;
        case 11:
          if (key == "correlation" && First(seen, 11)) AnyInt(fv, &ev.correlation);
          else if (key == "External id" && First(seen, 12)) ev.external_id = fv.raw_json_token();
          break;
        case 13:
          if (key == "In msg nelems" && First(seen, 13)) AnyInt(fv, &ev.in_nelems);
          break;
        case 14:
          if (key == "Out msg nelems" && First(seen, 14)) AnyInt(fv, &ev.out_nelems);
          break;
        case 15:
          if (key == "Collective name" && First(seen, 15)) RawString(fv, &ev.coll_name);
          break;
        case 18:
          if (key == "Process Group Name" && First(seen, 16)) RawString(fv, &ev.pg_name);
          break;
        case 19:
          if (key == "Process Group Ranks" && First(seen, 17)) RawString(fv, &ev.pg_ranks);
          else if (key == "Sequence number" && First(seen, 18)) AnyInt(fv, &ev.seq);
          break;
        case 25:
          if (key == "Process Group Description" && First(seen, 19)) RawString(fv, &ev.pg_desc);
          break;
        default:
          break;
      }
    }
    return OkStatus();
  }

  Status ParseEvents(od::array& arr, od::document* doc) {
    for (auto er : arr) {
      od::value v;
      if (auto e = std::move(er).get(v)) return JsonError(e, doc);
      od::object obj;
      if (v.get_object().get(obj) != simdjson::SUCCESS) {
        builder_.AddMalformed();
        continue;
      }
      RawEvent ev;
      uint32_t seen = 0;
      for (auto fr : obj) {
        od::field f;
        if (auto e = std::move(fr).get(f)) return JsonError(e, doc);
        std::string_view key = KeyOf(f);
        od::value fv = f.value();
        switch (key.size()) {
          case 2:
            if (key == "ph" && First(seen, 0)) {
              std::string_view s;
              if (RawString(fv, &s) && !s.empty()) ev.ph = s[0];
            } else if (key == "ts" && First(seen, 1)) {
              ev.ts = fv.raw_json_token();
            }
            break;
          case 3:
            if (key == "cat" && First(seen, 2)) RawString(fv, &ev.cat);
            else if (key == "pid" && First(seen, 3)) AnyInt(fv, &ev.pid);
            else if (key == "tid" && First(seen, 4)) AnyInt(fv, &ev.tid);
            else if (key == "dur" && First(seen, 5)) {
              ev.dur = fv.raw_json_token();
            }
            break;
          case 4:
            if (key == "name" && First(seen, 6)) ev.has_name = RawString(fv, &ev.name);
            else if (key == "args" && First(seen, 7)) {
              // cpu_op args (shapes, call stacks) are large and unused: skip undecoded, except
              // for host ops that launch communication (their External id links their kernels,
              // rule 2) and record_param_comms, whose NCCL arguments name SendRecv kernels
              // ("name" precedes "args" in every writer seen).
              Cat c = DecodeCat(ev.cat);
              if ((c != Cat::kCpuOp && c != Cat::kOther) ||
                  (c == Cat::kCpuOp && ev.has_name && (ev.name == "record_param_comms" || IsCommHostOpName(ev.name))))
                OVERLAPPROF_RETURN_IF_ERROR(ParseArgs(fv, ev, doc));
            }
            break;
          default:
            break;
        }
      }
      builder_.AddEvent(ev);
    }
    return OkStatus();
  }

  const char* buf_;
  size_t size_;
  std::unique_ptr<char[]> sanitized_;  // the document with invalid UTF-8 replaced, when it had some
  od::parser& parser_;
  kineto::TraceBuilder builder_;
  bool have_events_ = false;
};

class KinetoImporter : public Importer {
 public:
  std::string_view name() const override { return "kineto"; }
  std::string_view description() const override {
    return "PyTorch profiler (Kineto) Chrome-trace JSON, .json or .json.gz";
  }
  int Probe(std::string_view head) const override {
    if (IsGzip(head)) return 50;  // gzip of what is only known after inflating
    size_t i = 0;
    if (head.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // UTF-8 BOM
    while (i < head.size() && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')) ++i;
    if (i < head.size() && (head[i] == '{' || head[i] == '[')) return 60;
    return 0;
  }
  StatusOr<RankTrace> Import(const std::string& path, const ImportOptions& options) const override {
    ImportScratch local;
    ImportScratch& scratch = options.scratch ? *options.scratch : local;
    OVERLAPPROF_RETURN_IF_ERROR(ReadInputFileInto(path, scratch.buffer, scratch.compressed));
    if (!scratch.json_parser) scratch.json_parser = std::make_shared<od::parser>();
    const InputBuffer& buf = scratch.buffer;
    size_t skip = buf.view().substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
    if (buf.size() - skip == 0) return MakeError(StatusCode::kInvalidInput, "empty file");
    KinetoReader p(buf.data() + skip, buf.size() - skip, options, *static_cast<od::parser*>(scratch.json_parser.get()));
    OVERLAPPROF_RETURN_IF_ERROR(p.Parse(buf.capacity() - skip));
    RankTrace t = p.Take();
    t.meta.source_path = path;
    return t;
  }
};

}  // namespace

StatusOr<RankTrace> ParseKinetoJson(const char* buffer, size_t size, size_t capacity, const ImportOptions& options) {
  if (size == 0) return MakeError(StatusCode::kInvalidInput, "empty file");
  od::parser parser;
  KinetoReader p(buffer, size, options, parser);
  OVERLAPPROF_RETURN_IF_ERROR(p.Parse(capacity));
  return p.Take();
}

std::unique_ptr<Importer> MakeKinetoImporter() { return std::make_unique<KinetoImporter>(); }

}  // namespace overlapprof
