// Options::from_env: every REVIVE_* variable of the application-level library (docs/applevel.md).
#include <strings.h>

#include <map>

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
  std::map<std::string, std::string> config;
  std::string config_path;
  Check(GetEnvString("REVIVE_CONFIG", &config_path));
  if (!config_path.empty()) Check(ReadConfigFile(config_path, &config));
  ConfigScope scope(&config, config_path);
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
  // REVIVE_CP_INTERVAL: seconds, or "auto" (Daly's interval from the measured cost and REVIVE_MTBF; that
  // MTBF is required is checked when a Checkpoint is constructed, which also covers Options set in code).
  std::string interval;
  Check(GetEnvString("REVIVE_CP_INTERVAL", &interval));
  if (strcasecmp(interval.c_str(), "auto") == 0) {
    o.interval_auto = true;
    o.interval = 0;
  } else if (!interval.empty()) {
    o.interval_auto = false;
    Status s = GetEnvDouble("REVIVE_CP_INTERVAL", 0, 1e9, &o.interval);
    if (!s.ok()) throw Error("revive: " + s.message() + " (seconds), or auto");
  }
  Check(GetEnvDouble("REVIVE_MTBF", 0, 1e12, &o.mtbf));
  Check(GetEnvString("REVIVE_HEARTBEAT_DIR", &o.heartbeat_dir));
  Check(GetEnvString("REVIVE_LEVELS", &o.levels));
  Check(GetEnvString("REVIVE_LOCAL_PATH", &o.local_path));
  Check(GetEnvString("REVIVE_HOST", &o.host));
  Check(GetEnvString("REVIVE_FAILURE_DOMAIN", &o.failure_domain));
  v = o.domain_depth;
  Check(GetEnvInt("REVIVE_DOMAIN_DEPTH", 0, 64, &v));
  o.domain_depth = static_cast<int>(v);
  v = o.group_size;
  Check(GetEnvInt("REVIVE_GROUP_SIZE", 2, 255, &v));
  o.group_size = static_cast<int>(v);
  v = o.parity;
  Check(GetEnvInt("REVIVE_PARITY", 1, 32, &v));
  o.parity = static_cast<int>(v);
  return o;
}

}  // namespace revive
