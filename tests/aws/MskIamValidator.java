/*
 * tests/aws/MskIamValidator.java - a STAND-IN FOR AMAZON MSK's IAM
 * authentication, for tests/e2e/aws_msk_iam.sh: a Kafka broker's
 * OAUTHBEARER server callback handler (AuthenticateCallbackHandler) that
 * takes an MSK IAM token as MSK's IAM listener does - base64url of a
 * SigV4-presigned GET https://kafka.REGION.amazonaws.com/?Action=
 * kafka-cluster%3AConnect - and verifies its signature independently of
 * outboxd's code (this file's own SigV4, javax.crypto) with a test secret
 * it is given, and its validity period. It is not MSK: it knows one access
 * key id and its secret, it checks
 * no IAM policy, and the principal is the access key id.
 *
 * Broker: listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class
 * = MskIamValidator, its jar on the classpath (kafka.sh's
 * KAFKA_EXTRA_CLASSPATH), the key it knows in the JVM properties
 * msk.standin.akid, msk.standin.secret, msk.standin.region (kafka.sh's
 * KAFKA_JVM_OPTS).
 *
 * Also a command (no broker): java -cp KAFKA_LIBS/*:JAR MskIamValidator
 * AKID SECRET REGION TOKEN prints "valid PRINCIPAL" or "invalid: WHY"
 * (exit 1), for the test's tampered tokens.
 */
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.AppConfigurationEntry;
import org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerExtensionsValidatorCallback;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerToken;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallback;

public class MskIamValidator implements AuthenticateCallbackHandler {
    private String akid, secret, region;

    @Override
    public void configure(Map<String, ?> configs, String mechanism, List<AppConfigurationEntry> jaas) {
        akid = System.getProperty("msk.standin.akid");
        secret = System.getProperty("msk.standin.secret");
        region = System.getProperty("msk.standin.region");
        if (akid == null || secret == null || region == null)
            throw new IllegalArgumentException(
                    "MskIamValidator needs the JVM properties msk.standin.akid, .secret, .region");
    }

    @Override
    public void close() {}

    @Override
    public void handle(Callback[] callbacks) throws UnsupportedCallbackException {
        for (Callback cb : callbacks) {
            if (cb instanceof OAuthBearerValidatorCallback) {
                OAuthBearerValidatorCallback v = (OAuthBearerValidatorCallback) cb;
                try {
                    v.token(validate(akid, secret, region, v.tokenValue(), System.currentTimeMillis()));
                    System.out.println("MskIamValidator: valid token of " + akid);
                } catch (Exception e) {
                    System.out.println("MskIamValidator: invalid token: " + e.getMessage());
                    v.error("invalid_token", null, null);
                }
            } else if (cb instanceof OAuthBearerExtensionsValidatorCallback) {
                OAuthBearerExtensionsValidatorCallback x = (OAuthBearerExtensionsValidatorCallback) cb;
                for (String k : x.inputExtensions().map().keySet()) x.valid(k);
            } else {
                throw new UnsupportedCallbackException(cb);
            }
        }
    }

