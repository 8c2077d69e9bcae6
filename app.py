"""The web app: ``gunicorn 'app:create_app()'`` (the Procfile's ``web``) and the operator CLI,
``flask --app app ...``. The app itself is ``docshift.web``; importing this file starts nothing."""

import sys
from collections.abc import Mapping
from typing import Any

from flask import Flask

from docshift import web
from docshift.errors import BadSetting

__all__ = ["create_app"]


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """``docshift.web.create_app``; a setting that cannot work ends the process with one line that names it,
    as the worker's does, not the traceback of a CLI that could not load its app."""
    try:
        return web.create_app(config)
    except BadSetting as error:
        sys.exit(f"docshift: {error}")
