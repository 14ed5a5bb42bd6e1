"""Field indexes and Index Query: a topic declares indexed fields (topic config
``bmq.index.fields``: ``fields``), the partition's owner builds index chunks beside the
segments in the background (``builder``, with the CPU work in a worker process: ``extract``;
the file format: ``chunk``, ``store``), and any broker or proxy answers queries from the shared
storage (``query``, over HTTP: ``http``)."""
