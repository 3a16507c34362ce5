"""Machine code made at run time that works on Python objects: an LLVM IR text builder whose
calls go to CPython's C API, and the step that turns a compiled function into a builtin.

The warm launch path (`naiad.runtime.native_entry`) is a few microseconds of Python per launch
where the work it does -- compare an argument's type, read an address, pack 8-byte slots,
call the driver -- is a few native steps.  Naiad needs no C compiler on the user's machine, so
such code is written here as LLVM IR and compiled in-process with llvmlite, the way the CPU
backend compiles kernels.  Calls into CPython go through the C API functions' addresses (from
``ctypes.pythonapi``), objects the code refers to are constants (their ``id``), kept alive by the
`NativeModule` that holds the code.

Only CPython with the GIL qualifies (object layouts: ``ob_type`` at 8, a tuple's size at 16 and
items from 24; the reference count is changed only through ``Py_IncRef``/``Py_DecRef``):
`available` says whether this process does.
"""

from __future__ import annotations

import ctypes
import functools
import platform
import struct
import sys
from typing import Any, Callable

#: The C API functions the builder calls: name -> (return type, parameter types) in LLVM IR.
CAPI = {
    "Py_IncRef": ("void", ("ptr",)),
    "Py_DecRef": ("void", ("ptr",)),
    "PyErr_Clear": ("void", ()),
    "PyObject_Vectorcall": ("ptr", ("ptr", "ptr", "i64", "ptr")),
    "PyObject_VectorcallMethod": ("ptr", ("ptr", "ptr", "i64", "ptr")),
    "PyObject_GetAttr": ("ptr", ("ptr", "ptr")),
    "PyObject_RichCompareBool": ("i32", ("ptr", "ptr", "i32")),
    "PyObject_Size": ("i64", ("ptr",)),
    "PyCallable_Check": ("i32", ("ptr",)),
    "PyDict_GetItemWithError": ("ptr", ("ptr", "ptr")),
    "PyDict_New": ("ptr", ()),
    "PyDict_SetItem": ("i32", ("ptr", "ptr", "ptr")),
    "PyUnicode_Compare": ("i32", ("ptr", "ptr")),
    "PyLong_AsLongLongAndOverflow": ("i64", ("ptr", "ptr")),
    "PyLong_AsUnsignedLongLong": ("i64", ("ptr",)),
    "PyLong_FromLongLong": ("ptr", ("i64",)),
    "PyFloat_AsDouble": ("double", ("ptr",)),
    "PyFloat_FromDouble": ("ptr", ("double",)),
    "PyEval_SaveThread": ("ptr", ()),
    "PyEval_RestoreThread": ("void", ("ptr",)),
}

_METH_FASTCALL_KEYWORDS = 0x0080 | 0x0002
#: Offsets in CPython's object structs (64-bit, GIL build).
OB_TYPE, TUPLE_SIZE, TUPLE_ITEMS = 8, 16, 24


@functools.lru_cache(maxsize=None)
def available() -> bool:
    """Whether this process can run native entries: 64-bit CPython with the GIL, llvmlite's
    JIT and every C API function the builder calls."""
    if platform.python_implementation() != "CPython" or sys.maxsize != 2**63 - 1:
        return False
    if getattr(sys, "_is_gil_enabled", lambda: True)() is False or hasattr(sys, "gettotalrefcount"):
        return False              # free-threaded or debug builds lay objects out otherwise
    try:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        return all(hasattr(ctypes.pythonapi, name) for name in CAPI) and \
            hasattr(ctypes.pythonapi, "PyCMethod_New")
    except Exception:             # noqa: BLE001  (no JIT for this platform)
        return False


def double(value: float) -> str:
    """An IR double constant: its bits in hex (a decimal constant must be exact)."""
    return f"0x{struct.unpack('<Q', struct.pack('<d', value))[0]:016X}"


def address_of(function: Any) -> int:
    """The address of a ctypes function (a C API function, a driver's entry point)."""
    return ctypes.cast(function, ctypes.c_void_p).value


