"""Percentiles recomputed from bins: against the raw samples and against the documented rule."""

import random

import pytest

from rdmabench_report.hist import (QUANTILES, cdf_points_us, merge_bins, parse_bins,
                                   percentile_us, recompute_lat_us)
from rdmabench_report.errors import ReportError
from rdmabench_report.load import Record

from synthetic import bin_of, exact_percentile_us, histogram_bins, make_record


def lognormal(rng, n, median_ns, sigma):
    return [max(1, round(rng.lognormvariate(0, sigma) * median_ns)) for _ in range(n)]


def sample_sets():
    rng = random.Random(1234)
    return {
        "lognormal": lognormal(rng, 50_000, 1_500, 0.5),
        "bimodal": lognormal(rng, 30_000, 800, 0.1) + lognormal(rng, 3_000, 40_000, 0.3),
        "uniform": [rng.randint(200, 2_000_000) for _ in range(20_000)],
        "pareto_tail": [round(300 * rng.paretovariate(1.5)) for _ in range(40_000)],
        "float_half_rtt": [rng.uniform(250.0, 9_000.0) / 2 for _ in range(10_000)],
    }


def test_synthetic_bins_follow_the_documented_layout():
    # Guards the fixtures the other tests build; tests/e2e checks real output against the same layout.
    # Exact below 128 ns, then 128 sub-bins per power of two.
    assert bin_of(5) == (5, 6)
    assert bin_of(127) == (127, 128)
    assert bin_of(128) == (128, 129)
    assert bin_of(300) == (300, 302)          # m = 8: width 2
    assert bin_of(1001) == (1000, 1004)       # m = 9: width 4
    assert bin_of(1_000_000) == (999_424, 1_003_520)  # m = 19: width 4096
    for v in (128, 129, 255, 256, 4095, 4096, 123_456):
        low, high = bin_of(v)
        assert low <= v < high
        assert (high - low) / low <= 1 / 128


@pytest.mark.parametrize("name", list(sample_sets()))
def test_percentiles_from_bins_within_the_documented_error_of_exact(name):
    samples = sample_sets()[name]
    bins = parse_bins(histogram_bins(samples))
    for q in QUANTILES.values():
        exact = exact_percentile_us(samples, q)
        got = percentile_us(bins, q, min(samples) / 1000, max(samples) / 1000)
        assert got == pytest.approx(exact, rel=0.004), (name, q, got, exact)  # the README: within 0.4%


@pytest.mark.parametrize("name", list(sample_sets()))
def test_recomputed_percentiles_equal_stored_lat_us(name):
    record = Record("mem.jsonl", 1, make_record(sample_sets()[name]))
    recomputed = recompute_lat_us(record)
    for key in QUANTILES:
        assert recomputed[key] == pytest.approx(record.lat_us[key], rel=1e-12, abs=0)


def test_rank_rule_edges():
    # 10 samples in 10 distinct width-4 bins (512 <= v < 1024): p50 is rank 5,
    # p99 is rank ceil(9.9) = 10.
    samples = [600 + 8 * i for i in range(10)]
    bins = parse_bins(histogram_bins(samples))
    assert percentile_us(bins, 0.5) == pytest.approx((632 + 636) / 2 / 1000)
    assert percentile_us(bins, 0.99) == pytest.approx((672 + 676) / 2 / 1000)
    # An odd total: ceil(4.5) = 5, so the 5th of 9 samples (not the 4th).
    nine = parse_bins(histogram_bins(samples[:9]))
    assert percentile_us(nine, 0.5) == pytest.approx((632 + 636) / 2 / 1000)
    # rank is at least 1 even for q * total < 1.
    assert percentile_us(bins, 0.0) == pytest.approx((600 + 604) / 2 / 1000)


def test_clamp_to_observed_min_and_max():
    bins = [(1000, 1004, 1), (2000, 2016, 1)]
    assert percentile_us(bins, 0.5, min_us=1.003, max_us=2.001) == 1.003
    assert percentile_us(bins, 1.0, min_us=1.003, max_us=2.001) == 2.001
    assert percentile_us(bins, 1.0) == pytest.approx(2.008)
    assert percentile_us([], 0.5) is None


def test_bins_are_sorted_and_validated():
    assert parse_bins([[2000, 2016, 1], [1000, 1004, 2]])[0] == (1000, 1004, 2)
    with pytest.raises(ReportError, match=r"f.jsonl:7: histogram bin #1"):
        parse_bins([[1, 2, 3], [5, 4, 1]], "f.jsonl:7")


def test_merge_and_cdf():
    merged = merge_bins([[(1000, 1004, 2)], [(1000, 1004, 1), (2000, 2016, 1)]])
    assert merged == [(1000, 1004, 3), (2000, 2016, 1)]
    xs, ys = cdf_points_us(merged)
    assert xs == pytest.approx([1.0, 1.004, 2.016])
    assert ys == pytest.approx([0.0, 0.75, 1.0])


def test_missing_stored_percentile_is_recomputed_from_bins():
    from rdmabench_report.metrics import metric_value
    samples = [1000 + 10 * i for i in range(100)]
    data = make_record(samples)
    stored_p99 = data["results"]["lat_us"].pop("p99")
    record = Record("mem.jsonl", 1, data)
    assert metric_value(record, "p99") == pytest.approx(stored_p99)
    assert metric_value(record, "p50") == data["results"]["lat_us"]["p50"]
