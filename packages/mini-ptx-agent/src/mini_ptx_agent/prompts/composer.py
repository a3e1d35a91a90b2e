"""Compose the agent's system prompt for a prompt tag from its fragments.

A fragment is a markdown file under ``prompts/fragments/``. When it is rendered, HTML comments (``<!-- ... -->``,
where fragments keep maintainers' notes such as the source of a number) are removed, ``{{name}}`` is replaced by
the tag target's variable ``name``, and a line ``@include <path>`` is replaced by the file ``prompts/<path>``
verbatim in a fenced block (```` ```cuda ```` for ``.cu``/``.cuh``, ```` ```python ```` for ``.py``) under a line
naming the file, so the helper headers and examples the model reads are exactly the files CI compiles.

Only the standard library and pydantic are imported, so ``import mini_ptx_agent.prompts`` stays cheap.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from importlib import resources

from mini_ptx_agent.prompts.registry import get_prompt_tag

_FENCE_LANGUAGE = {".cu": "cuda", ".cuh": "cuda", ".py": "python"}
_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")
_INCLUDE = re.compile(r"^@include\s+(\S+)\s*$", re.MULTILINE)
_COMMENT = re.compile(r"<!--.*?-->\n?", re.DOTALL)


def read_prompt_file(relative_path: str) -> str:
    """Text of a file shipped under ``mini_ptx_agent/prompts/`` (e.g. ``headers/ptx_wgmma.cuh``).

    Raises:
        FileNotFoundError: no such file in the package.
    """
    node = resources.files(__package__)
    for part in relative_path.split("/"):
        node = node.joinpath(part)
    if not node.is_file():
        raise FileNotFoundError(f"prompt file {relative_path!r} is not part of mini_ptx_agent.prompts")
    return node.read_text(encoding="utf-8")


def _fenced_file(relative_path: str) -> str:
    name = relative_path.rsplit("/", 1)[-1]
    language = _FENCE_LANGUAGE.get("." + name.rsplit(".", 1)[-1], "")
    body = read_prompt_file(relative_path).rstrip("\n")
    return f"File `{name}`:\n\n```{language}\n{body}\n```"


def render_fragment(fragment: str, variables: Mapping[str, str]) -> str:
    """One fragment (``ptx/wgmma``) as it appears in a prompt: comments removed, placeholders filled, includes
    inserted.

    Raises:
        KeyError: the fragment uses a placeholder that ``variables`` lacks.
        FileNotFoundError: the fragment or an included file is missing.
    """
    text = _COMMENT.sub("", read_prompt_file(f"fragments/{fragment}.md"))

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in variables:
            raise KeyError(
                f"fragment {fragment}.md uses {{{{{name}}}}} but the tag defines only {sorted(variables)}"
            )
        return variables[name]

    # Placeholders first, then includes: included source files are inserted verbatim, never substituted.
    text = _PLACEHOLDER.sub(substitute, text)
    return _INCLUDE.sub(lambda m: _fenced_file(m.group(1)), text).strip()


@functools.cache
def compose_system_prompt(tag: str) -> str:
    """The full system prompt for ``tag``: its fragments in order, separated by blank lines.

    Deterministic (same tag, same text) and cached.

    Raises:
        UnknownPromptTagError: unknown tag (a KeyError; the message offers close matches).
    """
    spec = get_prompt_tag(tag)
    return "\n\n".join(render_fragment(fragment, spec.variables) for fragment in spec.fragments) + "\n"
