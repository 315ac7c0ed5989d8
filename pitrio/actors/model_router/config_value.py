"""Configured values (``models.json`` ``apiKey`` and headers, ``auth.json`` ``key``) as pi
1.6.0 reads them. Pure: parsing and template expansion; running a command is the caller's.

A value is either a command or a template:

* ``!command``: everything after the ``!`` is given to ``/bin/sh -c``; the value is its
  trimmed standard output (nothing printed, a non-zero exit or a timeout: unresolved). A second
  ``!`` is not special: ``!!x`` runs the shell text ``!x``.
* anything else is a template: ``$NAME`` (the longest run of ``[A-Za-z0-9_]`` after a letter or
  ``_``) and ``${NAME}`` are replaced by the environment variable ``NAME``; ``$$`` is a literal
  ``$`` and ``$!`` a literal ``!``; a ``$`` followed by anything else, ``${`` without a closing
  ``}`` and ``${...}`` around something that is not a variable name stay as written. A variable
  that is unset *or empty* leaves the whole value unresolved.

So a bare ``OPENAI_API_KEY`` is the literal key ``OPENAI_API_KEY`` (pi 0.73.1 took a set
variable's bare name as that variable; 1.6.0 does not).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import attrs

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@attrs.frozen
class EnvPart:
    """A ``$NAME`` / ``${NAME}`` reference inside a template."""

    name: str


@attrs.frozen
class Template:
    """A value that is text with environment references (``parts`` in order)."""

    parts: tuple[str | EnvPart, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The variables the template names, each once, in order of first use."""
        seen: dict[str, None] = {}
        for part in self.parts:
            if isinstance(part, EnvPart):
                seen.setdefault(part.name, None)
        return tuple(seen)


@attrs.frozen
class Command:
    """A ``!command`` value: ``command`` is the shell text after the ``!``."""

    command: str


ConfigValue = Template | Command


def parse(spec: str) -> ConfigValue:
    """Classify ``spec`` as a :class:`Command` or parse it as a :class:`Template`."""
    if spec.startswith("!"):
        return Command(spec[1:])
    return Template(tuple(_template_parts(spec)))


def _template_parts(spec: str) -> list[str | EnvPart]:
    parts: list[str | EnvPart] = []

    def literal(text: str) -> None:
        if not text:
            return
        if parts and isinstance(parts[-1], str):
            parts[-1] += text
        else:
            parts.append(text)

    index = 0
    while index < len(spec):
        dollar = spec.find("$", index)
        if dollar < 0:
            literal(spec[index:])
            break
        literal(spec[index:dollar])
        after = spec[dollar + 1 : dollar + 2]
        if after in ("$", "!"):
            literal(after)
            index = dollar + 2
        elif after == "{":
            close = spec.find("}", dollar + 2)
            if close < 0:
                literal("$")
                index = dollar + 1
                continue
            name = spec[dollar + 2 : close]
            if _NAME.fullmatch(name):
                parts.append(EnvPart(name))
            else:
                literal(spec[dollar : close + 1])
            index = close + 1
        else:
            match = _NAME.match(spec, dollar + 1)
            if match:
                parts.append(EnvPart(match.group()))
                index = match.end()
            else:
                literal("$")
                index = dollar + 1
    return parts


def lookup(name: str, envs: Sequence[Mapping[str, str]]) -> str | None:
    """``name`` in the first of ``envs`` where it is set and not empty (pi's rule)."""
    for env in envs:
        value = env.get(name)
        if value:
            return value
    return None


def missing(template: Template, envs: Sequence[Mapping[str, str]]) -> tuple[str, ...]:
    """The variables of ``template`` that are unset or empty in every one of ``envs``."""
    return tuple(name for name in template.names if lookup(name, envs) is None)


def expand(template: Template, envs: Sequence[Mapping[str, str]]) -> str | None:
    """The template's text with its references replaced; ``None`` if one is missing."""
    out: list[str] = []
    for part in template.parts:
        if isinstance(part, str):
            out.append(part)
            continue
        value = lookup(part.name, envs)
        if value is None:
            return None
        out.append(value)
    return "".join(out)


def configured(spec: str, envs: Sequence[Mapping[str, str]]) -> bool:
    """Whether ``spec`` can be expected to resolve, without running anything: a command
    counts as configured, a template when every variable it names is set."""
    value = parse(spec)
    return isinstance(value, Command) or not missing(value, envs)


def unresolved_reason(what: str, value: ConfigValue, envs: Sequence[Mapping[str, str]]) -> str:
    """pi's words for a value that did not resolve (``what``: e.g. ``API key for provider
    "x"``); never includes a resolved value."""
    if isinstance(value, Command):
        return f"Failed to resolve {what} from shell command: {value.command}"
    names = missing(value, envs)
    if len(names) == 1:
        return f"Failed to resolve {what} from environment variable: {names[0]}"
    if names:
        return f"Failed to resolve {what} from environment variables: {', '.join(names)}"
    return f"Failed to resolve {what}"
