#include "coord/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/env.h"

namespace revive::coord {
namespace {

Status CreateSecret(const std::string& path) {
  unsigned char bytes[kSecretBytes];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t r = getrandom(bytes + got, sizeof bytes - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::FromErrno("getrandom for " + path, errno);
    got += (size_t)r;
  }
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno("creating secret file " + tmp, errno);
  bool ok = write(fd, bytes, sizeof bytes) == (ssize_t)sizeof bytes && fsync(fd) == 0;
  int err = errno;
  close(fd);
  if (!ok) {
    unlink(tmp.c_str());
    return Status::FromErrno("writing secret file " + tmp, err);
  }
  // link() fails with EEXIST if someone else won the race: theirs is complete, use it.
  int r = link(tmp.c_str(), path.c_str());
  err = errno;
  unlink(tmp.c_str());
  if (r != 0 && err != EEXIST) return Status::FromErrno("creating secret file " + path, err);
  std::string dir = path.substr(0, path.find_last_of('/') + 1);
  return Env::Default()->SyncDir(dir.empty() ? "." : dir);
}

}  // namespace

std::string SecretPath(const std::string& ckpt_dir) {
  const char* f = getenv("REVIVE_SECRET_FILE");
  if (f != nullptr && *f != '\0') return f;
  return ckpt_dir + "/.revive-secret";
}

Status LoadOrCreateSecret(const std::string& path, std::string* secret) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return Status::FromErrno("secret file " + path, errno);
    Status s = CreateSecret(path);
    if (!s.ok()) return s;
    if (stat(path.c_str(), &st) != 0) return Status::FromErrno("secret file " + path, errno);
  }
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("secret file " + path + ": not a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    snprintf(mode, sizeof mode, "%04o", (unsigned)(st.st_mode & 07777));
    return Status::InvalidArgument("secret file " + path + ": mode " + mode +
                                   " lets others read it; chmod 600 it");
  }
  Status s = ReadFileToString(Env::Default(), path, secret);
  if (!s.ok()) return s;
  if (secret->empty()) return Status::InvalidArgument("secret file " + path + ": empty");
  if (secret->size() > 4096) return Status::InvalidArgument("secret file " + path + ": longer than 4096 bytes");
  return Status::OK();
}

}  // namespace revive::coord
