// Cluster mode's pure parts: the rounds each pattern makes, the threshold texts, the verdict on a
// set of records, the hosts file, the new control messages and the cluster flags' rules.
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "../../apps/rdmabench/cli.hh"
#include "cluster/outcome.hh"
#include "cluster/schedule.hh"
#include "cluster/tcp_hosts.hh"
#include "protocol/messages.hh"

namespace rb::cluster {
namespace {

std::vector<Round> rounds_of(const std::string& pattern, int hosts) {
  auto p = parse_pattern(pattern, "--pattern");
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  auto r = schedule(*p, hosts);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r ? *r : std::vector<Round>{};
}

TEST(ClusterSchedule, PairsCoverEveryOrderedPairOnceWithEachHostInOnePairPerRound) {
  for (int n : {2, 3, 4, 5, 8}) {
    auto rounds = rounds_of("pairs", n);
    EXPECT_EQ(rounds.size(), size_t(n % 2 ? 2 * n : 2 * (n - 1))) << n;
    std::set<std::pair<int, int>> seen;
    for (const auto& round : rounds) {
      std::set<int> busy;
      for (const auto& p : round) {
        EXPECT_NE(p.src, p.dst);
        EXPECT_TRUE(busy.insert(p.src).second) << "host " << p.src << " twice in a round, n=" << n;
        EXPECT_TRUE(busy.insert(p.dst).second) << "host " << p.dst << " twice in a round, n=" << n;
        EXPECT_TRUE(seen.insert({p.src, p.dst}).second) << p.src << "->" << p.dst << " twice, n=" << n;
      }
    }
    EXPECT_EQ(seen.size(), size_t(n * (n - 1))) << n;
  }
}

TEST(ClusterSchedule, RingAlltoallAndIncast) {
  auto ring = rounds_of("ring", 4);
  ASSERT_EQ(ring.size(), 1u);
  ASSERT_EQ(ring[0].size(), 4u);
  for (const auto& p : ring[0]) EXPECT_EQ(p.dst, (p.src + 1) % 4);
  auto all = rounds_of("alltoall", 4);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].size(), 12u);
  auto incast = rounds_of("incast 2:1", 4);
  ASSERT_EQ(incast.size(), 4u);  // one round per destination
  for (size_t d = 0; d < incast.size(); ++d) {
    ASSERT_EQ(incast[d].size(), 2u);
    for (const auto& p : incast[d]) EXPECT_EQ(p.dst, int(d));
  }
  EXPECT_EQ(rounds_of("incast", 4)[0].size(), 3u);  // every other host
  auto too_many = schedule(*parse_pattern("incast 4:1", "--pattern"), 4);
  ASSERT_FALSE(too_many.is_ok());
  EXPECT_NE(too_many.status().message().find("needs 5 hosts, this job has 4"), std::string::npos);
  EXPECT_FALSE(schedule(Pattern{}, 1).is_ok());
}

TEST(ClusterSchedule, PatternTexts) {
  EXPECT_EQ(parse_pattern("incast:3", "--pattern")->fan_in, 3);
  EXPECT_EQ(parse_pattern("incast3:1", "--pattern")->fan_in, 3);
  EXPECT_EQ(pattern_text(*parse_pattern("incast 3:1", "--pattern")), "incast 3:1");
  for (const char* bad : {"pair", "incast 0:1", "incast x:1", "incast 3:2", ""}) {
    auto p = parse_pattern(bad, "--pattern");
    ASSERT_FALSE(p.is_ok()) << bad;
    EXPECT_EQ(p.status().message().rfind(std::string("--pattern '") + bad + "'", 0), 0u) << p.status().message();
  }
}

