"""The simulated shop behind ``agent_session.jsonl``: its data, files and tool outputs.

Everything is derived from seeded ``random.Random`` instances (string seeds hash
the same on every platform), so ``make_agent_session.py`` writes the same bytes on
every run. The numbers the agent quotes in its answers are computed from the same
data as the tool outputs it read, so the transcript is self-consistent.

The story: Acme Outdoor runs three web stores (us, eu, uk). On 2024-03-11 the US
store launched Klarna "pay later"; Klarna orders stay ``authorized`` until they
ship. The same day an ETL change (``LOADABLE_STATUSES``) started skipping
non-final statuses, and the extract is incremental by ``created_at`` with no
lookback, so those orders are never loaded and US revenue drops by ~19%.
"""

from __future__ import annotations

import base64
import json
import random
import struct
import zlib
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

START = date(2024, 2, 19)
DAYS = 31  # through 2024-03-20; the session happens on 2024-03-21
LAUNCH = date(2024, 3, 11)
DST = date(2024, 3, 10)
STORES = {"us": (5200, 86.0, "USD", 1.0), "eu": (2100, 74.0, "EUR", 1.087), "uk": (1300, 69.0, "GBP", 1.271)}
KLARNA_SHARE = 0.19


def rng(*key: object) -> random.Random:
    return random.Random(":".join(str(k) for k in key))


def days() -> list[date]:
    return [START + timedelta(days=i) for i in range(DAYS)]


@dataclass(frozen=True)
class DayStore:
    day: date
    store: str
    orders: int
    klarna: int  # authorized at creation (never loaded by the broken ETL)
    gross: float  # in USD
    refunds: float

    @property
    def loaded_orders(self) -> int:
        return self.orders - self.klarna if self.day >= LAUNCH else self.orders

    @property
    def missing(self) -> float:
        return self.gross * self.klarna / self.orders if self.day >= LAUNCH else 0.0

    @property
    def reported_net(self) -> float:
        return self.gross - self.refunds - self.missing


def world() -> list[DayStore]:
    out = []
    for day in days():
        for store, (base, aov, _, fx) in STORES.items():
            r = rng("world", day, store)
            weekend = 1.15 if day.weekday() >= 5 else 1.0
            orders = round(base * weekend * r.uniform(0.96, 1.04))
            klarna = round(orders * KLARNA_SHARE * r.uniform(0.9, 1.1)) if store == "us" and day >= LAUNCH else 0
            gross = orders * aov * fx * r.uniform(0.97, 1.03)
            out.append(DayStore(day, store, orders, klarna, gross, gross * r.uniform(0.025, 0.04)))
    return out


def totals(rows: list[DayStore], *, since: date = LAUNCH, store: str | None = None) -> dict[str, float]:
    picked = [r for r in rows if r.day >= since and (store is None or r.store == store)]
    return {
        "missing": sum(r.missing for r in picked),
        "klarna_orders": sum(r.klarna for r in picked),
        "true_net": sum(r.gross - r.refunds for r in picked),
        "reported_net": sum(r.reported_net for r in picked),
    }


def mean_net(rows: list[DayStore], first: date, last: date, store: str | None = None) -> float:
    picked = [r for r in rows if first <= r.day <= last and (store is None or r.store == store)]
    per_day: dict[date, float] = {}
    for r in picked:
        per_day[r.day] = per_day.get(r.day, 0.0) + r.reported_net
    return sum(per_day.values()) / len(per_day)


# --- tool outputs ---------------------------------------------------------------------------


def csv(header: list[str], rows: list[list[object]], *, note: str = "") -> str:
    lines = [",".join(header)] + [",".join(_cell(c) for c in row) for row in rows]
    tail = f"\n({len(rows)} rows{'; ' + note if note else ''})"
    return "\n".join(lines) + tail


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def daily_revenue_csv(rows: list[DayStore], *, by_store: bool) -> str:
    if by_store:
        body: list[list[object]] = [
            [r.day, r.store, r.loaded_orders, r.gross - r.missing, r.refunds, r.reported_net] for r in rows
        ]
        return csv(["date", "store", "orders", "gross_usd", "refunds_usd", "net_revenue_usd"], body)
    per_day: dict[date, list[float]] = {}
    for r in rows:
        acc = per_day.setdefault(r.day, [0, 0.0, 0.0])
        acc[0] += r.loaded_orders
        acc[1] += r.gross - r.missing
        acc[2] += r.reported_net
    body = [[d, int(v[0]), v[1], v[2]] for d, v in per_day.items()]
    return csv(["date", "orders", "gross_usd", "net_revenue_usd"], body, note="source: analytics.fct_daily_revenue")


