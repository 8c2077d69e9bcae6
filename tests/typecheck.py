"""mypy over docshift/ and storage/ (``make test``), with ``[tool.mypy]`` of pyproject.toml.

The checkout's storage/ is installed as ``docshift.storage`` by setuptools' import hook, which
mypy cannot follow: this names each storage/ file by its installed module, so that imports of
``docshift.storage`` resolve to it and errors still point at the checkout's own files.
"""

import sys

from mypy import build
from mypy.errors import CompileError
from mypy.main import process_options


def main() -> int:
    sources, options = process_options(["--config-file", "pyproject.toml", *sys.argv[1:]])
    for source in sources:
        if source.module == "storage" or source.module.startswith("storage."):
            source.module = f"docshift.{source.module}"
    try:
        result = build.build(sources, options)
    except CompileError as error:  # a file mypy cannot parse
        print("\n".join(error.messages))
        return 2
    for line in result.errors:
        print(line)
    files = len(sources)
    if result.errors:
        print(f"mypy: {len(result.errors)} errors in {files} source files", file=sys.stderr)
        return 1
    print(f"mypy: no issues found in {files} source files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
