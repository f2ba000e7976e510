// Stand-in for a process running under the injected library, for CLI tests that must not depend on the
// engine: speaks the process side of the protocol from the REVIVE_* environment `revive launch` (or
// `revive restart`) sets up.
//   fake_proc [--exit-after SECONDS]   launched: print upid, serve phases (writing a small image whose
//                                      content is "upid=N"), exit 3 on KILL, 0 after SECONDS
//   fake_restart [--lazy] IMAGE        (FAKE_RESTART) restored: HELLO restart=1 with the upid in the image's
//                                      file name, wait
//                                      for reconnect/refill/resume, print them, exit 7
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "coord/client.h"

using namespace revive::coord;

static Client g_client;

static int Bye(int status) {
  FrameBuilder b(g_client.tx_buffer(), Client::kTxCap, kBye, g_client.next_seq());
  b.add_i64("status", status);
  g_client.send(b);
  g_client.close();
  return status;
}

static void PhaseDone(const char* name, uint32_t seq, const char* image) {
  FrameBuilder b(g_client.tx_buffer(), Client::kTxCap, kPhaseDone, seq);
  b.add("name", name).add("ok", "1");
  if (image != nullptr) b.add("image", image).add_u64("bytes", 0);
  g_client.send(b);
}

int main(int argc, char** argv) {
  ClientOptions o;
  char err[512];
  if (!client_options_from_env(&o, err, sizeof err)) {
    fprintf(stderr, "fake: %s\n", err);
    return 90;
  }
  o.prog = "fake_proc";
#ifdef FAKE_RESTART
  // The upid from the image's name (<prog>-<upid>.rimg, contracts.md), so real images work too.
  std::string image = argv[argc - 1];
  size_t dash = image.find_last_of('-');
  o.upid = dash == std::string::npos ? 0 : strtoull(image.c_str() + dash + 1, nullptr, 10);
  if (o.upid == 0) {
    fprintf(stderr, "fake_restart: %s: no upid in the file name\n", image.c_str());
    return 91;
  }
  o.restart = true;
#else
  double exit_after = 1e9;
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--exit-after") == 0) exit_after = atof(argv[i + 1]);
  printf("env LD_PRELOAD=%s\n", getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "");
  printf("env REVIVE_CKPT_DIR=%s\n", getenv("REVIVE_CKPT_DIR") ? getenv("REVIVE_CKPT_DIR") : "");
  printf("env REVIVE_COMPRESS=%s\n", getenv("REVIVE_COMPRESS") ? getenv("REVIVE_COMPRESS") : "");
#endif
  Welcome w;
  if (!g_client.connect(o, &w)) {
    fprintf(stderr, "fake: %s\n", g_client.error());
    return 92;
  }
  printf("upid=%llu\n", (unsigned long long)w.upid);
  fflush(stdout);
  std::string phases;
#ifndef FAKE_RESTART
  time_t start = time(nullptr);
#endif
  for (;;) {
    FrameHeader h;
    Payload p;
    int r = g_client.recv(&h, &p, 100);
#ifndef FAKE_RESTART
    if (difftime(time(nullptr), start) >= exit_after) return Bye(0);
#endif
    if (r == 0) continue;
    if (r < 0) {
      fprintf(stderr, "fake: %s\n", g_client.error());
      return 93;
    }
    if (h.type == kKill) return Bye(3);
    if (h.type != kPhase) continue;
    char name[32], dir[4096];
    p.get_str("name", name, sizeof name);
    p.get_str("dir", dir, sizeof dir);
    phases += phases.empty() ? name : std::string(",") + name;
    if (strcmp(name, "write") == 0) {
      std::string img = std::string(dir) + "/fake_proc-" + std::to_string(w.upid) + ".rimg";
      std::ofstream(img) << "upid=" << w.upid << "\n";
      PhaseDone(name, h.seq, img.c_str());
    } else {
      PhaseDone(name, h.seq, nullptr);
    }
#ifdef FAKE_RESTART
    if (strcmp(name, "resume") == 0) {
      printf("restored upid=%llu phases=%s\n", (unsigned long long)o.upid, phases.c_str());
      fflush(stdout);
      return Bye(7);
    }
#endif
  }
}
