import base64
import hashlib
import hmac

import pytest

from broker.security.scram import (
    AUTHZID_MISMATCH, SCRAM_SHA_1, SCRAM_SHA_256, SCRAM_SHA_512, ScramAuthenticationError, ScramClient,
    ScramCredential, ScramIllegalStateError, ScramServer, escape_saslname, format_credential, parse_credential,
    scram_mechanism, unescape_saslname,
)

MECHS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]


def lookup_for(users):
    return lambda name: users.get(name)


def exchange(server, client):
    server_first = server.evaluate(client.first_message())
    client_final = client.final_message(server_first)
    server_final = server.evaluate(client_final)
    client.verify_server_final(server_final)
    return server_first, client_final, server_final


def generic(mech):
    return ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
            + mech)


# --- mechanisms and credentials ---

def test_mechanism_lookup():
    assert scram_mechanism("SCRAM-SHA-256") is SCRAM_SHA_256
    assert scram_mechanism("SCRAM-SHA-512") is SCRAM_SHA_512
    assert SCRAM_SHA_256.hash_name == "sha256" and SCRAM_SHA_512.hash_name == "sha512"
    assert SCRAM_SHA_256.min_iterations == SCRAM_SHA_512.min_iterations == 4096
    assert scram_mechanism("SCRAM-SHA-1") is None
    assert scram_mechanism("scram-sha-256") is None
    with pytest.raises(ValueError, match="Unsupported SCRAM mechanism"):
        ScramCredential.from_password("SCRAM-SHA-1", "x")


def test_credential_matches_rfc5802_definition():
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pencil", salt=salt, iterations=4096)
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    assert cred.stored_key == hashlib.sha256(client_key).digest()
    assert cred.server_key == hmac.new(salted, b"Server Key", "sha256").digest()
    assert cred.salt == salt and cred.iterations == 4096
    assert "stored_key" not in repr(cred)


def test_random_salt_differs():
    a = ScramCredential.from_password(SCRAM_SHA_512, "pw")
    b = ScramCredential.from_password(SCRAM_SHA_512, "pw")
    assert a.salt != b.salt and len(a.stored_key) == 64


@pytest.mark.parametrize("mech", MECHS)
def test_credential_format_round_trip(mech):
    cred = ScramCredential.from_password(mech, "secret", iterations=8192)
    text = format_credential(cred)
    assert text.startswith("salt=") and ",stored_key=" in text and ",server_key=" in text
    assert text.endswith(",iterations=8192")
    assert parse_credential(text) == cred


def test_credential_text_in_kafka_format_built_by_hand():
    salt = b"1nxiyzd0h7tl4orynmmbs1zqm"  # Kafka's tools use an ASCII base-36 random salt
    salted = hashlib.pbkdf2_hmac("sha512", "alice-secret".encode(), salt, 4096)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha512).digest()
    stored = hashlib.sha512(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha512).digest()
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    text = f"salt={b64(salt)},stored_key={b64(stored)},server_key={b64(server_key)},iterations=4096"

    cred = parse_credential(text)
    assert cred == ScramCredential(salt, stored, server_key, 4096)
    assert format_credential(cred) == text
    assert cred == ScramCredential.from_password("SCRAM-SHA-512", "alice-secret", salt=salt)
    server = ScramServer("SCRAM-SHA-512", lookup_for({"alice": cred}))
    exchange(server, ScramClient("SCRAM-SHA-512", "alice", "alice-secret"))
    assert server.complete and server.username == "alice"


def test_parse_credential_key_order_is_free():
    cred = ScramCredential.from_password("SCRAM-SHA-256", "x")
    items = format_credential(cred).split(",")
    assert parse_credential(",".join(reversed(items))) == cred


@pytest.mark.parametrize("text, problem", [
    ("", "item 1 is not key=value"),
    ("salt=AAAA,stored_key=AAAA,server_key=AAAA", "missing iterations"),
    ("salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=4096,extra=1", "unknown key 'extra'"),
    ("salt=AAAA,salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=1", "duplicate key 'salt'"),
    ("salt=A!AA,stored_key=AAAA,server_key=AAAA,iterations=4096", "salt is not"),
    ("salt=AAAA,stored_key=AAA,server_key=AAAA,iterations=4096", "stored_key is not"),
    ("salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=x", "iterations is not a positive integer"),
    ("salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=0", "iterations is not a positive integer"),
    ("salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=-1", "iterations is not a positive integer"),
    ("salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations", "item 4 is not key=value"),
])
def test_parse_credential_rejects(text, problem):
    with pytest.raises(ValueError, match="Invalid SCRAM credential: " + problem):
        parse_credential(text)


