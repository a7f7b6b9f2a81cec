"""A person at the site decides: a release inside a site's policy that says "approve": "person"
waits until someone approves or refuses it (`site approve`, `site refuse`), or refuses itself
after `approve_within_s`; party 0 hears that it waits, and then the verdict."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace

import pytest

from privsyn_fed.mpc.policy import load_policy
from privsyn_fed.site import approvals
from privsyn_fed.site.client import Site, SiteSetup

from .conftest import assert_one_line_error, run_cli
from .test_sites_attacker import kit, make_hub, party0  # noqa: F401  (kit: a fixture)


def start(kit, hub, tmp_path, within: float | None = None):  # noqa: F811
    """Site alpha with a policy that has a person approve each release; (its state folder, output)."""
    policy = {"max_epsilon": 2, "max_delta": 1e-5, "methods": ["fedtda"], "schema_sha256": kit.fingerprint}
    policy["approve"] = "person"
    if within is not None:
        policy["approve_within_s"] = within
    (tmp_path / "policy.json").write_text(json.dumps(policy))
    fed = replace(kit.fed, sites=replace(kit.fed.sites, port=hub.port))
    setup = SiteSetup(
        "alpha", str(kit.silos["alpha"]), kit.schema, kit.fingerprint, fed, kit.digest,
        kit.pem("site-alpha"), kit.pem("site-alpha", "key"), load_policy(tmp_path / "policy.json"),
        tmp_path / "copy.ledger.json", connect_s=10.0, state=tmp_path / "state",
    )  # fmt: skip
    lines: list[str] = []
    threading.Thread(target=Site(setup, out=lines.append).run, daemon=True).start()
    deadline = time.monotonic() + 20
    while "alpha" not in hub.links and time.monotonic() < deadline:
        time.sleep(0.05)
    return tmp_path / "state", lines


def offer(agg, result: dict) -> threading.Thread:
    """Party 0's offer of the release to alpha, in a thread (it waits for the person)."""
    thread = threading.Thread(target=lambda: result.update(accepted=agg._offer_release(["alpha"])), daemon=True)
    thread.start()
    return thread


def waiting(state, seconds: float = 15) -> list[dict]:
    deadline = time.monotonic() + seconds
    while not approvals.pending(state) and time.monotonic() < deadline:
        time.sleep(0.05)
    return approvals.pending(state)


@pytest.mark.parametrize("decision", ["approve", "refuse"])
def test_a_release_waits_for_a_person_who_approves_or_refuses_it(kit, tmp_path, decision):  # noqa: F811
    """The request is listed by `site pending`, party 0 logs that it waits for alpha, and the
    person's decision (recorded with their name) is the site's verdict; nothing is read before."""
    logged: list[str] = []
    hub = make_hub(kit, names=("alpha",))
    hub.log = logged.append
    try:
        state, lines = start(kit, hub, tmp_path)
        agg, _ = party0(kit, hub)
        agg.approval_s = 30.0
        result: dict = {}
        thread = offer(agg, result)
        [request] = waiting(state)
        assert request["release"] == agg.release_id and request["request"]["method"] == "fedtda"
        listed = run_cli("site", "pending", "--state", state)
        assert listed.returncode == 0 and agg.release_id in listed.stdout and "fedtda" in listed.stdout
        assert not (tmp_path / "copy.ledger.json").exists()  # nothing reserved, read or written yet
        argv = ["site", decision, agg.release_id, "--state", state, "--by", "Dr Ada"]
        done = run_cli(*argv, *(["--why", "not this quarter"] if decision == "refuse" else []))
        assert done.returncode == 0, done.stderr
        thread.join(timeout=20)
        assert any("waiting for site alpha" in line for line in logged), logged
        if decision == "approve":
            assert result["accepted"] == ["alpha"]
            assert any("approved by person:Dr Ada" in line for line in lines)
        else:
            assert result["accepted"] == []
            assert any("refused by person:Dr Ada: not this quarter" in line for line in logged), logged
        again = run_cli(*argv, *(["--why", "again"] if decision == "refuse" else []))
        assert_one_line_error(again, "was decided already")
        assert approvals.pending(state) == []
    finally:
        hub.close({"op": "end", "status": "failed"})


def test_a_release_nobody_decides_refuses_itself(kit, tmp_path):  # noqa: F811
    """With approve_within_s 1 and nobody deciding, the site refuses by timeout, and a late
    approval is refused in one line: the timeout's decision stands."""
    logged: list[str] = []
    hub = make_hub(kit, names=("alpha",))
    hub.log = logged.append
    try:
        state, _ = start(kit, hub, tmp_path, within=1)
        agg, _ = party0(kit, hub)
        result: dict = {}
        offer(agg, result).join(timeout=20)
        assert result["accepted"] == []
        assert any("refused by timeout" in line for line in logged), logged
        late = run_cli("site", "approve", agg.release_id, "--state", state, "--by", "Dr Ada")
        assert_one_line_error(late, "decided already", "refused by timeout")
    finally:
        hub.close({"op": "end", "status": "failed"})


def test_a_decision_needs_a_waiting_release_a_name_and_a_reason(tmp_path):
    """Approving a release that does not wait, a refusal without a reason, a policy with a wrong
    approve field: each one line and exit 2."""
    (tmp_path / "state").mkdir()
    assert_one_line_error(
        run_cli("site", "approve", "abcdef0123", "--state", tmp_path / "state", "--by", "X"), "no request abcdef0123"
    )
    assert_one_line_error(
        run_cli("site", "refuse", "abcdef0123", "--state", tmp_path / "state", "--by", "X", "--why", " "), "--why"
    )
    bad = {"max_epsilon": 1, "max_delta": 1e-9, "methods": ["fedtda"], "schema_sha256": "0" * 64, "approve": "maybe"}
    (tmp_path / "p.json").write_text(json.dumps(bad))
    with pytest.raises(Exception, match="'approve' must be 'auto' or 'person'"):
        load_policy(tmp_path / "p.json")
