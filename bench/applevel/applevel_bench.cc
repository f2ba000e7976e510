// applevel_bench: bandwidth of application-level checkpoints against the physical limit measured in the
// same run, and the cost of checkpointing the Lanczos example.
//
//   applevel_bench --dir D [--sizes-mib 64,1024] [--reps 5] [--lanczos-n 1000] [--lanczos-iters 200]
//                  [--every 20] [--call-overhead 1]
//
// Write: time until the version is durable and published (sync: write(); async: update_and_write() +
// wait()) vs write(2)+fsync(2) of the same bytes into the same directory, both rewriting one file in place
// (O_TRUNC) and writing a new file while the previous one exists. For async modes the time the
// application is blocked (update_and_write() returning) is printed too. Read: restart_if_needed() of a
// fresh Checkpoint vs read(2) of that checkpoint's own data file just before and after, each read right
// after an eviction (fdatasync + posix_fadvise(DONTNEED); root-only drop_caches is not used). Medians of --reps, and every repetition's time.
// Call overhead: ns per update_and_write that does not write, without and with REVIVE_CP_INTERVAL +
// REVIVE_HEARTBEAT_DIR.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "config.h"
#include "raw_io.h"
#include "revive/checkpoint.hpp"
#include "run.h"

namespace fs = std::filesystem;

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string List(const std::vector<double>& v) {  // the spread behind a median
  std::string out;
  char b[32];
  for (double x : v) {
    std::snprintf(b, sizeof b, "%s%.3f", out.empty() ? "" : " ", x);
    out += b;
  }
  return out;
}

// <cdir>/bench/v-<newest>/data
std::string NewestDataFile(const fs::path& cdir) {
  uint64_t best = 0;
  for (const auto& e : fs::directory_iterator(cdir / "bench")) {
    const std::string n = e.path().filename().string();
    if (n.rfind("v-", 0) == 0 && fs::exists(e.path() / "MANIFEST")) best = std::max<uint64_t>(best, std::stoull(n.substr(2)));
  }
  return (cdir / "bench" / ("v-" + std::to_string(best)) / "data").string();
}

void EvictTree(const fs::path& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) bench::Evict(e.path().string());
}

revive::Options Opts(const std::string& dir, const std::string& mode) {
  revive::Options o;
  o.base_path = dir;
  o.keep = 1;
  o.async = mode != "sync";
  o.zero_copy = mode == "zero";
  return o;
}

struct WriteTimes {
  double total, blocked;
};

WriteTimes TimedWrite(revive::Checkpoint& cp, const std::string& mode, int64_t it) {
  const double t0 = bench::Now();
  if (mode == "sync") {
    cp.write(it);
    const double t = bench::Now() - t0;
    return {t, t};
  }
  cp.update_and_write(it, 1);
  const double t1 = bench::Now();
  cp.wait();
  return {bench::Now() - t0, t1 - t0};
}

