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
// e.g. topic:outbox.small:2:max.message.bytes=1000
//      deny:User:ANONYMOUS:WRITE:outbox.denied (PRINCIPAL holds one ':')
// Exits 1 with the broker's reason when any operation fails.
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.acl.*;
import org.apache.kafka.common.resource.*;

public class Admin {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        List<NewTopic> topics = new ArrayList<>();
        List<AclBinding> acls = new ArrayList<>();
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
                acls.add(new AclBinding(
                    new ResourcePattern(ResourceType.TOPIC, f[4], PatternType.LITERAL),
                    new AccessControlEntry(f[1] + ":" + f[2], "*", AclOperation.fromString(f[3]),
                                           f[0].equals("allow") ? AclPermissionType.ALLOW
                                                                : AclPermissionType.DENY)));
                break;
            default:
                System.err.println("Admin: unknown operation " + args[i]);
                System.exit(2);
            }
        }
        try (AdminClient a = AdminClient.create(p)) {
            if (!topics.isEmpty()) a.createTopics(topics).all().get();
            if (!acls.isEmpty()) a.createAcls(acls).all().get();
        } catch (Exception e) {
            System.err.println("Admin: " + e.getMessage());
            System.exit(1);
        }
    }
}
