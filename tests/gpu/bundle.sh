#!/usr/bin/env bash
# Makes a small, self-contained copy of a build for the GPU machine, which may lack overlapprof's
# build dependencies (fmt, simdjson, SQLite, libdeflate, CLI11):
#   tests/gpu/bundle.sh [BUILD_DIR] [BUNDLE_DIR]      (defaults: build, BUILD_DIR/gpu-bundle)
# BUNDLE_DIR keeps BUILD_DIR's layout for overlapprof, the injector's shared libraries and the sample
# (stripped of debug info), plus gpu-libs/ with the shared libraries they need that are neither glibc
# nor CUDA/NCCL (those come from the GPU machine), and nsys-libs/ (below). Then, there:
# tests/gpu/run.sh BUNDLE_DIR, tests/gpu/nsys_capture.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-$root/build}"
bundle="${2:-$build/gpu-bundle}"
die() { echo "tests/gpu/bundle.sh: $*" >&2; exit 2; }
[[ -x "$build/overlapprof" ]] || die "no overlapprof in $build (build first)"

rm -rf "$bundle"
mkdir -p "$bundle/gpu-libs"
copy() {  # copy REL from build into the bundle, stripped
  local rel="$1"
  mkdir -p "$bundle/$(dirname "$rel")"
  cp -L "$build/$rel" "$bundle/$rel"
  strip --strip-debug "$bundle/$rel" 2>/dev/null || true
}
copy overlapprof
bins=("$bundle/overlapprof")
while IFS= read -r -d '' so; do
  rel="${so#"$build"/}"
  copy "$rel"
  bins+=("$bundle/$rel")
done < <(find "$build/injector" -name '*.so*' \( -type f -o -type l \) -print0 2>/dev/null)
for rel in samples/gemm_allreduce/gemm_allreduce samples-standalone/gemm_allreduce; do
  if [[ -x "$build/$rel" ]]; then
    copy "$rel"
    bins+=("$bundle/$rel")
  fi
done
# Dependencies: everything ldd resolves except glibc's, libstdc++/libgcc (newer on the GPU machine)
# and the CUDA/NCCL libraries (the GPU machine's own must be used).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libcupti|libnccl|libnvidia|libnvrtc)'
ldd "${bins[@]}" 2>/dev/null | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
  [[ "$name" =~ $skip ]] && continue
  cp -L "$path" "$bundle/gpu-libs/$name"
done
# Nsight Systems' importer as Nsight Compute ships it on the GPU machine needs elfutils' libdw and
# libelf, which that machine lacks (tests/gpu/nsys_capture.sh): Debian's, best effort.
mkdir -p "$bundle/nsys-libs"
if ! ( tmp="$(mktemp -d)" && trap 'rm -rf "$tmp"' EXIT && cd "$tmp" &&
       apt-get download libdw1 libelf1 >/dev/null 2>&1 && for d in ./*.deb; do dpkg -x "$d" x; done &&
       cp -a x/usr/lib/*/libdw*.so* x/usr/lib/*/libelf*.so* "$bundle/nsys-libs/" ); then
  echo "tests/gpu/bundle.sh: note: no libdw/libelf for nsys-libs/ (apt-get download libdw1 libelf1 failed):" \
       "tests/gpu/nsys_capture.sh will not make reports there" >&2
fi
du -sh "$bundle" | awk '{print "tests/gpu/bundle.sh: " $2 ": " $1}'
ls "$bundle/gpu-libs"
