"""What a server admits beyond a valid request body: source limits and locked tolerances.

Both are settings of the server (``fibserve serve --max-sources``, ``--max-source-mb``, ``--locked-tolerances``),
so they are checked here, after validation, with answers that name the field and the option.
"""

from __future__ import annotations

from fibserve.trace import Solution

from .errors import ApiError
from .models import EvaluateRequest
from .settings import ServeSettings


def check_source_limits(solution: Solution, settings: ServeSettings) -> None:
    """Refuse a solution with more files, or more bytes of sources, than this server builds.

    Raises:
        ApiError: 413 ``too_many_sources`` or ``sources_too_large``, naming ``solution.sources`` and the limit.
    """
    count = len(solution.sources)
    if count > settings.max_sources:
        raise ApiError(
            413,
            "too_many_sources",
            f"solution.sources holds {count} files; this server builds at most {settings.max_sources} "
            "(fibserve serve --max-sources): merge files",
            {"field": "solution.sources", "count": count, "limit": settings.max_sources},
        )
    size = sum(
        len(s.path.encode()) + len(s.content.encode("utf-8", "surrogatepass")) for s in solution.sources
    )
    if size > settings.max_source_bytes:
        raise ApiError(
            413,
            "sources_too_large",
            f"solution.sources holds {size} bytes; this server builds at most {settings.max_source_bytes} "
            f"({settings.max_source_mb:g} MiB, fibserve serve --max-source-mb)",
            {"field": "solution.sources", "bytes": size, "limit": settings.max_source_bytes},
        )


def check_tolerances(request: EvaluateRequest, settings: ServeSettings) -> None:
    """Refuse ``atol``/``rtol`` in a request when this server's tolerances are locked.

    Raises:
        ApiError: 403 ``tolerances_locked`` naming the fields given (``details.fields``).
    """
    given = [name for name in ("atol", "rtol") if getattr(request, name) is not None]
    if given and settings.tolerances_locked:
        raise ApiError(
            403,
            "tolerances_locked",
            f"this server's tolerances are locked (fibserve serve --locked-tolerances, the default with a "
            f"token): remove {' and '.join(given)} from the request; the tolerances used are in each trace's "
            "correctness.extra and in the answer's config",
            {"fields": given},
        )
