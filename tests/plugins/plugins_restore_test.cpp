// Save in one process, restore in a fresh one (fork+exec of plugin_helper), and compare the state and the
// behaviour of both. See plugin_helper.cpp for the two halves and scenarios.cpp for what each sets up.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Outcome {
  int status = -1;  // exit code, or 128+signal
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class PluginRestore : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/revive-plugins-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    image_ = dir_ + "/image.bin";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs the helper with address randomisation off (see plugin_helper.cpp), stdout and stderr captured
  // through pipes (stderr gets little: it is read once stdout is at EOF).
  // low_msgqueue: the helper runs with RLIMIT_MSGQUEUE at 1000 and without CAP_SYS_RESOURCE (dropped
  // from the bounding set, so root's exec does not get it back): it cannot raise that limit.
  Outcome helper(const std::vector<std::string>& args, const char* reserved_fd = nullptr, bool low_msgqueue = false,
                 const char* deleted_max_mb = nullptr) {
    int p[2], e[2];
    EXPECT_EQ(pipe(p), 0);
    EXPECT_EQ(pipe(e), 0);
    pid_t pid = fork();
    if (pid == 0) {
      personality(ADDR_NO_RANDOMIZE);
      int in = open("/dev/null", O_RDONLY);
      dup2(in, 0);
      dup2(p[1], 1);
      dup2(e[1], 2);
      if (reserved_fd) setenv("REVIVE_TEST_RESERVED_FD", reserved_fd, 1);
      if (deleted_max_mb) setenv("REVIVE_FD_DELETED_MAX_MB", deleted_max_mb, 1);
      if (low_msgqueue) {
        rlimit low = {1000, 1000};
        if (setrlimit(RLIMIT_MSGQUEUE, &low) != 0) _exit(126);
        if (geteuid() == 0 && prctl(PR_CAPBSET_DROP, 24 /* CAP_SYS_RESOURCE */, 0, 0, 0) != 0) _exit(126);
      }
      std::vector<char*> argv{const_cast<char*>(REVIVE_PLUGIN_HELPER)};
      for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(p[1]);
    close(e[1]);
    Outcome r;
    char buf[4096];
    for (ssize_t n; (n = read(p[0], buf, sizeof buf)) > 0;) r.out.append(buf, static_cast<size_t>(n));
    for (ssize_t n; (n = read(e[0], buf, sizeof buf)) > 0;) r.err.append(buf, static_cast<size_t>(n));
    close(p[0]);
    close(e[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
  }

  Outcome save(const std::string& scenario, const char* reserved_fd = nullptr) {
    Outcome r = helper({"save", scenario, dir_, image_}, reserved_fd);
    EXPECT_EQ(r.status, 0) << r.err;
    return r;
  }
  Outcome restore(const std::string& scenario, const std::string& damage = "", const char* reserved_fd = nullptr,
                  bool low_msgqueue = false) {
    std::vector<std::string> args{"restore", scenario, dir_, image_};
    if (!damage.empty()) args.push_back(damage);
    return helper(args, reserved_fd, low_msgqueue);
  }

  // Saves the scenario, restores it in a fresh process: {saved, restored}.
  std::pair<Outcome, Outcome> round_trip(const std::string& scenario) {
    Outcome a = save(scenario);
    Outcome b = restore(scenario);
    EXPECT_EQ(b.status, 0) << b.err;
    return {a, b};
  }
  // Saves the scenario (which changes things after the checkpoint); restore must fail: its stderr.
  std::string failed_restore(const std::string& scenario) {
    save(scenario);
    Outcome b = restore(scenario);
    EXPECT_EQ(b.status, 3) << b.out;
    return b.err;
  }

  std::string dir_, image_;
};

// Drops the lines describing the given descriptors ("fd N ...").
std::string without_fds(const std::string& text, const std::set<int>& fds) {
  std::stringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    int fd = -1;
    if (sscanf(line.c_str(), "fd %d ", &fd) == 1 && fds.count(fd)) continue;
    out += line + "\n";
  }
  return out;
}

std::string line_of_fd(const std::string& text, int fd) {
  std::stringstream in(text);
  std::string prefix = "fd " + std::to_string(fd) + " ";
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) return line;
  return "";
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// Whether stderr holds a stand-in warning for fd ("revive: fd N (...) ...; replaced by /dev/null").
bool stand_in_warned(const std::string& err, int fd) {
  std::stringstream in(err);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("revive: fd " + std::to_string(fd) + " (", 0) == 0 && has(line, "replaced by /dev/null")) return true;
  return false;
}

