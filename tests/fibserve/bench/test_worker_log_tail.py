"""What a worker prints is read through a pipe and only its first and last 64 KiB are kept, in memory: a
candidate printing without end neither fills the disk nor the service's memory (issue 13, item 11)."""

from __future__ import annotations

import os
import threading

from fibserve.sandbox.watchdog import KEEP_BYTES, OutputCapture


def test_only_the_ends_of_a_large_output_are_kept() -> None:
    read, write = os.pipe()
    hit = threading.Event()
    capture = OutputCapture(read, limit_bytes=None, on_limit=hit.set)
    chunk = b"x" * 65536
    with os.fdopen(write, "wb") as out:
        out.write(b"HEAD\n")
        for _ in range(50 * 16):  # 50 MiB
            out.write(chunk)
        out.write(b"\nthe traceback at the end")
    capture.join()
    assert capture.total == 5 + 50 * (1 << 20) + 25 and not hit.is_set()
    assert capture.tail(100).endswith("the traceback at the end")
    text = capture.text()
    assert text.startswith("HEAD") and text.endswith("the traceback at the end")
    assert len(text) < 2 * KEEP_BYTES + 200 and "bytes of output not kept" in text


def test_a_short_output_is_kept_whole_and_the_limit_is_reported_once() -> None:
    read, write = os.pipe()
    calls = []
    capture = OutputCapture(read, limit_bytes=10, on_limit=lambda: calls.append(1))
    with os.fdopen(write, "wb") as out:
        out.write(b"0123456789abcdef")
        out.flush()
        out.write(b"more")
    capture.join()
    assert capture.text() == "0123456789abcdefmore" and calls == [1]
