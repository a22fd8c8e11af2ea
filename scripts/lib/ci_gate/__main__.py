"""python3 -I -S scripts/lib/ci_gate ARGS (what scripts/ci-bench runs)."""
import sys
import traceback
from pathlib import Path

if __package__ in (None, ""):  # run as a folder: its parent, scripts/lib, is where the package and lockstep live
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.path.insert(0, str(here.parent))
try:
    from ci_gate.main import main
except KeyboardInterrupt:  # SIGINT before main's handlers: the signal's answer, never an uncaught error's 1
    sys.exit(130)
except Exception:  # the gate cannot even start (a file of it missing or broken): its own failure, never 1
    traceback.print_exc()
    print("scripts/ci-bench: the gate itself failed to start (above): never the candidate's fault", file=sys.stderr)
    try:
        from ci_gate.outcomes import wants_bisect
        bisect = wants_bisect(sys.argv[1:])
    except Exception:
        bisect = any(arg.startswith("--bis") for arg in sys.argv[1:])
    sys.exit(128 if bisect else 2)

try:
    sys.exit(main(sys.argv[1:], restore_handlers=False))
except KeyboardInterrupt:  # SIGINT in the instants before main installs its handlers
    sys.exit(130)
