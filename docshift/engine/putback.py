"""What LibreOffice's OOXML export drops of a legacy file, written back into its result from the legacy file.

LibreOffice gives objects on different slides one part, writes no OLE object of a spreadsheet, and loads an object whose
server it does not know (a packaged file) on a slide or in a text as its picture only (``objects``, ``sheet_objects``,
``word_objects``); a presentation's sounds come from the legacy file (``slide_sounds``: its gallery is shut); it writes
a comment's text on a slide unescaped (``slide_comments``), a table cell's margins where PowerPoint does not read them
(``slide_cells``); it drops the verbs objects run in the show and the macros buttons run (``slide_actions``), and when a
slide with no transition effect moves on (``slide_timings``), writes a link's colour where PowerPoint does not show it
(``slide_link_colours``), its own theme's colours in place of the deck's (``slide_schemes``), no text's shadow
(``text_shadows``), a master without its text styles (``master_styles``) and a deck without its "don't show on title
slide" and right-to-left flags (``presentation_flags``); it writes a sheet's form controls as shapes of no size
(``form_controls``), its ActiveX controls not at all (``sheet_activex``), its shapes without the macros they run
(``shape_macros``), and it loses a cell's hyperlink where the cell shows no text (``sheet_links``) and a line in a group
(``sheet_lines``); its import forgets how the first sheet shows and what it has selected, which sheet the workbook opens
on (``sheet_views``) and how it calculates (``workbook_calc``), it unhides what only a macro may and drops the
recommendation to open read-only (``workbook_access``), and prints comments at the end and sheets in colour where the
.xls says otherwise, and other margins (``sheet_printing``), flags the errors its author told Excel to ignore
(``sheet_errors``), loses Excel 2007's colour scales, data bars and icon sets (``sheet_formats``) and where an outline's
summaries are (``sheet_outlines``), sets the number formats of some cells to General (``sheet_numbers``) and the font of
East Asian text to its own fallback (``sheet_fonts``), drops the "keep as text" prefix of cells typed as text
(``sheet_quotes``), merges cells centred across selection (``sheet_across``), measures an Excel 95 workbook's rows again
(``sheet_heights``), drops its tables (``sheet_list_tables``), writes the nearest palette colour for a colour of Excel
2007's (``sheet_colours``) and its own theme for the workbook's (``sheet_theme``), and its export the code names that
bind the VBA project's modules to the workbook and its sheets (``sheet_codenames``), cuts a data validation over whole
columns short (``sheet_validations``), writes a data table and a DDE link as functions Excel has not (``sheet_tables``,
``sheet_dde``) and a name whose formula is an error constant with no formula (``sheet_name_errors``), and a chart sheet
as a worksheet holding its chart (``chart_sheets``, after the other mends of a workbook); a text's form fields lose the
bookmarks that name them (``form_bookmarks``) and their default texts, formats, help texts and macros (``form_fields``),
and the text its template (``word_template``); and it writes some of a text's properties out of their schema's order,
dates that are none, shape types that are names and VML attributes VML has not (``word_schema``, which runs last). Every
one of its imports drops the custom XML parts of a file's data store (``custom_xml``), and every export writes a link to
a file on a drive letter relative to the folder it converted in (``drive_paths``).
Each mend reads only what a file holds: one that holds none of what it puts back costs nothing (the code names are
read for a workbook whose result keeps its VBA project, the validations' ranges for one whose result holds
validations, the bookmarks' names for a text whose result has form fields).
"""

from pathlib import Path
from typing import Any

from docshift.engine import (
    chart_sheets,
    custom_xml,
    doc_properties,
    drive_paths,
    form_bookmarks,
    form_controls,
    form_fields,
    master_styles,
    objects,
    presentation_flags,
    shape_macros,
    sheet_across,
    sheet_activex,
    sheet_authors,
    sheet_codenames,
    sheet_colours,
    sheet_constants,
    sheet_dde,
    sheet_errors,
    sheet_fonts,
    sheet_formats,
    sheet_heights,
    sheet_lines,
    sheet_links,
    sheet_list_tables,
    sheet_name_errors,
    sheet_names,
    sheet_numbers,
    sheet_objects,
    sheet_outlines,
    sheet_printing,
    sheet_quotes,
    sheet_rows,
    sheet_tables,
    sheet_theme,
    sheet_validations,
    sheet_views,
    slide_actions,
    slide_cells,
    slide_comments,
    slide_link_colours,
    slide_schemes,
    slide_sounds,
    slide_timings,
    text_shadows,
    word_objects,
    word_schema,
    word_tabs,
    word_template,
    workbook_access,
    workbook_calc,
)
from docshift.engine.inventory.common import Inventory


