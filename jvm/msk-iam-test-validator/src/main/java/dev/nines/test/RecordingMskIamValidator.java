package dev.nines.test;

import java.io.IOException;
import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.AppConfigurationEntry;
import org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerToken;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallback;

/**
 * Test only: accepts an AWS MSK IAM token (a base64url SigV4-presigned kafka-cluster:Connect URL)
 * for the session the URL's X-Amz-Date and X-Amz-Expires allow, and appends "epoch-ms token" to
 * the file the JAAS option recordFile names. The signature is not checked: only AWS can.
 */
public class RecordingMskIamValidator implements AuthenticateCallbackHandler {
    private static final DateTimeFormatter AMZ_DATE =
            DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'");
    private Path record;

    @Override
    public void configure(
            Map<String, ?> configs, String mechanism, List<AppConfigurationEntry> jaas) {
        for (AppConfigurationEntry entry : jaas) {
            Object file = entry.getOptions().get("recordFile");
            if (file != null) {
                record = Path.of(file.toString());
            }
        }
        if (record == null) {
            throw new IllegalArgumentException("the JAAS option recordFile is required");
        }
    }

    @Override
    public void handle(Callback[] callbacks) throws IOException, UnsupportedCallbackException {
        for (Callback callback : callbacks) {
            if (!(callback instanceof OAuthBearerValidatorCallback)) {
                throw new UnsupportedCallbackException(callback);
            }
            OAuthBearerValidatorCallback v = (OAuthBearerValidatorCallback) callback;
            String value = v.tokenValue();
            save(System.currentTimeMillis() + " " + value + "\n");
            try {
                v.token(token(value));
            } catch (IllegalArgumentException e) {
                v.error("invalid_token", null, null);
            }
        }
    }

    private synchronized void save(String line) throws IOException {
        Files.writeString(record, line, StandardCharsets.UTF_8,
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    }

    /** The token's session: from the signing time for X-Amz-Expires seconds. */
    static OAuthBearerToken token(String value) {
        String url = new String(Base64.getUrlDecoder().decode(value), StandardCharsets.UTF_8);
        URI uri = URI.create(url);
        if (!"https".equals(uri.getScheme()) || uri.getHost() == null
                || !uri.getHost().startsWith("kafka.") || uri.getRawQuery() == null) {
            throw new IllegalArgumentException("not an MSK IAM URL");
        }
        Map<String, String> query = new HashMap<>();
        for (String pair : uri.getRawQuery().split("&")) {
            String[] kv = pair.split("=", 2);
            query.put(kv[0], kv.length > 1 ? URLDecoder.decode(kv[1], StandardCharsets.UTF_8) : "");
        }
        if (!"kafka-cluster:Connect".equals(query.get("Action"))
                || query.get("X-Amz-Signature") == null) {
            throw new IllegalArgumentException("not a signed kafka-cluster:Connect request");
        }
        long start = LocalDateTime.parse(query.get("X-Amz-Date"), AMZ_DATE)
                .toInstant(ZoneOffset.UTC).toEpochMilli();
        long lifetime = start + 1000L * Long.parseLong(query.get("X-Amz-Expires"));
        // One principal for every token of a region, as MSK gives the IAM identity (the role),
        // not its rotating access key: Kafka refuses a re-authentication that changes principal
        // ("Cannot change principals during re-authentication"), and the test's credentials
        // are a new key every 20 s.
        String[] scope = query.get("X-Amz-Credential").split("/");
        String principal = "msk-iam-" + (scope.length > 2 ? scope[2] : "unknown");
        return new OAuthBearerToken() {
            @Override public String value() { return value; }
            @Override public Set<String> scope() { return Set.of(); }
            @Override public long lifetimeMs() { return lifetime; }
            @Override public String principalName() { return principal; }
            @Override public Long startTimeMs() { return start; }
        };
    }

    @Override
    public void close() {}
}
