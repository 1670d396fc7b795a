"""The month/year questions of LoCoMo dev, held out: each fold's tuned hybrid setting with and without the dense steps.

The fold settings are those ``bench/locomo_recall.py --embedder minilm --modes dense,hybrid --fusion-only`` chose
(the shipped lexical constants; dense weight 1.0 or 1.5 per fold; no rerank). Prints, for dense steps off and on,
the mean over the five held-out conversations of R@1/5/10/25 on the questions naming a month or a year, the
worst conversation, and the same mean over all questions.

Run:  CONVMEM_BENCH_CACHE=/tmp/convmem-bench .venv/bin/python bench/dated_ablation.py
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from _cv import Config, Evaluator, figures
from _locomo import load, make_embedder
from convmem.longterm.recall.ranking import DEFAULT_TUNING

FOLD_WEIGHTS = {"conv-26": 1.0, "conv-30": 1.5, "conv-41": 1.0, "conv-42": 1.0, "conv-43": 1.5}


def main() -> None:
    evaluator = Evaluator(load(), make_embedder("minilm"))
    evaluator.progress = False
    try:
        for steps in (0.0, 1.0):
            dated, every = [], []
            for conv, weight in FOLD_WEIGHTS.items():
                config = Config("hybrid", replace(DEFAULT_TUNING, dense_steps=steps), dense_weight=weight)
                rows = evaluator.rows(config)[conv]
                found = figures(rows, lambda r: r.dated)
                if found is not None:
                    dated.append(found)
                every.append(figures(rows) or ())
            mean = " / ".join(f"{statistics.fmean(c):.1f}" for c in zip(*dated, strict=True))
            worst = " / ".join(f"{min(c):.1f}" for c in zip(*dated, strict=True))
            overall = " / ".join(f"{statistics.fmean(c):.1f}" for c in zip(*every, strict=True))
            print(f"dense_steps={steps}: month/year R@1/5/10/25 mean {mean}, worst {worst}; all questions {overall}")
    finally:
        evaluator.close()


if __name__ == "__main__":
    main()
