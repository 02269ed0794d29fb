#pragma once
// The Kineto (PyTorch-profiler JSON) importer's options (ImportOptions::kineto;
// src/importers/kineto/). Their own header so that importer.h can hold them without declaring
// anything else of the format.
#include <cstddef>

namespace overlapprof {

struct KinetoImportOptions {
  // Chrome-trace "ts"/"dur" unit as a power of ten of ns: 3 = µs (the format's unit,
  // default), 0 = ns (for writers that put integer ns in "ts").
  int time_exp = 3;
  // Bytes of JSON text the importer holds at once (its window; grown for one event larger than
  // it, up to 256 MiB). 0: the default, 16 MiB. Tests set a few bytes to move batch edges.
  size_t window_bytes = 0;
  // The largest element of traceEvents accepted (the window's most); 0: the default, 256 MiB.
  // A top-level value other than traceEvents may be up to the smaller of this and 64 MiB.
  size_t max_event_bytes = 0;
  // Read every event with simdjson On-Demand, not with the walker that reads nearly all of them
  // faster (src/importers/kineto/walk.h): the reference the walker is tested against.
  bool on_demand_only = false;
  // The builder on a thread of its own, fed by the walker: -1 for large inputs (a gzip stream,
  // inflated on a thread; a file of 32 MiB or more), 0 never, 1 always (tests).
  int build_thread = -1;
  // The walker over simdjson's structural index of each region of the window (stage 1, the
  // fast path: src/importers/kineto/index_walk.h) before the walker over the bytes: -1 where
  // simdjson has a SIMD implementation for this CPU, 0 never, 1 always (tests).
  int index_walk = -1;
};

}  // namespace overlapprof
