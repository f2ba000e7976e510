// src/launch: template expansion (exec-style {cmd}, shell-style {cmdq}) and host lists/files, including
// the errors for bad input.
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>

#include "launch/hostlist.h"
#include "launch/launcher.h"

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

}  // namespace
}  // namespace revive::launch
