"""The paired mode (--against REV): REV built in the gate's own worktree beside this checkout,
then both builds' rounds at once, judged by REV's compare (docs/paired-gate.md)."""
from __future__ import annotations

import random
import sys

from . import builds
from .adaptive_rounds import RoundsSettings, run_rounds
from .cli import Settings, is_own_sweep_file, rounds_plan
from .judge import Floor, PairedCompare
from .out_dir import OutDir
from .outcomes import Outcome, Side, Stop, What
from .rounds import Arm
from .worktree import RevFolder, git


def paired_gate(s: Settings, out: OutDir, rev: RevFolder, sha: str) -> tuple[Outcome, str]:
    candidate = builds.candidate_binary(s, out)
    # The candidate's own reading of the rows and the arguments after --, before minutes go into
    # REV; a refusal is the candidate's where REV accepts the same, the input's where it does not.
    refused = builds.dry_run(Side.CANDIDATE, candidate, s)
    rev.check_out(sha)
    print(f"ci-bench: building {s.against} ({sha[:12]}) in {rev.build} (log: {out / 'baseline-build.log'})",
          file=sys.stderr, flush=True)
    baseline = builds.rev_binary(s, rev, sha, out)
    if refused:
        if not builds.dry_run(Side.BASELINE, baseline, s):
            raise Stop(Side.CANDIDATE, What.REFUSED, f"{refused}, which the baseline build's accepts")
        if is_own_sweep_file(s.sweep_file, s.root) and not s.sweep_args:
            # This commit's own sweep file, which neither build reads: this commit cannot be judged
            # (a bisection skips it), where the user's input would stop every step.
            raise Stop(Side.CANDIDATE, What.CANNOT_JUDGE, f"{refused}, and so does the baseline build's: this "
                       f"commit's own sweep file is one neither build accepts")
        raise Stop(Side.INPUT, What.REFUSED, f"{refused}, and so does the baseline build's: neither build accepts it")
    plan = rounds_plan(s, s.lockstep)
    # Whether REV has lockstep is its commit's word, not what a checkout left on disk.
    if plan.lockstep and git(rev.src, "cat-file", "-e", f"{sha}:harness/launch/lockstep_turns.hpp").returncode != 0:
        print(f"ci-bench: {s.against} predates lockstep (no harness/launch/lockstep_turns.hpp): its rounds run back to "
              f"back (as --round-level)", file=sys.stderr)
        plan = rounds_plan(s, False)
    seed = s.seed if s.seed is not None else random.SystemRandom().randrange(2 ** 30)
    print(f"ci-bench: candidate {s.root} against {s.against} ({sha[:12]}), seed {seed} (--seed {seed} repeats the "
          f"order)", file=sys.stderr, flush=True)
    judge = PairedCompare(baseline, candidate, s.threshold, s.alpha, plan.metrics, plan.min_rounds, plan.max_rounds,
                          coarse=plan.coarse, deadline_s=s.deadlines.compare_s)
    floor = None if s.floor is None else Floor(baseline, candidate, s.floor, plan.floor_metrics, s.deadlines.compare_s)
    settings = RoundsSettings(s.sweep_file, s.rows, seed, s.twins, plan.lockstep, s.expected_not_ok,
                              s.turn_timeout_s, s.deadlines.row_s, s.deadlines.compare_s)
    return run_rounds(Arm("baseline", baseline, s.sweep_args, side=Side.BASELINE),
                      Arm("candidate", candidate, s.sweep_args, side=Side.CANDIDATE), judge, floor, settings, out)
