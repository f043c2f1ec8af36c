"""Plots: PNGs are written and the figures carry labels, legends and readable size ticks."""

import random

from rdmabench_report.cli import main
from rdmabench_report.group import group_by_run
from rdmabench_report.load import load_files
from rdmabench_report.plot import latency_cdf_figure, latency_percentiles_figure, rate_figure
from rdmabench_report.reference import load_reference

from synthetic import make_record, write_jsonl

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SIZES = [64 << i for i in range(0, 15)]  # 64 .. 1M


def results_file(tmp_path):
    rng = random.Random(7)
    records = []
    for mode in ("bw", "lat"):
        for size in SIZES:
            for repeat in range(2):
                base = 900 + size / 50 if mode == "lat" else 3000 + size / 10
                samples = [round(rng.lognormvariate(0, 0.3) * base) for _ in range(2000)]
                records.append(make_record(samples, label="loopback t1", mode=mode, size=size,
                                           repeat=repeat, repeats=2,
                                           gbps=min(90.0, size / 400)))
    return write_jsonl(tmp_path / "run.jsonl", records)


def test_plot_writes_non_empty_pngs(tmp_path, capsys):
    out_dir = tmp_path / "figs"
    assert main(["plot", results_file(tmp_path), "-o", str(out_dir),
                 "--reference", "rdma-write-vs-size", "--reference", "doca_dma_peak.csv",
                 "--reference", "virtual-rdma-latency"]) == 0
    printed = capsys.readouterr().out.split()
    names = sorted(p.rsplit("/", 1)[-1] for p in printed)
    assert names == ["latency_cdf_loopback_t1_write_bw.png", "latency_cdf_loopback_t1_write_lat.png",
                     "latency_percentiles.png", "message_rate_mops.png", "throughput_gbps.png"]
    for path in printed:
        data = open(path, "rb").read()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000


def test_throughput_figure_has_units_sizes_and_reference_legend(tmp_path):
    runs = group_by_run(load_files([results_file(tmp_path)]))
    figure = rate_figure(runs, load_reference("rdma-write-vs-size"), "gbps")
    ax = figure.axes[0]
    assert ax.get_xlabel() == "message size (bytes)"
    assert ax.get_ylabel() == "throughput (Gbit/s)"
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert "64" in ticks and "1M" in ticks and "4K" in ticks
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "loopback t1 write bw" in legend
    assert "loopback t1 write lat" not in legend  # ping-pong rows belong to the latency figures
    assert any(t.startswith("reference: rdma-write-throughput-workshop.txt")
               and t.endswith("(other hardware)") for t in legend)
    dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1
    # The run line is the mean over the two repeats.
    run_line = ax.get_lines()[0]
    assert list(run_line.get_xdata()) == SIZES


def test_latency_percentiles_only_for_lat_runs(tmp_path):
    runs = group_by_run(load_files([results_file(tmp_path)]))
    figure = latency_percentiles_figure(runs, [])
    assert [ax.get_title() for ax in figure.axes] == ["p50 latency", "p99 latency", "p99.9 latency"]
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    assert labels == ["loopback t1 write lat [half_round_trip]"]
    bw_only = {k: v for k, v in runs.items() if k[2] == "bw"}
    assert latency_percentiles_figure(bw_only, []) is None


def test_rate_figures_plot_streams_only(tmp_path):
    """A ping-pong's rate is its latency in another unit: the throughput and message-rate figures
    show bw runs, and a results file with lat runs only has none."""
    runs = group_by_run(load_files([results_file(tmp_path)]))
    for metric in ("gbps", "mops"):
        labels = [line.get_label() for line in rate_figure(runs, [], metric).axes[0].get_lines()]
        assert labels == ["loopback t1 write bw"], metric
    lat_only = {k: v for k, v in runs.items() if k[2] == "lat"}
    assert rate_figure(lat_only, [], "gbps") is None


def test_cdf_legend_gives_sizes_with_their_unit(tmp_path):
    runs = group_by_run(load_files([results_file(tmp_path)]))
    key = next(k for k in runs if k[2] == "lat")
    legend = [t.get_text() for t in latency_cdf_figure(key, runs[key]).axes[0].get_legend().get_texts()]
    assert legend[0] == "64 B" and "4 KiB" in legend and "1 MiB" in legend
    assert not any(t.endswith("M B") or t.endswith("K B") for t in legend)
