// stream_limit: the single-core limit for importing a gzip'd Kineto trace: inflate the
// file and parse its traceEvents with simdjson, one after the other on one thread, in memory
// that does not grow with the file. No importer code: only what any importer of the file must
// do, so that `overlapprof analyze` on two cores can be compared with it.
//
//   stream_limit FILE.json.gz        (pin it: taskset -c 0 bench/stream_limit FILE)
//
// The limit is measured twice: inflating with zlib (the limit the streaming import's goal was set against), and with ISA-L's
// igzip, the inflater overlapprof's import uses when built with it (src/io/input_stream.cc); a
// faster inflater lowers the limit too.
//
// Steps, repeated until the file ends: the inflater fills a 16 MiB window with the next bytes (the
// same 1 MiB input reads as the importer); the whole elements of traceEvents in the window are
// parsed as one document "[...]" with simdjson On-Demand, which visits every element and every
// top-level field of it (key, and the raw token of scalar values; nested objects and arrays are
// skipped by simdjson, as an importer skips what it does not read); the rest of the window is
// moved to its start.
//
// Element edges are found the cheapest way there is for the files bench/gen_kineto writes (and
// Kineto writes): an element of traceEvents ends with a line "  }," (two spaces of indent; JSON
// strings hold no raw newline), searched backwards from the window's end with memrchr. That
// relies on the formatting, which a real importer cannot: it makes the limit faster, never slower.
// Everything before traceEvents' '[' and after its ']' is parsed the same way, as one document each.
//
// Prints: inflated bytes, elements parsed, fields visited, and seconds for each inflater: inflate,
// parse (simdjson, plus the edge search and the moves), total (wall, the sum of the two plus the
// file reads); all from a monotonic clock. zlib: inflate_s, parse_s, total_s; igzip (built with
// ISA-L only): igzip_inflate_s, igzip_parse_s, igzip_total_s; importer_inflater names the one
// overlapprof uses.
#include <simdjson.h>
#include <zlib.h>
#if defined(OVERLAPPROF_HAVE_ISAL)
#include <isa-l/igzip_lib.h>
#endif

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

// Streaming inflate of one gzip member (what gen_kineto writes) into a window: zlib or igzip.
class Inflate {
 public:
  explicit Inflate(bool igzip) : igzip_(igzip) {
#if defined(OVERLAPPROF_HAVE_ISAL)
    if (igzip_) {
      isal_ = std::make_unique<inflate_state>();
      isal_inflate_init(isal_.get());
      isal_->crc_flag = ISAL_GZIP;  // header parsed, CRC-32 and ISIZE checked, as the importer does
      return;
    }
#endif
    if (inflateInit2(&z_, 15 + 16) != Z_OK) Die("inflateInit2");
  }
  ~Inflate() {
    if (!igzip_) inflateEnd(&z_);
  }
  // Inflates in[0, *in_n) into out[0, out_n): *in_n becomes the input left; returns the bytes out.
  // *end at the member's end.
  size_t Run(unsigned char* in, size_t* in_n, char* out, size_t out_n, bool in_eof, bool* end) {
#if defined(OVERLAPPROF_HAVE_ISAL)
    if (igzip_) {
      isal_->next_in = in;
      isal_->avail_in = static_cast<uint32_t>(*in_n);
      isal_->next_out = reinterpret_cast<uint8_t*>(out);
      isal_->avail_out = static_cast<uint32_t>(out_n);
      if (isal_inflate(isal_.get()) != ISAL_DECOMP_OK) Die("inflate failed (corrupt gzip?)");
      const size_t got = out_n - isal_->avail_out;
      *end = isal_->block_state == ISAL_BLOCK_FINISH;
      if (!*end && got == 0 && isal_->avail_in == *in_n && in_eof) Die("inflate failed (truncated gzip?)");
      *in_n = isal_->avail_in;
      return got;
    }
#endif
    z_.next_in = in;
    z_.avail_in = static_cast<uInt>(*in_n);
    z_.next_out = reinterpret_cast<Bytef*>(out);
    z_.avail_out = static_cast<uInt>(out_n);
    const int rc = inflate(&z_, Z_NO_FLUSH);
    *end = rc == Z_STREAM_END;
    if (rc != Z_OK && rc != Z_STREAM_END && !(rc == Z_BUF_ERROR && !in_eof))
      Die("inflate failed (truncated or corrupt gzip?)");
    *in_n = z_.avail_in;
    return out_n - z_.avail_out;
  }

 private:
  bool igzip_;
  z_stream z_{};
#if defined(OVERLAPPROF_HAVE_ISAL)
  std::unique_ptr<inflate_state> isal_;
#endif
};

struct Result {
  uint64_t inflated = 0;
  Counts c;
  double inflate_s = 0, parse_s = 0, total_s = 0;
};

Result Limit(const char* path, bool igzip) {
  FILE* f = std::fopen(path, "rb");
  if (!f) Die(std::string("cannot open ") + path);
  Result res;
  const Clock::time_point start = Clock::now();
  double& t_inflate = res.inflate_s;
  double& t_parse = res.parse_s;

  Inflate inf(igzip);
  std::unique_ptr<unsigned char[]> in(new unsigned char[kIn]);
  unsigned char* next_in = in.get();
  size_t avail_in = 0;
  // One byte before the window for '[', the window, then ']' and simdjson's padding.
  std::unique_ptr<char[]> mem(new char[kWindow + simdjson::SIMDJSON_PADDING + 2]);
  char* const d = mem.get() + 1;
  size_t len = 0;
  bool eof = false, in_eof = false;
  od::parser parser;
  if (parser.allocate(kWindow + 2)) Die("simdjson allocate");
  Counts& c = res.c;
  uint64_t& inflated = res.inflated;
  // 0: before traceEvents' '[' (the head, kept whole); 1: inside traceEvents; 2: after its ']'.
  int state = 0;
  std::string head, tail;

  auto fill = [&] {
    const Clock::time_point t = Clock::now();
    while (len < kWindow && !eof) {
      if (avail_in == 0 && !in_eof) {
        const size_t r = std::fread(in.get(), 1, kIn, f);
        if (r == 0) in_eof = true;
        next_in = in.get();
        avail_in = r;
      }
      const size_t before_in = avail_in;
      const size_t got = inf.Run(next_in, &avail_in, d + len, kWindow - len, in_eof, &eof);
      next_in += before_in - avail_in;
      len += got;
      inflated += got;  // one gzip member (what gen_kineto writes): eof at its end
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
  std::fclose(f);
  res.total_s = Since(start);
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) Die("usage: stream_limit FILE.json.gz");
  const Result z = Limit(argv[1], false);
  std::printf("inflated_bytes %llu\nelements %llu\nfields %llu\ntoken_bytes %llu\n",
              static_cast<unsigned long long>(z.inflated), static_cast<unsigned long long>(z.c.elements),
              static_cast<unsigned long long>(z.c.fields), static_cast<unsigned long long>(z.c.token_bytes));
  std::printf("inflate_s %.3f\nparse_s %.3f\ntotal_s %.3f\n", z.inflate_s, z.parse_s, z.total_s);
#if defined(OVERLAPPROF_HAVE_ISAL)
  const Result g = Limit(argv[1], true);
  if (g.inflated != z.inflated || g.c.fields != z.c.fields) Die("igzip and zlib disagree");
  std::printf("igzip_inflate_s %.3f\nigzip_parse_s %.3f\nigzip_total_s %.3f\nimporter_inflater igzip\n", g.inflate_s,
              g.parse_s, g.total_s);
#else
  std::printf("importer_inflater zlib\n");
#endif
  return 0;
}
