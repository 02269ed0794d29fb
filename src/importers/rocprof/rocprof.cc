// Importer for rocprofv3's JSON output (rocprofiler-sdk; docs/rocprof.md). Two phases: Read
// walks the document once with simdjson On-Demand into plain records (Document), in whatever
// order its sections come; Build turns them into the rank's trace: kernel dispatches (named from
// kernel_symbols, on their queue, on the GPU their agent is), memory copies, host calls (HIP and
// RCCL API), roctx ranges, communication ops named from the RCCL calls that launched them, and
// the rank (from rocprofv3's output name, the command line or the file name).
#include "src/importers/rocprof/rocprof.h"

#include <fmt/format.h>
#include <simdjson.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "src/common/file_key_map.h"
#include "src/common/rank_env.h"
#include "src/common/utf8.h"
#include "src/io/input_file.h"
#include "src/trace/classify.h"
#include "src/trace/rank_builder.h"

namespace overlapprof {
namespace rocprof {
namespace {

namespace od = simdjson::ondemand;
using simdjson::error_code;

// rocprofiler_agent_type_t
constexpr int64_t kAgentGpu = 2;
// CUPTI_ACTIVITY_MEMCPY_KIND_* (Activity::copy_kind): HtoD, DtoH, DtoD, HtoH.
constexpr uint8_t kCopyHtoD = 1, kCopyDtoH = 2, kCopyDtoD = 8, kCopyHtoH = 9;
constexpr int kProbeScore = 70;

struct Agent {
  uint64_t handle = 0;
  int64_t type = kUnknown;
  int64_t gpu_index = kUnknown;  // logical_node_type_id: the GPU's index among GPUs
  int64_t node_id = kUnknown;
  int64_t cu_count = kUnknown;
  std::string name, product;
};

// What every buffer record has: its times (ns), the host thread and the correlation id.
struct Record {
  int64_t start = 0, end = 0, tid = kUnknown;
  uint64_t corr = 0;
};

struct Dispatch : Record {
  uint64_t kernel_id = 0, agent = 0, queue = 0;
};

struct Copy : Record {
  int64_t op = kUnknown, bytes = kUnknown;
  uint64_t src = 0, dst = 0;
  bool has_src = false, has_dst = false;
};

// A HIP, RCCL or marker API record (buffer tracing: one record per call, with both times).
struct ApiCall : Record {
  int64_t kind = kUnknown, op = kUnknown;
};

struct KindNames {
  std::string kind;
  std::vector<std::string> ops;
};

// What Read takes from the document, before anything is resolved.
struct Document {
  int64_t pid = kUnknown;
  std::string host;
  std::vector<std::string> command;
  std::string raw_output_file, output_file, raw_output_path, output_path;
  std::vector<Agent> agents;
  std::vector<KindNames> kinds;                // strings.buffer_records, by kind value
  FileKeyMap<uint64_t, std::string> messages;  // strings.marker_api: correlation id -> roctx message
  FileKeyMap<uint64_t, std::string> symbols;   // kernel_symbols: kernel_id -> name
  std::vector<Dispatch> dispatches;
  std::vector<Copy> copies;
  std::vector<ApiCall> hip, rccl, marker;
  int processes = 0;
  StatCounters stats;
};

// A record-level problem (a field of the wrong type, a number out of range): the record is
// skipped and counted. Anything else is the document's structure failing: an error.
bool RecordLevel(error_code e) {
  return e == simdjson::INCORRECT_TYPE || e == simdjson::NUMBER_OUT_OF_RANGE ||
         e == simdjson::NUMBER_ERROR || e == simdjson::NO_SUCH_FIELD;
}

class Reader {
 public:
  Reader(const char* data, size_t size) : data_(data), size_(size) {}

  Status Read(od::document& doc, Document& out) {
    d_ = &out;
    od::object top;
    if (auto e = doc.get_object().get(top)) return e == simdjson::INCORRECT_TYPE ? NotRocprof() : JsonError(e, &doc);
    bool found = false;
    for (auto fr : top) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return JsonError(e, &doc);
      if (Key(f) != "rocprofiler-sdk-tool") continue;
      found = true;
      od::array processes;
      if (auto e = f.value().get_array().get(processes))
        return e == simdjson::INCORRECT_TYPE ? WrongType("rocprofiler-sdk-tool", "an array") : JsonError(e, &doc);
      for (auto pr : processes) {
        od::object p;
        if (auto e = pr.get_object().get(p))
          return e == simdjson::INCORRECT_TYPE ? WrongType("rocprofiler-sdk-tool[]", "an object") : JsonError(e, &doc);
        if (++out.processes > 1)
          return MakeError(StatusCode::kInvalidInput,
                           "rocprofv3 JSON with more than one process record in \"rocprofiler-sdk-tool\": not "
                           "supported (rocprofv3 writes one file per process)");
        OVERLAPPROF_RETURN_IF_ERROR(ReadProcess(p, doc));
      }
    }
    if (const char* rest = nullptr; doc.current_location().get(rest) == simdjson::SUCCESS && rest >= data_ && rest < data_ + size_)
      return MakeError(StatusCode::kInvalidInput, "invalid JSON: trailing content after the document near byte {}", rest - data_);
    if (!found) return NotRocprof();
    if (out.processes == 0)
      return MakeError(StatusCode::kInvalidInput, "rocprofv3 JSON with an empty \"rocprofiler-sdk-tool\" array");
    return OkStatus();
  }

