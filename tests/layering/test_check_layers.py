"""The layering checker catches the includes that once tied ddpbench's folders into one cycle.

Each case copies the real source tree, adds one include to one real file, and expects the
checker to name that file and line. Run from this folder: python3 -m unittest test_check_layers
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import unittest
from pathlib import Path

import check_layers

SOURCE_DIR = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))
SOURCE_FOLDERS = ("harness", "reports", "data", "models", "strategies", "cmake")


class LayeringTest(unittest.TestCase):
    def setUp(self) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="ddpbench-layering-"))
        for folder in SOURCE_FOLDERS:
            shutil.copytree(SOURCE_DIR / folder, self.scratch / folder)
        self.layers = check_layers.load_layers(self.scratch / "cmake" / "layers.json")

    def tearDown(self) -> None:
        shutil.rmtree(self.scratch)

    def add_include(self, file: str, include: str) -> int:
        """Appends `#include include` after the file's first line; returns its line number."""
        path = self.scratch / file
        lines = path.read_text().splitlines()
        lines.insert(1, f"#include {include}")
        path.write_text("\n".join(lines) + "\n")
        return 2

    def violations(self) -> list[str]:
        return [str(v) for v in check_layers.check(self.scratch, self.layers)]

    def expect_caught(self, file: str, include: str, words: str) -> None:
        line = self.add_include(file, include)
        found = self.violations()
        self.assertTrue(any(v.startswith(f"{file}:{line}:") and words in v for v in found),
                        f"{file} including {include}: expected '{words}', got {found}")

    def test_the_real_tree_is_clean(self) -> None:
        self.assertEqual(self.violations(), [])

    def test_reports_reaching_into_the_harness(self) -> None:
        self.expect_caught("reports/compare.cpp", '"harness/control/run_config.hpp"', "points up")

    def test_the_base_including_anything_of_the_project(self) -> None:
        self.expect_caught("harness/base/atomic_file.cpp", '"reports/run_result.hpp"', "points up")

    def test_data_reading_run_config_for_its_enums(self) -> None:
        self.expect_caught("data/batch_loader.hpp", '"harness/control/run_config.hpp"', "points up")
        self.expect_caught("data/dataset.hpp", '"harness/control/run_config.hpp"', "points up")

    def test_the_communicator_reaching_up_into_models(self) -> None:
        self.expect_caught("harness/distributed/communicator.hpp", '"models/sync_batch_norm.hpp"', "points up")

    def test_strategies_reaching_up_into_the_runner(self) -> None:
        self.expect_caught("strategies/mixed_precision.cpp", '"harness/runner/runner.hpp"', "points up")

    def test_measurement_and_reporting_stay_apart(self) -> None:
        # What a step's measurement is lives in the base, below both: the timers do not reach
        # into the report schema, nor the schema into the (LibTorch) timers.
        self.expect_caught("harness/timing/phase_timer.hpp", '"reports/run_result.hpp"', "is not below harness/timing")
        self.expect_caught("reports/run_result.hpp", '"harness/timing/phase_timer.hpp"', "is not below reports")

    def test_data_and_models_writing_through_reports(self) -> None:
        self.expect_caught("data/cifar10.cpp", '"reports/result_file.hpp"', "is not below data")
        self.expect_caught("models/checkpoint.cpp", '"reports/result_file.hpp"', "is not below models")

    def test_libtorch_in_a_libtorch_free_layer(self) -> None:
        self.expect_caught("harness/control/sweep.cpp", "<torch/torch.h>", "LibTorch-free")
        self.expect_caught("reports/compare.cpp", "<ATen/ATen.h>", "LibTorch-free")

    def test_a_libtorch_header_through_a_permitted_folder(self) -> None:
        self.expect_caught("harness/control/run_config.cpp", '"data/batch_loader.hpp"', "brings in LibTorch")

    def test_a_cycle_in_the_layer_file_is_refused(self) -> None:
        layer_file = self.scratch / "cmake" / "layers.json"
        data = json.loads(layer_file.read_text())
        for layer in data["layers"]:
            if layer["folder"] == "harness/base":
                layer["uses"] = ["reports"]
        layer_file.write_text(json.dumps(data))
        with self.assertRaisesRegex(check_layers.LayerFileError, "cycle"):
            check_layers.load_layers(layer_file)

    def test_every_source_file_belongs_to_a_layer(self) -> None:
        files = check_layers.source_files(self.scratch, self.layers)
        self.assertIn("strategies/ddp.cpp", files)
        self.assertIn("harness/base/statistics.hpp", files)
        on_disk = {p.relative_to(self.scratch).as_posix() for folder in SOURCE_FOLDERS
                   for p in (self.scratch / folder).rglob("*") if p.suffix in check_layers.SOURCE_SUFFIXES}
        self.assertEqual(on_disk - set(files), set(), "source files outside every layer")


if __name__ == "__main__":
    unittest.main()
