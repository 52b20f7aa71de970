"""Compare our find_dates with dateparser and Duckling on a fixed bilingual table.

Run:  python benchmarks/dates_compare.py

Every expression has the ISO result expected relative to NOW (2024-05-01 10:00, a
Wednesday), following the conventions documented in context_editor/extract/dates.py
(``next Friday`` / ``下周五`` = Friday of next calendar week, a past month-day rolls to
next year, a date with a clock time is a datetime).  A date expectation is met by any
result on that day (dateparser always returns a datetime); a datetime expectation
needs the same minute.

Systems: our find_dates; dateparser.search.search_dates and dateparser.parse with
RELATIVE_BASE = NOW; Duckling through pyduckling-native-phihos (skipped with a message
when not installed: ``pip install pyduckling-native-phihos==0.3.0``).  Latency is the
median over expressions of each expression's median over REPEATS calls, after a
warm-up call per language.  Results go to stdout and benchmarks/out/dates_compare.json.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from context_editor.extract.dates import find_dates  # noqa: E402

NOW = dt.datetime(2024, 5, 1, 10, 0)
REPEATS = 3
OUT = ROOT / "benchmarks" / "out" / "dates_compare.json"

CASES: list[tuple[str, str, str]] = [
    ("zh", "今天", "2024-05-01"),
    ("zh", "明天", "2024-05-02"),
    ("zh", "后天", "2024-05-03"),
    ("zh", "大后天", "2024-05-04"),
    ("zh", "昨天", "2024-04-30"),
    ("zh", "下周五", "2024-05-10"),
    ("zh", "下星期五", "2024-05-10"),
    ("zh", "这周五", "2024-05-03"),
    ("zh", "周五", "2024-05-03"),
    ("zh", "5月10日", "2024-05-10"),
    ("zh", "5月10号", "2024-05-10"),
    ("zh", "五月十日", "2024-05-10"),
    ("zh", "4月30日", "2025-04-30"),
    ("zh", "2024年5月10日", "2024-05-10"),
    ("zh", "2024/5/10", "2024-05-10"),
    ("zh", "下个月3号", "2024-06-03"),
    ("zh", "月底", "2024-05-31"),
    ("zh", "三天后", "2024-05-04"),
    ("zh", "两周以后", "2024-05-15"),
    ("zh", "后天早上9点", "2024-05-03T09:00"),
    ("zh", "明天下午3点", "2024-05-02T15:00"),
    ("zh", "明天晚上8点半", "2024-05-02T20:30"),
    ("zh", "下周五上午10点", "2024-05-10T10:00"),
    ("zh", "我们打算下周五出发", "2024-05-10"),
    ("zh", "订单MU5101，明天下午3点起飞", "2024-05-02T15:00"),
    ("en", "today", "2024-05-01"),
    ("en", "tomorrow", "2024-05-02"),
    ("en", "the day after tomorrow", "2024-05-03"),
    ("en", "yesterday", "2024-04-30"),
    ("en", "the day before yesterday", "2024-04-29"),
    ("en", "next Friday", "2024-05-10"),
    ("en", "this Friday", "2024-05-03"),
    ("en", "on Friday", "2024-05-03"),
    ("en", "May 10", "2024-05-10"),
    ("en", "10 May", "2024-05-10"),
    ("en", "May 10th", "2024-05-10"),
    ("en", "April 30", "2025-04-30"),
    ("en", "May 10, 2025", "2025-05-10"),
    ("en", "2024-05-10", "2024-05-10"),
    ("en", "5/10/2024", "2024-05-10"),
    ("en", "in 3 days", "2024-05-04"),
    ("en", "in two weeks", "2024-05-15"),
    ("en", "tomorrow at 9am", "2024-05-02T09:00"),
    ("en", "next Monday at 3:30 pm", "2024-05-06T15:30"),
    ("en", "tonight at 8", "2024-05-01T20:00"),
    ("en", "9am tomorrow", "2024-05-02T09:00"),
    ("en", "3pm on Friday", "2024-05-03T15:00"),
    ("en", "I'd like to leave next Friday", "2024-05-10"),
    ("en", "order SKU12345 arrives tomorrow", "2024-05-02"),
]

Value = dt.date | dt.datetime | None
System = Callable[[str, str], Value]


def ours(text: str, lang: str) -> Value:
    found = find_dates(text, NOW)
    return found[0].value if found else None


def dateparser_systems() -> dict[str, System]:
    try:
        import dateparser
        from dateparser.search import search_dates
    except ImportError:  # the only user of dateparser: it is in the optional [bench] extra
        raise SystemExit('dateparser is not installed (fix: pip install "context-editor[bench]")') from None

    # Language auto-detection: with languages=["zh"] dateparser 1.5.0 misreads 5月10日 (parse
    # returns None, search_dates 2024-10-11), so the default scores better and is what callers use.
    settings = {"RELATIVE_BASE": NOW, "PREFER_DATES_FROM": "future"}

    def search(text: str, lang: str) -> Value:
        found = search_dates(text, settings=settings)
        return found[0][1] if found else None

    def parse(text: str, lang: str) -> Value:
        return dateparser.parse(text, settings=settings)

    return {"dateparser.search_dates": search, "dateparser.parse": parse}


def duckling_system() -> dict[str, System]:
    """Duckling's time dimension, reference time NOW in UTC (so values compare naively)."""
    try:
        import duckling
    except ImportError:
        print("duckling: not installed (pip install pyduckling-native-phihos==0.3.0); skipped")
        return {}
    zones = duckling.load_time_zones("/usr/share/zoneinfo")
    ref = duckling.parse_ref_time(zones, "UTC", int(NOW.replace(tzinfo=dt.timezone.utc).timestamp()))
    locales = {lang: duckling.default_locale_lang(duckling.parse_lang(lang.upper())) for lang in ("zh", "en")}
    contexts = {lang: duckling.Context(ref, locale) for lang, locale in locales.items()}
    dims = duckling.parse_dimensions(["time"])

    def parse(text: str, lang: str) -> Value:
        for entity in duckling.parse(text, contexts[lang], dims, False):
            value = entity["value"]
            iso = value.get("value") or value.get("from", {}).get("value")
            if iso:
                when = dt.datetime.fromisoformat(iso).replace(tzinfo=None)
                return when.date() if value.get("grain") in ("day", "week", "month", "year") else when
        return None

    return {"duckling": parse}


