#include "job.hh"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace rb::app {
namespace {

// One flag's value as the job gives it, and where it gives it (for error lines).
struct Setting {
  const FlagInfo* flag = nullptr;
  std::string written;  // the key as written (maybe an alias: "payload")
  std::string value;    // the argument; unused for a switch
  bool on = true;       // a switch: false leaves the flag out
  int line = 0;         // 0: from the command line
};
using Settings = std::vector<Setting>;

struct Axis {  // one [matrix] key and its values
  std::string written;
  int line = 0;
  std::vector<Setting> values;
};

// Flags that say where results go and which server serves them: one of each per job.
constexpr const char* kJobWide[] = {"addr", "loopback", "json", "csv"};
// Flags whose values the result label already shows (or that are its x axis): never tags.
constexpr const char* kInLabel[] = {"transport", "op", "read", "mode", "size", "threads", "addr", "loopback", "json", "csv"};

template <size_t N>
bool one_of(const std::string& name, const char* const (&list)[N]) {
  return std::find_if(std::begin(list), std::end(list), [&](const char* n) { return name == n; }) != std::end(list);
}

int line_of(const toml::source_region& r) { return int(r.begin.line); }

Status key_error(const std::string& path, int line, const std::string& key, const std::string& what) {
  return {Errc::invalid_argument, fmt::format("{}:{}: key '{}': {}", path, line, key, what)};
}

// Edits between two names, a swap of neighbours counting as one ("itres" is one from "iters").
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// "unknown flag; did you mean 'iters'?" when a flag is a typo away, otherwise the whole list.
std::string unknown_key(const std::string& key) {
  std::string bare = key;
  while (!bare.empty() && bare[0] == '-') bare.erase(0, 1);
  if (bare != key && find_flag(bare)) return fmt::format("keys are flag names without dashes; write {} = ...", bare);
  std::string best, names;
  size_t best_d = std::max<size_t>(1, key.size() / 4) + 1;  // a typo, not another flag
  for (const auto& f : flag_table()) {
    if (!f.in_job) continue;
    names += (names.empty() ? "" : ", ") + f.name;
    std::vector<std::string> all = f.aliases;
    all.push_back(f.name);
    for (const auto& n : all) {
      size_t d = edit_distance(key, n);
      if (d < best_d) best_d = d, best = n;
    }
  }
  if (!best.empty()) return fmt::format("not an rdmabench flag; did you mean '{}'?", best);
  return fmt::format("not an rdmabench flag; use one of: {}", names);
}

std::string type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::boolean: return "true/false";
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time: return "a date or time";
    default: return "a value";
  }
}

// A scalar as argument text: "64K", 2000 -> "2000", 0.5 -> "0.5".
bool scalar_text(const toml::node& n, std::string& out) {
  if (auto v = n.as_string()) return out = v->get(), true;
  if (auto v = n.as_integer()) return out = std::to_string(v->get()), true;
  if (auto v = n.as_floating_point()) return out = fmt::format("{}", v->get()), true;
  return false;
}

// A TOML value -> the flag's setting. Arrays become comma lists (size = [64, 4096] is --size 64,4096),
// which the list flags take; the flag judges whether it takes a list.
Result<Setting> to_setting(const toml::node& n, const FlagInfo& f, const std::string& written, int line,
                           const std::string& path) {
  Setting s{&f, written, "", true, line};
  if (f.is_switch) {
    if (auto b = n.as_boolean()) {
      s.on = b->get();
      return s;
    }
    return key_error(path, line, written,
                     fmt::format("a switch takes true or false, not {}; write {} = true", type_name(n), written));
  }
  std::string text;
  if (scalar_text(n, text)) {
    s.value = text;
    return s;
  }
  if (auto a = n.as_array(); a && !a->empty()) {
    std::string joined;
    for (const auto& e : *a) {
      std::string t;
      if (!scalar_text(e, t))
        return key_error(path, line_of(e.source()), written,
                         fmt::format("list items are numbers or strings, not {}; --{}: {}", type_name(e), f.name, f.help));
      joined += (joined.empty() ? "" : ",") + t;
    }
    s.value = joined;
    return s;
  }
  return key_error(path, line, written, fmt::format("takes a number or a string, not {}; --{}: {}", type_name(n), f.name, f.help));
}

// A table's entries in file order (toml++ keeps tables sorted by key).
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(const toml::table& t) {
  std::vector<std::pair<const toml::key*, const toml::node*>> out;
  for (const auto& [k, v] : t) out.emplace_back(&k, &v);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    const auto &x = a.first->source().begin, &y = b.first->source().begin;
    return x.line != y.line ? x.line < y.line : x.column < y.column;
  });
  return out;
}