void BenchSize(const std::string& dir, size_t mib, int reps) {
  const size_t bytes = mib << 20;
  std::vector<char> buf(bytes);
  for (size_t i = 0; i < bytes; i += 8) {  // incompressible-looking content
    uint64_t z = i * 0x9e3779b97f4a7c15ULL;
    z ^= z >> 29;
    std::memcpy(&buf[i], &z, std::min<size_t>(8, bytes - i));
  }
  std::vector<char> back(bytes);
  const std::string raw = dir + "/raw.bin";
  int raw_seq = 0;  // raw-new-<n>.bin: each repetition writes a new file and then deletes the previous
  for (const std::string mode : {"sync", "copy", "zero"}) {
    std::vector<double> raw_w, rawn_w, ck_w, ck_block, raw_r, ck_r;
    const std::string cdir = dir + "/ckpt-" + mode;
    fs::remove_all(cdir);
    // One checkpoint object writes every repetition, as an application would (its async copy buffers are
    // reused from the second version on); the first write is a warm-up and is not counted.
    revive::Checkpoint cp("bench", Opts(cdir, mode));
    cp.add("data", buf.data(), buf.size());
    cp.commit();
    TimedWrite(cp, mode, 0);
    for (int r = 0; r < reps; ++r) {
      // Rotate the order so no side always gets the warmer device. Two raw baselines: "rewrite" truncates
      // and rewrites the same file (so it recycles that file's page-cache pages); "new file" writes a new
      // file while the previous one still exists and deletes the previous one afterwards (not timed) --
      // what a checkpoint has to do, since the previous version must survive until the new one is durable.
      double tr = -1, tn = -1;
      WriteTimes tw{};
      for (int k = 0; k < 3; ++k) {
        switch ((k + r) % 3) {
          case 0: tr = bench::RawWriteFsync(raw, buf.data(), bytes); break;
          case 1: {
            const std::string cur = dir + "/raw-new-" + std::to_string(++raw_seq) + ".bin";
            tn = bench::RawWriteFsync(cur, buf.data(), bytes);
            bench::Evict(cur);  // not timed: leaves it as uncached as a checkpoint file (see the read below)
            fs::remove(dir + "/raw-new-" + std::to_string(raw_seq - 1) + ".bin");
            break;
          }
          default: tw = TimedWrite(cp, mode, r + 1);
        }
      }
      raw_w.push_back(tr);
      rawn_w.push_back(tn);
      ck_w.push_back(tw.total);
      ck_block.push_back(tw.blocked);
      // Read the raw file whose pages left the cache right after it was written, as the checkpoint's did
      // while it was written: reading a file evicted just before would reuse the pages that eviction freed,
      // which are faster to fill on this VM than pages freed seconds earlier (see docs/performance.md).
      // Read: the raw figure is read(2) of the checkpoint's own data file (same bytes, same place on the
      // disk), timed just before and just after the restart, and each of the three reads starts right
      // after that one file was evicted. On this VM the cost of a read depends on where its page-cache
      // pages come from (pages freed by an eviction just before are cheap to refill, others cost a host
      // fault each), so all three get the same history; the first, untimed read absorbs the rest.
      const std::string data_file = NewestDataFile(cdir);
      bench::RawRead(data_file, back.data(), bytes);
      bench::Evict(data_file);
      const double before = bench::RawRead(data_file, back.data(), bytes);
      bench::Evict(data_file);
      EvictTree(cdir);
      std::fill(back.begin(), back.end(), 0);  // so the check below sees what the restart read
      {
        revive::Checkpoint reader("bench", Opts(cdir, "sync"));
        reader.add("data", back.data(), back.size());
        reader.commit();
        const double t0 = bench::Now();
        if (!reader.restart_if_needed()) std::fprintf(stderr, "bench: restart found nothing in %s\n", cdir.c_str());
        ck_r.push_back(bench::Now() - t0);
      }
      if (back != buf) std::fprintf(stderr, "bench: restart read different bytes!\n");
      bench::Evict(data_file);
      const double after = bench::RawRead(data_file, back.data(), bytes);
      raw_r.push_back((before + after) / 2);
    }
    const double mb = static_cast<double>(bytes) / 1e6;
    const double rw = Median(raw_w), rn = Median(rawn_w), cw = Median(ck_w), rr = Median(raw_r), cr = Median(ck_r);
    // The disk is shared: besides the ratio of the medians, the median of the ratios of each repetition's
    // raw and checkpoint runs, which were measured back to back and so saw the same background load.
    std::vector<double> wr, rd;
    for (int r = 0; r < reps; ++r) {
      wr.push_back(raw_w[r] / ck_w[r]);
      rd.push_back(raw_r[r] / ck_r[r]);
    }
    std::printf("%5zu MiB %-4s write: ckpt %7.1f MB/s  raw write+fsync %7.1f MB/s  ratio %.3f (paired %.3f)  "
                "[raw new file %7.1f MB/s, ratio %.3f]  app blocked %.4f s of %.4f s\n",
                mib, mode.c_str(), mb / cw, mb / rw, rw / cw, Median(wr), mb / rn, rn / cw, Median(ck_block), cw);
    std::printf("%5zu MiB %-4s write times s: ckpt %s | raw %s | raw new file %s\n", mib, mode.c_str(),
                List(ck_w).c_str(), List(raw_w).c_str(), List(rawn_w).c_str());
    std::printf("%5zu MiB %-4s read:  ckpt %7.1f MB/s  raw read %7.1f MB/s  ratio %.3f (paired %.3f)  "
                "after fdatasync+fadvise(DONTNEED)\n",
                mib, mode.c_str(), mb / cr, mb / rr, rr / cr, Median(rd));
    std::fflush(stdout);
    fs::remove_all(cdir);
  }
  fs::remove(raw);
  fs::remove(dir + "/raw-new-" + std::to_string(raw_seq) + ".bin");
}

