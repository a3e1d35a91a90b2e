"""Problems found while loading a trace set: each names its file (and line for JSONL)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from pydantic import ValidationError

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class LoadProblem:
    """One problem in one file. Errors make a trace set invalid; warnings (e.g. a trace whose solution is
    stored elsewhere) do not."""

    path: str
    """The file (or root folder) the problem is in."""
    message: str
    """What is wrong and, where possible, what to fix."""
    line: int | None = None
    """1-based line number for JSONL files."""
    severity: Severity = "error"
    """``error`` or ``warning``."""

    @property
    def location(self) -> str:
        """``path`` or ``path:line``."""
        return f"{self.path}:{self.line}" if self.line is not None else self.path

    def __str__(self) -> str:
        return f"{self.location}: {self.severity}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


class TraceSetError(ValueError):
    """A trace set has errors; ``problems`` lists every one (with file and line)."""

    def __init__(self, problems: list[LoadProblem]):
        self.problems = problems
        shown = "\n".join(f"  {p}" for p in problems[:50])
        more = f"\n  ... and {len(problems) - 50} more" if len(problems) > 50 else ""
        super().__init__(f"{len(problems)} problem(s) loading the trace set:\n{shown}{more}")


def describe_validation_error(exc: ValidationError) -> str:
    """One line per pydantic error: ``location: message`` (JSON syntax errors keep their position)."""
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = err.get("msg", "invalid")
        if err.get("type") == "json_invalid":
            ctx = err.get("ctx") or {}
            parts.append(f"malformed JSON: {ctx.get('error', msg)}")
        else:
            value = err.get("input")
            got = (
                f" (got {value!r})"
                if isinstance(value, str | int | float | bool) and len(repr(value)) <= 60
                else ""
            )
            parts.append(f"{loc}: {msg}{got}" if loc else f"{msg}{got}")
    return "; ".join(parts)