    /* RFC 3986 unreserved bytes kept, the rest %XX (SigV4's encoding). */
    static String enc(String s) {
        StringBuilder b = new StringBuilder();
        for (byte by : s.getBytes(StandardCharsets.UTF_8)) {
            int c = by & 0xff;
            if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
                    || c == '-' || c == '_' || c == '.' || c == '~')
                b.append((char) c);
            else
                b.append(String.format("%%%02X", c));
        }
        return b.toString();
    }

    static String dec(String s) {
        byte[] out = new byte[s.length()];
        int n = 0;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '%' && i + 2 < s.length()) {
                out[n++] = (byte) Integer.parseInt(s.substring(i + 1, i + 3), 16);
                i += 2;
            } else {
                out[n++] = (byte) c;
            }
        }
        return new String(out, 0, n, StandardCharsets.UTF_8);
    }

    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x & 0xff));
        return s.toString();
    }

    static byte[] hmac(byte[] key, String data) throws Exception {
        Mac m = Mac.getInstance("HmacSHA256");
        m.init(new SecretKeySpec(key, "HmacSHA256"));
        return m.doFinal(data.getBytes(StandardCharsets.UTF_8));
    }

    static String sha256(String s) throws Exception {
        return hex(MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
    }

    static OAuthBearerToken validate(String akid, String secret, String region, String token, long nowMs)
            throws Exception {
        String url = new String(Base64.getUrlDecoder().decode(token), StandardCharsets.UTF_8);
        String host = "kafka." + region + ".amazonaws.com";
        String prefix = "https://" + host + "/?";
        if (!url.startsWith(prefix)) throw new Exception("not a presigned URL of " + host);
        TreeMap<String, String> q = new TreeMap<>();
        for (String kv : url.substring(prefix.length()).split("&")) {
            int eq = kv.indexOf('=');
            if (eq < 0) throw new Exception("a parameter without '=': " + kv);
            q.put(dec(kv.substring(0, eq)), dec(kv.substring(eq + 1)));
        }
        if (!"kafka-cluster:Connect".equals(q.get("Action"))) throw new Exception("Action is not kafka-cluster:Connect");
        if (!"AWS4-HMAC-SHA256".equals(q.get("X-Amz-Algorithm"))) throw new Exception("not AWS4-HMAC-SHA256");
        if (!"host".equals(q.get("X-Amz-SignedHeaders"))) throw new Exception("signed headers are not host");
        String date = q.get("X-Amz-Date"), cred = q.get("X-Amz-Credential"), sig = q.get("X-Amz-Signature");
        if (date == null || cred == null || sig == null || q.get("X-Amz-Expires") == null)
            throw new Exception("X-Amz-Date, -Credential, -Signature or -Expires missing");
        String day = date.substring(0, 8);
        String scope = day + "/" + region + "/kafka-cluster/aws4_request";
        if (!cred.equals(akid + "/" + scope)) throw new Exception("credential " + cred + " is not " + akid + "/" + scope);
        long signed = ZonedDateTime.parse(date, DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmssX"))
                .withZoneSameInstant(ZoneOffset.UTC).toEpochSecond() * 1000;
        long expires = Long.parseLong(q.get("X-Amz-Expires"));
        if (expires < 1 || expires > 900) throw new Exception("X-Amz-Expires " + expires + " is not 1..900");
        if (signed > nowMs + 5 * 60 * 1000) throw new Exception("signed in the future: " + date);
        if (signed + expires * 1000 <= nowMs) throw new Exception("expired: " + date + " + " + expires + " s");
        /* Every parameter but the signature and the unsigned User-Agent. */
        List<String> parts = new ArrayList<>();
        for (Map.Entry<String, String> e : q.entrySet())
            if (!e.getKey().equals("X-Amz-Signature") && !e.getKey().equals("User-Agent"))
                parts.add(enc(e.getKey()) + "=" + enc(e.getValue()));
        Collections.sort(parts);
        String cq = String.join("&", parts);
        byte[] k = hmac(("AWS4" + secret).getBytes(StandardCharsets.UTF_8), day);
        k = hmac(k, region);
        k = hmac(k, "kafka-cluster");
        k = hmac(k, "aws4_request");
        boolean ok = false;
        /* The JS and Java signers hash the empty body; botocore presigns UNSIGNED-PAYLOAD. */
        for (String payload : new String[] {sha256(""), "UNSIGNED-PAYLOAD"}) {
            String creq = "GET\n/\n" + cq + "\nhost:" + host + "\n\nhost\n" + payload;
            String sts = "AWS4-HMAC-SHA256\n" + date + "\n" + scope + "\n" + sha256(creq);
            if (MessageDigest.isEqual(hex(hmac(k, sts)).getBytes(StandardCharsets.US_ASCII),
                    sig.getBytes(StandardCharsets.US_ASCII)))
                ok = true;
        }
        if (!ok) throw new Exception("the signature does not match");
        final long life = signed + expires * 1000, start = signed;
        return new OAuthBearerToken() {
            public String value() { return token; }
            public Set<String> scope() { return Collections.emptySet(); }
            public long lifetimeMs() { return life; }
            public String principalName() { return akid; }
            public Long startTimeMs() { return start; }
        };
    }

    public static void main(String[] a) {
        try {
            System.out.println("valid " + validate(a[0], a[1], a[2], a[3], System.currentTimeMillis()).principalName());
        } catch (Exception e) {
            System.out.println("invalid: " + e.getMessage());
            System.exit(1);
        }
    }
}
