"""How a workbook's sheets show when it opens: LibreOffice's import forgets the first sheet's view and the sheet the
workbook shows; the result gets both back from the .xls, and LibreOffice reads them from it."""

import re
import shutil
import zipfile

import openpyxl
import pytest
from conftest import ROOT
from conftest import _soffice_save as soffice

from docshift.engine import convert, inventory, sheet_views
from docshift.engine.inventory.common import Selection, View
from docshift.engine.inventory.package import NS_S

CORPUS = ROOT.parent / "shared" / "corpus" / "xls"
PLAIN = View(100, 60, False, True, True, True, False, False, False, False, (0, 0), None)


def views(path):
    """(the title of the sheet the workbook at ``path`` shows, {sheet title: (zoom, gridlines, view, frozen pane)})
    as openpyxl reads them."""
    book = openpyxl.load_workbook(path)
    found = {}
    for sheet in book.worksheets:
        view, pane = sheet.sheet_view, sheet.sheet_view.pane
        frozen = pane and (pane.xSplit or 0, pane.ySplit or 0, pane.topLeftCell, pane.activePane, pane.state)
        found[sheet.title] = (view.zoomScale or 100, view.showGridLines is not False, view.view or "normal", frozen)
    return book.active.title, found


def test_the_source_reads_each_sheet_s_view():
    """xlrd's WINDOW2, SCL and PANE, sheet by sheet; a workbook that shows its first sheet as Excel shows a new one
    holds none to put back."""
    frozen = inventory.of_source(CORPUS / "12561-1.xls", "xls").views
    assert frozen == {"作業リスト": PLAIN._replace(zoom=75, selected=True, shown=True, frozen=(3, 7, 3, 7, 0))}
    bare = inventory.of_source(CORPUS / "56450.xls", "xls").views
    assert bare == {"Sheet": PLAIN._replace(zoom=70, grid=False, selected=True, shown=True)}
    third = inventory.of_source(CORPUS / "WithTwoCharts.xls", "xls").views
    assert [name for name, view in third.items() if view.shown] == ["Sheet3"]
    assert inventory.of_source(CORPUS / "32822.xls", "xls").views == {}


@pytest.mark.parametrize("name, shown, expected", [
    ("12561-1.xls", "作業リスト", {"作業リスト": (75, True, "normal", (7, 3, "H4", "bottomRight", "frozen"))}),
    ("56450.xls", "Sheet", {"Sheet": (70, False, "normal", None)}),
    ("36947.xls", "Sheet1", {"Sheet1": (60, True, "pageBreakPreview", None)}),
    ("WithTwoCharts.xls", "Sheet3", {}),
])
def test_the_first_sheet_s_view_and_the_sheet_shown_come_back(office, tmp_path, name, shown, expected):
    """A plain soffice opens each workbook on its first sheet, at 100 %, with gridlines and no frozen panes;
    docshift's result shows what the .xls shows (zoom, gridlines, frozen rows and columns, page break preview, the
    sheet the workbook opens on), and LibreOffice, saving the result again, keeps all of it."""
    source = tmp_path / name
    shutil.copy(CORPUS / name, source)
    plain_shown, plain = views(soffice(source, "xlsx", tmp_path / "plain"))
    first = next(iter(plain))
    assert plain_shown == first and plain[first] == (100, True, "normal", None)
    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    result_shown, result = views(converted.path)
    assert result_shown == shown and {title: result[title] for title in expected} == expected
    assert {title: view for title, view in result.items() if title not in expected} == \
        {title: view for title, view in plain.items() if title not in expected}  # the other sheets as they were
    again = soffice(converted.path, "xlsx", tmp_path / "again")
    again_shown, read = views(again)
    assert again_shown == shown
    assert {title: read[title][:2] + read[title][3:] for title in expected if title != "Sheet1"} == \
        {title: view[:2] + view[3:] for title, view in expected.items() if title != "Sheet1"}


