"""`kafkapy acls`, the kafka-acls.sh of kafkapy, against a broker with the ACL authorizer (the
plaintext principal, User:ANONYMOUS, is a super user): --add, --list and --remove, output checked."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest

from kafkapy import Broker
from kafkapy.cli import main


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"authorizer.class.name": "acl", "super.users": "User:ANONYMOUS"}) as running:
        yield running


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["acls", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_add_list_remove(broker: Broker, capsys: pytest.CaptureFixture[str],
                         monkeypatch: pytest.MonkeyPatch) -> None:
    bs = ("--bootstrap-server", broker.bootstrap_servers)
    code, out, err = run(capsys, *bs, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                         "--operation", "Describe", "--topic", "orders")
    assert (code, err) == (0, "")
    orders = "`ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`"
    assert out == (
        f"Adding ACLs for resource {orders}: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n"
        f"Current ACLs for resource {orders}: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n")
    code, out, _ = run(capsys, *bs, "--add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.9",
                       "--group", "app-", "--resource-pattern-type", "prefixed")
    assert code == 0 and "(principal=User:bob, host=10.0.0.9, operation=ALL, permissionType=DENY)" in out

    code, out, _ = run(capsys, *bs, "--list")
    assert code == 0
    assert out.count("Current ACLs for resource") == 2
    assert "`ResourcePattern(resourceType=GROUP, name=app-, patternType=PREFIXED)`" in out
    code, out, _ = run(capsys, *bs, "--list", "--topic", "orders", "--principal", "User:bob")
    assert (code, out) == (0, "ACLs for principal `User:bob`\n")

    code, out, _ = run(capsys, *bs, "--remove", "--force", "--allow-principal", "User:alice", "--operation",
                       "Read", "--topic", "orders")
    assert code == 0 and "operation=READ" not in out and "operation=DESCRIBE" in out
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))  # asked, and answered no: nothing goes
    code, out, _ = run(capsys, *bs, "--remove", "--topic", "orders")
    assert code == 0 and "Are you sure you want to delete all ACLs for resource filter" in out
    assert "operation=DESCRIBE" in out
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    code, out, _ = run(capsys, *bs, "--remove", "--topic", "orders")
    assert code == 0 and "operation=DESCRIBE" not in out
    code, out, _ = run(capsys, *bs, "--list")
    assert out.count("Current ACLs for resource") == 1 and "name=app-" in out


def test_errors_are_one_line(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    bs = ("--bootstrap-server", broker.bootstrap_servers)
    code, _, err = run(capsys, *bs, "--add", "--allow-principal", "alice", "--topic", "t")
    assert (code, err) == (1, "kafkapy acls: principal 'alice' is not Type:name (User:alice)\n")
    code, _, err = run(capsys, *bs, "--add", "--allow-principal", "User:a", "--topic", "t",
                       "--resource-pattern-type", "MATCH")
    assert code == 1 and "is not one of LITERAL, PREFIXED here" in err
    code, _, err = run(capsys, *bs, "--add", "--allow-principal", "User:a", "--operation", "Fly",
                       "--topic", "t")
    assert (code, err) == (1, "kafkapy acls: --operation Fly is not an ACL operation\n")


def test_without_the_acl_authorizer(capsys: pytest.CaptureFixture[str]) -> None:
    with Broker() as plain:
        code, _, err = run(capsys, "--bootstrap-server", plain.bootstrap_servers, "--list")
    assert (code, err) == (
        1, "kafkapy acls: DescribeAcls failed: SECURITY_DISABLED: "
           "No Authorizer is configured on the broker\n")


def _granted(out: str) -> set[tuple[str, str]]:
    """(resource line, operation) of every ACL in a listing."""
    found: set[tuple[str, str]] = set()
    resource = ""
    for line in out.splitlines():
        if line.startswith("Current ACLs for resource"):
            resource = line.split("`")[1]
        elif "operation=" in line:
            found.add((resource, line.split("operation=")[1].split(",")[0]))
    return found


def test_producer_and_consumer_roles(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    """kafka-acls.sh's --producer, --consumer and --idempotent: the roles' ACLs on the resources named
    (kafkapy refused the options)."""
    bs = ("--bootstrap-server", broker.bootstrap_servers)
    code, _, err = run(capsys, *bs, "--add", "--allow-principal", "User:alice", "--producer", "--idempotent",
                       "--topic", "orders", "--transactional-id", "tx")
    assert (code, err) == (0, "")
    code, _, _ = run(capsys, *bs, "--add", "--allow-principal", "User:bob", "--consumer", "--topic", "orders",
                     "--group", "billing")
    assert code == 0
    code, out, _ = run(capsys, *bs, "--list")
    topic = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
    assert _granted(out) == {
        (topic, "WRITE"), (topic, "DESCRIBE"), (topic, "CREATE"), (topic, "READ"),
        ("ResourcePattern(resourceType=TRANSACTIONAL_ID, name=tx, patternType=LITERAL)", "WRITE"),
        ("ResourcePattern(resourceType=TRANSACTIONAL_ID, name=tx, patternType=LITERAL)", "DESCRIBE"),
        ("ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)",
         "IDEMPOTENT_WRITE"),
        ("ResourcePattern(resourceType=GROUP, name=billing, patternType=LITERAL)", "READ")}
    assert "(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)" in out

    code, _, _ = run(capsys, *bs, "--remove", "--force", "--allow-principal", "User:bob", "--consumer",
                     "--topic", "orders", "--group", "billing")
    assert code == 0
    code, out, _ = run(capsys, *bs, "--list")
    assert "User:bob" not in out and (topic, "WRITE") in _granted(out)

    for refused, said in ((("--add", "--allow-principal", "User:a", "--producer"), "--producer you must"),
                          (("--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"),
                           "With --consumer you must specify a --topic and a --group"),
                          (("--add", "--allow-principal", "User:a", "--idempotent", "--topic", "t"),
                           "only available if --producer"),
                          (("--add", "--deny-principal", "User:a", "--producer", "--topic", "t"),
                           "allow only")):
        code, _, err = run(capsys, *bs, *refused)
        assert code == 1 and said in err and err.count("\n") == 1


def test_list_filters_as_kafka_acls_does(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    """--list --topic T shows T's LITERAL pattern unless --resource-pattern-type says otherwise, and
    --principal prints a block per principal with only its ACLs, as kafka-acls.sh (kafkapy listed
    every pattern type of the name, and principals' ACLs without their heading)."""
    bs = ("--bootstrap-server", broker.bootstrap_servers)
    for principal, pattern in (("User:alice", "literal"), ("User:bob", "prefixed"),
                               ("User:carol", "literal")):
        code, _, _ = run(capsys, *bs, "--add", "--allow-principal", principal, "--operation", "Read",
                         "--topic", "orders", "--resource-pattern-type", pattern)
        assert code == 0
    code, out, _ = run(capsys, *bs, "--list", "--topic", "orders")
    assert code == 0 and "patternType=PREFIXED" not in out and out.count("Current ACLs") == 1
    code, out, _ = run(capsys, *bs, "--list", "--topic", "orders", "--resource-pattern-type", "any")
    assert code == 0 and out.count("Current ACLs") == 2
    code, out, _ = run(capsys, *bs, "--list", "--principal", "User:alice", "--principal", "User:bob")
    orders = "ResourcePattern(resourceType=TOPIC, name=orders, patternType="
    assert out == (
        "ACLs for principal `User:alice`\n"
        f"Current ACLs for resource `{orders}LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n\n"
        "ACLs for principal `User:bob`\n"
        f"Current ACLs for resource `{orders}PREFIXED)`: \n"
        " \t(principal=User:bob, host=*, operation=READ, permissionType=ALLOW) \n\n")
    code, _, err = run(capsys, *bs, "--remove", "--topic", "orders", "--principal", "User:bob", "--force")
    assert code == 1 and "only available if --list" in err


def test_flags_are_checked_before_anything_is_sent(broker: Broker,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """As kafka-acls.sh checks its options first: a --remove with --principal (a --list option)
    is refused with nothing removed (kafkapy deleted the ACLs, then refused the flag), and a bad
    flag is named even when no broker answers (kafkapy said it could not connect)."""
    bs = ("--bootstrap-server", broker.bootstrap_servers)
    assert run(capsys, *bs, "--add", "--allow-principal", "User:bob", "--operation", "Read",
               "--topic", "kept")[0] == 0
    code, out, err = run(capsys, *bs, "--remove", "--force", "--topic", "kept", "--principal", "User:bob")
    assert (code, out) == (1, "")
    assert err == "kafkapy acls: The --principal option is only available if --list is set\n"
    code, out, _ = run(capsys, *bs, "--list", "--topic", "kept")
    assert code == 0 and "principal=User:bob" in out
    for refused, said in ((("--add", "--allow-principal", "alice", "--topic", "t"), "is not Type:name"),
                          (("--add", "--topic", "t"), "--add needs a resource"),
                          (("--list", "--resource-pattern-type", "Fancy"), "Fancy"),
                          (("--remove", "--producer"), "With --producer you must specify a --topic")):
        code, _, err = run(capsys, "--bootstrap-server", "127.0.0.1:1", *refused)
        assert code == 1 and said in err and "connect" not in err and err.count("\n") == 1, err
