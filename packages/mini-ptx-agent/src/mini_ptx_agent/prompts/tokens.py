"""Count prompt tokens offline with the tokenizer litellm falls back to: tiktoken's ``cl100k_base``.

litellm ships the ``cl100k_base`` rank file inside its package (``litellm/litellm_core_utils/tokenizers``) and
points tiktoken at that folder, so ``litellm.token_counter`` needs no network for models it has no tokenizer of
its own for. Importing litellm takes tens of seconds, though, so this module locates the same folder without
importing litellm and asks tiktoken (a litellm dependency) for the encoding: the counts equal
``litellm.token_counter(text=...)`` for such models. Token counts of other model families differ by some percent.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TOKENIZER = "cl100k_base"
"""The tiktoken encoding used."""
TOKENIZER_DESCRIPTION = "tiktoken cl100k_base, from the rank files bundled with litellm (offline)"
"""How the count was made, for people reading a listing."""


class TokenizerUnavailableError(RuntimeError):
    """litellm's bundled tokenizer files or tiktoken are not installed; the message says which."""


def _bundled_tokenizer_dir() -> Path:
    spec = importlib.util.find_spec("litellm")  # locate the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerUnavailableError(
            "litellm is not installed: no bundled tokenizer files to count tokens with"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    if not folder.is_dir():
        raise TokenizerUnavailableError(
            f"litellm is installed but has no bundled tokenizers folder ({folder})"
        )
    return folder


@contextlib.contextmanager
def _tiktoken_cache(folder: Path) -> Iterator[None]:
    """TIKTOKEN_CACHE_DIR = folder while the encoding is loaded; the caller's environment is restored after."""
    previous = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = previous


@functools.cache
def _encoding() -> Any:
    folder = _bundled_tokenizer_dir()
    try:
        import tiktoken
    except ImportError as error:
        raise TokenizerUnavailableError("tiktoken is not installed (it comes with litellm)") from error
    with _tiktoken_cache(folder):
        try:
            return tiktoken.get_encoding(TOKENIZER)
        except Exception as error:
            # A missing rank file makes tiktoken try a download: say what is missing instead.
            raise TokenizerUnavailableError(
                f"cannot load {TOKENIZER} from {folder} without network: {error}"
            ) from error


def count_tokens(text: str) -> int:
    """Number of ``cl100k_base`` tokens in ``text`` (special-token text is counted as ordinary text).

    Raises:
        TokenizerUnavailableError: the bundled tokenizer files or tiktoken are missing.
    """
    return len(_encoding().encode(text, disallowed_special=()))
