"""The data address of a numpy array, read in a fraction of a microsecond.

Every launch needs the address of each array argument (for the kernel's pointer and for
Triton's 16-byte alignment specialization).  ``array.ctypes.data`` builds a ctypes helper object
on each read and costs microseconds -- more than the rest of a warm launch.  A numpy array is a
C struct whose ``data`` pointer follows the object header (``PyArrayObject_fields``, the same in
numpy 1 and 2); this module finds that field's offset once, checks it against ``ctypes.data`` on
arrays and views, and then reads the pointer directly.  Where the check fails (another Python
implementation, an unexpected layout) `numpy_address` is ``ctypes.data`` itself.
"""

from __future__ import annotations

import ctypes
import platform
from typing import Any, Callable


def _reader() -> Callable[[Any], int]:
    try:
        import numpy
    except ImportError:        # pragma: no cover  (no numpy arrays to read then)
        return lambda array: array.ctypes.data
    if platform.python_implementation() != "CPython":      # id() is an address only there
        return lambda array: array.ctypes.data
    base = numpy.arange(64, dtype=numpy.float64)
    probes = [base, base[3:], base[::2], numpy.zeros((3, 5), numpy.int8).T, numpy.empty(0)]
    read = ctypes.c_size_t.from_address
    for offset in range(ctypes.sizeof(ctypes.c_void_p), 8 * ctypes.sizeof(ctypes.c_void_p),
                        ctypes.sizeof(ctypes.c_void_p)):
        if all(read(id(p) + offset).value == p.ctypes.data for p in probes):
            return lambda array, _read=read, _offset=offset: _read(id(array) + _offset).value
    return lambda array: array.ctypes.data       # pragma: no cover


#: ``numpy_address(array)`` -> ``array.ctypes.data``, fast; only for ``numpy.ndarray`` objects.
numpy_address = _reader()
