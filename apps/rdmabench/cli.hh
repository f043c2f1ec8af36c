#pragma once
// Command line -> what to do. CLI11 reads argv into the flags' value texts (FlagValues); the flag
// table turns them into a Command (build_command). Nothing is rewritten: a value that does not
// fit is an error naming the flag and the fix.
#include <string>
#include <vector>

#include "command.hh"
#include "flags.hh"

namespace rb::app {

// Returns the command or an invalid_argument Status with a one-line message.
Result<Command> parse_command_line(int argc, char** argv);
// The same for arguments without the program name.
Result<Command> parse_command_line(const std::vector<std::string>& args);

// The given flags -> the command: each flag's `apply` in flag_table() order, then the rules
// between flags and the run's own checks (model::first_problem). An error names the flag to
// blame: for a rule between flags, the first of the rule's flags (in the order its message
// names them) that was given, wherever it was given. A job (job.cc) builds its runs this way.
FlagResult<Command> build_command(const FlagValues& values);

}  // namespace rb::app
