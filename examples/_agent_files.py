"""Source files of the simulated ``acme-data`` repository that the agent reads in the example session."""

from __future__ import annotations

FILES: dict[str, str] = {}

FILES["etl/README.md"] = """\
# acme-data ETL

Nightly jobs that turn the shop databases into the analytics warehouse.

| job            | schedule (UTC) | writes                          | owner        |
|----------------|----------------|---------------------------------|--------------|
| daily_revenue  | 05:30          | analytics.fct_orders, fct_daily_revenue | data-platform |
| refunds        | 06:10          | analytics.fct_refunds           | data-platform |
| fx_rates       | 04:45          | analytics.dim_fx_daily          | finance-eng  |

## Conventions
* Every job is incremental. `extract/` reads the source for one *business day*
  (see `common/windows.py`) and `load/merge.py` MERGEs by primary key.
* Money is converted to USD at the daily ECB rate (weekends carry Friday's rate).
* A job run is idempotent: re-running a day replaces that day's rows.

## Running locally
    make venv && source .venv/bin/activate
    python -m etl.jobs.daily_revenue --day 2024-03-11 --store us --target staging
"""

FILES["etl/config/statuses.yaml"] = """\
# Order statuses as the shop emits them, and how analytics treats them.
# Changed in a1f9c3e (2024-03-08): only final statuses are loaded, to stop
# double-counting orders that were cancelled after payment.
statuses:
  pending:      {final: false, revenue: false}
  paid:         {final: true,  revenue: true}
  shipped:      {final: true,  revenue: true}
  delivered:    {final: true,  revenue: true}
  cancelled:    {final: true,  revenue: false}
  refunded:     {final: true,  revenue: false}
  # authorized: added by payments on 2024-03-11 for Klarna (pay later); not listed here yet
loadable: [paid, shipped, delivered, cancelled, refunded]
"""

_DAILY = '''\
"""Nightly job: load one business day of orders and roll them up into daily revenue."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from etl.common.config import load_yaml
from etl.common.fx import usd_rate
from etl.common.windows import business_day_window
from etl.extract.orders import fetch_orders
from etl.load.merge import merge_rows
from etl.warehouse import Warehouse

log = logging.getLogger("etl.daily_revenue")

STATUSES = load_yaml("etl/config/statuses.yaml")
# Only final statuses are loaded; see statuses.yaml for why (a1f9c3e).
LOADABLE_STATUSES = frozenset(STATUSES["loadable"])
REVENUE_STATUSES = frozenset(s for s, v in STATUSES["statuses"].items() if v["revenue"])


@dataclass(frozen=True)
class OrderRow:
    order_id: str
    store_id: str
    created_at: str
    status: str
    payment_method: str
    total: Decimal
    currency: str
    total_usd: Decimal


def transform(raw: list[dict], store: str, day: date) -> list[OrderRow]:
    rows, skipped = [], {}
    for order in raw:
        status = order["status"]
        if status not in LOADABLE_STATUSES:
            skipped[status] = skipped.get(status, 0) + 1
            continue
        rate = usd_rate(order["currency"], day)
        rows.append(
            OrderRow(
                order_id=order["id"],
                store_id=store,
                created_at=order["created_at"],
                status=status,
                payment_method=order.get("payment_method", "card"),
                total=Decimal(order["total"]),
                currency=order["currency"],
                total_usd=(Decimal(order["total"]) * rate).quantize(Decimal("0.01")),
            )
        )
    if skipped:
        detail = ", ".join(f"{k}={v:,}" for k, v in sorted(skipped.items()))
        log.warning("skipped %s orders with status not in LOADABLE_STATUSES (%s)", f"{sum(skipped.values()):,}", detail)
    return rows


def rollup(rows: list[OrderRow]) -> dict[str, Decimal]:
    gross = sum((r.total_usd for r in rows if r.status in REVENUE_STATUSES), Decimal(0))
    return {"orders": Decimal(len(rows)), "gross_usd": gross}


def run(day: date, store: str, target: str) -> None:
    start, end = business_day_window(day, store)
    log.info("extract window=[%s, %s) source=raw.shop_orders", start.isoformat(), end.isoformat())
    raw = fetch_orders(store, start, end)
    log.info("fetched %s rows", f"{len(raw):,}")
    rows = transform(raw, store, day)
    with Warehouse(target) as wh:
        merge_rows(wh, "analytics.fct_orders", rows, key=("order_id",))
        totals = rollup(rows)
        refunds = wh.scalar(
            "select coalesce(sum(amount_usd), 0) from analytics.fct_refunds where store_id = %s and refund_date = %s",
            (store, day),
        )
        merge_rows(
            wh,
            "analytics.fct_daily_revenue",
            [{"date": day, "store": store, **totals, "refunds_usd": refunds,
              "net_revenue_usd": totals["gross_usd"] - refunds}],
            key=("date", "store"),
        )
    log.info("loaded %s orders net_revenue_usd=%s", f"{len(rows):,}", totals["gross_usd"] - refunds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--day", type=date.fromisoformat, required=True)
    parser.add_argument("--store", choices=["us", "eu", "uk"], required=True)
    parser.add_argument("--target", default="prod")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)-5s %(name)s %(message)s")
    run(args.day, args.store, args.target)


if __name__ == "__main__":
    main()
'''
FILES["etl/jobs/daily_revenue.py"] = _DAILY

