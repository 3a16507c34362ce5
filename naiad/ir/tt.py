"""The ``tt`` dialect (TTIR): Triton's target-independent IR, defined with xDSL.

Op names, operand and attribute names, and the textual syntax follow Triton's
``TritonOps.td``, so a dump reads like Triton's and a ``.ttir`` file written by Triton
parses here.  Every op verifies the shape and type rules Triton's verifier enforces.

Where xDSL's declarative format cannot infer an operand's type from the printed ones
(``tt.load``/``tt.store``: the mask and ``other`` types follow from the pointer type) the
op has a hand-written ``parse``/``print`` producing Triton's syntax.  ``tt.reduce`` and
``tt.scan`` print in the generic form, as Triton's own dumps do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, NoReturn

from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DictionaryAttr,
    FixedBitwidthType,
    FlatSymbolRefAttrConstr,
    FunctionType,
    I1,
    I32,
    I64,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    TensorType,
    UnitAttr,
    container_of,
    i1,
    i32,
)
from xdsl.dialects.utils import parse_func_op_like, print_func_op_like
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    Region,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
)
from xdsl.irdl import (
    AnyAttr,
    AttrSizedOperandSegments,
    IRDLOperation,
    ParamAttrConstraint,
    ParsePropInAttrDict,
    SameVariadicOperandSize,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_attr_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    CallableOpInterface,
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    MemoryReadEffect,
    MemoryWriteEffect,
    NoMemoryEffect,
    Pure,
    ReturnLike,
    SymbolOpInterface,
    SymbolTable,
    SymbolUserOpInterface,
)
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from naiad.ir.types import PointerType, element_type, is_pointer, shape_of, with_element

# ---------------------------------------------------------------------------------------
# Enum attributes.  The spelling of each case is Triton's (e.g. `exch`, `evict_normal`).
# In an op's custom syntax they print as a bare keyword; in an attribute dictionary or the
# generic form as `#tt<cache_modifier ca>`.
# ---------------------------------------------------------------------------------------


class CacheModifier(StrEnum):
    NONE = "none"
    CA = "ca"
    CG = "cg"
    WB = "wb"
    CS = "cs"
    WT = "wt"
    CV = "cv"


class EvictionPolicy(StrEnum):
    NORMAL = "evict_normal"
    EVICT_FIRST = "evict_first"
    EVICT_LAST = "evict_last"


class PaddingOption(StrEnum):
    ZERO = "zero"
    NAN = "nan"


class RMWOp(StrEnum):
    AND = "and"
    OR = "or"
    XOR = "xor"
    ADD = "add"
    FADD = "fadd"
    MAX = "max"
    MIN = "min"
    UMAX = "umax"
    UMIN = "umin"
    XCHG = "exch"


class MemSemantic(StrEnum):
    RELAXED = "relaxed"
    ACQUIRE = "acquire"
    RELEASE = "release"
    ACQUIRE_RELEASE = "acq_rel"


class MemSyncScope(StrEnum):
    GPU = "gpu"
    CTA = "cta"
    SYSTEM = "sys"


class ProgramIDDim(StrEnum):
    X = "x"
    Y = "y"
    Z = "z"


class RoundingMode(StrEnum):
    RTZ = "rtz"
    RTNE = "rtne"


class PropagateNan(StrEnum):
    NONE = "none"
    ALL = "all"


class InputPrecision(StrEnum):
    TF32 = "tf32"
    TF32x3 = "tf32x3"
    IEEE = "ieee"
    BF16x3 = "bf16x3"
    BF16x6 = "bf16x6"


@irdl_attr_definition
class CacheModifierAttr(EnumAttribute[CacheModifier], SpacedOpaqueSyntaxAttribute):
    name = "tt.cache_modifier"


@irdl_attr_definition
class EvictionPolicyAttr(EnumAttribute[EvictionPolicy], SpacedOpaqueSyntaxAttribute):
    name = "tt.eviction_policy"


@irdl_attr_definition
class PaddingOptionAttr(EnumAttribute[PaddingOption], SpacedOpaqueSyntaxAttribute):
    name = "tt.padding_option"


@irdl_attr_definition
class RMWOpAttr(EnumAttribute[RMWOp], SpacedOpaqueSyntaxAttribute):
    name = "tt.rmw_op"


@irdl_attr_definition
class MemSemanticAttr(EnumAttribute[MemSemantic], SpacedOpaqueSyntaxAttribute):
    name = "tt.mem_semantic"


@irdl_attr_definition
class MemSyncScopeAttr(EnumAttribute[MemSyncScope], SpacedOpaqueSyntaxAttribute):
    name = "tt.mem_sync_scope"


@irdl_attr_definition
class ProgramIDDimAttr(EnumAttribute[ProgramIDDim], SpacedOpaqueSyntaxAttribute):
    name = "tt.program_dim"


@irdl_attr_definition
class RoundingModeAttr(EnumAttribute[RoundingMode], SpacedOpaqueSyntaxAttribute):
    name = "tt.rounding_mode"


@irdl_attr_definition
class PropagateNanAttr(EnumAttribute[PropagateNan], SpacedOpaqueSyntaxAttribute):
    name = "tt.propagate_nan"


@irdl_attr_definition
class InputPrecisionAttr(EnumAttribute[InputPrecision], SpacedOpaqueSyntaxAttribute):
    name = "tt.input_precision"


# ---------------------------------------------------------------------------------------
# Type constraints and verification helpers
# ---------------------------------------------------------------------------------------

FloatLike = container_of(AnyFloat)
IntLike = container_of(base(IntegerType))
BoolLike = container_of(I1)
I64Like = container_of(IntegerType(64))
PtrLike = container_of(base(PointerType))
TensorConstr = base(TensorType)
I32ArrayConstr = DenseArrayBase.constr(i32)

_FALSE = IntegerAttr.from_bool(False)


def _fail(message: str) -> NoReturn:
    raise VerifyException(message)


def _list(types: Sequence[Attribute]) -> str:
    return ", ".join(map(str, types))


def _check_same_shape(what: str, a: Attribute, b: Attribute) -> None:
    if shape_of(a) != shape_of(b):
        _fail(f"{what}: shape {shape_of(a)} does not match {shape_of(b)} ({a} vs {b})")


def _check_axis(axis: int, rank: int) -> None:
    if not 0 <= axis < rank:
        _fail(f"axis {axis} is out of range for a tensor of rank {rank}")


def _bitwidth(t: Attribute) -> int | None:
    return t.bitwidth if isinstance(t, FixedBitwidthType) else None


def loaded_type(ptr_type: Attribute) -> Attribute:
    """The type ``tt.load`` yields for ``ptr_type``: the pointee with the pointer's shape.

    ``!tt.ptr<f32>`` gives f32, ``tensor<4x!tt.ptr<f32>>`` gives ``tensor<4xf32>``, and the
    block pointer ``!tt.ptr<tensor<4x8xf16>>`` gives ``tensor<4x8xf16>``.
    """
    pointer = element_type(ptr_type)
    if not isinstance(pointer, PointerType):
        _fail(f"expected a pointer or a tensor of pointers, got {ptr_type}")
    return with_element(ptr_type, pointer.pointee_type)


def _check_mask(mask: SSAValue | None, value_type: Attribute) -> None:
    expected = with_element(value_type, i1)
    if mask is not None and mask.type != expected:
        _fail(f"mask must have type {expected}, got {mask.type}")


# ---------------------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------------------


class _FuncCallable(CallableOpInterface):
    @classmethod
    def get_callable_region(cls, op: Operation) -> Region:
        assert isinstance(op, FuncOp)
        return op.body

    @classmethod
    def get_argument_types(cls, op: Operation) -> tuple[Attribute, ...]:
        assert isinstance(op, FuncOp)
        return op.function_type.inputs.data

    @classmethod
    def get_result_types(cls, op: Operation) -> tuple[Attribute, ...]:
        assert isinstance(op, FuncOp)
        return op.function_type.outputs.data


def public_functions(module: Any) -> list[Operation]:
    """A module's public functions: a kernel module has one, the kernel (its device functions
    are private).  Read by duck typing, so any IR with ``body.ops`` will do."""
    return [op for op in getattr(getattr(module, "body", None), "ops", ())
            if getattr(op, "sym_visibility", None) is not None and op.sym_visibility.data == "public"]


@irdl_op_definition
class FuncOp(IRDLOperation):
    """A Triton function: a kernel (public) or a device function (private).

    ``arg_attrs`` carries per-argument hints such as ``{tt.divisibility = 16 : i32}``;
    ``noinline`` is a plain attribute, printed as ``attributes {noinline = false}``.
    """

    name = "tt.func"

    body = region_def()
    sym_name = prop_def(SymbolNameConstraint())
    function_type = prop_def(FunctionType)
    sym_visibility = opt_prop_def(StringAttr)
    arg_attrs = opt_prop_def(ArrayAttr[DictionaryAttr])
    res_attrs = opt_prop_def(ArrayAttr[DictionaryAttr])
    noinline = opt_attr_def(BoolAttr)

    traits = traits_def(
        IsolatedFromAbove(), SymbolOpInterface(), _FuncCallable(), HasParent(ModuleOp)
    )

    RESERVED: ClassVar = ("sym_name", "function_type", "sym_visibility", "arg_attrs", "res_attrs")

    def __init__(
        self,
        name: str,
        function_type: FunctionType | tuple[Sequence[Attribute], Sequence[Attribute]],
        region: Region | None = None,
        visibility: str | None = "public",
        *,
        arg_attrs: ArrayAttr[DictionaryAttr] | None = None,
        res_attrs: ArrayAttr[DictionaryAttr] | None = None,
        noinline: bool | None = None,
    ):
        if isinstance(function_type, tuple):
            function_type = FunctionType.from_lists(*function_type)
        if region is None:
            region = Region(Block(arg_types=function_type.inputs))
            for i, arg in enumerate(region.block.args):
                arg.name_hint = f"arg{i}"  # MLIR's (and Triton's) names for them
        super().__init__(
            regions=[region],
            properties={
                "sym_name": StringAttr(name),
                "function_type": function_type,
                "sym_visibility": None if visibility is None else StringAttr(visibility),
                "arg_attrs": arg_attrs,
                "res_attrs": res_attrs,
            },
            attributes={
                "noinline": None if noinline is None else IntegerAttr.from_bool(noinline)
            },
        )

    @property
    def args(self) -> tuple[SSAValue, ...]:
        return self.body.block.args

    def verify_(self) -> None:
        inputs = self.function_type.inputs.data
        if self.body.blocks and self.body.blocks.first.arg_types != inputs:
            _fail("entry block arguments must have the types of the function inputs")
        if self.arg_attrs is not None and len(self.arg_attrs) != len(inputs):
            _fail(f"arg_attrs has {len(self.arg_attrs)} entries for {len(inputs)} args")

    @classmethod
    def parse(cls, parser: Parser) -> FuncOp:
        visibility = parser.parse_optional_visibility_keyword()
        name, inputs, outputs, region, extra, arg_attrs, res_attrs = parse_func_op_like(
            parser, reserved_attr_names=cls.RESERVED
        )
        func = cls(
            name,
            (inputs, outputs),
            region,
            None if visibility is None else visibility.data,
            arg_attrs=arg_attrs,
            res_attrs=res_attrs,
        )
        if extra is not None:
            func.attributes |= extra.data
        return func

    def print(self, printer: Printer) -> None:
        if self.sym_visibility is not None:
            printer.print_string(f" {self.sym_visibility.data}")
        print_func_op_like(
            printer,
            self.sym_name,
            self.function_type,
            self.body,
            self.attributes,
            arg_attrs=self.arg_attrs,
            res_attrs=self.res_attrs,
            reserved_attr_names=self.RESERVED,
        )


@irdl_op_definition
class ReturnOp(IRDLOperation):
    name = "tt.return"

    srcs = var_operand_def()

    traits = traits_def(Pure(), HasParent(FuncOp), IsTerminator(), ReturnLike())
    assembly_format = "attr-dict ($srcs^ `:` type($srcs))?"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[values])

    def verify_(self) -> None:
        func = self.parent_op()
        assert isinstance(func, FuncOp)
        expected = func.function_type.outputs.data
        if self.srcs.types != expected:
            _fail(f"returns ({_list(self.srcs.types)}), the function ({_list(expected)})")


class _CallSymbolUser(SymbolUserOpInterface):
    def verify(self, op: Operation) -> None:
        assert isinstance(op, CallOp)
        callee = SymbolTable.lookup_symbol(op, op.callee)
        if not isinstance(callee, FuncOp):
            _fail(f"'{op.callee}' does not name a tt.func")
        expected = callee.function_type
        if op.arguments.types != expected.inputs.data:
            _fail(f"call operand types do not match {expected} of {op.callee}")
        if op.res.types != expected.outputs.data:
            _fail(f"call result types do not match {expected} of {op.callee}")


@irdl_op_definition
class CallOp(IRDLOperation):
    name = "tt.call"

    callee = prop_def(FlatSymbolRefAttrConstr)
    arguments = var_operand_def()
    res = var_result_def()

    traits = traits_def(_CallSymbolUser())
    assembly_format = (
        "$callee `(` $arguments `)` attr-dict `:` functional-type($arguments, $res)"
    )

    def __init__(
        self,
        callee: str | SymbolRefAttr,
        arguments: Sequence[SSAValue | Operation],
        result_types: Sequence[Attribute],
    ):
        super().__init__(
            operands=[arguments],
            result_types=[result_types],
            properties={"callee": SymbolRefAttr(callee)},
        )


# ---------------------------------------------------------------------------------------
# Program ids and ranges
# ---------------------------------------------------------------------------------------


class _ProgramAxisOp(IRDLOperation):
    """Shared shape of ``tt.get_program_id`` and ``tt.get_num_programs``."""

    axis = prop_def(ProgramIDDimAttr)
    result = result_def(I32)

    traits = traits_def(Pure())
    assembly_format = "$axis attr-dict `:` type($result)"

    def __init__(self, axis: int):
        dim = tuple(ProgramIDDim)[axis]
        super().__init__(result_types=[i32], properties={"axis": ProgramIDDimAttr(dim)})

    @property
    def axis_index(self) -> int:
        return tuple(ProgramIDDim).index(self.axis.data)


@irdl_op_definition
class GetProgramIdOp(_ProgramAxisOp):
    name = "tt.get_program_id"


@irdl_op_definition
class GetNumProgramsOp(_ProgramAxisOp):
    name = "tt.get_num_programs"


@irdl_op_definition
class MakeRangeOp(IRDLOperation):
    """``[start, end)`` as a 1-D tensor of i32."""

    name = "tt.make_range"
    irdl_options = (ParsePropInAttrDict(),)

    start = prop_def(IntegerAttr[I32])
    end = prop_def(IntegerAttr[I32])
    result = result_def(TensorType.constr(I32))

    traits = traits_def(Pure())
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, start: int, end: int):
        super().__init__(
            result_types=[TensorType(i32, [end - start])],
            properties={"end": IntegerAttr(end, i32), "start": IntegerAttr(start, i32)},
        )

    def verify_(self) -> None:
        start, end = self.start.value.data, self.end.value.data
        if end <= start:
            _fail(f"end ({end}) must be greater than start ({start})")
        if shape_of(self.result.type) != [end - start]:
            _fail(f"result must be tensor<{end - start}xi32>, got {self.result.type}")


# ---------------------------------------------------------------------------------------
# Shape manipulation
# ---------------------------------------------------------------------------------------


class _SrcToResultOp(IRDLOperation):
    """One operand, one result (tensors unless a subclass says otherwise), printed
    ``$src attr-dict : type($src) -> type($result)``."""

    src = operand_def(TensorConstr)
    result = result_def(TensorConstr)

    traits = traits_def(Pure())
    assembly_format = "$src attr-dict `:` type($src) `->` type($result)"

    def _check_same_element(self) -> None:
        if element_type(self.src.type) != element_type(self.result.type):
            _fail(f"element types differ: {self.src.type} vs {self.result.type}")


@irdl_op_definition
class SplatOp(_SrcToResultOp):
    """A scalar repeated into every element of a tensor."""

    name = "tt.splat"

    src = operand_def()

    def __init__(self, src: SSAValue | Operation, shape: Sequence[int]):
        value = SSAValue.get(src)
        super().__init__(operands=[value], result_types=[TensorType(value.type, shape)])

    def verify_(self) -> None:
        if isinstance(self.src.type, TensorType):
            _fail(f"splat takes a scalar, got {self.src.type}")
        self._check_same_element()


@irdl_op_definition
class BroadcastOp(_SrcToResultOp):
    """Expands dimensions of size 1; other dimensions stay as they are."""

    name = "tt.broadcast"

    def verify_(self) -> None:
        self._check_same_element()
        src, dst = shape_of(self.src.type), shape_of(self.result.type)
        if len(src) != len(dst) or any(s not in (1, d) for s, d in zip(src, dst)):
            _fail(f"cannot broadcast shape {src} to {dst}")


@irdl_op_definition
class ExpandDimsOp(_SrcToResultOp):
    name = "tt.expand_dims"
    irdl_options = (ParsePropInAttrDict(),)

    axis = prop_def(IntegerAttr[I32])

    def verify_(self) -> None:
        self._check_same_element()
        src, axis = shape_of(self.src.type), self.axis.value.data
        _check_axis(axis, len(src) + 1)
        expected = src[:axis] + [1] + src[axis:]
        if shape_of(self.result.type) != expected:
            _fail(f"expand_dims at {axis} of {src} gives {expected}, not {self.result.type}")


@irdl_op_definition
class ReshapeOp(_SrcToResultOp):
    """Same elements, another shape; ``allow_reorder`` lets the compiler permute them."""

    name = "tt.reshape"
    allow_reorder = opt_prop_def(UnitAttr)
    efficient_layout = opt_prop_def(UnitAttr)

    assembly_format = (
        "$src (`allow_reorder` $allow_reorder^)? (`efficient_layout` $efficient_layout^)?"
        " attr-dict `:` type($src) `->` type($result)"
    )

    def verify_(self) -> None:
        self._check_same_element()
        src, dst = self.src.type, self.result.type
        if src.element_count() != dst.element_count():
            _fail(f"reshape must keep the number of elements: {src} -> {dst}")


@irdl_op_definition
class TransOp(_SrcToResultOp):
    """Permutes dimensions: result dimension i is source dimension ``order[i]``."""

    name = "tt.trans"
    irdl_options = (ParsePropInAttrDict(),)

    order = prop_def(I32ArrayConstr)

    def verify_(self) -> None:
        self._check_same_element()
        order, src = list(self.order.get_values()), shape_of(self.src.type)
        if sorted(order) != list(range(len(src))):
            _fail(f"order {order} is not a permutation of the {len(src)} dimensions")
        expected = [src[i] for i in order]
        if shape_of(self.result.type) != expected:
            _fail(f"transposing {src} by {order} gives {expected}, not {self.result.type}")


@irdl_op_definition
class HistogramOp(_SrcToResultOp):
    """Counts of each value of a 1-D integer tensor in bins ``0..N-1`` (N = result size)."""

    name = "tt.histogram"

    src = operand_def(TensorType.constr(base(IntegerType)))
    result = result_def(TensorType.constr(base(IntegerType)))

    def verify_(self) -> None:
        if len(shape_of(self.src.type)) != 1 or len(shape_of(self.result.type)) != 1:
            _fail("histogram takes and returns 1-D tensors")


class _TwoTensorsOp(IRDLOperation):
    """Two operands of one tensor type, printed ``$lhs, $rhs : type($lhs) -> type($result)``."""

    T: ClassVar = VarConstraint("T", TensorConstr)
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(TensorConstr)

    traits = traits_def(NoMemoryEffect())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)"

    def _check_result_shape(self, expected: list[int]) -> None:
        src, dst = self.lhs.type, self.result.type
        if element_type(dst) != element_type(src) or shape_of(dst) != expected:
            _fail(f"{self.name} of two {src} must give shape {expected}, not {dst}")


@irdl_op_definition
class CatOp(_TwoTensorsOp):
    """Concatenation along dimension 0."""

    name = "tt.cat"

    def verify_(self) -> None:
        src = shape_of(self.lhs.type)
        if not src:
            _fail("tt.cat needs tensors of rank 1 or more")
        self._check_result_shape([2 * src[0], *src[1:]])


@irdl_op_definition
class JoinOp(_TwoTensorsOp):
    """Joins along a new minor dimension of size 2."""

    name = "tt.join"

    def verify_(self) -> None:
        self._check_result_shape(shape_of(self.lhs.type) + [2])


@irdl_op_definition
class SplitOp(IRDLOperation):
    """The inverse of ``tt.join``: a tensor whose last dimension is 2, cut in two."""

    name = "tt.split"

    T: ClassVar = VarConstraint("T", TensorConstr)
    src = operand_def(TensorConstr)
    outLHS = result_def(T)
    outRHS = result_def(T)

    traits = traits_def(NoMemoryEffect())
    assembly_format = "$src attr-dict `:` type($src) `->` type($outLHS)"

    def verify_(self) -> None:
        src, out = self.src.type, self.outLHS.type
        if shape_of(src)[-1:] != [2]:
            _fail(f"split needs a last dimension of size 2, got {src}")
        if element_type(out) != element_type(src) or shape_of(out) != shape_of(src)[:-1]:
            _fail(f"split of {src} must give shape {shape_of(src)[:-1]}, not {out}")


@irdl_op_definition
class GatherOp(IRDLOperation):
    """``result[i...] = src[i... with indices[i...] along axis]``; result has the
    shape of ``indices``."""

    name = "tt.gather"
    irdl_options = (ParsePropInAttrDict(),)

    src = operand_def(TensorConstr)
    indices = operand_def(TensorType.constr(base(IntegerType)))
    result = result_def(TensorConstr)
    axis = prop_def(IntegerAttr[I32])
    efficient_layout = opt_prop_def(UnitAttr)

    traits = traits_def(Pure())
    assembly_format = (
        "$src `[` $indices `]` attr-dict `:` functional-type(operands, results)"
    )

    def verify_(self) -> None:
        src, idx, axis = shape_of(self.src.type), shape_of(self.indices.type), self.axis.value.data
        if len(src) != len(idx):
            _fail(f"src and indices must have the same rank: {src} vs {idx}")
        _check_axis(axis, len(src))
        if any(i > s for d, (i, s) in enumerate(zip(idx, src)) if d != axis):
            _fail(f"indices shape {idx} exceeds src shape {src} off axis {axis}")
        result = self.result.type
        if shape_of(result) != idx or element_type(result) != element_type(self.src.type):
            _fail(f"gather result must have shape {idx} and src's element type")


# ---------------------------------------------------------------------------------------
# Pointers, loads and stores
# ---------------------------------------------------------------------------------------


@irdl_op_definition
class AddPtrOp(IRDLOperation):
    """Pointer plus an element offset (scaled by the pointee size), elementwise."""

    name = "tt.addptr"

    T: ClassVar = VarConstraint("T", PtrLike)
    ptr = operand_def(T)
    offset = operand_def(IntLike)
    result = result_def(T)

    traits = traits_def(Pure())
    assembly_format = "$ptr `,` $offset attr-dict `:` type($result) `,` type($offset)"

    def __init__(self, ptr: SSAValue | Operation, offset: SSAValue | Operation):
        ptr = SSAValue.get(ptr)
        super().__init__(operands=[ptr, offset], result_types=[ptr.type])

    def verify_(self) -> None:
        _check_same_shape("addptr offset", self.ptr.type, self.offset.type)


def _check_block_pointer_options(
    ptr_type: Attribute, boundary_check: DenseArrayBase, padding: Attribute | None
) -> None:
    dims = boundary_check.get_values()
    if not (isinstance(ptr_type, PointerType) and ptr_type.is_block_pointer):
        if dims or padding is not None:
            _fail("boundaryCheck and padding apply only to block pointers")
        return
    for dim in dims:
        _check_axis(dim, len(shape_of(ptr_type.pointee_type)))


_PADDING_CODES = {1: PaddingOption.ZERO, 2: PaddingOption.NAN}
"""Triton's integer code for each padding option; its dumps print `padding = 1 : i32`."""


