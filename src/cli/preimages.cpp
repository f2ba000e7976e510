// Pre-images back at restart (preimages.h). Every record is verified before any file is touched, so a
// damaged pre-image stops the restart with nothing half-done; never a silently wrong file.
#include "cli/preimages.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <vector>

#include <xxhash.h>

#include "plugins/files/preimage_record.h"

namespace revive::cli {
namespace {

using plugins::PreRecord;

struct Pre {
  PreRecord r;
  std::string rec;               // the record file
  std::string path, data, host;  // the file; its contents' file ("" for a cut-back record); who made it
};

std::string Err(int e) { return strerror(e); }

// Reads one record file (version 1 or 2); "" or the reason it is not a valid record. p->path is set as
// soon as the lengths allow, so that even a damaged record's message can name its file.
std::string ReadRecord(const std::string& rec, const std::string& dir, Pre* p) {
  p->rec = rec;
  int fd = open(rec.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "cannot open it: " + Err(errno);
  char buf[sizeof(PreRecord) + 8192];
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  if (n < ssize_t(plugins::kPreV1Size)) return "it is truncated";
  p->r = PreRecord{};
  memcpy(&p->r, buf, plugins::kPreV1Size);
  if (memcmp(p->r.magic, plugins::kPreMagic, 4) != 0) return "it is not a pre-image record";
  const uint32_t v = p->r.version;
  if (v != 1 && v != plugins::kPreVersion)
    return "it is a pre-image record of version " + std::to_string(v) + ", which this revive does not read (it reads 1 and " +
           std::to_string(plugins::kPreVersion) + ")";
  const size_t hdr = v == 1 ? plugins::kPreV1Size : sizeof(PreRecord);
  if (size_t(n) < hdr) return "it is truncated";
  memcpy(&p->r, buf, hdr);
  if (v == 1) p->r.kind = plugins::kPreCopy;
  const size_t len = hdr + size_t(p->r.path_len) + p->r.data_len + p->r.host_len;
  if (p->r.path_len > 0 && hdr + size_t(p->r.path_len) <= size_t(n)) p->path.assign(buf + hdr, p->r.path_len);
  if (p->r.path_len == 0 || size_t(n) != len) return "its length is wrong";
  const bool cut = p->r.kind == plugins::kPreCut;
  if (p->r.kind > plugins::kPreCut) return "its kind " + std::to_string(p->r.kind) + " is unknown";
  if (cut != (p->r.data_len == 0)) return "its data file's name does not fit its kind";
  PreRecord z = p->r;
  z.self_hash = 0;
  memcpy(buf, &z, hdr);
  if (XXH3_64bits(buf, len) != p->r.self_hash) return "its checksum does not match";
  p->data.assign(buf + hdr + p->r.path_len, p->r.data_len);
  p->host.assign(buf + hdr + p->r.path_len + p->r.data_len, p->r.host_len);
  if (p->path[0] != '/' || p->data.find('/') != std::string::npos) return "it names a malformed path";
  if (!p->data.empty()) p->data = dir + "/" + p->data;
  return "";
}

// The name a record of p's file has: "<dev>-<ino>" (version 1), "<dev>-<ino>-<XXH3-64 of the host>"
// (version 2, files_pre.cpp record_name), before kPreCutSuffix for a cut-back record.
std::string NameOf(const Pre& p) {
  std::string n = std::to_string(p.r.dev) + "-" + std::to_string(p.r.ino);
  if (p.r.version >= 2) n += "-" + std::to_string(XXH3_64bits(p.host.data(), p.host.size()));
  return n;
}

// A cut-back record's file as it is now on this host: the same file (dev, inode, birth time) and at least
// as long as at G. "" or why it cannot be cut back.
// *gone: the file is not there at all.
std::string CheckCut(const Pre& p, bool* gone) {
  struct statx sx;
  *gone = false;
  if (statx(AT_FDCWD, p.path.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_BTIME, &sx) != 0) {
    *gone = errno == ENOENT;
    return "it cannot be examined: " + Err(errno);
  }
  const uint64_t dev = (uint64_t(sx.stx_dev_major) << 32) | sx.stx_dev_minor;
  const bool btime_differs = (p.r.btime_sec || p.r.btime_nsec) && (sx.stx_mask & STATX_BTIME) &&
                             (sx.stx_btime.tv_sec != p.r.btime_sec || sx.stx_btime.tv_nsec != p.r.btime_nsec);
  if (!S_ISREG(sx.stx_mode) || dev != p.r.dev || sx.stx_ino != p.r.ino || btime_differs)
    return "it is no longer the file the checkpoint saw (another file, or not a regular file, has its name)";
  if (sx.stx_size < p.r.size)
    return "it has " + std::to_string(sx.stx_size) + " bytes, fewer than the " + std::to_string(p.r.size) +
           " it had at the checkpoint (something not under revive changed it)";
  return "";
}

// Cuts p's file back to its size at G, in place, and puts its metadata back.
Status CutBack(const Pre& p) {
  int fd = open(p.path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  std::string why;
  if (fd < 0) why = "cannot open it: " + Err(errno);
  else if (fstat(fd, &st) != 0) why = "cannot examine it: " + Err(errno);
  else if (st.st_ino != p.r.ino || uint64_t(st.st_size) < p.r.size) why = "it changed since the restart checked it";
  else if (ftruncate(fd, off_t(p.r.size)) != 0) why = "truncating: " + Err(errno);
  if (why.empty()) {
    fchmod(fd, p.r.mode & 07777);
    if (geteuid() == 0) (void)!fchown(fd, p.r.uid, p.r.gid);
    struct timespec ts[2] = {{0, UTIME_OMIT}, {time_t(p.r.mtime_sec), long(p.r.mtime_nsec)}};
    futimens(fd, ts);
  }
  if (fd >= 0) close(fd);
  if (!why.empty())
    return Status::IOError("pre-image of '" + p.path + "' (record '" + p.rec + "'): cutting it back to " +
                           std::to_string(p.r.size) + " bytes: " + why);
  return Status::OK();
}

// The contents' file has the record's length and hash: "" or why not.
std::string CheckData(const Pre& p) {
  int fd = open(p.data.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "'" + p.data + "' cannot be opened: " + Err(errno);
  struct stat st;
  std::string why;
  if (fstat(fd, &st) != 0 || uint64_t(st.st_size) != p.r.size) {
    why = "'" + p.data + "' has " + std::to_string(st.st_size) + " bytes, not " + std::to_string(p.r.size);
  } else if (p.r.size) {
    void* m = mmap(nullptr, p.r.size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) why = "'" + p.data + "' cannot be read: " + Err(errno);
    else {
      if (XXH3_64bits(m, p.r.size) != p.r.data_hash) why = "'" + p.data + "' does not match its checksum";
      munmap(m, p.r.size);
    }
  }
  close(fd);
  return why;
}

void MakeParents(const std::string& path) {
  for (size_t k = path.find('/', 1); k != std::string::npos; k = path.find('/', k + 1))
    mkdir(path.substr(0, k).c_str(), 0755);  // a directory the stopped run removed; EEXIST otherwise
}

// Writes p's contents back at p.path, in place (the inode other names or a skeleton's descriptor share).
Status PutBack(const Pre& p) {
  int src = open(p.data.c_str(), O_RDONLY | O_CLOEXEC);
  if (src < 0) return Status::FromErrno(p.data, errno);
  MakeParents(p.path);
  int dst = open(p.path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, p.r.mode & 07777);
  std::string tmp;
  // A program running it (ETXTBSY), or a symlink the stopped run put in its place (ELOOP): a new inode
  // renamed over the name.
  if (dst < 0 && (errno == ETXTBSY || errno == ELOOP)) {
    tmp = p.path + ".revive-pre";
    dst = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, p.r.mode & 07777);
  }
  if (dst < 0) {
    int e = errno;
    close(src);
    return Status::FromErrno("pre-image of '" + p.path + "': cannot open the file", e);
  }
  std::vector<char> buf(1 << 20);
  off_t off = 0;
  std::string why;
  for (;;) {
    ssize_t n = read(src, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      why = "reading '" + p.data + "': " + Err(errno);
      break;
    }
    if (n == 0) break;
    if (pwrite(dst, buf.data(), size_t(n), off) != n) {
      why = "writing: " + Err(errno);
      break;
    }
    off += n;
  }
  if (why.empty() && ftruncate(dst, off_t(p.r.size)) != 0) why = "truncating: " + Err(errno);
  if (why.empty()) {
    fchmod(dst, p.r.mode & 07777);
    if (geteuid() == 0) (void)!fchown(dst, p.r.uid, p.r.gid);
    struct timespec ts[2] = {{0, UTIME_OMIT}, {time_t(p.r.mtime_sec), long(p.r.mtime_nsec)}};
    futimens(dst, ts);  // make compares mtimes: an object back as it was must look as old as it was
  }
  close(src);
  close(dst);
  if (why.empty() && !tmp.empty() && rename(tmp.c_str(), p.path.c_str()) != 0) why = "renaming: " + Err(errno);
  if (!why.empty()) return Status::IOError("pre-image of '" + p.path + "': " + why);
  return Status::OK();
}

}  // namespace

struct Preimages {
  std::vector<Pre> pres;  // those this restart puts back
};
void PreimagesDeleter::operator()(Preimages* p) const { delete p; }

Status CheckPreimages(const std::string& gen_dir, const PreimageFilter& f, PreimageList* out,
                      const std::function<bool(const std::string&)>& restored_by_images) {
  out->reset(new Preimages);
  const std::string dir = gen_dir + "/" + plugins::kPreDir;
  DIR* d = opendir(dir.c_str());
  if (!d) return errno == ENOENT ? Status::OK() : Status::FromErrno(dir, errno);
  std::vector<std::string> names;
  while (struct dirent* e = readdir(d)) {
    std::string n = e->d_name;
    // Records are "<dev>-<ino>[-<host>]" and "...+a"; temporaries and contents have a '.' in their names.
    if (n.find('.') == std::string::npos && n.find('-') != std::string::npos) names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  std::set<std::string> copies;  // "<dev>-<ino>" of the copy records: they supersede cut-back records
  std::vector<Pre> all(names.size());
  for (size_t i = 0; i < names.size(); i++) {
    const std::string rec = dir + "/" + names[i];
    std::string why = ReadRecord(rec, dir, &all[i]);
    if (!why.empty())
      return Status::Corruption("pre-image record '" + rec + "'" + (all[i].path.empty() ? "" : " of '" + all[i].path + "'") +
                                " is damaged or foreign (" + why + "); the restart stops");
    const bool cut = all[i].r.kind == plugins::kPreCut;
    const std::string want = NameOf(all[i]) + (cut ? plugins::kPreCutSuffix : "");
    if (names[i] != want)
      return Status::Corruption("pre-image record '" + rec + "' of '" + all[i].path + "' is damaged or foreign (it describes " +
                                want + "); the restart stops");
    if (!cut) copies.insert(names[i]);
  }
  std::vector<Pre>& pres = (*out)->pres;
  for (Pre& p : all) {
    if (p.r.kind == plugins::kPreCut && copies.count(NameOf(p))) continue;
    if (!f.all && (std::find(f.hosts.begin(), f.hosts.end(), p.host) != f.hosts.end()) == f.except) continue;
    bool gone = false;
    std::string why = p.r.kind == plugins::kPreCut ? (f.here ? CheckCut(p, &gone) : "") : CheckData(p);
    if (gone && restored_by_images && restored_by_images(p.path)) {
      fprintf(stderr,
              "revive restart: note: '%s' was removed since the checkpoint; the images write it back as it was "
              "then (its pre-image record '%s' is not needed)\n",
              p.path.c_str(), p.rec.c_str());
      continue;
    }
    if (!why.empty() && p.r.kind == plugins::kPreCut)
      return Status::Corruption("pre-image of '" + p.path + "' cannot be applied: " + why + " (record '" + p.rec +
                                "': cut it back to " + std::to_string(p.r.size) + " bytes); the restart stops");
    if (!why.empty())
      return Status::Corruption("pre-image of '" + p.path + "' is damaged: " + why + " (record '" + p.rec +
                                "'); the restart stops rather than put back a wrong file");
    pres.push_back(std::move(p));
  }
  return Status::OK();
}

Status ParsePreHosts(const std::string& spec, PreimageFilter* f) {
  if (spec.empty() || (spec[0] != '=' && spec[0] != '!'))
    return Status::InvalidArgument("--pre-hosts " + spec + ": expected =HOST or !HOST,HOST...");
  f->all = false;
  f->except = spec[0] == '!';
  f->hosts.clear();
  if (!f->except) {
    f->hosts.push_back(spec.substr(1));
    return Status::OK();
  }
  for (size_t i = 1; i < spec.size();) {
    size_t comma = spec.find(',', i);
    f->hosts.push_back(spec.substr(i, comma == std::string::npos ? std::string::npos : comma - i));
    if (comma == std::string::npos) break;
    i = comma + 1;
  }
  return Status::OK();
}

std::vector<std::string> PreHostsSpecs(const std::vector<std::string>& parts) {
  std::vector<std::string> out;
  for (size_t k = 0; k < parts.size(); k++) {
    if (k > 0) {
      out.push_back("=" + parts[k]);
      continue;
    }
    std::string others = "!";
    for (size_t j = 1; j < parts.size(); j++)
      if (parts[j] != parts[0]) others += (others.size() > 1 ? "," : "") + parts[j];
    out.push_back(others);
  }
  return out;
}

Status RestorePreimages(const Preimages& list, size_t* restored) {
  *restored = 0;
  for (const Pre& p : list.pres) {
    Status s = p.r.kind == plugins::kPreCut ? CutBack(p) : PutBack(p);
    if (!s.ok()) return s;
    ++*restored;
  }
  return Status::OK();
}

}  // namespace revive::cli
