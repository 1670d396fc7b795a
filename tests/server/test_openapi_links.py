"""OpenAPI links resolve: statically for every documented response, and when followed against the live app.

A link's parameter that reads ``$request.query.user_id`` does not resolve when the request left ``user_id``
out (the anonymous user), so the link's next call silently lost its user. Every expression must read a path
parameter of the source operation or a required member of the source response's body.
"""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Api

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _deref(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = document["components"]["schemas"][name]
    return schema


def _types(document: dict[str, Any], schema: dict[str, Any]) -> set[str]:
    schema = _deref(document, schema)
    if "anyOf" in schema:
        return set().union(*(_types(document, s) for s in schema["anyOf"]))
    kind = schema.get("type")
    return {kind} if isinstance(kind, str) else set(kind or ["any"])


def _links(document: dict[str, Any]) -> list[tuple[str, str, str, str, dict[str, Any]]]:
    found = []
    for path, item in document["paths"].items():
        for method, op in item.items():
            for status, response in op["responses"].items():
                for name, link in response.get("links", {}).items():
                    found.append((path, method, status, name, link))
    return found


def _operation(document: dict[str, Any], operation_id: str) -> dict[str, Any]:
    for item in document["paths"].values():
        for op in item.values():
            if op.get("operationId") == operation_id:
                return op  # type: ignore[no-any-return]
    raise AssertionError(f"no operation {operation_id}")


def check_expression(
    document: dict[str, Any], source: dict[str, Any], status: str, expression: str, target: dict[str, Any]
) -> None:
    """Raise AssertionError unless ``expression`` resolves for every response ``source`` documents at ``status``,
    to a value ``target`` (a parameter) can take (null only for an optional parameter: it is then left out)."""
    params = {(p["in"], p["name"]): p for p in source.get("parameters", [])}
    if expression.startswith("$request."):
        _, where, name = expression.split(".", 2)
        declared = params.get(("path" if where == "path" else where, name))
        assert declared is not None, f"{expression}: not a required parameter"
        assert declared.get("required"), f"{expression}: not a required parameter"
        return
    assert expression.startswith("$response.body#/"), expression
    schema = _deref(document, source["responses"][status]["content"]["application/json"]["schema"])
    for member in expression.removeprefix("$response.body#/").split("/"):
        assert "object" in _types(document, schema), f"{expression}: {member} is read from a non-object"
        assert member in schema.get("required", []), f"{expression}: {member} is not a required member"
        schema = _deref(document, schema["properties"][member])
    value_types = _types(document, schema)
    wanted = _types(document, target["schema"])
    if "null" in value_types:
        assert not target.get("required"), f"{expression} can be null for the required {target['name']}"
    assert value_types - {"null"} <= wanted | {"any"}, f"{expression}: {value_types} for {target['name']} {wanted}"


def test_every_link_expression_resolves_for_every_documented_response(api: Api) -> None:
    document = api.http.get("/openapi.json").json()
    links = _links(document)
    assert len(links) >= 20
    for path, method, status, name, link in links:
        source = document["paths"][path][method]
        target = _operation(document, link["operationId"])
        target_params = {p["name"]: p for p in target.get("parameters", [])}
        assert set(target_params) >= set(link["parameters"]), (path, name)
        for param, expression in link["parameters"].items():
            assert not expression.startswith("$request.query."), (path, name, expression)
            check_expression(document, source, status, expression, target_params[param])


def test_a_query_link_to_an_optional_user_is_refused_by_the_check(api: Api) -> None:
    document = api.http.get("/openapi.json").json()
    source = document["paths"]["/v1/sessions"]["post"]
    target = {p["name"]: p for p in _operation(document, "getSession")["parameters"]}
    with pytest.raises(AssertionError, match="not a required parameter"):
        check_expression(document, source, "201", "$request.query.user_id", target["user_id"])
    with pytest.raises(AssertionError, match="not a required member"):
        check_expression(document, source, "201", "$response.body#/no_such_member", target["user_id"])


def _resolve(expression: str, request_path: dict[str, str], body: dict[str, Any]) -> Any:
    if expression.startswith("$request.path."):
        return request_path[expression.removeprefix("$request.path.")]
    value: Any = body
    for member in expression.removeprefix("$response.body#/").split("/"):
        value = value[member]
    return value


@pytest.mark.parametrize("user", [None, "alice"])
def test_following_each_session_link_reaches_the_same_users_session(api: Api, user: str | None) -> None:
    """With and without ``user_id``: the link's next call finds the session the response named (never a 404)."""
    document = api.http.get("/openapi.json").json()
    headers = api.headers(api.key_a)
    query = {"user_id": user} if user is not None else {}
    created = api.http.post("/v1/sessions", json={"max_tokens": 2000}, params=query, headers=headers)
    assert created.status_code == 201
    sid = created.json()["id"]
    added = api.http.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": "hi"}]},
        params=query,
        headers=headers,
    )
    assert added.status_code == 201
    put = api.http.put("/v1/blocks/notes", json={"value": "v", "expected_version": 0}, params=query, headers=headers)
    assert put.status_code == 200
    sources = {
        ("/v1/sessions", "post", "201"): ({}, created.json()),
        ("/v1/sessions/{session_id}/messages", "post", "201"): ({"session_id": sid}, added.json()),
        ("/v1/blocks/{name}", "put", "200"): ({"name": "notes"}, put.json()),
    }
    followed = 0
    for (path, method, status), (path_params, body) in sources.items():
        for link in document["paths"][path][method]["responses"][status]["links"].values():
            if link["operationId"] not in ("getSession", "listMessages", "getContext", "getBlock", "exportSession"):
                continue
            values = {p: _resolve(e, path_params, body) for p, e in link["parameters"].items()}
            user_id = values.pop("user_id")
            assert user_id == user
            target_path, target_method = next(
                (p, m)
                for p, item in document["paths"].items()
                for m, op in item.items()
                if op.get("operationId") == link["operationId"]
            )
            url = target_path.format(**values)
            params = {"user_id": user_id} if user_id is not None else {}
            if target_method == "get":
                answer = api.http.get(url, params=params, headers=headers)
            else:
                answer = api.http.post(url, json={}, params=params, headers=headers)
            assert answer.status_code == 200, (link["operationId"], answer.text)
            followed += 1
    assert followed >= 8
