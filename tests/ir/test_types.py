"""TTIR types: `!tt.ptr` in all its forms, the scalar type table, and the helpers."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import IntegerType, TensorType, f16, f32, i1, i32
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from naiad.ir import (
    TRITON_SCALAR_TYPES,
    PointerType,
    element_type,
    is_pointer,
    is_tensor,
    make_context,
    parse_module,
    print_module,
    shape_of,
    tensor_of,
    with_element,
)


def parse_type(text: str):
    return Parser(make_context(), text).parse_type()


@pytest.mark.parametrize(
    "text, expected",
    [
        ("!tt.ptr<f32>", PointerType(f32)),
        ("!tt.ptr<f32, 1>", PointerType(f32)),
        ("!tt.ptr<f16, 3>", PointerType(f16, 3)),
        ("!tt.ptr<tensor<128x64xf16>>", PointerType(tensor_of([128, 64], f16))),
        ("!tt.ptr<!tt.ptr<i32>>", PointerType(PointerType(i32))),
        ("tensor<4x!tt.ptr<f32, 3>>", tensor_of([4], PointerType(f32, 3))),
    ],
)
def test_pointer_parses(text, expected) -> None:
    assert parse_type(text) == expected


@pytest.mark.parametrize(
    "ptr, text",
    [
        (PointerType(f32), "!tt.ptr<f32>"),
        (PointerType(f32, 1), "!tt.ptr<f32>"),
        (PointerType(f32, 3), "!tt.ptr<f32, 3>"),
        (PointerType(f16, 0), "!tt.ptr<f16, 0>"),
        (PointerType(tensor_of([128, 64], f16)), "!tt.ptr<tensor<128x64xf16>>"),
        (PointerType(tensor_of([8], i32), 3), "!tt.ptr<tensor<8xi32>, 3>"),
    ],
)
def test_pointer_prints_like_triton(ptr, text) -> None:
    assert str(ptr) == text
    assert parse_type(text) == ptr


def test_block_pointer_cannot_point_to_pointers() -> None:
    with pytest.raises(VerifyException, match="cannot point to pointers"):
        PointerType(tensor_of([4], PointerType(f32)))


def test_block_pointer_flag() -> None:
    assert PointerType(tensor_of([4], f32)).is_block_pointer
    assert not PointerType(f32).is_block_pointer


def test_helpers_on_scalars_and_tensors() -> None:
    t = tensor_of([4, 8], f32)
    assert isinstance(t, TensorType) and is_tensor(t) and not is_tensor(f32)
    assert element_type(t) == f32 and element_type(i32) == i32
    assert shape_of(t) == [4, 8] and shape_of(f32) == []
    assert with_element(t, i1) == tensor_of([4, 8], i1)
    assert with_element(f32, i1) == i1


def test_is_pointer() -> None:
    assert is_pointer(PointerType(f32))
    assert is_pointer(tensor_of([4], PointerType(f32)))
    assert is_pointer(PointerType(tensor_of([4], f32)))
    assert not is_pointer(tensor_of([4], f32))
    assert not is_pointer(i32)


def test_unsigned_integers_are_signless() -> None:
    for bits in (8, 16, 32, 64):
        assert TRITON_SCALAR_TYPES[f"uint{bits}"] == IntegerType(bits)
        assert TRITON_SCALAR_TYPES[f"uint{bits}"] == TRITON_SCALAR_TYPES[f"int{bits}"]


FP8 = {
    "fp8e4nv": "f8E4M3FN",
    "fp8e5": "f8E5M2",
    "fp8e4b8": "f8E4M3FNUZ",
    "fp8e5b16": "f8E5M2FNUZ",
    "fp8e4b15": "f8E4M3B11FNUZ",
}


@pytest.mark.parametrize("triton_name, mlir_name", FP8.items())
def test_fp8_types_round_trip(triton_name: str, mlir_name: str) -> None:
    assert str(TRITON_SCALAR_TYPES[triton_name]) == mlir_name
    ptr = f"!tt.ptr<{mlir_name}>"
    text = (
        "builtin.module {\n"
        f"  tt.func public @k(%arg0: {ptr}, %arg1: tensor<16x{mlir_name}>) {{\n"
        f"    %0 = tt.load %arg0 : {ptr}\n"
        f"    %1 = tt.fp_to_fp %arg1 : tensor<16x{mlir_name}> -> tensor<16xf32>\n"
        "    tt.return\n"
        "  }\n"
        "}"
    )
    assert print_module(parse_module(text)) == text


@pytest.mark.parametrize("name", TRITON_SCALAR_TYPES)
def test_every_scalar_type_round_trips_in_a_pointer(name: str) -> None:
    ptr = PointerType(TRITON_SCALAR_TYPES[name])
    assert parse_type(str(ptr)) == ptr
