// gemm_allreduce: cuBLAS GEMMs on a compute stream and NCCL collectives on a communication
// stream, scheduled serially, overlapped or chunked, with a CUDA-event ground truth of how much
// communication the GEMMs hide. overlapprof's figures for a traced run are checked against it
// (tests/gpu). See README.md beside this file.
//
// Ground truth: every GEMM and every collective is bracketed by two CUDA events on its own stream.
// Each iteration starts with a reference event on the compute stream that the communication stream
// waits on, so every event of the iteration is at a known offset (cudaEventElapsedTime) from one
// origin. Iterations end with both streams synchronized, so they never overlap one another. Per
// iteration: compute = |U GEMM intervals|, comm = |U collective intervals|, overlap = |compute ∩ comm|.

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

int g_rank = 0;  // for messages

[[noreturn]] void die(const char* what, const char* err, const char* file, int line) {
  std::fprintf(stderr, "gemm_allreduce: rank %d: %s failed: %s (%s:%d)\n", g_rank, what, err, file, line);
  std::fflush(stderr);
  std::_Exit(1);
}

[[noreturn]] void fail(const std::string& msg) {
  std::fprintf(stderr, "gemm_allreduce: rank %d: %s\n", g_rank, msg.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

}  // namespace

// Every CUDA, cuBLAS and NCCL call goes through one of these: the call's text and the library's
// own error string, then exit 1.
#define CUDA_CHECK(call)                                                                 \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) die(#call, cudaGetErrorString(e_), __FILE__, __LINE__);       \
  } while (0)
