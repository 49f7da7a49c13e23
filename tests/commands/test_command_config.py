"""``--command-config``: the CLI tools log in to secured brokers with Kafka's client properties
(SASL PLAIN, SCRAM and OAUTHBEARER's unsecured tokens, TLS with Kafka's key and trust stores), and say in one
line what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkapy import Broker
from kafkapy.cli import main
from kafkapy.commands._security import read_properties
from kafkapy.testing import BrokerFactory

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def properties(tmp_path: Path, name: str, **values: str) -> str:
    path = tmp_path / name
    path.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
    return str(path)


def plain_login(user: str, password: str) -> str:
    return (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{user}" '
            f'password="{password}";')


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def acl_broker(kafka_broker_factory: BrokerFactory) -> Broker:
    return kafka_broker_factory({"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                 "sasl.enabled.mechanisms": "PLAIN",
                                 "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                                 "authorizer.class.name": "acl", "super.users": "User:admin"})


def test_acls_and_topics_over_sasl_plain(acl_broker: Broker, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    admin = properties(tmp_path, "admin.properties", **{
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": plain_login("admin", "admin-secret")})
    alice = properties(tmp_path, "alice.properties", **{
        "security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": plain_login("alice", "alice-secret")})
    bs = ("--bootstrap-server", acl_broker.bootstrap_servers)
    acl_broker.seed({"orders": {"partitions": 1}, "payments": {"partitions": 1}})
    code, out, err = run(capsys, "acls", *bs, "--command-config", admin, "--add", "--allow-principal",
                         "User:alice", "--operation", "Describe", "--topic", "orders")
    assert (code, err) == (0, "") and "operation=DESCRIBE, permissionType=ALLOW" in out
    # alice sees only the topic she may DESCRIBE; admin, a super user, sees both.
    code, out, err = run(capsys, "topics", *bs, "--command-config", alice, "--list")
    assert (code, err, out.split()) == (0, "", ["orders"])
    code, out, _ = run(capsys, "topics", *bs, "--command-config", admin, "--list")
    assert out.split() == ["orders", "payments"]
    # Without logging in, the SASL listener does not talk to the tool.
    code, _, err = run(capsys, "topics", *bs, "--list", "--timeout", "3")
    assert code == 1 and err.count("\n") == 1


def test_a_wrong_password_is_one_line(acl_broker: Broker, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    wrong = properties(tmp_path, "wrong.properties", **{"security.protocol": "SASL_PLAINTEXT",
                                                         "sasl.jaas.config": plain_login("alice", "nope")})
    code, _, err = run(capsys, "topics", "--bootstrap-server", acl_broker.bootstrap_servers,
                       "--command-config", wrong, "--list")
    assert code == 1 and err.count("\n") == 1
    assert "refused the login: Authentication failed: Invalid username or password" in err


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_over_tls(kafka_broker_factory: BrokerFactory, tmp_path: Path,
                        capsys: pytest.CaptureFixture[str], mechanism: str) -> None:
    import trustme
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")
    (tmp_path / "server.pem").write_bytes(b"".join(blob.bytes() for blob in server.cert_chain_pems))
    server.private_key_pem.write_to_path(str(tmp_path / "server.key"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    broker = kafka_broker_factory({"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                                   "sasl.enabled.mechanisms": mechanism,
                                   "ssl.certfile": str(tmp_path / "server.pem"),
                                   "ssl.keyfile": str(tmp_path / "server.key")})
    kind = ScramMechanism.SCRAM_SHA_256 if mechanism.endswith("256") else ScramMechanism.SCRAM_SHA_512
    upsert = UserScramCredentialUpsertion("sam", ScramCredentialInfo(kind, 4096), b"sam-secret")
    admin = AdminClient({"bootstrap.servers": broker.listeners["PLAINTEXT"]})
    for future in admin.alter_user_scram_credentials([upsert]).values():
        assert future.result(10) is None
    broker.seed({"scrammed": {"partitions": 2}})
    login = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="sam" '
             'password="sam-secret";')
    config = properties(tmp_path, "sam.properties", **{
        "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism, "sasl.jaas.config": login,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tmp_path / "ca.pem")})
    code, out, err = run(capsys, "topics", "--bootstrap-server", broker.listeners["SASL_SSL"],
                         "--command-config", config, "--list")
    assert (code, err, out.split()) == (0, "", ["scrammed"])
    wrong = properties(tmp_path, "wrong.properties", **{
        "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
        "sasl.jaas.config": login.replace("sam-secret", "guess"),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tmp_path / "ca.pem")})
    code, _, err = run(capsys, "topics", "--bootstrap-server", broker.listeners["SASL_SSL"],
                       "--command-config", wrong, "--list")
    assert code == 1 and "refused the login" in err and err.count("\n") == 1
    # A broker certificate the trust store does not vouch for fails the handshake, in one line.
    untrusted = properties(tmp_path, "untrusted.properties", **{
        "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism, "sasl.jaas.config": login})
    code, _, err = run(capsys, "topics", "--bootstrap-server", broker.listeners["SASL_SSL"],
                       "--command-config", untrusted, "--list")
    assert code == 1 and "TLS handshake" in err and "CERTIFICATE_VERIFY_FAILED" in err


def _continued(pem: str) -> str:
    """PEM as a .properties value: one logical line continued with backslashes."""
    return " \\\n    ".join(pem.strip().split("\n"))


def test_client_certificates_from_kafkas_pem_and_pkcs12_stores(kafka_broker_factory: BrokerFactory,
                                                               tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A tool's key store as Kafka's clients read it: PEM in a file or inline (chain and key, an
    encrypted key with ssl.key.password), trust from PEM or a PKCS12 store named .jks (Java's
    default type); kafkapy read a PEM key store file and a PEM trust store only. The broker asks
    for certificates on MTLS alone (listener.name.mtls.ssl.client.auth)."""
    import trustme
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509 import load_pem_x509_certificate

    ca = trustme.CA()
    server, client = ca.issue_cert("127.0.0.1"), ca.issue_cert("tool@example.com", common_name="tool")
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), None)

    def pkcs8(password: str | None) -> str:
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode()) if password
            else serialization.NoEncryption())
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 encryption).decode()

    chain = "".join(blob.bytes().decode() for blob in client.cert_chain_pems)
    (tmp_path / "server.pem").write_bytes(b"".join(blob.bytes() for blob in server.cert_chain_pems))
    server.private_key_pem.write_to_path(str(tmp_path / "server.key"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    (tmp_path / "client.pem").write_text(pkcs8(None) + chain)
    ca_certificate = load_pem_x509_certificate(ca.cert_pem.bytes())
    (tmp_path / "truststore.jks").write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [ca_certificate], serialization.BestAvailableEncryption(b"trust-secret")))
    broker = kafka_broker_factory({"listeners": "PLAINTEXT://127.0.0.1:0,MTLS://127.0.0.1:0",
                                   "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,MTLS:SSL",
                                   "ssl.certfile": str(tmp_path / "server.pem"),
                                   "ssl.keyfile": str(tmp_path / "server.key"),
                                   "ssl.cafile": str(tmp_path / "ca.pem"),
                                   "listener.name.mtls.ssl.client.auth": "required"})
    broker.seed({"over-mtls": {"partitions": 1}})
    pem_trust = f"ssl.truststore.type=PEM\nssl.truststore.location={tmp_path / 'ca.pem'}\n"
    configs = {
        "pem-file": f"ssl.keystore.type=PEM\nssl.keystore.location={tmp_path / 'client.pem'}\n{pem_trust}",
        "pem-inline": (f"ssl.keystore.type=PEM\nssl.keystore.certificate.chain={_continued(chain)}\n"
                       f"ssl.keystore.key={_continued(pkcs8('key-secret'))}\nssl.key.password=key-secret\n"
                       f"ssl.truststore.certificates={_continued(ca.cert_pem.bytes().decode())}\n"
                       "ssl.truststore.type=PEM\n"),
        "pkcs12-trust": (f"ssl.keystore.type=PEM\nssl.keystore.location={tmp_path / 'client.pem'}\n"
                         f"ssl.truststore.location={tmp_path / 'truststore.jks'}\n"
                         "ssl.truststore.password=trust-secret\n"),
        "no-certificate": pem_trust,
    }
    for name, text in configs.items():
        path = tmp_path / f"{name}.properties"
        path.write_text("security.protocol=SSL\n" + text)
        code, out, err = run(capsys, "topics", "--bootstrap-server", broker.listeners["MTLS"],
                             "--command-config", str(path), "--list")
        if name == "no-certificate":  # the handshake is refused: one line
            assert code == 1 and err.count("\n") == 1 and out == "", err
        else:
            assert (code, err, out.split()) == (0, "", ["over-mtls"]), name


