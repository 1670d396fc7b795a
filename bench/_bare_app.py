"""The bare route ``bench/service.py`` compares the service with: FastAPI answering the same paths, doing no work.

It parses the JSON body (as any route would) and answers 201 or 200 with a small JSON body, so the
difference to the service is the service's own work: authentication, the store and the memory.
Run by ``bench/service.py`` as ``uvicorn --app-dir bench _bare_app:app --workers N``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

app = FastAPI()


@app.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/v1/sessions", status_code=201)
async def create(request: Request) -> dict[str, Any]:
    return {"id": (await request.json()).get("id")}


@app.post("/v1/sessions/{session_id}/messages", status_code=201)
async def add(session_id: str, request: Request) -> dict[str, Any]:
    body = await request.json()
    return {"messages": [{"id": m.get("id")} for m in body.get("messages", [])]}


@app.post("/v1/sessions/{session_id}/context")
async def context(session_id: str, request: Request) -> dict[str, Any]:
    await request.json()
    return {"request": {"messages": []}}
