// gen_kineto: writes large synthetic PyTorch-profiler (Kineto) Chrome traces, one per
// rank, shaped like real ones (tests/data/kineto/): the same top-level keys, the same
// event layout and argument sets, the same categories and the same text formatting.
//
//   gen_kineto --ranks 8 --gpu-events-per-rank 625000 --out DIR [--gzip] [--seed N]
//              [--manifest PATH] [--jobs N] [--layers N]
//
// Writes DIR/rank<R>.json (or .json.gz, gzip level 1) and a manifest (default
// DIR/manifest.json; pass --manifest elsewhere when DIR is handed to `overlapprof
// analyze`, which would take manifest.json for a trace) with per-file counts:
// gpu_events (kernels + memcpy + memset), total_events (elements of traceEvents),
// uncompressed_bytes, and a breakdown.
//
// The workload is a data-parallel (DDP) transformer training loop on 8 GPUs:
//   per ProfilerStep#N: input HtoD copies; forward of --layers layers (layer_norm, linear
//   (GEMM), flash attention, gelu, residual add) on the main thread; loss; backward on
//   the autograd thread (9 kernels per layer) with one NCCL all-reduce per layer's
//   gradient bucket on stream 20 that overlaps the next layers' backward kernels on
//   stream 7; bucket zeroing memsets; copy_bucket_to_grad DtoD copies after the
//   all-reduces; a fused AdamW step; and loss.item() (DtoH copy + sync).
// Every GPU event has its cuda_runtime launch (cudaLaunchKernel, cudaMemcpyAsync or
// cudaMemsetAsync) with the same correlation id and an "ac2g" flow pair ("s" on the host
// thread, "f" on the GPU stream); every launch sits inside cpu_op events with
// "Input Dims". Mix: ~88% compute kernels, ~6% NCCL kernels, ~5-6% memcpy/memset.
//
// Streaming: each step is formatted into a buffer that is flushed every 1 MiB; no more
// than one step of events is ever held. Output is deterministic for (seed, rank, sizes).
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

// ---------------------------------------------------------------- random numbers

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed ? seed : 0x9E3779B97F4A7C15ull) {}
  uint64_t Next() {  // splitmix64
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform integer in [lo, hi].
  int64_t Range(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1)); }
  double Uniform() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }

 private:
  uint64_t s_;
};

// ---------------------------------------------------------------- output

class Sink {
 public:
  bool Open(const std::string& path, bool gzip) {
    gzip_ = gzip;
    if (gzip) {
      gz_ = gzopen(path.c_str(), "wb1");
      if (!gz_) return false;
      gzbuffer(gz_, 1 << 20);
    } else {
      f_ = std::fopen(path.c_str(), "wb");
      if (!f_) return false;
    }
    buf_.reserve(kFlushAt + (64 << 10));
    return true;
  }
  bool Close() {
    Flush();
    bool ok = ok_;
    if (gz_) ok &= gzclose(gz_) == Z_OK;
    if (f_) ok &= std::fclose(f_) == 0;
    gz_ = nullptr;
    f_ = nullptr;
    return ok;
  }
  uint64_t bytes() const { return bytes_ + buf_.size(); }

  void Put(std::string_view s) { buf_.append(s.data(), s.size()); }
  void Put(char c) { buf_.push_back(c); }
  void MaybeFlush() {
    if (buf_.size() >= kFlushAt) Flush();
  }
  void Flush() {
    if (buf_.empty()) return;
    if (gz_) {
      ok_ &= gzwrite(gz_, buf_.data(), static_cast<unsigned>(buf_.size())) == static_cast<int>(buf_.size());
    } else if (f_) {
      ok_ &= std::fwrite(buf_.data(), 1, buf_.size(), f_) == buf_.size();
    }
    bytes_ += buf_.size();
    buf_.clear();
  }

 private:
  static constexpr size_t kFlushAt = 1 << 20;
  bool gzip_ = false;
  gzFile gz_ = nullptr;
  FILE* f_ = nullptr;
  std::string buf_;
  uint64_t bytes_ = 0;
  bool ok_ = true;
};

// ---------------------------------------------------------------- the workload

constexpr int kNumSms = 108;  // A100
constexpr int64_t kComputeStream = 7;
constexpr int64_t kCommStream = 20;

struct KernelSpec {
  const char* name;
  int64_t min_ns, max_ns;  // duration range
  int regs, shmem;
  int grid[3], block[3];
};

// Names are real CUDA kernel names as the PyTorch profiler reports them (A100, PyTorch 2.x).
const KernelSpec kLayerNormFwd = {
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, "
    "float const*, float const*, float*, float*, float*)",
    11000, 19000, 40, 0, {8192, 1, 1}, {256, 1, 1}};
