"""Python AST -> TTIR.

One `CodeGenerator` walks one function's AST for one specialization.  Values in its scope are:

- `naiad.language.core.tensor`: a runtime value (scalar or block) backed by an SSA value;
- `naiad.language.core.aggregate_value`: a runtime value made of several tensors (a tensor
  descriptor), passed through calls, returns and control flow as those tensors;
- `naiad.language.core.constexpr`: a compile-time value;
- any other Python object reachable from the kernel (modules, dtypes, ``@jit`` functions,
  builtins, tuples of values).

Control flow with a compile-time condition is resolved here (only one branch is generated);
with a runtime condition it becomes ``scf.if`` / ``scf.for`` / ``scf.while`` whose results carry
the variables the body assigns.  A runtime ``if`` holding a ``return`` ends the function in
both branches: each branch is followed by the rest of the function (see `returning_if`), so
every function still has one ``tt.return`` and only structured control flow.  Calls to other
``@jit`` functions become ``tt.call`` of a function generated for that specialization (tuples
holding tensors are passed flattened, and returned values come back with their compile-time
parts); the shared inliner pass inlines them later unless they are ``noinline``.  Loops over
``tl.static_range`` or a tuple are unrolled here.

Every user error is raised as `CompilationError` with the position of the innermost AST node
being generated in user code: an error inside Naiad's library (``tl.sum`` is ``@jit`` code) is
re-reported at the user's call, one inside a user's helper keeps its line and lists the calls.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import operator
import os
import warnings
from typing import Any, Iterator

from naiad import knobs
from naiad.errors import NaiadError
from naiad.compiler.errors import (CompilationError, CompileTimeAssertionFailure,
                                   UnsupportedLanguageConstruct)
from naiad.language import core, standard
from naiad.language.core import constexpr, tensor
from naiad.language.semantic import type_name
from naiad.language.kernel_function import KernelFunction

_BINARY_METHODS = {
    ast.Add: "__add__", ast.Sub: "__sub__", ast.Mult: "__mul__", ast.Div: "__truediv__",
    ast.FloorDiv: "__floordiv__", ast.Mod: "__mod__", ast.Pow: "__pow__",
    ast.LShift: "__lshift__", ast.RShift: "__rshift__", ast.BitAnd: "__and__",
    ast.BitOr: "__or__", ast.BitXor: "__xor__", ast.MatMult: "__matmul__",
}
_COMPARE_METHODS = {
    ast.Eq: "__eq__", ast.NotEq: "__ne__", ast.Lt: "__lt__", ast.LtE: "__le__",
    ast.Gt: "__gt__", ast.GtE: "__ge__",
}
_REFLECTED = {"__add__": "__radd__", "__sub__": "__rsub__", "__mul__": "__rmul__",
              "__truediv__": "__rtruediv__", "__floordiv__": "__rfloordiv__",
              "__mod__": "__rmod__", "__pow__": "__rpow__", "__lshift__": "__rlshift__",
              "__rshift__": "__rrshift__", "__and__": "__rand__", "__or__": "__ror__",
              "__xor__": "__rxor__", "__matmul__": "__rmatmul__", "__eq__": "__eq__",
              "__ne__": "__ne__", "__lt__": "__gt__", "__le__": "__ge__", "__gt__": "__lt__",
              "__ge__": "__le__"}
_UNARY_METHODS = {ast.USub: "__neg__", ast.UAdd: "__pos__", ast.Invert: "__invert__",
                  ast.Not: "__not__"}

#: Python builtins a kernel may call; each is evaluated at compile time on constexprs.
_PYTHON_BUILTINS = {len, isinstance, getattr, hasattr, int, float, bool, str, abs, min, max,
                    zip, enumerate, tuple, list, repr, type, print, range}

#: Python syntax kernels cannot use: (what it is, what to write instead).
_UNSUPPORTED = {
    ast.Lambda: ("lambda expressions", "define a @naiad.jit function at module level"),
    ast.Try: ("try/except", "check conditions explicitly; kernels cannot catch exceptions"),
    ast.With: ("'with' blocks", "write the statements without the 'with'"),
    ast.ListComp: ("list comprehensions", "build the values with tl.static_range or a tuple"),
    ast.SetComp: ("set comprehensions", "build the values with tl.static_range or a tuple"),
    ast.DictComp: ("dict comprehensions", "pass the values as separate arguments"),
    ast.GeneratorExp: ("generator expressions", "use a for loop over tl.static_range"),
    ast.Break: ("'break'", "use a while loop whose condition becomes false instead"),
    ast.Continue: ("'continue'", "put the rest of the loop body under an 'if'"),
    ast.Global: ("'global'", "pass the value as an argument, or read a tl.constexpr global"),
    ast.Nonlocal: ("'nonlocal'", "pass the value as an argument"),
    ast.ClassDef: ("class definitions", "define the class outside the kernel"),
    ast.Delete: ("'del'", "just stop using the variable"),
    ast.Raise: ("'raise'", "use tl.static_assert or tl.device_assert"),
    ast.Yield: ("'yield'", "return the values instead"),
    ast.YieldFrom: ("'yield from'", "return the values instead"),
    ast.AsyncFunctionDef: ("async functions", "use a plain @naiad.jit function"),
    ast.Await: ("'await'", "kernels are not asynchronous; remove it"),
    ast.Dict: ("dict literals", "use a tuple, or separate variables"),
    ast.Set: ("set literals", "use a tuple"),
    ast.Import: ("imports", "import at module level, outside the kernel"),
    ast.ImportFrom: ("imports", "import at module level, outside the kernel"),
    ast.NamedExpr: ("':=' expressions", "assign the value in a statement of its own first"),
}

#: As in Triton, a function may end inside a runtime ``if`` but not inside a runtime loop.
_RETURN_IN_LOOP = ("'return' inside a runtime for/while loop is not supported -- fix: assign "
                   "the result to a variable, end the loop (e.g. through a while condition), "
                   "and return after it")


class _ReturnSignal(Exception):
    """Raised by ``return``: stop generating; ``value`` is what the function returns.

    It is caught where the function (or a branch of a `CodeGenerator.returning_if`) ends.
    """

    def __init__(self, value: Any):
        super().__init__()
        self.value = value


def _unwrap(value: Any) -> Any:
    return value.value if isinstance(value, constexpr) else value


def _is_runtime(value: Any) -> bool:
    return isinstance(value, tensor)


def _holds_runtime(value: Any) -> bool:
    """A tensor, or an aggregate of tensors (a tensor descriptor): a value that control flow
    must carry."""
    return isinstance(value, (tensor, core.aggregate_value))


class CodeGenerator(ast.NodeVisitor):
    """Generates one ``tt.func`` for one specialization of one ``@jit`` function."""

    def __init__(self, fn: KernelFunction, arg_types: list[Any], constants: dict[int, Any],
                 attrs: dict[Any, list], module: "ModuleContext", *, is_kernel: bool,
                 name: str):
        self.fn = fn
        self.arg_types = arg_types
        self.constants = constants
        self.attrs = attrs
        self.module = module
        self.semantic = module.semantic
        self.builder = module.semantic.builder
        self.is_kernel = is_kernel
        self.name = name
        self.lscope: dict[str, Any] = {}
        # Names assigned only inside a runtime if branch or loop body, which therefore do not
        # exist after it: name -> (where, node), to explain a later "not defined".
        self.scoped_out: dict[str, tuple[str, ast.AST]] = {}
        # Names declared without a value (``d0: tl.constexpr``): their next assignment keeps
        # the value a compile-time one.
        self.pending_annotations: dict[str, Any] = {}
        # What is left to generate after the statement being generated, innermost last: one
        # callable per enclosing statement list and unrolled loop (see `returning_if`).
        self.continuation: list[Any] = []
        self.loop_depth = 0         # runtime for/while bodies around the insertion point
        #: The returned value with an `ArgSlot` for each ``tt.return`` operand (callers rebuild
        #: the value from the call's results with `_fill`).
        self.return_template: Any = None
        self.func_op: Any = None
        self._node: ast.AST | None = None

    # -- errors ---------------------------------------------------------------------------
    def error(self, message: str, node: ast.AST | None = None,
              cls: type[CompilationError] = CompilationError) -> CompilationError:
        kernel = self.module.generators[0].fn if self.module.generators else self.fn
        return cls(kernel.__name__, self.fn.filename, self.fn.src, node or self._node, message,
                   line_offset=self.fn.def_line - 1, function=self.fn.__name__)

    def line(self, node: ast.AST) -> int:
        """The line of ``node`` in the file (AST lines count from the ``def``)."""
        return node.lineno + self.fn.def_line - 1

    def callee_error(self, error: CompilationError, callee: KernelFunction,
                     node: ast.AST) -> CompilationError:
        """``error`` came out of the call of ``callee`` at ``node``: make it point at user code.

        Inside Naiad's library the error travels on unchanged up to the user's call.  There,
        an error located in the library is reported at the user's call instead; one located
        in user code (a helper, a combine function) keeps its line and records this call.
        """
        if _is_library(self.fn):
            return error
        if _is_library_file(error.filename):
            return self.error(f"{error.message}\n(raised inside {_library_name(callee)}, which "
                              f"was called here)", node, type(error))
        error.called_from(self.fn.__name__, self.fn.filename, self.line(node),
                          is_kernel=self.is_kernel)
        return error

    # -- entry point ------------------------------------------------------------------------
    def generate(self) -> Any:
        tree = self.fn.parse()
        self.module.generators.append(self)
        try:
            with core.semantic_scope(self.semantic):
                self.visit(tree.body[0])
        finally:
            self.module.generators.pop()
        return self.func_op

    def visit(self, node: ast.AST) -> Any:
        if type(node) in _UNSUPPORTED:
            what, fix = _UNSUPPORTED[type(node)]
            raise self.error(f"{what} cannot be used inside kernels -- fix: {fix}", node,
                             UnsupportedLanguageConstruct)
        outer = self._node
        self._node = node
        if hasattr(node, "lineno"):
            self.builder.set_loc(self.fn.filename, self.line(node), node.col_offset + 1)
        try:
            return super().visit(node)
        except (CompilationError, _ReturnSignal):
            raise
        except core.StaticAssertionError as e:
            raise self.error(str(e), node, CompileTimeAssertionFailure) from None
        except RecursionError:
            raise self.error(f"calls of @jit functions nest {len(self.module.generators)} deep "
                             f"here, past Python's recursion limit -- fix: let the recursion end "
                             f"sooner, or write a loop", node) from None
        except Exception as e:
            if knobs.compilation.frontend_debug:
                raise
            # The language layer's exception stays reachable as the cause (Triton's tests read
            # it); without its traceback it prints as one line.
            raise self.error(_describe(e), node) from e.with_traceback(None)
        finally:
            self._node = outer

    def generic_visit(self, node: ast.AST) -> Any:
        raise self.error(f"unsupported Python syntax: {type(node).__name__} -- fix: kernels accept "
                         f"a subset of Python (see the Triton language reference)", node,
                         UnsupportedLanguageConstruct)

    # -- scopes ---------------------------------------------------------------------------------
    def lookup(self, name: str, node: ast.AST) -> Any:
        if name in self.lscope:
            return self.lscope[name]
        if name in self.fn.__globals__:
            return self.global_value(name, self.fn.__globals__[name], node)
        if hasattr(builtins, name):
            value = getattr(builtins, name)
            if value in _PYTHON_BUILTINS:
                return value
            raise self.error(f"the Python builtin {name!r} cannot be used inside a kernel", node)
        if name in self.scoped_out:
            where, block = self.scoped_out[name]
            raise self.error(f"name {name!r} is not defined here: it is assigned only {where} at "
                             f"line {self.line(block)}, so it does not exist after it -- fix: "
                             f"assign it before the {'if' if 'if' in where else 'loop'} (and in "
                             f"every branch)", node)
        raise self.error(f"name {name!r} is not defined -- fix: define it before use, or pass it "
                         f"as an argument (a global must be a tl.constexpr)", node)

    def global_value(self, name: str, value: Any, node: ast.AST) -> Any:
        value = self.module.map_module(value)
        if isinstance(value, (constexpr, KernelFunction, core.dtype)) or callable(value) \
                or _is_module(value) or value is None:
            return value
        if isinstance(value, tuple) and all(isinstance(v, (constexpr, int, float, bool)) for v in value):
            return value
        raise self.error(
            f"global variable {name!r} holds a {type(value).__name__}; kernels can only read globals "
            f"declared as constexpr -- fix: write `{name} = tl.constexpr({value!r})` at module level, "
            f"or pass it as an argument", node)

    # -- function -------------------------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if self.func_op is not None:
            raise self.error("nested function definitions are not supported inside kernels -- fix: "
                             "define it at module level with @naiad.jit", node,
                             UnsupportedLanguageConstruct)
        params = self.fn.params
        templates = {p.num: _as_template(self.arg_types[p.num]) for p in params
                     if p.num not in self.constants}
        slots = [slot for num, template in templates.items() for slot in _slots(template, (num,))]
        runtime_types = [ty for _, ty in slots]
        runtime_attrs = [self.attrs.get(path[0] if len(path) == 1 else path, []) for path, _ in slots]
        self.func_op, block = self.builder.create_function(
            self.name, [self.semantic.ir_type(t) for t in runtime_types], runtime_attrs,
            public=self.is_kernel, noinline=self.fn.noinline)
        args = iter(block.args)
        for p in params:
            if p.num in self.constants:
                self.lscope[p.name] = constexpr(self.constants[p.num])
            else:
                self.lscope[p.name] = _fill(templates[p.num], args)
        with self.builder.at_end(block):
            self.emit_return(self.run_to_return(node.body))

    def visit_body(self, statements: list[ast.stmt]) -> None:
        """Generate statements in order; a ``return`` ends generation (as in Triton, code after
        it is never compiled).  While a statement is generated, what follows it is on
        `continuation`."""
        for i, stmt in enumerate(statements):
            self.continuation.append(functools.partial(self.visit_body, statements[i + 1:]))
            try:
                self.visit(stmt)
            finally:
                self.continuation.pop()

    def run_to_return(self, statements: list[ast.stmt]) -> Any:
        """Generate ``statements`` and, when they fall through, the rest of the function (the
        continuation); the value the function returns on this path (None when it falls off
        the end)."""
        try:
            self.visit_body(statements)
            frames = self.continuation
            try:
                for depth in reversed(range(len(frames))):
                    self.continuation = frames[:depth]
                    frames[depth]()
            finally:
                self.continuation = frames
        except _ReturnSignal as signal:
            return signal.value
        return None

    def visit_Return(self, node: ast.Return) -> None:
        if self.loop_depth:
            raise self.error(_RETURN_IN_LOOP, node, UnsupportedLanguageConstruct)
        value = None if node.value is None else self.visit(node.value)
        if self.is_kernel and _unwrap(value) is not None:
            raise self.error("a kernel cannot return a value -- fix: store results through a "
                             "pointer argument", node)
        raise _ReturnSignal(value)

    def emit_return(self, value: Any) -> None:
        """End the function with ``tt.return`` of the tensors in ``value``; compile-time parts
        (numbers, None, dtypes, the shape of a tuple) stay in `return_template`, as in Triton."""
        self.return_template, tensors = _template(value)
        self.builder.ret([t.handle for t in tensors])

    def materialize(self, value: Any, node: ast.AST) -> tensor:
        if isinstance(value, tensor):
            return value
        try:
            return self.semantic.to_tensor(_unwrap(value))
        except TypeError:
            raise self.error(f"cannot turn {value!r} into a runtime value", node) from None

    # -- statements ---------------------------------------------------------------------------
    def visit_Expr(self, node: ast.Expr) -> None:
        self.visit(node.value)

    def visit_Pass(self, node: ast.Pass) -> None:
        pass

    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.visit(node.value)
        for target in node.targets:
            self.assign(target, value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        annotation = self.visit(node.annotation)
        if node.value is None:        # `d0: tl.constexpr`, then `d0, d1 = shape`
            if not isinstance(node.target, ast.Name):
                raise self.error(f"cannot declare {ast.unparse(node.target)} -- fix: declare a "
                                 f"plain name", node)
            self.pending_annotations[node.target.id] = annotation
            return
        value = self.visit(node.value)
        if annotation is constexpr:
            if isinstance(value, tensor):
                raise self.error(f"{ast.unparse(node.target)} is declared tl.constexpr but its "
                                 f"value is only known at run time", node)
            self.lscope[node.target.id] = constexpr(_unwrap(value))
            return
        self.assign(node.target, value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        current = self.visit(node.target if not isinstance(node.target, ast.Name)
                             else ast.copy_location(ast.Name(node.target.id, ast.Load()), node))
        value = self.binary(_BINARY_METHODS[type(node.op)], current, self.visit(node.value), node)
        self.assign(node.target, value)

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name) and \
                self.pending_annotations.pop(target.id, None) is constexpr:
            if _is_runtime(value):
                raise self.error(f"{target.id} is declared tl.constexpr but its value is only "
                                 f"known at run time", target)
            self.lscope[target.id] = value if isinstance(value, constexpr) else constexpr(value)
            return
        if isinstance(target, ast.Name):
            value = _unwrap(value)
            if value is not None and isinstance(value, (int, float, bool)) and \
                    not isinstance(value, core.dtype):
                value = self.semantic.to_tensor(value)
            self.lscope[target.id] = value
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            values = _unwrap(value)
            if not isinstance(values, (tuple, list)) or len(values) != len(target.elts):
                raise self.error(f"cannot unpack {_describe_value(value)} into "
                                 f"{len(target.elts)} names", target)
            for t, v in zip(target.elts, values):
                self.assign(t, v)
            return
        raise self.error(f"cannot assign to {ast.unparse(target)} -- fix: assign to a plain name "
                         f"(tensors are immutable; use tl.where to change elements)", target)

    def bind(self, target: ast.expr, value: Any) -> None:
        """Bind the variable(s) of an unrolled loop; compile-time values stay compile-time."""
        if isinstance(target, ast.Name):
            self.lscope[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(_unwrap(value), (tuple, list)) \
                and len(_unwrap(value)) == len(target.elts):
            for t, v in zip(target.elts, _unwrap(value)):
                self.bind(t, v)
        else:
            raise self.error(f"cannot unpack {_describe_value(value)} into "
                             f"{ast.unparse(target)}", target)

    def visit_Assert(self, node: ast.Assert) -> None:
        message = "" if node.msg is None else _unwrap(self.visit(node.msg))
        core.device_assert(self.visit(node.test), str(message))

    # -- if -------------------------------------------------------------------------------------
    def visit_If(self, node: ast.If) -> None:
        cond = self.visit(node.test)
        if not _is_runtime(cond):
            branch = node.body if _unwrap(cond) else node.orelse
            self.visit_body(branch)
            return
        cond = self.condition(cond, node)
        if any(isinstance(n, ast.Return) for n in ast.walk(node)):
            self.returning_if(cond, node)
        else:
            self.runtime_if(cond, node)

    def condition(self, cond: tensor, node: ast.AST) -> tensor:
        """A runtime if/while condition as a scalar i1.  A one-element block is first turned
        into its element, with a warning, as Triton does."""
        if cond.type.is_block() and cond.numel == 1:
            test = ast.unparse(node.test)
            warnings.warn_explicit(f"the condition `{test}` is a one-element block, not a "
                                   f"scalar -- fix: write `({test}).item()`", UserWarning,
                                   self.fn.filename, self.line(node))
            cond = self.call(standard.item, [cond], {}, node)
        return self.semantic.to_condition(cond)

    def returning_if(self, cond: tensor, node: ast.If) -> None:
        """A runtime ``if`` that holds a ``return``: the function ends in one of its branches.

        Each branch is generated followed by the rest of the function (the continuation), so
        both end with the value the function returns on that path; the ``scf.if`` yields those
        values and the function returns its results.  Code after the ``if`` is thus generated
        once per branch that reaches it.  Inside a runtime loop this is an error, as in Triton.
        """
        if self.loop_depth:
            raise self.error(_RETURN_IN_LOOP, node, UnsupportedLanguageConstruct)
        before = dict(self.lscope)
        blocks, returned = [], []
        for body in (node.body, node.orelse):
            self.lscope = dict(before)
            with self.builder.detached_block() as block:
                returned.append(self.run_to_return(body))
            blocks.append(block)
        self.lscope = before
        template, pairs = self.merge_returns(*returned, blocks, node)
        results = self.builder.create_if(
            cond.handle, [self.semantic.ir_type(a.type) for a, _ in pairs],
            blocks[0], [a.handle for a, _ in pairs], blocks[1], [b.handle for _, b in pairs])
        raise _ReturnSignal(_fill(template, iter(results)))

    def merge_returns(self, a: Any, b: Any, blocks: list, node: ast.AST
                      ) -> tuple[Any, list[tuple[tensor, tensor]]]:
        """The template of what two branches return, and the (then, else) tensor pairs the
        ``scf.if`` must yield.  Triton's rules: tuples merge element by element; an equal
        compile-time value stays compile-time; otherwise both sides become runtime values
        (in their own branch) and must have the same type."""
        a, b = _unwrap_sequence(a), _unwrap_sequence(b)
        if _is_structure(a) or _is_structure(b):
            if not _same_structure(a, b):
                raise self.error(_return_mismatch(a, b), node)
            parts = [self.merge_returns(x, y, blocks, node) for x, y in zip(_items(a), _items(b))]
            return _rebuild(a, [t for t, _ in parts]), [p for _, ps in parts for p in ps]
        if not _is_runtime(a) and not _is_runtime(b) and _same_constant(a, b):
            return a, []
        if _unwrap(a) is None or _unwrap(b) is None or \
                not all(_is_runtime(v) or isinstance(_unwrap(v), (bool, int, float)) for v in (a, b)):
            raise self.error(_return_mismatch(a, b), node)
        with self.builder.at_end(blocks[0]):
            a = self.materialize(a, node)
        with self.builder.at_end(blocks[1]):
            b = self.materialize(b, node)
        if a.type != b.type:
            raise self.error(_return_mismatch(a, b), node)
        return ArgSlot(a.type), [(a, b)]

    def runtime_if(self, cond: tensor, node: ast.If) -> None:
        before = dict(self.lscope)
        then_scope, then_ops = self.generate_branch(node.body, before)
        else_scope, else_ops = self.generate_branch(node.orelse, before)
        self.lscope = before
        names = []
        for n in [*then_scope, *(n for n in else_scope if n not in then_scope)]:
            if n not in then_scope or n not in else_scope:
                self.scoped_out[n] = ("in one branch of the runtime 'if'", node)
            elif self.merged_value(n, then_scope[n], else_scope[n], before, node):
                names.append(n)
        then_values = [self.branch_result(n, then_scope[n], before, node) for n in names]
        else_values = [self.branch_result(n, else_scope[n], before, node) for n in names]
        for n, a, b in zip(names, then_values, else_values):
            if a.type != b.type:
                raise self.error(f"{n!r} has type {type_name(a.type)} in the 'if' branch but "
                                 f"{type_name(b.type)} in the 'else' branch -- fix: cast one with "
                                 f".to(...) so both branches agree", node)
        then_parts, else_parts = _runtime_parts(then_values), _runtime_parts(else_values)
        results = self.builder.create_if(
            cond.handle, [self.semantic.ir_type(v.type) for v in then_parts],
            then_ops, [v.handle for v in then_parts], else_ops, [v.handle for v in else_parts])
        self.lscope.update(zip(names, _rebuilt(then_values, results)))

    def merged_value(self, name: str, then_value: Any, else_value: Any, before: dict,
                     node: ast.AST) -> bool:
        """Whether ``name`` must become a result of the ``scf.if``.  A compile-time value that
        both branches leave equal is simply kept."""
        if then_value is else_value:
            return False
        if not _is_runtime(then_value) and not _is_runtime(else_value) \
                and _same_constant(then_value, else_value):
            self.lscope[name] = then_value
            return False
        return True

    def branch_result(self, name: str, value: Any, before: dict, node: ast.AST) -> Any:
        """The runtime value (a tensor or an aggregate) a branch yields for ``name``.  A number
        the branch left unchanged is materialized before the ``if``; other compile-time values
        cannot differ."""
        if _holds_runtime(value):
            return value
        if value is before.get(name) and isinstance(_unwrap(value), (bool, int, float)):
            return self.materialize(value, node)
        raise self.error(f"{name!r} is {_describe_value(value)} in one branch of this runtime 'if' "
                         f"and something else in the other; compile-time values cannot depend on "
                         f"a runtime condition -- fix: give it the same value in both branches, "
                         f"or make the condition a tl.constexpr", node)

    def generate_branch(self, body: list[ast.stmt], before: dict) -> tuple[dict, Any]:
        """Generate ``body`` into a detached block; return the scope after it and the block."""
        self.lscope = dict(before)
        with self.builder.detached_block() as block:
            self.visit_body(body)
        return self.lscope, block

    # -- loops ----------------------------------------------------------------------------------
    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error("'for ... else' is not supported", node, UnsupportedLanguageConstruct)
        iterator = _unwrap(self.visit(node.iter))
        if isinstance(iterator, core.static_range):
            iterator = tuple(constexpr(i) for i in range(iterator.start, iterator.end, iterator.step))
        if isinstance(iterator, (tuple, list)):       # unrolled at compile time
            self.unroll(node, list(iterator))
            return
        if not isinstance(iterator, core.range):
            raise self.error("kernels loop only over range(...), tl.range(...), "
                             "tl.static_range(...) or a tuple", node.iter)
        var = _loop_var(self, node)
        bounds = [iterator.start, iterator.end, iterator.step]
        if all(not _is_runtime(b) for b in bounds) and _unwrap(iterator.step) == 0:
            raise self.error("range() step must not be zero", node.iter)
        lb, ub, step = self.semantic.loop_bounds(*bounds)
        backwards = not _is_runtime(iterator.step) and _unwrap(iterator.step) < 0
        if backwards:      # as Triton: run up from the end, and count down inside (`loop`)
            lb, ub, step = ub, lb, self.semantic.loop_bounds(0, 0, -_unwrap(iterator.step))[2]
        with self.runtime_loop():
            self.loop(node, var, lb, ub, step, iterator, backwards)

    def unroll(self, node: ast.For, values: list) -> None:
        """Generate the body once per value; the later iterations are on `continuation`."""
        for i, value in enumerate(values):
            self.continuation.append(functools.partial(self.unroll, node, values[i + 1:]))
            try:
                self.bind(node.target, value)
                self.visit_body(node.body)
            finally:
                self.continuation.pop()

    @contextlib.contextmanager
    def runtime_loop(self) -> Iterator[None]:
        """Mark the generation of a runtime loop (where ``return`` is an error)."""
        self.loop_depth += 1
        try:
            yield
        finally:
            self.loop_depth -= 1

    def loop(self, node: ast.For, var: str, lb: tensor, ub: tensor, step: tensor,
             iterator: Any, backwards: bool = False) -> None:
        """A runtime ``for``; ``backwards``: the range had a negative step, and the loop runs
        over the mirrored range, the variable being ``lb + ub - iv``."""
        before = dict(self.lscope)
        carried = self.carried_names(node.body, before, loop_var=(var, lb.type))
        init = [before[n] for n in carried]

        def body(block_args):
            self.lscope = dict(before)
            iv = tensor(block_args[0], lb.type)
            self.lscope[var] = self.semantic.binary("sub", self.semantic.binary("add", lb, ub), iv) \
                if backwards else iv
            self.lscope.update(zip(carried, _rebuilt(init, block_args[1:])))
            self.visit_body(node.body)
            return [h for n in carried for h in self.check_carried(n, before[n], node)]

        results = self.builder.create_for(lb.handle, ub.handle, step.handle,
                                          [v.handle for v in _runtime_parts(init)], body,
                                          iterator.attributes())
        self.lscope = before
        self.lscope.update(zip(carried, _rebuilt(init, results)))

    def check_carried(self, name: str, initial: Any, node: ast.AST) -> list:
        """The IR values the loop body yields for ``name`` (an aggregate yields its parts)."""
        value = self.lscope.get(name)
        if not _holds_runtime(value):
            value = self.materialize(value, node)
        if value.type != initial.type:
            raise self.error(f"loop-carried variable {name!r} starts as {type_name(initial.type)} "
                             f"but is re-assigned to {type_name(value.type)} in the loop -- fix: "
                             f"keep its type the same, e.g. initialize it with the loop's type", node)
        return [t.handle for t in _runtime_parts([value])]

    def carried_names(self, body: list[ast.stmt], before: dict,
                      loop_var: tuple[str, Any] | None = None) -> list[str]:
        """Names that exist before the loop and that the body re-assigns (a dry run).

        Constexpr values that the body changes are turned into runtime values first, as
        Triton does, so that they can be carried.
        """
        saved = dict(before)
        self.lscope = dict(before)
        with self.builder.detached_block(discard=True) as block:
            if loop_var is not None:
                self.lscope[loop_var[0]] = tensor(self.builder.placeholder(
                    self.semantic.ir_type(loop_var[1]), block), loop_var[1])
            self.visit_body(body)
        after = self.lscope
        self.lscope = saved
        for n in after:
            if n not in before and (loop_var is None or n != loop_var[0]):
                self.scoped_out[n] = ("inside the loop body", body[0])
        names = []
        for n, old in before.items():
            new = after.get(n)
            if new is old or (not _holds_runtime(new) and not _holds_runtime(old)):
                continue
            if not _holds_runtime(old):
                before[n] = self.materialize(old, body[0])
            names.append(n)
        return names

    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.error("'while ... else' is not supported", node, UnsupportedLanguageConstruct)
        with self.runtime_loop():
            self.runtime_while(node)

    def runtime_while(self, node: ast.While) -> None:
        before = dict(self.lscope)
        carried = self.carried_names(node.body, before)
        init = [before[n] for n in carried]

        def condition(block_args):
            self.lscope = dict(before)
            self.lscope.update(zip(carried, _rebuilt(init, block_args)))
            cond = self.visit(node.test)
            if not _is_runtime(cond):
                cond = self.semantic.to_tensor(bool(_unwrap(cond)))
            return self.condition(cond, node).handle

        def body(block_args):
            self.lscope = dict(before)
            self.lscope.update(zip(carried, _rebuilt(init, block_args)))
            self.visit_body(node.body)
            return [h for n in carried for h in self.check_carried(n, before[n], node)]

        results = self.builder.create_while([v.handle for v in _runtime_parts(init)], condition,
                                            body)
        self.lscope = before
        self.lscope.update(zip(carried, _rebuilt(init, results)))

    # -- expressions ----------------------------------------------------------------------------
    def visit_Constant(self, node: ast.Constant) -> Any:
        return constexpr(node.value)

    def visit_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def visit_Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self.visit(e) for e in node.elts)

    def visit_List(self, node: ast.List) -> list:
        return [self.visit(e) for e in node.elts]

    def visit_JoinedStr(self, node: ast.JoinedStr) -> constexpr:
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
                continue
            inner = self.visit(value.value)
            if _is_runtime(inner):
                raise self.error("f-strings can only format compile-time values -- fix: use "
                                 "tl.device_print(\"prefix\", value) to print runtime values", value)
            spec = "" if value.format_spec is None else _unwrap(self.visit(value.format_spec))
            parts.append(format(_unwrap(inner), spec))
        return constexpr("".join(parts))

    def visit_FormattedValue(self, node: ast.FormattedValue) -> Any:
        return self.visit(node.value)

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        return self.binary(_BINARY_METHODS[type(node.op)], self.visit(node.left),
                           self.visit(node.right), node)

    def binary(self, method: str, lhs: Any, rhs: Any, node: ast.AST) -> Any:
        if _is_runtime(lhs):
            return getattr(lhs, method)(rhs)
        if _is_runtime(rhs):
            return getattr(rhs, _REFLECTED[method])(lhs)
        return constexpr(_python_operator(method)(_unwrap(lhs), _unwrap(rhs)))

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        operand = self.visit(node.operand)
        if _is_runtime(operand):
            return getattr(operand, _UNARY_METHODS[type(node.op)])()
        value = _unwrap(operand)
        ops = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert,
               ast.Not: operator.not_}
        return constexpr(ops[type(node.op)](value))

    def visit_Compare(self, node: ast.Compare) -> Any:
        if len(node.ops) != 1:
            raise self.error("chained comparisons (a < b < c) are not supported -- fix: write "
                             "(a < b) & (b < c)", node)
        lhs, rhs = self.visit(node.left), self.visit(node.comparators[0])
        op = type(node.ops[0])
        if op in (ast.Is, ast.IsNot, ast.In, ast.NotIn):
            if _is_runtime(lhs) or _is_runtime(rhs):
                if op in (ast.Is, ast.IsNot):
                    same = lhs is rhs
                    return constexpr(same if op is ast.Is else not same)
                raise self.error("'in' needs compile-time operands", node)
            fn = {ast.Is: operator.is_, ast.IsNot: operator.is_not,
                  ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}[op]
            return constexpr(fn(_unwrap(lhs), _unwrap(rhs)))
        method = _COMPARE_METHODS[op]
        return self.binary(method, lhs, rhs, node)

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        is_and = isinstance(node.op, ast.And)
        result = self.visit(node.values[0])
        for value_node in node.values[1:]:
            if not _is_runtime(result):
                if bool(_unwrap(result)) != is_and:   # short-circuit at compile time
                    return result
                result = self.visit(value_node)
                continue
            other = self.visit(value_node)
            result = core.logical_and(result, other) if is_and else core.logical_or(result, other)
        return result

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.visit(node.test)
        if not _is_runtime(cond):
            return self.visit(node.body if _unwrap(cond) else node.orelse)
        cond = self.condition(cond, node)
        before = dict(self.lscope)
        blocks, values = [], []
        for side in (node.body, node.orelse):
            with self.builder.detached_block() as block:
                values.append(self.visit(side))
            blocks.append(block)
        self.lscope = before
        if all(_unwrap(v) is None for v in values):     # `tl.store(...) if c else tl.store(...)`
            self.builder.create_if(cond.handle, [], blocks[0], [], blocks[1], [])
            return None
        if any(_unwrap(v) is None for v in values):
            raise self.error("one side of the conditional expression has no value (it is a call "
                             "like tl.store) and the other has one -- fix: give both sides a "
                             "value, or use an if statement", node)
        for i, (block, side) in enumerate(zip(blocks, (node.body, node.orelse))):
            if not _holds_runtime(values[i]):
                with self.builder.at_end(block):
                    values[i] = self.materialize(values[i], side)
        then_value, else_value = values
        if then_value.type != else_value.type:
            raise self.error(f"the two sides of the conditional expression have types "
                             f"{type_name(then_value.type)} and {type_name(else_value.type)} -- "
                             f"fix: cast one side", node)
        then_parts, else_parts = _runtime_parts([then_value]), _runtime_parts([else_value])
        results = self.builder.create_if(
            cond.handle, [self.semantic.ir_type(v.type) for v in then_parts],
            blocks[0], [v.handle for v in then_parts], blocks[1], [v.handle for v in else_parts])
        return _rebuilt([then_value], results)[0]

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        base = self.visit(node.value)
        base = self.module.map_module(base)
        try:
            value = getattr(_unwrap(base) if isinstance(base, constexpr) and
                            not hasattr(base, node.attr) else base, node.attr)
        except AttributeError:
            raise self.error(f"{_describe_value(base)} has no attribute {node.attr!r}", node) from None
        return self.module.map_module(value)

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        base = self.visit(node.value)
        index = self.visit(node.slice)
        if _is_runtime(base):
            return base.__getitem__(index)
        target = _unwrap(base)
        key = _unwrap(index)
        try:
            return target[key]
        except Exception as e:
            raise self.error(f"cannot index {_describe_value(base)} with {key!r}: {e}", node) from None

    def visit_Slice(self, node: ast.Slice) -> slice:
        parts = [None if p is None else _unwrap(self.visit(p)) for p in (node.lower, node.upper, node.step)]
        return slice(*parts)

    def visit_keyword(self, node: ast.keyword) -> tuple[str, Any]:
        return node.arg, self.visit(node.value)

    def visit_Call(self, node: ast.Call) -> Any:
        fn = self.visit(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(_unwrap(self.visit(a.value)))
            else:
                args.append(self.visit(a))
        kwargs = dict(self.visit(k) for k in node.keywords)
        return self.call(fn, args, kwargs, node)

    def call(self, fn: Any, args: list, kwargs: dict, node: ast.AST) -> Any:
        """Call whatever a kernel may call (see `_CALLABLES`); tensor methods arrive as
        ``functools.partial`` (``x.sum(1)`` is ``tl.sum(x, 1)``)."""
        fn = _unwrap(fn)                          # FN: tl.constexpr = some_jit_function
        if isinstance(fn, functools.partial):
            return self.call(fn.func, [*fn.args, *args], {**fn.keywords, **kwargs}, node)
        for accepts, how in _CALLABLES:
            if accepts(fn):
                return how(self, fn, args, kwargs, node)
        name = getattr(fn, "__name__", repr(fn))
        raise self.error(f"cannot call the Python function {name!r} inside a kernel -- fix: "
                         f"decorate it with @naiad.jit, or compute it outside and pass the value "
                         f"as a tl.constexpr", node)

    def call_jit(self, fn: KernelFunction, args: list, kwargs: dict, node: ast.AST) -> Any:
        return self.module.call_jit(fn, args, kwargs, self, node)

    def call_builtin(self, fn: Any, args: list, kwargs: dict, node: ast.AST) -> Any:
        return fn(*args, **kwargs, **core.builtin_keywords(fn))

    def call_range(self, fn: Any, args: list, kwargs: dict, node: ast.AST) -> Any:
        return fn(*[_unwrap(a) if not _is_runtime(a) else a for a in args],
                  **{k: _unwrap(v) for k, v in kwargs.items()})

    def call_at_compile_time(self, fn: Any, args: list, kwargs: dict, node: ast.AST) -> Any:
        """Constexpr functions, dtypes and methods of compile-time values run in Python on the
        unwrapped arguments; a number or string result becomes a constexpr."""
        if any(_is_runtime(a) for a in [*args, *kwargs.values()]):
            raise self.error(f"{getattr(fn, '__name__', fn)} runs at compile time and needs "
                             f"compile-time arguments -- fix: pass tl.constexpr values", node)
        result = fn(*[_unwrap(a) for a in args], **{k: _unwrap(v) for k, v in kwargs.items()})
        return constexpr(result) if isinstance(result, (int, float, bool, str)) else result

    def call_namedtuple(self, fn: Any, args: list, kwargs: dict, node: ast.AST) -> Any:
        """``Point(x=a, y=b)``: a namedtuple class builds a tuple of the values, tensors or not."""
        return fn(*args, **kwargs)

    def call_python_builtin(self, fn: Any, args: list, kwargs: dict, node: ast.AST) -> Any:
        if fn is print:     # print("x", x) is tl.device_print("x", x); print(x) has no prefix
            args = args if args and not _is_runtime(args[0]) else [constexpr(""), *args]
            return core.device_print(*[_unwrap(a) if not _is_runtime(a) else a for a in args])
        if fn is range:
            return core.range(*args, **kwargs)
        if fn in (min, max) and any(_is_runtime(a) for a in args):
            combine = core.minimum if fn is min else core.maximum
            result = args[0]
            for a in args[1:]:
                result = combine(result, a)
            return result
        if any(_is_runtime(a) for a in args) and fn not in (isinstance, len, getattr, hasattr,
                                                            type, tuple, list, zip, enumerate):
            raise self.error(f"{fn.__name__}() runs at compile time, but its argument is only "
                             f"known at run time -- fix: compare explicitly (x != 0), convert "
                             f"with .to(...), or reduce a block first", node)
        result = fn(*[_unwrap(a) for a in args], **{k: _unwrap(v) for k, v in kwargs.items()})
        if fn in (zip, enumerate):
            return tuple(result)
        return constexpr(result) if isinstance(result, (int, float, bool, str)) else result


def _is_compile_time_callable(fn: Any) -> bool:
    """Constexpr functions, ``tl.constexpr``, dtypes (and their classes), and methods of
    compile-time values (``x.dtype.is_int``)."""
    return getattr(fn, "__naiad_constexpr_function__", False) is True or fn is constexpr \
        or isinstance(fn, core.dtype) or _is_dtype_class(fn) or _is_value_method(fn)


def _is_namedtuple_class(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")


#: (does it accept fn, how to call it), in order of precedence.
_CALLABLES = [
    (lambda fn: isinstance(fn, KernelFunction), CodeGenerator.call_jit),
    (core.is_builtin, CodeGenerator.call_builtin),
    (lambda fn: any(fn is b for b in _PYTHON_BUILTINS), CodeGenerator.call_python_builtin),
    (lambda fn: isinstance(fn, type) and issubclass(fn, (core.range, core.static_range)),
     CodeGenerator.call_range),
    (_is_namedtuple_class, CodeGenerator.call_namedtuple),
    (_is_compile_time_callable, CodeGenerator.call_at_compile_time),
]


def _python_operator(method: str) -> Any:
    """``"__and__"`` -> ``operator.and_``: the Python operation a method name stands for."""
    name = method.strip("_")
    return getattr(operator, name + "_" if name in ("and", "or") else name)


def _loop_var(gen: CodeGenerator, node: ast.For) -> str:
    if not isinstance(node.target, ast.Name):
        raise gen.error("the loop variable must be a single name", node.target)
    return node.target.id


_LIBRARY_DIR = os.path.dirname(os.path.abspath(core.__file__)) + os.sep


def _is_library_file(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_LIBRARY_DIR)


def _is_library(fn: KernelFunction) -> bool:
    """Whether ``fn`` is part of Naiad's language library (``tl.sum``, ``tl.softmax``, ...)."""
    return _is_library_file(fn.filename)


