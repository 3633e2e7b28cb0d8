import re

import pytest

from broker.security.jaas import (
    PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, JaasConfigError, JaasLoginModule, login_credentials, parse_jaas_config,
    parse_jaas_file, plain_users,
)
from broker.security.plain import (
    AUTHZID_MISMATCH, PlainAuthenticationError, PlainIllegalStateError, PlainServer, plain_client_message,
    static_authenticator,
)

USERS = {"admin": "admin-secret", "alice": "alice pw"}


# --- SASL/PLAIN ---

def test_plain_client_message():
    assert plain_client_message("alice", "pw") == b"\x00alice\x00pw"
    assert plain_client_message("alice", "pw", authzid="alice") == b"alice\x00alice\x00pw"
    with pytest.raises(ValueError):
        plain_client_message("a\x00b", "pw")


def test_plain_success():
    server = PlainServer(static_authenticator(USERS))
    assert not server.complete and server.username is None
    assert server.evaluate(plain_client_message("alice", "alice pw")) == b""
    assert server.complete and server.username == "alice"
    with pytest.raises(PlainIllegalStateError):
        server.evaluate(plain_client_message("alice", "alice pw"))


def test_plain_authzid_equal_to_username_and_utf8():
    server = PlainServer(static_authenticator({"jürgen": "pässwort"}))
    server.evaluate("jürgen\x00jürgen\x00pässwort".encode())
    assert server.username == "jürgen"


@pytest.mark.parametrize("message, error", [
    (b"\x00alice\x00wrong", "Authentication failed: Invalid username or password"),
    (b"\x00nobody\x00pw", "Authentication failed: Invalid username or password"),
    (b"admin\x00alice\x00alice pw", AUTHZID_MISMATCH),
    (b"\x00\x00pw", "Authentication failed: username not specified"),
    (b"\x00alice\x00", "Authentication failed: password not specified"),
    (b"alice\x00pw", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"a\x00b\x00c\x00d", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"a\x00b\x00c\x00d\x00e", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"\x00alice\x00\xff", "Invalid SASL/PLAIN response: not valid UTF-8"),
])
def test_plain_failures(message, error):
    server = PlainServer(static_authenticator(USERS))
    with pytest.raises(PlainAuthenticationError) as err:
        server.evaluate(message)
    assert str(err.value) == error
    assert not server.complete and server.username is None
    with pytest.raises(PlainIllegalStateError):
        server.evaluate(plain_client_message("alice", "alice pw"))


def test_plain_wrong_password_reported_before_authzid_mismatch():
    # Kafka checks the password first, so a wrong password never reveals anything about the authzid rule
    server = PlainServer(static_authenticator(USERS))
    with pytest.raises(PlainAuthenticationError, match="Invalid username or password"):
        server.evaluate(b"admin\x00alice\x00wrong")


def test_plain_uses_injected_authenticator():
    seen = []
    server = PlainServer(lambda u, p: seen.append((u, p)) is None)
    server.evaluate(plain_client_message("x", "y"))
    assert seen == [("x", "y")] and server.username == "x"


# --- JAAS config values ---

def test_parse_kafka_plain_jaas_config():
    text = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
    [module] = parse_jaas_config(text)
    assert module == JaasLoginModule(PLAIN_LOGIN_MODULE, "required", {
        "username": "admin", "password": "admin-secret", "user_admin": "admin-secret", "user_alice": "alice-secret"})
    assert plain_users([module]) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert login_credentials([module]) == ("admin", "admin-secret")


def test_quoted_values_unquoted_values_and_escapes():
    text = ('com.example.Module OPTIONAL a="with spaces = and ; inside" b=plain c="say \\"hi\\"" '
            "d='single' e=\"back\\\\slash\" f=x=y g=\"\" ;")
    [module] = parse_jaas_config(text)
    assert module.flag == "optional"
    assert module.options == {"a": "with spaces = and ; inside", "b": "plain", "c": 'say "hi"', "d": "single",
                              "e": "back\\slash", "f": "x=y", "g": ""}


def test_unquoted_value_runs_to_semicolon():
    [module] = parse_jaas_config("m.M required k=v;")
    assert module.options == {"k": "v"}