class _MemoryOp(IRDLOperation):
    """Triton's syntax for ``tt.load``/``tt.store``, which xDSL's declarative format
    cannot express (the other operand types follow from the pointer type)::

        tt.load %ptr[, %mask[, %other]] [cacheModifier = ca] [evictionPolicy = evict_last]
            {other attributes} : tensor<128x!tt.ptr<f32>>

    As in Triton's dumps, ``padding`` appears in the attributes as its integer code.
    Subclasses define the operands, ``ptr`` first (xDSL orders a base class's fields
    after the subclass's).
    """

    boundaryCheck = prop_def(I32ArrayConstr, DenseArrayBase.from_list(i32, []))
    cache = prop_def(CacheModifierAttr, CacheModifierAttr(CacheModifier.NONE))
    evict = prop_def(EvictionPolicyAttr, EvictionPolicyAttr(EvictionPolicy.NORMAL))

    KEYWORDS: ClassVar = {
        "cacheModifier": ("cache", CacheModifierAttr),
        "evictionPolicy": ("evict", EvictionPolicyAttr),
    }

    @staticmethod
    def types_for(ptr_type: Attribute) -> tuple[list[Attribute], list[Attribute]]:
        """The types of all operands (in order) and of the results, given the pointer's."""
        raise NotImplementedError

    @classmethod
    def parse(cls, parser: Parser) -> _MemoryOp:
        pos = parser.pos
        names = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, parser.parse_unresolved_operand
        )
        props: dict[str, Attribute] = {}
        while (keyword := parser.parse_optional_keyword_in(cls.KEYWORDS)) is not None:
            prop, attr_type = cls.KEYWORDS[keyword]
            parser.parse_punctuation("=")
            props[prop] = attr_type(parser.parse_str_enum(attr_type.enum_type))
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        ptr_type = parser.parse_type()
        if not is_pointer(ptr_type):
            parser.raise_error(f"expected a pointer type, got {ptr_type}")
        operand_types, result_types = cls.types_for(ptr_type)
        values = parser.resolve_operands(names, operand_types[: len(names)], pos)
        prop_names = cls.get_irdl_definition().properties.keys()
        if isinstance(padding := attrs.get("padding"), IntegerAttr):
            if padding.value.data not in _PADDING_CODES:
                parser.raise_error(f"padding must be one of {list(_PADDING_CODES)}")
            attrs["padding"] = PaddingOptionAttr(_PADDING_CODES[padding.value.data])
        return cls.build(
            operands=[values[i] if i < len(values) else None for i in range(3)],
            result_types=result_types,
            properties=props | {k: v for k, v in attrs.items() if k in prop_names},
            attributes={k: v for k, v in attrs.items() if k not in prop_names},
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_operand)
        defaults = {n: d.default_value for n, d in self.get_irdl_definition().properties.items()}
        for keyword, (prop, _) in self.KEYWORDS.items():
            if self.properties[prop] != defaults[prop]:
                printer.print_string(f" {keyword} = {self.properties[prop].data.value}")
        shown = {
            name: value
            for name, value in self.properties.items()
            if name not in ("cache", "evict", "operandSegmentSizes") and value != defaults[name]
        }
        if isinstance(padding := shown.get("padding"), PaddingOptionAttr):
            code = next(c for c, option in _PADDING_CODES.items() if option == padding.data)
            shown["padding"] = IntegerAttr(code, i32)
        printer.print_op_attributes(shown | self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.ptr.type)


