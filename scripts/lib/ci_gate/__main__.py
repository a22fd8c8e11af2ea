"""python3 scripts/lib/ci_gate ARGS (what scripts/ci-bench runs)."""
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a folder: its parent, scripts/lib, is where the package and lockstep live
    sys.path[0] = str(Path(__file__).resolve().parent.parent)
    from ci_gate.main import main
else:
    from .main import main

sys.exit(main(sys.argv[1:]))
