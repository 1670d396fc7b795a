"""The web inspector in a real headless Chromium (Debian's ``chromium``, driven by Playwright).

It opens ``/ui``, connects with a key, picks a session, moves the turn slider
with the keyboard and checks that every number on the token-account bar is
the number ``GET /v1/sessions/{id}/turns/{seq}`` returns; no console error is
allowed. The screenshot goes to ``$CONVMEM_SCREENSHOT`` (or the test's tmp dir).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import Live

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
expect.set_options(timeout=30_000)
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
pytestmark = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None and not os.path.exists(CHROMIUM),
    reason="needs Debian's chromium (.ci/run installs it)",
)
USER = "inspector"
HTTP = httpx.Client(timeout=60)  # generous: a loaded CI machine is slow, never wrong; closed by close_http
PARTS = {"system": "pinned", "summary": "summary", "window": "window", "reserve": "reserved_output"}


@pytest.fixture(autouse=True, scope="module")
def close_http() -> Any:
    yield
    HTTP.close()


def seed(live: Live) -> str:
    auth = {"Authorization": f"Bearer {live.key_a}"}
    params = {"user_id": USER}
    body = {
        "model": "gpt-4o",
        "max_tokens": 400,
        "max_output_tokens": 60,
        "strategy": "summary_buffer",
        "title": "Trip planning",
        "id": "trip",
    }
    assert HTTP.post(f"{live.url}/v1/sessions", params=params, json=body, headers=auth).status_code == 201
    put = {"value": "Alice prefers trains to planes.", "expected_version": 0}
    assert HTTP.put(f"{live.url}/v1/blocks/persona", params=params, json=put, headers=auth).status_code == 200
    turns: list[Any] = [{"role": "system", "content": "You plan trips."}]
    for i in range(24):
        text = f"Day {i}: we talked about the train from Lisbon to Porto and the hotel near station {i}. " * 2
        turns.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    for message in turns:
        response = HTTP.post(
            f"{live.url}/v1/sessions/trip/messages", params=params, json={"messages": [message]}, headers=auth
        )
        assert response.status_code == 201
    fact = HTTP.post(
        f"{live.url}/v1/facts", params=params, json={"text": "Alice lives in Lisbon", "subject": "home"}, headers=auth
    )
    HTTP.post(
        f"{live.url}/v1/facts/{fact.json()['id']}/update",
        params=params,
        json={"text": "Alice lives in Porto"},
        headers=auth,
    )
    HTTP.post(
        f"{live.url}/v1/sessions",
        params=params,
        json={"model": "gpt-4o", "id": "other", "title": "Groceries"},
        headers=auth,
    )
    return "trip"


def turn(live: Live, sid: str, seq: int) -> dict[str, Any]:
    response = HTTP.get(
        f"{live.url}/v1/sessions/{sid}/turns/{seq}",
        params={"user_id": USER},
        headers={"Authorization": f"Bearer {live.key_a}"},
    )
    return response.json()  # type: ignore[no-any-return]


def bar_numbers(page: Any) -> dict[str, int]:
    return {
        part: int(page.locator(f'#account-numbers dd[data-part="{part}"]').inner_text())
        for part in ("system", "blocks", "summary", "window", "input", "overhead", "reserve", "free", "budget")
    }


def expected_numbers(account: dict[str, Any]) -> dict[str, int]:
    return {
        "system": account["pinned"],
        "blocks": sum(account["blocks"].values()),
        "summary": account["summary"],
        "window": account["window"],
        "input": account["input"],
        "overhead": account["overhead"],
        "reserve": account["reserved_output"],
        "free": max(0, account["free"]),
        "budget": account["budget"],
    }


def test_the_inspector_in_headless_chromium(live: Live, tmp_path: Path) -> None:
    sid = seed(live)
    errors: list[str] = []
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.set_default_timeout(60_000)
        page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        requested: list[str] = []
        page.on("request", lambda r: requested.append(r.url))
        page.goto(f"{live.url}/ui/")

        # Connect with the keyboard only.
        page.locator("#api-key").focus()
        page.keyboard.type(live.key_a)
        page.keyboard.press("Tab")
        page.keyboard.type(USER)
        page.keyboard.press("Enter")
        page.locator("#sessions button").first.wait_for()
        assert page.locator("#sessions button").count() == 2

        # Search narrows the list; pick the session with Enter.
        page.keyboard.press("Tab")  # out of the user field, onto the Connect button
        page.keyboard.press("/")
        page.keyboard.type("trip")
        expect(page.locator("#sessions button")).to_have_count(1)
        page.locator('#sessions button[data-session="trip"]').focus()
        page.keyboard.press("Enter")
        page.locator("#account-bar[data-seq='24']").wait_for()

        last = turn(live, sid, 24)
        assert bar_numbers(page) == expected_numbers(last["context"]["account"])
        assert last["context"]["account"]["summary"] > 0  # the session did fold: the bar shows a summary part
        assert page.locator("#messages li").count() == 25
        statuses = set(page.locator("#messages li").evaluate_all("rows => rows.map(r => r.dataset.status)"))
        assert {"pinned", "active", "summarized"} <= statuses
        assert page.locator("#summaries li").count() >= 1
        reasons = page.locator("#left-out li").evaluate_all("rows => rows.map(r => r.dataset.reason)")
        assert reasons == [item["reason"] for item in last["context"]["left_out"]]

        # Move the slider with the keyboard: each position shows the API's account for that turn.
        page.locator("#turn-slider").focus()
        for steps, seq in ((10, 14), (8, 6)):
            for _ in range(steps):
                page.keyboard.press("ArrowLeft")
            page.locator(f"#account-bar[data-seq='{seq}']").wait_for()
            expected = turn(live, sid, seq)["context"]["account"]
            assert bar_numbers(page) == expected_numbers(expected)
            assert page.locator("#turn-seq").inner_text() == str(seq)
        page.keyboard.press("End")
        page.locator("#account-bar[data-seq='24']").wait_for()

        # Facts timeline: the old fact ended and names what replaced it.
        ended = page.locator("#facts li.ended")
        assert ended.count() == 1
        assert "replaced by “Alice lives in Porto”" in ended.inner_text()

        # Recall search by keyboard.
        page.locator("#recall-query").focus()
        page.keyboard.type("hotel near station 3")
        page.keyboard.press("Enter")
        page.locator("#recall-results tbody tr").first.wait_for()
        assert "#" in page.locator("#recall-results tbody tr").first.inner_text()

        shot = Path(os.environ.get("CONVMEM_SCREENSHOT", str(tmp_path / "inspector.png")))
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert errors == []
    assert all(url.startswith((live.url, "data:")) for url in requested)  # nothing from a CDN
    assert live.key_a not in "".join(requested)  # the key never travels in a URL
