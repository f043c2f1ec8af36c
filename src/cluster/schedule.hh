#pragma once
// Which host measures against which, and in what rounds: the pairs of a round run at once,
// rounds one after another.
#include <string>
#include <vector>

#include "core/status.hh"

namespace rb::cluster {

struct Pattern {
  enum class Kind { pairs, ring, alltoall, incast } kind = Kind::pairs;
  int fan_in = 0;  // incast: sources per destination; 0 = every other host
};

// "pairs", "ring", "alltoall", "incast" or "incast N:1" (also "incast:N"); `flag` names it in errors.
Result<Pattern> parse_pattern(const std::string& text, const char* flag);
std::string pattern_text(const Pattern& p);

struct Pair {
  int src = 0, dst = 0;
};
using Round = std::vector<Pair>;

// pairs: every ordered pair, each host in at most one pair per round (2(n-1) rounds, n-1 of them
// for odd n leave one host out); ring: one round of i -> i+1; alltoall: one round of every ordered
// pair; incast N:1: a round per destination d, its sources the N hosts after d.
Result<std::vector<Round>> schedule(const Pattern& p, int hosts);

}  // namespace rb::cluster