#define CUBLAS_CHECK(call)                                                               \
  do {                                                                                   \
    cublasStatus_t s_ = (call);                                                          \
    if (s_ != CUBLAS_STATUS_SUCCESS) die(#call, cublasGetStatusString(s_), __FILE__, __LINE__); \
  } while (0)
#define NCCL_CHECK(call)                                                                 \
  do {                                                                                   \
    ncclResult_t r_ = (call);                                                            \
    if (r_ != ncclSuccess) {                                                             \
      std::string m_ = ncclGetErrorString(r_);                                           \
      const char* l_ = ncclGetLastError(nullptr);                                        \
      if (l_ && *l_) m_ += std::string(": ") + l_;                                       \
      die(#call, m_.c_str(), __FILE__, __LINE__);                                        \
    }                                                                                    \
  } while (0)

namespace {

enum class Mode { kSerial, kOverlapped, kChunked };
enum class Op { kAllReduce, kReduceScatter, kAllGather };

const char* mode_name(Mode m) {
  return m == Mode::kSerial ? "serial" : m == Mode::kOverlapped ? "overlapped" : "chunked";
}
const char* op_name(Op o) {
  return o == Op::kAllReduce ? "allreduce" : o == Op::kReduceScatter ? "reducescatter" : "allgather";
}

struct Config {
  Mode mode = Mode::kOverlapped;
  Op op = Op::kAllReduce;
  int iters = 20, warmup = 5;
  int m = 8192, n = 8192, k = 8192;
  int gemms = 8;        // GEMMs per iteration
  int chunks = 4;       // collectives per iteration (the buffer split in this many chunks)
  size_t bytes = size_t(1) << 30;  // communication buffer per iteration
  bool bytes_set = false;
  bool fp32 = false;    // GEMM data type: bf16 (default) or fp32
  int sm_reserve = 16;  // SMs that cuBLAS is asked to leave free (cublasSetSmCountTarget)
  int nranks = 1;       // >1: spawn this many ranks of ourselves (same host)
  int timeout_s = 300;  // watchdog
  bool nvtx = true;     // ProfilerStep#N NVTX range per iteration
  bool group = false;   // the iteration's collectives in one ncclGroupStart/End: one NCCL kernel
  int lead_us = 1000;   // GPU wait before each iteration's reference event (lead_spin); 0: none
  bool quiet = false;
  std::string json;
};

void usage(int code) {
  std::fprintf(code ? stderr : stdout,
      "usage: gemm_allreduce [options]\n"
      "  --mode serial|overlapped|chunked   schedule (default overlapped)\n"
      "  --op allreduce|reducescatter|allgather  collective (default allreduce; float, ncclAvg)\n"
      "  --iters N --warmup N               timed and warm-up iterations (default 20, 5)\n"
      "  --m M --n N --k K                  GEMM size (default 8192 8192 8192)\n"
      "  --gemms G                          GEMMs per iteration (default 8)\n"
      "  --chunks C                         collectives per iteration, C <= G (default 4)\n"
      "  --lead-us U                        GPU wait ahead of each iteration while the host enqueues it,\n"
      "                                     so that events fire when the GPU reaches them (default\n"
      "                                     1000; 0: none)\n"
      "  --group                            serial/overlapped: the C collectives in one NCCL group\n"
      "                                     (one kernel runs them all: only NCCL's profiler plugin\n"
      "                                     times each)\n"
      "  --bytes B[K|M|G]                   communication bytes per iteration (default 1G for 1 rank,\n"
      "                                     64M for several)\n"
      "  --dtype bf16|fp32                  GEMM data type (default bf16)\n"
      "  --sm-reserve S                     SMs cuBLAS should leave to NCCL (default 16; 0: none)\n"
      "  --nranks N                         spawn N ranks of this program on this host (default 1;\n"
      "                                     ignored when RANK/WORLD_SIZE are set, e.g. by torchrun)\n"
      "  --json FILE                        write the ground truth (several ranks: merged by the\n"
      "                                     launcher; under torchrun '%%r' in FILE becomes the rank)\n"
      "  --timeout S                        abort after S seconds (default 300)\n"
      "  --no-nvtx                          no ProfilerStep#N NVTX ranges\n"
      "  --quiet                            only the summary line\n");
  std::exit(code);
}

size_t parse_bytes(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v <= 0) fail("bad --bytes value: " + s);
  std::string suf(end);
  double mul = 1;
  if (suf == "" || suf == "B") mul = 1;
  else if (suf == "K" || suf == "KiB" || suf == "k") mul = 1024.0;
  else if (suf == "M" || suf == "MiB") mul = 1024.0 * 1024;
  else if (suf == "G" || suf == "GiB") mul = 1024.0 * 1024 * 1024;
  else fail("bad --bytes suffix: " + s);
  return size_t(v * mul);
}

int parse_int(const std::string& s, const char* flag, int lo) {
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (end == s.c_str() || *end || v < lo || v > 1 << 30) fail(std::string("bad ") + flag + " value: " + s);
  return int(v);
}

Config parse_args(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) fail("missing value after " + a);
      return argv[++i];
    };
    if (a == "-h" || a == "--help") usage(0);
    else if (a == "--mode") {
      std::string v = val();
      if (v == "serial") c.mode = Mode::kSerial;
      else if (v == "overlapped") c.mode = Mode::kOverlapped;
      else if (v == "chunked") c.mode = Mode::kChunked;
      else fail("bad --mode: " + v);
    } else if (a == "--op") {
      std::string v = val();
      if (v == "allreduce") c.op = Op::kAllReduce;
      else if (v == "reducescatter") c.op = Op::kReduceScatter;
      else if (v == "allgather") c.op = Op::kAllGather;
      else fail("bad --op: " + v);
    } else if (a == "--iters") c.iters = parse_int(val(), "--iters", 1);
    else if (a == "--warmup") c.warmup = parse_int(val(), "--warmup", 0);
    else if (a == "--m") c.m = parse_int(val(), "--m", 1);
    else if (a == "--n") c.n = parse_int(val(), "--n", 1);
    else if (a == "--k") c.k = parse_int(val(), "--k", 1);
    else if (a == "--gemms") c.gemms = parse_int(val(), "--gemms", 1);
    else if (a == "--chunks") c.chunks = parse_int(val(), "--chunks", 1);
    else if (a == "--bytes") { c.bytes = parse_bytes(val()); c.bytes_set = true; }
    else if (a == "--dtype") {
      std::string v = val();
      if (v == "bf16") c.fp32 = false;
      else if (v == "fp32") c.fp32 = true;
      else fail("bad --dtype: " + v);
    } else if (a == "--sm-reserve") c.sm_reserve = parse_int(val(), "--sm-reserve", 0);
    else if (a == "--nranks") c.nranks = parse_int(val(), "--nranks", 1);
    else if (a == "--json") c.json = val();
    else if (a == "--timeout") c.timeout_s = parse_int(val(), "--timeout", 0);
    else if (a == "--no-nvtx") c.nvtx = false;
    else if (a == "--group") c.group = true;
    else if (a == "--lead-us") c.lead_us = parse_int(val(), "--lead-us", 0);
    else if (a == "--quiet") c.quiet = true;
    else { std::fprintf(stderr, "gemm_allreduce: unknown option %s\n", a.c_str()); usage(2); }
  }
  if (c.chunks > c.gemms) fail("--chunks must not exceed --gemms");
  if (c.group && c.mode == Mode::kChunked) fail("--group goes with --mode serial or overlapped");
  return c;
}

