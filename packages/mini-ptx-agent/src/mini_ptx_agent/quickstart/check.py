"""`ptxbench quickstart --check`: one ``OK``/``FAIL`` line per live dependency of the quickstart.

Lines: ``model`` (the demo replay, or the configured model asked once, in one bounded request of at most
:data:`CHECK_TIMEOUT_S`: an endpoint's ``/v1/models`` must list it, a hosted model must answer one token, so a
refused key is a FAIL with the provider's answer, and an endpoint that refuses connections fails in seconds,
not after a run's retries), ``service`` (FIBServe ``/health``; an embedded one is started and stopped),
``definition`` (``gemm_n7168_k5120`` with the M = 8192 workload), ``nvcc`` (needed on this machine only when an
embedded service builds CUDA), ``gpu`` (the service's lanes).

No GPU lane is **OK** for CUDA, stated as CPU mode (kernels compiled and analysed, not executed): a newcomer
without a GPU can still run the quickstart end to end. It is a **FAIL** for Triton (the bf16 GEMM cannot be
evaluated by the Triton CPU interpreter, so ``--run`` would refuse) and with ``--require-gpu``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

from pydantic import BaseModel

from .settings import QUICKSTART_DEFINITION, QUICKSTART_WORKLOAD, QuickstartSettings

CHECK_TIMEOUT_S = 10.0
"""The one request that checks a model (an endpoint's model list, a hosted model's one token) gets this long (s),
and is not retried: a check reports what the API says now."""


class CheckLine(BaseModel):
    """One dependency's verdict; ``--check`` prints ``OK``/``FAIL`` and the detail."""

    name: str
    ok: bool
    detail: str


def _nvcc_version() -> str | None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return f"{nvcc} (version unknown)"
    release = next((line.strip() for line in out.splitlines() if "release" in line), "version unknown")
    return f"{nvcc}: {release}"


