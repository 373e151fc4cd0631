"""JSON-lines files that a kill cannot spoil (jctlab.jsonl): what a cut file reads back as, and what is refused."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jctlab import jsonl
from jctlab.errors import InputError

VALUES = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8)
                      | st.floats(allow_nan=False, allow_infinity=False),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                      max_leaves=6)


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(VALUES, min_size=1, max_size=6), cut=st.floats(0, 1), more=VALUES)
def test_a_file_cut_anywhere_reads_back_as_a_prefix_and_takes_new_lines(tmp_path_factory, rows, cut, more):
    """Whatever byte a kill stops the writing at, the file reads back as the rows whose lines were whole
    (an unfinished last line is skipped), and once repaired a new row lands on a line of its own."""
    path = tmp_path_factory.mktemp("j") / "rows.jsonl"
    with jsonl.Writer(path) as w:
        for r in rows:
            w.write(r)
    data = path.read_bytes()
    k = int(cut * len(data))
    path.write_bytes(data[:k])
    whole = data[:k].count(b"\n")
    assert jsonl.last(path) == (rows[whole - 1] if whole else None)
    assert jsonl.read_all(path) == rows[:whole]
    assert jsonl.read_all(path, repair=True) == rows[:whole]
    assert path.read_bytes() == data[:len(b"".join(data.splitlines(keepends=True)[:whole]))]
    jsonl.append(path, more)
    assert jsonl.read_all(path) == rows[:whole] + [more]
    path.write_bytes(data[:k])                 # a writer opened on the cut file, without reading it first
    jsonl.append(path, more)
    assert jsonl.read_all(path) == rows[:whole] + [more]


def test_a_bad_line_before_the_last_is_an_error_naming_the_file_and_byte(tmp_path):
    path = tmp_path / "cells.jsonl"
    path.write_text('{"a": 1}\n{"a": \n{"a": 3}\n')
    with pytest.raises(InputError) as e:
        jsonl.read_all(path, repair=True)
    assert "cells.jsonl" in str(e.value) and "byte 9" in str(e.value)
    assert path.read_text() == '{"a": 1}\n{"a": \n{"a": 3}\n'       # nothing cut from a file that was edited


def test_blank_lines_are_skipped_and_a_missing_file_is_empty(tmp_path):
    path = tmp_path / "x.jsonl"
    assert jsonl.read_all(path) == [] and not path.exists()
    path.write_text('{"a": 1}\n\n  \n[2]\n')
    assert [off for off, _ in jsonl.read(path)] == [0, 13]
    assert jsonl.read_all(path) == [{"a": 1}, [2]] and jsonl.last(path) == [2]
    path.write_text('[2]\n\n\n')
    assert jsonl.last(path) == [2]


def test_a_whole_last_line_that_is_not_json_is_an_error_not_a_partial_write(tmp_path):
    """A kill leaves a line without its newline (the newline is written last); a last line that has one but
    is not JSON was edited, and is refused like any other, not cut."""
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n{"a": 2\n')
    for read in (jsonl.read_all, jsonl.last):
        with pytest.raises(InputError):
            read(path, repair=True)
    assert path.read_text() == '{"a": 1}\n{"a": 2\n'


def test_the_writer_refuses_what_would_not_read_back_as_one_line(tmp_path):
    path = tmp_path / "sub" / "x.jsonl"
    with jsonl.Writer(path) as w:
        assert w.empty
        with pytest.raises(ValueError):
            w.write({"gap": float("inf")})
        with pytest.raises(ValueError):
            w.write_json('{"a":\n1}')
        w.write_json(json.dumps({"a": 1}))
        assert not w.empty
    assert jsonl.read_all(path) == [{"a": 1}]


@pytest.mark.parametrize("before", [0, 1, 3])
def test_a_partial_line_longer_than_the_read_back_step_is_cut(tmp_path, before):
    """A partial tail is found however long it is, by the writer and by ``last`` (both search back from the
    end in 64 KiB steps)."""
    path = tmp_path / "x.jsonl"
    rows = [{"i": i, "pad": "y" * 70_000} for i in range(before)]
    with jsonl.Writer(path) as w:
        for r in rows:
            w.write(r)
    with open(path, "ab") as f:
        f.write(b'{"i": 99, "pad": "' + b"z" * 150_000)
    assert jsonl.last(path) == (rows[-1] if rows else None)
    jsonl.append(path, {"i": 7})
    assert jsonl.read_all(path) == rows + [{"i": 7}] and jsonl.last(path) == {"i": 7}
    with open(path, "ab") as f:
        f.write(b'{"i": 100, "pad": "' + b"z" * 150_000)
    assert jsonl.last(path, repair=True) == {"i": 7} and jsonl.read_all(path) == rows + [{"i": 7}]
