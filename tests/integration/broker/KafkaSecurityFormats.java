// Kafka 3.9.1's own code for the formats the SCRAM / delegation-token tests compare against (run with the Kafka
// jars on the classpath as a single-file program: java -cp '<libs>/*' KafkaSecurityFormats.java <mode> <args>).
//
//   token-json <tokenId> <owner> <requester> <renewer,...> <issue> <max> <expiry>   DelegationTokenInfoZNode bytes
//   token-parse                       (znode bytes on stdin) -> the TokenInformation fields Kafka reads, one per line
//   hmac <tokenId> <secret>           base64 of DelegationTokenManager.createHmac
//   scram <mechanism> <saltB64> <saltedPasswordB64> <iterations>   ScramCredentialUtils string of the credential
//   scram-parse <credential string>   iterations, salt, stored and server key as Kafka reads them
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;

import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.scram.ScramCredential;
import org.apache.kafka.common.security.scram.internals.ScramCredentialUtils;
import org.apache.kafka.common.security.scram.internals.ScramFormatter;
import org.apache.kafka.common.security.scram.internals.ScramMechanism;
import org.apache.kafka.common.security.token.delegation.TokenInformation;
import org.apache.kafka.common.utils.SecurityUtils;

public class KafkaSecurityFormats {
    public static void main(String[] a) throws Exception {
        Base64.Encoder b64 = Base64.getEncoder();
        switch (a[0]) {
            case "token-json": {
                List<KafkaPrincipal> renewers = new ArrayList<>();
                if (!a[4].isEmpty())
                    for (String r : a[4].split(","))
                        renewers.add(SecurityUtils.parseKafkaPrincipal(r));
                TokenInformation ti = new TokenInformation(a[1], SecurityUtils.parseKafkaPrincipal(a[2]),
                    SecurityUtils.parseKafkaPrincipal(a[3]), renewers, Long.parseLong(a[5]), Long.parseLong(a[6]),
                    Long.parseLong(a[7]));
                byte[] json = kafka.utils.Json.encodeAsBytes(scala.jdk.javaapi.CollectionConverters.asJava(
                    kafka.server.DelegationTokenManagerZk.toJsonCompatibleMap(ti)));
                System.out.print(new String(json, StandardCharsets.UTF_8));
                break;
            }
            case "token-parse": {
                byte[] data = System.in.readAllBytes();
                TokenInformation ti = kafka.server.DelegationTokenManagerZk.fromBytes(data).get();
                System.out.println(ti.tokenId());
                System.out.println(ti.ownerAsString());
                System.out.println(ti.tokenRequester().toString());
                System.out.println(String.join(",", ti.renewersAsString()));
                System.out.println(ti.issueTimestamp());
                System.out.println(ti.maxTimestamp());
                System.out.println(ti.expiryTimestamp());
                break;
            }
            case "hmac":
                System.out.print(b64.encodeToString(kafka.server.DelegationTokenManager.createHmac(a[1], a[2])));
                break;
            case "scram": {
                ScramFormatter f = new ScramFormatter(ScramMechanism.forMechanismName(a[1]));
                ScramCredential c = f.generateCredential(Base64.getDecoder().decode(a[2]),
                    Base64.getDecoder().decode(a[3]), Integer.parseInt(a[4]));
                System.out.print(ScramCredentialUtils.credentialToString(c));
                break;
            }
            case "scram-parse": {
                ScramCredential c = ScramCredentialUtils.credentialFromString(a[1]);
                System.out.println(c.iterations());
                System.out.println(b64.encodeToString(c.salt()));
                System.out.println(b64.encodeToString(c.storedKey()));
                System.out.println(b64.encodeToString(c.serverKey()));
                break;
            }
            default:
                throw new IllegalArgumentException(a[0]);
        }
    }
}
