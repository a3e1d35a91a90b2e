#!/usr/bin/env bash
# Download, into .whl/ (git-ignored via .git/info/exclude), the wheels that the lent H200 lacks, for its
# Python 3.12 on x86_64. The GPU image already has torch, triton, numpy, httpx, pyyaml, safetensors,
# filelock and jinja2; everything else fibserve and the agent import on the GPU path travels here (typer,
# click and rich too, so the command line behaves as in CI whatever versions the image has).
# Versions follow uv.lock so the GPU run uses what CI tests.
#
#   bash scripts/device_wheels.sh --ray   # also Ray and its dependencies, for the GPU Ray-lane benchmark
#   bash scripts/device_wheels.sh --peer  # also FlashInfer-Bench, into .whl/peer/, for the `peer` GPU step
#
# Ray's wheel (79 MB) is over the device tool's 64 MiB carry limit; --ray repacks it without what a Python
# driver and Python workers never load (ray/jars: the Java worker, 32 MB; ray/dashboard/client/build: the
# dashboard's web page, which `ray start --include-dashboard=false` does not serve), about 44 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
ray=0 peer=0
for arg in "$@"; do
    case $arg in
        --ray) ray=1 ;;
        --peer) peer=1 ;;
        *) echo "usage: bash scripts/device_wheels.sh [--ray] [--peer]" >&2; exit 2 ;;
    esac
done
mkdir -p .whl
versions=$(python3 - <<'PY'
import tomllib
lock = tomllib.load(open("uv.lock", "rb"))
want = ["pydantic", "pydantic-core", "annotated-types", "typing-inspection", "typing-extensions",
        "fastapi", "starlette", "annotated-doc", "uvicorn", "h11", "apache-tvm-ffi", "anyio", "click",
        "mini-swe-agent", "python-dotenv", "platformdirs", "typer", "rich", "shellingham", "opentelemetry-api",
        "bm25s", "tomli-w"]
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
if [ $ray = 1 ]; then
    ray_versions=$(python3 - <<'PY'
import tomllib
lock = tomllib.load(open("uv.lock", "rb"))
want = ["ray", "msgpack", "protobuf", "jsonschema", "jsonschema-specifications", "referencing", "rpds-py",
        "attrs", "requests", "urllib3", "idna", "certifi", "charset-normalizer"]
have = {p["name"]: p["version"] for p in lock["package"]}
print(" ".join(f"{n}=={have[n]}" for n in want if n in have))
PY
)
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl $ray_versions
    python3 - <<'PY'
import glob, os, zipfile
DROP = ("ray/jars/", "ray/dashboard/client/build/")
for path in glob.glob(".whl/ray-*.whl"):
    slim = path + ".slim"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(slim, "w", zipfile.ZIP_DEFLATED) as dst:
        record_name = next(n for n in src.namelist() if n.endswith(".dist-info/RECORD"))
        kept = [i for i in src.infolist() if not i.filename.startswith(DROP)]
        if len(kept) == len(src.infolist()):
            continue  # already slim
        names = {i.filename for i in kept}
        for info in kept:
            if info.filename != record_name:
                dst.writestr(info, src.read(info))
        record = [line for line in src.read(record_name).decode().splitlines() if line.split(",")[0] in names]
        dst.writestr(record_name, "\n".join(record) + "\n")
    os.replace(slim, path)
    print(f"slimmed {path}: {os.path.getsize(path) / 1e6:.1f} MB")
PY
fi
# --peer: FlashInfer-Bench 0.1.2 for benchmarks/peer_flashinfer_bench.py only, never a PTXBench dependency. It
# goes to .whl/peer/ (gpu_validate.sh installs only .whl/*.whl into its site; its `peer` step installs these into
# a folder of their own). Its METADATA requires torch, pydantic, safetensors, apache-tvm-ffi (the image or .whl/
# has them), flashinfer-python (FlashInfer's kernels, imported only by its FlashInfer integration, never by its
# benchmark: left out) and docstring-parser (fetched). ninja, which its tvm-ffi build of CUDA solutions runs, is
# fetched too in case the image lacks it (the step puts it last on PATH).
if [ $peer = 1 ]; then
    mkdir -p .whl/peer
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl/peer \
        flashinfer-bench==0.1.2 docstring-parser==0.18.0 ninja==1.13.0
    python3 - <<'PY'
import glob, re, zipfile
known = {"torch", "pydantic", "safetensors", "apache-tvm-ffi", "flashinfer-python", "docstring-parser"}
with zipfile.ZipFile(glob.glob(".whl/peer/flashinfer_bench-*.whl")[0]) as wheel:
    metadata = wheel.read(next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))).decode()
needs = {re.split(r"[ <>=!;\[]", line.split(":", 1)[1].strip())[0].lower()
         for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line}
if needs - known:
    print(f"note: flashinfer-bench also requires {sorted(needs - known)}: fetch them into .whl/peer/")
PY
fi
ls -1 .whl
du -sh .whl
