// The Kineto reader: tokenizes a PyTorch-profiler (Kineto) Chrome-trace JSON stream into
// RawEvents (event.h) for the builder (builder.h), and the top-level keys into its metadata.
//
// Streaming: the file is read as a stream (src/io/input_stream.h: gzip inflated on a second
// thread) into a bounded window of bytes (16 MiB by default). Each time the window is full, its
// whole elements of traceEvents are read in place, their events handed to the builder, and their
// text dropped. Two walkers read the elements, each field as simdjson On-Demand would (the field
// tables, fields.h): first the index walker (index_walk.h; WalkIndexed), over simdjson's stage 1
// (the index of every token) of regions of up to 256 KiB that end between two elements, then the
// walker over the bytes (walk.h; WalkWindow), from where the first stopped; each stops at the
// element the window (or region) cuts, or at one it does not read exactly as On-Demand would: it
// "bails". From there a scanner tracks strings, escapes and bracket depth (64 bytes at a time,
// with bit masks: ScanEvents) to find the last comma between elements in the window; what the
// walkers left before it is parsed in place, wrapped as "[...]", with simdjson On-Demand
// (ParseEvents), which reports every error as it would have over the whole batch. One element
// larger than the window grows it, up to kMaxEventBytes (256 MiB); past that, the file is
// refused. Whitespace between elements is dropped as the window fills, also after a whole element
// and before its comma (the element is then parsed at once: ScanState::need_sep). The other
// top-level keys (distributedInfo, deviceProperties, baseTimeNanoseconds, ...), before or after
// traceEvents, are read as separate small documents of at most kMaxTopLevelValueBytes (64 MiB)
// each. The builder applies baseTimeNanoseconds and resolves ranks in Finish, so where keys are
// in the file does not change the result. Large inputs are built on a thread of their own
// (build_thread.h).
//
// Memory: the window, simdjson's index of one batch when On-Demand parses one (about 2.5x the
// window when resident; a file the walkers read whole never allocates it), the index walker's
// (4 bytes per byte of its longest region: 1 MiB), the inflate queue (16 MiB), and the RankTrace
// being built (docs/performance.md); nothing grows with the size of the JSON text itself.
// Strings are interned from their raw (escaped) bytes, so simdjson's string buffer is never
// filled.
#include <simdjson.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "src/common/decimal.h"
#include "src/common/utf8.h"
#include "src/importers/importer.h"
#include "src/importers/kineto/kineto.h"
#include "src/importers/kineto/build_thread.h"
#include "src/importers/kineto/builder.h"
#include "src/importers/kineto/event.h"
#include "src/importers/kineto/fields.h"
#include "src/importers/kineto/index_walk.h"
#include "src/importers/kineto/walk.h"
#include "src/io/input_file.h"
#include "src/io/input_stream.h"

namespace overlapprof {

namespace od = simdjson::ondemand;
using kineto::BuildThread;
using kineto::EscapedBytes;
using kineto::FieldsSeen;
using kineto::InStringBytes;
using kineto::RawEvent;
using kineto::StringToken;
using kineto::WalkSlot;
using kineto::WalkSpace;

namespace {

constexpr size_t kDefaultWindowBytes = size_t{16} << 20;
constexpr size_t kMinWindowBytes = 16;
// The largest element of traceEvents (and so the largest the window grows).
constexpr size_t kMaxEventBytes = size_t{256} << 20;
// The largest value of a top-level key other than traceEvents (and the largest key).
constexpr size_t kMaxTopLevelValueBytes = size_t{64} << 20;

// "256 MiB", or "1000 bytes" for a size that is no whole number of MiB (tests' small limits).
std::string SizeText(size_t n) {
  return n % (size_t{1} << 20) == 0 ? fmt::format("{} MiB", n >> 20) : fmt::format("{} bytes", n);
}

bool IsJsonSpace(int c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// First '"' or '\\' in p[i, end), or end. SSE2 where there is one (every x86-64).
inline size_t FindQuoteOrBackslash(const char* p, size_t i, size_t end) {
#if defined(__SSE2__)
  const __m128i q = _mm_set1_epi8('"'), b = _mm_set1_epi8('\\');
  while (i + 16 <= end) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    const int m = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, b)));
    if (m) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(m)));
    i += 16;
  }
#endif
  while (i < end && p[i] != '"' && p[i] != '\\') ++i;
  return i;
}

// The characters the scanner looks at outside strings.
struct OutsideTable {
  bool t[256] = {};
  constexpr OutsideTable() {
    for (char c : {'"', '\\', '{', '}', '[', ']', ','}) t[static_cast<unsigned char>(c)] = true;
  }
};
constexpr OutsideTable kOutside;

// The keys of the top-level object that are read; each is also its bit in the object's
// duplicate-key mask (host_name and hostname are one key).
enum class TopKey : int { kTraceEvents, kDistributedInfo, kDeviceProperties, kBaseTime, kHostName };
struct TopField {
  std::string_view key;
  TopKey what;
};
constexpr TopField kTopFields[] = {
    {"traceEvents", TopKey::kTraceEvents},
    {"distributedInfo", TopKey::kDistributedInfo},
    {"deviceProperties", TopKey::kDeviceProperties},
    {"baseTimeNanoseconds", TopKey::kBaseTime},
    {"host_name", TopKey::kHostName},
    {"hostname", TopKey::kHostName},
};
std::optional<TopKey> TopKeyOf(std::string_view key) {
  for (const TopField& f : kTopFields)
    if (key == f.key) return f.what;
  return std::nullopt;
}

// Tokenizes the document: the top-level keys into the builder's metadata, each element of
// traceEvents into a RawEvent that the builder adds. JSON errors are reported here with their
// byte offset (in the document, after a BOM); what the events mean is the builder's business.
// Not thread-safe (one per import).
class KinetoReader {
 public:
  KinetoReader(ByteStream& in, const ImportOptions& o, od::parser& parser, bool skip_bom)
      : in_(in),
        parser_(parser),
        builder_(o),
        skip_bom_(skip_bom),
        max_event_(std::max(o.kineto.max_event_bytes ? o.kineto.max_event_bytes : kMaxEventBytes, kMinWindowBytes)),
        max_top_(std::min(max_event_, kMaxTopLevelValueBytes)),
        walk_(!o.kineto.on_demand_only),
        ix_mode_(o.kineto.index_walk),
        observer_(o.observer) {
    size_t window = std::min(std::max(o.kineto.window_bytes ? o.kineto.window_bytes : kDefaultWindowBytes, kMinWindowBytes),
                             max_event_);
    // No larger than the whole text when its length is known (a small plain file or buffer: the
    // default 16 MiB would be allocated, and its parser index sized, for nothing).
    if (const uint64_t n = in.size_hint(); n > 0 && n < window) window = std::max<size_t>(n, kMinWindowBytes);
    window_ = window;
    // The builder on a thread of its own for large inputs: a stream inflated on a thread (which
    // lends its blocks), or a file of 32 MiB or more.
    const bool build_thread = o.kineto.build_thread > 0 ||
                              (o.kineto.build_thread < 0 && (front_ > 0 || in.size_hint() >= (uint64_t{32} << 20)));
    if (build_thread && walk_) {
      build_ = std::make_unique<BuildThread>(builder_);
      if (!build_->Start()) build_.reset();
    }
    if (front_ > 0) {  // the stream lends its blocks: the window is in them (TakeBlock)
      tail_mem_.reset(new char[front_ + kInputPadding + 2]);
      d_ = tail_mem_.get() + 1;
    } else {
      Allocate(window);
    }
  }

