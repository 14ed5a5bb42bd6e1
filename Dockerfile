# The BMQ image used by docker-compose.yml: `bmq controller`, `bmq broker` (and later `bmq proxy`).
# HDFS is reached through pyarrow's HadoopFileSystem, which needs Java, libhdfs and the Hadoop
# client jars at run time: they are copied from the official Hadoop image.
FROM apache/hadoop:3.3.6 AS hadoop

FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
COPY --from=hadoop /opt/hadoop /opt/hadoop
ENV HADOOP_HOME=/opt/hadoop \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    ARROW_LIBHDFS_DIR=/opt/hadoop/lib/native \
    PATH=/opt/hadoop/bin:$PATH \
    PYTHONUNBUFFERED=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bmq ./bmq
RUN pip install --no-cache-dir ".[hdfs,s3]"
# libhdfs finds the Hadoop classes through CLASSPATH (wildcards expanded by `hadoop classpath`).
ENTRYPOINT ["/bin/sh", "-c", "export CLASSPATH=$(hadoop classpath --glob); exec \"$@\"", "--"]
CMD ["bmq", "--help"]