// ---------------------------------------------------------------------------------------------
// Interval arithmetic on [start, end) in integer ns.
using Interval = std::pair<int64_t, int64_t>;

std::vector<Interval> union_of(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const auto& iv : v) {
    if (iv.second <= iv.first) continue;
    if (!out.empty() && iv.first <= out.back().second) out.back().second = std::max(out.back().second, iv.second);
    else out.push_back(iv);
  }
  return out;
}
int64_t length_of(const std::vector<Interval>& u) {
  int64_t s = 0;
  for (const auto& iv : u) s += iv.second - iv.first;
  return s;
}
// |a ∩ b| for two unions (sorted, disjoint).
int64_t intersection_length(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  int64_t s = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    int64_t lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (hi > lo) s += hi - lo;
    if (a[i].second < b[j].second) ++i; else ++j;
  }
  return s;
}

struct Totals {
  int64_t compute_ns = 0, comm_ns = 0, overlap_ns = 0, gpu_ns = 0;
  int64_t gemms = 0, comm_ops = 0, iterations = 0;
  void add(const Totals& t) {
    compute_ns += t.compute_ns; comm_ns += t.comm_ns; overlap_ns += t.overlap_ns; gpu_ns += t.gpu_ns;
    gemms += t.gemms; comm_ops += t.comm_ops; iterations += t.iterations;
  }
  double ratio() const { return comm_ns > 0 ? double(overlap_ns) / double(comm_ns) : NAN; }
};

// ---------------------------------------------------------------------------------------------
// Rank set-up: environment (torchrun-like) or spawned by --nranks.
struct RankEnv {
  int rank = 0, world = 1, local_rank = 0, local_world = 1;
  bool from_env = false;
};

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  return std::atoi(v);
}

bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w; n -= size_t(w);
  }
  return true;
}
bool read_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n) {
    ssize_t r = ::read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r; n -= size_t(r);
  }
  return true;
}