 private:
  // The raw (escaped) text of a key, not copied: the keys read never contain escapes, so a key
  // with one matches none of them (as in the Kineto importer).
  static std::string_view Key(od::field& f) {
    const char* p = f.key().raw();
    const char* q = p;
    while (*q != '"') q += (*q == '\\') ? 2 : 1;  // the padded buffer ends in zeros and '"' exists
    return {p, static_cast<size_t>(q - p)};
  }
  static Status NotRocprof() {
    return MakeError(StatusCode::kInvalidInput, "no \"rocprofiler-sdk-tool\" array: not rocprofv3 JSON");
  }
  static Status WrongType(std::string_view what, std::string_view want) {
    return MakeError(StatusCode::kInvalidInput, "rocprofv3 JSON: \"{}\" is not {}", what, want);
  }
  Status JsonError(error_code e, od::document* doc) const {
    if (e == simdjson::INCOMPLETE_ARRAY_OR_OBJECT || e == simdjson::UNCLOSED_STRING)
      return MakeError(StatusCode::kInvalidInput,
                       "truncated JSON: the document ends inside an unclosed object or array after {} bytes", size_);
    if (e == simdjson::UTF8_ERROR) return MakeError(StatusCode::kInvalidInput, "invalid JSON: not valid UTF-8");
    const char* loc = nullptr;
    if (doc && doc->current_location().get(loc) == simdjson::SUCCESS && loc >= data_ && loc <= data_ + size_)
      return MakeError(StatusCode::kInvalidInput, "invalid JSON near byte {} ({})", loc - data_,
                       simdjson::error_message(e));
    return MakeError(StatusCode::kInvalidInput, "invalid JSON ({})", simdjson::error_message(e));
  }

  // The value of a section that must be an array / object: `out` set, or an error naming it.
  Status SectionArray(od::value v, std::string_view name, od::array& out, od::document& doc) {
    if (auto e = v.get_array().get(out)) return e == simdjson::INCORRECT_TYPE ? WrongType(name, "an array") : JsonError(e, &doc);
    return OkStatus();
  }
  Status SectionObject(od::value v, std::string_view name, od::object& out, od::document& doc) {
    if (auto e = v.get_object().get(out)) return e == simdjson::INCORRECT_TYPE ? WrongType(name, "an object") : JsonError(e, &doc);
    return OkStatus();
  }

  Status ReadProcess(od::object& p, od::document& doc) {
    for (auto fr : p) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return JsonError(e, &doc);
      const std::string_view key = Key(f);
      if (key == "metadata") {
        od::object m;
        OVERLAPPROF_RETURN_IF_ERROR(SectionObject(f.value(), "metadata", m, doc));
        OVERLAPPROF_RETURN_IF_ERROR(ReadMetadata(m, doc));
      } else if (key == "agents") {
        od::array a;
        OVERLAPPROF_RETURN_IF_ERROR(SectionArray(f.value(), "agents", a, doc));
        OVERLAPPROF_RETURN_IF_ERROR(EachRecord(a, doc, [&](od::object& o) { return ReadAgent(o); }));
      } else if (key == "strings") {
        od::object s;
        OVERLAPPROF_RETURN_IF_ERROR(SectionObject(f.value(), "strings", s, doc));
        OVERLAPPROF_RETURN_IF_ERROR(ReadStrings(s, doc));
      } else if (key == "kernel_symbols") {
        od::array a;
        OVERLAPPROF_RETURN_IF_ERROR(SectionArray(f.value(), "kernel_symbols", a, doc));
        OVERLAPPROF_RETURN_IF_ERROR(EachRecord(a, doc, [&](od::object& o) { return ReadSymbol(o); }));
      } else if (key == "buffer_records") {
        od::object b;
        OVERLAPPROF_RETURN_IF_ERROR(SectionObject(f.value(), "buffer_records", b, doc));
        OVERLAPPROF_RETURN_IF_ERROR(ReadBufferRecords(b, doc));
      }
    }
    return OkStatus();
  }

  // Calls `fn` on each element of `a` that is an object; `fn` returns the record's error code
  // (SUCCESS, or a record-level one: counted as malformed and skipped).
  template <typename Fn>
  Status EachRecord(od::array& a, od::document& doc, Fn&& fn) {
    for (auto er : a) {
      od::value v;
      if (auto e = std::move(er).get(v)) return JsonError(e, &doc);
      od::object o;
      error_code e = v.get_object().get(o);
      if (e == simdjson::SUCCESS) e = fn(o);
      if (e == simdjson::SUCCESS) continue;
      if (!RecordLevel(e)) return JsonError(e, &doc);
      d_->stats.Add(Stat::events_malformed);
    }
    return OkStatus();
  }

  static error_code Int(od::value v, int64_t* out) {
    int64_t x;
    if (auto e = v.get_int64().get(x)) return e;
    *out = x;
    return simdjson::SUCCESS;
  }
  static error_code Uint(od::value v, uint64_t* out) { return v.get_uint64().get(*out); }
  // A time: an unsigned integer of ns inside [0, kMaxTimeNs).
  static error_code Time(od::value v, int64_t* out) {
    uint64_t x;
    if (auto e = v.get_uint64().get(x)) return e;
    if (x >= static_cast<uint64_t>(kMaxTimeNs)) return simdjson::NUMBER_OUT_OF_RANGE;
    *out = static_cast<int64_t>(x);
    return simdjson::SUCCESS;
  }
  static error_code String(od::value v, std::string* out) {
    std::string_view s;
    if (auto e = v.get_string().get(s)) return e;
    out->assign(s);
    return simdjson::SUCCESS;
  }
  // The unsigned member `key` of an object ({"handle": N}, {"internal": N, "external": M}).
  static error_code UintMember(od::value v, std::string_view key, uint64_t* out) {
    od::object o;
    if (auto e = v.get_object().get(o)) return e;
    bool found = false;
    for (auto fr : o) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return e;
      if (Key(f) == key) {
        if (auto e = Uint(f.value(), out)) return e;
        found = true;
      }
    }
    return found ? simdjson::SUCCESS : simdjson::NO_SUCH_FIELD;
  }
  // {"handle": N} (agent, queue and stream ids).
  static error_code Handle(od::value v, uint64_t* out) { return UintMember(v, "handle", out); }
  // {"internal": N, "external": M}: the internal one.
  static error_code Correlation(od::value v, uint64_t* out) { return UintMember(v, "internal", out); }

