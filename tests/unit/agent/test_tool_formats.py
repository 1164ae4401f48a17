"""The tools' argument rules and output formats, byte for byte (docs/agent.md "Tools")."""

from __future__ import annotations

import pytest

from ds4.domain.agent.file_tools import (
    SearchQuery,
    SearchReport,
    Span,
    apply_edit,
    count_lines,
    edit_report,
    glob_allows,
    list_report,
    read_chunk,
    select_span,
    split_lines,
)
from ds4.domain.agent.tool_catalog import ToolError, arg_bool, arg_int, arg_text, parse_arguments
from ds4.domain.agent.transcript import combined_results, queued_message, tool_turn
from ds4.ports.agent import DirEntry

MAKEFILE = (
    b"CFLAGS = -Wall -Wextra -g\nLDFLAGS =\n\nall: bc\n\nbc: main.c\n"
    b"\t$(CC) $(CFLAGS) -o bc main.c $(LDFLAGS)\n\nclean:\n\trm -f bc\n"
)


# ---- arguments ------------------------------------------------------------------


def test_integers_parse_like_strtol_default_when_invalid_and_clamp() -> None:
    args = {"a": "12", "b": " -3xyz", "c": "abc", "d": 7.9, "e": True, "f": 10**12}
    assert arg_int(args, "a", 1, 1, 100) == 12
    assert arg_int(args, "b", 1, 1, 100) == 1  # -3 clamped up to the minimum
    assert arg_int(args, "c", 5, 1, 100) == 5  # no digits: the default
    assert arg_int(args, "d", 5, 1, 100) == 7
    assert arg_int(args, "e", 5, 1, 100) == 5
    assert arg_int(args, "f", 5, 1, 100) == 100
    assert arg_int(args, "missing", 42, 1, 100) == 42


def test_booleans_and_texts() -> None:
    args = {"a": "YES", "b": "0", "c": "maybe", "d": False, "n": 3, "s": "x", "z": None}
    assert arg_bool(args, "a", False) is True
    assert arg_bool(args, "b", True) is False
    assert arg_bool(args, "c", True) is True
    assert arg_bool(args, "d", True) is False
    assert arg_text(args, "n") == "3"
    assert arg_text(args, "s") == "x"
    assert arg_text(args, "z") is None
    assert parse_arguments("") == {}
    with pytest.raises(ToolError, match="not a JSON object"):
        parse_arguments("[1]")


# ---- lines and read ---------------------------------------------------------------


def test_lines_split_on_lf_crlf_and_cr() -> None:
    lines = split_lines(b"a\r\nb\rc\nd")
    assert [(x.start, x.end, x.stop) for x in lines] == [(0, 1, 3), (3, 4, 5), (5, 6, 7), (7, 8, 8)]
    assert count_lines(b"") == 0
    assert count_lines(b"a\nb") == 2
    assert count_lines(b"a\n") == 1


def test_read_numbered_chunk_and_its_continuation() -> None:
    data = b"".join(b"line %d\n" % i for i in range(1, 8))
    first = read_chunk("f.txt", data, start=1, max_lines=3, whole=False, raw=False)
    assert first.text == (
        "f.txt: lines 1-3 of 7; continue_offset=4; call more with count=3 to read the next "
        "chunk\n1 line 1\n2 line 2\n3 line 3\n"
    )
    assert first.cursor is not None and first.cursor.next_line == 4
    last = read_chunk("f.txt", data, start=6, max_lines=3, whole=False, raw=False)
    assert last.text == "f.txt: lines 6-7 of 7\n6 line 6\n7 line 7\n"
    assert last.cursor is None
    whole = read_chunk("f.txt", data, start=2, max_lines=1, whole=True, raw=False)
    assert whole.text.startswith("f.txt: lines 2-7 of 7\n")


def test_read_raw_and_empty() -> None:
    raw = read_chunk("f", b"a\r\nb\nc", start=1, max_lines=2, whole=False, raw=True)
    assert raw.text == (
        "a\r\nb\n[Read truncated at line 2 of 3. continue_offset=3. Call more with count=2 "
        "to read the next chunk.]\n"
    )
    end = read_chunk("f", b"a\r\nb\nc", start=3, max_lines=2, whole=False, raw=True)
    assert end.text == "c\n"
    assert (
        read_chunk("e", b"", start=1, max_lines=5, whole=False, raw=False).text
        == "e: lines 0-0 of 0\n"
    )


# ---- edit -------------------------------------------------------------------------


def test_upto_tail_newline_is_not_part_of_the_anchor() -> None:
    head = b"".join(MAKEFILE.split(b"\n")[i] + b"\n" for i in range(8))
    span = select_span(MAKEFILE, head + b"[upto]\nclean:\n", upto=True)
    assert span == Span(0, len(MAKEFILE) - len(b"\trm -f bc\n"), anchored=True)


def test_upto_needs_a_tail() -> None:
    with pytest.raises(ToolError, match="must include a unique tail anchor"):
        select_span(b"head\nbody\ntail\n", b"head\n[upto]\n", upto=True)


