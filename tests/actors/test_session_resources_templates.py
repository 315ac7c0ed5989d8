"""Prompt templates: argument parsing and substitution tables, expansion, locations."""

from __future__ import annotations

from pathlib import Path

import pytest

from pitrio.actors.session.resources._common import SourceInfo
from pitrio.actors.session.resources.settings import Settings
from pitrio.actors.session.resources.templates import (
    PromptTemplate,
    TemplateSet,
    expand_template,
    load_template_file,
    load_templates,
    parse_command_args,
    substitute_args,
)

ABC = ["a", "b", "c"]

SUBSTITUTIONS: list[tuple[str, list[str], str]] = [
    # all arguments
    ("Test: $ARGUMENTS", ABC, "Test: a b c"),
    ("Test: $@", ABC, "Test: a b c"),
    ("$ARGUMENTS and $ARGUMENTS", ["a", "b"], "a b and a b"),
    ("$@ and $ARGUMENTS", ["x", "y", "z"], "x y z and x y z"),
    ("Test: $ARGUMENTS", [], "Test: "),
    ("Test: $@", [], "Test: "),
    ("pre$ARGUMENTS", ["a", "b"], "prea b"),
    ("pre$@", ["a", "b"], "prea b"),
    ("$ARGUMENTS", ["a", "", "c"], "a  c"),
    ("$ARGUMENTS", ["  leading  ", "trailing  "], "  leading   trailing  "),
    ("$ARGUMENTS", ["first arg", "second arg"], "first arg second arg"),
    ("$ARGUMENTS", ["日本語", "🎉", "café"], "日本語 🎉 café"),
    ("Prefix $ARGUMENTS suffix", ["ARGUMENTS"], "Prefix ARGUMENTS suffix"),
    # positional
    ("$1 $2 $3", ABC, "a b c"),
    ("$1 $2 $3 $4 $5", ["a", "b"], "a b   "),
    ("Test: $1", [], "Test: "),
    ("$0", ["a", "b"], ""),
    ("$1.5", ["a"], "a.5"),
    ("$1$2", ["a", "b"], "ab"),
    ("$10 $12 $15", [f"val{i}" for i in range(15)], "val9 val11 val14"),
    ("$1 $2", ["line1\nline2", "tab\tthere"], "line1\nline2 tab\tthere"),
    ("$1: $ARGUMENTS", ["prefix", "a", "b"], "prefix: prefix a b"),
    (
        "$1: $@ ($ARGUMENTS)",
        ["first", "second", "third"],
        "first: first second third (first second third)",
    ),
    ("$1 $2 $@", ABC, "a b a b c"),
    # slices
    ("${@:2}", ["a", "b", "c", "d"], "b c d"),
    ("${@:1}", ABC, "a b c"),
    ("${@:0}", ABC, "a b c"),
    ("${@:2:2}", ["a", "b", "c", "d"], "b c"),
    ("${@:1:1}", ABC, "a"),
    ("${@:2:3}", ["a", "b", "c", "d", "e"], "b c d"),
    ("${@:99}", ["a", "b"], ""),
    ("${@:10:5}", ["a", "b"], ""),
    ("${@:2:0}", ABC, ""),
    ("${@:2:99}", ABC, "b c"),
    ("${@:2}", [], ""),
    ("${@:2} vs $@", ABC, "b c vs a b c"),
    ("First: ${@:1:1}, All: $@", ["x", "y", "z"], "First: x, All: x y z"),
    ("$1: ${@:2}", ["cmd", "arg1", "arg2"], "cmd: arg1 arg2"),
    ("prefix${@:2}suffix", ABC, "prefixb csuffix"),
    ("${@:1:2} vs ${@:3:2}", ["a", "b", "c", "d", "e"], "a b vs c d"),
    (
        "Run $1 on ${@:2:2}, then process $@",
        ["eslint", "file1.ts", "file2.ts", "file3.ts"],
        "Run eslint on file1.ts file2.ts, then process eslint file1.ts file2.ts file3.ts",
    ),
    # no recursion: argument text stays literal
    ("$ARGUMENTS", ["$1", "$ARGUMENTS"], "$1 $ARGUMENTS"),
    ("$@", ["$100", "$1"], "$100 $1"),
    ("${@:1}", ["${@:2}", "test"], "${@:2} test"),
    ("${@:2}", ["a", "${@:3}", "c"], "${@:3} c"),
    ("${@:2}", ["cmd", "$100", "@user", "#tag"], "$100 @user #tag"),
    ("$1", ["$@", "x"], "$@"),
    ("$ARGUMENTS", ["a", "$@"], "a $@"),
    # not placeholders
    ("$A $$ $ $ARGS", ["a"], "$A $$ $ $ARGS"),
    ("$arguments $Arguments $ARGUMENTS", ["a", "b"], "$arguments $Arguments a b"),
    ("Price: \\$100", [], "Price: \\"),
    ("${@}", ["a"], "${@}"),
    ("${@:x}", ["a"], "${@:x}"),
    ("Just plain text", ["a", "b"], "Just plain text"),
]


