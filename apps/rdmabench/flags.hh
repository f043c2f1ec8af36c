#pragma once
// The flag table and the values a user gave for it. Every flag is described once, here: its
// names, whether it takes a value, its help, and how its text becomes part of the Command. The
// command line (cli.cc) and a job file (job.cc) both fill a FlagValues and hand it to
// build_command, so they accept exactly the same flags and values, with the same errors.
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "command.hh"

namespace rb::app {

// Where a flag's value came from. A job's error points at the key and line; a command-line
// flag is named as typed there.
struct FlagSource {
  enum class Kind { command_line, job_file } kind = Kind::command_line;
  std::string key;  // job file: the key as written, maybe an alias ("payload")
  int line = 0;     // job file: the key's line
};

// One flag as given. A switch is recorded only when on: --validate=false and validate = false
// are as if not given.
struct FlagValue {
  std::vector<std::string> texts;  // a value flag: each value as given ("64K", "-5"); one unless repeatable
  FlagSource source;

  const std::string& text() const { return texts.back(); }  // a single-valued flag's value
};

// The flags a user gave, by long name; a flag that is absent was not given and keeps its default.
class FlagValues {
 public:
  void set(const std::string& name, FlagValue value) { values_[name] = std::move(value); }
  const FlagValue* find(std::string_view name) const;
  bool given(std::string_view name) const { return find(name) != nullptr; }

 private:
  std::map<std::string, FlagValue, std::less<>> values_;
};

// An error and the flag it is about (its long name), so a job can point at the key that set it
// without reading the message. `flag` is empty when no flag the user gave is to blame.
struct FlagError {
  std::string flag;
  Status status;
};

// A value, or the FlagError that says why there is none.
template <class T>
class FlagResult {
 public:
  FlagResult(T value) : v_(std::move(value)) {}
  FlagResult(FlagError e) : v_(std::move(e)) {}
  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }
  T& operator*() { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const FlagError& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, FlagError> v_;
};

struct FlagInfo;
// Turns a flag's given value into its part of the Command; errors are the flag's own one-liners.
using ApplyFlag = std::function<Status(const FlagInfo& flag, const FlagValue& value, Command& cmd)>;

// Which side a flag means something to; given to the other it would be ignored, so it is an error.
enum class FlagRole { client, server, both };

struct FlagInfo {
  std::string name;                  // long name without dashes: "size"; a job file's key
  std::vector<std::string> aliases;  // its other long names: "payload"
  std::string short_name;            // "s", or empty
  bool is_switch = false;            // takes no value (--validate)
  bool value_optional = false;       // --list [json]
  bool repeatable = false;           // -o KEY=VALUE, once per option
  bool in_job = true;                // false for --server, --list and the like
  FlagRole role = FlagRole::client;  // most flags shape a run, which the client describes
  std::string help;
  std::string group;         // its --help section; empty: left out of --help
  std::string type_name;     // --help's placeholder: "INT", "TEXT"
  std::string default_text;  // --help's "=64K"; empty when the default is a rule
  ApplyFlag apply;           // empty: build_command reads it itself (--server, --addr, ...)
};

// A flag that is not repeatable given more than once: "--threads given 2 times ('1', '2'): give it once".
Status check_given_once(const FlagInfo& flag, const FlagValue& value);

// Every flag in the order build_command applies them.
const std::vector<FlagInfo>& flag_table();
// A flag by its long name or an alias; nullptr when there is none.
const FlagInfo* find_flag(std::string_view name);

}  // namespace rb::app