  Status ReadMetadata(od::object& m, od::document& doc) {
    for (auto fr : m) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return JsonError(e, &doc);
      const std::string_view key = Key(f);
      error_code e = simdjson::SUCCESS;
      if (key == "pid") {
        e = Int(f.value(), &d_->pid);
      } else if (key == "node") {
        od::object n;
        e = f.value().get_object().get(n);
        if (!e) for (auto nr : n) {
          od::field nf;
          if ((e = std::move(nr).get(nf))) break;
          if (Key(nf) == "hostname") e = String(nf.value(), &d_->host);
          if (e) break;
        }
      } else if (key == "command") {
        od::array a;
        e = f.value().get_array().get(a);
        if (!e) for (auto ar : a) {
          std::string s;
          od::value v;
          if ((e = std::move(ar).get(v)) || (e = String(v, &s))) break;
          d_->command.push_back(std::move(s));
        }
      } else if (key == "config") {
        od::object c;
        e = f.value().get_object().get(c);
        if (!e) for (auto cr : c) {
          od::field cf;
          if ((e = std::move(cr).get(cf))) break;
          const std::string_view ck = Key(cf);
          if (ck == "raw_output_file") e = String(cf.value(), &d_->raw_output_file);
          else if (ck == "output_file") e = String(cf.value(), &d_->output_file);
          else if (ck == "raw_output_path") e = String(cf.value(), &d_->raw_output_path);
          else if (ck == "output_path") e = String(cf.value(), &d_->output_path);
          if (e) break;
        }
      }
      if (e && !RecordLevel(e)) return JsonError(e, &doc);
      if (e) d_->stats.Add(Stat::events_malformed);  // a metadata field of the wrong type: ignored
    }
    return OkStatus();
  }

  error_code ReadAgent(od::object& o) {
    Agent a;
    for (auto fr : o) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return e;
      const std::string_view key = Key(f);
      error_code e = simdjson::SUCCESS;
      if (key == "id") e = Handle(f.value(), &a.handle);
      else if (key == "type") e = Int(f.value(), &a.type);
      else if (key == "logical_node_type_id") e = Int(f.value(), &a.gpu_index);
      else if (key == "node_id") e = Int(f.value(), &a.node_id);
      else if (key == "cu_count") e = Int(f.value(), &a.cu_count);
      else if (key == "name") e = String(f.value(), &a.name);
      else if (key == "product_name") e = String(f.value(), &a.product);
      if (e) return e;
    }
    d_->agents.push_back(std::move(a));
    return simdjson::SUCCESS;
  }

  Status ReadStrings(od::object& s, od::document& doc) {
    for (auto fr : s) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return JsonError(e, &doc);
      const std::string_view key = Key(f);
      if (key == "buffer_records") {
        od::array a;
        OVERLAPPROF_RETURN_IF_ERROR(SectionArray(f.value(), "strings.buffer_records", a, doc));
        OVERLAPPROF_RETURN_IF_ERROR(EachRecord(a, doc, [&](od::object& o) { return ReadKindNames(o); }));
      } else if (key == "marker_api") {
        od::array a;
        OVERLAPPROF_RETURN_IF_ERROR(SectionArray(f.value(), "strings.marker_api", a, doc));
        OVERLAPPROF_RETURN_IF_ERROR(EachRecord(a, doc, [&](od::object& o) { return ReadMessage(o); }));
      }
    }
    return OkStatus();
  }

  // One element of strings.buffer_records: its position is the kind's value. A malformed one
  // keeps its place (empty), so that the kinds after it keep theirs.
  error_code ReadKindNames(od::object& o) {
    KindNames& k = d_->kinds.emplace_back();
    for (auto fr : o) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return e;
      const std::string_view key = Key(f);
      if (key == "kind") {
        if (auto e = String(f.value(), &k.kind)) return e;
      } else if (key == "operations") {
        od::array a;
        if (auto e = f.value().get_array().get(a)) return e;
        for (auto ar : a) {
          od::value v;
          std::string op;
          if (auto e = std::move(ar).get(v)) return e;
          if (auto e = String(v, &op)) return e;
          k.ops.push_back(std::move(op));
        }
      }
    }
    return simdjson::SUCCESS;
  }

  error_code ReadMessage(od::object& o) {
    uint64_t key = 0;
    std::string value;
    bool has_key = false, has_value = false;
    for (auto fr : o) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return e;
      const std::string_view k = Key(f);
      if (k == "key") {
        if (auto e = Uint(f.value(), &key)) return e;
        has_key = true;
      } else if (k == "value") {
        if (auto e = String(f.value(), &value)) return e;
        has_value = true;
      }
    }
    if (!has_key || !has_value) return simdjson::NO_SUCH_FIELD;
    d_->messages[key] = std::move(value);
    return simdjson::SUCCESS;
  }

  // kernel_symbols[]: the name rocprofv3 shows (formatted_kernel_name: demangled, without the
  // ".kd" suffix), else the demangled or mangled one.
  error_code ReadSymbol(od::object& o) {
    uint64_t id = 0;
    bool has_id = false;
    std::string formatted, demangled, mangled;
    for (auto fr : o) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return e;
      const std::string_view key = Key(f);
      error_code e = simdjson::SUCCESS;
      if (key == "kernel_id") {
        e = Uint(f.value(), &id);
        has_id = true;
      } else if (key == "formatted_kernel_name") {
        e = String(f.value(), &formatted);
      } else if (key == "demangled_kernel_name") {
        e = String(f.value(), &demangled);
      } else if (key == "kernel_name") {
        e = String(f.value(), &mangled);
      }
      if (e) return e;
    }
    if (!has_id) return simdjson::NO_SUCH_FIELD;
    std::string& name = !formatted.empty() ? formatted : !demangled.empty() ? demangled : mangled;
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".kd") == 0) name.resize(name.size() - 3);
    d_->symbols[id] = std::move(name);
    return simdjson::SUCCESS;
  }

  Status ReadBufferRecords(od::object& b, od::document& doc) {
    for (auto fr : b) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return JsonError(e, &doc);
      const std::string_view key = Key(f);
      od::array a;
      if (key == "kernel_dispatch") {
        OVERLAPPROF_RETURN_IF_ERROR(SectionArray(f.value(), "buffer_records.kernel_dispatch", a, doc));
        OVERLAPPROF_RETURN_IF_ERROR(EachRecord(a, doc, [&](od::object& o) { return ReadDispatch(o); }));
      } else if (key == "memory_copy") {
        OVERLAPPROF_RETURN_IF_ERROR(SectionArray(f.value(), "buffer_records.memory_copy", a, doc));
        OVERLAPPROF_RETURN_IF_ERROR(EachRecord(a, doc, [&](od::object& o) { return ReadCopy(o); }));
      } else if (key == "hip_api" || key == "rccl_api" || key == "marker_api") {
        std::vector<ApiCall>& calls = key == "hip_api" ? d_->hip : key == "rccl_api" ? d_->rccl : d_->marker;
        OVERLAPPROF_RETURN_IF_ERROR(SectionArray(f.value(), fmt::format("buffer_records.{}", key), a, doc));
        OVERLAPPROF_RETURN_IF_ERROR(EachRecord(a, doc, [&](od::object& o) { return ReadApiCall(o, calls); }));
      }
    }
    return OkStatus();
  }

  // One buffer record: the fields every kind has (Record) are read here, each other field is
  // given to `field(key, value)`, which returns an error or SUCCESS. A record without both times
  // or without what `complete()` asks for is malformed (NO_SUCH_FIELD); an end before its start
  // is counted and the record skipped. `*keep` says whether the record is to be kept.
  template <typename Field, typename Complete>
  error_code ReadRecord(od::object& o, Record& r, Field&& field, Complete&& complete, bool* keep) {
    constexpr uint32_t kStart = 1, kEnd = 2;
    uint32_t seen = 0;
    *keep = false;
    for (auto fr : o) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return e;
      const std::string_view key = Key(f);
      error_code e = simdjson::SUCCESS;
      if (key == "start_timestamp") {
        e = Time(f.value(), &r.start);
        seen |= kStart;
      } else if (key == "end_timestamp") {
        e = Time(f.value(), &r.end);
        seen |= kEnd;
      } else if (key == "thread_id") {
        e = Int(f.value(), &r.tid);
      } else if (key == "correlation_id") {
        e = Correlation(f.value(), &r.corr);
      } else {
        e = field(key, f.value());
      }
      if (e) return e;
    }
    if (seen != (kStart | kEnd) || !complete()) return simdjson::NO_SUCH_FIELD;
    if (r.end < r.start) {
      d_->stats.Add(Stat::events_negative_duration);
      return simdjson::SUCCESS;
    }
    *keep = true;
    return simdjson::SUCCESS;
  }

  error_code ReadDispatch(od::object& o) {
    Dispatch d;
    bool has_kernel = false, has_agent = false, has_queue = false, keep = false;
    auto field = [&](std::string_view key, od::value v) -> error_code {
      if (key != "dispatch_info") return simdjson::SUCCESS;
      od::object di;
      error_code e = v.get_object().get(di);
      if (!e) for (auto dr : di) {
        od::field df;
        if ((e = std::move(dr).get(df))) break;
        const std::string_view dk = Key(df);
        if (dk == "agent_id") {
          e = Handle(df.value(), &d.agent);
          has_agent = true;
        } else if (dk == "queue_id") {
          e = Handle(df.value(), &d.queue);
          has_queue = true;
        } else if (dk == "kernel_id") {
          e = Uint(df.value(), &d.kernel_id);
          has_kernel = true;
        }
        if (e) break;
      }
      return e;
    };
    auto complete = [&] { return has_kernel && has_agent && has_queue; };
    if (auto e = ReadRecord(o, d, field, complete, &keep)) return e;
    if (keep) d_->dispatches.push_back(d);
    return simdjson::SUCCESS;
  }

  error_code ReadCopy(od::object& o) {
    Copy c;
    bool keep = false;
    auto field = [&](std::string_view key, od::value v) -> error_code {
      if (key == "operation") return Int(v, &c.op);
      if (key == "bytes") return Int(v, &c.bytes);
      if (key == "src_agent_id") {
        c.has_src = true;
        return Handle(v, &c.src);
      }
      if (key == "dst_agent_id") {
        c.has_dst = true;
        return Handle(v, &c.dst);
      }
      return simdjson::SUCCESS;
    };
    if (auto e = ReadRecord(o, c, field, [] { return true; }, &keep)) return e;
    if (keep) d_->copies.push_back(c);
    return simdjson::SUCCESS;
  }

  error_code ReadApiCall(od::object& o, std::vector<ApiCall>& out) {
    ApiCall c;
    bool has_op = false, keep = false;
    auto field = [&](std::string_view key, od::value v) -> error_code {
      if (key == "kind") return Int(v, &c.kind);
      if (key == "operation") {
        has_op = true;
        return Int(v, &c.op);
      }
      return simdjson::SUCCESS;
    };
    if (auto e = ReadRecord(o, c, field, [&] { return has_op; }, &keep)) return e;
    if (keep) out.push_back(c);
    return simdjson::SUCCESS;
  }

  const char* data_;
  size_t size_;
  Document* d_ = nullptr;
};