TEST(ClusterThresholds, BandwidthAndLatencyTexts) {
  auto line = parse_expect_bw("0.9xline", "--expect-bw");
  ASSERT_TRUE(line.is_ok());
  EXPECT_TRUE(line->of_line);
  EXPECT_DOUBLE_EQ(line->value, 0.9);
  EXPECT_DOUBLE_EQ(parse_expect_bw("25Gbps", "--expect-bw")->value, 25);
  EXPECT_DOUBLE_EQ(parse_expect_bw("3GB/s", "--expect-bw")->value, 24);
  EXPECT_DOUBLE_EQ(parse_expect_bw("500Mbps", "--expect-bw")->value, 0.5);
  for (const char* bad : {"1.5xline", "fast", "25Tbps", "-1", "xline"}) {
    auto b = parse_expect_bw(bad, "--expect-bw");
    ASSERT_FALSE(b.is_ok()) << bad;
    EXPECT_EQ(b.status().message().rfind("--expect-bw", 0), 0u);
  }
  EXPECT_DOUBLE_EQ(*parse_expect_lat_us("2.5us", "--expect-lat"), 2.5);
  EXPECT_DOUBLE_EQ(*parse_expect_lat_us("2500ns", "--expect-lat"), 2.5);
  EXPECT_DOUBLE_EQ(*parse_expect_lat_us("0.003ms", "--expect-lat"), 3);
  EXPECT_FALSE(parse_expect_lat_us("2.5 parsecs", "--expect-lat").is_ok());
}

Record rec(int src, int dst, const char* mode, double figure, double line = 0) {
  Record r;
  r.src = src;
  r.dst = dst;
  r.round = src;
  r.op = "write";
  r.mode = mode;
  r.size = 65536;
  (std::string(mode) == "bw" ? r.gbps : r.p50_us) = figure;
  r.line_gbps = line;
  return r;
}

TEST(ClusterVerdict, TheSlowPairIsTheOutlierAndMissesTheThreshold) {
  Outcome o;
  o.names = {"h0", "h1", "h2"};
  for (auto [s, d, v] : std::vector<std::tuple<int, int, double>>{{0, 1, 10}, {1, 0, 9.5}, {0, 2, 1}, {2, 0, 10.2}, {1, 2, 9.8}, {2, 1, 10}})
    o.records.push_back(rec(s, d, "bw", v, 12.5));
  Thresholds t;
  t.expect_bw = BwExpect{0.5, true};
  auto groups = evaluate(o, t);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_DOUBLE_EQ(groups[0].median, 9.9);
  std::vector<std::string> out;
  for (const auto& c : groups[0].cells)
    if (c.outlier) out.push_back(o.names[size_t(c.src)] + ">" + o.names[size_t(c.dst)]);
  EXPECT_EQ(out, std::vector<std::string>{"h0>h2"});
  auto fails = acceptance_failures(o, groups);
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_NE(fails[0].find("h0 -> h2"), std::string::npos) << fails[0];
  EXPECT_NE(fails[0].find("0.5 x 12.5 Gb/s line"), std::string::npos) << fails[0];
}

// Every ordered pair of `n` hosts, `repeats` times: `gbps(src, dst, repeat)` each.
template <typename F>
Outcome every_pair(int n, int repeats, F gbps) {
  Outcome o;
  for (int h = 0; h < n; ++h) o.names.push_back("h" + std::to_string(h));
  for (int r = 0; r < repeats; ++r)
    for (int s = 0; s < n; ++s)
      for (int d = 0; d < n; ++d)
        if (s != d) {
          o.records.push_back(rec(s, d, "bw", gbps(s, d, r)));
          o.records.back().repeat = r;
        }
  return o;
}

std::vector<std::string> slow_sides(const Group& g) {
  std::vector<std::string> out;
  for (const auto& v : g.hosts) {
    if (v.sends.slow) out.push_back("h" + std::to_string(v.host) + " sends");
    if (v.receives.slow) out.push_back("h" + std::to_string(v.host) + " receives");
  }
  return out;
}

