#!/usr/bin/python3
"""The operator console in a real browser: Debian's headless Chromium driven by
Selenium (python3-selenium) against real sagad and example-services processes.

  /usr/bin/python3 tests/browser/console_test.py --sagad build/sagad \
      --services build/example-services [--screenshots DIR]

Waits on conditions with deadlines (WebDriverWait), never on sleeps.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing"))
from live import OPERATOR, VIEWER, Sandbox, http  # noqa: E402

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

ARGS = None
AXE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "node_modules", "axe-core",
                   "axe.min.js")
DESKTOP, PHONE = (1280, 800), (390, 844)
INCIDENT = {"title": "Phishing", "severity": "high", "host": "laptop-7", "user": "bob",
            "email": "bob@example.com"}
ORDER = {"sku": "SKU-1", "qty": 2, "amount": 4200, "currency": "EUR", "customer": "c-9",
         "address": "1 Main St"}


class Console(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.box = Sandbox(ARGS.sagad, ARGS.services, "sagad-console-")
        cls.port, cls.es_port = cls.box.port, cls.box.es_port
        opts = webdriver.ChromeOptions()
        opts.binary_location = "/usr/bin/chromium"
        for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                  "--window-size=1280,800"):
            opts.add_argument(a)
        cls.driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
        cls.driver.set_window_size(*DESKTOP)
        if not os.path.exists(AXE):
            raise RuntimeError("axe-core is missing: run 'npm ci' in tests/ (tests/run_tests.sh does)")
        with open(AXE) as f:
            cls.axe_source = f.read()
        cls.base = "http://127.0.0.1:%d/ui/" % cls.port

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        cls.box.close()

    # ---- helpers ----
    def wait(self, cond, timeout=15, what=""):
        # Pages re-render their data every 2 s: an element found a moment ago
        # may be gone; look again.
        return WebDriverWait(self.driver, timeout, poll_frequency=0.02,
                             ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda d: cond(d), message=what)

    def css(self, selector):
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def text_of(self, selector):
        # Read in the page, in one step: the element may be re-rendered
        # between finding it and reading it from here.
        return self.driver.execute_script(
            "const e = document.querySelector(arguments[0]); return e ? e.innerText.trim() : '';",
            selector)

    def sign_in(self, token):
        d = self.driver
        d.get(self.base)
        d.execute_script("sessionStorage.clear()")
        self.go("#/inbox")
        self.wait(lambda d: self.css("#token"), what="sign-in form")
        self.css("#token")[0].send_keys(token)
        self.css("#signin-button")[0].click()
        self.wait(lambda d: self.css("#nav:not([hidden])"), what="signed in")

    def go(self, fragment):
        # A fresh load each time (a change of the fragment alone would not
        # reload): what the operator sees after opening the link.
        self.driver.get("about:blank")
        self.driver.get(self.base + fragment)

    def submit(self, saga, inp, wait=10):
        status, body = http(self.port, "POST", "/v1/sagas/%s/instances?wait=%d" % (saga, wait),
                            {"input": inp}, OPERATOR)
        self.assertIn(status, (200, 201), body)
        return body

    def instance_status(self, id_):
        return http(self.port, "GET", "/v1/instances/" + id_, token=OPERATOR)[1]["status"]

    def shot(self, name, scroll_to=None):
        """A screenshot of the page at desktop size, and one at phone size."""
        if not ARGS.screenshots:
            return
        os.makedirs(ARGS.screenshots, exist_ok=True)
        scroll = "const e = document.querySelector(arguments[0]); if (e) e.scrollIntoView();"
        if scroll_to:
            self.driver.execute_script(scroll, scroll_to)
        self.driver.save_screenshot(os.path.join(ARGS.screenshots, name))
        self.driver.set_window_size(*PHONE)
        try:
            self.wait(lambda d: d.execute_script("return window.innerWidth") <= PHONE[0])
            if scroll_to:
                self.driver.execute_script(scroll, scroll_to)
            self.driver.save_screenshot(os.path.join(ARGS.screenshots,
                                                     name.replace(".png", "-phone.png")))
        finally:
            self.driver.set_window_size(*DESKTOP)

    def axe(self, what):
        """axe-core on the page as it is: no critical or serious violation."""
        self.driver.execute_script(self.axe_source)
        found = self.driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            axe.run(document).then(r => done(r.violations
              .filter(v => v.impact === 'critical' || v.impact === 'serious')
              .map(v => v.impact + ' ' + v.id + ': ' + v.help + ' at ' +
                   v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', '))),
              e => done(['axe failed: ' + e]));""")
        self.assertEqual(found, [], what)

    def no_sideways_scroll(self, what):
        widths = self.driver.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        self.assertLessEqual(widths[0], widths[1], what + ": the page is wider than the screen")

    def approval_card(self, key):
        sel = '.approval[data-key="%s"]' % key
        self.wait(lambda d: self.css(sel), what="approval card " + key)
        return self.css(sel)[0]

    # ---- tests (run in name order) ----
    def test_1_a_wrong_token_is_refused_and_the_operator_signs_in(self):
        d = self.driver
        d.get(self.base)
        d.execute_script("sessionStorage.clear()")
        self.go("#/inbox")
        self.wait(lambda d: self.css("#token"))
        self.css("#token")[0].send_keys("not-a-token")
        self.css("#signin-button")[0].click()
        self.wait(lambda d: "Wrong token" in self.text_of("#signin-message"), what="wrong token said")
        self.axe("sign-in page")
        # The icon is served (no 404 in the console).
        icon = self.css('link[rel="icon"]')[0].get_attribute("href")
        self.assertEqual(urllib.request.urlopen(icon).status, 200)
        self.sign_in(OPERATOR)
        self.assertIn("alice (operator)", self.text_of("#who"))
        # The page itself allows no inline script.
        csp = urllib.request.urlopen(self.base).headers["Content-Security-Policy"]
        self.assertIn("script-src 'self'", csp)
        self.assertNotIn("unsafe-inline", csp)

    def test_2_the_inbox_shows_the_exact_request_and_approving_completes(self):
        self.sign_in(OPERATOR)
        inst = self.submit("incident_response", INCIDENT)
        self.assertEqual(inst["status"], "AWAITING_APPROVAL")
        key = inst["id"] + ":notify_user"
        self.go("#/inbox")
        card = self.approval_card(key)
        self.assertIn("POST http://127.0.0.1:%d/messages" % self.es_port, card.find_element(By.CSS_SELECTOR, ".url").text)
        self.assertEqual(card.find_element(By.CSS_SELECTOR, ".idem-key").text, key)
        self.assertIn("bob@example.com", card.find_element(By.CSS_SELECTOR, ".body").text)
        self.axe("inbox with an approval")
        self.shot("console-inbox.png")
        card.find_element(By.CSS_SELECTOR, ".comment").send_keys("confirmed with the SOC")
        card.find_element(By.CSS_SELECTOR, ".approve").click()
        self.wait(lambda d: "200 OK" in card.text, what="approval answered")
        # Approving again is answered verbatim by the server, not hidden.
        self.go("#/instance/" + inst["id"])
        self.wait(lambda d: self.text_of("#instance-status") == "COMPLETED", what="COMPLETED")
        row = self.text_of('#steps-body tr[data-step="notify_user"] .approval')
        self.assertIn("approved by alice: confirmed with the SOC", row)
        self.wait(lambda d: self.css('#timeline li[data-type="saga_completed"]'), what="timeline")
        self.axe("a completed instance")
        self.shot("console-instance.png")

    def test_3_rejecting_compensates_in_reverse_order_on_the_timeline(self):
        self.sign_in(OPERATOR)
        inst = self.submit("incident_response", INCIDENT)
        self.go("#/inbox")
        card = self.approval_card(inst["id"] + ":notify_user")
        card.find_element(By.CSS_SELECTOR, ".reason").send_keys("false positive")
        card.find_element(By.CSS_SELECTOR, ".reject").click()
        self.wait(lambda d: "200 OK" in card.text, what="rejection answered")
        self.go("#/instance/" + inst["id"])
        self.wait(lambda d: self.text_of("#instance-status") == "COMPENSATED", what="COMPENSATED")
        self.wait(lambda d: len(self.css('#timeline li[data-type="compensated"]')) == 3)
        order = self.driver.execute_script(
            "return [...document.querySelectorAll('#timeline li[data-type=\"compensated\"]')]"
            ".map(li => li.dataset.step);")
        self.assertEqual(order, ["disable_account", "isolate_host", "create_ticket"])

    def test_4_an_unknown_outcome_is_resolved_from_the_review_page(self):
        self.sign_in(OPERATOR)
        http(self.es_port, "POST", "/_faults", {"path": "/tickets", "action": "commit_500", "times": 1})
        http(self.es_port, "POST", "/_faults", {"path": "/operations", "action": "query_unknown", "times": 50})
        inst = self.submit("incident_response", INCIDENT)
        self.assertEqual(inst["status"], "NEEDS_REVIEW", inst)
        http(self.es_port, "DELETE", "/_faults")
        self.go("#/instance/" + inst["id"])
        self.wait(lambda d: self.text_of("#instance-status") == "NEEDS_REVIEW")
        self.wait(lambda d: "create_ticket" in self.text_of("#unknown-effects"), what="bundle")
        self.assertIn("resolve", self.text_of("#recommended"))
        # Cancel is refused here, and says why, before anyone clicks.
        self.assertFalse(self.css("#cancel")[0].is_enabled())
        self.assertIn("needs review", self.css("#cancel")[0].find_element(By.XPATH, "following-sibling::span").text)
        self.axe("an instance in review")
        self.shot("console-review.png")
        Select(self.css(".resolve-step")[0]).select_by_value("create_ticket")
        Select(self.css(".resolve-outcome")[0]).select_by_value("committed")
        self.css(".resolve-ref")[0].send_keys("T-MANUAL-7")
        self.css(".resolve-comment")[0].send_keys("found it in the ticketing UI")
        self.css("#resolve")[0].click()
        self.wait(lambda d: "200 OK" in self.text_of("#action-answer"), what="resolved")
        self.wait(lambda d: self.text_of("#instance-status") == "AWAITING_APPROVAL", what="resumed")
        self.wait(lambda d: self.text_of('#steps-body tr[data-step="create_ticket"] td:nth-child(7)')
                  == "T-MANUAL-7", what="external ref shown")

    def test_5_values_from_an_instance_are_text_never_markup(self):
        self.sign_in(OPERATOR)
        payload = "<img src=x onerror=alert(1)><script>document.title='pwned'</script>"
        inp = dict(INCIDENT, title=payload)
        inst = self.submit("incident_response", inp)
        for fragment in ("#/inbox", "#/instance/" + inst["id"]):
            self.go(fragment)
            self.wait(lambda d: payload in d.find_element(By.TAG_NAME, "body").text, what="payload as text")
            self.assertEqual(self.css("img") + self.css("main script"), [])
            self.assertNotEqual(self.driver.title, "pwned")
            with self.assertRaises(NoAlertPresentException):
                self.driver.switch_to.alert.text

    def test_6_a_viewer_sees_no_actions_and_a_forged_post_is_refused(self):
        inst = self.submit("incident_response", INCIDENT)
        self.sign_in(VIEWER)
        self.assertIn("victor (viewer)", self.text_of("#who"))
        self.go("#/inbox")
        self.approval_card(inst["id"] + ":notify_user")
        self.assertEqual(self.css(".approve") + self.css(".reject"), [])
        self.go("#/instance/" + inst["id"])
        self.wait(lambda d: self.text_of("#instance-status") == "AWAITING_APPROVAL")
        self.assertEqual(self.css("#forms button"), [])
        status = self.driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            fetch(arguments[0], {method: 'POST', headers: {'Authorization': 'Bearer ' + arguments[1],
                                 'Content-Type': 'application/json'}, body: '{}'})
              .then(r => done(r.status), e => done(String(e)));""",
            "/v1/instances/%s/steps/notify_user/approve" % inst["id"], VIEWER)
        self.assertEqual(status, 403)
        self.assertEqual(self.instance_status(inst["id"]), "AWAITING_APPROVAL")
        # No bulk actions for a viewer, and nothing in their place.
        self.go("#/instances")
        self.wait(lambda d: self.css("#instances-body tr"), what="the list")
        self.assertEqual(self.css("#bulk-action"), [])
        self.assertNotIn("null", self.text_of("main"))

    def test_7_the_list_of_10000_instances_shows_its_first_page_quickly(self):
        def one(i):
            return http(self.port, "POST", "/v1/sagas/order_fulfilment/instances",
                        {"input": dict(ORDER, n=i)}, OPERATOR)[0]
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            codes = list(pool.map(one, range(10000)))
        self.assertEqual(codes.count(201), 10000)
        self.sign_in(OPERATOR)
        self.go("#/inbox")
        self.wait(lambda d: self.css("#inbox-empty"))
        t0 = time.monotonic()
        self.driver.execute_script("location.hash = '#/instances'")
        self.wait(lambda d: len(self.css("#instances-body tr")) == 50, what="first page")
        seconds = time.monotonic() - t0
        print("\n  instances list, first page of 50 of >= 10,000: %.3f s" % seconds, file=sys.stderr)
        self.assertLess(seconds, 1.0)
        self.assertTrue(self.css("#next-page"))
        self.assertIn("RUNNING", self.text_of("#counts") + " RUNNING")
        self.axe("the instances list")
        self.shot("console-instances.png")


    def test_8_an_operator_pauses_and_resumes_a_service_and_finds_an_instance_by_key(self):
        self.sign_in(OPERATOR)
        self.go("#/services")
        row = 'tr[data-service="payments"]'
        self.wait(lambda d: self.text_of(row + " .state") == "open", what="payments open")
        self.wait(lambda d: self.css(row + " button.pause"))
        self.driver.execute_script("document.querySelector(arguments[0]).click()",
                                   row + " button.pause")
        self.wait(lambda d: self.text_of("#services-answer") == "200 OK", what="pause answered")
        self.wait(lambda d: self.text_of(row + " .state") == "paused", what="payments paused")
        # Who paused it and since when.
        self.wait(lambda d: " since " in self.text_of(row + " .pause-note"), what="pause note shown")
        self.axe("services")
        self.shot("console-services.png")
        services = {s["name"]: s for s in
                    http(self.port, "GET", "/v1/services", token=OPERATOR)[1]["services"]}
        self.assertTrue(services["payments"]["paused"])
        self.driver.execute_script("document.querySelector(arguments[0]).click()",
                                   row + " button.resume")
        self.wait(lambda d: self.text_of(row + " .state") == "open", what="payments resumed")
        # A business key finds its instance.
        status, body = http(self.port, "POST", "/v1/sagas/order_fulfilment/instances",
                            {"input": dict(ORDER, customer="acme-42")}, OPERATOR)
        self.assertIn(status, (200, 201), body)
        self.go("#/instances")
        self.wait(lambda d: self.css("#f-field"))
        self.css("#f-field")[0].send_keys("customer=acme-42")
        self.css("#f-apply")[0].click()
        self.wait(lambda d: len(self.css("#instances-body tr")) == 1
                  and body["id"] in self.text_of("#instances-body"), what="one instance found")

    def review_instance(self):
        """An incident whose ticket outcome nobody can tell: NEEDS_REVIEW."""
        http(self.es_port, "POST", "/_faults", {"path": "/tickets", "action": "commit_500", "times": 1})
        http(self.es_port, "POST", "/_faults", {"path": "/operations", "action": "query_unknown", "times": 50})
        inst = self.await_status(self.submit("incident_response", INCIDENT)["id"], "NEEDS_REVIEW")
        http(self.es_port, "DELETE", "/_faults")
        return inst

    def await_status(self, id_, status, seconds=60):
        """The instance once it has `status` (the 10,000 of test 7 may still be running)."""
        deadline = time.monotonic() + seconds
        while True:
            inst = http(self.port, "GET", "/v1/instances/%s?wait=1" % id_, token=OPERATOR)[1]
            if inst["status"] == status or time.monotonic() > deadline:
                break
        self.assertEqual(inst["status"], status, inst)
        return inst

    def trip(self):
        trip = {"traveller": "Ada", "email": "ada@example.com", "flight": "LH 100", "hotel": "Hilton",
                "nights": 2, "pickup": "MUC", "car": "compact", "days": 2, "amount": 90000,
                "currency": "EUR"}
        return self.await_status(self.submit("trip_booking", trip)["id"], "AWAITING_APPROVAL")

    def test_9a_every_page_fits_a_phone_and_passes_axe(self):
        self.sign_in(OPERATOR)
        review, trip = self.review_instance(), self.trip()
        pages = [("#/inbox", ".approval"), ("#/instances", "#instances-body tr"),
                 ("#/instance/" + review["id"], "#recommended"),
                 ("#/instance/" + trip["id"], "svg.graph g.node"),
                 ("#/services", "#services-body tr"), ("#/sagas", "section.saga svg")]
        self.driver.set_window_size(*PHONE)
        try:
            for fragment, ready in pages:
                self.go(fragment)
                self.wait(lambda d: self.css(ready), what=fragment)
                self.wait(lambda d: self.css("#forms button") or "instance/" not in fragment,
                          what="forms on " + fragment)
                self.no_sideways_scroll("phone " + fragment)
                self.axe("phone " + fragment)
        finally:
            self.driver.set_window_size(*DESKTOP)
        for fragment, ready in pages:
            self.go(fragment)
            self.wait(lambda d: self.css(ready), what=fragment)
            self.no_sideways_scroll("desktop " + fragment)
        self.axe("the sagas page")
        self.shot("console-sagas.png")

    def test_9b_actions_are_enabled_exactly_when_the_server_accepts_them(self):
        self.sign_in(OPERATOR)
        inst = self.review_instance()
        path = "/v1/instances/" + inst["id"]
        self.go("#/instance/" + inst["id"])
        self.wait(lambda d: self.css("#resolve") and self.css("#resolve")[0].is_enabled(),
                  what="resolve enabled")
        # The step under review is the one the forms point at.
        self.assertEqual(Select(self.css(".resolve-step")[0]).first_selected_option.text,
                         "create_ticket")
        # What is disabled says what the server says when asked anyway.
        for button, action in (("#compensate", "compensate"), ("#cancel", "cancel")):
            self.assertFalse(self.css(button)[0].is_enabled(), button)
            why = self.css(button)[0].find_element(By.XPATH, "following-sibling::span").text
            status, body = http(self.port, "POST", path + "/" + action, {"reason": "try"}, OPERATOR)
            self.assertEqual(status, 409, body)
            self.assertEqual(why, body["detail"])
        self.assertFalse(self.css("#retry")[0].is_enabled())
        self.assertFalse(self.css("#approve")[0].is_enabled())
        # Resolve; the saga goes on to the approval, which the forms now offer.
        self.css(".resolve-ref")[0].send_keys("T-42")
        self.css("#resolve")[0].click()
        self.wait(lambda d: "200 OK" in self.text_of("#action-answer"), what="resolved")
        self.wait(lambda d: self.css("#approve")[0].is_enabled(), what="approve offered")
        self.assertEqual(Select(self.css(".approve-step")[0]).first_selected_option.text, "notify_user")
        self.assertFalse(self.css("#resolve")[0].is_enabled())
        self.css("#approve")[0].click()
        self.wait(lambda d: self.text_of("#instance-status") == "COMPLETED", what="COMPLETED")
        self.wait(lambda d: not self.css("#approve")[0].is_enabled(), what="approve withdrawn")
        self.assertFalse(self.css("#cancel")[0].is_enabled())

    def list_awaiting_batch(self, title, n):
        """Submits n incidents titled `title`, waits until each awaits its
        approval, and lists exactly them in the console; their ids."""
        ids = [self.submit("incident_response", dict(INCIDENT, title=title))["id"]
               for _ in range(n)]
        for id_ in ids:
            self.await_status(id_, "AWAITING_APPROVAL")
        self.go("#/instances")
        self.wait(lambda d: self.css("#f-field"))
        self.css("#f-field")[0].send_keys("title=" + title)
        self.css("#f-apply")[0].click()
        self.wait(lambda d: len(self.css("#instances-body tr")) == n, what="%d listed" % n)
        return ids

    def test_9c_a_bulk_approval_names_the_count_and_answers_for_each(self):
        self.sign_in(OPERATOR)
        ids = self.list_awaiting_batch("batch-9c", 4)
        Select(self.css("#bulk-action")[0]).select_by_value("approve")
        self.css("#bulk-text")[0].send_keys("batch approved")
        self.css("#bulk-prepare")[0].click()
        self.wait(lambda d: "Approve 4 instances" in self.text_of("#bulk-question"), what="count named")
        self.axe("a bulk confirmation")
        self.shot("console-bulk.png")
        self.css("#bulk-confirm")[0].click()
        self.wait(lambda d: "4 of 4 accepted" in self.text_of("#bulk-summary"), what="bulk answered")
        self.assertEqual(len(self.css('#bulk-results-body tr[data-status="200"]')), 4)
        for id_ in ids:
            self.await_status(id_, "COMPLETED")
        # Cancelling them now is refused for each, and said so.
        Select(self.css("#bulk-action")[0]).select_by_value("cancel")
        self.css("#bulk-prepare")[0].click()
        self.wait(lambda d: "Cancel 4 instances" in self.text_of("#bulk-question"))
        self.css("#bulk-confirm")[0].click()
        self.wait(lambda d: "0 of 4 accepted, 4 refused" in self.text_of("#bulk-summary"))
        self.assertIn("already completed", self.text_of("#bulk-results-body"))

    def test_9c2_rows_selected_one_by_one_or_by_page_are_what_a_bulk_action_takes(self):
        self.sign_in(OPERATOR)
        ids = self.list_awaiting_batch("batch-9c2", 3)
        self.assertFalse(self.css("#bulk-prepare-selected")[0].is_enabled())
        # Two rows by hand; the selection outlives the list's refreshes.
        for id_ in ids[:2]:
            self.css('#instances-body input.row-select[data-id="%s"]' % id_)[0].click()
        self.wait(lambda d: "2 selected" in self.text_of("#bulk-selected-count"), what="count")
        Select(self.css("#bulk-action")[0]).select_by_value("approve")
        self.css("#bulk-prepare-selected")[0].click()
        self.wait(lambda d: "Approve 2 instances selected" in self.text_of("#bulk-question"),
                  what="count named")
        self.axe("a confirmation of selected rows")
        self.css("#bulk-confirm")[0].click()
        self.wait(lambda d: "2 of 2 accepted" in self.text_of("#bulk-summary"), what="answered")
        for id_ in ids[:2]:
            self.await_status(id_, "COMPLETED")
        self.assertEqual(self.instance_status(ids[2]), "AWAITING_APPROVAL")
        # The page's box selects every row shown.
        self.css("#select-page")[0].click()
        self.wait(lambda d: "3 selected" in self.text_of("#bulk-selected-count"), what="page")

    def test_9d_the_graph_colours_each_step_and_the_timeline_has_milliseconds(self):
        self.sign_in(OPERATOR)
        inst = self.trip()
        self.go("#/instance/" + inst["id"])
        self.wait(lambda d: len(self.css("svg.graph g.node")) == 6, what="six nodes")
        classes = self.driver.execute_script(
            "return Object.fromEntries([...document.querySelectorAll('svg.graph g.node')]"
            ".map(g => [g.dataset.step, g.getAttribute('class')]));")
        self.assertEqual(classes["charge_card"], "node COMMITTED")
        self.assertEqual(classes["issue_tickets"], "node AWAITING_APPROVAL")
        self.assertEqual(classes["send_itinerary"], "node PLANNED")
        for before in ("reserve_flight", "reserve_hotel", "reserve_car"):
            self.assertTrue(self.css('svg.graph line[data-from="%s"][data-to="charge_card"]' % before))
        self.shot("console-graph.png", scroll_to="#graph")
        self.wait(lambda d: self.css("#timeline li time"), what="timeline")
        stamp = self.text_of("#timeline li time")
        self.assertRegex(stamp, r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}$")
        self.go("#/sagas")
        self.wait(lambda d: self.css('section[data-saga="trip_booking@1"] svg g.node'))
        self.assertEqual(len(self.css('section[data-saga="trip_booking@1"] svg g.node')), 6)

    def test_9f_a_run_shows_its_calls_and_the_agents_call_on_its_approval_card(self):
        self.sign_in(OPERATOR)
        status, run = http(self.port, "POST", "/v1/toolboxes/soc_tools/runs",
                           {"input": {"incident": "INC-UI"}, "metadata": {"agent": "soc-bot"}},
                           OPERATOR)
        self.assertEqual(status, 201, run)
        status, _ = http(self.port, "POST", "/v1/instances/%s/decisions" % run["id"],
                         {"decision_id": "triage", "value": {"block": "203.0.113.9"},
                          "model": "m-ui"}, OPERATOR)
        self.assertEqual(status, 201)
        calls = "/v1/instances/%s/calls?wait=10" % run["id"]
        status, ticket = http(self.port, "POST", calls, {
            "call_id": "ticket", "tool": "create_ticket", "reason": "alert 42",
            "evidence": ["siem:alert-42"], "model": "m-ui",
            "arguments": {"title": "Phishing", "severity": "high", "source_ip": "203.0.113.9"}},
            OPERATOR)
        self.assertEqual(ticket["status"], "COMMITTED", ticket)
        status, mail = http(self.port, "POST", calls, {
            "call_id": "mail", "tool": "notify_user", "reason": "tell the user",
            "evidence": ["ticket:" + ticket["result"]["ref"]], "model": "m-ui",
            "arguments": {"to": "bob@example.com", "body": "we blocked it"}}, OPERATOR)
        self.assertEqual(mail["status"], "AWAITING_APPROVAL", mail)
        self.go("#/inbox")
        card = self.approval_card(run["id"] + ":mail")
        self.assertEqual(card.find_element(By.CSS_SELECTOR, ".tool").text, "notify_user")
        self.assertEqual(card.find_element(By.CSS_SELECTOR, ".call-reason").text, "tell the user")
        self.assertIn("ticket:T-", card.find_element(By.CSS_SELECTOR, ".call-evidence").text)
        self.assertEqual(card.find_element(By.CSS_SELECTOR, ".call-model").text, "m-ui")
        body = {"body": "we blocked it", "to": "bob@example.com"}
        digest = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"))
                                .encode()).hexdigest()
        self.assertEqual(card.find_element(By.CSS_SELECTOR, ".body-sha256").text, digest)
        self.axe("an agent's call awaiting approval")
        self.shot("console-run-approval.png", ".agent-call")
        self.go("#/instance/" + run["id"])
        self.wait(lambda d: self.css('#calls-body tr[data-call="mail"]'), what="the calls")
        self.assertEqual(self.text_of('#calls-body tr[data-call="ticket"] .call-tool'), "create_ticket")
        self.assertEqual(self.text_of('#calls-body tr[data-call="ticket"] .call-reason'), "alert 42")
        self.assertEqual(self.text_of('#calls-body tr[data-call="mail"] .call-status'),
                         "AWAITING_APPROVAL")
        self.assertIn('"block": "203.0.113.9"',
                      self.text_of('#decisions-body tr[data-decision="triage"] .decision-value'))
        self.assertTrue(self.css("#receipt-download"))
        self.axe("a run")
        self.driver.set_window_size(*PHONE)
        try:
            self.go("#/instance/" + run["id"])
            self.wait(lambda d: self.css('#calls-body tr[data-call="mail"]'), what="phone calls")
            self.no_sideways_scroll("phone run")
            self.axe("phone run")
        finally:
            self.driver.set_window_size(*DESKTOP)
        self.shot("console-run.png", "#calls")

    def test_9e_an_operator_approves_with_the_keyboard_alone(self):
        self.sign_in(OPERATOR)
        inst = self.submit("incident_response", INCIDENT)
        self.await_status(inst["id"], "AWAITING_APPROVAL")
        key = inst["id"] + ":notify_user"
        self.go("#/inbox")
        card = self.approval_card(key)
        keys = ActionChains(self.driver)
        keys.send_keys(Keys.TAB).perform()
        self.assertEqual(self.driver.execute_script("return document.activeElement.id"), "skip")
        keys.send_keys(Keys.ENTER).perform()
        self.assertEqual(self.driver.execute_script("return document.activeElement.id"), "main")
        comment = card.find_element(By.CSS_SELECTOR, ".comment")
        for _ in range(200):  # the card's comment field, by Tab alone
            if self.driver.switch_to.active_element == comment:
                break
            ActionChains(self.driver).send_keys(Keys.TAB).perform()
        self.assertEqual(self.driver.switch_to.active_element, comment)
        ActionChains(self.driver).send_keys("by keyboard", Keys.TAB).perform()
        focused = self.driver.switch_to.active_element
        self.assertEqual(focused.get_attribute("class"), "approve")
        self.assertNotEqual(self.driver.execute_script(
            "return getComputedStyle(document.activeElement).outlineStyle"), "none")
        ActionChains(self.driver).send_keys(Keys.ENTER).perform()
        self.wait(lambda d: "200 OK" in card.text, what="approved by keyboard")
        self.assertFalse(card.find_element(By.CSS_SELECTOR, ".approve").is_enabled())


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--sagad", required=True)
    ap.add_argument("--services", required=True)
    ap.add_argument("--screenshots")
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
