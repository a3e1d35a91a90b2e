"""How long `ptxbench report` takes over 10,000 turns (goal: under 10 s on the 2-core development machine).

Writes a synthetic experiment (turns.csv of 1,250 trajectories x 8 turns: 5 models x 5 definitions x 2 prompt
tags x 25 replicas, seeded), then times the command end to end in a fresh process (imports included) and the
library call's stages in this one. Usage: ``uv run python benchmarks/report_speed.py [--runs 3]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mini_ptx_agent.runs.turns import TurnRow

ROOT = Path(__file__).resolve().parents[1]
MODELS = [f"model-{i}" for i in range(5)]
DEFINITIONS = [
    "gemm_n7168_k5120",
    "gemm_n4096_k4096",
    "mha_fwd_h32_d128",
    "mha_bwd_h32_d128",
    "rmsnorm_h4096",
]
TAGS = ["hopper-no-hint", "hopper-abi-only"]
REPLICAS, TURNS = 25, 8


def synthetic_rows(seed: int = 0) -> list[TurnRow]:
    """10,000 TurnRows: each turn PASSED with a probability rising with the model index, else a failure."""
    rng = random.Random(seed)
    rows = []
    for m, model in enumerate(MODELS):
        for definition in DEFINITIONS:
            for tag in TAGS:
                for replica in range(REPLICAS):
                    for turn in range(1, TURNS + 1):
                        passed = rng.random() < 0.15 + 0.08 * m
                        speed = round(rng.lognormvariate(-0.3 + 0.1 * m, 0.5), 3) if passed else None
                        rows.append(TurnRow(
                            experiment="bench", trajectory=f"{model}-{definition}-{tag}-{replica}", model=model,
                            definition=definition, language="cuda", arch="sm_90a", prompt_tag=tag, replica=replica,
                            turn=turn, failure_class="PASSED" if passed else rng.choice(["compile", "incorrect", "format"]),
                            status="PASSED" if passed else "COMPILE_ERROR", executed_on_gpu=passed, target_speedup=1.2,
                            target_met=bool(speed and speed >= 1.2), speedups={"w0": speed} if passed else {},
                            min_speedup=speed, sass_families=["HGMMA", "UTMALDG"] if passed and rng.random() < 0.5 else [],
                            tokens_out=rng.randint(500, 20000),
                        ))  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exp = Path(tmp) / "bench"
        exp.mkdir()
        rows = synthetic_rows()
        sys.path.insert(0, str(ROOT / "tests" / "mini_ptx_agent" / "reports"))  # the tests' turns.csv writer
        from synthetic import write_turns_csv

        write_turns_csv(exp / "turns.csv", rows)
        walls = []
        for run in range(args.runs):
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "mini_ptx_agent.cli", "report", str(exp), "--out",
                                   str(Path(tmp) / f"out{run}"), "--json"], capture_output=True, text=True)  # fmt: skip
            walls.append(time.perf_counter() - started)
            if done.returncode:
                sys.exit(done.stderr)
        result = json.loads(done.stdout)

        from mini_ptx_agent.reports.report import build_report

        stages: list[tuple[str, float]] = []
        build_report([exp], Path(tmp) / "stages", step=lambda s: stages.append((s, time.perf_counter())))
        stages.append(("end", time.perf_counter()))
    print(
        f"turns: {len(rows)}, trajectories: {result['trajectories']}, load average: {os.getloadavg()[0]:.1f}"
    )
    print(f"ptxbench report (fresh process, imports included): median {statistics.median(walls):.2f} s "
          f"(min {min(walls):.2f}, max {max(walls):.2f}, n={len(walls)}); goal < 10 s")  # fmt: skip
    for (name, start), (_, end) in itertools.pairwise(stages):
        print(f"  {name}: {end - start:.2f} s")


if __name__ == "__main__":
    main()
