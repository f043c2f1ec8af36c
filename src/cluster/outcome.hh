#pragma once
// What a cluster run gathered: every pair's records, the pairs that failed, and the verdict on
// them (the median pair, the outliers, the pairs that miss --expect-bw / --expect-lat).
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/schedule.hh"
#include "core/status.hh"

namespace rb::cluster {

struct Record {  // one phase of one pair, as its source measured it
  int round = 0, src = 0, dst = 0;
  int repeat = 0;  // which of --repeat's measurements
  std::string op, mode;
  uint64_t size = 0;
  double gbps = 0, mops = 0, p50_us = 0, line_gbps = 0;
  bool partial = false;
  nlohmann::json line;  // the JSON Lines object, with its "cluster" member
};
// The figures of one JSON line; an error names what is missing.
Result<Record> record_of(const std::string& json_line, double line_gbps);

struct FailedPair {
  int round = 0, src = 0, dst = 0;
  std::string error;  // names the host that failed
};

struct Outcome {
  Pattern pattern;
  std::vector<std::string> names;  // per host: "node3" or "10.0.0.3:7471"
  std::string reached_by;          // Hosts::reached_by
  std::vector<Record> records;
  std::vector<FailedPair> failed;
  size_t rounds_planned = 0, rounds_run = 0;
};

struct BwExpect {
  double value = 0;
  bool of_line = false;  // value is a share of the link speed the provider reports
};
// "0.9xline" (a share of the link), "25", "25G", "25Gbps" (Gb/s), "3GB/s"; `flag` names it in errors.
Result<BwExpect> parse_expect_bw(const std::string& text, const char* flag);
// "2.5us", "2500ns", "0.003ms", "2.5" (us).
Result<double> parse_expect_lat_us(const std::string& text, const char* flag);

struct Thresholds {
  double outlier_bw = 0.8;   // a pair below this share of the median bw is an outlier
  double outlier_lat = 2.0;  // a pair above this multiple of the median p50 latency is an outlier
  std::optional<BwExpect> expect_bw;
  std::optional<double> expect_lat_us;
};

struct Cell {
  int src = 0, dst = 0;
  double value = 0;  // Gb/s (bw) or p50 us (lat), the mean over repeats
  double line_gbps = 0;
  bool outlier = false;
  std::string miss;  // why it misses the acceptance threshold; empty when it meets it (or none set)
};

// A host's pairs on one side (as the source, or as the destination) against the pairs it takes
// no part in (cluster/host_verdict.hh).
struct HostSide {
  bool judged = false;       // there were pairs with it and pairs without it
  double ratio = 0;          // median of its pairs / median of the pairs without it
  double median = 0, others_median = 0;
  int repeats_judged = 0, repeats_slow = 0;
  double repeat_ratio_min = 0, repeat_ratio_max = 0;  // the spread of `ratio` over the repeats
  bool slow = false;         // slow overall and in every repeat judged
};

struct HostVerdict {
  int host = 0;
  HostSide sends, receives;
  bool named() const { return sends.slow || receives.slow; }
};

struct Group {  // one op x mode x size: a matrix
  std::string op, mode;
  uint64_t size = 0;
  bool is_bw = true;
  double median = 0;
  std::vector<Cell> cells;
  std::vector<double> round_gbps;  // bw: the sum over each round's pairs (the aggregate)
  std::vector<HostVerdict> hosts;  // per host, its pairs against the others' (3 hosts and up)
};

std::vector<Group> evaluate(const Outcome& o, const Thresholds& t);
// Failed pairs and cells that miss a threshold, one line each; empty when the run passes.
std::vector<std::string> acceptance_failures(const Outcome& o, const std::vector<Group>& groups);

}  // namespace rb::cluster
