// The writer thread's side of NCCL's profiler plugin: see plugin_sink.h.
#include "injector/plugin_sink.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "injector/injector.h"

namespace overlapprof::inject {
namespace {

// ncclDataType_t: names and sizes, as the comm ops have them (sink.cc).
const char* DtypeName(int8_t t, int64_t* size) {
  static const struct {
    const char* name;
    int64_t size;
  } kTypes[] = {{"int8", 1},    {"uint8", 1},    {"int32", 4},      {"uint32", 4},
                {"int64", 8},   {"uint64", 8},   {"float16", 2},    {"float32", 4},
                {"float64", 8}, {"bfloat16", 2}, {"float8e4m3", 1}, {"float8e5m2", 1}};
  if (t >= 0 && t < static_cast<int8_t>(sizeof kTypes / sizeof kTypes[0])) {
    *size = kTypes[t].size;
    return kTypes[t].name;
  }
  *size = 0;
  return "";
}

std::string Hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

std::string JsonString(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

std::string Field(const char* s, size_t n) { return std::string(s, strnlen(s, n)); }

}  // namespace

const PluginSink::Comm* PluginSink::FindComm(uint64_t hash) const {
  for (const auto& c : comms_)
    if (c.hash == hash) return &c;
  return nullptr;
}

void PluginSink::TakeComm(const HookRecord& r, uint64_t resolved_id) {
  Comm c{r.comm_id ? r.comm_id : resolved_id, r.stream,    r.comm_rank, r.comm_nranks,
         r.root_peer, r.op,                    Field(r.name, sizeof r.name)};
  abi_ = r.op;
  for (auto& have : comms_)
    if (have.hash == c.hash && have.rank == c.rank) {  // NCCL re-initialized it (same id)
      have = c;
      meta_dirty_ = true;
      return;
    }
  comms_.push_back(std::move(c));
  meta_dirty_ = true;
}

void PluginSink::TakeOp(const HookRecord& r, RankTrace* t) {
  NcclPluginOp o;
  uint64_t id = r.comm_id;
  if (!id)
    if (const Comm* c = FindComm(r.stream)) id = c->id;
  if (id) o.communicator = Hex(id);
  o.nccl_comm_hash = static_cast<int64_t>(r.stream);
  o.comm_rank = r.comm_rank;
  o.comm_nranks = r.comm_nranks;
  o.op = CollectiveFromCode(r.op);
  const bool p2p = (r.flags & kPluginFlagP2p) != 0, ce = (r.flags & kPluginFlagCe) != 0;
  o.nccl_seq = p2p ? kUnknown : static_cast<int64_t>(r.seq);
  int64_t size = 0;
  o.datatype = DtypeName(r.datatype, &size);
  o.count = static_cast<int64_t>(r.count);
  o.bytes = size ? o.count * size : kUnknown;
  o.root_peer = r.root_peer;
  o.algorithm = Field(r.plugin.algo, sizeof r.plugin.algo);
  o.protocol = Field(r.plugin.proto, sizeof r.plugin.proto);
  o.channels_expected = r.plugin.channels_expected ? r.plugin.channels_expected : kUnknown;
  o.channels = r.plugin.channels;
  o.host_start_ns = r.plugin.host_start_ns;
  o.group_id = r.launch_id ? static_cast<int64_t>(r.launch_id) : kUnknown;
  o.proxy_ops = r.plugin.proxy_ops;
  o.proxy_steps = r.plugin.proxy_steps;
  o.abi_version = r.plugin.abi_version;
  o.flags = r.flags;
  o.host_tid = r.tid;
  if (ce) {
    o.start_ns = r.t_enter;
    o.end_ns = r.t_exit ? r.t_exit : kUnknown;
  } else if (r.t_enter > 0 && r.t_exit >= r.t_enter) {
    o.gpu_start_raw = r.t_enter;
    o.gpu_end_raw = r.t_exit;
    int64_t s = r.plugin.clock_sample;
    if (s != 0) {
      if (samples_ == 0) {
        min_sample_ = s;
      } else if (s < min_sample_) {
        excess_sum_ += static_cast<long double>(min_sample_ - s) * samples_;  // rebase
        min_sample_ = s;
      } else {
        excess_sum_ += static_cast<long double>(s - min_sample_);
      }
      ++samples_;
      meta_dirty_ = true;
    }
    if (samples_) {
      o.start_ns = o.gpu_start_raw + min_sample_;
      o.end_ns = o.gpu_end_raw + min_sample_;
    }
  }
  if (r.flags & kPluginFlagIncomplete) t->stats.Add(Stat::nccl_plugin_ops_incomplete);
  t->nccl_plugin_ops.push_back(std::move(o));
}

std::string PluginSink::SlotState(bool* taken) {
  *taken = false;
  const char* v = std::getenv("NCCL_PROFILER_PLUGIN");
  if (!v || !*v) return "unset";
  Dl_info info{};
  struct stat mine {}, theirs {};
  if (dladdr(reinterpret_cast<void*>(&PluginAtExit), &info) && info.dli_fname && ::stat(info.dli_fname, &mine) == 0 &&
      ::stat(v, &theirs) == 0 && mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino)
    return "overlapprof";
  *taken = true;
  return std::string("other: ") + v;
}

std::string PluginSink::MetaJson() {
  meta_dirty_ = false;
  std::string j = "{\"abi_version\":" + std::to_string(abi_) + ",\"communicators\":[";
  bool first = true;
  for (const auto& c : comms_) {
    if (!first) j += ",";
    first = false;
    j += "{\"id\":" + (c.id ? "\"" + Hex(c.id) + "\"" : std::string("null")) + ",\"nccl_comm_hash\":\"" + Hex(c.hash) +
         "\",\"rank\":" + std::to_string(c.rank) + ",\"nranks\":" + std::to_string(c.nranks) +
         ",\"nnodes\":" + std::to_string(c.nnodes) + ",\"name\":" + JsonString(c.name) + "}";
  }
  j += "],\"clock\":{\"samples\":" + std::to_string(samples_);
  if (samples_) j += ",\"offset_ns\":" + std::to_string(min_sample_) + ",\"residual_ns\":" + std::to_string(residual_ns());
  return j + "}}";
}

void PluginSink::FinalStats(StatCounters* stats) const {
  if (samples_ && residual_ns() > kResidualThresholdNs) stats->Set(Stat::nccl_plugin_clock_residual_high, 1);
}

Status PluginSink::FinishStore(StoreWriter* w) {
  if (samples_) OVERLAPPROF_RETURN_IF_ERROR(w->RetimeNcclPluginOps(min_sample_));
  if (!comms_.empty() || meta_dirty_) OVERLAPPROF_RETURN_IF_ERROR(w->PutMeta("nccl_profiler", MetaJson()));
  return OkStatus();
}

}  // namespace overlapprof::inject
