#include "launch/user_record.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

namespace revive::launch {
namespace {

std::string RecordPath(const std::string& dir, unsigned port) { return dir + "/port-" + std::to_string(port); }

// Ours, a directory, and nobody else may write or read it.
Status CheckPrivateDir(const std::string& dir) {
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) return Status::FromErrno(dir, errno);
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(dir + ": not a directory");
  if (st.st_uid != getuid())
    return Status::InvalidArgument(dir + ": owned by uid " + std::to_string(st.st_uid) + ", not by this user");
  if (st.st_mode & 077) return Status::InvalidArgument(dir + ": other users have access (mode must be 0700)");
  return Status::OK();
}

}  // namespace

Status UserRecordDir(std::string* dir) {
  const char* x = getenv("XDG_RUNTIME_DIR");
  struct stat st;
  if (x != nullptr && *x == '/' && stat(x, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid())
    *dir = std::string(x) + "/revive";
  else
    *dir = "/tmp/revive-" + std::to_string(getuid());
  if (mkdir(dir->c_str(), 0700) != 0 && errno != EEXIST) return Status::FromErrno(*dir, errno);
  return CheckPrivateDir(*dir);
}

void WriteUserRecord(unsigned port, const std::string& ckpt_dir) {
  std::string dir;
  if (!UserRecordDir(&dir).ok()) return;
  const std::string path = RecordPath(dir, port), tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return;
    f << ckpt_dir << "\n" << getpid() << "\n";
    if (!f) return;
  }
  (void)!rename(tmp.c_str(), path.c_str());
}

void RemoveUserRecord(unsigned port, const std::string& ckpt_dir) {
  std::string dir;
  if (!UserRecordDir(&dir).ok()) return;
  // Only our own record: a later coordinator on the same port may have replaced it.
  std::ifstream f(RecordPath(dir, port));
  std::string recorded;
  if (std::getline(f, recorded) && recorded == ckpt_dir) (void)!unlink(RecordPath(dir, port).c_str());
}

std::string LookupUserRecord(unsigned port, std::string* why) {
  std::string dir;
  Status s = UserRecordDir(&dir);
  if (!s.ok()) {
    *why = "the per-user record directory is unusable: " + s.ToString();
    return "";
  }
  std::ifstream f(RecordPath(dir, port));
  std::string ckpt_dir;
  if (!f || !std::getline(f, ckpt_dir) || ckpt_dir.empty() || ckpt_dir[0] != '/') {
    *why = "no computation of this user was started on port " + std::to_string(port) + " (no record in " + dir +
           ")";
    return "";
  }
  return ckpt_dir;
}

}  // namespace revive::launch