def test_a_sheet_view_is_written_where_it_differs_only():
    """The zoom and gridlines go on the first sheetView's start tag, a frozen pane first inside it (an empty
    sheetView is opened for it); a pane LibreOffice wrote stays; no zoom of the normal view is added where none was
    written (zoomScale is the one shown); a view as the .xls has it stays byte for byte."""
    view = PLAIN._replace(zoom=80, grid=False, selected=True, frozen=(1, 0, 1, 0, 2))
    empty = f'<worksheet xmlns="{NS_S}"><sheetViews><sheetView workbookViewId="0"/></sheetViews></worksheet>'.encode()
    assert sheet_views.viewed(empty, "sheet1.xml", view) == empty.replace(
        b'<sheetView workbookViewId="0"/>',
        b'<sheetView workbookViewId="0" showGridLines="false" tabSelected="true" zoomScale="80">'
        + f'<pane xmlns="{NS_S}" ySplit="1" topLeftCell="A2" activePane="bottomLeft" state="frozen"/>'.encode()
        + b"</sheetView>")
    written = (f'<worksheet xmlns="{NS_S}"><sheetViews><sheetView showGridLines="true" zoomScale="100" '
               'workbookViewId="0"><pane ySplit="3" state="split"/><selection/></sheetView></sheetViews>'
               '<sheetData/></worksheet>').encode()
    assert sheet_views.viewed(written, "sheet1.xml", view) == written.replace(
        b'showGridLines="true" zoomScale="100"', b'showGridLines="false" zoomScale="80"').replace(
        b'workbookViewId="0">', b'workbookViewId="0" tabSelected="true">')
    same = written.replace(b'showGridLines="true" zoomScale="100"', b'showGridLines="0" zoomScale="80" '
                           b'zoomScaleNormal="80" tabSelected="1"')
    assert sheet_views.viewed(same, "sheet1.xml", view) == same


def test_a_workbook_shown_on_another_sheet_is_opened_there(tmp_path):
    """``workbookView``'s activeTab names the sheet the .xls shows, and its tab is selected: two parts edited, the
    first sheet's view left as it was; done once, nothing is left to edit."""
    result = tmp_path / "book.xlsx"
    book = openpyxl.Workbook()
    book.create_sheet("Second")
    book.save(result)
    wanted = {"Sheet": PLAIN._replace(selected=False), "Second": PLAIN._replace(selected=True, shown=True)}
    assert sheet_views.mend(result, "xls", wanted) == 2
    assert views(result)[0] == "Second"
    with zipfile.ZipFile(result) as package:
        assert b'tabSelected="true"' in package.read("xl/worksheets/sheet2.xml")
    assert sheet_views.mend(result, "xls", wanted) == 0


def workbook_view(path):
    with zipfile.ZipFile(path) as package:
        data = package.read("xl/workbook.xml").decode()
    return dict(re.findall(r'(\w+)="([^"]*)"', re.search(r"<workbookView [^>]*>", data).group()))


def test_the_workbook_keeps_its_window_and_its_tabs_share_of_the_scroll_bar(office, tmp_path):
    """``36947.xls``'s WINDOW1 gives its window's place and size and Excel's tab ratio (600); a plain soffice writes
    0, 0, 16384 x 8192 and 500, as for every workbook, docshift the .xls's."""
    source = CORPUS / "36947.xls"
    window = inventory.of_source(source, "xls").window
    assert window == {"xWindow": "480", "yWindow": "120", "windowWidth": "14235", "windowHeight": "8955",
                      "firstSheet": "0", "tabRatio": "600"}
    plain = workbook_view(soffice(source, "xlsx", tmp_path / "plain"))
    assert (plain["tabRatio"], plain["windowWidth"], plain["windowHeight"]) == ("500", "16384", "8192")
    ours = workbook_view(convert.convert(office, source, "xls", tmp_path / "work", 60).path)
    assert {key: ours[key] for key in window} == window


def test_a_first_tab_the_result_has_not_is_left_out(tmp_path):
    """firstSheet past the result's sheets would leave Excel no tab to show, and a window of no width none: the rest
    of the window goes in."""
    made = tmp_path / "made.xlsx"
    openpyxl.Workbook().save(made)
    result = tmp_path / "book.xlsx"
    with zipfile.ZipFile(made) as source, zipfile.ZipFile(result, "w") as package:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "xl/workbook.xml":  # as LibreOffice writes it
                data = re.sub(rb'tabRatio="600"', b'windowWidth="16384" tabRatio="500"', data)
            package.writestr(info, data)
    assert workbook_view(result)["windowWidth"] == "16384"
    assert sheet_views.mend(result, "xls", {}, {"firstSheet": "3", "tabRatio": "750", "windowWidth": "0"}) == 1
    view = workbook_view(result)
    assert view["tabRatio"] == "750" and view.get("firstSheet", "0") == "0" and view["windowWidth"] == "16384"


