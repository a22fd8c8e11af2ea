"""An SVG timeline of a merged trace's traced steps (`ddpbench trace`): one band per rank, its
phases on the training thread, its bucket allreduces below them, and its GPU kernels where
there are any, all on the merged clock. Drawn here because no trace viewer runs headless on a
machine without a network; Perfetto and chrome://tracing open the merged trace itself.
"""
from __future__ import annotations

from html import escape
from typing import Any

from trace_report import BUCKET_PREFIX, PHASES, PIDS_PER_RANK, STEP_PREFIX, TIMELINE_ID  # beside this file

PHASE_COLOURS = dict(zip(PHASES, ("#9e9e9e", "#4e79a7", "#f28e2b", "#e15759", "#59a14f")))
BUCKET_COLOUR = "#b07aa1"
KERNEL_COLOUR = "#76b7b2"
WIDTH, LEFT, LANE, GAP = 1200, 90, 18, 14


class _Canvas:
    """The traced steps' span mapped onto the picture's width."""

    def __init__(self, t0: float, t1: float) -> None:
        self.t0, self.t1 = t0, t1
        self.scale = (WIDTH - LEFT - 20) / (t1 - t0)

    def x(self, ts: float) -> float:
        return LEFT + (ts - self.t0) * self.scale

    def rect(self, e: dict, y: float, colour: str) -> str:
        width = max(0.5, e["dur"] * self.scale)
        return (f'<rect x="{self.x(e["ts"]):.2f}" y="{y:.1f}" width="{width:.2f}" height="{LANE - 3}" '
                f'fill="{colour}"><title>{escape(e["name"])}: {e["dur"] / 1e3:.3f} ms</title></rect>')


def _rank_band(canvas: _Canvas, events: list[dict], rank: int, top: float, lanes: list[str], first: bool) -> list[str]:
    """One rank: its phases, its bucket allreduces and its kernels in lanes, its steps' starts as lines."""
    out = [f'<text x="4" y="{top + LANE - 5}">rank {rank}</text>']
    for lane, name in enumerate(lanes[1:], start=1):
        out.append(f'<text x="14" y="{top + lane * LANE + LANE - 5}" fill="#555">{name}</text>')
    mine = [e for e in events if e["pid"] // PIDS_PER_RANK == rank]
    for e in mine:
        if e["name"] in PHASE_COLOURS and e.get("cat") == "user_annotation":
            out.append(canvas.rect(e, top, PHASE_COLOURS[e["name"]]))
        elif e["name"].startswith(BUCKET_PREFIX) and e.get("cat") == "user_annotation":
            out.append(canvas.rect(e, top + LANE, BUCKET_COLOUR))
        elif e.get("cat") == "kernel":
            out.append(canvas.rect(e, top + 2 * LANE, KERNEL_COLOUR))
    for e in mine:
        if e["name"].startswith(STEP_PREFIX):
            x = canvas.x(e["ts"])
            out.append(f'<line x1="{x:.2f}" x2="{x:.2f}" y1="{top - 2}" y2="{top + len(lanes) * LANE}" '
                       f'stroke="black" stroke-width="0.7"/>')
            if first:
                out.append(f'<text x="{x + 2:.2f}" y="{top - 3}" font-size="9">step {e["name"][len(STEP_PREFIX):]}</text>')
    return out


def _axis_and_legend(canvas: _Canvas, axis_y: float, height: float) -> list[str]:
    out = []
    span_ms = (canvas.t1 - canvas.t0) / 1e3
    for k in range(11):
        px = LEFT + (WIDTH - LEFT - 20) * k / 10
        out.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{axis_y}" y2="{axis_y + 4}" stroke="black"/>')
        out.append(f'<text x="{px:.1f}" y="{axis_y + 15}" text-anchor="middle">{span_ms * k / 10:.1f} ms</text>')
    legend_x = LEFT
    for name, colour in list(PHASE_COLOURS.items()) + [("bucket allreduce", BUCKET_COLOUR), ("GPU kernel", KERNEL_COLOUR)]:
        out.append(f'<rect x="{legend_x}" y="{height - 14}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{legend_x + 13}" y="{height - 5}">{name}</text>')
        legend_x += 22 + 7 * len(name)
    return out


def draw_timeline(merged: dict[str, Any]) -> str:
    events = [e for e in merged["traceEvents"] if e.get("ph") == "X" and "ts" in e and "dur" in e
              and isinstance(e.get("pid"), int)]
    steps = [e for e in events if e["name"].startswith(STEP_PREFIX)]
    if not steps:
        raise ValueError("the merged trace has no ProfilerStep ranges to draw")
    canvas = _Canvas(min(e["ts"] for e in steps), max(e["ts"] + e["dur"] for e in steps))
    ranks = sorted({e["pid"] // PIDS_PER_RANK for e in steps})
    lanes = ["phases", "buckets"] + (["kernels"] if any(e.get("cat") == "kernel" for e in events) else [])
    band = len(lanes) * LANE + GAP
    height = 50 + band * len(ranks) + 40
    info = merged.get("ddpbench", {})
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" id="{TIMELINE_ID}" width="{WIDTH}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
           f'<text x="{LEFT}" y="16" font-size="13">{escape(str(info.get("row", "")))}: steps '
           f'{info.get("first_step", "")}-{info.get("last_step", "")}, {len(ranks)} ranks on one clock</text>']
    for i, rank in enumerate(ranks):
        out += _rank_band(canvas, events, rank, 30 + i * band, lanes, first=i == 0)
    out += _axis_and_legend(canvas, 30 + band * len(ranks) + 4, height)
    out.append("</svg>")
    return "\n".join(out) + "\n"
