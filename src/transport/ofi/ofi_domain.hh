#pragma once
// The ofi transport's domain: a provider's domain opened on the run's interface (or --domain),
// and what it can do.
#include "transport/entry.hh"

struct fi_info;

namespace rb::transport::ofi {

// `variant` is the libfabric provider (empty: libfabric picks); `domain` a libfabric domain.
Result<std::unique_ptr<Domain>> open_domain(const OpenArgs& opt);
// What a domain of `info` can do, asked of an open one where it opens (atomics, waiting).
Caps domain_caps(const fi_info* info);

}  // namespace rb::transport::ofi
