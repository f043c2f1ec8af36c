#include "cluster/schedule.hh"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace rb::cluster {
namespace {

// The circle method: host 0 stays, the others turn; round r pairs slot i with slot n-1-i. An odd
// count gets a phantom host (n), whose partner sits the round out.
std::vector<std::vector<Pair>> round_robin(int hosts) {
  int n = hosts % 2 ? hosts + 1 : hosts;
  std::vector<int> slot(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) slot[size_t(i)] = i;
  std::vector<std::vector<Pair>> rounds;
  for (int r = 0; r < n - 1; ++r) {
    std::vector<Pair> round;
    for (int i = 0; i < n / 2; ++i) {
      int a = slot[size_t(i)], b = slot[size_t(n - 1 - i)];
      if (a < hosts && b < hosts) round.push_back({std::min(a, b), std::max(a, b)});
    }
    rounds.push_back(round);
    int last = slot.back();  // turn every slot but the first
    for (int i = n - 1; i > 1; --i) slot[size_t(i)] = slot[size_t(i - 1)];
    slot[1] = last;
  }
  return rounds;
}

}  // namespace

Result<Pattern> parse_pattern(const std::string& text, const char* flag) {
  auto bad = [&](const std::string& why) {
    return Status(Errc::invalid_argument, fmt::format("{} '{}': {}", flag, text, why));
  };
  if (text == "pairs") return Pattern{Pattern::Kind::pairs, 0};
  if (text == "ring") return Pattern{Pattern::Kind::ring, 0};
  if (text == "alltoall") return Pattern{Pattern::Kind::alltoall, 0};
  if (text.rfind("incast", 0) != 0) return bad("give pairs, ring, alltoall, incast or incast N:1");
  std::string rest = text.substr(6);
  while (!rest.empty() && (rest[0] == ' ' || rest[0] == ':')) rest.erase(0, 1);
  if (rest.empty()) return Pattern{Pattern::Kind::incast, 0};
  if (rest.size() > 2 && rest.compare(rest.size() - 2, 2, ":1") == 0) rest.resize(rest.size() - 2);
  if (rest.empty() || rest.size() > 6 || !std::all_of(rest.begin(), rest.end(), [](char c) { return std::isdigit(c); }))
    return bad("incast takes the sources per destination, e.g. incast 3:1");
  int n = std::stoi(rest);
  if (n < 1) return bad("incast needs at least one source, e.g. incast 3:1");
  return Pattern{Pattern::Kind::incast, n};
}

std::string pattern_text(const Pattern& p) {
  switch (p.kind) {
    case Pattern::Kind::pairs: return "pairs";
    case Pattern::Kind::ring: return "ring";
    case Pattern::Kind::alltoall: return "alltoall";
    case Pattern::Kind::incast: return p.fan_in ? fmt::format("incast {}:1", p.fan_in) : "incast";
  }
  return "?";
}

Result<std::vector<Round>> schedule(const Pattern& p, int hosts) {
  if (hosts < 2)
    return Status(Errc::invalid_argument, fmt::format("--cluster needs at least 2 hosts, this job has {}", hosts));
  std::vector<Round> rounds;
  switch (p.kind) {
    case Pattern::Kind::pairs: {
      auto rr = round_robin(hosts);
      for (const auto& r : rr) rounds.push_back(r);
      for (const auto& r : rr) {  // the same rounds the other way
        Round back;
        for (const auto& pr : r) back.push_back({pr.dst, pr.src});
        rounds.push_back(back);
      }
      break;
    }
    case Pattern::Kind::ring: {
      Round r;
      for (int i = 0; i < hosts; ++i) r.push_back({i, (i + 1) % hosts});
      rounds.push_back(r);
      break;
    }
    case Pattern::Kind::alltoall: {
      Round r;
      for (int i = 0; i < hosts; ++i)
        for (int j = 0; j < hosts; ++j)
          if (i != j) r.push_back({i, j});
      rounds.push_back(r);
      break;
    }
    case Pattern::Kind::incast: {
      int n = p.fan_in ? p.fan_in : hosts - 1;
      if (n > hosts - 1)
        return Status(Errc::invalid_argument, fmt::format("--pattern incast {}:1 needs {} hosts, this job has {}", n, n + 1, hosts));
      for (int d = 0; d < hosts; ++d) {
        Round r;
        for (int k = 1; k <= n; ++k) r.push_back({(d + k) % hosts, d});
        rounds.push_back(r);
      }
      break;
    }
  }
  return rounds;
}

}  // namespace rb::cluster
