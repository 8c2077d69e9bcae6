"""The web app: ``gunicorn 'app:create_app()'`` (the Procfile's ``web``) and the operator CLI,
``flask --app app ...``. The app itself is ``docshift.web``; importing this file starts nothing."""

from docshift.web import create_app

__all__ = ["create_app"]
