# The BMQ image used by docker-compose.yml: `bmq controller`, `bmq broker` (and later `bmq proxy`).
# HDFS is reached through pyarrow's HadoopFileSystem, which needs Java, libhdfs and the Hadoop
# client jars at run time: they are copied from the official Hadoop image.
FROM apache/hadoop:3.3.6 AS hadoop

# bmq has one C module (bmq/spark/_recdecode.c, the Spark data source's record decoder): the
# wheel is built where a compiler is, and only the wheel goes into the image.
FROM python:3.11-slim AS wheel
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY bmq ./bmq
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
COPY --from=hadoop /opt/hadoop /opt/hadoop
ENV HADOOP_HOME=/opt/hadoop \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    ARROW_LIBHDFS_DIR=/opt/hadoop/lib/native \
    PATH=/opt/hadoop/bin:$PATH \
    PYTHONUNBUFFERED=1
COPY --from=wheel /wheels /wheels
RUN pip install --no-cache-dir "$(ls /wheels/bmq-*.whl)[hdfs,s3]" && rm -rf /wheels
# libhdfs finds the Hadoop classes through CLASSPATH (wildcards expanded by `hadoop classpath`).
ENTRYPOINT ["/bin/sh", "-c", "export CLASSPATH=$(hadoop classpath --glob); exec \"$@\"", "--"]
CMD ["bmq", "--help"]
