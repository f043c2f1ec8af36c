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