def _library_name(fn: KernelFunction) -> str:
    return f"tl.{fn.__name__}" if fn.module.startswith("naiad.language") else fn.__name__


class ArgSlot:
    """Where a tensor sits in an argument: one block argument of the callee, of type ``ty``.

    A tuple argument holding tensors is passed as a template (the tuple with a `ArgSlot` for
    each tensor) plus the tensors, flattened; the callee rebuilds the tuple from its block
    arguments.  Compile-time values inside the tuple stay in the template.
    """

    def __init__(self, ty: Any):
        self.ty = ty

    def __repr__(self) -> str:
        return f"<{self.ty}>"


def _template(value: Any) -> tuple[Any, list[tensor]]:
    """Split an argument into its template and the tensors it holds, in order."""
    value = _unwrap_sequence(value)
    if isinstance(value, tensor):
        return ArgSlot(value.type), [value]
    if _is_structure(value):
        parts = [_template(v) for v in _items(value)]
        return _rebuild(value, [t for t, _ in parts]), [x for _, xs in parts for x in xs]
    return value, []


def _is_structure(value: Any) -> bool:
    """A tuple, list or aggregate: a value made of other values (`_items`)."""
    return isinstance(value, (tuple, list, core.aggregate_value))


def _items(value: Any) -> list:
    return value.parts() if isinstance(value, core.aggregate_value) else list(value)


