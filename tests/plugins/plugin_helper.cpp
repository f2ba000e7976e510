// Runs the plugins the way the engine does, in two separate processes:
//   plugin_helper save SCENARIO DIR IMAGE     set up SCENARIO, save every plugin into IMAGE, print the
//                                             state and the exercise output, then change things (policies)
//   plugin_helper restore SCENARIO DIR IMAGE [cut:PLUGIN | foreign:PLUGIN | drop:PLUGIN]
//                                             in a fresh process: restore every plugin from IMAGE (damaged
//                                             as asked), print the state and the exercise output
// The test driver runs both without address randomisation, so that restored handler and restorer
// addresses are valid code here too, as they are for a real restore where memory comes back.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <thread>
#include <sstream>
#include <string>
#include <vector>

#include "mem_section.h"
#include "plugins/plugins.h"
#include "scenarios.h"
#include "state_dump.h"

using namespace revive;
using namespace revive::plugins::test;

namespace {

const inject::Plugin* const kOrder[] = {&inject::kProcPlugin, &inject::kFdPlugin, &inject::kSignalPlugin,
                                        &inject::kTimerPlugin};

// Opens path at descriptor fd (standing for a descriptor the engine owns).
void open_at(const char* path, const char* fd_text) {
  int want = atoi(fd_text), fd = open(path, O_RDONLY);
  if (fd >= 0 && fd != want) {
    dup2(fd, want);
    close(fd);
  }
}

void close_from(int first) {
  for (int fd = first; fd < 1024; ++fd) close(fd);
}

// Image file: for each plugin "name length\n" followed by the section bytes.
bool write_image(const std::string& path, const std::vector<std::string>& sections) {
  std::ofstream f(path, std::ios::binary);
  for (size_t k = 0; k < sections.size(); ++k) f << kOrder[k]->name << ' ' << sections[k].size() << '\n' << sections[k];
  return static_cast<bool>(f);
}

std::vector<std::string> read_image(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<std::string> out;
  std::string name;
  size_t len;
  while (f >> name >> len) {
    f.get();
    std::string s(len, '\0');
    f.read(s.data(), static_cast<std::streamsize>(len));
    out.push_back(s);
  }
  return out;
}

int init_all() {
  // Not among the sections (kOrder), but its settings (REVIVE_LOCAL_DIRS) answer the proc plugin's question
  // whether a vanished working directory is node-local (inject::node_local_path).
  if (int rc = inject::kFilesPlugin.init(); rc != 0) {
    fprintf(stderr, "init failed: files: %d\n", rc);
    return rc;
  }
  for (auto* p : kOrder) {
    if (int rc = p->init(); rc != 0) {
      fprintf(stderr, "init failed: %s: %d\n", p->name, rc);
      return rc;
    }
  }
  return 0;
}

// The engine saves and restores on a thread of its own, not the main thread (whose tid is the pid):
// so do we, so that a plugin relying on being the main thread fails here too.
int on_other_thread(const std::function<int()>& fn) {
  int rc = -1;
  std::thread t([&] { rc = fn(); });
  t.join();
  return rc;
}

int do_save(const std::string& scenario, const std::string& dir, const std::string& image) {
  close_from(3);
  if (chdir(dir.c_str()) != 0 || init_all() != 0) return 2;
  const char* reserved = getenv("REVIVE_TEST_RESERVED_FD");
  if (reserved) open_at("/dev/zero", reserved);  // "the engine's" descriptor
  setup(scenario, dir);
  std::vector<std::string> sections;
  int rc = on_other_thread([&] {
    for (auto* p : kOrder) {
      MemWriter w;
      if (int rc = p->save(w); rc != 0) {
        fprintf(stderr, "save failed: %s: %s\n", p->name, strerror(-rc));
        return 3;
      }
      sections.push_back(w.bytes);
    }
    for (auto* p : kOrder) p->resume(true);
    return 0;
  });
  if (rc != 0) return rc;
  if (!write_image(image, sections)) return 2;
  std::string out = "=== state\n" + dump_state();
  out += "=== exercise\n" + exercise(scenario, dir);
  fputs(out.c_str(), stdout);
  fflush(stdout);
  after_checkpoint(scenario, dir);
  return 0;
}

int do_restore(const std::string& scenario, const std::string& dir, const std::string& image, const std::string& damage) {
  close_from(3);
  std::vector<std::string> sections = read_image(image);
  if (sections.size() != 4) {
    fprintf(stderr, "bad image %s\n", image.c_str());
    return 2;
  }
  for (size_t k = 0; k < 4; ++k) {
    std::string name = kOrder[k]->name;
    if (damage == "cut:" + name) sections[k].resize(sections[k].size() - 3);
    if (damage == "drop:" + name) sections[k].clear();
    if (damage == "foreign:" + name) sections[k] = sections[(k + 1) % 4];
  }
  const char* reserved = getenv("REVIVE_TEST_RESERVED_FD");
  if (reserved) open_at("/dev/full", reserved);  // the restart engine's own descriptor
  engine_side(scenario);
  if (chdir("/") != 0 || init_all() != 0) return 2;  // restore must bring the working directory back
  int rc = on_other_thread([&] {
    for (size_t k = 0; k < 4; ++k) {
      MemReader r(sections[k]);
      char msg[512] = "(no message)";
      if (int rc = kOrder[k]->restore(r, msg, sizeof msg); rc != 0) {
        fprintf(stderr, "restore failed: %s: %s (%s)\n", kOrder[k]->name, msg, strerror(-rc));
        return 3;
      }
    }
    return 0;
  });
  if (rc != 0) return rc;
  std::string out = "=== state\n" + dump_state();
  out += "=== exercise\n" + exercise(scenario, dir);
  fputs(out.c_str(), stdout);
  return 0;
}

// Restores one (damaged) section in a forked child, so that whatever it applies dies with the child.
// Returns 0 (restored), 3 (refused with a message), 4 (refused without one) or 128+signal (crashed).
int restore_in_child(size_t k, const std::string& section) {
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);  // stand-in warnings
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, nullptr);  // re-raised or timer signals of a flipped section: not delivered
    MemReader r(section);
    char msg[512] = "";
    int rc = kOrder[k]->restore(r, msg, sizeof msg);
    _exit(rc == 0 ? 0 : msg[0] ? 3 : 4);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Every plugin's section from IMAGE, cut short at many lengths (each must be refused with a message) and
