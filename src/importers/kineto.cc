// Importer for PyTorch-profiler (Kineto) Chrome-trace JSON, plain or gzip.
//
// Reads: GPU kernels, memcpy, memset and sync activities (device, stream, correlation,
// bytes, NCCL metadata args), CUDA/HIP runtime and driver calls (for correlation),
// ProfilerStep#N ranges (iterations), user annotations, GPU user annotations,
// distributedInfo, deviceProperties, thread names of GPU streams, baseTimeNanoseconds.
// Everything else (cpu_op details, flows, python stacks) is skipped without being decoded.
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
#include "src/io/input_file.h"
#include "src/trace/classify.h"

namespace overlapprof {

namespace od = simdjson::ondemand;

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

enum class Cat : uint8_t {
  kUnknown, kKernel, kMemcpy, kMemset, kSync, kRuntime, kUserAnnotation, kGpuAnnotation, kCpuOp, kOther
};

Cat DecodeCat(std::string_view c) {
  switch (c.size()) {
    case 6:
      if (c == "kernel" || c == "Kernel") return Cat::kKernel;
      if (c == "Memcpy") return Cat::kMemcpy;
      if (c == "Memset") return Cat::kMemset;
      if (c == "cpu_op") return Cat::kCpuOp;
      break;
    case 7:
      if (c == "Runtime") return Cat::kRuntime;
      if (c == "Operator") return Cat::kCpuOp;
      break;
    case 9:
      if (c == "cuda_sync") return Cat::kSync;
      break;
    case 10:
      if (c == "gpu_memcpy") return Cat::kMemcpy;
      if (c == "gpu_memset") return Cat::kMemset;
      break;
    case 11:
      if (c == "cuda_driver") return Cat::kRuntime;
      break;
    case 12:
      if (c == "cuda_runtime") return Cat::kRuntime;
      break;
    case 15:
      if (c == "user_annotation") return Cat::kUserAnnotation;
      break;
    case 19:
      if (c == "gpu_user_annotation") return Cat::kGpuAnnotation;
      break;
    default:
      break;
  }
  return c.empty() ? Cat::kUnknown : Cat::kOther;
}

uint8_t CopyKindFromName(std::string_view name) {
  // CUPTI_ACTIVITY_MEMCPY_KIND_*: HTOD=1 DTOH=2 HTOA=3 ATOH=4 ATOA=5 ATOD=6 DTOA=7 DTOD=8 HTOH=9 PTOP=10
  static const std::pair<std::string_view, uint8_t> kKinds[] = {
      {"HtoD", 1}, {"DtoH", 2}, {"HtoA", 3}, {"AtoH", 4}, {"AtoA", 5},
      {"AtoD", 6}, {"DtoA", 7}, {"DtoD", 8}, {"HtoH", 9}, {"PtoP", 10}};
  for (const auto& [k, v] : kKinds)
    if (name.find(k) != std::string_view::npos) return v;
  return 0;
}

// Fields of one trace event that the importer uses. Views point into the input buffer.
struct RawEvent {
  char ph = 0;
  std::string_view cat;
  std::string_view name;  // raw JSON string content (still escaped)
  bool has_name = false;
  int64_t pid = kUnknown, tid = kUnknown;
  std::string_view ts, dur;
  // args
  int64_t device = kUnknown, stream = kUnknown, correlation = kUnknown, bytes = kUnknown;
  std::string_view coll_name, dtype, pg_name, pg_desc, pg_ranks, arg_name, arg_labels;
  int64_t in_nelems = kUnknown, out_nelems = kUnknown, group_size = kUnknown, seq = kUnknown;
};

// JSON string unescape (\" \\ \/ \b \f \n \r \t \uXXXX with surrogate pairs).
std::string Unescape(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  auto hex4 = [&](size_t at, uint32_t* cp) {
    if (at + 4 > raw.size()) return false;
    uint32_t v = 0;
    for (size_t k = at; k < at + 4; ++k) {
      char c = raw[k];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return false;
    }
    *cp = v;
    return true;
  };
  auto put_utf8 = [&](uint32_t cp) {
    if (cp < 0x80) out += static_cast<char>(cp);
    else if (cp < 0x800) { out += static_cast<char>(0xC0 | (cp >> 6)); out += static_cast<char>(0x80 | (cp & 0x3F)); }
    else if (cp < 0x10000) { out += static_cast<char>(0xE0 | (cp >> 12)); out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)); out += static_cast<char>(0x80 | (cp & 0x3F)); }
    else { out += static_cast<char>(0xF0 | (cp >> 18)); out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F)); out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)); out += static_cast<char>(0x80 | (cp & 0x3F)); }
  };
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c != '\\' || i + 1 >= raw.size()) { out += c; continue; }
    char e = raw[++i];
    switch (e) {
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        uint32_t cp;
        if (!hex4(i + 1, &cp)) { out += "\\u"; break; }
        i += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < raw.size() + 0 && raw[i + 1] == '\\' && raw[i + 2] == 'u') {
          uint32_t lo;
          if (hex4(i + 3, &lo) && lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
          }
        }
        put_utf8(cp);
        break;
      }
      default: out += e; break;  // \" \\ \/
    }
  }
  return out;
}

