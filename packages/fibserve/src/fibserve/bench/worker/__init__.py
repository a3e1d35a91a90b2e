"""The sandbox worker, the only process that runs candidate code, and the trusted side's handle on it.

Untrusted side (imported by the worker process; standard library and torch only): :mod:`.entry` (the process:
``python -m fibserve.bench.worker.entry``), :mod:`.clock` (one timed call), :mod:`.l2_state` and
:mod:`.l2_gate_kernel` (the cold-L2 overwrite), :mod:`.torch_audit` (PyTorch operators a Triton candidate ran).
Trusted side: :mod:`.pool` (starting, talking to and discarding workers), :mod:`.protocol` (the replies it
accepts), :mod:`.slots` and :mod:`.buffers` (the shared buffers and calls), :mod:`.shm_cleanup`. Both sides:
:mod:`.handover` (memfds sent as descriptors) and :mod:`.cuda_ipc` (device buffers).

This ``__init__`` imports nothing, so the worker process loads only what it uses.
"""
