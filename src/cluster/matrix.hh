#pragma once
// The terminal view of a cluster run: per op x mode x size, a hosts-by-hosts matrix (row: the
// source, column: the destination) with the outliers marked against the median pair, the
// aggregate, the outlier list, and each host's verdict (cluster/host_verdict.hh).
#include <cstdio>
#include <vector>

#include "cluster/outcome.hh"

namespace rb::cluster {

void print_report(std::FILE* out, const Outcome& o, const std::vector<Group>& groups, const Thresholds& t, bool color);

}  // namespace rb::cluster