class KinetoParser {
 public:
  KinetoParser(const char* buf, size_t size, const ImportOptions& o, od::parser& parser)
      : buf_(buf), size_(size), opts_(o), parser_(parser) {}

  Status Parse(size_t capacity) {
    // A reused parser grows with headroom, so ranks of similar size reuse its index.
    if (parser_.capacity() < size_) {
      size_t want = std::min<size_t>(size_ + size_ / 4, simdjson::SIMDJSON_MAXSIZE_BYTES);
      // On failure iterate() below allocates exactly what it needs, or reports the error.
      (void)!parser_.allocate(std::max(want, size_));
    }
    od::document doc;
    if (auto e = parser_.iterate(buf_, size_, capacity).get(doc)) return JsonError(e, nullptr);
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
      for (auto fr : obj) {
        od::field f;
        if (auto e = std::move(fr).get(f)) return JsonError(e, &doc);
        std::string_view key = KeyOf(f);
        od::value v = f.value();
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
          if (ParseScaledDecimal(tok, 0, &base_ns_)) have_base_ = true;
        } else if (key == "host_name" || key == "hostname") {
          std::string_view s;
          if (RawString(v, &s)) t_.meta.host = Unescape(s);
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
    return Finish();
  }

  RankTrace Take() { return std::move(t_); }

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

  uint32_t InternRaw(std::string_view raw) {
    auto it = raw_intern_.find(raw);
    if (it != raw_intern_.end()) return it->second;
    uint32_t id = raw.find('\\') == std::string_view::npos ? t_.names.Intern(raw) : t_.names.Intern(Unescape(raw));
    raw_intern_.emplace(raw, id);
    return id;
  }

  Status ParseDistributedInfo(od::value& v, od::document* doc) {
    od::object obj;
    if (v.get_object().get(obj) != simdjson::SUCCESS) return OkStatus();  // ignored if not an object
    for (auto fr : obj) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return JsonError(e, doc);
      std::string_view key = KeyOf(f);
      od::value fv = f.value();
      int64_t n;
      std::string_view s;
      if (key == "rank" && AnyInt(fv, &n)) {
        t_.meta.rank = n;
        have_rank_ = true;
      } else if (key == "world_size" && AnyInt(fv, &n)) {
        t_.meta.world_size = n;
      } else if (key == "backend" && RawString(fv, &s)) {
        t_.meta.backend = Unescape(s);
      } else if (key == "nccl_version" && RawString(fv, &s)) {
        t_.meta.nccl_version = Unescape(s);
      } else if (key == "pg_config") {
        od::array pgs;
        std::string_view raw;
        if (fv.get_array().get(pgs) == simdjson::SUCCESS && pgs.raw_json().get(raw) == simdjson::SUCCESS)
          t_.meta.pg_config_json = std::string(raw);
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
      for (auto fr : obj) {
        od::field f;
        if (auto e = std::move(fr).get(f)) return JsonError(e, doc);
        std::string_view key = KeyOf(f);
        od::value fv = f.value();
        std::string_view s;
        if (key == "id") AnyInt(fv, &d.id);
        else if (key == "name" && RawString(fv, &s)) d.name = Unescape(s);
        else if (key == "totalGlobalMem") AnyInt(fv, &d.total_memory);
        else if (key == "computeMajor") AnyInt(fv, &d.compute_major);
        else if (key == "computeMinor") AnyInt(fv, &d.compute_minor);
        else if (key == "numSms") AnyInt(fv, &d.sm_count);
      }
      t_.devices.push_back(std::move(d));
    }
    return OkStatus();
  }

  Status ParseArgs(od::value& v, RawEvent& ev, od::document* doc) {
    od::object obj;
    if (v.get_object().get(obj) != simdjson::SUCCESS) return OkStatus();
    for (auto fr : obj) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return JsonError(e, doc);
      std::string_view key = KeyOf(f);
      od::value fv = f.value();
      switch (key.size()) {
        case 3:
          if (key == "Seq" || key == "seq") AnyInt(fv, &ev.seq);
          break;
        case 4:
          if (key == "name") RawString(fv, &ev.arg_name);
          break;
        case 5:
          if (key == "bytes") AnyInt(fv, &ev.bytes);
          else if (key == "dtype") RawString(fv, &ev.dtype);
          break;
        case 6:
          if (key == "device") AnyInt(fv, &ev.device);
          else if (key == "stream") AnyInt(fv, &ev.stream);
          else if (key == "labels") RawString(fv, &ev.arg_labels);
          break;
        case 10:
          if (key == "Group size") AnyInt(fv, &ev.group_size);
          break;
        case 11:
          if (key == "correlation") AnyInt(fv, &ev.correlation);
          break;
        case 13:
          if (key == "In msg nelems") AnyInt(fv, &ev.in_nelems);
          break;
        case 14:
          if (key == "Out msg nelems") AnyInt(fv, &ev.out_nelems);
          break;
        case 15:
          if (key == "Collective name") RawString(fv, &ev.coll_name);
          break;
        case 18:
          if (key == "Process Group Name") RawString(fv, &ev.pg_name);
          break;
        case 19:
          if (key == "Process Group Ranks") RawString(fv, &ev.pg_ranks);
          else if (key == "Sequence number") AnyInt(fv, &ev.seq);
          break;
        case 25:
          if (key == "Process Group Description") RawString(fv, &ev.pg_desc);
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
        t_.stats.Add(Stat::events_malformed);
        continue;
      }
      RawEvent ev;
      for (auto fr : obj) {
        od::field f;
        if (auto e = std::move(fr).get(f)) return JsonError(e, doc);
        std::string_view key = KeyOf(f);
        od::value fv = f.value();
        switch (key.size()) {
          case 2:
            if (key == "ph") {
              std::string_view s;
              if (RawString(fv, &s) && !s.empty()) ev.ph = s[0];
            } else if (key == "ts") {
              ev.ts = fv.raw_json_token();
            }
            break;
          case 3:
            if (key == "cat") RawString(fv, &ev.cat);
            else if (key == "pid") AnyInt(fv, &ev.pid);
            else if (key == "tid") AnyInt(fv, &ev.tid);
            else if (key == "dur") {
              ev.dur = fv.raw_json_token();
            }
            break;
          case 4:
            if (key == "name") ev.has_name = RawString(fv, &ev.name);
            else if (key == "args") {
              // cpu_op args (shapes, call stacks) are large and unused: skip undecoded.
              Cat c = DecodeCat(ev.cat);
              if (c != Cat::kCpuOp && c != Cat::kOther) OVERLAPPROF_RETURN_IF_ERROR(ParseArgs(fv, ev, doc));
            }
            break;
          default:
            break;
        }
      }
      HandleEvent(ev);
    }
    return OkStatus();
  }

