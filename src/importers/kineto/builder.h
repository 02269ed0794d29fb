#pragma once
// Builds one rank's trace from the events of a PyTorch-profiler (Kineto) trace, in file order:
// GPU activities (with their communication ops from NCCL metadata args or kernel names), host
// runtime calls, step and annotation ranges, stream names from thread_name metadata; then
// (Finish) applies baseTimeNanoseconds, correlates activities with the calls that launched them
// and resolves each op's rank in its process group. Knows nothing of JSON: the reader
// (src/importers/kineto.cc) tokenizes.
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/common/file_key_map.h"
#include "src/common/status.h"
#include "src/importers/importer.h"
#include "src/importers/kineto/event.h"
#include "src/trace/model.h"
#include "src/trace/rank_builder.h"

namespace overlapprof::kineto {

class TraceBuilder {
 public:
  explicit TraceBuilder(const ImportOptions& options) : opts_(options) {}

  // Top-level metadata, as the reader finds it.
  RunMeta& meta() { return t_.meta; }
  void SetRank(int64_t rank) {
    t_.meta.rank = rank;
    have_rank_ = true;
  }
  void SetBaseTime(int64_t ns) {
    base_ns_ = ns;
    have_base_ = true;
  }
  void AddDevice(Device d) { t_.devices.push_back(std::move(d)); }
  // An element of traceEvents that is not an object.
  void AddMalformed() { t_.stats.Add(Stat::events_malformed); }
  void AddStat(Stat s, int64_t n) { t_.stats.Add(s, n); }
  // A string's raw (escaped) text, unescaped: escaped lone surrogates become U+FFFD (counted in
  // invalid_utf8_replaced); an escape JSON does not allow makes Finish fail (the file is not JSON).
  std::string Text(std::string_view raw);
  // One event, in file order.
  void AddEvent(const RawEvent& ev);
  // The events so far are about 1/`factor` of the trace's (the reader's estimate, from the bytes
  // read against the stream's estimated length): room for `factor` times the records so far, and
  // a quarter more, is reserved in the vectors that grow with the events (activities, host
  // calls, launch links), so that they do not grow by doubling: each doubling copies the vector
  // into memory the kernel must first zero, on this thread, while the reader waits (20 GB trace:
  // -0.8 s of `analyze`, and the doubled arrays' peak gone). Address space only until filled.
  // At most a quarter of the machine's memory in all; nothing when reserving fails.
  void ExpectMore(double factor);
  // After the last event: the rank's trace (finalized), or an error when times overflow.
  Status Finish();
  RankTrace Take() { return std::move(t_); }

 private:
  // Start and end (ns) of a complete event; false (counted) when missing, malformed or out of range.
  bool Times(const RawEvent& ev, int64_t* start, int64_t* end);
  void AddActivity(const RawEvent& ev, Cat cat);
  // A cpu_op / user annotation that names a collective, send or recv (nccl:*, c10d::*,
  // record_param_comms with "Collective name"): kept to name SendRecv kernels (NCCL runs
  // all-to-all, and in some builds every collective, as one).
  void MaybeAddHostCommOp(const RawEvent& ev);
  // Fills a comm op from "Collective name" and the other NCCL arguments of `ev`.
  void FillFromMeta(const RawEvent& ev, CommOp& op);
  // Names the SendRecv kernels' ops from their host ops (External id, else the innermost host
  // op around the launch on the launching thread); then peers of send/recv ops.
  void NameFromHostOps();
  uint32_t InternRaw(std::string_view raw);
  // Rule 2: kernels and memcpys launched by a communication host op become communication.
  void ClassifyByHostOp();

