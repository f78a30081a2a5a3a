package outboxd.test;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.Message;
import com.google.protobuf.util.JsonFormat;
import io.apicurio.registry.serde.avro.AvroKafkaDeserializer;
import io.apicurio.registry.serde.jsonschema.JsonSchemaKafkaDeserializer;
import io.apicurio.registry.serde.protobuf.ProtobufKafkaDeserializer;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import org.apache.avro.generic.GenericContainer;
import org.apache.avro.generic.GenericData;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Deserializer;

/**
 * The consumer of tests/e2e/registry.sh: reads topics from the beginning
 * with a KafkaConsumer and hands each value to the Apicurio deserializer a
 * consumer of that topic would configure (Avro, JSON Schema or Protobuf,
 * reading the Confluent wire format: magic byte 0, a 4-byte schema id,
 * Protobuf's message indexes), exactly as KafkaConsumer does with a
 * configured value.deserializer. Prints one JSON line per record:
 * {"topic", "partition", "offset", "key", "headers", "schema_id", "value"}
 * (headers: name to UTF-8 text, the last of a name) with the
 * decoded value as JSON, or "error" instead of "value" when the
 * deserializer refused it.
 *
 * Usage: Decode BOOTSTRAP REGISTRY_URL COUNT TIMEOUT_S TOPIC=FORMAT...
 * REGISTRY_URL is the registry's core API (Apicurio 3:
 * http://HOST:PORT/apis/registry/v3). FORMAT: avro, json or protobuf.
 * Stops once COUNT records were read, or exits 3 at the deadline with what
 * it read printed.
 */
public final class Decode {
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            System.err.println("usage: Decode BOOTSTRAP REGISTRY_URL COUNT TIMEOUT_S TOPIC=FORMAT...");
            System.exit(2);
        }
        int want = Integer.parseInt(args[2]);
        long deadline = System.nanoTime() + Long.parseLong(args[3]) * 1_000_000_000L;
        Map<String, Deserializer<?>> byTopic = new HashMap<>();
        List<String> topics = new ArrayList<>();
        for (int i = 4; i < args.length; i++) {
            String[] tf = args[i].split("=", 2);
            byTopic.put(tf[0], deserializer(tf[1], args[1]));
            topics.add(tf[0]);
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("group.id", "outboxd-registry-test-" + UUID.randomUUID());
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("isolation.level", "read_committed");
        int got = 0;
        try (KafkaConsumer<byte[], byte[]> c =
                 new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.subscribe(topics);
            while (got < want && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    System.out.println(line(r, byTopic.get(r.topic())));
                    got++;
                }
            }
        }
        System.out.flush();
        // The serdes' shared Vert.x keeps non-daemon threads: exit explicitly.
        System.exit(got >= want ? 0 : 3);
    }

    private static Deserializer<?> deserializer(String format, String url) {
        Map<String, Object> cfg = new HashMap<>();
        cfg.put("apicurio.registry.url", url);
        // The Confluent framing (magic byte, 4-byte id); the id the
        // Confluent-compatible API gave out is the schema's content id.
        cfg.put("apicurio.registry.id-handler", "io.apicurio.registry.serde.Default4ByteIdHandler");
        cfg.put("apicurio.registry.use-id", "contentId");
        cfg.put("apicurio.registry.headers.enabled", false);
        Deserializer<?> d;
        switch (format) {
            case "avro" -> d = new AvroKafkaDeserializer<>();
            case "json" -> {
                cfg.put("apicurio.registry.serde.validation-enabled", true);
                d = new JsonSchemaKafkaDeserializer<>();
            }
            case "protobuf" -> {
                cfg.put("apicurio.registry.serde.read-indexes", true);
                cfg.put("apicurio.registry.serde.read-type-ref", false);
                cfg.put("apicurio.registry.deserializer.value.return-class",
                        "outboxd.test.proto.ShipmentProto$Shipment");
                d = new ProtobufKafkaDeserializer<>();
            }
            default -> throw new IllegalArgumentException("unknown format " + format);
        }
        d.configure(cfg, false);
        return d;
    }

    private static String line(ConsumerRecord<byte[], byte[]> r, Deserializer<?> d) throws Exception {
        ObjectNode o = JSON.createObjectNode();
        o.put("topic", r.topic());
        o.put("partition", r.partition());
        o.put("offset", r.offset());
        o.put("key", r.key() == null ? null : new String(r.key(), StandardCharsets.UTF_8));
        ObjectNode h = o.putObject("headers");
        for (var header : r.headers())
            h.put(header.key(),
                  header.value() == null ? null : new String(header.value(), StandardCharsets.UTF_8));
        byte[] v = r.value();
        if (v == null) {
            o.putNull("value");
            return JSON.writeValueAsString(o);
        }
        if (v.length >= 5 && v[0] == 0) o.put("schema_id", ByteBuffer.wrap(v, 1, 4).getInt());
        try {
            Object value = d.deserialize(r.topic(), r.headers(), v);
            o.set("value", JSON.readTree(toJson(value)));
        } catch (RuntimeException e) {
            o.put("error", String.valueOf(e.getMessage()));
        }
        return JSON.writeValueAsString(o);
    }

    private static String toJson(Object value) throws Exception {
        if (value instanceof Message m) return JsonFormat.printer().print(m);
        if (value instanceof GenericContainer) return GenericData.get().toString(value);
        return JSON.writeValueAsString(value);
    }
}
