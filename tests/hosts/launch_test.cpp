// src/launch: template expansion (exec-style {cmd}, shell-style {cmdq}) and host lists/files, including
// the errors for bad input.
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>

#include "launch/hostlist.h"
#include "launch/launcher.h"
#include "launch/placement.h"

namespace revive::launch {
namespace {

using V = std::vector<std::string>;

TEST(Launcher, ExecStyleSplicesTheCommandWords) {
  V argv;
  ASSERT_TRUE(Expand(ResolveTemplate("netns"), "rvh2", {"env", "A=b c", "/bin/prog", "x"}, &argv).ok());
  EXPECT_EQ(argv, (V{"ip", "netns", "exec", "rvh2", "env", "A=b c", "/bin/prog", "x"}));
  ASSERT_TRUE(Expand("srun -w {host} -N1 '-J job {host}' {cmd}", "n7", {"p"}, &argv).ok());
  EXPECT_EQ(argv, (V{"srun", "-w", "n7", "-N1", "-J job n7", "p"}));
  EXPECT_FALSE(Expand("local", "", {"p"}, &argv).ok());  // names mean something only via ResolveTemplate
  ASSERT_TRUE(Expand(ResolveTemplate("local"), "", {"p", "q"}, &argv).ok());
  EXPECT_EQ(argv, (V{"p", "q"}));
}

TEST(Launcher, ShellStyleQuotesTheCommandOnce) {
  V argv;
  ASSERT_TRUE(Expand(ResolveTemplate("ssh"), "node1", {"env", "X=it's $HOME", "/p"}, &argv).ok());
  ASSERT_EQ(argv.size(), 5u);
  EXPECT_EQ(argv[3], "node1");
  EXPECT_EQ(argv[4], "'env' 'X=it'\\''s $HOME' '/p'");
  // What a shell makes of it is the original words again.
  std::string cmd = "set -- " + argv[4] + "; printf '%s|' \"$@\"";
  FILE* f = popen(("sh -c " + ShellQuote(cmd)).c_str(), "r");
  ASSERT_NE(f, nullptr);
  char buf[256] = {0};
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  pclose(f);
  EXPECT_EQ(std::string(buf, n), "env|X=it's $HOME|/p|");
}

TEST(Launcher, BadTemplatesAreExplained) {
  V argv;
  Status s = Expand("ssh {host}", "h", {"p"}, &argv);
  EXPECT_NE(s.message().find("needs exactly one {cmd} or {cmdq}, has 0"), std::string::npos) << s.message();
  s = Expand("x {cmd} {cmd}", "h", {"p"}, &argv);
  EXPECT_NE(s.message().find("has 2"), std::string::npos) << s.message();
  s = Expand("x 'unterminated {cmd}", "h", {"p"}, &argv);
  EXPECT_NE(s.message().find("unbalanced '"), std::string::npos) << s.message();
  s = Expand("x --{cmd}", "h", {"p"}, &argv);
  EXPECT_NE(s.message().find("word of its own"), std::string::npos) << s.message();
  s = Expand("ip netns exec {host} {cmd}", "", {"p"}, &argv);
  EXPECT_NE(s.message().find("no host was given"), std::string::npos) << s.message();
  EXPECT_FALSE(Expand("", "h", {"p"}, &argv).ok());
}

TEST(HostList, CommaListAndPlacement) {
  V h;
  ASSERT_TRUE(ParseHostList("a,b.example,user@c", &h).ok());
  EXPECT_EQ(h, (V{"a", "b.example", "user@c"}));
  EXPECT_EQ(Place(h, 5), (V{"a", "b.example", "user@c", "a", "b.example"}));
  Status s = ParseHostList("a,,b", &h);
  EXPECT_NE(s.message().find("host \"\""), std::string::npos) << s.message();
  s = ParseHostList("a,b;rm -rf x", &h);
  EXPECT_NE(s.message().find("b;rm -rf x"), std::string::npos) << s.message();
}

TEST(HostList, HostFileWithSlotsCommentsAndErrors) {
  char path[] = "/tmp/revive-hostfile-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "# nodes\n\nn1 slots=2\n  n2   # second\n";
  V h;
  ASSERT_TRUE(ReadHostFile(path, &h).ok());
  EXPECT_EQ(h, (V{"n1", "n1", "n2"}));
  std::ofstream(path) << "n1\nn2 slots=x\n";
  Status s = ReadHostFile(path, &h);
  EXPECT_NE(s.message().find(std::string(path) + ":2:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("slots=x"), std::string::npos) << s.message();
  std::ofstream(path) << "# nothing\n";
  s = ReadHostFile(path, &h);
  EXPECT_NE(s.message().find("no hosts"), std::string::npos) << s.message();
  unlink(path);
  s = ReadHostFile(path, &h);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
}

// Manifest order: upid 10 (root), 11 (child of 10), 12 (root), 13 (child of 11), 14 (root).
std::vector<PlaceProc> Trees() { return {{10, -1}, {11, 0}, {12, -1}, {13, 1}, {14, -1}}; }

TEST(Placement, WholeTreesRoundRobin) {
  V out;
  ASSERT_TRUE(PlaceTrees(Trees(), {"a", "b"}, {}, &out).ok());
  EXPECT_EQ(out, (V{"a", "a", "b", "a", "a"}));  // trees {10,11,13} {12} {14}
  ASSERT_TRUE(PlaceTrees(Trees(), {"a", "b", "c", "d"}, {}, &out).ok());  // more hosts than trees: fine
  EXPECT_EQ(out, (V{"a", "a", "b", "a", "c"}));
  EXPECT_EQ(UsedHosts(out), (V{"a", "b", "c"}));
  // A child listed before its parent: the tree's place is its first process's.
  ASSERT_TRUE(PlaceTrees({{20, -1}, {21, 2}, {22, -1}}, {"a", "b"}, {}, &out).ok());
  EXPECT_EQ(out, (V{"a", "b", "b"}));
}

TEST(Placement, PinsMoveWholeTreesAndSplitsAreRefused) {
  std::map<uint64_t, std::string> pins;
  ASSERT_TRUE(ParseMap("13=z,14=y", &pins).ok());
  V out;
  ASSERT_TRUE(PlaceTrees(Trees(), {"a"}, pins, &out).ok());
  EXPECT_EQ(out, (V{"z", "z", "a", "z", "y"}));  // pinning the grandchild moves its whole tree
  ASSERT_TRUE(ParseMap("10=x,13=x", &pins).ok());
  EXPECT_TRUE(PlaceTrees(Trees(), {"a"}, pins, &out).ok());
  ASSERT_TRUE(ParseMap("10=x,13=y", &pins).ok());
  Status s = PlaceTrees(Trees(), {"a"}, pins, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("upid 10 on x and upid 13 on y"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cannot be split"), std::string::npos) << s.message();
  ASSERT_TRUE(ParseMap("99=x", &pins).ok());
  s = PlaceTrees(Trees(), {"a"}, pins, &out);
  EXPECT_NE(s.message().find("no process has upid 99"), std::string::npos) << s.message();
  ASSERT_TRUE(ParseMap("12=x", &pins).ok());
  s = PlaceTrees(Trees(), {}, pins, &out);  // the unpinned trees have nowhere to go
  EXPECT_NE(s.message().find("upid 10 is not in --map"), std::string::npos) << s.message();
  for (const char* bad : {"12", "=x", "x=y", "0=a", "12=a;b", "12=a,12=b", "12=a,"})
    EXPECT_FALSE(ParseMap(bad, &pins).ok()) << bad;
}

}  // namespace
}  // namespace revive::launch
