# The BMQ image used by docker-compose.yml: `bmq controller`, `bmq broker`, `bmq proxy` (and `bmq serve`).
# HDFS is reached through hdfs-native (the `hdfs` extra), a client of HDFS's own protocols: no
# Java, no libhdfs and no Hadoop jars in the image.

# bmq has C modules (setup.py lists them: the Spark decoder, the views' filter, Index Query's
# scanner, scheduled delivery's record rewriting, the cleaner's offset map): the wheel is built
# where a compiler is, and only the wheel goes into the image.
FROM python:3.11-slim-bookworm AS wheel
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY bmq ./bmq
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim-bookworm
ENV PYTHONUNBUFFERED=1
COPY --from=wheel /wheels /wheels
RUN pip install --no-cache-dir "$(ls /wheels/bmq-*.whl)[hdfs,s3]" && rm -rf /wheels
CMD ["bmq", "--help"]