// Three hosts, one behind a slow link (0.19 against ~20 Gb/s): its pairs are 4 of the 6, so the
// median pair is slow and no pair is an outlier, yet the host is named, both ways, by how much.
TEST(ClusterHosts, AHostWithASlowLinkIsNamedWhereThePairsOutlierSeesNothing) {
  auto o = every_pair(3, 1, [](int s, int d, int) { return s == 2 || d == 2 ? 0.19 : 20.0 + s; });
  auto groups = evaluate(o, Thresholds{});
  ASSERT_EQ(groups.size(), 1u);
  int outliers = 0;
  for (const auto& c : groups[0].cells) outliers += c.outlier;
  EXPECT_EQ(outliers, 0);  // the relative verdict on pairs: "none"
  EXPECT_EQ(slow_sides(groups[0]), (std::vector<std::string>{"h2 sends", "h2 receives"}));
  EXPECT_NEAR(groups[0].hosts[2].sends.ratio, 0.19 / 20.5, 1e-9);
}

// A host slowed on egress only is a slow sender and a healthy receiver; with 5 hosts it is in
// few of the pairs and still named, and no healthy host is.
TEST(ClusterHosts, ASlowSenderAmongFiveIsNamedAsASenderOnly) {
  for (int n : {3, 5}) {
    auto o = every_pair(n, 2, [&](int s, int, int r) { return s == n - 1 ? 0.2 : 18.0 + r; });
    auto g = evaluate(o, Thresholds{})[0];
    EXPECT_EQ(slow_sides(g), std::vector<std::string>{"h" + std::to_string(n - 1) + " sends"}) << n << " hosts";
    EXPECT_EQ(g.hosts[size_t(n - 1)].sends.repeats_slow, 2);
  }
}

// Healthy hosts with spread (a run on a busy machine) name nobody; one slow repeat of a host
// that is fine in the other names nobody either.
TEST(ClusterHosts, NoiseAndOneSlowRepeatNameNobody) {
  auto healthy = every_pair(4, 3, [](int s, int d, int r) { return 15.0 + ((s * 7 + d * 3 + r * 5) % 6); });
  EXPECT_TRUE(slow_sides(evaluate(healthy, Thresholds{})[0]).empty());
  auto once = every_pair(3, 3, [](int s, int d, int r) { return (s == 1 || d == 1) && r == 0 ? 0.5 : 20.0; });
  auto g = evaluate(once, Thresholds{})[0];
  EXPECT_TRUE(slow_sides(g).empty());
  EXPECT_EQ(g.hosts[1].sends.repeats_slow, 1);
  EXPECT_EQ(g.hosts[1].sends.repeats_judged, 3);
}

// A healthy run on a busy machine (CI: mpirun -np 4 on 2 cores): rank 2's column has a median of
// 0.73 x the pairs without it in both repeats, yet its pairs mingle with the others'. Nobody is named.
TEST(ClusterHosts, AHostWhosePairsMingleWithTheOthersIsNotNamed) {
  const double bw[2][4][4] = {{{0, 14.5, 10.5, 9.2}, {15.2, 0, 9.6, 11.3}, {9.2, 19.5, 0, 9.8}, {15.4, 15.9, 10.5, 0}},
                              {{0, 19.8, 11.4, 9.4}, {15.6, 0, 10.7, 12.1}, {16.1, 23.5, 0, 18.0}, {17.3, 18.6, 12.5, 0}}};
  auto o = every_pair(4, 2, [&](int s, int d, int r) { return bw[r][s][d]; });
  auto g = evaluate(o, Thresholds{})[0];
  EXPECT_LT(g.hosts[2].receives.ratio, 0.8);
  EXPECT_TRUE(slow_sides(g).empty());
}

// Two hosts have no pairs without a host: nobody is judged.
TEST(ClusterHosts, TwoHostsAreNotJudged) {
  auto g = evaluate(every_pair(2, 1, [](int s, int, int) { return s ? 0.1 : 20.0; }), Thresholds{})[0];
  EXPECT_FALSE(g.hosts[0].sends.judged);
  EXPECT_TRUE(slow_sides(g).empty());
}

