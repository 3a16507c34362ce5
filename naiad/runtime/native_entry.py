"""A kernel's warm launch as machine code: one builtin per ``@jit`` function that binds the
launch's arguments, recognizes a prepared specialization, checks that nothing it depends on has
changed, packs the argument slots and calls the backend's launch -- all without running Python.

The Python launch entry (`naiad.runtime.jit`) does the same in generated Python: a few
microseconds per launch, most of a small kernel's launch on a GPU whose own driver call takes
about five.  Here each prepared launch becomes a `Variant`: what each parameter must be
(``int`` in int32 range and divisible by 16, a torch tensor of float32 on cuda:0 at a 16-byte
aligned address, the constexpr 1024, ...), the options it was launched with, and `guards` --
(object, path, check, expected) conditions on the state the Python path reads (the kernel still
in the function's cache, its source and globals the same, the knobs and backend selection the
same, no pre-run or launch hooks).  The builtin tries the variants in turn; whatever it does not
recognize, and any doubt, goes to the Python entry with the same arguments, which takes the
full path (and prepares what it launches, for the next build).  So the builtin never decides
anything the Python path would decide otherwise: it only recognizes what that path already did.

The launch itself is the backend's, through its launcher's optional ``native_launch(module,
function)`` (`NativeLaunch`): IR that takes the packed slots and the grid.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any, Callable, NamedTuple, Protocol, Sequence

from naiad.runtime.native_code import IRFunction, NativeModule, TUPLE_ITEMS, TUPLE_SIZE

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_PY_EQ = 2
#: Constexpr and option values compared by value (exact type, ``==``); others by identity.
_BY_VALUE = (int, float, str)


class NativeLaunch(Protocol):
    """A launcher's native launch (``launcher.native_launch(module, function)``, optional).

    ``slots``: (parameter index, type string) of each 8-byte argument slot, in the order the
    kernel takes them.  ``emit(f, slots, gx, gy, gz, not_here)`` writes IR into `IRFunction`
    ``f`` that launches the kernel with the slots (an ``[n x i64]`` pointer, each value in its
    first bytes) over the grid (i64 registers), and returns an i64 register: 0 when launched,
    another value for an error, which ``error(code, grid)`` then raises.  Before it does
    anything that cannot be undone it may jump to label ``not_here``: the Python path then
    launches instead (another device current, work worth splitting across threads)."""

    slots: Sequence[tuple[int, str]]

    def emit(self, f: IRFunction, slots: str, gx: str, gy: str, gz: str, not_here: str) -> str: ...

    def error(self, code: int, grid: tuple[int, int, int]) -> None: ...


class Guard(NamedTuple):
    """A condition on state: from ``root`` follow ``path`` (steps ``("attr", name)``,
    ``("item", key)`` of a dict, ``("call",)``); ``check`` is "is" (the object is ``expected``;
    a missing key reads as None), "eq" (same type and ``==``), "missing" (no such
    key) or "empty" (``len() == 0``)."""
    root: Any
    path: tuple
    check: str
    expected: Any = None


class Variant(NamedTuple):
    """One prepared launch: the guards checked before any argument is read (torch's function
    modes off), per-parameter expectations (`expectation`), the options in the order they were
    given, the other guards, the grid limits, the launch and the kernel returned."""
    before: tuple
    params: tuple
    options: tuple
    guards: tuple
    max_grid: tuple
    max_programs: int | None
    launch: NativeLaunch
    kernel: Any


def expectation(param: Any, value: Any, slot_type: str | None) -> tuple | None:
    """What the builtin requires of a parameter, from the value a prepared launch had and the
    type of its slot (None: the kernel takes no slot for it); None when the builtin does not
    handle such a value (the Python path then always launches it).  Mirrors the launch entry's
    token rules (`naiad.runtime.jit`)."""
    kind = type(value)
    if param.is_constexpr:
        return ("value", value) if slot_type is None else None
    torch = sys.modules.get("torch")
    if torch is not None and kind is torch.Tensor and _pointer(slot_type):
        device = value.get_device() if value.is_cuda else ("cpu" if value.device.type == "cpu" else None)
        if device is None:
            return None
        return ("tensor", kind, value.dtype, device, value.data_ptr() % 16 == 0)
    numpy = sys.modules.get("numpy")
    if numpy is not None and kind is numpy.ndarray and _pointer(slot_type) and _NDARRAY.usable():
        from naiad.runtime.array_address import numpy_address     # (it probes numpy on import)

        return ("ndarray", kind, value.dtype, numpy_address(value) % 16 == 0, bool(value.flags.writeable))
    if kind is int:
        if value == 1:
            return ("one", slot_type) if slot_type in (None, "i32", "i64") else None
        if _INT32[0] <= value <= _INT32[1] and slot_type in ("i32", "i64"):
            return ("int", 32, value % 16 == 0, slot_type)
        if _INT64[0] <= value <= _INT64[1] and slot_type == "i64":
            return ("int", 64, value % 16 == 0, slot_type)
        return None
    if kind is float and slot_type in ("fp32", "fp64"):
        return ("float", slot_type)
    if kind is bool and slot_type in ("i1", "u1"):
        return ("bool",)
    if value is None and slot_type is None:
        return ("value", None)
    return None


def _pointer(slot_type: str | None) -> bool:
    return slot_type is not None and slot_type.startswith("*")


class _NdarrayLayout:
    """Where a numpy array keeps its data pointer, dtype and flags (``PyArrayObject_fields``,
    the same in numpy 1 and 2), checked once against numpy's own answers."""
    DATA, DESCR, FLAGS, WRITEABLE = 16, 56, 64, 0x400

    def __init__(self) -> None:
        self._usable: bool | None = None

    def usable(self) -> bool:
        if self._usable is None:
            import numpy

            arrays = [numpy.arange(8.0), numpy.arange(8.0)[1:], numpy.zeros((2, 3), numpy.int8).T]
            arrays[1].flags.writeable = False
            read = lambda a, offset, ty: ty.from_address(id(a) + offset).value   # noqa: E731
            self._usable = all(
                read(a, self.DATA, ctypes.c_size_t) == a.ctypes.data and
                read(a, self.DESCR, ctypes.c_size_t) == id(a.dtype) and
                bool(read(a, self.FLAGS, ctypes.c_int) & self.WRITEABLE) == a.flags.writeable
                for a in arrays)
        return self._usable


