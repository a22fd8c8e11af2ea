"""scripts/ci-bench's command line: every argument is read and checked here, before anything is
made, built or run, into one Settings. A flag of the other mode, a flag given twice, and any
argument after `--` that is not on SWEEP_ARGUMENTS (nothing that decides where files go or which
rows run) are usage errors. Defaults come from scripts/ci-bench.env, where each can be overridden
by the environment variable of the same name.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .outcomes import Side, Stop, What
from .reading import Unreadable, read_json

USAGE = """\
scripts/ci-bench [--against REV [PAIRED...]] [STORED...] [COMMON...] [--bisect] [-- SWEEP-ARGUMENTS]

The CI timing gate (docs/gate.md, docs/paired-gate.md). Exit 0 no regression, 1 a regression (or a
candidate that crashed, hung, wrote garbage, or refused what the baseline build accepts), 2 cannot
judge or bad input; under --bisect 125 where this commit cannot be judged, 128 where no commit can
(docs/gate.md#exit-codes). Results and verdict.txt in --out-dir.

  scripts/ci-bench --against origin/main       both builds here, at once, in lockstep (the paired gate)
  scripts/ci-bench                             measure, then gate against scripts/ci-bench.baseline.json
  scripts/ci-bench --update-baseline           measure and make this the committed baseline
  git bisect run scripts/ci-bench --bisect --against GOOD_REV
"""
# The arguments after `--` the gate passes to both builds' sweeps: none decides where a file goes
# or which rows run (the gate decides those); True where the flag takes a value.
SWEEP_ARGUMENTS = {"--inject-slowdown": True, "--inject-slowdown-rank": True, "--inject-slowdown-phase": True,
                   "--inject-fault-rank": True, "--inject-fault-step": True, "--inject-fault-kind": True,
                   "--threads": True, "--timeout-s": True, "--log-interval-steps": True,
                   "--preload-python": False, "--no-preload-python": False}
PAIRED_METRICS = ("train_time_s", "images_per_s", "steady_images_per_s", "step_time_s")
METRICS = PAIRED_METRICS + ("test_accuracy",)
MOST_ROUNDS = 100
PAIRED_ONLY = ("against_dir", "seed", "min_rounds", "max_rounds", "round_level", "turn_timeout_s")
STORED_ONLY = ("baseline", "current", "update_baseline", "no_compare", "repeat", "normalize_by")


class Usage(Exception):
    """A usage error: exit 2, 128 under --bisect (Side.INPUT, What.REFUSED)."""


class HelpShown(Exception):
    """--help was asked: it judges nothing (under --bisect, git bisect run must not read it as good)."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise Usage(f"{message} (see --help)")

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        if message:
            print(message, end="", file=sys.stderr)
        raise HelpShown()




@dataclass(frozen=True)
class Deadlines:
    """Seconds each kind of child may run before the gate stops it (scripts/ci-bench.env)."""
    build_s: float
    sweep_s: float  # the stored mode's whole sweep
    row_s: float  # one row of one round (both builds at once, in lockstep)
    compare_s: float  # a compare, and a sweep's --dry-run


@dataclass(frozen=True)
class Settings:
    root: Path
    bisect: bool
    against: str | None
    out_dir: Path
    sweep_file: Path
    rows: tuple[str, ...]
    threshold: float
    alpha: float
    metrics: str  # --metric as given, else the mode's
    floor: float | None  # None: no twins, no floor
    expected_not_ok: frozenset[str]
    sweep_args: tuple[str, ...]
    deadlines: Deadlines
    binary: Path | None  # DDPBENCH_BINARY: the candidate, built already
    build_dir: Path
    env_file: dict[str, str]
    # stored mode
    baseline: Path
    current: Path | None
    update_baseline: bool
    compare: bool
    repeat: int
    normalize_by: str
    # paired mode
    against_dir: Path
    seed: int | None
    min_rounds: int | None  # None: the mode's default (lockstep or round-level)
    max_rounds: int | None
    lockstep: bool
    turn_timeout_s: float
    metric_given: bool

    @property
    def twins(self) -> bool:
        return self.floor is not None


def read_env_file(path: Path, environ: dict[str, str]) -> dict[str, str]:
    """scripts/ci-bench.env's `NAME=${NAME:-default}` (an empty variable takes the default) and
    `NAME=${NAME-default}` (an empty one stays empty), as bash reads them."""
    values = {}
    for line in path.read_text().splitlines():
        found = re.fullmatch(r"(\w+)=\$\{(\w+)(:?)-(.*)\}", line.strip())
        if found and found[1] == found[2]:
            name, colon, default = found[1], found[3], found[4]
            given = environ.get(name)
            values[name] = default if given is None or (colon and given == "") else given
    return values


def nonempty(text: str) -> str:
    """A flag's value, never empty: `--threshold=` once took the default and `--metric=` the
    stored mode's metrics in a lockstep gate, silently."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty value")
    return text


def nonempty_path(text: str) -> Path:
    return Path(nonempty(text))


def parser() -> Parser:
    p = Parser(prog="scripts/ci-bench", usage=USAGE, allow_abbrev=False, add_help=True)
    common = p.add_argument_group("both modes")
    common.add_argument("--out-dir", type=nonempty_path, help="results and verdict.txt (default results/ci-bench); "
                        "only a folder the gate made (its marker), an empty one, or a new one")
    common.add_argument("--sweep-file", type=nonempty_path, help="the rows (default scripts/ci-bench.sweep.json)")
    common.add_argument("--threshold", type=nonempty, help="a change smaller than this is never a regression")
    common.add_argument("--alpha", type=nonempty, help="the tests' significance level")
    common.add_argument("--metric", type=nonempty, help="the metrics that gate, comma-separated")
    common.add_argument("--min-vs-pytorch", type=nonempty, help="each row against its PyTorch twin: the floor")
    common.add_argument("--no-twins", action="store_true", help="leave PyTorch's twins and the floor out")
    common.add_argument("--expected-not-ok", help="rows expected not to run on this machine, on either build (never "
                        "excuses a row the baseline ran; empty: none)")
    common.add_argument("--bisect", action="store_true", help="exit codes for git bisect run")
    stored = p.add_argument_group("stored mode (no --against)")
    stored.add_argument("--baseline", type=nonempty_path,
                        help="the stored baseline (default scripts/ci-bench.baseline.json)")
    stored.add_argument("--current", type=nonempty_path, help="judge this result file instead of measuring")
    stored.add_argument("--update-baseline", action="store_true", help="measure and make this the baseline")
    stored.add_argument("--no-compare", action="store_true", help="measure only")
    stored.add_argument("--repeat", type=nonempty, help="repetitions of each row")
    stored.add_argument("--normalize-by", type=nonempty, help="twin, or a row of the sweep file")
    paired = p.add_argument_group("paired mode")
    paired.add_argument("--against", type=nonempty, help="the baseline commit, built beside this checkout")
    paired.add_argument("--against-dir", type=nonempty_path, help="REV's worktree and build (default build-against/)")
    paired.add_argument("--seed", type=nonempty, help="the order of the runs (printed; repeats it)")
    paired.add_argument("--min-rounds", type=nonempty, help="rounds before the first look")
    paired.add_argument("--max-rounds", type=nonempty, help="rounds at most (<= 100)")
    paired.add_argument("--round-level", action="store_true", help="rounds back to back, not in lockstep")
    paired.add_argument("--turn-timeout-s", type=nonempty,
                        help="lockstep: a rank not done with its step this long after its turn hangs")
    return p


def split_sweep_arguments(argv: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """The gate's own arguments, and those after `--`, each checked against SWEEP_ARGUMENTS."""
    if "--" not in argv:
        return argv, ()
    at = argv.index("--")
    rest = argv[at + 1:]
    index = 0
    while index < len(rest):
        flag, has_value, value = rest[index].partition("=")
        if flag not in SWEEP_ARGUMENTS:
            allowed = ", ".join(SWEEP_ARGUMENTS)
            raise Usage(f"argument after --: '{rest[index]}' is not one the gate passes to the sweeps (the gate decides "
                        f"where files go and which rows run); allowed: {allowed}")
        if SWEEP_ARGUMENTS[flag] and not has_value:
            if index + 1 >= len(rest) or rest[index + 1].startswith("--"):
                raise Usage(f"argument after --: {flag} needs a value")
            index += 1
            value = rest[index]
        if SWEEP_ARGUMENTS[flag] and not value.strip():  # a build's refusal of it skipped every commit (125)
            raise Usage(f"argument after --: {flag}: an empty value")
        elif not SWEEP_ARGUMENTS[flag] and has_value:
            raise Usage(f"argument after --: {flag} takes no value")
        index += 1
    return argv[:at], tuple(rest)


def no_flag_twice(argv: list[str]) -> None:
    flags = [arg.partition("=")[0] for arg in argv if arg.startswith("--")]
    twice = sorted({flag for flag in flags if flags.count(flag) > 1})
    if twice:
        raise Usage(f"{', '.join(twice)} given more than once")


def integer(flag: str, text: str, low: int = 0) -> int:
    if not re.fullmatch(r"[0-9]+", text) or int(text) < low:
        raise Usage(f"{flag} must be an integer of at least {low} (got '{text}')")
    return int(text)


def number(flag: str, text: str, low: float, high: float, interval: str) -> float:
    """`text` as a finite number within (low, high) or [low, high) as `interval` says."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    inside = (low <= value if interval.startswith("[") else low < value) and (
        value <= high if interval.endswith("]") else value < high)
    if not (math.isfinite(value) and inside):
        raise Usage(f"{flag} must be a number in {interval} (got '{text}')")
    return value


def metric_list(flag: str, text: str, allowed: tuple[str, ...], why: str = "") -> str:
    metrics = text.split(",")
    if not text or any(m not in allowed for m in metrics) or len(set(metrics)) != len(metrics):
        raise Usage(f"{flag}: '{text}' must name each of {', '.join(allowed)} at most once, comma-separated{why}")
    return text


def row_names(flag: str, text: str, rows: tuple[str, ...]) -> frozenset[str]:
    """The names in `text` (comma-separated), each a row of the sweep file or its twin (ROW.torch)."""
    known = set(rows) | {f"{row}.torch" for row in rows}
    if not text.strip():
        return frozenset()  # none (--expected-not-ok "": no row expected not to run)
    names = text.split(",")
    if any(not n.strip() for n in names):
        raise Usage(f"{flag} {text!r}: an empty name in the list")
    strangers = [n for n in names if n not in known]
    if strangers:
        raise Usage(f"{flag}: the sweep file has no row {', '.join(strangers)} (rows: {', '.join(rows)}, and each "
                    f"one's twin ROW.torch)")
    return frozenset(names)


def check_mode(args: argparse.Namespace, sweep_args: tuple[str, ...]) -> None:
    """No flag of the other mode, nothing injected into both builds, no update under --bisect."""
    paired = args.against is not None
    injected = [arg for arg in sweep_args if arg.startswith("--inject-")]
    if paired and injected:
        raise Usage(f"argument after --: {injected[0]} would reach both builds, and a baseline slowed or broken on "
                    f"purpose hides any change; scripts/gate-power --paired injects into the candidate alone")
    wrong_mode = [name for name in (STORED_ONLY if paired else PAIRED_ONLY) if getattr(args, name) not in (None, False)]
    if wrong_mode:
        flag = "--" + wrong_mode[0].replace("_", "-")
        raise Usage(f"{flag} is a flag of the {'stored' if paired else 'paired'} mode; "
                    f"{'not with --against' if paired else 'it needs --against REV'}")
    if args.update_baseline and (args.no_compare or args.bisect):
        raise Usage("--update-baseline does not take --no-compare or --bisect")
    if args.no_compare and args.bisect:  # it judges nothing, so it can call no commit good
        raise Usage("--no-compare judges nothing: it cannot --bisect")


def expected_rows(args: argparse.Namespace, env: dict[str, str], rows: tuple[str, ...]) -> frozenset[str]:
    """--expected-not-ok's rows; the committed default names the committed sweep file's rows, of
    which only those this sweep file has are kept."""
    if args.expected_not_ok is not None:
        return row_names("--expected-not-ok", args.expected_not_ok, rows)
    known = set(rows) | {f"{row}.torch" for row in rows}
    return frozenset(n for n in env["DDPBENCH_CI_EXPECTED_NOT_OK"].split(",") if n in known)


def normalizer(args: argparse.Namespace, env: dict[str, str], rows: tuple[str, ...], twins: bool) -> str:
    normalize_by = args.normalize_by or env["DDPBENCH_CI_NORMALIZE_BY"]
    if args.against is None and normalize_by != "twin" and normalize_by not in rows:
        raise Usage(f"--normalize-by must be twin or a row of the sweep file ({', '.join(rows)}); got '{normalize_by}'")
    if args.against is None and normalize_by == "twin" and not twins:
        raise Usage("--no-twins leaves out the twins --normalize-by twin divides by: give --normalize-by ROW")
    return normalize_by


def is_own_sweep_file(path: Path, root: Path) -> bool:
    """Whether `path` is this commit's own sweep file, however it is spelled (the default,
    "scripts/ci-bench.sweep.json", "./scripts/...", a link): one broken there is this commit's
    (125 under --bisect), where the user's own file is the input's (128)."""
    return os.path.realpath(path) == os.path.realpath(root / "scripts" / "ci-bench.sweep.json")


def parse(argv: list[str], root: Path, environ: dict[str, str]) -> Settings:
    """Settings from the command line, or Usage naming what is wrong; nothing is touched."""
    own, sweep_args = split_sweep_arguments(argv)
    no_flag_twice(own)
    args = parser().parse_args(own)
    check_mode(args, sweep_args)
    paired = args.against is not None
    env = read_env_file(root / "scripts" / "ci-bench.env", environ)
    sweep = args.sweep_file or root / "scripts" / "ci-bench.sweep.json"
    try:
        rows = sweep_rows(sweep)
    except Usage as error:
        if is_own_sweep_file(sweep, root) and not sweep_args:
            # This commit's own sweep file, which no build can read: this commit cannot be judged (a
            # bisection skips it, 125), where the user's input would stop every step (128).
            raise Stop(Side.CANDIDATE, What.CANNOT_JUDGE, f"this commit's own sweep file: {error}") from None
        raise
    threshold = args.threshold or env["DDPBENCH_CI_PAIRED_THRESHOLD" if paired else "DDPBENCH_CI_THRESHOLD"]
    alpha = args.alpha or env["DDPBENCH_CI_PAIRED_ALPHA" if paired else "DDPBENCH_CI_ALPHA"]
    metrics = args.metric or env["DDPBENCH_CI_METRICS"]
    metric_list("--metric", metrics, PAIRED_METRICS if paired else METRICS,
                " (test_accuracy is no timing of two builds)" if paired else "")
    floor = None if args.no_twins else number("--min-vs-pytorch", args.min_vs_pytorch or
                                              env["DDPBENCH_CI_MIN_VS_PYTORCH"], 0, 100, "(0, 100)")
    build_dir = Path(environ.get("DDPBENCH_BUILD_DIR") or root / "build")
    binary = environ.get("DDPBENCH_BINARY")
    if binary is not None and not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        raise Usage(f"DDPBENCH_BINARY: '{binary}' is not an executable file")
    settings = Settings(
        root=root, bisect=args.bisect, against=args.against, out_dir=args.out_dir or root / "results" / "ci-bench",
        sweep_file=sweep, rows=rows, threshold=number("--threshold", threshold, 0, 1, "[0, 1)"),
        alpha=number("--alpha", alpha, 0, 0.5, "(0, 0.5)"), metrics=metrics, floor=floor, expected_not_ok=expected_rows(args, env, rows),
        sweep_args=sweep_args, deadlines=deadlines(env), binary=Path(binary) if binary else None, build_dir=build_dir,
        env_file=env, baseline=args.baseline or root / "scripts" / "ci-bench.baseline.json", current=args.current,
        update_baseline=args.update_baseline, compare=not args.no_compare,
        repeat=integer("--repeat", args.repeat or env["DDPBENCH_CI_REPEAT"], 1),
        normalize_by=normalizer(args, env, rows, floor is not None),
        against_dir=args.against_dir or Path(f"{build_dir}-against"),
        seed=None if args.seed is None else integer("--seed", args.seed),
        min_rounds=None if args.min_rounds is None else integer("--min-rounds", args.min_rounds),
        max_rounds=None if args.max_rounds is None else integer("--max-rounds", args.max_rounds),
        lockstep=not args.round_level,
        turn_timeout_s=number("--turn-timeout-s", args.turn_timeout_s or env["DDPBENCH_CI_LOCKSTEP_TURN_TIMEOUT_S"],
                              1, 86400, "[1, 86400]"),
        metric_given=args.metric is not None)
    if paired:
        rounds_plan(settings, settings.lockstep)
    return settings


ROW_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")


def sweep_rows(path: Path) -> tuple[str, ...]:
    """The names of the sweep file's rows, each once."""
    try:
        rows = tuple(row["name"] for row in read_json(path)["rows"])
    except (Unreadable, KeyError, TypeError) as error:
        raise Usage(f"--sweep-file: cannot read the rows of {path}: {error}") from None
    no_names = [row for row in rows if not isinstance(row, str) or not row]  # a list as a name failed the gate itself
    if no_names:
        raise Usage(f"--sweep-file: {path} names a row that is no name: {no_names[0]!r}")
    if not rows or len(set(rows)) != len(rows):
        raise Usage(f"--sweep-file: {path} must name each row once (rows: {', '.join(map(str, rows)) or 'none'})")
    # Each name becomes a folder of the gate's (ROUND/ROW under --out-dir): a plain name, whatever a
    # build's own --dry-run would accept (an older ddpbench took '../../x').
    strange = [row for row in rows if not ROW_NAME.fullmatch(row) or row in (".", "..")]
    if strange:
        raise Usage(f"--sweep-file: {path} names a row '{strange[0]}': a row's name is letters, digits, '.', '_' and "
                    f"'-' (it names the gate's folders)")
    return rows