// ---- The rank: where the file says it ----

// A non-negative decimal integer, the whole of `s`.
std::optional<int64_t> WholeInt(std::string_view s) {
  int64_t v = 0;
  if (s.empty() || s.size() > 9) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

bool IsRankEnvName(std::string_view n) {
  for (const char* const* e = kRankEnv; *e; ++e)
    if (n == *e) return true;
  return false;
}

std::string RegexEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::strchr("\\^$.|?*+()[]{}", c)) out += '\\';
    out += c;
  }
  return out;
}

// rocprofv3 names its output from a template (config raw_output_path / raw_output_file, keys
// such as %hostname%, %pid%, %rank% and %env{NAME}%) and writes the expanded name beside it
// (output_path / output_file). Where the template has the rank (%rank%, %r, or the environment
// variable of a launcher's rank, src/common/rank_env.h, as %env{..}%, $ENV{..} or %q{..}), the
// expanded name holds it: the template, as a pattern (other keys: any text), matched against it.
std::optional<int64_t> RankFromOutputName(std::string_view raw, std::string_view expanded) {
  if (raw.find('%') == std::string_view::npos && raw.find('$') == std::string_view::npos) return std::nullopt;
  // Paths, short: longer ones (from a hostile file) are not matched, so that the backtracking
  // matcher stays cheap and its recursion shallow.
  if (raw.size() > 512 || expanded.size() > 1024 || std::count(raw.begin(), raw.end(), '%') > 32) return std::nullopt;
  static const std::regex key(R"(%(env|ENV)\{([A-Z0-9_]+)\}%|\$(env|ENV)\{([A-Z0-9_]+)\}|%q\{([A-Z0-9_]+)\}|%[a-z_]+%|%[a-z])");
  std::string pattern;
  bool has_rank = false;
  size_t pos = 0;
  for (auto it = std::regex_iterator<std::string_view::const_iterator>(raw.begin(), raw.end(), key);
       it != std::regex_iterator<std::string_view::const_iterator>(); ++it) {
    const auto& m = *it;
    pattern += RegexEscape(raw.substr(pos, static_cast<size_t>(m.position(0)) - pos));
    pos = static_cast<size_t>(m.position(0) + m.length(0));
    const std::string k = m.str(0);
    const std::string env = m[2].matched ? m.str(2) : m[4].matched ? m.str(4) : m[5].matched ? m.str(5) : "";
    const bool rank = k == "%rank%" || k == "%r" || (!env.empty() && IsRankEnvName(env));
    if (rank && !has_rank) {
      pattern += "([0-9]+)";
      has_rank = true;
    } else {
      pattern += rank ? "[0-9]+" : ".*?";
    }
  }
  if (!has_rank) return std::nullopt;
  pattern += RegexEscape(raw.substr(pos));
  std::smatch m;
  const std::string text(expanded);
  try {
    if (!std::regex_match(text, m, std::regex(pattern))) return std::nullopt;
  } catch (const std::regex_error&) {
    return std::nullopt;
  }
  return WholeInt(m.str(1));
}