def _same_structure(a: Any, b: Any) -> bool:
    """Whether two structures have the same kind, length and (aggregates) type."""
    return type(a) is type(b) and len(_items(a)) == len(_items(b)) and \
        (not isinstance(a, core.aggregate_value) or a.type == b.type)


def _runtime_parts(values: list) -> list[tensor]:
    """The tensors of runtime values, aggregates replaced by their parts."""
    return [t for v in values for t in _template(v)[1]]


def _rebuilt(values: list, handles: Any) -> list:
    """Values of the same types as ``values`` made of ``handles`` (IR values in
    `_runtime_parts` order): the results of an ``scf.if`` or a loop, or block arguments."""
    handles = iter(handles)
    return [_fill(_template(v)[0], handles) for v in values]


def _unwrap_sequence(value: Any) -> Any:
    """A constexpr holding a tuple (``(a, b) + (c,)`` computes one) is that tuple."""
    inner = _unwrap(value)
    return inner if isinstance(inner, (tuple, list)) else value


def _rebuild(like: Any, items: list) -> Any:
    """A tuple, list, namedtuple or aggregate of the same kind as ``like`` holding ``items``."""
    if isinstance(like, core.aggregate_value):
        return like.with_parts(items)
    if _is_namedtuple_class(type(like)):
        return type(like)(*items)
    return type(like)(items)