@dataclass(frozen=True)
class RoundsPlan:
    """The paired mode's rounds: lockstep or back to back, and the settings that follow from it."""
    lockstep: bool
    min_rounds: int
    max_rounds: int
    metrics: str  # compare --paired's
    coarse: str  # metrics judged on the rounds the others ask for
    floor_metrics: str


def rounds_plan(s: Settings, lockstep: bool) -> RoundsPlan:
    """The rounds and metrics a user did not give are the mode's defaults (DDPBENCH_CI_LOCKSTEP_*
    or DDPBENCH_CI_PAIRED_*); train_time_s is coarse in lockstep where it is gated beside another."""
    env, prefix = s.env_file, "DDPBENCH_CI_LOCKSTEP_" if lockstep else "DDPBENCH_CI_PAIRED_"
    low = s.min_rounds if s.min_rounds is not None else integer(prefix + "MIN_ROUNDS", env[prefix + "MIN_ROUNDS"])
    high = s.max_rounds if s.max_rounds is not None else integer(prefix + "MAX_ROUNDS", env[prefix + "MAX_ROUNDS"])
    if low < 2:
        raise Usage("--min-rounds must be 2 or more: one pair has no spread to test")
    if not low <= high <= MOST_ROUNDS:
        raise Usage(f"--min-rounds ({low}) must be at most --max-rounds ({high}), and --max-rounds at most "
                    f"{MOST_ROUNDS} (what `ddpbench compare --paired` takes)")
    metrics = s.metrics if s.metric_given else env[prefix + "METRICS"]
    metric_list("--metric", metrics, PAIRED_METRICS, " (test_accuracy is no timing of two builds)")
    coarse = env["DDPBENCH_CI_LOCKSTEP_COARSE_METRICS"] if lockstep else ""
    if coarse not in metrics.split(",") or metrics == coarse:
        coarse = ""
    return RoundsPlan(lockstep, low, high, metrics, coarse, s.metrics)


def deadlines(env: dict[str, str]) -> Deadlines:
    # At least a second, as --turn-timeout-s: a deadline of 0.001 s blamed the candidate (its dry
    # run "hung") at every commit, where the setting was the user's mistake.
    def seconds(name: str) -> float:
        return number(name, env[name], 1, 7 * 86400, "[1, 604800]")
    return Deadlines(seconds("DDPBENCH_CI_BUILD_TIMEOUT_S"), seconds("DDPBENCH_CI_SWEEP_TIMEOUT_S"),
                     seconds("DDPBENCH_CI_ROW_TIMEOUT_S"), seconds("DDPBENCH_CI_COMPARE_TIMEOUT_S"))


def usage_stop(error: Usage) -> Stop:
    return Stop(Side.INPUT, What.REFUSED, str(error))
