"""Client-certificate principal: the DN must equal Java's X500Principal.getName() byte for byte, and the mapping
rules must behave as Kafka's SslPrincipalMapper (its documented and tested examples)."""
from __future__ import annotations

import datetime
import subprocess
import warnings
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID

from tests.harness.security import require_tools
from broker.security.principal import (
    ANONYMOUS,
    NoMatchingRule,
    SslPrincipalMapper,
    distinguished_name_rfc2253,
    ssl_principal,
)

#: run once, in the native pass of the unit lane (scripts/test.sh): principal mapping: no record, codec, CRC, varint
#: or index code (no twin) is imported
pytestmark = pytest.mark.twin_independent

JVM_FAST = ["-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC"]


@pytest.fixture
def java_tools() -> None:
    """Java renders the reference DNs: a machine without java, keytool or openssl fails loudly (never skips)."""
    require_tools("java", "keytool", "openssl")


needs_java = pytest.mark.usefixtures("java_tools")

DN_JAVA = """
import java.io.*;
import java.nio.file.*;
import java.security.cert.*;
import java.util.HexFormat;

public class Dn {
    public static void main(String[] args) throws Exception {
        CertificateFactory cf = CertificateFactory.getInstance("X.509");
        for (String a : args) {
            try (InputStream in = Files.newInputStream(Paths.get(a))) {
                X509Certificate c = (X509Certificate) cf.generateCertificate(in);
                String dn = c.getSubjectX500Principal().getName();
                System.out.println(HexFormat.of().formatHex(dn.getBytes("UTF-8")));
            }
        }
    }
}
"""

A = x509.NameAttribute
with warnings.catch_warnings():  # cryptography warns about the (legal, if odd) empty value
    warnings.simplefilter("ignore")
    _EMPTY_CN = A(NameOID.COMMON_NAME, "", _validate=False)
# Edge cases for Java's RFC 2253 rendering: escapes, spaces and CR at the ends, NUL, non-ASCII, string types Java
# renders (or not), keywords vs dotted OIDs, multi-valued RDNs, empty values.
EDGE_CASES = [
    [[A(NameOID.COMMON_NAME, 'a=b#c,d+e;f<g>h"i\\j')]],
    [[A(NameOID.COMMON_NAME, "#lead")], [A(NameOID.ORGANIZATION_NAME, "  two lead")],
     [A(NameOID.ORGANIZATIONAL_UNIT_NAME, "trail  ")]],
    [[A(NameOID.COMMON_NAME, "crlf\r")], [A(NameOID.ORGANIZATION_NAME, "\rx")], [A(NameOID.LOCALITY_NAME, " ")]],
    [[A(NameOID.COMMON_NAME, "nul\x00x")]],
    [[A(NameOID.COMMON_NAME, "Zoë 日本 😀")]],
    [[A(NameOID.COMMON_NAME, "bmp Zoë 日本", _type=_ASN1Type.BMPString)]],
    [[A(NameOID.COMMON_NAME, "univ Zoë", _type=_ASN1Type.UniversalString)]],
    [[A(NameOID.COMMON_NAME, "t61", _type=_ASN1Type.T61String)]],
    [[A(NameOID.COMMON_NAME, "ia5", _type=_ASN1Type.IA5String)]],
    [[A(NameOID.EMAIL_ADDRESS, "bob@example.com"), A(NameOID.COMMON_NAME, "bob")], [A(NameOID.SERIAL_NUMBER, "123")],
     [A(NameOID.TITLE, "Dr")]],
    [[A(NameOID.DOMAIN_COMPONENT, "com")], [A(NameOID.DOMAIN_COMPONENT, "example")],
     [A(NameOID.STREET_ADDRESS, "1 Main St")], [A(NameOID.STATE_OR_PROVINCE_NAME, "CA")], [A(NameOID.USER_ID, "u1")],
     [A(NameOID.COUNTRY_NAME, "US")]],
    [[_EMPTY_CN]],
    [[A(NameOID.COMMON_NAME, "tab\tx\nnl")]],
    [[A(NameOID.GIVEN_NAME, "g"), A(NameOID.SURNAME, "s")], [A(NameOID.PSEUDONYM, "p")],
     [A(x509.ObjectIdentifier("1.2.3.4.5.6.7.8.9999999"), "x")]],
    [[A(NameOID.COMMON_NAME, "x" * 64)], [A(NameOID.ORGANIZATIONAL_UNIT_NAME, "y" * 60)],
     [A(NameOID.ORGANIZATION_NAME, "z" * 64)]],
]


