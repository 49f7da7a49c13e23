// Java's own reading of bytes as a String, the oracle of tests/protocol/test_strings.py: each stdin
// line is hex bytes; each stdout line is the UTF-16 code units of new String(bytes, UTF_8), in hex,
// which is how Kafka's Readable.readString and Utils.utf8 read a string's bytes.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.StringJoiner;

public class JavaStrings {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        StringBuilder out = new StringBuilder();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String text = new String(HexFormat.of().parseHex(line), StandardCharsets.UTF_8);
            StringJoiner units = new StringJoiner(" ");
            for (int i = 0; i < text.length(); i++) units.add(Integer.toHexString(text.charAt(i)));
            out.append(units).append('\n');
        }
        System.out.print(out);
    }
}
