# The BMQ image used by docker-compose.yml: `bmq controller`, `bmq broker`, `bmq proxy` (and `bmq serve`).
# HDFS is reached through pyarrow's HadoopFileSystem, which needs Java, libhdfs and the Hadoop
# client jars at run time: they are copied from the official Hadoop image.
FROM apache/hadoop:3.3.6 AS hadoop

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

# Debian 12 (bookworm) pinned: its default Java is 17, which the Hadoop 3.3 client runs on; the
# unpinned slim image follows Debian's newest release, whose only Java is 21. default-jre-headless
# provides /usr/lib/jvm/default-java on every architecture, so no path names one.
FROM python:3.11-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends default-jre-headless \
    && rm -rf /var/lib/apt/lists/*
COPY --from=hadoop /opt/hadoop /opt/hadoop
ENV HADOOP_HOME=/opt/hadoop \
    JAVA_HOME=/usr/lib/jvm/default-java \
    ARROW_LIBHDFS_DIR=/opt/hadoop/lib/native \
    PATH=/opt/hadoop/bin:$PATH \
    PYTHONUNBUFFERED=1
COPY --from=wheel /wheels /wheels
RUN pip install --no-cache-dir "$(ls /wheels/bmq-*.whl)[hdfs,s3]" && rm -rf /wheels
# libhdfs finds the Hadoop classes through CLASSPATH (wildcards expanded by `hadoop classpath`).
ENTRYPOINT ["/bin/sh", "-c", "export CLASSPATH=$(hadoop classpath --glob); exec \"$@\"", "--"]
CMD ["bmq", "--help"]
