"""`privsyn-fed federation`: a federation's bundles as `init` writes them, rotation with `issue`, a
federation file for an existing CA with `describe`, and `show`. Real certificates on real files;
the bundles form the real TLS mesh on loopback."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from privsyn_fed.common import InputError
from privsyn_fed.mpc import certs, tls, world
from privsyn_fed.mpc import federation as federation_file
from privsyn_fed.mpc.launch import free_ports

from .conftest import SCHEMA, CliRun, assert_one_line_error, run_cli

ORGS = ["Hospital A", "Hospital B", "Registry C", "Trust D"]
ROLES = ["party-0", "party-1", "party-2", "dealer"]


def cli(capsys, *args) -> CliRun:
    """The command in this process (fast); a usage error's exit status as the status."""
    try:
        return run_cli(*args, capsys=capsys)
    except SystemExit as exc:
        out, err = capsys.readouterr()
        return CliRun([str(a) for a in args], int(exc.code or 0), out, err)


def init_args(out: Path, ports: list[int], *extra) -> list:
    parties = [f"--party={org}@127.0.0.1:{port}" for org, port in zip(ORGS[:3], ports[:3])]
    return [
        "federation",
        "init",
        "--out",
        out,
        "--name",
        "adult-2026",
        *parties,
        f"--dealer={ORGS[3]}@127.0.0.1:{ports[3]}",
        *extra,
    ]


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file and folder under ``folder``: its bytes (folders: none) and mode."""
    out = {}
    for path in sorted(folder.rglob("*")):
        data = path.read_bytes() if path.is_file() else b""
        out[str(path.relative_to(folder))] = (data, stat.S_IMODE(path.stat().st_mode))
    return out


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    """A federation made as a user makes it: `federation init` in its own process, with a schema."""
    root = tmp_path_factory.mktemp("kit")
    (root / "schema.json").write_text(json.dumps(SCHEMA))
    ports = free_ports(4)
    proc = run_cli(*init_args(root / "kit", ports, "--schema", root / "schema.json"), timeout=120)
    assert proc.returncode == 0, proc.stderr
    return root / "kit", proc.stdout, ports


def test_init_writes_a_ca_and_one_bundle_per_member(kit):
    out, stdout, ports = kit
    assert sorted(p.name for p in out.iterdir()) == sorted(["README.txt", "ca", "federation.json", *ROLES])
    assert sorted(p.name for p in (out / "ca").iterdir()) == ["ca.key", "ca.pem"]
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    ca_pem = (out / "ca" / "ca.pem").read_bytes()
    schema_sha = federation_file.load(out / "federation.json").schema_sha256
    from privsyn_fed.mpc.aggregator import schema_fingerprint
    from privsyn_fed.schema import Schema

    assert schema_sha == schema_fingerprint(Schema.load(out.parent / "schema.json"))
    described = []
    for rank, (role, org) in enumerate(zip(ROLES, ORGS)):
        bundle = out / role
        assert sorted(p.name for p in bundle.iterdir()) == ["README.txt", "cert.pem", "federation.json", "key.pem"]
        cert = (bundle / "cert.pem").read_bytes()
        certs.check_issued_by(cert, ca_pem, str(bundle / "cert.pem"))
        who = certs.identity(cert)
        assert (who.role, who.organisation) == (role, org)
        assert certs.load_credentials(bundle / "cert.pem", bundle / "key.pem").identity == who
        fed = federation_file.load(bundle / "federation.json")
        assert fed.members[rank].sha256 == who.sha256 == certs.fingerprint(cert)
        assert fed.members[rank].port == ports[rank] and fed.ca_pem.strip() == ca_pem.strip()
        described.append(fed.to_dict())
        member = world.membership(world.Access(bundle / "federation.json", bundle / "cert.pem", bundle / "key.pem"))
        assert member.rank == rank
    assert all(d == described[0] for d in described)  # every member holds the same federation
    readme = {role: (out / role / "README.txt").read_text() for role in ROLES}
    flags = "--federation federation.json --cert cert.pem --key key.pem"
    assert f"privsyn-fed synth --method distaim --mpc {flags}" in readme["party-0"]
    assert f"privsyn-fed mpc-party {flags}" in readme["party-1"] and "mpc-party" in readme["party-2"]
    assert f"privsyn-fed mpc-dealer {flags}" in readme["dealer"]
    assert schema_sha in readme["party-1"]
    assert "offline" in stdout and "secure channel" in stdout and "ca.key" in stdout


def test_private_keys_are_0600_and_never_leave_their_bundle(kit):
    out, _, _ = kit
    keys = {out / "ca" / "ca.key"} | {out / role / "key.pem" for role in ROLES}
    for key in keys:
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key
        assert b"PRIVATE KEY" in key.read_bytes()
    for path in out.rglob("*"):
        if path.is_file() and path not in keys:
            assert b"PRIVATE KEY" not in path.read_bytes(), path
    bodies = [k.read_bytes() for k in keys]
    assert len(set(bodies)) == len(bodies)  # five different keys
    for path in out.rglob("*"):  # nor any line of a key's body, in any form
        if path.is_file() and path not in keys:
            text = path.read_bytes()
            assert not any(line in text for body in bodies for line in body.splitlines()[1:-1]), path


def test_the_bundles_form_the_mutually_authenticated_mesh(kit):
    out, _, _ = kit
    meshes = []
    for rank, role in enumerate(ROLES):
        bundle = out / role
        creds = certs.load_credentials(bundle / "cert.pem", bundle / "key.pem")
        meshes.append(tls.Mesh(federation_file.load(bundle / "federation.json"), rank, creds, 30))
    outcomes: list = [None] * len(meshes)

    def join(i):
        try:
            outcomes[i] = meshes[i].join()
        except Exception as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=join, args=(i,), daemon=True) for i in range(len(meshes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(40)
    try:
        assert outcomes == meshes, outcomes
    finally:
        for m in meshes:
            m.close()


def test_a_certificate_minted_with_the_ca_key_alone_is_refused_by_the_pins(kit, tmp_path):
    """The CA's key makes a certificate for party-1 of Hospital B; the members' pins refuse it."""
    out, _, _ = kit
    ca = ((out / "ca" / "ca.pem").read_bytes(), (out / "ca" / "ca.key").read_bytes())
    cert, key = certs.issue(ca, "party-1", "Hospital B")
    certs.write_public(tmp_path / "cert.pem", cert)
    certs.write_private(tmp_path / "key.pem", key)
    fed_path = out / "party-0" / "federation.json"
    with pytest.raises(InputError, match="pins for party-1"):
        world.membership(world.Access(fed_path, tmp_path / "cert.pem", tmp_path / "key.pem"))
    fed = federation_file.load(fed_path)
    p0 = tls.Mesh(fed, 0, certs.load_credentials(out / "party-0" / "cert.pem", out / "party-0" / "key.pem"), 3)
    forged = tls.Mesh(fed, 1, certs.load_credentials(tmp_path / "cert.pem", tmp_path / "key.pem"), 3)
    threads = [threading.Thread(target=_try_join, args=(m,), daemon=True) for m in (p0, forged)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert any("not the one pinned for party-1" in why for why in p0.refused), p0.refused


def _try_join(m: tls.Mesh) -> None:
    try:
        m.join()
    except tls.JoinError:
        pass


def test_an_existing_target_is_refused_without_force_and_nothing_changes(kit, capsys):
    out, _, ports = kit
    before = snapshot(out)
    run = cli(capsys, *init_args(out, ports))
    assert_one_line_error(run, f"--out {out}", "already exists", "--force")
    assert snapshot(out) == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["kit", "schema.json"]


def test_force_replaces_only_a_kit(tmp_path, capsys):
    ports = free_ports(4)
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    run = cli(capsys, *init_args(foreign, ports, "--force"))
    assert_one_line_error(run, f"--out {foreign}", "'notes.txt'")
    assert (foreign / "notes.txt").read_text() == "mine" and len(list(foreign.iterdir())) == 1
    out = tmp_path / "kit"
    assert cli(capsys, *init_args(out, ports)).returncode == 0
    old_ca = (out / "ca" / "ca.pem").read_bytes()
    run = cli(capsys, *init_args(out, ports, "--force", "--no-pins"))
    assert run.returncode == 0, run.stderr
    assert (out / "ca" / "ca.pem").read_bytes() != old_ca
    assert not any(m.sha256 for m in federation_file.load(out / "federation.json").members)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kit", "mine"]  # no temporary folder left


def put(index: int, value: str):
    """Replace the argument at ``index`` of ``init_args`` (5: the name, 6..8: the parties, 9: the dealer)."""
    return lambda args: args.__setitem__(index, value)


@pytest.mark.parametrize(
    "change, fragments",
    [
        (put(7, "--party=Hospital B@127.0.0.1:7100"), ["--party", "127.0.0.1:7100", "also party-0"]),
        (put(9, "--dealer=Trust D@127.0.0.1:7102"), ["--dealer", "127.0.0.1:7102", "also party-2"]),
        (put(6, "--party=Hospital A@127.0.0.1:99999"), ["--party", "99999", "1..65535"]),
        (put(6, "--party=Hospital A@127.0.0.1:http"), ["--party", "'http'"]),
        (put(6, "--party=Hospital A 127.0.0.1:7100"), ["--party", "ORGANISATION@HOST:PORT"]),
        (put(6, "--party=@127.0.0.1:7100"), ["--party", "organisation"]),
        (put(9, "--dealer=Trust D@::1:7109"), ["--dealer", "brackets"]),
        (put(5, "bad\tname"), ["--name"]),
        (lambda args: args.__delitem__(slice(7, 9)), ["--party", "at least two"]),
        (lambda args: args.extend(["--days", "0"]), ["--days", "'0'"]),
        (lambda args: args.extend(["--days", "30", "--ca-days", "10"]), ["--ca-days 10", "--days 30"]),
        (lambda args: args.extend(["--schema", "{root}/nowhere.json"]), ["--schema", "nowhere.json", "not found"]),
        (lambda args: args.extend(["--schema", "{root}/broken.json"]), ["--schema", "broken.json", "not valid JSON"]),
        (lambda args: args.extend(["--schema", "{root}/draft.json"]), ["--schema", "draft.json", "_draft"]),
    ],
)
def test_a_bad_value_is_one_line_and_leaves_no_folder(tmp_path, capsys, change, fragments):
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "draft.json").write_text(json.dumps({**SCHEMA, "_draft": {"warning": "read off rows"}}))
    args = [str(a) for a in init_args(tmp_path / "kit", [7100, 7101, 7102, 7109])]
    change(args)
    args = [a.replace("{root}", str(tmp_path)) for a in args]
    before = sorted(p.name for p in tmp_path.iterdir())
    run = cli(capsys, *args)
    assert_one_line_error(run, *fragments)
    assert run.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.fixture
def small_kit(tmp_path, capsys):
    out = tmp_path / "kit"
    assert cli(capsys, *init_args(out, free_ports(4))).returncode == 0
    return out


def test_issue_rotates_a_member_and_its_pin(small_kit, tmp_path, capsys):
    out = small_kit
    old_fed_bytes = (out / "federation.json").read_bytes()
    old_pin = certs.fingerprint((out / "party-1" / "cert.pem").read_bytes())
    new = tmp_path / "party-1-new"
    run = cli(
        capsys,
        "federation",
        "issue",
        "--ca",
        out / "ca",
        "--federation",
        out / "federation.json",
        "--role",
        "party-1",
        "--out",
        new,
    )
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in new.iterdir()) == ["README.txt", "cert.pem", "federation.json", "key.pem"]
    assert stat.S_IMODE((new / "key.pem").stat().st_mode) == 0o600
    new_cert = (new / "cert.pem").read_bytes()
    new_pin = certs.fingerprint(new_cert)
    assert new_pin != old_pin and certs.identity(new_cert).organisation == "Hospital B"
    certs.check_issued_by(new_cert, (out / "ca" / "ca.pem").read_bytes(), "cert.pem")
    text = (new / "federation.json").read_text()
    assert old_pin not in text and new_pin in text
    fed, old_fed = federation_file.load(new / "federation.json"), federation_file.load(out / "federation.json")
    assert [m.sha256 for m in fed.members] == [m.sha256 if m.rank != 1 else new_pin for m in old_fed.members]
    assert (out / "federation.json").read_bytes() == old_fed_bytes  # the input is left as it was
    said = " ".join(run.stdout.split())  # wrapped at 100 columns, words whole
    assert new_pin in said and old_pin in said and f"Send {new / 'federation.json'} to EVERY member" in said
    # the new bundle joins; the old certificate is refused by the new federation file
    assert world.membership(world.Access(new / "federation.json", new / "cert.pem", new / "key.pem")).rank == 1
    with pytest.raises(InputError, match="pins for party-1"):
        world.membership(
            world.Access(new / "federation.json", out / "party-1" / "cert.pem", out / "party-1" / "key.pem")
        )
    # replacing the member: another organisation at another address
    other = tmp_path / "party-1-other"
    run = cli(
        capsys,
        "federation",
        "issue",
        "--ca",
        out / "ca",
        "--federation",
        new / "federation.json",
        "--role",
        "party-1",
        "--organisation",
        "Clinic E",
        "--address",
        "127.0.0.1:7200",
        "--out",
        other,
    )
    assert run.returncode == 0, run.stderr
    member = federation_file.load(other / "federation.json").members[1]
    assert (member.organisation, member.host, member.port) == ("Clinic E", "127.0.0.1", 7200)
    assert certs.identity((other / "cert.pem").read_bytes()).organisation == "Clinic E"
    assert new_pin not in (other / "federation.json").read_text()


def test_issue_without_pins_keeps_the_federation_file(tmp_path, capsys):
    out = tmp_path / "kit"
    assert cli(capsys, *init_args(out, free_ports(4), "--no-pins")).returncode == 0
    new = tmp_path / "dealer-new"
    run = cli(
        capsys,
        "federation",
        "issue",
        "--ca",
        out / "ca",
        "--federation",
        out / "federation.json",
        "--role",
        "dealer",
        "--out",
        new,
    )
    assert run.returncode == 0, run.stderr
    assert (
        federation_file.load(new / "federation.json").to_dict()
        == federation_file.load(out / "federation.json").to_dict()
    )
    assert "new CA" in run.stdout
    # without pins both the old and the new certificate are accepted: revoking needs a new CA
    for bundle in (out / "dealer", new):
        access = world.Access(out / "federation.json", bundle / "cert.pem", bundle / "key.pem")
        assert world.membership(access).rank == 3


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--role", "boss"], ["--role 'boss'", "party-<k>"]),
        (["--role", "party-7"], ["--role party-7", "not a member"]),
        (["--role", "party-1", "--address", "127.0.0.1:0"], ["--address", "1..65535"]),
        (["--role", "party-1", "--organisation", ""], ["--organisation", "1 to 64"]),
        (["--role", "party-1", "--ca", "{other}/ca"], ["--ca", "not the CA of federation"]),
        (["--role", "party-1", "--ca", "{root}/nowhere"], ["--ca", "nowhere", "not a folder"]),
        (["--role", "party-1", "--federation", "{root}/nowhere.json"], ["--federation", "nowhere.json"]),
        (["--role", "party-1", "--out", "{kit}", "--force"], ["--out", "'ca'"]),
        (["--role", "party-1", "--out", "{kit}/party-1", "--force"], ["--federation", "lies inside --out"]),
    ],
)
def test_issue_refuses_bad_values_in_one_line(small_kit, tmp_path, capsys, args, fragments):
    other = tmp_path / "other"
    assert cli(capsys, *init_args(other, free_ports(4))).returncode == 0
    base = [
        "--ca",
        small_kit / "ca",
        "--federation",
        small_kit / "party-1" / "federation.json",
        "--out",
        tmp_path / "new",
    ]
    argv = [str(a) for a in ["federation", "issue", *base, *args]]
    argv = [a.format(root=tmp_path, other=other, kit=small_kit) for a in argv]
    before = snapshot(tmp_path)
    assert_one_line_error(cli(capsys, *argv), *fragments)
    assert snapshot(tmp_path) == before


def test_issue_refuses_a_ca_key_others_can_read(small_kit, tmp_path, capsys):
    os.chmod(small_kit / "ca" / "ca.key", 0o644)
    run = cli(
        capsys,
        "federation",
        "issue",
        "--ca",
        small_kit / "ca",
        "--federation",
        small_kit / "federation.json",
        "--role",
        "party-0",
        "--out",
        tmp_path / "new",
    )
    assert_one_line_error(run, "ca.key", "chmod 600")
    assert not (tmp_path / "new").exists()


# ---- an existing PKI ----------------------------------------------------------------------------


@pytest.fixture
def pki(tmp_path):
    """Certificates an organisation's own CA issued (here made with the library), one per role."""
    ca = certs.make_ca("Our PKI")
    certs.write_public(tmp_path / "ca.pem", ca[0])
    paths = {}
    for role, org in zip(ROLES, ORGS):
        cert, key = certs.issue(ca, role, org)
        certs.write_public(tmp_path / f"{role}.pem", cert)
        certs.write_private(tmp_path / f"{role}.key", key)
        paths[role] = tmp_path / f"{role}.pem"
    stranger = certs.issue(certs.make_ca("Elsewhere"), "party-1", "Hospital B")[0]
    certs.write_public(tmp_path / "stranger.pem", stranger)
    certs.write_public(tmp_path / "server-only.pem", server_only(ca, "party-2", "Registry C"))
    return tmp_path, paths


