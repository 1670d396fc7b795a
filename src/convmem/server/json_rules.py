"""JSON Schema rules the request bodies share, stated as the stores and the library check them (the OpenAPI
document is as strict as the service wherever JSON Schema can say so: docs/service.md)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from pydantic.config import JsonDict, JsonValue

from ..limits import MAX_INT

__all__ = ["BUDGET_KNOWN", "EDIT_NEEDS", "METADATA", "STORABLE_JSON", "VISIBLE", "Scalar", "StorableInt"]

# Integers a store keeps exactly (limits.MAX_INT: a JSON number past 2**53 is not one for every reader).
StorableInt = Annotated[int, Field(ge=-MAX_INT, le=MAX_INT)]
Scalar = StorableInt | float | bool | str | None
#: JSON as the stores keep it (limits.check_json): the members of a metadata object refer to this schema,
#: which _openapi adds to the document's components. Depth and lone surrogates are not stated.
STORABLE_JSON: dict[str, Any] = {
    "anyOf": [
        {"type": "string"},
        {"type": "boolean"},
        {"type": "null"},
        {"type": "integer", "minimum": -MAX_INT, "maximum": MAX_INT},
        {"type": "number", "not": {"type": "integer"}},
        {"type": "array", "items": {"$ref": "#/components/schemas/StorableJson"}},
        {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/StorableJson"}},
    ]
}
# A character str.strip() keeps: the library refuses a text that strips to nothing, and Python's whitespace
# also counts the separators \x1c-\x1f and \x85, which a regex's \s does not.
VISIBLE = r"[^\s\x1c-\x1f\x85]"
METADATA: JsonDict = {"additionalProperties": {"$ref": "#/components/schemas/StorableJson"}}
#: A session's budget must be known: max_tokens, or a model (not null).
BUDGET_KNOWN: list[JsonValue] = [
    {"required": ["max_tokens"], "not": {"properties": {"max_tokens": {"type": "null"}}}},
    {"required": ["model"], "not": {"properties": {"model": {"type": "null"}}}},
]
#: What each block edit op needs (the service refuses the rest as invalid-edit).
EDIT_NEEDS: list[JsonValue] = [
    {"properties": {"op": {"const": "append"}, "text": {"type": "string"}}, "required": ["op", "text"]},
    {
        "properties": {"op": {"const": "replace"}, "old": {"type": "string"}, "new": {"type": "string"}},
        "required": ["op", "old", "new"],
    },
]
