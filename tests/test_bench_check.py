"""The speed gate's decision (``scripts/dev.py bench-check``): more than 10% more instructions per turn fails.

The measurement itself (callgrind over bench/gate.py, minutes) stays out of the unit tests, as the gate
must; these check what it decides from a count: the tolerance, the stored baseline, and that a failing
check exits non-zero.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]


def dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("convmem_dev_script", ROOT / "scripts" / "dev.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DEV = dev()


@given(reference=st.integers(10_000, 10_000_000), ratio=st.floats(0.5, 2.0))
def test_more_than_ten_percent_per_turn_fails(reference: int, ratio: float) -> None:
    passed, line = DEV.verdict(reference * ratio, float(reference))
    assert passed == (reference * ratio / reference <= 1.10)
    assert line.startswith("ok" if passed else "FAIL")


def test_the_stored_baseline_is_well_formed() -> None:
    record = json.loads((ROOT / "bench" / "baseline.json").read_text())
    assert record["instructions_per_turn"] > 0
    assert {"python", "machine", "tiktoken", "turns"} <= record.keys()


def test_a_regression_against_the_baseline_exits_non_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = tmp_path / "baseline.json"
    here = DEV.environment(sys.executable)
    baseline.write_text(json.dumps({"instructions_per_turn": 100_000, "turns": 10, **here}))
    monkeypatch.setattr(DEV, "BASELINE", baseline)
    monkeypatch.setattr(DEV, "ROOT", tmp_path)
    counted = iter([111_000.0, 109_000.0])
    monkeypatch.setattr(DEV, "instructions_per_turn", lambda python, src, turns: next(counted))
    with pytest.raises(SystemExit) as failed:
        DEV.bench_check(["--python", sys.executable])
    assert failed.value.code == 1
    assert "FAIL" in capsys.readouterr().out
    DEV.bench_check(["--python", sys.executable])  # 9% more: passes
    out = capsys.readouterr().out
    assert out.startswith("ok: 109,000")
    assert "note:" not in out  # the same interpreter and libraries: no caveat