  ImportOptions opts_;
  RankTrace t_;
  bool bad_escape_ = false;  // a string held an escape JSON does not allow (Text)
  // Raw (escaped) name -> name id. Keys are copies: the input is streamed (src/importers/kineto.cc),
  // so its bytes are gone after the event. One entry per distinct name.
  struct RawHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, uint32_t, RawHash, std::equal_to<>> raw_intern_;
  // In front of raw_intern_: names met before, in slots picked from a few of their bytes (InternRaw).
  struct InternSlot {
    const std::string* key = nullptr;  // a key of raw_intern_
    uint32_t id = 0;
  };
  static constexpr int kInternCacheBits = 9;
  std::vector<InternSlot> intern_cache_ = std::vector<InternSlot>(size_t{1} << kInternCacheBits);
  RankTraceBuilder rank_builder_;  // comm ops by kernel name and peer copy, launch links
  // Rule 2 (docs/classification.md): (External id, name id) of host ops that launch
  // communication, and (activity index, External id) of kernels and memcpys without identity;
  // resolved in Finish, whatever the order of the events in the file.
  std::vector<std::pair<int64_t, uint32_t>> comm_host_ops_;
  std::vector<std::pair<uint32_t, int64_t>> launched_by_;
  // Keys taken from the file: (pid, tid) of thread_name metadata, step numbers.
  FileKeyMap<std::pair<int64_t, int64_t>, std::string> thread_names_;
  FileKeySet<int64_t> steps_seen_;
  // "Process Group Ranks" of comm ops, by comm op index.
  std::map<size_t, std::string> pg_ranks_;
  // Kept as read (undecoded) and decoded only when a SendRecv kernel needs a name: most traces
  // have none. The input is streamed, so the strings a host op is named by are copied, one after
  // the other, into host_text_ (one arena for all of them): 120 bytes a record besides its
  // strings, where a whole RawEvent with a text of its own took ~340 plus an allocation.
  struct HostCommOp {
    enum Str { kName, kTs, kDur, kColl, kDtype, kPgName, kPgDesc, kPgRanks, kStrCount };
    int64_t ext = kUnknown;            // "External id" decoded
    int64_t start_ns = 0, end_ns = 0;  // decoded in NameFromHostOps
    int64_t tid = kUnknown, in_nelems = kUnknown, group_size = kUnknown, seq = kUnknown;
    int64_t src_rank = kUnknown, dst_rank = kUnknown;
    uint64_t text = 0;                 // offset in host_text_ of the strings, in Str order
    uint32_t len[kStrCount] = {};
  };
  // The RawEvent fields that naming reads (HostOpNames, FillFromMeta), viewing host_text_.
  RawEvent Raw(const HostCommOp& h) const;
  // The op a host op names (normalized; with its NCCL arguments when it has "Collective name"),
  // or false when it names none of the ops a SendRecv kernel can be.
  bool HostOpNames(const RawEvent& h, CommOp& op);
  std::vector<HostCommOp> host_comm_ops_;
  std::string host_text_;
  // Comm ops named only by a SendRecv kernel: (comm op index, the kernel's External id).
  std::vector<std::pair<size_t, int64_t>> unnamed_p2p_;
  // CUDA event records and the waits on them (cuda_sync and cuda_event events), kept where host
  // calls are (ImportOptions::store_needs) and made RankTrace::event_links in Finish.
  struct SyncLink {
    EventLinkKind kind = EventLinkKind::kRecord;
    int64_t correlation = kUnknown, record = kUnknown;  // the call's and (waits) its record's correlation id
    int64_t device = kUnknown, stream = kUnknown, record_stream = kUnknown;
  };
  std::vector<SyncLink> sync_links_;
  void MaybeAddEventLink(const RawEvent& ev, Cat cat);
  void BuildEventLinks();
  // Send/recv ops: comm op index -> (Src Rank, Dst Rank), global ranks; turned into peers in Finish.
  std::map<size_t, std::pair<int64_t, int64_t>> p2p_ranks_;
  int64_t base_ns_ = 0;
  bool have_base_ = false, have_rank_ = false, overflow_ = false;
};

}  // namespace overlapprof::kineto
