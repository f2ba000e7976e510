#include "coord/manifest.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

namespace revive::coord {

std::string GenerationDir(const std::string& ckpt_dir, uint64_t generation) {
  return ckpt_dir + "/ckpt-" + std::to_string(generation);
}

Status WriteManifest(Env* env, const std::string& gen_dir, const Manifest& m) {
  nlohmann::json j;
  j["format"] = "revive-manifest";
  j["version"] = 1;
  j["generation"] = m.generation;
  j["time"] = m.time;
  j["processes"] = nlohmann::json::array();
  for (const auto& p : m.procs) {
    nlohmann::json e = {{"upid", p.upid}, {"pid", p.pid}, {"host", p.host}, {"prog", p.prog},
                        {"image", p.image}, {"bytes", p.bytes}};
    if (!m.levels.empty()) {
      e["local"] = p.local;
      e["l2"] = p.l2;
      e["l3"] = p.l3;
      char x[17];
      snprintf(x, sizeof x, "%016llx", (unsigned long long)p.xxh3);
      e["xxh3"] = x;
    }
    j["processes"].push_back(e);
  }
  if (!m.levels.empty())
    j["storage"] = {{"levels", m.levels}, {"local_root", m.local_root}, {"job", m.job}, {"parity", m.parity}};
  return WriteFileAtomic(env, gen_dir + "/MANIFEST.json", j.dump(2) + "\n");
}

Status ReadManifest(Env* env, const std::string& path, Manifest* m) {
  std::string text;
  Status s = ReadFileToString(env, path, &text);
  if (!s.ok()) return s;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::Corruption(path + ": not valid JSON");
  auto need = [&](const nlohmann::json& o, const char* key, bool (nlohmann::json::*is)() const noexcept,
                  const std::string& where) -> Status {
    if (!o.contains(key) || !(o[key].*is)())
      return Status::Corruption(path + ": " + where + "\"" + key + "\" missing or of the wrong type");
    return Status::OK();
  };
  if (!(s = need(j, "generation", &nlohmann::json::is_number_unsigned, "")).ok()) return s;
  if (!(s = need(j, "processes", &nlohmann::json::is_array, "")).ok()) return s;
  m->generation = j["generation"].get<uint64_t>();
  m->time = j.contains("time") && j["time"].is_number() ? j["time"].get<double>() : 0;
  m->procs.clear();
  size_t i = 0;
  for (const auto& p : j["processes"]) {
    std::string where = "processes[" + std::to_string(i++) + "].";
    if (!p.is_object()) return Status::Corruption(path + ": " + where + " is not an object");
    for (const char* k : {"upid", "pid", "bytes"})
      if (!(s = need(p, k, &nlohmann::json::is_number_unsigned, where)).ok()) return s;
    for (const char* k : {"host", "prog", "image"})
      if (!(s = need(p, k, &nlohmann::json::is_string, where)).ok()) return s;
    ManifestProc mp;
    mp.upid = p["upid"].get<uint64_t>();
    mp.pid = p["pid"].get<uint64_t>();
    mp.bytes = p["bytes"].get<uint64_t>();
    mp.host = p["host"].get<std::string>();
    mp.prog = p["prog"].get<std::string>();
    mp.image = p["image"].get<std::string>();
    if (p.contains("local") && p["local"].is_boolean()) mp.local = p["local"].get<bool>();
    if (p.contains("l2") && p["l2"].is_string()) mp.l2 = p["l2"].get<std::string>();
    if (p.contains("l3") && p["l3"].is_string()) mp.l3 = p["l3"].get<std::string>();
    if (p.contains("xxh3") && p["xxh3"].is_string()) mp.xxh3 = strtoull(p["xxh3"].get<std::string>().c_str(), nullptr, 16);
    if (mp.image.empty() || mp.image.find('/') != std::string::npos)
      return Status::Corruption(path + ": " + where + "image \"" + mp.image + "\" is not a file name");
    m->procs.push_back(std::move(mp));
  }
  if (m->procs.empty()) return Status::Corruption(path + ": no processes");
  m->levels.clear();
  m->local_root.clear();
  m->job.clear();
  m->parity = 0;
  if (j.contains("storage") && j["storage"].is_object()) {
    const auto& st = j["storage"];
    for (const char* k : {"levels", "local_root", "job"})
      if (!(s = need(st, k, &nlohmann::json::is_string, "storage.")).ok()) return s;
    m->levels = st["levels"].get<std::string>();
    m->local_root = st["local_root"].get<std::string>();
    m->job = st["job"].get<std::string>();
    if (st.contains("parity") && st["parity"].is_number_unsigned()) m->parity = st["parity"].get<uint64_t>();
  }
  return Status::OK();
}

namespace {
// "ckpt-<G>" -> G; false for other names.
bool ParseGenerationName(const std::string& n, uint64_t* g) {
  if (n.rfind("ckpt-", 0) != 0 || n.size() == 5 || n.size() > 25) return false;
  *g = 0;
  for (size_t i = 5; i < n.size(); i++) {
    if (n[i] < '0' || n[i] > '9') return false;
    *g = *g * 10 + (uint64_t)(n[i] - '0');
  }
  return true;
}
}  // namespace

Status FindNewestGeneration(Env* env, const std::string& ckpt_dir, uint64_t* gen, uint64_t* max_seen) {
  std::vector<std::string> names;
  Status s = env->GetChildren(ckpt_dir, &names);
  if (!s.ok()) return s;
  bool found = false;
  uint64_t best = 0, seen = 0;
  for (const auto& n : names) {
    uint64_t g = 0;
    if (!ParseGenerationName(n, &g)) continue;
    if (g > seen) seen = g;
    if (env->FileExists(ckpt_dir + "/" + n + "/MANIFEST.json") && (!found || g > best)) {
      best = g;
      found = true;
    }
  }
  if (max_seen != nullptr) *max_seen = seen;
  if (!found) return Status::NotFound(ckpt_dir + ": no complete checkpoint (no ckpt-<G>/MANIFEST.json)");
  *gen = best;
  return Status::OK();
}

Status ListCompleteGenerations(Env* env, const std::string& ckpt_dir, std::vector<uint64_t>* gens) {
  gens->clear();
  std::vector<std::string> names;
  Status s = env->GetChildren(ckpt_dir, &names);
  if (!s.ok()) return s;
  for (const auto& n : names) {
    uint64_t g = 0;
    if (ParseGenerationName(n, &g) && env->FileExists(ckpt_dir + "/" + n + "/MANIFEST.json")) gens->push_back(g);
  }
  std::sort(gens->rbegin(), gens->rend());
  return Status::OK();
}

}  // namespace revive::coord
