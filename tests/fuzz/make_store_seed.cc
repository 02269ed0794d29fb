// Helper of the fuzz build: writes a small store seed in the current schema.
//
//   make_store_seed IN.json OUT.db [PAGE_SIZE]      (PAGE_SIZE default 512)
//
// Imports IN (any format overlapprof reads), writes it as `overlapprof import` does, then
// rewrites the file with a small page size (PRAGMA page_size + VACUUM, which keeps
// application_id and user_version) so that the seed stays a few KB: libFuzzer mutates
// small files far better. meta.source_path is set to IN's file name. run_fuzzers.sh
// makes seeds this way from seeds/store-src/ on every run, so the store fuzzer always
// starts from stores of the schema it reads; the same command refreshes seeds/store/.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "src/cli/pipeline.h"
#include "src/store/sqlite_util.h"
#include "src/store/writer.h"

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s IN.json OUT.db [PAGE_SIZE]\n", argv[0]);
    return 2;
  }
  const std::string in = argv[1], out = argv[2];
  const int page_size = argc == 4 ? std::atoi(argv[3]) : 512;
  auto fail = [&](const overlapprof::Status& st) {
    std::fprintf(stderr, "make_store_seed: %s\n", st.message().c_str());
    return 1;
  };
  auto trace = overlapprof::ImportFile(in, overlapprof::ImportOptions{});
  if (!trace.ok()) return fail(trace.status());
  trace->meta.source_path = in.substr(in.find_last_of('/') + 1);
  if (auto st = overlapprof::WriteStore(*trace, out, /*overwrite=*/true); !st.ok()) return fail(st);
  overlapprof::Db db;
  if (auto st = db.Open(out, SQLITE_OPEN_READWRITE); !st.ok()) return fail(st);
  if (auto st = db.Exec("PRAGMA journal_mode=DELETE; PRAGMA page_size=" + std::to_string(page_size) + "; VACUUM;");
      !st.ok())
    return fail(st);
  return 0;
}
