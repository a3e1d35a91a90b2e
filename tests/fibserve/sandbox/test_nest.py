"""A worker's nested sandbox (``fibserve.sandbox.nest``) inside the product's bubblewrap sandbox, as the zygote
makes it: a fresh ``/tmp`` with nothing of the zygote's files, and what the sandbox mounted below ``/tmp`` (a
Python path that lives there, as on the lent H200, where the carried wheels are unpacked in ``/tmp/site``)
still importable. The first GPU run of the zygote lost that mount: every CUDA candidate failed with
``No module named 'tvm_ffi'``."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from fibserve.sandbox import WORKER_LIMITS, Mounts, run, status

pytestmark = pytest.mark.skipif(status().mode != "bwrap", reason="needs the bubblewrap sandbox")

NESTED = textwrap.dedent(
    """
    import json, os
    from fibserve.sandbox import nest

    open("/tmp/left-by-the-zygote", "w").write("x")
    nest.enter_namespaces(pid=False)
    nest.private_mounts(1 << 20, private_shm=True)
    found = {"zygote file": os.path.exists("/tmp/left-by-the-zygote")}
    try:
        import nest_probe_module
        found["module"] = nest_probe_module.VALUE
    except ImportError as exc:
        found["module"] = repr(exc)
    with open("/tmp/worker-file", "w") as handle:
        found["tmp writable"] = handle.write("y") == 1
    print("FOUND " + json.dumps(found))
    """
)


def test_the_fresh_tmp_keeps_what_was_mounted_below_it(tmp_path: Path, monkeypatch) -> None:
    assert str(tmp_path).startswith("/tmp/")
    (tmp_path / "nest_probe_module.py").write_text("VALUE = 'imported'\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    done = run(
        [sys.executable, "-c", NESTED], mounts=Mounts(python=True), limits=WORKER_LIMITS, timeout_s=120
    )
    line = next((x for x in done.output.splitlines() if x.startswith("FOUND ")), None)
    assert line is not None, done.output
    found = json.loads(line.removeprefix("FOUND "))
    assert found == {"zygote file": False, "module": "imported", "tmp writable": True}, done.output
