"""FIBServe: build, check, run and time candidate kernels for FlashInfer Trace definitions."""

__version__ = "0.1.0"
