"""The conversation of the example session: the user's questions, the agent's tool calls and answers.

Each phase is one user question and everything the agent does until it answers.
Numbers in the answers are computed from :mod:`_agent_world`, like the tool outputs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

from _agent_files import FILES, numbered
from _agent_world import (
    LAUNCH,
    csv,
    daily_revenue_csv,
    days,
    etl_logs,
    fx_json,
    hourly_csv,
    mean_net,
    orders_sample_csv,
    png_data_url,
    rng,
    settlements_json,
    status_by_day_csv,
    totals,
    world,
)

Step = dict[str, Any]
ROWS = world()
BEFORE = (date(2024, 2, 26), date(2024, 3, 10))
AFTER = (LAUNCH, date(2024, 3, 20))
MISSING = totals(ROWS)
US_BEFORE, US_AFTER = mean_net(ROWS, *BEFORE, "us"), mean_net(ROWS, *AFTER, "us")
ALL_BEFORE, ALL_AFTER = mean_net(ROWS, *BEFORE), mean_net(ROWS, *AFTER)
SCREENSHOT = "https://files.acme-outdoor.example/screenshots/{}.png"

SYSTEM = """You are Atlas, the data agent of Acme Outdoor's data-platform team.
You have read-only access to the shop replica (raw.*) and read-write access to the analytics warehouse staging \
schema. Production writes go through pull requests only.

Tools: list_files, read_file, git_log, git_show, write_file, run_tests (the acme-data repository); run_sql \
(warehouse: prod or staging); search_logs (Loki); http_get (internal APIs); run_python (a sandbox with pandas).

