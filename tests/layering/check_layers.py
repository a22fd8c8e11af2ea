#!/usr/bin/env python3
"""Checks that every #include between ddpbench's source folders points down the layers of
cmake/layers.json, and that LibTorch-free layers stay free of LibTorch.

Usage: check_layers.py SOURCE_DIR [--layers FILE]
Prints one line per violation, naming the file, the line and the rule, and exits 1 when
there is any; exits 2 when the layer file itself is malformed (a cycle, an unknown folder).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

SOURCE_SUFFIXES = (".cpp", ".hpp", ".h", ".cu")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
LIBTORCH_INCLUDE = re.compile(r"^(torch|ATen|c10|caffe2)/")


@dataclass
class Layer:
    folder: str
    libtorch: bool
    uses: list[str]
    headers: list[str] = field(default_factory=list)
    below: set[str] = field(default_factory=set)  # every folder this layer may include


@dataclass
class Violation:
    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


class LayerFileError(Exception):
    pass


def load_layers(path: Path) -> dict[str, Layer]:
    data = json.loads(path.read_text())
    layers: dict[str, Layer] = {}
    for entry in data["layers"]:
        layers[entry["folder"]] = Layer(entry["folder"], bool(entry["libtorch"]), list(entry["uses"]),
                                        list(entry.get("headers", [])))
    for layer in layers.values():
        for used in layer.uses:
            if used not in layers:
                raise LayerFileError(f"{path}: layer {layer.folder} uses unknown folder {used}")
        for header in layer.headers:
            if folder_of(header, layers) is None:
                raise LayerFileError(f"{path}: layer {layer.folder} names {header}, outside every layer")

    def closure(folder: str, trail: tuple[str, ...]) -> set[str]:
        if folder in trail:
            raise LayerFileError(f"{path}: the layers form a cycle: {' -> '.join(trail + (folder,))}")
        result: set[str] = set()
        for used in layers[folder].uses:
            result |= {used} | closure(used, trail + (folder,))
        return result

    for layer in layers.values():
        layer.below = closure(layer.folder, ())
    return layers


def folder_of(path: str, layers: dict[str, Layer]) -> str | None:
    """The layer folder holding `path` (the longest matching folder), or None."""
    best = None
    for folder in layers:
        if path.startswith(folder + "/") and (best is None or len(folder) > len(best)):
            best = folder
    return best


def includes_of(path: Path) -> list[tuple[int, str, bool]]:
    """(line number, included path, quoted) for every #include of `path`."""
    found = []
    for number, text in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        match = INCLUDE.match(text)
        if match:
            found.append((number, match.group(2), match.group(1) == '"'))
    return found


def source_files(root: Path, layers: dict[str, Layer]) -> list[str]:
    files = []
    for folder in layers:
        for path in sorted((root / folder).rglob("*")):
            relative = path.relative_to(root).as_posix()
            if path.suffix in SOURCE_SUFFIXES and folder_of(relative, layers) == folder:
                files.append(relative)
    return files


def uses_libtorch(header: str, root: Path, seen: dict[str, bool]) -> bool:
    """Whether `header` includes LibTorch, directly or through the project's headers."""
    if header in seen:
        return seen[header]
    seen[header] = False  # a header cycle is broken here; the include guard would do the same
    result = False
    path = root / header
    if path.is_file():
        for _, included, quoted in includes_of(path):
            if LIBTORCH_INCLUDE.match(included) or (quoted and uses_libtorch(included, root, seen)):
                result = True
                break
    seen[header] = result
    return result


def reach(layer: Layer, layers: dict[str, Layer]) -> set[str]:
    """The folders `layer` stands above: those below it, and those whose headers it may use."""
    return layer.below | {folder_of(header, layers) for header in layer.headers}


def check(root: Path, layers: dict[str, Layer]) -> list[Violation]:
    violations: list[Violation] = []
    torch_seen: dict[str, bool] = {}
    for relative in source_files(root, layers):
        layer = layers[folder_of(relative, layers)]
        for number, included, quoted in includes_of(root / relative):
            if not quoted:
                if not layer.libtorch and LIBTORCH_INCLUDE.match(included):
                    violations.append(Violation(relative, number,
                                                f"<{included}>: {layer.folder} is LibTorch-free"))
                continue
            target = folder_of(included, layers)
            if target is None:
                if not (root / included).is_file():
                    violations.append(Violation(relative, number,
                                                f'"{included}" is not a file of any layer'))
                continue
            if target == layer.folder:
                pass
            elif target in layer.below:
                pass
            elif included in layer.headers:
                pass
            elif layer.folder in reach(layers[target], layers):
                violations.append(Violation(relative, number,
                                            f'"{included}" points up: {target} is above {layer.folder}'))
            else:
                violations.append(Violation(relative, number,
                                            f'"{included}": {target} is not below {layer.folder} '
                                            f"(it would tie two layers of one level together)"))
            if not layer.libtorch and uses_libtorch(included, root, torch_seen):
                violations.append(Violation(relative, number,
                                            f'"{included}" brings in LibTorch; {layer.folder} is LibTorch-free'))
    return violations


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source_dir", type=Path)
    parser.add_argument("--layers", type=Path, help="the layer file (default: SOURCE_DIR/cmake/layers.json)")
    args = parser.parse_args(argv)
    layer_file = args.layers or args.source_dir / "cmake" / "layers.json"
    try:
        layers = load_layers(layer_file)
    except (LayerFileError, KeyError, json.JSONDecodeError) as error:
        print(f"check_layers: {layer_file}: {error}", file=sys.stderr)
        return 2
    violations = check(args.source_dir, layers)
    for violation in violations:
        print(violation)
    files = len(source_files(args.source_dir, layers))
    print(f"check_layers: {files} files, {len(layers)} layers, {len(violations)} violations", file=sys.stderr)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
