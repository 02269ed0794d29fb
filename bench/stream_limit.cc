// stream_limit: the single-core limit for importing a gzip'd Kineto trace (issue 16): inflate the
// file and parse its traceEvents with simdjson, one after the other on one thread, in memory
// that does not grow with the file. No importer code: only what any importer of the file must
// do, so that `overlapprof analyze` on two cores can be compared with it.
//
//   stream_limit FILE.json.gz        (pin it: taskset -c 0 bench/stream_limit FILE)
//
// Steps, repeated until the file ends: zlib inflates the next bytes into a 16 MiB window (the
// inflater overlapprof's import uses, with the same 1 MiB input reads); the whole elements of
// traceEvents in the window are parsed as one document "[...]" with simdjson On-Demand, which
// visits every element and every top-level field of it (key, and the raw token of scalar
// values; nested objects and arrays are skipped by simdjson, as an importer skips what it does
// not read); the rest of the window is moved to its start.
//
// Element edges are found the cheapest way there is for the files bench/gen_kineto writes (and
// Kineto writes): an element of traceEvents ends with a line "  }," (two spaces of indent; JSON
// strings hold no raw newline), searched backwards from the window's end with memrchr. That
// relies on the formatting, which a real importer cannot: it makes the limit faster, never slower.
// Everything before traceEvents' '[' and after its ']' is parsed the same way, as one document each.
//
// Prints: inflated bytes, elements parsed, fields visited, and seconds: inflate (zlib), parse
// (simdjson, plus the edge search and the moves), total (wall, the sum of the two plus the
// file reads); all from a monotonic clock.
#include <simdjson.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

namespace {

namespace od = simdjson::ondemand;
using Clock = std::chrono::steady_clock;

constexpr size_t kWindow = size_t{16} << 20;
constexpr size_t kIn = size_t{1} << 20;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "stream_limit: %s\n", what.c_str());
  std::exit(2);
}

struct Counts {
  uint64_t elements = 0, fields = 0, token_bytes = 0;
};

