package org.apache.kafka.common.utils;

/**
 * Where connect-file 4.3.1 finds the Kafka version its connectors report (their version()):
 * Kafka 4.4 moved AppInfoParser to org.apache.kafka.common.utils.internals, and Maven Central
 * has no connect-file 4.4.0. This class goes into the file connectors' plugin directory only
 * (target/connect-plugins/connect-file, see pom.xml), so that a 4.4.0 worker can load them; no
 * other program's class path has it.
 */
public final class AppInfoParser {
    private AppInfoParser() {
    }

    public static String getVersion() {
        return org.apache.kafka.common.utils.internals.AppInfoParser.getVersion();
    }

    public static String getCommitId() {
        return org.apache.kafka.common.utils.internals.AppInfoParser.getCommitId();
    }
}