// `--rank N` / `--rank=N` among the arguments (a script's own option; torchrun's workers get
// RANK in their environment, which rocprofv3 does not write), and `--local_rank` / `--local-rank`
// (torch.distributed.launch) for the local rank.
void RankFromCommandLine(const std::vector<std::string>& args, std::optional<int64_t>* rank,
                         std::optional<int64_t>* local_rank) {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string_view a = args[i];
    for (auto [name, out] : {std::pair<std::string_view, std::optional<int64_t>*>{"--rank", rank},
                             {"--local_rank", local_rank},
                             {"--local-rank", local_rank}}) {
      if (a == name && i + 1 < args.size()) {
        if (auto v = WholeInt(args[i + 1])) *out = v;
      } else if (a.size() > name.size() && a.substr(0, name.size()) == name && a[name.size()] == '=') {
        if (auto v = WholeInt(a.substr(name.size() + 1))) *out = v;
      }
    }
  }
}

// "rank<N>" in the file's name (case-insensitive; "rank3", "rank_3", "rank-3"), not inside a
// longer word ("crank3", "rank3x" do not count).
std::optional<int64_t> RankFromFileName(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  std::optional<int64_t> found;
  for (size_t i = lower.find("rank"); i != std::string::npos; i = lower.find("rank", i + 1)) {
    if (i > 0 && std::isalpha(static_cast<unsigned char>(lower[i - 1]))) continue;
    size_t j = i + 4;
    if (j < lower.size() && (lower[j] == '_' || lower[j] == '-')) ++j;
    size_t k = j;
    while (k < lower.size() && std::isdigit(static_cast<unsigned char>(lower[k]))) ++k;
    if (k == j || (k < lower.size() && alnum(lower[k]))) continue;
    auto v = WholeInt(std::string_view(lower).substr(j, k - j));
    if (!v) continue;
    if (found && *found != *v) return std::nullopt;  // two different ranks named: neither
    found = v;
  }
  return found;
}

// ---- Build: the rank's trace from the records ----

class Builder {
 public:
  Builder(Document& d, const ImportOptions& o) : d_(d), opts_(o) {}

  StatusOr<RankTrace> Build(std::string_view file_name) {
    t_.stats = d_.stats;
    if (d_.dispatches.empty())
      return MakeError(StatusCode::kInvalidInput,
                       "rocprofv3 trace without kernel dispatches: no GPU kernels were traced (rocprofv3 "
                       "--kernel-trace, or --runtime-trace / --sys-trace)");
    Meta(file_name);
    Agents();
    Kernels();
    Copies();
    HostCalls();
    Markers();
    LinkAndNameOps();
    if (!opts_.store_needs.host_calls) std::vector<HostCall>().swap(t_.host_calls);
    t_.Finalize();
    return std::move(t_);
  }

 private:
  std::string_view OpName(int64_t kind, int64_t op) const {
    if (kind < 0 || op < 0 || static_cast<uint64_t>(kind) >= d_.kinds.size()) return {};
    const KindNames& k = d_.kinds[static_cast<size_t>(kind)];
    return static_cast<uint64_t>(op) < k.ops.size() ? std::string_view(k.ops[static_cast<size_t>(op)]) : std::string_view();
  }
  uint32_t Intern(std::string_view s) {
    if (ValidUtf8Prefix(s) == s.size()) return t_.names.Intern(s);
    size_t replaced = 0;
    const std::string clean = SanitizeUtf8(s, &replaced);
    t_.stats.Add(Stat::invalid_utf8_replaced, static_cast<int64_t>(replaced));
    return t_.names.Intern(clean);
  }

  void Meta(std::string_view file_name) {
    RunMeta& m = t_.meta;
    m.source_format = "rocprof";
    m.clock_source = "CLOCK_BOOTTIME (rocprofiler-sdk)";
    m.backend = "rccl";
    m.pid = d_.pid;
    m.host = d_.host;
    std::optional<int64_t> rank, local_rank;
    Stat source = Stat::rank_unknown;
    if (auto r = RankFromOutputName(d_.raw_output_path + "/" + d_.raw_output_file,
                                    d_.output_path + "/" + d_.output_file)) {
      rank = r;
      source = Stat::rocprof_rank_from_output_name;
    }
    std::optional<int64_t> cmd_rank;
    RankFromCommandLine(d_.command, &cmd_rank, &local_rank);
    if (!rank && cmd_rank) {
      rank = cmd_rank;
      source = Stat::rocprof_rank_from_command_line;
    }
    if (!rank) {
      if (auto r = RankFromFileName(file_name)) {
        rank = r;
        source = Stat::rocprof_rank_from_file_name;
      }
    }
    if (rank) m.rank = *rank;
    if (local_rank) m.local_rank = *local_rank;
    t_.stats.Set(source, 1);
  }

