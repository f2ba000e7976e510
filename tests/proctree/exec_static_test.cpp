// program_loads_library (src/plugins/proctree/exec_static.cpp): which programs an exec'd process can
// load the library into. A wrong "dynamic" hands a static program the coordinator socket (checkpoints
// time out); a wrong "static" drops a dynamic program out of the computation. Real binaries (a
// `-static` one, /bin/sh) and hand-made ELF headers for the cases this machine cannot build.
#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "plugins/proctree/proctree.h"

namespace {

using revive::proctree::program_loads_library;

std::string g_static;  // proctree_static (argv[1])

class ExecStatic : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/exec_static_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes, mode_t mode = 0755) {
    std::string path = dir_ + "/" + name;
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, mode);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, bytes.data(), bytes.size()), ssize_t(bytes.size()));
    close(fd);
    return path;
  }
  // A 64-bit ELF header followed by its program headers (types as given).
  static std::string Elf(unsigned char cls, uint16_t machine, std::initializer_list<uint32_t> types) {
    Elf64_Ehdr eh{};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = cls;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_EXEC;
    eh.e_machine = machine;
    eh.e_phoff = sizeof eh;
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = uint16_t(types.size());
    std::string out(reinterpret_cast<const char*>(&eh), sizeof eh);
    for (uint32_t t : types) {
      Elf64_Phdr ph{};
      ph.p_type = t;
      out.append(reinterpret_cast<const char*>(&ph), sizeof ph);
    }
    return out;
  }
  bool Loads(const std::string& file, bool search = false) {
    char resolved[4096];
    return program_loads_library(file.c_str(), search, resolved, sizeof resolved);
  }
  std::string dir_;
};

#if defined(__x86_64__)
constexpr uint16_t kOurs = EM_X86_64, kOther = EM_AARCH64;
#else
constexpr uint16_t kOurs = EM_AARCH64, kOther = EM_X86_64;
#endif

TEST_F(ExecStatic, RealBinaries) {
  EXPECT_FALSE(Loads(g_static)) << g_static << " is linked -static";
  EXPECT_TRUE(Loads("/bin/sh"));
}

TEST_F(ExecStatic, HandMadeHeaders) {
  EXPECT_TRUE(Loads(Write("dyn", Elf(ELFCLASS64, kOurs, {PT_PHDR, PT_INTERP, PT_LOAD}))));
  EXPECT_FALSE(Loads(Write("static", Elf(ELFCLASS64, kOurs, {PT_LOAD, PT_LOAD, PT_TLS}))));
  EXPECT_FALSE(Loads(Write("other-machine", Elf(ELFCLASS64, kOther, {PT_INTERP, PT_LOAD}))));
  EXPECT_FALSE(Loads(Write("32bit", Elf(ELFCLASS32, kOurs, {PT_INTERP}))));
  // Program headers past the end of the file: not understood, so dynamic (the old behaviour).
  std::string cut = Elf(ELFCLASS64, kOurs, {PT_LOAD, PT_LOAD});
  EXPECT_TRUE(Loads(Write("truncated", cut.substr(0, cut.size() - 8))));
}

TEST_F(ExecStatic, ScriptsFollowTheirInterpreter) {
  std::string st = Write("static", Elf(ELFCLASS64, kOurs, {PT_LOAD}));
  EXPECT_FALSE(Loads(Write("s1", "#!" + st + "\necho\n")));
  EXPECT_FALSE(Loads(Write("s2", "#! " + dir_ + "/s1 -x\n")));  // a script run by a script
  EXPECT_TRUE(Loads(Write("sh", "#!/bin/sh -e\necho\n")));
  EXPECT_TRUE(Loads(Write("empty", "#!\n")));
  // Deeper than the kernel follows: not ours to judge, dynamic.
  std::string prev = st;
  for (int i = 0; i < 6; i++) prev = Write("d" + std::to_string(i), "#!" + prev + "\n");
  EXPECT_TRUE(Loads(prev));
}

TEST_F(ExecStatic, PathSearchAsExecvp) {
  Write("tool", Elf(ELFCLASS64, kOurs, {PT_LOAD}));
  Write("noexec", Elf(ELFCLASS64, kOurs, {PT_LOAD}), 0644);
  const char* old = getenv("PATH");
  std::string saved = old ? old : "";
  setenv("PATH", ("/nonexistent::" + dir_ + ":/usr/bin:/bin").c_str(), 1);
  char resolved[4096];
  EXPECT_FALSE(program_loads_library("tool", true, resolved, sizeof resolved));
  EXPECT_EQ(std::string(resolved), dir_ + "/tool");
  EXPECT_TRUE(program_loads_library("sh", true, resolved, sizeof resolved));
  EXPECT_TRUE(std::string(resolved).size() > 3 && std::string(resolved).substr(std::string(resolved).size() - 3) == "/sh")
      << resolved;
  EXPECT_TRUE(program_loads_library("noexec", true, resolved, sizeof resolved)) << "not executable: skipped";
  EXPECT_TRUE(program_loads_library("no-such-program", true, resolved, sizeof resolved));
  // Without search a bare name is relative to the current directory.
  ASSERT_EQ(chdir(dir_.c_str()), 0);
  EXPECT_FALSE(program_loads_library("tool", false, resolved, sizeof resolved));
  setenv("PATH", saved.c_str(), 1);
}

TEST_F(ExecStatic, UnreadableOrMissingCountsAsDynamic) {
  EXPECT_TRUE(Loads(dir_ + "/missing"));
  EXPECT_TRUE(Loads(Write("text", "hello\n")));
  EXPECT_TRUE(Loads(Write("zero", "")));
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    fprintf(stderr, "usage: exec_static_test PROCTREE_STATIC\n");
    return 2;
  }
  g_static = argv[1];
  return RUN_ALL_TESTS();
}