enum class Table { defaults, matrix, run, cluster };

// Checks a key of [defaults], [matrix], [[run]] or [cluster] and finds its flag. Cluster mode's
// flags live in [cluster] alone, and it holds nothing else.
Result<const FlagInfo*> job_flag(const std::string& key, int line, const std::string& path, Table table) {
  const FlagInfo* f = find_flag(key);
  if (!f) return key_error(path, line, key, unknown_key(key));
  bool cluster_flag = f->group == "Cluster";
  if (table == Table::cluster && (!cluster_flag || f->name == "cluster"))
    return key_error(path, line, key, f->name == "cluster" ? "the [cluster] table itself makes the job a cluster run; drop the key"
                                                           : "not a cluster setting; put it under [defaults]");
  if (table != Table::cluster && cluster_flag)
    return key_error(path, line, key, "a cluster setting; put it under a [cluster] table");
  bool in_defaults = table == Table::defaults || table == Table::cluster;
  if (!f->in_job)
    return key_error(path, line, key,
                     fmt::format("--{} is not a run flag; a job is a client: leave it out (start a server with rdmabench --server)", f->name));
  if (!in_defaults && one_of(f->name, kJobWide))
    return key_error(path, line, key, "one per job (one server, one results file); set it in [defaults]");
  return f;
}

// A key already given, under another of its names, in the same table.
Status check_repeat(const Settings& seen, const Setting& s, const std::string& path) {
  for (const auto& o : seen)
    if (o.flag == s.flag)
      return key_error(path, s.line, s.written, fmt::format("the same flag as '{}' on line {}; keep one", o.written, o.line));
  return {};
}

// [defaults] or one [[run]]: flag = value, in file order.
Result<Settings> read_flags(const toml::table& t, const std::string& path, Table table) {
  Settings out;
  for (auto [k, v] : in_file_order(t)) {
    int line = line_of(k->source());
    auto f = job_flag(std::string(k->str()), line, path, table);
    if (!f) return f.status();
    auto s = to_setting(*v, **f, std::string(k->str()), line, path);
    if (!s) return s.status();
    Status r = check_repeat(out, *s, path);
    if (!r) return r;
    out.push_back(std::move(*s));
  }
  return out;
}

Result<std::vector<Axis>> read_matrix(const toml::table& t, const std::string& path) {
  std::vector<Axis> axes;
  Settings seen;
  for (auto [k, v] : in_file_order(t)) {
    std::string key(k->str());
    int line = line_of(k->source());
    auto f = job_flag(key, line, path, Table::matrix);
    if (!f) return f.status();
    const toml::array* a = v->as_array();
    if (!a || a->empty())
      return key_error(path, line, key,
                       fmt::format("a [matrix] key takes a non-empty array of values, not {}; write {} = [a, b] "
                                   "(or put a single value in [defaults])",
                                   a ? "an empty array" : type_name(*v), key));
    Axis axis{key, line, {}};
    for (const auto& e : *a) {
      auto s = to_setting(e, **f, key, line_of(e.source()) ? line_of(e.source()) : line, path);
      if (!s) return s.status();
      axis.values.push_back(std::move(*s));
    }
    Status r = check_repeat(seen, axis.values.front(), path);
    if (!r) return r;
    seen.push_back(axis.values.front());
    axes.push_back(std::move(axis));
  }
  return axes;
}

// `over` on top of `base`: over's flags first (they are what makes this run this run), then the rest.
Settings overlay(const Settings& base, const Settings& over) {
  Settings out = over;
  for (const auto& b : base)
    if (std::none_of(over.begin(), over.end(), [&](const Setting& o) { return o.flag == b.flag; })) out.push_back(b);
  return out;
}

std::vector<std::string> display_args(const Settings& ss) {
  std::vector<std::string> out;
  for (const auto& s : ss) {
    if (s.flag->is_switch) {
      if (s.on) out.push_back("--" + s.flag->name);
      continue;
    }
    out.push_back("--" + s.flag->name);
    out.push_back(s.value);
  }
  return out;
}

// A run's settings as the flags build_command takes: each value as text, exactly as the file
// (or the command line beside --job) gives it, so "-5" is a value and never a flag.
FlagValues flag_values(const Settings& ss) {
  FlagValues out;
  for (const auto& s : ss) {
    if (s.flag->is_switch && !s.on) continue;  // false: as if not given
    FlagValue v;
    if (!s.flag->is_switch) v.texts = {s.value};
    if (s.line > 0) v.source = {FlagSource::Kind::job_file, s.written, s.line};
    out.set(s.flag->name, std::move(v));
  }
  return out;
}

