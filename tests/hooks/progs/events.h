/* One line (with its '\n') appended to $HOOKS_EVENTS, opened and closed per line: the file is outside the
 * checkpointed working directory and never open at a checkpoint, so a restart neither restores nor
 * truncates it (tests/hooks). */
#ifndef REVIVE_TESTS_HOOKS_EVENTS_H_
#define REVIVE_TESTS_HOOKS_EVENTS_H_
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static inline void events_append(const char* line, size_t n) {
  const char* path = getenv("HOOKS_EVENTS");
  if (!path) return;
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (write(fd, line, n) != (ssize_t)n) abort();
  close(fd);
}
#endif