TEST_F(PluginRestore, FdsComeBackAtTheirNumbersWithFlagsOffsetsAndContents) {
  auto [a, b] = round_trip("fd");
  // The saved state really is what the scenario set up (so the comparison below compares something).
  EXPECT_TRUE(has(a.out, "fd 3 reg " + dir_ + "/data.txt flags=0 cloexec=0 off=1234 size=10000")) << a.out;
  EXPECT_TRUE(has(a.out, "fd 5 reg " + dir_ + "/log.txt flags=02001 cloexec=1 off=100 size=100 mode=640")) << a.out;
  EXPECT_TRUE(has(a.out, "fd 9 dir " + dir_ + " flags=0 cloexec=1")) << a.out;
  EXPECT_TRUE(has(a.out, "fd 11 reg deleted:")) << a.out;
  EXPECT_TRUE(has(a.out, "fd 12 reg memfd:")) << a.out;
  EXPECT_TRUE(has(a.out, "fd 20 reg " + dir_ + "/data.txt flags=04000 cloexec=0 off=99")) << a.out;
  EXPECT_TRUE(has(a.out, "fd11 reads yz{|}~")) << a.out;
  // Two descriptions of one deleted inode (11 and 25, opened through /proc/self/fd/11): one inode after
  // restore, stored once, each with its own offset.
  EXPECT_TRUE(has(a.out, "fd25 reads yz{|}\nfd25 sees fd11's write: 1\n")) << a.out;
  EXPECT_TRUE(has(a.out, "rw.bin offset after writes through fds 6 and 21: 80\n")) << a.out;
  // A pipe with both ends here (7, 8 and 8's dup 23) comes back with its buffered bytes; eventfd and
  // timerfds with their counter, time and pending expirations.
  EXPECT_TRUE(has(a.out, "fd 7 fifo pipe flags=04000 cloexec=0")) << a.out;
  EXPECT_TRUE(has(a.out, "fd 15 anon anon_inode:[eventfd] flags=02 cloexec=1")) << a.out;
  EXPECT_TRUE(has(a.out, "epoll ready: 4660/1 77/1\n")) << a.out;
  EXPECT_TRUE(has(a.out, "signalfd reads signal 23\n")) << a.out;  // SIGURG
  EXPECT_TRUE(has(a.out, "fd 29 anon anon_inode:[signalfd] flags=04002 cloexec=1")) << a.out;  // 0x1234: the pipe; 77: the eventfd
  EXPECT_TRUE(has(b.err, "fd 28 (epoll): cannot watch fd 13 again")) << b.err;  // a stand-in cannot be watched
  EXPECT_TRUE(has(a.out, "fd7 (pipe) reads hello-pipe\nfd7 then reads via-dup\neventfd reads 5\n"
                         "timerfd 16 interval 2s value~100s\ntimerfd 17 expirations 1\n")) << a.out;
  // Sockets and a pipe to another process come back as /dev/null stand-ins, with a warning naming each.
  const std::set<int> stand_ins{13, 14, 27};
  // fd 24 is /proc/self/status, shown by pid: /proc/<old pid>/... is reopened as the restored process's.
  std::set<int> differ = stand_ins;
  differ.insert(24);
  EXPECT_EQ(without_fds(b.out, differ), without_fds(a.out, differ));
  EXPECT_TRUE(has(b.out, "fd24 is this process's status: 1\n")) << b.out;
  EXPECT_TRUE(has(line_of_fd(b.out, 24), " reg /proc/")) << line_of_fd(b.out, 24);
  for (int fd : stand_ins) {
    EXPECT_TRUE(has(line_of_fd(b.out, fd), " chr /dev/null flags=0")) << line_of_fd(b.out, fd);
    EXPECT_TRUE(stand_in_warned(b.err, fd)) << fd << ": " << b.err;
  }
  for (int fd : {7, 8, 15, 16, 17, 23, 28, 29}) EXPECT_FALSE(stand_in_warned(b.err, fd)) << fd << ": " << b.err;
  EXPECT_TRUE(has(b.err, "fd 13 (socket socket:[")) << b.err;
  EXPECT_TRUE(has(b.err, "fd 27 (pipe pipe:[")) << b.err;
}

