#include "launch/slurm_hostlist.h"

#include <algorithm>

namespace revive::launch {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Characters of a host name outside brackets; the same safe alphabet as --hosts (hostlist.cpp) minus
// ':' and '@', which Slurm node names do not have.
bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || IsDigit(c) || c == '.' || c == '_' || c == '-';
}

// One bracket group's numbers, as strings with their padding: "1-3,07" -> {1,2,3,07}. A range's width is
// that of its first number when it has a leading zero ("001-010" -> 001..010), as in Slurm.
Status ExpandRanges(const std::string& body, size_t budget, std::vector<std::string>* out, std::string* why) {
  size_t start = 0;
  for (;;) {
    size_t comma = body.find(',', start);
    std::string r = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t dash = r.find('-');
    std::string lo = r.substr(0, dash), hi = dash == std::string::npos ? lo : r.substr(dash + 1);
    auto digits = [](const std::string& s) {
      if (s.empty() || s.size() > 9) return false;  // 9 digits: no overflow in unsigned long
      for (char c : s)
        if (!IsDigit(c)) return false;
      return true;
    };
    if (!digits(lo) || !digits(hi)) {
      *why = "range \"" + r + "\" is not N or N-M with up to 9 digits each";
      return Status::InvalidArgument(*why);
    }
    unsigned long a = std::stoul(lo), b = std::stoul(hi);
    if (b < a) {
      *why = "range \"" + r + "\" ends below its start";
      return Status::InvalidArgument(*why);
    }
    if (b - a + 1 > budget - std::min(budget, out->size())) {
      *why = "range \"" + r + "\" makes more than " + std::to_string(budget) + " hosts";
      return Status::InvalidArgument(*why);
    }
    size_t width = lo.size() > 1 && lo[0] == '0' ? lo.size() : 0;
    for (unsigned long v = a; v <= b; v++) {
      std::string n = std::to_string(v);
      if (n.size() < width) n.insert(0, width - n.size(), '0');
      out->push_back(n);
    }
    if (comma == std::string::npos) return Status::OK();
    start = comma + 1;
  }
}

// One top-level entry ("r[1-2]n[01-02]x"), appended to *hosts.
Status ExpandEntry(const std::string& e, size_t max_hosts, std::vector<std::string>* hosts, std::string* why) {
  if (e.empty()) {
    *why = "empty entry";
    return Status::InvalidArgument(*why);
  }
  std::vector<std::string> names = {""};  // the product so far
  size_t i = 0;
  while (i < e.size()) {
    if (e[i] == '[') {
      size_t close = e.find(']', i);
      if (close == std::string::npos) {
        *why = "entry \"" + e + "\" has a '[' without ']'";
        return Status::InvalidArgument(*why);
      }
      std::string body = e.substr(i + 1, close - i - 1);
      if (body.find('[') != std::string::npos) {
        *why = "entry \"" + e + "\" has nested brackets";
        return Status::InvalidArgument(*why);
      }
      std::vector<std::string> nums;
      Status s = ExpandRanges(body, max_hosts, &nums, why);
      if (!s.ok()) {
        *why = "entry \"" + e + "\": " + *why;
        return s;
      }
      if (names.size() * nums.size() + hosts->size() > max_hosts) {
        *why = "entry \"" + e + "\" makes more than " + std::to_string(max_hosts) + " hosts";
        return Status::InvalidArgument(*why);
      }
      std::vector<std::string> next;
      for (const std::string& n : names)
        for (const std::string& v : nums) next.push_back(n + v);
      names.swap(next);
      i = close + 1;
    } else if (NameChar(e[i])) {
      for (std::string& n : names) n += e[i];
      i++;
    } else {
      *why = "entry \"" + e + "\" has '" + std::string(1, e[i]) + "', not a host name character or bracket";
      return Status::InvalidArgument(*why);
    }
  }
  for (const std::string& n : names)
    if (n.size() > 63) {
      *why = "host \"" + n + "\" is longer than 63 bytes";
      return Status::InvalidArgument(*why);
    }
  hosts->insert(hosts->end(), names.begin(), names.end());
  return Status::OK();
}

}  // namespace

Status ExpandSlurmHostList(const std::string& list, std::vector<std::string>* hosts, size_t max_hosts) {
  hosts->clear();
  std::string why;
  // Split at commas outside brackets ("n[1,3],m" is two entries).
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= list.size(); i++) {
    if (i < list.size() && list[i] == '[') depth++;
    if (i < list.size() && list[i] == ']' && --depth < 0) {
      why = "']' without '['";
      break;
    }
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      if (!ExpandEntry(list.substr(start, i - start), max_hosts, hosts, &why).ok()) break;
      start = i + 1;
    }
  }
  if (why.empty()) return Status::OK();
  hosts->clear();
  return Status::InvalidArgument("Slurm node list \"" + list + "\": " + why);
}

}  // namespace revive::launch
