"""One JSON convention for everything FIBServe stores and answers: standard JSON that any parser reads.

- Non-finite floats are written as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``, as FlashInfer-Bench
  writes them (pydantic ``ser_json_inf_nan="strings"``). The float fields of the trace models read those strings
  back as floats, so a kernel whose outputs hold NaN keeps ``max_absolute_error: NaN`` from the lane through the
  task store and the HTTP answer to the client. Python's ``json.dumps`` would write the bare token ``NaN``
  (not JSON) and pydantic's default writes ``null``, which a float field then refuses.
- A string that UTF-8 cannot encode (a lone surrogate such as ``\\ud800``, which a JSON ``\\u`` escape can carry
  in) is written with those code points as visible backslash escapes, so echoing it in an error message or
  storing it cannot fail.
"""

from __future__ import annotations

import json
import math
from typing import Any

NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
"""``repr`` of a non-finite float -> its JSON string (the FlashInfer-Bench convention)."""


def plain_json(value: Any) -> Any:
    """``value`` (dicts, lists, tuples, strings, numbers, bools, None) with non-finite floats as their strings
    and unencodable strings escaped; anything else becomes its ``str``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else NON_FINITE[repr(value)]
    if isinstance(value, str):
        return _encodable(value)
    if isinstance(value, bool | int) or value is None:
        return value
    if isinstance(value, dict):
        return {_encodable(str(k)): plain_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_json(v) for v in value]
    return _encodable(str(value))


def dumps(value: Any) -> str:
    """Standard JSON text of ``value`` after :func:`plain_json` (never a bare ``NaN`` token)."""
    return json.dumps(plain_json(value), allow_nan=False, ensure_ascii=False)


def _encodable(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
