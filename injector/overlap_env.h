#pragma once
// The job's settings that change how communication overlaps compute (meta `overlap_env`,
// docs/schema.md): a fixed list of environment variables, read once at activation. Only the
// variables of the list are kept; no other variable's value is read or written.
#include <string>

namespace overlapprof::inject {

// Names kept exactly, and prefixes whose every variable is kept (NCCL_P2P_*, TORCH_NCCL_*).
inline constexpr const char* kOverlapEnvNames[] = {
    "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_DEVICE_MAX_COPY_CONNECTIONS", "CUDA_LAUNCH_BLOCKING",
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS", "NCCL_MAX_CTAS",
    "NCCL_MIN_CTAS", "NCCL_NTHREADS", "NCCL_CTA_POLICY", "NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE",
    "NCCL_GRAPH_REGISTER", "NCCL_LAUNCH_MODE", "NCCL_BUFFSIZE", "NCCL_PROFILER_PLUGIN",
};
inline constexpr const char* kOverlapEnvPrefixes[] = {"NCCL_P2P_", "TORCH_NCCL_"};
// Bounds on what is kept: variables (the first in `environ` order) and bytes of one value
// (longer values are cut there). Counted as overlap_env_truncated.
inline constexpr int kOverlapEnvMaxVars = 64;
inline constexpr size_t kOverlapEnvMaxValueBytes = 256;

// The JSON object {"NAME": "value", ...} (names sorted) of the listed variables set in `envp`
// (a NULL-terminated "NAME=value" array, as `environ`), "{}" when none is set. Only the
// entries' names are compared against the list; a value is copied only for a listed name.
// Control characters and bytes >= 0x80 are written as \u00XX (each byte on its own: the text
// stays valid JSON whatever the bytes). *truncated is set when a bound above cut something.
// Allocates; called at activation, never in a hook or a constructor.
std::string OverlapEnvJson(const char* const* envp, bool* truncated);

}  // namespace overlapprof::inject
