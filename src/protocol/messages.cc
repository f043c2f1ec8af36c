#include "protocol/messages.hh"

#include <fmt/format.h>

#include "model/spec_json.hh"
#include "protocol/hex.hh"

namespace rb::protocol {
namespace {

using nlohmann::json;

// Reads a message's fields; the first one missing or of the wrong type is remembered and named.
class Fields {
 public:
  Fields(const json& j, const char* type) : j_(j), type_(type) {}

  template <class T>
  T get(const char* key) {
    if (!bad_.empty()) return T{};
    try {
      return j_.at(key).get<T>();
    } catch (const json::exception&) {
      bad_ = key;
      return T{};
    }
  }
  const json& raw(const char* key) {
    static const json kNull;
    if (!bad_.empty()) return kNull;
    auto it = j_.find(key);
    if (it == j_.end()) {
      bad_ = key;
      return kNull;
    }
    return *it;
  }
  void fail(const char* key) {
    if (bad_.empty()) bad_ = key;
  }
  template <class M>
  Result<Message> done(M m) const {
    if (!bad_.empty())
      return Status(Errc::io, fmt::format("control protocol error: '{}' message: field '{}' is missing or malformed",
                                          type_, bad_));
    return Message(std::move(m));
  }

 private:
  const json& j_;
  const char* type_;
  std::string bad_;
};

json region_json(const transport::RemoteRegion& r) {
  return {{"base", r.base}, {"key", r.key}, {"len", r.len}, {"handle", to_hex(r.handle)}};
}

std::vector<transport::RemoteRegion> regions_from(Fields& f, const json& a) {
  std::vector<transport::RemoteRegion> out;
  if (!a.is_array()) return f.fail("regions"), out;
  for (const auto& r : a) {
    Fields rf(r, "region");
    transport::RemoteRegion reg{rf.get<uint64_t>("base"), rf.get<uint64_t>("key"), rf.get<uint64_t>("len"), {}};
    auto h = from_hex(rf.get<std::string>("handle"));
    if (!rf.done(Bye{}) || !h) return f.fail("regions"), out;
    reg.handle = std::move(h.value());
    out.push_back(std::move(reg));
  }
  return out;
}

json endpoints_json(const std::vector<std::vector<uint8_t>>& eps) {
  json a = json::array();
  for (const auto& e : eps) a.push_back(to_hex(e));
  return a;
}

std::vector<std::vector<uint8_t>> endpoints_from(Fields& f, const json& a) {
  std::vector<std::vector<uint8_t>> out;
  if (!a.is_array()) return f.fail("endpoints"), out;
  for (const auto& e : a) {
    auto b = e.is_string() ? from_hex(e.get<std::string>()) : Status(Errc::io, "");
    if (!b) return f.fail("endpoints"), out;
    out.push_back(std::move(b.value()));
  }
  return out;
}

json info_json(const transport::DomainInfo& i) {
  return {{"transport", i.transport}, {"provider", i.provider}, {"fabric", i.fabric}, {"domain", i.domain},
          {"library_version", i.library_version}};
}

transport::DomainInfo info_from(Fields& f, const json& j) {
  Fields inf(j, "info");
  transport::DomainInfo i{inf.get<std::string>("transport"), inf.get<std::string>("provider"),
                          inf.get<std::string>("fabric"), inf.get<std::string>("domain"),
                          inf.get<std::string>("library_version")};
  if (!inf.done(Bye{})) f.fail("info");
  return i;
}

// Each message's JSON body, without its "type".
json body(const Hello& m) {
  return {{"version", m.version}, {"software", m.software}, {"spec", model::spec_to_json(m.spec)}, {"rail_ips", m.rail_ips}};
}
json body(const Ready& m) {
  json regions = json::array();
  for (const auto& r : m.regions) regions.push_back(region_json(r));
  return {{"version", m.version}, {"software", m.software}, {"endpoints", endpoints_json(m.endpoints)},
          {"regions", regions}, {"info", info_json(m.info)}};
}
json body(const Connect& m) {
  json regions = json::array();
  for (const auto& r : m.regions) regions.push_back(region_json(r));
  return {{"endpoints", endpoints_json(m.endpoints)}, {"regions", regions}};
}
json body(const PhaseStart& m) {
  return {{"index", m.index}, {"op", transport::op_name(m.phase.op)}, {"mode", model::mode_name(m.phase.mode)},
          {"size", m.phase.size}, {"repeat", m.phase.repeat}, {"seed", m.seed}};
}
json body(const End& m) { return {{"sent", m.sent}, {"coverage", m.coverage}}; }
json body(const PhaseOutcome& m) {
  json j = {{"received", m.received},
            {"cpu", {{"user_s", m.cpu.user_s}, {"sys_s", m.cpu.sys_s}, {"total_s", m.cpu.total_s}, {"util", m.cpu.util}}}};
  if (m.reverse)
    j["reverse"] = {{"iterations", m.reverse->iterations}, {"duration_s", m.reverse->duration_s},
                    {"gbps", m.reverse->gbps}, {"mops", m.reverse->mops}};
  return j;
}
json body(const Drive& m) {
  return {{"version", m.version}, {"software", m.software}, {"spec", model::spec_to_json(m.spec)}, {"target", m.target},
          {"target_rank", m.target_rank}, {"session", m.session}};
}
json body(const Serve& m) { return {{"from_rank", m.from_rank}, {"session", m.session}}; }
json body(const PairRecord& m) { return {{"line", m.line}, {"line_gbps", m.line_gbps}}; }
json body(const Error& m) { return {{"code", errc_name(m.code)}, {"message", m.message}}; }
json body(const Bye& m) { return m.ranks_lost ? json{{"ranks_lost", true}} : json::object(); }
template <class M>
json body(const M&) {  // messages without fields
  return json::object();
}

Result<Message> hello_from(const json& j) {
  Fields f(j, Hello::kType);
  Hello m;
  if (j.contains("version") && j["version"].is_string()) {
    // rdmabench before the protocol had a number sent only its release here.
    m.version = 1;
    m.software = j["version"].get<std::string>();
    return f.done(std::move(m));
  }
  m.version = f.get<int>("version");
  m.software = f.get<std::string>("software");
  if (m.version != kVersion) return f.done(std::move(m));  // the rest may differ: the receiver says why it stops
  m.rail_ips = f.get<std::vector<std::string>>("rail_ips");
  auto spec = model::spec_from_json(f.raw("spec"));
  if (!spec) f.fail("spec");
  else m.spec = std::move(spec.value());
  return f.done(std::move(m));
}

Result<Message> ready_from(const json& j) {
  Fields f(j, Ready::kType);
  Ready m;
  m.version = f.get<int>("version");
  m.software = f.get<std::string>("software");
  if (m.version != kVersion) return f.done(std::move(m));
  m.endpoints = endpoints_from(f, f.raw("endpoints"));
  m.regions = regions_from(f, f.raw("regions"));
  m.info = info_from(f, f.raw("info"));
  return f.done(std::move(m));
}

Result<Message> connect_from(const json& j) {
  Fields f(j, Connect::kType);
  Connect m;
  m.endpoints = endpoints_from(f, f.raw("endpoints"));
  m.regions = regions_from(f, f.raw("regions"));
  return f.done(std::move(m));
}

Result<Message> phase_from(const json& j) {
  Fields f(j, PhaseStart::kType);
  PhaseStart m;
  m.index = f.get<uint64_t>("index");
  auto op = model::parse_op(f.get<std::string>("op"));
  auto mode = model::parse_mode(f.get<std::string>("mode"));
  if (!op) f.fail("op");
  if (!mode) f.fail("mode");
  if (op && mode) m.phase = {*op, *mode, f.get<uint64_t>("size"), f.get<int>("repeat")};
  m.seed = f.get<uint64_t>("seed");
  return f.done(std::move(m));
}

Result<Message> end_from(const json& j) {
  Fields f(j, End::kType);
  End m;
  m.sent = f.get<std::vector<uint64_t>>("sent");
  m.coverage = f.get<bool>("coverage");
  return f.done(std::move(m));
}

Result<Message> outcome_from(const json& j) {
  Fields f(j, PhaseOutcome::kType);
  PhaseOutcome m;
  m.received = f.get<std::vector<uint64_t>>("received");
  Fields c(f.raw("cpu"), "cpu");
  m.cpu = {c.get<double>("user_s"), c.get<double>("sys_s"), c.get<double>("total_s"), c.get<double>("util")};
  if (!c.done(Bye{})) f.fail("cpu");
  if (j.contains("reverse")) {
    Fields r(j["reverse"], "reverse");
    m.reverse = StreamFigures{r.get<uint64_t>("iterations"), r.get<double>("duration_s"), r.get<double>("gbps"),
                              r.get<double>("mops")};
    if (!r.done(Bye{})) f.fail("reverse");
  }
  return f.done(std::move(m));
}

Result<Message> drive_from(const json& j) {
  Fields f(j, Drive::kType);
  Drive m;
  m.version = f.get<int>("version");
  m.software = f.get<std::string>("software");
  if (m.version != kVersion) return f.done(std::move(m));
  auto spec = model::spec_from_json(f.raw("spec"));
  if (!spec) f.fail("spec");
  else m.spec = std::move(spec.value());
  m.target = f.get<std::string>("target");
  m.target_rank = f.get<int>("target_rank");
  m.session = f.get<uint64_t>("session");
  return f.done(std::move(m));
}

Result<Message> serve_from(const json& j) {
  Fields f(j, Serve::kType);
  Serve m{f.get<int>("from_rank"), f.get<uint64_t>("session")};
  return f.done(std::move(m));
}

Result<Message> record_from(const json& j) {
  Fields f(j, PairRecord::kType);
  PairRecord m{f.get<std::string>("line"), f.get<double>("line_gbps")};
  return f.done(std::move(m));
}

Result<Message> bye_from(const json& j) {
  Fields f(j, Bye::kType);
  Bye m;
  if (j.contains("ranks_lost")) m.ranks_lost = f.get<bool>("ranks_lost");  // cluster mode's last Bye only
  return f.done(std::move(m));
}

Result<Message> error_from(const json& j) {
  Fields f(j, Error::kType);
  Error m;
  m.code = errc_from_name(f.get<std::string>("code"));
  m.message = f.get<std::string>("message");
  return f.done(std::move(m));
}

}  // namespace

nlohmann::json to_json(const Message& m) {
  return std::visit(
      [](const auto& msg) {
        json j = body(msg);
        j["type"] = msg.kType;
        return j;
      },
      m);
}

const char* type_name(const Message& m) {
  return std::visit([](const auto& msg) { return msg.kType; }, m);
}

Result<Message> from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return Status(Errc::io, "control protocol error: a message without a type");
  const std::string type = j["type"].get<std::string>();
  if (type == Hello::kType) return hello_from(j);
  if (type == Ready::kType) return ready_from(j);
  if (type == Connect::kType) return connect_from(j);
  if (type == Connected::kType) return Message(Connected{});
  if (type == PhaseStart::kType) return phase_from(j);
  if (type == Go::kType) return Message(Go{});
  if (type == Mark::kType) return Message(Mark{});
  if (type == Alive::kType) return Message(Alive{});
  if (type == End::kType) return end_from(j);
  if (type == PhaseOutcome::kType) return outcome_from(j);
  if (type == Bye::kType) return bye_from(j);
  if (type == Error::kType) return error_from(j);
  if (type == Drive::kType) return drive_from(j);
  if (type == Serve::kType) return serve_from(j);
  if (type == PairRecord::kType) return record_from(j);
  if (type == Ping::kType) return Message(Ping{});
  if (type == Pong::kType) return Message(Pong{});
  return Status(Errc::io, fmt::format("control protocol error: unknown message type '{:.40}'", type));
}

Status status_of(const Error& e) {
  // A server that was stopped is a failed run for the client, not an interrupt of the client.
  Errc code = e.code == Errc::interrupted ? Errc::io : e.code;
  return {code, e.message.empty() ? "(no message)" : e.message};
}

Error error_of(const Status& s) { return {s.code(), s.message()}; }

}  // namespace rb::protocol