Rules:
- Investigate before you conclude: quote the query or log line that supports each claim.
- Run independent tool calls in parallel.
- Money is USD unless stated; say which business-day definition a number uses.
- Never post to Slack or open PRs yourself; draft the text for the user."""


def user(text: str, images: tuple[tuple[str, str], ...] = ()) -> Step:
    return {"kind": "user", "text": text, "images": images}


def say(text: str) -> Step:
    return {"kind": "assistant", "text": text}


def tools(text: str | None, *calls: tuple[str, dict[str, Any], str], reverse: bool = False) -> Step:
    return {"kind": "tools", "text": text, "calls": calls, "reverse": reverse}


def usd(x: float) -> str:
    return f"${x:,.0f}"


def pct(a: float, b: float) -> str:
    return f"{(b - a) / a * 100:+.1f}%"


def sql(query: str, output: str, warehouse: str = "prod") -> tuple[str, dict[str, Any], str]:
    return ("run_sql", {"warehouse": warehouse, "query": query}, output)


def read(path: str) -> tuple[str, dict[str, Any], str]:
    return ("read_file", {"path": path}, numbered(path))


def search_code(pattern: str) -> tuple[str, dict[str, Any], str]:
    """``search_code`` output: real matches in the simulated repository."""
    hits = [
        f"{path}:{n}: {line.strip()}"
        for path, text in sorted(FILES.items())
        for n, line in enumerate(text.splitlines(), start=1)
        if pattern.lower() in line.lower()
    ]
    return ("search_code", {"pattern": pattern}, "\n".join(hits) + f"\n({len(hits)} matches)")


def describe(table: str, columns: str) -> tuple[str, dict[str, Any], str]:
    rows = [c.split(":") for c in columns.split()]
    body = "\n".join(f"  {name:<24} {kind.replace('_', ' ')}" for name, kind in rows)
    return sql(f"describe {table}", f"{table} ({len(rows)} columns)\n{body}")


def etl_runs_csv() -> str:
    r = rng("etl-runs")
    body: list[list[object]] = []
    for day in days()[-14:]:
        for store in ("us", "eu", "uk"):
            row = next(x for x in ROWS if x.store == store and x.day == day - timedelta(days=1))
            body.append([day, store, "scheduled", row.orders, row.loaded_orders, round(r.uniform(25, 140), 1)])
    return csv(["run_date", "store", "trigger", "fetched", "loaded", "seconds"], body, note="analytics.etl_runs")


def payment_mix_csv() -> str:
    body: list[list[object]] = []
    for row in ROWS:
        if row.store != "us":
            continue
        r = rng("mix", row.day)
        paypal = round((row.orders - row.klarna) * r.uniform(0.17, 0.2))
        body += [[row.day, "card", row.orders - row.klarna - paypal], [row.day, "paypal", paypal]]
        if row.klarna:
            body.append([row.day, "klarna", row.klarna])
    return csv(["created_date", "payment_method", "orders"], body, note="shop.orders, store_id = 'us'")


def weekday_csv(store: str) -> str:
    names = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    picked = [r for r in ROWS if r.store == store and r.day < LAUNCH]
    body: list[list[object]] = []
    for i, name in enumerate(names):
        day_rows = [r for r in picked if r.day.weekday() == i]
        body.append(
            [
                name,
                len(day_rows),
                round(sum(r.orders for r in day_rows) / len(day_rows)),
                sum(r.reported_net for r in day_rows) / len(day_rows),
            ]
        )
    return csv(["weekday", "days", "avg_orders", "avg_net_usd"], body, note=f"store = '{store}', before 2024-03-11")


def git_log(path: str, since: str = "2024-02-15") -> str:
    r = rng("git", path)
    entries = [
        ("a1f9c3e", "2024-03-08", "Dana Whitfield", "perf: load only final order statuses (LOADABLE_STATUSES)"),
        ("77be0d2", "2024-03-01", "Marco Ruiz", "chore: bump psycopg to 3.1.18"),
        ("5c03aa1", "2024-02-27", "Dana Whitfield", "fix: quantize total_usd to cents before merge"),
        ("e4d1f70", "2024-02-20", "Priya Natarajan", "feat: payment_method column in fct_orders"),
    ]
    out = [
        f"commit {h}{r.getrandbits(132):033x}\nAuthor: {a} <{a.split()[0].lower()}@acme-outdoor.example>\n"
        f"Date:   {d}\n\n    {m}\n"
        for h, d, a, m in entries
    ]
    return (
        f"git log --since={since} -- {path}\n\n"
        + "\n".join(out)
        + "\nDeployed to prod: a1f9c3e on 2024-03-11 02:14 UTC"
    )


def airflow_runs() -> str:
    runs = []
    r = rng("airflow")
    for day in days()[-6:]:
        tasks = []
        for store in ("us", "eu", "uk"):
            start = f"{day}T05:{30 + r.randint(0, 6):02d}:{r.randint(0, 59):02d}Z"
            tasks.append(
                {
                    "task_id": f"daily_revenue_{store}",
                    "state": "success",
                    "try_number": 1,
                    "start_date": start,
                    "duration": round(r.uniform(25, 140), 1),
                    "hostname": "etl-worker-2",
                }
            )
        runs.append(
            {
                "dag_run_id": f"scheduled__{day}T05:30:00+00:00",
                "state": "success",
                "logical_date": f"{day}T05:30:00Z",
                "external_trigger": False,
                "task_instances": tasks,
            }
        )
    return json.dumps({"dag_id": "nightly_etl", "total_entries": 412, "dag_runs": runs}, indent=2)


def missing_table() -> str:
    body: list[list[object]] = []
    for row in ROWS:
        if row.store == "us" and row.day >= LAUNCH:
            body.append([row.day, row.klarna, row.missing, row.gross - row.refunds, row.reported_net])
    return csv(["date", "authorized_orders", "missing_usd", "true_net_usd", "reported_net_usd"], body)


def pytest_output(failing: bool) -> str:
    names = [
        "test_transform_converts_to_usd",
        "test_transform_skips_pending",
        "test_revenue_statuses_count[paid]",
        "test_revenue_statuses_count[shipped]",
        "test_revenue_statuses_count[delivered]",
        "test_cancelled_orders_are_loaded_but_not_revenue",
        "test_authorized_orders_are_loaded",
        "test_authorized_orders_are_not_revenue_until_captured",
        "test_extract_uses_updated_at_with_lookback",
        "test_merge_updates_status_of_existing_order",
        "test_business_day_window_follows_dst[us]",
        "test_business_day_window_follows_dst[uk]",
        "test_business_day_window_follows_dst[eu]",
    ]
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.8, pytest-8.1.1, pluggy-1.4.0",
        "rootdir: /workspace/acme-data",
        "configfile: pyproject.toml",
        "plugins: freezegun-0.4.2, cov-4.1.0",
        f"collected {len(names)} items",
        "",
    ]
    bad = {"test_extract_uses_updated_at_with_lookback"} if failing else set()
    lines += [f"tests/test_daily_revenue.py::{n} {'FAILED' if n in bad else 'PASSED'}" for n in names]
    if failing:
        lines += [
            "",
            "=================================== FAILURES ===================================",
            "__________________ test_extract_uses_updated_at_with_lookback __________________",
            "",
            "    def test_extract_uses_updated_at_with_lookback(fake_replica):",
            "        fetch_orders('us', datetime(2024, 3, 11, 4, tzinfo=UTC), datetime(2024, 3, 12, 4, tzinfo=UTC))",
            "        sql, params = fake_replica.last_query",
            ">       assert params['since'] == datetime(2024, 3, 8, 4, tzinfo=UTC)",
            "E       KeyError: 'since'",
            "",
            "tests/test_daily_revenue.py:71: KeyError",
            "----------------------------- Captured log call ------------------------------",
            "INFO     etl.extract.orders:orders.py:24 fetch store=us start=2024-03-11T04:00:00+00:00",
            "=========================== short test summary info ============================",
            "FAILED tests/test_daily_revenue.py::test_extract_uses_updated_at_with_lookback - KeyError: 'since'",
            f"========================= 1 failed, {len(names) - 1} passed in 2.31s =========================",
        ]
    else:
        lines += ["", f"============================== {len(names)} passed in 2.18s =============================="]
    return "\n".join(lines)


PATCH = """--- a/etl/config/statuses.yaml
+++ b/etl/config/statuses.yaml
@@
-  # authorized: added by payments on 2024-03-11 for Klarna (pay later); not listed here yet
-loadable: [paid, shipped, delivered, cancelled, refunded]
+  authorized:   {final: false, revenue: false}   # Klarna pay-later, until captured at shipment
+loadable: [authorized, paid, shipped, delivered, cancelled, refunded]
--- a/etl/extract/orders.py
+++ b/etl/extract/orders.py
@@
-# Incremental by creation time: a day is read once, by the run of the next night.
-# Late changes to an order (status, amount) are picked up only by a manual re-run.
+# Incremental by change time with a lookback: orders created in the window, plus
+# any order updated since `since` (default: 3 days before the window), so late
+# status changes (authorized -> shipped) reach the warehouse.
+LOOKBACK = timedelta(days=3)
 QUERY = \"\"\"
     select id, created_at, updated_at, status, payment_method, total, currency
     from shop.orders
     where store_id = %(store)s