// The unique id goes from rank 0 to the others through a file (GEMM_AR_ID_FILE: written to a
// temporary name, then renamed) or a TCP socket on MASTER_ADDR:(GEMM_AR_ID_PORT or MASTER_PORT+1;
// torchrun's own store is on MASTER_PORT).
void exchange_id(const RankEnv& re, ncclUniqueId* id, int timeout_s) {
  if (re.world == 1) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s > 0 ? timeout_s : 300);
  if (const char* file = std::getenv("GEMM_AR_ID_FILE"); file && *file) {
    if (re.rank == 0) {
      std::string tmp = std::string(file) + ".tmp";
      FILE* f = std::fopen(tmp.c_str(), "wb");
      if (!f || std::fwrite(id, sizeof(*id), 1, f) != 1 || std::fclose(f) != 0) fail("cannot write " + tmp);
      if (std::rename(tmp.c_str(), file) != 0) fail(std::string("cannot rename to ") + file);
    } else {
      for (;;) {
        FILE* f = std::fopen(file, "rb");
        if (f) {
          size_t got = std::fread(id, sizeof(*id), 1, f);
          std::fclose(f);
          if (got == 1) break;
        }
        if (std::chrono::steady_clock::now() > deadline) fail(std::string("timed out waiting for the NCCL id in ") + file);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    return;
  }
  const char* addr = std::getenv("MASTER_ADDR");
  int port = env_int("GEMM_AR_ID_PORT", env_int("MASTER_PORT", 29500) + 1);
  if (!addr || !*addr) addr = "127.0.0.1";
  if (re.rank == 0) {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) fail(std::string("socket: ") + std::strerror(errno));
    int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    sa.sin_port = htons(uint16_t(port));
    if (::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(s, re.world) != 0)
      fail("cannot listen on port " + std::to_string(port) + ": " + std::strerror(errno) + " (set GEMM_AR_ID_PORT)");
    for (int i = 1; i < re.world; ++i) {
      int c = ::accept(s, nullptr, nullptr);
      if (c < 0) fail(std::string("accept: ") + std::strerror(errno));
      if (!write_all(c, id, sizeof(*id))) fail("sending the NCCL id failed");
      ::close(c);
    }
    ::close(s);
  } else {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (::getaddrinfo(addr, std::to_string(port).c_str(), &hints, &res) != 0 || !res)
      fail(std::string("cannot resolve MASTER_ADDR ") + addr);
    for (;;) {
      int c = ::socket(AF_INET, SOCK_STREAM, 0);
      if (c >= 0 && ::connect(c, res->ai_addr, res->ai_addrlen) == 0) {
        if (!read_all(c, id, sizeof(*id))) fail("receiving the NCCL id failed");
        ::close(c);
        break;
      }
      if (c >= 0) ::close(c);
      if (std::chrono::steady_clock::now() > deadline)
        fail(std::string("timed out connecting to ") + addr + ":" + std::to_string(port) + " for the NCCL id");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::freeaddrinfo(res);
  }
}

void setenv_default(const char* name, const std::string& value) {
  const char* v = std::getenv(name);
  if (!v || !*v) ::setenv(name, value.c_str(), 1);
}

// Launcher for --nranks N: re-executes this program N times with RANK/WORLD_SIZE/LOCAL_RANK/
// LOCAL_WORLD_SIZE and GEMM_AR_ID_FILE set, waits for all, merges their JSON. Touches no CUDA.
int launch_ranks(const Config& cfg, int argc, char** argv) {
  char dir_tmpl[] = "/tmp/gemm_allreduce.XXXXXX";
  if (!::mkdtemp(dir_tmpl)) fail(std::string("mkdtemp: ") + std::strerror(errno));
  std::string dir = dir_tmpl;
  std::string id_file = dir + "/nccl_id";
  std::vector<pid_t> pids;
  for (int r = 0; r < cfg.nranks; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) fail(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(cfg.nranks).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(cfg.nranks).c_str(), 1);
      ::setenv("GEMM_AR_ID_FILE", id_file.c_str(), 1);
      ::setenv("GEMM_AR_JSON_DIR", dir.c_str(), 1);
      ::setenv("GEMM_AR_SPAWNED", "1", 1);
      // All ranks are on this host: loopback is enough for NCCL's bootstrap and socket transport.
      setenv_default("NCCL_SOCKET_IFNAME", "lo");
      std::vector<char*> args(argv, argv + argc);
      args.push_back(nullptr);
      ::execv("/proc/self/exe", args.data());
      std::fprintf(stderr, "gemm_allreduce: execv /proc/self/exe: %s\n", std::strerror(errno));
      std::_Exit(127);
    }
    pids.push_back(pid);
  }
  int worst = 0;
  size_t left = pids.size();
  while (left) {
    int status = 0;
    pid_t p = ::wait(&status);
    if (p < 0) { if (errno == EINTR) continue; break; }
    --left;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    if (code != 0 && worst == 0) {
      worst = code;
      std::fprintf(stderr, "gemm_allreduce: a rank exited with status %d; stopping the others\n", code);
      for (pid_t q : pids) if (q != p) ::kill(q, SIGTERM);
    }
  }
  if (worst == 0 && !cfg.json.empty()) {
    // Merge: every rank wrote DIR/rank<R>.json holding {"config":...,"rank":{...}} pieces.
    std::string config, ranks;
    for (int r = 0; r < cfg.nranks; ++r) {
      std::ifstream in(dir + "/rank" + std::to_string(r) + ".json");
      std::string line, cfg_line, rank_line;
      std::getline(in, cfg_line);
      std::getline(in, rank_line);
      if (!in && rank_line.empty()) fail("rank " + std::to_string(r) + " wrote no ground truth");
      if (r == 0) config = cfg_line;
      ranks += (r ? ",\n    " : "    ") + rank_line;
    }
    std::ofstream out(cfg.json);
    out << "{\n  \"schema\": \"overlapprof.sample.gemm_allreduce/1\",\n  \"config\": " << config
        << ",\n  \"ranks\": [\n" << ranks << "\n  ]\n}\n";
    if (!out) fail("cannot write " + cfg.json);
  }
  for (int r = 0; r < cfg.nranks; ++r) std::remove((dir + "/rank" + std::to_string(r) + ".json").c_str());
  std::remove(id_file.c_str());
  std::remove((id_file + ".tmp").c_str());
  ::rmdir(dir.c_str());
  return worst;
}

// One thread that waits `ns` of GPU time (%globaltimer) and does nothing else: launched ahead of an
// iteration, it keeps the streams busy while the host enqueues the iteration, so that each event
// fires when its stream reaches it, not when the host enqueues it (--lead-us). It waits on nothing
// the host does: it cannot hang, even under lazy module loading.
__global__ void lead_spin(uint64_t ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

__global__ void fill_bf16(__nv_bfloat16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = __float2bfloat16((float(h & 0xffff) / 65535.0f - 0.5f) * 0.1f);
  }
}
__global__ void fill_f32(float* p, size_t n, float base) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = base + float(i % 251) * 1e-3f;
}

