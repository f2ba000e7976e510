// C API (<revive/checkpoint.h>): exceptions become -1 plus a thread-local message.
#include "revive/checkpoint.h"

#include <complex>
#include <cstring>
#include <string>

#include "revive/checkpoint.hpp"

struct revive_cp {
  std::unique_ptr<revive::Checkpoint> cp;
};

namespace {
thread_local std::string g_error;

template <class F>
int Guard(F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    g_error = e.what();
  } catch (...) {
    g_error = "revive: unknown error";
  }
  return -1;
}

int NullHandle(const char* fn) {
  g_error = std::string(fn) + ": null checkpoint handle";
  return -1;
}

template <class T>
int AddArray(revive_cp* cp, const char* key, T* p, size_t n, const char* fn) {
  if (!cp) return NullHandle(fn);
  return Guard([&] {
    if (!key) throw revive::Error(std::string(fn) + ": null key");
    if (!p && n) throw revive::Error(std::string(fn) + "('" + key + "'): null data pointer");
    cp->cp->add(key, p, n);
    return 0;
  });
}

revive_cp* Create(const char* name, const char* base, const revive_options* copts) {
  revive_cp* h = nullptr;
  Guard([&] {
    if (!name) throw revive::Error("revive_cp_create: null name");
    revive::Options o;
    if (copts) {
      if (std::memchr(copts->base_path, '\0', sizeof copts->base_path) == nullptr)
        throw revive::Error("revive_cp_create_with: base_path is not NUL-terminated");
      o.base_path = copts->base_path;
      o.read_on_restart = copts->read_on_restart != 0;
      o.async = copts->async != 0;
      o.zero_copy = copts->zero_copy != 0;
      o.async_thread_cpu = copts->async_thread_cpu;
      o.keep = copts->keep;
      o.compress = copts->compress != 0;
      o.compress_level = copts->compress_level;
      o.verbose = copts->verbose != 0;
      o.interval_auto = copts->interval == -1;
      o.interval = o.interval_auto ? 0 : copts->interval;  // < 0 otherwise: refused by the Checkpoint
      o.mtbf = copts->mtbf;
      if (std::memchr(copts->heartbeat_dir, '\0', sizeof copts->heartbeat_dir) == nullptr)
        throw revive::Error("revive_cp_create_with: heartbeat_dir is not NUL-terminated");
      o.heartbeat_dir = copts->heartbeat_dir;
    } else {
      o = revive::Options::from_env();
    }
    if (base) o.base_path = base;
    h = new revive_cp{std::make_unique<revive::Checkpoint>(name, o)};
    return 0;
  });
  return h;
}
}  // namespace

extern "C" {

int revive_options_from_env(revive_options* o) {
  if (!o) {
    g_error = "revive_options_from_env: null options";
    return -1;
  }
  return Guard([&] {
    revive::Options x = revive::Options::from_env();
    if (x.base_path.size() >= sizeof o->base_path) throw revive::Error("REVIVE_CP_PATH is too long");
    if (x.heartbeat_dir.size() >= sizeof o->heartbeat_dir) throw revive::Error("REVIVE_HEARTBEAT_DIR is too long");
    std::memset(o, 0, sizeof *o);
    std::memcpy(o->base_path, x.base_path.c_str(), x.base_path.size() + 1);
    o->read_on_restart = x.read_on_restart;
    o->async = x.async;
    o->zero_copy = x.zero_copy;
    o->async_thread_cpu = x.async_thread_cpu;
    o->keep = x.keep;
    o->compress = x.compress;
    o->compress_level = x.compress_level;
    o->verbose = x.verbose;
    o->interval = x.interval_auto ? -1 : x.interval;
    o->mtbf = x.mtbf;
    std::memcpy(o->heartbeat_dir, x.heartbeat_dir.c_str(), x.heartbeat_dir.size() + 1);
    return 0;
  });
}
revive_cp* revive_cp_create_with(const char* name, const revive_options* o) {
  if (!o) {
    g_error = "revive_cp_create_with: null options";
    return nullptr;
  }
  return Create(name, nullptr, o);
}
revive_cp* revive_cp_create(const char* name) { return Create(name, nullptr, nullptr); }
revive_cp* revive_cp_create_at(const char* name, const char* base_path) { return Create(name, base_path, nullptr); }
void revive_cp_destroy(revive_cp* cp) { delete cp; }

int revive_cp_add_int(revive_cp* cp, const char* key, int* p, size_t n) { return AddArray(cp, key, p, n, "revive_cp_add_int"); }
int revive_cp_add_int64(revive_cp* cp, const char* key, int64_t* p, size_t n) { return AddArray(cp, key, p, n, "revive_cp_add_int64"); }
int revive_cp_add_float(revive_cp* cp, const char* key, float* p, size_t n) { return AddArray(cp, key, p, n, "revive_cp_add_float"); }
int revive_cp_add_double(revive_cp* cp, const char* key, double* p, size_t n) { return AddArray(cp, key, p, n, "revive_cp_add_double"); }
int revive_cp_add_complex_double(revive_cp* cp, const char* key, double* p, size_t n) {
  // std::complex<double> is layout-compatible with double[2] (C++ [complex.numbers]).
  return AddArray(cp, key, reinterpret_cast<std::complex<double>*>(p), n, "revive_cp_add_complex_double");
}
int revive_cp_add_char(revive_cp* cp, const char* key, char* p, size_t n) { return AddArray(cp, key, p, n, "revive_cp_add_char"); }
int revive_cp_add_bytes(revive_cp* cp, const char* key, void* p, size_t nbytes) {
  return AddArray(cp, key, static_cast<unsigned char*>(p), nbytes, "revive_cp_add_bytes");
}
int revive_cp_add_child(revive_cp* parent, revive_cp* child) {
  if (!parent || !child) return NullHandle("revive_cp_add_child");
  return Guard([&] { parent->cp->add_child(*child->cp); return 0; });
}
int revive_cp_commit(revive_cp* cp) {
  if (!cp) return NullHandle("revive_cp_commit");
  return Guard([&] { cp->cp->commit(); return 0; });
}
int revive_cp_restart_if_needed(revive_cp* cp, int64_t* iteration) {
  if (!cp) return NullHandle("revive_cp_restart_if_needed");
  return Guard([&] { return cp->cp->restart_if_needed(iteration) ? 1 : 0; });
}
int revive_cp_update_and_write(revive_cp* cp, int64_t iteration, int64_t every) {
  if (!cp) return NullHandle("revive_cp_update_and_write");
  return Guard([&] { return cp->cp->update_and_write(iteration, every) ? 1 : 0; });
}
int revive_cp_write(revive_cp* cp, int64_t iteration) {
  if (!cp) return NullHandle("revive_cp_write");
  return Guard([&] { cp->cp->write(iteration); return 0; });
}
int revive_cp_update(revive_cp* cp) {
  if (!cp) return NullHandle("revive_cp_update");
  return Guard([&] { cp->cp->update(); return 0; });
}
int revive_cp_wait(revive_cp* cp) {
  if (!cp) return NullHandle("revive_cp_wait");
  return Guard([&] { cp->cp->wait(); return 0; });
}
uint64_t revive_cp_version(const revive_cp* cp) { return cp ? cp->cp->version() : 0; }
const char* revive_last_error(void) { return g_error.c_str(); }

}  // extern "C"
