#pragma once
// Not a transport (it has no registry line): a Domain that wraps any opened Domain and damages
// one chosen op per endpoint, as a FaultPlan says, so the tests can show that --validate catches
// each kind of damage. Test only: it is put in place only when a plan is set (open_selected,
// from the environment), so a run without one goes straight to the transport. Memory and regions are the inner domain's own; only the
// endpoints are wrapped. Per kind, on the nth matching op only:
//   corrupt    write/send: one byte of the local source is flipped before the post;
//              read: one byte of the local destination is flipped when its completion is polled
//   misplace   write/read: remote offset + 64 (- 64 where + 64 would leave the peer's region)
//   drop       write/send: not posted; a signaled one still completes, with success
//   duplicate  write/send: posted twice, the extra copy unsignaled
//   truncate   write/send: posted 1 B short (never below 1 B); the completion reports the full length
#include <memory>

#include "fault/fault_plan.hh"
#include "transport/transport.hh"

namespace rb::transport::fault {

std::unique_ptr<Domain> with_faults(std::unique_ptr<Domain> inner, const FaultPlan& plan);

}  // namespace rb::transport::fault
