"""Solution: a candidate implementation (sources plus build spec) of one definition.

JSON-compatible with FlashInfer Trace solutions (``solutions/**/*.json``).
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ._base import NonEmptyStr, TraceModel, check_relative_path


class Language(StrEnum):
    """Source language of a solution; decides which builder handles it."""

    PYTHON = "python"
    TRITON = "triton"
    CUDA = "cuda"
    CPP = "cpp"


Binding = Literal["tvm-ffi", "torch"]
"""How a compiled (cuda/cpp) entry point is exposed to Python."""


class SourceFile(TraceModel):
    """One source file of a solution."""

    path: NonEmptyStr
    """Relative POSIX path inside the solution (no absolute paths, no ``..``)."""
    content: str
    """Full text of the file (valid Unicode: it is written as UTF-8, the bytes every tool then reads)."""

    @field_validator("path")
    @classmethod
    def _safe_path(cls, value: str) -> str:
        return check_relative_path(value)

    @field_validator("path", "content")
    @classmethod
    def _utf8_text(cls, value: str) -> str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            line = value.count("\n", 0, exc.start) + 1
            raise ValueError(
                f"not valid Unicode text at line {line} (a lone surrogate); send UTF-8 text"
            ) from None
        return value


class BuildSpec(TraceModel):
    """How to build and call a solution."""

    language: Language
    """Source language: python, triton, cuda or cpp."""
    target_hardware: list[NonEmptyStr] = Field(min_length=1)
    """Hardware the solution is written for, e.g. ``["NVIDIA_H100"]`` or ``["sm_90a"]``."""
    entry_point: NonEmptyStr
    """``"<relative file>::<symbol>"``, e.g. ``"kernel.cu::run"``."""
    dependencies: list[NonEmptyStr] = Field(default_factory=list)
    """Libraries the solution needs, e.g. ``["triton >= 3.3"]``."""
    destination_passing_style: bool = True
    """True: outputs are preallocated and passed after the inputs; False: ``run`` returns the outputs."""
    binding: Binding | None = None
    """Binding of a compiled entry point (``tvm-ffi`` for public CUDA solutions), or null."""

    @field_validator("entry_point")
    @classmethod
    def _entry_point_form(cls, value: str) -> str:
        file, sep, symbol = value.partition("::")
        if not sep or not file or not symbol or "::" in symbol:
            raise ValueError(
                f"entry_point {value!r} must look like '<relative file>::<symbol>', e.g. 'kernel.cu::run'"
            )
        check_relative_path(file)
        if not symbol.isidentifier():
            raise ValueError(f"entry_point symbol {symbol!r} is not a valid identifier")
        return value

    @model_validator(mode="after")
    def _entry_matches_language(self) -> BuildSpec:
        if self.language in (Language.PYTHON, Language.TRITON) and not self.entry_file.endswith(".py"):
            raise ValueError(f"{self.language.value} entry file must be a .py file, got {self.entry_file!r}")
        return self

    @property
    def entry_file(self) -> str:
        """The file part of ``entry_point``."""
        return self.entry_point.partition("::")[0]

    @property
    def entry_symbol(self) -> str:
        """The symbol part of ``entry_point``."""
        return self.entry_point.partition("::")[2]


class Solution(TraceModel):
    """A named implementation of a definition: build spec plus source files.

    Validation: at least one source; source paths are safe (see ``SourceFile``) and unique; no path is also
    a folder of another (``a.py`` beside ``a.py/b.py``); the entry file is one of the sources.
    """

    name: NonEmptyStr
    """Unique name of the solution."""
    definition: NonEmptyStr
    """Name of the definition this solution implements."""
    author: NonEmptyStr
    """Who (or which model) wrote it."""
    description: str | None = None
    """Free-form notes."""
    spec: BuildSpec
    """How to build and call it."""
    sources: list[SourceFile] = Field(min_length=1)
    """The source files."""

    _omit_if_none: ClassVar[frozenset[str]] = frozenset({"description"})

    @model_validator(mode="after")
    def _check_sources(self) -> Solution:
        seen: set[str] = set()
        for source in self.sources:
            if source.path in seen:
                raise ValueError(f"duplicate source path {source.path!r}; each file must appear once")
            seen.add(source.path)
        for source in self.sources:
            parts = source.path.split("/")
            folder = next((f for f in ("/".join(parts[:i]) for i in range(1, len(parts))) if f in seen), None)
            if folder is not None:
                raise ValueError(
                    f"source path {folder!r} is a file, but {source.path!r} uses it as a folder; rename one"
                )
        if self.spec.entry_file not in seen:
            raise ValueError(f"entry file {self.spec.entry_file!r} is not among the sources {sorted(seen)}")
        return self

    def entry_source(self) -> SourceFile:
        """The source file that holds the entry point."""
        return next(s for s in self.sources if s.path == self.spec.entry_file)

    def hash(self) -> str:
        """Stable content hash: SHA-256 (hex) over definition, build spec and sources (sorted by path).

        Name, author and description are excluded, so the same code under two names shares build caches.
        The hash depends only on the JSON values, not on Python or pydantic versions.
        """
        payload = {
            "definition": self.definition,
            "spec": self.spec.model_dump(mode="json"),
            "sources": sorted(([s.path, s.content] for s in self.sources), key=lambda pair: pair[0]),
        }
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
