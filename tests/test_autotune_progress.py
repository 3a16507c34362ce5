"""The autotuner's progress line (naiad/runtime/autotune_progress.py): on a terminal one line,
rewritten with ``\\r`` after each config, shows config i/n, the best time so far and an ETA;
on anything else nothing is written while tuning.  A fake stream stands in for stderr.
"""

from __future__ import annotations

import math
import re
import sys

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.runtime.autotune_progress import TuningProgress, format_ms

pytestmark = pytest.mark.shipped_backends


class FakeStream:
    """stderr as a terminal (``tty``) or as a file or pipe, keeping what was written."""

    def __init__(self, tty: bool):
        self.tty, self.text, self.flushes = tty, "", 0

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        self.flushes += 1

    def isatty(self) -> bool:
        return self.tty


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def updates(text: str) -> list[str]:
    """Each state of the line, in order, without the padding that blanks a longer one before."""
    assert text.startswith("\r"), text
    return [update.rstrip() for update in text.split("\r")[1:]]


def etas(lines: list[str]) -> list[float]:
    return [float(re.search(r", ETA (\d+\.\d)s$", line)[1]) for line in lines]


@naiad.jit
def scale_kernel(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) * 3.0 + 1.0, mask=mask)


def tuned_scale(**options):
    return naiad.autotune([naiad.Config({"BLOCK": b}) for b in (32, 64, 128)], key=["n"],
                          **options)(scale_kernel)


def launch(kernel, n=1000):
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    out = np.zeros_like(x)
    kernel[lambda meta: (naiad.cdiv(n, meta["BLOCK"]),)](x, out, n)
    np.testing.assert_allclose(out, x * 3 + 1, rtol=1e-6)
    return kernel


@pytest.fixture
def printing(monkeypatch):
    """NAIAD_PRINT_AUTOTUNING on, a wide terminal (no line cut short)."""
    monkeypatch.setenv("NAIAD_PRINT_AUTOTUNING", "1")
    monkeypatch.setenv("COLUMNS", "400")


# -- a real kernel, tuned on the CPU --------------------------------------------------------------------
def test_a_terminal_sees_each_config_counted_with_the_best_time_and_an_eta(printing, monkeypatch):
    stream = FakeStream(tty=True)
    monkeypatch.setattr(sys, "stderr", stream)
    kernel = launch(tuned_scale(warmup=1, rep=2))
    lines = updates(stream.text)
    assert [re.match(r"autotune scale_kernel: config (\d)/3, best ", line)[1] for line in lines] == \
        ["1", "2", "3"]
    assert etas(lines)[-1] == 0.0 and all(eta >= 0 for eta in etas(lines))
    best = min(kernel.configs, key=lambda c: kernel.configs_timings[c][0])
    assert f", best {format_ms(kernel.configs_timings[best][0])} ({best}), ETA 0.0s" in lines[-1]
    assert kernel.best_config is best
    assert stream.text.endswith("\n") and stream.text.count("\n") == 1 and stream.flushes >= 4


def test_nothing_is_written_while_tuning_when_stderr_is_not_a_terminal(printing, monkeypatch, capsys):
    stream = FakeStream(tty=False)
    monkeypatch.setattr(sys, "stderr", stream)
    launch(tuned_scale(warmup=1, rep=2))
    assert stream.text == "" and stream.flushes == 0
    assert "naiad: autotuned kernel scale_kernel for key (1000, 'float32', 'float32')" in \
        capsys.readouterr().out                       # the summary stays


def test_no_line_without_print_autotuning(monkeypatch):
    stream = FakeStream(tty=True)
    monkeypatch.setattr(sys, "stderr", stream)
    launch(tuned_scale(warmup=1, rep=2))
    assert stream.text == ""


def test_an_error_while_tuning_still_ends_the_line(printing, monkeypatch):
    stream = FakeStream(tty=True)
    monkeypatch.setattr(sys, "stderr", stream)
    timed = []

    def bench(kernel_call, quantiles):
        if timed:
            raise RuntimeError("the device went away")
        timed.append(1)
        return [2.0] * len(quantiles)

    with pytest.raises(RuntimeError, match="the device went away"):
        launch(tuned_scale(do_bench=bench))
    assert updates(stream.text) == ["autotune scale_kernel: config 1/3, best 2 ms (BLOCK: 32, num_warps: 4, "
                                    "num_ctas: 1, num_stages: 3, maxnreg: None), ETA 0.0s"]
    assert stream.text.endswith("\n")


# -- the line itself, with a fake clock ------------------------------------------------------------------
def test_eta_falls_to_zero_and_best_keeps_the_fastest():
    clock, stream = FakeClock(), FakeStream(tty=True)
    progress = TuningProgress("k", 4, stream, clock=clock, columns=200)
    for name, ms in (("A", 3.0), ("B", 0.5), ("C", math.inf), ("D", 0.75)):
        clock.now += 2.0                                  # every config takes 2 s
        progress.timed(name, ms)
    progress.close()
    assert updates(stream.text) == [
        "autotune k: config 1/4, best 3 ms (A), ETA 6.0s",
        "autotune k: config 2/4, best 500 us (B), ETA 4.0s",
        "autotune k: config 3/4, best 500 us (B), ETA 2.0s",
        "autotune k: config 4/4, best 500 us (B), ETA 0.0s"]
    assert stream.text.endswith("\n")


def test_a_failed_first_config_has_no_best_yet():
    progress = TuningProgress("k", 2, FakeStream(tty=True), clock=FakeClock(), columns=200)
    progress.timed("A", math.inf)
    assert progress.line() == "autotune k: config 1/2, best none yet, ETA 0.0s"


def test_a_shorter_line_blanks_the_longer_one_before_it():
    stream = FakeStream(tty=True)
    progress = TuningProgress("k", 2, stream, clock=FakeClock(), columns=200)
    progress.timed("a long config name", 2.0)
    progress.timed("short", 1.0)
    first, second = stream.text.split("\r")[1:]
    assert len(second) == len(first) and second.startswith("autotune k: config 2/2, best 1 ms (short)")


def test_a_line_wider_than_the_terminal_is_cut_not_wrapped():
    stream = FakeStream(tty=True)
    progress = TuningProgress("k", 2, stream, clock=FakeClock(), columns=40)
    progress.timed("BLOCK: 128, num_warps: 4, num_stages: 3", 2.0)
    line = stream.text[1:]
    assert len(line) == 39 and line.startswith("autotune k: config 1/2, best 2 ms") and line.endswith("...")


def test_a_closed_stream_counts_as_no_terminal():
    class Closed(FakeStream):
        def isatty(self):
            raise ValueError("I/O operation on closed file")

    stream = Closed(tty=True)
    progress = TuningProgress("k", 1, stream, clock=FakeClock(), columns=80)
    progress.timed("A", 1.0)
    progress.close()
    assert stream.text == ""


@pytest.mark.parametrize("ms, text", [(0.0123, "12.3 us"), (4.56, "4.56 ms"), (1200.0, "1.2 s")])
def test_times_are_shown_in_the_unit_that_suits_them(ms, text):
    assert format_ms(ms) == text
