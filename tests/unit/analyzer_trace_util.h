#pragma once
// Small synthetic PyTorch-profiler traces analyzed through the real importer and pipeline, with
// answers worked out by hand (all times in µs): the analyzer tests' shared timelines
// (ddp_buckets_test.cc, op_types_test.cc, iterations_test.cc, sharded_test.cc).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reports/report.h"
#include "src/cli/pipeline.h"
#include "test_util.h"

namespace overlapprof::testing {

using Json = nlohmann::ordered_json;

// µs on a large base, as in real traces: T(420) = "1000000000420.000".
inline std::string T(int64_t us) { return fmt::format("1000000{:06d}.000", us); }
inline std::string D(int64_t us) { return fmt::format("{}.000", us); }
constexpr int64_t kBase = 1000000000000000;  // T(0) in ns

inline std::string AllReduceArgs(int64_t nelems) {
  return fmt::format(R"(, "Collective name": "allreduce", "In msg nelems": {}, "Out msg nelems": {}, "Group size": 2,
                      "dtype": "Float", "Process Group Name": "0", "Process Group Ranks": "[0, 1]")",
                     nelems, nelems);
}

inline Json Analyze(const std::string& json, const AnalysisOptions& ao = {}) {
  TempDir dir;
  std::string path = dir.Write("rank0.json", json);
  StatusOr<Summary> s = AnalyzeFiles({path}, ImportOptions{}, ao, 1);
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return Json();
  return SummaryToJson(*s);
}

// One DDP step: backward host range [100, 600]; compute kernels launched at 110 and 300 run
// [200, 400) and [400, 500); bucket 0 (4 MiB) launched at 350 runs [420, 520); bucket 1 (4 MiB)
// launched at 510 runs [530, 700); the optimizer kernel launched at 620 runs [710, 750).
inline std::vector<Ev> DdpStep() {
  std::vector<Ev> ev = {
      {"user_annotation", "ProfilerStep#1", T(0), D(1000)},
      {"user_annotation", "## backward ##", T(100), D(500)},
  };
  auto launch = [&](int64_t host, int64_t corr, const char* kname, int64_t start, int64_t dur, int stream,
                    std::string extra = "") {
    ev.push_back({"cuda_runtime", "cudaLaunchKernel", T(host), D(5), 0, corr});
    ev.push_back({"kernel", kname, T(start), D(dur), stream, corr, extra});
  };
  launch(110, 1, "sm80_gemm_bwd", 200, 200, 7);
  launch(300, 2, "sm80_gemm_bwd2", 400, 100, 7);
  launch(350, 3, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 420, 100, 20, AllReduceArgs(1 << 20));
  launch(510, 4, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 530, 170, 20, AllReduceArgs(1 << 20));
  launch(620, 5, "sgd_update_kernel", 710, 40, 7);
  return ev;
}

// Without step markers: a warm-up iteration with one all-reduce C, then 5 iterations of A, B
// (forward [k000, k000+300), A [+400, +450), B [+460, +520), optimizer [+600, +650)).
inline std::vector<Ev> Unmarked() {
  std::vector<Ev> ev;
  int64_t corr = 1;
  auto k = [&](const char* name, int64_t start, int64_t dur, int stream, std::string extra = "") {
    ev.push_back({"kernel", name, T(start), D(dur), stream, corr++, extra});
  };
  k("fwd_gemm", 0, 300, 7);
  k("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 400, 200, 20, AllReduceArgs(3 << 20));
  k("sgd", 650, 50, 7);
  for (int64_t i = 1; i <= 5; ++i) {
    k("fwd_gemm", i * 1000, 300, 7);
    k("ncclDevKernel_AllReduce_Sum_f32_RING_LL", i * 1000 + 400, 50, 20, AllReduceArgs(1 << 20));
    k("ncclDevKernel_AllReduce_Sum_f32_RING_LL", i * 1000 + 460, 60, 20, AllReduceArgs(2 << 20));
    k("sgd", i * 1000 + 600, 50, 7);
  }
  return ev;
}

inline std::string CollArgs(const char* name, int64_t nelems) {
  return fmt::format(R"(, "Collective name": "{}", "In msg nelems": {}, "Out msg nelems": {}, "Group size": 4,
                      "dtype": "BFloat16", "Process Group Name": "0", "Process Group Ranks": "[0, 1, 2, 3]")",
                     name, nelems, nelems * 4);
}

}  // namespace overlapprof::testing