TEST_F(PluginRestore, FileThatGrewAfterCheckpointIsCutBackSoOutputIsIdentical) {
  save("fd");
  std::string grown = slurp(dir_ + "/log.txt");
  ASSERT_TRUE(has(grown, "lost with the process"));
  Outcome b = restore("fd");
  ASSERT_EQ(b.status, 0) << b.err;
  // What an uninterrupted run leaves: the 60 bytes before the checkpoint plus the write after it.
  std::string expect;
  for (int i = 0; i < 10; ++i) expect += "line " + std::to_string(i) + "...\n";
  EXPECT_EQ(slurp(dir_ + "/log.txt"), expect + "after\n");
}

TEST_F(PluginRestore, VanishedFileIsAnErrorNamingIt) {
  std::string err = failed_restore("fd-vanished");
  EXPECT_TRUE(has(err, "restore failed: fd: fd 3: cannot reopen '" + dir_ + "/data.txt' (vanished")) << err;
}

TEST_F(PluginRestore, ShrunkFileIsAnErrorNamingIt) {
  std::string err = failed_restore("fd-shrank");
  EXPECT_TRUE(has(err, "fd 6: file '" + dir_ + "/rw.bin' shrank from 500 to 10 bytes")) << err;
}

TEST_F(PluginRestore, DeletedFileAboveTheLimitFailsTheCheckpointNamingIt) {
  Outcome a = helper({"save", "fd", dir_, image_}, nullptr, false, "0");
  EXPECT_EQ(a.status, 3);
  EXPECT_TRUE(has(a.err, "revive: checkpoint refused: fd 11 is the deleted file '" + dir_ + "/gone.bin (deleted)' of "
                         "5000 bytes; deleted-but-open files are saved only up to 0 bytes")) << a.err;
  Outcome b = helper({"save", "fd", dir_, image_}, nullptr, false, "16M");
  EXPECT_EQ(b.status, 2);
  EXPECT_TRUE(has(b.err, "REVIVE_FD_DELETED_MAX_MB is not a size in MiB")) << b.err;
  EXPECT_EQ(helper({"save", "fd", dir_, image_}, nullptr, false, "1").status, 0);
}

// Nothing is silently substituted (issue 13): a kind the fd plugin cannot restore fails the checkpoint,
// naming the process, the descriptor and what it is; REVIVE_FD_UNSUPPORTED=stand-in asks for the old
// /dev/null stand-in, and says so at restore.
TEST_F(PluginRestore, UnrestorableDescriptorFailsTheCheckpointNamingIt) {
  Outcome a = helper({"save", "fd-unrestorable", dir_, image_});
  EXPECT_EQ(a.status, 3);
  EXPECT_TRUE(has(a.err, "checkpoint refused: process ")) << a.err;
  EXPECT_TRUE(has(a.err, ") fd 40 is 'anon_inode:[io_uring]', a kind of descriptor revive cannot restore")) << a.err;
  setenv("REVIVE_FD_UNSUPPORTED", "stand-in", 1);
  Outcome b = helper({"save", "fd-unrestorable", dir_, image_});
  Outcome c = helper({"restore", "fd-unrestorable", dir_, image_});
  setenv("REVIVE_FD_UNSUPPORTED", "sometimes", 1);
  Outcome d = helper({"save", "fd-unrestorable", dir_, image_});
  unsetenv("REVIVE_FD_UNSUPPORTED");
  EXPECT_EQ(b.status, 0) << b.err;
  EXPECT_EQ(c.status, 0) << c.err;
  EXPECT_TRUE(has(c.err, "fd 40 (other anon_inode:[io_uring]) cannot be restored; replaced by /dev/null")) << c.err;
  EXPECT_EQ(d.status, 2);
  EXPECT_TRUE(has(d.err, "REVIVE_FD_UNSUPPORTED is neither 'refuse' nor 'stand-in'")) << d.err;
}