@irdl_op_definition
class LoadOp(_MemoryOp):
    """Loads through a scalar pointer, a tensor of pointers, or a block pointer.

    Lanes whose ``mask`` is false read ``other`` (or are undefined without it).  Block
    pointers use ``boundaryCheck``/``padding`` instead of a mask.
    """

    name = "tt.load"

    ptr = operand_def(PtrLike)
    mask = opt_operand_def(BoolLike)
    other = opt_operand_def()
    result = result_def()
    padding = opt_prop_def(PaddingOptionAttr)
    isVolatile = prop_def(BoolAttr, _FALSE)

    traits = traits_def(MemoryReadEffect())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        ptr: SSAValue | Operation,
        mask: SSAValue | Operation | None = None,
        other: SSAValue | Operation | None = None,
        *,
        cache: CacheModifier = CacheModifier.NONE,
        evict: EvictionPolicy = EvictionPolicy.NORMAL,
        is_volatile: bool = False,
        boundary_check: Sequence[int] = (),
        padding: PaddingOption | None = None,
    ):
        ptr = SSAValue.get(ptr)
        super().__init__(
            operands=[ptr, mask, other],
            result_types=[loaded_type(ptr.type)],
            properties={
                "boundaryCheck": DenseArrayBase.from_list(i32, boundary_check),
                "padding": None if padding is None else PaddingOptionAttr(padding),
                "cache": CacheModifierAttr(cache),
                "evict": EvictionPolicyAttr(evict),
                "isVolatile": IntegerAttr.from_bool(is_volatile),
            },
        )

    @staticmethod
    def types_for(ptr_type: Attribute) -> tuple[list[Attribute], list[Attribute]]:
        value_type = loaded_type(ptr_type)
        return [ptr_type, with_element(value_type, i1), value_type], [value_type]

    def verify_(self) -> None:
        value_type = loaded_type(self.ptr.type)
        if self.result.type != value_type:
            _fail(f"result must have type {value_type}, got {self.result.type}")
        _check_mask(self.mask, value_type)
        if self.other is not None and self.other.type != value_type:
            _fail(f"other must have type {value_type}, got {self.other.type}")
        _check_block_pointer_options(self.ptr.type, self.boundaryCheck, self.padding)


