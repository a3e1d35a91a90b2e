"""FIBServe: build, check, run and time candidate kernels for FlashInfer Trace definitions."""

__version__ = "0.1.0"


def __getattr__(name: str):
    """Lazily export ``check`` so that ``import fibserve`` stays light (no pydantic build/analysis imports)."""
    if name == "check":
        from fibserve.static_analysis import check

        return check
    raise AttributeError(f"module 'fibserve' has no attribute {name!r}")