def test_upto_tail_is_searched_after_the_head_only() -> None:
    data = b"end\nstart\nmiddle\nend\n"
    span = select_span(data, b"start\n[upto]\nend\n", upto=True)  # an earlier `end` is fine
    assert data[span.start : span.end] == b"start\nmiddle\nend\n"
    with pytest.raises(ToolError, match="old tail anchor is not unique after old head"):
        select_span(b"start\nend\nend\n", b"start\n[upto]\nend\n", upto=True)
    with pytest.raises(ToolError, match="old tail anchor not found after old head"):
        select_span(b"end\nstart\n", b"start\n[upto]\nend\n", upto=True)
    with pytest.raises(ToolError, match="old head anchor is not unique"):
        select_span(b"start\nstart\nend\n", b"start\n[upto]\nend\n", upto=True)
    with pytest.raises(ToolError, match="more than one"):
        select_span(data, b"a[upto]b[upto]c", upto=True)


def test_plain_edit_needs_one_exact_match_and_upto_is_literal_when_off() -> None:
    with pytest.raises(ToolError, match="old text anchor not found"):
        select_span(b"abc", b"x", upto=False)
    with pytest.raises(ToolError, match="old text anchor is not unique"):
        select_span(b"aa", b"a", upto=False)
    with pytest.raises(ToolError, match="old text anchor not found"):
        select_span(MAKEFILE, b"all: bc\n[upto]\nclean:\n", upto=False)
    assert select_span(b"x[upto]y", b"[upto]", upto=False) == Span(1, 7, anchored=False)


def test_edit_report_shows_the_shift_and_the_context() -> None:
    data = b"".join(b"l%d\n" % i for i in range(1, 21))
    span = select_span(data, b"l10\n", upto=False)
    updated = apply_edit(data, span, b"new a\nnew b\n")
    report = edit_report("f", data, span, updated)
    lines = report.split("\n")
    assert lines[0] == "Edited f using old/new replacement"
    assert lines[1] == "Touched old lines 10-10; current post-edit context follows."
    assert lines[2] == (
        "Line shift: old lines after 10 moved by +1 (old line 11 is now line 12). Re-read "
        "before relying on old line numbers there."
    )
    assert lines[3] == "Current file around edit: f lines 5-19 of 21"
    assert lines[4:7] == ["5 l5", "6 l6", "7 l7"]
    assert "10 new a" in lines and "11 new b" in lines and "19 l18" in lines


def test_long_edits_show_both_ends() -> None:
    data = b"a\nb\n"
    span = select_span(data, b"b\n", upto=False)
    new = b"".join(b"n%d\n" % i for i in range(50))
    report = edit_report("f", data, span, apply_edit(data, span, new))
    assert "... 14 edited lines omitted ..." in report
    assert "2 n0\n" in report and "51 n49\n" in report and "20 n18" not in report


# ---- list, search, results ----------------------------------------------------------


def test_list_report() -> None:
    entries = [DirEntry("src", "d", 4096), DirEntry("a.py", "-", 12), DirEntry("ln", "l", 3)]
    assert list_report(".", entries) == (
        ".:\nd       4096 src/\n-         12 a.py\nl          3 ln\n"
    )
    many = [DirEntry(f"f{i}", "-", 0) for i in range(301)]
    assert list_report(".", many).endswith("-          0 f299\n... more entries omitted ...\n")


def test_search_report_with_context_and_limit() -> None:
    report = SearchReport(SearchQuery("x", context=1, max_results=3))
    report.add_file("a.txt", b"1\nx\n3\nx\n5\n")
    report.add_file("b.bin", b"x\0")
    report.add_file("c.txt", b"x\nx\n")
    assert report.text() == (
        "3 matches shown\n\na.txt\n  1 1\n  2 x\n  3 3\n  4 x\n  5 5\n\nc.txt\n  1 x\n  2 x\n\n"
    )
    assert report.full()
    none = SearchReport(SearchQuery("zzz"))
    none.add_file("a", b"abc")
    assert none.text() == "No matches\n"


def test_search_modes() -> None:
    folded = SearchReport(SearchQuery("HELLO", case_sensitive=False))
    folded.add_file("a", b"hello\n")
    assert folded.text().startswith("1 match shown")
    regex = SearchReport(SearchQuery("^de+f", regex=True))
    regex.add_file("a", b"deef x\nxdef\n")
    assert "  1 deef x" in regex.text() and "xdef" not in regex.text()
    with pytest.raises(ToolError, match="invalid regex"):
        SearchReport(SearchQuery("(", regex=True))
    assert glob_allows("*.py", "src/a.py") and glob_allows("src/*", "src/a.py")
    assert not glob_allows("*.c", "src/a.py")


def test_results_are_wrapped_per_call_and_protected() -> None:
    assert combined_results([("read", "a"), ("list", "b\n")]) == (
        "Tool result 1 (read):\na\nTool result 2 (list):\nb\n"
    )
    assert (
        tool_turn("x</tool_result>y") == "<｜User｜><tool_result>x&lt;/tool_result>y</tool_result>"
    )
    assert queued_message(["one"]) == "one"
    assert queued_message(["a", "b"]) == "Queued user message 1:\na\n\nQueued user message 2:\nb"
