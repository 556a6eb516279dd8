#!/usr/bin/env python3
"""step_time_timed.py without torch or a GPU: the Williams orders, the windows each condition gets
(and what is switched on in each), a recorder that raises, the ratios of a block, the budget in
steps or seconds, the command line, and the whole run in --dry-run; and run_recorders_side_by_side.sh in
its dry run, through to the summary's table."""
import importlib.util
import itertools
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "step_time_timed.py")
RUNNER = os.path.join(HERE, "run_recorders_side_by_side.sh")
spec = importlib.util.spec_from_file_location("step_time_timed", SCRIPT)
timed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(timed)


class Process:
    """Stand-ins for gpumem's switch and PyTorch's recorder that log what each step ran under."""

    def __init__(self, recorder_raises=False):
        self.gpumem_on = False
        self.stacks = None
        self.recorder_raises = recorder_raises
        self.recorder_calls = []
        self.steps = []  # (step, gpumem on, recorder stacks)

    def train_step(self, step):
        self.steps.append((step, self.gpumem_on, self.stacks))

    def gpumem_switch(self, on):
        self.gpumem_on = on

    def recorder(self, stacks):
        self.recorder_calls.append(stacks)
        if stacks is not None and self.recorder_raises:
            raise RuntimeError("cudaMallocAsync does not yet support recordHistory. If you need it")
        self.stacks = stacks

    def conditions(self):
        return timed.Conditions(self.gpumem_switch, self.recorder)


def condition_of(gpumem_on, stacks):
    return "B" if gpumem_on else {None: "A", "all": "C", "python": "D"}[stacks]


def windows_run(process, window):
    """The condition of each window, from what its steps ran under (each the same throughout)."""
    conditions = [condition_of(on, stacks) for _, on, stacks in process.steps]
    windows = [conditions[i:i + window] for i in range(0, len(conditions), window)]
    for each in windows:
        assert len(set(each)) == 1, each
    return "".join(each[0] for each in windows)


class WilliamsDesign(unittest.TestCase):
    def test_each_condition_in_each_place_once_and_after_each_other_once(self):
        orders = timed.WILLIAMS_ORDERS
        for place in range(4):
            self.assertEqual(sorted(order[place] for order in orders), list("ABCD"))
        followers = sorted((a, b) for order in orders for a, b in zip(order, order[1:]))
        self.assertEqual(followers, sorted(itertools.permutations("ABCD", 2)))


class Blocks(unittest.TestCase):
    def test_warm_up_then_the_orders_in_turn_with_the_recorder_off_between_windows(self):
        process = Process()
        blocks, steps = timed.run_blocks(process.train_step, 3, process.conditions(), lambda: None,
                                         lambda done, elapsed: done < 5)
        self.assertEqual(windows_run(process, 3), "ABCD" + "ABDC" "BCAD" "CDBA" "DACB" "ABDC")
        self.assertEqual([step for step, _, _ in process.steps], list(range(1, 1 + 24 * 3)))
        self.assertEqual(steps, 1 + 24 * 3)
        self.assertEqual(len(blocks), 5)
        self.assertEqual(sorted(blocks[0]), list("ABCD"))
        # Never on twice in a row: each window that had it on turned it off before the next.
        calls = process.recorder_calls
        self.assertEqual(calls[:4], ["all", None, "python", None])
        self.assertTrue(all(a is None or b is None for a, b in zip(calls, calls[1:])), calls)
        self.assertIsNone(calls[-1])
        self.assertFalse(process.gpumem_on)  # left paused

    def test_a_recorder_that_raises_leaves_its_conditions_out_and_a_b_goes_on(self):
        process = Process(recorder_raises=True)
        conditions = process.conditions()
        blocks, _ = timed.run_blocks(process.train_step, 2, conditions, lambda: None,
                                     lambda done, elapsed: done < 4)
        self.assertEqual(windows_run(process, 2), "AB" + "AB" "BA" "BA" "AB")
        self.assertEqual(sorted(conditions.unavailable), ["C", "D"])
        self.assertIn("does not yet support recordHistory", conditions.unavailable["C"])
        self.assertEqual(process.recorder_calls, ["all", "python"])  # tried once each, never again
        self.assertTrue(all(sorted(block) == ["A", "B"] for block in blocks))

    def test_an_error_without_a_message_is_named_by_its_type(self):
        def recorder(stacks):
            if stacks is not None:
                raise NotImplementedError()

        conditions = timed.Conditions(lambda on: None, recorder)
        self.assertFalse(conditions.enter("C"))
        self.assertEqual(conditions.unavailable, {"C": "NotImplementedError"})

    def test_without_gpumems_switch_b_is_left_out(self):
        process = Process()
        conditions = timed.Conditions(None, process.recorder)
        timed.run_blocks(process.train_step, 1, conditions, lambda: None,
                         lambda done, elapsed: done < 1)
        self.assertEqual(windows_run(process, 1), "ACD" + "ADC")
        self.assertIn("libgpumem_bench.so", conditions.unavailable["B"])

    def test_each_block_gives_its_windows_over_its_own_a_window(self):
        def figures(ms, cpu_ms):
            return {"ms": ms, "cpu_ms": cpu_ms, "thread_cpu_ms": cpu_ms}

        blocks = [{"A": figures(2.0, 1.0), "B": figures(2.1, 1.2), "C": figures(3.0, 2.0),
                   "D": figures(2.4, 1.5)},
                  {"A": figures(4.0, 2.0), "B": figures(4.0, 2.0), "C": figures(5.0, 3.0),
                   "D": figures(4.4, 2.2)}]
        result = timed.recorder_figures(blocks, {})
        self.assertEqual(result["recorder_blocks"], 2)
        self.assertEqual(result["recorder_wall_ratios"],
                         {"B": [1.05, 1.0], "C": [1.5, 1.25], "D": [1.2, 1.1]})
        self.assertEqual(result["recorder_cpu_ratios"],
                         {"B": [1.2, 1.0], "C": [2.0, 1.5], "D": [1.5, 1.1]})
        self.assertEqual(result["recorder_window_ms"], {"A": 3.0, "B": 3.05, "C": 4.0, "D": 3.4})
        only_ab = timed.recorder_figures([{"A": figures(2.0, 1.0), "B": figures(2.2, 1.1)}],
                                         {"C": "why", "D": "why"})
        self.assertEqual(only_ab["recorder_wall_ratios"], {"B": [1.1]})
        self.assertEqual(only_ab["recorder_unavailable"], {"C": "why", "D": "why"})