TEST(ClusterVerdict, ALineShareWithoutALinkSpeedIsAMissThatSaysSo) {
  Outcome o;
  o.names = {"h0", "h1"};
  o.records = {rec(0, 1, "bw", 10), rec(1, 0, "bw", 10)};
  Thresholds t;
  t.expect_bw = BwExpect{0.9, true};
  auto fails = acceptance_failures(o, evaluate(o, t));
  ASSERT_EQ(fails.size(), 2u);
  EXPECT_NE(fails[0].find("reports no link speed"), std::string::npos) << fails[0];
}

TEST(ClusterVerdict, LatencyOutliersAndFailedPairs) {
  Outcome o;
  o.names = {"h0", "h1", "h2"};
  o.records = {rec(0, 1, "lat", 2), rec(1, 0, "lat", 2.1), rec(1, 2, "lat", 9)};
  o.failed = {{1, 2, 0, "measured from h2: peer gone"}};
  Thresholds t;
  t.expect_lat_us = 5;
  auto groups = evaluate(o, t);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_FALSE(groups[0].is_bw);
  int outliers = 0;
  for (const auto& c : groups[0].cells) outliers += c.outlier;
  EXPECT_EQ(outliers, 1);
  auto fails = acceptance_failures(o, groups);
  ASSERT_EQ(fails.size(), 2u);  // the failed pair first, then h1 -> h2 over 5 us
  EXPECT_NE(fails[0].find("h2 -> h0: failed"), std::string::npos) << fails[0];
  EXPECT_NE(fails[1].find("p50 9.00 us > 5 us"), std::string::npos) << fails[1];
}

TEST(ClusterVerdict, RecordsComeFromResultLines) {
  auto r = record_of(R"({"op":"write","mode":"bw","size":4096,"results":{"gbps":3.5,"mops":0.1,"partial":false,"lat_us":{"p50":8.5}}})", 25);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->gbps, 3.5);
  EXPECT_DOUBLE_EQ(r->p50_us, 8.5);
  EXPECT_DOUBLE_EQ(r->line_gbps, 25);
  EXPECT_FALSE(record_of(R"({"op":"write"})", 0).is_ok());
  EXPECT_FALSE(record_of("not json", 0).is_ok());
}

std::string write_file(const std::string& text) {
  std::string path = ::testing::TempDir() + "hosts.txt";
  std::ofstream(path) << text;
  return path;
}

TEST(ClusterHostsFile, LinesCommentsAndMistakes) {
  auto ok = read_hosts_file(write_file("# rack 1\n10.0.0.1\n  10.0.0.2:7000  # spare port\n\n[::1]:7471\n"), 7471);
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  ASSERT_EQ(ok->size(), 3u);
  EXPECT_EQ((*ok)[0].port, 7471);
  EXPECT_EQ((*ok)[1].port, 7000);
  EXPECT_EQ((*ok)[2].host, "::1");
  auto twice = read_hosts_file(write_file("a\nb\na\n"), 7471);
  ASSERT_FALSE(twice.is_ok());
  EXPECT_NE(twice.status().message().find(":3: 'a' is listed twice"), std::string::npos) << twice.status().message();
  auto one = read_hosts_file(write_file("a\n"), 7471);
  ASSERT_FALSE(one.is_ok());
  EXPECT_NE(one.status().message().find("needs at least 2"), std::string::npos);
  auto spaced = read_hosts_file(write_file("a b\n"), 7471);
  ASSERT_FALSE(spaced.is_ok());
  EXPECT_NE(spaced.status().message().find(":1: 'a b': one HOST[:PORT] a line"), std::string::npos);
  EXPECT_FALSE(read_hosts_file("/nonexistent/hosts", 7471).is_ok());
}