def _as_template(ty: Any) -> Any:
    """A parameter's template from its type: a dtype (a kernel's parameters), a tuple type,
    or already a template (a device function's)."""
    if isinstance(ty, core.tuple_type):
        return tuple(_as_template(t) for t in ty)
    return ty if isinstance(ty, (ArgSlot, tuple, list, core.aggregate_value)) else ArgSlot(ty)


def _slots(template: Any, path: tuple) -> list[tuple[tuple, Any]]:
    """(path, type) of each runtime element of a parameter, in block-argument order."""
    if isinstance(template, ArgSlot):
        return [(path, template.ty)]
    if _is_structure(template):
        return [slot for i, v in enumerate(_items(template)) for slot in _slots(v, (*path, i))]
    return []


def _fill(template: Any, args: Any) -> Any:
    """The argument value: the template with each `ArgSlot` replaced by the next block argument."""
    if isinstance(template, ArgSlot):
        return tensor(next(args), template.ty)
    if _is_structure(template):
        return _rebuild(template, [_fill(v, args) for v in _items(template)])
    return template


def _return_mismatch(a: Any, b: Any) -> str:
    def describe(value: Any) -> str:
        return "nothing" if _unwrap(value) is None else _describe_value(value)

    return (f"this function returns {describe(a)} on one path and {describe(b)} on another -- "
            f"fix: return values of the same types on every path (cast with .to(...) where "
            f"needed)")


