#pragma once
// Process exit codes of the overlapprof CLI (docs/exit-codes.md). Stable: scripts and CI
// gates depend on them.
namespace overlapprof {
inline constexpr int kExitOk = 0;
inline constexpr int kExitRegression = 1;    // `check`: the gate found a regression
inline constexpr int kExitUsageOrInput = 2;  // bad flags, missing/unreadable/invalid input
inline constexpr int kExitInconclusive = 3;  // `check`: too noisy to decide
inline constexpr int kExitDataQuality = 4;   // results printed, but an error-level data-quality counter is set
inline constexpr int kExitInternal = 5;      // a bug in overlapprof (or out of memory)
}  // namespace overlapprof
