#include "src/store/chunks.h"

namespace overlapprof {

namespace {

inline void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
inline uint64_t Zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
inline int64_t Unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }
// Wrapping difference (two's complement), so any pair of int64 encodes without UB.
inline int64_t Sub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
inline int64_t Add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }

class Cursor {
 public:
  explicit Cursor(std::string_view b) : p_(reinterpret_cast<const uint8_t*>(b.data())), end_(p_ + b.size()) {}
  bool Varint(uint64_t* v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      uint8_t b = *p_++;
      r |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *v = r;
        return true;
      }
    }
    return false;  // more than 10 bytes
  }
  bool Byte(uint8_t* v) {
    if (p_ == end_) return false;
    *v = *p_++;
    return true;
  }
  // The next n bytes, as a view into the blob.
  bool Bytes(uint64_t n, std::string_view* v) {
    if (n > static_cast<uint64_t>(end_ - p_)) return false;
    *v = std::string_view(reinterpret_cast<const char*>(p_), static_cast<size_t>(n));
    p_ += n;
    return true;
  }
  bool AtEnd() const { return p_ == end_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

Status Bad(std::string_view what, size_t i, std::string_view why) {
  return MakeError(StatusCode::kCorrupt, "{} chunk record {}: {}", what, i, why);
}

}  // namespace

std::string EncodeActivities(const Activity* a, size_t n) {
  std::string out;
  out.reserve(n * 12);
  int64_t prev_start = 0, prev_corr = 0;
  for (size_t i = 0; i < n; ++i) {
    const Activity& x = a[i];
    uint8_t flags = (x.correlation_id != kUnknown ? 1 : 0) | (x.bytes != kUnknown ? 2 : 0) |
                    (x.comm_op != kNoIndex ? 4 : 0) | (x.launch_ns != kUnknown ? 8 : 0) | (x.copy_kind ? 16 : 0);
    out.push_back(static_cast<char>(flags));
    out.push_back(static_cast<char>((static_cast<uint8_t>(x.kind) << 4) | static_cast<uint8_t>(x.category)));
    PutVarint(out, Zigzag(Sub(x.start_ns, prev_start)));
    prev_start = x.start_ns;
    PutVarint(out, static_cast<uint64_t>(x.end_ns - x.start_ns));
    PutVarint(out, x.stream == kNoIndex ? 0 : uint64_t{x.stream} + 1);
    PutVarint(out, x.name_id);
    if (flags & 1) {
      PutVarint(out, Zigzag(Sub(x.correlation_id, prev_corr)));
      prev_corr = x.correlation_id;
    }
    if (flags & 2) PutVarint(out, Zigzag(x.bytes));
    if (flags & 4) PutVarint(out, x.comm_op);
    if (flags & 8) PutVarint(out, Zigzag(Sub(x.start_ns, x.launch_ns)));
    if (flags & 16) out.push_back(static_cast<char>(x.copy_kind));
  }
  return out;
}

namespace {

// Reads a varint at p (p < end). kChecked: stops at `end`; unchecked: the caller made
// sure that at least 10 bytes (the longest varint) remain. Returns the byte after it, or
// nullptr when the varint is cut off or longer than 10 bytes.
template <bool kChecked>
inline const uint8_t* ReadVarint(const uint8_t* p, const uint8_t* end, uint64_t* v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (kChecked && p == end) return nullptr;
    const uint8_t b = *p++;
    r |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      return p;
    }
  }
  return nullptr;
}

// One activity record, at most 2 + 6 * 10 + 1 bytes.
constexpr size_t kMaxActivityBytes = 63;

struct ActivityState {
  int64_t prev_start = 0, prev_corr = 0;
};