// with random bit flips (each must be restored or refused with a message, never crash).
int do_damage_sweep(const std::string& image, unsigned seed, int flips) {
  std::vector<std::string> sections = read_image(image);
  if (sections.size() != 4 || init_all() != 0) return 2;
  srand(seed);
  int bad = 0;
  for (size_t k = 0; k < 4; ++k) {
    const std::string& full = sections[k];
    int cuts = 0, refused = 0;
    for (size_t len = 0; len < full.size(); len += len < 600 ? 1 : 97) {
      ++cuts;
      int rc = restore_in_child(k, full.substr(0, len));
      if (rc == 3) ++refused; else if (bad++ < 10) printf("  %s cut at %zu: status %d\n", kOrder[k]->name, len, rc);
    }
    int ok = 0, ref = 0, crashed = 0;
    for (int f = 0; f < flips; ++f) {
      std::string s = full;
      size_t byte = static_cast<size_t>(rand()) % s.size();
      s[byte] = static_cast<char>(s[byte] ^ (1 << (rand() % 8)));
      int rc = restore_in_child(k, s);
      if (rc == 0) ++ok; else if (rc == 3) ++ref; else {
        ++crashed;
        if (bad++ < 10) printf("  %s flip at byte %zu: status %d\n", kOrder[k]->name, byte, rc);
      }
    }
    printf("%s: %d cuts, %d refused with a message; %d flips: %d restored, %d refused, %d other\n", kOrder[k]->name,
           cuts, refused, flips, ok, ref, crashed);
  }
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "damage-sweep") return do_damage_sweep(argv[2], atoi(argv[3]), atoi(argv[4]));
  if (argc < 5 || !known_scenario(argv[2])) {
    fprintf(stderr, "usage: %s save|restore SCENARIO DIR IMAGE [DAMAGE] | damage-sweep IMAGE SEED FLIPS\n", argv[0]);
    return 2;
  }
  std::string mode = argv[1];
  if (mode == "save") return do_save(argv[2], argv[3], argv[4]);
  if (mode == "restore") return do_restore(argv[2], argv[3], argv[4], argc > 5 ? argv[5] : "");
  return 2;
}
