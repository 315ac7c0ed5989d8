"""``bench/side_by_side.py``: the workloads each extra label (floors, ``fsync-batch``) runs."""

from __future__ import annotations

import argparse

import pytest

from bench.side_by_side import HARNESS_WORKLOADS, extra_workload, extra_workloads


def test_a_plain_workload_is_every_extra_labels_and_a_labelled_one_its_own() -> None:
    specs = [
        extra_workload("floor:cold_start"),
        extra_workload("floor:resume"),
        extra_workload("turnfloor:turns50"),
        extra_workload("stream"),
    ]
    assert extra_workloads("floor", specs) == ["cold_start", "resume", "stream"]
    assert extra_workloads("turnfloor", specs) == ["turns50", "stream"]
    assert extra_workloads("fsync-batch", specs) == ["stream"]


def test_a_label_given_no_workload_runs_every_harness_workload() -> None:
    specs = [extra_workload("floor:cold_start")]
    assert extra_workloads("turnfloor", specs) == HARNESS_WORKLOADS
    assert extra_workloads("floor", []) == HARNESS_WORKLOADS


@pytest.mark.parametrize(
    ("spec", "named"),
    [("nofloor:turns50", "no extra label 'nofloor'"), ("floor:turns5", "no harness workload")],
)
def test_an_unknown_label_or_workload_is_refused_by_name(spec: str, named: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=named):
        extra_workload(spec)
