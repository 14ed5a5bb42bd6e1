package bmq.clients;

import static bmq.clients.AdminScenarios.admin;
import static bmq.clients.AdminScenarios.get;
import static bmq.clients.AdminScenarios.outcome;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

/**
 * Kafka's Java Admin client on SCRAM users, quotas and ACLs against BMQ:
 * <ul>
 * <li>scram: user TOPIC-u made with alterUserScramCredentials (SCRAM-SHA-256, 8192
 *     iterations), described, a SCRAM-SHA-512 credential added, one deleted, then the user;
 * <li>quotas: byte-rate quotas for user TOPIC-q and for a client id set with
 *     alterClientQuotas, described back, one removed;
 * <li>acls (a broker with an authorizer, the run's user a super user, a SASL_SSL listener with
 *     SCRAM-SHA-256): user TOPIC-reader is made with alterUserScramCredentials and given READ
 *     on TOPIC; it reads TOPIC and is refused TOPIC-other, and its Admin reports what it may
 *     do with TOPIC and the cluster; the ACLs are described and deleted,
 *     after which it is refused TOPIC too;
 * <li>acls-disabled (a broker without an authorizer): every ACL call gets
 *     SecurityDisabledException.
 * </ul>
 */
public final class AdminSecurityScenarios {
    private AdminSecurityScenarios() {}

    public static void main(String[] args) throws Exception {
        Scenarios.main("AdminSecurityScenarios", args, Map.of(
                "scram", AdminSecurityScenarios::scram,
                "quotas", AdminSecurityScenarios::quotas,
                "acls", AdminSecurityScenarios::acls,
                "acls-disabled", AdminSecurityScenarios::aclsDisabled));
    }

    /** Each user's mechanisms and iterations, or the exception describing them ended with. */
    static Map<String, Object> scramUsers(Admin admin, List<String> users,
                                          Scenarios.Context context) {
        Map<String, Object> out = new TreeMap<>();
        for (String user : users) {
            out.put(user, outcome(() -> {
                UserScramCredentialsDescription description = get(admin
                        .describeUserScramCredentials(List.of(user)).description(user), context);
                List<String> credentials = new ArrayList<>();
                for (ScramCredentialInfo info : description.credentialInfos()) {
                    credentials.add(info.mechanism().mechanismName() + "/" + info.iterations());
                }
                out.put(user + ":credentials", credentials.stream().sorted().toList());
                return null;
            }));
        }
        return out;
    }

    static UserScramCredentialUpsertion upsert(String user, ScramMechanism mechanism,
                                               int iterations, String password) {
        return new UserScramCredentialUpsertion(
                user, new ScramCredentialInfo(mechanism, iterations), password);
    }

