"""The start-up cache of attrs' generated methods (pitrio._attrs_cache)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import attr._make
import attrs
import pytest

from pitrio import _attrs_cache


def _define() -> tuple[type, type]:
    @attrs.frozen
    class Point:
        x: int
        y: int = 0

    @attrs.define
    class Box:
        items: list[int] = attrs.Factory(list)

    return Point, Box


def test_second_definition_reuses_the_cached_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    original = attr._make._compile_and_eval
    _attrs_cache.install(tmp_path)
    try:
        point, _box = _define()
        cache = _attrs_cache._active
        assert cache is not None and cache.added == 2 and attr._make._compile_and_eval != original
    finally:
        _attrs_cache.uninstall()
    assert attr._make._compile_and_eval == original
    files = list((tmp_path / "__pycache__").glob("attrs-methods.*.marshal"))
    assert len(files) == 1

    _attrs_cache.install(tmp_path)
    try:
        cached_point, cached_box = _define()
        cache = _attrs_cache._active
        assert cache is not None and cache.added == 0 and len(cache.used) == 2
    finally:
        _attrs_cache.uninstall()
    # The classes behave as attrs made them, the hash salt included.
    for cls in (point, cached_point):
        assert cls(1, 2) == cls(1, 2) and cls(1) != cls(2)
        assert hash(cls(1, 2)) == hash(cls(1, 2)) and repr(cls(3)) == "Point(x=3, y=0)"
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            cls(1).x = 2  # type: ignore[misc]
    assert hash(cached_point(1, 2)) == hash(point(1, 2))
    assert cached_box().items == [] and cached_box([1]) == cached_box([1])


def test_a_broken_cache_file_is_ignored(tmp_path: Path) -> None:
    path = _attrs_cache.cache_path(tmp_path)
    path.parent.mkdir()
    path.write_bytes(b"not marshal data")
    _attrs_cache.install(tmp_path)
    try:
        point, _ = _define()
    finally:
        _attrs_cache.uninstall()
    assert point(1) == point(1)


SHOW_COMPILER = "import pitrio, attr._make as m; print(m._compile_and_eval.__module__)"


def test_pitrio_starts_with_and_without_the_cache() -> None:
    for value in ("1", "0"):
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                "import pitrio, attr._make as m; print(m._compile_and_eval.__module__)",
            ],
            capture_output=True,
            text=True,
            env={"PITRIO_ATTRS_CACHE": value, "PATH": "/usr/bin:/bin"},
            check=True,
        )
        assert result.stdout.strip() == "attr._make"  # attrs' own function is back


FROZEN = """
import gc
import pitrio.transports.cli
young = sum(len(gc.get_objects(generation)) for generation in range(3))
print(gc.isenabled(), gc.get_freeze_count(), young)
"""


def test_what_the_imports_built_is_frozen_out_of_the_collector() -> None:
    # Issue 38: the imports build ~100,000 long-lived objects with the collector off; turned
    # back on, its first full collection walked them all (20-30 ms of every cold start). They
    # are frozen instead: the collector runs again, over what the process builds afterwards.
    result = subprocess.run(
        [sys.executable, "-c", FROZEN],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        check=True,
    )
    enabled, frozen, young = result.stdout.split()
    assert enabled == "True"
    assert int(frozen) > 50_000
    assert int(young) < int(frozen) // 10


def test_a_module_imported_on_first_use_reuses_the_cache_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 38: modules imported after pitrio's own (the RPC server, ...) compiled their
    # classes in every process. caching() serves them from the same file.
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(_attrs_cache, "_idle", None)
    original = attr._make._compile_and_eval

    def first() -> type:
        @attrs.frozen
        class Early:
            a: int

        return Early

    added: list[int] = []
    for _process in range(2):
        _attrs_cache.install(tmp_path)
        try:
            first()
        finally:
            _attrs_cache.uninstall()
        with _attrs_cache.caching():
            assert attr._make._compile_and_eval != original
            cache = _attrs_cache._active
            assert cache is not None
            before = cache.added
            point, box = _define()
            added.append(cache.added - before)
        assert attr._make._compile_and_eval == original and _attrs_cache._active is None
        assert point(1, 2) == point(1, 2) and box().items == []
        monkeypatch.setattr(_attrs_cache, "_idle", None)  # the next "process"
    assert added == [2, 0]  # compiled by the first process only


def test_caching_does_nothing_before_the_imports_or_when_turned_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_attrs_cache, "_idle", None)
    original = attr._make._compile_and_eval
    with _attrs_cache.caching():
        assert attr._make._compile_and_eval == original
        point, _ = _define()
    assert point(1) == point(1)
