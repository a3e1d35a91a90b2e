"""`ptxbench experiment run --ray ADDRESS`: trajectories as Ray tasks on a local cluster of real `ray start`
processes, against a real FIBServe on 127.0.0.1 (one CPU lane, Triton under the interpreter) and a scripted
OpenAI-compatible server.

The node is started with one model API key and the driver with another, so the key on each model request
shows where the trajectory ran (on the node, never in the driver) and that no secret travelled through Ray.
The run is stopped with SIGINT after its first turns and resumed with `--resume ... --ray`: every turn is
asked once, the per-model bound holds across the stop, the table and the manifest are written as without Ray.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mini_ptx_agent.environment.embedded import EmbeddedService
from mini_ptx_agent.reports.inputs import read_turns_csv
from ray_cluster import RayCluster
from scripted_kernels import BROKEN_MODEL, GOOD_MODEL, RESPOND
from scripted_model import ScriptedOpenAIServer
from serve_helpers import free_port
from test_experiment_run import asked_after, complete_turns, start, wait_until, write_config

pytestmark = pytest.mark.slow

NODE_KEY = "node-side-model-key-5a1f"
DRIVER_KEY = "driver-side-model-key-93c0"


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    cluster = RayCluster()
    try:
        cluster.add_node(cpus=2, resources={}, env={"ACCRL_MODEL_API_KEY": NODE_KEY})
        yield cluster
    finally:
        survivors = cluster.stop()
    assert not survivors, f"Ray processes left after the cluster stopped: {survivors}"


@pytest.fixture(scope="module")
def fibserve() -> Iterator[str]:
    with EmbeddedService(devices=["cpu"]) as service:
        yield service.url


def test_without_ray_nothing_imports_ray() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from mini_ptx_agent.cli import app\n"
        "import mini_ptx_agent.experiments.launch, mini_ptx_agent.experiments.runner\n"
        "result = CliRunner().invoke(app, ['experiment', 'run', '--help'])\n"
        "assert result.exit_code == 0 and \"'mini-ptx-agent[ray]'\" in result.output, result.output\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_ray_address_where_nothing_listens_is_refused_at_once_before_any_file(tmp_path: Path) -> None:
    config = write_config(tmp_path / "ray.yaml", definitions=["vector_add_f32"], models=[GOOD_MODEL])
    root = tmp_path / "experiment"
    proc = start(str(config), "--output", str(root), "--ray", f"127.0.0.1:{free_port()}", env={})
    output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 2, output
    assert "no Ray cluster at '127.0.0.1:" in output and "ray start --head" in output, output
    assert not root.exists()


@pytest.mark.timeout(900)  # 8 turns, 4 of them real evaluations on one CPU lane, plus Ray's start
def test_trajectories_run_as_ray_tasks_stop_and_resume_each_turn_once(
    cluster: RayCluster, fibserve: str, tmp_path: Path
) -> None:
    root = tmp_path / "experiment"
    config = write_config(
        tmp_path / "ray.yaml", name="ray", definitions=["vector_add_f32"], prompt_tags=["triton-hopper"],
        models=[{"name": GOOD_MODEL, "concurrency": 1}, BROKEN_MODEL], replicas=2, num_turns=2, concurrency=2,
    )  # fmt: skip
    with ScriptedOpenAIServer(respond=RESPOND) as models:
        where = ["--ray", cluster.address, "--service-url", fibserve, "--model-host", models.host_port]
        env = {"ACCRL_MODEL_API_KEY": DRIVER_KEY}

        first = start(str(config), "--output", str(root), *where, env=env)
        wait_until(lambda: len(complete_turns(root)) >= 2, first)
        first.send_signal(signal.SIGINT)
        output = first.communicate(timeout=300)[0]
        assert first.returncode == 130, output
        before = complete_turns(root)
        assert 2 <= len(before) < 8, (before, output)
        mark = len(models.answered)

        second = start("--resume", str(root), *where, env=env)
        output = second.communicate(timeout=600)[0]
        assert second.returncode == 0, output

        plan = json.loads((root / "plan.json").read_text())
        ids = [t["id"] for t in plan["trajectories"]]
        seeds = {t["seed"]: t["id"] for t in plan["trajectories"]}
        assert complete_turns(root) == {(tid, turn) for tid in ids for turn in (1, 2)}
        # A turn complete before the stop is never asked again.
        assert not asked_after(models, mark, seeds) & before
        # Every model request came from a node (the node's key), none from the driver's process.
        keys = {h.get("Authorization") or h.get("authorization") for h in models.headers}
        assert keys == {f"Bearer {NODE_KEY}"}, keys
        # concurrency 1 for the good model: its two trajectories never overlapped, across the stop too.
        good = [seeds[body["seed"]] for model, body in models.answered if model == GOOD_MODEL]
        assert len(good) == 4 and good == sorted(good, key=good.index), good

    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["service"]["ray"] == {"address": cluster.address, "nodes": 1}
    rows = read_turns_csv(root / "turns.csv")
    assert len(rows) == 8
    statuses = {(r.model, r.turn): r.status for r in rows}
    assert statuses[(GOOD_MODEL, 1)] == statuses[(GOOD_MODEL, 2)] == "PASSED"
    assert statuses[(BROKEN_MODEL, 2)] == "COMPILE_ERROR"
    assert "trajectories finished" in output and "[4/4]" in output, output
