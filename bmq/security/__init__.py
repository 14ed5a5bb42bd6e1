"""Security of client connections: TLS (``tls.py``), SASL PLAIN, SCRAM (``scram.py``) and
OAUTHBEARER (``oauthbearer.py``, with the issuer's keys from ``jwks.py``), and the per-connection
session that knows the client's principal and when it must re-authenticate (``session.py``).

A role builds one ``Security`` from its config and credential store and gives each connection a
``Session``; ``bmq.net`` calls the session through the hooks of ``bmq.net.connection.Guard`` and
never imports this package.
"""
