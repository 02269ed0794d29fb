#!/usr/bin/env bash
# Regenerates the bad-input fixtures used by tests/e2e (committed; run by hand only).
# Usage: tests/data/bad/make_bad_inputs.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cli=${1:?build dir}/overlapprof
src=$here/../kineto/mi250_1rank_rocm.json.gz
cd "$here"
rm -f ./*.db ./*.sqlite ./*.json ./*.gz ./*.txt ./*.bin
printf 'hello, this is not a trace\n' > not_a_trace.txt
: > empty.json
printf '{ this is not json' > not_json.json
{ zcat "$src" || true; } | head -c 3000 > truncated.json
head -c $(( $(stat -c %s "$src") / 2 )) "$src" > truncated.json.gz
{ head -c 4096 /dev/urandom || true; } > random.bin
printf '\x1f\x8b\x08\x00garbage after a gzip magic' > bad_gzip.json.gz
python3 - <<'PY'
import sqlite3
c = sqlite3.connect("other_schema.db"); c.execute("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT)")
c.execute("INSERT INTO users(name) VALUES('alice')"); c.commit(); c.close()
PY
python3 - <<'PY'
import sqlite3  # an Nsight Systems export of a run where no kernel was traced
c = sqlite3.connect("nsys_no_kernel_table.sqlite")
c.executescript("""CREATE TABLE StringIds(id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT(name TEXT NOT NULL, value TEXT);
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_NAME', 'NVIDIA Nsight Systems');
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL);""")
c.commit(); c.close()
PY
"$cli" import "$src" -o newer_version.db >/dev/null
python3 -c "import sqlite3; c=sqlite3.connect('newer_version.db'); c.execute('PRAGMA user_version=2001'); c.commit()"
"$cli" import "$src" -o corrupted.db >/dev/null
python3 - <<'PY'
import os
size = os.path.getsize("corrupted.db")
with open("corrupted.db", "r+b") as f:
    for page in range(1, size // 16384):
        f.seek(page * 16384); f.write(b"\x0d\xff\xff\xff\xff\xff\xff\xff")
PY
echo "bad inputs written to $here"
