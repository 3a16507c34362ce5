"""From a ``@jit`` function and its specialization to a verified TTIR module.

`make_ttir` takes Triton's description of a specialization (``signature`` of type strings,
``constexprs`` values, ``attrs`` such as ``tt.divisibility``), generates the kernel and every
device function it calls, and verifies the module.  `specialize` computes that description
from launch arguments, as the JIT does.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import Any, Callable

from xdsl.utils.exceptions import DiagnosticException, VerifyException

from naiad import knobs
from naiad.ir.builder import IRBuilder
from naiad.compiler.code_generator import ArgSlot, CodeGenerator, ModuleContext
from naiad.compiler.errors import CompilationError
from naiad.errors import NaiadError
from naiad.language import dtypes
from naiad.language.core import constexpr
from naiad.language.semantic import Semantic
from naiad.language.tensor_descriptor import is_signature, tensor_descriptor, tensor_descriptor_type
from naiad.compiler.signatures import describe
from naiad.language.kernel_function import KernelFunction



def _by_index(fn: KernelFunction, mapping: dict | None) -> dict[Any, Any]:
    """Accept keys as parameter names, indices, or Triton's paths: ``(index,)`` for a
    parameter, ``(index, i, ...)`` for an element of a tuple parameter (kept as a path)."""
    result = {}
    for key, value in (mapping or {}).items():
        path = key if isinstance(key, tuple) else (key,)
        if isinstance(path[0], str) and path[0] not in fn.arg_names:
            raise NaiadError(f"{fn.__name__}: {path[0]!r} is not one of its parameters "
                             f"({', '.join(fn.arg_names)}) -- fix: name the constexprs and "
                             f"attributes given to ASTSource after the kernel's parameters")
        head = fn.arg_names.index(path[0]) if isinstance(path[0], str) else int(path[0])
        result[head if len(path) == 1 else (head, *path[1:])] = value
    return result


def _user_facing(entry: Callable) -> Callable:
    """Re-raise a CompilationError from the API entry point itself: the traceback then shows
    the user's call and not the code generator's recursion (the message already shows the
    kernel's line).  ``NAIAD_FRONTEND_DEBUG=1`` keeps every frame."""
    @functools.wraps(entry)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return entry(*args, **kwargs)
        except CompilationError as e:
            if knobs.compilation.frontend_debug:
                raise
            raise e.with_traceback(None) from e.__cause__
    return wrapper


@_user_facing
def make_ttir(fn: KernelFunction, signature: dict, constexprs: dict | None = None,
              attrs: dict | None = None, options: Any = None,
              module_map: dict[str, Any] | None = None, codegen_fns: dict | None = None) -> Any:
    """Generate and verify the TTIR module of one specialization of ``fn``; ``codegen_fns``
    are the backend's hooks for the language (`BaseBackend.get_codegen_implementation`)."""
    constants = _by_index(fn, constexprs)
    arg_types = _arg_types(fn, _by_index(fn, signature), constants)
    builder = IRBuilder()
    module = ModuleContext(None, module_map or {})
    module.semantic = Semantic(builder, _options_for(fn, options), call_jit=module.call_from_builtin,
                               codegen_fns=codegen_fns)
    generator = CodeGenerator(fn, arg_types, constants, _by_index(fn, attrs), module,
                              is_kernel=True, name=fn.__name__)
    generator.generate()
    try:
        builder.module.verify()
    except (VerifyException, DiagnosticException) as e:
        raise CompilationError(fn.__name__, fn.filename, fn.src, None,
                               f"internal error: the generated TTIR does not verify: {e}") from e
    return builder.module


def _arg_types(fn: KernelFunction, signature: dict[int, Any], constants: dict[int, Any]) -> list:
    """The dtype of each runtime parameter (None for constexprs), from signature strings."""
    def fail(name: str, problem: str) -> CompilationError:
        return CompilationError(fn.__name__, fn.filename, fn.src, None,
                                f"parameter {name!r} {problem}")

    result = []
    for p in fn.params:
        text = signature.get(p.num)
        if p.num in constants:
            result.append(None)
        elif text is None or text == "constexpr":
            raise fail(p.name, "has no type in the signature and no constexpr value -- fix: "
                               "give it a type string such as 'i32' or '*fp32', or a value")
        else:
            try:
                result.append(_template(text, (p.num,), constants))
            except ValueError as e:
                raise fail(p.name, f"has the type {text!r}, which is not a kernel type: {e}") from None
            except KeyError as e:
                raise fail(p.name, f"holds a constexpr at {e.args[0]} but no value was given for "
                                   f"it -- fix: give it in constexprs under that path") from None
    return result


def _template(text: Any, path: tuple, constants: dict) -> Any:
    """A parameter's dtype, or for a tuple signature the tuple (or namedtuple) of its elements:
    an `ArgSlot` per runtime element, the value of each constexpr element (``constants[path]``);
    for a tensor descriptor (``"tensordesc<fp32[16, 32]>"``) the descriptor of an `ArgSlot`
    per part (base pointer, shape, strides)."""
    if is_signature(text):
        ty = tensor_descriptor_type.from_signature(text)
        return tensor_descriptor.from_parts(ty, [ArgSlot(t) for t in ty.part_types()])
    if not isinstance(text, tuple):
        return dtypes.str_to_ty(text)
    items = [constexpr(constants[(*path, i)]) if t == "constexpr" else
             _template(t, (*path, i), constants)
             if isinstance(t, tuple) or is_signature(t) else
             ArgSlot(dtypes.str_to_ty(t)) for i, t in enumerate(text)]
    return type(text)(*items) if hasattr(text, "_fields") else tuple(items)


def _options_for(fn: KernelFunction, options: Any) -> Any:
    """``@jit(debug=True)`` turns device assertions on even when the options leave it off."""
    if not fn.debug or getattr(options, "debug", False):
        return options
    if dataclasses.is_dataclass(options):
        return dataclasses.replace(options, debug=True)
    return types.SimpleNamespace(**(vars(options) if options is not None else {}), debug=True)


def specialize(fn: "JITFunction", *args: Any, **kwargs: Any) -> tuple[dict, dict, dict, dict]:
    """``(signature, constexprs, attrs, options)`` for launching ``fn`` (a
    `naiad.runtime.jit.JITFunction`) with these arguments."""
    bound, options = fn.bind(args, kwargs)
    return (*describe(fn, fn.specialization(bound)), options)


@_user_facing
def ttir_for(fn: "JITFunction", *args: Any, options: Any = None, **kwargs: Any) -> Any:
    """The TTIR module that launching ``fn(*args, **kwargs)`` would compile."""
    signature, constexprs, attrs, _ = specialize(fn, *args, **kwargs)
    return make_ttir(fn, signature, constexprs, attrs, options)
