"""Tables and properties for context_editor.extract.dates.find_dates."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_editor.extract.dates import DateMatch, find_dates

NOW = dt.datetime(2024, 5, 1, 10, 0)  # a Wednesday
FRIDAY = dt.datetime(2024, 5, 3, 18, 30)


def d(*args: int) -> dt.date:
    return dt.date(*args)


def t(*args: int) -> dt.datetime:
    return dt.datetime(*args)


ZH = [
    ("今天", "今天", d(2024, 5, 1)),
    ("明天", "明天", d(2024, 5, 2)),
    ("后天", "后天", d(2024, 5, 3)),
    ("大后天", "大后天", d(2024, 5, 4)),
    ("昨天", "昨天", d(2024, 4, 30)),
    ("前天", "前天", d(2024, 4, 29)),
    ("我们明天出发", "明天", d(2024, 5, 2)),
    ("下周五", "下周五", d(2024, 5, 10)),
    ("下星期五", "下星期五", d(2024, 5, 10)),
    ("下礼拜五", "下礼拜五", d(2024, 5, 10)),
    ("下个星期一", "下个星期一", d(2024, 5, 6)),
    ("下下周五", "下下周五", d(2024, 5, 17)),
    ("上周五", "上周五", d(2024, 4, 26)),
    ("这周五", "这周五", d(2024, 5, 3)),
    ("本周五", "本周五", d(2024, 5, 3)),
    ("周五", "周五", d(2024, 5, 3)),
    ("周三", "周三", d(2024, 5, 1)),
    ("周二", "周二", d(2024, 5, 7)),
    ("星期天", "星期天", d(2024, 5, 5)),
    ("周末", "周末", d(2024, 5, 4)),
    ("5月10日", "5月10日", d(2024, 5, 10)),
    ("5月10号", "5月10号", d(2024, 5, 10)),
    ("5月10", "5月10", d(2024, 5, 10)),
    ("五月十日", "五月十日", d(2024, 5, 10)),
    ("十二月三十一号", "十二月三十一号", d(2024, 12, 31)),
    ("4月30日", "4月30日", d(2025, 4, 30)),
    ("5月1日", "5月1日", d(2024, 5, 1)),
    ("2月29日", "2月29日", d(2028, 2, 29)),
    ("2024年5月10日", "2024年5月10日", d(2024, 5, 10)),
    ("2023年5月10日", "2023年5月10日", d(2023, 5, 10)),
    ("二〇二四年五月十日", "二〇二四年五月十日", d(2024, 5, 10)),
    ("明年5月10日", "明年5月10日", d(2025, 5, 10)),
    ("２０２４年５月１０日", "２０２４年５月１０日", d(2024, 5, 10)),
    ("2024-05-10", "2024-05-10", d(2024, 5, 10)),
    ("2024/5/10", "2024/5/10", d(2024, 5, 10)),
    ("2024.5.10", "2024.5.10", d(2024, 5, 10)),
    ("下个月3号", "下个月3号", d(2024, 6, 3)),
    ("下月3号", "下月3号", d(2024, 6, 3)),
    ("本月15日", "本月15日", d(2024, 5, 15)),
    ("月底", "月底", d(2024, 5, 31)),
    ("下个月底", "下个月底", d(2024, 6, 30)),
    ("5月底", "5月底", d(2024, 5, 31)),
    ("10号", "10号", d(2024, 5, 10)),
    ("1号", "1号", d(2024, 5, 1)),
    ("31号", "31号", d(2024, 5, 31)),
    ("三天后", "三天后", d(2024, 5, 4)),
    ("两周以后", "两周以后", d(2024, 5, 15)),
    ("后天早上9点", "后天早上9点", t(2024, 5, 3, 9, 0)),
    ("明天上午9点", "明天上午9点", t(2024, 5, 2, 9, 0)),
    ("明天下午3点", "明天下午3点", t(2024, 5, 2, 15, 0)),
    ("明天晚上8点半", "明天晚上8点半", t(2024, 5, 2, 20, 30)),
    ("明天中午12点", "明天中午12点", t(2024, 5, 2, 12, 0)),
    ("明天中午1点", "明天中午1点", t(2024, 5, 2, 13, 0)),
    ("明天晚上12点", "明天晚上12点", t(2024, 5, 3, 0, 0)),
    ("明天凌晨2点", "明天凌晨2点", t(2024, 5, 2, 2, 0)),
    ("今晚8点", "今晚8点", t(2024, 5, 1, 20, 0)),
    ("明早7点", "明早7点", t(2024, 5, 2, 7, 0)),
    ("明天9:30", "明天9:30", t(2024, 5, 2, 9, 30)),
    ("明天下午3:30", "明天下午3:30", t(2024, 5, 2, 15, 30)),
    ("明天9点30分", "明天9点30分", t(2024, 5, 2, 9, 30)),
    ("明天九点一刻", "明天九点一刻", t(2024, 5, 2, 9, 15)),
    ("明天两点", "明天两点", t(2024, 5, 2, 2, 0)),
    ("明天的下午三点", "明天的下午三点", t(2024, 5, 2, 15, 0)),
    ("下周五下午3点", "下周五下午3点", t(2024, 5, 10, 15, 0)),
    ("5月10日晚上8点", "5月10日晚上8点", t(2024, 5, 10, 20, 0)),
    ("下午3点", "下午3点", t(2024, 5, 1, 15, 0)),
    ("早上9点", "早上9点", t(2024, 5, 2, 9, 0)),
    ("9点", "9点", t(2024, 5, 2, 9, 0)),
    ("10点", "10点", t(2024, 5, 1, 10, 0)),
    ("9:30", "9:30", t(2024, 5, 2, 9, 30)),
    ("晚上八点半", "晚上八点半", t(2024, 5, 1, 20, 30)),
]

EN = [
    ("today", "today", d(2024, 5, 1)),
    ("Tomorrow", "Tomorrow", d(2024, 5, 2)),
    ("tmr", "tmr", d(2024, 5, 2)),
    ("the day after tomorrow", "the day after tomorrow", d(2024, 5, 3)),
    ("yesterday", "yesterday", d(2024, 4, 30)),
    ("the day before yesterday", "the day before yesterday", d(2024, 4, 29)),
    ("next Friday", "next Friday", d(2024, 5, 10)),
    ("next monday", "next monday", d(2024, 5, 6)),
    ("last Friday", "last Friday", d(2024, 4, 26)),
    ("this Friday", "this Friday", d(2024, 5, 3)),
    ("on Friday", "on Friday", d(2024, 5, 3)),
    ("Friday", "Friday", d(2024, 5, 3)),
    ("Fri", "Fri", d(2024, 5, 3)),
    ("this Wednesday", "this Wednesday", d(2024, 5, 1)),
    ("next weekend", "next weekend", d(2024, 5, 11)),
    ("May 10", "May 10", d(2024, 5, 10)),
    ("May 10th", "May 10th", d(2024, 5, 10)),
    ("10 May", "10 May", d(2024, 5, 10)),
    ("10th of May", "10th of May", d(2024, 5, 10)),
    ("May 10, 2025", "May 10, 2025", d(2025, 5, 10)),
    ("Sept 3", "Sept 3", d(2024, 9, 3)),
    ("Jan. 5", "Jan. 5", d(2025, 1, 5)),
    ("April 30", "April 30", d(2025, 4, 30)),
    ("2024-05-10", "2024-05-10", d(2024, 5, 10)),
    ("5/10/2024", "5/10/2024", d(2024, 5, 10)),
    ("5/10/24", "5/10/24", d(2024, 5, 10)),
    ("5/10", "5/10", d(2024, 5, 10)),
    ("in 3 days", "in 3 days", d(2024, 5, 4)),
    ("in two weeks", "in two weeks", d(2024, 5, 15)),
    ("in a week", "in a week", d(2024, 5, 8)),
    ("3 days from now", "3 days from now", d(2024, 5, 4)),
    ("tomorrow at 9am", "tomorrow at 9am", t(2024, 5, 2, 9, 0)),
    ("next Monday at 3:30 pm", "next Monday at 3:30 pm", t(2024, 5, 6, 15, 30)),
    ("tomorrow at 9", "tomorrow at 9", t(2024, 5, 2, 9, 0)),
    ("tomorrow at noon", "tomorrow at noon", t(2024, 5, 2, 12, 0)),
    ("tomorrow at 12am", "tomorrow at 12am", t(2024, 5, 2, 0, 0)),
    ("tomorrow evening at 8", "tomorrow evening at 8", t(2024, 5, 2, 20, 0)),
    ("tomorrow at 8 in the evening", "tomorrow at 8 in the evening", t(2024, 5, 2, 20, 0)),
    ("tonight at 8", "tonight at 8", t(2024, 5, 1, 20, 0)),
    ("9am tomorrow", "9am tomorrow", t(2024, 5, 2, 9, 0)),
    ("3pm on Friday", "3pm on Friday", t(2024, 5, 3, 15, 0)),
    ("May 10 at 9 a.m.", "May 10 at 9 a.m.", t(2024, 5, 10, 9, 0)),
    ("Friday, 3pm", "Friday, 3pm", t(2024, 5, 3, 15, 0)),
    ("3pm", "3pm", t(2024, 5, 1, 15, 0)),
    ("9 o'clock", "9 o'clock", t(2024, 5, 2, 9, 0)),
    ("at 11:45", "11:45", t(2024, 5, 1, 11, 45)),
]


@pytest.mark.parametrize(("text", "span_text", "value"), ZH + EN)
def test_find_dates_single(text: str, span_text: str, value: dt.date) -> None:
    (m,) = find_dates(text, NOW)
    assert m.text == span_text
    assert m.value == value
    assert type(m.value) is type(value)
    assert m.grain == ("minute" if isinstance(value, dt.datetime) else "day")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("周五", d(2024, 5, 3)),  # today is Friday: the coming Friday is today
        ("this Friday", d(2024, 5, 3)),
        ("下周五", d(2024, 5, 10)),
        ("next Friday", d(2024, 5, 10)),
        ("周四", d(2024, 5, 9)),
        ("下周一", d(2024, 5, 6)),
        ("3号", d(2024, 5, 3)),
        ("2号", d(2024, 6, 2)),
        ("6点", t(2024, 5, 4, 6, 0)),
        ("晚上7点", t(2024, 5, 3, 19, 0)),
    ],
)
def test_relative_to_a_friday_evening(text: str, value: dt.date) -> None:
    assert [m.value for m in find_dates(text, FRIDAY)] == [value]


def test_day_of_month_skips_short_months() -> None:
    (m,) = find_dates("31号", dt.datetime(2024, 6, 5, 9, 0))
    assert m.value == d(2024, 7, 31)


def test_several_dates_in_one_message() -> None:
    text = "我想下周五出发，5月20日回来，航班MU5101，后天早上9点前确认"
    assert [(m.text, m.value) for m in find_dates(text, NOW)] == [
        ("下周五", d(2024, 5, 10)),
        ("5月20日", d(2024, 5, 20)),
        ("后天早上9点", t(2024, 5, 3, 9, 0)),
    ]
    text = "Leaving next Friday at 9:30 am, back on May 20; order SKU12345, flight MU5101."
    assert [(m.text, m.value) for m in find_dates(text, NOW)] == [
        ("next Friday at 9:30 am", t(2024, 5, 10, 9, 30)),
        ("May 20", d(2024, 5, 20)),
    ]


def test_timezone_of_now_is_kept() -> None:
    tz = dt.timezone(dt.timedelta(hours=8))
    (m,) = find_dates("明天早上9点", NOW.replace(tzinfo=tz))
    assert m.value == dt.datetime(2024, 5, 2, 9, 0, tzinfo=tz)


@pytest.mark.parametrize(
    "text",
    [
        "MU5101",
        "CA1234",
        "SKU12345",
        "A5/10",
        "ORDER-2024-001",
        "ORDER-2024-05-10",
        "2024-05-10-001",
        "订单号20240510123",
        "20240510",
        "5101",
        "1.2.3",
        "3.5",
        "3号线",
        "5号楼",
        "2月30日",
        "13/45/2024",
        "25:00",
        "便宜一点",
        "两点建议",
        "三点一四",
        "at 9",
        "may I come",
        "sun is out",
        "May",
        "一月",
        "9 amazing",
        "3 days",
    ],
)
def test_not_dates(text: str) -> None:
    assert find_dates(text, NOW) == []


def test_result_depends_only_on_now() -> None:
    text = "下周五下午3点 or tomorrow at 9am, 5月10日"
    assert find_dates(text, NOW) == find_dates(text, NOW)
    later = find_dates(text, NOW + dt.timedelta(days=7))
    assert [m.value for m in later] != [m.value for m in find_dates(text, NOW)]


# --------------------------------------------------------------------------- properties

FRAGMENTS = [
    "今天", "明天", "后天", "下", "周", "星期", "五", "月", "日", "号", "年", "底", "点", "半", "早上", "下午",
    "晚上", "2024", "5", "10", "12", "-", "/", ".", ":", "30", "am", "pm", " ", "at", "on", "next", "this",
    "Friday", "Fri", "May", "10th", "of", "in", "days", "weeks", "tomorrow", "tonight", "noon", "o'clock",
    "MU5101", "SKU12345", "\x00", "\n", "\U0001f600", "２", "：",
]  # fmt: skip
texts = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=80),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=3)), max_size=25).map("".join),
)
nows = st.one_of(
    st.just(NOW),
    st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31, 23, 59)),
    st.datetimes(timezones=st.just(dt.timezone(dt.timedelta(hours=-5)))),
)


@settings(max_examples=400, deadline=None)
@given(text=texts, now=nows)
def test_find_dates_spans_sorted_and_never_raise(text: str, now: dt.datetime) -> None:
    found = find_dates(text, now)
    for m in found:
        assert isinstance(m, DateMatch)
        assert 0 <= m.start < m.end <= len(text)
        assert text[m.start : m.end] == m.text
        assert m.grain == ("minute" if isinstance(m.value, dt.datetime) else "day")
        if isinstance(m.value, dt.datetime):
            assert m.value.tzinfo == now.tzinfo
    for a, b in zip(found, found[1:]):
        assert a.end <= b.start
