// The files plugin in-process: contents saved and written back in place, walked node-local files
// recreated when missing and rewritten while still the computation's, the working directory's files created after the checkpoint moved aside (but not
// one still open), damaged sections refused with a message naming what is wrong, and the walk taking what
// the creation log names (a torn log: the birth-time rule).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "inject/sys.h"
#include "mem_section.h"
#include "plugins/files/created_log.h"
#include "plugins/files/files_internal.h"

// The checkpoint directory, where the creation log lives: none unless a test sets one.
std::string g_test_ckpt_dir;
namespace revive::inject {
const char* checkpoint_dir() { return g_test_ckpt_dir.c_str(); }
}  // namespace revive::inject

namespace revive::plugins {
namespace {

using test::MemReader;
using test::MemWriter;

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void put(const std::string& p, const std::string& data) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << data;
}

class Files : public ::testing::Test {
 protected:
  void SetUp() override {
    // Descriptors inherited from ctest (its log is open for writing here) would be saved and, worse,
    // written back into ctest's log by the restores below: only the test's own files take part.
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    char tmpl[] = "/tmp/revive-files-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    saved_ = g_files;
    snprintf(g_files.local, sizeof g_files.local, "%s/local", dir_.c_str());
    mkdir((dir_ + "/local").c_str(), 0700);
    g_files.written = true;
    g_files.displace = true;
    g_files.root = false;
    g_files.max_bytes = 64 << 20;
    ASSERT_EQ(getcwd(cwd_, sizeof cwd_), cwd_);
  }
  void TearDown() override {
    g_files = saved_;
    g_test_ckpt_dir.clear();
    created_init();  // not launched again: the wrappers stop recording
    ASSERT_EQ(chdir(cwd_), 0);
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(system(cmd.c_str()), 0);
  }
  std::string save() {
    MemWriter w;
    EXPECT_EQ(files_save(w), 0);
    return w.bytes;
  }
  int restore(const std::string& bytes, std::string* msg = nullptr) {
    MemReader r(bytes);
    char m[600] = "";
    int rc = files_restore(r, m, sizeof m);
    if (msg) *msg = m;
    return rc;
  }
  // The launch root's walk, launched now, telling the computation's files by the creation log in dir_/ck.
  void walk_by_log() {
    struct timespec t0;
    clock_gettime(CLOCK_REALTIME, &t0);
    g_files.root = true;
    g_files.displace = false;
    g_files.t0_sec = t0.tv_sec;
    g_files.t0_nsec = t0.tv_nsec;
    g_files.walk_birth = false;
    g_files.launched = true;
    g_test_ckpt_dir = dir_ + "/ck";
    mkdir(g_test_ckpt_dir.c_str(), 0700);
    created_init();
  }
  std::string dir_;
  FilesPolicy saved_;
  char cwd_[4096];
};

TEST_F(Files, WrittenFileComesBackInPlaceWithItsMtime) {
  std::string p = dir_ + "/db";
  put(p, std::string(100000, 'a') + "tail");
  int fd = open(p.c_str(), O_WRONLY);  // write-only: saved through a fresh read-only open
  ASSERT_GE(fd, 0);
  struct stat before;
  ASSERT_EQ(fstat(fd, &before), 0);
  std::string sec = save();
  put(p, "changed after the checkpoint");  // same inode, other bytes, other size
  ASSERT_EQ(restore(sec), 0);
  EXPECT_EQ(slurp(p), std::string(100000, 'a') + "tail");
  struct stat after;
  ASSERT_EQ(fstat(fd, &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);  // in place: the open description still names it
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  unlink(p.c_str());  // vanished: recreated
  ASSERT_EQ(restore(sec), 0);
  EXPECT_EQ(slurp(p).size(), 100004u);
  close(fd);
}

TEST_F(Files, ReadOnlyInputIsNotSavedButANodeLocalOneIs) {
  std::string in = dir_ + "/input", loc = dir_ + "/local/sub/tmpfile";
  // Markers no inherited file (ctest's own log is open for writing in this process) can contain.
  put(in, "read-only-input-0x5eed1");
  mkdir((dir_ + "/local/sub").c_str(), 0750);
  put(loc, "temporary");
  int a = open(in.c_str(), O_RDONLY), b = open(loc.c_str(), O_RDONLY);
  std::string sec = save();
  EXPECT_EQ(sec.find("read-only-input-0x5eed1"), std::string::npos);
  EXPECT_NE(sec.find(dir_ + "/local/sub/tmpfile"), std::string::npos);
  std::string cmd = "rm -rf '" + dir_ + "/local/sub'";  // another host: its own, empty, local directory
  ASSERT_EQ(system(cmd.c_str()), 0);
  ASSERT_EQ(restore(sec), 0);
  EXPECT_EQ(slurp(loc), "temporary");
  struct stat st;
  ASSERT_EQ(stat((dir_ + "/local/sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  close(a);
  close(b);
}

// A node-local file only read (bash running a script from /tmp) and unchanged since the checkpoint is left
// untouched (not even rewritten: it may be another user's, which a restart as an ordinary user cannot
// write); changed, it is written back.
TEST_F(Files, UnchangedNodeLocalInputIsLeftAlone) {
  std::string p = dir_ + "/local/script.sh", q = dir_ + "/local/changed.txt";
  put(p, "echo hello\n");
  put(q, "as at the checkpoint");
  chmod(p.c_str(), 0444);
  int a = open(p.c_str(), O_RDONLY), b = open(q.c_str(), O_RDONLY);
  std::string sec = save();
  struct stat before, after;
  ASSERT_EQ(stat(p.c_str(), &before), 0);
  usleep(20000);
  put(q, "changed after the chkp");  // same size, later mtime
  ASSERT_EQ(restore(sec), 0);
  ASSERT_EQ(stat(p.c_str(), &after), 0);
  EXPECT_EQ(after.st_ctim.tv_sec, before.st_ctim.tv_sec);
  EXPECT_EQ(after.st_ctim.tv_nsec, before.st_ctim.tv_nsec) << "an unchanged input was rewritten";
  EXPECT_EQ(slurp(q), "as at the checkpoint");
  close(a);
  close(b);
}

TEST_F(Files, TooLargeFileIsLeftToTheSizePolicy) {
  std::string p = dir_ + "/big";
  put(p, std::string(3 << 20, 'x'));
  int fd = open(p.c_str(), O_RDWR);
  g_files.max_bytes = 1 << 20;
  std::string sec = save();
  EXPECT_EQ(sec.find(std::string(4096, 'x')), std::string::npos);  // not its contents
  close(fd);
}

TEST_F(Files, WalkRecreatesMissingFilesButNeverOverwrites) {
  struct timespec t0;
  clock_gettime(CLOCK_REALTIME, &t0);
  g_files.root = true;
  g_files.walk_birth = true;  // files made by put() (not recorded): the birth-time rule
  g_files.displace = false;
  g_files.t0_sec = t0.tv_sec;
  g_files.t0_nsec = t0.tv_nsec;
  std::string a = dir_ + "/local/ccA.s", b = dir_ + "/local/ccB.s";
  put(a, "assembly A");
  put(b, "assembly B");
  std::string sec = save();  // neither is open: found by the walk
  unlink(a.c_str());
  unlink(b.c_str());
  put(b, "someone else's by now");  // another inode at b's path, which no creation log names
  ASSERT_EQ(restore(sec), 0);
  EXPECT_EQ(slurp(a), "assembly A");
  EXPECT_EQ(slurp(b), "someone else's by now");
  // Cut inside the contents of a walked file that exists (it would be skipped, not written): refused,
  // naming the file.
  MemReader r(sec.substr(0, sec.find("assembly B") + 3));
  char m[600] = "";
  EXPECT_NE(files_restore(r, m, sizeof m), 0);
  EXPECT_NE(std::string(m).find("files section"), std::string::npos) << m;
  EXPECT_NE(std::string(m).find("ccB.s"), std::string::npos) << m;
}

// A walked file that is still the inode saved was changed by the stopped run after the checkpoint (a
// script's `echo $i >> out.txt` under /tmp): written back in place. One the stopped run replaced (`mv tmp
// f`) is another inode, the computation's by its creation log: written back too. A section of version 2
// (kScanned, no identity) keeps the old rule: only a missing file is recreated.
TEST_F(Files, WalkedFileChangedOrReplacedAfterTheCheckpointComesBack) {
  walk_by_log();
  std::string out = dir_ + "/local/out.txt", srt = dir_ + "/local/sorted.txt";
  put(out, "1\n2\n");  // std::ofstream: fopen "w", recorded
  put(srt, "a\nb\n");
  struct stat out_st;
  ASSERT_EQ(stat(out.c_str(), &out_st), 0);
  std::string sec = save();
  ASSERT_NE(sec.find("1\n2\n"), std::string::npos);
  {
    std::ofstream f(out, std::ios::app);  // appended after the checkpoint: same inode
    f << "3\n";
  }
  put(dir_ + "/local/sorted.tmp", "a\nb\nc\n");
  ASSERT_EQ(rename((dir_ + "/local/sorted.tmp").c_str(), srt.c_str()), 0);  // replaced: another inode
  ASSERT_EQ(restore(sec), 0);
  EXPECT_EQ(slurp(out), "1\n2\n");
  EXPECT_EQ(slurp(srt), "a\nb\n");
  struct stat st;
  ASSERT_EQ(stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_ino, out_st.st_ino);  // in place
  // Not the log's: another inode made outside the computation (a raw system call) is left alone.
  unlink(srt.c_str());
  long raw = inject::sys::sc(SYS_openat, AT_FDCWD, srt.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(raw, 0);
  ASSERT_EQ(write(int(raw), "outsider", 8), 8);
  close(int(raw));
  ASSERT_EQ(restore(sec), 0);
  EXPECT_EQ(slurp(srt), "outsider");
  // The same section as version 2 wrote it: kScanned entries, no identity. out.txt, changed in place
  // again, is left as it is; a missing file is recreated.
  std::string v2;
  {
    size_t at = 4;
    v2 = sec.substr(0, 4);
    for (;;) {
      FileEntry e;
      memcpy(&e, sec.data() + at, sizeof e);
      if (e.origin == uint32_t(FileOrigin::kEnd)) {
        v2 += sec.substr(at);
        break;
      }
      uint32_t n;
      memcpy(&n, sec.data() + at + sizeof e, 4);
      size_t head = sizeof e + 4 + n;
      ASSERT_EQ(e.format, uint32_t(FileFormat::kInline));
      if (file_origin_has_id(e.origin)) {
        e.origin = e.origin == uint32_t(FileOrigin::kScannedId) ? uint32_t(FileOrigin::kScanned) : file_origin_plain(e.origin);
        v2.append(reinterpret_cast<const char*>(&e), sizeof e);
        v2 += sec.substr(at + sizeof e, 4 + n);
        v2 += sec.substr(at + head + sizeof(FileIdentity), size_t(e.size));
        at += head + sizeof(FileIdentity) + size_t(e.size);
      } else {
        v2 += sec.substr(at, head + size_t(e.size));
        at += head + size_t(e.size);
      }
    }
  }
  ASSERT_LT(v2.size(), sec.size());
  {
    std::ofstream f(out, std::ios::app);
    f << "3\n";
  }
  unlink(srt.c_str());
  ASSERT_EQ(restore(v2), 0);
  EXPECT_EQ(slurp(out), "1\n2\n3\n");
  EXPECT_EQ(slurp(srt), "a\nb\n");
  // Cut inside a walked entry's identity: refused, naming the file.
  std::string msg;
  size_t id_at = sec.find("out.txt") + 7;
  EXPECT_NE(restore(sec.substr(0, id_at + 5), &msg), 0);
  EXPECT_NE(msg.find("out.txt"), std::string::npos) << msg;
}

// revive's own per-user records (the coordinator's port record, born under /tmp during the run) are not
// the computation's files: once walked and saved, a restart tried to recreate one that existed again.
TEST_F(Files, WalkSkipsReviveRecords) {
  struct timespec t0;
  clock_gettime(CLOCK_REALTIME, &t0);
  g_files.root = true;
  g_files.walk_birth = true;  // files made by put() (not recorded): the birth-time rule
  g_files.displace = false;
  g_files.t0_sec = t0.tv_sec;
  g_files.t0_nsec = t0.tv_nsec;
  snprintf(g_files.records, sizeof g_files.records, "%s/local/revive-%u", dir_.c_str(), unsigned(getuid()));
  mkdir(g_files.records, 0700);
  put(std::string(g_files.records) + "/port-7779", "ckpt_dir=/somewhere\n");
  put(dir_ + "/local/ours.tmp", "the computation's");
  std::string sec = save();
  EXPECT_NE(sec.find("ours.tmp"), std::string::npos);
  EXPECT_EQ(sec.find("port-7779"), std::string::npos) << "revive's record was saved as the computation's file";
}

// The walk takes what the creation log names: files created through the wrappers (open O_CREAT|O_EXCL,
// mkstemps, fopen "w") and not one made with a raw system call (as by a process outside the computation);
// a torn log falls back to the birth-time rule, which takes that one too.
TEST_F(Files, WalkTakesWhatTheCreationLogNames) {
  walk_by_log();
  std::string local = dir_ + "/local";
  int fd = open((local + "/excl.txt").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "made with open", 14), 14);
  close(fd);
  std::string t = local + "/ccXXXXXX.s";
  fd = mkstemps(t.data(), 2);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "made with mkstemps", 18), 18);
  close(fd);
  put(local + "/fopen.txt", "made with fopen");  // std::ofstream: fopen "w" inside libstdc++
  long raw = inject::sys::sc(SYS_openat, AT_FDCWD, (local + "/outsider.txt").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(raw, 0);
  ASSERT_EQ(write(int(raw), "not ours", 8), 8);
  close(int(raw));
  std::string sec = save();
  EXPECT_NE(sec.find("made with open"), std::string::npos);
  EXPECT_NE(sec.find("made with mkstemps"), std::string::npos);
  EXPECT_NE(sec.find("made with fopen"), std::string::npos);
  EXPECT_EQ(sec.find("not ours"), std::string::npos) << "a file the log does not name was saved";
  {
    std::ofstream f(g_test_ckpt_dir + "/" + kCreatedName, std::ios::binary | std::ios::app);
    f << "torn";
  }
  EXPECT_EQ(created_load(), CreatedLoad::kBad);
  sec = save();
  EXPECT_NE(sec.find("not ours"), std::string::npos) << "a torn log did not fall back to birth times";
  EXPECT_NE(sec.find("made with open"), std::string::npos);
}

// Directories the computation makes under a node-local directory (mkdir, mkdirat, mkdtemp) are in the
// creation log as directories: the restore's sweep moves those the stopped run made after the checkpoint.
// A file's lookup never matches a directory's record; one made with a raw system call is not recorded.
TEST_F(Files, CreationLogNamesDirectories) {
  walk_by_log();
  std::string local = dir_ + "/local";
  auto recorded = [](const std::string& path, uint32_t bit) {
    struct statx sx;
    if (statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, STATX_INO | STATX_BTIME, &sx) != 0) return false;
    return created_has(makedev(sx.stx_dev_major, sx.stx_dev_minor), sx.stx_ino, sx.stx_btime.tv_sec,
                       sx.stx_btime.tv_nsec | bit);
  };
  ASSERT_EQ(mkdir((local + "/a").c_str(), 0700), 0);
  int d = open(local.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(d, 0);
  ASSERT_EQ(mkdirat(d, "b", 0700), 0);
  close(d);
  std::string t = local + "/tmpXXXXXX";
  ASSERT_NE(mkdtemp(t.data()), nullptr);
  ASSERT_EQ(inject::sys::sc(SYS_mkdirat, AT_FDCWD, (local + "/outsider").c_str(), 0700), 0);
  ASSERT_EQ(created_load(), CreatedLoad::kOk);
  EXPECT_TRUE(recorded(local + "/a", kCreatedDirBit));
  EXPECT_TRUE(recorded(local + "/b", kCreatedDirBit));
  EXPECT_TRUE(recorded(t, kCreatedDirBit));
  EXPECT_FALSE(recorded(local + "/a", 0)) << "a directory's record answered a file's lookup";
  EXPECT_FALSE(recorded(local + "/outsider", kCreatedDirBit)) << "a raw mkdir was recorded";
  created_unload();
}

TEST_F(Files, FilesCreatedAfterTheCheckpointAreMovedAsideUnlessOpen) {
  g_files.root = true;
  g_files.local[0] = '\0';
  std::string w = dir_ + "/work";
  mkdir(w.c_str(), 0700);
  put(w + "/f1.o", "complete");
  ASSERT_EQ(chdir(w.c_str()), 0);
  std::string sec = save();
  struct timespec pause = {0, 20 * 1000 * 1000};
  nanosleep(&pause, nullptr);
  put(w + "/f2.o", "");  // the stopped run's half-written object
  put(w + "/restart.log", "");
  int keep = open((w + "/restart.log").c_str(), O_WRONLY);  // the user's redirection: stays
  ASSERT_EQ(restore(sec), 0);
  struct stat st;
  EXPECT_EQ(stat((w + "/f1.o").c_str(), &st), 0);
  EXPECT_NE(stat((w + "/f2.o").c_str(), &st), 0);
  EXPECT_EQ(stat((w + "/.revive-displaced/f2.o").c_str(), &st), 0);
  EXPECT_EQ(stat((w + "/restart.log").c_str(), &st), 0);
  // Twice from the same checkpoint: the second f2.o goes aside too, under another name.
  put(w + "/f2.o", "again");
  ASSERT_EQ(restore(sec), 0);
  EXPECT_EQ(stat((w + "/.revive-displaced/f2.o.1").c_str(), &st), 0);
  close(keep);
}

// A symlink the stopped run made after the checkpoint goes aside like a file (python's os.symlink("rw.txt",
// "sym.new") killed before its rename over sym.txt: the restarted program's own symlink met EEXIST); one that
// existed at the checkpoint stays, even when it now points nowhere.
TEST_F(Files, SymlinksMadeAfterTheCheckpointAreMovedAside) {
  g_files.root = true;
  g_files.local[0] = '\0';
  std::string w = dir_ + "/worksym";
  mkdir(w.c_str(), 0700);
  put(w + "/rw.txt", "data");
  ASSERT_EQ(symlink("rw.txt", (w + "/old.lnk").c_str()), 0);
  ASSERT_EQ(chdir(w.c_str()), 0);
  std::string sec = save();
  struct timespec pause = {0, 20 * 1000 * 1000};
  nanosleep(&pause, nullptr);
  ASSERT_EQ(symlink("rw.txt", (w + "/sym.new").c_str()), 0);
  ASSERT_EQ(symlink("gone", (w + "/dangling.new").c_str()), 0);
  ASSERT_EQ(unlink((w + "/rw.txt").c_str()), 0);  // old.lnk now dangles: still the checkpoint's link
  ASSERT_EQ(restore(sec), 0);
  struct stat st;
  EXPECT_NE(lstat((w + "/sym.new").c_str(), &st), 0) << "a symlink made after the checkpoint stayed";
  EXPECT_NE(lstat((w + "/dangling.new").c_str(), &st), 0);
  EXPECT_EQ(lstat((w + "/.revive-displaced/sym.new").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(lstat((w + "/.revive-displaced/dangling.new").c_str(), &st), 0);
  EXPECT_EQ(lstat((w + "/old.lnk").c_str(), &st), 0) << "the checkpoint's symlink was moved";
}

TEST_F(Files, DamagedSectionsAreRefusedWithAReason) {
  std::string p = dir_ + "/out";
  put(p, "0123456789");
  int fd = open(p.c_str(), O_RDWR);
  std::string sec = save();
  close(fd);
  std::string msg;
  EXPECT_NE(restore("XXXX" + sec.substr(4), &msg), 0);
  EXPECT_NE(msg.find("bad tag"), std::string::npos) << msg;
  for (size_t cut : {size_t(4), size_t(10), size_t(50), sec.size() - 60, sec.size() - 1}) {
    EXPECT_NE(restore(sec.substr(0, cut), &msg), 0) << cut;
    EXPECT_NE(msg.find("files section"), std::string::npos) << cut << ": " << msg;
  }
  EXPECT_NE(restore(sec + "junk", &msg), 0);
  EXPECT_NE(msg.find("trailing"), std::string::npos) << msg;
  std::string bad = sec;
  bad[4] = 9;  // origin
  EXPECT_NE(restore(bad, &msg), 0);
  EXPECT_NE(msg.find("malformed entry"), std::string::npos) << msg;
  bad = sec;
  size_t path_at = 4 + sizeof(FileEntry) + 4;
  bad[path_at] = 'x';  // a relative path
  EXPECT_NE(restore(bad, &msg), 0);
  EXPECT_NE(msg.find("malformed entry"), std::string::npos) << msg;
  EXPECT_EQ(slurp(p), "0123456789");  // nothing written from a damaged section's bad entry
}

}  // namespace
}  // namespace revive::plugins
