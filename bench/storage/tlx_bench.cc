// Transparent multi-level storage (docs/storage-levels.md, "Transparent images"): the L2 exchange of one
// host's images of a generation — sent over TCP with the secret's proof, checksummed, written, fsynced and
// renamed by the receiver (coord/tlx.h, exactly what a sub-coordinator does) — against a raw write + fsync
// of the same bytes into the same directory. Loopback TCP on one machine (the test hosts are network
// namespaces of this machine too). Also one member's L3 XOR encode of a group of three such hosts
// (coord/tparity.h). Median of --runs runs; prints the ratios.
//   tlx_bench [DIR (default /dev/shm)] [MiB per image (default 64)] [images (default 3)] [runs (default 7)]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "coord/tlx.h"
#include "coord/tparity.h"

using revive::coord::TlxFile;

namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void Die(const std::string& m) {
  fprintf(stderr, "tlx_bench: %s\n", m.c_str());
  exit(1);
}

void WriteFile(const std::string& path, const std::vector<char>& bytes, bool sync) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) Die("open " + path);
  for (size_t off = 0; off < bytes.size();) {
    ssize_t w = write(fd, bytes.data() + off, bytes.size() - off);
    if (w <= 0) Die("write " + path);
    off += (size_t)w;
  }
  if (sync && fsync(fd) != 0) Die("fsync " + path);
  close(fd);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = std::string(argc > 1 ? argv[1] : "/dev/shm") + "/tlx-bench-" + std::to_string(getpid());
  const size_t mib = argc > 2 ? strtoul(argv[2], nullptr, 10) : 64;
  const int images = argc > 3 ? atoi(argv[3]) : 3, runs = argc > 4 ? atoi(argv[4]) : 7;
  std::filesystem::create_directories(dir + "/src");
  std::vector<char> bytes(mib << 20);
  for (size_t i = 0; i < bytes.size(); i++) bytes[i] = (char)(i * 2654435761u >> 13);
  std::vector<std::string> srcs;
  for (int k = 0; k < images; k++) {
    srcs.push_back(dir + "/src/img-" + std::to_string(k) + ".rimg");
    WriteFile(srcs.back(), bytes, false);
  }
  const std::string secret(32, 's');
  std::vector<double> raw, exch, enc;
  for (int r = 0; r < runs; r++) {
    std::filesystem::remove_all(dir + "/raw");
    std::filesystem::create_directories(dir + "/raw");
    double t0 = Now();
    for (int k = 0; k < images; k++) WriteFile(dir + "/raw/img-" + std::to_string(k) + ".rimg", bytes, true);
    raw.push_back(Now() - t0);

    std::filesystem::remove_all(dir + "/got");
    int lfd = -1;
    uint16_t port = 0;
    revive::Status s = revive::coord::TlxListen("127.0.0.1", &lfd, &port);
    if (!s.ok()) Die(s.ToString());
    t0 = Now();
    revive::Status sent;
    std::vector<TlxFile> files, got;
    std::thread sender([&] { sent = revive::coord::TlxSend("127.0.0.1:" + std::to_string(port), secret, 1, "h1", srcs, &files, 60); });
    s = revive::coord::TlxReceive(lfd, secret, 1, "h1", dir + "/got", 60, &got);
    sender.join();
    exch.push_back(Now() - t0);
    close(lfd);
    if (!s.ok() || !sent.ok()) Die(s.ok() ? sent.ToString() : s.ToString());

    // L3: one member's encode of a group of three hosts holding this many bytes each (XOR), once the
    // other members' images arrived (each member receives g - 1 = 2 such transfers first).
    std::filesystem::create_directories(dir + "/par");
    t0 = Now();
    s = revive::coord::TEncodeGroup({"h1", "h2", "h3"}, {srcs, srcs, srcs}, 1, 0, dir + "/par");
    enc.push_back(Now() - t0);
    if (!s.ok()) Die(s.ToString());
  }
  std::filesystem::remove_all(dir);
  const double total = double(images) * double(mib);
  const double mr = Median(raw), me = Median(exch);
  printf("generation of %d images x %zu MiB (%.0f MiB) in %s, median of %d runs\n", images, mib, total,
         argc > 1 ? argv[1] : "/dev/shm", runs);
  printf("raw write+fsync:              %.3f s (%.0f MiB/s)\n", mr, total / mr);
  printf("L2 exchange (TCP, XXH3, fsync): %.3f s (%.0f MiB/s)\n", me, total / me);
  printf("ratio exchange / raw: %.2f\n", me / mr);
  const double mc = Median(enc);
  printf("L3 XOR encode of a 3-host group (one member, after receiving 2 x the bytes): %.3f s; "
         "L3 total ~ 2 x exchange + encode = %.3f s, ratio to raw %.2f\n", mc, 2 * me + mc, (2 * me + mc) / mr);
  return 0;
}