def selections(path):
    """{sheet title: [(pane, active cell, the ranges selected)] of its view} of the workbook at ``path``, from its
    XML (openpyxl keeps one selection a view)."""
    found = {}
    with zipfile.ZipFile(path) as package:
        titles = re.findall(r'<sheet name="([^"]*)"', package.read("xl/workbook.xml").decode())
        for index, title in enumerate(titles, 1):
            view = package.read(f"xl/worksheets/sheet{index}.xml").decode().split("</sheetViews>")[0]
            found[title] = [(re.search(r'pane="(\w+)"', tag)[1] if "pane=" in tag else "topLeft",
                             re.search(r'activeCell="(\w+)"', tag)[1], re.search(r'sqref="([^"]+)"', tag)[1])
                            for tag in re.findall(r"<selection\b[^>]*/>", view)]
    return found


def test_each_sheet_keeps_its_selected_cells(office, tmp_path):
    """Excel opens each sheet with the cells its author left selected (SELECTION records, one a pane). LibreOffice's
    import forgets the first sheet's, as it forgets its view: a plain soffice opens ``46137.xls``'s dashboard on A1
    where Excel shows E46. docshift's result selects what the .xls does on every sheet: a cell, whole rows (rows
    1-6 of the second sheet, to Excel 2007's last column), a range; and in each of the four panes a frozen view
    makes (``SubtotalsNested.xls``, C15 in the bottom right one)."""
    plain = selections(soffice(CORPUS / "46137.xls", "xlsx", tmp_path / "plain"))
    assert plain["EntityDistributionDashboard"] == [("topLeft", "A1", "A1")]
    ours = selections(convert.convert(office, CORPUS / "46137.xls", "xls", tmp_path / "work", 60).path)
    assert ours["EntityDistributionDashboard"] == [("topLeft", "E46", "E46")]
    assert ours["Metadata"] == [("topLeft", "A1", "A1:XFD6")] and ours["Datasheet1"] == [("topLeft", "C30", "A1:C30")]
    frozen = selections(convert.convert(office, CORPUS / "SubtotalsNested.xls", "xls", tmp_path / "frozen", 60).path)
    assert frozen["Tabelle1"] == [("topLeft", "A1", "A1"), ("topRight", "H1", "H1"), ("bottomLeft", "A38", "A38"),
                                  ("bottomRight", "C15", "C15")]


def test_a_selection_is_written_where_it_differs_only():
    """``selected`` leaves a view that already selects what the .xls does byte for byte, drops a selection of a pane
    the view does not make, and opens an empty view to give it its selection."""
    cell = [Selection(3, (4, 2), 0, ((4, 4, 2, 2),)), Selection(0, (9, 9), 0, ((9, 9, 9, 9),))]
    same = (f'<worksheet xmlns="{NS_S}"><sheetViews><sheetView workbookViewId="0"><selection activeCell="C5" '
            'activeCellId="0" sqref="C5"/></sheetView></sheetViews><sheetData/></worksheet>').encode()
    assert sheet_views.selected(same, "sheet1.xml", cell) == same
    other = same.replace(b"C5", b"A1")
    assert sheet_views.selected(other, "sheet1.xml", cell) == same
    empty = (f'<worksheet xmlns="{NS_S}"><sheetViews><sheetView workbookViewId="0"/></sheetViews><sheetData/>'
             '</worksheet>').encode()
    assert sheet_views.selected(empty, "sheet1.xml", cell) == same
    # a frozen view: LibreOffice writes a selection in each of its four panes, the .xls gives the bottom right's
    panes = "".join(f'<selection pane="{pane}" activeCell="{ref}" activeCellId="0" sqref="{ref}"/>' for pane, ref in
                    (("topLeft", "A1"), ("topRight", "B1"), ("bottomLeft", "A2"), ("bottomRight", "B2")))
    frozen = (f'<worksheet xmlns="{NS_S}"><sheetViews><sheetView workbookViewId="0"><pane xSplit="1" ySplit="1" '
              f'topLeftCell="B2" activePane="bottomRight" state="frozen"/>{panes}</sheetView></sheetViews>'
              '<sheetData/></worksheet>').encode()
    moved = sheet_views.selected(frozen, "sheet1.xml", [Selection(0, (10, 2), 0, ((10, 10, 2, 2),))])
    assert moved == frozen.replace(b'"bottomRight" activeCell="B2" activeCellId="0" sqref="B2"',
                                   b'"bottomRight" activeCell="C11" activeCellId="0" sqref="C11"')
