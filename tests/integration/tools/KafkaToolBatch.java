// Runs several of Apache Kafka's own command-line tools in ONE JVM, one after the other, for the tool tests
// (tests/integration/tools/kafka_tools.py compiles it once with javac and runs it with Kafka 3.9.1's jars on the classpath,
// java -cp '<classes>:<libs>/*' KafkaToolBatch <commands.json>; without a javac, as a single-file program:
// java -cp '<libs>/*' KafkaToolBatch.java <commands.json>). A JVM start costs seconds on a busy machine; a batch
// pays it once.
//
// Input: a JSON array of {"main": "<class>", "args": [...], "stdin": "<text>"}. Output (stdout): a JSON array of
// {"code": <exit status>, "stdout": "...", "stderr": "..."}, one per command. Each tool's Exit.exit/halt is turned
// into an exception (Kafka's Exit procedures, as Kafka's own tool tests do), System.out/err go to per-command
// buffers (through one switching stream installed before any tool class loads, so Scala's Console sees it too),
// and System.in is the command's "stdin".
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.utils.Exit;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

public class KafkaToolBatch {
    static final class ExitCalled extends Error {
        final int code;
        ExitCalled(int code) { super("exit " + code, null, false, false); this.code = code; }
    }

    static final class Switch extends OutputStream {
        volatile OutputStream target = new ByteArrayOutputStream();
        @Override public void write(int b) { try { target.write(b); } catch (java.io.IOException e) { throw new RuntimeException(e); } }
        @Override public void write(byte[] b, int off, int len) { try { target.write(b, off, len); } catch (java.io.IOException e) { throw new RuntimeException(e); } }
    }

    static volatile Integer exitCode;
    static final List<Runnable> hooks = new ArrayList<>();

    public static void main(String[] argv) throws Exception {
        PrintStream realOut = System.out;
        Switch out = new Switch();
        Switch err = new Switch();
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        // The first exit ends the command as a real exit would: its status counts, and whatever the unwinding
        // prints afterwards (a tool catching Throwable, a second exit) is dropped.
        Exit.Procedure exit = (code, message) -> {
            if (exitCode == null) {
                exitCode = code;
                out.target = OutputStream.nullOutputStream();
                err.target = OutputStream.nullOutputStream();
            }
            throw new ExitCalled(code);
        };
        Exit.setExitProcedure(exit);
        Exit.setHaltProcedure(exit);
        // shutdown hooks run when the command ends, as a JVM runs them when it exits (VerifiableProducer flushes
        // and reports its last acknowledgements in one)
        Exit.setShutdownHookAdder((name, runnable) -> hooks.add(runnable));

        ObjectMapper mapper = new ObjectMapper();
        JsonNode commands = mapper.readTree(new File(argv[0]));
        ArrayNode results = mapper.createArrayNode();
        for (JsonNode cmd : commands) {
            List<String> args = new ArrayList<>();
            cmd.get("args").forEach(a -> args.add(a.asText()));
            ByteArrayOutputStream stdout = new ByteArrayOutputStream();
            ByteArrayOutputStream stderr = new ByteArrayOutputStream();
            out.target = stdout;
            err.target = stderr;
            String stdin = cmd.has("stdin") ? cmd.get("stdin").asText() : "";
            System.setIn(new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8)));
            int code = 0;
            exitCode = null;
            hooks.clear();
            try {
                if (cmd.get("main").asText().equals("sleep")) {  // let a broker apply what the last command changed
                    Thread.sleep(Long.parseLong(args.get(0)));
                } else {
                    Class.forName(cmd.get("main").asText()).getMethod("main", String[].class)
                        .invoke(null, (Object) args.toArray(new String[0]));
                }
            } catch (InvocationTargetException e) {
                Throwable cause = e.getCause();
                if (cause instanceof ExitCalled) {
                    code = ((ExitCalled) cause).code;
                } else {
                    cause.printStackTrace(System.err);
                    code = 1;
                }
            } catch (ExitCalled e) {
                code = e.code;
            }
            if (exitCode != null) {
                code = exitCode;
            }
            out.target = stdout;
            err.target = stderr;
            for (Runnable hook : hooks) {
                try {
                    hook.run();
                } catch (Throwable t) {
                    t.printStackTrace(System.err);
                }
            }
            hooks.clear();
            System.out.flush();
            System.err.flush();
            ObjectNode r = results.addObject();
            r.put("code", code);
            r.put("stdout", stdout.toString(StandardCharsets.UTF_8));
            r.put("stderr", stderr.toString(StandardCharsets.UTF_8));
        }
        out.target = new ByteArrayOutputStream();
        err.target = new ByteArrayOutputStream();
        realOut.print(mapper.writeValueAsString(results));
        realOut.flush();
        Runtime.getRuntime().halt(0);
    }
}