  void Agents() {
    // GPU index: logical_node_type_id where the agent has it, else its place among the GPUs by node id.
    std::vector<const Agent*> gpus;
    for (const Agent& a : d_.agents)
      if (a.type == kAgentGpu) gpus.push_back(&a);
    std::stable_sort(gpus.begin(), gpus.end(), [](const Agent* a, const Agent* b) { return a->node_id < b->node_id; });
    for (size_t i = 0; i < gpus.size(); ++i) {
      const Agent& a = *gpus[i];
      gpu_of_[a.handle] = a.gpu_index >= 0 ? a.gpu_index : static_cast<int64_t>(i);
      agent_[a.handle] = &a;
    }
  }
  // The GPU index of an agent handle; kUnknown when it is no GPU agent of the file.
  int64_t Gpu(uint64_t handle) const {
    auto it = gpu_of_.find(handle);
    return it == gpu_of_.end() ? kUnknown : it->second;
  }
  void AddDevice(uint64_t handle) {
    const int64_t gpu = Gpu(handle);
    if (gpu == kUnknown || !devices_seen_.insert(gpu).second) return;
    const Agent& a = *agent_.at(handle);
    Device dev;
    dev.id = gpu;
    dev.name = !a.product.empty() ? a.product : a.name;
    dev.sm_count = a.cu_count;
    t_.devices.push_back(std::move(dev));
  }

  void Kernels() {
    // The device the rank ran on first in `devices` (the one with the most dispatches).
    FileKeyMap<uint64_t, size_t> per_agent;
    for (const Dispatch& d : d_.dispatches) ++per_agent[d.agent];
    std::vector<std::pair<size_t, uint64_t>> order;
    for (auto [agent, n] : per_agent) order.emplace_back(n, agent);
    std::stable_sort(order.begin(), order.end(), [](auto& a, auto& b) { return a.first > b.first; });
    for (auto [n, agent] : order) AddDevice(agent);

    FileKeyMap<uint64_t, std::pair<uint32_t, int8_t>> by_kernel;  // kernel_id -> (name id, blit code)
    t_.activities.reserve(d_.dispatches.size() + d_.copies.size());
    for (const Dispatch& d : d_.dispatches) {
      auto [it, fresh] = by_kernel.try_emplace(d.kernel_id);
      if (fresh) {
        auto s = d_.symbols.find(d.kernel_id);
        const std::string name = s != d_.symbols.end() && !s->second.empty() ? s->second
                                                                             : fmt::format("kernel {}", d.kernel_id);
        it->second.first = Intern(name);
        // ROCm's blit kernels (hipMemcpy*, hipMemset* run as kernels) are memory, not compute.
        const bool copy = name.rfind("__amd_rocclr_copyBuffer", 0) == 0;
        const bool fill = name.rfind("__amd_rocclr_fillBuffer", 0) == 0;
        it->second.second = copy ? 1 : fill ? 2 : 0;
      }
      Activity a;
      a.start_ns = d.start;
      a.end_ns = d.end;
      a.correlation_id = static_cast<int64_t>(d.corr);
      a.name_id = it->second.first;
      a.stream = Stream(d.agent, static_cast<int64_t>(d.queue));
      switch (it->second.second) {
        case 1: a.kind = ActivityKind::kMemcpy, a.category = Category::kMemory; break;
        case 2: a.kind = ActivityKind::kMemset, a.category = Category::kMemory; break;
        default: rank_builder_.AddKernel(t_, a); break;  // compute, or communication by its name
      }
      if (a.end_ns == a.start_ns) t_.stats.Add(Stat::activities_zero_duration);
      t_.activities.push_back(a);
    }
  }

  uint32_t Stream(uint64_t agent, int64_t queue) {
    // Consecutive records mostly share a queue: the last one is tried first.
    if (last_stream_ != kNoIndex && agent == last_agent_ && queue == last_queue_) return last_stream_;
    last_agent_ = agent;
    last_queue_ = queue;
    last_stream_ = StreamOf(agent, queue);
    return last_stream_;
  }
  uint32_t StreamOf(uint64_t agent, int64_t queue) {
    const int64_t gpu = Gpu(agent);
    const uint32_t s = t_.StreamIndex(gpu, queue);
    if (t_.streams[s].name.empty())
      t_.streams[s].name = queue >= 0 ? fmt::format("queue {}", queue) : std::string("memory copies (no queue)");
    return s;
  }

  void Copies() {
    for (const Copy& c : d_.copies) {
      std::string_view dir = OpName(kMemoryCopyKind(), c.op);
      auto is = [&](std::string_view suffix, int64_t value) {
        return dir.empty() ? c.op == value : dir == suffix;
      };
      Activity a;
      a.kind = ActivityKind::kMemcpy;
      a.category = Category::kMemory;
      a.start_ns = c.start;
      a.end_ns = c.end;
      a.bytes = c.bytes >= 0 ? c.bytes : kUnknown;
      a.correlation_id = static_cast<int64_t>(c.corr);
      const int64_t src = c.has_src ? Gpu(c.src) : kUnknown, dst = c.has_dst ? Gpu(c.dst) : kUnknown;
      std::string name;
      if (is("MEMORY_COPY_HOST_TO_DEVICE", 2)) a.copy_kind = kCopyHtoD, name = "Memcpy HtoD";
      else if (is("MEMORY_COPY_DEVICE_TO_HOST", 3)) a.copy_kind = kCopyDtoH, name = "Memcpy DtoH";
      else if (is("MEMORY_COPY_HOST_TO_HOST", 1)) a.copy_kind = kCopyHtoH, name = "Memcpy HtoH";
      else if (is("MEMORY_COPY_DEVICE_TO_DEVICE", 4)) a.copy_kind = kCopyDtoD, name = "Memcpy DtoD";
      else name = "Memcpy";
      if (IsPeerCopy(a.copy_kind, src, dst)) {
        a.copy_kind = kCopyKindPeer;
        name = fmt::format("Memcpy PtoP (device {} -> device {})", src, dst);
      }
      a.name_id = Intern(name);
      const uint64_t on = dst != kUnknown ? c.dst : c.src;
      if (dst != kUnknown || src != kUnknown) AddDevice(on);
      a.stream = Stream(on, -1);
      t_.stats.Add(Stat::activities_unknown_stream);
      if (a.end_ns == a.start_ns) t_.stats.Add(Stat::activities_zero_duration);
      if (a.copy_kind == kCopyKindPeer) RankTraceBuilder::AddPeerCopy(t_, a);
      t_.activities.push_back(a);
    }
  }
  int64_t kMemoryCopyKind() const { return KindIndex("MEMORY_COPY"); }
  int64_t KindIndex(std::string_view name) const {
    for (size_t i = 0; i < d_.kinds.size(); ++i)
      if (d_.kinds[i].kind == name) return static_cast<int64_t>(i);
    return kUnknown;
  }