def expected_value(iso: str) -> dt.date | dt.datetime:
    return dt.date.fromisoformat(iso) if len(iso) == 10 else dt.datetime.fromisoformat(iso)


def is_correct(got: Value, expected: dt.date | dt.datetime) -> bool:
    if got is None:
        return False
    if isinstance(expected, dt.datetime):
        return isinstance(got, dt.datetime) and got.replace(tzinfo=None, second=0, microsecond=0) == expected
    return (got.date() if isinstance(got, dt.datetime) else got) == expected


def run(name: str, system: System) -> dict:
    for lang in ("zh", "en"):
        system("明天" if lang == "zh" else "tomorrow", lang)  # warm-up: imports, caches, runtimes
    rows, latencies = [], []
    for lang, text, iso in CASES:
        timings = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            got = system(text, lang)
            timings.append(time.perf_counter() - start)
        latencies.append(statistics.median(timings))
        rows.append(
            {
                "lang": lang,
                "text": text,
                "expected": iso,
                "got": got.isoformat() if got is not None else None,
                "correct": is_correct(got, expected_value(iso)),
            }
        )
    per_lang = {lang: sum(r["correct"] for r in rows if r["lang"] == lang) for lang in ("zh", "en")}
    return {
        "system": name,
        "correct": per_lang,
        "total": {lang: sum(1 for r in rows if r["lang"] == lang) for lang in ("zh", "en")},
        "median_latency_ms": statistics.median(latencies) * 1000,
        "cases": rows,
    }


def main() -> None:
    systems: dict[str, System] = {"context_editor.find_dates": ours, **dateparser_systems(), **duckling_system()}
    results = [run(name, system) for name, system in systems.items()]
    header = f"{'system':28} {'zh':>7} {'en':>7} {'all':>7} {'median ms':>10}"
    print(f"now = {NOW.isoformat()} ({NOW:%A}); {len(CASES)} expressions")
    print(header)
    print("-" * len(header))
    for r in results:
        zh, en = r["correct"]["zh"], r["correct"]["en"]
        n_zh, n_en = r["total"]["zh"], r["total"]["en"]
        print(
            f"{r['system']:28} {f'{zh}/{n_zh}':>7} {f'{en}/{n_en}':>7} {f'{zh + en}/{n_zh + n_en}':>7}"
            f" {r['median_latency_ms']:>10.3f}"
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    report = {"now": NOW.isoformat(), "repeats": REPEATS, "results": results}
    OUT.write_text(json.dumps(report, ensure_ascii=False, indent=2))
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