_NDARRAY = _NdarrayLayout()


#: Options (keywords that are not parameters) a native launch takes at most.
MAX_OPTIONS = 16


class VariantTable:
    """The variant functions a `dispatcher` tries, in order: ``addresses`` (up to ``size``)
    and ``count``, in memory the dispatcher reads at each call.  Rewritten in place when a
    variant is added or dropped; a function dropped must stay loaded (a thread may be in it)."""

    def __init__(self, size: int):
        self.size = size
        self.addresses = (ctypes.c_void_p * size)()
        self.count = ctypes.c_int64(0)

    def set(self, addresses: Sequence[int]) -> None:
        for i, address in enumerate(addresses):
            self.addresses[i] = address
        self.count.value = len(addresses)


#: What a variant function returns besides a result: "not this variant, try the next", and
#: "stop: the Python path takes this launch" (two objects of Naiad's own, by address).
_MISS, _STOP = object(), object()


def dispatcher(name: str, params: Sequence[str], defaults: dict[int, Any], missing: Any,
               table: VariantTable, fallback: Callable[..., Any]) -> Callable[..., Any]:
    """The builtin ``entry(grid, hooks_done, *args, **kwargs)`` of a JIT function: it binds the
    arguments to ``params`` (``missing`` standing for an absent positional one; ``defaults``:
    parameter index -> default value), tries the `variant_function` s in ``table`` and returns
    the first one's result; without one (or one that says stop, or arguments it cannot bind) it
    calls ``fallback`` with the same arguments.  Made once: ``fn[grid]`` taken once keeps
    reaching the variants added later."""
    module = NativeModule()
    module.constant(table)
    f = module.function("define ptr @naiad_dispatch(ptr %self, ptr %args, i64 %nargsf, ptr %kwnames)")
    writer = _Writer(f, params)
    f("%nargs = and i64 %nargsf, 9223372036854775807")
    writer.bound = f.value(f"alloca [{max(1, len(params))} x ptr]")
    writer.option_names = f.value(f"alloca [{MAX_OPTIONS} x ptr]")
    writer.option_values = f.value(f"alloca [{MAX_OPTIONS} x ptr]")
    writer.option_count = f.value("alloca i64")
    f(f"store i64 0, ptr {writer.option_count}")
    writer.bind(defaults, missing)
    counter = f.value("alloca i64")
    f(f"store i64 0, ptr {counter}")
    f.jump("try")
    f.place("try")
    i = f.load("i64", counter)
    f.unless(f.value(f"icmp slt i64 {i}, {f.load('i64', f'inttoptr (i64 {ctypes.addressof(table.count)} to ptr)')}"),
             "fallback")
    function = f.load("ptr", writer.element(f"inttoptr (i64 {ctypes.addressof(table.addresses)} to ptr)", i))
    result = f.value(f"call ptr {function}(ptr {writer.bound}, ptr {writer.option_names}, "
                     f"ptr {writer.option_values}, i64 {f.load('i64', writer.option_count)}, ptr {writer.grid})")
    f(f"store i64 {f.value(f'add i64 {i}, 1')}, ptr {counter}")
    f.branch(f.same(result, f.object(_MISS)), "try", "tried")
    f.place("tried")
    f.unless(f.value(f"icmp ne ptr {result}, {f.object(_STOP)}"), "fallback")
    f(f"ret ptr {result}")
    f.place("fallback")
    f(f"ret ptr {f.capi('PyObject_Vectorcall', f.object(fallback), '%args', '%nargs', '%kwnames')}")
    module.compile()
    return module.builtin("naiad_dispatch", name)