@irdl_op_definition
class StoreOp(_MemoryOp):
    """Stores through a scalar pointer, a tensor of pointers, or a block pointer."""

    name = "tt.store"

    ptr = operand_def(PtrLike)
    value = operand_def()
    mask = opt_operand_def(BoolLike)

    traits = traits_def(MemoryWriteEffect())

    def __init__(
        self,
        ptr: SSAValue | Operation,
        value: SSAValue | Operation,
        mask: SSAValue | Operation | None = None,
        *,
        cache: CacheModifier = CacheModifier.NONE,
        evict: EvictionPolicy = EvictionPolicy.NORMAL,
        boundary_check: Sequence[int] = (),
    ):
        super().__init__(
            operands=[ptr, value, mask],
            properties={
                "boundaryCheck": DenseArrayBase.from_list(i32, boundary_check),
                "cache": CacheModifierAttr(cache),
                "evict": EvictionPolicyAttr(evict),
            },
        )

    @staticmethod
    def types_for(ptr_type: Attribute) -> tuple[list[Attribute], list[Attribute]]:
        value_type = loaded_type(ptr_type)
        return [ptr_type, value_type, with_element(value_type, i1)], []

    def verify_(self) -> None:
        value_type = loaded_type(self.ptr.type)
        if self.value.type != value_type:
            _fail(f"value must have type {value_type}, got {self.value.type}")
        _check_mask(self.mask, value_type)
        _check_block_pointer_options(self.ptr.type, self.boundaryCheck, None)


