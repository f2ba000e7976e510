// `revive restart --lazy` maps the images' uncompressed chunks into the restored processes instead of
// reading them, so revive-restart cannot check their checksums before the program runs (an eager restart
// checks every chunk first). This checks them beside the running computation: every chunk a lazy restore
// maps is read from the image (which also brings it into the page cache the program's faults read from)
// and compared with its checksum. A damaged one is named and the computation stopped, so a program never
// runs on to its end on bytes nobody verified.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace revive::cli {

class LazyVerifier {
 public:
  // Starts checking `images` on a thread of its own; on the first damaged chunk it prints what and where
  // (prefixed with `who`) and calls stop(that message) once.
  LazyVerifier(const char* who, std::vector<std::string> images, std::function<void(const std::string&)> stop);
  // Ends the check (the computation ended first: what is left is not read) and joins the thread.
  ~LazyVerifier();
  // Whether a damaged chunk was found (after the destructor, or once stop() was called).
  bool found_damage() const { return damaged_.load(); }

 private:
  void Run();
  const char* who_;
  std::vector<std::string> images_;
  std::function<void(const std::string&)> stop_;
  std::atomic<bool> quit_{false}, damaged_{false};
  std::thread thread_;
};

}  // namespace revive::cli
