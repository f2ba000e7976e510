// src/launch/slurm_hostlist: Slurm's node list syntax as SLURM_JOB_NODELIST has it, and the errors for
// lists that are not in it (each names the list and the entry).
#include <gtest/gtest.h>

#include "launch/slurm_hostlist.h"

namespace revive::launch {
namespace {

using V = std::vector<std::string>;

V Expand(const std::string& list) {
  V h;
  Status s = ExpandSlurmHostList(list, &h);
  EXPECT_TRUE(s.ok()) << s.message();
  return h;
}

std::string Error(const std::string& list, size_t max_hosts = 65536) {
  V h = {"left over"};
  Status s = ExpandSlurmHostList(list, &h, max_hosts);
  EXPECT_FALSE(s.ok()) << list;
  EXPECT_TRUE(h.empty()) << "a failed expansion leaves no partial list";
  return s.message();
}

TEST(SlurmHostList, PlainNamesAndRanges) {
  EXPECT_EQ(Expand("node1"), (V{"node1"}));
  EXPECT_EQ(Expand("a,b.example.org,c_d"), (V{"a", "b.example.org", "c_d"}));
  EXPECT_EQ(Expand("n[1-3,7],gpu05"), (V{"n1", "n2", "n3", "n7", "gpu05"}));
  EXPECT_EQ(Expand("n[5]"), (V{"n5"}));
  EXPECT_EQ(Expand("n[9-11]-ib"), (V{"n9-ib", "n10-ib", "n11-ib"}));
}

TEST(SlurmHostList, ZeroPaddingKeepsTheWidthOfTheStart) {
  EXPECT_EQ(Expand("n[001-003]"), (V{"n001", "n002", "n003"}));
  EXPECT_EQ(Expand("n[098-101]"), (V{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(Expand("n[08-10,1]"), (V{"n08", "n09", "n10", "n1"}));
  EXPECT_EQ(Expand("n[0-2]"), (V{"n0", "n1", "n2"}));  // a lone 0 is not padding
}

TEST(SlurmHostList, SeveralBracketGroupsAreAProductFirstGroupOutermost) {
  EXPECT_EQ(Expand("r[1-2]n[01-02]"), (V{"r1n01", "r1n02", "r2n01", "r2n02"}));
  EXPECT_EQ(Expand("r[1,3]-n[7]x,login"), (V{"r1-n7x", "r3-n7x", "login"}));
}

TEST(SlurmHostList, BadListsAreNamedWithTheReason) {
  std::string m = Error("n[1-");
  EXPECT_NE(m.find("Slurm node list \"n[1-\""), std::string::npos) << m;
  EXPECT_NE(m.find("'[' without ']'"), std::string::npos) << m;
  EXPECT_NE(Error("n1]").find("']' without '['"), std::string::npos);
  EXPECT_NE(Error("n[[1]]").find("nested"), std::string::npos);
  EXPECT_NE(Error("a,,b").find("empty entry"), std::string::npos);
  EXPECT_NE(Error("").find("empty entry"), std::string::npos);
  m = Error("n[3-1]");
  EXPECT_NE(m.find("range \"3-1\" ends below its start"), std::string::npos) << m;
  EXPECT_NE(Error("n[a-b]").find("range \"a-b\" is not N or N-M"), std::string::npos);
  EXPECT_NE(Error("n[]").find("range \"\""), std::string::npos);
  EXPECT_NE(Error("n[1,]").find("range \"\""), std::string::npos);
  EXPECT_NE(Error("n[1234567890]").find("up to 9 digits"), std::string::npos);
  m = Error("n;rm -rf /");
  EXPECT_NE(m.find("has ';'"), std::string::npos) << m;
  EXPECT_NE(Error(std::string(64, 'x')).find("longer than 63"), std::string::npos);
}

TEST(SlurmHostList, HugeListsAreRefusedBeforeTheyAreMade) {
  EXPECT_NE(Error("n[1-100]", 50).find("more than 50 hosts"), std::string::npos);
  EXPECT_NE(Error("r[1-10]n[1-10]", 50).find("more than 50 hosts"), std::string::npos);
  EXPECT_NE(Error("n[1-999999999]").find("more than 65536 hosts"), std::string::npos);
  EXPECT_NE(Error("a[1-40],b[1-40]", 50).find("more than 50 hosts"), std::string::npos);
}

}  // namespace
}  // namespace revive::launch