@irdl_op_definition
class MakeTensorPtrOp(IRDLOperation):
    """A block pointer: a ``shape``/``strides`` view of memory at ``base`` and the
    ``offsets`` of one block in it.  The block shape is the result's pointee tensor."""

    name = "tt.make_tensor_ptr"

    ELEM: ClassVar = VarConstraint("ELEM", AnyAttr())
    SPACE: ClassVar = VarConstraint("SPACE", AnyAttr())
    base = operand_def(ParamAttrConstraint(PointerType, (ELEM, SPACE)))
    shape = var_operand_def(I64)
    strides = var_operand_def(I64)
    offsets = var_operand_def(I32)
    result = result_def(
        ParamAttrConstraint(
            PointerType, (ParamAttrConstraint(TensorType, (AnyAttr(), ELEM, AnyAttr())), SPACE)
        )
    )
    order = prop_def(I32ArrayConstr)

    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(), SameVariadicOperandSize(),)
    assembly_format = (
        "$base `,` `[` $shape `]` `,` `[` $strides `]` `,` `[` $offsets `]`"
        " attr-dict `:` type($result)"
    )

    def verify_(self) -> None:
        rank = len(shape_of(self.result.type.pointee_type))
        if len(self.shape) != rank:
            _fail(f"a block pointer of rank {rank} needs {rank} shape, strides and offsets")
        if sorted(self.order.get_values()) != list(range(rank)):
            _fail(f"order {list(self.order.get_values())} is not a permutation of {rank} dims")


