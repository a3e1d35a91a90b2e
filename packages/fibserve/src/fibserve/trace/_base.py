"""Shared pydantic base for the FlashInfer Trace models.

Every model forbids unknown fields (a typo in a trace file is an error, not silently dropped data) and is
frozen-free so builders can construct them incrementally. Optional fields named in ``_omit_if_none`` are left
out of the JSON when they are ``None``, so files we write look like the public FlashInfer Trace files.
"""

from __future__ import annotations

import ast
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, SerializationInfo, model_serializer

from .python_ast import parse_python

NonEmptyStr = Annotated[str, Field(min_length=1)]
"""A string that must contain at least one character."""


class TraceModel(BaseModel):
    """Base class of all FlashInfer Trace models: strict about unknown fields, docstrings as descriptions."""

    model_config = ConfigDict(
        extra="forbid",
        use_attribute_docstrings=True,
        validate_assignment=False,
        ser_json_inf_nan="strings",
    )

    _omit_if_none: ClassVar[frozenset[str]] = frozenset()

    # No return annotation on purpose: with one, pydantic would publish it (a bare dict) as the serialization
    # JSON Schema of every model, hiding the fields from OpenAPI documents.
    @model_serializer(mode="wrap")
    def _drop_absent_optionals(self, handler: Any, info: SerializationInfo):
        data = handler(self)
        if self._omit_if_none and isinstance(data, dict):
            for key in self._omit_if_none:
                if key in data and data[key] is None:
                    del data[key]
        return data


def defines_top_level_function(source: str, name: str) -> bool:
    """Whether Python ``source`` defines a module-level function ``name`` (``def`` or ``async def``).

    Raises:
        SyntaxError: ``source`` is not valid Python.
    """
    tree = parse_python(source)
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name for node in tree.body
    )


MAX_PATH_BYTES = 1024
"""Longest source path (UTF-8 bytes); the build directory's own prefix must still fit in ``PATH_MAX`` (4096)."""

MAX_NAME_BYTES = 255
"""Longest component of a source path (UTF-8 bytes): Linux ``NAME_MAX``."""


def check_relative_path(path: str) -> str:
    """Validate that ``path`` is a safe relative POSIX path inside a solution directory.

    Rejects empty paths, absolute paths (``/x``, ``C:\\x``), backslashes, ``..`` components and ``.``/empty
    components (``a//b``, ``./a``), so a source file can never be written outside its build directory and
    two spellings of one file cannot both appear; and paths no file system can hold (longer than
    ``MAX_PATH_BYTES``, or a component longer than ``MAX_NAME_BYTES``).

    Returns:
        ``path`` unchanged.

    Raises:
        ValueError: with the reason the path is unsafe.
    """
    if not path:
        raise ValueError("source path is empty")
    if "\\" in path:
        raise ValueError(f"source path {path!r} contains a backslash; use '/' separators")
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        raise ValueError(f"source path {path!r} is absolute; use a path relative to the solution")
    parts = path.split("/")
    if ".." in parts:
        raise ValueError(f"source path {path!r} contains '..'; paths must stay inside the solution")
    if any(part in ("", ".") for part in parts):
        raise ValueError(f"source path {path!r} has an empty or '.' component; write it in normal form")
    if "\x00" in path:
        raise ValueError("source path contains a NUL byte")
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"source path {path.encode('utf-8', 'backslashreplace').decode()!r} holds a lone surrogate, which "
            "no file name can hold; use valid Unicode"
        ) from None
    if len(encoded) > MAX_PATH_BYTES:
        raise ValueError(f"source path {path[:60]!r}... is longer than {MAX_PATH_BYTES} bytes; shorten it")
    if long := next((p for p in parts if len(p.encode("utf-8")) > MAX_NAME_BYTES), None):
        raise ValueError(
            f"source path component {long[:60]!r}... is longer than {MAX_NAME_BYTES} bytes (the file system's "
            "limit); shorten it"
        )
    return path