def variant_function(params: Sequence[str], variant: Variant) -> tuple[NativeModule, int]:
    """The function a `dispatcher` calls for ``variant`` (``result(bound, option names,
    option values, option count, grid)``), and its address: the kernel after launching it,
    NULL with the launch's error set, or its own markers for "another variant" and "the
    Python path".  The module must be kept while the function may run."""
    module = NativeModule()
    f = module.function("define ptr @naiad_variant(ptr %bound, ptr %names, ptr %values, i64 %count, "
                        "ptr %grid)")
    writer = _Writer(f, params)
    writer.bound, writer.option_names, writer.option_values, writer.grid = \
        "%bound", "%names", "%values", "%grid"
    writer.option_count = f.value("alloca i64")
    f(f"store i64 %count, ptr {writer.option_count}")
    writer.slots = f.value(f"alloca [{max(1, len(variant.launch.slots))} x i64]")
    writer.grid_object = f.value("alloca ptr")
    writer.dims = f.value("alloca [3 x i64]")
    writer.variant(variant)
    f(f"ret ptr {f.object(_MISS)}")
    f.place("fallback")
    f(f"ret ptr {f.object(_STOP)}")
    module.compile()
    return module, module.engine.get_function_address("naiad_variant")


class _Writer:
    """Writes a `dispatcher`'s binding and a `variant_function`'s checks and launch; the
    registers and stack slots they share are set by the function being written."""

    def __init__(self, f: IRFunction, params: Sequence[str]):
        self.f, self.params = f, [sys.intern(p) for p in params]
        self.overflow = f.value("alloca i32")

    def element(self, base: str, index: str | int, ty: str = "ptr") -> str:
        return self.f.value(f"getelementptr {ty}, ptr {base}, i64 {index}")

    # -- binding --------------------------------------------------------------------------------
    def bind(self, defaults: dict[int, Any], missing: Any) -> None:
        f, n = self.f, len(self.params)
        f.unless(f.value("icmp sge i64 %nargs, 2"), "fallback")
        self.grid = f.load("ptr", "%args")
        hooks_done = f.load("ptr", self.element("%args", 1))
        f.unless(f.same(hooks_done, f.object(False)), "fallback")
        positional = f.value("sub i64 %nargs, 2")
        f.unless(f.value(f"icmp sle i64 {positional}, {n}"), "fallback")
        for i in range(n):
            given, store, after = f.fresh("given"), f.fresh("store"), f.fresh("after")
            f(f"store ptr null, ptr {self.element(self.bound, i)}")
            f.branch(f.value(f"icmp sgt i64 {positional}, {i}"), given, after)
            f.place(given)
            value = f.load("ptr", self.element("%args", i + 2))
            f.branch(f.same(value, f.object(missing)), after, store)
            f.place(store)
            f(f"store ptr {value}, ptr {self.element(self.bound, i)}")
            f.jump(after)
            f.place(after)
        self.keywords()
        for i in range(n):
            value = f.load("ptr", self.element(self.bound, i))
            absent = f.value(f"icmp eq ptr {value}, null")
            if i in defaults:
                chosen = f.value(f"select i1 {absent}, ptr {f.object(defaults[i])}, ptr {value}")
                f(f"store ptr {chosen}, ptr {self.element(self.bound, i)}")
            else:
                f.unless(f.value(f"xor i1 {absent}, true"), "fallback")

    def keywords(self) -> None:
        """Keyword arguments to their parameters; the others are options, kept in order."""
        f = self.f
        loop, done, next_ = f.fresh("kwloop"), f.fresh("kwdone"), f.fresh("kwnext")
        counter = f.value("alloca i64")
        f(f"store i64 0, ptr {counter}")
        count = f.value("alloca i64")
        f(f"store i64 0, ptr {count}")
        have, read = f.fresh("kw"), f.fresh("kwcount")
        f.branch(f.value("icmp ne ptr %kwnames, null"), read, loop)
        f.place(read)
        f(f"store i64 {f.load('i64', '%kwnames', TUPLE_SIZE)}, ptr {count}")
        f.jump(loop)
        f.place(loop)
        j = f.load("i64", counter)
        f.branch(f.value(f"icmp slt i64 {j}, {f.load('i64', count)}"), have, done)
        f.place(have)
        items = f.value(f"getelementptr i8, ptr %kwnames, i64 {TUPLE_ITEMS}")
        name = f.load("ptr", self.element(items, j))
        value = f.load("ptr", self.element("%args", f.value(f"add i64 %nargs, {j}")))
        targets = [f.fresh("set") for _ in self.params]
        for i, param in enumerate(self.params):         # interned names: one comparison each
            other = f.fresh("other")
            f.branch(f.same(name, f.object(param)), targets[i], other)
            f.place(other)
        for i, param in enumerate(self.params):
            other = f.fresh("other")
            equal = f.value(f"icmp eq i32 {f.capi('PyUnicode_Compare', name, f.object(param))}, 0")
            f.branch(equal, targets[i], other)
            f.place(other)
        index = f.load("i64", self.option_count)
        f.unless(f.value(f"icmp slt i64 {index}, {MAX_OPTIONS}"), "fallback")
        f(f"store ptr {name}, ptr {self.element(self.option_names, index)}")
        f(f"store ptr {value}, ptr {self.element(self.option_values, index)}")
        f(f"store i64 {f.value(f'add i64 {index}, 1')}, ptr {self.option_count}")
        f.jump(next_)
        for i, target in enumerate(targets):
            f.place(target)
            slot = self.element(self.bound, i)
            f.unless(f.value(f"icmp eq ptr {f.load('ptr', slot)}, null"), "fallback")   # doubled
            f(f"store ptr {value}, ptr {slot}")
            f.jump(next_)
        f.place(next_)
        f(f"store i64 {f.value(f'add i64 {j}, 1')}, ptr {counter}")
        f.jump(loop)
        f.place(done)

    # -- one variant ----------------------------------------------------------------------------
    def variant(self, v: Variant) -> None:
        f = self.f
        miss = f.fresh("miss")
        slot_of = {index: k for k, (index, _) in enumerate(v.launch.slots)}
        for guard in v.before:
            self.guard(guard, miss)
        for i, expect in enumerate(v.params):
            value = f.load("ptr", self.element(self.bound, i))
            slot = self.element(self.slots, slot_of[i], "i64") if i in slot_of else None
            _CHECKS[expect[0]](self, value, expect, slot, miss)
        f.unless(f.value(f"icmp eq i64 {f.load('i64', self.option_count)}, {len(v.options)}"), miss)
        for k, (name, expected) in enumerate(v.options):
            given = f.load("ptr", self.element(self.option_names, k))
            other, same = f.fresh("other"), f.fresh("same")
            f.branch(f.same(given, f.object(name)), same, other)
            f.place(other)
            f.unless(f.value(f"icmp eq i32 {f.capi('PyUnicode_Compare', given, f.object(name))}, 0"), miss)
            f.jump(same)
            f.place(same)
            self.value_check(f.load("ptr", self.element(self.option_values, k)), expected, miss)
        for guard in v.guards:
            self.guard(guard, "fallback")
        gx, gy, gz = self.grid_dims(v)
        not_here = f.fresh("nothere")
        code = v.launch.emit(f, self.slots, gx, gy, gz, not_here)
        launched, failed = f.fresh("launched"), f.fresh("failed")
        f.branch(f.value(f"icmp eq i64 {code}, 0"), launched, failed)
        f.place(launched)
        f.capi("Py_IncRef", f.object(v.kernel))
        f(f"ret ptr {f.object(v.kernel)}")
        f.place(failed)
        report = f.object(lambda code, x, y, z, _error=v.launch.error: _error(code, (x, y, z)))
        numbers = [f.capi("PyLong_FromLongLong", r) for r in (code, gx, gy, gz)]
        result = f.capi("PyObject_Vectorcall", report, self._vector(numbers), "4", "null")
        for number in numbers:
            f.decref(number)
        f.propagate(result)
        f.decref(result)
        f.capi("Py_IncRef", f.object(v.kernel))
        f(f"ret ptr {f.object(v.kernel)}")
        f.place(not_here)
        f.jump("fallback")
        f.place(miss)
        f(f"ret ptr {f.object(_MISS)}")

    def _vector(self, items: list[str]) -> str:
        vector = self.f.value(f"alloca [{len(items)} x ptr]")
        for i, item in enumerate(items):
            self.f(f"store ptr {item}, ptr {self.element(vector, i)}")
        return vector

    def value_check(self, obj: str, expected: Any, miss: str) -> None:
        """``obj`` is ``expected``: same exact type and equal for ints, floats and strings,
        the same object otherwise."""
        f = self.f
        if type(expected) not in _BY_VALUE:
            f.unless(f.same(obj, f.object(expected)), miss)
            return
        f.unless(f.is_type(obj, type(expected)), miss)
        equal = f.capi("PyObject_RichCompareBool", obj, f.object(expected), str(_PY_EQ))
        clear = f.fresh("clear")
        go = f.fresh("eq")
        f(f"switch i32 {equal}, label %{miss} [i32 1, label %{go}\n      i32 -1, label %{clear}]")
        f.place(clear)
        f.capi("PyErr_Clear")
        f.jump(miss)
        f.place(go)

    # -- parameter checks (each stores the parameter's slot, when it has one) ------------------
    def check_value(self, obj: str, expect: tuple, slot: str | None, miss: str) -> None:
        self.value_check(obj, expect[1], miss)

    def check_tensor(self, obj: str, expect: tuple, slot: str | None, miss: str) -> None:
        f = self.f
        _, kind, dtype, device, aligned = expect
        f.unless(f.is_type(obj, kind), miss)
        self.attribute_is(obj, "dtype", dtype, miss)
        self.attribute_is(obj, "is_cuda" if device != "cpu" else "is_cpu", True, miss)
        if device != "cpu":
            index = f.call_method(obj, "get_device", miss)
            number = f.capi("PyLong_AsLongLongAndOverflow", index, self.overflow)
            f.decref(index)
            f.unless(f.value(f"icmp eq i64 {number}, {device}"), miss)
        pointer = f.call_method(obj, "data_ptr", miss)
        address = f.capi("PyLong_AsUnsignedLongLong", pointer)
        f.decref(pointer)
        self.aligned(address, aligned, miss)
        f(f"store i64 {address}, ptr {slot}")

    def check_ndarray(self, obj: str, expect: tuple, slot: str | None, miss: str) -> None:
        f = self.f
        _, kind, dtype, aligned, writeable = expect
        f.unless(f.is_type(obj, kind), miss)
        f.unless(f.same(f.load("ptr", obj, _NDARRAY.DESCR), f.object(dtype)), miss)
        flags = f.load("i32", obj, _NDARRAY.FLAGS)
        bit = f.value(f"and i32 {flags}, {_NDARRAY.WRITEABLE}")
        f.unless(f.value(f"icmp {'ne' if writeable else 'eq'} i32 {bit}, 0"), miss)
        address = f.load("i64", obj, _NDARRAY.DATA)
        self.aligned(address, aligned, miss)
        f(f"store i64 {address}, ptr {slot}")

    def check_one(self, obj: str, expect: tuple, slot: str | None, miss: str) -> None:
        number = self.exact_int(obj, miss)
        self.f.unless(self.f.value(f"icmp eq i64 {number}, 1"), miss)
        if slot is not None:
            self.f(f"store i64 1, ptr {slot}")

    def check_int(self, obj: str, expect: tuple, slot: str | None, miss: str) -> None:
        f = self.f
        _, bits, aligned, slot_type = expect
        number = self.exact_int(obj, miss)
        f.unless(f.value(f"icmp ne i64 {number}, 1"), miss)
        low = f.value(f"icmp sge i64 {number}, {_INT32[0]}")
        high = f.value(f"icmp sle i64 {number}, {_INT32[1]}")
        inside = f.value(f"and i1 {low}, {high}")
        f.unless(inside if bits == 32 else f.value(f"xor i1 {inside}, true"), miss)
        remainder = f.value(f"srem i64 {number}, 16")
        f.unless(f.value(f"icmp {'eq' if aligned else 'ne'} i64 {remainder}, 0"), miss)
        if slot_type == "i32":
            number = f.value(f"zext i32 {f.value(f'trunc i64 {number} to i32')} to i64")
        f(f"store i64 {number}, ptr {slot}")

    def check_float(self, obj: str, expect: tuple, slot: str | None, miss: str) -> None:
        f = self.f
        f.unless(f.is_type(obj, float), miss)
        number = f.capi("PyFloat_AsDouble", obj)
        if expect[1] == "fp64":
            bits = f.value(f"bitcast double {number} to i64")
        else:                          # struct.pack("f") refuses a finite value out of range
            single = f.value(f"fptrunc double {number} to float")
            finite = f.value(f"xor i1 {self.infinite(number, 'double')}, true")
            overflow = f.value(f"and i1 {finite}, {self.infinite(single, 'float')}")
            f.unless(f.value(f"xor i1 {overflow}, true"), miss)
            bits = f.value(f"zext i32 {f.value(f'bitcast float {single} to i32')} to i64")
        f(f"store i64 {bits}, ptr {slot}")

    def check_bool(self, obj: str, expect: tuple, slot: str | None, miss: str) -> None:
        f = self.f
        true, false = f.same(obj, f.object(True)), f.same(obj, f.object(False))
        f.unless(f.value(f"or i1 {true}, {false}"), miss)
        f(f"store i64 {f.value(f'zext i1 {true} to i64')}, ptr {slot}")

    def infinite(self, number: str, ty: str) -> str:
        up = self.f.value(f"fcmp oeq {ty} {number}, 0x7FF0000000000000")
        down = self.f.value(f"fcmp oeq {ty} {number}, 0xFFF0000000000000")
        return self.f.value(f"or i1 {up}, {down}")

    def exact_int(self, obj: str, miss: str) -> str:
        f = self.f
        f.unless(f.is_type(obj, int), miss)
        number = f.capi("PyLong_AsLongLongAndOverflow", obj, self.overflow)
        f.unless(f.value(f"icmp eq i32 {f.load('i32', self.overflow)}, 0"), miss)
        return number

    def aligned(self, address: str, aligned: bool, miss: str) -> None:
        low = self.f.value(f"and i64 {address}, 15")
        self.f.unless(self.f.value(f"icmp {'eq' if aligned else 'ne'} i64 {low}, 0"), miss)

    def attribute_is(self, obj: str, name: str, expected: Any, miss: str) -> None:
        f = self.f
        value = f.capi("PyObject_GetAttr", obj, f.object(sys.intern(name)))
        f.checked(value, miss)
        same = f.same(value, f.object(expected))
        f.decref(value)
        f.unless(same, miss)

    # -- guards ---------------------------------------------------------------------------------
    def guard(self, guard: Guard, fail: str) -> None:
        """Follow the guard's path from its root and check the end; to ``fail`` otherwise.
        Attributes and calls give new references, dropped once read; dict items are borrowed."""
        f = self.f
        current, owned, holds = f.object(guard.root), [], f.fresh("holds")
        for n, step in enumerate(guard.path):
            last = n == len(guard.path) - 1
            if step[0] == "item":
                item = f.capi("PyDict_GetItemWithError", current, f.object(step[1]))
                absent, present = f.fresh("absent"), f.fresh("present")
                f.branch(f.value(f"icmp eq ptr {item}, null"), absent, present)
                f.place(absent)
                f.capi("PyErr_Clear")
                self._release(owned)
                reads_none = guard.check == "is" and guard.expected is None
                f.jump(holds if last and (guard.check == "missing" or reads_none) else fail)
                f.place(present)
                if last and guard.check == "missing":
                    self._release(owned)
                    f.jump(fail)
                    f.place(holds)
                    return
                current = item
            else:                  # ("attr", name) or ("call",): a new reference
                current = (f.capi("PyObject_GetAttr", current, f.object(sys.intern(step[1])))
                           if step[0] == "attr" else
                           f.capi("PyObject_Vectorcall", current, "null", "0", "null"))
                f.checked(current, fail, lambda held=tuple(owned): self._release(held))
                owned.append(current)
        if guard.check == "empty":
            ok = f.value(f"icmp eq i64 {f.capi('PyObject_Size', current)}, 0")
        elif guard.check == "eq" and type(guard.expected) in _BY_VALUE + (bytes,):
            same_type = f.is_type(current, type(guard.expected))
            equal = f.capi("PyObject_RichCompareBool", current, f.object(guard.expected), str(_PY_EQ))
            ok = f.value(f"and i1 {same_type}, {f.value(f'icmp eq i32 {equal}, 1')}")
        else:
            ok = f.same(current, f.object(guard.expected))
        f.capi("PyErr_Clear")                     # a failed len() or == leaves an error set
        self._release(owned)
        f.branch(ok, holds, fail)
        f.place(holds)

    def _release(self, owned: Sequence[str]) -> None:
        for obj in owned:
            self.f.decref(obj)

    # -- the grid -------------------------------------------------------------------------------
    def grid_dims(self, v: Variant) -> tuple[str, str, str]:
        """The grid as three i64 registers: a tuple of 1 to 3 ints, or what a grid callable
        returns for the bound arguments and options (its exception propagates).  Anything
        else, a zero or a dimension beyond the driver's limits goes to the Python path, which
        says what is wrong."""
        f = self.f
        call, parse = f.fresh("gridcall"), f.fresh("gridparse")
        owned = f.value("alloca i1")
        f(f"store i1 false, ptr {owned}")
        f(f"store ptr {self.grid}, ptr {self.grid_object}")
        f.branch(f.is_type(self.grid, tuple), parse, call)
        f.place(call)
        f.unless(f.value(f"icmp ne i32 {f.capi('PyCallable_Check', self.grid)}, 0"), "fallback")
        mapping = f.capi("PyDict_New")
        f.checked(mapping, "fallback")
        entries = [(f.object(p), f.load("ptr", self.element(self.bound, i)))
                   for i, p in enumerate(self.params)]
        entries += [(f.load("ptr", self.element(self.option_names, k)),
                     f.load("ptr", self.element(self.option_values, k))) for k in range(len(v.options))]
        for key, value in entries:
            failed, stored = f.fresh("dictfail"), f.fresh("stored")
            status = f.capi("PyDict_SetItem", mapping, key, value)
            f.branch(f.value(f"icmp eq i32 {status}, 0"), stored, failed)
            f.place(failed)
            f.decref(mapping)
            f.capi("PyErr_Clear")
            f.jump("fallback")
            f.place(stored)
        result = f.capi("PyObject_Vectorcall", self.grid, self._vector([mapping]), "1", "null")
        f.decref(mapping)
        f.propagate(result)
        f(f"store ptr {result}, ptr {self.grid_object}")
        f(f"store i1 true, ptr {owned}")
        f.unless(f.is_type(result, tuple), (bad := f.fresh("badgrid")))
        f.jump(parse)
        f.place(parse)
        grid = f.load("ptr", self.grid_object)
        size = f.load("i64", grid, TUPLE_SIZE)
        low = f.value(f"icmp sge i64 {size}, 1")
        f.unless(f.value(f"and i1 {low}, {f.value(f'icmp sle i64 {size}, 3')}"), bad)
        limits = list(v.max_grid)
        for axis in range(3):
            f(f"store i64 1, ptr {self.element(self.dims, axis, 'i64')}")
        for axis in range(3):
            present, after = f.fresh("axis"), f.fresh("axisdone")
            f.branch(f.value(f"icmp sgt i64 {size}, {axis}"), present, after)
            f.place(present)
            item = f.load("ptr", grid, TUPLE_ITEMS + 8 * axis)
            f.unless(f.is_type(item, int), bad)
            number = f.capi("PyLong_AsLongLongAndOverflow", item, self.overflow)
            f.unless(f.value(f"icmp eq i32 {f.load('i32', self.overflow)}, 0"), bad)
            f.unless(f.value(f"icmp sge i64 {number}, 1"), bad)
            f.unless(f.value(f"icmp sle i64 {number}, {limits[axis]}"), bad)
            f(f"store i64 {number}, ptr {self.element(self.dims, axis, 'i64')}")
            f.jump(after)
            f.place(after)
        dims = [f.load("i64", self.element(self.dims, axis, "i64")) for axis in range(3)]
        if v.max_programs is not None:
            wide = [f.value(f"zext i64 {d} to i128") for d in dims]
            total = f.value(f"mul i128 {f.value(f'mul i128 {wide[0]}, {wide[1]}')}, {wide[2]}")
            f.unless(f.value(f"icmp ule i128 {total}, {v.max_programs}"), bad)
        self._drop_grid(owned)
        done = f.fresh("griddone")
        f.jump(done)
        f.place(bad)
        self._drop_grid(owned)
        f.jump("fallback")
        f.place(done)
        return dims[0], dims[1], dims[2]

    def _drop_grid(self, owned: str) -> None:
        f = self.f
        drop, kept = f.fresh("drop"), f.fresh("kept")
        f.branch(f.load("i1", owned), drop, kept)
        f.place(drop)
        f.decref(f.load("ptr", self.grid_object))
        f.jump(kept)
        f.place(kept)


_CHECKS: dict[str, Callable[..., None]] = {
    "value": _Writer.check_value, "tensor": _Writer.check_tensor, "ndarray": _Writer.check_ndarray,
    "one": _Writer.check_one, "int": _Writer.check_int, "float": _Writer.check_float,
    "bool": _Writer.check_bool,
}

