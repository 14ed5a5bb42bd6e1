"""Kafka wire networking shared by every role: the server side of a client connection
(``connection``), the API registry types it dispatches through (``api``) and the client side
a proxy uses to talk to brokers (``client``)."""
