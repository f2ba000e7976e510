// Cost of the plugins' save/restore against the raw syscalls that fetch or rebuild the same state
// (the physical limit: the plugin cannot do less than ask the kernel), medians of 7 runs.
//   plugins_bench [nfiles=1000] [deleted_mib=16]
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "plugins/files/files_internal.h"
#include "plugins/plugins.h"
#include "bench_support.h"

namespace revive::inject {
int checkpoint_signal() { return SIGRTMAX - 2; }
// The bench restores into itself: its own stdin/stdout/stderr stay out of it (were stdout a file, the
// restore would cut it back to its size at the save, eating this bench's own report).
bool fd_reserved(int fd) { return fd <= 2; }
}  // namespace revive::inject

namespace {

// Median of 7 timings of fn; prep runs untimed before each.
double median(const std::function<void()>& prep, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int k = 0; k < 7; ++k) {
    prep();
    double t0 = now();
    fn();
    t.push_back(now() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[3];
}

void report(const char* what, double plugin, double limit) {
  printf("%-44s plugin %9.3f ms   raw syscalls %9.3f ms   ratio %5.2f\n", what, plugin * 1e3, limit * 1e3,
         plugin / limit);
}

}  // namespace

int main(int argc, char** argv) {
  int nfiles = argc > 1 ? atoi(argv[1]) : 1000;
  long mib = argc > 2 ? atol(argv[2]) : 16;
  char tmpl[] = "/tmp/revive-plugins-bench-XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  std::string dir = tmpl;
  for (int fd = 3; fd < 1024; ++fd) close(fd);
  std::vector<std::string> paths;
  for (int k = 0; k < nfiles; ++k) {
    paths.push_back(dir + "/f" + std::to_string(k));
    int fd = open(paths.back().c_str(), O_RDWR | O_CREAT, 0644);
    if (fd < 0 || write(fd, "0123456789", 10) != 10) return 1;
    lseek(fd, 5, SEEK_SET);
  }
  const auto& fd = revive::inject::kFdPlugin;
  BufWriter w;
  w.b.reserve(64 << 20);

  report(("fd save, " + std::to_string(nfiles) + " open files").c_str(),
         median([&] { w.b.clear(); }, [&] { fd.save(w); }),
         median([] {}, [&] {
           char path[4096], link[64];
           struct stat st;
           for (int k = 0; k < nfiles; ++k) {  // the facts the plugin needs, nothing else
             snprintf(link, sizeof link, "/proc/self/fd/%d", k + 3);
             if (readlink(link, path, sizeof path) < 0 || fstat(k + 3, &st) != 0) abort();
             fcntl(k + 3, F_GETFL);
             fcntl(k + 3, F_GETFD);
             lseek(k + 3, 0, SEEK_CUR);
           }
         }));
  w.b.clear();
  fd.save(w);
  std::string image = w.b;
  auto close_all = [&] { for (int k = 0; k < nfiles; ++k) close(k + 3); };
  char msg[256];
  report(("fd restore, " + std::to_string(nfiles) + " files").c_str(),
         median(close_all, [&] {
           BufReader r(image);
           if (fd.restore(r, msg, sizeof msg) != 0) abort();
         }),
         median(close_all, [&] {
           struct stat st;
           for (int k = 0; k < nfiles; ++k) {  // open + check + seek + place, as the plugin must
             int f = open(paths[k].c_str(), O_RDWR | O_CLOEXEC);
             if (f < 0 || fstat(f, &st) != 0) abort();
             lseek(f, 5, SEEK_SET);
             if (f != k + 3) abort();
           }
         }));

  // A deleted-but-open file: its contents go into the image.
  close_all();
  std::string gone = dir + "/deleted";
  int g = open(gone.c_str(), O_RDWR | O_CREAT, 0600);
  std::string blob(static_cast<size_t>(mib) << 20, 'x');
  if (write(g, blob.data(), blob.size()) != static_cast<ssize_t>(blob.size())) return 1;
  unlink(gone.c_str());
  std::string buf(blob.size(), '\0');
  report(("fd save, deleted file of " + std::to_string(mib) + " MiB").c_str(),
         median([&] { w.b.clear(); }, [&] { fd.save(w); }),
         median([] {}, [&] {  // reading the bytes into memory once
           if (pread(g, buf.data(), buf.size(), 0) != static_cast<ssize_t>(buf.size())) abort();
         }));
  close(g);

  // files plugin: a file open for writing (sqlite's database) is copied into the section at every save
  // and written back in place at restore. Limits: reading / writing the same bytes once.
  {
    using revive::plugins::g_files;
    g_files.written = true;
    g_files.root = false;
    g_files.max_bytes = int64_t(mib + 1) << 20;
    std::string db = dir + "/db";
    int f = open(db.c_str(), O_RDWR | O_CREAT, 0644);
    if (f < 0 || write(f, blob.data(), blob.size()) != static_cast<ssize_t>(blob.size())) return 1;
    const auto& files = revive::inject::kFilesPlugin;
    report(("files save, written file of " + std::to_string(mib) + " MiB").c_str(),
           median([&] { w.b.clear(); }, [&] { if (files.save(w) != 0) abort(); }),
           median([] {}, [&] { if (pread(f, buf.data(), buf.size(), 0) != static_cast<ssize_t>(buf.size())) abort(); }));
    std::string sec = w.b;
    report(("files restore, written file of " + std::to_string(mib) + " MiB").c_str(),
           median([] {}, [&] {
             BufReader r(sec);
             if (files.restore(r, msg, sizeof msg) != 0) abort();
           }),
           median([] {}, [&] { if (pwrite(f, blob.data(), blob.size(), 0) != static_cast<ssize_t>(blob.size())) abort(); }));
    close(f);
    unlink(db.c_str());

    // The launch root's walk of a node-local tree (2000 directories of 10 files, none touched since the
    // launch, so none is entered and nothing saved: the pure cost added to every checkpoint), against
    // one getdents pass over the same directories (what a walk that entered them all would cost at least).
    std::string tree = dir + "/local";
    mkdir(tree.c_str(), 0700);
    std::vector<std::string> dirs;
    for (int d = 0; d < 2000; ++d) {
      dirs.push_back(tree + "/d" + std::to_string(d));
      mkdir(dirs.back().c_str(), 0700);
      for (int k = 0; k < 10; ++k) close(open((dirs.back() + "/f" + std::to_string(k)).c_str(), O_WRONLY | O_CREAT, 0600));
    }
    struct timespec t0;
    clock_gettime(CLOCK_REALTIME, &t0);
    g_files.root = true;
    g_files.displace = false;
    g_files.t0_sec = t0.tv_sec + 1;  // everything is older than the launch
    g_files.t0_nsec = 0;
    snprintf(g_files.local, sizeof g_files.local, "%s", tree.c_str());
    report("files walk: 2000 untouched dirs vs listing all",
           median([&] { w.b.clear(); }, [&] { if (files.save(w) != 0) abort(); }),
           median([] {}, [&] {
             for (const auto& d : dirs) {
               DIR* h = opendir(d.c_str());
               while (readdir(h)) {}
               closedir(h);
             }
           }));
    g_files.t0_sec = t0.tv_sec - 3600;  // the walk when every directory was modified since the launch
    report("  same, all 20000 (empty) born since launch: saved",
           median([&] { w.b.clear(); }, [&] { files.save(w); }),
           median([] {}, [&] {
             struct stat st;
             for (const auto& d : dirs)
               for (int k = 0; k < 10; ++k) stat((d + "/f" + std::to_string(k)).c_str(), &st);
           }));
    g_files.root = false;
    std::string cmd = "rm -rf '" + tree + "'";
    if (system(cmd.c_str()) != 0) return 1;
  }

  const auto& sig = revive::inject::kSignalPlugin;
  sig.init();
  report("signal save, 62 dispositions", median([&] { w.b.clear(); }, [&] { sig.save(w); sig.resume(true); }),
         median([] {}, [] {
           struct sigaction sa;
           for (int s = 1; s <= 64; ++s) sigaction(s, nullptr, &sa);
         }));
  rmdir(dir.c_str());
  for (auto& p : paths) unlink(p.c_str());
  rmdir(dir.c_str());
  return 0;
}
