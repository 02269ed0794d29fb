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

Status DecodeActivities(std::string_view blob, size_t count, const ChunkLimits& lim, std::vector<Activity>* out) {
  Cursor c(blob);
  int64_t prev_start = 0, prev_corr = 0;
  for (size_t i = 0; i < count; ++i) {
    uint8_t flags, kc;
    uint64_t start_delta, dur, stream, name;
    if (!c.Byte(&flags) || !c.Byte(&kc) || !c.Varint(&start_delta) || !c.Varint(&dur) || !c.Varint(&stream) ||
        !c.Varint(&name))
      return Bad("activity", i, "truncated");
    Activity a;
    uint8_t kind = kc >> 4, cat = kc & 0xf;
    if (kind < 1 || kind > 4) return Bad("activity", i, "unknown kind");
    if (cat > 3) return Bad("activity", i, "unknown category");
    if (flags & ~uint8_t{31}) return Bad("activity", i, "unknown flags");
    a.kind = static_cast<ActivityKind>(kind);
    a.category = static_cast<Category>(cat);
    a.start_ns = Add(prev_start, Unzigzag(start_delta));
    prev_start = a.start_ns;
    if (!TimeInRange(a.start_ns) || dur >= static_cast<uint64_t>(kMaxTimeNs) ||
        !TimeInRange(a.start_ns + static_cast<int64_t>(dur)))
      return Bad("activity", i, "time out of range");
    a.end_ns = a.start_ns + static_cast<int64_t>(dur);
    if (stream > lim.streams) return Bad("activity", i, "stream out of range");
    a.stream = stream == 0 ? kNoIndex : static_cast<uint32_t>(stream - 1);
    if (name >= lim.names) return Bad("activity", i, "name out of range");
    a.name_id = static_cast<uint32_t>(name);
    uint64_t v;
    if (flags & 1) {
      if (!c.Varint(&v)) return Bad("activity", i, "truncated");
      a.correlation_id = Add(prev_corr, Unzigzag(v));
      prev_corr = a.correlation_id;
    }
    if (flags & 2) {
      if (!c.Varint(&v)) return Bad("activity", i, "truncated");
      a.bytes = Unzigzag(v);
    }
    if (flags & 4) {
      if (!c.Varint(&v)) return Bad("activity", i, "truncated");
      if (v >= lim.comm_ops) return Bad("activity", i, "comm op out of range");
      a.comm_op = static_cast<uint32_t>(v);
    }
    if (flags & 8) {
      if (!c.Varint(&v)) return Bad("activity", i, "truncated");
      a.launch_ns = Sub(a.start_ns, Unzigzag(v));
      if (!TimeInRange(a.launch_ns)) return Bad("activity", i, "launch time out of range");
    }
    if (flags & 16) {
      if (!c.Byte(&a.copy_kind)) return Bad("activity", i, "truncated");
    }
    out->push_back(a);
  }
  if (!c.AtEnd()) return Bad("activity", count, "trailing bytes");
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

Status DecodeHostCalls(std::string_view blob, size_t count, const ChunkLimits& lim, std::vector<HostCall>* out) {
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

}  // namespace overlapprof
