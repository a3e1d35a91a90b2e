"""What a server admits beyond a valid request body: source limits, time limits and locked tolerances.

Both are settings of the server (``fibserve serve --max-sources``, ``--max-source-mb``, ``--locked-tolerances``),
so they are checked here, after validation, with answers that name the field and the option.
"""

from __future__ import annotations

from fibserve.api import EvaluateBatchRequest, EvaluateRequest, ProfileRequest, SanitizeRequest
from fibserve.trace import Solution

from .errors import ApiError
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


def check_timeout(
    request: EvaluateRequest | SanitizeRequest | ProfileRequest, settings: ServeSettings
) -> None:
    """Refuse a ``timeout`` above this server's limit.

    Raises:
        ApiError: 422 ``timeout_too_long`` naming the field, the value and the limit.
    """
    if request.timeout is not None and request.timeout > settings.max_timeout_s:
        raise ApiError(
            422,
            "timeout_too_long",
            f"timeout {request.timeout:g} s is longer than this server allows ({settings.max_timeout_s:g} s, "
            "fibserve serve --max-timeout): ask for less, or leave it out for the server's default",
            {"field": "timeout", "value": request.timeout, "limit": settings.max_timeout_s},
        )


def check_tolerances(request: EvaluateRequest | EvaluateBatchRequest, settings: ServeSettings) -> None:
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
