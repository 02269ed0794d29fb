// src/trace/collective.h: the one table of collective kinds and their names.
#include "src/trace/collective.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>

#include "src/trace/classify.h"

namespace overlapprof {
namespace {

constexpr Collective kAll[] = {
#define X(enumerator, value, name) Collective::enumerator,
#include "src/trace/collective.def"
#undef X
};

// Every kind has its own name, and the name reads back as that kind (the store writes names and
// reads them back; reports print them).
TEST(Collective, EveryNameReadsBackAsItsKind) {
  std::set<std::string_view> names;
  for (Collective c : kAll) {
    const std::string_view name = CollectiveName(c);
    EXPECT_FALSE(name.empty());
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_EQ(ParseCollective(name), c) << name;
    EXPECT_EQ(CollectiveFromCode(static_cast<uint8_t>(c)), c) << name;
  }
  EXPECT_EQ(CollectiveName(Collective::kPeerCopy), "p2p_copy");
  EXPECT_EQ(CollectiveName(Collective::kAllReduce), "allreduce");
  EXPECT_EQ(CollectiveName(Collective::kSendRecv), "sendrecv");
}

// Text that is not a normalized name, and codes out of the table, are kUnknown: nothing read
// from a file or a record becomes a value outside the enum.
TEST(Collective, AnythingElseIsUnknown) {
  EXPECT_EQ(ParseCollective(""), Collective::kUnknown);
  EXPECT_EQ(ParseCollective("AllReduce"), Collective::kUnknown);  // a source's spelling: NormalizeCollectiveName
  EXPECT_EQ(ParseCollective("allreduce "), Collective::kUnknown);
  EXPECT_EQ(ParseCollective(std::string("all\0reduce", 10)), Collective::kUnknown);
  EXPECT_EQ(CollectiveFromCode(200), Collective::kUnknown);
  EXPECT_EQ(CollectiveName(static_cast<Collective>(200)), "unknown");
}

// Source spellings normalize onto the table; names outside it are kUnknown.
TEST(Collective, SourceNamesNormalizeOntoTheTable) {
  EXPECT_EQ(NormalizeCollectiveName("ncclAllToAllv"), Collective::kAllToAll);
  EXPECT_EQ(NormalizeCollectiveName("all_to_all"), Collective::kAllToAll);
  EXPECT_EQ(NormalizeCollectiveName("_reduce_scatter_base"), Collective::kReduceScatter);
  EXPECT_EQ(NormalizeCollectiveName("coalesced"), Collective::kCoalesced);
  EXPECT_EQ(NormalizeCollectiveName("barrier"), Collective::kBarrier);
  EXPECT_EQ(NormalizeCollectiveName("ncclCommInitRank"), Collective::kUnknown);
  EXPECT_EQ(NormalizeCollectiveName(""), Collective::kUnknown);
}

}  // namespace
}  // namespace overlapprof
