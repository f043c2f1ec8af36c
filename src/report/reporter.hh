#pragma once
// Everything a run reports goes through these sinks: the table on stdout, JSON Lines, CSV.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/result.hh"
#include "bench/sink.hh"
#include "bench/spec.hh"

namespace rb::report {

using RunHeader = bench::RunInfo;  // what a run's header and every record say about it

class TableReporter {
 public:
  explicit TableReporter(std::FILE* out) : out_(out) {}
  void header(const RunHeader& h);
  // Called once per phase; prints a row when the last repeat of a size arrives.
  void phase(const bench::PhaseResult& r, int repeats);
  void note(const std::string& line);

 private:
  void print_group_header(const bench::Phase& p);
  std::FILE* out_;
  std::vector<bench::PhaseResult> pending_;
  double line_gbps_ = 0;
  int group_op_ = -1, group_mode_ = -1;
};

class JsonlReporter {
 public:
  static Result<std::unique_ptr<JsonlReporter>> open(const std::string& path);
  ~JsonlReporter();
  Status write(const RunHeader& h, const bench::PhaseResult& r, int repeats);

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
};

class CsvReporter {
 public:
  static Result<std::unique_ptr<CsvReporter>> open(const std::string& path);
  ~CsvReporter();
  Status write(const RunHeader& h, const bench::PhaseResult& r);

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
};

// One JSON object as documented in docs/output-format.md (shared by JSONL and tests).
std::string json_line(const RunHeader& h, const bench::PhaseResult& r, int repeats);
std::string run_label(const RunHeader& h, const bench::Phase& p);

}  // namespace rb::report
