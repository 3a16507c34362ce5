"""From a ``@jit`` function and its specialization to a verified TTIR module.

`make_ttir` takes Triton's description of a specialization (``signature`` of type strings,
``constexprs`` values, ``attrs`` such as ``tt.divisibility``), generates the kernel and every
device function it calls, and verifies the module.  `specialize` computes that description
from launch arguments, as the JIT does.
"""

from __future__ import annotations

from typing import Any

from xdsl.utils.exceptions import DiagnosticException, VerifyException

from naiad import knobs
from naiad.compiler.builder import IRBuilder
from naiad.compiler.code_generator import CodeGenerator, ModuleContext
from naiad.compiler.errors import CompilationError
from naiad.language import dtypes
from naiad.language.semantic import Semantic
from naiad.runtime.jit import JITFunction

_DIVISIBILITY = [("tt.divisibility", 16)]


def _by_index(fn: JITFunction, mapping: dict | None) -> dict[int, Any]:
    """Accept keys as parameter names, indices, or Triton's ``(index,)`` paths."""
    result = {}
    for key, value in (mapping or {}).items():
        if isinstance(key, tuple):
            key = key[0]
        if isinstance(key, str):
            key = fn.arg_names.index(key)
        result[int(key)] = value
    return result


def make_ttir(fn: JITFunction, signature: dict, constexprs: dict | None = None,
              attrs: dict | None = None, options: Any = None,
              module_map: dict[str, Any] | None = None) -> Any:
    """Generate and verify the TTIR module of one specialization of ``fn``."""
    types = _by_index(fn, signature)
    constants = _by_index(fn, constexprs)
    for index, ty in types.items():
        if ty == "constexpr" and index not in constants:
            raise CompilationError(fn.__name__, fn.filename, fn.src, None,
                                   f"parameter {fn.arg_names[index]!r} is constexpr but no value was given")
    arg_types = [None if (i in constants) else dtypes.str_to_ty(types[i])
                 for i in range(len(fn.params))]
    builder = IRBuilder()
    module = ModuleContext(None, module_map or {})
    module.semantic = Semantic(builder, options, call_jit=module.call_from_builtin)
    generator = CodeGenerator(fn, arg_types, constants, _by_index(fn, attrs), module,
                              is_kernel=True, name=fn.__name__)
    try:
        generator.generate()
    except CompilationError as e:
        if knobs.compilation.frontend_debug:
            raise
        raise e.with_traceback(None) from None   # the message shows the kernel's line
    try:
        builder.module.verify()
    except (VerifyException, DiagnosticException) as e:
        raise CompilationError(fn.__name__, fn.filename, fn.src, None,
                               f"internal error: the generated TTIR does not verify: {e}") from e
    return builder.module


def specialize(fn: JITFunction, *args: Any, **kwargs: Any) -> tuple[dict, dict, dict, dict]:
    """``(signature, constexprs, attrs, options)`` for launching ``fn`` with these arguments."""
    bound, options = fn.bind(args, kwargs)
    signature, constexprs, attrs = {}, {}, {}
    for p, (ty, key) in zip(fn.params, fn.specialization(bound)):
        signature[p.name] = "constexpr" if ty == "constexpr" else ty
        if ty == "constexpr":
            constexprs[p.name] = key
        elif key == "D":
            attrs[p.name] = list(_DIVISIBILITY)
    return signature, constexprs, attrs, options


def ttir_for(fn: JITFunction, *args: Any, options: Any = None, **kwargs: Any) -> Any:
    """The TTIR module that launching ``fn(*args, **kwargs)`` would compile."""
    signature, constexprs, attrs, _ = specialize(fn, *args, **kwargs)
    return make_ttir(fn, signature, constexprs, attrs, options)