std::string jnum(double v) {
  if (!std::isfinite(v)) return "null";
  char b[64];
  std::snprintf(b, sizeof b, "%.6f", v);
  return b;
}

std::string totals_json(const Totals& t) {
  std::ostringstream o;
  o << "{\"iterations\": " << t.iterations << ", \"gemms\": " << t.gemms << ", \"comm_ops\": " << t.comm_ops
    << ", \"compute_ns\": " << t.compute_ns << ", \"comm_ns\": " << t.comm_ns << ", \"overlap_ns\": " << t.overlap_ns
    << ", \"exposed_comm_ns\": " << (t.comm_ns - t.overlap_ns) << ", \"gpu_ns\": " << t.gpu_ns
    << ", \"overlap_ratio\": " << jnum(t.ratio()) << "}";
  return o.str();
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg = parse_args(argc, argv);

  RankEnv re;
  if (std::getenv("RANK") && std::getenv("WORLD_SIZE")) {
    re.from_env = true;
    re.rank = env_int("RANK", 0);
    re.world = env_int("WORLD_SIZE", 1);
    re.local_rank = env_int("LOCAL_RANK", re.rank);
    re.local_world = env_int("LOCAL_WORLD_SIZE", re.world);
    if (cfg.nranks > 1 && !std::getenv("GEMM_AR_SPAWNED") && cfg.nranks != re.world)
      std::fprintf(stderr, "gemm_allreduce: RANK/WORLD_SIZE set: --nranks %d ignored (world size %d)\n",
                   cfg.nranks, re.world);
  } else if (cfg.nranks > 1) {
    return launch_ranks(cfg, argc, argv);
  }
  g_rank = re.rank;
  if (re.world < 1 || re.rank < 0 || re.rank >= re.world) fail("bad RANK/WORLD_SIZE");
  if (!cfg.bytes_set && re.world > 1) cfg.bytes = size_t(64) << 20;

  if (cfg.timeout_s > 0) {
    std::signal(SIGALRM, [](int) {
      const char msg[] = "gemm_allreduce: watchdog: --timeout expired (a rank hung?)\n";
      ssize_t ignored = ::write(2, msg, sizeof(msg) - 1);
      (void)ignored;
      std::_Exit(3);
    });
    ::alarm(unsigned(cfg.timeout_s));
  }

  int ndev = 0;
  CUDA_CHECK(cudaGetDeviceCount(&ndev));
  if (ndev < 1) fail("no CUDA device");
  const int dev = re.local_rank % ndev;
  const bool shared_gpu = re.local_world > ndev;
  int nccl_version = 0;
  NCCL_CHECK(ncclGetVersion(&nccl_version));
  if (shared_gpu) {
    // Several ranks on one GPU: NCCL refuses ranks with the same host hash and bus id ("Duplicate
    // GPU detected"). A different NCCL_HOSTID per rank makes them look like different hosts (they
    // then talk through the network transport, sockets over loopback). NCCL 2.30 and later also
    // know NCCL_MULTI_RANK_GPU_ENABLE=1. A value the user set is kept.
    const char* hid = std::getenv("NCCL_HOSTID");
    const char* mr = std::getenv("NCCL_MULTI_RANK_GPU_ENABLE");
    if ((!hid || !*hid) && (!mr || !*mr)) {
      char host[256] = "host";
      ::gethostname(host, sizeof host - 1);
      ::setenv("NCCL_HOSTID", (std::string(host) + "-rank" + std::to_string(re.rank)).c_str(), 1);
      if (nccl_version >= 23000) ::setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
    }
  }
  CUDA_CHECK(cudaSetDevice(dev));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));

  ncclUniqueId id{};
  if (re.rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  exchange_id(re, &id, cfg.timeout_s);
  ncclComm_t comm = nullptr;
  NCCL_CHECK(ncclCommInitRank(&comm, re.world, id, re.rank));

  // Streams: communication at the highest priority (as NCCL users do), so a collective's blocks are
  // scheduled as soon as an SM frees up rather than queued behind GEMM blocks.
  int prio_lo = 0, prio_hi = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&prio_lo, &prio_hi));
  cudaStream_t s_comp = nullptr, s_comm = nullptr;
  CUDA_CHECK(cudaStreamCreateWithPriority(&s_comp, cudaStreamNonBlocking, prio_lo));
  CUDA_CHECK(cudaStreamCreateWithPriority(&s_comm, cudaStreamNonBlocking, prio_hi));

  cublasHandle_t blas = nullptr;
  CUBLAS_CHECK(cublasCreate(&blas));
  CUBLAS_CHECK(cublasSetStream(blas, s_comp));
  CUBLAS_CHECK(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH));
  int sm_target = 0;
  if (cfg.sm_reserve > 0 && cfg.sm_reserve < prop.multiProcessorCount) {
    sm_target = prop.multiProcessorCount - cfg.sm_reserve;
    CUBLAS_CHECK(cublasSetSmCountTarget(blas, sm_target));
  }

  // Buffers.
  const size_t elt = cfg.fp32 ? 4 : 2;
  void *A = nullptr, *B = nullptr, *C = nullptr;
  CUDA_CHECK(cudaMalloc(&A, size_t(cfg.m) * cfg.k * elt));
  CUDA_CHECK(cudaMalloc(&B, size_t(cfg.k) * cfg.n * elt));
  CUDA_CHECK(cudaMalloc(&C, size_t(cfg.m) * cfg.n * elt));
  // Communication: C chunks of `chunk_elems` floats; each chunk's count divisible by the world size.
  size_t chunk_elems = cfg.bytes / sizeof(float) / size_t(cfg.chunks);
  chunk_elems -= chunk_elems % size_t(re.world);
  if (chunk_elems == 0) fail("--bytes too small for --chunks and the world size");
  const size_t comm_elems = chunk_elems * size_t(cfg.chunks);
  float *sendbuf = nullptr, *recvbuf = nullptr;
  CUDA_CHECK(cudaMalloc(&sendbuf, comm_elems * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&recvbuf, comm_elems * sizeof(float)));
  if (cfg.fp32) {
    fill_f32<<<1024, 256, 0, s_comp>>>(static_cast<float*>(A), size_t(cfg.m) * cfg.k, 0.01f);
    fill_f32<<<1024, 256, 0, s_comp>>>(static_cast<float*>(B), size_t(cfg.k) * cfg.n, 0.02f);
  } else {
    fill_bf16<<<1024, 256, 0, s_comp>>>(static_cast<__nv_bfloat16*>(A), size_t(cfg.m) * cfg.k, 1u);
    fill_bf16<<<1024, 256, 0, s_comp>>>(static_cast<__nv_bfloat16*>(B), size_t(cfg.k) * cfg.n, 2u);
  }
  CUDA_CHECK(cudaGetLastError());
  fill_f32<<<1024, 256, 0, s_comp>>>(sendbuf, comm_elems, 1.0f + float(re.rank));
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemsetAsync(recvbuf, 0, comm_elems * sizeof(float), s_comp));
  CUDA_CHECK(cudaStreamSynchronize(s_comp));

  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t dt = cfg.fp32 ? CUDA_R_32F : CUDA_R_16BF;
  auto gemm = [&]() {
    CUBLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, cfg.m, cfg.n, cfg.k, &alpha, A, dt, cfg.m, B, dt,
                              cfg.k, &beta, C, dt, cfg.m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  auto collective = [&](int c) {
    float* send = sendbuf + size_t(c) * chunk_elems;
    float* recv = recvbuf + size_t(c) * chunk_elems;
    const size_t per_rank = chunk_elems / size_t(re.world);
    switch (cfg.op) {
      case Op::kAllReduce:
        // ncclAvg on float: even on one rank NCCL runs a kernel (a 1-rank ncclSum is a memcpy).
        NCCL_CHECK(ncclAllReduce(send, recv, chunk_elems, ncclFloat, ncclAvg, comm, s_comm));
        break;
      case Op::kReduceScatter:
        NCCL_CHECK(ncclReduceScatter(send, recv, per_rank, ncclFloat, ncclAvg, comm, s_comm));
        break;
      case Op::kAllGather:  // on one rank this is a memcpy
        NCCL_CHECK(ncclAllGather(send, recv, per_rank, ncclFloat, comm, s_comm));
        break;
    }
  };

  // Events: a reference, and a before/after pair per GEMM and per collective.
  const int G = cfg.gemms, K = cfg.chunks;
  cudaEvent_t ev_ref, ev_done;
  CUDA_CHECK(cudaEventCreate(&ev_ref));
  CUDA_CHECK(cudaEventCreate(&ev_done));
  std::vector<cudaEvent_t> gb(G), ga(G), cb(K), ca(K);
  for (auto* v : {&gb, &ga, &cb, &ca})
    for (auto& e : *v) CUDA_CHECK(cudaEventCreate(&e));
  // Chunk c is produced by GEMM producer[c] (chunked mode).
  std::vector<int> producer(K);
  for (int c = 0; c < K; ++c) producer[c] = int((int64_t(c + 1) * G + K - 1) / K) - 1;

  Totals all, timed;
  std::vector<double> step_ms, gpu_ms;
  const int total_iters = cfg.warmup + cfg.iters;
  for (int it = 0; it < total_iters; ++it) {
    const bool is_timed = it >= cfg.warmup;
    std::string range = "ProfilerStep#" + std::to_string(it);
    if (cfg.nvtx) nvtxRangePushA(range.c_str());
    const auto t0 = std::chrono::steady_clock::now();
    if (cfg.lead_us > 0) {  // before the reference event: in no interval of the ground truth
      lead_spin<<<1, 1, 0, s_comp>>>(uint64_t(cfg.lead_us) * 1000u);
      CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaEventRecord(ev_ref, s_comp));
    CUDA_CHECK(cudaStreamWaitEvent(s_comm, ev_ref, 0));
    auto launch_coll = [&](int c) {
      CUDA_CHECK(cudaEventRecord(cb[c], s_comm));
      collective(c);
      CUDA_CHECK(cudaEventRecord(ca[c], s_comm));
    };
    // --group: every collective of the iteration in one group (NCCL launches one kernel for them).
    // Their events bracket the group: each collective's interval is the group's.
    auto launch_colls = [&]() {
      if (!cfg.group) {
        for (int c = 0; c < K; ++c) launch_coll(c);
        return;
      }
      for (int c = 0; c < K; ++c) CUDA_CHECK(cudaEventRecord(cb[c], s_comm));
      NCCL_CHECK(ncclGroupStart());
      for (int c = 0; c < K; ++c) collective(c);
      NCCL_CHECK(ncclGroupEnd());
      for (int c = 0; c < K; ++c) CUDA_CHECK(cudaEventRecord(ca[c], s_comm));
    };
    auto launch_gemm = [&](int g) {
      CUDA_CHECK(cudaEventRecord(gb[g], s_comp));
      gemm();
      CUDA_CHECK(cudaEventRecord(ga[g], s_comp));
    };
    switch (cfg.mode) {
      case Mode::kSerial:
        for (int g = 0; g < G; ++g) launch_gemm(g);
        CUDA_CHECK(cudaEventRecord(ev_done, s_comp));
        CUDA_CHECK(cudaStreamWaitEvent(s_comm, ev_done, 0));
        launch_colls();
        break;
      case Mode::kOverlapped:
        // The collectives do not depend on this iteration's GEMMs (think: last step's gradients).
        launch_colls();
        for (int g = 0; g < G; ++g) launch_gemm(g);
        break;
      case Mode::kChunked: {
        int c = 0;
        for (int g = 0; g < G; ++g) {
          launch_gemm(g);
          for (; c < K && producer[c] == g; ++c) {
            CUDA_CHECK(cudaStreamWaitEvent(s_comm, ga[g], 0));
            launch_coll(c);
          }
        }
        break;
      }
    }
    CUDA_CHECK(cudaStreamSynchronize(s_comm));
    CUDA_CHECK(cudaStreamSynchronize(s_comp));
    const auto t1 = std::chrono::steady_clock::now();
    if (cfg.nvtx) nvtxRangePop();

    // Ground truth of this iteration.
    auto at_ns = [&](cudaEvent_t e) {
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, ev_ref, e));
      return int64_t(std::llround(double(ms) * 1e6));
    };
    std::vector<Interval> comp_iv, comm_iv;
    int64_t last = 0;
    for (int g = 0; g < G; ++g) {
      comp_iv.emplace_back(at_ns(gb[g]), at_ns(ga[g]));
      last = std::max(last, comp_iv.back().second);
    }
    for (int c = 0; c < K; ++c) {
      comm_iv.emplace_back(at_ns(cb[c]), at_ns(ca[c]));
      last = std::max(last, comm_iv.back().second);
    }
    auto cu = union_of(comp_iv), mu = union_of(comm_iv);
    Totals t;
    t.compute_ns = length_of(cu);
    t.comm_ns = length_of(mu);
    t.overlap_ns = intersection_length(cu, mu);
    t.gpu_ns = last;
    t.gemms = G;
    t.comm_ops = K;
    t.iterations = 1;
    all.add(t);
    if (is_timed) {
      timed.add(t);
      step_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      gpu_ms.push_back(double(last) / 1e6);
    }
  }

  // Every rank finishes its collectives before tearing down.
  CUDA_CHECK(cudaDeviceSynchronize());
  NCCL_CHECK(ncclCommFinalize(comm));
  NCCL_CHECK(ncclCommDestroy(comm));

  const double step_med = median(step_ms), gpu_med = median(gpu_ms);
  double step_mean = 0;
  for (double s : step_ms) step_mean += s;
  step_mean /= double(step_ms.size());

  if (!cfg.quiet && re.rank == 0) {
    std::printf("gemm_allreduce: device %d (%s, %d SMs), NCCL %d, %d rank(s)%s, cuBLAS SM target %d\n", dev,
                prop.name, prop.multiProcessorCount, nccl_version, re.world,
                shared_gpu ? " sharing the GPU" : "", sm_target);
  }
  std::printf("gemm_allreduce rank %d/%d mode=%s op=%s: compute %.3f ms comm %.3f ms overlap %.3f ms "
              "overlap_ratio %.4f (all %" PRId64 " iterations; timed: %.4f) step median %.3f ms\n",
              re.rank, re.world, mode_name(cfg.mode), op_name(cfg.op), all.compute_ns / 1e6, all.comm_ns / 1e6,
              all.overlap_ns / 1e6, all.ratio(), all.iterations, timed.ratio(), step_med);
  std::fflush(stdout);

  if (!cfg.json.empty()) {
    std::ostringstream conf, rank;
    conf << "{\"mode\": \"" << mode_name(cfg.mode) << "\", \"op\": \"" << op_name(cfg.op) << "\", \"m\": " << cfg.m
         << ", \"n\": " << cfg.n << ", \"k\": " << cfg.k << ", \"dtype\": \"" << (cfg.fp32 ? "fp32" : "bf16")
         << "\", \"gemms\": " << G << ", \"chunks\": " << K << ", \"group\": " << (cfg.group ? "true" : "false") << ", \"lead_us\": " << cfg.lead_us
         << ", \"bytes\": " << comm_elems * sizeof(float)
         << ", \"iters\": " << cfg.iters << ", \"warmup\": " << cfg.warmup << ", \"world_size\": " << re.world
         << ", \"sm_reserve\": " << cfg.sm_reserve << ", \"sm_count_target\": " << sm_target
         << ", \"nccl_version\": " << nccl_version << ", \"device_name\": \"" << prop.name
         << "\", \"shared_gpu\": " << (shared_gpu ? "true" : "false") << "}";
    rank << "{\"rank\": " << re.rank << ", \"local_rank\": " << re.local_rank << ", \"device\": " << dev
         << ", \"all\": " << totals_json(all) << ", \"timed\": " << totals_json(timed)
         << ", \"step_ms_median\": " << jnum(step_med) << ", \"step_ms_mean\": " << jnum(step_mean)
         << ", \"gpu_iter_ms_median\": " << jnum(gpu_med) << ", \"step_ms\": [";
    for (size_t i = 0; i < step_ms.size(); ++i) rank << (i ? ", " : "") << jnum(step_ms[i]);
    rank << "]}";
    const char* dir = std::getenv("GEMM_AR_JSON_DIR");
    if (dir && *dir && std::getenv("GEMM_AR_SPAWNED")) {
      // Spawned by --nranks: the launcher merges these two lines.
      std::ofstream out(std::string(dir) + "/rank" + std::to_string(re.rank) + ".json");
      out << conf.str() << "\n" << rank.str() << "\n";
      if (!out) fail("cannot write the ground truth into " + std::string(dir));
    } else {
      std::string path = cfg.json;
      if (auto p = path.find("%r"); p != std::string::npos) path.replace(p, 2, std::to_string(re.rank));
      else if (re.world > 1) path += ".rank" + std::to_string(re.rank);
      std::ofstream out(path);
      out << "{\n  \"schema\": \"overlapprof.sample.gemm_allreduce/1\",\n  \"config\": " << conf.str()
          << ",\n  \"ranks\": [\n    " << rank.str() << "\n  ]\n}\n";
      if (!out) fail("cannot write " + path);
    }
  }

  CUBLAS_CHECK(cublasDestroy(blas));
  for (auto* v : {&gb, &ga, &cb, &ca})
    for (auto& e : *v) CUDA_CHECK(cudaEventDestroy(e));
  CUDA_CHECK(cudaEventDestroy(ev_ref));
  CUDA_CHECK(cudaEventDestroy(ev_done));
  CUDA_CHECK(cudaFree(A));
  CUDA_CHECK(cudaFree(B));
  CUDA_CHECK(cudaFree(C));
  CUDA_CHECK(cudaFree(sendbuf));
  CUDA_CHECK(cudaFree(recvbuf));
  CUDA_CHECK(cudaStreamDestroy(s_comp));
  CUDA_CHECK(cudaStreamDestroy(s_comm));
  return 0;
}