FILES["etl/extract/orders.py"] = '''\
"""Read orders from the shop replica, one business-day window at a time."""

from __future__ import annotations

from datetime import datetime

from etl.common.db import replica

# Incremental by creation time: a day is read once, by the run of the next night.
# Late changes to an order (status, amount) are picked up only by a manual re-run.
QUERY = """
    select id, created_at, updated_at, status, payment_method, total, currency
    from shop.orders
    where store_id = %(store)s
      and created_at >= %(start)s
      and created_at <  %(end)s
    order by id
"""


def fetch_orders(store: str, start: datetime, end: datetime) -> list[dict]:
    with replica() as conn, conn.cursor() as cur:
        cur.execute(QUERY, {"store": store, "start": start, "end": end})
        columns = [c.name for c in cur.description]
        return [dict(zip(columns, row)) for row in cur.fetchall()]
'''

FILES["etl/common/windows.py"] = '''\
"""Business-day windows: the UTC interval that one store's local day covers."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone

# Offsets of the stores' home time zones.
# TODO(2022): use zoneinfo; fixed offsets are wrong half the year for us and uk.
STORE_OFFSETS = {"us": timedelta(hours=-5), "eu": timedelta(hours=1), "uk": timedelta(hours=0)}


def business_day_window(day: date, store: str) -> tuple[datetime, datetime]:
    tz = timezone(STORE_OFFSETS[store])
    start = datetime.combine(day, time(0), tz).astimezone(timezone.utc)
    return start, start + timedelta(days=1)
'''

FILES["etl/load/merge.py"] = '''\
"""MERGE rows into a warehouse table by key, in batches."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, is_dataclass
from typing import Any

BATCH = 2000


def _as_dict(row: Any) -> dict[str, Any]:
    return asdict(row) if is_dataclass(row) else dict(row)


def merge_rows(wh, table: str, rows: Iterable[Any], key: Sequence[str]) -> int:
    rows = [_as_dict(r) for r in rows]
    if not rows:
        return 0
    columns = list(rows[0])
    staging = wh.temp_table_like(table)
    total = 0
    for i in range(0, len(rows), BATCH):
        batch = rows[i : i + BATCH]
        wh.insert_many(staging, columns, [tuple(r[c] for c in columns) for r in batch])
        on = " and ".join(f"t.{k} = s.{k}" for k in key)
        updates = ", ".join(f"{c} = s.{c}" for c in columns if c not in key)
        wh.execute(
            f"merge into {table} t using {staging} s on {on} "
            f"when matched then update set {updates} "
            f"when not matched then insert ({', '.join(columns)}) values ({', '.join('s.' + c for c in columns)})"
        )
        wh.truncate(staging)
        total += len(batch)
    return total
'''