@irdl_op_definition
class AdvanceOp(IRDLOperation):
    """A block pointer moved by ``offsets`` elements along each dimension."""

    name = "tt.advance"

    T: ClassVar = VarConstraint("T", base(PointerType))
    ptr = operand_def(T)
    offsets = var_operand_def(I32)
    result = result_def(T)

    traits = traits_def(Pure())
    assembly_format = "$ptr `,` `[` $offsets `]` attr-dict `:` type($result)"

    def verify_(self) -> None:
        if not self.ptr.type.is_block_pointer:
            _fail(f"advance needs a block pointer, got {self.ptr.type}")
        rank = len(shape_of(self.ptr.type.pointee_type))
        if len(self.offsets) != rank:
            _fail(f"advance of a rank-{rank} block pointer needs {rank} offsets")


@irdl_op_definition
class DescriptorReduceOp(IRDLOperation):
    """``value`` combined (``kind``: add, min, max...) into the block of the tensor that a
    block pointer from ``tt.make_tensor_ptr`` names, element by element, atomically; elements
    outside the tensor are left alone.  The language makes it only for the reductions a
    backend's options list as native (`naiad.language.tensor_descriptor`: fp16 and bf16 minima
    and maxima, which the NVIDIA copy engine reduces); other descriptor atomics are element
    atomics."""

    name = "tt.descriptor_reduce"

    ptr = operand_def(base(PointerType))
    value = operand_def(TensorType)
    kind = prop_def(StringAttr)

    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$ptr `,` $value attr-dict `:` type($ptr) `,` type($value)"

    def __init__(self, ptr: SSAValue, value: SSAValue, kind: str):
        super().__init__(operands=[ptr, value], properties={"kind": StringAttr(kind)})

    def verify_(self) -> None:
        if not self.ptr.type.is_block_pointer or self.ptr.type.pointee_type != self.value.type:
            _fail(f"tt.descriptor_reduce needs a block pointer to {self.value.type}, got {self.ptr.type}")


# ---------------------------------------------------------------------------------------
# Atomics
# ---------------------------------------------------------------------------------------


def _check_atomic_ptr(ptr_type: Attribute, value_type: Attribute) -> None:
    if loaded_type(ptr_type) != value_type:
        _fail(f"pointer {ptr_type} does not point to values of type {value_type}")


@irdl_op_definition
class AtomicRMWOp(IRDLOperation):
    """``old = *ptr; *ptr = old <op> val; return old``, elementwise, under ``mask``."""

    name = "tt.atomic_rmw"

    T: ClassVar = VarConstraint("T", AnyAttr())
    atomic_rmw_op = prop_def(RMWOpAttr)
    ptr = operand_def(PtrLike)
    val = operand_def(T)
    mask = opt_operand_def(BoolLike)
    sem = prop_def(MemSemanticAttr)
    scope = prop_def(MemSyncScopeAttr)
    result = result_def(T)

    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = (
        "$atomic_rmw_op `,` $sem `,` $scope `,` $ptr `,` $val (`,` $mask^)? attr-dict"
        " `:` functional-type(operands, $result)"
    )

    def verify_(self) -> None:
        _check_atomic_ptr(self.ptr.type, self.val.type)
        _check_mask(self.mask, self.val.type)


@irdl_op_definition
class AtomicCASOp(IRDLOperation):
    """``old = *ptr; if old == cmp: *ptr = val; return old``, elementwise."""

    name = "tt.atomic_cas"

    T: ClassVar = VarConstraint("T", AnyAttr())
    ptr = operand_def(PtrLike)
    cmp = operand_def(T)
    val = operand_def(T)
    sem = prop_def(MemSemanticAttr)
    scope = prop_def(MemSyncScopeAttr)
    result = result_def(T)

    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = (
        "$sem `,` $scope `,` $ptr `,` $cmp `,` $val attr-dict"
        " `:` functional-type(operands, $result)"
    )

    def verify_(self) -> None:
        _check_atomic_ptr(self.ptr.type, self.val.type)


@irdl_op_definition
class AtomicPollOp(IRDLOperation):
    """Load ``*ptr`` until it equals ``expected`` (result true) or until ``timeout_ns``
    nanoseconds have passed (result false; at least one load happens, even for 0).  Without a
    timeout it waits as long as it takes.  Scalars only."""

    name = "tt.atomic_poll"

    ptr = operand_def(base(PointerType))
    expected = operand_def(base(IntegerType))
    timeout_ns = opt_operand_def(I64)
    sem = prop_def(MemSemanticAttr)
    scope = prop_def(MemSyncScopeAttr)
    result = result_def(I1)

    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = (
        "$sem `,` $scope `,` $ptr `,` $expected (`,` $timeout_ns^)? attr-dict"
        " `:` functional-type(operands, $result)"
    )

    def verify_(self) -> None:
        _check_atomic_ptr(self.ptr.type, self.expected.type)


# ---------------------------------------------------------------------------------------
# Reductions and scans
# ---------------------------------------------------------------------------------------


class _CombineOp(IRDLOperation):
    """Shared checks of ``tt.reduce`` and ``tt.scan``: n tensors of one shape, and a
    single-block combine region taking 2n scalars and returning n."""

    srcs = var_operand_def(TensorConstr)
    axis = prop_def(IntegerAttr[I32])
    combineOp = region_def("single_block")

    traits = traits_def(Pure())
    RETURN_OP: ClassVar[type[IRDLOperation]]

    def _verify_combine(self) -> list[Attribute]:
        if not self.srcs:
            _fail(f"{self.name} needs at least one operand")
        shape = shape_of(self.srcs[0].type)
        for src in self.srcs:
            _check_same_shape(f"{self.name} operands", self.srcs[0].type, src.type)
        _check_axis(self.axis.value.data, len(shape))
        elements = [element_type(src.type) for src in self.srcs]
        block = self.combineOp.block
        if list(block.arg_types) != elements * 2:
            _fail(f"{self.name} region must take arguments ({_list(elements * 2)})")
        terminator = block.last_op
        if not isinstance(terminator, self.RETURN_OP):
            _fail(f"{self.name} region must end with {self.RETURN_OP.name}")
        returned = list(terminator.result.types)
        if returned != elements:
            _fail(
                f"{self.name} region returns {len(returned)} values ({_list(returned)}), "
                f"expected {len(elements)} ({_list(elements)})"
            )
        return elements


