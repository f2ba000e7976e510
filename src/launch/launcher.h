// How a command gets onto a host: a launcher template, expanded into an argv that runs locally.
//
// A template is split into words like a shell would split it (whitespace; '...' and "..." quote), then:
//   {host}  inside any word becomes the host name;
//   {cmd}   as a whole word becomes the command's words, one argv entry each (exec-style launchers:
//           `ip netns exec {host} {cmd}`, `srun -w {host} -N1 -n1 {cmd}`);
//   {cmdq}  inside a word becomes the command as ONE shell-quoted string (launchers whose far side runs a
//           shell: `ssh {host} {cmdq}`).
// Named templates: "local" = `{cmd}`, "ssh" = `ssh -o BatchMode=yes {host} {cmdq}`,
// "netns" = `ip netns exec {host} {cmd}`, "srun" = `srun --overlap -N1 -n1 -w {host} {cmd}`.
// The command should carry its own environment (`env K=V ... prog`): ssh does not forward it.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace revive::launch {

// A named template's text, or `spec` itself when it is not a name.
std::string ResolveTemplate(const std::string& spec);

// Checks the template (balanced quotes, exactly one {cmd} or {cmdq}) and expands it. Errors name the
// template and the reason.
Status Expand(const std::string& tmpl, const std::string& host, const std::vector<std::string>& cmd,
              std::vector<std::string>* argv);

// 'it'\''s' style quoting, safe for any byte string in a POSIX shell.
std::string ShellQuote(const std::string& s);

}  // namespace revive::launch
