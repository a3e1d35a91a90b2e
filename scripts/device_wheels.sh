#!/usr/bin/env bash
# Download, into .whl/ (git-ignored via .git/info/exclude), the wheels that the lent H200 lacks, for its
# Python 3.12 on x86_64. The GPU image already has torch, triton, numpy, httpx, pyyaml, safetensors,
# filelock and jinja2; everything else fibserve and the agent import on the GPU path travels here (typer,
# click and rich too, so the command line behaves as in CI whatever versions the image has).
# Versions follow uv.lock so the GPU run uses what CI tests.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
versions=$(python3 - <<'PY'
import tomllib
lock = tomllib.load(open("uv.lock", "rb"))
want = ["pydantic", "pydantic-core", "annotated-types", "typing-inspection", "typing-extensions",
        "fastapi", "starlette", "annotated-doc", "uvicorn", "h11", "apache-tvm-ffi", "anyio", "click",
        "mini-swe-agent", "python-dotenv", "platformdirs", "typer", "rich", "shellingham", "opentelemetry-api",
        "bm25s"]
have = {p["name"]: p["version"] for p in lock["package"]}
print(" ".join(f"{n}=={have[n]}" for n in want if n in have))
PY
)
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl $versions
# The GPU image lacks bubblewrap; the GPU run unpacks this .deb (dpkg -x) to sandbox candidate workers.
if command -v apt-get >/dev/null 2>&1 && ! ls .whl/bubblewrap_*.deb >/dev/null 2>&1; then
    (cd .whl && apt-get download -qq bubblewrap 2>/dev/null) || echo "note: could not download bubblewrap"
fi
ls -1 .whl
du -sh .whl
