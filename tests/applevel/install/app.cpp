// A user program built against an installed revive (pkg-config or find_package).
#include <revive/checkpoint.hpp>

#include <cstdio>
#include <vector>

int main() {
  std::vector<double> v(100);
  int64_t it = 0;
  {
    revive::Checkpoint cp("installed");
    cp.add("v", v);
    cp.commit();
    if (cp.restart_if_needed(&it)) return 1;  // the test starts with an empty REVIVE_CP_PATH
    for (; it < 10; ++it) {
      v[it] = static_cast<double>(it);
      cp.update_and_write(it, 3);
    }
  }
  std::vector<double> w;
  revive::Checkpoint cp("installed");
  cp.add("v", w);
  cp.commit();
  if (!cp.restart_if_needed(&it) || it != 10 || w.size() != 100 || w[9] != 9.0) return 1;
  std::printf("installed revive works (version %llu)\n", static_cast<unsigned long long>(cp.version()));
  return 0;
}