-      and created_at >= %(start)s
-      and created_at <  %(end)s
+      and ((created_at >= %(start)s and created_at < %(end)s)
+           or (updated_at >= %(since)s and updated_at < %(end)s))
     order by id
 \"\"\"
--- a/etl/common/windows.py
+++ b/etl/common/windows.py
@@
-STORE_OFFSETS = {"us": timedelta(hours=-5), "eu": timedelta(hours=1), "uk": timedelta(hours=0)}
+STORE_ZONES = {"us": ZoneInfo("America/New_York"), "eu": ZoneInfo("Europe/Berlin"), "uk": ZoneInfo("Europe/London")}
"""


def _p01() -> list[Step]:
    shot = SCREENSHOT.format("looker-daily-revenue-2024-03-21")
    return [
        user(
            "Morning! The daily revenue dashboard has dropped since about March 11 and marketing swears nothing "
            "changed on their side. Can you figure out what's going on? Screenshot of the Looker tile attached.",
            ((shot, "high"),),
        ),
        tools(
            "First, where does the dashboard's number come from?",
            search_code("fct_daily_revenue"),
            describe(
                "analytics.fct_daily_revenue",
                "date:date store:text orders:bigint gross_usd:numeric(14,2) "
                "refunds_usd:numeric(14,2) net_revenue_usd:numeric(14,2) loaded_at:timestamptz",
            ),
        ),
        tools(
            "Let me look at the repository layout and the daily revenue numbers side by side.",
            (
                "list_files",
                {"path": "."},
                "\n".join(sorted(FILES)) + "\nMakefile\npyproject.toml\netl/common/fx.py\n"
                "etl/common/db.py\netl/common/config.py\netl/warehouse.py\netl/dq/run.py",
            ),
            read("etl/README.md"),
            sql(
                "select date, sum(orders) orders, sum(gross_usd) gross_usd, sum(net_revenue_usd) net_revenue_usd\n"
                "from analytics.fct_daily_revenue where date >= '2024-02-19' group by 1 order by 1",
                daily_revenue_csv(ROWS, by_store=False),
            ),
        ),
        say(
            f"The drop is real in the warehouse, not just in Looker. Average daily net revenue was {usd(ALL_BEFORE)} "
            f"for Feb 26 - Mar 10 and {usd(ALL_AFTER)} for Mar 11 - Mar 20 ({pct(ALL_BEFORE, ALL_AFTER)}). It starts "
            "exactly on March 11 and is a level shift, not a trend, which points at a change in the data or the "
            "pipeline rather than demand. Order counts drop by about the same share as revenue, so fewer orders are "
            "being counted (rather than smaller orders). Next I'll split by store and look at the ETL runs."
        ),
    ]


def _p02() -> list[Step]:
    return [
        user("Is it all stores or just one?"),
        tools(
            None,
            sql(
                "select date, store, orders, gross_usd, refunds_usd, net_revenue_usd\nfrom analytics.fct_daily_revenue"
                " where date >= '2024-02-19' order by date, store",
                daily_revenue_csv(ROWS, by_store=True),
            ),
            sql(
                "select store_id, count(*) from raw.shop_orders where created_at >= '2024-03-11' group by 1",
                'ERROR:  relation "raw.shop_orders" does not exist\nLINE 1: select store_id, count(*) from '
                'raw.shop_orders where created_at >= ...\nHINT:  the replica is exposed as schema "shop" on '
                "warehouse prod via the foreign server; try shop.orders",
            ),
            reverse=True,
        ),
        tools(
            "The replica schema is `shop`; checking its columns before retrying.",
            describe(
                "shop.orders",
                "id:text store_id:text customer_id:text created_at:timestamptz "
                "updated_at:timestamptz status:text payment_method:text total:numeric(12,2) currency:char(3) "
                "channel:text",
            ),
        ),
        tools(
            None,
            sql(
                "select store_id, count(*) orders from shop.orders where created_at >= '2024-03-11 05:00' "
                "and created_at < '2024-03-21 04:00' group by 1 order by 1",
                csv(
                    ["store_id", "orders"],
                    [[s, sum(r.orders for r in ROWS if r.store == s and r.day >= LAUNCH)] for s in ("eu", "uk", "us")],
                ),
            ),
        ),
        say(
            f"Only the US store. EU and UK are flat; US average daily net revenue went from {usd(US_BEFORE)} to "
            f"{usd(US_AFTER)} ({pct(US_BEFORE, US_AFTER)}), which accounts for the whole company-level drop. "
            "And the replica has *more* US orders than the warehouse for the same days, so orders are being created "
            "in the shop but not making it into analytics.fct_orders."
        ),
    ]


def _p03() -> list[Step]:
    logs = etl_logs(ROWS, n_days=8)
    return [
        user("Interesting. Can you check the ETL logs for the nightly job around then?"),
        tools(
            None,
            (
                "search_logs",
                {
                    "service": "etl-nightly",
                    "query": "etl.daily_revenue",
                    "start": "2024-03-13T00:00Z",
                    "end": "2024-03-21T00:00Z",
                    "limit": 500,
                },
                logs,
            ),
            (
                "search_logs",
                {
                    "service": "etl-nightly",
                    "query": "level=error OR level=warn",
                    "start": "2024-03-01T00:00Z",
                    "end": "2024-03-13T00:00Z",
                    "limit": 100,
                },
                "\n".join(
                    line for line in etl_logs(ROWS, n_days=12).splitlines() if " WARN " in line and line < "2024-03-13"
                )
                + "\n(no ERROR lines in range)",
            ),
        ),
        tools(
            "Checking the run table too, to see fetched vs loaded counts for every run.",
            sql(
                "select run_date, store, trigger, fetched, loaded, seconds from analytics.etl_runs where run_date "
                ">= '2024-03-07' order by 1, 2",
                etl_runs_csv(),
            ),
            (
                "search_logs",
                {
                    "service": "*",
                    "query": "LOADABLE_STATUSES",
                    "start": "2024-03-01T00:00Z",
                    "end": "2024-03-21T00:00Z",
                    "limit": 5,
                },
                "\n".join([line for line in etl_logs(ROWS, n_days=10).splitlines() if "LOADABLE" in line][:5])
                + "\n(5 of 9 matches shown)",
            ),
        ),
        say(
            f"Found it in the logs. Every US run since March 11 logs a warning like `skipped {ROWS[-6].klarna:,} "
            "orders "
            "with status not in LOADABLE_STATUSES (authorized=...)`. There are no errors: the job finishes 'ok' "
            "and simply leaves those orders out. No EU or UK run has the warning, and there is no such warning before "
            "March 11. So two questions: where does `authorized` come from, and what is LOADABLE_STATUSES?"
        ),
    ]


def _p04() -> list[Step]:
    return [
        user("What's LOADABLE_STATUSES? Who changed it and when?"),
        tools(
            "Reading the job, its status config and the history of both.",
            read("etl/jobs/daily_revenue.py"),
            read("etl/config/statuses.yaml"),
            ("git_log", {"path": "etl/jobs/daily_revenue.py"}, git_log("etl/jobs/daily_revenue.py")),
            ("git_log", {"path": "etl/config/statuses.yaml"}, git_log("etl/config/statuses.yaml")),
        ),
        tools(None, search_code("LOADABLE_STATUSES"), search_code("authorized"), search_code("final")),
        tools(
            None,
            (
                "git_show",
                {"commit": "a1f9c3e", "stat": False},
                "commit a1f9c3e\nAuthor: Dana Whitfield\nDate: 2024-03-08\n\n    perf: load only final order "
                "statuses (LOADABLE_STATUSES)\n\n    Cancelled-after-payment orders were double counted when the "
                "cancellation arrived\n    before the nightly run. Load final statuses only.\n\n"
                + FILES["etl/config/statuses.yaml"],
            ),
        ),
        say(
            "`LOADABLE_STATUSES` comes from `etl/config/statuses.yaml` (`loadable:` list) and was introduced by "
            "Dana in a1f9c3e on March 8, deployed on March 11 at 02:14 UTC, i.e. just before the first affected "
            "nightly run. It filters orders to *final* statuses. The yaml even has a comment that `authorized` was "
            "added by payments on 2024-03-11 for Klarna and is not listed yet. So the filter was reasonable when it "
            "was written, but a new status appeared the same day and falls through it."
        ),
    ]


def _p05() -> list[Step]:
    shot = png_data_url("klarna-dashboard")
    return [
        user(
            "Wait, the payments team just sent me this from their Klarna dashboard. Does it line up?", ((shot, "low"),)
        ),
        tools(
            "The image is small; I'll check the settlement API and the status mix for the same days.",
            (
                "http_get",
                {
                    "url": "https://payments.internal.acme-outdoor.example/v1/klarna/settlements?"
                    "store=us&from=2024-03-11&to=2024-03-20&limit=40"
                },
                settlements_json(ROWS, 40),
            ),
            sql(
                "select created_at::date created_date, status, count(*) orders from shop.orders\n"
                "where store_id = 'us' and created_at >= '2024-02-19' group by 1, 2 order by 1, 2",
                status_by_day_csv(ROWS),
            ),
            reverse=True,
        ),
        tools(
            None,
            sql(
                "select created_at::date, payment_method, count(*) from shop.orders where store_id = 'us' "
                "and created_at >= '2024-02-19' group by 1, 2 order by 1, 2",
                payment_mix_csv(),
            ),
        ),
        say(
            f"Yes. Klarna went live for the US store on March 11, and from that day {MISSING['klarna_orders']:,} US "
            "orders were created with status `authorized` (Klarna authorizes at checkout and captures at shipment). "
            "The settlement API's daily authorized counts match the `authorized` rows in shop.orders exactly, and "
            "they match the counts in the ETL warnings. The screenshot is too small to read values, but its shape "
            "(a new series starting mid-chart) is consistent with that."
        ),
    ]


def _p06() -> list[Step]:
    return [
        user("OK but those orders get shipped eventually, right? Why aren't they picked up then?"),
        tools(
            None,
            read("etl/extract/orders.py"),
            search_code("created_at"),
            ("git_log", {"path": "etl/extract/orders.py"}, git_log("etl/extract/orders.py", "2023-06-01")),
        ),
        tools(
            None,
            read("etl/load/merge.py"),
            sql(
                "select o.id order_id, o.created_at, o.updated_at, o.status, o.payment_method, o.total total_usd,\n"
                "  (f.order_id is not null) in_fact_table, md5(o.customer_id)::text customer_hash\n"
                "from shop.orders o left join analytics.fct_orders f on f.order_id = o.id\n"
                "where o.store_id = 'us' and o.created_at >= '2024-03-11 04:00' order by random() limit 120",
                orders_sample_csv(120),
            ),
        ),
        say(
            "They are never picked up. The extract is incremental by `created_at` with no lookback: each night "
            "reads exactly the orders created in the previous business day. A Klarna order is `authorized` on that "
            "night, gets skipped, and when it ships two days later (status -> `shipped`, `updated_at` changes) no run "
            "ever looks at it again. In the sample, every Klarna order has `in_fact_table = false`, including the "
            "shipped ones, while every card and PayPal order is present. The MERGE in load/merge.py would handle an "
            "update fine; the problem is purely that the extract never re-reads changed orders."
        ),
    ]


def _p07() -> list[Step]:
    script = (
        "import pandas as pd\ndf = pd.read_csv('/tmp/missing.csv')\nprint(df.describe())\n"
        "print('total missing', df.missing_usd.sum())\nprint('share', df.missing_usd.sum() / df.true_net_usd.sum())"
    )
    share = MISSING["missing"] / MISSING["true_net"]
    return [
        user("How much revenue are we missing in total so far?"),
        tools(
            None,
            sql(
                "-- authorized orders never loaded, by day (US)\nselect ... from shop.orders o left join "
                "analytics.fct_orders f using (id) where f.id is null and o.payment_method = 'klarna'",
                missing_table(),
            ),
        ),
        tools(
            None,
            (
                "run_python",
                {"code": script},
                f"       authorized_orders   missing_usd\ncount           10.00         10.00\nmean"
                f"         {MISSING['klarna_orders'] / 10:>7.1f}    {MISSING['missing'] / 10:>10.2f}\n"
                f"total missing {MISSING['missing']:.2f}\nshare {share:.4f}",
            ),
        ),
        say(
            f"Across March 11-20 the warehouse is missing {MISSING['klarna_orders']:,} US orders worth "
            f"{usd(MISSING['missing'])} of gross revenue, {share:.1%} of the company's true net revenue for those days "
            "(using the ETL's current business-day definition, a fixed UTC-5 day). Nothing is lost at the source: "
            "every order is in shop.orders, so a backfill can restore it."
        ),
    ]


def _p08() -> list[Step]:
    return [
        user("Finance says revenue must be recognized at capture, not authorization. What does the dashboard use?"),
        tools(None, search_code("net_revenue"), search_code("revenue_statuses")),
        tools(None, read("looker/views/daily_revenue.view.lkml"), read("etl/jobs/refunds.py"), reverse=True),
        say(
            "The dashboard sums `net_revenue_usd` of fct_daily_revenue, described as 'revenue of orders created that "
            "day (store local day), net of refunds issued that day'. So today it is a bookings metric by order "
            "creation date, not recognized revenue. For finance's definition we'd need a `captured_at` in the shop "
            "data and a separate measure. I'd suggest keeping the dashboard as bookings (and saying so in the tile "
            "description), loading `authorized` orders so they count as bookings, and adding a `recognized_revenue` "
            "measure based on capture date later."
        ),
    ]


def _p09() -> list[Step]:
    return [
        user("Makes sense. What are the options for the fix?"),
        say(
            "Three options, from smallest to most robust:\n\n"
            "A. Add `authorized` to `loadable` in statuses.yaml. Fixes new days, but orders that were authorized "
            "when read are still never updated when they ship, so their status in fct_orders stays stale.\n\n"
            "B. A + extract by change time: read orders created in the window *or* updated since a lookback (3 days "
            "covers Klarna's capture delay), and MERGE by order_id (already the key). Status changes flow through; "
            "cost is re-reading roughly 3 days of updated rows per night (about 15k rows, seconds).\n\n"
            "C. B + a change-data-capture feed from the replica. Most correct, but a new dependency and weeks of "
            "work.\n\nI recommend B, plus a one-off backfill of March 11-20 and a data-quality check that fails when "
            "the ETL skips more than 1% of orders."
        ),
    ]


def _p10() -> list[Step]:
    return [
        user("Go with B. Show me the diff, and also switch windows.py to real time zones while you're there."),
        tools(None, search_code("business_day_window"), search_code("fetch_orders"), search_code("STORE_OFFSETS")),
        tools(None, read("etl/common/windows.py"), read("tests/test_daily_revenue.py")),
        tools(
            "Writing the patch and new tests.",
            (
                "write_file",
                {"path": "patches/fix-authorized-orders.diff", "content": PATCH},
                f"wrote patches/fix-authorized-orders.diff ({len(PATCH):,} bytes)",
            ),
            (
                "write_file",
                {"path": "tests/test_extract_orders.py", "content": "(112 lines)"},
                "wrote tests/test_extract_orders.py (3,940 bytes)",
            ),
        ),
        say(
            "Here is the change (patches/fix-authorized-orders.diff):\n\n```diff\n" + PATCH + "```\n\n"
            "Plus tests for: authorized orders are loaded but not counted as revenue until captured; the extract "
            "passes `since` = window start - 3 days; a MERGE updates the status of an existing order; the business-day "
            "window follows DST for us/uk/eu."
        ),
    ]


def _p11() -> list[Step]:
    return [
        user("Run the tests."),
        tools(None, ("run_tests", {"target": "tests/test_daily_revenue.py", "args": ["-v"]}, pytest_output(True))),
        tools(
            "`fetch_orders` never passes `since`; adding the parameter with its default.",
            (
                "write_file",
                {"path": "etl/extract/orders.py", "content": "(31 lines)"},
                "wrote etl/extract/orders.py (1,288 bytes)",
            ),
            ("run_tests", {"target": "tests/test_daily_revenue.py", "args": ["-v"]}, pytest_output(False)),
        ),
        say(
            "All 13 tests pass now. The first run caught that I'd updated the query but not the call site: "
            "`fetch_orders` now takes `since` (default: `start - LOOKBACK`) and passes it to the query."
        ),
    ]


def _p12() -> list[Step]:
    shift = [r for r in ROWS if r.store == "us" and r.day >= date(2024, 3, 10)]
    moved = round(sum(r.orders for r in shift) / len(shift) * 0.011)
    return [
        user("Also, I noticed a small blip on March 10 itself. DST related?"),
        tools("Re-reading the window helper first.", read("etl/common/windows.py")),
        tools(
            None,
            sql(
                "select date_trunc('hour', created_at) hour_utc, ... from shop.orders where store_id = 'us' and "
                "created_at >= '2024-03-09' and created_at < '2024-03-12' group by 1 order by 1",
                hourly_csv(),
            ),
            (
                "run_python",
                {
                    "code": "from etl.common.windows import business_day_window\nfrom datetime import date\n"
                    "for d in (date(2024,3,9), date(2024,3,10), date(2024,3,11)):\n"
                    "    print(d, *business_day_window(d, 'us'))"
                },
                "2024-03-09 2024-03-09 05:00:00+00:00 2024-03-10 05:00:00+00:00\n"
                "2024-03-10 2024-03-10 05:00:00+00:00 2024-03-11 05:00:00+00:00\n"
                "2024-03-11 2024-03-11 05:00:00+00:00 2024-03-12 05:00:00+00:00",
            ),
        ),
        say(
            "Yes, a separate and much smaller issue. windows.py uses a fixed UTC-5 offset for the US store, so since "
            "DST began on March 10 the ETL's 'day' runs from 01:00 to 01:00 New York time: orders placed between "
            f"midnight and 1 am are attributed to the previous day (about {moved} orders a day). Nothing is lost, it's "
            "misattribution at the day boundary, and the real-time-zone change in the patch fixes it. The March 10 "
            "blip itself is the 23-hour local day (the clocks skipped an hour), which is real."
        ),
    ]


def _p13() -> list[Step]:
    shot = SCREENSHOT.format("eu-store-weekly")
    return [
        user(
            "Unrelated but while we're here: the EU chart looks odd on weekends too. Screenshot.",
            ((shot, "high"), (png_data_url("eu-weekends"), "low")),
        ),
        tools(None, search_code("usd_rate"), search_code("fx")),
        tools(
            "Comparing weekday patterns across all three stores at once.",
            *(
                sql(
                    f"select extract(isodow from date) weekday, count(*) days, avg(orders), avg(net_revenue_usd) from "
                    f"analytics.fct_daily_revenue where store = '{s}' and date < '2024-03-11' group by 1 order by 1",
                    weekday_csv(s),
                )
                for s in ("eu", "uk", "us")
            ),
            reverse=True,
        ),
        tools(
            None,
            (
                "http_get",
                {
                    "url": "https://fx.internal.acme-outdoor.example/v2/timeseries?base=USD"
                    "&symbols=EUR,GBP,CAD,SEK&from=2024-02-19&to=2024-03-20"
                },
                fx_json(),
            ),
            sql(
                "select date, store, net_revenue_usd from analytics.fct_daily_revenue where store = 'eu' and "
                "date >= '2024-02-19' order by 1",
                daily_revenue_csv([r for r in ROWS if r.store == "eu"], by_store=True),
            ),
        ),
        say(
            "That's expected behaviour, not a bug: EU weekends show ~15% more orders (the same weekend uplift as "
            "every store), and weekend FX is carried from Friday's ECB fix (`source: carried` in the FX series), so "
            "weekend USD values move in steps. Nothing in EU changed around March 11."
        ),
    ]


def _p14() -> list[Step]:
    return [
        user("Good. What's the backfill plan for the US store?"),
        tools(
            None,
            read("dags/nightly_etl.py"),
            sql(
                "select count(*) from shop.orders where store_id = 'us' and created_at >= '2024-03-11 05:00' and "
                "created_at < '2024-03-21 04:00'",
                csv(["count"], [[sum(r.orders for r in ROWS if r.store == "us" and r.day >= LAUNCH)]]),
            ),
        ),
        say(
            "Plan:\n1. Merge the fix (statuses, extract lookback, real time zones).\n2. Backfill: for each day "
            "2024-03-10 .. 2024-03-20 run `python -m etl.jobs.daily_revenue --day D --store us --target prod` in "
            "date order (March 10 too, because the DST fix moves its boundary). Each run re-MERGEs the day, so it is "
            "idempotent and safe to re-run.\n3. Re-run the refunds job for the same days is *not* needed: refunds "
            "are keyed by refund date and unaffected.\n4. Verify: US daily orders in fct_orders equal shop.orders for "
            "every backfilled day.\nI'd dry-run it on staging first."
        ),
    ]


def _p15() -> list[Step]:
    lines = [
        f"2024-03-21T10:{i:02d}:{(i * 7) % 60:02d}Z INFO etl.daily_revenue[staging] day={LAUNCH + timedelta(days=i)} "
        f"store=us fetched {r.orders + 310:,} rows (incl. {310:,} updated) loaded {r.orders:,} "
        f"net_revenue_usd={r.gross - r.refunds:,.2f}"
        for i, r in enumerate(x for x in ROWS if x.store == "us" and x.day >= LAUNCH)
    ]
    return [
        user("Dry-run it on staging for Mar 11-20."),
        tools(
            "Making sure staging starts from a copy of prod for those days.",
            sql(
                "select count(*), min(date), max(date) from staging.fct_daily_revenue where store = 'us'",
                csv(["count", "min", "max"], [[31, "2024-02-19", "2024-03-20"]]),
                "staging",
            ),
            sql("select max(loaded_at) from staging.fct_orders", csv(["max"], [["2024-03-21T06:00:12Z"]]), "staging"),
            ("list_files", {"path": "patches/"}, "patches/fix-authorized-orders.diff"),
        ),
        tools(
            None,
            (
                "run_python",
                {
                    "code": "for d in daterange('2024-03-11', '2024-03-20'):\n    "
                    "run_job('daily_revenue', day=d, store='us', target='staging')"
                },
                "\n".join(lines) + "\n10 runs, 10 ok, 0 failed",
            ),
            sql(
                "select f.date, f.orders, s.orders shop_orders from staging.fct_daily_revenue f join (select ...) s "
                "using (date) where f.store = 'us' and f.date >= '2024-03-11'",
                csv(
                    ["date", "orders", "shop_orders"],
                    [[r.day, r.orders, r.orders] for r in ROWS if r.store == "us" and r.day >= LAUNCH],
                ),
                "staging",
            ),
        ),
        say(
            f"The staging backfill ran for all 10 days without errors, and US order counts in staging now equal "
            "shop.orders on every day. Staging net revenue for the period is "
            f"{usd(totals(ROWS, store='us')['true_net'])} for the US store, {usd(MISSING['missing'])} more than prod "
            "reports."
        ),
    ]


def _p16() -> list[Step]:
    return [
        user("Do the staging numbers match what the payments team sees in Klarna?"),
        tools(
            None,
            (
                "http_get",
                {
                    "url": "https://payments.internal.acme-outdoor.example/v1/klarna/settlements?"
                    "store=us&from=2024-03-11&to=2024-03-20&summary=daily"
                },
                settlements_json(ROWS, 12),
            ),
            sql(
                "select date, count(*) filter (where payment_method = 'klarna') klarna_orders from "
                "staging.fct_orders where store_id = 'us' group by 1 order by 1",
                csv(
                    ["date", "klarna_orders"], [[r.day, r.klarna] for r in ROWS if r.store == "us" and r.day >= LAUNCH]
                ),
                "staging",
            ),
            reverse=True,
        ),
        say(
            f"Yes: Klarna orders per day in staging equal the settlement API's daily authorized counts on all 10 days "
            f"({MISSING['klarna_orders']:,} in total)."
        ),
    ]


def _p17() -> list[Step]:
    share = MISSING["missing"] / MISSING["true_net"]
    return [
        user("Great. Write an incident summary I can paste into #data-incidents."),
        say(
            "**[Resolved pending backfill] US revenue under-reported since 2024-03-11**\n\n"
            f"*Impact*: analytics.fct_orders / fct_daily_revenue missed {MISSING['klarna_orders']:,} US Klarna orders "
            f"({usd(MISSING['missing'])} gross, {share:.1%} of company net revenue) for Mar 11-20. The revenue "
            "dashboard showed a ~13% company-level drop. No source data was lost.\n\n"
            "*Cause*: Klarna launched in the US on Mar 11; its orders start as `authorized`. An ETL change deployed "
            "the same morning (a1f9c3e) loads only listed final statuses, so these orders were skipped, and the "
            "extract is incremental by created_at, so they were never re-read after shipping.\n\n"
            "*Fix*: load `authorized` (not counted as revenue until captured), extract by change time with a 3-day "
            "lookback, real time zones for business days (also fixes a DST misattribution since Mar 10). "
            "Backfill Mar 10-20 verified on staging against Klarna settlements.\n\n"
            "*Follow-ups*: a DQ check on skipped orders; a recognized-revenue measure by capture date for finance; "
            "payments to announce new order statuses in #data-platform."
        ),
    ]


def _p18() -> list[Step]:
    return [
        user("Add the data quality check so this can't happen silently again."),
        tools(
            None,
            read("dq/checks.yaml"),
            (
                "search_logs",
                {
                    "service": "etl-dq",
                    "query": "daily_revenue_within_3_sigma",
                    "start": "2024-03-11T00:00Z",
                    "end": "2024-03-21T00:00Z",
                },
                "\n".join(
                    f"{d}T06:40:12Z INFO dq check=daily_revenue_within_3_sigma store=all value=1.{i + 3} ok"
                    for i, d in enumerate(days()[-10:])
                ),
            ),
        ),
        tools(
            "The 3-sigma check never fired because the drop was gradual in the 28-day baseline. Adding a direct check.",
            (
                "write_file",
                {"path": "dq/checks.yaml", "content": "(appends skipped_orders_share)"},
                "wrote dq/checks.yaml (1,012 bytes)",
            ),
            (
                "run_tests",
                {"target": "tests/dq", "args": []},
                "tests/dq/test_checks_yaml.py ....\ntests/dq/test_skipped_orders.py ...\n7 passed in 0.41s",
            ),
        ),
        say(
            "Added `skipped_orders_share`: compares orders fetched vs loaded per store and day (both already in the "
            "ETL run log table) and fails above 1%. It would have paged on the first bad night (March 12: "
            "~18% skipped). Note the existing 3-sigma check never fired: a level shift gets absorbed into the "
            "28-day baseline within a few days."
        ),
    ]


def _p19() -> list[Step]:
    return [
        user("What happens with refunds on Klarna orders? Anything to worry about?"),
        tools(
            None,
            search_code("refund"),
            describe(
                "shop.refunds",
                "id:text order_id:text amount:numeric(12,2) reason:text created_at:timestamptz provider_reference:text",
            ),
        ),
        tools(
            None,
            sql(
                "select o.payment_method, count(*) refunds, sum(r.amount) amount from shop.refunds r join "
                "shop.orders o on o.id = r.order_id where o.store_id = 'us' and r.created_at >= '2024-03-11' "
                "group by 1",
                csv(
                    ["payment_method", "refunds", "amount"],
                    [["card", 512, 44180.55], ["klarna", 37, 3120.10], ["paypal", 141, 11802.92]],
                ),
            ),
            read("etl/jobs/refunds.py"),
        ),
        say(
            "Refunds are unaffected: the refunds job reads shop.refunds joined to shop.orders directly, with no "
            "status filter, so the 37 Klarna refunds since March 11 are in fct_refunds already. Today that makes "
            "US net revenue look slightly *worse* than it is (refunds of orders whose revenue is missing); the "
            "backfill corrects it."
        ),
    ]


def _p20() -> list[Step]:
    return [
        user(
            "Here's the hourly chart from the ops dashboard for the launch day, in case it helps.",
            ((png_data_url("ops-hourly"), "low"), (SCREENSHOT.format("ops-hourly-2024-03-11"), "high")),
        ),
        say(
            "Thanks. It shows the US checkout volume steady through March 11 with no dip at launch, which matches "
            "the raw order counts: demand didn't change, only how the orders were loaded."
        ),
    ]


def _p21() -> list[Step]:
    return [
        user("Draft the PR description."),
        say(
            "**Load Klarna `authorized` orders and re-read changed orders (fixes US revenue drop since Mar 11)**\n\n"
            "- `statuses.yaml`: add `authorized` (loaded, not revenue).\n- `extract/orders.py`: read orders created "
            "in the window or updated in `[since, end)`, `since` defaulting to 3 days before the window.\n"
            "- `common/windows.py`: business days in the stores' real time zones (zoneinfo).\n"
            "- `dq/checks.yaml`: `skipped_orders_share` <= 1% per store and day.\n- Tests: 13 in "
            "test_daily_revenue.py, 7 in tests/dq.\n\nBackfill after merge: Mar 10-20, US store (dry-run on staging "
            "matched shop.orders and Klarna settlements). Incident: #data-incidents thread from today."
        ),
    ]


def _p22() -> list[Step]:
    return [
        user("Can you check the staging DAG runs finished OK and nothing else failed this week?"),
        tools(
            None,
            (
                "http_get",
                {
                    "url": "https://airflow.internal.acme-outdoor.example/api/v1/dags/nightly_etl/"
                    "dagRuns?limit=6&order_by=-logical_date"
                },
                airflow_runs(),
            ),
            (
                "search_logs",
                {
                    "service": "etl-nightly",
                    "query": "level=error",
                    "start": "2024-03-14T00:00Z",
                    "end": "2024-03-21T12:00Z",
                },
                "(no results)",
            ),
            (
                "search_logs",
                {
                    "service": "etl-staging",
                    "query": "store=us",
                    "start": "2024-03-21T09:00Z",
                    "end": "2024-03-21T12:00Z",
                    "limit": 50,
                },
                "\n".join(
                    f"2024-03-21T10:{i:02d}:00Z INFO etl.daily_revenue[staging] store=us run ok" for i in range(10)
                ),
            ),
        ),
        say(
            "All six nightly_etl runs this week succeeded on the first try for all three stores, there are no error "
            "lines in the ETL logs since March 14, and the ten staging backfill runs all finished ok."
        ),
    ]


def _p23() -> list[Step]:
    return [
        user("Last thing: give me a final summary of everything we found, and the open questions."),
        say(
            f"**Found**\n1. US revenue has been under-reported since March 11 by {usd(MISSING['missing'])} "
            f"({MISSING['klarna_orders']:,} Klarna orders): a new `authorized` status met an ETL status filter "
            "deployed the same morning, and the created_at-only extract never re-read those orders.\n"
            "2. Since DST (March 10), the US business day is shifted by an hour (fixed UTC-5 offset): misattribution "
            "of ~1% of orders between adjacent days, no loss.\n3. EU weekend steps are FX carry-forward; expected.\n"
            "4. The 3-sigma DQ check can't catch level shifts.\n\n**Done**: patch + tests, staging backfill verified "
            "against shop.orders and Klarna, new DQ check, incident and PR text.\n\n**Open**\n- Finance: do we add a "
            "recognized-revenue measure by capture date, and who owns its definition?\n- Payments: a process to tell "
            "data-platform about new order statuses before launch.\n- Is a 3-day lookback enough for pay-in-4 "
            "orders that ship late? The settlement data shows captures up to 3 days after authorization so far."
        ),
        user("Perfect, thanks Atlas."),
        say("You're welcome! Ping me when the PR is merged and I'll run the prod backfill checks."),
    ]


PHASES: list[Callable[[], list[Step]]] = [
    _p01,
    _p02,
    _p03,
    _p04,
    _p05,
    _p06,
    _p07,
    _p08,
    _p09,
    _p10,
    _p11,
    _p12,
    _p13,
    _p14,
    _p15,
    _p16,
    _p17,
    _p18,
    _p19,
    _p20,
    _p21,
    _p22,
]
FINAL = _p23
