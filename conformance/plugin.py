"""pytest plugin that runs Triton's own language tests against Naiad (loaded by run.py as
``-p plugin`` from this folder).

It does three things and nothing else:

* replaces each test module's ``patch_kernel`` helper with one that edits the kernel's source
  through ``JITFunction.src`` / ``_unsafe_update_src``, so that the tests' source-templating works
  in both of the suite's modes (Triton's interpreter-mode helper ``exec``s the edited source,
  which leaves a function whose source no compiler can find);
* skips, with a stated reason, the cases that cannot mean anything off an NVIDIA/AMD GPU
  (`GPU_ONLY`: they read PTX/TTGIR text or call ``torch.cuda``) when ``--device`` is not cuda;
* prints one line per test group (file::function): passed, skipped, failed.
"""

from __future__ import annotations

import collections

import pytest

#: test function -> why it cannot run off a GPU.  Matched on the function name (no parameters).
GPU_ONLY = {
    "test_constexpr": "checks the TTGIR/PTX text Triton's CUDA backend emits",
    "test_assume": "checks the TTGIR/PTX text Triton's CUDA backend emits",
    "test_no_rematerialization_op": "checks TTGIR layout conversions",
    "test_poison_return": "checks the LLVM IR text of Triton's CUDA backend",
    "test_tl_range_fuse": "checks the TTGIR of Triton's loop-fusion pass",
    "test_tl_range_fuse_dependent": "checks the TTGIR of Triton's loop-fusion pass",
    "test_tl_range_option_none": "checks the TTGIR of Triton's pipeliner",
    "test_disable_licm": "checks the TTGIR of Triton's LICM option",
    "test_dot_mulbroadcasted": "checks the TTGIR of Triton's dot lowering",
    "test_zero_strided_tensors": "calls torch.cuda",
    "test_tensor_descriptor_batched_gemm_3d_tma": "calls torch.cuda.synchronize",
    "test_side_effectful_reduction": "calls torch.cuda",
    "test_side_effectful_scan": "calls torch.cuda",
    "test_side_effectful_reduction_2d": "calls torch.cuda",
}


def _patch_kernel(template, to_replace):
    """Triton's test helper: the kernel ``template`` with each key of ``to_replace`` replaced
    in its source, as a new kernel."""
    import triton

    kernel = triton.JITFunction(template.fn)
    src = kernel.src
    for old, new in to_replace.items():
        src = src.replace(old, new)
    kernel._unsafe_update_src(src)
    return kernel


def _group(item: pytest.Item) -> str:
    return f"{item.path.name}::{item.originalname if hasattr(item, 'originalname') else item.name}"


def pytest_collection_modifyitems(config, items):
    on_gpu = config.getoption("--device", default="cpu") == "cuda"
    seen = set()
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and id(module) not in seen:
            seen.add(id(module))
            if hasattr(module, "patch_kernel"):
                module.patch_kernel = _patch_kernel
        name = getattr(item, "originalname", item.name)
        if not on_gpu and name in GPU_ONLY:
            item.add_marker(pytest.mark.skip(reason=f"naiad-conformance: GPU only ({GPU_ONLY[name]})"))


class _Summary:
    def __init__(self) -> None:
        self.counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report):
        group = report.nodeid.split("[")[0]
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            outcome = "skipped" if report.skipped else report.outcome
            self.counts[group][outcome] += 1
        elif report.when == "teardown" and report.failed:
            self.counts[group]["failed"] += 1

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter):
        if not self.counts:
            return
        write = terminalreporter.write_line
        write("")
        write(f"{'group':70} {'passed':>7} {'skipped':>8} {'failed':>7}")
        for group in sorted(self.counts):
            c = self.counts[group]
            write(f"{group[-70:]:70} {c['passed']:7} {c['skipped']:8} {c['failed']:7}")


def pytest_configure(config):
    config.pluginmanager.register(_Summary(), "naiad-conformance-summary")
