"""Imported symbols and needed libraries of a built shared library (ELF64, little-endian).

The source policy reads text, and text can be obfuscated (token pasting builds ``cublasGemmEx`` out of
pieces; a hand-written ``extern "C"`` prototype replaces the header). The binary cannot hide what it imports:
every function it calls from another library is an undefined symbol in ``.dynsym``, and every library it
links is a ``DT_NEEDED`` entry. Reading them needs no binutils: the layout is the System V gABI's
(ELF header, section headers, ``Elf64_Sym`` and ``Elf64_Dyn`` records).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

_SHT_DYNSYM = 11
_SHT_DYNAMIC = 6
_DT_NEEDED = 1


@dataclass
class DynamicImports:
    """What a shared library needs from others."""

    undefined: list[str] = field(default_factory=list)
    """Names of undefined (imported) dynamic symbols."""
    needed: list[str] = field(default_factory=list)
    """``DT_NEEDED`` library names (``libcudart.so.13``...)."""


def read_dynamic_imports(path: Path) -> DynamicImports:
    """Read the undefined dynamic symbols and needed libraries of the ELF64 file at ``path``.

    Raises:
        ValueError: the file is not a little-endian ELF64 object.
        OSError: it cannot be read.
    """
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path.name} is not a little-endian ELF64 file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    imports = DynamicImports()

    def string(table: int, offset: int) -> str:
        start = sections[table][4] + offset
        end = data.index(b"\0", start)
        return data[start:end].decode("utf-8", errors="replace")

    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind == _SHT_DYNSYM and entsize:
            for start in range(offset + entsize, offset + size, entsize):  # entry 0 is the null symbol
                name_offset, _st_info, _other, shndx = struct.unpack_from("<IBBH", data, start)
                if shndx == 0 and name_offset:
                    imports.undefined.append(string(link, name_offset))
        elif kind == _SHT_DYNAMIC and entsize:
            for start in range(offset, offset + size, entsize):
                tag, value = struct.unpack_from("<qQ", data, start)
                if tag == _DT_NEEDED:
                    imports.needed.append(string(link, value))
    return imports
