// tests/kafka/Admin.java - topics and ACLs for the tests, in one JVM start
// (kafka.sh admin DIR ...; run as a single-file source program with the
// broker's jars on the class path: the Maven project resolves only the
// broker, whose core jar no longer holds TopicCommand in 3.9).
//
//   Admin BOOTSTRAP OP [OP ...], each OP one argument:
//     topic:NAME:PARTITIONS[:KEY=VALUE,...]    creates a topic (RF 1..N as
//                                              the cluster's default)
//     allow:PRINCIPAL:OPERATION:TOPIC          adds an ALLOW ACL on a topic
//     deny:PRINCIPAL:OPERATION:TOPIC           adds a DENY ACL on a topic
//         (TOPIC "*": every topic; TYPE/NAME another resource, e.g.
//         transactional_id/outboxd-oidc, group/g, cluster/kafka-cluster)
//     transactions                             prints the cluster's
//         transactions (kafka-transactions.sh list, describe and
//         describe-producers in one): a line per transactional id,
//           txn ID STATE producer=PID epoch=E partitions=N age_ms=A timeout_ms=T
//         one per partition where a producer holds a transaction open,
//           open TOPIC-PARTITION producer=PID epoch=E since_offset=O
//         and "hanging ..." for what is left hanging: a partition's open
//         transaction that its coordinator does not hold open on that
//         partition (what kafka-transactions.sh find-hanging looks for), or
//         a transaction open past its own timeout plus 10 s (the
//         coordinator should have aborted it). A transaction that ends
//         between the two requests can show as hanging once: the caller
//         asks again.
// e.g. topic:outbox.small:2:max.message.bytes=1000
//      deny:User:ANONYMOUS:WRITE:outbox.denied (PRINCIPAL holds one ':')
// Exits 1 with the broker's reason when any operation fails.
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.*;
import org.apache.kafka.common.resource.*;

public class Admin {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        List<NewTopic> topics = new ArrayList<>();
        List<AclBinding> acls = new ArrayList<>();
        boolean transactions = false;
        for (int i = 1; i < args.length; i++) {
            String[] f = args[i].split(":", -1);
            switch (f[0]) {
            case "topic": {
                NewTopic t = new NewTopic(f[1], Optional.of(Integer.parseInt(f[2])), Optional.empty());
                if (f.length > 3 && !f[3].isEmpty()) {
                    Map<String, String> c = new HashMap<>();
                    for (String kv : f[3].split(","))
                        c.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
                    t.configs(c);
                }
                topics.add(t);
                break;
            }
            case "allow":
            case "deny":
                int slash = f[4].indexOf('/');
                ResourceType type = slash < 0 ? ResourceType.TOPIC
                                              : ResourceType.fromString(f[4].substring(0, slash));
                acls.add(new AclBinding(
                    new ResourcePattern(type, f[4].substring(slash + 1), PatternType.LITERAL),
                    new AccessControlEntry(f[1] + ":" + f[2], "*", AclOperation.fromString(f[3]),
                                           f[0].equals("allow") ? AclPermissionType.ALLOW
                                                                : AclPermissionType.DENY)));
                break;
            case "transactions":
                transactions = true;
                break;
            default:
                System.err.println("Admin: unknown operation " + args[i]);
                System.exit(2);
            }
        }
        try (AdminClient a = AdminClient.create(p)) {
            if (!topics.isEmpty()) a.createTopics(topics).all().get();
            if (!acls.isEmpty()) a.createAcls(acls).all().get();
            if (transactions) printTransactions(a);
        } catch (Exception e) {
            System.err.println("Admin: " + e.getMessage());
            System.exit(1);
        }
    }

    static void printTransactions(AdminClient a) throws Exception {
        List<String> ids = new ArrayList<>();
        for (TransactionListing l : a.listTransactions().all().get())
            ids.add(l.transactionalId());
        Collections.sort(ids);
        Map<String, TransactionDescription> txns =
            ids.isEmpty() ? Map.of() : a.describeTransactions(ids).all().get();
        Map<Long, TransactionDescription> byProducer = new HashMap<>();
        long now = System.currentTimeMillis();
        for (String id : ids) {
            TransactionDescription d = txns.get(id);
            byProducer.put(d.producerId(), d);
            long age = d.transactionStartTimeMs().isPresent() ? now - d.transactionStartTimeMs().getAsLong() : -1;
            System.out.printf("txn %s %s producer=%d epoch=%d partitions=%d age_ms=%d timeout_ms=%d%n", id,
                              d.state().name(), d.producerId(), d.producerEpoch(), d.topicPartitions().size(), age,
                              d.transactionTimeoutMs());
            boolean open = d.state() != TransactionState.COMPLETE_COMMIT
                && d.state() != TransactionState.COMPLETE_ABORT && d.state() != TransactionState.EMPTY;
            if (open && age > d.transactionTimeoutMs() + 10000)
                System.out.printf("hanging txn %s %s open %d ms, its timeout %d ms%n", id, d.state().name(), age,
                                  d.transactionTimeoutMs());
        }
        List<TopicPartition> parts = new ArrayList<>();
        Set<String> topics = a.listTopics().names().get();
        for (TopicDescription t : a.describeTopics(topics).allTopicNames().get().values())
            for (org.apache.kafka.common.TopicPartitionInfo pi : t.partitions())
                parts.add(new TopicPartition(t.name(), pi.partition()));
        parts.sort(Comparator.comparing(TopicPartition::toString));
        Map<TopicPartition, DescribeProducersResult.PartitionProducerState> states =
            parts.isEmpty() ? Map.of() : a.describeProducers(parts).all().get();
        for (TopicPartition tp : parts) {
            for (ProducerState ps : states.get(tp).activeProducers()) {
                if (ps.currentTransactionStartOffset().isEmpty()) continue;
                System.out.printf("open %s producer=%d epoch=%d since_offset=%d%n", tp, ps.producerId(),
                                  ps.producerEpoch(), ps.currentTransactionStartOffset().getAsLong());
                TransactionDescription d = byProducer.get(ps.producerId());
                boolean held = d != null && d.topicPartitions().contains(tp)
                    && (d.state() == TransactionState.ONGOING || d.state() == TransactionState.PREPARE_COMMIT
                        || d.state() == TransactionState.PREPARE_ABORT
                        || d.state() == TransactionState.PREPARE_EPOCH_FENCE);
                if (!held)
                    System.out.printf("hanging %s producer=%d epoch=%d since_offset=%d: its coordinator %s%n", tp,
                                      ps.producerId(), ps.producerEpoch(),
                                      ps.currentTransactionStartOffset().getAsLong(),
                                      d == null ? "knows no transaction of this producer"
                                                : "has it " + d.state().name() + " on " + d.topicPartitions().size()
                                                      + " other partition(s)");
            }
        }
    }
}
