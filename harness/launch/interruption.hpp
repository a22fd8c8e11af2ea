#pragma once
// SIGINT and SIGTERM for the whole process, as every command handles them: the first asks
// every loop to stop at its next safe point (a sweep between rows, the runner between steps,
// the supervisor by stopping its children), so finished work is kept and reports are
// written; a second SIGINT ends the process at once. No LibTorch.
namespace ddpbench {

/// Installs the handlers (once; later calls do nothing).
void catch_interruptions();

/// The signal that asked this process to stop (SIGINT or SIGTERM), or 0.
int interruption_signal();

/// The exit status of a process stopped by `signal`, as a shell reports it: 128 + signal
/// (130 for SIGINT, 143 for SIGTERM).
int interrupted_exit_code(int signal);

}  // namespace ddpbench
