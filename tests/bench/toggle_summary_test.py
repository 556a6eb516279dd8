#!/usr/bin/env python3
"""toggle_summary.py on synthetic runs: the median and its bootstrap interval, the verdict against
the target, runs pooled from several directories, and a clear failure when there are none."""
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


if __name__ == "__main__":
    unittest.main()