class _CombineReturnOp(IRDLOperation):
    """The terminator of a combine region: the combined values."""

    result = var_operand_def()

    assembly_format = "$result attr-dict `:` type($result)"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[values])


@irdl_op_definition
class ReduceReturnOp(_CombineReturnOp):
    name = "tt.reduce.return"

    traits = lazy_traits_def(lambda: (Pure(), HasParent(ReduceOp), IsTerminator(), ReturnLike()))


@irdl_op_definition
class ScanReturnOp(_CombineReturnOp):
    name = "tt.scan.return"

    traits = lazy_traits_def(lambda: (Pure(), HasParent(ScanOp), IsTerminator(), ReturnLike()))


@irdl_op_definition
class ReduceOp(_CombineOp):
    """Reduces each operand along ``axis`` with the combine region.  A result whose
    rank would be 0 is a scalar."""

    name = "tt.reduce"

    result = var_result_def()
    RETURN_OP: ClassVar = ReduceReturnOp

    def verify_(self) -> None:
        elements = self._verify_combine()
        shape = shape_of(self.srcs[0].type)
        del shape[self.axis.value.data]
        if len(self.result) != len(elements):
            _fail(f"reduce has {len(self.result)} results for {len(elements)} operands")
        for elem, res in zip(elements, self.result):
            is_scalar = not isinstance(res.type, TensorType)
            if (element_type(res.type), shape_of(res.type), is_scalar) != (elem, shape, not shape):
                kind = "a scalar" if not shape else f"a tensor of shape {shape}"
                _fail(f"reduce result must be {kind} of {elem}, got {res.type}")


@irdl_op_definition
class ScanOp(_CombineOp):
    """Inclusive scan of each operand along ``axis`` (from the end if ``reverse``)."""

    name = "tt.scan"

    reverse = prop_def(BoolAttr)
    result = var_result_def(TensorConstr)
    RETURN_OP: ClassVar = ScanReturnOp

    def verify_(self) -> None:
        self._verify_combine()
        if self.result.types != self.srcs.types:
            _fail("scan results must have the operand types")


# ---------------------------------------------------------------------------------------
# Dot
# ---------------------------------------------------------------------------------------


@irdl_op_definition
class DotOp(IRDLOperation):
    """``d = a @ b + c`` on 2-D ``[M,K] x [K,N]`` or batched 3-D ``[B,M,K] x [B,K,N]``."""

    name = "tt.dot"
    irdl_options = (ParsePropInAttrDict(),)

    T: ClassVar = VarConstraint("T", TensorConstr)
    a = operand_def(TensorConstr)
    b = operand_def(TensorConstr)
    c = operand_def(T)
    d = result_def(T)
    inputPrecision = prop_def(InputPrecisionAttr, InputPrecisionAttr(InputPrecision.IEEE))
    maxNumImpreciseAcc = prop_def(IntegerAttr[I32], IntegerAttr(0, i32))

    traits = traits_def(Pure())
    assembly_format = (
        "$a `,` $b `,` $c (`,` `inputPrecision` `=` $inputPrecision^)? attr-dict"
        " `:` type($a) `*` type($b) `->` type($d)"
    )

    def __init__(
        self,
        a: SSAValue | Operation,
        b: SSAValue | Operation,
        c: SSAValue | Operation,
        input_precision: InputPrecision = InputPrecision.IEEE,
        max_num_imprecise_acc: int = 0,
    ):
        c = SSAValue.get(c)
        super().__init__(
            operands=[a, b, c],
            result_types=[c.type],
            properties={
                "inputPrecision": InputPrecisionAttr(input_precision),
                "maxNumImpreciseAcc": IntegerAttr(max_num_imprecise_acc, i32),
            },
        )

    def verify_(self) -> None:
        a, b, c = (shape_of(v.type) for v in (self.a, self.b, self.c))
        if not len(a) == len(b) == len(c) or len(a) not in (2, 3):
            _fail(f"dot needs 2-D or 3-D operands of one rank, got {a}, {b}, {c}")
        if a[-1] != b[-2]:
            _fail(f"dot K dimensions differ: {a} x {b}")
        if c != [*a[:-1], b[-1]] or a[:-2] != b[:-2]:
            _fail(f"dot of {a} x {b} gives {[*a[:-1], b[-1]]}, accumulator is {c}")


# ---------------------------------------------------------------------------------------
# Casts and elementwise math
# ---------------------------------------------------------------------------------------


class _CastOp(_SrcToResultOp):
    """Elementwise conversion: the result has the operand's shape."""

    def verify_(self) -> None:
        _check_same_shape(self.name, self.src.type, self.result.type)


@irdl_op_definition
class FpToFpOp(_CastOp):
    """Float conversion for the types arith cannot convert (fp8) and non-default
    rounding.  Narrowing needs an explicit ``rounding``."""

    name = "tt.fp_to_fp"

    src = operand_def(FloatLike)
    result = result_def(FloatLike)
    rounding = opt_prop_def(RoundingModeAttr)

    assembly_format = (
        "$src attr-dict (`,` `rounding` `=` $rounding^)? `:` type($src) `->` type($result)"
    )

    def verify_(self) -> None:
        super().verify_()
        narrowing = _bitwidth(element_type(self.result.type)) < _bitwidth(
            element_type(self.src.type)
        )
        if narrowing and self.rounding is None:
            _fail("rounding mode is required for a narrowing fp_to_fp")


@irdl_op_definition
class BitcastOp(_CastOp):
    """Reinterprets bits: same width, or pointer to pointer (``arith.bitcast``
    rejects pointers)."""

    name = "tt.bitcast"

    src = operand_def()
    result = result_def()

    def verify_(self) -> None:
        super().verify_()
        src, dst = self.src.type, self.result.type
        if is_pointer(src) != is_pointer(dst):
            _fail(f"cannot bitcast between pointer and non-pointer: {src} -> {dst}")
        if _bitwidth(element_type(src)) != _bitwidth(element_type(dst)):
            _fail(f"bitcast needs the same bit width: {src} -> {dst}")


@irdl_op_definition
class IntToPtrOp(_CastOp):
    name = "tt.int_to_ptr"

    src = operand_def(I64Like)
    result = result_def(PtrLike)


@irdl_op_definition
class PtrToIntOp(_CastOp):
    name = "tt.ptr_to_int"

    src = operand_def(PtrLike)
    result = result_def(I64Like)


