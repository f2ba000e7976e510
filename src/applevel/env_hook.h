// Test hook: the Env that Checkpoint objects created from now on use (nullptr = Env::Default()).
// Lets tests inject filesystem faults under the public API.
#ifndef REVIVE_APPLEVEL_ENV_HOOK_H_
#define REVIVE_APPLEVEL_ENV_HOOK_H_

#include "core/env.h"

namespace revive::applevel {
void SetEnvForTesting(Env* env);
Env* CheckpointEnv();
}  // namespace revive::applevel

#endif  // REVIVE_APPLEVEL_ENV_HOOK_H_
