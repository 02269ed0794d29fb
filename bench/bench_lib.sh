# Shared by the bench scripts (sourced, not run): waiting for a quiet machine and timing a
# command's runs. The caller sets MAX_LOAD, MAX_WAIT, REPEAT, OUT and BENCH_NAME (its name, for
# the failure message).

# Waits (15 s at a time, at most MAX_WAIT s) for the 1-minute load average to fall below MAX_LOAD;
# says so when it times anyway.
wait_idle() {
  local waited=0
  while awk -v m="$MAX_LOAD" '{ exit !($1 >= m) }' /proc/loadavg; do
    if ((waited >= MAX_WAIT)); then echo "  (load still $(cut -d' ' -f1 /proc/loadavg) after ${MAX_WAIT} s: timing anyway)"; return; fi
    sleep 15
    waited=$((waited + 15))
  done
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# Runs "$@" REPEAT times under /usr/bin/time; sets WALL, CPU_S (user + sys), RSS_MB (10^6 bytes):
# medians. A failed run prints its stderr and exits 1.
timed() {
  local walls=() cpus=() rss=() i w u s m
  for ((i = 0; i < REPEAT; i++)); do
    /usr/bin/time -f '%e %U %S %M' -o "$OUT/time.txt" "$@" >/dev/null 2>"$OUT/stderr.txt" || {
      echo "$BENCH_NAME: failed: $*" >&2; cat "$OUT/stderr.txt" >&2; exit 1; }
    read -r w u s m < <(tail -n1 "$OUT/time.txt")
    walls+=("$w"); cpus+=("$(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }')"); rss+=("$(awk -v k="$m" 'BEGIN { printf "%.0f", k * 1024 / 1e6 }')")
  done
  WALL=$(printf '%s\n' "${walls[@]}" | median)
  CPU_S=$(printf '%s\n' "${cpus[@]}" | median)
  RSS_MB=$(printf '%s\n' "${rss[@]}" | median)
}
