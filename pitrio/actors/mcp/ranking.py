"""Ranking tools for a search, as pi 1.6.0's ``tool_search`` ranks them. Pure.

Okapi BM25 (``k1`` 1.2, ``b`` 0.75) over a tool's text (its description, then its schema's
descriptions and property names, following local ``$ref``s once each), with two more fields:
the tool's name (a query term there weighs 3 IDFs) and its server's namespace text (name,
description, instructions: half an IDF). A tool whose last name segment (after ``__``) is all
in the query gets one more IDF of every query term. Tools matching more query terms rank first
whatever their score; a query that is a tool's whole name, or its part after a ``__``, ranks
that tool before everything. Ties keep the given order.

Terms: NFC text, ``camelCase`` and ``ABCWord`` split, lower-cased, anything but letters, marks
and digits as a space; English stop words dropped; ASCII words reduced to a naive singular.
Non-ASCII text is split at spaces only (1.6.0 segments words with ICU: a CJK run is one term
here).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import attrs

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "with",
    ]
)
K1 = 1.2
B = 0.75
NAME_WEIGHT = 3.0
NAMESPACE_WEIGHT = 0.5
_LOWER_UPPER = re.compile(r"([a-z0-9])([A-Z])")
_ACRONYM = re.compile(r"([A-Z]+)([A-Z][a-z])")
_ASCII_WORD = re.compile(r"[a-z0-9]+")
_PLURAL_ES = re.compile(r"(ches|shes|sses|xes|zes)$")


def _stem(term: str) -> str:
    if len(term) > 4 and term.endswith("ies"):
        return term[:-3] + "y"
    if len(term) > 4 and _PLURAL_ES.search(term):
        return term[:-2]
    if len(term) > 3 and term.endswith("s") and not term.endswith("ss"):
        return term[:-1]
    return term


def _is_word_char(char: str) -> bool:
    return unicodedata.category(char)[0] in "LMN"


def tokenize(text: str) -> list[str]:
    """The terms of ``text``."""
    text = unicodedata.normalize("NFC", text)
    text = _ACRONYM.sub(r"\1 \2", _LOWER_UPPER.sub(r"\1 \2", text)).lower()
    text = "".join(char if _is_word_char(char) else " " for char in text)
    words = [word for word in text.split(" ") if word and word not in STOP_WORDS]
    return [_stem(word) if _ASCII_WORD.fullmatch(word) else word for word in words]


def _resolve(ref: str, root: Any) -> Any:
    """A local JSON pointer (``#``, ``#/$defs/x``) in ``root``; ``None`` if it names nothing."""
    if ref != "#" and not ref.startswith("#/"):
        return None
    current = root
    for segment in (s for s in ref[2:].split("/") if s):
        key = unquote(segment).replace("~1", "/").replace("~0", "~")
        if not isinstance(current, dict) or key not in current:
            return None
        current = current[key]
    return current


def _schema_text(schema: Any, root: Any, parts: list[str], seen: list[Any]) -> None:
    if not isinstance(schema, dict):
        return
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _resolve(ref, root)
        if isinstance(target, dict) and not any(target is s for s in seen):
            seen.append(target)
            _schema_text(target, root, parts, seen)
    if isinstance(schema.get("description"), str):
        parts.append(schema["description"])
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, prop in properties.items():
            parts.append(name)
            _schema_text(prop, root, parts, seen)
    _schema_text(schema.get("items"), root, parts, seen)
    for key in ("anyOf", "oneOf", "allOf"):
        variants = schema.get(key)
        if isinstance(variants, list):
            for variant in variants:
                _schema_text(variant, root, parts, seen)


@attrs.frozen
class SearchDocument:
    """What a search reads of one tool."""

    name: str
    text: str
    namespace_text: str = ""
    description: str = ""
    """The tool's own description (what a search answers with)."""


def search_document(
    name: str,
    description: str,
    parameters: Mapping[str, Any],
    namespace: tuple[str, str | None, str | None] | None = None,
) -> SearchDocument:
    """A tool's document; ``namespace`` is its server's (namespace, description, instructions)."""
    parts = [description]
    _schema_text(parameters, parameters, parts, [parameters])
    text = " ".join(part for part in parts if part.strip())
    spaced = "" if namespace is None else " ".join(p or "" for p in namespace)
    return SearchDocument(name, text, spaced, description)


def _normal_name(name: str) -> str:
    return re.sub(r"[^a-z0-9_$]", "_", name.strip().lower())


@attrs.frozen
class _Indexed:
    name: str
    name_terms: frozenset[str]
    local_terms: tuple[str, ...]
    counts: Mapping[str, int]
    length: int
    namespace_terms: frozenset[str]


def _index(document: SearchDocument) -> _Indexed:
    counts = Counter(tokenize(document.text))
    local = tuple(dict.fromkeys(tokenize(document.name.split("__")[-1])))
    return _Indexed(
        document.name,
        frozenset(tokenize(document.name)),
        local,
        counts,
        sum(counts.values()),
        frozenset(tokenize(document.namespace_text)),
    )


def rank(query: str, documents: Sequence[SearchDocument], limit: int) -> list[tuple[str, float]]:
    """The best ``limit`` tools for ``query``: ``(name, score)``, best first."""
    terms = list(dict.fromkeys(tokenize(query)))
    if not terms or not documents or limit <= 0:
        return []
    indexed = [_index(document) for document in documents]
    average = sum(d.length for d in indexed) / len(indexed) or 1.0
    idf: dict[str, float] = {}
    for term in terms:
        frequency = sum(
            1
            for d in indexed
            if term in d.name_terms or term in d.counts or term in d.namespace_terms
        )
        idf[term] = math.log(1 + (len(indexed) - frequency + 0.5) / (frequency + 0.5))
    bonus = sum(idf.values())
    exact = _normal_name(query)
    found: list[tuple[bool, int, float, int, str]] = []
    for order, d in enumerate(indexed):
        norm = K1 * (1 - B + B * d.length / average)
        score, covered = 0.0, 0
        for term in terms:
            count = d.counts.get(term, 0)
            weight = (
                (NAME_WEIGHT if term in d.name_terms else 0.0)
                + (NAMESPACE_WEIGHT if term in d.namespace_terms else 0.0)
                + count * (K1 + 1) / (count + norm)
            )
            covered += weight > 0
            score += idf[term] * weight
        if score == 0:
            continue
        if d.local_terms and all(term in terms for term in d.local_terms):
            score += bonus
        name = _normal_name(d.name)
        is_exact = name == exact or name.endswith(f"__{exact}")
        found.append((is_exact, covered, score, order, d.name))
    found.sort(key=lambda f: (not f[0], -f[1], -f[2], f[3]))
    return [(name, score) for _exact, _covered, score, _order, name in found[:limit]]
