#!/usr/bin/env python3
"""Cuts mi350_fsdp_rank0_3steps.json.gz out of the real rank file (see README.md).

    make_subset.py FULL.json.gz OUT.json.gz

Keeps the document's structure and every section overlapprof reads (metadata, agents, strings,
buffer_records), the kernel dispatches that start in a window of 3 x 26 RCCL kernels (26 per
training step) from the 695th RCCL kernel on, and the kernel_symbols they use; drops
code_objects, host_functions and the other kernel symbols. Timestamps and ids are unchanged.
"""
import gzip
import json
import sys

FIRST_RCCL, RCCL_KERNELS = 694, 3 * 26


def main(src, dst):
    doc = json.load(gzip.open(src, "rt"))
    p = doc["rocprofiler-sdk-tool"][0]
    names = {k["kernel_id"]: k["formatted_kernel_name"] for k in p["kernel_symbols"]}
    kd = p["buffer_records"]["kernel_dispatch"]
    rccl = sorted(k["start_timestamp"] for k in kd if "nccl" in names[k["dispatch_info"]["kernel_id"]].lower())
    lo, hi = rccl[FIRST_RCCL], rccl[FIRST_RCCL + RCCL_KERNELS]
    kept = [k for k in kd if lo <= k["start_timestamp"] < hi]
    used = {k["dispatch_info"]["kernel_id"] for k in kept}
    p["buffer_records"]["kernel_dispatch"] = kept
    p["kernel_symbols"] = [k for k in p["kernel_symbols"] if k["kernel_id"] in used]
    p["code_objects"] = []
    p["host_functions"] = []
    with gzip.GzipFile(dst, "wb", mtime=0) as f:
        f.write(json.dumps(doc, separators=(",", ":")).encode())
    print(f"{len(kept)} dispatches, {len(used)} kernel symbols, window [{lo}, {hi}) ns")


if __name__ == "__main__":
    main(*sys.argv[1:3])
