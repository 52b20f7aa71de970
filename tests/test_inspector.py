"""The session inspector in a real headless browser (Debian's chromium + chromium-driver, selenium).

A 40-round session is ingested through the API; the browser logs in with a key, moves the round
slider, and reads the state table: the corrected colour shows its old value at an earlier
round. The screenshot is kept (tests/artifacts/, and docs/inspector.png when
CONTEXT_EDITOR_UPDATE_DOCS=1)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import httpx
import pytest

from conftest import ROOT
from service_server import create_key, running_service

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,1000"]
CORRECTED_AT = 25


def forty_rounds() -> list[dict]:
    msgs = [{"role": "user", "content": "我想买蓝牙耳机，要黑色，预算2000以内", "id": "u1"},
            {"role": "assistant", "content": "好的，推荐Sony WH-1000XM5。", "id": "a1"}]
    for r in range(2, 41):
        text = "改成红色吧" if r == CORRECTED_AT else "嗯，我再看看"
        msgs += [{"role": "user", "content": text, "id": f"u{r}"}, {"role": "assistant", "content": "好的。", "id": f"a{r}"}]
    return [{**m, "timestamp": "2024-05-01T10:00:00+08:00"} for m in msgs]


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and DRIVER):
        if os.environ.get("CI"):
            pytest.fail("chromium and chromedriver are required in CI (.ci/run installs them)")
        pytest.skip("apt-get install chromium chromium-driver to run the browser test")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="ce-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_inspector_slider_shows_the_old_value_before_the_correction(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    store = f"sqlite:///{tmp_path / 'ui.db'}"
    writer, auditor = create_key(store, "acme", "writer"), create_key(store, "acme", "auditor")
    with running_service(store) as base:
        r = httpx.post(f"{base}/v1/sessions/long-40/messages", headers={"Authorization": f"Bearer {writer}"},
                       json={"domain": "ecommerce", "messages": forty_rounds()}, timeout=120)
        assert r.status_code == 200 and r.json()["state"]["round"] == 40, r.text

        wait = WebDriverWait(browser, 30)
        browser.get(f"{base}/ui/sessions/long-40")  # not logged in: sent to the login form
        wait.until(ec.presence_of_element_located((By.ID, "key")))
        browser.find_element(By.ID, "key").send_keys("ce_wrong_key")
        browser.find_element(By.ID, "login").click()
        assert "unknown API key" in wait.until(ec.presence_of_element_located((By.ID, "login-error"))).text
        browser.find_element(By.ID, "key").send_keys(auditor)
        browser.find_element(By.ID, "login").click()
        wait.until(ec.presence_of_element_located((By.ID, "round")))
        assert browser.current_url.endswith("/ui/sessions/long-40")
        assert "both hash chains intact" in browser.find_element(By.ID, "verdict").text

        def colour() -> str:
            return browser.find_element(By.CSS_SELECTOR, '#state tr[data-field="color"] .value').text

        assert colour() == "red"
        slider = browser.find_element(By.ID, "round")
        slider.send_keys(Keys.HOME)
        for _ in range(CORRECTED_AT - 1):
            slider.send_keys(Keys.ARROW_RIGHT)
        assert browser.find_element(By.ID, "round-label").text == str(CORRECTED_AT - 1)
        assert colour() == "black"  # the old value, before the correction
        later = browser.find_elements(By.CSS_SELECTOR, ".msg.later")
        assert len(later) == 2 * (40 - CORRECTED_AT + 1)  # messages after the chosen round are dimmed
        slider.send_keys(Keys.ARROW_RIGHT)
        assert colour() == "red"

        marks = browser.find_elements(By.CSS_SELECTOR, 'mark[data-field="color"]')
        assert [m.text for m in marks] == ["黑色", "红色"]
        assert marks[0].get_attribute("title") == "color = black (accepted) via enum:color, confidence 0.9, round 1"
        history = browser.find_element(By.CSS_SELECTOR, 'table.history[data-field="color"]').text
        assert "correction" in history and "initial" in history

        slider.send_keys(Keys.ARROW_LEFT)  # back to the round before the correction, and render there
        # 250: tight enough that something is dropped, loose enough that the optional colour field
        # stays (under main's assembly order optional fields give way before summary facts).
        browser.find_element(By.ID, "budget").send_keys("250")
        browser.find_element(By.ID, "render").click()
        summary = wait.until(lambda d: d.find_element(By.ID, "ctx-summary").text if "tokens of 250" in
                             d.find_element(By.ID, "ctx-summary").text else False)
        xml = browser.find_element(By.ID, "ctx-xml").text
        assert "dropped:" in summary and xml.startswith(
            f'<context action="recommend_product" domain="ecommerce" round="{CORRECTED_AT - 1}" tokens="')
        assert '<field name="color" round="1" source="initial">black</field>' in xml

        artifacts = ROOT / "tests" / "artifacts"
        artifacts.mkdir(exist_ok=True)
        browser.save_screenshot(str(artifacts / "inspector.png"))
        if os.environ.get("CONTEXT_EDITOR_UPDATE_DOCS") == "1":
            shutil.copy(artifacts / "inspector.png", ROOT / "docs" / "inspector.png")

        browser.delete_all_cookies()
        browser.get(f"{base}/ui/sessions")
        wait.until(ec.presence_of_element_located((By.ID, "key")))  # logged out: back to the form
        assert httpx.get(f"{base}/ui/sessions/long-40", headers={"Authorization": f"Bearer {writer}"}).status_code == 200
        other = create_key(store, "globex", "auditor")
        page = httpx.get(f"{base}/ui/sessions/long-40", headers={"Authorization": f"Bearer {other}"})
        assert page.status_code == 404 and page.json()["error"]["code"] == "CE501"
