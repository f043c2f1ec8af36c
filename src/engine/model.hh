#pragma once
// The engine speaks the run's data model (src/model: the spec, its sizes, results and the sink
// they go to) as its own words, so engine code and its callers say RunSpec, not model::RunSpec.
#include "model/result.hh"
#include "model/sink.hh"
#include "model/sizes.hh"
#include "model/spec.hh"

namespace rb::engine {
using namespace rb::model;
}  // namespace rb::engine
