"""The chat's prompt-line editor without a terminal: bytes to keys, keys to a line."""

from __future__ import annotations

import io

from pitrio.transports.attach_render import Chunk, Renderer, Style
from pitrio.transports.attach_terminal import Terminal
from pitrio.transports.chat_keyboard import EditingKeyboard
from pitrio.transports.line_editor import Done, Key, LineEditor, Listing, decode, redraw, width


def _type(editor: LineEditor, data: bytes) -> Done | Listing | None:
    """Feed the keys of ``data``; the last outcome."""
    keys, rest = decode(data)
    assert rest == b""
    outcome = None
    for key in keys:
        outcome = editor.feed(key)
    return outcome


def test_decode_names_keys_and_keeps_unfinished_sequences() -> None:
    keys, rest = decode(b"a\x1b[A\x1bOB\x1b[3~\x1b[1;5C\x01\x05\t\x7f\r")
    assert [k.name for k in keys] == [
        "a", "up", "down", "delete", "right", "home", "end", "tab", "backspace", "enter",
    ]  # fmt: skip
    assert rest == b""
    assert decode(b"x\x1b[") == ([Key("x", "x")], b"\x1b[")
    assert decode("é".encode()[:1]) == ([], "é".encode()[:1])
    assert decode(b"\x80a")[0] == [Key("\ufffd", "\ufffd"), Key("a", "a")]  # a stray byte
    assert decode("é€😀".encode())[0] == [Key("é", "é"), Key("€", "€"), Key("😀", "😀")]
    # A lone Esc at the end is the key; Esc before a letter is the key, then the letter.
    assert decode(b"\x1b") == ([Key("escape")], b"")
    assert decode(b"a\x1b", waiting=True) == ([Key("a", "a")], b"\x1b")  # an arrow's start?
    assert decode(b"\x1bq")[0] == [Key("escape"), Key("q", "q")]
    # An unknown sequence is dropped whole, never typed.
    assert decode(b"\x1b[200~z")[0] == [Key("z", "z")]


def test_typing_and_editing_mid_line() -> None:
    editor = LineEditor()
    _type(editor, "héllo wörld".encode())
    _type(editor, b"\x1b[D" * 5)  # Left five times: before "wörld"
    _type(editor, b"big ")
    assert (editor.text, editor.cursor) == ("héllo big wörld", 10)
    _type(editor, b"\x7f\x7f\x7f\x7f")  # Backspace "big "
    _type(editor, b"\x01\x1b[3~H\x05!")  # Home, Delete, H, End, !
    assert editor.text == "Héllo wörld!"
    _type(editor, b"\x01\x1b[C\x0b")  # Ctrl-K after the first letter
    assert editor.text == "H"
    assert _type(editor, b"\r") == Done("H")
    editor.start()
    _type(editor, b"one two  three\x1b[D\x1b[D\x17")  # Ctrl-W: the word before the cursor
    assert (editor.text, editor.cursor) == ("one two  ee", 9)
    _type(editor, b"\x17\x17")
    assert (editor.text, editor.cursor) == ("ee", 0)


def test_escape_ends_the_line_as_an_interrupt_and_ctrl_d_ends_input_only_when_empty() -> None:
    editor = LineEditor()
    assert _type(editor, b"half\x1b") == Done("half\x1b")
    editor.start()
    assert _type(editor, b"ab\x01\x04") is None  # Ctrl-D on text deletes forward
    assert editor.text == "b"
    editor.start()
    assert _type(editor, b"\x04") == Done(None)


def test_up_and_down_browse_the_history_as_pis_editor_does() -> None:
    editor = LineEditor(history=["first", "second", "second", "  "])
    assert editor.history == ["second", "first"]  # newest first, no repeat, no blank
    _type(editor, b"draft")
    _type(editor, b"\x1b[A")  # text and the cursor at its end: Up goes to the start
    assert (editor.text, editor.cursor) == ("draft", 0)
    _type(editor, b"\x1b[A")  # at the start: browse
    assert (editor.text, editor.cursor) == ("second", 0)
    _type(editor, b"\x1b[A\x1b[A")  # no older entry: stays
    assert editor.text == "first"
    _type(editor, b"\x1b[B")
    assert (editor.text, editor.cursor) == ("second", 6)
    _type(editor, b"\x1b[B")  # past the newest: the draft again
    assert (editor.text, editor.cursor) == ("draft", 5)
    _type(editor, b"\x1b[B")  # not browsing: Down goes to the end
    assert editor.text == "draft"
    editor.remember("third")
    editor.start()
    _type(editor, b"\x1b[A")
    assert editor.text == "third"
    for number in range(150):
        editor.remember(f"p{number}")
    assert len(editor.history) == 100 and editor.history[0] == "p149"


def test_tab_completes_a_command_name() -> None:
    editor = LineEditor(commands=["model", "name", "new", "skill:pdf", "skill:png"])
    _type(editor, b"/mo\t")
    assert (editor.text, editor.cursor) == ("/model ", 7)
    editor.start()
    _type(editor, b"/sk\t")  # several share "skill:p": extended that far
    assert editor.text == "/skill:p"
    assert _type(editor, b"\t") == Listing(("skill:pdf", "skill:png"))
    editor.start()
    assert _type(editor, b"/n\t") == Listing(("name", "new"))
    editor.start()
    for line in (b"hello\t", b"/zz\t", b"/model x\t"):  # not a command name: nothing
        editor.start()
        assert _type(editor, line) is None
        assert editor.text == line[:-1].decode()


def test_redraw_moves_back_over_columns_not_characters() -> None:
    assert width("a漢́") == 3  # a wide character, a combining mark
    assert redraw("", 0, "ab", 2) == "ab\x1b[K"
    assert redraw("ab", 2, "axb", 2) == "\x1b[2Daxb\x1b[K\x1b[1D"
    assert redraw("漢字", 1, "字", 0) == "\x1b[2D字\x1b[K\x1b[2D"


def test_output_moves_the_half_typed_line_below_it_never_over_it() -> None:
    out = io.StringIO()
    term = Terminal(out, io.StringIO(), Renderer(Style()), tty=True)
    keys = EditingKeyboard(-1, out)
    term.overlay = keys
    keys.reading = True  # as while readline waits for a key
    keys.editor.start("ab")
    keys.editor.feed(Key("left"))
    keys._update()
    assert out.getvalue() == "ab\x1b[K\x1b[1D"
    # A streamed piece: the line is taken away (back 1 column: the cursor's), the piece
    # written where the line began, then the line drawn after it, the cursor where it was.
    term.show([Chunk("xyz")])
    assert out.getvalue()[len("ab\x1b[K\x1b[1D") :] == "\x1b[1D\x1b[K" + "xyz" + "ab\x1b[K\x1b[1D"
    keys.reading = False  # the line was sent: output no longer draws it
    term.show([Chunk("!")])
    assert out.getvalue().endswith("ab\x1b[K\x1b[1D" + "\x1b[1D\x1b[K!")
