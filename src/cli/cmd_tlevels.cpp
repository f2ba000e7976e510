// `revive tlevels-scan|tlevels-recv|tlevels-send`: what `revive restart --hosts` runs on a host (through
// the launcher) to restore transparent images kept at the node-local levels (docs/storage-levels.md,
// "Transparent images"). Internal: not in the help.
//   scan: lists this host's intact-or-not local pieces with their XXH3-64: lines "own G NAME XXH" and
//         "copy G OWNER NAME XXH" (the restart compares them with the manifests);
//   recv: listens on this host's address toward the root, prints "IP:PORT", receives one transfer (tlx.h)
//         into --dest and checks each file against --expect NAME=XXH;
//   send: sends files to a recv over TCP, proving the computation's secret;
//   rebuild: rebuilds a lost host's images from the blocks its group's survivors stream to it (trebuild.h);
//   rebuild-send: a survivor's part of it;
//   fetch: copies images the restart took from L4 back into this host's L1 directory;
//   encode: one member of the distributed encode of a group's parity again (tencode.h), for --writers.
//   scan also prints "parity G ok|bad" for the host's L3 parity.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/hosts.h"
#include "coord/secret.h"
#include "coord/tlevels.h"
#include "coord/tlx.h"
#include "coord/tencode.h"
#include "coord/tparity.h"
#include "coord/trebuild.h"
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

// A listener on this host's address toward the root, its address printed on stdout (the restart reads it
// there), stdout then sent to /dev/null.
Status ListenTowards(const std::string& toward, int* fd) {
  std::string ip;
  uint16_t port = 0;
  Status s = AddressTowards(toward, &ip);
  if (s.ok()) s = coord::TlxListen(ip, fd, &port);
  if (!s.ok()) return s;
  printf("%s:%u\n", ip.c_str(), port);
  fflush(stdout);
  int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) dup2(null, 1);
  return Status::OK();
}

