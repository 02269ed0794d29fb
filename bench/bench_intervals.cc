// bench_engine: Google Benchmark micro-benchmarks of the overlap engine on synthetic data.
//
//   IntervalSet::Union      N unsorted intervals (overlapping, like kernels on several streams)
//   IntervalSet::Intersect  two unions of N/2 intervals each (compute vs comm)
//   BuildTimelineSets + WholeTraceFigures over a RankTrace of N Activities (88% compute
//     kernels on stream 7, 6% NCCL kernels on stream 20 overlapping them, 6% memcpy/memset)
//
// items/s = input intervals or Activities per second. Sizes: 1e5, 1e6, 4e6.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "analyzers/intervals.h"
#include "analyzers/overlap.h"
#include "src/trace/model.h"

namespace overlapprof {
namespace {

// Back-to-back intervals with small gaps, start-sorted; `seed` varies the pattern.
std::vector<Interval> Timeline(int64_t n, uint64_t seed, int64_t mean_len) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> len(mean_len / 2, mean_len * 3 / 2), gap(0, mean_len / 4);
  std::vector<Interval> v;
  v.reserve(static_cast<size_t>(n));
  int64_t t = 1'700'000'000'000'000'000;
  for (int64_t i = 0; i < n; ++i) {
    t += gap(rng);
    int64_t l = len(rng);
    v.push_back({t, t + l});
    t += l;
  }
  return v;
}

void BM_IntervalSetUnion(benchmark::State& state) {
  const int64_t n = state.range(0);
  // Two streams' worth of kernels interleaved and shuffled locally (not sorted), as the
  // engine sees activities from several streams.
  std::vector<Interval> a = Timeline(n / 2, 1, 20'000), b = Timeline(n - n / 2, 2, 20'000);
  std::vector<Interval> all;
  all.reserve(static_cast<size_t>(n));
  all.insert(all.end(), a.begin(), a.end());
  all.insert(all.end(), b.begin(), b.end());
  std::mt19937_64 rng(3);
  std::shuffle(all.begin(), all.end(), rng);
  for (auto _ : state) {
    IntervalSet s = IntervalSet::Union(all);  // copies: the argument is taken by value
    benchmark::DoNotOptimize(s.Length());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_IntervalSetUnionSorted(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<Interval> all = Timeline(n, 4, 20'000);
  for (auto _ : state) {
    IntervalSet s = IntervalSet::Union(all);
    benchmark::DoNotOptimize(s.Length());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_IntervalSetIntersect(benchmark::State& state) {
  const int64_t n = state.range(0);
  IntervalSet a = IntervalSet::Union(Timeline(n / 2, 5, 20'000));
  IntervalSet b = IntervalSet::Union(Timeline(n - n / 2, 6, 30'000));
  for (auto _ : state) {
    IntervalSet s = IntervalSet::Intersect(a, b);
    benchmark::DoNotOptimize(s.Length());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

RankTrace SyntheticTrace(int64_t n) {
  RankTrace t;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> pick(0, 99);
  std::uniform_int_distribution<int64_t> klen(5'000, 200'000), gap(500, 3'000), comm_len(300'000, 1'200'000);
  uint32_t s_compute = t.StreamIndex(0, 7), s_comm = t.StreamIndex(0, 20);
  uint32_t n_gemm = t.names.Intern("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align4>("
                                   "cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align4::Params)");
  uint32_t n_nccl = t.names.Intern("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)");
  uint32_t n_copy = t.names.Intern("Memcpy DtoD (Device -> Device)");
  int64_t s7 = 1'700'000'000'000'000'000, s20 = s7;
  t.activities.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int p = pick(rng);
    Activity a;
    a.correlation_id = i + 1;
    if (p < 6) {  // NCCL kernel on stream 20, starting at the current compute front
      int64_t start = std::max(s20, s7) + gap(rng);
      a.start_ns = start;
      a.end_ns = start + comm_len(rng);
      s20 = a.end_ns;
      a.stream = s_comm;
      a.name_id = n_nccl;
      a.category = Category::kComm;
      a.comm_op = static_cast<uint32_t>(t.comm_ops.size());
      CommOp op;
      op.op = Collective::kAllReduce;
      op.stream = s_comm;
      t.comm_ops.push_back(op);
    } else {
      int64_t start = s7 + gap(rng);
      a.start_ns = start;
      a.end_ns = start + klen(rng);
      s7 = a.end_ns;
      a.stream = s_compute;
      if (p < 12) {
        a.kind = p < 9 ? ActivityKind::kMemcpy : ActivityKind::kMemset;
        a.category = Category::kMemory;
        a.name_id = n_copy;
        a.bytes = 1 << 20;
      } else {
        a.name_id = n_gemm;
      }
    }
    t.activities.push_back(a);
  }
  t.Finalize();
  return t;
}

void BM_BuildTimelineSetsWholeTrace(benchmark::State& state) {
  const int64_t n = state.range(0);
  RankTrace t = SyntheticTrace(n);
  for (auto _ : state) {
    TimelineSets s = BuildTimelineSets(t);
    OverlapFigures f = WholeTraceFigures(s);
    benchmark::DoNotOptimize(f.overlap_ns);
  }
  state.SetItemsProcessed(state.iterations() * n);
}

#define OVERLAPPROF_SIZES ->Arg(100'000)->Arg(1'000'000)->Arg(4'000'000)->Unit(benchmark::kMillisecond)
BENCHMARK(BM_IntervalSetUnion) OVERLAPPROF_SIZES;
BENCHMARK(BM_IntervalSetUnionSorted) OVERLAPPROF_SIZES;
BENCHMARK(BM_IntervalSetIntersect) OVERLAPPROF_SIZES;
BENCHMARK(BM_BuildTimelineSetsWholeTrace) OVERLAPPROF_SIZES;

}  // namespace
}  // namespace overlapprof

BENCHMARK_MAIN();