    static Map<String, Object> scram(Scenarios.Context context, String topic) throws Exception {
        String user = topic + "-u";
        Map<String, Object> result = new LinkedHashMap<>();
        try (Admin admin = admin(context)) {
            result.put("before", scramUsers(admin, List.of(user), context));
            get(admin.alterUserScramCredentials(List.of(
                    upsert(user, ScramMechanism.SCRAM_SHA_256, 8192, "secret-1"))).all(), context);
            result.put("created", scramUsers(admin, List.of(user), context));
            get(admin.alterUserScramCredentials(List.of(
                    upsert(user, ScramMechanism.SCRAM_SHA_512, 4096, "secret-2"))).all(), context);
            result.put("second_mechanism", scramUsers(admin, List.of(user), context));
            get(admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion(
                    user, ScramMechanism.SCRAM_SHA_256))).all(), context);
            result.put("one_deleted", scramUsers(admin, List.of(user), context));
            result.put("too_few_iterations", outcome(() -> get(admin.alterUserScramCredentials(
                    List.of(upsert(user, ScramMechanism.SCRAM_SHA_256, 10, "x"))).all(), context)));
            get(admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion(
                    user, ScramMechanism.SCRAM_SHA_512))).all(), context);
            result.put("deleted", scramUsers(admin, List.of(user), context));
        }
        return result;
    }

    /** The quotas of the entities matching ``filter``: "type=name,..." to quota to value. */
    static Map<String, Object> quotas(Admin admin, ClientQuotaFilter filter,
                                      Scenarios.Context context) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        get(admin.describeClientQuotas(filter).entities(), context).forEach((entity, values) -> {
            List<String> parts = new ArrayList<>();
            new TreeMap<>(entity.entries()).forEach((type, name) -> parts.add(type + "=" + name));
            out.put(String.join(",", parts), new TreeMap<>(values));
        });
        return out;
    }

    static Map<String, Object> quotas(Scenarios.Context context, String topic) throws Exception {
        String user = topic + "-q";
        String clientId = topic + "-client";
        ClientQuotaEntity userEntity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, user));
        ClientQuotaEntity clientEntity = new ClientQuotaEntity(
                Map.of(ClientQuotaEntity.CLIENT_ID, clientId));
        ClientQuotaFilter ours = ClientQuotaFilter.contains(List.of(
                ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user)));
        ClientQuotaFilter theClient = ClientQuotaFilter.containsOnly(List.of(
                ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.CLIENT_ID, clientId)));
        Map<String, Object> result = new LinkedHashMap<>();
        try (Admin admin = admin(context)) {
            get(admin.alterClientQuotas(List.of(
                    new ClientQuotaAlteration(userEntity, List.of(
                            new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0),
                            new ClientQuotaAlteration.Op("consumer_byte_rate", 2097152.0))),
                    new ClientQuotaAlteration(clientEntity, List.of(
                            new ClientQuotaAlteration.Op("consumer_byte_rate", 4096.0)))))
                    .all(), context);
            result.put("user", quotas(admin, ours, context));
            result.put("client", quotas(admin, theClient, context));
            get(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(userEntity, List.of(
                    new ClientQuotaAlteration.Op("producer_byte_rate", null))))).all(), context);
            result.put("user_after_removal", quotas(admin, ours, context));
            result.put("unknown_quota", outcome(() -> get(admin.alterClientQuotas(List.of(
                    new ClientQuotaAlteration(userEntity, List.of(
                            new ClientQuotaAlteration.Op("no_such_rate", 1.0))))).all(),
                    context)));
        }
        return result;
    }

    static AclBinding allow(ResourceType type, String name, String principal,
                            AclOperation operation) {
        return new AclBinding(new ResourcePattern(type, name, PatternType.LITERAL),
                              new AccessControlEntry(principal, "*", operation,
                                                     AclPermissionType.ALLOW));
    }

    static Map<String, Object> acls(Scenarios.Context context, String topic) throws Exception {
        String reader = topic + "-reader";
        String principal = "User:" + reader;
        String other = topic + "-other";
        Map<String, Object> result = new LinkedHashMap<>();
        try (Admin admin = admin(context)) {
            get(admin.alterUserScramCredentials(List.of(
                    upsert(reader, ScramMechanism.SCRAM_SHA_256, 4096, "reader-secret"))).all(),
                context);
            result.put("read_before_acls", readError(context, reader, topic));
            get(admin.createAcls(List.of(
                    allow(ResourceType.TOPIC, topic, principal, AclOperation.READ))).all(),
                context);
            AclBindingFilter theReaders = new AclBindingFilter(ResourcePatternFilter.ANY,
                    new AccessControlEntryFilter(principal, null, AclOperation.ANY,
                                                 AclPermissionType.ANY));
            result.put("described", get(admin.describeAcls(theReaders).values(), context)
                    .stream().map(AclBinding::toString).toList().size());
            result.put("read_with_acl", readError(context, reader, topic));
            result.put("authorized", authorizedOperations(context, reader, topic));
            result.put("read_other", readError(context, reader, other));
            result.put("deleted", get(admin.deleteAcls(List.of(theReaders)).all(), context)
                    .size());
            result.put("described_after_delete", get(admin.describeAcls(theReaders).values(),
                                                     context).size());
            result.put("read_after_delete", readError(context, reader, topic));
            result.put("wrong_password", readError(context, reader, topic, "not-the-secret"));
        }
        return result;
    }

    /** A client's settings logging in as ``user`` with SCRAM-SHA-256. */
    static java.util.Properties as(Scenarios.Context context, String user, String password) {
        return context.client("sasl.mechanism", "SCRAM-SHA-256", "sasl.jaas.config",
                              "org.apache.kafka.common.security.scram.ScramLoginModule "
                              + "required username=\"" + user + "\" password=\"" + password
                              + "\";", "default.api.timeout.ms", 10000,
                              "request.timeout.ms", 10000);
    }

    /** What the user may do with the topic and the cluster, as the Admin reports (KIP-430). */
    static Map<String, Object> authorizedOperations(Scenarios.Context context, String user,
                                                    String topic) throws Exception {
        try (Admin own = Admin.create(as(context, user, "reader-secret"))) {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("topic", get(own.describeTopics(List.of(topic),
                    new DescribeTopicsOptions().includeAuthorizedOperations(true))
                    .allTopicNames(), context).get(topic).authorizedOperations().stream()
                    .map(Enum::name).sorted().toList());
            out.put("cluster", get(own.describeCluster(
                    new DescribeClusterOptions().includeAuthorizedOperations(true))
                    .authorizedOperations(), context).stream().map(Enum::name).sorted().toList());
            return out;
        }
    }

    static String readError(Scenarios.Context context, String user, String topic) {
        return readError(context, user, topic, "reader-secret");
    }

    /** "read N" or the exception class the reading user got. */
    static String readError(Scenarios.Context context, String user, String topic,
                            String password) {
        int[] read = {0};
        String outcome = outcome(() -> {
            try (KafkaConsumer<byte[], byte[]> consumer = ConsumerScenarios.consumer(
                    as(context, user, password))) {
                TopicPartition partition = new TopicPartition(topic, 0);
                consumer.assign(List.of(partition));
                consumer.seekToBeginning(List.of(partition));
                long end = consumer.endOffsets(List.of(partition)).get(partition);
                while (consumer.position(partition) < end) {
                    context.check();
                    read[0] += consumer.poll(AdminGroupScenarios.POLL).count();
                }
                return null;
            }
        });
        return outcome.equals("ok") ? "read " + read[0] : outcome;
    }

    static Map<String, Object> aclsDisabled(Scenarios.Context context, String topic)
            throws Exception {
        Map<String, Object> result = new LinkedHashMap<>();
        try (Admin admin = admin(context)) {
            result.put("create", outcome(() -> get(admin.createAcls(List.of(allow(
                    ResourceType.TOPIC, topic, "User:someone", AclOperation.READ))).all(),
                    context)));
            result.put("describe", outcome(() -> get(admin.describeAcls(AclBindingFilter.ANY)
                                                          .values(), context)));
            result.put("delete", outcome(() -> get(admin.deleteAcls(
                    List.of(AclBindingFilter.ANY)).all(), context)));
        }
        return result;
    }
}
