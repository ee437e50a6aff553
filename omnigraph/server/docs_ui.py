"""The API description (``/openapi.json``) and Swagger UI (``/docs``), served without internet access.

The viewer's assets are served by this server from the ``fastapi-offline`` package: the page
works without internet access and loads nothing from another site. All three are open routes
(they describe the API, not the graph); ``omnigraph serve --no-docs`` leaves them out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse

from omnigraph.server.access import public

ASSETS = Path(fastapi_offline.__file__).parent / "static"
Asset = Literal["swagger-ui-bundle.js", "swagger-ui.css", "favicon.png"]


def add_docs_routes(app: FastAPI) -> None:
    """Add the description and its viewer to ``app`` (open routes, left out of the description)."""

    @app.get("/openapi.json", include_in_schema=False, dependencies=[public()])
    def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=[public()])
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=app.title,
            swagger_js_url="/docs/assets/swagger-ui-bundle.js",
            swagger_css_url="/docs/assets/swagger-ui.css",
            swagger_favicon_url="/docs/assets/favicon.png",
        )

    @app.get("/docs/assets/{name}", include_in_schema=False, dependencies=[public()])
    def asset(name: Asset) -> FileResponse:
        return FileResponse(ASSETS / name)
