// `revive inspect`'s check of the files plugin's section (src/plugins/files/files_record.h): the files a
// restart writes back, and for a large file saved by blocks, every block it needs beside the image —
// present, of its length, with its XXH3-128. A block that is missing or damaged fails the restart of this
// image (files_blocks_restore.cpp), so inspect reports it first, naming the file, the block and the path,
// instead of saying "ok" for an image that cannot come back. The section is parsed here with bounds checks
// of its own: it comes from a file on disk, which may be damaged or foreign.
#include "cli/inspect_files.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include <xxhash.h>

#include "plugins/files/files_record.h"

namespace revive::cli {
namespace {

using plugins::BlockList;
using plugins::FileEntry;
using plugins::FileFormat;
using plugins::FileOrigin;

// Reads the section's payload front to back; any read past its end makes ok() false for good.
struct Reader {
  const uint8_t* p;
  uint64_t left;
  bool ok = true;
  bool bytes(void* out, uint64_t n) {
    if (!ok || n > left) return ok = false;
    memcpy(out, p, n);
    p += n;
    left -= n;
    return true;
  }
  bool skip(uint64_t n) {
    if (!ok || n > left) return ok = false;
    p += n;
    left -= n;
    return true;
  }
  bool str(std::string* s) {
    uint32_t n = 0;
    if (!bytes(&n, sizeof n) || n > left || n >= 4096) return ok = false;
    s->assign(reinterpret_cast<const char*>(p), n);
    return skip(n);
  }
};

const char* OriginName(uint32_t o) {
  switch (static_cast<FileOrigin>(o)) {
    case FileOrigin::kWritten:
    case FileOrigin::kWrittenId: return "written";
    case FileOrigin::kLocal:
    case FileOrigin::kLocalId: return "node-local";
    case FileOrigin::kScanned:
    case FileOrigin::kScannedId: return "node-local, created since launch";
    case FileOrigin::kListing: return "directory listing";
    default: return "?";
  }
}

std::string BlockHex(uint64_t lo, uint64_t hi) {
  char b[33];
  snprintf(b, sizeof b, "%016llx%016llx", (unsigned long long)hi, (unsigned long long)lo);
  return b;
}

// "" if the block file at `path` holds `len` bytes hashing to (lo, hi); else what is wrong with it.
std::string CheckBlock(const std::string& path, uint64_t len, uint64_t lo, uint64_t hi, std::vector<char>& buf) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? "is missing" : std::string("cannot be opened: ") + strerror(errno);
  struct stat st;
  if (fstat(fd, &st) != 0 || uint64_t(st.st_size) != len) {
    std::string why = "holds " + std::to_string(uint64_t(st.st_size)) + " bytes, not " + std::to_string(len);
    close(fd);
    return why;
  }
  if (buf.size() < len) buf.resize(len);
  uint64_t got = 0;
  while (got < len) {
    ssize_t r = read(fd, buf.data() + got, len - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      std::string why = r < 0 ? std::string("cannot be read: ") + strerror(errno) : "ends early";
      close(fd);
      return why;
    }
    got += uint64_t(r);
  }
  close(fd);
  XXH128_hash_t x = XXH3_128bits(buf.data(), len);
  if (x.low64 != lo || x.high64 != hi) return "is damaged (its XXH3-128 differs)";
  return "";
}

}  // namespace

