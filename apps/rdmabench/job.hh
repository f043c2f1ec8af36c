#pragma once
// A job file (TOML) -> the runs it stands for. Every run's settings become the flags' values
// (FlagValues) and are built by the command line's own build_command before anything runs, so a
// job accepts and rejects exactly what the flags do, and a bad value stops the job before its
// first run rather than halfway through. An error names its flag, which the job maps back to the
// key and line that set it.
//
//   [defaults]  flags every run gets, keys are long flag names without dashes:
//               size = "64,4K"  iters = 2000  validate = true  json = "out.jsonl"
//   [matrix]    flag = [values, ...]: every combination is one run (the first key varies slowest)
//   [[run]]     an explicit extra run: [defaults] plus its own flags
#include <string>
#include <string_view>
#include <vector>

#include "cli.hh"

namespace rb::app {

struct JobRun {
  // The run as a user would type it: "--op", "write", "--validate", ...; for display (progress
  // lines, the results' "args"), never parsed.
  std::vector<std::string> args;
  // The flags whose value differs between the job's runs, as "depth=4" or "validate", leaving out
  // transport, op, mode, size and threads, which every result's label already carries. They are
  // added to the labels so that runs differing only in, say, depth stay apart in plots.
  std::vector<std::string> tags;
  Command cmd;  // the run built: Kind::client (an --addr) or Kind::loopback
};

struct Job {
  std::string path;
  std::string json_path;  // where every run's results go
  std::vector<JobRun> runs;
};

// `given`: flags from the command line beside --job; they replace the file's [defaults].
// Every error is one line, "FILE:LINE: key 'xyz': problem; fix", with Errc::invalid_argument.
Result<Job> load_job(const std::string& path, const std::vector<GivenFlag>& given);
Result<Job> parse_job(std::string_view text, const std::string& path, const std::vector<GivenFlag>& given);

// "--op write --size 64,4K": arguments joined for display, quoted where a shell would need it.
std::string join_args(const std::vector<std::string>& args);

}  // namespace rb::app
