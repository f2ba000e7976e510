// kill_driver: SIGKILLs a checkpoint-writing program at random moments and has a verifier check, after
// every kill, that restart finds an intact version whose content is exactly what was written and that it
// is the newest complete one.
//
//   kill_driver --rounds N [--min-delay-us L] --max-delay-us U --seed S --dir D -- WRITER [args...]
//
// Each round: empty D, run `WRITER write D args...` with stdout on a pipe, kill it with SIGKILL after a
// random delay in [L, U) microseconds, then run `WRITER verify D BEGUN DONE args...`, where BEGUN is the
// last version the writer announced ("B <v>") before starting to write it and DONE the last it announced as
// complete ("D <v>", or 0). The verifier exits 0 when the restart is correct; any other status fails the
// round and the driver. The pipe keeps every announcement made before the kill (the kernel holds it).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace {

pid_t Spawn(const std::vector<std::string>& argv, int stdout_fd) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (stdout_fd >= 0) dup2(stdout_fd, 1);
    execv(args[0], args.data());
    std::fprintf(stderr, "kill_driver: exec %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  return pid;
}

// Reads what the writer announced; returns the last begun and last done versions.
void ParseAnnouncements(const std::string& out, long* begun, long* done) {
  *begun = 0;
  *done = 0;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t nl = out.find('\n', pos);
    if (nl == std::string::npos) break;  // a torn last line was cut by the kill: ignore it
    const std::string line = out.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.size() > 2 && line[0] == 'B') *begun = std::atol(line.c_str() + 2);
    if (line.size() > 2 && line[0] == 'D') *done = std::atol(line.c_str() + 2);
  }
}

int Usage() {
  std::fprintf(stderr, "usage: kill_driver --rounds N [--min-delay-us L] --max-delay-us U --seed S --dir D -- WRITER [args]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  long rounds = 0, min_delay = 0, max_delay = 0;
  unsigned seed = 1;
  std::string dir;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") { ++i; break; }
    if (i + 1 >= argc) return Usage();
    if (a == "--rounds") rounds = std::atol(argv[++i]);
    else if (a == "--min-delay-us") min_delay = std::atol(argv[++i]);
    else if (a == "--max-delay-us") max_delay = std::atol(argv[++i]);
    else if (a == "--seed") seed = static_cast<unsigned>(std::atol(argv[++i]));
    else if (a == "--dir") dir = argv[++i];
    else return Usage();
  }
  if (i >= argc || rounds <= 0 || max_delay <= min_delay || min_delay < 0 || dir.empty()) return Usage();
  const std::string writer = argv[i];
  const std::vector<std::string> extra(argv + i + 1, argv + argc);

  std::mt19937 rng(seed);
  std::uniform_int_distribution<long> delay(min_delay, max_delay - 1);
  long mid_write = 0, none_complete = 0;
  for (long r = 0; r < rounds; ++r) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    std::filesystem::create_directories(dir, ec);
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) { std::perror("pipe"); return 1; }
    std::vector<std::string> wargs = {writer, "write", dir};
    wargs.insert(wargs.end(), extra.begin(), extra.end());
    const pid_t pid = Spawn(wargs, p[1]);
    close(p[1]);
    const long us = delay(rng);
    usleep(static_cast<useconds_t>(us));
    kill(pid, SIGKILL);
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = read(p[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    close(p[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)) {
      std::fprintf(stderr, "kill_driver: round %ld: writer ended before the kill (status %d); raise its "
                   "version count or lower --max-delay-us\n", r, st);
      return 1;
    }
    long begun, done;
    ParseAnnouncements(out, &begun, &done);
    if (begun > done) ++mid_write;
    if (done == 0) ++none_complete;
    std::vector<std::string> vargs = {writer, "verify", dir, std::to_string(begun), std::to_string(done)};
    vargs.insert(vargs.end(), extra.begin(), extra.end());
    const pid_t v = Spawn(vargs, -1);
    int vst = 0;
    waitpid(v, &vst, 0);
    if (!WIFEXITED(vst) || WEXITSTATUS(vst) != 0) {
      std::fprintf(stderr, "kill_driver: round %ld FAILED (killed after %ld us, begun=%ld done=%ld); "
                   "directory kept in %s\n", r, us, begun, done, dir.c_str());
      return 1;
    }
  }
  std::printf("kill_driver: %ld rounds OK (%ld killed while a version was being written, %ld before any "
              "version was complete)\n", rounds, mid_write, none_complete);
  // A harness whose kills never land inside a write proves nothing: demand that most do.
  if (mid_write * 2 < rounds) {
    std::fprintf(stderr, "kill_driver: only %ld of %ld kills landed mid-write; timing is off\n", mid_write,
                 rounds);
    return 1;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}
