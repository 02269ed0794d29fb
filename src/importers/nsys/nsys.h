#pragma once
// The Nsight Systems importer's functions for the rest of the program (src/importers/nsys/;
// docs/nsys.md). Its options are ImportOptions::nsys (src/importers/nsys/nsys_options.h).
#include <cstdint>
#include <optional>
#include <string_view>

namespace overlapprof {

// The CUDA device of an Nsight Systems rank key (ImportSession::Units: "pid<PID>.gpu<DEVICE>"),
// or nullopt when `key` is not one.
std::optional<int64_t> NsysUnitDevice(std::string_view key);

}  // namespace overlapprof