const KernelSpec kGemmNN = {
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align4>(cutlass_80_tensorop_s1688gemm_"
    "256x128_32x3_nn_align4::Params)",
    110000, 210000, 232, 73728, {16, 32, 1}, {256, 1, 1}};
const KernelSpec kGemmNT = {
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nt_align4>(cutlass_80_tensorop_s1688gemm_"
    "256x128_32x3_nt_align4::Params)",
    120000, 230000, 232, 73728, {16, 32, 1}, {256, 1, 1}};
const KernelSpec kGemmTN = {
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_tn_align4>(cutlass_80_tensorop_s1688gemm_"
    "256x128_32x3_tn_align4::Params)",
    120000, 230000, 232, 73728, {4, 64, 1}, {256, 1, 1}};
const KernelSpec kFlashFwd = {
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
    "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, true, false, "
    "false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)",
    85000, 150000, 255, 49152, {8, 16, 8}, {128, 1, 1}};
const KernelSpec kFlashBwd = {
    "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<pytorch_flash::Flash_bwd_kernel_traits<64, "
    "128, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 8, "
    "cutlass::bfloat16_t> >, true, false, false, false, false, true, false, false>(pytorch_flash::Flash_bwd_params)",
    230000, 400000, 255, 81920, {8, 16, 8}, {256, 1, 1}};
const KernelSpec kFlashBwdDot = {
    "void pytorch_flash::flash_bwd_dot_do_o_kernel<true, pytorch_flash::Flash_bwd_kernel_traits<64, 128, 128, 8, 2, "
    "4, 2, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 8, cutlass::"
    "bfloat16_t> > >(pytorch_flash::Flash_bwd_params)",
    7000, 14000, 36, 0, {16, 16, 8}, {256, 1, 1}};
const KernelSpec kGelu = {
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, "
    "at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::"
    "GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, "
    "at::detail::Array<char*, 2>)",
    14000, 28000, 28, 0, {32768, 1, 1}, {128, 1, 1}};
const KernelSpec kGeluBwd = {
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::"
    "TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() "
    "const::{lambda(float, float)#1}, at::detail::Array<char*, 3> >(int, at::native::GeluBackwardCUDAKernelImpl(at"
    "::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() "
    "const::{lambda(float, float)#1}, at::detail::Array<char*, 3>)",
    18000, 34000, 30, 0, {32768, 1, 1}, {128, 1, 1}};
const KernelSpec kAdd = {
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, "
    "3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    7000, 15000, 24, 0, {8192, 1, 1}, {128, 1, 1}};
const KernelSpec kMulScalar = {
    "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, at::native::"
    "binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> >(int, at::native::AUnaryFunctor<float, "
    "float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2>)",
    4000, 12000, 16, 0, {4096, 1, 1}, {128, 1, 1}};
const KernelSpec kReduceSum = {
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
    "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::"
    "sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, "
    "float, 4>)",
    9000, 22000, 32, 16, {32, 64, 1}, {32, 16, 1}};
const KernelSpec kLayerNormBwdInput = {
    "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<float, float>(float const*, "
    "float const*, float const*, float const*, float const*, float*, int)",
    14000, 27000, 38, 0, {8192, 1, 1}, {128, 1, 1}};
const KernelSpec kLayerNormBwdGamma = {
    "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel_32x32<float, float>(long, long, float "
    "const*, float const*, float const*, float const*, float*, float*)",
    9000, 18000, 64, 8448, {32, 1, 1}, {32, 32, 1}};
const KernelSpec kEmbeddingFwd = {
    "void at::native::(anonymous namespace)::indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2, true>(at::"
    "cuda::detail::TensorInfo<float, unsigned int>, at::cuda::detail::TensorInfo<float const, unsigned int>, "
    "at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)",
    20000, 35000, 30, 0, {1024, 1, 1}, {128, 1, 1}};
const KernelSpec kEmbeddingBwd = {
    "void at::native::(anonymous namespace)::embedding_backward_feature_kernel<float, float, long>(long const*, "
    "float const*, float*, int, long, int)",
    60000, 110000, 40, 4096, {32, 1, 1}, {32, 32, 1}};
const KernelSpec kLogSoftmax = {
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous "
    "namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)",
    90000, 140000, 37, 0, {8192, 1, 1}, {1024, 1, 1}};
const KernelSpec kNllLoss = {
    "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, "
    "float*, float const*, long const*, float const*, bool, long, long, long, long)",
    15000, 24000, 28, 1024, {1, 1, 1}, {1024, 1, 1}};
const KernelSpec kNllLossBwd = {
    "void at::native::(anonymous namespace)::nll_loss_backward_reduce_cuda_kernel_2d<float, long>(float*, float "
    "const*, long const*, float const*, float const*, bool, int, int, long, long)",
    6000, 12000, 22, 0, {1, 1, 1}, {1024, 1, 1}};
const KernelSpec kLogSoftmaxBwd = {
    "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, at::native::(anonymous "
    "namespace)::LogSoftMaxBackwardEpilogue>(float*, float const*, float const*, int)",
    95000, 150000, 38, 0, {8192, 1, 1}, {1024, 1, 1}};
const KernelSpec kAdamW = {
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
    "FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, "
    "(at::native::ADAM_MODE)1, false>, double, double, double, double, double, double, bool, float*, float*>(at::"
    "native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::"
    "FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double, double, double, double, double, "
    "double, bool, float*, float*)",
    380000, 620000, 94, 0, {320, 1, 1}, {512, 1, 1}};
const KernelSpec kNcclAllReduce = {
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    0, 0, 96, 87568, {16, 1, 1}, {640, 1, 1}};

struct Counts {
  int64_t gpu_events = 0, kernels = 0, comm_kernels = 0, memcpy = 0, memset = 0;
  int64_t runtime = 0, cpu_ops = 0, user_annotations = 0, flows = 0, metadata = 0, other = 0;
  int64_t total_events = 0, steps = 0;
  uint64_t uncompressed_bytes = 0, file_bytes = 0;
};

struct Config {
  int ranks = 8;
  int64_t gpu_events_per_rank = 625000;
  std::string out;
  std::string manifest;
  bool gzip = false;
  uint64_t seed = 1;
  int jobs = 0;
  int layers = 96;
};

// A cpu_op or user_annotation, held until its duration is known (its children come first).
struct HostRange {
  const char* cat;
  std::string name;  // most are literals; ProfilerStep#N is built
  int64_t tid, ts, dur;
  int64_t ext, rf_id, ev_idx;
  const char* dims;   // "Input Dims" JSON, or nullptr for annotations
  const char* types;  // "Input type" JSON
  int64_t seq;        // "Sequence number" (forward ops), -1 if none
  int fwd_tid;        // backward ops: "Fwd thread id" (1), -1 if none
  const std::string* comm_args;  // record_param_comms extra args
};

class RankWriter {
 public:
  RankWriter(const Config& cfg, int rank, Sink& sink)
      : cfg_(cfg), rank_(rank), out_(sink), rng_(cfg.seed * 1000003ull + static_cast<uint64_t>(rank) * 7919ull + 17) {
    device_ = rank % 8;  // 8 GPUs per node: the local rank is the device
    pid_ = 2910249 + rank * 131;
    main_tid_ = pid_;
    bwd_tid_ = pid_ + 9503;
    host_ = 4458676416788066ll + rank * 1523 + rng_.Range(0, 900000);  // ns
    trace_start_ = host_ - 28717315;
    s7_ = s20_ = host_;
    corr_ = 57000 + rank;
    ranks_str_ = "[";
    for (int r = 0; r < cfg.ranks; ++r) ranks_str_ += (r ? ", " : "") + std::to_string(r);
    ranks_str_ += "]";
    gpu_.reserve(8 << 20);
  }

  Counts Run() {
    WriteHeader();
    int64_t step = 0;
    while (c_.gpu_events < cfg_.gpu_events_per_rank) {
      Step(step++);
      c_.steps = step;
    }
    WriteFooter();
    c_.uncompressed_bytes = out_.bytes();
    return c_;
  }

 private:
  bool Budget() const { return c_.gpu_events < cfg_.gpu_events_per_rank; }

  // ------------------------------------------------ event text, Kineto's layout

  // Every event is written as ",\n  {...}"; PutEvents() drops the comma before the first.
  void Begin(std::string& o) {
    o += ",\n  {\n";
    ++c_.total_events;
  }
  void PutEvents(std::string_view text) {
    if (text.empty()) return;
    if (!any_event_) {
      text.remove_prefix(2);
      any_event_ = true;
    }
    out_.Put(text);
  }
  static void AppendInt(std::string& o, int64_t v) {
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    o.append(tmp, static_cast<size_t>(r.ptr - tmp));
  }
  static void AppendUs(std::string& o, int64_t ns) {
    AppendInt(o, ns / 1000);
    int64_t frac = ns % 1000;
    char tmp[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                   static_cast<char>('0' + frac % 10)};
    o.append(tmp, 4);
  }
  static void AppendFixed6(std::string& o, double v) {
    int64_t m = static_cast<int64_t>(v * 1e6 + 0.5);
    AppendInt(o, m / 1000000);
    char tmp[7];
    tmp[0] = '.';
    int64_t f = m % 1000000;
    for (int i = 6; i >= 1; --i) {
      tmp[i] = static_cast<char>('0' + f % 10);
      f /= 10;
    }
    o.append(tmp, 7);
  }
  void HeadX(std::string& o, std::string_view cat, std::string_view name, int64_t pid, int64_t tid, int64_t ts,
             int64_t dur) {
    o += "    \"ph\": \"X\", \"cat\": \"";
    o += cat;
    o += "\", \"name\": \"";
    o += name;
    o += "\", \"pid\": ";
    AppendInt(o, pid);
    o += ", \"tid\": ";
    AppendInt(o, tid);
    o += ",\n    \"ts\": ";
    AppendUs(o, ts);
    o += ", \"dur\": ";
    AppendUs(o, dur);
    o += ",\n    \"args\": {\n      ";
  }

  void WriteHostRange(std::string& o, const HostRange& r) {
    Begin(o);
    HeadX(o, r.cat, r.name, pid_, r.tid, r.ts, r.dur);
    o += "\"External id\": ";
    AppendInt(o, r.ext);
    o += ",\"Record function id\": ";
    AppendInt(o, r.rf_id);
    o += ", \"Ev Idx\": ";
    AppendInt(o, r.ev_idx);
    if (r.dims) {
      o += ", \"Input Dims\": ";
      o += r.dims;
      o += ", \"Input type\": ";
      o += r.types;
    }
    if (r.comm_args) o += *r.comm_args;
    if (r.fwd_tid >= 0) {
      o += ", \"Fwd thread id\": ";
      AppendInt(o, r.fwd_tid);
    }
    if (r.seq >= 0) {
      o += ", \"Sequence number\": ";
      AppendInt(o, r.seq);
    }
    o += "\n    }\n  }";
    if (r.cat[0] == 'c') ++c_.cpu_ops;
    else ++c_.user_annotations;
  }

  void WriteRuntime(std::string& o, std::string_view name, int cbid, int64_t ts, int64_t dur, int64_t ext,
                    int64_t corr) {
    Begin(o);
    HeadX(o, "cuda_runtime", name, pid_, tid_, ts, dur);
    o += "\"External id\": ";
    AppendInt(o, ext);
    o += ",      \"cbid\": ";
    AppendInt(o, cbid);
    o += ", \"correlation\": ";
    AppendInt(o, corr);
    o += "\n    }\n  }";
    ++c_.runtime;
  }

  void WriteFlow(std::string& o, bool start, int64_t corr, int64_t pid, int64_t tid, int64_t ts) {
    Begin(o);
    o += start ? "    \"ph\": \"s\", \"id\": " : "    \"ph\": \"f\", \"id\": ";
    AppendInt(o, corr);
    o += ", \"pid\": ";
    AppendInt(o, pid);
    o += ", \"tid\": ";
    AppendInt(o, tid);
    o += ", \"ts\": ";
    AppendUs(o, ts);
    o += start ? ",\n    \"cat\": \"ac2g\", \"name\": \"ac2g\"\n  }" : ",\n    \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"\n  }";
    ++c_.flows;
  }

  void WriteKernel(std::string& o, const KernelSpec& k, int64_t stream, int64_t ts, int64_t dur, int64_t ext,
                   int64_t corr, int64_t nccl_nelems) {
    Begin(o);
    HeadX(o, "kernel", k.name, device_, stream, ts, dur);
    o += "\"External id\": ";
    AppendInt(o, ext);
    o += ",      \"queued\": 0, \"device\": ";
    AppendInt(o, device_);
    o += ", \"context\": 1,      \"stream\": ";
    AppendInt(o, stream);
    o += ", \"correlation\": ";
    AppendInt(o, corr);
    o += ",      \"registers per thread\": ";
    AppendInt(o, k.regs);
    o += ",      \"shared memory\": ";
    AppendInt(o, k.shmem);
    int64_t blocks = int64_t{k.grid[0]} * k.grid[1] * k.grid[2];
    int64_t threads = int64_t{k.block[0]} * k.block[1] * k.block[2];
    double bpsm = static_cast<double>(blocks) / kNumSms;
    double wpsm = bpsm * static_cast<double>((threads + 31) / 32);
    o += ",      \"blocks per SM\": ";
    AppendFixed6(o, bpsm);
    o += ",      \"warps per SM\": ";
    AppendFixed6(o, wpsm);
    o += ",      \"grid\": [";
    AppendInt(o, k.grid[0]);
    o += ", ";
    AppendInt(o, k.grid[1]);
    o += ", ";
    AppendInt(o, k.grid[2]);
    o += "],      \"block\": [";
    AppendInt(o, k.block[0]);
    o += ", ";
    AppendInt(o, k.block[1]);
    o += ", ";
    AppendInt(o, k.block[2]);
    o += "],      \"est. achieved occupancy %\": ";
    // Resident warps limited by registers: 65536 regs per SM.
    int64_t warps_per_block = (threads + 31) / 32;
    int64_t reg_limit = k.regs > 0 ? 65536 / (k.regs * 32) : 64;
    int64_t max_blocks = warps_per_block > 0 ? std::max<int64_t>(1, reg_limit / warps_per_block) : 1;
    double resident = std::min(wpsm, static_cast<double>(std::min<int64_t>(64, max_blocks * warps_per_block)));
    AppendInt(o, static_cast<int64_t>(resident * 100.0 / 64.0));
    if (nccl_nelems >= 0) {
      o += ", \"Collective name\": \"allreduce\", \"In msg nelems\": ";
      AppendInt(o, nccl_nelems);
      o += ", \"Out msg nelems\": ";
      AppendInt(o, nccl_nelems);
      o += ", \"Group size\": ";
      AppendInt(o, cfg_.ranks);
      o += ", \"dtype\": \"Float\", \"In split size\": \"[]\", \"Out split size\": \"[]\", \"Process Group Name\": "
           "\"0\", \"Process Group Description\": \"default_pg\", \"Process Group Ranks\": \"";
      o += ranks_str_;
      o += "\"";
    }
    o += "\n    }\n  }";
  }

  void WriteCopy(std::string& o, bool memset, std::string_view name, int64_t ts, int64_t dur, int64_t ext,
                 int64_t corr, int64_t bytes) {
    Begin(o);
    HeadX(o, memset ? "gpu_memset" : "gpu_memcpy", name, device_, kComputeStream, ts, dur);
    o += "\"External id\": ";
    AppendInt(o, ext);
    o += ",      \"device\": ";
    AppendInt(o, device_);
    o += ", \"context\": 1,      \"stream\": ";
    AppendInt(o, kComputeStream);
    o += ", \"correlation\": ";
    AppendInt(o, corr);
    o += ",      \"bytes\": ";
    AppendInt(o, bytes);
    o += ", \"memory bandwidth (GB/s)\": ";
    fmt::format_to(std::back_inserter(o), "{}", static_cast<double>(bytes) / static_cast<double>(dur));
    o += "\n    }\n  }";
  }

  // ------------------------------------------------ host-side structure

  // Opens a cpu_op (or user_annotation) at the current host time; Close() sets its duration.
  size_t Open(const char* cat, std::string name, const char* dims = nullptr, const char* types = nullptr,
              const std::string* comm_args = nullptr) {
    host_ += rng_.Range(1200, 6000);
    HostRange r;
    r.cat = cat;
    r.name = std::move(name);
    r.tid = tid_;
    r.ts = host_;
    r.dur = 0;
    r.ext = ++ext_;
    r.rf_id = ++rf_id_;
    r.ev_idx = ev_idx_++;
    r.dims = dims;
    r.types = types;
    r.seq = tid_ == main_tid_ && dims ? seq_++ : -1;
    r.fwd_tid = tid_ == bwd_tid_ && dims ? 1 : -1;
    r.comm_args = comm_args;
    ranges_.push_back(std::move(r));
    open_.push_back(ranges_.size() - 1);
    host_ += rng_.Range(2000, 9000);
    return ranges_.size() - 1;
  }
  void Close() {
    host_ += rng_.Range(800, 3500);
    HostRange& r = ranges_[open_.back()];
    r.dur = host_ - r.ts;
    open_.pop_back();
  }
  int64_t CurrentExt() const { return open_.empty() ? 0 : ranges_[open_.back()].ext; }
  int64_t NextCorr() { return corr_ += rng_.Range(1, 9); }

  // Launch latency: how long after the API call starts the GPU may begin.
  int64_t GpuStart(int64_t launch_ts, int64_t& stream_free) {
    return std::max(launch_ts + rng_.Range(3500, 7500), stream_free + rng_.Range(900, 3200));
  }
  int64_t LaunchDur() {
    // Mostly 4-10 µs; now and then a slow launch (allocator, page fault).
    return rng_.Uniform() < 0.02 ? rng_.Range(20000, 90000) : rng_.Range(3800, 10500);
  }

  void Kernel(const KernelSpec& k) {
    if (!Budget()) return;
    int64_t corr = NextCorr(), ext = CurrentExt();
    int64_t ts = host_, dur = LaunchDur();
    WriteRuntime(gpu_, "cudaLaunchKernel", 211, ts, dur, ext, corr);
    WriteFlow(gpu_, true, corr, pid_, tid_, ts);
    int64_t start = GpuStart(ts, s7_);
    int64_t kdur = rng_.Range(k.min_ns, k.max_ns);
    s7_ = start + kdur;
    WriteKernel(gpu_, k, kComputeStream, start, kdur, ext, corr, -1);
    WriteFlow(gpu_, false, corr, device_, kComputeStream, start);
    host_ += dur + rng_.Range(500, 2500);
    ++c_.gpu_events;
    ++c_.kernels;
  }

  void Copy(bool memset, std::string_view name, int64_t bytes, double gbps, int64_t wait_for = 0) {
    if (!Budget()) return;
    int64_t corr = NextCorr(), ext = CurrentExt();
    int64_t ts = host_, dur = memset ? rng_.Range(4000, 9000) : rng_.Range(9000, 30000);
    WriteRuntime(gpu_, memset ? "cudaMemsetAsync" : "cudaMemcpyAsync", memset ? 51 : 41, ts, dur, ext, corr);
    WriteFlow(gpu_, true, corr, pid_, tid_, ts);
    s7_ = std::max(s7_, wait_for);
    int64_t start = GpuStart(ts, s7_);
    int64_t cdur = std::max<int64_t>(1500, static_cast<int64_t>(static_cast<double>(bytes) / gbps) +
                                               rng_.Range(800, 2500));
    s7_ = start + cdur;
    WriteCopy(gpu_, memset, name, start, cdur, ext, corr, bytes);
    WriteFlow(gpu_, false, corr, device_, kComputeStream, start);
    host_ += dur + rng_.Range(500, 2500);
    ++c_.gpu_events;
    if (memset) ++c_.memset;
    else ++c_.memcpy;
  }

  // A runtime call with no GPU activity (events, stream waits): a host call only.
  void RuntimeOnly(std::string_view name, int cbid) {
    int64_t dur = rng_.Range(1500, 6000);
    WriteRuntime(gpu_, name, cbid, host_, dur, CurrentExt(), NextCorr());
    host_ += dur + rng_.Range(300, 1500);
  }

  void AllReduce(int64_t nelems) {
    if (!Budget()) return;
    std::string args = fmt::format(
        ", \"Collective name\": \"allreduce\", \"dtype\": \"Float\", \"In msg nelems\": {0}, \"Out msg nelems\": {0}"
        ", \"In split size\": \"[]\", \"Out split size\": \"[]\", \"Global rank start\": 0, \"Global rank stride\": "
        "1, \"Group size\": {1}, \"Process Group Name\": \"0\", \"Process Group Description\": \"default_pg\", "
        "\"Process Group Ranks\": \"{2}\", \"Rank\": {3}",
        nelems, cfg_.ranks, ranks_str_, rank_);
    comm_args_.push_back(std::move(args));
    Open("user_annotation", "nccl:all_reduce");
    Open("cpu_op", "record_param_comms", "[[], [], [], [], []]", "[\"GenericList\", \"Int\", \"Int\", \"Int\", \"Int\"]",
         &comm_args_.back());
    RuntimeOnly("cudaEventRecord", 135);
    RuntimeOnly("cudaStreamWaitEvent", 147);
    int64_t grad_ready = s7_;  // stream 20 waits for the bucket's last gradient kernel
    int64_t corr = NextCorr(), ext = CurrentExt();
    int64_t ts = host_, dur = LaunchDur();
    WriteRuntime(gpu_, "cudaLaunchKernel", 211, ts, dur, ext, corr);
    WriteFlow(gpu_, true, corr, pid_, tid_, ts);
    int64_t start = std::max(GpuStart(ts, s20_), grad_ready + rng_.Range(1500, 4000));
    // Ring all-reduce: 2(n-1)/n * bytes at 70-150 GB/s bus bandwidth, plus latency.
    double bytes = static_cast<double>(nelems) * 4.0;
    double busbw = 70.0 + 80.0 * rng_.Uniform();  // GB/s = bytes/ns
    int64_t kdur = static_cast<int64_t>(2.0 * (cfg_.ranks - 1) / cfg_.ranks * bytes / busbw) + rng_.Range(8000, 30000);
    s20_ = start + kdur;
    WriteKernel(gpu_, kNcclAllReduce, kCommStream, start, kdur, ext, corr, nelems);
    WriteFlow(gpu_, false, corr, device_, kCommStream, start);
    host_ += dur + rng_.Range(500, 2500);
    ++c_.gpu_events;
    ++c_.kernels;
    ++c_.comm_kernels;
    RuntimeOnly("cudaEventRecord", 135);
    Close();
    Close();
  }

  // ------------------------------------------------ one training step

  void Step(int64_t n) {
    ranges_.clear();
    open_.clear();
    comm_args_.clear();
    comm_args_.reserve(cfg_.layers + 4);  // stable addresses for HostRange::comm_args
    gpu_.clear();
    tid_ = main_tid_;
    int64_t step_start = host_ + rng_.Range(20000, 60000);
    host_ = step_start;
    size_t step_idx = Open("user_annotation", fmt::format("ProfilerStep#{}", n));
    ranges_[step_idx].ts = step_start;

    // Input batch to the GPU.
    for (int i = 0; i < 2; ++i) {
      Open("cpu_op", "aten::to", "[[8, 2048], [], [], [], [], [], [], []]",
           "[\"long int\", \"Scalar\", \"Scalar\", \"\", \"\", \"Scalar\", \"Scalar\", \"\"]");
      Open("cpu_op", "aten::_to_copy", "[[8, 2048], [], [], [], [], [], []]",
           "[\"long int\", \"Scalar\", \"\", \"\", \"\", \"Scalar\", \"\"]");
      Open("cpu_op", "aten::copy_", "[[8, 2048], [8, 2048], []]", "[\"long int\", \"long int\", \"Scalar\"]");
      Copy(false, "Memcpy HtoD (Pageable -> Device)", 131072, 6.5);
      Close();
      Close();
      Close();
    }

    // Forward, main thread.
    Open("cpu_op", "aten::embedding", "[[50304, 1024], [8, 2048], [], [], []]",
         "[\"float\", \"long int\", \"Scalar\", \"Scalar\", \"Scalar\"]");
    Open("cpu_op", "aten::index_select", "[[50304, 1024], [], [16384]]", "[\"float\", \"Scalar\", \"long int\"]");
    Kernel(kEmbeddingFwd);
    Close();
    Close();
    for (int l = 0; l < cfg_.layers && Budget(); ++l) {
      Open("cpu_op", "aten::layer_norm", "[[8, 2048, 1024], [], [1024], [1024], [], []]",
           "[\"float\", \"\", \"float\", \"float\", \"Scalar\", \"Scalar\"]");
      Open("cpu_op", "aten::native_layer_norm", "[[8, 2048, 1024], [], [1024], [1024], []]",
           "[\"float\", \"\", \"float\", \"float\", \"Scalar\"]");
      Kernel(kLayerNormFwd);
      Close();
      Close();
      Open("cpu_op", "aten::linear", "[[8, 2048, 1024], [3072, 1024], [3072]]", "[\"float\", \"float\", \"float\"]");
      Open("cpu_op", "aten::t", "[[3072, 1024]]", "[\"float\"]");
      Close();
      Open("cpu_op", "aten::addmm", "[[3072], [16384, 1024], [1024, 3072], [], []]",
           "[\"float\", \"float\", \"float\", \"Scalar\", \"Scalar\"]");
      Kernel(kGemmNN);
      Close();
      Close();
      Open("cpu_op", "aten::scaled_dot_product_attention", "[[8, 16, 2048, 64], [8, 16, 2048, 64], [8, 16, 2048, 64], [], [], [], []]",
           "[\"float\", \"float\", \"float\", \"\", \"Scalar\", \"Scalar\", \"\"]");
      Open("cpu_op", "aten::_scaled_dot_product_flash_attention", "[[8, 16, 2048, 64], [8, 16, 2048, 64], [8, 16, 2048, 64], [], [], [], []]",
           "[\"float\", \"float\", \"float\", \"Scalar\", \"Scalar\", \"Scalar\", \"\"]");
      Kernel(kFlashFwd);
      Close();
      Close();
      Open("cpu_op", "aten::gelu", "[[8, 2048, 4096], []]", "[\"float\", \"\"]");
      Kernel(kGelu);
      Close();
      Open("cpu_op", "aten::add", "[[8, 2048, 1024], [8, 2048, 1024], []]", "[\"float\", \"float\", \"Scalar\"]");
      Kernel(kAdd);
      Close();
    }
    Open("cpu_op", "aten::cross_entropy_loss", "[[16384, 50304], [16384], [], [], [], []]",
         "[\"float\", \"long int\", \"\", \"Scalar\", \"Scalar\", \"Scalar\"]");
    Open("cpu_op", "aten::log_softmax", "[[16384, 50304], [], []]", "[\"float\", \"Scalar\", \"\"]");
    Kernel(kLogSoftmax);
    Close();
    Open("cpu_op", "aten::nll_loss_nd", "[[16384, 50304], [16384], [], [], []]",
         "[\"float\", \"long int\", \"\", \"Scalar\", \"Scalar\"]");
    Kernel(kNllLoss);
    Close();
    Close();

    // Backward, autograd thread: one all-reduce per layer's gradient bucket.
    tid_ = bwd_tid_;
    Open("cpu_op", "autograd::engine::evaluate_function: NllLossBackward0", "[[]]", "[\"float\"]");
    Kernel(kNllLossBwd);
    Close();
    Open("cpu_op", "autograd::engine::evaluate_function: LogSoftmaxBackward0", "[[16384, 50304]]", "[\"float\"]");
    Kernel(kLogSoftmaxBwd);
    Close();
    const int64_t bucket_nelems = 12596224;  // one layer's parameters
    int buckets = 0;
    for (int l = cfg_.layers - 1; l >= 0 && Budget(); --l) {
      Open("cpu_op", "autograd::engine::evaluate_function: AddBackward0", "[[8, 2048, 1024]]", "[\"float\"]");
      Kernel(kAdd);
      Close();
      Open("cpu_op", "autograd::engine::evaluate_function: GeluBackward0", "[[8, 2048, 4096]]", "[\"float\"]");
      Open("cpu_op", "aten::gelu_backward", "[[8, 2048, 4096], [8, 2048, 4096], []]", "[\"float\", \"float\", \"\"]");
      Kernel(kGeluBwd);
      Close();
      Close();
      Open("cpu_op", "autograd::engine::evaluate_function: ScaledDotProductFlashAttentionBackward0",
           "[[8, 16, 2048, 64]]", "[\"float\"]");
      Open("cpu_op", "aten::_scaled_dot_product_flash_attention_backward",
           "[[8, 16, 2048, 64], [8, 16, 2048, 64], [8, 16, 2048, 64], [8, 16, 2048, 64], [8, 16, 2048, 64], [8, 16, 2048], [], [], [], [], [], [], [], []]",
           "[\"float\", \"float\", \"float\", \"float\", \"float\", \"float\", \"\", \"\", \"Scalar\", \"Scalar\", \"Scalar\", \"long int\", \"long int\", \"\"]");
      Kernel(kFlashBwdDot);
      Kernel(kFlashBwd);
      Close();
      Close();
      Open("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", "[[16384, 3072]]", "[\"float\"]");
      Open("cpu_op", "AddmmBackward0", "[[16384, 3072]]", "[\"float\"]");
      Open("cpu_op", "aten::mm", "[[16384, 3072], [3072, 1024]]", "[\"float\", \"float\"]");
      Kernel(kGemmNT);
      Close();
      Open("cpu_op", "aten::mm", "[[3072, 16384], [16384, 1024]]", "[\"float\", \"float\"]");
      Kernel(kGemmTN);
      Close();
      Open("cpu_op", "aten::sum", "[[16384, 3072], [], [], []]", "[\"float\", \"\", \"Scalar\", \"\"]");
      Kernel(kReduceSum);
      Close();
      Close();
      Close();
      Open("cpu_op", "autograd::engine::evaluate_function: NativeLayerNormBackward0", "[[8, 2048, 1024]]", "[\"float\"]");
      Open("cpu_op", "aten::native_layer_norm_backward",
           "[[8, 2048, 1024], [8, 2048, 1024], [], [8, 2048, 1], [8, 2048, 1], [1024], [1024], []]",
           "[\"float\", \"float\", \"\", \"float\", \"float\", \"float\", \"float\", \"\"]");
      Kernel(kLayerNormBwdInput);
      Kernel(kLayerNormBwdGamma);
      Close();
      Close();
      Open("cpu_op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", "[[3072, 1024]]",
           "[\"float\"]");
      Open("cpu_op", "torch::distributed::reducer::mul_out", "[[3072, 1024], [], []]", "[\"float\", \"Scalar\", \"float\"]");
      Kernel(kMulScalar);
      Close();
      Close();
      if (l % 4 == 0) {  // the reducer zeroes a fresh bucket view
        Open("cpu_op", "aten::zero_", "[[12596224]]", "[\"float\"]");
        Open("cpu_op", "aten::fill_", "[[12596224], []]", "[\"float\", \"Scalar\"]");
        Copy(true, "Memset (Device)", bucket_nelems * 4, 1300.0);
        Close();
        Close();
      }
      AllReduce(bucket_nelems);
      ++buckets;
    }
    Open("cpu_op", "autograd::engine::evaluate_function: EmbeddingBackward0", "[[8, 2048, 1024]]", "[\"float\"]");
    Kernel(kEmbeddingBwd);
    Close();
    // finalize_backward: wait for the all-reduces, copy every other bucket back to .grad.
    RuntimeOnly("cudaStreamWaitEvent", 147);
    for (int b = 0; b < buckets && Budget(); b += 2) {
      Open("user_annotation", "torch.distributed.ddp.reducer::copy_bucket_to_grad");
      Open("cpu_op", "aten::copy_", "[[3072, 1024], [3072, 1024], []]", "[\"float\", \"float\", \"Scalar\"]");
      Copy(false, "Memcpy DtoD (Device -> Device)", 3072 * 1024 * 4, 1250.0, s20_);
      Close();
      Close();
    }

    // Optimizer, main thread.
    tid_ = main_tid_;
    Open("user_annotation", "Optimizer.step#AdamW.step");
    Open("cpu_op", "aten::_fused_adamw_", "[[], [], [], [], [], [], [], [], [], [], [], [], []]",
         "[\"TensorList\", \"TensorList\", \"TensorList\", \"TensorList\", \"TensorList\", \"TensorList\", \"Scalar\", \"Scalar\", \"Scalar\", \"Scalar\", \"Scalar\", \"Scalar\", \"Scalar\"]");
    for (int i = 0; i < 6; ++i) Kernel(kAdamW);
    Close();
    Close();
    Open("user_annotation", "Optimizer.zero_grad#AdamW.zero_grad");
    Close();
    // loss.item(): DtoH copy and a synchronize; the host waits for the GPU.
    Open("cpu_op", "aten::item", "[[]]", "[\"float\"]");
    Open("cpu_op", "aten::_local_scalar_dense", "[[]]", "[\"float\"]");
    Copy(false, "Memcpy DtoH (Device -> Pageable)", 4, 0.002);
    int64_t sync_start = host_;
    host_ = std::max(host_, std::max(s7_, s20_)) + rng_.Range(4000, 12000);
    WriteRuntime(gpu_, "cudaStreamSynchronize", 131, sync_start, host_ - sync_start, CurrentExt(), NextCorr());
    Close();
    Close();
    Close();  // ProfilerStep#n

    // Host ranges first (in start order, parents before children), then the step's runtime
    // calls, flows and GPU activities: Kineto's own order, one step at a time.
    host_text_.clear();
    for (const HostRange& r : ranges_) WriteHostRange(host_text_, r);
    PutEvents(host_text_);
    PutEvents(gpu_);
    out_.MaybeFlush();
  }

  // ------------------------------------------------ document frame

  void WriteHeader() {
    std::string& o = host_text_;
    o.clear();
    o += "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n";
    for (int d = 0; d < 8; ++d) {
      o += fmt::format(
          "    {{\n      \"id\": {}, \"name\": \"NVIDIA A100-SXM4-80GB\", \"totalGlobalMem\": 85051572224,\n"
          "      \"computeMajor\": 8, \"computeMinor\": 0,\n"
          "      \"maxThreadsPerBlock\": 1024, \"maxThreadsPerMultiprocessor\": 2048,\n"
          "      \"regsPerBlock\": 65536, \"warpSize\": 32,\n"
          "      \"sharedMemPerBlock\": 49152, \"numSms\": 108\n"
          "    , \"regsPerMultiprocessor\": 65536, \"sharedMemPerBlockOptin\": 166912, "
          "\"sharedMemPerMultiprocessor\": 167936\n    }}{}\n",
          d, d < 7 ? "," : "");
    }
    o += "  ],\n";
    o += fmt::format(
        "  \"distributedInfo\": {{\"backend\": \"nccl\", \"rank\": {0}, \"world_size\": {1}, \"pg_count\": 1, "
        "\"pg_config\": [{{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"backend_config\": \"cuda:nccl\", "
        "\"pg_size\": {1}, \"ranks\": {2}}}], \"nccl_version\": \"2.20.5\"}},\n",
        rank_, cfg_.ranks, ranks_str_);
    o += "  \"record_shapes\": 1,\n  \"with_stack\": 0,\n  \"traceEvents\": [\n";
    out_.Put(o);
  }

  void WriteFooter() {
    std::string& o = host_text_;
    o.clear();
    int64_t meta_ts = trace_start_ + 28362646;
    auto meta = [&](std::string_view name, int64_t pid, int64_t tid, std::string_view args) {
      Begin(o);
      o += "    \"name\": \"";
      o += name;
      o += "\", \"ph\": \"M\", \"ts\": ";
      AppendUs(o, meta_ts);
      o += ", \"pid\": ";
      AppendInt(o, pid);
      o += ", \"tid\": ";
      AppendInt(o, tid);
      o += ",\n    \"args\": {\n      ";
      o += args;
      o += "\n    }\n  }";
      ++c_.metadata;
    };
    meta("process_name", pid_, 0, "\"name\": \"python3.10\"");
    meta("process_labels", pid_, 0, "\"labels\": \"CPU\"");
    meta("process_sort_index", pid_, 0, fmt::format("\"sort_index\": {}", pid_));
    for (int d = 0; d < 8; ++d) {
      meta("process_name", d, 0, "\"name\": \"python3.10\"");
      meta("process_labels", d, 0, fmt::format("\"labels\": \"GPU {}\"", d));
      meta("process_sort_index", d, 0, fmt::format("\"sort_index\": {}", 16777216 + d));
    }
    for (int64_t s : {kComputeStream, kCommStream}) {
      meta("thread_name", device_, s, fmt::format("\"name\": \"stream {} \"", s));
      meta("thread_sort_index", device_, s, fmt::format("\"sort_index\": {}", s));
    }
    meta("thread_name", pid_, main_tid_, fmt::format("\"name\": \"thread {} (pt_main_thread)\"", main_tid_));
    meta("thread_sort_index", pid_, main_tid_, fmt::format("\"sort_index\": {}", main_tid_));
    meta("thread_name", pid_, bwd_tid_, fmt::format("\"name\": \"thread {} (pt_autograd_0)\"", bwd_tid_));
    meta("thread_sort_index", pid_, bwd_tid_, fmt::format("\"sort_index\": {}", bwd_tid_));
    int64_t end = std::max(host_, std::max(s7_, s20_)) + 150000;
    Begin(o);
    o += "    \"ph\": \"X\", \"cat\": \"Trace\", \"ts\": ";
    AppendUs(o, trace_start_);
    o += ", \"dur\": ";
    AppendUs(o, end - trace_start_);
    o += ",\n    \"pid\": \"Spans\", \"tid\": \"PyTorch Profiler\",\n    \"name\": \"PyTorch Profiler (0)\",\n"
         "    \"args\": {\n      \"Op count\": 0\n    }\n  }";
    ++c_.other;
    Begin(o);
    o += "    \"name\": \"process_sort_index\", \"ph\": \"M\", \"ts\": ";
    AppendUs(o, trace_start_);
    o += ",\n    \"pid\": \"Spans\", \"tid\": 0,\n    \"args\": {\n      \"sort_index\": 536870912\n    }\n  }";
    ++c_.metadata;
    Begin(o);
    o += "    \"name\": \"Iteration Start: PyTorch Profiler\", \"ph\": \"i\", \"s\": \"g\",\n"
         "    \"pid\": \"Traces\", \"tid\": \"Trace PyTorch Profiler\", \"ts\": ";
    AppendUs(o, trace_start_);
    o += "\n  }";
    ++c_.other;
    Begin(o);
    o += "    \"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\",\n    \"pid\": \"\", \"tid\": \"\", \"ts\": ";
    AppendUs(o, end);
    o += "\n  }";
    ++c_.other;
    PutEvents(o);
    o = fmt::format(
        "\n  ],\n  \"traceName\": \"/tmp/overlapprof_bench/rank{}.pt.trace.json\",\n  \"displayTimeUnit\": \"ms\",\n"
        "  \"baseTimeNanoseconds\": 1711964646000000000\n}}\n",
        rank_);
    out_.Put(o);
  }

  const Config& cfg_;
  int rank_;
  Sink& out_;
  Rng rng_;
  Counts c_;
  int64_t device_, pid_, main_tid_, bwd_tid_, tid_ = 0;
  int64_t host_, trace_start_, s7_, s20_;
  int64_t corr_, ext_ = 0, rf_id_ = 0, ev_idx_ = 0, seq_ = 4151;
  std::string ranks_str_;
  std::vector<HostRange> ranges_;
  std::vector<size_t> open_;
  std::vector<std::string> comm_args_;
  std::string gpu_, host_text_;
  bool any_event_ = false;
};

// ---------------------------------------------------------------- main

[[noreturn]] void Usage(const char* msg) {
  if (msg) std::fprintf(stderr, "gen_kineto: %s\n", msg);
  std::fprintf(stderr,
               "usage: gen_kineto --ranks N --gpu-events-per-rank N --out DIR [--gzip] [--seed N]\n"
               "                  [--manifest PATH] [--jobs N] [--layers N]\n");
  std::exit(2);
}

int64_t ParseInt(const char* s, const char* what) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s, &end, 10);
  if (errno || !end || *end || v < 0) Usage(fmt::format("bad value for {}: '{}'", what, s).c_str());
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) Usage(fmt::format("{} needs a value", a).c_str());
      return argv[++i];
    };
    if (a == "--ranks") cfg.ranks = static_cast<int>(ParseInt(value(), "--ranks"));
    else if (a == "--gpu-events-per-rank") cfg.gpu_events_per_rank = ParseInt(value(), "--gpu-events-per-rank");
    else if (a == "--out") cfg.out = value();
    else if (a == "--manifest") cfg.manifest = value();
    else if (a == "--gzip") cfg.gzip = true;
    else if (a == "--seed") cfg.seed = static_cast<uint64_t>(ParseInt(value(), "--seed"));
    else if (a == "--jobs") cfg.jobs = static_cast<int>(ParseInt(value(), "--jobs"));
    else if (a == "--layers") cfg.layers = static_cast<int>(ParseInt(value(), "--layers"));
    else if (a == "-h" || a == "--help") Usage(nullptr);
    else Usage(fmt::format("unknown argument '{}'", a).c_str());
  }
  if (cfg.out.empty()) Usage("--out is required");
  if (cfg.ranks < 1 || cfg.ranks > 4096) Usage("--ranks must be 1..4096");
  if (cfg.layers < 1) Usage("--layers must be at least 1");
  if (cfg.manifest.empty()) cfg.manifest = (std::filesystem::path(cfg.out) / "manifest.json").string();
  std::error_code ec;
  std::filesystem::create_directories(cfg.out, ec);
  if (ec) {
    std::fprintf(stderr, "gen_kineto: cannot create %s: %s\n", cfg.out.c_str(), ec.message().c_str());
    return 1;
  }
  int jobs = cfg.jobs > 0 ? cfg.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  jobs = std::min(jobs, cfg.ranks);

  std::vector<Counts> counts(static_cast<size_t>(cfg.ranks));
  std::vector<std::string> names(static_cast<size_t>(cfg.ranks));
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  std::mutex log_mu;
  auto worker = [&]() {
    for (int r; (r = next.fetch_add(1)) < cfg.ranks && !failed;) {
      names[static_cast<size_t>(r)] = fmt::format("rank{}.json{}", r, cfg.gzip ? ".gz" : "");
      std::string path = (std::filesystem::path(cfg.out) / names[static_cast<size_t>(r)]).string();
      std::string tmp = path + ".partial";
      Sink sink;
      if (!sink.Open(tmp, cfg.gzip)) {
        std::lock_guard<std::mutex> l(log_mu);
        std::fprintf(stderr, "gen_kineto: cannot write %s: %s\n", tmp.c_str(), std::strerror(errno));
        failed = true;
        return;
      }
      RankWriter w(cfg, r, sink);
      Counts c = w.Run();
      if (!sink.Close() || std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::lock_guard<std::mutex> l(log_mu);
        std::fprintf(stderr, "gen_kineto: write failed: %s\n", path.c_str());
        failed = true;
        return;
      }
      std::error_code fec;
      c.file_bytes = std::filesystem::file_size(path, fec);
      counts[static_cast<size_t>(r)] = c;
      std::lock_guard<std::mutex> l(log_mu);
      std::fprintf(stderr, "gen_kineto: %s: %lld GPU events, %lld events, %.1f MB (%.1f MB on disk)\n", path.c_str(),
                   static_cast<long long>(c.gpu_events), static_cast<long long>(c.total_events),
                   static_cast<double>(c.uncompressed_bytes) / 1e6, static_cast<double>(c.file_bytes) / 1e6);
    }
  };
  std::vector<std::thread> threads;
  for (int j = 0; j < jobs; ++j) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (failed) return 1;

  Counts total;
  std::string files;
  for (int r = 0; r < cfg.ranks; ++r) {
    const Counts& c = counts[static_cast<size_t>(r)];
    files += fmt::format(
        "{}    {{\"path\": \"{}\", \"rank\": {}, \"gpu_events\": {}, \"kernels\": {}, \"comm_kernels\": {}, "
        "\"memcpy\": {}, \"memset\": {}, \"runtime_events\": {}, \"cpu_ops\": {}, \"user_annotations\": {}, "
        "\"flow_events\": {}, \"steps\": {}, \"total_events\": {}, \"uncompressed_bytes\": {}, \"file_bytes\": {}}}",
        r ? ",\n" : "", names[static_cast<size_t>(r)], r, c.gpu_events, c.kernels, c.comm_kernels, c.memcpy, c.memset,
        c.runtime, c.cpu_ops, c.user_annotations, c.flows, c.steps, c.total_events, c.uncompressed_bytes,
        c.file_bytes);
    total.gpu_events += c.gpu_events;
    total.total_events += c.total_events;
    total.comm_kernels += c.comm_kernels;
    total.memcpy += c.memcpy;
    total.memset += c.memset;
    total.runtime += c.runtime;
    total.user_annotations += c.user_annotations;
    total.uncompressed_bytes += c.uncompressed_bytes;
    total.file_bytes += c.file_bytes;
  }
  uint64_t largest = 0;
  for (const Counts& c : counts) largest = std::max(largest, c.uncompressed_bytes);
  std::string manifest = fmt::format(
      "{{\n  \"generator\": \"gen_kineto\",\n  \"seed\": {},\n  \"ranks\": {},\n  \"gpu_events_per_rank\": {},\n"
      "  \"layers\": {},\n  \"gzip\": {},\n  \"dir\": \"{}\",\n  \"files\": [\n{}\n  ],\n"
      "  \"totals\": {{\"gpu_events\": {}, \"comm_kernels\": {}, \"memcpy\": {}, \"memset\": {}, \"runtime_events\": "
      "{}, \"user_annotations\": {}, \"total_events\": {}, \"uncompressed_bytes\": {}, \"file_bytes\": {}, "
      "\"largest_uncompressed_bytes\": {}}}\n}}\n",
      cfg.seed, cfg.ranks, cfg.gpu_events_per_rank, cfg.layers, cfg.gzip ? "true" : "false", cfg.out, files,
      total.gpu_events, total.comm_kernels, total.memcpy, total.memset, total.runtime, total.user_annotations,
      total.total_events, total.uncompressed_bytes, total.file_bytes, largest);
  std::FILE* mf = std::fopen(cfg.manifest.c_str(), "wb");
  if (!mf || std::fwrite(manifest.data(), 1, manifest.size(), mf) != manifest.size() || std::fclose(mf) != 0) {
    std::fprintf(stderr, "gen_kineto: cannot write %s\n", cfg.manifest.c_str());
    return 1;
  }
  return 0;
}