  bool Times(const RawEvent& ev, int64_t* start, int64_t* end) {
    int64_t ts, dur;
    if (ev.ts.empty() || ev.dur.empty()) {
      t_.stats.Add(Stat::events_malformed);
      return false;
    }
    if (!ParseScaledDecimal(ev.ts, opts_.kineto_time_exp, &ts) ||
        !ParseScaledDecimal(ev.dur, opts_.kineto_time_exp, &dur)) {
      // A number that does not fit int64 ns is out of range; anything else is malformed.
      auto numeric = [](std::string_view t) { return !t.empty() && (t[0] == '-' || (t[0] >= '0' && t[0] <= '9')); };
      t_.stats.Add(numeric(ev.ts) && numeric(ev.dur) ? Stat::events_timestamp_out_of_range : Stat::events_malformed);
      return false;
    }
    if (dur < 0) {
      t_.stats.Add(Stat::events_negative_duration);
      return false;
    }
    // Bounded before baseTimeNanoseconds is added; Finish() checks the sum again.
    if (__builtin_add_overflow(ts, dur, end) || !TimeInRange(ts) || !TimeInRange(*end)) {
      t_.stats.Add(Stat::events_timestamp_out_of_range);
      return false;
    }
    *start = ts;
    return true;
  }

  void HandleEvent(const RawEvent& ev) {
    if (ev.ph == 'M') {
      if (ev.has_name && !ev.arg_name.empty() && ev.name == "thread_name")
        thread_names_[{ev.pid, ev.tid}] = Unescape(ev.arg_name);
      return;
    }
    if (ev.ph != 'X') return;
    Cat cat = DecodeCat(ev.cat);
    switch (cat) {
      case Cat::kKernel:
      case Cat::kMemcpy:
      case Cat::kMemset:
      case Cat::kSync:
        return AddActivity(ev, cat);
      case Cat::kRuntime: {
        HostCall h;
        int64_t end;
        if (!Times(ev, &h.start_ns, &end)) return;
        h.end_ns = end;
        h.correlation_id = ev.correlation;
        h.tid = ev.tid;
        h.name_id = ev.has_name ? InternRaw(ev.name) : 0;
        if (t_.meta.pid == kUnknown) t_.meta.pid = ev.pid;
        t_.host_calls.push_back(h);
        return;
      }
      case Cat::kUserAnnotation:
      case Cat::kCpuOp:
      case Cat::kGpuAnnotation: {
        if (!ev.has_name) {
          t_.stats.Add(Stat::events_malformed);
          return;
        }
        constexpr std::string_view kStep = "ProfilerStep#";
        bool is_step = ev.name.substr(0, kStep.size()) == kStep;
        if (cat == Cat::kCpuOp && !is_step) return;
        Range r;
        int64_t end;
        if (!Times(ev, &r.start_ns, &end)) return;
        r.end_ns = end;
        r.name_id = InternRaw(ev.name);
        if (cat == Cat::kGpuAnnotation) {
          r.kind = RangeKind::kGpuAnnotation;
          r.stream = t_.StreamIndex(ev.device != kUnknown ? ev.device : ev.pid, ev.stream != kUnknown ? ev.stream : ev.tid);
        } else if (is_step) {
          r.kind = RangeKind::kStep;
          r.tid = ev.tid;
          int64_t n;
          std::string_view num = ev.name.substr(kStep.size());
          if (!ParseScaledDecimal(num, 0, &n)) n = kUnknown;
          if (n != kUnknown && !steps_seen_.insert(n).second) {
            t_.stats.Add(Stat::steps_duplicated);
            return;
          }
          r.step = n;
        } else {
          r.kind = RangeKind::kAnnotation;
          r.tid = ev.tid;
        }
        t_.ranges.push_back(r);
        return;
      }
      default:
        return;
    }
  }

