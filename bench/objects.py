"""Embedded objects kept over a folder of .ppt files: counted in the source (its ExObjList, the shapes that show
them), in a plain cold ``soffice --convert-to pptx`` and in that same export once ``objects.mend`` has given each
object a part of its own (the step the engine adds after LibreOffice's export).

    .venv/bin/python bench/objects.py [FOLDER]        # default ../shared/corpus/ppt
"""

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

from docshift.engine import inventory, objects


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path,
                        default=Path(__file__).resolve().parents[2] / "shared" / "corpus" / "ppt")
    folder = parser.parse_args().folder
    totals = [0, 0, 0]
    with tempfile.TemporaryDirectory() as work:
        out = Path(work)
        files = [path for path in sorted(folder.glob("*.ppt"))
                 if inventory.of_source(path, "ppt").counts.get("embedded_objects")]
        subprocess.run(["soffice", "--headless", "--norestore", f"-env:UserInstallation={(out / 'p').as_uri()}",
                        "--convert-to", "pptx", "--outdir", str(out), *map(str, files)], capture_output=True,
                       timeout=60 * len(files) + 60)
        for path in files:
            plain = out / f"{path.stem}.pptx"
            if not plain.exists():
                continue
            mended = out / f"{path.stem}.mended.pptx"
            shutil.copy(plain, mended)
            objects.mend(mended, path, "ppt")
            counts = [inventory.of_source(path, "ppt").counts["embedded_objects"] or 0,
                      inventory.of_result(plain, "ppt").counts["embedded_objects"] or 0,
                      inventory.of_result(mended, "ppt").counts["embedded_objects"] or 0]
            totals = [a + b for a, b in zip(totals, counts)]
            print(f"{path.name:48} source {counts[0]:4} soffice {counts[1]:4} docshift {counts[2]:4}")
    print(f"{'all':48} source {totals[0]:4} soffice {totals[1]:4} docshift {totals[2]:4}")


if __name__ == "__main__":
    main()