def mend(result: Path, source: Path, kind: str, holds: Inventory, keep_macros: bool, macros_removed: bool,
         loaded: dict[str, Any] | None = None) -> int:
    """Put back into ``result``, LibreOffice's export of the legacy file ``source`` of ``kind``, what it dropped;
    ``holds``: what the legacy file holds (the report's source side), ``keep_macros``: whether the result keeps the
    VBA project, ``macros_removed``: whether the caller asked for none (a form field then names no macro, not even
    one of a template's), ``loaded``: what LibreOffice loaded of it, as the bridge read it (a deck's shadowed text).
    Returns how many things went in (0: the file is untouched)."""
    counts = holds.counts
    expected, controls = counts.get("embedded_objects"), counts.get("controls")
    return objects.mend(result, source, kind, expected) + sheet_objects.mend(result, source, kind) + \
        form_controls.mend(result, source, kind, controls, keep_macros) + \
        sheet_activex.mend(result, source, kind, controls) + \
        shape_macros.mend(result, source, kind, counts.get("actions"), keep_macros) + \
        word_objects.mend(result, source, kind, expected) + slide_sounds.mend(result, source, kind) + \
        slide_comments.mend(result, kind) + slide_cells.mend(result, kind) + \
        slide_actions.mend(result, source, kind, counts.get("actions"), keep_macros) + \
        sheet_links.mend(result, kind, holds.links) + \
        sheet_lines.mend(result, source, kind, holds.where.get("shapes", [])) + \
        slide_timings.mend(result, source, kind, holds.advances) + \
        sheet_views.mend(result, kind, holds.views, holds.window, holds.selections) + \
        sheet_codenames.mend(result, source, kind, keep_macros) + \
        slide_link_colours.mend(result, source, kind, counts.get("hyperlinks")) + \
        slide_schemes.mend(result, source, kind, holds.palettes) + \
        text_shadows.mend(result, kind, (loaded or {}).get("shadowed"), holds.palettes) + \
        master_styles.mend(result, kind) + presentation_flags.mend(result, kind, holds.presentation) + \
        sheet_validations.mend(result, source, kind) + sheet_tables.mend(result, kind) + \
        form_bookmarks.mend(result, source, kind) + form_fields.mend(result, source, kind, not macros_removed) + \
        word_template.mend(result, source, kind) + \
        word_tabs.mend(result, source, kind) + \
        workbook_calc.mend(result, kind, holds.calculation) + \
        sheet_names.mend(result, source, kind) + sheet_name_errors.mend(result, source, kind) + \
        sheet_dde.mend(result, kind, holds.dde) + \
        workbook_access.mend(result, kind, holds.very_hidden, holds.sharing, holds.protection) + \
        sheet_printing.mend(result, kind, holds.printing, holds.margins) + \
        sheet_errors.mend(result, kind, holds.ignored) + \
        sheet_formats.mend(result, kind, holds.scales) + sheet_outlines.mend(result, kind, holds.outlines) + \
        sheet_numbers.mend(result, source, kind) + sheet_quotes.mend(result, source, kind) + \
        sheet_across.mend(result, source, kind) + sheet_heights.mend(result, source, kind) + \
        sheet_list_tables.mend(result, source, kind) + sheet_colours.mend(result, source, kind) + \
        sheet_theme.mend(result, source, kind) + \
        sheet_fonts.mend(result, source, kind) + \
        sheet_rows.mend(result, source, kind) + \
        sheet_constants.mend(result, source, kind, holds.cells) + \
        chart_sheets.mend(result, kind, holds.chart_sheets) + \
        doc_properties.mend(result, holds.properties) + \
        custom_xml.mend(result, source, holds.data_store) + \
        sheet_authors.mend(result, kind, holds.authors) + drive_paths.mend(result, source) + \
        word_schema.mend(result, kind)  # last: it puts what the mends wrote in order too