  void HostCalls() {
    rccl_first_ = d_.hip.size();
    t_.host_calls.reserve(d_.hip.size() + d_.rccl.size());
    for (const std::vector<ApiCall>* calls : {&d_.hip, &d_.rccl}) {
      for (const ApiCall& c : *calls) {
        HostCall h;
        h.start_ns = c.start;
        h.end_ns = c.end;
        h.correlation_id = static_cast<int64_t>(c.corr);
        h.tid = c.tid;
        std::string_view name = OpName(c.kind, c.op);
        h.name_id = Intern(!name.empty() ? std::string(name) : fmt::format("api {}:{}", c.kind, c.op));
        t_.host_calls.push_back(h);
      }
    }
  }

  void Markers() {
    FileKeySet<int64_t> steps_seen;
    constexpr std::string_view kStep = "ProfilerStep#";
    for (const ApiCall& c : d_.marker) {
      const std::string_view op = OpName(c.kind, c.op);
      if (op == "roctxMarkA") continue;  // an instant, not a range
      auto msg = d_.messages.find(c.corr);
      if (msg == d_.messages.end() || msg->second.empty()) continue;
      Range r;
      r.start_ns = c.start;
      r.end_ns = c.end;
      r.tid = c.tid;
      const std::string& text = msg->second;
      r.kind = RangeKind::kAnnotation;
      if (text.rfind(kStep, 0) == 0) {
        if (auto n = WholeInt(std::string_view(text).substr(kStep.size()))) {
          if (!steps_seen.insert(*n).second) {
            t_.stats.Add(Stat::steps_duplicated);
            continue;
          }
          r.kind = RangeKind::kStep;
          r.step = *n;
        }
      }
      if (r.kind == RangeKind::kAnnotation && !opts_.store_needs.annotations) continue;
      r.name_id = Intern(text);
      t_.ranges.push_back(r);
    }
  }

  // RCCL API calls that launch GPU work: the collectives, send and recv, and ncclGroupEnd (which
  // launches what the calls of its group queued).
  static bool LaunchesWork(std::string_view n) {
    static const std::set<std::string, std::less<>> kOps = {
        "ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclBcast", "ncclReduce",
        "ncclAllToAll",  "ncclAllToAllv", "ncclGather",        "ncclScatter",   "ncclSend",  "ncclRecv",
        "ncclGroupEnd"};
    return kOps.count(n) > 0;
  }

  // host thread id -> its RCCL calls that launch work (indices into host_calls), by start.
  using RcclByTid = FileKeyMap<int64_t, std::vector<uint32_t>>;

  // Each activity's launching call (correlation id: a HIP call, or the RCCL call itself), its
  // launch time; then the RCCL call around each launch: communication kernels are named from it
  // (ncclAllGather -> allgather; a group's calls when they agree), and a kernel or copy that an
  // RCCL collective launched is communication by its host call (rule host_op).
  void LinkAndNameOps() {
    if (t_.host_calls.empty()) return;
    RcclByTid rccl_by_tid;
    for (uint32_t i = static_cast<uint32_t>(rccl_first_); i < t_.host_calls.size(); ++i)
      rccl_by_tid[t_.host_calls[i].tid].push_back(i);
    for (auto& [tid, v] : rccl_by_tid)
      std::stable_sort(v.begin(), v.end(), [&](uint32_t a, uint32_t b) { return t_.host_calls[a].start_ns < t_.host_calls[b].start_ns; });
    rank_builder_.LinkLaunches(t_, t_.host_calls, LaunchLink::kImported, [&](uint32_t activity, uint32_t call) {
      Activity& a = t_.activities[activity];
      const int64_t r = call >= rccl_first_ ? static_cast<int64_t>(call) : EnclosingRccl(rccl_by_tid, t_.host_calls[call]);
      if (r < 0) return;
      const std::string_view rname = t_.names.Get(t_.host_calls[static_cast<size_t>(r)].name_id);
      if (!LaunchesWork(rname)) return;
      const Collective op =
          rname == "ncclGroupEnd" ? GroupOp(rccl_by_tid, static_cast<uint32_t>(r)) : NormalizeCollectiveName(rname);
      if (a.comm_op == kNoIndex) {
        if (op == Collective::kUnknown) return;  // a group of mixed calls: no evidence of which, left as it is
        if (a.kind == ActivityKind::kMemset) return;
        RankTraceBuilder::NewCommOp(t_, a, CommRule::kHostOp);  // named below
      }
      CommOp& c = t_.comm_ops[a.comm_op];
      if (c.rule == CommRule::kPeerCopy) return;
      if (op != Collective::kUnknown) c.op = op;
      const HostCall& rc = t_.host_calls[static_cast<size_t>(r)];
      c.host_enter_ns = rc.start_ns;
      c.host_exit_ns = rc.end_ns;
      c.host_tid = rc.tid;
    });
  }

  // The RCCL call (index into host_calls) on h's thread whose span holds h's start; -1: none.
  int64_t EnclosingRccl(const RcclByTid& by_tid, const HostCall& h) const {
    auto t = by_tid.find(h.tid);
    if (t == by_tid.end()) return -1;
    const std::vector<uint32_t>& v = t->second;
    auto it = std::upper_bound(v.begin(), v.end(), h.start_ns,
                               [&](int64_t s, uint32_t i) { return s < t_.host_calls[i].start_ns; });
    // Calls of one thread nest or follow each other: the innermost holding h is the last
    // started before it that is still open; look back a few.
    for (int n = 0; it != v.begin() && n < 8; ++n) {
      --it;
      const HostCall& c = t_.host_calls[*it];
      if (c.start_ns <= h.start_ns && h.start_ns <= c.end_ns) return *it;
    }
    return -1;
  }

