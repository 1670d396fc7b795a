"""Short mid-session follow-up questions, inserted after the main phases they refer to."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date

from _agent_story import MISSING, ROWS, Step, etl_runs_csv, read, say, search_code, sql, tools, usd, user
from _agent_world import LAUNCH, csv, etl_logs, orders_sample_csv, rng, settlements_json, shop_api_logs

CATEGORIES = [
    "tents",
    "sleeping bags",
    "backpacks",
    "footwear",
    "jackets",
    "base layers",
    "climbing",
    "cycling",
    "camp kitchen",
    "lighting",
    "navigation",
    "kids",
    "water sports",
    "trekking poles",
    "accessories",
]


def _category_csv() -> str:
    r = rng("categories")
    weights = [r.uniform(0.5, 3.0) for _ in CATEGORIES]
    total = sum(weights)
    rows: list[list[object]] = [
        [c, round(MISSING["klarna_orders"] * w / total), MISSING["missing"] * w / total]
        for c, w in zip(CATEGORIES, weights, strict=True)
    ]
    rows.sort(key=lambda row: -float(row[2]))  # type: ignore[arg-type]
    return csv(["category", "orders", "missing_usd"], rows, note="first line item category of each missing order")


def _delay_csv() -> str:
    shares = [0.0, 0.31, 0.42, 0.19, 0.05, 0.02, 0.007, 0.003]
    return csv(
        ["days_authorized_to_captured", "share_of_klarna_orders"],
        [[d, f"{s:.3f}"] for d, s in enumerate(shares)],
        note="captured Klarna orders, 2024-03-11 .. 2024-03-20",
    )


def _f_gross() -> list[Step]:
    return [
        user("Quick one: what's the difference between gross and net in that table?"),
        say(
            "`gross_usd` is the sum of order totals (converted to USD) for orders created that business day in "
            "revenue statuses. `net_revenue_usd` subtracts refunds *issued* that day, which may belong to older "
            "orders. So net can dip on a day with many refunds even if sales were fine."
        ),
    ]


def _f_runs() -> list[Step]:
    warned = [line for line in etl_logs(ROWS, n_days=10).splitlines() if " WARN " in line]
    return [
        user("How many runs had that warning so far?"),
        tools(
            None,
            (
                "search_logs",
                {
                    "service": "etl-nightly",
                    "query": "LOADABLE_STATUSES",
                    "start": "2024-03-01T00:00Z",
                    "end": "2024-03-21T12:00Z",
                    "limit": 100,
                },
                "\n".join(warned),
            ),
        ),
        say(
            f"{len(warned)} runs: every US run from the one on March 12 (loading March 11) through yesterday's, "
            "and none for EU or UK."
        ),
    ]


def _f_dana() -> list[Step]:
    return [
        user("Did Dana know Klarna was launching when she made that change?"),
        tools(
            None,
            search_code("klarna"),
            (
                "http_get",
                {"url": "https://jira.internal.acme-outdoor.example/rest/api/2/search?jql=text~klarna"},
                '{"total": 2, "issues": [{"key": "PAY-412", "summary": "Klarna pay later for US checkout", '
                '"status": "Done", "components": ["payments"], "watchers": ["jkim", "lfoster"]}, {"key": '
                '"PAY-431", "summary": "New order status authorized for deferred capture", "status": "Done", '
                '"components": ["payments", "shop-api"], "watchers": ["jkim"]}]}',
            ),
        ),
        say(
            "Probably not. The only mention of Klarna in the data repository is the yaml comment, and the two "
            "payments tickets (PAY-412, PAY-431, which introduced `authorized`) had no data-platform component "
            "or watcher. This looks like a process gap rather than anyone's mistake."
        ),
    ]


def _f_march15() -> list[Step]:
    row = next(r for r in ROWS if r.store == "us" and r.day == date(2024, 3, 15))
    return [
        user("Can you double-check one day by hand, say March 15?"),
        tools(
            None,
            sql(
                "select count(*), sum(total) from shop.orders where store_id = 'us' and created_at >= "
                "'2024-03-15 05:00' and created_at < '2024-03-16 05:00'",
                csv(["count", "sum"], [[row.orders, row.gross]]),
            ),
            sql(
                "select count(*), sum(total_usd) from analytics.fct_orders where store_id = 'us' and "
                "created_at >= '2024-03-15 05:00' and created_at < '2024-03-16 05:00'",
                csv(["count", "sum"], [[row.loaded_orders, row.gross - row.missing]]),
            ),
            sql(
                "select count(*) from shop.orders where store_id = 'us' and status = 'authorized' and "
                "created_at >= '2024-03-15 05:00' and created_at < '2024-03-16 05:00'",
                csv(["count"], [[row.klarna]]),
            ),
        ),
        say(
            f"March 15 checks out: {row.orders:,} orders in the shop, {row.loaded_orders:,} in the warehouse, and "
            f"the difference is exactly the {row.klarna:,} `authorized` orders ({usd(row.missing)})."
        ),
    ]


def _f_cancel() -> list[Step]:
    return [
        user("Does that created_at-only extract cause other problems, e.g. orders cancelled a day later?"),
        tools(
            None,
            sql(
                "select count(*) filter (where o.status = 'cancelled' and f.status <> 'cancelled') stale "
                "from shop.orders o join analytics.fct_orders f using (id) where o.created_at >= "
                "'2024-02-19'",
                csv(["stale"], [[1_284]]),
            ),
            read("etl/load/merge.py"),
        ),
        say(
            "Yes: 1,284 orders since February 19 were cancelled after they were loaded and are still `paid` or "
            "`shipped` in fct_orders, so they count as revenue. That is the double counting a1f9c3e tried to "
            "address, and the lookback extract in option B fixes it properly."
        ),
    ]


def _f_category() -> list[Step]:
    return [
        user("Break the missing revenue down by product category."),
        tools(
            None,
            sql(
                "select c.name category, count(distinct o.id) orders, sum(o.total) missing_usd from ... "
                "group by 1 order by 3 desc",
                _category_csv(),
            ),
        ),
        say(
            "It's spread across all categories in proportion to Klarna usage, slightly skewed to the expensive "
            "ones (tents, jackets, footwear lead), which fits pay-later being chosen for bigger baskets. No "
            "category is unaffected, so every category report since March 11 is low too."
        ),
    ]


def _f_lookback() -> list[Step]:
    return [
        user("Why a 3-day lookback and not 7?"),
        tools(
            None,
            sql("select capture_delay_days, count(*) / sum(count(*)) over () from klarna_captures ...", _delay_csv()),
        ),
        say(
            "99% of Klarna orders are captured within 4 days of authorization, and the nightly run re-reads "
            "anything *updated* in the last 3 days, so a status change is picked up by one of the three runs "
            "after it happens, however old the order is. The lookback bounds the delay of the update, not the "
            "age of the order, so 3 days is plenty; 7 would just re-read more rows."
        ),
    ]


def _f_speed() -> list[Step]:
    plan = (
        "Sort  (cost=18842.10..18901.33 rows=23692) (actual time=212.4..219.8 rows=21408 loops=1)\n"
        "  Sort Key: id\n  ->  Bitmap Heap Scan on orders  (actual time=31.2..188.1 rows=21408 loops=1)\n"
        "        Recheck Cond: (((created_at >= '2024-03-11 04:00') AND (created_at < '2024-03-12 04:00')) OR "
        "((updated_at >= '2024-03-08 04:00') AND (updated_at < '2024-03-12 04:00')))\n"
        "        Filter: (store_id = 'us')\n        ->  BitmapOr\n"
        "              ->  Bitmap Index Scan on orders_created_at_idx  (actual rows=6011)\n"
        "              ->  Bitmap Index Scan on orders_updated_at_idx  (actual rows=17520)\n"
        "Planning Time: 0.9 ms\nExecution Time: 226.3 ms"
    )
    return [
        user("Will the lookback make the nightly job much slower?"),
        tools(
            None,
            sql("explain analyze <the new extract query for 2024-03-11, store us>", plan, "staging"),
            (
                "search_logs",
                {
                    "service": "etl-staging",
                    "query": "fetched",
                    "start": "2024-03-21T10:00Z",
                    "end": "2024-03-21T11:00Z",
                },
                "2024-03-21T10:00:41Z INFO etl.daily_revenue[staging] store=us fetched 21,408 rows in 1.9s",
            ),
        ),
        say(
            "No: the query uses the existing indexes on created_at and updated_at (a BitmapOr) and takes about "
            "0.2 s on the replica for ~21k rows instead of ~6k. End to end the US task goes from about 80 s to "
            "about 85 s, dominated by the MERGE."
        ),
    ]


def _f_uk() -> list[Step]:
    return [
        user("Does the UK store have the same DST problem?"),
        tools(
            None,
            (
                "run_python",
                {
                    "code": "for d in ('2024-03-30', '2024-03-31', '2024-04-01'):\n"
                    "    print(d, old_window(d, 'uk'), new_window(d, 'uk'))"
                },
                "2024-03-30 00:00Z-00:00Z 00:00Z-00:00Z\n2024-03-31 00:00Z-00:00Z 00:00Z-23:00Z\n"
                "2024-04-01 00:00Z-00:00Z 23:00Z-23:00Z",
            ),
        ),
        say(
            "It will, from March 31 when the UK moves to BST: the old code keeps UTC days, so midnight-1 am UK "
            "orders would land on the previous day. The patched windows.py handles it; EU (CET->CEST the same "
            "day) too."
        ),
    ]


def _f_staging_gap() -> list[Step]:
    return [
        user("Any Klarna orders in staging that Klarna itself doesn't know about, or the other way round?"),
        tools(
            None,
            sql(
                "select count(*) from staging.fct_orders f full join klarna.settlements s on "
                "s.order_reference = f.order_id where f.payment_method = 'klarna' and (f.order_id is "
                "null or s.id is null)",
                csv(["count"], [[0]]),
                "staging",
            ),
        ),
        say("None in either direction: zero unmatched rows."),
    ]


def _f_check_sql() -> list[Step]:
    return [
        user("Show me the exact SQL of the new check."),
        say(
            "```yaml\n  - name: skipped_orders_share\n    sql: >\n      select max(1 - loaded::numeric / "
            'nullif(fetched, 0))\n      from analytics.etl_runs where run_date = {{ ds }}\n    expect: "<= 0.01"\n'
            "```\nIt takes the worst store of the day, and `nullif` keeps a zero-order day from dividing by zero."
        ),
    ]


def _f_prod_time() -> list[Step]:
    return [
        user("How long will the prod backfill take?"),
        tools(
            None,
            (
                "search_logs",
                {"service": "etl-staging", "query": "run ok", "start": "2024-03-21T10:00Z", "end": "2024-03-21T11:00Z"},
                "\n".join(
                    f"2024-03-21T10:{i * 2:02d}:00Z INFO etl.daily_revenue[staging] store=us day="
                    f"2024-03-{11 + i} run ok seconds={84 + (i * 7) % 11}"
                    for i in range(10)
                ),
            ),
        ),
        say(
            "About 15 minutes: staging took 84-94 s per day, and prod has the same data volume. The days must run "
            "in order but nothing else has to stop meanwhile."
        ),
    ]


def _f_refunds_window() -> list[Step]:
    return [
        user("And the refunds in the backfill window, do those need anything?"),
        say(
            "No. Refunds are loaded by refund date from shop.refunds with no status filter, so they're already "
            "complete. The backfill recomputes net revenue per day from them automatically."
        ),
    ]


def _f_timeline() -> list[Step]:
    return [
        user("Remind me of the flag rollout timeline?"),
        say(
            "Created March 4 at 0%, 5% for internal QA from March 6, 100% of the US store on March 11 at 13:00 "
            "UTC. So March 11 is a partial day for Klarna; the analysis treats it as post-launch."
        ),
    ]


def _f_did() -> list[Step]:
    return [
        user("Explain diff-in-diff in one paragraph for non-data people."),
        say(
            "We can't compare the US before and after Klarna directly, because other things change over time "
            "too (weather, campaigns, paydays). So we use the EU and UK stores, which didn't get Klarna, as a "
            "yardstick: whatever changed there is the 'background' change. The effect of Klarna is how much more "
            "the US changed than the yardstick did."
        ),
    ]


def _f_reviews() -> list[Step]:
    return [
        user("What share of Klarna orders were reviewed and then cancelled?"),
        tools(
            None,
            sql(
                "select count(*) filter (where o.status = 'cancelled') from risk.decisions d join "
                "shop.orders o on o.id = d.order_id where d.method = 'klarna' and d.action = 'review'",
                csv(["cancelled", "reviewed"], [[19, 131]]),
            ),
        ),
        say("19 of the 131 reviewed Klarna orders were cancelled (15%), about 0.2% of all Klarna orders."),
    ]


def _f_other_stores() -> list[Step]:
    other = [r for r in ROWS if r.store != "us" and r.day >= LAUNCH]
    return [
        user("And EU and UK weren't touched by the backfill?"),
        tools(
            None,
            sql(
                "select store, count(*), max(loaded_at) from analytics.fct_daily_revenue where date >= "
                "'2024-03-10' group by 1",
                csv(
                    ["store", "days", "max_loaded_at"],
                    [
                        ["eu", 11, "2024-03-21T05:34:02Z"],
                        ["uk", 11, "2024-03-21T05:35:40Z"],
                        ["us", 11, "2024-03-21T14:21:13Z"],
                    ],
                ),
            ),
        ),
        say(
            f"Untouched: their rows were last loaded by this morning's scheduled run, and their totals "
            f"({usd(sum(r.reported_net for r in other))} since March 11) are unchanged."
        ),
    ]


NOTEBOOK = {
    "cells": [
        {
            "cell_type": "markdown",
            "source": [
                "# Klarna pay-later: conversion impact (US store)\n",
                "Difference-in-differences against EU + UK, 2024-03-01 .. 2024-03-20.",
            ],
        },
        {
            "cell_type": "code",
            "source": [
                "import pandas as pd\n",
                "import statsmodels.api as sm\n",
                "from acme_data.warehouse import read_sql\n",
            ],
        },
        {
            "cell_type": "code",
            "source": [
                'panel = read_sql("""\n',
                "    select date, store, sum(orders)::float / sum(sessions) conv,\n",
                "           extract(dow from date) dow, store = 'us' us, date >= '2024-03-11' after\n",
                "    from analytics.fct_web_funnel where date between '2024-03-01' and '2024-03-20'\n",
                '    group by 1, 2 order by 1, 2""")\n',
            ],
        },
        {
            "cell_type": "code",
            "source": [
                "model = sm.OLS.from_formula('conv ~ us * after + C(dow)', data=panel).fit(cov_type='HC1')\n",
                "model.summary()",
            ],
        },
        {
            "cell_type": "markdown",
            "source": [
                "`us:after` = +0.14 pp (95% CI 0.06 - 0.22). Caveats: 10 post-launch days, no randomisation; ",
                "EU/UK are a control only if nothing store-specific changed there in the window.",
            ],
        },
        {
            "cell_type": "code",
            "source": [
                "by_device = read_sql('select ... from analytics.fct_web_funnel ...')\n",
                "by_device.pivot_table(index='device', columns='after', values='conv')",
            ],
        },
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}