def status_by_day_csv(rows: list[DayStore]) -> str:
    body: list[list[object]] = []
    for r in rows:
        if r.store != "us":
            continue
        g = rng("status", r.day)
        shipped = round((r.orders - r.klarna) * g.uniform(0.55, 0.7)) if r.day < date(2024, 3, 19) else 0
        paid = r.orders - r.klarna - shipped
        cancelled = round(r.orders * g.uniform(0.004, 0.009))
        body += [[r.day, "paid", paid - cancelled], [r.day, "shipped", shipped], [r.day, "cancelled", cancelled]]
        if r.klarna:
            body.append([r.day, "authorized", r.klarna])
    return csv(["created_date", "status", "orders"], body, note="source: raw.shop_orders (store_id = 'us')")


def orders_sample_csv(n: int, *, seed: str = "orders-sample", klarna_only: bool = False) -> str:
    r = rng(seed)
    body: list[list[object]] = []
    for _ in range(n):
        created = datetime(2024, 3, 11, 4, 0, tzinfo=timezone.utc) + timedelta(seconds=r.randint(0, 8 * 86400))
        klarna = klarna_only or r.random() < KLARNA_SHARE
        status = (
            ("authorized" if created.date() > date(2024, 3, 17) else "shipped")
            if klarna
            else r.choice(["paid", "shipped", "shipped", "shipped", "cancelled"])
        )
        updated = created + timedelta(hours=r.randint(1, 70)) if status != "paid" else created
        body.append(
            [
                f"US-{8_812_000 + r.randint(0, 199_999)}",
                created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                updated.strftime("%Y-%m-%dT%H:%M:%SZ"),
                status,
                "klarna" if klarna else r.choice(["card", "card", "paypal"]),
                round(r.lognormvariate(4.2, 0.6), 2),
                "false" if klarna else "true",
                f"{r.getrandbits(40):010x}",
            ]
        )
    header = [
        "order_id",
        "created_at",
        "updated_at",
        "status",
        "payment_method",
        "total_usd",
        "in_fact_table",
        "customer_hash",
    ]
    return csv(header, body, note="sample of raw.shop_orders LEFT JOIN analytics.fct_orders")


def hourly_csv() -> str:
    r = rng("hourly")
    body: list[list[object]] = []
    for day in (date(2024, 3, 9), date(2024, 3, 10), date(2024, 3, 11)):
        for hour in range(24):
            curve = 0.25 + 0.75 * max(0.0, 1 - abs(hour - 19) / 12)
            raw = round(260 * curve * r.uniform(0.9, 1.1))
            offset = 4 if day >= DST else 5
            local = (hour - offset) % 24
            business_day = day if hour >= offset else day - timedelta(days=1)
            fixed_day = day if hour >= 5 else day - timedelta(days=1)
            body.append([f"{day}T{hour:02d}:00Z", f"{local:02d}:00", raw, business_day, fixed_day])
    header = ["hour_utc", "hour_local_ny", "orders", "business_day_ny", "business_day_etl_fixed_offset"]
    return csv(header, body, note="store_id = 'us'")


