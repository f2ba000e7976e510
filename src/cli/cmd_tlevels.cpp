// `revive tlevels-scan|tlevels-recv|tlevels-send`: what `revive restart --hosts` runs on a host (through
// the launcher) to restore transparent images kept at the node-local levels (docs/storage-levels.md,
// "Transparent images"). Internal: not in the help.
//   scan: lists this host's intact-or-not local pieces with their XXH3-64: lines "own G NAME XXH" and
//         "copy G OWNER NAME XXH" (the restart compares them with the manifests);
//   recv: listens on this host's address toward the root, prints "IP:PORT", receives one transfer (tlx.h)
//         into --dest and checks each file against --expect NAME=XXH;
//   send: sends files to a recv over TCP, proving the computation's secret;
//   rebuild: rebuilds a lost host's images from its group's data and parity gathered in --from (tparity.h);
//   encode: encodes a host's parity again from its images and the group's others gathered in --from.
//   scan also prints "parity G ok|bad" for the host's L3 parity.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/hosts.h"
#include "coord/secret.h"
#include "coord/tlevels.h"
#include "coord/tlx.h"
#include "coord/tparity.h"
#include "core/env.h"

namespace revive::cli {
namespace {

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (struct dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

bool IsDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int Scan(const std::string& hostjob) {
  for (const std::string& g : Entries(hostjob)) {
    if (g.rfind("ckpt-", 0) != 0) continue;
    const std::string gd = hostjob + "/" + g;
    for (const std::string& f : Entries(gd)) {
      uint64_t h = 0;
      if (f == "parity.meta") continue;
      if (f == "parity") {  // intact when it matches its description's checksum
        std::string text;
        coord::TParityMeta meta;
        bool ok = ReadFileToString(Env::Default(), gd + "/parity.meta", &text).ok() &&
                  coord::TParityMeta::Parse(text, gd, &meta).ok() && coord::FileXxh3(gd + "/parity", &h).ok() &&
                  h == meta.parity_xxh3;
        printf("parity %s %s\n", g.c_str() + 5, ok ? "ok" : "bad");
        continue;
      }
      if (f.rfind("partner-", 0) == 0 && IsDir(gd + "/" + f)) {
        for (const std::string& c : Entries(gd + "/" + f))
          if (coord::FileXxh3(gd + "/" + f + "/" + c, &h).ok())
            printf("copy %s %s %s %s\n", g.c_str() + 5, f.c_str() + 8, c.c_str(), coord::Hex64(h).c_str());
      } else if (coord::FileXxh3(gd + "/" + f, &h).ok()) {
        printf("own %s %s %s\n", g.c_str() + 5, f.c_str(), coord::Hex64(h).c_str());
      }
    }
  }
  return fflush(stdout) == 0 ? 0 : 1;
}

Status LoadSecret(const std::string& file, std::string* secret) {
  return coord::LoadOrCreateSecret(file, secret);
}

int Recv(const std::string& toward, const std::string& secret_file, uint64_t gen, const std::string& from,
         const std::string& dest, const std::vector<std::string>& expect) {
  std::string secret, ip;
  Status s = LoadSecret(secret_file, &secret);
  if (s.ok()) s = AddressTowards(toward, &ip);
  int fd = -1;
  uint16_t port = 0;
  if (s.ok()) s = coord::TlxListen(ip, &fd, &port);
  if (!s.ok()) {
    fprintf(stderr, "revive tlevels-recv: %s\n", s.ToString().c_str());
    return 1;
  }
  printf("%s:%u\n", ip.c_str(), port);
  fflush(stdout);
  int null = open("/dev/null", O_WRONLY | O_CLOEXEC);  // the restart reads our stdout up to here
  if (null >= 0) dup2(null, 1);
  std::vector<coord::TlxFile> got;
  s = coord::TlxReceive(fd, secret, gen, from, dest, 30, &got);
  close(fd);
  for (const std::string& e : expect) {  // NAME=XXH: the manifest's checksum
    size_t eq = e.find('=');
    bool ok = false;
    for (const auto& f : got) ok |= eq != std::string::npos && f.name == e.substr(0, eq) && coord::Hex64(f.xxh3) == e.substr(eq + 1);
    if (s.ok() && !ok) s = Status::Corruption("received " + e.substr(0, eq) + " does not match its checksum in the manifest");
  }
  if (!s.ok()) {
    fprintf(stderr, "revive tlevels-recv: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

int Send(const std::string& to, const std::string& secret_file, uint64_t gen, const std::string& from,
         const std::vector<std::string>& files) {
  std::string secret;
  Status s = LoadSecret(secret_file, &secret);
  std::vector<coord::TlxFile> sent;
  if (s.ok()) s = coord::TlxSend(to, secret, gen, from, files, &sent, 30);
  if (!s.ok()) {
    fprintf(stderr, "revive tlevels-send: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

// rebuild/encode: the data gathered in `from` is removed whatever happened; the exit status says the rest.
int Gathered(const char* cmd, const std::string& from, const Status& s) {
  std::error_code ec;
  std::filesystem::remove_all(from, ec);
  if (s.ok()) return 0;
  fprintf(stderr, "revive %s: %s\n", cmd, s.ToString().c_str());
  return 1;
}

int Rebuild(const std::string& from, const std::string& host, const std::string& dest) {
  return Gathered("tlevels-rebuild", from, coord::TRebuildMember(from, host, dest));
}

// A member's parity encoded again (its images intact, its parity lost): the other members' images were
// gathered in from/<host>/; the layout is the checkpoint's (same group order, m, images sorted by name), so
// the parity equals the one written then.
int Encode(const std::string& from, const std::string& host, const std::string& group_list, int m,
           const std::string& dest, const std::vector<std::string>& own) {
  const std::vector<std::string> group = coord::TSplitList(group_list);
  std::vector<std::vector<std::string>> files_of(group.size());
  size_t me = group.size();
  for (size_t j = 0; j < group.size(); j++) {
    if (group[j] == host) {
      me = j;
      files_of[j] = own;
      continue;
    }
    for (const std::string& f : Entries(from + "/" + group[j])) files_of[j].push_back(from + "/" + group[j] + "/" + f);
  }
  return Gathered("tlevels-encode", from,
                  me == group.size() ? Status::InvalidArgument(host + " is not in the group " + group_list)
                                     : coord::TEncodeGroup(group, files_of, m, me, dest));
}

struct TlArgs {
  std::string hostjob, toward, secret_file, from, dest, to, group;
  uint64_t gen = 0;
  int parity = 1;
  std::vector<std::string> files, expect;
};

}  // namespace

void AddTLevelsCommands(CLI::App& app, int* rc) {
  auto a = std::make_shared<TlArgs>();
  CLI::App* scan = app.add_subcommand("tlevels-scan", "internal: list a host's node-local image pieces")->group("");
  scan->add_option("HOSTJOB", a->hostjob)->required();
  scan->callback([a, rc] { *rc = Scan(a->hostjob); });
  // What both ends of a transfer are told: the secret, the generation, the host the images come from.
  auto common = [a](CLI::App* c) {
    c->add_option("--secret-file", a->secret_file)->required();
    c->add_option("--gen", a->gen)->required();
    c->add_option("--from", a->from)->required();
  };
  CLI::App* recv = app.add_subcommand("tlevels-recv", "internal: receive images from another host")->group("");
  common(recv);
  recv->add_option("--toward", a->toward)->required();
  recv->add_option("--dest", a->dest)->required();
  recv->add_option("--expect", a->expect);
  recv->callback([a, rc] { *rc = Recv(a->toward, a->secret_file, a->gen, a->from, a->dest, a->expect); });
  CLI::App* send = app.add_subcommand("tlevels-send", "internal: send images to another host")->group("");
  common(send);
  send->add_option("--to", a->to)->required();
  send->add_option("FILES", a->files)->required();
  CLI::App* rb = app.add_subcommand("tlevels-rebuild", "internal: rebuild a host's images from its group")->group("");
  rb->add_option("--from", a->from)->required();
  rb->add_option("--host", a->to)->required();
  rb->add_option("--dest", a->dest)->required();
  rb->callback([a, rc] { *rc = Rebuild(a->from, a->to, a->dest); });
  send->callback([a, rc] { *rc = Send(a->to, a->secret_file, a->gen, a->from, a->files); });
  CLI::App* enc = app.add_subcommand("tlevels-encode", "internal: encode a host's parity again")->group("");
  enc->add_option("--from", a->from)->required();
  enc->add_option("--host", a->to)->required();
  enc->add_option("--group", a->group)->required();
  enc->add_option("--parity", a->parity)->required();
  enc->add_option("--dest", a->dest)->required();
  enc->add_option("FILES", a->files)->required();
  enc->callback([a, rc] { *rc = Encode(a->from, a->to, a->group, a->parity, a->dest, a->files); });
}

}  // namespace revive::cli
