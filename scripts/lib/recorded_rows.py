"""A validation's recording: the rows and link measurements one run of scripts/validate made on
emulated hosts, with what the analysis needs to know of the run (validation.json), in one
folder. A validation measures into it; its analysis reads only it, so the same analysis runs on
today's rows and on the rows recorded under tests/data/recorded/ (where CI holds the models to
the projections and advice they gave on those rows, exactly).

Nothing in a recording is taken on trust: validation.json must hold exactly the worlds the plan
ran (a share of the machine each, a finite number); each row must be the one its name says (its
own command line, recorded in the file, must be the validation's for that name, down to its
--out); each link must be BM_RankAllreduce across the ranks its name says; and every figure the
analysis reads is proven a finite positive number before it is used. What fails is BadRecording.

validation.json: {"part", "command", "date", "machine", "delay", "elapsed_s", "loads":
{"HOSTS": [[outside, softirq, steal], ...]}}.
"""
from __future__ import annotations

import json
import math
import os
import platform
import subprocess
from dataclasses import dataclass, field as dataclass_field
from pathlib import Path

from emulated_hosts import WorldLoad

# A world's shares of the machine: the busy share outside the ranks is the machine's busy time
# less the ranks' own, so accounting can make it a little negative; never beyond these.
SHARE_RANGE = (-1.0, 1.0)


class BadRecording(Exception):
    """A recording that cannot be analysed: a file missing, unreadable, or not what it should be."""


