// C++: exceptions thrown and caught across frames, iostreams, std::map/std::string on the heap.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

static int risky(int i) {
  if (i % 7 == 3) throw std::runtime_error("seven-three " + std::to_string(i));
  return i * i;
}

int main(int argc, char** argv) {
  int steps = argc > 1 ? std::atoi(argv[1]) : 300;
  std::map<std::string, long> counts;
  long sum = 0;
  for (int i = 0; i < steps; ++i) {
    try {
      sum += risky(i);
      counts["ok"]++;
    } catch (const std::exception& e) {
      std::ostringstream os;
      os << e.what()[0] << (i % 5);
      counts[os.str()]++;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (const auto& [k, v] : counts) std::cout << k << '=' << v << '\n';
  std::cout << "sum=" << sum << std::endl;
  return static_cast<int>(sum % 5);
}