def test_saslname_escaping():
    assert escape_saslname("a,b=c") == "a=2Cb=3Dc"
    assert unescape_saslname("a=2Cb=3Dc") == "a,b=c"
    for bad in ("", "a=", "a=2c", "a=41", "a\x00"):
        assert unescape_saslname(bad) is None


# --- RFC test vectors ---

def test_rfc5802_sha1_vector():
    salt = base64.b64decode("QSXCR+Q6sek8bf92")
    cred = ScramCredential.from_password(SCRAM_SHA_1, "pencil", salt=salt, iterations=4096)
    server = ScramServer(SCRAM_SHA_1, lookup_for({"user": cred}), server_nonce="3rfcNHYJY1ZVvWVs7j")
    client = ScramClient(SCRAM_SHA_1, "user", "pencil", nonce="fyko+d2lbbFgONRv9qkxdawL")
    first = client.first_message()
    assert first == b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL"
    server_first = server.evaluate(first)
    assert server_first == b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"
    final = client.final_message(server_first)
    assert final == b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
    assert server.evaluate(final) == b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ="
    client.verify_server_final(b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=")
    assert server.complete and client.complete and server.username == "user"


def test_rfc7677_sha256_vector():
    full = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    cred = ScramCredential.from_password(SCRAM_SHA_256, "pencil", base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    server = ScramServer("SCRAM-SHA-256", lookup_for({"user": cred}), server_nonce=full[len("rOprNGfwEbeRWgbNEkqO"):])
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first_message() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert server_first == f"r={full},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
    final = client.final_message(server_first)
    assert final == f"c=biws,r={full},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=".encode()
    server_final = server.evaluate(final)
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    client.verify_server_final(server_final)
    assert server.complete and client.complete


# --- round trips and failures ---

@pytest.mark.parametrize("mech", MECHS)
def test_round_trip(mech):
    users = {"alice": ScramCredential.from_password(mech, "alice-secret")}
    server = ScramServer(mech, lookup_for(users))
    client = ScramClient(mech, "alice", "alice-secret")
    server_first, _, server_final = exchange(server, client)
    assert server_first.startswith(b"r=") and server_final.startswith(b"v=")
    assert server.complete and client.complete
    assert server.username == server.principal_name == "alice"
    assert not server.token_authenticated


def test_username_with_escaped_characters():
    name = "weird,user=1"
    server = ScramServer("SCRAM-SHA-256", lookup_for({name: ScramCredential.from_password("SCRAM-SHA-256", "p")}))
    client = ScramClient("SCRAM-SHA-256", name, "p")
    assert b"n=weird=2Cuser=3D1," in client.first_message()
    exchange(server, ScramClient("SCRAM-SHA-256", name, "p"))
    assert server.username == name


def test_non_ascii_password_and_user():
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pässwörd")
    server = ScramServer("SCRAM-SHA-256", lookup_for({"jürgen": cred}))
    exchange(server, ScramClient("SCRAM-SHA-256", "jürgen", "pässwörd"))
    assert server.username == "jürgen"


@pytest.mark.parametrize("mech", MECHS)
def test_wrong_password_and_unknown_user_fail_identically_at_final_step(mech):
    users = {"alice": ScramCredential.from_password(mech, "alice-secret")}
    errors = []
    for user, password in (("alice", "wrong"), ("mallory", "alice-secret")):
        server = ScramServer(mech, lookup_for(users))
        client = ScramClient(mech, user, password)
        server_first = server.evaluate(client.first_message())  # first step succeeds for both
        assert b",s=" in server_first and server_first.endswith(b",i=4096")
        with pytest.raises(ScramAuthenticationError) as err:
            server.evaluate(client.final_message(server_first))
        errors.append(str(err.value))
        assert not server.complete and server.username is None
    assert errors == [generic(mech)] * 2


def test_unknown_user_gets_a_stable_salt():
    def salt_for(user):
        server = ScramServer("SCRAM-SHA-256", lookup_for({}))
        first = server.evaluate(ScramClient("SCRAM-SHA-256", user, "x").first_message()).decode()
        return first.split(",")[1]
    assert salt_for("ghost") == salt_for("ghost")
    assert salt_for("ghost") != salt_for("phantom")


def test_unknown_user_with_correct_looking_proof_still_fails():
    # even a client that somehow matched the fake salt cannot authenticate as a user that does not exist
    server = ScramServer("SCRAM-SHA-256", lookup_for({}))
    client = ScramClient("SCRAM-SHA-256", "ghost", "")
    final = client.final_message(server.evaluate(client.first_message()))
    with pytest.raises(ScramAuthenticationError):
        server.evaluate(final)


def test_tampered_nonce_fails():
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lookup_for({"u": cred}))
    client = ScramClient("SCRAM-SHA-256", "u", "pw")
    final = client.final_message(server.evaluate(client.first_message())).decode()
    c, r, p = final.split(",")
    with pytest.raises(ScramAuthenticationError, match="invalid credentials") as err:
        server.evaluate(f"{c},{r}X,{p}".encode())
    assert "nonce" in err.value.detail
    with pytest.raises(ScramIllegalStateError):
        server.evaluate(final.encode())  # a failed exchange cannot be resumed


def test_tampered_proof_and_channel_binding_fail():
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    for tamper in (lambda c, r, p: f"{c},{r},p={base64.b64encode(bytes(32)).decode()}",
                   lambda c, r, p: f"{c},{r},p=AAAA",
                   lambda c, r, p: f"{c},{r}",
                   lambda c, r, p: f"c={base64.b64encode(b'y,,').decode()},{r},{p}",
                   lambda c, r, p: f"c=biws,{r},{p}".replace("c=biws", "c=!!")):
        server = ScramServer("SCRAM-SHA-256", lookup_for({"u": cred}))
        client = ScramClient("SCRAM-SHA-256", "u", "pw")
        c, r, p = client.final_message(server.evaluate(client.first_message())).decode().split(",")
        with pytest.raises(ScramAuthenticationError, match="invalid credentials"):
            server.evaluate(tamper(c, r, p).encode())


def test_replay_after_completion_is_illegal_state():
    cred = ScramCredential.from_password("SCRAM-SHA-512", "pw")
    server = ScramServer("SCRAM-SHA-512", lookup_for({"u": cred}))
    client = ScramClient("SCRAM-SHA-512", "u", "pw")
    first = client.first_message()
    server_first = server.evaluate(first)
    final = client.final_message(server_first)
    server.evaluate(final)
    assert server.complete
    for message in (final, first):
        with pytest.raises(ScramIllegalStateError):
            server.evaluate(message)
    # replaying the recorded final message on a new exchange fails: the server nonce differs
    other = ScramServer("SCRAM-SHA-512", lookup_for({"u": cred}))
    other.evaluate(first)
    with pytest.raises(ScramAuthenticationError):
        other.evaluate(final)


def test_messages_out_of_order_are_illegal_state():
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lookup_for({"u": cred}))
    with pytest.raises(ScramIllegalStateError):
        server.evaluate(b"c=biws,r=abc,p=AAAA")
    server = ScramServer("SCRAM-SHA-256", lookup_for({"u": cred}))
    first = ScramClient("SCRAM-SHA-256", "u", "pw").first_message()
    server.evaluate(first)
    with pytest.raises(ScramIllegalStateError):
        server.evaluate(first)

    client = ScramClient("SCRAM-SHA-256", "u", "pw")
    with pytest.raises(ScramIllegalStateError):
        client.verify_server_final(b"v=AAAA")