nlohmann::json InspectFiles(const image::View& v, const std::string& image_path, uint64_t* bad,
                            std::string* first_bad, bool check_blocks) {
  using nlohmann::json;
  json files = json::array();
  const image::SectionEntry* e = image::find_section(v, image::kKindPlugin, "files");
  if (e == nullptr) return files;
  auto note = [&](const std::string& why) {
    if ((*bad)++ == 0) *first_bad = why;
  };
  if (e->version < plugins::kFilesOldestVersion || e->version > plugins::kFilesVersion) {
    note(image_path + ": files section version " + std::to_string(e->version) + " is not one this revive reads (" +
         std::to_string(plugins::kFilesOldestVersion) + ".." + std::to_string(plugins::kFilesVersion) + ")");
    return files;
  }
  const std::string dir = image_path.find('/') == std::string::npos
                              ? std::string(".")
                              : image_path.substr(0, image_path.rfind('/'));
  Reader in{v.base + e->offset, e->length};
  char tag[4];
  if (!in.bytes(tag, sizeof tag) || memcmp(tag, plugins::kFilesTag, sizeof tag) != 0) {
    note(image_path + ": files section: bad tag");
    return files;
  }
  std::vector<char> buf;
  for (uint32_t k = 0;; ++k) {
    FileEntry fe;
    if (!in.bytes(&fe, sizeof fe)) {
      note(image_path + ": files section: truncated at entry " + std::to_string(k));
      break;
    }
    if (fe.origin == uint32_t(FileOrigin::kEnd)) break;
    std::string path;
    if (!in.str(&path) || fe.origin > plugins::kMaxFileOrigin || fe.size < 0 ||
        fe.format > uint32_t(FileFormat::kBlocks)) {
      note(image_path + ": files section: malformed entry " + std::to_string(k));
      break;
    }
    if (plugins::file_origin_has_id(fe.origin) && !in.skip(sizeof(plugins::FileIdentity))) {
      note(image_path + ": files section: identity of '" + path + "' cut short");
      break;
    }
    json f = {{"path", path}, {"origin", OriginName(fe.origin)}, {"size", fe.size}};
    if (fe.format == uint32_t(FileFormat::kInline)) {
      f["stored"] = "in the image";
      if (!in.skip(uint64_t(fe.size))) {
        note(image_path + ": files section: contents of '" + path + "' cut short");
        files.push_back(f);
        break;
      }
      files.push_back(f);
      continue;
    }
    BlockList bl;
    const uint64_t want = fe.size == 0 ? 0 : (uint64_t(fe.size) + plugins::kBlockBytes - 1) >> plugins::kBlockLog2;
    if (!in.bytes(&bl, sizeof bl) || bl.block_log2 != plugins::kBlockLog2 || bl.count != want) {
      note(image_path + ": files section: bad block list for '" + path + "'");
      break;
    }
    uint64_t bad_blocks = 0;
    std::string first;
    for (uint32_t b = 0; b < bl.count; ++b) {
      uint64_t h[2];
      if (!in.bytes(h, sizeof h)) {
        note(image_path + ": files section: block hashes of '" + path + "' cut short");
        break;
      }
      const uint64_t off = uint64_t(b) << plugins::kBlockLog2;
      const uint64_t len = std::min<uint64_t>(plugins::kBlockBytes, uint64_t(fe.size) - off);
      if (!check_blocks) continue;
      const std::string block = dir + "/" + plugins::kBlockPrefix + BlockHex(h[0], h[1]);
      std::string why = CheckBlock(block, len, h[0], h[1], buf);
      if (!why.empty()) {
        if (bad_blocks++ == 0)
          first = "block " + std::to_string(b) + " (bytes " + std::to_string(off) + ".." + std::to_string(off + len) +
                  ") of '" + path + "' " + why + ": '" + block + "'";
        note(first);
      }
    }
    f["stored"] = "by blocks";
    f["blocks"] = bl.count;
    f["bad_blocks"] = bad_blocks;
    if (bad_blocks) f["first_error"] = first;
    files.push_back(f);
    if (!in.ok) break;
  }
  return files;
}

std::vector<std::string> FilesRestoredFrom(const std::vector<std::string>& image_paths) {
  std::vector<std::string> out;
  for (const std::string& img : image_paths) {
    const int fd = open(img.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) continue;
    void* m = fstat(fd, &st) == 0 && st.st_size > 0
                  ? mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0)
                  : MAP_FAILED;
    close(fd);
    if (m == MAP_FAILED) continue;
    image::View v;
    char err[512];
    if (image::open_view(img.c_str(), static_cast<const uint8_t*>(m), uint64_t(st.st_size), &v, err, sizeof err)) {
      uint64_t bad = 0;
      std::string first;
      for (const auto& f : InspectFiles(v, img, &bad, &first, false))
        if (f["origin"] != OriginName(uint32_t(FileOrigin::kListing))) out.push_back(f["path"]);
    }
    munmap(m, size_t(st.st_size));
  }
  return out;
}

}  // namespace revive::cli