// Decodes the activity at *pp into *a and advances *pp; nullptr or an error text.
template <bool kChecked>
inline const char* DecodeActivity(const uint8_t** pp, const uint8_t* end, const ChunkLimits& lim, ActivityState& st,
                                  Activity* a) {
  const uint8_t* p = *pp;
  constexpr const char* kTruncated = "truncated";
  if (kChecked && end - p < 2) return kTruncated;
  const uint8_t flags = p[0], kc = p[1];
  p += 2;
  uint64_t start_delta, dur, stream, name;
  if (!(p = ReadVarint<kChecked>(p, end, &start_delta)) || !(p = ReadVarint<kChecked>(p, end, &dur)) ||
      !(p = ReadVarint<kChecked>(p, end, &stream)) || !(p = ReadVarint<kChecked>(p, end, &name)))
    return kTruncated;
  const uint8_t kind = kc >> 4, cat = kc & 0xf;
  if (kind < 1 || kind > 4) return "unknown kind";
  if (cat > 3) return "unknown category";
  if (flags & ~uint8_t{31}) return "unknown flags";
  a->kind = static_cast<ActivityKind>(kind);
  a->category = static_cast<Category>(cat);
  a->start_ns = st.prev_start = Add(st.prev_start, Unzigzag(start_delta));
  if (!TimeInRange(a->start_ns) || dur >= static_cast<uint64_t>(kMaxTimeNs) ||
      !TimeInRange(a->start_ns + static_cast<int64_t>(dur)))
    return "time out of range";
  a->end_ns = a->start_ns + static_cast<int64_t>(dur);
  if (stream > lim.streams) return "stream out of range";
  a->stream = stream == 0 ? kNoIndex : static_cast<uint32_t>(stream - 1);
  if (name >= lim.names) return "name out of range";
  a->name_id = static_cast<uint32_t>(name);
  uint64_t v;
  a->correlation_id = kUnknown;
  if (flags & 1) {
    if (!(p = ReadVarint<kChecked>(p, end, &v))) return kTruncated;
    a->correlation_id = st.prev_corr = Add(st.prev_corr, Unzigzag(v));
  }
  a->bytes = kUnknown;
  if (flags & 2) {
    if (!(p = ReadVarint<kChecked>(p, end, &v))) return kTruncated;
    a->bytes = Unzigzag(v);
  }
  a->comm_op = kNoIndex;
  if (flags & 4) {
    if (!(p = ReadVarint<kChecked>(p, end, &v))) return kTruncated;
    if (v >= lim.comm_ops) return "comm op out of range";
    a->comm_op = static_cast<uint32_t>(v);
  }
  a->launch_ns = kUnknown;
  if (flags & 8) {
    if (!(p = ReadVarint<kChecked>(p, end, &v))) return kTruncated;
    a->launch_ns = Sub(a->start_ns, Unzigzag(v));
    if (!TimeInRange(a->launch_ns)) return "launch time out of range";
  }
  a->copy_kind = 0;
  if (flags & 16) {
    if (kChecked && p == end) return kTruncated;
    a->copy_kind = *p++;
  }
  *pp = p;
  return nullptr;
}

}  // namespace

Status DecodeActivities(std::string_view blob, size_t count, const ChunkLimits& lim, std::vector<Activity>* out,
                        TimeOrder* order) {
  TimeOrder local;
  TimeOrder& ord = order ? *order : local;
  const uint8_t* p = reinterpret_cast<const uint8_t*>(blob.data());
  const uint8_t* const end = p + blob.size();
  ActivityState st;
  for (size_t i = 0; i < count; ++i) {
    Activity a;
    // Bounds are checked once per record where a whole record surely fits, else per byte.
    const char* err = end - p >= static_cast<ptrdiff_t>(kMaxActivityBytes)
                          ? DecodeActivity<false>(&p, end, lim, st, &a)
                          : DecodeActivity<true>(&p, end, lim, st, &a);
    if (err) return Bad("activity", i, err);
    ord.See(a.start_ns, a.end_ns);
    out->push_back(a);
  }
  if (p != end) return Bad("activity", count, "trailing bytes");
  return OkStatus();
}

std::string EncodeHostCalls(const HostCall* h, size_t n) {
  std::string out;
  out.reserve(n * 8);
  int64_t prev_start = 0, prev_corr = 0;
  for (size_t i = 0; i < n; ++i) {
    const HostCall& x = h[i];
    uint8_t flags = (x.correlation_id != kUnknown ? 1 : 0) | (x.tid != kUnknown ? 2 : 0);
    out.push_back(static_cast<char>(flags));
    PutVarint(out, Zigzag(Sub(x.start_ns, prev_start)));
    prev_start = x.start_ns;
    PutVarint(out, static_cast<uint64_t>(x.end_ns - x.start_ns));
    PutVarint(out, x.name_id);
    if (flags & 1) {
      PutVarint(out, Zigzag(Sub(x.correlation_id, prev_corr)));
      prev_corr = x.correlation_id;
    }
    if (flags & 2) PutVarint(out, Zigzag(x.tid));
  }
  return out;
}

