"""Security of client connections: TLS (``tls.py``), SASL PLAIN and SCRAM (``sasl.py``,
``scram.py``) and the per-connection session that knows the client's principal (``session.py``).

A role builds one ``Security`` from its config and credential store and gives each connection a
``Session``; ``bmq.net`` calls the session through the hooks of ``bmq.net.connection.Guard`` and
never imports this package.
"""
