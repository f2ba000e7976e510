// ring ITERS SLEEP_US: a C++ program (mpicxx, the C API from C++, standard containers) under
// checkpoint/restart (issue 7). Per iteration a token (a std::vector<uint64_t> that grows by one value
// per hop, and a std::string naming the hops) goes round the ring from rank it % size; each rank holds it
// for a while (a checkpoint then finds every other rank waiting in MPI_Recv/MPI_Probe); rank 0 prints the
// token's digest. Each rank also keeps a std::map of what it saw, summarised at the end.
#include <mpi.h>
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
uint64_t fnv(uint64_t h, const void *p, size_t n) {
  auto c = static_cast<const unsigned char *>(p);
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ULL;
  return h;
}
// A message of unknown length from src with tag, into s (MPI_Probe gives the length).
void recv_string(std::string &s, int src, int tag) {
  MPI_Status st;
  MPI_Probe(src, tag, MPI_COMM_WORLD, &st);
  int n;
  MPI_Get_count(&st, MPI_CHAR, &n);
  s.resize(n);
  MPI_Recv(s.data(), n, MPI_CHAR, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}
long arg(int argc, char **argv, int i, long def) { return i < argc ? std::strtol(argv[i], nullptr, 10) : def; }
}  // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  const long iters = arg(argc, argv, 1, 40), sleep_us = arg(argc, argv, 2, 100000);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  std::map<long, uint64_t> seen;
  uint64_t total = 0xcbf29ce484222325ULL;
  for (long it = 0; it < iters; it++) {
    const int start = static_cast<int>(it % size);
    std::vector<uint64_t> tok;
    std::string path;
    if (rank != start) {
      // The token's size is not known in advance: probe, then receive the values and the path.
      MPI_Status st;
      MPI_Probe(left, 1, MPI_COMM_WORLD, &st);
      int n;
      MPI_Get_count(&st, MPI_UINT64_T, &n);
      tok.resize(n);
      MPI_Recv(tok.data(), n, MPI_UINT64_T, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      recv_string(path, left, 2);
    }
    tok.push_back(mix64((tok.empty() ? 0 : tok.back()) ^ (static_cast<uint64_t>(rank) << 40 | it)));
    path += "r" + std::to_string(rank) + ";";
    seen[it] = tok.back();
    usleep(static_cast<useconds_t>(sleep_us / size));
    if (right != start) {
      MPI_Send(tok.data(), static_cast<int>(tok.size()), MPI_UINT64_T, right, 1, MPI_COMM_WORLD);
      MPI_Send(path.data(), static_cast<int>(path.size()), MPI_CHAR, right, 2, MPI_COMM_WORLD);
    } else {  // the last hop: hand the whole token to rank 0 for the report
      if (rank != 0) {
        MPI_Send(tok.data(), static_cast<int>(tok.size()), MPI_UINT64_T, 0, 3, MPI_COMM_WORLD);
        MPI_Send(path.data(), static_cast<int>(path.size()), MPI_CHAR, 0, 4, MPI_COMM_WORLD);
      }
    }
    if (rank == 0) {
      const int last = (start + size - 1) % size;
      if (last != 0) {
        tok.assign(size, 0);
        MPI_Recv(tok.data(), size, MPI_UINT64_T, last, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        recv_string(path, last, 4);
      }
      uint64_t h = fnv(fnv(0xcbf29ce484222325ULL, tok.data(), tok.size() * 8), path.data(), path.size());
      std::printf("ring it %ld %s %016llx\n", it, path.c_str(), static_cast<unsigned long long>(h));
      std::fflush(stdout);
      total = fnv(total, &h, 8);
    }
  }
  uint64_t mine = 0;
  for (auto &[it, v] : seen) mine = fnv(mine ^ static_cast<uint64_t>(it), &v, 8);
  std::vector<uint64_t> all(size);
  MPI_Gather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    total = fnv(total, all.data(), all.size() * 8);
    std::printf("ring done %ld iterations total %016llx\n", iters, static_cast<unsigned long long>(total));
    std::fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