def _run(*cmd: str, cwd: Path | None = None) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"{cmd[0]} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def _self_signed(rdns: list[list[x509.NameAttribute]], path: Path) -> Path:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.RelativeDistinguishedName(r) for r in rdns])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    path.write_bytes(cert.public_bytes(serialization.Encoding.DER))
    return path


@pytest.fixture(scope="module")
def java_cases(tmp_path_factory) -> list[tuple[Path, str]]:
    """(DER certificate, Java's getName()) for keytool, openssl and hand-built edge-case certificates."""
    d = tmp_path_factory.mktemp("dn")
    certs = []
    # keytool: multi-valued RDN, escaped comma; Java writes what it parses.
    _run("keytool", *JVM_FAST, "-genkeypair", "-alias", "alice", "-keyalg", "EC", "-groupname", "secp256r1",
         "-dname", "CN=alice,OU=Eng+UID=42,O=Acme\\, Inc,L=Paris,C=FR", "-validity", "2",
         "-storetype", "PKCS12", "-keystore", str(d / "alice.p12"), "-storepass", "changeit")
    _run("keytool", *JVM_FAST, "-exportcert", "-alias", "alice", "-keystore", str(d / "alice.p12"),
         "-storepass", "changeit", "-file", str(d / "alice.der"))
    certs.append(d / "alice.der")
    # openssl: emailAddress, which Java prints as a dotted OID with the hex DER value.
    _run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-noenc",
         "-keyout", str(d / "bob.key"), "-out", str(d / "bob.der"), "-outform", "DER", "-days", "1",
         "-subj", "/C=FR/O=Acme/OU=Ops/CN=bob/emailAddress=bob@example.com")
    certs.append(d / "bob.der")
    certs += [_self_signed(rdns, d / f"edge{i}.der") for i, rdns in enumerate(EDGE_CASES)]
    (d / "Dn.java").write_text(DN_JAVA)
    out = _run("java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "Dn.java", *map(str, certs), cwd=d)
    names = [bytes.fromhex(line).decode("utf-8") for line in out.split()]
    assert len(names) == len(certs)
    return list(zip(certs, names, strict=True))


@needs_java
def test_dn_matches_java_for_keytool_certificate(java_cases):
    cert, java_name = java_cases[0]
    assert java_name == "CN=alice,OU=Eng+UID=42,O=Acme\\, Inc,L=Paris,C=FR"
    assert distinguished_name_rfc2253(cert.read_bytes()) == java_name


@needs_java
def test_dn_matches_java_for_email_address(java_cases):
    cert, java_name = java_cases[1]
    assert java_name.startswith("1.2.840.113549.1.9.1=#160f626f62406578616d706c652e636f6d,CN=bob,OU=Ops")
    assert distinguished_name_rfc2253(cert.read_bytes()) == java_name


@needs_java
def test_dn_matches_java_for_edge_cases(java_cases):
    mismatches = [(cert.name, ours, java_name) for cert, java_name in java_cases[2:]
                  if (ours := distinguished_name_rfc2253(cert.read_bytes())) != java_name]
    assert mismatches == []


def test_dn_rejects_garbage():
    with pytest.raises(ValueError, match="certificate subject"):
        distinguished_name_rfc2253(b"\x30\x03\x02\x01\x01")


def test_ssl_principal(tmp_path):
    cert = _self_signed([[A(NameOID.COMMON_NAME, "Duke")], [A(NameOID.ORGANIZATIONAL_UNIT_NAME, "ServiceUsers")]],
                        tmp_path / "duke.der").read_bytes()
    assert ssl_principal(None) == ANONYMOUS == "User:ANONYMOUS"
    assert ssl_principal(cert) == "User:OU=ServiceUsers,CN=Duke"
    mapper = SslPrincipalMapper("RULE:^OU=ServiceUsers,CN=(.*)$/$1/L,DEFAULT")
    assert ssl_principal(cert, mapper) == "User:duke"
    with pytest.raises(NoMatchingRule):
        ssl_principal(cert, SslPrincipalMapper(""))


# --- ssl.principal.mapping.rules (cases from Kafka's documentation and SslPrincipalMapperTest) ---------------------


def test_kafka_documented_example():
    mapper = SslPrincipalMapper(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
        "DEFAULT")
    assert mapper.principal_name("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") \
        == "serviceuser"
    assert mapper.principal_name("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") \
        == "adminuser@admin"


def test_kafka_mapper_examples():
    mapper = SslPrincipalMapper(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]))
    assert mapper.principal_name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.principal_name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.principal_name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.principal_name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.principal_name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