def test_authzid():
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lookup_for({"u": cred}))
    with pytest.raises(ScramAuthenticationError) as err:
        server.evaluate(b"n,a=admin,n=u,r=abcdef")
    assert str(err.value) == AUTHZID_MISMATCH

    # an authzid equal to the user name is fine, and the gs2 header must be echoed in c=
    server = ScramServer("SCRAM-SHA-256", lookup_for({"u": cred}), server_nonce="srv")
    server_first = server.evaluate(b"n,a=u,n=u,r=abcdef")
    mech = SCRAM_SHA_256
    salted = mech.salted_password("pw", cred.salt, 4096)
    client_key = mech.hmac(salted, b"Client Key")
    without_proof = f"c={base64.b64encode(b'n,a=u,').decode()},r=abcdefsrv"
    auth = f"n=u,r=abcdef,{server_first.decode()},{without_proof}".encode()
    proof = bytes(a ^ b for a, b in zip(client_key, mech.hmac(mech.hash(client_key), auth)))
    reply = server.evaluate(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    assert reply == b"v=" + base64.b64encode(mech.hmac(mech.hmac(salted, b"Server Key"), auth))


@pytest.mark.parametrize("message", [
    b"p=tls-unique,,n=u,r=abc",
    b"x,,n=u,r=abc",
    b"n,,m=ext,n=u,r=abc",
    b"n,,n=u",
    b"n,,r=abc,n=u",
    b"n,,n=,r=abc",
    b"n,,n=u=41,r=abc",
    b"n,,n=u,r=a b",
    b"n,,n=u,r=",
    b"n,,n=u,r=abc,novalue",
    b"n,,n=u,r=abc,k=1,k=2",
    b"n,b=u,n=u,r=abc",
    b"n,,n=\xff,r=abc",
    b"garbage",
    b"",
])
def test_bad_client_first_messages(message):
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lookup_for({"u": cred}))
    with pytest.raises(ScramAuthenticationError, match="invalid credentials with SASL mechanism SCRAM-SHA-256"):
        server.evaluate(message)
    with pytest.raises(ScramIllegalStateError):
        server.evaluate(b"n,,n=u,r=abc")


