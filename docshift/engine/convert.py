"""Conversion of one legacy file to OOXML on a warm LibreOffice, and the checks of its output.

Failures are sorted into the documented task error codes (``ConversionFailed``);
LibreOffice's own messages go to the log, never to the client.
"""

import io
import logging
from pathlib import Path

from docshift.errors import ConversionFailed, LoadFailed, OfficeCrashed, OfficeTimeout
from docshift.formats import FORMATS

log = logging.getLogger("docshift.engine")


def convert(office, source, kind, workdir, timeout, task_id=None):
    """Convert ``source`` on ``office`` and return the path of the checked OOXML file.

    A crash of LibreOffice is retried once on a fresh process; a second one fails.
    """
    extension, export_filter = FORMATS[kind].target, FORMATS[kind].export_filter
    for attempt in (1, 2):
        # a killed LibreOffice leaves a partial file and its lock behind: start clean
        result = Path(workdir) / f"attempt-{attempt}" / f"result.{extension}"
        result.parent.mkdir(parents=True, exist_ok=True)
        try:
            facts = office.convert(source, result, export_filter, timeout, task_id)
            break
        except OfficeTimeout:
            raise ConversionFailed("conversion_timeout", f"The conversion took longer than {timeout} s.")
        except LoadFailed as error:
            log.warning("LibreOffice could not convert %s: %s", source, error)
            raise ConversionFailed("conversion_failed", "LibreOffice could not convert this file.")
        except OfficeCrashed as error:
            log.warning("LibreOffice crashed on %s (attempt %d): %s", source, attempt, error)
    else:
        raise ConversionFailed("conversion_failed", "LibreOffice crashed on this file twice.")
    if not result.exists() or result.stat().st_size == 0:
        raise ConversionFailed("conversion_failed", "LibreOffice produced no output.")
    check_output(result, kind, source, facts)
    return result


def check_output(path, kind, source, facts):
    """Raise ``output_invalid`` unless the OOXML opens in its reference library and lost nothing
    that the source had: sheet names (xlrd reads the source), slide count, non-empty text."""
    try:
        loss = _loss(path, kind, source, facts)
    except Exception as error:
        log.warning("output of %s does not open: %r", kind, error)
        raise ConversionFailed("output_invalid", "The converted file failed validation.") from error
    if loss:
        log.warning("output of %s lost content: %s", source, loss)
        raise ConversionFailed("output_invalid", f"The converted file failed validation: {loss}.")


def _loss(path, kind, source, facts):
    if kind == "doc":
        import docx

        document = docx.Document(str(path))
        text = "".join(p.text for p in document.paragraphs).strip() or any(
            cell.text.strip() for table in document.tables for row in table.rows for cell in row.cells)
        if facts.get("characters") and not text:
            return "the text is missing"
    elif kind == "xls":
        import openpyxl

        book = openpyxl.load_workbook(str(path), read_only=True)
        names = book.sheetnames
        book.close()
        expected = _source_sheet_names(source) or facts.get("sheets")
        if expected and names != expected:
            return f"sheets {names} instead of {expected}"
    else:
        import pptx

        slides = len(pptx.Presentation(str(path)).slides)
        if "slides" in facts and slides != facts["slides"]:
            return f"{slides} slides instead of {facts['slides']}"
    return None


def _source_sheet_names(source):
    """Sheet names as xlrd reads them from the .xls itself, or None where xlrd cannot."""
    import xlrd

    try:
        book = xlrd.open_workbook(str(source), on_demand=True, logfile=io.StringIO())
    except Exception:
        return None
    try:
        return book.sheet_names()
    finally:
        book.release_resources()
