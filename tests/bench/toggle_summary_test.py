#!/usr/bin/env python3
"""toggle_summary.py on synthetic runs: the median and its bootstrap interval, the verdict against
the target, runs pooled from several directories, and a clear failure when there are none; and the
recorders' table (run_recorders_side_by_side.sh): each condition's ratio to A, gpumem's added cost
as a fraction of stacks="all"'s from the same resamples, the A/A control, the targets per mode."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "toggle_summary.py")


def write_runs(directory, per_process, name="toggle.txt"):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "w") as f:
        for ratios in per_process:
            f.write(json.dumps({"toggle_pairs": len(ratios), "toggle_wall_ratios": ratios,
                                "toggle_cpu_ratios": ratios}) + "\n")


UNSUPPORTED = "cudaMallocAsync does not yet support recordHistory."


def write_recorder_runs(directory, row, per_process, suffix=".recorders.txt", unavailable=None):
    """per_process: one {condition: [ratio per block]} per process, into DIRECTORY/ROW+suffix."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, row + suffix), "a") as f:
        for ratios in per_process:
            f.write(json.dumps({"recorder_blocks": len(ratios["B"]), "recorder_wall_ratios": ratios,
                                "recorder_cpu_ratios": ratios, "recorder_window_ms": {"A": 1.5},
                                "recorder_unavailable": unavailable or {}}) + "\n")


def table_row(output, model, mode):
    return next(line for line in output.splitlines() if line.startswith(f"| {model} | {mode} |"))


