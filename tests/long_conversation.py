"""A 200-round Chinese travel conversation whose decisive constraints come in rounds 1–3.

Built deterministically from a pool of ordinary planning talk (hotels, weather, food, visas,
luggage) that never repeats the constraints, so only a context that remembers can hold them.
Shared by the long-conversation test and the render benchmark.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

OPENING = [
    ("user", "你好，我想下周五从上海去三亚玩，不要红眼航班"),
    ("assistant", "好的，下周五上海到三亚，避开红眼航班。请问预算大概多少？"),
    ("user", "机票加酒店预算5000元以内"),
    ("assistant", "明白，预算5000元以内。几位出行？"),
    ("user", "我们两个人"),
    ("assistant", "好的，两位。我先帮您看看三亚的情况。"),
]

POOL = [
    ("user", "三亚这几天天气怎么样？"),
    ("assistant", "最近三亚晴到多云，气温26到31度，紫外线较强，注意防晒。"),
    ("user", "亚龙湾和三亚湾哪个海滩更适合拍照？"),
    ("assistant", "亚龙湾水更清，沙子更细；三亚湾看日落更方便，人也多一些。"),
    ("user", "附近有什么好吃的海鲜排档吗？"),
    ("assistant", "第一市场的海鲜加工店很受欢迎，建议先买海鲜再找店加工，记得问清加工费。"),
    ("user", "需要带什么证件吗？"),
    ("assistant", "国内出行带好身份证即可，儿童可带户口本。"),
    ("user", "酒店离机场远吗？"),
    ("assistant", "从凤凰机场到亚龙湾大约40分钟车程，到三亚湾大约20分钟。"),
    ("user", "行李可以带几件？"),
    ("assistant", "经济舱一般可免费托运一件20公斤的行李，具体以航司规定为准。"),
    ("user", "蜈支洲岛值得去吗？"),
    ("assistant", "值得，蜈支洲岛的潜水和海上项目很丰富，建议提前在网上买票。"),
    ("user", "那边打车方便吗？"),
    ("assistant", "市区打车比较方便，去景区可以考虑包车，一天大约400到600元。"),
    ("user", "好的，谢谢"),
    ("assistant", "不客气，还有什么想了解的吗？"),
    ("user", "南山寺要门票吗？"),
    ("assistant", "南山文化旅游区需要门票，成人价格约129元，建议早上去人少。"),
]


def long_travel_conversation(rounds: int = 200) -> list[dict]:
    """`rounds` user rounds: the opening (3 rounds), then pool talk, one user + one assistant message per round."""
    msgs = list(OPENING)
    i = 0
    while sum(1 for r, _ in msgs if r == "user") < rounds:
        msgs.append(POOL[i % len(POOL)])
        msgs.append(POOL[(i + 1) % len(POOL)])
        i += 2
    start = datetime(2024, 5, 1, 9, 0, tzinfo=timezone(timedelta(hours=8)))
    return [{"role": r, "content": c, "timestamp": (start + timedelta(minutes=i)).isoformat()} for i, (r, c) in enumerate(msgs)]
