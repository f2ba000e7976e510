// Pre-images back at restart (preimages.h). Every record is verified before any file is touched, so a
// damaged pre-image stops the restart with nothing half-done; never a silently wrong file.
#include "cli/preimages.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include <xxhash.h>

#include "plugins/files/preimage_record.h"

namespace revive::cli {
namespace {

using plugins::PreRecord;

struct Pre {
  PreRecord r;
  std::string path, data;  // the file; its contents' file
};

std::string Err(int e) { return strerror(e); }

// Reads one record file; "" or the reason it is not a valid record.
std::string ReadRecord(const std::string& rec, const std::string& dir, Pre* p) {
  int fd = open(rec.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "cannot open it: " + Err(errno);
  char buf[sizeof(PreRecord) + 8192];
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  if (n < ssize_t(sizeof(PreRecord))) return "it is truncated";
  memcpy(&p->r, buf, sizeof p->r);
  if (memcmp(p->r.magic, plugins::kPreMagic, 4) != 0 || p->r.version != plugins::kPreVersion)
    return "it is not a pre-image record of this version";
  size_t len = sizeof(PreRecord) + p->r.path_len + p->r.data_len;
  if (p->r.path_len == 0 || p->r.data_len == 0 || size_t(n) != len) return "its length is wrong";
  PreRecord z = p->r;
  z.self_hash = 0;
  memcpy(buf, &z, sizeof z);
  if (XXH3_64bits(buf, len) != p->r.self_hash) return "its checksum does not match";
  p->path.assign(buf + sizeof(PreRecord), p->r.path_len);
  p->data.assign(buf + sizeof(PreRecord) + p->r.path_len, p->r.data_len);
  if (p->path[0] != '/' || p->data.find('/') != std::string::npos) return "it names a malformed path";
  p->data = dir + "/" + p->data;
  return "";
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
  std::vector<Pre> pres;
};
void PreimagesDeleter::operator()(Preimages* p) const { delete p; }

Status CheckPreimages(const std::string& gen_dir, PreimageList* out) {
  out->reset(new Preimages);
  const std::string dir = gen_dir + "/" + plugins::kPreDir;
  DIR* d = opendir(dir.c_str());
  if (!d) return errno == ENOENT ? Status::OK() : Status::FromErrno(dir, errno);
  std::vector<std::string> names;
  while (struct dirent* e = readdir(d)) {
    std::string n = e->d_name;
    // Records are "<dev>-<ino>"; temporaries and contents have a '.' in their names.
    if (n.find('.') == std::string::npos && n.find('-') != std::string::npos) names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  std::vector<Pre>& pres = (*out)->pres;
  pres.resize(names.size());
  for (size_t i = 0; i < names.size(); i++) {
    const std::string rec = dir + "/" + names[i];
    std::string why = ReadRecord(rec, dir, &pres[i]);
    if (!why.empty()) return Status::Corruption("pre-image record '" + rec + "' is damaged (" + why + "); the restart stops");
    why = CheckData(pres[i]);
    if (!why.empty())
      return Status::Corruption("pre-image of '" + pres[i].path + "' is damaged: " + why + " (record '" + rec +
                                "'); the restart stops rather than put back a wrong file");
  }
  return Status::OK();
}

Status RestorePreimages(const Preimages& list, size_t* restored) {
  *restored = 0;
  for (const Pre& p : list.pres) {
    Status s = PutBack(p);
    if (!s.ok()) return s;
    ++*restored;
  }
  return Status::OK();
}

}  // namespace revive::cli
