// Status, the POSIX Env, the fault-injecting Env and environment-variable parsing.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "core/checksum.h"
#include "core/env.h"
#include "core/env_vars.h"
#include "core/fault_env.h"
#include "test_tmpdir.h"

namespace revive {
namespace {

using testing::TmpDir;

TEST(Status, KindsAndMessages) {
  EXPECT_TRUE(Status().ok());
  EXPECT_EQ(Status::OK().ToString(), "OK");
  Status s = Status::FromErrno("open /x", ENOENT);
  EXPECT_TRUE(s.IsNotFound());
  EXPECT_NE(s.message().find("/x"), std::string::npos);
  EXPECT_TRUE(Status::FromErrno("write /y", EIO).IsIOError());
  EXPECT_EQ(Status::Corruption("f: bad").ToString(), "corruption: f: bad");
  EXPECT_TRUE(Status::InvalidArgument("k").IsInvalidArgument());
}

TEST(Checksum, StreamEqualsOneShot) {
  std::string d(100000, 'a');
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<char>(i * 7);
  Checksum64Stream st;
  st.Update(d.data(), 333);
  st.Update(d.data() + 333, d.size() - 333);
  EXPECT_EQ(st.Digest(), Checksum64(d.data(), d.size()));
  d[5000] ^= 1;
  EXPECT_NE(st.Digest(), Checksum64(d.data(), d.size()));
}

TEST(PosixEnv, FileLifecycle) {
  TmpDir t;
  Env* env = Env::Default();
  ASSERT_TRUE(CreateDirs(env, t / "a/b/c").ok());
  ASSERT_TRUE(CreateDirs(env, t / "a/b/c").ok());  // idempotent
  ASSERT_TRUE(WriteFileAtomic(env, t / "a/b/c/f", "hello").ok());
  std::string got;
  ASSERT_TRUE(ReadFileToString(env, t / "a/b/c/f", &got).ok());
  EXPECT_EQ(got, "hello");
  EXPECT_FALSE(env->FileExists(t / "a/b/c/f.tmp"));
  uint64_t size = 0;
  ASSERT_TRUE(env->GetFileSize(t / "a/b/c/f", &size).ok());
  EXPECT_EQ(size, 5u);
  std::vector<std::string> names;
  ASSERT_TRUE(env->GetChildren(t / "a/b/c", &names).ok());
  EXPECT_EQ(names, std::vector<std::string>{"f"});
  ASSERT_TRUE(env->RenameFile(t / "a/b/c/f", t / "a/b/c/g").ok());
  ASSERT_TRUE(DeleteDirTree(env, t / "a/b/c").ok());
  EXPECT_FALSE(env->FileExists(t / "a/b/c"));
  Status s = ReadFileToString(env, t / "nope", &got);
  EXPECT_TRUE(s.IsNotFound());
  EXPECT_NE(s.message().find("nope"), std::string::npos);
  // mkdir over an existing file is an error naming the path.
  ASSERT_TRUE(WriteFileAtomic(env, t / "file", "x").ok());
  s = env->CreateDir(t / "file");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("file"), std::string::npos);
}

TEST(FaultEnv, FailsTheNthOperationOfAKind) {
  TmpDir t;
  FaultEnv env(Env::Default());
  env.FailNth(FaultEnv::Op::kWrite, 2);
  std::unique_ptr<WritableFile> f;
  ASSERT_TRUE(env.NewWritableFile(t / "f", &f).ok());
  EXPECT_TRUE(f->Append("a", 1).ok());
  Status s = f->Append("b", 1);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("injected"), std::string::npos);
  EXPECT_NE(s.message().find(t / "f"), std::string::npos);
  EXPECT_TRUE(f->Append("c", 1).ok());  // only the 2nd fails
  env.FailNth(FaultEnv::Op::kSync, 1);
  EXPECT_FALSE(f->Sync().ok());
  EXPECT_TRUE(f->Sync().ok());
  env.FailNth(FaultEnv::Op::kRename, 1);
  EXPECT_FALSE(env.RenameFile(t / "f", t / "g").ok());
  EXPECT_TRUE(env.FileExists(t / "f"));
}

TEST(FaultEnv, ShortWriteWritesHalfThenFails) {
  TmpDir t;
  FaultEnv env(Env::Default());
  env.ShortWriteNth(1);
  std::unique_ptr<WritableFile> f;
  ASSERT_TRUE(env.NewWritableFile(t / "f", &f).ok());
  Status s = f->Append("abcdef", 6);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("short write"), std::string::npos);
  ASSERT_TRUE(f->Close().ok());
  std::string got;
  ASSERT_TRUE(ReadFileToString(&env, t / "f", &got).ok());
  EXPECT_EQ(got, "abc");
}

TEST(FaultEnv, FailFromStopsEverything) {
  TmpDir t;
  FaultEnv env(Env::Default());
  env.FailFrom(2);
  EXPECT_TRUE(env.CreateDir(t / "d1").ok());
  EXPECT_FALSE(env.CreateDir(t / "d2").ok());
  EXPECT_FALSE(env.SyncDir(t.path()).ok());
  EXPECT_FALSE(env.FileExists(t / "d2"));
  env.Reset();
  EXPECT_TRUE(env.CreateDir(t / "d2").ok());
}

TEST(EnvVars, ParsesAndRejectsWithTheName) {
  bool b = false;
  setenv("REVIVE_TEST_B", "yes", 1);
  ASSERT_TRUE(GetEnvBool("REVIVE_TEST_B", &b).ok());
  EXPECT_TRUE(b);
  setenv("REVIVE_TEST_B", "0", 1);
  ASSERT_TRUE(GetEnvBool("REVIVE_TEST_B", &b).ok());
  EXPECT_FALSE(b);
  setenv("REVIVE_TEST_B", "maybe", 1);
  Status s = GetEnvBool("REVIVE_TEST_B", &b);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("REVIVE_TEST_B"), std::string::npos);
  int64_t v = 7;
  unsetenv("REVIVE_TEST_I");
  ASSERT_TRUE(GetEnvInt("REVIVE_TEST_I", 0, 10, &v).ok());
  EXPECT_EQ(v, 7);
  setenv("REVIVE_TEST_I", "11", 1);
  EXPECT_FALSE(GetEnvInt("REVIVE_TEST_I", 0, 10, &v).ok());
  setenv("REVIVE_TEST_I", "3x", 1);
  EXPECT_FALSE(GetEnvInt("REVIVE_TEST_I", 0, 10, &v).ok());
  setenv("REVIVE_TEST_I", "-1", 1);
  ASSERT_TRUE(GetEnvInt("REVIVE_TEST_I", -1, 10, &v).ok());
  EXPECT_EQ(v, -1);
}

}  // namespace
}  // namespace revive
