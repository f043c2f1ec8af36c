#pragma once
// The transport part of --help, generated from the registry: the CLI itself names no transport.
#include <string>

namespace rb::app {
std::string transport_flag_help();  // -t
std::string domain_flag_help();     // --domain
std::string option_flag_help();     // -o
std::string transports_epilogue();  // the "Transports" section at the end of --help
}  // namespace rb::app
