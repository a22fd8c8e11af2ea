"""python3 -I scripts/lib/ci_gate ARGS (what scripts/ci-bench runs)."""
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a folder: its parent, scripts/lib, is where the package and lockstep live
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.path.insert(0, str(here.parent))
    from ci_gate.main import main
else:
    from .main import main

sys.exit(main(sys.argv[1:]))
