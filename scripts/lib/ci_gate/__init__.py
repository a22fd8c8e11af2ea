"""The CI timing gate behind scripts/ci-bench: main (the program), cli (its arguments), outcomes
(the one table of exit codes), children (every process it starts), out_dir and worktree (the
only folders it writes in), builds, stored_mode, paired_mode, rounds, adaptive_rounds and judge."""
