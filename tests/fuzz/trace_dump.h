#pragma once
// Every field of a RankTrace, one line each: the importer's whole output as text, so that two
// imports of the same document can be compared for equality (the streaming unit tests, and the
// kineto_stream fuzz target's differential check). Header-only; fmt and the model only.
#include <fmt/format.h>

#include <string>
#include <string_view>

#include "src/trace/model.h"

namespace overlapprof::testing {

inline std::string DumpTrace(const RankTrace& t) {
  std::string s;
  auto add = [&](std::string_view fmt_text, auto&&... a) {
    s += fmt::vformat(fmt_text, fmt::make_format_args(a...));
    s += '\n';
  };
  const RunMeta& m = t.meta;
  add("meta {} {} {} {} {} {} {} {} {}", m.rank, m.world_size, m.pid, m.host, m.clock_source, m.source_format,
      m.backend, m.nccl_version, m.pg_config_json);
  for (size_t i = 0; i < t.names.size(); ++i) add("name {} {}", i, t.names.Get(static_cast<uint32_t>(i)));
  for (const Device& d : t.devices)
    add("device {} {} {} {} {} {}", d.id, d.name, d.compute_major, d.compute_minor, d.total_memory, d.sm_count);
  for (const Stream& x : t.streams) add("stream {} {} {}", x.device, x.native_id, x.name);
  for (const Activity& a : t.activities)
    add("act {} {} {} {} {} {} {} {} {} {} {}", a.start_ns, a.end_ns, a.correlation_id, a.launch_ns, a.bytes,
        a.name_id, a.stream, a.comm_op, static_cast<int>(a.kind), static_cast<int>(a.category), a.copy_kind);
  for (const CommOp& c : t.comm_ops)
    add("comm {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}", c.communicator, c.comm_rank, c.comm_nranks, c.seq,
        CollectiveName(c.op), c.datatype, c.count, c.bytes, c.root_peer, c.stream, c.host_enter_ns, c.host_exit_ns, c.host_tid,
        c.pg_desc, static_cast<int>(c.source), static_cast<int>(c.rule));
  for (const HostCall& h : t.host_calls)
    add("call {} {} {} {} {}", h.start_ns, h.end_ns, h.correlation_id, h.tid, h.name_id);
  for (const Range& r : t.ranges)
    add("range {} {} {} {} {} {} {}", r.start_ns, r.end_ns, r.step, r.tid, r.name_id, r.stream,
        static_cast<int>(r.kind));
  for (size_t i = 0; i < kStatCount; ++i)
    if (int64_t v = t.stats.Get(static_cast<Stat>(i))) add("stat {} {}", i, v);
  return s;
}

}  // namespace overlapprof::testing