  // The collective of the group ncclGroupEnd `end` closes: the calls on its thread since the
  // matching ncclGroupStart, when they are all one collective (kSendRecv for sends and
  // receives); kUnknown when they differ or none is found.
  Collective GroupOp(const RcclByTid& by_tid, uint32_t end) const {
    const HostCall& e = t_.host_calls[end];
    auto t = by_tid.find(e.tid);
    if (t == by_tid.end()) return Collective::kUnknown;
    const std::vector<uint32_t>& v = t->second;
    auto pos = std::find(v.begin(), v.end(), end);
    std::set<Collective> ops;
    int depth = 0;
    while (pos != v.begin()) {
      --pos;
      const std::string_view n = t_.names.Get(t_.host_calls[*pos].name_id);
      if (n == "ncclGroupEnd") ++depth;
      else if (n == "ncclGroupStart" && depth-- == 0) break;
      else if (LaunchesWork(n)) ops.insert(NormalizeCollectiveName(n));
    }
    if (ops.empty()) return Collective::kUnknown;
    if (ops.size() == 1) return *ops.begin();
    if (ops == std::set<Collective>{Collective::kRecv, Collective::kSend}) return Collective::kSendRecv;
    return Collective::kUnknown;
  }

  Document& d_;
  const ImportOptions& opts_;
  RankTrace t_;
  RankTraceBuilder rank_builder_;  // comm ops by kernel name and peer copy, launch links
  FileKeyMap<uint64_t, int64_t> gpu_of_;  // GPU agent handle -> GPU index
  FileKeyMap<uint64_t, const Agent*> agent_;
  FileKeySet<int64_t> devices_seen_;
  size_t rccl_first_ = 0;      // host_calls from here on are RCCL calls
  uint64_t last_agent_ = 0;    // Stream's last answer
  int64_t last_queue_ = 0;
  uint32_t last_stream_ = kNoIndex;
};

bool SkipTo(std::string_view text, size_t* i) {
  while (*i < text.size() && (text[*i] == ' ' || text[*i] == '\n' || text[*i] == '\r' || text[*i] == '\t')) ++*i;
  return *i < text.size();
}

class RocprofImporter : public OneRankImporter {
 public:
  std::string_view name() const override { return "rocprof"; }
  std::string_view description() const override {
    return "rocprofv3 (ROCm rocprofiler-sdk) JSON, .json or .json.gz (docs/rocprof.md)";
  }
  int Probe(std::string_view head) const override { return ProbeRocprof(head); }
  StatusOr<RankTrace> Import(const std::string& path, const ImportOptions& options) const override {
    ImportScratch local;
    ImportScratch& scratch = options.scratch ? *options.scratch : local;
    OVERLAPPROF_RETURN_IF_ERROR(ReadInputFileInto(path, scratch.buffer, scratch.compressed));
    const InputBuffer& b = scratch.buffer;
    StatusOr<RankTrace> t = ParseRocprofJson(b.data(), b.size(), b.capacity(),
                                             std::filesystem::path(path).filename().string(), options);
    if (t.ok()) t->meta.source_path = path;
    return t;
  }
};

}  // namespace

bool LooksLikeRocprofJson(std::string_view text) {
  size_t i = text.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;  // UTF-8 BOM
  if (!SkipTo(text, &i) || text[i] != '{') return false;
  ++i;
  if (!SkipTo(text, &i)) return false;
  return text.substr(i, 22) == "\"rocprofiler-sdk-tool\"";
}

int ProbeRocprof(std::string_view head) {
  if (!IsGzip(head)) return LooksLikeRocprofJson(head) ? kProbeScore : 0;
  // The head of a gzip file: inflate what it holds (its first bytes are enough).
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return 0;
  char out[512];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(head.data()));
  z.avail_in = static_cast<uInt>(head.size());
  z.next_out = reinterpret_cast<Bytef*>(out);
  z.avail_out = sizeof out;
  const int rc = inflate(&z, Z_SYNC_FLUSH);
  const size_t n = sizeof out - z.avail_out;
  inflateEnd(&z);
  if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) return 0;
  return LooksLikeRocprofJson(std::string_view(out, n)) ? kProbeScore : 0;
}

StatusOr<RankTrace> ParseRocprofJson(const char* data, size_t size, size_t capacity, std::string_view file_name,
                                     const ImportOptions& options) {
  if (size == 0) return MakeError(StatusCode::kInvalidInput, "empty file");
  Document d;
  {
    // The parser's buffers (about the document's size) are kept from one file to the next when the
    // caller keeps scratch (one thread importing every rank): shared with the Kineto importer, which
    // makes the same simdjson::ondemand::parser there.
    ImportScratch local;
    ImportScratch& scratch = options.scratch ? *options.scratch : local;
    if (!scratch.json_parser) scratch.json_parser = std::make_shared<od::parser>();
    od::parser& parser = *static_cast<od::parser*>(scratch.json_parser.get());
    std::string sanitized;
    if (!simdjson::validate_utf8(data, size)) {
      size_t replaced = 0;
      sanitized = SanitizeUtf8(std::string_view(data, size), &replaced);
      d.stats.Add(Stat::invalid_utf8_replaced, static_cast<int64_t>(replaced));
      sanitized.append(simdjson::SIMDJSON_PADDING, '\0');
      data = sanitized.data();
      size = sanitized.size() - simdjson::SIMDJSON_PADDING;
      capacity = sanitized.size();
    }
    od::document doc;
    Reader reader(data, size);
    if (auto e = parser.iterate(data, size, capacity).get(doc)) {
      if (e == simdjson::CAPACITY)
        return MakeError(StatusCode::kInvalidInput, "JSON document too large for one parse ({} bytes; the limit is 4 GiB)", size);
      return MakeError(StatusCode::kInvalidInput, "invalid JSON ({})", simdjson::error_message(e));
    }
    OVERLAPPROF_RETURN_IF_ERROR(reader.Read(doc, d));
  }
  Builder b(d, options);
  return b.Build(file_name);
}

StatusOr<RankTrace> ParseRocprofText(std::string_view text, std::string_view file_name, const ImportOptions& options) {
  std::string padded(text);
  padded.append(simdjson::SIMDJSON_PADDING, '\0');
  return ParseRocprofJson(padded.data(), text.size(), padded.size(), file_name, options);
}

}  // namespace rocprof

std::unique_ptr<Importer> MakeRocprofImporter() { return std::make_unique<rocprof::RocprofImporter>(); }

}  // namespace overlapprof