// A run that does not build: the error at the key that set the flag it names, or at the run's
// first key from the file when it names none that the run sets.
Status run_error(const std::string& path, const FlagError& e, const FlagValues& values, const Settings& run,
                 const std::string& where) {
  const std::string& msg = e.status.message();
  const FlagValue* v = e.flag.empty() ? nullptr : values.find(e.flag);
  if (v && v->source.kind == FlagSource::Kind::command_line)
    return Status(Errc::invalid_argument, fmt::format("{}: --{} on the command line: {}{}", path, e.flag, msg, where));
  if (v) return key_error(path, v->source.line, v->source.key, msg + where);
  auto first = std::find_if(run.begin(), run.end(), [](const Setting& x) { return x.line > 0; });
  if (first == run.end())
    return Status(Errc::invalid_argument, fmt::format("{}: the flags on the command line: {}{}", path, msg, where));
  return key_error(path, first->line, first->written, msg + where);
}

// Tags: the flags whose value is not the same in every run.
void add_tags(std::vector<JobRun>& runs, const std::vector<Settings>& settings) {
  std::vector<const FlagInfo*> keys;
  for (const auto& ss : settings)
    for (const auto& s : ss)
      if (std::find(keys.begin(), keys.end(), s.flag) == keys.end() && !one_of(s.flag->name, kInLabel)) keys.push_back(s.flag);
  auto text = [](const Settings& ss, const FlagInfo* f) -> std::string {
    for (const auto& s : ss)
      if (s.flag == f) return f->is_switch ? (s.on ? f->name : "") : f->name + "=" + s.value;
    return "";
  };
  for (const FlagInfo* f : keys) {
    std::string first = text(settings[0], f);
    bool varies = std::any_of(settings.begin(), settings.end(), [&](const Settings& ss) { return text(ss, f) != first; });
    if (!varies) continue;
    for (size_t i = 0; i < runs.size(); ++i) {
      std::string t = text(settings[i], f);
      if (!t.empty()) runs[i].tags.push_back(t);
    }
  }
}

// A job file's tables as read, before the command line and the matrix are applied.
struct JobTables {
  Settings defaults;
  std::vector<Axis> axes;
  std::vector<Settings> extra;  // each [[run]]
  std::vector<int> extra_lines;
  Settings cluster;
  int defaults_line = 1, cluster_line = 0;
};

Result<JobTables> read_tables(const toml::table& root, const std::string& path) {
  JobTables t;
  for (auto [k, v] : in_file_order(root)) {
    std::string key(k->str());
    int line = line_of(k->source());
    if (key == "defaults" && v->is_table()) {
      t.defaults_line = line;
      auto d = read_flags(*v->as_table(), path, Table::defaults);
      if (!d) return d.status();
      t.defaults = std::move(*d);
    } else if (key == "matrix" && v->is_table()) {
      auto m = read_matrix(*v->as_table(), path);
      if (!m) return m.status();
      t.axes = std::move(*m);
    } else if (key == "run" && v->is_array_of_tables()) {
      for (const auto& run : *v->as_array()) {
        auto r = read_flags(*run.as_table(), path, Table::run);
        if (!r) return r.status();
        t.extra.push_back(std::move(*r));
        t.extra_lines.push_back(line_of(run.source()));
      }
    } else if (key == "cluster" && v->is_table()) {
      auto c = read_flags(*v->as_table(), path, Table::cluster);
      if (!c) return c.status();
      t.cluster = std::move(*c);
      t.cluster_line = line;
    } else if (key == "defaults" || key == "matrix" || key == "run" || key == "cluster") {
      return key_error(path, line, key, fmt::format("is {} here; write {}", type_name(*v),
                                                    key == "run" ? "[[run]] headers, one per extra run" : "[" + key + "] as a table header"));
    } else if (find_flag(key)) {
      return key_error(path, line, key, "a flag outside any table; put it under [defaults] (or [matrix] as an array)");
    } else {
      return key_error(path, line, key, "not a job table; a job has [defaults], [matrix], [[run]] and [cluster]");
    }
  }
  return t;
}

// One cluster run: its sizes, ops and modes are lists already, and MPI starts once a process.
Status fold_cluster(JobTables& t, const std::string& path) {
  if (!t.cluster_line) return {};
  if (!t.axes.empty() || !t.extra.empty())
    return key_error(path, t.cluster_line, "cluster", "a cluster job is one run: drop [matrix] and [[run]], and give "
                                                     "lists in [defaults] instead (size = \"64,4K\", mode = \"bw,lat\")");
  static const FlagInfo* on = find_flag("cluster");
  t.defaults.push_back({on, "cluster", "", true, t.cluster_line});
  for (auto& c : t.cluster) t.defaults.push_back(std::move(c));
  return {};
}

