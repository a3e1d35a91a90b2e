#!/usr/bin/env bash
# Download, into .whl/ (git-ignored via .git/info/exclude), the wheels that the lent H200 lacks, for its
# Python 3.12 on x86_64. The GPU image already has torch, triton, numpy, httpx, pyyaml, safetensors,
# filelock and jinja2; everything else fibserve and the agent import on the GPU path travels here (typer,
# click and rich too, so the command line behaves as in CI whatever versions the image has).
# Versions follow uv.lock so the GPU run uses what CI tests.
#
#   bash scripts/device_wheels.sh --ray   # also Ray and its dependencies, for the GPU Ray-lane benchmark
#
# Ray's wheel (79 MB) is over the device tool's 64 MiB carry limit; --ray repacks it without what a Python
# driver and Python workers never load (ray/jars: the Java worker, 32 MB; ray/dashboard/client/build: the
# dashboard's web page, which `ray start --include-dashboard=false` does not serve), about 44 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
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
if [ "${1:-}" = "--ray" ]; then
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
ls -1 .whl
du -sh .whl