class IRFunction:
    """Text of one LLVM IR function, written a line at a time, with fresh register and label
    names, constants for Python objects, and calls to the C API (`CAPI`)."""

    def __init__(self, module: "NativeModule", header: str):
        self.module = module
        self.lines = [header + " {", "entry:"]
        self.count = 0

    def fresh(self, stem: str = "t") -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def reg(self) -> str:
        return "%" + self.fresh()

    def __call__(self, line: str) -> None:
        self.lines.append("  " + line)

    def value(self, expression: str) -> str:
        """A new register holding ``expression`` (an instruction's right-hand side)."""
        register = self.reg()
        self(f"{register} = {expression}")
        return register

    def place(self, label: str) -> None:
        self.lines.append(f"{label}:")

    def branch(self, condition: str, then: str, otherwise: str) -> None:
        self(f"br i1 {condition}, label %{then}, label %{otherwise}")

    def jump(self, label: str) -> None:
        self(f"br label %{label}")

    def unless(self, condition: str, fail: str) -> None:
        """Go on when ``condition`` holds, else to ``fail``."""
        go = self.fresh("ok")
        self.branch(condition, go, fail)
        self.place(go)

    def object(self, value: Any) -> str:
        """A constant pointer to Python object ``value``, kept alive by the module."""
        return self.module.constant(value)

    def capi(self, name: str, *args: str) -> str | None:
        """Call C API function ``name`` with IR operands ``args`` (typed by `CAPI`); its result
        register, or None for a void function."""
        ret, params = CAPI[name]
        callee = f"inttoptr (i64 {address_of(getattr(ctypes.pythonapi, name))} to ptr)"
        operands = ", ".join(f"{ty} {arg}" for ty, arg in zip(params, args))
        if ret == "void":
            self(f"call void {callee}({operands})")
            return None
        return self.value(f"call {ret} {callee}({operands})")

    def load(self, ty: str, pointer: str, offset: int = 0) -> str:
        """``*(ty *)(pointer + offset)``."""
        if offset:
            pointer = self.value(f"getelementptr i8, ptr {pointer}, i64 {offset}")
        return self.value(f"load {ty}, ptr {pointer}")

    def is_type(self, obj: str, kind: type) -> str:
        """Whether ``obj``'s type is exactly ``kind`` (no subclass)."""
        return self.value(f"icmp eq ptr {self.load('ptr', obj, OB_TYPE)}, {self.object(kind)}")

    def same(self, a: str, b: str) -> str:
        return self.value(f"icmp eq ptr {a}, {b}")

    def decref(self, obj: str) -> None:
        self.capi("Py_DecRef", obj)

    def checked(self, register: str, fail: str, release: Callable[[], None] = lambda: None) -> None:
        """Go on when a call returned an object (non-NULL), else clear its error, write
        ``release()``'s cleanup and go to ``fail``."""
        go, clear = self.fresh("ok"), self.fresh("err")
        self.branch(self.value(f"icmp ne ptr {register}, null"), go, clear)
        self.place(clear)
        self.capi("PyErr_Clear")
        release()
        self.jump(fail)
        self.place(go)

    def propagate(self, register: str) -> None:
        """Go on when a call returned an object, else return NULL: its exception is the
        caller's."""
        raised, returned = self.fresh("raised"), self.fresh("returned")
        self.branch(self.value(f"icmp eq ptr {register}, null"), raised, returned)
        self.place(raised)
        self("ret ptr null")
        self.place(returned)

    def call_method(self, obj: str, name: str, fail: str) -> str:
        """``obj.name()`` (a new reference), or to ``fail`` (error cleared)."""
        args = self.value("alloca ptr")
        self(f"store ptr {obj}, ptr {args}")
        result = self.capi("PyObject_VectorcallMethod", self.object(sys.intern(name)), args, "1", "null")
        self.checked(result, fail)
        return result

    def call_object(self, callable_: str, args: list[str], fail: str) -> str:
        """``callable_(*args)`` (a new reference), or to ``fail`` (error cleared)."""
        vector = "null"
        if args:
            vector = self.value(f"alloca [{len(args)} x ptr]")
            for i, arg in enumerate(args):
                slot = self.value(f"getelementptr ptr, ptr {vector}, i64 {i}")
                self(f"store ptr {arg}, ptr {slot}")
        result = self.capi("PyObject_Vectorcall", callable_, vector, str(len(args)), "null")
        self.checked(result, fail)
        return result

    def text(self) -> str:
        return "\n".join(self.lines + ["}"])


class NativeModule:
    """IR functions compiled together into one execution engine, and the Python objects their
    code points to.  It must outlive every call into its code: the owner keeps it."""

    def __init__(self) -> None:
        self.functions: list[IRFunction] = []
        self.objects: dict[int, Any] = {}
        self.engine: Any = None
        self._definitions: list[Any] = []

    def function(self, header: str) -> IRFunction:
        function = IRFunction(self, header)
        self.functions.append(function)
        return function

    def constant(self, value: Any) -> str:
        self.objects[id(value)] = value
        return f"inttoptr (i64 {id(value)} to ptr)"

    def compile(self) -> None:
        import llvmlite.binding as llvm

        source = "\n\n".join(f.text() for f in self.functions)
        module = llvm.parse_assembly(source)
        module.verify()
        machine = llvm.Target.from_triple(llvm.get_process_triple()).create_target_machine(
            opt=0, codemodel="jitdefault")
        self.engine = llvm.create_mcjit_compiler(module, machine)
        self.engine.finalize_object()

    def builtin(self, symbol: str, name: str) -> Callable[..., Any]:
        """Compiled function ``symbol`` (``PyObject *f(PyObject *self, PyObject *const *args,
        Py_ssize_t nargsf, PyObject *kwnames)``) as a Python builtin called with vectorcall."""
        address = self.engine.get_function_address(symbol)
        definition = _MethodDef(name.encode(), address, _METH_FASTCALL_KEYWORDS, None)
        self._definitions.append(definition)
        make = ctypes.pythonapi.PyCMethod_New
        make.restype, make.argtypes = ctypes.py_object, (ctypes.c_void_p, ctypes.py_object,
                                                         ctypes.py_object, ctypes.c_void_p)
        return make(ctypes.addressof(definition), self, None, None)


class _MethodDef(ctypes.Structure):
    """CPython's PyMethodDef."""
    _fields_ = [("name", ctypes.c_char_p), ("meth", ctypes.c_void_p), ("flags", ctypes.c_int),
                ("doc", ctypes.c_char_p)]