@pytest.mark.parametrize(("template", "args", "expected"), SUBSTITUTIONS)
def test_substitute_args(template: str, args: list[str], expected: str) -> None:
    assert substitute_args(template, args) == expected


PARSES: list[tuple[str, list[str]]] = [
    ("a b c", ["a", "b", "c"]),
    ('"first arg" second', ["first arg", "second"]),
    ("'first arg' second", ["first arg", "second"]),
    ('"double" \'single\' "double again"', ["double", "single", "double again"]),
    ("", []),
    ("a  b   c", ["a", "b", "c"]),
    ("a\tb\tc", ["a", "b", "c"]),
    ('"" " "', [" "]),
    ("$100 @user #tag", ["$100", "@user", "#tag"]),
    ("日本語 🎉 café", ["日本語", "🎉", "café"]),
    ('"line1\nline2" second', ["line1\nline2", "second"]),
    ('"quoted \\"text\\""', ["quoted \\text\\"]),
    ("a b c   ", ["a", "b", "c"]),
    ("   a b c", ["a", "b", "c"]),
    ('pre"fix suf"fix', ["prefix suffix"]),
    ('"unclosed quote here', ["unclosed quote here"]),
    ("line\nbreak", ["line\nbreak"]),
]


@pytest.mark.parametrize(("text", "expected"), PARSES)
def test_parse_command_args(text: str, expected: list[str]) -> None:
    assert parse_command_args(text) == expected


def make_template(name: str, content: str) -> PromptTemplate:
    path = f"/prompts/{name}.md"
    return PromptTemplate(
        name=name,
        description="",
        content=content,
        file_path=path,
        source_info=SourceInfo(path=path, source="auto", scope="user"),
    )


def test_expand_template() -> None:
    templates = [
        make_template("review", "Review this code: $@"),
        make_template("component", "Create a React component named $1 with features: $ARGUMENTS"),
        make_template("plain", "Do something useful"),
    ]
    assert expand_template("/review my code", templates) == "Review this code: my code"
    assert expand_template('/component Button "onClick handler" "disabled support"', templates) == (
        "Create a React component named Button with features:"
        " Button onClick handler disabled support"
    )
    assert expand_template("/review", templates) == "Review this code: "
    # Arguments without placeholders are dropped, as in pi 0.73.1.
    assert expand_template("/plain extra", templates) == "Do something useful"
    for unchanged in ["/unknown a b", "review my code", " /review x", "/", "/Review x"]:
        assert expand_template(unchanged, templates) == unchanged


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_template_file(tmp_path: Path) -> None:
    info = SourceInfo(path="x", source="cli", scope="temporary")
    path = write(
        tmp_path / "fix.md",
        "---\ndescription: Fix an issue\nargument-hint: <issue>\n---\n\nFix issue $1.\n\n",
    )
    template, problems = load_template_file(str(path), info)
    assert problems == []
    assert template is not None
    assert (template.name, template.description, template.argument_hint) == (
        "fix",
        "Fix an issue",
        "<issue>",
    )
    assert template.content == "Fix issue $1."

    long_line = "x" * 61
    path = write(tmp_path / "plain.md", f"\n\n  {long_line}\nsecond\n")
    template, _ = load_template_file(str(path), info)
    assert template is not None
    # Without frontmatter the body is kept as written; the description is its first line.
    assert template.content == f"\n\n  {long_line}\nsecond\n"
    assert template.description == ("  " + long_line)[:60] + "..."

    path = write(tmp_path / "short.md", "Say hi\n")
    template, _ = load_template_file(str(path), info)
    assert template is not None and template.description == "Say hi"

    path = write(tmp_path / "empty.md", "")
    template, _ = load_template_file(str(path), info)
    assert template is not None and (template.description, template.content) == ("", "")

    path = write(tmp_path / "bad.md", "---\ndescription: [x\n---\nbody")
    template, problems = load_template_file(str(path), info)
    assert template is None and problems[0].message.startswith("invalid YAML frontmatter")


