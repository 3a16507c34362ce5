"""naiad.compat: Triton kernel files import and compile unchanged; real Triton is left alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import naiad.compat
from naiad.compiler.frontend import ttir_for
from naiad.ir import print_module

TRITON_KERNEL_FILE = textwrap.dedent('''
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice


    @triton.jit
    def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
        pid = tl.program_id(axis=0)
        offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(output_ptr + offsets, libdevice.tanh(x + y), mask=mask)


    def grid(n):
        return (triton.cdiv(n, 1024),)
''')


@pytest.fixture
def compat():
    """Enable compat for one test; leave no `triton` module behind."""
    naiad.compat.enable()
    yield
    naiad.compat.disable()
    for name in [m for m in sys.modules if m == "triton" or m.startswith("triton.")]:
        del sys.modules[name]


def _import_file(tmp_path, name, text):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    sys.path.insert(0, str(tmp_path))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)


def test_triton_names_resolve_to_naiad(compat):
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice

    import naiad.language
    import naiad.language.extra.libdevice

    assert tl is naiad.language
    assert libdevice is naiad.language.extra.libdevice
    assert triton.jit is naiad.jit
    assert triton.cdiv(10, 4) == 3
    assert issubclass(triton.CompilationError, naiad.CompilationError)


def test_unmodified_triton_kernel_file_compiles(compat, tmp_path):
    module = _import_file(tmp_path, "triton_add_kernel", TRITON_KERNEL_FILE)
    x = np.zeros(100, np.float32)
    text = print_module(ttir_for(module.add_kernel, x, x, x, 100, BLOCK_SIZE=128))
    assert "tt.func public @add_kernel" in text
    assert 'symbol = "tanhf"' in text
    assert module.grid(3000) == (3,)


def test_missing_triton_module_is_a_clear_error(compat):
    with pytest.raises(naiad.compat.CompatError, match="does not provide 'triton.tools.nonexistent'"):
        import triton.tools.nonexistent  # noqa: F401


def test_disable_frees_the_triton_names(compat):
    naiad.compat.disable()
    assert not naiad.compat.is_enabled()
    assert "triton" not in sys.modules
    assert "triton.language" not in sys.modules


def test_enabling_after_real_triton_is_an_error(monkeypatch):
    fake = type(sys)("triton")
    monkeypatch.setitem(sys.modules, "triton", fake)
    with pytest.raises(naiad.compat.CompatError, match="a real Triton is already imported"):
        naiad.compat.enable()
    assert not naiad.compat.is_enabled()


def test_real_triton_beside_naiad_is_untouched_when_compat_is_off(tmp_path):
    package = tmp_path / "triton"
    package.mkdir()
    (package / "__init__.py").write_text("REAL = True\n")
    code = "import naiad, triton; print(triton.REAL, triton.__file__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**_clean_env(), "PYTHONPATH": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("True ") and str(package) in out.stdout


def test_environment_variable_enables_compat():
    code = "import naiad, triton.language as tl; print(tl.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**_clean_env(), "NAIAD_TRITON_COMPAT": "1"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "naiad.language"


def test_run_a_triton_script_with_python_m_naiad_compat(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(TRITON_KERNEL_FILE + "\nprint('grid', grid(5000), __name__)\n")
    out = subprocess.run([sys.executable, "-m", "naiad.compat", str(script)], capture_output=True,
                         text=True, env=_clean_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "grid (5,) __main__"


def _clean_env() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("NAIAD_")}


@pytest.mark.shipped_backends
def test_compile_publishes_the_binary_in_triton_s_cache_layout(compat, tmp_path, monkeypatch):
    """With TRITON_CACHE_DIR set, ``triton.compile`` leaves ``<dir>/<hash>/<name>.<binary>``,
    byte for byte the kernel's binary (torch's Inductor launches CUDA kernels from there);
    without it nothing is written, and a file already there is kept."""
    import triton
    from triton.compiler import ASTSource

    module = _import_file(tmp_path, "triton_add_kernel_published", TRITON_KERNEL_FILE)
    signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", "output_ptr": "*fp32", "n_elements": "i32",
                 "BLOCK_SIZE": "constexpr"}
    monkeypatch.setenv("NAIAD_CACHE_DIR", str(tmp_path / "naiad"))
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    kernel = triton.compile(ASTSource(module.add_kernel, signature, {"BLOCK_SIZE": 64}))
    assert not (tmp_path / "triton").exists()

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    kernel = triton.compile(ASTSource(module.add_kernel, signature, {"BLOCK_SIZE": 64}))
    folder = tmp_path / "triton" / kernel.hash
    path = folder / f"add_kernel.{kernel.backend.binary_ext}"
    assert [p.name for p in folder.iterdir()] == [path.name]
    assert path.read_bytes() == kernel.binary

    path.write_bytes(b"theirs")
    triton.compile(ASTSource(module.add_kernel, signature, {"BLOCK_SIZE": 64}))
    assert path.read_bytes() == b"theirs"
