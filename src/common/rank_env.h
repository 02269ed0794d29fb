#pragma once
// The environment variables that say a process's place in a job, first found wins: torchrun /
// torch.distributed (RANK, WORLD_SIZE, LOCAL_RANK), Open MPI, MPICH / Intel MPI (PMI), Slurm.
// Read by the injector from its own process (injector/runtime.cc) and by the Nsight Systems
// importer from the environment an export recorded (src/importers/nsys.cc). Null-terminated
// so that the injector can walk them without the C++ library.
namespace overlapprof {

inline constexpr const char* kRankEnv[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", nullptr};
inline constexpr const char* kWorldSizeEnv[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS",
                                                nullptr};
inline constexpr const char* kLocalRankEnv[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                                "SLURM_LOCALID", nullptr};

}  // namespace overlapprof