  void AddActivity(const RawEvent& ev, Cat cat) {
    Activity a;
    int64_t end;
    if (!Times(ev, &a.start_ns, &end)) return;
    a.end_ns = end;
    if (a.end_ns == a.start_ns) t_.stats.Add(Stat::activities_zero_duration);
    a.kind = cat == Cat::kKernel   ? ActivityKind::kKernel
             : cat == Cat::kMemcpy ? ActivityKind::kMemcpy
             : cat == Cat::kMemset ? ActivityKind::kMemset
                                   : ActivityKind::kSync;
    a.name_id = ev.has_name ? InternRaw(ev.name) : 0;
    a.correlation_id = ev.correlation;
    int64_t device = ev.device != kUnknown ? ev.device : ev.pid;
    int64_t stream = ev.stream != kUnknown ? ev.stream : ev.tid;
    if (stream == kUnknown) t_.stats.Add(Stat::activities_unknown_stream);
    a.stream = t_.StreamIndex(device, stream);
    if (a.kind == ActivityKind::kMemcpy || a.kind == ActivityKind::kMemset) a.bytes = ev.bytes;
    if (a.kind == ActivityKind::kMemcpy) a.copy_kind = CopyKindFromName(t_.names.Get(a.name_id));

    std::string_view name = t_.names.Get(a.name_id);
    bool has_meta = !ev.coll_name.empty();
    if (a.kind == ActivityKind::kKernel && !has_meta) {
      // Kernel names are long and repeat: classify each distinct name once.
      if (a.name_id >= name_is_comm_.size()) name_is_comm_.resize(t_.names.size(), -1);
      int8_t& c = name_is_comm_[a.name_id];
      if (c < 0) c = IsCommKernelName(name) ? 1 : 0;
      a.category = c ? Category::kComm : Category::kCompute;
    } else {
      a.category = Classify(a.kind, name, has_meta);
    }
    if (a.category == Category::kComm) {
      CommOp op;
      op.stream = a.stream;
      if (has_meta) {
        op.source = CommSource::kKinetoArgs;
        op.op = NormalizeCollectiveName(Unescape(ev.coll_name));
        op.datatype = Unescape(ev.dtype);
        op.count = ev.in_nelems;
        int64_t sz = DtypeSize(op.datatype);
        int64_t bytes;
        if (sz > 0 && op.count >= 0 && !__builtin_mul_overflow(op.count, sz, &bytes)) op.bytes = bytes;
        op.comm_nranks = ev.group_size;
        op.seq = ev.seq;
        op.communicator = ev.pg_name.empty() ? "unknown" : Unescape(ev.pg_name);
        op.pg_desc = Unescape(ev.pg_desc);
        if (!ev.pg_ranks.empty()) pg_ranks_[t_.comm_ops.size()] = Unescape(ev.pg_ranks);
      } else {
        op.source = CommSource::kKernelName;
        op.op = CollectiveFromKernelName(name);
        op.communicator = "unknown";
      }
      a.comm_op = static_cast<uint32_t>(t_.comm_ops.size());
      t_.comm_ops.push_back(std::move(op));
    }
    t_.activities.push_back(a);
  }

