#include "bench/spec_json.hh"

#include <fmt/format.h>

namespace rb::bench {

using nlohmann::json;

Result<Op> parse_op(const std::string& s) {
  if (s == "write") return Op::write;
  if (s == "read") return Op::read;
  if (s == "send") return Op::send;
  return Status(Errc::invalid_argument, fmt::format("--op '{}': must be write, read or send (or a list: write,send)", s));
}

Result<Mode> parse_mode(const std::string& s) {
  if (s == "bw") return Mode::bw;
  if (s == "lat") return Mode::lat;
  return Status(Errc::invalid_argument, fmt::format("--mode '{}': must be bw or lat (or bw,lat)", s));
}

json spec_to_json(const RunSpec& s) {
  json ops = json::array(), modes = json::array();
  for (Op o : s.ops) ops.push_back(transport::op_name(o));
  for (Mode m : s.modes) modes.push_back(mode_name(m));
  const auto& t = s.transport;
  json transport = {{"name", t.name}, {"variant", t.variant}, {"domain", t.domain}, {"options", t.options}};
  return json{{"transport", transport}, {"domains", s.domains},
              {"ops", ops}, {"modes", modes}, {"sizes", s.sizes},
              {"iters", s.iters}, {"duration_s", s.duration_s},
              {"warmup_iters", s.warmup_iters}, {"warmup_s", s.warmup_s}, {"warmup_given", s.warmup_given},
              {"threads", s.threads}, {"cpus", s.cpus},
              {"batch", s.batch}, {"depth", s.depth}, {"signal", s.signal},
              {"rails", s.rails}, {"qps", s.qps}, {"lazy", s.lazy}, {"bidir", s.bidir},
              {"batch_given", s.batch_given}, {"depth_given", s.depth_given}, {"signal_given", s.signal_given},
              {"random_space", s.random_space}, {"thread_gap", s.thread_gap}, {"fixed", s.fixed},
              {"local_mr", s.local_mr}, {"repeat", s.repeat}, {"validate", s.validate}, {"inject", s.inject},
              {"report_interval", s.report_interval}, {"cpu_util", s.cpu_util}, {"seed", s.seed},
              {"timeout_s", s.timeout_s}};
}

Result<RunSpec> spec_from_json(const json& j) {
  RunSpec s;
  try {
    const json& t = j.at("transport");
    s.transport = {t.at("name"), t.at("variant"), t.at("domain"), t.at("options").get<std::map<std::string, std::string>>()};
    s.domains = j.value("domains", std::vector<std::string>{});
    s.ops.clear();
    for (auto& o : j.at("ops")) {
      auto op = parse_op(o.get<std::string>());
      if (!op) return op.status();
      s.ops.push_back(*op);
    }
    s.modes.clear();
    for (auto& m : j.at("modes")) {
      auto mode = parse_mode(m.get<std::string>());
      if (!mode) return mode.status();
      s.modes.push_back(*mode);
    }
    s.sizes = j.at("sizes").get<std::vector<uint64_t>>();
    s.iters = j.at("iters");
    s.duration_s = j.at("duration_s");
    s.warmup_iters = j.at("warmup_iters");
    s.warmup_s = j.at("warmup_s");
    s.warmup_given = j.at("warmup_given");
    s.threads = j.at("threads");
    s.cpus = j.at("cpus").get<std::vector<int>>();
    s.batch = j.at("batch");
    s.depth = j.at("depth");
    s.signal = j.at("signal");
    s.rails = j.value("rails", 1);
    s.qps = j.value("qps", 1);
    s.lazy = j.value("lazy", false);
    s.bidir = j.value("bidir", false);
    s.batch_given = j.at("batch_given");
    s.depth_given = j.at("depth_given");
    s.signal_given = j.at("signal_given");
    s.random_space = j.at("random_space");
    s.thread_gap = j.at("thread_gap");
    s.fixed = j.at("fixed");
    s.local_mr = j.at("local_mr");
    s.repeat = j.at("repeat");
    s.validate = j.at("validate");
    s.inject = j.at("inject");
    s.report_interval = j.at("report_interval");
    s.cpu_util = j.at("cpu_util");
    s.seed = j.at("seed");
    s.timeout_s = j.at("timeout_s");
  } catch (const json::exception& e) {
    return Status(Errc::invalid_argument, fmt::format("run description from peer is malformed: {}", e.what()));
  }
  return s;
}

}  // namespace rb::bench