def test_several_modules_and_comments():
    text = """
        // broker login
        org.apache.kafka.common.security.scram.ScramLoginModule required
            username = "broker" /* inline */ password="broker-pw";
        org.apache.kafka.common.security.plain.PlainLoginModule sufficient user_bob="bob-pw";
        x.Y requisite;
    """
    modules = parse_jaas_config(text)
    assert [(m.class_name, m.flag) for m in modules] == [
        (SCRAM_LOGIN_MODULE, "required"), (PLAIN_LOGIN_MODULE, "sufficient"), ("x.Y", "requisite")]
    assert modules[2].options == {}
    assert login_credentials(modules) == ("broker", "broker-pw")
    assert plain_users(modules) == {"bob": "bob-pw"}


def test_plain_users_only_from_plain_module_and_first_wins():
    modules = parse_jaas_config(
        'x.Other required user_eve="e";'
        f'{PLAIN_LOGIN_MODULE} required user_a="1" user_="ignored";'
        f'{PLAIN_LOGIN_MODULE} optional user_a="2" user_b="3";')
    assert plain_users(modules) == {"a": "1", "b": "3"}


def test_login_credentials_missing():
    assert login_credentials(parse_jaas_config('a.B required username="only";')) is None
    assert login_credentials([]) is None


@pytest.mark.parametrize("text, problem", [
    ("", "Login module not specified in JAAS config"),
    ("  // just a comment\n", "Login module not specified in JAAS config"),
    ('a.B required k="v"', "not terminated by semi-colon"),
    ("a.B required", "not terminated by semi-colon"),
    ("a.B;", "control flag not specified"),
    ("a.B", "control flag not specified"),
    ('a.B mandatory k="v";', "Invalid login module control flag 'mandatory'"),
    ("a.B required k;", "Value not specified for key 'k'"),
    ("a.B required k=;", "Value not specified for key 'k'"),
    ("a.B required k=", "Value not specified for key 'k'"),
    ('a.B required k="unterminated;', "Unterminated quoted value for key 'k'"),
    ('a.B required /* open', "Unterminated /* comment"),
    ('"a.B" required;', "Expected login module class name"),
])
def test_jaas_config_errors(text, problem):
    with pytest.raises(JaasConfigError, match=re.escape(problem)) as err:
        parse_jaas_config(text)
    assert "\n" not in str(err.value)


def test_error_does_not_echo_values_and_names_position():
    with pytest.raises(JaasConfigError) as err:
        parse_jaas_config('a.B required\n  password="s3cret" bad')
    message = str(err.value)
    assert "s3cret" not in message and "line 2" in message


# --- JAAS files ---

JAAS_FILE = """
/* Kafka broker JAAS file */
KafkaServer {
   org.apache.kafka.common.security.plain.PlainLoginModule required
   username="admin"
   password="admin-secret"
   user_admin="admin-secret"
   user_alice="alice-secret";

   org.apache.kafka.common.security.scram.ScramLoginModule required;
};

// ZooKeeper client
Client {
   org.apache.zookeeper.server.auth.DigestLoginModule required
   username="zk" password="zk-secret";
};

sasl_ssl.KafkaServer { };
"""


def test_parse_jaas_file():
    sections = parse_jaas_file(JAAS_FILE)
    assert list(sections) == ["KafkaServer", "Client", "sasl_ssl.KafkaServer"]
    server = sections["KafkaServer"]
    assert [m.class_name for m in server] == [PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE]
    assert plain_users(server) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert login_credentials(server) == ("admin", "admin-secret")
    assert login_credentials(sections["Client"]) == ("zk", "zk-secret")
    assert sections["sasl_ssl.KafkaServer"] == []
    assert parse_jaas_file("  // nothing\n") == {}


@pytest.mark.parametrize("text, problem", [
    ("KafkaServer { a.B required; }", "not terminated by semi-colon after '}'"),
    ("KafkaServer { a.B required; ", "not closed by '}'"),
    ("KafkaServer { a.B required }; ", "not terminated by semi-colon"),
    ("KafkaServer a.B required; };", "Expected '{'"),
    ("A { a.B required; }; A { c.D optional; };", "Duplicate JAAS section 'A'"),
    ("{ a.B required; };", "Expected JAAS section name"),
])
def test_jaas_file_errors(text, problem):
    with pytest.raises(JaasConfigError, match=re.escape(problem)):
        parse_jaas_file(text)
