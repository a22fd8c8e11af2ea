// ddpbench's entry point: parse, dispatch, and turn errors into exit codes
// (0 ok, 1 a failed row or a regression, 2 bad input).
#include <iostream>
#include <string>
#include <variant>
#include <vector>

#include "harness/base/input_error.hpp"
#include "harness/control/advise_command.hpp"
#include "harness/control/compare_command.hpp"
#include "harness/control/project_command.hpp"
#include "harness/control/trace_command.hpp"
#include "harness/runner/commands.hpp"

int main(int argc, char** argv) {
  using namespace ddpbench;
  const std::vector<std::string> args(argv, argv + argc);
  try {
    const Command command = parse_command_line(argc, argv);
    if (const auto* help = std::get_if<HelpRequest>(&command)) {
      std::cout << help->text;
      return 0;
    }
    if (const auto* run = std::get_if<RunCommand>(&command)) return run_command(*run, args);
    if (const auto* list = std::get_if<ListCommand>(&command)) {
      if (!list->options) return list_command();
      std::cout << options_reference_markdown();
      return 0;
    }
    if (const auto* compare = std::get_if<CompareCommand>(&command)) return compare_command(*compare);
    if (const auto* sweep = std::get_if<SweepCommand>(&command)) return sweep_command(*sweep, args);
    if (const auto* project = std::get_if<ProjectCommand>(&command)) return project_command(*project);
    if (const auto* advise = std::get_if<AdviseCommand>(&command)) return advise_command(*advise);
    if (const auto* trace = std::get_if<TraceCommand>(&command)) return trace_command(*trace);
    std::cerr << "ddpbench: internal error: unhandled command\n";
    return 1;
  } catch (const InputError& e) {
    std::cerr << "ddpbench: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "ddpbench: failed: " << e.what() << "\n";
    return 1;
  }
}
