#pragma once
// Nsight Systems reports for the CLI (src/cli/pipeline.cc, ExpandInputs).
#include <string>

#include "src/common/status.h"

namespace overlapprof {

// An Nsight Systems report (.nsys-rep) -> the path of its SQLite export: runs `nsys export`
// when nsys is on PATH (into `cache_dir`, or a per-user cache in $TMPDIR when empty, reused
// while the report is unchanged); otherwise an error saying the command to run.
StatusOr<std::string> ExportNsysReport(const std::string& path, const std::string& cache_dir = "");

}  // namespace overlapprof
