// `revive flush DIR [--local ROOT] [--version N] [--force]`: copies a version restorable from the local
// levels to L4, as the library's background flush would have: each rank's bytes are split into their
// records (one data file <key>.<rank> each, <key> for a single rank), written and fsynced, then the
// MANIFEST is published (VersionStore::Publish), which makes the version complete at L4.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/levels_offline.h"
#include "storage/data_file.h"

namespace revive::cli {
namespace {

struct FlushArgs {
  std::string dir, local;
  uint64_t version = 0;
  bool force = false;
};

int Flush(const FlushArgs& a) {
  Offline o;
  uint64_t v = 0;
  if (int rc = LoadForTool("revive flush", a.dir, a.local, &o, true, a.version, &v)) return rc;
  Env* env = o.env;
  Status s;
  storage::VersionStore store(env, o.global_dir);
  storage::Manifest existing;
  if (env->FileExists(store.VersionDir(v) + "/" + storage::kManifestName) && store.ReadManifest(v, &existing).ok() &&
      !a.force) {
    std::fprintf(stderr, "revive flush: %s: version %llu is already complete at L4 (use --force to write it again)\n",
                 o.global_dir.c_str(), static_cast<unsigned long long>(v));
    return 1;
  }
  Progress progress;
  std::vector<std::string> bytes, damaged;
  storage::VersionPlan plan;
  std::string why;
  bool ok = RestoreLocal(o, v, &bytes, &plan, &damaged, &why, &progress);
  for (const auto& d : damaged) std::fprintf(stderr, "revive flush: set aside %s\n", d.c_str());
  if (!ok) {
    std::fprintf(stderr, "revive flush: %s: version %llu is not restorable from the local levels: %s\n",
                 o.global_dir.c_str(), static_cast<unsigned long long>(v), why.c_str());
    return 1;
  }
  s = store.Init();
  if (s.ok()) s = store.BeginVersion(v);
  uint64_t total = 0, done = 0;
  for (const auto& b : bytes) total += b.size();
  const int n = static_cast<int>(plan.ranks);
  for (int r = 0; r < n && s.ok(); ++r) {
    const std::string& b = bytes[static_cast<size_t>(r)];
    size_t off = 0;
    for (size_t k = 0; k < plan.keys.size() && s.ok(); ++k) {
      progress.Show("flushing rank " + std::to_string(r) + " (" + Mib(done + off) + "/" + Mib(total) + ")");
      const std::string what = "rank " + std::to_string(r) + "'s record " + std::to_string(k) + " ('" + plan.keys[k] + "')";
      storage::FileHeader h;
      const char* payload = nullptr;
      size_t used = 0;
      s = storage::ParseDataRecord(what, b.data() + off, b.size() - off, &h, &payload, &used);
      if (s.ok() && h.key != plan.keys[k])
        s = Status::Corruption(what + ": holds key '" + h.key + "', expected '" + plan.keys[k] + "'");
      if (!s.ok()) break;
      const std::string path = store.DataPath(v, plan.keys[k], r, n);
      std::unique_ptr<WritableFile> f;
      s = env->NewWritableFile(path, &f);
      if (s.ok()) s = f->Append(b.data() + off, used);
      if (s.ok()) s = f->Sync();
      if (s.ok()) s = f->Close();
      if (!s.ok()) s = Status::IOError(path + ": " + s.ToString());
      off += used;
    }
    if (s.ok() && off != b.size())
      s = Status::Corruption("rank " + std::to_string(r) + ": " + std::to_string(b.size() - off) +
                             " bytes after its last record");
    done += b.size();
  }
  progress.Done();
  if (s.ok()) {
    storage::Manifest m;
    m.name = o.name;
    m.version = v;
    m.iteration = plan.iteration;
    m.parent_version = plan.parent_version;
    m.ranks = plan.ranks;
    m.keys = plan.keys;
    m.layouts = plan.layouts;  // so that the flushed version can be read by another number of ranks
    s = store.Publish(m);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "revive flush: %s: version %llu: %s\n", o.global_dir.c_str(), static_cast<unsigned long long>(v),
                 s.ToString().c_str());
    return 1;
  }
  std::printf("flushed version %llu (iteration %lld, %u ranks, %s) to %s\n", static_cast<unsigned long long>(v),
              static_cast<long long>(plan.iteration), plan.ranks, Mib(total).c_str(), store.VersionDir(v).c_str());
  return 0;
}

}  // namespace

void AddFlushCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<FlushArgs>();
  CLI::App* c = app.add_subcommand("flush", "Copy a version from the local levels to the global level (L4)");
  c->footer("Restores every rank's bytes from the local levels (default: the newest version), writes them as\n"
            "L4 data files and publishes the MANIFEST. Refuses a version already complete at L4 unless --force.");
  AddDirOptions(c, &a->dir, &a->local);
  c->add_option("--version", a->version, "Version to flush (default: the newest with local pieces)");
  c->add_flag("--force", a->force, "Write the version even if it is complete at L4");
  c->callback([a, rc] { *rc = Flush(*a); });
}

}  // namespace revive::cli