class Tree:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.agent = root / "agent"
        self.cwd = root / "proj"
        self.cwd.mkdir(parents=True)
        self.agent.mkdir()

    def load(self, settings: Settings | None = None, **kwargs: object) -> TemplateSet:
        return load_templates(
            cwd=str(self.cwd),
            agent_dir=str(self.agent),
            project_dirs=[str(self.cwd / ".pitrio"), str(self.cwd / ".pi")],
            settings=settings or Settings(),
            home=self.home,
            **kwargs,  # type: ignore[arg-type]
        )


def test_locations_and_collisions(tmp_path: Path) -> None:
    tree = Tree(tmp_path)
    cli = write(tmp_path / "cli" / "shared.md", "from the cli")
    write(tree.cwd / ".pitrio" / "prompts" / "shared.md", "from .pitrio")
    write(tree.cwd / ".pitrio" / "prompts" / "project.md", "project")
    write(tree.cwd / ".pitrio" / "prompts" / "nested" / "deep.md", "not loaded")
    write(tree.cwd / ".pitrio" / "prompts" / "notes.txt", "not markdown")
    write(tree.cwd / ".pi" / "prompts" / "pi-only.md", "from .pi")
    write(tree.cwd / ".pi" / "prompts" / "project.md", "shadowed")
    write(tree.agent / "prompts" / "user.md", "user")
    write(tree.agent / "prompts" / "shared.md", "shadowed too")
    result = tree.load(cli_paths=[str(cli)])
    assert [(t.name, t.content) for t in result.templates] == [
        ("shared", "from the cli"),
        ("project", "project"),
        ("pi-only", "from .pi"),
        ("user", "user"),
    ]
    collisions = [d.collision for d in result.diagnostics if d.collision]
    assert [(c.name, Path(c.loser_path).parent.parent.name) for c in collisions] == [
        ("shared", ".pitrio"),
        ("project", ".pi"),
        ("shared", "agent"),
    ]
    assert result.diagnostics[0].message == 'name "/shared" collision'
    infos = {t.name: t.source_info for t in result.templates}
    assert (infos["shared"].source, infos["shared"].scope) == ("cli", "temporary")
    assert infos["pi-only"].base_dir == str(tree.cwd / ".pi")
    assert (infos["user"].scope, infos["user"].base_dir) == ("user", str(tree.agent))


def test_settings_lists_and_cli_directories(tmp_path: Path) -> None:
    tree = Tree(tmp_path)
    write(tmp_path / "team" / "a.md", "a")
    write(tmp_path / "team" / "sub" / "b.md", "b")
    write(tmp_path / "team" / "skip.md", "skipped")
    write(tree.agent / "prompts" / "auto.md", "auto")
    write(tree.agent / "prompts" / "off.md", "excluded")
    write(tmp_path / "cli" / "x" / "c.md", "c")
    settings = Settings(global_values={"prompts": ["../team", "!skip.md", "!prompts/off.md"]})
    result = tree.load(settings, cli_paths=[str(tmp_path / "cli"), "nowhere"])
    assert [t.name for t in result.templates] == ["c", "a", "b", "auto"]
    assert [d.message for d in result.diagnostics] == ["prompt template path does not exist"]
    assert result.diagnostics[0].path == str(tree.cwd / "nowhere")


def test_no_prompt_templates_keeps_cli_paths(tmp_path: Path) -> None:
    tree = Tree(tmp_path)
    write(tree.agent / "prompts" / "user.md", "user")
    cli = write(tmp_path / "one.md", "one")
    result = tree.load(cli_paths=[str(cli)], include_defaults=False)
    assert [t.name for t in result.templates] == ["one"]
