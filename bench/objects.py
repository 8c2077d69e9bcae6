"""Embedded objects kept over a folder of .ppt, .xls or .doc files: counted in the source (a .ppt's ExObjList and the
shapes that show them, an .xls's MBD storages), in a plain cold ``soffice --convert-to pptx|xlsx`` and in that same
export once mended (``objects.mend``: each slide's object a part of its own, and a slide's object that LibreOffice
loaded as its picture an object again; ``sheet_objects.mend``: each sheet's objects put
in, which Calc's export drops; ``word_objects.mend``: a text's object that LibreOffice loaded as its picture an
object again), the steps the engine adds after LibreOffice's export.

    .venv/bin/python bench/objects.py [FOLDER ...]     # default ../shared/corpus/ppt, xls and doc
"""

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

from docshift.engine import inventory, objects, sheet_objects, word_objects


def mend_text(result, source, kind):
    return word_objects.mend(result, source, kind, None)


MENDS = {"ppt": (objects.mend, "pptx"), "xls": (sheet_objects.mend, "xlsx"), "doc": (mend_text, "docx")}


def count(folder: Path, kind: str, out: Path) -> list[int]:
    """[source, plain soffice, docshift] embedded objects over the ``kind`` files of ``folder``, each file printed."""
    mend, target = MENDS[kind]
    totals = [0, 0, 0]
    files = [path for path in sorted(folder.glob(f"*.{kind}"))
             if inventory.of_source(path, kind).counts.get("embedded_objects")]
    if not files:
        return totals
    subprocess.run(["soffice", "--headless", "--norestore", f"-env:UserInstallation={(out / 'p').as_uri()}",
                    "--convert-to", target, "--outdir", str(out), *map(str, files)], capture_output=True,
                   timeout=60 * len(files) + 60)
    for path in files:
        plain = out / f"{path.stem}.{target}"
        if not plain.exists():
            continue
        mended = out / f"{path.stem}.mended.{target}"
        shutil.copy(plain, mended)
        mend(mended, path, kind)
        counts = [inventory.of_source(path, kind).counts["embedded_objects"] or 0,
                  inventory.of_result(plain, kind).counts["embedded_objects"] or 0,
                  inventory.of_result(mended, kind).counts["embedded_objects"] or 0]
        totals = [a + b for a, b in zip(totals, counts)]
        print(f"{path.name:48} source {counts[0]:4} soffice {counts[1]:4} docshift {counts[2]:4}")
    return totals


def main() -> None:
    corpus = Path(__file__).resolve().parents[2] / "shared" / "corpus"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, default=[corpus / "ppt", corpus / "xls", corpus / "doc"])
    for folder in parser.parse_args().folders:
        kinds = [kind for kind in MENDS if any(folder.glob(f"*.{kind}"))]
        for kind in kinds:
            with tempfile.TemporaryDirectory() as work:
                totals = count(folder, kind, Path(work))
            print(f"{'all .' + kind + ' of ' + folder.name:48} source {totals[0]:4} soffice {totals[1]:4} "
                  f"docshift {totals[2]:4}")


if __name__ == "__main__":
    main()