def summary(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


class ToggleSummary(unittest.TestCase):
    def test_a_run_well_under_the_target_meets_it(self):
        with tempfile.TemporaryDirectory() as out:
            write_runs(out, [[1.01, 1.02, 1.03]] * 6)
            result = summary(out)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("18 pairs; wall ratio 1.020", result.stdout)
            self.assertIn("bootstrap over 6 processes", result.stdout)
            self.assertIn("target 1.05x: met (the interval's upper end is 1.020)", result.stdout)

    def test_an_interval_reaching_the_target_does_not_meet_it(self):
        with tempfile.TemporaryDirectory() as out:
            # A median under 1.05, but processes spread enough that the interval crosses it.
            write_runs(out, [[1.00], [1.01], [1.03], [1.04], [1.09], [1.10]])
            result = summary(out)
            self.assertIn("wall ratio 1.035", result.stdout)
            self.assertIn("target 1.05x: not met", result.stdout)
            self.assertIn("target 1.04x: not met", summary("--target", "1.04", out).stdout)

    def test_directories_are_pooled_and_the_control_reported(self):
        with tempfile.TemporaryDirectory() as top:
            first, second = os.path.join(top, "a"), os.path.join(top, "b")
            write_runs(first, [[1.02, 1.02]] * 3)
            write_runs(second, [[1.04, 1.04]] * 5)
            write_runs(second, [[0.99, 1.01]] * 2, name="toggle_aa.txt")
            result = summary("--header", "pooled", first, second)
            lines = result.stdout.splitlines()
            self.assertEqual(lines[0], "pooled")
            self.assertIn("16 pairs; wall ratio 1.040", lines[1])
            self.assertIn("bootstrap over 8 processes", lines[1])
            self.assertIn("A/A control (both windows paused): 4 pairs; wall ratio 1.000", lines[2])

    def test_no_runs_is_an_error(self):
        with tempfile.TemporaryDirectory() as out:
            result = summary(out)
            self.assertNotEqual(result.returncode, 0)
            self.assertIn("toggle_summary: no runs in", result.stderr)


class RecordersTable(unittest.TestCase):
    def test_each_conditions_ratio_and_the_added_cost_fraction(self):
        with tempfile.TemporaryDirectory() as out:
            write_recorder_runs(out, "mlp.default",
                                [{"B": [1.02] * 5, "C": [1.5] * 5, "D": [1.2] * 5}] * 4)
            write_recorder_runs(out, "mlp.default", [{"B": [0.99, 1.0, 1.01]}] * 2,
                                suffix=".recorders_aa.txt")
            result = summary(out)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("| model | allocator | processes | step, A (ms) | B/A gpumem | "
                          "C/A stacks=all | D/A stacks=python | (B-1)/(C-1) | A/A control |",
                          result.stdout)
            self.assertEqual(table_row(result.stdout, "mlp", "default"),
                             "| mlp | default | 4 (20 blocks) | 1.500 | 1.020 (1.020–1.020) | "
                             "1.500 (1.500–1.500) | 1.200 (1.200–1.200) | 0.040 (0.040–0.040) | "
                             "1.000 (1.000–1.000) |")
            self.assertIn("mlp, default: B/A upper end <= 1.03: met (upper end 1.020)",
                          result.stdout)

    def test_an_interval_crossing_the_target_does_not_meet_it(self):
        with tempfile.TemporaryDirectory() as out:
            spread = [{"B": [b], "C": [1.5], "D": [1.2]} for b in (1.00, 1.01, 1.02, 1.03, 1.06)]
            write_recorder_runs(out, "transformer-amp.expandable", spread)
            result = summary(out)
            self.assertIn("| transformer-amp | expandable | 5 (5 blocks) | 1.500 | 1.020 (",
                          result.stdout)
            self.assertIn("transformer-amp, expandable: B/A upper end <= 1.03: not met",
                          result.stdout)

    def test_the_fraction_comes_from_the_same_resamples(self):
        # Each process's own B and C give (B-1)/(C-1) = 0.1: resampled together, every resample
        # does too; resampled apart, a process's B would meet another's C (0.02 or 0.5).
        with tempfile.TemporaryDirectory() as out:
            write_recorder_runs(out, "mlp.default", [{"B": [1.01] * 3, "C": [1.1] * 3, "D": [1.1]},
                                                     {"B": [1.05] * 3, "C": [1.5] * 3, "D": [1.1]}])
            result = summary(out)
            self.assertIn("| 0.100 (0.100–0.100) |", table_row(result.stdout, "mlp", "default"))

    def test_tensors_mode_without_the_recorder_takes_c_from_the_default_mode(self):
        with tempfile.TemporaryDirectory() as out:
            write_recorder_runs(out, "mlp.default", [{"B": [1.01] * 4, "C": [1.5] * 4,
                                                      "D": [1.2] * 4}] * 3)
            write_recorder_runs(out, "mlp.tensors", [{"B": [1.04] * 4}] * 3,
                                unavailable={"C": UNSUPPORTED, "D": UNSUPPORTED})
            result = summary(out)
            row = table_row(result.stdout, "mlp", "tensors")
            self.assertEqual(row, "| mlp | tensors | 3 (12 blocks) | 1.500 | 1.040 (1.040–1.040) | "
                                  "n/a (not available) | n/a (not available) | "
                                  "0.080 (0.080–0.080), C of default | – |")
            self.assertIn(f"- mlp, tensors: C, D not available: {UNSUPPORTED}", result.stdout)
            self.assertIn("- mlp, tensors: (B-1)/(C-1) takes C from the default allocator's",
                          result.stdout)
            self.assertIn("mlp, tensors: B/A upper end <= 1.05: met (upper end 1.040)",
                          result.stdout)
            self.assertIn("mlp, tensors: (B-1)/(C-1) upper end <= 0.25: met (upper end 0.080)",
                          result.stdout)

    def test_a_fraction_over_a_quarter_does_not_meet_the_tensors_target(self):
        with tempfile.TemporaryDirectory() as out:
            write_recorder_runs(out, "mlp.tensors", [{"B": [1.2] * 2, "C": [1.5] * 2,
                                                      "D": [1.3] * 2}] * 3)
            result = summary(out)
            self.assertIn("(B-1)/(C-1) upper end <= 0.25: not met (upper end 0.400)",
                          result.stdout)

    def test_one_process_has_no_interval(self):
        with tempfile.TemporaryDirectory() as out:
            write_recorder_runs(out, "mlp.default", [{"B": [1.01] * 3, "C": [1.5] * 3,
                                                      "D": [1.2] * 3}])
            result = summary(out)
            self.assertIn("| 1.010 (1 process) |", table_row(result.stdout, "mlp", "default"))
            self.assertIn("mlp, default: B/A upper end <= 1.03: not measured", result.stdout)

    def test_pooled_with_the_toggle_runs(self):
        with tempfile.TemporaryDirectory() as top:
            first, second = os.path.join(top, "a"), os.path.join(top, "b")
            write_runs(first, [[1.02, 1.02]] * 3)
            write_recorder_runs(first, "mlp.default", [{"B": [1.01], "C": [1.4], "D": [1.2]}] * 2)
            write_recorder_runs(second, "mlp.default", [{"B": [1.01], "C": [1.4], "D": [1.2]}] * 3)
            result = summary(first, second)
            self.assertIn("6 pairs; wall ratio 1.020", result.stdout)
            self.assertIn("| mlp | default | 5 (5 blocks) |", result.stdout)


if __name__ == "__main__":
    unittest.main()