def test_default_rules():
    assert SslPrincipalMapper().principal_name("CN=a,O=b") == "CN=a,O=b"
    assert SslPrincipalMapper(None).principal_name("CN=a") == "CN=a"


@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules(rules):
    SslPrincipalMapper(rules)


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules(rules):
    with pytest.raises(ValueError, match="Invalid rule"):
        SslPrincipalMapper(rules)


@pytest.mark.parametrize("expected,rules", [
    ("[]", ""),
    ("[DEFAULT]", "DEFAULT"),
    ("[RULE:/]", "RULE://"),
    ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"),
    ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
    ("[]", ",   , , ,      , , ,   "),
    ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
    ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
    ("[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
     "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT"),
])
def test_rules_splitting(expected, rules):
    assert repr(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_comma_inside_pattern():
    mapper = SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.principal_name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_replacement_follows_java_and_kafka():
    # Kafka keeps a reference to a group the pattern lacks as literal text.
    assert SslPrincipalMapper("RULE:^CN=(.*?),O=(.*)$/$1@$4/").principal_name("CN=a,O=b") == "a@$4"
    # Java reads "$12" as group 1 then "2" when there are fewer than 12 groups.
    assert SslPrincipalMapper("RULE:^CN=(.*?),O=(.*)$/$12/").principal_name("CN=a,O=b") == "a2"
    # "$0" is the whole match; "\$" a literal dollar; named groups in Java syntax.
    assert SslPrincipalMapper("RULE:^CN=(.*)$/[$0]\\$/").principal_name("CN=x") == "[CN=x]$"
    assert SslPrincipalMapper("RULE:^CN=(?<user>[^,]*).*$/${user}/U").principal_name("CN=joe,O=y") == "JOE"
    # An escaped slash inside pattern and replacement.
    assert SslPrincipalMapper("RULE:^CN=(.*)\\/(.*)$/$2\\/$1/").principal_name("CN=a/b") == "b/a"


def test_rule_that_does_not_match_falls_through():
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    assert mapper.principal_name("CN=svc,OU=ServiceUsers,O=x") == "svc"
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=x"):
        mapper.principal_name("CN=x")


def test_bad_pattern_and_replacement_are_refused():
    with pytest.raises(ValueError, match="pattern"):
        SslPrincipalMapper("RULE:^CN=(.*$/$1/")
    with pytest.raises(ValueError, match="no group"):
        SslPrincipalMapper("RULE:^CN=.*$/$1/")
    with pytest.raises(ValueError, match="no group named"):
        SslPrincipalMapper("RULE:^CN=(.*)$/${nope}/")
