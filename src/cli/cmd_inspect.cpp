// `revive inspect [--json] IMAGE`: what an image holds (header, sections, threads, regions, sizes) and
// whether every checksum verifies. Reads the image with the engine's validating view (src/image/view.h).
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/inspect_files.h"
#include "image/view.h"

namespace revive::cli {
namespace {

struct InspectArgs {
  std::string image;
  bool json = false;
};

std::string Hex(uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
  return b;
}

std::string Prot(uint32_t p) {
  std::string s = "---";
  if (p & PROT_READ) s[0] = 'r';
  if (p & PROT_WRITE) s[1] = 'w';
  if (p & PROT_EXEC) s[2] = 'x';
  return s;
}

std::string Fixed(const char* s, size_t cap) { return std::string(s, strnlen(s, cap)); }

nlohmann::json Summarize(const image::View& v, const std::string& name, uint64_t* bad_chunks) {
  using nlohmann::json;
  const image::FileHeader& h = *v.hdr;
  json j;
  j["file"] = name;
  j["size"] = v.size;
  j["header"] = {{"version", h.version}, {"arch", h.arch}, {"page_size", h.page_size},
                 {"compressed", (h.flags & image::kFlagCompressed) != 0},
                 {"forked", (h.flags & image::kFlagForked) != 0}, {"pid", h.pid}, {"upid", h.upid},
                 {"generation", h.generation}, {"created_unix_ns", h.created_unix_ns},
                 {"kernel", Fixed(h.kernel, sizeof h.kernel)}, {"glibc", Fixed(h.glibc, sizeof h.glibc)},
                 {"prog", Fixed(h.prog, sizeof h.prog)}};
  j["sections"] = json::array();
  for (uint32_t i = 0; i < v.dir_count; i++) {
    const auto& e = v.dir[i];
    j["sections"].push_back({{"name", Fixed(e.name, sizeof e.name)},
                             {"kind", e.kind == image::kKindEngine ? "engine" : "plugin"},
                             {"version", e.version}, {"bytes", e.length}, {"xxh3", Hex(e.xxh3)}});
  }
  if (v.process != nullptr) j["exe"] = Fixed(v.process->exe, sizeof v.process->exe);
  j["threads"] = json::array();
  for (uint32_t i = 0; i < v.thread_count; i++) {
    const auto& t = v.threads[i];
    j["threads"].push_back({{"tid", t.tid}, {"main", t.is_main != 0}, {"ckpt", t.is_ckpt != 0}});
  }
  uint64_t mem = 0, stored = 0;
  j["regions"] = json::array();
  for (uint32_t i = 0; i < v.region_count; i++) {
    const auto& r = v.regions[i];
    uint64_t rs = 0, rm = 0;
    for (uint32_t c = r.first_chunk; c < r.first_chunk + r.chunk_count && c < v.chunk_count; c++) {
      rm += v.chunks[c].len;
      rs += v.chunks[c].stored_len;
    }
    mem += rm;
    stored += rs;
    j["regions"].push_back({{"start", Hex(r.start)}, {"end", Hex(r.end)}, {"prot", Prot(r.prot)},
                            {"flags", r.flags}, {"path", Fixed(r.path, sizeof r.path)},
                            {"chunks", r.chunk_count}, {"saved_bytes", rm}, {"stored_bytes", rs}});
  }
  // Shared memory objects (format 2): which this image stores and which it points at.
  static const char* const kKinds[] = {"?", "anon", "sysv", "memfd", "deleted", "tmpfs-file", "file"};
  j["shm"] = json::array();
  for (uint32_t i = 0; i < v.shm_count; i++) {
    const auto& s = v.shm[i];
    json o = {{"region", s.region}, {"kind", kKinds[s.kind <= image::kShmDiskFile ? s.kind : 0]},
              {"dev", s.dev}, {"ino", s.ino}, {"size", s.size},
              {"bytes_here", !(s.flags & image::kShmBytesElsewhere)}};
    if (s.kind == image::kShmSysV)
      o.update({{"sysv_key", s.sysv_key}, {"sysv_id", s.sysv_id}, {"sysv_mode", s.sysv_mode},
                {"sysv_removed", (s.flags & image::kShmSysvDest) != 0}});
    j["shm"].push_back(o);
  }
  *bad_chunks = 0;
  std::string first_bad;
  for (uint32_t c = 0; c < v.chunk_count; c++) {
    char err[256];
    if (!image::verify_chunk(name.c_str(), v, c, err, sizeof err)) {
      if ((*bad_chunks)++ == 0) first_bad = err;
    }
  }
  // Every byte outside the checksummed parts (header, chunks, sections, directory, trailer) is padding the
  // writer left zero: the header's page, and the gap before a raw chunk that follows compressed frames.
  // A byte there that is not zero is damage too, harmless to a restart but a sign the file was hit.
  std::vector<std::pair<uint64_t, uint64_t>> covered = {{0, sizeof(image::FileHeader)},
                                                        {v.size - sizeof(image::Trailer), v.size}};
  for (uint32_t c = 0; c < v.chunk_count; c++)
    covered.push_back({v.chunks[c].file_offset, v.chunks[c].file_offset + v.chunks[c].stored_len});
  for (uint32_t i = 0; i < v.dir_count; i++) covered.push_back({v.dir[i].offset, v.dir[i].offset + v.dir[i].length});
  const uint64_t dir_off = uint64_t(reinterpret_cast<const uint8_t*>(v.dir) - v.base);
  covered.push_back({dir_off, dir_off + v.dir_count * sizeof(image::SectionEntry)});
  std::sort(covered.begin(), covered.end());
  uint64_t at = 0;
  for (const auto& [from, to] : covered) {
    for (uint64_t b = at; b < from && b < v.size; b++)
      if (v.base[b] != 0) {
        if ((*bad_chunks)++ == 0)
          first_bad = name + ": byte " + std::to_string(b) + " lies outside every checksummed part and is not zero";
        break;
      }
    at = std::max(at, to);
  }
  // Files the restart writes back; a large one's blocks live beside the image and are checked too.
  j["files"] = InspectFiles(v, name, bad_chunks, &first_bad);
  j["totals"] = {{"regions", v.region_count}, {"chunks", v.chunk_count}, {"saved_bytes", mem},
                 {"stored_bytes", stored}};
  j["checksums"] = {{"ok", *bad_chunks == 0}, {"bad_chunks", *bad_chunks}, {"first_error", first_bad}};
  return j;
}

void PrintText(const nlohmann::json& j) {
  const auto& h = j["header"];
  printf("image      %s (%llu bytes)\n", j["file"].get<std::string>().c_str(),
         (unsigned long long)j["size"].get<uint64_t>());
  printf("program    %s  pid %llu  upid %llu  generation %llu\n", h["prog"].get<std::string>().c_str(),
         (unsigned long long)h["pid"].get<uint64_t>(), (unsigned long long)h["upid"].get<uint64_t>(),
         (unsigned long long)h["generation"].get<uint64_t>());
  if (j.contains("exe")) printf("exe        %s\n", j["exe"].get<std::string>().c_str());
  printf("format     v%u  page %u  %s%s  kernel %s  glibc %s\n", h["version"].get<unsigned>(),
         h["page_size"].get<unsigned>(), h["compressed"].get<bool>() ? "compressed" : "uncompressed",
         h["forked"].get<bool>() ? " forked" : "", h["kernel"].get<std::string>().c_str(),
         h["glibc"].get<std::string>().c_str());
  printf("threads    %zu:", j["threads"].size());
  for (const auto& t : j["threads"])
    printf(" %llu%s", (unsigned long long)t["tid"].get<uint64_t>(),
           t["main"].get<bool>() ? "(main)" : t["ckpt"].get<bool>() ? "(ckpt)" : "");
  printf("\nsections   %zu\n", j["sections"].size());
  for (const auto& s : j["sections"])
    printf("  %-20s %-6s v%-3u %10llu bytes  xxh3 %s\n", s["name"].get<std::string>().c_str(),
           s["kind"].get<std::string>().c_str(), s["version"].get<unsigned>(),
           (unsigned long long)s["bytes"].get<uint64_t>(), s["xxh3"].get<std::string>().c_str());
  printf("regions    %zu\n", j["regions"].size());
  for (const auto& r : j["regions"])
    printf("  %14s-%-14s %s %10llu saved %10llu stored  %s\n", r["start"].get<std::string>().c_str(),
           r["end"].get<std::string>().c_str(), r["prot"].get<std::string>().c_str(),
           (unsigned long long)r["saved_bytes"].get<uint64_t>(),
           (unsigned long long)r["stored_bytes"].get<uint64_t>(), r["path"].get<std::string>().c_str());
  if (!j["shm"].empty()) printf("shared     %zu mapping(s) of shared memory objects\n", j["shm"].size());
  for (const auto& s : j["shm"])
    printf("  region %-5u %-10s dev %llx inode %llu  %s\n", s["region"].get<unsigned>(),
           s["kind"].get<std::string>().c_str(), (unsigned long long)s["dev"].get<uint64_t>(),
           (unsigned long long)s["ino"].get<uint64_t>(),
           s["bytes_here"].get<bool>() ? "bytes stored here" : "bytes stored by another process");
  if (!j["files"].empty()) printf("files      %zu written back at restore\n", j["files"].size());
  for (const auto& f : j["files"]) {
    printf("  %12llu bytes  %-32s %s", (unsigned long long)f["size"].get<int64_t>(),
           f["origin"].get<std::string>().c_str(), f["path"].get<std::string>().c_str());
    if (f.contains("blocks"))
      printf("  (%llu blocks beside the image, %llu bad)", (unsigned long long)f["blocks"].get<uint64_t>(),
             (unsigned long long)f["bad_blocks"].get<uint64_t>());
    printf("\n");
  }
  const auto& t = j["totals"];
  printf("memory     %llu bytes saved in %llu chunks, %llu bytes stored\n",
         (unsigned long long)t["saved_bytes"].get<uint64_t>(), (unsigned long long)t["chunks"].get<uint64_t>(),
         (unsigned long long)t["stored_bytes"].get<uint64_t>());
  const auto& c = j["checksums"];
  if (c["ok"].get<bool>()) printf("checksums  ok (header, directory, sections, every chunk, every file block)\n");
  else printf("checksums  %llu BAD (chunks, padding or file blocks); first: %s\n", (unsigned long long)c["bad_chunks"].get<uint64_t>(),
              c["first_error"].get<std::string>().c_str());
}

int Inspect(const InspectArgs& a) {
  int fd = open(a.image.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    fprintf(stderr, "revive inspect: %s: %s\n", a.image.c_str(), strerror(errno));
    return 2;
  }
  if (!S_ISREG(st.st_mode) || st.st_size == 0) {
    fprintf(stderr, "revive inspect: %s: %s\n", a.image.c_str(),
            S_ISREG(st.st_mode) ? "empty file" : "not a regular file");
    close(fd);
    return 2;
  }
  void* m = mmap(nullptr, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    fprintf(stderr, "revive inspect: %s: mmap: %s\n", a.image.c_str(), strerror(errno));
    return 2;
  }
  image::View v;
  char err[512];
  int rc = 0;
  if (!image::open_view(a.image.c_str(), (const uint8_t*)m, (uint64_t)st.st_size, &v, err, sizeof err)) {
    fprintf(stderr, "revive inspect: %s\n", err);
    rc = 1;
  } else {
    uint64_t bad = 0;
    nlohmann::json j = Summarize(v, a.image, &bad);
    if (a.json) printf("%s\n", j.dump(2).c_str());
    else PrintText(j);
    rc = bad == 0 ? 0 : 1;
  }
  munmap(m, (size_t)st.st_size);
  return rc;
}

}  // namespace

void AddInspectCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<InspectArgs>();
  CLI::App* c = app.add_subcommand("inspect", "Describe an image and verify its checksums");
  c->footer("Prints header, sections, threads, memory regions, the files a restart writes back and sizes,\n"
            "and verifies every checksum, including each block of a large file stored beside the image\n"
            "(exit 1 if the image or a block it needs is missing or damaged).");
  c->add_flag("--json", a->json, "Machine-readable output");
  c->add_option("image", a->image, "IMAGE.rimg")->required();
  c->callback([a, rc] { *rc = Inspect(*a); });
}

}  // namespace revive::cli
