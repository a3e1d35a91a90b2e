"""Parse PTX text into per-function instruction counts and architecture families.

The parse works on the instruction stream, not on substrings: comments and string literals are removed,
the text is split into statements at ``;``, ``{`` and ``}``, labels (``$L__BB0_2:``) and predicates
(``@%p1``, ``@!p``) are dropped, directives (``.reg``, ``.loc``, debug ``.section`` blocks) are skipped, and the first token of what
remains is the opcode. So ``// wgmma.mma_async`` in a comment, a ``.file`` path containing ``mbarrier``, or a
label named ``mapa:`` count for nothing. Inline ``asm`` blocks appear in the PTX as ordinary instructions
(nvcc wraps them in ``{ }`` scopes), so they are counted in the function that contains them.
"""

from __future__ import annotations

import re
from collections import Counter

from pydantic import BaseModel, ConfigDict, Field

from .families import classify_ptx_opcode

# Lexed as ptxas lexes: a string ends at the next quote, with no escapes (ptxas reads `.pragma "a\";` as the
# string `a\`), and may span lines (ptxas took `.pragma "\ntcgen05.mma ...;\n";` for one pragma). Read otherwise,
# the parse and ptxas saw different text: PTX the parse took for a string was compiled (hidden kernels), text
# ptxas took for a string was counted (TMA, tcgen05 or cluster families with no such instruction), and
# patterns run on that text rescanned the rest of the file from every start, which held the trusted process for
# minutes. Every alternative is linear: an unterminated string or comment ends the text once.
_COMMENTS_AND_STRINGS = re.compile(r"//[^\n]*|/\*.*?(?:\*/|\Z)|\"[^\"]*(?:\"|\Z)", re.DOTALL)
# Line-oriented directives carry no ";" and would glue themselves to the next instruction; debug sections
# (present with -G) hold braces of their own.
_LINE_DIRECTIVES = re.compile(
    r"^[ \t]*\.(?:loc|file)\b[^\n]*|^[ \t]*\.section[ \t]+[\w.]+\s*\{[^}]*(?:\}|\Z)", re.MULTILINE
)
_STATEMENT_SPLIT = re.compile(r"([;{}])")
_LABELS = re.compile(r"^(?:[A-Za-z_$%][\w$.]*\s*:(?!:)\s*)+")
_PREDICATE = re.compile(r"^@!?%?[\w$]+\s*")
_OPCODE = re.compile(r"^[A-Za-z_][\w.:]*")
_FUNCTION = re.compile(r"\.(entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)")
_TARGET = re.compile(r"\.target\s+([\w, ]+)")
_VERSION = re.compile(r"\.version\s+([\d.]+)")


class PtxFunction(BaseModel):
    """Instruction counts of one PTX function (``.entry`` is a kernel, ``.func`` a device function)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str
    """Mangled symbol name, as in the PTX."""
    kind: str
    """``entry`` (kernel) or ``func`` (device function)."""
    instructions: int = 0
    """Number of instruction statements in the body."""
    families: dict[str, int] = Field(default_factory=dict)
    """Family name -> instruction count (see :mod:`fibserve.analysis.families`)."""
    opcodes: dict[str, int] = Field(default_factory=dict)
    """Full opcode -> count, for family members only (e.g. ``mbarrier.try_wait.parity.shared::cta.b64``)."""


class PtxReport(BaseModel):
    """Everything the PTX of one translation unit says about architecture-specific instructions."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    version: str | None = None
    """PTX ISA version from ``.version``."""
    target: str | None = None
    """Target from ``.target`` (e.g. ``sm_90a``)."""
    functions: list[PtxFunction] = Field(default_factory=list)
    """Functions in file order; only functions with a body."""

    @property
    def families(self) -> dict[str, int]:
        """Family totals over all functions."""
        total: Counter[str] = Counter()
        for function in self.functions:
            total.update(function.families)
        return dict(total)


def parse_ptx(text: str) -> PtxReport:
    """Parse PTX ``text`` (as written by ``nvcc -keep`` or ``--ptx``).

    Returns:
        A :class:`PtxReport`; instructions outside any function (there should be none) are ignored.
    """
    code = _LINE_DIRECTIVES.sub(" ", _COMMENTS_AND_STRINGS.sub(" ", text))
    report = PtxReport()
    if match := _VERSION.search(code):
        report.version = match.group(1)
    if match := _TARGET.search(code):
        report.target = match.group(1).split(",")[0].strip()
    depth = 0
    pending: tuple[str, str] | None = None
    current: PtxFunction | None = None
    families: Counter[str] = Counter()
    opcodes: Counter[str] = Counter()
    pieces = _STATEMENT_SPLIT.split(code)
    for index in range(0, len(pieces), 2):
        statement = pieces[index].strip()
        delimiter = pieces[index + 1] if index + 1 < len(pieces) else ""
        if statement:
            statement = _LABELS.sub("", statement)
            if statement.startswith("."):
                if depth == 0 and (function := _FUNCTION.search(statement)):
                    pending = (function.group(2), function.group(1))
            elif current is not None and statement:
                statement = _PREDICATE.sub("", statement)
                if opcode_match := _OPCODE.match(statement):
                    opcode = opcode_match.group(0)
                    current.instructions += 1
                    family = classify_ptx_opcode(opcode)
                    if family is not None:
                        families[family] += 1
                        opcodes[opcode] += 1
        if delimiter == "{":
            if depth == 0 and pending is not None:
                current = PtxFunction(name=pending[0], kind=pending[1])
                families, opcodes = Counter(), Counter()
                pending = None
            depth += 1
        elif delimiter == "}":
            depth = max(depth - 1, 0)
            if depth == 0 and current is not None:
                current.families = dict(families)
                current.opcodes = dict(opcodes)
                report.functions.append(current)
                current = None
        elif delimiter == ";" and depth == 0:
            pending = None  # a prototype (``.func ... ;``) or a global variable, not a body
    return report