  Status Finish() {
    t_.meta.source_format = "kineto";
    t_.meta.clock_source = have_base_ ? "kineto: baseTimeNanoseconds + ts" : "kineto: ts";
    if (!have_rank_) t_.stats.Set(Stat::rank_unknown, 1);
    if (have_base_ && base_ns_ != 0) {
      auto shift = [&](int64_t& x) {
        if (__builtin_add_overflow(x, base_ns_, &x) || !TimeInRange(x)) overflow_ = true;
      };
      for (Activity& a : t_.activities) { shift(a.start_ns); shift(a.end_ns); }
      for (HostCall& h : t_.host_calls) { shift(h.start_ns); shift(h.end_ns); }
      for (Range& r : t_.ranges) { shift(r.start_ns); shift(r.end_ns); }
      if (overflow_)
        return MakeError(StatusCode::kInvalidInput,
                         "baseTimeNanoseconds + ts falls outside 0..2^62 ns (the range overlapprof accepts)");
    }
    for (Stream& s : t_.streams) {
      auto it = thread_names_.find({s.device, s.native_id});
      s.name = it != thread_names_.end() ? it->second : fmt::format("stream {}", s.native_id);
    }
    // Correlate GPU activities with the host calls that launched them. A sorted vector
    // and binary search, not a hash map: correlation ids come from the file, and
    // libstdc++ hashes integers by identity (floodable).
    std::vector<std::pair<int64_t, uint32_t>> by_corr;
    by_corr.reserve(t_.host_calls.size());
    for (uint32_t i = 0; i < t_.host_calls.size(); ++i)
      if (t_.host_calls[i].correlation_id != kUnknown) by_corr.emplace_back(t_.host_calls[i].correlation_id, i);
    // Stable: the first host call with a given id wins, as in the file.
    std::stable_sort(by_corr.begin(), by_corr.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    for (Activity& a : t_.activities) {
      if (a.kind == ActivityKind::kSync) continue;
      auto it = std::lower_bound(by_corr.begin(), by_corr.end(), a.correlation_id,
                                 [](const auto& x, int64_t v) { return x.first < v; });
      if (a.correlation_id == kUnknown || it == by_corr.end() || it->first != a.correlation_id) {
        t_.stats.Add(Stat::correlations_unmatched);
        continue;
      }
      a.launch_ns = t_.host_calls[it->second].start_ns;
      if (a.comm_op != kNoIndex) {
        CommOp& op = t_.comm_ops[a.comm_op];
        const HostCall& h = t_.host_calls[it->second];
        op.host_enter_ns = h.start_ns;
        op.host_exit_ns = h.end_ns;
        op.host_tid = h.tid;
      }
    }
    // This rank's index in its process group, from "Process Group Ranks" ("[0, 1]").
    if (t_.meta.rank != kUnknown) {
      for (const auto& [idx, ranks] : pg_ranks_) {
        int64_t pos = 0;
        const char* p = ranks.c_str();
        while (*p) {
          while (*p && !(*p >= '0' && *p <= '9') && *p != '-') ++p;
          if (!*p) break;
          char* endp;
          long long r = std::strtoll(p, &endp, 10);
          if (endp == p) break;
          if (r == t_.meta.rank) {
            t_.comm_ops[idx].comm_rank = pos;
            break;
          }
          ++pos;
          p = endp;
        }
      }
    }
    t_.Finalize();
    return OkStatus();
  }

  const char* buf_;
  size_t size_;
  ImportOptions opts_;
  od::parser& parser_;
  RankTrace t_;
  std::unordered_map<std::string_view, uint32_t> raw_intern_;
  std::vector<int8_t> name_is_comm_;  // by name id: -1 not yet classified, 0 compute, 1 comm
  // Ordered containers for keys taken from the file (hash flooding, see by_corr above).
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names_;
  std::set<int64_t> steps_seen_;
  std::unordered_map<size_t, std::string> pg_ranks_;
  int64_t base_ns_ = 0;
  bool have_base_ = false, have_rank_ = false, have_events_ = false, overflow_ = false;
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
    KinetoParser p(buf.data() + skip, buf.size() - skip, options, *static_cast<od::parser*>(scratch.json_parser.get()));
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
  KinetoParser p(buffer, size, options, parser);
  OVERLAPPROF_RETURN_IF_ERROR(p.Parse(capacity));
  return p.Take();
}

std::unique_ptr<Importer> MakeKinetoImporter() { return std::make_unique<KinetoImporter>(); }

}  // namespace overlapprof
