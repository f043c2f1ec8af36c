#include "fault/fault_plan.hh"

#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

namespace rb::transport::fault {
namespace {

constexpr Kind kKinds[] = {Kind::corrupt, Kind::misplace, Kind::drop, Kind::duplicate, Kind::truncate};
constexpr const char* kForm =
    "give KIND:OP:NTH (KIND corrupt, misplace, drop, duplicate or truncate; OP write, read, send, write-imm, "
    "send-imm, fadd or cswap; NTH from 1), "
    "e.g. corrupt:write:5, or unset it";

// The ops each kind has a meaning for: misplacing needs a remote offset, a read has no payload
// of its own to drop, duplicate or cut short, and an atomic has no payload to damage but can be
// lost or applied twice.
bool applies(Kind k, Op op) {
  bool atomic = op == Op::fadd || op == Op::cswap;
  bool payload = op == Op::write || op == Op::send || op == Op::write_imm || op == Op::send_imm;
  switch (k) {
    case Kind::corrupt: return payload || op == Op::read;
    case Kind::misplace: return op == Op::write || op == Op::read || op == Op::write_imm;
    case Kind::drop:
    case Kind::duplicate: return payload || atomic;
    case Kind::truncate: return payload;
  }
  return false;
}

Status bad(const std::string& text, const std::string& why) {
  return {Errc::invalid_argument, fmt::format("{}='{}': {}; {}", kFaultEnv, text, why, kForm)};
}

std::optional<Op> parse_op(const std::string& s) {
  for (Op op : {Op::write, Op::read, Op::send, Op::write_imm, Op::send_imm, Op::fadd, Op::cswap})
    if (s == op_name(op)) return op;
  return std::nullopt;
}

}  // namespace

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::corrupt: return "corrupt";
    case Kind::misplace: return "misplace";
    case Kind::drop: return "drop";
    case Kind::duplicate: return "duplicate";
    case Kind::truncate: return "truncate";
  }
  return "?";
}

Result<FaultPlan> parse_fault_plan(const std::string& text) {
  auto c1 = text.find(':');
  auto c2 = c1 == std::string::npos ? c1 : text.find(':', c1 + 1);
  if (c2 == std::string::npos || text.find(':', c2 + 1) != std::string::npos)
    return bad(text, "not three fields");
  std::string kind = text.substr(0, c1), op = text.substr(c1 + 1, c2 - c1 - 1), nth = text.substr(c2 + 1);
  FaultPlan p;
  bool known = false;
  for (Kind k : kKinds)
    if (kind == kind_name(k)) p.kind = k, known = true;
  if (!known) return bad(text, fmt::format("'{}' is not a kind of fault", kind));
  auto o = parse_op(op);
  if (!o) return bad(text, fmt::format("'{}' is not an op", op));
  p.op = *o;
  if (!applies(p.kind, p.op)) return bad(text, fmt::format("{} does not apply to {}", kind, op));
  auto [end, ec] = std::from_chars(nth.data(), nth.data() + nth.size(), p.nth);
  if (ec != std::errc() || end != nth.data() + nth.size() || p.nth == 0)
    return bad(text, fmt::format("'{}' is not a count from 1", nth));
  return p;
}

Result<std::optional<FaultPlan>> fault_plan_from_env() {
  const char* v = std::getenv(kFaultEnv);
  if (!v || !*v) return std::optional<FaultPlan>{};
  auto p = parse_fault_plan(v);
  if (!p) return p.status();
  return std::optional<FaultPlan>{*p};
}

}  // namespace rb::transport::fault
