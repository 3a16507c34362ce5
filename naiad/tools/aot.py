"""``naiad compile``: compile one kernel ahead of time, for any target, with no device present.

    naiad compile kernels.py --kernel-name add --signature "*fp32:16,*fp32:16,i32,1024" \\
        --target cpu --out-dir build/

The signature is Triton's AOT syntax, one entry per parameter in order: a type string
(``*fp32``, ``i32``, ``fp16``, ...), optionally followed by ``:16`` (the value is divisible by
16; for pointers, the address is 16-byte aligned) or ``:1`` (the value is 1, compiled in as a
constant); a bare number is the value of a ``tl.constexpr`` parameter.  The target is ``cpu``
(this host), ``cpu:<arch>``, ``cuda:90``, or ``<backend>:<arch>[:<warp size>]`` for a plugin.
Every stage's output is written as ``<kernel>.<stage>`` and the JSON metadata as
``<kernel>.json``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from typing import Any, Callable

from naiad import knobs
from naiad.errors import NaiadError


class AOTError(NaiadError):
    """A bad ``naiad compile`` command line: the message says which argument and what to write."""


def load_kernel(path: str, name: str) -> Any:
    """The ``@jit`` function ``name`` defined in the Python file ``path``."""
    from naiad.runtime.jit import JITFunction

    if not os.path.isfile(path):
        raise AOTError(f"no such file: {path}")
    spec = importlib.util.spec_from_file_location(f"naiad_aot_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernels = {k: v for k, v in vars(module).items() if isinstance(v, JITFunction)}
    if name not in kernels:
        raise AOTError(f"{path} defines no @jit function {name!r}; it defines: "
                       f"{', '.join(sorted(kernels)) or 'none'} -- fix: pass one of them to --kernel-name")
    return kernels[name]


def _constant(text: str) -> Any:
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    if text in ("True", "False"):
        return text == "True"
    return None


def parse_signature(fn: Any, text: str) -> tuple[dict, dict, dict]:
    """Triton's ``(signature, constexprs, attrs)`` for ``fn`` from an AOT signature string."""
    from naiad.compiler.signatures import DIVISIBILITY
    from naiad.language import dtypes

    entries = [e.strip() for e in text.split(",")] if text.strip() else []
    if len(entries) != len(fn.arg_names):
        raise AOTError(f"--signature has {len(entries)} entries but {fn.__name__} has "
                       f"{len(fn.arg_names)} parameters ({', '.join(fn.arg_names)}) -- fix: one entry each")
    signature, constexprs, attrs = {}, {}, {}
    for name, param, entry in zip(fn.arg_names, fn.params, entries):
        ty, _, hint = entry.partition(":")
        value = _constant(ty)
        if value is not None:
            signature[name], constexprs[name] = "constexpr", value
            continue
        if param.is_constexpr:
            raise AOTError(f"parameter {name!r} is a tl.constexpr: give its value in --signature, not {entry!r}")
        try:
            dtypes.str_to_ty(ty)
        except NaiadError:
            raise AOTError(f"--signature entry {entry!r} for {name!r}: {ty!r} is not a type string "
                           f"(write e.g. *fp32, i32, fp16) or a number") from None
        if hint == "1" and not ty.startswith("*"):
            signature[name], constexprs[name] = "constexpr", 1
        elif hint == "16":
            signature[name], attrs[name] = ty, list(DIVISIBILITY)
        elif hint:
            raise AOTError(f"--signature entry {entry!r}: after ':' write 16 (divisible by 16) or 1 "
                           f"(equal to 1), not {hint!r}")
        else:
            signature[name] = ty
    return signature, constexprs, attrs


def parse_target(text: str) -> Any:
    """``cpu`` (this host), or ``<backend>:<arch>[:<warp size>]`` (the warp size defaults to
    the backend's ``default_warp_size``, or what it says for the architecture when that is a
    function of it)."""
    from naiad.backends.compiler import GPUTarget
    from naiad.backends.discovery import registry

    if ":" not in text:
        from naiad.backends.selection import driver_for

        backend = registry.get_or_failure(text) if text in registry.sources() else None
        if not hasattr(backend, "driver"):
            raise AOTError(f"no backend named {text!r} (see `naiad backends`) -- fix: --target "
                           f"<backend>:<arch>, e.g. cuda:90")
        if not backend.driver.is_active():
            raise AOTError(f"--target {text}: the {text} backend has no device here to ask for its "
                           f"architecture -- fix: name it, e.g. --target {text}:<arch>")
        return driver_for(backend).get_current_target()
    backend, arch, *warp = text.split(":")
    if len(warp) > 1 or not arch:
        raise AOTError(f"--target {text!r}: write <backend>:<arch>[:<warp size>], e.g. cuda:90")
    if not warp:
        entry = registry.get_or_failure(backend) if backend in registry.sources() else None
        default = getattr(getattr(entry, "compiler", None), "default_warp_size", 32)
        warp = [default(arch) if callable(default) else default]     # hip: by the architecture
    return GPUTarget(backend, int(arch) if arch.isdigit() else arch, int(warp[0]))


def compile_to_dir(path: str, kernel_name: str, signature: str, target: str, out_dir: str,
                   options: dict, write: Callable[[str], Any] | None = None) -> dict[str, str]:
    """Compile and write every stage and the metadata; returns stage -> file written."""
    from naiad.compiler.compiler import ASTSource, compile, make_backend

    fn = load_kernel(path, kernel_name)
    sig, constexprs, attrs = parse_signature(fn, signature)
    gpu_target = parse_target(target)
    heard: dict[str, Any] = {}
    with knobs.compilation.scope():                 # per-stage times, for --timings
        outer = knobs.compilation.listener

        def listen(src: Any, metadata: Any, times: dict, cache_hit: bool) -> None:
            heard.update(times=times, cache_hit=cache_hit)
            if outer is not None:
                outer(src, metadata, times, cache_hit)
        knobs.compilation.listener = listen
        start = time.perf_counter()
        kernel = compile(ASTSource(fn, sig, constexprs, attrs), target=gpu_target, options=options)
        elapsed = time.perf_counter() - start
    backend = make_backend(gpu_target)
    os.makedirs(out_dir, exist_ok=True)
    written = {}
    for stage, content in kernel.asm.items():
        file = os.path.join(out_dir, f"{kernel.name}.{stage}")
        if backend.stage_codec(stage).binary:
            with open(file, "wb") as f:
                f.write(bytes(content))
        else:
            with open(file, "w", encoding="utf-8") as f:
                f.write(content)
        written[stage] = file
    meta = os.path.join(out_dir, f"{kernel.name}.json")
    with open(meta, "w", encoding="utf-8") as f:
        json.dump({"metadata": dict(kernel.metadata), "signature": kernel.signature,
                   "target": gpu_target.to_json(), "stages": list(kernel.asm)}, f, indent=2, default=str)
    written["json"] = meta
    if write is not None:
        stages = ", ".join(f"{stage} {seconds:.3f} s" for stage, seconds in heard.get("times", {}).items())
        how = "from the on-disk cache" if heard.get("cache_hit") else stages
        write(f"compiled {kernel.name} for {gpu_target.backend}:{gpu_target.arch} in {elapsed:.3f} s"
              f"{f' ({how})' if how else ''}\n")
        for stage, file in written.items():
            write(f"  {stage:8} {file}\n")
    return written
