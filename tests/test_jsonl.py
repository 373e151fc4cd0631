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
    assert jsonl.read_all(path) == rows[:whole]
    assert jsonl.read_all(path, repair=True) == rows[:whole]
    assert path.read_bytes() == data[:len(b"".join(data.splitlines(keepends=True)[:whole]))]
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
    assert jsonl.read_all(path) == [{"a": 1}, [2]]


def test_a_complete_last_line_that_is_not_json_is_a_partial_write(tmp_path):
    """A kill can stop a line after its newline was buffered but not the text before it: the last line is
    judged by its content, and cut."""
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n{"a": 2\n')
    assert jsonl.read_all(path, repair=True) == [{"a": 1}]
    assert path.read_text() == '{"a": 1}\n'


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
