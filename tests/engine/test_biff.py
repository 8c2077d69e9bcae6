"""The records of an .xls that the mends read, each type in the stream's order, indexed once per file as it is: a
file written again at the same path is read again."""

import struct
import threading

import xlwt

from docshift.engine import biff

NUMBER, FORMULA = 0x027E, 0x0006  # xlwt writes these numbers as RK records


def workbook(path, sheets):
    """An .xls (xlwt: BIFF8) with ``sheets`` {name: [(row, column, number or formula text)]}."""
    book = xlwt.Workbook()
    for name, cells in sheets.items():
        sheet = book.add_sheet(name)
        for row, column, value in cells:
            sheet.write(row, column, xlwt.Formula(value) if isinstance(value, str) else value)
    book.save(str(path))


def cells(path, types):
    return [(rec_type, sheet, *struct.unpack_from("<HH", data, body)) for rec_type, sheet, data, body, _ in
            biff.records(path, types)]


def test_records_of_several_types_come_in_the_stream_s_order(tmp_path):
    path = tmp_path / "a.xls"
    workbook(path, {"One": [(0, 0, 1.5), (0, 1, "A1*2"), (1, 0, 2.5)], "Two": [(0, 0, "1+1"), (2, 3, 7.25)]})
    assert cells(path, {NUMBER, FORMULA}) == [(NUMBER, "One", 0, 0), (FORMULA, "One", 0, 1), (NUMBER, "One", 1, 0),
                                              (FORMULA, "Two", 0, 0), (NUMBER, "Two", 2, 3)]
    assert cells(path, {FORMULA}) == [(FORMULA, "One", 0, 1), (FORMULA, "Two", 0, 0)]


def test_a_file_written_again_at_its_path_is_read_again(tmp_path):
    path = tmp_path / "a.xls"
    workbook(path, {"One": [(0, 0, 1.5)]})
    assert cells(path, {NUMBER}) == [(NUMBER, "One", 0, 0)]
    workbook(path, {"Renamed": [(4, 2, 1.5), (5, 2, 3.0)]})
    assert cells(path, {NUMBER}) == [(NUMBER, "Renamed", 4, 2), (NUMBER, "Renamed", 5, 2)]


def test_a_file_that_is_no_compound_file_has_no_records(tmp_path):
    path = tmp_path / "a.xls"
    path.write_text("<html><table><tr><td>1</td></tr></table></html>")
    assert cells(path, {NUMBER}) == []


def test_a_workbook_s_records_are_indexed_while_libreoffice_converts_it(office, tmp_path, monkeypatch):
    """The mends read the records after the export, on the way of the result: they find them indexed already."""
    from docshift.engine import convert

    path = tmp_path / "numbers.xls"
    workbook(path, {"One": [(0, 0, 1.5), (0, 1, "A1*2")]})
    built, cached = [], biff._indexed

    def indexed(*args):
        misses = cached.cache_info().misses
        found = cached(*args)
        if cached.cache_info().misses > misses:
            built.append(threading.current_thread().name)
        return found

    cached.cache_clear()
    monkeypatch.setattr(biff, "_indexed", indexed)
    read = []
    monkeypatch.setattr(biff, "records", lambda *args, real=biff.records, **kwargs: (
        read.append(threading.current_thread().name), real(*args, **kwargs))[1])
    convert.convert(office, path, "xls", tmp_path / "work", 60)
    assert built == ["source-inventory"]
    assert "MainThread" in read  # the mends and checks read them, on the run's own thread