void BenchLanczos(const std::string& dir, int n, int iters, int every, int reps) {
  const lanczos::Lattice L = lanczos::Lattice::Block(n, n, 0, 1, 1.0, 1);
  const double state_mb = 2.0 * static_cast<double>(L.local_rows()) * 8 / 1e6;
  std::printf("lanczos %dx%d, %d iterations, checkpoint (%.1f MB) every %d iterations, %d reps:\n", n, n,
              iters, state_mb, every, reps);
  std::vector<std::string> modes = {"none", "off", "copy", "zero"};
  std::vector<std::vector<double>> t(modes.size()), in_cp(modes.size()), fin(modes.size());
  for (int r = 0; r < reps; ++r) {
    for (size_t m = 0; m < modes.size(); ++m) {  // interleaved, so drift hits every mode alike
      lanczos::Config c;
      c.nx = c.ny = n;
      c.iters = iters;
      c.every = modes[m] == "none" ? 0 : every;
      c.async = modes[m] == "none" ? "off" : modes[m];
      c.quiet = true;
      c.fresh = true;
      c.dir = dir + "/lanczos";
      revive::Checkpoint cp("lanczos", lanczos::CheckpointOptions(c));
      const lanczos::RunResult res = lanczos::Run(c, L, lanczos::Parallel{}, cp, false);
      t[m].push_back(res.seconds);
      in_cp[m].push_back(res.in_checkpoint);
      fin[m].push_back(res.final_wait);
    }
  }
  const double base = Median(t[0]);
  for (size_t m = 0; m < modes.size(); ++m) {
    const double med = Median(t[m]);
    // Also the time inside checkpoint calls (the application's direct cost; robust to the scheduling
    // noise of a loaded machine, but blind to a writer thread slowing the solver from another core).
    const double cpt = Median(in_cp[m]);
    std::printf("  %-18s %.3f s  overhead %+.2f%%  in checkpoint calls %.3f s (%.2f%% of no-checkpoint time; "
                "final wait %.3f s)  loop times: %s\n",
                m == 0 ? "no checkpoints" : ("ckpt async=" + modes[m]).c_str(), med, 100.0 * (med - base) / base,
                cpt, 100.0 * cpt / base, Median(fin[m]), List(t[m]).c_str());
  }
  fs::remove_all(dir + "/lanczos");
}

// ns per update_and_write call that does not write (the call a program makes every iteration): plain
// (`every` rule), with REVIVE_CP_INTERVAL (its test), with REVIVE_HEARTBEAT_DIR (a coarse clock read; the
// file is touched once per second), and with both. The bootstrap `every` is never reached, so no call
// writes. Modes interleaved, median of `reps`; ratios to plain.
void BenchCallOverhead(const std::string& dir, int reps) {
  const int64_t calls = 20000000;
  const char* names[] = {"plain", "interval", "heartbeat", "interval+heartbeat"};
  std::vector<std::vector<double>> ns(4);
  std::vector<double> data(16, 1.0);
  for (int r = 0; r < reps; ++r) {
    for (int m = 0; m < 4; ++m) {
      revive::Options o;
      o.base_path = dir + "/calls";
      if (m & 1) o.interval = 60;
      if (m & 2) o.heartbeat_dir = dir + "/calls-hb";
      revive::Checkpoint cp("calls", o);
      cp.add("d", data.data(), data.size());
      cp.commit();
      const auto t0 = std::chrono::steady_clock::now();
      int64_t wrote = 0;
      for (int64_t it = 1; it <= calls; ++it) wrote += cp.update_and_write(it, int64_t{1} << 40);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (wrote) throw std::runtime_error("call overhead: a call wrote");
      ns[m].push_back(s * 1e9 / static_cast<double>(calls));
    }
  }
  std::printf("update_and_write without writing, %lld calls x %d reps (ns/call, median; ratio to plain):\n",
              static_cast<long long>(calls), reps);
  for (int m = 0; m < 4; ++m)
    std::printf("  %-19s %6.2f ns  ratio %.2f  reps: %s\n", names[m], Median(ns[m]), Median(ns[m]) / Median(ns[0]),
                List(ns[m]).c_str());
  std::fflush(stdout);
  fs::remove_all(dir + "/calls");
  fs::remove_all(dir + "/calls-hb");
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, sizes = "64,1024";
  int reps = 5, n = 1000, iters = 200, every = 20;
  CLI::App app{"application-level checkpoint benchmark"};
  app.add_option("--dir", dir, "directory for checkpoints and raw files")->required();
  app.add_option("--sizes-mib", sizes, "checkpoint sizes per process, MiB, comma separated");
  app.add_option("--reps", reps, "repetitions (the median is printed)")->check(CLI::PositiveNumber);
  app.add_option("--lanczos-n", n, "Lanczos lattice side (0 = skip)");
  app.add_option("--lanczos-iters", iters, "Lanczos iterations");
  app.add_option("--every", every, "Lanczos checkpoint frequency")->check(CLI::PositiveNumber);
  bool calls = true;
  app.add_option("--call-overhead", calls, "measure ns per non-writing update_and_write, plain vs interval + heartbeat");
  CLI11_PARSE(app, argc, argv);
  try {
    fs::create_directories(dir);
    for (size_t pos = 0; pos < sizes.size();) {
      size_t comma = sizes.find(',', pos);
      if (comma == std::string::npos) comma = sizes.size();
      const size_t mib = std::stoul(sizes.substr(pos, comma - pos));
      if (mib > 0) BenchSize(dir, mib, reps);
      pos = comma + 1;
    }
    if (calls) BenchCallOverhead(dir, reps);
    if (n > 0) BenchLanczos(dir, n, iters, every, reps);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "applevel_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
