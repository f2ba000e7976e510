// What the engine and its plugins write to the program's stderr while a checkpoint is being taken waits
// for the resume. stderr is often a regular file that every process of the computation shares and that
// the files and fd plugins save (its contents, its size); a warning written between two processes' saves
// made them record different sizes, and the restart then refused the file as shrunk ("launch-stderr
// shrank from 440 to 220 bytes"). Every other thread is parked during a checkpoint, so only the
// checkpoint thread writes here then: a static buffer, no lock, no allocation.
#include <string.h>

#include "inject/sys.h"

namespace revive::inject {
namespace {

char g_held[8192];
size_t g_len;
unsigned g_dropped;
bool g_hold;

}  // namespace

void stderr_hold() { g_hold = true; }

void stderr_release() {
  g_hold = false;
  if (g_len) sys::write_all(2, g_held, g_len);
  g_len = 0;
  if (g_dropped) {
    char line[96] = "revive: ";
    char num[24];
    size_t k = 0;
    for (unsigned v = g_dropped; v || k == 0; v /= 10) num[k++] = char('0' + v % 10);
    size_t n = strlen(line);
    while (k) line[n++] = num[--k];
    line[n] = 0;
    strcat(line, " more lines written during the checkpoint were dropped\n");
    sys::write_all(2, line, strlen(line));
    g_dropped = 0;
  }
}

void stderr_forget() {  // a forked writer child: the lines are its parent's to write
  g_hold = false;
  g_len = 0;
  g_dropped = 0;
}

void stderr_line(const char* s, size_t n) {
  if (!g_hold) {
    sys::write_all(2, s, n);
    return;
  }
  if (n <= sizeof g_held - g_len) {
    memcpy(g_held + g_len, s, n);
    g_len += n;
  } else {
    ++g_dropped;
  }
}

}  // namespace revive::inject