@pytest.mark.parametrize(("values", "message"), [
    ({"security.protocol": "SASL_PLAIN"}, "security.protocol 'SASL_PLAIN' is not one of"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "needs sasl.jaas.config"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": "x"},
     "sasl.mechanism GSSAPI is not one kafkapy's tools speak"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": 'Mod required username="u" password="p'},
     "unterminated quoted value"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/x.jks"},
     "Failed to load SSL keystore /x.jks of type JKS: No such file or directory"),
    # Kafka's client checks its stores as its broker does, in the same words
    ({"security.protocol": "SSL", "ssl.keystore.type": "PEM", "ssl.keystore.key": "k"},
     "SSL private key is specified, but certificate chain is not specified."),
    ({"security.protocol": "SSL", "ssl.keystore.type": "BKS", "ssl.keystore.location": "/x.bks",
      "ssl.keystore.password": "p"}, "ssl.keystore.type BKS is not one kafkapy reads"),
])
def test_bad_properties_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     values: dict[str, str], message: str) -> None:
    config = properties(tmp_path, "bad.properties", **values)
    code, _, err = run(capsys, "topics", "--bootstrap-server", "127.0.0.1:9", "--command-config", config,
                       "--list")
    assert code == 1 and message in err and err.count("\n") == 1


OAUTH_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"


