#include "cli/lazy_verify.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <utility>

#include "image/view.h"

namespace revive::cli {

LazyVerifier::LazyVerifier(const char* who, std::vector<std::string> images,
                           std::function<void(const std::string&)> stop)
    : who_(who), images_(std::move(images)), stop_(std::move(stop)) {
  thread_ = std::thread([this] { Run(); });
}

LazyVerifier::~LazyVerifier() {
  quit_.store(true);
  if (thread_.joinable()) thread_.join();
}

void LazyVerifier::Run() {
  for (const std::string& path : images_) {
    if (quit_.load()) return;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) {
      if (fd >= 0) close(fd);
      continue;  // revive-restart reads the same file and reports what is wrong with it
    }
    void* m = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) continue;
    image::View v;
    char err[512] = "";
    bool ok = image::open_view(path.c_str(), static_cast<const uint8_t*>(m), uint64_t(st.st_size), &v, err, sizeof err);
    // The chunks revive-restart --lazy maps rather than reads (memory.cpp, read_kind): stored whole, of a
    // region neither shared nor growing down. The others it checked before the program ran.
    for (uint32_t i = 0; ok && i < v.region_count && !quit_.load(); ++i) {
      const image::RegionRecord& r = v.regions[i];
      if (r.flags & (image::kRegShared | image::kRegGrowsDown | image::kRegSpecial)) continue;
      for (uint32_t c = r.first_chunk; c < r.first_chunk + r.chunk_count && c < v.chunk_count; ++c) {
        if (quit_.load()) break;
        const image::ChunkRecord& k = v.chunks[c];
        if (k.stored_len != k.len) continue;
        if (!image::verify_chunk(path.c_str(), v, c, err, sizeof err)) {
          ok = false;
          break;
        }
        // Read once: the page cache keeps it for the program's faults; our copy need not stay mapped.
        madvise(const_cast<uint8_t*>(v.base) + (k.file_offset & ~uint64_t(4095)),
                size_t(k.len + (k.file_offset & 4095)), MADV_DONTNEED);
      }
    }
    munmap(m, size_t(st.st_size));
    if (!ok && !quit_.load()) {
      damaged_.store(true);
      fprintf(stderr,
              "%s: %s; the process restored from it with --lazy maps those bytes unverified, so the computation "
              "is stopped (an eager restart refuses such an image before anything runs)\n",
              who_, err);
      stop_(std::string(err) + " (found beside a --lazy restart, which maps those bytes unverified)");
      return;
    }
  }
}

}  // namespace revive::cli
