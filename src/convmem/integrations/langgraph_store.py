"""A LangGraph ``BaseStore`` kept as convmem facts: namespaced long-term memory the user's memories can see.

LangGraph's stores (``InMemoryStore``, the Postgres one) keep a graph's long-term memory
(what LangMem and the prebuilt agents write) apart from the conversation memory. This one
keeps each item as a convmem fact of the namespace's user, in the fact store of a convmem
store (SQLite, PostgreSQL, Redis, in memory), so a ``Memory(facts=True)`` of that user renders
the items into its context, and every change is kept in the fact's history::

    namespace ("alice", "memories")   ->  the user ``namespace[user_at]`` ("alice"; user_at=None: one
                                          anonymous user for every namespace)
    put(ns, key, value)               ->  a fact whose subject is ``lg:["alice","memories","<key>"]``, its text
                                          the value as canonical JSON, the value itself in its metadata; a new
                                          value ends the old fact (``Facts.update``), the same value writes nothing
    put(ns, key, None) / delete       ->  the fact ends (``Facts.invalidate``: kept in the history, not deleted)
    get / search / list_namespaces    ->  the user's facts valid now, read in one call per user per batch

With ``recall="archive"``, a namespace whose last label is ``archive`` (and that names the user, as
``("alice", "archive")``) is the user's convmem archive, read only: what every ``Memory(recall=True)``
of the user evicted, in every session. ``search(query=...)`` there is convmem's recall (BM25 with its
ranking steps, hybrid with the store's vectors), each hit an item keyed ``<session>:<message id>``
with ``{"role", "text", "session_id", "seq"}``; ``get`` reads one (a scan of the user's archive); a put
or a delete there is refused: the archive is written by the memory, never by the graph.

TTLs (minutes, LangGraph's unit) map to the fact's validity: an item put with ``ttl`` expires
``ttl`` minutes after its last write, or its last read when ``refresh_ttl`` (LangGraph's default,
or ``ttl_config["refresh_on_read"]``); a read moves the expiry by writing a new version of the
fact, at most once a minute per item. An expired item is gone from every read of this store, and
the first batch that reads its user ends its fact *at the expiry time* (``valid_to``, reason
``expired``): the history keeps it and ``facts(valid_at=t)`` answers for any ``t``. Until that
batch, a ``Memory(facts=True)`` of the user still renders it (convmem's facts have no scheduled
end that a later delete could move, so the end is written when it is seen).

``search(query=...)`` ranks by the query's words found in the item (LangGraph's stores need an
embedding index for a natural-language query; this one is lexical and needs none); ``filter`` takes
LangGraph's operators (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``). A search or a
namespace listing must name the user (a prefix reaching ``namespace[user_at]``): convmem's facts
never cross users.

Example::

    from convmem.integrations.langgraph_store import ConvmemStore
    from convmem.stores import open_store

    store = ConvmemStore(open_store("sqlite:///memory.db"), user_at=1)   # LangMem's ("memories", "{user_id}")
    store.put(("memories", "alice"), "food", {"content": "Alice is vegetarian"})
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from ..errors import ConfigurationError
from ..longterm.facts import Facts
from ..longterm.facts.model import Fact, FactAdd, FactInvalidate, FactOperation, FactUpdate
from . import missing

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
    )
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test with a blocked import
    raise missing("langgraph", "langchain") from exc

__all__ = ["ConvmemStore"]

PREFIX = "lg:"  # the subject of every fact this store writes: other facts of the user are never its items
KEY = "langgraph"  # the metadata key of an item's value and creation time
_WORD = re.compile(r"\w+")
_REFRESH_STEP = timedelta(minutes=1)  # a read moves an expiry only this much later or more: a write a minute at most


class ConvmemStore(BaseStore):
    """A LangGraph ``BaseStore`` over a convmem store's facts (see the module docstring).

    Args:
        store: a convmem store with long-term memory (``store.facts()``), or a fact store.
        user_at: which element of a namespace is the user (None: every item belongs to the anonymous user).
        ttl_config: LangGraph's ``TTLConfig``: ``default_ttl`` (minutes) for puts that name none,
            ``refresh_on_read`` (default True).
        clock: the time now (aware); the facts' times and every expiry are read from it.
        recall: the last namespace label that names the user's recall archive (None: no archive namespace).
    """

    supports_ttl = True

    def __init__(
        self,
        store: Any,
        *,
        user_at: int | None = 0,
        ttl_config: TTLConfig | None = None,
        clock: Callable[[], datetime] | None = None,
        recall: str | None = None,
    ) -> None:
        if user_at is not None and (isinstance(user_at, bool) or not isinstance(user_at, int) or user_at < 0):
            raise ConfigurationError(f"user_at must be a namespace position (0 or more) or None, got {user_at!r}")
        default = (ttl_config or {}).get("default_ttl")
        if default is not None and not (isinstance(default, (int, float)) and 0 < default < 10**8):
            raise ConfigurationError(f"ttl_config['default_ttl'] must be minutes above 0, got {default!r}")
        facts = store.facts() if callable(getattr(store, "facts", None)) else store
        self.recall, self._archive = recall, None
        if recall is not None:
            if not isinstance(recall, str) or not recall or "." in recall:
                raise ConfigurationError(f"recall must be a namespace label (no '.'), got {recall!r}")
            if not callable(getattr(store, "recall", None)):
                raise ConfigurationError("recall= needs a convmem store with recall documents (store.recall())")
            from ..longterm.recall import RecallIndex

            self._archive = RecallIndex(store=store.recall())
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self.facts = Facts(facts, clock=self.clock)
        self.user_at = user_at
        self.ttl_config = ttl_config

    # -- the BaseStore contract --------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        views: dict[str | None, dict[str, Fact]] = {}  # each user's items, read once per batch

        now = self.clock()

        def view(user: str | None) -> dict[str, Fact]:
            if user not in views:
                items = {
                    f.subject: f for f in self.facts.facts(user_id=user) if f.subject and f.subject.startswith(PREFIX)
                }
                views[user] = self._unexpired(items, user, now)
            return views[user]

        results: list[Result] = []
        for op in ops:
            space = op.namespace_prefix if isinstance(op, SearchOp) else getattr(op, "namespace", ())
            if self._archive is not None and space and space[-1] == self.recall:
                results.append(self._read_archive(op, self._user(space[:-1], searching=True)))
            elif isinstance(op, GetOp):
                user = self._user(op.namespace)
                items = view(user)
                fact = items.get(_subject(op.namespace, op.key))
                if fact is not None and op.refresh_ttl:
                    fact = self._refresh(fact, items, user, now)
                results.append(_item(fact) if fact is not None else None)
            elif isinstance(op, PutOp):
                self._put(op, view(self._user(op.namespace)))
                results.append(None)
            elif isinstance(op, SearchOp):
                user = self._user(op.namespace_prefix, searching=True)
                items = view(user)
                found = self._search(op, items)
                if op.refresh_ttl:
                    for hit in found:
                        self._refresh(items[_subject(hit.namespace, hit.key)], items, user, now)
                results.append(found)
            elif isinstance(op, ListNamespacesOp):
                results.append(self._namespaces(op, view))
            else:
                raise ConfigurationError(f"ConvmemStore does not know the operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))  # the fact stores are sync: off the event loop

    # -- operations --------------------------------------------------------------------------
    def _user(self, namespace: tuple[str, ...], *, searching: bool = False) -> str | None:
        if self.user_at is None:
            return None
        if len(namespace) <= self.user_at:
            what = "a search or a listing" if searching else "a namespace"
            raise InvalidNamespaceError(
                f"{what} must name the user at position {self.user_at} (convmem's facts never cross users), "
                f"got {namespace!r}"
            )
        return namespace[self.user_at]

    def _put(self, op: PutOp, items: dict[str, Fact]) -> None:
        if not op.namespace or any(not isinstance(p, str) or not p or "." in p for p in op.namespace):
            raise InvalidNamespaceError(f"namespace labels must be non-empty strings without '.', got {op.namespace!r}")
        if op.ttl is not None and not (isinstance(op.ttl, (int, float)) and 0 < op.ttl < 10**8):
            raise ConfigurationError(f"ttl must be minutes above 0 (or None: no expiry), got {op.ttl!r}")
        user, subject = self._user(op.namespace), _subject(op.namespace, op.key)
        current = items.get(subject)
        if op.value is None:
            if current is not None:
                self.facts.invalidate(current.id, reason="deleted", user_id=user)
                del items[subject]
            return
        text = json.dumps(op.value, sort_keys=True, ensure_ascii=False, default=str)
        if current is not None and current.text == text and op.ttl is None and _ttl(current) is None:
            return  # the same value: nothing changes, nothing is written
        now = self.clock()
        created = current.metadata.get(KEY, {}).get("created_at") if current is not None else None
        meta: dict[str, Any] = {"value": json.loads(text), "created_at": created or now.isoformat()}
        if op.ttl is not None:
            meta |= {"ttl": op.ttl, "expires_at": (now + timedelta(minutes=op.ttl)).isoformat()}
        if current is None:
            items[subject] = self.facts.add(text, user_id=user, subject=subject, metadata={KEY: meta})
        elif (
            current.text == text
        ):  # the same value with a new expiry: a new version (an update of the same text is none)
            items[subject] = self._replace(current, meta, user, reason="updated")
        else:
            update = FactUpdate(current.id, text, subject=subject, metadata={KEY: meta})
            items[subject] = self.facts.apply([update], user_id=user).added[-1]

    # -- the recall archive ---------------------------------------------------------------------
    def _read_archive(self, op: Op, user: str | None) -> Result:
        assert self._archive is not None
        if isinstance(op, PutOp):
            raise ConfigurationError(
                f"the {self.recall!r} namespace is the user's recall archive, written by the memory (the messages it "
                "evicts), never by the graph: put and delete facts in another namespace"
            )
        if isinstance(op, SearchOp):
            if not op.query:
                raise ConfigurationError(f"a search of the recall archive ({self.recall!r}) needs a query")
            hits = self._archive.search(op.query, user_id=user, k=min(1_000, op.offset + op.limit))
            items = [_doc_item(op.namespace_prefix, h.doc, h.score) for h in hits]
            kept = [i for i in items if not op.filter or all(_matches(i.value.get(k), f) for k, f in op.filter.items())]
            return kept[op.offset : op.offset + op.limit]
        assert isinstance(op, GetOp)
        docs = self._archive.store.load_docs(user) if self._archive.store is not None else []
        doc = next((d for d in docs if f"{d.session_id}:{d.message_id}" == op.key), None)
        return None if doc is None else _doc_item(op.namespace, doc, None)

    # -- TTLs ----------------------------------------------------------------------------------
    def _replace(self, fact: Fact, meta: dict[str, Any], user: str | None, *, reason: str) -> Fact:
        ops: list[FactOperation] = [
            FactInvalidate(fact.id, reason),
            FactAdd(fact.text, subject=fact.subject, metadata={KEY: meta}),
        ]
        return self.facts.apply(ops, user_id=user).added[-1]

    def _unexpired(self, items: dict[str, Fact], user: str | None, now: datetime) -> dict[str, Fact]:
        """The items not expired at ``now``; each expired one's fact ends at its expiry, in one write."""
        expired = [f for f in items.values() if (end := _expires(f)) is not None and end <= now]
        if expired:
            ends = [FactInvalidate(f.id, "expired", valid_to=max(_expires(f) or now, f.valid_from)) for f in expired]
            self.facts.apply(ends, user_id=user)
        gone = {f.subject for f in expired}
        return {s: f for s, f in items.items() if s not in gone}

    def _refresh(self, fact: Fact, items: dict[str, Fact], user: str | None, now: datetime) -> Fact:
        """A read of an item with a TTL moves its expiry to now + ttl (a minute later at least, or nothing)."""
        ttl, end = _ttl(fact), _expires(fact)
        if ttl is None or end is None or now + timedelta(minutes=ttl) - end < _REFRESH_STEP:
            return fact
        meta = dict(fact.metadata[KEY]) | {"expires_at": (now + timedelta(minutes=ttl)).isoformat()}
        fresh = self._replace(fact, meta, user, reason="refreshed")
        items[str(fact.subject)] = fresh
        return fresh

    def _search(self, op: SearchOp, items: dict[str, Fact]) -> list[SearchItem]:
        n = len(op.namespace_prefix)
        found = []
        for fact in items.values():
            namespace, _ = _parts(fact)
            value = fact.metadata[KEY]["value"]
            if namespace[:n] != op.namespace_prefix:
                continue
            if op.filter and not all(_matches(value.get(k), f) for k, f in op.filter.items()):
                continue
            found.append((fact, _score(op.query, fact.text) if op.query else None))
        if op.query:
            found = [(f, s) for f, s in found if s]
            found.sort(key=lambda pair: -(pair[1] or 0.0))
        else:
            found.sort(key=lambda pair: pair[0].valid_from, reverse=True)  # the newest first
        return [_item(f, score=s) for f, s in found[op.offset : op.offset + op.limit]]

    def _namespaces(self, op: ListNamespacesOp, view: Any) -> list[tuple[str, ...]]:
        prefix = next((c.path for c in op.match_conditions or () if c.match_type == "prefix"), ())
        if self.user_at is not None and (len(prefix) <= self.user_at or prefix[self.user_at] == "*"):
            raise InvalidNamespaceError(
                f"list_namespaces needs a prefix that names the user at position {self.user_at}, got {prefix!r}"
            )
        spaces = {_parts(f)[0] for f in view(self._user(tuple(prefix))).values()}
        kept = [ns for ns in spaces if all(_condition(c, ns) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            kept = list({ns[: op.max_depth] for ns in kept})
        return sorted(kept)[op.offset : op.offset + op.limit]


def _doc_item(namespace: tuple[str, ...], doc: Any, score: float | None) -> SearchItem:
    value = {"role": doc.role, "text": doc.text, "session_id": doc.session_id, "seq": doc.seq}
    return SearchItem(namespace, f"{doc.session_id}:{doc.message_id}", value, doc.created_at, doc.created_at, score)


def _ttl(fact: Fact) -> float | None:
    ttl = fact.metadata.get(KEY, {}).get("ttl")
    return float(ttl) if ttl is not None else None


def _expires(fact: Fact) -> datetime | None:
    stamp = fact.metadata.get(KEY, {}).get("expires_at")
    return datetime.fromisoformat(stamp) if stamp is not None else None


def _subject(namespace: Sequence[str], key: str) -> str:
    return PREFIX + json.dumps([*namespace, key], ensure_ascii=False, separators=(",", ":"))


def _parts(fact: Fact) -> tuple[tuple[str, ...], str]:
    path = json.loads((fact.subject or PREFIX + "[]")[len(PREFIX) :])
    return tuple(path[:-1]), path[-1]


def _item(fact: Fact, *, score: float | None = None) -> SearchItem:
    namespace, key = _parts(fact)
    stamp = fact.metadata[KEY]
    created = datetime.fromisoformat(stamp["created_at"])
    return SearchItem(namespace, key, dict(stamp["value"]), created, fact.valid_from, score)


def _score(query: str, text: str) -> float:
    """The share of the query's words found in the item (0: none): a lexical rank needing no index."""
    words = {w.casefold() for w in _WORD.findall(query)}
    if not words:
        return 0.0
    have = {w.casefold() for w in _WORD.findall(text)}
    return len(words & have) / len(words)


def _matches(value: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics: nested dicts, lists element by element, and the ``$`` operators."""
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(value, str(k), v) for k, v in wanted.items())
        return isinstance(value, Mapping) and all(_matches(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(wanted)
            and all(_matches(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def _operator(value: Any, operator: str, wanted: Any) -> bool:
    if operator == "$eq":
        return bool(value == wanted)
    if operator == "$ne":
        return bool(value != wanted)
    compare = {"$gt": float.__gt__, "$gte": float.__ge__, "$lt": float.__lt__, "$lte": float.__le__}.get(operator)
    if compare is None:
        raise ConfigurationError(f"unsupported filter operator {operator!r}; use $eq, $ne, $gt, $gte, $lt or $lte")
    try:
        return bool(compare(float(value), float(wanted)))
    except (TypeError, ValueError):
        return False


def _condition(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path, strict=False)
        if condition.match_type == "prefix"
        else zip(reversed(namespace), reversed(path), strict=False)
    )
    return all(p == "*" or n == p for n, p in pairs)