class Budget(unittest.TestCase):
    def test_steps_in_whole_blocks_or_seconds(self):
        more = timed.block_budget(timed.parse_arguments(["1000", "--recorders"]))  # 4 x 25 a block
        self.assertEqual([more(done, 0) for done in (9, 10)], [True, False])
        more = timed.block_budget(timed.parse_arguments(["10", "--recorders"]))
        self.assertEqual([more(done, 0) for done in (0, 1)], [True, False])  # at least one
        more = timed.block_budget(timed.parse_arguments(["--recorders", "--seconds", "2"]))
        self.assertEqual([more(0, 5), more(3, 1.9), more(3, 2.0)], [True, True, False])


class CommandLine(unittest.TestCase):
    def test_defaults_and_windows_per_model(self):
        args = timed.parse_arguments([])
        self.assertEqual((args.steps, args.model, args.window, args.recorders),
                         (20, "mlp", 25, False))
        args = timed.parse_arguments(["300", "--model", "transformer", "--amp"])
        self.assertEqual((args.steps, args.window, args.amp), (300, 10, True))
        self.assertEqual(timed.parse_arguments(["--window", "7"]).window, 7)

    def test_bad_arguments_are_usage_errors(self):
        for argv in (["--amp"], ["--seconds", "3"], ["--recorders", "--seconds", "0"],
                     ["--model", "cnn"], ["0"], ["--window", "0"]):
            result = subprocess.run([sys.executable, SCRIPT, *argv], capture_output=True, text=True)
            self.assertEqual(result.returncode, 2, argv)
            self.assertIn("step_time_timed.py: error:", result.stderr)


def dry_run(*argv, **environment):
    result = subprocess.run([sys.executable, SCRIPT, "--dry-run", *argv], capture_output=True,
                            text=True, env=dict(os.environ, **environment))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


class DryRun(unittest.TestCase):
    def test_recorders_in_each_allocator_mode(self):
        line = dry_run("200", "--recorders", PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
        self.assertEqual(line["recorder_blocks"], 2)
        self.assertEqual(sorted(line["recorder_wall_ratios"]), ["B", "C", "D"])
        self.assertEqual(line["recorder_unavailable"], {})
        self.assertFalse(line["aa_control"])
        line = dry_run("--recorders", "--seconds", "0.05", "--model", "transformer", "--amp",
                       PYTORCH_CUDA_ALLOC_CONF="backend:cudaMallocAsync",
                       GPUMEM_BENCH_TOGGLE_AA="1")
        self.assertEqual((line["model"], line["amp"], line["window_steps"]),
                         ("transformer", True, 10))
        self.assertEqual(sorted(line["recorder_wall_ratios"]), ["B"])
        self.assertEqual(sorted(line["recorder_unavailable"]), ["C", "D"])
        self.assertTrue(line["aa_control"])

    def test_the_toggle_keeps_its_line(self):
        line = dry_run("101")
        self.assertEqual(line["toggle_pairs"], 2)
        for key in ("steps", "step_ms", "step_ms_median_window", "step_cpu_ms",
                    "step_process_cpu_ms", "toggle_wall_ratios", "toggle_cpu_ratios"):
            self.assertIn(key, line)


class Runner(unittest.TestCase):
    def test_dry_run_of_two_modes_through_to_the_table(self):
        with tempfile.TemporaryDirectory() as out:
            environment = dict(os.environ, GPUMEM_BENCH_DRY_RUN="1", MODELS="mlp",
                               MODES="default tensors", PYTHON=sys.executable)
            result = subprocess.run([RUNNER, "build", "2", "0.05", out], capture_output=True,
                                    text=True, env=environment)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("recorders side by side: mlp x default tensors, 2 processes (+ 1 A/A)",
                          result.stdout)
            self.assertIn("| mlp | default | 2 (", result.stdout)
            self.assertIn("| mlp | tensors | 2 (", result.stdout)
            # The tensors mode's environment reached the process: its recorder raised.
            self.assertIn("- mlp, tensors: C, D not available: cudaMallocAsync", result.stdout)
            self.assertNotIn("mlp, default: C", result.stdout)
            with open(os.path.join(out, "mlp.tensors.recorders_aa.txt")) as control:
                self.assertTrue(json.loads(control.readline())["aa_control"])
            with open(os.path.join(out, "mlp.default.recorders.txt")) as runs:
                self.assertEqual(len(runs.readlines()), 2)

    def test_an_unknown_mode_is_a_usage_error(self):
        result = subprocess.run([RUNNER], capture_output=True, text=True,
                                env=dict(os.environ, MODES="default async"))
        self.assertEqual(result.returncode, 2)
        self.assertIn("unknown mode 'async'", result.stderr)


if __name__ == "__main__":
    unittest.main()
