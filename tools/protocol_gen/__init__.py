"""The generator of ``bmq/protocol/messages/`` (run it as ``python tools/gen_protocol.py``).

``spec`` loads Kafka's JSON specs into a model, ``wire_types`` maps their types to Python's and
to struct formats, ``code`` writes lines the way ``ruff format`` would, ``read_gen`` and
``write_gen`` emit a struct's decoder and encoder, ``module_gen`` a message's module,
``init_gen`` the package's ``__init__.py``, and ``cli`` writes or checks the files.
"""