def _same_constant(a: Any, b: Any) -> bool:
    """Whether two compile-time values are certainly equal (tuples may hold tensors, whose
    ``==`` would emit IR, so only plain values are compared)."""
    a, b = _unwrap(a), _unwrap(b)
    plain = (bool, int, float, str, core.dtype, type(None))
    return a is b or (isinstance(a, plain) and type(a) is type(b) and a == b)


def _is_dtype_class(fn: Any) -> bool:
    return isinstance(fn, type) and issubclass(fn, core.dtype)


def _is_value_method(fn: Any) -> bool:
    """A method of a compile-time value (``x.dtype.is_int``, ``"a".upper``), which Triton
    calls at compile time; functions of modules are not methods."""
    owner = getattr(fn, "__self__", None)
    return owner is not None and not _is_module(owner) and not isinstance(owner, (tensor, type))


def _is_module(value: Any) -> bool:
    return type(value).__name__ == "module"


def _describe_value(value: Any) -> str:
    if isinstance(value, tensor):
        return f"a tensor of type {type_name(value.type)}"
    if isinstance(value, constexpr):
        return f"the constexpr {value.value!r}"
    if isinstance(value, core.aggregate_value):
        return f"a {value.type}"
    return f"a {type(value).__name__}"


def _describe(e: Exception) -> str:
    text = str(e) or type(e).__name__
    expected = (TypeError, ValueError, NotImplementedError, NaiadError)
    return text if isinstance(e, expected) else f"{type(e).__name__}: {text}"


