// Reading an input file (src/io/input_file.h): plain or gzip, refused when missing, empty or not
// a regular file; a gzip stream inflated in full or refused, never cut short.
#include "src/io/input_file.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "test_util.h"

namespace overlapprof {
namespace {

using testing::KinetoJson;

TEST(Gunzip, RoundTripsMultiMemberAndRejectsTruncation) {
  testing::TempDir dir;
  std::string plain = KinetoJson({{"kernel", "gemm", "1", "1"}});
  std::string path = dir.Write("a.json", plain);
  ASSERT_EQ(std::system(("gzip -kf " + path + " && cat " + path + ".gz " + path + ".gz > " + dir.File("two.gz")).c_str()), 0);
  StatusOr<InputBuffer> one = ReadInputFile(path + ".gz");
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->view(), plain);
  EXPECT_TRUE(one->was_compressed());
  StatusOr<InputBuffer> two = ReadInputFile(dir.File("two.gz"));
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->view(), plain + plain);
  // Truncate the gzip: must be an error, not a silent partial read.
  std::string gz;
  {
    std::ifstream f(path + ".gz", std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(f), {});
  }
  for (size_t cut : {gz.size() - 1, gz.size() - 8, gz.size() / 2, size_t{11}}) {
    StatusOr<InputBuffer> bad = GunzipBuffer(reinterpret_cast<const uint8_t*>(gz.data()), cut);
    ASSERT_FALSE(bad.ok()) << cut;
    EXPECT_EQ(bad.status().code(), StatusCode::kCorrupt);
  }
}

TEST(Gunzip, HostileSizeTrailerDoesNotAllocateGigabytes) {
  // A 20-byte gzip member (empty deflate block) whose ISIZE trailer claims 4 GiB - 1.
  // Run in a child limited to 1 GiB of address space: trusting the trailer would make
  // the allocation throw there.
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of shadow memory: an address-space limit cannot apply";
#endif
  const uint8_t gz[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    struct rlimit lim = {size_t{1} << 30, size_t{1} << 30};
    setrlimit(RLIMIT_AS, &lim);
    try {
      StatusOr<InputBuffer> out = GunzipBuffer(gz, sizeof gz);
      _exit(!out.ok() && out.status().code() == StatusCode::kCorrupt ? 0 : 1);
    } catch (...) {
      _exit(2);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2 = allocation failed: the ISIZE trailer was trusted";
}

TEST(InputFile, MissingEmptyAndDirectory) {
  testing::TempDir dir;
  EXPECT_EQ(ReadInputFile(dir.File("nope")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ReadInputFile(dir.Write("empty.json", "")).status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(ReadInputFile(dir.path()).status().code(), StatusCode::kInvalidInput);
}

}  // namespace
}  // namespace overlapprof