  Status Parse() {
    Status st = ParseDocument();
    if (!st.ok()) {
      // The rest of the stream is still read: a stream error (bad gzip) wins over what the JSON
      // had, as when the whole file was inflated before it was parsed.
      Sync();
      while (!eof_) {
        len_ = pos_ = 0;
        if (Status r = Fill(); !r.ok()) return r;
      }
      return st;
    }
    if (build_) {  // on the builder's thread (its malloc arena holds the trace)
      Status done;
      build_->Call([&] { done = builder_.Finish(); });
      return done;
    }
    return builder_.Finish();
  }

  RankTrace Take() { return B().Take(); }

 private:
  // The builder, every event built (BuildThread).
  kineto::TraceBuilder& B() {
    Sync();
    return builder_;
  }
  void Sync() {
    if (build_) build_->Sync();
  }
  // The slot the walker reads the next event into (cleared), then added by CommitSlot.
  WalkSlot& NextSlot() {
    if (build_) return build_->Slot();
    slot_.Clear();
    return slot_;
  }
  void CommitSlot() {
    if (build_) {
      build_->Commit();
      return;
    }
    if (slot_.dups) builder_.AddStat(Stat::json_duplicate_keys, slot_.dups);
    builder_.AddEvent(slot_.ev);
  }

  // ---- the window: d_[0, len_) holds the stream's bytes from offset base_ --------------------
  // There is one spare byte before d_ (where '[' goes before a batch at d_[0]), and kInputPadding
  // + 1 after d_[cap_] (']' and simdjson's padding after a batch at the end). The window is
  // mem_, memory of its own that the stream's bytes are copied into (Read), or, when the stream
  // lends its blocks (the threaded gzip stream: block_front() > 0), a block itself (lent_), with
  // the bytes kept from the block before (the tail: an element cut by the block's end) copied in
  // front of it: no copy of the rest (TakeBlock). A lent window is always full (len_ == cap_);
  // dropping its first bytes moves its start. A tail too large for the room before a block (an
  // element larger than it), and a window that must grow, go to mem_ until a block's edge.
  void Allocate(size_t cap) {
    Sync();
    std::unique_ptr<char[]> m(new char[cap + kInputPadding + 2]);
    if (len_) std::memcpy(m.get() + 1, d_, len_);
    mem_ = std::move(m);
    d_ = mem_.get() + 1;
    cap_ = cap;
    lent_ = false;
  }
  // Drops d_[0, n): the caller shifts the indices it holds.
  void Compact(size_t n) {
    if (lent_) {
      d_ += n;
      cap_ -= n;
    } else {
      Sync();
      std::memmove(d_, d_ + n, len_ - n);
    }
    len_ -= n;
    base_ += n;
    pos_ -= std::min(pos_, n);
  }
  // Reads more of the stream into the window; eof_ at its end.
  Status Fill() {
    if (eof_) return OkStatus();
    if (front_ > 0 && len_ < front_ && (lent_ || in_.buffered() == 0)) return TakeBlock();
    if (lent_) Allocate(std::max({len_ + 1, std::min(len_ * 2, max_event_), window_}));  // a tail too large to carry
    if (len_ == cap_) return OkStatus();
    ExpectMore(base_);
    StatusOr<size_t> r = in_.Read(d_ + len_, cap_ - len_);
    if (!r.ok()) return r.status();
    if (*r == 0) eof_ = true;
    len_ += *r;
    return OkStatus();
  }
  // The stream's next block becomes the window, the window's bytes (len_ < front_) in front of
  // it. At the end of the stream (or on an error) the window is those bytes, in tail_mem_.
  Status TakeBlock() {
    // The stream takes back the block before the one the window is in: the events that point
    // into it (added before the window moved to the current block) must be built. A window of
    // the reader's own (mem_) is freed below: everything built.
    if (lent_ && build_) {
      build_->SyncTo(block_events_);
    } else {
      Sync();
    }
    std::memmove(tail_mem_.get() + 1, d_, len_);
    d_ = tail_mem_.get() + 1;
    cap_ = front_;
    lent_ = false;
    mem_.reset();
    StatusOr<ByteStream::Block> b = in_.NextBlock();
    if (!b.ok()) return b.status();
    if (b->size == 0) {
      eof_ = true;
      return OkStatus();
    }
    char* const start = b->data - len_;
    std::memcpy(start, d_, len_);
    d_ = start;
    len_ += b->size;
    cap_ = len_;
    lent_ = true;
    lent_utf8_ = b->utf8_valid;
    if (build_) block_events_ = build_->added();  // what points into the blocks before this one
    ExpectMore(base_);
    return OkStatus();
  }
  // Once the text read passes 64 MiB, and again each time it has grown four times: the builder
  // is told how much more to expect (TraceBuilder::ExpectMore), the stream's estimated length
  // over `read` (the bytes before the window: built, or about to be).
  void ExpectMore(uint64_t read) {
    if (read < next_estimate_) return;
    next_estimate_ = read * 4;
    const uint64_t total = in_.EstimatedSize();
    if (total <= read) return;
    const double factor = static_cast<double>(total) / static_cast<double>(read);
    if (build_) {
      build_->Call([&] { builder_.ExpectMore(factor); });
    } else {
      builder_.ExpectMore(factor);
    }
  }
  // Document offset (bytes after the BOM) of d_[i].
  uint64_t At(size_t i) const { return base_ + i - bom_; }
  uint64_t DocumentSize() const { return base_ + len_ - bom_; }

  Status Truncated(bool in_string) const {
    return MakeError(StatusCode::kInvalidInput, "truncated JSON: the document ends inside an unclosed {} after {} bytes",
                     in_string ? "string" : "object or array", DocumentSize());
  }
  Status Invalid(size_t i, std::string_view what) const {
    return MakeError(StatusCode::kInvalidInput, "invalid JSON near byte {} ({})", At(i), what);
  }

