// ComposePreload (src/cli/run.h): the order of the job's LD_PRELOAD.
#include <gtest/gtest.h>

#include "src/cli/run.h"

namespace overlapprof {
namespace {

TEST(ComposePreload, InjectorAloneWhenNothingWasPreloaded) {
  EXPECT_EQ(ComposePreload("/opt/op/liboverlapprof_inject.so", ""), "/opt/op/liboverlapprof_inject.so");
}

TEST(ComposePreload, InjectorComesBeforeEarlierEntriesInTheirOrder) {
  EXPECT_EQ(ComposePreload("/i.so", "/a/libfoo.so:libbar.so"), "/i.so:/a/libfoo.so:libbar.so");
  // The loader splits at spaces too; empty entries go.
  EXPECT_EQ(ComposePreload("/i.so", " libfoo.so::libbar.so "), "/i.so:libfoo.so:libbar.so");
}

TEST(ComposePreload, SanitizerRuntimesStayFirst) {
  // An ASan runtime that is not the first library loaded aborts the process ("ASan runtime
  // does not come first"), so it stays ahead of the injector.
  EXPECT_EQ(ComposePreload("/i.so", "/usr/lib/x86_64-linux-gnu/libfoo.so:/usr/lib/gcc/x86_64-linux-gnu/12/libasan.so"),
            "/usr/lib/gcc/x86_64-linux-gnu/12/libasan.so:/i.so:/usr/lib/x86_64-linux-gnu/libfoo.so");
  EXPECT_EQ(ComposePreload("/i.so", "libtsan.so.2 libclang_rt.asan-x86_64.so"),
            "libtsan.so.2:libclang_rt.asan-x86_64.so:/i.so");
  // Only the file name decides: a directory called asan is not a runtime.
  EXPECT_EQ(ComposePreload("/i.so", "/opt/libasan.so.d/libfoo.so"), "/i.so:/opt/libasan.so.d/libfoo.so");
}

}  // namespace
}  // namespace overlapprof