def test_oauthbearer_with_kafkas_unsecured_login_options(
        kafka_broker_factory: BrokerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The file a Java tool takes for an unsecured OAUTHBEARER login works unchanged: the token is
    made from the unsecuredLogin* options; the broker's required scope and the ACLs apply to it."""
    broker = kafka_broker_factory({
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            f'{OAUTH_LOGIN} unsecuredValidatorRequiredScope="kafka";',
        "authorizer.class.name": "acl", "super.users": "User:admin"})
    broker.seed({"orders": {"partitions": 1}, "payments": {"partitions": 1}})

    def login(jaas_options: str) -> str:
        return properties(tmp_path, "oauth.properties", **{
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": f"{OAUTH_LOGIN} {jaas_options};"})

    bs = ("--bootstrap-server", broker.bootstrap_servers)
    admin = login('unsecuredLoginStringClaim_sub="admin" unsecuredLoginListClaim_scope=",kafka,other" '
                  'unsecuredLoginExtension_traceId="t-1"')
    code, out, err = run(capsys, "acls", *bs, "--command-config", admin, "--add", "--allow-principal",
                         "User:alice", "--operation", "Describe", "--topic", "orders")
    assert (code, err) == (0, "") and "operation=DESCRIBE, permissionType=ALLOW" in out
    alice = login('unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope="|kafka" '
                  'unsecuredLoginLifetimeSeconds="60"')
    code, out, err = run(capsys, "topics", *bs, "--command-config", alice, "--list")
    assert (code, err, out.split()) == (0, "", ["orders"])
    unscoped = login('unsecuredLoginStringClaim_sub="alice"')
    code, _, err = run(capsys, "topics", *bs, "--command-config", unscoped, "--list")
    assert code == 1 and err.count("\n") == 1
    assert 'refused the login: {"status":"insufficient_scope", "scope":"[kafka]"}' in err


SUB = 'unsecuredLoginStringClaim_sub="a"'


@pytest.mark.parametrize(("jaas_options", "message"), [
    ("", "needs unsecuredLogin* options to make a token"),
    ('unsecuredLoginExtension_a="b"', "needs unsecuredLogin* options to make a token"),
    ('unsecuredLoginStringClaim_name="alice"', "no 'sub' claim to name the principal"),
    (f'{SUB} unsecuredLoginNumberClaim_exp="1"', "Cannot explicitly set the 'exp' claim"),
    (f'{SUB} unsecuredLoginNumberClaim_n="x"', "unsecuredLoginNumberClaim_n is not a number"),
    (f'{SUB} unsecuredLoginLifetimeSeconds="1h"', "is not a whole number of seconds"),
    (f'{SUB} unsecuredLoginExtension_auth="x"', "Extension name auth is invalid"),
    (f'{SUB} unsecuredLoginExtension_a1="x"', "Extension name a1 is invalid"),
])
def test_bad_oauthbearer_logins_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             jaas_options: str, message: str) -> None:
    config = properties(tmp_path, "oauth.properties", **{
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": f"{OAUTH_LOGIN} {jaas_options};"})
    code, _, err = run(capsys, "topics", "--bootstrap-server", "127.0.0.1:9", "--command-config", config,
                       "--list")
    assert code == 1 and message in err and err.count("\n") == 1


def test_the_unsecured_token_is_kafkas() -> None:
    """Claims as OAuthBearerUnsecuredLoginCallbackHandler makes them: exp and iat in seconds from
    the clock, string, number and list claims (a list's first character separates it), and the
    client first message of RFC 7628 with the extensions."""
    import base64
    import json

    from kafkapy.commands._oauthbearer import client_first_message, unsecured_login
    from kafkapy.server.sasl.unsecured_jws import parse_unsecured_jws

    token, extensions = unsecured_login({
        "unsecuredLoginStringClaim_sub": "alice", "unsecuredLoginNumberClaim_level": "2",
        "unsecuredLoginListClaim_scope": " a b", "unsecuredLoginListClaim_empty": ",x,,y",
        "unsecuredLoginLifetimeSeconds": "60", "unsecuredLoginExtension_traceId": "t-1"},
        "test", now_s=lambda: 1000.5)
    header, claims, signature = token.split(".")
    assert signature == "" and json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "none"}
    assert json.loads(base64.urlsafe_b64decode(claims + "==")) == {
        "exp": 1060.5, "iat": 1000.5, "sub": "alice", "level": 2.0, "scope": ["a", "b"],
        "empty": ["x", "y", ""]}
    parsed = parse_unsecured_jws(token)
    assert parsed.principal_name == "alice" and parsed.scope == {"a", "b"}
    assert extensions == {"traceId": "t-1"}
    # The principal may sit in another claim (the broker's validator must then be told so too).
    other, _ = unsecured_login({"unsecuredLoginStringClaim_user": "bob",
                                "unsecuredLoginPrincipalClaimName": "user"}, "test")
    assert parse_unsecured_jws(other, principal_claim_name="user").principal_name == "bob"
    expected = f"n,,\x01auth=Bearer {token}\x01traceId=t-1\x01\x01".encode()
    assert client_first_message(token, extensions) == expected


def test_java_properties_syntax(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("# a comment\n! another\n\nsecurity.protocol = SASL_SSL\nsasl.mechanism: PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
                    '    username="u" password="p";\nempty\n')
    assert read_properties(str(path)) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
                            'password="p";',
        "empty": ""}


def test_configs_sets_scram_credentials_a_client_logs_in_with(
        kafka_broker_factory: BrokerFactory, capsys: pytest.CaptureFixture[str]) -> None:
    """kafka-configs.sh's way to make a SCRAM user, --add-config 'SCRAM-SHA-256=[...]' on a user,
    through AlterUserScramCredentials; --describe shows the credential, --delete-config removes it
    (kafkapy refused the value as not a number)."""
    import confluent_kafka
    import confluent_kafka.admin

    broker = kafka_broker_factory({"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                                   "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"})
    base = ("configs", "--bootstrap-server", broker.listeners["PLAINTEXT"])
    user = ("--entity-type", "users", "--entity-name", "sam")
    code, out, err = run(capsys, *base, *user, "--alter", "--add-config",
                         "SCRAM-SHA-256=[iterations=8192,password=sam-secret],SCRAM-SHA-512=[password=s2]")
    assert (code, out, err) == (0, "Completed updating config for user sam.\n", "")
    code, out, _ = run(capsys, *base, *user, "--describe")
    assert (code, out) == (0, "SCRAM credential configs for user-principal 'sam' are "
                              "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")

    def metadata(mechanism: str, password: str) -> bool:
        admin = confluent_kafka.admin.AdminClient({
            "bootstrap.servers": broker.listeners["SASL_PLAINTEXT"], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": "sam", "sasl.password": password})
        try:
            admin.list_topics(timeout=5)
        except confluent_kafka.KafkaException:
            return False
        return True

    assert metadata("SCRAM-SHA-256", "sam-secret") and metadata("SCRAM-SHA-512", "s2")
    assert not metadata("SCRAM-SHA-256", "guess")
    code, _, _ = run(capsys, *base, *user, "--alter", "--delete-config", "SCRAM-SHA-512")
    assert code == 0
    code, out, _ = run(capsys, *base, *user, "--describe")
    assert out == "SCRAM credential configs for user-principal 'sam' are SCRAM-SHA-256=iterations=8192\n"
    for refused, said in (
            (("--alter", "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]", *user),
             "Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-256"),
            (("--alter", "--add-config", "SCRAM-SHA-256=[pass=x]", *user), "Invalid credential property"),
            (("--alter", "--add-config", "SCRAM-SHA-256=[password=x],producer_byte_rate=10", *user),
             "Cannot alter both quota and SCRAM credential configs"),
            (("--alter", "--add-config", "SCRAM-SHA-256=[password=x]", "--entity-type", "users",
              "--entity-default"), "--entity-default or --user-defaults is not allowed"),
            (("--alter", "--add-config", "SCRAM-SHA-256=[password=x]", "--client", "c"),
             "Only quota configs can be altered for 'clients'")):
        code, _, err = run(capsys, *base, *refused)
        assert code == 2 and said in err and err.count("\n") == 1
