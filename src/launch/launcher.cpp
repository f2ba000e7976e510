#include "launch/launcher.h"

namespace revive::launch {
namespace {

Status SplitWords(const std::string& t, std::vector<std::string>* words) {
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (char c : t) {
    if (quote) {
      if (c == quote) quote = 0;
      else cur += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words->push_back(cur);
      cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (quote) return Status::InvalidArgument("launcher template \"" + t + "\": unbalanced " + quote);
  if (in_word) words->push_back(cur);
  return Status::OK();
}

void ReplaceAll(std::string* s, const std::string& from, const std::string& to) {
  for (size_t at = s->find(from); at != std::string::npos; at = s->find(from, at + to.size()))
    s->replace(at, from.size(), to);
}

}  // namespace

std::string ResolveTemplate(const std::string& spec) {
  if (spec.empty() || spec == "local") return "{cmd}";
  if (spec == "ssh") return "ssh -o BatchMode=yes {host} {cmdq}";
  if (spec == "netns") return "ip netns exec {host} {cmd}";
  // A step of one task on that node, sharing the allocation's resources with the batch step and the
  // other hosts' parts (--overlap), so it starts at once however the job asked for its CPUs.
  if (spec == "srun") return "srun --overlap -N1 -n1 -w {host} {cmd}";
  return spec;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

Status Expand(const std::string& tmpl, const std::string& host, const std::vector<std::string>& cmd,
              std::vector<std::string>* argv) {
  std::vector<std::string> words;
  Status s = SplitWords(tmpl, &words);
  if (!s.ok()) return s;
  if (words.empty()) return Status::InvalidArgument("launcher template is empty");
  std::string quoted;
  for (const auto& w : cmd) quoted += (quoted.empty() ? "" : " ") + ShellQuote(w);
  int slots = 0;
  argv->clear();
  for (auto w : words) {
    if (w == "{cmd}") {
      argv->insert(argv->end(), cmd.begin(), cmd.end());
      slots++;
      continue;
    }
    if (w.find("{cmd}") != std::string::npos)
      return Status::InvalidArgument("launcher template \"" + tmpl +
                                     "\": {cmd} must be a word of its own (use {cmdq} inside a word)");
    if (w.find("{cmdq}") != std::string::npos) slots++;
    ReplaceAll(&w, "{host}", host);
    ReplaceAll(&w, "{cmdq}", quoted);
    argv->push_back(w);
  }
  if (slots != 1)
    return Status::InvalidArgument("launcher template \"" + tmpl + "\": needs exactly one {cmd} or {cmdq}, has " +
                                   std::to_string(slots));
  if (host.empty() && tmpl.find("{host}") != std::string::npos)
    return Status::InvalidArgument("launcher template \"" + tmpl + "\" uses {host}, but no host was given");
  return Status::OK();
}

}  // namespace revive::launch
