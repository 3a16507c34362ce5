"""The child process that emits SPIR-V for the parent (`naiad_opencl.spirv`).

It never emits a module itself: for each request it forks, and the fork emits the module and
exits, so every module meets the SPIR-V back end's static state as a fresh process has it (see
`naiad_opencl.spirv.emit_spirv`).  Requests and answers are length-prefixed frames on stdin /
stdout: a request is the optimized LLVM IR; an answer is a status byte (0: the SPIR-V follows;
1: the emission failed, its message follows) and the payload.
"""

from __future__ import annotations

import os
import struct
import sys

from naiad_opencl.spirv import emit_in_process, llvm_binding


def _read(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _emit_in_fork(llir: bytes) -> tuple[int, bytes]:
    """(status, payload) of emitting ``llir`` in a forked child."""
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:                                   # the child: emit, answer, exit
        os.close(readable)
        try:
            status, payload = 0, emit_in_process(llir.decode())
        except Exception as e:                     # noqa: BLE001 -- reported to the parent
            status, payload = 1, f"{type(e).__name__}: {e}".encode()
        os.write(writable, struct.pack("<BQ", status, len(payload)))
        view = memoryview(payload)
        while view:
            view = view[os.write(writable, view):]
        os._exit(0)
    os.close(writable)
    try:
        status, size = struct.unpack("<BQ", _read(readable, 9))
        payload = _read(readable, size)
    except (EOFError, struct.error):
        status, payload = 1, b"the SPIR-V back end crashed (the emitting process died)"
    finally:
        os.close(readable)
        os.waitpid(pid, 0)
    return status, payload


def main() -> None:
    llvm_binding()         # loaded once here with its targets (and Naiad's modules), shared by every fork

    source, sink = sys.stdin.fileno(), sys.stdout.buffer
    while True:
        try:
            (size,) = struct.unpack("<Q", _read(source, 8))
            llir = _read(source, size)
        except EOFError:
            return
        status, payload = _emit_in_fork(llir)
        sink.write(struct.pack("<BQ", status, len(payload)) + payload)
        sink.flush()


if __name__ == "__main__":
    main()