def etl_logs(rows: list[DayStore], n_days: int = 5) -> str:
    offsets = {"us": 5, "eu": -1, "uk": 0}  # the ETL's fixed UTC offsets (see etl/common/windows.py)
    lines = []
    for day in days()[-n_days:]:
        stamp = datetime.combine(day, datetime.min.time(), timezone.utc) + timedelta(hours=5, minutes=30)
        r = rng("logs", day)
        pid = r.randint(2000, 9000)
        for store in STORES:
            ds = next(x for x in rows if x.day == day - timedelta(days=1) and x.store == store)
            start = datetime.combine(ds.day, datetime.min.time(), timezone.utc) + timedelta(hours=offsets[store])
            window = f"[{start:%Y-%m-%dT%H:%M}Z, {start + timedelta(days=1):%Y-%m-%dT%H:%M}Z)"

            events = [
                ("INFO", f"extract window={window} source=raw.shop_orders", r.uniform(1, 4)),
                ("INFO", f"fetched {ds.orders:,} rows", r.uniform(3, 14)),
            ]
            if ds.klarna:
                text = f"skipped {ds.klarna:,} orders with status not in LOADABLE_STATUSES (authorized={ds.klarna:,})"
                events.append(("WARN", text, 0.2))
            for batch in range(-(-ds.loaded_orders // 2000)):
                size = min(2000, ds.loaded_orders - batch * 2000)
                events.append(
                    ("DEBUG", f"merge analytics.fct_orders batch {batch + 1}: {size:,} rows", r.uniform(0.8, 2.5))
                )
            loaded = f"loaded {ds.loaded_orders:,} orders net_revenue_usd={ds.reported_net:,.2f}"
            events.append(("INFO", loaded, r.uniform(1, 3)))
            for level, text, pause in events:
                stamp += timedelta(seconds=pause)
                lines.append(
                    f"{stamp:%Y-%m-%dT%H:%M:%S}.{stamp.microsecond // 1000:03d}Z {level:<5} "
                    f"etl.daily_revenue[{pid}] store={store} {text}"
                )
        lines.append(f"{stamp:%Y-%m-%dT%H:%M:%S}.000Z INFO  etl.daily_revenue[{pid}] run finished ok")
    return "\n".join(lines)


def settlements_json(rows: list[DayStore], count: int, seed: str = "settlements") -> str:
    r = rng(seed)
    items = []
    us = {x.day: x for x in rows if x.store == "us" and x.day >= LAUNCH}
    for i in range(count):
        day = LAUNCH + timedelta(days=i % len(us))
        captured = day + timedelta(days=r.randint(1, 3))
        items.append(
            {
                "id": f"stl_{r.getrandbits(48):012x}",
                "order_reference": f"US-{8_812_000 + r.randint(0, 199_999)}",
                "status": "captured" if captured <= date(2024, 3, 20) else "authorized",
                "authorized_at": f"{day}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}Z",
                "captured_at": f"{captured}T{r.randint(8, 20):02d}:{r.randint(0, 59):02d}:00Z"
                if captured <= date(2024, 3, 20)
                else None,
                "amount": {"value": round(r.lognormvariate(4.3, 0.5) * 100), "currency": "USD"},
                "fees": {"value": r.randint(90, 600), "currency": "USD"},
                "payment_method": "pay_later_30" if r.random() < 0.7 else "pay_in_4",
            }
        )
    summary = {
        str(d): {"authorized_count": x.klarna, "authorized_amount_usd": round(x.missing, 2)} for d, x in us.items()
    }
    return json.dumps({"object": "list", "has_more": True, "daily_summary": summary, "data": items}, indent=2)


def fx_json() -> str:
    r = rng("fx")
    rates = {}
    last: dict[str, float] = {}
    for day in days():
        if day.weekday() < 5 or not last:
            last = {
                "EUR": round(0.92 * r.uniform(0.99, 1.01), 5),
                "GBP": round(0.787 * r.uniform(0.99, 1.01), 5),
                "CAD": round(1.35 * r.uniform(0.99, 1.01), 5),
                "SEK": round(10.4 * r.uniform(0.98, 1.02), 4),
            }
        rates[str(day)] = {"base": "USD", "rates": dict(last), "source": "ecb" if day.weekday() < 5 else "carried"}
    return json.dumps({"provider": "fx.acme-internal", "timeseries": rates}, indent=2)


def png_data_url(seed: str, width: int = 48, height: int = 32) -> str:
    """A tiny real PNG (a line chart that drops), stored uncompressed so the bytes never vary."""
    r = rng("png", seed)
    level = [height // 3 + (height // 4 if x > width * 0.6 else 0) + r.randint(-1, 1) for x in range(width)]
    raw = b""
    for y in range(height):
        row = bytearray([0])
        for x in range(width):
            row += b"\x1f\x6f\xd6" if abs(y - level[x]) <= 1 else (b"\xe6\xe6\xe6" if y % 8 == 0 else b"\xff\xff\xff")
        raw += bytes(row)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 0)) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(png).decode()


def shop_api_logs(lines: int) -> str:
    """Checkout logs of the shop API around the Klarna launch."""
    r = rng("shop-api")
    out = []
    t = datetime(2024, 3, 11, 12, 40, tzinfo=timezone.utc)
    for _ in range(lines):
        t += timedelta(seconds=r.randint(1, 25))
        klarna = t >= datetime(2024, 3, 11, 13, 0, 3, tzinfo=timezone.utc) and r.random() < 0.2
        method = "klarna" if klarna else r.choice(["card", "card", "card", "paypal"])
        status = "authorized" if klarna else "paid"
        out.append(
            f"{t:%Y-%m-%dT%H:%M:%S}Z INFO shop-api[checkout] store=us order=US-{8_812_000 + r.randint(0, 199_999)} "
            f"method={method} status={status} total={r.lognormvariate(4.3, 0.5):.2f} latency_ms={r.randint(180, 900)} "
            f"flag.checkout.klarna_pay_later={'on' if t.hour >= 13 else 'off'}"
        )
    return "\n".join(out)
