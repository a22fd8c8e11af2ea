"""A clock of the time this process could run: time.monotonic() less the spans it was stopped
(SIGSTOP, Ctrl-Z, a frozen cgroup or container, a suspended machine). A thread ticks every TICK_S;
a gap between two ticks longer than GAP_S is time nobody here ran, and the clock does not count
it (while the thread has not yet ticked after one, the clock holds at GAP_S past its last tick).
Deadlines on it blame no build for a pause of the whole job or of the gate alone (the thirteenth
attack: a job stopped for 8 s past a 5 s turn deadline was "the candidate, hang", exit 1 under
--bisect). A machine so loaded that the thread waits more than GAP_S lengthens them too: a
deadline finds hangs, and a hang is never made of time the gate did not see."""
from __future__ import annotations

import threading
import time

TICK_S = 0.05
GAP_S = 1.0

_lock = threading.Lock()
_paused_s = 0.0
_last_tick = time.monotonic()
_ticker: threading.Thread | None = None


def _tick() -> None:
    global _paused_s, _last_tick
    while True:
        time.sleep(TICK_S)
        now = time.monotonic()
        with _lock:
            gap = now - _last_tick
            if gap > GAP_S:  # continuous with what now() said while the thread was away
                _paused_s += gap - GAP_S
            _last_tick = now


def now() -> float:
    """Seconds, as time.monotonic(), of the time this process ran."""
    global _ticker, _last_tick
    with _lock:
        if _ticker is None:
            _last_tick = time.monotonic()
            _ticker = threading.Thread(target=_tick, name="running-clock", daemon=True)
            _ticker.start()
        return min(time.monotonic(), _last_tick + GAP_S) - _paused_s
