"""The memory panel: the web page where a user sees, corrects and controls what is
remembered about them (docs/panel.md), served by the memory API itself.

``GET /panel`` is the page and ``GET /panel/static/<name>`` its script modules and
style sheet, from worker/api/panel/ (package data: ``pip install .[api]`` ships it).
Nothing here needs a credential: the page holds no user data. Its script takes the
user's token from the URL's fragment (which never reaches a server) and calls the
API's routes under ``/users/<sub>/`` with it.

Every answer carries a strict Content-Security-Policy (scripts, styles, images and
requests from this origin only; no inline script or style; framed only by the
origins of MEMFLEET_PANEL_FRAME_ANCESTORS), ``nosniff`` and no referrer. The files
are read once, when the app is built, and revalidated by ETag on each load
(``no-cache``), so an upgrade of the API never leaves an old script in a browser.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

from fastapi import APIRouter, HTTPException, Request, status
from fastapi.responses import Response

PAGE = "index.html"
# What the page may load, by name: nothing else under /panel/static/ exists.
STATIC_TYPES = {
    "panel.js": "text/javascript; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "view.js": "text/javascript; charset=utf-8",
    "dialogs.js": "text/javascript; charset=utf-8",
    "panel.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}


def content_security_policy(frame_ancestors: str) -> str:
    """The page's policy; ``frame_ancestors`` is the checked setting
    (worker.api.settings.frame_ancestors_sources)."""
    return ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
            "connect-src 'self'; base-uri 'none'; form-action 'none'; "
            f"frame-ancestors {frame_ancestors}")


@dataclass(frozen=True, slots=True)
class PanelFile:
    body: bytes
    media_type: str
    etag: str


@dataclass(frozen=True, slots=True)
class PanelFiles:
    """The page and its static files, with the headers every answer carries."""

    files: dict[str, PanelFile]
    headers: dict[str, str]

    @classmethod
    def load(cls, frame_ancestors: str) -> PanelFiles:
        folder = resources.files("worker.api") / "panel"
        files = {}
        for name, media_type in {PAGE: "text/html; charset=utf-8", **STATIC_TYPES}.items():
            body = (folder / name).read_bytes()
            files[name] = PanelFile(body, media_type,
                                    '"' + hashlib.sha256(body).hexdigest()[:32] + '"')
        headers = {
            "Content-Security-Policy": content_security_policy(frame_ancestors),
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            # Revalidated on every load (a 304 is a few bytes): never an old script
            # beside a new page after an upgrade.
            "Cache-Control": "no-cache",
            "Cross-Origin-Resource-Policy": "same-origin",
        }
        return cls(files, headers)

    def answer(self, request: Request, name: str) -> Response:
        file = self.files[name]
        headers = {**self.headers, "ETag": file.etag}
        if file.etag in request.headers.get("if-none-match", ""):
            return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers=headers)
        return Response(file.body, media_type=file.media_type, headers=headers)


router = APIRouter(tags=["panel"])


def _files(request: Request) -> PanelFiles:
    files: PanelFiles = request.app.state.panel
    return files


@router.get(
    "/panel",
    response_class=Response,
    responses={200: {"content": {"text/html": {}},
                     "description": "The memory panel (HTML); open it as /panel#token=<JWT>."}},
    summary="The memory panel: a page where the user sees, corrects and controls their "
            "memory (no authentication: the page's script sends the token)",
)
async def panel(request: Request) -> Response:
    return _files(request).answer(request, PAGE)


@router.get(
    "/panel/static/{name}",
    response_class=Response,
    responses={200: {"content": {"text/javascript": {}, "text/css": {}},
                     "description": "One of the panel's script modules, its style sheet "
                                    "or its icon."},
               404: {"description": "No such file of the panel."}},
    summary="The memory panel's script modules and style sheet",
)
async def panel_static(request: Request, name: str) -> Response:
    if name not in STATIC_TYPES:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="no such file")
    return _files(request).answer(request, name)
