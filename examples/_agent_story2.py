"""The second half of the example session: did Klarna change conversion, and the production backfill."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date, timedelta

from _agent_story import MISSING, ROWS, SCREENSHOT, Step, say, sql, tools, usd, user
from _agent_world import LAUNCH, csv, png_data_url, rng

DEVICES = {"desktop": (0.031, 0.00), "mobile_web": (0.018, 0.09), "ios": (0.034, 0.05), "android": (0.027, 0.06)}
FUNNEL_DAYS = [date(2024, 3, 1) + timedelta(days=i) for i in range(20)]

RUNBOOK = """# Runbook: revenue dashboard looks wrong

1. Compare analytics.fct_daily_revenue with the shop replica for the same business day:
   `select count(*) from shop.orders where store_id = :store and created_at >= :start and created_at < :end`.
2. Check the nightly_etl DAG in Airflow: all three `daily_revenue_*` tasks green?
3. Search Loki `{service="etl-nightly"} |= "WARN"` for the day after the bad date.
4. Check the Looker PDT `daily_revenue_pdt` rebuilt after 06:00 UTC (Admin > PDTs).
5. If a day must be re-run: `python -m etl.jobs.daily_revenue --day D --store S --target prod` (idempotent).

## Known causes
| symptom | cause | fix |
|---|---|---|
| one store zero | replica lag > 1 h at 05:30 | re-run the day after lag recovers |
| all stores low by 5-10% | FX job failed, rate defaulted to previous | re-run fx_rates then daily_revenue |
| weekend steps (EU/UK) | FX carried from Friday | expected |
"""


STORE_SCALE = {"us": 1.0, "eu": 0.42, "uk": 0.27}


def funnel(device: str, day: date, store: str = "us") -> list[int]:
    base, uplift = DEVICES[device]
    uplift = uplift if store == "us" else 0.0
    r = rng("funnel", device, day, store)
    visits = {"desktop": 61000, "mobile_web": 88000, "ios": 23000, "android": 17000}[device] * STORE_SCALE[store]
    sessions = round(visits * r.uniform(0.95, 1.05))
    views = round(sessions * r.uniform(0.55, 0.6))
    carts = round(views * r.uniform(0.16, 0.18))
    checkouts = round(carts * r.uniform(0.5, 0.54))
    rate = base * (1 + (uplift if day >= LAUNCH else 0)) * r.uniform(0.97, 1.03)
    return [sessions, views, carts, checkouts, round(sessions * rate)]


def funnel_csv(by_device: bool, stores: tuple[str, ...] = ("us",)) -> str:
    rows: list[list[object]] = []
    for day in FUNNEL_DAYS:
        per = {f"{s}/{d}" if len(stores) > 1 else d: funnel(d, day, s) for s in stores for d in DEVICES}
        if by_device:
            rows += [[day, d, *v, f"{v[4] / v[0]:.4f}"] for d, v in per.items()]
        else:
            total = [sum(v[i] for v in per.values()) for i in range(5)]
            rows.append([day, *total, f"{total[4] / total[0]:.4f}"])
    head = [
        "date",
        *(["device"] if by_device else []),
        "sessions",
        "product_views",
        "add_to_cart",
        "checkout_started",
        "orders",
        "conversion",
    ]
    return csv(head, rows, note=f"source: analytics.fct_web_funnel, store in {stores}")


def conversion(device: str | None, after: bool) -> float:
    days = [d for d in FUNNEL_DAYS if (d >= LAUNCH) == after]
    picked = [funnel(x, d) for d in days for x in DEVICES if device in (None, x)]
    return sum(v[4] for v in picked) / sum(v[0] for v in picked)


def flag_json() -> str:
    return json.dumps(
        {
            "key": "checkout.klarna_pay_later",
            "type": "boolean",
            "state": "on",
            "environment": "production",
            "rules": [
                {
                    "id": "r1",
                    "description": "US store only",
                    "conditions": [{"attribute": "store_id", "op": "eq", "value": "us"}],
                    "rollout": 100,
                }
            ],
            "history": [
                {"at": "2024-03-04T15:02:11Z", "by": "jkim@acme-outdoor.example", "change": "created, rollout 0"},
                {"at": "2024-03-06T09:40:52Z", "by": "jkim@acme-outdoor.example", "change": "rollout 5 (internal QA)"},
                {"at": "2024-03-11T13:00:03Z", "by": "release-bot", "change": "rollout 100"},
            ],
            "experiment": None,
        },
        indent=2,
    )


def risk_logs() -> str:
    r = rng("risk")
    lines = []
    t = 0
    for _ in range(130):
        t += r.randint(20, 400)
        method = r.choices(["card", "klarna", "paypal"], [0.62, 0.19, 0.19])[0]
        score = round(r.betavariate(2, 12) * 100, 1)
        action = "review" if score > 35 else "approve"
        stamp = f"2024-03-{12 + t // 86400:02d}T{t % 86400 // 3600:02d}:{t % 3600 // 60:02d}:{t % 60:02d}Z"
        lines.append(
            f"{stamp} INFO risk-service decision order=US-{8_812_000 + r.randint(0, 199_999)} "
            f"method={method} score={score} action={action} rules=[velocity:{r.randint(0, 3)},"
            f"geo_mismatch:{int(r.random() < 0.05)},device_age_days:{r.randint(0, 900)}]"
        )
    return "\n".join(lines)


def aov_table() -> str:
    r = rng("aov")
    rows = [
        [m, n, round(a * r.uniform(0.98, 1.02), 2), round(a * r.uniform(0.55, 0.6), 2)]
        for m, n, a in (("card", 33_112, 84.9), ("klarna", MISSING["klarna_orders"], 112.4), ("paypal", 9_806, 79.3))
    ]
    return csv(
        ["payment_method", "orders", "avg_order_usd", "median_order_usd"],
        rows,
        note="store = 'us', created 2024-03-11 .. 2024-03-20, shop.orders",
    )


def cohort_csv() -> str:
    r = rng("cohort")
    rows: list[list[object]] = []
    for week in range(8):
        start = date(2024, 1, 29) + timedelta(weeks=week)
        for method in ("card", "klarna", "paypal"):
            if method == "klarna" and start < date(2024, 3, 11):
                continue
            new = r.randint(5000, 7000) if method != "klarna" else r.randint(400, 900)
            rows.append([start, method, new, f"{r.uniform(0.55, 0.7):.3f}", f"{r.uniform(0.08, 0.14):.3f}"])
    return csv(["first_order_week", "payment_method", "customers", "share_new_customers", "repeat_within_28d"], rows)


def _p24() -> list[Step]:
    before, after = conversion(None, False), conversion(None, True)
    return [
        user("New question from marketing now that we know about Klarna: did it increase conversion in the US store?"),
        tools(
            "Checking what funnel data we have first.",
            sql(
                "describe analytics.fct_web_funnel",
                "analytics.fct_web_funnel (9 columns)\n  date date\n  store text"
                "\n  device text\n  sessions bigint\n  product_views bigint\n  add_to_cart bigint\n  "
                "checkout_started bigint\n  orders bigint\n  loaded_at timestamptz",
            ),
        ),
        tools(
            "Checking how it was launched and the web funnel before and after.",
            (
                "http_get",
                {"url": "https://flags.internal.acme-outdoor.example/api/flags/checkout.klarna_pay_later"},
                flag_json(),
            ),
            sql(
                "select date, sum(sessions) sessions, ... from analytics.fct_web_funnel where store = 'us' and "
                "date between '2024-03-01' and '2024-03-20' group by 1 order by 1",
                funnel_csv(False),
            ),
        ),
        say(
            f"Careful with causality here: Klarna was not an A/B test. The flag went from 5% (internal QA) to 100% of "
            f"the US store on March 11 at 13:00 UTC, so we can only compare before and after. Session-to-order "
            f"conversion went from {before:.2%} (Mar 1-10) to {after:.2%} (Mar 11-20), a {after / before - 1:+.1%} "
            "relative change. Seasonality and the weekend mix could explain part of that; splitting by device "
            "would tell us more, since pay-later tends to matter most on mobile."
        ),
    ]


def _p25() -> list[Step]:
    lines = "\n".join(
        f"- {d}: {conversion(d, False):.2%} -> {conversion(d, True):.2%} "
        f"({conversion(d, True) / conversion(d, False) - 1:+.1%})"
        for d in DEVICES
    )
    return [
        user("Yes, split it by device please."),
        tools(
            None,
            sql(
                "select date, device, sessions, ... from analytics.fct_web_funnel where store = 'us' and date "
                "between '2024-03-01' and '2024-03-20' order by 1, 2",
                funnel_csv(True),
            ),
            sql(
                "select date, store || '/' || device, sessions, ... from analytics.fct_web_funnel where store in "
                "('eu', 'uk') and date between '2024-03-01' and '2024-03-20' order by 1, 2",
                funnel_csv(True, ("eu", "uk")),
            ),
        ),
        say(
            f"By device, session-to-order conversion before -> after launch:\n{lines}\n\nThe change is concentrated "
            "on mobile web and the apps; desktop is flat, which is what you'd expect if the effect is real "
            "(desktop shoppers use cards far more). EU and UK, without Klarna, were flat over the same days, which "
            "argues against seasonality."
        ),
    ]


def _p26() -> list[Step]:
    script = (
        "import statsmodels.api as sm\n# diff-in-diff: US vs EU+UK, before vs after 2024-03-11, by day\n"
        "model = sm.OLS.from_formula('conv ~ us * after + C(dow)', data=panel).fit(cov_type='HC1')\n"
        "print(model.summary().tables[1])"
    )
    out = (
        "==============================================================================\n"
        "                 coef    std err          z      P>|z|      [0.025      0.975]\n"
        "------------------------------------------------------------------------------\n"
        "Intercept      0.0231      0.001     30.114      0.000       0.022       0.025\n"
        "us            -0.0008      0.001     -0.702      0.483      -0.003       0.001\n"
        "after          0.0002      0.001      0.201      0.841      -0.002       0.002\n"
        "us:after       0.0014      0.000      3.126      0.002       0.001       0.002\n"
        "C(dow)[T.1]   -0.0003      0.001     -0.280      0.779      -0.002       0.002\n"
        "C(dow)[T.5]    0.0021      0.001      2.010      0.044       0.000       0.004\n"
        "C(dow)[T.6]    0.0025      0.001      2.391      0.017       0.001       0.005\n"
        "=============================================================================="
    )
    return [
        user("Can you put a number with an interval on it? Marketing will want to quote it."),
        tools(
            "A difference-in-differences against EU+UK with day-of-week effects is the most honest option "
            "without an experiment.",
            ("run_python", {"code": script}, out),
        ),
        say(
            "Difference-in-differences (US vs EU+UK, before vs after, day-of-week controls, robust SEs): the "
            "`us:after` term is +0.14 percentage points of session conversion, 95% CI [0.06, 0.22] pp, p = 0.002. "
            "On a base of about 2.5% that's roughly +5% relative. I'd quote it as 'about 5% more orders per "
            "session, likely between 2% and 9%', and flag that 10 post-launch days is a short window."
        ),
    ]


def _p27() -> list[Step]:
    return [
        user("And average order value, Klarna vs card?"),
        tools(
            None,
            (
                "run_python",
                {"code": "orders.groupby('payment_method').total.describe(percentiles=[.1,.5,.9])"},
                "                  count    mean    std   min    10%    50%     90%      max\npayment_method\n"
                "card            33112.0   85.02  61.3  4.99  24.90  62.10  168.40  1893.00\n"
                f"klarna          {MISSING['klarna_orders']:.1f}  112.37  70.8  35.00  44.95  92.30  "
                "214.10  2410.50\npaypal           9806.0   79.41  55.9  4.99  22.50  58.75  151.20  1288.00",
            ),
        ),
        tools(
            None,
            sql(
                "select payment_method, count(*) orders, avg(total) avg_order_usd, percentile_cont(0.5) ... "
                "from shop.orders where store_id = 'us' and created_at >= '2024-03-11 04:00' group by 1",
                aov_table(),
            ),
        ),
        say(
            "Klarna orders are noticeably larger: about $112 on average versus $85 for card and $79 for PayPal, and "
            "the medians show the same gap, so it's not a few outliers. Part of that is selection (people reach for "
            "pay-later on bigger baskets), so it doesn't mean Klarna *raised* order values by that much."
        ),
    ]


def _p28() -> list[Step]:
    return [
        user("Are we getting new customers through it, or is it existing customers switching payment method?"),
        tools(
            None,
            sql(
                "with firsts as (...) select first_order_week, payment_method, count(*) customers, ... "
                "from firsts group by 1, 2 order by 1, 2",
                cohort_csv(),
            ),
            sql(
                "select count(*) filter (where prior_orders = 0) new, count(*) returning from klarna_orders_v",
                csv(["new", "returning"], [[6402, 3708]]),
            ),
        ),
        say(
            "Mostly new: of the Klarna customers since March 11, about 63% had never ordered before, versus about "
            "60% for card in the same weeks, so it's not cannibalising existing customers. Their 28-day repeat rate "
            "can't be measured yet (the oldest Klarna cohort is 10 days old)."
        ),
    ]


def _p29() -> list[Step]:
    return [
        user("Risk team asked if Klarna orders look riskier. Anything in the risk service logs?"),
        tools(
            None,
            (
                "search_logs",
                {
                    "service": "risk-service",
                    "query": "decision store=us",
                    "start": "2024-03-12T00:00Z",
                    "end": "2024-03-14T00:00Z",
                    "limit": 130,
                },
                risk_logs(),
            ),
            sql(
                "select method, count(*), avg(score), count(*) filter (where action = 'review') from "
                "risk.decisions where created_at >= '2024-03-11' group by 1",
                csv(
                    ["method", "decisions", "avg_score", "reviews"],
                    [["card", 33310, 13.9, 402], ["klarna", 10110, 14.2, 131], ["paypal", 9851, 13.1, 97]],
                ),
            ),
        ),
        say(
            "No sign of it. Klarna decisions have an average risk score of 14.2 versus 13.9 for card, and a review "
            "rate of 1.3% versus 1.2%, differences well within day-to-day noise. Klarna also carries the credit "
            "risk itself, so our exposure is mostly fraud on delivery, which the same rules cover."
        ),
    ]


def _p30() -> list[Step]:
    return [
        user("Write this up as a short note for marketing."),
        say(
            "**Klarna pay-later in the US store: first 10 days**\n\n- Launched to 100% of US shoppers on March 11 "
            "(no A/B test).\n- Conversion: about +5% more orders per session (95% CI roughly +2% to +9%), measured "
            "against EU and UK as a control. The gain is on mobile web and the apps; desktop is flat.\n- Klarna "
            "orders are about 19% of US orders and larger on average ($112 vs $85 for card), partly because "
            "shoppers choose it for bigger baskets.\n- About 63% of Klarna customers are new to us.\n- No increase "
            "in risk reviews.\n\nCaveat: the revenue dashboard under-counted these orders until the fix that is "
            "being deployed now; use the corrected numbers from tomorrow."
        ),
    ]


def _p31() -> list[Step]:
    body = [[r.day, r.orders, r.orders] for r in ROWS if r.store == "us" and r.day >= date(2024, 3, 10)]
    return [
        user("The PR is merged and I kicked off the prod backfill for Mar 10-20. Can you verify it?"),
        tools(
            None,
            sql(
                "select f.date, f.orders, s.orders shop_orders from analytics.fct_daily_revenue f join "
                "(select ...) s using (date) where f.store = 'us' and f.date >= '2024-03-10' order by 1",
                csv(["date", "orders", "shop_orders"], body),
            ),
            (
                "search_logs",
                {
                    "service": "etl-nightly",
                    "query": "store=us",
                    "start": "2024-03-21T14:00Z",
                    "end": "2024-03-21T16:00Z",
                },
                "\n".join(
                    f"2024-03-21T14:{2 * i:02d}:13Z INFO etl.daily_revenue[prod-backfill] day={row[0]} store=us "
                    f"loaded {row[1]:,} orders"
                    for i, row in enumerate(body)
                ),
            ),
            sql(
                "select sum(net_revenue_usd) from analytics.fct_daily_revenue where store = 'us' and date >= "
                "'2024-03-11'",
                csv(
                    ["sum"],
                    [
                        [
                            MISSING["true_net"]
                            - sum(r.gross - r.refunds for r in ROWS if r.store != "us" and r.day >= LAUNCH)
                        ]
                    ],
                ),
            ),
            reverse=True,
        ),
        say(
            f"The prod backfill is complete and correct: all 11 days (Mar 10-20) loaded, US order counts equal "
            f"shop.orders on every day, and US net revenue since March 11 went up by {usd(MISSING['missing'])}, "
            "exactly the missing amount we estimated."
        ),
    ]


def _p32() -> list[Step]:
    looker = json.dumps(
        {
            "pdt": "daily_revenue_pdt",
            "connection": "warehouse_prod",
            "last_build": {
                "started_at": "2024-03-21T06:05:40Z",
                "finished_at": "2024-03-21T06:07:02Z",
                "status": "success",
                "trigger": "datagroup daily_etl (sql_trigger: select max(loaded_at) from analytics.etl_runs)",
            },
            "next_check": "2024-03-21T17:00:00Z",
            "cache_policy": {"max_cache_age": "24 hours"},
        },
        indent=2,
    )
    return [
        user("The dashboard still shows the drop though.", ((SCREENSHOT.format("looker-still-low"), "high"),)),
        tools(
            None,
            (
                "http_get",
                {"url": "https://looker.internal.acme-outdoor.example/api/4.0/derived_table/daily_revenue_pdt/status"},
                looker,
            ),
            sql("select max(loaded_at) from analytics.etl_runs", csv(["max"], [["2024-03-21T05:36:41Z"]])),
        ),
        say(
            "Looker is serving the persistent derived table built at 06:07 this morning, before the backfill. Its "
            "rebuild trigger is `max(loaded_at)` of analytics.etl_runs, and the backfill runs didn't write to "
            "etl_runs (the CLI only records scheduled runs), so Looker doesn't know anything changed. Either click "
            "'Rebuild derived tables & run' on the dashboard, or wait for the next check at 17:00 after inserting an "
            "etl_runs row. Worth fixing: manual runs should record themselves too."
        ),
    ]


def _p33() -> list[Step]:
    return [
        user(
            "Rebuilt. Looks right now?",
            ((SCREENSHOT.format("looker-after-rebuild"), "high"), (png_data_url("after-rebuild"), "low")),
        ),
        say(
            "From the screenshot: yes, the March 11-20 bars are back at the level of the previous weeks, and the "
            "US line no longer has the step. The tile now matches the warehouse totals I queried after the backfill."
        ),
    ]


def _p34() -> list[Step]:
    return [
        user("Last thing, update the runbook with what we learned today."),
        tools(None, ("read_file", {"path": "docs/runbooks/revenue-dashboard.md"}, RUNBOOK)),
        tools(
            None,
            (
                "write_file",
                {"path": "docs/runbooks/revenue-dashboard.md", "content": "(updated)"},
                "wrote docs/runbooks/revenue-dashboard.md (2,311 bytes)",
            ),
        ),
        say(
            "Updated the runbook: a step to compare fetched vs loaded counts in the ETL log (the new "
            "`skipped_orders_share` check), a 'new order status' row in the known-causes table (symptom: one store "
            "low by a constant share from a launch date; fix: add the status to statuses.yaml and backfill), and a "
            "note that manual re-runs must be followed by a PDT rebuild until they record themselves in etl_runs."
        ),
    ]


PHASES2: list[Callable[[], list[Step]]] = [_p24, _p25, _p26, _p27, _p28, _p29, _p30, _p31, _p32, _p33, _p34]