int Recv(const std::string& toward, const std::string& secret_file, uint64_t gen, const std::string& from,
         const std::string& dest, const std::vector<std::string>& expect) {
  std::string secret;
  int fd = -1;
  Status s = LoadSecret(secret_file, &secret);
  if (s.ok()) s = ListenTowards(toward, &fd);
  if (!s.ok()) {
    fprintf(stderr, "revive tlevels-recv: %s\n", s.ToString().c_str());
    return 1;
  }
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

int Failed(const char* cmd, const Status& s) {
  if (s.ok()) return 0;
  fprintf(stderr, "revive %s: %s\n", cmd, s.ToString().c_str());
  return 1;
}

// The rebuilder of a lost host's images (trebuild.h): the group's survivors stream it the blocks its
// decode needs (tlevels-rebuild-send); nothing but the rebuilt images, parity and parity.meta is written.
int Rebuild(const std::string& toward, const std::string& secret_file, uint64_t gen, const std::string& host,
            const std::string& unusable, const std::string& dest) {
  std::string secret;
  int fd = -1;
  Status s = LoadSecret(secret_file, &secret);
  if (s.ok()) s = ListenTowards(toward, &fd);
  coord::TRebuildStats st;
  if (s.ok()) s = coord::TRebuildReceive(fd, secret, gen, host, coord::TSplitList(unusable), dest, 60, &st);
  if (fd >= 0) close(fd);
  if (s.ok())
    fprintf(stderr, "revive tlevels-rebuild: host %s rebuilt from %d member%s streamed blocks (%llu bytes received)\n",
            host.c_str(), st.sources, st.sources == 1 ? "'s" : "s'", (unsigned long long)st.received);
  return Failed("tlevels-rebuild", s);
}

int RebuildSend(const std::string& to, const std::string& secret_file, uint64_t gen, const std::string& from,
                const std::string& dir, const std::string& host, const std::string& unusable) {
  std::string secret;
  Status s = LoadSecret(secret_file, &secret);
  if (s.ok()) s = coord::TRebuildSend(to, secret, gen, from, dir, host, coord::TSplitList(unusable), 60);
  return Failed("tlevels-rebuild-send", s);
}

// One member of the distributed encode of its group's parity again (tencode.h), its images `own`: listens,
// prints its address, reads every member's (group order, comma-separated) on stdin, then encodes; only the
// `writers` write their parity (the others send their blocks). The layout is the checkpoint's (same group
// order, m, images sorted by name), so the parity equals the one written then.
int Encode(const std::string& toward, const std::string& secret_file, uint64_t gen, const std::string& host,
           const std::string& group_list, int m, const std::string& writers_list, const std::string& dest,
           const std::vector<std::string>& own) {
  const std::vector<std::string> group = coord::TSplitList(group_list), writers = coord::TSplitList(writers_list);
  const size_t me = std::find(group.begin(), group.end(), host) - group.begin();
  if (me == group.size()) return Failed("tlevels-encode", Status::InvalidArgument(host + " is not in the group " + group_list));
  std::vector<bool> writes;
  for (const auto& h : group) writes.push_back(std::find(writers.begin(), writers.end(), h) != writers.end());
  std::string secret;
  int fd = -1;
  std::vector<uint64_t> xxh(own.size());
  Status s = LoadSecret(secret_file, &secret);
  for (size_t i = 0; i < own.size() && s.ok(); i++) s = coord::FileXxh3(own[i], &xxh[i]);
  if (s.ok()) s = ListenTowards(toward, &fd);
  std::string line;
  if (s.ok()) {
    char c;
    while (read(0, &c, 1) == 1 && c != '\n') line += c;
  }
  const std::vector<std::string> addrs = coord::TSplitList(line);
  if (s.ok() && addrs.size() != group.size())
    s = Status::InvalidArgument("got " + std::to_string(addrs.size()) + " addresses for the group " + group_list);
  coord::TEncodeStats st;
  if (s.ok()) s = coord::TEncodeDistributed(group, addrs, me, own, xxh, m, fd, secret, gen, 60, dest, &st, &writes);
  if (fd >= 0) close(fd);
  if (s.ok() && writes[me])
    fprintf(stderr, "revive tlevels-encode: parity of host %s encoded again from its group's streamed blocks "
            "(%llu bytes received)\n", host.c_str(), (unsigned long long)st.received);
  return Failed("tlevels-encode", s);
}

// Images a restart took from the checkpoint directory (L4) copied back into this host's L1 directory, each
// FILE=XXH checked against the manifest's checksum after the copy (a mismatch removes it): the redundancy
// written again at the restart then covers them too.
int Fetch(const std::string& dest, const std::vector<std::string>& files) {
  Status s = CreateDirs(Env::Default(), dest);
  for (size_t i = 0; i < files.size() && s.ok(); i++) {
    const size_t eq = files[i].rfind('=');
    uint64_t want = 0, got = 0;
    if (eq == std::string::npos || !coord::ParseHex64(files[i].substr(eq + 1), &want)) {
      s = Status::InvalidArgument("\"" + files[i] + "\": not FILE=XXH3");
      break;
    }
    const std::string src = files[i].substr(0, eq), dst = dest + "/" + src.substr(src.find_last_of('/') + 1);
    s = coord::TCopyDurable(src, dest);
    if (s.ok()) s = coord::FileXxh3(dst, &got);
    if (s.ok() && got != want) {
      unlink(dst.c_str());
      s = Status::Corruption(dst + ": copied from " + src + " with checksum " + coord::Hex64(got) + ", the manifest says " +
                             coord::Hex64(want));
    }
  }
  return Failed("tlevels-fetch", s);
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
  send->callback([a, rc] { *rc = Send(a->to, a->secret_file, a->gen, a->from, a->files); });
  CLI::App* rb = app.add_subcommand("tlevels-rebuild", "internal: rebuild a host's images from its group")->group("");
  rb->add_option("--toward", a->toward)->required();
  rb->add_option("--secret-file", a->secret_file)->required();
  rb->add_option("--gen", a->gen)->required();
  rb->add_option("--host", a->to)->required();
  rb->add_option("--unusable", a->group);
  rb->add_option("--dest", a->dest)->required();
  rb->callback([a, rc] { *rc = Rebuild(a->toward, a->secret_file, a->gen, a->to, a->group, a->dest); });
  CLI::App* rs = app.add_subcommand("tlevels-rebuild-send", "internal: send a survivor's part of a rebuild")->group("");
  common(rs);
  rs->add_option("--to", a->to)->required();
  rs->add_option("--dir", a->dest)->required();
  rs->add_option("--host", a->toward)->required();
  rs->add_option("--unusable", a->group);
  rs->callback([a, rc] { *rc = RebuildSend(a->to, a->secret_file, a->gen, a->from, a->dest, a->toward, a->group); });
  CLI::App* fe = app.add_subcommand("tlevels-fetch", "internal: copy images from L4 to this host's L1")->group("");
  fe->add_option("--dest", a->dest)->required();
  fe->add_option("FILES", a->files)->required();
  fe->callback([a, rc] { *rc = Fetch(a->dest, a->files); });
  CLI::App* enc = app.add_subcommand("tlevels-encode", "internal: encode a host's parity again")->group("");
  enc->add_option("--toward", a->toward)->required();
  enc->add_option("--secret-file", a->secret_file)->required();
  enc->add_option("--gen", a->gen)->required();
  enc->add_option("--host", a->to)->required();
  enc->add_option("--group", a->group)->required();
  enc->add_option("--parity", a->parity)->required();
  enc->add_option("--writers", a->from)->required();
  enc->add_option("--dest", a->dest)->required();
  enc->add_option("FILES", a->files);
  enc->callback([a, rc] {
    *rc = Encode(a->toward, a->secret_file, a->gen, a->to, a->group, a->parity, a->from, a->dest, a->files);
  });
}

}  // namespace revive::cli