TEST_F(PluginRestore, EngineDescriptorsAreNeitherSavedNorOverwritten) {
  Outcome a = save("fd", "30");
  EXPECT_TRUE(has(line_of_fd(a.out, 30), "/dev/zero"));
  Outcome b = restore("fd", "", "30");
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_TRUE(has(line_of_fd(b.out, 30), "/dev/full")) << "the engine's fd 30 was replaced";
  // And a saved descriptor whose number the restart engine holds is refused, naming it.
  save("fd");
  Outcome c = restore("fd", "", "3");
  EXPECT_EQ(c.status, 3);
  EXPECT_TRUE(has(c.err, "fd 3 ('" + dir_ + "/data.txt') is held by the restart engine")) << c.err;
}

TEST_F(PluginRestore, SignalDispositionsAndPendingSignalsSurvive) {
  auto [a, b] = round_trip("signal");
  EXPECT_EQ(b.out, a.out);
  EXPECT_TRUE(has(a.out, "sig 10 handler=0x")) << a.out;  // SIGUSR1
  EXPECT_TRUE(has(a.out, "sig 2 handler=0x1 ")) << a.out;  // SIGINT ignored
  EXPECT_TRUE(has(a.out, "pending 12\n")) << a.out;       // SIGUSR2, process-wide
  EXPECT_TRUE(has(b.out, "usr1 handled 1\nrt handler got 42\nsurvived SIGINT (ignored)\nsigtimedwait USR2 -> 1\n"
                         "queued RTMIN+3 -> 7\nqueued RTMIN+3 -> 8\nqueued RTMIN+3 -> none\n")) << b.out;
}

TEST_F(PluginRestore, IntervalTimersAreRearmedWithTheirRemainingTime) {
  auto [a, b] = round_trip("timer");
  EXPECT_EQ(b.out, a.out);
  EXPECT_TRUE(has(a.out, "itimer 0 value~100s interval=0.000000\nitimer 1 value~50s interval=2.250000\n"
                         "itimer 2 value~30s interval=1.000000\n")) << a.out;
}

TEST_F(PluginRestore, AlarmFiresAfterRestoreWithItsRemainingTime) {
  auto [a, b] = round_trip("alarm");
  EXPECT_TRUE(has(a.out, "alarm fired once after its remaining time")) << a.out;
  EXPECT_TRUE(has(b.out, "alarm fired once after its remaining time")) << b.out;
}

TEST_F(PluginRestore, PosixTimersComeBackWithTheirIdsAndRemainingTime) {
  auto [a, b] = round_trip("posix-timer");
  // Timer 4 is glibc's SIGEV_THREAD timer: not saved (its helper thread's id changes), with a warning.
  std::string thread_timer = "ptimer 4 value~0s interval=0.000000000 signal=32/";
  size_t at = a.out.find(thread_timer);
  ASSERT_NE(at, std::string::npos) << a.out;
  EXPECT_FALSE(has(b.out, thread_timer)) << b.out;
  EXPECT_EQ(b.out, a.out.erase(at, a.out.find('\n', at) + 1 - at));
  // Ids 0, 1, 3 (2 was deleted): the restored timers keep the ids the program holds.
  EXPECT_TRUE(has(a.out, "ptimer 0 value~100s interval=1.500000000 signal=38/0000000000000063 notify=signal clock=1\n"))
      << a.out;
  EXPECT_TRUE(has(a.out, "ptimer 1 value~50s interval=0.000000000 signal=0/0000000000000000 notify=none clock=0\n"))
      << a.out;
  EXPECT_TRUE(has(a.out, "ptimer 3 value~1s interval=0.000000000 signal=39/0000000000000037 notify=signal clock=1\n"))
      << a.out;
  EXPECT_TRUE(has(b.out, "timer A: gettime rc 0 interval 1.500000000\ntimer C fired once after its remaining time\n"))
      << b.out;
  EXPECT_TRUE(has(b.err, "1 POSIX timer(s) with SIGEV_THREAD")) << b.err;
}

