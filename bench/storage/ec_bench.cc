// ec_bench: bandwidth of the erasure-coded level's arithmetic against memcpy of the same bytes, the
// physical limit, measured in the same run.
//
//   ec_bench [--mib 256] [--reps 5]
//
// One redundancy group holding --mib MiB of checkpoint data in total (g members of mib/g MiB each):
// EncodeGroup (all g stripes) for XOR (g=4, m=1) and Reed-Solomon (g=6, m=2), and RebuildGroup of 1
// (XOR) and 2 (RS) lost members, data and parity. Every figure is the group's data bytes divided by the
// time (a rebuild reads nearly the whole group, so both are "group bytes per second"), the median of
// --reps runs; memcpy copies the group's data bytes into another buffer, interleaved with the runs so both
// see the same load. Every buffer is written once before timing: first-touch page faults on this VM cost
// more than the work. The rebuilt members are compared with the originals after the last run.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "storage/erasure.h"
#include "storage/stripes.h"

using revive::Status;
using revive::storage::ErasureCode;
using revive::storage::StripeLayout;

namespace {

double Now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void Check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "ec_bench: %s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

// Incompressible-looking bytes, written through every page.
void Fill(std::string* s, uint64_t seed) {
  for (size_t i = 0; i + 8 <= s->size(); i += 8) {
    uint64_t z = (i + seed) * 0x9e3779b97f4a7c15ULL;
    z ^= z >> 29;
    std::memcpy(s->data() + i, &z, 8);
  }
}

// Times `op` and memcpy of `bytes` alternately (which goes first rotates), reps times; prints medians.
void Measure(const char* name, size_t bytes, int reps, const std::function<void()>& op,
             const std::vector<std::string>& src, std::string* dst) {
  std::vector<double> t_op, t_cp;
  for (int r = 0; r < reps; ++r) {
    for (int k = 0; k < 2; ++k) {
      const double t0 = Now();
      if ((k + r) % 2 == 0) {
        op();
        t_op.push_back(Now() - t0);
      } else {
        size_t off = 0;
        for (const auto& s : src) {
          std::memcpy(dst->data() + off, s.data(), s.size());
          off += s.size();
        }
        t_cp.push_back(Now() - t0);
      }
    }
  }
  const double gb = static_cast<double>(bytes) / 1e9, top = Median(t_op), cp = Median(t_cp);
  std::string runs;
  char b[32];
  for (double t : t_op) {
    std::snprintf(b, sizeof b, " %.4f", t);
    runs += b;
  }
  std::printf("%-30s %6.2f GB/s  memcpy %6.2f GB/s  ratio %.2f  (runs s:%s)\n", name, gb / top, gb / cp, cp / top,
              runs.c_str());
  std::fflush(stdout);
}

void BenchGroup(int g, int m, size_t total, int reps) {
  std::unique_ptr<ErasureCode> code;
  Check(ErasureCode::Make(g - m, m, &code), "erasure code");
  const size_t len = total / g;
  const StripeLayout layout(g, m, len);
  const size_t bytes = len * g;
  std::vector<std::string> data(g), parity(g);
  std::vector<uint64_t> lengths(g, len);
  for (int i = 0; i < g; ++i) {
    data[i].reserve(layout.k() * layout.block_size());  // a rebuild grows lost members to whole blocks
    data[i].resize(len);
    Fill(&data[i], 1000003ULL * i);
  }
  std::string dst(bytes, '\1');
  std::vector<std::string_view> views(data.begin(), data.end());
  Check(revive::storage::EncodeGroup(*code, layout, views, &parity), "encode");  // touches the parity too
  const char* kind = m == 1 ? "xor" : "rs";
  char name[64];
  std::snprintf(name, sizeof name, "encode %s g=%d m=%d", kind, g, m);
  Measure(name, bytes, reps, [&] { Check(revive::storage::EncodeGroup(*code, layout, views, &parity), "encode"); },
          data, &dst);

  // Lose members 0..m-1. Their old bytes stay in place between runs: the rebuild never reads a lost
  // member and overwrites every byte of it, so they cannot help it.
  const std::vector<std::string> want_data(data.begin(), data.begin() + m), want_parity(parity.begin(), parity.begin() + m);
  std::vector<bool> present(g, true);
  for (int i = 0; i < m; ++i) present[i] = false;
  std::snprintf(name, sizeof name, "rebuild %d lost %s g=%d m=%d", m, kind, g, m);
  Measure(name, bytes, reps,
          [&] {
            Check(revive::storage::RebuildGroup(*code, layout, &data, lengths, &parity, present), "rebuild");
          },
          data, &dst);
  for (int i = 0; i < m; ++i)
    if (data[i] != want_data[i] || parity[i] != want_parity[i]) {
      std::fprintf(stderr, "ec_bench: member %d rebuilt wrong\n", i);
      std::exit(1);
    }
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 256;
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mib" && i + 1 < argc) {
      mib = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: ec_bench [--mib 256] [--reps 5]\n");
      return 2;
    }
  }
  if (mib == 0 || reps < 1) {
    std::fprintf(stderr, "ec_bench: --mib and --reps must be positive\n");
    return 2;
  }
  std::printf("ec_bench: %zu MiB of data per group, median of %d runs (GB = 1e9 bytes; figures are group data "
              "bytes per second)\n", mib, reps);
  BenchGroup(4, 1, mib << 20, reps);
  BenchGroup(6, 2, mib << 20, reps);
  return 0;
}
