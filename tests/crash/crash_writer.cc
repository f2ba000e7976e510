// crash_writer: the program kill_driver SIGKILLs. It writes checkpoint versions 1, 2, 3, ... whose data is a
// pure function of the version's iteration, so the verifier can tell exactly what every byte must be.
//
//   crash_writer write  DIR MODE MIB               write until killed, announcing "B i" / "D i" on stdout
//   crash_writer verify DIR BEGUN DONE MODE MIB    restart from DIR and check the version it finds
//
// MODE is sync, copy (async with a copy) or zero (async zero-copy). Announcements: "B i" just before
// version i is handed to the library, "D i" once the library has reported version i complete (sync: the
// write returned; async: the next write started, which waits for and publishes the previous one, or
// wait() returned). The verifier demands: a version j is found iff DONE > 0, DONE <= j <= BEGUN, and every
// byte of every key equals what iteration j wrote.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "revive/checkpoint.hpp"

namespace {

uint64_t Mix(uint64_t z) {  // splitmix64
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Content of version i: every 8-byte word depends on i and its position, so a byte from another
// version, another offset or a torn write is caught.
void Fill(int64_t i, std::vector<uint64_t>* big, std::vector<uint32_t>* small) {
  for (size_t k = 0; k < big->size(); ++k) (*big)[k] = Mix(static_cast<uint64_t>(i) * 0x100000001b3ULL + k);
  for (size_t k = 0; k < small->size(); ++k) (*small)[k] = static_cast<uint32_t>(Mix(~static_cast<uint64_t>(i) + k));
}

void Announce(char what, int64_t i) {
  char line[32];
  const int n = std::snprintf(line, sizeof line, "%c %lld\n", what, static_cast<long long>(i));
  // One write(2) per line straight into the pipe: no stdio buffer that a SIGKILL could lose.
  if (write(1, line, static_cast<size_t>(n)) != n) _exit(3);
}

revive::Options MakeOptions(const std::string& dir, const std::string& mode) {
  revive::Options o;
  o.base_path = dir;
  o.async = mode != "sync";
  o.zero_copy = mode == "zero";
  o.keep = 2;
  return o;
}

struct Data {
  std::vector<uint64_t> big;
  std::vector<uint32_t> small;
  int64_t stamp = 0;  // the iteration, stored as its own key
};

void Register(revive::Checkpoint& cp, Data& d) {
  cp.add("big", d.big.data(), d.big.size());
  cp.add("small", d.small);
  cp.add("stamp", &d.stamp);
  cp.commit();
}

int Write(const std::string& dir, const std::string& mode, size_t mib) {
  Data d;
  d.big.resize(mib * (1u << 20) / sizeof(uint64_t));
  d.small.resize(1000);
  revive::Checkpoint cp("crash", MakeOptions(dir, mode));
  Register(cp, d);
  for (int64_t i = 1; i < 1000000; ++i) {
    if (mode == "zero") {
      cp.wait();  // zero-copy: the writer reads our buffers until this returns
      if (i > 1) Announce('D', i - 1);
    }
    Fill(i, &d.big, &d.small);
    d.stamp = i;
    Announce('B', i);
    cp.update_and_write(i, 1);
    if (mode == "sync") Announce('D', i);
    if (mode == "copy" && i > 1) Announce('D', i - 1);
  }
  return 4;  // never reached in a test: the driver kills long before
}

int Verify(const std::string& dir, int64_t begun, int64_t done, const std::string& mode, size_t mib) {
  Data d;
  d.big.assign(mib * (1u << 20) / sizeof(uint64_t), 0);
  d.small.clear();
  revive::Checkpoint cp("crash", MakeOptions(dir, mode));
  Register(cp, d);
  int64_t next = 0;
  bool found = false;
  try {
    found = cp.restart_if_needed(&next);
  } catch (const revive::Error& e) {
    std::fprintf(stderr, "verify: restart failed: %s\n", e.what());
    return 1;
  }
  if (!found) {
    if (done > 0) {
      std::fprintf(stderr, "verify: no version found although version %lld was reported complete\n",
                   static_cast<long long>(done));
      return 1;
    }
    return 0;
  }
  const int64_t j = next - 1;
  if (j < done || j > begun || j < 1) {
    std::fprintf(stderr, "verify: restarted from %lld, expected a version in [%lld, %lld]\n",
                 static_cast<long long>(j), static_cast<long long>(done), static_cast<long long>(begun));
    return 1;
  }
  std::vector<uint64_t> big(d.big.size());
  std::vector<uint32_t> small(1000);
  Fill(j, &big, &small);
  if (d.stamp != j || d.big != big || d.small != small) {
    std::fprintf(stderr, "verify: version of iteration %lld has wrong content (stamp %lld, big %s, small %s)\n",
                 static_cast<long long>(j), static_cast<long long>(d.stamp), d.big == big ? "ok" : "DIFFERS",
                 d.small == small ? "ok" : "DIFFERS");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::strcmp(argv[1], "write") == 0)
    return Write(argv[2], argv[3], std::strtoul(argv[4], nullptr, 10));
  if (argc == 7 && std::strcmp(argv[1], "verify") == 0)
    return Verify(argv[2], std::atoll(argv[3]), std::atoll(argv[4]), argv[5], std::strtoul(argv[6], nullptr, 10));
  std::fprintf(stderr, "usage: crash_writer write DIR MODE MIB | verify DIR BEGUN DONE MODE MIB\n");
  return 2;
}
