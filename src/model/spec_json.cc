#include "model/spec_json.hh"

#include <fmt/format.h>

namespace rb::model {
namespace {

using nlohmann::json;

template <class T>
json optional_json(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}
template <class T>
std::optional<T> optional_from(const json& j) {
  if (j.is_null()) return std::nullopt;
  return j.get<T>();
}

json selection_json(const transport::Selection& t) {
  return {{"name", t.name}, {"variant", t.variant}, {"domain", t.domain}, {"options", t.options}};
}

transport::Selection selection_from(const json& t) {
  return {t.at("name"), t.at("variant"), t.at("domain"), t.at("options").get<std::map<std::string, std::string>>()};
}

json workload_json(const Workload& w) {
  json ops = json::array(), modes = json::array();
  for (auto o : w.ops) ops.push_back(transport::op_name(o));
  for (auto m : w.modes) modes.push_back(mode_name(m));
  return {{"ops", ops}, {"modes", modes}, {"sizes", w.sizes}, {"iters", w.iters}, {"duration_s", w.duration_s},
          {"warmup_iters", optional_json(w.warmup_iters)}, {"warmup_s", optional_json(w.warmup_s)},
          {"threads", w.threads}, {"cpus", w.cpus}, {"batch", w.batch}, {"depth", w.depth}, {"signal", w.signal},
          {"rails", w.rails}, {"qps", w.qps}, {"lazy", w.lazy}, {"bidir", w.bidir}, {"repeat", w.repeat},
          {"validate", w.validate}, {"inject", w.inject}, {"report_interval", w.report_interval},
          {"cpu_util", w.cpu_util}, {"event", w.event}, {"seed", w.seed}, {"timeout_s", w.timeout_s}};
}

Status workload_from(const json& j, Workload& w) {
  w.ops.clear();
  for (auto& o : j.at("ops")) {
    auto op = parse_op(o.get<std::string>());
    if (!op) return op.status();
    w.ops.push_back(*op);
  }
  w.modes.clear();
  for (auto& m : j.at("modes")) {
    auto mode = parse_mode(m.get<std::string>());
    if (!mode) return mode.status();
    w.modes.push_back(*mode);
  }
  w.sizes = j.at("sizes").get<std::vector<uint64_t>>();
  w.iters = j.at("iters");
  w.duration_s = j.at("duration_s");
  w.warmup_iters = optional_from<uint64_t>(j.at("warmup_iters"));
  w.warmup_s = optional_from<double>(j.at("warmup_s"));
  w.threads = j.at("threads");
  w.cpus = j.at("cpus").get<std::vector<int>>();
  w.batch = j.at("batch");
  w.depth = j.at("depth");
  w.signal = j.at("signal");
  w.rails = j.at("rails");
  w.qps = j.at("qps");
  w.lazy = j.at("lazy");
  w.bidir = j.at("bidir");
  w.repeat = j.at("repeat");
  w.validate = j.at("validate");
  w.inject = j.at("inject");
  w.report_interval = j.at("report_interval");
  w.cpu_util = j.at("cpu_util");
  w.event = j.at("event");
  w.seed = j.at("seed");
  w.timeout_s = j.at("timeout_s");
  return {};
}

json addressing_json(const Addressing& a) {
  return {{"random_space", a.random_space}, {"thread_gap", a.thread_gap}, {"fixed", a.fixed}, {"local_mr", a.local_mr},
          {"recv_mr", a.recv_mr}};
}

void addressing_from(const json& j, Addressing& a) {
  a.random_space = j.at("random_space");
  a.thread_gap = j.at("thread_gap");
  a.fixed = j.at("fixed");
  a.local_mr = j.at("local_mr");
  a.recv_mr = j.at("recv_mr");
}

}  // namespace

json spec_to_json(const RunSpec& s) {
  return {{"transport", selection_json(s.transport)}, {"domains", s.domains}, {"workload", workload_json(s)},
          {"addressing", addressing_json(s)}};
}

Result<RunSpec> spec_from_json(const json& j) {
  RunSpec s;
  try {
    s.transport = selection_from(j.at("transport"));
    s.domains = j.at("domains").get<std::vector<std::string>>();
    Status w = workload_from(j.at("workload"), s);
    if (!w) return w;
    addressing_from(j.at("addressing"), s);
  } catch (const json::exception& e) {
    return Status(Errc::invalid_argument, fmt::format("run description from peer is malformed: {}", e.what()));
  }
  return s;
}

}  // namespace rb::model