TEST_FILE = [
    "from datetime import datetime, timedelta, timezone",
    "",
    "import pytest",
    "",
    "from etl.extract import orders",
    "from etl.jobs import daily_revenue as job",
    "",
    "UTC = timezone.utc",
    "",
    "",
    "def test_authorized_orders_are_loaded():",
    "    rows = job.transform([order(status='authorized')], 'us', DAY)",
    "    assert [r.status for r in rows] == ['authorized']",
    "",
    "",
    "def test_authorized_orders_are_not_revenue_until_captured():",
    "    rows = job.transform([order(status='authorized')], 'us', DAY)",
    "    assert job.rollup(rows)['gross_usd'] == 0",
    "",
    "",
    "def test_extract_uses_updated_at_with_lookback(fake_replica):",
    "    orders.fetch_orders('us', START, START + timedelta(days=1))",
    "    sql, params = fake_replica.last_query",
    "    assert params['since'] == START - timedelta(days=3)",
    "    assert 'updated_at >= %(since)s' in sql",
    "",
    "",
    "@pytest.mark.parametrize('store', ['us', 'uk', 'eu'])",
    "def test_business_day_window_follows_dst(store):",
    "    march, april = business_day_window(d(2024, 3, 9), store), business_day_window(d(2024, 4, 2), store)",
    "    assert (april[0] - march[0]) % timedelta(days=1) == timedelta(hours=-1)",
]