FILES["tests/test_daily_revenue.py"] = """\
from datetime import date
from decimal import Decimal

import pytest

from etl.jobs import daily_revenue as job


def order(status="paid", total="100.00", currency="USD", **kw):
    return {"id": kw.get("id", "US-1"), "created_at": "2024-03-11T12:00:00Z", "status": status,
            "payment_method": kw.get("payment_method", "card"), "total": total, "currency": currency}


def test_transform_converts_to_usd(monkeypatch):
    monkeypatch.setattr(job, "usd_rate", lambda cur, day: Decimal("1.10") if cur == "EUR" else Decimal(1))
    rows = job.transform([order(currency="EUR")], "eu", date(2024, 3, 11))
    assert rows[0].total_usd == Decimal("110.00")


def test_transform_skips_pending():
    assert job.transform([order(status="pending")], "us", date(2024, 3, 11)) == []


@pytest.mark.parametrize("status", ["paid", "shipped", "delivered"])
def test_revenue_statuses_count(status):
    rows = job.transform([order(status=status)], "us", date(2024, 3, 11))
    assert job.rollup(rows)["gross_usd"] == Decimal("100.00")


def test_cancelled_orders_are_loaded_but_not_revenue():
    rows = job.transform([order(status="cancelled")], "us", date(2024, 3, 11))
    assert len(rows) == 1 and job.rollup(rows)["gross_usd"] == 0
"""

FILES["dags/nightly_etl.py"] = """\
from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.bash import BashOperator

default_args = {"owner": "data-platform", "retries": 2, "retry_delay": timedelta(minutes=10)}

with DAG("nightly_etl", start_date=datetime(2023, 1, 1), schedule="30 5 * * *", catchup=False,
         default_args=default_args, max_active_runs=1, tags=["etl", "revenue"]) as dag:
    for store in ("us", "eu", "uk"):
        BashOperator(
            task_id=f"daily_revenue_{store}",
            bash_command=f"python -m etl.jobs.daily_revenue --day {{{{ macros.ds_add(ds, -1) }}}} --store {store}",
        )
"""

FILES["looker/views/daily_revenue.view.lkml"] = """\
view: daily_revenue {
  sql_table_name: analytics.fct_daily_revenue ;;
  dimension_group: date { type: time timeframes: [date, week, month] sql: ${TABLE}.date ;; }
  dimension: store { type: string sql: ${TABLE}.store ;; }
  measure: orders { type: sum sql: ${TABLE}.orders ;; }
  measure: gross_revenue { type: sum value_format_name: usd sql: ${TABLE}.gross_usd ;; }
  measure: refunds { type: sum value_format_name: usd sql: ${TABLE}.refunds_usd ;; }
  measure: net_revenue {
    type: sum
    value_format_name: usd
    sql: ${TABLE}.net_revenue_usd ;;
    description: "Revenue of orders created that day (store local day), net of refunds issued that day."
  }
}
"""

FILES["dq/checks.yaml"] = """\
# Data-quality checks run after the nightly ETL (etl/dq/run.py). A failed check pages #data-oncall.
checks:
  - name: fct_orders_not_empty
    sql: select count(*) from analytics.fct_orders where created_at::date = {{ ds }}
    expect: "> 0"
  - name: daily_revenue_within_3_sigma
    sql: >
      select abs(net_revenue_usd - avg_28d) / nullif(stddev_28d, 0)
      from analytics.v_daily_revenue_stats where date = {{ ds }} and store = 'all'
    expect: "< 3"
  - name: fx_rate_present
    sql: select count(*) from analytics.dim_fx_daily where date = {{ ds }}
    expect: "= 4"
"""

FILES["etl/jobs/refunds.py"] = '''\
"""Nightly job: refunds issued on a day, converted to USD at that day's rate."""

from __future__ import annotations

from datetime import date

from etl.common.db import replica
from etl.common.fx import usd_rate
from etl.load.merge import merge_rows
from etl.warehouse import Warehouse

QUERY = """
    select r.id, r.order_id, o.store_id, r.amount, o.currency, r.created_at::date as refund_date, r.reason
    from shop.refunds r join shop.orders o on o.id = r.order_id
    where r.created_at::date = %(day)s
"""


def run(day: date, target: str = "prod") -> None:
    with replica() as conn, conn.cursor() as cur:
        cur.execute(QUERY, {"day": day})
        rows = [dict(zip([c.name for c in cur.description], r)) for r in cur.fetchall()]
    for row in rows:
        row["amount_usd"] = row["amount"] * usd_rate(row["currency"], day)
    with Warehouse(target) as wh:
        merge_rows(wh, "analytics.fct_refunds", rows, key=("id",))
'''


def numbered(path: str) -> str:
    """``read_file`` output: the file with line numbers, as an agent tool prints it."""
    lines = FILES[path].splitlines()
    width = len(str(len(lines)))
    body = "\n".join(f"{i:>{width}} | {line}" for i, line in enumerate(lines, start=1))
    return f"{path} ({len(lines)} lines)\n{body}"
