// The Kineto importer: PyTorch-profiler (Kineto) Chrome-trace JSON, plain or gzip, one rank
// per file.
//
// Reads: GPU kernels, memcpy, memset and sync activities (device, stream, correlation,
// bytes, NCCL metadata args), CUDA/HIP runtime and driver calls (for correlation),
// ProfilerStep#N ranges (iterations), user annotations, GPU user annotations,
// distributedInfo, deviceProperties, thread names of GPU streams, baseTimeNanoseconds.
// Everything else (cpu_op details, flows, python stacks) is skipped without being decoded.
// Times: "ts" and "dur" are parsed from their decimal text exactly (src/common/decimal.h, no
// double rounding) into integer ns; absolute time = baseTimeNanoseconds (when present) + ts.
//
// The files of src/importers/kineto/, by job:
//   importer.cc     this: the importer's registration (Probe, Import of a path)
//   reader.cc       the window over the stream, the top-level keys, batches, simdjson On-Demand
//                   (ParseKinetoStream, ParseKinetoJson: kineto.h; the options: kineto_options.h)
//   fields.h        the field tables: which keys of an event and of its args are read, into what
//   walk.{h,cc}     the walker over the bytes (the events On-Demand would read, read faster)
//   index_walk.*    the walker over simdjson's stage 1 (the only user of simdjson's internals)
//   build_thread.*  the builder on a thread of its own, for large inputs
//   event.{h,cc}    RawEvent, one event's fields as read; builder.{h,cc} the rank's trace from them
#include <memory>
#include <string>
#include <string_view>

#include "src/importers/importer.h"
#include "src/importers/kineto/kineto.h"
#include "src/io/input_file.h"
#include "src/io/input_stream.h"

namespace overlapprof {
namespace {

class KinetoImporter : public OneRankImporter {
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
    StatusOr<RankTrace> t = [&]() -> StatusOr<RankTrace> {
      OVERLAPPROF_ASSIGN_OR_RETURN(std::unique_ptr<ByteStream> in, OpenInputStream(path));
      return ParseKinetoStream(*in, options, true);
    }();
    // What the import freed (its blocks and window, its indexes, the host calls no reader asked
    // for) stays in the heap, not given back (malloc_trim), where the analyzers' preparation of
    // the rank, and the next rank, reuse it instead of faulting in fresh memory (main()'s mallopt;
    // docs/performance.md).
    if (t.ok()) t->meta.source_path = path;
    if (t.ok() && t->activities.empty() && t->comm_ops.empty() && IsLegacyArray(path))
      return MakeError(StatusCode::kInvalidInput,
                       "a legacy PyTorch profiler trace (torch 1.x autograd profiler: a JSON array of events, "
                       "ProfilerStep#N without a category): it records no GPU kernels overlapprof can read; record "
                       "with torch.profiler (Kineto), which writes {{\"traceEvents\": [...]}}");
    return t;
  }

 private:
  // The document is a bare JSON array (the torch 1.x autograd profiler's export_chrome_trace),
  // not Kineto's object with "traceEvents".
  static bool IsLegacyArray(const std::string& path) {
    StatusOr<std::unique_ptr<ByteStream>> in = OpenInputStream(path);
    if (!in.ok()) return false;
    char head[64];
    StatusOr<size_t> n = (*in)->Read(head, sizeof head);
    if (!n.ok()) return false;
    size_t i = 0;
    if (*n >= 3 && std::string_view(head, 3) == "\xEF\xBB\xBF") i = 3;
    while (i < *n && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')) ++i;
    return i < *n && head[i] == '[';
  }
};

}  // namespace

std::unique_ptr<Importer> MakeKinetoImporter() { return std::make_unique<KinetoImporter>(); }

}  // namespace overlapprof
