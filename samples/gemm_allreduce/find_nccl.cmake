# Finds NCCL (header and library) for the samples. Looks in NCCL_ROOT / NCCL_HOME, the CUDA toolkit,
# the system, and the Python wheel nvidia-nccl-cu* (site-packages/nvidia/nccl: only libnccl.so.2 there).
# Defines the imported target samples::nccl when found.
if(TARGET samples::nccl)
  return()
endif()
set(_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME})
if(CUDAToolkit_LIBRARY_ROOT)
  list(APPEND _nccl_hints ${CUDAToolkit_LIBRARY_ROOT})
endif()
if(CUDAToolkit_TARGET_DIR)
  list(APPEND _nccl_hints ${CUDAToolkit_TARGET_DIR})
endif()
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_hints} ${CUDAToolkit_LIBRARY_DIR}
             PATH_SUFFIXES lib lib64)
if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  add_library(samples::nccl UNKNOWN IMPORTED)
  set_target_properties(samples::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
  set(NCCL_FOUND TRUE)
else()
  set(NCCL_FOUND FALSE)
endif()
