# Sourced by the GPU scripts (run.sh, record_runs.sh): gpu_lib_env BUILD_DIR puts on LD_LIBRARY_PATH
# the libraries a carried build needs (bundle.sh puts them in BUILD_DIR/gpu-libs/), the CUDA toolkit's,
# and last NCCL/cuBLAS/CUPTI from PyTorch's nvidia-* wheels for whatever the toolkit folders lack.
py_nvidia_libdirs() {
  python3 - "$@" <<'PY' 2>/dev/null || true
import glob, os, site, sys
roots = set(site.getsitepackages() + [site.getusersitepackages()])
dirs = []
for r in roots:
    for lib in sys.argv[1:]:
        for p in glob.glob(os.path.join(r, "nvidia", "**", lib), recursive=True):
            d = os.path.dirname(p)
            if d not in dirs:
                dirs.append(d)
print(":".join(dirs))
PY
}

gpu_lib_env() {
  local build="$1" extra_ld="" d wheel_dirs
  [[ -d "$build/gpu-libs" ]] && extra_ld="$build/gpu-libs"
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
    [[ -d "$d" ]] && extra_ld="${extra_ld:+$extra_ld:}$d"
  done
  wheel_dirs="$(py_nvidia_libdirs 'libnccl.so*' 'libcublas.so*' 'libcublasLt.so*' 'libcudart.so*' 'libcupti.so*')"
  [[ -n "$wheel_dirs" ]] && extra_ld="${extra_ld:+$extra_ld:}$wheel_dirs"
  export LD_LIBRARY_PATH="${extra_ld}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