def _f_raw_rows() -> list[Step]:
    return [
        user("Show me some of the raw missing orders, I want to eyeball them."),
        tools(
            None,
            sql(
                "select o.id, o.created_at, o.updated_at, o.status, o.payment_method, o.total, ... from "
                "shop.orders o left join analytics.fct_orders f using (id) where f.id is null and "
                "o.store_id = 'us' limit 100",
                orders_sample_csv(100, seed="missing", klarna_only=True),
            ),
        ),
        say(
            "All 100 are Klarna orders created after March 11; the older ones are `shipped` now (captured), the "
            "most recent are still `authorized`. Totals look normal (no test orders, no zero amounts), and none "
            "of them is in fct_orders."
        ),
    ]


def _f_shop_api() -> list[Step]:
    return [
        user("When exactly did the shop start creating `authorized` orders?"),
        tools(
            None,
            (
                "search_logs",
                {
                    "service": "shop-api",
                    "query": "checkout store=us",
                    "start": "2024-03-11T12:40Z",
                    "end": "2024-03-11T13:40Z",
                    "limit": 120,
                },
                shop_api_logs(120),
            ),
        ),
        say(
            "At 13:00 UTC on March 11, the moment the flag went to 100%: checkout logs before that show only "
            "card and PayPal with status `paid`; from 13:00:03 about one checkout in five is Klarna with status "
            "`authorized`. (The 5% QA rollout before that only ran against the staging shop.)"
        ),
    ]


