"""`bmq console` (issue #37): a web console of a cluster, over the Kafka protocol.

`admin.py` asks the cluster (confluent-kafka's AdminClient), `messages.py` reads a page of a
partition, `groups.py` resets a group's offsets, `csrf.py` guards the forms, `app.py` is the
Starlette application (Jinja2 templates in templates/, htmx and uPlot in static/) and
`command.py` the command that serves it with uvicorn.
"""
