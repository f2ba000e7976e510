#include "applevel/async_writer.h"

#include <pthread.h>
#include <sched.h>

#include <cstdio>
#include <cstring>

namespace revive::applevel {

AsyncWriter::~AsyncWriter() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void AsyncWriter::Submit(std::function<void()> job) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return !busy_; });
  job_ = std::move(job);
  busy_ = true;
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  l.unlock();
  cv_.notify_all();
}

void AsyncWriter::Wait() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return !busy_; });
}

bool AsyncWriter::Busy() {
  std::lock_guard<std::mutex> l(mu_);
  return busy_;
}

void AsyncWriter::Loop() {
  if (cpu_ >= CPU_SETSIZE) {
    std::fprintf(stderr, "revive: cannot pin the async writer to CPU %d: beyond CPU_SETSIZE\n", cpu_);
  } else if (cpu_ >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu_, &set);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    // Not fatal: the writer still works unpinned, but the user asked, so say why it did not happen.
    if (rc != 0) std::fprintf(stderr, "revive: cannot pin the async writer to CPU %d: %s\n", cpu_, std::strerror(rc));
  }
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return stop_ || (busy_ && job_); });
    if (stop_ && !busy_) return;
    if (!job_) return;
    auto job = std::move(job_);
    job_ = nullptr;
    l.unlock();
    job();
    l.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace revive::applevel
