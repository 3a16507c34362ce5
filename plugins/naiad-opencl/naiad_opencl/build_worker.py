"""The child process that builds SPIR-V programs for the parent (`naiad_opencl.builder`).

Requests and answers are length-prefixed frames on stdin / stdout: a request is the device's
index and the SPIR-V; an answer is a status byte (0: the device binary follows; 1: the build
failed, its log follows) and the payload.  A runtime that crashes while building takes only
this process down.
"""

from __future__ import annotations

import struct
import sys
import warnings


def _read(stream, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError
    return data


def main() -> None:
    import pyopencl as cl

    from naiad_opencl import runtime

    source, sink = sys.stdin.buffer, sys.stdout.buffer
    contexts: dict[int, object] = {}
    while True:
        try:
            index, size = struct.unpack("<IQ", _read(source, 12))
            spv = _read(source, size)
        except EOFError:
            return
        device = runtime.devices()[index]
        context = contexts.get(index) or contexts.setdefault(index, cl.Context([device]))
        program = cl.Program(context, spv)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program.build()
            status, payload = 0, program.get_info(cl.program_info.BINARIES)[0]
        except cl.Error as e:
            try:
                log = program.get_build_info(device, cl.program_build_info.LOG).strip()
            except cl.Error:
                log = ""
            status, payload = 1, (log or str(e).split(" - ")[0]).encode()
        sink.write(struct.pack("<BQ", status, len(payload)) + bytes(payload))
        sink.flush()


if __name__ == "__main__":
    main()
