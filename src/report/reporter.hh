#pragma once
// Everything a run reports goes through these sinks: the table on stdout, JSON Lines, CSV.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "model/result.hh"
#include "model/sink.hh"
#include "model/spec.hh"

namespace rb::report {

using RunHeader = model::RunInfo;  // what a run's header and every record say about it

class TableReporter {
 public:
  explicit TableReporter(std::FILE* out) : out_(out) {}
  void header(const RunHeader& h);
  // Called once per phase; prints a row when the last repeat of a size arrives.
  void phase(const model::PhaseResult& r, int repeats);
  void note(const std::string& line);

 private:
  void print_group_header(const model::Phase& p);
  std::FILE* out_;
  std::vector<model::PhaseResult> pending_;
  double line_gbps_ = 0;
  int group_op_ = -1, group_mode_ = -1;
};

class JsonlReporter {
 public:
  static Result<std::unique_ptr<JsonlReporter>> open(const std::string& path);
  ~JsonlReporter();
  Status write(const RunHeader& h, const model::PhaseResult& r, int repeats);

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
};

class CsvReporter {
 public:
  static Result<std::unique_ptr<CsvReporter>> open(const std::string& path);
  ~CsvReporter();
  Status write(const RunHeader& h, const model::PhaseResult& r);

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
};

}  // namespace rb::report
