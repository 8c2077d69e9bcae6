"""LibreOffice conversion of one legacy file to OOXML, and the checks of its output.

Failures are sorted into the documented task error codes (``ConversionFailed``);
LibreOffice's own output goes to the log, never to the client.
"""

import logging
import os
import signal
import subprocess
from pathlib import Path

log = logging.getLogger("docshift.converter")

TARGETS = {
    "doc": ("docx", "MS Word 2007 XML"),
    "xls": ("xlsx", "Calc MS Excel 2007 XML"),
    "ppt": ("pptx", "Impress MS PowerPoint 2007 XML"),
}


class ConversionFailed(Exception):
    """A conversion that ends the task FAILED with ``code`` (never retried)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def target(kind):
    return TARGETS[kind][0]


def convert(source, kind, workdir, timeout):
    """Convert ``source`` (a ``.doc``/``.xls``/``.ppt``) and return the checked OOXML path."""
    extension, export_filter = TARGETS[kind]
    workdir = Path(workdir)
    outdir = workdir / "out"
    argv = [
        "soffice", "--headless", "--invisible", "--norestore", "--nologo", "--nodefault",
        "--nolockcheck", f"-env:UserInstallation={(workdir / 'profile').as_uri()}",
        "--convert-to", f"{extension}:{export_filter}", "--outdir", str(outdir), str(source),
    ]
    # own session: on timeout the whole tree (oosplash + soffice.bin) is killed
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True, cwd=workdir)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise ConversionFailed("conversion_timeout", f"The conversion took longer than {timeout} s.")
    result = outdir / f"{Path(source).stem}.{extension}"
    # soffice exits 0 even when it could not load the file: the output is the only signal
    if not result.exists() or result.stat().st_size == 0:
        log.warning("soffice produced no output (exit %s): %s", process.returncode,
                    output.decode(errors="replace").strip()[-2000:])
        raise ConversionFailed("conversion_failed", "LibreOffice could not convert this file.")
    check_output(result, kind)
    return result


def check_output(path, kind):
    """Raise ``output_invalid`` unless the OOXML opens in its reference library."""
    try:
        if kind == "doc":
            import docx

            docx.Document(str(path))
        elif kind == "xls":
            import openpyxl

            openpyxl.load_workbook(str(path), read_only=True).close()
        else:
            import pptx

            pptx.Presentation(str(path))
    except Exception as error:
        log.warning("output of %s does not open: %r", kind, error)
        raise ConversionFailed("output_invalid", "The converted file failed validation.") from error
