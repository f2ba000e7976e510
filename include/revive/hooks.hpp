// <revive/hooks.hpp> — C++ interface of the application hooks (over <revive/hooks.h>; docs/hooks.md):
// callbacks as std::function with a registration that unregisters when it goes out of scope, and an RAII
// critical section.
//
//   auto on_ckpt = revive::hooks::on_checkpoint([&] { log.flush(); });
//   { revive::hooks::CriticalSection cs; update_both_halves(); }
#pragma once

#include <revive/hooks.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <system_error>
#include <utility>

namespace revive::hooks {

enum class Event { checkpoint = REVIVE_HOOK_CHECKPOINT, resume = REVIVE_HOOK_CONTINUE, restart = REVIVE_HOOK_RESTART };

inline bool active() noexcept { return revive_hooks_active() != 0; }

// A registered callback; unregistered (after any run of it has returned) when destroyed. Move-only.
class Registration {
 public:
  Registration() = default;
  // Throws std::system_error when the C API refuses (see revive_register_callback).
  Registration(Event e, std::function<void()> fn) : fn_(std::make_unique<std::function<void()>>(std::move(fn))) {
    int r = revive_register_callback(static_cast<int>(e), &Registration::trampoline, fn_.get());
    if (r < 0) throw std::system_error(-r, std::generic_category(), "revive_register_callback");
    id_ = r;
  }
  Registration(Registration&& o) noexcept : fn_(std::move(o.fn_)), id_(std::exchange(o.id_, 0)) {}
  Registration& operator=(Registration&& o) noexcept {
    if (this != &o) {
      reset();
      fn_ = std::move(o.fn_);
      id_ = std::exchange(o.id_, 0);
    }
    return *this;
  }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
  ~Registration() { reset(); }

  void reset() noexcept {
    if (id_ > 0) revive_unregister_callback(id_);
    id_ = 0;
    fn_.reset();
  }
  int id() const noexcept { return id_; }

 private:
  // No exception crosses into the C library: one escaping a callback is reported and dropped.
  static void trampoline(void* p) noexcept {
    try {
      (*static_cast<std::function<void()>*>(p))();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "revive: a hooks callback threw: %s (ignored)\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "revive: a hooks callback threw (ignored)\n");
    }
  }
  std::unique_ptr<std::function<void()>> fn_;
  int id_ = 0;
};

[[nodiscard]] inline Registration on_checkpoint(std::function<void()> f) { return {Event::checkpoint, std::move(f)}; }
[[nodiscard]] inline Registration on_continue(std::function<void()> f) { return {Event::resume, std::move(f)}; }
[[nodiscard]] inline Registration on_restart(std::function<void()> f) { return {Event::restart, std::move(f)}; }

// No checkpoint is taken while one exists on any thread (see revive_critical_begin).
class CriticalSection {
 public:
  CriticalSection() noexcept { revive_critical_begin(); }
  ~CriticalSection() { revive_critical_end(); }
  CriticalSection(const CriticalSection&) = delete;
  CriticalSection& operator=(const CriticalSection&) = delete;
};

// Throws std::system_error for a non-positive duration.
inline void set_critical_timeout(std::chrono::duration<double> d) {
  int r = revive_set_critical_timeout(d.count());
  if (r < 0) throw std::system_error(-r, std::generic_category(), "revive_set_critical_timeout");
}
inline std::chrono::duration<double> critical_timeout() noexcept {
  return std::chrono::duration<double>(revive_critical_timeout());
}

}  // namespace revive::hooks
