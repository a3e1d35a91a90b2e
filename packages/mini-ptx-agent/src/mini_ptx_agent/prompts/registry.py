"""Prompt tags: the registry file ``tags.toml``, its validation, and lookups by name.

A *tag* is an ordered list of parts. A part with a ``/`` is a fragment (``ptx/wgmma`` is
``fragments/ptx/wgmma.md``); a part without one is another tag, expanded in place. Base tags name a *target*
(language, ``sm``, nvcc ``-gencode`` flag and the values of ``{{placeholders}}``); variants inherit the target of
the tags they include. Expanding a tag keeps the first occurrence of each fragment, so a tag made of two variants
carries their base once.

Everything is checked when the registry loads, so a broken registry fails at import with a message that names
the tag and the part: unknown tags and fragments (with close matches), cycles, conflicting targets, ``@include``
lines naming files that do not exist, and placeholders the target does not define.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mini_ptx_agent.task import TaskLanguage

PROMPTS_DIR = Path(__file__).resolve().parent
"""The package folder holding ``tags.toml``, ``fragments/``, ``headers/`` and ``examples/``."""

_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")
_INCLUDE = re.compile(r"^@include\s+(\S+)\s*$", re.MULTILINE)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_FENCES = {"cuda": ("cuda", "cpp", "cu"), "triton": ("python",)}


class PromptRegistryError(ValueError):
    """The tag registry (``tags.toml`` and the files it names) is inconsistent; the message says where."""


class UnknownPromptTagError(KeyError):
    """No tag of that name; the message suggests close matches and lists the known tags."""

    def __str__(self) -> str:  # KeyError would print the message with quotes around it
        return str(self.args[0])


class PromptTag(BaseModel):
    """One selectable system prompt: which fragments, in which order, for which target."""

    model_config = ConfigDict(frozen=True)

    name: str
    """The tag, e.g. ``hopper-no-hint``."""
    description: str
    """One line for humans (shown by ``ptxbench prompts list``)."""
    target: str
    """Name of the target in ``tags.toml`` (``hopper-cuda``, ``blackwell-cuda``, ``triton-hopper``, ...)."""
    language: TaskLanguage
    """Kernel language the prompt asks for: ``cuda`` (tvm-ffi binding) or ``triton``."""
    sm: str
    """Target architecture, e.g. ``sm_90a``."""
    gencode: str
    """nvcc ``-gencode`` flag the service builds CUDA kernels with (``-gencode=arch=compute_90a,code=sm_90a``)."""
    fence_languages: tuple[str, ...]
    """Info strings of fenced blocks that carry the kernel (the agent extracts the last one)."""
    parts: tuple[str, ...] = Field(min_length=1)
    """The parts as written in ``tags.toml``: fragments and tags."""
    fragments: tuple[str, ...] = Field(min_length=1)
    """The expanded fragment names (``ptx/wgmma``), in prompt order, each once."""
    variables: dict[str, str]
    """Values for ``{{name}}`` placeholders in the fragments."""


@dataclass
class _Loader:
    """Expands and checks the tags of one parsed registry."""

    source: Path
    fragments_dir: Path
    targets: dict[str, dict[str, str]]
    raw: dict[str, dict[str, Any]]
    done: dict[str, PromptTag] = field(default_factory=dict)

    def fail(self, message: str) -> PromptRegistryError:
        return PromptRegistryError(f"{self.source.name}: {message}")

    def tag(self, name: str, stack: tuple[str, ...] = ()) -> PromptTag:
        if name in self.done:
            return self.done[name]
        if name in stack:
            raise self.fail(f"tag {name!r} includes itself: {' -> '.join((*stack, name))}")
        spec = self.raw[name]
        parts = spec.get("parts")
        if not isinstance(parts, list) or not parts or not all(isinstance(p, str) for p in parts):
            raise self.fail(f"tag {name!r} needs `parts`, a non-empty list of fragment paths and tag names")
        fragments: list[str] = []
        targets: list[str] = [spec["target"]] if "target" in spec else []
        for part in parts:
            if "/" in part:
                self.check_fragment(name, part)
                expanded = [part]
            else:
                if part not in self.raw:
                    raise self.fail(
                        f"tag {name!r} names tag {part!r}, which does not exist{_close(part, self.raw)}"
                    )
                included = self.tag(part, (*stack, name))
                targets.append(included.target)
                expanded = list(included.fragments)
            fragments += [f for f in expanded if f not in fragments]
        return self.finish(name, spec, parts, fragments, targets)

    def finish(
        self, name: str, spec: dict[str, Any], parts: list[str], fragments: list[str], targets: list[str]
    ) -> PromptTag:
        if not targets:
            raise self.fail(f"tag {name!r} has no `target` and includes no tag to inherit one from")
        if len(set(targets)) > 1:
            raise self.fail(f"tag {name!r} mixes targets {sorted(set(targets))}; a prompt is for one target")
        target = targets[0]
        if target not in self.targets:
            raise self.fail(f"tag {name!r}: unknown target {target!r}{_close(target, self.targets)}")
        variables = self.targets[target]
        for fragment in fragments:
            for placeholder in _PLACEHOLDER.findall(_COMMENT.sub("", self.fragment_text(fragment))):
                if placeholder not in variables:
                    raise self.fail(
                        f"tag {name!r}: fragment {fragment!r} uses {{{{{placeholder}}}}}, which target "
                        f"{target!r} does not define (it defines {sorted(variables)})"
                    )
        language = variables["language"]
        tag = PromptTag(
            name=name,
            description=str(spec.get("description", "")),
            target=target,
            language=language,  # type: ignore[arg-type]  # checked when the targets were read
            sm=variables["sm"],
            gencode=variables["gencode"],
            fence_languages=_FENCES[language],
            parts=tuple(parts),
            fragments=tuple(fragments),
            variables=dict(variables),
        )
        self.done[name] = tag
        return tag

    def fragment_text(self, fragment: str) -> str:
        return (self.fragments_dir / f"{fragment}.md").read_text(encoding="utf-8")

    def check_fragment(self, tag: str, fragment: str) -> None:
        path = self.fragments_dir / f"{fragment}.md"
        if not path.is_file():
            known = sorted(
                str(p.relative_to(self.fragments_dir).with_suffix(""))
                for p in self.fragments_dir.rglob("*.md")
            )
            raise self.fail(
                f"tag {tag!r} names fragment {fragment!r}, but {path.relative_to(self.fragments_dir.parent)} "
                f"does not exist{_close(fragment, known)}"
            )
        for included in _INCLUDE.findall(_COMMENT.sub("", path.read_text(encoding="utf-8"))):
            if not (self.fragments_dir.parent / included).is_file():
                raise self.fail(
                    f"fragment {fragment!r} (tag {tag!r}) includes {included!r}, which does not exist"
                )


def _close(name: str, known: Mapping[str, object] | list[str]) -> str:
    matches = difflib.get_close_matches(name, list(known), n=3)
    return f"; did you mean {', '.join(matches)}?" if matches else ""


def _read_targets(source: Path, raw: Any) -> dict[str, dict[str, str]]:
    if not isinstance(raw, dict) or not raw:
        raise PromptRegistryError(f"{source.name}: needs a [targets.NAME] table for every target")
    targets: dict[str, dict[str, str]] = {}
    for name, values in raw.items():
        missing = [key for key in ("language", "sm", "gencode", "arch_name") if key not in values]
        if missing:
            raise PromptRegistryError(f"{source.name}: target {name!r} lacks {missing}")
        if values["language"] not in _FENCES:
            raise PromptRegistryError(
                f"{source.name}: target {name!r} has language {values['language']!r}; use cuda or triton"
            )
        targets[name] = {key: str(value) for key, value in values.items()}
    return targets


def load_tag_registry(path: Path | None = None) -> dict[str, PromptTag]:
    """Read and check a tag registry (default: the packaged ``tags.toml``); fragments live beside it.

    Returns:
        Tag name -> :class:`PromptTag`, in file order.

    Raises:
        PromptRegistryError: the file is missing or malformed, or a tag is inconsistent (see the module docstring).
    """
    source = path or PROMPTS_DIR / "tags.toml"
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise PromptRegistryError(f"cannot read the prompt tag registry {source}: {error}") from error
    tags = data.get("tags")
    if not isinstance(tags, dict) or not tags:
        raise PromptRegistryError(f"{source.name}: needs [tags.NAME] tables")
    loader = _Loader(source, source.parent / "fragments", _read_targets(source, data.get("targets")), tags)
    return {name: loader.tag(name) for name in tags}


PROMPT_TAGS: dict[str, PromptTag] = load_tag_registry()
"""Every packaged tag by name (checked at import)."""


def list_prompt_tags() -> list[str]:
    """Names of all prompt tags, sorted."""
    return sorted(PROMPT_TAGS)


def get_prompt_tag(tag: str) -> PromptTag:
    """The :class:`PromptTag` called ``tag``.

    Raises:
        UnknownPromptTagError: unknown tag; the message offers close matches and lists the known tags.
    """
    try:
        return PROMPT_TAGS[tag]
    except KeyError:
        hint = _close(tag, PROMPT_TAGS) or "."
        raise UnknownPromptTagError(
            f"unknown prompt tag {tag!r}{hint} Known tags: {', '.join(list_prompt_tags())}"
        ) from None
