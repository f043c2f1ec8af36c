#pragma once
// `rdmabench --completion bash`: a bash completion script made from the flag table (every flag
// and its short name) and the registry (-t's transports and variants, -o's keys), so it offers
// exactly what this build accepts.
#include <string>

namespace rb::app {

std::string bash_completion();

}  // namespace rb::app