@irdl_op_definition
class ClampFOp(IRDLOperation):
    """``min(max(x, min), max)``; ``propagateNan = all`` returns NaN if any input is."""

    name = "tt.clampf"

    T: ClassVar = VarConstraint("T", FloatLike)
    x = operand_def(T)
    min = operand_def(T)
    max = operand_def(T)
    propagateNan = prop_def(PropagateNanAttr)
    result = result_def(T)

    traits = traits_def(Pure())
    assembly_format = (
        "$x `,` $min `,` $max `,` `propagateNan` `=` $propagateNan attr-dict"
        " `:` type($result)"
    )


@irdl_op_definition
class PreciseSqrtOp(IRDLOperation):
    """Correctly rounded square root (the default lowering may approximate)."""

    name = "tt.precise_sqrt"

    T: ClassVar = VarConstraint("T", FloatLike)
    x = operand_def(T)
    result = result_def(T)

    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` type($x)"


@irdl_op_definition
class PreciseDivFOp(IRDLOperation):
    """Correctly rounded division (the default lowering may approximate)."""

    name = "tt.precise_divf"

    T: ClassVar = VarConstraint("T", FloatLike)
    x = operand_def(T)
    y = operand_def(T)
    result = result_def(T)

    traits = traits_def(Pure())
    assembly_format = "$x `,` $y attr-dict `:` type($x)"


@irdl_op_definition
class MulhiUIOp(IRDLOperation):
    """High half of the unsigned double-width product."""

    name = "tt.mulhiui"

    T: ClassVar = VarConstraint("T", IntLike)
    x = operand_def(T)
    y = operand_def(T)
    result = result_def(T)

    traits = traits_def(Pure())
    assembly_format = "$x `,` $y attr-dict `:` type($x)"


def _check_all_same_shape(name: str, values: Sequence[SSAValue]) -> None:
    for value in values[1:]:
        _check_same_shape(f"{name} operands and results", values[0].type, value.type)


@irdl_op_definition
class ExternElementwiseOp(IRDLOperation):
    """Calls ``symbol`` of an external library (e.g. libdevice) on each element."""

    name = "tt.extern_elementwise"
    irdl_options = (ParsePropInAttrDict(),)

    srcs = var_operand_def()
    libname = prop_def(StringAttr)
    libpath = prop_def(StringAttr)
    symbol = prop_def(StringAttr)
    pure = prop_def(BoolAttr)
    result = result_def()

    assembly_format = "$srcs attr-dict `:` functional-type($srcs, $result)"

    def verify_(self) -> None:
        _check_all_same_shape(self.name, [*self.srcs, self.result])


@irdl_op_definition
class ElementwiseInlineAsmOp(IRDLOperation):
    """Inline assembly applied to ``packed_element`` elements of its operands at a time."""

    name = "tt.elementwise_inline_asm"
    irdl_options = (ParsePropInAttrDict(),)

    asm_string = prop_def(StringAttr)
    constraints = prop_def(StringAttr)
    pure = prop_def(BoolAttr)
    packed_element = prop_def(IntegerAttr[I32])
    args = var_operand_def()
    result = var_result_def()

    assembly_format = "$asm_string attr-dict ($args^ `:` type($args))? `->` type($result)"

    def verify_(self) -> None:
        values = [*self.args, *self.result]
        _check_all_same_shape(self.name, values)
        packed = self.packed_element.value.data
        if packed <= 0:
            _fail(f"packed_element must be positive, got {packed}")
        if values and isinstance(values[0].type, TensorType):
            if values[0].type.element_count() % packed:
                _fail(f"the number of elements must be a multiple of {packed}")


# ---------------------------------------------------------------------------------------
# Debugging and assumptions
# ---------------------------------------------------------------------------------------


@irdl_op_definition
class PrintOp(IRDLOperation):
    """Device-side print of ``prefix`` and each argument; ``isSigned`` per argument."""

    name = "tt.print"
    irdl_options = (ParsePropInAttrDict(),)

    prefix = prop_def(StringAttr)
    hex = prop_def(BoolAttr)
    args = var_operand_def()
    isSigned = prop_def(I32ArrayConstr)

    traits = traits_def(MemoryWriteEffect())
    assembly_format = "$prefix attr-dict (`:` $args^ `:` type($args))?"

    def verify_(self) -> None:
        if len(self.isSigned) != len(self.args):
            _fail(f"isSigned has {len(self.isSigned)} entries for {len(self.args)} args")


@irdl_op_definition
class AssertOp(IRDLOperation):
    """Aborts with ``message`` where ``condition`` is false."""

    name = "tt.assert"

    condition = operand_def(BoolLike)
    message = prop_def(StringAttr)

    traits = traits_def(MemoryWriteEffect())
    assembly_format = "$condition `,` $message attr-dict `:` type($condition)"


@irdl_op_definition
class AssumeOp(IRDLOperation):
    """Naiad-specific: the optimizer may take ``condition`` as true (``llvm.assume``)."""

    name = "tt.assume"

    condition = operand_def(I1)

    traits = traits_def(MemoryWriteEffect())
    assembly_format = "$condition attr-dict `:` type($condition)"


TT = Dialect(
    "tt",
    [
        FuncOp,
        ReturnOp,
        CallOp,
        GetProgramIdOp,
        GetNumProgramsOp,
        MakeRangeOp,
        SplatOp,
        BroadcastOp,
        ExpandDimsOp,
        ReshapeOp,
        TransOp,
        CatOp,
        JoinOp,
        SplitOp,
        GatherOp,
        HistogramOp,
        AddPtrOp,
        LoadOp,
        StoreOp,
        MakeTensorPtrOp,
        AdvanceOp,
        DescriptorReduceOp,
        AtomicRMWOp,
        AtomicCASOp,
        AtomicPollOp,
        ReduceOp,
        ReduceReturnOp,
        ScanOp,
        ScanReturnOp,
        DotOp,
        FpToFpOp,
        BitcastOp,
        IntToPtrOp,
        PtrToIntOp,
        ClampFOp,
        PreciseSqrtOp,
        PreciseDivFOp,
        MulhiUIOp,
        ExternElementwiseOp,
        ElementwiseInlineAsmOp,
        PrintOp,
        AssertOp,
        AssumeOp,
    ],
    [
        PointerType,
        CacheModifierAttr,
        EvictionPolicyAttr,
        PaddingOptionAttr,
        RMWOpAttr,
        MemSemanticAttr,
        MemSyncScopeAttr,
        ProgramIDDimAttr,
        RoundingModeAttr,
        PropagateNanAttr,
        InputPrecisionAttr,
    ],
)
