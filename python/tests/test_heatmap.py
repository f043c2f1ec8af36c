"""Cluster heat-maps: one PNG per (op, mode, size) from records with a cluster member."""

import json

import pytest

from rdmabench_report.cli import main
from rdmabench_report.heatmap import _cluster_groups, heatmap_figure
from rdmabench_report.load import load_files

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def cluster_record(src, dst, mode, value, size=65536):
    results = {"gbps": value if mode == "bw" else 0.1, "mops": 1.0, "lat_us": {"p50": value if mode == "lat" else 5.0}}
    return {"schema": 1, "op": "write", "mode": mode, "size": size, "label": "tcp write", "results": results,
            "cluster": {"pattern": "pairs", "round": 0, "src_rank": src, "dst_rank": dst,
                        "src_host": f"10.0.0.{src + 1}:7471", "dst_host": f"10.0.0.{dst + 1}:7471", "hosts": 3}}


def write(tmp_path, records):
    path = tmp_path / "cluster.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_heatmap_writes_one_png_per_group(tmp_path, capsys):
    recs = [cluster_record(s, d, mode, 10.0 if (s, d) != (0, 2) else 1.0)
            for mode in ("bw", "lat") for s in range(3) for d in range(3) if s != d]
    assert main(["heatmap", write(tmp_path, recs), "-o", str(tmp_path / "figs")]) == 0
    printed = sorted(p.rsplit("/", 1)[-1] for p in capsys.readouterr().out.split())
    assert printed == ["heatmap_write_bw_65536.png", "heatmap_write_lat_65536.png"]
    for name in printed:
        assert (tmp_path / "figs" / name).read_bytes()[:8] == PNG_MAGIC


def test_cells_are_means_over_repeats_and_the_outlier_is_red(tmp_path):
    recs = [cluster_record(0, 1, "bw", 10.0), cluster_record(0, 1, "bw", 12.0), cluster_record(1, 0, "bw", 11.0),
            cluster_record(1, 2, "bw", 11.0), cluster_record(2, 1, "bw", 1.0)]
    groups, names = _cluster_groups(load_files([write(tmp_path, recs)]))
    cells = groups[("write", "bw", 65536)]
    assert cells[(0, 1)] == [10.0, 12.0]
    figure = heatmap_figure(("write", "bw", 65536), cells, names)
    texts = {t.get_text(): t.get_color() for t in figure.axes[0].texts}
    assert texts["11"] == "white" and texts["1"] == "red"
    assert "median 11" in figure.axes[0].get_title()


def host_verdict(host, slow, mode="bw"):
    side = {"ratio": 0.01 if slow else 1.0, "median": 0.2, "others_median": 20.0, "repeats_judged": 2,
            "repeats_slow": 2 if slow else 0, "repeat_ratio_min": 0.01, "repeat_ratio_max": 0.02, "slow": slow}
    return {"schema": 1, "kind": "cluster_host", "op": "write", "mode": mode, "size": 65536, "host": host,
            "name": f"10.0.0.{host + 1}:7471", "threshold": 0.8, "sends": side, "receives": side, "slow": slow}


def test_the_hosts_rdmabench_named_slow_are_red_and_their_verdict_is_in_the_legend(tmp_path, capsys):
    """A cluster file ends in per-host verdict lines: the loaders of measurements leave them out,
    and the heat-map marks the named host on both axes and in the legend."""
    recs = [cluster_record(s, d, "bw", 0.2 if 2 in (s, d) else 20.0) for s in range(3) for d in range(3) if s != d]
    path = write(tmp_path, recs + [host_verdict(h, h == 2) for h in range(3)])
    assert len(load_files([path])) == 6  # the verdict lines are not measurements
    assert main(["heatmap", path, "-o", str(tmp_path / "figs")]) == 0
    assert main(["summary", path]) == 0  # nor do they trouble the other readers
    from rdmabench_report.load import load_host_verdicts
    groups, names = _cluster_groups(load_files([path]))
    verdicts = {v["host"]: v for v in load_host_verdicts([path])}
    figure = heatmap_figure(("write", "bw", 65536), groups[("write", "bw", 65536)], names, verdicts=verdicts)
    ax = figure.axes[0]
    assert [t.get_color() for t in ax.get_xticklabels()] == ["black", "black", "red"]
    legend = figure.texts[-1].get_text()
    assert "2: 10.0.0.3:7471  SLOW: sends 0.01x, receives 0.01x the pairs without it" in legend, legend
    assert "0: 10.0.0.1:7471\n" in legend


def test_files_without_cluster_records_are_a_clear_error(tmp_path, capsys):
    rec = cluster_record(0, 1, "bw", 1.0)
    del rec["cluster"]
    assert main(["heatmap", write(tmp_path, [rec]), "-o", str(tmp_path / "f")]) == 2
    assert "no cluster records" in capsys.readouterr().err


def test_a_broken_cluster_member_names_the_line(tmp_path, capsys):
    rec = cluster_record(0, 1, "bw", 1.0)
    del rec["cluster"]["dst_rank"]
    assert main(["heatmap", write(tmp_path, [rec]), "-o", str(tmp_path / "f")]) == 2
    assert "cluster.jsonl:1: its cluster member lacks" in capsys.readouterr().err


if __name__ == "__main__":
    pytest.main([__file__])
