"""scripts/ci-bench, the CI timing gate, as one program: every argument read first, then the
folders it may use checked and claimed, then the builds, the runs and the judgement. Every way it
ends is one Outcome, turned into the exit code by outcomes.TABLE alone, here, in `finish`; a
signal to the gate stops every process it started; verdict.txt is written by every gate that
reached a verdict, a failed candidate's included.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from pathlib import Path

from . import children, cli
from .builds import candidate_binary
from .out_dir import OutDir
from .outcomes import Outcome, Side, Signalled, Stop, What
from .paired_mode import paired_gate
from .stored_mode import stored_gate
from .worktree import RevFolder, resolve_rev

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
ROOT = Path(__file__).resolve().parents[3]


def on_signal(signum: int, frame: object) -> None:
    raise Signalled(signum)


class GateRun:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.out: OutDir | None = None  # claimed: the verdict goes there

    def run(self, argv: list[str]) -> tuple[Outcome, str]:
        try:
            s = cli.parse(argv, self.root, dict(os.environ))
        except cli.Usage as error:
            raise cli.usage_stop(error) from None
        inputs = {"--sweep-file": s.sweep_file}
        if s.binary is not None:
            inputs["DDPBENCH_BINARY"] = s.binary
        if s.against is None:
            inputs.update({"--baseline": s.baseline, **({"--current": s.current} if s.current else {})})
            self.out = OutDir(s.out_dir, inputs, {})
            self.out.claim()
            return stored_gate(s, self.out, candidate_binary(s, self.out))
        sha = resolve_rev(self.root, s.against)
        rev = RevFolder(self.root, s.against_dir, s.build_dir, s.binary)
        said = rev.refusal(s.out_dir)  # both folders are checked before either is made or locked
        if said:
            raise Stop(Side.INPUT, What.REFUSED, said)
        self.out = OutDir(s.out_dir, inputs, {"--against-dir": s.against_dir})
        self.out.check()
        self.out.claim()
        rev.claim(s.out_dir)
        return paired_gate(s, self.out, rev, sha)

    def finish(self, outcome: Outcome, text: str, bisect: bool) -> int:
        code = outcome.exit_code(bisect)
        if text:
            print(text, end="" if text.endswith("\n") else "\n", flush=True)
        if outcome.reason and not text:
            blame = ": the candidate fails the gate" if outcome.code.plain == 1 else ""
            print(f"scripts/ci-bench: {outcome.reason}{blame}", file=sys.stderr)
        claimed = self.out is not None and self.out.lock_fd >= 0
        if claimed and outcome.verdict is not None:
            assert self.out is not None
            self.out.write("verdict.json", json.dumps({
                "verdict": outcome.verdict, "exit_code": code, "bisect": bisect, "side": outcome.side.name.lower(),
                "what": outcome.what.value, "reason": outcome.reason}, indent=1) + "\n")
            self.out.write("verdict.txt", outcome.verdict + "\n")  # last: the whole gate's answer
        if self.out is not None:
            self.out.release()
        said = outcome.verdict or "no verdict"
        print(f"ci-bench: {said}: {outcome.side.value}, {outcome.what.value} (exit {code}"
              f"{' under --bisect' if bisect else ''})", file=sys.stderr, flush=True)
        return code


def main(argv: list[str]) -> int:
    bisect = "--bisect" in argv  # anywhere on the line: git bisect run must never read a usage error as "bad"
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"  # no child writes bytecode into a build's tree
    previous = {sig: signal.signal(sig, on_signal) for sig in SIGNALS}
    gate = GateRun(ROOT)
    try:
        outcome, text = gate.run(argv)
    except Stop as stop:
        outcome, text = stop.outcome, ""
    except Signalled as signalled:
        outcome, text = Outcome(Side.SIGNAL, What.INTERRUPTED, f"interrupted: {signalled}", signalled.signum), ""
    except Exception as error:  # the gate's own failure: never the candidate's
        traceback.print_exc()
        outcome, text = Outcome(Side.GATE, What.FAILED, f"the gate itself failed ({type(error).__name__}: {error}): a "
                                                        f"fault of scripts/ci-bench or of the machine, never the "
                                                        f"candidate's"), ""
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)  # the verdict is written whole
        children.stop_all()
    code = gate.finish(outcome, text, bisect)
    for sig in SIGNALS:  # a signal come since is too late to change the answer; none stays blocked
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
    for sig, handler in previous.items():
        signal.signal(sig, handler)
    return code
