#pragma once
// Which host is in the slow pairs. The relative verdict on pairs (below 0.8 x the median) misses
// the commonest failure: a host with a slow link is in 2(n-1) of the n(n-1) ordered pairs, so
// with 3 hosts its pairs *are* the median and nothing stands out. Each host is therefore judged
// by its own pairs against the pairs it takes no part in, once as a sender (its row) and once as
// a receiver (its column): a slow link shows in both, a slow sender or receiver in one, whatever
// the number of hosts (3 and up) and however many of the pairs it is in. A host is named only when
// it is slow, and its pairs all worse than all the others, in every repeat judged alone, so noise
// names nobody.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cluster/outcome.hh"

namespace rb::cluster {

// One verdict per host for the pairs of `g` (its records: `records` of the run, of g's op, mode
// and size), against the same thresholds as the pairs' outliers.
std::vector<HostVerdict> judge_hosts(const Group& g, const std::vector<Record>& records, int hosts, const Thresholds& t);

// The per-host record of --json: {"schema": 1, "kind": "cluster_host", op, mode, size, host, ...}.
nlohmann::json host_record(const Group& g, const HostVerdict& v, const std::string& name, const Thresholds& t);

}  // namespace rb::cluster
