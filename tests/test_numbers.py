"""Tables and properties for context_editor.extract.numbers (numbers, money, percents, durations, counts)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_editor.extract.numbers import (
    CountMatch,
    DurationMatch,
    duration_in,
    find_durations,
    find_money,
    find_numbers,
    find_people_counts,
    find_percents,
    leftmost_longest,
    normalize_width,
    parse_number,
)

# --------------------------------------------------------------------------- parse_number / find_numbers

WHOLE_NUMBERS = [
    ("2000", 2000),
    ("2,000", 2000),
    ("12,500.50", 12500.5),
    ("3.14", 3.14),
    ("2.0", 2),
    ("０", 0),
    ("２０００", 2000),
    ("１２.５", 12.5),
    ("五千", 5000),
    ("两千五", 2500),
    ("一万二", 12000),
    ("两万五", 25000),
    ("十二", 12),
    ("十", 10),
    ("二十五", 25),
    ("一百零五", 105),
    ("两", 2),
    ("俩", 2),
    ("零", 0),
    ("〇", 0),
    ("二〇二四", 2024),
    ("三亿两千万", 320_000_000),
    ("壹佰贰拾", 120),
    ("一点五", 1.5),
    ("三点一四", 3.14),
    ("1.5万", 15000),
    ("3千", 3000),
    ("2万5", 25000),
    ("1万2千", 12000),
    ("5百万", 5_000_000),
    ("1.5千万", 15_000_000),
    ("two", 2),
    ("twelve", 12),
    ("twenty-five", 25),
    ("twenty five", 25),
    ("a hundred", 100),
    ("an hundred", 100),
    ("two thousand", 2000),
    ("two thousand five hundred", 2500),
    ("two hundred and fifty", 250),
    ("one thousand two hundred and thirty four", 1234),
    ("one and a half thousand", 1500),
    ("two and a half", 2.5),
    ("2 thousand", 2000),
    ("1.5 million", 1_500_000),
    ("Two Thousand", 2000),
    ("2k", 2000),
    ("2K", 2000),
    ("1.1k", 1100),
    ("5m", 5_000_000),
    ("  42  ", 42),
]


@pytest.mark.parametrize(("text", "value"), WHOLE_NUMBERS)
def test_parse_number(text: str, value: int | float) -> None:
    got = parse_number(text)
    assert got == value
    assert type(got) is type(value)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "A123",
        "SKU12345",
        "MU5101",
        "ORDER-2024-001",
        "2024-05-10",
        "5/10",
        "5月10日",
        "9点",
        "9:30",
        "3pm",
        "2000-3000",
        "3 apples",
        "一起",
        "三四",
        "万",
        "千万",
    ],
)
def test_parse_number_rejects_non_numbers(text: str) -> None:
    assert parse_number(text) is None


FOUND_NUMBERS = [
    ("预算2000块", [("2000", 2000)]),
    ("买2,000个，单价12,500.50", [("2,000", 2000), ("12,500.50", 12500.5)]),
    ("预算五千，最多两千五", [("五千", 5000), ("两千五", 2500)]),
    ("about two thousand five hundred people", [("two thousand five hundred", 2500)]),
    ("I want 3 apples and twenty-five pears", [("3", 3), ("twenty-five", 25)]),
    ("2 adults and 1 child", [("2", 2), ("1", 1)]),
    ("list 1,2,3", [("1", 1), ("2", 2), ("3", 3)]),
    ("2000-3000", [("2000", 2000), ("3000", 3000)]),
    ("RMB2000", [("2000", 2000)]),
    ("$2k budget", [("2k", 2000)]),
    ("3days", [("3", 3)]),
    ("iPhone 15", [("15", 15)]),
    ("住三天", [("三", 3)]),
    ("十分钟", [("十", 10)]),
    ("第一次", [("一", 1)]),
    ("２０００元", [("２０００", 2000)]),
]


@pytest.mark.parametrize(("text", "expected"), FOUND_NUMBERS)
def test_find_numbers(text: str, expected: list[tuple[str, int | float]]) -> None:
    assert [(m.text, m.value) for m in find_numbers(text)] == expected


@pytest.mark.parametrize(
    "text",
    [
        # codes and IDs
        "A123",
        "SKU12345",
        "sku-12345",
        "ORDER-2024-001",
        "order_12345",
        "MU5101",
        "CA1234次航班",
        "订单号A20240510",
        "iPhone15",
        "138-1234-5678",
        "010-12345678",
        "#12345",
        "订单号是20240501123456",
        "电话13812345678",
        "邮编100010",
        "order #12345",
        "zip 10001",
        "ID: 4567",
        "v1.2.3",
        "192.168.1.1",
        # dates
        "2024-05-10",
        "2024/5/10",
        "5/10",
        "5/10/2024",
        "2024.5.10",
        "5月10日",
        "5月10号",
        "五月十日",
        "2024年5月10日",
        "２０２４年５月１０日",
        "2024年",
        "十二月",
        "10号出发",
        "周五",
        "星期一",
        "礼拜天",
        # clock times
        "9点",
        "九点",
        "9点30分",
        "八点半",
        "三点一刻",
        "九点三十",
        "9:30",
        "9：30",
        "12:30:45",
        "3pm",
        "9 a.m.",
        "9 o'clock",
        # ordinals
        "the 2nd tier",
        "May 10th",
        # idioms
        "一起去",
        "一下",
        "万一",
        "十分好",
        "三亚",
        "三四天",
        # place names that contain a numeral (the gazetteer in rules/zh/lexicon.yaml)
        "去五道口",
        "爬九华山",
        "七星岩",
    ],
)
def test_find_numbers_ignores_codes_dates_times_idioms(text: str) -> None:
    assert find_numbers(text) == []


def test_find_numbers_around_codes() -> None:
    text = "航班MU5101，3个人，订单ORDER-2024-001，5月10日9:30，预算2000"
    assert [m.text for m in find_numbers(text)] == ["3", "2000"]


def test_find_numbers_spans_index_original_text() -> None:
    text = "总价１２,５００元"
    (m,) = find_numbers(text)
    assert text[m.start : m.end] == m.text == "１２,５００"
    assert m.value == 12500


def test_cn2an_failures_do_not_escape() -> None:
    assert find_numbers("一亿二") == []  # cn2an raises KeyError on this shape
    assert parse_number("十十") is None


# --------------------------------------------------------------------------- money

MONEY = [
    ("预算五千块", [("五千块", 5000, "CNY", None)]),
    ("two thousand dollars", [("two thousand dollars", 2000, "USD", None)]),
    ("1.5万元", [("1.5万元", 15000, "CNY", None)]),
    ("$2k", [("$2k", 2000, "USD", None)]),
    ("2000以内", [("2000以内", 2000, None, "max")]),
    ("预算2000", [("2000", 2000, None, None)]),
    ("人均200左右", [("200", 200, None, None)]),
    ("budget is $1,500", [("$1,500", 1500, "USD", None)]),
    ("不超过2000元", [("不超过2000元", 2000, "CNY", "max")]),
    ("预算大概不超过3000块钱", [("不超过3000块钱", 3000, "CNY", "max")]),
    ("最多5千块", [("最多5千块", 5000, "CNY", "max")]),
    ("2000元以内的酒店", [("2000元以内", 2000, "CNY", "max")]),
    ("3000元内", [("3000元内", 3000, "CNY", "max")]),
    ("五百块封顶", [("五百块封顶", 500, "CNY", "max")]),
    ("2000元以上", [("2000元以上", 2000, "CNY", "min")]),
    ("至少100块", [("至少100块", 100, "CNY", "min")]),
    ("不低于800元", [("不低于800元", 800, "CNY", "min")]),
    ("800元起", [("800元起", 800, "CNY", "min")]),
    ("2000+", [("2000+", 2000, None, "min")]),
    ("under $500", [("under $500", 500, "USD", "max")]),
    ("below 300 euros", [("below 300 euros", 300, "EUR", "max")]),
    ("no more than 200 bucks", [("no more than 200 bucks", 200, "USD", "max")]),
    ("up to €300", [("up to €300", 300, "EUR", "max")]),
    ("at most £40", [("at most £40", 40, "GBP", "max")]),
    ("less than 100 USD", [("less than 100 USD", 100, "USD", "max")]),
    ("within 5000 RMB", [("within 5000 RMB", 5000, "CNY", "max")]),
    ("$300 max", [("$300 max", 300, "USD", "max")]),
    ("at least 100 euros", [("at least 100 euros", 100, "EUR", "min")]),
    ("over $50", [("over $50", 50, "USD", "min")]),
    ("more than 20 pounds", [("more than 20 pounds", 20, "GBP", "min")]),
    ("minimum 1000 CNY", [("minimum 1000 CNY", 1000, "CNY", "min")]),
    ("no less than ¥500", [("no less than ¥500", 500, "CNY", "min")]),
    ("£50", [("£50", 50, "GBP", None)]),
    ("￥300", [("￥300", 300, "CNY", None)]),
    ("¥ 300", [("¥ 300", 300, "CNY", None)]),
    ("RMB2000", [("RMB2000", 2000, "CNY", None)]),
    ("rmb 2000", [("rmb 2000", 2000, "CNY", None)]),
    ("300 USD", [("300 USD", 300, "USD", None)]),
    ("100美元", [("100美元", 100, "USD", None)]),
    ("50美金", [("50美金", 50, "USD", None)]),
    ("200人民币", [("200人民币", 200, "CNY", None)]),
    ("5 bucks", [("5 bucks", 5, "USD", None)]),
    ("a hundred dollars", [("a hundred dollars", 100, "USD", None)]),
    ("two hundred and fifty pounds", [("two hundred and fifty pounds", 250, "GBP", None)]),
    ("我想买个2000块的手机", [("2000块", 2000, "CNY", None)]),
    ("２０００元", [("２０００元", 2000, "CNY", None)]),
    ("2000到3000元", [("2000", 2000, "CNY", "min"), ("3000元", 3000, "CNY", "max")]),
    ("2000元到3000元", [("2000元", 2000, "CNY", "min"), ("3000元", 3000, "CNY", "max")]),
    ("两千到三千块", [("两千", 2000, "CNY", "min"), ("三千块", 3000, "CNY", "max")]),
    ("2000-3000元", [("2000", 2000, "CNY", "min"), ("3000元", 3000, "CNY", "max")]),
    ("预算2000-3000", [("2000", 2000, None, "min"), ("3000", 3000, None, "max")]),
    ("between $200 and $300", [("$200", 200, "USD", "min"), ("$300", 300, "USD", "max")]),
    ("between 200 and 300 dollars", [("200", 200, "USD", "min"), ("300 dollars", 300, "USD", "max")]),
    ("$200-$300", [("$200", 200, "USD", "min"), ("$300", 300, "USD", "max")]),
    ("€100 to €200", [("€100", 100, "EUR", "min"), ("€200", 200, "EUR", "max")]),
    ("100元200元", [("100元", 100, "CNY", None), ("200元", 200, "CNY", None)]),
    # currency words come from the lexicons, one list for finders and rule packs
    ("预算500欧元", [("500欧元", 500, "EUR", None)]),
    ("最多300英镑", [("最多300英镑", 300, "GBP", "max")]),
]


@pytest.mark.parametrize(("text", "expected"), MONEY)
def test_find_money(text: str, expected: list[tuple]) -> None:
    assert [(m.text, m.amount, m.currency, m.bound) for m in find_money(text)] == expected


@pytest.mark.parametrize(
    "text",
    [
        "2000",
        "我要2000个",
        "3天以内",
        "最多3个人",
        "under 5 people",
        "3%以内",
        "3-5天",
        "2000-3000",
        "订单号12345",
        "SKU12345元",
        "MU5101 2000",
        "2024-05-10",
        "5月10日",
        "9点以后",
        "5/10 at 9:30",
        "ORDER-2024-001",
        "at least 128GB",
        "under 5kg",
        "订单号20240501 2000",
    ],
)
def test_find_money_negatives(text: str) -> None:
    assert find_money(text) == []


def test_and_joins_a_range_only_after_between() -> None:
    assert [(m.text, m.bound) for m in find_money("1 and 2 dollars")] == [("2 dollars", None)]


def test_find_money_and_range_in_sentence() -> None:
    found = find_money("酒店2000到3000元，机票不超过$800，另外预算五千块")
    assert [(m.amount, m.currency, m.bound) for m in found] == [
        (2000, "CNY", "min"),
        (3000, "CNY", "max"),
        (800, "USD", "max"),
        (5000, "CNY", None),
    ]


# --------------------------------------------------------------------------- percents

PERCENTS = [
    ("3%", [("3%", 3.0)]),
    ("3％", [("3％", 3.0)]),
    ("3.5 %", [("3.5 %", 3.5)]),
    ("百分之三", [("百分之三", 3.0)]),
    ("百分之3.5", [("百分之3.5", 3.5)]),
    ("百分之二十", [("百分之二十", 20.0)]),
    ("三个点", [("三个点", 3.0)]),
    ("2个百分点", [("2个百分点", 2.0)]),
    ("3 percent", [("3 percent", 3.0)]),
    ("3 per cent", [("3 per cent", 3.0)]),
    ("five percent", [("five percent", 5.0)]),
    ("年化3%以下", [("3%", 3.0)]),
    ("利率3%到5%", [("3%", 3.0), ("5%", 5.0)]),
]


@pytest.mark.parametrize(("text", "expected"), PERCENTS)
def test_find_percents(text: str, expected: list[tuple[str, float]]) -> None:
    found = find_percents(text)
    assert [(m.text, m.value) for m in found] == expected
    assert all(type(m.value) is float for m in found)


@pytest.mark.parametrize("text", ["3", "3点", "百分之", "SKU3%", "5月10日", "percentage"])
def test_find_percents_negatives(text: str) -> None:
    assert find_percents(text) == []


# --------------------------------------------------------------------------- durations

DURATIONS = [
    ("5日游", [("5日游", 5, "day")]),
    ("三年", [("三年", 3, "year")]),
    ("18个月", [("18个月", 18, "month")]),
    ("三个月", [("三个月", 3, "month")]),
    ("three years", [("three years", 3, "year")]),
    ("2 weeks", [("2 weeks", 2, "week")]),
    ("两周", [("两周", 2, "week")]),
    ("两个星期", [("两个星期", 2, "week")]),
    ("半年", [("半年", 6, "month")]),
    ("一年半", [("一年半", 18, "month")]),
    ("半天", [("半天", 12, "hour")]),
    ("半个月", [("半个月", 15, "day")]),
    ("一个半小时", [("一个半小时", 90, "minute")]),
    ("两个半月", [("两个半月", 75, "day")]),
    ("半个小时", [("半个小时", 30, "minute")]),
    ("30分钟", [("30分钟", 30, "minute")]),
    ("3小时", [("3小时", 3, "hour")]),
    ("住三天", [("三天", 3, "day")]),
    ("1.5 days", [("1.5 days", 36, "hour")]),
    ("two and a half hours", [("two and a half hours", 150, "minute")]),
    ("half an hour", [("half an hour", 30, "minute")]),
    ("an hour and a half", [("an hour and a half", 90, "minute")]),
    ("a week", [("a week", 1, "week")]),
    ("3-day trip", [("3-day", 3, "day")]),
    ("10 mins", [("10 mins", 10, "minute")]),
    ("2h", [("2h", 2, "hour")]),
    ("6 months", [("6 months", 6, "month")]),
    ("0.5 week", [("0.5 week", 0.5, "week")]),
    ("玩5天，再住两周", [("5天", 5, "day"), ("两周", 2, "week")]),
]


@pytest.mark.parametrize(("text", "expected"), DURATIONS)
def test_find_durations(text: str, expected: list[tuple]) -> None:
    assert [(m.text, m.value, m.unit) for m in find_durations(text)] == expected


@pytest.mark.parametrize(
    "text",
    ["2024年5月", "2024年", "三月", "5月10日", "周五", "下周五", "三年级", "twice a day", "once a week", "三四天", "MU5101"],
)
def test_find_durations_negatives(text: str) -> None:
    assert find_durations(text) == []


@pytest.mark.parametrize(
    ("value", "unit", "target", "expected"),
    [
        (1, "year", "month", 12.0),
        (1, "year", "day", 360.0),
        (18, "month", "year", 1.5),
        (1, "month", "day", 30.0),
        (2, "week", "day", 14.0),
        (1, "day", "hour", 24.0),
        (90, "minute", "hour", 1.5),
        (3, "day", "day", 3.0),
        (0.5, "week", "day", 3.5),
    ],
)
def test_duration_in(value: int | float, unit: str, target: str, expected: float) -> None:
    got = duration_in(DurationMatch(0, 1, "x", value, unit), target)
    assert got == pytest.approx(expected)
    assert type(got) is float


def test_duration_in_rejects_unknown_unit() -> None:
    with pytest.raises(ValueError, match="fortnight"):
        duration_in(find_durations("三天")[0], "fortnight")


# --------------------------------------------------------------------------- people counts

COUNTS = [
    ("两个人", [("两个人", 2, "people")]),
    ("一个人", [("一个人", 1, "people")]),
    ("3位", [("3位", 3, "people")]),
    ("3位客人", [("3位客人", 3, "people")]),
    ("5名游客", [("5名游客", 5, "people")]),
    ("4人", [("4人", 4, "people")]),
    ("4 people", [("4 people", 4, "people")]),
    ("two adults", [("two adults", 2, "adult")]),
    ("three kids", [("three kids", 3, "child")]),
    ("我们三个", [("我们三个", 3, "people")]),
    ("我们4个人", [("我们4个人", 4, "people")]),
    ("我俩", [("我俩", 2, "people")]),
    ("一家三口", [("一家三口", 3, "people")]),
    ("三口人", [("三口人", 3, "people")]),
    ("the three of us", [("three of us", 3, "people")]),
    ("2 adults and 1 child", [("2 adults and 1 child", 3, "people")]),
    ("two adults, two kids", [("two adults, two kids", 4, "people")]),
    ("2个大人1个小孩", [("2个大人1个小孩", 3, "people")]),
    ("两个大人和一个孩子", [("两个大人和一个孩子", 3, "people")]),
    ("两大一小", [("两大一小", 3, "people")]),
    ("2 adults and 2 adults", [("2 adults and 2 adults", 4, "adult")]),
    ("table for 4 people at 7", [("4 people", 4, "people")]),
]


@pytest.mark.parametrize(("text", "expected"), COUNTS)
def test_find_people_counts(text: str, expected: list[tuple]) -> None:
    assert [(m.text, m.value, m.unit) for m in find_people_counts(text)] == expected


@pytest.mark.parametrize(
    "text",
    ["第3名", "3人间", "3位数", "我们三个月前", "两个", "3个房间", "MU5101人", "5月10日", "SKU12345 people", "1.5人"],
)
def test_find_people_counts_negatives(text: str) -> None:
    assert find_people_counts(text) == []


# --------------------------------------------------------------------------- helpers


def test_normalize_width_keeps_length_and_ideographic_comma() -> None:
    text = "２０２４／５／１０　９：３０，ＳＫＵ"
    norm = normalize_width(text)
    assert len(norm) == len(text)
    assert norm == "2024/5/10 9:30，SKU"


def test_leftmost_longest() -> None:
    spans = [CountMatch(3, 5, "", 1, "people"), CountMatch(0, 2, "", 1, "people"), CountMatch(0, 4, "", 1, "people")]
    assert [(m.start, m.end) for m in leftmost_longest(spans)] == [(0, 4)]


def test_matches_are_frozen() -> None:
    (m,) = find_numbers("42")
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.value = 1  # type: ignore[misc]


# --------------------------------------------------------------------------- properties

FINDERS = [find_numbers, find_money, find_percents, find_durations, find_people_counts]

# Fragments that exercise the grammar, mixed with arbitrary (surrogate-free) text.
FRAGMENTS = [
    "2,000", "12.5", "２０００", "五千", "两千五", "一万二", "1.5万", "十", "点", "三点一四", "twenty-five",
    "two thousand", "and a half", " ", "-", "/", ":", "%", "元", "块", "$", "¥", "以内", "以上", "到", "under",
    "between", "and", "个", "人", "位", "半", "年", "月", "日", "号", "天", "周", "小时", "days", "people",
    "adults", "A123", "MU5101", "ORDER-2024-001", "2024-05-10", "5/10", "9:30", "9点", "我们", "一家", "大",
    "小", "k", "m", "百分之", "percent", "\x00", "\n", "\u200b", "\U0001f600",
]  # fmt: skip
texts = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=80),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=3)), max_size=25).map("".join),
)


@pytest.mark.parametrize("finder", FINDERS, ids=lambda f: f.__name__)
@settings(max_examples=300, deadline=None)
@given(text=texts)
def test_finders_spans_sorted_and_never_raise(finder, text: str) -> None:
    found = finder(text)
    for m in found:
        assert 0 <= m.start < m.end <= len(text)
        assert text[m.start : m.end] == m.text
    for a, b in zip(found, found[1:]):
        assert a.end <= b.start


@settings(max_examples=300, deadline=None)
@given(text=texts)
def test_parse_number_never_raises(text: str) -> None:
    value = parse_number(text)
    assert value is None or isinstance(value, (int, float))


@settings(max_examples=200, deadline=None)
@given(text=texts)
def test_value_types(text: str) -> None:
    assert all(isinstance(m.value, (int, float)) and not isinstance(m.value, bool) for m in find_numbers(text))
    money = find_money(text)
    assert all(m.currency in (None, "CNY", "USD", "EUR", "GBP") and m.bound in (None, "max", "min") for m in money)
    assert all(isinstance(m.value, float) for m in find_percents(text))
    assert all(m.unit in ("minute", "hour", "day", "week", "month", "year") for m in find_durations(text))
    assert all(isinstance(m.value, int) and m.value > 0 for m in find_people_counts(text))


@settings(max_examples=200, deadline=None)
@given(n=st.integers(min_value=0, max_value=10**12))
def test_arabic_round_trip(n: int) -> None:
    assert parse_number(str(n)) == n
    assert parse_number(f"{n:,}") == n
    assert parse_number(str(n).translate({ord(c): ord(c) + 0xFEE0 for c in "0123456789"})) == n


@settings(max_examples=200, deadline=None)
@given(n=st.integers(min_value=0, max_value=99_999_999))
def test_chinese_round_trip(n: int) -> None:
    import cn2an

    assert parse_number(cn2an.an2cn(n)) == n
