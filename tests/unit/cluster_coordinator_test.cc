// The coordinator's order of work: with --repeat N it runs the whole pattern N times, one pass
// after another, so a burst of noise on the machine lands on different pairs in each repeat
// rather than on one host's rounds in all of them. Hosts here answer over socketpairs.
#include <sys/socket.h>

#include <atomic>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cluster/coordinator.hh"

namespace rb::cluster {
namespace {

// Each pair "measures" at once: one record per repeat its spec asks for, then Bye.
class AnsweringHosts : public Hosts {
 public:
  explicit AnsweringHosts(int n) : n_(n) {}
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (int i = 0; i < n_; ++i) out.push_back(fmt::format("h{}", i));
    return out;
  }
  std::string reached_by() const override { return "hosts"; }
  Result<PairControl> start(const Pair& pair, uint64_t, const model::RunSpec& spec) override {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return Status(Errc::io, "socketpair");
    started.push_back({pair.src, pair.dst, spec.repeat});
    protocol::Peer source(bootstrap::Channel(fds[1]), "coordinator", 5);
    for (int r = 0; r < spec.repeat; ++r) {
      std::string line = fmt::format(
          R"({{"op":"write","mode":"bw","size":65536,"repeat":{},"results":{{"gbps":1,"mops":1,"partial":false,"lat_us":{{"p50":1}}}}}})", r);
      EXPECT_TRUE(source.send(protocol::PairRecord{line, 0}).is_ok());
    }
    EXPECT_TRUE(source.send(protocol::Bye{}).is_ok());
    PairControl ctl;
    ctl.driver = protocol::Peer(bootstrap::Channel(fds[0]), "source", 5);
    return ctl;
  }
  std::string unreachable(const std::vector<int>&, const std::atomic<bool>&) override { return ""; }

  struct Start {
    int src, dst, repeat;
  };
  std::vector<Start> started;

 private:
  int n_;
};

TEST(ClusterCoordinator, RepeatsArePassesOverThePatternNotRunsOfOnePair) {
  AnsweringHosts hosts(3);
  model::RunSpec spec;
  spec.repeat = 3;
  std::vector<Record> written;
  std::atomic<bool> stop{false};
  Status ended;
  auto pattern = parse_pattern("pairs", "--pattern");
  ASSERT_TRUE(pattern.is_ok());
  Outcome o = coordinate(hosts, spec, *pattern, [&](const Record& r) { return written.push_back(r), Status{}; }, stop, ended);
  ASSERT_TRUE(ended.is_ok()) << ended.message();

  const size_t pairs = 6;  // every ordered pair of 3 hosts
  ASSERT_EQ(hosts.started.size(), 3 * pairs);
  for (size_t i = 0; i < hosts.started.size(); ++i) {
    EXPECT_EQ(hosts.started[i].repeat, 1) << "start " << i << " asked one pair for all its repeats at once";
    if (i >= pairs) {  // pass 2 and 3 run the pairs of pass 1 again, in the same order
      EXPECT_EQ(hosts.started[i].src, hosts.started[i - pairs].src) << i;
      EXPECT_EQ(hosts.started[i].dst, hosts.started[i - pairs].dst) << i;
    }
  }
  EXPECT_EQ(o.rounds_planned, 3 * pairs);
  EXPECT_EQ(o.rounds_run, 3 * pairs);
  // Each record says which pass measured it, and the round is the pattern's, the same in every pass.
  ASSERT_EQ(written.size(), 3 * pairs);
  std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> seen;  // pair -> (repeat, round)
  for (const auto& r : written) {
    EXPECT_EQ(r.line.at("repeat").get<int>(), r.repeat);
    EXPECT_EQ(r.line.at("repeats").get<int>(), 3);
    EXPECT_EQ(r.line.at("cluster").at("round").get<int>(), r.round);
    seen[{r.src, r.dst}].push_back({r.repeat, r.round});
  }
  ASSERT_EQ(seen.size(), pairs);
  for (const auto& [pair, got] : seen) {
    ASSERT_EQ(got.size(), 3u);
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(got[size_t(k)].first, k);
      EXPECT_EQ(got[size_t(k)].second, got[0].second);
    }
  }
}

}  // namespace
}  // namespace rb::cluster