TEST_F(PluginRestore, LimitsWorkingDirectoryAndUmaskSurvive) {
  auto [a, b] = round_trip("proc");
  EXPECT_EQ(b.out, a.out);
  EXPECT_TRUE(has(a.out, "rlimit 7 512 4096\n")) << a.out;  // RLIMIT_NOFILE
  EXPECT_TRUE(has(a.out, "cwd " + dir_ + "/work dir\numask 0027\n")) << a.out;
}

TEST_F(PluginRestore, LimitThatCannotBeRaisedIsKeptLowerWithAWarning) {
  Outcome a = save("proc");
  ASSERT_TRUE(has(a.out, "rlimit 12 100000 200000\n")) << a.out;  // RLIMIT_MSGQUEUE
  Outcome b = restore("proc", "", nullptr, true);
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_TRUE(has(b.err, "revive: RLIMIT_MSGQUEUE: cannot restore soft 100000 hard 200000 (Operation not permitted)"))
      << b.err;
  EXPECT_TRUE(has(b.out, "rlimit 12 1000 1000\n")) << b.out;
  EXPECT_TRUE(has(b.out, "rlimit 7 512 4096\n")) << b.out;  // the others are restored all the same
}

TEST_F(PluginRestore, VanishedWorkingDirectoryIsAnErrorNamingIt) {
  setenv("REVIVE_LOCAL_DIRS", (dir_ + "/elsewhere").c_str(), 1);  // not under a node-local directory
  std::string err = failed_restore("proc-cwd-vanished");
  unsetenv("REVIVE_LOCAL_DIRS");
  EXPECT_TRUE(has(err, "restore failed: proc: working directory '" + dir_ + "/work dir': No such file")) << err;
}

// Under a node-local directory (another host's /tmp has no such directory) it is made again, with a warning.
TEST_F(PluginRestore, VanishedNodeLocalWorkingDirectoryIsMadeAgain) {
  setenv("REVIVE_LOCAL_DIRS", dir_.c_str(), 1);
  save("proc-cwd-vanished");
  Outcome b = restore("proc-cwd-vanished");
  unsetenv("REVIVE_LOCAL_DIRS");
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_TRUE(has(b.err, "working directory '" + dir_ + "/work dir' was missing (node-local): made again")) << b.err;
  EXPECT_TRUE(has(b.out, "cwd " + dir_ + "/work dir\n")) << b.out;
}

TEST_F(PluginRestore, EverythingAtOnce) {
  auto [a, b] = round_trip("all");
  const std::set<int> stand_ins{13, 14, 24, 27};
  EXPECT_EQ(without_fds(b.out, stand_ins), without_fds(a.out, stand_ins));
}

TEST_F(PluginRestore, DamagedSectionsFailWithAMessageNamingThem) {
  save("all");
  for (std::string plugin : {"proc", "fd", "signal", "timer"}) {
    for (std::string damage : {"cut:", "drop:", "foreign:"}) {
      Outcome b = restore("all", damage + plugin);
      EXPECT_EQ(b.status, 3) << damage << plugin << ": " << b.err;
      EXPECT_TRUE(has(b.err, "restore failed: " + plugin + ": " + plugin + " section: ")) << damage << plugin << ": " << b.err;
    }
  }
}

TEST_F(PluginRestore, EveryTruncationIsRefusedAndBitFlipsNeverCrash) {
  save("all");
  Outcome r = helper({"damage-sweep", image_, "12345", "300"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  // One summary line per plugin: every cut refused, no flip crashing (the helper fails otherwise too).
  for (std::string plugin : {"proc", "fd", "signal", "timer"}) {
    std::string line = r.out.substr(r.out.find(plugin + ": "));
    line = line.substr(0, line.find('\n'));
    int cuts = -1, refused = -2, other = -1;
    sscanf(line.c_str(), "%*[^:]: %d cuts, %d refused", &cuts, &refused);
    sscanf(line.substr(line.rfind(", ") + 2).c_str(), "%d other", &other);
    EXPECT_GT(cuts, 100) << line;
    EXPECT_EQ(refused, cuts) << line;
    EXPECT_EQ(other, 0) << line;
  }
  std::cout << r.out;
}

}  // namespace