// Parses buf[0, n) (padded) as one document: an array of elements (traceEvents, or a part of
// it), or anything else (the text around traceEvents, wrapped as an array by the caller).
void ParseArray(od::parser& parser, char* buf, size_t n, Counts& c) {
  od::document doc;
  if (auto e = parser.iterate(buf, n, n + simdjson::SIMDJSON_PADDING).get(doc)) Die(simdjson::error_message(e));
  od::array arr;
  if (auto e = doc.get_array().get(arr)) Die(simdjson::error_message(e));
  for (auto er : arr) {
    od::value v;
    if (auto e = std::move(er).get(v)) Die(simdjson::error_message(e));
    ++c.elements;
    od::object obj;
    if (v.get_object().get(obj) != simdjson::SUCCESS) continue;
    for (auto fr : obj) {
      od::field f;
      if (auto e = std::move(fr).get(f)) Die(simdjson::error_message(e));
      ++c.fields;
      c.token_bytes += static_cast<uint64_t>(f.key().raw()[0]);
      od::value fv = f.value();
      od::json_type t;
      if (fv.type().get(t) == simdjson::SUCCESS && t != od::json_type::object && t != od::json_type::array)
        c.token_bytes += fv.raw_json_token().size();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) Die("usage: stream_limit FILE.json.gz");
  FILE* f = std::fopen(argv[1], "rb");
  if (!f) Die(std::string("cannot open ") + argv[1]);
  const Clock::time_point start = Clock::now();
  double t_inflate = 0, t_parse = 0;

  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) Die("inflateInit2");
  std::unique_ptr<unsigned char[]> in(new unsigned char[kIn]);
  // One byte before the window for '[', the window, then ']' and simdjson's padding.
  std::unique_ptr<char[]> mem(new char[kWindow + simdjson::SIMDJSON_PADDING + 2]);
  char* const d = mem.get() + 1;
  size_t len = 0;
  bool eof = false, in_eof = false;
  od::parser parser;
  if (parser.allocate(kWindow + 2)) Die("simdjson allocate");
  Counts c;
  uint64_t inflated = 0;
  // 0: before traceEvents' '[' (the head, kept whole); 1: inside traceEvents; 2: after its ']'.
  int state = 0;
  std::string head, tail;

  auto fill = [&] {
    const Clock::time_point t = Clock::now();
    while (len < kWindow && !eof) {
      if (z.avail_in == 0 && !in_eof) {
        const size_t r = std::fread(in.get(), 1, kIn, f);
        if (r == 0) in_eof = true;
        z.next_in = in.get();
        z.avail_in = static_cast<uInt>(r);
      }
      z.next_out = reinterpret_cast<Bytef*>(d + len);
      z.avail_out = static_cast<uInt>(kWindow - len);
      const uInt before = z.avail_out;
      const int rc = inflate(&z, Z_NO_FLUSH);
      len += before - z.avail_out;
      inflated += before - z.avail_out;
      if (rc == Z_STREAM_END) {
        eof = true;  // one gzip member (what gen_kineto writes)
      } else if (rc != Z_OK && !(rc == Z_BUF_ERROR && !in_eof)) {
        Die("inflate failed (truncated or corrupt gzip?)");
      }
    }
    t_inflate += std::chrono::duration<double>(Clock::now() - t).count();
  };
  // Parses d[from, to) as "[...]" in place (the byte before `from` and those from `to` are
  // overwritten, then restored).
  auto parse = [&](size_t from, size_t to) {
    char saved[simdjson::SIMDJSON_PADDING + 1];
    std::memcpy(saved, d + to, sizeof saved);
    const char before = d[static_cast<ptrdiff_t>(from) - 1];
    d[static_cast<ptrdiff_t>(from) - 1] = '[';
    d[to] = ']';
    std::memset(d + to + 1, 0, simdjson::SIMDJSON_PADDING);
    ParseArray(parser, d + from - 1, to - from + 2, c);
    std::memcpy(d + to, saved, sizeof saved);
    d[static_cast<ptrdiff_t>(from) - 1] = before;
  };

  while (!(eof && len == 0)) {
    fill();
    const Clock::time_point t = Clock::now();
    size_t consumed = 0;
    if (state == 0) {
      const char* key = static_cast<const char*>(memmem(d, len, "\"traceEvents\"", 13));
      if (!key) {
        if (eof) Die("no traceEvents");
        if (len == kWindow) Die("the text before traceEvents is larger than the window");
        continue;
      }
      const char* open = static_cast<const char*>(std::memchr(key, '[', static_cast<size_t>(d + len - key)));
      if (!open) Die("traceEvents is not an array");
      head.assign(d, static_cast<size_t>(key - d));  // "{ ... ," : parsed at the end with the tail
      consumed = static_cast<size_t>(open - d) + 1;
      state = 1;
    }
    if (state == 1) {
      // The last element end in the window: "\n  }," (or the array's end "\n  }\n  ]").
      size_t cut = 0;
      for (size_t end = len; end > consumed;) {
        const char* nl = static_cast<const char*>(memrchr(d + consumed, '\n', end - consumed));
        if (!nl) break;
        const size_t i = static_cast<size_t>(nl - d);
        if (i + 4 <= len && std::memcmp(nl, "\n  }", 4) == 0 && i + 4 < len &&
            (d[i + 4] == ',' || d[i + 4] == '\n')) {
          cut = i + 4;
          break;
        }
        end = i;
      }
      if (cut > consumed) {
        const bool last = d[cut] == '\n';
        parse(consumed, cut);
        consumed = cut + 1;
        if (last) {
          const char* close = static_cast<const char*>(std::memchr(d + consumed, ']', len - consumed));
          if (!close) Die("no ']' after the last element");
          consumed = static_cast<size_t>(close - d) + 1;
          state = 2;
        }
      } else if (len == kWindow) {
        Die("an element larger than the window");
      }
    }
    if (state == 2) {
      tail.append(d + consumed, len - consumed);
      consumed = len;
    }
    std::memmove(d, d + consumed, len - consumed);
    len -= consumed;
    t_parse += Since(t);
    if (eof && len != 0 && consumed == 0) Die("the file ends inside traceEvents");
  }
  // The other top-level keys: "{...head..." + "...tail}" without traceEvents, parsed as one object.
  {
    const Clock::time_point t = Clock::now();
    std::string doc = head + "\"traceEvents\": []" + tail;
    const size_t n = doc.size();
    doc.append(simdjson::SIMDJSON_PADDING, '\0');
    od::document d2;
    if (auto e = parser.iterate(doc.data(), n, doc.size()).get(d2)) Die(simdjson::error_message(e));
    od::object obj;
    if (auto e = d2.get_object().get(obj)) Die(simdjson::error_message(e));
    for (auto fr : obj) {
      od::field fl;
      if (auto e = std::move(fr).get(fl)) Die(simdjson::error_message(e));
      ++c.fields;
    }
    t_parse += Since(t);
  }
  inflateEnd(&z);
  std::fclose(f);
  const double total = Since(start);
  std::printf("inflated_bytes %llu\nelements %llu\nfields %llu\ntoken_bytes %llu\n", static_cast<unsigned long long>(inflated),
              static_cast<unsigned long long>(c.elements), static_cast<unsigned long long>(c.fields),
              static_cast<unsigned long long>(c.token_bytes));
  std::printf("inflate_s %.3f\nparse_s %.3f\ntotal_s %.3f\n", t_inflate, t_parse, total);
  return 0;
}