Status DecodeHostCalls(std::string_view blob, size_t count, const ChunkLimits& lim, std::vector<HostCall>* out,
                       TimeOrder* order) {
  TimeOrder local;
  TimeOrder& ord = order ? *order : local;
  Cursor c(blob);
  int64_t prev_start = 0, prev_corr = 0;
  for (size_t i = 0; i < count; ++i) {
    uint8_t flags;
    uint64_t start_delta, dur, name, v;
    if (!c.Byte(&flags) || !c.Varint(&start_delta) || !c.Varint(&dur) || !c.Varint(&name))
      return Bad("host call", i, "truncated");
    if (flags & ~uint8_t{3}) return Bad("host call", i, "unknown flags");
    HostCall h;
    h.start_ns = Add(prev_start, Unzigzag(start_delta));
    prev_start = h.start_ns;
    if (!TimeInRange(h.start_ns) || dur >= static_cast<uint64_t>(kMaxTimeNs) ||
        !TimeInRange(h.start_ns + static_cast<int64_t>(dur)))
      return Bad("host call", i, "time out of range");
    h.end_ns = h.start_ns + static_cast<int64_t>(dur);
    ord.See(h.start_ns, h.end_ns);
    if (name >= lim.names) return Bad("host call", i, "name out of range");
    h.name_id = static_cast<uint32_t>(name);
    if (flags & 1) {
      if (!c.Varint(&v)) return Bad("host call", i, "truncated");
      h.correlation_id = Add(prev_corr, Unzigzag(v));
      prev_corr = h.correlation_id;
    }
    if (flags & 2) {
      if (!c.Varint(&v)) return Bad("host call", i, "truncated");
      h.tid = Unzigzag(v);
    }
    out->push_back(h);
  }
  if (!c.AtEnd()) return Bad("host call", count, "trailing bytes");
  return OkStatus();
}

namespace {
constexpr uint32_t kCommRank = 1u << 0, kCommNranks = 1u << 1, kCommSeq = 1u << 2, kCommCount = 1u << 3,
                   kCommBytes = 1u << 4, kCommRootPeer = 1u << 5, kCommStream = 1u << 6, kCommHostEnter = 1u << 7,
                   kCommHostExit = 1u << 8, kCommHostTid = 1u << 9,
                   kCommExtension = 1u << 10,  // extension values follow (the first is launch_id)
                   kCommAllFlags = (1u << 11) - 1;
}  // namespace

std::string EncodeCommOps(const CommOp* c, size_t n) {
  std::string out;
  out.reserve(n * 24);
  std::string_view prev_str[4] = {};
  int64_t prev_seq = 0, prev_enter = 0, prev_exit = 0, prev_tid = 0;
  for (size_t i = 0; i < n; ++i) {
    const CommOp& x = c[i];
    uint32_t flags = (x.comm_rank != kUnknown ? kCommRank : 0) | (x.comm_nranks != kUnknown ? kCommNranks : 0) |
                     (x.seq != kUnknown ? kCommSeq : 0) | (x.count != kUnknown ? kCommCount : 0) |
                     (x.bytes != kUnknown ? kCommBytes : 0) | (x.root_peer != kUnknown ? kCommRootPeer : 0) |
                     (x.stream != kNoIndex ? kCommStream : 0) | (x.host_enter_ns != kUnknown ? kCommHostEnter : 0) |
                     (x.host_exit_ns != kUnknown ? kCommHostExit : 0) | (x.host_tid != kUnknown ? kCommHostTid : 0) |
                     (x.launch_id != kUnknown || x.stream_handle != kUnknown ? kCommExtension : 0);
    PutVarint(out, flags);
    out.push_back(static_cast<char>(x.source));
    const std::string_view strs[4] = {x.communicator, CollectiveName(x.op), x.datatype, x.pg_desc};
    for (int k = 0; k < 4; ++k) {
      if (strs[k] == prev_str[k]) {
        PutVarint(out, 0);
      } else {
        PutVarint(out, uint64_t{strs[k].size()} + 1);
        out.append(strs[k]);
        prev_str[k] = strs[k];
      }
    }
    if (flags & kCommRank) PutVarint(out, Zigzag(x.comm_rank));
    if (flags & kCommNranks) PutVarint(out, Zigzag(x.comm_nranks));
    if (flags & kCommSeq) {
      PutVarint(out, Zigzag(Sub(x.seq, prev_seq)));
      prev_seq = x.seq;
    }
    if (flags & kCommCount) PutVarint(out, Zigzag(x.count));
    if (flags & kCommBytes) PutVarint(out, Zigzag(x.bytes));
    if (flags & kCommRootPeer) PutVarint(out, Zigzag(x.root_peer));
    if (flags & kCommStream) PutVarint(out, x.stream);
    if (flags & kCommHostEnter) {
      PutVarint(out, Zigzag(Sub(x.host_enter_ns, prev_enter)));
      prev_enter = x.host_enter_ns;
    }
    if (flags & kCommHostExit) {
      PutVarint(out, Zigzag(Sub(x.host_exit_ns, prev_exit)));
      prev_exit = x.host_exit_ns;
    }
    if (flags & kCommHostTid) {
      PutVarint(out, Zigzag(Sub(x.host_tid, prev_tid)));
      prev_tid = x.host_tid;
    }
    if (flags & kCommExtension) {
      // Extension values, in the order they were added: launch_id, stream_handle.
      PutVarint(out, 2);
      PutVarint(out, Zigzag(x.launch_id));
      PutVarint(out, Zigzag(x.stream_handle));
    }
  }
  return out;
}

