"""Public FlashInfer Trace datasets from the Hugging Face Hub: ``fibserve datasets pull REPO``.

:func:`pull` downloads a dataset repository (``huggingface_hub.snapshot_download``, so the Hub's cache,
``HF_HOME``, ``HF_TOKEN`` and ``HF_HUB_OFFLINE`` work as they do for every Hub client) and copies it to a trace-set
folder, ``$PTXBENCH_TRACESETS_ROOT/<name>`` by default (``data/tracesets/<name>`` without it), where ``name``
is the repository's name. It validates what arrived: a set in the current format is copied as it is; a set in
the 2025 format (definitions with ``type``, workloads under ``traces/workloads/``: the public snapshot's) is
migrated (:mod:`fibserve.trace.legacy`) and written in the current format, so every command reads it without
``--legacy``; safetensors blobs and other files are copied unchanged. Problems that remain are reported with
their files and the copy is kept, so nothing downloaded is lost. The result names the ``DATASET_ROOTS`` value
that selects the set.
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from fibserve.trace.legacy import LegacyMigrationWarning
from fibserve.trace.trace_set import TraceSet
from fibserve.trace.validate import TRACE_SET_FOLDERS, validate_roots

TRACESETS_ENV = "PTXBENCH_TRACESETS_ROOT"
"""Folder of trace sets; a pulled set goes to ``<it>/<repository name>``."""
DEFAULT_TRACESETS = Path("data") / "tracesets"
"""Where pulled sets go without ``$PTXBENCH_TRACESETS_ROOT`` or ``--into`` (relative to the working folder)."""


class PullError(RuntimeError):
    """The dataset could not be downloaded or placed (the message says what to change)."""


class PullResult(BaseModel):
    """What ``fibserve datasets pull`` did (``--json`` prints it)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    repo: str
    """The Hub dataset repository, ``owner/name``."""
    revision: str
    """The commit of the snapshot that was copied."""
    path: str
    """The trace-set folder written (absolute)."""
    format: Literal["current", "legacy"]
    """The format found: ``legacy`` was migrated to the current format while copying."""
    counts: dict[str, int]
    """definitions, solutions, workloads, traces, errors and warnings of the written set."""
    problems: list[str]
    """Every error or warning left, with its file."""
    migrations: list[str]
    """One line per kind of legacy change applied."""

    @property
    def ok(self) -> bool:
        """Whether the written set loads without errors."""
        return self.counts.get("errors", 0) == 0

    @property
    def dataset_roots(self) -> str:
        """The ``DATASET_ROOTS`` value that selects the pulled set."""
        return self.path


def destination(repo: str, into: str | os.PathLike[str] | None) -> Path:
    """Where ``repo`` goes: ``into``, else ``$PTXBENCH_TRACESETS_ROOT/<name>``, else ``data/tracesets/<name>``."""
    if into is not None:
        return Path(into).expanduser().resolve()
    base = os.environ.get(TRACESETS_ENV, "").strip()
    return (Path(base).expanduser() if base else DEFAULT_TRACESETS).resolve() / repo.rstrip("/").split("/")[
        -1
    ]


