#pragma once
// Cluster mode's flags (--pattern, --hosts, the thresholds): how their values apply, and the
// rules that tie them to the rest of the command line.
#include "flags.hh"

namespace rb::app {

Status apply_pattern(const FlagInfo& f, const FlagValue& v, Command& c);
Status apply_expect_bw(const FlagInfo& f, const FlagValue& v, Command& c);
Status apply_expect_lat(const FlagInfo& f, const FlagValue& v, Command& c);
Status apply_outlier_bw(const FlagInfo& f, const FlagValue& v, Command& c);
Status apply_outlier_lat(const FlagInfo& f, const FlagValue& v, Command& c);
Status apply_bootstrap(const FlagInfo& f, const FlagValue& v, Command& c);

// Flags that only cluster mode reads: given without --cluster, they are an error.
extern const char* const kClusterOnlyFlags[8];

// Command -> a cluster command once every flag is applied: flags that mean nothing there
// (--addr, --loopback, --server, --csv) are refused, and each threshold needs the mode it judges.
FlagResult<Command> cluster_command(const FlagValues& values, Command cmd);
// Without --cluster: the first cluster-only flag given, as an error.
FlagError cluster_flag_without_cluster(const FlagValues& values);

}  // namespace rb::app