class ModuleContext:
    """State shared by the code generators of one compilation: the module, the semantic
    layer, the functions generated so far (by specialization), and the module map."""

    def __init__(self, semantic: Any, module_map: dict[str, Any]):
        self.semantic = semantic
        self.module_map = module_map
        self.functions: dict[tuple, tuple[Any, Any]] = {}
        self.function_count = 0
        self.generators: list[CodeGenerator] = []   # the stack of functions being generated
        self.generating: set[tuple] = set()          # their keys (a repeated one never ends)

    def call_from_builtin(self, fn: Any, args: list) -> Any:
        """Call a ``@jit`` function (a reduction's combine function) from inside a builtin."""
        caller = self.generators[-1]
        if not isinstance(fn, KernelFunction):
            raise caller.error(f"the combine function must be a @jit function, not {fn!r}")
        return self.call_jit(fn, args, {}, caller, caller._node)

    def map_module(self, value: Any) -> Any:
        """Swap a generic module (e.g. libdevice) for the backend's implementation."""
        if _is_module(value):
            return self.module_map.get(value.__name__, value)
        owner = getattr(value, "__module__", None)
        if owner in self.module_map and hasattr(value, "__name__"):
            return getattr(self.module_map[owner], value.__name__, value)
        return value

    def call_jit(self, fn: KernelFunction, args: list, kwargs: dict, caller: CodeGenerator,
                 node: ast.AST) -> Any:
        """Generate (once per specialization) and call a ``@jit`` device function."""
        try:
            bound = fn.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise caller.error(f"calling {fn.__name__}: {e}", node) from None
        bound.apply_defaults()
        values = list(bound.arguments.values())
        constants, arg_types, runtime = {}, [], []
        for p, v in zip(fn.params, values):
            template, tensors = _template(v)
            if not tensors:     # a tl.constexpr annotation does not stop a runtime value (Triton)
                constants[p.num] = _unwrap(v)
                arg_types.append(None)
            else:
                arg_types.append(template)
                runtime.extend(tensors)
        key = (fn.cache_key, tuple(repr(t) for t in arg_types),
               tuple(sorted((k, repr(v)) for k, v in constants.items())))
        if key in self.generating:
            raise caller.error(f"'{fn.__name__}' calls itself with the same argument types and "
                               f"constexpr values, so generating it would never end -- fix: let "
                               f"the recursion end at compile time (pass a tl.constexpr that "
                               f"changes with each call and test it, as in `if N > 0: "
                               f"{fn.__name__}(x, N - 1)`), or write a loop", node)
        if key not in self.functions:
            self.function_count += 1
            name = f"{fn.__name__}__{self.function_count}"
            generator = CodeGenerator(fn, arg_types, constants, {}, self, is_kernel=False, name=name)
            self.generating.add(key)
            try:
                with self.semantic.builder.at_module_end():
                    func_op = generator.generate()
            except CompilationError as e:
                raise caller.callee_error(e, fn, node) from e.__cause__
            finally:
                self.generating.discard(key)
            self.functions[key] = (func_op, generator.return_template)
        func_op, returns = self.functions[key]
        results = self.semantic.builder.call(func_op, [v.handle for v in runtime])
        return _fill(returns, iter(results))
