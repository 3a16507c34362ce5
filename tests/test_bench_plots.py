"""bench/plots.py, the bench scripts' pictures: a PNG beside the CSV with matplotlib, one line
saying how to get it without (never a crash), and a clear message for a CSV it cannot read.
"""

from __future__ import annotations

import builtins
import importlib
import os

import pytest

pytestmark = pytest.mark.shipped_backends

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

SWEEP = """kernel,size,naiad GB/s,triton GB/s
add,256,10.5,11.0
add,1024,40.0,39.0
add,4096,160.0,
"""


@pytest.fixture
def plots(monkeypatch):
    monkeypatch.syspath_prepend(BENCH)
    return importlib.import_module("plots")


def sweep_png(plots, csv_path):
    rows = plots.read_rows(str(csv_path), "kernel", "size", "naiad GB/s", "triton GB/s")
    lines = plots.Lines("add", "elements", "GB/s",
                        {name: [(int(r["size"]), plots.number(r[f"{name} GB/s"])) for r in rows]
                         for name in ("naiad", "triton")}, x_log=True, reference=100.0)
    bars = plots.Bars("at each size", "GB/s", [r["size"] for r in rows],
                      {name: [plots.number(r[f"{name} GB/s"]) for r in rows] for name in ("naiad", "triton")})
    return plots.write_png(str(csv_path), [lines, bars], "a sweep")


def test_a_csv_gets_a_png_beside_it(plots, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    csv_path = tmp_path / "sweep.csv"
    csv_path.write_text(SWEEP)
    png = sweep_png(plots, csv_path)
    assert png == str(tmp_path / "sweep.png")
    with open(png, "rb") as f:
        assert f.read(8) == PNG_SIGNATURE
    assert capsys.readouterr().out == f"wrote {png}\n"


def test_without_matplotlib_one_line_says_how_to_get_it(plots, tmp_path, monkeypatch, capsys):
    real_import = builtins.__import__

    def without_matplotlib(name, *args, **kwargs):
        if name.split(".")[0] == "matplotlib":
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_matplotlib)
    csv_path = tmp_path / "sweep.csv"
    csv_path.write_text(SWEEP)
    assert sweep_png(plots, csv_path) is None
    assert capsys.readouterr().out == "no plot: matplotlib is not installed -- pip install 'naiad[plot]'\n"
    assert not (tmp_path / "sweep.png").exists()


def test_a_script_plots_its_own_csv(plots, tmp_path):
    """bench/cpu_matmul.py's --plot: the fp32, bf16 and attention panels from its CSV."""
    pytest.importorskip("matplotlib")
    cpu_matmul = importlib.import_module("cpu_matmul")
    csv_path = tmp_path / "cpu-matmul.csv"
    csv_path.write_text(
        "benchmark,tile,naiad GFLOP/s,numpy GFLOP/s,torch GFLOP/s,peer/naiad time (speed ratio)\n"
        "matmul fp32 256^3,32,107,106.6,104.9,1.003\n"
        "matmul fp32 512^3,32,155.2,200.1,196.8,0.7754\n"
        "matmul bf16 256^3,32,231,nan,327.3,0.7058\n"
        "attention fwd fp32 B1 H8 N512 D64,64,151.6,nan,123.4,1.228\n")
    png = cpu_matmul.plot(str(csv_path))
    with open(png, "rb") as f:
        assert f.read(8) == PNG_SIGNATURE


def test_a_csv_without_the_columns_ends_with_one_line(plots, tmp_path):
    csv_path = tmp_path / "other.csv"
    csv_path.write_text("call,median_us\nadd,1.0\n")
    with pytest.raises(SystemExit, match=r"other.csv has no column 'kernel' -- fix: give a CSV that "
                                         r"this script wrote"):
        plots.read_rows(str(csv_path), "call", "kernel")
    with pytest.raises(SystemExit, match=r"cannot read .*missing.csv: No such file or directory"):
        plots.read_rows(str(tmp_path / "missing.csv"))
