#include "analyzers/what_if_fit.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace overlapprof::whatif {

namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

// The pairwise slopes Theil-Sen takes the median of are O(n^2): above this many envelope points,
// every k-th point is used (message sizes are few in practice: bucket and layer sizes).
constexpr size_t kMaxEnvelopePoints = 512;

TransferFit FitFamily(Collective op, const std::vector<TransferSample>& all) {
  TransferFit f;
  f.op = op;
  std::vector<const TransferSample*> used;
  for (const TransferSample& s : all)
    if (!s.kernel) used.push_back(&s);
  if (used.empty()) {
    f.from_kernels = true;
    for (const TransferSample& s : all) used.push_back(&s);
  }
  f.samples = static_cast<int64_t>(used.size());
  std::map<int64_t, int64_t> envelope;  // bytes -> shortest time
  for (const TransferSample* s : used) {
    auto [it, fresh] = envelope.emplace(s->bytes, s->ns);
    if (!fresh) it->second = std::min(it->second, s->ns);
  }
  f.sizes = static_cast<int64_t>(envelope.size());
  if (envelope.size() < 2) {
    f.why_not = "one message size: latency and bandwidth cannot be told apart";
    return f;
  }
  std::vector<std::pair<double, double>> pts;
  const size_t step = (envelope.size() + kMaxEnvelopePoints - 1) / kMaxEnvelopePoints;
  size_t i = 0;
  for (const auto& [b, ns] : envelope)
    if (i++ % step == 0) pts.emplace_back(static_cast<double>(b), static_cast<double>(ns));
  std::vector<double> slopes;
  for (size_t a = 0; a < pts.size(); ++a)
    for (size_t b = a + 1; b < pts.size(); ++b)
      slopes.push_back((pts[b].second - pts[a].second) / (pts[b].first - pts[a].first));  // sizes distinct
  const double slope = std::max(0.0, Median(slopes));  // ns per byte
  std::vector<double> icepts;
  for (const auto& [x, y] : pts) icepts.push_back(y - slope * x);
  f.latency_ns = std::max(0.0, Median(icepts));
  f.bytes_per_ns = slope > 0 ? 1.0 / slope : 0.0;
  f.fitted = true;
  std::vector<double> excess;
  for (const TransferSample* s : used) {
    const double fit = f.At(s->bytes);
    if (fit > 0) excess.push_back(100.0 * (static_cast<double>(s->ns) - fit) / fit);
  }
  f.median_excess_pct = Median(excess);
  return f;
}

}  // namespace

double TransferFit::At(int64_t bytes) const {
  if (!fitted) return 0;
  return latency_ns + (bytes_per_ns > 0 ? static_cast<double>(bytes) / bytes_per_ns : 0.0);
}

std::vector<TransferFit> FitTransfers(const std::vector<TransferSample>& samples) {
  std::map<Collective, std::vector<TransferSample>> families;
  for (const TransferSample& s : samples)
    if (s.bytes >= 0 && s.ns >= 0) families[s.op].push_back(s);
  std::vector<TransferFit> out;
  for (const auto& [op, v] : families) out.push_back(FitFamily(op, v));
  return out;
}

int64_t ScaledTransfer(const TransferFit& fit, int64_t bytes, int64_t ns, double latency_factor,
                       double bandwidth_factor) {
  if (!fit.fitted || ns <= 0) return std::max<int64_t>(ns, 0);
  const double lat = std::min(fit.latency_ns, static_cast<double>(ns));
  const double by = std::min(fit.At(bytes) - fit.latency_ns, static_cast<double>(ns) - lat);
  const double rest = static_cast<double>(ns) - lat - by;
  const double scaled = rest + lat * latency_factor + (bandwidth_factor > 0 ? by / bandwidth_factor : by);
  return std::max<int64_t>(0, std::llround(scaled));
}

}  // namespace overlapprof::whatif
