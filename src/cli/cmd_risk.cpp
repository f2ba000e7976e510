// `revive risk`: the probability of a catastrophic failure P_cf of parity groups over a failure-domain
// hierarchy, and (`--interval`) Daly's and Young's checkpoint intervals. The arithmetic is
// core/resilience.h; this file parses, checks and prints. Exit status: 0, or 2 on bad input (the message
// names the option).
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/commands.h"
#include "core/resilience.h"

namespace revive::cli {
namespace {
namespace rs = revive::resilience;

struct RiskArgs {
  std::string group_size, parity = "1", aware_up_to, period_days = "1";
  std::vector<std::string> levels;  // NAME:COUNT:FAILURES_PER_DAY, outermost first
  bool interval = false;
  std::string ckpt_cost, mtbf;
  bool json = false;
};

int Bad(const std::string& msg) {
  std::fprintf(stderr, "revive risk: %s\n", msg.c_str());
  return 2;
}

// Whole-string parses; false on garbage, overflow or NaN.
bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (errno || *end || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool ParseCount(const std::string& s, uint64_t* out) {
  if (s.empty() || s[0] == '-' || s[0] == '+') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

int Interval(const RiskArgs& a) {
  double delta = 0, mtbf = 0;
  if (a.ckpt_cost.empty()) return Bad("--interval needs --ckpt-cost SECONDS");
  if (a.mtbf.empty()) return Bad("--interval needs --mtbf SECONDS");
  if (!ParseDouble(a.ckpt_cost, &delta) || delta <= 0)
    return Bad("--ckpt-cost: '" + a.ckpt_cost + "' is not a positive number of seconds");
  if (!ParseDouble(a.mtbf, &mtbf) || mtbf <= 0)
    return Bad("--mtbf: '" + a.mtbf + "' is not a positive number of seconds");
  const double daly = rs::DalyInterval(delta, mtbf), young = rs::YoungInterval(delta, mtbf);
  if (a.json) {
    nlohmann::json j{{"ckpt_cost_s", delta}, {"mtbf_s", mtbf}, {"daly_s", daly}, {"young_s", young},
                     {"daly_is_mtbf", delta >= 2 * mtbf}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("checkpoint cost %g s, MTBF %g s\n", delta, mtbf);
  std::printf("Daly (higher order): %.2f s%s\n", daly, delta >= 2 * mtbf ? "  (cost >= 2 MTBF: the MTBF itself)" : "");
  std::printf("Young (first order): %.2f s\n", young);
  return 0;
}

int Risk(const RiskArgs& a) {
  if (a.interval) {
    if (!a.levels.empty() || !a.group_size.empty() || !a.aware_up_to.empty())
      return Bad("--interval takes only --ckpt-cost, --mtbf and --json (not --level, --group-size, --aware-up-to)");
    return Interval(a);
  }
  if (!a.ckpt_cost.empty() || !a.mtbf.empty()) return Bad("--ckpt-cost and --mtbf go with --interval");
  uint64_t group = 0, parity = 0;
  double days = 0;
  if (a.group_size.empty()) return Bad("--group-size is required (processes per group, checksum ones included)");
  if (!ParseCount(a.group_size, &group) || group < 2)
    return Bad("--group-size: '" + a.group_size + "' is not a whole number of at least 2");
  if (!ParseCount(a.parity, &parity) || parity < 1 || parity >= group)
    return Bad("--parity: '" + a.parity + "' is not a whole number from 1 to group size - 1");
  if (!ParseDouble(a.period_days, &days) || days <= 0)
    return Bad("--period-days: '" + a.period_days + "' is not a positive number of days");
  if (a.levels.empty()) return Bad("--level NAME:COUNT:FAILURES_PER_DAY is required (once per level, outermost first)");

  struct Given {
    std::string name;
    uint64_t count;
    double rate;
  };
  std::vector<Given> given;  // outermost first
  std::set<std::string> names;
  for (const std::string& spec : a.levels) {
    const size_t c1 = spec.find(':'), c2 = c1 == std::string::npos ? c1 : spec.find(':', c1 + 1);
    if (c2 == std::string::npos || spec.find(':', c2 + 1) != std::string::npos)
      return Bad("--level: '" + spec + "' is not NAME:COUNT:FAILURES_PER_DAY");
    Given g{spec.substr(0, c1), 0, 0};
    const std::string count = spec.substr(c1 + 1, c2 - c1 - 1), rate = spec.substr(c2 + 1);
    if (g.name.empty()) return Bad("--level: '" + spec + "' has no name");
    if (!names.insert(g.name).second) return Bad("--level: level '" + g.name + "' given twice");
    if (!ParseCount(count, &g.count) || g.count == 0)
      return Bad("--level " + g.name + ": element count '" + count + "' is not a whole number of at least 1");
    if (!ParseDouble(rate, &g.rate) || g.rate < 0)
      return Bad("--level " + g.name + ": failures per day '" + rate + "' is not a number >= 0");
    given.push_back(g);
  }

  rs::RiskInput in;
  in.group_size = group;
  in.parity = static_cast<unsigned>(parity);
  // The library counts levels innermost first (the paper's j = 1 is the smallest failure domain).
  for (auto it = given.rbegin(); it != given.rend(); ++it)
    in.levels.push_back(rs::PoissonLevel(it->name, it->count, it->rate, days));
  if (!a.aware_up_to.empty() && a.aware_up_to != "none") {
    size_t n = 0;
    while (n < in.levels.size() && in.levels[n].name != a.aware_up_to) ++n;
    if (n == in.levels.size()) {
      std::string known;
      for (const Given& g : given) known += (known.empty() ? "" : ", ") + g.name;
      return Bad("--aware-up-to: no level named '" + a.aware_up_to + "' (levels: " + known + ", or none)");
    }
    in.aware_up_to = static_cast<unsigned>(n + 1);
  }
  if (std::string e = rs::ValidateRisk(in); !e.empty())
    return Bad((in.aware_up_to && e.find("fewer than the group size") != std::string::npos ? "--aware-up-to: "
                                                                                             : "") + e);
  const rs::RiskResult r = rs::CatastrophicFailureProbability(in);

  const std::string aware = in.aware_up_to ? in.levels[in.aware_up_to - 1].name : "none";
  if (a.json) {
    nlohmann::json j{{"p_cf", r.p_cf},     {"period_days", days}, {"group_size", group},
                     {"parity", parity}, {"aware_up_to", aware}, {"levels", nlohmann::json::array()}};
    for (size_t i = 0; i < given.size(); ++i) {
      const rs::LevelRisk& l = r.levels[given.size() - 1 - i];
      j["levels"].push_back({{"name", l.name},
                             {"count", given[i].count},
                             {"failures_per_day", given[i].rate},
                             {"aware", l.aware},
                             {"p_any_failure", l.p_any},
                             {"p_cf", l.p_cf}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("P_cf per %g day%s: %.4g  (group size %llu, parity %llu, t-aware up to %s)\n", days,
              days == 1 ? "" : "s", r.p_cf, static_cast<unsigned long long>(group),
              static_cast<unsigned long long>(parity), aware.c_str());
  std::printf("%-12s %10s %14s %8s %14s %14s\n", "level", "elements", "failures/day", "aware", "P(>=1 fails)",
              "P_cf term");
  for (size_t i = 0; i < given.size(); ++i) {
    const rs::LevelRisk& l = r.levels[given.size() - 1 - i];
    std::printf("%-12s %10llu %14g %8s %14.4g %14.4g\n", l.name.c_str(),
                static_cast<unsigned long long>(given[i].count), given[i].rate, l.aware ? "yes" : "no", l.p_any,
                l.p_cf);
  }
  return 0;
}

}  // namespace

void AddRiskCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<RiskArgs>();
  CLI::App* c = app.add_subcommand("risk", "Probability of a catastrophic failure; optimum checkpoint interval");
  c->footer(
      "revive risk --group-size G [--parity M] --level NAME:COUNT:FAILURES_PER_DAY... [--aware-up-to NAME]\n"
      "            [--period-days D] [--json]\n"
      "  P_cf: the probability, per period, that more than M members of one parity group are lost (ftRMA\n"
      "  paper, eqs. 7-9). Levels outermost first (e.g. --level rack:40:0.01 --level node:1400:0.5); failures\n"
      "  of a level are Poisson with the given rate for the whole level. --aware-up-to NAME: the group's\n"
      "  members sit on distinct elements of NAME and of every level inside it (default none: any failure is\n"
      "  counted as catastrophic).\n"
      "revive risk --interval --ckpt-cost SECONDS --mtbf SECONDS [--json]\n"
      "  Daly's higher-order and Young's first-order optimum interval between checkpoints.\n"
      "See docs/storage-levels.md, \"Risk and interval\". Exit status: 0, or 2 on bad input.");
  c->add_option("--group-size", a->group_size, "Processes per parity group, checksum processes included");
  c->add_option("--parity", a->parity, "Checksum processes per group (default 1: XOR)");
  c->add_option("--level", a->levels, "NAME:COUNT:FAILURES_PER_DAY, repeatable, outermost level first");
  c->add_option("--aware-up-to", a->aware_up_to, "Outermost t-aware level (it and the levels inside it), or none");
  c->add_option("--period-days", a->period_days, "Period of the probability, in days (default 1)");
  c->add_flag("--interval", a->interval, "Print Daly's and Young's checkpoint intervals instead");
  c->add_option("--ckpt-cost", a->ckpt_cost, "With --interval: time to take one checkpoint, seconds");
  c->add_option("--mtbf", a->mtbf, "With --interval: mean time between failures, seconds");
  c->add_flag("--json", a->json, "Machine-readable output");
  c->callback([a, rc] { *rc = Risk(*a); });
}

}  // namespace revive::cli