Status DecodeCommOps(std::string_view blob, size_t count, const ChunkLimits& lim, std::vector<CommOp>* out) {
  Cursor c(blob);
  std::string_view prev_str[4] = {};  // views into `blob`
  int64_t prev_seq = 0, prev_enter = 0, prev_exit = 0, prev_tid = 0;
  for (size_t i = 0; i < count; ++i) {
    uint64_t flags, v;
    uint8_t source;
    if (!c.Varint(&flags) || !c.Byte(&source)) return Bad("comm op", i, "truncated");
    if (flags & ~uint64_t{kCommAllFlags}) return Bad("comm op", i, "unknown flags");
    if (source < 1 || source > 3) return Bad("comm op", i, "unknown source");
    std::string_view strs[4];
    for (int k = 0; k < 4; ++k) {
      if (!c.Varint(&v)) return Bad("comm op", i, "truncated");
      if (v == 0) {
        strs[k] = prev_str[k];
      } else {
        if (!c.Bytes(v - 1, &strs[k])) return Bad("comm op", i, "truncated string");
        prev_str[k] = strs[k];
      }
    }
    CommOp& x = out->emplace_back();
    x.source = static_cast<CommSource>(source);
    x.communicator.assign(strs[0]);
    x.op = ParseCollective(strs[1]);
    x.datatype.assign(strs[2]);
    x.pg_desc.assign(strs[3]);
    x.rule = DeriveCommRule(x);
    auto next = [&](int64_t* field) {
      if (!c.Varint(&v)) return false;
      *field = Unzigzag(v);
      return true;
    };
    auto next_delta = [&](int64_t* field, int64_t* prev) {
      if (!c.Varint(&v)) return false;
      *field = *prev = Add(*prev, Unzigzag(v));
      return true;
    };
    bool ok = (!(flags & kCommRank) || next(&x.comm_rank)) && (!(flags & kCommNranks) || next(&x.comm_nranks)) &&
              (!(flags & kCommSeq) || next_delta(&x.seq, &prev_seq)) && (!(flags & kCommCount) || next(&x.count)) &&
              (!(flags & kCommBytes) || next(&x.bytes)) && (!(flags & kCommRootPeer) || next(&x.root_peer));
    if (!ok) return Bad("comm op", i, "truncated");
    if (flags & kCommStream) {
      if (!c.Varint(&v)) return Bad("comm op", i, "truncated");
      if (v >= lim.streams) return Bad("comm op", i, "stream out of range");
      x.stream = static_cast<uint32_t>(v);
    }
    ok = (!(flags & kCommHostEnter) || next_delta(&x.host_enter_ns, &prev_enter)) &&
         (!(flags & kCommHostExit) || next_delta(&x.host_exit_ns, &prev_exit)) &&
         (!(flags & kCommHostTid) || next_delta(&x.host_tid, &prev_tid));
    if (!ok) return Bad("comm op", i, "truncated");
    if (flags & kCommExtension) {
      // n values; the ones this reader does not know (added by a newer minor schema) are skipped.
      uint64_t n;
      if (!c.Varint(&n)) return Bad("comm op", i, "truncated");
      if (n > 64) return Bad("comm op", i, "too many extension values");
      for (uint64_t k = 0; k < n; ++k) {
        int64_t value;
        if (!next(&value)) return Bad("comm op", i, "truncated");
        if (k == 0) x.launch_id = value;
        if (k == 1) x.stream_handle = value;
      }
    }
  }
  if (!c.AtEnd()) return Bad("comm op", count, "trailing bytes");
  return OkStatus();
}