def _f_export() -> list[Step]:
    return [
        user("Pull the full Klarna settlement export for March 18 so finance can reconcile."),
        tools(
            None,
            (
                "http_get",
                {
                    "url": "https://payments.internal.acme-outdoor.example/v1/klarna/settlements?"
                    "store=us&date=2024-03-18&limit=45"
                },
                settlements_json(ROWS, 45, "export-0318"),
            ),
        ),
        say(
            "Here it is (45 records on this page; `has_more` is true, the full day has about a thousand). I'd "
            "rather give finance the warehouse table after the backfill than paginate the API: it will have one "
            "row per order with its capture status."
        ),
    ]


def _f_month_runs() -> list[Step]:
    return [
        user("Dump the etl_runs table for the last two weeks, I want to attach it to the incident."),
        tools(
            None, sql("select * from analytics.etl_runs where run_date >= '2024-03-07' order by 1, 2", etl_runs_csv())
        ),
        say(
            "Attached above: 42 runs, all scheduled, all successful. For the US rows since March 12 the gap "
            "between `fetched` and `loaded` is exactly the skipped authorized orders."
        ),
    ]


def _f_notebook() -> list[Step]:
    content = json.dumps(NOTEBOOK, indent=1)
    return [
        user("Save the analysis as a notebook in the analyses repo so others can rerun it."),
        tools(
            None,
            (
                "write_file",
                {"path": "analyses/2024-03-klarna-conversion.ipynb", "content": content},
                f"wrote analyses/2024-03-klarna-conversion.ipynb ({len(content):,} bytes)",
            ),
        ),
        say(
            "Saved `analyses/2024-03-klarna-conversion.ipynb`: the panel query, the diff-in-diff model, the "
            "device split and the caveats. It reads from the warehouse, so rerunning it next month extends the "
            "window automatically."
        ),
    ]


