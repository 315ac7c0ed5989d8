"""The OS-text boundary check (issue 36): what it refuses, what it names, what it lets through."""

from __future__ import annotations

import os
import subprocess

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pitrio.errors import PitrioError, UnencodableTextError
from pitrio.messages.ostext import (
    check_environment,
    check_json_texts,
    check_os_text,
    check_os_texts,
    json_text_problem,
    os_text_problem,
)

SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)
# Any code point: surrogates and NUL included.
ANY_TEXT = st.text(alphabet=st.characters(codec=None, min_codepoint=0), max_size=40)


def encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\0" not in value


@given(ANY_TEXT)
def test_refused_exactly_when_the_os_could_not_take_it(value: str) -> None:
    problem = os_text_problem(value, "path")
    assert (problem is None) == encodable(value)
    if problem is not None:
        assert problem.startswith("The path contains ")
        # The message never carries the bad character itself.
        problem.encode("utf-8")
        assert "\0" not in problem


@given(st.text(max_size=20), SURROGATES, st.text(max_size=20))
def test_a_lone_surrogate_is_named_with_its_offset(head: str, bad: str, tail: str) -> None:
    head = head.replace("\0", "")
    value = head + bad + tail.replace("\0", "")
    problem = os_text_problem(value, "command")
    assert problem is not None
    # The first unencodable one is named: ``head`` is encodable (st.text has no surrogates).
    assert problem == (
        f"The command contains a lone surrogate (\\u{ord(bad):04x} at offset {len(head)}): "
        "it cannot be encoded as UTF-8"
    )


def test_the_first_of_a_nul_and_a_surrogate_is_named() -> None:
    assert os_text_problem("ab\0c\ud800", "f") == (
        "The f contains a NUL character (at offset 2): the OS cannot take one"
    )
    assert os_text_problem("a\udc80b\0", "f") == (
        "The f contains a lone surrogate (\\udc80 at offset 1): it cannot be encoded as UTF-8"
    )
    assert os_text_problem("é\0", "f") == (
        "The f contains a NUL character (at offset 1): the OS cannot take one"
    )


def test_a_surrogate_pair_written_as_one_character_is_fine() -> None:
    assert check_os_text("emoji 😀 and é", "name") == "emoji 😀 and é"


def test_the_error_is_a_pitrio_error_and_a_value_error() -> None:
    with pytest.raises(UnencodableTextError) as caught:
        check_os_text("x\ud800", "outputPath")
    assert isinstance(caught.value, PitrioError) and isinstance(caught.value, ValueError)
    assert str(caught.value) == (
        "The outputPath contains a lone surrogate (\\ud800 at offset 1): "
        "it cannot be encoded as UTF-8"
    )


def test_an_argument_list_names_the_position() -> None:
    check_os_texts(["rg", "--", "x"], "argument")
    with pytest.raises(UnencodableTextError, match=r"^The argument 2 contains a NUL"):
        check_os_texts(["rg", "--", "a\0"], "argument")


def test_an_environment_names_the_variable_not_its_value() -> None:
    check_environment({"HOME": "/home/x", "LANG": "C.UTF-8"})
    with pytest.raises(UnencodableTextError) as caught:
        check_environment({"OK": "1", "SECRET": "abc\udfff"})
    assert str(caught.value) == (
        "The environment variable 'SECRET' contains a lone surrogate (\\udfff at offset 3): "
        "it cannot be encoded as UTF-8"
    )
    with pytest.raises(UnencodableTextError, match="variable name '\\\\ud800'"):
        check_environment({"\ud800": "1"})
    with pytest.raises(UnencodableTextError, match="contains '='"):
        check_environment({"A=B": "1"}, "server environment")


@given(ANY_TEXT)
def test_what_passes_reaches_a_real_process_unchanged(value: str) -> None:
    """The check is exactly what the OS needs: whatever passes goes through argv and back."""
    if os_text_problem(value, "argument") is not None:
        return
    out = subprocess.run(
        ["printf", "%s", value], capture_output=True, check=True, env={"PATH": os.defpath}
    )
    assert out.stdout.decode("utf-8") == value


def test_a_json_payload_names_the_place_of_the_bad_string() -> None:
    args = {"path": "ok", "edits": [{"oldText": "a\0", "newText": "b\udc00"}]}
    assert json_text_problem(args, "arguments") == (
        "The arguments.edits[0].newText contains a lone surrogate (\\udc00 at offset 1): "
        "it cannot be encoded as UTF-8"
    )
    with pytest.raises(UnencodableTextError, match=r"^The arguments key '\\ud800' contains"):
        check_json_texts({"\ud800": 1}, "arguments")
    # A NUL is fine in JSON (written \u0000); numbers, nulls and pairs too.
    check_json_texts({"a": ["x\0", 1, None, 2.5, True, "😀"]}, "arguments")


@given(
    st.recursive(
        ANY_TEXT | st.integers(-(2**63), 2**63 - 1) | st.none(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3),
        max_leaves=8,
    )
)
def test_a_json_payload_passes_exactly_when_strict_json_takes_it(value: object) -> None:
    problem = json_text_problem(value, "frame")
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        assert problem is not None
    else:
        assert problem is None


def test_names_the_os_gave_keep_their_escaped_bytes() -> None:
    """``surrogateescape`` keeps a byte that is not UTF-8 as U+DC80..U+DCFF: from the OS it is
    the name's real byte and passes; from a client it is refused; other surrogates never pass."""
    name = os.fsdecode(b"/tmp/caf\xe9")
    assert name == "/tmp/caf\udce9"
    assert check_os_text(name, "cwd", from_os=True) == name
    with pytest.raises(UnencodableTextError, match="udce9 at offset 8"):
        check_os_text(name, "cwd")
    for bad in ("\ud800", "\udc7f", "\udfff"):
        with pytest.raises(UnencodableTextError, match="lone surrogate"):
            check_os_text("x" + bad, "cwd", from_os=True)
    check_environment({"DIR": name}, from_os=True)
    check_os_texts(["ls", name], "argument", from_os=True)
    with pytest.raises(UnencodableTextError, match="NUL"):
        check_os_text("a\0" + name, "cwd", from_os=True)
