#pragma once
// Helpers for tests: synthetic Kineto JSON built from a compact description, so tests
// exercise the real importer, and temp files.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "src/importers/importer.h"
#include "src/importers/kineto/kineto.h"
#include "src/io/input_file.h"

namespace overlapprof::testing {

struct Ev {
  std::string cat;   // kernel, gpu_memcpy, gpu_memset, cuda_runtime, user_annotation
  std::string name;
  std::string ts;    // µs text, as written in traces
  std::string dur;   // µs text
  int stream = 7;
  int64_t correlation = -1;
  std::string extra_args;  // appended inside "args" (must start with ',' if non-empty)
};

inline std::string KinetoJson(const std::vector<Ev>& events, const std::string& top_level_extra =
                                  R"("distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2},)") {
  std::string s = "{" + top_level_extra + "\n\"traceEvents\": [\n";
  for (size_t i = 0; i < events.size(); ++i) {
    const Ev& e = events[i];
    bool gpu = e.cat == "kernel" || e.cat == "gpu_memcpy" || e.cat == "gpu_memset";
    std::string args = gpu ? fmt::format(R"("device": 0, "stream": {}, "correlation": {})", e.stream, e.correlation)
                           : fmt::format(R"("correlation": {})", e.correlation);
    s += fmt::format(R"(  {{"ph": "X", "cat": "{}", "name": "{}", "pid": {}, "tid": {}, "ts": {}, "dur": {}, "args": {{{}{}}}}})",
                     e.cat, e.name, gpu ? 0 : 1234, gpu ? e.stream : 1234, e.ts, e.dur, args, e.extra_args);
    s += i + 1 < events.size() ? ",\n" : "\n";
  }
  s += "]}\n";
  return s;
}

inline StatusOr<RankTrace> ParseJsonText(const std::string& text, const ImportOptions& o = {}) {
  std::string padded = text;
  padded.append(kInputPadding, '\0');
  return ParseKinetoJson(padded.data(), text.size(), padded.size(), o);
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/overlapprof-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  std::string Write(const std::string& name, const std::string& content) const {
    std::ofstream(File(name), std::ios::binary) << content;
    return File(name);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string DataFile(const std::string& rel) { return std::string(OVERLAPPROF_TEST_DATA) + "/" + rel; }

// One gzip member holding `data` (deflate at `level`).
inline std::string Gzip(const std::string& data, int level = 9) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace overlapprof::testing