std::string EncodeRanges(const Range* r, size_t n) {
  std::string out;
  out.reserve(n * 12);
  int64_t prev_start = 0, prev_step = 0, prev_tid = 0;
  for (size_t i = 0; i < n; ++i) {
    const Range& x = r[i];
    uint8_t flags = (x.step != kUnknown ? 1 : 0) | (x.tid != kUnknown ? 2 : 0) | (x.stream != kNoIndex ? 4 : 0);
    out.push_back(static_cast<char>(flags));
    out.push_back(static_cast<char>(x.kind));
    PutVarint(out, Zigzag(Sub(x.start_ns, prev_start)));
    prev_start = x.start_ns;
    PutVarint(out, static_cast<uint64_t>(x.end_ns - x.start_ns));
    PutVarint(out, x.name_id);
    if (flags & 1) {
      PutVarint(out, Zigzag(Sub(x.step, prev_step)));
      prev_step = x.step;
    }
    if (flags & 2) {
      PutVarint(out, Zigzag(Sub(x.tid, prev_tid)));
      prev_tid = x.tid;
    }
    if (flags & 4) PutVarint(out, x.stream);
  }
  return out;
}

Status DecodeRanges(std::string_view blob, size_t count, const ChunkLimits& lim, std::vector<Range>* out,
                    TimeOrder* order) {
  TimeOrder local;
  TimeOrder& ord = order ? *order : local;
  Cursor c(blob);
  int64_t prev_start = 0, prev_step = 0, prev_tid = 0;
  for (size_t i = 0; i < count; ++i) {
    uint8_t flags, kind;
    uint64_t start_delta, dur, name, v;
    if (!c.Byte(&flags) || !c.Byte(&kind) || !c.Varint(&start_delta) || !c.Varint(&dur) || !c.Varint(&name))
      return Bad("range", i, "truncated");
    if (flags & ~uint8_t{7}) return Bad("range", i, "unknown flags");
    if (kind < 1 || kind > 3) return Bad("range", i, "unknown kind");
    Range r;
    r.kind = static_cast<RangeKind>(kind);
    r.start_ns = Add(prev_start, Unzigzag(start_delta));
    prev_start = r.start_ns;
    if (!TimeInRange(r.start_ns) || dur >= static_cast<uint64_t>(kMaxTimeNs) ||
        !TimeInRange(r.start_ns + static_cast<int64_t>(dur)))
      return Bad("range", i, "time out of range");
    r.end_ns = r.start_ns + static_cast<int64_t>(dur);
    ord.See(r.start_ns, r.end_ns);
    if (name >= lim.names) return Bad("range", i, "name out of range");
    r.name_id = static_cast<uint32_t>(name);
    if (flags & 1) {
      if (!c.Varint(&v)) return Bad("range", i, "truncated");
      r.step = prev_step = Add(prev_step, Unzigzag(v));
    }
    if (flags & 2) {
      if (!c.Varint(&v)) return Bad("range", i, "truncated");
      r.tid = prev_tid = Add(prev_tid, Unzigzag(v));
    }
    if (flags & 4) {
      if (!c.Varint(&v)) return Bad("range", i, "truncated");
      if (v >= lim.streams) return Bad("range", i, "stream out of range");
      r.stream = static_cast<uint32_t>(v);
    }
    out->push_back(r);
  }
  if (!c.AtEnd()) return Bad("range", count, "trailing bytes");
  return OkStatus();
}

}  // namespace overlapprof
