"""`ptxbench quickstart`: the main job in one command (issue 7).

``--run`` runs one 3-turn agent trajectory on the Hopper GEMM ``gemm_n7168_k5120`` (workload M = 8192, uuid
``94920358-...``, target 1.0x) into ``data/eval_runs/quickstart-<UTC>-<language>-gemm/``. Without ``SERVICE_URL``
it starts an embedded FIBServe on this machine (GPU lanes when there are GPUs, else CPU mode, where CUDA is
compiled and analysed but not executed). Without ``MODEL_NAME`` it replays the bundled demo trajectory
(:mod:`mini_ptx_agent.demo`) and says loudly that this is a demo. ``--check`` verifies each dependency and
prints one ``OK``/``FAIL`` line per dependency.

Environment: ``PTXBENCH_ROOT`` (repository root; its ``data/`` is the default data root),
``PTXBENCH_DATA_ROOT`` (data root; runs go to ``<it>/eval_runs``), ``PTXBENCH_TRACESETS_ROOT`` (where relative
``DATASET_ROOTS`` entries live), ``DATASET_ROOTS`` (colon-separated trace-set roots for the embedded service;
default: fibserve's bundled set), ``SERVICE_URL`` (a running FIBServe; ``FIBSERVE_TOKEN`` its bearer token),
``MODEL_NAME`` and ``ACCRL_MODEL_HOST`` (the model; see :func:`mini_ptx_agent.models.make_model`).

The modules: :mod:`~mini_ptx_agent.quickstart.settings` (options, environment, the task), ``check`` (``--check``),
``run`` (``--run``) and ``report`` (``quickstart-result.json``, printed for people; ``--report DIR``). Each reads
``settings``; none imports another's command, so they import in one direction only.

Importing this module is cheap; mini-swe-agent is imported when a run starts, litellm only for a hosted model.
"""

from __future__ import annotations

from pathlib import Path


def quickstart_main(
    *,
    check: bool,
    run: bool,
    report_dir: Path | None,
    resume_dir: Path | None = None,
    language: str = "cuda",
    model: str | None = None,
    model_host: str | None = None,
    service_url: str | None = None,
    output_root: Path | None = None,
    require_gpu: bool = False,
    as_json: bool = False,
) -> int:
    """`ptxbench quickstart`: exactly one of ``check``, ``run``, ``report_dir``, ``resume_dir``; prints; returns the
    exit code (130 after Ctrl-C, with the command that continues the run)."""
    import json

    from rich.markup import escape

    from ..output import console_for
    from ..runs.launch import RunInterrupted
    from .check import run_checks
    from .report import rebuild_result, render
    from .run import resume_quickstart, run_quickstart
    from .settings import QuickstartError, QuickstartRefused, QuickstartSettings

    out = console_for()
    err = console_for(stderr=True)
    if sum([check, run, report_dir is not None, resume_dir is not None]) != 1:
        err.print("[red]error:[/] give exactly one of --check, --run, --report DIR or --resume DIR")
        return 2
    try:
        if report_dir is not None:
            result = rebuild_result(report_dir)
            if as_json:
                out.print_json(result.model_dump_json())
            else:
                render(result, report_dir, out)
            return 0
        settings = QuickstartSettings.resolve(
            language=language, model=model, model_host=model_host, service_url=service_url,
            output_root=output_root, require_gpu=require_gpu,
        )  # fmt: skip
        if check:
            lines = run_checks(settings)
            if as_json:
                out.print(json.dumps([line.model_dump() for line in lines], indent=2), markup=False)
            else:
                for line in lines:
                    verdict = "[green]OK  [/]" if line.ok else "[red]FAIL[/]"
                    out.print(f"{verdict} {line.name:<10} {escape(line.detail)}")
            return 0 if all(line.ok for line in lines) else 1
        progress = err if as_json else out
        if resume_dir is not None:
            run_dir, result = resume_quickstart(resume_dir, settings, console=progress)
        else:
            run_dir, result = run_quickstart(settings, console=progress)
    except RunInterrupted as exc:
        err.print(
            f"[yellow]interrupted:[/] the complete turns are kept in {escape(str(exc.run_dir))}; continue with: "
            f"ptxbench quickstart --resume {escape(str(exc.run_dir))}"
        )
        return 130
    except QuickstartRefused as exc:
        err.print(f"[red]refused:[/] {escape(str(exc))}")
        return 2
    except (QuickstartError, FileNotFoundError) as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        return 2
    if as_json:
        out.print(result.model_dump_json(indent=2), markup=False)
    else:
        render(result, run_dir, out)
    return 0 if result.runner_completed else 2