TEST(ClusterMessages, DriveServeRecordPingRoundTrip) {
  protocol::Drive d;
  d.software = "x";
  d.target = "10.0.0.2:7471";
  d.target_rank = 3;
  d.session = 17;
  auto back = protocol::from_json(protocol::to_json(d));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  auto& got = std::get<protocol::Drive>(back.value());
  EXPECT_EQ(got.target, d.target);
  EXPECT_EQ(got.target_rank, 3);
  EXPECT_EQ(got.session, 17u);
  auto s = protocol::from_json(protocol::to_json(protocol::Serve{2, 9}));
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(std::get<protocol::Serve>(s.value()).from_rank, 2);
  auto r = protocol::from_json(protocol::to_json(protocol::PairRecord{"{}", 12.5}));
  ASSERT_TRUE(r.is_ok());
  EXPECT_DOUBLE_EQ(std::get<protocol::PairRecord>(r.value()).line_gbps, 12.5);
  EXPECT_TRUE(std::holds_alternative<protocol::Ping>(protocol::from_json(protocol::to_json(protocol::Ping{})).value()));
  auto missing = protocol::from_json(nlohmann::json{{"type", "serve"}, {"session", 1}});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("field 'from_rank'"), std::string::npos);
}

Status parse_error(const std::vector<std::string>& args) {
  auto c = app::parse_command_line(args);
  return c ? Status{} : c.status();
}

TEST(ClusterFlags, RulesBetweenFlags) {
  EXPECT_EQ(parse_error({"--pattern", "ring"}).message(), "--pattern applies to --cluster only; add --cluster or drop it");
  EXPECT_EQ(parse_error({"--cluster", "--addr", "h:1"}).message().rfind("--addr with --cluster", 0), 0u);
  EXPECT_EQ(parse_error({"--cluster", "--csv", "x.csv"}).message().rfind("--csv with --cluster", 0), 0u);
  EXPECT_EQ(parse_error({"--cluster", "--expect-lat", "2us"}).message().rfind("--expect-lat judges latency", 0), 0u);
  EXPECT_EQ(parse_error({"--cluster", "--mode", "lat", "--expect-bw", "1G"}).message().rfind("--expect-bw judges", 0), 0u);
  EXPECT_EQ(parse_error({"--cluster", "--outlier-bw", "1.5"}).message().rfind("--outlier-bw 1.5", 0), 0u);
  EXPECT_EQ(parse_error({"--cluster", "--hosts", "f", "--data-net", "lo"}).message().rfind("--data-net with --hosts", 0), 0u);
  EXPECT_EQ(parse_error({"--cluster", "--hosts", "f", "--bootstrap", "pmix"}).message().rfind("--bootstrap with --hosts", 0), 0u);
  EXPECT_EQ(parse_error({"--cluster", "--bootstrap", "slurm"}).message(), "--bootstrap 'slurm': give auto, pmix or mpi");
  EXPECT_EQ(parse_error({"--bootstrap", "mpi"}).message(), "--bootstrap applies to --cluster only; add --cluster or drop it");
  auto c = app::parse_command_line({"--cluster", "--hosts", "f", "--pattern", "incast 3:1", "--mode", "bw,lat",
                                    "--expect-bw", "0.9xline", "--expect-lat", "3us"});
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->kind, app::Command::Kind::cluster);
  EXPECT_EQ(c->cluster.pattern.fan_in, 3);
  EXPECT_EQ(c->cluster.hosts_file, "f");
  EXPECT_DOUBLE_EQ(*c->cluster.thresholds.expect_lat_us, 3);
  EXPECT_EQ(c->cluster.bootstrap, bootstrap::HubKind::automatic);
  auto m = app::parse_command_line({"--cluster", "--bootstrap", "mpi"});
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->cluster.bootstrap, bootstrap::HubKind::mpi);
}

}  // namespace
}  // namespace rb::cluster
