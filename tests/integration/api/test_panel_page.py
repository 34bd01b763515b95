"""The memory panel's page as the API serves it over real HTTP: its headers (the strict
Content-Security-Policy with MEMFLEET_PANEL_FRAME_ANCESTORS, nosniff, no referrer,
revalidation by ETag), only its own files, and no credential needed for them (the page
holds no user data). What the page does is tests/integration/api/test_panel_browser.py."""

from __future__ import annotations

import httpx

from tests.api_server import api_settings, running_api
from worker.api.panel_page import STATIC_TYPES
from worker.config import Settings

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors ")


def _assert_headers(resp: httpx.Response, frame_ancestors: str = "'none'") -> None:
    assert resp.headers["content-security-policy"] == CSP + frame_ancestors
    assert resp.headers["x-content-type-options"] == "nosniff"
    assert resp.headers["referrer-policy"] == "no-referrer"
    assert resp.headers["cache-control"] == "no-cache"
    assert resp.headers["etag"].startswith('"')


async def test_the_page_and_its_files_come_with_strict_headers(settings: Settings) -> None:
    async with running_api(api_settings(settings)) as url, \
            httpx.AsyncClient(base_url=url) as client:
        page = await client.get("/panel")
        assert page.status_code == 200, page.text
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        _assert_headers(page)
        assert '<script type="module" src="panel/static/panel.js"></script>' in page.text
        for name, media_type in STATIC_TYPES.items():
            file = await client.get(f"/panel/static/{name}")
            assert (file.status_code, file.headers["content-type"]) == (200, media_type), name
            _assert_headers(file)
        # Revalidation: the file's own ETag is a 304 with no body, with its headers;
        # another file's is the file.
        js = await client.get("/panel/static/panel.js")
        same = await client.get("/panel/static/panel.js",
                                headers={"If-None-Match": js.headers["etag"]})
        assert (same.status_code, same.content) == (304, b"")
        _assert_headers(same)
        other = await client.get("/panel/static/panel.js",
                                 headers={"If-None-Match": page.headers["etag"]})
        assert (other.status_code, other.content) == (200, js.content)


async def test_nothing_but_the_panels_files_is_served(settings: Settings) -> None:
    async with running_api(api_settings(settings)) as url, \
            httpx.AsyncClient(base_url=url) as client:
        for path in ("/panel/static/panel_page.py", "/panel/static/..%2Fpanel_page.py",
                     "/panel/static/index.html", "/panel/static/"):
            resp = await client.get(path)
            assert resp.status_code == 404, (path, resp.status_code)
            assert "PanelFiles" not in resp.text


async def test_a_chat_product_may_frame_the_page_from_its_own_origins(
    settings: Settings,
) -> None:
    framed = api_settings(settings).model_copy(update={
        "panel_frame_ancestors": "'self' https://chat.example.com"})
    async with running_api(framed) as url, httpx.AsyncClient(base_url=url) as client:
        _assert_headers(await client.get("/panel"), "'self' https://chat.example.com")
        _assert_headers(await client.get("/panel/static/panel.css"),
                        "'self' https://chat.example.com")
