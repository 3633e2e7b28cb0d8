"""Java exception lines for the error codes the security and transaction tools meet (kafka-acls,
kafka-delegation-tokens, kafka-transactions), beside ``java_format.exception_line`` which covers the others.

Kafka's admin client turns an error code into ``Errors.exception(message)``: the broker's message when it sent one,
else the error's default message. Its tools then print ``Throwable.toString`` (``<class>: <message>``).
"""
from __future__ import annotations

from typing import Optional

from .java_format import exception_line

__all__ = ["error_line"]

#: error code -> (exception class, Kafka's default message)
_MORE = {
    47: ("InvalidProducerEpochException", "Producer attempted to produce with an old epoch."),
    48: ("InvalidTxnStateException", "The producer attempted a transactional operation in an invalid state."),
    53: ("TransactionalIdAuthorizationException", "Transactional Id authorization failed."),
    54: ("SecurityDisabledException", "Security features are disabled."),
    61: ("DelegationTokenDisabledException", "Delegation Token feature is not enabled."),
    62: ("DelegationTokenNotFoundException", "Delegation Token is not found on server."),
    63: ("DelegationTokenOwnerMismatchException", "Specified Principal is not valid Owner/Renewer."),
    64: ("UnsupportedByAuthenticationException", "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL "
                                                 "channels and on delegation token authenticated channels."),
    65: ("DelegationTokenAuthorizationException", "Delegation Token authorization failed."),
    66: ("DelegationTokenExpiredException", "Delegation Token is expired."),
    67: ("InvalidPrincipalTypeException", "Supplied principalType is not supported."),
    105: ("TransactionalIdNotFoundException", "The transactionalId could not be found."),
}


def error_line(code: int, message: Optional[str] = None) -> str:
    """``org.apache.kafka.common.errors.<Class>: <message>`` for ``code`` (the broker's message wins)."""
    if code in _MORE:
        name, default = _MORE[code]
        return f"org.apache.kafka.common.errors.{name}: {message if message else default}"
    return exception_line(code, message or None)