def _f_owners() -> list[Step]:
    return [
        user("Who should review option B?"),
        tools(
            None,
            (
                "read_file",
                {"path": "CODEOWNERS"},
                "CODEOWNERS (6 lines)\n1 | * @acme/data-platform\n2 | /etl/jobs/ @dwhitfield @mruiz\n"
                "3 | /etl/extract/ @mruiz\n4 | /etl/config/ @dwhitfield\n5 | /dq/ @pnatarajan\n"
                "6 | /looker/ @acme/bi",
            ),
        ),
        say(
            "CODEOWNERS asks for Marco (etl/extract), Dana (etl/config) and Priya for the DQ check. Dana should "
            "review regardless, since her change is the one being amended."
        ),
    ]


def _f_slack() -> list[Step]:
    return [
        user("Can you make a two-line version for the Slack channel topic?"),
        say(
            f"US revenue under-reported Mar 11-20 ({usd(MISSING['missing'])}, Klarna `authorized` orders skipped "
            "by the ETL). Fix + backfill in progress; details in thread."
        ),
    ]


def _f_tests() -> list[Step]:
    listing = "\n".join(f"{i:>2} | {line}" for i, line in enumerate(TEST_FILE, start=1))
    return [
        user("Which tests did you add exactly?"),
        tools(
            None,
            (
                "read_file",
                {"path": "tests/test_extract_orders.py", "start_line": 1, "end_line": 40},
                f"tests/test_extract_orders.py (lines 1-{len(TEST_FILE)} of 112)\n{listing}",
            ),
        ),
        say(
            "Four new tests (six cases): authorized orders are loaded; they aren't revenue until captured; the "
            "extract passes `since` = start - 3 days and filters on updated_at; and the business-day window "
            "follows DST for each store. Plus the existing MERGE test now checks that a status update lands."
        ),
    ]


INSERTS: dict[str, list[Callable[[], list[Step]]]] = {
    "_p02": [_f_gross],
    "_p03": [_f_runs],
    "_p04": [_f_dana],
    "_p05": [_f_march15, _f_shop_api],
    "_p06": [_f_cancel, _f_raw_rows],
    "_p07": [_f_category],
    "_p09": [_f_owners],
    "_p10": [_f_lookback],
    "_p11": [_f_speed, _f_tests],
    "_p12": [_f_uk],
    "_p14": [_f_refunds_window],
    "_p16": [_f_staging_gap, _f_export],
    "_p17": [_f_slack],
    "_p18": [_f_check_sql],
    "_p22": [_f_prod_time, _f_month_runs],
    "_p24": [_f_timeline],
    "_p26": [_f_did, _f_notebook],
    "_p29": [_f_reviews],
    "_p31": [_f_other_stores],
}