def test_channel_binding_y_flag_is_accepted():
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lookup_for({"u": cred}))
    server_first = server.evaluate(b"y,,n=u,r=abc")
    assert server_first.startswith(b"r=abc")


def test_p_flag_is_refused_with_detail():
    server = ScramServer("SCRAM-SHA-256", lookup_for({}))
    with pytest.raises(ScramAuthenticationError) as err:
        server.evaluate(b"p=tls-server-end-point,,n=u,r=abc")
    assert "channel binding" in err.value.detail


def test_iterations_below_minimum_fail():
    low = ScramCredential.from_password("SCRAM-SHA-256", "pw", iterations=1000)
    server = ScramServer("SCRAM-SHA-256", lookup_for({"u": low}))
    with pytest.raises(ScramAuthenticationError) as err:
        server.evaluate(ScramClient("SCRAM-SHA-256", "u", "pw").first_message())
    assert str(err.value) == generic("SCRAM-SHA-256")
    assert "less than the minimum 4096" in err.value.detail


# --- delegation tokens (tokenauth extension) ---

def test_tokenauth_extension():
    token_cred = ScramCredential.from_password("SCRAM-SHA-512", "token-hmac")
    tokens = {"tokenid1": (token_cred, "alice")}
    server = ScramServer("SCRAM-SHA-512", lookup_for({}), token_lookup=tokens.get)
    client = ScramClient("SCRAM-SHA-512", "tokenid1", "token-hmac", extensions={"tokenauth": "true"})
    first = client.first_message()
    assert first.endswith(b",tokenauth=true")
    client.verify_server_final(server.evaluate(client.final_message(server.evaluate(first))))
    assert server.complete and server.token_authenticated
    assert server.username == "tokenid1" and server.principal_name == "alice"
    assert server.extensions == {"tokenauth": "true"}


def test_tokenauth_does_not_fall_back_to_user_credentials():
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    for token_lookup in (None, {}.get):
        server = ScramServer("SCRAM-SHA-256", lookup_for({"u": cred}), token_lookup=token_lookup)
        client = ScramClient("SCRAM-SHA-256", "u", "pw", extensions={"tokenauth": "TRUE"})
        final = client.final_message(server.evaluate(client.first_message()))
        with pytest.raises(ScramAuthenticationError, match="invalid credentials"):
            server.evaluate(final)


def test_user_credentials_are_not_token_credentials():
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lookup_for({"u": cred}), token_lookup=lambda t: (cred, "owner"))
    exchange(server, ScramClient("SCRAM-SHA-256", "u", "pw", extensions={"other": "x"}))
    assert not server.token_authenticated and server.principal_name == "u"


# --- client side checks ---

def test_client_rejects_bad_server_messages():
    def client():
        c = ScramClient("SCRAM-SHA-256", "u", "pw", nonce="abc")
        c.first_message()
        return c

    salt = base64.b64encode(b"salt").decode()
    for bad, match in ((f"r=xyz123,s={salt},i=4096", "nonce"),
                       (f"r=abc,s={salt},i=4096", "nonce"),
                       (f"r=abcd,s={salt},i=1024", "less than the minimum 4096"),
                       ("r=abcd,s=,i=4096", "format"),
                       (f"m=x,r=abcd,s={salt},i=4096", "mandatory"),
                       ("e=other-error", "format")):
        with pytest.raises(ScramAuthenticationError, match=match):
            client().final_message(bad.encode())

    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lookup_for({"u": cred}))
    c = ScramClient("SCRAM-SHA-256", "u", "pw")
    c.final_message(server.evaluate(c.first_message()))
    with pytest.raises(ScramAuthenticationError, match="Invalid server signature"):
        c.verify_server_final(b"v=" + base64.b64encode(bytes(32)))
    assert not c.complete


def test_client_reports_server_error():
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lookup_for({"u": cred}))
    c = ScramClient("SCRAM-SHA-256", "u", "pw")
    c.final_message(server.evaluate(c.first_message()))
    with pytest.raises(ScramAuthenticationError, match="failed with error: invalid-proof"):
        c.verify_server_final(b"e=invalid-proof")


def test_client_argument_validation():
    with pytest.raises(ValueError):
        ScramClient("SCRAM-SHA-256", "", "pw")
    with pytest.raises(ValueError):
        ScramClient("SCRAM-SHA-256", "u", "pw", extensions={"a,b": "c"})
    with pytest.raises(ValueError):
        ScramClient("SCRAM-SHA-256", "u", "pw", nonce="has,comma")
    with pytest.raises(ValueError):
        ScramServer("SCRAM-SHA-256", lookup_for({}), server_nonce="")
