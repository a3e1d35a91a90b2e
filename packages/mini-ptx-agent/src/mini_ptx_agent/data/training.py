"""``ptxbench train``: supervised fine-tuning on Tinker from an SFT dataset, and fetching its checkpoint.

Both commands need ``TINKER_API_KEY``, from the environment or a git-ignored ``.env`` in the working directory;
without it they stop before any work with a message that says so. The key is handed to the Tinker SDK in this
process only and is never written: not to the log directory, not to an error message.

``ptxbench train sft DATASET`` runs tinker-cookbook's supervised trainer (``tinker_cookbook.supervised.train``)
on the rows' messages with the loss on the final assistant message only (``TrainOnWhat.LAST_ASSISTANT_MESSAGE``,
the rows' ``loss_mask``); the cookbook writes metrics and checkpoint records into ``--log-dir`` and resumes
from its last checkpoint when run again with the same directory. ``ptxbench train export`` downloads the last
sampler checkpoint of a log directory (or a ``tinker://`` path) with ``tinker_cookbook.weights.download``.
``--base-url`` (default ``$TINKER_BASE_URL``, else Tinker's own) points both at another deployment; the tests
point it at a local stand-in that records the requests.

The Tinker packages are the optional ``training`` extra: ``uv sync --all-packages --extra training``.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..trajectory import redact_text, write_json
from .rows import SFT_FORMAT
from .sft import SFT_JSONL

KEY_VARIABLE = "TINKER_API_KEY"
CONVERSATIONS_FILE = "conversations.jsonl"


class TrainingSetupError(ValueError):
    """Training cannot start (no key, the extra not installed, an unusable dataset); nothing was sent."""


class TrainingAPIError(RuntimeError):
    """The Tinker API refused or failed a request (the message names the URL, never the key)."""


def tinker_api_key(dotenv_dir: Path | None = None) -> str:
    """``$TINKER_API_KEY``, else ``TINKER_API_KEY`` in ``<dotenv_dir or cwd>/.env``.

    Raises:
        TrainingSetupError: set in neither.
    """
    key = os.environ.get(KEY_VARIABLE)
    if not key:
        from dotenv import dotenv_values

        key = dotenv_values(Path(dotenv_dir or Path.cwd()) / ".env").get(KEY_VARIABLE)
    if not key:
        raise TrainingSetupError(
            f"{KEY_VARIABLE} is not set: export it, or put `{KEY_VARIABLE}=...` in a .env file in this directory "
            "(git-ignored); nothing was started"
        )
    return key


class SFTRunConfig(BaseModel):
    """One Tinker SFT run (the options of ``ptxbench train sft``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    dataset: Path
    """An SFT dataset directory of ``ptxbench data sft`` (or its ``sft.jsonl``)."""
    log_dir: Path
    """Where the cookbook writes metrics and checkpoint records; the same directory resumes the run."""
    base_model: str = "Qwen/Qwen3-8B"
    """The base model Tinker fine-tunes with LoRA (its tokenizer comes from the Hugging Face Hub)."""
    renderer: str | None = None
    """The cookbook's chat renderer; None: the one it recommends for ``base_model``."""
    lora_rank: int = Field(default=32, ge=1)
    learning_rate: float = Field(default=1e-4, gt=0)
    epochs: int = Field(default=1, ge=1)
    batch_size: int = Field(default=8, ge=1)
    max_length: int = Field(default=32768, ge=1)
    """Longer rows are cut to this many tokens of the base model's tokenizer."""
    base_url: str | None = None
    """The Tinker API; None: ``$TINKER_BASE_URL``, else Tinker's own."""


def _dataset_rows(dataset: Path) -> list[dict[str, Any]]:
    path = dataset if dataset.is_file() else dataset / SFT_JSONL
    try:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise TrainingSetupError(
            f"{path}: not a readable SFT dataset ({exc}); write one with `ptxbench data sft`"
        ) from None
    formats = {row.get("format") for row in rows if isinstance(row, dict)}
    if not rows or formats != {SFT_FORMAT}:
        raise TrainingSetupError(
            f"{path}: expected rows of format {SFT_FORMAT}, found {sorted(map(str, formats))}"
        )
    return rows


def _cookbook() -> Any:
    try:
        import tinker_cookbook
    except ImportError:
        raise TrainingSetupError(
            "the Tinker packages are not installed: `uv sync --all-packages --extra training` "
            "(or `pip install 'mini-ptx-agent[training]'`)"
        ) from None
    return tinker_cookbook


def _api_call(what: str, base_url: str | None, call: Any) -> Any:
    """``call()``, with the SDK's and the cookbook's API errors as :class:`TrainingAPIError`."""
    import tinker
    from tinker_cookbook.exceptions import WeightsError

    try:
        return call()
    except (tinker.TinkerError, WeightsError) as exc:
        url = base_url or os.environ.get("TINKER_BASE_URL") or "Tinker's API"
        raise TrainingAPIError(redact_text(f"{what}: {url} answered: {exc}")) from None


def start_sft(config: SFTRunConfig) -> dict[str, Any]:
    """Run (or resume) the SFT run of ``config`` to its end; returns what was run.

    Raises:
        TrainingSetupError: no key, the extra not installed, or an unusable dataset (before any request).
        TrainingAPIError: the Tinker API refused or failed a request.
    """
    key = tinker_api_key()
    rows = _dataset_rows(Path(config.dataset))
    _cookbook()
    from tinker_cookbook import model_info
    from tinker_cookbook.renderers import TrainOnWhat
    from tinker_cookbook.supervised import train
    from tinker_cookbook.supervised.data import FromConversationFileBuilder
    from tinker_cookbook.supervised.types import ChatDatasetBuilderCommonConfig

    log_dir = Path(config.log_dir).resolve()
    conversations = log_dir / CONVERSATIONS_FILE
    log_dir.mkdir(parents=True, exist_ok=True)
    conversations.write_text("".join(json.dumps({"messages": r["messages"]}) + "\n" for r in rows), "utf-8")
    renderer = config.renderer or model_info.get_recommended_renderer_name(config.base_model)
    common = ChatDatasetBuilderCommonConfig(
        model_name_for_tokenizer=config.base_model, renderer_name=renderer, max_length=config.max_length,
        batch_size=config.batch_size, train_on_what=TrainOnWhat.LAST_ASSISTANT_MESSAGE,
    )  # fmt: skip
    cookbook_config = train.Config(
        log_path=str(log_dir), model_name=config.base_model, recipe_name="ptxbench-sft", renderer_name=renderer,
        dataset_builder=FromConversationFileBuilder(common_config=common, file_path=str(conversations)),
        learning_rate=config.learning_rate, num_epochs=config.epochs, lora_rank=config.lora_rank,
        base_url=config.base_url,
    )  # fmt: skip
    os.environ[KEY_VARIABLE] = key  # the SDK reads it here; this process only
    run = {"dataset": str(config.dataset), "rows": len(rows), "log_dir": str(log_dir), "renderer": renderer,
           **config.model_dump(mode="json", exclude={"dataset", "log_dir"})}  # fmt: skip
    write_json(log_dir / "ptxbench-run.json", run)
    _api_call("Tinker SFT run", config.base_url, lambda: asyncio.run(train.main(cookbook_config)))
    return run


def export_checkpoint(source: str, output: Path, *, base_url: str | None = None) -> Path:
    """Download the checkpoint ``source`` names (a ``tinker://`` path, or a log directory of
    :func:`start_sft`, whose last sampler checkpoint is taken) into ``output``; returns the directory.

    Raises:
        TrainingSetupError: no key, the extra not installed, or a log directory without a checkpoint.
        TrainingAPIError: the Tinker API refused or failed a request.
    """
    tinker_api_key_value = tinker_api_key()
    _cookbook()
    from tinker_cookbook import checkpoint_utils, weights

    path = source
    if not source.startswith("tinker://"):
        record = checkpoint_utils.get_last_checkpoint(source, required_key="state_path")
        if record is None:
            raise TrainingSetupError(
                f"{source}: no sampler checkpoint recorded there (has the run saved one?)"
            )
        path = record.state_path
    os.environ[KEY_VARIABLE] = tinker_api_key_value
    Path(output).mkdir(parents=True, exist_ok=True)
    done = _api_call(
        f"downloading {path}", base_url,
        lambda: weights.download(tinker_path=path, output_dir=str(output), base_url=base_url),
    )  # fmt: skip
    return Path(done)