def number(value: object, what: str, positive: bool = True) -> float:
    """`value` as a float, proven finite (and positive where asked); else BadRecording naming `what`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadRecording(f"{what} is {value!r}, not a number")
    try:
        result = float(value)
    except (OverflowError, ValueError):
        raise BadRecording(f"{what} is a number too large to use") from None
    if not math.isfinite(result) or (positive and result <= 0):
        raise BadRecording(f"{what} is {value!r}, not a {'positive' if positive else 'finite'} number")
    return result


def field(data: object, *path: str | int) -> object:
    """data[path[0]][path[1]]...; BadRecording naming the path where it is missing."""
    for key in path:
        try:
            data = data[key]  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            raise BadRecording(f"no {'.'.join(map(str, path))}") from None
    return data


def json_object(path: Path) -> dict:
    """The JSON object in the file `path`; BadRecording where it is not one."""
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as error:
        raise BadRecording(f"{path}: not JSON ({error})") from None
    except RecursionError:
        raise BadRecording(f"{path}: JSON nested too deep to read") from None
    if not isinstance(data, dict):
        raise BadRecording(f"{path}: not a JSON object")
    return data


@dataclass
class Recording:
    folder: Path
    part: str
    command: str
    date: str
    machine: str
    delay: bool
    elapsed_s: float
    loads: dict[int, list[WorldLoad]]
    # (name, command, ranks): the run, read and proven once however often the analysis asks.
    proven: dict[tuple[str, tuple[str, ...], int], dict] = dataclass_field(default_factory=dict, repr=False)

    def file(self, name: str) -> Path:
        path = self.folder / name
        if not path.is_file():
            what = "is not a file" if path.exists() else "is missing"
            raise BadRecording(f"{self.folder}: {name} {what} (the {self.part} validation records it)")
        return path

    def json_of(self, name: str) -> dict:
        return json_object(self.file(name))

    def run_of(self, name: str, command: list[str], ranks: int) -> dict:
        """The one run of the row file `name`, proven to be what its name says: it ran (status
        ok), by `command` (the validation's row for that name, without the binary and --out),
        writing to a file of this name; a file renamed, duplicated or edited would otherwise be
        judged as the row it claims to be. It ran on `ranks` ranks, each with the command's
        --batch-size. Its figures are read through figure()."""
        key = (name, tuple(command), ranks)
        if key not in self.proven:
            self.proven[key] = self.prove_run(name, command, ranks)
        return self.proven[key]

    def prove_run(self, name: str, command: list[str], ranks: int) -> dict:
        path = self.file(name)
        data = self.json_of(name)
        runs = data.get("runs")
        if not isinstance(runs, list) or len(runs) != 1 or not isinstance(runs[0], dict):
            raise BadRecording(f"{path}: holds {len(runs) if isinstance(runs, list) else 'no'} runs, where a "
                               f"validation's row holds one")
        run = runs[0]
        if run.get("status") != "ok":
            raise BadRecording(f"{path}: the row did not run: {run.get('status')}: {run.get('reason')}")
        argv = data.get("argv")
        if not isinstance(argv, list) or len(argv) < 3 or not all(isinstance(a, str) for a in argv):
            raise BadRecording(f"{path}: no command line (argv) recorded")
        ran, out = argv[1:-2], argv[-2:]
        if ran != command or out[0] != "--out" or Path(out[1]).name != name:
            raise BadRecording(f"{path}: not the row its name says: {command_difference(argv[1:], command, name)}")
        disagree = config_disagreements(run.get("config"), command)
        if disagree:
            raise BadRecording(f"{path}: its config is not the command it ran (ddpbench reads the config): "
                               f"{'; '.join(disagree)}")
        batch = int(command[command.index("--batch-size") + 1])
        if run.get("world_size") != ranks or run.get("global_batch") != batch * ranks:
            raise BadRecording(f"{path}: ran on {run.get('world_size')!r} ranks with a global batch of "
                               f"{run.get('global_batch')!r}, where its name says {ranks} ranks of {batch}")
        return run

    def figure(self, name: str, run: dict, *path: str) -> float:
        """A figure of the row `name`'s run, proven a finite positive number."""
        try:
            value = field(run, *path)
        except BadRecording as error:
            raise BadRecording(f"{self.folder / name}: {error}") from None
        return number(value, f"{self.folder / name}: {'.'.join(path)}")

    def link_of(self, name: str, ranks: int) -> Path:
        """The link file `name`, proven to be BM_RankAllreduce across `ranks` ranks (every entry
        ddpbench project reads: the names that start BM_RankAllreduce)."""
        path = self.file(name)
        benchmarks = self.json_of(name).get("benchmarks")
        if not isinstance(benchmarks, list) or not all(isinstance(b, dict) for b in benchmarks):
            raise BadRecording(f"{path}: not a Google Benchmark file")
        ours = [b for b in benchmarks if str(b.get("name", "")).startswith("BM_RankAllreduce")]
        for b in ours:
            number(b.get("ranks"), f"{path}: {b.get('name')}: ranks")
        measured = {float(b["ranks"]) for b in ours}
        if measured != {ranks}:
            counts = " and ".join(f"{r:g}" for r in sorted(measured)) or "no"
            raise BadRecording(f"{path}: BM_RankAllreduce across {counts} ranks, where its name says {ranks}")
        return path


# The DDP settings ddpbench's models read from a row's config, at their defaults where the
# command does not set them: a config that says otherwise is not the row the command ran.
MODEL_READ_DEFAULTS = {"bucket-mb": "25", "comm-hook": "allreduce", "overlap": "true"}


def config_disagreements(config: object, command: list[str]) -> list[str]:
    """Where a row's recorded config differs from what its command line set (each option as
    given, --no-X as X false), or from the defaults of the settings the models read."""
    if not isinstance(config, dict):
        return ["no config recorded"]
    wanted = dict(MODEL_READ_DEFAULTS)
    for option, value in options_of(command).items():
        if option == "command":
            continue
        key = option.removeprefix("--")
        if value == "" and key.startswith("no-"):
            wanted[key.removeprefix("no-")] = "false"
        else:
            wanted[key] = value or "true"

    def same(found: object, given: str) -> bool:
        if isinstance(found, bool):
            return given == ("true" if found else "false")
        if isinstance(found, (int, float)):
            try:
                return float(given) == float(found)
            except ValueError:
                return False
        return isinstance(found, str) and found == given

    return [f"{key} {config.get(key)!r} (the command: {value})" for key, value in sorted(wanted.items())
            if key in config or key not in MODEL_READ_DEFAULTS
            if not same(config.get(key), value)]


def options_of(command: list[str]) -> dict[str, str]:
    """A command line's options: --name value, or --flag (value "")."""
    options, i = {"command": command[0] if command else ""}, 1
    while i < len(command):
        takes = i + 1 < len(command) and not command[i + 1].startswith("--")
        options[command[i]] = command[i + 1] if takes else ""
        i += 2 if takes else 1
    return options


def command_difference(ran: list[str], command: list[str], name: str) -> str:
    """How the command a row ran differs from the validation's for `name`, option by option."""
    found, wanted = options_of(ran), options_of([*command, "--out", f".../{name}"])
    if Path(found.get("--out", "")).name == name:
        found["--out"] = f".../{name}"

    def words(key: str) -> str:
        if key not in found:
            return f"no {key} (its name says {wanted[key]!r})"
        if key not in wanted:
            return f"{key} {found[key]!r} (not the validation's)"
        return f"{key} {found[key]!r} (its name says {wanted[key]!r})"

    differ = [words(key) for key in sorted(found.keys() | wanted.keys()) if found.get(key) != wanted.get(key)]
    return "; ".join(differ) or f"its options in another order than the validation's: {' '.join(ran)}"


def machine_words() -> str:
    """The CPU model, the cores this process may use and the kernel."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {len(os.sched_getaffinity(0))} cores, Linux {platform.release()}"


def source_revision(source: Path) -> str:
    done = subprocess.run(["git", "-C", str(source), "describe", "--always", "--dirty"], capture_output=True,
                          text=True, check=False)
    return done.stdout.strip() or "not a git checkout"


def write_recording(folder: Path, part: str, command: str, date: str, delay: bool, elapsed_s: float,
                    loads: dict[int, list[WorldLoad]]) -> None:
    data = {"part": part, "command": command, "date": date, "machine": machine_words(), "delay": delay,
            "elapsed_s": round(elapsed_s, 1),
            "loads": {str(hosts): [[w.outside, w.softirq, w.steal] for w in worlds] for hosts, worlds in loads.items()}}
    (folder / "validation.json").write_text(json.dumps(data, indent=1) + "\n")


def read_loads(value: object, worlds: dict[int, int], path: Path) -> dict[int, list[WorldLoad]]:
    """validation.json's loads, proven to hold exactly `worlds` (host count: worlds run on them),
    each share a finite number in SHARE_RANGE."""
    if not isinstance(value, dict):
        raise BadRecording(f"{path}: loads is not an object of host counts")
    found = {str(hosts): len(v) if isinstance(v, list) else None for hosts, v in value.items()}
    if found != {str(hosts): count for hosts, count in worlds.items()}:
        raise BadRecording(f"{path}: loads holds worlds {found}, where the validation runs "
                           f"{ {str(h): c for h, c in worlds.items()} }")
    loads: dict[int, list[WorldLoad]] = {}
    for hosts in worlds:
        for i, world in enumerate(value[str(hosts)]):
            if not isinstance(world, list) or len(world) != 3:
                raise BadRecording(f"{path}: loads.{hosts}[{i}] is not [outside, softirq, steal]")
            shares = [number(share, f"{path}: loads.{hosts}[{i}]", positive=False) for share in world]
            if not all(SHARE_RANGE[0] <= share <= SHARE_RANGE[1] for share in shares):
                raise BadRecording(f"{path}: loads.{hosts}[{i}] is {world}: shares of the machine lie in "
                                   f"{SHARE_RANGE[0]:g} to {SHARE_RANGE[1]:g}")
            loads.setdefault(hosts, []).append(WorldLoad(*shares))
    return loads


def read_recording(folder: Path, part: str, worlds: dict[int, int]) -> Recording:
    """The recording in `folder`, of `part`, whose plan ran `worlds` (host count: worlds). Its
    folder is made absolute: a name ddpbench could take for an option (-rec) reaches it as a path."""
    folder = folder.absolute()
    if not folder.is_dir():
        raise BadRecording(f"{folder}: {'is not a folder' if folder.exists() else 'does not exist'}")
    path = folder / "validation.json"
    if not path.is_file():
        raise BadRecording(f"{folder}: no validation.json: not a folder scripts/validate {part} --keep-rows wrote")
    data = json_object(path)
    if data.get("part") != part:
        raise BadRecording(f"{path}: recorded by the {data.get('part')} validation, not the {part} one")
    for key, kind in (("command", str), ("date", str), ("machine", str), ("delay", bool)):
        if not isinstance(data.get(key), kind):
            raise BadRecording(f"{path}: {key} is {data.get(key)!r}, not a {kind.__name__}")
    return Recording(folder, part, data["command"], data["date"], data["machine"], data["delay"],
                     number(data.get("elapsed_s"), f"{path}: elapsed_s"), read_loads(data.get("loads"), worlds, path))


def normalised(value: object, folder: Path) -> object:
    """A model's output with the recording's folder written <recording>, so that outputs compare
    across checkouts."""
    if isinstance(value, dict):
        return {k: normalised(v, folder) for k, v in value.items()}
    if isinstance(value, list):
        return [normalised(v, folder) for v in value]
    if isinstance(value, str):
        return value.replace(str(folder), "<recording>")
    return value


# A question takes ddpbench a second; a minute is a hang (a timeline that never ends).
ASK_TIMEOUT_S = 120


def ask(binary: Path, command: list[str], out_dir: Path, output: str) -> tuple[dict, dict]:
    """`ddpbench COMMAND --force --out-dir OUT_DIR` (project or advise): its OUTPUT.json's one
    entry (what the model said of the row) and the whole document (with the options it was
    asked, the calibration, the source). BadRecording where it would not say it."""
    try:
        done = subprocess.run([str(binary), *command, "--force", "--out-dir", str(out_dir)], capture_output=True,
                              text=True, check=False, timeout=ASK_TIMEOUT_S)
    except OSError as error:
        raise BadRecording(f"{binary}: cannot run it ({error.strerror})") from None
    except subprocess.TimeoutExpired:
        raise BadRecording(f"ddpbench {' '.join(command)} did not answer in {ASK_TIMEOUT_S} s") from None
    if done.returncode != 0:
        raise BadRecording(f"ddpbench {' '.join(command)} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    document = json.loads((out_dir / f"{output}.json").read_text())
    entries = document["projections" if output == "projection" else "advice"]
    if len(entries) != 1:
        raise BadRecording(f"ddpbench {' '.join(command)}: {len(entries)} entries, where the row is one")
    return entries[0], document