def server_only(ca: tuple[bytes, bytes], role: str, organisation: str) -> bytes:
    """A certificate of ``ca`` for ``role`` that may serve TLS but not authenticate a client."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_cert = x509.load_pem_x509_certificate(ca[0])
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, role), x509.NameAttribute(NameOID.ORGANIZATION_NAME, organisation)]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(ca_cert.subject)
        .public_key(ec.generate_private_key(ec.SECP256R1()).public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(role)]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(serialization.load_pem_private_key(ca[1], password=None), hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def describe_args(root: Path, paths: dict, ports: list[int], **swap) -> list:
    members = [f"--member={role}={swap.get(role, paths[role])}@127.0.0.1:{port}" for role, port in zip(ROLES, ports)]
    members.reverse()  # any order: the roles give the ranks
    return [
        "federation",
        "describe",
        "--ca-cert",
        root / "ca.pem",
        "--name",
        "adult-2026",
        *members,
        "--out",
        root / "federation.json",
    ]


def test_describe_writes_the_federation_for_an_existing_ca(pki, capsys):
    root, paths = pki
    ports = free_ports(4)
    run = cli(capsys, *describe_args(root, paths, ports))
    assert run.returncode == 0, run.stderr
    fed = federation_file.load(root / "federation.json")
    assert [m.role for m in fed.members] == ROLES and [m.organisation for m in fed.members] == ORGS
    assert [m.sha256 for m in fed.members] == [certs.fingerprint(paths[r].read_bytes()) for r in ROLES]
    for rank, role in enumerate(ROLES):
        access = world.Access(root / "federation.json", paths[role], root / f"{role}.key")
        assert world.membership(access).rank == rank
    assert "PRIVATE KEY" not in (root / "federation.json").read_text()
    # a CA file as `openssl x509 -text` writes it: the text before the PEM is not copied
    ca_pem = (root / "ca.pem").read_bytes()
    (root / "ca.pem").unlink()
    (root / "ca.pem").write_bytes(b"Certificate:\n    Data: ...\n" + ca_pem)
    run = cli(capsys, *describe_args(root, paths, ports), "--force")
    assert run.returncode == 0, run.stderr
    assert federation_file.load(root / "federation.json").ca_pem == ca_pem
    again = cli(capsys, *describe_args(root, paths, ports))
    assert_one_line_error(again, "federation.json", "already exists")


@pytest.mark.parametrize(
    "swap, fragments",
    [
        ({"party-1": "{root}/stranger.pem"}, ["stranger.pem", "not issued by the federation's CA"]),
        ({"party-2": "{root}/party-1.pem"}, ["party-1.pem", "names party-1, not party-2"]),
        ({"dealer": "{root}/party-1.key"}, ["party-1.key", "not a PEM certificate"]),
        ({"party-0": "{root}/nowhere.pem"}, ["nowhere.pem", "not found"]),
        ({"party-2": "{root}/server-only.pem"}, ["server-only.pem", "lacks clientAuth"]),
    ],
)
def test_describe_refuses_a_certificate_of_another_ca_or_role(pki, capsys, swap, fragments):
    root, paths = pki
    swap = {role: path.format(root=root) for role, path in swap.items()}
    assert_one_line_error(cli(capsys, *describe_args(root, paths, free_ports(4), **swap)), *fragments)
    assert not (root / "federation.json").exists()


@pytest.mark.parametrize(
    "members, fragments",
    [
        (["boss={root}/party-0.pem@127.0.0.1:7100"], ["--member", "'boss' is not a role"]),
        (["party-0={root}/party-0.pem"], ["--member", "ROLE=CERT.pem@HOST:PORT"]),
        (["party-0={root}/party-0.pem@127.0.0.1:7100", "party-0={root}/party-0.pem@127.0.0.1:7101"], ["given twice"]),
        (
            ["party-0={root}/party-0.pem@127.0.0.1:7100", "dealer={root}/dealer.pem@127.0.0.1:7109"],
            ["party-1 is missing"],
        ),
        (
            [f"{r}={{root}}/{r}.pem@127.0.0.1:7100" for r in ("party-0", "party-1", "dealer")],
            ["--member", "also party-0's address"],
        ),
    ],
)
def test_describe_refuses_bad_members(pki, capsys, members, fragments):
    root, _ = pki
    argv = ["federation", "describe", "--ca-cert", str(root / "ca.pem"), "--name", "f", "--out", str(root / "f.json")]
    argv += [f"--member={m.format(root=root)}" for m in members]
    assert_one_line_error(cli(capsys, *argv), *fragments)
    assert not (root / "f.json").exists()


# ---- show ---------------------------------------------------------------------------------------


def test_show_prints_members_pins_schema_and_ca(kit):
    out, _, ports = kit
    run = run_cli("federation", "show", out / "party-2" / "federation.json", timeout=120)
    assert run.returncode == 0, run.stderr
    fed = federation_file.load(out / "federation.json")
    for member, org, port in zip(fed.members, ORGS, ports):
        line = next(ln for ln in run.stdout.splitlines() if f" {member.role} " in ln)
        assert org in line and f"127.0.0.1:{port}" in line and member.sha256 in line
    assert fed.schema_sha256 in run.stdout
    assert "CN=adult-2026 CA" in run.stdout and "valid until 20" in run.stdout
    assert certs.fingerprint(fed.ca_pem) in run.stdout


def test_show_refuses_a_bad_file_in_one_line(tmp_path, kit, capsys):
    out, _, _ = kit
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    assert_one_line_error(cli(capsys, "federation", "show", bad), str(bad), "not valid JSON")
    content = json.loads((out / "federation.json").read_text())
    content["members"][1]["port"] = 0
    bad.write_text(json.dumps(content))
    assert_one_line_error(cli(capsys, "federation", "show", bad), str(bad), "members[1].port")
    assert_one_line_error(cli(capsys, "federation", "show", tmp_path / "none.json"), "none.json")
    assert_one_line_error(cli(capsys, "federation", "show", tmp_path), str(tmp_path), "folder")


def test_help_explains_every_option(capsys):
    for action, options in {
        "init": ["--out", "--name", "--party", "--dealer", "--schema", "--days", "--ca-days", "--no-pins", "--force"],
        "issue": ["--ca", "--federation", "--role", "--out", "--days", "--organisation", "--address", "--force"],
        "describe": ["--ca-cert", "--name", "--member", "--schema", "--no-pins", "--out", "--force"],
        "show": ["FILE"],
    }.items():
        run = cli(capsys, "federation", action, "--help")
        assert run.returncode == 0
        for option in options:
            assert option in run.stdout, (action, option)


def test_printed_text_keeps_paths_options_and_fingerprints_whole():
    """Wrapped at 40 columns, a path longer than the line stands whole on its own, and neither an
    option nor a fingerprint is broken, so each can be copied as printed."""
    from privsyn_fed.cli.bundle_text import lines_text, paragraphs

    path, pin = "/tmp/" + "x" * 60 + "/federation.json", "ab" * 32
    line = f"Send {path} to EVERY member, then run it with --federation-file; the new pin is {pin}"
    for text in (lines_text([line], width=40), paragraphs(line, width=40)):
        words = text.split()
        assert path in words and "--federation-file;" in words and pin in words
        assert max(len(row) for row in text.splitlines()) == len(path)
