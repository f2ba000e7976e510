// Options::from_env: every REVIVE_* variable of the application-level library (docs/applevel.md).
#include "core/env_vars.h"
#include "revive/checkpoint.hpp"

namespace revive {
namespace {
void Check(const Status& s) {
  if (!s.ok()) throw Error("revive: " + s.message());
}
}  // namespace

Options Options::from_env() {
  Options o;
  int64_t v;
  Check(GetEnvString("REVIVE_CP_PATH", &o.base_path));
  Check(GetEnvBool("REVIVE_READ_ON_RESTART", &o.read_on_restart));
  Check(GetEnvBool("REVIVE_WRITE_ASYNC", &o.async));
  Check(GetEnvBool("REVIVE_WRITE_ASYNC_ZERO_COPY", &o.zero_copy));
  v = o.async_thread_cpu;
  Check(GetEnvInt("REVIVE_ASYNC_THREAD_CPU", -1, 65535, &v));
  o.async_thread_cpu = static_cast<int>(v);
  v = o.keep;
  Check(GetEnvInt("REVIVE_KEEP", 1, 1000000, &v));
  o.keep = static_cast<int>(v);
  Check(GetEnvBool("REVIVE_COMPRESS", &o.compress));
  v = o.compress_level;
  Check(GetEnvInt("REVIVE_COMPRESS_LEVEL", 1, 22, &v));
  o.compress_level = static_cast<int>(v);
  Check(GetEnvBool("REVIVE_VERBOSE", &o.verbose));
  Check(GetEnvBool("REVIVE_MPIIO", &o.mpiio));
  return o;
}

}  // namespace revive