def download(repo: str, revision: str | None) -> Path:
    """The local snapshot folder of the dataset ``repo`` at ``revision`` (the Hub's cache).

    Raises:
        PullError: unknown repository or revision, no network (or ``HF_HUB_OFFLINE``) without a cached copy,
            or another Hub error; the message names the repository.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = f"{repo}" + (f" at revision {revision}" if revision else "")
    try:
        return Path(snapshot_download(repo_id=repo, repo_type="dataset", revision=revision))
    except GatedRepoError:
        raise PullError(f"{where} is gated: accept its terms on the Hub and set HF_TOKEN") from None
    except RepositoryNotFoundError:
        raise PullError(
            f"no dataset {repo!r} on the Hugging Face Hub (or it is private: set HF_TOKEN)"
        ) from None
    except RevisionNotFoundError:
        raise PullError(f"{repo} has no revision {revision!r}") from None
    except LocalEntryNotFoundError:
        raise PullError(
            f"{where} is not in the Hugging Face cache ({_cache_home()}) and the Hub cannot be reached (or "
            "HF_HUB_OFFLINE is set): connect, or pull it on a machine that can and copy the folder"
        ) from None
    except HfHubHTTPError as exc:
        raise PullError(f"the Hub refused {where}: {exc}") from None


def _cache_home() -> str:
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def pull(
    repo: str, *, revision: str | None = None, into: str | os.PathLike[str] | None = None, force: bool = False
) -> PullResult:
    """Download the FlashInfer Trace dataset ``repo`` and place it as a trace set (module docstring).

    Args:
        repo: ``owner/name`` of a Hub dataset, e.g. ``flashinfer-ai/flashinfer-trace``.
        revision: a branch, tag or commit (default: the main branch).
        into: the folder to write (default: see :func:`destination`).
        force: replace an existing non-empty folder.

    Raises:
        PullError: a bad repository name, a failed download, an existing folder without ``force``, or a
            snapshot that holds no trace set.
    """
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise PullError(f"give the dataset as owner/name (e.g. flashinfer-ai/flashinfer-trace), not {repo!r}")
    target = destination(repo, into)
    if target.exists() and any(target.iterdir()) and not force:
        raise PullError(
            f"{target} exists and is not empty: pass --force to replace it, or --into another folder"
        )
    snapshot = download(repo, revision)
    if not any((snapshot / folder).is_dir() for folder in TRACE_SET_FOLDERS):
        raise PullError(f"{repo} holds no trace set (no {', '.join(TRACE_SET_FOLDERS)} folder at its top)")
    legacy = validate_roots([snapshot]).suggestion is not None  # it looks like the 2025 format
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(snapshot, staging, ignore=shutil.ignore_patterns(".cache"))
    migrations: list[str] = []
    if legacy:
        migrations = _rewrite_migrated(snapshot, staging)
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
    report = validate_roots([target])
    return PullResult(
        repo=repo,
        revision=snapshot.name,
        path=str(target),
        format="legacy" if legacy else "current",
        counts=report.counts,
        problems=[f"{p.severity} {p.location}: {p.message}" for p in report.problems],
        migrations=migrations,
    )


def _rewrite_migrated(snapshot: Path, out: Path) -> list[str]:
    """Replace the 2025-format JSON under ``out`` by the current format of what ``snapshot`` holds; returns the
    migration lines (one per kind of change)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LegacyMigrationWarning)
        trace_set = TraceSet.load(snapshot, migrate_legacy=True, strict=False)
    for folder in TRACE_SET_FOLDERS:
        shutil.rmtree(out / folder, ignore_errors=True)
    write_trace_set(trace_set, out)
    return [str(w.message) for w in caught if issubclass(w.category, LegacyMigrationWarning)]


def write_trace_set(trace_set: TraceSet, out: Path) -> None:
    """Write the definitions, solutions, workload traces and traces of ``trace_set`` under ``out`` in the
    current format: ``definitions/<op_type>/<name>.json``, ``solutions/<op_type>/<definition>/<name>.json``,
    ``workloads/<op_type>/<definition>.jsonl`` and ``traces/<op_type>/<definition>.jsonl``."""

    def op_type(definition: str) -> str:
        found = trace_set.definitions.get(definition)
        return found.op_type if found is not None else "unknown"

    def write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    for name, definition in trace_set.definitions.items():
        write(out / "definitions" / definition.op_type / f"{name}.json", definition.model_dump_json(indent=2))
    for name, solution in trace_set.solutions.items():
        folder = out / "solutions" / op_type(solution.definition) / solution.definition
        write(folder / f"{name}.json", solution.model_dump_json(indent=2))
    lines: dict[Path, list[str]] = defaultdict(list)
    for uuid in trace_set.workload_traces:
        trace = trace_set.workload_traces[uuid]
        lines[Path("workloads") / op_type(trace.definition) / f"{trace.definition}.jsonl"].append(
            trace.model_dump_json()
        )
    for trace in trace_set.traces:
        lines[Path("traces") / op_type(trace.definition) / f"{trace.definition}.jsonl"].append(
            trace.model_dump_json()
        )
    for path, content in lines.items():
        write(out / path, "\n".join(content) + "\n")