  // A syntax error `err` found at d_[from], where every bracket before it, counted blindly
  // (strings skipped), leaves `depth` open. Reads the rest of the stream counting the same way:
  // a document that ends inside a string or a bracket is reported as truncated (its cause, most
  // likely), as the whole-document parse did; and a stream error wins over both.
  Status SyntaxError(Status err, size_t from, int64_t depth) {
    Sync();  // the window is read over
    bool in_string = false, escaped = false;
    for (;;) {
      for (size_t i = from; i < len_; ++i) {
        const char c = d_[i];
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
      if (eof_) break;
      base_ += len_;
      len_ = pos_ = from = 0;
      OVERLAPPROF_RETURN_IF_ERROR(Fill());
    }
    if (in_string || depth > 0) return Truncated(in_string);
    return err;
  }

  // ---- the top level, a byte at a time (keys and small values) -------------------------------
  // The byte at pos_, reading more when needed; -1 at the end of the stream or on an error
  // (then in pending_). While capturing_, d_[keep_, ...) is kept (the window grows up to
  // kMaxTopLevelValueBytes); otherwise everything before pos_ may go.
  int Peek() {
    while (pos_ >= len_) {
      if (eof_ || !pending_.ok()) return -1;
      if (len_ == cap_) {
        const size_t keep = capturing_ ? keep_ : pos_;
        if (keep > 0) {
          Compact(keep);
          if (capturing_) keep_ = 0;
        } else if (cap_ < max_top_) {
          Allocate(std::min(cap_ * 2, max_top_));
        } else {
          pending_ = MakeError(StatusCode::kInvalidInput,
                               "a top-level value larger than {} near byte {}: refused (the limit for keys other "
                               "than traceEvents)",
                               SizeText(max_top_), At(keep_));
          return -1;
        }
      }
      pending_ = Fill();
    }
    return static_cast<unsigned char>(d_[pos_]);
  }
  int SkipSpace() {
    int c;
    while (IsJsonSpace(c = Peek())) ++pos_;
    return c;
  }
  // At -1 from Peek inside an open value: the read error, or the document cut short.
  Status AtEnd(bool in_string) const { return pending_.ok() ? Truncated(in_string) : pending_; }

  // Scans the JSON value at pos_ (a string, an object or array, or a scalar token) to its end.
  // Strings and brackets are tracked, not validated (simdjson validates what is parsed).
  Status ScanTopLevelValue() {
    int c = Peek();
    if (c == -1) return AtEnd(false);
    if (c != '"' && c != '{' && c != '[') {
      while ((c = Peek()) != -1 && c != ',' && c != '}' && c != ']' && !IsJsonSpace(c)) ++pos_;
      return pending_;
    }
    int64_t depth = 0;
    bool in_string = false;
    for (;;) {
      c = Peek();
      if (c == -1) return AtEnd(in_string);
      ++pos_;
      if (in_string) {
        if (c == '\\') {
          if (Peek() == -1) return AtEnd(true);
          ++pos_;
        } else if (c == '"') {
          in_string = false;
          if (depth == 0) return OkStatus();
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return OkStatus();
      }
    }
  }

  Status ParseDocument() {
    OVERLAPPROF_RETURN_IF_ERROR(Fill());
    while (len_ < 3 && !eof_) OVERLAPPROF_RETURN_IF_ERROR(Fill());
    if (skip_bom_ && len_ >= 3 && std::memcmp(d_, "\xEF\xBB\xBF", 3) == 0) pos_ = bom_ = 3;
    if (len_ == 0) {
      if (in_.was_compressed()) return MakeError(StatusCode::kInvalidInput, "empty file (gzip of nothing)");
      return MakeError(StatusCode::kInvalidInput, "empty file");
    }
    while (len_ == pos_ && !eof_) OVERLAPPROF_RETURN_IF_ERROR(Fill());  // a BOM and nothing else?
    if (len_ == pos_) return MakeError(StatusCode::kInvalidInput, "empty file");
    int c = SkipSpace();
    if (c == '[') {
      ++pos_;
      events_depth_ = 1;
      OVERLAPPROF_RETURN_IF_ERROR(StreamEvents(false));
      have_events_ = true;
    } else if (c == '{') {
      ++pos_;
      OVERLAPPROF_RETURN_IF_ERROR(ParseTopObject());
    } else if (c == -1) {
      if (!pending_.ok()) return pending_;
      return SyntaxError(Invalid(pos_, "no JSON value"), pos_, 0);
    } else {
      return MakeError(StatusCode::kInvalidInput, "not a Chrome-trace JSON: the top level is not an object or array");
    }
    c = SkipSpace();
    if (!pending_.ok()) return pending_;
    if (c != -1)
      return MakeError(StatusCode::kInvalidInput, "invalid JSON: trailing content after the document near byte {}",
                       At(pos_));
    if (!have_events_)
      return MakeError(StatusCode::kInvalidInput, "no \"traceEvents\" array: not a PyTorch-profiler trace");
    return OkStatus();
  }

  // The members of the top-level object; pos_ is just past its '{'.
  Status ParseTopObject() {
    uint32_t seen = 0;
    events_depth_ = 2;
    int c = SkipSpace();
    if (c == '}') {
      ++pos_;
      return OkStatus();
    }
    for (;;) {
      if (c == -1) return AtEnd(false);
      if (c != '"') return SyntaxError(Invalid(pos_, "expected a key"), pos_, 1);
      // The key, raw (escaped) as in the file.
      capturing_ = true;
      keep_ = pos_;
      OVERLAPPROF_RETURN_IF_ERROR(ScanTopLevelValue());
      std::string key(d_ + keep_ + 1, pos_ - keep_ - 2);
      capturing_ = false;
      CountInvalidUtf8(key);
      c = SkipSpace();
      if (c == -1) return AtEnd(false);
      if (c != ':') return SyntaxError(Invalid(pos_, "expected ':' after a key"), pos_, 1);
      ++pos_;
      c = SkipSpace();
      if (c == -1) return AtEnd(false);
      const std::optional<TopKey> top = TopKeyOf(key);
      if (top == TopKey::kTraceEvents) {
        if (!First(seen, static_cast<int>(TopKey::kTraceEvents))) {
          // A later traceEvents is skipped (its text still read, and checked when it is an array).
          if (c == '[') {
            ++pos_;
            OVERLAPPROF_RETURN_IF_ERROR(StreamEvents(true));
          } else {
            OVERLAPPROF_RETURN_IF_ERROR(ScanTopLevelValue());
          }
        } else {
          if (c != '[')
            return MakeError(StatusCode::kInvalidInput, "\"traceEvents\" is not an array near byte {}", At(pos_));
          ++pos_;
          OVERLAPPROF_RETURN_IF_ERROR(StreamEvents(false));
          have_events_ = true;
        }
      } else {
        capturing_ = true;
        keep_ = pos_;
        OVERLAPPROF_RETURN_IF_ERROR(ScanTopLevelValue());
        capturing_ = false;
        if (Status st = ParseTopLevelValue(top, keep_, pos_, seen); !st.ok()) return SyntaxError(st, keep_, 1);
      }
      c = SkipSpace();
      if (c == -1) return AtEnd(false);
      ++pos_;
      if (c == '}') return OkStatus();
      if (c != ',') return SyntaxError(Invalid(pos_ - 1, "expected ',' or '}' after a value"), pos_ - 1, 1);
      c = SkipSpace();
    }
  }

  void CountInvalidUtf8(std::string_view s) {
    if (simdjson::validate_utf8(s.data(), s.size())) return;
    size_t replaced = 0;
    (void)SanitizeUtf8(s, &replaced);
    B().AddStat(Stat::invalid_utf8_replaced, static_cast<int64_t>(replaced));
  }

  // The value of a top-level key other than traceEvents (nullopt: a key not read), d_[from, to),
  // as a document "[value]".
  Status ParseTopLevelValue(std::optional<TopKey> key, size_t from, size_t to, uint32_t& seen) {
    const std::string_view text(d_ + from, to - from);
    if (!key || !First(seen, static_cast<int>(*key))) {
      CountInvalidUtf8(text);  // not read: only its bytes count (as they did in a whole-document parse)
      return OkStatus();
    }
    std::string doc_text;
    doc_text.reserve(text.size() + 2 + kInputPadding);
    doc_text += '[';
    doc_text += text;
    doc_text += ']';
    const uint64_t offset = At(from) - 1;
    if (!simdjson::validate_utf8(doc_text.data(), doc_text.size())) {
      size_t replaced = 0;
      doc_text = SanitizeUtf8(doc_text, &replaced);
      B().AddStat(Stat::invalid_utf8_replaced, static_cast<int64_t>(replaced));
    }
    const size_t n = doc_text.size();
    doc_text.append(kInputPadding, '\0');
    cur_buf_ = doc_text.data();
    cur_size_ = n;
    cur_offset_ = offset;
    od::document doc;
    if (auto e = parser_.iterate(doc_text.data(), n, doc_text.size()).get(doc)) return JsonError(e, nullptr);
    od::array arr;
    if (auto e = doc.get_array().get(arr)) return JsonError(e, &doc);
    for (auto er : arr) {
      od::value v;
      if (auto e = std::move(er).get(v)) return JsonError(e, &doc);
      switch (*key) {
        case TopKey::kDistributedInfo:
          return ParseDistributedInfo(v, &doc);
        case TopKey::kDeviceProperties:
          return ParseDeviceProperties(v, &doc);
        case TopKey::kBaseTime: {
          int64_t base;
          if (ParseJsonNumber(v.raw_json_token(), 0, &base)) B().SetBaseTime(base);
          break;
        }
        case TopKey::kHostName: {
          std::string_view s;
          if (RawString(v, &s)) B().meta().host = B().Text(s);
          break;
        }
        case TopKey::kTraceEvents:  // streamed (StreamEvents), never here
          break;
      }
      break;
    }
    return OkStatus();
  }

  // ---- traceEvents, streamed ---------------------------------------------------------------
  // Scanner state over the elements of an array: inside a string, after a backslash in one, and
  // the bracket depth below the array (0: between its elements). need_sep: an element was parsed
  // before its separator was seen (StreamEvents, whitespace after an element filling the window);
  // the next comma between elements is that separator, not a cut.
  struct ScanState {
    bool in_string = false, escaped = false, need_sep = false;
    int64_t depth = 0;
  };

  // Scans d_[from, to): *cut gets the last comma between elements, *close the array's ']' (and
  // the scan stops there); while s.need_sep, the first comma between elements goes to *sep
  // instead (and clears it). Errors: a '}' between elements.
  // A backslash escapes the next byte inside strings and outside them alike (as simdjson's
  // stage 1 reads it; outside a string it is invalid JSON, which simdjson reports when it
  // parses the batch), so the 64-byte block scan and the byte loop agree on every input.
  Status ScanEvents(ScanState& s, size_t from, size_t to, size_t* cut, size_t* close, size_t* sep) {
    const char* p = d_;
    size_t i = from;
    // The element edges at depth 0 among the commas in `m` (bits of the block at `base`).
    auto commas = [&](uint64_t m, size_t base) {
      if (s.depth != 0 || m == 0) return;
      if (s.need_sep) {
        *sep = base + static_cast<size_t>(__builtin_ctzll(m));
        s.need_sep = false;
        m &= m - 1;
        if (m == 0) return;
      }
      *cut = base + 63 - static_cast<size_t>(__builtin_clzll(m));
    };
#if defined(__SSE2__)
    // 64 bytes at a time: the bit masks of quotes, backslashes, brackets and commas; escaped
    // bytes and the inside of strings from them without a branch per byte (simdjson's stage-1
    // method: odd runs of backslashes, then a prefix XOR of the unescaped quotes).
    uint64_t prev_escaped = s.escaped ? 1 : 0;
    uint64_t prev_in_string = s.in_string ? ~uint64_t{0} : 0;
    const __m128i kQuote = _mm_set1_epi8('"'), kBackslash = _mm_set1_epi8('\\'), kComma = _mm_set1_epi8(','),
                  kOpen = _mm_set1_epi8('{'), kClose = _mm_set1_epi8('}'), k20 = _mm_set1_epi8(0x20);
    for (; i + 64 <= to; i += 64) {
      uint64_t quote = 0, backslash = 0, comma = 0, open = 0, closing = 0;
      for (int k = 0; k < 4; ++k) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 16 * k));
        const __m128i v20 = _mm_or_si128(v, k20);  // '[' -> '{', ']' -> '}'
        auto bits = [&](__m128i eq) {
          return static_cast<uint64_t>(static_cast<uint16_t>(_mm_movemask_epi8(eq))) << (16 * k);
        };
        quote |= bits(_mm_cmpeq_epi8(v, kQuote));
        backslash |= bits(_mm_cmpeq_epi8(v, kBackslash));
        comma |= bits(_mm_cmpeq_epi8(v, kComma));
        open |= bits(_mm_cmpeq_epi8(v20, kOpen));
        closing |= bits(_mm_cmpeq_epi8(v20, kClose));
      }
      const uint64_t escaped = EscapedBytes(backslash, prev_escaped);
      const uint64_t in_string = InStringBytes(quote & ~escaped, prev_in_string);
      const uint64_t outside = ~in_string & ~escaped;
      comma &= outside;
      open &= outside;
      closing &= outside;
      uint64_t brackets = open | closing;
      uint64_t done = 0;  // the bits up to the last bracket handled
      while (brackets) {
        const unsigned b = static_cast<unsigned>(__builtin_ctzll(brackets));
        commas(comma & ((uint64_t{1} << b) - 1) & ~done, i);
        done = (uint64_t{2} << b) - 1;  // b = 63: 0 - 1, every bit
        if (open >> b & 1) {
          ++s.depth;
        } else if (s.depth == 0) {
          if (p[i + b] == '}')
            return SyntaxError(Invalid(i + b, "unbalanced '}' in traceEvents"), i + b, events_depth_);
          *close = i + b;
          return OkStatus();
        } else {
          --s.depth;
        }
        brackets &= brackets - 1;
      }
      commas(comma & ~done, i);
    }
    s.escaped = prev_escaped != 0;
    s.in_string = prev_in_string != 0;
#endif
    // The rest (under 64 bytes, or all without SSE2) a byte at a time.
    while (i < to) {
      if (s.escaped) {
        s.escaped = false;
        ++i;
        continue;
      }
      if (s.in_string) {
        i = FindQuoteOrBackslash(p, i, to);
        if (i == to) break;
        if (p[i] == '\\') s.escaped = true;
        else s.in_string = false;
        ++i;
        continue;
      }
      while (i < to && !kOutside.t[static_cast<unsigned char>(p[i])]) ++i;
      if (i == to) break;
      switch (p[i]) {
        case '\\':
          s.escaped = true;
          break;
        case '"':
          s.in_string = true;
          break;
        case '{':
        case '[':
          ++s.depth;
          break;
        case '}':
        case ']':
          if (s.depth == 0) {
            if (p[i] == '}') return SyntaxError(Invalid(i, "unbalanced '}' in traceEvents"), i, events_depth_);
            *close = i;
            return OkStatus();
          }
          --s.depth;
          break;
        default:  // ','
          commas(1, i);
          break;
      }
      ++i;
    }
    return OkStatus();
  }

  // The elements of an array, pos_ just past its '['; pos_ ends past its ']'. `discard`: a
  // duplicate traceEvents, parsed (checked) but not added.
  Status StreamEvents(bool discard) {
    constexpr size_t npos = SIZE_MAX;
    size_t bs = pos_, scan = pos_, cut = npos;  // batch start, scanned up to, last cut in [bs, scan)
    bool first = true;
    ScanState s;
    // The walker (WalkWindow) takes the whole elements of a full window, and the scanner (with
    // On-Demand) what it leaves: at the batch edges of a window, and anything it bails on.
    const bool walk = walk_ && !discard;
    for (;;) {
      // The events of d_[bs, walked) are added (by the walker); walked_sep: the separator before
      // d_[walked] (npos: none, walked == bs).
      size_t walked = bs, walked_sep = npos;
      if (walk && scan == bs && !s.need_sep) {
        // Batches are parsed when the window is full (or the stream ended), as below: the
        // walker waits for that too, so that the batches On-Demand sees are the same.
        if (len_ < cap_ && !eof_) {
          OVERLAPPROF_RETURN_IF_ERROR(Fill());
          continue;
        }
        size_t close = npos;
        WalkWindow(bs, first, &walked, &walked_sep, &close);
        if (close != npos) {
          pos_ = close + 1;
          return OkStatus();
        }
        scan = walked;  // the rest from a fresh state: the walker stopped between two elements
        if (walked_sep != npos) cut = walked_sep;
      }
      size_t close = npos, sep = npos;
      OVERLAPPROF_RETURN_IF_ERROR(ScanEvents(s, scan, len_, &cut, &close, &sep));
      scan = len_;
      if (sep != npos) {  // the separator after an element parsed early: only whitespace before it
        OVERLAPPROF_RETURN_IF_ERROR(OnlySpaceAfterElement(bs, sep));
        bs = sep + 1;
      }
      if (close != npos) {
        if (s.need_sep) {  // the last element was parsed early
          OVERLAPPROF_RETURN_IF_ERROR(OnlySpaceAfterElement(bs, close));
        } else {
          OVERLAPPROF_RETURN_IF_ERROR(ParseBatchRest(bs, walked_sep, close, first, true, discard));
        }
        pos_ = close + 1;
        return OkStatus();
      }
      if (len_ == cap_) {  // the window is full: parse what is whole, keep the rest
        if (cut != npos) {
          OVERLAPPROF_RETURN_IF_ERROR(ParseBatchRest(bs, walked_sep, cut, first, false, discard));
          first = false;
          bs = cut + 1;
          cut = npos;
        }
        // Whitespace before the next element is not kept (a gzip bomb of spaces streams through).
        while (bs < len_ && IsJsonSpace(static_cast<unsigned char>(d_[bs]))) ++bs;
        // Nor is whitespace after a whole element that fills the window before its separator: the
        // element is parsed now and the separator looked for after the whitespace (need_sep).
        if (bs == 0 && !s.need_sep && s.depth == 0 && !s.in_string) {
          size_t k = len_;
          while (k > bs && IsJsonSpace(static_cast<unsigned char>(d_[k - 1]))) --k;
          if (k > bs && k < len_ && (d_[k - 1] == '}' || d_[k - 1] == ']' || d_[k - 1] == '"')) {
            OVERLAPPROF_RETURN_IF_ERROR(ParseBatch(bs, k, first, false, discard));
            first = false;
            s.need_sep = true;
            bs = len_;
          }
        }
        if (bs > 0) {
          const size_t n = bs;
          pos_ = bs;
          Compact(n);
          bs -= n;
          scan -= n;
        } else if (cap_ < max_event_) {
          Allocate(std::min(cap_ * 2, max_event_));
        } else {
          return MakeError(StatusCode::kInvalidInput,
                           "an element of traceEvents larger than {} near byte {}: refused (the limit on one "
                           "event)",
                           SizeText(max_event_), At(bs));
        }
      }
      if (eof_) return Truncated(s.in_string);
      if (walk && !s.need_sep) {  // bs is between two elements: the walker starts there again
        scan = bs;
        s = ScanState{};
      }
      OVERLAPPROF_RETURN_IF_ERROR(Fill());
    }
  }

  // The walker over the full window from d_[bs] (between two elements; `first`: no batch of the
  // array parsed yet): adds each element that is whole and followed by its separator, up to
  // the first it does not take (cut by the window's end, or one it bails on, which the scanner
  // and On-Demand then read as they would have). *walked: where it stopped (after the separator
  // before that element, or bs), *walked_sep: that separator (npos: none); *close: the array's
  // ']' when it got there. Only text checked as UTF-8 is taken: up to the window's last ASCII
  // byte (every element ends in one, and so does its separator).
  void WalkWindow(size_t bs, bool first, size_t* walked, size_t* walked_sep, size_t* close) {
    // (Known valid when the window is a block the stream checked: the stream's bytes up to its
    // last ASCII byte, which is the window's.)
    size_t valid = len_;
    while (valid > bs && static_cast<unsigned char>(d_[valid - 1]) >= 0x80) --valid;
    if (!(lent_ && lent_utf8_) && !simdjson::validate_utf8(d_ + bs, valid - bs)) return;
    d_[len_] = '\0';  // stops every scan of the walker (the window has padding after cap_)
    const char* const end = d_ + len_;
    const char* p = d_ + (IndexWalker() ? WalkIndexed(bs, walked, walked_sep) : bs);
    for (;;) {
      const char* q = WalkSpace(p);
      if (*q == ']' && q < end && first && *walked_sep == npos_) {  // an empty array
        *close = static_cast<size_t>(q - d_);
        return;
      }
      if (*q != '{') return;
      const char* r = kineto::WalkEvent(q, NextSlot());
      if (!r) return;
      r = WalkSpace(r);
      if (r >= end || (*r != ',' && *r != ']')) return;
      CommitSlot();
      if (*r == ']') {
        *close = static_cast<size_t>(r - d_);
        return;
      }
      *walked_sep = static_cast<size_t>(r - d_);
      p = r + 1;
      *walked = static_cast<size_t>(p - d_);
    }
  }

  // Regions of the window for the index walker: at most kIxRegion bytes, ending just past a ','
  // that follows a '}' and comes before a '{' (whitespace between them): the end of an element
  // nearly always. Where it is not (such a ',' inside a string), the region's stage 1 fails on
  // the string it leaves open, or the last element's tokens end in it, and the walker over the
  // bytes goes on from there.
  static constexpr size_t kIxRegion = size_t{256} << 10;

  // The index walker's stage 1, made on first use; null where it is off (ImportOptions::
  // kineto.index_walk) or simdjson could not make one. Its capacity (the longest region) follows
  // the window's, up to kIxRegion (a small window does not need 1 MiB of index).
  kineto::StructuralIndexer* IndexWalker() {
    if (!ix_tried_) {
      ix_tried_ = true;
      ix_ = kineto::StructuralIndexer::Make(ix_mode_);
    }
    const size_t want = std::min(kIxRegion, cap_);
    if (ix_ && ix_->capacity() < want && !ix_->Reserve(want)) ix_.reset();
    return ix_.get();
  }

  // Just past the last region edge (see kIxRegion) in d_[from, to), or 0.
  size_t IxCut(size_t from, size_t to) const {
    while (to > from + 1) {
      const void* c = memrchr(d_ + from + 1, ',', to - from - 1);
      if (!c) return 0;
      const size_t i = static_cast<size_t>(static_cast<const char*>(c) - d_);
      size_t b = i, a = i + 1;
      while (b > from && IsJsonSpace(static_cast<unsigned char>(d_[b - 1]))) --b;
      while (a < len_ && IsJsonSpace(static_cast<unsigned char>(d_[a]))) ++a;
      if (b > from && d_[b - 1] == '}' && a < len_ && d_[a] == '{') return i + 1;
      to = i;
    }
    return 0;
  }

  // WalkWindow's index walker, from d_[bs]: region by region, each indexed by simdjson's stage
  // 1 and its elements read by IxEvent; returns where the walker over the bytes goes on (after
  // the separator before the first element not taken, or bs). *walked, *walked_sep as
  // WalkWindow's.
  size_t WalkIndexed(size_t bs, size_t* walked, size_t* walked_sep) {
    for (size_t pos = bs;; pos = *walked) {
      const size_t cut = IxCut(pos, std::min(pos + ix_->capacity(), len_));
      kineto::IxTokens indexed;
      if (cut == 0 || !ix_->Index(d_ + pos, cut - pos, &indexed)) return *walked;
      const kineto::IxTokens x = indexed;  // a copy whose address is not taken: kept in registers
      uint32_t k = 0;
      uint64_t taken = 0;
      bool whole = true;  // every element of the region taken
      while (k < x.n) {
        if (!x.Is(k, '{') || !kineto::IxEvent(x, k, NextSlot()) || k >= x.n || !x.Is(k, ',')) {
          whole = false;
          break;
        }
        CommitSlot();
        ++taken;
        *walked_sep = pos + x.ix[k];
        *walked = *walked_sep + 1;
        ++k;
      }
      if (observer_) observer_->kineto_index_walked_events.fetch_add(taken, std::memory_order_relaxed);
      if (!whole || taken == 0) return *walked;  // (taken == 0: no element, which no edge allows)
    }
  }

  // ParseBatch(bs, e, ...) when the walker has added the events before d_[walked_sep] (npos:
  // none): On-Demand reads the rest, d_[walked_sep, e), as WalkEventsDocument has it read.
  Status ParseBatchRest(size_t bs, size_t walked_sep, size_t e, bool first, bool last, bool discard) {
    if (walked_sep == npos_) return ParseBatch(bs, e, first, last, discard);
    if (e <= walked_sep) return OkStatus();  // every element of the batch was walked
    Sync();  // the walked events are built: their last bytes are overwritten
    char saved[kInputPadding + 1];
    std::memcpy(saved, d_ + e, sizeof saved);
    d_[e] = ']';
    std::memset(d_ + e + 1, 0, kInputPadding);
    char* const open = d_ + walked_sep - 2;  // inside the walked events (2 bytes at least)
    const char saved_open[2] = {open[0], open[1]};
    open[0] = '[';
    open[1] = '0';
    Status st = ParseEventsOnDemand(open, e + 1 - (walked_sep - 2), At(walked_sep - 2), false, true);
    open[0] = saved_open[0];
    open[1] = saved_open[1];
    std::memcpy(d_ + e, saved, sizeof saved);
    if (!st.ok()) return SyntaxError(st, bs, events_depth_);
    return st;
  }

  // While need_sep: d_[bs, e) (e: the separator or the array's ']') must be whitespace, else the
  // element parsed early has content after it.
  Status OnlySpaceAfterElement(size_t bs, size_t e) {
    for (size_t i = bs; i < e; ++i)
      if (!IsJsonSpace(static_cast<unsigned char>(d_[i])))
        return SyntaxError(Invalid(i, "content after an element"), bs, events_depth_);
    return OkStatus();
  }

  // Parses the elements in d_[bs, e) (e: a comma between elements or the array's ']') as the
  // document "[...]", in place: the byte before bs becomes '[', d_[e] ']' followed by zeros
  // (simdjson's padding), and the bytes after e are put back afterwards.
  Status ParseBatch(size_t bs, size_t e, bool first, bool last, bool discard) {
    size_t i = bs;
    while (i < e && IsJsonSpace(static_cast<unsigned char>(d_[i]))) ++i;
    if (i == e) {
      if (first && last) return OkStatus();  // an empty array
      return SyntaxError(Invalid(e, "a missing element in traceEvents"), bs, events_depth_);
    }
    char saved[kInputPadding + 1];
    std::memcpy(saved, d_ + e, sizeof saved);
    char* const open = d_ + bs - 1;  // d_ - 1 is mem_[0] (not d_[bs - 1]: bs may be 0)
    *open = '[';
    d_[e] = ']';
    std::memset(d_ + e + 1, 0, kInputPadding);
    Status st = ParseEventsDocument(open, e - bs + 2, At(bs) - 1, discard);
    std::memcpy(d_ + e, saved, sizeof saved);
    if (!st.ok()) return SyntaxError(st, bs, events_depth_);
    return st;
  }

  // One batch "[...]" at buf[0, n) (kInputPadding readable zeros after), at document offset `offset`.
  Status ParseEventsDocument(char* buf, size_t n, uint64_t offset, bool discard) {
    if (walk_ && !discard && simdjson::validate_utf8(buf, n)) return WalkEventsDocument(buf, n, offset);
    return ParseEventsOnDemand(buf, n, offset, discard, false);
  }

  // The batch buf[0, n) by the walker, event by event. Where it bails, at the event after the
  // separator `sep`, the rest goes through On-Demand as the document "[0" + buf[sep, n): the
  // two bytes before the separator (the end of the event before it) are overwritten for the
  // call and put back, and the 0, a stand-in for the events before, is skipped. On-Demand then
  // meets the rest in the state it would have reached over the whole batch (after an element,
  // at its comma, one level deep), so it reports what it would have, at the same offsets.
  Status WalkEventsDocument(char* buf, size_t n, uint64_t offset) {
    const char* const end = buf + n - 1;  // the batch's ']'
    const char* p = buf + 1;
    size_t sep = 0;  // buf[sep]: the separator before the event at p; 0: none yet
    for (;;) {
      const char* q = WalkSpace(p);
      if (*q != '{') break;
      const char* r = kineto::WalkEvent(q, NextSlot());
      if (!r) break;
      r = WalkSpace(r);
      if (r != end && *r != ',') break;
      CommitSlot();
      if (r == end) return OkStatus();
      sep = static_cast<size_t>(r - buf);
      p = r + 1;
    }
    if (sep == 0) return ParseEventsOnDemand(buf, n, offset, false, false);
    Sync();                         // the events before are built: their bytes are overwritten
    char* const s = buf + sep - 2;  // sep >= 3: '[' and an event of 2 bytes at least before it
    const char saved[2] = {s[0], s[1]};
    s[0] = '[';
    s[1] = '0';
    Status st = ParseEventsOnDemand(s, n - (sep - 2), offset + (sep - 2), false, true);
    s[0] = saved[0];
    s[1] = saved[1];
    return st;
  }

  // The batch with simdjson On-Demand (skip_first: its first element is a stand-in, skipped).
  Status ParseEventsOnDemand(const char* buf, size_t n, uint64_t offset, bool discard, bool skip_first) {
    if (parser_.capacity() < n) (void)!parser_.allocate(std::max(n, std::min(cap_ + 2, simdjson::SIMDJSON_MAXSIZE_BYTES)));
    cur_buf_ = buf;
    cur_size_ = n;
    cur_offset_ = offset;
    od::document doc;
    if (auto e = parser_.iterate(buf, n, n + kInputPadding).get(doc)) {
      if (e != simdjson::UTF8_ERROR || buf == sanitized_.data()) return JsonError(e, nullptr);
      // Invalid UTF-8 (raw bytes in a kernel or host name): parse a copy of the batch with each
      // invalid sequence replaced by U+FFFD (src/common/utf8.h), counted. A copy, only then.
      size_t replaced = 0;
      sanitized_ = SanitizeUtf8(std::string_view(buf, n), &replaced);
      B().AddStat(Stat::invalid_utf8_replaced, static_cast<int64_t>(replaced));
      const size_t m = sanitized_.size();
      sanitized_.append(kInputPadding, '\0');
      Status st = ParseEventsOnDemand(sanitized_.data(), m, offset, discard, skip_first);
      sanitized_ = std::string();
      return st;
    }
    od::array arr;
    if (auto e = doc.get_array().get(arr)) return JsonError(e, &doc);
    if (discard) {
      for (auto er : arr) {
        od::value v;
        if (auto e = std::move(er).get(v)) return JsonError(e, &doc);
      }
    } else {
      OVERLAPPROF_RETURN_IF_ERROR(ParseEvents(arr, &doc, skip_first));
    }
    const char* loc = nullptr;
    if (doc.current_location().get(loc) == simdjson::SUCCESS)
      return MakeError(StatusCode::kInvalidInput, "invalid JSON near byte {} (content after an element)",
                       cur_offset_ + static_cast<size_t>(loc - cur_buf_));
    return OkStatus();
  }

  Status JsonError(simdjson::error_code e, od::document* doc, std::string_view what = {}) {
    uint64_t offset = cur_offset_ + cur_size_;
    if (doc) {
      const char* loc = nullptr;
      if (doc->current_location().get(loc) == simdjson::SUCCESS && loc >= cur_buf_ && loc <= cur_buf_ + cur_size_)
        offset = cur_offset_ + static_cast<size_t>(loc - cur_buf_);
    }
    if (!what.empty()) return MakeError(StatusCode::kInvalidInput, "{} near byte {}", what, offset);
    if (e == simdjson::UTF8_ERROR) return MakeError(StatusCode::kInvalidInput, "invalid JSON: not valid UTF-8");
    return MakeError(StatusCode::kInvalidInput, "invalid JSON near byte {} ({})", offset, simdjson::error_message(e));
  }

  // Duplicate keys: the first occurrence of a key overlapprof reads is used, later ones are
  // skipped and counted (json_duplicate_keys, a warning); docs/schema.md. `seen` holds one bit
  // per key of the object being read. Keys overlapprof does not read are never compared.
  bool First(uint32_t& seen, int bit) {
    const uint32_t m = uint32_t{1} << bit;
    if (seen & m) {
      B().AddStat(Stat::json_duplicate_keys, 1);
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
  static bool RawString(od::value& v, std::string_view* out) { return StringToken(v.raw_json_token(), out); }

  // An integer from a number, a numeric string, or a hex string ("0x1f").
  static bool AnyInt(od::value& v, int64_t* out) { return kineto::AnyIntToken(v.raw_json_token(), out); }

  // A value as On-Demand reads it, for the field tables (kineto::EventField, ArgsField).
  struct OdValue {
    od::value& v;
    std::string_view Token() const { return v.raw_json_token(); }
    bool Str(std::string_view* out) const { return StringToken(v.raw_json_token(), out); }
  };

  // A key of an object of metadata read with On-Demand (distributedInfo, an entry of
  // deviceProperties) and what its value does to `dest` (interning strings in `b`); its index in
  // its table is its duplicate-key bit (First).
  template <class Dest>
  struct MetaField {
    std::string_view key;
    void (*apply)(od::value& v, Dest& dest, kineto::TraceBuilder& b);
  };
  template <class Dest, size_t N>
  Status ParseMetaFields(od::object& obj, od::document* doc, const MetaField<Dest> (&fields)[N], Dest& dest) {
    static_assert(N <= 32, "a bit each in a uint32_t");
    uint32_t seen = 0;
    for (auto fr : obj) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return JsonError(e, doc);
      const std::string_view key = KeyOf(f);
      for (size_t k = 0; k < N; ++k) {
        if (key != fields[k].key) continue;
        if (First(seen, static_cast<int>(k))) {
          od::value fv = f.value();
          fields[k].apply(fv, dest, B());
        }
        break;
      }
    }
    return OkStatus();
  }

  Status ParseDistributedInfo(od::value& v, od::document* doc) {
    od::object obj;
    if (v.get_object().get(obj) != simdjson::SUCCESS) return OkStatus();  // ignored if not an object
    using F = MetaField<kineto::TraceBuilder>;
    static constexpr F kFields[] = {
        {"rank",
         [](od::value& v, kineto::TraceBuilder& b, kineto::TraceBuilder&) {
           int64_t n;
           if (AnyInt(v, &n)) b.SetRank(n);
         }},
        {"world_size",
         [](od::value& v, kineto::TraceBuilder& b, kineto::TraceBuilder&) {
           int64_t n;
           if (AnyInt(v, &n)) b.meta().world_size = n;
         }},
        {"backend",
         [](od::value& v, kineto::TraceBuilder& b, kineto::TraceBuilder&) {
           std::string_view s;
           if (RawString(v, &s)) b.meta().backend = b.Text(s);
         }},
        {"nccl_version",
         [](od::value& v, kineto::TraceBuilder& b, kineto::TraceBuilder&) {
           std::string_view s;
           if (RawString(v, &s)) b.meta().nccl_version = b.Text(s);
         }},
        {"pg_config",
         [](od::value& v, kineto::TraceBuilder& b, kineto::TraceBuilder&) {
           od::array pgs;
           std::string_view raw;
           if (v.get_array().get(pgs) == simdjson::SUCCESS && pgs.raw_json().get(raw) == simdjson::SUCCESS)
             b.meta().pg_config_json = std::string(raw);
         }},
    };
    return ParseMetaFields(obj, doc, kFields, B());
  }

  Status ParseDeviceProperties(od::value& v, od::document* doc) {
    od::array arr;
    if (v.get_array().get(arr) != simdjson::SUCCESS) return OkStatus();
    using F = MetaField<Device>;
    static constexpr F kFields[] = {
        {"id", [](od::value& v, Device& d, kineto::TraceBuilder&) { AnyInt(v, &d.id); }},
        {"name",
         [](od::value& v, Device& d, kineto::TraceBuilder& b) {
           std::string_view s;
           if (RawString(v, &s)) d.name = b.Text(s);
         }},
        {"totalGlobalMem", [](od::value& v, Device& d, kineto::TraceBuilder&) { AnyInt(v, &d.total_memory); }},
        {"computeMajor", [](od::value& v, Device& d, kineto::TraceBuilder&) { AnyInt(v, &d.compute_major); }},
        {"computeMinor", [](od::value& v, Device& d, kineto::TraceBuilder&) { AnyInt(v, &d.compute_minor); }},
        {"numSms", [](od::value& v, Device& d, kineto::TraceBuilder&) { AnyInt(v, &d.sm_count); }},
    };
    for (auto er : arr) {
      od::value ev;
      if (auto e = std::move(er).get(ev)) return JsonError(e, doc);
      od::object obj;
      if (ev.get_object().get(obj) != simdjson::SUCCESS) continue;
      Device d;
      OVERLAPPROF_RETURN_IF_ERROR(ParseMetaFields(obj, doc, kFields, d));
      B().AddDevice(std::move(d));
    }
    return OkStatus();
  }

  // An event's args (kineto::kArgsFields); duplicates counted in *dups.
  Status ParseArgs(od::value& v, RawEvent& ev, od::document* doc, int* dups) {
    od::object obj;
    if (v.get_object().get(obj) != simdjson::SUCCESS) return OkStatus();
    FieldsSeen seen;
    for (auto fr : obj) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return JsonError(e, doc);
      const std::string_view key = KeyOf(f);
      od::value fv = f.value();
      kineto::ArgsField(key, OdValue{fv}, ev, seen, dups);
    }
    return OkStatus();
  }

  Status ParseEvents(od::array& arr, od::document* doc, bool skip_first) {
    for (auto er : arr) {
      od::value v;
      if (auto e = std::move(er).get(v)) return JsonError(e, doc);
      if (skip_first) {  // WalkEventsDocument's stand-in
        skip_first = false;
        continue;
      }
      od::object obj;
      if (v.get_object().get(obj) != simdjson::SUCCESS) {
        B().AddMalformed();
        continue;
      }
      RawEvent ev;
      FieldsSeen seen;
      int dups = 0;
      for (auto fr : obj) {
        od::field f;
        if (auto e = std::move(fr).get(f)) return JsonError(e, doc);
        const std::string_view key = KeyOf(f);
        od::value fv = f.value();
        if (!kineto::IsArgsKey(key)) {
          kineto::EventField(key, OdValue{fv}, ev, seen, &dups);
        } else if (kineto::ReadsArgs(ev, seen, &dups)) {
          OVERLAPPROF_RETURN_IF_ERROR(ParseArgs(fv, ev, doc, &dups));
        }
      }
      if (dups) B().AddStat(Stat::json_duplicate_keys, dups);
      B().AddEvent(ev);
    }
    return OkStatus();
  }

  static constexpr size_t npos_ = SIZE_MAX;
  ByteStream& in_;
  const size_t front_ = in_.block_front();  // > 0: the stream lends blocks with this room before them
  od::parser& parser_;
  kineto::TraceBuilder builder_;
  std::unique_ptr<BuildThread> build_;  // null: events built on this thread
  WalkSlot slot_;                       // the walker's event when build_ is null
  const bool skip_bom_;
  const size_t max_event_, max_top_;  // the window's most (bytes): for an event, for a top-level value
  std::unique_ptr<char[]> mem_;       // the window when it is not in a lent block
  std::unique_ptr<char[]> tail_mem_;  // front_ bytes (+ 1 before, padding after): TakeBlock's
  char* d_ = nullptr;
  size_t cap_ = 0, len_ = 0;
  size_t window_ = 0;  // the size of a window of its own
  bool lent_ = false;  // d_ is in a block the stream lent
  bool lent_utf8_ = false;  // that block's ByteStream::Block::utf8_valid
  size_t block_events_ = 0;  // events added before the window moved to the block it is in
  uint64_t base_ = 0;  // stream offset of d_[0]
  size_t bom_ = 0;     // bytes of a UTF-8 BOM skipped at the start (offsets are after it)
  size_t pos_ = 0;     // the top level's cursor in d_
  size_t keep_ = 0;    // while capturing_: the first byte kept
  bool capturing_ = false, eof_ = false, have_events_ = false;
  int64_t events_depth_ = 1;  // brackets open inside traceEvents (1: a top-level array)
  Status pending_;     // a read error or refusal met by Peek
  // The document simdjson parses now (a batch, or a top-level value) and its document offset.
  const char* cur_buf_ = nullptr;
  size_t cur_size_ = 0;
  uint64_t cur_offset_ = 0;
  std::string sanitized_;  // a batch with invalid UTF-8 replaced, while it is parsed
  const bool walk_;        // events by the walker (WalkEventsDocument), On-Demand where it bails
  const int ix_mode_;      // ImportOptions::kineto.index_walk
  ImportObserver* const observer_;  // ImportOptions::observer; null: none
  uint64_t next_estimate_ = uint64_t{64} << 20;  // ExpectMore's next checkpoint (bytes read)
  bool ix_tried_ = false;  // IndexWalker() made ix_ (or found it off)
  std::unique_ptr<kineto::StructuralIndexer> ix_;  // stage 1 of the index walker
};

}  // namespace

StatusOr<RankTrace> ParseKinetoStream(ByteStream& in, const ImportOptions& options, bool skip_bom) {
  ImportScratch local;
  ImportScratch& scratch = options.scratch ? *options.scratch : local;
  if (!scratch.json_parser) scratch.json_parser = std::make_shared<od::parser>();
  KinetoReader p(in, options, *static_cast<od::parser*>(scratch.json_parser.get()), skip_bom);
  OVERLAPPROF_RETURN_IF_ERROR(p.Parse());
  return p.Take();
}

StatusOr<RankTrace> ParseKinetoJson(const char* buffer, size_t size, size_t /*capacity*/, const ImportOptions& options) {
  if (size == 0) return MakeError(StatusCode::kInvalidInput, "empty file");
  std::unique_ptr<ByteStream> in = MemoryStream(std::string_view(buffer, size));
  return ParseKinetoStream(*in, options, false);
}

}  // namespace overlapprof
