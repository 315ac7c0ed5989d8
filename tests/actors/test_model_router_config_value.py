"""Configured-value templates, parsed and expanded as pi 1.6.0 does (resolve-config-value)."""

from __future__ import annotations

import pytest

from pitrio.actors.model_router.config_value import (
    Command,
    EnvPart,
    Template,
    configured,
    expand,
    parse,
    unresolved_reason,
)

ENV = {"A": "1", "B_2": "2", "EMPTY": "", "X": "x"}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("OPENAI_API_KEY", "OPENAI_API_KEY"),  # a bare name is a literal in 1.6.0
        ("$A", "1"),
        ("${A}", "1"),
        ("k-$A-${B_2}", "k-1-2"),
        ("$A$B_2", "12"),
        ("$Ab", None),  # the longest name: "Ab", unset
        ("$A.b", "1.b"),
        ("$$A", "$A"),
        ("$!x", "!x"),
        ("a$", "a$"),
        ("$-x", "$-x"),
        ("$1", "$1"),
        ("${not a name}x", "${not a name}x"),
        ("${A", "${A"),  # no closing brace: the "$" stays, the rest is read on
        ("${unclosed $A", "${unclosed 1"),
        ("$EMPTY", None),  # empty counts as unset
        ("x$NOPE", None),
        ("", ""),
        ("sk-plain", "sk-plain"),
    ],
)
def test_template_expansion(spec: str, expected: str | None) -> None:
    value = parse(spec)
    assert isinstance(value, Template)
    assert expand(value, (ENV,)) == expected


def test_parts_and_commands() -> None:
    assert parse("a$$b${X}c$X") == Template(("a$b", EnvPart("X"), "c", EnvPart("X")))
    assert parse("a$$b${X}c$X").names == ("X",)  # type: ignore[union-attr]
    assert parse("!pass show k") == Command("pass show k")
    assert parse("!!x") == Command("!x")  # no second meaning of "!"
    assert parse(" !x") == Template((" !x",))  # only a leading "!" is a command


def test_environment_layers_and_configured() -> None:
    scoped = {"A": "scoped", "EMPTY": "now-set"}
    assert expand(parse("$A$EMPTY"), (scoped, ENV)) == "scopednow-set"  # type: ignore[arg-type]
    assert expand(parse("$A"), ({"A": ""}, ENV)) == "1"  # type: ignore[arg-type]
    assert configured("!anything", ())
    assert configured("literal", ())
    assert not configured("$A-$NOPE", (ENV,))


def test_unresolved_reasons_name_the_variables() -> None:
    what = 'API key for provider "p"'
    assert unresolved_reason(what, parse("$A$NOPE"), (ENV,)) == (
        'Failed to resolve API key for provider "p" from environment variable: NOPE'
    )
    assert unresolved_reason(what, parse("$N1${N2}$N1"), (ENV,)) == (
        'Failed to resolve API key for provider "p" from environment variables: N1, N2'
    )
    assert unresolved_reason(what, parse("!false"), (ENV,)) == (
        'Failed to resolve API key for provider "p" from shell command: false'
    )
