"""Recall on two dev sets of different shapes, cross-validated: LoCoMo and the LongMemEval-S dev slice.

LoCoMo dev (5 conversations between two friends, short alternating turns) and the LongMemEval-S dev slice
(120 questions, each with its own haystack of ~48 user-assistant chats, long assistant turns) are each
archived through real ``Memory`` objects into a ``RecallIndex`` (``bench/_datasets.py``), and every
question is asked of its own archive (LongMemEval with its question date as "now"). Turn R@k is the share
of a question's evidence turns among the top k; session any@k / all@k whether any / all of its evidence
sessions hold one of the top k distinct sessions (LongMemEval's own retrieval metrics).

**The protocol** (``bench/_cv.py``). LoCoMo is split one conversation a fold (leave one out), LongMemEval
into five folds of questions stratified by type; fold i of both is held out together, and a mode's
constants (BM25's, the previous turn's weight and decay, each ranking step's strength) are tuned on every
other fold of both by coordinate ascent (two passes over a fixed grid), each set weighing the same.
Reported per set:

* **joint CV**: the mean of the five held-out folds (and the worst), tuned on both sets' other folds;
* **own CV**: tuned on the other folds of the same set only;
* **across sets**: tuned on all of one set, scored on all of the other (nothing of it seen);
* **dev**: tuned and scored on everything (what the code ships; the gap to joint CV is the overfit);
* **plain BM25** beside them: rank_bm25's BM25Okapi over lowercased words, one document per turn
  (``bench/_bm25.py``), the issue's baseline.

``--ablate`` reruns the joint cross-validation with each step fixed off (an add-on such as feedback: fixed
on) and reports what the step gains on the same held-out folds, in the objective (mean of R@5, R@10, R@25),
on each set, fold by fold: what the protocol loses without it, its other constants re-tuned. The rule:
a step stays only if it gains on the held-out folds of both sets (a step that never changes a ranking on a
set, because what it reacts to is not there, counts as no loss on it), and the setting never falls below
plain BM25 on either.

Run:  PYTHONPATH=src .venv/bin/python bench/recall_protocol.py --embedder none --modes lexical,fts5 --ablate
      (``--embedder minilm`` adds the hybrid mode, ``--fusion-only`` tunes only its fusion constants per
      fold from the shipped lexical ones; ``--datasets locomo`` or ``lme`` runs one set alone)
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from _cv import Config, CVResult, Evaluator, Row, cross_validate, cross_validate_jointly, figures, objective
from _datasets import datasets
from _locomo import make_embedder
from convmem.longterm.recall.ranking import DEFAULT_TUNING, Tuning

#: Every fold's search starts here: the BM25 constants the code had, every ranking step off.
START = Tuning(
    k1=0.6,
    b=0.75,
    context_weight=0.5,
    neighbour=0.0,
    date_boost=0.0,
    when_boost=0.0,
    prf_weight=0.3,
    dense_steps=0.0,
    context_decay=0.0,
    neighbour_fill=False,
    role_boost=0.0,
    # Inert while the neighbour share is 0; starting at 0 lets ascent try neighbours without them costing the
    # questions that name a role (it could not switch both on in one move), then try 1.0 again.
    neighbour_asked=0.0,
    recency=0.0,
    session_spread=0.0,
    # Inert while the spread is 0, so ascent first tries spreading only the questions that count, total or
    # compare (spreading all of them was never chosen), then every question again.
    spread_many=True,
)
BM25_SPACE: dict[str, list[Any]] = {
    "k1": [0.6, 0.9, 1.2],
    "b": [0.5, 0.75],
    "context_weight": [0.0, 0.5, 0.75, 1.0],
    "context_decay": [0.0, 1.0, 2.0, 3.0],
}
STEP_SPACE: dict[str, list[Any]] = {
    "role_boost": [0.0, 0.5, 1.0, 2.0],
    "neighbour": [0.0, 0.1, 0.2, 0.3],
    "neighbour_asked": [0.0, 1.0],
    "neighbour_fill": [False, True],
    "date_boost": [0.0, 1.0, 2.0],
    "when_boost": [0.0, 0.5],
    "recency": [0.0, 0.25, 0.5, 1.0],
    "session_spread": [0.0, 0.1, 0.2, 0.3, 0.5],
    "spread_many": [True, False],
}
FUSION_SPACE: dict[str, list[Any]] = {"dense_weight": [0.5, 1.0, 1.5], "dense_steps": [0.0, 1.0]}
#: Each step and the value that switches it off.
STEPS_OFF: dict[str, Any] = {
    "context_weight": 0.0,
    "context_decay": 0.0,
    "role_boost": 0.0,
    "neighbour": 0.0,
    "neighbour_asked": 1.0,
    "neighbour_fill": False,
    "date_boost": 0.0,
    "when_boost": 0.0,
    "recency": 0.0,
    "session_spread": 0.0,
    "spread_many": False,
    "dense_steps": 0.0,
}
#: Steps tried by switching them on in each fold's tuned setting, not searched (feedback doubles a search).
ADD_ONS: dict[str, Any] = {"prf": (5, 10, 0.2)}
OFF_VALUES = {**STEPS_OFF, "prf": (0, 0, 0.0)}
#: Where ``--only`` starts a modifier that is inert while its step is off.
START_OF: dict[str, Any] = {"spread_many": True, "neighbour_asked": 0.0}


def space(mode: str) -> dict[str, list[Any]]:
    if mode == "lexical":
        return {**BM25_SPACE, **STEP_SPACE}
    if mode == "fts5":  # the store's BM25 and column weights are fixed; the query-time steps still apply
        return dict(STEP_SPACE)
    if mode == "hybrid":
        return {**BM25_SPACE, **STEP_SPACE, **FUSION_SPACE}
    return {}


def fmt(values: Sequence[float] | None) -> str:
    return "-" if values is None else " / ".join(f"{v:.1f}" for v in values)


def sessions(rows: Sequence[Row], pick: Callable[[Row], bool] = lambda r: True) -> tuple[float, ...] | None:
    chosen = [r.sessions for r in rows if pick(r)]
    return tuple(100 * statistics.fmean(c) for c in zip(*chosen, strict=True)) if chosen else None


def fold_mean(per_fold: Sequence[tuple[float, ...]]) -> tuple[float, ...]:
    return tuple(statistics.fmean(col) for col in zip(*per_fold, strict=True))


def held_figures(result: CVResult, pick: Callable[[Row], bool] = lambda r: True) -> dict[str, Any]:
    per = [s for rows in result.held_out.values() if (s := sessions(rows, pick)) is not None]
    return {
        "mean": result.mean(pick),
        "worst": result.worst(pick),
        "dev": result.dev_mean(pick),
        "sessions": fold_mean(per) if per else None,
        "per_fold": result.per_fold(pick),
    }


def plain_figures(evaluator: Evaluator, pick: Callable[[Row], bool] = lambda r: True) -> dict[str, Any]:
    rows = evaluator.plain_rows()
    per = [f for fold in rows.values() if (f := figures(fold, pick)) is not None]
    ses = [s for fold in rows.values() if (s := sessions(fold, pick)) is not None]
    return {
        "mean": fold_mean(per),
        "worst": tuple(min(c) for c in zip(*per, strict=True)),
        "sessions": fold_mean(ses) if ses else None,
    }


def across(source: CVResult, target: Evaluator) -> dict[str, Any]:
    """The setting tuned on all of one set (its ``dev_config``), scored on every fold of the other."""
    rows = target.rows(source.dev_config)
    per = [f for fold in rows.values() if (f := figures(fold)) is not None]
    ses = [s for fold in rows.values() if (s := sessions(fold)) is not None]
    return {"mean": fold_mean(per), "sessions": fold_mean(ses), "config": repr(source.dev_config)}


def ablate(
    evaluators: Sequence[Evaluator],
    searched: dict[str, list[Any]],
    start: Config,
    joint: Sequence[CVResult],
    name: str,
    passes: int,
) -> dict[str, tuple[list[float], bool]]:
    """What the protocol loses without a step: the joint cross-validation rerun with the step fixed off (an
    add-on: fixed on), scored on the same held-out folds. Per set: the gain of the step in each fold (points
    of the objective) and whether it changed any held-out row at all."""
    if name in ADD_ONS:
        with_it = cross_validate_jointly(evaluators, searched, start.with_(name, ADD_ONS[name]), passes)
        without: Sequence[CVResult] = joint
    else:
        rest = {k: v for k, v in searched.items() if k != name}
        without = cross_validate_jointly(evaluators, rest, start.with_(name, OFF_VALUES[name]), passes)
        with_it = joint
    out = {}
    for evaluator, on, off in zip(evaluators, with_it, without, strict=True):
        gains, changed = [], False
        for fold in on.held_out:
            a, b = on.held_out[fold], off.held_out[fold]
            changed |= a != b
            gains.append(100 * (objective({fold: a}, [fold]) - objective({fold: b}, [fold])))
        out[evaluator.dataset.name] = (gains, changed)
    return out


def run_mode(
    mode: str,
    evaluators: Sequence[Evaluator],
    ablation: bool,
    passes: int,
    fusion_only: bool = False,
    only: Sequence[str] = (),
) -> dict[str, Any]:
    start = Config(mode, START)
    searched = space(mode)
    if fusion_only and mode == "hybrid":  # the shipped lexical constants, the fusion's tuned per fold
        start, searched = Config(mode, replace(DEFAULT_TUNING, dense_steps=0.0)), dict(FUSION_SPACE)
    if only:  # the shipped constants, only these tuned per fold (from their off values): a cheap run for a new step
        tuning = DEFAULT_TUNING
        for name in only:
            tuning = Config(mode, tuning).with_(name, START_OF.get(name, OFF_VALUES.get(name))).tuning
        start, searched = Config(mode, tuning), {n: v for n, v in searched.items() if n in only}
    joint = cross_validate_jointly(evaluators, searched, start, passes)
    own = [cross_validate(e, searched, start, passes) for e in evaluators]
    out: dict[str, Any] = {"mode": mode, "dev_config": repr(joint[0].dev_config), "sets": {}}
    for i, (evaluator, result) in enumerate(zip(evaluators, joint, strict=True)):
        name = evaluator.dataset.name
        categories = sorted({r.category for rows in result.held_out.values() for r in rows})
        entry: dict[str, Any] = {
            "joint": held_figures(result),
            "own": held_figures(own[i]),
            "dated": held_figures(result, lambda r: r.dated),
            "categories": {c: held_figures(result, lambda r, c=c: r.category == c) for c in categories},
            "fold_configs": {f: repr(c) for f, c in result.folds.items()},
            "own_dev_config": repr(own[i].dev_config),
        }
        others = [j for j in range(len(evaluators)) if j != i]
        if others:
            entry["across"] = across(own[others[0]], evaluator)
            entry["across_from"] = evaluators[others[0]].dataset.name
        out["sets"][name] = entry
    if ablation:
        names = [n for n in STEPS_OFF if n in searched] + [n for n in ADD_ONS if mode == "lexical"]
        for step in names:
            for set_name, cell in ablate(evaluators, searched, start, joint, step, passes).items():
                out["sets"][set_name].setdefault("ablation", {})[step] = cell
    return out


def frontier(mode: str, evaluators: Sequence[Evaluator], shares: Sequence[float], passes: int) -> None:
    """The trade-off between two sets that disagree: the joint cross-validation rerun with the first set's
    share of the objective at each of ``shares`` (0.5: the protocol), each set's held-out figures printed.
    Where no share reaches one set's target without giving up the other's, the two targets conflict."""
    start, searched = Config(mode, START), space(mode)
    names = [e.dataset.name for e in evaluators]
    print(f"\n### frontier, mode {mode}: share of {names[0]} in the objective -> held-out turn R@1/5/10/25\n")
    print(f"| share of {names[0]} | " + " | ".join(names) + " | shipped (dev) setting |")
    print("|---:|" + "---:|" * len(names) + "---|")
    for share in shares:
        joint = cross_validate_jointly(evaluators, searched, start, passes, weights=(share, 1.0 - share))
        cells = " | ".join(fmt(r.mean()) for r in joint)
        print(f"| {share:.2f} | {cells} | {joint[0].dev_config.tuning!r} |", flush=True)


def verdicts(report: dict[str, Any]) -> dict[str, str]:
    """Per step: kept or not, by the rule. Gains on the held-out folds of both sets: kept. A set where the
    step never fires (it is in the setting, and no held-out row changes) counts as no loss. The protocol
    never choosing it (off in every fold): off. A gain on one set and a loss on the other: a conflict,
    which the jointly tuned setting settles (what it picked is what ships)."""
    sets = report["sets"]
    names = next(iter(sets.values())).get("ablation", {})
    dev = report["dev_config"]
    out = {}
    for name in names:
        cells, signs = [], []
        for set_name, entry in sets.items():
            gains, changed = entry["ablation"][name]
            mean = statistics.fmean(gains)
            cells.append(f"{set_name}: {mean:+.2f}" if changed else f"{set_name}: no change")
            signs.append(0 if not changed else (1 if mean > 0 else -1))
        if all(s == 0 for s in signs):
            verdict = "never chosen: off"
        elif all(s >= 0 for s in signs):
            verdict = "kept"
        elif all(s <= 0 for s in signs):
            verdict = "removed"
        else:
            verdict = f"conflict, settled by the joint tuning ({name} in the shipped setting: {_value(dev, name)})"
        out[name] = f"{verdict} ({'; '.join(cells)})"
    return out


def _value(config_repr: str, name: str) -> str:
    found = re.search(rf"\b{name}=([^,)]+)", config_repr)
    return found.group(1) if found else "?"


def print_report(reports: Sequence[dict[str, Any]], plain: dict[str, dict[str, Any]]) -> None:
    for report in reports:
        print(f"\n### mode: {report['mode']}\n")
        print("| set | figure | turn R@1 / R@5 / R@10 / R@25 | worst fold | session any@5 / all@5 / any@10 / all@10 |")
        print("|---|---|---:|---:|---:|")
        for name, entry in report["sets"].items():
            base = plain[name]
            print(f"| {name} | plain BM25 | {fmt(base['mean'])} | {fmt(base['worst'])} | {fmt(base['sessions'])} |")
            j = entry["joint"]
            print(f"| {name} | joint CV (the protocol) | {fmt(j['mean'])} | {fmt(j['worst'])} | {fmt(j['sessions'])} |")
            o = entry["own"]
            print(f"| {name} | own CV (this set only) | {fmt(o['mean'])} | {fmt(o['worst'])} | {fmt(o['sessions'])} |")
            if "across" in entry:
                a = entry["across"]
                print(
                    f"| {name} | across (tuned on {entry['across_from']}) | {fmt(a['mean'])} | | {fmt(a['sessions'])} |"
                )
            print(f"| {name} | dev (tuned on everything) | {fmt(j['dev'])} | | |")
        for name, entry in report["sets"].items():
            print(f"\n{name}, joint CV by category (turn R@1/5/10/25; session all@5):")
            for category, cell in entry["categories"].items():
                all5 = cell["sessions"][1] if cell["sessions"] else float("nan")
                print(f"- {category}: {fmt(cell['mean'])}; all@5 {all5:.1f}")
            d = entry["dated"]
            print(f"- names a month or a year: {fmt(d['mean'])}")
            print("- per fold: " + "; ".join(f"{f} {fmt(v)}" for f, v in entry["joint"]["per_fold"].items()))
        if any("ablation" in e for e in report["sets"].values()):
            print("\nAblation (re-tuned without the step): held-out gain in mean(R@5, R@10, R@25), per fold")
            for name, verdict in verdicts(report).items():
                cells = [
                    f"{s}: " + ", ".join(f"{g:+.2f}" for g in e["ablation"][name][0]) for s, e in report["sets"].items()
                ]
                print(f"- {name}: {verdict}; " + " | ".join(cells))
        print(f"\nShipped (tuned on everything): {report['dev_config']}")
        for name, entry in report["sets"].items():
            print(f"- {name} alone picks: {entry['own_dev_config']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="locomo,lme")
    parser.add_argument("--embedder", default="none", help="minilm | e5 | e5-enpt | hashing | none")
    parser.add_argument(
        "--lme-questions",
        type=int,
        metavar="N",
        help="LongMemEval: only N of its questions, spread evenly over each type (a subsample for slow embedders)",
    )
    parser.add_argument("--modes", default="lexical,fts5,hybrid")
    parser.add_argument("--ablate", action="store_true")
    parser.add_argument("--passes", type=int, default=2, help="passes of coordinate ascent (default 2)")
    parser.add_argument(
        "--fusion-only",
        action="store_true",
        help="hybrid: tune only the fusion constants per fold, from the shipped lexical constants (a cheaper run)",
    )
    parser.add_argument(
        "--locomo-conversations",
        type=int,
        metavar="N",
        help="LoCoMo: only its first N conversations (one fold each; a subsample for slow embedders)",
    )
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument(
        "--only",
        default="",
        metavar="NAMES",
        help="comma-separated Tuning fields: start from the shipped constants and tune only these per fold "
        "(from off; a cheaper run that measures a new step held out)",
    )
    parser.add_argument(
        "--frontier",
        metavar="SHARES",
        help="comma-separated shares of the first set in the joint objective (e.g. 0.5,0.65,0.8): the joint CV "
        "at each, the trade-off between the sets (only this is run)",
    )
    args = parser.parse_args()
    sets = datasets(args.datasets, args.lme_questions, args.locomo_conversations)
    if not sets:
        sys.exit("no dev set found (see bench/_locomo.py and bench/_lme.py for where they are looked for)")
    embedder = make_embedder(args.embedder)
    modes = [m for m in args.modes.split(",") if m and (embedder is not None or m != "hybrid")]
    evaluators = [Evaluator(s, embedder) for s in sets]
    began = time.perf_counter()
    if args.frontier:
        try:
            for mode in modes:
                frontier(mode, evaluators, [float(x) for x in args.frontier.split(",")], args.passes)
        finally:
            for e in evaluators:
                e.close()
        return
    try:
        plain = {e.dataset.name: plain_figures(e) for e in evaluators}
        reports = []
        for mode in modes:
            only = [n for n in args.only.split(",") if n]
            reports.append(run_mode(mode, evaluators, args.ablate, args.passes, args.fusion_only, only))
            scored = sum(e.evaluated for e in evaluators)
            print(f"{mode}: {scored} settings scored, {time.perf_counter() - began:.0f} s", file=sys.stderr)
    finally:
        for e in evaluators:
            e.close()
        if hasattr(embedder, "save"):
            embedder.save()
    print(f"embedder: {embedder.name if embedder else 'none'}")
    print_report(reports, plain)
    if args.json:
        Path(args.json).write_text(json.dumps({"plain": plain, "reports": reports}, indent=1, default=str))


if __name__ == "__main__":
    main()
