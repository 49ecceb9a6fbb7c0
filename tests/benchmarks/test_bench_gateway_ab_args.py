"""``benchmarks/bench_gateway_ab.py``'s settings per arm: ``--new-env`` and ``--old-env`` add up
over repeated uses (each used to replace the last, so an A/B of three settings ran with one)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_gateway_ab  # noqa: E402


def test_repeated_env_options_add_up():
    args = bench_gateway_ab.build_parser().parse_args([
        "--old", "/tmp/old", "--new-env", "A=1", "--new-env", "B=2", "C=3", "--old-env", "D=4"])
    assert args.new_env == ["A=1", "B=2", "C=3"]
    assert args.old_env == ["D=4"]
    assert bench_gateway_ab.build_parser().parse_args(["--old", "/tmp/old"]).new_env == []
