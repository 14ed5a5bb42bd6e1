package bmq.clients;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Duration;
import java.util.HashSet;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeoutException;

/**
 * What every main class of this module shares: its arguments, the client settings, running the
 * scenarios asked for and printing their results as one JSON object on stdout:
 *
 * <pre>
 *   java -cp CLASSPATH bmq.clients.MAIN BOOTSTRAP SETTINGS SCENARIO=TOPIC [SCENARIO=TOPIC ...]
 * </pre>
 *
 * SETTINGS is a Java properties file of settings every client of the run gets (security), or
 * "-" for none. Each scenario works on its TOPIC (and on names it derives from it: groups,
 * transactional ids, which it reports) and returns a map of what it saw, printed as it ends as
 * one line {"SCENARIO": {...}}. A scenario that throws reports {"error": "..."} (with the stack
 * trace on stderr) and the next one still runs: one JVM start serves several checks. Every wait
 * is bounded by the scenario's deadline, so a broker that never answers ends the run with what
 * was seen, not a hang. A new main class passes its named scenarios to {@link #main}.
 */
final class Scenarios {
    /** How long one scenario may take; the tests' own timeout for the whole run is longer. */
    static final Duration SCENARIO_TIMEOUT = Duration.ofSeconds(60);

    @FunctionalInterface
    interface Scenario {
        Map<String, Object> run(Context context, String topic) throws Exception;
    }

    /** The broker, the run's settings and the current scenario's deadline. */
    static final class Context {
        final String bootstrap;
        private final Properties settings;
        private final long deadline;

        Context(String bootstrap, Properties settings, long deadline) {
            this.bootstrap = bootstrap;
            this.settings = settings;
            this.deadline = deadline;
        }

        /** The settings of a client: bootstrap, the run's settings, then these pairs. */
        Properties client(Object... keyValues) {
            Properties props = new Properties();
            props.putAll(settings);
            props.put("bootstrap.servers", bootstrap);
            for (int i = 0; i < keyValues.length; i += 2) {
                props.put(keyValues[i], String.valueOf(keyValues[i + 1]));
            }
            return props;
        }

        /** Throws once the scenario's time is up: loops call it so that none outlives it. */
        void check() throws TimeoutException {
            if (expired()) throw new TimeoutException("the scenario's deadline passed");
        }

        boolean expired() {
            return System.nanoTime() - deadline > 0;
        }

        Duration remaining() {
            return Duration.ofNanos(Math.max(0, deadline - System.nanoTime()));
        }
    }

    private Scenarios() {}

    static void main(String main, String[] args, Map<String, Scenario> known) throws IOException {
        if (args.length < 3) {
            System.err.printf("usage: %s BOOTSTRAP SETTINGS|- SCENARIO=TOPIC...%nscenarios: %s%n",
                              main, String.join(" ", new TreeSet<>(known.keySet())));
            System.exit(2);
        }
        Properties settings = settings(args[1]);
        Set<String> done = new HashSet<>();
        for (int i = 2; i < args.length; i++) {
            String[] nameAndTopic = args[i].split("=", 2);
            Scenario scenario = known.get(nameAndTopic[0]);
            if (scenario == null || nameAndTopic.length != 2 || !done.add(nameAndTopic[0])) {
                System.err.printf("%s: unknown or repeated scenario %s (known: %s)%n",
                                  main, args[i], String.join(" ", new TreeSet<>(known.keySet())));
                System.exit(2);
            }
            long deadline = System.nanoTime() + SCENARIO_TIMEOUT.toNanos();
            Object result = run(scenario, new Context(args[0], settings, deadline),
                                nameAndTopic[1]);
            System.out.println(Json.write(Map.of(nameAndTopic[0], result)));
            System.out.flush();
        }
        // Client threads that failed to stop (a broker gone silent) must not keep the JVM alive.
        System.exit(0);
    }

    /** The settings file of the command line ("-": none). */
    static Properties settings(String path) throws IOException {
        Properties settings = new Properties();
        if (!path.equals("-")) {
            try (InputStream in = new FileInputStream(path)) {
                settings.load(in);
            }
        }
        return settings;
    }

    private static Object run(Scenario scenario, Context context, String topic) {
        try {
            return scenario.run(context, topic);
        } catch (Exception error) {
            StringWriter trace = new StringWriter();
            error.printStackTrace(new PrintWriter(trace));
            System.err.print(trace);
            return Map.of("error", describe(error));
        }
    }

    /** The exception and its causes, class and message, as the tests assert on them. */
    static String describe(Throwable error) {
        StringBuilder text = new StringBuilder();
        for (Throwable each = error; each != null; each = each.getCause()) {
            if (text.length() > 0) text.append(" <- ");
            text.append(each.getClass().getSimpleName()).append(": ").append(each.getMessage());
        }
        return text.toString();
    }
}