// Command-line flags replace [defaults]; the matrix or a [[run]] setting one too is ambiguous.
Status apply_command_line(JobTables& t, const std::string& path, const std::vector<GivenFlag>& given) {
  for (const auto& g : given) {
    const FlagInfo* f = find_flag(g.name);
    if (!f) continue;  // cannot happen: the command line read it from the table
    for (const auto& a : t.axes)
      if (a.values.front().flag == f)
        return key_error(path, a.line, a.written, fmt::format("[matrix] sets it and so does --{} on the command line; drop one", f->name));
    for (size_t i = 0; i < t.extra.size(); ++i)
      for (const auto& s : t.extra[i])
        if (s.flag == f)
          return key_error(path, s.line, s.written, fmt::format("this [[run]] sets it and so does --{} on the command line; drop one", f->name));
    Setting s{f, f->name, g.value, true, 0};
    auto it = std::find_if(t.defaults.begin(), t.defaults.end(), [&](const Setting& d) { return d.flag == f; });
    if (it != t.defaults.end()) *it = s;
    else t.defaults.push_back(s);
  }
  return {};
}

// The runs: every combination of the matrix (the defaults alone when there is no matrix and
// no [[run]]), then each [[run]]. The first matrix key varies slowest, like nested loops.
std::vector<Settings> expand_runs(const JobTables& t) {
  std::vector<Settings> runs;
  if (!t.axes.empty()) {
    std::vector<size_t> at(t.axes.size(), 0);
    while (true) {
      Settings combo;
      for (size_t a = 0; a < t.axes.size(); ++a) combo.push_back(t.axes[a].values[at[a]]);
      runs.push_back(overlay(t.defaults, combo));
      size_t a = t.axes.size();
      while (a > 0 && ++at[a - 1] == t.axes[a - 1].values.size()) at[--a] = 0;
      if (a == 0) break;
    }
  } else if (t.extra.empty()) {
    runs.push_back(t.defaults);
  }
  for (const auto& r : t.extra) runs.push_back(overlay(t.defaults, r));
  return runs;
}

}  // namespace

std::string join_args(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) {
    bool plain = !a.empty() && std::all_of(a.begin(), a.end(), [](char c) {
      return std::isalnum(uint8_t(c)) || std::strchr("-_.,:/=+@%", c);
    });
    std::string q = a;
    if (!plain) {
      q = "'";
      for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      q += "'";
    }
    out += (out.empty() ? "" : " ") + q;
  }
  return out;
}

Result<Job> parse_job(std::string_view text, const std::string& path, const std::vector<GivenFlag>& given) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    return Status(Errc::invalid_argument,
                  fmt::format("{}:{}: {}; fix the TOML syntax there", path, line_of(e.source()), e.description()));
  }
  auto tables = read_tables(root, path);
  if (!tables) return tables.status();
  JobTables& t = *tables;
  if (Status c = fold_cluster(t, path); !c) return c;
  if (Status g = apply_command_line(t, path, given); !g) return g;

  Job job;
  job.path = path;
  auto json = std::find_if(t.defaults.begin(), t.defaults.end(), [](const Setting& s) { return s.flag->name == "json"; });
  if (json == t.defaults.end())
    return key_error(path, t.defaults_line, "json",
                     "missing; a job appends every result to one JSON Lines file: add json = \"results.jsonl\" to [defaults] "
                     "or give --json FILE");
  job.json_path = json->value;

  std::vector<Settings> runs = expand_runs(t);
  for (size_t i = 0; i < runs.size(); ++i) {
    JobRun run;
    run.args = display_args(runs[i]);
    FlagValues values = flag_values(runs[i]);
    auto cmd = build_command(values);
    if (!cmd) {
      std::string where = runs.size() > 1 ? fmt::format(" (run {} of {}: {})", i + 1, runs.size(), join_args(run.args)) : "";
      return run_error(path, cmd.error(), values, runs[i], where);
    }
    run.cmd = std::move(*cmd);
    job.runs.push_back(std::move(run));
  }
  add_tags(job.runs, runs);
  return job;
}

Result<Job> load_job(const std::string& path, const std::vector<GivenFlag>& given) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(Errc::invalid_argument, fmt::format("{}: cannot read the job file ({}); check the path", path, strerror(errno)));
  std::stringstream text;
  text << in.rdbuf();
  return parse_job(text.str(), path, given);
}

}  // namespace rb::app
