#include "coord/tlevels.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <tuple>

#include <xxhash.h>

#include "applevel/levels.h"
#include "coord/log.h"
#include "coord/manifest.h"
#include "core/env.h"
#include "storage/placement.h"

namespace revive::coord {

unsigned TLevelsConfig::LevelsFor(uint64_t g) const {
  if (spec.empty()) return 0;
  applevel::LevelPolicy p;
  if (!applevel::LevelPolicy::Parse(spec, &p).ok()) return 0;
  return p.LevelsFor(g);
}

unsigned TLevelsConfig::AnyLevels() const {
  applevel::LevelPolicy p;
  if (spec.empty() || !applevel::LevelPolicy::Parse(spec, &p).ok()) return 0;
  unsigned l = 0;
  for (const auto& r : p.rules) l |= r.levels;
  return l;
}

Status LoadTLevelsConfig(TLevelsConfig* out) {
  *out = TLevelsConfig();
  const char* spec = getenv("REVIVE_LEVELS");
  const char* root = getenv("REVIVE_LOCAL_PATH");
  out->local_root = root != nullptr && *root ? root : "/dev/shm/revive-" + std::to_string(getuid());
  if (spec == nullptr || *spec == '\0') return Status::OK();
  applevel::LevelPolicy p;
  Status s = applevel::LevelPolicy::Parse(spec, &p);
  if (!s.ok()) return s;
  for (auto [name, field, lo, hi] : {std::tuple{"REVIVE_GROUP_SIZE", &out->group_size, 2, 255},
                                     std::tuple{"REVIVE_PARITY", &out->parity, 1, 32},
                                     std::tuple{"REVIVE_KEEP", &out->keep, 1, 1000000}}) {
    const char* v = getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    long n = strtol(v, &end, 10);
    if (*end != '\0' || n < lo || n > hi)
      return Status::InvalidArgument(std::string(name) + "=" + v + ": not a number in " + std::to_string(lo) + ".." +
                                     std::to_string(hi));
    *field = (int)n;
  }
  out->spec = spec;
  return Status::OK();
}

std::string TLevelNames(unsigned levels) { return applevel::LevelPolicy::Names(levels); }

unsigned ParseTLevelNames(const std::string& names) {
  unsigned l = 0;
  for (size_t i = 0; i + 1 < names.size(); i++)
    if (names[i] == 'L' && names[i + 1] >= '1' && names[i + 1] <= '4') l |= 1u << (names[i + 1] - '1');
  return l;
}

std::string Hex64(uint64_t v) {
  char b[17];
  snprintf(b, sizeof b, "%016llx", (unsigned long long)v);
  return b;
}

bool ParseHex64(const std::string& s, uint64_t* v) {
  if (s.empty() || s.size() > 16 || s.find_first_not_of("0123456789abcdef") != std::string::npos) return false;
  *v = strtoull(s.c_str(), nullptr, 16);
  return true;
}

std::string TJobId(const std::string& ckpt_dir) { return "t-" + Hex64(XXH3_64bits(ckpt_dir.data(), ckpt_dir.size())); }

std::string THostJobDir(const std::string& root, const std::string& host, const std::string& job) {
  return root + "/" + host + "/" + job;
}

std::string TLocalGenDir(const std::string& root, const std::string& host, const std::string& job, uint64_t g) {
  return THostJobDir(root, host, job) + "/ckpt-" + std::to_string(g);
}

std::string TPartnerDir(const std::string& root, const std::string& holder, const std::string& job, uint64_t g,
                        const std::string& owner) {
  return TLocalGenDir(root, holder, job, g) + "/partner-" + owner;
}

Status THostPartners(const std::vector<std::string>& hosts, std::vector<size_t>* partner) {
  std::vector<int> p;
  Status s = storage::Partners(hosts, 0, &p);
  if (!s.ok()) return s;
  partner->assign(p.begin(), p.end());
  return Status::OK();
}

Status THostGroups(const std::vector<std::string>& hosts, int group_size, int parity,
                   std::vector<std::vector<std::string>>* groups) {
  std::vector<std::vector<int>> g;
  Status s = storage::FormGroups(hosts, 0, group_size, parity + 1, &g);
  if (!s.ok()) return s;
  groups->clear();
  for (const auto& grp : g) {
    groups->emplace_back();
    for (int i : grp) groups->back().push_back(hosts[(size_t)i]);
  }
  return Status::OK();
}

Status FileXxh3(const std::string& path, uint64_t* h) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(path, errno);
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      close(fd);
      XXH3_freeState(st);
      return Status::FromErrno("read " + path, e);
    }
    if (n == 0) break;
    XXH3_64bits_update(st, buf.data(), (size_t)n);
  }
  close(fd);
  *h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return Status::OK();
}