def _gpu_names() -> list[str]:
    """GPU names from nvidia-smi (empty when it is absent or fails); informational only."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


def check_model(settings: QuickstartSettings) -> CheckLine:
    """The model: the demo replay, or a model built the way a run builds it (endpoint served id, key variable)."""
    if not settings.model:
        if settings.model_host:
            return CheckLine(
                name="model",
                ok=False,
                detail=f"ACCRL_MODEL_HOST={settings.model_host} is set but MODEL_NAME is not; set MODEL_NAME "
                "to the served model id",
            )
        from ..demo import kernel_sources

        try:
            kernel_sources(settings.language)
        except (OSError, ValueError) as exc:
            return CheckLine(name="model", ok=False, detail=f"demo model: {exc}")
        return CheckLine(
            name="model",
            ok=True,
            detail="demo model: replay of the bundled demo trajectory (not a model; set MODEL_NAME for a real one)",
        )
    from ..models import ModelError, RetryPolicy, make_model

    once = RetryPolicy(max_attempts=1, initial_backoff_s=0.0, request_timeout_s=CHECK_TIMEOUT_S)
    try:
        model = make_model(
            settings.model, model_host=settings.model_host, definition=QUICKSTART_DEFINITION,
            language=settings.language, retry=once,
        )  # fmt: skip
    except ModelError as exc:
        return CheckLine(name="model", ok=False, detail=f"{settings.model}: {exc}")
    if settings.model_host:
        detail = f"{settings.model} served at {settings.model_host} (GET /v1/models lists it)"
    elif settings.model.startswith("replay:"):
        detail = f"{settings.model}: {getattr(model.config, 'n_messages', '?')} recorded replies"
    else:
        return check_hosted_model(model)
    return CheckLine(name="model", ok=True, detail=detail)


def check_hosted_model(model: Any) -> CheckLine:
    """A litellm model: one request for one token (:meth:`~mini_ptx_agent.models.litellm.LitellmHostedModel.probe`,
    at most :data:`CHECK_TIMEOUT_S`) says whether the provider serves it and accepts the key; the line quotes
    the provider's answer (401: the key was refused). A key variable that is merely set proves nothing.

    ``model`` is a :class:`~mini_ptx_agent.models.litellm.LitellmHostedModel` (its provider is known: the
    factory refuses a name litellm cannot route).
    """
    from ..models import ModelRequestError, ModelUnavailableError
    from ..models.litellm import close_model_names, import_litellm, litellm_version

    name = model.config.model_name
    via = f"{name} via litellm (provider {model.provider})"
    try:
        model.probe()
    except ModelRequestError as exc:
        if exc.status_code in (401, 403):
            return CheckLine(
                name="model", ok=False,
                detail=f"{via}: the provider refused the API key (HTTP {exc.status_code}): {exc}; set its key "
                "variable to a valid key",
            )  # fmt: skip
        if model.listed:
            return CheckLine(name="model", ok=False, detail=f"{via}: {exc}")
        close = close_model_names(import_litellm(), name)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        return CheckLine(
            name="model", ok=False,
            detail=f"{name} is not in litellm {litellm_version()}'s model list and provider {model.provider} "
            f"refused a 1-token request: {exc}{hint}; set MODEL_NAME to a name the provider serves",
        )  # fmt: skip
    except ModelUnavailableError as exc:
        return CheckLine(
            name="model",
            ok=False,
            detail=f"{via}: unavailable (one request of at most {CHECK_TIMEOUT_S:g} s): {exc}",
        )
    cost = "" if model.listed else "; not in litellm's model list, so its cost is unknown"
    return CheckLine(name="model", ok=True, detail=f"{via} answered a 1-token request (key accepted){cost}")


def check_toolchain(settings: QuickstartSettings, service_tools: dict[str, Any] | None = None) -> CheckLine:
    """nvcc where it is needed: an embedded service building CUDA needs it on this machine."""
    version = _nvcc_version()
    if settings.service_url:
        remote = (service_tools or {}).get("nvcc")
        where = f"remote FIBServe builds (its nvcc: {remote or 'not reported'})"
        return CheckLine(name="nvcc", ok=True, detail=f"{version or 'not on PATH here'}; {where}")
    if version is None:
        if settings.language == "triton":
            return CheckLine(name="nvcc", ok=True, detail="not on PATH; not needed for Triton")
        return CheckLine(
            name="nvcc",
            ok=False,
            detail="not on PATH: the embedded FIBServe needs nvcc (CUDA 12.8+ for sm_90a) to build CUDA kernels; "
            "install the CUDA toolkit or set SERVICE_URL to a FIBServe that has it",
        )
    return CheckLine(name="nvcc", ok=True, detail=version)


def _service_lines(
    settings: QuickstartSettings, url: str, embedded: bool, token: str | None, lanes_timeout_s: float
) -> list[CheckLine]:
    """``service``, ``definition``, ``nvcc`` and ``gpu`` lines; waits up to ``lanes_timeout_s`` (s) for lanes."""
    from fibserve.client import APIError, FIBServeClient, FIBServeError

    from ..environment.embedded import unhealthy_lanes, wait_lanes_ready

    where = "embedded FIBServe" if embedded else f"FIBServe at {url}"
    lines: list[CheckLine] = []
    # A lane is unhealthy ("starting") until its evaluator is built: judge /health only once the lanes had time.
    wait_lanes_ready(url, lanes_timeout_s, token=token)
    with FIBServeClient(url, token=token, timeout=30.0) as client:
        try:
            health = client.health()
        except FIBServeError as exc:
            return [CheckLine(name="service", ok=False, detail=f"{where}: {exc}")]
        lanes = [w.device for w in health.workers]
        detail = f"{where}: /health {health.status}, fibserve {health.version}, lanes {', '.join(lanes)}"
        if health.status != "ok":
            waited = f" after waiting {lanes_timeout_s:g} s" if lanes_timeout_s > 0 else ""
            why = "; ".join(unhealthy_lanes(health.model_dump(mode="json")))
            detail += f"; unhealthy{waited}: {why}"
        if health.sandbox is not None and health.sandbox.mode != "bwrap":
            detail += f"; {health.sandbox.detail}"  # candidates refused (no bubblewrap) or run unconfined
        lines.append(CheckLine(name="service", ok=health.status == "ok", detail=detail))
        try:
            client.definition(QUICKSTART_DEFINITION)
            uuids = {w.uuid for w in client.workloads(QUICKSTART_DEFINITION)}
            ok = QUICKSTART_WORKLOAD in uuids
            detail = (
                f"{QUICKSTART_DEFINITION} with workload {QUICKSTART_WORKLOAD} (M=8192)"
                if ok
                else f"{QUICKSTART_DEFINITION} is served but lacks workload {QUICKSTART_WORKLOAD}"
            )
        except APIError as exc:
            ok, detail = False, f"{QUICKSTART_DEFINITION}: {exc.message}"
        except FIBServeError as exc:
            ok, detail = False, f"{QUICKSTART_DEFINITION}: {exc}"
        if not ok and settings.dataset_roots:
            detail += "; DATASET_ROOTS replaces the bundled set: add fibserve's bundled root to it"
        lines.append(CheckLine(name="definition", ok=ok, detail=detail))
    lines.append(check_toolchain(settings, health.tools))
    lines.append(gpu_line(settings, lanes, embedded))
    return lines


def gpu_line(settings: QuickstartSettings, lanes: list[str], embedded: bool) -> CheckLine:
    """GPU lanes of the service. No GPU is OK for CUDA (CPU mode, stated), a FAIL for Triton or ``require_gpu``."""
    gpus = [lane for lane in lanes if lane.startswith("cuda")]
    if gpus:
        names = _gpu_names() if embedded else []
        return CheckLine(
            name="gpu", ok=True, detail=f"{', '.join(gpus)}{' (' + ', '.join(names) + ')' if names else ''}"
        )
    if settings.language == "triton":
        return CheckLine(
            name="gpu",
            ok=False,
            detail="no GPU lane: the Triton quickstart needs a GPU (the GEMM is bfloat16 and the Triton CPU "
            "interpreter computes bfloat16 tl.dot wrongly); use --language cuda for CPU mode or set SERVICE_URL",
        )
    detail = (
        "no GPU lane: CPU mode, CUDA kernels are compiled and analysed but not executed (no correctness, no "
        "speedup)"
    )
    return CheckLine(
        name="gpu",
        ok=not settings.require_gpu,
        detail=detail + ("; --require-gpu" if settings.require_gpu else ""),
    )


def run_checks(settings: QuickstartSettings) -> list[CheckLine]:
    """Verify every live dependency; starts (and stops) an embedded FIBServe when no service URL is set.

    Lines: ``model``, ``service``, ``definition``, ``nvcc``, ``gpu`` (``service`` alone when it is down).
    ``/health`` is judged only after every lane is healthy or :data:`~mini_ptx_agent.environment.embedded.LANES_READY_TIMEOUT_S`
    has passed; a ``service`` FAIL then names each unhealthy lane and its reason.
    """
    from ..environment import embedded as _service

    lines = [check_model(settings)]
    try:
        with _service.service_url(settings.service_url, roots=settings.dataset_roots) as (url, embedded):
            token = None if embedded else (os.environ.get("FIBSERVE_TOKEN") or None)
            # An embedded service's start() has already waited for its lanes; a remote one gets the wait here.
            wait_s = 0.0 if embedded else _service.LANES_READY_TIMEOUT_S
            lines += _service_lines(settings, url, embedded, token, wait_s)
    except _service.ServiceStartError as exc:
        lines.append(CheckLine(name="service", ok=False, detail=f"embedded FIBServe did not start: {exc}"))
        lines.append(check_toolchain(settings))
    return lines
