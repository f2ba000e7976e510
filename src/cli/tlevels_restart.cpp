#include "cli/tlevels_restart.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "cli/tlevels_scan.h"
#include "coord/manifest.h"
#include "coord/tlevels.h"
#include "core/env.h"

namespace revive::cli {
namespace {

using coord::Hex64;

// L3: the members of `group` that cannot serve a rebuild of generation m (an image of theirs not intact on
// their host, or their parity missing or damaged), each with the reason.
std::vector<std::pair<std::string, std::string>> GroupLost(const coord::Manifest& m, const std::vector<std::string>& group,
                                                            std::map<std::string, HostPieces>& pieces) {
  std::vector<std::pair<std::string, std::string>> lost;
  for (const std::string& h : group) {
    auto hp = pieces.find(h);
    std::string why;
    if (hp == pieces.end()) why = "unreachable";
    else if (!hp->second.parity.count(m.generation)) why = "parity missing";
    else if (!hp->second.parity[m.generation]) why = "parity damaged (checksum mismatch), not used";
    for (const auto& q : m.procs) {
      if (!why.empty()) break;
      if (q.host != h) continue;
      auto& own = hp->second.own[m.generation];
      auto it = own.find(q.image);
      if (it == own.end()) why = "image " + q.image + " missing";
      else if (it->second != q.xxh3) why = "image " + q.image + " damaged";
    }
    if (!why.empty()) lost.push_back({h, why});
  }
  return lost;
}

// One image's source in a generation.
struct Source {
  enum Kind { kMissing, kOwn, kPartner, kRebuild, kGlobal } kind = kMissing;
  std::string notes;  // why not a faster level ("L1 copy missing, ...")
};

Source Choose(const coord::Manifest& m, const coord::ManifestProc& p, const std::string& gen_dir,
              std::map<std::string, HostPieces>& pieces) {
  Source s;
  std::vector<std::string> why;
  auto lookup = [](const std::map<std::string, uint64_t>* names, const std::string& n, uint64_t* x) {
    if (names == nullptr) return false;
    auto it = names->find(n);
    if (it == names->end()) return false;
    *x = it->second;
    return true;
  };
  uint64_t x = 0;
  if (p.local) {
    auto h = pieces.find(p.host);
    const std::map<std::string, uint64_t>* own = nullptr;
    if (h != pieces.end() && h->second.own.count(m.generation)) own = &h->second.own[m.generation];
    if (!lookup(own, p.image, &x)) why.push_back(h == pieces.end() ? "host " + p.host + " unreachable" : "L1 copy missing");
    else if (x != p.xxh3) why.push_back("L1 copy damaged (checksum mismatch), not used");
    else {
      s.kind = Source::kOwn;
      return s;
    }
    if (!p.l2.empty()) {
      auto q = pieces.find(p.l2);
      const std::map<std::string, uint64_t>* copy = nullptr;
      if (q != pieces.end() && q->second.copy.count(m.generation) && q->second.copy[m.generation].count(p.host))
        copy = &q->second.copy[m.generation][p.host];
      if (!lookup(copy, p.image, &x)) why.push_back("partner copy on " + p.l2 + " missing");
      else if (x != p.xxh3) why.push_back("partner copy on " + p.l2 + " damaged (checksum mismatch), not used");
      else {
        s.kind = Source::kPartner;
        why.push_back("using partner copy from " + p.l2);
        for (size_t i = 0; i < why.size(); i++) s.notes += (i ? ", " : "") + why[i];
        return s;
      }
    }
  }
  if (p.local && !p.l3.empty()) {
    const std::vector<std::string> group = coord::TSplitList(p.l3);
    auto lost = GroupLost(m, group, pieces);
    std::string names;
    for (const auto& [h, w] : lost) names += (names.empty() ? "" : ", ") + h + ": " + w;
    if (lost.size() <= m.parity) {
      s.kind = Source::kRebuild;
      why.push_back("rebuilt from its group's parity (hosts " + p.l3 + ")");
      for (size_t i = 0; i < why.size(); i++) s.notes += (i ? ", " : "") + why[i];
      return s;
    }
    why.push_back("its group (hosts " + p.l3 + ") lost " + std::to_string(lost.size()) + " members (" + names +
                  "), parity tolerates " + std::to_string(m.parity));
  }
  const std::string global = gen_dir + "/" + p.image;
  struct stat st;
  if (stat(global.c_str(), &st) != 0) {
    why.push_back("not in the checkpoint directory (L4)");
  } else if (p.local && (!coord::FileXxh3(global, &x).ok() || x != p.xxh3)) {
    why.push_back("the checkpoint directory's copy is damaged (checksum mismatch), not used");
  } else {
    s.kind = Source::kGlobal;
    if (p.local) why.push_back("using the checkpoint directory (L4)");
  }
  for (size_t i = 0; i < why.size(); i++) s.notes += (i ? ", " : "") + why[i];
  return s;
}

std::string Who(const coord::ManifestProc& p) {
  return "image of process " + std::to_string(p.pid) + " (upid " + std::to_string(p.upid) + ", host " + p.host + ")";
}

// One transfer over a socket: `revive tlevels-recv` on host `to` (listening on its address toward the
// root, files into dest, each checked against `expect` NAME=XXH) and `revive tlevels-send` of `files` on
// host `from`.
Status Transfer(const HostOpts& ho, const Target& root, const std::string& self, uint64_t gen, const std::string& from,
                const std::string& to, const std::vector<std::string>& files, const std::string& dest,
                const std::vector<std::string>& expect, const std::string& what) {
  const std::string g = std::to_string(gen);
  std::vector<std::string> recv = {self, "tlevels-recv", "--toward", root.host + ":" + std::to_string(root.port),
                                   "--secret-file", root.secret_file, "--gen", g, "--from", from, "--dest", dest};
  for (const auto& e : expect) recv.insert(recv.end(), {"--expect", e});
  pid_t rpid = -1, spid = -1;
  int rfd = -1, sfd = -1;
  Status s = StartOnHost(ho, to, recv, &rpid, &rfd);
  if (!s.ok()) return s;
  std::string addr = ReadLineFd(rfd);
  close(rfd);
  if (addr.empty()) {
    WaitStatus(rpid);
    return Status::IOError("no receiver for " + what + " on host " + to);
  }
  std::vector<std::string> send = {self, "tlevels-send", "--secret-file", root.secret_file, "--gen", g, "--from", from,
                                   "--to", addr};
  send.insert(send.end(), files.begin(), files.end());
  s = StartOnHost(ho, from, send, &spid, &sfd);
  if (!s.ok()) {
    kill(rpid, SIGTERM);
    WaitStatus(rpid);
    return s;
  }
  close(sfd);
  int sc = WaitStatus(spid), rc = WaitStatus(rpid);
  if (sc != 0 || rc != 0)
    return Status::IOError("moving " + what + " from host " + from + " to host " + to + " failed (send " +
                           std::to_string(sc) + ", receive " + std::to_string(rc) + ")");
  return Status::OK();
}

// Where each manifest host's processes restart: itself, or (migration) the spare host that takes them.
using Placement = std::map<std::string, std::string>;
const std::string& DestOf(const Placement& dest, const std::string& host) {
  auto it = dest.find(host);
  return it == dest.end() ? host : it->second;
}

// Images of generation m to the hosts their processes restart on (their L1 directory there): the partner
// copies of `moved` from their holders, and the own L1 copies of `migrated` (processes whose host is not
// in the restart's host list) from their old hosts, one transfer per (holder, owner).
Status MoveCopies(const HostOpts& ho, const Target& root, const std::string& self, const coord::Manifest& m,
                  const std::vector<const coord::ManifestProc*>& moved,
                  const std::vector<const coord::ManifestProc*>& migrated, const Placement& dest) {
  // (from, owner, own copy?) -> processes
  std::map<std::tuple<std::string, std::string, bool>, std::vector<const coord::ManifestProc*>> by_pair;
  for (const auto* p : moved) by_pair[{p->l2, p->host, false}].push_back(p);
  for (const auto* p : migrated) by_pair[{p->host, p->host, true}].push_back(p);
  for (const auto& [key, procs] : by_pair) {
    const auto& [from, owner, own] = key;
    const std::string& to = DestOf(dest, owner);
    std::vector<std::string> files, expect;
    for (const auto* p : procs) {
      files.push_back((own ? coord::TLocalGenDir(m.local_root, owner, m.job, m.generation)
                           : coord::TPartnerDir(m.local_root, from, m.job, m.generation, owner)) +
                      "/" + p->image);
      expect.push_back(p->image + "=" + Hex64(p->xxh3));
    }
    Status s = Transfer(ho, root, self, m.generation, from, to, files,
                        coord::TLocalGenDir(m.local_root, to, m.job, m.generation), expect,
                        own ? "the images of host " + owner + " (its processes restart on " + to + ")"
                            : "the partner copies of host " + owner);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

// A helper started on a host whose stdout is read up to its first line (a listener's address) and then
// waited for; the processes still running are ended if the orchestration gives up early.
struct Helper {
  pid_t pid = -1;
  int out = -1, in = -1;
  std::string addr;
};

Status StartHelper(const HostOpts& ho, const std::string& host, const std::vector<std::string>& cmd, bool with_stdin,
                   const std::string& what, Helper* h) {
  Status s = StartOnHost(ho, host, cmd, &h->pid, &h->out, with_stdin ? &h->in : nullptr);
  if (!s.ok()) return s;
  h->addr = ReadLineFd(h->out);
  close(h->out);
  if (!h->addr.empty()) return Status::OK();
  if (h->in >= 0) close(h->in);
  WaitStatus(h->pid);
  h->pid = -1;
  return Status::IOError("no " + what + " on host " + host);
}

// Waits for every helper started (ending them first when `stop`); the first failure, named by `what`.
Status WaitHelpers(std::vector<Helper>& hs, const std::vector<std::string>& what, bool stop) {
  Status s;
  for (size_t i = 0; i < hs.size(); i++) {
    if (hs[i].pid < 0) continue;
    if (hs[i].in >= 0) close(hs[i].in);
    if (stop) kill(hs[i].pid, SIGTERM);
    if (int rc = WaitStatus(hs[i].pid); rc != 0 && s.ok() && !stop)
      s = Status::IOError(what[i] + " failed (status " + std::to_string(rc) + ")");
  }
  return s;
}

// Rebuilds every host in `lost` on the host its processes restart on: `revive tlevels-rebuild` listens
// there and each surviving member of its group streams it the blocks the decode needs (`revive
// tlevels-rebuild-send`, trebuild.h); nothing of the group is gathered on that host's disk.
Status RebuildHosts(const HostOpts& ho, const Target& root, const std::string& self, const coord::Manifest& m,
                    const std::map<std::string, std::vector<std::string>>& lost_groups,
                    const std::set<std::string>& unusable, const Placement& dest) {
  const std::string g = std::to_string(m.generation);
  for (const auto& [h, group] : lost_groups) {
    // On the host its processes restart on: h itself, or the spare host that takes them (migration).
    const std::string& at = DestOf(dest, h);
    std::string bad;  // the other members that serve nothing
    for (const std::string& x : group)
      if (x != h && unusable.count(x)) bad += (bad.empty() ? "" : ",") + x;
    std::vector<Helper> hs(1);
    std::vector<std::string> what = {"rebuilding the images of host " + h + " on host " + at};
    std::vector<std::string> recv = {self, "tlevels-rebuild", "--toward", root.host + ":" + std::to_string(root.port),
                                     "--secret-file", root.secret_file, "--gen", g, "--host", h,
                                     "--dest", coord::TLocalGenDir(m.local_root, at, m.job, m.generation)};
    if (!bad.empty()) recv.insert(recv.end(), {"--unusable", bad});
    Status st = StartHelper(ho, at, recv, false, "rebuilder of host " + h, &hs[0]);
    if (!st.ok()) return st;
    for (const std::string& x : group) {
      if (x == h || unusable.count(x) || !st.ok()) continue;
      std::vector<std::string> send = {self, "tlevels-rebuild-send", "--secret-file", root.secret_file, "--gen", g,
                                       "--from", x, "--to", hs[0].addr, "--host", h,
                                       "--dir", coord::TLocalGenDir(m.local_root, x, m.job, m.generation)};
      if (!bad.empty()) send.insert(send.end(), {"--unusable", bad});
      Helper s;
      int out = -1;
      st = StartOnHost(ho, x, send, &s.pid, &out);
      if (out >= 0) close(out);
      if (st.ok()) {
        hs.push_back(s);
        what.push_back("host " + x + "'s part of the rebuild of host " + h);
      }
    }
    // The senders first: one that failed ends the rebuilder at once (it would wait for it until its timeout).
    std::vector<Helper> rebuilder(hs.begin(), hs.begin() + 1), senders(hs.begin() + 1, hs.end());
    Status w = WaitHelpers(senders, std::vector<std::string>(what.begin() + 1, what.end()), !st.ok());
    Status r = WaitHelpers(rebuilder, {what[0]}, !st.ok() || !w.ok());
    if (!st.ok()) return st;
    if (!w.ok()) return w;
    if (!r.ok()) return r;
  }
  return Status::OK();
}

// After the images of generation m are in place (`restored`: their processes, whose images are now intact
// in their host's L1 directory): the partner copies the scan did not find intact on their holder (it was
// wiped, or its copy damaged) are sent again from the owner's L1 directory, so a second host loss before
// the next checkpoint is still survivable (SCR rewrites redundancy after a rebuild the same way). A rebuilt
// host's parity is written by tlevels-rebuild itself (TRebuildMember). Best effort: a failure is said and
// the restart goes on (the next checkpoint protects the computation again).
void ReprotectCopies(const HostOpts& ho, const Target& root, const std::string& self, const coord::Manifest& m,
                     const std::vector<const coord::ManifestProc*>& restored, std::map<std::string, HostPieces>& pieces,
                     const Placement& dest) {
  std::map<std::pair<std::string, std::string>, std::vector<const coord::ManifestProc*>> by_pair;  // (holder, owner)
  for (const auto* p : restored) {
    auto holder = pieces.find(p->l2);
    // No copy, its holder unreachable, or left out of the host list (its processes went elsewhere): the
    // next checkpoint places a new partner copy.
    if (p->l2.empty() || holder == pieces.end() || dest.count(p->l2)) continue;
    auto& copies = holder->second.copy[m.generation][p->host];
    auto it = copies.find(p->image);
    if (it == copies.end() || it->second != p->xxh3) by_pair[{p->l2, p->host}].push_back(p);
  }
  for (const auto& [pair, procs] : by_pair) {
    const auto& [holder, owner] = pair;
    std::vector<std::string> files, expect;
    for (const auto* p : procs) {
      files.push_back(coord::TLocalGenDir(m.local_root, owner, m.job, m.generation) + "/" + p->image);
      expect.push_back(p->image + "=" + Hex64(p->xxh3));
    }
    const std::string what = "the partner copies of host " + owner + "'s images (generation " +
                             std::to_string(m.generation) + ") on host " + holder;
    Status s = Transfer(ho, root, self, m.generation, owner, holder, files,
                        coord::TPartnerDir(m.local_root, holder, m.job, m.generation, owner), expect, what);
    if (s.ok()) fprintf(stderr, "revive restart: %s written again\n", what.c_str());
    else fprintf(stderr, "revive restart: %s not written again (%s); the next checkpoint makes new ones\n",
                 what.c_str(), s.ToString().c_str());
  }
}

// The parity of generation m that the scan did not find intact on a host whose images are intact now (its
// images came from its partner copy, or only its parity was damaged) is encoded again by the distributed
// encode (tencode.h): every member of its group runs `revive tlevels-encode`, sending each of its blocks only
// to the members that write their parity (a rebuilt host got its parity from tlevels-rebuild). Only when
// every member's images are in their L1 directories. Best effort, as ReprotectCopies.
void ReprotectParity(const HostOpts& ho, const Target& root, const std::string& self, const coord::Manifest& m,
                     const std::vector<const coord::ManifestProc*>& in_l1,
                     const std::map<std::string, std::vector<std::string>>& rebuilt,
                     std::map<std::string, HostPieces>& pieces) {
  std::set<std::string> whole;  // hosts all of whose images are in their L1 directory now
  for (const auto& p : m.procs) whole.insert(p.host);
  for (const auto& p : m.procs)
    if (std::find(in_l1.begin(), in_l1.end(), &p) == in_l1.end()) whole.erase(p.host);
  std::map<std::string, std::vector<std::string>> writers;  // group -> its hosts that need their parity
  std::set<std::string> done;
  for (const auto& p : m.procs) {
    const std::string& h = p.host;
    auto hp = pieces.find(h);
    if (p.l3.empty() || done.count(h) || rebuilt.count(h) || hp == pieces.end()) continue;
    done.insert(h);
    auto par = hp->second.parity.find(m.generation);
    if (par != hp->second.parity.end() && par->second) continue;  // intact
    const std::vector<std::string> group = coord::TSplitList(p.l3);
    if (std::all_of(group.begin(), group.end(), [&](const std::string& x) { return whole.count(x) > 0; }))
      writers[p.l3].push_back(h);
  }
  const std::string g = std::to_string(m.generation);
  for (const auto& [l3, ws] : writers) {
    const std::vector<std::string> group = coord::TSplitList(l3);
    std::string wl;
    for (const auto& w : ws) wl += (wl.empty() ? "" : ",") + w;
    std::vector<Helper> hs;
    std::vector<std::string> what;
    Status st;
    std::string addrs;
    for (const std::string& x : group) {
      const std::string dir = coord::TLocalGenDir(m.local_root, x, m.job, m.generation);
      std::vector<std::string> cmd = {self, "tlevels-encode", "--toward", root.host + ":" + std::to_string(root.port),
                                      "--secret-file", root.secret_file, "--gen", g, "--host", x, "--group", l3,
                                      "--parity", std::to_string(m.parity), "--writers", wl, "--dest", dir};
      for (const auto& q : m.procs)
        if (q.host == x) cmd.push_back(dir + "/" + q.image);
      Helper h;
      if (!(st = StartHelper(ho, x, cmd, true, "parity encoder", &h)).ok()) break;
      hs.push_back(h);
      what.push_back("host " + x + "'s part of the encode");
      addrs += (addrs.empty() ? "" : ",") + h.addr;
    }
    addrs += "\n";
    for (auto& h : hs) {  // every member learns the others' addresses, then encodes
      if (st.ok() && write(h.in, addrs.data(), addrs.size()) != (ssize_t)addrs.size())
        st = Status::FromErrno("writing the group's addresses to a parity encoder", errno);
      close(h.in);
      h.in = -1;
    }
    Status w = WaitHelpers(hs, what, !st.ok());
    if (st.ok()) st = w;
    const std::string what_parity = std::string("the parity of host") + (ws.size() > 1 ? "s " : " ") + wl + " (generation " + g + ")";
    if (st.ok()) fprintf(stderr, "revive restart: %s written again\n", what_parity.c_str());
    else fprintf(stderr, "revive restart: %s not written again (%s); the next checkpoint makes a new one\n",
                 what_parity.c_str(), st.ToString().c_str());
  }
}

// The images of generation m served from the checkpoint directory (L4) whose processes restart on their own
// host get a node-local copy again (`revive tlevels-fetch` there: copied, checked against the manifest), so
// the partner copies and parity written again next cover them and the next loss is survivable from L1-L3.
// Those copied are added to in_l1. Best effort, as ReprotectCopies.
void RefetchFromL4(const HostOpts& ho, const std::string& self, const coord::Manifest& m, const std::string& gen_dir,
                   const std::vector<const coord::ManifestProc*>& from_l4, std::vector<const coord::ManifestProc*>* in_l1) {
  std::map<std::string, std::vector<const coord::ManifestProc*>> by_host;
  for (const auto* p : from_l4) by_host[p->host].push_back(p);
  for (const auto& [h, procs] : by_host) {
    const std::string dir = coord::TLocalGenDir(m.local_root, h, m.job, m.generation);
    std::vector<std::string> cmd = {self, "tlevels-fetch", "--dest", dir};
    for (const auto* p : procs) cmd.push_back(gen_dir + "/" + p->image + "=" + Hex64(p->xxh3));
    pid_t pid = -1;
    int fd = -1;
    Status st = StartOnHost(ho, h, cmd, &pid, &fd);
    if (st.ok()) {
      close(fd);
      if (int rc = WaitStatus(pid); rc != 0) st = Status::IOError("tlevels-fetch failed (status " + std::to_string(rc) + ")");
    }
    const std::string what = "the node-local copies of host " + h + "'s images taken from L4 (generation " +
                             std::to_string(m.generation) + ")";
    if (!st.ok()) {
      fprintf(stderr, "revive restart: %s not written (%s); the next checkpoint makes new ones\n", what.c_str(),
              st.ToString().c_str());
      continue;
    }
    fprintf(stderr, "revive restart: %s written\n", what.c_str());
    in_l1->insert(in_l1->end(), procs.begin(), procs.end());
  }
}

}  // namespace

Status ResolveKeptImage(const coord::Manifest& m, const coord::ManifestProc& p, const std::string& gen_dir,
                        const std::string& local_dir, std::string* path) {
  std::vector<std::string> places;
  if (!local_dir.empty()) places.push_back(local_dir + "/" + p.image);
  places.push_back(gen_dir + "/" + p.image);
  places.push_back(coord::TLocalGenDir(m.local_root, p.host, m.job, m.generation) + "/" + p.image);
  std::string why;
  for (const std::string& f : places) {
    uint64_t x = 0;
    Status s = coord::FileXxh3(f, &x);
    if (s.ok() && x == p.xxh3) {
      *path = f;
      return Status::OK();
    }
    why += "; " + f + (s.ok() ? ": checksum mismatch" : ": " + s.message());
  }
  return Status::NotFound(Who(p) + ": no intact copy" + why);
}

Status TLevelsRestart(const HostOpts& ho, const Target& root, const std::vector<std::string>& hosts,
                      const std::string& gen_dir, bool lazy, bool* used, std::string* chosen_gen_dir,
                      std::vector<HostPart>* parts) {
  *used = false;
  Env* env = Env::Default();
  coord::Manifest newest;
  Status s = coord::ReadManifest(env, gen_dir + "/MANIFEST.json", &newest);
  if (!s.ok() || !(coord::ParseTLevelNames(newest.levels) & coord::kTL1)) return Status::OK();
  *used = true;
  const std::string ckpt_dir = gen_dir.substr(0, gen_dir.find_last_of('/'));
  std::string self;
  if (!(s = SelfPath(&self)).ok()) return s;
  std::vector<uint64_t> gens;
  if (!(s = coord::ListCompleteGenerations(env, ckpt_dir, &gens)).ok()) return s;
  std::set<std::string> holders;  // every host that may keep pieces of the generations considered
  for (const auto& p : newest.procs) {
    holders.insert(p.host);
    if (!p.l2.empty()) holders.insert(p.l2);
  }
  // Migration: a host of the computation that is not in the host list (lost, or left out) has its
  // processes restart on a spare host, one of the list that ran none of them, in list order; its images
  // are moved or rebuilt there.
  Placement dest;
  {
    std::set<std::string> listed(hosts.begin(), hosts.end()), ran;
    for (const auto& p : newest.procs) ran.insert(p.host);
    std::vector<std::string> spare;
    for (const auto& h : hosts)
      if (!ran.count(h) && std::find(spare.begin(), spare.end(), h) == spare.end()) spare.push_back(h);
    size_t next = 0;
    for (const auto& h : ran) {
      if (listed.count(h)) continue;
      if (next == spare.size())
        return Status::InvalidArgument("host " + h + " of the computation is not in the host list, and no spare host "
                                       "is left to take its processes (a listed host that ran none; the images are "
                                       "kept on the hosts, so each of its processes needs one)");
      dest[h] = spare[next++];
      fprintf(stderr, "revive restart: host %s is not in the host list: its processes restart on %s\n", h.c_str(),
              dest[h].c_str());
    }
  }
  auto pieces = ScanHosts("revive restart", ho, self, holders, newest.local_root, newest.job);
  for (uint64_t g : gens) {
    if (g > newest.generation) continue;
    const std::string gd = coord::GenerationDir(ckpt_dir, g);
    coord::Manifest m;
    if (!coord::ReadManifest(env, gd + "/MANIFEST.json", &m).ok()) continue;
    std::vector<std::string> missing, notes;
    // in_l1: intact in their host's L1 directory after the moves (not the migrated: elsewhere)
    std::vector<const coord::ManifestProc*> moved, migrated, in_l1, from_l4;
    std::map<std::string, std::vector<std::string>> rebuild;  // lost host -> its group
    for (const auto& p : m.procs) {
      if (!dest.count(p.host) && std::find(hosts.begin(), hosts.end(), p.host) == hosts.end())
        return Status::InvalidArgument(Who(p) + ": the images are kept on the hosts they ran on, so each process "
                                       "restarts there or on a spare host; " + p.host + " is not in the host list");
      Source src = Choose(m, p, gd, pieces);
      const bool away = dest.count(p.host) > 0;
      if (src.kind == Source::kMissing) missing.push_back(Who(p) + ": " + src.notes);
      else if (!src.notes.empty()) notes.push_back(Who(p) + ": " + src.notes);
      if (src.kind == Source::kPartner) moved.push_back(&p);
      if (src.kind == Source::kOwn && away) migrated.push_back(&p);
      if (!away && (src.kind == Source::kOwn || src.kind == Source::kPartner || src.kind == Source::kRebuild))
        in_l1.push_back(&p);
      if (src.kind == Source::kRebuild) rebuild[p.host] = coord::TSplitList(p.l3);
      if (src.kind == Source::kGlobal && p.local && !away) from_l4.push_back(&p);
    }
    if (missing.empty()) {
      for (const auto& n : notes) fprintf(stderr, "revive restart: %s\n", n.c_str());
      s = MoveCopies(ho, root, self, m, moved, migrated, dest);
      std::set<std::string> unusable;
      for (const auto& [h, group] : rebuild)
        for (const auto& [l, w] : GroupLost(m, group, pieces)) unusable.insert(l);
      if (s.ok()) s = RebuildHosts(ho, root, self, m, rebuild, unusable, dest);
      if (!s.ok()) missing.push_back(s.ToString());
      else {
        RefetchFromL4(ho, self, m, gd, from_l4, &in_l1);
        ReprotectCopies(ho, root, self, m, in_l1, pieces, dest);
        ReprotectParity(ho, root, self, m, in_l1, rebuild, pieces);
      }
    }
    if (!missing.empty()) {
      std::string list;
      for (const auto& x : missing) list += "; " + x;
      fprintf(stderr, "revive restart: generation %llu cannot be restored from any level%s; trying an older one\n",
              (unsigned long long)g, list.c_str());
      continue;
    }
    if (g != newest.generation)
      fprintf(stderr, "revive restart: restarting from generation %llu (newest complete: %llu)\n",
              (unsigned long long)g, (unsigned long long)newest.generation);
    *chosen_gen_dir = gd;
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < m.procs.size(); i++) {
      const auto& p = m.procs[i];
      const std::string& at = DestOf(dest, p.host);
      if (!index.count(at)) {
        index[at] = parts->size();
        HostPart part{at, {"restart", "--only", ""}, i};
        parts->push_back(std::move(part));
      }
      std::string& only = (*parts)[index[at]].args[2];
      only += (only.empty() ? "" : ",") + std::to_string(p.upid);
    }
    for (auto& part : *parts) {
      if (!m.job.empty()) part.args.insert(part.args.end(), {"--local-dir", coord::TLocalGenDir(m.local_root, part.host, m.job, g)});
      if (lazy) part.args.push_back("--lazy");
      part.args.push_back(gd);
      Progress("revive: " + part.host + ": process(es) " + part.args[2]);
    }
    return Status::OK();
  }
  return Status::NotFound(ckpt_dir + ": no generation can be restored from any level (see above)");
}

}  // namespace revive::cli
