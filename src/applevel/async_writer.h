// One background thread that runs write jobs one at a time, optionally pinned to a CPU.
// It never talks to peers: collective steps (agreeing a version is complete, publishing) stay on the
// application thread, so the MPI flavour needs no MPI_THREAD_MULTIPLE. The exception is shared-file mode
// (Options::mpiio), whose job is a collective MPI-IO write on its own communicator: that one needs it.
#ifndef REVIVE_APPLEVEL_ASYNC_WRITER_H_
#define REVIVE_APPLEVEL_ASYNC_WRITER_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace revive::applevel {

class AsyncWriter {
 public:
  explicit AsyncWriter(int cpu) : cpu_(cpu) {}
  ~AsyncWriter();
  // Runs job on the thread (started on first use). At most one job is outstanding: call Wait() first.
  void Submit(std::function<void()> job);
  // Blocks until the submitted job (if any) has finished.
  void Wait();
  bool Busy();

 private:
  void Loop();
  int cpu_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool busy_ = false;
  bool stop_ = false;
};

}  // namespace revive::applevel

#endif  // REVIVE_APPLEVEL_ASYNC_WRITER_H_