Status TCopyDurable(const std::string& src, const std::string& dst_dir) {
  Status s = CreateDirs(Env::Default(), dst_dir);
  if (!s.ok()) return s;
  const std::string base = src.substr(src.find_last_of('/') + 1);
  const std::string tmp = dst_dir + "/." + base + ".tmp", dst = dst_dir + "/" + base;
  int in = open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return Status::FromErrno(src, errno);
  int out = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0) {
    int e = errno;
    close(in);
    return Status::FromErrno(tmp, e);
  }
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) s = Status::FromErrno("read " + src, errno);
    if (n <= 0) break;
    for (ssize_t off = 0; off < n && s.ok();) {
      ssize_t w = write(out, buf.data() + off, (size_t)(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) s = Status::FromErrno("write " + tmp, w < 0 ? errno : ENOSPC);
      else off += w;
    }
    if (!s.ok()) break;
  }
  if (s.ok() && fsync(out) != 0) s = Status::FromErrno("fsync " + tmp, errno);
  close(in);
  close(out);
  if (s.ok() && rename(tmp.c_str(), dst.c_str()) != 0) s = Status::FromErrno("rename " + tmp, errno);
  if (!s.ok()) {
    unlink(tmp.c_str());
    return s;
  }
  int d = open(dst_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d >= 0) {
    fsync(d);
    close(d);
  }
  return Status::OK();
}

std::vector<std::string> TSplitList(const std::string& list) {
  std::vector<std::string> out;
  for (size_t pos = 0; !list.empty() && pos <= list.size();) {
    size_t c = list.find(',', pos);
    if (c == std::string::npos) c = list.size();
    out.push_back(list.substr(pos, c - pos));
    pos = c + 1;
  }
  return out;
}

void TPruneLocal(const std::string& host_job_dir, const std::string& ckpt_dir, size_t keep) {
  DIR* d = opendir(host_job_dir.c_str());
  if (d == nullptr) return;
  std::vector<uint64_t> gens;
  while (struct dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind("ckpt-", 0) != 0 || n.size() == 5 || n.find_first_not_of("0123456789", 5) != std::string::npos) continue;
    gens.push_back(strtoull(n.c_str() + 5, nullptr, 10));
  }
  closedir(d);
  std::sort(gens.rbegin(), gens.rend());
  size_t complete = 0;
  for (uint64_t g : gens) {
    struct stat st;
    bool done = stat((ckpt_dir + "/ckpt-" + std::to_string(g) + "/MANIFEST.json").c_str(), &st) == 0;
    if (complete < keep) {  // newer than the keep-th complete one: kept (complete or in progress)
      if (done) complete++;
      continue;
    }
    std::error_code ec;
    std::filesystem::remove_all(host_job_dir + "/ckpt-" + std::to_string(g), ec);
  }
}

void TPruneGlobal(const std::string& ckpt_dir, size_t keep) {
  Env* env = Env::Default();
  std::vector<uint64_t> gens;  // newest first
  if (keep == 0 || !ListCompleteGenerations(env, ckpt_dir, &gens).ok()) return;
  struct Gen {
    uint64_t g;
    Manifest m;
    bool l4 = true;  // every image in ckpt-<G>/
  };
  std::vector<Gen> all;
  for (uint64_t g : gens) {
    Gen x{g, {}};
    if (!ReadManifest(env, GenerationDir(ckpt_dir, g) + "/MANIFEST.json", &x.m).ok()) continue;
    const unsigned lv = ParseTLevelNames(x.m.levels);
    x.l4 = !x.m.procs.empty() && (!(lv & kTL1) || (lv & kTL4));
    for (const auto& p : x.m.procs) {
      struct stat st;
      if (x.l4 && stat((GenerationDir(ckpt_dir, g) + "/" + p.image).c_str(), &st) != 0) x.l4 = false;
    }
    all.push_back(std::move(x));
  }
  size_t l4_newer = 0, local_newer = 0;  // complete generations newer than the one looked at, per level
  for (const Gen& x : all) {              // newest first
    const unsigned lv = ParseTLevelNames(x.m.levels);
    const bool leveled = lv & kTL1;
    const bool l4_old = l4_newer >= keep, local_old = local_newer >= keep;
    if (x.l4) l4_newer++;
    if (leveled) local_newer++;
    if (!leveled) continue;
    const std::string dir = GenerationDir(ckpt_dir, x.g);
    // No level restores it any more. An L4 copy still under way (or failed) is waited for until `keep`
    // newer ones are complete: it may become the newest complete L4 generation.
    if (local_old && (l4_old || !(lv & kTL4))) {
      unlink((dir + "/MANIFEST.json").c_str());  // first: a removal cut short leaves no generation to try
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    } else if (l4_old) {  // its local pieces are still kept; its L4 copy (complete or not) is superseded
      for (const auto& p : x.m.procs) {
        unlink((dir + "/" + p.image).c_str());
        unlink((dir + "/." + p.image + ".tmp").c_str());
      }
    }
  }
}

void TFlushAndPrune(unsigned levels, uint64_t gen, const std::vector<std::string>& images,
                    const std::vector<std::string>& host_job_dirs, const std::string& ckpt_dir, size_t keep) {
  if (levels & kTL4)
    for (const std::string& src : images)
      if (Status s = TCopyDurable(src, GenerationDir(ckpt_dir, gen)); !s.ok())
        Log(1, "generation %llu: L4 copy: %s", (unsigned long long)gen, s.ToString().c_str());
  for (const std::string& hj : host_job_dirs) TPruneLocal(hj, ckpt_dir, keep);
  TPruneGlobal(ckpt_dir, keep);
}

}  // namespace revive::coord
